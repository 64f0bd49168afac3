//! `spec.predictive` in the controller: record the evaluation's load, forecast with the pure
//! [`forecast`], and in `Scale` raise the reactive decision with the pure [`raise`] before the
//! scale is written.
//!
//! Each evaluation of an object whose prediction is not `Off` (`spec.predictive`, or for a
//! native HPA the `plimsoll.dev/predictive*` annotations):
//! 1. the load of each metric is recorded into the object's [`LoadSeries`] of
//!    [`BUCKET_SECONDS`] buckets (the highest value of each bucket), through the same
//!    [`record_loads`] the replay calls. The series is held in memory; on first sight it is
//!    restored from `status.predictive.history` (a native HPA: the [`STATUS_ANNOTATION`]), then
//!    for `type: Prometheus` metrics the part of the lookback it lacks is read from Prometheus
//!    ([`seed_from_prometheus`]: `max_over_time((query)[15m:])` every 15 minutes).
//! 2. The forecast is made from the buckets that have *ended* ([`LoadSeries::ended`]): the
//!    controller records many samples per bucket, and the open bucket's peak so far would count
//!    a rush due later in it as a forecast error before it arrived.
//! 3. `leadSeconds: auto` is the workload's own startup time ([`startup_seconds`]: the median,
//!    over the [`STARTUP_SAMPLES`] pods that became Ready most recently, of creation to Ready),
//!    plus one bucket (added by [`forecast`]); the last measurement is kept for evaluations that
//!    see no measurable pod, and before any [`FALLBACK_STARTUP_SECONDS`] stands in.
//! 4. [`raise`] turns the reactive decision into the final one (`Scale` only raises; `Report`
//!    only says what it would do), and [`apply`] hands it to the scale write.
//! 5. The status (`status.predictive`, a native HPA's annotation) carries the forecast, its
//!    recent error, whether it acted, and the series of ended buckets (it changes once a bucket).
//!
//! Events: `PredictionOn` when the forecast becomes trusted (enough history, a small recent
//! error) and `PredictionOff` when it stops being trusted, both Normal. Metrics:
//! `predicted_replicas`, `predicted_load`.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Api;
use plimsoll_core::api::hpa_plus::{
    HorizontalPodAutoscalerPlusSpec, Predictive, PredictiveMode, PredictiveStatus,
};
use plimsoll_core::horizontal::predictive::{
    Fit, Forecast, ForecastInput, LoadSeries, Raise, RaiseInput, fit, forecast, keep_seconds,
    predictive_status, raise, record_loads,
};
use plimsoll_core::horizontal::proposals::{metric_name, metrics_of};
use plimsoll_core::horizontal::tuning::times_ready;
use plimsoll_core::horizontal::{Decision, Observation};
use plimsoll_core::stored::StoredStateError;

use crate::context::Context;
use crate::error::Result;
use crate::pods::PodInfo;

/// A native HPA's `status.predictive` (its status has no field for it), as JSON.
pub const STATUS_ANNOTATION: &str = "plimsoll.dev/predictive-status";

/// The width of the controller's load buckets, seconds: fine enough to place a rush within a
/// quarter of an hour, coarse enough that a week of history stays small in status.
pub const BUCKET_SECONDS: i64 = 900;

/// The startup time assumed while no pod of the workload has been seen becoming Ready,
/// seconds.
pub const FALLBACK_STARTUP_SECONDS: i64 = 120;

/// How many of the most recently Ready pods the measured startup time reads.
pub const STARTUP_SAMPLES: usize = 10;

/// A pod Ready later than this after its creation is left out of the startup time: its Ready
/// transition is a readiness flap long after the start, not the start.
pub const MAX_STARTUP_SECONDS: i64 = 3600;

/// The predictive status a native HPA carries in its [`STATUS_ANNOTATION`]: `Ok(None)` when
/// absent, an error when unreadable (prediction then starts over, as with no history, and says
/// so).
pub fn from_annotations(
    annotations: &BTreeMap<String, String>,
) -> std::result::Result<Option<PredictiveStatus>, StoredStateError> {
    plimsoll_core::stored::annotation(annotations, STATUS_ANNOTATION)
}

