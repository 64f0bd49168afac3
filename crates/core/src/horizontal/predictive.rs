//! `spec.predictive`: scale up before a recurring rush arrives, from the metric's own past
//! ([`forecast`]), and never scale down on a prediction alone ([`raise`]).
//!
//! The model (docs/hpa-plus.md, "Predictive scaling") is a seasonal median, chosen because a
//! reviewer can recompute it by hand from the history:
//! 1. **History.** Per metric, the load as [`super::tuning::observed_load`] records it (the
//!    workload-wide amount), kept in a [`LoadSeries`] of fixed-width buckets: each bucket's
//!    highest value and its mean (the *level*; where no mean is known, from Prometheus's
//!    peaks or a status written before means were kept, the peak stands in), for as many
//!    seasons as the forecast reads plus one ([`keep_seconds`]).
//! 2. **Season** ([`fit`], redone when a bucket ends). `24h` and `168h` are taken as given;
//!    `auto` (the default) compares, on the last [`FIT_DAYS`] days of buckets, the error of
//!    forecasting each bucket from the same time on past days and from the same time on past
//!    weeks, and keeps the smaller; the week is a candidate once the history spans two weeks.
//! 3. **Forecast.** At `now`, with `lead` seconds of look-ahead, the window is the buckets
//!    from `now` to `now + lead`. For each of the `n` past seasons (`lookbackDays` days, or
//!    `lookbackDays / 7` weeks, at least one) the same window gives that season's highest
//!    level; the forecast is their median ([`median`]): one unusual day neither adds a rush
//!    nor hides one, and it sits where as many past seasons were above as below. Not a high
//!    quantile: an under-forecast is what the reactive path corrects within its lag, an
//!    over-forecast costs replicas for the whole window; the measured cost of the old
//!    second-highest-of-seven was 11–26 % more replica-hours.
//! 4. **Replicas.** The forecast load becomes replicas through the controller's own metric
//!    calculation on one pod carrying it ([`super::tuning::replicas_for_load`], the same
//!    conversion `minReplicasTuning` uses); the prediction is the largest over the confident
//!    metrics.
//! 5. **Trust** ([`phase_check`]). A metric forecasts nothing (`NotEnoughHistory`)
//!    until the same window in a past season can be checked: forecast from the seasons before
//!    it, against the level it then had. The error, `Σ |actual − forecast| / Σ actual` over
//!    the past seasons' windows, is measured where it matters: at this time of the day (or
//!    week), over the window that holds the coming rise, not over the last hours (which, on
//!    a quiet night before a morning rush, say nothing about the rush). Above
//!    [`MAX_ERROR_PERCENT`] the metric forecasts nothing (`LargeError`). And a small error is
//!    not enough: on the same past windows the check ([`phase_check`]) adds up the load the
//!    forecasts had ready ahead of the rises that came (above the level of the bucket before,
//!    which is what the reactive path had sized for) and the load they would have held for
//!    nothing. The first is worth the reactive path's lag (the pods' startup and a sync
//!    period), the second costs the window and the scale-down stabilization that keeps a
//!    raise; when the second outweighs the first ([`PhaseCheck::worth_it`]) the metric
//!    forecasts nothing (`CostsMore`). On traffic whose rises come at random hours the
//!    window's peak over past days is always above the current level, and acting on it would
//!    only buy headroom at the price of a forecast.
//! 6. **Acting** ([`raise`], `Scale` only, after the reactive [`super::decide`]): when the
//!    predicted replicas exceed the reactive decision, the target is the prediction, through
//!    the same scale-up rate limit (`behavior.scaleUp` policies, `scaleUpLimitFactor`, or the
//!    default doubling), `maxReplicas`, the upscale forbidden window and the write gates
//!    (paused, dry run, CronHPA hold, rollout) the reactive path obeys. Below the current count
//!    it only softens a reactive scale-down. It never lowers what the reactive path chose.
//!
//! `leadSeconds: auto` is the pods' measured startup time (creation to Ready) plus one step
//! ([`lead_seconds`]), so the last scale-up that the forecast triggers has its pods Ready a
//! bucket before the rush's first bucket begins.
//!
//! Pure: no clock, no I/O. The controller and `hpa-plus replay` call the same functions.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::Serialize;

use super::behavior::scale_down_rules;
use super::config::ControllerConfig;
use super::decision::Decision;
use super::gates::write_gate;
use super::limits::{Bounds, LimitFactors, RateInput, forbidden_windows, rate_limit};
use super::observation::{Observation, PodSample};
use super::offsets::flatten;
pub use super::peak_series::stored_bytes;
use super::peak_series::{PeakSeries, Restore, StoredPeakSeries, retain_newest, stored_base};
use super::proposals::{metric_name, metrics_of};
use super::tuning::{observed_load, replicas_for_load};
use crate::api::hpa_plus::{
    HorizontalPodAutoscalerPlusSpec, LeadSeconds, Predictive, PredictiveMode, PredictiveStatus,
    Season,
};
use crate::stored::StoredStateError;

