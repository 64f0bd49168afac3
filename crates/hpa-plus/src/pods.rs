//! The one shared pod cache: every pod of the cluster from a single watch, indexed by namespace.
//!
//! A reconcile matches its target's selector against the pods of one namespace only, without a
//! request (upstream's HPA controller lists pods from its informer the same way). Pods are kept
//! in a compact form ([`PodInfo`]: labels, phase, readiness, start time, per-container requests
//! and limits in milli-units — spec and, during an in-place resize, status — init containers,
//! pod-level resources, overhead and the controller owner reference) so that memory follows
//! what the decision reads, not the full pod.
//!
//! Invariant: after a (re)list completes ([`PodIndex::apply`] with `InitDone`), the index holds
//! exactly the listed pods; events arriving during a relist go to a buffer that replaces the
//! index atomically, as kube's reflector does.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher::Event;
use plimsoll_core::horizontal::PodPhase;
use plimsoll_core::horizontal::pod_owner::ControllerRef;
use plimsoll_core::pod_fields::is_left_out;
use plimsoll_core::quantity::Quantity;
use plimsoll_runtime::selector::Selector;

/// One container's requests and limits (milli-units by resource name), from the spec and, during
/// an in-place resize, from its status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerInfo {
    /// Container name.
    pub name: String,
    /// Requests, milli-units.
    pub requests: BTreeMap<String, i64>,
    /// Limits, milli-units.
    pub limits: BTreeMap<String, i64>,
    /// An init container with `restartPolicy: Always` (a native sidecar).
    pub sidecar: bool,
    /// `status.containerStatuses[].allocatedResources`, milli-units.
    pub allocated: Option<BTreeMap<String, i64>>,
    /// `status.containerStatuses[].resources.requests`, milli-units.
    pub actual_requests: Option<BTreeMap<String, i64>>,
    /// `status.containerStatuses[].resources.limits`, milli-units.
    pub actual_limits: Option<BTreeMap<String, i64>>,
}

/// What the decision needs of a pod.
#[derive(Clone, Debug, PartialEq)]
pub struct PodInfo {
    /// Pod name.
    pub name: String,
    /// Labels, for selector matching.
    pub labels: BTreeMap<String, String>,
    /// `status.phase`.
    pub phase: PodPhase,
    /// Ready condition status; `None` without one.
    pub ready: Option<bool>,
    /// Ready condition's last transition.
    pub ready_transition_time: Option<Timestamp>,
    /// `deletionTimestamp` is set.
    pub deleting: bool,
    /// `status.startTime`.
    pub start_time: Option<Timestamp>,
    /// `metadata.creationTimestamp` (for the measured startup time of `predictive`).
    pub created: Option<Timestamp>,
    /// Regular containers.
    pub containers: Vec<ContainerInfo>,
    /// Init containers in spec order (which of them count is decided in `plimsoll-core`).
    pub init_containers: Vec<ContainerInfo>,
    /// Pod-level requests (`spec.resources.requests`), milli-units.
    pub pod_requests: BTreeMap<String, i64>,
    /// Pod-level limits (`spec.resources.limits`), milli-units.
    pub pod_limits: BTreeMap<String, i64>,
    /// `spec.overhead`, milli-units.
    pub overhead: BTreeMap<String, i64>,
    /// The controller owner reference (`controller: true`), for `podSelectionStrategy:
    /// OwnerReferences` (KEP-5325).
    pub controller: Option<ControllerRef>,
}

/// The controller owner reference of an object's `ownerReferences`, trimmed to what
/// [`plimsoll_core::horizontal::pod_owner`] compares.
pub fn controller_of(meta: &ObjectMeta) -> Option<ControllerRef> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| ControllerRef {
            kind: o.kind.clone(),
            name: o.name.clone(),
            uid: o.uid.clone(),
        })
}

type QuantityMap = BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>;

fn milli(map: Option<&QuantityMap>) -> BTreeMap<String, i64> {
    map.into_iter()
        .flatten()
        .filter_map(|(k, q)| {
            let q = Quantity::try_from(q).ok()?;
            Some((k.clone(), i64::try_from(q.milli()).ok()?))
        })
        .collect()
}

