//! The hpa-plus service: Plimsoll's horizontal autoscaler.
//!
//! [`run`] starts, and joins:
//! - the admin listener (`/metrics`, `/healthz`, `/readyz`; ready once the pod and CronHPA
//!   caches have synced);
//! - leader election on the `plimsoll-hpa-plus` Lease;
//! - the shared caches: every pod (one watch, indexed by namespace) and every
//!   CronHorizontalPodAutoscaler;
//! - while leading, a kube-runtime `Controller` over HorizontalPodAutoscalerPlus (and, with
//!   `--native-hpa`, one over autoscaling/v2 HorizontalPodAutoscalers) with `--workers`
//!   concurrent reconciles. Each object is requeued after its own period and reconciled at once
//!   when its spec (or, for native HPAs, its annotations) changes. Losing the lease stops the
//!   controllers at once; a reconcile in flight checks the lease before each write.
//!
//! On shutdown (the token is cancelled) the controllers stop taking work and finish in-flight
//! reconciles, then the Lease is released and `run` returns `Ok`. If the election task dies
//! while running, `run` returns an error.
//!
//! Modules: [`cli`] (flags), [`context`], [`pods`] (pod cache), [`observe`], [`reconcile`],
//! [`status`], [`metrics`], [`error`]; [`replay`] and [`plot`] are the offline `replay`.

pub mod cli;
pub mod context;
pub mod error;
pub mod metrics;
pub mod observe;
pub mod plot;
pub mod pods;
pub mod reconcile;
pub mod replay;
pub mod status;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt as _, StreamExt, TryStreamExt};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::{Config as ControllerSettings, Controller};
use kube::runtime::reflector::{self, Store};
use kube::runtime::utils::PredicateConfig;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use plimsoll_core::api::cron::CronHorizontalPodAutoscaler;
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus;
use plimsoll_core::horizontal::ControllerConfig;
use plimsoll_runtime::CommonArgs;
use plimsoll_runtime::admin::{self, AdminState, Liveness, Readiness};
use plimsoll_runtime::events::Events;
use plimsoll_runtime::kinds::KindResolver;
use plimsoll_runtime::leader::{self, LeaderConfig, LeaderElection};
use plimsoll_runtime::metrics_api::{ApiMetrics, MetricsSource};
use plimsoll_runtime::scale::ScaleClient;
use plimsoll_runtime::telemetry::service_registry;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use error::{Error, Result};

use context::Context;
use metrics::Metrics;
use pods::PodIndex;

/// The binary name: Lease `plimsoll-hpa-plus`, field manager, Event reporter, metric prefix.
pub const BINARY: &str = "hpa-plus";

