//! `Object`: a metric describing one Kubernetes object (`custom.metrics.k8s.io`), one value
//! for the workload, kept in [`Observation::object_metrics`] under [`object_key`].

use super::{
    Kind, MetricSource, Seen, SourceType, TOTAL_TARGETS, identifier_sizes, keyed_total,
    name_in_url, reference_sizes,
};
use crate::api::hpa_plus::{
    MetricSourceType, MetricSpec, MetricStatus, MetricTarget, MetricTargetType, MetricValueStatus,
    ObjectMetricSource, ObjectMetricStatus,
};
use crate::api::validation::FieldErrors;
use crate::horizontal::observation::{Observation, PodSample};

/// The key of an Object metric's value in [`Observation::object_metrics`], and its name:
/// `Kind/name/metric`.
pub fn object_key(o: &ObjectMetricSource) -> String {
    format!(
        "{}/{}/{}",
        o.described_object.kind, o.described_object.name, o.metric.name
    )
}

impl MetricSource for ObjectMetricSource {
    fn name(&self) -> String {
        object_key(self)
    }

    fn target(&self) -> &MetricTarget {
        &self.target
    }

    fn required_name(&self) -> (&'static str, &str) {
        ("metric.name", &self.metric.name)
    }

    fn allowed_targets(&self) -> &'static [MetricTargetType] {
        TOTAL_TARGETS
    }

    fn validate(&self, path: &str, errs: &mut FieldErrors) {
        if self.described_object.kind.is_empty() {
            errs.push(format!("{path}.describedObject.kind"), "is required");
        }
        if self.described_object.name.is_empty() {
            errs.push(format!("{path}.describedObject.name"), "is required");
        }
        errs.path_segment(
            format!("{path}.describedObject.kind"),
            &self.described_object.kind,
        );
        errs.path_segment(
            format!("{path}.describedObject.name"),
            &self.described_object.name,
        );
        name_in_url(&self.metric, &format!("{path}.metric"), errs);
    }

    fn validate_sizes(&self, path: &str, errs: &mut FieldErrors) {
        reference_sizes(
            &self.described_object,
            &format!("{path}.describedObject"),
            errs,
        );
        identifier_sizes(&self.metric, &format!("{path}.metric"), errs);
    }

    fn read(&self, observed: &Observation) -> Result<Seen, String> {
        let key = object_key(self);
        keyed_total(&observed.object_metrics, &key, &format!("metric {key}"))
    }

    fn load(&self, observed: &Observation) -> Option<i64> {
        observed
            .object_metrics
            .get(&object_key(self))?
            .as_ref()
            .ok()
            .copied()
    }

    fn place_load(&self, load: i64, _pod: &mut PodSample, observed: &mut Observation) {
        observed.object_metrics.insert(object_key(self), Ok(load));
    }

    fn status(&self, current: MetricValueStatus) -> MetricStatus {
        MetricStatus {
            type_: Self::TYPE,
            object: Some(ObjectMetricStatus {
                metric: self.metric.clone(),
                current,
                described_object: self.described_object.clone(),
            }),
            ..MetricStatus::default()
        }
    }
}

impl SourceType for ObjectMetricSource {
    const TYPE: MetricSourceType = MetricSourceType::Object;
    const KIND: Kind = Kind {
        member: "object",
        per_pod: false,
        failure_reason: "FailedGetObjectMetric",
    };

    fn member(m: &MetricSpec) -> Option<&Self> {
        m.object.as_ref()
    }
}
