//! The cron-hpa service: runs the jobs of `CronHorizontalPodAutoscaler` objects on time.
//!
//! [`run`] starts the admin listener (`/metrics`, `/healthz`, `/readyz`), leader election on
//! the Lease `plimsoll-cron-hpa`, and — while this replica leads — a kube-runtime `Controller`
//! whose reconcile ([`reconcile::reconcile`]) evaluates each object's schedules with the core
//! evaluator and requeues the object at the exact instant of its next firing. There is no
//! second scheduler: the object's status is the only state, so adding, changing or deleting a
//! job takes effect at the next reconcile (the watch event), and a restart or a leader change
//! resumes from the status (`--missed-job-grace` decides what still runs).
//!
//! `replay` ([`replay`]) runs the same evaluator offline over a scenario file.

pub mod cli;
pub mod context;
pub mod error;
pub mod metrics;
pub mod reconcile;
pub mod replay;
pub mod status;
pub mod target;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::SignedDuration;
use kube::api::{Api, ListParams};
use kube::runtime::controller::{self, Controller};
use kube::runtime::watcher;
use plimsoll_core::api::cron::CronHorizontalPodAutoscaler;
use plimsoll_runtime::admin::{self, AdminState, Liveness, Readiness};
use plimsoll_runtime::leader::{self, LeaderConfig, LeaderElection, LeaderHandle};
use plimsoll_runtime::telemetry::service_registry;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

pub use error::{Error, Result};
/// Re-exported so tests and embedders can build a [`Config`] without naming the runtime crate.
pub use plimsoll_runtime::{CommonArgs, LogFormat};

use context::Context;
use metrics::Metrics;

/// The binary name: Lease `plimsoll-cron-hpa`, metric prefix `plimsoll_cron_hpa_`, field manager.
pub const BINARY: &str = "cron-hpa";

/// Default of `--missed-job-grace`: 5 minutes.
pub const DEFAULT_MISSED_JOB_GRACE: Duration = Duration::from_secs(300);

/// Everything [`run`] needs (plain data; tests build it without clap).
#[derive(Clone, Debug)]
pub struct Config {
    /// The flags every service shares (kubeconfig, metrics address, leader election, logs).
    pub common: CommonArgs,
    /// A firing that passed less than this long ago when the controller (re)starts or takes
    /// over still runs, once; older ones are reported as missed. Default 5 minutes.
    pub missed_job_grace: Duration,
    /// Leader-election identity; `None` = `$POD_NAME`, else the host name. Tests that run two
    /// instances in one process give each its own.
    pub identity: Option<String>,
}

/// Runs the service until `shutdown` is cancelled: then stops taking work, lets in-flight
/// reconciles finish their writes, releases the Lease and returns `Ok`. Returns an error when
/// the client cannot be built, the admin address cannot be bound, or the leader-election task
/// dies.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<()> {
    let client = plimsoll_runtime::client::client(&config.common).await?;
    let mut registry = Registry::default();
    let metrics = Arc::new(Metrics::register(service_registry(&mut registry, BINARY)));
    // Liveness is ticked by every reconcile and by the idle loop below; a wedged runtime stops both.
    let liveness = Liveness::new(Duration::from_secs(120));
    let readiness = Readiness::new();
    // Everything this function starts stops on `stop`; it is also cancelled when the Lease dies.
    let stop = shutdown.child_token();
    let listener = tokio::net::TcpListener::bind(config.common.metrics_address)
        .await
        .map_err(|source| plimsoll_runtime::Error::AdminServer {
            address: config.common.metrics_address,
            source,
        })?;
    let admin_state = AdminState {
        registry: Arc::new(registry),
        liveness: liveness.clone(),
        readiness: readiness.clone(),
    };
    let admin_task = tokio::spawn(admin::serve_on(
        listener,
        admin::router(admin_state),
        stop.clone(),
    ));

    // The election outlives the controller on shutdown: the Lease is released only after
    // in-flight writes finished.
    let election_token = CancellationToken::new();
    let election = start_election(&client, &config, election_token.clone())?;
    let grace = SignedDuration::try_from(config.missed_job_grace).unwrap_or(SignedDuration::MAX);
    let ctx = Arc::new(Context::new(
        client.clone(),
        metrics,
        grace,
        liveness.clone(),
    ));

    let ticker = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(10));
            loop {
                tokio::select! {
                    _ = every.tick() => liveness.tick(),
                    () = stop.cancelled() => break,
                }
            }
        })
    };
    let api: Api<CronHorizontalPodAutoscaler> = Api::all(client);
    let work = control(ctx, api, election.handle.clone(), readiness, stop.clone());
    let mut lease_task = election.task;
    tokio::pin!(work);
    // Before shutdown neither may end: the controller loop runs until `stop`, the election
    // until `election_token`. Either ending first means the election died.
    let work_done = tokio::select! {
        () = &mut work => true,
        _ = &mut lease_task => false,
    };
    let lease_died = !stop.is_cancelled();
    if lease_died {
        warn!("leader election stopped unexpectedly; shutting down");
    }
    stop.cancel();
    if !work_done {
        work.await;
    }
    election_token.cancel();
    if work_done {
        // Still running (the select did not complete it): wait for the Lease release.
        let _ = lease_task.await;
    }
    let _ = ticker.await;
    match admin_task.await {
        Ok(Err(e)) => warn!(error = %e, "admin server failed"),
        Err(e) => warn!(error = %e, "admin server task failed"),
        Ok(Ok(())) => {}
    }
    if lease_died {
        return Err(Error::LeaderElection);
    }
    info!("stopped");
    Ok(())
}

