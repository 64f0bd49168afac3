//! One reconcile of a `CronHorizontalPodAutoscaler`: evaluate its schedules at `now`, run the
//! due jobs in order, report skipped and missed firings, write the status, and requeue at the
//! exact instant of the next firing.
//!
//! The schedule logic is [`plimsoll_core::schedule::plan::evaluate`]; the writes a job makes are
//! [`plimsoll_core::schedule::effect::decide`]; where evaluation resumes, which jobs are
//! submitted and when to wake are [`plimsoll_core::schedule::resume`]'s; the conditions and
//! their messages are [`plimsoll_core::schedule::history`]'s. This module gathers their input,
//! does the I/O and applies their output. A spec that does not validate gets `status.invalidSpec` and a Warning Event and
//! waits for a change; it never makes the controller retry in a loop, and it leaves the job
//! conditions (the jobs' history) as they are ([`plimsoll_core::schedule::history`]).

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use plimsoll_core::api::cron::{
    CronHorizontalPodAutoscaler, CronHorizontalPodAutoscalerSpec,
    CronHorizontalPodAutoscalerStatus, JobCondition, JobState,
};
use plimsoll_core::printable;
use plimsoll_core::schedule::effect::decide;
use plimsoll_core::schedule::history::{self, Readiness};
use plimsoll_core::schedule::plan::{Evaluation, evaluate};
use plimsoll_core::schedule::resume::{self, Memory, unchanged_until};
use plimsoll_core::schedule::retry::{Retry, retry_at};
use tracing::{Span, debug, field, info, instrument, warn};

use crate::context::{Context, FIELD_MANAGER};
use crate::error::{Error, Result};
use crate::metrics::RunResult;
use crate::target;

/// Reconciles one object (see the module docs).
#[instrument(skip(cron, ctx), fields(namespace = field::Empty, name = field::Empty))]
pub async fn reconcile(
    cron: Arc<CronHorizontalPodAutoscaler>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile.start();
    ctx.liveness.tick();
    let namespace = cron.namespace().unwrap_or_default();
    let name = cron.name_any();
    Span::current().record("namespace", namespace.as_str());
    Span::current().record("name", name.as_str());
    let uid = cron.uid().unwrap_or_default();
    let now = Timestamp::now();
    let memory = ctx.recall(&namespace, &name, &uid);
    if let Some(at) = memory.as_ref().and_then(|m| unchanged_until(m, &cron, now)) {
        return Ok(Action::requeue(until(at)));
    }
    let spec = &cron.spec;

    let compiled = match ctx.compiled.get(&cron) {
        Ok(compiled) => compiled,
        Err(problems) => {
            return invalid(&cron, &ctx, &namespace, &name, &uid, memory, &problems).await;
        }
    };

    // The history survives an invalid edit untouched, so after its fix every unchanged job
    // resumes from its own condition (a runOnce job that ran stays done).
    let known = resume::known_conditions(&uid, spec, cron.status.as_ref(), memory.as_ref());
    let progress = history::progress(spec, &known, now);
    let last_evaluated = resume::last_evaluated(memory.as_ref(), &known, now);
    let evaluation = evaluate(
        &compiled,
        &progress,
        last_evaluated,
        now,
        ctx.missed_job_grace,
    );

    let mut conditions: Vec<Option<JobCondition>> = known.clone();
    let keep_window = memory
        .as_ref()
        .and_then(|m| m.written.as_ref())
        .or(cron.status.as_ref())
        .is_some_and(|s| s.scale_up_keep_window);

    let mut events = Vec::new();
    let failures = memory.as_ref().map_or(0, |m| m.failures);
    let ran = run_due(
        &ctx,
        &cron,
        &uid,
        &evaluation,
        Pass {
            keep_window,
            failures,
        },
        &mut conditions,
        &mut events,
    )
    .await;
    let keep_window = ran.keep_window;
    report_missed(&ctx, &cron, &uid, &evaluation, &mut conditions, &mut events);

    let conditions = submit_new(&uid, spec, &evaluation, now, conditions);

    let jobs: Vec<String> = spec.jobs.iter().map(|j| j.name.clone()).collect();
    publish_next_runs(&ctx, &namespace, &name, &jobs, &evaluation, memory.as_ref());

    // Compare with what this replica last wrote: the cache may not have caught up with it.
    let written = memory.as_ref().and_then(|m| m.written.clone());
    let current = written.clone().or_else(|| cron.status.clone());
    let next_run = evaluation.next_runs.iter().flatten().min().copied();
    let previous_ready = current.as_ref().and_then(|s| s.ready.as_ref());
    let readiness = readiness(&ctx, &cron, ran.target, previous_ready, next_run).await;
    let desired = CronHorizontalPodAutoscalerStatus {
        conditions: conditions.clone(),
        ready: Some(history::ready_condition(
            previous_ready,
            &readiness,
            cron.metadata.generation,
            now,
        )),
        scale_up_keep_window: keep_window,
        job_count: Some(i32::try_from(spec.jobs.len()).unwrap_or(i32::MAX)),
        next_run: next_run.map(Time),
        observed_generation: cron.metadata.generation,
        invalid_spec: None,
    };
    let resumed = resume::resume(ran.retry, evaluation.next_wake, now, failures);
    let next_wake = resume::recheck(resumed.next_wake, &readiness, now);
    // Remember before writing: the runs happened whether or not the status write succeeds.
    ctx.remember(
        &namespace,
        &name,
        Memory {
            uid: uid.clone(),
            last_evaluated: Some(resumed.last_evaluated),
            conditions,
            jobs,
            written,
            generation: cron.metadata.generation,
            annotations: cron.metadata.annotations.clone(),
            next_wake,
            failures: resumed.failures,
        },
    );
    persist(&ctx, &cron, current.as_ref(), desired, events).await?;

    Ok(match next_wake {
        Some(at) => Action::requeue(until(at)),
        None => Action::await_change(),
    })
}

