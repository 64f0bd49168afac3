//! What the controller (or `replay`) observed at one reconcile: the target's replicas, its pods
//! with their usage, and the fetched object and external metrics.
//!
//! Amounts are integer milli-units (millicores, milli-bytes, milli-requests) so that sums and
//! comparisons are exact; only ratios are floats. A failed fetch is kept as `Err(message)` so the
//! decision can apply upstream's "some metrics failed" rules.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

pub use super::rollout::RolloutState;

/// The result of fetching one value from a metrics API: milli-units, or why it failed.
pub type Fetched<T> = Result<T, String>;

/// Lifecycle phase of a pod (`status.phase`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum PodPhase {
    /// Accepted but not all containers running.
    Pending,
    /// Bound and running.
    #[default]
    Running,
    /// All containers terminated successfully.
    Succeeded,
    /// All containers terminated, at least one failed.
    Failed,
}

impl PodPhase {
    /// The phase of a pod's `status.phase`; a pod without one, or with `Unknown`, counts as
    /// `Pending` (not running, so neither ready nor sampled).
    pub fn from_status(phase: Option<&str>) -> Self {
        match phase {
            Some("Running") => Self::Running,
            Some("Succeeded") => Self::Succeeded,
            Some("Failed") => Self::Failed,
            _ => Self::Pending,
        }
    }
}

/// One container of a pod (a regular container or an init container).
///
/// Which of them count toward utilization, and which of their requests, is decided in
/// [`super::pod_requests`].
///
/// Serialized (in recordings, [`super::recording`]) with camelCase names; empty maps, `false`
/// and `None` are left out and read back as such.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ContainerSample {
    /// Container name.
    pub name: String,
    /// Requests per resource name (`cpu`, `memory`) from the spec, milli-units.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, i64>,
    /// Limits per resource name from the spec, milli-units.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, i64>,
    /// Usage per resource name from `metrics.k8s.io`, milli-units; absent = no sample.
    #[serde(with = "fetched_map", skip_serializing_if = "BTreeMap::is_empty")]
    pub usage: BTreeMap<String, Fetched<i64>>,
    /// An init container with `restartPolicy: Always` (a native sidecar). Meaningful only in
    /// [`PodSample::init_containers`].
    #[serde(skip_serializing_if = "is_false")]
    pub sidecar: bool,
    /// `status.containerStatuses[].allocatedResources`: the requests the kubelet has admitted,
    /// milli-units; `None` when the status does not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocated: Option<BTreeMap<String, i64>>,
    /// `status.containerStatuses[].resources.requests`: the requests the container runs with,
    /// milli-units; `None` when the status does not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual_requests: Option<BTreeMap<String, i64>>,
    /// `status.containerStatuses[].resources.limits`: the limits the container runs with,
    /// milli-units; `None` when the status does not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual_limits: Option<BTreeMap<String, i64>>,
}

/// One pod selected by the target's selector (serialized as [`ContainerSample`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodSample {
    /// Pod name.
    pub name: String,
    /// `status.phase`.
    pub phase: PodPhase,
    /// The Ready condition's status; `None` when the pod has no Ready condition yet.
    pub ready: Option<bool>,
    /// `metadata.deletionTimestamp` is set.
    #[serde(skip_serializing_if = "is_false")]
    pub deleting: bool,
    /// `status.startTime`; `None` when not started.
    pub start_time: Option<Timestamp>,
    /// Last transition time of the Ready condition.
    pub ready_transition_time: Option<Timestamp>,
    /// When the resource usage sample was taken (default: the reconcile time).
    pub metrics_timestamp: Option<Timestamp>,
    /// The window the resource usage sample covers, seconds (metrics-server: 15–30).
    pub metrics_window_seconds: i64,
    /// Containers with requests, limits and usage.
    pub containers: Vec<ContainerSample>,
    /// Init containers in spec order, sidecars (`restartPolicy: Always`) marked.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<ContainerSample>,
    /// Pod-level requests (`spec.resources.requests`), milli-units; empty when not set.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_requests: BTreeMap<String, i64>,
    /// Pod-level limits (`spec.resources.limits`), milli-units; empty when not set.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_limits: BTreeMap<String, i64>,
    /// `spec.overhead` (RuntimeClass overhead), milli-units.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub overhead: BTreeMap<String, i64>,
    /// Per-pod custom metrics (`custom.metrics.k8s.io`), milli-units; absent = no sample.
    #[serde(with = "fetched_map", skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, Fetched<i64>>,
}

