//! Per-container usage aggregates (upstream `model/aggregate_container_state.go`,
//! `model/container.go`, `model/aggregations_config.go`).
//!
//! * [`AggregateContainerState`] holds the CPU usage histogram and the memory peak histogram
//!   for one container name of one VPA (upstream further splits by pod labels and merges the
//!   parts per container name before estimating; the merged result is the same).
//! * [`ContainerState`] follows one running container instance: it de-duplicates CPU samples,
//!   keeps one memory peak per aggregation interval (replacing the interval's peak in the
//!   aggregate when a higher one arrives) and turns OOM kills into artificial memory samples.
//!
//! Units inside the histograms are upstream's: cores and bytes as floats. At the edges amounts
//! are integers: millicores and bytes ([`ResourceAmount`]).
//!
//! Invariants: CPU samples are added with the constant weight [`CPU_SAMPLE_WEIGHT`] (upstream
//! stopped weighting by the request in v1.4.0); memory peaks with weight 1; first/last sample
//! times and the sample count follow CPU samples only, as upstream's do.

use jiff::{SignedDuration, Timestamp};

use super::decaying::DecayingHistogram;
use super::histogram::{HistogramOptions, MIN_SAMPLE_WEIGHT};
pub use super::resources::{Resource, ResourceAmount};

/// Largest amount upstream represents (1e14).
pub const MAX_RESOURCE_AMOUNT: ResourceAmount = 100_000_000_000_000;

/// Weight of every CPU sample.
pub const CPU_SAMPLE_WEIGHT: f64 = MIN_SAMPLE_WEIGHT;

/// An amount from a float, truncated toward zero and clamped to `0..=MAX_RESOURCE_AMOUNT`
/// (upstream `resourceAmountFromFloat`; NaN becomes 0).
pub fn amount_from_float(amount: f64) -> ResourceAmount {
    if amount > MAX_RESOURCE_AMOUNT as f64 {
        return MAX_RESOURCE_AMOUNT;
    }
    if amount.is_nan() || amount < 0.0 {
        return 0;
    }
    amount as ResourceAmount
}

/// Millicores from cores (upstream `CPUAmountFromCores`).
pub fn cpu_amount_from_cores(cores: f64) -> ResourceAmount {
    amount_from_float(cores * 1000.0)
}

/// Cores from millicores (upstream `CoresFromCPUAmount`).
pub fn cores_from_cpu_amount(millicores: ResourceAmount) -> f64 {
    millicores as f64 / 1000.0
}

/// `amount × factor`, truncated and clamped (upstream `ScaleResource`).
pub fn scale_resource(amount: ResourceAmount, factor: f64) -> ResourceAmount {
    amount_from_float(amount as f64 * factor)
}

/// The recommender's aggregation settings (upstream `AggregationsConfig`); defaults are
/// upstream's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AggregationsConfig {
    /// Length of one memory peak interval. Default 24 h.
    pub memory_aggregation_interval: SignedDuration,
    /// Intervals in the memory window. Default 8.
    pub memory_aggregation_interval_count: i64,
    /// Half-life of memory peak weights. Default 24 h.
    pub memory_histogram_decay_half_life: SignedDuration,
    /// Half-life of CPU sample weights. Default 24 h.
    pub cpu_histogram_decay_half_life: SignedDuration,
    /// Memory multiplier after an OOM kill. Default 1.2.
    pub oom_bump_up_ratio: f64,
    /// Minimum memory increase after an OOM kill, bytes. Default 100 MiB.
    pub oom_min_bump_up_bytes: f64,
}

impl Default for AggregationsConfig {
    fn default() -> Self {
        Self {
            memory_aggregation_interval: SignedDuration::from_hours(24),
            memory_aggregation_interval_count: 8,
            memory_histogram_decay_half_life: SignedDuration::from_hours(24),
            cpu_histogram_decay_half_life: SignedDuration::from_hours(24),
            oom_bump_up_ratio: 1.2,
            oom_min_bump_up_bytes: 100.0 * 1024.0 * 1024.0,
        }
    }
}

impl AggregationsConfig {
    /// The whole memory window: interval × count (default 8 days). Aggregates without samples
    /// for this long expire.
    pub fn memory_aggregation_window(&self) -> SignedDuration {
        self.memory_aggregation_interval
            .checked_mul(
                self.memory_aggregation_interval_count
                    .clamp(0, i64::from(i32::MAX)) as i32,
            )
            .unwrap_or(SignedDuration::MAX)
    }
}

