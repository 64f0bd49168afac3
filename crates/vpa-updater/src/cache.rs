//! What the updater knows of the cluster, kept current by watches instead of lists every loop.
//!
//! One watch per kind, in the namespaces the updater looks at: VPAs and LimitRanges in kube
//! reflector stores; the replica-creating owners (ReplicaSets, StatefulSets,
//! ReplicationControllers, DaemonSets, Jobs) and the pods in [`ByController`] indexes, which
//! file each object under its controller owner, so that a VPA's pods are found without a scan.
//! Pods are kept with their [`PodSnapshot`] read once, when they change, not every loop.
//! Tenants write all of these, so none is kept whole: an owner as its [`OwnerInfo`], a pod cut
//! down to what the updater reads ([`pod_fields`]) as it leaves the watch.
//!
//! Invariants:
//! * after a (re)list completes (`InitDone`) an index holds exactly the listed objects; events
//!   during a relist go to a buffer that replaces the index at once, so no pod outlives a relist
//!   that no longer lists it (kube's reflector does the same for the stores);
//! * pods being deleted, pods without a controller and objects in ignored namespaces are not
//!   kept;
//! * [`Cache::is_synced`] is true once every watch has listed once; a kind the API server does
//!   not serve (404: no StatefulSets, Jobs, … on a trimmed server) counts as listed and empty,
//!   and is asked for again every [`NOT_SERVED_RECHECK`].
//!
//! The watches are `plimsoll_runtime::watch` watches (backoff, logs, `watch_*` metrics).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use futures::future::BoxFuture;
use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{LimitRange, Pod, ReplicationController};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::Event;
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_core::pod_fields::{keep_read_fields, leave_out_over_budget};
use plimsoll_core::vertical::controlling::{self, OwnerKey, Owners};
use plimsoll_core::vertical::object_fields::{
    leave_out_limit_range, leave_out_vpa, limit_range_fields, vpa_fields,
};
use plimsoll_core::vertical::priority::{Owner, PodSnapshot, snapshot_annotation};
use plimsoll_runtime::watch::{Synced, Watch, WatchMetrics};
use prometheus_client::registry::Registry;
use serde::de::DeserializeOwned;

use plimsoll_core::vertical::scope::NamespaceScope as Scope;

/// A pod as the updater keeps it: the object, cut down to what the writes read ([`pod_fields`],
/// annotations emptied), and what the decision reads of it.
#[derive(Debug)]
pub struct CachedPod {
    /// The pod.
    pub pod: Pod,
    /// [`PodSnapshot::from_pod`] of it, or why it cannot be read (the pod is then left alone).
    pub snapshot: Result<PodSnapshot, String>,
}

impl CachedPod {
    /// `metadata.uid` (empty when absent).
    pub fn uid(&self) -> &str {
        self.pod.metadata.uid.as_deref().unwrap_or_default()
    }

    /// `metadata.name` (empty when absent).
    pub fn name(&self) -> &str {
        self.pod.metadata.name.as_deref().unwrap_or_default()
    }
}

/// A replica-creating owner: its own controller and its desired replicas.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnerInfo {
    /// The owner's name.
    pub name: String,
    /// Desired replicas (ReadySet count for a DaemonSet; none for a Job).
    pub replicas: Option<u32>,
    /// Its own controller, with its API group (the owner walk compares groups).
    pub controller: Option<OwnerKey>,
}

/// The controller owner reference of an object.
pub fn controller_of(meta: &ObjectMeta) -> Option<Owner> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| Owner {
            kind: o.kind.clone(),
            name: o.name.clone(),
        })
}

fn namespace(meta: &ObjectMeta) -> String {
    meta.namespace.clone().unwrap_or_default()
}

/// One kind's objects in a compact form `V`, by `(namespace, name)` and by controller owner.
struct Indexed<V> {
    objects: HashMap<(String, String), (Option<Owner>, Arc<V>)>,
    by_controller: HashMap<(String, Owner), BTreeMap<String, Arc<V>>>,
}

