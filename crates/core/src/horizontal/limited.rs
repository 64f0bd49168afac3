//! What limited a decision: the rule that changed or held the replica count ([`LimitedBy`]), the
//! cooldowns still running ([`Countdown`]), and the count as each step of
//! [`decide`](super::decide) leaves it ([`Limited`]).
//!
//! Every step is a function that returns what it would do ([`Limit`] or [`Hold`]); only
//! `decide` applies them, in the order of the rules. A [`Limit`] that does not change the count
//! leaves the rule and note of the step before it, so `limitedBy` names the last rule that
//! actually moved the value.

use serde::{Deserialize, Serialize};

use super::conditions::Condition;

/// The rule that changed (or held) the recommendation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LimitedBy {
    /// Another autoscaler selects the same pods.
    AmbiguousSelector,
    /// The target has 0 replicas and `minReplicas > 0`.
    ScalingDisabled,
    /// Clamped to `minReplicas`.
    MinReplicas,
    /// Clamped to `maxReplicas`.
    MaxReplicas,
    /// Too few pods are available.
    MinAvailable,
    /// Metrics failed.
    MetricsUnavailable,
    /// Every metric was within its tolerance.
    Tolerance,
    /// Every watermark metric was within its band.
    WithinWatermarks,
    /// A stabilization window.
    Stabilization,
    /// A `behavior` policy.
    Policy,
    /// Upstream's scale-up limit or `scaleUpLimitFactor`.
    ScaleUpLimit,
    /// `scaleDownLimitFactor`.
    ScaleDownLimit,
    /// Fewer pods are ready than a limited scale-down would keep.
    ReadyPods,
    /// A forbidden window after the last scale event.
    ForbiddenWindow,
    /// A watermark delay has not elapsed.
    WatermarkDelay,
    /// `paused` or the autoscale-disabled annotation.
    Paused,
    /// A `CronHorizontalPodAutoscaler` holds the target.
    CronHold,
    /// The target is rolling out (`pauseDuringRollout`).
    Rollout,
    /// `dryRun`: computed, not written.
    DryRun,
}

impl LimitedBy {
    /// Every rule, in precedence order (for metrics that must reset the rules no longer hit).
    pub const ALL: [Self; 19] = [
        Self::AmbiguousSelector,
        Self::ScalingDisabled,
        Self::MinReplicas,
        Self::MaxReplicas,
        Self::MinAvailable,
        Self::MetricsUnavailable,
        Self::Tolerance,
        Self::WithinWatermarks,
        Self::Stabilization,
        Self::Policy,
        Self::ScaleUpLimit,
        Self::ScaleDownLimit,
        Self::ReadyPods,
        Self::ForbiddenWindow,
        Self::WatermarkDelay,
        Self::Paused,
        Self::CronHold,
        Self::Rollout,
        Self::DryRun,
    ];

    /// The camelCase name used in status, logs and replay output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AmbiguousSelector => "ambiguousSelector",
            Self::ScalingDisabled => "scalingDisabled",
            Self::MinReplicas => "minReplicas",
            Self::MaxReplicas => "maxReplicas",
            Self::MinAvailable => "minAvailable",
            Self::MetricsUnavailable => "metricsUnavailable",
            Self::Tolerance => "tolerance",
            Self::WithinWatermarks => "withinWatermarks",
            Self::Stabilization => "stabilization",
            Self::Policy => "policy",
            Self::ScaleUpLimit => "scaleUpLimit",
            Self::ScaleDownLimit => "scaleDownLimit",
            Self::ReadyPods => "readyPods",
            Self::ForbiddenWindow => "forbiddenWindow",
            Self::WatermarkDelay => "watermarkDelay",
            Self::Paused => "paused",
            Self::CronHold => "cronHold",
            Self::Rollout => "rollout",
            Self::DryRun => "dryRun",
        }
    }
}

impl std::fmt::Display for LimitedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Time left before a transition may happen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Countdown {
    /// One of [`Countdown::TRANSITIONS`].
    pub transition: &'static str,
    /// Seconds left.
    pub seconds_left: i64,
}

