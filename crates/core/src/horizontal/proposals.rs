//! The first two steps of a decision.
//!
//! * [`propose`] (the metrics): one proposal per metric of the spec, picking the calculation for
//!   the metric's source and target type (upstream replica calculator or watermark) and
//!   reporting the value it saw.
//! * [`recommend`] (rule 5): the largest proposal, unless every metric failed, or some failed
//!   while the others propose fewer replicas than current (upstream does not scale down on
//!   partial data); rounded to `replicaScalingAbsoluteModulo`.

use std::borrow::Cow;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Serialize;

use super::conditions::{Condition, SCALING_ACTIVE};
use super::config::ControllerConfig;
use super::limited::{Hold, Limited, LimitedBy};
use super::limits::Bounds;
use super::metrics::{
    CalcContext, group_pods, per_pod_metric, plain_metric, ready_pod_count, resource_utilization,
    value_metric,
};
use super::observation::Observation;
use super::source::{self, MetricSource, Seen};
use super::tolerance::Tolerances;
use super::watermark::{Position, WatermarkInput, round_up_to_modulo, watermark_replicas};
use crate::api::hpa_plus::{
    Algorithm, ConvergeTowardsWatermark, HorizontalPodAutoscalerPlusSpec, MetricSpec, MetricStatus,
    MetricTarget, MetricTargetType, MetricValueStatus, quantity_milli,
};
use crate::quantity::saturating_total;

pub use super::source::metric_name;
pub use super::source::object::object_key;
pub use super::source::prometheus::PROMETHEUS_SERVER_NOT_ALLOWED;

/// What one metric proposed.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricOutcome {
    /// `cpu`, `cpu/app` (container), the Pods metric name, `Kind/name/metric`, or the External
    /// metric name.
    pub metric: String,
    /// Proposed replicas; `None` when the metric failed.
    pub replicas: Option<i32>,
    /// The value compared with the target: percent for utilization, units otherwise.
    pub value: Option<f64>,
    /// The target in the same unit as `value` (`Utilization`, `Value`, `AverageValue`).
    pub target: Option<f64>,
    /// Low watermark in units.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub low_watermark: Option<f64>,
    /// High watermark in units.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub high_watermark: Option<f64>,
    /// The ratio was within tolerance (upstream targets).
    pub within_tolerance: bool,
    /// Where a watermark value sits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<Position>,
    /// Why the metric failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Upstream's condition reason for the failure (`FailedGetResourceMetric`, …).
    #[serde(skip)]
    pub failure_reason: Option<&'static str>,
    /// The `status.currentMetrics` entry.
    #[serde(skip)]
    pub status: Option<MetricStatus>,
    /// `current/target` for the TARGETS column, e.g. `66%/40%`.
    #[serde(skip)]
    pub summary: String,
}

/// Spec-level settings the watermark calculation needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WatermarkSettings {
    pub algorithm: Algorithm,
    pub modulo: i32,
    pub converge: Option<ConvergeTowardsWatermark>,
    pub tolerate_zero: bool,
    pub min_replicas: i32,
    pub max_replicas: i32,
}

/// The metrics step: what each metric of `spec` proposes (upstream's default, CPU utilization
/// 80 %, when the spec has none), in the order of the spec.
pub fn propose(
    spec: &HorizontalPodAutoscalerPlusSpec,
    observed: &Observation,
    config: &ControllerConfig,
    now: Timestamp,
) -> Vec<MetricOutcome> {
    let current = observed.current_replicas;
    let ctx = CalcContext {
        now,
        current_replicas: current,
        status_replicas: observed.status_replicas.unwrap_or(current),
        tolerances: Tolerances::for_spec(spec, config.tolerance),
        cpu_initialization_period_seconds: config.cpu_initialization_period_seconds,
        initial_readiness_delay_seconds: config.initial_readiness_delay_seconds,
        readiness_delay_seconds: spec.readiness_delay_seconds.map_or(0, i64::from),
        utilization_base: config.utilization_base(spec),
        pods: &observed.pods,
    };
    let bounds = Bounds::of(spec);
    let wm = WatermarkSettings {
        algorithm: spec.algorithm.unwrap_or_default(),
        modulo: modulo(spec),
        converge: spec.converge_towards_watermark,
        tolerate_zero: spec.tolerate_zero,
        min_replicas: bounds.min,
        max_replicas: bounds.max,
    };
    metrics_of(spec)
        .iter()
        .map(|m| evaluate(m, &ctx, observed, wm))
        .collect()
}

