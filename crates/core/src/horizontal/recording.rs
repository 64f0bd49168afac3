//! Recordings: what the controller observed and decided at each evaluation of one autoscaler,
//! so that `hpa-plus replay FILE` can reproduce its decisions offline (docs/replay.md, "Record
//! on a cluster, replay offline"), and the one step both replays take per evaluation.
//!
//! # Format (version [`FORMAT_VERSION`])
//!
//! A recording is JSON Lines: one JSON object per line, each with a `kind`:
//!
//! - `HorizontalRecording` ([`Header`]): the format `version`, how the next evaluation starts
//!   (`start`: `firstSight` — a controller that had nothing in memory and resumed from the
//!   `stored` decision memory the object carried, exactly as [`memory::resume`] does; or
//!   `held` — the controller's memory was `stored`, as after a rotation or when recording began
//!   for an object already being evaluated), the `autoscaler` object as the controller saw it
//!   (HPA+ or native `autoscaling/v2` HPA, without status and managed fields), the `controller`
//!   settings that change decisions ([`ControllerConfig`]) and the time `at`. Every file starts
//!   with one; a controller that restarts appends a new one.
//! - `Spec` ([`SpecChange`]): the object's spec changed (or a native HPA's annotations): the new
//!   `autoscaler` and `generation`; the evaluations after it use it.
//! - `Evaluation` ([`Evaluation`]): the time `at`, the [`Observation`] exactly as the decision
//!   read it (`observed`; a failed fetch as `{"error": "…"}`), the `minReplicas` that
//!   `minReplicasTuning` applied (`tunedMinReplicas`), the raise of `spec.predictive`
//!   (`predicted`), the final `decision` ([`Recorded`]) and whether the scale was written
//!   (`scaled`).
//!
//! Field names are camelCase and stable; readers ignore fields they do not know, so fields may be
//! added without a new version. A line is appended whole with its newline: a last line without
//! one (a writer that stopped mid-line) is skipped by [`parse`] with a warning, as is a broken
//! line followed by a header (the writer restarted after it).
//!
//! # Bounds
//!
//! One file per autoscaler, rotated by the writer (`hpa-plus --record-dir`) when the next
//! evaluation would take it past `--record-max-bytes` (default [`DEFAULT_MAX_BYTES`], 16 MiB):
//! `FILE` becomes `FILE.1`, `FILE.1` becomes `FILE.2`, …, and at most `--record-files` files are
//! kept (default [`DEFAULT_FILES`], so at most 64 MiB per autoscaler). A rotated file starts with
//! a `held` header, so each file replays on its own as well as in the sequence.
//!
//! A recording holds what the controller read: metric values and the names, readiness and
//! requests of the target's pods. Nothing of it is written anywhere else.

use std::fmt;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::decision::{ControllerConfig, Decision, DecisionInput, decide};
use super::history::History;
use super::limited::LimitedBy;
use super::memory;
use super::observation::Observation;
use crate::api::hpa_plus::DecisionMemory;

/// The `kind` of a recording's header line.
pub const KIND: &str = "HorizontalRecording";

/// The format version this code writes and reads (and every older one).
pub const FORMAT_VERSION: u32 = 1;

/// Default size bound of one recording file, bytes (16 MiB).
pub const DEFAULT_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// Default number of files kept per autoscaler (`FILE`, `FILE.1` … `FILE.3`).
pub const DEFAULT_FILES: u32 = 4;

/// One line of a recording.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind")]
#[allow(clippy::large_enum_variant)] // lines are written and read one at a time
pub enum Line {
    /// `kind: HorizontalRecording`: a file's, or a controller's, start.
    #[serde(rename = "HorizontalRecording")]
    Header(Header),
    /// `kind: Spec`: the autoscaler changed.
    Spec(SpecChange),
    /// `kind: Evaluation`: one evaluation.
    Evaluation(Evaluation),
}