/// The compact form of one container, with its status (matched by name) when there is one.
fn container_info(c: &Container, statuses: &[&ContainerStatus]) -> ContainerInfo {
    let status = statuses.iter().find(|s| s.name == c.name);
    let actual = status.and_then(|s| s.resources.as_ref());
    ContainerInfo {
        name: c.name.clone(),
        requests: milli(c.resources.as_ref().and_then(|r| r.requests.as_ref())),
        limits: milli(c.resources.as_ref().and_then(|r| r.limits.as_ref())),
        sidecar: c.restart_policy.as_deref() == Some("Always"),
        allocated: status
            .and_then(|s| s.allocated_resources.as_ref())
            .map(|m| milli(Some(m))),
        actual_requests: actual
            .and_then(|r| r.requests.as_ref())
            .map(|m| milli(Some(m))),
        actual_limits: actual
            .and_then(|r| r.limits.as_ref())
            .map(|m| milli(Some(m))),
    }
}

impl PodInfo {
    /// The compact form of `pod`; `None` for a pod without a name.
    pub fn from_pod(pod: &Pod) -> Option<Self> {
        let name = pod.metadata.name.clone()?;
        let status = pod.status.as_ref();
        let phase = PodPhase::from_status(status.and_then(|s| s.phase.as_deref()));
        let ready_condition = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
        // A sidecar's status is among the init container statuses; look in both lists.
        let statuses: Vec<&ContainerStatus> = status
            .into_iter()
            .flat_map(|s| {
                s.container_statuses
                    .iter()
                    .flatten()
                    .chain(s.init_container_statuses.iter().flatten())
            })
            .collect();
        let spec = pod.spec.as_ref();
        let infos = |list: Option<&Vec<Container>>| -> Vec<ContainerInfo> {
            list.into_iter()
                .flatten()
                .map(|c| container_info(c, &statuses))
                .collect()
        };
        let pod_resources = spec.and_then(|s| s.resources.as_ref());
        let pod_map = |pick: fn(&ResourceRequirements) -> Option<&QuantityMap>| {
            milli(pod_resources.and_then(pick))
        };
        Some(Self {
            name,
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            phase,
            ready: ready_condition.map(|c| c.status == "True"),
            ready_transition_time: ready_condition
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| t.0),
            deleting: pod.metadata.deletion_timestamp.is_some(),
            start_time: status.and_then(|s| s.start_time.as_ref()).map(|t| t.0),
            created: pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
            containers: infos(spec.map(|s| &s.containers)),
            init_containers: infos(spec.and_then(|s| s.init_containers.as_ref())),
            pod_requests: pod_map(|r| r.requests.as_ref()),
            pod_limits: pod_map(|r| r.limits.as_ref()),
            overhead: milli(spec.and_then(|s| s.overhead.as_ref())),
            controller: controller_of(&pod.metadata),
        })
    }
}

type Namespaces = HashMap<String, HashMap<String, Arc<PodInfo>>>;

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// All pods, by namespace then name. Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct PodIndex {
    inner: Arc<RwLock<Namespaces>>,
    buffer: Arc<RwLock<Option<Namespaces>>>,
    synced: Arc<AtomicBool>,
}

fn namespace_of(pod: &Pod) -> String {
    pod.metadata.namespace.clone().unwrap_or_default()
}

