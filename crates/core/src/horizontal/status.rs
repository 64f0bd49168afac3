//! Turning a [`Decision`] into the object's status, and whether a status is worth writing.
//!
//! The controller writes status only when it [`changed`]; [`status_after`] is deterministic for
//! the same decision, previous status and time, so comparing the result with the old status is
//! enough. The time of the last decision alone is not a change (otherwise every evaluation
//! would write, and every write would wake every watcher). A native `autoscaling/v2` HPA gets
//! the [`native_subset`] of the status; its decision memory goes into an annotation instead
//! ([`super::memory`]). The memory is part of the comparison: a status whose memory moved is
//! written, so a successor always reads the memory of the last evaluation.
//!
//! `reference` (the REFERENCE column of `kubectl get hpaplus`) comes from the spec alone, so every
//! status this module builds carries it: after a decision and after a failure before one (an
//! invalid spec, a target that does not exist), whatever else is wrong.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions::{Condition, merge};
use super::decision::Decision;
use crate::api::hpa_plus::{
    Countdown, HorizontalPodAutoscalerCondition, HorizontalPodAutoscalerPlusSpec,
    HorizontalPodAutoscalerPlusStatus, LastDecision, MetricProposal,
};

/// The status after `decision`, written at `now` for `generation`. `scaled` says whether the
/// scale write happened (it sets `lastScaleTime`).
pub fn status_after(
    spec: &HorizontalPodAutoscalerPlusSpec,
    previous: Option<&HorizontalPodAutoscalerPlusStatus>,
    decision: &Decision,
    generation: Option<i64>,
    scaled: bool,
    now: Timestamp,
) -> HorizontalPodAutoscalerPlusStatus {
    let old_conditions = previous
        .map(|p| p.conditions.as_slice())
        .unwrap_or_default();
    let last_scale_time = if scaled {
        Some(Time(now))
    } else {
        previous.and_then(|p| p.last_scale_time.clone())
    };
    let summary: Vec<&str> = decision
        .proposals
        .iter()
        .map(|p| p.summary.as_str())
        .collect();
    HorizontalPodAutoscalerPlusStatus {
        observed_generation: generation,
        last_scale_time,
        current_replicas: decision.current_replicas,
        desired_replicas: decision.desired_replicas,
        current_metrics: decision
            .proposals
            .iter()
            .filter_map(|p| p.status.clone())
            .collect(),
        conditions: merge(old_conditions, &decision.conditions, now),
        reference: reference(spec),
        targets_summary: Some(summary.join(", ")),
        last_decision: Some(LastDecision {
            time: Some(Time(now)),
            proposals: decision
                .proposals
                .iter()
                .map(|p| MetricProposal {
                    metric: p.metric.clone(),
                    replicas: p.replicas,
                    value: p.value.map(|v| format!("{v}")),
                    // An adapter's or a Prometheus server's words, and names the tenant
                    // chose: shown by `kubectl describe` and kept in etcd and the cache.
                    error: p.error.as_deref().map(shown),
                })
                .collect(),
            recommended_replicas: decision.recommended_replicas,
            desired_replicas: decision.desired_replicas,
            limited_by: decision.limited_by.map(|l| l.as_str().to_owned()),
            reason: shown(&decision.reason),
            countdowns: decision
                .countdowns
                .iter()
                .map(|c| Countdown {
                    transition: c.transition.to_owned(),
                    seconds_left: c.seconds_left,
                })
                .collect(),
        }),
        // The caller replaces it with the memory after this decision.
        memory: previous.and_then(|p| p.memory.clone()),
        // Tuning writes its own part; a scaling decision keeps it.
        min_replicas_tuning: previous.and_then(|p| p.min_replicas_tuning.clone()),
        // Prediction writes its own part too.
        predictive: previous.and_then(|p| p.predictive.clone()),
    }
}

/// `text` as a status shows it: escaped and cut like a condition's message.
fn shown(text: &str) -> String {
    crate::printable::message(text, crate::printable::MAX_CONDITION_MESSAGE_BYTES)
}

/// The scale target as `kubectl get` shows it, `Kind/name` (`Deployment/web`); `None` only when
/// the spec names no target at all.
pub fn reference(spec: &HorizontalPodAutoscalerPlusSpec) -> Option<String> {
    let target = &spec.scale_target_ref;
    if target.kind.is_empty() && target.name.is_empty() {
        return None;
    }
    Some(format!("{}/{}", target.kind, target.name))
}

