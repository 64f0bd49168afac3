//! Eviction budget and the per-loop update plan: which pods the updater evicts or resizes now.
//!
//! Semantics follow the upstream VPA updater (`pkg/updater/restriction`, `pkg/updater/logic`):
//!
//! * Pods are grouped by their replica-creating controller owner. A group with fewer live pods
//!   than `--min-replicas` (default 2; `spec.updatePolicy.minReplicas` wins) is left alone.
//! * A group may lose `⌊configured × --eviction-tolerance⌋` (default 0.5) running pods per loop,
//!   and at least one when every configured replica is running. Pending pods are always
//!   evictable and do not use the budget.
//! * `configured` is the owner's `spec.replicas` (`ReplicaSet`, `StatefulSet`,
//!   `ReplicationController`),
//!   `status.numberReady` (`DaemonSet`) or the live pod count (`Job`).
//! * `InPlaceOrRecreate`: a pod is resized in place when the budget allows; a pod whose resize is
//!   stuck (`Infeasible`, `Deferred` > 5 min, `InProgress` > 1 h, `Error`) is evicted instead.
//! * `InPlace` (AEP-8818): a pod is resized in place when the budget allows and
//!   [`super::resize_backoff`] says so; the plan never evicts such a pod.
//!
//! Deliberate differences from upstream, both on the safe side: pods without a controller owner
//! are never evicted (upstream groups them under an empty owner and may evict them, and nothing
//! recreates them), and owners of other kinds (custom controllers) use the live pod count as
//! `configured` like Job (upstream uses 0, which puts no limit on evictions).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use jiff::{SignedDuration, Timestamp};

use super::policy::{
    ContainerMode, ContainerPolicy, container_policies_from_api, container_policy,
};
// Re-exported: the updater and its replay name the mode through `eviction`.
pub use super::policy::UpdateMode;
use super::priority::{
    AcceptReason, ChangeRequirement, EvictionRequirement, Owner, PodPhase, PodPriority,
    PodSnapshot, PriorityDecision, PrioritySkip, RequestsByContainer, ResizeStatus, UpdateConfig,
    decide_priority, meets_eviction_requirements, sort_by_update_order,
};
use super::resize_backoff::{InPlaceStep, in_place_step, proposed_requests};
use super::resources::{ContainerRecommendation, Resource};
use super::startup_boost::{StartupBoosts, expired};
use crate::api::vpa::{self as api, VerticalPodAutoscaler};
use crate::quantity::QuantityError;

/// A resize stuck in `Deferred` longer than this falls back to eviction (upstream constant).
pub const DEFERRED_RESIZE_TIMEOUT: SignedDuration = SignedDuration::from_mins(5);
/// A resize `InProgress` longer than this falls back to eviction (upstream constant).
pub const IN_PROGRESS_RESIZE_TIMEOUT: SignedDuration = SignedDuration::from_hours(1);

/// Eviction flags of the updater.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EvictionConfig {
    /// `--min-replicas`: groups with fewer live pods are not touched (default 2).
    pub min_replicas: u32,
    /// `--eviction-tolerance`: fraction of configured replicas that may be down per loop
    /// (default 0.5).
    pub eviction_tolerance: f64,
}

impl Default for EvictionConfig {
    fn default() -> Self {
        EvictionConfig {
            min_replicas: 2,
            eviction_tolerance: 0.5,
        }
    }
}

/// Counters of one replica group during one loop (upstream `singleGroupStats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Replicas the owner wants.
    pub configured: u32,
    /// Live pods in phase Pending.
    pub pending: u32,
    /// Live pods not Pending.
    pub running: u32,
    /// `⌊configured × tolerance⌋`.
    pub eviction_tolerance: u32,
    /// Running pods evicted this loop.
    pub evicted: u32,
    /// Pods resized in place this loop.
    pub in_place_initiated: u32,
    /// Pods still resizing from an earlier loop.
    pub in_place_ongoing: u32,
}

impl GroupStats {
    /// Upstream `isPodDisruptable`: more pods alive than must stay, or the special case that
    /// everything runs, the tolerance rounds to 0 and nothing was disrupted yet (at least one).
    pub fn is_disruptable(&self) -> bool {
        let should_be_alive = i64::from(self.configured) - i64::from(self.eviction_tolerance);
        let actually_alive =
            i64::from(self.running) - i64::from(self.evicted) - i64::from(self.in_place_initiated);
        actually_alive > should_be_alive
            || (self.configured == self.running
                && self.eviction_tolerance == 0
                && self.evicted == 0
                && self.in_place_initiated == 0)
    }

    /// [`GroupStats::is_disruptable`], or the denial that says why not.
    fn budget_allows(&self) -> Result<(), Denial> {
        if self.is_disruptable() {
            Ok(())
        } else {
            Err(Denial::BudgetExhausted {
                configured: self.configured,
                tolerance: self.eviction_tolerance,
            })
        }
    }
}

/// Why a pod may not be disrupted now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denial {
    /// The pod has no controller owner.
    NoOwner,
    /// The group has fewer live pods than required.
    TooFewReplicas {
        /// Live pods in the group.
        live: u32,
        /// Required live pods.
        required: u32,
    },
    /// The owner's desired replica count is unknown or 0.
    UnknownReplicas,
    /// This loop's budget for the group is used up.
    BudgetExhausted {
        /// Replicas the owner wants.
        configured: u32,
        /// Pods that may be down.
        tolerance: u32,
    },
    /// An in-place resize is under way and has not failed.
    ResizeInProgress,
    /// The pod is Pending, so an in-place resize waits.
    Pending,
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Denial::NoOwner => f.write_str("pod has no controller owner"),
            Denial::TooFewReplicas { live, required } => {
                write!(f, "too few replicas: {live} live, min-replicas {required}")
            }
            Denial::UnknownReplicas => f.write_str("owner's replica count unknown or 0"),
            Denial::BudgetExhausted {
                configured,
                tolerance,
            } => write!(
                f,
                "eviction budget used up this loop ({configured} replicas, tolerance {tolerance})"
            ),
            Denial::ResizeInProgress => f.write_str("in-place resize under way"),
            Denial::Pending => f.write_str("pod is pending"),
        }
    }
}

