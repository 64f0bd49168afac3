//! The vpa-recommender service: a drop-in replacement for the upstream VPA recommender.
//!
//! [`run`] is the service on the `plimsoll_runtime::service` skeleton (admin listener, Lease
//! election on `plimsoll-vpa-recommender`, shutdown), with reflectors for VPAs, pods (cut down to
//! what the loop reads, [`controller::pod_fields`]), eviction Events, and the ReplicaSets and Jobs
//! a pod's owner walk climbs through (cut down to their owner references; not waited for: until
//! they have listed, an unseen owner ends the walk, as `plimsoll_core::vertical::controlling`
//! says), and — while leading — the loop: restore state (checkpoints or Prometheus, retried with
//! back-off until it succeeds; nothing is written before), then every `--recommender-interval` one
//! [`controller::run_once`], and every `--checkpoints-gc-interval` one
//! [`controller::garbage_collect`]. Cancelling the token lets the loop in flight finish its writes,
//! then releases the Lease and returns `Ok`.
//!
//! With `--shards N` (N > 1) there is no single leader: every replica runs the loop over the
//! VPAs of the shards whose Leases it holds (`plimsoll_runtime::leader::shards`), and the
//! restore is per shard, when a shard is acquired ([`coverage`] has the rules). A single leader
//! is the one-shard case of the same loop.

pub mod cli;
pub mod controller;
pub mod coverage;
pub mod error;
pub mod history;
pub mod metrics;
pub mod nodes;
pub mod plot;
pub mod recommender;
pub mod replay;

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus;
use plimsoll_core::cut_down;
use plimsoll_core::vertical::aggregate::AggregationsConfig;
use plimsoll_core::vertical::estimator::EstimatorConfig;
use plimsoll_core::vertical::joint_sizing::JointConfig;
use plimsoll_core::vertical::node_fit::NodeFitConfig;
use plimsoll_core::vertical::object_fields::{
    hpa_fields, hpa_plus_fields, leave_out_hpa, leave_out_hpa_plus, leave_out_vpa, vpa_fields,
};
use plimsoll_runtime::admin::{Liveness, Readiness};
use plimsoll_runtime::events::Events;
use plimsoll_runtime::kinds::KindResolver;
use plimsoll_runtime::leader::shards::ShardGuard;
use plimsoll_runtime::metrics_api::ApiMetrics;
use plimsoll_runtime::owners::owner_fields;
use plimsoll_runtime::prometheus::PrometheusClient;
use plimsoll_runtime::repeats::Repeats;
use plimsoll_runtime::scale::ScaleClient;
use plimsoll_runtime::service::{Service, Started};
use plimsoll_runtime::target_index::TargetIndex;
use plimsoll_runtime::watch::{Watch, WatchMetrics};
use plimsoll_runtime::watched_scales::WatchedScales;
use plimsoll_runtime::{CommonArgs, leader};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use error::{Error, Result};

use crate::controller::Context;
use crate::recommender::{Recommender, VpaKey};

/// The binary name: Lease `plimsoll-vpa-recommender`, metrics `plimsoll_vpa_recommender_`.
pub const BINARY: &str = "vpa-recommender";

/// `--node-headroom-percent` by default: the share of a node's allocatable DaemonSets and
/// system pods usually take.
pub const DEFAULT_NODE_HEADROOM_PERCENT: u8 = 10;

