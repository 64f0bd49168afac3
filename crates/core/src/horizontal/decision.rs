//! The one entry point: spec + observation + history + controller config + `now` → [`Decision`].
//!
//! Rules apply in this order (docs/hpa-plus.md has the same table); the first rule that ends the
//! evaluation wins, later rules only narrow the result:
//!
//! 1. `AmbiguousSelector`: another autoscaler selects the same pods → no change.
//! 2. `ScalingDisabled`: the target has 0 replicas and `minReplicas > 0` → no change.
//! 3. Out of range: current > `maxReplicas` → `maxReplicas`; current < `minReplicas` →
//!    `minReplicas` (metrics are not consulted, as upstream).
//! 4. `minAvailable`: fewer than `minAvailableReplicaPercentage` of the pods are ready → no change.
//! 5. Metrics: each metric proposes (tolerance, watermarks, modulo inside); all failing, or some
//!    failing while the rest propose fewer than current → no change (`metricsUnavailable`).
//!    The recommendation is the largest proposal.
//! 6. Stabilization (`behavior` windows, or the controller's downscale window without one).
//! 7. Rate limits: `behavior` policies (`policy`), upstream's `max(2×, 4)` without `behavior`
//!    and limit factors (`scaleUpLimit` / `scaleDownLimit`; the tighter wins); the WPA ready-pod
//!    guard on limited scale-downs (`readyPods`).
//! 8. `maxReplicas` / `minReplicas` clamp.
//! 9. Forbidden windows after the last scale event (`forbiddenWindow`).
//! 10. Watermark delays (`watermarkDelay`).
//! 11. Gates on writing: `paused`, `cronHold`, `rollout` (pauseDuringRollout), `dryRun`.
//!
//! `limitedBy` names the last rule that changed the value (or that stopped the change).

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::behavior::{
    default_scale_up_limit, scale_down_limit, scale_down_rules, scale_up_limit, scale_up_rules,
    stabilize_default, stabilize_with_behaviors,
};
use super::conditions::{
    ABLE_TO_SCALE, Condition, DRY_RUN, PAUSED, SCALING_ACTIVE, SCALING_LIMITED, set,
};
use super::history::{History, TimedReplicas};
use super::limits::{
    available_percentage, countdown, delay_left, factor_scale_down_limit, factor_scale_up_limit,
};
use super::metrics::CalcContext;
use super::observation::{Observation, PodPhase};
use super::proposals::{MetricOutcome, WatermarkSettings, evaluate};
use super::tolerance::{DEFAULT_TOLERANCE, Tolerances};
use super::watermark::{Position, round_up_to_modulo};
use crate::api::hpa_plus::{
    HorizontalPodAutoscalerPlusSpec, MetricSpec, MetricTarget, UtilizationBase, quantity_value,
};

/// Controller-wide settings (flags). Every field has upstream's default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ControllerConfig {
    /// `--tolerance` (default 0.1).
    pub tolerance: f64,
    /// `--cpu-initialization-period`, seconds (default 300).
    pub cpu_initialization_period_seconds: i64,
    /// `--initial-readiness-delay`, seconds (default 30).
    pub initial_readiness_delay_seconds: i64,
    /// `--downscale-stabilization`, seconds (default 300).
    pub downscale_stabilization_seconds: i64,
    /// `--scale-up-limit-factor`, 1.0–2.0 (default none: upstream rules).
    pub scale_up_limit_factor: Option<f64>,
    /// `--scale-down-limit-factor`, 0–1.0 (default none: upstream rules).
    pub scale_down_limit_factor: Option<f64>,
    /// `--sync-period`, seconds, for objects without `syncPeriodSeconds` (default 5).
    pub sync_period_seconds: i64,
    /// `--min-sync-period`, seconds: the floor of every object's period (default 1).
    pub min_sync_period_seconds: i64,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            tolerance: DEFAULT_TOLERANCE,
            cpu_initialization_period_seconds: 300,
            initial_readiness_delay_seconds: 30,
            downscale_stabilization_seconds: 300,
            scale_up_limit_factor: None,
            scale_down_limit_factor: None,
            sync_period_seconds: 5,
            min_sync_period_seconds: 1,
        }
    }
}

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
    /// `upscaleForbiddenWindow`, `downscaleForbiddenWindow`, `upscaleDelay`, `downscaleDelay`.
    pub transition: &'static str,
    /// Seconds left.
    pub seconds_left: i64,
}

