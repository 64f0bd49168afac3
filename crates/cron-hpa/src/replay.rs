//! `cron-hpa replay`: run a `CronReplay` scenario through the controller's own schedule
//! decision, [`plimsoll_core::schedule::plan::evaluate`] (called by [`plan::plan`] at every
//! instant a job fires, as a controller woken then would call it), and through the
//! controller's own job history ([`plimsoll_core::schedule::history`]) across edits of the
//! spec.
//!
//! A scenario (see docs/replay.md) holds a `CronHorizontalPodAutoscaler` manifest, a window
//! `[from, to)`, optionally `edits` (the spec as the user changes it, in time order, valid or
//! not) and the controller's `missedJobGraceSeconds`, and optionally the exact list of lines
//! expected. The output is one line per firing in time order (ties in spec order): `at`
//! (RFC 3339, UTC), `job`, `targetSize`, `skipped` (`null`, `excludedDate`, `runOnceDone` or
//! `missed`), plus `ranAt` for a firing run late and `missedCount` for missed ones; and one
//! line per edit: `at`, `edit` (its number, from 1), `invalidSpec` (the problems, or `null`)
//! and `jobs`, each job's condition after the edit (`job`, `state`, `lastProbeTime`).
//!
//! At an edit the replay does what the controller does when it sees the new spec: an invalid
//! spec sets `invalidSpec` and leaves the conditions alone; a valid one is evaluated at once,
//! from where the last evaluation stopped and with the grace (a firing that fell while the spec
//! was invalid runs now if it is recent enough, older ones are missed), keeping the history of
//! every job whose version did not change.
//!
//! The harness ([`plimsoll_replay`]) prints the lines and maps the result to the exit status:
//! 0 when every expectation held, 1 when one did not (each miss printed as
//! `step N: expected …, got …`, N counting lines from 0), 2 when the file is invalid (the
//! message names the field).

use std::fmt::Write as _;

use jiff::{SignedDuration, Timestamp};
use plimsoll_core::api::cron::{
    CronHorizontalPodAutoscaler, CronHorizontalPodAutoscalerSpec,
    CronHorizontalPodAutoscalerStatus, JobCondition, JobState,
};
use plimsoll_core::schedule::history;
use plimsoll_core::schedule::plan::{
    self, CompiledSpec, Evaluation, Firing, JobProgress, MAX_FIRINGS, evaluate,
};
use plimsoll_replay::{Invocation, Outcome, ReplayError, Status, expect_kind, miss};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `--missed-job-grace`'s default, seconds: what `controller.missedJobGraceSeconds` defaults
/// to.
pub const DEFAULT_MISSED_JOB_GRACE_SECONDS: i64 = 300;

/// The longest `controller.missedJobGraceSeconds` a scenario may set (a year).
const MAX_GRACE_SECONDS: i64 = 366 * 24 * 3600;

/// A parsed `CronReplay` scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The object under test, as it is at `from`.
    pub cronhpa: CronHorizontalPodAutoscaler,
    /// Window start (inclusive).
    pub from: Timestamp,
    /// Window end (exclusive).
    pub to: Timestamp,
    /// Later versions of the spec, in time order, each strictly inside the window.
    pub edits: Vec<Edit>,
    /// `--missed-job-grace` of the controller.
    pub missed_job_grace: SignedDuration,
    /// The exact expected lines, when given.
    pub expect: Option<Vec<Line>>,
}

/// The spec as the user changes it at `at`.
#[derive(Clone, Debug)]
pub struct Edit {
    /// When the new spec is written.
    pub at: Timestamp,
    /// The whole new spec (it need not validate).
    pub spec: CronHorizontalPodAutoscalerSpec,
}

/// One output line: a firing, or what an edit left in the status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Line {
    /// A firing.
    Firing(FiringLine),
    /// An edit.
    Edit(EditLine),
}

/// A firing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FiringLine {
    /// When the job fires (RFC 3339, UTC); for `missed`, the last missed firing.
    pub at: Timestamp,
    /// The job's name.
    pub job: String,
    /// The size the job sets.
    pub target_size: i32,
    /// `null` when the job runs, else `excludedDate`, `runOnceDone` or `missed`.
    #[serde(default)]
    pub skipped: Option<String>,
    /// When the controller ran it, if later than `at` (a firing the controller could only
    /// evaluate at an edit, e.g. one that fell while the spec was invalid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ran_at: Option<Timestamp>,
    /// For `skipped: missed`: how many firings of the job were missed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed_count: Option<usize>,
}

