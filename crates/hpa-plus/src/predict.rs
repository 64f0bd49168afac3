//! `spec.predictive` in the controller: what is I/O of it. The forecast and the raise are step
//! 4 of [`plimsoll_core::horizontal::evaluate`] (the model: [`plimsoll_core::horizontal::predictive`]);
//! here are its reads and writes:
//! - on first sight the series the object carries (`status.predictive.history`, a native HPA's
//!   [`STATUS_ANNOTATION`]) is topped up from Prometheus for `type: Prometheus` metrics
//!   ([`seed_from_prometheus`], through the one backfill [`crate::seed`]:
//!   `max_over_time((query)[15m:])` every 15 minutes);
//! - the workload's startup time is measured from its pods ([`pod_start`], for
//!   `leadSeconds: auto`);
//! - a native HPA's status goes into its annotation ([`write_native_status`]).
//!
//! Metrics: `predicted_replicas`, `predicted_load`.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::{Api, Client};
use plimsoll_core::api::hpa_plus::{HorizontalPodAutoscalerPlusSpec, Predictive, PredictiveStatus};
use plimsoll_core::horizontal::predictive::{
    LoadSeries, PodStart, keep_seconds_for, startup_seconds,
};
use plimsoll_core::horizontal::proposals::metrics_of;

use crate::error::Result;
use crate::pods::PodInfo;
use crate::prometheus::PrometheusMetrics;
use crate::seed::Backfill;

pub use plimsoll_core::horizontal::predictive::{
    STATUS_ANNOTATION, status_from_annotations as from_annotations,
};

/// When `pod` started and became Ready, as [`startup_seconds`] reads it: creation (else
/// `status.startTime`) and the Ready transition of a Ready pod that is not being deleted.
pub fn pod_start(pod: &PodInfo) -> PodStart {
    PodStart {
        started: pod.created.or(pod.start_time),
        ready_at: pod
            .ready_transition_time
            .filter(|_| pod.ready == Some(true) && !pod.deleting),
    }
}

/// The workload's measured startup time, seconds ([`startup_seconds`] of its pods).
pub fn measured_startup(pods: &[Arc<PodInfo>]) -> Option<i64> {
    startup_seconds(pods.iter().map(|p| pod_start(p)))
}

/// Reads from Prometheus ([`crate::seed`]), for every `type: Prometheus` metric of `spec`, the
/// buckets of the retention window ([`keep_seconds_for`]) that `series` lacks
/// ([`PeakSeries::missing_from`](plimsoll_core::horizontal::peak_series::PeakSeries::missing_from)):
/// the whole window when its oldest bucket is younger than the window's start, else the buckets
/// since its newest. They are peaks with no known mean (their peak stands in for the level). A
/// failure is logged and prediction goes on from what it has (it waits for a season of its own
/// history). The queries end by `deadline`, the object's Prometheus budget.
pub async fn seed_from_prometheus(
    prometheus: &PrometheusMetrics,
    namespace: &str,
    spec: &HorizontalPodAutoscalerPlusSpec,
    settings: &Predictive,
    series: &mut LoadSeries,
    now: Timestamp,
    deadline: tokio::time::Instant,
) {
    let keep = keep_seconds_for(settings, metrics_of(spec).len());
    let keep_buckets = series.keep_buckets(keep);
    let peaks = series.peaks_mut();
    let open = peaks.bucket_at(now);
    let first = open - keep / peaks.step_seconds();
    let backfill = Backfill {
        from: &|s, name| s.missing_from(name, first, open),
        open,
        keep_buckets,
        failure: "could not read the metric's history from Prometheus; prediction records its own",
        namespace,
    };
    crate::seed::seed_from_prometheus(prometheus, spec, peaks, &backfill, deadline).await;
}

/// Writes a native HPA's predictive status into its [`STATUS_ANNOTATION`].
pub async fn write_native_status(
    client: &Client,
    namespace: &str,
    name: &str,
    status: &PredictiveStatus,
) -> Result<()> {
    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), namespace);
    crate::status::write_native_json(&api, name, STATUS_ANNOTATION, status, "predictive status")
        .await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use plimsoll_core::horizontal::PodPhase;
    use plimsoll_core::horizontal::predictive::BUCKET_SECONDS;
    use plimsoll_core::stored::StoredStateError;

    use super::*;

    fn t(second: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + second).unwrap()
    }

    fn pod(created: i64, ready_at: Option<i64>, deleting: bool) -> Arc<PodInfo> {
        Arc::new(PodInfo {
            name: format!("p{created}"),
            labels: BTreeMap::new(),
            phase: PodPhase::Running,
            ready: Some(ready_at.is_some()),
            ready_transition_time: Some(t(ready_at.unwrap_or(created + 1))),
            deleting,
            start_time: Some(t(created + 2)),
            created: Some(t(created)),
            containers: Vec::new(),
            init_containers: Vec::new(),
            pod_requests: BTreeMap::new(),
            pod_limits: BTreeMap::new(),
            overhead: BTreeMap::new(),
            controller: None,
        })
    }

    #[test]
    fn a_pod_counts_from_its_creation_to_its_ready_transition_while_ready() {
        assert_eq!(measured_startup(&[pod(0, Some(30), false)]), Some(30));
        // Not Ready (its transition is to NotReady), or going away: not a start.
        assert_eq!(measured_startup(&[pod(0, None, false)]), None);
        assert_eq!(measured_startup(&[pod(0, Some(30), true)]), None);
        let mut no_creation = (*pod(0, Some(30), false)).clone();
        no_creation.created = None;
        assert_eq!(
            measured_startup(&[Arc::new(no_creation)]),
            Some(28),
            "from startTime"
        );
    }

    #[test]
    fn a_native_status_annotation_reads_back() {
        let status = PredictiveStatus {
            forecast_replicas: Some(4),
            reason: "Raised".into(),
            history: Some(LoadSeries::new(BUCKET_SECONDS).store()),
            ..PredictiveStatus::default()
        };
        let annotations: BTreeMap<String, String> = [(
            STATUS_ANNOTATION.to_owned(),
            serde_json::to_string(&status).unwrap(),
        )]
        .into();
        assert_eq!(from_annotations(&annotations), Ok(Some(status)));
        assert_eq!(from_annotations(&BTreeMap::new()), Ok(None));
        let garbled: BTreeMap<String, String> = [(STATUS_ANNOTATION.to_owned(), "{".into())].into();
        assert_eq!(
            from_annotations(&garbled),
            Err(StoredStateError::Unreadable {
                field: STATUS_ANNOTATION
            })
        );
    }
}