/// Everything a decision needs.
#[derive(Clone, Copy, Debug)]
pub struct DecisionInput<'a> {
    /// The autoscaler's spec.
    pub spec: &'a HorizontalPodAutoscalerPlusSpec,
    /// What was observed.
    pub observed: &'a Observation,
    /// The autoscaler's memory.
    pub history: &'a History,
    /// Controller flags.
    pub config: &'a ControllerConfig,
    /// The reconcile time.
    pub now: Timestamp,
}

/// What to do, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// The target's replicas when decided.
    pub current_replicas: i32,
    /// What the autoscaler wants (`status.desiredReplicas`).
    pub desired_replicas: i32,
    /// Replicas to write to the scale subresource; `None` = write nothing.
    pub scale_to: Option<i32>,
    /// The largest metric proposal, before stabilization and limits.
    pub recommended_replicas: Option<i32>,
    /// One entry per metric.
    pub proposals: Vec<MetricOutcome>,
    /// The rule that changed or held the recommendation.
    pub limited_by: Option<LimitedBy>,
    /// A sentence a person can read.
    pub reason: String,
    /// Conditions to merge into status.
    pub conditions: Vec<Condition>,
    /// Cooldowns and delays still running.
    pub countdowns: Vec<Countdown>,
    /// Seconds until this object should be evaluated again.
    pub next_sync_seconds: i64,
    /// The history to keep (call [`History::record_scale`] after writing `scale_to`).
    #[serde(skip)]
    pub history: History,
}

struct Step {
    value: i32,
    limited_by: Option<LimitedBy>,
    note: Option<String>,
}

impl Step {
    fn limit(&mut self, value: i32, by: LimitedBy, note: String) {
        if value != self.value {
            self.value = value;
            self.limited_by = Some(by);
            self.note = Some(note);
        }
    }
}

