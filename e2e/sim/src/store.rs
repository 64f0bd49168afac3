//! Object storage and the watch event log.
//!
//! Invariants:
//! - one global resourceVersion counter; every write (create, update, delete) bumps it by one and
//!   stamps the object's `metadata.resourceVersion`; a write that changes nothing bumps nothing;
//! - the event log holds every write with rv in (`compacted`, `rv`], oldest first, at most
//!   `window` events; a watch from a version ≤ `compacted` gets 410 Gone;
//! - a write etcd would refuse for its size (`object_size`) stores nothing and bumps nothing;
//! - events are broadcast under the same lock that assigns their rv, so every watcher sees
//!   them in rv order and a watch never misses an event between its backlog and live stream.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use hyper::body::Bytes;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::error::ApiError;
use crate::object_size;
use crate::registry::ResourceKey;

/// (namespace, name); namespace is "" for cluster-scoped objects.
pub type ObjKey = (String, String);

/// The live side of a watch.
pub type EventReceiver = broadcast::Receiver<Arc<StoredEvent>>;

/// Watch event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created (or entered the watcher's selector).
    Added,
    /// Updated.
    Modified,
    /// Deleted (or left the watcher's selector).
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One write, as the log and watchers see it.
#[derive(Debug)]
pub struct StoredEvent {
    /// The resourceVersion the write produced.
    pub rv: u64,
    /// The resource written.
    pub key: ResourceKey,
    /// The object's namespace ("" for cluster-scoped).
    pub namespace: String,
    /// What happened.
    pub event_type: EventType,
    /// The object after the write (for a delete: the last state, with the delete's rv).
    pub object: Arc<Value>,
    /// The object before the write (updates and deletes), for selector transitions.
    pub prev: Option<Arc<Value>>,
    /// The object's JSON, encoded once and shared by every watcher.
    pub encoded: OnceLock<Bytes>,
}

impl StoredEvent {
    /// The object's JSON bytes (encoded on first use).
    pub fn object_json(&self) -> Bytes {
        self.encoded
            .get_or_init(|| Bytes::from(serde_json::to_vec(&*self.object).unwrap_or_default()))
            .clone()
    }
}

/// What a mutation closure decides.
#[derive(Debug)]
pub enum Mutation {
    /// Store this object.
    Replace(Value),
    /// Remove the object.
    Delete,
    /// Nothing changes (no rv bump, no event).
    Unchanged,
}

#[derive(Debug, Default)]
struct State {
    rv: u64,
    tables: HashMap<ResourceKey, BTreeMap<ObjKey, Arc<Value>>>,
    log: VecDeque<Arc<StoredEvent>>,
    compacted: u64,
}

/// One page of a list ([`Store::page`]).
#[derive(Debug)]
pub struct Page {
    /// The page's objects, in (namespace, name) order.
    pub items: Vec<Arc<Value>>,
    /// The resourceVersion the page is consistent with.
    pub rv: u64,
    /// Whether objects follow the page.
    pub more: bool,
    /// How many follow, when the page was not filtered (kube-apiserver leaves
    /// `remainingItemCount` unset for a list with a selector, as the count is not known).
    pub remaining: Option<usize>,
}

/// The objects of `table` (in `ns` when given) after `after`, in (namespace, name) order: a
/// range of the ordered table, so what precedes `after` or lies outside `ns` is not visited.
fn walk<'t>(
    table: &'t BTreeMap<ObjKey, Arc<Value>>,
    ns: Option<&'t str>,
    after: Option<&ObjKey>,
) -> impl Iterator<Item = &'t Arc<Value>> {
    let start = match (after, ns) {
        (Some(a), _) => Bound::Excluded(a.clone()),
        (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
        (None, None) => Bound::Unbounded,
    };
    table
        .range((start, Bound::Unbounded))
        .take_while(move |((n, _), _)| ns.is_none_or(|ns| ns == n))
        .map(|(_, o)| o)
}

/// The object store.
#[derive(Debug)]
pub struct Store {
    state: Mutex<State>,
    tx: broadcast::Sender<Arc<StoredEvent>>,
    window: usize,
}

