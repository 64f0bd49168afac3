//! Update priority: which pods of a VPA deserve an update, and in which order.
//!
//! Semantics follow the upstream VPA updater (`pkg/updater/priority`):
//!
//! * **resourceDiff** of a pod is, summed over resources, `|Σrequests − Σtargets| / Σrequests`
//!   over the containers that have a recommendation (a total request of 0 counts as 1 milli-unit).
//! * A pod whose request for some container lies outside `[lowerBound, upperBound]` (or has no
//!   request at all) always qualifies.
//! * Otherwise a pod qualifies only once it has lived `podLifetimeUpdateThreshold` (12 h) and its
//!   resourceDiff reaches `MinChangePriority` (0.1) — unless a container was OOM-killed within
//!   `evictAfterOOMThreshold` (10 min) of starting ("quick OOM"), which qualifies it at once as long
//!   as the update would change something.
//! * Order: pods where any container would grow first, then larger resourceDiff first.
//! * Per-VPA `evictionRequirements` finally drop pods whose change goes in a direction the user
//!   did not ask for.
//!
//! Amounts are exact [`Quantity`](crate::quantity::Quantity) values compared by value (upstream compares `MilliValue()`).
//! Time is a parameter (`now`).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use jiff::{SignedDuration, Timestamp};

use crate::quantity::QuantityError;

// Re-exported: callers (the updater, its replay) name these through `priority`.
use super::resources::resources_from_k8s;
pub use super::resources::{
    ContainerRecommendation, RequestsByContainer, Resource, Resources, recommendation_for,
};
use super::startup_boost::{OriginalResources, boosted_containers};

/// One container of a pod as the updater and the webhook see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodContainer {
    /// Container name.
    pub name: String,
    /// Effective requests: the allocated resources from `status.containerStatuses[].resources`
    /// when present (they reflect in-place resizes), else `spec.containers[].resources.requests`.
    pub requests: Resources,
    /// Limits from the spec.
    pub limits: Resources,
}

/// The last termination of a container (`status.containerStatuses[].lastState.terminated`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastTermination {
    /// Container name.
    pub container: String,
    /// `reason`; upstream looks for `OOMKilled`.
    pub reason: String,
    /// When the terminated run started.
    pub started_at: Timestamp,
    /// When it ended.
    pub finished_at: Timestamp,
}

/// Phase of a pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PodPhase {
    /// Not yet running (scheduling, pulling images…).
    Pending,
    /// Running.
    #[default]
    Running,
    /// Finished successfully.
    Succeeded,
    /// Finished with an error.
    Failed,
    /// Node lost contact.
    Unknown,
}

/// Owner of a pod that creates replicas (the controller owner reference).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Owner {
    /// Kind: `ReplicaSet`, `StatefulSet`, `ReplicationController`, `DaemonSet`, `Job`, or another.
    pub kind: String,
    /// Name, in the pod's namespace.
    pub name: String,
}

/// Where an in-place resize of the pod stands, from its `PodResizePending` /
/// `PodResizeInProgress` conditions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResizeStatus {
    /// No resize pending or in progress.
    #[default]
    None,
    /// `PodResizePending` with reason `Deferred`: the node may fit it later.
    Deferred,
    /// `PodResizePending` with reason `Infeasible`: the node can never fit it.
    Infeasible,
    /// `PodResizePending` with another reason.
    PendingOther,
    /// `PodResizeInProgress` without reason or message.
    InProgress,
    /// `PodResizeInProgress` with reason `Error`.
    Error,
    /// `PodResizeInProgress` with another reason or a message.
    InProgressOther,
}

/// Everything the updater knows about one pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodSnapshot {
    /// Pod name (unique within the VPA's namespace).
    pub name: String,
    /// Phase.
    pub phase: PodPhase,
    /// The controller owner, if any.
    pub owner: Option<Owner>,
    /// Containers in spec order.
    pub containers: Vec<PodContainer>,
    /// Init containers (native sidecars get recommendations too).
    pub init_containers: Vec<PodContainer>,
    /// Containers listed in the `vpaObservedContainers` annotation; `None` when the annotation
    /// is absent or unparsable (then every container counts).
    pub observed_containers: Option<BTreeSet<String>>,
    /// `status.startTime`.
    pub start_time: Option<Timestamp>,
    /// Last terminations of the containers.
    pub last_terminations: Vec<LastTermination>,
    /// In-place resize state.
    pub resize: ResizeStatus,
    /// The message of the pod's resize condition (the kubelet's why), when it has one.
    pub resize_message: Option<String>,
    /// The requests the spec asks for, per container (`spec.containers[].resources.requests`):
    /// they differ from [`PodContainer::requests`] while a resize is pending, and are what the
    /// kubelet found infeasible when it says so.
    pub desired_requests: RequestsByContainer,
    /// When the updater last asked for an in-place resize of this pod (remembered by the service).
    pub last_in_place_attempt: Option<Timestamp>,
    /// Resize values the pod's node could not fit, remembered by the service for `InPlace`
    /// (upstream `infeasibleAttempts`); see [`super::resize_backoff`].
    pub infeasible: Option<RequestsByContainer>,
    /// Since when the pod is Ready (its `Ready` condition's `lastTransitionTime` while `True`).
    pub ready_since: Option<Timestamp>,
    /// Containers whose CPU startup boost is on (`vpaCpuStartupBoost/<name>` annotations), with
    /// their original resources when the annotation reads.
    pub boosted: BTreeMap<String, Option<OriginalResources>>,
}

impl PodSnapshot {
    fn observes(&self, container: &str) -> bool {
        self.observed_containers
            .as_ref()
            .is_none_or(|set| set.contains(container))
    }
}

