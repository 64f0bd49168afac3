//! One evaluation of one autoscaler, its I/O: read the target's scale, observe pods and
//! metrics, call the pure [`evaluate()`] (tuning, the decision, prediction: the same function
//! both replays call), write what it decided (a tuned `minReplicas`, the scale, the status),
//! publish the Events it owes, and requeue after the object's own period.
//!
//! Both kinds go through `run`: an HPA+ as it is, a native `autoscaling/v2` HPA after
//! the conversion in `plimsoll-core` (annotations → additions). Writes happen only while this
//! instance holds the object's shard (without `--shards`: while it leads); a reconcile that
//! loses it mid-way writes nothing more.
//!
//! Failures and what they do:
//! - invalid spec or annotations: `ScalingActive=False` (`InvalidSpec`), Warning Event, requeue
//!   after the period (a fix of the object triggers a reconcile at once);
//! - scale subresource unreadable: `AbleToScale=False` (`FailedGetScale`), Warning Event whose
//!   note is the API server's message (`deployments.apps "web" not found`), error (backoff);
//! - metrics failing: the decision sets `ScalingActive=False` and changes nothing; one Warning
//!   Event per failing metric;
//! - scale write failed: `AbleToScale=False` (`FailedUpdateScale`), Warning Event, error.
//!
//! A failed request reads as the API server's message everywhere a user sees it
//! ([`mod@plimsoll_runtime::api_message`]), and every status written carries `reference`, so the
//! REFERENCE column shows the target whatever failed.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference as K8sRef, HorizontalPodAutoscaler,
};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};
use plimsoll_core::api::hpa_plus::{
    DecisionMemory, HorizontalPodAutoscalerPlus, HorizontalPodAutoscalerPlusSpec,
    HorizontalPodAutoscalerPlusStatus, MinReplicasTuning, MinReplicasTuningStatus, NativeHpa,
    TuningMode,
};
use plimsoll_core::conflict;
use plimsoll_core::horizontal::conditions::{ABLE_TO_SCALE, Condition, SCALING_ACTIVE, merge};
use plimsoll_core::horizontal::cron_hold::tuning_hold;
use plimsoll_core::horizontal::evaluate::{
    self, Evaluation, EvaluationInput, Held, OwedEvent, Restored, Stored, TuningWrite, evaluate,
};
use plimsoll_core::horizontal::load_history;
use plimsoll_core::horizontal::memory;
use plimsoll_core::horizontal::predictive::NATIVE_HISTORY_BYTES;
use plimsoll_core::horizontal::scale_to_zero;
use plimsoll_core::horizontal::status::status_after;
use plimsoll_core::horizontal::{Decision, LimitedBy, Observation};
use plimsoll_core::stored::{self, Ignored, StoredStateError};
use plimsoll_runtime::scale::TargetScale;
use plimsoll_runtime::selector::Selector;
use tracing::{Span, instrument};

use crate::context::{Context, Memory};
use crate::error::{Error, Result};
use crate::observe::{now, observe, rollout};
use crate::pods::PodInfo;
use crate::status;
use crate::tuning;

/// Which API the object came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Plus,
    Native,
}

/// What [`run`] needs of an object, whatever its kind: borrowed from an HPA+ as the cache
/// holds it (an evaluation copies nothing it only reads), owned after a native HPA's conversion.
struct Subject<'a> {
    kind: Kind,
    uid: String,
    namespace: String,
    name: String,
    generation: Option<i64>,
    /// The cached object's `resourceVersion`.
    version: Option<&'a str>,
    spec: Cow<'a, HorizontalPodAutoscalerPlusSpec>,
    previous: Option<Cow<'a, HorizontalPodAutoscalerPlusStatus>>,
    /// The decision memory the object carries (HPA+ status, or a native HPA's annotation).
    stored: Option<Cow<'a, DecisionMemory>>,
    reference: ObjectReference,
    labels: Cow<'a, BTreeMap<String, String>>,
    /// `minReplicasTuning` in force (spec, else annotations).
    tuning: MinReplicasTuning,
    /// The tuning status the object carries (HPA+ status, or a native HPA's annotation).
    tuning_status: Option<Cow<'a, MinReplicasTuningStatus>>,
    /// The predictive status the object carries (HPA+ status, or a native HPA's annotation).
    predictive_status: Option<Cow<'a, plimsoll_core::api::hpa_plus::PredictiveStatus>>,
    /// A native HPA's stored-state annotations that are not JSON of their form: the decision
    /// memory, the tuning status, the predictive status (each then read as absent).
    unreadable: Unreadable,
    /// The object as the cache holds it (`--record-dir`).
    object: crate::record::Object<'a>,
}

/// Which of a native HPA's stored-state annotations did not parse, and why.
#[derive(Clone, Debug, Default)]
struct Unreadable {
    memory: Option<StoredStateError>,
    tuning: Option<StoredStateError>,
    predictive: Option<StoredStateError>,
}

impl Kind {
    /// The kind as a message names it.
    fn name(self) -> &'static str {
        match self {
            Self::Plus => "HorizontalPodAutoscalerPlus",
            Self::Native => "HorizontalPodAutoscaler",
        }
    }

    /// Where this kind keeps the decision memory, the tuning status and the predictive status,
    /// as a condition names them.
    fn stored_fields(self) -> [&'static str; 3] {
        match self {
            Self::Plus => [
                "status.memory",
                "status.minReplicasTuning.loadHistory",
                "status.predictive.history",
            ],
            Self::Native => [
                "annotation plimsoll.dev/decision-memory",
                "annotation plimsoll.dev/min-replicas-tuning-status",
                "annotation plimsoll.dev/predictive-status",
            ],
        }
    }
}