/// The aggregated usage of one container name of one VPA.
#[derive(Clone, Debug, PartialEq)]
pub struct AggregateContainerState {
    /// CPU usage distribution (cores).
    pub cpu: DecayingHistogram,
    /// Memory peak distribution (bytes), one peak per container per interval.
    pub memory: DecayingHistogram,
    /// Start of the first CPU sample.
    pub first_sample_start: Option<Timestamp>,
    /// Start of the last CPU sample.
    pub last_sample_start: Option<Timestamp>,
    /// Number of CPU samples.
    pub total_samples_count: i64,
    /// When this aggregate was created (expiry of aggregates that never got a sample).
    pub creation_time: Timestamp,
}

impl AggregateContainerState {
    /// An empty aggregate created at `now`.
    pub fn new(config: &AggregationsConfig, now: Timestamp) -> Self {
        Self {
            cpu: DecayingHistogram::new(
                HistogramOptions::cpu(),
                config.cpu_histogram_decay_half_life,
            ),
            memory: DecayingHistogram::new(
                HistogramOptions::memory(),
                config.memory_histogram_decay_half_life,
            ),
            first_sample_start: None,
            last_sample_start: None,
            total_samples_count: 0,
            creation_time: now,
        }
    }

    /// Adds a CPU sample of `millicores` measured from `start`.
    pub fn add_cpu_sample(&mut self, millicores: ResourceAmount, start: Timestamp) {
        self.cpu
            .add_sample(cores_from_cpu_amount(millicores), CPU_SAMPLE_WEIGHT, start);
        if self.last_sample_start.is_none_or(|last| start > last) {
            self.last_sample_start = Some(start);
        }
        if self.first_sample_start.is_none_or(|first| start < first) {
            self.first_sample_start = Some(start);
        }
        // Saturating: the count may come from a checkpoint anyone could write.
        self.total_samples_count = self.total_samples_count.saturating_add(1);
    }

    /// Adds a memory peak of `bytes` for the interval ending at `window_end`.
    pub fn add_memory_peak(&mut self, bytes: ResourceAmount, window_end: Timestamp) {
        self.memory.add_sample(bytes as f64, 1.0, window_end);
    }

    /// Removes a memory peak added earlier with the same arguments.
    pub fn subtract_memory_peak(&mut self, bytes: ResourceAmount, window_end: Timestamp) {
        self.memory.subtract_sample(bytes as f64, 1.0, window_end);
    }

    /// Adds everything `other` aggregated (upstream `MergeContainerState`).
    pub fn merge(&mut self, other: &AggregateContainerState) {
        self.cpu.merge(&other.cpu);
        self.memory.merge(&other.memory);
        if self.first_sample_start.is_none()
            || other
                .first_sample_start
                .is_some_and(|o| self.first_sample_start.is_some_and(|s| o < s))
        {
            self.first_sample_start = other.first_sample_start;
        }
        if other
            .last_sample_start
            .is_some_and(|o| self.last_sample_start.is_none_or(|s| o > s))
        {
            self.last_sample_start = other.last_sample_start;
        }
        self.total_samples_count = self
            .total_samples_count
            .saturating_add(other.total_samples_count);
    }

    /// True when no sample arrived for a whole memory window (or, without samples, the
    /// aggregate is that old) — upstream then forgets it.
    pub fn is_expired(&self, config: &AggregationsConfig, now: Timestamp) -> bool {
        let since = if self.total_samples_count == 0 {
            self.creation_time
        } else {
            self.last_sample_start.unwrap_or(self.creation_time)
        };
        now.duration_since(since) >= config.memory_aggregation_window()
    }

    /// Upstream's confidence in this history: `min(days between first and last sample,
    /// samples / 1440)`; a steady sample per minute for N days gives N.
    ///
    /// A missing timestamp counts as Go's zero time, as in upstream: a checkpoint with
    /// `firstSampleStart: null` has a lifespan of Go's longest duration (~292 years), so its
    /// confidence comes from the sample count alone.
    pub fn confidence(&self) -> f64 {
        self.confidence_over(SignedDuration::from_hours(24))
    }

