//! One updater loop (upstream `RunOnce`): check the webhook is alive, read the VPAs and their
//! pods from the watch-fed [`crate::cache::Cache`], plan each VPA with the pure
//! `plimsoll_core::vertical::eviction::plan_updates`, and carry the plan out.
//!
//! Invariants:
//! * a loop reads the cluster only from the cache, and only once every watch has listed once;
//!   its requests are the status Lease read, the evictions, resizes and Events (a loop with
//!   nothing to do makes one request, or none without the status check);
//! * a pod this process evicted is not counted again, even while the watch has not yet
//!   reported its deletion;
//! * nothing is evicted or resized while the webhook's status Lease is stale or missing (with
//!   `--use-admission-controller-status`, the default);
//! * pods are evicted only through the Eviction API, so PodDisruptionBudgets hold; a 429 is
//!   counted (`evictions_total{result="blocked"}`) and reported as an Event, not an error;
//! * the recommendation a pod is compared against is capped exactly as the webhook caps it
//!   (`admission::process_recommendation` with the namespace's LimitRanges), or pods would be
//!   evicted and recreated forever;
//! * every eviction and resize takes a token from the shared rate limiter, and the loop stops
//!   acting when the next token would come after the loop's deadline (one interval) or on
//!   shutdown; the action in flight finishes;
//! * a refused eviction still counts against the group's budget for this loop (the plan is made
//!   up front): at most the budget is disrupted, possibly fewer;
//! * a pod of a VPA in mode `InPlace` is never evicted: not by the plan, not as the fallback of a
//!   refused resize; the resize values its node could not fit are remembered (per pod uid) and
//!   not sent again until the recommendation asks for less, with an Event on the pod and the
//!   VPA when they are first learnt and the VPA's `InPlaceResizeHeld` condition naming the pods
//!   that keep their requests.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta, Preconditions};
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_core::vertical::admission::{
    AdmissionVpa, ContainerUpdate, admission_pod, process_recommendation, resize_patch,
    unboost_updates,
};
use plimsoll_core::vertical::eviction::{
    Action, Backoff, EvictionConfig, PodAction, UpdatePolicy, plan_updates,
};
use plimsoll_core::vertical::limit_range::LimitRangeItem;
use plimsoll_core::vertical::priority::{
    PodSnapshot, RequestsByContainer, ResizeStatus, UpdateConfig,
};
use plimsoll_core::vertical::resize_backoff::{self, HeldPod, held_condition};
use plimsoll_core::vertical::resources::ContainerRecommendation;
use plimsoll_core::vertical::resources::recommendations_from_api;
use plimsoll_core::vertical::startup_boost::{annotation_key, expired};
use plimsoll_runtime::api_message;
use plimsoll_runtime::contained::contained;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::admission_status::{self, Status};
use crate::cache::{Cache, CachedPod, Watches};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::inventory::{Inventory, Scope};
use crate::metrics::EvictionResult;
use crate::{BINARY, Config};

/// What a loop did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoopReport {
    /// False when the webhook status stopped the loop before it acted.
    pub admission_valid: bool,
    /// VPAs in an acting mode.
    pub vpas: usize,
    /// Pods evicted.
    pub evicted: usize,
    /// Evictions a PodDisruptionBudget refused.
    pub blocked: usize,
    /// Resizes requested.
    pub resized: usize,
}

/// The loop's settings, derived once from [`Config`].
pub struct Settings {
    /// Namespaces to look at.
    pub scope: Scope,
    /// Priority thresholds.
    pub update: UpdateConfig,
    /// Eviction budget.
    pub eviction: EvictionConfig,
    /// Whether to check the webhook status Lease, and where.
    pub status_namespace: Option<String>,
    /// How fresh the status Lease must be.
    pub status_timeout: SignedDuration,
    /// One loop's time budget.
    pub interval: std::time::Duration,
}

impl Settings {
    /// Settings from the service configuration.
    pub fn from_config(config: &Config) -> Settings {
        let duration =
            |d: std::time::Duration| SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
        Settings {
            scope: config.scope.clone(),
            update: UpdateConfig {
                min_change_priority: config.pod_update_threshold,
                pod_lifetime_update_threshold: duration(config.pod_lifetime_update_threshold),
                evict_after_oom_threshold: duration(config.evict_after_oom_threshold),
            },
            eviction: EvictionConfig {
                min_replicas: config.min_replicas,
                eviction_tolerance: config.eviction_tolerance,
            },
            status_namespace: config
                .use_admission_controller_status
                .then(|| config.admission_controller_status_namespace.clone()),
            status_timeout: duration(config.admission_status_timeout),
            interval: config.updater_interval,
        }
    }
}

