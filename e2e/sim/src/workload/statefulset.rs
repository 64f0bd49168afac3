//! The StatefulSet controller: pods `<name>-<ordinal>` created in order (`OrderedReady`, each
//! waiting for the previous to be Ready) or all at once (`Parallel`), removed from the highest
//! ordinal down, rolled from the highest ordinal down to the partition, with the
//! `controller-revision-hash` label and the StatefulSet's status.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::{
    Ctx, available, by_namespace, deleting, i, key, owned_by, owner_ref, pod_ready, s,
    template_hash,
};

/// One pass over every StatefulSet.
pub(super) async fn run(ctx: &Ctx<'_>) {
    let cluster = ctx.cluster;
    let (sets, _) = cluster.store.list(&key("apps", "statefulsets"), None);
    if sets.is_empty() {
        return;
    }
    let pods = by_namespace(cluster.store.list(&key("", "pods"), None).0);
    let empty = Vec::new();
    for ss in sets.iter().filter(|s| !deleting(s)) {
        let ns = s(ss, "/metadata/namespace");
        let owned: Vec<&Arc<Value>> = owned_by(pods.get(ns).unwrap_or(&empty), ss);
        let by_ord: BTreeMap<i64, &Arc<Value>> = owned.iter().map(|p| (ordinal(p), *p)).collect();
        let any_deleting = owned.iter().any(|p| deleting(p));
        let set = Set::new(ss, &by_ord, any_deleting);
        let extra: Vec<&&Arc<Value>> = by_ord
            .iter()
            .filter(|(o, p)| **o >= set.desired && !deleting(p))
            .map(|(_, p)| p)
            .collect();
        if extra.is_empty() {
            create_missing(ctx, &set).await;
            roll_one(ctx, &set);
        } else {
            scale_down(ctx, &set, &extra);
        }
        let status = status(&set, ctx.now);
        ctx.write_status("apps", "statefulsets", ss, status, "statefulset-controller")
            .await;
    }
}

/// A pod's ordinal, from the `-<n>` suffix of its name (-1 when there is none).
fn ordinal(p: &Value) -> i64 {
    s(p, "/metadata/name")
        .rsplit('-')
        .next()
        .and_then(|o| o.parse::<i64>().ok())
        .unwrap_or(-1)
}

/// One StatefulSet and its pods by ordinal, as this pass sees them.
struct Set<'a> {
    ss: &'a Value,
    name: &'a str,
    ns: &'a str,
    desired: i64,
    parallel: bool,
    template: Value,
    /// `<name>-<template hash>`, the `controller-revision-hash` of up-to-date pods.
    update_rev: String,
    by_ord: &'a BTreeMap<i64, &'a Arc<Value>>,
    /// Whether any of its pods (by owner, whatever its name) is terminating.
    any_deleting: bool,
}

impl<'a> Set<'a> {
    fn new(ss: &'a Value, by_ord: &'a BTreeMap<i64, &'a Arc<Value>>, any_deleting: bool) -> Self {
        let name = s(ss, "/metadata/name");
        let template = ss
            .pointer("/spec/template")
            .cloned()
            .unwrap_or_else(|| json!({}));
        Set {
            ss,
            name,
            ns: s(ss, "/metadata/namespace"),
            desired: i(ss, "/spec/replicas"),
            parallel: s(ss, "/spec/podManagementPolicy") == "Parallel",
            update_rev: format!("{name}-{}", template_hash(&template)),
            template,
            by_ord,
            any_deleting,
        }
    }

    /// Whether every ordinal below `upto` has a Ready pod that is not terminating.
    fn all_ready(&self, upto: i64) -> bool {
        (0..upto).all(|o| {
            self.by_ord
                .get(&o)
                .is_some_and(|p| pod_ready(p) && !deleting(p))
        })
    }
}

