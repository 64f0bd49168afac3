//! `--record-dir`: appends what each evaluation observed and decided to one recording per
//! autoscaler, `DIR/<namespace>/<name>.jsonl`, in the format of
//! [`plimsoll_core::horizontal::recording`], for `hpa-plus replay FILE`.
//!
//! Which objects: with `--record-dir` set, those whose labels match `--record-selector` (default
//! every object); with `--record-annotation-allowed`, only those of them that also carry
//! [`ANNOTATION`]`: "true"` (a tenant opts an object in only where the operator allows it).
//!
//! The reconcile calls [`Recorder::evaluated`] once per evaluation, after the scale write. The
//! line is written there, under a mutex per file: a few kilobytes appended to a file, and only
//! for the objects recorded. A failure (a full disk, an unwritable directory, a name that is not
//! a DNS name) is logged and counted (`plimsoll_hpa_plus_record_failures_total`) and never fails
//! the reconcile.
//!
//! Bounds ([`plimsoll_core::horizontal::recording`], "Bounds"): a file is rotated before a line
//! would take it past `--record-max-bytes`, and `--record-files` files are kept. The recording
//! holds the target pods' names, readiness, requests and usage and the metric values; nothing of
//! it is logged.
//!
//! Each controller run starts a file's records with a header: at the object's first sight, how it
//! resumed from its stored memory; when recording starts for an object already being evaluated
//! (it began to match), the memory after that evaluation, which is then not recorded itself.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use plimsoll_core::api::hpa_plus::{
    DecisionMemory, HorizontalPodAutoscalerPlus, HorizontalPodAutoscalerPlusSpec,
};
use plimsoll_core::horizontal::predictive::Raise;
use plimsoll_core::horizontal::recording::{
    self, FORMAT_VERSION, Header, Line, Raised, Recorded, SpecChange, Start,
};
use plimsoll_core::horizontal::{ControllerConfig, Decision, Observation};
use plimsoll_runtime::repeats::{Repeats, Verdict};
use plimsoll_runtime::selector::Selector;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

/// The annotation by which a tenant opts an autoscaler in (only with
/// `--record-annotation-allowed`).
pub const ANNOTATION: &str = "plimsoll.dev/record";

/// `--record-*` flags.
#[derive(Clone, Debug)]
pub struct RecordSettings {
    /// `--record-dir`.
    pub dir: PathBuf,
    /// `--record-max-bytes`: a file is rotated before it grows past this.
    pub max_bytes: u64,
    /// `--record-files`: files kept per autoscaler, the current one included.
    pub files: u32,
    /// `--record-selector`: which autoscalers, by their labels.
    pub selector: Selector,
    /// `--record-annotation-allowed`: only the selected objects that carry [`ANNOTATION`].
    pub annotation_allowed: bool,
}

/// The autoscaler as the cache holds it.
#[derive(Clone, Copy, Debug)]
pub enum Object<'a> {
    /// An HPA+.
    Plus(&'a HorizontalPodAutoscalerPlus),
    /// A native `autoscaling/v2` HPA (`--native-hpa`).
    Native(&'a HorizontalPodAutoscaler),
}

impl Object<'_> {
    fn metadata(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            Self::Plus(o) => &o.metadata,
            Self::Native(o) => &o.metadata,
        }
    }

    fn is_native(&self) -> bool {
        matches!(self, Self::Native(_))
    }

    /// The manifest a recording keeps: without status, managed fields, resource version and
    /// the stored-state annotations (the header carries the memory itself).
    fn manifest(&self) -> serde_json::Result<serde_json::Value> {
        let mut v = match self {
            Self::Plus(o) => serde_json::to_value(o)?,
            Self::Native(o) => serde_json::to_value(o)?,
        };
        if let Some(map) = v.as_object_mut() {
            map.remove("status");
        }
        if let Some(meta) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            meta.remove("managedFields");
            meta.remove("resourceVersion");
            if let Some(annotations) = meta.get_mut("annotations").and_then(|a| a.as_object_mut()) {
                annotations.retain(|k, _| {
                    k != "kubectl.kubernetes.io/last-applied-configuration"
                        && k != plimsoll_core::horizontal::memory::ANNOTATION
                        && !(k.starts_with("plimsoll.dev/") && k.ends_with("-status"))
                });
            }
        }
        Ok(v)
    }
}

