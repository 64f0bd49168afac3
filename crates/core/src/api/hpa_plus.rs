//! `HorizontalPodAutoscalerPlus`: the `autoscaling/v2` HPA spec plus Plimsoll additions.
//!
//! The spec is the upstream `autoscaling/v2` `HorizontalPodAutoscalerSpec` field for field
//! (same JSON names, same optionality), so an upstream manifest deserializes after changing only
//! `apiVersion` and `kind`. The additions of DESIGN.md (`WatermarkPodAutoscaler` and `HPAPlus`
//! features) are optional top-level spec fields and a `Watermark` metric target type; an object
//! that sets none of them behaves exactly like an upstream HPA.
//!
//! Invariants: every quantity stays a Kubernetes quantity string on the wire (field-compatible
//! with upstream); [`HorizontalPodAutoscalerPlusSpec::validate`] reports every problem with its
//! field path; native `autoscaling/v2` objects convert with [`HorizontalPodAutoscalerPlus::from_native`].

#[cfg(test)]
pub(crate) mod fixtures;
pub mod history;
mod native;
mod native_object;
mod quantities;
mod rules;

pub use native::{
    ANNOTATION_PREFIXES, NativeConversionError, PROMETHEUS_QUERY_ANNOTATION_PREFIX,
    PROMETHEUS_QUERY_METRIC, PROMETHEUS_QUERY_NAME_LABEL, PROMETHEUS_SERVER_ANNOTATION_NAME,
    TUNING_ANNOTATION_NAME, TUNING_FLOOR_ANNOTATION_NAME, TUNING_LOOKBACK_ANNOTATION_NAME,
    is_read_annotation, native_metric_status,
};
pub use native_object::NativeHpa;
pub(crate) use quantities::{quantity_milli, quantity_value};

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::limits::{
    self, MAX_ADDRESS_LENGTH, MAX_LABEL_LENGTH, MAX_METRIC_NAME_LENGTH, MAX_METRICS,
    MAX_NAME_LENGTH, MAX_QUALIFIED_NAME_LENGTH, MAX_QUERY_LENGTH, MAX_SCALING_POLICIES,
};

/// Desired state of a `HorizontalPodAutoscalerPlus`.
///
/// Fields up to `behavior` are upstream `autoscaling/v2`; the rest are Plimsoll additions
/// (see docs/hpa-plus.md for the precedence of every rule).
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
// The lint reads each printcolumn's repeated `type_ = "integer"` as a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
// Four independent switches of the API, not a state machine.
#[allow(clippy::struct_excessive_bools)]
#[kube(
    group = "autoscaling.plimsoll.dev",
    version = "v1alpha1",
    kind = "HorizontalPodAutoscalerPlus",
    namespaced,
    status = "HorizontalPodAutoscalerPlusStatus",
    derive = "PartialEq",
    shortname = "hpaplus",
    shortname = "hpap",
    category = "all",
    category = "plimsoll",
    doc = "HorizontalPodAutoscalerPlus: an autoscaling/v2 HorizontalPodAutoscaler with watermarks, limit factors, per-object tolerance and sync period, dry-run and pausing.",
    printcolumn(
        name = "Reference",
        type_ = "string",
        description = "The scale target, Kind/name",
        json_path = ".status.reference"
    ),
    printcolumn(
        name = "Targets",
        type_ = "string",
        description = "Current and target value of each metric",
        json_path = ".status.targetsSummary"
    ),
    printcolumn(
        name = "MinPods",
        type_ = "integer",
        description = "Lower limit of replicas",
        json_path = ".spec.minReplicas"
    ),
    printcolumn(
        name = "MaxPods",
        type_ = "integer",
        description = "Upper limit of replicas",
        json_path = ".spec.maxReplicas"
    ),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        description = "Current replicas",
        json_path = ".status.currentReplicas"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = rules::spec()))]
pub struct HorizontalPodAutoscalerPlusSpec {
    /// The workload to scale (anything with a scale subresource).
    #[schemars(transform = limits::path_segment_names)]
    pub scale_target_ref: CrossVersionObjectReference,
    /// Lower limit of replicas (default 1). 0 is allowed when at least one Object or External
    /// metric is configured (upstream `HPAScaleToZero`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_replicas: Option<i32>,
    /// Upper limit of replicas; must be >= `minReplicas`.
    #[schemars(range(min = 1))]
    pub max_replicas: i32,
    /// The metrics whose proposals are combined (largest wins). Default: CPU utilization 80 %.
    /// At most 32 (upstream has no limit; each metric is fetched every evaluation, and no
    /// autoscaler needs more than a handful).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_METRICS))]
    pub metrics: Vec<MetricSpec>,
    /// Scale-up and scale-down behavior (stabilization windows, policies, tolerance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<HorizontalPodAutoscalerBehavior>,

