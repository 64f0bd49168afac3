//! `hpa-plus replay`: runs a `HorizontalReplay` scenario (docs/replay.md) through the same
//! [`evaluate`] the controller calls, with no cluster.
//!
//! Each step is one reconcile at `t` seconds after the scenario start. The workload's replicas
//! become the previous step's write (none under `dryRun`, `paused`, …) unless a step sets
//! `replicas`; the decision history (recommendations, scale events, watermark clocks) carries
//! over from step to step exactly as the controller keeps it in memory. Each step also keeps what
//! the controller writes into the object: the HPA+ status (with `status.memory`) or, for a native
//! HPA, the `plimsoll.dev/decision-memory` annotation. A step with `restart: true` starts from
//! nothing but that, through the same [`memory::resume`] a freshly started controller calls.
//!
//! The harness ([`plimsoll_replay`]) reads the file, prints the lines, writes the plot and maps
//! the result to the exit status: 0 when every `expect` held, 1 when one did not (each miss on
//! stderr as `step N: expected …, got …`, N the index into `steps`, from 0 as in `steps[N]`), 2
//! when the file is invalid (the message names the field).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use jiff::{SignedDuration, Timestamp};
use plimsoll_core::api::hpa_plus::{
    DecisionMemory, HorizontalPodAutoscalerPlus, HorizontalPodAutoscalerPlusSpec,
    HorizontalPodAutoscalerPlusStatus, NativeHpa,
};
use plimsoll_core::horizontal::conditions::ABLE_TO_SCALE;
use plimsoll_core::horizontal::evaluate::{EvaluationInput, Held, TuningWrite, evaluate};
use plimsoll_core::horizontal::load_history;
use plimsoll_core::horizontal::memory;
use plimsoll_core::horizontal::observation::{
    ContainerSample, DEFAULT_METRICS_WINDOW_SECONDS, Fetched, Observation, PodPhase, PodSample,
};
use plimsoll_core::horizontal::predictive::NATIVE_HISTORY_BYTES;
use plimsoll_core::horizontal::recording::{self, Line, Parsed, Recorded, Start};
use plimsoll_core::horizontal::rollout::Rollout;
use plimsoll_core::horizontal::scale_to_zero;
use plimsoll_core::horizontal::status::status_after;
use plimsoll_core::horizontal::{ControllerConfig, Decision, DecisionInput, History};
use plimsoll_core::quantity::Quantity;
use plimsoll_replay::plot::Chart;
use plimsoll_replay::{Outcome, ReplayError, expect_kind, miss};
use serde::{Deserialize, Deserializer, Serialize};