/// Above this error (percent of the load) of the past seasons' forecasts of the same window the
/// forecast is not trusted.
pub const MAX_ERROR_PERCENT: f64 = 50.0;

/// A compact per-metric load series: the highest value seen in each `step`-second bucket (a
/// [`PeakSeries`]), and the sum and count of the values seen in it (their mean is the bucket's
/// level).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadSeries {
    /// Per metric: each bucket's highest value in milli-units.
    peaks: PeakSeries,
    /// Per metric: `(bucket, sum of the values, how many)`, oldest first; a bucket that is not
    /// here (read from Prometheus's peaks, or from a status written before means were kept)
    /// has no known mean and its peak stands in for it.
    sums: BTreeMap<String, Vec<(i64, i64, i64)>>,
}

impl LoadSeries {
    /// An empty series with buckets of `step_seconds` (at least 1).
    pub fn new(step_seconds: i64) -> Self {
        Self {
            peaks: PeakSeries::new(step_seconds),
            sums: BTreeMap::new(),
        }
    }

    /// The bucket width, seconds.
    pub fn step_seconds(&self) -> i64 {
        self.peaks.step_seconds()
    }

    fn bucket_of(&self, second: i64) -> i64 {
        self.peaks.bucket_of(second)
    }

    /// The buckets [`Self::record`] keeps for `keep_seconds`: those up to `keep_seconds` before
    /// the newest, and the newest.
    pub fn keep_buckets(&self, keep_seconds: i64) -> i64 {
        keep_seconds.max(0) / self.step_seconds() + 1
    }

    /// The peaks alone, to backfill from Prometheus's peaks (buckets with no known mean).
    pub fn peaks_mut(&mut self) -> &mut PeakSeries {
        &mut self.peaks
    }

    /// Records `value` (milli) of `metric` at `at`, keeping `keep_seconds` before the newest
    /// bucket.
    pub fn record(&mut self, metric: &str, at: Timestamp, value: i64, keep_seconds: i64) {
        let keep = self.keep_buckets(keep_seconds);
        self.peaks.record(metric, at, value, keep);
        let bucket = self.peaks.bucket_at(at);
        let newest = self.peaks.newest(metric).unwrap_or(bucket);
        let sums = self.sums.entry(metric.to_owned()).or_default();
        let i = sums.partition_point(|(b, _, _)| *b < bucket);
        match sums.get_mut(i) {
            Some((b, sum, n)) if *b == bucket => {
                *sum = sum.saturating_add(value);
                *n = n.saturating_add(1);
            }
            _ => sums.insert(i, (bucket, value, 1)),
        }
        retain_newest(sums, newest, keep, |(b, _, _)| *b);
    }

    /// The level of `metric` in `bucket`: the mean of the values recorded in it, else (no
    /// mean known) its peak.
    fn level(&self, metric: &str, bucket: i64) -> Option<i64> {
        let mean = self.sums.get(metric).and_then(|list| {
            let i = list.binary_search_by_key(&bucket, |(b, _, _)| *b).ok()?;
            let (_, sum, n) = list[i];
            (n > 0).then(|| sum / n)
        });
        mean.or_else(|| self.peaks.at(metric, bucket))
    }

    /// The highest level of `metric` in buckets `from..=to`.
    fn level_peak(&self, metric: &str, from: i64, to: i64) -> Option<i64> {
        let list = self.peaks.points(metric);
        let start = list.partition_point(|(b, _)| *b < from);
        list[start..]
            .iter()
            .take_while(|(b, _)| *b <= to)
            .filter_map(|(b, _)| self.level(metric, *b))
            .max()
    }

    /// The value of `metric` in `bucket`, if one was recorded.
    #[cfg(test)]
    fn at(&self, metric: &str, bucket: i64) -> Option<i64> {
        self.peaks.at(metric, bucket)
    }

    /// The oldest bucket of `metric`.
    pub fn oldest(&self, metric: &str) -> Option<i64> {
        self.peaks.oldest(metric)
    }

    /// The newest bucket of `metric`.
    pub fn newest(&self, metric: &str) -> Option<i64> {
        self.peaks.newest(metric)
    }

    /// The bucket `at` falls in (seconds since the Unix epoch over the step).
    pub fn bucket_at(&self, at: Timestamp) -> i64 {
        self.peaks.bucket_at(at)
    }

