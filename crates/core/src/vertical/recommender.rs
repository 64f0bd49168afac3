//! The recommender's loop without I/O: its memory across loops and what one loop decides.
//!
//! [`Recommender::run_loop`] takes what the service read from the cluster in this loop (the VPAs
//! it serves with their resolved pod selectors, the pods, the usage from `metrics.k8s.io`, the
//! eviction Events) and returns what to write: the VPA statuses that changed, plus every VPA's
//! recommendation with the reasons behind it (what `replay` prints). The controller and
//! `vpa-recommender replay` both call it. One loop runs these steps, in the order upstream's loop
//! runs them:
//!
//! 1. `forget_deleted_vpas`, then
//!    `read_settings`: each VPA's own aggregation settings
//!    ([`super::per_vpa`]);
//! 2. [`super::ownership::owners`]: which pods belong to which VPA (the shared rule of
//!    [`super::controlling`], walking the pods' owners through the ReplicaSets and Jobs the
//!    service has seen);
//! 3. `add_usage`: usage samples into the aggregates, and
//!    `record_totals`: the total CPU usage of each VPA in joint
//!    mode, and its memory usage when its autoscaler scales on memory ([`joint_sizing`]);
//! 4. `record_status_ooms` and
//!    `record_eviction_ooms`: OOM kills, each once;
//! 5. `recommend_vpa` per VPA: forget pods that are gone, compute
//!    the recommendation and conditions (in joint mode, the CPU and/or memory request sized
//!    with the horizontal autoscaler, [`joint_sizing::apply`]), cap it to fit the largest node
//!    ([`node_fit`]), and keep the status only when it changed ([`super::status_change`]).
//!
//! Checkpoint and garbage-collection decisions are methods here too ([`checkpoint_schedule`]), as
//! is when a joint VPA's total usage is persisted in its annotation
//! (`totals_due`); the service only moves the objects.
//!
//! Invariants: one [`VpaModel`] per VPA (keyed `namespace/name`), aggregates keyed by container
//! name inside it as upstream keys them (VPA, container name); a pod belongs to at most one VPA;
//! an OOM kill (pod, container, finish time) and an eviction Event are recorded once; steps run
//! over pods, usage and Events in their input order, so a loop is deterministic.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Event, Pod};

use super::aggregate::AggregationsConfig;
use super::checkpoint::CheckpointError;
use super::checkpoint_schedule::{self, CheckpointWrite, checkpoint_object};
use super::controlling::Owners;
use super::estimator::EstimatorConfig;
use super::joint::JointRequest;
use super::joint_sizing::{self, HorizontalSettings, JointConfig, JointState, annotated};
use super::model::VpaModel;
use super::node_fit::{self, LargestNode, NodeFitConfig};
use super::oom::{clamp_amount, eviction_ooms, status_ooms};
use super::ownership::{ServedVpa, VpaKey, key_of, owners};
use super::per_vpa::PerVpaSettings;
use super::recommendation::{
    JointCondition, Observation, RecommendationError, RecommendationReport,
};
use super::resources::Resource;
use super::status_change::{newly_true, newly_unsupported, next_status, same_status};
use crate::api::vpa::{
    VerticalPodAutoscaler, VerticalPodAutoscalerCheckpoint, VerticalPodAutoscalerStatus,
};
use crate::quantity::Quantity;
use crate::quantity::saturating_total;
use crate::stored::Ignored;

/// Usage of one pod's containers over one sampling window (what `metrics.k8s.io` reports).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodUsage {
    /// Namespace of the pod.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// End of the sampling window; the samples' time.
    pub time: Timestamp,
    /// Per container.
    pub containers: Vec<ContainerUsage>,
}

/// Usage of one container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerUsage {
    /// Container name.
    pub container: String,
    /// CPU (cores; millicores go into the model).
    pub cpu: Option<Quantity>,
    /// Memory (bytes).
    pub memory: Option<Quantity>,
}

/// Why a VPA cannot be served (its `ConfigUnsupported` condition).
#[derive(Clone, Debug, PartialEq)]
pub enum Unsupported {
    /// The target could not be resolved to a pod selector; the history already aggregated still
    /// gives a recommendation.
    Target(String),
    /// The spec is invalid; no recommendation.
    InvalidSpec(String),
    /// The container policy cannot be applied; no recommendation.
    Policy(RecommendationError),
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unsupported::Target(why) | Unsupported::InvalidSpec(why) => f.write_str(why),
            Unsupported::Policy(e) => e.fmt(f),
        }
    }
}