impl Default for PodSample {
    fn default() -> Self {
        Self {
            name: String::new(),
            phase: PodPhase::Running,
            ready: Some(true),
            deleting: false,
            start_time: None,
            ready_transition_time: None,
            metrics_timestamp: None,
            metrics_window_seconds: DEFAULT_METRICS_WINDOW_SECONDS,
            containers: Vec::new(),
            init_containers: Vec::new(),
            pod_requests: BTreeMap::new(),
            pod_limits: BTreeMap::new(),
            overhead: BTreeMap::new(),
            metrics: BTreeMap::new(),
        }
    }
}

/// Window assumed for a resource usage sample when the metrics API does not say (seconds).
pub const DEFAULT_METRICS_WINDOW_SECONDS: i64 = 30;

/// Everything observed at one reconcile (serialized as [`ContainerSample`]; a failed fetch as
/// `{"error": "message"}`, as in a replay scenario).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Observation {
    /// `spec.replicas` of the target's scale subresource.
    pub current_replicas: i32,
    /// `status.replicas` of the scale subresource (default: `current_replicas`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_replicas: Option<i32>,
    /// Pods selected by the target's selector.
    pub pods: Vec<PodSample>,
    /// Object metrics keyed `Kind/name/metric`, milli-units.
    #[serde(with = "fetched_map", skip_serializing_if = "BTreeMap::is_empty")]
    pub object_metrics: BTreeMap<String, Fetched<i64>>,
    /// External metrics keyed by metric name: every series' value (summed, as upstream), milli.
    #[serde(with = "fetched_map", skip_serializing_if = "BTreeMap::is_empty")]
    pub external_metrics: BTreeMap<String, Fetched<Vec<i64>>>,
    /// Prometheus metrics keyed by their name ([`crate::horizontal::proposals::metric_name`]):
    /// the query's value, milli.
    #[serde(with = "fetched_map", skip_serializing_if = "BTreeMap::is_empty")]
    pub prometheus_metrics: BTreeMap<String, Fetched<i64>>,
    /// Other autoscalers whose selector matches the same pods (upstream `AmbiguousSelector`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conflicting_autoscalers: Vec<String>,
    /// The target's rollout state, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutState>,
    /// Set while a `CronHorizontalPodAutoscaler` holds this target (`scaleUpKeepWindow`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_by: Option<String>,
    /// The autoscaler's previous status carries `ScaledToZero=True` (KEP-2021): it, not a
    /// person, put the target at zero, so it may wake it ([`super::preconditions`]).
    #[serde(skip_serializing_if = "is_false")]
    pub scaled_to_zero: bool,
}

// serde's `skip_serializing_if` passes a reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_false(b: &bool) -> bool {
    !*b
}

/// A map of [`Fetched`] values as JSON: a value as itself, a failed fetch as
/// `{"error": "message"}` (the spelling of replay scenarios).
mod fetched_map {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::Fetched;

    #[derive(Serialize)]
    #[serde(untagged)]
    enum Out<'a, T> {
        Failed { error: &'a str },
        Value(&'a T),
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum In<T> {
        Failed { error: String },
        Value(T),
    }

    pub(super) fn serialize<S: Serializer, T: Serialize>(
        map: &BTreeMap<String, Fetched<T>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_map(map.iter().map(|(k, v)| {
            (
                k,
                match v {
                    Ok(v) => Out::Value(v),
                    Err(error) => Out::Failed { error },
                },
            )
        }))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, Fetched<T>>, D::Error> {
        let read = BTreeMap::<String, In<T>>::deserialize(d)?;
        Ok(read
            .into_iter()
            .map(|(k, v)| {
                (
                    k,
                    match v {
                        In::Value(v) => Ok(v),
                        In::Failed { error } => Err(error),
                    },
                )
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_or_missing_phases_count_as_pending() {
        assert_eq!(PodPhase::from_status(Some("Running")), PodPhase::Running);
        assert_eq!(
            PodPhase::from_status(Some("Succeeded")),
            PodPhase::Succeeded
        );
        assert_eq!(PodPhase::from_status(Some("Failed")), PodPhase::Failed);
        assert_eq!(PodPhase::from_status(Some("Unknown")), PodPhase::Pending);
        assert_eq!(PodPhase::from_status(None), PodPhase::Pending);
    }
}
