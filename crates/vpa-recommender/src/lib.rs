//! The vpa-recommender service: a drop-in replacement for the upstream VPA recommender.
//!
//! [`run`] starts the admin listener (`/metrics`, `/healthz`, `/readyz`), Lease leader election
//! (`plimsoll-vpa-recommender`), reflectors for VPAs and pods, and — while leading — the loop:
//! restore state (checkpoints or Prometheus), then every `--recommender-interval` one
//! [`controller::run_once`], and every `--checkpoints-gc-interval` one
//! [`controller::garbage_collect`]. Cancelling the token stops the loop after the current
//! write, releases the Lease and returns `Ok`.

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
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_core::vertical::aggregate::AggregationsConfig;
use plimsoll_core::vertical::estimator::EstimatorConfig;
use plimsoll_runtime::admin::{self, AdminState, Liveness, Readiness};
use plimsoll_runtime::events::Events;
use plimsoll_runtime::kinds::KindResolver;
use plimsoll_runtime::metrics_api::ApiMetrics;
use plimsoll_runtime::scale::ScaleClient;
use plimsoll_runtime::{CommonArgs, client, leader, shutdown, telemetry};
use prometheus_client::registry::Registry;
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

/// Runs the recommender until `shutdown` is cancelled.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<()> {
    let client = client::client(&config.common).await?;
    let mut registry = Registry::default();
    let service = telemetry::service_registry(&mut registry, BINARY);
    let metrics = Arc::new(metrics::Metrics::register(service));
    let election = leader::start(&client, BINARY, &config.common, shutdown.clone())?;
    let leader = election.handle.clone();
    leader.register_metrics(service);
    let liveness = Liveness::new((config.interval * 5).max(Duration::from_secs(60)));
    let readiness = Readiness::new();
    let router = admin::router(AdminState {
        registry: Arc::new(registry),
        liveness: liveness.clone(),
        readiness: readiness.clone(),
    });
    let server = tokio::spawn(admin::serve(
        config.common.metrics_address,
        router,
        shutdown.clone(),
    ));

    let namespace = config.namespace.clone();
    let (vpas, vpa_writer) = reflector::store();
    let vpa_watch = reflector(
        vpa_writer,
        watcher(
            api::<VerticalPodAutoscaler>(&client, namespace.as_deref()),
            watcher::Config::default(),
        )
        .default_backoff(),
    )
    .applied_objects()
    .for_each(|_| futures::future::ready(()));
    let (pods, pod_writer) = reflector::store();
    let pod_watch = reflector(
        pod_writer,
        watcher(
            api::<Pod>(&client, namespace.as_deref()),
            watcher::Config::default(),
        )
        .default_backoff(),
    )
    .applied_objects()
    .for_each(|_| futures::future::ready(()));
    // Only eviction Events matter (OOM kills under memory pressure); the server filters them.
    let (events, event_writer) = reflector::store();
    let event_watch = reflector(
        event_writer,
        watcher(
            api::<Event>(&client, namespace.as_deref()),
            watcher::Config::default().fields("reason=Evicted"),
        )
        .default_backoff(),
    )
    .applied_objects()
    .for_each(|_| futures::future::ready(()));
    let watches = tokio::spawn(async move {
        futures::join!(vpa_watch, pod_watch, event_watch);
    });

    let kinds = KindResolver::new(client.clone());
    let ctx = Context {
        client: client.clone(),
        recorder: Events::new(client.clone(), BINARY),
        scale: ScaleClient::with_resolver(client.clone(), kinds.clone(), controller::FIELD_MANAGER),
        usage: Arc::new(ApiMetrics::new(client.clone(), kinds)),
        metrics,
        vpas,
        pods,
        events,
        config,
    };
    let mut election_task = election.task;
    let mut election_done = false;
    let result = tokio::select! {
        r = main_loop(&ctx, &leader, &liveness, &readiness, &shutdown) => r,
        _ = &mut election_task => {
            election_done = true;
            // The election task ends by itself only on shutdown; otherwise it died.
            if shutdown.is_cancelled() { Ok(()) } else { Err(Error::LeaderLost) }
        }
    };
    watches.abort();
    if !election_done {
        if result.is_err() {
            election_task.abort();
        } else {
            // Release the Lease within the pod's grace period.
            shutdown::with_grace(&shutdown, Duration::from_secs(15), election_task).await;
        }
    }
    if let Ok(Err(e)) = server.await {
        return Err(e.into());
    }
    result
}

async fn main_loop(
    ctx: &Context,
    leader: &leader::LeaderHandle,
    liveness: &Liveness,
    readiness: &Readiness,
    shutdown: &CancellationToken,
) -> Result<()> {
    tokio::select! {
        () = shutdown.cancelled() => return Ok(()),
        r = async { tokio::try_join!(ctx.vpas.wait_until_ready(), ctx.pods.wait_until_ready()) } => {
            if r.is_err() {
                return Err(Error::WatchStopped("VerticalPodAutoscaler/Pod"));
            }
        }
    }
    readiness.set_ready(true);
    liveness.tick();
    loop {
        // Followers stay alive and ready; they only wait for the Lease.
        while !leader.is_leader() {
            liveness.tick();
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep(ctx.config.interval.min(Duration::from_secs(5))) => {}
            }
        }
        let mut recommender = Recommender::new(ctx.config.aggregations, ctx.config.estimator);
        if let Err(e) = controller::restore(ctx, &mut recommender).await {
            ctx.metrics.error(e.metric_label());
            tracing::warn!(error = %e, "cannot restore history; starting empty");
        }
        let mut last_gc = Instant::now();
        while leader.is_leader() {
            let started = Instant::now();
            controller::run_once(ctx, &mut recommender).await;
            liveness.tick();
            if last_gc.elapsed() >= ctx.config.gc_interval {
                last_gc = Instant::now();
                if let Err(e) = controller::garbage_collect(ctx, &mut recommender).await {
                    ctx.metrics.error(e.metric_label());
                    tracing::warn!(error = %e, "garbage collection failed");
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = leader.lost() => {}
                () = tokio::time::sleep(controller::until_next(started, ctx.config.interval)) => {}
            }
        }
        tracing::info!("lost the Lease; the loop waits");
    }
}
