//! `vpa-recommender replay`: runs the recommender's loop over a scenario file with no cluster
//! (see docs/replay.md, "vpa-recommender").
//!
//! The replay runs [`Recommender::run_loop`], the loop `controller::run_once` runs, over a fake
//! cluster built from the scenario: the VPA with its target resolved to a selector, one pod per
//! pod name in the samples (or one pod `pod`) running the scenario's `containers`, the usage
//! `metrics.k8s.io` would report at each sample's time, and for each `oom` sample the kubelet's
//! memory-pressure eviction Event (usage: the sample's memory, else the container's memory
//! request). `checkpointIn` is restored as the controller restores at start. The loop runs once
//! at the start, once per batch of samples, and once at each `at` time, whose recommendation is
//! printed. Times are seconds since the scenario start, which is `start` (RFC 3339) if given,
//! else the `lastSampleStart` of the first `checkpointIn` checkpoint, else 2024-01-01T00:00:00Z.
//!
//! Invariants: a scenario that does not parse or is inconsistent is reported as
//! [`ReplayError::Invalid`] naming the field (exit 2); `expect` misses are collected, never fatal;
//! samples reach the model in file order.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{
    Container, Event, Node, NodeStatus, ObjectReference, Pod, PodSpec, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use plimsoll_core::api::vpa::{
    ResourceList, VerticalPodAutoscaler, VerticalPodAutoscalerCheckpoint,
};
use plimsoll_core::quantity::Quantity;
use plimsoll_core::vertical::aggregate::{AggregationsConfig, Resource};
use plimsoll_core::vertical::estimator::EstimatorConfig;
use plimsoll_core::vertical::model::VpaModel;
use plimsoll_core::vertical::node_fit::{LargestNode, NodeFitConfig};
use plimsoll_core::vertical::resources::{ResourceAmounts, amounts_to_list};
use plimsoll_replay::plot::Chart;
use plimsoll_replay::{ExtraFile, Invocation, ReplayError, Status};
use serde::de::DeserializeOwned;

use crate::plot::{ResourceTrace, SeriesPoint};
use crate::recommender::{
    ContainerMetrics, NoOwners, PodMetrics, Recommender, Selector, Unsupported, VpaInput, VpaKey,
    VpaRecommendation, checkpoint_object, key_of,
};
use serde::{Deserialize, Serialize};

fn invalid(path: impl std::fmt::Display, message: impl std::fmt::Display) -> ReplayError {
    ReplayError::invalid(path, message)
}

/// The scenario start when neither `start` nor a checkpoint gives one.
pub const DEFAULT_START: &str = "2024-01-01T00:00:00Z";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ScenarioFile {
    kind: String,
    vpa: serde_json::Value,
    #[serde(default)]
    controller: Option<serde_json::Value>,
    #[serde(default)]
    containers: Vec<serde_json::Value>,
    #[serde(default)]
    samples: Vec<serde_json::Value>,
    #[serde(default)]
    checkpoint_in: Option<String>,
    #[serde(default)]
    at: Vec<f64>,
    #[serde(default)]
    expect: Vec<serde_json::Value>,
    #[serde(default)]
    start: Option<Timestamp>,
    #[serde(default)]
    nodes: Vec<serde_json::Value>,
}

/// A node of the fake cluster: its allocatable CPU and memory, and whether it is cordoned.
#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NodeSpec {
    name: String,
    allocatable: BTreeMap<String, Quantity>,
    #[serde(default)]
    cordoned: bool,
}

impl NodeSpec {
    fn node(&self) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(k8s_openapi::api::core::v1::NodeSpec {
                unschedulable: self.cordoned.then_some(true),
                ..k8s_openapi::api::core::v1::NodeSpec::default()
            }),
            status: Some(NodeStatus {
                allocatable: Some(
                    self.allocatable
                        .iter()
                        .map(|(k, v)| (k.clone(), (*v).into()))
                        .collect(),
                ),
                ..NodeStatus::default()
            }),
        }
    }
}

