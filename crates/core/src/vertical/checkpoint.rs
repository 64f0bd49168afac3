//! Saving and restoring aggregates as `VerticalPodAutoscalerCheckpoint` status, byte-compatible
//! with upstream (`AggregateContainerState.SaveToCheckpoint` / `LoadFromCheckpoint`).
//!
//! Saving scales each histogram's weights so the largest bucket is 10000, rounds half up and
//! drops buckets that round to 0; `totalWeight` keeps the exact total so a restore spreads it
//! back over the stored buckets in proportion (`weight × totalWeight / Σ weights`). The restore
//! is lossy by design but a fixed point: save → load → save gives the same checkpoint.
//!
//! Invariants: only format version `v3` is read (upstream refuses others too); bucket indices
//! outside the scheme, negative or infinite totals, a negative sample count and malformed keys
//! are errors, never panics (a checkpoint is an object anyone allowed to write it may edit:
//! `crate::stored`). Its size needs no cap of its own: at most one weight per bucket of the
//! scheme is kept, and later counts saturate.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::aggregate::{AggregateContainerState, AggregationsConfig};
use super::decaying::DecayingHistogram;
use super::histogram::HistogramError;
use crate::api::vpa::{
    CHECKPOINT_VERSION, HistogramCheckpoint, VerticalPodAutoscalerCheckpointStatus,
};

/// Why a checkpoint could not be restored.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CheckpointError {
    /// The checkpoint was written in a format version this recommender does not read.
    #[error("unsupported checkpoint version {0:?} (supported: v3)")]
    UnsupportedVersion(Option<String>),
    /// A bucket key is not a non-negative integer.
    #[error("{histogram} histogram: bucket key {key:?} is not a bucket index")]
    BadBucketKey {
        /// `cpu` or `memory`.
        histogram: &'static str,
        /// The key as written.
        key: String,
    },
    /// `totalSamplesCount` is negative.
    #[error("totalSamplesCount {0} is negative")]
    NegativeSampleCount(i64),
    /// The histogram data is inconsistent.
    #[error("{histogram} histogram: {source}")]
    Histogram {
        /// `cpu` or `memory`.
        histogram: &'static str,
        /// What is wrong.
        source: HistogramError,
    },
}

/// The checkpoint status of `aggregate`, stamped with `now` as `lastUpdateTime`.
pub fn save(
    aggregate: &AggregateContainerState,
    now: Timestamp,
) -> VerticalPodAutoscalerCheckpointStatus {
    VerticalPodAutoscalerCheckpointStatus {
        last_update_time: Some(Time(now)),
        version: Some(CHECKPOINT_VERSION.to_owned()),
        cpu_histogram: Some(save_histogram(&aggregate.cpu)),
        memory_histogram: Some(save_histogram(&aggregate.memory)),
        first_sample_start: aggregate.first_sample_start.map(Time),
        last_sample_start: aggregate.last_sample_start.map(Time),
        total_samples_count: Some(aggregate.total_samples_count),
    }
}

fn save_histogram(h: &DecayingHistogram) -> HistogramCheckpoint {
    let (reference, weights, total) = h.save();
    HistogramCheckpoint {
        reference_timestamp: reference.map(Time),
        bucket_weights: Some(
            weights
                .into_iter()
                .map(|(b, w)| (b.to_string(), w))
                .collect(),
        ),
        total_weight: Some(total),
    }
}

/// An aggregate restored from `status`; `now` becomes its creation time.
pub fn load(
    status: &VerticalPodAutoscalerCheckpointStatus,
    config: &AggregationsConfig,
    now: Timestamp,
) -> Result<AggregateContainerState, CheckpointError> {
    if status.version.as_deref() != Some(CHECKPOINT_VERSION) {
        return Err(CheckpointError::UnsupportedVersion(status.version.clone()));
    }
    let mut aggregate = AggregateContainerState::new(config, now);
    let samples = status.total_samples_count.unwrap_or(0);
    if samples < 0 {
        return Err(CheckpointError::NegativeSampleCount(samples));
    }
    aggregate.total_samples_count = samples;
    aggregate.first_sample_start = status.first_sample_start.as_ref().map(|t| t.0);
    aggregate.last_sample_start = status.last_sample_start.as_ref().map(|t| t.0);
    load_histogram(
        &mut aggregate.memory,
        status.memory_histogram.as_ref(),
        "memory",
    )?;
    load_histogram(&mut aggregate.cpu, status.cpu_histogram.as_ref(), "cpu")?;
    Ok(aggregate)
}

