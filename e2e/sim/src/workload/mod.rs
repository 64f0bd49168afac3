//! The workload model: the controllers and kubelet a real cluster would run, and the load that
//! drives the metrics APIs. One task ticks every `SimConfig::tick` of sim time:
//!
//! - scheduler + kubelet: unscheduled pods are bound round-robin to the sim's nodes; a pod is
//!   Running `pod_start` after creation and Ready `pod_ready` later; a terminating pod is gone
//!   `min(pod_termination, grace period)` after its deletion (finalizers permitting);
//! - `ReplicaSet`, Deployment (new `ReplicaSet` per template, `RollingUpdate` with maxSurge /
//!   maxUnavailable, Recreate) and `StatefulSet` (`OrderedReady` / Parallel, rolling update from the
//!   highest ordinal down to the partition) controllers with their status fields and the
//!   `pod-template-hash` / `controller-revision-hash` labels and ownerReferences;
//! - `PodDisruptionBudget` status, namespace termination and owner-reference garbage collection;
//! - load: each workload's offered load (`LoadSpec`) is split across its Ready pods into per-pod
//!   CPU, memory (`OOMKilled` past the limit), a per-pod custom metric, a per-object metric and
//!   an optional external queue metric.
//!
//! Not modelled: `DaemonSets` and Jobs create no pods, no node capacity or affinity in scheduling,
//! no proportional scaling of a Deployment mid-rollout, no orphan adoption.
//!
//! One module per controller: `kubelet` (scheduling, pod lifecycle, OOM kills), `replicaset`,
//! `deployment`, `statefulset`, `gc` (namespace termination, owner references) and
//! `load` (the load model and the samples the metrics APIs serve). This module holds what they
//! share: reading object fields, the controllers' writes (`Ctx`), and the tick that runs them.

mod deployment;
mod gc;
mod kubelet;
mod load;
mod replicaset;
mod statefulset;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::api::{DeleteOptions, ObjectRef, Part};
use crate::clock::{parse_time, rfc3339};
use crate::control::Caller;
use crate::error::ApiError;
use crate::random::{fnv1a, mix};
use crate::registry::ResourceDef;
use crate::{Cluster, eviction};

pub use load::{ContainerUsage, LoadProfile, LoadSpec, LoadStep, Model, PodUsage, WorkloadKey};

fn s<'a>(o: &'a Value, p: &str) -> &'a str {
    o.pointer(p).and_then(Value::as_str).unwrap_or_default()
}

fn i(o: &Value, p: &str) -> i64 {
    o.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

fn key(group: &str, plural: &str) -> (String, String) {
    (group.into(), plural.into())
}

fn controller_uid(o: &Value) -> Option<&str> {
    o.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|r| r.get("uid"))
        .and_then(Value::as_str)
}

fn owner_ref(o: &Value, kind: &str) -> Value {
    json!({"apiVersion": o["apiVersion"], "kind": kind, "name": s(o, "/metadata/name"), "uid": s(o, "/metadata/uid"),
        "controller": true, "blockOwnerDeletion": true})
}

fn deleting(o: &Value) -> bool {
    o.pointer("/metadata/deletionTimestamp").is_some()
}

fn pod_ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

fn ready_since(p: &Value) -> Option<Timestamp> {
    p.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready" && c["status"] == "True")?
        .get("lastTransitionTime")?
        .as_str()
        .and_then(parse_time)
}

fn active(p: &Value) -> bool {
    !deleting(p) && !matches!(s(p, "/status/phase"), "Succeeded" | "Failed")
}

/// A stable, DNS-safe hash of a pod template (like `pod-template-hash`).
pub fn template_hash(template: &Value) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut t = template.clone();
    if let Some(l) = t
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        l.remove("pod-template-hash");
    }
    let mut h = mix(fnv1a(&serde_json::to_vec(&t).unwrap_or_default()));
    (0..10)
        .map(|_| {
            let c = ALPHABET[(h % ALPHABET.len() as u64) as usize] as char;
            h /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

fn owned_by<'a>(items: &'a [Arc<Value>], owner: &Value) -> Vec<&'a Arc<Value>> {
    let uid = s(owner, "/metadata/uid");
    items
        .iter()
        .filter(|o| controller_uid(o) == Some(uid))
        .collect()
}

fn by_namespace(items: Vec<Arc<Value>>) -> HashMap<String, Vec<Arc<Value>>> {
    let mut m: HashMap<String, Vec<Arc<Value>>> = HashMap::new();
    for o in items {
        m.entry(s(&o, "/metadata/namespace").to_string())
            .or_default()
            .push(o);
    }
    m
}

fn available(p: &Value, min_ready_seconds: i64, now: Timestamp) -> bool {
    pod_ready(p)
        && ready_since(p).is_none_or(|t| now.duration_since(t).as_secs() >= min_ready_seconds)
}

struct Ctx<'a> {
    cluster: &'a Arc<Cluster>,
    now: Timestamp,
}