/// How the evaluation after a header starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Start {
    /// The controller had nothing in memory: it resumed from what the object carried.
    FirstSight,
    /// The controller held this memory (a rotation, or a recording begun mid-way).
    Held,
}

/// The first line of a file, and of each controller run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// [`FORMAT_VERSION`] of the writer.
    pub version: u32,
    /// How the next evaluation starts.
    pub start: Start,
    /// With `firstSight`: the decision memory the object carried (`None`: none, or unreadable);
    /// with `held`: the memory the controller held.
    #[serde(default)]
    pub stored: Option<DecisionMemory>,
    /// The autoscaler manifest as the controller saw it.
    pub autoscaler: serde_json::Value,
    /// The controller settings the decisions used.
    pub controller: ControllerConfig,
    /// When the header was written (the evaluation after it).
    pub at: Timestamp,
}

/// A changed autoscaler.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecChange {
    /// The evaluation that first saw it.
    pub at: Timestamp,
    /// `metadata.generation` of the object.
    #[serde(default)]
    pub generation: Option<i64>,
    /// The new manifest.
    pub autoscaler: serde_json::Value,
}

/// One evaluation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Evaluation {
    /// The evaluation's `now`.
    pub at: Timestamp,
    /// What the decision read.
    pub observed: Observation,
    /// The `minReplicas` `minReplicasTuning` applied to this decision, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuned_min_replicas: Option<i32>,
    /// How `spec.predictive` changed the decision, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted: Option<Raised>,
    /// The decision the controller made.
    pub decision: Recorded,
    /// Whether the controller wrote the scale.
    #[serde(default)]
    pub scaled: bool,
}

/// A prediction's raise of a decision (what the controller's prediction step changed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Raised {
    /// The replicas to write.
    pub scale_to: Option<i32>,
    /// The desired replicas.
    pub desired_replicas: i32,
    /// Why, as the reason's `predictive: …` suffix says.
    pub message: String,
}

/// The parts of a decision a replay compares.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recorded {
    /// What the autoscaler wanted.
    pub desired_replicas: i32,
    /// The replicas written, if any.
    #[serde(default)]
    pub scale_to: Option<i32>,
    /// The rule that limited it.
    #[serde(default)]
    pub limited_by: Option<LimitedBy>,
    /// The sentence of reason.
    #[serde(default)]
    pub reason: String,
}

impl Recorded {
    /// What a replay compares of `d`.
    pub fn of(d: &Decision) -> Self {
        Self {
            desired_replicas: d.desired_replicas,
            scale_to: d.scale_to,
            limited_by: d.limited_by,
            reason: d.reason.clone(),
        }
    }
}

impl fmt::Display for Recorded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "desired {}", self.desired_replicas)?;
        match self.scale_to {
            Some(to) => write!(f, ", scale to {to}")?,
            None => write!(f, ", no write")?,
        }
        if let Some(l) = self.limited_by {
            write!(f, ", limited by {}", l.as_str())?;
        }
        write!(f, " ({})", self.reason)
    }
}

/// Applies a recorded raise as the controller's prediction step applied it
/// ([`super::evaluate::raise_to`]).
pub fn raise(decision: Decision, raised: Option<&Raised>) -> Decision {
    match raised {
        Some(r) => {
            super::evaluate::raise_to(decision, (r.scale_to, r.desired_replicas), &r.message)
        }
        None => decision,
    }
}

/// The history a controller keeps after a decision: the decision's, with the scale it wrote
/// (from `from` to `scale_to`), normalised to exactly what a successor reads back; and that
/// stored form.
pub fn kept(
    decided: &History,
    now: Timestamp,
    from: i32,
    scale_to: Option<i32>,
) -> (History, DecisionMemory) {
    let mut history = decided.clone();
    if let Some(to) = scale_to {
        history.record_scale(now, from, to);
    }
    let stored = memory::store(&history);
    (memory::restore(&stored), stored)
}

