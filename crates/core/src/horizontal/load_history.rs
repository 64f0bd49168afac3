//! The compact load history `minReplicasTuning` reads when no Prometheus is configured: one
//! peak per metric per hour, for at most [`MAX_DAYS`] days.
//!
//! Each evaluation records, per metric, the workload's load as [`super::tuning`] defines it
//! (for per-pod sources the sum over the counted pods, for `Value` targets the value times the
//! ready pods, otherwise the value). An hour keeps only its highest value, since tuning only
//! asks for daily peaks; hours older than the lookback are dropped on every record.
//!
//! Stored form ([`LoadHistory::store`]): the one form of every load history
//! ([`StoredPeakSeries`]) with `stepSeconds: 3600`, offsets in hours from the previous entry
//! (the first from `baseBucket`, hours since the Unix epoch), values in milli-units. A history
//! written before the forms were one (`{baseHour, metrics}`, no `stepSeconds`) reads as the
//! same hours.
//!
//! Bound: a metric keeps at most `24 × lookbackDays` hours. For 7 days that is 168 pairs; a
//! pair is at most `168,` plus an `i64` (`-9223372036854775808,`: 21 bytes), so one metric's
//! list is at most [`BOUND_BYTES_PER_METRIC_7_DAYS`] bytes of JSON with its key; a typical
//! metric (consecutive hours, values below 10⁷ milli) takes about 168 × 10 ≈ 1.7 KB.

use jiff::Timestamp;

pub use super::peak_series::StoredPeakSeries;
use super::peak_series::{PeakSeries, Restore, stored_bytes};
use crate::stored::StoredStateError;

/// The longest lookback tuning accepts (`spec.minReplicasTuning.lookbackDays` ≤ 30).
pub const MAX_DAYS: i32 = 30;

/// Seconds per bucket.
const HOUR_SECONDS: i64 = 3600;

/// Hours per day.
const HOURS_PER_DAY: i64 = 24;

/// The most JSON bytes one metric's stored list takes for a 7-day lookback: 168 pairs of at most
/// 4 (`168,`) + 21 (`-9223372036854775808,`) bytes, plus brackets, quotes, a colon and a
/// metric name of up to 253 bytes (a Kubernetes name) and the separating comma.
pub const BOUND_BYTES_PER_METRIC_7_DAYS: usize = 168 * (4 + 21) + 2 + 253 + 4;

/// The most JSON bytes a native HPA's stored tuning history may take in its
/// `plimsoll.dev/min-replicas-tuning-status` annotation ([`LoadHistory::fit_stored`]). An
/// object's annotations hold 256 KiB together, and the predictive history takes up to 128 KiB
/// of them (its own `NATIVE_HISTORY_BYTES`): 32 metrics of 30 days of
/// 19-digit peaks took about 500 KB, and every write of the annotation was refused.
pub const NATIVE_HISTORY_BYTES: usize = 64 * 1024;

/// The most JSON bytes one stored hour can take: an offset and a value of up to 20 characters
/// each (`-9223372036854775808`) and their commas. What [`LoadHistory::fit_stored`] checks
/// before it measures.
const MAX_BYTES_PER_HOUR: usize = 2 * (20 + 1);

/// The most hours a metric keeps: `24 ×` [`MAX_DAYS`].
const MAX_HOURS: usize = MAX_DAYS.unsigned_abs() as usize * 24;

/// How a stored tuning history is read back: hourly buckets (also when the width is absent, as
/// in a history written before it was stored), at most `24 ×` [`MAX_DAYS`] per metric.
const RESTORE: Restore = Restore {
    step_seconds: HOUR_SECONDS,
    absent_step_seconds: HOUR_SECONDS,
    max_buckets: MAX_HOURS,
    step_field: "loadHistory.stepSeconds",
    base_field: "loadHistory.baseBucket",
    metrics_field: "loadHistory.metrics",
};

/// Hourly peaks per metric: a [`PeakSeries`] of hours.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadHistory {
    series: PeakSeries,
}

impl Default for LoadHistory {
    fn default() -> Self {
        Self {
            series: PeakSeries::new(HOUR_SECONDS),
        }
    }
}

/// The hour `at` falls in, counted from the Unix epoch.
fn hour_of(at: Timestamp) -> i64 {
    at.as_second().div_euclid(HOUR_SECONDS)
}

impl LoadHistory {
    /// Records `value` (milli) of `metric` at `at`, keeping `keep_days` days (clamped to
    /// 1..=[`MAX_DAYS`]) before `at`.
    pub fn record(&mut self, metric: &str, at: Timestamp, value: i64, keep_days: i32) {
        self.series
            .record(metric, at, value, Self::keep_buckets(keep_days));
    }