/// Everything `run` needs (plain data; tests build it without clap).
#[derive(Clone, Debug)]
pub struct Config {
    /// Client, admin listener, logging and leader election.
    pub common: CommonArgs,
    /// `--recommender-interval` (default 1 m).
    pub interval: Duration,
    /// `--checkpoints-timeout` (default 1 m).
    pub checkpoints_timeout: Duration,
    /// `--min-checkpoints` (default 10).
    pub min_checkpoints: usize,
    /// `--checkpoints-gc-interval` (default 10 m).
    pub gc_interval: Duration,
    /// `--recommender-name` (default `plimsoll`).
    pub recommender_name: String,
    /// `--default`: also answer VPAs that name no recommender.
    pub answer_default: bool,
    /// `--vpa-object-namespace`: watch only this namespace.
    pub namespace: Option<String>,
    /// `--storage=prometheus` settings; `None` restores from checkpoints.
    pub prometheus: Option<history::PrometheusConfig>,
    /// Model settings.
    pub aggregations: AggregationsConfig,
    /// Estimator settings.
    pub estimator: EstimatorConfig,
    /// Joint mode: `--joint-cycle`, `--joint-window`, `--joint-bucket`.
    pub joint: JointConfig,
    /// `--joint-persist-interval` (default 15 m).
    pub joint_persist_interval: Duration,
    /// `--shards`: 1 runs one leader on `plimsoll-vpa-recommender`; more splits the VPAs among
    /// the replicas by shard Leases.
    pub shards: u32,
    /// Leader-election identity; `None` = `$POD_NAME` or the host name. Tests running several
    /// instances in one process set distinct ones.
    pub identity: Option<String>,
    /// `--per-vpa-config`: VPAs' container policies may override the aggregation flags
    /// (AEP-8026).
    pub per_vpa_config: bool,
    /// `--cap-to-largest-node` with `--node-headroom-percent`; `None` does not read Nodes.
    pub node_fit: Option<NodeFitConfig>,
}

fn api<K>(client: &kube::Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    <K as kube::Resource>::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Runs the recommender until `shutdown` is cancelled: the loop's writes in flight finish, then
/// the Lease is released and `run` returns `Ok`.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<()> {
    let mut service = Service::new(BINARY, &config.common)
        .identity(config.identity.clone())
        .shards(config.shards)
        .liveness_window((config.interval * 5).max(Duration::from_secs(60)))
        .start()
        .await?;
    let metrics = Arc::new(metrics::Metrics::register(service.registry()));
    let client = service.client.clone();
    // A history server that can never be read (an https address with no CA to verify it
    // against) stops the service here, naming the flag, rather than at every restore attempt.
    if let Some(prometheus) = &config.prometheus {
        PrometheusClient::new(&prometheus.server, Some(client.clone()))?;
    }
    let namespace = config.namespace.clone();
    let watches = WatchMetrics::register(service.registry());
    let ns = namespace.as_deref();
    let vpas = reflected(
        &mut service,
        Watch::new("VerticalPodAutoscaler", api(&client, ns))
            .metrics(&watches)
            .trim(vpa_fields)
            .over_budget(leave_out_vpa),
    );
    let pods = reflected(
        &mut service,
        Watch::new("Pod", api(&client, ns))
            .metrics(&watches)
            .trim(controller::pod_fields)
            .over_budget(plimsoll_core::pod_fields::leave_out_over_budget),
    );
    // Only eviction Events matter (OOM kills under memory pressure); the server filters them.
    let events = reflected(
        &mut service,
        Watch::new("Event", api(&client, ns))
            .metrics(&watches)
            .config(watcher::Config::default().fields("reason=Evicted"))
            .trim(plimsoll_core::vertical::oom::event_fields),
    );
    let (replica_sets, jobs) = owner_stores(&mut service, &client, ns, &watches);

    let (autoscalers, hpas) = autoscaler_indexes(&mut service, &client, ns, &watches);

    // Every loop resolves each VPA's target to its pods' selector: from memory for the
    // built-in workloads, instead of one GET per VPA per loop.
    let workloads = WatchedScales::new();
    service.spawn(
        workloads
            .clone()
            .watch(client.clone(), namespace.clone(), watches.clone()),
    );
    let nodes = nodes::Nodes::watched(config.node_fit.is_some(), &mut service, &client, &watches);
    let kinds = KindResolver::new(client.clone());
    let ctx = Arc::new(Context {
        client: client.clone(),
        recorder: Events::new(client.clone(), BINARY),
        scale: ScaleClient::with_resolver(client.clone(), kinds.clone(), controller::FIELD_MANAGER)
            .with_watched(workloads),
        usage: Arc::new(ApiMetrics::new(client.clone(), kinds)),
        metrics,
        vpas,
        pods,
        events,
        replica_sets,
        jobs,
        autoscalers,
        hpas,
        nodes,
        shards: service.shards.clone(),
        config,
        logged: Repeats::default(),
    });
    let (synced_tx, synced) = watch::channel(None);
    service.spawn(report_sync(
        ctx.clone(),
        service.readiness.clone(),
        synced_tx,
    ));
    service.spawn(while_following(
        service.leader.clone(),
        service.liveness.clone(),
        ctx.config.interval.min(Duration::from_secs(5)),
    ));
    let liveness = service.liveness.clone();
    service
        .run(shutdown, |term| {
            recommend_while_leading(ctx.clone(), synced.clone(), liveness.clone(), term)
        })
        .await
}

