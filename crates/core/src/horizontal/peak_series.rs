//! The one bucketed history every load history is kept in: per metric, the highest value seen
//! in each bucket of a fixed width (any width: 15 minutes for `spec.predictive`
//! ([`super::predictive::LoadSeries`]), an hour for `minReplicasTuning`
//! ([`super::load_history::LoadHistory`]), 5 minutes for a joint VPA's total usage
//! (`crate::vertical::joint::TotalUsage`, one series)).
//!
//! Invariants: each metric's buckets are strictly increasing (oldest first) and a metric is
//! never kept with no bucket. [`PeakSeries::record`] keeps a bucket's highest value and drops,
//! on every record, the buckets that fell out of the caller's retention (counted back from the
//! metric's newest bucket).
//!
//! Stored form ([`PeakSeries::store`], [`StoredPeakSeries`]): per metric a flat
//! `[offset, value, …]` list ([`super::offsets`]) counted from `baseBucket`, with the width in
//! `stepSeconds`. Reading it back ([`PeakSeries::try_restore`]) follows [`crate::stored`]'s rules
//! for hostile input with the caller's bounds ([`Restore`]): the same width, at most
//! [`MAX_METRICS`] metrics of at most the caller's most buckets, buckets strictly increasing and
//! inside the time range; anything else is refused whole.
//!
//! Pure: no clock, no I/O.

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::offsets::flatten;
pub use crate::api::hpa_plus::history::StoredPeakSeries;
use crate::stored::{self, MAX_METRICS, Order, PairRules, StoredStateError};

/// Per metric, the highest value (milli-units) of each bucket of `step` seconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeakSeries {
    step: i64,
    /// Per metric: `(bucket since the Unix epoch, highest value)`, oldest first.
    metrics: BTreeMap<String, Vec<(i64, i64)>>,
}

/// How a stored series is read back: the caller's width and bounds, and the names its errors
/// give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Restore {
    /// The width the caller records with, seconds; a stored series of another width is
    /// refused (its buckets would mean other times).
    pub step_seconds: i64,
    /// The width a stored series without `stepSeconds` was written with (an hour for a tuning
    /// history written before the width was stored; 0, never equal to a width, where every
    /// stored series carries one).
    pub absent_step_seconds: i64,
    /// The most buckets a metric may hold: what [`PeakSeries::record`] keeps for the caller's
    /// longest retention.
    pub max_buckets: usize,
    /// The stored width's name, for errors (`history.stepSeconds`).
    pub step_field: &'static str,
    /// The base's name, for errors (`history.baseBucket`).
    pub base_field: &'static str,
    /// The lists' name, for errors (`history.metrics`).
    pub metrics_field: &'static str,
}

/// The JSON bytes of `stored` as written into a status or an annotation.
pub fn stored_bytes(stored: &StoredPeakSeries) -> usize {
    serde_json::to_vec(stored).map_or(usize::MAX, |json| json.len())
}

/// The bucket `stored`'s lists count from: `baseBucket`, else the `baseHour` of a tuning
/// history written before the width was stored.
pub fn stored_base(stored: &StoredPeakSeries) -> Option<i64> {
    stored.base_bucket.or(stored.base_hour)
}

/// Drops from `list` (oldest first, by its bucket `key`) the entries `keep_buckets` or more
/// buckets older than `newest`.
pub fn retain_newest<T>(
    list: &mut Vec<T>,
    newest: i64,
    keep_buckets: i64,
    key: impl Fn(&T) -> i64,
) {
    let stale = list.partition_point(|e| newest.saturating_sub(key(e)) >= keep_buckets);
    if stale > 0 {
        list.drain(..stale);
    }
}

impl PeakSeries {
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

    /// The bucket `at` falls in (seconds since the Unix epoch over the step).
    pub fn bucket_at(&self, at: Timestamp) -> i64 {
        self.bucket_of(at.as_second())
    }

    /// The bucket the second `second` (since the Unix epoch) falls in.
    pub fn bucket_of(&self, second: i64) -> i64 {
        second.div_euclid(self.step)
    }

    /// Records `value` (milli) of `metric` at `at`: the bucket keeps its highest value (a
    /// sample older than the newest bucket, clock skew or a backfill, raises the bucket it
    /// falls in), and buckets `keep_buckets` (at least 1) or more older than the newest are
    /// dropped.
    pub fn record(&mut self, metric: &str, at: Timestamp, value: i64, keep_buckets: i64) {
        let bucket = self.bucket_at(at);
        self.raise(metric, bucket, value);
        if let Some(list) = self.metrics.get_mut(metric) {
            let newest = list.last().map_or(bucket, |(b, _)| *b);
            retain_newest(list, newest, keep_buckets.max(1), |(b, _)| *b);
        }
    }

