//! The pods/eviction subresource (`policy/v1` Eviction) and `PodDisruptionBudget` arithmetic,
//! following the disruption controller: `expectedPods` from the pods' controllers' scale,
//! `desiredHealthy` from minAvailable or expectedPods − maxUnavailable (percentages rounded
//! up), `currentHealthy` = Ready pods not being deleted, `disruptionsAllowed` =
//! max(0, currentHealthy − desiredHealthy). An eviction that would leave fewer than
//! desiredHealthy is refused with 429 and a `DisruptionBudget` cause.

use std::collections::HashSet;
use std::sync::Arc;

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::Cluster;
use crate::api::{DeleteOptions, ObjectRef};
use crate::clock::rfc3339;
use crate::control::{AuditEntry, Caller};
use crate::error::ApiError;
use crate::selector::LabelSelector;
use crate::values::int_or_percent;

fn is_ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// The PDB arithmetic for one budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Pods the controllers want.
    pub expected: i64,
    /// Healthy pods now.
    pub current_healthy: i64,
    /// Healthy pods the budget requires.
    pub desired_healthy: i64,
    /// Evictions allowed now.
    pub disruptions_allowed: i64,
}

fn matching_pods(cluster: &Cluster, pdb: &Value) -> Vec<Arc<Value>> {
    let ns = pdb
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Ok(Some(sel)) =
        LabelSelector::from_structured(pdb.pointer("/spec/selector").unwrap_or(&Value::Null))
    else {
        return Vec::new();
    };
    let (pods, _) = cluster
        .store
        .list(&(String::new(), "pods".into()), Some(ns));
    pods.into_iter().filter(|p| sel.matches_object(p)).collect()
}

/// Computes the budget of `pdb` now.
pub fn budget(cluster: &Cluster, pdb: &Value) -> Budget {
    let ns = pdb
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let pods = matching_pods(cluster, pdb);
    let live: Vec<&Arc<Value>> = pods
        .iter()
        .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
        .collect();
    let current_healthy = live.iter().filter(|p| is_ready(p)).count() as i64;
    // expectedPods: the scale of each distinct controller (a Deployment's, for its ReplicaSets).
    let mut seen = HashSet::new();
    let mut expected = 0i64;
    let mut uncontrolled = 0i64;
    for p in &pods {
        let Some(r) = p
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|r| r["controller"] == true))
        else {
            uncontrolled += 1;
            continue;
        };
        let (kind, name) = (
            r["kind"].as_str().unwrap_or_default(),
            r["name"].as_str().unwrap_or_default(),
        );
        let (group, plural) = match kind {
            "ReplicaSet" => ("apps", "replicasets"),
            "StatefulSet" => ("apps", "statefulsets"),
            _ => {
                uncontrolled += 1;
                continue;
            }
        };
        let Some(mut owner) = cluster.store.get(&(group.into(), plural.into()), ns, name) else {
            continue;
        };
        if kind == "ReplicaSet"
            && let Some(d) = owner
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .and_then(|a| a.iter().find(|r| r["kind"] == "Deployment"))
            && let Some(dep) = cluster.store.get(
                &("apps".into(), "deployments".into()),
                ns,
                d["name"].as_str().unwrap_or_default(),
            )
        {
            owner = dep;
        }
        let uid = owner
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if seen.insert(uid) {
            expected += owner
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(0);
        }
    }
    expected += uncontrolled;
    let desired_healthy = if let Some(min) = pdb.pointer("/spec/minAvailable") {
        int_or_percent(Some(min), expected, true, 0)
    } else if let Some(max) = pdb.pointer("/spec/maxUnavailable") {
        (expected - int_or_percent(Some(max), expected, true, 0)).max(0)
    } else {
        0
    };
    Budget {
        expected,
        current_healthy,
        desired_healthy,
        disruptions_allowed: (current_healthy - desired_healthy).max(0),
    }
}

/// The status the disruption controller writes.
pub fn pdb_status(cluster: &Cluster, pdb: &Value, now: Timestamp) -> Value {
    let b = budget(cluster, pdb);
    let allowed = b.disruptions_allowed > 0;
    let old = pdb
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|c| c["type"] == "DisruptionAllowed"))
        .cloned();
    let status = if allowed { "True" } else { "False" };
    let since = old
        .filter(|c| c["status"] == status)
        .map_or_else(|| json!(rfc3339(now)), |c| c["lastTransitionTime"].clone());
    json!({
        "observedGeneration": pdb.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0),
        "disruptionsAllowed": b.disruptions_allowed,
        "currentHealthy": b.current_healthy,
        "desiredHealthy": b.desired_healthy,
        "expectedPods": b.expected,
        "conditions": [{"type": "DisruptionAllowed", "status": status,
            "reason": if allowed { "SufficientPods" } else { "InsufficientPods" }, "message": "",
            "observedGeneration": pdb.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0),
            "lastTransitionTime": since}],
    })
}

/// Handles `POST pods/{name}/eviction` on `target` (a pod): deletes the pod unless a PDB
/// forbids it.
pub fn evict(
    cluster: &Arc<Cluster>,
    target: ObjectRef<'_>,
    body: &Value,
    caller: &Caller,
) -> Result<Value, ApiError> {
    let ObjectRef { ns, name, .. } = target;
    let pod = cluster
        .store
        .get(&(String::new(), "pods".into()), ns, name)
        .ok_or_else(|| ApiError::not_found("", "pods", name))?;
    let body_name = body
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or(name);
    if body_name != name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let opts = DeleteOptions::from_body(body.get("deleteOptions").unwrap_or(&Value::Null), None);
    let terminal = matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed" | "Pending")
    );
    let already_deleting = pod.pointer("/metadata/deletionTimestamp").is_some();
    if !terminal && !already_deleting {
        let (pdbs, _) = cluster
            .store
            .list(&("policy".into(), "poddisruptionbudgets".into()), Some(ns));
        let matching: Vec<&Arc<Value>> = pdbs
            .iter()
            .filter(|b| {
                LabelSelector::from_structured(b.pointer("/spec/selector").unwrap_or(&Value::Null))
                    .ok()
                    .flatten()
                    .is_some_and(|s| s.matches_object(&pod))
            })
            .collect();
        if matching.len() > 1 {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
        if let Some(pdb) = matching.first() {
            let b = budget(cluster, pdb);
            let healthy = is_ready(&pod);
            // An unhealthy pod may go when the budget is otherwise met (IfHealthyBudget).
            let blocked = if healthy {
                b.disruptions_allowed == 0
            } else {
                b.current_healthy < b.desired_healthy
            };
            if blocked {
                let pdb_name = pdb
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                return Err(ApiError::new(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.").with_details(json!({
                    "causes": [{"reason": "DisruptionBudget",
                        "message": format!("The disruption budget {pdb_name} needs {} healthy pods and has {} currently", b.desired_healthy, b.current_healthy)}]
                })));
            }
        }
    }
    cluster.delete(target, &opts, caller)?;
    cluster.audit.record(AuditEntry {
        time: rfc3339(cluster.clock.now()),
        user_agent: caller.user_agent.clone(),
        field_manager: caller.field_manager.clone(),
        verb: "create".into(),
        group: String::new(),
        resource: "pods".into(),
        subresource: "eviction".into(),
        namespace: ns.into(),
        name: name.into(),
        resource_version: cluster.store.current_rv().to_string(),
    });
    Ok(
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    )
}