    /// Ratio band around 1.0 inside which nothing scales (default: the controller's
    /// `--tolerance`, 0.1). `behavior.scaleUp/scaleDown.tolerance` override it per direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = rules::quantity_range("0", "1", false)))]
    pub tolerance: Option<Quantity>,
    /// This object's own evaluation period in seconds (default 5; never below the controller's
    /// `--min-sync-period`). A change takes effect at the next reconcile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub sync_period_seconds: Option<i32>,
    /// What `Utilization` targets are a percentage of (default `Requests`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization_base: Option<UtilizationBase>,
    /// Which of the pods the target's selector matches count (KEP-5325, default
    /// `LabelSelector`): `OwnerReferences` keeps only the target's own pods (directly, or
    /// through a ReplicaSet it controls). Acted on only when hpa-plus runs with
    /// `--pod-selection-strategy`; otherwise accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selection_strategy: Option<PodSelectionStrategy>,
    /// Maximum replicas added per scaling event, in percent of current replicas (0–100; 0 turns
    /// scale-up off). Default: the controller's `--scale-up-limit-factor` (none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = rules::quantity_range("0", "100", true)))]
    pub scale_up_limit_factor: Option<Quantity>,
    /// Maximum replicas removed per scaling event, in percent of current replicas (0–100; 0 turns
    /// scale-down off). Default: the controller's `--scale-down-limit-factor` (none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = rules::quantity_range("0", "100", true)))]
    pub scale_down_limit_factor: Option<Quantity>,
    /// No scale-up until this many seconds after the last scale event (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub upscale_forbidden_window_seconds: Option<i32>,
    /// No scale-down until this many seconds after the last scale event (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub downscale_forbidden_window_seconds: Option<i32>,
    /// A value must stay above its high watermark this long before scaling up (default 0;
    /// OR over metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub upscale_delay_above_watermark_seconds: Option<i32>,
    /// A value must stay below its low watermark this long before scaling down (default 0;
    /// OR over metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub downscale_delay_below_watermark_seconds: Option<i32>,
    /// How Object and External watermark values map to replicas (default `absolute`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<Algorithm>,
    /// No scaling while fewer than this percentage of current replicas are ready (0–100,
    /// default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub min_available_replica_percentage: Option<i32>,
    /// Pods that started less than this many seconds ago are not counted as ready (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub readiness_delay_seconds: Option<i32>,
    /// Replicas added or removed are a multiple of this (>= 1, default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub replica_scaling_absolute_modulo: Option<i32>,
    /// While a watermark metric is within its band, step by one modulo toward this watermark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub converge_towards_watermark: Option<ConvergeTowardsWatermark>,
    /// Treat a metric value of exactly 0 as real (default false: a zero value blocks scaling,
    /// as `WatermarkPodAutoscaler` does).
    #[serde(default, skip_serializing_if = "is_false")]
    pub tolerate_zero: bool,
    /// Compute and report decisions, never write the scale (default false).
    #[serde(default, skip_serializing_if = "is_false")]
    pub dry_run: bool,
    /// Stop acting, keep reporting (default false).
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// Do not scale while the target is rolling out (default false).
    #[serde(default, skip_serializing_if = "is_false")]
    pub pause_during_rollout: bool,
    /// Lower `minReplicas` to what the weighted daily peaks of the last `lookbackDays` need
    /// (default: off, or the `plimsoll.dev/min-replicas-tuning` annotation). docs/hpa-plus.md,
    /// "minReplicas tuning".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas_tuning: Option<MinReplicasTuning>,
    /// Scale up ahead of a recurring rush from the metric's own history (default: off).
    /// docs/hpa-plus.md, "Predictive scaling"; the model is in
    /// `plimsoll_core::horizontal::predictive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predictive: Option<Predictive>,
}

/// `spec.minReplicasTuning`: how `minReplicas` follows the load history. Tuning only ever
/// lowers `minReplicas`, never below `floor`, at most once a day, and never while a CronHPA
/// job or keep window holds the target.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
// floor >= 1 and lookbackDays 1–30 are OpenAPI bounds; floor <= maxReplicas is a spec rule.
pub struct MinReplicasTuning {
    /// `Off` (default), `Report` (status and an Event say what it would set) or `Apply`.
    #[serde(default)]
    pub mode: TuningMode,
    /// Days of history whose daily peaks are weighted (1–30, default 7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 30))]
    pub lookback_days: Option<i32>,
    /// Tuning never sets `minReplicas` below this (>= 1, <= `maxReplicas`; default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub floor: Option<i32>,
}

/// Default of `spec.minReplicasTuning.lookbackDays`.
pub const DEFAULT_LOOKBACK_DAYS: i32 = 7;

