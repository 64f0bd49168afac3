//! What the VPA services keep of the VPAs and `LimitRange`s they cache. Each of the three
//! services holds every VPA and every `LimitRange` of the namespaces it serves, for as long as
//! they exist. Their authors are namespace users (`edit` writes VPAs, `admin` LimitRanges). The
//! schema bounds a VPA's spec, but not its metadata: 256 KiB of annotations, `managedFields`
//! and owner references fill a VPA to etcd's 1.5 MiB, and a namespace's thousand such VPAs
//! would be 1.5 GB in every replica of every VPA service. So a cached object keeps what the
//! decisions read, as pods do ([`crate::pod_fields`]).
//!
//! A VPA keeps its spec and status whole (the schema bounds the spec; the recommender writes
//! the status) and, of its metadata, what is read (labels, owner references, finalizers and
//! `managedFields` are not):
//! * `name`, `namespace`, `uid`, `resourceVersion`: the caches' keys, checkpoints, and the
//!   object reference of Events and status writes;
//! * `generation`: the updater reports an unreadable VPA once per generation;
//! * `creationTimestamp`: the oldest VPA controls a pod two VPAs select
//!   ([`super::controlling`]);
//! * the annotations the services read: [`HORIZONTAL_AWARE_ANNOTATION`] (joint sizing, the
//!   conflict check) and [`TOTAL_USAGE_ANNOTATION`] (the recommender's joint-sizing history).
//!
//! A `LimitRange` keeps its `name`, `namespace`, `uid`, `resourceVersion` and its spec: the
//! bounds are all that is read of it ([`super::limit_range`]); a spec past [`MAX_SPEC_BYTES`]
//! is dropped ([`leave_out_limit_range`]).
//!
//! The recommender also caches every horizontal autoscaler (HPA+ and HPA) to find the ones of a
//! VPA's workload (the conflict check, joint sizing): of those it reads the name and the spec,
//! and keeps nothing else ([`hpa_plus_fields`], [`hpa_fields`]). Their specs are bounded one
//! field at a time, not in sum, so one past [`MAX_SPEC_BYTES`] is kept as its target and bounds,
//! marked ([`leave_out_hpa_plus`], [`leave_out_hpa`], which hpa-plus's cache uses too): hpa-plus
//! refuses it (`InvalidSpec`), the recommender's index leaves it out.
//! A VPA's spec is bounded the same way and can pass it too (64 container policies whose
//! resource lists have keys of any length): past it, [`leave_out_vpa`].
//!
//! Nothing here writes an object back: the services patch the fields they own, so a trimmed
//! copy never replaces what the author wrote.

use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec};
use k8s_openapi::api::core::v1::LimitRange;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::joint_sizing::TOTAL_USAGE_ANNOTATION;
use crate::api::hpa_plus::{HorizontalPodAutoscalerPlus, HorizontalPodAutoscalerPlusSpec};
use crate::api::limits::MAX_SPEC_BYTES;
use crate::api::vpa::{PodUpdatePolicy, UpdateMode, VerticalPodAutoscaler};
use crate::conflict::HORIZONTAL_AWARE_ANNOTATION;
use crate::cut_down;

/// Cuts `vpa` down to what the VPA services read (see the module docs).
pub fn vpa_fields(vpa: &mut VerticalPodAutoscaler) {
    let meta = &mut vpa.metadata;
    vpa.metadata = ObjectMeta {
        generation: meta.generation,
        creation_timestamp: meta.creation_timestamp.take(),
        annotations: cut_down::annotations(meta, |key| {
            key == HORIZONTAL_AWARE_ANNOTATION || key == TOTAL_USAGE_ANNOTATION
        }),
        ..cut_down::identity(meta)
    };
}

/// Cuts an HPA+ down to its identity and spec, for the recommender (see the module docs).
pub fn hpa_plus_fields(autoscaler: &mut HorizontalPodAutoscalerPlus) {
    autoscaler.metadata = cut_down::identity(&mut autoscaler.metadata);
    autoscaler.status = None;
}

/// Cuts a native HPA down to its identity and spec, for the recommender (see the module docs):
/// its `plimsoll.dev/` annotations decide nothing it asks (its metrics and bounds).
pub fn hpa_fields(autoscaler: &mut HorizontalPodAutoscaler) {
    autoscaler.metadata = cut_down::identity(&mut autoscaler.metadata);
    autoscaler.status = None;
}

