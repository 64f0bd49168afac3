//! The hpa-plus service: Plimsoll's horizontal autoscaler.
//!
//! [`run`] is the service on the `plimsoll_runtime::service` skeleton (admin listener, election
//! on the `plimsoll-hpa-plus` Lease, shutdown), and says:
//! - what to build: the [`Context`] (scale and metrics clients, Events, the caches);
//! - what to watch: every pod (one watch, indexed by namespace) and every
//!   CronHorizontalPodAutoscaler; ready once both caches have synced;
//! - how to reconcile while leading: a kube-runtime `Controller` over HorizontalPodAutoscalerPlus
//!   (and, with `--native-hpa`, one over the autoscaling/v2 HorizontalPodAutoscalers that
//!   `--native-hpa-selector` selects, by default all but KEDA's) with
//!   `--workers` concurrent reconciles. Each object is requeued after its own period and
//!   reconciled at once when its spec (or, for native HPAs, its annotations) changes. Losing the
//!   lease stops the controllers at once; a reconcile in flight checks the lease before each
//!   write.
//!
//! With `--shards N` (N > 1) there is no single leader: every replica runs the controllers, and
//! an object is evaluated only by the replica holding the Lease of its shard
//! (`plimsoll_runtime::leader::shards`). The others keep it out of the controller's store
//! ([`shard_cache`]), so they neither evaluate nor schedule it; the objects of a shard this
//! replica takes enter the store and are evaluated as soon as it takes it (`taken_over`).
//! Sharded or not, the cache holds each autoscaler packed, read back whole by each evaluation
//! ([`cached`]).
//!
//! On shutdown (the token is cancelled) the controllers stop taking work and finish in-flight
//! reconciles, then the Lease is released and `run` returns `Ok`. A Prometheus query in flight
//! does not hold that up: it races the same token, and its evaluation ends without writing. If the election task dies
//! while running, `run` returns an error.
//!
//! Modules: [`cli`] (flags), [`context`], [`pods`] (pod cache), [`observe`], [`prometheus`]
//! (`type: Prometheus` metrics), [`reconcile`], [`cached`] and [`shard_cache`] (the autoscaler
//! cache), [`tuning`] (`minReplicasTuning`), [`predict`]
//! (`spec.predictive`), [`seed`] (their one Prometheus backfill), [`status`], [`record`]
//! (`--record-dir`), [`metrics`], [`error`]; [`replay`], [`replay_load`] and [`plot`] are the offline
//! `replay`.