/// Whether `new` differs from `old` in anything but the decision's timestamp and a later time of
/// the memory's newest recommendation ([`super::memory::same_but_newest_time`]: at a steady
/// count nothing else changes, and a successor restores it). Every field is named, so one added
/// to the status cannot be left out; nothing is cloned (this runs on every evaluation).
pub fn changed(
    old: Option<&HorizontalPodAutoscalerPlusStatus>,
    new: &HorizontalPodAutoscalerPlusStatus,
) -> bool {
    let Some(old) = old else { return true };
    let HorizontalPodAutoscalerPlusStatus {
        observed_generation,
        last_scale_time,
        current_replicas,
        desired_replicas,
        current_metrics,
        conditions,
        reference,
        targets_summary,
        last_decision,
        memory,
        min_replicas_tuning,
        predictive,
    } = old;
    *observed_generation != new.observed_generation
        || *last_scale_time != new.last_scale_time
        || *current_replicas != new.current_replicas
        || *desired_replicas != new.desired_replicas
        || *current_metrics != new.current_metrics
        || *conditions != new.conditions
        || *reference != new.reference
        || *targets_summary != new.targets_summary
        || match (memory, &new.memory) {
            (Some(a), Some(b)) => !super::memory::same_but_newest_time(a, b),
            (a, b) => a != b,
        }
        || *min_replicas_tuning != new.min_replicas_tuning
        || *predictive != new.predictive
        || match (last_decision, &new.last_decision) {
            (Some(a), Some(b)) => decision_changed(a, b),
            (None, None) => false,
            _ => true,
        }
}

/// [`changed`] for the last decision: anything but its time.
fn decision_changed(old: &LastDecision, new: &LastDecision) -> bool {
    let LastDecision {
        time: _,
        proposals,
        recommended_replicas,
        desired_replicas,
        limited_by,
        reason,
        countdowns,
    } = old;
    *proposals != new.proposals
        || *recommended_replicas != new.recommended_replicas
        || *desired_replicas != new.desired_replicas
        || *limited_by != new.limited_by
        || *reason != new.reason
        || *countdowns != new.countdowns
}

/// The part of an HPA+ status that `autoscaling/v2` has.
pub fn native_subset(
    status: &HorizontalPodAutoscalerPlusStatus,
) -> HorizontalPodAutoscalerPlusStatus {
    HorizontalPodAutoscalerPlusStatus {
        reference: None,
        targets_summary: None,
        last_decision: None,
        memory: None,
        min_replicas_tuning: None,
        predictive: None,
        current_metrics: status
            .current_metrics
            .iter()
            .map(crate::api::hpa_plus::native_metric_status)
            .collect(),
        ..status.clone()
    }
}