/// The metrics a spec is evaluated on: its own, or upstream's default (CPU utilization 80 %)
/// when it has none.
pub fn metrics_of(spec: &HorizontalPodAutoscalerPlusSpec) -> Cow<'_, [MetricSpec]> {
    if spec.metrics.is_empty() {
        Cow::Owned(vec![MetricSpec::resource_default_cpu()])
    } else {
        Cow::Borrowed(&spec.metrics)
    }
}

/// `replicaScalingAbsoluteModulo`, 1 (no rounding) when unset or below 1.
pub fn modulo(spec: &HorizontalPodAutoscalerPlusSpec) -> i32 {
    spec.replica_scaling_absolute_modulo.unwrap_or(1).max(1)
}

/// Rule 5's verdict when the metrics decide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recommendation {
    /// The largest proposal, rounded to `replicaScalingAbsoluteModulo`.
    pub replicas: i32,
    /// The metric that proposed it.
    pub metric: String,
    /// `ScalingActive=True` (`ValidMetricFound`).
    pub condition: Condition,
    /// When the count does not move because every metric is quiet: the rule that says so
    /// (`tolerance` or `withinWatermarks`) and a note.
    pub quiet: Option<(LimitedBy, &'static str)>,
}

impl Recommendation {
    /// Where the limiting steps start: the recommendation, with the quiet rule if any.
    pub fn limited(&self) -> Limited {
        Limited {
            value: self.replicas,
            limited_by: self.quiet.map(|(by, _)| by),
            note: self.quiet.map(|(_, note)| note.to_owned()),
        }
    }

    /// The opening words of the decision's reason, relative to `current`.
    pub fn summary(&self, current: i32) -> String {
        match self.replicas.cmp(&current) {
            std::cmp::Ordering::Greater => format!("{} above target", self.metric),
            std::cmp::Ordering::Less => "All metrics below target".to_owned(),
            std::cmp::Ordering::Equal => "recommended size matches current size".to_owned(),
        }
    }
}

/// Rule 5: the recommendation from the proposals, or the hold when the metrics cannot be
/// trusted. `modulo` is [`modulo`] of the spec; it applies to every change (watermark
/// proposals already did it).
pub fn recommend(
    proposals: &[MetricOutcome],
    current: i32,
    modulo: i32,
) -> Result<Recommendation, Hold> {
    let first_failure = proposals.iter().find(|p| p.error.is_some());
    let unable = |f: Option<&MetricOutcome>, note: &dyn Fn(&str) -> String| {
        let (reason, msg) = f.map_or(("FailedGetResourceMetric", "no metrics".to_owned()), |f| {
            (
                f.failure_reason.unwrap_or("FailedGetResourceMetric"),
                f.error.clone().unwrap_or_default(),
            )
        });
        Hold {
            value: current,
            by: LimitedBy::MetricsUnavailable,
            note: note(&msg),
            condition: Some(Condition::new(
                SCALING_ACTIVE,
                false,
                reason,
                format!("the HPA was unable to compute the replica count: {msg}"),
            )),
        }
    };
    let Some((best, largest)) = largest_proposal(proposals) else {
        return Err(unable(first_failure, &|msg| {
            format!("no metric could be computed: {msg}")
        }));
    };
    if first_failure.is_some() && largest < current {
        return Err(unable(first_failure, &|msg| {
            format!(
                "a metric failed ({msg}) and the others propose fewer replicas; not scaling down"
            )
        }));
    }
    let replicas = round_change_to_modulo(current, largest, modulo);
    Ok(Recommendation {
        replicas,
        condition: Condition::new(
            SCALING_ACTIVE,
            true,
            "ValidMetricFound",
            format!(
                "the HPA was able to successfully calculate a replica count from {}",
                best.metric
            ),
        ),
        metric: best.metric.clone(),
        quiet: (replicas == current)
            .then(|| quiet_rule(proposals, current))
            .flatten(),
    })
}

/// The first of the largest proposals, with its count.
fn largest_proposal(proposals: &[MetricOutcome]) -> Option<(&MetricOutcome, i32)> {
    let mut best: Option<(&MetricOutcome, i32)> = None;
    for p in proposals {
        if let Some(r) = p.replicas
            && best.is_none_or(|(_, b)| r > b)
        {
            best = Some((p, r));
        }
    }
    best
}

