//! Admission patch: the JSON Patch the webhook returns for a new pod, and the recommendation
//! processing (capping) the updater shares with it.
//!
//! Semantics follow upstream VPA (`pkg/admission-controller/resource/pod/patch`,
//! `recommendation/recommendation_provider.go`, `pkg/utils/vpa/capping.go`):
//!
//! * The recommendation is processed per container: container `LimitRange` bounds, then the
//!   policy's `minAllowed`/`maxAllowed`, then (`controlledValues: RequestsOnly`) capped at the
//!   container's existing limit. Resources outside `controlledResources` and containers with
//!   `mode: Off` get nothing. Pod `LimitRange`s scale all containers together first.
//! * Beyond upstream, defensively (a policy is written by a namespace user, and objects stored
//!   before the CRD refused bad policies still exist): a `minAllowed`/`maxAllowed` amount <= 0 is
//!   no bound (upstream's rule for 0); a negative recommended target leaves the resource alone
//!   and a negative bound counts as 0; the container `LimitRange` is applied again after the
//!   policy, so that it wins over `minAllowed`/`maxAllowed`.
//! * The guarantee, last: the requests and limits the patch (or an in-place resize) gives a
//!   container break no rule of [`super::pod_validity`] (amounts >= 0, request <= limit, the
//!   container and pod `LimitRange`) that the container, or the pod, met before. A resource whose
//!   new values would is left as it is, for that container (for every container, when a pod
//!   `LimitRange` sum is at stake), with a note; the updater reads the same processed
//!   recommendation, so it does not evict for a change the webhook would not make.
//! * Requests become the processed target; with `RequestsAndLimits` (the default) limits scale in
//!   proportion (`limit × newRequest / request`, falling back to the `LimitRange` default limit).
//! * Beyond upstream, `maxLimitRequestRatio` holds: `RequestsOnly` raises requests to
//!   `limit / ratio`, `RequestsAndLimits` lowers limits to `request × ratio`.
//! * `updateMode: Off` changes no resources; the pod still gets `vpaObservedContainers`.
//! * At creation only (not in an in-place resize), a container with a CPU startup boost gets it
//!   on top of the above ([`super::startup_boost`]), even in mode `Off`, and its original
//!   resources in the `vpaCpuStartupBoost/<container>` annotation; a boost that would break a
//!   container `LimitRange` rule the container met before is left out, with a note, and boosts
//!   that would make the pod's CPU sums break a `Pod` `LimitRange` rule the pod without them
//!   meets are all left out, with a note on each.
//! * Patch ops are `add` (which also replaces), containers in spec order, `cpu` before `memory`,
//!   `requests` before `limits`; maps that do not exist are created first. Then the
//!   `vpaUpdates` annotation (`Pod resources updated by NAME: container 0: cpu request, …`)
//!   and `vpaObservedContainers` (`app, sidecar`). Deterministic for identical input.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use crate::api::vpa::VerticalPodAutoscaler;
use crate::quantity::{Quantity, QuantityError};

use super::limit_range::{
    LimitRangeItem, PodLimitInput, cap_to_container_limit_range, cap_to_pod_limit_range,
    proportional_limit, ratio_ceiling_limit, ratio_floor_request,
};
use super::pod_validity::{Amounts, container_violations, pod_violations};
use super::policy::{
    ContainerMode, ContainerPolicy, ControlledValues, UpdateMode, container_policies_from_api,
    container_policy,
};
use super::priority::{OBSERVED_CONTAINERS_ANNOTATION, PodContainer};
use super::startup_boost::{
    OriginalResources, StartupBoosts, annotation_key, boost_container, pod_limit_range_breaks,
};
// Re-exported: the updater and its replay read recommendations through `admission`.
pub use super::resources::recommendations_from_api;
use super::resources::{
    ContainerRecommendation, Resource, Resources, recommendation_for, resources_from_k8s,
};

/// The annotation listing what the webhook changed.
pub const UPDATES_ANNOTATION: &str = "vpaUpdates";

/// The recommendation after capping, plus the notes upstream puts into `vpaUpdates`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessedRecommendation {
    /// Per container present in the pod, in recommendation order.
    pub containers: Vec<ContainerRecommendation>,
    /// Capping notes per container (`cpu capped to maxAllowed`, …).
    pub notes: BTreeMap<String, Vec<String>>,
}

/// Caps a VPA recommendation for one pod (upstream capping processor; also used by the
/// updater so that it compares pods against what the webhook would really set).
pub fn process_recommendation(
    containers: &[PodContainer],
    recommendations: &[ContainerRecommendation],
    policies: &[ContainerPolicy],
    container_range: Option<&LimitRangeItem>,
    pod_range: Option<&LimitRangeItem>,
) -> ProcessedRecommendation {
    let mut recs: Vec<ContainerRecommendation> = recommendations
        .iter()
        .filter(|rec| containers.iter().any(|c| c.name == rec.container))
        .filter_map(|rec| {
            let policy = container_policy(policies, &rec.container);
            if policy.is_some_and(|p| p.mode == ContainerMode::Off) {
                return None;
            }
            let mut rec = rec.clone();
            for r in Resource::ALL {
                let uncontrolled = policy.is_some_and(|p| !p.controls(r));
                // A negative target (no recommender writes one) sets nothing.
                let negative = rec.target.get(r).is_some_and(|q| q.milli() < 0);
                if uncontrolled || negative {
                    rec.target.set(r, None);
                    rec.lower_bound.set(r, None);
                    rec.upper_bound.set(r, None);
                }
                for bound in [&mut rec.lower_bound, &mut rec.upper_bound] {
                    if bound.get(r).is_some_and(|q| q.milli() < 0) {
                        bound.set(r, Some(Quantity::ZERO));
                    }
                }
            }
            Some(rec)
        })
        .collect();

    if let Some(range) = pod_range {
        // Containers no recommendation names keep their requests, and those count towards the
        // pod's minimum too.
        let named: Vec<bool> = containers
            .iter()
            .map(|c| recs.iter().any(|rec| rec.container == c.name))
            .collect();
        for field in 0..3 {
            let mut unrecommended = vec![Resources::default(); containers.len()];
            let mut inputs: Vec<PodLimitInput<'_>> = Vec::new();
            for rec in &mut recs {
                let Some(c) = containers.iter().find(|c| c.name == rec.container) else {
                    continue;
                };
                let recommendation = match field {
                    0 => &mut rec.target,
                    1 => &mut rec.lower_bound,
                    _ => &mut rec.upper_bound,
                };
                inputs.push(PodLimitInput {
                    requests: &c.requests,
                    limits: &c.limits,
                    recommendation,
                });
            }
            for ((c, named), recommendation) in
                containers.iter().zip(&named).zip(&mut unrecommended)
            {
                if !named {
                    inputs.push(PodLimitInput {
                        requests: &c.requests,
                        limits: &c.limits,
                        recommendation,
                    });
                }
            }
            cap_to_pod_limit_range(&mut inputs, range);
        }
    }

    let mut notes = BTreeMap::new();
    for rec in &mut recs {
        let Some(container) = containers.iter().find(|c| c.name == rec.container) else {
            continue;
        };
        let policy = container_policy(policies, &rec.container);
        let mut container_notes = Vec::new();
        for (i, field) in [&mut rec.target, &mut rec.lower_bound, &mut rec.upper_bound]
            .into_iter()
            .enumerate()
        {
            let n = cap_one(field, container, policy, container_range);
            if i == 0 {
                container_notes = n;
            }
        }
        if !container_notes.is_empty() {
            notes.insert(rec.container.clone(), container_notes);
        }
    }
    keep_api_valid(
        &mut recs,
        containers,
        policies,
        container_range,
        pod_range,
        &mut notes,
    );
    ProcessedRecommendation {
        containers: recs,
        notes,
    }
}