/// Whether the target resolves, for the `Ready` condition: what this pass's runs showed (one
/// that succeeded resolved it; else the last definite failure), or, when no job ran, one read
/// of the target. A transient error leaves a `Ready` object ready: one failed read of an
/// overloaded API server is no reason to flip the condition.
async fn readiness(
    ctx: &Context,
    cron: &CronHorizontalPodAutoscaler,
    ran: Option<Result<(), String>>,
    previous: Option<&plimsoll_core::api::cron::ReadyCondition>,
    next_run: Option<Timestamp>,
) -> Readiness {
    let resolved = match ran {
        Some(outcome) => outcome,
        None => match target::observe(ctx, &cron.namespace().unwrap_or_default(), cron).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_transient() && previous.is_some_and(|p| p.status) => Ok(()),
            Err(e) => Err(e.to_string()),
        },
    };
    match resolved {
        Ok(()) => Readiness::Scheduled { next_run },
        Err(error) => Readiness::TargetUnresolved(error),
    }
}

/// The conditions with every new or changed job `Submitted` now ([`resume::submit_new`]),
/// each submission logged.
fn submit_new(
    uid: &str,
    spec: &CronHorizontalPodAutoscalerSpec,
    evaluation: &Evaluation,
    now: Timestamp,
    mut conditions: Vec<Option<JobCondition>>,
) -> Vec<JobCondition> {
    for index in resume::submit_new(uid, spec, &evaluation.next_runs, now, &mut conditions) {
        info!(job = %spec.jobs[index].name, "job submitted");
    }
    conditions.into_iter().flatten().collect()
}

/// Writes the status when it differs from `current`, then publishes the Events (the status
/// first: it is what keeps a restart from running a job twice). A failed write leaves the
/// object to be evaluated on the next reconcile, whatever its next firing.
async fn persist(
    ctx: &Context,
    cron: &CronHorizontalPodAutoscaler,
    current: Option<&CronHorizontalPodAutoscalerStatus>,
    desired: CronHorizontalPodAutoscalerStatus,
    events: Vec<PendingEvent>,
) -> Result<()> {
    let namespace = cron.namespace().unwrap_or_default();
    let name = cron.name_any();
    let written = match history::changed(current, desired) {
        Some(new_status) => write_status(ctx, &namespace, &name, &new_status)
            .await
            .map(|()| ctx.mark_written(&namespace, &name, new_status)),
        None => Ok(()),
    };
    if written.is_err() {
        // The error policy requeues soon; that reconcile must write the status rather than
        // sleep until the next firing.
        ctx.wake_early(&namespace, &name);
    }
    let regarding = cron.object_ref(&());
    for event in events {
        let type_ = if event.warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        ctx.events
            .publish(&regarding, type_, event.reason, "Scale", event.note)
            .await;
    }
    written
}

/// An Event to publish once the runs and the status write are done (publishing first would
/// delay jobs due at the same instant).
struct PendingEvent {
    warning: bool,
    reason: &'static str,
    note: String,
}