/// Leaves out the spec of an HPA+ past [`MAX_SPEC_BYTES`]: it keeps its target and replica
/// bounds (what status and a shard's cache show), no metric, and is marked
/// ([`cut_down::mark_spec_left_out`]): hpa-plus refuses it (`InvalidSpec`), the recommender's
/// index leaves it out. Returns the spec's bytes; `None` (and the object unchanged) within
/// the bound.
pub fn leave_out_hpa_plus(autoscaler: &mut HorizontalPodAutoscalerPlus) -> Option<usize> {
    let bytes = cut_down::json_len(&autoscaler.spec);
    if bytes <= MAX_SPEC_BYTES {
        return None;
    }
    let spec = std::mem::take(&mut autoscaler.spec);
    autoscaler.spec = HorizontalPodAutoscalerPlusSpec {
        scale_target_ref: spec.scale_target_ref,
        min_replicas: spec.min_replicas,
        max_replicas: spec.max_replicas,
        ..HorizontalPodAutoscalerPlusSpec::default()
    };
    cut_down::mark_spec_left_out(&mut autoscaler.metadata, bytes);
    Some(bytes)
}

/// [`leave_out_hpa_plus`] for a native HPA.
pub fn leave_out_hpa(autoscaler: &mut HorizontalPodAutoscaler) -> Option<usize> {
    let bytes = autoscaler.spec.as_ref().map_or(0, cut_down::json_len);
    if bytes <= MAX_SPEC_BYTES {
        return None;
    }
    let spec = autoscaler.spec.take().unwrap_or_default();
    autoscaler.spec = Some(HorizontalPodAutoscalerSpec {
        scale_target_ref: spec.scale_target_ref,
        min_replicas: spec.min_replicas,
        max_replicas: spec.max_replicas,
        ..HorizontalPodAutoscalerSpec::default()
    });
    cut_down::mark_spec_left_out(&mut autoscaler.metadata, bytes);
    Some(bytes)
}

/// Leaves out the spec of a VPA cut by [`vpa_fields`] when it passes [`MAX_SPEC_BYTES`]: it
/// keeps its target and recommenders (which service it is for), `updateMode: Off` (so no
/// pod is evicted, resized or patched after a policy that is gone) and no policy, and is
/// marked ([`cut_down::mark_spec_left_out`]); the recommender refuses it (`ConfigUnsupported`).
/// Returns the spec's bytes; `None` (and the VPA unchanged) within the bound.
pub fn leave_out_vpa(vpa: &mut VerticalPodAutoscaler) -> Option<usize> {
    let bytes = cut_down::json_len(&vpa.spec);
    if bytes <= MAX_SPEC_BYTES {
        return None;
    }
    let spec = &mut vpa.spec;
    spec.update_policy = Some(PodUpdatePolicy {
        update_mode: Some(UpdateMode::Off),
        ..PodUpdatePolicy::default()
    });
    spec.resource_policy = None;
    spec.startup_boost = None;
    cut_down::mark_spec_left_out(&mut vpa.metadata, bytes);
    Some(bytes)
}

/// Cuts `range` down to its identity and its spec (see the module docs).
pub fn limit_range_fields(range: &mut LimitRange) {
    range.metadata = cut_down::identity(&mut range.metadata);
}