/// The last step of [`process_recommendation`]: leaves alone every resource whose new request
/// and limit would break a rule of [`super::pod_validity`] that the container (or, for a pod
/// `LimitRange`, the pod) meets now. See the module docs.
fn keep_api_valid(
    recs: &mut [ContainerRecommendation],
    containers: &[PodContainer],
    policies: &[ContainerPolicy],
    container_range: Option<&LimitRangeItem>,
    pod_range: Option<&LimitRangeItem>,
    notes: &mut BTreeMap<String, Vec<String>>,
) {
    let mut leave = |rec: &mut ContainerRecommendation, r: Resource, why: String| {
        rec.target.set(r, None);
        rec.lower_bound.set(r, None);
        rec.upper_bound.set(r, None);
        notes
            .entry(rec.container.clone())
            .or_default()
            .push(format!(
                "{r} left unchanged: the new values would break {why}"
            ));
    };
    for rec in recs.iter_mut() {
        let Some(container) = containers.iter().find(|c| c.name == rec.container) else {
            continue;
        };
        let (limits, _) = new_limits(
            container,
            &rec.target,
            controlled_values(policies, &rec.container),
            container_range,
        );
        for r in Resource::ALL {
            let Some(request) = rec.target.get(r) else {
                continue;
            };
            let after = Amounts {
                request: Some(request),
                limit: limits.get(r).or(container.limits.get(r)),
            };
            let fresh = container_violations(r, after, container_range).new_since(
                container_violations(r, amounts_of(container, r), container_range),
            );
            if !fresh.is_empty() {
                leave(rec, r, fresh.to_string());
            }
        }
    }
    let Some(pod_range) = pod_range else { return };
    for r in Resource::ALL {
        let before = pod_violations(r, containers.iter().map(|c| amounts_of(c, r)), pod_range);
        let after = containers.iter().map(|c| {
            let Some(rec) = recs.iter().find(|rec| rec.container == c.name) else {
                return amounts_of(c, r);
            };
            let Some(request) = rec.target.get(r) else {
                return amounts_of(c, r);
            };
            let (limits, _) = new_limits(
                c,
                &rec.target,
                controlled_values(policies, &rec.container),
                container_range,
            );
            Amounts {
                request: Some(request),
                limit: limits.get(r).or(c.limits.get(r)),
            }
        });
        let fresh = pod_violations(r, after.collect::<Vec<_>>(), pod_range).new_since(before);
        if !fresh.is_empty() {
            for rec in recs.iter_mut().filter(|rec| rec.target.get(r).is_some()) {
                leave(rec, r, format!("{fresh} of the pod"));
            }
        }
    }
}

fn amounts_of(container: &PodContainer, r: Resource) -> Amounts {
    Amounts {
        request: container.requests.get(r),
        limit: container.limits.get(r),
    }
}

fn controlled_values(policies: &[ContainerPolicy], container: &str) -> ControlledValues {
    container_policy(policies, container)
        .map_or(ControlledValues::RequestsAndLimits, |p| p.controlled_values)
}

/// The limits the webhook sets for `container` with new `requests`: with `RequestsAndLimits`,
/// each keeps the container's limit-to-request proportion (from the `LimitRange` default limit
/// when the container has none), lowered to fit `maxLimitRequestRatio`; with `RequestsOnly`,
/// none. With the notes for `vpaUpdates`.
fn new_limits(
    container: &PodContainer,
    requests: &Resources,
    values: ControlledValues,
    container_range: Option<&LimitRangeItem>,
) -> (Resources, Vec<String>) {
    let mut limits = Resources::default();
    let mut notes = Vec::new();
    if values != ControlledValues::RequestsAndLimits {
        return (limits, notes);
    }
    let default = container_range.map(|r| r.default).unwrap_or_default();
    for r in Resource::ALL {
        let (limit, note) = proportional_limit(
            r,
            container.limits.get(r),
            container.requests.get(r),
            requests.get(r),
            default.get(r),
        );
        limits.set(r, limit);
        notes.extend(note);
        // Beyond upstream: keep limit / request within maxLimitRequestRatio.
        let ratio = container_range.and_then(|lr| lr.max_limit_request_ratio.get(r));
        if let (Some(req), Some(lim)) = (requests.get(r), limit)
            && let Some(lowered) = ratio_ceiling_limit(req, lim, ratio)
        {
            limits.set(r, Some(lowered));
            notes.push(format!(
                "{r} limit lowered to fit maxLimitRequestRatio in container LimitRange"
            ));
        }
    }
    (limits, notes)
}

fn cap_one(
    amounts: &mut Resources,
    container: &PodContainer,
    policy: Option<&ContainerPolicy>,
    range: Option<&LimitRangeItem>,
) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(range) = range {
        notes.extend(cap_to_container_limit_range(
            amounts,
            &container.requests,
            &container.limits,
            range,
        ));
    }
    if let Some(policy) = policy {
        for r in Resource::ALL {
            let Some(mut value) = amounts.get(r) else {
                continue;
            };
            // Upstream: a zero bound is no bound. Beyond upstream: so is a negative one.
            if let Some(min) = policy.min_allowed.get(r).filter(|m| m.milli() > 0)
                && value < min
            {
                value = min;
                notes.push(format!("{r} capped to minAllowed"));
            }
            if let Some(max) = policy.max_allowed.get(r).filter(|m| m.milli() > 0)
                && value > max
            {
                value = max;
                notes.push(format!("{r} capped to maxAllowed"));
            }
            amounts.set(r, Some(value));
        }
        // Beyond upstream: the LimitRange wins over the policy (a pod outside it is refused).
        if let Some(range) = range {
            notes.extend(cap_to_container_limit_range(
                amounts,
                &container.requests,
                &container.limits,
                range,
            ));
        }
        if policy.controlled_values == ControlledValues::RequestsOnly {
            for r in Resource::ALL {
                let (Some(value), Some(limit)) = (amounts.get(r), container.limits.get(r)) else {
                    continue;
                };
                if value > limit {
                    amounts.set(r, Some(limit));
                    notes.push(format!("{r} capped to container limit"));
                }
                // Beyond upstream: keep limit / request within maxLimitRequestRatio.
                let ratio = range.and_then(|lr| lr.max_limit_request_ratio.get(r));
                if let Some(value) = amounts.get(r)
                    && let Some(raised) = ratio_floor_request(r, value, Some(limit), ratio)
                {
                    amounts.set(r, Some(raised));
                    notes.push(format!(
                        "{r} raised to fit maxLimitRequestRatio in container LimitRange"
                    ));
                }
            }
        }
    }
    notes
}

/// The pod as the webhook sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdmissionPod {
    /// Containers in spec order, with their spec requests and limits.
    pub containers: Vec<AdmissionContainer>,
    /// Whether `metadata.annotations` exists (else the patch creates it first).
    pub has_annotations: bool,
}

/// One container of the pod being admitted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdmissionContainer {
    /// Name, requests and limits.
    pub container: PodContainer,
    /// Whether `resources.requests` exists as a map.
    pub has_requests: bool,
    /// Whether `resources.limits` exists as a map.
    pub has_limits: bool,
}

/// The VPA as the webhook needs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AdmissionVpa {
    /// `metadata.name`.
    pub name: String,
    /// `spec.updatePolicy.updateMode`.
    pub update_mode: UpdateMode,
    /// `spec.resourcePolicy.containerPolicies`.
    pub policies: Vec<ContainerPolicy>,
    /// `status.recommendation.containerRecommendations` (`None`: no recommendation yet).
    pub recommendation: Option<Vec<ContainerRecommendation>>,
    /// `startupBoost` of the spec and of the container policies.
    pub boosts: StartupBoosts,
}

