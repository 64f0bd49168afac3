//! `spec.predictive`: scale up before a recurring rush arrives, from the metric's own past
//! ([`forecast`]), and never scale down on a prediction alone ([`raise`]).
//!
//! The model (docs/hpa-plus.md, "Predictive scaling") is seasonal naive with a robust
//! statistic, chosen because a reviewer can recompute it by hand from the history:
//! 1. **History.** Per metric, the load as [`super::tuning::observed_load`] records it (the
//!    workload-wide amount), kept in a [`LoadSeries`] of fixed-width buckets (the highest value
//!    seen in each bucket), for `lookbackDays` plus one season.
//! 2. **Forecast.** At `now`, with `lead` seconds of look-ahead and buckets of `step` seconds,
//!    the window is `[now, now + lead + step]`. For each past season k = 1 … n (n =
//!    `lookbackDays × 24 h / season`, at least 1) the same window shifted back k seasons gives
//!    that season's peak; the forecast is the 75th percentile (nearest rank) of those peaks
//!    ([`high_percentile`]): with 7 days the second-highest, so one unusual day neither adds a
//!    rush nor hides one. Seasons without a sample in their window are left out.
//! 3. **Replicas.** The forecast load becomes replicas through the controller's own metric
//!    calculation on one pod carrying it ([`super::tuning::replicas_for_load`], the same
//!    conversion `minReplicasTuning` uses); the prediction is the largest over the confident
//!    metrics.
//! 4. **Confidence.** A metric forecasts nothing (`NotEnoughHistory`) before its history spans
//!    one full season, or while none of its recent forecasts can be checked yet. Its recent
//!    error is the mean absolute percentage error, over the last [`ERROR_STEPS`] buckets, of the
//!    *point* forecast for each bucket (step 2 with a window of that one bucket, from the
//!    seasons before it) against the load then observed (buckets with a zero load are skipped).
//!    Above [`MAX_ERROR_PERCENT`] the metric forecasts nothing (`LargeError`): a holiday, a
//!    moved rush or a changed traffic shape turns prediction off within a few buckets, and back
//!    on once the forecasts match again.
//! 5. **Acting** ([`raise`], `Scale` only, after the reactive [`super::decide`]): when the
//!    predicted replicas exceed the reactive decision, the target is the prediction, through
//!    the same scale-up rate limit (`behavior.scaleUp` policies, `scaleUpLimitFactor`, or the
//!    default doubling), `maxReplicas`, the upscale forbidden window and the write gates
//!    (paused, dry run, CronHPA hold, rollout) the reactive path obeys. Below the current count
//!    it only softens a reactive scale-down. It never lowers what the reactive path chose.
//!
//! `leadSeconds: auto` is the pods' measured startup time (creation to Ready) plus one step
//! ([`lead_seconds`]); the window then adds one more step, so the last scale-up that the
//! forecast triggers has its pods Ready when the rush's first bucket begins.
//!
//! Pure: no clock, no I/O. The controller and `hpa-plus replay` call the same functions.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::config::ControllerConfig;
use super::decision::Decision;
use super::gates::write_gate;
use super::limits::{Bounds, LimitFactors, RateInput, forbidden_windows, rate_limit};
use super::observation::{Observation, PodSample};
use super::offsets::flatten;
use super::proposals::{metric_name, metrics_of};
use super::tuning::{observed_load, replicas_for_load};
use crate::api::hpa_plus::{
    HorizontalPodAutoscalerPlusSpec, LeadSeconds, Predictive, PredictiveMode, PredictiveStatus,
};
use crate::stored::{self, MAX_METRICS, Order, PairRules, StoredStateError};

/// How many of the latest buckets the recent forecast error averages over.
pub const ERROR_STEPS: usize = 12;

/// Above this mean absolute percentage error the forecast is not trusted.
pub const MAX_ERROR_PERCENT: f64 = 50.0;