/// The instant a scenario's `t: 0` stands for (any fixed instant works; decisions only use
/// differences).
pub(crate) const EPOCH: &str = "2026-01-01T00:00:00Z";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Scenario {
    kind: String,
    autoscaler: serde_json::Value,
    #[serde(default)]
    controller: ControllerConfig,
    initial_replicas: i32,
    /// Extension: the autoscaler's status starts with `ScaledToZero=True` (KEP-2021), i.e. an
    /// `initialReplicas: 0` the autoscaler made and may wake; otherwise a zero is a person's.
    #[serde(default)]
    scaled_to_zero: bool,
    steps: Vec<StepSpec>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StepSpec {
    t: f64,
    #[serde(default)]
    replicas: Option<i32>,
    #[serde(default)]
    pods: Vec<PodSpec>,
    #[serde(default)]
    object_metrics: BTreeMap<String, Value>,
    #[serde(default)]
    external_metrics: BTreeMap<String, ExternalValue>,
    /// Extension: other autoscalers selecting the same pods (`AmbiguousSelector`).
    #[serde(default)]
    conflicting_autoscalers: Vec<String>,
    /// Extension: a `CronHorizontalPodAutoscaler` holding the target.
    #[serde(default)]
    held_by: Option<String>,
    /// Extension: the target is rolling out (for `pauseDuringRollout`).
    #[serde(default)]
    rolling_out: bool,
    /// The controller restarts before this step: it keeps only what the object carries.
    #[serde(default)]
    restart: bool,
    #[serde(default)]
    expect: Option<Expect>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PodSpec {
    name: String,
    #[serde(default)]
    count: Option<usize>,
    #[serde(default)]
    phase: Option<Phase>,
    #[serde(default)]
    ready: Option<bool>,
    #[serde(default)]
    deleting: bool,
    #[serde(default)]
    started_seconds_ago: Option<f64>,
    #[serde(default)]
    ready_since_seconds_ago: Option<f64>,
    #[serde(default)]
    containers: Vec<ContainerSpec>,
    /// Extension: init containers in order; `restartPolicy: Always` makes one a sidecar.
    #[serde(default)]
    init_containers: Vec<ContainerSpec>,
    /// Extension: pod-level `spec.resources`.
    #[serde(default)]
    resources: Option<Resources>,
    /// Extension: `spec.overhead`.
    #[serde(default)]
    overhead: BTreeMap<String, Amount>,
    #[serde(default)]
    metrics: BTreeMap<String, Value>,
}

/// `requests` and `limits`, as in a pod's `resources`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Resources {
    #[serde(default)]
    requests: BTreeMap<String, Amount>,
    #[serde(default)]
    limits: BTreeMap<String, Amount>,
}

#[derive(Deserialize, Clone, Copy)]
enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ContainerSpec {
    name: String,
    #[serde(default)]
    requests: BTreeMap<String, Amount>,
    #[serde(default)]
    limits: BTreeMap<String, Amount>,
    #[serde(default)]
    usage: BTreeMap<String, Value>,
    /// Extension, init containers only: `Always` for a sidecar.
    #[serde(default)]
    restart_policy: Option<String>,
    /// Extension: `status.containerStatuses[].allocatedResources`.
    #[serde(default)]
    allocated: Option<BTreeMap<String, Amount>>,
    /// Extension: `status.containerStatuses[].resources` (what the container runs with).
    #[serde(default)]
    actual: Option<Resources>,
}

/// A quantity written as a number or in Kubernetes notation.
#[derive(Deserialize, Clone)]
#[serde(untagged)]
pub(crate) enum Amount {
    Number(f64),
    Text(String),
}

/// A metric value, or a failed fetch.
#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum Value {
    Failed { error: String },
    Amount(Amount),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ExternalValue {
    Many(Vec<Value>),
    One(Value),
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Expect {
    #[serde(default)]
    replicas: Option<i32>,
    #[serde(default)]
    desired_replicas: Option<i32>,
    #[serde(default, deserialize_with = "present")]
    limited_by: LimitExpectation,
    #[serde(default)]
    able_to_scale: Option<bool>,
}

/// `limitedBy` in an expectation: absent (anything goes) or a value, where `null` means none.
#[derive(Default)]
enum LimitExpectation {
    #[default]
    Any,
    Exactly(Option<String>),
}

/// Distinguishes `limitedBy: null` (expect none) from an absent key (no expectation).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<LimitExpectation, D::Error> {
    Option::<String>::deserialize(d).map(LimitExpectation::Exactly)
}

pub(crate) fn milli(a: &Amount, field: &str) -> Result<i64, String> {
    let text = match a {
        Amount::Number(n) => format!("{n}"),
        Amount::Text(s) => s.clone(),
    };
    let q = Quantity::parse(&text).map_err(|e| format!("{field}: {e}"))?;
    i64::try_from(q.milli()).map_err(|_| format!("{field}: {text:?} is out of range"))
}

fn fetched(v: &Value, field: &str) -> Result<Fetched<i64>, String> {
    match v {
        Value::Failed { error } => Ok(Err(error.clone())),
        Value::Amount(a) => milli(a, field).map(Ok),
    }
}

pub use crate::plot::StepLine;

/// The outcome of a whole scenario, or of a recording.
#[derive(Clone, Debug)]
pub struct Replay {
    /// One line per step (per evaluation of a recording).
    pub steps: Vec<StepLine>,
    /// Every expectation that did not hold, as `step N: expected …, got …`; for a recording,
    /// every decision that differs, as `record N: recorded …, replayed …`.
    pub misses: Vec<String>,
    /// With `--set`: what the change did.
    pub what_if: Option<WhatIf>,
    /// Lines of a recording that were skipped (partly written).
    pub warnings: Vec<String>,
}

/// Parses the autoscaler manifest of a scenario (HPA `autoscaling/v2` or HPA+).
/// Only the autoscaler, typed: parsing the file again this way gives a type error with its line,
/// column and field instead of serde_json's bare message.
#[derive(Deserialize)]
struct Located<A> {
    #[allow(dead_code)] // parsed for its error only
    autoscaler: A,
}

fn typed<A: serde::de::DeserializeOwned>(v: serde_json::Value, text: &str) -> Result<A, String> {
    serde_json::from_value(v).map_err(|e| match serde_saphyr::from_str::<Located<A>>(text) {
        Err(located) => format!("autoscaler: {located}"),
        Ok(_) => format!("autoscaler: {e}"),
    })
}

/// The scenario's autoscaler as the controller sees it: its spec and where its memory goes.
fn autoscaler(
    v: serde_json::Value,
    text: &str,
) -> Result<(HorizontalPodAutoscalerPlusSpec, Written), String> {
    let api_version = v.get("apiVersion").and_then(|a| a.as_str()).unwrap_or("");
    let kind = v.get("kind").and_then(|a| a.as_str()).unwrap_or("");
    let found = match (api_version, kind) {
        ("autoscaling/v2", "HorizontalPodAutoscaler") => {
            let hpa: NativeHpa = typed(v, text)?;
            let spec = HorizontalPodAutoscalerPlus::from_native_object(&hpa)
                .map_err(|e| format!("autoscaler: {e}"))?
                .spec;
            (spec, Written::Annotations(BTreeMap::new()))
        }
        ("autoscaling.plimsoll.dev/v1alpha1", "HorizontalPodAutoscalerPlus") => {
            let plus: HorizontalPodAutoscalerPlus = typed(v, text)?;
            (plus.spec, Written::Status(None))
        }
        _ => {
            return Err(format!(
                "autoscaler: apiVersion/kind {api_version:?}/{kind:?} is neither \
                 autoscaling/v2 HorizontalPodAutoscaler nor \
                 autoscaling.plimsoll.dev/v1alpha1 HorizontalPodAutoscalerPlus"
            ));
        }
    };
    found.0.validate().map_err(|errs| {
        errs.0
            .iter()
            .map(|e| format!("autoscaler.{e}"))
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    Ok(found)
}

/// The scenario's autoscaler spec, validated, as [`autoscaler`] reads it, and the bytes its
/// predictive history may take ([`Written::history_bytes`]).
pub(crate) fn autoscaler_spec(
    v: serde_json::Value,
    text: &str,
) -> Result<(HorizontalPodAutoscalerPlusSpec, Option<usize>), String> {
    autoscaler(v, text).map(|(spec, written)| (spec, written.history_bytes()))
}

/// What the controller has written into the object by the end of a step: where a restarted
/// controller finds the decision memory.
enum Written {
    /// An HPA+: its status.
    Status(Option<Box<HorizontalPodAutoscalerPlusStatus>>),
    /// A native HPA: its annotations.
    Annotations(BTreeMap<String, String>),
}

impl Written {
    /// The most bytes the predictive history may take where it is written: a native HPA's
    /// annotation, as in the controller.
    fn history_bytes(&self) -> Option<usize> {
        matches!(self, Self::Annotations(_)).then_some(NATIVE_HISTORY_BYTES)
    }

    /// The same for the tuning history.
    fn tuning_history_bytes(&self) -> Option<usize> {
        matches!(self, Self::Annotations(_)).then_some(load_history::NATIVE_HISTORY_BYTES)
    }

    /// The stored memory, read as the controller reads it.
    fn stored(&self) -> Option<DecisionMemory> {
        match self {
            Self::Status(status) => status.as_ref().and_then(|s| s.memory.clone()),
            Self::Annotations(annotations) => memory::from_annotations(annotations).ok().flatten(),
        }
    }

    /// Keeps what the controller writes after decision `d`, whose memory is `stored`: as the
    /// controller, nothing when nothing changed but times ([`crate::status::changed`]).
    fn write(
        &mut self,
        spec: &HorizontalPodAutoscalerPlusSpec,
        d: &Decision,
        stored: DecisionMemory,
        now: Timestamp,
    ) {
        match self {
            Self::Status(status) => {
                let mut new =
                    status_after(spec, status.as_deref(), d, None, d.scale_to.is_some(), now);
                new.memory = Some(stored);
                if crate::status::changed(status.as_deref(), &new) {
                    *status = Some(Box::new(new));
                }
            }
            Self::Annotations(annotations) => {
                let unchanged = memory::from_annotations(annotations)
                    .ok()
                    .flatten()
                    .is_some_and(|old| memory::same_but_newest_time(&old, &stored));
                if !unchanged {
                    annotations.insert(
                        memory::ANNOTATION.to_owned(),
                        memory::annotation_value(&stored),
                    );
                }
            }
        }
    }
}

/// Quantities of one map, milli-units; `field` names the map in errors.
pub(crate) fn amounts(
    map: &BTreeMap<String, Amount>,
    field: &str,
) -> Result<BTreeMap<String, i64>, String> {
    map.iter()
        .map(|(r, a)| Ok((r.clone(), milli(a, &format!("{field}.{r}"))?)))
        .collect()
}

/// One container of a pod; `init` for an entry of `initContainers`.
fn container(c: &ContainerSpec, field: &str, init: bool) -> Result<ContainerSample, String> {
    let sidecar = match (c.restart_policy.as_deref(), init) {
        (None, _) => false,
        (Some(p), true) => p == "Always",
        (Some(_), false) => {
            return Err(format!(
                "{field}.restartPolicy: only init containers have one here"
            ));
        }
    };
    let requests = amounts(&c.requests, &format!("{field}.requests"))?;
    let limits = amounts(&c.limits, &format!("{field}.limits"))?;
    let mut usage = BTreeMap::new();
    for (r, v) in &c.usage {
        usage.insert(r.clone(), fetched(v, &format!("{field}.usage.{r}"))?);
    }
    let actual = c.actual.as_ref();
    Ok(ContainerSample {
        name: c.name.clone(),
        requests,
        limits,
        usage,
        sidecar,
        allocated: c
            .allocated
            .as_ref()
            .map(|m| amounts(m, &format!("{field}.allocated")))
            .transpose()?,
        actual_requests: actual
            .map(|a| amounts(&a.requests, &format!("{field}.actual.requests")))
            .transpose()?,
        actual_limits: actual
            .map(|a| amounts(&a.limits, &format!("{field}.actual.limits")))
            .transpose()?,
    })
}

/// The text of a check's error, for the builders here that return their field's message (the
/// caller wraps it as an invalid scenario once).
fn message(e: ReplayError) -> String {
    match e {
        ReplayError::Invalid(message) => message,
        other => other.to_string(),
    }
}

/// One pod entry of a step, before `count` copies it.
fn pod(p: &PodSpec, field: &str, now: Timestamp) -> Result<PodSample, String> {
    let age = |s: f64, name: &str| {
        plimsoll_replay::seconds(s, format!("{field}.{name}")).map_err(message)
    };
    let started = age(p.started_seconds_ago.unwrap_or(3600.0), "startedSecondsAgo")?;
    let ready_since = age(
        p.ready_since_seconds_ago.unwrap_or(started),
        "readySinceSecondsAgo",
    )?;
    let ago = |s: f64| now - SignedDuration::from_secs_f64(s);
    let list = |cs: &[ContainerSpec], key: &str, init: bool| {
        cs.iter()
            .enumerate()
            .map(|(k, c)| container(c, &format!("{field}.{key}[{k}]"), init))
            .collect::<Result<Vec<_>, String>>()
    };
    let containers = list(&p.containers, "containers", false)?;
    let init_containers = list(&p.init_containers, "initContainers", true)?;
    let mut metrics = BTreeMap::new();
    for (m, v) in &p.metrics {
        metrics.insert(m.clone(), fetched(v, &format!("{field}.metrics.{m}"))?);
    }
    let resources = p.resources.as_ref();
    Ok(PodSample {
        name: p.name.clone(),
        phase: match p.phase.unwrap_or(Phase::Running) {
            Phase::Pending => PodPhase::Pending,
            Phase::Running => PodPhase::Running,
            Phase::Succeeded => PodPhase::Succeeded,
            Phase::Failed => PodPhase::Failed,
        },
        ready: Some(p.ready.unwrap_or(true)),
        deleting: p.deleting,
        start_time: Some(ago(started)),
        ready_transition_time: Some(ago(ready_since)),
        metrics_timestamp: Some(now),
        metrics_window_seconds: DEFAULT_METRICS_WINDOW_SECONDS,
        containers,
        init_containers,
        pod_requests: resources
            .map(|r| amounts(&r.requests, &format!("{field}.resources.requests")))
            .transpose()?
            .unwrap_or_default(),
        pod_limits: resources
            .map(|r| amounts(&r.limits, &format!("{field}.resources.limits")))
            .transpose()?
            .unwrap_or_default(),
        overhead: amounts(&p.overhead, &format!("{field}.overhead"))?,
        metrics,
    })
}

fn pods(step: &StepSpec, i: usize, now: Timestamp) -> Result<Vec<PodSample>, String> {
    let mut out = Vec::new();
    for (j, p) in step.pods.iter().enumerate() {
        let field = format!("steps[{i}].pods[{j}]");
        let template = pod(p, &field, now)?;
        plimsoll_replay::pod_count(out.len(), p.count.unwrap_or(1), format!("{field}.count"))
            .map_err(message)?;
        match p.count {
            None => out.push(template),
            Some(n) => {
                for k in 1..=n {
                    let mut pod = template.clone();
                    pod.name = format!("{}-{k}", p.name);
                    out.push(pod);
                }
            }
        }
    }
    Ok(out)
}

fn observation(
    step: &StepSpec,
    i: usize,
    replicas: i32,
    now: Timestamp,
) -> Result<Observation, String> {
    let mut obs = Observation {
        current_replicas: replicas,
        pods: pods(step, i, now)?,
        conflicting_autoscalers: step.conflicting_autoscalers.clone(),
        held_by: step.held_by.clone(),
        ..Observation::default()
    };
    // A scenario's workload follows the rollout conventions: settled unless the step says it is
    // rolling out (`None` would mean a status of unknown shape).
    let rollout = if step.rolling_out {
        Rollout::InProgress("the scenario's step is rolling out".to_owned())
    } else {
        Rollout::Settled
    };
    obs.rollout = rollout.state(replicas);
    for (k, v) in &step.object_metrics {
        obs.object_metrics.insert(
            k.clone(),
            fetched(v, &format!("steps[{i}].objectMetrics.{k}"))?,
        );
    }
    for (k, v) in &step.external_metrics {
        let field = format!("steps[{i}].externalMetrics.{k}");
        let values = match v {
            ExternalValue::One(v) => vec![v.clone()],
            ExternalValue::Many(vs) => vs.clone(),
        };
        let mut sum: Fetched<Vec<i64>> = Ok(Vec::new());
        for v in &values {
            match (fetched(v, &field)?, &mut sum) {
                (Ok(x), Ok(list)) => list.push(x),
                (Err(e), Ok(_)) => sum = Err(e),
                (_, Err(_)) => {}
            }
        }
        obs.external_metrics.insert(k.clone(), sum);
    }
    Ok(obs)
}

/// Replays scenario text (YAML or JSON). `Err` means the file is invalid (exit 2).
pub fn replay_str(text: &str) -> Result<Replay, ReplayError> {
    replay_str_with(text, &[])
}

/// [`replay_str`] with the autoscaler changed by `sets` first (`--set`).
pub fn replay_str_with(text: &str, sets: &[Set]) -> Result<Replay, ReplayError> {
    let scenario: Scenario = plimsoll_replay::parse(text)?;
    expect_kind(&scenario.kind, "HorizontalReplay")?;
    let mut manifest = scenario.autoscaler;
    apply_sets(&mut manifest, sets)?;
    let (spec, mut written) = autoscaler(manifest, text).map_err(|e| invalid_set(sets, e))?;
    let epoch: Timestamp = EPOCH
        .parse()
        .map_err(|e| ReplayError::Invalid(format!("internal epoch: {e}")))?;
    // The scenario starts from an empty history (not the controller's first-sight
    // recommendation of the current count): the upstream vectors it replays do.
    let mut held = Held {
        history: Some(History::default()),
        ..Held::default()
    };
    let tuning = spec.min_replicas_tuning.clone().unwrap_or_default();
    let mut replicas = scenario.initial_replicas;
    // The `ScaledToZero` condition the status carries, as the decisions write it.
    let mut scaled_to_zero = scenario.scaled_to_zero;
    let mut last_t = f64::NEG_INFINITY;
    let mut previous: Option<Timestamp> = None;
    let mut lines = Vec::new();
    let mut misses = Vec::new();
    for (i, step) in scenario.steps.iter().enumerate() {
        if !step.t.is_finite() || step.t < last_t {
            return Err(ReplayError::invalid(
                format!("steps[{i}].t"),
                "must be a number not before the previous step's t",
            ));
        }
        plimsoll_replay::seconds(step.t, format_args!("steps[{i}].t"))?;
        last_t = step.t;
        if let Some(r) = step.replicas {
            replicas = r;
        }
        let now = epoch + SignedDuration::from_secs_f64(step.t);
        if step.restart {
            // A restarted controller holds nothing; the one before it evaluated last at the
            // previous step, so the object's memory stood until then.
            let until = previous.unwrap_or(now);
            let resumed = memory::resume(None, written.stored().as_ref(), replicas, now, until);
            held = Held {
                history: Some(resumed.history),
                ..Held::default()
            };
        }
        previous = Some(now);
        let mut obs = observation(step, i, replicas, now).map_err(ReplayError::Invalid)?;
        obs.scaled_to_zero = scaled_to_zero;
        let mut evaluation = evaluate(
            &EvaluationInput {
                spec: &spec,
                observed: &obs,
                stored_memory: None,
                config: &scenario.controller,
                tuning: &tuning,
                held_by: None,
                excluded_by: None,
                tuning_write: TuningWrite::Allowed,
                startup_seconds: None,
                history_bytes: written.history_bytes(),
                tuning_history_bytes: written.tuning_history_bytes(),
                now,
            },
            std::mem::take(&mut held),
        );
        let after = match evaluation.decision.scale_to {
            Some(to) => {
                evaluation.scaled(now, replicas, to);
                to
            }
            None => replicas,
        };
        // As the controller: keep what a successor would read back, and write it.
        let stored = evaluation.store_memory();
        let used = evaluation.spec(&spec);
        let d = evaluation.decision;
        if let Some(z) = scale_to_zero::written(&d.conditions) {
            scaled_to_zero = z;
        }
        written.write(&used, &d, stored, now);
        held = evaluation.held;
        let line = step_line(step.t, &d, after);
        if let Some(e) = &step.expect {
            check(i, e, &line, &mut misses);
        }
        lines.push(line);
        replicas = after;
    }
    Ok(Replay {
        steps: lines,
        misses,
        what_if: None,
        warnings: Vec::new(),
    })
}

/// The output line of decision `d` at `t`, the workload at `after` replicas after it.
fn step_line(t: f64, d: &Decision, after: i32) -> StepLine {
    StepLine {
        t,
        current_replicas: d.current_replicas,
        desired_replicas: d.desired_replicas,
        replicas: after,
        recommended_replicas: d.recommended_replicas,
        proposals: d.proposals.clone(),
        limited_by: d.limited_by.map(|l| l.as_str().to_owned()),
        reason: d.reason.clone(),
        countdowns: d.countdowns.clone(),
        able_to_scale: d
            .conditions
            .iter()
            .find(|c| c.type_ == ABLE_TO_SCALE)
            .is_none_or(|c| c.status),
    }
}

/// One `--set PATH=VALUE`: a field of the autoscaler object and its new value.
#[derive(Clone, Debug, PartialEq)]
pub struct Set {
    /// The dotted path ([`recording::set_field`]).
    pub path: String,
    /// The value, parsed as YAML.
    pub value: serde_json::Value,
}

impl Set {
    /// Reads `PATH=VALUE`; VALUE is YAML (`60`, `Max`, `{type: Pods, value: 4}`).
    ///
    /// # Errors
    /// Without `=`, with an empty path, or a VALUE that is not YAML (exit 2).
    pub fn parse(arg: &str) -> Result<Self, ReplayError> {
        let Some((path, value)) = arg.split_once('=') else {
            return Err(ReplayError::invalid(
                format!("--set {arg}"),
                "must be PATH=VALUE",
            ));
        };
        let path = path.trim();
        if path.is_empty() {
            return Err(ReplayError::invalid(
                format!("--set {arg}"),
                "the path is empty",
            ));
        }
        let value: serde_json::Value = if value.trim().is_empty() {
            serde_json::Value::Null
        } else {
            plimsoll_replay::parse(value)
                .map_err(|e| ReplayError::invalid(format!("--set {path}"), e))?
        };
        Ok(Self {
            path: path.to_owned(),
            value,
        })
    }
}

impl std::fmt::Display for Set {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.path, self.value)
    }
}

/// `manifest` with every `--set` applied, in order.
fn apply_sets(manifest: &mut serde_json::Value, sets: &[Set]) -> Result<(), ReplayError> {
    for set in sets {
        recording::set_field(manifest, &set.path, set.value.clone())
            .map_err(|e| ReplayError::invalid(format!("--set {}", set.path), e))?;
    }
    Ok(())
}

/// A spec that does not read or validate: with `--set`, the sets are named first.
fn invalid_set(sets: &[Set], message: String) -> ReplayError {
    if sets.is_empty() {
        ReplayError::Invalid(message)
    } else {
        let names: Vec<&str> = sets.iter().map(|s| s.path.as_str()).collect();
        ReplayError::Invalid(format!("--set {}: {message}", names.join(", ")))
    }
}

/// What a `--set` changed against the decisions it is compared with (recorded, or the
/// scenario's without `--set`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WhatIf {
    /// The `--set`s, as given.
    pub sets: Vec<String>,
    /// Evaluations compared.
    pub decisions: usize,
    /// Evaluations whose decision differs.
    pub changed: usize,
    /// The first evaluation that differs.
    pub first: Option<FirstChange>,
    /// Replicas after each evaluation times the seconds to the next, summed: before.
    pub replica_seconds_before: f64,
    /// The same, with the `--set`.
    pub replica_seconds_after: f64,
}

