//! `hpa-plus replay` of a `LoadReplay` (scenarios/FORMAT.md, "A workload driven by a load
//! trace"): one workload whose total CPU usage comes from a trace, pods that take
//! `podStartupSeconds` to become Ready, and the HPA+ deciding through the same
//! [`plimsoll_core::horizontal::decide`] the controller calls, with `minReplicasTuning` through
//! the same [`plimsoll_core::horizontal::tuning::tune`], and `spec.predictive` through the same
//! [`plimsoll_core::horizontal::predictive::forecast`] and
//! [`plimsoll_core::horizontal::predictive::raise`].
//!
//! Each step at `t`:
//! 1. The pods are the workload's replicas; a pod created less than `podStartupSeconds` ago is
//!    not Ready and has no usage sample. The trace's CPU (and memory) is spread evenly over the
//!    Ready pods, on each pod's first container.
//! 2. The observed load of each metric is recorded in the compact
//!    [`LoadHistory`] as the controller records it when no Prometheus is configured.
//! 3. Tuning (when `minReplicasTuning` or its annotation is not off) proposes a `minReplicas`;
//!    in Apply it is written at most once a day, and the decision of this step already uses it.
//! 4. With `spec.predictive` not off, the observed loads are also recorded in a
//!    [`LoadSeries`] with buckets of `stepSeconds`, and the forecast for the next `leadSeconds`
//!    (`auto`: `podStartupSeconds` plus one step) is made from it.
//! 5. The decision, with its history carried over and normalised as the controller keeps it;
//!    in `Scale` a confident forecast then raises it ([`raise`]: scale-up only). A scale-up
//!    creates pods at `t`; a scale-down removes the newest pods first.
//!
//! A `vpa` block is not supported yet, nor a top-level `predictive` key (FORMAT.md puts the
//! settings in the autoscaler's spec): the file is rejected with a message saying so.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use plimsoll_core::api::hpa_plus::{
    HorizontalPodAutoscalerPlus, HorizontalPodAutoscalerPlusSpec, MetricSourceType,
    MinReplicasTuning, Predictive, PredictiveMode, PredictiveStatus, TuningMode,
};
use plimsoll_core::horizontal::load_history::LoadHistory;
use plimsoll_core::horizontal::memory;
use plimsoll_core::horizontal::observation::{ContainerSample, Observation, PodPhase, PodSample};
use plimsoll_core::horizontal::predictive::{
    Forecast, ForecastInput, LoadSeries, RaiseInput, forecast, predictive_status, raise,
};
use plimsoll_core::horizontal::proposals::metrics_of;
use plimsoll_core::horizontal::rollout::Rollout;
use plimsoll_core::horizontal::tuning::{Tuning, TuningInput, record_loads, tune};
use plimsoll_core::horizontal::{ControllerConfig, DecisionInput, History, decide};
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
    #[serde(default)]
    controller: ControllerConfig,
    containers: Vec<ContainerSpec>,
    #[serde(default)]
    pod_startup_seconds: f64,
    step_seconds: f64,
    load: Load,
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
}

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
    /// `null`, or what changed at this step: `replicas`.
    pub changed: Option<String>,
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
}

/// The outcome of a `LoadReplay`.
#[derive(Clone, Debug)]
pub struct LoadReplay {
    /// One line per step.
    pub steps: Vec<LoadLine>,
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
        &[]
    }

    fn chart(&self) -> Option<plimsoll_replay::plot::Chart> {
        Some(plot::chart(&self.steps))
    }
}