/// One VPA's recommendation in one loop, with the reasons behind it.
#[derive(Clone, Debug, PartialEq)]
pub struct VpaRecommendation {
    /// Which VPA.
    pub key: VpaKey,
    /// Per container, sorted by name (empty when there is none).
    pub containers: Vec<RecommendationReport>,
    /// Why the VPA cannot be served, if it cannot.
    pub unsupported: Option<Unsupported>,
    /// In joint mode with a horizontal autoscaler on CPU utilization, the model's answer for
    /// CPU (its request is already in `containers`).
    pub joint: Option<JointRequest>,
    /// In joint mode with a horizontal autoscaler on memory utilization, the model's answer for
    /// memory (its request is already in `containers`).
    pub joint_memory: Option<JointRequest>,
}

/// A status to write.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusUpdate {
    /// Which VPA.
    pub key: VpaKey,
    /// The new `status` (recommendation and conditions).
    pub status: VerticalPodAutoscalerStatus,
    /// Set when the VPA cannot be served.
    pub unsupported: Option<String>,
    /// The VPA has just become unsupported (a Warning Event reports the transition).
    pub newly_unsupported: bool,
    /// A horizontal autoscaler has just started to fight this VPA: the condition's message (a
    /// Warning Event reports the transition).
    pub newly_conflicting: Option<String>,
}

/// What one loop decided.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoopOutcome {
    /// Statuses that differ from the VPAs' current ones.
    pub updates: Vec<StatusUpdate>,
    /// Every served VPA's recommendation, in input order.
    pub recommendations: Vec<VpaRecommendation>,
    /// VPAs served in this loop.
    pub vpas: usize,
    /// Aggregates (VPA × container) after the loop.
    pub containers: usize,
    /// Usage samples accepted.
    pub samples: usize,
    /// OOM kills recorded.
    pub ooms: usize,
}

/// A checkpoint that could not be restored (it is skipped, never fatal).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("checkpoint {namespace}/{name}: {source}")]
pub struct RestoreError {
    /// Position of the checkpoint in the input.
    pub index: usize,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// What is wrong with it.
    #[source]
    pub source: CheckpointError,
}

#[derive(Clone, Debug, Default)]
struct VpaState {
    model: VpaModel,
    pods: BTreeSet<String>,
    checkpoint_written: std::collections::BTreeMap<String, Timestamp>,
    /// In joint mode: the total usage.
    joint: Option<JointState>,
    /// Checkpoints of this VPA that were ignored when restored (at most
    /// [`MAX_IGNORED_NOTES`]), each as `checkpoint NAME was ignored: why`.
    ignored_checkpoints: Vec<String>,
}

/// The most ignored checkpoints a VPA's `StoredStateIgnored` condition names.
const MAX_IGNORED_NOTES: usize = 4;

/// The longest text of a checkpoint's restore error a condition repeats (its bucket keys and
/// version are written by whoever wrote the checkpoint).
const MAX_NOTE_BYTES: usize = 200;

/// The identity of an OOM kill read from a pod status: (namespace, pod, container, finish time).
type OomId = (String, String, String, Timestamp);

/// The recommender's memory: one model per VPA, plus the OOM kills already recorded.
#[derive(Debug, Default)]
pub struct Recommender {
    aggregations: AggregationsConfig,
    estimator: EstimatorConfig,
    joint: JointConfig,
    /// Whether VPAs' own aggregation settings apply ([`super::per_vpa`]); off, the flags apply to all.
    per_vpa: bool,
    /// Whether recommendations are capped to fit the largest node ([`node_fit`]), and how.
    node_fit: Option<NodeFitConfig>,
    /// The largest node, as the service last saw the Nodes.
    largest_node: LargestNode,
    vpas: HashMap<VpaKey, VpaState>,
    seen_ooms: HashSet<OomId>,
    seen_events: HashSet<String>,
}