impl PodSnapshot {
    /// Reads what the updater needs from a Kubernetes pod.
    ///
    /// Requests come from `status.containerStatuses[].resources` when the kubelet reports them
    /// (they reflect in-place resizes), else from the spec, as upstream
    /// `ContainerRequestsAndLimits`. Init containers count only when they are native sidecars
    /// (`restartPolicy: Always`). `last_in_place_attempt` is left for the caller, which remembers
    /// its own resize requests.
    pub fn from_pod(pod: &k8s_openapi::api::core::v1::Pod) -> Result<PodSnapshot, QuantityError> {
        let status = pod.status.as_ref();
        let statuses: Vec<&k8s_openapi::api::core::v1::ContainerStatus> = status
            .into_iter()
            .flat_map(|s| {
                s.container_statuses
                    .iter()
                    .flatten()
                    .chain(s.init_container_statuses.iter().flatten())
            })
            .collect();
        let container =
            |c: &k8s_openapi::api::core::v1::Container| -> Result<PodContainer, QuantityError> {
                let spec = c.resources.as_ref();
                let reported = statuses
                    .iter()
                    .find(|s| s.name == c.name)
                    .and_then(|s| s.resources.as_ref());
                let requests = match reported {
                    Some(r) => r.requests.as_ref(),
                    None => spec.and_then(|r| r.requests.as_ref()),
                };
                Ok(PodContainer {
                    name: c.name.clone(),
                    requests: resources_from_k8s(requests)?,
                    limits: resources_from_k8s(spec.and_then(|r| r.limits.as_ref()))?,
                })
            };
        let spec = pod.spec.as_ref();
        let containers = spec
            .into_iter()
            .flat_map(|s| &s.containers)
            .map(container)
            .collect::<Result<_, _>>()?;
        let init_containers = spec
            .into_iter()
            .flat_map(|s| s.init_containers.iter().flatten())
            .filter(|c| c.restart_policy.as_deref() == Some("Always"))
            .map(container)
            .collect::<Result<_, _>>()?;
        let phase = match status.and_then(|s| s.phase.as_deref()) {
            Some("Pending") => PodPhase::Pending,
            Some("Succeeded") => PodPhase::Succeeded,
            Some("Failed") => PodPhase::Failed,
            Some("Unknown") => PodPhase::Unknown,
            _ => PodPhase::Running,
        };
        let owner = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| Owner {
                kind: o.kind.clone(),
                name: o.name.clone(),
            });
        let observed_containers = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(OBSERVED_CONTAINERS_ANNOTATION))
            .and_then(|v| parse_observed_containers(v));
        let last_terminations = statuses
            .iter()
            .filter_map(|s| {
                let t = s.last_state.as_ref()?.terminated.as_ref()?;
                Some(LastTermination {
                    container: s.name.clone(),
                    reason: t.reason.clone().unwrap_or_default(),
                    started_at: t.started_at.as_ref()?.0,
                    finished_at: t.finished_at.as_ref()?.0,
                })
            })
            .collect();
        let (resize, resize_message) = status.map_or((ResizeStatus::None, None), resize_status);
        let desired_requests = desired_requests(spec)?;
        Ok(PodSnapshot {
            name: pod.metadata.name.clone().unwrap_or_default(),
            phase,
            owner,
            containers,
            init_containers,
            observed_containers,
            start_time: status.and_then(|s| s.start_time.as_ref()).map(|t| t.0),
            last_terminations,
            resize,
            resize_message,
            desired_requests,
            last_in_place_attempt: None,
            infeasible: None,
            ready_since: status.and_then(ready_since),
            boosted: pod
                .metadata
                .annotations
                .as_ref()
                .map(boosted_containers)
                .unwrap_or_default(),
        })
    }
}

/// Whether [`PodSnapshot::from_pod`] reads the pod annotation `key`: the containers the webhook
/// saw, and the webhook's record of a container's resources before its startup boost. A cache
/// that takes snapshots keeps these and may drop every other annotation.
pub fn snapshot_annotation(key: &str) -> bool {
    key == OBSERVED_CONTAINERS_ANNOTATION
        || key.starts_with(super::startup_boost::ANNOTATION_PREFIX)
}

/// The spec requests of the containers and native sidecars, by name.
fn desired_requests(
    spec: Option<&k8s_openapi::api::core::v1::PodSpec>,
) -> Result<RequestsByContainer, QuantityError> {
    spec.into_iter()
        .flat_map(|s| {
            s.containers.iter().chain(
                s.init_containers
                    .iter()
                    .flatten()
                    .filter(|c| c.restart_policy.as_deref() == Some("Always")),
            )
        })
        .map(|c| {
            let requests = c.resources.as_ref().and_then(|r| r.requests.as_ref());
            Ok((c.name.clone(), resources_from_k8s(requests)?))
        })
        .collect()
}

