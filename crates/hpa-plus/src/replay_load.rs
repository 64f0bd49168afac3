//! `hpa-plus replay` of a `LoadReplay` (scenarios/FORMAT.md, "A workload driven by a load
//! trace"): one workload whose total CPU usage comes from a trace, pods that take
//! `podStartupSeconds` to become Ready, and the HPA+ evaluated at every sync period through the
//! same [`evaluate`] the controller calls (`minReplicasTuning`, the decision, `spec.predictive`),
//! holding between evaluations what the controller holds.
//!
//! Each step at `t`:
//! 1. The pods are the workload's replicas; a pod created less than `podStartupSeconds` ago is
//!    not Ready and has no usage sample. The trace's CPU (and memory) is spread evenly over the
//!    Ready pods, on each pod's first container.
//! 2. The observed load of each metric is recorded in the compact
//!    `LoadHistory` as the controller records it when no Prometheus is configured.
//! 3. Tuning (when `minReplicasTuning` or its annotation is not off) proposes a `minReplicas`;
//!    in Apply it is written at most once a day, and the decision of this step already uses it.
//! 4. With `spec.predictive` not off, the observed loads are also recorded in a
//!    `LoadSeries` with buckets of `stepSeconds`, and the forecast for the next `leadSeconds`
//!    (`auto`: `podStartupSeconds` plus one step) is made from it.
//! 5. The decision, with its history carried over and normalised as the controller keeps it;
//!    in `Scale` a confident forecast then raises it (`raise`: scale-up only). A scale-up
//!    creates pods at `t` with the CPU request the admission webhook would give them (the
//!    VPA's current recommendation, else the template's); a scale-down removes the newest pods
//!    first.
//! 6. With a `vpa`, the recommender records what the step observed and recommends the pod's
//!    CPU request (`vertical`: joint mode through
//!    [`plimsoll_core::vertical::joint::size`] when the VPA carries
//!    `plimsoll.dev/horizontal-aware: "true"`, else the plain recommender through
//!    [`plimsoll_core::vertical::model::VpaModel`]). A new request is what new pods get from
//!    then on; existing pods get it as the updater applies it, by `updateMode`:
//!    `InPlaceOrRecreate` and `InPlace` resize every pod in place at this step (they stay
//!    Ready; a LoadReplay has no nodes, so every resize fits);
//!    `Recreate` / `Auto` replace stale pods, oldest first, a few per step: at most half of
//!    the replicas may be not Ready at once, and a replacement takes `podStartupSeconds` to be
//!    Ready; `Initial` and `Off` leave running pods alone. The HPA+ always computes utilization against the requests the pods
//!    actually have, so mixed requests during a rollout count as they are.
//!
//! A top-level `predictive` key is rejected (FORMAT.md puts the settings in the autoscaler's
//! spec), with a message saying so.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use plimsoll_core::api::hpa_plus::{
    HorizontalPodAutoscalerPlus, HorizontalPodAutoscalerPlusSpec, MinReplicasTuning,
    PredictiveStatus,
};
use plimsoll_core::horizontal::ControllerConfig;
use plimsoll_core::horizontal::evaluate::{EvaluationInput, Held, TuningWrite, evaluate};
use plimsoll_core::horizontal::load_history;
use plimsoll_core::horizontal::observation::{
    ContainerSample, Fetched, Observation, PodPhase, PodSample,
};
use plimsoll_core::horizontal::predictive::Forecast;
use plimsoll_core::horizontal::proposals::metrics_of;
use plimsoll_core::horizontal::rollout::Rollout;
use plimsoll_core::horizontal::scale_to_zero;
use plimsoll_core::horizontal::source::pod_resource;
use plimsoll_core::horizontal::tuning::Tuning;
use plimsoll_core::vertical::joint::{JointRequest, utilization_target};
use plimsoll_core::vertical::policy::UpdateMode;
use plimsoll_replay::{Outcome, ReplayError};
use serde::{Deserialize, Serialize};

use crate::replay::{Amount, EPOCH, amounts, autoscaler_spec, milli};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Scenario {
    kind: String,
    autoscaler: serde_json::Value,
    #[serde(default)]
    vpa: Option<serde_json::Value>,
    #[serde(default)]
    predictive: Option<serde_json::Value>,
    /// The controller's flags (`ControllerConfig`), read in [`controller`]: a LoadReplay's
    /// default sync period differs from the flag's.
    #[serde(default)]
    controller: Option<serde_json::Value>,
    containers: Vec<ContainerSpec>,
    #[serde(default)]
    pod_startup_seconds: f64,
    step_seconds: f64,
    load: Load,
    #[serde(default)]
    expect: Option<summary::Expect>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ContainerSpec {
    name: String,
    #[serde(default)]
    requests: BTreeMap<String, Amount>,
    #[serde(default)]
    limits: BTreeMap<String, Amount>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Load {
    #[serde(default)]
    cpu: Option<Vec<f64>>,
    #[serde(default)]
    csv: Option<String>,
    #[serde(default)]
    memory_per_pod: Option<Amount>,
    #[serde(default)]
    interpolation: Interpolation,
}

/// How the load moves between two trace points (`load.interpolation`).
#[derive(Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Interpolation {
    /// A straight line from one point to the next (default): a 5-minute counter's rise is
    /// spread over its 5 minutes, not a wall at the step's first second.
    #[default]
    Linear,
    /// The point's value until the next point.
    Hold,
}

/// The sync period a `LoadReplay` evaluates at when neither the autoscaler's
/// `syncPeriodSeconds` nor the scenario's `controller.syncPeriodSeconds` says: upstream's
/// `--horizontal-pod-autoscaler-sync-period`, the period most clusters run.
pub const DEFAULT_SYNC_PERIOD_SECONDS: i64 = 15;

/// The most evaluations one `LoadReplay` runs (about 2.4 years at 15 s; a 30-day trace is
/// 172,800). A file asking for more is refused up front rather than left to run for hours.
pub const MAX_EVALUATIONS: f64 = 5_000_000.0;

/// The longest `podStartupSeconds`: a day. Past it a pod is not starting but broken, and the
/// forecast's lead (the startup plus a bucket) would outrun any history.
const MAX_POD_STARTUP_SECONDS: f64 = 86_400.0;

/// One step's load: seconds since the start, total CPU millicores, total memory milli-bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Sample {
    t: f64,
    cpu: i64,
    memory: Option<i64>,
}

