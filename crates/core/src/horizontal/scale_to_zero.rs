//! The `ScaledToZero` condition of KEP-2021 (`HPAScaleToZero`, beta and on by default in
//! Kubernetes 1.37), written the way the 1.37 controller writes it.
//!
//! Upstream sets it after every successful rescale: `True` (reason `ScaledToZero`) when the
//! controller took the target from one or more replicas to zero with `minReplicas: 0` and at
//! least one metric that does not need running pods (Object or External); `False` (reason
//! `NotScaledToZero`) after any other rescale. The condition is what tells "the autoscaler put
//! this at zero" apart from "a person scaled it to zero by hand". Plimsoll's `Prometheus`
//! metric is read from outside the pods, like External, so it counts too.
//!
//! Invariant: no condition without a rescale; a decision that writes nothing leaves the
//! previous `ScaledToZero` entry untouched (upstream does not touch it either).

use super::conditions::Condition;
use crate::api::hpa_plus::{
    HorizontalPodAutoscalerPlusSpec, HorizontalPodAutoscalerPlusStatus, MetricSourceType,
};

/// `ScaledToZero` condition type.
pub const SCALED_TO_ZERO: &str = "ScaledToZero";

/// The upstream message when the controller scaled the target to zero.
pub const SCALED_MESSAGE: &str = "the HPA controller scaled the workload to zero";

/// The upstream message after any other rescale.
pub const NOT_SCALED_MESSAGE: &str = "the HPA controller did not scale the workload to zero";

/// Whether `spec` has a metric that can be read while the target has no pods.
pub fn has_podless_metric(spec: &HorizontalPodAutoscalerPlusSpec) -> bool {
    spec.metrics.iter().any(|m| {
        matches!(
            m.type_,
            MetricSourceType::Object | MetricSourceType::External | MetricSourceType::Prometheus
        )
    })
}

/// The `ScaledToZero` condition for a rescale from `current` to `scale_to` replicas, or `None`
/// when nothing is written (`scale_to` is `None`).
pub fn condition(
    spec: &HorizontalPodAutoscalerPlusSpec,
    current: i32,
    scale_to: Option<i32>,
) -> Option<Condition> {
    let target = scale_to?;
    let scaled = current > 0
        && target == 0
        && spec.min_replicas.unwrap_or(1) == 0
        && has_podless_metric(spec);
    Some(if scaled {
        Condition::new(SCALED_TO_ZERO, true, "ScaledToZero", SCALED_MESSAGE)
    } else {
        Condition::new(SCALED_TO_ZERO, false, "NotScaledToZero", NOT_SCALED_MESSAGE)
    })
}

/// The `ScaledToZero` status a decision's `conditions` write, if they write one (what the next
/// evaluation reads back, for `replay`).
pub fn written(conditions: &[Condition]) -> Option<bool> {
    conditions
        .iter()
        .find(|c| c.type_ == SCALED_TO_ZERO)
        .map(|c| c.status)
}

/// Whether `status` carries `ScaledToZero=True`: the autoscaler itself took the target to zero
/// and may wake it (read into [`super::observation::Observation::scaled_to_zero`]).
pub fn in_status(status: &HorizontalPodAutoscalerPlusStatus) -> bool {
    status
        .conditions
        .iter()
        .any(|c| c.type_ == SCALED_TO_ZERO && c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::hpa_plus::{MetricSpec, ResourceMetricSource};

    fn spec(min: i32, types: &[MetricSourceType]) -> HorizontalPodAutoscalerPlusSpec {
        HorizontalPodAutoscalerPlusSpec {
            min_replicas: Some(min),
            metrics: types
                .iter()
                .map(|t| MetricSpec {
                    type_: *t,
                    resource: matches!(t, MetricSourceType::Resource)
                        .then(ResourceMetricSource::default),
                    ..MetricSpec::default()
                })
                .collect(),
            ..HorizontalPodAutoscalerPlusSpec::default()
        }
    }

    /// (minReplicas, metric types, current, scale_to, want (status, reason))
    type Case = (
        i32,
        &'static [MetricSourceType],
        i32,
        Option<i32>,
        Option<(bool, &'static str)>,
    );

    #[test]
    fn table() {
        use MetricSourceType::{External, Object, Prometheus, Resource};
        // (min, metrics, current, scale_to, expected (status, reason))
        // Vectors: horizontal_test.go TestScaleDownToZeroWithExternalMetric (3 -> 0, True),
        // TestScaleUpFromZeroWithExternalMetric (0 -> 2, NotScaledToZero), and the rule of
        // horizontal.go's rescale branch (currentReplicas > 0 && desired == 0 && minReplicas
        // == 0 && an Object or External metric).
        let cases: &[Case] = &[
            (0, &[External], 3, Some(0), Some((true, "ScaledToZero"))),
            (0, &[Object], 1, Some(0), Some((true, "ScaledToZero"))),
            (
                0,
                &[Resource, Prometheus],
                2,
                Some(0),
                Some((true, "ScaledToZero")),
            ),
            (0, &[External], 0, Some(2), Some((false, "NotScaledToZero"))),
            (0, &[External], 3, Some(1), Some((false, "NotScaledToZero"))),
            (1, &[External], 3, Some(1), Some((false, "NotScaledToZero"))),
            // Resource metrics alone cannot bring a target back from zero: not "ScaledToZero".
            (0, &[Resource], 3, Some(0), Some((false, "NotScaledToZero"))),
            // Already at zero: upstream requires currentReplicas > 0.
            (0, &[External], 0, Some(0), Some((false, "NotScaledToZero"))),
            // No rescale, no condition.
            (0, &[External], 3, None, None),
        ];
        for (min, types, current, to, want) in cases {
            let got = condition(&spec(*min, types), *current, *to);
            let got = got.map(|c| {
                assert_eq!(c.type_, SCALED_TO_ZERO);
                let msg = if c.status {
                    SCALED_MESSAGE
                } else {
                    NOT_SCALED_MESSAGE
                };
                assert_eq!(c.message, msg);
                (c.status, c.reason)
            });
            assert_eq!(got, *want, "min {min} {types:?} {current} -> {to:?}");
        }
    }
}