/// Runs one loop.
pub async fn run_once(
    ctx: &Context,
    settings: &Settings,
    cancel: &CancellationToken,
) -> Result<LoopReport> {
    let deadline = Instant::now() + settings.interval;
    let mut report = LoopReport::default();
    if !ctx.cache.is_synced() {
        return Err(Error::NotSynced);
    }
    if let Some(ns) = &settings.status_namespace {
        match admission_status::check(&ctx.client, ns, settings.status_timeout, Timestamp::now())
            .await?
        {
            Status::Valid => {}
            other => {
                tracing::warn!(
                    namespace = %ns,
                    lease = admission_status::STATUS_LEASE_NAME,
                    status = ?other,
                    "admission webhook status is not valid; skipping this loop (nothing is evicted or resized)"
                );
                ctx.metrics.admission_status(false);
                return Ok(report);
            }
        }
        ctx.metrics.admission_status(true);
    }
    report.admission_valid = true;

    let mut vpas = Inventory::vpas(&ctx.cache, &settings.scope);
    // A VPA with a startup boost is looked at in every mode: its pods' boosts are lowered even
    // when the updater applies no recommendation (AEP-7862).
    vpas.retain(|v| {
        UpdatePolicy::from_api(v).map_or(true, |p| p.mode.updater_acts() || p.boosts.any())
    });
    report.vpas = vpas.len();
    ctx.metrics.acting_vpas(vpas.len());
    let inventory = Inventory::new(&ctx.cache, vpas);

    let pass = Pass {
        ctx,
        settings,
        inventory: &inventory,
        deadline,
        cancel,
    };
    for (i, vpa) in inventory.vpas.iter().enumerate() {
        if cancel.is_cancelled() {
            break;
        }
        let mut pods = inventory.pods(i);
        pods.retain(|p| !ctx.evicted(p.uid()));
        // A panic planning one VPA (a bug its values reach) leaves the others to be planned,
        // and the updater up: it would otherwise end the loop's task at every loop.
        match contained(Box::pin(update_vpa(&pass, vpa, &pods, &mut report))).await {
            Ok(true) => {}
            Ok(false) => break,
            Err(panicked) => {
                let (namespace, name) = vpa_name(vpa);
                tracing::error!(
                    namespace,
                    name,
                    error = %panicked,
                    "updating the VPA's pods failed; the next loop tries again"
                );
            }
        }
    }
    if !cancel.is_cancelled() {
        ctx.forget_gone_pods();
        let live = inventory
            .vpas
            .iter()
            .filter_map(|v| v.metadata.uid.as_deref())
            .collect();
        ctx.forget_reports(&live);
    }
    Ok(report)
}

fn vpa_name(vpa: &VerticalPodAutoscaler) -> (String, String) {
    (
        vpa.metadata.namespace.clone().unwrap_or_default(),
        vpa.metadata.name.clone().unwrap_or_default(),
    )
}

/// What every VPA of one loop shares: where to act, with which settings, over which cluster
/// snapshot, until when.
struct Pass<'a> {
    ctx: &'a Context,
    settings: &'a Settings,
    inventory: &'a Inventory<'a>,
    /// The loop stops acting at this instant (one `--updater-interval` after it started).
    deadline: Instant,
    cancel: &'a CancellationToken,
}

