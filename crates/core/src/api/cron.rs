//! `CronHorizontalPodAutoscaler`: scheduled scaling jobs for a workload or an autoscaler.
//!
//! The object names a target (`spec.scaleTargetRef`), a time zone, days to skip and a list of
//! jobs; each job sets a size on a cron schedule. The controller keeps one status condition per
//! job. This module holds the wire types only: the schedule grammar, its evaluation and
//! [`CronHorizontalPodAutoscalerSpec::validate`] (which needs the grammar) live in
//! [`crate::schedule`], which imports this module and is never imported by it.

use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::limits::{self, MAX_EXCLUDE_DATES, MAX_SCHEDULE_LENGTH};
use crate::printable;

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
    printcolumn = r#"{"name":"Ready","type":"string","description":"whether the spec validates and the target resolves","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"Next Run","type":"string","description":"the earliest next run of any job","jsonPath":".status.nextRun"}"#,
    printcolumn = r#"{"name":"KeepWindow","type":"boolean","description":"a scale-up job holds the replica count","jsonPath":".status.scaleUpKeepWindow","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = jobs_required)]
pub struct CronHorizontalPodAutoscalerSpec {
    /// What the jobs scale: a workload with a scale subresource (replica mode), or a
    /// `HorizontalPodAutoscaler` / `HorizontalPodAutoscalerPlus` (min-replicas mode).
    #[schemars(transform = limits::scale_target_reference)]
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
///
/// On the wire the job conditions and the [`ReadyCondition`] share `status.conditions` (the
/// jobs first, in spec order, then `Ready`), so the per-job state stays where it always was
/// and `kubectl wait --for=condition=Ready` finds an entry with `type` and `status`. Here they
/// are two fields; [`StatusWire`] joins and splits them.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(try_from = "StatusWire", into = "StatusWire")]
pub struct CronHorizontalPodAutoscalerStatus {
    /// One entry per job in `spec.jobs`, in spec order.
    pub conditions: Vec<JobCondition>,
    /// Whether the object can run its jobs; absent until the controller first evaluated it.
    pub ready: Option<ReadyCondition>,
    /// True from the start of a scale-up job until a later job lowers the size; `hpa-plus` does
    /// not scale a replica-mode target down while it is true.
    pub scale_up_keep_window: bool,
    /// Number of jobs in the spec (for `kubectl get`).
    pub job_count: Option<i32>,
    /// The earliest next run of any job (for `kubectl get`); absent when no job runs again or
    /// the spec is invalid.
    pub next_run: Option<Time>,
    /// `metadata.generation` the status describes.
    pub observed_generation: Option<i64>,
    /// Set while the spec does not validate: no job runs, and `conditions` keep every job's
    /// history (its last run, a `runOnce` job's completion) for when the spec is fixed.
    /// Absent while the spec is valid.
    pub invalid_spec: Option<InvalidSpec>,
}

/// The `Ready` condition of a `CronHorizontalPodAutoscaler`: `True` when the spec validates
/// and the target resolves (see `docs/cron-hpa.md`, "Status").
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReadyCondition {
    /// Whether the object is ready.
    pub status: bool,
    /// `Scheduled`, `InvalidSpec` or `TargetUnresolved`.
    pub reason: String,
    /// The next run, the spec's problems, or why the target does not resolve.
    pub message: String,
    /// When `status` last changed.
    pub last_transition_time: Option<Time>,
    /// `metadata.generation` the condition describes.
    pub observed_generation: Option<i64>,
}

/// The type of the top-level condition in `status.conditions`.
pub const READY_CONDITION: &str = "Ready";

// `status` as it is stored: [`CronHorizontalPodAutoscalerStatus`] with the job conditions and
// the `Ready` condition in one list. This is the schema the CRD publishes.
/// Observed state of a `CronHorizontalPodAutoscaler`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "CronHorizontalPodAutoscalerStatus")]
pub struct StatusWire {
    /// One entry per job in `spec.jobs`, in spec order (`jobId`, `name`, `schedule`, `state`,
    /// `lastProbeTime`, `message`), then the condition `type: Ready` (`status`, `reason`,
    /// `message`, `lastTransitionTime`, `observedGeneration`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<StatusCondition>,
    /// True from the start of a scale-up job until a later job lowers the size; `hpa-plus` does
    /// not scale a replica-mode target down while it is true.
    #[serde(default)]
    pub scale_up_keep_window: bool,
    /// Number of jobs in the spec (for `kubectl get`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_count: Option<i32>,
    /// The earliest next run of any job (for `kubectl get`); absent when no job runs again or
    /// the spec is invalid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run: Option<Time>,
    /// `metadata.generation` the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Set while the spec does not validate: no job runs, and `conditions` keep every job's
    /// history (its last run, a `runOnce` job's completion) for when the spec is fixed.
    /// Absent while the spec is valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_spec: Option<InvalidSpec>,
}

/// One entry of `status.conditions`: a job's state (no `type`) or the `Ready` condition.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatusCondition {
    /// `Ready` for the top-level condition; absent on a job's entry.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// `True` or `False` (the `Ready` condition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Why, in one word (the `Ready` condition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When `status` last changed (the `Ready` condition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// `metadata.generation` the condition describes (the `Ready` condition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// A job's identity: a new id whenever the job is added or changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// The job's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The job's schedule as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// Where the job is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<JobState>,
    /// When the job last ran or was last (re)submitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    /// A job's sizes before and after its last run and its next run time, or why it failed;
    /// the `Ready` condition's explanation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl From<CronHorizontalPodAutoscalerStatus> for StatusWire {
    fn from(s: CronHorizontalPodAutoscalerStatus) -> Self {
        let jobs = s.conditions.into_iter().map(|c| StatusCondition {
            job_id: Some(c.job_id),
            name: Some(c.name),
            schedule: Some(c.schedule),
            state: Some(c.state),
            last_probe_time: c.last_probe_time,
            message: Some(printable::message(
                &c.message,
                printable::MAX_CONDITION_MESSAGE_BYTES,
            )),
            ..StatusCondition::default()
        });
        let ready = s.ready.map(|r| StatusCondition {
            type_: Some(READY_CONDITION.to_owned()),
            status: Some(if r.status { "True" } else { "False" }.to_owned()),
            reason: Some(r.reason),
            message: Some(printable::message(
                &r.message,
                printable::MAX_CONDITION_MESSAGE_BYTES,
            )),
            last_transition_time: r.last_transition_time,
            observed_generation: r.observed_generation,
            ..StatusCondition::default()
        });
        Self {
            conditions: jobs.chain(ready).collect(),
            scale_up_keep_window: s.scale_up_keep_window,
            job_count: s.job_count,
            next_run: s.next_run,
            observed_generation: s.observed_generation,
            invalid_spec: s.invalid_spec,
        }
    }
}