/// The workload's measured startup time, seconds: the median (the higher middle of an even
/// count, the longer lead) of creation (else `status.startTime`) to the Ready transition over
/// the [`STARTUP_SAMPLES`] Ready pods that became Ready most recently; `None` when no pod can
/// be measured.
pub fn startup_seconds(pods: &[Arc<PodInfo>]) -> Option<i64> {
    let mut measured: Vec<(Timestamp, i64)> = pods
        .iter()
        .filter(|p| p.ready == Some(true) && !p.deleting)
        .filter_map(|p| {
            let ready = p.ready_transition_time?;
            let start = p.created.or(p.start_time)?;
            let seconds = ready.as_second() - start.as_second();
            (0..=MAX_STARTUP_SECONDS)
                .contains(&seconds)
                .then_some((ready, seconds))
        })
        .collect();
    measured.sort_by_key(|m| std::cmp::Reverse(m.0));
    measured.truncate(STARTUP_SAMPLES);
    let mut seconds: Vec<i64> = measured.into_iter().map(|m| m.1).collect();
    seconds.sort_unstable();
    seconds.get(seconds.len() / 2).copied()
}

/// What the controller keeps about one object's prediction between evaluations.
#[derive(Clone, Debug)]
pub struct Held {
    /// The load series, the open bucket included.
    pub series: LoadSeries,
    /// The last measured startup time, seconds.
    pub startup_seconds: Option<i64>,
    /// The status this process wrote last (fresher than the object's copy in the cache).
    pub status: PredictiveStatus,
    /// The season chosen per metric; redone when a bucket ends ([`Fit::through`]).
    pub fit: Option<Fit>,
}

/// What one object's prediction needs from the reconcile.
pub struct Subject<'a> {
    /// The autoscaler's uid (the shard it belongs to).
    pub uid: &'a str,
    /// Namespace of the autoscaler.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// The spec the decision used (`spec.predictive` is the setting).
    pub spec: &'a HorizontalPodAutoscalerPlusSpec,
    /// The predictive status the object carries.
    pub previous: Option<&'a PredictiveStatus>,
    /// When this evaluation's Prometheus queries must have ended (the object's budget).
    pub prometheus_deadline: tokio::time::Instant,
}

/// What prediction came to at one evaluation.
#[derive(Clone, Debug)]
pub struct Predicted {
    /// The forecast.
    pub forecast: Forecast,
    /// How it changed the reactive decision.
    pub raised: Raise,
    /// `status.predictive`, with the history.
    pub status: PredictiveStatus,
    /// What to keep for the next evaluation.
    pub held: Held,
    /// The status before this evaluation (this process's, else the object's).
    pub previous: Option<PredictiveStatus>,
    /// Why the load series the object carries was ignored on first sight, if it was.
    pub ignored: Option<StoredStateError>,
}

/// Reads from Prometheus, for every `type: Prometheus` metric of `spec`, the buckets of the
/// retention window ([`keep_seconds`]) that `series` lacks: the whole window when its oldest
/// bucket is younger than the window's start, else the buckets since its newest. Only metrics
/// whose recorded load is the query's value itself are read (not `Value` targets or absolute
/// watermarks, which record the value times the ready pods). A failure is logged and
/// prediction goes on from what it has (it waits for a season of its own history). The
/// queries end by `deadline`, the object's Prometheus budget.
pub async fn seed_from_prometheus(
    ctx: &Context,
    spec: &HorizontalPodAutoscalerPlusSpec,
    settings: &Predictive,
    series: &mut LoadSeries,
    now: Timestamp,
    deadline: tokio::time::Instant,
) {
    let step = series.step_seconds();
    let keep = keep_seconds(settings);
    let open = series.bucket_at(now);
    let first = open - keep / step;
    for m in metrics_of(spec).iter() {
        let Some(p) = m.prometheus.as_ref() else {
            continue;
        };
        if times_ready(m, spec) {
            continue;
        }
        let name = metric_name(m);
        let from = match (series.oldest(&name), series.newest(&name)) {
            (Some(oldest), Some(newest)) if oldest <= first + 1 => newest + 1,
            _ => first,
        };
        if from >= open {
            continue;
        }
        let Some(address) = ctx.prometheus.address_of(p).map(str::to_owned) else {
            continue;
        };
        match ctx
            .prometheus
            .bucket_peaks(&address, &p.query, step, from, open, deadline)
            .await
        {
            Ok(peaks) => {
                for (bucket, value) in peaks {
                    if let Ok(at) = Timestamp::from_second(bucket * step) {
                        series.record(&name, at, value, keep);
                    }
                }
            }
            Err(e) => {
                crate::prometheus::log_failure(
                    &address,
                    &e,
                    "could not read the metric's history from Prometheus; prediction records its own",
                );
            }
        }
    }
}