impl Countdown {
    /// The transition names a countdown can carry.
    pub const TRANSITIONS: [&'static str; 4] = [
        UPSCALE_FORBIDDEN_WINDOW,
        DOWNSCALE_FORBIDDEN_WINDOW,
        UPSCALE_DELAY,
        DOWNSCALE_DELAY,
    ];
}

/// `upscaleForbiddenWindowSeconds` is running.
pub const UPSCALE_FORBIDDEN_WINDOW: &str = "upscaleForbiddenWindow";
/// `downscaleForbiddenWindowSeconds` is running.
pub const DOWNSCALE_FORBIDDEN_WINDOW: &str = "downscaleForbiddenWindow";
/// `upscaleDelayAboveWatermarkSeconds` is running.
pub const UPSCALE_DELAY: &str = "upscaleDelay";
/// `downscaleDelayBelowWatermarkSeconds` is running.
pub const DOWNSCALE_DELAY: &str = "downscaleDelay";

/// A rule's verdict on the count: move it to `value` because of `by`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limit {
    /// The count the rule allows.
    pub value: i32,
    /// The rule.
    pub by: LimitedBy,
    /// Why, for the decision's reason.
    pub note: String,
}

impl Limit {
    /// A verdict of `by` moving the count to `value`.
    pub fn new(value: i32, by: LimitedBy, note: impl Into<String>) -> Self {
        Self {
            value,
            by,
            note: note.into(),
        }
    }
}

/// A rule that ends the evaluation: the count becomes `value` and no later rule runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    /// The count (the current one, or a bound the current count is outside of).
    pub value: i32,
    /// The rule.
    pub by: LimitedBy,
    /// Why, for the decision's reason.
    pub note: String,
    /// The `ScalingActive` condition the rule sets, if any.
    pub condition: Option<Condition>,
}

/// The count as a step leaves it, with the last rule that changed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limited {
    /// The count.
    pub value: i32,
    /// The last rule that changed it (or explained why it did not move).
    pub limited_by: Option<LimitedBy>,
    /// Why, for the decision's reason.
    pub note: Option<String>,
}

impl Limited {
    /// `self` after `limit`: unchanged (rule and note included) when there is none or it keeps
    /// the same count.
    #[must_use]
    pub fn apply(self, limit: Option<Limit>) -> Self {
        match limit {
            Some(l) if l.value != self.value => Self {
                value: l.value,
                limited_by: Some(l.by),
                note: Some(l.note),
            },
            _ => self,
        }
    }
}

impl From<Hold> for Limited {
    fn from(h: Hold) -> Self {
        Self {
            value: h.value,
            limited_by: Some(h.by),
            note: Some(h.note),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_that_keeps_the_count_keeps_the_earlier_rule() {
        let start = Limited {
            value: 5,
            limited_by: Some(LimitedBy::Tolerance),
            note: Some("quiet".into()),
        };
        let same = start
            .clone()
            .apply(Some(Limit::new(5, LimitedBy::Policy, "cap")));
        assert_eq!(same, start);
        let moved = start.apply(Some(Limit::new(4, LimitedBy::Policy, "cap")));
        assert_eq!(
            (moved.value, moved.limited_by, moved.note.as_deref()),
            (4, Some(LimitedBy::Policy), Some("cap"))
        );
        assert_eq!(moved.clone().apply(None), moved);
    }

    #[test]
    fn every_rule_is_listed_once_with_its_name() {
        let names: std::collections::BTreeSet<_> =
            LimitedBy::ALL.iter().map(|l| l.as_str()).collect();
        assert_eq!(names.len(), LimitedBy::ALL.len());
        let json = serde_json::to_string(&LimitedBy::ALL).unwrap();
        for l in LimitedBy::ALL {
            assert!(
                json.contains(&format!("\"{l}\"")),
                "{l} serializes as its name"
            );
        }
    }
}
