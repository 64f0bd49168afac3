//! `CronHorizontalPodAutoscaler`: scheduled scaling jobs for a workload or an autoscaler.
//!
//! The object names a target (`spec.scaleTargetRef`), a time zone, days to skip and a list of
//! jobs; each job sets a size on a cron schedule. The controller keeps one status condition per
//! job. The schedule grammar and its evaluation live in [`crate::schedule`]; this module only
//! holds the wire types and [`CronHorizontalPodAutoscalerSpec::validate`].
//!
//! Invariants checked by `validate()` (and relied on by the planner): job names are unique and
//! non-empty, `targetSize >= 0`, every schedule and excluded date parses, the time zone is a known
//! IANA name.

use std::collections::HashSet;

use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::limits::{
    self, MAX_EXCLUDE_DATES, MAX_JOBS, MAX_LABEL_LENGTH, MAX_NAME_LENGTH,
    MAX_QUALIFIED_NAME_LENGTH, MAX_SCHEDULE_LENGTH, MAX_TIME_ZONE_LENGTH,
};
use super::validation::FieldErrors;
use crate::schedule::{DaySchedule, Schedule, zone};

/// Annotation that switches a job to min-replicas mode even when the target is a plain workload
/// (value `"true"`): the job then sets the `minReplicas` of the autoscaler of the same name.
pub const ADJUST_HPA_MIN_ANNOTATION: &str = "plimsoll.dev/adjust-hpa-min";

/// The `HPAPlus` (`platform.stke`) spelling of [`ADJUST_HPA_MIN_ANNOTATION`], honoured so that a
/// team migrating from that controller changes nothing.
pub const ADJUST_HPA_MIN_ANNOTATION_STKE: &str = "platform.stke/adjust-hpa-min";

/// The shape of a schedule `crate::schedule` accepts: a descriptor (`@daily`, any case), `@every`
/// and a Go duration, or 5 or 6 whitespace-separated fields. Whether each field is in range is
/// left to the controller's condition: the CRD rule only refuses what cannot be a schedule.
const SCHEDULE_SHAPE: &str = "^[[:space:]]*(@(?i:yearly|annually|monthly|weekly|daily|midnight|hourly)\
    |@every[[:space:]]*[0-9.]+[a-zµ]+([0-9.]+[a-zµ]+)*\
    |[^[:space:]@][^[:space:]]*([[:space:]]+[^[:space:]]+){4,5})[[:space:]]*$";

/// The shape of an IANA time zone name (`UTC`, `Europe/Berlin`, `Etc/GMT+5`). CEL cannot consult
/// the time zone database, so a well-formed unknown name (`Mars/Base`) passes the CRD and is
/// reported by the controller's condition.
const TIME_ZONE_SHAPE: &str = "^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$";

fn schedule_rules() -> serde_json::Value {
    serde_json::json!([{
        "rule": format!("self.matches('{SCHEDULE_SHAPE}')"),
        "message": "must be 5 or 6 cron fields, or a descriptor such as @daily or @every 90s",
    }])
}

fn time_zone_rules() -> serde_json::Value {
    serde_json::json!([{
        "rule": format!("self == '' || self.matches('{TIME_ZONE_SHAPE}')"),
        "message": "must be an IANA time zone name such as Europe/Berlin",
    }])
}

/// Makes `jobs` required in the CRD: a CronHPA without jobs does nothing. The Rust type keeps
/// `#[serde(default)]` (objects stored before this rule still read), so the default it would
/// publish, `[]`, is dropped: a real API server refuses a default its own schema rejects.
fn jobs_required(schema: &mut schemars::Schema) {
    if let Some(jobs) = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut("jobs"))
        .and_then(serde_json::Value::as_object_mut)
    {
        jobs.remove("default");
    }
    if let Some(obj) = schema.as_object_mut() {
        let required = obj
            .entry("required")
            .or_insert_with(|| serde_json::Value::Array(Vec::new()));
        if let Some(list) = required.as_array_mut()
            && !list.iter().any(|v| v == "jobs")
        {
            list.push("jobs".into());
        }
    }
}