impl<V> Default for Indexed<V> {
    fn default() -> Self {
        Self {
            objects: HashMap::new(),
            by_controller: HashMap::new(),
        }
    }
}

impl<V> Indexed<V> {
    fn remove(&mut self, namespace: &str, name: &str) {
        let Some((controller, _)) = self
            .objects
            .remove(&(namespace.to_owned(), name.to_owned()))
        else {
            return;
        };
        if let Some(controller) = controller {
            let key = (namespace.to_owned(), controller);
            if let Some(group) = self.by_controller.get_mut(&key) {
                group.remove(name);
                if group.is_empty() {
                    self.by_controller.remove(&key);
                }
            }
        }
    }

    /// Files `value` (or forgets the object when `None`).
    fn upsert(&mut self, meta: &ObjectMeta, value: Option<V>) {
        let namespace = namespace(meta);
        let name = meta.name.clone().unwrap_or_default();
        self.remove(&namespace, &name);
        let Some(value) = value else { return };
        let value = Arc::new(value);
        let controller = controller_of(meta);
        if let Some(controller) = &controller {
            self.by_controller
                .entry((namespace.clone(), controller.clone()))
                .or_default()
                .insert(name.clone(), value.clone());
        }
        self.objects.insert((namespace, name), (controller, value));
    }
}

/// Objects of one kind filed under their controller owner; cheap to clone (shared).
pub struct ByController<V> {
    inner: Arc<RwLock<Indexed<V>>>,
    buffer: Arc<Mutex<Option<Indexed<V>>>>,
}

impl<V> Clone for ByController<V> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            buffer: self.buffer.clone(),
        }
    }
}

impl<V> Default for ByController<V> {
    fn default() -> Self {
        Self {
            inner: Arc::new(RwLock::new(Indexed::default())),
            buffer: Arc::new(Mutex::new(None)),
        }
    }
}

impl<V> ByController<V> {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Indexed<V>> {
        self.inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Indexed<V>> {
        self.inner
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn buffer(&self) -> std::sync::MutexGuard<'_, Option<Indexed<V>>> {
        self.buffer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Applies one watch event; `convert` gives the compact form of an object, `None` to leave
    /// it out.
    pub fn apply<K: Resource>(&self, event: Event<K>, convert: impl Fn(K) -> Option<V>) {
        match event {
            Event::Apply(obj) => {
                let meta = obj.meta().clone();
                self.write().upsert(&meta, convert(obj));
            }
            Event::Delete(obj) => {
                let meta = obj.meta();
                self.write().remove(
                    meta.namespace.as_deref().unwrap_or_default(),
                    meta.name.as_deref().unwrap_or_default(),
                );
            }
            Event::Init => *self.buffer() = Some(Indexed::default()),
            Event::InitApply(obj) => {
                let meta = obj.meta().clone();
                self.buffer()
                    .get_or_insert_with(Indexed::default)
                    .upsert(&meta, convert(obj));
            }
            Event::InitDone => {
                let fresh = self.buffer().take().unwrap_or_default();
                *self.write() = fresh;
            }
        }
    }

    /// The object `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<V>> {
        self.read()
            .objects
            .get(&(namespace.to_owned(), name.to_owned()))
            .map(|(_, v)| v.clone())
    }

