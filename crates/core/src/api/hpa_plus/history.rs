//! The stored form of the load histories an autoscaler carries in its status
//! (`status.minReplicasTuning.loadHistory`, `status.predictive.history`, or a native HPA's
//! annotations): one plain serialized shape, so the API types depend on no algorithm. What it
//! stands for, how it is read back and its bounds: [`crate::horizontal::peak_series`] (and the
//! callers' bounds in [`crate::horizontal::load_history`] and [`crate::horizontal::predictive`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The stored form of a `PeakSeries` ([`crate::horizontal::peak_series`]): per metric a flat
/// `[offset, value, offset, value, …]` list, offsets in buckets from the previous entry (the
/// first from `baseBucket`, buckets of `stepSeconds` since the Unix epoch), values the highest
/// load of the bucket in milli-units. Consecutive buckets cost `1,` plus the value.
///
/// Written as `status.predictive.history` (15-minute buckets; in a native HPA's
/// `plimsoll.dev/predictive-status` annotation) and `status.minReplicasTuning.loadHistory`
/// (hourly buckets; in `plimsoll.dev/min-replicas-tuning-status`). A tuning history written
/// before the two shared this form has no `stepSeconds` and counts from `baseHour`: it reads as
/// hourly buckets from that hour.
///
/// Bound: a metric keeps at most what its caller's retention allows. With the controller's
/// 15-minute buckets and the default 7 days of a daily season (8 days kept) that is 769 pairs
/// of at most 4 (`769,`) + 21 (`-9223372036854775808,`) bytes (with brackets and a name of up
/// to 253 bytes: `predictive::BOUND_BYTES_PER_METRIC_7_DAYS`); a typical metric (consecutive
/// buckets, values below 10⁷ milli) takes about 769 × 10 ≈ 7.7 KB. A 7-day tuning history is
/// 168 hourly pairs (`load_history::BOUND_BYTES_PER_METRIC_7_DAYS`), about 1.7 KB typically.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoredPeakSeries {
    /// The bucket width, seconds; absent in a tuning history written before it was stored
    /// (hourly buckets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_seconds: Option<i64>,
    /// The bucket (since the Unix epoch) the first offset of every list counts from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_bucket: Option<i64>,
    /// Read only: `baseBucket` of a tuning history written before `stepSeconds` was stored
    /// (an hour since the Unix epoch); never written. Kept in the schema so that the API
    /// server does not prune it from objects written by an older controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_hour: Option<i64>,
    /// Per metric: `[buckets after the previous entry, highest milli, …]`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, Vec<i64>>,
    /// Per metric: `[buckets after the previous entry, mean milli, …]`, the mean of what was
    /// recorded in each bucket, counted from `baseBucket` as `metrics` is (only the predictive
    /// series keeps means); a bucket missing here (read from Prometheus's peaks, or stored
    /// before means were kept) has its peak stand in.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub means: BTreeMap<String, Vec<i64>>,
}