/// One RFC 6902 operation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JsonPatchOp {
    /// Always `add` (it replaces existing members), as upstream.
    pub op: &'static str,
    /// JSON Pointer.
    pub path: String,
    /// New value.
    pub value: Value,
}

impl JsonPatchOp {
    fn add(path: String, value: Value) -> JsonPatchOp {
        JsonPatchOp {
            op: "add",
            path,
            value,
        }
    }
}

/// The resources one container gets.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContainerUpdate {
    /// Container name.
    pub container: String,
    /// New requests (only the resources set are patched).
    pub requests: Resources,
    /// New limits (only the resources set are patched).
    pub limits: Resources,
}

/// The webhook's answer for one pod.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AdmissionPatch {
    /// The JSON Patch, in the order described in the module docs.
    pub ops: Vec<JsonPatchOp>,
    /// What each patched container gets.
    pub updates: Vec<ContainerUpdate>,
    /// The annotations the patch adds (`vpaUpdates`, `vpaObservedContainers`).
    pub annotations: BTreeMap<String, String>,
}

/// Computes the patch for a pod controlled by `vpa` when it is created (with its startup
/// boosts). `container_range` and `pod_range` are the merged `LimitRange` items of the pod's
/// namespace (see `limit_range::merge`).
pub fn admission_patch(
    pod: &AdmissionPod,
    vpa: &AdmissionVpa,
    container_range: Option<&LimitRangeItem>,
    pod_range: Option<&LimitRangeItem>,
) -> AdmissionPatch {
    patch_for(pod, vpa, container_range, pod_range, true)
}

