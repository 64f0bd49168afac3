//! Limits added on top of upstream: WPA/HPAPlus limit factors, forbidden windows after a scale
//! event, watermark delays and the minimum share of available pods; and the steps of a decision
//! that apply them with upstream's rate limits and bounds.
//!
//! * Limit factors are percentages of the current replicas (WPA `calculateScaleUpLimit` /
//!   `calculateScaleDownLimit`): at most `current + max(1, floor(pct × current / 100))` and at
//!   least `current − max(1, floor(pct × current / 100))`; 0 turns the direction off. The
//!   controller flags `--scale-up-limit-factor` (1.0–2.0, a multiplier) and
//!   `--scale-down-limit-factor` (0–1.0, the share that may go) map onto the same percentages:
//!   `(f − 1) × 100` and `f × 100`; the object's fields override them.
//! * Forbidden windows: no scale-up (scale-down) until `upscale…` (`downscale…`)
//!   `ForbiddenWindowSeconds` after the last scale event.
//! * Watermark delays: a scale-up (scale-down) needs some watermark metric to have been above
//!   (below) its band for the delay; inside the band (convergence) the delay does not apply.
//!
//! Steps, in the order [`decide`](super::decide) runs them after stabilization:
//! [`rate_limit`] (rule 7, with [`ready_pods_guard`]), [`clamp_to_bounds`] (rule 8),
//! [`forbidden_windows`] (rule 9), [`watermark_delays`] (rule 10).

use std::cmp::Ordering;

use jiff::Timestamp;

use super::behavior::{
    default_scale_up_limit, scale_down_limit, scale_down_rules, scale_up_limit, scale_up_rules,
};
use super::conditions::{ABLE_TO_SCALE, Condition};
use super::config::ControllerConfig;
use super::history::{History, seconds_between};
use super::limited::{
    Countdown, DOWNSCALE_DELAY, DOWNSCALE_FORBIDDEN_WINDOW, Limit, LimitedBy, UPSCALE_DELAY,
    UPSCALE_FORBIDDEN_WINDOW,
};
use super::observation::{PodPhase, PodSample};
use super::watermark::Position;
use crate::api::hpa_plus::{
    HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerPlusSpec, quantity_value,
};

/// `[minReplicas, maxReplicas]` of a spec (`minReplicas` defaults to 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// `minReplicas`.
    pub min: i32,
    /// `maxReplicas`.
    pub max: i32,
}

impl Bounds {
    /// The bounds of `spec`.
    pub fn of(spec: &HorizontalPodAutoscalerPlusSpec) -> Self {
        Self {
            min: spec.min_replicas.unwrap_or(1),
            max: spec.max_replicas,
        }
    }
}

/// WPA: the most replicas one scale-up may reach; `pct <= 0` disables scale-up.
pub fn factor_scale_up_limit(current: i32, pct: f64) -> i32 {
    if pct <= 0.0 {
        return current;
    }
    let step = (pct * f64::from(current) / 100.0).floor().max(1.0);
    (f64::from(current) + step).min(f64::from(i32::MAX)) as i32
}

/// WPA: the fewest replicas one scale-down may reach; `pct <= 0` disables scale-down.
pub fn factor_scale_down_limit(current: i32, pct: f64) -> i32 {
    if pct <= 0.0 {
        return current;
    }
    let step = (pct * f64::from(current) / 100.0).floor().max(1.0);
    (f64::from(current) - step) as i32
}

/// Seconds left in a window of `window_seconds` that started at `since` (0 when over or unset).
pub fn countdown(since: Option<Timestamp>, window_seconds: i64, now: Timestamp) -> i64 {
    match since {
        Some(at) if window_seconds > 0 => {
            let left = window_seconds as f64 - seconds_between(at, now);
            if left > 0.0 { left.ceil() as i64 } else { 0 }
        }
        _ => 0,
    }
}

/// Seconds a watermark condition must still hold (`since` = when it started, `None` = it does
/// not hold now, which blocks until it has held for the whole delay).
pub fn delay_left(since: Option<Timestamp>, delay_seconds: i64, now: Timestamp) -> i64 {
    if delay_seconds <= 0 {
        return 0;
    }
    match since {
        None => delay_seconds,
        Some(_) => countdown(since, delay_seconds, now),
    }
}

