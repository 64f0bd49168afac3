//! `External`: a metric from outside the cluster (`external.metrics.k8s.io`); every series'
//! value, summed as upstream does, is one value for the workload.

use super::{Kind, MetricSource, Seen, SourceType, TOTAL_TARGETS, identifier_sizes, name_in_url};
use crate::api::hpa_plus::{
    ExternalMetricSource, ExternalMetricStatus, FallbackStatus, MetricFallback, MetricSourceType,
    MetricSpec, MetricStatus, MetricTarget, MetricTargetType, MetricValueStatus,
};
use crate::api::validation::FieldErrors;
use crate::horizontal::observation::{Observation, PodSample};
use crate::quantity::saturating_total;

impl MetricSource for ExternalMetricSource {
    fn name(&self) -> String {
        self.metric.name.clone()
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
        name_in_url(&self.metric, &format!("{path}.metric"), errs);
    }

    fn validate_sizes(&self, path: &str, errs: &mut FieldErrors) {
        identifier_sizes(&self.metric, &format!("{path}.metric"), errs);
    }

    /// The sum of every series (saturating: an adapter may report any value); no series fails
    /// the metric.
    fn read(&self, observed: &Observation) -> Result<Seen, String> {
        let name = self.metric.name.as_str();
        match observed.external_metrics.get(name) {
            Some(Ok(v)) if !v.is_empty() => Ok(Seen::Total(saturating_total(v.iter().copied()))),
            Some(Ok(_)) | None => Err(format!(
                "unable to get external metric {name}: no metrics returned from external metrics API"
            )),
            Some(Err(e)) => Err(format!("unable to get external metric {name}: {e}")),
        }
    }

    fn load(&self, observed: &Observation) -> Option<i64> {
        let values = observed
            .external_metrics
            .get(&self.metric.name)?
            .as_ref()
            .ok()?;
        (!values.is_empty()).then(|| saturating_total(values.iter().copied()))
    }

    fn place_load(&self, load: i64, _pod: &mut PodSample, observed: &mut Observation) {
        observed
            .external_metrics
            .insert(self.metric.name.clone(), Ok(vec![load]));
    }

    fn fallback(&self) -> Option<&MetricFallback> {
        self.fallback.as_ref()
    }

    fn status(&self, current: MetricValueStatus) -> MetricStatus {
        MetricStatus {
            type_: Self::TYPE,
            external: Some(ExternalMetricStatus {
                metric: self.metric.clone(),
                current,
                fallback: FallbackStatus::default(),
            }),
            ..MetricStatus::default()
        }
    }
}

impl SourceType for ExternalMetricSource {
    const TYPE: MetricSourceType = MetricSourceType::External;
    const KIND: Kind = Kind {
        member: "external",
        per_pod: false,
        failure_reason: "FailedGetExternalMetric",
    };

    fn member(m: &MetricSpec) -> Option<&Self> {
        m.external.as_ref()
    }
}