/// The eviction budget of one VPA for one loop.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EvictionBudget {
    groups: BTreeMap<Owner, GroupStats>,
    denied_groups: BTreeMap<Owner, Denial>,
    pod_owner: BTreeMap<String, Owner>,
    pending_pods: BTreeSet<String>,
}

impl EvictionBudget {
    /// Builds the budget from the live pods of one VPA (leave out pods with a
    /// `deletionTimestamp`, as upstream `filterDeletedPods` does).
    ///
    /// `replicas` returns the owner's desired replica count (`spec.replicas`, or
    /// `status.numberReady` for a `DaemonSet`); it is not asked for Jobs and other kinds, which use
    /// the live pod count. `vpa_min_replicas` is `spec.updatePolicy.minReplicas`.
    pub fn new<'a>(
        pods: impl IntoIterator<Item = &'a PodSnapshot>,
        replicas: impl Fn(&Owner) -> Option<u32>,
        vpa_min_replicas: Option<i32>,
        config: &EvictionConfig,
    ) -> EvictionBudget {
        let mut live: BTreeMap<Owner, Vec<&PodSnapshot>> = BTreeMap::new();
        for pod in pods {
            if let Some(owner) = &pod.owner {
                live.entry(owner.clone()).or_default().push(pod);
            }
        }
        let required = vpa_min_replicas.map_or(config.min_replicas, |m| m.max(0) as u32);
        let mut budget = EvictionBudget::default();
        for (owner, group) in live {
            let count = group.len() as u32;
            for pod in &group {
                budget.pod_owner.insert(pod.name.clone(), owner.clone());
                if pod.phase == PodPhase::Pending {
                    budget.pending_pods.insert(pod.name.clone());
                }
            }
            if count < required {
                budget.denied_groups.insert(
                    owner,
                    Denial::TooFewReplicas {
                        live: count,
                        required,
                    },
                );
                continue;
            }
            let configured = match owner.kind.as_str() {
                "ReplicaSet" | "StatefulSet" | "ReplicationController" | "DaemonSet" => {
                    match replicas(&owner) {
                        Some(n) if n > 0 => n,
                        _ => {
                            budget.denied_groups.insert(owner, Denial::UnknownReplicas);
                            continue;
                        }
                    }
                }
                _ => count,
            };
            let pending = group
                .iter()
                .filter(|p| p.phase == PodPhase::Pending)
                .count() as u32;
            let ongoing = group
                .iter()
                .filter(|p| p.resize != ResizeStatus::None)
                .count() as u32;
            let stats = GroupStats {
                configured,
                pending,
                running: count - pending,
                // Truncated, as upstream.
                eviction_tolerance: (f64::from(configured) * config.eviction_tolerance) as u32,
                evicted: 0,
                in_place_initiated: 0,
                in_place_ongoing: ongoing,
            };
            budget.groups.insert(owner, stats);
        }
        budget
    }

    /// The counters of a group, if it takes part in this loop.
    pub fn group(&self, owner: &Owner) -> Option<&GroupStats> {
        self.groups.get(owner)
    }

    fn stats_of(&self, pod: &PodSnapshot) -> Result<(&Owner, &GroupStats), Denial> {
        let owner = self.pod_owner.get(&pod.name).ok_or(Denial::NoOwner)?;
        match self.groups.get(owner) {
            Some(stats) => Ok((owner, stats)),
            None => Err(self
                .denied_groups
                .get(owner)
                .cloned()
                .unwrap_or(Denial::NoOwner)),
        }
    }

    /// Upstream `CanEvict`: pending pods always, resizing pods only when their resize failed,
    /// others while the group's budget lasts.
    pub fn can_evict(&self, pod: &PodSnapshot, now: Timestamp) -> Result<(), Denial> {
        let owner = self.pod_owner.get(&pod.name).ok_or(Denial::NoOwner)?;
        // Upstream answers Pending before looking at the group, but only for grouped pods.
        if pod.phase == PodPhase::Pending && self.groups.contains_key(owner) {
            return Ok(());
        }
        let (_, stats) = self.stats_of(pod)?;
        if pod.resize != ResizeStatus::None {
            return stuck_resize_may_be_evicted(pod, stats, now);
        }
        stats.budget_allows()
    }

    /// Records an eviction (pending pods do not use the budget).
    pub fn record_eviction(&mut self, pod: &PodSnapshot) {
        if pod.phase == PodPhase::Pending {
            return;
        }
        if let Some(stats) = self
            .pod_owner
            .get(&pod.name)
            .and_then(|o| self.groups.get_mut(o))
        {
            stats.evicted += 1;
        }
    }

    /// Upstream `CanInPlaceUpdate` for `InPlaceOrRecreate`.
    pub fn in_place_decision(&self, pod: &PodSnapshot, now: Timestamp) -> InPlaceDecision {
        let stats = match self.stats_of(pod) {
            Ok((_, stats)) => stats,
            Err(denial) => return InPlaceDecision::Deferred(denial),
        };
        if pod.phase == PodPhase::Pending {
            return InPlaceDecision::Deferred(Denial::Pending);
        }
        if pod.resize != ResizeStatus::None {
            return match stuck_resize_may_be_evicted(pod, stats, now) {
                Ok(()) => InPlaceDecision::Evict,
                Err(denial) => InPlaceDecision::Deferred(denial),
            };
        }
        match stats.budget_allows() {
            Ok(()) => InPlaceDecision::Approved,
            Err(denial) => InPlaceDecision::Deferred(denial),
        }
    }

    /// Upstream `CanInPlaceUpdate` for `InPlace`, before the resize state is looked at: the pod
    /// has a group, is not Pending, and the group may lose one more pod this loop.
    pub fn in_place_only_allowed(&self, pod: &PodSnapshot) -> Result<(), Denial> {
        let (_, stats) = self.stats_of(pod)?;
        if pod.phase == PodPhase::Pending {
            return Err(Denial::Pending);
        }
        stats.budget_allows()
    }

    /// Records an in-place resize request.
    pub fn record_resize(&mut self, pod: &PodSnapshot) {
        if let Some(stats) = self
            .pod_owner
            .get(&pod.name)
            .and_then(|o| self.groups.get_mut(o))
        {
            stats.in_place_initiated += 1;
        }
    }
}

