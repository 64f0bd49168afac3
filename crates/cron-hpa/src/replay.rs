//! `cron-hpa replay`: run a `CronReplay` scenario through the same planner the controller uses.
//!
//! A scenario (see `scenarios/FORMAT.md`) holds a `CronHorizontalPodAutoscaler` manifest, a
//! window `[from, to)` and optionally the exact list of firings expected. The output is one
//! line per firing in time order (ties in spec order): `at` (RFC 3339, UTC), `job`,
//! `targetSize`, `skipped` (`null`, `excludedDate` or `runOnceDone`).
//!
//! Exit status: 0 when every expectation held, 1 when one did not (each miss printed as
//! `step N: expected …, got …`, N counting firings from 0), 2 when the file is invalid (the
//! message names the field).

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use jiff::Timestamp;
use plimsoll_core::api::cron::CronHorizontalPodAutoscaler;
use plimsoll_core::schedule::plan::{self, CompiledSpec, Firing};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a scenario could not be replayed (exit status 2).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The scenario path.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid scenario; the message starts with the field path.
    #[error("{0}")]
    Invalid(String),
    /// Writing the output failed.
    #[error("cannot write output: {0}")]
    Output(#[from] std::io::Error),
}

impl Error {
    /// A short label for logs and metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Read { .. } => "read",
            Self::Invalid(_) => "invalid",
            Self::Output(_) => "output",
        }
    }
}

/// How to print the firings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// One JSON object per line (JSON Lines).
    Json,
    /// An aligned table for people.
    #[default]
    Table,
}

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

impl Report {
    /// 0 when every expectation held, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        u8::from(!self.misses.is_empty())
    }
}

/// Parses a scenario from YAML (or JSON) text.
pub fn parse(text: &str) -> Result<Scenario, Error> {
    let doc: Value = serde_saphyr::from_str(text)
        .map_err(|e| Error::Invalid(format!("not a YAML or JSON document: {e}")))?;
    let Value::Object(map) = doc else {
        return Err(Error::Invalid(
            "the scenario must be a mapping with kind, cronhpa, from and to".into(),
        ));
    };
    match map.get("kind") {
        Some(Value::String(k)) if k == "CronReplay" => {}
        Some(other) => {
            return Err(Error::Invalid(format!(
                "kind: must be CronReplay, got {other}"
            )));
        }
        None => return Err(Error::Invalid("kind: missing (must be CronReplay)".into())),
    }
    if let Some(unknown) = map
        .keys()
        .find(|k| !["kind", "cronhpa", "from", "to", "expect"].contains(&k.as_str()))
    {
        return Err(Error::Invalid(format!(
            "{unknown}: unknown field (expected kind, cronhpa, from, to, expect)"
        )));
    }
    let cronhpa = cronhpa(&map)?;
    if let Err(errors) = cronhpa.spec.validate() {
        let all: Vec<String> = errors.0.iter().map(|e| format!("cronhpa.{e}")).collect();
        return Err(Error::Invalid(all.join("; ")));
    }
    let from = timestamp(&map, "from")?;
    let to = timestamp(&map, "to")?;
    if from >= to {
        return Err(Error::Invalid(format!(
            "to: must be after from ({from}), got {to}"
        )));
    }
    let expect = match map.get("expect") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    serde_json::from_value::<Line>(item.clone())
                        .map_err(|e| Error::Invalid(format!("expect[{i}]: {e}")))
                })
                .collect::<Result<_, _>>()?,
        ),
        Some(_) => return Err(Error::Invalid("expect: must be a list of firings".into())),
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
fn cronhpa(map: &serde_json::Map<String, Value>) -> Result<CronHorizontalPodAutoscaler, Error> {
    let Some(Value::Object(manifest)) = map.get("cronhpa") else {
        return Err(Error::Invalid(
            "cronhpa: missing or not a mapping (a CronHorizontalPodAutoscaler manifest)".into(),
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
                return Err(Error::Invalid(format!(
                    "cronhpa.{key}: must be {want}, got {got}"
                )));
            }
        }
    }
    manifest
        .entry("metadata")
        .or_insert_with(|| serde_json::json!({"name": "replay", "namespace": "default"}));
    serde_json::from_value(Value::Object(manifest))
        .map_err(|e| Error::Invalid(format!("cronhpa: {e}")))
}

