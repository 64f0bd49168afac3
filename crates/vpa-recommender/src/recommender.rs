//! The recommender's state across loops and one loop's decisions, without I/O.
//!
//! [`Recommender::run_loop`] takes what the controller read from the cluster in this loop (the
//! VPAs it answers to with their resolved pod selectors, the pods, the usage from
//! `metrics.k8s.io`) and returns what to write: the VPA statuses that changed. It calls the same
//! `plimsoll-core` functions as `vpa-recommender replay` ([`VpaModel`], `recommend`,
//! `conditions`). Checkpoint and garbage-collection decisions are here too; the controller only
//! moves the objects.
//!
//! Invariants: one [`VpaModel`] per VPA (keyed `namespace/name`), aggregates keyed by container
//! name inside it as upstream keys them (VPA, container name); a pod belongs to at most one VPA
//! (the first by name whose selector matches, as upstream picks one controlling VPA); an OOM
//! kill (pod, container, finish time) is recorded once.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, Pod};
use plimsoll_core::api::vpa::{
    VerticalPodAutoscaler, VerticalPodAutoscalerCheckpoint, VerticalPodAutoscalerCheckpointSpec,
    VerticalPodAutoscalerCheckpointStatus, VerticalPodAutoscalerStatus,
};
use plimsoll_core::quantity::{self, Quantity};
use plimsoll_core::vertical::aggregate::AggregationsConfig;
use plimsoll_core::vertical::estimator::EstimatorConfig;
use plimsoll_core::vertical::model::VpaModel;
use plimsoll_core::vertical::recommendation::{self, Observation};
pub use plimsoll_runtime::metrics_api::{ContainerMetrics, PodMetrics};
pub use plimsoll_runtime::selector::Selector;

/// `namespace/name` of a VPA.
pub type VpaKey = (String, String);

/// A VPA this recommender answers to, with its target resolved (or why it could not be).
#[derive(Clone, Debug)]
pub struct VpaInput {
    /// The object as last seen.
    pub vpa: Arc<VerticalPodAutoscaler>,
    /// The pod selector of `spec.targetRef`, or why the target cannot be served.
    pub selector: Result<Selector, String>,
}

impl VpaInput {
    fn key(&self) -> VpaKey {
        key_of(&self.vpa)
    }
}

/// The key of `vpa`.
pub fn key_of(vpa: &VerticalPodAutoscaler) -> VpaKey {
    (
        vpa.metadata.namespace.clone().unwrap_or_default(),
        vpa.metadata.name.clone().unwrap_or_default(),
    )
}

/// A status to write.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusUpdate {
    /// Which VPA.
    pub key: VpaKey,
    /// The new `status` (recommendation and conditions).
    pub status: VerticalPodAutoscalerStatus,
    /// Set when the VPA cannot be served (for a Warning Event on the transition).
    pub unsupported: Option<String>,
}

/// What one loop decided.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoopOutcome {
    /// Statuses that differ from the VPAs' current ones.
    pub updates: Vec<StatusUpdate>,
    /// VPAs served in this loop.
    pub vpas: usize,
    /// Aggregates (VPA × container) after the loop.
    pub containers: usize,
    /// Usage samples accepted.
    pub samples: usize,
    /// OOM kills recorded.
    pub ooms: usize,
}

/// A checkpoint to write, oldest first (see [`Recommender::checkpoints_due`]).
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointWrite {
    /// The object to apply.
    pub checkpoint: VerticalPodAutoscalerCheckpoint,
    /// When this (VPA, container) was last written by this process, if ever.
    pub last_written: Option<Timestamp>,
}

#[derive(Clone, Debug, Default)]
struct VpaState {
    model: VpaModel,
    pods: BTreeSet<String>,
    checkpoint_written: BTreeMap<String, Timestamp>,
}

/// The recommender's memory: one model per VPA, plus the OOM kills already recorded.
#[derive(Debug, Default)]
pub struct Recommender {
    aggregations: AggregationsConfig,
    estimator: EstimatorConfig,
    vpas: HashMap<VpaKey, VpaState>,
    seen_ooms: HashSet<(String, String, String, Timestamp)>,
    seen_events: HashSet<String>,
}

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
    let Some(annotations) = event.metadata.annotations.as_ref() else {
        return Vec::new();
    };
    let list = |key: &str| -> Vec<&str> {
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
                namespace: event.involved_object.namespace.clone().unwrap_or_default(),
                pod: event.involved_object.name.clone()?,
                container: (*container).to_owned(),
                usage_bytes: clamp(bytes),
                time,
            })
        })
        .collect()
}

