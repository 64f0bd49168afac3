//! The vpa-updater service: a drop-in for the upstream VPA updater, reading the same
//! `autoscaling.k8s.io/v1` VerticalPodAutoscaler objects.
//!
//! Every `--updater-interval` the leader runs one loop ([`updater::run_once`]): if the admission
//! webhook's status Lease is fresh, it plans each VPA in mode `Recreate`, `Auto` or
//! `InPlaceOrRecreate` with the pure `plimsoll_core::vertical` decisions and evicts (Eviction
//! API) or resizes (`pods/{name}/resize`) the pods the plan names, within the eviction budget and
//! the rate limiter. `vpa-updater replay` runs the same decisions over a scenario file.
//!
//! It reads the cluster from watches ([`cache`]), which every replica keeps from the start, so a
//! follower that takes over acts at once; a replica is ready once every watch has listed.
//!
//! [`run`] is the service on the `plimsoll_runtime::service` skeleton (admin listener, election
//! on `plimsoll-vpa-updater`, shutdown after the action in flight). It has no global state and installs no signal handler or tracing subscriber, so tests
//! and `plimsoll-sim demo` can run several services in one process.

pub mod admission_status;
pub mod cache;
pub mod cli;
pub mod context;
pub mod error;
pub mod inventory;
pub mod metrics;
pub mod rate_limit;
pub mod replay;
pub mod updater;

use std::sync::Arc;
use std::time::Duration;

use plimsoll_runtime::admin::{Liveness, Readiness};
use plimsoll_runtime::service::Service;
use plimsoll_runtime::{CommonArgs, client, leader};
use tokio_util::sync::CancellationToken;

pub use error::{Error, Result};

/// The binary name: field manager, Event reporter, Lease `plimsoll-vpa-updater`, metric prefix.
pub const BINARY: &str = "vpa-updater";

/// The service configuration (plain data; see [`cli::Args::into_config`] for the flags).
#[derive(Clone, Debug)]
pub struct Config {
    /// Client, admin listener, logging and leader-election flags.
    pub common: CommonArgs,
    /// Time between loops (default 1 min); also one loop's time budget.
    pub updater_interval: Duration,
    /// `--min-replicas` (default 2).
    pub min_replicas: u32,
    /// `--eviction-tolerance` (default 0.5).
    pub eviction_tolerance: f64,
    /// `--eviction-rate-limit` in pods per second; ≤ 0 disables the limiter (default -1).
    pub eviction_rate_limit: f64,
    /// `--eviction-rate-burst` (default 1).
    pub eviction_rate_burst: u32,
    /// `--pod-update-threshold`: minimum resourceDiff inside the range (default 0.1).
    pub pod_update_threshold: f64,
    /// `--in-recommendation-bounds-eviction-lifetime-threshold` (default 12 h).
    pub pod_lifetime_update_threshold: Duration,
    /// `--evict-after-oom-threshold` (default 10 min).
    pub evict_after_oom_threshold: Duration,
    /// `--use-admission-controller-status` (default true).
    pub use_admission_controller_status: bool,
    /// Namespace of the webhook status Lease (default `$NAMESPACE`, else `kube-system`).
    pub admission_controller_status_namespace: String,
    /// How recently the status Lease must have been renewed (upstream's 1 min; not a flag, so
    /// that the contract with the webhook stays fixed; tests shorten it).
    pub admission_status_timeout: Duration,
    /// The namespaces whose VPAs and pods the updater acts on (`--vpa-object-namespace`,
    /// `--ignored-vpa-object-namespaces`; by default all but kube-system and its own).
    pub scope: plimsoll_core::vertical::scope::NamespaceScope,
}

/// Runs the service until `shutdown` is cancelled: admin listener, leader election and, while
/// leading, the updater loop. On shutdown the action in flight finishes before the Lease is
/// released. Returns an error when the leader-election task dies.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<()> {
    let period = config.updater_interval.max(Duration::from_millis(100));
    let mut service = Service::new(BINARY, &config.common)
        .liveness_window(
            config
                .updater_interval
                .saturating_mul(5)
                .max(Duration::from_secs(60)),
        )
        .start()
        .await?;
    let metrics = Arc::new(metrics::Metrics::register(service.registry()));
    let (ctx, watches) = updater::context(
        service.client.clone(),
        write_client(&config.common).await?,
        metrics,
        &config,
    );
    let ctx = Arc::new(ctx);
    watches.register_metrics(service.registry());
    service.spawn(watches.run());
    service.spawn(report_sync(ctx.cache.clone(), service.readiness.clone()));
    let settings = Arc::new(updater::Settings::from_config(&config));
    service.spawn(while_following(
        service.leader.clone(),
        ctx.cache.clone(),
        service.liveness.clone(),
        period,
    ));
    let liveness = service.liveness.clone();
    service
        .run(shutdown, |term| {
            update_while_leading(ctx.clone(), settings.clone(), liveness.clone(), term)
        })
        .await
}

/// Readiness: every watch has listed once.
async fn report_sync(cache: cache::Cache, readiness: Readiness) {
    cache.synced().await;
    tracing::info!(pods = cache.pod_count(), "caches synced");
    readiness.set_ready(true);
}

/// Evictions and resizes go through a client that does not retry 429: a PodDisruptionBudget's
/// refusal is an answer for this loop, not a transient error (kube's default client retries
/// 429 up to 15 times with backoff up to 1000 s).
async fn write_client(common: &CommonArgs) -> Result<kube::Client> {
    let mut write_config = client::config(common).await?;
    write_config.default_retry = false;
    // Under --kube-api-qps like every client, with a bucket of its own.
    let metrics = plimsoll_runtime::rate_limit::ClientMetrics::default();
    Ok(client::from_config(write_config, common, &metrics)?)
}

/// A follower stays alive while it waits for the Lease, and so does a leader while its caches
/// first sync; after that a leader's liveness is ticked by its loop.
async fn while_following(
    leader: leader::LeaderHandle,
    cache: cache::Cache,
    liveness: Liveness,
    period: Duration,
) {
    let mut ticker = tokio::time::interval(period);
    loop {
        ticker.tick().await;
        if !leader.is_leader() || !cache.is_synced() {
            liveness.tick();
        }
    }
}

/// One leadership term: once the caches have synced, a loop now, then one every
/// `--updater-interval`, until `term` is cancelled; a loop stops before its next action when it
/// is.
async fn update_while_leading(
    ctx: Arc<context::Context>,
    settings: Arc<updater::Settings>,
    liveness: Liveness,
    term: CancellationToken,
) -> Result<()> {
    tokio::select! {
        () = ctx.cache.synced() => {}
        () = term.cancelled() => return Ok(()),
    }
    let period = settings.interval.max(Duration::from_millis(100));
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            () = term.cancelled() => return Ok(()),
        }
        liveness.tick();
        let started = std::time::Instant::now();
        let outcome = match updater::run_once(&ctx, &settings, &term).await {
            Ok(report) => {
                tracing::info!(
                    admission_valid = report.admission_valid,
                    vpas = report.vpas,
                    evicted = report.evicted,
                    blocked = report.blocked,
                    resized = report.resized,
                    seconds = started.elapsed().as_secs_f64(),
                    "updater loop done"
                );
                if report.admission_valid {
                    "completed"
                } else {
                    "admission_unhealthy"
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, kind = e.metric_label(), "updater loop failed");
                "error"
            }
        };
        ctx.metrics
            .finished_loop(outcome, started.elapsed().as_secs_f64());
        liveness.tick();
    }
}