/// Percentage of pods that are available, as WPA computes it (integer division); `None` when no
/// pod counts.
pub fn available_percentage(ready: usize, counted: usize) -> Option<i32> {
    (counted > 0).then(|| (100 * ready / counted) as i32)
}

/// The limit factors in force, as percentages of the current count: the object's
/// `scaleUpLimitFactor` / `scaleDownLimitFactor`, else the controller's flags.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LimitFactors {
    /// Most a scale-up may add, percent.
    pub up_pct: Option<f64>,
    /// Most a scale-down may remove, percent.
    pub down_pct: Option<f64>,
}

impl LimitFactors {
    /// The factors of `spec` over the flags of `config` (unparsable fields fall back to the flag;
    /// validation reports them).
    pub fn for_spec(spec: &HorizontalPodAutoscalerPlusSpec, config: &ControllerConfig) -> Self {
        let pct = |q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
            q.and_then(|q| quantity_value(q).ok())
        };
        Self {
            up_pct: pct(spec.scale_up_limit_factor.as_ref())
                .or_else(|| config.scale_up_limit_factor.map(|f| (f - 1.0) * 100.0)),
            down_pct: pct(spec.scale_down_limit_factor.as_ref())
                .or_else(|| config.scale_down_limit_factor.map(|f| f * 100.0)),
        }
    }
}

/// What [`rate_limit`] needs.
#[derive(Clone, Copy, Debug)]
pub struct RateInput<'a> {
    /// The target's replicas.
    pub current: i32,
    /// The count after stabilization.
    pub desired: i32,
    /// `[minReplicas, maxReplicas]`.
    pub bounds: Bounds,
    /// The spec's `behavior`; `None` = upstream's rules for objects without one.
    pub behavior: Option<&'a HorizontalPodAutoscalerBehavior>,
    /// The controller's downscale stabilization (the default scale-down window of `behavior`).
    pub downscale_stabilization_seconds: i64,
    /// Limit factors in force.
    pub factors: LimitFactors,
    /// Past scale events, for policies' periods.
    pub history: &'a History,
    /// The reconcile time.
    pub now: Timestamp,
}

/// Rule 7's verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimit {
    /// The cap (scale-up) or floor (scale-down) when it changes the count.
    pub limit: Option<Limit>,
    /// The `ScalingLimited` reason: `DesiredWithinRange`, `ScaleUpLimit`, `ScaleDownLimit`,
    /// `TooManyReplicas` or `TooFewReplicas`.
    pub reason: &'static str,
    /// The `ScalingLimited` message.
    pub message: String,
    /// WPA: the scale-down factor caps this scale-down, so [`ready_pods_guard`] applies.
    pub factor_caps_scale_down: bool,
}

impl RateLimit {
    fn within_range() -> Self {
        Self {
            limit: None,
            reason: "DesiredWithinRange",
            message: "the desired count is within the acceptable range".to_owned(),
            factor_caps_scale_down: false,
        }
    }
}

/// Rule 7: the most one evaluation may change the count. Scale-up: the `behavior` policies
/// (or upstream's `max(2 × current, 4)` without `behavior` and without a factor) and the
/// scale-up factor, the tighter wins; `maxReplicas` replaces a cap above it. Scale-down: the
/// `behavior` policies and the scale-down factor, the tighter wins; `minReplicas` replaces a
/// floor below it.
pub fn rate_limit(r: &RateInput<'_>) -> RateLimit {
    match r.desired.cmp(&r.current) {
        Ordering::Greater => scale_up_rate(r),
        Ordering::Less => scale_down_rate(r),
        Ordering::Equal => RateLimit::within_range(),
    }
}

