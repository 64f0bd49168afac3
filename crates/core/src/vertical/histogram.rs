//! Exponential-bucket histograms and their percentiles, as upstream's VPA recommender keeps them
//! (`pkg/recommender/util/histogram.go`, `histogram_options.go`).
//!
//! Bucket `n >= 1` starts at `first * (ratio^n - 1) / (ratio - 1)`; bucket 0 covers
//! `[0, first)`; the last bucket is open-ended. A bucket whose weight is below `epsilon` counts as
//! empty. A percentile is the *end* of the bucket where the cumulative weight first reaches the
//! threshold (the start of the last bucket when it is that one) — never an interpolation, so the
//! result is always one of a fixed set of values, which keeps recommendations stable.
//!
//! Invariants: weights are never negative; `min_bucket..=max_bucket` spans every non-empty bucket;
//! every float operation happens in upstream's order so results match its checkpoints.

use std::collections::BTreeMap;

/// Why a histogram operation was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum HistogramError {
    /// The bucketing parameters are out of range.
    #[error("invalid histogram options: {0}")]
    InvalidOptions(&'static str),
    /// A checkpoint names a bucket this histogram does not have.
    #[error("checkpoint bucket {bucket} is outside the histogram's {buckets} buckets")]
    BucketOutOfRange {
        /// The bucket index as written.
        bucket: String,
        /// How many buckets the histogram has.
        buckets: usize,
    },
    /// A checkpoint's total weight is negative, infinite or not a number.
    #[error("checkpoint total weight {0} is not a finite non-negative number")]
    BadTotalWeight(f64),
}

/// Upstream's bucket growth: each bucket is 5 % wider than the previous one.
pub const BUCKET_SIZE_GROWTH: f64 = 0.05;
/// Smallest sample weight (before decay) upstream uses: the CPU sample weight.
pub const MIN_SAMPLE_WEIGHT: f64 = 0.1;
/// Weight below which a bucket is empty: `0.001 * MIN_SAMPLE_WEIGHT`, small enough that a sample
/// just inside the 8-day memory window still counts.
pub const EPSILON: f64 = 0.001 * MIN_SAMPLE_WEIGHT;
/// Largest bucket weight stored in a checkpoint; all others are scaled relative to it.
pub const MAX_CHECKPOINT_WEIGHT: u32 = 10_000;

/// The bucketing scheme of a histogram (upstream `exponentialHistogramOptions`, and
/// `linearHistogramOptions` when `ratio` is 1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HistogramOptions {
    num_buckets: usize,
    first_bucket_size: f64,
    /// Growth of each bucket over the previous one; exactly 1.0 means linear buckets.
    ratio: f64,
    epsilon: f64,
}

impl HistogramOptions {
    /// Exponential buckets from 0 to at least `max_value`, the first `first_bucket_size` wide,
    /// each next one `ratio` times wider. Requires `max_value`, `first_bucket_size`,
    /// `epsilon` > 0 and `ratio` > 1.
    pub fn exponential(
        max_value: f64,
        first_bucket_size: f64,
        ratio: f64,
        epsilon: f64,
    ) -> Result<Self, HistogramError> {
        if !(max_value > 0.0 && first_bucket_size > 0.0 && epsilon > 0.0 && ratio > 1.0) {
            return Err(HistogramError::InvalidOptions(
                "maxValue, firstBucketSize and epsilon must be > 0, ratio must be > 1",
            ));
        }
        let n = log(ratio, max_value * (ratio - 1.0) / first_bucket_size + 1.0).ceil();
        Ok(Self {
            num_buckets: n as usize + 1,
            first_bucket_size,
            ratio,
            epsilon,
        })
    }

    /// Equal buckets of `bucket_size` from 0 to at least `max_value` (upstream
    /// `NewLinearHistogramOptions`, used by its tests). Requires all arguments > 0.
    pub fn linear(max_value: f64, bucket_size: f64, epsilon: f64) -> Result<Self, HistogramError> {
        if !(max_value > 0.0 && bucket_size > 0.0 && epsilon > 0.0) {
            return Err(HistogramError::InvalidOptions(
                "maxValue, bucketSize and epsilon must be > 0",
            ));
        }
        Ok(Self {
            num_buckets: (max_value / bucket_size).ceil() as usize + 1,
            first_bucket_size: bucket_size,
            ratio: 1.0,
            epsilon,
        })
    }