/// Recommender flags a scenario may set; every field optional, defaults are the controller's.
#[derive(Deserialize, Default, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ControllerSettings {
    /// Target percentile for both CPU and memory.
    pub target_percentile: Option<f64>,
    /// `--target-cpu-percentile`.
    pub target_cpu_percentile: Option<f64>,
    /// `--target-memory-percentile`.
    pub target_memory_percentile: Option<f64>,
    /// `--recommendation-lower-bound-cpu-percentile`.
    pub lower_bound_cpu_percentile: Option<f64>,
    /// `--recommendation-upper-bound-cpu-percentile`.
    pub upper_bound_cpu_percentile: Option<f64>,
    /// `--recommendation-lower-bound-memory-percentile`.
    pub lower_bound_memory_percentile: Option<f64>,
    /// `--recommendation-upper-bound-memory-percentile`.
    pub upper_bound_memory_percentile: Option<f64>,
    /// `--recommendation-margin-fraction`.
    pub safety_margin_fraction: Option<f64>,
    /// `--pod-recommendation-min-cpu-millicores`.
    pub pod_min_cpu_millicores: Option<f64>,
    /// `--pod-recommendation-min-memory-mb`.
    pub pod_min_memory_mb: Option<f64>,
    /// `--confidence-interval-cpu`, seconds.
    pub confidence_interval_cpu_seconds: Option<i64>,
    /// `--confidence-interval-memory`, seconds.
    pub confidence_interval_memory_seconds: Option<i64>,
    /// `--memory-aggregation-interval`, seconds.
    pub memory_aggregation_interval_seconds: Option<i64>,
    /// `--memory-aggregation-interval-count`.
    pub memory_aggregation_interval_count: Option<i64>,
    /// `--cpu-histogram-decay-half-life`, seconds.
    pub cpu_histogram_decay_half_life_seconds: Option<i64>,
    /// `--memory-histogram-decay-half-life`, seconds.
    pub memory_histogram_decay_half_life_seconds: Option<i64>,
    /// `--oom-bump-up-ratio`.
    pub oom_bump_up_ratio: Option<f64>,
    /// `--oom-min-bump-up-bytes`.
    pub oom_min_bump_up_bytes: Option<f64>,
    /// `--per-vpa-config` (default true).
    pub per_vpa_config: Option<bool>,
    /// `--node-headroom-percent` (default 10); caps apply only when the scenario lists `nodes`.
    pub node_headroom_percent: Option<u8>,
}

impl ControllerSettings {
    fn configs(&self) -> Result<(EstimatorConfig, AggregationsConfig), ReplayError> {
        Ok((self.estimator()?, self.aggregations()?))
    }

    fn node_fit(&self) -> Result<NodeFitConfig, ReplayError> {
        let headroom_percent = self
            .node_headroom_percent
            .unwrap_or(crate::DEFAULT_NODE_HEADROOM_PERCENT);
        if headroom_percent > 99 {
            return Err(invalid(
                "controller.nodeHeadroomPercent",
                format!("must be 0 to 99, got {headroom_percent}"),
            ));
        }
        Ok(NodeFitConfig { headroom_percent })
    }

    fn estimator(&self) -> Result<EstimatorConfig, ReplayError> {
        let mut e = EstimatorConfig::default();
        let percentiles = [
            ("targetPercentile", self.target_percentile),
            ("targetCpuPercentile", self.target_cpu_percentile),
            ("targetMemoryPercentile", self.target_memory_percentile),
            ("lowerBoundCpuPercentile", self.lower_bound_cpu_percentile),
            ("upperBoundCpuPercentile", self.upper_bound_cpu_percentile),
            (
                "lowerBoundMemoryPercentile",
                self.lower_bound_memory_percentile,
            ),
            (
                "upperBoundMemoryPercentile",
                self.upper_bound_memory_percentile,
            ),
        ];
        for (name, value) in percentiles {
            if let Some(p) = value
                && !(p > 0.0 && p <= 1.0)
            {
                return Err(invalid(
                    format!("controller.{name}"),
                    format!("must be in (0, 1], got {p}"),
                ));
            }
        }
        if let Some(p) = self.target_percentile {
            e.target_cpu_percentile = p;
            e.target_memory_percentile = p;
        }
        let set = |dst: &mut f64, v: Option<f64>| {
            if let Some(v) = v {
                *dst = v;
            }
        };
        set(&mut e.target_cpu_percentile, self.target_cpu_percentile);
        set(
            &mut e.target_memory_percentile,
            self.target_memory_percentile,
        );
        set(
            &mut e.lower_bound_cpu_percentile,
            self.lower_bound_cpu_percentile,
        );
        set(
            &mut e.upper_bound_cpu_percentile,
            self.upper_bound_cpu_percentile,
        );
        set(
            &mut e.lower_bound_memory_percentile,
            self.lower_bound_memory_percentile,
        );
        set(
            &mut e.upper_bound_memory_percentile,
            self.upper_bound_memory_percentile,
        );
        set(&mut e.safety_margin_fraction, self.safety_margin_fraction);
        set(&mut e.pod_min_cpu_millicores, self.pod_min_cpu_millicores);
        set(&mut e.pod_min_memory_mb, self.pod_min_memory_mb);
        for (name, v) in [
            ("safetyMarginFraction", e.safety_margin_fraction),
            ("podMinCpuMillicores", e.pod_min_cpu_millicores),
            ("podMinMemoryMb", e.pod_min_memory_mb),
        ] {
            if v.is_nan() || v < 0.0 {
                return Err(invalid(
                    format!("controller.{name}"),
                    format!("must be >= 0, got {v}"),
                ));
            }
        }
        for (name, v, dst) in [
            (
                "confidenceIntervalCpuSeconds",
                self.confidence_interval_cpu_seconds,
                &mut e.confidence_interval_cpu,
            ),
            (
                "confidenceIntervalMemorySeconds",
                self.confidence_interval_memory_seconds,
                &mut e.confidence_interval_memory,
            ),
        ] {
            match v {
                Some(s) if s <= 0 => {
                    return Err(invalid(
                        format!("controller.{name}"),
                        format!("must be > 0, got {s}"),
                    ));
                }
                Some(s) => {
                    plimsoll_replay::whole_seconds(s, format!("controller.{name}"))?;
                    *dst = SignedDuration::from_secs(s);
                }
                None => {}
            }
        }
        Ok(e)
    }

