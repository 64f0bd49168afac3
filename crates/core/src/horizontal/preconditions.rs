//! Rules 1–4 of a decision: the states in which the metrics are not consulted and the count
//! is held (or brought back into range) as it is.
//!
//! 1. [`ambiguous_selector`]: another autoscaler selects the same pods → hold.
//! 2. [`scaling_disabled`]: the target has 0 replicas that the autoscaler did not put there →
//!    hold (Kubernetes 1.37, KEP-2021: only a `ScaledToZero=True` zero is woken).
//! 3. [`out_of_range`]: current > `maxReplicas` → `maxReplicas`; current < `minReplicas` →
//!    `minReplicas`, as upstream.
//! 4. [`min_available`]: fewer than `minAvailableReplicaPercentage` of the pods are available
//!    (WPA) → hold.
//!
//! [`precheck`] applies them in that order; the first that fires ends the decision.

use jiff::Timestamp;

use super::conditions::{Condition, SCALING_ACTIVE};
use super::history::seconds_between;
use super::limited::{Hold, LimitedBy};
use super::limits::{Bounds, available_percentage};
use super::observation::{Observation, PodPhase};
use super::scale_to_zero::has_podless_metric;
use crate::api::hpa_plus::HorizontalPodAutoscalerPlusSpec;

/// Rules 1–4 in order; `None` when the metrics decide.
pub fn precheck(
    spec: &HorizontalPodAutoscalerPlusSpec,
    observed: &Observation,
    bounds: Bounds,
    now: Timestamp,
) -> Option<Hold> {
    let current = observed.current_replicas;
    ambiguous_selector(observed)
        .or_else(|| scaling_disabled(spec, observed, bounds))
        .or_else(|| out_of_range(current, bounds))
        .or_else(|| min_available(spec, observed, now))
}

/// How many of the other autoscalers an `AmbiguousSelector` message names.
pub const AMBIGUOUS_NAMES_SHOWN: usize = 5;