/// When the pod's `Ready` condition last turned `True`, while it is.
fn ready_since(status: &k8s_openapi::api::core::v1::PodStatus) -> Option<Timestamp> {
    status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

/// The in-place resize state from a pod's `PodResizePending` / `PodResizeInProgress` conditions,
/// with the condition's message.
fn resize_status(status: &k8s_openapi::api::core::v1::PodStatus) -> (ResizeStatus, Option<String>) {
    let condition = |kind: &str| {
        status
            .conditions
            .as_ref()
            .and_then(|cs| cs.iter().find(|c| c.type_ == kind && c.status == "True"))
    };
    let message =
        |c: &k8s_openapi::api::core::v1::PodCondition| c.message.clone().filter(|m| !m.is_empty());
    if let Some(c) = condition("PodResizePending") {
        let state = match c.reason.as_deref() {
            Some("Deferred") => ResizeStatus::Deferred,
            Some("Infeasible") => ResizeStatus::Infeasible,
            _ => ResizeStatus::PendingOther,
        };
        (state, message(c))
    } else if let Some(c) = condition("PodResizeInProgress") {
        let state = match (
            c.reason.as_deref().unwrap_or(""),
            c.message.as_deref().unwrap_or(""),
        ) {
            ("", "") => ResizeStatus::InProgress,
            ("Error", _) => ResizeStatus::Error,
            _ => ResizeStatus::InProgressOther,
        };
        (state, message(c))
    } else {
        (ResizeStatus::None, None)
    }
}

/// The annotation the webhook writes with the containers it saw.
pub const OBSERVED_CONTAINERS_ANNOTATION: &str = "vpaObservedContainers";

/// Parses a `vpaObservedContainers` value (`"app, sidecar"`). `None` when any name is not a
/// valid DNS-1123 label, as upstream then ignores the annotation.
pub fn parse_observed_containers(value: &str) -> Option<BTreeSet<String>> {
    if value.is_empty() {
        return Some(BTreeSet::new());
    }
    let mut names = BTreeSet::new();
    for name in value.split(", ") {
        if !is_dns1123_label(name) {
            return None;
        }
        names.insert(name.to_owned());
    }
    Some(names)
}

fn is_dns1123_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// How much and in which direction a pod's requests differ from the recommendation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PodPriority {
    /// Some container's request lies outside `[lowerBound, upperBound]` (or is missing).
    pub outside_recommended_range: bool,
    /// Some container would get a larger request.
    pub scale_up: bool,
    /// Σ over resources of `|Σrequest − Σtarget| / Σrequest` (dimensionless).
    pub resource_diff: f64,
}

impl PodPriority {
    /// Update order: `Less` means `self` is updated first (scale-up first, then larger diff).
    pub fn update_order(&self, other: &PodPriority) -> Ordering {
        other
            .scale_up
            .cmp(&self.scale_up)
            .then_with(|| other.resource_diff.total_cmp(&self.resource_diff))
    }
}

/// Computes the update priority of a pod against (processed) recommendations.
///
/// Containers not listed in `vpaObservedContainers` and containers without a recommendation are
/// left out, as upstream does.
pub fn update_priority(
    pod: &PodSnapshot,
    recommendations: &[ContainerRecommendation],
) -> PodPriority {
    let mut outside = false;
    let mut scale_up = false;
    // Per resource: (Σ requests, Σ targets, any target seen). Saturating: a pod's requests and a
    // policy's minAllowed are the tenant's, and quantities near i128's bound parse.
    let mut totals = [(0i128, 0i128, false); 2];
    for container in pod.containers.iter().chain(&pod.init_containers) {
        if !pod.observes(&container.name) {
            continue;
        }
        let Some(rec) = recommendation_for(recommendations, &container.name) else {
            continue;
        };
        for (i, resource) in Resource::ALL.into_iter().enumerate() {
            let Some(target) = rec.target.get(resource) else {
                continue;
            };
            totals[i].1 = totals[i].1.saturating_add(target.milli());
            totals[i].2 = true;
            if let Some(request) = container.requests.get(resource) {
                totals[i].0 = totals[i].0.saturating_add(request.milli());
                if target > request {
                    scale_up = true;
                }
                let below = rec.lower_bound.get(resource).is_some_and(|lb| request < lb);
                let above = rec.upper_bound.get(resource).is_some_and(|ub| request > ub);
                if below || above {
                    outside = true;
                }
            } else {
                // No request: the namespace default (or nothing) applies; upstream treats it as
                // 0 and always updates.
                scale_up = true;
                outside = true;
            }
        }
    }
    let mut resource_diff = 0.0;
    for (request, target, seen) in totals {
        if !seen {
            continue;
        }
        // Sums of milli-units as upstream; a missing total request counts as one milli-unit.
        let request = (request as f64).max(1.0);
        resource_diff += (request - target as f64).abs() / request;
    }
    PodPriority {
        outside_recommended_range: outside,
        scale_up,
        resource_diff,
    }
}

/// Thresholds of the priority decision (updater flags).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UpdateConfig {
    /// Minimum resourceDiff that justifies updating a pod inside the recommended range
    /// (`--min-change-priority`? upstream constant `MinChangePriority`; default 0.1).
    pub min_change_priority: f64,
    /// Pods inside the recommended range are left alone until this old (default 12 h).
    pub pod_lifetime_update_threshold: SignedDuration,
    /// An OOM kill within this long after a container started makes the pod eligible at once
    /// (`--evict-after-oom-threshold`, default 10 min; per-VPA `evictAfterOOMSeconds` wins).
    pub evict_after_oom_threshold: SignedDuration,
}

impl Default for UpdateConfig {
    fn default() -> Self {
        UpdateConfig {
            min_change_priority: 0.1,
            pod_lifetime_update_threshold: SignedDuration::from_hours(12),
            evict_after_oom_threshold: SignedDuration::from_mins(10),
        }
    }
}

/// Why a pod was accepted for update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcceptReason {
    /// A request lies outside the recommended range.
    OutsideRecommendedRange,
    /// A container was OOM-killed soon after starting.
    QuickOom,
    /// The pod is old enough and its requests differ enough from the target.
    LongLivedAndDiverged,
}