pub mod cached;
pub mod cli;
pub mod context;
pub mod error;
pub mod metrics;
pub mod observe;
pub mod plot;
pub mod pods;
pub mod predict;
pub mod prometheus;
pub mod reconcile;
pub mod record;
pub mod replay;
pub mod replay_kinds;
pub mod replay_load;
pub mod replica_sets;
pub mod seed;
pub mod shard_cache;
pub mod status;
pub mod tuning;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt as _, Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::{Action, Config as ControllerSettings, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::utils::PredicateConfig;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use plimsoll_core::api::cron::CronHorizontalPodAutoscaler;
use plimsoll_core::api::hpa_plus::{HorizontalPodAutoscalerPlus, NativeHpa};
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_core::horizontal::ControllerConfig;
use plimsoll_core::horizontal::cron_hold;
use plimsoll_core::pod_fields;
use plimsoll_runtime::CommonArgs;
use plimsoll_runtime::admin::{Liveness, Readiness};
use plimsoll_runtime::contained::contained;
use plimsoll_runtime::events::Events;
use plimsoll_runtime::kinds::KindResolver;
use plimsoll_runtime::metrics_api::{ApiMetrics, MetricsSource};
use plimsoll_runtime::scale::ScaleClient;
use plimsoll_runtime::selector::Selector;
use plimsoll_runtime::service::Service;
use plimsoll_runtime::target_index::TargetIndex;
use plimsoll_runtime::watch::{Watch, WatchMetrics};
use plimsoll_runtime::watched_scales::WatchedScales;
use tokio_util::sync::CancellationToken;

pub use error::{Error, Result};

use cached::Packed;
use context::{Context, ContextParts};
use metrics::Metrics;
use pods::PodIndex;
use replica_sets::ReplicaSetIndex;
use shard_cache::ShardCache;

/// The binary name: Lease `plimsoll-hpa-plus`, field manager, Event reporter, metric prefix.
pub const BINARY: &str = "hpa-plus";

/// The default of `--native-hpa-selector`: every HPA but those KEDA generates.
///
/// KEDA builds the HPA of a ScaledObject in `newHPAForScaledObject`
/// (kedacore/keda, `controllers/keda/hpa.go`) with the labels
/// `app.kubernetes.io/managed-by: keda-operator`, `app.kubernetes.io/part-of: <ScaledObject>`,
/// `app.kubernetes.io/name`, `app.kubernetes.io/version`, and then copies every label of the
/// ScaledObject over them. The ScaledObject always has `scaledobject.keda.sh/name: <name>`
/// (`ensureScaledObjectLabel` in `controllers/keda/scaledobject_controller.go`, set before the HPA
/// is built; the constant `ScaledObjectOwnerAnnotation` in `apis/keda/v1alpha1`), so the HPA has
/// it too, unless the ScaledObject lists it in its `scaledobject.keda.sh/hpa-excluded-labels`
/// annotation. Either requirement alone misses some: a ScaledObject labelled
/// `app.kubernetes.io/managed-by: Helm` (as most charts label what they install) overwrites
/// KEDA's `managed-by`, and KEDA versions before the label copy set only `managed-by`.
pub const NATIVE_HPA_SELECTOR_DEFAULT: &str =
    "!scaledobject.keda.sh/name,app.kubernetes.io/managed-by!=keda-operator";

/// Everything `run` needs; plain data, so tests build it without clap.
#[derive(Clone, Debug)]
pub struct Config {
    /// Shared flags (kubeconfig, admin address, logging, leader election).
    pub common: CommonArgs,
    /// Concurrent reconciles (`--workers`, default 64).
    pub workers: u16,
    /// Also reconcile autoscaling/v2 HPAs (`--native-hpa`).
    pub native_hpa: bool,
    /// `--native-hpa-selector`: the HPAs native mode takes over, by label (everything when
    /// empty). Sent to the API server with the watch.
    pub native_hpa_selector: Selector,
    /// Decision settings (tolerance, periods, limit factors, …).
    pub decision: ControllerConfig,
    /// Leader-election identity; `None` = `$POD_NAME` or the host name. Tests running two
    /// instances in one process set distinct identities.
    pub identity: Option<String>,
    /// The Prometheus servers of `type: Prometheus` metrics: the default one, what others get,
    /// which are allowed, and the per-object budget (`--prometheus-*`).
    pub prometheus: prometheus::PrometheusSettings,
    /// `--min-replicas-tuning-exclude`.
    pub tuning_exclude: Option<tuning::Exclusion>,
    /// `--shards`: 1 runs one leader on `plimsoll-hpa-plus`; more splits the autoscalers
    /// among the replicas by shard Leases.
    pub shards: u32,
    /// `--record-dir` and its bounds; `None`: nothing is recorded.
    pub record: Option<record::RecordSettings>,
    /// `--pod-selection-strategy`: act on `podSelectionStrategy: OwnerReferences` (KEP-5325),
    /// watching ReplicaSets for it.
    pub pod_selection_strategy: bool,
}

/// Hooks for tests and benchmarks: where the admin listener bound, and a metrics source
/// replacing the metrics APIs.
#[derive(Default)]
pub struct Hooks {
    /// Receives the admin listener's bound address.
    pub admin_address: Option<tokio::sync::oneshot::Sender<std::net::SocketAddr>>,
    /// Replaces [`ApiMetrics`] (benchmarks, unit tests).
    pub metrics_source: Option<Arc<dyn MetricsSource>>,
}

/// Runs the service until `shutdown` is cancelled.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<()> {
    run_with(config, shutdown, Hooks::default()).await
}