/// The horizontal autoscalers (HPA+, HPA) by their target, for conflict detection and joint
/// sizing. A cluster without the HPA+ CRD has none; its watch retries with backoff.
fn autoscaler_indexes(
    service: &mut Started,
    client: &kube::Client,
    namespace: Option<&str>,
    watches: &WatchMetrics,
) -> (
    TargetIndex<HorizontalPodAutoscalerPlus>,
    TargetIndex<HorizontalPodAutoscaler>,
) {
    // One whose spec was left out (past the bound) is in neither check.
    let autoscalers = TargetIndex::new(|p: &HorizontalPodAutoscalerPlus| {
        let t = &p.spec.scale_target_ref;
        cut_down::spec_left_out(&p.metadata)
            .is_none()
            .then(|| (t.kind.clone(), t.name.clone()))
    });
    let index = autoscalers.clone();
    service.spawn(
        Watch::new("HorizontalPodAutoscalerPlus", api(client, namespace))
            .metrics(watches)
            .trim(hpa_plus_fields)
            .over_budget(leave_out_hpa_plus)
            .run(move |e| index.apply(&e)),
    );
    let hpas = TargetIndex::new(|h: &HorizontalPodAutoscaler| {
        let t = &h.spec.as_ref()?.scale_target_ref;
        cut_down::spec_left_out(&h.metadata)
            .is_none()
            .then(|| (t.kind.clone(), t.name.clone()))
    });
    let index = hpas.clone();
    service.spawn(
        Watch::new("HorizontalPodAutoscaler", api(client, namespace))
            .metrics(watches)
            .trim(hpa_fields)
            .over_budget(leave_out_hpa)
            .run(move |e| index.apply(&e)),
    );
    (autoscalers, hpas)
}

/// The stores the owner walk (which VPA controls a pod) climbs through from pods: every
/// ReplicaSet and Job. Tenants write them, so only what the walk reads is kept.
fn owner_stores(
    service: &mut Started,
    client: &kube::Client,
    namespace: Option<&str>,
    watches: &WatchMetrics,
) -> (Store<ReplicaSet>, Store<Job>) {
    let replica_sets = Watch::new("ReplicaSet", api(client, namespace)).metrics(watches);
    let jobs = Watch::new("Job", api(client, namespace)).metrics(watches);
    (
        reflected(service, replica_sets.trim(owner_fields)),
        reflected(service, jobs.trim(owner_fields)),
    )
}

/// A reflector store kept by `watch` (on the service's helpers).
fn reflected<K>(service: &mut Started, watch: Watch<K>) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    service.spawn(watch.reflect(writer));
    store
}

/// Whether the VPA and pod caches have listed once: `None` until then, `Some(false)` when a
/// watch stopped before it ever did.
type Synced = watch::Receiver<Option<bool>>;

/// Reports when the VPA and pod caches have synced: on `synced` and as readiness. The only
/// waiter on the stores (a kube `Store` wakes one waiter), so the leading loop asks `synced`.
async fn report_sync(ctx: Arc<Context>, readiness: Readiness, synced: watch::Sender<Option<bool>>) {
    let ok = tokio::try_join!(ctx.vpas.wait_until_ready(), ctx.pods.wait_until_ready()).is_ok();
    readiness.set_ready(ok);
    synced.send_replace(Some(ok));
}