    fn aggregations(&self) -> Result<AggregationsConfig, ReplayError> {
        let mut a = AggregationsConfig::default();
        let secs = |name: &str, v: Option<i64>, dst: &mut SignedDuration| match v {
            Some(s) if s <= 0 => Err(invalid(
                format!("controller.{name}"),
                format!("must be > 0, got {s}"),
            )),
            Some(s) => {
                plimsoll_replay::whole_seconds(s, format!("controller.{name}"))?;
                *dst = SignedDuration::from_secs(s);
                Ok(())
            }
            None => Ok(()),
        };
        secs(
            "memoryAggregationIntervalSeconds",
            self.memory_aggregation_interval_seconds,
            &mut a.memory_aggregation_interval,
        )?;
        secs(
            "cpuHistogramDecayHalfLifeSeconds",
            self.cpu_histogram_decay_half_life_seconds,
            &mut a.cpu_histogram_decay_half_life,
        )?;
        secs(
            "memoryHistogramDecayHalfLifeSeconds",
            self.memory_histogram_decay_half_life_seconds,
            &mut a.memory_histogram_decay_half_life,
        )?;
        if let Some(n) = self.memory_aggregation_interval_count {
            if n < 1 {
                return Err(invalid(
                    "controller.memoryAggregationIntervalCount",
                    format!("must be >= 1, got {n}"),
                ));
            }
            a.memory_aggregation_interval_count = n;
        }
        if let Some(r) = self.oom_bump_up_ratio {
            if r.is_nan() || r < 1.0 {
                return Err(invalid(
                    "controller.oomBumpUpRatio",
                    format!("must be >= 1, got {r}"),
                ));
            }
            a.oom_bump_up_ratio = r;
        }
        if let Some(b) = self.oom_min_bump_up_bytes {
            if b.is_nan() || b < 0.0 {
                return Err(invalid(
                    "controller.oomMinBumpUpBytes",
                    format!("must be >= 0, got {b}"),
                ));
            }
            a.oom_min_bump_up_bytes = b;
        }
        Ok(a)
    }
}

#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ContainerSpec {
    name: String,
    #[serde(default)]
    requests: BTreeMap<String, Quantity>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Sample {
    t: f64,
    #[serde(default = "default_pod")]
    pod: String,
    container: String,
    #[serde(default)]
    cpu: Option<Quantity>,
    #[serde(default)]
    memory: Option<Quantity>,
    #[serde(default)]
    oom: bool,
}

fn default_pod() -> String {
    "pod".to_owned()
}

#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Expectation {
    t: f64,
    container: String,
    #[serde(default)]
    target: BTreeMap<String, Quantity>,
    #[serde(default)]
    lower_bound: BTreeMap<String, Quantity>,
    #[serde(default)]
    upper_bound: BTreeMap<String, Quantity>,
    #[serde(default)]
    tolerance_percent: f64,
}

/// A parsed, validated scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    vpa: VerticalPodAutoscaler,
    estimator: EstimatorConfig,
    aggregations: AggregationsConfig,
    containers: Vec<ContainerSpec>,
    samples: Vec<Sample>,
    checkpoints: Vec<VerticalPodAutoscalerCheckpoint>,
    at: Vec<f64>,
    expect: Vec<Expectation>,
    start: Timestamp,
    per_vpa: bool,
    node_fit: NodeFitConfig,
    nodes: Vec<Node>,
}

fn parse_value<T: DeserializeOwned>(
    value: serde_json::Value,
    path: &str,
) -> Result<T, ReplayError> {
    serde_json::from_value(value).map_err(|e| invalid(path, e))
}

fn seconds(t: f64, path: &str) -> Result<SignedDuration, ReplayError> {
    if !(t.is_finite() && t >= 0.0) {
        return Err(invalid(
            path,
            format!("must be a time >= 0 in seconds, got {t}"),
        ));
    }
    plimsoll_replay::seconds(t, path)?;
    SignedDuration::try_from_secs_f64(t).map_err(|e| invalid(path, e))
}