/// What an edit left in the status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditLine {
    /// When the spec was written.
    pub at: Timestamp,
    /// The edit's number in `edits`, from 1.
    pub edit: usize,
    /// `status.invalidSpec.message`: the problems, or `null` when the spec is valid.
    #[serde(default)]
    pub invalid_spec: Option<String>,
    /// `status.conditions` after the edit.
    #[serde(default)]
    pub jobs: Vec<JobLine>,
}

/// One job condition of an [`EditLine`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobLine {
    /// The job's name.
    pub job: String,
    /// `Submitted`, `Succeed` or `Failed`.
    pub state: JobState,
    /// The submission time while `Submitted`; the firing that ran (or was last missed)
    /// otherwise.
    #[serde(default)]
    pub last_probe_time: Option<Timestamp>,
}

impl FiringLine {
    fn from_firing(f: &Firing) -> Self {
        Self {
            at: f.at,
            job: f.job.clone(),
            target_size: f.target_size,
            skipped: f.skipped.map(|s| s.as_str().to_string()),
            ran_at: None,
            missed_count: None,
        }
    }
}

impl Line {
    fn describe(&self) -> String {
        match self {
            Self::Firing(f) => {
                let mut text = format!(
                    "{{at: {}, job: {}, targetSize: {}, skipped: {}",
                    f.at,
                    f.job,
                    f.target_size,
                    f.skipped.as_deref().unwrap_or("null")
                );
                // Writing to a String cannot fail.
                if let Some(ran) = f.ran_at {
                    let _ = write!(text, ", ranAt: {ran}");
                }
                if let Some(count) = f.missed_count {
                    let _ = write!(text, ", missedCount: {count}");
                }
                text + "}"
            }
            Self::Edit(e) => format!(
                "{{at: {}, edit: {}, invalidSpec: {}, jobs: [{}]}}",
                e.at,
                e.edit,
                e.invalid_spec.as_deref().unwrap_or("null"),
                jobs_text(&e.jobs)
            ),
        }
    }
}

/// `name State lastProbeTime` per job, comma-separated.
fn jobs_text(jobs: &[JobLine]) -> String {
    jobs.iter()
        .map(|j| {
            format!(
                "{} {:?} {}",
                j.job,
                j.state,
                j.last_probe_time
                    .map_or_else(|| "-".to_owned(), |t| t.to_string())
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The result of a replay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Every firing and edit in the window, in order.
    pub lines: Vec<Line>,
    /// One `step N: expected …, got …` message per expectation that did not hold.
    pub misses: Vec<String>,
}

/// The fields a scenario may have.
const FIELDS: [&str; 7] = [
    "kind",
    "cronhpa",
    "from",
    "to",
    "edits",
    "controller",
    "expect",
];

/// Parses a scenario from YAML (or JSON) text.
pub fn parse(text: &str) -> Result<Scenario, ReplayError> {
    let doc: Value = serde_saphyr::from_str(text)
        .map_err(|e| ReplayError::Invalid(format!("not a YAML or JSON document: {e}")))?;
    let Value::Object(map) = doc else {
        return Err(ReplayError::Invalid(
            "the scenario must be a mapping with kind, cronhpa, from and to".into(),
        ));
    };
    match map.get("kind") {
        Some(Value::String(kind)) => expect_kind(kind, "CronReplay")?,
        Some(other) => {
            return Err(ReplayError::invalid(
                "kind",
                format!("must be CronReplay, got {other}"),
            ));
        }
        None => return Err(ReplayError::invalid("kind", "missing (must be CronReplay)")),
    }
    if let Some(unknown) = map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(ReplayError::invalid(
            unknown,
            format!("unknown field (expected {})", FIELDS.join(", ")),
        ));
    }
    let cronhpa = cronhpa(&map)?;
    if let Err(errors) = cronhpa.spec.validate() {
        let all: Vec<String> = errors.0.iter().map(|e| format!("cronhpa.{e}")).collect();
        return Err(ReplayError::Invalid(all.join("; ")));
    }
    let from = timestamp(&map, "from")?;
    let to = timestamp(&map, "to")?;
    if from >= to {
        return Err(ReplayError::invalid(
            "to",
            format!("must be after from ({from}), got {to}"),
        ));
    }
    let edits = edits(&map, from, to)?;
    let missed_job_grace = missed_job_grace(&map)?;
    let expect = match map.get("expect") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    expected_line(item).map_err(|e| ReplayError::invalid(format!("expect[{i}]"), e))
                })
                .collect::<Result<_, _>>()?,
        ),
        Some(_) => {
            return Err(ReplayError::invalid("expect", "must be a list of lines"));
        }
    };
    Ok(Scenario {
        cronhpa,
        from,
        to,
        edits,
        missed_job_grace,
        expect,
    })
}

