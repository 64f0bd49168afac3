//! `Pods`: a custom metric of each of the target's pods (`custom.metrics.k8s.io`), one value
//! per pod.

use std::collections::BTreeMap;

use super::{Kind, MetricSource, Seen, SourceType, identifier_sizes, name_in_url};
use crate::api::hpa_plus::{
    MetricSourceType, MetricSpec, MetricStatus, MetricTarget, MetricTargetType, MetricValueStatus,
    PodsMetricSource, PodsMetricStatus,
};
use crate::api::validation::FieldErrors;
use crate::horizontal::observation::{Observation, PodSample};
use crate::quantity::saturating_total;

impl MetricSource for PodsMetricSource {
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
        &[MetricTargetType::AverageValue, MetricTargetType::Watermark]
    }

    fn validate(&self, path: &str, errs: &mut FieldErrors) {
        name_in_url(&self.metric, &format!("{path}.metric"), errs);
    }

    fn validate_sizes(&self, path: &str, errs: &mut FieldErrors) {
        identifier_sizes(&self.metric, &format!("{path}.metric"), errs);
    }

    /// Each pod's value; a failed fetch fails the metric, and so does no value at all while
    /// there are pods.
    fn read(&self, observed: &Observation) -> Result<Seen, String> {
        let name = self.metric.name.as_str();
        let mut values = BTreeMap::new();
        for pod in &observed.pods {
            match pod.metrics.get(name) {
                Some(Ok(v)) => {
                    values.insert(pod.name.clone(), *v);
                }
                Some(Err(e)) => {
                    return Err(format!("unable to get metric {name}: {e}"));
                }
                None => {}
            }
        }
        if values.is_empty() && !observed.pods.is_empty() {
            return Err(format!(
                "unable to get metric {name}: no metrics returned from custom metrics API"
            ));
        }
        Ok(Seen::PerPod { values, cpu: false })
    }

    fn load(&self, observed: &Observation) -> Option<i64> {
        let values: Vec<i64> = observed
            .pods
            .iter()
            .filter_map(|p| {
                p.metrics
                    .get(&self.metric.name)
                    .and_then(|v| v.as_ref().ok())
                    .copied()
            })
            .collect();
        // Saturating: an adapter may report any value, and a wrapped sum would be recorded as
        // the load tuning and prediction size the workload for.
        (!values.is_empty()).then(|| saturating_total(values))
    }

    fn place_load(&self, load: i64, pod: &mut PodSample, _observed: &mut Observation) {
        pod.metrics.insert(self.metric.name.clone(), Ok(load));
    }

    fn status(&self, current: MetricValueStatus) -> MetricStatus {
        MetricStatus {
            type_: Self::TYPE,
            pods: Some(PodsMetricStatus {
                metric: self.metric.clone(),
                current,
            }),
            ..MetricStatus::default()
        }
    }
}

impl SourceType for PodsMetricSource {
    const TYPE: MetricSourceType = MetricSourceType::Pods;
    const KIND: Kind = Kind {
        member: "pods",
        per_pod: true,
        failure_reason: "FailedGetPodsMetric",
    };

    fn member(m: &MetricSpec) -> Option<&Self> {
        m.pods.as_ref()
    }
}
