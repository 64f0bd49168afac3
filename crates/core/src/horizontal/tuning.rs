//! `minReplicasTuning`: what `minReplicas` the load of the last `lookbackDays` days needs, and
//! whether to lower it now ([`tune`]).
//!
//! The model (docs/hpa-plus.md, "minReplicas tuning"):
//! 1. Per metric, the peak of each of the last `lookbackDays` days ([`LoadHistory::daily_peaks`];
//!    day 0 ends with the current hour). The samples must span the whole lookback and every
//!    day must have one ([`LoadHistory::covers`]), else nothing is done (`NotEnoughHistory`).
//! 2. The days are weighted linearly, recent days more: day k (0 = most recent) of `n` weighs
//!    `n − k`, and the weighted peak is `Σ (n − k) · peak_k / Σ (n − k)`. With 7 days the
//!    weights are 7, 6, …, 1 (sum 28): yesterday counts seven times as much as a week ago.
//! 3. The weighted peak becomes replicas through the controller's own metric calculation
//!    ([`super::proposals::propose`]) on one synthetic pod carrying the whole load, with
//!    tolerance 0 (tolerance is a band around the current count, not a capacity statement) and
//!    `minReplicas` 1. For a `Utilization` target that is `ceil(peak / (request × target))`,
//!    for `AverageValue` `ceil(peak / target)`, for `Value` `ceil(peak / target)` where the
//!    recorded load is value × ready pods, for `Watermark` the watermark rule at one replica.
//!    The need is the largest over metrics; a metric that cannot be computed stops tuning.
//! 4. The proposal is `max(need, floor, 1)`, made only when it is below the current
//!    `minReplicas` (tuning never raises it), and never while a CronHPA job or keep window
//!    holds the target. In `Apply` it is applied at most once a day.
//!
//! The low-load flag is set when the need is fewer than half of `minReplicas`.
//!
//! A metric's load, as recorded in the history ([`observed_load`]), is the workload-wide
//! amount: the sum over the pods with a sample for `Resource`, `ContainerResource` and `Pods`
//! metrics (milli-units, so a utilization metric records CPU millicores, not percent), the
//! Object or External value otherwise; times the ready pods where the controller's own
//! calculation multiplies by them (a `Value` target, an `absolute` Watermark), so that one
//! synthetic pod carrying the load gets the proposal the real pods got.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use super::config::ControllerConfig;
use super::load_history::LoadHistory;
use super::observation::{Observation, PodPhase, PodSample};
use super::proposals::{metric_name, propose};
use super::source;
use crate::api::hpa_plus::{
    Algorithm, HorizontalPodAutoscalerPlusSpec, MetricSpec, MetricTargetType, MinReplicasTuning,
    MinReplicasTuningStatus, TuningMode,
};

/// Tuning applies at most once per this many seconds (a day).
pub const APPLY_INTERVAL_SECONDS: i64 = 24 * 3600;

/// Why tuning proposed what it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum TuningReason {
    /// `mode: Off`: nothing evaluated.
    Off,
    /// The weighted peaks need fewer replicas than `minReplicas`: proposes the need.
    Lowered,
    /// The floor bounds the proposal (lowered to the floor, or kept because the floor is not
    /// below `minReplicas`).
    Floor,
    /// The weighted peaks need `minReplicas` or more: nothing to lower (never raised).
    AlreadyLow,
    /// A CronHPA job or keep window holds the target.
    HeldByCron,
    /// Some day of the lookback has no sample.
    NotEnoughHistory,
    /// A proposal exists but the last change was less than a day ago (Apply).
    TooSoon,
    /// A metric's need could not be computed (no request for a utilization target, …).
    NoMetrics,
    /// The controller's exclusion selector matches the autoscaler or its workload's pods.
    Excluded,
}

impl TuningReason {
    /// The reason as written to `status.minReplicasTuning.reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "Off",
            Self::Lowered => "Lowered",
            Self::Floor => "Floor",
            Self::AlreadyLow => "AlreadyLow",
            Self::HeldByCron => "HeldByCron",
            Self::NotEnoughHistory => "NotEnoughHistory",
            Self::TooSoon => "TooSoon",
            Self::NoMetrics => "NoMetrics",
            Self::Excluded => "Excluded",
        }
    }
}