fn scale_up_rate(r: &RateInput<'_>) -> RateLimit {
    let current = r.current;
    let (mut cap, mut cap_by) = match r.behavior {
        Some(b) => (
            scale_up_limit(current, r.history, &scale_up_rules(b), r.now).max(current),
            LimitedBy::Policy,
        ),
        None if r.factors.up_pct.is_none() => {
            (default_scale_up_limit(current), LimitedBy::ScaleUpLimit)
        }
        None => (i32::MAX, LimitedBy::ScaleUpLimit),
    };
    if let Some(pct) = r.factors.up_pct {
        let f = factor_scale_up_limit(current, pct);
        if f < cap {
            cap = f;
            cap_by = LimitedBy::ScaleUpLimit;
        }
    }
    let (allowed, by, reason, msg) = if r.bounds.max > cap {
        (
            cap,
            cap_by,
            "ScaleUpLimit",
            "the desired replica count is increasing faster than the maximum scale rate",
        )
    } else {
        (
            r.bounds.max,
            LimitedBy::MaxReplicas,
            "TooManyReplicas",
            "the desired replica count is more than the maximum replica count",
        )
    };
    if r.desired <= allowed {
        return RateLimit::within_range();
    }
    RateLimit {
        limit: Some(Limit::new(
            allowed,
            by,
            format!("{msg} (at most {allowed})"),
        )),
        reason,
        message: msg.to_owned(),
        factor_caps_scale_down: false,
    }
}

fn scale_down_rate(r: &RateInput<'_>) -> RateLimit {
    let current = r.current;
    let (mut floor, mut floor_by) = match r.behavior {
        Some(b) => {
            let rules = scale_down_rules(b, r.downscale_stabilization_seconds);
            (
                scale_down_limit(current, r.history, &rules, r.now).min(current),
                LimitedBy::Policy,
            )
        }
        None => (i32::MIN, LimitedBy::ScaleDownLimit),
    };
    let mut factor_caps_scale_down = false;
    if let Some(pct) = r.factors.down_pct {
        let f = factor_scale_down_limit(current, pct);
        if f > floor {
            floor = f;
            floor_by = LimitedBy::ScaleDownLimit;
        }
        factor_caps_scale_down = r.desired < f;
    }
    let (allowed, by, reason, msg) = if r.bounds.min < floor {
        (
            floor,
            floor_by,
            "ScaleDownLimit",
            "the desired replica count is decreasing faster than the maximum scale rate",
        )
    } else {
        (
            r.bounds.min,
            LimitedBy::MinReplicas,
            "TooFewReplicas",
            "the desired replica count is less than the minimum replica count",
        )
    };
    if r.desired >= allowed {
        return RateLimit {
            factor_caps_scale_down,
            ..RateLimit::within_range()
        };
    }
    RateLimit {
        limit: Some(Limit::new(
            allowed,
            by,
            format!("{msg} (at least {allowed})"),
        )),
        reason,
        message: msg.to_owned(),
        factor_caps_scale_down,
    }
}

/// Pods that are running, ready and not being deleted.
pub fn ready_pods(pods: &[PodSample]) -> i32 {
    let n = pods
        .iter()
        .filter(|p| !p.deleting && p.phase == PodPhase::Running && p.ready == Some(true))
        .count();
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// WPA: when the scale-down factor caps the step and fewer pods are ready than it would keep
/// (`desired`), do not scale down at all.
pub fn ready_pods_guard(current: i32, desired: i32, ready: i32) -> Option<Limit> {
    (ready > 0 && ready < desired).then(|| {
        Limit::new(
            current,
            LimitedBy::ReadyPods,
            format!(
                "only {ready} pods are ready, fewer than the {desired} a limited scale-down would keep"
            ),
        )
    })
}

/// Rule 8: `[minReplicas, maxReplicas]`, also for a count the rate rules left in place.
pub fn clamp_to_bounds(desired: i32, bounds: Bounds) -> Option<Limit> {
    if desired > bounds.max {
        Some(Limit::new(
            bounds.max,
            LimitedBy::MaxReplicas,
            "the desired replica count is more than the maximum replica count",
        ))
    } else if desired < bounds.min {
        Some(Limit::new(
            bounds.min,
            LimitedBy::MinReplicas,
            "the desired replica count is less than the minimum replica count",
        ))
    } else {
        None
    }
}

/// Rule 9's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForbiddenWindows {
    /// The windows still running (up first).
    pub countdowns: Vec<Countdown>,
    /// When the change goes the way of a running window: `AbleToScale=False` (WPA's
    /// `Backoff…`) and the hold at the current count.
    pub blocked: Option<(Condition, Limit)>,
}

