//! The exponentially decaying histogram (upstream `util/decaying_histogram.go`).
//!
//! A sample at time `t` is added with weight `w * 2^((t - reference) / half_life)`: newer samples
//! weigh more, and a sample loses half its importance per half-life. Only relative weights
//! matter, so the reference timestamp may move at any time by rescaling every weight; it moves
//! forward (to `t` rounded to a multiple of the half-life) when the exponent would pass 100, so
//! floats never overflow.
//!
//! Invariants: the reference timestamp is always a whole multiple of the half-life counted from
//! Go's zero time (0001-01-01T00:00:00Z), as upstream's `time.Round` computes it, so checkpoints
//! written here and upstream carry the same `referenceTimestamp`; `None` stands for Go's zero
//! time (a histogram that never saw a sample), and moving away from it zeroes every weight, as
//! upstream's scale by 2^-(huge) does.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};

use super::histogram::{Histogram, HistogramError, HistogramOptions, round_half_up};

/// When `2^exponent` would exceed `2^MAX_DECAY_EXPONENT` the reference timestamp moves forward.
pub const MAX_DECAY_EXPONENT: i64 = 100;

/// Seconds from Go's zero time (0001-01-01T00:00:00Z) to the Unix epoch.
const GO_ZERO_TO_UNIX_SECONDS: i128 = 62_135_596_800;

/// A histogram whose samples lose half their weight every `half_life`.
#[derive(Clone, Debug, PartialEq)]
pub struct DecayingHistogram {
    histogram: Histogram,
    half_life: SignedDuration,
    reference: Option<Timestamp>,
}

impl DecayingHistogram {
    /// An empty histogram; `half_life` must be positive (upstream default 24 h).
    pub fn new(options: HistogramOptions, half_life: SignedDuration) -> Self {
        Self {
            histogram: Histogram::new(options),
            half_life,
            reference: None,
        }
    }

    /// The underlying (un-decayed view of the) histogram.
    pub fn histogram(&self) -> &Histogram {
        &self.histogram
    }

    /// The reference timestamp (`None` before the first sample).
    pub fn reference_timestamp(&self) -> Option<Timestamp> {
        self.reference
    }

    /// The half-life.
    pub fn half_life(&self) -> SignedDuration {
        self.half_life
    }

    /// See [`Histogram::percentile`]; decay does not change relative order of weights.
    pub fn percentile(&self, percentile: f64) -> f64 {
        self.histogram.percentile(percentile)
    }

    /// True when no bucket holds at least epsilon.
    pub fn is_empty(&self) -> bool {
        self.histogram.is_empty()
    }

    /// Adds a sample of `value` with `weight` observed at `time`.
    pub fn add_sample(&mut self, value: f64, weight: f64, time: Timestamp) {
        let factor = self.decay_factor(time);
        self.histogram.add_sample(value, weight * factor);
    }

    /// Removes a sample of `value` with `weight` observed at `time`.
    pub fn subtract_sample(&mut self, value: f64, weight: f64, time: Timestamp) {
        let factor = self.decay_factor(time);
        self.histogram.subtract_sample(value, weight * factor);
    }

    /// Adds every sample of `other`, first aligning the older reference to the younger one.
    /// Histograms with different half-lives are not merged.
    pub fn merge(&mut self, other: &DecayingHistogram) {
        if self.half_life != other.half_life {
            return;
        }
        match (self.reference, other.reference) {
            (a, Some(b)) if a.is_none_or(|a| a < b) => {
                self.shift_reference(b);
                self.histogram.merge(&other.histogram);
            }
            (Some(a), b) if b.is_none_or(|b| b < a) => {
                let mut other = other.clone();
                other.shift_reference(a);
                self.histogram.merge(&other.histogram);
            }
            _ => self.histogram.merge(&other.histogram),
        }
    }

    fn shift_reference(&mut self, new_reference: Timestamp) {
        let new_reference = round_to_half_life(new_reference, self.half_life);
        let factor = match self.reference {
            // From Go's zero time the exponent is about -10^5: every weight becomes 0.
            None => 0.0,
            Some(old) => {
                let exponent = round_half_up(
                    nanos_between(old, new_reference) as f64 / self.half_life.as_nanos() as f64,
                );
                ldexp(exponent)
            }
        };
        self.histogram.scale(factor);
        self.reference = Some(new_reference);
    }

