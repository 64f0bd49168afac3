//! `vpa-updater replay`: runs one updater loop over a scenario file with no cluster.
//!
//! The scenario (`kind: UpdaterReplay`, see `docs/replay.md`) gives a VPA manifest with its
//! recommendation, the controller flags, the pods' owner and the pods. The same
//! `plimsoll_core::vertical` functions the controller calls decide, in the order the updater would
//! act, whether each pod is evicted, resized in place or skipped, and why.
//!
//! The harness ([`plimsoll_replay`]) prints the lines and maps the result to the exit status:
//! 0 when every `expect` held, 1 when one did not (printed to stderr), 2 when the file is
//! invalid (the message names the field).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use jiff::{SignedDuration, Timestamp};
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_core::quantity::Quantity;
use plimsoll_core::vertical::admission::process_recommendation;
use plimsoll_core::vertical::eviction::{
    Action, Backoff, EvictionConfig, PodAction, UpdatePolicy, plan_updates,
};
use plimsoll_core::vertical::priority::{
    LastTermination, Owner, PodContainer, PodPhase, PodSnapshot, RequestsByContainer, ResizeStatus,
    Resource, Resources, UpdateConfig, parse_observed_containers,
};
use plimsoll_core::vertical::startup_boost::OriginalResources;
use plimsoll_replay::{Invocation, Outcome, ReplayError, Status, expect_kind, miss};
use serde::Deserialize;

/// The scenario file.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// Must be `UpdaterReplay`.
    pub kind: String,
    /// The VPA manifest, with `status.recommendation`.
    pub vpa: VerticalPodAutoscaler,
    /// Controller flags.
    #[serde(default)]
    pub controller: Controller,
    /// The owner of every pod that names none.
    #[serde(default)]
    pub owner: Option<OwnerSpec>,
    /// Other owners pods may name.
    #[serde(default)]
    pub owners: Vec<OwnerSpec>,
    /// The VPA's live pods.
    pub pods: Vec<PodSpec>,
    /// Expected outcome.
    #[serde(default)]
    pub expect: Option<Expect>,
}

/// Updater flags; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Controller {
    /// `--min-replicas` (default 2).
    pub min_replicas: Option<u32>,
    /// `--eviction-tolerance` (default 0.5).
    pub eviction_tolerance: Option<f64>,
    /// Minimum resourceDiff for pods inside the range (default 0.1).
    pub min_change_priority: Option<f64>,
    /// `podLifetimeUpdateThreshold` in seconds (default 43200).
    pub pod_lifetime_update_threshold_seconds: Option<i64>,
    /// `--evict-after-oom-threshold` in seconds (default 600).
    pub evict_after_oom_threshold_seconds: Option<i64>,
}

/// A replica-creating owner.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OwnerSpec {
    /// `ReplicaSet`, `StatefulSet`, `ReplicationController`, `DaemonSet`, `Job`, …
    pub kind: String,
    /// Name.
    pub name: String,
    /// Desired replicas (default: the number of its pods in the file).
    pub replicas: Option<u32>,
}

/// A pod (or, with `count`, several identical pods named `NAME-1` … `NAME-N`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodSpec {
    /// Name.
    pub name: String,
    /// Stands for this many identical pods.
    pub count: Option<usize>,
    /// `Pending`, `Running` (default), `Succeeded`, `Failed`, `Unknown`.
    pub phase: Option<String>,
    /// Age in seconds (default 3600).
    pub started_seconds_ago: Option<i64>,
    /// A container was OOM-killed shortly after starting.
    #[serde(default)]
    pub oom_killed_recently: bool,
    /// Owner as `Kind/name` (one of `owner`/`owners`), or `none`.
    pub owner: Option<String>,
    /// In-place resize state: `Deferred`, `Infeasible`, `InProgress`, `Error`.
    pub resize: Option<String>,
    /// When the updater asked for the resize, in seconds before now.
    pub resize_requested_seconds_ago: Option<i64>,
    /// The message of the pod's resize condition (the kubelet's why).
    pub resize_message: Option<String>,
    /// Seconds since the pod became Ready (default: since it started; never for a Pending pod).
    pub ready_seconds_ago: Option<i64>,
    /// The `vpaObservedContainers` annotation.
    pub observed_containers: Option<String>,
    /// Containers.
    pub containers: Vec<ContainerSpec>,
}