    /// Confidence measured in `interval`s instead of days (upstream `--confidence-interval-cpu`
    /// / `--confidence-interval-memory`): `min(lifespan / interval, samples / interval-in-minutes)`.
    pub fn confidence_over(&self, interval: SignedDuration) -> f64 {
        let go_nanos =
            |t: Option<Timestamp>| t.map_or(-GO_ZERO_TO_UNIX_NANOS, Timestamp::as_nanosecond);
        let lifespan = (go_nanos(self.last_sample_start) - go_nanos(self.first_sample_start))
            .clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as f64;
        let intervals = lifespan / interval.as_nanos() as f64;
        let minutes = interval.as_nanos() as f64 / 60e9;
        let samples = self.total_samples_count as f64 / minutes;
        intervals.min(samples)
    }
}

/// Nanoseconds from Go's zero time (0001-01-01T00:00:00Z) to the Unix epoch.
const GO_ZERO_TO_UNIX_NANOS: i128 = 62_135_596_800 * 1_000_000_000;

/// Why an OOM kill was not recorded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OomError {
    /// The kill happened more than one interval before the current memory window.
    #[error("OOM at {0} is older than the current memory aggregation interval")]
    TooOld(Timestamp),
    /// The artificial sample was rejected (negative amount).
    #[error("OOM sample was rejected")]
    Rejected,
}

/// One running container instance (pod + container name) feeding an aggregate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContainerState {
    /// Start of the latest CPU sample added.
    pub last_cpu_sample_start: Option<Timestamp>,
    /// Highest memory usage in the current interval.
    pub memory_peak: ResourceAmount,
    /// Highest OOM-derived memory in the current interval.
    pub oom_peak: ResourceAmount,
    /// End (exclusive) of the current memory interval.
    pub window_end: Option<Timestamp>,
    /// Start of the latest memory sample added.
    pub last_memory_sample_start: Option<Timestamp>,
}

impl ContainerState {
    /// Adds a CPU sample unless it is negative, a duplicate or out of order. Returns whether it
    /// was added.
    pub fn add_cpu_sample(
        &mut self,
        aggregate: &mut AggregateContainerState,
        millicores: ResourceAmount,
        start: Timestamp,
    ) -> bool {
        if millicores < 0 || self.last_cpu_sample_start.is_some_and(|last| start <= last) {
            return false;
        }
        aggregate.add_cpu_sample(millicores, start);
        self.last_cpu_sample_start = Some(start);
        true
    }

    /// The interval's peak: the larger of the usage peak and the OOM peak.
    pub fn max_memory_peak(&self) -> ResourceAmount {
        self.memory_peak.max(self.oom_peak)
    }

    /// Adds a memory usage sample (upstream `addMemorySample`): within the current interval a
    /// higher value replaces the interval's peak in the aggregate; a sample past the interval
    /// starts a new one. Returns whether the sample was used.
    pub fn add_memory_sample(
        &mut self,
        aggregate: &mut AggregateContainerState,
        config: &AggregationsConfig,
        bytes: ResourceAmount,
        start: Timestamp,
        is_oom: bool,
    ) -> bool {
        if bytes < 0
            || (!is_oom
                && self
                    .last_memory_sample_start
                    .is_some_and(|last| start < last))
        {
            return false;
        }
        self.last_memory_sample_start = Some(start);
        let window_end = *self.window_end.get_or_insert(start);
        let mut add_new_peak = false;
        if start < window_end {
            let old = self.max_memory_peak();
            if old != 0 && bytes > old {
                aggregate.subtract_memory_peak(old, window_end);
                add_new_peak = true;
            }
        } else {
            // Move to the interval containing `start`.
            let interval = config.memory_aggregation_interval;
            let elapsed = start.duration_since(window_end);
            let shift = truncate(elapsed, interval) + interval;
            self.window_end = window_end.checked_add(shift).ok();
            self.memory_peak = 0;
            self.oom_peak = 0;
            add_new_peak = true;
        }
        if add_new_peak {
            if let Some(end) = self.window_end {
                aggregate.add_memory_peak(bytes, end);
            }
            if is_oom {
                self.oom_peak = bytes;
            } else {
                self.memory_peak = bytes;
            }
        }
        true
    }