/// The container's memory request: the allocated one from `status.containerStatuses[]`
/// when present (in-place resizes), else the spec's (upstream `TestOOMReceived`), else 0.
fn memory_request(pod: &Pod, container: &str) -> i64 {
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

fn clamp(v: i128) -> i64 {
    v.clamp(0, i128::from(i64::MAX)) as i64
}

impl Recommender {
    /// An empty recommender with the model settings.
    pub fn new(aggregations: AggregationsConfig, estimator: EstimatorConfig) -> Self {
        Self {
            aggregations,
            estimator,
            ..Self::default()
        }
    }

    /// Aggregates held (VPA × container).
    pub fn containers(&self) -> usize {
        self.vpas.values().map(|v| v.model.aggregates.len()).sum()
    }

    /// The model of a VPA, if it has one.
    pub fn model(&self, key: &VpaKey) -> Option<&VpaModel> {
        self.vpas.get(key).map(|v| &v.model)
    }

    /// Restores aggregates from checkpoints of the VPAs in `vpas` (others are ignored: they are
    /// another recommender's, or garbage). Returns how many were restored and the errors of the
    /// ones that could not be (a bad checkpoint is skipped, never fatal).
    pub fn restore(
        &mut self,
        checkpoints: &[Arc<VerticalPodAutoscalerCheckpoint>],
        vpas: &HashSet<VpaKey>,
        now: Timestamp,
    ) -> (usize, Vec<String>) {
        let mut restored = 0;
        let mut errors = Vec::new();
        for cp in checkpoints {
            let namespace = cp.metadata.namespace.clone().unwrap_or_default();
            let (Some(vpa), Some(container), Some(status)) = (
                cp.spec.vpa_object_name.clone(),
                cp.spec.container_name.as_deref(),
                cp.status.as_ref(),
            ) else {
                continue;
            };
            let key = (namespace, vpa);
            if !vpas.contains(&key) {
                continue;
            }
            let state = self.vpas.entry(key.clone()).or_default();
            match state
                .model
                .restore(container, status, &self.aggregations, now)
            {
                Ok(()) => {
                    restored += 1;
                    // Restored state is already persisted: it is the newest on the server.
                    let written = status.last_update_time.as_ref().map_or(now, |t| t.0);
                    state
                        .checkpoint_written
                        .insert(container.to_owned(), written);
                }
                Err(e) => errors.push(format!(
                    "checkpoint {}/{}: {e}",
                    key.0,
                    cp.metadata.name.as_deref().unwrap_or_default()
                )),
            }
        }
        (restored, errors)
    }

    /// (namespace, pod) → the VPA it belongs to.
    pub fn pod_owners(
        &self,
        vpas: &[VpaInput],
        pods: &[Arc<Pod>],
    ) -> HashMap<(String, String), VpaKey> {
        owners(vpas, pods)
            .into_iter()
            .map(|(key, pod)| {
                (
                    (
                        pod.metadata.namespace.clone().unwrap_or_default(),
                        pod.metadata.name.clone().unwrap_or_default(),
                    ),
                    key,
                )
            })
            .collect()
    }

    /// Adds usage history (e.g. from Prometheus) for `pod`/`container` of VPA `key`.
    pub fn add_history(
        &mut self,
        key: &VpaKey,
        pod: &str,
        container: &str,
        cpu_milli: Option<i64>,
        memory_bytes: Option<i64>,
        time: Timestamp,
    ) {
        let state = self.vpas.entry(key.clone()).or_default();
        if let Some(cpu) = cpu_milli {
            state
                .model
                .add_cpu_sample(pod, container, cpu, time, &self.aggregations);
        }
        if let Some(mem) = memory_bytes {
            state
                .model
                .add_memory_sample(pod, container, mem, time, &self.aggregations);
        }
    }

    /// One loop: fold `usage` and the OOM kills in `pods` into the models of `vpas`, and return
    /// the statuses that changed. VPAs absent from `vpas` are forgotten.
    #[allow(clippy::too_many_lines)] // one pass, in the order upstream's loop runs
    pub fn run_loop(
        &mut self,
        vpas: &[VpaInput],
        pods: &[Arc<Pod>],
        usage: &[PodMetrics],
        events: &[Arc<Event>],
        now: Timestamp,
    ) -> LoopOutcome {
        let mut outcome = LoopOutcome::default();
        let live: HashSet<VpaKey> = vpas.iter().map(VpaInput::key).collect();
        self.vpas.retain(|k, _| live.contains(k));

        let mut pod_owner: HashMap<(&str, &str), (VpaKey, &Pod)> = HashMap::new();
        let mut vpa_pods: HashMap<VpaKey, Vec<&Pod>> = HashMap::new();
        for (key, pod) in owners(vpas, pods) {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            pod_owner.insert((namespace, name), (key.clone(), pod));
            vpa_pods.entry(key).or_default().push(pod);
        }

        // Usage samples.
        for pm in usage {
            let Some((key, _)) = pod_owner.get(&(pm.namespace.as_str(), pm.name.as_str())) else {
                continue;
            };
            let state = self.vpas.entry(key.clone()).or_default();
            for c in &pm.containers {
                if let Some(cpu) = c.cpu()
                    && state.model.add_cpu_sample(
                        &pm.name,
                        &c.name,
                        clamp(cpu.milli()),
                        pm.timestamp,
                        &self.aggregations,
                    )
                {
                    outcome.samples += 1;
                }
                if let Some(mem) = c.memory() {
                    state.model.add_memory_sample(
                        &pm.name,
                        &c.name,
                        clamp(mem.value()),
                        pm.timestamp,
                        &self.aggregations,
                    );
                }
            }
        }

        // OOM kills from pod status.
        for ((namespace, name), (key, pod)) in &pod_owner {
            let statuses = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_deref())
                .unwrap_or_default();
            for cs in statuses {
                // A restarted container shows the kill in lastState; one that is not (yet)
                // restarted in state (upstream's observer reads the latter).
                let killed = [cs.last_state.as_ref(), cs.state.as_ref()]
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s.terminated.as_ref())
                    .find(|t| t.reason.as_deref() == Some("OOMKilled"));
                let Some(finished) = killed.and_then(|t| t.finished_at.as_ref()).map(|t| t.0)
                else {
                    continue;
                };
                let id = (
                    (*namespace).to_owned(),
                    (*name).to_owned(),
                    cs.name.clone(),
                    finished,
                );
                if self.seen_ooms.contains(&id) {
                    continue;
                }
                let state = self.vpas.entry(key.clone()).or_default();
                let used = memory_request(pod, &cs.name);
                // A kill older than the memory window is refused by the model, as upstream.
                if state
                    .model
                    .record_oom(name, &cs.name, used, finished, &self.aggregations)
                    .is_ok()
                {
                    outcome.ooms += 1;
                }
                self.seen_ooms.insert(id);
            }
        }
        // OOM kills from memory-pressure eviction Events, each Event once.
        for event in events {
            let uid = event.metadata.uid.clone().unwrap_or_default();
            if uid.is_empty() || self.seen_events.contains(&uid) {
                continue;
            }
            for oom in eviction_ooms(event) {
                let Some((key, _)) = pod_owner.get(&(oom.namespace.as_str(), oom.pod.as_str()))
                else {
                    continue;
                };
                let state = self.vpas.entry(key.clone()).or_default();
                if state
                    .model
                    .record_oom(
                        &oom.pod,
                        &oom.container,
                        oom.usage_bytes,
                        oom.time,
                        &self.aggregations,
                    )
                    .is_ok()
                {
                    outcome.ooms += 1;
                }
            }
            self.seen_events.insert(uid);
        }
        let live_events: HashSet<&str> = events
            .iter()
            .filter_map(|e| e.metadata.uid.as_deref())
            .collect();
        self.seen_events
            .retain(|uid| live_events.contains(uid.as_str()));
        let present: HashSet<(&str, &str)> = pod_owner.keys().copied().collect();
        self.seen_ooms
            .retain(|(ns, pod, _, _)| present.contains(&(ns.as_str(), pod.as_str())));

        // Recommendations and conditions.
        for input in vpas {
            outcome.vpas += 1;
            let key = input.key();
            let state = self.vpas.entry(key.clone()).or_default();
            let pods = vpa_pods.get(&key).map(Vec::as_slice).unwrap_or_default();
            let names: BTreeSet<String> = pods
                .iter()
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            for gone in state.pods.difference(&names) {
                state.model.remove_pod(gone);
            }
            state.pods = names;
            let mut containers_per_pod = 1;
            for pod in pods {
                let containers = pod
                    .spec
                    .as_ref()
                    .map(|s| s.containers.as_slice())
                    .unwrap_or_default();
                containers_per_pod = containers_per_pod.max(containers.len());
                for c in containers {
                    state
                        .model
                        .ensure_container(&c.name, &self.aggregations, now);
                }
            }
            // An unresolvable target only sets the condition: the history already aggregated
            // still gives a recommendation (as upstream), so a transient API error or a target
            // being recreated does not wipe it. An invalid spec gives none.
            let mut unsupported = input.selector.as_ref().err().cloned();
            let recs = match input.vpa.spec.validate() {
                Err(errs) => {
                    unsupported = Some(errs.to_string());
                    Vec::new()
                }
                Ok(()) => match state.model.recommend(
                    &input.vpa.spec,
                    containers_per_pod,
                    &self.estimator,
                ) {
                    Ok(r) => r,
                    Err(e) => {
                        unsupported = Some(e.to_string());
                        Vec::new()
                    }
                },
            };
            let observed = Observation {
                pods_matched: !pods.is_empty(),
                has_recommendation: !recs.is_empty(),
                low_confidence: recs.iter().any(|r| r.confidence < 1.0),
                config_unsupported: unsupported.clone(),
            };
            let previous = input.vpa.status.as_ref();
            let previous_conditions = previous
                .and_then(|s| s.conditions.as_deref())
                .unwrap_or_default();
            let status = VerticalPodAutoscalerStatus {
                recommendation: (!recs.is_empty()).then(|| recommendation::to_status(&recs)),
                conditions: Some(recommendation::conditions(
                    previous_conditions,
                    &observed,
                    now,
                )),
                observed_generation: previous.and_then(|s| s.observed_generation),
            };
            if !same_status(previous, &status) {
                outcome.updates.push(StatusUpdate {
                    key,
                    status,
                    unsupported,
                });
            }
        }
        outcome.containers = self.containers();
        outcome
    }

    /// Every (VPA, container) checkpoint, those written longest ago (or never) first, so that
    /// a loop that runs out of `--checkpoints-timeout` leaves the freshest ones for later.
    pub fn checkpoints_due(&self, now: Timestamp) -> Vec<CheckpointWrite> {
        let mut out = Vec::new();
        for ((namespace, vpa), state) in &self.vpas {
            for (container, status) in state.model.checkpoints(now) {
                out.push(CheckpointWrite {
                    checkpoint: checkpoint_object(namespace, vpa, &container, status),
                    last_written: state.checkpoint_written.get(&container).copied(),
                });
            }
        }
        out.sort_by(|a, b| {
            a.last_written
                .cmp(&b.last_written)
                .then_with(|| a.checkpoint.metadata.name.cmp(&b.checkpoint.metadata.name))
        });
        out
    }

    /// Notes that the checkpoint of `container` of `key` was written at `now`.
    pub fn checkpoint_written(&mut self, key: &VpaKey, container: &str, now: Timestamp) {
        if let Some(state) = self.vpas.get_mut(key) {
            state.checkpoint_written.insert(container.to_owned(), now);
        }
    }

    /// Drops aggregates without a sample for the whole memory window; returns how many.
    pub fn garbage_collect(&mut self, now: Timestamp) -> usize {
        let mut dropped = 0;
        for state in self.vpas.values_mut() {
            for name in state.model.garbage_collect(&self.aggregations, now) {
                state.checkpoint_written.remove(&name);
                dropped += 1;
            }
        }
        dropped
    }

    /// Checkpoints to delete: those of VPAs that no longer exist (`all_vpas` holds every VPA,
    /// whoever serves it), and of containers this recommender no longer has an aggregate for in
    /// a VPA it serves (the container is gone, or had no sample for the whole window).
    pub fn stale_checkpoints(
        &self,
        checkpoints: &[Arc<VerticalPodAutoscalerCheckpoint>],
        all_vpas: &HashSet<VpaKey>,
    ) -> Vec<(String, String)> {
        checkpoints
            .iter()
            .filter_map(|cp| {
                let namespace = cp.metadata.namespace.clone().unwrap_or_default();
                let name = cp.metadata.name.clone()?;
                let vpa = cp.spec.vpa_object_name.clone().unwrap_or_default();
                let key = (namespace.clone(), vpa);
                let stale = if all_vpas.contains(&key) {
                    match (self.vpas.get(&key), cp.spec.container_name.as_deref()) {
                        (Some(state), Some(container)) => {
                            !state.model.aggregates.contains_key(container)
                        }
                        _ => false,
                    }
                } else {
                    true
                };
                stale.then_some((namespace, name))
            })
            .collect()
    }
}

