//! `HorizontalPodAutoscalerPlusSpec::validate`: every problem, each with its field path.
//!
//! The upstream rules (`pkg/apis/autoscaling/validation`) come first, then one rule per
//! addition of DESIGN.md's table. Validation never stops at the first problem. Each metric
//! source checks its own fields ([`super::source`]); this module lives with the decision, not
//! with the API types, because what a source is, and so what makes it valid, is defined there.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::source::{self, TYPES, reference_sizes};
use crate::api::hpa_plus::{
    HorizontalPodAutoscalerPlusSpec, HpaScalingRules, MetricSpec, MetricTarget, MetricTargetType,
    MinReplicasTuning, Predictive, Season, quantity_value,
};
use crate::api::limits::{MAX_METRICS, MAX_SCALING_POLICIES};
use crate::api::validation::FieldErrors;

/// Upstream's limit on `stabilizationWindowSeconds` (one hour).
const MAX_STABILIZATION_WINDOW_SECONDS: i32 = 3600;
/// Upstream's limit on a policy's `periodSeconds` (30 minutes).
const MAX_PERIOD_SECONDS: i32 = 1800;

impl HorizontalPodAutoscalerPlusSpec {
    /// Checks the spec, returning every problem with its field path
    /// (`spec.metrics[1].external.target.highWatermark: must be >= lowWatermark`).
    pub fn validate(&self) -> Result<(), FieldErrors> {
        let mut errs = FieldErrors::default();
        if self.scale_target_ref.kind.is_empty() {
            errs.push("spec.scaleTargetRef.kind", "is required");
        }
        if self.scale_target_ref.name.is_empty() {
            errs.push("spec.scaleTargetRef.name", "is required");
        }
        errs.path_segment("spec.scaleTargetRef.kind", &self.scale_target_ref.kind);
        errs.path_segment("spec.scaleTargetRef.name", &self.scale_target_ref.name);
        let scales_to_zero = self.metrics.iter().any(|m| !source::kind(m).per_pod);
        if let Some(min) = self.min_replicas {
            if min < 0 {
                errs.push("spec.minReplicas", "must be >= 0");
            } else if min == 0 && !scales_to_zero {
                errs.push(
                    "spec.minReplicas",
                    "must be >= 1 unless at least one Object, External or Prometheus metric is configured",
                );
            }
        }
        if self.max_replicas < 1 {
            errs.push("spec.maxReplicas", "must be >= 1");
        }
        if self.max_replicas < self.min_replicas.unwrap_or(1) {
            errs.push("spec.maxReplicas", "must be >= minReplicas");
        }
        for (i, metric) in self.metrics.iter().enumerate() {
            validate_metric(metric, &format!("spec.metrics[{i}]"), &mut errs);
        }
        if let Some(behavior) = &self.behavior {
            if let Some(up) = &behavior.scale_up {
                validate_rules(up, "spec.behavior.scaleUp", &mut errs);
            }
            if let Some(down) = &behavior.scale_down {
                validate_rules(down, "spec.behavior.scaleDown", &mut errs);
            }
        }
        self.validate_additions(&mut errs);
        self.validate_sizes(&mut errs);
        errs.into_result()
    }

    /// The size limits the CRD states (`maxItems`, `maxLength`, `maxProperties`), for objects
    /// stored before it did and for native HPAs, whose annotations no schema bounds.
    fn validate_sizes(&self, errs: &mut FieldErrors) {
        reference_sizes(&self.scale_target_ref, "spec.scaleTargetRef", errs);
        errs.max_items("spec.metrics", self.metrics.len(), MAX_METRICS);
        for (i, m) in self.metrics.iter().enumerate() {
            let path = format!("spec.metrics[{i}]");
            for t in TYPES {
                if let (kind, Some(source)) = source::entry(m, t) {
                    source.validate_sizes(&format!("{path}.{}", kind.member), errs);
                }
            }
        }
        if let Some(behavior) = &self.behavior {
            for (rules, path) in [
                (&behavior.scale_up, "spec.behavior.scaleUp.policies"),
                (&behavior.scale_down, "spec.behavior.scaleDown.policies"),
            ] {
                if let Some(rules) = rules {
                    errs.max_items(path, rules.policies.len(), MAX_SCALING_POLICIES);
                }
            }
        }
    }