/// Steps 1–4 of the module docs, right after the reactive `decide`: `None` when prediction is
/// off (the decision is the reactive one). `held` is this process's memory of the object
/// (`None` on first sight).
pub async fn evaluate(
    subject: &Subject<'_>,
    ctx: &Context,
    held: Option<Held>,
    pods: &[Arc<PodInfo>],
    observed: &Observation,
    decision: &Decision,
    now: Timestamp,
) -> Option<Predicted> {
    let settings = subject
        .spec
        .predictive
        .as_ref()
        .filter(|p| p.mode != PredictiveMode::Off)?;
    let mut ignored = None;
    let (mut series, remembered, previous, fitted) = if let Some(h) = held {
        (h.series, h.startup_seconds, Some(h.status), h.fit)
    } else {
        let mut series = match subject
            .previous
            .and_then(|p| p.history.as_ref())
            .map(|h| {
                LoadSeries::try_restore(h, BUCKET_SECONDS).map(|mut series| {
                    series.restore_means(h);
                    series
                })
            }) {
            Some(Ok(series)) => series,
            Some(Err(why)) => {
                ignored = Some(why);
                LoadSeries::new(BUCKET_SECONDS)
            }
            None => LoadSeries::new(BUCKET_SECONDS),
        };
        seed_from_prometheus(
            ctx,
            subject.spec,
            settings,
            &mut series,
            now,
            subject.prometheus_deadline,
        )
        .await;
        (series, None, subject.previous.cloned(), None)
    };
    record_loads(&mut series, subject.spec, settings, observed, now);
    let measured = startup_seconds(pods).or(remembered);
    // One pod of the workload stands for its requests (utilization targets), as in tuning.
    let pod = observed.pods.first().cloned().unwrap_or_default();
    let ended = series.ended(now);
    let fitted = refit(fitted, &ended, settings, now);
    let fc = forecast(&ForecastInput {
        spec: subject.spec,
        settings,
        series: &ended,
        pod: &pod,
        config: &ctx.config,
        startup_seconds: measured.unwrap_or(FALLBACK_STARTUP_SECONDS),
        now,
        fit: Some(&fitted),
    });
    let raised = raise(&RaiseInput {
        spec: subject.spec,
        settings,
        observed,
        config: &ctx.config,
        decision,
        forecast: &fc,
        now,
    });
    let mut status = predictive_status(&fc, &raised);
    status.history = Some(ended.store());
    Some(Predicted {
        held: Held {
            series,
            startup_seconds: measured,
            status: status.clone(),
            fit: Some(fitted),
        },
        forecast: fc,
        raised,
        status,
        previous,
        ignored,
    })
}

/// `fitted` while it was made through the newest ended bucket of `ended`, else a new [`fit`]:
/// the season is chosen again once per bucket, not at every evaluation.
pub fn refit(
    fitted: Option<Fit>,
    ended: &LoadSeries,
    settings: &Predictive,
    now: Timestamp,
) -> Fit {
    match fitted {
        Some(f) if f.through == ended.newest_ended(now) => f,
        _ => fit(ended, settings, now),
    }
}

