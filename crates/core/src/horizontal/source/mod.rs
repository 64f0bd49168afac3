//! Metric sources: what each `type` of metric is, in one place.
//!
//! A metric source (`Resource`, `ContainerResource`, `Pods`, `Object`, `External`,
//! `Prometheus`) is one file below: its validation, the name its proposal, status and load
//! history carry, where its value sits in an [`Observation`] (to read it, and to place a load
//! there for tuning), its `status.currentMetrics` entry, and what tuning, joint sizing and
//! conflict detection need to know of it (the pod resource it measures). The file implements
//! [`MetricSource`] (what one configured source does) and [`SourceType`] (what its `type` alone
//! says, and which member of [`MetricSpec`] holds it).
//!
//! [`entry`] is the one `match` on [`MetricSourceType`]: everything else asks [`of`] (the
//! source a metric names), [`kind`] (what its type says when the member is missing) or
//! [`typed`] (a fetcher's own sources). Adding a source: docs/architecture.md, "How to add a
//! metric source".
//!
//! Invariant: a source's methods see only its own member; a metric whose `type` names a member
//! it does not set has no source ([`of`] is `None`), and validation reports it.

pub mod external;
pub mod object;
pub mod pods;
pub mod prometheus;
pub mod resource;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::observation::{Observation, PodSample};
use crate::api::hpa_plus::{
    ContainerResourceMetricSource, CrossVersionObjectReference, ExternalMetricSource,
    MetricFallback, MetricIdentifier, MetricSourceType, MetricSpec, MetricStatus, MetricTarget,
    MetricTargetType, MetricValueStatus, ObjectMetricSource, PodsMetricSource,
    PrometheusMetricSource, ResourceMetricSource,
};
use crate::api::limits::{
    MAX_LABEL_LENGTH, MAX_METRIC_NAME_LENGTH, MAX_NAME_LENGTH, MAX_QUALIFIED_NAME_LENGTH,
    MAX_SELECTOR_TERMS,
};
use crate::api::validation::FieldErrors;

/// What one configured metric source does. Object-safe: callers hold a `&dyn MetricSource`
/// from [`of`].
pub trait MetricSource {
    /// The name its proposal, status, Events and load history carry: `cpu`, `cpu/app`
    /// (container), the Pods or External metric name, `Kind/name/metric` (Object), the
    /// Prometheus metric's `name` else its query.
    fn name(&self) -> String;

    /// Its target.
    fn target(&self) -> &MetricTarget;

    /// The field under its member that must not be empty (`name`, `metric.name`, `query`), and
    /// its value.
    fn required_name(&self) -> (&'static str, &str);

    /// The target types it supports.
    fn allowed_targets(&self) -> &'static [MetricTargetType];

    /// Checks of its own fields beyond the required name and the target; `path` is its member's
    /// (`spec.metrics[0].prometheus`).
    fn validate(&self, path: &str, errs: &mut FieldErrors) {
        let _ = (path, errs);
    }

    /// The size limits of its fields the CRD states; `path` is its member's.
    fn validate_sizes(&self, path: &str, errs: &mut FieldErrors);

    /// The resource of the target's pods it measures (`cpu`, `memory`) and the one container
    /// it is limited to: `Resource` and `ContainerResource` only. Tuning, joint sizing, conflict
    /// detection and the `metrics.k8s.io` fetch ask it.
    fn pod_resource(&self) -> Option<(&str, Option<&str>)> {
        None
    }

    /// The value it saw in `observed`, before it is compared with the target; `Err` says why
    /// there is none (a failed fetch, or no value).
    fn read(&self, observed: &Observation) -> Result<Seen, String>;

    /// A condition reason that replaces its type's [`Kind::failure_reason`] when the read
    /// failed for a reason the user must fix (a Prometheus server that is not allowed).
    fn read_failure_reason(&self, observed: &Observation) -> Option<&'static str> {
        let _ = observed;
        None
    }

    /// Its load in `observed` as the load histories record it: the sum of the per-pod values
    /// (pods with a complete sample), or the one total; `None` when there is no value.
    fn load(&self, observed: &Observation) -> Option<i64>;

    /// Puts `load` where [`MetricSource::read`] finds it, in the one pod `pod` of a synthetic
    /// observation (tuning asks what a past load would have needed).
    fn place_load(&self, load: i64, pod: &mut PodSample, observed: &mut Observation);