fn pct_of(q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> Option<f64> {
    q.and_then(|q| quantity_value(q).ok())
}

/// Decides the replicas of one autoscaler.
pub fn decide(input: &DecisionInput<'_>) -> Decision {
    let DecisionInput {
        spec,
        observed: obs,
        config: cfg,
        now,
        ..
    } = *input;
    let current = obs.current_replicas;
    let min = spec.min_replicas.unwrap_or(1);
    let max = spec.max_replicas;
    let mut history = input.history.clone();
    let mut conditions = Vec::new();
    set(
        &mut conditions,
        ABLE_TO_SCALE,
        true,
        "SucceededGetScale",
        "the HPA controller was able to get the target's current scale",
    );
    let tolerances = Tolerances::for_spec(spec, cfg.tolerance);
    let ctx = CalcContext {
        now,
        current_replicas: current,
        status_replicas: obs.status_replicas.unwrap_or(current),
        tolerances,
        cpu_initialization_period_seconds: cfg.cpu_initialization_period_seconds,
        initial_readiness_delay_seconds: cfg.initial_readiness_delay_seconds,
        readiness_delay_seconds: spec.readiness_delay_seconds.map_or(0, i64::from),
        utilization_base: spec.utilization_base.unwrap_or(UtilizationBase::Requests),
        pods: &obs.pods,
    };
    let wm = WatermarkSettings {
        algorithm: spec.algorithm.unwrap_or_default(),
        modulo: spec.replica_scaling_absolute_modulo.unwrap_or(1).max(1),
        converge: spec.converge_towards_watermark,
        tolerate_zero: spec.tolerate_zero,
        min_replicas: min,
        max_replicas: max,
    };
    let default_metrics;
    let metrics: &[MetricSpec] = if spec.metrics.is_empty() {
        // Upstream's default: CPU utilization 80 %.
        default_metrics = [MetricSpec::resource_default_cpu()];
        &default_metrics
    } else {
        &spec.metrics
    };
    let proposals: Vec<MetricOutcome> =
        metrics.iter().map(|m| evaluate(m, &ctx, obs, wm)).collect();
    let sync = i64::from(spec.sync_period_seconds.unwrap_or(0));
    let next_sync_seconds = if sync > 0 {
        sync
    } else {
        cfg.sync_period_seconds
    }
    .max(cfg.min_sync_period_seconds)
    .max(1);

    let mut d = Decision {
        current_replicas: current,
        desired_replicas: current,
        scale_to: None,
        recommended_replicas: None,
        proposals,
        limited_by: None,
        reason: String::new(),
        conditions: Vec::new(),
        countdowns: Vec::new(),
        next_sync_seconds,
        history: History::default(),
    };

    let computed = compute(input, &ctx, &mut d, &mut history, &mut conditions, min, max);
    d.desired_replicas = computed.value;
    d.limited_by = computed.limited_by;
    d.reason = computed.note.unwrap_or_default();

    let write = apply_gates(spec, obs, &mut d, &mut conditions);
    if write {
        d.scale_to = Some(d.desired_replicas);
    }
    let keep = keep_seconds(spec, cfg);
    history.prune(now, keep);
    d.history = history;
    d.conditions = conditions;
    d
}

/// Rule 11: the gates on writing, in precedence order. Returns whether to write the scale.
fn apply_gates(
    spec: &HorizontalPodAutoscalerPlusSpec,
    obs: &Observation,
    d: &mut Decision,
    conditions: &mut Vec<Condition>,
) -> bool {
    let current = d.current_replicas;
    let mut write = d.desired_replicas != current
        && !matches!(
            d.limited_by,
            Some(LimitedBy::AmbiguousSelector | LimitedBy::ScalingDisabled)
        );
    set(
        conditions,
        PAUSED,
        spec.paused,
        if spec.paused { "Paused" } else { "NotPaused" },
        if spec.paused {
            "scaling is paused; decisions are reported, not applied"
        } else {
            "scaling is not paused"
        },
    );
    set(
        conditions,
        DRY_RUN,
        spec.dry_run,
        if spec.dry_run {
            "DryRunEnabled"
        } else {
            "DryRunDisabled"
        },
        if spec.dry_run {
            "scaling changes are computed but not applied"
        } else {
            "scaling changes are applied"
        },
    );
    if write {
        let wanted = d.desired_replicas;
        let gate = if spec.paused {
            Some((
                LimitedBy::Paused,
                wanted,
                "the autoscaler is paused".to_owned(),
            ))
        } else if let Some(holder) = &obs.held_by {
            Some((
                LimitedBy::CronHold,
                current,
                format!("{holder} holds the target's replicas"),
            ))
        } else if spec.pause_during_rollout && obs.rollout.is_some_and(|r| r.in_progress()) {
            Some((
                LimitedBy::Rollout,
                current,
                "the target is rolling out".to_owned(),
            ))
        } else if spec.dry_run {
            Some((LimitedBy::DryRun, wanted, "dry run".to_owned()))
        } else {
            None
        };
        if let Some((by, desired, why)) = gate {
            write = false;
            d.desired_replicas = desired;
            d.limited_by = Some(by);
            d.reason = format!(
                "{}; not applied: {why} (would scale {current} -> {wanted})",
                d.reason
            );
        }
    }
    write
}

fn keep_seconds(spec: &HorizontalPodAutoscalerPlusSpec, cfg: &ControllerConfig) -> i64 {
    let mut keep = cfg.downscale_stabilization_seconds;
    if let Some(b) = &spec.behavior {
        let up = scale_up_rules(b);
        let down = scale_down_rules(b, cfg.downscale_stabilization_seconds);
        for r in [&up, &down] {
            keep = keep.max(r.window_seconds);
            for p in &r.policies {
                keep = keep.max(p.period_seconds);
            }
        }
    }
    keep
}

#[allow(clippy::too_many_lines)]
fn compute(
    input: &DecisionInput<'_>,
    ctx: &CalcContext<'_>,
    d: &mut Decision,
    history: &mut History,
    conditions: &mut Vec<Condition>,
    min: i32,
    max: i32,
) -> Step {
    let DecisionInput {
        spec,
        observed: obs,
        config: cfg,
        now,
        ..
    } = *input;
    let current = obs.current_replicas;
    let hold = |by: LimitedBy, note: String| Step {
        value: current,
        limited_by: Some(by),
        note: Some(note),
    };

    // 1. Ambiguous selector.
    if !obs.conflicting_autoscalers.is_empty() {
        let msg = format!(
            "pods by selector are controlled by multiple autoscalers: {}",
            obs.conflicting_autoscalers.join(", ")
        );
        set(
            conditions,
            SCALING_ACTIVE,
            false,
            "AmbiguousSelector",
            msg.clone(),
        );
        return hold(LimitedBy::AmbiguousSelector, msg);
    }
    // 2. Scaling disabled at zero.
    if current == 0 && min != 0 {
        let msg = "scaling is disabled since the replica count of the target is zero";
        set(conditions, SCALING_ACTIVE, false, "ScalingDisabled", msg);
        return hold(LimitedBy::ScalingDisabled, msg.to_owned());
    }
    // 3. Out of range: no metrics consulted.
    if current > max {
        return Step {
            value: max,
            limited_by: Some(LimitedBy::MaxReplicas),
            note: Some(format!(
                "Current number of replicas above Spec.MaxReplicas: {current} -> {max}"
            )),
        };
    }
    if current < min {
        return Step {
            value: min,
            limited_by: Some(LimitedBy::MinReplicas),
            note: Some(format!(
                "Current number of replicas below Spec.MinReplicas: {current} -> {min}"
            )),
        };
    }
    // 4. Minimum available pods.
    if let Some(required) = spec.min_available_replica_percentage.filter(|p| *p > 0) {
        let counted = obs.pods.iter().filter(|p| !p.deleting).count();
        let ready = obs
            .pods
            .iter()
            .filter(|p| !p.deleting && p.phase == PodPhase::Running && p.ready == Some(true))
            .filter(|p| {
                ctx.readiness_delay_seconds <= 0
                    || p.start_time.is_some_and(|s| {
                        super::history::seconds_between(s, now)
                            >= ctx.readiness_delay_seconds as f64
                    })
            })
            .count();
        let pct = available_percentage(ready, counted).unwrap_or(0);
        if pct < required {
            let msg = format!(
                "{pct} % of the pods are available, below minAvailableReplicaPercentage {required} %"
            );
            set(
                conditions,
                SCALING_ACTIVE,
                false,
                "NotEnoughAvailablePods",
                msg.clone(),
            );
            return hold(LimitedBy::MinAvailable, msg);
        }
    }
    // 5. Metrics.
    let valid: Vec<&MetricOutcome> = d
        .proposals
        .iter()
        .filter(|p| p.replicas.is_some())
        .collect();
    let first_failure = d.proposals.iter().find(|p| p.error.is_some());
    let mut best: Option<&MetricOutcome> = None;
    for p in &valid {
        if best.is_none_or(|b| p.replicas > b.replicas) {
            best = Some(p);
        }
    }
    let Some(best) = best else {
        let (reason, msg) =
            first_failure.map_or(("FailedGetResourceMetric", "no metrics".to_owned()), |f| {
                (
                    f.failure_reason.unwrap_or("FailedGetResourceMetric"),
                    f.error.clone().unwrap_or_default(),
                )
            });
        set(
            conditions,
            SCALING_ACTIVE,
            false,
            reason,
            format!("the HPA was unable to compute the replica count: {msg}"),
        );
        return hold(
            LimitedBy::MetricsUnavailable,
            format!("no metric could be computed: {msg}"),
        );
    };
    let mut recommendation = best.replicas.unwrap_or(current);
    let metric_name = best.metric.clone();
    if let Some(f) = first_failure
        && recommendation < current
    {
        let msg = f.error.clone().unwrap_or_default();
        set(
            conditions,
            SCALING_ACTIVE,
            false,
            f.failure_reason.unwrap_or("FailedGetResourceMetric"),
            format!("the HPA was unable to compute the replica count: {msg}"),
        );
        return hold(
            LimitedBy::MetricsUnavailable,
            format!(
                "a metric failed ({msg}) and the others propose fewer replicas; not scaling down"
            ),
        );
    }
    set(
        conditions,
        SCALING_ACTIVE,
        true,
        "ValidMetricFound",
        format!("the HPA was able to successfully calculate a replica count from {metric_name}"),
    );
    // Modulo applies to every proposal's change (watermark ones already did it).
    let modulo = spec.replica_scaling_absolute_modulo.unwrap_or(1).max(1);
    if modulo > 1 && recommendation != current {
        let rounded = round_up_to_modulo(recommendation, modulo);
        recommendation = if recommendation < current {
            rounded.min(current)
        } else {
            rounded
        };
    }
    d.recommended_replicas = Some(recommendation);
    let base = match recommendation.cmp(&current) {
        std::cmp::Ordering::Greater => format!("{metric_name} above target"),
        std::cmp::Ordering::Less => "All metrics below target".to_owned(),
        std::cmp::Ordering::Equal => "recommended size matches current size".to_owned(),
    };
    let mut step = Step {
        value: recommendation,
        limited_by: None,
        note: None,
    };
    if recommendation == current {
        let watermark = valid.iter().any(|p| p.position.is_some());
        let all_quiet = valid.iter().all(|p| {
            p.within_tolerance
                || p.position == Some(Position::Within)
                || p.replicas == Some(current)
        });
        if all_quiet && valid.iter().any(|p| p.within_tolerance) {
            step.limited_by = Some(LimitedBy::Tolerance);
            step.note = Some("every metric is within its tolerance".into());
        } else if all_quiet && watermark {
            step.limited_by = Some(LimitedBy::WithinWatermarks);
            step.note = Some("every watermark metric is within its watermarks".into());
        }
    }

    // 6. Stabilization.
    let stabilized = if let Some(b) = &spec.behavior {
        let up = scale_up_rules(b);
        let down = scale_down_rules(b, cfg.downscale_stabilization_seconds);
        stabilize_with_behaviors(
            current,
            recommendation,
            history,
            up.window_seconds,
            down.window_seconds,
            now,
        )
    } else {
        stabilize_default(
            recommendation,
            history,
            cfg.downscale_stabilization_seconds,
            now,
        )
    };
    history.recommendations.push(TimedReplicas {
        at: now,
        replicas: recommendation,
    });
    if stabilized == recommendation {
        set(
            conditions,
            ABLE_TO_SCALE,
            true,
            "ReadyForNewScale",
            "recommended size matches current size",
        );
    } else {
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
        set(conditions, ABLE_TO_SCALE, true, reason, msg);
        step.limit(stabilized, LimitedBy::Stabilization, msg.to_owned());
    }

    // 7 + 8. Rate limits, then min/max.
    let up_pct = pct_of(spec.scale_up_limit_factor.as_ref())
        .or_else(|| cfg.scale_up_limit_factor.map(|f| (f - 1.0) * 100.0));
    let down_pct = pct_of(spec.scale_down_limit_factor.as_ref())
        .or_else(|| cfg.scale_down_limit_factor.map(|f| f * 100.0));
    let mut limited_reason = (
        "DesiredWithinRange",
        "the desired count is within the acceptable range".to_owned(),
    );
    if step.value > current {
        let mut cap = i32::MAX;
        let mut cap_by = LimitedBy::ScaleUpLimit;
        let mut cap_reason = "ScaleUpLimit";
        if let Some(b) = &spec.behavior {
            let rules = scale_up_rules(b);
            cap = scale_up_limit(current, history, &rules, now).max(current);
            cap_by = LimitedBy::Policy;
        } else if up_pct.is_none() {
            cap = default_scale_up_limit(current);
        }
        if let Some(pct) = up_pct {
            let f = factor_scale_up_limit(current, pct);
            if f < cap {
                cap = f;
                cap_by = LimitedBy::ScaleUpLimit;
            }
        }
        let (allowed, by) = if max > cap {
            (cap, cap_by)
        } else {
            cap_reason = "TooManyReplicas";
            (max, LimitedBy::MaxReplicas)
        };
        if step.value > allowed {
            let msg = if by == LimitedBy::MaxReplicas {
                "the desired replica count is more than the maximum replica count"
            } else {
                "the desired replica count is increasing faster than the maximum scale rate"
            };
            limited_reason = (cap_reason, msg.to_owned());
            step.limit(allowed, by, format!("{msg} (at most {allowed})"));
        }
    } else if step.value < current {
        let mut floor = i32::MIN;
        let mut floor_by = LimitedBy::ScaleDownLimit;
        let mut floor_reason = "ScaleDownLimit";
        if let Some(b) = &spec.behavior {
            let rules = scale_down_rules(b, cfg.downscale_stabilization_seconds);
            floor = scale_down_limit(current, history, &rules, now).min(current);
            floor_by = LimitedBy::Policy;
        }
        let mut factor_applies = false;
        if let Some(pct) = down_pct {
            let f = factor_scale_down_limit(current, pct);
            if f > floor {
                floor = f;
                floor_by = LimitedBy::ScaleDownLimit;
            }
            factor_applies = step.value < f;
        }
        let (allowed, by) = if min < floor {
            (floor, floor_by)
        } else {
            floor_reason = "TooFewReplicas";
            (min, LimitedBy::MinReplicas)
        };
        if step.value < allowed {
            let msg = if by == LimitedBy::MinReplicas {
                "the desired replica count is less than the minimum replica count"
            } else {
                "the desired replica count is decreasing faster than the maximum scale rate"
            };
            limited_reason = (floor_reason, msg.to_owned());
            step.limit(allowed, by, format!("{msg} (at least {allowed})"));
        }
        // WPA: when the scale-down factor caps the step and fewer pods are ready than it would
        // keep, do not scale down at all.
        if factor_applies {
            let ready = obs
                .pods
                .iter()
                .filter(|p| !p.deleting && p.phase == PodPhase::Running && p.ready == Some(true))
                .count() as i32;
            if ready > 0 && ready < step.value {
                step.limit(
                    current,
                    LimitedBy::ReadyPods,
                    format!("only {ready} pods are ready, fewer than the {} a limited scale-down would keep", step.value),
                );
            }
        }
    }
    // The clamp also covers proposals that stay on the current count but out of range.
    if step.value > max {
        step.limit(
            max,
            LimitedBy::MaxReplicas,
            "the desired replica count is more than the maximum replica count".into(),
        );
    } else if step.value < min {
        step.limit(
            min,
            LimitedBy::MinReplicas,
            "the desired replica count is less than the minimum replica count".into(),
        );
    }
    set(
        conditions,
        SCALING_LIMITED,
        step.value != stabilized,
        limited_reason.0,
        limited_reason.1,
    );

    // 9. Forbidden windows.
    let up_left = countdown(
        history.last_scale_time,
        spec.upscale_forbidden_window_seconds.map_or(0, i64::from),
        now,
    );
    let down_left = countdown(
        history.last_scale_time,
        spec.downscale_forbidden_window_seconds.map_or(0, i64::from),
        now,
    );
    if up_left > 0 {
        d.countdowns.push(Countdown {
            transition: "upscaleForbiddenWindow",
            seconds_left: up_left,
        });
    }
    if down_left > 0 {
        d.countdowns.push(Countdown {
            transition: "downscaleForbiddenWindow",
            seconds_left: down_left,
        });
    }
    let blocked = (step.value > current && up_left > 0) || (step.value < current && down_left > 0);
    if up_left > 0 || down_left > 0 {
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
        if blocked {
            set(conditions, ABLE_TO_SCALE, false, reason, msg);
            let left = if step.value > current {
                up_left
            } else {
                down_left
            };
            step.limit(
                current,
                LimitedBy::ForbiddenWindow,
                format!("{msg} ({left} s left)"),
            );
        }
    }

    // 10. Watermark delays (OR over metrics).
    let above = d
        .proposals
        .iter()
        .any(|p| p.position == Some(Position::Above));
    let below = d
        .proposals
        .iter()
        .any(|p| p.position == Some(Position::Below));
    history.above_high_since = if above {
        history.above_high_since.or(Some(now))
    } else {
        None
    };
    history.below_low_since = if below {
        history.below_low_since.or(Some(now))
    } else {
        None
    };
    let stable = !above && !below;
    if !stable {
        let (transition, since, delay) = if step.value > current {
            (
                "upscaleDelay",
                history.above_high_since,
                spec.upscale_delay_above_watermark_seconds,
            )
        } else {
            (
                "downscaleDelay",
                history.below_low_since,
                spec.downscale_delay_below_watermark_seconds,
            )
        };
        let left = delay_left(since, delay.map_or(0, i64::from), now);
        if left > 0 && step.value != current {
            d.countdowns.push(Countdown {
                transition,
                seconds_left: left,
            });
            step.limit(
                current,
                LimitedBy::WatermarkDelay,
                format!("the value has not been out of its watermarks long enough ({left} s left)"),
            );
        }
    }

    let note = match (&step.note, step.value == recommendation) {
        (Some(n), false) => format!(
            "{base}: recommended {recommendation}, {n}; desired {}",
            step.value
        ),
        (Some(n), true) => format!("{n}; keeping {current} replicas"),
        (None, true) if recommendation == current => format!("{base} ({current})"),
        (None, _) => format!("{base}: {current} -> {}", step.value),
    };
    step.note = Some(note);
    step
}

impl MetricSpec {
    /// Upstream's default metric: CPU utilization 80 %.
    pub fn resource_default_cpu() -> Self {
        Self {
            type_: crate::api::hpa_plus::MetricSourceType::Resource,
            resource: Some(crate::api::hpa_plus::ResourceMetricSource {
                name: "cpu".into(),
                target: MetricTarget {
                    type_: crate::api::hpa_plus::MetricTargetType::Utilization,
                    average_utilization: Some(80),
                    ..MetricTarget::default()
                },
            }),
            ..Self::default()
        }
    }
}