    fn validate_additions(&self, errs: &mut FieldErrors) {
        if let Some(t) = &self.tolerance {
            check_quantity_range(t, "spec.tolerance", 0.0, 1.0, false, errs);
        }
        if let Some(p) = self.sync_period_seconds
            && p < 1
        {
            errs.push("spec.syncPeriodSeconds", "must be >= 1");
        }
        if let Some(p) = self.behavior.as_ref().and_then(|b| b.sync_period_seconds)
            && !(1..=3600).contains(&p)
        {
            // KEP-6003 "Design Details": greater than 0 and at most 3600.
            errs.push(
                "spec.behavior.syncPeriodSeconds",
                "must be between 1 and 3600",
            );
        }
        if let Some(f) = &self.scale_up_limit_factor {
            check_quantity_range(f, "spec.scaleUpLimitFactor", 0.0, 100.0, true, errs);
        }
        if let Some(f) = &self.scale_down_limit_factor {
            check_quantity_range(f, "spec.scaleDownLimitFactor", 0.0, 100.0, true, errs);
        }
        for (path, v) in [
            (
                "spec.upscaleForbiddenWindowSeconds",
                self.upscale_forbidden_window_seconds,
            ),
            (
                "spec.downscaleForbiddenWindowSeconds",
                self.downscale_forbidden_window_seconds,
            ),
            (
                "spec.upscaleDelayAboveWatermarkSeconds",
                self.upscale_delay_above_watermark_seconds,
            ),
            (
                "spec.downscaleDelayBelowWatermarkSeconds",
                self.downscale_delay_below_watermark_seconds,
            ),
            ("spec.readinessDelaySeconds", self.readiness_delay_seconds),
        ] {
            if let Some(v) = v
                && v < 0
            {
                errs.push(path, "must be >= 0");
            }
        }
        if let Some(p) = self.min_available_replica_percentage
            && !(0..=100).contains(&p)
        {
            errs.push(
                "spec.minAvailableReplicaPercentage",
                "must be between 0 and 100",
            );
        }
        if let Some(m) = self.replica_scaling_absolute_modulo
            && m < 1
        {
            errs.push("spec.replicaScalingAbsoluteModulo", "must be >= 1");
        }
        let has_watermark = self
            .metrics
            .iter()
            .filter_map(MetricSpec::target)
            .any(|t| t.type_ == MetricTargetType::Watermark);
        if self.converge_towards_watermark.is_some() && !has_watermark {
            errs.push(
                "spec.convergeTowardsWatermark",
                "requires at least one metric with a Watermark target",
            );
        }
        if let Some(t) = &self.min_replicas_tuning {
            self.validate_tuning(t, errs);
        }
        if let Some(p) = &self.predictive {
            validate_predictive(p, errs);
        }
    }

    fn validate_tuning(&self, t: &MinReplicasTuning, errs: &mut FieldErrors) {
        if let Some(days) = t.lookback_days
            && !(1..=30).contains(&days)
        {
            errs.push(
                "spec.minReplicasTuning.lookbackDays",
                "must be between 1 and 30",
            );
        }
        if let Some(floor) = t.floor {
            if floor < 1 {
                errs.push("spec.minReplicasTuning.floor", "must be >= 1");
            } else if floor > self.max_replicas {
                errs.push("spec.minReplicasTuning.floor", "must be <= maxReplicas");
            }
        }
    }
}

/// `spec.predictive`: lookbackDays 1–30, and at least 7 with a weekly season (`leadSeconds`
/// is checked when it is read).
fn validate_predictive(p: &Predictive, errs: &mut FieldErrors) {
    match p.lookback_days {
        Some(days) if !(1..=30).contains(&days) => {
            errs.push("spec.predictive.lookbackDays", "must be between 1 and 30");
        }
        Some(days) if days < 7 && p.season == Season::Week => {
            errs.push(
                "spec.predictive.lookbackDays",
                "must be >= 7 with season 168h",
            );
        }
        _ => {}
    }
}

/// Checks `lo <= value <= hi` (or `< hi` when `hi_inclusive` is false).
fn check_quantity_range(
    q: &Quantity,
    path: &str,
    lo: f64,
    hi: f64,
    hi_inclusive: bool,
    errs: &mut FieldErrors,
) {
    match quantity_value(q) {
        Err(e) => errs.push(path, format!("invalid quantity: {e}")),
        Ok(v) => {
            let above = if hi_inclusive { v > hi } else { v >= hi };
            if v < lo || above {
                let bracket = if hi_inclusive { "]" } else { ")" };
                errs.push(path, format!("must be in [{lo}, {hi}{bracket}"));
            }
        }
    }
}