impl TryFrom<StatusWire> for CronHorizontalPodAutoscalerStatus {
    type Error = String;

    /// Splits the conditions; a job entry without its identity is refused (as it was when the
    /// list held only jobs). Conditions of other types are not this controller's and are
    /// dropped.
    fn try_from(w: StatusWire) -> Result<Self, String> {
        let mut conditions = Vec::new();
        let mut ready = None;
        for (i, c) in w.conditions.into_iter().enumerate() {
            match c.type_.as_deref() {
                Some(READY_CONDITION) => {
                    ready = Some(ReadyCondition {
                        status: c.status.as_deref() == Some("True"),
                        reason: c.reason.unwrap_or_default(),
                        message: c.message.unwrap_or_default(),
                        last_transition_time: c.last_transition_time,
                        observed_generation: c.observed_generation,
                    });
                }
                Some(_) => {}
                None => {
                    let (Some(job_id), Some(name), Some(schedule), Some(state)) =
                        (c.job_id, c.name, c.schedule, c.state)
                    else {
                        return Err(format!(
                            "status.conditions[{i}]: a job's entry needs jobId, name, schedule and state"
                        ));
                    };
                    conditions.push(JobCondition {
                        job_id,
                        name,
                        schedule,
                        state,
                        last_probe_time: c.last_probe_time,
                        message: c.message.unwrap_or_default(),
                    });
                }
            }
        }
        Ok(Self {
            conditions,
            ready,
            scale_up_keep_window: w.scale_up_keep_window,
            job_count: w.job_count,
            next_run: w.next_run,
            observed_generation: w.observed_generation,
            invalid_spec: w.invalid_spec,
        })
    }
}

