//! The vpa-recommender service: a drop-in replacement for the upstream VPA recommender.
//!
//! [`run`] is the service on the `plimsoll_runtime::service` skeleton (admin listener, Lease
//! election on `plimsoll-vpa-recommender`, shutdown), with reflectors for VPAs, pods and
//! eviction Events, and — while leading — the loop: restore state (checkpoints or Prometheus,
//! retried with back-off until it succeeds; nothing is written before), then every `--recommender-interval` one [`controller::run_once`], and every
//! `--checkpoints-gc-interval` one [`controller::garbage_collect`]. Cancelling the token lets
//! the loop in flight finish its writes, then releases the Lease and returns `Ok`.

pub mod cli;
pub mod controller;
pub mod error;
pub mod history;
pub mod metrics;
pub mod plot;
pub mod recommender;
pub mod replay;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus;
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_core::vertical::aggregate::AggregationsConfig;
use plimsoll_core::vertical::estimator::EstimatorConfig;
use plimsoll_core::vertical::joint_sizing::JointConfig;
use plimsoll_runtime::admin::{Liveness, Readiness};
use plimsoll_runtime::events::Events;
use plimsoll_runtime::kinds::KindResolver;
use plimsoll_runtime::metrics_api::ApiMetrics;
use plimsoll_runtime::scale::ScaleClient;
use plimsoll_runtime::service::Service;
use plimsoll_runtime::target_index::TargetIndex;
use plimsoll_runtime::{CommonArgs, leader};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use error::{Error, Result};

use crate::controller::Context;
use crate::recommender::Recommender;

/// The binary name: Lease `plimsoll-vpa-recommender`, metrics `plimsoll_vpa_recommender_`.
pub const BINARY: &str = "vpa-recommender";

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
        .liveness_window((config.interval * 5).max(Duration::from_secs(60)))
        .start()
        .await?;
    let metrics = Arc::new(metrics::Metrics::register(service.registry()));
    let client = service.client.clone();
    let namespace = config.namespace.clone();
    let (vpas, vpa_writer) = reflector::store();
    service.spawn(watch(
        vpa_writer,
        api::<VerticalPodAutoscaler>(&client, namespace.as_deref()),
        watcher::Config::default(),
    ));
    let (pods, pod_writer) = reflector::store();
    service.spawn(watch(
        pod_writer,
        api::<Pod>(&client, namespace.as_deref()),
        watcher::Config::default(),
    ));
    // Only eviction Events matter (OOM kills under memory pressure); the server filters them.
    let (events, event_writer) = reflector::store();
    service.spawn(watch(
        event_writer,
        api::<Event>(&client, namespace.as_deref()),
        watcher::Config::default().fields("reason=Evicted"),
    ));

    let autoscalers = TargetIndex::new(|p: &HorizontalPodAutoscalerPlus| {
        let t = &p.spec.scale_target_ref;
        Some((t.kind.clone(), t.name.clone()))
    });
    service.spawn(watch_index(
        autoscalers.clone(),
        api::<HorizontalPodAutoscalerPlus>(&client, namespace.as_deref()),
    ));
    let hpas = TargetIndex::new(|h: &HorizontalPodAutoscaler| {
        let t = &h.spec.as_ref()?.scale_target_ref;
        Some((t.kind.clone(), t.name.clone()))
    });
    service.spawn(watch_index(
        hpas.clone(),
        api::<HorizontalPodAutoscaler>(&client, namespace.as_deref()),
    ));

    let kinds = KindResolver::new(client.clone());
    let ctx = Arc::new(Context {
        client: client.clone(),
        recorder: Events::new(client.clone(), BINARY),
        scale: ScaleClient::with_resolver(client.clone(), kinds.clone(), controller::FIELD_MANAGER),
        usage: Arc::new(ApiMetrics::new(client.clone(), kinds)),
        metrics,
        vpas,
        pods,
        events,
        autoscalers,
        hpas,
        config,
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

/// Keeps a reflector store current.
async fn watch<K>(writer: reflector::store::Writer<K>, api: Api<K>, config: watcher::Config)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    reflector(writer, watcher(api, config).default_backoff())
        .applied_objects()
        .for_each(|_| futures::future::ready(()))
        .await;
}

/// Keeps a [`TargetIndex`] of horizontal autoscalers current, for conflict detection. A cluster
/// without the HPA+ CRD only logs the watch's errors (and retries with backoff).
async fn watch_index<K>(index: TargetIndex<K>, api: Api<K>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    while let Some(next) = stream.next().await {
        match next {
            Ok(event) => index.apply(&event),
            Err(e) => tracing::debug!(error = %e, "autoscaler watch error"),
        }
    }
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

/// One leadership term: restore state (checkpoints or Prometheus, retried until it succeeds),
/// then one
/// [`controller::run_once`] every `--recommender-interval` and a garbage collection every
/// `--checkpoints-gc-interval`, until `term` is cancelled. A loop in flight finishes its writes.
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
    let Some(mut recommender) = restore_until_done(&ctx, &liveness, &term).await else {
        return Ok(());
    };
    let mut last_gc = Instant::now();
    loop {
        let started = Instant::now();
        controller::run_once(&ctx, &mut recommender).await;
        liveness.tick();
        if last_gc.elapsed() >= ctx.config.gc_interval {
            last_gc = Instant::now();
            if let Err(e) = controller::garbage_collect(&ctx, &mut recommender).await {
                ctx.metrics.error(e.metric_label());
                tracing::warn!(error = %e, "garbage collection failed");
            }
        }
        tokio::select! {
            () = term.cancelled() => break,
            () = tokio::time::sleep(controller::until_next(started, ctx.config.interval)) => {}
        }
    }
    // The next leader restores the joint VPAs' total usage from their annotations.
    controller::persist_totals(&ctx, &mut recommender, std::time::Duration::ZERO).await;
    Ok(())
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

/// Restores the model, retrying with back-off until it succeeds; `None` when `term` ends first.
///
/// The loop must not start on an empty model after a failed restore: its first checkpoint
/// write would replace the stored history with one loop's samples, and its recommendations would
/// come from that reset history. So no recommendation and no checkpoint is written by this term
/// until a restore has succeeded. Each attempt starts from a fresh model, so a failure halfway
/// cannot leave a partial one behind.
async fn restore_until_done(
    ctx: &Context,
    liveness: &Liveness,
    term: &CancellationToken,
) -> Option<Recommender> {
    let mut failures = 0u32;
    loop {
        let mut recommender = Recommender::new(ctx.config.aggregations, ctx.config.estimator);
        recommender.set_joint(ctx.config.joint);
        let attempt = tokio::select! {
            () = term.cancelled() => return None,
            r = controller::restore(ctx, &mut recommender) => r,
        };
        // Retrying is this term's work: the replica is alive while it waits.
        liveness.tick();
        let Err(e) = attempt else {
            return Some(recommender);
        };
        failures = failures.saturating_add(1);
        ctx.metrics.error(e.metric_label());
        ctx.metrics.restore_failures.inc();
        let wait = restore_backoff(failures);
        tracing::warn!(
            error = %e,
            failures,
            retry_in = ?wait,
            "cannot restore history; not recommending until it is restored"
        );
        tokio::select! {
            () = term.cancelled() => return None,
            () = tokio::time::sleep(wait) => {}
        }
    }
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
