//! The recommender loop's I/O: read VPAs and pods from reflector stores and usage from
//! `metrics.k8s.io`, resolve each VPA's `targetRef` to a pod selector, hand everything to
//! [`Recommender::run_loop`] (core's loop: every decision is there), and write what it decided:
//! status patches, checkpoints within `--checkpoints-timeout` (written longest ago first), and —
//! every `--checkpoints-gc-interval` — garbage collection of aggregates and checkpoints.
//!
//! Writes use the field manager `vpa-recommender`. A VPA whose target cannot be resolved gets
//! `ConfigUnsupported` and one Warning Event when that condition appears; the loop goes on.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::reflector::Store;
use plimsoll_core::api::hpa_plus::{HorizontalPodAutoscalerPlus, HorizontalPodAutoscalerPlusSpec};
use plimsoll_core::api::vpa::{VerticalPodAutoscaler, VerticalPodAutoscalerCheckpoint};
use plimsoll_core::conflict;
use plimsoll_core::pod_fields::keep_read_fields;
use plimsoll_core::vertical::controlling::{OwnerKey, Owners};
use plimsoll_core::vertical::joint_sizing::{self, HorizontalSettings, TOTAL_USAGE_ANNOTATION};
use plimsoll_runtime::api_message;
use plimsoll_runtime::events::Events;
use plimsoll_runtime::kinds::TargetRef;
use plimsoll_runtime::leader::shards::ShardHandle;
use plimsoll_runtime::metrics_api::{MetricsSource, PodMetrics};
use plimsoll_runtime::paged::list_summaries;
use plimsoll_runtime::repeats::Repeats;
use plimsoll_runtime::scale::ScaleClient;
use plimsoll_runtime::selector::Selector;
use plimsoll_runtime::target_index::TargetIndex;
use serde_json::json;

use crate::Config;
use crate::coverage;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::recommender::{LoopOutcome, Recommender, VpaInput, VpaKey, key_of};

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "vpa-recommender";

/// Everything the loop reads from and writes to.
pub struct Context {
    /// Kubernetes client.
    pub client: kube::Client,
    /// Events as `vpa-recommender`.
    pub recorder: Events,
    /// Resolves `targetRef`s to pod selectors.
    pub scale: ScaleClient,
    /// `metrics.k8s.io`.
    pub usage: Arc<dyn MetricsSource>,
    /// Loop metrics.
    pub metrics: Arc<Metrics>,
    /// Every VPA (all recommenders: garbage collection needs to know which exist).
    pub vpas: Store<VerticalPodAutoscaler>,
    /// Every pod, as [`pod_fields`] keeps it.
    pub pods: Store<Pod>,
    /// `Evicted` Events (memory-pressure kills), from a watch with `reason=Evicted`.
    pub events: Store<Event>,
    /// Every ReplicaSet and Job: the owner walk climbs through them to a pod's top controller
    /// (which VPA controls a pod, [`plimsoll_core::vertical::controlling`]); each cut down to its
    /// name and controller reference ([`plimsoll_runtime::owners::owner_fields`]).
    pub replica_sets: Store<ReplicaSet>,
    /// See `replica_sets`.
    pub jobs: Store<Job>,
    /// HorizontalPodAutoscalerPluses by the workload they scale (conflict detection).
    pub autoscalers: TargetIndex<HorizontalPodAutoscalerPlus>,
    /// autoscaling/v2 HorizontalPodAutoscalers by the workload they scale (conflict detection).
    pub hpas: TargetIndex<HorizontalPodAutoscaler>,
    /// The Nodes' allocatable (watched only with `--cap-to-largest-node`).
    pub nodes: crate::nodes::Nodes,
    /// The shards this replica acts on (`--shards`); without sharding one shard, held while
    /// leading. Every write for a VPA is gated on its shard being held.
    pub shards: ShardHandle,
    /// Settings.
    pub config: Config,
    /// Failed writes for a VPA already logged, by `namespace/name`.
    pub logged: Repeats,
}

/// Cuts a pod down to what the loop reads ([`keep_read_fields`]): the recommender reads no pod
/// annotation, so none is kept.
pub fn pod_fields(pod: &mut Pod) {
    keep_read_fields(pod, |_| false);
}