    /// The buckets recorded for `metric`, `(bucket, highest value in milli-units)`, oldest
    /// first.
    pub fn points(&self, metric: &str) -> &[(i64, i64)] {
        self.peaks.points(metric)
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
            peaks: self.peaks.before(open),
            sums: self
                .sums
                .iter()
                .map(|(name, list)| {
                    let end = list.partition_point(|(b, _, _)| *b < open);
                    (name.clone(), list[..end].to_vec())
                })
                .filter(|(_, list)| !list.is_empty())
                .collect(),
        }
    }

    /// Forgets every metric's buckets before `first`.
    fn forget_before(&mut self, first: i64) {
        self.peaks.forget_before(first);
        for list in self.sums.values_mut() {
            let stale = list.partition_point(|(b, _, _)| *b < first);
            list.drain(..stale);
        }
        self.sums.retain(|_, list| !list.is_empty());
    }

    /// Forgets the oldest buckets of every metric, all from the same bucket on, until the
    /// stored form of the buckets ended at `now` takes at most `bytes` of JSON; `true` when it
    /// forgot any. The bucket bound ([`keep_seconds_for`]) holds the count, not the bytes: a
    /// value takes 1 to 20 digits, so the same buckets take from 6 KB to 168 KB a metric.
    /// Forgetting here, in the series itself, keeps what the controller forecasts from equal
    /// to what a successor reads back.
    pub fn fit_stored(&mut self, now: Timestamp, bytes: usize) -> bool {
        let open = self.bucket_of(now.as_second());
        let size = |s: &Self| stored_bytes(&s.ended(now).store());
        if size(self) <= bytes {
            return false;
        }
        let Some(oldest) = self.peaks.metrics().filter_map(|m| self.oldest(m)).min() else {
            return false;
        };
        // From `too_much` on the stored form is over `bytes`; from `fits` on (the open bucket:
        // nothing ended) it is not. Each halving stores the series once.
        let (mut too_much, mut fits) = (oldest, open);
        while fits - too_much > 1 {
            let mid = too_much + (fits - too_much) / 2;
            let mut shorter = self.clone();
            shorter.forget_before(mid);
            if size(&shorter) <= bytes {
                fits = mid;
            } else {
                too_much = mid;
            }
        }
        self.forget_before(fits);
        true
    }

    /// The newest ended bucket over all metrics at `now` (what a [`Fit`] is made through).
    pub fn newest_ended(&self, now: Timestamp) -> Option<i64> {
        self.peaks.newest_before(self.bucket_of(now.as_second()))
    }

    /// The stored form (the docs of [`StoredPeakSeries`]): the peaks, and the means of the
    /// buckets from the base on.
    pub fn store(&self) -> StoredPeakSeries {
        let mut stored = self.peaks.store();
        let Some(base) = stored.base_bucket else {
            return stored;
        };
        stored.means = self
            .sums
            .iter()
            .filter(|(_, list)| !list.is_empty())
            .map(|(name, list)| {
                let pairs = list
                    .iter()
                    .filter(|(b, _, _)| *b >= base)
                    .map(|(b, sum, n)| (*b, sum / (*n).max(1)));
                (name.clone(), flatten(base, pairs))
            })
            .collect();
        stored
    }

    /// Adds the bucket means of `stored` (its `means`, counted from its base) to a series
    /// restored from it: each as one sample, for buckets the series has a peak for. A list
    /// that breaks the stored form's rules (odd length, offsets that do not increase,
    /// positions out of range) is left out whole: those buckets' peaks stand in for their
    /// means, as for a status written before means were kept.
    pub fn restore_means(&mut self, stored: &StoredPeakSeries) {
        let Some(base) = stored_base(stored) else {
            return;
        };
        for (name, flat) in &stored.means {
            let peaks = self.peaks.points(name);
            if peaks.is_empty() {
                continue;
            }
            if flat.len() % 2 != 0 || flat.len() / 2 > peaks.len() {
                continue;
            }
            let mut list: Vec<(i64, i64, i64)> = Vec::with_capacity(flat.len() / 2);
            let mut position = base;
            let mut valid = true;
            for pair in flat.chunks_exact(2) {
                match position.checked_add(pair[0]) {
                    Some(p) if list.last().is_none_or(|(b, _, _)| *b < p) => {
                        position = p;
                        list.push((p, pair[1], 1));
                    }
                    _ => {
                        valid = false;
                        break;
                    }
                }
            }
            list.retain(|(b, _, _)| peaks.binary_search_by_key(b, |(pb, _)| *pb).is_ok());
            if valid && !list.is_empty() {
                self.sums.insert(name.clone(), list);
            }
        }
    }

    /// The series `stored` stands for, with buckets of `step_seconds`, or why it cannot be read
    /// back ([`crate::stored`]'s rules, [`PeakSeries::try_restore`]): the same step (buckets of
    /// another width would mean other times; a stored form always carries its step), at most
    /// [`MAX_METRICS`](crate::stored::MAX_METRICS) metrics of at most
    /// [`max_buckets`]`(step)` buckets each (what [`Self::record`] keeps for the longest
    /// settings), buckets strictly increasing from `baseBucket` and inside the time range, any
    /// `i64` value (the loads the controller records are any `i64`). The means are added by
    /// [`Self::restore_means`].
    pub fn try_restore(
        stored: &StoredPeakSeries,
        step_seconds: i64,
    ) -> Result<Self, StoredStateError> {
        let how = Restore {
            step_seconds,
            absent_step_seconds: 0,
            max_buckets: max_buckets(step_seconds.max(1)),
            step_field: "history.stepSeconds",
            base_field: "history.baseBucket",
            metrics_field: "history.metrics",
        };
        PeakSeries::try_restore(stored, &how).map(|peaks| Self {
            peaks,
            sums: BTreeMap::new(),
        })
    }

    /// The metrics recorded, by name.
    pub fn metrics(&self) -> impl Iterator<Item = &str> {
        self.peaks.metrics()
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

/// The most JSON bytes one metric's stored list takes with 15-minute buckets and 8 days kept
/// (the default 7-day lookback of a daily season, plus the season the error check reads):
/// 769 pairs of at most 4 + 21 bytes, brackets, quotes, a colon, a name of up to 253 bytes and
/// the separating comma.
pub const BOUND_BYTES_PER_METRIC_7_DAYS: usize = 769 * (4 + 21) + 2 + 253 + 4;

/// The median of `values`: the middle one, or the mean of the two middle ones (rounded
/// toward zero) for an even count; `None` when empty.
pub fn median(values: &[i64]) -> Option<i64> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    let hi = *sorted.get(n / 2)?;
    if n % 2 == 1 {
        return Some(hi);
    }
    // Rounded toward zero, without overflow.
    Some(i64::midpoint(sorted[n / 2 - 1], hi))
}