/// One step's result, as printed with `--output json`.
#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct LoadLine {
    /// Seconds since the scenario start.
    pub t: f64,
    /// The workload's replicas after this step's decision.
    pub replicas: i32,
    /// Pods Ready at this step (created at least `podStartupSeconds` ago).
    pub ready_replicas: i32,
    /// One pod's CPU request, millicores.
    pub cpu_request: i64,
    /// The workload's CPU usage as a percent of the CPU its Ready pods request; `null` while no
    /// pod is Ready.
    pub utilization: Option<f64>,
    /// `minReplicas` in force at this step (after tuning).
    pub min_replicas: i32,
    /// `null`, or what changed during this step (at any of its evaluations): `replicas`,
    /// `requests` (the CPU request new pods get), or `both`.
    pub changed: Option<String>,
    /// The highest utilization an evaluation within the step saw, percent; `null` while no pod
    /// was Ready at any.
    pub peak_utilization: Option<f64>,
    /// How many times the autoscaler was evaluated within the step (one per sync period).
    pub reconciles: u32,
    /// With `spec.predictive` on: the forecast CPU peak over the lead window, cores (absent
    /// before a season of history).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forecast: Option<f64>,
    /// With `spec.predictive` on: the replicas a confident forecast needs (absent when the
    /// forecast is not trusted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_replicas: Option<i32>,
    /// What prediction reported at this step (not printed; for tests and the table).
    #[serde(skip)]
    pub predictive: Option<PredictiveStatus>,
    /// The trace's CPU at this step, cores (not printed: it is the input; for the plot).
    #[serde(skip)]
    pub load: f64,
    /// What tuning decided at this step (not printed; for tests and the table).
    #[serde(skip)]
    pub tuning: Option<Tuning>,
    /// With a joint-mode `vpa`: what the model decided at this step (not printed; for tests
    /// and the table).
    #[serde(skip)]
    pub joint: Option<JointRequest>,
    /// The HPA+'s CPU target utilization, percent (not printed; for the plot's band).
    #[serde(skip)]
    pub target: Option<i32>,
    /// The step's length, seconds (not printed; for the report).
    #[serde(skip)]
    pub seconds: f64,
    /// Of the step's overloaded evaluations ([`summary::above_overload`]), the fastest rise:
    /// the highest ratio of the load at one to the load `podStartupSeconds` plus one sync
    /// period before it (0 when none was overloaded; infinite from no load). Above
    /// [`summary::OVERLOAD_FACTOR`], pods asked for when the rise began were not Ready in time
    /// however many were asked: only capacity already there could have carried it (not
    /// printed; for the report).
    #[serde(skip)]
    pub overload_rise: f64,
    /// Replicas (Ready or not: each costs) integrated over the step, replica-seconds (not
    /// printed; for the report).
    #[serde(skip)]
    pub replica_seconds: f64,
    /// What the load strictly needed at the CPU target, `ceil(load / (request × target))`
    /// integrated over the step, replica-seconds; `None` without a CPU utilization target (not
    /// printed; for the report).
    #[serde(skip)]
    pub needed_seconds: Option<f64>,
}

/// The outcome of a `LoadReplay`.
#[derive(Clone, Debug)]
pub struct LoadReplay {
    /// One line per step.
    pub steps: Vec<LoadLine>,
    /// The scenario has a `vpa`.
    pub vertical: bool,
    /// Each `expect` that did not hold.
    pub misses: Vec<String>,
    /// The span `--plot` draws (`--from`, `--to`, seconds; within [`LoadReplay::span`]);
    /// `None` draws the whole replay.
    pub plot_window: Option<(f64, f64)>,
}

impl LoadReplay {
    /// From the first step's start to the last step's end, seconds (0…0 without steps).
    pub fn span(&self) -> (f64, f64) {
        match (self.steps.first(), self.steps.last()) {
            (Some(first), Some(last)) => (first.t, last.t + last.seconds),
            _ => (0.0, 0.0),
        }
    }
}

impl Outcome for LoadReplay {
    type Line<'a> = &'a LoadLine;

    fn lines(&self) -> Vec<&LoadLine> {
        self.steps.iter().collect()
    }

    fn table(&self) -> String {
        table(&self.steps)
    }

    fn misses(&self) -> &[String] {
        &self.misses
    }

    fn chart(&self) -> Option<plimsoll_replay::plot::Chart> {
        Some(plot::chart(&self.steps, self.vertical, self.plot_window))
    }
}

/// Renders the lines as an aligned table (the tuning reason in the last column).
pub fn table(steps: &[LoadLine]) -> String {
    let predictive = steps.iter().any(|s| s.predictive.is_some());
    let joint = steps.iter().any(|s| s.joint.is_some());
    let mut out = String::from("T        REPLICAS  READY  CPU REQ  UTIL   MIN  CHANGED   ");
    if predictive {
        out.push_str("FORECAST  PREDICTED  PREDICTION        ");
    }
    if joint {
        out.push_str("JOINT               ");
    }
    out.push_str("TUNING\n");
    for s in steps {
        let _ = write!(
            out,
            "{:<8} {:<9} {:<6} {:<8} {:<6} {:<4} {:<9} ",
            s.t,
            s.replicas,
            s.ready_replicas,
            s.cpu_request,
            s.utilization
                .map_or_else(|| "-".into(), |u| format!("{u:.0}")),
            s.min_replicas,
            s.changed.as_deref().unwrap_or("-"),
        );
        if predictive {
            let _ = write!(
                out,
                "{:<9} {:<10} {:<17} ",
                s.forecast.map_or_else(|| "-".into(), |f| format!("{f:.2}")),
                s.predicted_replicas
                    .map_or_else(|| "-".into(), |r| r.to_string()),
                s.predictive.as_ref().map_or("-", |p| p.reason.as_str()),
            );
        }
        if joint {
            let _ = write!(
                out,
                "{:<19} ",
                s.joint.as_ref().map_or("-", |j| j.reason.as_str())
            );
        }
        let _ = writeln!(
            out,
            "{}",
            s.tuning.as_ref().map_or("-", |t| t.reason.as_str())
        );
    }
    out
}