/// `spec.predictive`: forecast the load of the next `leadSeconds` from the same time of the
/// season on the past `lookbackDays`, and scale up to what the forecast needs before the load
/// arrives. A prediction only ever raises the replicas the reactive path chose; it never scales
/// down.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
// lookbackDays 1–30 is an OpenAPI bound; a weekly season needs at least 7 days (a rule).
#[schemars(extend("x-kubernetes-validations" = rules::predictive()))]
pub struct Predictive {
    /// `Off` (default), `Report` (status and a metric show the forecast) or `Scale`.
    #[serde(default)]
    pub mode: PredictiveMode,
    /// Days of history the forecast reads (1–30, default 7; at least 7 with a `168h` season).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 30))]
    pub lookback_days: Option<i32>,
    /// The period the load repeats with: `auto` (default: the day or the week, whichever
    /// forecast the history better), `24h` or `168h`.
    #[serde(default)]
    pub season: Season,
    /// How far ahead the forecast looks: `auto` (default: the time the workload's pods take to
    /// become Ready, plus one evaluation step) or a whole number of seconds.
    #[serde(default)]
    pub lead_seconds: LeadSeconds,
    /// What one replica-second of overload is worth against one replica held for nothing
    /// for a second (1–100, default 1), in the check that decides whether acting on the
    /// forecast pays at this time of day: higher buys headroom ahead of rises that past
    /// seasons showed only some of the time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub overload_weight: Option<i32>,
}

impl Predictive {
    /// `lookbackDays`, defaulted (7) and kept within 1–30.
    pub fn lookback_days(&self) -> i32 {
        self.lookback_days
            .unwrap_or(DEFAULT_LOOKBACK_DAYS)
            .clamp(1, 30)
    }

    /// `overloadWeight`, defaulted (1) and kept within 1–100.
    pub fn overload_weight(&self) -> i32 {
        self.overload_weight.unwrap_or(1).clamp(1, 100)
    }
}

/// What `spec.predictive` does with its forecast.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PredictiveMode {
    /// Nothing: no forecast, no status.
    #[default]
    Off,
    /// Forecast and report (status, metric), never change the replicas.
    Report,
    /// Scale up to the forecast's replicas when they exceed the reactive decision.
    Scale,
}

impl PredictiveMode {
    /// Reads an annotation's value: `off`, `report` or `scale` (any case).
    pub fn parse(v: &str) -> Option<Self> {
        match v.trim().to_ascii_lowercase().as_str() {
            "off" | "" => Some(Self::Off),
            "report" => Some(Self::Report),
            "scale" => Some(Self::Scale),
            _ => None,
        }
    }
}

/// The period a predictive load repeats with (`spec.predictive.season`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Season {
    /// Chosen per metric from the history (default): the week when its forecasts of the last
    /// days were closer than the day's (the history must span two weeks), else the day.
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// A day: the same time yesterday, the day before, …
    #[serde(rename = "24h")]
    Day,
    /// A week: the same time and weekday last week, …
    #[serde(rename = "168h")]
    Week,
}

impl Season {
    /// Reads an annotation's value: `auto`, `24h` or `168h`.
    pub fn parse(v: &str) -> Option<Self> {
        match v.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(Self::Auto),
            "24h" => Some(Self::Day),
            "168h" => Some(Self::Week),
            _ => None,
        }
    }
}

/// `spec.predictive.leadSeconds`: `auto` or a whole number of seconds (int-or-string on the
/// wire, like a quantity: `auto`, `900` or `"900"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LeadSeconds {
    /// The measured pod startup time plus one evaluation step.
    #[default]
    Auto,
    /// This many seconds (>= 0).
    Seconds(i64),
}

impl LeadSeconds {
    /// Reads an annotation's value: `auto` (any case) or a whole number of seconds >= 0.
    pub fn parse(v: &str) -> Option<Self> {
        let v = v.trim();
        if v.eq_ignore_ascii_case("auto") {
            return Some(Self::Auto);
        }
        v.parse::<i64>().ok().filter(|n| *n >= 0).map(Self::Seconds)
    }
}

impl Serialize for LeadSeconds {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Auto => s.serialize_str("auto"),
            Self::Seconds(n) => s.serialize_i64(*n),
        }
    }
}