/// Scheduled scaling for one target.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "autoscaling.plimsoll.dev",
    version = "v1alpha1",
    kind = "CronHorizontalPodAutoscaler",
    namespaced,
    status = "CronHorizontalPodAutoscalerStatus",
    shortname = "cronhpa",
    derive = "PartialEq",
    doc = "Scales a workload, or raises an autoscaler's minimum, on cron schedules.",
    printcolumn = r#"{"name":"Target","type":"string","description":"name of the scaled workload or autoscaler","jsonPath":".spec.scaleTargetRef.name"}"#,
    printcolumn = r#"{"name":"Kind","type":"string","description":"kind of the scaled workload or autoscaler","jsonPath":".spec.scaleTargetRef.kind","priority":1}"#,
    printcolumn = r#"{"name":"Jobs","type":"integer","description":"number of jobs","jsonPath":".status.jobCount"}"#,
    printcolumn = r#"{"name":"KeepWindow","type":"boolean","description":"a scale-up job holds the replica count","jsonPath":".status.scaleUpKeepWindow","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = jobs_required)]
pub struct CronHorizontalPodAutoscalerSpec {
    /// What the jobs scale: a workload with a scale subresource (replica mode), or a
    /// `HorizontalPodAutoscaler` / `HorizontalPodAutoscalerPlus` (min-replicas mode).
    #[schemars(transform = limits::object_reference)]
    pub scale_target_ref: CrossVersionObjectReference,

    /// IANA time zone the schedules are read in (`Europe/Berlin`). Absent or empty: UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), extend("x-kubernetes-validations" = time_zone_rules()))]
    pub time_zone: Option<String>,

    /// Cron expressions of days on which no job fires (`* * * 25 12 *` skips Christmas). Only the
    /// day fields (day of month, month, day of week) matter; the time fields are ignored. At most
    /// 366 expressions of at most 256 characters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_EXCLUDE_DATES), inner(length(max = MAX_SCHEDULE_LENGTH)))]
    pub exclude_dates: Vec<String>,

    /// The jobs, in order; jobs due at the same instant run in this order (1 to 100, names unique).
    #[serde(default)]
    #[schemars(length(min = 1, max = 100), extend("x-kubernetes-validations" = [{
        "rule": "self.all(j, self.exists_one(k, k.name == j.name))",
        "message": "job names must be unique",
    }]))]
    pub jobs: Vec<ScalingJob>,
}

/// One scheduled scaling job.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ScalingJob {
    /// Unique name within the object.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Cron schedule: 6 fields with seconds (`0 */7 * * * ?`), 5 fields (`30 8 * * MON-FRI`), or
    /// a descriptor (`@daily`, `@every 90s`). See `docs/cron-hpa.md`.
    #[schemars(length(max = 256), extend("x-kubernetes-validations" = schedule_rules()))]
    pub schedule: String,
    /// Replicas (replica mode) or `minReplicas` (min-replicas mode) to set. Must be >= 0.
    #[schemars(range(min = 0))]
    pub target_size: i32,
    /// Fire once, then stay done until the job is changed.
    #[serde(default)]
    pub run_once: bool,
}

/// Observed state of a `CronHorizontalPodAutoscaler`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CronHorizontalPodAutoscalerStatus {
    /// One entry per job in `spec.jobs`, in spec order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<JobCondition>,
    /// True from the start of a scale-up job until a later job lowers the size; `hpa-plus` does
    /// not scale a replica-mode target down while it is true.
    #[serde(default)]
    pub scale_up_keep_window: bool,
    /// Number of jobs in the spec (for `kubectl get`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_count: Option<i32>,
    /// `metadata.generation` the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Set while the spec does not validate: no job runs, and `conditions` keep every job's
    /// history (its last run, a `runOnce` job's completion) for when the spec is fixed.
    /// Absent while the spec is valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_spec: Option<InvalidSpec>,
}

/// Why the spec of a `CronHorizontalPodAutoscaler` cannot be scheduled.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InvalidSpec {
    /// Every problem with its field path, separated by `; `
    /// (`spec.jobs[0].schedule: job "peak": invalid schedule "0 0 25 * * *": hour field …`).
    pub message: String,
    /// When the spec became invalid (kept while it stays invalid, whatever the edits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// State of one job.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JobCondition {
    /// Identity of this version of the job; a new id whenever the job is added or changed.
    pub job_id: String,
    /// The job's name.
    pub name: String,
    /// The job's schedule as written.
    pub schedule: String,
    /// Where the job is.
    pub state: JobState,
    /// When the job last ran or was last (re)submitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    /// Sizes before and after the last run and the next run time, or why it failed.
    #[serde(default)]
    pub message: String,
}

/// Lifecycle of a job version.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum JobState {
    /// Scheduled, not yet run (or changed since its last run).
    #[default]
    Submitted,
    /// The last run set the size.
    Succeed,
    /// The last run failed, or a run was missed by more than the grace period.
    Failed,
}