fn invalid(field: &str, message: impl std::fmt::Display) -> ReplayError {
    ReplayError::invalid(field, message)
}

/// The trace: `load.cpu` (one value per step, `stepSeconds` apart) or `load.csv`.
fn samples(s: &Scenario, dir: &Path) -> Result<Vec<Sample>, ReplayError> {
    if !(s.step_seconds.is_finite() && s.step_seconds > 0.0) {
        return Err(invalid("stepSeconds", "must be a positive number"));
    }
    plimsoll_replay::seconds(s.step_seconds, "stepSeconds")?;
    let cores = |v: f64, field: &str| -> Result<i64, ReplayError> {
        if v.is_finite() && v >= 0.0 {
            // Cores to millicores; a trace has no finer grain.
            Ok((v * 1000.0).round() as i64)
        } else {
            Err(invalid(field, format!("{v} is not a CPU amount in cores")))
        }
    };
    match (&s.load.cpu, &s.load.csv) {
        (Some(list), None) => list
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                Ok(Sample {
                    t: i as f64 * s.step_seconds,
                    cpu: cores(v, &format!("load.cpu[{i}]"))?,
                    memory: None,
                })
            })
            .collect(),
        (None, Some(file)) => {
            let path = dir.join(file);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| invalid("load.csv", format!("cannot read {}: {e}", path.display())))?;
            csv_samples(&text, cores)
        }
        _ => Err(invalid(
            "load",
            "give exactly one of cpu (a list) and csv (a file)",
        )),
    }
}

/// The rows of a CSV with the columns `t` and `cpu`, and optionally `memory`, named by its first
/// line in any order; `t` must increase. Exports from spreadsheets and Prometheus tools differ
/// in small ways that do not change the data: a UTF-8 byte-order mark, CRLF line ends, blank
/// lines, cells in double quotes, spaces around cells, the case of the header. Those are read.
/// Any other column is refused (a misspelt `memory` would otherwise be dropped without a word).
/// A bad cell is named by its line in the file.
fn csv_samples(
    text: &str,
    cores: impl Fn(f64, &str) -> Result<i64, ReplayError>,
) -> Result<Vec<Sample>, ReplayError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim().is_empty());
    let header: Vec<String> = lines
        .next()
        .map(|(_, l)| csv_cells(l))
        .unwrap_or_default()
        .into_iter()
        .map(str::to_ascii_lowercase)
        .collect();
    let column = |name: &str| header.iter().position(|c| c == name);
    if let Some(other) = header
        .iter()
        .find(|c| !matches!(c.as_str(), "t" | "cpu" | "memory"))
    {
        return Err(invalid(
            "load.csv",
            format!(
                "the header names a column {} that is not t, cpu or memory",
                plimsoll_core::quoted::quoted(other)
            ),
        ));
    }
    if let Some(twice) = header
        .iter()
        .enumerate()
        .find(|(i, c)| header[..*i].contains(c))
    {
        return Err(invalid(
            "load.csv",
            format!("the header names the column {} twice", twice.1),
        ));
    }
    let (Some(t_at), Some(cpu_at)) = (column("t"), column("cpu")) else {
        return Err(invalid(
            "load.csv",
            "the header must name the columns t and cpu (and optionally memory), e.g. t,cpu",
        ));
    };
    let memory_at = column("memory");
    let mut out: Vec<Sample> = Vec::new();
    for (line_number, line) in lines {
        let field = format!("load.csv line {line_number}");
        let row = csv_cells(line);
        let number = |k: usize, name: &str| -> Result<f64, ReplayError> {
            row.get(k)
                .and_then(|c| c.parse::<f64>().ok())
                .ok_or_else(|| invalid(&field, format!("column {name} is not a number")))
        };
        let t = number(t_at, "t")?;
        if out.last().is_some_and(|p| t <= p.t) || !t.is_finite() {
            return Err(invalid(&field, "t must increase"));
        }
        plimsoll_replay::seconds(t, format!("{field} t"))?;
        let memory = match memory_at {
            Some(k) => {
                let text = row.get(k).copied().unwrap_or_default();
                Some(
                    milli(&Amount::Text(text.to_owned()), &format!("{field} memory"))
                        .map_err(ReplayError::Invalid)?,
                )
            }
            None => None,
        };
        out.push(Sample {
            t,
            cpu: cores(number(cpu_at, "cpu")?, &format!("{field} cpu"))?,
            memory,
        });
    }
    if out.is_empty() {
        return Err(invalid("load.csv", "has no rows"));
    }
    Ok(out)
}

/// A CSV line's cells, each trimmed and without the double quotes a spreadsheet may put round it.
fn csv_cells(line: &str) -> Vec<&str> {
    line.split(',')
        .map(|c| {
            let c = c.trim();
            c.strip_prefix('"')
                .and_then(|c| c.strip_suffix('"'))
                .unwrap_or(c)
                .trim()
        })
        .collect()
}