impl std::fmt::Display for WhatIf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "what-if --set {}: {} of {} decisions changed",
            self.sets.join(" --set "),
            self.changed,
            self.decisions
        )?;
        if let Some(c) = &self.first {
            write!(
                f,
                "; first at {} (t={}): was {}, now {}",
                c.at, c.t, c.before, c.after
            )?;
        }
        write!(
            f,
            "; replica-seconds {:.0} -> {:.0}",
            self.replica_seconds_before, self.replica_seconds_after
        )
    }
}

/// The first evaluation a `--set` changed.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FirstChange {
    /// `record N` or `step N`.
    pub at: String,
    /// N.
    pub index: usize,
    /// Its `t`.
    pub t: f64,
    /// The decision before (desired, replicas after, limited by).
    pub before: String,
    /// The decision with the `--set`.
    pub after: String,
}

/// Replicas after each evaluation times the seconds until the next (the last counts nothing).
fn replica_seconds(steps: &[StepLine]) -> f64 {
    steps
        .windows(2)
        .map(|w| f64::from(w[0].replicas) * (w[1].t - w[0].t))
        .sum()
}

/// What changed from `before` to `after` (the same evaluations), the `label` of an index
/// (`record`, `step`).
fn what_if(sets: &[Set], label: &str, before: &[StepLine], after: &[StepLine]) -> WhatIf {
    let show = |s: &StepLine| {
        format!(
            "desired {}, replicas {}, limited by {}",
            s.desired_replicas,
            s.replicas,
            s.limited_by.as_deref().unwrap_or("-")
        )
    };
    let differs = |a: &StepLine, b: &StepLine| {
        a.desired_replicas != b.desired_replicas
            || a.replicas != b.replicas
            || a.limited_by != b.limited_by
    };
    let changed: Vec<usize> = before
        .iter()
        .zip(after)
        .enumerate()
        .filter(|(_, (a, b))| differs(a, b))
        .map(|(i, _)| i)
        .collect();
    WhatIf {
        sets: sets.iter().map(ToString::to_string).collect(),
        decisions: after.len(),
        changed: changed.len(),
        first: changed.first().map(|&i| FirstChange {
            at: format!("{label} {i}"),
            index: i,
            t: after[i].t,
            before: show(&before[i]),
            after: show(&after[i]),
        }),
        replica_seconds_before: replica_seconds(before),
        replica_seconds_after: replica_seconds(after),
    }
}