    fn is_linear(&self) -> bool {
        self.ratio.to_bits() == 1.0_f64.to_bits()
    }

    /// Upstream's CPU scheme, in cores: first bucket 0.01 core, up to 1000 cores, ratio 1.05,
    /// epsilon 0.0001 — 176 buckets. This is the scheme of checkpoint format `v3`; a change would
    /// need a new format version.
    pub fn cpu() -> Self {
        Self {
            num_buckets: 176,
            first_bucket_size: 0.01,
            ratio: 1.0 + BUCKET_SIZE_GROWTH,
            epsilon: EPSILON,
        }
    }

    /// Upstream's memory scheme, in bytes: first bucket 1e7 (10 MB), up to 1e12 (1 TB),
    /// ratio 1.05, epsilon 0.0001 — 176 buckets.
    pub fn memory() -> Self {
        Self {
            num_buckets: 176,
            first_bucket_size: 1e7,
            ratio: 1.0 + BUCKET_SIZE_GROWTH,
            epsilon: EPSILON,
        }
    }

    /// Number of buckets.
    pub fn num_buckets(&self) -> usize {
        self.num_buckets
    }

    /// Minimum weight of a non-empty bucket.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// The bucket `value` falls in; values outside the range go to the first or last bucket.
    pub fn find_bucket(&self, value: f64) -> usize {
        if self.is_linear() {
            let bucket = (value / self.first_bucket_size) as i64;
            return bucket.clamp(0, self.num_buckets as i64 - 1) as usize;
        }
        if value < self.first_bucket_size || value.is_nan() {
            return 0;
        }
        let bucket = log(
            self.ratio,
            value * (self.ratio - 1.0) / self.first_bucket_size + 1.0,
        ) as usize;
        bucket.min(self.num_buckets - 1)
    }

    /// Where bucket `bucket` starts (0 for bucket 0). Indices past the end are clamped.
    pub fn bucket_start(&self, bucket: usize) -> f64 {
        let bucket = bucket.min(self.num_buckets - 1);
        if self.is_linear() {
            return bucket as f64 * self.first_bucket_size;
        }
        if bucket == 0 {
            return 0.0;
        }
        self.first_bucket_size * (self.ratio.powf(bucket as f64) - 1.0) / (self.ratio - 1.0)
    }
}

/// `log_base(x)` computed as upstream does (`ln x / ln base`), so bucket edges agree.
fn log(base: f64, x: f64) -> f64 {
    x.ln() / base.ln()
}

/// Rounds half up, as upstream's `round` (`floor(x + 0.5)`).
pub(crate) fn round_half_up(x: f64) -> i64 {
    (x + 0.5).floor() as i64
}

/// A histogram of weighted samples (upstream `histogram`).
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    options: HistogramOptions,
    bucket_weight: Vec<f64>,
    total_weight: f64,
    min_bucket: usize,
    max_bucket: usize,
}

impl Histogram {
    /// An empty histogram with `options`.
    pub fn new(options: HistogramOptions) -> Self {
        Self {
            options,
            bucket_weight: vec![0.0; options.num_buckets],
            total_weight: 0.0,
            min_bucket: options.num_buckets - 1,
            max_bucket: 0,
        }
    }

    /// The bucketing scheme.
    pub fn options(&self) -> &HistogramOptions {
        &self.options
    }

    /// Sum of all weights.
    pub fn total_weight(&self) -> f64 {
        self.total_weight
    }

    /// Weight of bucket `bucket` (0 past the end).
    pub fn bucket_weight(&self, bucket: usize) -> f64 {
        self.bucket_weight.get(bucket).copied().unwrap_or(0.0)
    }