fn timestamp(map: &serde_json::Map<String, Value>, name: &str) -> Result<Timestamp, Error> {
    match map.get(name) {
        Some(Value::String(s)) => s.parse().map_err(|e| {
            Error::Invalid(format!(
                "{name}: {s:?} is not an RFC 3339 time like 2026-03-28T00:00:00Z: {e}"
            ))
        }),
        Some(other) => Err(Error::Invalid(format!(
            "{name}: must be an RFC 3339 time string, got {other}"
        ))),
        None => Err(Error::Invalid(format!("{name}: missing"))),
    }
}

/// Plans the scenario's window and checks it against `expect`.
pub fn run(scenario: &Scenario) -> Result<Report, Error> {
    let spec = CompiledSpec::compile(&scenario.cronhpa.spec)
        .map_err(|e| Error::Invalid(format!("cronhpa.{e}")))?;
    let firings = plan::plan(&spec, &[], scenario.from, scenario.to)
        .map_err(|e| Error::Invalid(e.to_string()))?;
    let lines: Vec<Line> = firings.iter().map(Line::from_firing).collect();
    let mut misses = Vec::new();
    if let Some(expect) = &scenario.expect {
        for i in 0..lines.len().max(expect.len()) {
            match (expect.get(i), lines.get(i)) {
                (Some(want), Some(got)) if want == got => {}
                (Some(want), Some(got)) => misses.push(format!(
                    "step {i}: expected {}, got {}",
                    want.describe(),
                    got.describe()
                )),
                (Some(want), None) => misses.push(format!(
                    "step {i}: expected {}, got no firing",
                    want.describe()
                )),
                (None, Some(got)) => misses.push(format!(
                    "step {i}: expected no firing, got {}",
                    got.describe()
                )),
                (None, None) => {}
            }
        }
    }
    Ok(Report { lines, misses })
}

/// Renders the firings in the requested format.
pub fn render(report: &Report, format: OutputFormat) -> Result<String, Error> {
    let mut out = String::new();
    match format {
        OutputFormat::Json => {
            for line in &report.lines {
                let json = serde_json::to_string(line)
                    .map_err(|e| Error::Output(std::io::Error::other(e)))?;
                out.push_str(&json);
                out.push('\n');
            }
        }
        OutputFormat::Table => {
            let job_width = report
                .lines
                .iter()
                .map(|l| l.job.len())
                .max()
                .unwrap_or(0)
                .max(3);
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
        }
    }
    Ok(out)
}

/// Runs `cron-hpa replay PATH`: prints the firings to `stdout`, misses and errors to `stderr`,
/// and returns the exit status (0, 1 or 2).
pub fn replay_file(
    path: &Path,
    format: OutputFormat,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> u8 {
    let result = std::fs::read_to_string(path)
        .map_err(|source| Error::Read {
            path: path.display().to_string(),
            source,
        })
        .and_then(|text| parse(&text))
        .and_then(|scenario| run(&scenario))
        .and_then(|report| {
            stdout.write_all(render(&report, format)?.as_bytes())?;
            for miss in &report.misses {
                writeln!(stderr, "{miss}")?;
            }
            Ok(report.exit_code())
        });
    match result {
        Ok(code) => code,
        Err(e) => {
            // Nothing more can be done if stderr itself is gone.
            let _ = writeln!(stderr, "{}: {e}", path.display());
            2
        }
    }
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
        assert_eq!(report.exit_code(), 0);
        let json = render(&report, OutputFormat::Json).unwrap();
        assert_eq!(
            json,
            "{\"at\":\"2026-01-01T00:00:00Z\",\"job\":\"a\",\"targetSize\":1,\"skipped\":null}\n"
        );
        let table = render(&report, OutputFormat::Table).unwrap();
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