/// A compact per-metric load series: the highest value seen in each `step`-second bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadSeries {
    step: i64,
    /// Per metric: `(bucket since the Unix epoch, highest value in milli-units)`, oldest first.
    metrics: BTreeMap<String, Vec<(i64, i64)>>,
}

impl LoadSeries {
    /// An empty series with buckets of `step_seconds` (at least 1).
    pub fn new(step_seconds: i64) -> Self {
        Self {
            step: step_seconds.max(1),
            metrics: BTreeMap::new(),
        }
    }

    /// The bucket width, seconds.
    pub fn step_seconds(&self) -> i64 {
        self.step
    }

    fn bucket_of(&self, second: i64) -> i64 {
        second.div_euclid(self.step)
    }

    /// Records `value` (milli) of `metric` at `at`, keeping `keep_seconds` before the newest
    /// bucket.
    pub fn record(&mut self, metric: &str, at: Timestamp, value: i64, keep_seconds: i64) {
        let bucket = self.bucket_of(at.as_second());
        let list = self.metrics.entry(metric.to_owned()).or_default();
        let i = list.partition_point(|(b, _)| *b < bucket);
        match list.get_mut(i) {
            Some((b, v)) if *b == bucket => *v = (*v).max(value),
            _ => list.insert(i, (bucket, value)),
        }
        let newest = list.last().map_or(bucket, |(b, _)| *b);
        let keep = keep_seconds.max(0) / self.step;
        list.retain(|(b, _)| newest - *b <= keep);
    }

    /// The value of `metric` in `bucket`, if one was recorded.
    fn at(&self, metric: &str, bucket: i64) -> Option<i64> {
        let list = self.metrics.get(metric)?;
        list.binary_search_by_key(&bucket, |(b, _)| *b)
            .ok()
            .map(|i| list[i].1)
    }

    /// The highest value of `metric` in buckets `from..=to`.
    fn peak(&self, metric: &str, from: i64, to: i64) -> Option<i64> {
        let list = self.metrics.get(metric)?;
        let start = list.partition_point(|(b, _)| *b < from);
        list[start..]
            .iter()
            .take_while(|(b, _)| *b <= to)
            .map(|(_, v)| *v)
            .max()
    }

    /// The oldest bucket of `metric`.
    pub fn oldest(&self, metric: &str) -> Option<i64> {
        self.metrics.get(metric)?.first().map(|(b, _)| *b)
    }

    /// The newest bucket of `metric`.
    pub fn newest(&self, metric: &str) -> Option<i64> {
        self.metrics.get(metric)?.last().map(|(b, _)| *b)
    }

    /// The bucket `at` falls in (seconds since the Unix epoch over the step).
    pub fn bucket_at(&self, at: Timestamp) -> i64 {
        self.bucket_of(at.as_second())
    }

    /// The buckets recorded for `metric`, `(bucket, highest value in milli-units)`, oldest
    /// first.
    pub fn points(&self, metric: &str) -> &[(i64, i64)] {
        self.metrics.get(metric).map_or(&[], Vec::as_slice)
    }

    /// The series without the bucket `now` falls in: only buckets that have ended. A bucket
    /// still open holds the highest value *so far*; the controller, which records several
    /// samples per bucket, forecasts from ended buckets so that a rush due later in the open
    /// bucket is not counted as a forecast error before it had a chance to arrive. (The replay
    /// records one sample per bucket, whose bucket is complete as soon as it is recorded.)
    #[must_use]
    pub fn ended(&self, now: Timestamp) -> Self {
        let open = self.bucket_of(now.as_second());
        Self {
            step: self.step,
            metrics: self
                .metrics
                .iter()
                .map(|(name, list)| {
                    let end = list.partition_point(|(b, _)| *b < open);
                    (name.clone(), list[..end].to_vec())
                })
                .filter(|(_, list)| !list.is_empty())
                .collect(),
        }
    }