impl fmt::Display for AcceptReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AcceptReason::OutsideRecommendedRange => {
                "requests outside the recommended range [lowerBound, upperBound]"
            }
            AcceptReason::QuickOom => "a container was OOM-killed soon after it started",
            AcceptReason::LongLivedAndDiverged => {
                "pod older than the lifetime threshold and requests differ enough from the target"
            }
        })
    }
}

/// Why a pod was left alone by the priority decision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PrioritySkip {
    /// Inside the range and `status.startTime` unknown.
    MissingStartTime,
    /// Inside the range and younger than the lifetime threshold.
    ShortLived,
    /// Inside the range and resourceDiff below `min_change_priority`.
    DiffTooLow {
        /// The pod's resourceDiff.
        resource_diff: f64,
        /// The threshold.
        min: f64,
    },
    /// Quick OOM, but the recommendation equals the requests.
    NoChange,
    /// Dropped by the VPA's `evictionRequirements`.
    EvictionRequirements,
}

impl fmt::Display for PrioritySkip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrioritySkip::MissingStartTime => {
                f.write_str("requests within the recommended range and pod start time unknown")
            }
            PrioritySkip::ShortLived => f.write_str(
                "requests within the recommended range and pod younger than the lifetime threshold",
            ),
            PrioritySkip::DiffTooLow { resource_diff, min } => write!(
                f,
                "requests within the recommended range and resourceDiff {resource_diff:.3} below {min}"
            ),
            PrioritySkip::NoChange => {
                f.write_str("quick OOM but the recommendation would not change the requests")
            }
            PrioritySkip::EvictionRequirements => {
                f.write_str("the change does not meet the VPA's evictionRequirements")
            }
        }
    }
}

/// The priority decision for one pod.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PriorityDecision {
    /// The pod's priority (also for skipped pods, for reporting).
    pub priority: PodPriority,
    /// Accepted (with why) or skipped (with why).
    pub verdict: Result<AcceptReason, PrioritySkip>,
}

/// True when a container that VPA scales (observed, scaling mode not Off) was OOM-killed less
/// than `threshold` after it started.
pub fn quick_oom(
    pod: &PodSnapshot,
    scaling_off: &BTreeSet<String>,
    threshold: SignedDuration,
) -> bool {
    pod.last_terminations.iter().any(|t| {
        pod.observes(&t.container)
            && !scaling_off.contains(&t.container)
            && t.reason == "OOMKilled"
            && t.finished_at.duration_since(t.started_at) < threshold
    })
}

/// Decides whether a pod qualifies for an update (upstream `UpdatePriorityCalculator.AddPod`).
///
/// `scaling_off` names containers whose resource policy has `mode: Off`; they do not count for
/// the quick-OOM rule.
pub fn decide_priority(
    pod: &PodSnapshot,
    recommendations: &[ContainerRecommendation],
    scaling_off: &BTreeSet<String>,
    config: &UpdateConfig,
    now: Timestamp,
) -> PriorityDecision {
    let priority = update_priority(pod, recommendations);
    let quick = quick_oom(pod, scaling_off, config.evict_after_oom_threshold);
    let verdict = if priority.outside_recommended_range {
        Ok(AcceptReason::OutsideRecommendedRange)
    } else if quick {
        if priority.resource_diff == 0.0 {
            Err(PrioritySkip::NoChange)
        } else {
            Ok(AcceptReason::QuickOom)
        }
    } else {
        match pod.start_time {
            None => Err(PrioritySkip::MissingStartTime),
            Some(start) if now < start + config.pod_lifetime_update_threshold => {
                Err(PrioritySkip::ShortLived)
            }
            Some(_) if priority.resource_diff < config.min_change_priority => {
                Err(PrioritySkip::DiffTooLow {
                    resource_diff: priority.resource_diff,
                    min: config.min_change_priority,
                })
            }
            Some(_) => Ok(AcceptReason::LongLivedAndDiverged),
        }
    };
    // Upstream also refuses a quick-OOM pod whose diff is 0 after the range check passed.
    let verdict = match verdict {
        Ok(_) if quick && priority.resource_diff == 0.0 => Err(PrioritySkip::NoChange),
        v => v,
    };
    PriorityDecision { priority, verdict }
}

/// Direction a VPA may require a change to go before a pod is evicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeRequirement {
    /// Only when the target is above the request.
    TargetHigherThanRequests,
    /// Only when the target is below the request.
    TargetLowerThanRequests,
}

/// One entry of `spec.updatePolicy.evictionRequirements`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvictionRequirement {
    /// Resources the requirement looks at; any one of them meeting it is enough.
    pub resources: Vec<Resource>,
    /// The required direction.
    pub change_requirement: ChangeRequirement,
}

/// Upstream `scalingDirectionPodEvictionAdmission.Admit`: true when there are no requirements,
/// when some container with a recommendation lacks a CPU or memory request, or when for some
/// container every requirement holds for at least one of its resources.
pub fn meets_eviction_requirements(
    pod: &PodSnapshot,
    recommendations: &[ContainerRecommendation],
    requirements: &[EvictionRequirement],
) -> bool {
    if requirements.is_empty() {
        return true;
    }
    pod.containers.iter().any(|container| {
        let Some(rec) = recommendation_for(recommendations, &container.name) else {
            return false;
        };
        let (Some(_), Some(_)) = (container.requests.cpu, container.requests.memory) else {
            return true;
        };
        requirements.iter().all(|req| {
            req.resources.iter().any(|&resource| {
                let request = container.requests.get(resource).map_or(0, |q| q.milli());
                let target = rec.target.get(resource).map_or(0, |q| q.milli());
                match req.change_requirement {
                    ChangeRequirement::TargetHigherThanRequests => target > request,
                    ChangeRequirement::TargetLowerThanRequests => target < request,
                }
            })
        })
    })
}