/// One pod's containers, with their requests and limits (milli).
fn template(s: &Scenario) -> Result<PodSample, ReplayError> {
    if s.containers.is_empty() {
        return Err(invalid("containers", "at least one container is required"));
    }
    let containers = s
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| {
            Ok(ContainerSample {
                name: c.name.clone(),
                requests: amounts(&c.requests, &format!("containers[{i}].requests"))?,
                limits: amounts(&c.limits, &format!("containers[{i}].limits"))?,
                ..ContainerSample::default()
            })
        })
        .collect::<Result<Vec<_>, String>>()
        .map_err(ReplayError::Invalid)?;
    Ok(PodSample {
        containers,
        ..PodSample::default()
    })
}

/// The autoscaler, the tuning settings in force (spec field, else annotation) and the bytes
/// its predictive history may take.
type Autoscaler = (
    HorizontalPodAutoscalerPlusSpec,
    MinReplicasTuning,
    Option<usize>,
);

/// Reads the scenario's [`Autoscaler`].
fn autoscaler(s: &Scenario, text: &str) -> Result<Autoscaler, ReplayError> {
    if s.predictive.is_some() {
        return Err(invalid(
            "predictive",
            "not supported yet: give the settings in autoscaler.spec.predictive",
        ));
    }
    let (spec, history_bytes) =
        autoscaler_spec(s.autoscaler.clone(), text).map_err(ReplayError::Invalid)?;
    let metadata: ObjectMeta = s
        .autoscaler
        .get("metadata")
        .cloned()
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| invalid("autoscaler.metadata", e))?
        .unwrap_or_default();
    for (i, m) in metrics_of(&spec).iter().enumerate() {
        let resource = pod_resource(m).map(|(resource, _)| resource);
        if !matches!(resource, Some("cpu" | "memory")) {
            return Err(invalid(
                &format!("autoscaler.spec.metrics[{i}]"),
                "a LoadReplay drives only cpu and memory Resource or ContainerResource metrics",
            ));
        }
    }
    let plus = HorizontalPodAutoscalerPlus {
        metadata,
        spec,
        status: None,
    };
    let tuning = plus
        .min_replicas_tuning()
        .map_err(|e| invalid("autoscaler.metadata.annotations", e))?
        .unwrap_or_default();
    Ok((plus.spec, tuning, history_bytes))
}

/// One pod of the workload.
#[derive(Clone, Debug)]
struct Pod {
    /// Unique over the replay (`pod-{id}`), so the recommender never mixes two pods.
    id: usize,
    born: Timestamp,
    /// `born` + the startup time: from then on the pod is Ready.
    ready_at: Timestamp,
    /// The pod's CPU request, millicores (the sum over its containers).
    cpu: i64,
}

/// The workload as the replay models it: its pods, oldest first.
struct Workload {
    pods: Vec<Pod>,
    startup: SignedDuration,
    /// The CPU request a new pod gets, millicores.
    cpu_request: i64,
    next_id: usize,
}

impl Pod {
    fn is_ready(&self, now: Timestamp) -> bool {
        now >= self.ready_at
    }
}

impl Workload {
    fn ready(&self, now: Timestamp) -> usize {
        self.pods.iter().filter(|p| p.is_ready(now)).count()
    }

    fn replicas(&self) -> i32 {
        i32::try_from(self.pods.len()).unwrap_or(i32::MAX)
    }

    fn create(&mut self, born: Timestamp) -> Pod {
        self.next_id += 1;
        Pod {
            id: self.next_id - 1,
            born,
            ready_at: born + self.startup,
            cpu: self.cpu_request,
        }
    }

    /// Scales to `replicas`: new pods are created at `now`, the newest go first. Returns the
    /// names of the pods removed.
    fn scale(&mut self, replicas: i32, now: Timestamp) -> Vec<String> {
        let n = usize::try_from(replicas).unwrap_or(0);
        let gone = self
            .pods
            .drain(n.min(self.pods.len())..)
            .map(|p| format!("pod-{}", p.id))
            .collect();
        while self.pods.len() < n {
            let pod = self.create(now);
            self.pods.push(pod);
        }
        gone
    }

    /// Applies the recommendation to running pods as the updater does in `mode` (see the
    /// module docs); `accepts(cpu, born)` says whether the updater takes a pod. Returns the
    /// names of the pods replaced.
    fn update(
        &mut self,
        mode: UpdateMode,
        accepts: impl Fn(i64, Timestamp) -> bool,
        now: Timestamp,
    ) -> Vec<String> {
        let request = self.cpu_request;
        match mode {
            // A LoadReplay has no nodes, so every resize fits and InPlace never has to wait.
            UpdateMode::InPlaceOrRecreate | UpdateMode::InPlace => {
                for p in &mut self.pods {
                    if p.cpu != request && accepts(p.cpu, p.born) {
                        p.cpu = request;
                    }
                }
                Vec::new()
            }
            UpdateMode::Recreate | UpdateMode::Auto => {
                // At most half of the replicas (rounded up) not Ready at once.
                let budget = self.pods.len().div_ceil(2);
                let not_ready = self.pods.len() - self.ready(now);
                let mut evict = budget.saturating_sub(not_ready);
                let mut gone = Vec::new();
                for i in 0..self.pods.len() {
                    if evict == 0 {
                        break;
                    }
                    let p = &self.pods[i];
                    if p.cpu != request && p.is_ready(now) && accepts(p.cpu, p.born) {
                        gone.push(format!("pod-{}", p.id));
                        self.pods[i] = self.create(now);
                        evict -= 1;
                    }
                }
                // Replacements go to the end: the newest are the first removed by a scale-down.
                self.pods.sort_by_key(|p| p.born);
                gone
            }
            UpdateMode::Initial | UpdateMode::Off => Vec::new(),
        }
    }