/// A scenario with `--set`: the changed replay, and what changed against the scenario's own
/// (its `expect`s are not checked: the differences are the answer).
pub fn what_if_str(text: &str, sets: &[Set]) -> Result<Replay, ReplayError> {
    let before = replay_str(text)?;
    let mut after = replay_str_with(text, sets)?;
    after.misses.clear();
    after.what_if = Some(what_if(sets, "step", &before.steps, &after.steps));
    Ok(after)
}

/// A recording's autoscaler with `sets` applied, as the controller reads it; `line` names the
/// line in errors.
fn recorded_spec(
    manifest: &serde_json::Value,
    sets: &[Set],
    line: usize,
) -> Result<HorizontalPodAutoscalerPlusSpec, ReplayError> {
    let mut manifest = manifest.clone();
    apply_sets(&mut manifest, sets)?;
    autoscaler_spec(manifest, "")
        .map(|(spec, _)| spec)
        .map_err(|e| invalid_set(sets, format!("line {line}: {e}")))
}

/// Replays a recording (already read, [`recording::parse`]) through the same step as the
/// controller: each evaluation's observation, decided with the memory carried over as the
/// controller carries it (from the object's stored memory after a `firstSight` header, the held
/// memory after a `held` one). Without `sets`, each decision that differs from the recorded one
/// is a miss `record N: recorded X, replayed Y` (N counts evaluations from 0); with `sets`,
/// [`Replay::what_if`] says what changed and there are no misses.
pub fn replay_recording(parsed: &Parsed, sets: &[Set]) -> Result<Replay, ReplayError> {
    let mut spec: Option<HorizontalPodAutoscalerPlusSpec> = None;
    let mut config = ControllerConfig::default();
    let mut epoch: Option<Timestamp> = None;
    let mut first_sight: Option<Option<DecisionMemory>> = None;
    let mut history: Option<History> = None;
    let mut steps = Vec::new();
    let mut recorded = Vec::new();
    let mut misses = Vec::new();
    for (n, line) in &parsed.lines {
        match line {
            Line::Header(h) => {
                spec = Some(recorded_spec(&h.autoscaler, sets, *n)?);
                config = h.controller.clone();
                epoch.get_or_insert(h.at);
                match h.start {
                    Start::FirstSight => first_sight = Some(h.stored.clone()),
                    Start::Held => {
                        first_sight = None;
                        history = Some(h.stored.as_ref().map(memory::restore).unwrap_or_default());
                    }
                }
            }
            Line::Spec(s) => spec = Some(recorded_spec(&s.autoscaler, sets, *n)?),
            Line::Evaluation(e) => {
                let Some(spec) = spec.as_ref() else {
                    return Err(ReplayError::Invalid(format!(
                        "line {n}: an evaluation before any header"
                    )));
                };
                let current = e.observed.current_replicas;
                let held = match (first_sight.take(), history.take()) {
                    (Some(stored), _) => {
                        memory::resume(None, stored.as_ref(), current, e.at, e.at).history
                    }
                    (None, Some(held)) => held,
                    (None, None) => memory::resume(None, None, current, e.at, e.at).history,
                };
                let tuned;
                let used = match e.tuned_min_replicas {
                    Some(min) => {
                        tuned = HorizontalPodAutoscalerPlusSpec {
                            min_replicas: Some(min),
                            ..spec.clone()
                        };
                        &tuned
                    }
                    None => spec,
                };
                // The one step of an evaluation: `plimsoll_core::horizontal::evaluate` takes its
                // place when it lands.
                let stepped = recording::step(
                    &DecisionInput {
                        spec: used,
                        observed: &e.observed,
                        history: &held,
                        config: &config,
                        now: e.at,
                    },
                    |d| recording::raise(d, e.predicted.as_ref()),
                );
                history = Some(stepped.history);
                let d = stepped.decision;
                let start = epoch.unwrap_or(e.at);
                let t = e.at.duration_since(start).as_secs_f64();
                let index = steps.len();
                let replayed = Recorded::of(&d);
                if sets.is_empty() && replayed != e.decision {
                    misses.push(format!(
                        "record {index}: recorded {}, replayed {replayed}",
                        e.decision
                    ));
                }
                recorded.push(StepLine {
                    t,
                    current_replicas: current,
                    desired_replicas: e.decision.desired_replicas,
                    replicas: e.decision.scale_to.unwrap_or(current),
                    recommended_replicas: None,
                    proposals: Vec::new(),
                    limited_by: e.decision.limited_by.map(|l| l.as_str().to_owned()),
                    reason: e.decision.reason.clone(),
                    countdowns: Vec::new(),
                    able_to_scale: true,
                });
                steps.push(step_line(t, &d, d.scale_to.unwrap_or(current)));
            }
        }
    }
    let what_if = (!sets.is_empty()).then(|| what_if(sets, "record", &recorded, &steps));
    Ok(Replay {
        steps,
        misses,
        what_if,
        warnings: parsed.warnings.clone(),
    })
}