/// [`run`] with [`Hooks`]: build the context, say what to watch, reconcile while leading.
pub async fn run_with(config: Config, shutdown: CancellationToken, hooks: Hooks) -> Result<()> {
    let mut service = Service::new(BINARY, &config.common)
        .identity(config.identity.clone())
        .shards(config.shards)
        .report_admin_address(hooks.admin_address)
        .start()
        .await?;
    let client = service.client.clone();
    let metrics = Arc::new(Metrics::register(service.registry()));
    let recorder = record::Recorder::new(config.record.clone(), service.registry());
    let watches = WatchMetrics::register(service.registry());

    // One watch of every pod, indexed by namespace; a pod holding more than the budget of what
    // is read is left out (`plimsoll_core::pod_fields`).
    let pods = PodIndex::new();
    let index = pods.clone();
    service.spawn(
        Watch::new("Pod", Api::<Pod>::all(client.clone()))
            .metrics(&watches)
            .trim(|pod| pod_fields::keep_read_fields(pod, |_| false))
            .over_budget(pod_fields::leave_out_over_budget)
            .run(move |event| index.apply(&event)),
    );
    // With --pod-selection-strategy only: every ReplicaSet's controller (KEP-5325's
    // Deployment → ReplicaSet → Pod link). Without it, no ReplicaSet is read.
    let replica_sets = config.pod_selection_strategy.then(|| {
        let replica_sets = ReplicaSetIndex::new();
        let index = replica_sets.clone();
        service.spawn(
            Watch::new("ReplicaSet", Api::<ReplicaSet>::all(client.clone()))
                .metrics(&watches)
                .run(move |event| index.apply(&event)),
        );
        replica_sets
    });
    // The CronHorizontalPodAutoscalers, for the hold off during a cron window.
    let (crons, cron_writer) = reflector::store::<CronHorizontalPodAutoscaler>();
    service.spawn(
        Watch::new("CronHorizontalPodAutoscaler", Api::all(client.clone()))
            .metrics(&watches)
            .trim(cron_hold::cached_fields)
            .reflect(cron_writer),
    );
    // The VPAs by the workload they size, for conflict detection. A cluster without the VPA
    // CRD has nothing to conflict with; its watch retries with backoff.
    let vpas = vpa_targets();
    let index = vpas.clone();
    service.spawn(
        Watch::new("VerticalPodAutoscaler", Api::all(client.clone()))
            .metrics(&watches)
            .trim(plimsoll_core::vertical::object_fields::vpa_fields)
            .over_budget(plimsoll_core::vertical::object_fields::leave_out_vpa)
            .run(move |event| index.apply(&event)),
    );
    // Every evaluation reads its target's scale: from memory for the built-in workloads.
    let scales = WatchedScales::new();
    service.spawn(scales.clone().watch(client.clone(), None, watches.clone()));

    let kinds = KindResolver::new(client.clone());
    let server_metrics = metrics.prometheus_servers.clone();
    // A query in flight when SIGTERM comes is abandoned at once, not waited for.
    let prometheus =
        prometheus::PrometheusMetrics::new(config.prometheus.clone(), Some(client.clone()))
            .with_shutdown(shutdown.clone())
            .with_metrics(server_metrics);
    prometheus
        .check_configured()
        .map_err(|e| Error::Config(e.to_string()))?;
    let ctx = Arc::new(
        Context::from_parts(ContextParts {
            client: client.clone(),
            scale: ScaleClient::with_resolver(client.clone(), kinds.clone(), BINARY)
                .with_watched(scales),
            metrics_source: hooks
                .metrics_source
                .unwrap_or_else(|| Arc::new(ApiMetrics::new(client.clone(), kinds))),
            events: Events::new(client.clone(), BINARY),
            metrics,
            pods,
            crons,
            config: config.decision.clone(),
            leader: service.leader.clone(),
            prometheus,
            tuning_exclude: config.tuning_exclude.clone(),
            vpas: vpas.clone(),
        })
        .with_shards(service.shards.clone())
        .with_recorder(recorder)
        .with_replica_sets(replica_sets),
    );
    service.spawn(housekeeping(
        ctx.clone(),
        service.liveness.clone(),
        service.readiness.clone(),
    ));

    service
        .run(shutdown, |term| {
            run_controllers(
                client.clone(),
                ctx.clone(),
                config.clone(),
                watches.clone(),
                term,
            )
        })
        .await
}

/// An empty index of VerticalPodAutoscalers by the workload they size (`spec.targetRef`).
pub fn vpa_targets() -> TargetIndex<VerticalPodAutoscaler> {
    TargetIndex::new(|v| {
        Some((
            v.spec.target_ref.kind.clone(),
            v.spec.target_ref.name.clone(),
        ))
    })
}

/// Every second: liveness, readiness (pod and CronHPA caches synced) and the queue-depth gauge.
async fn housekeeping(ctx: Arc<Context>, liveness: Liveness, readiness: Readiness) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        liveness.tick();
        readiness.set_ready(
            ctx.pods.is_synced()
                && ctx
                    .replica_sets
                    .as_ref()
                    .is_none_or(ReplicaSetIndex::is_synced)
                && ctx.crons.wait_until_ready().now_or_never().is_some(),
        );
        ctx.metrics
            .queue_depth
            .set(ctx.overdue(Instant::now()) as i64);
    }
}