    /// Its `status.currentMetrics` entry, with `current` as the value.
    fn status(&self, current: MetricValueStatus) -> MetricStatus;

    /// Its KEP-5679 `fallback`: `External` and `Prometheus` metrics only (a metric from
    /// outside the cluster; the KEP leaves in-cluster sources out).
    fn fallback(&self) -> Option<&MetricFallback> {
        None
    }

    /// The `metric` label of its series in the controller's own metrics when [`name`] is unfit
    /// for a label (a query): the `index`-th metric of the spec. `None`: the name.
    ///
    /// [`name`]: MetricSource::name
    fn series_label(&self, index: usize) -> Option<String> {
        let _ = index;
        None
    }
}

/// What a source's `type` alone says: true even when the metric does not set its member.
#[derive(Debug, PartialEq, Eq)]
pub struct Kind {
    /// Its member of [`MetricSpec`] and [`MetricStatus`] as the YAML spells it (`prometheus`).
    pub member: &'static str,
    /// Its value comes from each of the target's pods (`Resource`, `ContainerResource`,
    /// `Pods`). Otherwise it is one value for the workload: `minReplicas: 0` is allowed, a
    /// watermark reports it as `value`, and a `Value` target's load is recorded times the
    /// ready pods.
    pub per_pod: bool,
    /// Upstream's condition reason when its value cannot be read (`FailedGetResourceMetric`).
    pub failure_reason: &'static str,
}

/// The static side of a source: its `type`, what that says, and its member of a [`MetricSpec`].
pub trait SourceType: MetricSource + Sized + 'static {
    /// The `type` that names it.
    const TYPE: MetricSourceType;
    /// What its type says.
    const KIND: Kind;
    /// Its member of `m`, whatever `m`'s type (validation reports a member set for another
    /// type).
    fn member(m: &MetricSpec) -> Option<&Self>;
}

/// The value a metric source saw, before it is compared with the target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Per-pod values (`Resource`, `ContainerResource`, `Pods`), milli, by pod name.
    PerPod {
        /// Each pod's value.
        values: BTreeMap<String, i64>,
        /// The values are CPU (upstream's readiness rules for CPU apply).
        cpu: bool,
    },
    /// One total (`Object`, `External`, `Prometheus`), milli.
    Total(i64),
}

/// Every source type, in the order of [`MetricSpec`]'s members (validation reports members in
/// this order). The `source_table` test checks that it lists every type once.
pub const TYPES: [MetricSourceType; 6] = [
    MetricSourceType::Resource,
    MetricSourceType::ContainerResource,
    MetricSourceType::Pods,
    MetricSourceType::Object,
    MetricSourceType::External,
    MetricSourceType::Prometheus,
];

/// The dispatch: what type `t` says, and the member of `m` that holds a source of that type
/// (whatever `m`'s own type). The only `match` on [`MetricSourceType`]; a new type fails to
/// compile until it has its line here.
pub fn entry(m: &MetricSpec, t: MetricSourceType) -> (&'static Kind, Option<&dyn MetricSource>) {
    fn of<S: SourceType>(m: &MetricSpec) -> (&'static Kind, Option<&dyn MetricSource>) {
        (&S::KIND, S::member(m).map(|s| s as &dyn MetricSource))
    }
    match t {
        MetricSourceType::Resource => of::<ResourceMetricSource>(m),
        MetricSourceType::ContainerResource => of::<ContainerResourceMetricSource>(m),
        MetricSourceType::Pods => of::<PodsMetricSource>(m),
        MetricSourceType::Object => of::<ObjectMetricSource>(m),
        MetricSourceType::External => of::<ExternalMetricSource>(m),
        MetricSourceType::Prometheus => of::<PrometheusMetricSource>(m),
    }
}

/// The source `m` names: the member its `type` names, `None` when that member is not set.
pub fn of(m: &MetricSpec) -> Option<&dyn MetricSource> {
    entry(m, m.type_).1
}

/// What `m`'s type says, whether or not `m` sets its member.
pub fn kind(m: &MetricSpec) -> &'static Kind {
    entry(m, m.type_).0
}