impl Ctx<'_> {
    fn def(&self, group: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.cluster.registry.by_key(group, plural)
    }

    /// `obj` as the controllers address it: at its resource's first served version.
    fn object<'a>(def: &'a ResourceDef, obj: &'a Value) -> ObjectRef<'a> {
        ObjectRef {
            def,
            version: &def.versions[0],
            ns: s(obj, "/metadata/namespace"),
            name: s(obj, "/metadata/name"),
        }
    }

    async fn write_status(&self, group: &str, plural: &str, obj: &Value, status: Value, who: &str) {
        if obj.get("status") == Some(&status) {
            return;
        }
        let Some(def) = self.def(group, plural) else {
            return;
        };
        let mut new = obj.clone();
        new["status"] = status;
        let part = if def.status { Part::Status } else { Part::Main };
        let r = self
            .cluster
            .update(Self::object(&def, obj), new, part, &Caller::controller(who))
            .await;
        log_conflict(r.err());
    }

    async fn set_replicas(&self, group: &str, plural: &str, obj: &Value, replicas: i64, who: &str) {
        if i(obj, "/spec/replicas") == replicas {
            return;
        }
        let Some(def) = self.def(group, plural) else {
            return;
        };
        let mut new = obj.clone();
        new["spec"]["replicas"] = json!(replicas);
        let r = self
            .cluster
            .update(
                Self::object(&def, obj),
                new,
                Part::Main,
                &Caller::controller(who),
            )
            .await;
        log_conflict(r.err());
    }

    async fn create(
        &self,
        group: &str,
        plural: &str,
        ns: &str,
        obj: Value,
        who: &str,
    ) -> Option<Arc<Value>> {
        let def = self.def(group, plural)?;
        match self
            .cluster
            .create(
                &def,
                &def.versions[0],
                ns,
                obj,
                &Caller::controller(who),
                false,
            )
            .await
        {
            Ok(o) => Some(o),
            Err(e) => {
                tracing::debug!(error = %e, "controller create failed");
                None
            }
        }
    }

    fn delete(&self, group: &str, plural: &str, obj: &Value, grace: Option<i64>, who: &str) {
        let Some(def) = self.def(group, plural) else {
            return;
        };
        let opts = DeleteOptions {
            grace_period_seconds: grace,
            ..DeleteOptions::default()
        };
        let r = self
            .cluster
            .delete(Self::object(&def, obj), &opts, &Caller::controller(who));
        log_conflict(r.err());
    }

    fn event(&self, involved: &Value, reason: &str, message: &str, who: &str) {
        let ns = s(involved, "/metadata/namespace");
        let name = format!(
            "{}.{:x}",
            s(involved, "/metadata/name"),
            self.cluster.rng.next_u64() & 0xffff_ffff_ffff
        );
        let now = rfc3339(self.now);
        let ev = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": ns, "uid": self.cluster.rng.uuid(), "creationTimestamp": now},
            "involvedObject": {"apiVersion": involved["apiVersion"], "kind": involved["kind"], "name": s(involved, "/metadata/name"),
                "namespace": ns, "uid": s(involved, "/metadata/uid"), "resourceVersion": s(involved, "/metadata/resourceVersion")},
            "reason": reason, "message": message, "type": "Normal", "count": 1,
            "firstTimestamp": now, "lastTimestamp": now, "source": {"component": who}, "reportingComponent": who,
        });
        let _ = self.cluster.store.create(&key("", "events"), ev, "");
    }
}

fn log_conflict(e: Option<ApiError>) {
    if let Some(e) = e
        && e.code != 409
        && e.code != 404
    {
        tracing::debug!(error = %e, "controller write failed");
    }
}

/// Runs the model until `cancel` fires.
pub async fn run(cluster: Arc<Cluster>, cancel: tokio_util::sync::CancellationToken) {
    let real_tick = cluster
        .clock
        .real_duration(cluster.settings.tick)
        .max(Duration::from_millis(20));
    let mut interval = tokio::time::interval(real_tick);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = interval.tick() => tick(&cluster).await,
        }
    }
}

/// One pass of every controller and the load model.
pub async fn tick(cluster: &Arc<Cluster>) {
    let ctx = Ctx {
        cluster,
        now: cluster.clock.now(),
    };
    kubelet::run(&ctx).await;
    replicaset::run(&ctx).await;
    deployment::run(&ctx).await;
    statefulset::run(&ctx).await;
    pdbs(&ctx).await;
    gc::namespaces(&ctx);
    if cluster.model.next_tick().is_multiple_of(5) {
        gc::garbage_collect(&ctx);
    }
    load::run(&ctx).await;
}

async fn pdbs(ctx: &Ctx<'_>) {
    let (items, _) = ctx
        .cluster
        .store
        .list(&key("policy", "poddisruptionbudgets"), None);
    for pdb in items.iter().filter(|p| !deleting(p)) {
        let status = eviction::pdb_status(ctx.cluster, pdb, ctx.now);
        ctx.write_status(
            "policy",
            "poddisruptionbudgets",
            pdb,
            status,
            "disruption-controller",
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_hash_ignores_its_own_label() {
        let a = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "a", "image": "x"}]}});
        let mut b = a.clone();
        b["metadata"]["labels"]["pod-template-hash"] = json!(template_hash(&a));
        assert_eq!(template_hash(&a), template_hash(&b));
        let mut c = a.clone();
        c["spec"]["containers"][0]["image"] = json!("y");
        assert_ne!(template_hash(&a), template_hash(&c));
    }
}