/// Reports firings missed by more than the grace period (and counts skipped ones): a `Failed`
/// condition (unless a later firing of the job just ran), a Warning Event and the `missed`
/// counter per job.
fn report_missed(
    ctx: &Context,
    cron: &CronHorizontalPodAutoscaler,
    uid: &str,
    evaluation: &Evaluation,
    conditions: &mut [Option<JobCondition>],
    events: &mut Vec<PendingEvent>,
) {
    let spec = &cron.spec;
    for missed in &evaluation.missed {
        let job = &spec.jobs[missed.job_index];
        let next = evaluation.next_runs[missed.job_index];
        let message =
            history::missed_message(missed.count, missed.last, ctx.missed_job_grace, next);
        warn!(
            namespace = cron.metadata.namespace.as_deref().unwrap_or_default(),
            name = cron.metadata.name.as_deref().unwrap_or_default(),
            job = %job.name,
            count = missed.count,
            last = %missed.last,
            "missed job runs"
        );
        ctx.metrics.count(RunResult::Missed, missed.count as u64);
        events.push(PendingEvent {
            warning: true,
            reason: "JobMissed",
            note: format!("job {}: {message}", job.name),
        });
        if evaluation
            .due
            .iter()
            .any(|f| f.job_index == missed.job_index)
        {
            continue;
        }
        conditions[missed.job_index] = Some(history::condition(
            uid,
            job,
            JobState::Failed,
            missed.last,
            message,
        ));
    }

    // Debug, not info: a job firing every second on an excluded day, or 99 finished runOnce
    // jobs, would write a line per firing; the metric counts them.
    for skipped in &evaluation.skipped {
        tracing::debug!(
            job = %skipped.job,
            at = %skipped.at,
            reason = skipped.skipped.map_or("", |r| r.as_str()),
            "job firing skipped"
        );
    }
    ctx.metrics
        .count(RunResult::Skipped, evaluation.skipped.len() as u64);
}

/// What a pass over the due jobs starts from.
#[derive(Clone, Copy)]
struct Pass {
    /// The keep window before the first job.
    keep_window: bool,
    /// Consecutive earlier passes with a transient failure (for the back-off).
    failures: u32,
}

/// What a pass over the due jobs leaves.
struct Ran {
    /// The keep window after the last job.
    keep_window: bool,
    /// The earliest firing that failed transiently and is to run again, if any.
    retry: Option<Retry>,
    /// Whether the runs resolved the target: `None` when no run settled (none was due, or each
    /// is to be retried), `Ok` when one succeeded, else the last failure.
    target: Option<Result<(), String>>,
}

/// Runs the due jobs in order. A job whose write fails transiently keeps its condition and is
/// retried (see [`plimsoll_core::schedule::retry`]) while its firing is within the missed-job
/// grace; any other failure, or one past the grace, marks it `Failed`.
async fn run_due(
    ctx: &Context,
    cron: &CronHorizontalPodAutoscaler,
    uid: &str,
    evaluation: &Evaluation,
    pass: Pass,
    conditions: &mut [Option<JobCondition>],
    events: &mut Vec<PendingEvent>,
) -> Ran {
    let Pass {
        mut keep_window,
        failures,
    } = pass;
    let mut retry: Option<Retry> = None;
    let mut target: Option<Result<(), String>> = None;
    let spec = &cron.spec;
    let namespace = cron.namespace().unwrap_or_default();
    // Due jobs run in order (instant, then spec order); each sees the keep window the
    // previous one left.
    for firing in &evaluation.due {
        let job = &spec.jobs[firing.job_index];
        let next = evaluation.next_runs[firing.job_index];
        let started = Timestamp::now().duration_since(firing.at);
        ctx.metrics.observe_start_delay(started.as_secs_f64());
        let outcome = run_job(ctx, &namespace, cron, firing.target_size, keep_window).await;
        let late = Timestamp::now().duration_since(firing.at);
        ctx.metrics.observe_lateness(late.as_secs_f64());
        let condition = match outcome {
            Ok((reason, keep)) => {
                keep_window = keep;
                target = Some(Ok(()));
                info!(
                    job = %job.name,
                    at = %firing.at,
                    late_ms = late.as_millis(),
                    decision = %reason,
                    keep_window,
                    "job ran"
                );
                ctx.metrics.count(RunResult::Succeeded, 1);
                // The note leaves out the run's time (the condition has it): a job that fires
                // often with the same outcome is then one Event whose series counts the runs,
                // not an Event write per run.
                events.push(PendingEvent {
                    warning: false,
                    reason: "JobSucceeded",
                    note: format!("job {}: {reason}", job.name),
                });
                let message = history::succeeded_message(&reason, firing.at, late, next);
                history::condition(uid, job, JobState::Succeed, firing.at, message)
            }
            Err(error) => {
                let again = error
                    .is_transient()
                    .then(|| {
                        retry_at(
                            firing.at,
                            Timestamp::now(),
                            failures.saturating_add(1),
                            ctx.missed_job_grace,
                        )
                    })
                    .flatten();
                if let Some(at) = again {
                    let object = (namespace.as_str(), cron.name_any());
                    log_failure(ctx, &object, &job.name, &error.to_string(), || {
                        format!("job failed at {}; retrying at {at}", firing.at)
                    });
                    ctx.metrics.reconcile.failure(error.metric_label());
                    let this = Retry {
                        firing: firing.at,
                        at,
                    };
                    retry = Some(retry.map_or(this, |r| r.earliest(this)));
                    continue;
                }
                let object = (namespace.as_str(), cron.name_any());
                log_failure(ctx, &object, &job.name, &error.to_string(), || {
                    format!("job failed at {}", firing.at)
                });
                if !target.as_ref().is_some_and(Result::is_ok) {
                    target = Some(Err(error.to_string()));
                }
                ctx.metrics.count(RunResult::Failed, 1);
                ctx.metrics.reconcile.failure(error.metric_label());
                events.push(PendingEvent {
                    warning: true,
                    reason: "JobFailed",
                    note: format!("job {}: run failed: {error}", job.name),
                });
                let message = history::failed_message(&error.to_string(), firing.at, next);
                history::condition(uid, job, JobState::Failed, firing.at, message)
            }
        };
        conditions[firing.job_index] = Some(condition);
    }

    Ran {
        keep_window,
        retry,
        target,
    }
}

