//! The vpa-updater service: a drop-in for the upstream VPA updater, reading the same
//! `autoscaling.k8s.io/v1` VerticalPodAutoscaler objects.
//!
//! Every `--updater-interval` the leader runs one loop ([`updater::run_once`]): if the admission
//! webhook's status Lease is fresh, it plans each VPA in mode `Recreate`, `Auto` or
//! `InPlaceOrRecreate` with the pure `plimsoll_core::vertical` decisions and evicts (Eviction
//! API) or resizes (`pods/{name}/resize`) the pods the plan names, within the eviction budget and
//! the rate limiter. `vpa-updater replay` runs the same decisions over a scenario file.
//!
//! [`run`] has no global state and installs no signal handler or tracing subscriber, so tests
//! and `plimsoll-sim demo` can run several services in one process.

pub mod admission_status;
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

use plimsoll_runtime::admin::{self, AdminState, Liveness, Readiness};
use plimsoll_runtime::{CommonArgs, client, leader, shutdown, telemetry};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

pub use error::{Error, Result};

/// The binary name: field manager, Event reporter, Lease `plimsoll-vpa-updater`, metric prefix.
pub const BINARY: &str = "vpa-updater";

/// The service configuration (plain data; see [`cli::Args::config`] for the flags).
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
    /// `--vpa-object-namespace`: only this namespace.
    pub vpa_object_namespace: Option<String>,
    /// `--ignored-vpa-object-namespaces`.
    pub ignored_vpa_object_namespaces: Vec<String>,
}

/// Runs the service until `shutdown` is cancelled: admin listener, leader election and the
/// updater loop. Returns an error when the leader-election task or the admin listener dies.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<()> {
    let client = client::client(&config.common).await?;
    let mut registry = Registry::default();
    let service = telemetry::service_registry(&mut registry, BINARY);
    let metrics = Arc::new(metrics::Metrics::register(service));
    let liveness = Liveness::new(
        config
            .updater_interval
            .saturating_mul(5)
            .max(Duration::from_secs(60)),
    );
    let readiness = Readiness::new();

    let election = leader::start(&client, BINARY, &config.common, shutdown.clone())?;
    election
        .handle
        .register_metrics(telemetry::service_registry(&mut registry, BINARY));
    let router = admin::router(AdminState {
        registry: Arc::new(registry),
        liveness: liveness.clone(),
        readiness: readiness.clone(),
    });
    let listener = tokio::net::TcpListener::bind(config.common.metrics_address)
        .await
        .map_err(|source| plimsoll_runtime::Error::AdminServer {
            address: config.common.metrics_address,
            source,
        })?;
    let mut server = tokio::spawn(admin::serve_on(listener, router, shutdown.clone()));

    let ctx = updater::context(client.clone(), metrics.clone(), &config);
    let settings = updater::Settings::from_config(&config);
    let leader = election.handle.clone();
    let work_token = shutdown.child_token();
    let mut work = tokio::spawn(run_loops(
        ctx,
        settings,
        leader,
        liveness,
        readiness,
        work_token.clone(),
    ));
    let mut lease_task = election.task;

    let outcome = tokio::select! {
        () = shutdown.cancelled() => Ok(()),
        res = &mut lease_task => {
            if shutdown.is_cancelled() { Ok(()) } else {
                tracing::error!(?res, "leader election ended before shutdown");
                Err(Error::LeaderElectionEnded)
            }
        }
        res = &mut server => Err(match res {
            Ok(Ok(())) => Error::Task("admin server stopped".into()),
            Ok(Err(e)) => e.into(),
            Err(e) => Error::Task(e.to_string()),
        }),
        res = &mut work => Err(Error::Task(format!("updater loop ended: {res:?}"))),
    };
    // Stop taking work; the action in flight finishes; then release the Lease.
    work_token.cancel();
    let grace = Duration::from_secs(15);
    let _ = shutdown::with_grace(&shutdown, grace, &mut work).await;
    if outcome.is_err() {
        shutdown.cancel();
    }
    if !lease_task.is_finished() {
        let _ = shutdown::with_grace(&shutdown, grace, &mut lease_task).await;
    }
    if !server.is_finished() {
        let _ = shutdown::with_grace(&shutdown, grace, &mut server).await;
    }
    outcome
}

async fn run_loops(
    ctx: context::Context,
    settings: updater::Settings,
    leader: leader::LeaderHandle,
    liveness: Liveness,
    readiness: Readiness,
    cancel: CancellationToken,
) {
    let mut ticker = tokio::time::interval(settings.interval.max(Duration::from_millis(100)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            () = cancel.cancelled() => return,
        }
        liveness.tick();
        if !leader.is_leader() {
            // A follower is ready to take over: it only needs its client.
            readiness.set_ready(true);
            continue;
        }
        let started = std::time::Instant::now();
        let outcome = match updater::run_once(&ctx, &settings, &cancel).await {
            Ok(report) => {
                readiness.set_ready(true);
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