/// The files of a recording in the order they were written: given `FILE`, the rotated
/// `FILE.N` … `FILE.1` that exist, then `FILE`; given any other name, just it.
pub fn recording_files(path: &Path) -> Vec<PathBuf> {
    let mut older = Vec::new();
    for k in 1.. {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".{k}"));
        let rotated = PathBuf::from(name);
        if !rotated.is_file() {
            break;
        }
        older.push(rotated);
    }
    older.reverse();
    older.push(path.to_owned());
    older
}

/// Reads and replays the recording at `path` with its rotated files ([`recording_files`]);
/// `first` is the text of `path` when it was read already.
pub fn replay_recording_files(
    path: &Path,
    first: Option<&str>,
    sets: &[Set],
) -> Result<Replay, ReplayError> {
    let mut all = Parsed::default();
    for file in recording_files(path) {
        let text = match first {
            Some(text) if file == path => text.to_owned(),
            _ => std::fs::read_to_string(&file).map_err(|e| ReplayError::read(&file, e))?,
        };
        let parsed = recording::parse(&text)
            .map_err(|e| ReplayError::Invalid(format!("{}: {e}", file.display())))?;
        all.lines.extend(parsed.lines);
        all.warnings.extend(
            parsed
                .warnings
                .into_iter()
                .map(|w| format!("{}: {w}", file.display())),
        );
    }
    replay_recording(&all, sets)
}