/// Rule 9: no scale-up (scale-down) within `upscaleForbiddenWindowSeconds`
/// (`downscaleForbiddenWindowSeconds`) of `last_scale_time`.
pub fn forbidden_windows(
    spec: &HorizontalPodAutoscalerPlusSpec,
    last_scale_time: Option<Timestamp>,
    current: i32,
    desired: i32,
    now: Timestamp,
) -> ForbiddenWindows {
    let left = |window: Option<i32>| countdown(last_scale_time, window.map_or(0, i64::from), now);
    let up_left = left(spec.upscale_forbidden_window_seconds);
    let down_left = left(spec.downscale_forbidden_window_seconds);
    let countdowns = [
        (UPSCALE_FORBIDDEN_WINDOW, up_left),
        (DOWNSCALE_FORBIDDEN_WINDOW, down_left),
    ]
    .into_iter()
    .filter(|(_, left)| *left > 0)
    .map(|(transition, seconds_left)| Countdown {
        transition,
        seconds_left,
    })
    .collect();
    let blocked_left = match desired.cmp(&current) {
        Ordering::Greater if up_left > 0 => Some(up_left),
        Ordering::Less if down_left > 0 => Some(down_left),
        _ => None,
    };
    let blocked = blocked_left.map(|left| {
        let (reason, msg) = match (up_left > 0, down_left > 0) {
            (true, true) => (
                "BackoffBoth",
                "the time since the previous scale is still within both the downscale and upscale forbidden windows",
            ),
            (true, false) => (
                "BackoffUpscale",
                "the time since the previous scale is still within the upscale forbidden window",
            ),
            _ => (
                "BackoffDownscale",
                "the time since the previous scale is still within the downscale forbidden window",
            ),
        };
        (
            Condition::new(ABLE_TO_SCALE, false, reason, msg),
            Limit::new(
                current,
                LimitedBy::ForbiddenWindow,
                format!("{msg} ({left} s left)"),
            ),
        )
    });
    ForbiddenWindows {
        countdowns,
        blocked,
    }
}

/// Rule 10's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatermarkDelays {
    /// Since when some watermark metric has been above its band (`None` when none is now).
    pub above_high_since: Option<Timestamp>,
    /// Since when some watermark metric has been below its band (`None` when none is now).
    pub below_low_since: Option<Timestamp>,
    /// The delay still running for this change.
    pub countdown: Option<Countdown>,
    /// The hold at the current count while the delay runs.
    pub limit: Option<Limit>,
}

/// Rule 10: a change out of the band waits until some watermark metric has been above
/// (below) its band for `upscaleDelayAboveWatermarkSeconds`
/// (`downscaleDelayBelowWatermarkSeconds`); the `since` times carry over in the history.
/// `positions` are where the watermark metrics' values sit now.
pub fn watermark_delays(
    spec: &HorizontalPodAutoscalerPlusSpec,
    positions: &[Position],
    history: &History,
    current: i32,
    desired: i32,
    now: Timestamp,
) -> WatermarkDelays {
    let above = positions.contains(&Position::Above);
    let below = positions.contains(&Position::Below);
    let above_high_since = above.then(|| history.above_high_since.unwrap_or(now));
    let below_low_since = below.then(|| history.below_low_since.unwrap_or(now));
    let mut delays = WatermarkDelays {
        above_high_since,
        below_low_since,
        countdown: None,
        limit: None,
    };
    if !above && !below {
        return delays;
    }
    let (transition, since, delay) = if desired > current {
        (
            UPSCALE_DELAY,
            above_high_since,
            spec.upscale_delay_above_watermark_seconds,
        )
    } else {
        (
            DOWNSCALE_DELAY,
            below_low_since,
            spec.downscale_delay_below_watermark_seconds,
        )
    };
    let left = delay_left(since, delay.map_or(0, i64::from), now);
    if left > 0 && desired != current {
        delays.countdown = Some(Countdown {
            transition,
            seconds_left: left,
        });
        delays.limit = Some(Limit::new(
            current,
            LimitedBy::WatermarkDelay,
            format!("the value has not been out of its watermarks long enough ({left} s left)"),
        ));
    }
    delays
}

#[cfg(test)]
mod tests {
    use jiff::SignedDuration;

