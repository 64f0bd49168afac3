//! `behavior`: stabilization windows over past recommendations and scaling policies over their
//! periods, as upstream's `horizontal.go` applies them.
//!
//! * Defaults (upstream `GenerateHPAScaleUpRules` / `GenerateHPAScaleDownRules`): scale-up has no
//!   stabilization and allows the larger of +4 pods and +100 % per 15 s; scale-down uses the
//!   controller's `--horizontal-pod-autoscaler-downscale-stabilization` (300 s) and allows −100 %
//!   per 15 s; `selectPolicy` defaults to `Max`. Each missing field is defaulted on its own.
//! * Stabilization: the recommendation is brought between the lowest recommendation of the
//!   scale-up window and the highest of the scale-down window, starting from the current count.
//! * Policies: the limit is computed from the replicas at the start of each policy's period
//!   (current − added + removed within it); `Max` picks the policy allowing the largest change,
//!   `Min` the smallest, `Disabled` forbids the direction.
//! * Without any `behavior` (an HPA created without one), upstream's older rules apply: the
//!   highest recommendation of the downscale window and a scale-up limit of
//!   `max(2 × current, 4)`.

use jiff::Timestamp;

use super::conditions::{ABLE_TO_SCALE, Condition};
use super::history::{History, ScaleEvent, seconds_between};
use super::limited::{Limit, LimitedBy};
use crate::api::hpa_plus::{
    HorizontalPodAutoscalerBehavior, HpaScalingPolicyType, HpaScalingRules, ScalingPolicySelect,
};

/// Upstream's `scaleUpLimitFactor` for objects without `behavior`.
pub const SCALE_UP_LIMIT_FACTOR: f64 = 2.0;
/// Upstream's `scaleUpLimitMinimum` for objects without `behavior`.
pub const SCALE_UP_LIMIT_MINIMUM: i32 = 4;

/// One policy with its defaults resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// `Pods` or `Percent`.
    pub kind: HpaScalingPolicyType,
    /// Pods or percent.
    pub value: i32,
    /// Period in seconds.
    pub period_seconds: i64,
}

/// Rules for one direction with defaults resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    /// Stabilization window in seconds.
    pub window_seconds: i64,
    /// How policies combine.
    pub select: ScalingPolicySelect,
    /// The policies.
    pub policies: Vec<Policy>,
}

fn resolve(rules: Option<&HpaScalingRules>, window: i64, default: &[Policy]) -> Rules {
    let policies = match rules {
        Some(r) if !r.policies.is_empty() => r
            .policies
            .iter()
            .map(|p| Policy {
                kind: p.type_,
                value: p.value,
                period_seconds: i64::from(p.period_seconds),
            })
            .collect(),
        _ => default.to_vec(),
    };
    Rules {
        window_seconds: rules
            .and_then(|r| r.stabilization_window_seconds)
            .map_or(window, i64::from),
        select: rules.and_then(|r| r.select_policy).unwrap_or_default(),
        policies,
    }
}

/// Scale-up rules of `behavior` with upstream defaults.
pub fn scale_up_rules(behavior: &HorizontalPodAutoscalerBehavior) -> Rules {
    resolve(
        behavior.scale_up.as_ref(),
        0,
        &[
            Policy {
                kind: HpaScalingPolicyType::Pods,
                value: 4,
                period_seconds: 15,
            },
            Policy {
                kind: HpaScalingPolicyType::Percent,
                value: 100,
                period_seconds: 15,
            },
        ],
    )
}

/// Scale-down rules of `behavior` with upstream defaults; `default_window` is the controller's
/// downscale stabilization (seconds).
pub fn scale_down_rules(behavior: &HorizontalPodAutoscalerBehavior, default_window: i64) -> Rules {
    resolve(
        behavior.scale_down.as_ref(),
        default_window,
        &[Policy {
            kind: HpaScalingPolicyType::Percent,
            value: 100,
            period_seconds: 15,
        }],
    )
}

