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
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::reflector::Store;
use plimsoll_core::api::hpa_plus::{HorizontalPodAutoscalerPlus, HorizontalPodAutoscalerPlusSpec};
use plimsoll_core::api::vpa::{VerticalPodAutoscaler, VerticalPodAutoscalerCheckpoint};
use plimsoll_core::conflict;
use plimsoll_core::vertical::joint_sizing::{self, HorizontalSettings, TOTAL_USAGE_ANNOTATION};
use plimsoll_runtime::api_message;
use plimsoll_runtime::events::Events;
use plimsoll_runtime::kinds::TargetRef;
use plimsoll_runtime::metrics_api::{MetricsSource, PodMetrics};
use plimsoll_runtime::scale::ScaleClient;
use plimsoll_runtime::selector::Selector;
use plimsoll_runtime::target_index::TargetIndex;
use serde_json::json;

use crate::Config;
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
    /// Every pod.
    pub pods: Store<Pod>,
    /// `Evicted` Events (memory-pressure kills), from a watch with `reason=Evicted`.
    pub events: Store<Event>,
    /// HorizontalPodAutoscalerPluses by the workload they scale (conflict detection).
    pub autoscalers: TargetIndex<HorizontalPodAutoscalerPlus>,
    /// autoscaling/v2 HorizontalPodAutoscalers by the workload they scale (conflict detection).
    pub hpas: TargetIndex<HorizontalPodAutoscaler>,
    /// Settings.
    pub config: Config,
}

impl Context {
    fn checkpoint_api(&self, namespace: &str) -> Api<VerticalPodAutoscalerCheckpoint> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Every checkpoint in the watched namespace(s).
    pub async fn list_checkpoints(&self) -> Result<Vec<Arc<VerticalPodAutoscalerCheckpoint>>> {
        let api: Api<VerticalPodAutoscalerCheckpoint> = match &self.config.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|source| Error::Kube {
                context: "list verticalpodautoscalercheckpoints".into(),
                source,
            })?;
        Ok(list.items.into_iter().map(Arc::new).collect())
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