/// Capacity of the live broadcast channel; a watcher that falls this far behind is closed and
/// resumes from its last resourceVersion, as a slow client of kube-apiserver would.
const BROADCAST_CAPACITY: usize = 65_536;

fn obj_key(obj: &Value) -> ObjKey {
    let s = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (s("/metadata/namespace"), s("/metadata/name"))
}

fn stamp(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
    }
}

impl Store {
    /// An empty store whose event log keeps `window` events (at least 1).
    pub fn new(window: usize) -> Self {
        let (tx, _) = broadcast::channel(BROADCAST_CAPACITY);
        Self {
            state: Mutex::new(State {
                rv: 1,
                ..State::default()
            }),
            tx,
            window: window.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The latest resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// One object.
    pub fn get(&self, key: &ResourceKey, ns: &str, name: &str) -> Option<Arc<Value>> {
        let st = self.lock();
        st.tables
            .get(key)?
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// All objects of a resource (in one namespace when `ns` is given), ordered by
    /// (namespace, name), with the resourceVersion they are consistent with.
    pub fn list(&self, key: &ResourceKey, ns: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        let st = self.lock();
        let items = st
            .tables
            .get(key)
            .map(|t| walk(t, ns, None).cloned().collect())
            .unwrap_or_default();
        (items, st.rv)
    }

    /// One page of a list: the objects of `key` (in `ns` when given) after `after` in
    /// (namespace, name) order that `keep` accepts, at most `limit`. The walk starts at `after`
    /// in the ordered table and stops one match past the page, so a page costs about what it
    /// returns: filtering the whole table for every page made a list of 100,000 objects in
    /// pages of 500 cost 200 full scans, minutes of the bench's two cores.
    pub fn page(
        &self,
        key: &ResourceKey,
        ns: Option<&str>,
        after: Option<&ObjKey>,
        limit: usize,
        keep: Option<&dyn Fn(&Value) -> bool>,
    ) -> Page {
        let st = self.lock();
        let mut page = Page {
            items: Vec::new(),
            rv: st.rv,
            more: false,
            remaining: None,
        };
        let Some(table) = st.tables.get(key) else {
            return page;
        };
        let mut rest = walk(table, ns, after).filter(|o| keep.is_none_or(|keep| keep(o)));
        page.items = rest.by_ref().take(limit).cloned().collect();
        if keep.is_none() {
            let remaining = rest.count();
            page.more = remaining > 0;
            page.remaining = Some(remaining);
        } else {
            page.more = rest.next().is_some();
        }
        page
    }

    fn record(&self, st: &mut State, event: StoredEvent) {
        let event = Arc::new(event);
        st.log.push_back(event.clone());
        while st.log.len() > self.window {
            if let Some(old) = st.log.pop_front() {
                st.compacted = old.rv;
            }
        }
        // No receivers is fine: nobody is watching.
        let _ = self.tx.send(event);
    }

    /// Stores a new object; 409 `AlreadyExists` when (namespace, name) is taken.
    pub fn create(
        &self,
        key: &ResourceKey,
        mut obj: Value,
        group: &str,
    ) -> Result<Arc<Value>, ApiError> {
        let ok = obj_key(&obj);
        let mut st = self.lock();
        if st.tables.get(key).is_some_and(|t| t.contains_key(&ok)) {
            return Err(ApiError::already_exists(group, &key.1, &ok.1));
        }
        object_size::check_stored(&obj)?;
        st.rv += 1;
        let rv = st.rv;
        stamp(&mut obj, rv);
        let obj = Arc::new(obj);
        st.tables
            .entry(key.clone())
            .or_default()
            .insert(ok.clone(), obj.clone());
        self.record(
            &mut st,
            StoredEvent {
                rv,
                key: key.clone(),
                namespace: ok.0,
                event_type: EventType::Added,
                object: obj.clone(),
                prev: None,
                encoded: OnceLock::new(),
            },
        );
        Ok(obj)
    }

    /// Atomically reads, decides and writes one object. `f` sees the current object and
    /// returns what to do; 404 when the object does not exist. Returns the object as stored
    /// (for a delete: its final state).
    pub fn mutate<F>(
        &self,
        key: &ResourceKey,
        ns: &str,
        name: &str,
        group: &str,
        f: F,
    ) -> Result<Arc<Value>, ApiError>
    where
        F: FnOnce(&Arc<Value>) -> Result<Mutation, ApiError>,
    {
        let ok = (ns.to_string(), name.to_string());
        let mut st = self.lock();
        let current = st
            .tables
            .get(key)
            .and_then(|t| t.get(&ok))
            .cloned()
            .ok_or_else(|| ApiError::not_found(group, &key.1, name))?;
        match f(&current)? {
            Mutation::Unchanged => Ok(current),
            Mutation::Replace(mut obj) => {
                object_size::check_stored(&obj)?;
                st.rv += 1;
                let rv = st.rv;
                stamp(&mut obj, rv);
                let obj = Arc::new(obj);
                st.tables
                    .entry(key.clone())
                    .or_default()
                    .insert(ok, obj.clone());
                self.record(
                    &mut st,
                    StoredEvent {
                        rv,
                        key: key.clone(),
                        namespace: ns.to_string(),
                        event_type: EventType::Modified,
                        object: obj.clone(),
                        prev: Some(current),
                        encoded: OnceLock::new(),
                    },
                );
                Ok(obj)
            }
            Mutation::Delete => {
                st.rv += 1;
                let rv = st.rv;
                if let Some(t) = st.tables.get_mut(key) {
                    t.remove(&ok);
                }
                let mut last = (*current).clone();
                stamp(&mut last, rv);
                let last = Arc::new(last);
                self.record(
                    &mut st,
                    StoredEvent {
                        rv,
                        key: key.clone(),
                        namespace: ns.to_string(),
                        event_type: EventType::Deleted,
                        object: last.clone(),
                        prev: Some(current),
                        encoded: OnceLock::new(),
                    },
                );
                Ok(last)
            }
        }
    }

    /// Subscribes to writes of `key` after `from`: returns the logged events after `from`
    /// (all resources; the caller filters) and a live receiver starting right after them.
    /// 410 Gone when `from` is older than the log window.
    pub fn watch_from(
        &self,
        from: u64,
    ) -> Result<(Vec<Arc<StoredEvent>>, EventReceiver), ApiError> {
        let st = self.lock();
        if from < st.compacted {
            return Err(ApiError::expired(format!(
                "too old resource version: {from} ({})",
                st.compacted + 1
            )));
        }
        let start = st.log.partition_point(|e| e.rv <= from);
        let backlog = st.log.range(start..).cloned().collect();
        Ok((backlog, self.tx.subscribe()))
    }

    /// Takes a consistent snapshot of a resource and subscribes to what follows it.
    pub fn snapshot_and_watch(
        &self,
        key: &ResourceKey,
        ns: Option<&str>,
    ) -> (Vec<Arc<Value>>, u64, broadcast::Receiver<Arc<StoredEvent>>) {
        let st = self.lock();
        let rx = self.tx.subscribe();
        let items = st
            .tables
            .get(key)
            .map(|t| walk(t, ns, None).cloned().collect())
            .unwrap_or_default();
        (items, st.rv, rx)
    }

    /// Drops the whole event log: any watch from a version before now gets 410 Gone.
    pub fn compact(&self) {
        let mut st = self.lock();
        st.log.clear();
        st.compacted = st.rv;
    }

    /// The oldest resourceVersion a watch can still start from.
    pub fn compacted_rv(&self) -> u64 {
        self.lock().compacted
    }

    /// Every resource key with at least one object, and the number of objects.
    pub fn resource_counts(&self) -> Vec<(ResourceKey, usize)> {
        self.lock()
            .tables
            .iter()
            .map(|(k, t)| (k.clone(), t.len()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ResourceKey {
        (String::new(), "configmaps".into())
    }

    fn cm(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "default"}})
    }

    #[test]
    fn versions_increase_and_conflicts_are_detected() {
        let s = Store::new(100);
        let a = s.create(&key(), cm("a"), "").unwrap();
        let b = s.create(&key(), cm("b"), "").unwrap();
        let rv = |o: &Value| {
            o["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        };
        assert!(rv(&b) > rv(&a));
        assert_eq!(s.create(&key(), cm("a"), "").unwrap_err().code, 409);
        let same = s
            .mutate(&key(), "default", "a", "", |_| Ok(Mutation::Unchanged))
            .unwrap();
        assert_eq!(rv(&same), rv(&a));
        let d = s
            .mutate(&key(), "default", "a", "", |_| Ok(Mutation::Delete))
            .unwrap();
        assert_eq!(rv(&d), s.current_rv());
        assert!(s.get(&key(), "default", "a").is_none());
        assert_eq!(
            s.mutate(&key(), "default", "a", "", |_| Ok(Mutation::Delete))
                .unwrap_err()
                .code,
            404
        );
    }

    #[test]
    fn window_compacts_and_old_watches_get_410() {
        let s = Store::new(2);
        for i in 0..5 {
            s.create(&key(), cm(&format!("c{i}")), "").unwrap();
        }
        assert_eq!(s.watch_from(1).unwrap_err().code, 410);
        let (backlog, _) = s.watch_from(s.current_rv() - 1).unwrap();
        assert_eq!(backlog.len(), 1);
        s.compact();
        assert_eq!(s.watch_from(s.current_rv() - 1).unwrap_err().code, 410);
        assert!(s.watch_from(s.current_rv()).is_ok());
    }

    #[test]
    fn list_by_namespace() {
        let s = Store::new(10);
        s.create(&key(), cm("a"), "").unwrap();
        s.create(
            &key(),
            json!({"metadata": {"name": "z", "namespace": "other"}}),
            "",
        )
        .unwrap();
        assert_eq!(s.list(&key(), Some("default")).0.len(), 1);
        assert_eq!(s.list(&key(), None).0.len(), 2);
    }

    fn names(items: &[Arc<Value>]) -> Vec<String> {
        items
            .iter()
            .map(|o| {
                format!("{}/{}", o["metadata"]["namespace"], o["metadata"]["name"]).replace('"', "")
            })
            .collect()
    }

    /// Pages followed from one to the next give the whole list, in order, with or without a
    /// filter, in one namespace or all, whatever the page size; the count of what follows is
    /// known only without a filter.
    #[test]
    fn pages_put_together_are_the_list() {
        let s = Store::new(100);
        for ns in ["a", "b", "c"] {
            for i in 0..5 {
                s.create(
                    &key(),
                    json!({"metadata": {"name": format!("o{i}"), "namespace": ns}}),
                    "",
                )
                .unwrap();
            }
        }
        let even = |o: &Value| {
            o["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with(['0', '2', '4']))
        };
        for ns in [None, Some("b"), Some("none")] {
            for filter in [None, Some(&even as &dyn Fn(&Value) -> bool)] {
                let whole: Vec<Arc<Value>> = s
                    .list(&key(), ns)
                    .0
                    .into_iter()
                    .filter(|o| filter.is_none_or(|f| f(o)))
                    .collect();
                for limit in 1..=16 {
                    let mut got = Vec::new();
                    let mut after: Option<ObjKey> = None;
                    loop {
                        let page = s.page(&key(), ns, after.as_ref(), limit, filter);
                        assert!(page.items.len() <= limit);
                        got.extend(page.items.iter().cloned());
                        let follow = whole.len() - got.len();
                        assert_eq!(page.more, follow > 0, "{ns:?} {limit}");
                        assert_eq!(page.remaining, filter.is_none().then_some(follow));
                        if !page.more {
                            break;
                        }
                        after = page.items.last().map(|o| obj_key(o));
                    }
                    assert_eq!(names(&got), names(&whole), "{ns:?} limit {limit}");
                }
            }
        }
    }
}