    /// Brings `observed` (the pods as last observed, index for index with `self.pods`) to
    /// `now`: Ready ones share `load` evenly on their first container, each with its own CPU
    /// request on the first container (the others keep the template's). A pod's sample is
    /// rebuilt from `template` only when it is new or its request changed: the replay
    /// evaluates every sync period, and rebuilding every pod each time would be most of its
    /// cost.
    fn refresh(
        &self,
        observed: &mut Observed,
        template: &PodSample,
        load: &Sample,
        memory_per_pod: Option<i64>,
        now: Timestamp,
    ) {
        let ready = i64::try_from(self.ready(now)).unwrap_or(0).max(1);
        let others: i64 = template
            .containers
            .iter()
            .skip(1)
            .filter_map(|c| c.requests.get("cpu"))
            .sum();
        observed.pods.truncate(self.pods.len());
        observed.keys.truncate(self.pods.len());
        let mut k = 0i64;
        for (i, p) in self.pods.iter().enumerate() {
            if observed.keys.get(i) != Some(&(p.id, p.cpu)) {
                let mut pod = PodSample {
                    name: format!("pod-{}", p.id),
                    phase: PodPhase::Running,
                    start_time: Some(p.born),
                    ..template.clone()
                };
                if let Some(first) = pod.containers.first_mut()
                    && (first.requests.contains_key("cpu") || p.cpu > 0)
                {
                    first.requests.insert("cpu".into(), (p.cpu - others).max(0));
                }
                if i < observed.pods.len() {
                    observed.pods[i] = pod;
                    observed.keys[i] = (p.id, p.cpu);
                } else {
                    observed.pods.push(pod);
                    observed.keys.push((p.id, p.cpu));
                }
            }
            let is_ready = p.is_ready(now);
            let pod = &mut observed.pods[i];
            pod.ready = Some(is_ready);
            pod.ready_transition_time = Some(if is_ready { p.ready_at } else { p.born });
            pod.metrics_timestamp = Some(now);
            if is_ready {
                // An even split whose parts add up to the trace exactly.
                let share = |total: i64| total / ready + i64::from(k < total % ready);
                let memory = load.memory.map(share).or(memory_per_pod);
                for (j, c) in pod.containers.iter_mut().enumerate() {
                    let first = j == 0;
                    set(&mut c.usage, "cpu", if first { share(load.cpu) } else { 0 });
                    if let Some(m) = memory {
                        set(&mut c.usage, "memory", if first { m } else { 0 });
                    }
                }
                k += 1;
            } else {
                for c in &mut pod.containers {
                    c.usage.clear();
                }
            }
        }
    }
}

/// Sets `key` of `usage` to `value` (no new key string when it is there already).
fn set(usage: &mut BTreeMap<String, Fetched<i64>>, key: &str, value: i64) {
    match usage.get_mut(key) {
        Some(v) => *v = Ok(value),
        None => {
            usage.insert(key.to_owned(), Ok(value));
        }
    }
}

/// The workload's pods as the last evaluation observed them, kept between evaluations.
#[derive(Default)]
struct Observed {
    pods: Vec<PodSample>,
    /// Per pod: the id and CPU request its sample was built for.
    keys: Vec<(usize, i64)>,
}

/// What the replay keeps between evaluations: what the controller keeps, and the workload.
struct Run {
    config: ControllerConfig,
    spec: HorizontalPodAutoscalerPlusSpec,
    settings: MinReplicasTuning,
    /// [`EvaluationInput::history_bytes`] for the autoscaler's kind.
    history_bytes: Option<usize>,
    template: PodSample,
    memory_per_pod: Option<i64>,
    workload: Workload,
    vertical: Option<Vertical>,
    /// What the controller holds of the object.
    held: Held,
    /// The pods' startup time the scenario states, seconds (the controller measures it).
    startup_seconds: i64,
    observed: Observed,
    /// The `ScaledToZero` condition the decisions wrote (KEP-2021: only such a zero is woken).
    scaled_to_zero: bool,
}

/// What one evaluation saw and did.
struct Reconciled {
    ready: usize,
    utilization: Option<f64>,
    scaled: bool,
    tuning: Option<Tuning>,
    forecast: Option<Forecast>,
    predictive: Option<PredictiveStatus>,
}

impl Run {
    /// The controller's evaluation ([`evaluate`]: tuning, decision, prediction) and its
    /// writes: a lowered `minReplicas` goes into the spec, the scale into the workload; `true`
    /// when the replicas moved.
    fn evaluate(
        &mut self,
        observed: &Observation,
        now: Timestamp,
    ) -> (
        bool,
        Option<Tuning>,
        Option<Forecast>,
        Option<PredictiveStatus>,
    ) {
        let mut evaluation = evaluate(
            &EvaluationInput {
                spec: &self.spec,
                observed,
                stored_memory: None,
                config: &self.config,
                tuning: &self.settings,
                held_by: None,
                excluded_by: None,
                tuning_write: TuningWrite::Allowed,
                startup_seconds: Some(self.startup_seconds),
                history_bytes: self.history_bytes,
                // A native HPA (the predictive history's bound says which) keeps both histories
                // in its annotations.
                tuning_history_bytes: self
                    .history_bytes
                    .map(|_| load_history::NATIVE_HISTORY_BYTES),
                now,
            },
            std::mem::take(&mut self.held),
        );
        if let Some(min) = evaluation.lowered_min_replicas {
            self.spec.min_replicas = Some(min);
        }
        let replicas = observed.current_replicas;
        let mut changed = false;
        if let Some(z) = scale_to_zero::written(&evaluation.decision.conditions) {
            self.scaled_to_zero = z;
        }
        if let Some(to) = evaluation.decision.scale_to {
            evaluation.scaled(now, replicas, to);
            changed = to != replicas;
            let gone = self.workload.scale(to, now);
            self.forget(&gone);
        }
        // As the controller: keep what a successor would read back.
        let _ = evaluation.store_memory();
        self.held = evaluation.held;
        let (forecast, status) = evaluation
            .predicted
            .map(|p| {
                // The step keeps what it prints; the history is the controller's to store.
                let status = PredictiveStatus {
                    history: None,
                    ..p.status
                };
                (p.forecast, status)
            })
            .unzip();
        (
            changed,
            evaluation.tuned.map(|t| t.tuning),
            forecast,
            status,
        )
    }