/// One evaluation, as the reconcile hands it over.
pub struct Evaluated<'a> {
    /// The object.
    pub object: Object<'a>,
    /// Its uid.
    pub uid: &'a str,
    /// Its spec as the controller reads it (a native HPA's converted, annotations included).
    pub spec: &'a HorizontalPodAutoscalerPlusSpec,
    /// The spec the decision used (a tuned `minReplicas`).
    pub used: &'a HorizontalPodAutoscalerPlusSpec,
    /// The decision memory the object carried.
    pub stored: Option<&'a DecisionMemory>,
    /// The controller held nothing for the object before this evaluation.
    pub first_sight: bool,
    /// What the decision read.
    pub observed: &'a Observation,
    /// The evaluation's `now`.
    pub at: Timestamp,
    /// The final decision.
    pub decision: &'a Decision,
    /// Prediction's raise, when prediction ran.
    pub raise: Option<&'a Raise>,
    /// The scale was written.
    pub scaled: bool,
}

/// Writes recordings; off unless `--record-dir` is set.
#[derive(Default)]
pub struct Recorder {
    settings: Option<RecordSettings>,
    files: Mutex<HashMap<PathBuf, Arc<Mutex<FileState>>>>,
    failures: Counter,
    lines: Counter,
    /// Failures already logged, by `namespace/name` ([`Recorder::failed`]).
    logged: Repeats,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// What the writer keeps per file.
#[derive(Default)]
struct FileState {
    uid: String,
    native: bool,
    file: Option<File>,
    size: u64,
    /// The latest manifest and settings, for the header of a rotated file.
    header: Option<Header>,
    /// The spec of the latest evaluation (a change writes a `Spec` line).
    spec: Option<HorizontalPodAutoscalerPlusSpec>,
    /// The memory the controller held after the latest evaluation.
    kept: Option<DecisionMemory>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Why a line was not written.
#[derive(Debug, thiserror::Error)]
enum RecordError {
    #[error("{0:?} is not a DNS name")]
    Name(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("encoding: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("{0} is recorded for another autoscaler of the same name (HPA+ and native HPA)")]
    Taken(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RecordError + '_ {
    move |source| RecordError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// A namespace or object name usable as one path component: a DNS subdomain (lowercase
/// alphanumerics, `-` and `.`, alphanumeric at both ends, at most 253 characters).
fn dns_name(s: &str) -> Result<&str, RecordError> {
    let ok = !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
        && !s.contains("..");
    if ok {
        Ok(s)
    } else {
        Err(RecordError::Name(s.to_owned()))
    }
}

/// The longest file name stem: with `.jsonl` and a rotation's `.999` (`--record-files` is at
/// most 1,000), a file name within the 255 bytes Linux file systems allow.
const MAX_STEM: usize = 255 - ".jsonl".len() - ".999".len();

/// The file name of `name`'s recording, without `.jsonl`: the name itself, or for a name past
/// [`MAX_STEM`] (an object name may have 253 characters, and its file was refused at every
/// evaluation) the name cut to fit, told apart from its neighbours by a hash of the whole.
fn file_stem(name: &str) -> Cow<'_, str> {
    if name.len() <= MAX_STEM {
        return Cow::Borrowed(name);
    }
    let hash = format!("-{:016x}", plimsoll_core::stable_hash::Fnv1a::of(name));
    let cut = name.get(..MAX_STEM - hash.len()).unwrap_or_default();
    Cow::Owned(format!("{}{hash}", cut.trim_end_matches(['-', '.'])))
}

impl Recorder {
    /// A recorder that records nothing.
    pub fn off() -> Self {
        Self::default()
    }

    /// A recorder for `settings` (`None`: off), its counters registered in `registry`.
    pub fn new(settings: Option<RecordSettings>, registry: &mut Registry) -> Self {
        let r = Self {
            settings,
            ..Self::default()
        };
        registry.register(
            "record_failures",
            "Evaluations that --record-dir could not record (see the log)",
            r.failures.clone(),
        );
        registry.register(
            "record_lines",
            "Lines written to recordings (--record-dir)",
            r.lines.clone(),
        );
        r
    }

    /// Whether `object` is recorded.
    fn selected(settings: &RecordSettings, object: Object<'_>) -> bool {
        let meta = object.metadata();
        settings.selector.matches_opt(meta.labels.as_ref())
            && (!settings.annotation_allowed
                || meta
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ANNOTATION))
                    .is_some_and(|v| v.trim() == "true"))
    }

    /// Records one evaluation when its object is recorded; a failure is logged and counted.
    pub fn evaluated(&self, e: &Evaluated<'_>, config: &ControllerConfig) {
        let Some(settings) = &self.settings else {
            return;
        };
        let meta = e.object.metadata();
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let name = meta.name.as_deref().unwrap_or_default();
        let path = match (dns_name(namespace), dns_name(name)) {
            (Ok(ns), Ok(n)) => settings
                .dir
                .join(ns)
                .join(format!("{}.jsonl", file_stem(n))),
            (Err(err), _) | (_, Err(err)) => {
                self.failed(namespace, name, &err);
                return;
            }
        };
        if !Self::selected(settings, e.object) {
            // Forgotten, so that recording it again starts with a header.
            lock(&self.files).remove(&path);
            return;
        }
        let file = lock(&self.files).entry(path.clone()).or_default().clone();
        let mut state = lock(&file);
        match write(settings, &path, &mut state, e, config) {
            Ok(n) => {
                self.lines.inc_by(n);
            }
            Err(err) => self.failed(namespace, name, &err),
        }
    }

    /// Counts and logs a failed write. A full disk or an unwritable directory fails every
    /// recorded object at every evaluation (and the log is often on the same disk), so it is a
    /// warning the first time per object and error, then at most every
    /// [`plimsoll_runtime::repeats::RELOG_AFTER`], at `debug` in between; the counter counts
    /// each.
    fn failed(&self, namespace: &str, name: &str, err: &RecordError) {
        self.failures.inc();
        let key = format!("{namespace}/{name}");
        let now = std::time::Instant::now();
        match self.logged.verdict_forgetting(&key, &err.to_string(), now) {
            Verdict::Warn { quiet } => {
                tracing::warn!(%namespace, %name, error = %err, repeats_not_logged = quiet, "could not record the evaluation");
            }
            Verdict::Repeat => {
                tracing::debug!(%namespace, %name, error = %err, "could not record the evaluation");
            }
        }
    }
}

/// The lines of evaluation `e` for the file whose writer state is `state`, written; how many.
fn write(
    settings: &RecordSettings,
    path: &Path,
    state: &mut FileState,
    e: &Evaluated<'_>,
    config: &ControllerConfig,
) -> Result<u64, RecordError> {
    let native = e.object.is_native();
    if state.header.is_some() && state.native != native {
        return Err(RecordError::Taken(path.display().to_string()));
    }
    let d = e.decision;
    let (_, kept) = recording::kept(
        &d.history,
        e.at,
        e.observed.current_replicas,
        d.scale_to.filter(|_| e.scaled),
    );
    let new_object = state.uid != e.uid;
    let mut lines = Vec::new();
    if e.first_sight || state.header.is_none() || new_object {
        let held = !e.first_sight;
        let header = Header {
            version: FORMAT_VERSION,
            start: if held { Start::Held } else { Start::FirstSight },
            stored: if held {
                Some(kept.clone())
            } else {
                e.stored.cloned()
            },
            autoscaler: e.object.manifest()?,
            controller: config.clone(),
            at: e.at,
        };
        state.header = Some(header.clone());
        e.uid.clone_into(&mut state.uid);
        state.native = native;
        lines.push(Line::Header(header));
        if held {
            // The memory before this evaluation is not known: the next one starts from after it.
            state.spec = Some(e.spec.clone());
            state.kept = Some(kept);
            return append(settings, path, state, &lines);
        }
    } else if state.spec.as_ref() != Some(e.spec) {
        let autoscaler = e.object.manifest()?;
        if let Some(h) = state.header.as_mut() {
            h.autoscaler = autoscaler.clone();
        }
        lines.push(Line::Spec(SpecChange {
            at: e.at,
            generation: e.object.metadata().generation,
            autoscaler,
        }));
    }
    let tuned_min_replicas = (e.used.min_replicas != e.spec.min_replicas)
        .then_some(e.used.min_replicas)
        .flatten();
    lines.push(Line::Evaluation(recording::Evaluation {
        at: e.at,
        observed: e.observed.clone(),
        tuned_min_replicas,
        predicted: e.raise.map(|r| Raised {
            scale_to: r.scale_to,
            desired_replicas: r.desired_replicas,
            message: r.message.clone(),
        }),
        decision: Recorded::of(d),
        scaled: e.scaled,
    }));
    let written = append(settings, path, state, &lines);
    state.spec = Some(e.spec.clone());
    state.kept = Some(kept);
    written
}

/// Appends `lines` to the file, rotating it first when they would take it past the bound (a
/// rotated file starts with a `held` header of the memory before these lines).
fn append(
    settings: &RecordSettings,
    path: &Path,
    state: &mut FileState,
    lines: &[Line],
) -> Result<u64, RecordError> {
    let mut text = String::new();
    for line in lines {
        text.push_str(&recording::encode(line)?);
    }
    if state.file.is_none() {
        let (file, size) = open(path)?;
        state.file = Some(file);
        state.size = size;
    }
    let mut count = lines.len() as u64;
    let len = text.len() as u64;
    if state.size > 0 && state.size + len > settings.max_bytes {
        state.file = None;
        rotate(path, settings.files)?;
        let (file, size) = open(path)?;
        state.file = Some(file);
        state.size = size;
        if !matches!(lines.first(), Some(Line::Header(_)))
            && let Some(header) = &state.header
        {
            let rotated = Line::Header(Header {
                start: Start::Held,
                stored: state.kept.clone(),
                ..header.clone()
            });
            text.insert_str(0, &recording::encode(&rotated)?);
            count += 1;
        }
    }
    let Some(file) = state.file.as_mut() else {
        return Ok(0);
    };
    match file.write_all(text.as_bytes()) {
        Ok(()) => {
            state.size += text.len() as u64;
            Ok(count)
        }
        Err(err) => {
            // Reopened next time; a partly written line is skipped by the reader.
            state.file = None;
            Err(io(path)(err))
        }
    }
}

/// Opens `path` for appending (creating its directory), and its size; a file whose last line
/// was cut short gets a newline first, so the next line starts whole.
fn open(path: &Path) -> Result<(File, u64), RecordError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(io(path))?;
    let mut size = file.metadata().map_err(io(path))?.len();
    if size > 0 {
        let mut last = [0u8];
        file.seek(SeekFrom::End(-1)).map_err(io(path))?;
        file.read_exact(&mut last).map_err(io(path))?;
        if last[0] != b'\n' {
            file.write_all(b"\n").map_err(io(path))?;
            size += 1;
        }
    }
    Ok((file, size))
}

/// `FILE.{k}` of `path`.
fn rotated(path: &Path, k: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{k}"));
    PathBuf::from(name)
}

/// `FILE.(files-2)` → `FILE.(files-1)`, …, `FILE` → `FILE.1`: `files` files at most.
fn rotate(path: &Path, files: u32) -> Result<(), RecordError> {
    let gone = |r: std::io::Result<()>, p: &Path| match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(p)(e)),
        _ => Ok(()),
    };
    if files <= 1 {
        return gone(std::fs::remove_file(path), path);
    }
    for k in (1..files - 1).rev() {
        let from = rotated(path, k);
        gone(std::fs::rename(&from, rotated(path, k + 1)), &from)?;
    }
    gone(std::fs::rename(path, rotated(path, 1)), path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use plimsoll_core::horizontal::recording::parse;
    use serde_json::json;

    fn object() -> HorizontalPodAutoscalerPlus {
        serde_json::from_value(json!({
            "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
            "kind": "HorizontalPodAutoscalerPlus",
            "metadata": {"name": "web", "namespace": "team", "uid": "u1",
                "labels": {"record": "yes"},
                "managedFields": [{"manager": "kubectl"}]},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                "name": "web"}, "maxReplicas": 10},
            "status": {"currentReplicas": 1, "desiredReplicas": 1}
        }))
        .unwrap()
    }

    fn settings(dir: &Path, max_bytes: u64) -> RecordSettings {
        RecordSettings {
            dir: dir.to_owned(),
            max_bytes,
            files: 3,
            selector: Selector::everything(),
            annotation_allowed: false,
        }
    }

    fn evaluate(recorder: &Recorder, obj: &HorizontalPodAutoscalerPlus, first_sight: bool, s: i64) {
        let decision = Decision {
            current_replicas: 1,
            desired_replicas: 2,
            scale_to: Some(2),
            recommended_replicas: Some(2),
            proposals: Vec::new(),
            limited_by: None,
            reason: "up".into(),
            conditions: Vec::new(),
            countdowns: Vec::new(),
            next_sync_seconds: 5,
            history: plimsoll_core::horizontal::History::default(),
        };
        let observed = Observation {
            current_replicas: 1,
            ..Observation::default()
        };
        recorder.evaluated(
            &Evaluated {
                object: Object::Plus(obj),
                uid: "u1",
                spec: &obj.spec,
                used: &obj.spec,
                stored: None,
                first_sight,
                observed: &observed,
                at: Timestamp::from_second(1_800_000_000 + s).unwrap(),
                decision: &decision,
                raise: None,
                scaled: true,
            },
            &ControllerConfig::default(),
        );
    }

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("plimsoll-record-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn evaluations_are_appended_and_rotated_within_the_bound() {
        let dir = temp("rotate");
        let recorder = Recorder::new(Some(settings(&dir, 4096)), &mut Registry::default());
        let obj = object();
        for s in 0..40 {
            evaluate(&recorder, &obj, s == 0, s);
        }
        let file = dir.join("team").join("web.jsonl");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains("managedFields") && !text.contains("currentReplicas\":1,\"desired"));
        let parsed = parse(&text).unwrap();
        assert!(parsed.warnings.is_empty());
        for k in [0, 1, 2] {
            let f = if k == 0 {
                file.clone()
            } else {
                rotated(&file, k)
            };
            let len = std::fs::metadata(&f).unwrap().len();
            assert!(len <= 4096, "{} is {len} bytes", f.display());
            let first = std::fs::read_to_string(&f).unwrap();
            assert!(
                recording::is_recording(&first),
                "{} starts with a header",
                f.display()
            );
        }
        assert!(!rotated(&file, 3).exists(), "at most --record-files files");
        assert_eq!(recorder.failures.get(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn without_the_annotation_nothing_is_recorded_when_the_operator_requires_it() {
        let dir = temp("annotation");
        let mut s = settings(&dir, 1 << 20);
        s.annotation_allowed = true;
        let recorder = Recorder::new(Some(s), &mut Registry::default());
        let mut obj = object();
        evaluate(&recorder, &obj, true, 0);
        assert!(!dir.join("team").exists());
        obj.metadata.annotations = Some([(ANNOTATION.to_owned(), "true".to_owned())].into());
        evaluate(&recorder, &obj, false, 5);
        evaluate(&recorder, &obj, false, 10);
        let text = std::fs::read_to_string(dir.join("team").join("web.jsonl")).unwrap();
        let parsed = parse(&text).unwrap();
        // Begun mid-way: a `held` header, then the evaluation after it.
        assert!(matches!(&parsed.lines[0].1, Line::Header(h) if h.start == Start::Held));
        assert_eq!(parsed.lines.len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A directory that cannot be written fails every evaluation: each is counted, and the log
    /// says it once per object.
    #[test]
    fn a_failing_recording_is_one_warning_per_object() {
        let blocked = temp("blocked");
        std::fs::write(&blocked, "a file where the directory should be").unwrap();
        let recorder = Recorder::new(Some(settings(&blocked, 4096)), &mut Registry::default());
        let obj = object();
        // Reached once before the capture: another test may reach the statement at this moment.
        let other = Recorder::new(Some(settings(&blocked, 4096)), &mut Registry::default());
        evaluate(&other, &obj, true, 0);
        let logged = plimsoll_runtime::log_sink::warnings(|| {
            for s in 0..10 {
                evaluate(&recorder, &obj, s == 0, s);
            }
        });
        assert_eq!(recorder.failures.get(), 10);
        assert_eq!(logged.len(), 1, "{logged:#?}");
        assert!(logged[0].contains("could not record"), "{}", logged[0]);
        let _ = std::fs::remove_file(&blocked);
    }

    #[test]
    fn names_that_are_not_dns_names_are_refused() {
        assert!(dns_name("web-1.api").is_ok());
        for bad in ["", "..", "../etc", "a/b", "Web", "-a", "a..b"] {
            assert!(dns_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_longest_names_are_recorded_in_files_of_their_own() {
        let dir = temp("long");
        let recorder = Recorder::new(Some(settings(&dir, 4096)), &mut Registry::default());
        let mut names = Vec::new();
        for tail in ["a", "b"] {
            let mut obj = object();
            obj.metadata.name = Some(format!("{}{tail}", "w".repeat(252)));
            for s in 0..40 {
                evaluate(&recorder, &obj, s == 0, s);
            }
            names.push(obj.metadata.name.unwrap_or_default());
        }
        assert_eq!(recorder.failures.get(), 0, "recorded, rotated and all");
        let files: Vec<String> = std::fs::read_dir(dir.join("team"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(files.len(), 6, "three files each: {files:?}");
        for name in &names {
            let stem = file_stem(name);
            assert!(stem.len() <= MAX_STEM && stem.starts_with("www"));
            let text = std::fs::read_to_string(dir.join("team").join(format!("{stem}.jsonl")));
            assert!(parse(&text.unwrap()).is_ok());
        }
        assert_ne!(file_stem(&names[0]), file_stem(&names[1]));
        assert_eq!(file_stem("web"), "web");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