/// Sorts items into update order (see [`PodPriority::update_order`]); stable, so equal
/// priorities keep their input order.
pub fn sort_by_update_order<T>(items: &mut [T], priority: impl Fn(&T) -> PodPriority) {
    items.sort_by(|a, b| priority(a).update_order(&priority(b)));
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::quantity::Quantity;

    pub(crate) const GI: i64 = 1024 * 1024 * 1024;
    pub(crate) const M: i64 = 1_000_000;

    pub(crate) fn t0() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    pub(crate) fn hours(h: i64) -> SignedDuration {
        SignedDuration::from_hours(h)
    }

    impl Resources {
        pub(crate) fn cpu(millis: i64) -> Resources {
            Resources {
                cpu: Some(Quantity::from_milli(i128::from(millis))),
                memory: None,
            }
        }
    }

    impl PodSnapshot {
        /// A running pod started at [`t0`] owned by `ReplicationController/rc`.
        pub(crate) fn test(name: &str) -> PodSnapshot {
            PodSnapshot {
                name: name.to_owned(),
                owner: Some(Owner {
                    kind: "ReplicationController".to_owned(),
                    name: "rc".to_owned(),
                }),
                start_time: Some(t0()),
                ..PodSnapshot::default()
            }
        }

        pub(crate) fn container(mut self, name: &str, requests: Resources) -> PodSnapshot {
            self.containers.push(PodContainer {
                name: name.to_owned(),
                requests,
                limits: Resources::default(),
            });
            self
        }

        pub(crate) fn phase(mut self, phase: PodPhase) -> PodSnapshot {
            self.phase = phase;
            self
        }

        pub(crate) fn resize(mut self, resize: ResizeStatus) -> PodSnapshot {
            self.resize = resize;
            self
        }

        pub(crate) fn observed(mut self, annotation: &str) -> PodSnapshot {
            self.observed_containers = parse_observed_containers(annotation);
            self
        }

        pub(crate) fn oom(
            mut self,
            container: &str,
            started: Timestamp,
            finished: Timestamp,
        ) -> Self {
            self.last_terminations.push(LastTermination {
                container: container.to_owned(),
                reason: "OOMKilled".to_owned(),
                started_at: started,
                finished_at: finished,
            });
            self
        }
    }

    impl ContainerRecommendation {
        pub(crate) fn test(container: &str, target: Resources) -> ContainerRecommendation {
            ContainerRecommendation {
                container: container.to_owned(),
                target,
                ..ContainerRecommendation::default()
            }
        }

        pub(crate) fn bounds(mut self, lower: Resources, upper: Resources) -> Self {
            self.lower_bound = lower;
            self.upper_bound = upper;
            self
        }
    }

    fn prio(outside: bool, scale_up: bool, diff: f64) -> PodPriority {
        PodPriority {
            outside_recommended_range: outside,
            scale_up,
            resource_diff: diff,
        }
    }

    fn res(cpu: Option<i64>, mem: Option<i64>) -> Resources {
        Resources {
            cpu: cpu.map(|c| Quantity::from_milli(i128::from(c))),
            memory: mem.map(|m| Quantity::from_milli_binary(i128::from(m) * 1000)),
        }
    }

    // upstream: pkg/updater/priority/priority_processor_test.go TestGetUpdatePriority
    #[test]
    #[allow(clippy::too_many_lines)] // one row per upstream case
    fn update_priority_table() {
        let c = "test-container";
        let c2 = "test-container-2";
        let cases: Vec<(&str, PodSnapshot, Vec<ContainerRecommendation>, PodPriority)> = vec![
            (
                "simple scale up",
                PodSnapshot::test("p").container(c, Resources::cpu(2000)),
                vec![ContainerRecommendation::test(c, Resources::cpu(10_000))],
                prio(false, true, 4.0),
            ),
            (
                "simple scale down",
                PodSnapshot::test("p").container(c, Resources::cpu(4000)),
                vec![ContainerRecommendation::test(c, Resources::cpu(2000))],
                prio(false, false, 0.5),
            ),
            (
                "no resource diff",
                PodSnapshot::test("p").container(c, Resources::cpu(2000)),
                vec![ContainerRecommendation::test(c, Resources::cpu(2000))],
                prio(false, false, 0.0),
            ),
            (
                "scale up on milliquantities",
                PodSnapshot::test("p").container(c, Resources::cpu(10)),
                vec![ContainerRecommendation::test(c, Resources::cpu(900))],
                prio(false, true, 89.0),
            ),
            (
                "scale up outside recommended range",
                PodSnapshot::test("p").container(c, Resources::cpu(4000)),
                vec![
                    ContainerRecommendation::test(c, Resources::cpu(10_000))
                        .bounds(Resources::cpu(6000), Resources::cpu(14_000)),
                ],
                prio(true, true, 1.5),
            ),
            (
                "scale down outside recommended range",
                PodSnapshot::test("p").container(c, Resources::cpu(8000)),
                vec![
                    ContainerRecommendation::test(c, Resources::cpu(2000))
                        .bounds(Resources::cpu(1000), Resources::cpu(3000)),
                ],
                prio(true, false, 0.75),
            ),
            (
                "multiple resources, both scale up",
                PodSnapshot::test("p").container(c, Resources::new(3000, 10 * M)),
                vec![ContainerRecommendation::test(
                    c,
                    Resources::new(6000, 20 * M),
                )],
                prio(false, true, 2.0),
            ),
            (
                "multiple resources, only one scale up",
                PodSnapshot::test("p").container(c, Resources::new(4000, 10 * M)),
                vec![ContainerRecommendation::test(
                    c,
                    Resources::new(2000, 20 * M),
                )],
                prio(false, true, 1.5),
            ),
            (
                "multiple resources, both scale down",
                PodSnapshot::test("p").container(c, Resources::new(4000, 20 * M)),
                vec![ContainerRecommendation::test(
                    c,
                    Resources::new(2000, 10 * M),
                )],
                prio(false, false, 1.0),
            ),
            (
                "multiple resources, one outside recommended range",
                PodSnapshot::test("p").container(c, Resources::new(4000, 20 * M)),
                vec![
                    ContainerRecommendation::test(c, Resources::new(2000, 10 * M))
                        .bounds(Resources::new(1000, 5 * M), Resources::new(3000, 30 * M)),
                ],
                prio(true, false, 1.0),
            ),
            (
                "multiple containers, both scale up",
                PodSnapshot::test("p")
                    .container(c, Resources::cpu(1000))
                    .container(c2, Resources::cpu(2000)),
                vec![
                    ContainerRecommendation::test(c, Resources::cpu(4000)),
                    ContainerRecommendation::test(c2, Resources::cpu(8000)),
                ],
                prio(false, true, 3.0),
            ),
            (
                "multiple containers, both scale down",
                PodSnapshot::test("p")
                    .container(c, Resources::cpu(3000))
                    .container(c2, Resources::cpu(7000)),
                vec![
                    ContainerRecommendation::test(c, Resources::cpu(1000)),
                    ContainerRecommendation::test(c2, Resources::cpu(2000)),
                ],
                prio(false, false, 0.7),
            ),
            (
                "multiple containers, both scale up, one outside range",
                PodSnapshot::test("p")
                    .container(c, Resources::cpu(1000))
                    .container(c2, Resources::cpu(2000)),
                vec![
                    ContainerRecommendation::test(c, Resources::cpu(4000))
                        .bounds(Resources::cpu(1000), Resources::default()),
                    ContainerRecommendation::test(c2, Resources::cpu(8000))
                        .bounds(Resources::cpu(3000), Resources::cpu(10_000)),
                ],
                prio(true, true, 3.0),
            ),
            (
                "multiple containers, multiple resources",
                PodSnapshot::test("p")
                    .container(c, Resources::new(6000, 10 * M))
                    .container(c2, Resources::new(4000, 30 * M)),
                vec![
                    ContainerRecommendation::test(c, Resources::new(8000, 20 * M)),
                    ContainerRecommendation::test(c2, Resources::new(7000, 30 * M)),
                ],
                prio(false, true, 0.75),
            ),
            (
                // Not upstream: a container without a request always qualifies.
                "missing request",
                PodSnapshot::test("p").container(c, res(None, Some(M))),
                vec![ContainerRecommendation::test(c, Resources::new(100, M))],
                prio(true, true, 99.0),
            ),
        ];
        for (name, pod, recs, want) in cases {
            let got = update_priority(&pod, &recs);
            assert_eq!(
                got.outside_recommended_range, want.outside_recommended_range,
                "{name}"
            );
            assert_eq!(got.scale_up, want.scale_up, "{name}");
            assert!(
                (got.resource_diff - want.resource_diff).abs() < 1e-9,
                "{name}: diff {} want {}",
                got.resource_diff,
                want.resource_diff
            );
        }
    }

    // upstream: priority_processor_test.go TestGetUpdatePriority_NoRecommendationForContainer
    #[test]
    fn no_recommendation_gives_zero_priority() {
        let pod = PodSnapshot::test("p").container("c", Resources::new(5000, 10));
        assert_eq!(update_priority(&pod, &[]), PodPriority::default());
    }

    #[test]
    fn requests_and_targets_near_the_quantity_bound_sum_without_wrapping() {
        // "1e35" CPU is 1e38 milli, under i128::MAX: two such containers overflowed the sums.
        let huge = || Resources {
            cpu: Some(Quantity::parse("1e35").expect("parses")),
            memory: None,
        };
        let pod = PodSnapshot::test("p")
            .container("a", huge())
            .container("b", Resources::cpu(1000));
        let pod = pod.container("c", huge());
        let recs = [
            ContainerRecommendation::test("a", huge()),
            ContainerRecommendation::test("b", Resources::cpu(1000)),
            ContainerRecommendation::test("c", huge()),
        ];
        let p = update_priority(&pod, &recs);
        assert!(
            p.resource_diff.is_finite() && p.resource_diff >= 0.0,
            "{p:?}"
        );
        // Both totals saturate alike: no change to ask for.
        assert!(p.resource_diff < 0.1, "{p:?}");
        assert!(!p.scale_up);
    }

    // upstream: priority_processor_test.go TestGetUpdatePriority_VpaObservedContainers
    #[test]
    fn observed_containers_annotation() {
        let recs = [ContainerRecommendation::test("c", Resources::cpu(10_000))];
        for (annotation, want) in [
            (None, 9.0),
            (Some("c"), 9.0),
            (Some(""), 0.0),
            (Some("abcd;';"), 9.0),
        ] {
            let mut pod = PodSnapshot::test("p").container("c", Resources::cpu(1000));
            if let Some(a) = annotation {
                pod = pod.observed(a);
            }
            let diff = update_priority(&pod, &recs).resource_diff;
            assert!((diff - want).abs() < 1e-9, "{annotation:?}: {diff}");
        }
    }

    fn decide(
        pod: &PodSnapshot,
        recs: &[ContainerRecommendation],
        min: f64,
        now: Timestamp,
    ) -> bool {
        let config = UpdateConfig {
            min_change_priority: min,
            ..UpdateConfig::default()
        };
        decide_priority(pod, recs, &BTreeSet::new(), &config, now)
            .verdict
            .is_ok()
    }

    // upstream: update_priority_calculator_test.go TestSortPriority / TestSortPriorityResourcesDecrease
    #[test]
    fn sort_order() {
        let mut items = vec![
            ("POD1", prio(false, false, 4.0)),
            ("POD2", prio(false, false, 1.5)),
            ("POD3", prio(false, false, 9.0)),
            ("POD4", prio(false, false, 2.33)),
        ];
        sort_by_update_order(&mut items, |(_, p)| *p);
        let names: Vec<_> = items.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["POD3", "POD1", "POD4", "POD2"]);

        let mut items = vec![
            ("POD1", prio(false, true, 0.25)),
            ("POD2", prio(false, false, 0.25)),
            ("POD3", prio(false, false, 0.5)),
        ];
        sort_by_update_order(&mut items, |(_, p)| *p);
        let names: Vec<_> = items.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["POD1", "POD3", "POD2"]);
    }

    // upstream: update_priority_calculator_test.go TestUpdateNotRequired
    #[test]
    fn update_not_required() {
        let pod = PodSnapshot::test("POD1").container("c", Resources::cpu(4000));
        let recs = [ContainerRecommendation::test("c", Resources::cpu(4000))];
        assert!(!decide(&pod, &recs, 0.1, t0() + hours(24)));
    }

    // upstream: update_priority_calculator_test.go TestUpdateLonglivedPods
    #[test]
    fn long_lived_pods() {
        let recs = [ContainerRecommendation::test("c", Resources::cpu(5000))
            .bounds(Resources::cpu(1000), Resources::cpu(6000))];
        let now = t0() + hours(13);
        // POD1: inside range, diff 0.25 < 0.5; POD2: diff 4.0; POD3: outside range.
        let cases = [(4000, false), (1000, true), (8000, true)];
        for (cpu, want) in cases {
            let pod = PodSnapshot::test("p").container("c", Resources::cpu(cpu));
            assert_eq!(decide(&pod, &recs, 0.5, now), want, "cpu {cpu}");
        }
    }

    // upstream: update_priority_calculator_test.go TestUpdateShortlivedPods
    #[test]
    fn short_lived_pods() {
        let recs = [ContainerRecommendation::test("c", Resources::cpu(5000))
            .bounds(Resources::cpu(1000), Resources::cpu(6000))];
        let now = t0() + hours(11);
        for (cpu, want) in [(4000, false), (1000, false), (10_000, true)] {
            let pod = PodSnapshot::test("p").container("c", Resources::cpu(cpu));
            assert_eq!(decide(&pod, &recs, 0.5, now), want, "cpu {cpu}");
        }
    }

    // upstream: update_priority_calculator_test.go TestUpdatePodWithQuickOOM,
    // TestDontUpdatePodWithQuickOOMNoResourceChange, TestDontUpdatePodWithOOMAfterLongRun
    #[test]
    fn quick_oom_rules() {
        let now = t0() + hours(11);
        let mins = SignedDuration::from_mins;
        let recs = [ContainerRecommendation::test("c", Resources::cpu(5000))
            .bounds(Resources::cpu(1000), Resources::cpu(6000))];
        let quick = PodSnapshot::test("p")
            .container("c", Resources::cpu(4000))
            .oom("c", now - mins(5), now - mins(3));
        assert!(
            decide(&quick, &recs, 0.5, now),
            "quick OOM updates a young pod"
        );

        let same = [
            ContainerRecommendation::test("c", Resources::new(4000, 8 * GI))
                .bounds(Resources::new(2000, 5 * GI), Resources::new(5000, 10 * GI)),
        ];
        let no_change = PodSnapshot::test("p")
            .container("c", Resources::new(4000, 8 * GI))
            .oom("c", now - mins(5), now - mins(3));
        assert!(!decide(&no_change, &same, 0.1, now), "nothing would change");

        let long_run = PodSnapshot::test("p")
            .container("c", Resources::cpu(4000))
            .oom("c", now - mins(60), now - mins(3));
        assert!(!decide(&long_run, &recs, 0.5, now), "OOM after a long run");
    }

    // upstream: update_priority_calculator_test.go TestQuickOOM_VpaOvservedContainers and
    // TestQuickOOM_ContainerResourcePolicy
    #[test]
    fn quick_oom_observed_and_mode_off() {
        let now = t0() + hours(11);
        let mins = SignedDuration::from_mins;
        let base = PodSnapshot::test("p")
            .container("c", Resources::cpu(4000))
            .oom("c", now - mins(5), now - mins(3));
        let threshold = mins(10);
        let none = BTreeSet::new();
        assert!(quick_oom(&base, &none, threshold));
        assert!(quick_oom(&base.clone().observed("c"), &none, threshold));
        assert!(!quick_oom(&base.clone().observed(""), &none, threshold));
        let off: BTreeSet<String> = ["c".to_owned()].into();
        assert!(!quick_oom(&base, &off, threshold));
    }

    #[test]
    fn missing_start_time_is_skipped_inside_range() {
        let mut pod = PodSnapshot::test("p").container("c", Resources::cpu(1000));
        pod.start_time = None;
        let recs = [ContainerRecommendation::test("c", Resources::cpu(5000))];
        let d = decide_priority(
            &pod,
            &recs,
            &BTreeSet::new(),
            &UpdateConfig::default(),
            t0(),
        );
        assert_eq!(d.verdict, Err(PrioritySkip::MissingStartTime));
    }

    fn requirement(resources: &[Resource], change: ChangeRequirement) -> EvictionRequirement {
        EvictionRequirement {
            resources: resources.to_vec(),
            change_requirement: change,
        }
    }

    // upstream: pkg/updater/priority/scaling_direction_pod_eviction_admission_test.go
    // TestAdmitForSingleContainer (representative rows)
    #[test]
    fn eviction_requirements_table() {
        use ChangeRequirement::{TargetHigherThanRequests as Up, TargetLowerThanRequests as Down};
        use Resource::{Cpu, Memory};
        let pod = PodSnapshot::test("p").container("c", Resources::new(1000, 1000 * M));
        let rec = |cpu, mem| [ContainerRecommendation::test("c", Resources::new(cpu, mem))];
        let cases: Vec<(
            &str,
            [ContainerRecommendation; 1],
            Vec<EvictionRequirement>,
            bool,
        )> = vec![
            ("no requirements", rec(2000, 2000 * M), vec![], true),
            (
                "cpu up required, cpu up",
                rec(2000, 1000 * M),
                vec![requirement(&[Cpu], Up)],
                true,
            ),
            (
                "cpu up required, cpu down",
                rec(500, 1000 * M),
                vec![requirement(&[Cpu], Up)],
                false,
            ),
            (
                "cpu down required, cpu down",
                rec(500, 1000 * M),
                vec![requirement(&[Cpu], Down)],
                true,
            ),
            (
                "equal is not higher",
                rec(1000, 1000 * M),
                vec![requirement(&[Cpu], Up)],
                false,
            ),
            (
                "either resource up",
                rec(500, 2000 * M),
                vec![requirement(&[Cpu, Memory], Up)],
                true,
            ),
            (
                "both requirements must hold",
                rec(2000, 2000 * M),
                vec![requirement(&[Cpu], Up), requirement(&[Memory], Down)],
                false,
            ),
            (
                "cpu up and memory down",
                rec(2000, 500 * M),
                vec![requirement(&[Cpu], Up), requirement(&[Memory], Down)],
                true,
            ),
        ];
        for (name, recs, reqs, want) in cases {
            assert_eq!(
                meets_eviction_requirements(&pod, &recs, &reqs),
                want,
                "{name}"
            );
        }
        // A container without a memory request is always admitted.
        let no_mem = PodSnapshot::test("p").container("c", Resources::cpu(1000));
        assert!(meets_eviction_requirements(
            &no_mem,
            &rec(500, M),
            &[requirement(&[Cpu], Up)]
        ));
    }

    #[test]
    fn reads_kubernetes_pod() {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_str(include_str!(
            "../../tests/data/admission/pod-running-resized.json"
        ))
        .unwrap();
        let snap = PodSnapshot::from_pod(&pod).unwrap();
        assert_eq!(snap.name, "web-5d8f7c9b6-x2x9k");
        assert_eq!(snap.phase, PodPhase::Running);
        assert_eq!(snap.owner.as_ref().unwrap().kind, "ReplicaSet");
        // The kubelet-reported requests win over the spec (an in-place resize is pending).
        assert_eq!(
            snap.containers[0].requests.cpu,
            Some(Quantity::from_milli(100))
        );
        assert_eq!(
            snap.containers[1].requests.cpu,
            Some(Quantity::from_milli(25))
        );
        // Only the native sidecar counts among init containers.
        assert_eq!(snap.init_containers.len(), 1);
        assert_eq!(snap.init_containers[0].name, "proxy");
        assert_eq!(snap.observed_containers.as_ref().unwrap().len(), 2);
        assert_eq!(snap.resize, ResizeStatus::Infeasible);
        assert_eq!(snap.start_time, Some(t0()));
        assert!(quick_oom(
            &snap,
            &BTreeSet::new(),
            SignedDuration::from_mins(10)
        ));
    }

    #[test]
    fn observed_containers_parse() {
        assert_eq!(parse_observed_containers(""), Some(BTreeSet::new()));
        assert_eq!(
            parse_observed_containers("app, side-car"),
            Some(["app".to_owned(), "side-car".to_owned()].into())
        );
        assert_eq!(parse_observed_containers("app,side"), None);
        assert_eq!(parse_observed_containers("App"), None);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            // The diff is 0 exactly when the requests equal the targets, and never negative.
            #[test]
            fn diff_zero_iff_equal(req in 1i64..1_000_000, target in 1i64..1_000_000) {
                let pod = PodSnapshot::test("p").container("c", Resources::cpu(req));
                let p = update_priority(&pod, &[ContainerRecommendation::test("c", Resources::cpu(target))]);
                prop_assert!(p.resource_diff >= 0.0);
                prop_assert_eq!(p.resource_diff == 0.0, req == target);
                prop_assert_eq!(p.scale_up, target > req);
            }

            // Sorting puts every scale-up pod before every other and diffs descend in each part.
            #[test]
            fn order_is_scale_up_then_diff(items in proptest::collection::vec((any::<bool>(), 0.0f64..100.0), 0..20)) {
                let mut v: Vec<PodPriority> = items.iter().map(|&(up, d)| prio(false, up, d)).collect();
                sort_by_update_order(&mut v, |p| *p);
                for w in v.windows(2) {
                    prop_assert!(w[0].scale_up >= w[1].scale_up);
                    if w[0].scale_up == w[1].scale_up {
                        prop_assert!(w[0].resource_diff >= w[1].resource_diff);
                    }
                }
            }
        }
    }
}
