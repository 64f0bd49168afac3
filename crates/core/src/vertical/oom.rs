//! Which OOM kills the recommender records, and with how much memory (upstream
//! `pkg/recommender/input/oom`).
//!
//! Two sources report a kill:
//! * the pod status: a container whose `lastState` (restarted) or `state` (not yet restarted) is
//!   `terminated` with reason `OOMKilled`; the memory used is the container's request — the
//!   allocated one from `status.containerStatuses[].resources` when present (in-place resizes),
//!   else the spec's, else 0 — as upstream's observer reads it;
//! * a memory-pressure eviction Event (`reason: Evicted` on a Pod): the kubelet names the
//!   offending containers, their usage and the starved resources in annotations.
//!
//! Both are pure readings of Kubernetes objects; which kills were already recorded is the
//! loop's memory ([`super::recommender`]).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::quantity::{self, Quantity};

/// One container's memory kill read from an eviction Event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvictionOom {
    /// Namespace of the pod.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// The container.
    pub container: String,
    /// Its memory usage when evicted, bytes.
    pub usage_bytes: i64,
    /// When.
    pub time: Timestamp,
}

/// The memory kills an `Evicted` Event reports (upstream `parseEvictionEvent`): the kubelet
/// names the `offending_containers`, their `offending_containers_usage` and the
/// `starved_resource`s in annotations (comma-separated, in the same order). Other events,
/// malformed annotations and non-memory starvation give nothing.
pub fn eviction_ooms(event: &Event) -> Vec<EvictionOom> {
    if event.reason.as_deref() != Some("Evicted")
        || event.involved_object.kind.as_deref() != Some("Pod")
    {
        return Vec::new();
    }
    // An Event speaks only of pods in its own namespace. The API server refuses one whose
    // `involvedObject.namespace` differs from it; checked here too, so that no writer of Events
    // in one namespace (a tenant may have that right) can size another namespace's pods.
    let namespace = match (
        event.metadata.namespace.as_deref(),
        event
            .involved_object
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty()),
    ) {
        (Some(own), Some(named)) if own != named => return Vec::new(),
        (Some(own), _) => own,
        (None, named) => named.unwrap_or_default(),
    };
    let Some(annotations) = event.metadata.annotations.as_ref() else {
        return Vec::new();
    };
    let list = |key: &str| -> Vec<&str> {
        debug_assert!(EVICTION_ANNOTATIONS.contains(&key));
        annotations
            .get(key)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    };
    let containers = list("offending_containers");
    let usages = list("offending_containers_usage");
    let starved = list("starved_resource");
    if containers.len() != usages.len() || starved.len() != containers.len() {
        return Vec::new();
    }
    let time = event
        .metadata
        .creation_timestamp
        .as_ref()
        .or(event.last_timestamp.as_ref())
        .map(|t| t.0)
        .or_else(|| event.event_time.as_ref().map(|t| t.0));
    let Some(time) = time else {
        return Vec::new();
    };
    containers
        .iter()
        .zip(usages)
        .zip(starved)
        .filter(|(_, resource)| *resource == "memory")
        .filter_map(|((container, usage), _)| {
            let bytes = Quantity::parse(usage).ok()?.value();
            Some(EvictionOom {
                namespace: namespace.to_owned(),
                pod: event.involved_object.name.clone()?,
                container: (*container).to_owned(),
                usage_bytes: clamp_amount(bytes),
                time,
            })
        })
        .collect()
}

/// The annotations of an eviction Event that [`eviction_ooms`] reads.
const EVICTION_ANNOTATIONS: [&str; 3] = [
    "offending_containers",
    "offending_containers_usage",
    "starved_resource",
];

/// Cuts an Event down to what [`eviction_ooms`] and the recommender's memory of seen Events
/// read: its identity, creation time, the kubelet's three annotations, the involved object's
/// kind, namespace and name, the reason and the times. Whoever may write Events in a namespace
/// can fill one with a message and annotations up to 1.5 MiB, and the recommender caches
/// every `Evicted` Event of the cluster for the Events' hour of life.
pub fn event_fields(event: &mut Event) {
    let meta = &mut event.metadata;
    let metadata = ObjectMeta {
        creation_timestamp: meta.creation_timestamp.take(),
        annotations: crate::cut_down::annotations(meta, |key| EVICTION_ANNOTATIONS.contains(&key)),
        ..crate::cut_down::identity(meta)
    };
    let involved = &mut event.involved_object;
    let involved_object = ObjectReference {
        kind: involved.kind.take(),
        namespace: involved.namespace.take(),
        name: involved.name.take(),
        ..ObjectReference::default()
    };
    *event = Event {
        metadata,
        involved_object,
        reason: event.reason.take(),
        last_timestamp: event.last_timestamp.take(),
        event_time: event.event_time.take(),
        ..Event::default()
    };
}

/// One container's OOM kill read from its pod's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusOom {
    /// The container.
    pub container: String,
    /// When the killed run finished (with the pod and container, the kill's identity).
    pub finished: Timestamp,
    /// The memory the kill counts with: the container's request, bytes (see [`memory_request`]).
    pub used_bytes: i64,
}

/// The OOM kills `pod`'s container statuses show, in status order. A restarted container shows
/// the kill in `lastState`; one that is not (yet) restarted in `state` (upstream's observer reads
/// the latter). A kill without a finish time is not reported.
pub fn status_ooms(pod: &Pod) -> Vec<StatusOom> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    statuses
        .iter()
        .filter_map(|cs| {
            let killed = [cs.last_state.as_ref(), cs.state.as_ref()]
                .into_iter()
                .flatten()
                .filter_map(|s| s.terminated.as_ref())
                .find(|t| t.reason.as_deref() == Some("OOMKilled"));
            let finished = killed.and_then(|t| t.finished_at.as_ref()).map(|t| t.0)?;
            Some(StatusOom {
                container: cs.name.clone(),
                finished,
                used_bytes: memory_request(pod, &cs.name),
            })
        })
        .collect()
}

/// The container's memory request: the allocated one from `status.containerStatuses[]`
/// when present (in-place resizes), else the spec's (upstream `TestOOMReceived`), else 0.
pub fn memory_request(pod: &Pod, container: &str) -> i64 {
    let allocated = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|list| list.iter().find(|c| c.name == container))
        .and_then(|c| c.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("memory"))
        .and_then(|q| quantity::memory_bytes(q).ok());
    if let Some(bytes) = allocated {
        return bytes;
    }
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.iter().find(|c| c.name == container))
        .and_then(|c| c.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("memory"))
        .and_then(|q| quantity::memory_bytes(q).ok())
        .unwrap_or(0)
}

/// An exact amount as the model's integer amount: negative values as 0, huge ones as `i64::MAX`.
pub fn clamp_amount(v: i128) -> i64 {
    v.clamp(0, i128::from(i64::MAX)) as i64
}