    /// The hours [`Self::record`] keeps for `keep_days` days.
    pub fn keep_buckets(keep_days: i32) -> i64 {
        i64::from(keep_days.clamp(1, MAX_DAYS)) * HOURS_PER_DAY
    }

    /// The hours themselves, to read or backfill.
    pub fn series(&self) -> &PeakSeries {
        &self.series
    }

    /// See [`Self::series`].
    pub fn series_mut(&mut self) -> &mut PeakSeries {
        &mut self.series
    }

    /// The metrics recorded, by name.
    pub fn metrics(&self) -> impl Iterator<Item = &str> {
        self.series.metrics()
    }

    /// The hourly peaks of `metric`, oldest first.
    pub fn hours(&self, metric: &str) -> &[(i64, i64)] {
        self.series.points(metric)
    }

    /// The peak of each of the last `days` days of `metric` before `now`: index 0 is the day
    /// ending with the hour of `now`, index k the 24 hours before that; `None` for a day
    /// without a sample.
    pub fn daily_peaks(&self, metric: &str, now: Timestamp, days: i32) -> Vec<Option<i64>> {
        let days = usize::try_from(days.clamp(1, MAX_DAYS)).unwrap_or(1);
        let mut peaks = vec![None; days];
        let now_hour = hour_of(now);
        for &(hour, value) in self.hours(metric) {
            let Ok(day) = usize::try_from((now_hour - hour).div_euclid(HOURS_PER_DAY)) else {
                continue; // after now
            };
            if let Some(slot) = peaks.get_mut(day) {
                *slot = Some(slot.map_or(value, |p: i64| p.max(value)));
            }
        }
        peaks
    }

    /// Whether `metric`'s samples cover the last `days` days before `now`: its oldest hour is
    /// at least `24 × days − 1` hours before the hour of `now` (a full lookback of hours) and
    /// every day of [`Self::daily_peaks`] has a sample.
    pub fn covers(&self, metric: &str, now: Timestamp, days: i32) -> bool {
        let days = days.clamp(1, MAX_DAYS);
        let span = i64::from(days) * HOURS_PER_DAY - 1;
        let old_enough = self
            .hours(metric)
            .first()
            .is_some_and(|(h, _)| hour_of(now) - *h >= span);
        old_enough
            && self
                .daily_peaks(metric, now, days)
                .iter()
                .all(Option::is_some)
    }