/// Reconciles a `HorizontalPodAutoscalerPlus`.
#[instrument(skip_all, fields(namespace, name))]
pub async fn reconcile(obj: Arc<HorizontalPodAutoscalerPlus>, ctx: Arc<Context>) -> Result<Action> {
    let uid = obj.meta().uid.as_deref().unwrap_or_default();
    if let Some(later) = elsewhere(&ctx, uid, ctx.config.sync_period_seconds(&obj.spec)) {
        return Ok(later);
    }
    let tuning = obj.min_replicas_tuning();
    let status = obj.status.as_ref();
    let subject = Subject {
        kind: Kind::Plus,
        uid: uid.to_owned(),
        namespace: obj.namespace().unwrap_or_default(),
        name: obj.name_any(),
        generation: obj.meta().generation,
        version: obj.meta().resource_version.as_deref(),
        spec: Cow::Borrowed(&obj.spec),
        previous: status.map(Cow::Borrowed),
        stored: status.and_then(|s| s.memory.as_ref()).map(Cow::Borrowed),
        reference: obj.object_ref(&()),
        labels: Cow::Borrowed(obj.labels()),
        tuning: MinReplicasTuning::default(),
        tuning_status: status
            .and_then(|s| s.min_replicas_tuning.as_ref())
            .map(Cow::Borrowed),
        predictive_status: status
            .and_then(|s| s.predictive.as_ref())
            .map(Cow::Borrowed),
        unreadable: Unreadable::default(),
        object: crate::record::Object::Plus(&obj),
    };
    let subject = with_written(subject, &ctx);
    if let Some(why) = plimsoll_core::cut_down::spec_left_out(obj.meta()) {
        return invalid(&subject, &ctx, &why).await;
    }
    match tuning {
        Ok(tuning) => {
            run(
                Subject {
                    tuning: tuning.unwrap_or_default(),
                    ..subject
                },
                &ctx,
            )
            .await
        }
        Err(e) => invalid(&subject, &ctx, &e.to_string()).await,
    }
}

/// Reconciles a native `autoscaling/v2` `HorizontalPodAutoscaler` (`--native-hpa`).
#[instrument(skip_all, fields(namespace, name))]
pub async fn reconcile_native(obj: Arc<NativeHpa>, ctx: Arc<Context>) -> Result<Action> {
    let uid = obj.meta().uid.as_deref().unwrap_or_default();
    if let Some(later) = elsewhere(&ctx, uid, ctx.config.sync_period_seconds) {
        return Ok(later);
    }
    let namespace = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let previous = status::from_native(&obj);
    // An annotation that does not parse reads as absent; the evaluation says it was ignored.
    let (stored, memory_unreadable) = split(memory::from_annotations(obj.annotations()));
    let (tuning_status, tuning_unreadable) = split(tuning::from_annotations(obj.annotations()));
    let (predictive_status, predictive_unreadable) =
        split(crate::predict::from_annotations(obj.annotations()));
    let unreadable = Unreadable {
        memory: memory_unreadable,
        tuning: tuning_unreadable,
        predictive: predictive_unreadable,
    };
    let labels = obj.labels();
    let reference = obj.object_ref(&());
    let converted = match plimsoll_core::cut_down::spec_left_out(obj.meta()) {
        Some(why) => Err(why),
        None => HorizontalPodAutoscalerPlus::from_native_object(&obj).map_err(|e| e.to_string()),
    };
    let plus = match converted {
        Ok(plus) => plus,
        Err(e) => {
            Span::current().record("namespace", namespace.as_str());
            Span::current().record("name", name.as_str());
            let subject = Subject {
                kind: Kind::Native,
                uid: obj.uid().unwrap_or_default(),
                namespace,
                name,
                generation: obj.meta().generation,
                version: obj.meta().resource_version.as_deref(),
                spec: Cow::Owned(HorizontalPodAutoscalerPlusSpec::default()),
                previous: previous.map(Cow::Owned),
                stored: stored.map(Cow::Owned),
                reference,
                labels: Cow::Borrowed(labels),
                tuning: MinReplicasTuning::default(),
                tuning_status: tuning_status.map(Cow::Owned),
                predictive_status: predictive_status.map(Cow::Owned),
                unreadable,
                object: crate::record::Object::Native(&obj),
            };
            return invalid(&with_written(subject, &ctx), &ctx, &e).await;
        }
    };
    let subject = Subject {
        kind: Kind::Native,
        uid: obj.uid().unwrap_or_default(),
        namespace,
        name,
        generation: obj.meta().generation,
        version: obj.meta().resource_version.as_deref(),
        tuning: plus.spec.min_replicas_tuning.clone().unwrap_or_default(),
        spec: Cow::Owned(plus.spec),
        previous: previous.map(Cow::Owned),
        stored: stored.map(Cow::Owned),
        reference,
        labels: Cow::Borrowed(labels),
        tuning_status: tuning_status.map(Cow::Owned),
        predictive_status: predictive_status.map(Cow::Owned),
        unreadable,
        object: crate::record::Object::Native(&obj),
    };
    run(with_written(subject, &ctx), &ctx).await
}

/// A read annotation as (its value, why it did not parse).
fn split<T>(
    read: std::result::Result<Option<T>, StoredStateError>,
) -> (Option<T>, Option<StoredStateError>) {
    match read {
        Ok(value) => (value, None),
        Err(why) => (None, Some(why)),
    }
}

