//! Size limits on what a namespace user writes into Plimsoll's objects.
//!
//! Every list and free-form string of a spec has a bound, published in the CRDs (`maxItems`,
//! `maxLength`, `maxProperties`) and checked again by each kind's `validate()`, so that a service
//! refuses an oversized object with a condition naming the field even when its CRD was installed
//! without them. The bounds matter twice: they keep one tenant from storing megabytes of autoscaler
//! that every controller reads and re-evaluates, and kube-apiserver's CEL cost estimator multiplies
//! a rule's cost by how often it can run, which an unbounded list or map makes unbounded (the
//! quantity rules on `minAllowed`/`maxAllowed` only fit the per-CRD budget with these bounds).
//!
//! Each bound is far above what a legitimate object needs; the reason is stated at each constant.

use schemars::Schema;
use serde_json::Value;

/// Metrics of one autoscaler. Each is fetched every evaluation; upstream's controllers and every
/// published example use a handful, and status lists one entry per metric.
pub const MAX_METRICS: usize = 32;
/// Policies of one scaling direction (`behavior.scaleUp.policies`): upstream's defaults use two.
pub const MAX_SCALING_POLICIES: usize = 16;
/// Jobs of a CronHPA (the bound its CRD already had): one schedule covers many times with cron
/// lists and ranges, so a hundred separate jobs is more than a team can read.
pub const MAX_JOBS: usize = 100;
/// Excluded-day expressions of a CronHPA: one per day of a year, though one expression names many.
pub const MAX_EXCLUDE_DATES: usize = 366;
/// Container policies of a VPA: one per container of the pod plus `*`; pods with more than a few
/// dozen containers do not exist in practice.
pub const MAX_CONTAINER_POLICIES: usize = 64;
/// Entries of a resource list or list of resource names (`minAllowed`, `controlledResources`,
/// `evictionRequirements[].resources`): a VPA controls `cpu` and `memory`, and Kubernetes defines
/// a handful of other resources.
pub const MAX_RESOURCES: usize = 16;
/// Eviction requirements of a VPA: two resources times two directions are the distinct ones.
pub const MAX_EVICTION_REQUIREMENTS: usize = 16;
/// Recommenders a VPA names: upstream's admission controller refuses more than one.
pub const MAX_RECOMMENDERS: usize = 1;
/// Label requirements of a metric selector (`matchLabels` entries, `matchExpressions` items, and
/// values of one expression).
pub const MAX_SELECTOR_TERMS: usize = 64;

/// The `spec` of an object the services cache (HPA+, HPA, VPA, LimitRange) as JSON, in bytes.
/// The bounds above hold each list and string, not their sum: 32 metrics whose selectors each
/// list 64 expressions of 64 values come to more than etcd stores, a VPA's resource lists have
/// keys of any length, and the services cache every such object. The longest legitimate HPA+
/// spec (32 metrics each with the longest query, metric name and server address) is about
/// 240 KB; real ones are a few KB. Past it an autoscaler is refused (`InvalidSpec`,
/// `ConfigUnsupported`) and cached without its spec (`crate::cut_down::spec_left_out`). A
/// CronHPA's bounds add up to less (no map, 100 jobs, 366 excluded days).
pub const MAX_SPEC_BYTES: usize = 256 * 1024;

/// Object names (DNS subdomains: `metadata.name` allows no more), resource names, recommender and
/// job names.
pub const MAX_NAME_LENGTH: usize = 253;
/// Container names and kinds (container names are DNS labels; no kind comes near it).
pub const MAX_LABEL_LENGTH: usize = 63;
/// `apiVersion` and label keys: a DNS-subdomain group (253), `/`, and a 63-character name.
pub const MAX_QUALIFIED_NAME_LENGTH: usize = 317;
/// Names of custom and external metrics (adapter-specific, sometimes with an encoded selector).
pub const MAX_METRIC_NAME_LENGTH: usize = 1024;
/// A PromQL query: generated queries with long label matchers stay around 1–2 KB.
pub const MAX_QUERY_LENGTH: usize = 4096;
/// A server address (URL).
pub const MAX_ADDRESS_LENGTH: usize = 2048;
/// A cron schedule or excluded-day expression: six fields with lists and ranges.
pub const MAX_SCHEDULE_LENGTH: usize = 256;
/// An IANA time zone name (the longest in the database has 32 characters).
pub const MAX_TIME_ZONE_LENGTH: usize = 64;

/// The `scaleTargetRef`/`targetRef` schema (a k8s-openapi type, which carries no limits) with
/// the limits of its strings.
pub fn object_reference(schema: &mut Schema) {
    set_max_length(schema, "apiVersion", MAX_QUALIFIED_NAME_LENGTH);
    set_max_length(schema, "kind", MAX_LABEL_LENGTH);
    set_max_length(schema, "name", MAX_NAME_LENGTH);
}