    fn decay_factor(&mut self, time: Timestamp) -> f64 {
        let max_allowed = self.reference.and_then(|r| {
            let nanos = self.half_life.as_nanos() * i128::from(MAX_DECAY_EXPONENT);
            r.checked_add(SignedDuration::from_nanos_i128(nanos)).ok()
        });
        if max_allowed.is_none_or(|max| time > max) {
            self.shift_reference(time);
        }
        let reference = self.reference.unwrap_or(time);
        (nanos_between(time, reference) as f64 / self.half_life.as_nanos() as f64).exp2()
    }

    /// Checkpoint form: `(reference timestamp, scaled bucket weights, total weight)`.
    pub fn save(&self) -> (Option<Timestamp>, BTreeMap<usize, u32>, f64) {
        let (weights, total) = self.histogram.save();
        (self.reference, weights, total)
    }

    /// Adds a checkpoint's samples and takes its reference timestamp.
    pub fn load(
        &mut self,
        reference: Option<Timestamp>,
        weights: &BTreeMap<usize, u32>,
        total_weight: f64,
    ) -> Result<(), HistogramError> {
        self.histogram.load(weights, total_weight)?;
        self.reference = reference;
        Ok(())
    }
}

/// `later - earlier` in nanoseconds, saturating at Go's `time.Duration` range as upstream's
/// `Time.Sub` does.
fn nanos_between(later: Timestamp, earlier: Timestamp) -> i64 {
    let d = later.as_nanosecond() - earlier.as_nanosecond();
    d.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// `2^exponent` (Go `math.Ldexp(1, exponent)`), 0 or infinity past the float range.
fn ldexp(exponent: i64) -> f64 {
    let e = exponent.clamp(-1100, 1100) as i32;
    2f64.powi(e)
}

/// `time` rounded to a multiple of `half_life` counted from Go's zero time, halves rounding up
/// (Go `time.Time.Round`).
pub fn round_to_half_life(time: Timestamp, half_life: SignedDuration) -> Timestamp {
    let d = half_life.as_nanos();
    if d <= 0 {
        return time;
    }
    let since_zero = time.as_nanosecond() + GO_ZERO_TO_UNIX_SECONDS * 1_000_000_000;
    let r = since_zero.rem_euclid(d);
    let nanos = if r + r < d {
        time.as_nanosecond() - r
    } else {
        time.as_nanosecond() + (d - r)
    };
    Timestamp::from_nanosecond(nanos).unwrap_or(time)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: SignedDuration = SignedDuration::from_hours(24);

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn options() -> HistogramOptions {
        HistogramOptions::exponential(100.0, 10.0, 2.0, 1e-15).expect("valid")
    }

    /// upstream `testHistogramOptions` (linear, max 10, bucket 1) and `startTime`.
    fn upstream() -> (HistogramOptions, Timestamp) {
        (
            HistogramOptions::linear(10.0, 1.0, 1e-15).expect("valid"),
            Timestamp::from_second(1_234_567_890).expect("ts"),
        )
    }

    const HOUR: SignedDuration = SignedDuration::from_hours(1);

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs().max(1.0)
    }

    // upstream: util/decaying_histogram_test.go TestSimpleDecay
    #[test]
    fn upstream_simple_decay() {
        let (o, start) = upstream();
        let mut h = DecayingHistogram::new(o, HOUR);
        h.add_sample(2.0, 1000.0, start);
        h.add_sample(1.0, 1.0, start + HOUR * 20);
        assert!(close(h.percentile(0.999), 2.0));
        assert!(close(h.percentile(1.0), 3.0));
    }

    // upstream: util/decaying_histogram_test.go TestLongtermDecay
    #[test]
    fn upstream_longterm_decay() {
        let (o, start) = upstream();
        let mut h = DecayingHistogram::new(o, HOUR);
        h.add_sample(2.0, 1.0, start);
        h.add_sample(1.0, 1.0, start + HOUR * 101);
        assert!(close(h.percentile(1.0), 2.0));
    }

    // upstream: util/decaying_histogram_test.go TestDecayingHistogramPercentiles
    #[test]
    fn upstream_decaying_percentiles() {
        let (o, start) = upstream();
        let mut h = DecayingHistogram::new(o, HOUR);
        for i in 1..=4 {
            h.add_sample(f64::from(i), f64::from(i), start + HOUR * (i - 1));
        }
        let table = [
            (0.00, 2.0),
            (0.02, 2.0),
            (0.03, 3.0),
            (0.10, 3.0),
            (0.11, 4.0),
            (0.34, 4.0),
            (0.35, 5.0),
            (1.00, 5.0),
        ];
        for (p, want) in table {
            assert!(close(h.percentile(p), want), "p{p}: {}", h.percentile(p));
        }
    }

    // upstream: util/decaying_histogram_test.go TestNoDecay
    #[test]
    fn upstream_no_decay() {
        let (o, start) = upstream();
        let mut h = DecayingHistogram::new(o, HOUR);
        for i in 1..=4 {
            h.add_sample(f64::from(i), f64::from(i), start);
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

    // upstream: util/decaying_histogram_test.go TestDecayingHistogramMerge
    #[test]
    fn upstream_decaying_merge() {
        let (o, start) = upstream();
        let mut h1 = DecayingHistogram::new(o, HOUR);
        h1.add_sample(1.0, 1.0, start);
        h1.add_sample(2.0, 1.0, start + HOUR);
        let mut h2 = DecayingHistogram::new(o, HOUR);
        h2.add_sample(2.0, 1.0, start + HOUR * 2);
        h2.add_sample(3.0, 1.0, start + HOUR);
        let mut expected = DecayingHistogram::new(o, HOUR);
        expected.add_sample(2.0, 1.0, start + HOUR * 2);
        expected.add_sample(2.0, 1.0, start + HOUR);
        expected.add_sample(3.0, 1.0, start + HOUR);
        expected.add_sample(1.0, 1.0, start);
        h1.merge(&h2);
        assert_eq!(h1.reference_timestamp(), expected.reference_timestamp());
        for b in 0..o.num_buckets() {
            let (a, e) = (
                h1.histogram().bucket_weight(b),
                expected.histogram().bucket_weight(b),
            );
            assert!((a - e).abs() <= 1e-15, "bucket {b}: {a} vs {e}");
        }
    }

    // upstream: util/decaying_histogram_test.go TestDecayingHistogramSaveToCheckpoint
    #[test]
    fn upstream_decaying_save() {
        let (o, start) = upstream();
        let mut h = DecayingHistogram::new(o, HOUR);
        h.add_sample(2.0, 1.0, start + HOUR * 100);
        assert!(h.reference_timestamp().is_some());
        let (reference, weights, total) = h.save();
        assert_eq!(reference, h.reference_timestamp());
        assert!(!weights.is_empty());
        assert!(total > 0.0);
    }

    // upstream: util/decaying_histogram_test.go TestDecayingHistogramLoadFromCheckpoint
    #[test]
    fn upstream_decaying_load() {
        let (o, _) = upstream();
        let t = ts("2018-01-02T03:04:05Z");
        let mut h = DecayingHistogram::new(o, HOUR);
        h.load(Some(t), &BTreeMap::from([(0, 1)]), 6.0)
            .expect("loads");
        assert!(!h.is_empty());
        assert_eq!(h.reference_timestamp(), Some(t));
    }

    #[test]
    fn empty_is_zero() {
        let h = DecayingHistogram::new(options(), DAY);
        assert!(h.percentile(0.5).abs() < f64::EPSILON);
        assert!(h.is_empty());
    }

    #[test]
    fn newer_samples_weigh_more() {
        let mut h = DecayingHistogram::new(options(), SignedDuration::from_hours(1));
        let start = ts("2024-01-01T00:00:00Z");
        // Value 15 at start, value 40 twenty hours later: 2^20 times heavier.
        h.add_sample(15.0, 1000.0, start);
        h.add_sample(40.0, 1.0, start + SignedDuration::from_hours(20));
        // upper percentiles all land in 40's bucket [30, 70)
        assert!((h.percentile(0.01) - 70.0).abs() < 1e-9);
        assert!((h.percentile(0.99) - 70.0).abs() < 1e-9);
    }

    #[test]
    fn reference_moves_forward_after_100_half_lives() {
        let mut h = DecayingHistogram::new(options(), SignedDuration::from_hours(1));
        let start = ts("2024-01-01T00:00:00Z");
        h.add_sample(15.0, 1.0, start);
        // 101 half-lives later the old sample is 2^-101 of a new one and disappears.
        let later = start + SignedDuration::from_hours(101);
        h.add_sample(40.0, 1.0, later);
        assert_eq!(h.reference_timestamp(), Some(later));
        assert!((h.percentile(0.0) - 70.0).abs() < 1e-9);
        assert!(h.histogram().bucket_weight(1) < 1e-15);
    }

    #[test]
    fn merge_aligns_references() {
        let start = ts("2024-01-01T00:00:00Z");
        let mut a = DecayingHistogram::new(options(), DAY);
        a.add_sample(15.0, 1.0, start);
        let mut b = DecayingHistogram::new(options(), DAY);
        b.add_sample(40.0, 1.0, start + SignedDuration::from_hours(24 * 200));
        a.merge(&b);
        assert_eq!(a.reference_timestamp(), b.reference_timestamp());
        // a's sample is 200 days old: weight 2^-200 relative, i.e. gone.
        assert!((a.percentile(0.0) - 70.0).abs() < 1e-9);
        let mut c = DecayingHistogram::new(options(), DAY);
        c.merge(&b);
        assert!((c.histogram().total_weight() - b.histogram().total_weight()).abs() < 1e-12);
    }

    #[test]
    fn save_and_load_keep_reference() {
        let t = ts("2024-01-01T05:00:00Z");
        let mut h = DecayingHistogram::new(options(), DAY);
        h.add_sample(15.0, 1.0, t);
        let (reference, weights, total) = h.save();
        assert_eq!(reference, Some(ts("2024-01-01T00:00:00Z")));
        let mut g = DecayingHistogram::new(options(), DAY);
        g.load(reference, &weights, total).expect("loads");
        assert_eq!(g.reference_timestamp(), reference);
        assert!((g.histogram().total_weight() - total).abs() < 1e-12);
    }

    proptest::proptest! {
        /// Decay, shifting and subtraction never make a weight negative.
        #[test]
        fn weights_never_negative(
            ops in proptest::collection::vec((0_i64..40_000_000, 0.0_f64..200.0, 0.0_f64..5.0, proptest::bool::ANY), 1..80),
        ) {
            let mut h = DecayingHistogram::new(options(), SignedDuration::from_hours(1));
            let t0 = ts("2024-01-01T00:00:00Z");
            for (secs, value, weight, subtract) in ops {
                let t = t0 + SignedDuration::from_secs(secs);
                if subtract {
                    h.subtract_sample(value, weight, t);
                } else {
                    h.add_sample(value, weight, t);
                }
                for b in 0..h.histogram().options().num_buckets() {
                    proptest::prop_assert!(h.histogram().bucket_weight(b) >= 0.0);
                }
                proptest::prop_assert!(h.histogram().total_weight() >= -1e-9);
            }
        }
    }

    #[test]
    fn rounding_follows_go_time_round() {
        let cases = [
            ("2021-11-28T11:59:59Z", "2021-11-28T00:00:00Z"),
            ("2021-11-28T12:00:00Z", "2021-11-29T00:00:00Z"),
            ("2021-11-28T14:13:59Z", "2021-11-29T00:00:00Z"),
            ("1970-01-01T00:00:00Z", "1970-01-01T00:00:00Z"),
        ];
        for (input, want) in cases {
            assert_eq!(round_to_half_life(ts(input), DAY), ts(want), "{input}");
        }
    }
}