/// What to do with a pod of an `InPlaceOrRecreate` VPA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InPlaceDecision {
    /// Resize it in place now.
    Approved,
    /// Its resize failed or is stuck: evict it instead (if the eviction budget allows).
    Evict,
    /// Leave it for a later loop.
    Deferred(Denial),
}

/// Upstream `CanEvictInPlacingPod`: a resizing pod may be evicted when the group can afford it
/// and the resize has failed or is stuck. `last_in_place_attempt` defaults to `now` (upstream
/// records the first sighting), so a stuck resize is only evicted after the timeout.
fn stuck_resize_may_be_evicted(
    pod: &PodSnapshot,
    stats: &GroupStats,
    now: Timestamp,
) -> Result<(), Denial> {
    stats.budget_allows()?;
    let since = now.duration_since(pod.last_in_place_attempt.unwrap_or(now));
    let stuck = match pod.resize {
        ResizeStatus::None => false,
        ResizeStatus::Deferred => since > DEFERRED_RESIZE_TIMEOUT,
        ResizeStatus::InProgress => since > IN_PROGRESS_RESIZE_TIMEOUT,
        ResizeStatus::Infeasible
        | ResizeStatus::PendingOther
        | ResizeStatus::Error
        | ResizeStatus::InProgressOther => true,
    };
    if stuck {
        Ok(())
    } else {
        Err(Denial::ResizeInProgress)
    }
}

/// The parts of a VPA spec the updater needs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UpdatePolicy {
    /// `spec.updatePolicy.updateMode` (default Recreate).
    pub mode: UpdateMode,
    /// `spec.updatePolicy.minReplicas`.
    pub min_replicas: Option<i32>,
    /// `spec.updatePolicy.evictionRequirements`.
    pub eviction_requirements: Vec<EvictionRequirement>,
    /// `spec.updatePolicy.evictAfterOOMSeconds`, overriding the flag.
    pub evict_after_oom: Option<SignedDuration>,
    /// `spec.resourcePolicy.containerPolicies` (for `mode: Off`).
    pub container_policies: Vec<ContainerPolicy>,
    /// `startupBoost` of the spec and the container policies.
    pub boosts: StartupBoosts,
}

impl UpdatePolicy {
    /// Reads the update policy of a VPA object. Unknown modes count as `Off`: the updater never
    /// acts on what it does not understand.
    pub fn from_api(vpa: &VerticalPodAutoscaler) -> Result<UpdatePolicy, QuantityError> {
        let policy = vpa.spec.update_policy.as_ref();
        let eviction_requirements = policy
            .and_then(|p| p.eviction_requirements.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|r| {
                let change_requirement = match r.change_requirement {
                    api::EvictionChangeRequirement::TargetHigherThanRequests => {
                        ChangeRequirement::TargetHigherThanRequests
                    }
                    api::EvictionChangeRequirement::TargetLowerThanRequests => {
                        ChangeRequirement::TargetLowerThanRequests
                    }
                    api::EvictionChangeRequirement::Unknown(_) => return None,
                };
                Some(EvictionRequirement {
                    resources: r
                        .resources
                        .iter()
                        .filter_map(|n| Resource::from_name(n))
                        .collect(),
                    change_requirement,
                })
            })
            .collect();
        Ok(UpdatePolicy {
            mode: UpdateMode::from_api(&vpa.spec.update_mode()),
            min_replicas: policy.and_then(|p| p.min_replicas),
            eviction_requirements,
            evict_after_oom: policy
                .and_then(|p| p.evict_after_oom_seconds)
                .map(|s| SignedDuration::from_secs(i64::from(s))),
            container_policies: container_policies_from_api(vpa)?,
            boosts: StartupBoosts::from_api(vpa),
        })
    }

    fn scaling_off(&self, pod: &PodSnapshot) -> BTreeSet<String> {
        pod.containers
            .iter()
            .chain(&pod.init_containers)
            .filter(|c| {
                container_policy(&self.container_policies, &c.name)
                    .is_some_and(|p| p.mode == ContainerMode::Off)
            })
            .map(|c| c.name.clone())
            .collect()
    }
}

/// What the updater does with a pod this loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Evict through the Eviction API.
    Evict,
    /// Resize in place through the `resize` subresource.
    Resize,
    /// Lower a CPU startup boost in place (resize, then drop the boost annotations).
    Unboost,
    /// Leave it.
    Skip,
}

impl Action {
    /// Lower-case name used in logs and replay output.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Evict => "evict",
            Action::Resize => "resize",
            Action::Unboost => "unboost",
            Action::Skip => "skip",
        }
    }
}

/// What the updater remembers of a pod's resize after this action (mode `InPlace` only; see
/// [`super::resize_backoff`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Backoff {
    /// Nothing to remember or report.
    #[default]
    None,
    /// A resize asks for these requests: once the API server accepts it, forget remembered
    /// values; if it refuses it for node capacity, remember these.
    Attempt(RequestsByContainer),
    /// The node cannot fit these requests: remember them; the pod keeps its requests.
    Infeasible(RequestsByContainer),
    /// The kubelet holds a resize (`Deferred`, in progress, `Error`): the pod keeps its requests
    /// for now.
    Waiting,
}