fn validate_metric(m: &MetricSpec, path: &str, errs: &mut FieldErrors) {
    for t in TYPES {
        let (kind, set) = source::entry(m, t);
        let name = kind.member;
        if t == m.type_ && set.is_none() {
            errs.push(
                format!("{path}.{name}"),
                format!("must be set for type {t:?}"),
            );
        } else if t != m.type_ && set.is_some() {
            errs.push(
                format!("{path}.{name}"),
                format!("must not be set for type {:?}", m.type_),
            );
        }
    }
    let Some(source) = source::of(m) else { return };
    let member = format!("{path}.{}", source::kind(m).member);
    source.validate(&member, errs);
    if let Some(fb) = source.fallback() {
        super::fallback::validate(fb, &format!("{member}.fallback"), errs);
    }
    let (field, name) = source.required_name();
    if name.is_empty() {
        errs.push(format!("{member}.{field}"), "is required");
    }
    validate_target(
        source.target(),
        &format!("{member}.target"),
        source.allowed_targets(),
        errs,
    );
}

fn validate_target(
    t: &MetricTarget,
    path: &str,
    allowed: &[MetricTargetType],
    errs: &mut FieldErrors,
) {
    if !allowed.contains(&t.type_) {
        errs.push(
            format!("{path}.type"),
            format!(
                "must be one of {} for this metric source",
                allowed
                    .iter()
                    .map(|a| format!("{a:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    let positive = |q: &Option<Quantity>, field: &str, errs: &mut FieldErrors| match q {
        None => errs.push(
            format!("{path}.{field}"),
            format!("is required for type {:?}", t.type_),
        ),
        Some(q) => match quantity_value(q) {
            Err(e) => errs.push(format!("{path}.{field}"), format!("invalid quantity: {e}")),
            Ok(v) if v <= 0.0 => errs.push(format!("{path}.{field}"), "must be positive"),
            Ok(_) => {}
        },
    };
    match t.type_ {
        MetricTargetType::Utilization => match t.average_utilization {
            None => errs.push(
                format!("{path}.averageUtilization"),
                "is required for type Utilization",
            ),
            Some(u) if u < 1 => errs.push(format!("{path}.averageUtilization"), "must be >= 1"),
            Some(_) => {}
        },
        MetricTargetType::Value => positive(&t.value, "value", errs),
        MetricTargetType::AverageValue => positive(&t.average_value, "averageValue", errs),
        MetricTargetType::Watermark => {
            let low = watermark(
                t.low_watermark.as_ref(),
                &format!("{path}.lowWatermark"),
                errs,
            );
            let high = watermark(
                t.high_watermark.as_ref(),
                &format!("{path}.highWatermark"),
                errs,
            );
            if let (Some(low), Some(high)) = (low, high)
                && high < low
            {
                errs.push(format!("{path}.highWatermark"), "must be >= lowWatermark");
            }
        }
    }
}

fn watermark(q: Option<&Quantity>, path: &str, errs: &mut FieldErrors) -> Option<f64> {
    match q.map(quantity_value) {
        None => {
            errs.push(path, "is required for type Watermark");
            None
        }
        Some(Err(e)) => {
            errs.push(path, format!("invalid quantity: {e}"));
            None
        }
        Some(Ok(v)) if v < 0.0 => {
            errs.push(path, "must be >= 0");
            None
        }
        Some(Ok(v)) => Some(v),
    }
}

fn validate_rules(r: &HpaScalingRules, path: &str, errs: &mut FieldErrors) {
    if let Some(w) = r.stabilization_window_seconds
        && !(0..=MAX_STABILIZATION_WINDOW_SECONDS).contains(&w)
    {
        errs.push(
            format!("{path}.stabilizationWindowSeconds"),
            format!("must be between 0 and {MAX_STABILIZATION_WINDOW_SECONDS}"),
        );
    }
    for (i, p) in r.policies.iter().enumerate() {
        if p.value <= 0 {
            errs.push(format!("{path}.policies[{i}].value"), "must be > 0");
        }
        if !(1..=MAX_PERIOD_SECONDS).contains(&p.period_seconds) {
            errs.push(
                format!("{path}.policies[{i}].periodSeconds"),
                format!("must be between 1 and {MAX_PERIOD_SECONDS}"),
            );
        }
    }
    if let Some(t) = &r.tolerance {
        match quantity_value(t) {
            Err(e) => errs.push(
                format!("{path}.tolerance"),
                format!("invalid quantity: {e}"),
            ),
            Ok(v) if v < 0.0 => errs.push(format!("{path}.tolerance"), "must be >= 0"),
            Ok(_) => {}
        }
    }
}
