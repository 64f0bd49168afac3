//! The stored forms of the load histories an autoscaler carries in its status
//! (`status.minReplicasTuning.loadHistory`, `status.predictive.history`, or a native HPA's
//! annotations): plain serialized shapes, so the API types depend on no algorithm. What they
//! stand for, how they are read back and their bounds: [`crate::horizontal::load_history`] and
//! [`crate::horizontal::predictive`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The stored form of a `LoadHistory` ([`crate::horizontal::load_history`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoredLoadHistory {
    /// The hour (since the Unix epoch) the first offset of every list counts from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_hour: Option<i64>,
    /// Per metric: `[hours after the previous entry, peak milli, …]`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, Vec<i64>>,
}

/// The stored form of a `LoadSeries` ([`crate::horizontal::predictive`]) (`status.predictive.history`, or in a native HPA's
/// `plimsoll.dev/predictive-status` annotation): per metric a flat
/// `[offset, value, offset, value, …]` list, offsets in buckets from the previous entry (the
/// first from `baseBucket`, buckets of `stepSeconds` since the Unix epoch), values the highest
/// load of the bucket in milli-units. Consecutive buckets cost `1,` plus the value.
///
/// Bound: a metric keeps at most `keep_seconds` / `stepSeconds` + 1 buckets. With the
/// controller's 15-minute buckets and the default 7 days of a daily season (8 days kept) that
/// is 769 pairs of at most 4 (`769,`) + 21 (`-9223372036854775808,`) bytes:
/// `BOUND_BYTES_PER_METRIC_7_DAYS` with brackets and a name of up to 253 bytes; a typical
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
    /// Per metric: `[buckets after the previous entry, mean milli, …]`, the mean of what was
    /// recorded in each bucket, counted from `baseBucket` as `metrics` is; a bucket missing
    /// here (read from Prometheus's peaks, or stored before means were kept) has its peak
    /// stand in.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub means: BTreeMap<String, Vec<i64>>,
}