/// Leaves out the spec of a `LimitRange` past [`MAX_SPEC_BYTES`] (its lists and maps have no
/// bound but etcd's, and a namespace's `admin` writes it): no spec, so the recommendations are
/// not capped by it. The API server still enforces it when a pod is created. Returns the
/// spec's bytes; `None` (and `range` unchanged) within the bound.
pub fn leave_out_limit_range(range: &mut LimitRange) -> Option<usize> {
    let bytes = range.spec.as_ref().map_or(0, cut_down::json_len);
    (bytes > MAX_SPEC_BYTES).then(|| {
        range.spec = None;
        bytes
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, OwnerReference};
    use serde_json::json;

    use super::*;

    fn size<T: serde::Serialize>(object: &T) -> usize {
        serde_json::to_vec(object).map_or(usize::MAX, |json| json.len())
    }

    #[test]
    fn a_fattened_vpa_keeps_what_is_read_and_loses_the_rest() {
        let lean: VerticalPodAutoscaler = serde_json::from_value(json!({
            "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "team", "uid": "u-1",
                "resourceVersion": "42", "generation": 3,
                "creationTimestamp": "2026-11-01T00:00:00Z",
                "annotations": {HORIZONTAL_AWARE_ANNOTATION: "true",
                    TOTAL_USAGE_ANNOTATION: "{\"cpu\":{}}"}},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "updatePolicy": {"updateMode": "Recreate"}},
            "status": {"recommendation": {"containerRecommendations": [{"containerName": "app",
                "target": {"cpu": "250m", "memory": "256Mi"}}]}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let mut fat = lean.clone();
        let meta = &mut fat.metadata;
        meta.annotations
            .get_or_insert_with(BTreeMap::new)
            .insert("blob".into(), "x".repeat(250 << 10));
        meta.managed_fields = Some(vec![ManagedFieldsEntry::default(); 2_000]);
        meta.owner_references = Some(vec![OwnerReference::default(); 2_000]);
        meta.finalizers = Some(vec!["f".repeat(200); 1_000]);
        meta.labels = Some(
            (0..2_000)
                .map(|i| (format!("l{i}"), "v".repeat(63)))
                .collect(),
        );
        assert!(size(&fat) > 500 << 10, "{}", size(&fat));
        let mut trimmed = fat.clone();
        vpa_fields(&mut trimmed);
        assert_eq!(trimmed, lean);
    }

    #[test]
    fn a_limit_range_keeps_its_identity_and_bounds() {
        let lean: LimitRange = serde_json::from_value(json!({
            "metadata": {"name": "bounds", "namespace": "team", "uid": "u-2",
                "resourceVersion": "7"},
            "spec": {"limits": [{"type": "Container", "max": {"cpu": "2", "memory": "1Gi"}}]}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let mut fat = lean.clone();
        fat.metadata.annotations = Some(BTreeMap::from([("blob".into(), "x".repeat(250 << 10))]));
        fat.metadata.labels = Some(BTreeMap::from([("team".into(), "a".into())]));
        fat.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default(); 2_000]);
        let mut trimmed = fat.clone();
        limit_range_fields(&mut trimmed);
        assert_eq!(trimmed, lean);
    }

    #[test]
    fn a_horizontal_autoscaler_keeps_its_identity_and_spec() {
        let spec = json!({
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 10,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 60}}}]});
        let metadata = json!({"name": "web", "namespace": "team", "uid": "u-3",
            "resourceVersion": "9"});
        let fatten = |meta: &mut ObjectMeta| {
            meta.generation = Some(4);
            meta.annotations = Some(BTreeMap::from([
                ("blob".into(), "x".repeat(250 << 10)),
                ("plimsoll.dev/tolerance".into(), "0.2".into()),
            ]));
            meta.labels = Some((0..2_000).map(|i| (format!("l{i}"), "v".into())).collect());
            meta.owner_references = Some(vec![OwnerReference::default(); 2_000]);
        };
        let status = json!({"currentReplicas": 3, "desiredReplicas": 3});
        let lean: HorizontalPodAutoscalerPlus =
            serde_json::from_value(json!({"metadata": metadata, "spec": spec}))
                .unwrap_or_else(|e| panic!("{e}"));
        let mut fat: HorizontalPodAutoscalerPlus =
            serde_json::from_value(json!({"metadata": metadata, "spec": spec, "status": status}))
                .unwrap_or_else(|e| panic!("{e}"));
        fatten(&mut fat.metadata);
        hpa_plus_fields(&mut fat);
        assert_eq!(fat, lean);
        let lean: HorizontalPodAutoscaler =
            serde_json::from_value(json!({"metadata": metadata, "spec": spec}))
                .unwrap_or_else(|e| panic!("{e}"));
        let mut fat: HorizontalPodAutoscaler =
            serde_json::from_value(json!({"metadata": metadata, "spec": spec, "status": status}))
                .unwrap_or_else(|e| panic!("{e}"));
        fatten(&mut fat.metadata);
        hpa_fields(&mut fat);
        assert_eq!(fat, lean);
    }

    /// An autoscaler spec with `values` values of 60 bytes in one metric's selector.
    fn selector_spec(values: usize) -> serde_json::Value {
        let values: Vec<String> = (0..values).map(|i| format!("{i:0>60}")).collect();
        json!({
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 10,
            "metrics": [{"type": "External", "external": {
                "metric": {"name": "queue", "selector": {"matchExpressions": [
                    {"key": "queue", "operator": "In", "values": values}]}},
                "target": {"type": "AverageValue", "averageValue": "10"}}}]
        })
    }

    #[test]
    fn an_autoscaler_spec_past_the_bound_keeps_its_target_and_bounds_and_is_marked() {
        for values in [64, 5_000] {
            let over = values > 64;
            let spec = selector_spec(values);
            let mut plus: HorizontalPodAutoscalerPlus = serde_json::from_value(json!({
                "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
                "kind": "HorizontalPodAutoscalerPlus",
                "metadata": {"name": "web", "namespace": "shop"}, "spec": spec}))
            .unwrap();
            let mut hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({
                "metadata": {"name": "web", "namespace": "shop"}, "spec": spec}))
            .unwrap();
            let (plus_before, hpa_before) = (plus.clone(), hpa.clone());
            let plus_bytes = leave_out_hpa_plus(&mut plus);
            let hpa_bytes = leave_out_hpa(&mut hpa);
            assert_eq!(plus_bytes.is_some(), over, "{values} values");
            assert_eq!(hpa_bytes.is_some(), over, "{values} values");
            if !over {
                assert_eq!(plus, plus_before);
                assert_eq!(hpa, hpa_before);
                assert_eq!(cut_down::spec_left_out(&plus.metadata), None);
                continue;
            }
            let bytes = plus_bytes.unwrap();
            assert!(bytes > MAX_SPEC_BYTES, "{bytes}");
            assert_eq!(
                plus.spec.scale_target_ref,
                plus_before.spec.scale_target_ref
            );
            assert_eq!(plus.spec.max_replicas, 10);
            assert!(plus.spec.metrics.is_empty());
            let native = hpa.spec.as_ref().unwrap();
            assert_eq!(native.scale_target_ref.name, "web");
            assert_eq!(native.metrics, None);
            let why = cut_down::spec_left_out(&plus.metadata).expect("marked");
            assert!(why.contains(&bytes.to_string()), "{why}");
            assert!(cut_down::spec_left_out(&hpa.metadata).is_some());
            assert!(size(&plus) < 1024, "{}", size(&plus));
        }
    }

    #[test]
    fn a_vpa_spec_past_the_bound_keeps_its_target_and_recommender_and_acts_on_nothing() {
        let policies: Vec<serde_json::Value> = (0..64)
            .map(|i| {
                let min: serde_json::Map<String, serde_json::Value> = (0..16)
                    .map(|r| (format!("example.com/{}-{r}", "r".repeat(300)), json!("1")))
                    .collect();
                json!({"containerName": format!("c{i}"), "minAllowed": min})
            })
            .collect();
        let vpa = |policies: &[serde_json::Value]| -> VerticalPodAutoscaler {
            serde_json::from_value(json!({
                "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
                "metadata": {"name": "web", "namespace": "shop", "uid": "u"},
                "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                       "name": "web"},
                         "recommenders": [{"name": "custom"}],
                         "updatePolicy": {"updateMode": "Recreate"},
                         "resourcePolicy": {"containerPolicies": policies}},
                "status": {"conditions": [{"type": "RecommendationProvided",
                                           "status": "True"}]}}))
            .unwrap()
        };
        let mut small = vpa(&policies[..2]);
        let before = small.clone();
        assert_eq!(leave_out_vpa(&mut small), None);
        assert_eq!(small, before);
        assert_eq!(cut_down::spec_left_out(&small.metadata), None);

        let mut fat = vpa(&policies);
        let whole = fat.clone();
        let bytes = leave_out_vpa(&mut fat).expect("left out");
        assert!(bytes > MAX_SPEC_BYTES, "{bytes}");
        assert_eq!(fat.spec.target_ref, whole.spec.target_ref);
        assert_eq!(fat.spec.recommenders, whole.spec.recommenders);
        assert_eq!(
            fat.spec.update_policy.and_then(|p| p.update_mode),
            Some(UpdateMode::Off)
        );
        assert_eq!(fat.spec.resource_policy, None);
        assert_eq!(fat.status, whole.status);
        let why = cut_down::spec_left_out(&fat.metadata).expect("marked");
        assert!(why.contains(&bytes.to_string()), "{why}");
        // And the spec as written is refused where it is checked (the webhook, a replay).
        let errors = whole.spec.validate().expect_err("too large").to_string();
        assert!(errors.contains("spec: "), "{errors}");
        assert!(
            errors.contains(&format!("at most {MAX_SPEC_BYTES}")),
            "{errors}"
        );
    }

    #[test]
    fn a_limit_range_past_the_bound_loses_its_spec() {
        let range = |items: usize| -> LimitRange {
            let limits: Vec<_> = (0..items)
                .map(|i| {
                    json!({"type": "Container", "max": {format!("example.com/{i:0>250}"): "1"}})
                })
                .collect();
            serde_json::from_value(json!({
                "metadata": {"name": "limits", "namespace": "shop"},
                "spec": {"limits": limits}}))
            .unwrap()
        };
        let mut small = range(3);
        let before = small.clone();
        assert_eq!(leave_out_limit_range(&mut small), None);
        assert_eq!(small, before);
        let mut fat = range(2_000);
        let bytes = leave_out_limit_range(&mut fat).expect("left out");
        assert!(bytes > MAX_SPEC_BYTES, "{bytes}");
        assert_eq!(fat.spec, None);
        assert_eq!(fat.metadata.name.as_deref(), Some("limits"));
    }
}
