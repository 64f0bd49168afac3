//! Every restore of stored state, fed what an object could carry, with the rules of
//! [`super`] asserted: the property tests (`tests/stored_state.rs`) and the fuzz target
//! (`fuzz/fuzz_targets/stored_state.rs`) call these, so both check the same things.
//!
//! Each check panics when a rule is broken; run in a test build (overflow checks on), any
//! arithmetic overflow on the way panics too. The rules:
//! * a restore never panics, whatever it is given;
//! * what it restores is bounded by the documented caps;
//! * what it restores is a state the controller could have written: storing it and restoring
//!   that gives it back (or, for the decision memory, the same stored form), and the code that
//!   reads it (windows, limits, tuning and forecasts through the replica calculation they
//!   feed, histograms, schedules) runs without overflow;
//! * otherwise it reports why it ignored the state, in a bounded message.

// Test support (built only for tests and the `fixtures` feature): its job is to assert.
#![allow(clippy::panic, clippy::expect_used, clippy::unwrap_used)]

use jiff::{SignedDuration, Timestamp};

use super::StoredStateError;
use crate::api::cron::{CronHorizontalPodAutoscalerSpec, CronHorizontalPodAutoscalerStatus};
use crate::api::hpa_plus::{
    DecisionMemory, HorizontalPodAutoscalerPlusSpec, HpaScalingPolicyType, MetricIdentifier,
    MetricSourceType, MetricSpec, MetricTarget, MetricTargetType, MinReplicasTuning,
    MinReplicasTuningStatus, PodsMetricSource, Predictive, PredictiveMode, PredictiveStatus,
    ResourceMetricSource, ScalingPolicySelect, Season, TuningMode, UtilizationBase,
};
use crate::api::vpa::VerticalPodAutoscalerCheckpointStatus;
use crate::horizontal::behavior::{
    Policy, Rules, scale_down_limit, scale_up_limit, stabilize_default, stabilize_with_behaviors,
};
use crate::horizontal::load_history::{LoadHistory, MAX_DAYS};
use crate::horizontal::memory;
use crate::horizontal::peak_series::StoredPeakSeries;
use crate::horizontal::predictive::{
    FALLBACK_STARTUP_SECONDS, ForecastInput, LoadSeries, fit, forecast, max_buckets,
};
use crate::horizontal::tuning::{TuningInput, replicas_for_load, tune};
use crate::horizontal::{ContainerSample, ControllerConfig, PodSample};
use crate::schedule::{history, plan};
use crate::vertical::aggregate::AggregationsConfig;
use crate::vertical::checkpoint;
use crate::vertical::joint_sizing::{self, JointConfig, JointState};
use crate::vertical::resources::Resource;

/// The longest message a [`StoredStateError`] may make: it names a field and numbers, never
/// the stored text.
pub const MAX_MESSAGE_BYTES: usize = 200;

/// The bucket width the controller uses for predictive load series.
pub const SERIES_STEP_SECONDS: i64 = 900;

/// A fixed evaluation time (2026-01-01T00:00:00Z), for callers without a clock of their own.
pub fn now() -> Timestamp {
    Timestamp::constant(1_767_225_600, 0)
}

fn check_error(why: &StoredStateError) {
    let text = why.to_string();
    assert!(
        text.len() <= MAX_MESSAGE_BYTES,
        "{} bytes: {text}",
        text.len()
    );
}

/// Feeds `text` to every restore, as each annotation or status field would carry it.
pub fn text(text: &str, now: Timestamp) {
    let annotations =
        |key: &str| std::collections::BTreeMap::from([(key.to_owned(), text.to_owned())]);
    match memory::from_annotations(&annotations(memory::ANNOTATION)) {
        Ok(Some(m)) => decision_memory(&m, now),
        Ok(None) => panic!("the annotation is there"),
        Err(why) => check_error(&why),
    }
    if let Ok(m) = serde_json::from_str::<DecisionMemory>(text) {
        decision_memory(&m, now);
    }
    if let Ok(status) = serde_json::from_str::<MinReplicasTuningStatus>(text)
        && let Some(h) = &status.load_history
    {
        load_history(h, now);
    }
    if let Ok(h) = serde_json::from_str::<StoredPeakSeries>(text) {
        load_history(&h, now);
    }
    if let Ok(status) = serde_json::from_str::<PredictiveStatus>(text)
        && let Some(s) = &status.history
    {
        load_series(s, now);
    }
    if let Ok(s) = serde_json::from_str::<StoredPeakSeries>(text) {
        load_series(&s, now);
    }
    total_usage(text, now);
    if let Ok(status) = serde_json::from_str::<VerticalPodAutoscalerCheckpointStatus>(text) {
        vpa_checkpoint(&status, now);
    }
    if let Ok(status) = serde_json::from_str::<CronHorizontalPodAutoscalerStatus>(text) {
        cron_status(&status, now);
    }
}

