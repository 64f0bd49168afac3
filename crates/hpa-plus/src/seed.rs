//! The one Prometheus backfill of a load history ([`PeakSeries`]), for `spec.predictive`
//! ([`crate::predict::seed_from_prometheus`], 15-minute buckets) and `minReplicasTuning`
//! ([`crate::tuning::seed_from_prometheus`], hourly buckets): on first sight of an object, for
//! every `type: Prometheus` metric of its spec, the peaks of the buckets its history lacks, read
//! at the history's own width (`max_over_time((query)[15m:])` or `[1h:]` at the end of each
//! bucket, [`PrometheusMetrics::bucket_peaks`]), so that neither waits a week for a history
//! Prometheus already holds.
//!
//! Only metrics whose recorded load is the query's value itself are read (not `Value` targets
//! or absolute watermarks, which record the value times the ready pods, a count Prometheus does
//! not hold). Which buckets a history lacks is the caller's rule, pure and in core
//! ([`PeakSeries::missing_from`], `LoadHistory::backfill_from`). A failure is logged and the
//! caller goes on from what it has. The queries end by the object's Prometheus budget.

use jiff::Timestamp;
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlusSpec;
use plimsoll_core::horizontal::peak_series::PeakSeries;
use plimsoll_core::horizontal::proposals::{metric_name, metrics_of};
use plimsoll_core::horizontal::tuning::times_ready;

use crate::prometheus::PrometheusMetrics;

/// What to read into a history.
pub struct Backfill<'a> {
    /// The first bucket to read for a metric of `series`, `None` for none.
    pub from: &'a (dyn Fn(&PeakSeries, &str) -> Option<i64> + Sync),
    /// The first bucket not read (the one `now` falls in, which the evaluation records).
    pub open: i64,
    /// The buckets the history keeps ([`PeakSeries::record`]).
    pub keep_buckets: i64,
    /// The log line of a failed read.
    pub failure: &'static str,
    /// The autoscaler's namespace (its queries' scope, `--prometheus-namespace-parameter`).
    pub namespace: &'a str,
}

/// Fills `series` from Prometheus for every `type: Prometheus` metric of `spec` with the
/// buckets `backfill` asks for (module docs), ending by `deadline`.
pub async fn seed_from_prometheus(
    prometheus: &PrometheusMetrics,
    spec: &HorizontalPodAutoscalerPlusSpec,
    series: &mut PeakSeries,
    backfill: &Backfill<'_>,
    deadline: tokio::time::Instant,
) {
    let step = series.step_seconds();
    for m in metrics_of(spec).iter() {
        let Some(p) = m.prometheus.as_ref() else {
            continue;
        };
        if times_ready(m, spec) {
            continue;
        }
        let name = metric_name(m);
        let Some(from) = (backfill.from)(series, &name).filter(|from| *from < backfill.open) else {
            continue;
        };
        let Some(address) = prometheus.address_of(p).map(str::to_owned) else {
            continue;
        };
        match prometheus
            .bucket_peaks(
                &address,
                backfill.namespace,
                &p.query,
                step,
                from..backfill.open,
                deadline,
            )
            .await
        {
            Ok(peaks) => {
                for (bucket, value) in peaks {
                    if let Ok(at) = Timestamp::from_second(bucket.saturating_mul(step)) {
                        series.record(&name, at, value, backfill.keep_buckets);
                    }
                }
            }
            Err(e) => {
                crate::prometheus::log_failure(
                    &address,
                    backfill.namespace,
                    &e,
                    backfill.failure,
                    0,
                );
            }
        }
    }
}