fn parse_samples(values: Vec<serde_json::Value>) -> Result<Vec<Sample>, ReplayError> {
    let mut samples = Vec::new();
    let mut last_t = 0.0;
    for (i, v) in values.into_iter().enumerate() {
        let path = format!("samples[{i}]");
        let s: Sample = parse_value(v, &path)?;
        seconds(s.t, &format!("{path}.t"))?;
        if s.t < last_t {
            return Err(invalid(
                format!("{path}.t"),
                "samples must be in time order",
            ));
        }
        last_t = s.t;
        if s.cpu.is_none() && s.memory.is_none() && !s.oom {
            return Err(invalid(&path, "needs cpu, memory or oom"));
        }
        for (field, q) in [("cpu", &s.cpu), ("memory", &s.memory)] {
            if q.is_some_and(|q| q.milli() < 0) {
                return Err(invalid(format!("{path}.{field}"), "must not be negative"));
            }
        }
        samples.push(s);
    }
    Ok(samples)
}

impl Scenario {
    /// Parses a scenario; `base_dir` resolves `checkpointIn`.
    pub fn parse(text: &str, base_dir: &Path) -> Result<Self, ReplayError> {
        let file: ScenarioFile =
            serde_saphyr::from_str(text).map_err(|e| invalid("(scenario)", e))?;
        if file.kind != "VerticalReplay" {
            return Err(invalid(
                "kind",
                format!("must be VerticalReplay, got {:?}", file.kind),
            ));
        }
        let vpa: VerticalPodAutoscaler = parse_value(file.vpa, "vpa")?;
        if let Err(errs) = vpa.spec.validate() {
            let first = errs.0.first().map_or_else(String::new, ToString::to_string);
            return Err(invalid(
                format!("vpa.{}", first.split(':').next().unwrap_or("spec")),
                errs,
            ));
        }
        let settings: ControllerSettings = match file.controller {
            Some(v) => parse_value(v, "controller")?,
            None => ControllerSettings::default(),
        };
        let (estimator, aggregations) = settings.configs()?;
        let node_fit = settings.node_fit()?;
        let nodes = file
            .nodes
            .into_iter()
            .enumerate()
            .map(|(i, v)| parse_value::<NodeSpec>(v, &format!("nodes[{i}]")).map(|n| n.node()))
            .collect::<Result<Vec<_>, _>>()?;
        let containers = file
            .containers
            .into_iter()
            .enumerate()
            .map(|(i, v)| parse_value::<ContainerSpec>(v, &format!("containers[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let samples = parse_samples(file.samples)?;
        let mut checkpoints = Vec::new();
        if let Some(file_name) = &file.checkpoint_in {
            let path = base_dir.join(file_name);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| invalid("checkpointIn", format!("{}: {e}", path.display())))?;
            checkpoints = serde_saphyr::from_multiple::<VerticalPodAutoscalerCheckpoint>(&text)
                .map_err(|e| invalid("checkpointIn", format!("{}: {e}", path.display())))?;
        }
        let mut at = Vec::new();
        for (i, &t) in file.at.iter().enumerate() {
            seconds(t, &format!("at[{i}]"))?;
            at.push(t);
        }
        at.sort_by(f64::total_cmp);
        at.dedup();
        let expect = file
            .expect
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                let path = format!("expect[{i}]");
                let e: Expectation = parse_value(v, &path)?;
                if !at.contains(&e.t) {
                    return Err(invalid(
                        format!("{path}.t"),
                        format!("{} is not one of the `at` times", e.t),
                    ));
                }
                Ok(e)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let start = file
            .start
            .or_else(|| {
                checkpoints
                    .iter()
                    .find_map(|c| c.status.as_ref()?.last_sample_start.as_ref().map(|t| t.0))
            })
            .map_or_else(
                || DEFAULT_START.parse().map_err(|e| invalid("start", e)),
                Ok,
            )?;
        Ok(Self {
            vpa,
            estimator,
            aggregations,
            containers,
            samples,
            checkpoints,
            at,
            expect,
            start,
            per_vpa: settings.per_vpa_config.unwrap_or(true),
            node_fit,
            nodes,
        })
    }
}

/// One recommendation line of the output.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OutputLine {
    /// Seconds since the scenario start.
    pub t: f64,
    /// Container name.
    pub container: String,
    /// Recommended requests.
    pub target: ResourceList,
    /// Lower bound.
    pub lower_bound: ResourceList,
    /// Upper bound.
    pub upper_bound: ResourceList,
    /// Target before the container policy.
    pub uncapped_target: ResourceList,
    /// History confidence in days.
    pub confidence: f64,
    /// Caps applied to the target.
    pub capped_by: Vec<String>,
}

/// Everything a replay produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Output lines, in time then container order.
    pub lines: Vec<OutputLine>,
    /// One message per `expect` that did not hold.
    pub misses: Vec<String>,
    /// The final state as checkpoints (one per container).
    pub checkpoints: Vec<VerticalPodAutoscalerCheckpoint>,
    /// Plot data per container and resource.
    pub traces: Vec<ResourceTrace>,
}

