//! The cron-hpa service: runs the jobs of `CronHorizontalPodAutoscaler` objects on time.
//!
//! [`run`] is the service on the `plimsoll_runtime::service` skeleton (admin listener, election
//! on the Lease `plimsoll-cron-hpa`, shutdown after in-flight writes) and runs — while this
//! replica leads — a kube-runtime `Controller` whose reconcile ([`reconcile::reconcile`]) evaluates each object's schedules with the core
//! evaluator and requeues the object at the exact instant of its next firing. There is no
//! second scheduler: the object's status is the only state, so adding, changing or deleting a
//! job takes effect at the next reconcile (the watch event), and a restart or a leader change
//! resumes from the status (`--missed-job-grace` decides what still runs).
//!
//! `replay` ([`replay`]) runs the same evaluator offline over a scenario file.

pub mod cli;
pub mod compiled;
pub mod context;
pub mod error;
pub mod metrics;
pub mod reconcile;
pub mod replay;
pub mod target;

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt as _, StreamExt};
use jiff::SignedDuration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams};
use kube::runtime::controller::{self, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use plimsoll_core::api::cron::CronHorizontalPodAutoscaler;
use plimsoll_core::schedule::effect::is_mode_annotation;
use plimsoll_runtime::admin::{Liveness, Readiness};
use plimsoll_runtime::api_message::api_message;
use plimsoll_runtime::contained::contained;
use plimsoll_runtime::service::Service;
use plimsoll_runtime::watch::{Watch, WatchMetrics};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

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
    /// `--min-job-interval`: the least time between two runs of one object's jobs together;
    /// zero, no bound.
    pub min_job_interval: Duration,
    /// Leader-election identity; `None` = `$POD_NAME`, else the host name. Tests that run two
    /// instances in one process give each its own.
    pub identity: Option<String>,
}

/// Runs the service until `shutdown` is cancelled: then stops taking work, lets in-flight
/// reconciles finish their writes, releases the Lease and returns `Ok`. Returns an error when
/// the client cannot be built, the admin address cannot be bound, or the leader-election task
/// dies.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<()> {
    // Liveness is ticked by every reconcile and by the idle ticker; a wedged runtime stops both.
    let mut service = Service::new(BINARY, &config.common)
        .identity(config.identity.clone())
        .liveness_window(Duration::from_secs(120))
        .start()
        .await?;
    let metrics = Arc::new(Metrics::register(service.registry()));
    let watches = WatchMetrics::register(service.registry());
    let grace = SignedDuration::try_from(config.missed_job_grace).unwrap_or(SignedDuration::MAX);
    let ctx = Arc::new(
        Context::new(
            service.client.clone(),
            metrics,
            grace,
            service.liveness.clone(),
        )
        .with_min_job_interval(config.min_job_interval.as_secs()),
    );
    let api: Api<CronHorizontalPodAutoscaler> = Api::all(service.client.clone());
    service.spawn(tick(service.liveness.clone()));
    service.spawn(probe(api.clone(), service.readiness.clone()));
    let readiness = service.readiness.clone();
    service
        .run(shutdown, |term| {
            let watch = Watch::new("CronHorizontalPodAutoscaler", api.clone())
                .metrics(&watches)
                .trim(kept_fields);
            control(ctx.clone(), watch, readiness.clone(), term)
        })
        .await
}

/// What the controller keeps of a CronHPA: spec and status whole (the schema bounds the spec;
/// the status is its own), and of the metadata what it reads: the identity (the cache's key,
/// Events, status writes), the generation (a changed spec) and the adjust-hpa-min annotations
/// (the mode). The rest of the metadata is a namespace user's to fill, up to 1.5 MiB an
/// object; cached and remembered (the per-object memory kept the annotations), a namespace's
/// thousand fat CronHPAs would have been gigabytes.
fn kept_fields(cron: &mut CronHorizontalPodAutoscaler) {
    let meta = &mut cron.metadata;
    cron.metadata = ObjectMeta {
        generation: meta.generation,
        annotations: plimsoll_core::cut_down::annotations(meta, is_mode_annotation),
        ..plimsoll_core::cut_down::identity(meta)
    };
}

