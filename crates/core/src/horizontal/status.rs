//! Turning a [`Decision`] into the object's status.
//!
//! The controller writes status only when it changed; this function is deterministic for the
//! same decision, previous status and time, so comparing the result with the old status is enough.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions::merge;
use super::decision::Decision;
use crate::api::hpa_plus::{
    Countdown, HorizontalPodAutoscalerPlusSpec, HorizontalPodAutoscalerPlusStatus, LastDecision,
    MetricProposal,
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
        reference: Some(format!(
            "{}/{}",
            spec.scale_target_ref.kind, spec.scale_target_ref.name
        )),
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
                    error: p.error.clone(),
                })
                .collect(),
            recommended_replicas: decision.recommended_replicas,
            desired_replicas: decision.desired_replicas,
            limited_by: decision.limited_by.map(|l| l.as_str().to_owned()),
            reason: decision.reason.clone(),
            countdowns: decision
                .countdowns
                .iter()
                .map(|c| Countdown {
                    transition: c.transition.to_owned(),
                    seconds_left: c.seconds_left,
                })
                .collect(),
        }),
    }
}
