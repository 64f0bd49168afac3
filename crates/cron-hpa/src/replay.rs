//! `cron-hpa replay`: run a `CronReplay` scenario through the controller's own schedule
//! decision, [`plimsoll_core::schedule::plan::evaluate`] (called by [`plan::plan`] at every
//! instant a job fires, as a controller woken then would call it).
//!
//! A scenario (see `scenarios/FORMAT.md`) holds a `CronHorizontalPodAutoscaler` manifest, a
//! window `[from, to)` and optionally the exact list of firings expected. The output is one
//! line per firing in time order (ties in spec order): `at` (RFC 3339, UTC), `job`,
//! `targetSize`, `skipped` (`null`, `excludedDate` or `runOnceDone`).
//!
//! The harness ([`plimsoll_replay`]) prints the lines and maps the result to the exit status:
//! 0 when every expectation held, 1 when one did not (each miss printed as
//! `step N: expected …, got …`, N counting firings from 0), 2 when the file is invalid (the
//! message names the field).

use std::fmt::Write as _;

use jiff::Timestamp;
use plimsoll_core::api::cron::CronHorizontalPodAutoscaler;
use plimsoll_core::schedule::plan::{self, CompiledSpec, Firing};
use plimsoll_replay::{Invocation, Outcome, ReplayError, Status, expect_kind, miss};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A parsed `CronReplay` scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The object under test.
    pub cronhpa: CronHorizontalPodAutoscaler,
    /// Window start (inclusive).
    pub from: Timestamp,
    /// Window end (exclusive).
    pub to: Timestamp,
    /// The exact expected firings, when given.
    pub expect: Option<Vec<Line>>,
}

/// One output line: a firing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Line {
    /// When the job fires (RFC 3339, UTC).
    pub at: Timestamp,
    /// The job's name.
    pub job: String,
    /// The size the job sets.
    pub target_size: i32,
    /// `null` when the job runs, else `excludedDate` or `runOnceDone`.
    #[serde(default)]
    pub skipped: Option<String>,
}

impl Line {
    fn from_firing(f: &Firing) -> Self {
        Self {
            at: f.at,
            job: f.job.clone(),
            target_size: f.target_size,
            skipped: f.skipped.map(|s| s.as_str().to_string()),
        }
    }

    fn describe(&self) -> String {
        format!(
            "{{at: {}, job: {}, targetSize: {}, skipped: {}}}",
            self.at,
            self.job,
            self.target_size,
            self.skipped.as_deref().unwrap_or("null")
        )
    }
}

/// The result of a replay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Every firing in the window, in order.
    pub lines: Vec<Line>,
    /// One `step N: expected …, got …` message per expectation that did not hold.
    pub misses: Vec<String>,
}

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
    if let Some(unknown) = map
        .keys()
        .find(|k| !["kind", "cronhpa", "from", "to", "expect"].contains(&k.as_str()))
    {
        return Err(ReplayError::invalid(
            unknown,
            "unknown field (expected kind, cronhpa, from, to, expect)",
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
    let expect = match map.get("expect") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    serde_json::from_value::<Line>(item.clone())
                        .map_err(|e| ReplayError::invalid(format!("expect[{i}]"), e))
                })
                .collect::<Result<_, _>>()?,
        ),
        Some(_) => {
            return Err(ReplayError::invalid("expect", "must be a list of firings"));
        }
    };
    Ok(Scenario {
        cronhpa,
        from,
        to,
        expect,
    })
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

/// Runs the scenario's window through the controller's evaluation and checks it against
/// `expect`.
pub fn replay(scenario: &Scenario) -> Result<Report, ReplayError> {
    let spec = CompiledSpec::compile(&scenario.cronhpa.spec)
        .map_err(|e| ReplayError::Invalid(format!("cronhpa.{e}")))?;
    let firings = plan::plan(&spec, &[], scenario.from, scenario.to)
        .map_err(|e| ReplayError::Invalid(e.to_string()))?;
    let lines: Vec<Line> = firings.iter().map(Line::from_firing).collect();
    let misses = scenario
        .expect
        .as_ref()
        .map(|expect| misses(expect, &lines))
        .unwrap_or_default();
    Ok(Report { lines, misses })
}

/// Compares the firings with the expected list, position by position.
fn misses(expect: &[Line], lines: &[Line]) -> Vec<String> {
    (0..lines.len().max(expect.len()))
        .filter_map(|i| match (expect.get(i), lines.get(i)) {
            (Some(want), Some(got)) if want == got => None,
            (Some(want), Some(got)) => Some(miss(i, want.describe(), got.describe())),
            (Some(want), None) => Some(miss(i, want.describe(), "no firing")),
            (None, Some(got)) => Some(miss(i, "no firing", got.describe())),
            (None, None) => None,
        })
        .collect()
}

/// Parses and replays scenario text.
pub fn replay_text(text: &str) -> Result<Report, ReplayError> {
    replay(&parse(text)?)
}

/// The firings as an aligned table.
pub fn table(report: &Report) -> String {
    let job_width = report
        .lines
        .iter()
        .map(|l| l.job.len())
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
    for l in &report.lines {
        let _ = writeln!(
            out,
            "{:<20}  {:<job_width$}  {:>11}  {}",
            l.at.to_string(),
            l.job,
            l.target_size,
            l.skipped.as_deref().unwrap_or("-")
        );
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
        let line = |job: &str, size| Line {
            at,
            job: job.into(),
            target_size: size,
            skipped: None,
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
    }

    #[test]
    fn invalid_scenarios_name_the_field() {
        let cases = [
            ("kind: Nope", "kind: must be CronReplay"),
            ("kind: CronReplay\nfrom: x", "cronhpa: missing"),
            (
                "kind: CronReplay\ncronhpa: {kind: Deployment}",
                "cronhpa.kind: must be CronHorizontalPodAutoscaler",
            ),
            (
                "kind: CronReplay\ncronhpa: {spec: {jobs: []}}",
                "cronhpa: missing field `scaleTargetRef`",
            ),
            ("kind: CronReplay\nfoo: 1", "foo: unknown field"),
            ("- a\n- b", "must be a mapping"),
        ];
        for (text, want) in cases {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }
}