fn patch_for(
    pod: &AdmissionPod,
    vpa: &AdmissionVpa,
    container_range: Option<&LimitRangeItem>,
    pod_range: Option<&LimitRangeItem>,
    at_creation: bool,
) -> AdmissionPatch {
    let containers: Vec<PodContainer> =
        pod.containers.iter().map(|c| c.container.clone()).collect();
    let processed = process_recommendation(
        &containers,
        vpa.recommendation.as_deref().unwrap_or_default(),
        &vpa.policies,
        container_range,
        pod_range,
    );
    let mode_off = vpa.update_mode == UpdateMode::Off;
    // Upstream reads controlledValues only when the mode is not Off.
    let policies: &[ContainerPolicy] = if mode_off { &[] } else { &vpa.policies };

    let mut patch = AdmissionPatch::default();
    if !pod.has_annotations {
        patch.ops.push(JsonPatchOp::add(
            "/metadata/annotations".to_owned(),
            json!({}),
        ));
    }
    // First what each container gets, its boost apart: whether the boosts are applied is
    // decided on the whole pod (the `Pod` LimitRange sums).
    let mut planned = plan_containers(
        pod,
        vpa,
        (&processed, !mode_off),
        policies,
        container_range,
        at_creation,
    );
    keep_pod_limit_range(&pod.containers, &mut planned, pod_range);

    let mut summaries = Vec::new();
    let mut boosted: Vec<(String, String)> = Vec::new();
    for (i, (c, mut p)) in pod.containers.iter().zip(planned).enumerate() {
        if let Some(boost) = p.boost.take() {
            p.requests.cpu = Some(boost.request);
            if boost.limit.is_some() {
                p.limits.cpu = boost.limit;
            }
            p.notes.push("cpu startup boost".to_owned());
            boosted.push(boost.annotation);
        }
        if !p.recommended && p.requests.is_empty() && p.limits.is_empty() {
            continue;
        }
        let (ops, summary) = container_ops(i, c, &p.requests, &p.limits, p.notes);
        if !ops.is_empty() {
            patch.ops.extend(ops);
            summaries.push(summary);
            patch.updates.push(ContainerUpdate {
                container: c.container.name.clone(),
                requests: p.requests,
                limits: p.limits,
            });
        }
    }
    for (key, value) in boosted {
        patch.ops.push(annotation_op(&key, &value));
        patch.annotations.insert(key, value);
    }
    if !summaries.is_empty() {
        let value = format!(
            "Pod resources updated by {}: {}",
            vpa.name,
            summaries.join("; ")
        );
        patch.ops.push(annotation_op(UPDATES_ANNOTATION, &value));
        patch
            .annotations
            .insert(UPDATES_ANNOTATION.to_owned(), value);
    }
    let observed = pod
        .containers
        .iter()
        .map(|c| c.container.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    patch
        .ops
        .push(annotation_op(OBSERVED_CONTAINERS_ANNOTATION, &observed));
    patch
        .annotations
        .insert(OBSERVED_CONTAINERS_ANNOTATION.to_owned(), observed);
    patch
}

/// What each container of the pod gets from the `processed` recommendation (when `apply`: the
/// mode applies one), with its CPU startup boost apart (at creation only).
fn plan_containers(
    pod: &AdmissionPod,
    vpa: &AdmissionVpa,
    (processed, apply): (&ProcessedRecommendation, bool),
    policies: &[ContainerPolicy],
    container_range: Option<&LimitRangeItem>,
    at_creation: bool,
) -> Vec<Planned> {
    let mut planned: Vec<Planned> = Vec::new();
    for c in &pod.containers {
        let name = &c.container.name;
        let rec = if apply {
            recommendation_for(&processed.containers, name)
        } else {
            None
        };
        let mut notes = processed.notes.get(name).cloned().unwrap_or_default();
        let (requests, limits) = match rec {
            Some(rec) => {
                let requests = rec.target;
                let (limits, limit_notes) = new_limits(
                    &c.container,
                    &requests,
                    controlled_values(policies, name),
                    container_range,
                );
                if !limits.is_empty() {
                    notes.extend(limit_notes);
                }
                (requests, limits)
            }
            None => (Resources::default(), Resources::default()),
        };
        let boost = if at_creation {
            container_boost(c, vpa, container_range, (&requests, &limits), &mut notes)
        } else {
            None
        };
        planned.push(Planned {
            recommended: rec.is_some(),
            requests,
            limits,
            notes,
            boost,
        });
    }
    planned
}

/// What the patch gives one container, before its startup boost is applied.
struct Planned {
    /// The VPA has a recommendation for it (in a mode that applies one).
    recommended: bool,
    requests: Resources,
    limits: Resources,
    notes: Vec<String>,
    /// Its CPU startup boost, when it has one that keeps its `Container` LimitRange rules.
    boost: Option<Boost>,
}

/// A container's boosted CPU and the annotation recording its original resources.
struct Boost {
    request: Quantity,
    /// The new CPU limit, when the boost changes it.
    limit: Option<Quantity>,
    annotation: (String, String),
}

/// The container's CPU startup boost on top of the patch's `requests`/`limits`, if it has one
/// and the result keeps the container's `Container` LimitRange rules (else a note says why not).
fn container_boost(
    c: &AdmissionContainer,
    vpa: &AdmissionVpa,
    container_range: Option<&LimitRangeItem>,
    (requests, limits): (&Resources, &Resources),
    notes: &mut Vec<String>,
) -> Option<Boost> {
    let name = &c.container.name;
    let boost = vpa.boosts.for_container(name)?;
    let (request, limit) = boost_container(
        requests.cpu,
        (&c.container.requests, &c.container.limits),
        controlled_values(&vpa.policies, name),
        boost.cpu,
        vpa.boosts.max_cpu,
    )?;
    let after = Amounts {
        request: Some(request),
        limit: limit.or(limits.cpu).or(c.container.limits.cpu),
    };
    let before = container_violations(
        Resource::Cpu,
        amounts_of(&c.container, Resource::Cpu),
        container_range,
    );
    let fresh = container_violations(Resource::Cpu, after, container_range).new_since(before);
    if !fresh.is_empty() {
        notes.push(format!(
            "cpu startup boost left out: it would break {fresh}"
        ));
        return None;
    }
    Some(Boost {
        request,
        limit,
        annotation: (
            annotation_key(name),
            OriginalResources::of(&c.container.requests, &c.container.limits).annotation(),
        ),
    })
}

/// Leaves out every container's boost when, together, they would make the pod's CPU sums break
/// a rule of the `Pod` LimitRange item that the pod without them meets (as a recommendation
/// that breaks a pod sum is left out for every container), with a note on each.
fn keep_pod_limit_range(
    containers: &[AdmissionContainer],
    planned: &mut [Planned],
    pod_range: Option<&LimitRangeItem>,
) {
    if planned.iter().all(|p| p.boost.is_none()) {
        return;
    }
    let unboosted_cpu = |c: &AdmissionContainer, p: &Planned| Amounts {
        request: p.requests.cpu.or(c.container.requests.cpu),
        limit: p.limits.cpu.or(c.container.limits.cpu),
    };
    let unboosted: Vec<Amounts> = containers
        .iter()
        .zip(planned.iter())
        .map(|(c, p)| unboosted_cpu(c, p))
        .collect();
    let boosted: Vec<Amounts> = containers
        .iter()
        .zip(planned.iter())
        .map(|(c, p)| match &p.boost {
            Some(b) => Amounts {
                request: Some(b.request),
                limit: b.limit.or(unboosted_cpu(c, p).limit),
            },
            None => unboosted_cpu(c, p),
        })
        .collect();
    let fresh = pod_limit_range_breaks(&unboosted, &boosted, pod_range);
    if fresh.is_empty() {
        return;
    }
    for p in planned.iter_mut().filter(|p| p.boost.is_some()) {
        p.boost = None;
        p.notes.push(format!(
            "cpu startup boost left out: it would break {fresh} of the pod"
        ));
    }
}

/// The JSON Patch for the pod `resize` subresource (in-place update): the resource operations of
/// [`admission_patch`] without the annotation ones, which upstream sends as a separate pod patch.
pub fn resize_patch(
    pod: &AdmissionPod,
    vpa: &AdmissionVpa,
    container_range: Option<&LimitRangeItem>,
    pod_range: Option<&LimitRangeItem>,
) -> Vec<JsonPatchOp> {
    patch_for(pod, vpa, container_range, pod_range, false)
        .ops
        .into_iter()
        .filter(|op| op.path.starts_with("/spec/"))
        .collect()
}

/// What the containers whose CPU startup boost is over (`expired`, with the original resources
/// their annotation recorded) are lowered to in place (AEP-7862): the recommendation, as a
/// resize would apply it, when the VPA's mode applies one to the container; else the original
/// values. A container with neither is left out.
pub fn unboost_updates(
    pod: &AdmissionPod,
    vpa: &AdmissionVpa,
    expired: &BTreeMap<String, Option<OriginalResources>>,
    container_range: Option<&LimitRangeItem>,
    pod_range: Option<&LimitRangeItem>,
) -> Vec<ContainerUpdate> {
    let recommended = patch_for(pod, vpa, container_range, pod_range, false).updates;
    expired
        .iter()
        .filter_map(|(name, original)| {
            recommended
                .iter()
                .find(|u| &u.container == name && u.requests.cpu.is_some())
                .cloned()
                .or_else(|| {
                    let (requests, limits) = original.as_ref()?.resources().ok()?;
                    // The originals come from the pod's annotation, which a namespace user can
                    // rewrite on a running pod: an un-boost only lowers what the pod has now,
                    // and only for a container it has.
                    let now = &pod
                        .containers
                        .iter()
                        .find(|c| &c.container.name == name)?
                        .container;
                    let lowered = |original: Option<Quantity>, current: Option<Quantity>| match (
                        original, current,
                    ) {
                        (Some(o), Some(c)) => Some(o.min(c)),
                        (o, _) => o,
                    };
                    // Only CPU was boosted: memory stays as it is.
                    let requests = Resources {
                        cpu: lowered(requests.cpu, now.requests.cpu),
                        memory: None,
                    };
                    let limits = Resources {
                        cpu: lowered(limits.cpu, now.limits.cpu),
                        memory: None,
                    };
                    (requests.cpu != now.requests.cpu || limits.cpu != now.limits.cpu).then(|| {
                        ContainerUpdate {
                            container: name.clone(),
                            requests,
                            limits,
                        }
                    })
                })
        })
        .collect()
}

fn container_ops(
    index: usize,
    c: &AdmissionContainer,
    requests: &Resources,
    limits: &Resources,
    mut notes: Vec<String>,
) -> (Vec<JsonPatchOp>, String) {
    let base = format!("/spec/containers/{index}/resources");
    let mut ops = Vec::new();
    if !c.has_requests && !c.has_limits {
        ops.push(JsonPatchOp::add(base.clone(), json!({})));
    }
    for (field, word, present, amounts) in [
        ("requests", "request", c.has_requests, requests),
        ("limits", "limit", c.has_limits, limits),
    ] {
        if !present && !amounts.is_empty() {
            ops.push(JsonPatchOp::add(format!("{base}/{field}"), json!({})));
        }
        for (r, q) in amounts.iter() {
            ops.push(JsonPatchOp::add(
                format!("{base}/{field}/{r}"),
                Value::String(q.to_string()),
            ));
            notes.push(format!("{r} {word}"));
        }
    }
    (ops, format!("container {index}: {}", notes.join(", ")))
}

fn annotation_op(name: &str, value: &str) -> JsonPatchOp {
    // RFC 6901 escaping; VPA's own annotation names need none.
    let escaped = name.replace('~', "~0").replace('/', "~1");
    JsonPatchOp::add(
        format!("/metadata/annotations/{escaped}"),
        Value::String(value.to_owned()),
    )
}

impl AdmissionVpa {
    /// Reads what the webhook needs from a VPA object.
    pub fn from_api(vpa: &VerticalPodAutoscaler) -> Result<AdmissionVpa, QuantityError> {
        Ok(AdmissionVpa {
            name: vpa.metadata.name.clone().unwrap_or_default(),
            update_mode: UpdateMode::from_api(&vpa.spec.update_mode()),
            policies: container_policies_from_api(vpa)?,
            recommendation: recommendations_from_api(vpa)?,
            boosts: StartupBoosts::from_api(vpa),
        })
    }
}

/// Converts a `spec.containers[]` entry of a Kubernetes pod.
pub fn admission_container(
    c: &k8s_openapi::api::core::v1::Container,
) -> Result<AdmissionContainer, QuantityError> {
    let resources = c.resources.as_ref();
    let requests = resources.and_then(|r| r.requests.as_ref());
    let limits = resources.and_then(|r| r.limits.as_ref());
    Ok(AdmissionContainer {
        container: PodContainer {
            name: c.name.clone(),
            requests: resources_from_k8s(requests)?,
            limits: resources_from_k8s(limits)?,
        },
        has_requests: requests.is_some(),
        has_limits: limits.is_some(),
    })
}

/// Converts a Kubernetes pod for [`admission_patch`].
pub fn admission_pod(pod: &k8s_openapi::api::core::v1::Pod) -> Result<AdmissionPod, QuantityError> {
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.iter().map(admission_container).collect())
        .transpose()?
        .unwrap_or_default();
    Ok(AdmissionPod {
        containers,
        has_annotations: pod.metadata.annotations.is_some(),
    })
}