/// One evaluation of a replay: the decision, and what the controller keeps after it.
#[derive(Clone, Debug)]
pub struct Step {
    /// The final decision (after `then`).
    pub decision: Decision,
    /// The history the next evaluation starts from.
    pub history: History,
    /// Its stored form (the HPA+ `status.memory`, a native HPA's annotation).
    pub stored: DecisionMemory,
}

/// One evaluation as the controller runs it, without I/O: decide, let `then` adjust the decision
/// (a recorded prediction raise), record the scale the decision writes and normalise the memory
/// ([`kept`]). Both `hpa-plus replay` loops (scenarios and recordings) call this, so they cannot
/// drift apart.
pub fn step(input: &DecisionInput<'_>, then: impl FnOnce(Decision) -> Decision) -> Step {
    let decision = then(decide(input));
    let (history, stored) = kept(
        &decision.history,
        input.now,
        input.observed.current_replicas,
        decision.scale_to,
    );
    Step {
        decision,
        history,
        stored,
    }
}

/// A recording line as written: JSON and a newline.
///
/// # Errors
/// When the line does not serialize (a non-finite float in the autoscaler).
pub fn encode(line: &Line) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string(line)?;
    text.push('\n');
    Ok(text)
}

/// Whether `text` is a recording: its first line is a header.
pub fn is_recording(text: &str) -> bool {
    #[derive(Deserialize)]
    struct Kind {
        kind: String,
    }
    text.lines()
        .next()
        .and_then(|first| serde_json::from_str::<Kind>(first).ok())
        .is_some_and(|k| k.kind == KIND)
}

/// A parsed recording.
#[derive(Clone, Debug, Default)]
pub struct Parsed {
    /// The lines, with their number in the text (from 1).
    pub lines: Vec<(usize, Line)>,
    /// Lines skipped, as `line N: …`.
    pub warnings: Vec<String>,
}

/// Why a recording could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordingError {
    /// A line in the middle that is not a recording line.
    #[error("line {line}: {message}")]
    Line {
        /// Its number, from 1.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The first line is not a header.
    #[error("line 1: not a {KIND} header")]
    NoHeader,
    /// A newer writer.
    #[error("line {line}: format version {version} is newer than this reader's {FORMAT_VERSION}")]
    Version {
        /// The header's line.
        line: usize,
        /// Its version.
        version: u32,
    },
}

/// Reads a recording's text. A broken last line, or a broken line right before a header, is
/// skipped with a warning (a writer that stopped mid-line); any other broken line is an error.
///
/// # Errors
/// See [`RecordingError`].
pub fn parse(text: &str) -> Result<Parsed, RecordingError> {
    let raw: Vec<&str> = text.lines().collect();
    let mut parsed = Parsed::default();
    for (i, line) in raw.iter().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Line>(line) {
            Ok(Line::Header(h)) if h.version > FORMAT_VERSION => {
                return Err(RecordingError::Version {
                    line: n,
                    version: h.version,
                });
            }
            Ok(l) => parsed.lines.push((n, l)),
            Err(e) => {
                let last = raw[i + 1..].iter().all(|l| l.trim().is_empty());
                let before_header = raw.get(i + 1).is_some_and(|next| is_recording(next));
                if (last && !text.ends_with('\n')) || before_header {
                    parsed
                        .warnings
                        .push(format!("line {n}: skipped a partly written line ({e})"));
                } else {
                    return Err(RecordingError::Line {
                        line: n,
                        message: e.to_string(),
                    });
                }
            }
        }
    }
    match parsed.lines.first() {
        Some((_, Line::Header(_))) => Ok(parsed),
        _ => Err(RecordingError::NoHeader),
    }
}