/// Hash of generation and annotations: what should trigger an immediate reconcile (a status
/// write must not, nor the decision-memory annotation hpa-plus writes on a native HPA, or every
/// evaluation would trigger the next one).
// kube's `Predicate` is a function returning `Option<u64>`.
#[allow(clippy::unnecessary_wraps)]
fn spec_or_annotations<K: Resource>(obj: &K) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    obj.meta().generation.hash(&mut h);
    for (key, value) in obj.meta().annotations.iter().flatten() {
        if key != plimsoll_core::horizontal::memory::ANNOTATION
            && key != tuning::STATUS_ANNOTATION
            && key != predict::STATUS_ANNOTATION
        {
            (key, value).hash(&mut h);
        }
    }
    Some(h.finish())
}

/// One leadership term: the controllers run until `term` is cancelled, then finish their
/// in-flight reconciles. Streams that end before that are an error.
async fn run_controllers(
    client: Client,
    ctx: Arc<Context>,
    config: Config,
    watches: WatchMetrics,
    term: CancellationToken,
) -> Result<()> {
    let stopped = term.clone();
    controllers(&client, &ctx, &config, &watches, term).await;
    if stopped.is_cancelled() {
        Ok(())
    } else {
        Err(Error::WatchEnded("autoscalers"))
    }
}

async fn controllers(
    client: &Client,
    ctx: &Arc<Context>,
    config: &Config,
    watches: &WatchMetrics,
    term: CancellationToken,
) {
    let settings = ControllerSettings::default().concurrency(config.workers);
    // The labels matched against an autoscaler's own: an exclusion from tuning, a recording.
    let labels_read: BTreeSet<String> = (config
        .tuning_exclude
        .iter()
        .flat_map(tuning::Exclusion::keys))
    .chain(config.record.iter().flat_map(|r| r.selector.keys()))
    .map(str::to_owned)
    .collect();
    let plus = controller::<HorizontalPodAutoscalerPlus, _, _>(
        Watch::new("HorizontalPodAutoscalerPlus", Api::all(client.clone()))
            .metrics(watches)
            .trim(cached::kept_fields(labels_read.clone()))
            .over_budget(plimsoll_core::vertical::object_fields::leave_out_hpa_plus),
        ctx,
        settings.clone(),
        term.clone(),
        false,
        reconcile::reconcile,
    );
    if !config.native_hpa {
        plus.await;
        return;
    }
    // NativeHpa, not the typed HPA: it keeps spec.behavior.syncPeriodSeconds (KEP-6003), which
    // k8s-openapi does not model yet.
    let native = controller::<NativeHpa, _, _>(
        Watch::new("HorizontalPodAutoscaler", Api::all(client.clone()))
            .config(native_watch(&config.native_hpa_selector))
            .metrics(watches)
            .trim(cached::kept_fields(labels_read))
            .over_budget(cached::leave_out_native),
        ctx,
        settings,
        term,
        true,
        reconcile::reconcile_native,
    );
    futures::future::join(plus, native).await;
}

/// The watch of native HPAs: only those `selector` selects, filtered by the API server.
///
/// An HPA whose labels stop matching leaves the watch as a deletion (the API server sends
/// `DELETED` for an object that leaves a watch's label selector), so it is released like a
/// deleted one: its memory is dropped, it leaves the cache, and a requeue already scheduled for
/// it finds nothing to evaluate. Nothing is written to it on the way out (the evaluation in
/// flight at that moment, if any, finishes). One that starts matching arrives as an addition.
pub(crate) fn native_watch(selector: &Selector) -> watcher::Config {
    if selector.is_empty() {
        watcher::Config::default()
    } else {
        // The parsed form, printed back: it means the same to the API server (see
        // `plimsoll_core::selector`) and was validated at start.
        watcher::Config::default().labels(&selector.to_string())
    }
}