#[cfg(test)]
mod api_validity;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vertical::limit_range::Ratios;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    fn res(cpu: &str, mem: &str) -> Resources {
        Resources {
            cpu: (!cpu.is_empty()).then(|| q(cpu)),
            memory: (!mem.is_empty()).then(|| q(mem)),
        }
    }

    impl AdmissionPod {
        fn test() -> AdmissionPod {
            AdmissionPod {
                containers: Vec::new(),
                has_annotations: true,
            }
        }

        fn container(mut self, name: &str, requests: Resources, limits: Resources) -> Self {
            self.containers.push(AdmissionContainer {
                container: PodContainer {
                    name: name.to_owned(),
                    requests,
                    limits,
                },
                has_requests: !requests.is_empty(),
                has_limits: !limits.is_empty(),
            });
            self
        }
    }

    impl AdmissionVpa {
        fn test(container: &str, target: Resources) -> AdmissionVpa {
            AdmissionVpa {
                name: "vpa1".to_owned(),
                update_mode: UpdateMode::Recreate,
                policies: Vec::new(),
                recommendation: Some(vec![ContainerRecommendation {
                    container: container.to_owned(),
                    target,
                    ..ContainerRecommendation::default()
                }]),
                boosts: StartupBoosts::default(),
            }
        }

        fn policy(mut self, p: ContainerPolicy) -> Self {
            self.policies.push(p);
            self
        }
    }

    fn min_max(min: Resources, max: Resources) -> ContainerPolicy {
        ContainerPolicy {
            container_name: "container1".to_owned(),
            min_allowed: min,
            max_allowed: max,
            ..ContainerPolicy::default()
        }
    }

    struct Row {
        name: &'static str,
        pod: AdmissionPod,
        vpa: AdmissionVpa,
        range: Option<LimitRangeItem>,
        requests: Resources,
        limits: Resources,
        notes: &'static [&'static str],
    }

    /// Without a recommendation, a boost is undone to the originals the pod's annotation
    /// records; a namespace user can rewrite that annotation, so the un-boost only ever lowers
    /// and only touches containers the pod has.
    #[test]
    fn an_unboost_from_the_annotation_only_lowers() {
        let pod = AdmissionPod::test().container("app", res("2", "1Gi"), res("4", ""));
        let vpa = AdmissionVpa {
            recommendation: None,
            ..AdmissionVpa::test("app", Resources::default())
        };
        let original = |request: &str, limit: &str| {
            Some(OriginalResources::of(&res(request, ""), &res(limit, "")))
        };
        let undo = |name: &str, o: Option<OriginalResources>| {
            unboost_updates(
                &pod,
                &vpa,
                &BTreeMap::from([(name.to_owned(), o)]),
                None,
                None,
            )
        };
        let honest = undo("app", original("500m", "1"));
        assert_eq!(honest.len(), 1);
        assert_eq!(honest[0].requests, res("500m", ""));
        assert_eq!(honest[0].limits, res("1", ""));
        // Rewritten to 64 cores: capped at what the pod has, so nothing to do.
        assert!(undo("app", original("64", "64")).is_empty());
        // A request lowered, the limit left where it is.
        let mixed = undo("app", original("500m", "64"));
        assert_eq!(mixed[0].requests, res("500m", ""));
        assert_eq!(mixed[0].limits, res("4", ""));
        // A container the pod does not have: no update (the resize would be refused each loop).
        assert!(undo("ghost", original("100m", "")).is_empty());
    }

    // upstream: pkg/admission-controller/resource/pod/recommendation/recommendation_provider_test.go
    // TestUpdateResourceRequests
    #[test]
    #[allow(clippy::too_many_lines)] // one row per upstream case
    fn update_resource_requests_table() {
        let c = "container1";
        let none = Resources::default();
        let base = |target: Resources| {
            AdmissionVpa::test(c, target).policy(min_max(res("1", "100Mi"), res("3", "1Gi")))
        };
        let uninitialized = AdmissionPod::test().container(c, none, none);
        let initialized = AdmissionPod::test().container(c, res("2", "100Mi"), none);
        let double = AdmissionPod::test().container(c, res("1", "100Mi"), res("2", "200Mi"));
        let requests_only = |target: Resources, max: Resources| {
            AdmissionVpa::test(c, target).policy(ContainerPolicy {
                controlled_values: ControlledValues::RequestsOnly,
                ..min_max(res("1", "100Mi"), max)
            })
        };
        let rows = vec![
            Row {
                name: "uninitialized pod",
                pod: uninitialized.clone(),
                vpa: base(res("2", "200Mi")),
                range: None,
                requests: res("2", "200Mi"),
                limits: none,
                notes: &[],
            },
            Row {
                name: "target below min",
                pod: uninitialized.clone(),
                vpa: AdmissionVpa::test(c, res("3", "150Mi"))
                    .policy(min_max(res("4", "300Mi"), res("5", "1Gi"))),
                range: None,
                requests: res("4", "300Mi"),
                limits: none,
                notes: &["cpu capped to minAllowed", "memory capped to minAllowed"],
            },
            Row {
                name: "target above max",
                pod: uninitialized.clone(),
                vpa: AdmissionVpa::test(c, res("7", "2Gi"))
                    .policy(min_max(res("4", "300Mi"), res("5", "1Gi"))),
                range: None,
                requests: res("5", "1Gi"),
                limits: none,
                notes: &["cpu capped to maxAllowed", "memory capped to maxAllowed"],
            },
            Row {
                name: "initialized pod",
                pod: initialized.clone(),
                vpa: base(res("2", "200Mi")),
                range: None,
                requests: res("2", "200Mi"),
                limits: none,
                notes: &[],
            },
            Row {
                name: "high memory",
                pod: initialized.clone(),
                vpa: AdmissionVpa::test(c, res("2", "1000Mi"))
                    .policy(min_max(none, res("3", "3Gi"))),
                range: None,
                requests: res("2", "1000Mi"),
                limits: none,
                notes: &[],
            },
            Row {
                name: "guaranteed resources",
                pod: AdmissionPod::test().container(c, res("2", "200Mi"), res("2", "200Mi")),
                vpa: base(res("2", "200Mi")),
                range: None,
                requests: res("2", "200Mi"),
                limits: res("2", "200Mi"),
                notes: &[],
            },
            Row {
                name: "guaranteed resources - no request",
                pod: AdmissionPod::test().container(c, none, res("2", "200Mi")),
                vpa: base(res("2", "200Mi")),
                range: None,
                requests: res("2", "200Mi"),
                limits: res("2", "200Mi"),
                notes: &[],
            },
            Row {
                name: "proportional limit - as default",
                pod: double.clone(),
                vpa: base(res("2", "200Mi")),
                range: None,
                requests: res("2", "200Mi"),
                limits: res("4", "400Mi"),
                notes: &[],
            },
            Row {
                name: "disabled limit scaling",
                pod: double.clone(),
                vpa: requests_only(res("2", "200Mi"), res("3", "1Gi")),
                range: None,
                requests: res("2", "200Mi"),
                limits: none,
                notes: &[],
            },
            Row {
                name: "disabled limit scaling - requests capped at limit",
                pod: double.clone(),
                vpa: requests_only(res("3", "500Mi"), res("5", "1Gi")),
                range: None,
                requests: res("2", "200Mi"),
                limits: none,
                notes: &[
                    "cpu capped to container limit",
                    "memory capped to container limit",
                ],
            },
            // Upstream sets both; its CPU limit (capped at 2^63-1 millicores) is below the 1Ei
            // request, which the API server refuses. Here CPU is left as it is; memory's capped
            // limit (2^63-1 bytes) is still above its request.
            Row {
                name: "limit over int64",
                pod: AdmissionPod::test().container(c, res("1", "100Mi"), res("10", "1000Mi")),
                vpa: AdmissionVpa::test(c, res("1Ei", "1Ei"))
                    .policy(min_max(none, res("1Ei", "1Ei"))),
                range: None,
                requests: res("", "1Ei"),
                limits: Resources {
                    cpu: None,
                    memory: Some(Quantity::from_milli(i128::from(i64::MAX) * 1000)),
                },
                notes: &[
                    "cpu left unchanged: the new values would break request <= limit",
                    "memory: failed to keep limit to request ratio; capping limit to int64",
                ],
            },
            Row {
                name: "proportional limit from default",
                pod: initialized.clone(),
                vpa: base(res("2", "200Mi")),
                range: Some(LimitRangeItem {
                    default: res("2", "100Mi"),
                    ..LimitRangeItem::default()
                }),
                requests: res("2", "200Mi"),
                limits: res("2", "200Mi"),
                notes: &[],
            },
        ];
        for row in rows {
            let patch = admission_patch(&row.pod, &row.vpa, row.range.as_ref(), None);
            let update = patch
                .updates
                .first()
                .unwrap_or_else(|| panic!("{}: no update", row.name));
            assert_eq!(update.requests, row.requests, "{}: requests", row.name);
            assert_eq!(update.limits, row.limits, "{}: limits", row.name);
            let summary = &patch.annotations[UPDATES_ANNOTATION];
            for note in row.notes {
                assert!(
                    summary.contains(note),
                    "{}: {summary} lacks {note}",
                    row.name
                );
            }
        }
    }

    fn processed(
        container: PodContainer,
        rec: ContainerRecommendation,
        policies: &[ContainerPolicy],
    ) -> (ContainerRecommendation, Vec<String>) {
        let name = container.name.clone();
        let mut out = process_recommendation(&[container], &[rec], policies, None, None);
        let notes = out.notes.remove(&name).unwrap_or_default();
        (out.containers.remove(0), notes)
    }

    // upstream: pkg/utils/vpa/capping_test.go TestRecommendationToLimitCapping
    // (moved here from capping.rs when the two capping copies were folded into one)
    #[test]
    fn upstream_recommendation_to_limit_capping() {
        let container = PodContainer {
            name: "ctr-name".to_owned(),
            requests: Resources::default(),
            limits: res("30", "70000"),
        };
        let rec = ContainerRecommendation {
            container: "ctr-name".to_owned(),
            target: res("20", "80000"),
            lower_bound: Resources::default(),
            upper_bound: res("100", "90000"),
        };
        let with_values = |values: ControlledValues| ContainerPolicy {
            container_name: "ctr-name".to_owned(),
            controlled_values: values,
            ..ContainerPolicy::default()
        };
        let cases = [
            (
                "no capping for default policy",
                vec![],
                ("20", "80000"),
                ("100", "90000"),
                false,
            ),
            (
                "no capping for RequestsAndLimits",
                vec![with_values(ControlledValues::RequestsAndLimits)],
                ("20", "80000"),
                ("100", "90000"),
                false,
            ),
            (
                "capping for RequestsOnly",
                vec![with_values(ControlledValues::RequestsOnly)],
                ("20", "70000"),
                ("30", "70000"),
                true,
            ),
        ];
        for (name, policies, target, upper, annotated) in cases {
            let (out, notes) = processed(container.clone(), rec.clone(), &policies);
            assert_eq!(out.target, res(target.0, target.1), "{name}");
            assert_eq!(out.upper_bound, res(upper.0, upper.1), "{name}");
            assert_eq!(
                notes.contains(&"memory capped to container limit".to_owned()),
                annotated,
                "{name}: {notes:?}"
            );
        }
    }

    // upstream: pkg/utils/vpa/capping_test.go TestRecommendationCappedToMinMaxPolicy
    // (moved here from capping.rs)
    #[test]
    fn upstream_capped_to_min_max_policy() {
        let container = PodContainer {
            name: "ctr-name".to_owned(),
            ..PodContainer::default()
        };
        let rec = ContainerRecommendation {
            container: "ctr-name".to_owned(),
            target: res("300", "50000"),
            lower_bound: res("200", "43000"),
            upper_bound: res("500", "55000"),
        };
        let policy = ContainerPolicy {
            container_name: "ctr-name".to_owned(),
            min_allowed: res("400", "40000"),
            max_allowed: res("450", "45000"),
            ..ContainerPolicy::default()
        };
        let (out, notes) = processed(container, rec, &[policy]);
        assert_eq!(out.target, res("400", "45000"));
        assert_eq!(out.lower_bound, res("400", "43000"));
        assert_eq!(out.upper_bound, res("450", "45000"));
        assert_eq!(
            notes,
            vec!["cpu capped to minAllowed", "memory capped to maxAllowed"]
        );
    }

    // upstream: recommendation_provider_test.go "empty recommendation" / "nil recommendation":
    // nothing to set, only the observed-containers annotation.
    #[test]
    fn no_recommendation_only_observes() {
        let pod = AdmissionPod::test().container("c", res("1", "1Gi"), Resources::default());
        let mut vpa = AdmissionVpa::test("c", Resources::default());
        vpa.recommendation = None;
        let patch = admission_patch(&pod, &vpa, None, None);
        assert_eq!(patch.ops.len(), 1);
        assert_eq!(
            patch.ops[0].path,
            "/metadata/annotations/vpaObservedContainers"
        );
        assert_eq!(patch.ops[0].value, json!("c"));
    }

    // upstream: pkg/admission-controller/resource/pod/patch/resource_updates_test.go
    // TestCalculatePatches_ResourceUpdates "new cpu recommendation" / "no resources"
    #[test]
    fn patch_creates_missing_maps_and_annotations() {
        let pod = AdmissionPod {
            has_annotations: false,
            ..AdmissionPod::test().container("c", Resources::default(), Resources::default())
        };
        let vpa = AdmissionVpa::test("c", res("1", ""));
        let patch = admission_patch(&pod, &vpa, None, None);
        let paths: Vec<&str> = patch.ops.iter().map(|o| o.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/metadata/annotations",
                "/spec/containers/0/resources",
                "/spec/containers/0/resources/requests",
                "/spec/containers/0/resources/requests/cpu",
                "/metadata/annotations/vpaUpdates",
                "/metadata/annotations/vpaObservedContainers",
            ]
        );
        assert_eq!(patch.ops[3].value, json!("1"));
        assert_eq!(
            patch.annotations[UPDATES_ANNOTATION],
            "Pod resources updated by vpa1: container 0: cpu request"
        );
    }

    // upstream: resource_updates_test.go "update mode off": no resource change.
    #[test]
    fn update_mode_off_and_container_mode_off() {
        let pod = AdmissionPod::test().container("c", res("1", "1Gi"), Resources::default());
        let mut vpa = AdmissionVpa::test("c", res("2", "2Gi"));
        vpa.update_mode = UpdateMode::Off;
        let patch = admission_patch(&pod, &vpa, None, None);
        assert!(patch.updates.is_empty());
        assert!(!patch.annotations.contains_key(UPDATES_ANNOTATION));

        let vpa = AdmissionVpa::test("c", res("2", "2Gi")).policy(ContainerPolicy {
            container_name: "*".to_owned(),
            mode: ContainerMode::Off,
            ..ContainerPolicy::default()
        });
        assert!(admission_patch(&pod, &vpa, None, None).updates.is_empty());
    }

    #[test]
    fn controlled_resources_limit_what_changes() {
        let pod = AdmissionPod::test().container("c", res("1", "1Gi"), Resources::default());
        let vpa = AdmissionVpa::test("c", res("2", "2Gi")).policy(ContainerPolicy {
            container_name: "c".to_owned(),
            controlled_resources: Some(vec![Resource::Memory]),
            ..ContainerPolicy::default()
        });
        let patch = admission_patch(&pod, &vpa, None, None);
        assert_eq!(patch.updates[0].requests, res("", "2Gi"));
    }

    // Beyond upstream: maxLimitRequestRatio.
    #[test]
    fn max_limit_request_ratio() {
        let range = LimitRangeItem {
            max_limit_request_ratio: Ratios {
                cpu: Some(2.0),
                memory: None,
            },
            ..LimitRangeItem::default()
        };
        // RequestsOnly with limit 2: a 500m target would make the ratio 4, so the request is 1.
        let pod = AdmissionPod::test().container("c", res("1", ""), res("2", ""));
        let vpa = AdmissionVpa::test("c", res("500m", "")).policy(ContainerPolicy {
            container_name: "c".to_owned(),
            controlled_values: ControlledValues::RequestsOnly,
            ..ContainerPolicy::default()
        });
        let patch = admission_patch(&pod, &vpa, Some(&range), None);
        assert_eq!(patch.updates[0].requests, res("1", ""));
        // RequestsAndLimits with an original ratio of 4 (the pod was created before the
        // LimitRange): the limit is lowered to request × 2.
        let pod = AdmissionPod::test().container("c", res("1", ""), res("4", ""));
        let vpa = AdmissionVpa::test("c", res("500m", ""));
        let patch = admission_patch(&pod, &vpa, Some(&range), None);
        assert_eq!(patch.updates[0].limits, res("1", ""));
    }

    #[test]
    fn reads_vpa_object() {
        let vpa: VerticalPodAutoscaler =
            serde_saphyr::from_str(include_str!("../../tests/data/vpa-nginx.yaml")).unwrap();
        let read = AdmissionVpa::from_api(&vpa).unwrap();
        assert_eq!(read.name, "nginx-vpa");
        assert_eq!(read.update_mode, UpdateMode::Off);
        assert_eq!(read.recommendation, None);
        assert_eq!(read.policies[0].min_allowed, res("90m", "10Mi"));
        assert_eq!(read.policies[0].max_allowed, res("1000m", "1Gi"));
        assert_eq!(
            read.policies[0].controlled_resources,
            Some(vec![Resource::Cpu, Resource::Memory])
        );
        let policy = crate::vertical::eviction::UpdatePolicy::from_api(&vpa).unwrap();
        assert_eq!(policy.mode, UpdateMode::Off);
    }

    #[test]
    fn resize_patch_has_only_resources() {
        let pod = AdmissionPod::test().container("c", res("1", "1Gi"), res("2", "2Gi"));
        let vpa = AdmissionVpa::test("c", res("2", "2Gi"));
        let ops = resize_patch(&pod, &vpa, None, None);
        let paths: Vec<&str> = ops.iter().map(|o| o.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/spec/containers/0/resources/requests/cpu",
                "/spec/containers/0/resources/requests/memory",
                "/spec/containers/0/resources/limits/cpu",
                "/spec/containers/0/resources/limits/memory",
            ]
        );
        assert_eq!(ops[3].value, json!("4Gi"));
    }

    fn factor_boost(factor: i32) -> StartupBoosts {
        StartupBoosts {
            pod: Some(crate::vertical::startup_boost::BoostPolicy {
                cpu: crate::vertical::startup_boost::CpuBoost::Factor(factor),
                duration: jiff::SignedDuration::ZERO,
            }),
            containers: BTreeMap::new(),
            max_cpu: None,
        }
    }

    // AEP-7862 "Workflow" step 3: the boost is applied on top of the recommendation at
    // creation, with the original resources in the annotation; never in a resize.
    #[test]
    fn startup_boost_at_creation_only() {
        let pod = AdmissionPod::test().container("c", res("100m", "1Gi"), res("200m", ""));
        let mut vpa = AdmissionVpa::test("c", res("250m", "1Gi"));
        vpa.boosts = factor_boost(2);
        let patch = admission_patch(&pod, &vpa, None, None);
        assert_eq!(patch.updates[0].requests.cpu, Some(q("500m")));
        // The limit keeps its 2:1 ratio to the boosted request.
        assert_eq!(patch.updates[0].limits.cpu, Some(q("1")));
        assert_eq!(
            patch
                .annotations
                .get("vpaCpuStartupBoost/c")
                .map(String::as_str),
            Some(r#"{"requests":{"cpu":"100m","memory":"1Gi"},"limits":{"cpu":"200m"}}"#)
        );
        assert!(
            patch
                .ops
                .iter()
                .any(|o| o.path == "/metadata/annotations/vpaCpuStartupBoost~1c"),
            "{:?}",
            patch.ops
        );
        let ops = resize_patch(&pod, &vpa, None, None);
        let cpu = ops
            .iter()
            .find(|o| o.path.ends_with("requests/cpu"))
            .map(|o| o.value.clone());
        assert_eq!(cpu, Some(json!("250m")), "a resize is never boosted");
    }

    #[test]
    fn startup_boost_applies_in_mode_off_from_the_spec_request() {
        let pod = AdmissionPod::test().container("c", res("100m", ""), res("", ""));
        let mut vpa = AdmissionVpa::test("c", res("250m", "1Gi"));
        vpa.update_mode = UpdateMode::Off;
        vpa.boosts = factor_boost(3);
        let patch = admission_patch(&pod, &vpa, None, None);
        assert_eq!(patch.updates.len(), 1);
        assert_eq!(patch.updates[0].requests, res("300m", ""));
        assert!(patch.annotations.contains_key("vpaCpuStartupBoost/c"));
        // No boost configured: mode Off patches nothing.
        vpa.boosts = StartupBoosts::default();
        assert!(admission_patch(&pod, &vpa, None, None).updates.is_empty());
    }

    /// A `Pod` LimitRange item with a CPU max.
    fn pod_cpu_max(max: &str) -> LimitRangeItem {
        LimitRangeItem {
            max: res(max, ""),
            has_max: true,
            ..LimitRangeItem::default()
        }
    }

    // Two containers at 1 core limit each fit a 3-core pod max; a 2× boost would make the
    // limits' sum 4 cores, which the API server would refuse: every boost is left out, with a
    // note, as a recommendation that breaks a pod sum is; the recommendation itself is applied.
    // Without the pod item (or with room for it) the boosts are applied.
    #[test]
    fn a_boost_that_breaks_a_pod_limit_range_sum_is_left_out() {
        let pod = AdmissionPod::test()
            .container("a", res("500m", ""), res("1", ""))
            .container("b", res("500m", ""), res("1", ""));
        let mut vpa = AdmissionVpa::test("a", res("500m", "100Mi"));
        vpa.boosts = factor_boost(2);
        let range = pod_cpu_max("3");
        let patch = admission_patch(&pod, &vpa, None, Some(&range));
        assert!(
            !patch
                .annotations
                .keys()
                .any(|k| k.starts_with("vpaCpuStartupBoost/")),
            "{:?}",
            patch.annotations
        );
        assert_eq!(patch.updates.len(), 1, "{:?}", patch.updates);
        assert_eq!(patch.updates[0].requests, res("500m", "100Mi"));
        let updates = &patch.annotations[UPDATES_ANNOTATION];
        assert!(
            updates.contains(
                "cpu startup boost left out: it would break the LimitRange max of the pod"
            ),
            "{updates}"
        );
        let roomy = pod_cpu_max("4");
        let patch = admission_patch(&pod, &vpa, None, Some(&roomy));
        assert_eq!(patch.updates.len(), 2);
        assert!(patch.updates.iter().all(|u| u.requests.cpu == Some(q("1"))));
        assert!(patch.updates.iter().all(|u| u.limits.cpu == Some(q("2"))));
        assert!(patch.annotations.contains_key("vpaCpuStartupBoost/a"));
        assert!(patch.annotations.contains_key("vpaCpuStartupBoost/b"));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        /// One container's CPU as the API server would store the pod created with `patch`.
        fn cpu_after(
            c: &AdmissionContainer,
            patch: &AdmissionPatch,
        ) -> crate::vertical::pod_validity::Amounts {
            let update = patch
                .updates
                .iter()
                .find(|u| u.container == c.container.name);
            crate::vertical::pod_validity::Amounts {
                request: update
                    .and_then(|u| u.requests.cpu)
                    .or(c.container.requests.cpu),
                limit: update.and_then(|u| u.limits.cpu).or(c.container.limits.cpu),
            }
        }

        /// An optional CPU amount in millicores (0: none).
        fn opt(m: i64) -> Option<Quantity> {
            (m > 0).then(|| milli(m))
        }

        fn milli(m: i64) -> Quantity {
            Quantity::from_milli(i128::from(m))
        }

        proptest! {
            // Without a LimitRange the request always lands in [minAllowed, maxAllowed].
            #[test]
            fn request_within_policy(target in 1i64..100_000, a in 1i64..100_000, b in 1i64..100_000) {
                let (lo, hi) = (a.min(b), a.max(b));
                let pod = AdmissionPod::test().container("c", Resources::default(), Resources::default());
                let vpa = AdmissionVpa::test("c", Resources { cpu: Some(milli(target)), memory: None })
                    .policy(ContainerPolicy {
                        container_name: "c".to_owned(),
                        min_allowed: Resources { cpu: Some(milli(lo)), memory: None },
                        max_allowed: Resources { cpu: Some(milli(hi)), memory: None },
                        ..ContainerPolicy::default()
                    });
                let patch = admission_patch(&pod, &vpa, None, None);
                let got = patch.updates[0].requests.cpu.unwrap().milli();
                prop_assert!(i128::from(lo) <= got && got <= i128::from(hi));
                prop_assert_eq!(admission_patch(&pod, &vpa, None, None), patch);
            }

            // RequestsOnly never sets a request above the container's limit.
            #[test]
            fn requests_only_stays_below_limit(target in 1i64..100_000, request in 1i64..50_000, extra in 0i64..50_000) {
                let limit = request + extra;
                let pod = AdmissionPod::test().container(
                    "c",
                    Resources { cpu: Some(milli(request)), memory: None },
                    Resources { cpu: Some(milli(limit)), memory: None },
                );
                let vpa = AdmissionVpa::test("c", Resources { cpu: Some(milli(target)), memory: None })
                    .policy(ContainerPolicy {
                        container_name: "*".to_owned(),
                        controlled_values: ControlledValues::RequestsOnly,
                        ..ContainerPolicy::default()
                    });
                let patch = admission_patch(&pod, &vpa, None, None);
                let got = patch.updates[0].requests.cpu.unwrap().milli();
                prop_assert!(got <= i128::from(limit));
                prop_assert!(patch.updates[0].limits.is_empty());
            }

            // AEP-7862 under a `Pod` LimitRange: whatever the containers, recommendations,
            // boosts and pod rules (min, max, maxLimitRequestRatio on the CPU sums), the pod
            // created with the boosts breaks no pod rule the pod created without them meets.
            #[test]
            fn a_boosted_pod_keeps_the_pod_limit_range_the_unboosted_pod_met(
                containers in proptest::collection::vec((0i64..4000, 0i64..4000, 0i64..4000), 1..4),
                factor in 1i32..5,
                quantity in 0i64..3000,
                requests_only in any::<bool>(),
                (min, max, ratio) in (0i64..3000, 0i64..16_000, 0u8..40),
            ) {
                let mut pod = AdmissionPod::test();
                let mut recommendation = Vec::new();
                for (n, &(request, extra, target)) in containers.iter().enumerate() {
                    let name = format!("c{n}");
                    let limit = if extra > 0 { opt(request.max(1) + extra) } else { None };
                    pod = pod.container(
                        &name,
                        Resources { cpu: opt(request), memory: None },
                        Resources { cpu: limit, memory: None },
                    );
                    if target > 0 {
                        recommendation.push(ContainerRecommendation {
                            container: name,
                            target: Resources { cpu: opt(target), memory: None },
                            ..ContainerRecommendation::default()
                        });
                    }
                }
                let mut vpa = AdmissionVpa::test("c0", Resources::default());
                vpa.recommendation = Some(recommendation);
                if requests_only {
                    vpa.policies.push(ContainerPolicy {
                        container_name: "*".to_owned(),
                        controlled_values: ControlledValues::RequestsOnly,
                        ..ContainerPolicy::default()
                    });
                }
                let range = LimitRangeItem {
                    min: Resources { cpu: opt(min), memory: None },
                    has_min: min > 0,
                    max: Resources { cpu: opt(max), memory: None },
                    has_max: max > 0,
                    max_limit_request_ratio: Ratios {
                        cpu: (ratio > 0).then(|| 1.0 + f64::from(ratio) / 10.0),
                        memory: None,
                    },
                    ..LimitRangeItem::default()
                };
                let unboosted = admission_patch(&pod, &vpa, None, Some(&range));
                let boosts = [
                    factor_boost(factor),
                    StartupBoosts {
                        pod: Some(crate::vertical::startup_boost::BoostPolicy {
                            cpu: crate::vertical::startup_boost::CpuBoost::Quantity(milli(quantity)),
                            duration: jiff::SignedDuration::ZERO,
                        }),
                        ..StartupBoosts::default()
                    },
                ];
                for boost in boosts {
                    vpa.boosts = boost;
                    let boosted = admission_patch(&pod, &vpa, None, Some(&range));
                    let sums = |patch: &AdmissionPatch| {
                        pod_violations(
                            Resource::Cpu,
                            pod.containers.iter().map(|c| cpu_after(c, patch)).collect::<Vec<_>>(),
                            &range,
                        )
                    };
                    let fresh = sums(&boosted).new_since(sums(&unboosted));
                    prop_assert!(fresh.is_empty(), "{fresh}: {:?} vs {:?}", boosted.updates, unboosted.updates);
                }
            }
        }
    }

    #[test]
    fn deterministic() {
        let pod = AdmissionPod::test()
            .container("a", res("100m", "100Mi"), res("200m", "200Mi"))
            .container("b", res("", ""), res("", ""));
        let mut vpa = AdmissionVpa::test("a", res("300m", "300Mi"));
        if let Some(recs) = vpa.recommendation.as_mut() {
            recs.push(ContainerRecommendation {
                container: "b".to_owned(),
                target: res("50m", "64Mi"),
                ..ContainerRecommendation::default()
            });
        }
        let first = admission_patch(&pod, &vpa, None, None);
        for _ in 0..5 {
            assert_eq!(admission_patch(&pod, &vpa, None, None), first);
        }
        assert_eq!(
            first.annotations[UPDATES_ANNOTATION],
            "Pod resources updated by vpa1: container 0: cpu request, memory request, cpu limit, \
             memory limit; container 1: cpu request, memory request"
        );
    }
}
