//! `Resource` and `ContainerResource`: a resource of the target's pods (`cpu`, `memory`) from
//! `metrics.k8s.io`, summed over each pod's serving containers or read from one named
//! container; one value per pod.

use super::{Kind, MetricSource, Seen, SourceType};
use crate::api::hpa_plus::{
    ContainerResourceMetricSource, ContainerResourceMetricStatus, MetricSourceType, MetricSpec,
    MetricStatus, MetricTarget, MetricTargetType, MetricValueStatus, ResourceMetricSource,
    ResourceMetricStatus,
};
use crate::api::limits::{MAX_LABEL_LENGTH, MAX_QUALIFIED_NAME_LENGTH};
use crate::api::validation::FieldErrors;
use crate::horizontal::metrics::{pod_usage, resource_usage};
use crate::horizontal::observation::{Observation, PodSample};

/// The target types a pod resource supports.
const TARGETS: &[MetricTargetType] = &[
    MetricTargetType::Utilization,
    MetricTargetType::AverageValue,
    MetricTargetType::Watermark,
];

/// Each pod's usage of `resource` (in `container` only, when set).
fn read(observed: &Observation, resource: &str, container: Option<&str>) -> Result<Seen, String> {
    let values = resource_usage(&observed.pods, resource, container)
        .map_err(|e| format!("unable to get metrics for resource {resource}: {e}"))?;
    Ok(Seen::PerPod {
        values,
        cpu: resource == "cpu",
    })
}

/// The sum of the pods' usage of `resource`, `None` when no pod has a complete sample or a
/// fetch failed. Saturating, as each pod's usage is: past `i64::MAX` it reads as enormous.
fn load(observed: &Observation, resource: &str, container: Option<&str>) -> Option<i64> {
    let mut total = None;
    for pod in &observed.pods {
        if let Some(usage) = pod_usage(pod, resource, container).ok()? {
            total = Some(total.unwrap_or(0i64).saturating_add(usage));
        }
    }
    total
}

/// Puts `load` in `pod`: all of it in `container`, or in the first container when none is
/// named; every other container uses 0.
fn place(load: i64, pod: &mut PodSample, resource: &str, container: Option<&str>) {
    let mut placed = false;
    for c in pod
        .containers
        .iter_mut()
        .chain(pod.init_containers.iter_mut())
    {
        let here = container.map_or(!placed, |n| n == c.name);
        c.usage
            .insert(resource.to_owned(), Ok(if here { load } else { 0 }));
        placed |= here;
    }
}

impl MetricSource for ResourceMetricSource {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn target(&self) -> &MetricTarget {
        &self.target
    }

    fn required_name(&self) -> (&'static str, &str) {
        ("name", &self.name)
    }

    fn allowed_targets(&self) -> &'static [MetricTargetType] {
        TARGETS
    }

    fn validate_sizes(&self, path: &str, errs: &mut FieldErrors) {
        errs.max_length(
            format!("{path}.name"),
            &self.name,
            MAX_QUALIFIED_NAME_LENGTH,
        );
    }

    fn pod_resource(&self) -> Option<(&str, Option<&str>)> {
        Some((&self.name, None))
    }

    fn read(&self, observed: &Observation) -> Result<Seen, String> {
        read(observed, &self.name, None)
    }

    fn load(&self, observed: &Observation) -> Option<i64> {
        load(observed, &self.name, None)
    }

    fn place_load(&self, load: i64, pod: &mut PodSample, _observed: &mut Observation) {
        place(load, pod, &self.name, None);
    }

    fn status(&self, current: MetricValueStatus) -> MetricStatus {
        MetricStatus {
            type_: Self::TYPE,
            resource: Some(ResourceMetricStatus {
                name: self.name.clone(),
                current,
            }),
            ..MetricStatus::default()
        }
    }
}

impl SourceType for ResourceMetricSource {
    const TYPE: MetricSourceType = MetricSourceType::Resource;
    const KIND: Kind = Kind {
        member: "resource",
        per_pod: true,
        failure_reason: "FailedGetResourceMetric",
    };

    fn member(m: &MetricSpec) -> Option<&Self> {
        m.resource.as_ref()
    }
}

impl MetricSource for ContainerResourceMetricSource {
    fn name(&self) -> String {
        format!("{}/{}", self.name, self.container)
    }

    fn target(&self) -> &MetricTarget {
        &self.target
    }

    fn required_name(&self) -> (&'static str, &str) {
        ("name", &self.name)
    }

    fn allowed_targets(&self) -> &'static [MetricTargetType] {
        TARGETS
    }

    fn validate(&self, path: &str, errs: &mut FieldErrors) {
        if self.container.is_empty() {
            errs.push(format!("{path}.container"), "is required");
        }
    }

    fn validate_sizes(&self, path: &str, errs: &mut FieldErrors) {
        errs.max_length(
            format!("{path}.name"),
            &self.name,
            MAX_QUALIFIED_NAME_LENGTH,
        );
        errs.max_length(
            format!("{path}.container"),
            &self.container,
            MAX_LABEL_LENGTH,
        );
    }

    fn pod_resource(&self) -> Option<(&str, Option<&str>)> {
        Some((&self.name, Some(&self.container)))
    }

    fn read(&self, observed: &Observation) -> Result<Seen, String> {
        read(observed, &self.name, Some(&self.container))
    }

    fn load(&self, observed: &Observation) -> Option<i64> {
        load(observed, &self.name, Some(&self.container))
    }

    fn place_load(&self, load: i64, pod: &mut PodSample, _observed: &mut Observation) {
        place(load, pod, &self.name, Some(&self.container));
    }

    fn status(&self, current: MetricValueStatus) -> MetricStatus {
        MetricStatus {
            type_: Self::TYPE,
            container_resource: Some(ContainerResourceMetricStatus {
                name: self.name.clone(),
                container: self.container.clone(),
                current,
            }),
            ..MetricStatus::default()
        }
    }
}

impl SourceType for ContainerResourceMetricSource {
    const TYPE: MetricSourceType = MetricSourceType::ContainerResource;
    const KIND: Kind = Kind {
        member: "containerResource",
        per_pod: true,
        failure_reason: "FailedGetContainerResourceMetric",
    };

    fn member(m: &MetricSpec) -> Option<&Self> {
        m.container_resource.as_ref()
    }
}