fn check(n: usize, e: &Expect, line: &StepLine, misses: &mut Vec<String>) {
    let t = line.t;
    if let Some(want) = e.replicas
        && want != line.replicas
    {
        misses.push(miss(
            n,
            format!("replicas {want}"),
            format!("{} (t={t}; {})", line.replicas, line.reason),
        ));
    }
    if let Some(want) = e.desired_replicas
        && want != line.desired_replicas
    {
        misses.push(miss(
            n,
            format!("desiredReplicas {want}"),
            format!("{} (t={t}; {})", line.desired_replicas, line.reason),
        ));
    }
    if let LimitExpectation::Exactly(want) = &e.limited_by
        && *want != line.limited_by
    {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "null".into());
        misses.push(miss(
            n,
            format!("limitedBy {}", show(want)),
            format!("{} (t={t})", show(&line.limited_by)),
        ));
    }
    if let Some(want) = e.able_to_scale
        && want != line.able_to_scale
    {
        misses.push(miss(
            n,
            format!("ableToScale {want}"),
            format!("{} (t={t})", line.able_to_scale),
        ));
    }
}

/// Renders the step lines as an aligned table.
pub fn table(steps: &[StepLine]) -> String {
    let mut out = String::from("T       CURRENT  DESIRED  REPLICAS  LIMITED BY          REASON\n");
    for s in steps {
        let _ = writeln!(
            out,
            "{:<7} {:<8} {:<8} {:<9} {:<19} {}",
            s.t,
            s.current_replicas,
            s.desired_replicas,
            s.replicas,
            s.limited_by.as_deref().unwrap_or("-"),
            s.reason
        );
    }
    out
}