/// A follower stays alive while it waits for the Lease (a leader's liveness is ticked by its
/// loop).
async fn while_following(leader: leader::LeaderHandle, liveness: Liveness, period: Duration) {
    loop {
        if !leader.is_leader() {
            liveness.tick();
        }
        tokio::time::sleep(period).await;
    }
}

/// How often the loop looks for shards it acquired or must give up between two loops.
const SHARD_POLL: Duration = Duration::from_secs(1);

/// One leadership term (with `--shards`, the whole run): follow the shards this replica acts
/// on — restore the history of a shard's VPAs when it is acquired (retried with back-off; its
/// VPAs are not recommended for until then), hand a shard's VPAs over when it is given up — and
/// run one [`controller::run_once`] over the covered shards every `--recommender-interval`, a
/// garbage collection every `--checkpoints-gc-interval`, until `term` is cancelled. Then every
/// covered shard is handed over (a loop in flight finishes its writes first).
async fn recommend_while_leading(
    ctx: Arc<Context>,
    mut synced: Synced,
    liveness: Liveness,
    term: CancellationToken,
) -> Result<()> {
    tokio::select! {
        () = term.cancelled() => return Ok(()),
        r = synced.wait_for(Option::is_some) => {
            if !matches!(r.as_deref(), Ok(Some(true))) {
                return Err(Error::WatchStopped("VerticalPodAutoscaler/Pod"));
            }
        }
    }
    liveness.tick();
    let mut state = Term::new(&ctx);
    let mut next_loop = Instant::now();
    let mut last_gc = Instant::now();
    loop {
        state.follow_shards(&ctx, &liveness, &term).await;
        if Instant::now() >= next_loop {
            let started = Instant::now();
            let covered = state.coverage.shards();
            let at = controller::run_once(&ctx, &mut state.recommender, &covered).await;
            state.last_loop = Some(at);
            liveness.tick();
            if last_gc.elapsed() >= ctx.config.gc_interval {
                last_gc = Instant::now();
                let gc = controller::garbage_collect(&ctx, &mut state.recommender, &covered);
                if let Err(e) = gc.await {
                    ctx.metrics.error(e.metric_label());
                    tracing::warn!(error = %e, "garbage collection failed");
                }
            }
            next_loop = started + ctx.config.interval;
        }
        let wake = next_loop.min(Instant::now() + SHARD_POLL);
        tokio::select! {
            () = term.cancelled() => break,
            () = tokio::time::sleep_until(wake.into()) => {}
        }
    }
    // The successors restore from what this writes (and the joint totals from their
    // annotations).
    let covered = state.coverage.shards();
    state.hand_over(&ctx, &covered).await;
    Ok(())
}

/// The loop's state across loops: the model, the shards it covers, the restore back-off.
struct Term {
    recommender: Recommender,
    coverage: coverage::Coverage<ShardGuard>,
    /// Restores failed in a row, and when the next may be tried.
    failures: u32,
    retry_at: Instant,
    /// When the last loop started (its checkpoints were written at that time).
    last_loop: Option<jiff::Timestamp>,
}

impl Term {
    fn new(ctx: &Context) -> Self {
        let mut recommender = Recommender::new(ctx.config.aggregations, ctx.config.estimator);
        recommender.set_joint(ctx.config.joint);
        recommender.set_per_vpa(ctx.config.per_vpa_config);
        recommender.set_node_fit(ctx.config.node_fit);
        Self {
            recommender,
            coverage: coverage::Coverage::default(),
            failures: 0,
            retry_at: Instant::now(),
            last_loop: None,
        }
    }