/// An `expect` entry: an edit line when it has `edit`, else a firing line.
fn expected_line(item: &Value) -> Result<Line, serde_json::Error> {
    if item.get("edit").is_some() {
        serde_json::from_value(item.clone()).map(Line::Edit)
    } else {
        serde_json::from_value(item.clone()).map(Line::Firing)
    }
}

/// `edits`: each `{at, spec}`, strictly inside `(from, to)` and in time order.
fn edits(
    map: &serde_json::Map<String, Value>,
    from: Timestamp,
    to: Timestamp,
) -> Result<Vec<Edit>, ReplayError> {
    let items = match map.get("edits") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(ReplayError::invalid(
                "edits",
                "must be a list of {at, spec}",
            ));
        }
    };
    let mut out: Vec<Edit> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let field = format!("edits[{i}]");
        let Value::Object(edit) = item else {
            return Err(ReplayError::invalid(field, "must be a mapping {at, spec}"));
        };
        if let Some(unknown) = edit.keys().find(|k| !["at", "spec"].contains(&k.as_str())) {
            return Err(ReplayError::invalid(
                format!("{field}.{unknown}"),
                "unknown field (expected at, spec)",
            ));
        }
        let at = timestamp(edit, "at").map_err(|e| match e {
            ReplayError::Invalid(message) => ReplayError::Invalid(format!("{field}.{message}")),
            other => other,
        })?;
        let after = out.last().map_or(from, |e| e.at);
        if at <= after || at >= to {
            return Err(ReplayError::invalid(
                format!("{field}.at"),
                format!("must be after {after} and before to ({to}), got {at}"),
            ));
        }
        let spec = edit
            .get("spec")
            .ok_or_else(|| ReplayError::invalid(format!("{field}.spec"), "missing"))
            .and_then(|spec| {
                serde_json::from_value(spec.clone())
                    .map_err(|e| ReplayError::invalid(format!("{field}.spec"), e))
            })?;
        out.push(Edit { at, spec });
    }
    Ok(out)
}

/// `controller.missedJobGraceSeconds`, the only controller setting a cron replay reads.
fn missed_job_grace(map: &serde_json::Map<String, Value>) -> Result<SignedDuration, ReplayError> {
    let seconds = match map.get("controller") {
        None | Some(Value::Null) => DEFAULT_MISSED_JOB_GRACE_SECONDS,
        Some(Value::Object(controller)) => {
            if let Some(unknown) = controller
                .keys()
                .find(|k| k.as_str() != "missedJobGraceSeconds")
            {
                return Err(ReplayError::invalid(
                    format!("controller.{unknown}"),
                    "unknown field (expected missedJobGraceSeconds)",
                ));
            }
            match controller.get("missedJobGraceSeconds") {
                None => DEFAULT_MISSED_JOB_GRACE_SECONDS,
                Some(v) => v
                    .as_i64()
                    .filter(|s| (0..=MAX_GRACE_SECONDS).contains(s))
                    .ok_or_else(|| {
                        ReplayError::invalid(
                            "controller.missedJobGraceSeconds",
                            format!("must be whole seconds from 0 to a year, got {v}"),
                        )
                    })?,
            }
        }
        Some(_) => {
            return Err(ReplayError::invalid(
                "controller",
                "must be a mapping {missedJobGraceSeconds}",
            ));
        }
    };
    Ok(SignedDuration::from_secs(seconds))
}

