//! The one entry point: spec + observation + history + controller config + `now` → [`Decision`].
//!
//! Rules apply in this order (docs/hpa-plus.md has the same table); the first rule that ends the
//! evaluation wins, later rules only narrow the result:
//!
//! 1. `AmbiguousSelector`: another autoscaler selects the same pods → no change.
//! 2. `ScalingDisabled`: the target has 0 replicas the autoscaler did not make (no previous
//!    `ScaledToZero=True`, KEP-2021) → no change.
//! 3. Out of range: current > `maxReplicas` → `maxReplicas`; current < `minReplicas` →
//!    `minReplicas` (metrics are not consulted, as upstream).
//! 4. `minAvailable`: fewer than `minAvailableReplicaPercentage` of the pods are ready → no change.
//! 5. Metrics: each metric proposes (tolerance, watermarks, modulo inside); a metric that has
//!    failed for its `fallback.failureDuration` proposes its `fallback.replicas` (KEP-5679,
//!    [`super::fallback`]); all failing, or some failing while the rest propose fewer than
//!    current → no change (`metricsUnavailable`).
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
//!
//! Each rule is a named function that returns what it would do, and [`decide`] applies them in
//! this order: [`precheck`] (1–4), [`propose`] and [`recommend`] (5), [`stabilize`] (6),
//! [`rate_limit`] with [`ready_pods_guard`] (7), [`clamp_to_bounds`] (8),
//! [`forbidden_windows`] (9), [`watermark_delays`] (10), [`write_gate`] (11).

use jiff::Timestamp;
use serde::Serialize;

pub use super::config::ControllerConfig;
pub use super::limited::{Countdown, LimitedBy};

use super::behavior::{scale_down_rules, scale_up_rules, stabilize};
use super::conditions::{ABLE_TO_SCALE, Condition, SCALING_LIMITED, put};
use super::gates::{gate_conditions, wants_write, write_gate};
use super::history::History;
use super::limited::Limited;
use super::limits::{
    Bounds, LimitFactors, RateInput, clamp_to_bounds, forbidden_windows, rate_limit, ready_pods,
    ready_pods_guard, watermark_delays,
};
use super::observation::Observation;
use super::preconditions::precheck;
use super::proposals::{MetricOutcome, Recommendation, modulo, propose, recommend};
use super::watermark::Position;
use crate::api::hpa_plus::{HorizontalPodAutoscalerPlusSpec, MetricSpec, MetricTarget};

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

/// Decides the replicas of one autoscaler.
pub fn decide(input: &DecisionInput<'_>) -> Decision {
    let DecisionInput {
        spec,
        observed,
        config,
        now,
        ..
    } = *input;
    let current = observed.current_replicas;
    let mut proposals = propose(spec, observed, config, now);
    // KEP-5679: a metric failing for its `failureDuration` proposes its fallback replicas.
    let fallback =
        super::fallback::apply(spec, &mut proposals, &input.history.metric_failures, now);
    let mut conditions = vec![Condition::new(
        ABLE_TO_SCALE,
        true,
        "SucceededGetScale",
        "the HPA controller was able to get the target's current scale",
    )];
    let verdict = match precheck(spec, observed, Bounds::of(spec), now) {
        Some(hold) => Err(hold),
        None => recommend(&proposals, current, modulo(spec)),
    };
    let ruled = match verdict {
        Err(hold) => Ruled {
            conditions: hold.condition.iter().cloned().collect(),
            limited: hold.into(),
            recommended: None,
            countdowns: Vec::new(),
            history: input.history.clone(),
        },
        Ok(recommendation) => limit(input, &proposals, &recommendation),
    };
    // Rule 11: the gates on writing.
    let rollout = super::rollout::condition(spec, observed);
    for c in ruled
        .conditions
        .into_iter()
        .chain(gate_conditions(spec))
        .chain(rollout)
    {
        put(&mut conditions, c);
    }
    let Limited {
        value: decided,
        limited_by,
        note,
    } = ruled.limited;
    let reason = note.unwrap_or_default();
    let gate = wants_write(current, decided, limited_by)
        .then(|| write_gate(spec, observed, current, decided));
    let (desired_replicas, limited_by, reason, scale_to) = match gate {
        None => (decided, limited_by, reason, None),
        Some(None) => (decided, limited_by, reason, Some(decided)),
        Some(Some(gate)) => (
            gate.desired,
            Some(gate.by),
            format!(
                "{reason}; not applied: {} (would scale {current} -> {decided})",
                gate.why
            ),
            None,
        ),
    };
    // KEP-2021: every rescale says whether it took the target to zero.
    if let Some(c) = super::scale_to_zero::condition(spec, current, scale_to) {
        put(&mut conditions, c);
    }
    if let Some(c) = fallback.condition {
        put(&mut conditions, c);
    }
    let mut history = ruled.history;
    history.metric_failures = fallback.failures;
    history.prune(now, keep_seconds(spec, config));
    Decision {
        current_replicas: current,
        desired_replicas,
        scale_to,
        recommended_replicas: ruled.recommended,
        proposals,
        limited_by,
        reason,
        conditions,
        countdowns: ruled.countdowns,
        next_sync_seconds: config.sync_period_seconds(spec),
        history,
    }
}