impl JsonSchema for CronHorizontalPodAutoscalerStatus {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        StatusWire::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        StatusWire::json_schema(generator)
    }
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
        assert_eq!(
            columns,
            [
                "Target",
                "Kind",
                "Jobs",
                "Ready",
                "Next Run",
                "KeepWindow",
                "Age"
            ]
        );
    }

    #[test]
    fn ready_follows_the_job_conditions_in_one_list_and_splits_back() {
        let status = CronHorizontalPodAutoscalerStatus {
            conditions: vec![JobCondition {
                job_id: "id".into(),
                name: "up".into(),
                schedule: "@daily".into(),
                state: JobState::Succeed,
                last_probe_time: None,
                message: String::new(),
            }],
            ready: Some(ReadyCondition {
                status: true,
                reason: "Scheduled".into(),
                message: "next run at 2026-01-02T00:00:00Z".into(),
                last_transition_time: Some(Time("2026-01-01T00:00:00Z".parse().unwrap())),
                observed_generation: Some(3),
            }),
            next_run: Some(Time("2026-01-02T00:00:00Z".parse().unwrap())),
            job_count: Some(1),
            ..CronHorizontalPodAutoscalerStatus::default()
        };
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(
            json["conditions"],
            serde_json::json!([
                {"jobId": "id", "name": "up", "schedule": "@daily", "state": "Succeed", "message": ""},
                {"type": "Ready", "status": "True", "reason": "Scheduled",
                 "message": "next run at 2026-01-02T00:00:00Z",
                 "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 3},
            ])
        );
        assert_eq!(json["nextRun"], "2026-01-02T00:00:00Z");
        let back: CronHorizontalPodAutoscalerStatus = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, status);
        // A status written before the Ready condition existed still reads.
        let old = serde_json::json!({"conditions": [json["conditions"][0].clone()], "jobCount": 1});
        let old: CronHorizontalPodAutoscalerStatus = serde_json::from_value(old).unwrap();
        assert_eq!(old.conditions, status.conditions);
        assert_eq!(old.ready, None);
        // Another controller's condition is not ours; a job entry without its identity is refused.
        let mut other = json.clone();
        other["conditions"][1]["type"] = "Other".into();
        let other: CronHorizontalPodAutoscalerStatus = serde_json::from_value(other).unwrap();
        assert_eq!(other.ready, None);
        let mut broken = json;
        broken["conditions"][0]
            .as_object_mut()
            .unwrap()
            .remove("jobId");
        let err = serde_json::from_value::<CronHorizontalPodAutoscalerStatus>(broken).unwrap_err();
        assert!(err.to_string().contains("status.conditions[0]"), "{err}");
    }

    #[test]
    fn the_status_schema_takes_both_kinds_of_condition() {
        let crd = serde_json::to_value(CronHorizontalPodAutoscaler::crd()).unwrap();
        let item = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
            ["properties"]["conditions"]["items"];
        for field in [
            "type",
            "status",
            "reason",
            "lastTransitionTime",
            "jobId",
            "name",
            "state",
        ] {
            assert!(item["properties"][field].is_object(), "{field} in {item}");
        }
        assert!(item.get("required").is_none(), "{item}");
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
