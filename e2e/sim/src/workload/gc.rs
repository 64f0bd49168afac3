//! Garbage collection: a terminating namespace's objects are deleted and the namespace goes once
//! it is empty; an object whose every owner reference points at a missing uid is deleted.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;

use super::{Ctx, deleting, key, log_conflict, s};
use crate::registry::ResourceDef;
use crate::store::Mutation;

pub(super) fn namespaces(ctx: &Ctx<'_>) {
    let cluster = ctx.cluster;
    let (nss, _) = cluster.store.list(&key("", "namespaces"), None);
    for n in nss.iter().filter(|n| deleting(n)) {
        let ns = s(n, "/metadata/name");
        let mut remaining = 0;
        for def in cluster
            .registry
            .all()
            .iter()
            .filter(|d| d.namespaced && !d.is_virtual())
        {
            let (items, _) = cluster.store.list(&key(&def.group, &def.plural), Some(ns));
            remaining += items.len();
            for o in items.iter().filter(|o| !deleting(o)) {
                ctx.delete(&def.group, &def.plural, o, None, "namespace-controller");
            }
        }
        if remaining == 0 {
            let r = cluster
                .store
                .mutate(&key("", "namespaces"), "", ns, "", |_| Ok(Mutation::Delete));
            log_conflict(r.err());
        }
    }
}

pub(super) fn garbage_collect(ctx: &Ctx<'_>) {
    let cluster = ctx.cluster;
    let defs = cluster.registry.all();
    let mut uids: HashSet<String> = HashSet::new();
    let mut dependents: Vec<(Arc<ResourceDef>, Arc<Value>)> = Vec::new();
    for def in defs.iter().filter(|d| !d.is_virtual()) {
        let (items, _) = cluster.store.list(&key(&def.group, &def.plural), None);
        for o in items {
            uids.insert(s(&o, "/metadata/uid").to_string());
            if o.pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
            {
                dependents.push((def.clone(), o));
            }
        }
    }
    for (def, o) in dependents {
        let refs = o
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if !deleting(&o)
            && refs
                .iter()
                .all(|r| !uids.contains(r.get("uid").and_then(Value::as_str).unwrap_or_default()))
        {
            ctx.delete(&def.group, &def.plural, &o, None, "garbage-collector");
        }
    }
}