/// What rules 1–10 leave for the gates.
struct Ruled {
    limited: Limited,
    recommended: Option<i32>,
    conditions: Vec<Condition>,
    countdowns: Vec<Countdown>,
    history: History,
}

/// Rules 6–10 over a recommendation, in order.
fn limit(
    input: &DecisionInput<'_>,
    proposals: &[MetricOutcome],
    recommendation: &Recommendation,
) -> Ruled {
    let DecisionInput {
        spec,
        observed,
        config,
        now,
        ..
    } = *input;
    let current = observed.current_replicas;
    let recommended = recommendation.replicas;
    let bounds = Bounds::of(spec);
    let mut history = input.history.clone();
    let mut conditions = vec![recommendation.condition.clone()];

    let stabilized = stabilize(
        spec.behavior.as_ref(),
        config.downscale_stabilization_seconds,
        current,
        recommended,
        &history,
        now,
    );
    history.record_recommendation(now, recommended);
    conditions.push(stabilized.condition);
    let mut step = recommendation.limited().apply(stabilized.limit);

    let rate = rate_limit(&RateInput {
        current,
        desired: step.value,
        bounds,
        behavior: spec.behavior.as_ref(),
        downscale_stabilization_seconds: config.downscale_stabilization_seconds,
        factors: LimitFactors::for_spec(spec, config),
        history: &history,
        now,
    });
    step = step.apply(rate.limit);
    if rate.factor_caps_scale_down {
        let guard = ready_pods_guard(current, step.value, ready_pods(&observed.pods));
        step = step.apply(guard);
    }
    let clamp = clamp_to_bounds(step.value, bounds);
    step = step.apply(clamp);
    conditions.push(Condition::new(
        SCALING_LIMITED,
        step.value != stabilized.replicas,
        rate.reason,
        rate.message,
    ));

    let windows = forbidden_windows(spec, history.last_scale_time, current, step.value, now);
    let mut countdowns = windows.countdowns;
    if let Some((condition, hold)) = windows.blocked {
        conditions.push(condition);
        step = step.apply(Some(hold));
    }

    let positions: Vec<Position> = proposals.iter().filter_map(|p| p.position).collect();
    let delays = watermark_delays(spec, &positions, &history, current, step.value, now);
    history.above_high_since = delays.above_high_since;
    history.below_low_since = delays.below_low_since;
    countdowns.extend(delays.countdown);
    step = step.apply(delays.limit);

    let note = explain(recommendation, current, &step);
    Ruled {
        limited: Limited {
            note: Some(note),
            ..step
        },
        recommended: Some(recommended),
        conditions,
        countdowns,
        history,
    }
}

/// The decision's reason: what the metrics recommended and, when a rule changed or held it,
/// which and why.
fn explain(recommendation: &Recommendation, current: i32, step: &Limited) -> String {
    let recommended = recommendation.replicas;
    let summary = recommendation.summary(current);
    match (&step.note, step.value == recommended) {
        (Some(n), false) => format!(
            "{summary}: recommended {recommended}, {n}; desired {}",
            step.value
        ),
        (Some(n), true) => format!("{n}; keeping {current} replicas"),
        (None, true) if recommended == current => format!("{summary} ({current})"),
        (None, _) => format!("{summary}: {current} -> {}", step.value),
    }
}

/// How long the history must remember: the longest stabilization window or policy period in
/// use (seconds).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::horizontal::conditions::SCALING_ACTIVE;
    use crate::horizontal::limited::Limit;

    fn recommendation(replicas: i32) -> Recommendation {
        Recommendation {
            replicas,
            metric: "cpu".into(),
            condition: Condition::new(SCALING_ACTIVE, true, "ValidMetricFound", ""),
            quiet: None,
        }
    }

    #[test]
    fn the_reason_says_what_was_recommended_and_what_limited_it() {
        let r = recommendation(8);
        let free = r.limited();
        assert_eq!(explain(&r, 4, &free), "cpu above target: 4 -> 8");
        let capped = free.apply(Some(Limit::new(6, LimitedBy::Policy, "capped")));
        assert_eq!(
            explain(&r, 4, &capped),
            "cpu above target: recommended 8, capped; desired 6"
        );
        let same = recommendation(4);
        assert_eq!(
            explain(&same, 4, &same.limited()),
            "recommended size matches current size (4)"
        );
        let quiet = Recommendation {
            quiet: Some((LimitedBy::Tolerance, "every metric is within its tolerance")),
            ..recommendation(4)
        };
        assert_eq!(
            explain(&quiet, 4, &quiet.limited()),
            "every metric is within its tolerance; keeping 4 replicas"
        );
    }

    #[test]
    fn history_is_kept_for_the_longest_window_or_period() {
        let cfg = ControllerConfig::default();
        let mut spec = HorizontalPodAutoscalerPlusSpec::default();
        assert_eq!(keep_seconds(&spec, &cfg), 300);
        spec.behavior = serde_json::from_value(serde_json::json!({
            "scaleUp": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 900}]}
        }))
        .unwrap();
        assert_eq!(keep_seconds(&spec, &cfg), 900);
    }
}