/// Next-run series: set for the current jobs, removed for jobs that went away.
fn publish_next_runs(
    ctx: &Context,
    namespace: &str,
    name: &str,
    jobs: &[String],
    evaluation: &Evaluation,
    memory: Option<&Memory>,
) {
    for (job, next) in jobs.iter().zip(&evaluation.next_runs) {
        ctx.metrics
            .set_next_run(namespace, name, job, next.map(Timestamp::as_second));
    }
    for gone in memory
        .iter()
        .flat_map(|m| m.jobs.iter())
        .filter(|j| !jobs.contains(j))
    {
        ctx.metrics.set_next_run(namespace, name, gone, None);
    }
}

/// The time from now until `at` (zero when it has passed): the requeue delay that wakes the
/// controller exactly at the next firing.
fn until(at: Timestamp) -> Duration {
    let left = at.duration_since(Timestamp::now());
    Duration::try_from(left.max(SignedDuration::ZERO)).unwrap_or(Duration::ZERO)
}

/// Runs one job: observes the target, decides, writes. Returns the decision's reason and the
/// keep window after it.
async fn run_job(
    ctx: &Context,
    namespace: &str,
    cron: &CronHorizontalPodAutoscaler,
    target_size: i32,
    keep_window: bool,
) -> Result<(String, bool)> {
    let resolved = target::observe(ctx, namespace, cron).await?;
    let effect = decide(resolved.mode, target_size, resolved.observed, keep_window);
    if effect.keep_window && !keep_window {
        // Open the keep window before scaling up, so hpa-plus never sees the raised size
        // without the window that protects it.
        let patch = serde_json::json!({ "status": { "scaleUpKeepWindow": true } });
        patch_status(ctx, namespace, &cron.name_any(), &patch).await?;
    }
    target::apply(ctx, namespace, &resolved, &effect).await?;
    Ok((effect.reason, effect.keep_window))
}