    /// The stored form (module docs of [`StoredLoadSeries`]).
    pub fn store(&self) -> StoredLoadSeries {
        let Some(base) = self
            .metrics
            .values()
            .filter_map(|l| l.first())
            .map(|e| e.0)
            .min()
        else {
            return StoredLoadSeries {
                step_seconds: self.step,
                ..StoredLoadSeries::default()
            };
        };
        let metrics = self
            .metrics
            .iter()
            .filter(|(_, list)| !list.is_empty())
            .map(|(name, list)| (name.clone(), flatten(base, list.iter().copied())))
            .collect();
        StoredLoadSeries {
            step_seconds: self.step,
            base_bucket: Some(base),
            metrics,
        }
    }

    /// The series `stored` stands for, with buckets of `step_seconds`, or why it cannot be read
    /// back ([`crate::stored`]'s rules): the same step (buckets of another width would mean
    /// other times), at most [`MAX_METRICS`] metrics of at most [`max_buckets`]`(step)` buckets
    /// each (what [`Self::record`] keeps for the longest settings), buckets strictly
    /// increasing from `baseBucket` and inside the time range, any `i64` value (the loads the
    /// controller records are any `i64`).
    pub fn try_restore(
        stored: &StoredLoadSeries,
        step_seconds: i64,
    ) -> Result<Self, StoredStateError> {
        let step = step_seconds.max(1);
        if stored.step_seconds != step {
            return Err(StoredStateError::OtherStep {
                field: "history.stepSeconds",
                stored: stored.step_seconds,
                expected: step,
            });
        }
        if stored.metrics.len() > MAX_METRICS {
            return Err(StoredStateError::TooLong {
                field: "history.metrics",
                len: stored.metrics.len(),
                max: MAX_METRICS,
            });
        }
        let mut series = Self::new(step);
        let Some(base) = stored.base_bucket else {
            return if stored.metrics.values().all(Vec::is_empty) {
                Ok(series)
            } else {
                Err(StoredStateError::Missing {
                    field: "history.baseBucket",
                })
            };
        };
        let rules = PairRules {
            field: "history.metrics",
            max_pairs: max_buckets(step),
            positions: stored::buckets_range(step),
            values: i64::MIN..=i64::MAX,
            order: Order::Increasing,
        };
        for (name, flat) in &stored.metrics {
            let list = stored::pairs(base, flat, &rules)?;
            if !list.is_empty() {
                series.metrics.insert(name.clone(), list);
            }
        }
        Ok(series)
    }
}

/// The longest [`keep_seconds`] of any settings: a weekly season with the longest lookback
/// (30 days: 4 seasons, plus the one the error check reads).
pub const MAX_KEEP_SECONDS: i64 = 7 * 24 * 3600 * (30 / 7 + 1);

/// The most buckets of `step_seconds` a metric of a [`LoadSeries`] keeps
/// ([`MAX_KEEP_SECONDS`] / step, plus the newest bucket): 3361 with 15-minute buckets.
pub fn max_buckets(step_seconds: i64) -> usize {
    usize::try_from(MAX_KEEP_SECONDS / step_seconds.max(1) + 1).unwrap_or(usize::MAX)
}

/// The stored form of a [`LoadSeries`] (`status.predictive.history`, or in a native HPA's
/// `plimsoll.dev/predictive-status` annotation): per metric a flat
/// `[offset, value, offset, value, …]` list, offsets in buckets from the previous entry (the
/// first from `baseBucket`, buckets of `stepSeconds` since the Unix epoch), values the highest
/// load of the bucket in milli-units. Consecutive buckets cost `1,` plus the value.
///
/// Bound: a metric keeps at most [`keep_seconds`] / `stepSeconds` + 1 buckets. With the
/// controller's 15-minute buckets and the default 7 days of a daily season (8 days kept) that
/// is 769 pairs of at most 4 (`769,`) + 21 (`-9223372036854775808,`) bytes:
/// [`BOUND_BYTES_PER_METRIC_7_DAYS`] with brackets and a name of up to 253 bytes; a typical
/// metric (consecutive buckets, values below 10⁷ milli) takes about 769 × 10 ≈ 7.7 KB.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoredLoadSeries {
    /// The bucket width, seconds.
    #[serde(default)]
    pub step_seconds: i64,
    /// The bucket (since the Unix epoch) the first offset of every list counts from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_bucket: Option<i64>,
    /// Per metric: `[buckets after the previous entry, highest milli, …]`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, Vec<i64>>,
}