/// With `--shards`, an object of a shard this replica does not hold is requeued after
/// `period_seconds` (in case its shard moves here) before anything is read or built for it. Only
/// the objects of a shard lost a moment ago come here: the others are not in the controller's
/// store ([`crate::shard_cache`]), and these leave it within a second. What this replica knew of
/// it is dropped (its holder moves the history on, and the object carries it).
fn elsewhere(ctx: &Context, uid: &str, period_seconds: i64) -> Option<Action> {
    if !ctx.shards.is_sharded() || ctx.shards.holds(uid) {
        return None;
    }
    ctx.forget(uid);
    Some(Action::requeue(period(period_seconds)))
}

/// Logs that `what` failed for `subject` with `error`, once per repeat period
/// (`plimsoll_runtime::repeats`): a tenant's failing objects fail at every evaluation.
fn warn_of(ctx: &Context, subject: &Subject<'_>, what: &str, error: impl std::fmt::Display) {
    warn_once(
        ctx,
        &subject.uid,
        (&subject.namespace, &subject.name),
        what,
        &error.to_string(),
    );
}

fn warn_once(ctx: &Context, uid: &str, (namespace, name): (&str, &str), what: &str, error: &str) {
    // Keyed by what failed too: two failures of one autoscaler with the same error text
    // (a 500 from the API, say) are two warnings, each on its own clock.
    if let Some(quiet) = ctx.repeats.first(uid, &format!("{what}: {error}")) {
        tracing::warn!(namespace, name, error, repeats_not_logged = quiet, "{what}");
    } else {
        tracing::debug!(namespace, name, error, "{what}");
    }
}

/// What the controller does with a reconcile error: retry with a delay, counted by kind.
// The signature is the one kube-runtime's Controller calls.
#[allow(clippy::needless_pass_by_value)]
pub fn error_policy<K: Resource>(obj: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.reconcile.failure(error.metric_label());
    let meta = obj.meta();
    warn_once(
        &ctx,
        meta.uid.as_deref().unwrap_or_default(),
        (
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        ),
        "reconcile failed; retrying",
        &error.to_string(),
    );
    Action::requeue(Duration::from_secs(
        u64::try_from(ctx.config.sync_period_seconds.max(1)).unwrap_or(5),
    ))
}

/// A period in seconds (the decision's, or
/// [`ControllerConfig::sync_period_seconds`](plimsoll_core::horizontal::ControllerConfig::sync_period_seconds)
/// before there is one) as a requeue delay.
fn period(seconds: i64) -> Duration {
    Duration::from_secs(u64::try_from(seconds).unwrap_or(5))
}

/// Writes `new` when it changed; whether it did.
async fn write_status(
    subject: &Subject<'_>,
    ctx: &Context,
    new: &HorizontalPodAutoscalerPlusStatus,
) -> Result<bool> {
    let changed = match subject.kind {
        Kind::Plus => status::changed(subject.previous.as_deref(), new),
        Kind::Native => status::changed(
            subject
                .previous
                .as_deref()
                .map(status::native_subset)
                .as_ref(),
            &status::native_subset(new),
        ),
    };
    if !changed || !ctx.shards.holds(&subject.uid) {
        return Ok(false);
    }
    match subject.kind {
        Kind::Plus => {
            status::write_plus(&ctx.client, &subject.namespace, &subject.name, new).await?;
        }
        Kind::Native => {
            status::write_native(&ctx.client, &subject.namespace, &subject.name, new).await?;
        }
    }
    ctx.metrics.status_writes.inc();
    Ok(true)
}

/// Writes a native HPA's decision memory into its annotation when it moved (an HPA+ carries it
/// in the status [`write_status`] writes); whether it did.
async fn write_native_memory(
    subject: &Subject<'_>,
    ctx: &Context,
    new: &HorizontalPodAutoscalerPlusStatus,
) -> Result<bool> {
    let Some(stored) = new.memory.as_ref() else {
        return Ok(false);
    };
    if subject.kind != Kind::Native
        || subject
            .stored
            .as_ref()
            .is_some_and(|old| memory::same_but_newest_time(old, stored))
        || !ctx.shards.holds(&subject.uid)
    {
        return Ok(false);
    }
    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(ctx.client.clone(), &subject.namespace);
    status::write_native_memory(&api, &subject.name, stored).await?;
    Ok(true)
}

/// Writes the status and, for a native HPA, the memory annotation of a decision, and records
/// what was written.
async fn write_decision(
    subject: &Subject<'_>,
    ctx: &Context,
    new: &HorizontalPodAutoscalerPlusStatus,
) -> Result<()> {
    let status_written = write_status(subject, ctx, new).await?;
    let memory_written = match write_native_memory(subject, ctx, new).await {
        Ok(written) => written,
        Err(e) => {
            // The decision is applied; without its memory a successor only starts over (seeded
            // with the current replicas), so this is not worth a retry of the whole evaluation.
            warn_of(
                ctx,
                subject,
                "could not write the decision memory annotation",
                &e,
            );
            false
        }
    };
    record_written(
        subject,
        ctx,
        status_written.then_some(new),
        memory_written.then_some(new.memory.as_ref()).flatten(),
    );
    Ok(())
}

/// Records what the server has after this evaluation's writes ([`Context::wrote`]): `status`
/// if it was written, and for a native HPA `memory` if its annotation was.
fn record_written(
    subject: &Subject<'_>,
    ctx: &Context,
    status: Option<&HorizontalPodAutoscalerPlusStatus>,
    memory: Option<&DecisionMemory>,
) {
    if status.is_none() && memory.is_none() {
        return;
    }
    let mut on_server = status
        .or(subject.previous.as_deref())
        .cloned()
        .unwrap_or_default();
    let native = subject.kind == Kind::Native;
    if native {
        on_server.memory = memory.or(subject.stored.as_deref()).cloned();
    }
    ctx.wrote(&subject.uid, subject.version, &on_server, native);
}