/// `status.memory` / `plimsoll.dev/decision-memory`.
pub fn decision_memory(m: &DecisionMemory, now: Timestamp) {
    let resumed = memory::resume(None, Some(m), 3, now, now);
    match memory::try_restore(m) {
        Ok(h) => {
            assert_eq!(resumed.ignored, None);
            for len in [
                h.recommendations.len(),
                h.scale_up_events.len(),
                h.scale_down_events.len(),
            ] {
                assert!(len <= memory::MAX_ENTRIES, "{len} entries");
            }
            // What the controller keeps and writes back reads back as itself.
            let stored = memory::store(&h);
            let back = memory::try_restore(&stored).expect("a stored memory reads back");
            assert_eq!(memory::store(&back), stored);
            let _ = memory::same_but_newest_time(m, &stored);
            for (window, current) in [(0, 0), (300, 3), (i64::MAX, i32::MAX)] {
                let _ = stabilize_with_behaviors(current, 5, &h, window, window, now);
                let _ = stabilize_default(5, &h, window, now);
                for select in [ScalingPolicySelect::Max, ScalingPolicySelect::Min] {
                    let rules = Rules {
                        window_seconds: window,
                        select,
                        policies: vec![
                            Policy {
                                kind: HpaScalingPolicyType::Pods,
                                value: i32::MAX,
                                period_seconds: window,
                            },
                            Policy {
                                kind: HpaScalingPolicyType::Percent,
                                value: 100,
                                period_seconds: window,
                            },
                        ],
                    };
                    let _ = scale_up_limit(current, &h, &rules, now);
                    let _ = scale_down_limit(current, &h, &rules, now);
                }
            }
        }
        Err(why) => {
            check_error(&why);
            assert_eq!(resumed.ignored, Some(why));
            assert_eq!(
                resumed.history,
                memory::resume(None, None, 3, now, now).history
            );
        }
    }
}

/// `status.minReplicasTuning.loadHistory` (or inside `plimsoll.dev/min-replicas-tuning-status`).
pub fn load_history(stored: &StoredPeakSeries, now: Timestamp) {
    match LoadHistory::try_restore(stored) {
        Ok(mut h) => {
            let names: Vec<String> = h.metrics().map(str::to_owned).collect();
            assert!(names.len() <= super::MAX_METRICS);
            let cap = usize::try_from(i64::from(MAX_DAYS) * 24).unwrap_or(usize::MAX);
            for name in &names {
                assert!(h.hours(name).len() <= cap);
            }
            assert_eq!(LoadHistory::try_restore(&h.store()), Ok(h.clone()));
            for name in &names {
                tuned(&h, name, now);
            }
            for name in &names {
                let _ = h.daily_peaks(name, now, MAX_DAYS);
                let _ = h.covers(name, now, MAX_DAYS);
                h.record(name, now, i64::MAX, MAX_DAYS);
                h.record(name, now, i64::MIN, 1);
            }
        }
        Err(why) => check_error(&why),
    }
}

/// `status.predictive.history` (or inside `plimsoll.dev/predictive-status`).
pub fn load_series(stored: &StoredPeakSeries, now: Timestamp) {
    match LoadSeries::try_restore(stored, SERIES_STEP_SECONDS) {
        Ok(mut s) => {
            let names: Vec<String> = stored.metrics.keys().cloned().collect();
            assert!(names.len() <= super::MAX_METRICS);
            for name in &names {
                assert!(s.points(name).len() <= max_buckets(SERIES_STEP_SECONDS));
            }
            assert_eq!(
                LoadSeries::try_restore(&s.store(), SERIES_STEP_SECONDS),
                Ok(s.clone())
            );
            let settings = Predictive::default();
            let _ = fit(&s, &settings, now);
            for name in &names {
                forecast_from(&s, name, now);
            }
            for name in &names {
                let _ = s.ended(now);
                s.record(name, now, i64::MIN, i64::MAX);
                s.record(name, now, i64::MAX, 0);
            }
        }
        Err(why) => check_error(&why),
    }
}

