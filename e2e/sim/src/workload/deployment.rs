//! The Deployment controller: a new ReplicaSet per pod template (labelled `pod-template-hash`,
//! annotated with its revision), `RollingUpdate` within maxSurge / maxUnavailable or `Recreate`,
//! and the Deployment's status and Available / Progressing conditions.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Ctx, by_namespace, deleting, i, key, owned_by, owner_ref, s, template_hash};
use crate::clock::rfc3339;
use crate::values::int_or_percent;

fn condition(
    old: Option<&Value>,
    t: &str,
    ok: bool,
    reason: &str,
    message: &str,
    now: &str,
) -> Value {
    let status = if ok { "True" } else { "False" };
    let prev = old
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|c| c["type"] == t));
    if let Some(p) = prev
        && p["status"] == status
        && p["reason"] == reason
    {
        return p.clone();
    }
    json!({"type": t, "status": status, "reason": reason, "message": message, "lastUpdateTime": now, "lastTransitionTime": now})
}

/// A replica set scaled from one count to another: (the replica set, from, to).
type Scaling = (Value, i64, i64);

/// One pass over every Deployment.
pub(super) async fn run(ctx: &Ctx<'_>) {
    let cluster = ctx.cluster;
    let (deps, _) = cluster.store.list(&key("apps", "deployments"), None);
    if deps.is_empty() {
        return;
    }
    let rss = by_namespace(cluster.store.list(&key("apps", "replicasets"), None).0);
    let empty = Vec::new();
    for d in deps.iter().filter(|d| !deleting(d)) {
        let ns = s(d, "/metadata/namespace");
        let owned: Vec<&Arc<Value>> = owned_by(rss.get(ns).unwrap_or(&empty), d)
            .into_iter()
            .filter(|r| !deleting(r))
            .collect();
        reconcile(ctx, d, &owned).await;
    }
}

/// One Deployment: create the replica set of the current template if there is none, else move
/// replicas from the old sets to the new one, then write the status.
async fn reconcile(ctx: &Ctx<'_>, d: &Value, owned: &[&Arc<Value>]) {
    let template = d
        .pointer("/spec/template")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let hash = template_hash(&template);
    let new_rs = owned
        .iter()
        .find(|r| s(r, "/metadata/labels/pod-template-hash") == hash)
        .copied();
    let olds: Vec<&Arc<Value>> = owned
        .iter()
        .filter(|r| s(r, "/metadata/labels/pod-template-hash") != hash)
        .copied()
        .collect();
    let paused = d
        .pointer("/spec/paused")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let Some(new_rs) = new_rs else {
        if !paused {
            create_replica_set(ctx, d, template, &hash, owned, &olds).await;
        }
        return;
    };
    if !paused {
        for scaling in rollout_plan(d, new_rs, &olds, owned) {
            scale_replica_set(ctx, d, scaling).await;
        }
    }
    let status = status(d, new_rs, owned, &rfc3339(ctx.now));
    ctx.write_status("apps", "deployments", d, status, "deployment-controller")
        .await;
}

/// Creates the replica set `<name>-<hash>` of the current template, with the next revision; it
/// starts empty while an old set still has replicas (the rollout scales it up).
async fn create_replica_set(
    ctx: &Ctx<'_>,
    d: &Value,
    template: Value,
    hash: &str,
    owned: &[&Arc<Value>],
    olds: &[&Arc<Value>],
) {
    let ns = s(d, "/metadata/namespace");
    let name = s(d, "/metadata/name");
    let desired = i(d, "/spec/replicas");
    let revision = owned
        .iter()
        .map(|r| {
            s(
                r,
                "/metadata/annotations/deployment.kubernetes.io~1revision",
            )
            .parse::<i64>()
            .unwrap_or(0)
        })
        .max()
        .unwrap_or(0)
        + 1;
    let mut tpl = template;
    tpl["metadata"]["labels"]["pod-template-hash"] = json!(hash);
    let mut selector = d
        .pointer("/spec/selector")
        .cloned()
        .unwrap_or_else(|| json!({}));
    selector["matchLabels"]["pod-template-hash"] = json!(hash);
    let start = if olds.iter().any(|r| i(r, "/spec/replicas") > 0) {
        0
    } else {
        desired
    };
    let rs = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": format!("{name}-{hash}"), "namespace": ns, "labels": tpl["metadata"]["labels"].clone(),
            "annotations": {"deployment.kubernetes.io/revision": revision.to_string(), "deployment.kubernetes.io/desired-replicas": desired.to_string(),
                "deployment.kubernetes.io/max-replicas": desired.to_string()},
            "ownerReferences": [owner_ref(d, "Deployment")]},
        "spec": {"replicas": start, "minReadySeconds": i(d, "/spec/minReadySeconds"), "selector": selector, "template": tpl},
    });
    if ctx
        .create("apps", "replicasets", ns, rs, "deployment-controller")
        .await
        .is_some()
        && start > 0
    {
        ctx.event(
            d,
            "ScalingReplicaSet",
            &format!("Scaled up replica set {name}-{hash} from 0 to {start}"),
            "deployment-controller",
        );
    }
}