/// Plans and updates one VPA's pods. False when the loop must stop (deadline or shutdown).
#[tracing::instrument(skip_all, fields(namespace = %vpa_name(vpa).0, name = %vpa_name(vpa).1))]
async fn update_vpa(
    pass: &Pass<'_>,
    vpa: &VerticalPodAutoscaler,
    pods: &[Arc<CachedPod>],
    report: &mut LoopReport,
) -> bool {
    let Pass {
        ctx,
        settings,
        inventory,
        deadline,
        cancel,
    } = *pass;
    let (namespace, _) = vpa_name(vpa);
    let Some((policy, recommendation)) = read_vpa(ctx, vpa).await else {
        return true;
    };
    if pods.is_empty() {
        return true;
    }
    let now = Timestamp::now();
    let (snapshots, by_name) = snapshots(ctx, vpa, pods, now);
    // The webhook admits pods unchanged when the LimitRanges cannot be read: no update then.
    let Ok((container_range, pod_range)) = inventory.limit_ranges(&namespace) else {
        return true;
    };
    let recommend = |pod: &PodSnapshot| {
        process_recommendation(
            &pod.containers,
            &recommendation,
            &policy.container_policies,
            container_range.as_ref(),
            pod_range.as_ref(),
        )
        .containers
    };
    let plan = plan_updates(
        &policy,
        &snapshots,
        recommend,
        |owner| inventory.replicas(&namespace, owner),
        &settings.update,
        &settings.eviction,
        now,
    );
    let admission_vpa = AdmissionVpa::from_api(vpa).ok();
    write_held_condition(ctx, vpa, &plan, now).await;
    for action in &plan {
        let Some(pod) = by_name.get(action.pod.as_str()).copied() else {
            continue;
        };
        if let Backoff::Infeasible(values) = &action.backoff {
            remember_infeasible(ctx, vpa, pod, values, &action.reason).await;
        }
        match action.action {
            Action::Skip => {
                tracing::debug!(pod = %action.pod, reason = %action.reason, "skip");
                continue;
            }
            // Belt and braces: the plan never asks this for a mode that does not evict.
            Action::Evict if !policy.mode.may_evict() => {
                tracing::error!(pod = %action.pod, mode = ?policy.mode, "the plan asked to evict a pod of a VPA that never evicts; refused");
                continue;
            }
            Action::Evict | Action::Resize | Action::Unboost => {}
        }
        if cancel.is_cancelled() || !ctx.limiter.acquire(deadline, cancel).await {
            tracing::info!(
                "stopping this loop: rate limiter wait would pass the loop deadline, or shutting down"
            );
            return false;
        }
        let acting = Acting {
            vpa,
            policy: &policy,
            admission: admission_vpa.as_ref(),
            container_range: container_range.as_ref(),
            pod_range: pod_range.as_ref(),
            snapshots: &snapshots,
            now,
        };
        act(ctx, &acting, pod, action, report).await;
    }
    true
}

/// What carrying out one VPA's plan needs besides the pod and its action.
struct Acting<'a> {
    vpa: &'a VerticalPodAutoscaler,
    policy: &'a UpdatePolicy,
    admission: Option<&'a AdmissionVpa>,
    container_range: Option<&'a LimitRangeItem>,
    pod_range: Option<&'a LimitRangeItem>,
    snapshots: &'a [PodSnapshot],
    now: Timestamp,
}

/// Carries out one action of the plan (the rate limiter's token is taken).
async fn act(
    ctx: &Context,
    acting: &Acting<'_>,
    pod: &Pod,
    action: &PodAction,
    report: &mut LoopReport,
) {
    let Acting {
        vpa,
        policy,
        admission,
        container_range,
        pod_range,
        snapshots,
        now,
    } = *acting;
    match action.action {
        Action::Evict => evict(ctx, vpa, pod, action, report).await,
        Action::Resize => {
            let patch =
                admission.and_then(|v| strategic_resize_patch(pod, v, container_range, pod_range));
            let target = Target {
                vpa,
                pod,
                may_evict: policy.mode.may_evict(),
            };
            resize(ctx, &target, action, patch, now, report).await;
        }
        Action::Unboost => {
            let Some(v) = admission else { return };
            let Some(snapshot) = snapshots.iter().find(|s| s.name == action.pod) else {
                return;
            };
            let over: BTreeMap<String, _> = expired(
                snapshot.boosted.keys(),
                &policy.boosts,
                snapshot.ready_since,
                now,
            )
            .into_iter()
            .map(|c| {
                let original = snapshot.boosted.get(&c).cloned().flatten();
                (c, original)
            })
            .collect();
            let updates = admission_pod(pod)
                .ok()
                .map(|p| unboost_updates(&p, v, &over, container_range, pod_range));
            // Nothing to lower (the pod already runs at or below its originals, or the
            // annotation names containers it does not have): the boost is over, only its
            // annotations are left to remove.
            if updates.as_deref().is_some_and(<[_]>::is_empty) {
                drop_boost_annotations(ctx, vpa, pod, over.keys()).await;
                return;
            }
            let patch = updates.as_deref().and_then(updates_patch);
            let target = Target {
                vpa,
                pod,
                may_evict: false,
            };
            if resize(ctx, &target, action, patch, now, report).await {
                drop_boost_annotations(ctx, vpa, pod, over.keys()).await;
            }
        }
        Action::Skip => {}
    }
}