/// The most JSON bytes one metric's stored list takes with 15-minute buckets and 8 days kept
/// (the default 7-day lookback of a daily season, plus the season the error check reads):
/// 769 pairs of at most 4 + 21 bytes, brackets, quotes, a colon, a name of up to 253 bytes and
/// the separating comma.
pub const BOUND_BYTES_PER_METRIC_7_DAYS: usize = 769 * (4 + 21) + 2 + 253 + 4;

/// The 75th percentile by nearest rank (the value at rank ⌈0.75 n⌉ in ascending order): the
/// only value of one, the higher of two, the second-highest of 5 to 8. `None` when empty.
pub fn high_percentile(values: &[i64]) -> Option<i64> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = (sorted.len() * 3).div_ceil(4);
    rank.checked_sub(1).and_then(|i| sorted.get(i)).copied()
}

/// The season's length in seconds and how many of them the lookback holds (at least 1).
pub fn seasons(settings: &Predictive) -> (i64, usize) {
    let season = settings.season.seconds();
    let days = i64::from(settings.lookback_days()) * 24 * 3600;
    let n = usize::try_from(days / season).unwrap_or(1).max(1);
    (season, n)
}

/// The look-ahead in seconds: `leadSeconds`, or with `auto` the pods' measured startup time
/// (creation to Ready, seconds) plus one step.
pub fn lead_seconds(settings: &Predictive, startup_seconds: i64, step_seconds: i64) -> i64 {
    match settings.lead_seconds {
        LeadSeconds::Auto => startup_seconds.max(0) + step_seconds.max(0),
        LeadSeconds::Seconds(n) => n.max(0),
    }
}

/// How long a [`LoadSeries`] must keep samples for `settings`: the lookback plus one season
/// (so that the forecasts of the last [`ERROR_STEPS`] buckets can still be checked).
pub fn keep_seconds(settings: &Predictive) -> i64 {
    let (season, n) = seasons(settings);
    season * (i64::try_from(n).unwrap_or(1) + 1)
}

/// The forecast peak of `metric` over buckets `from..=to` (step 2 of the module docs): the
/// high percentile of the same window's peak on each of the `n` past seasons.
fn seasonal_peak(
    series: &LoadSeries,
    metric: &str,
    from: i64,
    to: i64,
    season: i64,
    n: usize,
) -> Option<i64> {
    let shift = season / series.step;
    let peaks: Vec<i64> = (1..=i64::try_from(n).unwrap_or(1))
        .filter_map(|k| series.peak(metric, from - k * shift, to - k * shift))
        .collect();
    high_percentile(&peaks)
}

/// The mean absolute percentage error of the point forecasts of the last [`ERROR_STEPS`]
/// buckets up to `now`'s, against the loads recorded in them; `None` when none can be checked.
pub fn recent_error_percent(
    series: &LoadSeries,
    metric: &str,
    settings: &Predictive,
    now: Timestamp,
) -> Option<f64> {
    let (season, n) = seasons(settings);
    let last = series.bucket_of(now.as_second());
    let errors: Vec<f64> = (0..ERROR_STEPS)
        .filter_map(|i| {
            let bucket = last - i64::try_from(i).ok()?;
            let actual = series.at(metric, bucket).filter(|a| *a > 0)?;
            let predicted = seasonal_peak(series, metric, bucket, bucket, season, n)?;
            // Stored loads may be any i64: the difference is taken wide.
            Some(
                (i128::from(predicted) - i128::from(actual)).unsigned_abs() as f64 * 100.0
                    / actual as f64,
            )
        })
        .collect();
    (!errors.is_empty()).then(|| errors.iter().sum::<f64>() / errors.len() as f64)
}