    /// Forgets pods that are gone in the recommender.
    fn forget(&mut self, gone: &[String]) {
        if let Some(v) = self.vertical.as_mut() {
            for pod in gone {
                v.forget(pod);
            }
        }
    }

    /// The VPA's step: records what was `observed`, recommends, and applies a new request as
    /// the admission webhook and the updater would; `Some` with the model's answer in joint
    /// mode, and whether the request new pods get changed.
    fn size(&mut self, observed: &Observation, now: Timestamp) -> (Option<JointRequest>, bool) {
        let Some(v) = self.vertical.as_mut() else {
            return (None, false);
        };
        let Some(r) = v.recommend(&observed.pods, &self.spec, self.workload.cpu_request, now)
        else {
            return (None, false);
        };
        if v.mode() == UpdateMode::Off {
            // Recommendations only: neither the webhook nor the updater acts.
            return (r.joint, false);
        }
        let others = v.others();
        let request = r.target + others;
        let changed = request != self.workload.cpu_request;
        self.workload.cpu_request = request;
        let gone = self.workload.update(
            v.mode(),
            |cpu, born| v.accepts(cpu - others, born, &r, now),
            now,
        );
        self.forget(&gone);
        (r.joint, changed)
    }

    /// What the Ready pods request at `now`, millicores.
    fn requested(&self, now: Timestamp) -> i64 {
        self.workload
            .pods
            .iter()
            .filter(|p| p.is_ready(now))
            .map(|p| p.cpu)
            .sum()
    }

    /// The observation of the workload carrying `load` at `now` (its pods taken from
    /// `self.observed`; [`Run::reconcile`] puts them back).
    fn observe(&mut self, load: &Sample, now: Timestamp) -> Observation {
        self.workload.refresh(
            &mut self.observed,
            &self.template,
            load,
            self.memory_per_pod,
            now,
        );
        let replicas = self.workload.replicas();
        Observation {
            current_replicas: replicas,
            pods: std::mem::take(&mut self.observed.pods),
            rollout: Rollout::Settled.state(replicas),
            scaled_to_zero: self.scaled_to_zero,
            ..Observation::default()
        }
    }

    /// One evaluation at `now` with the workload carrying `load`: tuning, forecast and
    /// decision, in the controller's order; with `vpa`, the VPA's step after the decision.
    fn reconcile(
        &mut self,
        load: &Sample,
        now: Timestamp,
        vpa: bool,
    ) -> (Reconciled, Option<JointRequest>, bool) {
        let observed = self.observe(load, now);
        let ready = self.workload.ready(now);
        let requested = self.requested(now);
        let (scaled, tuning, forecast, predictive) = self.evaluate(&observed, now);
        let (joint, resized) = if vpa {
            self.size(&observed, now)
        } else {
            (None, false)
        };
        self.observed.pods = observed.pods;
        let out = Reconciled {
            ready,
            utilization: (requested > 0).then(|| {
                // Two decimals: enough to read, stable to print.
                (load.cpu as f64 * 10_000.0 / requested as f64).round() / 100.0
            }),
            scaled,
            tuning,
            forecast,
            predictive,
        };
        (out, joint, resized)
    }

    /// The replicas the load strictly needs at the CPU target with the request new pods get,
    /// `ceil(load / (request × target))`; `None` without a CPU utilization target.
    fn needed(&self, cpu: i64, target: Option<i32>) -> Option<i64> {
        let per_pod = self.workload.cpu_request * i64::from(target?) / 100;
        (per_pod > 0).then(|| (cpu + per_pod - 1).div_euclid(per_pod))
    }
}

/// The load at `t` seconds within the step from `a` to `b` (`b` `None` for the last step).
fn load_at(a: &Sample, b: Option<&Sample>, t: f64, how: Interpolation) -> Sample {
    let Some(b) = b.filter(|_| how == Interpolation::Linear) else {
        return Sample { t, ..*a };
    };
    let f = ((t - a.t) / (b.t - a.t)).clamp(0.0, 1.0);
    let mix = |x: i64, y: i64| (x as f64 + (y - x) as f64 * f).round() as i64;
    Sample {
        t,
        cpu: mix(a.cpu, b.cpu),
        memory: a.memory.zip(b.memory).map(|(x, y)| mix(x, y)).or(a.memory),
    }
}

/// The load of `trace` at `t` seconds (its first point's before it starts).
fn load_when(trace: &[Sample], t: f64, how: Interpolation) -> Sample {
    let i = trace.partition_point(|s| s.t <= t).saturating_sub(1);
    match trace.get(i) {
        Some(a) => load_at(a, trace.get(i + 1), t.max(a.t), how),
        None => Sample {
            t,
            cpu: 0,
            memory: None,
        },
    }
}

/// How many times `from` the load `to` is (infinite from none to some, 1 from none to none).
fn rise(from: i64, to: i64) -> f64 {
    match (from, to) {
        (f, _) if f > 0 => to as f64 / f as f64,
        (_, t) if t > 0 => f64::INFINITY,
        _ => 1.0,
    }
}

/// The forecast CPU load (millicores) of a forecast's `cpu` metric, if any.
fn cpu_forecast(f: &Forecast) -> Option<i64> {
    f.metrics
        .iter()
        .find(|m| m.metric == "cpu" || m.metric.starts_with("cpu/"))
        .and_then(|m| m.load)
}

/// The scenario's controller flags, and the sync period it evaluates at: the autoscaler's
/// `syncPeriodSeconds`, else `controller.syncPeriodSeconds`, else
/// [`DEFAULT_SYNC_PERIOD_SECONDS`] (never below `controller.minSyncPeriodSeconds`).
fn controller(
    s: &Scenario,
    spec: &HorizontalPodAutoscalerPlusSpec,
) -> Result<(ControllerConfig, i64), ReplayError> {
    let value = s
        .controller
        .clone()
        .unwrap_or_else(|| serde_json::json!({}));
    let given = value.get("syncPeriodSeconds").is_some();
    let mut config: ControllerConfig =
        serde_json::from_value(value).map_err(|e| invalid("controller", e))?;
    if !given {
        config.sync_period_seconds = DEFAULT_SYNC_PERIOD_SECONDS;
    }
    let period = config.sync_period_seconds(spec);
    Ok((config, period))
}