/// A strategic merge patch of `spec.containers` setting `updates` (`None` when empty).
fn updates_patch(updates: &[ContainerUpdate]) -> Option<Value> {
    let list: Vec<Value> = updates
        .iter()
        .map(|u| {
            let amounts = |r: &plimsoll_core::vertical::priority::Resources| {
                r.iter()
                    .map(|(k, v)| (k.name().to_owned(), Value::String(v.to_string())))
                    .collect::<serde_json::Map<_, _>>()
            };
            let mut resources = serde_json::Map::new();
            if !u.requests.is_empty() {
                resources.insert("requests".into(), Value::Object(amounts(&u.requests)));
            }
            if !u.limits.is_empty() {
                resources.insert("limits".into(), Value::Object(amounts(&u.limits)));
            }
            json!({"name": u.container, "resources": resources})
        })
        .collect();
    (!list.is_empty()).then(|| json!({"spec": {"containers": list}}))
}

/// Removes the `vpaCpuStartupBoost/<container>` annotations of the containers lowered (upstream
/// sends this pod patch after the resize); a failure leaves them, and the next loop resizes to
/// the same values and tries again.
async fn drop_boost_annotations<'a>(
    ctx: &Context,
    vpa: &VerticalPodAutoscaler,
    pod: &Pod,
    containers: impl Iterator<Item = &'a String>,
) {
    let annotations: serde_json::Map<String, Value> = containers
        .map(|c| (annotation_key(c), Value::Null))
        .collect();
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.write_client.clone(), &namespace);
    let params = PatchParams {
        field_manager: Some(BINARY.to_owned()),
        ..PatchParams::default()
    };
    let patch = json!({"metadata": {"annotations": annotations}});
    if let Err(e) = api.patch(&name, &params, &Patch::Merge(&patch)).await {
        ctx.log_failure(
            vpa,
            Some(&name),
            "cannot remove the startup boost annotations",
            &api_message(&e),
        );
    }
}

/// The VPA's update policy and recommendation; `None` (with a Warning Event when the VPA cannot
/// be read) when there is nothing to do.
async fn read_vpa(
    ctx: &Context,
    vpa: &VerticalPodAutoscaler,
) -> Option<(UpdatePolicy, Vec<ContainerRecommendation>)> {
    let vpa_ref = vpa.object_ref(&());
    let policy = match UpdatePolicy::from_api(vpa) {
        Ok(p) => p,
        Err(e) => {
            let note = format!("cannot read the VPA's policy: {e}");
            if ctx.first_report(vpa, &note) {
                ctx.events
                    .warning(&vpa_ref, "InvalidPolicy", "Update", note)
                    .await;
            }
            return None;
        }
    };
    let recommendation = match recommendations_from_api(vpa) {
        Ok(Some(r)) if !r.is_empty() => r,
        // Boosts are lowered to the pods' original values without a recommendation.
        Ok(_) if policy.boosts.any() => Vec::new(),
        Ok(_) => {
            tracing::debug!("no recommendation yet");
            return None;
        }
        Err(e) => {
            let note = format!("cannot read the recommendation: {e}");
            if ctx.first_report(vpa, &note) {
                ctx.events
                    .warning(&vpa_ref, "InvalidRecommendation", "Update", note)
                    .await;
            }
            return None;
        }
    };
    ctx.report_cleared(vpa);
    Some((policy, recommendation))
}