/// Pods that belong to a served VPA, looked up both ways.
struct Assignment<'p> {
    /// In pod input order.
    owned: Vec<(VpaKey, &'p Pod)>,
    /// (namespace, pod) → position in `owned`.
    by_pod: HashMap<(&'p str, &'p str), usize>,
    /// VPA → its pods, in pod input order: filed once, as a scan of `owned` per VPA made a loop
    /// cost VPAs × owned pods (a tenant's 10,000 VPAs times every pod of the cluster).
    by_vpa: HashMap<VpaKey, Vec<&'p Pod>>,
}

impl<'p> Assignment<'p> {
    fn new<V: ServedVpa>(vpas: &[V], pods: &'p [Arc<Pod>], known: &dyn Owners) -> Self {
        let owned = owners(vpas, pods, known);
        let by_pod = owned
            .iter()
            .enumerate()
            .map(|(i, (_, pod))| {
                let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                ((namespace, name), i)
            })
            .collect();
        let mut by_vpa: HashMap<VpaKey, Vec<&'p Pod>> = HashMap::new();
        for (key, pod) in &owned {
            by_vpa.entry(key.clone()).or_default().push(*pod);
        }
        Self {
            owned,
            by_pod,
            by_vpa,
        }
    }

    fn owner(&self, namespace: &str, pod: &str) -> Option<&VpaKey> {
        self.by_pod
            .get(&(namespace, pod))
            .map(|&i| &self.owned[i].0)
    }

    fn pods_of(&self, key: &VpaKey) -> &[&'p Pod] {
        self.by_vpa.get(key).map_or(&[], Vec::as_slice)
    }
}

impl Recommender {
    /// An empty recommender with the model settings; VPAs' own settings apply
    /// ([`set_per_vpa`](Self::set_per_vpa)).
    pub fn new(aggregations: AggregationsConfig, estimator: EstimatorConfig) -> Self {
        Self {
            aggregations,
            estimator,
            per_vpa: true,
            ..Self::default()
        }
    }

    /// Caps every pod's recommendation to fit the largest node less a headroom ([`node_fit`]);
    /// `None` turns that off.
    pub fn set_node_fit(&mut self, config: Option<NodeFitConfig>) {
        self.node_fit = config;
    }

    /// The largest node (per resource) as the Nodes read now show it; loops cap to it.
    pub fn set_largest_node(&mut self, largest: LargestNode) {
        self.largest_node = largest;
    }

    /// Whether a VPA's container policies may override the aggregation settings (AEP-8026,
    /// upstream feature gate `PerVPAConfig`); when not, every VPA gets the flags'.
    pub fn set_per_vpa(&mut self, enabled: bool) {
        self.per_vpa = enabled;
    }

    /// Sets the joint model's settings and the total usage's bucket width (defaults:
    /// [`JointConfig::default`]).
    pub fn set_joint(&mut self, joint: JointConfig) {
        self.joint = joint;
    }

    /// The total usage of a VPA in joint mode, if it is in joint mode.
    pub fn total_usage(&self, key: &VpaKey) -> Option<&joint_sizing::JointState> {
        self.vpas.get(key).and_then(|v| v.joint.as_ref())
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
    /// another recommender's, or garbage). Returns how many were restored and the checkpoints
    /// that could not be (a bad checkpoint is skipped, never fatal).
    pub fn restore(
        &mut self,
        checkpoints: &[Arc<VerticalPodAutoscalerCheckpoint>],
        vpas: &HashSet<VpaKey>,
        now: Timestamp,
    ) -> (usize, Vec<RestoreError>) {
        let mut restored = 0;
        let mut errors = Vec::new();
        for (index, cp) in checkpoints.iter().enumerate() {
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
                Err(source) => {
                    let name = cp.metadata.name.clone().unwrap_or_default();
                    if state.ignored_checkpoints.len() < MAX_IGNORED_NOTES {
                        state.ignored_checkpoints.push(format!(
                            "checkpoint {} was ignored: {}",
                            crate::printable::cut(&name, MAX_NOTE_BYTES),
                            crate::printable::cut(&source.to_string(), MAX_NOTE_BYTES)
                        ));
                    }
                    errors.push(RestoreError {
                        index,
                        namespace: key.0,
                        name,
                        source,
                    });
                }
            }
        }
        (restored, errors)
    }