/// A change rounded up to a multiple of `modulo`; a scale-down never rounds above `current`.
pub fn round_change_to_modulo(current: i32, recommendation: i32, modulo: i32) -> i32 {
    if modulo <= 1 || recommendation == current {
        return recommendation;
    }
    let rounded = round_up_to_modulo(recommendation, modulo);
    if recommendation < current {
        rounded.min(current)
    } else {
        rounded
    }
}

/// Why a recommendation equal to `current` does not move: every metric that proposed is within
/// its tolerance or band (or proposes `current`), and some is within tolerance (`tolerance`)
/// or some is a watermark (`withinWatermarks`).
fn quiet_rule(proposals: &[MetricOutcome], current: i32) -> Option<(LimitedBy, &'static str)> {
    let valid = || proposals.iter().filter(|p| p.replicas.is_some());
    let all_quiet = valid().all(|p| {
        p.within_tolerance || p.position == Some(Position::Within) || p.replicas == Some(current)
    });
    if !all_quiet {
        None
    } else if valid().any(|p| p.within_tolerance) {
        Some((LimitedBy::Tolerance, "every metric is within its tolerance"))
    } else if valid().any(|p| p.position.is_some()) {
        Some((
            LimitedBy::WithinWatermarks,
            "every watermark metric is within its watermarks",
        ))
    } else {
        None
    }
}

/// Milli-units of a quantity, rounded up as `MilliValue()` does.
pub(crate) fn milli(q: &Quantity) -> Result<i64, String> {
    quantity_milli(q)
}

fn display_milli(m: i64) -> String {
    if m % 1000 == 0 {
        format!("{}", m / 1000)
    } else {
        format!("{m}m")
    }
}

fn q_milli(m: i64) -> Quantity {
    Quantity(display_milli(m))
}

fn failed(metric: String, reason: &'static str, error: String) -> MetricOutcome {
    MetricOutcome {
        summary: format!("{metric}: <unknown>"),
        metric,
        replicas: None,
        value: None,
        target: None,
        low_watermark: None,
        high_watermark: None,
        within_tolerance: false,
        position: None,
        error: Some(error),
        failure_reason: Some(reason),
        status: None,
    }
}

/// Evaluates one metric of the spec.
pub(crate) fn evaluate(
    m: &MetricSpec,
    ctx: &CalcContext<'_>,
    obs: &Observation,
    wm: WatermarkSettings,
) -> MetricOutcome {
    let name = metric_name(m);
    let reason = source::kind(m).failure_reason;
    let Some(source) = source::of(m) else {
        return failed(
            name,
            "InvalidMetricSourceType",
            format!("metric of type {:?} has no {:?} source", m.type_, m.type_),
        );
    };
    let target = source.target();
    let seen = match source.read(obs) {
        Ok(s) => s,
        Err(e) => {
            let reason = source.read_failure_reason(obs).unwrap_or(reason);
            return failed(name, reason, e);
        }
    };
    let result = match (target.type_, seen) {
        (MetricTargetType::Utilization, Seen::PerPod { cpu: _, .. }) => {
            utilization_outcome(source, ctx, target, &name)
        }
        (MetricTargetType::AverageValue, Seen::PerPod { values, cpu }) => {
            let t = target
                .average_value
                .as_ref()
                .ok_or("averageValue is required")
                .map_err(str::to_owned)
                .and_then(milli);
            t.and_then(|t| {
                plain_metric(ctx, values, t, cpu).map(|c| {
                    let mut o = ok_outcome(&name, c.replicas, c.usage as f64 / 1000.0, t);
                    o.within_tolerance = c.within_tolerance;
                    o.summary = format!("{name}: {}/{}", display_milli(c.usage), display_milli(t));
                    o.status = Some(status(source, None, Some(c.usage), None));
                    o
                })
            })
        }
        (MetricTargetType::Value, Seen::Total(usage)) => target
            .value
            .as_ref()
            .ok_or_else(|| "value is required".to_owned())
            .and_then(milli)
            .and_then(|t| {
                value_metric(ctx, usage, t).map(|c| {
                    let mut o = ok_outcome(&name, c.replicas, usage as f64 / 1000.0, t);
                    o.within_tolerance = c.within_tolerance;
                    o.summary = format!("{name}: {}/{}", display_milli(usage), display_milli(t));
                    o.status = Some(status(source, Some(usage), None, None));
                    o
                })
            }),
        (MetricTargetType::AverageValue, Seen::Total(usage)) => target
            .average_value
            .as_ref()
            .ok_or_else(|| "averageValue is required".to_owned())
            .and_then(milli)
            .map(|t| {
                let c = per_pod_metric(ctx, usage, t);
                let mut o = ok_outcome(&name, c.replicas, c.usage as f64 / 1000.0, t);
                o.within_tolerance = c.within_tolerance;
                o.summary = format!(
                    "{name}: {}/{} (avg)",
                    display_milli(c.usage),
                    display_milli(t)
                );
                o.status = Some(status(source, None, Some(c.usage), None));
                o
            }),
        (MetricTargetType::Watermark, seen) => {
            watermark_outcome(m, source, ctx, target, &name, seen, wm)
        }
        (t, _) => Err(format!(
            "target type {t:?} is not supported for {:?} metrics",
            m.type_
        )),
    };
    result.unwrap_or_else(|e| failed(name, reason, e))
}