/// The `cronhpa` manifest. `apiVersion`, `kind` and `metadata` may be left out (a scenario is
/// about the spec); when given, they must name this kind.
fn cronhpa(
    map: &serde_json::Map<String, Value>,
) -> Result<CronHorizontalPodAutoscaler, ReplayError> {
    let Some(Value::Object(manifest)) = map.get("cronhpa") else {
        return Err(ReplayError::invalid(
            "cronhpa",
            "missing or not a mapping (a CronHorizontalPodAutoscaler manifest)",
        ));
    };
    let mut manifest = manifest.clone();
    let expected = [
        ("apiVersion", "autoscaling.plimsoll.dev/v1alpha1"),
        ("kind", "CronHorizontalPodAutoscaler"),
    ];
    for (key, want) in expected {
        match manifest.get(key) {
            None => {
                manifest.insert(key.into(), Value::String(want.into()));
            }
            Some(Value::String(got)) if got == want => {}
            Some(got) => {
                return Err(ReplayError::invalid(
                    format!("cronhpa.{key}"),
                    format!("must be {want}, got {got}"),
                ));
            }
        }
    }
    manifest
        .entry("metadata")
        .or_insert_with(|| serde_json::json!({"name": "replay", "namespace": "default"}));
    serde_json::from_value(Value::Object(manifest)).map_err(|e| ReplayError::invalid("cronhpa", e))
}

fn timestamp(map: &serde_json::Map<String, Value>, name: &str) -> Result<Timestamp, ReplayError> {
    match map.get(name) {
        Some(Value::String(s)) => s.parse().map_err(|e| {
            ReplayError::invalid(
                name,
                format!("{s:?} is not an RFC 3339 time like 2026-03-28T00:00:00Z: {e}"),
            )
        }),
        Some(other) => Err(ReplayError::invalid(
            name,
            format!("must be an RFC 3339 time string, got {other}"),
        )),
        None => Err(ReplayError::invalid(name, "missing")),
    }
}

/// The controller as the replay runs it: the status it keeps and where its last evaluation
/// stopped.
struct Controller {
    uid: String,
    grace: SignedDuration,
    status: CronHorizontalPodAutoscalerStatus,
    last_evaluated: Timestamp,
    lines: Vec<Line>,
}

impl Controller {
    /// The controller at `from`: every job of `spec` submitted then (the object existed before
    /// the window, so a firing at `from` runs).
    fn new(
        uid: String,
        grace: SignedDuration,
        spec: &CronHorizontalPodAutoscalerSpec,
        from: Timestamp,
    ) -> Self {
        let conditions = spec
            .jobs
            .iter()
            .map(|job| history::condition(&uid, job, JobState::Submitted, from, String::new()))
            .collect();
        Self {
            status: CronHorizontalPodAutoscalerStatus {
                conditions,
                ..CronHorizontalPodAutoscalerStatus::default()
            },
            uid,
            grace,
            last_evaluated: from
                .checked_sub(SignedDuration::from_nanos(1))
                .unwrap_or(from),
            lines: Vec::new(),
        }
    }

    fn push(&mut self, line: Line) -> Result<(), ReplayError> {
        if self.lines.len() >= MAX_FIRINGS {
            return Err(ReplayError::Invalid(format!(
                "more than {MAX_FIRINGS} lines; use a shorter window"
            )));
        }
        self.lines.push(line);
        Ok(())
    }

    /// The firings of `spec` in `[from, to)`, each evaluated at its instant as the controller
    /// woken then does; a run is recorded in its job's condition.
    fn run(
        &mut self,
        spec: &CronHorizontalPodAutoscalerSpec,
        compiled: &CompiledSpec,
        progress: &[JobProgress],
        from: Timestamp,
        to: Timestamp,
    ) -> Result<(), ReplayError> {
        let firings = plan::plan(compiled, progress, from, to)
            .map_err(|e| ReplayError::Invalid(e.to_string()))?;
        for f in &firings {
            if f.skipped.is_none() {
                self.status.conditions[f.job_index] = history::condition(
                    &self.uid,
                    &spec.jobs[f.job_index],
                    JobState::Succeed,
                    f.at,
                    String::new(),
                );
            }
            self.last_evaluated = f.at;
            self.push(Line::Firing(FiringLine::from_firing(f)))?;
        }
        Ok(())
    }