/// Why prediction did (not) forecast or act.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum PredictiveReason {
    /// `mode: Off`.
    Off,
    /// Less than a season of history, or no recent forecast to check yet.
    NotEnoughHistory,
    /// The recent forecast error is above [`MAX_ERROR_PERCENT`].
    LargeError,
    /// The forecast's replicas could not be computed.
    NoMetrics,
    /// The forecast needs no more than the reactive decision.
    BelowReactive,
    /// `Report`: the forecast needs more than the reactive decision; nothing changed.
    Reported,
    /// `Scale`: the forecast raised the replicas above the reactive decision.
    Raised,
}

impl PredictiveReason {
    /// The reason as written to `status.predictive.reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "Off",
            Self::NotEnoughHistory => "NotEnoughHistory",
            Self::LargeError => "LargeError",
            Self::NoMetrics => "NoMetrics",
            Self::BelowReactive => "BelowReactive",
            Self::Reported => "Reported",
            Self::Raised => "Raised",
        }
    }
}

/// Everything a forecast reads: plain data, no clock.
#[derive(Clone, Copy, Debug)]
pub struct ForecastInput<'a> {
    /// The autoscaler's spec (metrics, bounds).
    pub spec: &'a HorizontalPodAutoscalerPlusSpec,
    /// The settings in force.
    pub settings: &'a Predictive,
    /// The load series, including `now`'s load.
    pub series: &'a LoadSeries,
    /// One pod of the workload (its containers' requests), for utilization targets.
    pub pod: &'a PodSample,
    /// The controller's flags.
    pub config: &'a ControllerConfig,
    /// The pods' measured startup time, seconds (for `leadSeconds: auto`).
    pub startup_seconds: i64,
    /// The evaluation time.
    pub now: Timestamp,
}

/// One metric's forecast.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricForecast {
    /// The metric's name, as its proposal names it.
    pub metric: String,
    /// The forecast peak over the lead window, milli-units of the recorded load.
    pub load: Option<i64>,
    /// The replicas it needs.
    pub replicas: Option<i32>,
    /// The recent forecast error, percent.
    pub error_percent: Option<f64>,
    /// Whether this metric's forecast counts (step 4 of the module docs).
    pub confident: bool,
}

/// What the forecast says.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Forecast {
    /// Per metric.
    pub metrics: Vec<MetricForecast>,
    /// Replicas the confident forecasts need (largest over metrics); `None` when none is.
    pub replicas: Option<i32>,
    /// The look-ahead used, seconds.
    pub lead_seconds: i64,
    /// Why there is no prediction; `BelowReactive` when there is one, until [`raise`] compares
    /// it with the reactive decision.
    pub reason: PredictiveReason,
    /// A sentence a person can read.
    pub message: String,
}

/// Records the load each metric of `spec` sees in `observed` at `now` into `series`, keeping
/// what `settings` needs: what the controller and the replay do at every evaluation.
pub fn record_loads(
    series: &mut LoadSeries,
    spec: &HorizontalPodAutoscalerPlusSpec,
    settings: &Predictive,
    observed: &Observation,
    now: Timestamp,
) {
    let keep = keep_seconds(settings);
    for m in metrics_of(spec).iter() {
        if let Some(load) = observed_load(m, spec, observed) {
            series.record(&metric_name(m), now, load, keep);
        }
    }
}