/// The shard whose holder deletes the checkpoints of VPAs that no longer exist (a deleted VPA
/// has no uid left to hash, and exactly one replica must collect them).
pub const ORPHAN_SHARD: u32 = 0;

/// Which VPAs a set of writes is for, and whether each may be written now: only while this
/// replica holds the VPA's shard, checked right before each write (a shard can be lost at its
/// renew deadline in the middle of a loop).
pub struct Gate<'a> {
    shards: &'a ShardHandle,
    uids: HashMap<VpaKey, String>,
}

impl<'a> Gate<'a> {
    /// Writes for `vpas` (and no other VPA), gated on `shards`.
    pub fn new<'v>(
        shards: &'a ShardHandle,
        vpas: impl IntoIterator<Item = &'v VerticalPodAutoscaler>,
    ) -> Self {
        let uids = vpas
            .into_iter()
            .filter_map(|v| Some((key_of(v), v.metadata.uid.clone()?)))
            .collect();
        Self { shards, uids }
    }

    /// Whether writes for `key` are in this set.
    pub fn covers(&self, key: &VpaKey) -> bool {
        self.uids.contains_key(key)
    }

    /// Whether `key` may be written now: in this set, and its shard held.
    pub fn allows(&self, key: &VpaKey) -> bool {
        let held = self.uids.get(key).is_some_and(|uid| self.shards.holds(uid));
        if !held {
            tracing::debug!(
                namespace = key.0,
                name = key.1,
                "shard not held: write skipped"
            );
        }
        held
    }
}

/// The cached ReplicaSets and Jobs, for the owner walk.
impl Owners for Context {
    fn controller_of(&self, namespace: &str, owner: &OwnerKey) -> Option<Option<OwnerKey>> {
        plimsoll_runtime::owners::cached_controller_of(
            (&self.replica_sets, &self.jobs),
            namespace,
            owner,
        )
    }
}

impl Context {
    /// Logs a failed write of `object` for the VPA `namespace/vpa`. A namespace user can make a
    /// VPA's writes fail at every loop (an object padded to the size the API server stores
    /// refuses every status added to it), so it is a warning the first time per VPA and error,
    /// then at most every [`plimsoll_runtime::repeats::RELOG_AFTER`] with the repeats not
    /// logged, and debug in between; the `errors_total` counter still counts each one.
    fn log_failure(&self, namespace: &str, vpa: &str, object: &str, what: &str, error: &str) {
        let key = format!("{namespace}/{vpa}");
        if let Some(quiet) = self.logged.first(&key, &format!("{what}: {error}")) {
            tracing::warn!(
                namespace,
                name = object,
                error,
                repeats_not_logged = quiet,
                "{what}"
            );
        } else {
            tracing::debug!(namespace, name = object, error, "{what}");
        }
    }

    /// Forgets the failures logged for VPAs no longer served (deleted, or moved to another
    /// recommender): a VPA back under the same name is reported again.
    fn forget_logged(&self, served: &[Arc<VerticalPodAutoscaler>]) {
        let live: HashSet<String> = served
            .iter()
            .map(|v| format!("{}/{}", v.namespace().unwrap_or_default(), v.name_any()))
            .collect();
        self.logged.retain(|key| live.contains(key));
    }

    fn checkpoint_api(&self, namespace: &str) -> Api<VerticalPodAutoscalerCheckpoint> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Every checkpoint in the watched namespace(s).
    pub async fn list_checkpoints(&self) -> Result<Vec<Arc<VerticalPodAutoscalerCheckpoint>>> {
        let api: Api<VerticalPodAutoscalerCheckpoint> = match &self.config.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        // Paged: one response with every checkpoint of the cluster is read whole.
        list_summaries(&api, &ListParams::default(), |cp| Some(Arc::new(cp)))
            .await
            .map_err(|source| Error::Kube {
                context: "list verticalpodautoscalercheckpoints".into(),
                source,
            })
    }