/// `v` within the `i32` range: past it, the nearest end, never a wrapped value.
fn clamp_i32(v: i64) -> i32 {
    i32::try_from(v).unwrap_or(if v < 0 { i32::MIN } else { i32::MAX })
}

fn ok_outcome(name: &str, replicas: i32, value: f64, target_milli: i64) -> MetricOutcome {
    MetricOutcome {
        metric: name.to_owned(),
        replicas: Some(replicas),
        value: Some(value),
        target: Some(target_milli as f64 / 1000.0),
        low_watermark: None,
        high_watermark: None,
        within_tolerance: false,
        position: None,
        error: None,
        failure_reason: None,
        status: None,
        summary: String::new(),
    }
}

fn utilization_outcome(
    source: &dyn MetricSource,
    ctx: &CalcContext<'_>,
    target: &MetricTarget,
    name: &str,
) -> Result<MetricOutcome, String> {
    let pct = target
        .average_utilization
        .ok_or("averageUtilization is required")?;
    let (resource, container) = source.pod_resource().ok_or("metric source is missing")?;
    let c = resource_utilization(ctx, resource, container, pct)?;
    Ok(MetricOutcome {
        metric: name.to_owned(),
        replicas: Some(c.replicas),
        value: Some(c.usage as f64),
        target: Some(f64::from(pct)),
        low_watermark: None,
        high_watermark: None,
        within_tolerance: c.within_tolerance,
        position: None,
        error: None,
        failure_reason: None,
        // A one-byte memory request and 100Mi in use is about 1e10 %: written as i32::MAX,
        // where a cast would wrap it to some other (even negative) figure.
        status: Some(status(source, None, None, Some(clamp_i32(c.usage)))),
        summary: format!("{name}: {}%/{pct}%", c.usage),
    })
}