/// The pods as the decision code sees them (read when the watch delivered them), with the
/// resize attempts the updater remembers, and the pods by name.
fn snapshots<'p>(
    ctx: &Context,
    vpa: &VerticalPodAutoscaler,
    pods: &'p [Arc<CachedPod>],
    now: Timestamp,
) -> (Vec<PodSnapshot>, HashMap<&'p str, &'p Pod>) {
    let mut snapshots = Vec::with_capacity(pods.len());
    let mut by_name: HashMap<&str, &Pod> = HashMap::with_capacity(pods.len());
    for cached in pods {
        match &cached.snapshot {
            Ok(snapshot) => {
                let mut snapshot = snapshot.clone();
                snapshot.last_in_place_attempt =
                    ctx.in_place_attempt(&cached.pod, snapshot.resize != ResizeStatus::None, now);
                snapshot.infeasible = ctx.infeasible(&cached.pod);
                by_name.insert(cached.name(), &cached.pod);
                snapshots.push(snapshot);
            }
            Err(e) => {
                ctx.log_failure(vpa, Some(cached.name()), "cannot read pod; left alone", e);
            }
        }
    }
    (snapshots, by_name)
}

/// The Eviction of `pod` itself. The plan was made from the cache: a pod of the same name
/// created since (a StatefulSet's, or one a tenant recreated) is not the pod the plan judged,
/// so the eviction holds only for this uid (the API server answers 409 for another).
///
/// Sent as a typed `policy/v1` Eviction rather than through kube's `Api::evict`: kube 5
/// writes the options as `delete_options`, a field the API server does not know and drops, so a
/// precondition set there would never be checked.
fn eviction_of(pod: &Pod) -> Eviction {
    Eviction {
        metadata: ObjectMeta {
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            ..ObjectMeta::default()
        },
        delete_options: pod.metadata.uid.clone().map(|uid| DeleteOptions {
            preconditions: Some(Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteOptions::default()
        }),
    }
}

async fn evict(
    ctx: &Context,
    vpa: &VerticalPodAutoscaler,
    pod: &Pod,
    action: &PodAction,
    report: &mut LoopReport,
) {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.write_client.clone(), &namespace);
    let pod_ref = pod.object_ref(&());
    let vpa_ref = vpa.object_ref(&());
    let (_, vpa_name) = vpa_name(vpa);
    let (eviction, post) = (eviction_of(pod), PostParams::default());
    let sent =
        api.create_subresource::<_, kube::core::Status>("eviction", &action.pod, &post, &eviction);
    let result = match sent.await {
        Ok(_) => {
            report.evicted += 1;
            ctx.record_eviction(pod);
            tracing::info!(pod = %action.pod, reason = %action.reason, resource_diff = action.priority.resource_diff, "evicted");
            ctx.events
                .normal(&pod_ref, "EvictedByVPA", "Evict", format!("Pod was evicted by vpa-updater to apply the recommendation of VPA {vpa_name}: {}", action.reason))
                .await;
            ctx.events
                .normal(
                    &vpa_ref,
                    "EvictedPod",
                    "Evict",
                    format!(
                        "vpa-updater evicted pod {} to apply the recommendation: {}",
                        action.pod, action.reason
                    ),
                )
                .await;
            EvictionResult::Evicted
        }
        Err(kube::Error::Api(status)) if status.code == 429 => {
            report.blocked += 1;
            tracing::info!(pod = %action.pod, message = %status.message, "eviction refused by a PodDisruptionBudget");
            ctx.events
                .warning(
                    &vpa_ref,
                    "EvictionBlocked",
                    "Evict",
                    format!(
                        "eviction of pod {} to apply the recommendation was refused: {}",
                        action.pod, status.message
                    ),
                )
                .await;
            ctx.events
                .warning(
                    &pod_ref,
                    "EvictionBlocked",
                    "Evict",
                    format!(
                        "vpa-updater could not evict the pod (VPA {vpa_name}): {}",
                        status.message
                    ),
                )
                .await;
            EvictionResult::Blocked
        }
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
            // 409: the uid precondition failed, the pod planned for is gone.
            tracing::info!(pod = %action.pod, "pod already gone");
            EvictionResult::Gone
        }
        Err(e) => {
            let message = api_message(&e);
            ctx.log_failure(vpa, Some(&action.pod), "eviction failed", &message);
            ctx.events
                .warning(
                    &vpa_ref,
                    "EvictionFailed",
                    "Evict",
                    format!("eviction of pod {} failed: {message}", action.pod),
                )
                .await;
            EvictionResult::Error
        }
    };
    ctx.metrics.eviction(result);
}