/// The decision for one pod.
#[derive(Clone, Debug, PartialEq)]
pub struct PodAction {
    /// Pod name.
    pub pod: String,
    /// 1-based position in the update queue; `None` for pods that do not qualify.
    pub rank: Option<usize>,
    /// The pod's priority (computed for every pod that has containers with recommendations).
    pub priority: PodPriority,
    /// What to do.
    pub action: Action,
    /// Why, as a sentence.
    pub reason: String,
    /// What to remember of the pod's resize.
    pub backoff: Backoff,
}

/// Plans one updater loop for one VPA: the pods in the order the updater acts on them (queued
/// pods in priority order, then the pods that do not qualify, in input order).
///
/// `recommend` returns the processed (capped) recommendation for a pod; `replicas` the owner's
/// desired replica count (see [`EvictionBudget::new`]).
pub fn plan_updates(
    policy: &UpdatePolicy,
    pods: &[PodSnapshot],
    recommend: impl Fn(&PodSnapshot) -> Vec<ContainerRecommendation>,
    replicas: impl Fn(&Owner) -> Option<u32>,
    update_config: &UpdateConfig,
    eviction_config: &EvictionConfig,
    now: Timestamp,
) -> Vec<PodAction> {
    let mut config = *update_config;
    if let Some(oom) = policy.evict_after_oom {
        config.evict_after_oom_threshold = oom;
    }
    let mut budget = EvictionBudget::new(pods, replicas, policy.min_replicas, eviction_config);
    let (mut actions, rest) = plan_unboosts(policy, pods, &mut budget, now);
    if !policy.mode.updater_acts() {
        actions.extend(rest.into_iter().map(|pod| PodAction {
            pod: pod.name.clone(),
            rank: None,
            priority: PodPriority::default(),
            action: Action::Skip,
            reason: format!("updateMode {:?}: the updater does not act", policy.mode),
            backoff: Backoff::None,
        }));
        return actions;
    }
    let (mut queued, skipped) = queue(policy, rest, &recommend, &config, now);
    sort_by_update_order(&mut queued, |(_, p, _, _)| *p);

    let mut fallback: Vec<(usize, &PodSnapshot, PodPriority, AcceptReason)> = Vec::new();
    for (i, (pod, priority, accept, proposed)) in queued.into_iter().enumerate() {
        let rank = Some(i + 1);
        if policy.mode == UpdateMode::InPlace {
            let (action, reason, backoff) = in_place_only(&mut budget, pod, &proposed, accept);
            actions.push(PodAction {
                pod: pod.name.clone(),
                rank,
                priority,
                action,
                reason,
                backoff,
            });
            continue;
        }
        if policy.mode == UpdateMode::InPlaceOrRecreate {
            match budget.in_place_decision(pod, now) {
                InPlaceDecision::Approved => {
                    budget.record_resize(pod);
                    actions.push(PodAction {
                        pod: pod.name.clone(),
                        rank,
                        priority,
                        action: Action::Resize,
                        reason: format!("resize in place: {accept}"),
                        backoff: Backoff::None,
                    });
                }
                // Upstream evicts these after the in-place pass; keep their queue position.
                InPlaceDecision::Evict => fallback.push((i, pod, priority, accept)),
                InPlaceDecision::Deferred(denial) => actions.push(PodAction {
                    pod: pod.name.clone(),
                    rank,
                    priority,
                    action: Action::Skip,
                    reason: format!("in-place resize deferred: {denial}"),
                    backoff: Backoff::None,
                }),
            }
            continue;
        }
        let why = format!("evict: {accept}");
        actions.push(evict_or_skip(&mut budget, pod, rank, priority, now, &why));
    }
    for (i, pod, priority, accept) in fallback {
        let why = format!("in-place resize failed or stuck; evict: {accept}");
        actions.push(evict_or_skip(
            &mut budget,
            pod,
            Some(i + 1),
            priority,
            now,
            &why,
        ));
    }
    actions.extend(skipped);
    actions
}

/// A pod the priority accepted: its priority, why, and the requests an update would give it.
type Queued<'p> = (
    &'p PodSnapshot,
    PodPriority,
    AcceptReason,
    RequestsByContainer,
);

/// The pods whose priority qualifies them for an update (unsorted), and the others, skipped
/// with why (for `InPlace`, the pods held back by values their node could not fit).
fn queue<'p>(
    policy: &UpdatePolicy,
    pods: Vec<&'p PodSnapshot>,
    recommend: &impl Fn(&PodSnapshot) -> Vec<ContainerRecommendation>,
    config: &UpdateConfig,
    now: Timestamp,
) -> (Vec<Queued<'p>>, Vec<PodAction>) {
    let mut queued: Vec<Queued<'p>> = Vec::new();
    let mut skipped: Vec<PodAction> = Vec::new();
    for pod in pods {
        let recs = recommend(pod);
        let PriorityDecision { priority, verdict } =
            decide_priority(pod, &recs, &policy.scaling_off(pod), config, now);
        let proposed = proposed_requests(pod, &recs);
        // Upstream leaves a held-back pod out before its priority counts (`AddPod`).
        if policy.mode == UpdateMode::InPlace
            && let InPlaceStep::HeldBack { infeasible, why } = in_place_step(pod, &proposed)
        {
            skipped.push(PodAction {
                pod: pod.name.clone(),
                rank: None,
                priority,
                action: Action::Skip,
                reason: format!("keeps its requests: {why}"),
                backoff: Backoff::Infeasible(infeasible),
            });
            continue;
        }
        let verdict = verdict.and_then(|accept| {
            if meets_eviction_requirements(pod, &recs, &policy.eviction_requirements) {
                Ok(accept)
            } else {
                Err(PrioritySkip::EvictionRequirements)
            }
        });
        match verdict {
            Ok(accept) => queued.push((pod, priority, accept, proposed)),
            Err(skip) => skipped.push(PodAction {
                pod: pod.name.clone(),
                rank: None,
                priority,
                action: Action::Skip,
                reason: skip.to_string(),
                backoff: Backoff::None,
            }),
        }
    }
    (queued, skipped)
}

