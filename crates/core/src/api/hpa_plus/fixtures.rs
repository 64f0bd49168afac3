//! Test builders for HPA+ specs (`HorizontalPodAutoscalerPlusSpec::test().min(2).max(10)`).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{
    Algorithm, CrossVersionObjectReference, ExternalMetricSource, HorizontalPodAutoscalerBehavior,
    HorizontalPodAutoscalerPlusSpec, HpaScalingPolicy, HpaScalingPolicyType, HpaScalingRules,
    MetricIdentifier, MetricSourceType, MetricSpec, MetricTarget, MetricTargetType,
    ObjectMetricSource, PodsMetricSource, ResourceMetricSource, ScalingPolicySelect,
};

/// A quantity from a literal.
pub(crate) fn q(s: &str) -> Quantity {
    Quantity(s.to_owned())
}

impl HorizontalPodAutoscalerPlusSpec {
    /// Deployment/web, 1..10 replicas, no metrics.
    pub(crate) fn test() -> Self {
        Self {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: "web".into(),
            },
            min_replicas: Some(1),
            max_replicas: 10,
            ..Self::default()
        }
    }
    pub(crate) fn min(mut self, n: i32) -> Self {
        self.min_replicas = Some(n);
        self
    }
    pub(crate) fn max(mut self, n: i32) -> Self {
        self.max_replicas = n;
        self
    }
    pub(crate) fn metric(mut self, m: MetricSpec) -> Self {
        self.metrics.push(m);
        self
    }
    pub(crate) fn tolerance(mut self, t: &str) -> Self {
        self.tolerance = Some(q(t));
        self
    }
    pub(crate) fn algorithm(mut self, a: Algorithm) -> Self {
        self.algorithm = Some(a);
        self
    }
    pub(crate) fn up_limit(mut self, pct: &str) -> Self {
        self.scale_up_limit_factor = Some(q(pct));
        self
    }
    pub(crate) fn down_limit(mut self, pct: &str) -> Self {
        self.scale_down_limit_factor = Some(q(pct));
        self
    }
    pub(crate) fn scale_up(mut self, r: HpaScalingRules) -> Self {
        self.behavior
            .get_or_insert_with(HorizontalPodAutoscalerBehavior::default)
            .scale_up = Some(r);
        self
    }
    pub(crate) fn scale_down(mut self, r: HpaScalingRules) -> Self {
        self.behavior
            .get_or_insert_with(HorizontalPodAutoscalerBehavior::default)
            .scale_down = Some(r);
        self
    }
}

impl HpaScalingRules {
    pub(crate) fn window(secs: i32) -> Self {
        Self {
            stabilization_window_seconds: Some(secs),
            ..Self::default()
        }
    }
    pub(crate) fn pods(mut self, value: i32, period: i32) -> Self {
        self.policies.push(HpaScalingPolicy {
            type_: HpaScalingPolicyType::Pods,
            value,
            period_seconds: period,
        });
        self
    }
    pub(crate) fn percent(mut self, value: i32, period: i32) -> Self {
        self.policies.push(HpaScalingPolicy {
            type_: HpaScalingPolicyType::Percent,
            value,
            period_seconds: period,
        });
        self
    }
    pub(crate) fn select(mut self, s: ScalingPolicySelect) -> Self {
        self.select_policy = Some(s);
        self
    }
}

impl MetricTarget {
    pub(crate) fn utilization(pct: i32) -> Self {
        Self {
            type_: MetricTargetType::Utilization,
            average_utilization: Some(pct),
            ..Self::default()
        }
    }
    pub(crate) fn average(v: &str) -> Self {
        Self {
            type_: MetricTargetType::AverageValue,
            average_value: Some(q(v)),
            ..Self::default()
        }
    }
    pub(crate) fn value(v: &str) -> Self {
        Self {
            type_: MetricTargetType::Value,
            value: Some(q(v)),
            ..Self::default()
        }
    }
    pub(crate) fn watermarks(low: &str, high: &str) -> Self {
        Self {
            type_: MetricTargetType::Watermark,
            low_watermark: Some(q(low)),
            high_watermark: Some(q(high)),
            ..Self::default()
        }
    }
}

impl MetricSpec {
    pub(crate) fn resource(name: &str, target: MetricTarget) -> Self {
        Self {
            type_: MetricSourceType::Resource,
            resource: Some(ResourceMetricSource {
                name: name.into(),
                target,
            }),
            ..Self::default()
        }
    }
    pub(crate) fn pods(name: &str, target: MetricTarget) -> Self {
        Self {
            type_: MetricSourceType::Pods,
            pods: Some(PodsMetricSource {
                metric: MetricIdentifier {
                    name: name.into(),
                    selector: None,
                },
                target,
            }),
            ..Self::default()
        }
    }
    pub(crate) fn object(kind: &str, obj: &str, name: &str, target: MetricTarget) -> Self {
        Self {
            type_: MetricSourceType::Object,
            object: Some(ObjectMetricSource {
                described_object: CrossVersionObjectReference {
                    api_version: None,
                    kind: kind.into(),
                    name: obj.into(),
                },
                metric: MetricIdentifier {
                    name: name.into(),
                    selector: None,
                },
                target,
            }),
            ..Self::default()
        }
    }
    pub(crate) fn prometheus(name: &str, query: &str, target: MetricTarget) -> Self {
        Self {
            type_: MetricSourceType::Prometheus,
            prometheus: Some(super::PrometheusMetricSource {
                query: query.into(),
                name: Some(name.into()),
                server_address: None,
                target,
                fallback: None,
            }),
            ..Self::default()
        }
    }
    pub(crate) fn external(name: &str, target: MetricTarget) -> Self {
        Self {
            type_: MetricSourceType::External,
            external: Some(ExternalMetricSource {
                metric: MetricIdentifier {
                    name: name.into(),
                    selector: None,
                },
                target,
                fallback: None,
            }),
            ..Self::default()
        }
    }
}