impl CronHorizontalPodAutoscalerSpec {
    /// Every problem in the spec, each with its field path
    /// (`spec.jobs[2].schedule: …`, `spec.timeZone: unknown time zone "Mars/Base"`).
    pub fn validate(&self) -> Result<(), FieldErrors> {
        let mut errors = FieldErrors::default();
        if self.scale_target_ref.kind.is_empty() {
            errors.push("spec.scaleTargetRef.kind", "must not be empty");
        }
        if self.scale_target_ref.name.is_empty() {
            errors.push("spec.scaleTargetRef.name", "must not be empty");
        }
        self.validate_sizes(&mut errors);
        if let Some(name) = &self.time_zone
            && let Err(e) = zone::parse_time_zone(name)
        {
            errors.push("spec.timeZone", e.to_string());
        }
        for (i, expr) in self.exclude_dates.iter().enumerate() {
            if let Err(e) = DaySchedule::parse(expr) {
                errors.push(format!("spec.excludeDates[{i}]"), e.to_string());
            }
        }
        let mut seen = HashSet::new();
        for (i, job) in self.jobs.iter().enumerate() {
            if job.name.is_empty() {
                errors.push(format!("spec.jobs[{i}].name"), "must not be empty");
            } else if !seen.insert(job.name.as_str()) {
                errors.push(
                    format!("spec.jobs[{i}].name"),
                    format!("duplicate job name \"{}\"", job.name),
                );
            }
            if let Err(e) = Schedule::parse(&job.schedule) {
                errors.push(
                    format!("spec.jobs[{i}].schedule"),
                    format!("job \"{}\": {e}", job.name),
                );
            }
            if job.target_size < 0 {
                errors.push(
                    format!("spec.jobs[{i}].targetSize"),
                    format!("must be >= 0, got {}", job.target_size),
                );
            }
        }
        errors.into_result()
    }

    /// The size limits the CRD states, for objects stored before it did.
    fn validate_sizes(&self, errors: &mut FieldErrors) {
        let target = &self.scale_target_ref;
        if let Some(v) = &target.api_version {
            errors.max_length(
                "spec.scaleTargetRef.apiVersion",
                v,
                MAX_QUALIFIED_NAME_LENGTH,
            );
        }
        errors.max_length("spec.scaleTargetRef.kind", &target.kind, MAX_LABEL_LENGTH);
        errors.max_length("spec.scaleTargetRef.name", &target.name, MAX_NAME_LENGTH);
        if let Some(zone) = &self.time_zone {
            errors.max_length("spec.timeZone", zone, MAX_TIME_ZONE_LENGTH);
        }
        errors.max_items(
            "spec.excludeDates",
            self.exclude_dates.len(),
            MAX_EXCLUDE_DATES,
        );
        for (i, expr) in self.exclude_dates.iter().enumerate() {
            errors.max_length(format!("spec.excludeDates[{i}]"), expr, MAX_SCHEDULE_LENGTH);
        }
        errors.max_items("spec.jobs", self.jobs.len(), MAX_JOBS);
        for (i, job) in self.jobs.iter().enumerate() {
            errors.max_length(format!("spec.jobs[{i}].name"), &job.name, MAX_NAME_LENGTH);
            errors.max_length(
                format!("spec.jobs[{i}].schedule"),
                &job.schedule,
                MAX_SCHEDULE_LENGTH,
            );
        }
    }
}