impl<'de> Deserialize<'de> for LeadSeconds {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Wire {
            Number(i64),
            Text(String),
        }
        let bad = || {
            serde::de::Error::custom(
                "leadSeconds must be \"auto\" or a whole number of seconds >= 0",
            )
        };
        // `null` (the schema is nullable, as every optional field) means the default.
        match Option::<Wire>::deserialize(d)? {
            None => Ok(Self::Auto),
            Some(Wire::Number(n)) if n >= 0 => Ok(Self::Seconds(n)),
            Some(Wire::Number(_)) => Err(bad()),
            Some(Wire::Text(t)) if t.trim().eq_ignore_ascii_case("auto") => Ok(Self::Auto),
            Some(Wire::Text(t)) => match t.trim().parse::<i64>() {
                Ok(n) if n >= 0 => Ok(Self::Seconds(n)),
                _ => Err(bad()),
            },
        }
    }
}

impl JsonSchema for LeadSeconds {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "LeadSeconds".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "x-kubernetes-int-or-string": true,
            "x-kubernetes-validations": rules::lead_seconds_rules(),
        })
    }
}

impl MinReplicasTuning {
    /// `lookbackDays`, defaulted and kept within 1–30.
    pub fn lookback_days(&self) -> i32 {
        self.lookback_days
            .unwrap_or(DEFAULT_LOOKBACK_DAYS)
            .clamp(1, 30)
    }

    /// `floor`, defaulted (1) and never below 1.
    pub fn floor(&self) -> i32 {
        self.floor.unwrap_or(1).max(1)
    }
}

/// What `minReplicasTuning` does with its proposal.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TuningMode {
    /// Nothing: no proposal, no status.
    #[default]
    Off,
    /// Propose and report (status, Event), never change `minReplicas`.
    Report,
    /// Lower `minReplicas` to the proposal (at most once a day).
    Apply,
}

impl TuningMode {
    /// Reads the annotation's value: `off`, `report` or `apply` (any case).
    pub fn parse(v: &str) -> Option<Self> {
        match v.trim().to_ascii_lowercase().as_str() {
            "off" | "" => Some(Self::Off),
            "report" => Some(Self::Report),
            "apply" => Some(Self::Apply),
            _ => None,
        }
    }
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if signature"
)]
fn is_false(b: &bool) -> bool {
    !*b
}

/// Identifies the scale target (upstream `CrossVersionObjectReference`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct CrossVersionObjectReference {
    /// API version of the referent, e.g. `apps/v1` (at most 317 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_QUALIFIED_NAME_LENGTH))]
    pub api_version: Option<String>,
    /// Kind of the referent, e.g. `Deployment` (1 to 63 characters; in a spec not `.` or `..`,
    /// no `/` or `%`).
    #[schemars(length(min = 1, max = MAX_LABEL_LENGTH))]
    pub kind: String,
    /// Name of the referent, in the autoscaler's namespace (1 to 253 characters; in a spec not
    /// `.` or `..`, no `/` or `%`).
    #[schemars(length(min = 1, max = MAX_NAME_LENGTH))]
    pub name: String,
}

/// What `Utilization` targets are a percentage of.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum UtilizationBase {
    /// Container requests (upstream behavior).
    #[default]
    Requests,
    /// Container limits, falling back to requests for containers without a limit.
    Limits,
}

/// Which pods the metrics and the ready count use (KEP-5325 `podSelectionStrategy`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PodSelectionStrategy {
    /// Every pod the target's label selector matches (upstream behavior).
    #[default]
    LabelSelector,
    /// Of those, only the pods the target controls, directly or through a ReplicaSet.
    OwnerReferences,
}

/// How a watermark value maps to replicas (`WatermarkPodAutoscaler` `algorithm`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    /// The value is a total over all pods: `replicas × value / watermark`.
    #[default]
    Absolute,
    /// The value is already a per-pod average: `replicas × value / watermark` against
    /// the average of the pods' values.
    Average,
}

/// Which watermark `convergeTowardsWatermark` steps toward while inside the band.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvergeTowardsWatermark {
    /// Scale down step by step while the value stays below the high watermark.
    #[serde(rename = "highWatermark", alias = "highwatermark")]
    HighWatermark,
    /// Scale up step by step while the value stays above the low watermark.
    #[serde(rename = "lowWatermark", alias = "lowwatermark")]
    LowWatermark,
}

/// The kind of metric source (upstream `MetricSourceType`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MetricSourceType {
    /// A resource of the target's pods (cpu, memory), averaged over pods.
    #[default]
    Resource,
    /// A resource of one named container in each pod.
    ContainerResource,
    /// A custom per-pod metric, averaged over pods.
    Pods,
    /// A metric describing a single Kubernetes object.
    Object,
    /// A metric from outside the cluster.
    External,
    /// The value of a PromQL query, read straight from Prometheus (no metrics adapter).
    Prometheus,
}