/// `subject` with the status this replica wrote last in place of the cached one, while the
/// cache has not caught up with that write ([`Context::written_over`]).
fn with_written<'a>(subject: Subject<'a>, ctx: &Context) -> Subject<'a> {
    let Some(status) = ctx.written_over(&subject.uid, subject.version) else {
        return subject;
    };
    let (tuning_status, predictive_status) = match subject.kind {
        Kind::Plus => (
            status.min_replicas_tuning.clone().map(Cow::Owned),
            status.predictive.clone().map(Cow::Owned),
        ),
        // A native HPA keeps them in annotations of their own.
        Kind::Native => (subject.tuning_status, subject.predictive_status),
    };
    Subject {
        stored: status.memory.clone().map(Cow::Owned),
        previous: Some(Cow::Owned(status)),
        tuning_status,
        predictive_status,
        ..subject
    }
}

/// A reconcile that cannot finish: the conditions to merge into status, the Warning Event, and
/// what to return to the controller (requeue after the period, or an error for backoff).
struct Failure {
    conditions: Vec<Condition>,
    event_reason: &'static str,
    event_action: &'static str,
    /// The Event's note (the conditions carry their own messages).
    note: String,
    /// Emit the Event only when the status changed, for a state that stands until the object
    /// changes (so a standing misconfiguration is reported once, not every period).
    event_once: bool,
    at: Timestamp,
    outcome: Result<Action>,
}

impl Failure {
    /// A failure that sets one condition `type_=False` with `reason`, and an Event of the same
    /// reason.
    fn condition(
        type_: &'static str,
        reason: &'static str,
        action: &'static str,
        message: String,
        at: Timestamp,
        outcome: Result<Action>,
    ) -> Self {
        Self {
            conditions: vec![Condition::new(type_, false, reason, message.clone())],
            event_reason: reason,
            event_action: action,
            note: message,
            event_once: false,
            at,
            outcome,
        }
    }

    /// The same failure with `note` as the Event's note instead of the condition's message.
    fn with_note(self, note: String) -> Self {
        Self { note, ..self }
    }

    fn once(self) -> Self {
        Self {
            event_once: true,
            ..self
        }
    }
}

/// The one failure path: condition into status, Warning Event (while leading), status write,
/// then the failure's outcome.
async fn fail(subject: &Subject<'_>, ctx: &Context, failure: Failure) -> Result<Action> {
    let new = status::with_conditions(
        &subject.spec,
        subject.previous.as_deref(),
        &failure.conditions,
        failure.at,
    );
    let report = !failure.event_once || status::changed(subject.previous.as_deref(), &new);
    if report && ctx.shards.holds(&subject.uid) {
        ctx.events
            .warning(
                &subject.reference,
                failure.event_reason,
                failure.event_action,
                &failure.note,
            )
            .await;
    }
    if write_status(subject, ctx, &new).await? {
        record_written(subject, ctx, Some(&new), None);
    }
    failure.outcome
}

/// A spec that cannot be evaluated: condition, Warning Event, wait for a change.
async fn invalid(subject: &Subject<'_>, ctx: &Context, message: &str) -> Result<Action> {
    warn_of(ctx, subject, "invalid autoscaler", message);
    let failure = Failure::condition(
        SCALING_ACTIVE,
        "InvalidSpec",
        "Validate",
        message.to_owned(),
        now(),
        Ok(Action::requeue(period(
            ctx.config.sync_period_seconds(&subject.spec),
        ))),
    );
    fail(subject, ctx, failure.once()).await
}

/// The target's scale could not be read. A missing target may be created later: look again
/// after the period; anything else backs off.
fn failed_get_scale(
    e: plimsoll_runtime::Error,
    ctx: &Context,
    spec: &HorizontalPodAutoscalerPlusSpec,
    at: Timestamp,
) -> Failure {
    // As upstream: the Event carries the API server's message, the condition says what failed.
    let note = e.api_message();
    let message =
        format!("the HPA controller was unable to get the target's current scale: {note}");
    let outcome = if e.is_not_found() {
        Ok(Action::requeue(period(
            ctx.config.sync_period_seconds(spec),
        )))
    } else {
        Err(e.into())
    };
    Failure::condition(
        ABLE_TO_SCALE,
        "FailedGetScale",
        "GetScale",
        message,
        at,
        outcome,
    )
    .with_note(note)
}

/// The target reports no pod selector: wait for a change.
fn invalid_selector(
    target: &K8sRef,
    ctx: &Context,
    spec: &HorizontalPodAutoscalerPlusSpec,
    at: Timestamp,
) -> Failure {
    let message = format!(
        "the target {}/{} reports no pod selector (status.selector of its scale subresource)",
        target.kind, target.name
    );
    Failure::condition(
        SCALING_ACTIVE,
        "InvalidSelector",
        "Evaluate",
        message,
        at,
        Ok(Action::requeue(period(
            ctx.config.sync_period_seconds(spec),
        ))),
    )
    .once()
}