    /// Edit `number` (from 1): the controller sees the new spec at `edit.at`; then its
    /// firings until `until`.
    fn edit(&mut self, number: usize, edit: &Edit, until: Timestamp) -> Result<(), ReplayError> {
        let spec = &edit.spec;
        let compiled = match history::check(spec) {
            Ok(compiled) => compiled,
            Err(problems) => {
                self.status = history::invalid_status(
                    Some(&self.status),
                    self.status.conditions.clone(),
                    spec.jobs.len(),
                    None,
                    &problems,
                    edit.at,
                );
                return self.push(self.edit_line(number, edit.at));
            }
        };
        let known = history::known_conditions(&self.uid, spec, &[&self.status.conditions]);
        let progress = history::progress(spec, &known, edit.at);
        let evaluation = evaluate(
            &compiled,
            &progress,
            self.last_evaluated,
            edit.at,
            self.grace,
        );
        let conditions = self.settle(spec, known, &evaluation, edit.at);
        self.status = CronHorizontalPodAutoscalerStatus {
            conditions,
            scale_up_keep_window: self.status.scale_up_keep_window,
            job_count: Some(i32::try_from(spec.jobs.len()).unwrap_or(i32::MAX)),
            observed_generation: None,
            invalid_spec: None,
            // The replay models the jobs, not the cluster: no target to resolve, no Ready.
            ready: None,
            next_run: None,
        };
        self.push(self.edit_line(number, edit.at))?;
        for line in evaluation_lines(spec, &evaluation, edit.at) {
            self.push(Line::Firing(line))?;
        }
        self.last_evaluated = edit.at;
        let known: Vec<Option<JobCondition>> =
            self.status.conditions.iter().cloned().map(Some).collect();
        let progress = history::progress(spec, &known, edit.at);
        let after = edit
            .at
            .checked_add(SignedDuration::from_nanos(1))
            .unwrap_or(edit.at);
        self.run(spec, &compiled, &progress, after, until)
    }

    /// The conditions after an evaluation at `now` in which every due job ran (the replay has
    /// no target to fail): as the controller sets them, a run `Succeed`s at its firing, a job
    /// that missed firings and did not run is `Failed` at the last one, a job without a
    /// condition is `Submitted` now.
    fn settle(
        &self,
        spec: &CronHorizontalPodAutoscalerSpec,
        mut known: Vec<Option<JobCondition>>,
        evaluation: &Evaluation,
        now: Timestamp,
    ) -> Vec<JobCondition> {
        let condition = |index: usize, state, at| {
            history::condition(&self.uid, &spec.jobs[index], state, at, String::new())
        };
        for f in &evaluation.due {
            known[f.job_index] = Some(condition(f.job_index, JobState::Succeed, f.at));
        }
        for m in &evaluation.missed {
            if !evaluation.due.iter().any(|f| f.job_index == m.job_index) {
                known[m.job_index] = Some(condition(m.job_index, JobState::Failed, m.last));
            }
        }
        known
            .into_iter()
            .enumerate()
            .map(|(index, c)| c.unwrap_or_else(|| condition(index, JobState::Submitted, now)))
            .collect()
    }

    fn edit_line(&self, number: usize, at: Timestamp) -> Line {
        Line::Edit(EditLine {
            at,
            edit: number,
            invalid_spec: self.status.invalid_spec.as_ref().map(|i| i.message.clone()),
            jobs: self
                .status
                .conditions
                .iter()
                .map(|c| JobLine {
                    job: c.name.clone(),
                    state: c.state,
                    last_probe_time: c.last_probe_time.as_ref().map(|t| t.0),
                })
                .collect(),
        })
    }
}

/// The lines of an evaluation at an edit's instant `now`, in time order (ties in spec order):
/// the firings it skipped, the ones it ran (`ranAt` when late) and one `missed` line per job.
fn evaluation_lines(
    spec: &CronHorizontalPodAutoscalerSpec,
    evaluation: &Evaluation,
    now: Timestamp,
) -> Vec<FiringLine> {
    let mut lines: Vec<(Timestamp, usize, FiringLine)> = Vec::new();
    for f in evaluation.skipped.iter().chain(&evaluation.due) {
        let mut line = FiringLine::from_firing(f);
        line.ran_at = (f.skipped.is_none() && f.at < now).then_some(now);
        lines.push((f.at, f.job_index, line));
    }
    for m in &evaluation.missed {
        lines.push((
            m.last,
            m.job_index,
            FiringLine {
                at: m.last,
                job: m.job.clone(),
                target_size: spec.jobs[m.job_index].target_size,
                skipped: Some("missed".to_owned()),
                ran_at: None,
                missed_count: Some(m.count),
            },
        ));
    }
    lines.sort_by_key(|(at, index, _)| (*at, *index));
    lines.into_iter().map(|(_, _, line)| line).collect()
}