/// The replica sets to scale this pass: `Recreate` empties the old sets before filling the new
/// one; `RollingUpdate` surges the new set and drains the old ones within the availability budget.
fn rollout_plan(
    d: &Value,
    new_rs: &Value,
    olds: &[&Arc<Value>],
    owned: &[&Arc<Value>],
) -> Vec<Scaling> {
    let desired = i(d, "/spec/replicas");
    let old_replicas: i64 = olds.iter().map(|r| i(r, "/spec/replicas")).sum();
    let mut plan: Vec<Scaling> = Vec::new();
    if s(d, "/spec/strategy/type") == "Recreate" {
        if old_replicas > 0 {
            plan.extend(olds.iter().filter_map(|r| scaling(r, 0)));
        } else if olds.iter().all(|r| i(r, "/status/replicas") == 0) {
            plan.extend(scaling(new_rs, desired));
        }
    } else if old_replicas == 0 {
        plan.extend(scaling(new_rs, desired));
    } else {
        plan = rolling_update_plan(d, new_rs, olds, owned, old_replicas);
    }
    plan
}

/// `RollingUpdate` with old replicas left: scale the new set up to `desired + maxSurge` in total,
/// then take old replicas down (oldest set first, unhealthy ones free) while at least
/// `desired - maxUnavailable` stay available.
fn rolling_update_plan(
    d: &Value,
    new_rs: &Value,
    olds: &[&Arc<Value>],
    owned: &[&Arc<Value>],
    old_replicas: i64,
) -> Vec<Scaling> {
    let desired = i(d, "/spec/replicas");
    let new_replicas = i(new_rs, "/spec/replicas");
    let surge = int_or_percent(
        d.pointer("/spec/strategy/rollingUpdate/maxSurge"),
        desired,
        true,
        1,
    );
    let mut unavailable = int_or_percent(
        d.pointer("/spec/strategy/rollingUpdate/maxUnavailable"),
        desired,
        false,
        0,
    );
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    let mut plan: Vec<Scaling> = Vec::new();
    let total = old_replicas + new_replicas;
    let mut target_new = new_replicas;
    if new_replicas < desired && total < desired + surge {
        target_new = (new_replicas + desired + surge - total).min(desired);
    }
    plan.extend(scaling(new_rs, target_new));
    let min_available = desired - unavailable;
    let all_available: i64 = owned
        .iter()
        .map(|r| i(r, "/status/availableReplicas"))
        .sum();
    let mut budget = (all_available - min_available).max(0);
    let mut olds_sorted = olds.to_vec();
    olds_sorted.sort_by_key(|r| s(r, "/metadata/creationTimestamp").to_string());
    for r in olds_sorted {
        let cur = i(r, "/spec/replicas");
        let unhealthy = (cur - i(r, "/status/availableReplicas")).max(0);
        let cut = cur.min(unhealthy + budget);
        budget -= (cut - unhealthy).max(0);
        plan.extend(scaling(r, cur - cut));
    }
    plan
}

/// `rs` scaled to `to`, or `None` when it already has that many replicas.
fn scaling(rs: &Value, to: i64) -> Option<Scaling> {
    (i(rs, "/spec/replicas") != to).then(|| (rs.clone(), i(rs, "/spec/replicas"), to))
}

/// Writes one scaling and records the `ScalingReplicaSet` event.
async fn scale_replica_set(ctx: &Ctx<'_>, d: &Value, (rs, from, to): Scaling) {
    ctx.set_replicas("apps", "replicasets", &rs, to, "deployment-controller")
        .await;
    let verb = if to > from { "up" } else { "down" };
    ctx.event(
        d,
        "ScalingReplicaSet",
        &format!(
            "Scaled {verb} replica set {} from {from} to {to}",
            s(&rs, "/metadata/name")
        ),
        "deployment-controller",
    );
}

/// The Deployment's status: replica counts summed over its replica sets, and the Available and
/// Progressing conditions.
fn status(d: &Value, new_rs: &Value, owned: &[&Arc<Value>], now_s: &str) -> Value {
    let desired = i(d, "/spec/replicas");
    let sum = |p: &str| owned.iter().map(|r| i(r, p)).sum::<i64>();
    let spec_total = sum("/spec/replicas");
    let (replicas, ready, avail) = (
        sum("/status/replicas"),
        sum("/status/readyReplicas"),
        sum("/status/availableReplicas"),
    );
    let updated = i(new_rs, "/status/replicas");
    let unavailable_allowed = int_or_percent(
        d.pointer("/spec/strategy/rollingUpdate/maxUnavailable"),
        desired,
        false,
        0,
    );
    let complete = updated == desired && replicas == desired && avail == desired;
    let old_conds = d.pointer("/status/conditions");
    let rs_name = s(new_rs, "/metadata/name");
    let available = avail >= desired - unavailable_allowed;
    let conds = json!([
        condition(
            old_conds,
            "Available",
            available,
            if available {
                "MinimumReplicasAvailable"
            } else {
                "MinimumReplicasUnavailable"
            },
            if available {
                "Deployment has minimum availability."
            } else {
                "Deployment does not have minimum availability."
            },
            now_s
        ),
        condition(
            old_conds,
            "Progressing",
            true,
            if complete {
                "NewReplicaSetAvailable"
            } else {
                "ReplicaSetUpdated"
            },
            &if complete {
                format!("ReplicaSet \"{rs_name}\" has successfully progressed.")
            } else {
                format!("ReplicaSet \"{rs_name}\" is progressing.")
            },
            now_s
        ),
    ]);
    let mut status = json!({"observedGeneration": i(d, "/metadata/generation"), "replicas": replicas, "updatedReplicas": updated,
        "readyReplicas": ready, "availableReplicas": avail, "conditions": conds});
    if spec_total - avail > 0 {
        status["unavailableReplicas"] = json!(spec_total - avail);
    }
    status
}
