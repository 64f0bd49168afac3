//! A cache of objects that aim at a workload (VPAs by `targetRef`, autoscalers by
//! `scaleTargetRef`), looked up by the workload: `(namespace, kind, name)` → the objects, sorted
//! by name, without scanning them all.
//!
//! Fed by a watch ([`TargetIndex::apply`] with every [`Event`]). Invariant, as kube's reflector:
//! after a (re)list completes (`InitDone`) the index holds exactly the listed objects; objects
//! arriving during a relist go to a buffer that replaces the index at once.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockWriteGuard};

use kube::ResourceExt;
use kube::runtime::watcher::Event;

/// `(namespace, kind, name)` of the workload an object aims at.
pub type TargetKey = (String, String, String);

/// How to read the workload an object aims at: `(kind, name)`, `None` when it names none.
pub type TargetOf<K> = fn(&K) -> Option<(String, String)>;

/// The objects of one workload, by their own name.
type ByTarget<K> = HashMap<TargetKey, BTreeMap<String, Arc<K>>>;

struct Inner<K> {
    by_target: ByTarget<K>,
    /// `(namespace, name)` of each object → the workload it was filed under.
    filed: HashMap<(String, String), TargetKey>,
}

impl<K> Default for Inner<K> {
    fn default() -> Self {
        Self {
            by_target: HashMap::new(),
            filed: HashMap::new(),
        }
    }
}

impl<K: kube::Resource> Inner<K> {
    fn remove(&mut self, namespace: &str, name: &str) {
        if let Some(key) = self.filed.remove(&(namespace.to_owned(), name.to_owned()))
            && let Some(list) = self.by_target.get_mut(&key)
        {
            list.remove(name);
            if list.is_empty() {
                self.by_target.remove(&key);
            }
        }
    }

    fn insert(&mut self, obj: &K, target_of: TargetOf<K>)
    where
        K: Clone,
    {
        let namespace = obj.namespace().unwrap_or_default();
        let name = obj.name_any();
        self.remove(&namespace, &name);
        if let Some((kind, target)) = target_of(obj) {
            let key = (namespace.clone(), kind, target);
            self.by_target
                .entry(key.clone())
                .or_default()
                .insert(name.clone(), Arc::new(obj.clone()));
            self.filed.insert((namespace, name), key);
        }
    }
}

/// The index; cheap to clone (shared).
pub struct TargetIndex<K> {
    inner: Arc<RwLock<Inner<K>>>,
    buffer: Arc<RwLock<Option<Inner<K>>>>,
    synced: Arc<AtomicBool>,
    target_of: TargetOf<K>,
}

impl<K> Clone for TargetIndex<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            buffer: self.buffer.clone(),
            synced: self.synced.clone(),
            target_of: self.target_of,
        }
    }
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<K: kube::Resource + Clone> TargetIndex<K> {
    /// An empty index reading each object's workload with `target_of`.
    pub fn new(target_of: TargetOf<K>) -> Self {
        Self {
            inner: Arc::new(RwLock::new(Inner::default())),
            buffer: Arc::new(RwLock::new(None)),
            synced: Arc::new(AtomicBool::new(false)),
            target_of,
        }
    }

    /// Applies one watch event.
    pub fn apply(&self, event: &Event<K>) {
        match event {
            Event::Apply(obj) => write(&self.inner).insert(obj, self.target_of),
            Event::Delete(obj) => {
                write(&self.inner).remove(&obj.namespace().unwrap_or_default(), &obj.name_any());
            }
            Event::Init => *write(&self.buffer) = Some(Inner::default()),
            Event::InitApply(obj) => write(&self.buffer)
                .get_or_insert_with(Inner::default)
                .insert(obj, self.target_of),
            Event::InitDone => {
                let fresh = write(&self.buffer).take().unwrap_or_default();
                *write(&self.inner) = fresh;
                self.synced.store(true, Ordering::Release);
            }
        }
    }

    /// The objects in `namespace` aiming at `kind/name`, sorted by name.
    pub fn get(&self, namespace: &str, kind: &str, name: &str) -> Vec<Arc<K>> {
        let inner = self
            .inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        inner
            .by_target
            .get(&(namespace.to_owned(), kind.to_owned(), name.to_owned()))
            .map(|list| list.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether a first list has completed.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::autoscaling::v2::{
        CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec,
    };

    use super::*;

    fn hpa(name: &str, target: &str) -> HorizontalPodAutoscaler {
        let mut h = HorizontalPodAutoscaler {
            spec: Some(HorizontalPodAutoscalerSpec {
                scale_target_ref: CrossVersionObjectReference {
                    api_version: Some("apps/v1".into()),
                    kind: "Deployment".into(),
                    name: target.into(),
                },
                max_replicas: 3,
                ..HorizontalPodAutoscalerSpec::default()
            }),
            ..HorizontalPodAutoscaler::default()
        };
        h.metadata.name = Some(name.into());
        h.metadata.namespace = Some("ns".into());
        h
    }

    fn index() -> TargetIndex<HorizontalPodAutoscaler> {
        TargetIndex::new(|h| {
            let r = &h.spec.as_ref()?.scale_target_ref;
            Some((r.kind.clone(), r.name.clone()))
        })
    }

    fn names(list: &[Arc<HorizontalPodAutoscaler>]) -> Vec<String> {
        list.iter().map(|h| h.name_any()).collect()
    }

    #[test]
    fn objects_are_found_by_their_workload_and_move_when_it_changes() {
        let i = index();
        i.apply(&Event::Apply(hpa("b", "web")));
        i.apply(&Event::Apply(hpa("a", "web")));
        i.apply(&Event::Apply(hpa("c", "db")));
        assert_eq!(names(&i.get("ns", "Deployment", "web")), ["a", "b"]);
        assert!(i.get("other", "Deployment", "web").is_empty());
        // b now aims at db: it leaves web.
        i.apply(&Event::Apply(hpa("b", "db")));
        assert_eq!(names(&i.get("ns", "Deployment", "web")), ["a"]);
        assert_eq!(names(&i.get("ns", "Deployment", "db")), ["b", "c"]);
        i.apply(&Event::Delete(hpa("a", "web")));
        assert!(i.get("ns", "Deployment", "web").is_empty());
    }

    #[test]
    fn a_relist_replaces_everything_at_once() {
        let i = index();
        i.apply(&Event::Apply(hpa("gone", "web")));
        assert!(!i.is_synced());
        i.apply(&Event::Init);
        i.apply(&Event::InitApply(hpa("kept", "web")));
        // Until the list completes, lookups see the old state.
        assert_eq!(names(&i.get("ns", "Deployment", "web")), ["gone"]);
        i.apply(&Event::InitDone);
        assert!(i.is_synced());
        assert_eq!(names(&i.get("ns", "Deployment", "web")), ["kept"]);
    }
}