/// A container.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerSpec {
    /// Name.
    pub name: String,
    /// Requests (`cpu`, `memory`).
    #[serde(default)]
    pub requests: BTreeMap<String, QuantityText>,
    /// Limits (`cpu`, `memory`).
    #[serde(default)]
    pub limits: BTreeMap<String, QuantityText>,
    /// The requests the spec asks for while a resize is pending (the kubelet has not applied
    /// them; `requests` are the allocated ones). Default: `requests`.
    #[serde(default)]
    pub desired: BTreeMap<String, QuantityText>,
    /// Resize requests the updater remembers this container's node could not fit (mode
    /// `InPlace`).
    #[serde(default)]
    pub infeasible: BTreeMap<String, QuantityText>,
    /// The container is CPU-boosted (its `vpaCpuStartupBoost/<name>` annotation): its original
    /// resources.
    #[serde(default)]
    pub boosted_from: Option<Original>,
}

/// A container's original resources, as the startup boost annotation records them.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Original {
    /// Requests (`cpu`, `memory`).
    #[serde(default)]
    pub requests: BTreeMap<String, QuantityText>,
    /// Limits (`cpu`, `memory`).
    #[serde(default)]
    pub limits: BTreeMap<String, QuantityText>,
}

/// A quantity written as a string (`500m`, `1Gi`) or a plain number.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum QuantityText {
    /// `"500m"`.
    Text(String),
    /// `2`.
    Integer(i64),
    /// `0.5`.
    Float(f64),
}

impl QuantityText {
    fn text(&self) -> String {
        match self {
            QuantityText::Text(s) => s.clone(),
            QuantityText::Integer(i) => i.to_string(),
            QuantityText::Float(f) => f.to_string(),
        }
    }
}

/// What the scenario expects; lists are compared as sets.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Exactly these pods are evicted.
    pub evicted: Option<Vec<String>>,
    /// Exactly these pods are resized in place.
    pub resized: Option<Vec<String>>,
    /// Exactly these pods are skipped.
    pub skipped: Option<Vec<String>>,
    /// Exactly these pods keep their requests because their node cannot fit the proposal (mode
    /// `InPlace`: the values are remembered and not sent again).
    #[serde(rename = "heldBack")]
    pub held_back: Option<Vec<String>>,
    /// Exactly these pods have their CPU startup boost lowered.
    pub unboosted: Option<Vec<String>>,
}