/// Sets the field at `path` of `object` to `value` (`--set PATH=VALUE`).
///
/// `path` is dotted: `spec.behavior.scaleDown.stabilizationWindowSeconds`; a segment of digits
/// indexes an array (`spec.metrics.0.resource.name`, also written `spec.metrics[0]…`), and a
/// dot inside a key is written `\.` (`metadata.annotations.plimsoll\.dev/tolerance`). Missing
/// objects on the way are created; an index may be one past the end (appends).
///
/// # Errors
/// A message naming the segment that cannot be followed.
pub fn set_field(
    object: &mut serde_json::Value,
    path: &str,
    value: serde_json::Value,
) -> Result<(), String> {
    let segments = segments(path)?;
    let mut here = object;
    let mut walked = String::new();
    for (k, segment) in segments.iter().enumerate() {
        let last = k + 1 == segments.len();
        if !walked.is_empty() {
            walked.push('.');
        }
        walked.push_str(segment);
        if here.is_null() {
            *here = serde_json::Value::Object(serde_json::Map::new());
        }
        here = match here {
            serde_json::Value::Array(items) => {
                let index: usize = segment
                    .parse()
                    .map_err(|_| format!("{walked}: an array needs an index here"))?;
                if index == items.len() {
                    items.push(serde_json::Value::Null);
                }
                let len = items.len();
                items
                    .get_mut(index)
                    .ok_or_else(|| format!("{walked}: index {index} is past the end ({len})"))?
            }
            serde_json::Value::Object(map) => map
                .entry(segment.clone())
                .or_insert(serde_json::Value::Null),
            other => {
                return Err(format!(
                    "{walked}: {} is not an object or array",
                    kind_of(other)
                ));
            }
        };
        if last {
            *here = value;
            return Ok(());
        }
    }
    Err("the path is empty".to_owned())
}