/// A spec that does not validate: `status.invalidSpec` names the problems, one Warning Event
/// when the status changes, no job runs, and no requeue until the object changes. The job
/// conditions stay exactly as they were (the freshest known: this replica's memory, else the
/// cache), and so does the memory of where evaluation resumes: once the spec is fixed, a firing
/// that fell meanwhile is treated like one during an outage (run when it is within
/// `--missed-job-grace`, else reported as missed).
async fn invalid(
    cron: &CronHorizontalPodAutoscaler,
    ctx: &Context,
    namespace: &str,
    name: &str,
    uid: &str,
    memory: Option<Memory>,
    problems: &str,
) -> Result<Action> {
    // The problems quote what the tenant wrote (a hundred job names and schedules): escaped
    // and cut once, for the log, the status and the Event alike.
    let problems = &printable::message(problems, printable::MAX_CONDITION_MESSAGE_BYTES);
    // Named here, not only by the reconcile's span: that is at info, and a `--log-filter` at
    // warn would leave a warning naming nothing.
    warn!(namespace, name, problems, "invalid spec");
    for job in memory.iter().flat_map(|m| m.jobs.iter()) {
        ctx.metrics.set_next_run(namespace, name, job, None);
    }
    let current = memory
        .as_ref()
        .and_then(|m| m.written.clone())
        .or_else(|| cron.status.clone());
    let desired = history::invalid_status(
        current.as_ref(),
        resume::freshest_conditions(cron.status.as_ref(), memory.as_ref()),
        cron.spec.jobs.len(),
        cron.metadata.generation,
        problems,
        Timestamp::now(),
    );
    // Keep what evaluation resumes from; nothing is due until the spec changes.
    let kept = memory.unwrap_or_else(|| Memory {
        uid: uid.to_owned(),
        ..Memory::default()
    });
    ctx.remember(
        namespace,
        name,
        Memory {
            jobs: Vec::new(),
            generation: cron.metadata.generation,
            annotations: cron.metadata.annotations.clone(),
            next_wake: None,
            ..kept
        },
    );
    if let Some(new_status) = history::changed(current.as_ref(), desired) {
        ctx.events
            .warning(
                &cron.object_ref(&()),
                "InvalidSpec",
                "Validate",
                format!("invalid spec: {problems}"),
            )
            .await;
        write_status(ctx, namespace, name, &new_status).await?;
        ctx.mark_written(namespace, name, new_status);
    }
    Ok(Action::await_change())
}

async fn write_status(
    ctx: &Context,
    namespace: &str,
    name: &str,
    status: &CronHorizontalPodAutoscalerStatus,
) -> Result<()> {
    let mut body = serde_json::json!({ "status": status });
    if let Some(fields) = body.get_mut("status").and_then(|s| s.as_object_mut()) {
        // A merge patch keeps a field it leaves out: clear a problem that was fixed, and a next
        // run there is no more (an invalid spec, every runOnce job done).
        if status.invalid_spec.is_none() {
            fields.insert("invalidSpec".to_owned(), serde_json::Value::Null);
        }
        if status.next_run.is_none() {
            fields.insert("nextRun".to_owned(), serde_json::Value::Null);
        }
    }
    patch_status(ctx, namespace, name, &body).await
}

/// A merge patch on `/status` under the field manager `cron-hpa`.
async fn patch_status(
    ctx: &Context,
    namespace: &str,
    name: &str,
    patch: &serde_json::Value,
) -> Result<()> {
    let api: Api<CronHorizontalPodAutoscaler> = Api::namespaced(ctx.client.clone(), namespace);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    api.patch_status(name, &params, &Patch::Merge(patch))
        .await
        .map_err(|e| Error::kube(format!("patch status of {namespace}/{name}"), e))?;
    Ok(())
}

/// Logs a failed run of `job` of the CronHPA `object` (namespace, name): at warn once per job
/// and error per repeat period (`plimsoll_runtime::repeats`), at debug in between. A job firing
/// every second on a target that is not there fails every second, and a namespace user can
/// have hundreds.
fn log_failure(
    ctx: &Context,
    (namespace, name): &(&str, String),
    job: &str,
    error: &str,
    what: impl FnOnce() -> String,
) {
    let what = what();
    let key = format!("{job}: {error}");
    if let Some(quiet) = ctx.repeats.first(&format!("{namespace}/{name}"), &key) {
        warn!(
            namespace,
            name,
            job,
            error,
            repeats_not_logged = quiet,
            "{what}"
        );
    } else {
        debug!(namespace, name, job, error, "{what}");
    }
}

/// Backs off after a failed reconcile: logs it, counts it, retries in a few seconds.
///
/// Logged like a failed job (`log_failure`): at warn once per object and message and again per
/// repeat period, at debug in between. A status write that keeps failing is retried every 5 s
/// for as long as it fails, for each such object: a warning every 5 s otherwise.
#[allow(
    clippy::needless_pass_by_value,
    reason = "the signature kube-runtime's Controller::run expects"
)]
pub fn error_policy(
    cron: Arc<CronHorizontalPodAutoscaler>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action {
    ctx.metrics.reconcile.failure(error.metric_label());
    let namespace = cron.namespace().unwrap_or_default();
    let name = cron.name_any();
    let error = error.to_string();
    if let Some(quiet) = ctx.repeats.first(&format!("{namespace}/{name}"), &error) {
        warn!(
            namespace,
            name,
            error,
            repeats_not_logged = quiet,
            "reconcile failed; retrying"
        );
    } else {
        debug!(namespace, name, error, "reconcile failed; retrying");
    }
    Action::requeue(Duration::from_secs(5))
}