/// Runs the scenario's window through the controller's evaluation, edit by edit, and checks it
/// against `expect`.
pub fn replay(scenario: &Scenario) -> Result<Report, ReplayError> {
    let spec = &scenario.cronhpa.spec;
    let compiled =
        CompiledSpec::compile(spec).map_err(|e| ReplayError::Invalid(format!("cronhpa.{e}")))?;
    let uid = scenario.cronhpa.metadata.uid.clone().unwrap_or_default();
    let mut controller = Controller::new(uid, scenario.missed_job_grace, spec, scenario.from);
    let first_edit = scenario.edits.first().map_or(scenario.to, |e| e.at);
    controller.run(spec, &compiled, &[], scenario.from, first_edit)?;
    for (i, edit) in scenario.edits.iter().enumerate() {
        let until = scenario.edits.get(i + 1).map_or(scenario.to, |e| e.at);
        controller.edit(i + 1, edit, until)?;
    }
    let lines = controller.lines;
    let misses = scenario
        .expect
        .as_ref()
        .map(|expect| misses(expect, &lines))
        .unwrap_or_default();
    Ok(Report { lines, misses })
}

/// Compares the lines with the expected list, position by position.
fn misses(expect: &[Line], lines: &[Line]) -> Vec<String> {
    (0..lines.len().max(expect.len()))
        .filter_map(|i| match (expect.get(i), lines.get(i)) {
            (Some(want), Some(got)) if want == got => None,
            (Some(want), Some(got)) => Some(miss(i, want.describe(), got.describe())),
            (Some(want), None) => Some(miss(i, want.describe(), "no line")),
            (None, Some(got)) => Some(miss(i, "no line", got.describe())),
            (None, None) => None,
        })
        .collect()
}

/// Parses and replays scenario text.
pub fn replay_text(text: &str) -> Result<Report, ReplayError> {
    replay(&parse(text)?)
}

/// The lines as an aligned table; an edit's row says whether the spec is valid and each job's
/// state.
pub fn table(report: &Report) -> String {
    let job_width = report
        .lines
        .iter()
        .map(|l| match l {
            Line::Firing(f) => f.job.len(),
            Line::Edit(_) => "edit 10".len(),
        })
        .max()
        .unwrap_or(0)
        .max(3);
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(
        out,
        "{:<20}  {:<job_width$}  {:>11}  SKIPPED",
        "AT", "JOB", "TARGET-SIZE"
    );
    for line in &report.lines {
        let _ = match line {
            Line::Firing(l) => {
                let mut skipped = l.skipped.clone().unwrap_or_else(|| "-".to_owned());
                if let Some(count) = l.missed_count {
                    let _ = write!(skipped, " ({count})");
                }
                if let Some(ran) = l.ran_at {
                    let _ = write!(skipped, " ran at {ran}");
                }
                writeln!(
                    out,
                    "{:<20}  {:<job_width$}  {:>11}  {skipped}",
                    l.at.to_string(),
                    l.job,
                    l.target_size,
                )
            }
            Line::Edit(e) => writeln!(
                out,
                "{:<20}  {:<job_width$}  {:>11}  {}; {}",
                e.at.to_string(),
                format!("edit {}", e.edit),
                "",
                e.invalid_spec
                    .as_deref()
                    .map_or_else(|| "valid".to_owned(), |p| format!("invalid: {p}")),
                jobs_text(&e.jobs)
            ),
        };
    }
    out
}

impl Outcome for Report {
    type Line<'a> = &'a Line;

    fn lines(&self) -> Vec<&Line> {
        self.lines.iter().collect()
    }

    fn table(&self) -> String {
        table(self)
    }

    fn misses(&self) -> &[String] {
        &self.misses
    }
}