/// A scale target's reference: [`object_reference`]'s limits, and a kind and name that are one
/// segment of the `/scale` URL ([`path_segment_names`]).
pub fn scale_target_reference(schema: &mut Schema) {
    object_reference(schema);
    path_segment_names(schema);
}

/// The `kind` and `name` properties that the schema has (a reference's, a metric identifier's)
/// must each be one segment of a URL ([`crate::api::validation::path_segment_rule`]). Set on the
/// spec's fields only: the status repeats these types, and the controller writes it from a spec
/// that passed.
pub fn path_segment_names(schema: &mut Schema) {
    for property in ["kind", "name"] {
        if let Some(p) = schema
            .get_mut("properties")
            .and_then(|p| p.get_mut(property))
            .and_then(Value::as_object_mut)
        {
            p.insert(
                "x-kubernetes-validations".into(),
                crate::api::validation::path_segment_rule(),
            );
        }
    }
}

/// The metric `selector` schema (a k8s-openapi `LabelSelector`) with the limits of its lists,
/// map and strings (label keys are qualified names, values at most 63 characters: what upstream's
/// HPA validation accepts).
pub fn label_selector(schema: &mut Schema) {
    let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(labels) = props.get_mut("matchLabels").and_then(Value::as_object_mut) {
        labels.insert("maxProperties".into(), MAX_SELECTOR_TERMS.into());
        if let Some(value) = labels
            .get_mut("additionalProperties")
            .and_then(Value::as_object_mut)
        {
            value.insert("maxLength".into(), MAX_LABEL_LENGTH.into());
        }
    }
    if let Some(exprs) = props
        .get_mut("matchExpressions")
        .and_then(Value::as_object_mut)
    {
        exprs.insert("maxItems".into(), MAX_SELECTOR_TERMS.into());
        if let Some(item) = exprs
            .get_mut("items")
            .and_then(Value::as_object_mut)
            .and_then(|i| i.get_mut("properties"))
            .and_then(Value::as_object_mut)
        {
            if let Some(key) = item.get_mut("key").and_then(Value::as_object_mut) {
                key.insert("maxLength".into(), MAX_QUALIFIED_NAME_LENGTH.into());
            }
            if let Some(operator) = item.get_mut("operator").and_then(Value::as_object_mut) {
                operator.insert("maxLength".into(), MAX_LABEL_LENGTH.into());
            }
            if let Some(values) = item.get_mut("values").and_then(Value::as_object_mut) {
                values.insert("maxItems".into(), MAX_SELECTOR_TERMS.into());
                if let Some(v) = values.get_mut("items").and_then(Value::as_object_mut) {
                    v.insert("maxLength".into(), MAX_LABEL_LENGTH.into());
                }
            }
        }
    }
}

fn set_max_length(schema: &mut Schema, property: &str, max: usize) {
    if let Some(p) = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut(property))
        .and_then(Value::as_object_mut)
    {
        p.insert("maxLength".into(), max.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemars::json_schema;

    #[test]
    fn reference_and_selector_limits_land_on_their_properties() {
        let mut reference = json_schema!({"type": "object", "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "name": {"type": "string"}}});
        object_reference(&mut reference);
        let v = reference.as_value();
        assert_eq!(v["properties"]["apiVersion"]["maxLength"], 317);
        assert_eq!(v["properties"]["kind"]["maxLength"], 63);
        assert_eq!(v["properties"]["name"]["maxLength"], 253);
        assert_eq!(
            v["properties"]["name"].get("x-kubernetes-validations"),
            None
        );
        scale_target_reference(&mut reference);
        let v = reference.as_value();
        for p in ["kind", "name"] {
            assert_eq!(
                v["properties"][p]["x-kubernetes-validations"][0]["rule"],
                "self != '.' && self != '..' && !self.contains('/') && !self.contains('%')"
            );
        }
        assert_eq!(v["properties"]["name"]["maxLength"], 253);

        let mut selector = json_schema!({"type": "object", "properties": {
            "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
            "matchExpressions": {"type": "array", "items": {"type": "object", "properties": {
                "key": {"type": "string"}, "operator": {"type": "string"},
                "values": {"type": "array", "items": {"type": "string"}}}}}}});
        label_selector(&mut selector);
        let v = selector.as_value();
        assert_eq!(v["properties"]["matchLabels"]["maxProperties"], 64);
        assert_eq!(
            v["properties"]["matchLabels"]["additionalProperties"]["maxLength"],
            63
        );
        let expr = &v["properties"]["matchExpressions"];
        assert_eq!(expr["maxItems"], 64);
        assert_eq!(expr["items"]["properties"]["key"]["maxLength"], 317);
        assert_eq!(
            expr["items"]["properties"]["values"]["items"]["maxLength"],
            63
        );
    }
}
