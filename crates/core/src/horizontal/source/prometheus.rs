//! `Prometheus`: the value of a PromQL instant query, which `hpa-plus` reads itself
//! (`crates/hpa-plus/src/prometheus.rs`), one value for the workload, kept in
//! [`Observation::prometheus_metrics`] under the metric's name (`name`, else the query).
//!
//! A metric whose server is not among the controller's allowed servers fails with
//! [`PROMETHEUS_SERVER_NOT_ALLOWED`] rather than `FailedGetPrometheusMetric`, so that
//! `ScalingActive` says what to fix.

use super::{Kind, MetricSource, Seen, SourceType, TOTAL_TARGETS, keyed_total};
use crate::api::hpa_plus::{
    FallbackStatus, MetricFallback, MetricSourceType, MetricSpec, MetricStatus, MetricTarget,
    MetricTargetType, MetricValueStatus, PrometheusMetricSource, PrometheusMetricStatus,
};
use crate::api::limits::{MAX_ADDRESS_LENGTH, MAX_METRIC_NAME_LENGTH, MAX_QUERY_LENGTH};
use crate::api::validation::FieldErrors;
use crate::horizontal::observation::{Observation, PodSample};

/// The condition reason of a `Prometheus` metric whose server is not among the controller's
/// allowed servers: its value's error starts with it (`PrometheusServerNotAllowed: …`), and
/// the metric fails with it instead of `FailedGetPrometheusMetric`, so that `ScalingActive`
/// says what to fix when that is what stops scaling.
pub const PROMETHEUS_SERVER_NOT_ALLOWED: &str = "PrometheusServerNotAllowed";

impl MetricSource for PrometheusMetricSource {
    fn name(&self) -> String {
        self.display_name().to_owned()
    }

    fn target(&self) -> &MetricTarget {
        &self.target
    }

    fn required_name(&self) -> (&'static str, &str) {
        ("query", &self.query)
    }

    fn allowed_targets(&self) -> &'static [MetricTargetType] {
        TOTAL_TARGETS
    }

    fn validate(&self, path: &str, errs: &mut FieldErrors) {
        if let Some(address) = &self.server_address
            && !(address.starts_with("http://") || address.starts_with("https://"))
        {
            errs.push(
                format!("{path}.serverAddress"),
                "must be an http:// or https:// URL",
            );
        }
    }

    fn validate_sizes(&self, path: &str, errs: &mut FieldErrors) {
        errs.max_length(format!("{path}.query"), &self.query, MAX_QUERY_LENGTH);
        if let Some(name) = &self.name {
            errs.max_length(format!("{path}.name"), name, MAX_METRIC_NAME_LENGTH);
        }
        if let Some(address) = &self.server_address {
            errs.max_length(format!("{path}.serverAddress"), address, MAX_ADDRESS_LENGTH);
        }
    }

    fn read(&self, observed: &Observation) -> Result<Seen, String> {
        let name = self.display_name();
        keyed_total(
            &observed.prometheus_metrics,
            name,
            &format!("Prometheus metric {name}"),
        )
    }

    fn read_failure_reason(&self, observed: &Observation) -> Option<&'static str> {
        matches!(
            observed.prometheus_metrics.get(self.display_name()),
            Some(Err(e)) if e.starts_with(PROMETHEUS_SERVER_NOT_ALLOWED)
        )
        .then_some(PROMETHEUS_SERVER_NOT_ALLOWED)
    }

    fn load(&self, observed: &Observation) -> Option<i64> {
        observed
            .prometheus_metrics
            .get(self.display_name())?
            .as_ref()
            .ok()
            .copied()
    }

    fn place_load(&self, load: i64, _pod: &mut PodSample, observed: &mut Observation) {
        observed.prometheus_metrics.insert(self.name(), Ok(load));
    }

    fn fallback(&self) -> Option<&MetricFallback> {
        self.fallback.as_ref()
    }

    fn status(&self, current: MetricValueStatus) -> MetricStatus {
        MetricStatus {
            type_: Self::TYPE,
            prometheus: Some(PrometheusMetricStatus {
                name: self.display_name().to_owned(),
                query: self.query.clone(),
                current,
                fallback: FallbackStatus::default(),
            }),
            ..MetricStatus::default()
        }
    }

    /// An unnamed metric's name is its query, unfit for a label: `prometheus-<index>`.
    fn series_label(&self, index: usize) -> Option<String> {
        self.name.is_none().then(|| format!("prometheus-{index}"))
    }
}

impl SourceType for PrometheusMetricSource {
    const TYPE: MetricSourceType = MetricSourceType::Prometheus;
    const KIND: Kind = Kind {
        member: "prometheus",
        per_pod: false,
        failure_reason: "FailedGetPrometheusMetric",
    };

    fn member(m: &MetricSpec) -> Option<&Self> {
        m.prometheus.as_ref()
    }
}