/// Accumulates one trace step's evaluations into its line.
struct StepLine {
    line: LoadLine,
    /// The last evaluation's time and the replicas and need it left, for the integrals.
    mark: f64,
    replicas: i32,
    needed: Option<i64>,
}

impl StepLine {
    /// The line of the step from `sample` to `end` (`at` is its start as a time), before its
    /// evaluations: the workload as the previous step left it.
    fn start(run: &Run, sample: &Sample, end: f64, at: Timestamp, target: Option<i32>) -> Self {
        let replicas = run.workload.replicas();
        StepLine {
            line: LoadLine {
                t: sample.t,
                replicas,
                ready_replicas: i32::try_from(run.workload.ready(at)).unwrap_or(i32::MAX),
                cpu_request: run.workload.cpu_request,
                utilization: None,
                min_replicas: run.spec.min_replicas.unwrap_or(1),
                changed: None,
                peak_utilization: None,
                reconciles: 0,
                forecast: None,
                predicted_replicas: None,
                predictive: None,
                load: sample.cpu as f64 / 1000.0,
                tuning: None,
                joint: None,
                target,
                seconds: end - sample.t,
                overload_rise: 0.0,
                replica_seconds: 0.0,
                needed_seconds: target.map(|_| 0.0),
            },
            mark: sample.t,
            replicas,
            needed: run.needed(sample.cpu, target),
        }
    }

    /// Adds `replicas` and `needed` from the mark to `t` to the integrals, and moves the mark.
    fn account(&mut self, t: f64) {
        let dt = (t - self.mark).max(0.0);
        self.line.replica_seconds += f64::from(self.replicas) * dt;
        if let (Some(n), Some(sum)) = (self.needed, self.line.needed_seconds.as_mut()) {
            *sum += n as f64 * dt;
        }
        self.mark = t;
    }
}

/// Replays `LoadReplay` text and checks its `expect`; files it names (the trace, a baseline
/// scenario) are relative to `dir`.
pub fn replay_load_str(text: &str, dir: &Path) -> Result<LoadReplay, ReplayError> {
    let scenario: Scenario = plimsoll_replay::parse(text)?;
    plimsoll_replay::expect_kind(&scenario.kind, "LoadReplay")?;
    let mut replay = run_scenario(&scenario, text, dir)?;
    if let Some(expect) = &scenario.expect {
        let this = summary::summarize(&replay.steps, expect.from);
        let baseline = expect
            .baseline
            .as_ref()
            .map(|file| {
                let path = dir.join(file);
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    invalid(
                        "expect.baseline",
                        format!("cannot read {}: {e}", path.display()),
                    )
                })?;
                let base: Scenario = plimsoll_replay::parse(&text)?;
                plimsoll_replay::expect_kind(&base.kind, "LoadReplay")?;
                // The baseline's own expect is not checked (nor its baseline followed).
                let steps = run_scenario(&base, &text, path.parent().unwrap_or(dir))?.steps;
                Ok::<_, ReplayError>(summary::summarize(&steps, expect.from))
            })
            .transpose()?;
        replay.misses = summary::check(expect, &this, baseline.as_ref());
    }
    Ok(replay)
}

/// The span a `LoadReplay` scenario covers, seconds, as [`LoadReplay::span`] reports it after the
/// replay, read from the trace alone: `--from`/`--to` are checked against it before a replay
/// that may take minutes runs.
pub fn span_str(text: &str, dir: &Path) -> Result<(f64, f64), ReplayError> {
    let scenario: Scenario = plimsoll_replay::parse(text)?;
    plimsoll_replay::expect_kind(&scenario.kind, "LoadReplay")?;
    let trace = samples(&scenario, dir)?;
    Ok(match (trace.first(), trace.last()) {
        (Some(first), Some(last)) => (first.t, last.t + scenario.step_seconds),
        _ => (0.0, 0.0),
    })
}

/// The start of a replay: what the replay keeps, the trace, the sync period (seconds) and the
/// CPU target (percent), from a parsed `LoadReplay`.
fn start(
    scenario: &Scenario,
    text: &str,
    dir: &Path,
) -> Result<(Run, Vec<Sample>, i64, Option<i32>), ReplayError> {
    let (spec, settings, history_bytes) = autoscaler(scenario, text)?;
    // The replay holds every pod it creates; past a cluster's worth a file could ask for
    // billions.
    if usize::try_from(spec.max_replicas).unwrap_or(0) > plimsoll_replay::MAX_PODS {
        return Err(invalid(
            "autoscaler.spec.maxReplicas",
            format!(
                "a LoadReplay models each pod: at most {}",
                plimsoll_replay::MAX_PODS
            ),
        ));
    }
    let (config, period) = controller(scenario, &spec)?;
    let trace = samples(scenario, dir)?;
    evaluations(scenario, &trace, period)?;
    let template = template(scenario)?;
    let memory_per_pod = scenario
        .load
        .memory_per_pod
        .as_ref()
        .map(|a| milli(a, "load.memoryPerPod"))
        .transpose()
        .map_err(ReplayError::Invalid)?;
    if !(scenario.pod_startup_seconds.is_finite()
        && (0.0..=MAX_POD_STARTUP_SECONDS).contains(&scenario.pod_startup_seconds))
    {
        return Err(invalid(
            "podStartupSeconds",
            format!("must be a number from 0 to {MAX_POD_STARTUP_SECONDS}"),
        ));
    }
    let epoch = epoch()?;
    let startup = SignedDuration::from_secs_f64(scenario.pod_startup_seconds);
    let cpu_request = template
        .containers
        .iter()
        .filter_map(|c| c.requests.get("cpu"))
        .sum();
    let initial = usize::try_from(spec.min_replicas.unwrap_or(1).max(1)).unwrap_or(1);
    let step = scenario.step_seconds.round().max(1.0) as i64;
    let startup_seconds = scenario.pod_startup_seconds.ceil() as i64;
    let vertical = scenario
        .vpa
        .as_ref()
        .map(|v| Vertical::new(v, &template, step))
        .transpose()?;
    let mut workload = Workload {
        pods: Vec::new(),
        startup,
        cpu_request,
        next_id: 0,
    };
    for _ in 0..initial {
        // The starting pods are long Ready.
        let pod = workload.create(epoch - startup - SignedDuration::from_hours(1));
        workload.pods.push(pod);
    }
    let target = utilization_target(&spec, "cpu");
    let run = Run {
        config,
        spec,
        settings,
        history_bytes,
        template,
        memory_per_pod,
        workload,
        vertical,
        held: Held::default(),
        startup_seconds,
        observed: Observed::default(),
        scaled_to_zero: false,
    };
    Ok((run, trace, period, target))
}