/// Number of extra evaluation points spread over the scenario for the plot.
const PLOT_POINTS: usize = 120;

/// The label every fake pod carries and the fake target selects.
const POD_LABEL: (&str, &str) = ("plimsoll.dev/replay", "target");

/// The scenario as the cluster the controller's loop reads: its VPA with a resolved target, one
/// pod per pod name in the samples (or one pod `pod`) running the scenario's containers, and,
/// batch by batch, the usage `metrics.k8s.io` would report and one eviction Event per OOM kill.
struct FakeCluster<'a> {
    scenario: &'a Scenario,
    vpa: VpaInput,
    pods: Vec<Arc<Pod>>,
    next_sample: usize,
}

/// The loop inputs for one batch of samples.
#[derive(Default)]
struct Batch {
    usage: Vec<PodMetrics>,
    events: Vec<Arc<Event>>,
    /// Time of the last sample in the batch, seconds since the start.
    last_t: f64,
}

impl<'a> FakeCluster<'a> {
    fn new(scenario: &'a Scenario) -> Self {
        let selector =
            Selector::parse(&format!("{}={}", POD_LABEL.0, POD_LABEL.1)).map_err(|e| e.to_string());
        // In order of first sample; the set keeps this linear in the samples.
        let mut seen = std::collections::BTreeSet::new();
        let mut names: Vec<&str> = Vec::new();
        for s in &scenario.samples {
            if seen.insert(s.pod.as_str()) {
                names.push(&s.pod);
            }
        }
        let default_pod = default_pod();
        if names.is_empty() {
            names.push(&default_pod);
        }
        let pods = names
            .into_iter()
            .map(|name| Arc::new(fake_pod(scenario, name)))
            .collect();
        Self {
            scenario,
            vpa: VpaInput {
                vpa: Arc::new(scenario.vpa.clone()),
                selector,
                conflict: None,
                joint: None,
            },
            pods,
            next_sample: 0,
        }
    }

    fn time(&self, t: f64) -> Timestamp {
        self.scenario.start + SignedDuration::try_from_secs_f64(t).unwrap_or_default()
    }

    /// True when a sample at or before `t` has not been handed out yet.
    fn has_samples_until(&self, t: f64) -> bool {
        self.scenario
            .samples
            .get(self.next_sample)
            .is_some_and(|s| s.t <= t)
    }

    /// The next samples at or before `t` as loop inputs. The loop takes usage before OOM kills,
    /// so a batch ends where a usage sample follows an OOM: every sample reaches the model in
    /// file order, as it would from a cluster polled that often.
    fn next_batch(&mut self, t: f64) -> Batch {
        let mut batch = Batch::default();
        while let Some(sample) = self.scenario.samples.get(self.next_sample) {
            if sample.t > t || (!sample.oom && !batch.events.is_empty()) {
                break;
            }
            let index = self.next_sample;
            self.next_sample += 1;
            batch.last_t = sample.t;
            let time = self.time(sample.t);
            if sample.oom {
                batch
                    .events
                    .push(Arc::new(self.oom_event(index, sample, time)));
                continue;
            }
            let usage = [("cpu", sample.cpu), ("memory", sample.memory)]
                .into_iter()
                .filter_map(|(name, q)| Some((name.to_owned(), q?)))
                .collect();
            batch.usage.push(PodMetrics {
                name: sample.pod.clone(),
                namespace: self.namespace(),
                labels: BTreeMap::new(),
                timestamp: time,
                window: std::time::Duration::ZERO,
                containers: vec![ContainerMetrics {
                    name: sample.container.clone(),
                    usage,
                }],
            });
        }
        batch
    }

    fn namespace(&self) -> String {
        self.scenario
            .vpa
            .metadata
            .namespace
            .clone()
            .unwrap_or_default()
    }