/// Creates missing ordinals below `replicas`: the lowest one, once every lower pod is Ready
/// and none is terminating (`OrderedReady`), or all of them (`Parallel`).
async fn create_missing(ctx: &Ctx<'_>, set: &Set<'_>) {
    for o in 0..set.desired {
        match set.by_ord.get(&o) {
            None => {
                if !set.parallel && (!set.all_ready(o) || set.any_deleting) {
                    break;
                }
                ctx.create("", "pods", set.ns, pod(set, o), "statefulset-controller")
                    .await;
                if !set.parallel {
                    break;
                }
            }
            Some(p) if !set.parallel && (!pod_ready(p) || deleting(p)) => break,
            Some(_) => {}
        }
    }
}

/// The pod of ordinal `o`: the template with the set's identity labels, hostname and subdomain.
fn pod(set: &Set<'_>, o: i64) -> Value {
    let pod_name = format!("{}-{o}", set.name);
    let mut metadata = set
        .template
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| json!({}));
    metadata["name"] = json!(pod_name);
    metadata["namespace"] = json!(set.ns);
    metadata["labels"]["controller-revision-hash"] = json!(set.update_rev);
    metadata["labels"]["statefulset.kubernetes.io/pod-name"] = json!(pod_name);
    metadata["labels"]["apps.kubernetes.io/pod-index"] = json!(o.to_string());
    metadata["ownerReferences"] = json!([owner_ref(set.ss, "StatefulSet")]);
    let mut spec = set
        .template
        .get("spec")
        .cloned()
        .unwrap_or_else(|| json!({}));
    spec["hostname"] = json!(pod_name);
    if !s(set.ss, "/spec/serviceName").is_empty() {
        spec["subdomain"] = set.ss["spec"]["serviceName"].clone();
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
}

/// Rolling update: replace the highest out-of-date ordinal ≥ partition once all are ready.
fn roll_one(ctx: &Ctx<'_>, set: &Set<'_>) {
    let partition = i(set.ss, "/spec/updateStrategy/rollingUpdate/partition");
    let rolling = s(set.ss, "/spec/updateStrategy/type") != "OnDelete";
    if rolling
        && !set.any_deleting
        && set.all_ready(set.desired)
        && let Some((_, p)) = set.by_ord.iter().rev().find(|(o, p)| {
            **o >= partition
                && **o < set.desired
                && s(p, "/metadata/labels/controller-revision-hash") != set.update_rev
        })
    {
        ctx.delete("", "pods", p, None, "statefulset-controller");
    }
}

/// Scale down: highest ordinal first, one at a time unless Parallel.
fn scale_down(ctx: &Ctx<'_>, set: &Set<'_>, extra: &[&&Arc<Value>]) {
    let take = if set.parallel { extra.len() } else { 1 };
    if set.parallel || (!set.any_deleting && set.all_ready(set.desired)) {
        for p in extra.iter().rev().take(take) {
            ctx.delete("", "pods", p, None, "statefulset-controller");
        }
    }
}

/// The StatefulSet's status: counts of live pods by readiness, availability and revision.
fn status(set: &Set<'_>, now: jiff::Timestamp) -> Value {
    let (ss, desired, update_rev) = (set.ss, set.desired, &set.update_rev);
    let live: Vec<&&Arc<Value>> = set.by_ord.values().filter(|p| !deleting(p)).collect();
    let updated = live
        .iter()
        .filter(|p| s(p, "/metadata/labels/controller-revision-hash") == update_rev)
        .count() as i64;
    let current_rev = if updated == desired {
        update_rev.clone()
    } else {
        ss.pointer("/status/currentRevision")
            .and_then(Value::as_str)
            .unwrap_or(update_rev)
            .to_string()
    };
    let current = live
        .iter()
        .filter(|p| s(p, "/metadata/labels/controller-revision-hash") == current_rev)
        .count() as i64;
    let ready = live.iter().filter(|p| pod_ready(p)).count() as i64;
    let min_ready = i(ss, "/spec/minReadySeconds");
    let avail = live.iter().filter(|p| available(p, min_ready, now)).count() as i64;
    json!({"observedGeneration": i(ss, "/metadata/generation"), "replicas": live.len(), "readyReplicas": ready,
        "currentReplicas": current, "updatedReplicas": updated, "availableReplicas": avail,
        "currentRevision": current_rev, "updateRevision": update_rev, "collisionCount": 0})
}