fn load_histogram(
    h: &mut DecayingHistogram,
    checkpoint: Option<&HistogramCheckpoint>,
    histogram: &'static str,
) -> Result<(), CheckpointError> {
    let Some(checkpoint) = checkpoint else {
        return Ok(());
    };
    let mut weights = BTreeMap::new();
    for (key, &weight) in checkpoint.bucket_weights.iter().flatten() {
        let bucket: usize = key.parse().map_err(|_| CheckpointError::BadBucketKey {
            histogram,
            key: key.clone(),
        })?;
        weights.insert(bucket, weight);
    }
    h.load(
        checkpoint.reference_timestamp.as_ref().map(|t| t.0),
        &weights,
        checkpoint.total_weight.unwrap_or(0.0),
    )
    .map_err(|source| CheckpointError::Histogram { histogram, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::vpa::VerticalPodAutoscalerCheckpoint;
    use jiff::SignedDuration;
    use proptest::prelude::*;

    const NGINX: &str = include_str!("../../tests/data/vpa-checkpoint-nginx.yaml");

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn nginx() -> VerticalPodAutoscalerCheckpointStatus {
        serde_saphyr::from_str::<VerticalPodAutoscalerCheckpoint>(NGINX)
            .expect("fixture")
            .status
            .expect("status")
    }

    /// The worked example in shared/fixtures/vpa-checkpoint-restore.md, digit for digit.
    #[test]
    fn restore_worked_example() {
        let mut status = nginx();
        let cpu = status.cpu_histogram.as_mut().expect("cpu");
        cpu.bucket_weights = Some(
            [
                (0, 10000),
                (9, 2),
                (11, 1),
                (12, 8),
                (13, 1),
                (16, 6),
                (17, 3),
                (31, 21),
                (34, 1),
                (44, 1),
                (60, 7),
                (75, 365),
            ]
            .into_iter()
            .map(|(b, w): (usize, u32)| (b.to_string(), w))
            .collect(),
        );
        cpu.total_weight = Some(549.378_262_817_123_4);
        let agg = load(
            &status,
            &AggregationsConfig::default(),
            ts("2021-11-29T00:00:00Z"),
        )
        .expect("loads");
        let h = agg.cpu.histogram();
        let expected = [
            (0, "527.4368882652875"),
            (9, "0.10548737765305749"),
            (11, "0.052743688826528745"),
            (12, "0.42194951061222996"),
            (16, "0.31646213295917247"),
            (17, "0.15823106647958624"),
            (31, "1.1076174653571036"),
            (60, "0.3692058217857012"),
            (75, "19.251446421682992"),
        ];
        for (bucket, want) in expected {
            assert_eq!(h.bucket_weight(bucket).to_string(), want, "bucket {bucket}");
        }
        assert_eq!(h.total_weight().to_string(), "549.3782628171234");
        assert_eq!(
            (549.378_262_817_123_4_f64 / 10416.0).to_string(),
            "0.052743688826528745"
        );
    }

    // upstream: model/aggregate_container_state_test.go TestAggregateContainerStateSaveToCheckpoint
    #[test]
    fn save_writes_upstream_shape() {
        let config = AggregationsConfig::default();
        let t = ts("2024-03-01T10:00:00Z");
        let mut agg = AggregateContainerState::new(&config, t);
        agg.add_cpu_sample(1000, t);
        agg.add_cpu_sample(2000, t + SignedDuration::from_mins(1));
        agg.add_memory_peak(1_000_000_000, t + SignedDuration::from_hours(24));
        let now = t + SignedDuration::from_hours(1);
        let status = save(&agg, now);
        assert_eq!(status.version.as_deref(), Some("v3"));
        assert_eq!(status.total_samples_count, Some(2));
        assert_eq!(status.first_sample_start, Some(Time(t)));
        assert_eq!(status.last_update_time, Some(Time(now)));
        let cpu = status.cpu_histogram.expect("cpu");
        assert_eq!(
            cpu.reference_timestamp,
            Some(Time(ts("2024-03-01T00:00:00Z")))
        );
        let weights = cpu.bucket_weights.expect("weights");
        assert_eq!(weights.values().copied().max(), Some(10000));
        assert_eq!(weights.len(), 2);
        let mem = status.memory_histogram.expect("mem");
        assert_eq!(
            mem.bucket_weights
                .expect("w")
                .values()
                .copied()
                .collect::<Vec<_>>(),
            vec![10000]
        );
    }

    // upstream: model/aggregate_container_state_test.go TestAggregateContainerStateLoadFromCheckpoint
    #[test]
    fn load_restores_counts_and_percentiles() {
        let status = nginx();
        let agg = load(
            &status,
            &AggregationsConfig::default(),
            ts("2021-11-29T00:00:00Z"),
        )
        .expect("loads");
        assert_eq!(agg.total_samples_count, 9371);
        assert_eq!(agg.first_sample_start, None);
        assert_eq!(agg.last_sample_start, Some(ts("2021-11-28T14:13:59Z")));
        assert!((agg.cpu.histogram().total_weight() - 560.488_200_428_205_6).abs() < 1e-9);
        assert_eq!(
            agg.memory.reference_timestamp(),
            Some(ts("2021-11-29T00:00:00Z"))
        );
        // re-saving gives the same weights back
        let again = save(&agg, ts("2021-11-29T00:00:00Z"));
        assert_eq!(again.cpu_histogram, status.cpu_histogram);
        assert_eq!(again.memory_histogram, status.memory_histogram);
    }

    // upstream: model/aggregate_container_state_test.go TestAggregateContainerStateLoadFromCheckpointFailsForVersionMismatch
    #[test]
    fn load_refuses_other_versions() {
        let mut status = nginx();
        status.version = Some("v2".into());
        assert!(matches!(
            load(
                &status,
                &AggregationsConfig::default(),
                ts("2021-11-29T00:00:00Z")
            ),
            Err(CheckpointError::UnsupportedVersion(_))
        ));
    }

    #[test]
    fn load_refuses_bad_buckets() {
        let mut status = nginx();
        let cpu = status.cpu_histogram.as_mut().expect("cpu");
        cpu.bucket_weights
            .as_mut()
            .expect("w")
            .insert("x".into(), 1);
        assert!(
            load(
                &status,
                &AggregationsConfig::default(),
                ts("2021-11-29T00:00:00Z")
            )
            .is_err()
        );
        let mut status = nginx();
        let cpu = status.cpu_histogram.as_mut().expect("cpu");
        cpu.bucket_weights
            .as_mut()
            .expect("w")
            .insert("5000".into(), 1);
        assert!(matches!(
            load(
                &status,
                &AggregationsConfig::default(),
                ts("2021-11-29T00:00:00Z")
            ),
            Err(CheckpointError::Histogram { .. })
        ));
    }

    proptest! {
        /// save → load → save is a fixed point.
        #[test]
        fn save_load_save_is_fixed_point(
            samples in prop::collection::vec((0_i64..4_000_000, 0_i64..3_000, 1_i64..8_000_000_000), 1..60)
        ) {
            let config = AggregationsConfig::default();
            let t0 = ts("2024-03-01T00:00:00Z");
            let mut agg = AggregateContainerState::new(&config, t0);
            for (secs, cpu, mem) in samples {
                let t = t0 + SignedDuration::from_secs(secs);
                agg.add_cpu_sample(cpu, t);
                agg.add_memory_peak(mem, t);
            }
            let now = t0 + SignedDuration::from_hours(2000);
            let first = save(&agg, now);
            let restored = load(&first, &config, now).expect("loads");
            let second = save(&restored, now);
            prop_assert_eq!(&first.cpu_histogram, &second.cpu_histogram);
            prop_assert_eq!(&first.memory_histogram, &second.memory_histogram);
            prop_assert_eq!(first, second);
        }
    }
}