    /// (namespace, pod) → the VPA it belongs to ([`owners`], walking pods' owners through
    /// `known`).
    pub fn pod_owners<V: ServedVpa>(
        &self,
        vpas: &[V],
        pods: &[Arc<Pod>],
        known: &dyn Owners,
    ) -> HashMap<(String, String), VpaKey> {
        owners(vpas, pods, known)
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

    /// One loop (see the module docs): fold `usage` and the OOM kills in `pods` and `events` into
    /// the models of `vpas`, and return every VPA's recommendation and the statuses that changed.
    /// VPAs absent from `vpas` are forgotten.
    pub fn run_loop<V: ServedVpa>(
        &mut self,
        vpas: &[V],
        pods: &[Arc<Pod>],
        known: &dyn Owners,
        usage: &[PodUsage],
        events: &[Arc<Event>],
        now: Timestamp,
    ) -> LoopOutcome {
        self.forget_deleted_vpas(vpas);
        self.read_settings(vpas);
        let assignment = Assignment::new(vpas, pods, known);
        let samples = self.add_usage(&assignment, usage);
        self.record_totals(vpas, &assignment, usage, now);
        let ooms =
            self.record_status_ooms(&assignment) + self.record_eviction_ooms(&assignment, events);
        let mut outcome = LoopOutcome {
            samples,
            ooms,
            ..LoopOutcome::default()
        };
        for input in vpas {
            outcome.vpas += 1;
            let pods = assignment.pods_of(&key_of(input.object()));
            let (recommendation, update) = self.recommend_vpa(input, pods, now);
            outcome.recommendations.push(recommendation);
            outcome.updates.extend(update);
        }
        outcome.containers = self.containers();
        outcome
    }

    /// Drops the models (aggregates, checkpoint times, joint totals) of the VPAs `gone`
    /// selects, e.g. those of a shard another replica now serves from their checkpoints;
    /// returns how many.
    pub fn forget(&mut self, mut gone: impl FnMut(&VpaKey) -> bool) -> usize {
        let before = self.vpas.len();
        self.vpas.retain(|k, _| !gone(k));
        before - self.vpas.len()
    }

    /// Step 1: drops the models of VPAs that are no longer served.
    fn forget_deleted_vpas<V: ServedVpa>(&mut self, vpas: &[V]) {
        let live: HashSet<VpaKey> = vpas.iter().map(|v| key_of(v.object())).collect();
        self.vpas.retain(|k, _| live.contains(k));
    }

    /// Step 1b: each VPA's own aggregation settings, read afresh so an edit applies from this
    /// loop's samples on (samples already aggregated keep the settings they came in with).
    fn read_settings<V: ServedVpa>(&mut self, vpas: &[V]) {
        for input in vpas {
            let vpa = input.object();
            let settings = if self.per_vpa {
                PerVpaSettings::from_spec(&vpa.spec)
            } else {
                PerVpaSettings::default()
            };
            self.vpas.entry(key_of(vpa)).or_default().model.settings = settings;
        }
    }

    /// Step 3: adds the usage of owned pods to their VPA's model; returns the CPU samples
    /// accepted.
    fn add_usage(&mut self, assignment: &Assignment<'_>, usage: &[PodUsage]) -> usize {
        let mut accepted = 0;
        for pm in usage {
            let Some(key) = assignment.owner(&pm.namespace, &pm.pod) else {
                continue;
            };
            let state = self.vpas.entry(key.clone()).or_default();
            for c in &pm.containers {
                if let Some(cpu) = c.cpu
                    && state.model.add_cpu_sample(
                        &pm.pod,
                        &c.container,
                        clamp_amount(cpu.milli()),
                        pm.time,
                        &self.aggregations,
                    )
                {
                    accepted += 1;
                }
                if let Some(mem) = c.memory {
                    state.model.add_memory_sample(
                        &pm.pod,
                        &c.container,
                        clamp_amount(mem.value()),
                        pm.time,
                        &self.aggregations,
                    );
                }
            }
        }
        accepted
    }

    /// Step 3b: for each VPA in joint mode, the total CPU usage of its pods in this loop, and
    /// their total memory usage when the autoscaler scales on memory (the containers the
    /// autoscaler's utilization of each counts) into its [`JointState`], restored from
    /// its annotation on first sight. Nothing is recorded for a VPA without a sample in this
    /// loop; a VPA no longer in joint mode forgets its total.
    fn record_totals<V: ServedVpa>(
        &mut self,
        vpas: &[V],
        assignment: &Assignment<'_>,
        usage: &[PodUsage],
        now: Timestamp,
    ) {
        let mut scopes: HashMap<VpaKey, Option<&HorizontalSettings>> = HashMap::new();
        for input in vpas {
            let vpa = input.object();
            let annotations = vpa.metadata.annotations.as_ref();
            let key = key_of(vpa);
            let state = self.vpas.entry(key.clone()).or_default();
            if annotated(annotations) {
                state
                    .joint
                    .get_or_insert_with(|| JointState::first_sight(annotations, &self.joint, now));
                scopes.insert(key, input.joint());
            } else {
                state.joint = None;
            }
        }
        let mut totals: HashMap<&VpaKey, (i64, Option<i64>)> = HashMap::new();
        for pm in usage {
            let Some(key) = assignment.owner(&pm.namespace, &pm.pod) else {
                continue;
            };
            let Some(scope) = scopes.get(key) else {
                continue;
            };
            let in_scope = |resource: Resource, container: &str| {
                scope.is_none_or(|h| h.in_scope(resource, container))
            };
            // The metrics API reports whatever its provider serves, each container up to
            // i64::MAX once clamped: a wrapped total would read a loaded workload as idle.
            let cpu = saturating_total(
                pm.containers
                    .iter()
                    .filter(|c| in_scope(Resource::Cpu, &c.container))
                    .filter_map(|c| c.cpu.map(|q| clamp_amount(q.milli()))),
            );
            let memory = scope.is_some_and(|h| h.memory.is_some()).then(|| {
                saturating_total(
                    pm.containers
                        .iter()
                        .filter(|c| in_scope(Resource::Memory, &c.container))
                        .filter_map(|c| c.memory.map(|q| clamp_amount(q.value()))),
                )
            });
            let total = totals.entry(key).or_default();
            total.0 = total.0.saturating_add(cpu);
            if let Some(m) = memory {
                let sum = total.1.get_or_insert(0);
                *sum = sum.saturating_add(m);
            }
        }
        for (key, (cpu, memory)) in totals {
            if let Some(joint) = self.vpas.get_mut(key).and_then(|s| s.joint.as_mut()) {
                joint.record(now, Resource::Cpu, cpu, &self.joint);
                if let Some(m) = memory {
                    joint.record(now, Resource::Memory, m, &self.joint);
                }
            }
        }
    }

    /// Step 4a: records the OOM kills owned pods' statuses show, each once; returns how many the
    /// model took (a kill older than the memory window is refused, as upstream).
    fn record_status_ooms(&mut self, assignment: &Assignment<'_>) -> usize {
        let mut recorded = 0;
        for (key, pod) in &assignment.owned {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            for kill in status_ooms(pod) {
                let id = (
                    namespace.to_owned(),
                    name.to_owned(),
                    kill.container.clone(),
                    kill.finished,
                );
                if self.seen_ooms.contains(&id) {
                    continue;
                }
                let state = self.vpas.entry(key.clone()).or_default();
                if state
                    .model
                    .record_oom(
                        name,
                        &kill.container,
                        kill.used_bytes,
                        kill.finished,
                        &self.aggregations,
                    )
                    .is_ok()
                {
                    recorded += 1;
                }
                self.seen_ooms.insert(id);
            }
        }
        let present: HashSet<(&str, &str)> = assignment.by_pod.keys().copied().collect();
        self.seen_ooms
            .retain(|(ns, pod, _, _)| present.contains(&(ns.as_str(), pod.as_str())));
        recorded
    }

    /// Step 4b: records the memory kills of eviction Events about owned pods, each Event once;
    /// returns how many the model took.
    fn record_eviction_ooms(
        &mut self,
        assignment: &Assignment<'_>,
        events: &[Arc<Event>],
    ) -> usize {
        let mut recorded = 0;
        for event in events {
            let uid = event.metadata.uid.clone().unwrap_or_default();
            if uid.is_empty() || self.seen_events.contains(&uid) {
                continue;
            }
            for oom in eviction_ooms(event) {
                let Some(key) = assignment.owner(&oom.namespace, &oom.pod) else {
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
                    recorded += 1;
                }
            }
            self.seen_events.insert(uid);
        }
        let live: HashSet<&str> = events
            .iter()
            .filter_map(|e| e.metadata.uid.as_deref())
            .collect();
        self.seen_events.retain(|uid| live.contains(uid.as_str()));
        recorded
    }

    /// Step 5: one VPA's recommendation and conditions, and its status when that changed.
    fn recommend_vpa<V: ServedVpa>(
        &mut self,
        input: &V,
        pods: &[&Pod],
        now: Timestamp,
    ) -> (VpaRecommendation, Option<StatusUpdate>) {
        let vpa = input.object();
        let key = key_of(vpa);
        let state = self.vpas.entry(key.clone()).or_default();
        let containers_per_pod = state.track_pods(pods, &self.aggregations, now);
        let (mut containers, unsupported) =
            recommend_or_explain(input, &state.model, containers_per_pod, &self.estimator);
        let annotations = vpa.metadata.annotations.as_ref();
        let joint = match (input.joint(), &mut state.joint) {
            (Some(horizontal), Some(js)) if annotated(annotations) => Some(joint_sizing::apply(
                vpa,
                horizontal,
                js,
                pods,
                &mut containers,
                &self.joint.settings,
            )),
            (_, Some(js)) => {
                js.forget_requests();
                None
            }
            _ => None,
        };
        let node_capped = self.node_fit.and_then(|config| {
            let others = node_fit::other_requests(pods, &containers);
            let caps = node_fit::fit(&mut containers, &self.largest_node, config, &others);
            (!caps.is_empty()).then(|| {
                caps.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            })
        });
        let joint_condition = annotated(annotations).then(|| {
            let target = &vpa.spec.target_ref;
            let (status, reason, message) = joint_sizing::condition(
                input.joint(),
                joint.as_ref(),
                &format!("{}/{}", target.kind, target.name),
            );
            JointCondition {
                status,
                reason,
                message,
            }
        });
        let joint_ignored = state
            .joint
            .as_ref()
            .filter(|_| annotated(annotations))
            .and_then(|js| js.ignored.clone())
            .map(|why| Ignored {
                what: "annotation plimsoll.dev/total-usage",
                why,
            });
        let notes: Vec<String> = state
            .ignored_checkpoints
            .iter()
            .cloned()
            .chain(joint_ignored.map(|i| i.to_string()))
            .collect();
        let observed = Observation {
            stored_state_ignored: (!notes.is_empty()).then(|| {
                format!(
                    "{}; the recommender started that history afresh",
                    notes.join("; ")
                )
            }),
            pods_matched: !pods.is_empty(),
            has_recommendation: !containers.is_empty(),
            low_confidence: containers.iter().any(|r| r.confidence < 1.0),
            config_unsupported: unsupported.as_ref().map(ToString::to_string),
            conflict: input.conflict().map(str::to_owned),
            joint: joint_condition,
            node_capped,
        };
        let previous = vpa.status.as_ref();
        let status = next_status(previous, &containers, &observed, now);
        let update = (!same_status(previous, &status)).then(|| StatusUpdate {
            key: key.clone(),
            status,
            newly_unsupported: unsupported.is_some() && newly_unsupported(previous),
            unsupported: observed.config_unsupported.clone(),
            newly_conflicting: observed
                .conflict
                .clone()
                .filter(|_| newly_true(previous, crate::conflict::CONDITION)),
        });
        (
            VpaRecommendation {
                key,
                containers,
                unsupported,
                joint: joint.as_ref().and_then(|j| j.cpu.clone()),
                joint_memory: joint.and_then(|j| j.memory),
            },
            update,
        )
    }

    /// Every (VPA, container) checkpoint, in the order to write them
    /// ([`checkpoint_schedule::oldest_first`]).
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
        checkpoint_schedule::oldest_first(&mut out);
        out
    }

