//! The VPA CRD's `x-kubernetes-validations` rules and bounded schemas: what upstream's
//! `autoscaling.k8s.io/v1` schema leaves to its admission controller (or does not check at all),
//! refused at write time so that a policy that cannot produce a valid pod is never stored.
//!
//! They restate checks of [`super::VerticalPodAutoscalerSpec::validate`], which the services keep
//! for objects written before the CRD carried these rules. Quantities are read as
//! [`crate::api::cel`] describes (no `string()` of an int-or-string, the quantity library in its
//! declared call style), and every list and map a rule runs over is bounded
//! ([`crate::api::limits`]), so that the API server's cost estimate of each rule stays far within
//! its budget: the per-amount rules run at most 64 policies × 16 resources times.

use schemars::{Schema, SchemaGenerator, json_schema};
use serde_json::{Value, json};

use crate::api::cel::{as_quantity, is_quantity, quantity_rule};
use crate::api::limits::MAX_RESOURCES;

/// A quantity `>= 0`.
pub(super) fn non_negative() -> Value {
    quantity_rule(|q| format!("sign({q}) >= 0"), "must be >= 0")
}

/// A quantity `> 0`.
pub(super) fn positive() -> Value {
    quantity_rule(|q| format!("sign({q}) > 0"), "must be > 0")
}

/// A quantity `>= 1` (`oomBumpUpRatio`).
pub(super) fn at_least_one() -> Value {
    quantity_rule(
        |q| format!("{q}.compareTo(quantity('1')) >= 0"),
        "must be >= 1",
    )
}

/// A quantity in `(0, 1]` (the target percentiles).
pub(super) fn percentile() -> Value {
    quantity_rule(
        |q| format!("(sign({q}) > 0 && {q}.compareTo(quantity('1')) <= 0)"),
        "must be in (0, 1]",
    )
}

/// `minAllowed` / `maxAllowed`: at most [`MAX_RESOURCES`] entries, each a quantity `>= 0`.
/// The schema replaces the generated one (a map of k8s-openapi quantities), so it restates what
/// that one said: an optional, nullable map of int-or-string values.
pub(super) fn resource_bounds(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "nullable": true,
        "maxProperties": MAX_RESOURCES,
        "additionalProperties": {
            "x-kubernetes-int-or-string": true,
            "x-kubernetes-validations": non_negative(),
        },
    })
}

/// A container policy's cross-field rules: `minAllowed <= maxAllowed` for every resource both
/// name (upstream's admission controller checks it too).
pub(super) fn container_policy() -> Value {
    let (min, max) = ("self.minAllowed[r]", "self.maxAllowed[r]");
    json!([
        {
            "rule": format!(
                "!has(self.minAllowed) || !has(self.maxAllowed) || self.minAllowed.all(r, \
                 !(r in self.maxAllowed) || !{} || !{} || !{}.isGreaterThan({}))",
                is_quantity(min),
                is_quantity(max),
                as_quantity(min),
                as_quantity(max),
            ),
            "message": "must be <= maxAllowed for every resource",
            "fieldPath": ".minAllowed",
        },
    ])
}

/// At most one policy per container name.
pub(super) fn unique_container_names() -> Value {
    json!([
        {
            "rule": "self.all(p, !has(p.containerName) \
                     || self.exists_one(q, has(q.containerName) && q.containerName == p.containerName))",
            "message": "must name each container at most once",
        },
    ])
}

/// The startup boost union: the member its `type` names is set, the other is not.
pub(super) fn startup_boost() -> Value {
    json!([
        {
            "rule": "self.type != 'Factor' || has(self.factor)",
            "message": "is required when type is Factor",
            "fieldPath": ".factor",
        },
        {
            "rule": "self.type != 'Factor' || !has(self.quantity)",
            "message": "is forbidden when type is Factor",
            "fieldPath": ".quantity",
        },
        {
            "rule": "self.type != 'Quantity' || has(self.quantity)",
            "message": "is required when type is Quantity",
            "fieldPath": ".quantity",
        },
        {
            "rule": "self.type != 'Quantity' || !has(self.factor)",
            "message": "is forbidden when type is Quantity",
            "fieldPath": ".factor",
        },
    ])
}
