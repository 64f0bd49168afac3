//! What a firing job does to its target.
//!
//! * **Replica mode** (a workload with a scale subresource): set the workload's replicas to the
//!   job's `targetSize`.
//! * **Min-replicas mode** (the target is a `HorizontalPodAutoscaler` or
//!   `HorizontalPodAutoscalerPlus`, or the object is annotated `plimsoll.dev/adjust-hpa-min:
//!   "true"` / `platform.stke/adjust-hpa-min: "true"`): set the autoscaler's `minReplicas` to
//!   `targetSize` clamped to its `maxReplicas` (and to at least 1, the API minimum), and raise the
//!   workload's replicas at once when they are below the new minimum, so capacity arrives
//!   before the autoscaler's next sync. The autoscaler keeps scaling above the minimum.
//!
//! The keep window (`status.scaleUpKeepWindow`) is true from the start of a job that raises
//! the size until a later job lowers it; `hpa-plus` holds off replica-mode targets meanwhile.

use std::collections::BTreeMap;

use crate::api::cron::{ADJUST_HPA_MIN_ANNOTATION, ADJUST_HPA_MIN_ANNOTATION_STKE};

/// How a job applies its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Set the workload's replicas.
    Replicas,
    /// Set the autoscaler's `minReplicas`.
    MinReplicas,
}

/// The annotations [`mode`] reads: what a cut-down copy of a CronHPA keeps of its annotations.
pub const MODE_ANNOTATIONS: [&str; 2] = [ADJUST_HPA_MIN_ANNOTATION, ADJUST_HPA_MIN_ANNOTATION_STKE];

/// Whether [`mode`] reads the annotation `key`.
pub fn is_mode_annotation(key: &str) -> bool {
    MODE_ANNOTATIONS.contains(&key)
}

/// Decides the mode from the target kind and the object's annotations.
pub fn mode(target_kind: &str, annotations: &BTreeMap<String, String>) -> Mode {
    let annotated = MODE_ANNOTATIONS.iter().any(|key| {
        annotations
            .get(*key)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    });
    if annotated
        || target_kind == "HorizontalPodAutoscaler"
        || target_kind == "HorizontalPodAutoscalerPlus"
    {
        Mode::MinReplicas
    } else {
        Mode::Replicas
    }
}

/// What the controller observed about the target just before the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// The workload's current replicas (`spec.replicas` of its scale subresource).
    pub replicas: i32,
    /// In min-replicas mode: the autoscaler's current `minReplicas` (default 1 upstream).
    pub min_replicas: Option<i32>,
    /// In min-replicas mode: the autoscaler's `maxReplicas`.
    pub max_replicas: Option<i32>,
}

/// The writes one run makes, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Effect {
    /// How the size was applied.
    pub mode: Mode,
    /// New `spec.replicas` for the workload, when it changes.
    pub set_replicas: Option<i32>,
    /// New `minReplicas` for the autoscaler, when it changes (min-replicas mode only).
    pub set_min_replicas: Option<i32>,
    /// The size in force before the run (replicas, or the autoscaler's minimum).
    pub size_before: i32,
    /// The size in force after the run.
    pub size_after: i32,
    /// `status.scaleUpKeepWindow` after the run.
    pub keep_window: bool,
    /// A sentence for the condition message and the Event.
    pub reason: String,
}

/// Decides the writes for a job of size `target_size` given what was observed;
/// `keep_window` is the current `status.scaleUpKeepWindow`.
pub fn decide(mode: Mode, target_size: i32, observed: Observed, keep_window: bool) -> Effect {
    let target_size = target_size.max(0);
    match mode {
        Mode::Replicas => {
            let before = observed.replicas;
            Effect {
                mode,
                set_replicas: (before != target_size).then_some(target_size),
                set_min_replicas: None,
                size_before: before,
                size_after: target_size,
                keep_window: next_keep_window(keep_window, before, target_size),
                reason: format!("replicas {before} -> {target_size}"),
            }
        }
        Mode::MinReplicas => {
            let before = observed.min_replicas.unwrap_or(1);
            let mut new_min = target_size.max(1);
            let mut notes = Vec::new();
            if target_size < 1 {
                notes.push("raised to 1, the smallest minReplicas".to_string());
            }
            if let Some(max) = observed.max_replicas
                && new_min > max
            {
                notes.push(format!("clamped to maxReplicas {max}"));
                new_min = max;
            }
            let raise = (observed.replicas < new_min).then_some(new_min);
            let clamping = if notes.is_empty() {
                String::new()
            } else {
                format!(" (targetSize {target_size} {})", notes.join(", "))
            };
            let raising = raise
                .map(|r| format!("; replicas {} -> {r}", observed.replicas))
                .unwrap_or_default();
            let reason = format!("minReplicas {before} -> {new_min}{clamping}{raising}");
            Effect {
                mode,
                set_replicas: raise,
                set_min_replicas: (before != new_min).then_some(new_min),
                size_before: before,
                size_after: new_min,
                keep_window: next_keep_window(keep_window, before, new_min),
                reason,
            }
        }
    }
}

