//! Estimators: from an aggregate to target, lower bound and upper bound (upstream
//! `logic/estimator.go`, `logic/recommender.go`).
//!
//! For each resource: a percentile of the histogram (target p90, lower p50, upper p95), plus the
//! safety margin (15 %), then the confidence scaling of the bounds — upper × (1 + 1/c),
//! lower × (1 + 0.001/c)^-2, where `c` is [`AggregateContainerState::confidence`] — and finally
//! the pod minimum (25 m CPU, 250 MiB memory) divided evenly between the pod's containers.
//!
//! Invariants: lower bound ≤ target ≤ upper bound whenever the lower percentile ≤ target
//! percentile ≤ upper percentile (confidence scaling only lowers the lower bound and raises the
//! upper one); every amount is a truncated integer (millicores, bytes) in `0..=1e14`.

use jiff::SignedDuration;

use super::aggregate::{
    AggregateContainerState, ResourceAmount, amount_from_float, cpu_amount_from_cores,
    scale_resource,
};

/// The recommender's estimation settings; defaults are upstream's flags.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EstimatorConfig {
    /// `--target-cpu-percentile`, default 0.9.
    pub target_cpu_percentile: f64,
    /// `--recommendation-lower-bound-cpu-percentile`, default 0.5.
    pub lower_bound_cpu_percentile: f64,
    /// `--recommendation-upper-bound-cpu-percentile`, default 0.95.
    pub upper_bound_cpu_percentile: f64,
    /// `--target-memory-percentile`, default 0.9.
    pub target_memory_percentile: f64,
    /// `--recommendation-lower-bound-memory-percentile`, default 0.5.
    pub lower_bound_memory_percentile: f64,
    /// `--recommendation-upper-bound-memory-percentile`, default 0.95.
    pub upper_bound_memory_percentile: f64,
    /// `--recommendation-margin-fraction`, default 0.15.
    pub safety_margin_fraction: f64,
    /// `--pod-recommendation-min-cpu-millicores`, default 25.
    pub pod_min_cpu_millicores: f64,
    /// `--pod-recommendation-min-memory-mb` (MiB, as upstream multiplies by 1024²), default 250.
    pub pod_min_memory_mb: f64,
    /// `--confidence-interval-cpu`: the unit of CPU history confidence, default 24 h.
    pub confidence_interval_cpu: SignedDuration,
    /// `--confidence-interval-memory`: the unit of memory history confidence, default 24 h.
    pub confidence_interval_memory: SignedDuration,
}

impl Default for EstimatorConfig {
    fn default() -> Self {
        Self {
            target_cpu_percentile: 0.9,
            lower_bound_cpu_percentile: 0.5,
            upper_bound_cpu_percentile: 0.95,
            target_memory_percentile: 0.9,
            lower_bound_memory_percentile: 0.5,
            upper_bound_memory_percentile: 0.95,
            safety_margin_fraction: 0.15,
            pod_min_cpu_millicores: 25.0,
            pod_min_memory_mb: 250.0,
            confidence_interval_cpu: SignedDuration::from_hours(24),
            confidence_interval_memory: SignedDuration::from_hours(24),
        }
    }
}

/// Upper bound confidence multiplier: × (1 + 1/c)^1.
pub const UPPER_CONFIDENCE: (f64, f64) = (1.0, 1.0);
/// Lower bound confidence multiplier: × (1 + 0.001/c)^-2.
pub const LOWER_CONFIDENCE: (f64, f64) = (0.001, -2.0);

/// Millicores and bytes for one container.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Amounts {
    /// Millicores.
    pub cpu: ResourceAmount,
    /// Bytes.
    pub memory: ResourceAmount,
}

/// Target and bounds for one container, before any policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Estimate {
    /// The recommended request.
    pub target: Amounts,
    /// Below this the container likely suffers.
    pub lower_bound: Amounts,
    /// Above this resources are likely wasted.
    pub upper_bound: Amounts,
}

/// `base + base × margin` (upstream margin estimators).
pub fn with_margin(base: ResourceAmount, margin_fraction: f64) -> ResourceAmount {
    base + scale_resource(base, margin_fraction)
}