/// The scale write failed: the decision's conditions with `AbleToScale=False`, and backoff.
fn failed_update_scale(e: plimsoll_runtime::Error, decision: &Decision, at: Timestamp) -> Failure {
    let message = format!(
        "the HPA controller was unable to update the target scale: {}",
        e.api_message()
    );
    let mut conditions: Vec<Condition> = decision
        .conditions
        .iter()
        .filter(|c| c.type_ != ABLE_TO_SCALE)
        .cloned()
        .collect();
    conditions.push(Condition::new(
        ABLE_TO_SCALE,
        false,
        "FailedUpdateScale",
        message.clone(),
    ));
    Failure {
        conditions,
        event_reason: "FailedRescale",
        event_action: "Scale",
        note: message,
        event_once: false,
        at,
        outcome: Err(e.into()),
    }
}

/// What writing the decided scale came to.
enum Written {
    /// The decision writes nothing (or the target already has that count).
    Nothing,
    /// The scale went from `from` to `to`.
    Scaled { from: i32, to: i32 },
    /// Leadership was lost before the write.
    NotLeading,
}

/// Writes the decided scale (only while leading; the gates are inside the decision), with its
/// Event and counter.
async fn write_scale(
    subject: &Subject<'_>,
    ctx: &Context,
    target: &K8sRef,
    current: i32,
    decision: &Decision,
) -> plimsoll_runtime::Result<Written> {
    let Some(to) = decision.scale_to.filter(|to| *to != current) else {
        return Ok(Written::Nothing);
    };
    if !ctx.shards.holds(&subject.uid) {
        return Ok(Written::NotLeading);
    }
    ctx.scale
        .set_replicas(&subject.namespace, target, to)
        .await?;
    ctx.metrics.rescaled(current, to);
    let reason = if decision.reason.is_empty() {
        String::new()
    } else {
        format!("; {}", decision.reason)
    };
    ctx.events
        .normal(
            &subject.reference,
            "SuccessfulRescale",
            "Scale",
            format!("New size: {to}; was {current}{reason}"),
        )
        .await;
    Ok(Written::Scaled { from: current, to })
}

/// Warning Events for the failures the decision reports (failing metrics, ambiguous selector).
async fn report_decision_failures(subject: &Subject<'_>, ctx: &Context, decision: &Decision) {
    for p in &decision.proposals {
        if let (Some(reason), Some(error)) = (p.failure_reason, p.error.as_ref()) {
            ctx.events
                .warning(&subject.reference, reason, "Evaluate", error)
                .await;
        }
    }
    if decision.limited_by == Some(LimitedBy::AmbiguousSelector) {
        ctx.events
            .warning(
                &subject.reference,
                "AmbiguousSelector",
                "Evaluate",
                &decision.reason,
            )
            .await;
    }
}

/// The observation of `subject`'s target: its pods (claimed against other autoscalers), their
/// usage and the metrics; and when this evaluation's Prometheus queries must have ended. That
/// one budget covers every Prometheus query of the evaluation: the metrics here, and tuning's
/// and prediction's history on first sight.
async fn observe_target(
    subject: &Subject<'_>,
    ctx: &Context,
    (scale, selector): (&TargetScale, &Selector),
    pods: &[Arc<PodInfo>],
) -> (Observation, tokio::time::Instant) {
    let prometheus_deadline = ctx
        .prometheus
        .deadline(period(ctx.config.sync_period_seconds(&subject.spec)));
    let display = format!(
        "{}/{}",
        match subject.kind {
            Kind::Plus => "HorizontalPodAutoscalerPlus",
            Kind::Native => "HorizontalPodAutoscaler",
        },
        subject.name
    );
    let conflicting = ctx.claim_pods(
        &subject.namespace,
        &subject.uid,
        &display,
        selector,
        pods.iter().map(|p| &p.labels),
    );
    let observed = observe(
        ctx,
        &subject.namespace,
        &subject.spec,
        (scale.spec_replicas, scale.status_replicas),
        selector,
        pods,
        prometheus_deadline,
    )
    .await;
    let rollout = match rollout(ctx, &subject.namespace, &subject.spec, scale.spec_replicas).await {
        Ok(state) => state,
        // Tenant-made (a target kind without the rollout conventions) and the same at every
        // evaluation: logged once per repeat period, like a failure.
        Err(why) => {
            warn_of(
                ctx,
                subject,
                "rollout state unknown; not pausing for it",
                why,
            );
            None
        }
    };
    let observed = Observation {
        conflicting_autoscalers: conflicting,
        rollout,
        scaled_to_zero: subject
            .previous
            .as_deref()
            .is_some_and(scale_to_zero::in_status),
        ..observed
    };
    (observed, prometheus_deadline)
}

/// Writes the minimum tuning lowered the spec to (Apply, while leading), with its counter; the
/// reason the write did not happen, if it did not. Tuning is an optimisation: a failed write is
/// said (status, Warning Event) and the evaluation goes on with the old minimum.
async fn write_min_replicas(subject: &Subject<'_>, ctx: &Context, to: i32) -> Option<String> {
    if !ctx.shards.holds(&subject.uid) {
        return Some("this replica no longer holds the object's shard".into());
    }
    let native = subject.kind == Kind::Native;
    match tuning::write_min_replicas(&ctx.client, native, &subject.namespace, &subject.name, to)
        .await
    {
        Ok(()) => {
            ctx.metrics.min_replicas_lowered.inc();
            None
        }
        Err(e) => {
            warn_of(ctx, subject, "minReplicas tuning write failed", &e);
            Some(e.to_string())
        }
    }
}