/// The keep-window rule: a run that raises the size opens the window, one that lowers it
/// closes it, one that keeps it leaves the window as it was.
pub fn next_keep_window(current: bool, size_before: i32, size_after: i32) -> bool {
    match size_after.cmp(&size_before) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Equal => current,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn mode_from_kind_and_annotations() {
        let none = annotations(&[]);
        let cases = [
            ("Deployment", none.clone(), Mode::Replicas),
            ("StatefulSet", none.clone(), Mode::Replicas),
            ("HorizontalPodAutoscaler", none.clone(), Mode::MinReplicas),
            ("HorizontalPodAutoscalerPlus", none, Mode::MinReplicas),
            (
                "Deployment",
                annotations(&[(ADJUST_HPA_MIN_ANNOTATION, "true")]),
                Mode::MinReplicas,
            ),
            (
                "Deployment",
                annotations(&[(ADJUST_HPA_MIN_ANNOTATION_STKE, "TRUE")]),
                Mode::MinReplicas,
            ),
            (
                "Deployment",
                annotations(&[(ADJUST_HPA_MIN_ANNOTATION, "false")]),
                Mode::Replicas,
            ),
        ];
        for (kind, annotations, want) in cases {
            assert_eq!(mode(kind, &annotations), want, "{kind} {annotations:?}");
        }
    }

    fn observed(replicas: i32, min: Option<i32>, max: Option<i32>) -> Observed {
        Observed {
            replicas,
            min_replicas: min,
            max_replicas: max,
        }
    }

    #[test]
    fn replica_mode() {
        // (replicas, targetSize, keep before) → (set replicas, keep after)
        let cases = [
            (3, 10, false, Some(10), true),
            (10, 3, true, Some(3), false),
            (5, 5, true, None, true),
            (5, 5, false, None, false),
            (0, 4, false, Some(4), true),
        ];
        for (replicas, size, keep, want_set, want_keep) in cases {
            let e = decide(Mode::Replicas, size, observed(replicas, None, None), keep);
            assert_eq!(e.set_replicas, want_set, "{replicas} -> {size}");
            assert_eq!(e.keep_window, want_keep, "{replicas} -> {size}");
            assert_eq!(e.set_min_replicas, None);
        }
    }

    #[test]
    fn min_replicas_mode_sets_the_minimum_and_raises_replicas() {
        let e = decide(Mode::MinReplicas, 5, observed(3, Some(2), Some(10)), false);
        assert_eq!(e.set_min_replicas, Some(5));
        assert_eq!(e.set_replicas, Some(5));
        assert!(e.keep_window);
        assert_eq!(e.reason, "minReplicas 2 -> 5; replicas 3 -> 5");
    }

    #[test]
    fn min_replicas_mode_leaves_replicas_above_the_minimum() {
        let e = decide(Mode::MinReplicas, 5, observed(8, Some(2), Some(10)), false);
        assert_eq!(e.set_min_replicas, Some(5));
        assert_eq!(e.set_replicas, None);
    }

    #[test]
    fn min_replicas_mode_clamps_to_max_and_to_one() {
        let e = decide(Mode::MinReplicas, 20, observed(3, Some(2), Some(10)), false);
        assert_eq!(e.set_min_replicas, Some(10));
        assert_eq!(e.set_replicas, Some(10));
        assert!(
            e.reason.contains("clamped to maxReplicas 10"),
            "{}",
            e.reason
        );
        let e = decide(Mode::MinReplicas, 0, observed(3, Some(4), Some(10)), true);
        assert_eq!(e.set_min_replicas, Some(1));
        assert!(!e.keep_window, "lowering the minimum closes the window");
        assert!(e.reason.contains("raised to 1"), "{}", e.reason);
    }

    #[test]
    fn keep_window_rule() {
        assert!(next_keep_window(false, 2, 10));
        assert!(!next_keep_window(true, 10, 2));
        assert!(next_keep_window(true, 10, 10));
        assert!(!next_keep_window(false, 10, 10));
    }
}