/// Each pod with the VPA it belongs to: per namespace, the first VPA by name whose (non-empty)
/// selector matches the pod's labels.
fn owners<'p>(vpas: &[VpaInput], pods: &'p [Arc<Pod>]) -> Vec<(VpaKey, &'p Pod)> {
    let mut by_namespace: HashMap<&str, Vec<&VpaInput>> = HashMap::new();
    for v in vpas {
        if v.selector.as_ref().is_ok_and(|s| !s.is_empty()) {
            by_namespace
                .entry(v.vpa.metadata.namespace.as_deref().unwrap_or_default())
                .or_default()
                .push(v);
        }
    }
    for list in by_namespace.values_mut() {
        list.sort_by(|a, b| a.vpa.metadata.name.cmp(&b.vpa.metadata.name));
    }
    let mut out = Vec::new();
    for pod in pods {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let Some(candidates) = by_namespace.get(namespace) else {
            continue;
        };
        let labels = pod.metadata.labels.as_ref();
        if let Some(owner) = candidates
            .iter()
            .find(|v| v.selector.as_ref().is_ok_and(|s| s.matches_opt(labels)))
        {
            out.push((owner.key(), pod.as_ref()));
        }
    }
    out
}

fn same_status(
    previous: Option<&VerticalPodAutoscalerStatus>,
    new: &VerticalPodAutoscalerStatus,
) -> bool {
    let Some(previous) = previous else {
        return false;
    };
    previous.conditions == new.conditions && same_recommendation(previous, new)
}