/// A day, seconds.
pub const DAY_SECONDS: i64 = 24 * 3600;

/// A week, seconds.
pub const WEEK_SECONDS: i64 = 7 * DAY_SECONDS;

/// The seasons `settings` lets the forecast use, each `(length in seconds, how many of them
/// the forecast reads)`: a day over `lookbackDays` days, a week over `lookbackDays / 7` weeks
/// (at least one), or with `season: auto` both (the fit picks one per metric).
pub fn candidates(settings: &Predictive) -> Vec<(i64, usize)> {
    let days = usize::try_from(settings.lookback_days())
        .unwrap_or(7)
        .max(1);
    let daily = (DAY_SECONDS, days);
    let weekly = (WEEK_SECONDS, (days / 7).max(1));
    match settings.season {
        Season::Day => vec![daily],
        Season::Week => vec![weekly],
        Season::Auto => vec![daily, weekly],
    }
}

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

/// When one pod started and became Ready, for [`startup_seconds`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodStart {
    /// `metadata.creationTimestamp`, else `status.startTime`.
    pub started: Option<Timestamp>,
    /// The Ready condition's last transition, for a pod that is Ready and not being deleted;
    /// `None` otherwise.
    pub ready_at: Option<Timestamp>,
}

/// The workload's measured startup time, seconds: the median (the higher middle of an even
/// count, the longer lead) of start to Ready over the [`STARTUP_SAMPLES`] pods that became
/// Ready most recently; `None` when no pod can be measured.
pub fn startup_seconds(pods: impl IntoIterator<Item = PodStart>) -> Option<i64> {
    let mut measured: Vec<(Timestamp, i64)> = pods
        .into_iter()
        .filter_map(|p| {
            let ready = p.ready_at?;
            let seconds = ready.as_second().checked_sub(p.started?.as_second())?;
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

/// The look-ahead in seconds: `leadSeconds`, or with `auto` the pods' measured startup time
/// (creation to Ready, seconds) plus one step.
pub fn lead_seconds(settings: &Predictive, startup_seconds: i64, step_seconds: i64) -> i64 {
    match settings.lead_seconds {
        LeadSeconds::Auto => startup_seconds.max(0).saturating_add(step_seconds.max(0)),
        LeadSeconds::Seconds(n) => n.max(0),
    }
}

/// How long a [`LoadSeries`] must keep samples for `settings`: for each candidate season, the
/// seasons the forecast reads plus one more (the forecast of the past season's same window,
/// and the fit's comparison of seasons, read that far back).
pub fn keep_seconds(settings: &Predictive) -> i64 {
    candidates(settings)
        .iter()
        .map(|&(season, n)| season.saturating_mul(i64::try_from(n).unwrap_or(1).saturating_add(1)))
        .max()
        .unwrap_or(8 * DAY_SECONDS)
}

/// The most buckets of [`BUCKET_SECONDS`] one autoscaler's metrics keep together: four metrics
/// at the longest settings (13,444). The metrics are the autoscaler author's (up to 32), and each
/// kept bucket is a peak and a level in memory and in `status.predictive.history`: 32 metrics of
/// 30 days with a weekly season were 107,552 buckets, a status past etcd's 1.5 MiB (every write
/// refused, every period) and megabytes of the controller's memory per object.
pub const MAX_BUCKETS_PER_OBJECT: i64 = 4 * (MAX_KEEP_SECONDS / BUCKET_SECONDS + 1);

/// The most JSON bytes a native HPA's `status.predictive.history` may take in its
/// [`STATUS_ANNOTATION`] ([`LoadSeries::fit_stored`]). An object's annotations may hold 256 KiB
/// together, and the owner's own, the decision memory and the tuning status share them. The
/// bucket bound alone ([`MAX_BUCKETS_PER_OBJECT`]) let three metrics of large values (bytes of
/// memory, in milli) at the longest settings take over 300 KB, and every write of the
/// annotation was refused. An HPA+ keeps its history in its status, where the bucket bound
/// keeps it within etcd's 1.5 MiB.
pub const NATIVE_HISTORY_BYTES: usize = 128 * 1024;

/// [`keep_seconds`] for an autoscaler with `metrics` metrics: shortened, when its metrics would
/// keep more than [`MAX_BUCKETS_PER_OBJECT`] buckets together, to their share. A metric kept
/// shorter than its seasons need forecasts from the seasons it holds, or not at all
/// (`NotEnoughHistory`).
pub fn keep_seconds_for(settings: &Predictive, metrics: usize) -> i64 {
    let share = MAX_BUCKETS_PER_OBJECT / i64::try_from(metrics.max(1)).unwrap_or(i64::MAX);
    keep_seconds(settings).min((share - 1).max(0) * BUCKET_SECONDS)
}

/// The seasonal forecast of the level of `metric` in buckets `from..=to`, `shift` buckets
/// (one season) apart: the median, over the up to `n` seasons before the window that the
/// series holds whole, of the window's highest level in that season. `None` when none does.
/// A season whose window begins before the oldest bucket is left out: the part it holds
/// would understate the window's peak.
fn seasonal_level(
    series: &LoadSeries,
    metric: &str,
    (from, to): (i64, i64),
    shift: i64,
    n: usize,
) -> Option<i64> {
    let oldest = series.oldest(metric)?;
    let levels: Vec<i64> = (1..=i64::try_from(n).unwrap_or(1))
        .filter_map(|k| {
            let back = k.checked_mul(shift)?;
            let start = from.checked_sub(back)?;
            if start < oldest {
                return None;
            }
            series.level_peak(metric, start, to.checked_sub(back)?)
        })
        .collect();
    median(&levels)
}

/// One metric's fit: the season its forecast repeats, chosen on the history.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SeasonFit {
    /// The season, seconds.
    pub season_seconds: i64,
    /// How many past seasons the forecast reads.
    pub seasons: usize,
    /// The season's error over the last [`FIT_DAYS`] days of buckets, percent of the load
    /// (each bucket forecast from the seasons before it); `None` when none could be checked.
    pub error_percent: Option<f64>,
}

/// How many days of buckets the fit compares the seasons on.
pub const FIT_DAYS: i64 = 7;

/// What [`fit`] chose for each metric, from the series' buckets up to `through`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fit {
    /// The newest ended bucket the fit read (a fit is redone when it changes).
    pub through: Option<i64>,
    /// Per metric.
    pub metrics: BTreeMap<String, SeasonFit>,
}

/// The error (percent of the load) of season `(season, n)` of `metric` over the buckets of the
/// last [`FIT_DAYS`] days up to `through`: `Σ |actual − forecast| / Σ actual`, each bucket's
/// level against the median of its level in the `n` seasons before it. `None` when no bucket
/// has both.
fn season_error(
    series: &LoadSeries,
    metric: &str,
    (season, n): (i64, usize),
    through: i64,
) -> Option<f64> {
    let step = series.step_seconds();
    let shift = season / step;
    let first = through.saturating_sub(FIT_DAYS * DAY_SECONDS / step) + 1;
    let back = shift.saturating_mul(i64::try_from(n).unwrap_or(1));
    let levels = Levels::between(series, metric, first.saturating_sub(back), through);
    let (mut error, mut total) = (0i128, 0i128);
    let mut past = Vec::with_capacity(n);
    for bucket in first..=through {
        let Some(actual) = series.level(metric, bucket) else {
            continue;
        };
        // `seasonal_level` of the one-bucket window, read from `levels` (a one-bucket window
        // is never held in part, so there is no oldest bucket to check).
        past.clear();
        past.extend(
            (1..=i64::try_from(n).unwrap_or(1))
                .filter_map(|k| bucket.checked_sub(k.checked_mul(shift)?))
                .filter_map(|start| levels.at(start)),
        );
        let Some(forecast) = median(&past) else {
            continue;
        };
        error += (i128::from(actual) - i128::from(forecast)).abs();
        total += i128::from(actual).abs();
    }
    (total > 0).then(|| error as f64 * 100.0 / total as f64)
}

/// One metric's levels in buckets `first..=last`, by bucket: the fit reads each bucket of a
/// week at each of `n` past seasons, and a search of the series per read was most of its
/// cost. The span is the fit's week plus the seasons it reads back (at most 30 days or 4
/// weeks: `lookbackDays` is at most 30), so it is bounded whatever the series holds.
struct Levels {
    first: i64,
    /// The level of each bucket the peaks hold ([`LoadSeries::level_peak`] of that bucket).
    by_bucket: Vec<Option<i64>>,
}

impl Levels {
    fn between(series: &LoadSeries, metric: &str, first: i64, last: i64) -> Self {
        let len = usize::try_from(last.saturating_sub(first).saturating_add(1)).unwrap_or(0);
        let mut by_bucket = vec![None; len];
        let points = series.points(metric);
        let start = points.partition_point(|(b, _)| *b < first);
        for &(bucket, _) in points[start..].iter().take_while(|(b, _)| *b <= last) {
            if let Some(slot) = usize::try_from(bucket - first)
                .ok()
                .and_then(|i| by_bucket.get_mut(i))
            {
                *slot = series.level(metric, bucket);
            }
        }
        Self { first, by_bucket }
    }

    fn at(&self, bucket: i64) -> Option<i64> {
        let i = usize::try_from(bucket.checked_sub(self.first)?).ok()?;
        self.by_bucket.get(i).copied().flatten()
    }
}

/// Chooses each metric's season (module docs, step 2): with one candidate that one; with
/// `auto`, the week only when the history spans two weeks (one to forecast from, one to check)
/// and its error over the last [`FIT_DAYS`] days is below the day's.
pub fn fit(series: &LoadSeries, settings: &Predictive, now: Timestamp) -> Fit {
    let through = series.newest_ended(now);
    let mut metrics = BTreeMap::new();
    let Some(last) = through else {
        return Fit { through, metrics };
    };
    let step = series.step_seconds();
    for name in series.metrics() {
        let spans = |season: i64| {
            series
                .oldest(name)
                .is_some_and(|o| (last.saturating_sub(o) + 1).saturating_mul(step) >= 2 * season)
        };
        let mut best: Option<SeasonFit> = None;
        let candidates = candidates(settings);
        for &(season, n) in &candidates {
            if candidates.len() > 1 && season > DAY_SECONDS && !spans(season) {
                continue;
            }
            let error_percent = season_error(series, name, (season, n), last);
            let better = match (&best, error_percent) {
                (None, _) => true,
                (Some(b), Some(e)) => b.error_percent.is_none_or(|be| e < be),
                (Some(_), None) => false,
            };
            if better {
                best = Some(SeasonFit {
                    season_seconds: season,
                    seasons: n,
                    error_percent,
                });
            }
        }
        if let Some(b) = best {
            metrics.insert(name.to_owned(), b);
        }
    }
    Fit { through, metrics }
}

/// What forecasting `metric`'s window `from..=to` did at the same phase of the past seasons
/// ([`phase_check`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseCheck {
    /// `Σ |actual − forecast| / Σ actual`, percent; `None` when no past window could be
    /// checked.
    pub error_percent: Option<f64>,
    /// The load (milli) the forecasts had ready ahead of the rises that came: per past window,
    /// `min(actual, forecast) − before` where positive, `before` being the level of the bucket
    /// before the window (what the reactive path had sized for).
    pub ahead: i128,
    /// The load (milli) the forecasts would have provisioned for nothing: per past window,
    /// `forecast − max(actual, before)` where positive.
    pub unneeded: i128,
}