/// Rule 1: other autoscalers claim the same pods (upstream `AmbiguousSelector`).
pub fn ambiguous_selector(observed: &Observation) -> Option<Hold> {
    if observed.conflicting_autoscalers.is_empty() {
        return None;
    }
    // Named up to a few: every autoscaler in the conflict says it, so a list of all of them
    // would grow with their square (in statuses, logs and memory), and a tenant makes the list.
    let all = &observed.conflicting_autoscalers;
    let shown = all.len().min(AMBIGUOUS_NAMES_SHOWN);
    let more = match all.len() - shown {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    let msg = format!(
        "pods by selector are controlled by multiple autoscalers: {}{more}",
        all[..shown].join(", ")
    );
    Some(Hold {
        value: observed.current_replicas,
        by: LimitedBy::AmbiguousSelector,
        condition: Some(Condition::new(
            SCALING_ACTIVE,
            false,
            "AmbiguousSelector",
            msg.clone(),
        )),
        note: msg,
    })
}

/// Rule 2: a target at zero is woken only when the autoscaler put it there.
///
/// Kubernetes 1.37 (`HPAScaleToZero`, KEP-2021) computes metrics for a target at 0 replicas
/// only when `minReplicas` is 0, a metric can be read without pods, and the HPA's previous
/// status says `ScaledToZero=True`. Any other zero is a person's (`kubectl scale --replicas=0`)
/// and means "autoscaling off" — as before the KEP, when every zero meant that.
pub fn scaling_disabled(
    spec: &HorizontalPodAutoscalerPlusSpec,
    observed: &Observation,
    bounds: Bounds,
) -> Option<Hold> {
    let current = observed.current_replicas;
    let woken = bounds.min == 0 && observed.scaled_to_zero && has_podless_metric(spec);
    if current != 0 || woken {
        return None;
    }
    let msg = "scaling is disabled since the replica count of the target is zero";
    Some(Hold {
        value: current,
        by: LimitedBy::ScalingDisabled,
        note: msg.to_owned(),
        condition: Some(Condition::new(
            SCALING_ACTIVE,
            false,
            "ScalingDisabled",
            msg,
        )),
    })
}

/// Rule 3: a count outside `[minReplicas, maxReplicas]` goes to the nearest bound at once.
pub fn out_of_range(current: i32, bounds: Bounds) -> Option<Hold> {
    let Bounds { min, max } = bounds;
    if current > max {
        Some(Hold {
            value: max,
            by: LimitedBy::MaxReplicas,
            note: format!("Current number of replicas above Spec.MaxReplicas: {current} -> {max}"),
            condition: None,
        })
    } else if current < min {
        Some(Hold {
            value: min,
            by: LimitedBy::MinReplicas,
            note: format!("Current number of replicas below Spec.MinReplicas: {current} -> {min}"),
            condition: None,
        })
    } else {
        None
    }
}

/// Rule 4 (WPA): the share of available pods (running, ready, and past `readinessDelaySeconds`
/// since start) among the pods not being deleted is below `minAvailableReplicaPercentage`.
pub fn min_available(
    spec: &HorizontalPodAutoscalerPlusSpec,
    observed: &Observation,
    now: Timestamp,
) -> Option<Hold> {
    let required = spec.min_available_replica_percentage.filter(|p| *p > 0)?;
    let readiness_delay = spec.readiness_delay_seconds.map_or(0, i64::from);
    let pods = &observed.pods;
    let counted = pods.iter().filter(|p| !p.deleting).count();
    let ready = pods
        .iter()
        .filter(|p| !p.deleting && p.phase == PodPhase::Running && p.ready == Some(true))
        .filter(|p| {
            readiness_delay <= 0
                || p.start_time
                    .is_some_and(|s| seconds_between(s, now) >= readiness_delay as f64)
        })
        .count();
    let pct = available_percentage(ready, counted).unwrap_or(0);
    if pct >= required {
        return None;
    }
    let msg = format!(
        "{pct} % of the pods are available, below minAvailableReplicaPercentage {required} %"
    );
    Some(Hold {
        value: observed.current_replicas,
        by: LimitedBy::MinAvailable,
        condition: Some(Condition::new(
            SCALING_ACTIVE,
            false,
            "NotEnoughAvailablePods",
            msg.clone(),
        )),
        note: msg,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::horizontal::observation::PodSample;

    fn now() -> Timestamp {
        "2026-03-01T12:00:00Z".parse().unwrap()
    }

    fn observed(current: i32) -> Observation {
        Observation {
            current_replicas: current,
            ..Observation::default()
        }
    }

    const BOUNDS: Bounds = Bounds { min: 2, max: 10 };

    #[test]
    fn conflicting_autoscalers_hold_and_are_named() {
        let mut obs = observed(4);
        assert_eq!(ambiguous_selector(&obs), None);
        obs.conflicting_autoscalers = vec!["a".into(), "b".into()];
        let hold = ambiguous_selector(&obs).unwrap();
        assert_eq!((hold.value, hold.by), (4, LimitedBy::AmbiguousSelector));
        assert!(hold.note.ends_with("autoscalers: a, b"), "{}", hold.note);
        assert_eq!(hold.condition.unwrap().reason, "AmbiguousSelector");
    }

    #[test]
    fn a_thousand_conflicting_autoscalers_are_named_five_and_counted() {
        let mut obs = observed(4);
        obs.conflicting_autoscalers = (0..1000)
            .map(|i| format!("{i:04}{}", "x".repeat(249)))
            .collect();
        let hold = ambiguous_selector(&obs).unwrap();
        assert!(hold.note.ends_with(" and 995 more"), "{}", hold.note);
        assert!(hold.note.contains(&obs.conflicting_autoscalers[4]));
        assert!(!hold.note.contains(&obs.conflicting_autoscalers[5]));
        assert!(hold.note.len() < 2 * 1024, "{}", hold.note.len());
        assert_eq!(hold.condition.unwrap().message, hold.note);
    }

    #[test]
    fn only_a_zero_the_autoscaler_made_is_woken() {
        use crate::api::hpa_plus::{MetricSourceType, MetricSpec};
        // Vectors from Kubernetes 1.37's rule (KEP-2021, horizontal.go): metrics are computed
        // at 0 replicas only with minReplicas 0, an Object/External metric and a previous
        // `ScaledToZero=True`; every other zero is `ScalingDisabled` (TestZeroReplicas).
        let external = HorizontalPodAutoscalerPlusSpec {
            min_replicas: Some(0),
            metrics: vec![MetricSpec {
                type_: MetricSourceType::External,
                ..MetricSpec::default()
            }],
            ..HorizontalPodAutoscalerPlusSpec::default()
        };
        let resource_only = HorizontalPodAutoscalerPlusSpec::default();
        let zero = Bounds { min: 0, max: 3 };
        let at_zero = |scaled: bool| Observation {
            scaled_to_zero: scaled,
            ..observed(0)
        };
        // (spec, bounds, observation, held)
        let cases = [
            (&resource_only, BOUNDS, at_zero(false), true),
            (&resource_only, BOUNDS, at_zero(true), true),
            (&external, zero, at_zero(false), true),
            (&external, zero, at_zero(true), false),
            // minReplicas raised above 0 since: a zero is then always off, as before the KEP.
            (&external, BOUNDS, at_zero(true), true),
            (&resource_only, zero, at_zero(true), true),
            (&external, zero, observed(1), false),
            (&resource_only, BOUNDS, observed(1), false),
        ];
        for (i, (spec, bounds, obs, held)) in cases.iter().enumerate() {
            let hold = scaling_disabled(spec, obs, *bounds);
            assert_eq!(hold.is_some(), *held, "case {i}");
            if let Some(hold) = hold {
                assert_eq!((hold.value, hold.by), (0, LimitedBy::ScalingDisabled));
                let c = hold.condition.unwrap();
                assert_eq!((c.status, c.reason), (false, "ScalingDisabled"));
            }
        }
    }

    #[test]
    fn out_of_range_goes_to_the_nearest_bound() {
        assert_eq!(out_of_range(12, BOUNDS).unwrap().value, 10);
        assert_eq!(out_of_range(1, BOUNDS).unwrap().by, LimitedBy::MinReplicas);
        assert_eq!(out_of_range(2, BOUNDS), None);
        assert_eq!(out_of_range(10, BOUNDS), None);
    }

    #[test]
    fn min_available_counts_ready_pods_past_the_readiness_delay() {
        let young = PodSample {
            start_time: Some(now() - jiff::SignedDuration::from_secs(10)),
            ..PodSample::default()
        };
        let old = PodSample {
            start_time: Some(now() - jiff::SignedDuration::from_secs(600)),
            ..PodSample::default()
        };
        let mut obs = observed(2);
        obs.pods = vec![young, old];
        let mut spec = HorizontalPodAutoscalerPlusSpec {
            min_available_replica_percentage: Some(60),
            ..HorizontalPodAutoscalerPlusSpec::default()
        };
        assert_eq!(min_available(&spec, &obs, now()), None, "2 of 2 ready");
        spec.readiness_delay_seconds = Some(60);
        let hold = min_available(&spec, &obs, now()).unwrap();
        assert_eq!(hold.by, LimitedBy::MinAvailable);
        assert!(hold.note.starts_with("50 % of the pods"), "{}", hold.note);
        spec.min_available_replica_percentage = Some(50);
        assert_eq!(min_available(&spec, &obs, now()), None, "50 % is enough");
    }

    #[test]
    fn the_first_rule_that_fires_wins() {
        let mut obs = observed(0);
        obs.conflicting_autoscalers = vec!["other".into()];
        let spec = HorizontalPodAutoscalerPlusSpec::default();
        assert_eq!(
            precheck(&spec, &obs, BOUNDS, now()).unwrap().by,
            LimitedBy::AmbiguousSelector
        );
        obs.conflicting_autoscalers.clear();
        assert_eq!(
            precheck(&spec, &obs, BOUNDS, now()).unwrap().by,
            LimitedBy::ScalingDisabled
        );
        obs.current_replicas = 5;
        assert_eq!(precheck(&spec, &obs, BOUNDS, now()), None);
    }
}