/// The forecast of every metric and the replicas the confident ones need (module docs).
pub fn forecast(input: &ForecastInput<'_>) -> Forecast {
    let settings = input.settings;
    let step = input.series.step_seconds();
    let lead = lead_seconds(settings, input.startup_seconds, step);
    if settings.mode == PredictiveMode::Off {
        return Forecast {
            metrics: Vec::new(),
            replicas: None,
            lead_seconds: lead,
            reason: PredictiveReason::Off,
            message: "predictive scaling is off".into(),
        };
    }
    let (season, n) = seasons(settings);
    let from = input.series.bucket_of(input.now.as_second());
    let to = input.series.bucket_of(
        input
            .now
            .as_second()
            .saturating_add(lead)
            .saturating_add(step),
    );
    let metrics: Vec<MetricForecast> = metrics_of(input.spec)
        .iter()
        .map(|m| {
            let name = metric_name(m);
            let spans_a_season = input
                .series
                .oldest(&name)
                .is_some_and(|o| (from - o) * step >= season);
            let peak = spans_a_season
                .then(|| seasonal_peak(input.series, &name, from, to, season, n))
                .flatten();
            let error_percent = spans_a_season
                .then(|| recent_error_percent(input.series, &name, settings, input.now))
                .flatten();
            let replicas = peak.and_then(|l| {
                replicas_for_load(m, l, input.spec, input.pod, input.config, input.now).ok()
            });
            MetricForecast {
                confident: replicas.is_some()
                    && error_percent.is_some_and(|e| e <= MAX_ERROR_PERCENT),
                metric: name,
                load: peak,
                replicas,
                error_percent,
            }
        })
        .collect();
    let replicas = metrics
        .iter()
        .filter(|m| m.confident)
        .filter_map(|m| m.replicas)
        .max();
    let (reason, message) = explain(&metrics, replicas, season, lead);
    Forecast {
        metrics,
        replicas,
        lead_seconds: lead,
        reason,
        message,
    }
}

/// The reason and sentence of a forecast: the first metric's trouble when none is confident.
fn explain(
    metrics: &[MetricForecast],
    replicas: Option<i32>,
    season: i64,
    lead: i64,
) -> (PredictiveReason, String) {
    if let Some(r) = replicas {
        return (
            PredictiveReason::BelowReactive,
            format!("the load forecast for the next {lead}s needs {r} replicas"),
        );
    }
    let Some(m) = metrics.first() else {
        return (PredictiveReason::NoMetrics, "no metric to forecast".into());
    };
    let name = &m.metric;
    match (m.load, m.error_percent, m.replicas) {
        (None, _, _) | (_, None, _) => (
            PredictiveReason::NotEnoughHistory,
            format!(
                "{name} has less than one season ({}h) of history, or no recent forecast to \
                 check; no prediction",
                season / 3600
            ),
        ),
        (Some(_), _, None) => (
            PredictiveReason::NoMetrics,
            format!("cannot compute the replicas the forecast of {name} needs"),
        ),
        (Some(_), Some(e), Some(_)) => (
            PredictiveReason::LargeError,
            format!(
                "the recent forecasts of {name} were {e:.0}% off (more than \
                 {MAX_ERROR_PERCENT:.0}%); no prediction"
            ),
        ),
    }
}

/// Everything [`raise`] reads.
#[derive(Clone, Copy, Debug)]
pub struct RaiseInput<'a> {
    /// The autoscaler's spec.
    pub spec: &'a HorizontalPodAutoscalerPlusSpec,
    /// The settings in force.
    pub settings: &'a Predictive,
    /// The observation the reactive decision was made on.
    pub observed: &'a Observation,
    /// The controller's flags.
    pub config: &'a ControllerConfig,
    /// The reactive decision ([`super::decide`]).
    pub decision: &'a Decision,
    /// The forecast.
    pub forecast: &'a Forecast,
    /// The evaluation time.
    pub now: Timestamp,
}

/// The final decision: the reactive one, or raised by the prediction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Raise {
    /// The replicas to write (the reactive `scale_to` unless the prediction raised it).
    pub scale_to: Option<i32>,
    /// The desired replicas (the reactive ones unless raised).
    pub desired_replicas: i32,
    /// The prediction raised the replicas above the reactive decision.
    pub acting: bool,
    /// Why.
    pub reason: PredictiveReason,
    /// A sentence a person can read.
    pub message: String,
}