impl PhaseCheck {
    /// Whether acting on the forecast earned its cost at this phase: the replica-time it
    /// would have had ready ahead of rises (`ahead`, for `lag_seconds`: the reactive path
    /// catches up with a rise after the pods' startup and a sync period) is at least the
    /// replica-time it would have held for nothing (`unneeded`, for `hold_seconds`: the
    /// window, then the scale-down stabilization that keeps a raise). Both priced alike: a
    /// forecast is trusted when it pays for itself in replicas, before counting what an
    /// overload costs the service, unless its owner weighs the overload higher. No rise and
    /// no waste (a flat phase) is worth it.
    ///
    /// `overload_weight` (`spec.predictive.overloadWeight`, at least 1) is what the owner says
    /// a replica-second of overload is worth against one held for nothing.
    pub fn worth_it(&self, lag_seconds: i64, hold_seconds: i64, overload_weight: i32) -> bool {
        self.ahead
            .saturating_mul(i128::from(lag_seconds.max(1)))
            .saturating_mul(i128::from(overload_weight.max(1)))
            >= self
                .unneeded
                .saturating_mul(i128::from(hold_seconds.max(1)))
    }
}

/// The forecasts of `metric`'s window `from..=to` at the same phase of the past seasons: for
/// each season k = 1 … n back that the series holds, that season's window forecast from the
/// seasons before it, against the level it then had (the error) and against the level just
/// before it (the rise it had ready, or the load it held for nothing). The window holds the
/// coming rise, so this is the check where it matters.
pub fn phase_check(
    series: &LoadSeries,
    metric: &str,
    (from, to): (i64, i64),
    (season, n): (i64, usize),
) -> PhaseCheck {
    let shift = season / series.step_seconds();
    let (mut error, mut total) = (0i128, 0i128);
    let mut check = PhaseCheck::default();
    for k in 1..=i64::try_from(n).unwrap_or(1) {
        let back = k.saturating_mul(shift);
        let window = (from.saturating_sub(back), to.saturating_sub(back));
        let Some(actual) = series.level_peak(metric, window.0, window.1) else {
            continue;
        };
        let Some(forecast) = seasonal_level(series, metric, window, shift, n) else {
            continue;
        };
        let (actual, forecast) = (i128::from(actual), i128::from(forecast));
        error += (actual - forecast).abs();
        total += actual.abs();
        if let Some(before) = series.level(metric, window.0.saturating_sub(1)) {
            let before = i128::from(before);
            check.ahead += (actual.min(forecast) - before).max(0);
            check.unneeded += (forecast - actual.max(before)).max(0);
        }
    }
    check.error_percent = (total > 0).then(|| error as f64 * 100.0 / total as f64);
    check
}