/// An autoscaler whose metrics read the history of `metric`: a `Utilization` target on the
/// resource of that name (CPU's for `cpu`) against `base`, and a `Pods` `AverageValue` one. The
/// restored loads then go through the controller's own replica calculation, where a tenant's
/// stored peak meets the pod's requests.
fn reading(metric: &str, base: UtilizationBase) -> HorizontalPodAutoscalerPlusSpec {
    let resource = MetricSpec {
        type_: MetricSourceType::Resource,
        resource: Some(ResourceMetricSource {
            name: metric.to_owned(),
            target: MetricTarget {
                type_: MetricTargetType::Utilization,
                average_utilization: Some(50),
                ..MetricTarget::default()
            },
        }),
        ..MetricSpec::default()
    };
    let pods = MetricSpec {
        type_: MetricSourceType::Pods,
        pods: Some(PodsMetricSource {
            metric: MetricIdentifier {
                name: metric.to_owned(),
                ..MetricIdentifier::default()
            },
            target: MetricTarget {
                type_: MetricTargetType::AverageValue,
                average_value: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                    "100m".into(),
                )),
                ..MetricTarget::default()
            },
        }),
        ..MetricSpec::default()
    };
    HorizontalPodAutoscalerPlusSpec {
        min_replicas: Some(5),
        max_replicas: 10,
        metrics: vec![resource, pods],
        utilization_base: Some(base),
        ..HorizontalPodAutoscalerPlusSpec::default()
    }
}

/// A pod of the workload: an app container and a sidecar, each with a request and a limit of
/// `resource`.
fn pod_of(resource: &str) -> PodSample {
    let container = |name: &str, request: i64, sidecar: bool| ContainerSample {
        name: name.to_owned(),
        sidecar,
        requests: [(resource.to_owned(), request)].into(),
        limits: [(resource.to_owned(), 2 * request)].into(),
        ..ContainerSample::default()
    };
    PodSample {
        containers: vec![container("app", 1000, false)],
        init_containers: vec![container("proxy", 100, true)],
        ..PodSample::default()
    }
}

/// The second in the middle of `bucket` of `step` seconds, when it is a time.
fn in_bucket(bucket: i64, step: i64) -> Option<Timestamp> {
    let second = bucket.checked_mul(step)?.checked_add(step / 2)?;
    Timestamp::from_second(second).ok()
}

/// `minReplicasTuning` on `metric` of a restored history: at `now` and at its newest hour,
/// over the default lookback and over as many whole days as the history spans (so that the
/// peaks are read, not refused as too few days), against requests and limits; and every
/// daily peak through the replica calculation. Tuning never raises `minReplicas`.
fn tuned(h: &LoadHistory, metric: &str, now: Timestamp) {
    let config = ControllerConfig::default();
    let pod = pod_of(metric);
    let hours = h.hours(metric);
    let (Some(&(oldest, _)), Some(&(newest, _))) = (hours.first(), hours.last()) else {
        return;
    };
    let newest_at = in_bucket(newest, 3600);
    let spanned = i32::try_from((newest - oldest + 1) / 24).unwrap_or(MAX_DAYS);
    for base in [UtilizationBase::Requests, UtilizationBase::Limits] {
        let spec = reading(metric, base);
        for at in std::iter::once(now).chain(newest_at) {
            for days in [None, Some(spanned.clamp(1, MAX_DAYS))] {
                let settings = MinReplicasTuning {
                    mode: TuningMode::Report,
                    lookback_days: days,
                    floor: None,
                };
                let t = tune(&TuningInput {
                    spec: &spec,
                    settings: &settings,
                    history: h,
                    pod: &pod,
                    config: &config,
                    last_applied: None,
                    held_by: None,
                    excluded_by: None,
                    now: at,
                });
                assert!(t.proposed.is_none_or(|p| (1..5).contains(&p)), "{t:?}");
            }
            for peak in h.daily_peaks(metric, at, MAX_DAYS).into_iter().flatten() {
                for m in &spec.metrics {
                    let _ = replicas_for_load(m, peak, &spec, &pod, &config, at);
                }
            }
        }
    }
}