fn kind_of(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The segments of a `--set` path: `.`-separated, `\.` a dot in a key, `[N]` an index.
fn segments(path: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = path.chars().peekable();
    let mut closed = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'.') => {
                current.push('.');
                chars.next();
            }
            '.' => {
                if current.is_empty() && !closed {
                    return Err(format!("{path}: an empty segment"));
                }
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
                closed = false;
            }
            '[' => {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
                let index: String = chars.by_ref().take_while(|c| *c != ']').collect();
                if index.is_empty() || !index.chars().all(|c| c.is_ascii_digit()) {
                    return Err(format!("{path}: [{index}] is not an index"));
                }
                out.push(index);
                closed = true;
            }
            c => {
                if closed {
                    return Err(format!("{path}: a `.` must follow `]`"));
                }
                current.push(c);
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    } else if !closed {
        return Err(format!("{path}: an empty segment"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::horizontal::observation::PodSample;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn header() -> Line {
        Line::Header(Header {
            version: FORMAT_VERSION,
            start: Start::FirstSight,
            stored: None,
            autoscaler: json!({"kind": "HorizontalPodAutoscalerPlus"}),
            controller: ControllerConfig::default(),
            at: at("2026-01-01T00:00:00Z"),
        })
    }

    fn evaluation() -> Line {
        let pod = PodSample {
            name: "web-1".into(),
            metrics: BTreeMap::from([
                ("rps".to_owned(), Ok(1500)),
                ("errors".to_owned(), Err("no such metric".to_owned())),
            ]),
            ..PodSample::default()
        };
        Line::Evaluation(Evaluation {
            at: at("2026-01-01T00:00:15.123456789Z"),
            observed: Observation {
                current_replicas: 2,
                pods: vec![pod],
                external_metrics: BTreeMap::from([("queue".to_owned(), Ok(vec![1, 2]))]),
                ..Observation::default()
            },
            tuned_min_replicas: None,
            predicted: None,
            decision: Recorded {
                desired_replicas: 3,
                scale_to: Some(3),
                limited_by: Some(LimitedBy::ScaleUpLimit),
                reason: "why".into(),
            },
            scaled: true,
        })
    }

    #[test]
    fn lines_round_trip_exactly() {
        let text = [header(), evaluation()]
            .iter()
            .map(|l| encode(l).unwrap())
            .collect::<String>();
        assert!(is_recording(&text));
        assert!(
            text.contains(r#""errors":{"error":"no such metric"}"#),
            "{text}"
        );
        assert!(text.contains(r#""currentReplicas":2"#), "{text}");
        let parsed = parse(&text).unwrap();
        assert!(parsed.warnings.is_empty());
        assert_eq!(parsed.lines[0].1, header());
        assert_eq!(parsed.lines[1].1, evaluation());
    }

    #[test]
    fn a_partly_written_last_line_is_skipped_with_a_warning() {
        let mut text = encode(&header()).unwrap() + &encode(&evaluation()).unwrap();
        let whole = text.len();
        text.push_str(&encode(&evaluation()).unwrap()[..40]);
        let parsed = parse(&text).unwrap();
        assert_eq!(parsed.lines.len(), 2);
        assert_eq!(parsed.warnings.len(), 1, "{:?}", parsed.warnings);
        // The same broken line, then a restarted writer's header: skipped too.
        text.push('\n');
        text.push_str(&encode(&header()).unwrap());
        assert_eq!(parse(&text).unwrap().lines.len(), 3);
        // A broken line between two evaluations is an error that names it.
        let mut broken = text[..whole].to_owned();
        broken.push_str("{\"kind\": \"Evaluation\"}\n");
        broken.push_str(&encode(&evaluation()).unwrap());
        assert!(matches!(
            parse(&broken),
            Err(RecordingError::Line { line: 3, .. })
        ));
    }

    #[test]
    fn a_newer_format_or_a_missing_header_is_refused() {
        let mut newer = header();
        if let Line::Header(h) = &mut newer {
            h.version = FORMAT_VERSION + 1;
        }
        assert!(matches!(
            parse(&encode(&newer).unwrap()),
            Err(RecordingError::Version { line: 1, .. })
        ));
        assert_eq!(
            parse(&encode(&evaluation()).unwrap()).unwrap_err(),
            RecordingError::NoHeader
        );
    }

    #[test]
    fn set_field_follows_dots_indexes_and_escapes() {
        let mut v = json!({"spec": {"metrics": [{"resource": {"name": "cpu"}}]}, "metadata": {}});
        set_field(
            &mut v,
            "spec.behavior.scaleDown.stabilizationWindowSeconds",
            json!(60),
        )
        .unwrap();
        set_field(&mut v, "spec.metrics.0.resource.name", json!("memory")).unwrap();
        set_field(&mut v, "spec.metrics[0].type", json!("Resource")).unwrap();
        set_field(
            &mut v,
            r"metadata.annotations.plimsoll\.dev/tolerance",
            json!("0.2"),
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"spec": {
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}},
                "metrics": [{"type": "Resource", "resource": {"name": "memory"}}]},
                "metadata": {"annotations": {"plimsoll.dev/tolerance": "0.2"}}})
        );
        let err = set_field(&mut v, "spec.metrics.x", json!(1)).unwrap_err();
        assert!(err.contains("spec.metrics.x"), "{err}");
        let err = set_field(&mut v, "spec.metrics.5", json!(1)).unwrap_err();
        assert!(err.contains("past the end"), "{err}");
        assert!(set_field(&mut v, "spec..x", json!(1)).is_err());
        assert!(set_field(&mut v, "", json!(1)).is_err());
    }

    #[test]
    fn kept_records_the_scale_and_reads_back_as_stored() {
        let now = at("2026-01-01T00:00:00Z");
        let (history, stored) = kept(&History::default(), now, 2, Some(4));
        assert_eq!(history.last_scale_time, Some(now));
        assert_eq!(history, memory::restore(&stored));
        let (same, _) = kept(&History::default(), now, 2, None);
        assert_eq!(same.last_scale_time, None);
    }
}