/// Renders the lines as an aligned table (the tuning reason in the last column).
pub fn table(steps: &[LoadLine]) -> String {
    let predictive = steps.iter().any(|s| s.predictive.is_some());
    let mut out = String::from("T        REPLICAS  READY  CPU REQ  UTIL   MIN  CHANGED   ");
    if predictive {
        out.push_str("FORECAST  PREDICTED  PREDICTION        ");
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

/// `t,cpu[,memory]` rows after a header naming those columns; `t` must increase.
fn csv_samples(
    text: &str,
    cores: impl Fn(f64, &str) -> Result<i64, ReplayError>,
) -> Result<Vec<Sample>, ReplayError> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<String> = lines
        .next()
        .unwrap_or_default()
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .collect();
    if header.first().map(String::as_str) != Some("t")
        || header.get(1).map(String::as_str) != Some("cpu")
    {
        return Err(invalid("load.csv", "the header must be t,cpu[,memory]"));
    }
    let with_memory = header.get(2).is_some_and(|c| c == "memory");
    let mut out: Vec<Sample> = Vec::new();
    for (row, line) in lines.enumerate() {
        let field = format!("load.csv row {}", row + 1);
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        let number = |k: usize, name: &str| -> Result<f64, ReplayError> {
            cells
                .get(k)
                .and_then(|c| c.parse::<f64>().ok())
                .ok_or_else(|| invalid(&field, format!("column {name} is not a number")))
        };
        let t = number(0, "t")?;
        if out.last().is_some_and(|p| t <= p.t) || !t.is_finite() {
            return Err(invalid(&field, "t must increase"));
        }
        let memory = if with_memory {
            let text = cells.get(2).copied().unwrap_or_default();
            Some(
                milli(&Amount::Text(text.to_owned()), &format!("{field} memory"))
                    .map_err(ReplayError::Invalid)?,
            )
        } else {
            None
        };
        out.push(Sample {
            t,
            cpu: cores(number(1, "cpu")?, &format!("{field} cpu"))?,
            memory,
        });
    }
    if out.is_empty() {
        return Err(invalid("load.csv", "has no rows"));
    }
    Ok(out)
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

/// The autoscaler and the tuning settings in force (spec field, else annotation).
fn autoscaler(
    s: &Scenario,
    text: &str,
) -> Result<(HorizontalPodAutoscalerPlusSpec, MinReplicasTuning), ReplayError> {
    if s.vpa.is_some() {
        return Err(invalid(
            "vpa",
            "joint horizontal and vertical sizing is not supported yet (issue #18)",
        ));
    }
    if s.predictive.is_some() {
        return Err(invalid(
            "predictive",
            "not supported yet: give the settings in autoscaler.spec.predictive",
        ));
    }
    let spec = autoscaler_spec(s.autoscaler.clone(), text).map_err(ReplayError::Invalid)?;
    let metadata: ObjectMeta = s
        .autoscaler
        .get("metadata")
        .cloned()
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| invalid("autoscaler.metadata", e))?
        .unwrap_or_default();
    for (i, m) in metrics_of(&spec).iter().enumerate() {
        let resource = match m.type_ {
            MetricSourceType::Resource => m.resource.as_ref().map(|r| r.name.as_str()),
            MetricSourceType::ContainerResource => {
                m.container_resource.as_ref().map(|r| r.name.as_str())
            }
            _ => None,
        };
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
    Ok((plus.spec, tuning))
}

/// The workload as the replay models it: each pod's creation time, oldest first.
struct Workload {
    born: Vec<Timestamp>,
    startup: SignedDuration,
}

impl Workload {
    fn ready(&self, now: Timestamp) -> usize {
        self.born
            .iter()
            .filter(|b| now - self.startup >= **b)
            .count()
    }

    /// Scales to `replicas`: new pods are created at `now`, the newest go first.
    fn scale(&mut self, replicas: i32, now: Timestamp) {
        let n = usize::try_from(replicas).unwrap_or(0);
        self.born.truncate(n);
        while self.born.len() < n {
            self.born.push(now);
        }
    }

    /// The pods at `now`, Ready ones sharing `load` evenly on their first container.
    fn pods(
        &self,
        template: &PodSample,
        load: &Sample,
        memory_per_pod: Option<i64>,
        now: Timestamp,
    ) -> Vec<PodSample> {
        let ready = i64::try_from(self.ready(now)).unwrap_or(0).max(1);
        let mut k = 0i64;
        self.born
            .iter()
            .enumerate()
            .map(|(i, &born)| {
                let is_ready = now - self.startup >= born;
                let mut pod = PodSample {
                    name: format!("pod-{i}"),
                    phase: PodPhase::Running,
                    ready: Some(is_ready),
                    start_time: Some(born),
                    ready_transition_time: Some(if is_ready { born + self.startup } else { born }),
                    metrics_timestamp: Some(now),
                    ..template.clone()
                };
                if is_ready {
                    // An even split whose parts add up to the trace exactly.
                    let share = |total: i64| total / ready + i64::from(k < total % ready);
                    let memory = load.memory.map(share).or(memory_per_pod);
                    for (j, c) in pod.containers.iter_mut().enumerate() {
                        let first = j == 0;
                        c.usage
                            .insert("cpu".into(), Ok(if first { share(load.cpu) } else { 0 }));
                        if let Some(m) = memory {
                            c.usage
                                .insert("memory".into(), Ok(if first { m } else { 0 }));
                        }
                    }
                    k += 1;
                }
                pod
            })
            .collect()
    }
}

/// The replay's state between steps: what the controller keeps, and the workload.
struct Run<'a> {
    scenario: &'a Scenario,
    spec: HorizontalPodAutoscalerPlusSpec,
    settings: MinReplicasTuning,
    template: PodSample,
    memory_per_pod: Option<i64>,
    cpu_request: i64,
    workload: Workload,
    history: History,
    loads: LoadHistory,
    last_applied: Option<Timestamp>,
    predictive: Predictive,
    series: LoadSeries,
    startup_seconds: i64,
}

impl Run<'_> {
    /// Records the step's loads and tunes, as the controller does when tuning is on; a
    /// proposal to apply lowers the spec's `minReplicas` at once.
    fn tune(&mut self, observed: &Observation, now: Timestamp) -> Option<Tuning> {
        if self.settings.mode == TuningMode::Off {
            return None;
        }
        let days = self.settings.lookback_days();
        record_loads(&mut self.loads, &self.spec, observed, now, days);
        let t = tune(&TuningInput {
            spec: &self.spec,
            settings: &self.settings,
            history: &self.loads,
            pod: &self.template,
            config: &self.scenario.controller,
            last_applied: self.last_applied,
            held_by: None,
            excluded_by: None,
            now,
        });
        if t.apply {
            self.spec.min_replicas = t.proposed;
            self.last_applied = Some(now);
        }
        Some(t)
    }

    /// Records the step's loads and forecasts, as the controller does when prediction is on.
    fn forecast(&mut self, observed: &Observation, now: Timestamp) -> Option<Forecast> {
        if self.predictive.mode == PredictiveMode::Off {
            return None;
        }
        plimsoll_core::horizontal::predictive::record_loads(
            &mut self.series,
            &self.spec,
            &self.predictive,
            observed,
            now,
        );
        Some(forecast(&ForecastInput {
            spec: &self.spec,
            settings: &self.predictive,
            series: &self.series,
            pod: &self.template,
            config: &self.scenario.controller,
            startup_seconds: self.startup_seconds,
            now,
        }))
    }

    /// Decides with the controller's function, raised by a forecast when there is one, and
    /// scales the workload; `changed` when the replicas moved.
    fn decide(
        &mut self,
        observed: &Observation,
        forecast: Option<&Forecast>,
        now: Timestamp,
    ) -> (Option<String>, Option<PredictiveStatus>) {
        let replicas = observed.current_replicas;
        let d = decide(&DecisionInput {
            spec: &self.spec,
            observed,
            history: &self.history,
            config: &self.scenario.controller,
            now,
        });
        let raised = forecast.map(|f| {
            raise(&RaiseInput {
                spec: &self.spec,
                settings: &self.predictive,
                observed,
                config: &self.scenario.controller,
                decision: &d,
                forecast: f,
                now,
            })
        });
        let status = forecast
            .zip(raised.as_ref())
            .map(|(f, r)| predictive_status(f, r));
        let scale_to = raised.map_or(d.scale_to, |r| r.scale_to);
        self.history = d.history;
        let mut changed = None;
        if let Some(to) = scale_to {
            self.history.record_scale(now, replicas, to);
            if to != replicas {
                changed = Some("replicas".to_owned());
            }
            self.workload.scale(to, now);
        }
        // As the controller: keep what a successor would read back.
        self.history = memory::normalized(&self.history);
        (changed, status)
    }

    /// One step of the trace.
    fn step(&mut self, sample: &Sample, now: Timestamp) -> LoadLine {
        let pods = self
            .workload
            .pods(&self.template, sample, self.memory_per_pod, now);
        let ready = self.workload.ready(now);
        let replicas = i32::try_from(self.workload.born.len()).unwrap_or(i32::MAX);
        let observed = Observation {
            current_replicas: replicas,
            pods,
            rollout: Rollout::Settled.state(replicas),
            ..Observation::default()
        };
        let tuning = self.tune(&observed, now);
        let forecast = self.forecast(&observed, now);
        let (changed, predictive) = self.decide(&observed, forecast.as_ref(), now);
        let requested = i64::try_from(ready).unwrap_or(0) * self.cpu_request;
        LoadLine {
            t: sample.t,
            replicas: i32::try_from(self.workload.born.len()).unwrap_or(i32::MAX),
            ready_replicas: i32::try_from(ready).unwrap_or(i32::MAX),
            cpu_request: self.cpu_request,
            utilization: (requested > 0).then(|| {
                // Two decimals: enough to read, stable to print.
                (sample.cpu as f64 * 10_000.0 / requested as f64).round() / 100.0
            }),
            min_replicas: self.spec.min_replicas.unwrap_or(1),
            changed,
            forecast: forecast
                .as_ref()
                .and_then(cpu_forecast)
                .map(|milli| milli as f64 / 1000.0),
            predicted_replicas: forecast.as_ref().and_then(|f| f.replicas),
            predictive,
            load: sample.cpu as f64 / 1000.0,
            tuning,
        }
    }
}