/// A native HPA's `status.predictive` (its status has no field for it), as JSON.
pub const STATUS_ANNOTATION: &str = "plimsoll.dev/predictive-status";

/// The predictive status a native HPA carries in its [`STATUS_ANNOTATION`]: `Ok(None)` when
/// absent, an error when unreadable (prediction then starts over, as with no history, and says
/// so).
pub fn status_from_annotations(
    annotations: &BTreeMap<String, String>,
) -> Result<Option<PredictiveStatus>, StoredStateError> {
    crate::stored::annotation(annotations, STATUS_ANNOTATION)
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
    /// At this time of past seasons, acting on the forecast would have held more replica-time
    /// for nothing than it had ready ahead of rises ([`PhaseCheck::worth_it`]).
    CostsMore,
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
            Self::CostsMore => "CostsMore",
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
    /// The season chosen for each metric ([`fit`] of `series` at `now`); `None`: fitted here.
    /// A caller that evaluates often keeps the fit until a bucket ends.
    pub fit: Option<&'a Fit>,
    /// What an earlier forecast from this same `series` read from it ([`forecast_reading`]);
    /// a read whose metric, window and season match is used again instead of being read
    /// anew. Empty: everything is read. A caller that evaluates often keeps the reads until
    /// a bucket ends, as it keeps the fit: within a bucket the window and the ended buckets
    /// stay the same, and reading them was most of what a forecast cost.
    pub reads: &'a [SeasonalRead],
}