    /// Notes that the checkpoint of `container` of `key` was written at `now`.
    pub fn checkpoint_written(&mut self, key: &VpaKey, container: &str, now: Timestamp) {
        if let Some(state) = self.vpas.get_mut(key) {
            state.checkpoint_written.insert(container.to_owned(), now);
        }
    }

    /// Notes that writing the checkpoint of `container` of `key` failed at `now`: it waits
    /// behind the others as if written then. A checkpoint the API server always refuses (a
    /// VPA name so long that `<vpa>-<container>` is no valid name: the tenant's to choose)
    /// would otherwise stay never written, first in every loop, and with a few hundred such
    /// containers use up `--checkpoints-timeout` before any other tenant's is written.
    pub fn checkpoint_failed(&mut self, key: &VpaKey, container: &str, now: Timestamp) {
        self.checkpoint_written(key, container, now);
    }

    /// The total usage of each VPA in joint mode to persist in its annotation
    /// ([`joint_sizing::TOTAL_USAGE_ANNOTATION`]), as `(VPA, annotation value)` in key order:
    /// those that changed since they were last persisted, at least `every` ago (zero: every
    /// changed one, before the state is dropped at the end of a leadership term).
    pub fn totals_due(&self, now: Timestamp, every: SignedDuration) -> Vec<(VpaKey, String)> {
        let mut out: Vec<(VpaKey, String)> = self
            .vpas
            .iter()
            .filter_map(|(key, state)| {
                let joint = state.joint.as_ref()?;
                (joint.dirty && now.duration_since(joint.persisted_at) >= every)
                    .then(|| (key.clone(), joint.stored()))
            })
            .collect();
        out.sort();
        out
    }