/// The decision to write: the reactive one, or as [`raise`] changed it (the prediction's
/// message joins the reason, so the rescale Event and the log say why).
pub fn apply(decision: Decision, predicted: Option<&Predicted>) -> Decision {
    let Some(r) = predicted.map(|p| &p.raised) else {
        return decision;
    };
    if r.scale_to == decision.scale_to && r.desired_replicas == decision.desired_replicas {
        return decision;
    }
    let reason = if decision.reason.is_empty() {
        format!("predictive: {}", r.message)
    } else {
        format!("{}; predictive: {}", decision.reason, r.message)
    };
    Decision {
        scale_to: r.scale_to,
        desired_replicas: r.desired_replicas,
        reason,
        ..decision
    }
}

/// Whether the forecast of `status` is trusted (a prediction exists).
fn trusted(status: &PredictiveStatus) -> bool {
    status.forecast_replicas.is_some()
}

/// The Event prediction owes the user after this evaluation, `(reason, note)`: `PredictionOn`
/// when the forecast becomes trusted, `PredictionOff` when it stops being trusted (not on
/// first sight of an object that never predicted).
pub fn event(predicted: &Predicted) -> Option<(&'static str, String)> {
    let now = trusted(&predicted.status);
    let before = predicted.previous.as_ref().is_some_and(trusted);
    match (before, now) {
        (false, true) => Some((
            "PredictionOn",
            format!(
                "the forecast is trusted (recent error {}%): {}",
                predicted.status.recent_error_percent.unwrap_or_default(),
                predicted.raised.message
            ),
        )),
        (true, false) => Some(("PredictionOff", predicted.forecast.message.clone())),
        _ => None,
    }
}

/// Writes a native HPA's predictive status into its [`STATUS_ANNOTATION`].
pub async fn write_native_status(
    ctx: &Context,
    namespace: &str,
    name: &str,
    status: &PredictiveStatus,
) -> Result<()> {
    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(ctx.client.clone(), namespace);
    crate::status::write_native_json(&api, name, STATUS_ANNOTATION, status, "predictive status")
        .await
}

/// Step 5 after the status write: the metrics, the Event (while leading), and a native HPA's
/// annotation when it changed. `decision` and `series` (its proposals' `metric` labels, in
/// order) name the object's metrics (to label the forecast series, and drop them when
/// prediction is off).
pub async fn report(
    ctx: &Context,
    subject: &Subject<'_>,
    reference: &ObjectReference,
    native: bool,
    (decision, series): (&Decision, &[String]),
    predicted: Option<&Predicted>,
) {
    ctx.metrics.predicted(
        subject.namespace,
        subject.name,
        (decision, series),
        predicted.map(|p| &p.forecast),
    );
    let Some(predicted) = predicted else { return };
    if !ctx.shards.holds(subject.uid) {
        return;
    }
    if let Some((reason, note)) = event(predicted) {
        ctx.events.normal(reference, reason, "Predict", note).await;
    }
    if native
        && predicted.previous.as_ref() != Some(&predicted.status)
        && let Err(e) =
            write_native_status(ctx, subject.namespace, subject.name, &predicted.status).await
    {
        tracing::warn!(error = %e, "could not write the predictive status annotation");
    }
}

#[cfg(test)]
mod tests {
    use plimsoll_core::horizontal::PodPhase;
    use plimsoll_core::horizontal::predictive::PredictiveReason;

    use super::*;