/// Recommendations compare by value: `1000m` and `1` are the same quantity, and another writer
/// (or the API server) may spell them differently.
fn same_recommendation(a: &VerticalPodAutoscalerStatus, b: &VerticalPodAutoscalerStatus) -> bool {
    let norm = |s: &VerticalPodAutoscalerStatus| -> Option<serde_json::Value> {
        let mut v = serde_json::to_value(s.recommendation.as_ref()?).ok()?;
        normalize_quantities(&mut v);
        Some(v)
    };
    norm(a) == norm(b)
}

fn normalize_quantities(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => map.values_mut().for_each(normalize_quantities),
        serde_json::Value::Array(list) => list.iter_mut().for_each(normalize_quantities),
        serde_json::Value::String(s) => {
            if let Ok(q) = Quantity::parse(s) {
                *s = q.milli().to_string();
            }
        }
        _ => {}
    }
}

/// The checkpoint object of `container` of VPA `namespace/vpa` (upstream's name and spec).
pub fn checkpoint_object(
    namespace: &str,
    vpa: &str,
    container: &str,
    status: VerticalPodAutoscalerCheckpointStatus,
) -> VerticalPodAutoscalerCheckpoint {
    let mut cp = VerticalPodAutoscalerCheckpoint::new(
        &VerticalPodAutoscalerCheckpoint::object_name(vpa, container),
        VerticalPodAutoscalerCheckpointSpec {
            vpa_object_name: Some(vpa.to_owned()),
            container_name: Some(container.to_owned()),
        },
    );
    cp.metadata.namespace = Some(namespace.to_owned());
    cp.status = Some(status);
    cp
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;
    use k8s_openapi::api::autoscaling::v1::CrossVersionObjectReference;
    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateTerminated, ContainerStatus, PodSpec, PodStatus,
        ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use plimsoll_core::api::vpa::VerticalPodAutoscalerSpec;
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn t0() -> Timestamp {
        "2024-03-01T00:00:00Z".parse().expect("ts")
    }

    fn vpa(name: &str) -> VpaInput {
        let mut v = VerticalPodAutoscaler::new(
            name,
            VerticalPodAutoscalerSpec {
                target_ref: CrossVersionObjectReference {
                    api_version: Some("apps/v1".into()),
                    kind: "Deployment".into(),
                    name: name.into(),
                },
                update_policy: None,
                resource_policy: None,
                recommenders: None,
                startup_boost: None,
            },
        );
        v.metadata.namespace = Some("ns".into());
        VpaInput {
            vpa: Arc::new(v),
            selector: Selector::parse(&format!("app={name}")).map_err(|e| e.to_string()),
        }
    }

    fn pod(name: &str, app: &str, memory_request: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                labels: Some(BTreeMap::from([("app".into(), app.into())])),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "app".into(),
                    resources: Some(ResourceRequirements {
                        requests: Some(BTreeMap::from([(
                            "memory".into(),
                            K8sQuantity(memory_request.into()),
                        )])),
                        ..ResourceRequirements::default()
                    }),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            status: None,
        }
    }

    fn oom_killed(mut p: Pod, at: Timestamp) -> Pod {
        p.status = Some(PodStatus {
            container_statuses: Some(vec![ContainerStatus {
                name: "app".into(),
                last_state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        reason: Some("OOMKilled".into()),
                        finished_at: Some(Time(at)),
                        ..ContainerStateTerminated::default()
                    }),
                    ..ContainerState::default()
                }),
                ..ContainerStatus::default()
            }]),
            ..PodStatus::default()
        });
        p
    }

    fn usage(pod: &str, cpu: &str, mem: &str, at: Timestamp) -> PodMetrics {
        PodMetrics {
            name: pod.into(),
            namespace: "ns".into(),
            labels: BTreeMap::new(),
            timestamp: at,
            window: Duration::from_secs(30),
            containers: vec![ContainerMetrics {
                name: "app".into(),
                usage: BTreeMap::from([
                    ("cpu".into(), Quantity::parse(cpu).expect("q")),
                    ("memory".into(), Quantity::parse(mem).expect("q")),
                ]),
            }],
        }
    }

    fn target(update: &StatusUpdate, resource: &str) -> K8sQuantity {
        update
            .status
            .recommendation
            .as_ref()
            .and_then(|r| r.container_recommendations.as_ref())
            .and_then(|c| c.first())
            .map(|c| c.target[resource].clone())
            .expect("a recommendation")
    }

    fn with_status(input: &VpaInput, status: &VerticalPodAutoscalerStatus) -> VpaInput {
        let mut v = (*input.vpa).clone();
        v.status = Some(status.clone());
        VpaInput {
            vpa: Arc::new(v),
            selector: input.selector.clone(),
        }
    }

    #[test]
    fn steady_cpu_gives_p90_plus_margin_and_status_only_when_changed() {
        let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        let mut v = vpa("web");
        let pods = vec![Arc::new(pod("web-1", "web", "100Mi"))];
        let mut last = None;
        for i in 0..60 {
            let at = t0() + SignedDuration::from_mins(i);
            let out = r.run_loop(
                std::slice::from_ref(&v),
                &pods,
                &[usage("web-1", "300m", "200Mi", at)],
                &[],
                at,
            );
            if let Some(u) = out.updates.into_iter().next() {
                v = with_status(&v, &u.status);
                last = Some(u);
            }
        }
        let u = last.expect("a status was written");
        // 300m lands in the bucket [~292m, ~307m); target = bucket end × 1.15.
        let cpu = plimsoll_core::quantity::cpu_milli(&target(&u, "cpu")).expect("cpu");
        assert!((340..=356).contains(&cpu), "{cpu}");
        // Nothing changes on the next identical loop once the histogram is stable.
        let at = t0() + SignedDuration::from_mins(61);
        let out = r.run_loop(std::slice::from_ref(&v), &pods, &[], &[], at);
        assert!(out.updates.is_empty(), "{:?}", out.updates);
        assert_eq!(out.containers, 1);
    }

    #[test]
    fn oom_kill_raises_memory_target_above_the_request_once() {
        let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        let v = vpa("web");
        let at = t0() + SignedDuration::from_mins(5);
        let pods = vec![Arc::new(oom_killed(pod("web-1", "web", "500Mi"), at))];
        let out = r.run_loop(
            std::slice::from_ref(&v),
            &pods,
            &[usage("web-1", "100m", "450Mi", at)],
            &[],
            at,
        );
        assert_eq!(out.ooms, 1);
        let mem = plimsoll_core::quantity::memory_bytes(&target(&out.updates[0], "memory"))
            .expect("memory");
        assert!(mem > 500 << 20, "{mem}");
        let out = r.run_loop(std::slice::from_ref(&v), &pods, &[], &[], at);
        assert_eq!(out.ooms, 0, "the same kill is recorded once");
    }

    fn eviction(uid: &str, annotations: &[(&str, &str)], at: Timestamp) -> Event {
        Event {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                creation_timestamp: Some(Time(at)),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            involved_object: k8s_openapi::api::core::v1::ObjectReference {
                kind: Some("Pod".into()),
                namespace: Some("ns".into()),
                name: Some("web-1".into()),
                ..Default::default()
            },
            reason: Some("Evicted".into()),
            ..Event::default()
        }
    }

    type Annotations<'a> = &'a [(&'a str, &'a str)];

    // upstream: pkg/recommender/input/oom/observer_test.go TestParseEvictionEvent
    #[test]
    fn eviction_events_parse_like_upstream() {
        let at = t0();
        let cases: [(Annotations<'_>, Vec<(&str, i64)>); 4] = [
            (
                &[
                    ("offending_containers", "test-container"),
                    ("offending_containers_usage", "1024Ki"),
                    ("starved_resource", "memory"),
                ],
                vec![("test-container", 1024 * 1024)],
            ),
            (
                &[
                    ("offending_containers", "test-container,other-container"),
                    ("offending_containers_usage", "1024Ki,2048Ki"),
                    ("starved_resource", "memory,memory"),
                ],
                vec![
                    ("test-container", 1024 * 1024),
                    ("other-container", 2048 * 1024),
                ],
            ),
            (
                &[
                    ("offending_containers", "test-container,other-container"),
                    ("offending_containers_usage", "1024Ki,2048Ki"),
                    ("starved_resource", "memory,evictable"),
                ],
                vec![("test-container", 1024 * 1024)],
            ),
            (
                // A missing resource invalidates the whole event.
                &[
                    ("offending_containers", "test-container,other-container"),
                    ("offending_containers_usage", "1024Ki,2048Ki"),
                    ("starved_resource", "memory"),
                ],
                vec![],
            ),
        ];
        for (annotations, want) in cases {
            let got: Vec<(String, i64)> = eviction_ooms(&eviction("u", annotations, at))
                .into_iter()
                .map(|o| (o.container, o.usage_bytes))
                .collect();
            let want: Vec<(String, i64)> =
                want.into_iter().map(|(c, b)| (c.to_owned(), b)).collect();
            assert_eq!(got, want, "{annotations:?}");
        }
        let mut other = eviction("u", &[], at);
        other.reason = Some("Killing".into());
        assert!(eviction_ooms(&other).is_empty());
    }

    #[test]
    fn eviction_event_bumps_memory_once() {
        let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        let v = vpa("web");
        let at = t0();
        let pods = vec![Arc::new(pod("web-1", "web", "100Mi"))];
        let events = vec![Arc::new(eviction(
            "e1",
            &[
                ("offending_containers", "app"),
                ("offending_containers_usage", "300Mi"),
                ("starved_resource", "memory"),
            ],
            at,
        ))];
        let out = r.run_loop(std::slice::from_ref(&v), &pods, &[], &events, at);
        assert_eq!(out.ooms, 1);
        let mem = plimsoll_core::quantity::memory_bytes(&target(&out.updates[0], "memory"))
            .expect("memory");
        assert!(mem > 300 << 20, "{mem}");
        let out = r.run_loop(std::slice::from_ref(&v), &pods, &[], &events, at);
        assert_eq!(out.ooms, 0);
    }

    // upstream: pkg/recommender/input/oom/observer_test.go TestOOMReceived (the memory used for
    // the bump: the spec request, 0 without one, the containerStatus request when present)
    #[test]
    fn oom_memory_is_the_request_preferring_container_status() {
        let spec_only = pod("p", "a", "1024");
        assert_eq!(memory_request(&spec_only, "app"), 1024);
        let mut none = pod("p", "a", "1");
        none.spec.as_mut().expect("spec").containers[0].resources = None;
        assert_eq!(memory_request(&none, "app"), 0);
        let mut resized = oom_killed(pod("p", "a", "1024"), t0());
        resized
            .status
            .as_mut()
            .expect("status")
            .container_statuses
            .as_mut()
            .expect("list")[0]
            .resources = Some(ResourceRequirements {
            requests: Some(BTreeMap::from([(
                "memory".into(),
                K8sQuantity("2048".into()),
            )])),
            ..ResourceRequirements::default()
        });
        assert_eq!(memory_request(&resized, "app"), 2048);
    }

    #[test]
    fn a_target_that_disappears_keeps_the_recommendation_and_says_why() {
        let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        let v = vpa("web");
        let pods = vec![Arc::new(pod("web-1", "web", "100Mi"))];
        let at = t0();
        let first = r.run_loop(
            std::slice::from_ref(&v),
            &pods,
            &[usage("web-1", "300m", "200Mi", at)],
            &[],
            at,
        );
        let v = with_status(&v, &first.updates[0].status);
        let mut broken = v.clone();
        broken.selector = Err("apps/v1 Deployment ns/web not found".into());
        let out = r.run_loop(
            &[broken],
            &pods,
            &[],
            &[],
            at + SignedDuration::from_mins(1),
        );
        let u = &out.updates[0];
        assert_eq!(target(u, "cpu"), target(&first.updates[0], "cpu"));
        assert!(u.unsupported.is_some());
        assert!(
            u.status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "ConfigUnsupported" && c.status == "True")
        );
    }

    #[test]
    fn checkpoints_never_written_come_first_then_the_oldest() {
        let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        let (a, b) = (vpa("a"), vpa("b"));
        let pods = vec![
            Arc::new(pod("a-1", "a", "1Mi")),
            Arc::new(pod("b-1", "b", "1Mi")),
        ];
        let at = t0();
        r.run_loop(&[a.clone(), b.clone()], &pods, &[], &[], at);
        r.checkpoint_written(&key_of(&a.vpa), "app", at);
        let names = |r: &Recommender, now| -> Vec<String> {
            r.checkpoints_due(now)
                .into_iter()
                .filter_map(|d| d.checkpoint.metadata.name)
                .collect()
        };
        assert_eq!(names(&r, at), ["b-app", "a-app"]);
        r.checkpoint_written(&key_of(&b.vpa), "app", at + SignedDuration::from_mins(1));
        assert_eq!(names(&r, at), ["a-app", "b-app"]);
    }

    #[test]
    fn no_pods_and_bad_targets_get_conditions() {
        let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        let mut bad = vpa("gone");
        bad.selector = Err("apps/v1 Deployment ns/gone not found".into());
        let out = r.run_loop(&[vpa("web"), bad], &[], &[], &[], t0());
        assert_eq!(out.updates.len(), 2);
        let types = |u: &StatusUpdate| -> Vec<(String, String)> {
            u.status
                .conditions
                .iter()
                .flatten()
                .map(|c| (c.type_.clone(), c.status.clone()))
                .collect()
        };
        let gone = out
            .updates
            .iter()
            .find(|u| u.key.1 == "gone")
            .expect("gone");
        assert!(types(gone).contains(&("ConfigUnsupported".into(), "True".into())));
        assert!(gone.unsupported.is_some());
        let web = out.updates.iter().find(|u| u.key.1 == "web").expect("web");
        assert!(types(web).contains(&("NoPodsMatched".into(), "True".into())));
        assert!(types(web).contains(&("RecommendationProvided".into(), "False".into())));
    }

    #[test]
    fn checkpoints_restore_and_gc() {
        let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        let v = vpa("web");
        let pods = vec![Arc::new(pod("web-1", "web", "100Mi"))];
        for i in 0..10 {
            let at = t0() + SignedDuration::from_mins(i);
            r.run_loop(
                std::slice::from_ref(&v),
                &pods,
                &[usage("web-1", "300m", "200Mi", at)],
                &[],
                at,
            );
        }
        let now = t0() + SignedDuration::from_mins(10);
        let due = r.checkpoints_due(now);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].checkpoint.metadata.name.as_deref(), Some("web-app"));
        assert_eq!(due[0].last_written, None);
        r.checkpoint_written(&key_of(&v.vpa), "app", now);
        assert_eq!(r.checkpoints_due(now)[0].last_written, Some(now));

        // A new process restores the same state.
        let cps: Vec<_> = due.into_iter().map(|d| Arc::new(d.checkpoint)).collect();
        let keys = HashSet::from([key_of(&v.vpa)]);
        let mut fresh = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        assert_eq!(fresh.restore(&cps, &keys, now), (1, Vec::new()));
        let saved = |r: &Recommender| r.model(&key_of(&v.vpa)).map(|m| m.checkpoints(now));
        assert_eq!(saved(&fresh), saved(&r));

        // GC: a checkpoint of a deleted VPA goes; ours stays while its aggregate lives.
        let orphan = Arc::new(checkpoint_object(
            "ns",
            "deleted",
            "app",
            VerticalPodAutoscalerCheckpointStatus::default(),
        ));
        let all = vec![cps[0].clone(), orphan];
        assert_eq!(
            r.stale_checkpoints(&all, &keys),
            vec![("ns".to_owned(), "deleted-app".to_owned())]
        );
        // After 8 days without samples the aggregate expires and so does its checkpoint.
        assert_eq!(
            r.garbage_collect(now + SignedDuration::from_hours(24 * 9)),
            1
        );
        assert_eq!(r.stale_checkpoints(&all, &keys).len(), 2);
    }

    #[test]
    fn pods_match_the_first_vpa_by_name_in_their_namespace() {
        let vpas = [vpa("b"), vpa("a")];
        let mut both = vpas[0].clone();
        both.selector = Selector::parse("tier=web").map_err(|e| e.to_string());
        let mut p = pod("p", "a", "1Mi");
        p.metadata
            .labels
            .get_or_insert_default()
            .insert("tier".into(), "web".into());
        let pods = [Arc::new(p)];
        let r = Recommender::default();
        let owners = r.pod_owners(&[both, vpas[1].clone()], &pods);
        assert_eq!(owners[&("ns".to_owned(), "p".to_owned())].1, "a");
    }

    proptest::proptest! {
        /// Whatever the usage, a written recommendation has lower ≤ target ≤ upper, and a loop
        /// that sees nothing new after its status was applied writes nothing.
        #[test]
        fn written_status_is_ordered_and_quiet_when_unchanged(
            series in proptest::collection::vec((1_i64..4_000, 1_i64..4_096), 1..20),
        ) {
            let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
            let mut v = vpa("web");
            let pods = vec![Arc::new(pod("web-1", "web", "100Mi"))];
            let mut at = t0();
            for (cpu, mem) in &series {
                at += SignedDuration::from_mins(1);
                let sample = usage("web-1", &format!("{cpu}m"), &format!("{mem}Mi"), at);
                let out = r.run_loop(std::slice::from_ref(&v), &pods, &[sample], &[], at);
                for u in &out.updates {
                    let rec = u.status.recommendation.as_ref()
                        .and_then(|r| r.container_recommendations.as_ref())
                        .and_then(|c| c.first())
                        .expect("recommendation");
                    for resource in ["cpu", "memory"] {
                        let value = |list: Option<&plimsoll_core::api::vpa::ResourceList>| {
                            Quantity::try_from(&list.expect("list")[resource]).expect("q").milli()
                        };
                        let (lo, t, hi) = (
                            value(rec.lower_bound.as_ref()),
                            value(Some(&rec.target)),
                            value(rec.upper_bound.as_ref()),
                        );
                        proptest::prop_assert!(lo <= t && t <= hi, "{resource}: {lo} {t} {hi}");
                    }
                    v = with_status(&v, &u.status);
                }
            }
            let out = r.run_loop(std::slice::from_ref(&v), &pods, &[], &[], at);
            proptest::prop_assert!(out.updates.is_empty());
        }
    }
}