/// Starts leader election as the flags say, with [`Config::identity`] when given.
fn start_election(
    client: &kube::Client,
    config: &Config,
    token: CancellationToken,
) -> Result<LeaderElection> {
    if !config.common.leader_elect {
        return Ok(leader::start(client, BINARY, &config.common, token)?);
    }
    let mut settings = LeaderConfig::from_args(BINARY, &config.common, client.default_namespace())?;
    if let Some(identity) = &config.identity {
        settings.identity.clone_from(identity);
    }
    Ok(leader::spawn(client.clone(), settings, token))
}

/// Runs the controller during each leadership term until `stop` is cancelled.
async fn control(
    ctx: Arc<Context>,
    api: Api<CronHorizontalPodAutoscaler>,
    leader: LeaderHandle,
    readiness: Readiness,
    stop: CancellationToken,
) {
    // A follower is ready once the CronHPA API answers (it has nothing else to sync).
    let probe = tokio::spawn({
        let api = api.clone();
        let readiness = readiness.clone();
        let stop = stop.clone();
        async move {
            while !stop.is_cancelled() {
                match api.list(&ListParams::default().limit(1)).await {
                    Ok(_) => {
                        readiness.set_ready(true);
                        break;
                    }
                    Err(e) => debug!(error = %e, "CronHPA API not answering yet"),
                }
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(2)) => {}
                    () = stop.cancelled() => break,
                }
            }
        }
    });
    loop {
        let leading = tokio::select! {
            leading = leader.leading() => leading,
            () = stop.cancelled() => false,
        };
        if !leading || stop.is_cancelled() {
            break;
        }
        info!("leading: starting the controller");
        // Trust the status the previous leader wrote, not what this replica remembered.
        ctx.forget_all();
        let term = stop.child_token();
        let watchdog = tokio::spawn({
            let term = term.clone();
            let leader = leader.clone();
            async move {
                tokio::select! {
                    () = leader.lost() => term.cancel(),
                    () = term.cancelled() => {}
                }
            }
        });
        let controller = Controller::new(api.clone(), watcher::Config::default())
            .graceful_shutdown_on(term.clone().cancelled_owned());
        let store = controller.store();
        let ready = tokio::spawn({
            let readiness = readiness.clone();
            async move {
                if store.wait_until_ready().await.is_ok() {
                    readiness.set_ready(true);
                }
            }
        });
        let ctx_for_results = ctx.clone();
        controller
            .run(reconcile::reconcile, reconcile::error_policy, ctx.clone())
            .for_each(|result| {
                handle_result(&ctx_for_results, result);
                futures::future::ready(())
            })
            .await;
        term.cancel();
        let _ = watchdog.await;
        ready.abort();
        if stop.is_cancelled() {
            break;
        }
        warn!("lost the lease; pausing until re-elected");
    }
    probe.abort();
}

type ReconcileResult = std::result::Result<
    (
        kube::runtime::reflector::ObjectRef<CronHorizontalPodAutoscaler>,
        kube::runtime::controller::Action,
    ),
    controller::Error<Error, watcher::Error>,
>;

/// Cleans up after deleted objects (their pending requeue finds nothing: the jobs are
/// cancelled) and logs controller-level errors.
fn handle_result(ctx: &Context, result: ReconcileResult) {
    match result {
        // Reconcile errors are logged and counted by the error policy.
        Ok(_) | Err(controller::Error::ReconcilerFailed(..)) => {}
        Err(controller::Error::ObjectNotFound(object)) => {
            let namespace = object.namespace.clone().unwrap_or_default();
            debug!(namespace, name = %object.name, "object deleted; its jobs are cancelled");
            if let Some(memory) = ctx.forget(&namespace, &object.name) {
                for job in &memory.jobs {
                    ctx.metrics
                        .set_next_run(&namespace, &object.name, job, None);
                }
            }
        }
        Err(e) => warn!(error = %e, "controller error"),
    }
}