    /// The VPAs this recommender answers to.
    pub fn served_vpas(&self) -> Vec<Arc<VerticalPodAutoscaler>> {
        let mut vpas: Vec<_> = self
            .vpas
            .state()
            .into_iter()
            .filter(|v| {
                v.is_for_recommender(&self.config.recommender_name, self.config.answer_default)
            })
            .collect();
        vpas.sort_by_key(|v| key_of(v));
        vpas
    }
}

async fn resolve(ctx: &Context, vpa: Arc<VerticalPodAutoscaler>) -> VpaInput {
    let namespace = vpa.metadata.namespace.clone().unwrap_or_default();
    let target = &vpa.spec.target_ref;
    let api_version = target.api_version.clone().unwrap_or_default();
    let selector = if target.kind.is_empty() || target.name.is_empty() {
        Err("spec.targetRef must name a kind and an object".to_owned())
    } else {
        ctx.scale
            .pod_selector(
                &namespace,
                TargetRef::new(&api_version, &target.kind, &target.name),
            )
            .await
            .map_err(|e| e.to_string())
    };
    let conflict = conflict_of(ctx, &vpa);
    let joint = joint_of(ctx, &vpa);
    VpaInput {
        vpa,
        selector,
        conflict,
        joint,
    }
}

/// The horizontal autoscalers of `vpa`'s workload, HPA+ first, then HPAs (read as HPA+), each
/// in name order, as `(Kind/name, spec)`.
fn horizontal_of(
    ctx: &Context,
    vpa: &VerticalPodAutoscaler,
) -> Vec<(String, HorizontalPodAutoscalerPlusSpec)> {
    let namespace = vpa.metadata.namespace.as_deref().unwrap_or_default();
    let target = &vpa.spec.target_ref;
    let plus = ctx
        .autoscalers
        .get(namespace, &target.kind, &target.name)
        .into_iter()
        .map(|p| {
            (
                format!("HorizontalPodAutoscalerPlus/{}", p.name_any()),
                p.spec.clone(),
            )
        });
    // A native HPA reads as an HPA+ (its annotations decide nothing here: only its metrics
    // and bounds).
    let native = ctx
        .hpas
        .get(namespace, &target.kind, &target.name)
        .into_iter()
        .filter_map(|h| {
            let spec = HorizontalPodAutoscalerPlus::from_native(&h).ok()?.spec;
            Some((format!("HorizontalPodAutoscaler/{}", h.name_any()), spec))
        });
    plus.chain(native).collect()
}

/// For a VPA in joint mode, the first horizontal autoscaler ([`horizontal_of`]'s order) that
/// scales its workload on CPU or memory utilization (each resource it scales on is sized).
fn joint_of(ctx: &Context, vpa: &VerticalPodAutoscaler) -> Option<HorizontalSettings> {
    if !joint_sizing::annotated(vpa.metadata.annotations.as_ref()) {
        return None;
    }
    horizontal_of(ctx, vpa)
        .iter()
        .find_map(|(name, spec)| HorizontalSettings::of(name, spec))
}

/// The first horizontal autoscaler (HPA+ first, then HPAs, each in name order) that fights
/// `vpa` over the same requests ([`conflict::conflicts`]), as the condition's message.
fn conflict_of(ctx: &Context, vpa: &VerticalPodAutoscaler) -> Option<String> {
    let annotations = vpa.metadata.annotations.clone().unwrap_or_default();
    horizontal_of(ctx, vpa)
        .into_iter()
        .find_map(|(name, spec)| {
            let resources = conflict::conflicts(&spec, &vpa.spec, &annotations);
            (!resources.is_empty()).then(|| conflict::vertical_message(&name, &resources))
        })
}