/// `previous` with `conditions` merged in at `now` and the [`reference()`] of `spec` (for failures
/// before or instead of a decision: the REFERENCE column is filled even then).
pub fn with_conditions(
    spec: &HorizontalPodAutoscalerPlusSpec,
    previous: Option<&HorizontalPodAutoscalerPlusStatus>,
    conditions: &[Condition],
    now: Timestamp,
) -> HorizontalPodAutoscalerPlusStatus {
    let mut status = previous.cloned().unwrap_or_default();
    let old: Vec<HorizontalPodAutoscalerCondition> = status.conditions.clone();
    status.conditions = merge(&old, conditions, now);
    status.reference = reference(spec);
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::horizontal::conditions::SCALING_ACTIVE;

    fn status(time: i64, desired: i32) -> HorizontalPodAutoscalerPlusStatus {
        HorizontalPodAutoscalerPlusStatus {
            desired_replicas: desired,
            last_decision: Some(LastDecision {
                time: Some(Time(Timestamp::from_second(time).unwrap())),
                desired_replicas: desired,
                ..LastDecision::default()
            }),
            ..HorizontalPodAutoscalerPlusStatus::default()
        }
    }

    #[test]
    fn only_the_decision_time_changing_is_not_a_change() {
        assert!(!changed(Some(&status(1, 3)), &status(2, 3)));
        assert!(changed(Some(&status(1, 3)), &status(1, 4)));
        assert!(changed(None, &status(1, 3)));
    }

    /// A field name and how to change it.
    type Mutation = (&'static str, fn(&mut HorizontalPodAutoscalerPlusStatus));

    #[test]
    fn a_change_of_any_other_field_is_a_change() {
        let base = status(1, 3);
        let mutations: Vec<Mutation> = vec![
            ("observedGeneration", |s| s.observed_generation = Some(2)),
            ("lastScaleTime", |s| {
                s.last_scale_time = Some(Time(Timestamp::UNIX_EPOCH));
            }),
            ("currentReplicas", |s| s.current_replicas = 9),
            ("desiredReplicas", |s| s.desired_replicas = 9),
            ("currentMetrics", |s| {
                s.current_metrics
                    .push(crate::api::hpa_plus::MetricStatus::default());
            }),
            ("conditions", |s| {
                s.conditions
                    .push(HorizontalPodAutoscalerCondition::default());
            }),
            ("reference", |s| s.reference = Some("Deployment/web".into())),
            ("targetsSummary", |s| s.targets_summary = Some("1/2".into())),
            ("memory", |s| {
                s.memory = Some(crate::api::hpa_plus::DecisionMemory::default());
            }),
            ("minReplicasTuning", |s| {
                s.min_replicas_tuning =
                    Some(crate::api::hpa_plus::MinReplicasTuningStatus::default());
            }),
            ("predictive", |s| {
                s.predictive = Some(crate::api::hpa_plus::PredictiveStatus::default());
            }),
            ("lastDecision", |s| s.last_decision = None),
            ("lastDecision.proposals", |s| {
                if let Some(d) = s.last_decision.as_mut() {
                    d.proposals.push(MetricProposal::default());
                }
            }),
            ("lastDecision.recommendedReplicas", |s| {
                if let Some(d) = s.last_decision.as_mut() {
                    d.recommended_replicas = Some(4);
                }
            }),
            ("lastDecision.limitedBy", |s| {
                if let Some(d) = s.last_decision.as_mut() {
                    d.limited_by = Some("maxReplicas".into());
                }
            }),
            ("lastDecision.reason", |s| {
                if let Some(d) = s.last_decision.as_mut() {
                    d.reason = "why".into();
                }
            }),
            ("lastDecision.countdowns", |s| {
                if let Some(d) = s.last_decision.as_mut() {
                    d.countdowns.push(Countdown::default());
                }
            }),
        ];
        for (field, mutate) in mutations {
            let mut new = base.clone();
            mutate(&mut new);
            assert!(changed(Some(&base), &new), "{field}");
            assert!(changed(Some(&new), &base), "{field}, the other way");
        }
    }

    #[test]
    fn native_subset_drops_the_additions() {
        let mut s = status(1, 3);
        s.reference = Some("Deployment/web".into());
        let sub = native_subset(&s);
        assert!(sub.reference.is_none() && sub.last_decision.is_none());
        assert_eq!(sub.desired_replicas, 3);
    }

    #[test]
    fn conditions_merge_into_the_previous_status() {
        let c = [Condition::new(SCALING_ACTIVE, false, "InvalidSpec", "bad")];
        let at = Timestamp::from_second(5).unwrap();
        let spec = HorizontalPodAutoscalerPlusSpec::default();
        let s = with_conditions(&spec, Some(&status(1, 3)), &c, at);
        assert_eq!(s.desired_replicas, 3, "the rest of the status is kept");
        assert_eq!(s.conditions.len(), 1);
        assert_eq!(s.conditions[0].reason.as_deref(), Some("InvalidSpec"));
        assert!(changed(Some(&status(1, 3)), &s));
        assert!(!changed(
            Some(&s),
            &with_conditions(&spec, Some(&s), &c, at)
        ));
    }

    fn targeting(kind: &str, name: &str) -> HorizontalPodAutoscalerPlusSpec {
        let mut spec = HorizontalPodAutoscalerPlusSpec::default();
        spec.scale_target_ref.kind = kind.to_owned();
        spec.scale_target_ref.name = name.to_owned();
        spec
    }

    #[test]
    fn a_failure_before_any_decision_still_fills_the_reference() {
        // An invalid spec on a new object: nothing was ever decided, and REFERENCE still shows
        // the target.
        let mut spec = targeting("Deployment", "web");
        spec.min_replicas = Some(10);
        spec.max_replicas = 2;
        assert!(spec.validate().is_err());
        let c = [Condition::new(SCALING_ACTIVE, false, "InvalidSpec", "bad")];
        let at = Timestamp::from_second(5).unwrap();
        let s = with_conditions(&spec, None, &c, at);
        assert_eq!(s.reference.as_deref(), Some("Deployment/web"));
        // A status written before the target was renamed follows the spec.
        let renamed = with_conditions(&targeting("StatefulSet", "db"), Some(&s), &c, at);
        assert_eq!(renamed.reference.as_deref(), Some("StatefulSet/db"));
        assert!(changed(Some(&s), &renamed));
    }

    #[test]
    fn the_reference_is_kind_slash_name_and_absent_without_a_target() {
        assert_eq!(
            reference(&targeting("Deployment", "web")).as_deref(),
            Some("Deployment/web")
        );
        assert_eq!(reference(&targeting("", "")), None);
    }
}