    fn t(second: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + second).unwrap()
    }

    fn pod(created: i64, ready_at: Option<i64>) -> Arc<PodInfo> {
        Arc::new(PodInfo {
            name: format!("p{created}"),
            labels: BTreeMap::new(),
            phase: PodPhase::Running,
            ready: Some(ready_at.is_some()),
            ready_transition_time: ready_at.map(t),
            deleting: false,
            start_time: Some(t(created + 2)),
            created: Some(t(created)),
            containers: Vec::new(),
            init_containers: Vec::new(),
            pod_requests: BTreeMap::new(),
            pod_limits: BTreeMap::new(),
            overhead: BTreeMap::new(),
        })
    }

    #[test]
    fn the_startup_time_is_the_median_of_the_most_recently_ready_pods() {
        assert_eq!(startup_seconds(&[]), None);
        // Not Ready yet: nothing measured.
        assert_eq!(startup_seconds(&[pod(0, None)]), None);
        // 30, 40 and one slow start of 300: the median ignores it.
        let pods = [pod(0, Some(30)), pod(100, Some(140)), pod(200, Some(500))];
        assert_eq!(startup_seconds(&pods), Some(40));
        // A Ready transition hours after creation is a readiness flap, not a start.
        let flapped = [pod(0, Some(30)), pod(0, Some(30 + MAX_STARTUP_SECONDS))];
        assert_eq!(startup_seconds(&flapped), Some(30));
        // Only the most recent STARTUP_SAMPLES count: twelve old 10 s starts, then ten of 60 s.
        let mut many: Vec<Arc<PodInfo>> = (0..12).map(|i| pod(i, Some(i + 10))).collect();
        many.extend((0..10).map(|i| pod(1_000 + i, Some(1_060 + i))));
        assert_eq!(startup_seconds(&many), Some(60));
    }

    fn predicted(previous: Option<i32>, now: Option<i32>) -> Predicted {
        let status = |replicas: Option<i32>| PredictiveStatus {
            forecast_replicas: replicas,
            recent_error_percent: Some(3),
            ..PredictiveStatus::default()
        };
        Predicted {
            forecast: Forecast {
                metrics: Vec::new(),
                replicas: now,
                lead_seconds: 920,
                reason: PredictiveReason::LargeError,
                message: "the recent forecasts of rps were 80% off".into(),
            },
            raised: Raise {
                scale_to: None,
                desired_replicas: 2,
                acting: false,
                reason: PredictiveReason::BelowReactive,
                message: "the load forecast for the next 920s needs 6 replicas".into(),
            },
            status: status(now),
            held: Held {
                series: LoadSeries::new(BUCKET_SECONDS),
                startup_seconds: None,
                status: status(now),
                fit: None,
            },
            previous: previous.map(|r| status((r > 0).then_some(r))),
            ignored: None,
        }
    }

    #[test]
    fn events_say_when_the_forecast_becomes_trusted_and_when_it_stops() {
        let reason = |p: &Predicted| event(p).map(|e| e.0);
        assert_eq!(reason(&predicted(None, Some(6))), Some("PredictionOn"));
        assert_eq!(reason(&predicted(Some(0), Some(6))), Some("PredictionOn"));
        assert_eq!(reason(&predicted(Some(6), Some(7))), None);
        assert_eq!(reason(&predicted(Some(6), None)), Some("PredictionOff"));
        assert_eq!(reason(&predicted(None, None)), None, "never on, never off");
        let (_, note) = event(&predicted(Some(6), None)).unwrap();
        assert!(note.contains("80% off"), "{note}");
        let (_, note) = event(&predicted(None, Some(6))).unwrap();
        assert!(note.contains("recent error 3%"), "{note}");
    }

    #[test]
    fn the_raised_decision_replaces_the_reactive_scale_and_says_why() {
        let reactive = Decision {
            current_replicas: 2,
            desired_replicas: 2,
            scale_to: None,
            recommended_replicas: Some(2),
            proposals: Vec::new(),
            limited_by: None,
            reason: String::new(),
            conditions: Vec::new(),
            countdowns: Vec::new(),
            next_sync_seconds: 5,
            history: plimsoll_core::horizontal::History::default(),
        };
        assert_eq!(apply(reactive.clone(), None), reactive);
        let mut p = predicted(None, Some(6));
        assert_eq!(apply(reactive.clone(), Some(&p)), reactive, "not raised");
        p.raised = Raise {
            scale_to: Some(6),
            desired_replicas: 6,
            acting: true,
            reason: PredictiveReason::Raised,
            message: "raises the reactive 2 to 6".into(),
        };
        let d = apply(reactive, Some(&p));
        assert_eq!((d.scale_to, d.desired_replicas), (Some(6), 6));
        assert_eq!(d.reason, "predictive: raises the reactive 2 to 6");
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