/// `cron-hpa replay`: runs the scenario through the harness and returns the exit status.
pub fn run(invocation: &Invocation<'_>) -> Status {
    plimsoll_replay::run(invocation, |source| replay_text(&source.text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misses_are_reported_per_step() {
        let at: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let line = |job: &str, size| {
            Line::Firing(FiringLine {
                at,
                job: job.into(),
                target_size: size,
                skipped: None,
                ran_at: None,
                missed_count: None,
            })
        };
        let report = Report {
            lines: vec![line("a", 1)],
            misses: vec![],
        };
        assert_eq!(Status::from_misses(&report.misses).code(), 0);
        let mut json = Vec::new();
        plimsoll_replay::output::json_lines(report.lines(), &mut json).unwrap();
        assert_eq!(
            String::from_utf8(json).unwrap(),
            "{\"at\":\"2026-01-01T00:00:00Z\",\"job\":\"a\",\"targetSize\":1,\"skipped\":null}\n"
        );
        let table = table(&report);
        assert!(table.starts_with("AT "), "{table}");
        assert!(table.contains("2026-01-01T00:00:00Z  a"), "{table}");
        let missed = misses(&[line("a", 2)], &report.lines);
        assert_eq!(missed.len(), 1);
        assert!(
            missed[0]
                .starts_with("step 0: expected {at: 2026-01-01T00:00:00Z, job: a, targetSize: 2")
        );
    }

    #[test]
    fn invalid_scenarios_name_the_field() {
        let head = "kind: CronReplay\ncronhpa: {spec: {scaleTargetRef: {kind: Deployment, name: w}, jobs: [{name: a, schedule: '@daily', targetSize: 1}]}}\nfrom: '2026-01-01T00:00:00Z'\nto: '2026-01-03T00:00:00Z'\n";
        let cases = [
            ("kind: Nope".to_owned(), "kind: must be CronReplay"),
            ("kind: CronReplay\nfrom: x".to_owned(), "cronhpa: missing"),
            (
                "kind: CronReplay\ncronhpa: {kind: Deployment}".to_owned(),
                "cronhpa.kind: must be CronHorizontalPodAutoscaler",
            ),
            (
                "kind: CronReplay\ncronhpa: {spec: {jobs: []}}".to_owned(),
                "cronhpa: missing field `scaleTargetRef`",
            ),
            ("kind: CronReplay\nfoo: 1".to_owned(), "foo: unknown field"),
            ("- a\n- b".to_owned(), "must be a mapping"),
            (
                format!("{head}edits: [{{at: '2025-01-01T00:00:00Z', spec: {{}}}}]"),
                "edits[0].at: must be after 2026-01-01T00:00:00Z",
            ),
            (
                format!("{head}edits: [{{at: '2026-01-02T00:00:00Z', spec: {{jobs: []}}}}]"),
                "edits[0].spec: missing field `scaleTargetRef`",
            ),
            (
                format!("{head}edits: [{{at: '2026-01-02T00:00:00Z'}}]"),
                "edits[0].spec: missing",
            ),
            (
                format!("{head}edits: [{{at: 'noon', spec: {{}}}}]"),
                "edits[0].at: \"noon\" is not an RFC 3339 time",
            ),
            (
                format!("{head}controller: {{missedJobGraceSeconds: -1}}"),
                "controller.missedJobGraceSeconds: must be whole seconds",
            ),
            (
                format!("{head}expect: [{{at: '2026-01-02T00:00:00Z', edit: 1, colour: red}}]"),
                "expect[0]: unknown field `colour`",
            ),
        ];
        for (text, want) in cases {
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }

    fn scenario(edits: &str) -> Report {
        let text = format!(
            "kind: CronReplay
cronhpa:
  metadata: {{name: sale, uid: u-1}}
  spec:
    scaleTargetRef: {{kind: Deployment, name: shop}}
    jobs:
      - {{name: sale, schedule: '0 0 20 * * *', targetSize: 50, runOnce: true}}
      - {{name: daily, schedule: '0 0 8 * * *', targetSize: 3}}
from: '2026-11-01T00:00:00Z'
to: '2026-11-05T00:00:00Z'
{edits}"
        );
        replay_text(&text).unwrap()
    }

    fn firings(report: &Report) -> Vec<(String, String, Option<String>)> {
        report
            .lines
            .iter()
            .filter_map(|l| match l {
                Line::Firing(f) => Some((f.at.to_string(), f.job.clone(), f.skipped.clone())),
                Line::Edit(_) => None,
            })
            .collect()
    }

    #[test]
    fn an_invalid_edit_and_its_fix_keep_the_history() {
        let same = "{scaleTargetRef: {kind: Deployment, name: shop}, jobs: [{name: sale, schedule: '0 0 20 * * *', targetSize: 50, runOnce: true}, {name: daily, schedule: '0 0 8 * * *', targetSize: 3}]}";
        let report = scenario(&format!(
            "edits:
  - {{at: '2026-11-02T12:00:00Z', spec: {{scaleTargetRef: {{kind: Deployment, name: shop}}, timeZone: Mars/Base, jobs: [{{name: sale, schedule: '0 0 20 * * *', targetSize: 50, runOnce: true}}]}}}}
  - {{at: '2026-11-03T08:03:00Z', spec: {same}}}
"
        ));
        let Line::Edit(invalid) = &report.lines[3] else {
            panic!("{:?}", report.lines[3]);
        };
        assert!(
            invalid
                .invalid_spec
                .as_deref()
                .is_some_and(|p| p.contains("spec.timeZone")),
            "{invalid:?}"
        );
        let Line::Edit(fixed) = &report.lines[4] else {
            panic!("{:?}", report.lines[4]);
        };
        assert_eq!(fixed.invalid_spec, None);
        // The sale ran once on the 1st and stays done; daily keeps its last run.
        assert_eq!(
            fixed.jobs[0],
            JobLine {
                job: "sale".into(),
                state: JobState::Succeed,
                last_probe_time: Some("2026-11-01T20:00:00Z".parse().unwrap()),
            }
        );
        let got = firings(&report);
        // The firing while invalid runs at the fix, within the grace.
        let late = report
            .lines
            .iter()
            .find_map(|l| match l {
                Line::Firing(f) if f.job == "daily" && f.ran_at.is_some() => Some(f),
                _ => None,
            })
            .unwrap();
        assert_eq!(
            late.at,
            "2026-11-03T08:00:00Z".parse::<Timestamp>().unwrap()
        );
        assert_eq!(late.ran_at, Some("2026-11-03T08:03:00Z".parse().unwrap()));
        assert!(
            got.iter()
                .filter(|(at, job, _)| job == "sale" && at.as_str() > "2026-11-02")
                .all(|(_, _, skipped)| skipped.as_deref() == Some("runOnceDone")),
            "{got:?}"
        );
    }

    #[test]
    fn a_fix_long_after_a_firing_reports_it_missed() {
        let report = scenario(
            "controller: {missedJobGraceSeconds: 60}
edits:
  - {at: '2026-11-02T12:00:00Z', spec: {scaleTargetRef: {kind: Deployment, name: shop}, jobs: [{name: daily, schedule: '0 0 25 * * *', targetSize: 3}]}}
  - {at: '2026-11-03T09:00:00Z', spec: {scaleTargetRef: {kind: Deployment, name: shop}, jobs: [{name: daily, schedule: '0 0 8 * * *', targetSize: 3}]}}
",
        );
        let missed: Vec<&FiringLine> = report
            .lines
            .iter()
            .filter_map(|l| match l {
                Line::Firing(f) if f.skipped.as_deref() == Some("missed") => Some(f),
                _ => None,
            })
            .collect();
        assert_eq!(missed.len(), 1, "{:?}", report.lines);
        assert_eq!(missed[0].at, "2026-11-03T08:00:00Z".parse().unwrap());
        assert_eq!(missed[0].missed_count, Some(1));
        let Line::Edit(fixed) = &report.lines[4] else {
            panic!("{:?}", report.lines);
        };
        assert_eq!(fixed.jobs[0].state, JobState::Failed);
    }

    #[test]
    fn a_changed_job_starts_afresh() {
        let report = scenario(
            "edits:
  - {at: '2026-11-02T12:00:00Z', spec: {scaleTargetRef: {kind: Deployment, name: shop}, jobs: [{name: sale, schedule: '0 0 20 * * *', targetSize: 60, runOnce: true}]}}
",
        );
        let Line::Edit(edit) = &report.lines[3] else {
            panic!("{:?}", report.lines);
        };
        assert_eq!(edit.jobs[0].state, JobState::Submitted);
        // A new version of a runOnce job fires once more.
        assert!(
            firings(&report).contains(&("2026-11-02T20:00:00Z".into(), "sale".into(), None)),
            "{:?}",
            report.lines
        );
    }
}