/// Everything `run` needs; plain data, so tests build it without clap.
#[derive(Clone, Debug)]
pub struct Config {
    /// Shared flags (kubeconfig, admin address, logging, leader election).
    pub common: CommonArgs,
    /// Concurrent reconciles (`--workers`, default 64).
    pub workers: u16,
    /// Also reconcile autoscaling/v2 HPAs (`--native-hpa`).
    pub native_hpa: bool,
    /// Decision settings (tolerance, periods, limit factors, …).
    pub decision: ControllerConfig,
    /// Leader-election identity; `None` = `$POD_NAME` or the host name. Tests running two
    /// instances in one process set distinct identities.
    pub identity: Option<String>,
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

/// [`run`] with [`Hooks`].
#[allow(clippy::too_many_lines)]
pub async fn run_with(config: Config, shutdown: CancellationToken, hooks: Hooks) -> Result<()> {
    let client = plimsoll_runtime::client::client(&config.common).await?;

    let mut registry = Registry::default();
    let metrics = Arc::new(Metrics::register(service_registry(&mut registry, BINARY)));
    let liveness = Liveness::new(Duration::from_secs(60));
    let readiness = Readiness::new();
    let listener = TcpListener::bind(config.common.metrics_address)
        .await
        .map_err(|e| {
            Error::Config(format!(
                "cannot bind {}: {e}",
                config.common.metrics_address
            ))
        })?;
    if let (Some(tx), Ok(addr)) = (hooks.admin_address, listener.local_addr()) {
        let _ = tx.send(addr);
    }
    let router = admin::router(AdminState {
        registry: Arc::new(registry),
        liveness: liveness.clone(),
        readiness: readiness.clone(),
    });
    let admin_task = tokio::spawn(admin::serve_on(listener, router, shutdown.clone()));

    // Leader election: its own token, cancelled after the controllers have stopped, so the
    // Lease is released only when no write can follow.
    let election_token = CancellationToken::new();
    let election = start_election(&client, &config, election_token.clone())?;
    let leader = election.handle.clone();

    // Shared caches.
    let pods = PodIndex::new();
    let pods_task = {
        let pods = pods.clone();
        let api: Api<Pod> = Api::all(client.clone());
        let token = shutdown.clone();
        tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default()).default_backoff();
            let mut stream = std::pin::pin!(stream);
            loop {
                tokio::select! {
                    () = token.cancelled() => break,
                    next = stream.next() => match next {
                        Some(Ok(event)) => pods.apply(&event),
                        Some(Err(e)) => tracing::warn!(error = %e, "pod watch error"),
                        None => break,
                    }
                }
            }
        })
    };
    let (crons, cron_writer) = reflector::store::<CronHorizontalPodAutoscaler>();
    let crons_task = {
        let api: Api<CronHorizontalPodAutoscaler> = Api::all(client.clone());
        let token = shutdown.clone();
        tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .reflect(cron_writer)
                .touched_objects();
            let mut stream = std::pin::pin!(stream);
            loop {
                tokio::select! {
                    () = token.cancelled() => break,
                    next = stream.next() => match next {
                        Some(Ok(_)) => {}
                        Some(Err(e)) => tracing::warn!(error = %e, "CronHorizontalPodAutoscaler watch error"),
                        None => break,
                    }
                }
            }
        })
    };

    let kinds = KindResolver::new(client.clone());
    let scale = ScaleClient::with_resolver(client.clone(), kinds.clone(), BINARY);
    let metrics_source = hooks
        .metrics_source
        .unwrap_or_else(|| Arc::new(ApiMetrics::new(client.clone(), kinds)));
    let ctx = Arc::new(Context::new(
        client.clone(),
        scale,
        metrics_source,
        Events::new(client.clone(), BINARY),
        metrics.clone(),
        pods.clone(),
        crons.clone(),
        config.decision.clone(),
        leader.clone(),
    ));

    // Readiness and liveness, and the queue-depth gauge.
    let housekeeping = {
        let ctx = ctx.clone();
        let token = shutdown.clone();
        let crons = crons.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tokio::select! {
                    () = token.cancelled() => break,
                    _ = tick.tick() => {
                        liveness.tick();
                        readiness.set_ready(ctx.pods.is_synced() && crons.wait_until_ready().now_or_never().is_some());
                        ctx.metrics.queue_depth.set(ctx.overdue(Instant::now()) as i64);
                    }
                }
            }
        })
    };

    // Controllers, one term per leadership.
    let mut election_task = election.task;
    let result = loop {
        tokio::select! {
            () = shutdown.cancelled() => break Ok(()),
            _ = &mut election_task => break Err(Error::LeaderElectionDied),
            leading = leader.leading() => {
                if !leading {
                    break if shutdown.is_cancelled() { Ok(()) } else { Err(Error::LeaderElectionDied) };
                }
            }
        }
        tracing::info!("leading: starting the controllers");
        let term = CancellationToken::new();
        let controllers = run_controllers(&client, &ctx, &config, term.clone());
        let mut controllers = std::pin::pin!(controllers);
        let outcome = tokio::select! {
            () = shutdown.cancelled() => {
                // Graceful: stop taking work, let in-flight reconciles finish (bounded).
                term.cancel();
                let _ = tokio::time::timeout(Duration::from_secs(10), &mut controllers).await;
                Some(Ok(()))
            }
            () = leader.lost() => {
                tracing::warn!("lost the lease: stopping the controllers");
                None
            }
            _ = &mut election_task => Some(Err(Error::LeaderElectionDied)),
            () = &mut controllers => Some(Err(Error::WatchEnded("autoscalers"))),
        };
        if let Some(outcome) = outcome {
            break outcome;
        }
        // Dropping `controllers` here aborts every in-flight reconcile.
    };

    election_token.cancel();
    if !election_task.is_finished() {
        let _ = tokio::time::timeout(Duration::from_secs(10), &mut election_task).await;
    }
    shutdown.cancel();
    let _ = tokio::join!(pods_task, crons_task, housekeeping);
    match admin_task.await {
        Ok(Err(e)) => tracing::warn!(error = %e, "admin listener failed"),
        Err(e) => tracing::warn!(error = %e, "admin listener task failed"),
        Ok(Ok(())) => {}
    }
    result
}