/// One metric to scale on (upstream `MetricSpec`); exactly the member named by `type` is set.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = rules::metric_members()))]
pub struct MetricSpec {
    /// Which member below is set.
    #[serde(rename = "type")]
    pub type_: MetricSourceType,
    /// For `type: Resource`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceMetricSource>,
    /// For `type: ContainerResource`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_resource: Option<ContainerResourceMetricSource>,
    /// For `type: Pods`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<PodsMetricSource>,
    /// For `type: Object`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<ObjectMetricSource>,
    /// For `type: External`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalMetricSource>,
    /// For `type: Prometheus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<PrometheusMetricSource>,
}

/// A pod resource metric (upstream `ResourceMetricSource`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[schemars(extend("x-kubernetes-validations" = rules::target_types(&["Utilization", "AverageValue", "Watermark"])))]
pub struct ResourceMetricSource {
    /// Resource name, e.g. `cpu` or `memory` (at most 317 characters).
    #[schemars(length(min = 1, max = MAX_QUALIFIED_NAME_LENGTH))]
    pub name: String,
    /// The target value.
    pub target: MetricTarget,
}

/// A resource metric of one container (upstream `ContainerResourceMetricSource`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[schemars(extend("x-kubernetes-validations" = rules::target_types(&["Utilization", "AverageValue", "Watermark"])))]
pub struct ContainerResourceMetricSource {
    /// Resource name, e.g. `cpu` (at most 317 characters).
    #[schemars(length(min = 1, max = MAX_QUALIFIED_NAME_LENGTH))]
    pub name: String,
    /// Container name in each pod (at most 63 characters).
    #[schemars(length(min = 1, max = MAX_LABEL_LENGTH))]
    pub container: String,
    /// The target value.
    pub target: MetricTarget,
}

/// A custom per-pod metric (upstream `PodsMetricSource`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[schemars(extend("x-kubernetes-validations" = rules::target_types(&["AverageValue", "Watermark"])))]
pub struct PodsMetricSource {
    /// The metric's name and selector.
    #[schemars(transform = limits::path_segment_names)]
    pub metric: MetricIdentifier,
    /// The target value (`AverageValue` or `Watermark`).
    pub target: MetricTarget,
}

/// A metric describing one object (upstream `ObjectMetricSource`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = rules::target_types(&["Value", "AverageValue", "Watermark"])))]
pub struct ObjectMetricSource {
    /// The object the metric describes.
    #[schemars(transform = limits::path_segment_names)]
    pub described_object: CrossVersionObjectReference,
    /// The metric's name and selector.
    #[schemars(transform = limits::path_segment_names)]
    pub metric: MetricIdentifier,
    /// The target value.
    pub target: MetricTarget,
}

/// A metric from outside the cluster (upstream `ExternalMetricSource`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[schemars(extend("x-kubernetes-validations" = rules::target_types(&["Value", "AverageValue", "Watermark"])))]
pub struct ExternalMetricSource {
    /// The metric's name and selector.
    #[schemars(transform = limits::path_segment_names)]
    pub metric: MetricIdentifier,
    /// The target value.
    pub target: MetricTarget,
    /// What this metric proposes once it has failed for a while (KEP-5679).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<MetricFallback>,
}

/// KEP-5679's `ExternalMetricFallback`: once the metric has failed for `failureDuration` without
/// a success in between, it proposes `replicas` (combined with the other metrics by the maximum,
/// still bounded by `minReplicas`, `maxReplicas` and `behavior`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct MetricFallback {
    /// How long the metric must fail, from its first failure in a row, before the fallback
    /// applies: a duration such as `3m` or `1h30m` (units `ms`, `s`, `m`, `h`; > 0 and at most
    /// `24h`; default `3m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-validations" = rules::failure_duration()))]
    pub failure_duration: Option<String>,
    /// The replicas this metric proposes while the fallback applies (>= 1).
    #[schemars(range(min = 1))]
    pub replicas: i32,
}

/// A PromQL query evaluated by `hpa-plus` itself: a metric from any series Prometheus holds,
/// with no metrics adapter in between. The query must reduce to one number (a scalar, or a
/// vector of one series); no series, `NaN` or `±Inf` is a failed metric, like a failed fetch.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = rules::target_types(&["Value", "AverageValue", "Watermark"])))]
pub struct PrometheusMetricSource {
    /// The PromQL instant query, e.g. `sum(rate(http_requests_total{app="web"}[1m]))` (at most
    /// 4096 characters).
    #[schemars(length(min = 1, max = MAX_QUERY_LENGTH))]
    pub query: String,
    /// The name status, Events and metrics give this metric (default: the query itself; at most
    /// 1024 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_METRIC_NAME_LENGTH))]
    pub name: Option<String>,
    /// The server, `http(s)://host[:port][/path]` (default: the controller's
    /// `--prometheus-address`; at most 2048 characters). TLS trust and credentials are the
    /// controller's flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_ADDRESS_LENGTH))]
    pub server_address: Option<String>,
    /// The target value (`Value`, `AverageValue` or `Watermark`).
    pub target: MetricTarget,
    /// What this metric proposes once the query has failed for a while (KEP-5679's `fallback`,
    /// as on an `External` metric).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<MetricFallback>,
}

