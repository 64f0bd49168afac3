//! Writing status: the HPA+ status (v2 status + `lastDecision`, `reference`, `targetsSummary`)
//! or, in native mode, the `autoscaling/v2` status subset of it.
//!
//! What the status is and whether it changed are decided in `plimsoll-core`
//! (`horizontal::status`); this module reads a native HPA's status and writes. Writes are
//! server-side apply on the status subresource under the field manager `hpa-plus`, so the
//! service owns exactly the fields it sets and a field it stops setting is removed. A native
//! HPA's decision memory goes into its `plimsoll.dev/decision-memory` annotation with a merge
//! patch of that one key (its status has no field for it).

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource};
use plimsoll_core::api::hpa_plus::{
    DecisionMemory, HorizontalPodAutoscalerPlus, HorizontalPodAutoscalerPlusStatus,
};
use plimsoll_core::horizontal::memory;
pub use plimsoll_core::horizontal::status::{changed, native_subset, with_conditions};
use serde_json::{Value, json};

use crate::error::{Error, Result};

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "hpa-plus";

/// The v2 view of a native HPA's status, for comparison and condition merging.
pub fn from_native(hpa: &HorizontalPodAutoscaler) -> Option<HorizontalPodAutoscalerPlusStatus> {
    let status = hpa.status.as_ref()?;
    let value = serde_json::to_value(status).ok()?;
    serde_json::from_value(value).ok()
}

fn encode(status: &HorizontalPodAutoscalerPlusStatus) -> Result<Value> {
    serde_json::to_value(status).map_err(|source| Error::Encode {
        what: "status",
        source,
    })
}

/// Applies `status` to HPA+ `name` in `namespace`.
pub async fn write_plus(
    client: &Client,
    namespace: &str,
    name: &str,
    status: &HorizontalPodAutoscalerPlusStatus,
) -> Result<()> {
    let body = json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
        "kind": "HorizontalPodAutoscalerPlus",
        "status": encode(status)?,
    });
    apply_status::<HorizontalPodAutoscalerPlus>(client, namespace, name, &body)
        .await
        .map_err(|e| {
            Error::kube(
                format!("write status of HorizontalPodAutoscalerPlus {name}"),
                e,
            )
        })
}

/// Applies the v2 subset of `status` to native HPA `name` in `namespace`.
pub async fn write_native(
    client: &Client,
    namespace: &str,
    name: &str,
    status: &HorizontalPodAutoscalerPlusStatus,
) -> Result<()> {
    let body = json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "status": encode(&native_subset(status))?,
    });
    apply_status::<HorizontalPodAutoscaler>(client, namespace, name, &body)
        .await
        .map_err(|e| Error::kube(format!("write status of HorizontalPodAutoscaler {name}"), e))
}

/// Server-side apply of `body` to the status subresource. The answer — the whole object, with
/// its managed fields — is not decoded: nothing reads it, and at thousands of writes a second
/// decoding it was the largest cost of a write.
async fn apply_status<K: Resource<DynamicType = ()>>(
    client: &Client,
    namespace: &str,
    name: &str,
    body: &Value,
) -> kube::Result<()> {
    let request = kube::core::Request::new(K::url_path(&(), Some(namespace)))
        .patch_subresource(
            "status",
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(body),
        )
        .map_err(kube::Error::BuildRequest)?;
    client.request_text(request).await.map(drop)
}

/// Writes `stored` into a native HPA's decision-memory annotation.
pub async fn write_native_memory(
    api: &Api<HorizontalPodAutoscaler>,
    name: &str,
    stored: &DecisionMemory,
) -> Result<()> {
    write_native_annotation(
        api,
        name,
        memory::ANNOTATION,
        memory::annotation_value(stored),
        "decision memory",
    )
    .await
}

/// Writes `value` as JSON into the annotation `key` of a native HPA: the place of a part of the
/// status (`what`, for the error) that `autoscaling/v2` has no field for.
pub async fn write_native_json<T: serde::Serialize>(
    api: &Api<HorizontalPodAutoscaler>,
    name: &str,
    key: &str,
    value: &T,
    what: &'static str,
) -> Result<()> {
    let text = serde_json::to_string(value).map_err(|source| Error::Encode { what, source })?;
    write_native_annotation(api, name, key, text, what).await
}

/// A merge patch of the one annotation `key` of a native HPA.
async fn write_native_annotation(
    api: &Api<HorizontalPodAutoscaler>,
    name: &str,
    key: &str,
    value: String,
    what: &str,
) -> Result<()> {
    let body = json!({"metadata": {"annotations": {key: value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .map_err(|e| {
            Error::kube(
                format!("write the {what} of HorizontalPodAutoscaler {name}"),
                e,
            )
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_status_reads_as_plus_status() {
        let hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5},
            "status": {"currentReplicas": 2, "desiredReplicas": 3,
                "conditions": [{"type": "AbleToScale", "status": "True"}]}
        }))
        .unwrap();
        let s = from_native(&hpa).unwrap();
        assert_eq!((s.current_replicas, s.desired_replicas), (2, 3));
        assert_eq!(s.conditions.len(), 1);
    }
}