/// `base × (1 + multiplier / confidence)^exponent` (upstream confidence multipliers). With no
/// history (`confidence` 0) the upper bound becomes the maximum amount and the lower bound 0.
pub fn with_confidence(
    base: ResourceAmount,
    (multiplier, exponent): (f64, f64),
    confidence: f64,
) -> ResourceAmount {
    scale_resource(base, (1.0 + multiplier / confidence).powf(exponent))
}

/// The per-container minimums: the pod minimums divided by `containers_per_pod` (at least 1).
pub fn container_minimums(config: &EstimatorConfig, containers_per_pod: usize) -> Amounts {
    let fraction = 1.0 / containers_per_pod.max(1) as f64;
    Amounts {
        cpu: scale_resource(
            cpu_amount_from_cores(config.pod_min_cpu_millicores * 0.001),
            fraction,
        ),
        memory: scale_resource(
            amount_from_float(config.pod_min_memory_mb * 1024.0 * 1024.0),
            fraction,
        ),
    }
}

/// Target, lower and upper bound of `state` (upstream `estimateContainerResources` with the
/// estimator chain of `CreatePodResourceRecommender`).
pub fn estimate(
    state: &AggregateContainerState,
    config: &EstimatorConfig,
    minimums: Amounts,
) -> Estimate {
    let cpu = |p: f64| cpu_amount_from_cores(state.cpu.percentile(p));
    let mem = |p: f64| amount_from_float(state.memory.percentile(p));
    let margin = config.safety_margin_fraction;
    let cpu_confidence = state.confidence_over(config.confidence_interval_cpu);
    let memory_confidence = state.confidence_over(config.confidence_interval_memory);
    let target = Amounts {
        cpu: with_margin(cpu(config.target_cpu_percentile), margin).max(minimums.cpu),
        memory: with_margin(mem(config.target_memory_percentile), margin).max(minimums.memory),
    };
    let lower_bound = Amounts {
        cpu: with_confidence(
            with_margin(cpu(config.lower_bound_cpu_percentile), margin),
            LOWER_CONFIDENCE,
            cpu_confidence,
        )
        .max(minimums.cpu),
        memory: with_confidence(
            with_margin(mem(config.lower_bound_memory_percentile), margin),
            LOWER_CONFIDENCE,
            memory_confidence,
        )
        .max(minimums.memory),
    };
    let upper_bound = Amounts {
        cpu: with_confidence(
            with_margin(cpu(config.upper_bound_cpu_percentile), margin),
            UPPER_CONFIDENCE,
            cpu_confidence,
        )
        .max(minimums.cpu),
        memory: with_confidence(
            with_margin(mem(config.upper_bound_memory_percentile), margin),
            UPPER_CONFIDENCE,
            memory_confidence,
        )
        .max(minimums.memory),
    };
    Estimate {
        target,
        lower_bound,
        upper_bound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vertical::aggregate::{AggregationsConfig, MAX_RESOURCE_AMOUNT};
    use jiff::{SignedDuration, Timestamp};
    use proptest::prelude::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    /// An aggregate with `samples` CPU samples a minute apart (cores from `cpu`) and one memory
    /// peak per sample.
    fn aggregate(
        samples: i64,
        cpu: impl Fn(i64) -> i64,
        mem: impl Fn(i64) -> i64,
    ) -> AggregateContainerState {
        let config = AggregationsConfig::default();
        let t0 = ts("2024-03-01T00:00:00Z");
        let mut agg = AggregateContainerState::new(&config, t0);
        for i in 0..samples {
            let t = t0 + SignedDuration::from_mins(i);
            agg.add_cpu_sample(cpu(i), t);
            agg.add_memory_peak(mem(i), t);
        }
        agg
    }

    // upstream: logic/estimator_test.go TestPercentileEstimator
    #[test]
    fn upstream_percentile_estimator() {
        use crate::vertical::histogram::{Histogram, HistogramOptions};
        let mut cpu = Histogram::new(HistogramOptions::cpu());
        let mut mem = Histogram::new(HistogramOptions::memory());
        for v in [1.0, 2.0, 3.0] {
            cpu.add_sample(v, 1.0);
            mem.add_sample(v * 1e9, 1.0);
        }
        let cpu_est = cpu_amount_from_cores(cpu.percentile(0.2));
        let mem_est = amount_from_float(mem.percentile(0.5));
        assert!(
            (cpu_est as f64 / 1000.0 - 1.0).abs() / 1.0 < 0.05,
            "{cpu_est}"
        );
        assert!((mem_est as f64 - 2e9).abs() / 2e9 < 0.05, "{mem_est}");
    }

    /// 9 CPU samples two minutes apart (upstream's confidence fixture).
    fn nine_samples() -> AggregateContainerState {
        let config = AggregationsConfig::default();
        let t0 = Timestamp::UNIX_EPOCH;
        let mut s = AggregateContainerState::new(&config, t0);
        for i in 0..9 {
            s.add_cpu_sample(1000, t0 + SignedDuration::from_mins(2 * i));
        }
        s
    }

    // upstream: logic/estimator_test.go TestConfidenceMultiplier
    #[test]
    fn upstream_confidence_multiplier() {
        let empty =
            AggregateContainerState::new(&AggregationsConfig::default(), Timestamp::UNIX_EPOCH);
        assert_eq!(
            with_confidence(3140, (1.0, 1.0), empty.confidence()),
            MAX_RESOURCE_AMOUNT
        );
        assert_eq!(with_confidence(3140, (1.0, -1.0), empty.confidence()), 0);
        let s = nine_samples();
        assert!((s.confidence() - 0.00625).abs() < 1e-18);
        assert_eq!(with_confidence(3140, (0.1, 2.0), s.confidence()), 907_460);
        assert_eq!(
            with_confidence(3_140_000_000, (0.1, 2.0), s.confidence()),
            907_460_000_000
        );
    }

    // upstream: logic/estimator_test.go TestConfidenceMultiplierWithCustomInterval
    #[test]
    fn upstream_confidence_custom_interval() {
        let s = nine_samples();
        let c = s.confidence_over(SignedDuration::from_mins(18));
        assert!((c - 0.5).abs() < 1e-15);
        assert_eq!(with_confidence(3140, (0.1, 2.0), c), 4521);
        assert_eq!(with_confidence(3_140_000_000, (0.1, 2.0), c), 4_521_600_000);
    }

    // upstream: logic/estimator_test.go TestConfidenceMultiplierNoHistory
    #[test]
    fn upstream_confidence_no_history() {
        let empty =
            AggregateContainerState::new(&AggregationsConfig::default(), Timestamp::UNIX_EPOCH);
        assert_eq!(
            with_confidence(3140, (0.1, 2.0), empty.confidence()),
            MAX_RESOURCE_AMOUNT
        );
    }

    // upstream: logic/estimator_test.go TestMinResourcesEstimator
    #[test]
    fn upstream_min_resources() {
        assert_eq!(
            3140_i64.max(cpu_amount_from_cores(0.2)), // 3.14 cores (`CPUAmountFromCores(3.14)`)
            3140
        );
        assert_eq!(
            amount_from_float(4e8).max(amount_from_float(2e7)),
            400_000_000
        );
    }

    #[test]
    fn percentile_estimator_uses_bucket_ends() {
        let agg = aggregate(
            3,
            |i| [1000, 2000, 3000][i as usize],
            |i| [1e9 as i64, 2e9 as i64, 3e9 as i64][i as usize],
        );
        let config = EstimatorConfig {
            safety_margin_fraction: 0.0,
            ..EstimatorConfig::default()
        };
        let e = estimate(&agg, &config, Amounts::default());
        let cpu_end = |v: f64| {
            let o = agg.cpu.histogram().options();
            cpu_amount_from_cores(o.bucket_start(o.find_bucket(v) + 1))
        };
        let mem_end = |v: f64| {
            let o = agg.memory.histogram().options();
            amount_from_float(o.bucket_start(o.find_bucket(v) + 1))
        };
        assert_eq!(e.target.cpu, cpu_end(3.0));
        assert_eq!(e.target.memory, mem_end(3e9));
        // Three samples over two minutes: confidence is tiny, so the lower bound shrinks and the
        // upper bound grows by hundreds of times.
        assert!(e.lower_bound.cpu < e.target.cpu / 2);
        assert!(e.upper_bound.cpu > 100 * e.target.cpu);
    }

    // upstream: logic/estimator_test.go TestMarginEstimator
    #[test]
    fn margin_adds_fraction() {
        assert_eq!(with_margin(3140, 0.1), 3454);
        assert_eq!(with_margin(3_140_000_000, 0.1), 3_454_000_000);
        assert_eq!(with_margin(0, 0.15), 0);
    }

    #[test]
    fn confidence_multiplier() {
        // 1 day of history: upper × 2, lower × (1.001)^-2.
        assert_eq!(with_confidence(1000, UPPER_CONFIDENCE, 1.0), 2000);
        assert_eq!(with_confidence(1000, UPPER_CONFIDENCE, 0.5), 3000);
        assert_eq!(with_confidence(1_000_000, LOWER_CONFIDENCE, 1.0), 998_002);
        assert_eq!(
            with_confidence(1000, UPPER_CONFIDENCE, 0.0),
            MAX_RESOURCE_AMOUNT
        );
        assert_eq!(with_confidence(1000, LOWER_CONFIDENCE, 0.0), 0);
    }

    // upstream: logic/estimator_test.go TestGetConfidence (one sample per minute for a day)
    #[test]
    fn confidence_of_a_steady_day() {
        let agg = aggregate(1441, |_| 100, |_| 1_000_000);
        assert!(
            (agg.confidence() - 1.0).abs() < 1e-3,
            "{}",
            agg.confidence()
        );
        // Samples over two days but only 720 of them: confidence 0.5.
        let config = AggregationsConfig::default();
        let t0 = ts("2024-03-01T00:00:00Z");
        let mut sparse = AggregateContainerState::new(&config, t0);
        for i in 0..720 {
            sparse.add_cpu_sample(100, t0 + SignedDuration::from_mins(4 * i));
        }
        assert!((sparse.confidence() - 0.5).abs() < 1e-9);
    }

    // upstream: logic/estimator_test.go TestMinResourcesEstimator and
    // logic/recommender_test.go TestMinResourcesApplied / TestMinResourcesSplitAcrossContainers
    #[test]
    fn minimums_split_across_containers() {
        let c = EstimatorConfig::default();
        assert_eq!(
            container_minimums(&c, 1),
            Amounts {
                cpu: 25,
                memory: 262_144_000
            }
        );
        assert_eq!(
            container_minimums(&c, 2),
            Amounts {
                cpu: 12,
                memory: 131_072_000
            }
        );
        assert_eq!(container_minimums(&c, 0), container_minimums(&c, 1));
        let empty = aggregate(0, |_| 0, |_| 0);
        let e = estimate(&empty, &c, container_minimums(&c, 2));
        assert_eq!(
            e.target,
            Amounts {
                cpu: 12,
                memory: 131_072_000
            }
        );
        assert_eq!(e.lower_bound, e.target);
    }

    // upstream: logic/recommender_test.go TestMinResourcesNotAppliedWhenNotNeeded (steady load)
    #[test]
    fn steady_300m_is_about_345m() {
        let agg = aggregate(3 * 1440, |_| 300, |_| 500 * 1024 * 1024);
        let e = estimate(
            &agg,
            &EstimatorConfig::default(),
            container_minimums(&EstimatorConfig::default(), 1),
        );
        // One bucket above 300m × 1.15: within 5 %.
        let want = 345.0;
        assert!(
            (e.target.cpu as f64 - want).abs() / want < 0.06,
            "{}",
            e.target.cpu
        );
        assert!(e.lower_bound.cpu <= e.target.cpu && e.target.cpu <= e.upper_bound.cpu);
    }

    proptest! {
        /// lower ≤ target ≤ upper for any history.
        #[test]
        fn bounds_are_ordered(
            usage in prop::collection::vec((0_i64..8_000, 1_i64..4_000_000_000), 1..200),
            step in 1_i64..3_600,
            containers in 1_usize..5,
        ) {
            let config = AggregationsConfig::default();
            let t0 = ts("2024-03-01T00:00:00Z");
            let mut agg = AggregateContainerState::new(&config, t0);
            for (i, (cpu, mem)) in usage.iter().enumerate() {
                let t = t0 + SignedDuration::from_secs(step * i as i64);
                agg.add_cpu_sample(*cpu, t);
                agg.add_memory_peak(*mem, t);
            }
            let ec = EstimatorConfig::default();
            let e = estimate(&agg, &ec, container_minimums(&ec, containers));
            prop_assert!(e.lower_bound.cpu <= e.target.cpu);
            prop_assert!(e.target.cpu <= e.upper_bound.cpu);
            prop_assert!(e.lower_bound.memory <= e.target.memory);
            prop_assert!(e.target.memory <= e.upper_bound.memory);
        }
    }
}