    /// Notes that the total usage of `key` was persisted at `now`.
    pub fn total_persisted(&mut self, key: &VpaKey, now: Timestamp) {
        if let Some(joint) = self.vpas.get_mut(key).and_then(|s| s.joint.as_mut()) {
            joint.persisted_at = now;
            joint.dirty = false;
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

    /// Checkpoints to delete ([`checkpoint_schedule::stale`]); `all_vpas` holds every VPA,
    /// whoever serves it.
    pub fn stale_checkpoints(
        &self,
        checkpoints: &[Arc<VerticalPodAutoscalerCheckpoint>],
        all_vpas: &HashSet<VpaKey>,
    ) -> Vec<(String, String)> {
        checkpoints
            .iter()
            .filter_map(|cp| {
                checkpoint_schedule::stale(cp, all_vpas, |key, container| {
                    self.vpas
                        .get(key)
                        .map(|s| s.model.aggregates.contains_key(container))
                })
            })
            .collect()
    }
}

impl VpaState {
    /// Forgets the instances of pods that are gone, makes sure every container of the VPA's pods
    /// has an aggregate, and returns the containers per pod (at least 1) that split the pod
    /// minimums.
    fn track_pods(&mut self, pods: &[&Pod], config: &AggregationsConfig, now: Timestamp) -> usize {
        let names: BTreeSet<String> = pods
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        for gone in self.pods.difference(&names) {
            self.model.remove_pod(gone);
        }
        self.pods = names;
        let mut containers_per_pod = 1;
        let mut current = BTreeSet::new();
        for pod in pods {
            let containers = pod
                .spec
                .as_ref()
                .map(|s| s.containers.as_slice())
                .unwrap_or_default();
            containers_per_pod = containers_per_pod.max(containers.len());
            for c in containers {
                self.model.ensure_container(&c.name, config, now);
                current.insert(c.name.as_str());
            }
        }
        for name in self.model.cap_aggregates(&current) {
            self.checkpoint_written.remove(&name);
        }
        containers_per_pod
    }
}

/// The recommendation of a VPA, or why there is none. An unresolvable target only explains: the
/// history already aggregated still gives a recommendation (as upstream), so a transient API error
/// or a target being recreated does not wipe it. An invalid spec or policy gives none.
fn recommend_or_explain<V: ServedVpa>(
    input: &V,
    model: &VpaModel,
    containers_per_pod: usize,
    estimator: &EstimatorConfig,
) -> (Vec<RecommendationReport>, Option<Unsupported>) {
    let vpa: &VerticalPodAutoscaler = input.object();
    let target = input
        .target_error()
        .map(|why| Unsupported::Target(why.to_owned()));
    // A spec the cache left out (too large) is not there to read.
    if let Some(why) = crate::cut_down::spec_left_out(&vpa.metadata) {
        return (Vec::new(), Some(Unsupported::InvalidSpec(why)));
    }
    if let Err(errs) = vpa.spec.validate() {
        return (Vec::new(), Some(Unsupported::InvalidSpec(errs.to_string())));
    }
    match model.recommend(&vpa.spec, containers_per_pod, estimator) {
        Ok(recs) => (recs, target),
        Err(e) => (Vec::new(), Some(Unsupported::Policy(e))),
    }
}

#[cfg(test)]
mod tests;