/// Rule 6's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stabilized {
    /// The count after stabilization.
    pub replicas: i32,
    /// `AbleToScale`: `ReadyForNewScale`, `ScaleUpStabilized` or `ScaleDownStabilized`.
    pub condition: Condition,
    /// The change stabilization made, if any.
    pub limit: Option<Limit>,
}

/// Rule 6: the recommendation brought within the recommendations of the stabilization
/// windows (`behavior`'s, or the controller's downscale window `default_down_window` without
/// one). The caller records `recommendation` in the history afterwards.
pub fn stabilize(
    behavior: Option<&HorizontalPodAutoscalerBehavior>,
    default_down_window: i64,
    current: i32,
    recommendation: i32,
    history: &History,
    now: Timestamp,
) -> Stabilized {
    let replicas = match behavior {
        Some(b) => stabilize_with_behaviors(
            current,
            recommendation,
            history,
            scale_up_rules(b).window_seconds,
            scale_down_rules(b, default_down_window).window_seconds,
            now,
        ),
        None => stabilize_default(recommendation, history, default_down_window, now),
    };
    if replicas == recommendation {
        return Stabilized {
            replicas,
            condition: Condition::new(
                ABLE_TO_SCALE,
                true,
                "ReadyForNewScale",
                "recommended size matches current size",
            ),
            limit: None,
        };
    }
    let (reason, msg) = if recommendation >= current {
        (
            "ScaleUpStabilized",
            "recent recommendations were lower than current one, applying the lowest recent recommendation",
        )
    } else {
        (
            "ScaleDownStabilized",
            "recent recommendations were higher than current one, applying the highest recent recommendation",
        )
    };
    Stabilized {
        replicas,
        condition: Condition::new(ABLE_TO_SCALE, true, reason, msg),
        limit: Some(Limit::new(replicas, LimitedBy::Stabilization, msg)),
    }
}

/// Upstream `stabilizeRecommendationWithBehaviors` (without the recording, done by the caller).
pub fn stabilize_with_behaviors(
    current: i32,
    desired: i32,
    history: &History,
    up_window: i64,
    down_window: i64,
    now: Timestamp,
) -> i32 {
    let mut up = desired;
    let mut down = desired;
    for rec in &history.recommendations {
        let age = seconds_between(rec.at, now);
        if age < up_window as f64 {
            up = up.min(rec.replicas);
        }
        if age < down_window as f64 {
            down = down.max(rec.replicas);
        }
    }
    current.max(up).min(down)
}

/// Upstream `stabilizeRecommendation` for objects without `behavior`: the highest
/// recommendation within the downscale window.
pub fn stabilize_default(desired: i32, history: &History, window: i64, now: Timestamp) -> i32 {
    history
        .recommendations
        .iter()
        .filter(|r| seconds_between(r.at, now) < window as f64)
        .map(|r| r.replicas)
        .fold(desired, i32::max)
}

/// The replicas `events` added (or removed) within `period` seconds before `now`, saturating at
/// the `i32` range (a history read back from an object may hold any count).
fn change_in_period(events: &[ScaleEvent], period: i64, now: Timestamp) -> i32 {
    let sum: i64 = events
        .iter()
        .filter(|e| seconds_between(e.at, now) < period as f64)
        .map(|e| i64::from(e.change))
        .sum();
    i32::try_from(sum.clamp(i64::from(i32::MIN), i64::from(i32::MAX))).unwrap_or_default()
}

/// Upstream `calculateScaleUpLimitWithScalingRules`: the most replicas the policies allow.
pub fn scale_up_limit(current: i32, history: &History, rules: &Rules, now: Timestamp) -> i32 {
    let pick: fn(i32, i32) -> i32 = match rules.select {
        ScalingPolicySelect::Disabled => return current,
        ScalingPolicySelect::Min => i32::min,
        ScalingPolicySelect::Max => i32::max,
    };
    let mut result: Option<i32> = None;
    for p in &rules.policies {
        let added = change_in_period(&history.scale_up_events, p.period_seconds, now);
        let removed = change_in_period(&history.scale_down_events, p.period_seconds, now);
        let start = current.saturating_sub(added).saturating_add(removed);
        let proposed = match p.kind {
            HpaScalingPolicyType::Pods => start.saturating_add(p.value),
            HpaScalingPolicyType::Percent => {
                (f64::from(start) * (1.0 + f64::from(p.value) / 100.0)).ceil() as i32
            }
        };
        result = Some(result.map_or(proposed, |r| pick(r, proposed)));
    }
    result.unwrap_or(current)
}