    /// Keys of every VPA, served or not.
    pub fn all_vpa_keys(&self) -> HashSet<VpaKey> {
        self.vpas.state().iter().map(|v| key_of(v)).collect()
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

/// One loop against the cluster.
pub async fn run_once(ctx: &Context, recommender: &mut Recommender) {
    let started = Instant::now();
    let now = Timestamp::now();
    let served = ctx.served_vpas();
    let inputs: Vec<VpaInput> = futures::stream::iter(served)
        .map(|v| resolve(ctx, v))
        .buffered(16)
        .collect()
        .await;
    let namespaces: BTreeSet<String> = inputs
        .iter()
        .filter(|i| i.selector.is_ok())
        .filter_map(|i| i.vpa.metadata.namespace.clone())
        .collect();
    let usage = fetch_usage(ctx, namespaces).await;
    let pods = ctx.pods.state();
    let events = ctx.events.state();
    let outcome = recommender.run_loop(&inputs, &pods, &usage, &events, now);
    write_statuses(ctx, &inputs, &outcome).await;
    write_checkpoints(ctx, recommender, now).await;
    persist_totals(ctx, recommender, ctx.config.joint_persist_interval).await;
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
}

/// Writes the statuses `outcome` changed, with a Warning Event for a conflict or an
/// unsupported configuration that has just appeared.
async fn write_statuses(ctx: &Context, inputs: &[VpaInput], outcome: &LoopOutcome) {
    let by_key: HashMap<VpaKey, &VpaInput> = inputs.iter().map(|i| (key_of(&i.vpa), i)).collect();
    for update in &outcome.updates {
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
                tracing::warn!(namespace, name, error = %api_message(&e), "cannot write VPA status");
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

async fn write_checkpoints(ctx: &Context, recommender: &mut Recommender, now: Timestamp) {
    let deadline = Instant::now() + ctx.config.checkpoints_timeout;
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let due = recommender.checkpoints_due(now);
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
        match ctx
            .checkpoint_api(&namespace)
            .patch(&name, &params, &Patch::Apply(cp))
            .await
        {
            Ok(_) => {
                ctx.metrics.checkpoint_writes.inc();
                let key = (
                    namespace,
                    cp.spec.vpa_object_name.clone().unwrap_or_default(),
                );
                recommender.checkpoint_written(
                    &key,
                    cp.spec.container_name.as_deref().unwrap_or_default(),
                    now,
                );
            }
            Err(e) => {
                ctx.metrics.error("checkpoint");
                tracing::warn!(namespace, name, error = %api_message(&e), "cannot write checkpoint");
            }
        }
    }
}

/// Writes the total usage of joint VPAs to their `plimsoll.dev/total-usage` annotation: those
/// that changed and were last written at least `every` ago (zero: every changed one, at the end
/// of a leadership term). A failed write is retried next loop.
pub async fn persist_totals(ctx: &Context, recommender: &mut Recommender, every: Duration) {
    let now = Timestamp::now();
    let every = jiff::SignedDuration::try_from(every).unwrap_or(jiff::SignedDuration::MAX);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    for ((namespace, name), value) in recommender.totals_due(now, every) {
        let api: Api<VerticalPodAutoscaler> = Api::namespaced(ctx.client.clone(), &namespace);
        let patch = json!({"metadata": {"annotations": {TOTAL_USAGE_ANNOTATION: value}}});
        match api.patch(&name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => {
                ctx.metrics.total_usage_writes.inc();
                recommender.total_persisted(&(namespace, name), now);
            }
            Err(e) => {
                ctx.metrics.error("total-usage");
                tracing::warn!(namespace, name, error = %api_message(&e), "cannot write the total usage annotation");
            }
        }
    }
}

/// Garbage collection: expired aggregates, then checkpoints of deleted VPAs and of containers
/// without an aggregate.
pub async fn garbage_collect(ctx: &Context, recommender: &mut Recommender) -> Result<()> {
    let dropped = recommender.garbage_collect(Timestamp::now());
    let checkpoints = ctx.list_checkpoints().await?;
    let stale = recommender.stale_checkpoints(&checkpoints, &ctx.all_vpa_keys());
    for (namespace, name) in &stale {
        match ctx
            .checkpoint_api(namespace)
            .delete(name, &DeleteParams::default())
            .await
        {
            Ok(_) => {
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
        checkpoints_deleted = stale.len(),
        "garbage collection done"
    );
    Ok(())
}

/// Restores the state at start (or on becoming leader): from checkpoints, or from Prometheus.
pub async fn restore(ctx: &Context, recommender: &mut Recommender) -> Result<()> {
    let now = Timestamp::now();
    let served: HashSet<VpaKey> = ctx.served_vpas().iter().map(|v| key_of(v)).collect();
    if let Some(prom) = &ctx.config.prometheus {
        let history = crate::history::load_with(prom, Some(ctx.client.clone()), now).await?;
        let inputs: Vec<VpaInput> = futures::stream::iter(ctx.served_vpas())
            .map(|v| resolve(ctx, v))
            .buffered(16)
            .collect()
            .await;
        let pods = ctx.pods.state();
        let owner = recommender.pod_owners(&inputs, &pods);
        let mut loaded = 0;
        for ((namespace, pod, container), h) in &history {
            let Some(key) = owner.get(&(namespace.clone(), pod.clone())) else {
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
        return Ok(());
    }
    let checkpoints = ctx.list_checkpoints().await?;
    let (restored, errors) = recommender.restore(&checkpoints, &served, now);
    for e in &errors {
        ctx.metrics.error("checkpoint");
        tracing::warn!(error = %e, "checkpoint skipped");
    }
    tracing::info!(restored, "state restored from checkpoints");
    Ok(())
}

/// How long to wait before the next loop so that loops start `interval` apart.
pub fn until_next(started: Instant, interval: Duration) -> Duration {
    interval.saturating_sub(started.elapsed())
}