/// The pods whose CPU startup boost is over and that may be lowered in place now (AEP-7862,
/// upstream `CanUnboost`: not Pending, no resize under way, within the group's budget), and the
/// pods left for the ordinary plan. A pod with a boost still on is not updated otherwise (upstream
/// leaves it out of `podsAvailableForUpdate`).
fn plan_unboosts<'p>(
    policy: &UpdatePolicy,
    pods: &'p [PodSnapshot],
    budget: &mut EvictionBudget,
    now: Timestamp,
) -> (Vec<PodAction>, Vec<&'p PodSnapshot>) {
    let mut actions = Vec::new();
    let mut rest = Vec::new();
    for pod in pods {
        if pod.boosted.is_empty() {
            rest.push(pod);
            continue;
        }
        let over = expired(pod.boosted.keys(), &policy.boosts, pod.ready_since, now);
        let (action, reason) = if over.is_empty() {
            (
                Action::Skip,
                "CPU startup boost on until the pod has been Ready for its durationSeconds"
                    .to_owned(),
            )
        } else if pod.resize != ResizeStatus::None {
            (
                Action::Skip,
                "CPU startup boost over; waiting for the resize under way".to_owned(),
            )
        } else {
            match budget.in_place_only_allowed(pod) {
                Ok(()) => {
                    budget.record_resize(pod);
                    (
                        Action::Unboost,
                        format!(
                            "CPU startup boost over ({}): lower it in place",
                            over.join(", ")
                        ),
                    )
                }
                Err(denial) => (
                    Action::Skip,
                    format!("CPU startup boost over; lowering deferred: {denial}"),
                ),
            }
        };
        actions.push(PodAction {
            pod: pod.name.clone(),
            rank: None,
            priority: PodPriority::default(),
            action,
            reason,
            backoff: Backoff::None,
        });
    }
    (actions, rest)
}

/// One queued pod of an `InPlace` VPA: resized, or skipped with why; never evicted.
fn in_place_only(
    budget: &mut EvictionBudget,
    pod: &PodSnapshot,
    proposed: &RequestsByContainer,
    accept: AcceptReason,
) -> (Action, String, Backoff) {
    // The kubelet's state first (upstream looks at it before the group's availability): a
    // pod waiting on its node says so whatever the budget.
    match in_place_step(pod, proposed) {
        InPlaceStep::Resize(values) => {
            if let Err(denial) = budget.in_place_only_allowed(pod) {
                return (
                    Action::Skip,
                    format!("in-place resize deferred: {denial}"),
                    Backoff::None,
                );
            }
            budget.record_resize(pod);
            (
                Action::Resize,
                format!("resize in place: {accept}"),
                Backoff::Attempt(values),
            )
        }
        InPlaceStep::Waiting(why) => (
            Action::Skip,
            format!("keeps its requests: {why}"),
            Backoff::Waiting,
        ),
        // Held-back pods left the queue before it was sorted; kept for completeness.
        InPlaceStep::HeldBack { infeasible, why } => (
            Action::Skip,
            format!("keeps its requests: {why}"),
            Backoff::Infeasible(infeasible),
        ),
    }
}