/// The fixed "now" of a replay; pod ages are relative to it.
fn now() -> Timestamp {
    Timestamp::from_second(1_767_225_600).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Parses a scenario from YAML or JSON text.
pub fn parse(text: &str) -> Result<Scenario, ReplayError> {
    let scenario: Scenario = plimsoll_replay::parse(text)?;
    expect_kind(&scenario.kind, "UpdaterReplay")?;
    if let Err(errs) = scenario.vpa.spec.validate() {
        let list: Vec<String> = errs.0.iter().map(|e| format!("vpa.{e}")).collect();
        return Err(ReplayError::Invalid(list.join("; ")));
    }
    Ok(scenario)
}

fn invalid(path: &str, message: impl std::fmt::Display) -> ReplayError {
    ReplayError::invalid(path, message)
}

fn resources(list: &BTreeMap<String, QuantityText>, path: &str) -> Result<Resources, ReplayError> {
    let mut out = Resources::default();
    for (name, value) in list {
        let Some(resource) = Resource::from_name(name) else {
            return Err(invalid(&format!("{path}.{name}"), "only cpu and memory"));
        };
        let q =
            Quantity::parse(&value.text()).map_err(|e| invalid(&format!("{path}.{name}"), e))?;
        out.set(resource, Some(q));
    }
    Ok(out)
}

fn owner_ref(spec: &OwnerSpec) -> Owner {
    Owner {
        kind: spec.kind.clone(),
        name: spec.name.clone(),
    }
}

/// Builds the pods of the scenario.
pub fn pods(scenario: &Scenario) -> Result<Vec<PodSnapshot>, ReplayError> {
    let now = now();
    let mut out = Vec::new();
    for (i, spec) in scenario.pods.iter().enumerate() {
        let path = format!("pods[{i}]");
        plimsoll_replay::pod_count(out.len(), spec.count.unwrap_or(1), format!("{path}.count"))?;
        for (name, age) in [
            ("startedSecondsAgo", spec.started_seconds_ago),
            (
                "resizeRequestedSecondsAgo",
                spec.resize_requested_seconds_ago,
            ),
            ("readySecondsAgo", spec.ready_seconds_ago),
        ] {
            if let Some(s) = age {
                plimsoll_replay::whole_seconds(s, format!("{path}.{name}"))?;
            }
        }
        let containers = containers(spec, &path)?;
        let (desired_requests, infeasible) = resize_values(spec, &path)?;
        let phase = phase(spec, &path)?;
        let ready_since = (phase == PodPhase::Running).then(|| {
            now - SignedDuration::from_secs(
                spec.ready_seconds_ago
                    .or(spec.started_seconds_ago)
                    .unwrap_or(3600),
            )
        });
        let boosted = spec
            .containers
            .iter()
            .filter_map(|c| {
                let original = c.boosted_from.as_ref()?;
                let text = |m: &BTreeMap<String, QuantityText>| {
                    m.iter().map(|(k, v)| (k.clone(), v.text())).collect()
                };
                Some((
                    c.name.clone(),
                    Some(OriginalResources {
                        requests: text(&original.requests),
                        limits: text(&original.limits),
                    }),
                ))
            })
            .collect();
        let age = SignedDuration::from_secs(spec.started_seconds_ago.unwrap_or(3600));
        let base = PodSnapshot {
            name: spec.name.clone(),
            phase,
            owner: owner(scenario, spec, &path)?,
            last_terminations: last_terminations(spec, &containers, now),
            containers,
            init_containers: Vec::new(),
            observed_containers: observed_containers(spec, &path)?,
            start_time: Some(now - age),
            resize: resize(spec, &path)?,
            resize_message: spec.resize_message.clone(),
            desired_requests,
            last_in_place_attempt: spec
                .resize_requested_seconds_ago
                .map(|s| now - SignedDuration::from_secs(s)),
            infeasible,
            ready_since,
            boosted,
        };
        match spec.count {
            None => out.push(base),
            Some(n) => out.extend((1..=n).map(|k| PodSnapshot {
                name: format!("{}-{k}", spec.name),
                ..base.clone()
            })),
        }
    }
    Ok(out)
}

/// `pods[i].phase` (default `Running`).
fn phase(spec: &PodSpec, path: &str) -> Result<PodPhase, ReplayError> {
    match spec.phase.as_deref().unwrap_or("Running") {
        "Pending" => Ok(PodPhase::Pending),
        "Running" => Ok(PodPhase::Running),
        "Succeeded" => Ok(PodPhase::Succeeded),
        "Failed" => Ok(PodPhase::Failed),
        "Unknown" => Ok(PodPhase::Unknown),
        other => Err(invalid(
            &format!("{path}.phase"),
            format!("unknown phase {other:?}"),
        )),
    }
}

/// `pods[i].owner`: the scenario's `owner` when absent, none for `none`, else one of `owner`
/// and `owners` named `Kind/name`.
fn owner(scenario: &Scenario, spec: &PodSpec, path: &str) -> Result<Option<Owner>, ReplayError> {
    let Some(text) = spec.owner.as_deref() else {
        return Ok(scenario.owner.as_ref().map(owner_ref));
    };
    if text == "none" {
        return Ok(None);
    }
    scenario
        .owner
        .iter()
        .chain(&scenario.owners)
        .find(|o| format!("{}/{}", o.kind, o.name) == text)
        .map(|o| Some(owner_ref(o)))
        .ok_or_else(|| {
            invalid(
                &format!("{path}.owner"),
                format!("{text:?} is not `owner` or in `owners`"),
            )
        })
}

/// `pods[i].resize`: the in-place resize state.
fn resize(spec: &PodSpec, path: &str) -> Result<ResizeStatus, ReplayError> {
    match spec.resize.as_deref() {
        None => Ok(ResizeStatus::None),
        Some("Deferred") => Ok(ResizeStatus::Deferred),
        Some("Infeasible") => Ok(ResizeStatus::Infeasible),
        Some("InProgress") => Ok(ResizeStatus::InProgress),
        Some("Error") => Ok(ResizeStatus::Error),
        Some(other) => Err(invalid(
            &format!("{path}.resize"),
            format!("unknown state {other:?}"),
        )),
    }
}

/// `pods[i].observedContainers`: the `vpaObservedContainers` annotation, parsed.
fn observed_containers(
    spec: &PodSpec,
    path: &str,
) -> Result<Option<BTreeSet<String>>, ReplayError> {
    spec.observed_containers
        .as_deref()
        .map(|text| {
            parse_observed_containers(text).ok_or_else(|| {
                invalid(
                    &format!("{path}.observedContainers"),
                    "not a list of container names",
                )
            })
        })
        .transpose()
}

/// `pods[i].containers`, with their requests and limits.
fn containers(spec: &PodSpec, path: &str) -> Result<Vec<PodContainer>, ReplayError> {
    spec.containers
        .iter()
        .enumerate()
        .map(|(j, c)| {
            let cpath = format!("{path}.containers[{j}]");
            Ok(PodContainer {
                name: c.name.clone(),
                requests: resources(&c.requests, &format!("{cpath}.requests"))?,
                limits: resources(&c.limits, &format!("{cpath}.limits"))?,
            })
        })
        .collect()
}

/// `containers[].desired` (default: the requests) and `containers[].infeasible` (`None` when
/// no container has any).
fn resize_values(
    spec: &PodSpec,
    path: &str,
) -> Result<(RequestsByContainer, Option<RequestsByContainer>), ReplayError> {
    let mut desired = RequestsByContainer::new();
    let mut infeasible = RequestsByContainer::new();
    for (j, c) in spec.containers.iter().enumerate() {
        let cpath = format!("{path}.containers[{j}]");
        let wanted = if c.desired.is_empty() {
            &c.requests
        } else {
            &c.desired
        };
        desired.insert(
            c.name.clone(),
            resources(wanted, &format!("{cpath}.desired"))?,
        );
        if !c.infeasible.is_empty() {
            infeasible.insert(
                c.name.clone(),
                resources(&c.infeasible, &format!("{cpath}.infeasible"))?,
            );
        }
    }
    Ok((desired, (!infeasible.is_empty()).then_some(infeasible)))
}

/// `oomKilledRecently`: the first container was OOM-killed 30 seconds ago, a minute after it
/// started.
fn last_terminations(
    spec: &PodSpec,
    containers: &[PodContainer],
    now: Timestamp,
) -> Vec<LastTermination> {
    match (spec.oom_killed_recently, containers.first()) {
        (true, Some(first)) => vec![LastTermination {
            container: first.name.clone(),
            reason: "OOMKilled".to_owned(),
            started_at: now - SignedDuration::from_secs(60),
            finished_at: now - SignedDuration::from_secs(30),
        }],
        _ => Vec::new(),
    }
}

/// Runs the decision code over a parsed scenario.
pub fn run_scenario(scenario: &Scenario) -> Result<Vec<PodAction>, ReplayError> {
    let pods = pods(scenario)?;
    let policy = UpdatePolicy::from_api(&scenario.vpa).map_err(|e| invalid("vpa", e))?;
    let recommendation =
        plimsoll_core::vertical::admission::recommendations_from_api(&scenario.vpa)
            .map_err(|e| invalid("vpa.status.recommendation", e))?
            .unwrap_or_default();
    let c = &scenario.controller;
    for (name, value) in [
        (
            "podLifetimeUpdateThresholdSeconds",
            c.pod_lifetime_update_threshold_seconds,
        ),
        (
            "evictAfterOomThresholdSeconds",
            c.evict_after_oom_threshold_seconds,
        ),
    ] {
        if let Some(s) = value {
            plimsoll_replay::whole_seconds(s, format!("controller.{name}"))?;
        }
    }
    let defaults = UpdateConfig::default();
    let update_config = UpdateConfig {
        min_change_priority: c
            .min_change_priority
            .unwrap_or(defaults.min_change_priority),
        pod_lifetime_update_threshold: c.pod_lifetime_update_threshold_seconds.map_or(
            defaults.pod_lifetime_update_threshold,
            SignedDuration::from_secs,
        ),
        evict_after_oom_threshold: c.evict_after_oom_threshold_seconds.map_or(
            defaults.evict_after_oom_threshold,
            SignedDuration::from_secs,
        ),
    };
    let eviction_defaults = EvictionConfig::default();
    let eviction_config = EvictionConfig {
        min_replicas: c.min_replicas.unwrap_or(eviction_defaults.min_replicas),
        eviction_tolerance: c
            .eviction_tolerance
            .unwrap_or(eviction_defaults.eviction_tolerance),
    };
    let owners: Vec<&OwnerSpec> = scenario.owner.iter().chain(&scenario.owners).collect();
    let replicas = |owner: &Owner| {
        let spec = owners
            .iter()
            .find(|o| o.kind == owner.kind && o.name == owner.name)?;
        spec.replicas.or_else(|| {
            u32::try_from(
                pods.iter()
                    .filter(|p| p.owner.as_ref() == Some(owner))
                    .count(),
            )
            .ok()
        })
    };
    let recommend = |pod: &PodSnapshot| {
        process_recommendation(
            &pod.containers,
            &recommendation,
            &policy.container_policies,
            None,
            None,
        )
        .containers
    };
    Ok(plan_updates(
        &policy,
        &pods,
        recommend,
        replicas,
        &update_config,
        &eviction_config,
        now(),
    ))
}

/// One output line (`--output json`), fields in the documented order.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Line<'a> {
    /// Pod name.
    pub pod: &'a str,
    /// 1-based position in the update queue; `null` when the pod does not qualify.
    pub priority: Option<usize>,
    /// The pod's resourceDiff (3 decimals).
    pub resource_diff: f64,
    /// `evict`, `resize`, `unboost` or `skip`.
    pub action: &'static str,
    /// Why.
    pub reason: &'a str,
    /// Some container would grow.
    pub scale_up: bool,
    /// Some request lies outside `[lowerBound, upperBound]`.
    pub outside_recommended_range: bool,
}