impl Outcome for Replay {
    type Line<'a> = &'a StepLine;

    fn lines(&self) -> Vec<&StepLine> {
        self.steps.iter().collect()
    }

    fn table(&self) -> String {
        table(&self.steps)
    }

    fn misses(&self) -> &[String] {
        &self.misses
    }

    fn chart(&self) -> Option<Chart> {
        Some(crate::plot::chart(&self.steps))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(pod: &str) -> String {
        format!(
            "kind: HorizontalReplay
autoscaler:
  apiVersion: autoscaling/v2
  kind: HorizontalPodAutoscaler
  metadata: {{name: web}}
  spec:
    scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}
    maxReplicas: 10
    metrics: [{{type: Resource, resource: {{name: cpu, target: {{type: Utilization, averageUtilization: 50}}}}}}]
initialReplicas: 1
steps:
  - t: 0
    pods: [{pod}]
"
        )
    }

    #[test]
    fn init_containers_pod_resources_and_resize_status_are_read() {
        let text = scenario(
            "{name: web, resources: {requests: {cpu: '1'}}, overhead: {cpu: 10m},
              initContainers: [{name: proxy, restartPolicy: Always, requests: {cpu: 100m}}],
              containers: [{name: app, requests: {cpu: 800m}, allocated: {cpu: 800m},
                            actual: {requests: {cpu: 400m}, limits: {cpu: '2'}}}]}",
        );
        let scenario: Scenario = plimsoll_replay::parse(&text).unwrap();
        let now: Timestamp = EPOCH.parse().unwrap();
        let pod = &pods(&scenario.steps[0], 0, now).unwrap()[0];
        let cpu = |v: i64| BTreeMap::from([("cpu".to_owned(), v)]);
        assert_eq!(pod.pod_requests, cpu(1000));
        assert_eq!(pod.overhead, cpu(10));
        assert!(pod.init_containers[0].sidecar);
        let app = &pod.containers[0];
        assert_eq!(app.allocated, Some(cpu(800)));
        assert_eq!(app.actual_requests, Some(cpu(400)));
        assert_eq!(app.actual_limits, Some(cpu(2000)));
    }

    #[test]
    fn a_restart_policy_belongs_to_init_containers() {
        let text = scenario("{name: web, containers: [{name: app, restartPolicy: Always}]}");
        let err = replay_str(&text).unwrap_err().to_string();
        assert!(
            err.contains("steps[0].pods[0].containers[0].restartPolicy"),
            "{err}"
        );
    }

    /// A recording as the controller would write it for `loads` (total requests per second on
    /// pods that follow the decisions), one evaluation every 15 s.
    fn recording_of(loads: &[i64]) -> String {
        let autoscaler = serde_json::json!({
            "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
            "kind": "HorizontalPodAutoscalerPlus",
            "metadata": {"name": "web", "namespace": "team"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 1, "maxReplicas": 10,
                "metrics": [{"type": "Pods", "pods": {"metric": {"name": "rps"},
                    "target": {"type": "AverageValue", "averageValue": "10"}}}],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 30}}}
        });
        let (spec, _) = autoscaler_spec(autoscaler.clone(), "").unwrap();
        let config = ControllerConfig::default();
        let start: Timestamp = EPOCH.parse().unwrap();
        let mut text = recording::encode(&Line::Header(recording::Header {
            version: recording::FORMAT_VERSION,
            start: Start::FirstSight,
            stored: None,
            autoscaler,
            controller: config.clone(),
            at: start,
        }))
        .unwrap();
        let mut replicas = 1;
        let mut history = memory::resume(None, None, replicas, start, start).history;
        for (k, load) in loads.iter().enumerate() {
            let at = start + SignedDuration::from_secs(15 * i64::try_from(k).unwrap());
            let per_pod = load * 1000 / i64::from(replicas);
            let observed = Observation {
                current_replicas: replicas,
                pods: (1..=replicas)
                    .map(|p| PodSample {
                        name: format!("web-{p}"),
                        metrics: BTreeMap::from([("rps".to_owned(), Ok(per_pod))]),
                        ..PodSample::default()
                    })
                    .collect(),
                ..Observation::default()
            };
            let stepped = recording::step(
                &DecisionInput {
                    spec: &spec,
                    observed: &observed,
                    history: &history,
                    config: &config,
                    now: at,
                },
                |d| d,
            );
            history = stepped.history;
            let d = stepped.decision;
            text.push_str(
                &recording::encode(&Line::Evaluation(recording::Evaluation {
                    at,
                    observed,
                    tuned_min_replicas: None,
                    predicted: None,
                    decision: Recorded::of(&d),
                    scaled: d.scale_to.is_some(),
                }))
                .unwrap(),
            );
            replicas = d.scale_to.unwrap_or(replicas);
        }
        text
    }

    #[test]
    fn a_recording_replays_and_a_changed_decision_is_named() {
        let text = recording_of(&[5, 30, 30, 5, 5, 5, 5, 5, 30]);
        let parsed = recording::parse(&text).unwrap();
        let replay = replay_recording(&parsed, &[]).unwrap();
        assert!(replay.misses.is_empty(), "{:?}", replay.misses);
        assert_eq!(replay.steps.len(), 9);
        assert_eq!(replay.steps[1].replicas, 3);
        assert!(
            replay.steps.iter().skip(2).any(|s| s.replicas == 1),
            "scaled down"
        );

        let tampered = text.replacen("\"desiredReplicas\":3", "\"desiredReplicas\":7", 1);
        let replay = replay_recording(&recording::parse(&tampered).unwrap(), &[]).unwrap();
        assert_eq!(replay.misses.len(), 1, "{:?}", replay.misses);
        assert!(
            replay.misses[0].starts_with("record 1: recorded desired 7"),
            "{}",
            replay.misses[0]
        );

        let longer =
            [Set::parse("spec.behavior.scaleDown.stabilizationWindowSeconds=300").unwrap()];
        let what_if = replay_recording(&parsed, &longer).unwrap();
        assert!(what_if.misses.is_empty());
        let summary = what_if.what_if.unwrap();
        assert!(summary.changed >= 1, "{summary}");
        assert!(
            summary.replica_seconds_after > summary.replica_seconds_before,
            "{summary}"
        );
        assert!(summary.to_string().contains("first at record"), "{summary}");

        let err = replay_recording(&parsed, &[Set::parse("spec.maxReplicas=0").unwrap()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--set spec.maxReplicas") && err.contains("spec.maxReplicas"),
            "{err}"
        );
    }

    #[test]
    fn rotated_files_are_read_oldest_first() {
        let dir =
            std::env::temp_dir().join(format!("plimsoll-replay-rotated-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("web.jsonl");
        for name in ["web.jsonl", "web.jsonl.1", "web.jsonl.2"] {
            std::fs::write(dir.join(name), "").unwrap();
        }
        let names: Vec<String> = recording_files(&file)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["web.jsonl.2", "web.jsonl.1", "web.jsonl"]);
        assert_eq!(recording_files(&dir.join("web.jsonl.1")).len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn set_works_on_a_scenario_and_reports_instead_of_failing() {
        let text = scenario(
            "{name: web, count: 2, containers: [{name: app, requests: {cpu: '1'}, usage: {cpu: 900m}}]}",
        ) + "    expect: {replicas: 1}\n";
        let base = replay_str(&text).unwrap();
        assert!(base.steps[0].replicas > 3, "{:?}", base.steps[0]);
        assert_eq!(base.misses.len(), 1, "the expectation does not hold");
        let sets = [Set::parse("spec.maxReplicas=3").unwrap()];
        let what_if = what_if_str(&text, &sets).unwrap();
        assert!(what_if.misses.is_empty(), "differences are the answer");
        assert_eq!(what_if.steps[0].replicas, 3);
        assert_eq!(what_if.what_if.unwrap().changed, 1);
        assert!(Set::parse("spec.maxReplicas").is_err());
    }
}
