//! Metrics of the recommender loop, under `plimsoll_vpa_recommender_`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Label of the errors counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// Where it failed (`kube`, `metrics`, `checkpoint`, `status`, `prometheus`, …).
    pub kind: String,
}

/// The recommender's metrics.
#[derive(Debug)]
pub struct Metrics {
    /// Seconds one loop took (read, model, status writes, checkpoints).
    pub loop_duration: Histogram,
    /// VPAs served in the last loop.
    pub objects: Gauge,
    /// Aggregates (VPA × container) held.
    pub containers: Gauge,
    /// Checkpoints written.
    pub checkpoint_writes: Counter,
    /// Checkpoints deleted by garbage collection.
    pub checkpoint_deletes: Counter,
    /// Statuses written.
    pub status_writes: Counter,
    /// Failed restores of the history at the start of a leadership term (each one retried).
    pub restore_failures: Counter,
    /// Errors by kind.
    pub errors: Family<ErrorLabels, Counter>,
    /// Served VPAs that a horizontal autoscaler fights over the same requests, in the last loop.
    pub conflicting: Gauge,
    /// Writes of a joint VPA's total usage to its `plimsoll.dev/total-usage` annotation.
    pub total_usage_writes: Counter,
}

impl Metrics {
    /// Registers the families in `registry` (already prefixed `plimsoll_vpa_recommender`).
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            loop_duration: Histogram::new([
                0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0,
            ]),
            objects: Gauge::default(),
            containers: Gauge::default(),
            checkpoint_writes: Counter::default(),
            checkpoint_deletes: Counter::default(),
            status_writes: Counter::default(),
            restore_failures: Counter::default(),
            errors: Family::default(),
            conflicting: Gauge::default(),
            total_usage_writes: Counter::default(),
        };
        registry.register(
            "loop_duration_seconds",
            "Duration of one recommender loop",
            m.loop_duration.clone(),
        );
        registry.register("objects", "VPAs served in the last loop", m.objects.clone());
        registry.register(
            "containers",
            "Aggregates (VPA x container) held",
            m.containers.clone(),
        );
        registry.register(
            "checkpoint_writes",
            "VerticalPodAutoscalerCheckpoints written",
            m.checkpoint_writes.clone(),
        );
        registry.register(
            "checkpoint_deletes",
            "VerticalPodAutoscalerCheckpoints deleted by garbage collection",
            m.checkpoint_deletes.clone(),
        );
        registry.register(
            "status_writes",
            "VPA statuses written",
            m.status_writes.clone(),
        );
        registry.register(
            "restore_failures",
            "Failed restores of the history (checkpoints or Prometheus) when taking the Lease; retried",
            m.restore_failures.clone(),
        );
        registry.register("errors", "Errors by kind", m.errors.clone());
        registry.register(
            "conflicting_vpas",
            "Served VPAs whose requests a horizontal autoscaler scales on (ConflictingAutoscaler)",
            m.conflicting.clone(),
        );
        registry.register(
            "total_usage_writes",
            "Writes of joint VPAs' total usage to their plimsoll.dev/total-usage annotation",
            m.total_usage_writes.clone(),
        );
        m
    }

    /// Counts one error of `kind`.
    pub fn error(&self, kind: &str) {
        self.errors
            .get_or_create(&ErrorLabels {
                kind: kind.to_owned(),
            })
            .inc();
    }
}