/// The pod a resize is for, its VPA, and whether a refused resize may fall back to eviction
/// (`InPlaceOrRecreate`; never for `InPlace`).
struct Target<'a> {
    vpa: &'a VerticalPodAutoscaler,
    pod: &'a Pod,
    may_evict: bool,
}

/// Asks for a resize; true when the API server accepted it.
async fn resize(
    ctx: &Context,
    target: &Target<'_>,
    action: &PodAction,
    patch: Option<Value>,
    now: Timestamp,
    report: &mut LoopReport,
) -> bool {
    let Target {
        vpa,
        pod,
        may_evict,
    } = *target;
    let Some(patch) = patch else {
        tracing::debug!(pod = %action.pod, "nothing to resize");
        return false;
    };
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.write_client.clone(), &namespace);
    let params = PatchParams {
        field_manager: Some(BINARY.to_owned()),
        ..PatchParams::default()
    };
    let (_, vpa_name) = vpa_name(vpa);
    match api
        .patch_subresource("resize", &action.pod, &params, &Patch::Strategic(&patch))
        .await
    {
        Ok(_) => {
            report.resized += 1;
            ctx.record_in_place_attempt(pod, now);
            // Upstream: an accepted request clears the stored infeasible attempt.
            ctx.forget_infeasible(pod);
            ctx.metrics.resize("requested");
            tracing::info!(pod = %action.pod, reason = %action.reason, resource_diff = action.priority.resource_diff, "resize requested");
            ctx.events
                .normal(&pod.object_ref(&()), "InPlaceResizedByVPA", "Resize", format!("vpa-updater asked to resize the pod in place to apply the recommendation of VPA {vpa_name}: {}", action.reason))
                .await;
            ctx.events
                .normal(
                    &vpa.object_ref(&()),
                    "InPlaceResizedPod",
                    "Resize",
                    format!(
                        "vpa-updater asked to resize pod {} in place: {}",
                        action.pod, action.reason
                    ),
                )
                .await;
            true
        }
        // Kubernetes 1.36+ refuses a resize the node cannot fit at admission, with a
        // `NodeCapacity` cause: remember the values (AEP-8818 detection path 2).
        Err(kube::Error::Api(status)) if !may_evict && node_capacity(&status) => {
            ctx.metrics.resize("infeasible");
            if let Backoff::Attempt(values) = &action.backoff {
                let why = format!(
                    "keeps its requests: the API server refused a resize to {} ({}); not retried until the recommendation asks for less",
                    resize_backoff::describe(values),
                    status.message
                );
                remember_infeasible(ctx, vpa, pod, values, &why).await;
            }
            false
        }
        // The API server refuses (no resize support, forbidden, invalid): evict instead, unless
        // the mode never evicts.
        Err(kube::Error::Api(status))
            if (400..500).contains(&status.code) && status.code != 429 && status.code != 409 =>
        {
            ctx.metrics.resize("refused");
            if !may_evict {
                tracing::info!(pod = %action.pod, code = status.code, message = %status.message, "in-place resize refused; mode InPlace never evicts");
                ctx.events
                    .warning(
                        &pod.object_ref(&()),
                        "InPlaceResizeRefused",
                        "Resize",
                        format!("vpa-updater could not resize the pod in place (VPA {vpa_name}); it keeps its requests and is not evicted: {}", status.message),
                    )
                    .await;
                return false;
            }
            tracing::info!(pod = %action.pod, code = status.code, message = %status.message, "in-place resize refused; evicting instead");
            let fallback = PodAction {
                reason: format!(
                    "in-place resize refused ({}); evict: {}",
                    status.message, action.reason
                ),
                ..action.clone()
            };
            evict(ctx, vpa, pod, &fallback, report).await;
            false
        }
        Err(e) => {
            ctx.metrics.resize("error");
            ctx.log_failure(
                vpa,
                Some(&action.pod),
                "in-place resize failed",
                &api_message(&e),
            );
            false
        }
    }
}

/// True when the API server refused a resize because the node cannot fit it (a `NodeCapacity`
/// cause, Kubernetes 1.36+).
fn node_capacity(status: &kube::core::Status) -> bool {
    status
        .details
        .as_ref()
        .is_some_and(|d| d.causes.iter().any(|c| c.reason == "NodeCapacity"))
}