/// `max(reactive, predicted)` for scale-up only (step 5 of the module docs).
pub fn raise(input: &RaiseInput<'_>) -> Raise {
    let d = input.decision;
    let fc = input.forecast;
    let keep = |reason, message: String| Raise {
        scale_to: d.scale_to,
        desired_replicas: d.desired_replicas,
        acting: false,
        reason,
        message,
    };
    let Some(predicted) = fc.replicas else {
        return keep(fc.reason, fc.message.clone());
    };
    let reactive = d.desired_replicas;
    let current = d.current_replicas;
    if predicted <= reactive {
        return keep(
            PredictiveReason::BelowReactive,
            format!(
                "{}; the reactive decision ({reactive}) covers it",
                fc.message
            ),
        );
    }
    match input.settings.mode {
        PredictiveMode::Off => return keep(PredictiveReason::Off, fc.message.clone()),
        PredictiveMode::Report => {
            return keep(
                PredictiveReason::Reported,
                format!(
                    "{}; would scale {current} -> {predicted} (Report)",
                    fc.message
                ),
            );
        }
        PredictiveMode::Scale => {}
    }
    let spec = input.spec;
    let bounds = Bounds::of(spec);
    let mut target = predicted.min(bounds.max);
    let mut limited = String::new();
    if target > current {
        let rate = rate_limit(&RateInput {
            current,
            desired: target,
            bounds,
            behavior: spec.behavior.as_ref(),
            downscale_stabilization_seconds: input.config.downscale_stabilization_seconds,
            factors: LimitFactors::for_spec(spec, input.config),
            history: &d.history,
            now: input.now,
        });
        if let Some(limit) = rate.limit.filter(|l| l.value < target) {
            target = limit.value;
            limited = format!(", limited to {target}: {}", limit.note);
        }
        let windows =
            forbidden_windows(spec, d.history.last_scale_time, current, target, input.now);
        if windows.blocked.is_some() {
            target = current;
            limited = ", held by the upscale forbidden window".into();
        }
    }
    if target <= reactive {
        return keep(
            PredictiveReason::BelowReactive,
            format!(
                "{}; a scale-up rule holds it at the reactive decision",
                fc.message
            ),
        );
    }
    let message = format!(
        "{}; raises the reactive {reactive} to {target}{limited}",
        fc.message
    );
    let scale_to = (target != current).then_some(target);
    match scale_to.and_then(|to| write_gate(spec, input.observed, current, to)) {
        Some(gate) => Raise {
            scale_to: None,
            desired_replicas: gate.desired.max(reactive),
            acting: false,
            reason: PredictiveReason::Raised,
            message: format!("{message}; not applied: {}", gate.why),
        },
        None => Raise {
            scale_to,
            desired_replicas: target,
            acting: true,
            reason: PredictiveReason::Raised,
            message,
        },
    }
}

/// Formats milli-units as a quantity (`12500m`, or whole units when exact).
fn quantity(milli: i64) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

/// `status.predictive` after a forecast and the raise it led to.
pub fn predictive_status(forecast: &Forecast, raised: &Raise) -> PredictiveStatus {
    let loads: Vec<String> = forecast
        .metrics
        .iter()
        .filter_map(|m| m.load.map(|l| format!("{}: {}", m.metric, quantity(l))))
        .collect();
    let error = forecast
        .metrics
        .iter()
        .filter_map(|m| m.error_percent)
        .fold(None, |acc: Option<f64>, e| {
            Some(acc.map_or(e, |a| a.max(e)))
        });
    PredictiveStatus {
        forecast: (!loads.is_empty()).then(|| loads.join(", ")),
        forecast_replicas: forecast.replicas,
        // Whole percent: enough to read, and stable so the status is not rewritten for noise.
        recent_error_percent: error.map(|e| e.round().min(f64::from(i32::MAX)) as i32),
        acting: raised.acting,
        reason: raised.reason.as_str().to_owned(),
        message: raised.message.clone(),
        // The controller adds the series it keeps; the replay keeps it in memory only.
        history: None,
    }
}

#[cfg(test)]
mod tests;
