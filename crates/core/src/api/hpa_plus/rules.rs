//! The CRD's `x-kubernetes-validations` rules that need more than OpenAPI bounds: quantity ranges
//! (the API server parses quantities with Kubernetes' CEL quantity library) and cross-field
//! checks. They restate, at write time, the checks of `validate.rs` that can be stated without
//! the cluster, with the same messages where the wording allows; the controller keeps its own
//! validation for objects written before the CRD carried these rules.
//!
//! Quantities are read as [`crate::api::cel`] describes (no `string()` of an int-or-string, the
//! quantity library in its declared call style), so that the API server's cost estimate of
//! every rule stays within its budget.

use serde_json::{Value, json};

use crate::api::cel::{as_quantity, is_quantity, quantity_rule};

/// A quantity in `[lo, hi)` (or `[lo, hi]` when `hi_inclusive`), as `check_quantity_range`.
pub(super) fn quantity_range(lo: &str, hi: &str, hi_inclusive: bool) -> Value {
    let (upper, bracket) = if hi_inclusive {
        ("<= 0", "]")
    } else {
        ("< 0", ")")
    };
    quantity_rule(
        |q| {
            format!(
                "({q}.compareTo(quantity('{lo}')) >= 0 && {q}.compareTo(quantity('{hi}')) {upper})"
            )
        },
        &format!("must be in [{lo}, {hi}{bracket}"),
    )
}

/// A quantity `>= 0` (a direction's tolerance, a watermark).
pub(super) fn quantity_non_negative() -> Value {
    quantity_rule(|q| format!("sign({q}) >= 0"), "must be >= 0")
}

/// A quantity `> 0` (a `value` or `averageValue` target).
pub(super) fn quantity_positive() -> Value {
    quantity_rule(|q| format!("sign({q}) > 0"), "must be positive")
}

/// The member a metric source `type` names is set, and no other (`validate_metric`).
pub(super) fn metric_members() -> Value {
    let members = [
        ("Resource", "resource"),
        ("ContainerResource", "containerResource"),
        ("Pods", "pods"),
        ("Object", "object"),
        ("External", "external"),
        ("Prometheus", "prometheus"),
    ];
    Value::Array(
        members
            .iter()
            .map(|(ty, member)| {
                json!({
                    "rule": format!("(self.type == '{ty}') == has(self.{member})"),
                    "message": format!("must be set for type {ty}, and only for it"),
                    "fieldPath": format!(".{member}"),
                })
            })
            .collect(),
    )
}

/// The target types a metric source accepts (`validate_metric`'s `allowed`).
pub(super) fn target_types(allowed: &[&str]) -> Value {
    let list = allowed
        .iter()
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(", ");
    json!([{
        "rule": format!("self.target.type in [{list}]"),
        "message": format!("must be one of {} for this metric source", allowed.join(", ")),
        "fieldPath": ".target.type",
    }])
}

/// A metric target has the field its type needs, and a watermark band is not inverted
/// (`validate_target`).
pub(super) fn target() -> Value {
    json!([
        {
            "rule": "self.type != 'Utilization' || has(self.averageUtilization)",
            "message": "is required for type Utilization",
            "fieldPath": ".averageUtilization",
        },
        {
            "rule": "self.type != 'Value' || has(self.value)",
            "message": "is required for type Value",
            "fieldPath": ".value",
        },
        {
            "rule": "self.type != 'AverageValue' || has(self.averageValue)",
            "message": "is required for type AverageValue",
            "fieldPath": ".averageValue",
        },
        {
            "rule": "self.type != 'Watermark' || has(self.lowWatermark)",
            "message": "is required for type Watermark",
            "fieldPath": ".lowWatermark",
        },
        {
            "rule": "self.type != 'Watermark' || has(self.highWatermark)",
            "message": "is required for type Watermark",
            "fieldPath": ".highWatermark",
        },
        {
            "rule": format!(
                "!has(self.lowWatermark) || !has(self.highWatermark) || !{} || !{} || !{}.isLessThan({})",
                is_quantity("self.lowWatermark"),
                is_quantity("self.highWatermark"),
                as_quantity("self.highWatermark"),
                as_quantity("self.lowWatermark"),
            ),
            "message": "must be >= lowWatermark",
            "fieldPath": ".highWatermark",
        },
    ])
}

/// Whether a metric list has a `Watermark` target, as CEL over `self.metrics`.
const HAS_WATERMARK: &str = "has(self.metrics) && self.metrics.exists(m, \
    (has(m.resource) && m.resource.target.type == 'Watermark') \
    || (has(m.containerResource) && m.containerResource.target.type == 'Watermark') \
    || (has(m.pods) && m.pods.target.type == 'Watermark') \
    || (has(m.object) && m.object.target.type == 'Watermark') \
    || (has(m.external) && m.external.target.type == 'Watermark') \
    || (has(m.prometheus) && m.prometheus.target.type == 'Watermark'))";

/// The spec's cross-field rules (`validate` and `validate_additions`).
pub(super) fn spec() -> Value {
    json!([
        {
            "rule": "!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",
            "message": "minReplicas must be <= maxReplicas",
            "fieldPath": ".maxReplicas",
        },
        {
            "rule": "!has(self.minReplicas) || self.minReplicas != 0 || (has(self.metrics) \
                     && self.metrics.exists(m, m.type == 'Object' || m.type == 'External' \
                     || m.type == 'Prometheus'))",
            "message": "must be >= 1 unless at least one Object, External or Prometheus metric is \
                        configured",
            "fieldPath": ".minReplicas",
        },
        {
            "rule": format!("!has(self.convergeTowardsWatermark) || ({HAS_WATERMARK})"),
            "message": "requires at least one metric with a Watermark target",
            "fieldPath": ".convergeTowardsWatermark",
        },
        {
            "rule": "!has(self.minReplicasTuning) || !has(self.minReplicasTuning.floor) \
                     || self.minReplicasTuning.floor <= self.maxReplicas",
            "message": "must be <= maxReplicas",
            "fieldPath": ".minReplicasTuning.floor",
        },
    ])
}

/// `spec.predictive`: a weekly season needs at least a week of lookback (`validate_predictive`).
pub(super) fn predictive() -> Value {
    json!([
        {
            "rule": "!has(self.season) || self.season != '168h' || !has(self.lookbackDays) \
                     || self.lookbackDays >= 7",
            "message": "must be >= 7 with season 168h",
            "fieldPath": ".lookbackDays",
        },
    ])
}

/// `spec.predictive.leadSeconds`: `auto` or a whole number of seconds >= 0.
pub(super) fn lead_seconds_rules() -> Value {
    json!([
        {
            "rule": "type(self) == int ? self >= 0 : (self == 'auto' || self.matches('^[0-9]+$'))",
            "message": "must be \"auto\" or a whole number of seconds >= 0",
        },
    ])
}

/// A metric's `fallback.failureDuration`: a duration in `(0, 24h]` (`validate_fallback`).
pub(super) fn failure_duration() -> Value {
    json!([
        {
            "rule": "duration(self) > duration('0s') && duration(self) <= duration('24h')",
            "message": "must be a duration such as 3m, > 0 and at most 24h",
        },
    ])
}
