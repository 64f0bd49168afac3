//! The ReplicaSet cache of `--pod-selection-strategy` (KEP-5325): for each ReplicaSet, by
//! namespace and uid, only its controller owner reference — the link Deployment → ReplicaSet
//! that [`plimsoll_core::horizontal::pod_owner`] follows. Nothing else of a ReplicaSet is kept.
//!
//! Watched only when the operator turned the opt-in on, so a default installation makes no
//! request for ReplicaSets (and needs no RBAC for them beyond the shipped `apps` rules).
//!
//! Invariant: after a (re)list completes, the index holds exactly the listed ReplicaSets (events
//! during a relist go to a buffer that replaces the index at `InitDone`, as [`crate::pods`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::runtime::watcher::Event;
use plimsoll_core::horizontal::pod_owner::ControllerRef;

use crate::pods::controller_of;

/// namespace → ReplicaSet uid → its controller (absent: the ReplicaSet has none).
type Namespaces = HashMap<String, HashMap<String, ControllerRef>>;

/// Every ReplicaSet's controller reference. Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct ReplicaSetIndex {
    inner: Arc<RwLock<Namespaces>>,
    buffer: Arc<RwLock<Option<Namespaces>>>,
    synced: Arc<AtomicBool>,
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `(namespace, uid, controller)` of `rs`; `None` without a uid or a controller (nothing to
/// follow).
fn entry(rs: &ReplicaSet) -> Option<(String, String, ControllerRef)> {
    let meta = &rs.metadata;
    Some((
        meta.namespace.clone().unwrap_or_default(),
        meta.uid.clone()?,
        controller_of(meta)?,
    ))
}

impl ReplicaSetIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// True once the first list has completed.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Applies one watch event.
    pub fn apply(&self, event: &Event<ReplicaSet>) {
        match event {
            Event::Apply(rs) => {
                let mut inner = write(&self.inner);
                match entry(rs) {
                    Some((ns, uid, owner)) => {
                        inner.entry(ns).or_default().insert(uid, owner);
                    }
                    // An owner removed (orphaned): forget the link.
                    None => remove(&mut inner, rs),
                }
            }
            Event::Delete(rs) => remove(&mut write(&self.inner), rs),
            Event::Init => *write(&self.buffer) = Some(Namespaces::new()),
            Event::InitApply(rs) => {
                if let Some((ns, uid, owner)) = entry(rs) {
                    write(&self.buffer)
                        .get_or_insert_with(Namespaces::new)
                        .entry(ns)
                        .or_default()
                        .insert(uid, owner);
                }
            }
            Event::InitDone => {
                let fresh = write(&self.buffer).take().unwrap_or_default();
                *write(&self.inner) = fresh;
                self.synced.store(true, Ordering::Release);
            }
        }
    }

    /// The controllers of `namespace`'s ReplicaSets, by uid (a snapshot for one evaluation).
    pub fn controllers(&self, namespace: &str) -> HashMap<String, ControllerRef> {
        self.inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(namespace)
            .cloned()
            .unwrap_or_default()
    }
}

fn remove(inner: &mut Namespaces, rs: &ReplicaSet) {
    let (Some(ns), Some(uid)) = (&rs.metadata.namespace, &rs.metadata.uid) else {
        return;
    };
    if let Some(map) = inner.get_mut(ns) {
        map.remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rs(name: &str, uid: &str, owner: Option<&str>) -> ReplicaSet {
        let owners = owner.map(|o| {
            serde_json::json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": o,
                "uid": format!("d-{o}"), "controller": true}])
        });
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "uid": uid,
                "ownerReferences": owners.unwrap_or_else(|| serde_json::json!([]))}
        }))
        .unwrap()
    }

    #[test]
    fn keeps_only_the_controller_and_follows_the_watch() {
        let index = ReplicaSetIndex::new();
        index.apply(&Event::Init);
        index.apply(&Event::InitApply(rs("web-1", "u1", Some("web"))));
        index.apply(&Event::InitApply(rs("bare", "u2", None)));
        assert!(
            index.controllers("ns").is_empty(),
            "nothing before InitDone"
        );
        index.apply(&Event::InitDone);
        assert!(index.is_synced());
        let got = index.controllers("ns");
        assert_eq!(got.len(), 1);
        assert_eq!(got["u1"].name, "web");
        assert_eq!(got["u1"].uid, "d-web");
        // Orphaned, then deleted.
        index.apply(&Event::Apply(rs("web-1", "u1", None)));
        assert!(index.controllers("ns").is_empty());
        index.apply(&Event::Apply(rs("web-2", "u3", Some("web"))));
        index.apply(&Event::Delete(rs("web-2", "u3", Some("web"))));
        assert!(index.controllers("ns").is_empty());
        assert!(index.controllers("other").is_empty());
    }
}