    use super::*;
    use crate::api::hpa_plus::{HpaScalingPolicy, HpaScalingPolicyType, HpaScalingRules};
    use crate::horizontal::conditions::ABLE_TO_SCALE;

    fn now() -> Timestamp {
        "2026-03-01T12:00:00Z".parse().unwrap()
    }

    const BOUNDS: Bounds = Bounds { min: 1, max: 100 };

    fn rate(current: i32, desired: i32) -> RateInput<'static> {
        static EMPTY: History = History {
            recommendations: Vec::new(),
            scale_up_events: Vec::new(),
            scale_down_events: Vec::new(),
            last_scale_time: None,
            above_high_since: None,
            below_low_since: None,
            metric_failures: std::collections::BTreeMap::new(),
        };
        RateInput {
            current,
            desired,
            bounds: BOUNDS,
            behavior: None,
            downscale_stabilization_seconds: 300,
            factors: LimitFactors::default(),
            history: &EMPTY,
            now: now(),
        }
    }

    #[test]
    fn without_behavior_scale_up_is_capped_at_twice_or_four() {
        // Upstream TestScaleUpLimitWithoutBehavior-style: max(2 × current, 4).
        let r = rate_limit(&rate(3, 20));
        assert_eq!(
            r.limit.as_ref().map(|l| (l.value, l.by)),
            Some((6, LimitedBy::ScaleUpLimit))
        );
        assert_eq!(r.reason, "ScaleUpLimit");
        assert_eq!(rate_limit(&rate(1, 20)).limit.unwrap().value, 4);
        assert_eq!(rate_limit(&rate(3, 5)).reason, "DesiredWithinRange");
    }

    #[test]
    fn max_replicas_replaces_a_cap_above_it() {
        let mut input = rate(3, 20);
        input.bounds = Bounds { min: 1, max: 5 };
        let r = rate_limit(&input);
        assert_eq!(
            r.limit.map(|l| (l.value, l.by)),
            Some((5, LimitedBy::MaxReplicas))
        );
        assert_eq!(r.reason, "TooManyReplicas");
    }

    #[test]
    fn the_tighter_of_policy_and_factor_wins() {
        let behavior = HorizontalPodAutoscalerBehavior {
            scale_up: Some(HpaScalingRules {
                policies: vec![HpaScalingPolicy {
                    type_: HpaScalingPolicyType::Pods,
                    value: 2,
                    period_seconds: 60,
                }],
                ..HpaScalingRules::default()
            }),
            scale_down: None,
            sync_period_seconds: None,
        };
        let mut input = rate(10, 30);
        input.behavior = Some(&behavior);
        let by_policy = rate_limit(&input).limit.unwrap();
        assert_eq!((by_policy.value, by_policy.by), (12, LimitedBy::Policy));
        input.factors.up_pct = Some(10.0);
        let by_factor = rate_limit(&input).limit.unwrap();
        assert_eq!(
            (by_factor.value, by_factor.by),
            (11, LimitedBy::ScaleUpLimit)
        );
    }

    #[test]
    fn scale_down_factor_floors_and_flags_the_ready_pod_guard() {
        let mut input = rate(10, 2);
        assert_eq!(
            rate_limit(&input).limit,
            None,
            "no floor without behavior or factor"
        );
        input.factors.down_pct = Some(20.0);
        let r = rate_limit(&input);
        assert_eq!(
            r.limit.map(|l| (l.value, l.by)),
            Some((8, LimitedBy::ScaleDownLimit))
        );
        assert!(r.factor_caps_scale_down);
        input.desired = 9;
        let r = rate_limit(&input);
        assert_eq!((r.limit, r.factor_caps_scale_down), (None, false));
        input.desired = 2;
        input.bounds = Bounds { min: 9, max: 100 };
        let r = rate_limit(&input);
        assert_eq!(
            r.limit.map(|l| (l.value, l.by)),
            Some((9, LimitedBy::MinReplicas))
        );
        assert_eq!(r.reason, "TooFewReplicas");
    }

    #[test]
    fn ready_pod_guard_holds_when_fewer_pods_are_ready_than_kept() {
        assert_eq!(ready_pods_guard(10, 8, 5).map(|l| l.value), Some(10));
        assert_eq!(ready_pods_guard(10, 8, 8), None);
        assert_eq!(
            ready_pods_guard(10, 8, 0),
            None,
            "no ready pods: no information"
        );
        let pods = [
            PodSample::default(),
            PodSample {
                ready: Some(false),
                ..PodSample::default()
            },
            PodSample {
                deleting: true,
                ..PodSample::default()
            },
        ];
        assert_eq!(ready_pods(&pods), 1);
    }

    #[test]
    fn bounds_clamp_in_both_directions() {
        let b = Bounds { min: 2, max: 5 };
        assert_eq!(
            clamp_to_bounds(6, b).map(|l| (l.value, l.by)),
            Some((5, LimitedBy::MaxReplicas))
        );
        assert_eq!(
            clamp_to_bounds(1, b).map(|l| (l.value, l.by)),
            Some((2, LimitedBy::MinReplicas))
        );
        assert_eq!(clamp_to_bounds(3, b), None);
    }

    #[test]
    fn forbidden_windows_block_only_their_direction() {
        let spec = HorizontalPodAutoscalerPlusSpec {
            upscale_forbidden_window_seconds: Some(60),
            downscale_forbidden_window_seconds: Some(300),
            ..HorizontalPodAutoscalerPlusSpec::default()
        };
        let last = Some(now() - SignedDuration::from_secs(100));
        let up = forbidden_windows(&spec, last, 4, 6, now());
        assert_eq!(up.blocked, None, "the upscale window is over");
        assert_eq!(
            up.countdowns,
            [Countdown {
                transition: DOWNSCALE_FORBIDDEN_WINDOW,
                seconds_left: 200
            }]
        );
        let down = forbidden_windows(&spec, last, 4, 2, now());
        let (condition, hold) = down.blocked.unwrap();
        assert_eq!((condition.type_, condition.status), (ABLE_TO_SCALE, false));
        assert_eq!(condition.reason, "BackoffDownscale");
        assert_eq!((hold.value, hold.by), (4, LimitedBy::ForbiddenWindow));
        assert!(hold.note.ends_with("(200 s left)"), "{}", hold.note);
        assert_eq!(forbidden_windows(&spec, None, 4, 2, now()).blocked, None);
    }

    #[test]
    fn watermark_delays_wait_and_remember_since_when() {
        let spec = HorizontalPodAutoscalerPlusSpec {
            upscale_delay_above_watermark_seconds: Some(60),
            ..HorizontalPodAutoscalerPlusSpec::default()
        };
        let history = History::default();
        let first = watermark_delays(&spec, &[Position::Above], &history, 4, 6, now());
        assert_eq!(first.above_high_since, Some(now()));
        assert_eq!(
            first.limit.map(|l| (l.value, l.by)),
            Some((4, LimitedBy::WatermarkDelay))
        );
        assert_eq!(
            first.countdown.map(|c| (c.transition, c.seconds_left)),
            Some((UPSCALE_DELAY, 60))
        );
        let history = History {
            above_high_since: Some(now() - SignedDuration::from_secs(90)),
            ..History::default()
        };
        let later = watermark_delays(&spec, &[Position::Above], &history, 4, 6, now());
        assert_eq!((later.limit, later.countdown), (None, None));
        assert_eq!(later.above_high_since, history.above_high_since);
        let back = watermark_delays(&spec, &[Position::Within], &history, 4, 4, now());
        assert_eq!((back.above_high_since, back.below_low_since), (None, None));
    }

    #[test]
    fn limit_factors_prefer_the_object_over_the_flags() {
        let cfg = ControllerConfig {
            scale_up_limit_factor: Some(1.5),
            scale_down_limit_factor: Some(0.25),
            ..ControllerConfig::default()
        };
        let mut spec = HorizontalPodAutoscalerPlusSpec::default();
        assert_eq!(
            LimitFactors::for_spec(&spec, &cfg),
            LimitFactors {
                up_pct: Some(50.0),
                down_pct: Some(25.0)
            }
        );
        spec.scale_up_limit_factor = Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
            "30".into(),
        ));
        assert_eq!(LimitFactors::for_spec(&spec, &cfg).up_pct, Some(30.0));
    }
}
