//! The status conditions a decision sets, with upstream's types and reasons.
//!
//! `AbleToScale`: `SucceededGetScale`, `ReadyForNewScale`, `ScaleUpStabilized`,
//! `ScaleDownStabilized`, and for forbidden windows WPA's `BackoffUpscale` / `BackoffDownscale` /
//! `BackoffBoth` (status False). `ScalingActive`: `ValidMetricFound`, `ScalingDisabled`,
//! `AmbiguousSelector`, `FailedGet…Metric`, `NotEnoughAvailablePods`. `ScalingLimited`:
//! `DesiredWithinRange`, `TooManyReplicas`, `TooFewReplicas`, `ScaleUpLimit`, `ScaleDownLimit`.
//! `ScaledToZero` (KEP-2021): `ScaledToZero` / `NotScaledToZero`, set on every rescale (see
//! [`super::scale_to_zero`]). Plimsoll adds `DryRun` and `Paused`. Conditions carry no time: [`merge`] keeps a condition's
//! `lastTransitionTime` while its status does not change.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Serialize;

use crate::api::hpa_plus::HorizontalPodAutoscalerCondition;
use crate::printable;

/// `AbleToScale` condition type.
pub const ABLE_TO_SCALE: &str = "AbleToScale";
/// `ScalingActive` condition type.
pub const SCALING_ACTIVE: &str = "ScalingActive";
/// `ScalingLimited` condition type.
pub const SCALING_LIMITED: &str = "ScalingLimited";
/// `DryRun` condition type.
pub const DRY_RUN: &str = "DryRun";
/// `Paused` condition type.
pub const PAUSED: &str = "Paused";

/// One condition as a decision sets it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Condition {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: &'static str,
    /// True or False.
    pub status: bool,
    /// CamelCase reason.
    pub reason: &'static str,
    /// A sentence.
    pub message: String,
}

impl Condition {
    /// A condition of `type_` with `status`, `reason` and `message`.
    pub fn new(
        type_: &'static str,
        status: bool,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            status,
            reason,
            message: message.into(),
        }
    }
}

/// Puts `c` into `list`, replacing an earlier entry of the same type (so a later rule's
/// condition wins, and the first rule to set a type fixes its position in the list).
pub(crate) fn put(list: &mut Vec<Condition>, c: Condition) {
    if let Some(existing) = list.iter_mut().find(|e| e.type_ == c.type_) {
        *existing = c;
    } else {
        list.push(c);
    }
}

/// The status conditions after a decision: each of `new` replaces the same type in `old`,
/// keeping `lastTransitionTime` when the status is unchanged; other old types are kept.
pub fn merge(
    old: &[HorizontalPodAutoscalerCondition],
    new: &[Condition],
    now: Timestamp,
) -> Vec<HorizontalPodAutoscalerCondition> {
    let mut out: Vec<HorizontalPodAutoscalerCondition> = old.to_vec();
    for c in new {
        let status = if c.status { "True" } else { "False" }.to_owned();
        let entry = HorizontalPodAutoscalerCondition {
            type_: c.type_.to_owned(),
            status: status.clone(),
            last_transition_time: Some(Time(now)),
            reason: Some(c.reason.to_owned()),
            message: Some(printable::message(
                &c.message,
                printable::MAX_CONDITION_MESSAGE_BYTES,
            )),
        };
        match out.iter_mut().find(|o| o.type_ == c.type_) {
            Some(o) if o.status == status => {
                o.reason = entry.reason;
                o.message = entry.message;
            }
            Some(o) => *o = entry,
            None => out.push(entry),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_reaches_the_status_escaped_and_bounded() {
        // A Prometheus metric's name defaults to its query, 4096 characters of the tenant's.
        let query = format!("up\u{1b}]52;c;cm0gLXJm\u{7}\n{}", "x".repeat(20_000));
        let c = Condition::new(
            "ScalingActive",
            false,
            "FailedGetPrometheusMetric",
            format!("the HPA was unable to compute the replica count: {query}"),
        );
        let now = Timestamp::UNIX_EPOCH;
        let merged = merge(&[], &[c], now);
        let message = merged[0].message.as_deref().unwrap_or_default();
        assert!(
            message.contains("up\\u{1b}]52;c;cm0gLXJm\\u{7}\\nxxx"),
            "{message:.80}"
        );
        assert!(message.len() <= printable::MAX_CONDITION_MESSAGE_BYTES);
        assert!(!message.chars().any(printable::acts_on_terminal));
    }
}