/// Refuses a trace that takes more than
/// [`MAX_EVALUATIONS`] evaluations at `period` seconds, naming the field that makes it long.
fn evaluations(scenario: &Scenario, trace: &[Sample], period: i64) -> Result<(), ReplayError> {
    let (Some(first), Some(last)) = (trace.first(), trace.last()) else {
        return Ok(());
    };
    let period = period as f64;
    let span = last.t + scenario.step_seconds - first.t;
    let count = span / period;
    if count <= MAX_EVALUATIONS {
        return Ok(());
    }
    let field = if scenario.step_seconds / period > MAX_EVALUATIONS {
        "stepSeconds"
    } else if scenario.load.csv.is_some() {
        "load.csv"
    } else {
        "load.cpu"
    };
    Err(invalid(
        field,
        format!(
            "the trace spans {span:.0} s, {count:.0} evaluations at the {period} s sync period; \
             a replay runs at most {MAX_EVALUATIONS} (shorten the trace or lengthen the period)"
        ),
    ))
}

/// The time a replay starts at.
fn epoch() -> Result<Timestamp, ReplayError> {
    EPOCH.parse().map_err(|e| invalid("internal epoch", e))
}

/// Replays a parsed `LoadReplay` (its `expect` aside).
fn run_scenario(scenario: &Scenario, text: &str, dir: &Path) -> Result<LoadReplay, ReplayError> {
    let (mut run, trace, period, target) = start(scenario, text, dir)?;
    let epoch = epoch()?;
    let how = scenario.load.interpolation;
    let period = period as f64;
    let t0 = trace.first().map_or(0.0, |s| s.t);
    // How soon the reactive path can meet a rise: it sees it up to a period late, and a pod
    // asked for then is Ready `podStartupSeconds` later.
    let reach = scenario.pod_startup_seconds + period;
    // Evaluations at t0 + k × period, as a controller requeued every period.
    let mut tick: u64 = 0;
    let mut steps = Vec::with_capacity(trace.len());
    for (index, sample) in trace.iter().enumerate() {
        let next = trace.get(index + 1);
        let end = next.map_or(sample.t + scenario.step_seconds, |n| n.t);
        let at = |t: f64| epoch + SignedDuration::from_secs_f64(t);
        let mut acc = StepLine::start(&run, sample, end, at(sample.t), target);
        let (mut scaled, mut resized) = (false, false);
        loop {
            let t = t0 + tick as f64 * period;
            if t >= end {
                break;
            }
            tick += 1;
            if t < sample.t {
                continue;
            }
            let load = load_at(sample, next, t, how);
            let before = load_when(&trace, t - reach, how);
            acc.account(t);
            let first = acc.line.reconciles == 0;
            let (r, joint, changed) = run.reconcile(&load, at(t), first);
            scaled |= r.scaled;
            resized |= changed;
            let line = &mut acc.line;
            line.reconciles += 1;
            if summary::above_overload(r.utilization, target) {
                line.overload_rise = line.overload_rise.max(rise(before.cpu, load.cpu));
            }
            line.peak_utilization = match (line.peak_utilization, r.utilization) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            if first {
                line.replicas = run.workload.replicas();
                line.ready_replicas = i32::try_from(r.ready).unwrap_or(i32::MAX);
                line.utilization = r.utilization;
                line.tuning = r.tuning;
                line.forecast = r
                    .forecast
                    .as_ref()
                    .and_then(cpu_forecast)
                    .map(|m| m as f64 / 1000.0);
                line.predicted_replicas = r.forecast.as_ref().and_then(|f| f.replicas);
                line.predictive = r.predictive;
                line.joint = joint;
            } else if r.predictive.as_ref().is_some_and(|p| p.acting)
                && !line.predictive.as_ref().is_some_and(|p| p.acting)
            {
                // The step shows the first evaluation the forecast acted at, if one did.
                line.predictive = r.predictive;
            }
            acc.replicas = run.workload.replicas();
            acc.needed = run.needed(load.cpu, target);
        }
        acc.account(end);
        let mut line = acc.line;
        line.cpu_request = run.workload.cpu_request;
        line.min_replicas = run.spec.min_replicas.unwrap_or(1);
        line.changed = match (scaled, resized) {
            (true, true) => Some("both".to_owned()),
            (true, false) => Some("replicas".to_owned()),
            (false, true) => Some("requests".to_owned()),
            (false, false) => None,
        };
        steps.push(line);
    }
    Ok(LoadReplay {
        steps,
        vertical: scenario.vpa.is_some(),
        misses: Vec::new(),
        plot_window: None,
    })
}

mod plot;
pub mod summary;
#[cfg(test)]
mod tests;
mod vertical;

use vertical::Vertical;