#[cfg(test)]
impl CronHorizontalPodAutoscalerSpec {
    /// A spec targeting `Deployment/web` with no jobs, in UTC.
    pub fn test() -> Self {
        Self {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: "web".into(),
            },
            ..Self::default()
        }
    }

    /// Sets the target kind and name.
    #[must_use]
    pub fn target(mut self, kind: &str, name: &str) -> Self {
        self.scale_target_ref.kind = kind.into();
        self.scale_target_ref.name = name.into();
        self
    }

    /// Sets `spec.timeZone`.
    #[must_use]
    pub fn tz(mut self, zone: &str) -> Self {
        self.time_zone = Some(zone.into());
        self
    }

    /// Adds an excluded-dates expression.
    #[must_use]
    pub fn exclude(mut self, expr: &str) -> Self {
        self.exclude_dates.push(expr.into());
        self
    }

    /// Adds a job.
    #[must_use]
    pub fn job(mut self, name: &str, schedule: &str, target_size: i32) -> Self {
        self.jobs.push(ScalingJob {
            name: name.into(),
            schedule: schedule.into(),
            target_size,
            run_once: false,
        });
        self
    }

    /// Adds a `runOnce` job.
    #[must_use]
    pub fn job_once(mut self, name: &str, schedule: &str, target_size: i32) -> Self {
        self.jobs.push(ScalingJob {
            name: name.into(),
            schedule: schedule.into(),
            target_size,
            run_once: true,
        });
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn valid_spec_passes() {
        let spec = CronHorizontalPodAutoscalerSpec::test()
            .tz("Europe/Berlin")
            .exclude("* * * 25 12 *")
            .job("up", "0 0 8 * * MON-FRI", 10)
            .job("down", "0 20 * * *", 2);
        assert_eq!(spec.validate(), Ok(()));
    }

    #[test]
    fn every_problem_is_reported_with_its_path() {
        let spec = CronHorizontalPodAutoscalerSpec::test()
            .target("Deployment", "")
            .tz("Mars/Base")
            .exclude("not a day")
            .job("a", "0 0 8 * * *", 1)
            .job("a", "0 0 9 * * *", -1)
            .job("c", "0 0 25 * * *", 1);
        let errors = spec.validate().unwrap_err();
        assert!(errors.has_path("spec.scaleTargetRef.name"), "{errors}");
        assert!(errors.has_path("spec.excludeDates[0]"), "{errors}");
        assert!(errors.has_path("spec.jobs[1].name"), "{errors}");
        assert!(errors.has_path("spec.jobs[1].targetSize"), "{errors}");
        assert!(errors.has_path("spec.jobs[2].schedule"), "{errors}");
        let text = errors.to_string();
        assert!(
            text.contains(r#"spec.timeZone: unknown time zone "Mars/Base""#),
            "{text}"
        );
        assert!(text.contains(r#"duplicate job name "a""#), "{text}");
        assert!(text.contains(r#"spec.jobs[2].schedule: job "c""#), "{text}");
        assert!(text.contains("hour"), "{text}");
        assert_eq!(errors.0.len(), 6, "{text}");
    }

    #[test]
    fn sizes_are_bounded_as_the_crd_bounds_them() {
        let mut spec = CronHorizontalPodAutoscalerSpec::test().job("a", "@daily", 1);
        spec.exclude_dates = vec!["* * * 25 12 *".into(); MAX_EXCLUDE_DATES];
        assert_eq!(spec.validate(), Ok(()));
        spec.exclude_dates
            .push(format!("* * * 25 12 *{}", " ".repeat(250)));
        spec.scale_target_ref.name = "w".repeat(254);
        spec.jobs[0].name = "j".repeat(254);
        for i in 0..MAX_JOBS {
            spec = spec.job(&format!("j{i}"), "@hourly", 1);
        }
        let errors = spec.validate().unwrap_err();
        let text = errors.to_string();
        for (path, message) in [
            ("spec.excludeDates", "must have at most 366 items, got 367"),
            (
                "spec.excludeDates[366]",
                "may not be more than 256 characters",
            ),
            (
                "spec.scaleTargetRef.name",
                "may not be more than 253 characters",
            ),
            ("spec.jobs", "must have at most 100 items, got 101"),
            ("spec.jobs[0].name", "may not be more than 253 characters"),
        ] {
            assert!(
                errors
                    .0
                    .iter()
                    .any(|e| e.path == path && e.message.contains(message)),
                "{path}: {message} in {text}"
            );
        }
    }

    #[test]
    fn empty_time_zone_means_utc() {
        let spec = CronHorizontalPodAutoscalerSpec::test().tz("");
        assert_eq!(spec.validate(), Ok(()));
    }

    #[test]
    fn crd_has_short_name_status_and_columns() {
        let crd = CronHorizontalPodAutoscaler::crd();
        assert_eq!(crd.spec.group, "autoscaling.plimsoll.dev");
        assert_eq!(
            crd.spec.names.short_names.as_deref(),
            Some(&["cronhpa".to_string()][..])
        );
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        assert!(version.subresources.as_ref().unwrap().status.is_some());
        let columns: Vec<_> = version
            .additional_printer_columns
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(columns, ["Target", "Kind", "Jobs", "KeepWindow", "Age"]);
    }

    #[test]
    fn serializes_camel_case_and_round_trips() {
        let spec = CronHorizontalPodAutoscalerSpec::test()
            .tz("Asia/Shanghai")
            .job_once("event", "0 0 20 11 11 *", 50);
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json["timeZone"], "Asia/Shanghai");
        assert_eq!(json["jobs"][0]["targetSize"], 50);
        assert_eq!(json["jobs"][0]["runOnce"], true);
        assert_eq!(json["scaleTargetRef"]["kind"], "Deployment");
        let back: CronHorizontalPodAutoscalerSpec = serde_json::from_value(json).unwrap();
        assert_eq!(back, spec);
    }
}