impl PodIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// True once the first list has completed.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Applies one watch event. A pod the watch left out (over the budget of what is kept,
    /// [`plimsoll_core::pod_fields::is_left_out`]) is not held: it is as if deleted.
    pub fn apply(&self, event: &Event<Pod>) {
        match event {
            Event::Apply(pod) => match PodInfo::from_pod(pod).filter(|_| !is_left_out(pod)) {
                Some(info) => {
                    let mut inner = write(&self.inner);
                    inner
                        .entry(namespace_of(pod))
                        .or_default()
                        .insert(info.name.clone(), Arc::new(info));
                }
                None => self.remove(pod),
            },
            Event::Delete(pod) => self.remove(pod),
            Event::Init => *write(&self.buffer) = Some(Namespaces::new()),
            Event::InitApply(pod) => {
                if let Some(info) = PodInfo::from_pod(pod).filter(|_| !is_left_out(pod)) {
                    write(&self.buffer)
                        .get_or_insert_with(Namespaces::new)
                        .entry(namespace_of(pod))
                        .or_default()
                        .insert(info.name.clone(), Arc::new(info));
                }
            }
            Event::InitDone => {
                let fresh = write(&self.buffer).take().unwrap_or_default();
                *write(&self.inner) = fresh;
                self.synced.store(true, Ordering::Release);
            }
        }
    }

    fn remove(&self, pod: &Pod) {
        if let Some(name) = &pod.metadata.name {
            let mut inner = write(&self.inner);
            if let Some(ns) = inner.get_mut(&namespace_of(pod)) {
                ns.remove(name);
            }
        }
    }

    /// The pods of `namespace` that `selector` matches, sorted by name.
    pub fn select(&self, namespace: &str, selector: &Selector) -> Vec<Arc<PodInfo>> {
        let inner = self
            .inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut pods: Vec<Arc<PodInfo>> = inner
            .get(namespace)
            .map(|ns| {
                ns.values()
                    .filter(|p| selector.matches(&p.labels))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        pods.sort_by(|a, b| a.name.cmp(&b.name));
        pods
    }

    /// Number of pods held.
    pub fn len(&self) -> usize {
        let inner = self
            .inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.values().map(HashMap::len).sum()
    }

    /// True when no pod is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ns: &str, name: &str, app: &str, cpu: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": ns, "labels": {"app": app}},
            "spec": {"containers": [{"name": "c", "resources": {
                "requests": {"cpu": cpu, "memory": "1Mi"}, "limits": {"cpu": "1"}}}]},
            "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z",
                "conditions": [{"type": "Ready", "status": "True",
                                "lastTransitionTime": "2026-01-01T00:00:10Z"}]}
        }))
        .unwrap()
    }

    #[test]
    fn pods_are_indexed_by_namespace_and_selected_by_labels() {
        let index = PodIndex::new();
        index.apply(&Event::Init);
        index.apply(&Event::InitApply(pod("a", "web-1", "web", "200m")));
        index.apply(&Event::InitApply(pod("a", "db-1", "db", "100m")));
        index.apply(&Event::InitApply(pod("b", "web-2", "web", "100m")));
        assert!(!index.is_synced());
        index.apply(&Event::InitDone);
        assert!(index.is_synced());
        let web = Selector::parse("app=web").unwrap();
        let selected = index.select("a", &web);
        assert_eq!(selected.len(), 1);
        assert_eq!(selected[0].name, "web-1");
        assert_eq!(selected[0].containers[0].requests["cpu"], 200);
        assert_eq!(
            selected[0].containers[0].requests["memory"],
            1024 * 1024 * 1000
        );
        assert_eq!(selected[0].containers[0].limits["cpu"], 1000);
        assert_eq!(selected[0].ready, Some(true));
        index.apply(&Event::Delete(pod("a", "web-1", "web", "200m")));
        assert!(index.select("a", &web).is_empty());
        assert_eq!(index.len(), 2);
    }

    #[test]
    fn a_relist_replaces_the_index() {
        let index = PodIndex::new();
        index.apply(&Event::Init);
        index.apply(&Event::InitApply(pod("a", "old", "web", "1")));
        index.apply(&Event::InitDone);
        index.apply(&Event::Init);
        index.apply(&Event::InitApply(pod("a", "new", "web", "1")));
        // Until the relist is done, the old view stays.
        assert_eq!(index.select("a", &Selector::everything())[0].name, "old");
        index.apply(&Event::InitDone);
        let names: Vec<_> = index
            .select("a", &Selector::everything())
            .iter()
            .map(|p| p.name.clone())
            .collect();
        assert_eq!(names, ["new"]);
    }

    #[test]
    fn sidecars_pod_level_resources_and_resize_status_are_kept() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-1", "namespace": "a"},
            "spec": {
                "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "4"}},
                "overhead": {"cpu": "10m"},
                "initContainers": [
                    {"name": "migrate", "resources": {"requests": {"cpu": "1"}}},
                    {"name": "proxy", "restartPolicy": "Always",
                     "resources": {"requests": {"cpu": "100m"}}}
                ],
                "containers": [{"name": "app", "resources": {"requests": {"cpu": "800m"}}}]
            },
            "status": {
                "phase": "Running",
                "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0,
                    "image": "x", "imageID": "", "allocatedResources": {"cpu": "800m"},
                    "resources": {"requests": {"cpu": "400m"}, "limits": {"cpu": "1"}}}],
                "initContainerStatuses": [{"name": "proxy", "ready": true, "restartCount": 0,
                    "image": "x", "imageID": "", "allocatedResources": {"cpu": "100m"}}]
            }
        }))
        .unwrap();
        let info = PodInfo::from_pod(&pod).unwrap();
        let cpu = |v: i64| BTreeMap::from([("cpu".to_owned(), v)]);
        assert_eq!(info.pod_requests, cpu(2000));
        assert_eq!(info.pod_limits, cpu(4000));
        assert_eq!(info.overhead, cpu(10));
        let app = &info.containers[0];
        assert_eq!(app.requests, cpu(800));
        assert_eq!(app.allocated, Some(cpu(800)));
        assert_eq!(app.actual_requests, Some(cpu(400)));
        assert_eq!(app.actual_limits, Some(cpu(1000)));
        assert!(!app.sidecar);
        let names: Vec<_> = info
            .init_containers
            .iter()
            .map(|c| (c.name.as_str(), c.sidecar))
            .collect();
        assert_eq!(names, [("migrate", false), ("proxy", true)]);
        let proxy = &info.init_containers[1];
        assert_eq!(
            proxy.allocated,
            Some(cpu(100)),
            "a sidecar's status is an init status"
        );
        assert_eq!(proxy.actual_requests, None);
        assert_eq!(info.init_containers[0].allocated, None);
    }

    /// A pod with every field [`PodInfo`] reads, and a megabyte of what it does not.
    fn full_pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-1", "namespace": "a", "uid": "u", "resourceVersion": "9",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "deletionTimestamp": "2026-01-01T01:00:00Z",
                "labels": {"app": "web", "pod-template-hash": "5d8f"},
                "annotations": {"blob": "x".repeat(1 << 20)},
                "ownerReferences": [
                    {"apiVersion": "example.com/v1", "kind": "Hold", "name": "h", "uid": "h"},
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f",
                     "uid": "rs", "controller": true}]},
            "spec": {
                "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "4"}},
                "overhead": {"cpu": "10m"},
                "initContainers": [{"name": "proxy", "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "100m"}}}],
                "containers": [{"name": "app", "command": ["sh", "-c", "y".repeat(1 << 16)],
                    "resources": {"requests": {"cpu": "800m", "memory": "1Gi"},
                                  "limits": {"cpu": "1"}}}],
                "volumes": [{"name": "v", "emptyDir": {}}]
            },
            "status": {
                "phase": "Running", "startTime": "2026-01-01T00:00:05Z",
                "conditions": [{"type": "Ready", "status": "True",
                    "lastTransitionTime": "2026-01-01T00:00:40Z"}],
                "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0,
                    "image": "x", "imageID": "", "allocatedResources": {"cpu": "800m"},
                    "resources": {"requests": {"cpu": "400m"}}}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn the_watch_keeps_everything_the_index_reads() {
        let whole = full_pod();
        let mut kept = whole.clone();
        plimsoll_core::pod_fields::keep_read_fields(&mut kept, |_| false);
        assert_eq!(
            plimsoll_core::pod_fields::leave_out_over_budget(&mut kept),
            None
        );
        let info = PodInfo::from_pod(&kept).unwrap();
        assert_eq!(info, PodInfo::from_pod(&whole).unwrap());
        assert!(info.created.is_some() && info.deleting && info.controller.is_some());
        assert_eq!(info.overhead["cpu"], 10);
    }

    #[test]
    fn a_pod_left_out_is_not_held_and_one_that_grows_past_the_budget_goes() {
        let watched = |mut pod: Pod| {
            plimsoll_core::pod_fields::keep_read_fields(&mut pod, |_| false);
            plimsoll_core::pod_fields::leave_out_over_budget(&mut pod);
            pod
        };
        let fat = |name: &str| {
            let mut pod = pod("a", name, "web", "100m");
            let labels = pod.metadata.labels.get_or_insert_default();
            for i in 0..1_000 {
                labels.insert(format!("example.com/label-{i}"), "v".repeat(60));
            }
            watched(pod)
        };
        let web = Selector::parse("app=web").unwrap();
        let index = PodIndex::new();
        index.apply(&Event::Init);
        index.apply(&Event::InitApply(watched(pod("a", "web-1", "web", "100m"))));
        index.apply(&Event::InitApply(fat("web-2")));
        index.apply(&Event::InitDone);
        let names = |index: &PodIndex| -> Vec<String> {
            index
                .select("a", &Selector::everything())
                .iter()
                .map(|p| p.name.clone())
                .collect()
        };
        assert_eq!(names(&index), ["web-1"]);
        assert_eq!(index.select("a", &web).len(), 1);
        // web-1 gains a megabyte of labels: it leaves.
        index.apply(&Event::Apply(fat("web-1")));
        assert!(names(&index).is_empty());
        // And comes back when they go.
        index.apply(&Event::Apply(watched(pod("a", "web-1", "web", "100m"))));
        assert_eq!(names(&index), ["web-1"]);
    }
}
