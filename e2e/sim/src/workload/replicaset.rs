//! The ReplicaSet controller: creates pods from the template up to `spec.replicas`, deletes the
//! least useful first (unscheduled, pending, not ready, then the newest), and reports status.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{
    Ctx, active, available, by_namespace, deleting, i, key, owned_by, owner_ref, pod_ready, s,
};

pub(super) async fn run(ctx: &Ctx<'_>) {
    let cluster = ctx.cluster;
    let (rss, _) = cluster.store.list(&key("apps", "replicasets"), None);
    if rss.is_empty() {
        return;
    }
    let pods = by_namespace(cluster.store.list(&key("", "pods"), None).0);
    let empty = Vec::new();
    for rs in rss.iter().filter(|r| !deleting(r)) {
        let ns = s(rs, "/metadata/namespace");
        let pods_ns = pods.get(ns).unwrap_or(&empty);
        let owned: Vec<&Arc<Value>> = owned_by(pods_ns, rs)
            .into_iter()
            .filter(|p| active(p))
            .collect();
        let desired = i(rs, "/spec/replicas");
        let have = owned.len() as i64;
        if have < desired {
            let mut template = rs
                .pointer("/spec/template")
                .cloned()
                .unwrap_or_else(|| json!({}));
            let mut metadata = template
                .get("metadata")
                .cloned()
                .unwrap_or_else(|| json!({}));
            metadata["generateName"] = json!(format!("{}-", s(rs, "/metadata/name")));
            metadata["namespace"] = json!(ns);
            metadata["ownerReferences"] = json!([owner_ref(rs, "ReplicaSet")]);
            if let Some(m) = metadata.as_object_mut() {
                m.remove("name");
                m.remove("creationTimestamp");
            }
            let spec = template
                .get_mut("spec")
                .map_or_else(|| json!({}), Value::take);
            for _ in 0..(desired - have).min(500) {
                let pod =
                    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec});
                ctx.create("", "pods", ns, pod, "replicaset-controller")
                    .await;
            }
        } else if have > desired {
            let mut victims = owned.clone();
            // Delete the least useful first: unscheduled, pending, not ready, then the newest.
            victims.sort_by_key(|p| {
                let rank = if s(p, "/spec/nodeName").is_empty() {
                    0
                } else if s(p, "/status/phase") == "Pending" {
                    1
                } else if !pod_ready(p) {
                    2
                } else {
                    3
                };
                (
                    rank,
                    std::cmp::Reverse(s(p, "/metadata/creationTimestamp").to_string()),
                )
            });
            for p in victims.iter().take((have - desired) as usize) {
                ctx.delete("", "pods", p, None, "replicaset-controller");
            }
        }
        let min_ready = i(rs, "/spec/minReadySeconds");
        let ready = owned.iter().filter(|p| pod_ready(p)).count() as i64;
        let avail = owned
            .iter()
            .filter(|p| available(p, min_ready, ctx.now))
            .count() as i64;
        let status = json!({"replicas": have, "fullyLabeledReplicas": have, "readyReplicas": ready, "availableReplicas": avail,
            "observedGeneration": i(rs, "/metadata/generation")});
        let mut merged = rs.get("status").cloned().unwrap_or_else(|| json!({}));
        for (k, v) in status.as_object().into_iter().flatten() {
            merged[k] = v.clone();
        }
        ctx.write_status("apps", "replicasets", rs, merged, "replicaset-controller")
            .await;
    }
}