/// Remembers resize values `pod`'s node could not fit; the first time, says so with an Event
/// on the pod and on the VPA.
async fn remember_infeasible(
    ctx: &Context,
    vpa: &VerticalPodAutoscaler,
    pod: &Pod,
    values: &RequestsByContainer,
    why: &str,
) {
    if !ctx.remember_infeasible(pod, values) {
        return;
    }
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let (_, vpa_name) = vpa_name(vpa);
    ctx.metrics.resize("held_back");
    tracing::info!(pod = name, values = %resize_backoff::describe(values), why, "in-place resize infeasible; values remembered");
    ctx.events
        .warning(
            &pod.object_ref(&()),
            "InPlaceResizeInfeasible",
            "Resize",
            format!("vpa-updater (VPA {vpa_name}, mode InPlace) {why}"),
        )
        .await;
    ctx.events
        .warning(
            &vpa.object_ref(&()),
            "InPlaceResizeInfeasible",
            "Resize",
            format!("pod {name} {why}"),
        )
        .await;
}

/// Sets the VPA's `InPlaceResizeHeld` condition from this loop's plan when it changed (the
/// recommender carries it over when it writes the status).
async fn write_held_condition(
    ctx: &Context,
    vpa: &VerticalPodAutoscaler,
    plan: &[PodAction],
    now: Timestamp,
) {
    let held: Vec<HeldPod<'_>> = plan
        .iter()
        .filter_map(|a| {
            let infeasible = match a.backoff {
                Backoff::Infeasible(_) => true,
                Backoff::Waiting => false,
                Backoff::None | Backoff::Attempt(_) => return None,
            };
            Some(HeldPod {
                pod: &a.pod,
                infeasible,
                why: a
                    .reason
                    .strip_prefix("keeps its requests: ")
                    .unwrap_or(&a.reason),
            })
        })
        .collect();
    let conditions = vpa
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let previous = conditions
        .iter()
        .find(|c| c.type_ == resize_backoff::CONDITION);
    let Some(next) = held_condition(previous, &held, now) else {
        return;
    };
    if previous == Some(&next) {
        return;
    }
    let mut list: Vec<_> = conditions
        .iter()
        .filter(|c| c.type_ != resize_backoff::CONDITION)
        .cloned()
        .collect();
    list.push(next);
    list.sort_by(|a, b| a.type_.cmp(&b.type_));
    let (namespace, name) = vpa_name(vpa);
    let api: Api<VerticalPodAutoscaler> = Api::namespaced(ctx.client.clone(), &namespace);
    let params = PatchParams {
        field_manager: Some(BINARY.to_owned()),
        ..PatchParams::default()
    };
    let patch = json!({"status": {"conditions": list}});
    if let Err(e) = api
        .patch_status(&name, &params, &Patch::Merge(&patch))
        .await
    {
        // Retried each loop while it fails; a VPA padded to the size etcd stores takes no
        // status, at every loop.
        ctx.log_failure(
            vpa,
            None,
            "cannot write the InPlaceResizeHeld condition",
            &api_message(&e),
        );
    }
}

/// The webhook's resize operations as a strategic merge patch of `spec.containers` (merged by
/// container name, which every API server accepts on the `resize` subresource). `None` when
/// there is nothing to change.
pub fn strategic_resize_patch(
    pod: &Pod,
    vpa: &AdmissionVpa,
    container_range: Option<&LimitRangeItem>,
    pod_range: Option<&LimitRangeItem>,
) -> Option<Value> {
    let admission = admission_pod(pod).ok()?;
    let ops = resize_patch(&admission, vpa, container_range, pod_range);
    let names: Vec<&str> = pod
        .spec
        .as_ref()
        .map(|s| s.containers.iter().map(|c| c.name.as_str()).collect())
        .unwrap_or_default();
    let mut containers: BTreeMap<usize, BTreeMap<&str, serde_json::Map<String, Value>>> =
        BTreeMap::new();
    for op in &ops {
        let parts: Vec<&str> = op.path.trim_start_matches('/').split('/').collect();
        if let [
            "spec",
            "containers",
            index,
            "resources",
            field @ ("requests" | "limits"),
            resource,
        ] = parts[..]
            && let Ok(index) = index.parse::<usize>()
        {
            containers
                .entry(index)
                .or_default()
                .entry(field)
                .or_default()
                .insert(
                    resource.replace("~1", "/").replace("~0", "~"),
                    op.value.clone(),
                );
        }
    }
    if containers.is_empty() {
        return None;
    }
    let list: Vec<Value> = containers
        .into_iter()
        .filter_map(|(index, resources)| {
            Some(json!({"name": names.get(index)?, "resources": resources}))
        })
        .collect();
    Some(json!({"spec": {"containers": list}}))
}