impl PrometheusMetricSource {
    /// The name its proposal and status carry: `name`, else the query.
    pub fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.query)
    }
}

/// A metric name and optional label selector (upstream `MetricIdentifier`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct MetricIdentifier {
    /// The metric's name (at most 1024 characters; in a spec not `.` or `..`, no `/` or `%`: it
    /// is a segment of the metrics API's URL).
    #[schemars(length(min = 1, max = MAX_METRIC_NAME_LENGTH))]
    pub name: String,
    /// Narrows the metric's series (at most 64 labels or expressions, of at most 64 values;
    /// values at most 63 characters, as upstream's HPA validation allows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = limits::label_selector)]
    pub selector: Option<LabelSelector>,
}

/// The kind of target value (upstream `MetricTargetType` plus `Watermark`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MetricTargetType {
    /// `averageUtilization`: percent of the pods' requests (or limits).
    #[default]
    Utilization,
    /// `value`: the metric's total value.
    Value,
    /// `averageValue`: the metric's value per pod.
    AverageValue,
    /// `lowWatermark` / `highWatermark`: no scaling inside the band (`WatermarkPodAutoscaler`).
    Watermark,
}

/// The target of one metric (upstream `MetricTarget` plus watermarks).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = rules::target()))]
pub struct MetricTarget {
    /// Which of the fields below applies.
    #[serde(rename = "type")]
    pub type_: MetricTargetType,
    /// Target total value, for `Value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = rules::quantity_positive()))]
    pub value: Option<Quantity>,
    /// Target per-pod value, for `AverageValue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = rules::quantity_positive()))]
    pub average_value: Option<Quantity>,
    /// Target utilization in percent, for `Utilization` (`Resource` and `ContainerResource` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub average_utilization: Option<i32>,
    /// Lower bound of the band, for `Watermark`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = rules::quantity_non_negative()))]
    pub low_watermark: Option<Quantity>,
    /// Upper bound of the band, for `Watermark`; must be >= `lowWatermark`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = rules::quantity_non_negative()))]
    pub high_watermark: Option<Quantity>,
}

/// Scale-up and scale-down rules (upstream `HorizontalPodAutoscalerBehavior`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct HorizontalPodAutoscalerBehavior {
    /// Rules for scaling up (default: no stabilization, max of 100 % and 4 pods per 15 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_up: Option<HpaScalingRules>,
    /// Rules for scaling down (default: 300 s stabilization, 100 % per 15 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down: Option<HpaScalingRules>,
    /// Seconds between two evaluations of this autoscaler (1–3600), upstream's
    /// `behavior.syncPeriodSeconds` of KEP-6003 (`HPAConfigurableSyncPeriod`). `spec.syncPeriodSeconds`
    /// wins when both are set; never below the controller's `--min-sync-period`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3600))]
    pub sync_period_seconds: Option<i32>,
}

/// Rules for one direction (upstream `HPAScalingRules`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct HpaScalingRules {
    /// Seconds of past recommendations considered (0–3600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 3600))]
    pub stabilization_window_seconds: Option<i32>,
    /// How policies combine (default `Max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select_policy: Option<ScalingPolicySelect>,
    /// Limits on the change per period (at most 16).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_SCALING_POLICIES))]
    pub policies: Vec<HpaScalingPolicy>,
    /// Tolerance for this direction (overrides `spec.tolerance` and the controller default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = rules::quantity_non_negative()))]
    pub tolerance: Option<Quantity>,
}

/// How scaling policies combine (upstream `ScalingPolicySelect`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ScalingPolicySelect {
    /// The policy allowing the largest change.
    #[default]
    Max,
    /// The policy allowing the smallest change.
    Min,
    /// No scaling in this direction.
    Disabled,
}

/// One scaling policy (upstream `HPAScalingPolicy`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct HpaScalingPolicy {
    /// `Pods` or `Percent`.
    #[serde(rename = "type")]
    pub type_: HpaScalingPolicyType,
    /// Pods, or percent of the replicas at the start of the period (> 0).
    #[schemars(range(min = 1))]
    pub value: i32,
    /// Length of the period in seconds (1–1800).
    #[schemars(range(min = 1, max = 1800))]
    pub period_seconds: i32,
}

/// The unit of a scaling policy's value.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum HpaScalingPolicyType {
    /// An absolute number of pods.
    #[default]
    Pods,
    /// A percentage of the replicas at the start of the period.
    Percent,
}

