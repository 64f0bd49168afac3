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
//! Amounts are integers: CPU in millicores, memory in bytes. Time is a parameter (`now`).

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::fmt;

use jiff::{SignedDuration, Timestamp};

/// A compute resource the VPA manages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    /// CPU, in millicores.
    Cpu,
    /// Memory, in bytes.
    Memory,
}

impl Resource {
    /// Both resources, in the order patches and annotations list them (`cpu` before `memory`).
    pub const ALL: [Resource; 2] = [Resource::Cpu, Resource::Memory];

    /// The Kubernetes resource name (`cpu`, `memory`).
    pub fn name(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Memory => "memory",
        }
    }

    /// Parses a Kubernetes resource name; other resources are not managed by VPA.
    pub fn from_name(name: &str) -> Option<Resource> {
        match name {
            "cpu" => Some(Resource::Cpu),
            "memory" => Some(Resource::Memory),
            _ => None,
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// CPU (millicores) and memory (bytes); `None` means "not set", which is not the same as 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// Millicores.
    pub cpu: Option<i64>,
    /// Bytes.
    pub memory: Option<i64>,
}

impl Resources {
    /// Both amounts set.
    pub fn new(cpu_millis: i64, memory_bytes: i64) -> Resources {
        Resources {
            cpu: Some(cpu_millis),
            memory: Some(memory_bytes),
        }
    }

    /// The amount of `resource`, if set.
    pub fn get(&self, resource: Resource) -> Option<i64> {
        match resource {
            Resource::Cpu => self.cpu,
            Resource::Memory => self.memory,
        }
    }

    /// Sets (or clears) the amount of `resource`.
    pub fn set(&mut self, resource: Resource, amount: Option<i64>) {
        match resource {
            Resource::Cpu => self.cpu = amount,
            Resource::Memory => self.memory = amount,
        }
    }

    /// True when neither amount is set.
    pub fn is_empty(&self) -> bool {
        self.cpu.is_none() && self.memory.is_none()
    }

    /// The resources that are set, in [`Resource::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (Resource, i64)> + '_ {
        Resource::ALL
            .into_iter()
            .filter_map(|r| self.get(r).map(|v| (r, v)))
    }
}

/// The recommendation for one container (after capping, see `admission::process_recommendation`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerRecommendation {
    /// Container name.
    pub container: String,
    /// What the requests should be.
    pub target: Resources,
    /// Below this a request is too low to leave alone.
    pub lower_bound: Resources,
    /// Above this a request is too high to leave alone.
    pub upper_bound: Resources,
}

/// Finds the recommendation for `container`.
pub fn recommendation_for<'a>(
    recommendations: &'a [ContainerRecommendation],
    container: &str,
) -> Option<&'a ContainerRecommendation> {
    recommendations.iter().find(|r| r.container == container)
}

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
    /// When the updater last asked for an in-place resize of this pod (remembered by the service).
    pub last_in_place_attempt: Option<Timestamp>,
}

impl PodSnapshot {
    fn observes(&self, container: &str) -> bool {
        self.observed_containers
            .as_ref()
            .is_none_or(|set| set.contains(container))
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
    // Per resource: (Σ requests, Σ targets, any target seen).
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
            totals[i].1 += i128::from(target);
            totals[i].2 = true;
            if let Some(request) = container.requests.get(resource) {
                totals[i].0 += i128::from(request);
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
    for (i, (request, target, seen)) in totals.into_iter().enumerate() {
        if !seen {
            continue;
        }
        // Upstream sums MilliValue(); memory here is bytes, so scale to keep the 1-milli floor.
        let scale = if i == 1 { 1000.0 } else { 1.0 };
        let request = (request as f64 * scale).max(1.0);
        let target = target as f64 * scale;
        resource_diff += (request - target).abs() / request;
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
                let request = container.requests.get(resource).unwrap_or(0);
                let target = rec.target.get(resource).unwrap_or(0);
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