/// `spec.predictive` on `metric` of a restored series: a forecast at `now` and inside its
/// newest bucket (where the window's past seasons are the stored buckets), against requests
/// and limits; and its highest and lowest load through the replica calculation.
fn forecast_from(s: &LoadSeries, metric: &str, now: Timestamp) {
    let config = ControllerConfig::default();
    let pod = pod_of(metric);
    let settings = Predictive {
        mode: PredictiveMode::Scale,
        season: Season::Auto,
        ..Predictive::default()
    };
    let points = s.points(metric);
    let newest_at = points
        .last()
        .and_then(|&(bucket, _)| in_bucket(bucket, s.step_seconds()));
    let extremes = [
        points.iter().map(|&(_, v)| v).max(),
        points.iter().map(|&(_, v)| v).min(),
    ];
    for base in [UtilizationBase::Requests, UtilizationBase::Limits] {
        let spec = reading(metric, base);
        for at in std::iter::once(now).chain(newest_at) {
            let fitted = fit(s, &settings, at);
            let f = forecast(&ForecastInput {
                spec: &spec,
                settings: &settings,
                series: s,
                pod: &pod,
                config: &config,
                startup_seconds: FALLBACK_STARTUP_SECONDS,
                now: at,
                fit: Some(&fitted),
                reads: &[],
            });
            assert_eq!(f.metrics.len(), spec.metrics.len());
            for load in extremes.into_iter().flatten() {
                for m in &spec.metrics {
                    let _ = replicas_for_load(m, load, &spec, &pod, &config, at);
                }
            }
        }
    }
}

/// A joint VPA's `plimsoll.dev/total-usage`.
pub fn total_usage(text: &str, now: Timestamp) {
    let config = JointConfig::default();
    let window = config.settings.window_seconds;
    match joint_sizing::restore(text, &config) {
        Ok((cpu, memory)) => {
            for usage in [cpu, memory] {
                // Re-bucketing never adds buckets; a stored list holds at most window / 1 s.
                assert!(usage.buckets().len() <= usize::try_from(window + 1).unwrap_or(0));
                assert!(usage.buckets().iter().all(|(_, v)| *v >= 0));
                let _ = usage.span_seconds();
                let _ = usage.percentile(0.95);
                let mut usage = usage;
                usage.record(now, i64::MAX, window);
            }
        }
        Err(why) => check_error(&why),
    }
    let annotations = std::collections::BTreeMap::from([(
        joint_sizing::TOTAL_USAGE_ANNOTATION.to_owned(),
        text.to_owned(),
    )]);
    let mut state = JointState::first_sight(Some(&annotations), &config, now);
    if let Some(why) = &state.ignored {
        check_error(why);
        assert!(state.usage.is_empty() && state.memory_usage.is_empty());
    }
    state.record(now, Resource::Cpu, i64::MAX, &config);
    state.record(now, Resource::Memory, i64::MAX, &config);
    let _ = state.stored();
}

/// A `VerticalPodAutoscalerCheckpoint`'s status.
pub fn vpa_checkpoint(status: &VerticalPodAutoscalerCheckpointStatus, now: Timestamp) {
    let config = AggregationsConfig::default();
    if let Ok(mut aggregate) = checkpoint::load(status, &config, now) {
        assert!(aggregate.total_samples_count >= 0);
        let _ = aggregate.confidence();
        let _ = aggregate.is_expired(&config, now);
        let copy = aggregate.clone();
        aggregate.merge(&copy);
        aggregate.add_cpu_sample(1, now);
        let _ = checkpoint::save(&aggregate, now);
    }
}

/// A CronHPA's `status` (its job conditions), read against a spec whose jobs the conditions
/// may or may not belong to.
pub fn cron_status(status: &CronHorizontalPodAutoscalerStatus, now: Timestamp) {
    let spec: CronHorizontalPodAutoscalerSpec = serde_json::from_value(serde_json::json!({
        "scaleTargetRef": {"kind": "Deployment", "name": "web"},
        "jobs": [
            {"name": "every-second", "schedule": "* * * * * *", "targetSize": 1},
            {"name": "once", "schedule": "@daily", "targetSize": 2, "runOnce": true},
        ],
    }))
    .expect("a valid spec");
    let compiled = history::check(&spec).expect("a valid spec");
    // Conditions are matched by name and id; take the stored ones for these jobs too.
    let mut adopted = status.conditions.clone();
    for (c, job) in adopted.iter_mut().zip(&spec.jobs) {
        c.job_id = plan::job_id("uid", job);
        c.name.clone_from(&job.name);
    }
    for conditions in [&status.conditions, &adopted] {
        let known = history::known_conditions("uid", &spec, &[conditions]);
        assert_eq!(known.len(), spec.jobs.len());
        let progress = history::progress(&spec, &known, now);
        let since = known
            .iter()
            .flatten()
            .filter_map(|c| c.last_probe_time.as_ref().map(|t| t.0))
            .min()
            .unwrap_or(now)
            .min(now);
        let e = plan::evaluate(
            &compiled,
            &progress,
            since,
            now,
            SignedDuration::from_mins(5),
        );
        assert!(e.due.len() <= spec.jobs.len());
        let kept = history::invalid_status(Some(status), conditions.clone(), 2, None, "x", now);
        assert_eq!(&kept.conditions, conditions);
    }
}