    /// Records an OOM kill at `time` of a container requesting `requested_bytes` (upstream
    /// `RecordOOM`): an artificial sample of `max(used + min bump, used × ratio)` where `used`
    /// is the larger of the request and the interval's usage peak. Kills older than one
    /// interval before the current window end are refused.
    pub fn record_oom(
        &mut self,
        aggregate: &mut AggregateContainerState,
        config: &AggregationsConfig,
        time: Timestamp,
        requested_bytes: ResourceAmount,
    ) -> Result<(), OomError> {
        if let Some(end) = self.window_end
            && end
                .checked_sub(config.memory_aggregation_interval)
                .is_ok_and(|oldest| time < oldest)
        {
            return Err(OomError::TooOld(time));
        }
        let used = requested_bytes.max(self.memory_peak);
        let needed = (used.saturating_add(amount_from_float(config.oom_min_bump_up_bytes)))
            .max(scale_resource(used, config.oom_bump_up_ratio));
        if self.add_memory_sample(aggregate, config, needed, time, true) {
            Ok(())
        } else {
            Err(OomError::Rejected)
        }
    }
}

/// `d` truncated to a multiple of `m` (Go `Duration.Truncate`); `d` itself when `m <= 0`.
fn truncate(d: SignedDuration, m: SignedDuration) -> SignedDuration {
    let m = m.as_nanos();
    if m <= 0 {
        return d;
    }
    let n = d.as_nanos();
    SignedDuration::from_nanos_i128(n - n % m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    const T0: &str = "2024-03-01T10:00:00Z";
    const MIB: i64 = 1024 * 1024;

    fn setup() -> (AggregateContainerState, ContainerState, AggregationsConfig) {
        let config = AggregationsConfig::default();
        (
            AggregateContainerState::new(&config, ts(T0)),
            ContainerState::default(),
            config,
        )
    }

    // upstream: model/container_test.go TestAggregateContainerUsageSamples (CPU part)
    #[test]
    fn cpu_samples_deduplicated_and_ordered() {
        let (mut agg, mut c, _) = setup();
        let t = ts(T0);
        assert!(c.add_cpu_sample(&mut agg, 500, t));
        assert!(!c.add_cpu_sample(&mut agg, 500, t), "duplicate");
        assert!(
            !c.add_cpu_sample(&mut agg, 500, t - SignedDuration::from_mins(1)),
            "old"
        );
        assert!(
            !c.add_cpu_sample(&mut agg, -1, t + SignedDuration::from_mins(1)),
            "negative"
        );
        assert!(c.add_cpu_sample(&mut agg, 700, t + SignedDuration::from_mins(1)));
        assert_eq!(agg.total_samples_count, 2);
        assert_eq!(agg.first_sample_start, Some(t));
        assert_eq!(
            agg.last_sample_start,
            Some(t + SignedDuration::from_mins(1))
        );
    }

    // upstream: model/container_test.go TestAggregateContainerUsageSamples (memory part)
    #[test]
    fn upstream_memory_samples() {
        let (mut agg, mut c, config) = setup();
        let t = ts(T0);
        let step = SignedDuration::from_hours(12);
        assert!(c.add_memory_sample(&mut agg, &config, 5, t, false));
        assert!(c.add_memory_sample(&mut agg, &config, 10, t + step, false));
        assert_eq!((c.memory_peak, c.window_end), (10, Some(t + step * 2)));
        assert!(c.add_memory_sample(&mut agg, &config, 2, t + step * 2, false));
        assert_eq!((c.memory_peak, c.window_end), (2, Some(t + step * 4)));
        assert!(!c.add_memory_sample(&mut agg, &config, -1000, t + step * 4, false));
        // One peak per interval — 10 at 03-02T10:00 and 2 at 03-03T10:00 — each decayed from
        // the reference 03-02T00:00: 2^(10/24) + 2^(34/24).
        let want = (10.0_f64 / 24.0).exp2() + (34.0_f64 / 24.0).exp2();
        assert!((agg.memory.histogram().total_weight() - want).abs() < 1e-12);
    }

    #[test]
    fn memory_keeps_one_peak_per_interval() {
        let (mut agg, mut c, config) = setup();
        let t = ts(T0);
        assert!(c.add_memory_sample(&mut agg, &config, 100 * MIB, t, false));
        // First sample opens the interval [t, t+24h) with window end t + 24h.
        assert_eq!(c.window_end, Some(t + SignedDuration::from_hours(24)));
        assert!(c.add_memory_sample(
            &mut agg,
            &config,
            300 * MIB,
            t + SignedDuration::from_hours(1),
            false
        ));
        assert!(c.add_memory_sample(
            &mut agg,
            &config,
            200 * MIB,
            t + SignedDuration::from_hours(2),
            false
        ));
        assert_eq!(c.memory_peak, 300 * MIB);
        // Exactly one peak (300Mi) in the histogram.
        let h = agg.memory.histogram();
        let weight: f64 = h.buckets().map(|(_, w)| w).sum();
        assert!((weight - h.total_weight()).abs() < 1e-9);
        let bucket = h.options().find_bucket((300 * MIB) as f64);
        assert!((h.bucket_weight(bucket) - h.total_weight()).abs() < 1e-9);
        // An out-of-order sample is refused.
        assert!(!c.add_memory_sample(&mut agg, &config, 999 * MIB, t, false));
        // A sample two days later opens a new interval with its own peak.
        assert!(c.add_memory_sample(
            &mut agg,
            &config,
            50 * MIB,
            t + SignedDuration::from_hours(49),
            false
        ));
        assert_eq!(c.window_end, Some(t + SignedDuration::from_hours(72)));
        assert_eq!(c.memory_peak, 50 * MIB);
    }

    /// Weight of the memory histogram's bucket holding `bytes`, relative to the total.
    fn share_at(agg: &AggregateContainerState, bytes: i64) -> f64 {
        let h = agg.memory.histogram();
        h.bucket_weight(h.options().find_bucket(bytes as f64)) / h.total_weight()
    }

    // upstream: model/container_test.go TestRecordOOMIncreasedByBumpUp
    #[test]
    fn oom_bumps_by_ratio() {
        let (mut agg, mut c, config) = setup();
        let t = ts(T0);
        c.record_oom(&mut agg, &config, t, 1000 * MIB)
            .expect("recorded");
        assert_eq!(c.oom_peak, 1200 * MIB);
        assert_eq!(c.window_end, Some(t + SignedDuration::from_hours(24)));
        assert!((share_at(&agg, 1200 * MIB) - 1.0).abs() < 1e-12);
    }

    // upstream: model/container_test.go TestRecordOOMDontRunAway
    #[test]
    fn repeated_ooms_do_not_run_away() {
        let (mut agg, mut c, config) = setup();
        let t = ts(T0);
        c.record_oom(&mut agg, &config, t, 1000 * MIB)
            .expect("recorded");
        c.record_oom(&mut agg, &config, t, 999 * MIB)
            .expect("recorded");
        c.record_oom(&mut agg, &config, t, 999 * MIB)
            .expect("recorded");
        assert_eq!(c.oom_peak, 1200 * MIB);
        c.record_oom(&mut agg, &config, t, 2000 * MIB)
            .expect("recorded");
        assert_eq!(c.oom_peak, 2400 * MIB);
        assert!((share_at(&agg, 2400 * MIB) - 1.0).abs() < 1e-12);
    }

    // upstream: model/container_test.go TestRecordOOMIncreasedByMin
    #[test]
    fn oom_bumps_by_minimum() {
        let (mut agg, mut c, config) = setup();
        c.record_oom(&mut agg, &config, ts(T0), MIB)
            .expect("recorded");
        assert_eq!(c.oom_peak, 101 * MIB);
    }

    // upstream: model/container_test.go TestRecordOOMMaxedWithKnownSample
    #[test]
    fn oom_uses_known_peak_above_request() {
        let (mut agg, mut c, config) = setup();
        let t = ts(T0);
        assert!(c.add_memory_sample(&mut agg, &config, 3000 * MIB, t, false));
        c.record_oom(&mut agg, &config, t, 1000 * MIB)
            .expect("recorded");
        assert_eq!(c.oom_peak, 3600 * MIB);
        assert!((share_at(&agg, 3600 * MIB) - 1.0).abs() < 1e-12);
    }

    // upstream: model/container_test.go TestRecordOOMDiscardsOldSample
    #[test]
    fn old_oom_is_discarded() {
        let (mut agg, mut c, config) = setup();
        let t = ts(T0);
        assert!(c.add_memory_sample(&mut agg, &config, 1000 * MIB, t, false));
        let too_old = t - SignedDuration::from_hours(30);
        assert_eq!(
            c.record_oom(&mut agg, &config, too_old, 1000 * MIB),
            Err(OomError::TooOld(too_old))
        );
        assert_eq!(c.max_memory_peak(), 1000 * MIB);
    }

    // upstream: model/container_test.go TestRecordOOMInNewWindow
    #[test]
    fn oom_in_new_window() {
        let (mut agg, mut c, config) = setup();
        let t = ts(T0);
        assert!(c.add_memory_sample(&mut agg, &config, 2000 * MIB, t, false));
        let later = t + SignedDuration::from_hours(48);
        c.record_oom(&mut agg, &config, later, 1000 * MIB)
            .expect("recorded");
        // The bump uses the old interval's usage peak (2000Mi); the new window ends 48 h later.
        assert_eq!(c.oom_peak, 2400 * MIB);
        assert_eq!(c.memory_peak, 0);
        assert_eq!(c.window_end, Some(t + SignedDuration::from_hours(72)));
    }

    // upstream: model/container_test.go TestRecordOOMDiscardsOldSampleWithCustomInterval
    #[test]
    fn old_oom_with_custom_interval() {
        let config = AggregationsConfig {
            memory_aggregation_interval: SignedDuration::from_hours(1),
            ..AggregationsConfig::default()
        };
        let t = ts(T0);
        let mut agg = AggregateContainerState::new(&config, t);
        let mut c = ContainerState::default();
        assert!(c.add_memory_sample(&mut agg, &config, 1000 * MIB, t, false));
        assert!(
            c.record_oom(
                &mut agg,
                &config,
                t - SignedDuration::from_hours(2),
                1000 * MIB
            )
            .is_err()
        );
    }

    // upstream: model/aggregate_container_state_test.go TestAggregateContainerStateIsExpired
    #[test]
    fn expiry_after_memory_window() {
        let (mut agg, _, config) = setup();
        let t = ts(T0);
        assert!(!agg.is_expired(&config, t + SignedDuration::from_hours(24 * 8 - 1)));
        assert!(agg.is_expired(&config, t + SignedDuration::from_hours(24 * 8)));
        agg.add_cpu_sample(100, t + SignedDuration::from_hours(24));
        assert!(!agg.is_expired(&config, t + SignedDuration::from_hours(24 * 8)));
        assert!(agg.is_expired(&config, t + SignedDuration::from_hours(24 * 9)));
    }

    // upstream: model/aggregate_container_state_test.go TestAggregateStateByContainerName (merge)
    #[test]
    fn merge_combines_counts_and_times() {
        let config = AggregationsConfig::default();
        let t = ts(T0);
        let mut a = AggregateContainerState::new(&config, t);
        a.add_cpu_sample(100, t + SignedDuration::from_hours(1));
        let mut b = AggregateContainerState::new(&config, t);
        b.add_cpu_sample(200, t);
        b.add_cpu_sample(300, t + SignedDuration::from_hours(2));
        a.merge(&b);
        assert_eq!(a.total_samples_count, 3);
        assert_eq!(a.first_sample_start, Some(t));
        assert_eq!(a.last_sample_start, Some(t + SignedDuration::from_hours(2)));
        let mut empty = AggregateContainerState::new(&config, t);
        empty.merge(&a);
        assert_eq!(empty.first_sample_start, Some(t));
    }

    #[test]
    fn confidence_without_first_sample_uses_go_zero_time() {
        let (mut agg, _, _) = setup();
        agg.total_samples_count = 9371;
        agg.last_sample_start = Some(ts("2021-11-28T14:13:59Z"));
        assert!((agg.confidence() - 9371.0 / 1440.0).abs() < 1e-12);
        agg.last_sample_start = None;
        assert!(agg.confidence().abs() < 1e-12);
    }

    #[test]
    fn amounts_truncate_and_clamp() {
        assert_eq!(cpu_amount_from_cores(0.3456), 345);
        assert_eq!(amount_from_float(-3.0), 0);
        assert_eq!(amount_from_float(f64::NAN), 0);
        assert_eq!(amount_from_float(1e20), MAX_RESOURCE_AMOUNT);
        assert_eq!(scale_resource(1000, 1.15), 1150);
    }
}
