//! Prometheus metrics, all named `plimsoll_cron_hpa_…`.
//!
//! * `job_runs_total{result}`: job firings by outcome (`succeeded`, `failed`, `missed`,
//!   `skipped`).
//! * `job_lateness_seconds`: from a firing's scheduled instant to the moment its writes were
//!   sent (buckets 1 ms … ~65 s).
//! * `job_start_delay_seconds`: from a firing's scheduled instant to the moment the controller
//!   started it — its timer and queue, without the API's answer time, so a slow apiserver and
//!   a late controller can be told apart (same buckets).
//! * `job_next_run_timestamp_seconds{namespace,name,job}`: Unix time of each job's next run
//!   (removed when the job or its object goes away). One series per job: bounded by the number
//!   of jobs in the cluster, which is what users asked to see.
//! * `reconcile_runs_total`, `reconcile_failures_total{error}`, `reconcile_duration_seconds`
//!   from the shared runtime.

use plimsoll_runtime::telemetry::ReconcileMetrics;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of a per-job series: namespace, object name, job name.
pub type JobLabels = [(&'static str, String); 3];

/// How a firing ended, the `result` label of `job_runs_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunResult {
    /// The size was set.
    Succeeded,
    /// A write failed or the target could not be read.
    Failed,
    /// The firing passed more than `--missed-job-grace` ago without running.
    Missed,
    /// The firing fell on an excluded day, or the `runOnce` job had already run.
    Skipped,
}

impl RunResult {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Missed => "missed",
            Self::Skipped => "skipped",
        }
    }
}

/// The service's metric families (cheap to clone; clones share the series).
#[derive(Clone, Debug)]
pub struct Metrics {
    /// Reconcile runs, failures and durations.
    pub reconcile: ReconcileMetrics,
    runs: Family<[(&'static str, &'static str); 1], Counter>,
    lateness: Histogram,
    start_delay: Histogram,
    next_run: Family<JobLabels, Gauge>,
}

impl Metrics {
    /// Registers every family in `registry` (the `plimsoll_cron_hpa` sub-registry).
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            reconcile: ReconcileMetrics::register(registry),
            runs: Family::default(),
            lateness: Histogram::new(exponential_buckets(0.001, 2.0, 17)),
            start_delay: Histogram::new(exponential_buckets(0.001, 2.0, 17)),
            next_run: Family::default(),
        };
        registry.register(
            "job_runs",
            "Job firings by result (succeeded, failed, missed, skipped)",
            metrics.runs.clone(),
        );
        registry.register(
            "job_lateness_seconds",
            "Seconds from a job's scheduled instant until its writes were sent",
            metrics.lateness.clone(),
        );
        registry.register(
            "job_start_delay_seconds",
            "Seconds from a job's scheduled instant until the controller started it",
            metrics.start_delay.clone(),
        );
        registry.register(
            "job_next_run_timestamp_seconds",
            "Unix time of each job's next run",
            metrics.next_run.clone(),
        );
        metrics
    }

    /// Counts `n` firings with `result`.
    pub fn count(&self, result: RunResult, n: u64) {
        self.runs
            .get_or_create(&[("result", result.as_str())])
            .inc_by(n);
    }

    /// Records how late a run was, in seconds (negative values count as 0).
    pub fn observe_lateness(&self, seconds: f64) {
        self.lateness.observe(seconds.max(0.0));
    }

    /// Records how long after its scheduled instant a job was started.
    pub fn observe_start_delay(&self, seconds: f64) {
        self.start_delay.observe(seconds.max(0.0));
    }

    /// Sets (or, with `None`, removes) a job's next-run series.
    pub fn set_next_run(&self, namespace: &str, name: &str, job: &str, at: Option<i64>) {
        let labels = job_labels(namespace, name, job);
        match at {
            Some(at) => {
                self.next_run.get_or_create(&labels).set(at);
            }
            None => {
                self.next_run.remove(&labels);
            }
        }
    }
}

fn job_labels(namespace: &str, name: &str, job: &str) -> JobLabels {
    [
        ("namespace", namespace.to_owned()),
        ("name", name.to_owned()),
        ("job", job.to_owned()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn families_are_prefixed_and_series_come_and_go() {
        let mut root = Registry::default();
        let metrics = Metrics::register(plimsoll_runtime::telemetry::service_registry(
            &mut root, "cron-hpa",
        ));
        metrics.count(RunResult::Succeeded, 2);
        metrics.observe_lateness(0.004);
        metrics.observe_start_delay(0.0005);
        metrics.set_next_run("ns", "web", "peak", Some(1_800_000_000));
        let mut text = String::new();
        encode(&mut text, &root).unwrap();
        assert!(
            text.contains("plimsoll_cron_hpa_job_runs_total{result=\"succeeded\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("plimsoll_cron_hpa_job_lateness_seconds_count 1"),
            "{text}"
        );
        assert!(
            text.contains("plimsoll_cron_hpa_job_start_delay_seconds_bucket{le=\"0.001\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "plimsoll_cron_hpa_job_next_run_timestamp_seconds{namespace=\"ns\",name=\"web\",job=\"peak\"} 1800000000"
            ),
            "{text}"
        );
        metrics.set_next_run("ns", "web", "peak", None);
        let mut text = String::new();
        encode(&mut text, &root).unwrap();
        assert!(!text.contains("job=\"peak\""), "{text}");
    }
}