/// Tuning's and prediction's metrics, and a native HPA's annotations when their status
/// changed; `series` names the decision's metrics as the per-metric series do.
async fn report_tuning_and_prediction(
    subject: &Subject<'_>,
    ctx: &Context,
    evaluation: &Evaluation,
    series: &[String],
) {
    let tuned = evaluation.tuned.as_ref();
    let predicted = evaluation.predicted.as_ref();
    ctx.metrics.tuned(
        &subject.namespace,
        &subject.name,
        tuned.map(|t| (t.tuning.low_load, t.tuning.proposed)),
    );
    ctx.metrics.predicted(
        &subject.namespace,
        &subject.name,
        (&evaluation.decision, series),
        predicted.map(|p| &p.forecast),
    );
    if subject.kind != Kind::Native || !ctx.shards.holds(&subject.uid) {
        return;
    }
    if let Some(t) = tuned.filter(|t| t.changed)
        && let Err(e) =
            tuning::write_native_status(&ctx.client, &subject.namespace, &subject.name, &t.status)
                .await
    {
        warn_of(
            ctx,
            subject,
            "could not write the minReplicasTuning status annotation",
            &e,
        );
    }
    if let Some(p) = predicted.filter(|p| p.changed)
        && let Err(e) = crate::predict::write_native_status(
            &ctx.client,
            &subject.namespace,
            &subject.name,
            &p.status,
        )
        .await
    {
        warn_of(
            ctx,
            subject,
            "could not write the predictive status annotation",
            &e,
        );
    }
}

/// The Events the evaluation owes (tuning's, prediction's), while leading.
async fn emit_owed(subject: &Subject<'_>, ctx: &Context, events: &[OwedEvent]) {
    if !ctx.shards.holds(&subject.uid) {
        return;
    }
    for e in events {
        if e.warning {
            ctx.events
                .warning(&subject.reference, e.reason, e.action, &e.note)
                .await;
        } else {
            ctx.events
                .normal(&subject.reference, e.reason, e.action, e.note.clone())
                .await;
        }
    }
}

/// The `ConflictingAutoscaler` condition ([`plimsoll_core::conflict`]) from the VPAs aiming at
/// the same workload, merged into `new`; a Warning Event when it turns on (while leading), and
/// the per-object metric.
async fn conflict_with_vpas(
    subject: &Subject<'_>,
    ctx: &Context,
    new: &mut HorizontalPodAutoscalerPlusStatus,
    at: Timestamp,
) {
    let target = &subject.spec.scale_target_ref;
    let vpas = ctx.vpas.get(&subject.namespace, &target.kind, &target.name);
    let was = subject.previous.as_deref().is_some_and(|p| {
        p.conditions
            .iter()
            .any(|c| c.type_ == conflict::CONDITION && c.status == "True")
    });
    let Some(condition) =
        conflict::horizontal_condition(&subject.spec, vpas.iter().map(AsRef::as_ref), was)
    else {
        ctx.metrics
            .conflicting(&subject.namespace, &subject.name, false);
        return;
    };
    ctx.metrics
        .conflicting(&subject.namespace, &subject.name, condition.status);
    if condition.status && !was && ctx.shards.holds(&subject.uid) {
        ctx.events
            .warning(
                &subject.reference,
                conflict::CONDITION,
                "Evaluate",
                &condition.message,
            )
            .await;
    }
    new.conditions = merge(&new.conditions, std::slice::from_ref(&condition), at);
}

/// What this evaluation ignored of the stored state `subject` carries ([`plimsoll_core::stored`]):
/// the decision memory (an annotation that did not parse, or a memory that did not read back),
/// and while tuning or prediction is on, their annotation or history.
fn ignored_state(
    subject: &Subject<'_>,
    evaluation: &Evaluation,
    restored: &Restored,
) -> Vec<Ignored> {
    let [memory_field, tuning_field, predictive_field] = subject.kind.stored_fields();
    let unreadable = &subject.unreadable;
    let parts = [
        (
            memory_field,
            unreadable
                .memory
                .clone()
                .or_else(|| evaluation.memory_ignored.clone()),
        ),
        (
            tuning_field,
            evaluation.tuned.as_ref().and_then(|_| {
                unreadable
                    .tuning
                    .clone()
                    .or_else(|| restored.tuning_ignored.clone())
            }),
        ),
        (
            predictive_field,
            evaluation.predicted.as_ref().and_then(|_| {
                unreadable
                    .predictive
                    .clone()
                    .or_else(|| restored.predictive_ignored.clone())
            }),
        ),
    ];
    parts
        .into_iter()
        .filter_map(|(what, why)| Some(Ignored { what, why: why? }))
        .collect()
}

/// The `StoredStateIgnored` condition ([`stored::horizontal_condition`]) merged into `new`; a
/// log line, and a Warning Event when it turns on or says something new (while leading).
async fn stored_state(
    subject: &Subject<'_>,
    ctx: &Context,
    new: &mut HorizontalPodAutoscalerPlusStatus,
    ignored: &[Ignored],
    first_sight: bool,
    at: Timestamp,
) {
    let before = subject.previous.as_deref().and_then(|p| {
        p.conditions
            .iter()
            .find(|c| c.type_ == stored::IGNORED_CONDITION && c.status == "True")
    });
    let Some(condition) = stored::horizontal_condition(ignored, before.is_some(), first_sight)
    else {
        return;
    };
    if condition.status {
        warn_of(ctx, subject, "stored state ignored", &condition.message);
        let news = before.is_none_or(|c| c.message.as_deref() != Some(condition.message.as_str()));
        if news && ctx.shards.holds(&subject.uid) {
            ctx.events
                .warning(
                    &subject.reference,
                    stored::IGNORED_EVENT,
                    "Restore",
                    &condition.message,
                )
                .await;
        }
    }
    new.conditions = merge(&new.conditions, std::slice::from_ref(&condition), at);
}