/// Upstream `calculateScaleDownLimitWithBehaviors`: the fewest replicas the policies allow.
pub fn scale_down_limit(current: i32, history: &History, rules: &Rules, now: Timestamp) -> i32 {
    // For scale-down, "Max" means the largest change, i.e. the fewest replicas.
    let pick: fn(i32, i32) -> i32 = match rules.select {
        ScalingPolicySelect::Disabled => return current,
        ScalingPolicySelect::Min => i32::max,
        ScalingPolicySelect::Max => i32::min,
    };
    let mut result: Option<i32> = None;
    for p in &rules.policies {
        let added = change_in_period(&history.scale_up_events, p.period_seconds, now);
        let removed = change_in_period(&history.scale_down_events, p.period_seconds, now);
        let start = current.saturating_sub(added).saturating_add(removed);
        let proposed = match p.kind {
            HpaScalingPolicyType::Pods => start.saturating_sub(p.value),
            // Upstream truncates toward zero here (int32 conversion), not floor of a negative.
            HpaScalingPolicyType::Percent => {
                (f64::from(start) * (1.0 - f64::from(p.value) / 100.0)) as i32
            }
        };
        result = Some(result.map_or(proposed, |r| pick(r, proposed)));
    }
    result.unwrap_or(current)
}

/// Upstream `calculateScaleUpLimit` for objects without `behavior`.
pub fn default_scale_up_limit(current: i32) -> i32 {
    ((SCALE_UP_LIMIT_FACTOR * f64::from(current)) as i32).max(SCALE_UP_LIMIT_MINIMUM)
}

#[cfg(test)]
mod tests {
    use jiff::SignedDuration;

    use super::*;
    use crate::horizontal::history::TimedReplicas;

    fn now() -> Timestamp {
        "2026-03-01T12:00:00Z".parse().unwrap()
    }

    fn history(recent: &[(i64, i32)]) -> History {
        History {
            recommendations: recent
                .iter()
                .map(|(ago, replicas)| TimedReplicas {
                    at: now() - SignedDuration::from_secs(*ago),
                    replicas: *replicas,
                })
                .collect(),
            ..History::default()
        }
    }

    #[test]
    fn without_behavior_the_highest_recommendation_of_the_window_wins() {
        let h = history(&[(30, 8), (400, 12)]);
        let s = stabilize(None, 300, 10, 5, &h, now());
        assert_eq!(s.replicas, 8, "12 is older than the window");
        assert_eq!(s.condition.reason, "ScaleDownStabilized");
        assert_eq!(
            s.limit.map(|l| (l.value, l.by)),
            Some((8, LimitedBy::Stabilization))
        );
    }

    #[test]
    fn an_unchanged_recommendation_is_ready_for_a_new_scale() {
        let s = stabilize(None, 300, 4, 6, &history(&[(30, 5)]), now());
        assert_eq!(s.replicas, 6);
        assert_eq!(s.condition.reason, "ReadyForNewScale");
        assert_eq!(s.limit, None);
    }

    #[test]
    fn behavior_windows_stabilize_scale_up_too() {
        let b = HorizontalPodAutoscalerBehavior {
            scale_up: Some(HpaScalingRules {
                stabilization_window_seconds: Some(60),
                ..HpaScalingRules::default()
            }),
            scale_down: None,
            sync_period_seconds: None,
        };
        let s = stabilize(Some(&b), 300, 4, 9, &history(&[(30, 6), (90, 5)]), now());
        assert_eq!(s.replicas, 6, "the lowest recommendation of the last 60 s");
        assert_eq!(s.condition.reason, "ScaleUpStabilized");
    }
}