    /// Brings the coverage in line with the shards acting now: hands over those no longer
    /// acting, then restores and covers those newly acting (when the back-off allows).
    async fn follow_shards(
        &mut self,
        ctx: &Context,
        liveness: &Liveness,
        term: &CancellationToken,
    ) {
        let changes = self.coverage.changes(&ctx.shards.acting());
        if !changes.released.is_empty() {
            self.hand_over(ctx, &changes.released).await;
        }
        if !changes.acquired.is_empty() && Instant::now() >= self.retry_at {
            self.acquire(ctx, liveness, term, &changes.acquired).await;
        }
    }

    /// Writes what the successors of `shards` restore from, drops their VPAs, and lets the
    /// runtime release them (their guards are dropped last).
    async fn hand_over(&mut self, ctx: &Context, shards: &BTreeSet<u32>) {
        let vpas = coverage::in_shards(&ctx.served_vpas(), |uid| ctx.shards.shard_of(uid), shards);
        controller::hand_over(ctx, &mut self.recommender, &vpas, self.last_loop).await;
        for shard in shards {
            drop(self.coverage.release(*shard));
        }
        tracing::info!(?shards, "shards handed over");
    }

    /// Restores the VPAs of `shards` (those still acting) and covers them; on failure, nothing
    /// is covered and the next attempt waits [`restore_backoff`]. The loop must not cover a
    /// shard on an empty model after a failed restore: its first checkpoint write would replace
    /// the stored history with one loop's samples, and its recommendations would come from that
    /// reset history.
    async fn acquire(
        &mut self,
        ctx: &Context,
        liveness: &Liveness,
        term: &CancellationToken,
        shards: &BTreeSet<u32>,
    ) {
        let guards: Vec<(u32, ShardGuard)> = shards
            .iter()
            .filter_map(|s| Some((*s, ctx.shards.enter_shard(*s)?)))
            .collect();
        let entered: BTreeSet<u32> = guards.iter().map(|(s, _)| *s).collect();
        let keys: HashSet<VpaKey> =
            coverage::in_shards(&ctx.served_vpas(), |uid| ctx.shards.shard_of(uid), &entered)
                .iter()
                .map(|v| recommender::key_of(v))
                .collect();
        // Whatever the model held for them is older than their checkpoints.
        self.recommender.forget(|k| keys.contains(k));
        let attempt = tokio::select! {
            () = term.cancelled() => return,
            r = controller::restore(ctx, &mut self.recommender, &keys) => r,
        };
        // Restoring is this replica's work: it is alive while it retries.
        liveness.tick();
        match attempt {
            Ok(_) => {
                self.failures = 0;
                for (shard, guard) in guards {
                    self.coverage.cover(shard, guard);
                }
                tracing::info!(shards = ?entered, vpas = keys.len(), "shards restored and covered");
            }
            Err(e) => {
                self.failures = self.failures.saturating_add(1);
                ctx.metrics.error(e.metric_label());
                ctx.metrics.restore_failures.inc();
                let wait = restore_backoff(self.failures);
                self.retry_at = Instant::now() + wait;
                tracing::warn!(
                    error = %e,
                    detail = e.detail(),
                    failures = self.failures,
                    retry_in = ?wait,
                    shards = ?entered,
                    "cannot restore history; not recommending for these shards until it is restored"
                );
            }
        }
    }
}

/// First wait before retrying a failed restore; it doubles up to [`RESTORE_BACKOFF_MAX`].
const RESTORE_BACKOFF_START: Duration = Duration::from_secs(1);

/// Longest wait between two restore attempts.
const RESTORE_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The wait after the `failures`-th failed restore in a row (1-based): 1 s, 2 s, 4 s, … 30 s.
fn restore_backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    RESTORE_BACKOFF_START
        .saturating_mul(1 << doublings)
        .min(RESTORE_BACKOFF_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restore_backoff_doubles_from_one_second_up_to_thirty() {
        let waits: Vec<u64> = (1..=7).map(|n| restore_backoff(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(restore_backoff(0), Duration::from_secs(1));
        assert_eq!(restore_backoff(u32::MAX), Duration::from_secs(30));
    }
}