fn start_election(
    client: &Client,
    config: &Config,
    token: CancellationToken,
) -> Result<LeaderElection> {
    if !config.common.leader_elect {
        return Ok(leader::start(client, BINARY, &config.common, token)?);
    }
    let mut lc = LeaderConfig::from_args(BINARY, &config.common, client.default_namespace())?;
    if let Some(identity) = &config.identity {
        lc.identity.clone_from(identity);
    }
    Ok(leader::spawn(client.clone(), lc, token))
}

/// Hash of generation and annotations: what should trigger an immediate reconcile (a status
/// write must not, or every evaluation would trigger the next one).
// kube's `Predicate` is a function returning `Option<u64>`.
#[allow(clippy::unnecessary_wraps)]
fn spec_or_annotations<K: Resource>(obj: &K) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    obj.meta().generation.hash(&mut h);
    obj.meta().annotations.hash(&mut h);
    Some(h.finish())
}

async fn run_controllers(
    client: &Client,
    ctx: &Arc<Context>,
    config: &Config,
    term: CancellationToken,
) {
    let settings = ControllerSettings::default().concurrency(config.workers);
    let plus = {
        let (reader, writer) = reflector::store::<HorizontalPodAutoscalerPlus>();
        let api: Api<HorizontalPodAutoscalerPlus> = Api::all(client.clone());
        let forget = ctx.clone();
        let live = reader.clone();
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .inspect_ok(move |event| on_event(&forget, &live, event, false))
            .applied_objects()
            .predicate_filter(spec_or_annotations, PredicateConfig::default());
        let term = term.clone();
        Controller::for_stream(stream, reader)
            .with_config(settings.clone())
            .graceful_shutdown_on(async move { term.cancelled().await })
            .run(reconcile::reconcile, reconcile::error_policy, ctx.clone())
            .for_each(|_| std::future::ready(()))
    };
    if !config.native_hpa {
        plus.await;
        return;
    }
    let native = {
        let (reader, writer) = reflector::store::<HorizontalPodAutoscaler>();
        let api: Api<HorizontalPodAutoscaler> = Api::all(client.clone());
        let forget = ctx.clone();
        let live = reader.clone();
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .inspect_ok(move |event| on_event(&forget, &live, event, true))
            .applied_objects()
            .predicate_filter(spec_or_annotations, PredicateConfig::default());
        Controller::for_stream(stream, reader)
            .with_config(settings)
            .graceful_shutdown_on(async move { term.cancelled().await })
            .run(
                reconcile::reconcile_native,
                reconcile::error_policy,
                ctx.clone(),
            )
            .for_each(|_| std::future::ready(()))
    };
    futures::future::join(plus, native).await;
}

/// Drops the memory of deleted objects (and, after a relist, of objects no longer listed).
fn on_event<K>(ctx: &Context, store: &Store<K>, event: &watcher::Event<K>, native: bool)
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    match event {
        watcher::Event::Delete(obj) => {
            if let Some(uid) = obj.uid() {
                ctx.forget(&uid);
            }
        }
        watcher::Event::InitDone => {
            let live: HashSet<String> = store.state().iter().filter_map(|o| o.uid()).collect();
            ctx.retain(&live, native);
        }
        _ => {}
    }
}
