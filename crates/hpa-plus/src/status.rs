//! Writing status: the HPA+ status (v2 status + `lastDecision`, `reference`, `targetsSummary`)
//! or, in native mode, the `autoscaling/v2` status subset of it.
//!
//! Status is written only when it changed; the time of the last decision alone is not a change
//! (otherwise every evaluation would write, and every write would wake every watcher). Writes
//! are server-side apply on the status subresource under the field manager `hpa-plus`, so the
//! service owns exactly the fields it sets and a field it stops setting is removed.

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::Api;
use kube::api::{Patch, PatchParams};
use plimsoll_core::api::hpa_plus::{
    HorizontalPodAutoscalerCondition, HorizontalPodAutoscalerPlus,
    HorizontalPodAutoscalerPlusStatus,
};
use plimsoll_core::horizontal::conditions::{Condition, merge};
use serde_json::{Value, json};

use crate::error::{Error, Result};

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "hpa-plus";

/// Whether `new` differs from `old` in anything but the decision's timestamp.
pub fn changed(
    old: Option<&HorizontalPodAutoscalerPlusStatus>,
    new: &HorizontalPodAutoscalerPlusStatus,
) -> bool {
    let Some(old) = old else { return true };
    let strip = |s: &HorizontalPodAutoscalerPlusStatus| {
        let mut s = s.clone();
        if let Some(d) = s.last_decision.as_mut() {
            d.time = None;
        }
        s
    };
    strip(old) != strip(new)
}

/// The v2 view of a native HPA's status, for comparison and condition merging.
pub fn from_native(hpa: &HorizontalPodAutoscaler) -> Option<HorizontalPodAutoscalerPlusStatus> {
    let status = hpa.status.as_ref()?;
    let value = serde_json::to_value(status).ok()?;
    serde_json::from_value(value).ok()
}

/// The part of an HPA+ status that `autoscaling/v2` has.
pub fn native_subset(
    status: &HorizontalPodAutoscalerPlusStatus,
) -> HorizontalPodAutoscalerPlusStatus {
    HorizontalPodAutoscalerPlusStatus {
        reference: None,
        targets_summary: None,
        last_decision: None,
        ..status.clone()
    }
}

/// `previous` with `conditions` merged in at `now` (for failures before any decision).
pub fn with_conditions(
    previous: Option<&HorizontalPodAutoscalerPlusStatus>,
    conditions: &[Condition],
    now: Timestamp,
) -> HorizontalPodAutoscalerPlusStatus {
    let mut status = previous.cloned().unwrap_or_default();
    let old: Vec<HorizontalPodAutoscalerCondition> = status.conditions.clone();
    status.conditions = merge(&old, conditions, now);
    status
}

fn encode(status: &HorizontalPodAutoscalerPlusStatus) -> Result<Value> {
    serde_json::to_value(status).map_err(|source| Error::Encode {
        what: "status",
        source,
    })
}

/// Applies `status` to an HPA+.
pub async fn write_plus(
    api: &Api<HorizontalPodAutoscalerPlus>,
    name: &str,
    status: &HorizontalPodAutoscalerPlusStatus,
) -> Result<()> {
    let body = json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
        "kind": "HorizontalPodAutoscalerPlus",
        "status": encode(status)?,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
    .map_err(|e| {
        Error::kube(
            format!("write status of HorizontalPodAutoscalerPlus {name}"),
            e,
        )
    })?;
    Ok(())
}

/// Applies the v2 subset of `status` to a native HPA.
pub async fn write_native(
    api: &Api<HorizontalPodAutoscaler>,
    name: &str,
    status: &HorizontalPodAutoscalerPlusStatus,
) -> Result<()> {
    let body = json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "status": encode(&native_subset(status))?,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
    .map_err(|e| Error::kube(format!("write status of HorizontalPodAutoscaler {name}"), e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use plimsoll_core::api::hpa_plus::LastDecision;

    fn status(time: i64, desired: i32) -> HorizontalPodAutoscalerPlusStatus {
        HorizontalPodAutoscalerPlusStatus {
            desired_replicas: desired,
            last_decision: Some(LastDecision {
                time: Some(Time(Timestamp::from_second(time).unwrap())),
                desired_replicas: desired,
                ..LastDecision::default()
            }),
            ..HorizontalPodAutoscalerPlusStatus::default()
        }
    }

    #[test]
    fn only_the_decision_time_changing_is_not_a_change() {
        assert!(!changed(Some(&status(1, 3)), &status(2, 3)));
        assert!(changed(Some(&status(1, 3)), &status(1, 4)));
        assert!(changed(None, &status(1, 3)));
    }

    #[test]
    fn native_subset_drops_the_additions() {
        let mut s = status(1, 3);
        s.reference = Some("Deployment/web".into());
        let sub = native_subset(&s);
        assert!(sub.reference.is_none() && sub.last_decision.is_none());
        assert_eq!(sub.desired_replicas, 3);
    }

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