/// What this process holds of `subject` for an evaluation at `at`: its own, with the parts
/// turned on since (or everything, on first sight) restored from the object and topped up from
/// Prometheus within the object's budget.
async fn held_for(
    subject: &Subject<'_>,
    ctx: &Context,
    (at, prometheus_deadline): (Timestamp, tokio::time::Instant),
) -> (Held, Restored) {
    let mut held = ctx.held(&subject.uid).unwrap_or_default();
    let restored = held.restore_missing(
        &subject.spec,
        &subject.tuning,
        Stored {
            tuning: subject.tuning_status.as_deref(),
            predictive: subject.predictive_status.as_deref(),
        },
    );
    if restored.tuning
        && let Some(t) = held.tuning.as_mut()
    {
        tuning::seed_from_prometheus(
            &ctx.prometheus,
            &subject.namespace,
            &subject.spec,
            &subject.tuning,
            &mut t.loads,
            at,
            prometheus_deadline,
        )
        .await;
    }
    if restored.predictive
        && let (Some(p), Some(settings)) = (
            held.predictive.as_mut(),
            evaluate::predictive_settings(&subject.spec),
        )
    {
        crate::predict::seed_from_prometheus(
            &ctx.prometheus,
            &subject.namespace,
            &subject.spec,
            settings,
            &mut p.series,
            at,
            prometheus_deadline,
        )
        .await;
    }
    (held, restored)
}

/// Tuning, the reactive decision and prediction for what was observed ([`evaluate`]), with
/// tuning's write of a lowered minimum in between: when it fails, the evaluation is made again
/// from the same held state with the old minimum.
async fn evaluate_subject(
    subject: &Subject<'_>,
    ctx: &Context,
    pods: &[Arc<PodInfo>],
    observed: &Observation,
    prometheus_deadline: tokio::time::Instant,
) -> (Evaluation, Restored, Timestamp) {
    let at = now();
    let (held, restored) = held_for(subject, ctx, (at, prometheus_deadline)).await;
    let held_by = tuning_hold(
        ctx.crons.state().iter().map(AsRef::as_ref),
        &subject.namespace,
        (subject.kind.name(), &subject.name),
        &subject.spec.scale_target_ref,
    );
    let excluded = ctx
        .tuning_exclude
        .as_ref()
        .filter(|e| e.matches(&subject.labels, pods.iter().map(|p| &p.labels)));
    let input = EvaluationInput {
        spec: &subject.spec,
        observed,
        stored_memory: subject.stored.as_deref(),
        config: &ctx.config,
        tuning: &subject.tuning,
        held_by: held_by.as_deref(),
        excluded_by: excluded.map(|e| e.text.as_str()),
        tuning_write: TuningWrite::Allowed,
        startup_seconds: crate::predict::measured_startup(pods),
        history_bytes: (subject.kind == Kind::Native).then_some(NATIVE_HISTORY_BYTES),
        tuning_history_bytes: (subject.kind == Kind::Native)
            .then_some(load_history::NATIVE_HISTORY_BYTES),
        now: at,
    };
    // Only an object whose tuning may write needs the held state twice.
    let again = (subject.tuning.mode == TuningMode::Apply).then(|| held.clone());
    let evaluation = evaluate(&input, held);
    let Some(to) = evaluation.lowered_min_replicas else {
        return (evaluation, restored, at);
    };
    let Some(why) = write_min_replicas(subject, ctx, to).await else {
        return (evaluation, restored, at);
    };
    let input = EvaluationInput {
        tuning_write: TuningWrite::Failed(&why),
        ..input
    };
    (evaluate(&input, again.unwrap_or_default()), restored, at)
}

/// Keeps what the next evaluation of `subject` starts from ([`Memory`]).
fn remember(
    subject: &Subject<'_>,
    ctx: &Context,
    (held, published, series): (Held, crate::metrics::Published, Vec<String>),
    next: Duration,
) {
    ctx.remember(
        &subject.uid,
        Memory {
            namespace: subject.namespace.clone(),
            name: subject.name.clone(),
            held,
            metric_names: series,
            next_due: Some(Instant::now() + next),
            native: subject.kind == Kind::Native,
            published,
        },
    );
}

/// The scale target as the scale client takes it.
fn target_of(spec: &HorizontalPodAutoscalerPlusSpec) -> K8sRef {
    K8sRef {
        api_version: spec.scale_target_ref.api_version.clone(),
        kind: spec.scale_target_ref.kind.clone(),
        name: spec.scale_target_ref.name.clone(),
    }
}

/// What becomes of an object whose shard this replica does not act on (any more, or yet).
fn not_acting(subject: &Subject<'_>, ctx: &Context) -> Action {
    if ctx.shards.is_sharded() {
        // Another replica's shard (or one being handed over): drop what we knew (its holder
        // moves the history on, and the object carries it), and look again after the period.
        ctx.forget(&subject.uid);
        return Action::requeue(period(ctx.config.sync_period_seconds(&subject.spec)));
    }
    // A follower never acts; the controller is stopped when the lease is lost, this covers a
    // reconcile that was already running.
    Action::await_change()
}