fn watermark_outcome(
    m: &MetricSpec,
    source: &dyn MetricSource,
    ctx: &CalcContext<'_>,
    target: &MetricTarget,
    name: &str,
    seen: Seen,
    wm: WatermarkSettings,
) -> Result<MetricOutcome, String> {
    let low = target
        .low_watermark
        .as_ref()
        .ok_or("lowWatermark is required")
        .map_err(str::to_owned)
        .and_then(milli)?;
    let high = target
        .high_watermark
        .as_ref()
        .ok_or("highWatermark is required")
        .map_err(str::to_owned)
        .and_then(milli)?;
    let (sum, ready) = match seen {
        Seen::PerPod { mut values, .. } => {
            if ctx.pods.is_empty() {
                return Err("no pods returned by selector while calculating replica count".into());
            }
            let groups = group_pods(ctx, &values, false);
            for n in groups.ignored.iter().chain(&groups.unready) {
                values.remove(n);
            }
            if values.is_empty() {
                return Err("did not receive metrics for any ready pods".into());
            }
            (saturating_total(values.into_values()), groups.ready as i32)
        }
        Seen::Total(v) => {
            let ready = ready_pod_count(ctx)?;
            if ready == 0 {
                return Err(format!(
                    "among the {} pods, none is ready. Skipping recommendation",
                    ctx.pods.len()
                ));
            }
            (v, ready.min(ctx.status_replicas.max(1)))
        }
    };
    let averaged = match wm.algorithm {
        Algorithm::Average => f64::from(ready.max(1)),
        Algorithm::Absolute => 1.0,
    };
    let usage = sum as f64 / averaged;
    let mut outcome = MetricOutcome {
        metric: name.to_owned(),
        replicas: None,
        value: Some(usage / 1000.0),
        target: None,
        low_watermark: Some(low as f64 / 1000.0),
        high_watermark: Some(high as f64 / 1000.0),
        within_tolerance: false,
        position: None,
        error: None,
        failure_reason: None,
        status: None,
        summary: format!(
            "{name}: {}/{}-{}",
            display_milli(usage as i64),
            display_milli(low),
            display_milli(high)
        ),
    };
    outcome.status = Some(if source::kind(m).per_pod {
        status(source, None, Some(usage as i64), None)
    } else {
        status(source, Some(usage as i64), None, None)
    });
    if sum == 0 && !wm.tolerate_zero {
        // WPA: a zero value is not trusted unless tolerateZero; hold the current count.
        outcome.replicas = Some(ctx.current_replicas);
        outcome.position = Some(Position::Within);
        return Ok(outcome);
    }
    let calc = watermark_replicas(&WatermarkInput {
        current_replicas: ctx.current_replicas,
        ready_replicas: ready,
        usage,
        low: low as f64,
        high: high as f64,
        tolerance_low: ctx.tolerances.scale_down,
        tolerance_high: ctx.tolerances.scale_up,
        modulo: wm.modulo,
        converge: wm.converge,
        min_replicas: wm.min_replicas,
        max_replicas: wm.max_replicas,
    });
    outcome.replicas = Some(calc.replicas);
    outcome.position = Some(calc.position);
    Ok(outcome)
}

