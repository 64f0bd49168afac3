//! Rule 11: the gates between a decided count and a write of the scale subresource, in
//! precedence order: `paused` (the count is reported as desired), a holding
//! `CronHorizontalPodAutoscaler` and `pauseDuringRollout` (the current count stays desired),
//! `dryRun` (the count is reported as desired). A gated decision keeps its reason and says
//! what was not applied.

use super::conditions::{Condition, DRY_RUN, PAUSED};
use super::limited::LimitedBy;
use super::observation::Observation;
use crate::api::hpa_plus::HorizontalPodAutoscalerPlusSpec;

/// A gate that stops a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gate {
    /// `paused`, `cronHold`, `rollout` or `dryRun`.
    pub by: LimitedBy,
    /// The count to report as desired.
    pub desired: i32,
    /// Why, for the decision's reason.
    pub why: String,
}

/// Whether a decision moving `current` to `desired` wants a write at all: not when it keeps the
/// count, nor when the ambiguous-selector or scaled-to-zero rule held it.
pub fn wants_write(current: i32, desired: i32, limited_by: Option<LimitedBy>) -> bool {
    desired != current
        && !matches!(
            limited_by,
            Some(LimitedBy::AmbiguousSelector | LimitedBy::ScalingDisabled)
        )
}

/// The first gate that stops writing `desired` over `current`, if any.
pub fn write_gate(
    spec: &HorizontalPodAutoscalerPlusSpec,
    observed: &Observation,
    current: i32,
    desired: i32,
) -> Option<Gate> {
    let gate = |by, desired, why: &str| {
        Some(Gate {
            by,
            desired,
            why: why.to_owned(),
        })
    };
    if spec.paused {
        gate(LimitedBy::Paused, desired, "the autoscaler is paused")
    } else if let Some(holder) = &observed.held_by {
        gate(
            LimitedBy::CronHold,
            current,
            &format!("{holder} holds the target's replicas"),
        )
    } else if spec.pause_during_rollout && observed.rollout.is_some_and(|r| r.in_progress()) {
        gate(LimitedBy::Rollout, current, "the target is rolling out")
    } else if spec.dry_run {
        gate(LimitedBy::DryRun, desired, "dry run")
    } else {
        None
    }
}

/// The `Paused` and `DryRun` conditions of `spec`.
pub fn gate_conditions(spec: &HorizontalPodAutoscalerPlusSpec) -> [Condition; 2] {
    let paused = if spec.paused {
        Condition::new(
            PAUSED,
            true,
            "Paused",
            "scaling is paused; decisions are reported, not applied",
        )
    } else {
        Condition::new(PAUSED, false, "NotPaused", "scaling is not paused")
    };
    let dry_run = if spec.dry_run {
        Condition::new(
            DRY_RUN,
            true,
            "DryRunEnabled",
            "scaling changes are computed but not applied",
        )
    } else {
        Condition::new(
            DRY_RUN,
            false,
            "DryRunDisabled",
            "scaling changes are applied",
        )
    };
    [paused, dry_run]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::horizontal::observation::RolloutState;

    #[test]
    fn holds_and_unchanged_counts_want_no_write() {
        assert!(wants_write(3, 4, None));
        assert!(wants_write(3, 4, Some(LimitedBy::Policy)));
        assert!(!wants_write(3, 3, None));
        assert!(!wants_write(3, 4, Some(LimitedBy::AmbiguousSelector)));
        assert!(!wants_write(0, 1, Some(LimitedBy::ScalingDisabled)));
    }

    #[test]
    fn gates_apply_in_precedence_order() {
        let mut spec = HorizontalPodAutoscalerPlusSpec {
            paused: true,
            dry_run: true,
            pause_during_rollout: true,
            ..HorizontalPodAutoscalerPlusSpec::default()
        };
        let mut obs = Observation {
            held_by: Some("CronHorizontalPodAutoscaler/nightly".into()),
            rollout: Some(RolloutState {
                generation: 2,
                observed_generation: 1,
                updated_replicas: 0,
                desired_replicas: 3,
            }),
            ..Observation::default()
        };
        let by = |spec: &_, obs: &_| write_gate(spec, obs, 3, 6).map(|g| (g.by, g.desired));
        assert_eq!(by(&spec, &obs), Some((LimitedBy::Paused, 6)));
        spec.paused = false;
        assert_eq!(by(&spec, &obs), Some((LimitedBy::CronHold, 3)));
        obs.held_by = None;
        assert_eq!(by(&spec, &obs), Some((LimitedBy::Rollout, 3)));
        obs.rollout = Some(RolloutState::default());
        assert_eq!(by(&spec, &obs), Some((LimitedBy::DryRun, 6)));
        spec.dry_run = false;
        assert_eq!(by(&spec, &obs), None);
    }

    #[test]
    fn conditions_report_paused_and_dry_run() {
        let spec = HorizontalPodAutoscalerPlusSpec {
            dry_run: true,
            ..HorizontalPodAutoscalerPlusSpec::default()
        };
        let [paused, dry_run] = gate_conditions(&spec);
        assert_eq!((paused.status, paused.reason), (false, "NotPaused"));
        assert_eq!((dry_run.status, dry_run.reason), (true, "DryRunEnabled"));
    }
}