/// What one metric's history weighs.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WeightedPeak {
    /// The metric's name, as its proposal names it.
    pub metric: String,
    /// The weighted daily peak, milli-units of the recorded load.
    pub weighted_peak: i64,
    /// The replicas it needs; `None` when they could not be computed.
    pub replicas: Option<i32>,
}

/// Everything tuning reads: plain data, no clock.
#[derive(Clone, Copy, Debug)]
pub struct TuningInput<'a> {
    /// The autoscaler's spec: metrics, `minReplicas` (the current one), `maxReplicas`.
    pub spec: &'a HorizontalPodAutoscalerPlusSpec,
    /// The settings in force (spec or annotation).
    pub settings: &'a MinReplicasTuning,
    /// The load history.
    pub history: &'a LoadHistory,
    /// One pod of the workload (its containers' requests and limits), for utilization targets.
    pub pod: &'a PodSample,
    /// The controller's flags (the utilization base default).
    pub config: &'a ControllerConfig,
    /// When tuning last changed `minReplicas`.
    pub last_applied: Option<Timestamp>,
    /// The CronHPA holding the target, if any.
    pub held_by: Option<&'a str>,
    /// The exclusion selector that matches this autoscaler or its workload's pods, if any.
    pub excluded_by: Option<&'a str>,
    /// The evaluation time.
    pub now: Timestamp,
}

/// What tuning decided.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tuning {
    /// The `minReplicas` proposed (always below the current one); `None` when none.
    pub proposed: Option<i32>,
    /// Replicas the weighted peaks need (largest over metrics), when computed.
    pub needed: Option<i32>,
    /// Per metric: its weighted peak and the replicas it needs.
    pub peaks: Vec<WeightedPeak>,
    /// Why.
    pub reason: TuningReason,
    /// The weighted peaks need fewer than half of `minReplicas`.
    pub low_load: bool,
    /// Write `proposed` as the new `minReplicas` now (Apply, not too soon).
    pub apply: bool,
    /// A sentence a person can read.
    pub message: String,
}

impl Tuning {
    fn nothing(reason: TuningReason, message: String) -> Self {
        Self {
            proposed: None,
            needed: None,
            peaks: Vec::new(),
            reason,
            low_load: false,
            apply: false,
            message,
        }
    }
}

/// Decides what `minReplicas` the history needs (see the module docs).
pub fn tune(input: &TuningInput<'_>) -> Tuning {
    let settings = input.settings;
    if settings.mode == TuningMode::Off {
        return Tuning::nothing(TuningReason::Off, "minReplicas tuning is off".into());
    }
    if let Some(selector) = input.excluded_by {
        return Tuning::nothing(
            TuningReason::Excluded,
            format!("excluded from minReplicas tuning by the controller's selector {selector}"),
        );
    }
    if let Some(cron) = input.held_by {
        return Tuning::nothing(
            TuningReason::HeldByCron,
            format!("{cron} holds the target; minReplicas is left as it is"),
        );
    }
    let days = settings.lookback_days();
    let peaks = match weighted_peaks(input, days) {
        Ok(p) => p,
        Err(message) => return Tuning::nothing(TuningReason::NotEnoughHistory, message),
    };
    let needed = peaks
        .iter()
        .map(|p| p.replicas)
        .try_fold(1, |acc, r| r.map(|r| acc.max(r)));
    let Some(needed) = needed else {
        let failed: Vec<&str> = peaks
            .iter()
            .filter(|p| p.replicas.is_none())
            .map(|p| p.metric.as_str())
            .collect();
        let mut out = Tuning::nothing(
            TuningReason::NoMetrics,
            format!(
                "cannot compute the replicas the peaks of {} need",
                failed.join(", ")
            ),
        );
        out.peaks = peaks;
        return out;
    };
    let current = input.spec.min_replicas.unwrap_or(1);
    let floor = settings.floor();
    let target = needed.max(floor).max(1);
    let mut out = Tuning {
        proposed: None,
        needed: Some(needed),
        peaks,
        reason: TuningReason::AlreadyLow,
        low_load: needed.saturating_mul(2) < current,
        apply: false,
        message: String::new(),
    };
    if target >= current {
        out.reason = if needed < current {
            TuningReason::Floor
        } else {
            TuningReason::AlreadyLow
        };
        out.message = format!(
            "the weighted peaks of {days} days need {needed} replicas; minReplicas {current} \
             stays (floor {floor})"
        );
        return out;
    }
    out.proposed = Some(target);
    out.reason = if target > needed {
        TuningReason::Floor
    } else {
        TuningReason::Lowered
    };
    let too_soon = input.last_applied.is_some_and(|at| {
        input.now.duration_since(at) < SignedDuration::from_secs(APPLY_INTERVAL_SECONDS)
    });
    let verb = match settings.mode {
        TuningMode::Apply if too_soon => {
            out.reason = TuningReason::TooSoon;
            "will lower, a day after the last change,"
        }
        TuningMode::Apply => {
            out.apply = true;
            "lowers"
        }
        TuningMode::Report | TuningMode::Off => "would lower",
    };
    out.message = format!(
        "the weighted peaks of {days} days need {needed} replicas; tuning {verb} minReplicas \
         from {current} to {target} (floor {floor})"
    );
    out
}