/// What the forecast of one metric read from the history: the seasonal level of its window
/// and the check of that window at the same phase of past seasons. A function of the series,
/// the metric, the window and the season alone.
#[derive(Clone, Debug, PartialEq)]
pub struct SeasonalRead {
    metric: String,
    window: (i64, i64),
    season: (i64, usize),
    level: Option<i64>,
    check: PhaseCheck,
}

impl SeasonalRead {
    /// Reads `metric`'s `window` at `season` from `series`.
    fn new(series: &LoadSeries, metric: &str, window: (i64, i64), season: (i64, usize)) -> Self {
        Self {
            metric: metric.to_owned(),
            window,
            season,
            level: seasonal_level(
                series,
                metric,
                window,
                season.0 / series.step_seconds(),
                season.1,
            ),
            check: phase_check(series, metric, window, season),
        }
    }

    /// This read, when it is of `metric`'s `window` at `season`.
    fn of(&self, metric: &str, window: (i64, i64), season: (i64, usize)) -> Option<&Self> {
        (self.metric == metric && self.window == window && self.season == season).then_some(self)
    }
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
    /// The error of the past seasons' forecasts of the same window, percent.
    pub error_percent: Option<f64>,
    /// The season the forecast repeats, seconds.
    pub season_seconds: Option<i64>,
    /// The load (milli) the past seasons' forecasts of this window had ready ahead of the
    /// rises that came ([`PhaseCheck::ahead`]).
    pub ahead: i64,
    /// The load (milli) they would have provisioned for nothing ([`PhaseCheck::unneeded`]).
    pub unneeded: i64,
    /// Acting on them earned its cost ([`PhaseCheck::worth_it`]).
    pub worth_it: bool,
    /// Whether this metric's forecast counts (step 4 of the module docs).
    pub confident: bool,
}

/// How long the reactive path takes to meet a rise (the pods' startup and a sync period), and
/// how long a raise holds replicas (the lead window, then the scale-down stabilization), in
/// seconds: the prices of [`PhaseCheck::worth_it`].
fn lag_and_hold(input: &ForecastInput<'_>, lead: i64) -> (i64, i64) {
    let lag = input
        .startup_seconds
        .max(0)
        .saturating_add(input.config.sync_period_seconds(input.spec));
    let down = input
        .spec
        .behavior
        .as_ref()
        .map_or(input.config.downscale_stabilization_seconds, |b| {
            scale_down_rules(b, input.config.downscale_stabilization_seconds).window_seconds
        });
    (lag, lead.saturating_add(down.max(0)))
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
    let metrics = metrics_of(spec);
    let keep = keep_seconds_for(settings, metrics.len());
    for m in metrics.iter() {
        if let Some(load) = observed_load(m, spec, observed) {
            series.record(&metric_name(m), now, load, keep);
        }
    }
}

/// The forecast of every metric and the replicas the confident ones need (module docs).
pub fn forecast(input: &ForecastInput<'_>) -> Forecast {
    forecast_reading(input).0
}