/// The forecast CPU load (millicores) of a forecast's `cpu` metric, if any.
fn cpu_forecast(f: &Forecast) -> Option<i64> {
    f.metrics
        .iter()
        .find(|m| m.metric == "cpu" || m.metric.starts_with("cpu/"))
        .and_then(|m| m.load)
}

/// Replays `LoadReplay` text; files it names are relative to `dir`.
pub fn replay_load_str(text: &str, dir: &Path) -> Result<LoadReplay, ReplayError> {
    let scenario: Scenario = plimsoll_replay::parse(text)?;
    plimsoll_replay::expect_kind(&scenario.kind, "LoadReplay")?;
    let (spec, settings) = autoscaler(&scenario, text)?;
    let trace = samples(&scenario, dir)?;
    let template = template(&scenario)?;
    let memory_per_pod = scenario
        .load
        .memory_per_pod
        .as_ref()
        .map(|a| milli(a, "load.memoryPerPod"))
        .transpose()
        .map_err(ReplayError::Invalid)?;
    if !(scenario.pod_startup_seconds.is_finite() && scenario.pod_startup_seconds >= 0.0) {
        return Err(invalid("podStartupSeconds", "must be a number >= 0"));
    }
    let epoch: Timestamp = EPOCH.parse().map_err(|e| invalid("internal epoch", e))?;
    let startup = SignedDuration::from_secs_f64(scenario.pod_startup_seconds);
    let cpu_request = template
        .containers
        .iter()
        .filter_map(|c| c.requests.get("cpu"))
        .sum();
    let initial = usize::try_from(spec.min_replicas.unwrap_or(1).max(1)).unwrap_or(1);
    let predictive = spec.predictive.clone().unwrap_or_default();
    // Buckets of one step: the replay observes the workload once per step.
    let series = LoadSeries::new(scenario.step_seconds.round().max(1.0) as i64);
    let startup_seconds = scenario.pod_startup_seconds.ceil() as i64;
    let mut run = Run {
        scenario: &scenario,
        spec,
        settings,
        template,
        memory_per_pod,
        cpu_request,
        workload: Workload {
            // The starting pods are long Ready.
            born: vec![epoch - startup - SignedDuration::from_hours(1); initial],
            startup,
        },
        history: History::default(),
        loads: LoadHistory::default(),
        last_applied: None,
        predictive,
        series,
        startup_seconds,
    };
    let steps = trace
        .iter()
        .map(|sample| run.step(sample, epoch + SignedDuration::from_secs_f64(sample.t)))
        .collect();
    Ok(LoadReplay { steps })
}

mod plot;
#[cfg(test)]
mod tests;