/// Observed state (upstream `autoscaling/v2` status plus the last decision).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct HorizontalPodAutoscalerPlusStatus {
    /// The generation of the spec this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the target was last rescaled by this autoscaler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scale_time: Option<Time>,
    /// Replicas of the target when last observed.
    #[serde(default)]
    pub current_replicas: i32,
    /// Replicas this autoscaler wants.
    #[serde(default)]
    pub desired_replicas: i32,
    /// The last observed value of each metric.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub current_metrics: Vec<MetricStatus>,
    /// `AbleToScale`, `ScalingActive`, `ScalingLimited` (upstream reasons), `DryRun`, `Paused`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<HorizontalPodAutoscalerCondition>,
    /// `Kind/name` of the target, for `kubectl get` (REFERENCE column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// `current/target` per metric, e.g. `cpu: 66%/40%`, for `kubectl get` (TARGETS column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets_summary: Option<String>,
    /// What the last evaluation decided and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_decision: Option<LastDecision>,
    /// What the next decisions depend on beyond the next observation (recent recommendations,
    /// scale events, watermark clocks), so that a restarted or newly elected controller decides
    /// as this one would have. Written and read by `hpa-plus` only; docs/hpa-plus.md describes
    /// the encoding and its size bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<DecisionMemory>,
    /// What `minReplicasTuning` last proposed or applied, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas_tuning: Option<MinReplicasTuningStatus>,
    /// What `spec.predictive` last forecast, how wrong it was lately, and whether it acted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predictive: Option<PredictiveStatus>,
}

/// `status.predictive`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PredictiveStatus {
    /// The forecast load per metric over the lead window, `name: quantity`, comma-separated
    /// (e.g. `cpu: 12500m`); absent without a forecast.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forecast: Option<String>,
    /// Replicas the forecast needs (largest over metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forecast_replicas: Option<i32>,
    /// Mean absolute percentage error of the recent forecasts against the loads then observed
    /// (largest over metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recent_error_percent: Option<i32>,
    /// The forecast raised the replicas at the last evaluation (`Scale` only).
    #[serde(default, skip_serializing_if = "is_false")]
    pub acting: bool,
    /// `Off`, `NotEnoughHistory`, `LargeError`, `CostsMore`, `NoMetrics`, `BelowReactive`,
    /// `Reported`, `Raised`.
    #[serde(default)]
    pub reason: String,
    /// A sentence a person can read.
    #[serde(default)]
    pub message: String,
    /// The load history the forecast reads (15-minute peaks per metric), kept here so that a
    /// restarted controller continues from it (docs/hpa-plus.md gives the encoding and its
    /// bound: under 20 KB per metric for 7 days, about 8 KB typically).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<history::StoredPeakSeries>,
}

/// `status.minReplicasTuning`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct MinReplicasTuningStatus {
    /// The `minReplicas` tuning would set (Report) or set (Apply); absent when it proposes none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposed: Option<i32>,
    /// `minReplicas` before tuning last lowered it, to restore it by hand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_min_replicas: Option<i32>,
    /// When tuning last lowered `minReplicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_time: Option<Time>,
    /// Replicas the weighted daily peaks need, when computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needed: Option<i32>,
    /// The weighted peaks need fewer than half of `minReplicas` (the low-load alert).
    #[serde(default, skip_serializing_if = "is_false")]
    pub low_load: bool,
    /// `Lowered`, `Floor`, `AlreadyLow`, `HeldByCron`, `NotEnoughHistory`, `TooSoon`,
    /// `NoMetrics`, `Excluded`.
    #[serde(default)]
    pub reason: String,
    /// A sentence a person can read.
    #[serde(default)]
    pub message: String,
    /// The hourly load peaks tuning reads, kept here so that a restarted controller continues
    /// from them (docs/hpa-plus.md gives the encoding and its bound: under 4.5 KB per metric
    /// for 7 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_history: Option<history::StoredPeakSeries>,
}

/// The decision memory of one autoscaler in its stored form: every instant is a whole number of
/// milliseconds, lists are flat `[offset, value, offset, value, …]` pairs whose offsets count from
/// the previous entry of the same list (the first from `base`), oldest first.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct DecisionMemory {
    /// The whole second every offset counts from (absent when nothing is remembered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<Time>,
    /// Recommendations before stabilization: `[ms, replicas, …]`, only those that can still
    /// decide a stabilization window (a recommendation that a later one both matches or exceeds
    /// and matches or undercuts is dropped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recommendations: Vec<i64>,
    /// Scale-ups within the longest policy period: `[ms, replicas added, …]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scale_ups: Vec<i64>,
    /// Scale-downs within the longest policy period: `[ms, replicas removed, …]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scale_downs: Vec<i64>,
    /// The last scale by this autoscaler, ms after `base` (forbidden windows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scale: Option<i64>,
    /// Since when a watermark metric has been above its high watermark, ms after `base`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above_high_since: Option<i64>,
    /// Since when a watermark metric has been below its low watermark, ms after `base`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below_low_since: Option<i64>,
    /// The first failure of each failing metric with a `fallback` (KEP-5679), ms after `base`,
    /// by metric name (at most 32 names).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_METRICS))]
    pub metric_failures: BTreeMap<String, i64>,
}