    /// The kubelet's memory-pressure eviction Event for an OOM sample: the container used the
    /// sample's memory, else its memory request.
    fn oom_event(&self, index: usize, sample: &Sample, time: Timestamp) -> Event {
        let request = self
            .scenario
            .containers
            .iter()
            .find(|c| c.name == sample.container)
            .and_then(|c| c.requests.get("memory"))
            .map_or(0, |q| clamp_i64(q.value()));
        let used = sample.memory.map_or(request, |m| clamp_i64(m.value()));
        let annotations = [
            ("offending_containers", sample.container.clone()),
            ("offending_containers_usage", used.to_string()),
            ("starved_resource", "memory".to_owned()),
        ];
        Event {
            metadata: ObjectMeta {
                uid: Some(format!("samples-{index}")),
                creation_timestamp: Some(Time(time)),
                annotations: Some(
                    annotations
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                kind: Some("Pod".to_owned()),
                namespace: self.scenario.vpa.metadata.namespace.clone(),
                name: Some(sample.pod.clone()),
                ..ObjectReference::default()
            },
            reason: Some("Evicted".to_owned()),
            ..Event::default()
        }
    }
}

/// A pod of the scenario's target: controlled by it (the loop's owner walk ends there),
/// labelled for the fake selector, running its containers.
fn fake_pod(scenario: &Scenario, name: &str) -> Pod {
    let target = &scenario.vpa.spec.target_ref;
    let controller = OwnerReference {
        api_version: target.api_version.clone().unwrap_or_default(),
        kind: target.kind.clone(),
        name: target.name.clone(),
        uid: format!("replay-{}", target.name),
        controller: Some(true),
        block_owner_deletion: None,
    };
    let containers = scenario
        .containers
        .iter()
        .map(|c| Container {
            name: c.name.clone(),
            resources: Some(ResourceRequirements {
                requests: Some(
                    c.requests
                        .iter()
                        .map(|(r, q)| (r.clone(), (*q).into()))
                        .collect(),
                ),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        })
        .collect();
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: scenario.vpa.metadata.namespace.clone(),
            labels: Some(BTreeMap::from([(
                POD_LABEL.0.to_owned(),
                POD_LABEL.1.to_owned(),
            )])),
            owner_references: Some(vec![controller]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers,
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// The controller's loop ([`Recommender::run_loop`]) over a [`FakeCluster`].
struct Replayer<'a> {
    cluster: FakeCluster<'a>,
    recommender: Recommender,
    key: VpaKey,
}

impl<'a> Replayer<'a> {
    /// A recommender restored from the scenario's `checkpointIn` as the controller restores at
    /// start (the checkpoints are taken as the scenario VPA's, whatever they name).
    fn new(scenario: &'a Scenario) -> Result<Self, ReplayError> {
        let cluster = FakeCluster::new(scenario);
        let key = key_of(&cluster.vpa.vpa);
        let mut recommender = Recommender::new(scenario.aggregations, scenario.estimator);
        recommender.set_per_vpa(scenario.per_vpa);
        if !scenario.nodes.is_empty() {
            recommender.set_node_fit(Some(scenario.node_fit));
            recommender.set_largest_node(LargestNode::of(&scenario.nodes));
        }
        let mut first_error = None;
        let mut checkpoints = Vec::new();
        for (i, cp) in scenario.checkpoints.iter().enumerate() {
            let path = format!("checkpointIn[{i}]");
            if cp.spec.container_name.is_none() {
                first_error.get_or_insert((
                    i,
                    invalid(format!("{path}.spec.containerName"), "is required"),
                ));
            } else if cp.status.is_none() {
                first_error.get_or_insert((i, invalid(format!("{path}.status"), "is required")));
            }
            let mut cp = cp.clone();
            cp.metadata.namespace = Some(key.0.clone());
            cp.spec.vpa_object_name = Some(key.1.clone());
            checkpoints.push(Arc::new(cp));
        }
        let served = HashSet::from([key.clone()]);
        let (_, errors) = recommender.restore(&checkpoints, &served, scenario.start);
        if let Some(e) = errors.into_iter().next()
            && first_error.as_ref().is_none_or(|(i, _)| e.index < *i)
        {
            first_error = Some((
                e.index,
                invalid(format!("checkpointIn[{}].status", e.index), e.source),
            ));
        }
        if let Some((_, e)) = first_error {
            return Err(e);
        }
        Ok(Self {
            cluster,
            recommender,
            key,
        })
    }

    /// Runs the loop once per batch of samples up to `t`, the last time at `t`, and returns the
    /// recommendation of that last loop.
    fn advance_to(&mut self, t: f64) -> VpaRecommendation {
        loop {
            let batch = self.cluster.next_batch(t);
            let more = self.cluster.has_samples_until(t);
            let now = self.cluster.time(if more { batch.last_t } else { t });
            let mut outcome = self.recommender.run_loop(
                std::slice::from_ref(&self.cluster.vpa),
                &self.cluster.pods,
                &NoOwners,
                &batch.usage,
                &batch.events,
                now,
            );
            if !more {
                return outcome
                    .recommendations
                    .pop()
                    .unwrap_or_else(|| VpaRecommendation {
                        key: self.key.clone(),
                        containers: Vec::new(),
                        unsupported: None,
                        joint: None,
                        joint_memory: None,
                    });
            }
        }
    }

    fn model(&self) -> Option<&VpaModel> {
        self.recommender.model(&self.key)
    }
}

fn clamp_i64(v: i128) -> i64 {
    v.clamp(0, i128::from(i64::MAX)) as i64
}

fn get(r: &ResourceAmounts, resource: Resource) -> i64 {
    r.get(&resource).copied().unwrap_or(0)
}

/// Runs `scenario`; `plot` also samples the recommendation over time for a plot.
pub fn simulate(scenario: &Scenario, plot: bool) -> Result<Outcome, ReplayError> {
    let mut replayer = Replayer::new(scenario)?;
    let end = scenario
        .at
        .last()
        .copied()
        .unwrap_or(0.0)
        .max(scenario.samples.last().map_or(0.0, |s| s.t));
    let mut times: BTreeSet<u64> = scenario.at.iter().map(|t| t.to_bits()).collect();
    if plot {
        for i in 0..=PLOT_POINTS {
            times.insert((end * i as f64 / PLOT_POINTS as f64).to_bits());
        }
    }
    let mut times: Vec<f64> = times.into_iter().map(f64::from_bits).collect();
    times.sort_by(f64::total_cmp);
    // The controller's first loop after start: it gives the pods' containers their aggregates.
    replayer.advance_to(0.0);
    let mut lines = Vec::new();
    let mut series: BTreeMap<(String, Resource), Vec<SeriesPoint>> = BTreeMap::new();
    for t in times {
        let recommendation = replayer.advance_to(t);
        if let Some(Unsupported::Policy(e)) = recommendation.unsupported {
            return Err(invalid("vpa.spec.resourcePolicy", e));
        }
        let recs = recommendation.containers;
        if plot {
            for r in &recs {
                for resource in [Resource::Cpu, Resource::Memory] {
                    if r.capped.target.contains_key(&resource) {
                        series
                            .entry((r.name.clone(), resource))
                            .or_default()
                            .push(SeriesPoint {
                                t,
                                target: get(&r.capped.target, resource),
                                lower: get(&r.capped.lower_bound, resource),
                                upper: get(&r.capped.upper_bound, resource),
                            });
                    }
                }
            }
        }
        if scenario.at.contains(&t) {
            lines.extend(recs.iter().map(|r| OutputLine {
                t,
                container: r.name.clone(),
                target: amounts_to_list(&r.capped.target),
                lower_bound: amounts_to_list(&r.capped.lower_bound),
                upper_bound: amounts_to_list(&r.capped.upper_bound),
                uncapped_target: amounts_to_list(&r.uncapped_target),
                confidence: r.confidence,
                capped_by: r.capped_by.clone(),
            }));
        }
    }
    replayer.advance_to(end);
    let misses = check_expectations(scenario, &lines);
    let now = scenario.start + SignedDuration::try_from_secs_f64(end).unwrap_or_default();
    let (namespace, vpa_name) = &replayer.key;
    let checkpoints = replayer
        .model()
        .map(|m| m.checkpoints(now))
        .unwrap_or_default()
        .into_iter()
        .map(|(container, status)| {
            let mut cp = checkpoint_object(namespace, vpa_name, &container, status);
            cp.metadata
                .namespace
                .clone_from(&scenario.vpa.metadata.namespace);
            cp
        })
        .collect();
    let traces = match (plot, replayer.model()) {
        (true, Some(model)) => traces(scenario, model, series),
        _ => Vec::new(),
    };
    Ok(Outcome {
        lines,
        misses,
        checkpoints,
        traces,
    })
}

fn traces(
    scenario: &Scenario,
    model: &VpaModel,
    mut series: BTreeMap<(String, Resource), Vec<SeriesPoint>>,
) -> Vec<ResourceTrace> {
    let mut out = Vec::new();
    for (name, aggregate) in &model.aggregates {
        for resource in [Resource::Cpu, Resource::Memory] {
            let Some(points) = series.remove(&(name.clone(), resource)) else {
                continue;
            };
            let usage = scenario
                .samples
                .iter()
                .filter(|s| &s.container == name)
                .filter_map(|s| {
                    let q = match resource {
                        Resource::Cpu => s.cpu.filter(|_| !s.oom).map(|q| q.milli()),
                        Resource::Memory => s.memory.map(|q| q.value()),
                    }?;
                    Some((s.t, clamp_i64(q)))
                })
                .collect();
            let h = match resource {
                Resource::Cpu => aggregate.cpu.histogram(),
                Resource::Memory => aggregate.memory.histogram(),
            };
            let histogram = h
                .buckets()
                .filter(|(_, w)| *w >= h.options().epsilon())
                .map(|(b, w)| {
                    (
                        h.options().bucket_start(b),
                        h.options().bucket_start(b + 1),
                        w,
                    )
                })
                .collect();
            out.push(ResourceTrace {
                container: name.clone(),
                resource,
                usage,
                series: points,
                histogram,
            });
        }
    }
    out
}

fn check_expectations(scenario: &Scenario, lines: &[OutputLine]) -> Vec<String> {
    let mut misses = Vec::new();
    for (i, e) in scenario.expect.iter().enumerate() {
        let step = scenario
            .at
            .iter()
            .position(|t| t.total_cmp(&e.t).is_eq())
            .unwrap_or(i);
        let Some(line) = lines
            .iter()
            .find(|l| l.t.total_cmp(&e.t).is_eq() && l.container == e.container)
        else {
            misses.push(format!(
                "step {step}: expected a recommendation for container {} at t={}, got none",
                e.container, e.t
            ));
            continue;
        };
        for (field, want, got) in [
            ("target", &e.target, &line.target),
            ("lowerBound", &e.lower_bound, &line.lower_bound),
            ("upperBound", &e.upper_bound, &line.upper_bound),
        ] {
            for (resource, want) in want {
                let got_q = got.get(resource).and_then(|q| Quantity::try_from(q).ok());
                let ok = got_q.is_some_and(|g| {
                    let (w, g) = (want.milli() as f64, g.milli() as f64);
                    (g - w).abs() <= w.abs() * e.tolerance_percent / 100.0
                });
                if !ok {
                    let got_text = got
                        .get(resource)
                        .map_or_else(|| "nothing".to_owned(), |q| q.0.clone());
                    misses.push(format!(
                        "step {step}: expected {field}.{resource} {want} (±{}%) for container {} at t={}, got {got_text}",
                        e.tolerance_percent, e.container, e.t
                    ));
                }
            }
        }
    }
    misses
}

/// The output lines as a fixed-width table.
pub fn table(lines: &[OutputLine]) -> String {
    let q = |l: &ResourceList, r: &str| l.get(r).map_or_else(|| "-".to_owned(), |q| q.0.clone());
    let mut rows = vec![[
        "T".to_owned(),
        "CONTAINER".to_owned(),
        "TARGET-CPU".to_owned(),
        "TARGET-MEM".to_owned(),
        "LOWER-CPU".to_owned(),
        "LOWER-MEM".to_owned(),
        "UPPER-CPU".to_owned(),
        "UPPER-MEM".to_owned(),
        "CONFIDENCE".to_owned(),
    ]];
    for l in lines {
        rows.push([
            format!("{}", l.t),
            l.container.clone(),
            q(&l.target, "cpu"),
            q(&l.target, "memory"),
            q(&l.lower_bound, "cpu"),
            q(&l.lower_bound, "memory"),
            q(&l.upper_bound, "cpu"),
            q(&l.upper_bound, "memory"),
            format!("{:.3}", l.confidence),
        ]);
    }
    let mut widths = [0usize; 9];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The checkpoints as a multi-document YAML manifest.
pub fn checkpoints_yaml(
    checkpoints: &[VerticalPodAutoscalerCheckpoint],
) -> Result<String, ReplayError> {
    let mut out = String::new();
    for cp in checkpoints {
        // Through JSON so the field order and null timestamps are exactly the API's.
        let value = serde_json::to_value(cp).map_err(|e| invalid("checkpoint", e))?;
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&value).map_err(|e| invalid("checkpoint", e))?);
    }
    Ok(out)
}

/// A replayed scenario with where `--checkpoint-out` wants its final state, as the harness takes it.
struct Replayed {
    outcome: Outcome,
    checkpoint_out: Option<PathBuf>,
}

impl plimsoll_replay::Outcome for Replayed {
    type Line<'a> = &'a OutputLine;

    fn lines(&self) -> Vec<&OutputLine> {
        self.outcome.lines.iter().collect()
    }

    fn table(&self) -> String {
        table(&self.outcome.lines)
    }

    fn misses(&self) -> &[String] {
        &self.outcome.misses
    }

    fn chart(&self) -> Option<Chart> {
        Some(crate::plot::chart(&self.outcome.traces))
    }

    fn extra_files(&self) -> Result<Vec<ExtraFile>, ReplayError> {
        let Some(path) = &self.checkpoint_out else {
            return Ok(Vec::new());
        };
        Ok(vec![ExtraFile {
            flag: "--checkpoint-out",
            path: path.clone(),
            contents: checkpoints_yaml(&self.outcome.checkpoints)?.into_bytes(),
        }])
    }
}

/// `vpa-recommender replay`: runs the scenario through the harness (output, plot, the
/// `--checkpoint-out` file, misses) and returns the exit status of docs/replay.md.
pub fn run(invocation: &Invocation<'_>, checkpoint_out: Option<&Path>) -> Status {
    plimsoll_replay::run(invocation, |source| {
        let scenario = Scenario::parse(&source.text, source.dir())?;
        Ok(Replayed {
            outcome: simulate(&scenario, source.plot)?,
            checkpoint_out: checkpoint_out.map(Path::to_path_buf),
        })
    })
}

/// Reads and parses the scenario at `path`.
pub fn load(path: &Path) -> Result<Scenario, ReplayError> {
    let text = std::fs::read_to_string(path).map_err(|e| ReplayError::read(path, e))?;
    Scenario::parse(&text, path.parent().unwrap_or(Path::new(".")))
}