/// Shared state for [`run_once`], built by [`crate::run`], and the watches that keep its cache
/// current (the caller runs them).
pub fn context(
    client: kube::Client,
    write_client: kube::Client,
    metrics: Arc<crate::metrics::Metrics>,
    config: &Config,
) -> (Context, Watches) {
    let (cache, watches) = Cache::new(&client, &Settings::from_config(config).scope);
    let ctx = Context {
        events: plimsoll_runtime::events::Events::new(client.clone(), BINARY),
        client,
        write_client,
        metrics,
        limiter: crate::rate_limit::eviction_limiter(
            config.eviction_rate_limit,
            config.eviction_rate_burst,
        ),
        cache,
        memory: std::sync::Mutex::default(),
        reported: std::sync::Mutex::default(),
        logged: plimsoll_runtime::repeats::Repeats::default(),
    };
    (ctx, watches)
}

/// A [`Context`] whose metrics go to a registry nobody scrapes, for benchmarks and tools that
/// drive [`run_once`] themselves, with its watches (run them, then wait for
/// `ctx.cache.synced()`). Evictions and resizes use `client` too.
pub fn detached_context(client: kube::Client, config: &Config) -> (Context, Watches) {
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Arc::new(crate::metrics::Metrics::register(&mut registry));
    context(client.clone(), client, metrics, config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use plimsoll_core::vertical::policy::UpdateMode;
    use plimsoll_core::vertical::resources::{ContainerRecommendation, Resources};

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "shop", "annotations": {}},
            "spec": {"containers": [
                {"name": "app", "resources": {"requests": {"cpu": "10m", "memory": "10Mi"}}},
                {"name": "sidecar", "resources": {"requests": {"cpu": "5m"}}}
            ]}
        }))
        .unwrap()
    }

    #[test]
    fn an_eviction_holds_only_for_the_pod_the_plan_judged() {
        let mut judged = pod();
        judged.metadata.uid = Some("6f1d-judged".into());
        let body = serde_json::to_value(eviction_of(&judged)).unwrap();
        assert_eq!(body["apiVersion"], "policy/v1");
        assert_eq!(body["kind"], "Eviction");
        assert_eq!(body["metadata"]["name"], "web-1");
        assert_eq!(body["deleteOptions"]["preconditions"]["uid"], "6f1d-judged");
        // A pod without a uid (not from the API server) is evicted by name, as before.
        assert!(eviction_of(&pod()).delete_options.is_none());
    }

    fn vpa(containers: &[&str]) -> AdmissionVpa {
        AdmissionVpa {
            name: "web".into(),
            update_mode: UpdateMode::InPlaceOrRecreate,
            policies: Vec::new(),
            recommendation: Some(
                containers
                    .iter()
                    .map(|c| ContainerRecommendation {
                        container: (*c).to_owned(),
                        target: Resources::new(500, 512 * 1024 * 1024),
                        lower_bound: Resources::new(400, 256 * 1024 * 1024),
                        upper_bound: Resources::new(1000, 1024 * 1024 * 1024),
                    })
                    .collect(),
            ),
            boosts: plimsoll_core::vertical::startup_boost::StartupBoosts::default(),
        }
    }

    #[test]
    fn resize_patch_merges_by_container_name() {
        let patch = strategic_resize_patch(&pod(), &vpa(&["sidecar"]), None, None).unwrap();
        let containers = patch["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 1, "{patch}");
        assert_eq!(containers[0]["name"], "sidecar");
        assert_eq!(containers[0]["resources"]["requests"]["cpu"], "500m");
        assert!(containers[0]["resources"]["requests"]["memory"].is_string());
        // Nothing in metadata: annotations go with a separate pod patch, never to `resize`.
        assert!(patch.get("metadata").is_none());
    }

    #[test]
    fn no_recommendation_means_no_resize() {
        assert_eq!(strategic_resize_patch(&pod(), &vpa(&[]), None, None), None);
    }
}