    /// Raises `metric`'s `bucket` to `value` (inserted in order when new), dropping nothing.
    pub fn raise(&mut self, metric: &str, bucket: i64, value: i64) {
        let list = self.metrics.entry(metric.to_owned()).or_default();
        let i = list.partition_point(|(b, _)| *b < bucket);
        match list.get_mut(i) {
            Some((b, v)) if *b == bucket => *v = (*v).max(value),
            _ => list.insert(i, (bucket, value)),
        }
    }

    /// The metrics recorded, by name.
    pub fn metrics(&self) -> impl Iterator<Item = &str> {
        self.metrics.keys().map(String::as_str)
    }

    /// The buckets of `metric`, `(bucket, highest value in milli-units)`, oldest first.
    pub fn points(&self, metric: &str) -> &[(i64, i64)] {
        self.metrics.get(metric).map_or(&[], Vec::as_slice)
    }

    /// The value of `metric` in `bucket`, if one was recorded.
    pub fn at(&self, metric: &str, bucket: i64) -> Option<i64> {
        let list = self.points(metric);
        list.binary_search_by_key(&bucket, |(b, _)| *b)
            .ok()
            .map(|i| list[i].1)
    }

    /// The oldest bucket of `metric`.
    pub fn oldest(&self, metric: &str) -> Option<i64> {
        self.points(metric).first().map(|(b, _)| *b)
    }

    /// The newest bucket of `metric`.
    pub fn newest(&self, metric: &str) -> Option<i64> {
        self.points(metric).last().map(|(b, _)| *b)
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.metrics.is_empty()
    }

    /// The series without the buckets from `open` on (only buckets that have ended).
    #[must_use]
    pub fn before(&self, open: i64) -> Self {
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

    /// Forgets every metric's buckets before `first`; a metric left with none is dropped.
    pub fn forget_before(&mut self, first: i64) {
        for list in self.metrics.values_mut() {
            let stale = list.partition_point(|(b, _)| *b < first);
            list.drain(..stale);
        }
        self.metrics.retain(|_, list| !list.is_empty());
    }

    /// The newest bucket before `open` over all metrics.
    pub fn newest_before(&self, open: i64) -> Option<i64> {
        self.metrics
            .values()
            .filter_map(|list| {
                let end = list.partition_point(|(b, _)| *b < open);
                end.checked_sub(1).map(|i| list[i].0)
            })
            .max()
    }

    /// The first bucket of the window `first..open` that `metric` lacks at its newer end: the
    /// window's start when the metric's oldest bucket is younger than `first + 1` (or it has
    /// none), else the bucket after its newest; `None` when that is not before `open`. What a
    /// backfill (from Prometheus) reads.
    pub fn missing_from(&self, metric: &str, first: i64, open: i64) -> Option<i64> {
        let from = match (self.oldest(metric), self.newest(metric)) {
            (Some(oldest), Some(newest)) if oldest <= first + 1 => newest + 1,
            _ => first,
        };
        (from < open).then_some(from)
    }

    /// The stored form: the width, and with any bucket the oldest bucket over all metrics as
    /// the base.
    pub fn store(&self) -> StoredPeakSeries {
        let Some(base) = self.base() else {
            return StoredPeakSeries {
                step_seconds: Some(self.step),
                ..StoredPeakSeries::default()
            };
        };
        let metrics = self
            .metrics
            .iter()
            .filter(|(_, list)| !list.is_empty())
            .map(|(name, list)| (name.clone(), flatten(base, list.iter().copied())))
            .collect();
        StoredPeakSeries {
            step_seconds: Some(self.step),
            base_bucket: Some(base),
            metrics,
            ..StoredPeakSeries::default()
        }
    }

    /// The oldest bucket over all metrics (what [`Self::store`] counts from).
    pub fn base(&self) -> Option<i64> {
        self.metrics
            .values()
            .filter_map(|l| l.first())
            .map(|e| e.0)
            .min()
    }

    /// The series `stored` stands for, or why it cannot be read back (module docs, `how`'s
    /// bounds): the same width (`stepSeconds`, else `how.absent_step_seconds`), at most
    /// [`MAX_METRICS`] metrics of at most `how.max_buckets` buckets each, buckets strictly
    /// increasing from the base and inside the time range, any `i64` value (the loads the
    /// controller records are any `i64`). `means` are not read here.
    pub fn try_restore(stored: &StoredPeakSeries, how: &Restore) -> Result<Self, StoredStateError> {
        let step = how.step_seconds.max(1);
        let stored_step = stored.step_seconds.unwrap_or(how.absent_step_seconds);
        if stored_step != step {
            return Err(StoredStateError::OtherStep {
                field: how.step_field,
                stored: stored_step,
                expected: step,
            });
        }
        if stored.metrics.len() > MAX_METRICS {
            return Err(StoredStateError::TooLong {
                field: how.metrics_field,
                len: stored.metrics.len(),
                max: MAX_METRICS,
            });
        }
        let mut series = Self::new(step);
        let Some(base) = stored_base(stored) else {
            return if stored.metrics.values().all(Vec::is_empty) {
                Ok(series)
            } else {
                Err(StoredStateError::Missing {
                    field: how.base_field,
                })
            };
        };
        let rules = PairRules {
            field: how.metrics_field,
            max_pairs: how.max_buckets,
            positions: stored::buckets_range(step),
            values: i64::MIN..=i64::MAX,
            order: Order::Increasing,
        };
        for (name, flat) in &stored.metrics {
            let list = stored::pairs(base, flat, &rules)?;
            // The controller never keeps an empty list (a metric has its newest bucket).
            if !list.is_empty() {
                series.metrics.insert(name.clone(), list);
            }
        }
        Ok(series)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + second).unwrap()
    }