/// The output line of one action.
pub fn line(action: &PodAction) -> Line<'_> {
    Line {
        pod: &action.pod,
        priority: action.rank,
        resource_diff: round3(action.priority.resource_diff),
        action: action.action.as_str(),
        reason: &action.reason,
        scale_up: action.priority.scale_up,
        outside_recommended_range: action.priority.outside_recommended_range,
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Renders the actions as an aligned table.
pub fn table(actions: &[PodAction]) -> String {
    let rows: Vec<[String; 5]> = actions
        .iter()
        .map(|a| {
            [
                a.pod.clone(),
                a.rank.map_or_else(|| "-".to_owned(), |r| r.to_string()),
                format!("{:.3}", a.priority.resource_diff),
                a.action.as_str().to_owned(),
                a.reason.clone(),
            ]
        })
        .collect();
    let header = ["POD", "PRIORITY", "RESOURCEDIFF", "ACTION", "REASON"];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(header.map(str::to_owned)).chain(rows) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(i, (cell, w))| {
                if i == 4 {
                    cell.clone()
                } else {
                    format!("{cell:<w$}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    out
}

/// The expectations that did not hold, one message each.
pub fn misses(expect: &Expect, actions: &[PodAction]) -> Vec<String> {
    let mut out = Vec::new();
    for (what, wanted, action) in [
        ("evicted", &expect.evicted, Action::Evict),
        ("resized", &expect.resized, Action::Resize),
        ("unboosted", &expect.unboosted, Action::Unboost),
        ("skipped", &expect.skipped, Action::Skip),
    ] {
        let Some(wanted) = wanted else { continue };
        compare(&mut out, what, wanted, actions, |a| a.action == action);
    }
    if let Some(wanted) = &expect.held_back {
        compare(&mut out, "heldBack", wanted, actions, |a| {
            matches!(a.backoff, Backoff::Infeasible(_))
        });
    }
    out
}

/// Adds a miss when the pods `chosen` picks are not exactly `wanted`.
fn compare(
    out: &mut Vec<String>,
    what: &str,
    wanted: &[String],
    actions: &[PodAction],
    chosen: impl Fn(&PodAction) -> bool,
) {
    let mut want: Vec<&str> = wanted.iter().map(String::as_str).collect();
    want.sort_unstable();
    let mut got: Vec<&str> = actions
        .iter()
        .filter(|a| chosen(a))
        .map(|a| a.pod.as_str())
        .collect();
    got.sort_unstable();
    if want != got {
        out.push(miss(1, format!("{what} {want:?}"), format!("{got:?}")));
    }
}

/// A replayed scenario: the updater's actions, in the order it would take them.
#[derive(Debug)]
pub struct Replay {
    /// One action per pod.
    pub actions: Vec<PodAction>,
    /// The expectations that did not hold.
    pub misses: Vec<String>,
}

/// Parses and replays scenario text.
pub fn replay_text(text: &str) -> Result<Replay, ReplayError> {
    let scenario = parse(text)?;
    let actions = run_scenario(&scenario)?;
    let misses = scenario
        .expect
        .as_ref()
        .map(|e| misses(e, &actions))
        .unwrap_or_default();
    Ok(Replay { actions, misses })
}

impl Outcome for Replay {
    type Line<'a> = Line<'a>;

    fn lines(&self) -> Vec<Line<'_>> {
        self.actions.iter().map(line).collect()
    }

    fn table(&self) -> String {
        table(&self.actions)
    }

    fn misses(&self) -> &[String] {
        &self.misses
    }
}

/// `vpa-updater replay`: runs the scenario through the harness and returns the exit status.
pub fn run(invocation: &Invocation<'_>) -> Status {
    plimsoll_replay::run(invocation, |source| replay_text(&source.text))
}