/// Ticks liveness while idle (reconciles tick it too).
async fn tick(liveness: Liveness) {
    let mut every = tokio::time::interval(Duration::from_secs(10));
    loop {
        every.tick().await;
        liveness.tick();
    }
}

/// A follower is ready once the CronHPA API answers (it has nothing else to sync).
async fn probe(api: Api<CronHorizontalPodAutoscaler>, readiness: Readiness) {
    loop {
        match api.list(&ListParams::default().limit(1)).await {
            Ok(_) => {
                readiness.set_ready(true);
                return;
            }
            Err(e) => debug!(error = %api_message(&e), "CronHPA API not answering yet"),
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// One leadership term: the controller over `watch` runs until `term` is cancelled, then
/// finishes the reconciles in flight.
async fn control(
    ctx: Arc<Context>,
    watch: Watch<CronHorizontalPodAutoscaler>,
    readiness: Readiness,
    term: CancellationToken,
) -> Result<()> {
    // Trust the status the previous leader wrote, not what this replica remembered.
    ctx.forget_all();
    let (store, writer) = reflector::store();
    let controller = Controller::for_stream(
        watch.events().reflect(writer).applied_objects(),
        store.clone(),
    )
    .graceful_shutdown_on(term.cancelled_owned());
    let ready = tokio::spawn(async move {
        if store.wait_until_ready().await.is_ok() {
            readiness.set_ready(true);
        }
    });
    let ctx_for_results = ctx.clone();
    controller
        .run(
            // A panic fails this object's evaluation, not every CronHPA's.
            |cron, ctx| {
                contained(reconcile::reconcile(cron, ctx))
                    .map(|outcome| outcome.unwrap_or_else(|panicked| Err(panicked.into())))
            },
            reconcile::error_policy,
            ctx,
        )
        .for_each(|result| {
            handle_result(&ctx_for_results, result);
            futures::future::ready(())
        })
        .await;
    ready.abort();
    Ok(())
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
        // The watch's own errors are logged and counted by `plimsoll_runtime::watch`; they do
        // not reach the controller.
        Err(e) => warn!(error = %e, "controller error"),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use plimsoll_core::api::cron::{
        ADJUST_HPA_MIN_ANNOTATION, CronHorizontalPodAutoscalerSpec,
        CronHorizontalPodAutoscalerStatus, ScalingJob,
    };
    use plimsoll_core::schedule::effect::{Mode, mode};

    use super::*;

    #[test]
    fn a_fattened_cron_hpa_is_kept_as_the_lean_one() {
        let mut spec = CronHorizontalPodAutoscalerSpec::default();
        spec.scale_target_ref.kind = "Deployment".into();
        spec.scale_target_ref.name = "web".into();
        spec.jobs.push(ScalingJob {
            name: "up".into(),
            schedule: "0 9 * * *".into(),
            target_size: 3,
            run_once: false,
        });
        let mut lean = CronHorizontalPodAutoscaler::new("web", spec);
        lean.metadata.namespace = Some("shop".into());
        lean.metadata.uid = Some("u1".into());
        lean.metadata.resource_version = Some("5".into());
        lean.metadata.generation = Some(2);
        lean.metadata.annotations = Some(BTreeMap::from([(
            ADJUST_HPA_MIN_ANNOTATION.to_owned(),
            "true".to_owned(),
        )]));
        lean.status = Some(CronHorizontalPodAutoscalerStatus {
            scale_up_keep_window: true,
            ..CronHorizontalPodAutoscalerStatus::default()
        });
        let mut fat = lean.clone();
        let meta = &mut fat.metadata;
        meta.annotations
            .get_or_insert_default()
            .insert("blob".into(), "x".repeat(250 << 10));
        meta.labels = Some((0..2_000).map(|i| (format!("l{i}"), "v".into())).collect());
        meta.owner_references = Some(vec![OwnerReference::default(); 2_000]);
        meta.finalizers = Some(vec!["f".repeat(200); 1_000]);
        kept_fields(&mut fat);
        assert_eq!(fat, lean);
        let annotations = fat.metadata.annotations.unwrap_or_default();
        assert_eq!(mode("Deployment", &annotations), Mode::MinReplicas);
    }
}