fn status(
    source: &dyn MetricSource,
    value: Option<i64>,
    average: Option<i64>,
    utilization: Option<i32>,
) -> MetricStatus {
    source.status(MetricValueStatus {
        value: value.map(q_milli),
        average_value: average.map(q_milli),
        average_utilization: utilization,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::horizontal::observation::{ContainerSample, PodSample};

    fn proposal(metric: &str, replicas: Option<i32>) -> MetricOutcome {
        match replicas {
            Some(r) => ok_outcome(metric, r, 1.0, 1000),
            None => failed(metric.to_owned(), "FailedGetPodsMetric", "boom".to_owned()),
        }
    }

    #[test]
    fn the_first_largest_proposal_is_recommended() {
        let proposals = [
            proposal("a", Some(3)),
            proposal("b", Some(5)),
            proposal("c", Some(5)),
        ];
        let r = recommend(&proposals, 4, 1).unwrap();
        assert_eq!((r.replicas, r.metric.as_str()), (5, "b"));
        assert_eq!(r.condition.reason, "ValidMetricFound");
        assert_eq!(r.summary(4), "b above target");
        assert_eq!(r.quiet, None);
    }

    #[test]
    fn failed_metrics_hold_unless_the_others_scale_up() {
        let all_failed = recommend(&[proposal("a", None)], 4, 1).unwrap_err();
        assert_eq!(
            (all_failed.value, all_failed.by),
            (4, LimitedBy::MetricsUnavailable)
        );
        assert_eq!(all_failed.note, "no metric could be computed: boom");
        assert_eq!(all_failed.condition.unwrap().reason, "FailedGetPodsMetric");
        let down = recommend(&[proposal("a", None), proposal("b", Some(2))], 4, 1).unwrap_err();
        assert!(down.note.contains("not scaling down"), "{}", down.note);
        let up = recommend(&[proposal("a", None), proposal("b", Some(6))], 4, 1).unwrap();
        assert_eq!(up.replicas, 6);
        let none = recommend(&[], 4, 1).unwrap_err();
        assert_eq!(none.note, "no metric could be computed: no metrics");
    }

    #[test]
    fn changes_round_to_the_modulo_without_passing_current() {
        assert_eq!(round_change_to_modulo(4, 5, 4), 8);
        assert_eq!(
            round_change_to_modulo(8, 5, 4),
            8,
            "scale-down stops at current"
        );
        assert_eq!(round_change_to_modulo(12, 5, 4), 8);
        assert_eq!(round_change_to_modulo(5, 5, 4), 5, "no change, no rounding");
        assert_eq!(
            recommend(&[proposal("a", Some(5))], 4, 4).unwrap().replicas,
            8
        );
    }

    #[test]
    fn a_quiet_recommendation_names_tolerance_or_watermarks() {
        let mut tolerant = proposal("a", Some(4));
        tolerant.within_tolerance = true;
        let r = recommend(&[tolerant], 4, 1).unwrap();
        assert_eq!(r.limited().limited_by, Some(LimitedBy::Tolerance));
        let mut band = proposal("w", Some(4));
        band.position = Some(Position::Within);
        let r = recommend(&[band], 4, 1).unwrap();
        assert_eq!(r.limited().limited_by, Some(LimitedBy::WithinWatermarks));
        assert_eq!(r.summary(4), "recommended size matches current size");
        let plain = recommend(&[proposal("a", Some(4))], 4, 1).unwrap();
        assert_eq!(plain.limited().limited_by, None);
    }

    fn now() -> Timestamp {
        "2026-03-01T12:00:00Z".parse().unwrap()
    }

    /// A ready pod running for an hour whose one container requests `request` and uses
    /// `usage` of `resource`, and reports `usage` of the custom metric `rps`.
    fn pod(name: &str, resource: &str, request: i64, usage: i64) -> PodSample {
        let start = now() - jiff::SignedDuration::from_hours(1);
        PodSample {
            name: name.into(),
            start_time: Some(start),
            ready_transition_time: Some(start),
            containers: vec![ContainerSample {
                name: "app".into(),
                requests: [(resource.to_owned(), request)].into(),
                usage: [(resource.to_owned(), Ok(usage))].into(),
                ..ContainerSample::default()
            }],
            metrics: [("rps".to_owned(), Ok(usage))].into(),
            ..PodSample::default()
        }
    }

    fn propose_one(metric: MetricSpec, pods: Vec<PodSample>) -> MetricOutcome {
        let spec = HorizontalPodAutoscalerPlusSpec::test()
            .max(10)
            .metric(metric);
        let observed = Observation {
            current_replicas: 1,
            pods,
            ..Observation::default()
        };
        let mut out = propose(&spec, &observed, &ControllerConfig::default(), now());
        assert_eq!(out.len(), 1);
        out.remove(0)
    }

    #[test]
    fn a_utilization_past_i32_is_written_to_status_as_i32_max_not_negative() {
        // A memory request of one byte and 100Mi in use: 10,485,760,000 %, past i32::MAX.
        let used = 100 * 1024 * 1024 * 1000;
        let o = propose_one(
            MetricSpec::resource("memory", MetricTarget::utilization(80)),
            vec![pod("a", "memory", 1000, used)],
        );
        assert_eq!(o.value, Some(10_485_760_000.0));
        let status = o.status.and_then(|s| s.resource).unwrap();
        assert_eq!(status.current.average_utilization, Some(i32::MAX));
        assert_eq!(o.replicas, Some(131_072_000), "10,485,760,000 / 80");
    }

    #[test]
    fn watermark_values_summing_past_i64_read_as_above_the_high_watermark() {
        let o = propose_one(
            MetricSpec::pods("rps", MetricTarget::watermarks("10", "20")),
            vec![
                pod("a", "cpu", 100, i64::MAX),
                pod("b", "cpu", 100, i64::MAX),
            ],
        );
        assert_eq!(o.error, None);
        assert_eq!(o.position, Some(Position::Above));
        assert!(o.replicas.is_some_and(|r| r > 1), "{:?}", o.replicas);
    }

    #[test]
    fn a_spec_without_metrics_proposes_from_cpu_at_80_percent() {
        let spec = HorizontalPodAutoscalerPlusSpec {
            max_replicas: 10,
            ..HorizontalPodAutoscalerPlusSpec::default()
        };
        let observed = Observation {
            current_replicas: 2,
            ..Observation::default()
        };
        let now: Timestamp = "2026-03-01T12:00:00Z".parse().unwrap();
        let proposals = propose(&spec, &observed, &ControllerConfig::default(), now);
        assert_eq!(proposals.len(), 1);
        assert_eq!(proposals[0].metric, "cpu");
        assert!(proposals[0].error.is_some(), "no pods: the metric fails");
    }
}