    /// The hour a backfill of `metric` for a lookback of `days` before `now` starts from, or
    /// `None` when the history already covers it ([`Self::covers`]): the whole lookback up to,
    /// not including, the hour of `now` (which the evaluation records itself).
    pub fn backfill_from(&self, metric: &str, now: Timestamp, days: i32) -> Option<i64> {
        let days = days.clamp(1, MAX_DAYS);
        (!self.covers(metric, now, days))
            .then(|| hour_of(now) - (i64::from(days) * HOURS_PER_DAY - 1))
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// The stored form.
    pub fn store(&self) -> StoredPeakSeries {
        self.series.store()
    }

    /// Forgets the oldest hours of every metric, all from the same hour on, until the stored
    /// form takes at most `bytes` of JSON; `true` when it forgot any. Forgetting in the history
    /// itself keeps what tuning reads equal to what a successor restores. Measured only when
    /// the hours could be over: each evaluation calls it.
    pub fn fit_stored(&mut self, bytes: usize) -> bool {
        let series = &self.series;
        let bound: usize = series
            .metrics()
            // A name as JSON: escaped at worst to six bytes a byte, quoted, with `:[]` and `,`.
            .map(|m| m.len() * 6 + 6 + series.points(m).len() * MAX_BYTES_PER_HOUR)
            .sum::<usize>()
            + 128;
        let size = |s: &PeakSeries| stored_bytes(&s.store());
        if bound <= bytes || size(series) <= bytes {
            return false;
        }
        let (Some(oldest), Some(newest)) = (
            series.metrics().filter_map(|m| series.oldest(m)).min(),
            series.metrics().filter_map(|m| series.newest(m)).max(),
        ) else {
            return false;
        };
        // Forgetting before `too_much` leaves the stored form over `bytes`; before `fits`
        // (past the newest hour: nothing left) it is not. Each halving stores the series once.
        let (mut too_much, mut fits) = (oldest, newest.saturating_add(1));
        while fits - too_much > 1 {
            let mid = too_much + (fits - too_much) / 2;
            let mut shorter = self.series.clone();
            shorter.forget_before(mid);
            if size(&shorter) <= bytes {
                fits = mid;
            } else {
                too_much = mid;
            }
        }
        self.series.forget_before(fits);
        true
    }

    /// The history `stored` stands for, or why it cannot be read back ([`crate::stored`]'s
    /// rules, [`PeakSeries::try_restore`]): hourly buckets (`stepSeconds` 3600 or absent), at
    /// most [`crate::stored::MAX_METRICS`] metrics of at most `24 ×` [`MAX_DAYS`] hourly peaks
    /// each (what [`Self::record`] keeps), hours strictly increasing from `baseBucket` (or the
    /// `baseHour` of the old form) and inside the time range, any `i64` peak (the loads the
    /// controller records are any `i64`).
    pub fn try_restore(stored: &StoredPeakSeries) -> Result<Self, StoredStateError> {
        PeakSeries::try_restore(stored, &RESTORE).map(|series| Self { series })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::stored::MAX_METRICS;

    fn at(hours: i64, seconds: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + hours * HOUR_SECONDS + seconds).unwrap()
    }

    #[test]
    fn a_native_history_of_many_large_metrics_forgets_its_oldest_hours_to_fit_its_annotation() {
        let mut h = LoadHistory::default();
        let metrics = MAX_METRICS.min(32);
        for m in 0..metrics {
            for hour in 0..720 {
                h.record(
                    &format!("metric-{m}"),
                    at(hour, 0),
                    i64::MAX - hour,
                    MAX_DAYS,
                );
            }
        }
        let before = stored_bytes(&h.store());
        assert!(before > 4 * NATIVE_HISTORY_BYTES, "{before}");
        assert!(h.fit_stored(NATIVE_HISTORY_BYTES));
        let after = stored_bytes(&h.store());
        assert!(after <= NATIVE_HISTORY_BYTES, "{after}");
        // As much as fits: one hour more would not.
        assert!(
            after > NATIVE_HISTORY_BYTES - metrics * MAX_BYTES_PER_HOUR,
            "{after}"
        );
        // Every metric keeps the same newest hours, through the last one recorded.
        let kept = h.hours("metric-0").to_vec();
        assert!(kept.len() < 720 && kept.len() > 10, "{}", kept.len());
        assert_eq!(kept.last(), Some(&(hour_of(at(719, 0)), i64::MAX - 719)));
        for m in 1..metrics {
            assert_eq!(h.hours(&format!("metric-{m}")), kept.as_slice());
        }
        // What was kept is what a successor restores, and fits again unchanged.
        let restored = LoadHistory::try_restore(&h.store()).expect("restores");
        assert_eq!(restored, h);
        assert!(!h.fit_stored(NATIVE_HISTORY_BYTES));
    }

    #[test]
    fn a_typical_history_fits_without_being_measured_or_cut() {
        let mut h = LoadHistory::default();
        for m in ["cpu", "memory", "requests", "queue"] {
            for hour in 0..168 {
                h.record(m, at(hour, 0), 2_500_000 + hour, 7);
            }
        }
        let kept = h.clone();
        assert!(!h.fit_stored(NATIVE_HISTORY_BYTES));
        assert_eq!(h, kept);
    }

    #[test]
    fn an_hour_keeps_its_peak_and_days_split_back_from_now() {
        let mut h = LoadHistory::default();
        h.record("cpu", at(0, 10), 500, 7);
        h.record("cpu", at(0, 3000), 900, 7);
        h.record("cpu", at(0, 3500), 700, 7);
        h.record("cpu", at(25, 0), 300, 7);
        assert_eq!(h.hours("cpu").len(), 2);
        assert_eq!(h.hours("cpu")[0].1, 900);
        // Now is hour 25: day 0 is hours 2..=25, day 1 hours -22..=1.
        assert_eq!(
            h.daily_peaks("cpu", at(25, 100), 3),
            [Some(300), Some(900), None]
        );
        assert_eq!(h.daily_peaks("memory", at(25, 100), 1), [None]);
        // Hours 0..=25 span a day (24 hours back from hour 25 reaches hour 2) but not two.
        assert!(h.covers("cpu", at(25, 0), 1));
        assert!(!h.covers("cpu", at(25, 0), 2));
        assert!(
            !h.covers("cpu", at(22, 0), 1),
            "hour 0 is only 22 hours back"
        );
    }

    #[test]
    fn hours_older_than_the_lookback_are_dropped() {
        let mut h = LoadHistory::default();
        for hour in 0..(10 * 24) {
            h.record("cpu", at(hour, 0), hour, 7);
        }
        assert_eq!(h.hours("cpu").len(), 7 * 24);
        assert_eq!(h.hours("cpu")[0].0, hour_of(at(3 * 24, 0)));
    }

    #[test]
    fn store_then_restore_is_the_same_history() {
        let mut h = LoadHistory::default();
        h.record("cpu", at(3, 0), 1200, 7);
        h.record("cpu", at(5, 0), 1300, 7);
        h.record("requests", at(4, 0), -5, 7);
        let stored = h.store();
        assert_eq!(stored.metrics["cpu"], [0, 1200, 2, 1300]);
        assert_eq!(stored.metrics["requests"], [1, -5]);
        assert_eq!(LoadHistory::try_restore(&stored), Ok(h));
    }

    /// The form written before the histories shared one (`{baseHour, metrics}`, hours, no
    /// `stepSeconds`), as objects in clusters and native HPAs' annotations still carry it,
    /// reads back as the same hours; written again, it takes the one form.
    #[test]
    fn an_old_shape_history_reads_back_as_the_same_hours() {
        let mut h = LoadHistory::default();
        h.record("cpu", at(3, 0), 1200, 7);
        h.record("cpu", at(5, 0), 1300, 7);
        h.record("requests", at(4, 0), -5, 7);
        let base = hour_of(at(3, 0));
        let old = format!(
            r#"{{"baseHour":{base},"metrics":{{"cpu":[0,1200,2,1300],"requests":[1,-5]}}}}"#
        );
        let stored: StoredPeakSeries = serde_json::from_str(&old).unwrap();
        assert_eq!(LoadHistory::try_restore(&stored), Ok(h.clone()));
        let new = serde_json::to_string(&h.store()).unwrap();
        assert_eq!(
            new,
            format!(
                r#"{{"stepSeconds":3600,"baseBucket":{base},"metrics":{{"cpu":[0,1200,2,1300],"requests":[1,-5]}}}}"#
            )
        );
        // A history of another width is not hours: refused whole.
        let other = StoredPeakSeries {
            step_seconds: Some(900),
            ..stored
        };
        assert_eq!(
            LoadHistory::try_restore(&other),
            Err(StoredStateError::OtherStep {
                field: "loadHistory.stepSeconds",
                stored: 900,
                expected: 3600
            })
        );
    }

    #[test]
    fn a_hostile_history_is_ignored_whole() {
        let history = |base_hour, list: Vec<i64>| StoredPeakSeries {
            base_hour,
            metrics: BTreeMap::from([("cpu".to_owned(), list)]),
            ..StoredPeakSeries::default()
        };
        let field = "loadHistory.metrics";
        let cases = [
            (
                history(None, vec![0, 1]),
                StoredStateError::Missing {
                    field: "loadHistory.baseBucket",
                },
            ),
            (
                history(Some(i64::MAX), vec![1, 1]),
                StoredStateError::BadPosition { field },
            ),
            (
                history(Some(0), vec![0, 1, 0, 2]),
                StoredStateError::BadPosition { field },
            ),
            (
                history(Some(0), [1, 1].repeat(721)),
                StoredStateError::TooLong {
                    field,
                    len: 1442,
                    max: 1440,
                },
            ),
            (
                StoredPeakSeries {
                    base_hour: Some(0),
                    metrics: (0..=MAX_METRICS).map(|i| (i.to_string(), vec![])).collect(),
                    ..StoredPeakSeries::default()
                },
                StoredStateError::TooLong {
                    field,
                    len: MAX_METRICS + 1,
                    max: MAX_METRICS,
                },
            ),
        ];
        for (stored, why) in cases {
            assert_eq!(LoadHistory::try_restore(&stored), Err(why));
        }
        // Extreme peaks are loads the controller may record: they read back, and the
        // arithmetic on them holds.
        let extreme = history(Some(hour_of(at(0, 0))), vec![0, i64::MIN, 1, i64::MAX]);
        let mut h = LoadHistory::try_restore(&extreme).unwrap();
        h.record("cpu", at(2, 0), i64::MAX, 7);
        assert_eq!(h.daily_peaks("cpu", at(2, 0), 1), [Some(i64::MAX)]);
    }

    proptest! {
        /// However many samples arrive, a metric keeps at most 24 × lookback hours, and its
        /// stored JSON stays within the documented bound for 7 days.
        #[test]
        fn the_stored_form_is_bounded(
            samples in proptest::collection::vec((0i64..2000, any::<i64>()), 1..600),
        ) {
            let mut h = LoadHistory::default();
            let mut sorted = samples;
            sorted.sort_by_key(|s| s.0);
            for (hour, value) in sorted {
                h.record("cpu", at(hour, 0), value, 7);
            }
            prop_assert!(h.hours("cpu").len() <= 168);
            let json = serde_json::to_string(&h.store().metrics).unwrap();
            prop_assert!(json.len() <= BOUND_BYTES_PER_METRIC_7_DAYS, "{}", json.len());
            prop_assert_eq!(LoadHistory::try_restore(&h.store()), Ok(h));
        }
    }
}