/// The controller of one autoscaler kind (`native`: the `autoscaling/v2` HPA): `watch`, whose
/// events also clean the per-object memory, and evaluations on changes of spec or annotations,
/// on requeues and on shard takes.
fn controller<K, R, F>(
    // Trimmed: `cached::kept_fields`.
    watch: Watch<K>,
    ctx: &Arc<Context>,
    settings: ControllerSettings,
    term: CancellationToken,
    native: bool,
    reconcile: R,
) -> impl Future<Output = ()> + Send + use<K, R, F>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    R: FnMut(Arc<K>, Arc<Context>) -> F + Send + 'static,
    F: Future<Output = Result<Action>> + Send + 'static,
{
    let cache = ShardCache::<Packed<K>>::new(ctx.shards.count());
    let reader = cache.store();
    let forget = ctx.clone();
    let (routing, shards) = (cache.clone(), ctx.shards.clone());
    let listed = cache.clone();
    let stream = watch
        .events()
        // Cached packed, read back whole by each evaluation (`cached`).
        .try_filter_map(|event| std::future::ready(Ok(cached::pack_event(event))))
        // Only the objects of acting shards reach the store and the controller; the others wait
        // until their shard is taken (`shard_cache`).
        // Whether a shard is acting is asked under the cache's lock (inside `apply`): asked
        // before it, a take synced in between would leave this object parked.
        .try_filter(move |event| {
            std::future::ready(routing.apply(event, &|shard| shards.acting().contains(&shard)))
        })
        .inspect_ok(move |event| on_event(&forget, &listed, event, native))
        .applied_objects()
        .predicate_filter(spec_or_annotations, PredicateConfig::default());
    let taken = taken_over(ctx.clone(), cache);
    let mut reconcile = reconcile;
    Controller::for_stream(stream, reader)
        .with_config(settings)
        .reconcile_on(taken)
        .graceful_shutdown_on(async move { term.cancelled().await })
        .run(
            move |packed: Arc<Packed<K>>, ctx| match packed.unpack() {
                // A panic fails this object's evaluation, not every autoscaler's.
                Ok(obj) => contained(reconcile(Arc::new(obj), ctx))
                    .map(|outcome| outcome.unwrap_or_else(|panicked| Err(panicked.into())))
                    .left_future(),
                Err(e) => std::future::ready(Err(Error::Unpack(e.to_string()))).right_future(),
            },
            reconcile::error_policy,
            ctx.clone(),
        )
        .for_each(|_| std::future::ready(()))
}

/// With `--shards`, the objects of the shards this replica has just taken, once each, so that
/// they are evaluated at once rather than at their next change (an object of another replica's
/// shard is not in the controller's store, so nothing is scheduled for it). Woken by every take,
/// a shard lost and taken back in between included, and once a second to notice shards lost:
/// their objects leave the store, and what was remembered of them goes. Without
/// sharding nothing is sent: the controllers start with the leadership.
fn taken_over<K>(ctx: Arc<Context>, cache: ShardCache<K>) -> impl Stream<Item = ObjectRef<K>> + Send
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let shards = ctx.shards.clone();
    let taken = shards.taken().map(|mut taken| {
        // What was taken before this stream started counts as taken.
        taken.mark_changed();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        (taken, tick, BTreeMap::new())
    });
    futures::stream::unfold(taken, move |state| {
        let (shards, cache, ctx) = (shards.clone(), cache.clone(), ctx.clone());
        async move {
            let (mut taken, mut tick, before) = state?;
            tokio::select! {
                changed = taken.changed() => changed.ok()?,
                _ = tick.tick() => {}
            }
            let acting = shards.acting_takes();
            let synced = cache.sync(&before, &acting);
            for uid in &synced.lost {
                ctx.forget(uid);
            }
            if !synced.lost.is_empty() {
                ctx.shrink();
            }
            Some((
                futures::stream::iter(synced.taken),
                Some((taken, tick, acting)),
            ))
        }
    })
    .flatten()
}

/// Drops the memory of deleted objects (and, after a relist, of objects no longer listed), and
/// remembered writes once the cache shows them.
fn on_event<K>(ctx: &Context, cache: &ShardCache<K>, event: &watcher::Event<K>, native: bool)
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    match event {
        // Only a live event: the reflector has stored it by now. A relist's objects reach the
        // store all at once at `InitDone`; until then the cache still shows the old version, so
        // their entries are left to the object's next evaluation.
        watcher::Event::Apply(obj) => {
            if let Some(uid) = obj.meta().uid.as_deref() {
                ctx.cache_moved(uid, obj.meta().resource_version.as_deref());
            }
        }
        watcher::Event::Delete(obj) => {
            if let Some(uid) = obj.uid() {
                ctx.forget(&uid);
            }
        }
        watcher::Event::InitDone => {
            ctx.retain(&cache.uids(), native);
        }
        watcher::Event::Init | watcher::Event::InitApply(_) => {}
    }
}
