//! The VPA CRD's `x-kubernetes-validations` rules and bounded schemas: what upstream's
//! `autoscaling.k8s.io/v1` schema leaves to its admission controller (or does not check at all),
//! refused at write time so that a policy that cannot produce a valid pod is never stored.
//!
//! They restate checks of [`super::VerticalPodAutoscalerSpec::validate`], which the services keep
//! for objects written before the CRD carried these rules. Quantities are
//! `x-kubernetes-int-or-string`, so every rule reads them as `string(self)`, and only uses what
//! Kubernetes' CEL quantity library declares, in its call style: `quantity()`, `isQuantity()` and
//! `sign()` are global functions (`sign(quantity(x))`; `quantity(x).sign()` does not compile on a
//! real API server), `compareTo` and `isGreaterThan` are members.

use schemars::{Schema, SchemaGenerator, json_schema};
use serde_json::{Value, json};

use crate::api::limits::MAX_RESOURCES;

/// The rule that a quantity parses, with `validate()`'s wording.
fn parses() -> Value {
    json!({
        "rule": "isQuantity(string(self))",
        "messageExpression": "'invalid quantity \"' + string(self) + '\"'",
    })
}

/// A quantity `>= 0`.
pub(super) fn non_negative() -> Value {
    json!([
        parses(),
        {
            "rule": "!isQuantity(string(self)) || sign(quantity(string(self))) >= 0",
            "message": "must be >= 0",
        },
    ])
}

/// A quantity `> 0`.
pub(super) fn positive() -> Value {
    json!([
        parses(),
        {
            "rule": "!isQuantity(string(self)) || sign(quantity(string(self))) > 0",
            "message": "must be > 0",
        },
    ])
}

/// A quantity `>= 1` (`oomBumpUpRatio`).
pub(super) fn at_least_one() -> Value {
    json!([
        parses(),
        {
            "rule": "!isQuantity(string(self)) || quantity(string(self)).compareTo(quantity('1')) >= 0",
            "message": "must be >= 1",
        },
    ])
}

/// A quantity in `(0, 1]` (the target percentiles).
pub(super) fn percentile() -> Value {
    json!([
        parses(),
        {
            "rule": "!isQuantity(string(self)) || (sign(quantity(string(self))) > 0 \
                     && quantity(string(self)).compareTo(quantity('1')) <= 0)",
            "message": "must be in (0, 1]",
        },
    ])
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
    json!([
        {
            "rule": "!has(self.minAllowed) || !has(self.maxAllowed) || self.minAllowed.all(r, \
                     !(r in self.maxAllowed) || !isQuantity(string(self.minAllowed[r])) \
                     || !isQuantity(string(self.maxAllowed[r])) \
                     || !quantity(string(self.minAllowed[r])).isGreaterThan(quantity(string(self.maxAllowed[r]))))",
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