/// [`forecast`], and what it read from the series, for the next forecast from the same series
/// ([`ForecastInput::reads`]).
pub fn forecast_reading(input: &ForecastInput<'_>) -> (Forecast, Vec<SeasonalRead>) {
    let settings = input.settings;
    let step = input.series.step_seconds();
    let ahead = lead_seconds(settings, input.startup_seconds, step);
    if settings.mode == PredictiveMode::Off {
        let off = Forecast {
            metrics: Vec::new(),
            replicas: None,
            lead_seconds: ahead,
            reason: PredictiveReason::Off,
            message: "predictive scaling is off".into(),
        };
        return (off, Vec::new());
    }
    let fitted;
    let fit = if let Some(f) = input.fit {
        f
    } else {
        fitted = fit(input.series, settings, input.now);
        &fitted
    };
    let now = input.now.as_second();
    let (lag, hold) = lag_and_hold(input, ahead);
    let window = (
        input.series.bucket_of(now),
        input.series.bucket_of(now.saturating_add(ahead)),
    );
    let mut reads = Vec::new();
    let metrics: Vec<MetricForecast> = metrics_of(input.spec)
        .iter()
        .map(|m| {
            let name = metric_name(m);
            let chosen = fit.metrics.get(&name);
            let season = chosen.map(|f| (f.season_seconds, f.seasons));
            let read = season.map(|season| {
                input
                    .reads
                    .iter()
                    .find_map(|r| r.of(&name, window, season))
                    .cloned()
                    .unwrap_or_else(|| SeasonalRead::new(input.series, &name, window, season))
            });
            let (load, check) = read
                .as_ref()
                .map_or((None, PhaseCheck::default()), |r| (r.level, r.check));
            reads.extend(read);
            let error_percent = check.error_percent;
            let worth_it = check.worth_it(lag, hold, settings.overload_weight());
            let replicas = load.and_then(|l| {
                replicas_for_load(m, l, input.spec, input.pod, input.config, input.now).ok()
            });
            MetricForecast {
                confident: replicas.is_some()
                    && error_percent.is_some_and(|e| e <= MAX_ERROR_PERCENT)
                    && worth_it,
                metric: name,
                load,
                replicas,
                error_percent,
                ahead: i64::try_from(check.ahead).unwrap_or(i64::MAX),
                unneeded: i64::try_from(check.unneeded).unwrap_or(i64::MAX),
                worth_it,
                season_seconds: season.map(|s| s.0),
            }
        })
        .collect();
    let replicas = metrics
        .iter()
        .filter(|m| m.confident)
        .filter_map(|m| m.replicas)
        .max();
    let (reason, message) = explain(&metrics, replicas, ahead);
    let forecast = Forecast {
        metrics,
        replicas,
        lead_seconds: ahead,
        reason,
        message,
    };
    (forecast, reads)
}

/// `daily` or `weekly` (or the hours) for a season of `seconds`.
fn season_name(seconds: i64) -> String {
    match seconds {
        DAY_SECONDS => "daily".into(),
        WEEK_SECONDS => "weekly".into(),
        s => format!("{}h", s / 3600),
    }
}

/// The reason and sentence of a forecast: the first metric's trouble when none is confident.
fn explain(
    metrics: &[MetricForecast],
    replicas: Option<i32>,
    lead: i64,
) -> (PredictiveReason, String) {
    if let Some(r) = replicas {
        let basis: Vec<String> = metrics
            .iter()
            .filter(|m| m.confident)
            .filter_map(|m| {
                Some(format!(
                    "{} {}, {:.0}% off at this time of past seasons",
                    m.metric,
                    season_name(m.season_seconds?),
                    m.error_percent?
                ))
            })
            .collect();
        return (
            PredictiveReason::BelowReactive,
            format!(
                "the load forecast for the next {lead}s needs {r} replicas ({})",
                basis.join("; ")
            ),
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
                "{name} has less than two {} seasons of history at this time (one to forecast \
                 from, one to check the forecast on); no prediction",
                m.season_seconds.map_or_else(|| "daily".into(), season_name)
            ),
        ),
        (Some(_), _, None) => (
            PredictiveReason::NoMetrics,
            format!("cannot compute the replicas the forecast of {name} needs"),
        ),
        (Some(_), Some(e), Some(_)) if e <= MAX_ERROR_PERCENT => (
            PredictiveReason::CostsMore,
            format!(
                "at this time of past seasons the {} forecasts of {name} would have held \
                 {} for nothing and had {} ready ahead of rises, too little for the time \
                 they hold replicas; no prediction",
                m.season_seconds.map_or_else(|| "daily".into(), season_name),
                quantity(m.unneeded),
                quantity(m.ahead)
            ),
        ),
        (Some(_), Some(e), Some(_)) => (
            PredictiveReason::LargeError,
            format!(
                "the {} forecasts of {name} for this time of past seasons were {e:.0}% off \
                 (more than {MAX_ERROR_PERCENT:.0}%); no prediction",
                m.season_seconds.map_or_else(|| "daily".into(), season_name)
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