/// `m`'s source when it is of type `S` (a fetcher picking its own metrics).
pub fn typed<S: SourceType>(m: &MetricSpec) -> Option<&S> {
    S::member(m).filter(|_| m.type_ == S::TYPE)
}

/// The name a metric's proposal carries ([`MetricSource::name`]), or its type's name when it
/// does not set its member: also the key of its load history.
pub fn metric_name(m: &MetricSpec) -> String {
    of(m).map_or_else(|| format!("{:?}", m.type_), MetricSource::name)
}

/// The pod resource `m` measures and its one container ([`MetricSource::pod_resource`]).
pub fn pod_resource(m: &MetricSpec) -> Option<(&str, Option<&str>)> {
    of(m)?.pod_resource()
}

impl MetricSpec {
    /// The target of whichever source this metric has, if any.
    pub fn target(&self) -> Option<&MetricTarget> {
        of(self).map(MetricSource::target)
    }
}

/// The size limits of an object reference's fields.
pub(crate) fn reference_sizes(r: &CrossVersionObjectReference, path: &str, errs: &mut FieldErrors) {
    if let Some(v) = &r.api_version {
        errs.max_length(format!("{path}.apiVersion"), v, MAX_QUALIFIED_NAME_LENGTH);
    }
    errs.max_length(format!("{path}.kind"), &r.kind, MAX_LABEL_LENGTH);
    errs.max_length(format!("{path}.name"), &r.name, MAX_NAME_LENGTH);
}

/// The size limits of a metric identifier's name and selector.
/// A Pods, Object or External metric is fetched by its name as one segment of the metrics
/// APIs' URLs, so the name must be one (upstream's `IsValidPathSegmentName`).
pub(crate) fn name_in_url(m: &MetricIdentifier, path: &str, errs: &mut FieldErrors) {
    errs.path_segment(format!("{path}.name"), &m.name);
}

pub(crate) fn identifier_sizes(m: &MetricIdentifier, path: &str, errs: &mut FieldErrors) {
    errs.max_length(format!("{path}.name"), &m.name, MAX_METRIC_NAME_LENGTH);
    if let Some(s) = &m.selector {
        selector_sizes(s, &format!("{path}.selector"), errs);
    }
}

fn selector_sizes(s: &LabelSelector, path: &str, errs: &mut FieldErrors) {
    if let Some(labels) = &s.match_labels {
        errs.max_items(
            format!("{path}.matchLabels"),
            labels.len(),
            MAX_SELECTOR_TERMS,
        );
        for (k, v) in labels {
            errs.max_length(format!("{path}.matchLabels.{k}"), v, MAX_LABEL_LENGTH);
        }
    }
    if let Some(exprs) = &s.match_expressions {
        errs.max_items(
            format!("{path}.matchExpressions"),
            exprs.len(),
            MAX_SELECTOR_TERMS,
        );
        for (i, e) in exprs.iter().enumerate() {
            let at = format!("{path}.matchExpressions[{i}]");
            errs.max_length(format!("{at}.key"), &e.key, MAX_QUALIFIED_NAME_LENGTH);
            errs.max_length(format!("{at}.operator"), &e.operator, MAX_LABEL_LENGTH);
            if let Some(values) = &e.values {
                errs.max_items(format!("{at}.values"), values.len(), MAX_SELECTOR_TERMS);
                for (j, v) in values.iter().enumerate() {
                    errs.max_length(format!("{at}.values[{j}]"), v, MAX_LABEL_LENGTH);
                }
            }
        }
    }
}

/// The target types of a source whose value is one total (`Object`, `External`, `Prometheus`).
pub(crate) const TOTAL_TARGETS: &[MetricTargetType] = &[
    MetricTargetType::Value,
    MetricTargetType::AverageValue,
    MetricTargetType::Watermark,
];

/// A keyed total of an observation's map: the value, or why there is none (`what` names the
/// value in the messages: `metric Kind/name/metric`, `Prometheus metric rps`).
pub(crate) fn keyed_total(
    values: &BTreeMap<String, Result<i64, String>>,
    key: &str,
    what: &str,
) -> Result<Seen, String> {
    match values.get(key) {
        Some(Ok(v)) => Ok(Seen::Total(*v)),
        Some(Err(e)) => Err(format!("unable to get {what}: {e}")),
        None => Err(format!("unable to get {what}: no value")),
    }
}

#[cfg(test)]
mod tests;