async fn fetch_usage(ctx: &Context, namespaces: BTreeSet<String>) -> Vec<PodMetrics> {
    let everything = Selector::everything();
    let results: Vec<_> = futures::stream::iter(namespaces)
        .map(|ns| {
            let everything = &everything;
            async move { (ns.clone(), ctx.usage.pod_metrics(&ns, everything).await) }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let mut out = Vec::new();
    for (namespace, result) in results {
        match result {
            Ok(pods) => out.extend(pods),
            Err(e) => {
                ctx.metrics.error("metrics");
                tracing::warn!(namespace, error = %e, "cannot read pod usage");
            }
        }
    }
    out
}

async fn resolve_all(ctx: &Context, vpas: Vec<Arc<VerticalPodAutoscaler>>) -> Vec<VpaInput> {
    futures::stream::iter(vpas)
        .map(|v| resolve(ctx, v))
        .buffered(16)
        .collect()
        .await
}

/// One loop against the cluster over the served VPAs of `shards` (the covered shards: held,
/// and restored). Every write is gated on the VPA's shard still being held. Returns the loop's
/// time, which the checkpoints it wrote carry.
pub async fn run_once(
    ctx: &Context,
    recommender: &mut Recommender,
    shards: &BTreeSet<u32>,
) -> Timestamp {
    let started = Instant::now();
    let now = Timestamp::now();
    let served = ctx.served_vpas();
    let covered = coverage::in_shards(&served, |uid| ctx.shards.shard_of(uid), shards);
    let context = coverage::ownership_context(&served, &covered);
    let inputs = resolve_all(ctx, covered).await;
    let context = resolve_all(ctx, context).await;
    let namespaces: BTreeSet<String> = inputs
        .iter()
        .filter(|i| i.selector.is_ok())
        .filter_map(|i| i.vpa.metadata.namespace.clone())
        .collect();
    let usage = fetch_usage(ctx, namespaces).await;
    let pods = coverage::pods_for(&inputs, &context, ctx.pods.state(), ctx);
    let events = ctx.events.state();
    recommender.set_largest_node(ctx.nodes.largest());
    let outcome = recommender.run_loop(&inputs, &pods, ctx, &usage, &events, now);
    let gate = Gate::new(&ctx.shards, inputs.iter().map(|i| i.vpa.as_ref()));
    write_statuses(ctx, &gate, &inputs, &outcome).await;
    write_checkpoints(ctx, &gate, recommender, now, None).await;
    persist_totals(ctx, &gate, recommender, ctx.config.joint_persist_interval).await;
    ctx.forget_logged(&served);
    ctx.metrics.conflicting.set(
        i64::try_from(inputs.iter().filter(|i| i.conflict.is_some()).count()).unwrap_or(i64::MAX),
    );
    ctx.metrics
        .objects
        .set(i64::try_from(outcome.vpas).unwrap_or(i64::MAX));
    ctx.metrics
        .containers
        .set(i64::try_from(outcome.containers).unwrap_or(i64::MAX));
    let elapsed = started.elapsed();
    ctx.metrics.loop_duration.observe(elapsed.as_secs_f64());
    tracing::info!(
        vpas = outcome.vpas,
        containers = outcome.containers,
        samples = outcome.samples,
        ooms = outcome.ooms,
        status_updates = outcome.updates.len(),
        seconds = elapsed.as_secs_f64(),
        "recommender loop done"
    );
    now
}

/// Writes the statuses `outcome` changed, with a Warning Event for a conflict or an
/// unsupported configuration that has just appeared.
async fn write_statuses(
    ctx: &Context,
    gate: &Gate<'_>,
    inputs: &[VpaInput],
    outcome: &LoopOutcome,
) {
    let by_key: HashMap<VpaKey, &VpaInput> = inputs.iter().map(|i| (key_of(&i.vpa), i)).collect();
    for update in &outcome.updates {
        if !gate.allows(&update.key) {
            continue;
        }
        let (namespace, name) = &update.key;
        let api: Api<VerticalPodAutoscaler> = Api::namespaced(ctx.client.clone(), namespace);
        // Null removes a recommendation that is no longer valid; conditions replace the list.
        let patch = json!({"status": {
            "recommendation": update.status.recommendation,
            "conditions": update.status.conditions,
        }});
        match api
            .patch_status(
                name,
                &PatchParams {
                    field_manager: Some(FIELD_MANAGER.to_owned()),
                    ..PatchParams::default()
                },
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => {
                ctx.metrics.status_writes.inc();
                let rec = outcome.recommendations.iter().find(|r| r.key == update.key);
                let joint = rec.and_then(|r| r.joint.as_ref());
                let joint_memory = rec.and_then(|r| r.joint_memory.as_ref());
                tracing::info!(
                    namespace,
                    name,
                    joint_reason = joint.map(|j| j.reason.as_str()),
                    joint_request = joint.and_then(|j| j.request),
                    joint_memory_reason = joint_memory.map(|j| j.reason.as_str()),
                    joint_memory_request = joint_memory.and_then(|j| j.request),
                    recommendation = ?update.status.recommendation,
                    unsupported = update.unsupported.as_deref(),
                    "recommendation written"
                );
            }
            Err(e) => {
                ctx.metrics.error("status");
                ctx.log_failure(
                    namespace,
                    name,
                    name,
                    "cannot write VPA status",
                    &api_message(&e),
                );
            }
        }
        if let (Some(message), Some(input)) = (&update.newly_conflicting, by_key.get(&update.key)) {
            use kube::Resource as _;
            ctx.recorder
                .warning(
                    &input.vpa.object_ref(&()),
                    conflict::CONDITION,
                    "Recommend",
                    message.clone(),
                )
                .await;
        }
        if let (Some(why), true, Some(input)) = (
            &update.unsupported,
            update.newly_unsupported,
            by_key.get(&update.key),
        ) {
            use kube::Resource as _;
            ctx.recorder
                .warning(
                    &input.vpa.object_ref(&()),
                    "ConfigUnsupported",
                    "Recommend",
                    why.clone(),
                )
                .await;
        }
    }
}

/// Writes the due checkpoints of the VPAs `gate` covers, longest-ago first, within
/// `--checkpoints-timeout` (at least `--min-checkpoints` of them). With `unless_written_at`, skips
/// those last written at that time (by the loop that ran then: the model has not changed since).
async fn write_checkpoints(
    ctx: &Context,
    gate: &Gate<'_>,
    recommender: &mut Recommender,
    now: Timestamp,
    unless_written_at: Option<Timestamp>,
) {
    let deadline = Instant::now() + ctx.config.checkpoints_timeout;
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let due: Vec<_> = recommender
        .checkpoints_due(now)
        .into_iter()
        .filter(|d| {
            let cp = &d.checkpoint;
            let key = (
                cp.metadata.namespace.clone().unwrap_or_default(),
                cp.spec.vpa_object_name.clone().unwrap_or_default(),
            );
            gate.covers(&key)
                && (unless_written_at.is_none() || d.last_written != unless_written_at)
        })
        .collect();
    let total = due.len();
    for (written, due) in due.into_iter().enumerate() {
        if written >= ctx.config.min_checkpoints && Instant::now() >= deadline {
            tracing::info!(
                written,
                left = total - written,
                "checkpoint time budget used; the oldest were written, the rest wait"
            );
            break;
        }
        let cp = &due.checkpoint;
        let namespace = cp.metadata.namespace.clone().unwrap_or_default();
        let name = cp.metadata.name.clone().unwrap_or_default();
        let key = (
            namespace.clone(),
            cp.spec.vpa_object_name.clone().unwrap_or_default(),
        );
        if !gate.allows(&key) {
            continue;
        }
        match ctx
            .checkpoint_api(&namespace)
            .patch(&name, &params, &Patch::Apply(cp))
            .await
        {
            Ok(_) => {
                ctx.metrics.checkpoint_writes.inc();
                recommender.checkpoint_written(
                    &key,
                    cp.spec.container_name.as_deref().unwrap_or_default(),
                    now,
                );
            }
            Err(e) => {
                ctx.metrics.error("checkpoint");
                ctx.log_failure(
                    &namespace,
                    &key.1,
                    &name,
                    "cannot write checkpoint",
                    &api_message(&e),
                );
                recommender.checkpoint_failed(
                    &key,
                    cp.spec.container_name.as_deref().unwrap_or_default(),
                    now,
                );
            }
        }
    }
}

/// Writes the total usage of joint VPAs (those `gate` covers) to their
/// `plimsoll.dev/total-usage` annotation: those that changed and were last written at least
/// `every` ago (zero: every changed one, before their state is dropped). A failed write is
/// retried next loop.
pub async fn persist_totals(
    ctx: &Context,
    gate: &Gate<'_>,
    recommender: &mut Recommender,
    every: Duration,
) {
    let now = Timestamp::now();
    let every = jiff::SignedDuration::try_from(every).unwrap_or(jiff::SignedDuration::MAX);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    for (key, value) in recommender.totals_due(now, every) {
        if !gate.covers(&key) || !gate.allows(&key) {
            continue;
        }
        let (namespace, name) = &key;
        let api: Api<VerticalPodAutoscaler> = Api::namespaced(ctx.client.clone(), namespace);
        let patch = json!({"metadata": {"annotations": {TOTAL_USAGE_ANNOTATION: value}}});
        match api.patch(name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => {
                ctx.metrics.total_usage_writes.inc();
                recommender.total_persisted(&key, now);
            }
            Err(e) => {
                ctx.metrics.error("total-usage");
                ctx.log_failure(
                    namespace,
                    name,
                    name,
                    "cannot write the total usage annotation",
                    &api_message(&e),
                );
            }
        }
    }
}

/// Hands `vpas` over (their shards are no longer acting: given up, lost, or shutting down):
/// writes, while their shards are still held, what their successor restores — the checkpoints
/// the last loop (`last_loop`, its time) left for later within its time budget and the joint
/// totals not persisted yet — then drops their models. Nothing is written for a shard already
/// lost.
pub async fn hand_over(
    ctx: &Context,
    recommender: &mut Recommender,
    vpas: &[Arc<VerticalPodAutoscaler>],
    last_loop: Option<Timestamp>,
) {
    let gate = Gate::new(&ctx.shards, vpas.iter().map(AsRef::as_ref));
    // Before any loop the model holds what was restored, the newest on the server already.
    if last_loop.is_some() {
        write_checkpoints(ctx, &gate, recommender, Timestamp::now(), last_loop).await;
    }
    persist_totals(ctx, &gate, recommender, Duration::ZERO).await;
    let dropped = recommender.forget(|key| gate.covers(key));
    tracing::info!(vpas = dropped, "handed over");
}

/// Garbage collection: expired aggregates, then checkpoints of deleted VPAs and of containers
/// without an aggregate. Each stale checkpoint is deleted by one replica only: the holder of
/// [`collector`]'s shard, which must be in `shards` (covered) and still held.
pub async fn garbage_collect(
    ctx: &Context,
    recommender: &mut Recommender,
    shards: &BTreeSet<u32>,
) -> Result<()> {
    let dropped = recommender.garbage_collect(Timestamp::now());
    let checkpoints = ctx.list_checkpoints().await?;
    let uids: HashMap<VpaKey, Option<String>> = ctx
        .vpas
        .state()
        .iter()
        .map(|v| (key_of(v), v.metadata.uid.clone()))
        .collect();
    let all: HashSet<VpaKey> = uids.keys().cloned().collect();
    let vpa_of: HashMap<(String, String), VpaKey> = checkpoints
        .iter()
        .map(|cp| {
            let namespace = cp.metadata.namespace.clone().unwrap_or_default();
            let name = cp.metadata.name.clone().unwrap_or_default();
            let vpa = cp.spec.vpa_object_name.clone().unwrap_or_default();
            ((namespace.clone(), name), (namespace, vpa))
        })
        .collect();
    let stale = recommender.stale_checkpoints(&checkpoints, &all);
    let mut deleted = 0;
    for (namespace, name) in &stale {
        let uid = vpa_of
            .get(&(namespace.clone(), name.clone()))
            .and_then(|key| uids.get(key))
            .map(Option::as_deref);
        let shard = collector(uid, |uid| ctx.shards.shard_of(uid));
        if !shards.contains(&shard) || !ctx.shards.holds_shard(shard) {
            continue;
        }
        match ctx
            .checkpoint_api(namespace)
            .delete(name, &DeleteParams::default())
            .await
        {
            Ok(_) => {
                deleted += 1;
                ctx.metrics.checkpoint_deletes.inc();
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => {
                ctx.metrics.error("checkpoint");
                tracing::warn!(namespace, name, error = %api_message(&e), "cannot delete checkpoint");
            }
        }
    }
    tracing::info!(
        aggregates_dropped = dropped,
        checkpoints_deleted = deleted,
        "garbage collection done"
    );
    Ok(())
}

/// The shard whose holder deletes a stale checkpoint: its VPA's (`uid`: `None` when the VPA no
/// longer exists, `Some(None)` when it has no uid) or, for a deleted one, [`ORPHAN_SHARD`].
pub fn collector(uid: Option<Option<&str>>, shard_of: impl Fn(&str) -> u32) -> u32 {
    match uid {
        Some(Some(uid)) => shard_of(uid),
        Some(None) | None => ORPHAN_SHARD,
    }
}

/// Restores the history of the VPAs `keys` (those of newly covered shards): from their
/// checkpoints, or from Prometheus. Nothing is changed when it fails. Returns how many
/// containers were restored.
pub(crate) async fn restore(
    ctx: &Context,
    recommender: &mut Recommender,
    keys: &HashSet<VpaKey>,
) -> Result<usize> {
    let now = Timestamp::now();
    if let Some(prom) = &ctx.config.prometheus {
        let history = crate::history::load_with(prom, Some(ctx.client.clone()), now).await?;
        // Ownership over every served VPA, as the loop sees it; only `keys`' pods are loaded.
        let inputs = resolve_all(ctx, ctx.served_vpas()).await;
        let pods = ctx.pods.state();
        let owner = recommender.pod_owners(&inputs, &pods, ctx);
        let mut loaded = 0;
        for ((namespace, pod, container), h) in &history {
            let Some(key) = owner
                .get(&(namespace.clone(), pod.clone()))
                .filter(|k| keys.contains(*k))
            else {
                continue;
            };
            for (t, cpu) in &h.cpu {
                recommender.add_history(key, pod, container, Some(*cpu), None, *t);
            }
            for (t, mem) in &h.memory {
                recommender.add_history(key, pod, container, None, Some(*mem), *t);
            }
            loaded += 1;
        }
        tracing::info!(containers = loaded, "history loaded from Prometheus");
        return Ok(loaded);
    }
    let checkpoints = ctx.list_checkpoints().await?;
    let (restored, errors) = recommender.restore(&checkpoints, keys, now);
    for e in &errors {
        ctx.metrics.error("checkpoint");
        tracing::warn!(error = %e, "checkpoint skipped");
    }
    tracing::info!(
        restored,
        vpas = keys.len(),
        "state restored from checkpoints"
    );
    Ok(restored)
}

/// How long to wait before the next loop so that loops start `interval` apart.
pub fn until_next(started: Instant, interval: Duration) -> Duration {
    interval.saturating_sub(started.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use plimsoll_runtime::leader::LeaderHandle;
    use plimsoll_runtime::leader::shards::shard_of;

    #[test]
    fn each_stale_checkpoint_has_one_collector() {
        let of = |uid: &str| shard_of(uid, 6);
        // A live VPA's checkpoints are its shard's holder's to collect.
        assert_eq!(collector(Some(Some("uid-7")), of), shard_of("uid-7", 6));
        // A deleted VPA (or one without a uid) has none: the orphan shard's holder collects.
        assert_eq!(collector(None, of), ORPHAN_SHARD);
        assert_eq!(collector(Some(None), of), ORPHAN_SHARD);
    }

    #[test]
    fn a_gate_covers_its_vpas_and_allows_them_while_held() {
        let web: VerticalPodAutoscaler = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "uid-web"},
            "spec": {"targetRef": {"kind": "Deployment", "name": "web"}},
        }))
        .expect("a VPA");
        let mut anonymous = web.clone();
        anonymous.metadata.name = Some("anonymous".into());
        anonymous.metadata.uid = None;
        let leading = ShardHandle::single(LeaderHandle::always_leading());
        let gate = Gate::new(&leading, [&web, &anonymous]);
        let key = ("ns".to_owned(), "web".to_owned());
        assert!(gate.covers(&key) && gate.allows(&key));
        let other = ("ns".to_owned(), "other".to_owned());
        assert!(!gate.covers(&other) && !gate.allows(&other));
        // Without a uid a VPA is in no shard: never written.
        assert!(!gate.covers(&("ns".to_owned(), "anonymous".to_owned())));
    }
}