/// Records the load each metric of `spec` sees in `observed` ([`observed_load`]) at `now`,
/// keeping `days` days: what the controller and the replay do at every evaluation.
pub fn record_loads(
    history: &mut LoadHistory,
    spec: &HorizontalPodAutoscalerPlusSpec,
    observed: &Observation,
    now: Timestamp,
    days: i32,
) {
    for m in super::proposals::metrics_of(spec).iter() {
        if let Some(load) = observed_load(m, spec, observed) {
            history.record(&metric_name(m), now, load, days);
        }
    }
}

/// `status.minReplicasTuning` after `tuning` at `now`: what it proposed and why, the
/// `minReplicas` it replaced and when (kept from `previous` until it lowers again), and the
/// load history it read (so a restarted or newly elected controller continues from it).
pub fn tuning_status(
    tuning: &Tuning,
    previous: Option<&MinReplicasTuningStatus>,
    min_replicas: i32,
    history: &LoadHistory,
    now: Timestamp,
) -> MinReplicasTuningStatus {
    let (previous_min_replicas, last_applied_time) = if tuning.apply {
        (
            Some(min_replicas),
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now)),
        )
    } else {
        (
            previous.and_then(|p| p.previous_min_replicas),
            previous.and_then(|p| p.last_applied_time.clone()),
        )
    };
    let stored = history.store();
    MinReplicasTuningStatus {
        proposed: tuning.proposed,
        needed: tuning.needed,
        low_load: tuning.low_load,
        previous_min_replicas,
        last_applied_time,
        reason: tuning.reason.as_str().to_owned(),
        message: tuning.message.clone(),
        load_history: (!history.is_empty()).then_some(stored),
    }
}

/// Each metric's weighted peak and the replicas it needs; `Err` when a day has no sample.
fn weighted_peaks(input: &TuningInput<'_>, days: i32) -> Result<Vec<WeightedPeak>, String> {
    let spec = input.spec;
    super::proposals::metrics_of(spec)
        .iter()
        .map(|m| {
            let name = metric_name(m);
            let daily = input.history.daily_peaks(&name, input.now, days);
            if !input.history.covers(&name, input.now, days) {
                let have = daily.iter().filter(|p| p.is_some()).count();
                return Err(format!(
                    "{name} has samples on {have} of the last {days} days; tuning waits for \
                     {days} full days"
                ));
            }
            let peak = weighted(&daily.iter().flatten().copied().collect::<Vec<_>>());
            Ok(WeightedPeak {
                replicas: replicas_for(m, peak, input).ok(),
                metric: name,
                weighted_peak: peak,
            })
        })
        .collect()
}

/// Linear weights, most recent first: `peaks[k]` weighs `len − k`. Rounded up to a whole
/// milli-unit so the need is never understated.
pub fn weighted(peaks: &[i64]) -> i64 {
    let n = peaks.len();
    if n == 0 {
        return 0;
    }
    let (mut sum, mut weights) = (0i128, 0i128);
    for (k, &p) in peaks.iter().enumerate() {
        let w = i128::try_from(n - k).unwrap_or(i128::MAX);
        sum += w * i128::from(p);
        weights += w;
    }
    let ceil = sum.div_euclid(weights) + i128::from(sum.rem_euclid(weights) != 0);
    i64::try_from(ceil).unwrap_or(i64::MAX)
}