    /// `(index, weight)` of every bucket between the first and last non-empty one.
    pub fn buckets(&self) -> impl Iterator<Item = (usize, f64)> + '_ {
        let range = if self.min_bucket <= self.max_bucket {
            self.min_bucket..self.max_bucket + 1
        } else {
            0..0
        };
        range.map(|b| (b, self.bucket_weight[b]))
    }

    /// Adds `weight` (>= 0; negative or NaN weights are ignored) at `value`.
    pub fn add_sample(&mut self, value: f64, weight: f64) {
        if weight.is_nan() || weight < 0.0 {
            return;
        }
        let bucket = self.options.find_bucket(value);
        self.bucket_weight[bucket] += weight;
        self.total_weight += weight;
        if bucket < self.min_bucket && self.bucket_weight[bucket] >= self.options.epsilon {
            self.min_bucket = bucket;
        }
        if bucket > self.max_bucket && self.bucket_weight[bucket] >= self.options.epsilon {
            self.max_bucket = bucket;
        }
    }

    /// Removes up to `weight` at `value`; a bucket never goes below zero.
    pub fn subtract_sample(&mut self, value: f64, weight: f64) {
        if weight.is_nan() || weight < 0.0 {
            return;
        }
        let bucket = self.options.find_bucket(value);
        let weight = if weight > self.bucket_weight[bucket] - self.options.epsilon {
            self.bucket_weight[bucket]
        } else {
            weight
        };
        self.total_weight -= weight;
        self.bucket_weight[bucket] -= weight;
        self.update_min_and_max_bucket();
    }

    /// Adds every sample of `other` (same options required; otherwise nothing happens).
    pub fn merge(&mut self, other: &Histogram) {
        if self.options != other.options {
            return;
        }
        for (bucket, weight) in other.buckets() {
            self.bucket_weight[bucket] += weight;
        }
        self.total_weight += other.total_weight;
        if other.min_bucket < self.min_bucket {
            self.min_bucket = other.min_bucket;
        }
        if other.max_bucket > self.max_bucket {
            self.max_bucket = other.max_bucket;
        }
    }

    /// True when no bucket holds at least `epsilon`.
    pub fn is_empty(&self) -> bool {
        self.bucket_weight[self.min_bucket] < self.options.epsilon
    }

    /// The end of the bucket where the cumulative weight reaches `percentile` (0..=1) of the
    /// total; the start of the last bucket if that is the one; 0 for an empty histogram.
    pub fn percentile(&self, percentile: f64) -> f64 {
        if self.is_empty() {
            return 0.0;
        }
        let threshold = percentile * self.total_weight;
        let mut partial_sum = 0.0;
        let mut bucket = self.min_bucket;
        while bucket < self.max_bucket {
            partial_sum += self.bucket_weight[bucket];
            if partial_sum >= threshold {
                break;
            }
            bucket += 1;
        }
        if bucket < self.options.num_buckets - 1 {
            self.options.bucket_start(bucket + 1)
        } else {
            self.options.bucket_start(bucket)
        }
    }

    /// Multiplies every weight by `factor` (>= 0); percentiles do not change.
    pub fn scale(&mut self, factor: f64) {
        let factor = if factor.is_nan() || factor < 0.0 {
            0.0
        } else {
            factor
        };
        if self.min_bucket <= self.max_bucket {
            for w in &mut self.bucket_weight[self.min_bucket..=self.max_bucket] {
                *w *= factor;
            }
        }
        self.total_weight *= factor;
        self.update_min_and_max_bucket();
    }

    fn update_min_and_max_bucket(&mut self) {
        let eps = self.options.epsilon;
        let last = self.options.num_buckets - 1;
        while self.bucket_weight[self.min_bucket] < eps && self.min_bucket < last {
            self.min_bucket += 1;
        }
        while self.bucket_weight[self.max_bucket] < eps && self.max_bucket > 0 {
            self.max_bucket -= 1;
        }
    }

    /// Checkpoint form: `(bucket weights scaled so the largest is 10000 and rounded half up,
    /// buckets that round to 0 dropped; total weight)` (upstream `SaveToChekpoint`).
    pub fn save(&self) -> (BTreeMap<usize, u32>, f64) {
        let max = self
            .buckets()
            .fold(0.0_f64, |m, (_, w)| if w > m { w } else { m });
        let ratio = f64::from(MAX_CHECKPOINT_WEIGHT) / max;
        let mut weights = BTreeMap::new();
        for (bucket, weight) in self.buckets() {
            let scaled = weight * ratio;
            if !scaled.is_finite() {
                continue;
            }
            let rounded = round_half_up(scaled).clamp(0, i64::from(u32::MAX)) as u32;
            if rounded > 0 {
                weights.insert(bucket, rounded);
            }
        }
        (weights, self.total_weight)
    }

    /// Adds the samples of a checkpoint: each stored weight × `total_weight / sum(weights)`
    /// (upstream `LoadFromCheckpoint`). Nothing is added when the weights sum to zero.
    pub fn load(
        &mut self,
        weights: &BTreeMap<usize, u32>,
        total_weight: f64,
    ) -> Result<(), HistogramError> {
        if !total_weight.is_finite() || total_weight < 0.0 {
            return Err(HistogramError::BadTotalWeight(total_weight));
        }
        let mut sum: i64 = 0;
        for (&bucket, &weight) in weights {
            sum += i64::from(weight);
            if bucket >= self.options.num_buckets {
                return Err(HistogramError::BucketOutOfRange {
                    bucket: bucket.to_string(),
                    buckets: self.options.num_buckets,
                });
            }
        }
        if sum == 0 {
            return Ok(());
        }
        let ratio = total_weight / sum as f64;
        for (&bucket, &weight) in weights {
            if bucket < self.min_bucket {
                self.min_bucket = bucket;
            }
            if bucket > self.max_bucket {
                self.max_bucket = bucket;
            }
            self.bucket_weight[bucket] += f64::from(weight) * ratio;
        }
        self.total_weight += total_weight;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// upstream `testHistogramOptions`: linear, max 10, bucket 1, epsilon 1e-15.
    fn upstream_options() -> HistogramOptions {
        HistogramOptions::linear(10.0, 1.0, 1e-15).expect("valid")
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs().max(1.0)
    }

    // upstream: util/histogram_test.go TestPercentilesEmptyHistogram
    #[test]
    fn upstream_percentiles_empty() {
        let h = Histogram::new(upstream_options());
        for p in [-0.5, 0.0, 0.5, 1.0, 1.5] {
            assert!(h.percentile(p).abs() < f64::EPSILON);
        }
    }

    // upstream: util/histogram_test.go TestPercentiles
    #[test]
    fn upstream_percentiles() {
        let mut h = Histogram::new(upstream_options());
        for i in 1..=4 {
            h.add_sample(f64::from(i), f64::from(i));
        }
        let table = [
            (0.0, 2.0),
            (0.1, 2.0),
            (0.2, 3.0),
            (0.3, 3.0),
            (0.4, 4.0),
            (0.5, 4.0),
            (0.6, 4.0),
            (0.7, 5.0),
            (0.8, 5.0),
            (0.9, 5.0),
            (1.0, 5.0),
        ];
        for (p, want) in table {
            assert!(close(h.percentile(p), want), "p{p}: {}", h.percentile(p));
        }
    }

    // upstream: util/histogram_test.go TestPercentileOutOfBounds
    #[test]
    fn upstream_percentile_out_of_bounds() {
        let mut h = Histogram::new(HistogramOptions::linear(1.0, 0.1, 1e-15).expect("valid"));
        h.add_sample(0.1, 0.1);
        h.add_sample(0.2, 0.2);
        assert!(close(h.percentile(-0.1), 0.2));
        assert!(close(h.percentile(1.1), 0.3));
        h.add_sample(0.0, 0.1);
        h.add_sample(1.0, 0.2);
        assert!(close(h.percentile(-0.1), 0.1));
        assert!(close(h.percentile(1.1), 1.0));
    }

    // upstream: util/histogram_test.go TestEmptyHistogram
    #[test]
    fn upstream_empty_histogram() {
        let eps = 1e-15;
        let mut h = Histogram::new(HistogramOptions::linear(1.0, 0.1, eps).expect("valid"));
        assert!(h.is_empty());
        h.add_sample(0.1, eps * 2.5);
        assert!(!h.is_empty());
        h.subtract_sample(0.1, eps);
        assert!(!h.is_empty());
        h.subtract_sample(0.1, eps);
        assert!(h.is_empty());
    }

    // upstream: util/histogram_test.go TestNonEmptyOnEpsilonAddition
    #[test]
    fn upstream_non_empty_on_epsilon_addition() {
        let eps = 1e-15;
        let mut h = Histogram::new(HistogramOptions::linear(1.0, 0.1, eps).expect("valid"));
        h.add_sample(9.9, eps * 3.0);
        assert!(!h.is_empty());
        h.add_sample(0.1, eps * 0.3);
        assert!(!h.is_empty());
        h.add_sample(999.9, eps * 0.3);
        assert!(!h.is_empty());
    }

    // upstream: util/histogram_test.go TestHistogramMerge
    #[test]
    fn upstream_merge() {
        let mut h1 = Histogram::new(upstream_options());
        h1.add_sample(1.0, 1.0);
        h1.add_sample(2.0, 1.0);
        let mut h2 = Histogram::new(upstream_options());
        h2.add_sample(2.0, 1.0);
        h2.add_sample(3.0, 1.0);
        let mut expected = Histogram::new(upstream_options());
        for v in [1.0, 2.0, 2.0, 3.0] {
            expected.add_sample(v, 1.0);
        }
        h1.merge(&h2);
        assert_eq!(h1, expected);
    }

    // upstream: util/histogram_test.go TestHistogramSaveToCheckpointEmpty, TestHistogramSaveToCheckpoint,
    // TestHistogramSaveToCheckpointDropsRelativelySmallValues, TestHistogramSaveToCheckpointForMultipleValues
    #[test]
    fn upstream_save_to_checkpoint() {
        type Case = (&'static [(f64, f64)], &'static [(f64, u32)], f64);
        let o = upstream_options();
        let (w, total) = Histogram::new(o).save();
        assert!(w.is_empty() && total.abs() < f64::EPSILON);
        let cases: [Case; 3] = [
            (&[(1.0, 1.0)], &[(1.0, 10_000)], 1.0),
            (&[(1.0, 1.0), (2.0, 100_000.0)], &[(2.0, 10_000)], 100_001.0),
            (
                &[(1.0, 1.0), (2.0, 10_000.0), (3.0, 50.0)],
                &[(1.0, 1), (2.0, 10_000), (3.0, 50)],
                10_051.0,
            ),
        ];
        for (samples, want, want_total) in cases {
            let mut h = Histogram::new(o);
            for (v, w) in samples {
                h.add_sample(*v, *w);
            }
            let (weights, total) = h.save();
            let want: BTreeMap<usize, u32> =
                want.iter().map(|(v, w)| (o.find_bucket(*v), *w)).collect();
            assert_eq!(weights, want);
            assert!(close(total, want_total));
        }
    }

    // upstream: util/histogram_test.go TestHistogramLoadFromCheckpoint,
    // ...ReturnsErrorOnInvalidBucket, ...ReturnsErrorNegativeTotaWeight
    #[test]
    fn upstream_load_from_checkpoint() {
        let mut h = Histogram::new(upstream_options());
        h.load(&BTreeMap::from([(0, 1), (1, 2)]), 6.0)
            .expect("loads");
        assert!(close(h.total_weight(), 6.0));
        assert!(close(h.bucket_weight(0), 2.0));
        assert!(close(h.bucket_weight(1), 4.0));
        let mut h = Histogram::new(upstream_options());
        assert!(h.load(&BTreeMap::from([(99, 1)]), 1.0).is_err());
        assert!(h.load(&BTreeMap::new(), -1.0).is_err());
    }

    fn linear_like() -> HistogramOptions {
        // Exponential buckets [0,10) [10,30) [30,70) [70,150) [150,∞): easy edges to check.
        HistogramOptions::exponential(100.0, 10.0, 2.0, 1e-15).expect("valid")
    }

    // upstream: util/histogram_options_test.go TestLinearHistogramOptions
    #[test]
    fn upstream_linear_options() {
        let o = HistogramOptions::linear(5.0, 0.3, 0.001).expect("valid");
        assert!(close(o.epsilon(), 0.001));
        assert_eq!(o.num_buckets(), 18);
        assert!(o.bucket_start(0).abs() < f64::EPSILON);
        assert!(close(o.bucket_start(17), 5.1));
        for (value, bucket) in [(-1.0, 0), (0.0, 0), (1.3, 4), (100.0, 17)] {
            assert_eq!(o.find_bucket(value), bucket, "value {value}");
        }
    }

    // upstream: util/histogram_options_test.go TestExponentialHistogramOptions
    #[test]
    fn upstream_exponential_options() {
        let o = HistogramOptions::exponential(500.0, 40.0, 1.5, 0.001).expect("valid");
        assert_eq!(o.num_buckets(), 6);
        for (bucket, start) in [
            (0, 0.0),
            (1, 40.0),
            (2, 100.0),
            (3, 190.0),
            (4, 325.0),
            (5, 527.5),
        ] {
            assert!(close(o.bucket_start(bucket), start), "bucket {bucket}");
        }
        for (value, bucket) in [(-1.0, 0), (39.99, 0), (40.0, 1), (100.0, 2), (900.0, 5)] {
            assert_eq!(o.find_bucket(value), bucket, "value {value}");
        }
    }

    #[test]
    fn exponential_options_buckets() {
        let o = HistogramOptions::exponential(100.0, 10.0, 2.0, 1e-15).expect("valid");
        assert_eq!(o.num_buckets(), 5);
        let starts: Vec<f64> = (0..5).map(|b| o.bucket_start(b)).collect();
        assert_eq!(starts, vec![0.0, 10.0, 30.0, 70.0, 150.0]);
        let cases = [
            (-1.0, 0),
            (0.0, 0),
            (9.99, 0),
            (10.0, 1),
            (29.99, 1),
            (30.0, 2),
            (69.99, 2),
            (70.0, 3),
            (149.99, 3),
            (150.0, 4),
            (1e9, 4),
        ];
        for (value, bucket) in cases {
            assert_eq!(o.find_bucket(value), bucket, "value {value}");
        }
    }

    // upstream: util/histogram_options_test.go TestInvalidOptions
    #[test]
    fn invalid_options_rejected() {
        for (max, first, ratio, eps) in [
            (0.0, 1.0, 2.0, 1e-15),
            (10.0, 0.0, 2.0, 1e-15),
            (10.0, 1.0, 1.0, 1e-15),
            (10.0, 1.0, 2.0, 0.0),
        ] {
            assert!(HistogramOptions::exponential(max, first, ratio, eps).is_err());
        }
    }

    #[test]
    fn cpu_and_memory_schemes_match_upstream_construction() {
        let cpu = HistogramOptions::exponential(1000.0, 0.01, 1.0 + BUCKET_SIZE_GROWTH, EPSILON)
            .expect("valid");
        assert_eq!(cpu, HistogramOptions::cpu());
        let mem = HistogramOptions::exponential(1e12, 1e7, 1.0 + BUCKET_SIZE_GROWTH, EPSILON)
            .expect("ok");
        assert_eq!(mem, HistogramOptions::memory());
        assert!(cpu.bucket_start(cpu.num_buckets() - 1) >= 1000.0);
        assert!(cpu.bucket_start(cpu.num_buckets() - 2) < 1000.0);
    }

    #[test]
    fn empty_histogram_percentiles_are_zero() {
        let h = Histogram::new(linear_like());
        for p in [0.0, 0.5, 1.0] {
            assert!(h.percentile(p).abs() < f64::EPSILON);
        }
        assert!(h.is_empty());
    }

    // exponential analogue of upstream util/histogram_test.go TestPercentiles
    #[test]
    fn percentiles_are_bucket_ends() {
        let mut h = Histogram::new(linear_like());
        // Weight 1 in bucket 1 ([10,30)), 2 in bucket 2 ([30,70)), 1 in bucket 3 ([70,150)).
        h.add_sample(15.0, 1.0);
        h.add_sample(40.0, 2.0);
        h.add_sample(100.0, 1.0);
        let cases = [
            (0.0, 30.0),
            (0.25, 30.0),
            (0.5, 70.0),
            (0.75, 70.0),
            (0.76, 150.0),
            (1.0, 150.0),
        ];
        for (p, want) in cases {
            assert!(
                (h.percentile(p) - want).abs() < 1e-9,
                "p{p}: {}",
                h.percentile(p)
            );
        }
    }

    // exponential analogue of upstream util/histogram_test.go TestPercentileOutOfBounds
    #[test]
    fn last_bucket_percentile_is_its_start() {
        let mut h = Histogram::new(linear_like());
        h.add_sample(1e9, 1.0);
        assert!((h.percentile(1.0) - 150.0).abs() < 1e-9);
        h.add_sample(-5.0, 1.0);
        assert!((h.percentile(0.0) - 10.0).abs() < 1e-9);
    }

    #[test]
    fn subtract_never_goes_negative() {
        let mut h = Histogram::new(linear_like());
        h.add_sample(15.0, 1.0);
        h.subtract_sample(15.0, 5.0);
        assert!(h.is_empty());
        assert!(h.bucket_weight(1).abs() < f64::EPSILON);
        assert!(h.total_weight().abs() < f64::EPSILON);
    }

    #[test]
    fn merge_adds_weights() {
        let mut a = Histogram::new(linear_like());
        a.add_sample(15.0, 1.0);
        let mut b = Histogram::new(linear_like());
        b.add_sample(100.0, 3.0);
        a.merge(&b);
        assert!((a.total_weight() - 4.0).abs() < 1e-12);
        assert!((a.percentile(0.2) - 30.0).abs() < 1e-9);
        assert!((a.percentile(0.3) - 150.0).abs() < 1e-9);
    }

    #[test]
    fn save_scales_largest_to_10000() {
        let mut h = Histogram::new(linear_like());
        h.add_sample(1.0, 1.0);
        h.add_sample(15.0, 2.0);
        h.add_sample(40.0, 1e-6); // rounds to 0 and is dropped
        let (weights, total) = h.save();
        assert_eq!(weights, BTreeMap::from([(0, 5000), (1, 10000)]));
        assert!((total - 3.000_001).abs() < 1e-12);
    }

    #[test]
    fn load_spreads_total_weight() {
        let mut h = Histogram::new(linear_like());
        h.load(&BTreeMap::from([(0, 1), (1, 2)]), 6.0)
            .expect("loads");
        assert!((h.bucket_weight(0) - 2.0).abs() < 1e-12);
        assert!((h.bucket_weight(1) - 4.0).abs() < 1e-12);
        assert!((h.total_weight() - 6.0).abs() < 1e-12);
    }

    #[test]
    fn load_rejects_bad_checkpoints() {
        let mut h = Histogram::new(linear_like());
        assert!(h.load(&BTreeMap::from([(99, 1)]), 1.0).is_err());
        assert!(h.load(&BTreeMap::from([(0, 1)]), -1.0).is_err());
        assert!(h.load(&BTreeMap::new(), 5.0).is_ok());
        assert!(h.is_empty());
    }

    #[test]
    fn tiny_weights_are_empty() {
        let o = HistogramOptions::exponential(100.0, 10.0, 2.0, 0.01).expect("valid");
        let mut h = Histogram::new(o);
        h.add_sample(15.0, 0.001);
        assert!(h.is_empty());
        h.add_sample(15.0, 0.01);
        assert!(!h.is_empty());
    }
}