    /// The objects in `namespace` whose controller is `owner`, by name.
    pub fn controlled_by(&self, namespace: &str, owner: &Owner) -> Vec<Arc<V>> {
        self.read()
            .by_controller
            .get(&(namespace.to_owned(), owner.clone()))
            .map(|group| group.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The controller of `namespace/name`, when the object is known and has one.
    pub fn controller(&self, namespace: &str, name: &str) -> Option<Owner> {
        self.read()
            .objects
            .get(&(namespace.to_owned(), name.to_owned()))
            .and_then(|(c, _)| c.clone())
    }

    /// How many objects are indexed.
    pub fn len(&self) -> usize {
        self.read().objects.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The kinds of owner the updater follows, with how each tells its desired replicas.
pub const OWNER_KINDS: [&str; 5] = [
    "ReplicaSet",
    "StatefulSet",
    "ReplicationController",
    "DaemonSet",
    "Job",
];

/// Everything the loop reads; cheap to clone (shared).
#[derive(Clone)]
pub struct Cache {
    vpas: Store<VerticalPodAutoscaler>,
    limit_ranges: Store<LimitRange>,
    owners: [(&'static str, ByController<OwnerInfo>); 5],
    pods: ByController<CachedPod>,
    synced: Vec<Synced>,
}

fn replicas(n: Option<i32>) -> Option<u32> {
    n.and_then(|n| u32::try_from(n).ok())
}

/// The watches that keep a [`Cache`] current; run them with [`Watches::run`].
pub struct Watches {
    tasks: Vec<BoxFuture<'static, ()>>,
    metrics: WatchMetrics,
}

impl Watches {
    /// Runs every watch until dropped (they retry with backoff and never end on their own).
    pub async fn run(self) {
        futures::future::join_all(self.tasks).await;
    }

    /// Counts the watches' errors and relists in `registry` (the service's registry).
    pub fn register_metrics(&self, registry: &mut Registry) {
        self.metrics.add_to(registry);
    }
}

fn api<K>(client: &kube::Client, scope: &Scope) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    <K as Resource>::DynamicType: Default,
{
    match scope.only() {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// How long a kind the API server does not serve is left alone before it is asked for again.
pub const NOT_SERVED_RECHECK: std::time::Duration = std::time::Duration::from_secs(600);

/// The watch of one kind in `scope`, named `kind`. `optional`: a 404 on the list (the server
/// does not serve the kind) counts as listed and empty, and the kind is asked for again only
/// after [`NOT_SERVED_RECHECK`] (not at the watcher's backoff, a request every few seconds for
/// nothing).
fn watch<K>(
    client: &kube::Client,
    scope: &Scope,
    kind: &'static str,
    optional: bool,
    metrics: &WatchMetrics,
) -> Watch<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + DeserializeOwned
        + Send
        + 'static,
{
    let watch = Watch::new(kind, api::<K>(client, scope)).metrics(metrics);
    if optional {
        watch.not_served(NOT_SERVED_RECHECK)
    } else {
        watch
    }
}

/// Feeds one watch's events to `sink`: its task and its sync flag.
fn follow<K>(
    watch: Watch<K>,
    sink: impl FnMut(Event<K>) + Send + 'static,
) -> (BoxFuture<'static, ()>, Synced)
where
    K: Resource + Clone + std::fmt::Debug + DeserializeOwned + Send + 'static,
{
    let synced = watch.synced();
    (Box::pin(watch.run(sink)), synced)
}

/// `watch` of one owner kind feeding `index`: its task and its sync flag.
fn owner_task<K>(
    watch: Watch<K>,
    index: &ByController<OwnerInfo>,
    admits: impl Fn(&ObjectMeta) -> bool + Send + 'static,
    replicas: fn(&K) -> Option<u32>,
) -> (BoxFuture<'static, ()>, Synced)
where
    K: Resource + Clone + std::fmt::Debug + DeserializeOwned + Send + 'static,
{
    let index = index.clone();
    follow(watch, move |e| {
        index.apply(e, |o: K| {
            let meta = o.meta();
            admits(meta).then(|| OwnerInfo {
                name: meta.name.clone().unwrap_or_default(),
                replicas: replicas(&o),
                controller: controlling::controller_of(meta),
            })
        });
    })
}

impl Cache {
    /// An empty cache for `scope`, and the watches that fill it and keep it current (the
    /// caller runs them, e.g. on the service's helper tasks).
    pub fn new(client: &kube::Client, scope: &Scope) -> (Cache, Watches) {
        let metrics = WatchMetrics::default();
        let mut tasks: Vec<BoxFuture<'static, ()>> = Vec::new();
        let mut synced = Vec::new();
        let mut add = |task: (BoxFuture<'static, ()>, Synced)| {
            tasks.push(task.0);
            synced.push(task.1);
        };

        let (vpas, mut vpa_writer) = reflector::store();
        add(follow(
            watch::<VerticalPodAutoscaler>(client, scope, "VerticalPodAutoscaler", false, &metrics)
                .trim(vpa_fields)
                .over_budget(leave_out_vpa),
            move |e| vpa_writer.apply_watcher_event(&e),
        ));
        let (limit_ranges, mut lr_writer) = reflector::store();
        add(follow(
            watch::<LimitRange>(client, scope, "LimitRange", true, &metrics)
                .trim(limit_range_fields)
                .over_budget(leave_out_limit_range),
            move |e| lr_writer.apply_watcher_event(&e),
        ));

        let owners: [(&'static str, ByController<OwnerInfo>); 5] =
            OWNER_KINDS.map(|kind| (kind, ByController::default()));
        let in_scope = Arc::new(scope.clone());
        let admits =
            move |meta: &ObjectMeta| in_scope.admits(meta.namespace.as_deref().unwrap_or_default());
        add(owner_task(
            watch::<ReplicaSet>(client, scope, "ReplicaSet", false, &metrics),
            &owners[0].1,
            admits.clone(),
            |o| replicas(o.spec.as_ref().and_then(|s| s.replicas)),
        ));
        add(owner_task(
            watch::<StatefulSet>(client, scope, "StatefulSet", true, &metrics),
            &owners[1].1,
            admits.clone(),
            |o| replicas(o.spec.as_ref().and_then(|s| s.replicas)),
        ));
        add(owner_task(
            watch::<ReplicationController>(client, scope, "ReplicationController", true, &metrics),
            &owners[2].1,
            admits.clone(),
            |o| replicas(o.spec.as_ref().and_then(|s| s.replicas)),
        ));
        add(owner_task(
            watch::<DaemonSet>(client, scope, "DaemonSet", true, &metrics),
            &owners[3].1,
            admits.clone(),
            |o| replicas(o.status.as_ref().map(|s| s.number_ready)),
        ));
        add(owner_task(
            watch::<Job>(client, scope, "Job", true, &metrics),
            &owners[4].1,
            admits.clone(),
            |_| None,
        ));

        let pods: ByController<CachedPod> = ByController::default();
        let index = pods.clone();
        add(follow(
            watch::<Pod>(client, scope, "Pod", false, &metrics)
                .trim(pod_fields)
                .over_budget(leave_out_over_budget),
            move |e| index.apply(e, |pod| cached_pod(pod, &admits)),
        ));

        let cache = Cache {
            vpas,
            limit_ranges,
            owners,
            pods,
            synced,
        };
        (cache, Watches { tasks, metrics })
    }

    /// True once every watch has listed once.
    pub fn is_synced(&self) -> bool {
        self.synced.iter().all(Synced::is_synced)
    }

    /// Resolves once every watch has listed once (never, if a watch task is gone before).
    pub async fn synced(&self) {
        for watch in &self.synced {
            if !watch.wait().await {
                std::future::pending::<()>().await;
            }
        }
    }

    /// The VPAs in `scope`.
    pub fn vpas(&self, scope: &Scope) -> Vec<Arc<VerticalPodAutoscaler>> {
        self.vpas
            .state_filter(|v| scope.admits(v.metadata.namespace.as_deref().unwrap_or_default()))
    }

    /// The LimitRanges, in every namespace in scope.
    pub fn limit_ranges(&self) -> Vec<Arc<LimitRange>> {
        self.limit_ranges.state()
    }

    fn owners_of_kind(&self, kind: &str) -> Option<&ByController<OwnerInfo>> {
        self.owners
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, index)| index)
    }

    /// Desired replicas of `owner` in `namespace`, when known.
    pub fn replicas(&self, namespace: &str, owner: &Owner) -> Option<u32> {
        self.owners_of_kind(&owner.kind)?
            .get(namespace, &owner.name)?
            .replicas
    }

    /// The controller of the owner `namespace/owner`, when it is a followed kind and has one.
    pub fn controller_of_owner(&self, namespace: &str, owner: &Owner) -> Option<Owner> {
        self.owners_of_kind(&owner.kind)?
            .controller(namespace, &owner.name)
    }

    /// The followed owners in `namespace` whose controller is `owner` (a Deployment's
    /// ReplicaSets, a CronJob's Jobs, a Rollout's ReplicaSets).
    pub fn owned_by(&self, namespace: &str, owner: &Owner) -> Vec<Owner> {
        self.owners
            .iter()
            .flat_map(|(kind, index)| {
                index
                    .controlled_by(namespace, owner)
                    .into_iter()
                    .map(|o| Owner {
                        kind: (*kind).to_owned(),
                        name: o.name.clone(),
                    })
            })
            .collect()
    }

    /// The live pods in `namespace` whose controller is `owner`, by name.
    pub fn pods_of(&self, namespace: &str, owner: &Owner) -> Vec<Arc<CachedPod>> {
        self.pods.controlled_by(namespace, owner)
    }

    /// The uid of the live pod `namespace/name`, when the cache has it.
    pub fn pod_uid(&self, namespace: &str, name: &str) -> Option<String> {
        self.pods.get(namespace, name).map(|p| p.uid().to_owned())
    }

    /// How many live pods with a controller the cache holds.
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }
}

/// The followed ReplicaSets and Jobs, for the owner walk ([`controlling::top_controller`]).
impl Owners for Cache {
    fn controller_of(&self, namespace: &str, owner: &OwnerKey) -> Option<Option<OwnerKey>> {
        if !controlling::follows(owner) {
            return None;
        }
        let info = self
            .owners_of_kind(&owner.kind)?
            .get(namespace, &owner.name)?;
        Some(info.controller.clone())
    }
}

/// Cuts a pod down to what the updater reads, as it leaves the watch: what the decisions read
/// ([`keep_read_fields`]) and the annotations its snapshot reads ([`snapshot_annotation`]).
pub fn pod_fields(pod: &mut Pod) {
    keep_read_fields(pod, snapshot_annotation);
}

/// The cached form of `pod` (as [`pod_fields`] keeps it); `None` for a pod that is not kept
/// (being deleted, without a controller, in an ignored namespace).
fn cached_pod(mut pod: Pod, admits: &impl Fn(&ObjectMeta) -> bool) -> Option<CachedPod> {
    if pod.metadata.deletion_timestamp.is_some()
        || !admits(&pod.metadata)
        || controller_of(&pod.metadata).is_none()
    {
        return None;
    }
    let snapshot = PodSnapshot::from_pod(&pod).map_err(|e| e.to_string());
    // Once snapshotted, the writes read only whether the pod has annotations (a patch adds the
    // map to a pod without one); the values, which a tenant may make 256 KiB, can go.
    if let Some(annotations) = pod.metadata.annotations.as_mut() {
        annotations.clear();
    }
    Some(CachedPod { pod, snapshot })
}

/// A pod event as the pod watch passes it on: trimmed, and left out past the budget.
#[cfg(test)]
fn as_watched(event: Event<Pod>) -> Event<Pod> {
    event.modify(|pod| {
        pod_fields(pod);
        leave_out_over_budget(pod);
    })
}

#[cfg(test)]
impl Cache {
    /// An empty cache filled by hand, with the writer of its VPA store.
    pub(crate) fn for_tests() -> (Cache, reflector::store::Writer<VerticalPodAutoscaler>) {
        let (vpas, vpa_writer) = reflector::store();
        let (limit_ranges, _) = reflector::store();
        let cache = Cache {
            vpas,
            limit_ranges,
            owners: OWNER_KINDS.map(|kind| (kind, ByController::default())),
            pods: ByController::default(),
            synced: Vec::new(),
        };
        (cache, vpa_writer)
    }

    /// Applies a pod event, cut down as the watch cuts it.
    pub(crate) fn apply_pod(&self, event: Event<Pod>) {
        self.pods
            .apply(as_watched(event), |p| cached_pod(p, &|_: &ObjectMeta| true));
    }

    /// Applies a ReplicaSet event.
    pub(crate) fn apply_replica_set(&self, event: Event<ReplicaSet>) {
        self.owners[0].1.apply(event, |o: ReplicaSet| {
            Some(OwnerInfo {
                name: o.metadata.name.clone().unwrap_or_default(),
                replicas: replicas(o.spec.as_ref().and_then(|s| s.replicas)),
                controller: controlling::controller_of(&o.metadata),
            })
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use serde_json::json;

    fn pod(name: &str, owner: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                    "uid": "rs", "controller": true}]},
            "spec": {"containers": [{"name": "app"}]}
        }))
        .unwrap()
    }

    fn rs(name: &str) -> Owner {
        Owner {
            kind: "ReplicaSet".into(),
            name: name.into(),
        }
    }

    fn index() -> (
        ByController<CachedPod>,
        impl Fn(&ByController<CachedPod>, Event<Pod>),
    ) {
        let apply = |i: &ByController<CachedPod>, e: Event<Pod>| {
            i.apply(as_watched(e), |p| cached_pod(p, &|_: &ObjectMeta| true));
        };
        (ByController::default(), apply)
    }

    fn names(pods: &[Arc<CachedPod>]) -> Vec<&str> {
        pods.iter().map(|p| p.name()).collect()
    }

    #[test]
    fn pods_are_found_by_their_controller_and_leave_when_deleted() {
        let (i, apply) = index();
        apply(&i, Event::Apply(pod("b", "web-1")));
        apply(&i, Event::Apply(pod("a", "web-1")));
        apply(&i, Event::Apply(pod("c", "db-1")));
        assert_eq!(names(&i.controlled_by("ns", &rs("web-1"))), ["a", "b"]);
        assert!(i.controlled_by("other", &rs("web-1")).is_empty());
        // A pod being deleted is dropped at once, before its Delete event.
        let mut deleting = pod("a", "web-1");
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        apply(&i, Event::Apply(deleting));
        assert_eq!(names(&i.controlled_by("ns", &rs("web-1"))), ["b"]);
        apply(&i, Event::Delete(pod("b", "web-1")));
        assert!(i.controlled_by("ns", &rs("web-1")).is_empty());
        assert_eq!(i.len(), 1);
        let c = i.get("ns", "c").unwrap();
        assert!(c.snapshot.is_ok());
        assert_eq!(c.pod.metadata.managed_fields, None);
    }

    #[test]
    fn a_pod_past_the_budget_is_not_cached_and_leaves_when_it_grows_past_it() {
        let fat = |name: &str| {
            let mut p = pod(name, "web-1");
            let labels = p.metadata.labels.get_or_insert_default();
            for i in 0..1_000 {
                labels.insert(format!("example.com/label-{i}"), "v".repeat(60));
            }
            p
        };
        let (i, apply) = index();
        apply(&i, Event::Apply(pod("a", "web-1")));
        apply(&i, Event::Apply(fat("b")));
        assert_eq!(names(&i.controlled_by("ns", &rs("web-1"))), ["a"]);
        apply(&i, Event::Apply(fat("a")));
        assert!(i.controlled_by("ns", &rs("web-1")).is_empty());
        assert_eq!(i.len(), 0);
        apply(&i, Event::Apply(pod("b", "web-1")));
        assert_eq!(names(&i.controlled_by("ns", &rs("web-1"))), ["b"]);
    }

    #[test]
    fn a_relist_leaves_no_stale_pod() {
        let (i, apply) = index();
        apply(&i, Event::Apply(pod("gone", "web-1")));
        apply(&i, Event::Init);
        apply(&i, Event::InitApply(pod("kept", "web-1")));
        // Until the list completes, lookups see the old state.
        assert_eq!(names(&i.controlled_by("ns", &rs("web-1"))), ["gone"]);
        apply(&i, Event::InitDone);
        assert_eq!(names(&i.controlled_by("ns", &rs("web-1"))), ["kept"]);
        assert!(i.get("ns", "gone").is_none());
        assert_eq!(i.len(), 1);
    }

    /// A pod whose tenant fattened it: 1 MiB of annotation and of environment, `managedFields`,
    /// volumes; with the webhook's annotations and a startup boost the updater reads.
    fn fat_pod() -> Pod {
        let mut pod = pod("fat", "web-1");
        let mut extra: Pod = serde_json::from_value(json!({
            "metadata": {"annotations": {
                "blob": "x".repeat(1 << 20),
                "vpaObservedContainers": "app",
                "vpaCpuStartupBoost/app": "{\"requests\":{\"cpu\":\"10m\"}}",
            }},
            "spec": {"containers": [{"name": "app",
                "env": [{"name": "E", "value": "y".repeat(1 << 20)}],
                "resources": {"requests": {"cpu": "10m", "memory": "10Mi"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        }))
        .unwrap();
        extra.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default(); 1_000]);
        if let Some(spec) = extra.spec.as_mut() {
            spec.volumes = Some(vec![k8s_openapi::api::core::v1::Volume::default(); 1_000]);
        }
        pod.metadata.annotations = extra.metadata.annotations;
        pod.metadata.managed_fields = extra.metadata.managed_fields;
        pod.spec = extra.spec;
        pod.status = extra.status;
        pod
    }

    #[test]
    fn a_fat_pod_is_kept_small_and_read_and_written_the_same() {
        use plimsoll_core::vertical::admission::{AdmissionVpa, admission_pod};
        use plimsoll_core::vertical::policy::UpdateMode;
        use plimsoll_core::vertical::resources::{ContainerRecommendation, Resources};
        use plimsoll_core::vertical::startup_boost::StartupBoosts;

        let fat = fat_pod();
        let (i, apply) = index();
        apply(&i, Event::Apply(fat.clone()));
        let cached = i.get("ns", "fat").unwrap();
        let size = |p: &Pod| serde_json::to_vec(p).unwrap().len();
        assert!(size(&fat) > 2 << 20, "{}", size(&fat));
        assert!(size(&cached.pod) < 1024, "{}", size(&cached.pod));
        // The decision reads the snapshot; the boost and the observed containers are in it.
        let snapshot = cached.snapshot.as_ref().unwrap();
        assert_eq!(snapshot, &PodSnapshot::from_pod(&fat).unwrap());
        assert!(snapshot.boosted.contains_key("app"));
        assert!(snapshot.observed_containers.is_some());
        // The writes: Events' references, the resize patch and the annotation map's presence.
        assert_eq!(cached.pod.object_ref(&()), fat.object_ref(&()));
        assert_eq!(cached.pod.metadata.annotations, Some(BTreeMap::new()));
        assert_eq!(admission_pod(&cached.pod), admission_pod(&fat));
        let vpa = AdmissionVpa {
            name: "web".into(),
            update_mode: UpdateMode::InPlaceOrRecreate,
            policies: Vec::new(),
            recommendation: Some(vec![ContainerRecommendation {
                container: "app".into(),
                target: Resources::new(500, 512 << 20),
                lower_bound: Resources::new(400, 256 << 20),
                upper_bound: Resources::new(1000, 1 << 30),
            }]),
            boosts: StartupBoosts::default(),
        };
        let resize = |p: &Pod| crate::updater::strategic_resize_patch(p, &vpa, None, None);
        assert!(resize(&fat).is_some());
        assert_eq!(resize(&cached.pod), resize(&fat));
    }

    #[test]
    fn a_pod_without_a_controller_is_not_kept() {
        let (i, apply) = index();
        let mut orphan = pod("orphan", "web-1");
        orphan.metadata.owner_references = None;
        apply(&i, Event::Apply(orphan));
        assert!(i.is_empty());
    }
}