    const HOW: Restore = Restore {
        step_seconds: 60,
        absent_step_seconds: 0,
        max_buckets: 10,
        step_field: "s",
        base_field: "b",
        metrics_field: "m",
    };

    #[test]
    fn a_bucket_keeps_its_peak_in_order_and_the_retention_counts_from_the_newest() {
        let mut s = PeakSeries::new(60);
        s.record("cpu", at(0), 5, 3);
        s.record("cpu", at(59), 9, 3);
        let b0 = s.bucket_at(at(0));
        assert_eq!(s.points("cpu"), [(b0, 9)]);
        // Three buckets kept, counted back from the newest: b0 is three before b0 + 3.
        s.record("cpu", at(180), 1, 3);
        assert_eq!(s.points("cpu"), [(b0 + 3, 1)]);
        // Late: raises the bucket it falls in, in order.
        s.record("cpu", at(61), 4, 3);
        s.record("cpu", at(62), 3, 3);
        assert_eq!(s.points("cpu"), [(b0 + 1, 4), (b0 + 3, 1)]);
        s.record("cpu", at(240), 2, 3);
        assert_eq!(s.points("cpu"), [(b0 + 3, 1), (b0 + 4, 2)]);
        assert_eq!(s.missing_from("cpu", b0 + 3, b0 + 6), Some(b0 + 5));
        assert_eq!(s.missing_from("cpu", b0, b0 + 6), Some(b0));
        assert_eq!(s.missing_from("cpu", b0 + 3, b0 + 5), None);
        assert_eq!(s.before(b0 + 4).points("cpu"), [(b0 + 3, 1)]);
        assert_eq!(s.newest_before(b0 + 4), Some(b0 + 3));
    }

    #[test]
    fn a_history_without_a_width_reads_with_the_callers_old_width() {
        let old = StoredPeakSeries {
            base_hour: Some(7),
            metrics: BTreeMap::from([("cpu".to_owned(), vec![0, 3, 2, 4])]),
            ..StoredPeakSeries::default()
        };
        let hourly = Restore {
            step_seconds: 3600,
            absent_step_seconds: 3600,
            ..HOW
        };
        let s = PeakSeries::try_restore(&old, &hourly).unwrap();
        assert_eq!(s.points("cpu"), [(7, 3), (9, 4)]);
        // Written back in the one form, it reads as the same series.
        let new = s.store();
        assert_eq!(
            (new.step_seconds, new.base_bucket, new.base_hour),
            (Some(3600), Some(7), None)
        );
        assert_eq!(PeakSeries::try_restore(&new, &hourly), Ok(s));
        // Where every stored series carries its width, a missing one is another width.
        assert_eq!(
            PeakSeries::try_restore(&old, &HOW),
            Err(StoredStateError::OtherStep {
                field: "s",
                stored: 0,
                expected: 60
            })
        );
    }

    proptest! {
        /// Whatever arrives, a metric keeps at most `keep` buckets, strictly increasing, and
        /// the stored form reads back as the same series.
        #[test]
        fn record_is_bounded_and_store_reads_back(
            samples in proptest::collection::vec((0i64..3000, any::<i64>()), 1..200),
            keep in 1i64..10,
        ) {
            let mut s = PeakSeries::new(60);
            for (second, value) in samples {
                s.record("cpu", at(second), value, keep);
            }
            let points = s.points("cpu");
            prop_assert!(points.len() <= usize::try_from(keep).unwrap());
            prop_assert!(points.windows(2).all(|w| w[0].0 < w[1].0));
            prop_assert_eq!(PeakSeries::try_restore(&s.store(), &HOW), Ok(s));
        }
    }
}