fn evict_or_skip(
    budget: &mut EvictionBudget,
    pod: &PodSnapshot,
    rank: Option<usize>,
    priority: PodPriority,
    now: Timestamp,
    what: &str,
) -> PodAction {
    match budget.can_evict(pod, now) {
        Ok(()) => {
            budget.record_eviction(pod);
            PodAction {
                pod: pod.name.clone(),
                rank,
                priority,
                action: Action::Evict,
                reason: what.to_owned(),
                backoff: Backoff::None,
            }
        }
        Err(denial) => PodAction {
            pod: pod.name.clone(),
            rank,
            priority,
            action: Action::Skip,
            reason: format!("not evicted: {denial}"),
            backoff: Backoff::None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vertical::priority::PodContainer;
    use crate::vertical::priority::tests::{hours, t0};
    use crate::vertical::resources::Resources;

    /// Expected per pod: can it be evicted up front, and does the eviction succeed in order.
    struct Case {
        name: &'static str,
        replicas: u32,
        tolerance: f64,
        vpa_min_replicas: Option<i32>,
        pods: Vec<(PodSnapshot, bool, bool)>,
    }

    fn pod(i: usize) -> PodSnapshot {
        PodSnapshot::test(&format!("test-{i}"))
    }

    fn run(case: &Case) {
        let config = EvictionConfig {
            min_replicas: 2,
            eviction_tolerance: case.tolerance,
        };
        let pods: Vec<PodSnapshot> = case.pods.iter().map(|(p, _, _)| p.clone()).collect();
        let mut budget = EvictionBudget::new(
            &pods,
            |_| Some(case.replicas),
            case.vpa_min_replicas,
            &config,
        );
        let now = t0();
        for (pod, can, _) in &case.pods {
            assert_eq!(
                budget.can_evict(pod, now).is_ok(),
                *can,
                "{}: can_evict {}",
                case.name,
                pod.name
            );
        }
        for (pod, _, success) in &case.pods {
            let ok = budget.can_evict(pod, now).is_ok();
            if ok {
                budget.record_eviction(pod);
            }
            assert_eq!(ok, *success, "{}: evict {}", case.name, pod.name);
        }
    }

    // upstream: pkg/updater/restriction/pods_restriction_factory_test.go
    // TestDisruptReplicatedByController (eviction rows)
    #[test]
    #[allow(clippy::too_many_lines)] // one row per upstream case
    fn disrupt_replicated_by_controller() {
        let pending = |i| pod(i).phase(PodPhase::Pending);
        let infeasible = |i| pod(i).resize(ResizeStatus::Infeasible);
        let cases = vec![
            Case {
                name: "Evict only first pod (half of 3).",
                replicas: 3,
                tolerance: 0.5,
                vpa_min_replicas: None,
                pods: vec![
                    (pod(1), true, true),
                    (pod(2), true, false),
                    (pod(3), true, false),
                ],
            },
            Case {
                name: "Evict two pods (half of 4).",
                replicas: 4,
                tolerance: 0.5,
                vpa_min_replicas: None,
                pods: vec![
                    (pod(1), true, true),
                    (pod(2), true, true),
                    (pod(3), true, false),
                    (pod(4), true, false),
                ],
            },
            Case {
                name: "Half of the population can be evicted. One pod is missing already.",
                replicas: 4,
                tolerance: 0.5,
                vpa_min_replicas: None,
                pods: vec![
                    (pod(1), true, true),
                    (pod(2), true, false),
                    (pod(3), true, false),
                ],
            },
            Case {
                name: "For small eviction tolerance at least one pod is evicted.",
                replicas: 3,
                tolerance: 0.1,
                vpa_min_replicas: None,
                pods: vec![
                    (pod(1), true, true),
                    (pod(2), true, false),
                    (pod(3), true, false),
                ],
            },
            Case {
                name: "Only 2 pods in replica of 3 and tolerance is 0. None of pods can be evicted.",
                replicas: 3,
                tolerance: 0.1,
                vpa_min_replicas: None,
                pods: vec![(pod(1), false, false), (pod(2), false, false)],
            },
            Case {
                name: "Only pending pod can be evicted without violation of tolerance.",
                replicas: 3,
                tolerance: 0.5,
                vpa_min_replicas: None,
                pods: vec![
                    (pod(1), false, false),
                    (pending(2), true, true),
                    (pod(3), false, false),
                ],
            },
            Case {
                name: "Pending pods are always evictable.",
                replicas: 4,
                tolerance: 0.5,
                vpa_min_replicas: None,
                pods: vec![
                    (pod(1), false, false),
                    (pending(2), true, true),
                    (pending(3), true, true),
                    (pending(4), true, true),
                ],
            },
            Case {
                name: "Cannot evict a single Pod under default settings.",
                replicas: 1,
                tolerance: 0.5,
                vpa_min_replicas: None,
                pods: vec![(pod(1), false, false)],
            },
            Case {
                name: "Can evict even a single Pod using PodUpdatePolicy.MinReplicas.",
                replicas: 1,
                tolerance: 0.5,
                vpa_min_replicas: Some(1),
                pods: vec![(pod(1), true, true)],
            },
            Case {
                // The resizing pods just started resizing (no recorded attempt), so they are not
                // evicted yet; upstream expects canEvict true because its infeasible resize
                // falls back at once. Infeasible needs no timeout, so the same holds here.
                name: "First pod can be evicted without violation of tolerance, even if other evictable pods have ongoing resizes.",
                replicas: 3,
                tolerance: 0.5,
                vpa_min_replicas: None,
                pods: vec![
                    (pod(1), true, true),
                    (infeasible(2), true, false),
                    (infeasible(3), true, false),
                ],
            },
            Case {
                name: "No pods are evictable even if some pods are stuck resizing, but some are missing and eviction tolerance is small.",
                replicas: 4,
                tolerance: 0.1,
                vpa_min_replicas: None,
                pods: vec![
                    (pod(1), false, false),
                    (infeasible(2), false, false),
                    (pod(3), false, false),
                ],
            },
            Case {
                name: "All pods, including resizing pods, are evictable due to large tolerance.",
                replicas: 3,
                tolerance: 1.0,
                vpa_min_replicas: None,
                pods: vec![
                    (pod(1), true, true),
                    (infeasible(2), true, true),
                    (pod(3), true, true),
                ],
            },
        ];
        for case in &cases {
            run(case);
        }
    }

    // upstream: pkg/updater/restriction/pods_eviction_restriction_test.go TestEvictTooFewReplicas,
    // TestEvictionTolerance, TestEvictAtLeastOne, TestEvictEmitEvent
    #[test]
    fn eviction_restriction_table() {
        let five = |can: bool, successes: usize| -> Vec<(PodSnapshot, bool, bool)> {
            (0..5).map(|i| (pod(i), can, i < successes)).collect()
        };
        let cases = vec![
            Case {
                name: "TestEvictTooFewReplicas (min-replicas 10)",
                replicas: 5,
                tolerance: 0.5,
                vpa_min_replicas: Some(10),
                pods: five(false, 0),
            },
            Case {
                name: "TestEvictionTolerance",
                replicas: 5,
                tolerance: 0.8,
                vpa_min_replicas: None,
                pods: five(true, 4),
            },
            Case {
                name: "TestEvictAtLeastOne",
                replicas: 5,
                tolerance: 0.1,
                vpa_min_replicas: None,
                pods: five(true, 1),
            },
            Case {
                name: "TestEvictEmitEvent: Pods that can be evicted",
                replicas: 4,
                tolerance: 0.5,
                vpa_min_replicas: None,
                pods: vec![
                    (pod(1).phase(PodPhase::Pending), true, true),
                    (pod(2).phase(PodPhase::Pending), true, true),
                ],
            },
            Case {
                name: "TestEvictEmitEvent: Pod that can not be evicted",
                replicas: 4,
                tolerance: 0.5,
                vpa_min_replicas: None,
                pods: vec![(pod(1), false, false)],
            },
        ];
        for case in &cases {
            run(case);
        }
    }

    fn in_place(
        pods: &[PodSnapshot],
        replicas: u32,
        tolerance: f64,
        min: Option<i32>,
    ) -> Vec<InPlaceDecision> {
        let config = EvictionConfig {
            min_replicas: 2,
            eviction_tolerance: tolerance,
        };
        let mut budget = EvictionBudget::new(pods, |_| Some(replicas), min, &config);
        pods.iter()
            .map(|p| {
                let d = budget.in_place_decision(p, t0());
                if d == InPlaceDecision::Approved {
                    budget.record_resize(p);
                }
                d
            })
            .collect()
    }

    fn is_deferred(d: &InPlaceDecision) -> bool {
        matches!(d, InPlaceDecision::Deferred(_))
    }

    // upstream: pods_restriction_factory_test.go TestDisruptReplicatedByController (in-place rows)
    #[test]
    fn in_place_rows() {
        use InPlaceDecision::{Approved, Evict};
        // "In-place update only first pod (half of 3)."
        let d = in_place(&[pod(1), pod(2), pod(3)], 3, 0.5, None);
        assert_eq!(d[0], Approved);
        assert!(is_deferred(&d[1]) && is_deferred(&d[2]));
        // "For small eviction tolerance at least one pod is in-place resized."
        let d = in_place(&[pod(1), pod(2), pod(3)], 3, 0.1, None);
        assert_eq!(d[0], Approved);
        assert!(is_deferred(&d[1]) && is_deferred(&d[2]));
        // "Ongoing in-placing pods will not get resized again, but may be considered for
        // eviction or deferred."
        let d = in_place(
            &[
                pod(1).resize(ResizeStatus::Infeasible),
                pod(2).resize(ResizeStatus::InProgress),
                pod(3),
            ],
            3,
            0.1,
            None,
        );
        assert_eq!(d[0], Evict);
        assert!(is_deferred(&d[1]));
        assert_eq!(d[2], Approved);
        // "Cannot in-place a single Pod under default settings."
        assert!(is_deferred(&in_place(&[pod(1)], 1, 0.5, None)[0]));
        // "Can in-place even a single Pod using PodUpdatePolicy.MinReplicas."
        assert_eq!(in_place(&[pod(1)], 1, 0.5, Some(1))[0], Approved);
    }

    // upstream: pods_inplace_restriction_test.go (timeouts of CanEvictInPlacingPod)
    #[test]
    fn stuck_resize_timeouts() {
        let config = EvictionConfig::default();
        let mins = SignedDuration::from_mins;
        let now = t0() + hours(2);
        let cases = [
            (ResizeStatus::Deferred, mins(4), false),
            (ResizeStatus::Deferred, mins(6), true),
            (ResizeStatus::InProgress, mins(59), false),
            (ResizeStatus::InProgress, mins(61), true),
            (ResizeStatus::Error, mins(0), true),
            (ResizeStatus::Infeasible, mins(0), true),
        ];
        for (status, ago, want) in cases {
            let mut p = pod(1).resize(status);
            p.last_in_place_attempt = Some(now - ago);
            let pods = [p, pod(2), pod(3)];
            let budget = EvictionBudget::new(&pods, |_| Some(3), None, &config);
            assert_eq!(
                budget.can_evict(&pods[0], now).is_ok(),
                want,
                "{status:?} {ago:?}"
            );
        }
    }

    #[test]
    fn pods_without_owner_are_never_evicted() {
        let mut p = pod(1);
        p.owner = None;
        let pods = [p, pod(2), pod(3)];
        let budget = EvictionBudget::new(&pods, |_| Some(3), None, &EvictionConfig::default());
        assert_eq!(budget.can_evict(&pods[0], t0()), Err(Denial::NoOwner));
    }

    #[test]
    fn jobs_use_live_pods_and_unknown_replicas_deny() {
        let job = |i: usize| {
            let mut p = pod(i);
            p.owner = Some(Owner {
                kind: "Job".to_owned(),
                name: "j".to_owned(),
            });
            p
        };
        let pods = [job(1), job(2), job(3), job(4)];
        let budget = EvictionBudget::new(&pods, |_| None, None, &EvictionConfig::default());
        assert_eq!(
            budget
                .group(pods[0].owner.as_ref().unwrap())
                .unwrap()
                .configured,
            4
        );
        let rs = [pod(1), pod(2)];
        let budget = EvictionBudget::new(&rs, |_| None, None, &EvictionConfig::default());
        assert_eq!(budget.can_evict(&rs[0], t0()), Err(Denial::UnknownReplicas));
    }

    fn grow(p: PodSnapshot) -> PodSnapshot {
        let mut p = p;
        p.containers.push(PodContainer {
            name: "app".to_owned(),
            requests: Resources::new(100, 128 << 20),
            limits: Resources::default(),
        });
        p
    }

    // The acceptance scenario: a 4-replica workload far below the recommendation is
    // rolled over at most 2 pods per loop; a single replica is never evicted.
    #[test]
    fn plan_rolls_at_most_half() {
        let pods: Vec<PodSnapshot> = (1..=4).map(|i| grow(pod(i))).collect();
        let recs = vec![ContainerRecommendation {
            container: "app".to_owned(),
            target: Resources::new(500, 512 << 20),
            lower_bound: Resources::new(400, 400 << 20),
            upper_bound: Resources::new(900, 900 << 20),
        }];
        let plan = plan_updates(
            &UpdatePolicy::default(),
            &pods,
            |_| recs.clone(),
            |_| Some(4),
            &UpdateConfig::default(),
            &EvictionConfig::default(),
            t0() + hours(1),
        );
        let evicted = plan.iter().filter(|a| a.action == Action::Evict).count();
        assert_eq!(evicted, 2);
        assert_eq!(plan.len(), 4);
        assert!(plan.iter().all(|a| a.rank.is_some()));

        let single = [grow(pod(1))];
        let plan = plan_updates(
            &UpdatePolicy::default(),
            &single,
            |_| recs.clone(),
            |_| Some(1),
            &UpdateConfig::default(),
            &EvictionConfig::default(),
            t0() + hours(1),
        );
        assert_eq!(plan[0].action, Action::Skip);
        assert!(
            plan[0].reason.contains("too few replicas"),
            "{}",
            plan[0].reason
        );

        let off = UpdatePolicy {
            mode: UpdateMode::Off,
            ..UpdatePolicy::default()
        };
        let plan = plan_updates(
            &off,
            &pods,
            |_| recs.clone(),
            |_| Some(4),
            &UpdateConfig::default(),
            &EvictionConfig::default(),
            t0(),
        );
        assert!(plan.iter().all(|a| a.action == Action::Skip));

        let ipr = UpdatePolicy {
            mode: UpdateMode::InPlaceOrRecreate,
            ..UpdatePolicy::default()
        };
        let plan = plan_updates(
            &ipr,
            &pods,
            |_| recs.clone(),
            |_| Some(4),
            &UpdateConfig::default(),
            &EvictionConfig::default(),
            t0() + hours(1),
        );
        assert_eq!(
            plan.iter().filter(|a| a.action == Action::Resize).count(),
            2
        );
    }

    fn in_place_plan(pods: &[PodSnapshot], target: Resources) -> Vec<PodAction> {
        let recs = vec![ContainerRecommendation {
            container: "app".to_owned(),
            target,
            lower_bound: Resources::new(400, 400 << 20),
            upper_bound: Resources::new(900, 900 << 20),
        }];
        let policy = UpdatePolicy {
            mode: UpdateMode::InPlace,
            ..UpdatePolicy::default()
        };
        plan_updates(
            &policy,
            pods,
            |_| recs.clone(),
            |_| Some(u32::try_from(pods.len()).unwrap()),
            &UpdateConfig::default(),
            &EvictionConfig::default(),
            t0() + hours(1),
        )
    }

    // AEP-8818: InPlace resizes within the group budget and never evicts, whatever the resize
    // state (an Infeasible or long-Deferred pod would be evicted by InPlaceOrRecreate).
    #[test]
    fn in_place_never_evicts() {
        let target = Resources::new(500, 512 << 20);
        let mut infeasible = grow(pod(3)).resize(ResizeStatus::Infeasible);
        infeasible.desired_requests = RequestsByContainer::from([("app".to_owned(), target)]);
        let mut deferred = grow(pod(4)).resize(ResizeStatus::Deferred);
        deferred.last_in_place_attempt = Some(t0() - hours(10));
        let pods = vec![
            grow(pod(1)),
            grow(pod(2)),
            infeasible,
            deferred,
            grow(pod(5)).phase(PodPhase::Pending),
        ];
        let plan = in_place_plan(&pods, target);
        assert!(plan.iter().all(|a| a.action != Action::Evict), "{plan:#?}");
        let by = |name: &str| plan.iter().find(|a| a.pod == name).unwrap();
        assert_eq!(by("test-1").action, Action::Resize);
        assert_eq!(
            by("test-1").backoff,
            Backoff::Attempt(RequestsByContainer::from([("app".to_owned(), target)]))
        );
        // The kubelet said the same values cannot fit: held back and remembered, not retried.
        assert_eq!(by("test-3").action, Action::Skip);
        assert!(matches!(by("test-3").backoff, Backoff::Infeasible(_)));
        assert_eq!(by("test-3").rank, None);
        assert!(by("test-3").reason.contains("keeps its requests"));
        assert_eq!(by("test-4").action, Action::Skip);
        assert_eq!(by("test-4").backoff, Backoff::Waiting);
        assert_eq!(by("test-5").action, Action::Skip);
        // The budget still paces resizes: 5 replicas, tolerance ⌊2.5⌋ = 2, one Pending, so 4
        // running may drop to 3: one resize this loop.
        assert_eq!(by("test-2").action, Action::Skip);
        assert!(
            by("test-2").reason.contains("budget"),
            "{}",
            by("test-2").reason
        );
        assert_eq!(
            plan.iter().filter(|a| a.action == Action::Resize).count(),
            1,
            "{plan:#?}"
        );
    }

    #[test]
    fn in_place_retries_remembered_values_only_when_lower() {
        let high = Resources::new(20_000, 512 << 20);
        let mut p1 = grow(pod(1));
        p1.infeasible = Some(RequestsByContainer::from([("app".to_owned(), high)]));
        let pods = vec![p1, grow(pod(2)), grow(pod(3))];
        let plan = in_place_plan(&pods, high);
        assert_eq!(
            plan.iter().find(|a| a.pod == "test-1").unwrap().action,
            Action::Skip
        );
        let lower = Resources::new(6_000, 512 << 20);
        let plan = in_place_plan(&pods, lower);
        assert_eq!(
            plan.iter().find(|a| a.pod == "test-1").unwrap().action,
            Action::Resize
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            // Never more running pods evicted per loop than the tolerance allows (or one).
            #[test]
            fn evictions_within_budget(n in 1usize..30, replicas in 1u32..30, tol in 0.0f64..1.0, pending in 0usize..5) {
                let pods: Vec<PodSnapshot> = (0..n)
                    .map(|i| if i < pending { pod(i).phase(PodPhase::Pending) } else { pod(i) })
                    .collect();
                let config = EvictionConfig { min_replicas: 2, eviction_tolerance: tol };
                let mut budget = EvictionBudget::new(&pods, |_| Some(replicas), None, &config);
                let mut running_evicted = 0u32;
                for p in &pods {
                    if budget.can_evict(p, t0()).is_ok() {
                        budget.record_eviction(p);
                        if p.phase != PodPhase::Pending { running_evicted += 1; }
                    }
                }
                let tolerance = i64::from((f64::from(replicas) * tol) as u32);
                let running = (n - pending.min(n)) as i64;
                let mut allowed = (running - (i64::from(replicas) - tolerance)).max(0);
                if tolerance == 0 && running == i64::from(replicas) {
                    allowed = 1;
                }
                if n < 2 {
                    allowed = 0;
                }
                prop_assert!(i64::from(running_evicted) <= allowed);
            }
        }
    }
}