/// The steps of one evaluation, in order; each early return is one failure mode of the module
/// doc.
async fn run(subject: Subject<'_>, ctx: &Context) -> Result<Action> {
    let span = Span::current();
    span.record("namespace", subject.namespace.as_str());
    span.record("name", subject.name.as_str());
    // This replica evaluates the object only while it holds the object's shard (without
    // sharding: while leading). The guard keeps a shard being handed over from being released
    // before this evaluation's last write.
    let Some(_shard) = ctx.shards.enter(&subject.uid) else {
        return Ok(not_acting(&subject, ctx));
    };
    let _timer = ctx.metrics.reconcile.start();
    if let Err(errors) = subject.spec.validate() {
        return invalid(&subject, ctx, &errors.to_string()).await;
    }
    let spec: &HorizontalPodAutoscalerPlusSpec = &subject.spec;
    let target = target_of(spec);
    let started = now();
    let scale = match ctx.scale.get(&subject.namespace, &target).await {
        Ok(scale) => scale,
        Err(e) => return fail(&subject, ctx, failed_get_scale(e, ctx, spec, started)).await,
    };
    let Some(selector) = scale.selector.clone() else {
        return fail(&subject, ctx, invalid_selector(&target, ctx, spec, started)).await;
    };
    let pods = ctx.target_pods(
        &subject.namespace,
        &selector,
        spec.pod_selection_strategy,
        (target.kind.as_str(), target.name.as_str()),
    );
    let (observed, prometheus_deadline) =
        observe_target(&subject, ctx, (&scale, &selector), &pods).await;
    if abandoned(ctx, &observed) {
        return Ok(Action::await_change());
    }

    let (mut evaluation, restored, at) =
        evaluate_subject(&subject, ctx, &pods, &observed, prometheus_deadline).await;
    if abandoned(ctx, &observed) {
        return Ok(Action::await_change());
    }
    let spec = evaluation.spec(&subject.spec);
    let decision = evaluation.decision.clone();
    let series = crate::metrics::series_names(&spec, &decision);
    let scaled = match write_scale(&subject, ctx, &target, scale.spec_replicas, &decision).await {
        Ok(Written::Nothing) => false,
        Ok(Written::Scaled { from, to }) => {
            evaluation.scaled(at, from, to);
            true
        }
        Ok(Written::NotLeading) => return Ok(Action::await_change()),
        Err(e) => return fail(&subject, ctx, failed_update_scale(e, &decision, at)).await,
    };
    record(
        &subject,
        ctx,
        &observed,
        &evaluation,
        (restored.first_sight, at, scaled),
    );
    report_decision_failures(&subject, ctx, &decision).await;

    let mut new = status_after(
        &spec,
        subject.previous.as_deref(),
        &decision,
        subject.generation,
        scaled,
        at,
    );
    // Keep exactly what a successor will read back.
    new.memory = Some(evaluation.store_memory());
    new.min_replicas_tuning = evaluation.tuned.as_ref().map(|t| t.status.clone());
    new.predictive = evaluation.predicted.as_ref().map(|p| p.status.clone());
    conflict_with_vpas(&subject, ctx, &mut new, at).await;
    let ignored = ignored_state(&subject, &evaluation, &restored);
    stored_state(&subject, ctx, &mut new, &ignored, restored.first_sight, at).await;
    write_decision(&subject, ctx, &new).await?;
    report_tuning_and_prediction(&subject, ctx, &evaluation, &series).await;
    emit_owed(&subject, ctx, &evaluation.events).await;

    let published = ctx.metrics.observe(
        &subject.namespace,
        &subject.name,
        (&decision, &series),
        ctx.published(&subject.uid),
    );
    let next = period(decision.next_sync_seconds);
    let held = std::mem::take(&mut evaluation.held);
    remember(&subject, ctx, (held, published, series), next);
    log_decision(&subject, &decision, scaled);
    Ok(Action::requeue(next))
}

/// `--record-dir`: what this evaluation observed and decided ([`crate::record`]).
fn record(
    subject: &Subject<'_>,
    ctx: &Context,
    observed: &Observation,
    evaluation: &Evaluation,
    (first_sight, at, scaled): (bool, Timestamp, bool),
) {
    ctx.recorder.evaluated(
        &crate::record::Evaluated {
            object: subject.object,
            uid: &subject.uid,
            spec: &subject.spec,
            used: &evaluation.spec(&subject.spec),
            stored: subject.stored.as_deref(),
            first_sight,
            observed,
            at,
            decision: &evaluation.decision,
            raise: evaluation.predicted.as_ref().map(|p| &p.raised),
            scaled,
        },
        &ctx.config,
    );
}

/// Whether the process began shutting down while this evaluation read Prometheus: its queries
/// were abandoned, so what it would decide and write rests on values it never got. Another
/// replica (or this one, restarted) evaluates the object again.
fn abandoned(ctx: &Context, observed: &Observation) -> bool {
    !observed.prometheus_metrics.is_empty() && ctx.prometheus.stopping()
}

/// The one log line per decision.
fn log_decision(subject: &Subject<'_>, decision: &Decision, scaled: bool) {
    tracing::info!(
        namespace = %subject.namespace,
        name = %subject.name,
        current = decision.current_replicas,
        desired = decision.desired_replicas,
        recommended = decision.recommended_replicas,
        scaled,
        limited_by = decision.limited_by.map(LimitedBy::as_str),
        reason = %decision.reason,
        "decision"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_autoscalers_failures_with_the_same_error_are_told_apart_by_what_failed() {
        let warn = |ctx: &Context, what: &str| {
            warn_once(
                ctx,
                "u1",
                ("ns", "web"),
                what,
                "the server is currently unable",
            );
        };
        let (ctx, _) = crate::context::tests::context();
        let lines = plimsoll_runtime::log_sink::warnings(|| {
            for _ in 0..3 {
                warn(&ctx, "stored state ignored");
                warn(&ctx, "rollout state unknown; not pausing for it");
            }
        });
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(lines[0].contains("stored state ignored"), "{}", lines[0]);
        assert!(lines[1].contains("rollout state unknown"), "{}", lines[1]);
    }
}