/// The current value of one metric (upstream `MetricStatus`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct MetricStatus {
    /// Which member below is set.
    #[serde(rename = "type")]
    pub type_: MetricSourceType,
    /// For `type: Resource`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceMetricStatus>,
    /// For `type: ContainerResource`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_resource: Option<ContainerResourceMetricStatus>,
    /// For `type: Pods`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<PodsMetricStatus>,
    /// For `type: Object`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<ObjectMetricStatus>,
    /// For `type: External`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalMetricStatus>,
    /// For `type: Prometheus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<PrometheusMetricStatus>,
}

/// Current value of a resource metric.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct ResourceMetricStatus {
    /// Resource name.
    pub name: String,
    /// Current value.
    pub current: MetricValueStatus,
}

/// Current value of a container resource metric.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct ContainerResourceMetricStatus {
    /// Resource name.
    pub name: String,
    /// Container name.
    pub container: String,
    /// Current value.
    pub current: MetricValueStatus,
}

/// Current value of a per-pod metric.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct PodsMetricStatus {
    /// The metric.
    pub metric: MetricIdentifier,
    /// Current value.
    pub current: MetricValueStatus,
}

/// Current value of an object metric.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMetricStatus {
    /// The metric.
    pub metric: MetricIdentifier,
    /// Current value.
    pub current: MetricValueStatus,
    /// The object described.
    pub described_object: CrossVersionObjectReference,
}

/// Current value of an external metric.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct ExternalMetricStatus {
    /// The metric.
    pub metric: MetricIdentifier,
    /// Current value (empty while the metric fails).
    pub current: MetricValueStatus,
    /// The metric's fallback state (KEP-5679), with a `fallback` only.
    #[serde(flatten)]
    pub fallback: FallbackStatus,
}

/// Current value of a Prometheus query.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct PrometheusMetricStatus {
    /// The metric's name (`prometheus.name`, else the query).
    pub name: String,
    /// The query.
    pub query: String,
    /// Current value (empty while the query fails).
    pub current: MetricValueStatus,
    /// The metric's fallback state (KEP-5679), with a `fallback` only.
    #[serde(flatten)]
    pub fallback: FallbackStatus,
}

/// KEP-5679's per-metric status fields, written for a metric that has a `fallback`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct FallbackStatus {
    /// The metric proposes its `fallback.replicas` because it has failed for `failureDuration`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub fallback_active: bool,
    /// The first failure of the current run of failures; absent after a success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_failure_time: Option<Time>,
    /// The replicas the metric proposes while `fallbackActive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_replicas: Option<i32>,
}

/// A current metric value (upstream `MetricValueStatus`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct MetricValueStatus {
    /// Total value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Quantity>,
    /// Per-pod value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub average_value: Option<Quantity>,
    /// Utilization in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub average_utilization: Option<i32>,
}

/// One condition (upstream `HorizontalPodAutoscalerCondition`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct HorizontalPodAutoscalerCondition {
    /// `AbleToScale`, `ScalingActive`, `ScalingLimited`, `DryRun`, `Paused`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// When `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// A CamelCase reason (upstream's where one exists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A sentence for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The last decision, with its reasons.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct LastDecision {
    /// When it was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
    /// Each metric's proposal.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proposals: Vec<MetricProposal>,
    /// The recommendation before limits (largest proposal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommended_replicas: Option<i32>,
    /// The decided replicas.
    pub desired_replicas: i32,
    /// The rule that changed the recommendation (`maxReplicas`, `stabilization`, …), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<String>,
    /// A sentence explaining the decision.
    pub reason: String,
    /// Time left on cooldowns and watermark delays.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub countdowns: Vec<Countdown>,
}

/// One metric's proposal in the last decision.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct MetricProposal {
    /// The metric, e.g. `cpu` or `External/queue_messages`.
    pub metric: String,
    /// Proposed replicas, absent when the metric failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Current value (utilization percent or quantity), absent when the metric failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Why the metric failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Time left before a transition is allowed.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Countdown {
    /// `scaleUp` or `scaleDown` forbidden window, `upscaleDelay`, `downscaleDelay`, ….
    pub transition: String,
    /// Seconds left.
    pub seconds_left: i64,
}

#[cfg(test)]
mod tests;
