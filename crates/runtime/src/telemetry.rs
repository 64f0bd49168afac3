//! Logging and metrics setup.
//!
//! - [`init_tracing`]: one `tracing` subscriber for the process, JSON lines (default) or compact
//!   text, filtered by an `EnvFilter` (`--log-filter`, else `$RUST_LOG` as every Rust program
//!   and upstream's guides expect, else [`DEFAULT_LOG_FILTER`]). Logs go to stderr, each event
//!   on one line in both formats ([`crate::one_line`]).
//! - [`service_registry`]: the `prometheus-client` sub-registry whose metrics are all named
//!   `plimsoll_<binary>_…` (with `-` as `_`). One root `Registry` per process; the admin server
//!   serves the root.
//! - [`ReconcileMetrics`]: the metrics every controller loop reports (runs, failures by error
//!   label, duration), observed through a drop guard so early returns are counted too.

use std::time::Instant;

use clap::ValueEnum;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tracing_subscriber::EnvFilter;

use crate::error::{Error, Result};

/// How log lines are written to stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (for log collectors). The default.
    #[default]
    Json,
    /// Human-readable compact text (for a terminal).
    Text,
}

/// The filter when neither `--log-filter` nor `$RUST_LOG` says one.
pub const DEFAULT_LOG_FILTER: &str = "info,kube=warn";

/// Which filter wins: the flag (or its `PLIMSOLL_LOG_FILTER`), else a non-empty `$RUST_LOG`,
/// else [`DEFAULT_LOG_FILTER`].
#[must_use]
pub fn log_filter<'a>(flag: Option<&'a str>, rust_log: Option<&'a str>) -> &'a str {
    flag.or(rust_log.filter(|r| !r.trim().is_empty()))
        .unwrap_or(DEFAULT_LOG_FILTER)
}

/// Installs the global tracing subscriber. Errors on a malformed filter or when a subscriber is
/// already installed.
pub fn init_tracing(format: LogFormat, filter: &str) -> Result<()> {
    let filter = EnvFilter::try_new(filter)
        .map_err(|e| Error::Telemetry(format!("invalid log filter {filter:?}: {e}")))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        LogFormat::Text => builder
            .compact()
            .with_writer(crate::one_line::OneLineStderr)
            .try_init(),
    };
    result.map_err(|e| Error::Telemetry(e.to_string()))
}

/// The metric name prefix for `binary`: `plimsoll_` + binary with `-` as `_`
/// (`hpa-plus` → `plimsoll_hpa_plus`).
pub fn metric_prefix(binary: &str) -> String {
    format!("plimsoll_{}", binary.replace('-', "_"))
}

/// Adds (and returns) the sub-registry for `binary`'s metrics to the process registry; every
/// metric registered in it is exported as `plimsoll_<binary>_<name>`.
pub fn service_registry<'a>(registry: &'a mut Registry, binary: &str) -> &'a mut Registry {
    registry.sub_registry_with_prefix(metric_prefix(binary))
}

/// Controller-loop metrics: `reconcile_runs_total`, `reconcile_failures_total{error}` and
/// `reconcile_duration_seconds` (buckets 1 ms … ~33 s).
#[derive(Clone, Debug)]
pub struct ReconcileMetrics {
    runs: Counter,
    failures: Family<[(&'static str, &'static str); 1], Counter>,
    duration: Histogram,
}

impl ReconcileMetrics {
    /// Registers the metrics in `registry` (pass the [`service_registry`]).
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            runs: Counter::default(),
            failures: Family::default(),
            duration: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
        };
        registry.register(
            "reconcile_runs",
            "Reconciliations started",
            metrics.runs.clone(),
        );
        registry.register(
            "reconcile_failures",
            "Reconciliations that failed, by error kind",
            metrics.failures.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time spent in one reconciliation",
            metrics.duration.clone(),
        );
        metrics
    }

    /// Counts a run and starts its timer; the duration is recorded when the guard drops.
    pub fn start(&self) -> ReconcileTimer {
        self.runs.inc();
        ReconcileTimer {
            started: Instant::now(),
            duration: self.duration.clone(),
        }
    }

    /// Counts a failure labelled with `error` (use `Error::metric_label()`).
    pub fn failure(&self, error: &'static str) {
        self.failures.get_or_create(&[("error", error)]).inc();
    }
}

/// Records a reconciliation's duration when dropped.
#[derive(Debug)]
pub struct ReconcileTimer {
    started: Instant,
    duration: Histogram,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.duration.observe(self.started.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn prefixes_follow_the_binary_name() {
        assert_eq!(metric_prefix("hpa-plus"), "plimsoll_hpa_plus");
        assert_eq!(metric_prefix("vpa-recommender"), "plimsoll_vpa_recommender");
    }

    #[test]
    fn reconcile_metrics_are_prefixed_and_counted() {
        let mut registry = Registry::default();
        let metrics = ReconcileMetrics::register(service_registry(&mut registry, "cron-hpa"));
        {
            let _timer = metrics.start();
        }
        metrics.failure("kube");
        metrics.failure("kube");
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("plimsoll_cron_hpa_reconcile_runs_total 1"),
            "{text}"
        );
        assert!(
            text.contains("plimsoll_cron_hpa_reconcile_failures_total{error=\"kube\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("plimsoll_cron_hpa_reconcile_duration_seconds_count 1"),
            "{text}"
        );
    }

    #[test]
    fn the_flag_wins_over_rust_log_which_wins_over_the_default() {
        assert_eq!(log_filter(Some("warn"), Some("debug")), "warn");
        assert_eq!(log_filter(None, Some("debug")), "debug");
        assert_eq!(log_filter(None, Some("  ")), DEFAULT_LOG_FILTER);
        assert_eq!(log_filter(None, None), DEFAULT_LOG_FILTER);
    }

    #[test]
    fn bad_log_filter_is_rejected() {
        let err = init_tracing(LogFormat::Json, "info,[").unwrap_err();
        assert!(err.to_string().contains("invalid log filter"), "{err}");
    }
}