/// The replicas a load of `load` milli-units on metric `m` needs, through the controller's
/// own calculation on one pod carrying the whole load.
pub fn replicas_for(m: &MetricSpec, load: i64, input: &TuningInput<'_>) -> Result<i32, String> {
    replicas_for_load(m, load, input.spec, input.pod, input.config, input.now)
}

/// [`replicas_for`] without a [`TuningInput`]: the replicas a load of `load` milli-units on
/// metric `m` of `spec` needs, through [`propose`] on one pod like `pod` carrying the whole
/// load, with tolerance 0 and `minReplicas` 1. Prediction
/// ([`super::predictive`]) turns its forecast into replicas with it too.
pub fn replicas_for_load(
    m: &MetricSpec,
    load: i64,
    spec: &HorizontalPodAutoscalerPlusSpec,
    pod: &PodSample,
    config: &ControllerConfig,
    now: Timestamp,
) -> Result<i32, String> {
    let mut spec = spec.clone();
    spec.metrics = vec![m.clone()];
    spec.min_replicas = Some(1);
    spec.tolerance = None;
    spec.behavior = None;
    spec.readiness_delay_seconds = None;
    spec.converge_towards_watermark = None;
    let config = ControllerConfig {
        tolerance: 0.0,
        ..config.clone()
    };
    let observed = one_pod_carrying(m, load, pod, now);
    let outcome = propose(&spec, &observed, &config, now);
    match outcome.first() {
        Some(o) => o
            .replicas
            .ok_or_else(|| o.error.clone().unwrap_or_default()),
        None => Err("no metric".into()),
    }
}

/// An observation of one ready, long-running pod (`template`'s containers) that carries `load`
/// on metric `m`.
fn one_pod_carrying(
    m: &MetricSpec,
    load: i64,
    template: &PodSample,
    now: Timestamp,
) -> Observation {
    let long_ago = now - SignedDuration::from_hours(24);
    let mut pod = PodSample {
        name: "peak".into(),
        ready: Some(true),
        deleting: false,
        start_time: Some(long_ago),
        ready_transition_time: Some(long_ago),
        metrics_timestamp: Some(now),
        metrics: BTreeMap::new(),
        ..template.clone()
    };
    pod.phase = PodPhase::Running;
    let mut observed = Observation {
        current_replicas: 1,
        status_replicas: Some(1),
        ..Observation::default()
    };
    if let Some(source) = source::of(m) {
        source.place_load(load, &mut pod, &mut observed);
    }
    observed.pods = vec![pod];
    observed
}

/// Whether the history records metric `m` as its value times the ready pods (a `Value` target
/// on an Object, External or Prometheus metric, an `absolute` Watermark), rather than the value
/// itself: then a series of past values alone (from Prometheus) is not the recorded load.
pub fn times_ready(m: &MetricSpec, spec: &HorizontalPodAutoscalerPlusSpec) -> bool {
    let per_pod = source::kind(m).per_pod;
    let absolute = spec.algorithm.unwrap_or_default() == Algorithm::Absolute;
    match m.target().map(|t| t.type_) {
        Some(MetricTargetType::Value) => !per_pod,
        Some(MetricTargetType::Watermark) => absolute,
        Some(MetricTargetType::Utilization | MetricTargetType::AverageValue) | None => false,
    }
}

/// The load of metric `m` in `observed`, as the history records it (module docs): the sum of
/// the per-pod values (pods with a complete sample), or the Object / External value; times the
/// running, ready, non-deleting pods where the controller's calculation multiplies by them
/// (`Value` targets, `absolute` watermarks). `None` when the metric has no value.
pub fn observed_load(
    m: &MetricSpec,
    spec: &HorizontalPodAutoscalerPlusSpec,
    observed: &Observation,
) -> Option<i64> {
    let value = source::of(m)?.load(observed)?;
    if !times_ready(m, spec) {
        return Some(value);
    }
    let ready = observed
        .pods
        .iter()
        .filter(|p| p.phase == PodPhase::Running && p.ready == Some(true) && !p.deleting)
        .count();
    value.checked_mul(i64::try_from(ready).ok()?)
}

#[cfg(test)]
mod tests;
