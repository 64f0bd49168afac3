//! One evaluation of one autoscaler: read the target's scale, observe pods and metrics, call
//! the pure [`decide`], write the scale when the decision says so, write status when it
//! changed, publish Events, and requeue after the object's own period.
//!
//! Both kinds go through [`evaluate`]: an HPA+ as it is, a native `autoscaling/v2` HPA after
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
//! ([`plimsoll_runtime::api_message`]), and every status written carries `reference`, so the
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
    HorizontalPodAutoscalerPlusStatus, MinReplicasTuning, MinReplicasTuningStatus,
};
use plimsoll_core::conflict;
use plimsoll_core::horizontal::conditions::{ABLE_TO_SCALE, Condition, SCALING_ACTIVE, merge};
use plimsoll_core::horizontal::memory;
use plimsoll_core::horizontal::status::status_after;
use plimsoll_core::horizontal::{Decision, DecisionInput, LimitedBy, Observation, decide};
use plimsoll_core::stored::{self, Ignored, StoredStateError};
use plimsoll_runtime::scale::TargetScale;
use plimsoll_runtime::selector::Selector;
use tracing::{Span, instrument};

use crate::context::{Context, Memory};
use crate::error::{Error, Result};
use crate::observe::{now, observe};
use crate::pods::PodInfo;
use crate::predict::Predicted;
use crate::status;
use crate::tuning::{self, Tuned};

/// Which API the object came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Plus,
    Native,
}

/// What [`evaluate`] needs of an object, whatever its kind: borrowed from an HPA+ as the cache
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
pub async fn reconcile_native(
    obj: Arc<HorizontalPodAutoscaler>,
    ctx: Arc<Context>,
) -> Result<Action> {
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
    let plus = match HorizontalPodAutoscalerPlus::from_native(&obj) {
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
            return invalid(&with_written(subject, &ctx), &ctx, &e.to_string()).await;
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
/// `period_seconds` (in case its shard moves here) before anything is read or built for it: with
/// four replicas, three objects in four take this path every period. What this replica knew of
/// it is dropped (its holder moves the history on, and the object carries it).
fn elsewhere(ctx: &Context, uid: &str, period_seconds: i64) -> Option<Action> {
    if !ctx.shards.is_sharded() || ctx.shards.holds(uid) {
        return None;
    }
    ctx.forget(uid);
    Some(Action::requeue(period(period_seconds)))
}

/// What the controller does with a reconcile error: retry with a delay, counted by kind.
// The signature is the one kube-runtime's Controller calls.
#[allow(clippy::needless_pass_by_value)]
pub fn error_policy<K>(_obj: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.reconcile.failure(error.metric_label());
    tracing::warn!(error = %error, "reconcile failed; retrying");
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
            tracing::warn!(error = %e, "could not write the decision memory annotation");
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
    ctx.wrote(&subject.uid, subject.version, on_server, native);
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
    tracing::warn!(namespace = %subject.namespace, name = %subject.name, error = message, "invalid autoscaler");
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
    let observed = Observation {
        conflicting_autoscalers: conflicting,
        ..observed
    };
    (observed, prometheus_deadline)
}

/// Lowers `spec.minReplicas` when tuning says to (Apply, while leading); the new minimum, or
/// `None` when nothing was written. A failed write is reported (Warning Event, and the status
/// says it) and the evaluation goes on with the old minimum: tuning is an optimisation, and
/// must not stop the autoscaler from scaling.
async fn apply_tuning(
    subject: &Subject<'_>,
    ctx: &Context,
    tuned: Option<&mut Tuned>,
) -> Option<i32> {
    let tuned = tuned?;
    let to = tuned.tuning.proposed.filter(|_| tuned.tuning.apply)?;
    if !ctx.shards.holds(&subject.uid) {
        return None;
    }
    let native = subject.kind == Kind::Native;
    match tuning::write_min_replicas(ctx, native, &subject.namespace, &subject.name, to).await {
        Ok(()) => {
            ctx.metrics.min_replicas_lowered.inc();
            Some(to)
        }
        Err(e) => {
            let note = format!("could not lower minReplicas to {to}: {e}");
            tracing::warn!(namespace = %subject.namespace, name = %subject.name, error = %e, "minReplicas tuning write failed");
            ctx.events
                .warning(&subject.reference, "FailedTuneMinReplicas", "Tune", &note)
                .await;
            tuned.tuning.apply = false;
            let previous = subject.tuning_status.as_deref();
            tuned.status.previous_min_replicas = previous.and_then(|p| p.previous_min_replicas);
            tuned.status.last_applied_time = previous.and_then(|p| p.last_applied_time.clone());
            tuned.status.message = format!("{}; {note}", tuned.status.message);
            None
        }
    }
}

/// Tuning's Event (while leading), its metrics, and a native HPA's tuning annotation.
async fn report_tuning(subject: &Subject<'_>, ctx: &Context, tuned: Option<&Tuned>) {
    ctx.metrics.tuned(
        &subject.namespace,
        &subject.name,
        tuned.map(|t| (t.tuning.low_load, t.tuning.proposed)),
    );
    let Some(tuned) = tuned else { return };
    if !ctx.shards.holds(&subject.uid) {
        return;
    }
    let previous = subject.tuning_status.as_deref();
    let min_before = subject.spec.min_replicas.unwrap_or(1);
    for (warning, reason, note) in tuning::events(tuned, previous, min_before) {
        if warning {
            ctx.events
                .warning(&subject.reference, reason, "Tune", &note)
                .await;
        } else {
            ctx.events
                .normal(&subject.reference, reason, "Tune", note)
                .await;
        }
    }
    if subject.kind == Kind::Native
        && previous != Some(&tuned.status)
        && let Err(e) =
            tuning::write_native_status(ctx, &subject.namespace, &subject.name, &tuned.status).await
    {
        tracing::warn!(error = %e, "could not write the minReplicasTuning status annotation");
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

/// How the history of an evaluation was resumed ([`memory::resume`]).
struct Restored {
    /// This process held no history of the object: it read the object's.
    first_sight: bool,
    /// Why the object's decision memory was ignored, if it was.
    memory: Option<StoredStateError>,
}

/// The history an evaluation at `at` starts from: this process's own, or on first sight (a
/// restart, a new leader) the one the object carries. Whoever wrote the object's memory may
/// have evaluated until now (see [`memory::resume`]).
fn resume(
    subject: &Subject<'_>,
    ctx: &Context,
    current_replicas: i32,
    at: Timestamp,
) -> (plimsoll_core::horizontal::History, Restored) {
    let own = ctx.history(&subject.uid);
    let resumed = memory::resume(
        own.as_ref(),
        subject.stored.as_deref(),
        current_replicas,
        at,
        at,
    );
    let restored = Restored {
        first_sight: own.is_none(),
        memory: resumed.ignored,
    };
    (resumed.history, restored)
}

/// What this evaluation ignored of the stored state `subject` carries ([`plimsoll_core::stored`]):
/// the decision memory (an annotation that did not parse, or a memory that did not read back),
/// and while tuning or prediction is on, their annotation or history.
fn ignored_state(
    subject: &Subject<'_>,
    memory: Option<StoredStateError>,
    tuned: Option<&Tuned>,
    predicted: Option<&Predicted>,
) -> Vec<Ignored> {
    let [memory_field, tuning_field, predictive_field] = subject.kind.stored_fields();
    let unreadable = &subject.unreadable;
    let parts = [
        (memory_field, unreadable.memory.clone().or(memory)),
        (
            tuning_field,
            tuned.and_then(|t| unreadable.tuning.clone().or_else(|| t.ignored.clone())),
        ),
        (
            predictive_field,
            predicted.and_then(|p| unreadable.predictive.clone().or_else(|| p.ignored.clone())),
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
        tracing::warn!(namespace = %subject.namespace, name = %subject.name, why = %condition.message, "stored state ignored");
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

/// `minReplicasTuning` for this evaluation ([`tuning`]): record, tune, and in Apply lower the
/// minimum; the outcome, and the minimum the decision must use (`None`: the spec's own).
async fn tune(
    subject: &Subject<'_>,
    ctx: &Context,
    pods: &[Arc<PodInfo>],
    observed: &Observation,
    (at, prometheus_deadline): (Timestamp, tokio::time::Instant),
) -> (Option<Tuned>, Option<i32>) {
    let kind = match subject.kind {
        Kind::Plus => "HorizontalPodAutoscalerPlus",
        Kind::Native => "HorizontalPodAutoscaler",
    };
    let mut tuned = tuning::evaluate(
        &tuning::Subject {
            namespace: &subject.namespace,
            kind,
            name: &subject.name,
            labels: &subject.labels,
            pod_labels: pods.iter().map(|p| &p.labels).collect(),
            spec: &subject.spec,
            settings: &subject.tuning,
            previous: subject.tuning_status.as_deref(),
            prometheus_deadline,
        },
        ctx,
        ctx.loads(&subject.uid),
        observed,
        at,
    )
    .await;
    let min = apply_tuning(subject, ctx, tuned.as_mut()).await;
    (tuned, min)
}

/// What `spec.predictive` reads of `subject`, with the spec the decision used and the end of
/// the object's Prometheus budget.
fn predict_subject<'a>(
    subject: &'a Subject,
    spec: &'a HorizontalPodAutoscalerPlusSpec,
    prometheus_deadline: tokio::time::Instant,
) -> crate::predict::Subject<'a> {
    crate::predict::Subject {
        uid: &subject.uid,
        namespace: &subject.namespace,
        name: &subject.name,
        spec,
        previous: subject.predictive_status.as_deref(),
        prometheus_deadline,
    }
}

/// `spec.predictive` for this evaluation ([`crate::predict`]), right after the reactive
/// decision: record, forecast, and in Scale raise the decision before it is written.
async fn predict(
    subject: &Subject<'_>,
    ctx: &Context,
    spec: &HorizontalPodAutoscalerPlusSpec,
    pods: &[Arc<PodInfo>],
    observed: &Observation,
    decision: Decision,
    (at, prometheus_deadline): (Timestamp, tokio::time::Instant),
) -> (Decision, Option<Predicted>) {
    let held = ctx.predictive(&subject.uid);
    let predicted = crate::predict::evaluate(
        &predict_subject(subject, spec, prometheus_deadline),
        ctx,
        held,
        pods,
        observed,
        &decision,
        at,
    )
    .await;
    (
        crate::predict::apply(decision, predicted.as_ref()),
        predicted,
    )
}

/// The prediction's metrics, Event (while leading) and a native HPA's annotation; `series`
/// names the decision's metrics as the per-metric series do.
async fn report_prediction(
    subject: &Subject<'_>,
    ctx: &Context,
    spec: &HorizontalPodAutoscalerPlusSpec,
    (decision, series): (&Decision, &[String]),
    predicted: Option<&Predicted>,
) {
    let native = subject.kind == Kind::Native;
    // Nothing is read from Prometheus by the report.
    let predictive = predict_subject(subject, spec, tokio::time::Instant::now());
    crate::predict::report(
        ctx,
        &predictive,
        &subject.reference,
        native,
        (decision, series),
        predicted,
    )
    .await;
}

/// What an evaluation leaves for the next one, besides the decision.
struct Kept {
    history: plimsoll_core::horizontal::History,
    tuned: Option<Tuned>,
    predicted: Option<Predicted>,
    published: crate::metrics::Published,
    /// The `metric` label of each proposal ([`crate::metrics::series_names`]).
    series: Vec<String>,
}

/// Keeps what the next evaluation of `subject` starts from ([`Memory`]).
fn remember(subject: &Subject<'_>, ctx: &Context, kept: Kept, next: Duration) {
    let Kept {
        history,
        tuned,
        predicted,
        published,
        series,
    } = kept;
    ctx.remember(
        &subject.uid,
        Memory {
            namespace: subject.namespace.clone(),
            name: subject.name.clone(),
            history,
            metric_names: series,
            next_due: Some(Instant::now() + next),
            native: subject.kind == Kind::Native,
            tuning_status: tuned.as_ref().map(|t| t.status.clone()),
            loads: tuned.map(|t| t.loads).unwrap_or_default(),
            predictive: predicted.map(|p| p.held),
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

/// `subject` with the tuning status this process wrote last, which is fresher than the
/// object's: the evaluation that a lowered minReplicas triggers may read the new spec before the
/// status written with it.
fn with_remembered_tuning<'a>(subject: Subject<'a>, ctx: &Context) -> Subject<'a> {
    match ctx.tuning_status(&subject.uid) {
        Some(remembered) => Subject {
            tuning_status: Some(Cow::Owned(remembered)),
            ..subject
        },
        None => subject,
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

/// What the decision steps came to: the spec they used (with a tuned `minReplicas`), when,
/// tuning's outcome, and the decision with prediction's raise.
struct Decided<'a> {
    spec: Cow<'a, HorizontalPodAutoscalerPlusSpec>,
    at: Timestamp,
    tuned: Option<Tuned>,
    decision: Decision,
    predicted: Option<Predicted>,
    restored: Restored,
}

/// Tuning, the reactive decision and prediction, in that order, for what was observed.
async fn decide_all<'a>(
    subject: &'a Subject<'_>,
    ctx: &Context,
    pods: &[Arc<PodInfo>],
    observed: &Observation,
    prometheus_deadline: tokio::time::Instant,
) -> Decided<'a> {
    let at = now();
    let (tuned, tuned_min) = tune(subject, ctx, pods, observed, (at, prometheus_deadline)).await;
    let spec: &HorizontalPodAutoscalerPlusSpec = &subject.spec;
    let spec = match tuned_min {
        Some(min) => Cow::Owned(HorizontalPodAutoscalerPlusSpec {
            min_replicas: Some(min),
            ..spec.clone()
        }),
        None => Cow::Borrowed(spec),
    };
    let (held, restored) = resume(subject, ctx, observed.current_replicas, at);
    let decision = decide(&DecisionInput {
        spec: &spec,
        observed,
        history: &held,
        config: &ctx.config,
        now: at,
    });
    let (decision, predicted) = predict(
        subject,
        ctx,
        &spec,
        pods,
        observed,
        decision,
        (at, prometheus_deadline),
    )
    .await;
    Decided {
        spec,
        at,
        tuned,
        decision,
        predicted,
        restored,
    }
}

/// The steps of one evaluation, in order; each early return is one failure mode of the module
/// doc.
// Over the limit by the --record-dir hook's lines; issue 30's rewrite of this function absorbs it.
#[allow(clippy::too_many_lines)]
async fn run(subject: Subject<'_>, ctx: &Context) -> Result<Action> {
    let subject = with_remembered_tuning(subject, ctx);
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
    let pods = ctx.pods.select(&subject.namespace, &selector);
    let (observed, prometheus_deadline) =
        observe_target(&subject, ctx, (&scale, &selector), &pods).await;
    if abandoned(ctx, &observed) {
        return Ok(Action::await_change());
    }

    let Decided {
        spec,
        at,
        tuned,
        decision,
        predicted,
        restored,
    } = decide_all(&subject, ctx, &pods, &observed, prometheus_deadline).await;
    if abandoned(ctx, &observed) {
        return Ok(Action::await_change());
    }
    let series = crate::metrics::series_names(&spec, &decision);
    let mut history = decision.history.clone();
    let scaled = match write_scale(&subject, ctx, &target, scale.spec_replicas, &decision).await {
        Ok(Written::Nothing) => false,
        Ok(Written::Scaled { from, to }) => {
            history.record_scale(at, from, to);
            true
        }
        Ok(Written::NotLeading) => return Ok(Action::await_change()),
        Err(e) => return fail(&subject, ctx, failed_update_scale(e, &decision, at)).await,
    };
    // --record-dir: what this evaluation observed and decided (crate::record).
    ctx.recorder.evaluated(
        &crate::record::Evaluated {
            object: subject.object,
            uid: &subject.uid,
            spec: &subject.spec,
            used: &spec,
            stored: subject.stored.as_deref(),
            first_sight: restored.first_sight,
            observed: &observed,
            at,
            decision: &decision,
            raise: predicted.as_ref().map(|p| &p.raised),
            scaled,
        },
        &ctx.config,
    );
    report_decision_failures(&subject, ctx, &decision).await;

    // Keep exactly what a successor will read back.
    let stored = memory::store(&history);
    let history = memory::restore(&stored);
    let mut new = status_after(
        &spec,
        subject.previous.as_deref(),
        &decision,
        subject.generation,
        scaled,
        at,
    );
    new.memory = Some(stored);
    new.min_replicas_tuning = tuned.as_ref().map(|t| t.status.clone());
    new.predictive = predicted.as_ref().map(|p| p.status.clone());
    conflict_with_vpas(&subject, ctx, &mut new, at).await;
    let ignored = ignored_state(
        &subject,
        restored.memory,
        tuned.as_ref(),
        predicted.as_ref(),
    );
    stored_state(&subject, ctx, &mut new, &ignored, restored.first_sight, at).await;
    write_decision(&subject, ctx, &new).await?;
    report_tuning(&subject, ctx, tuned.as_ref()).await;
    report_prediction(
        &subject,
        ctx,
        &spec,
        (&decision, &series),
        predicted.as_ref(),
    )
    .await;

    let published = ctx.metrics.observe(
        &subject.namespace,
        &subject.name,
        (&decision, &series),
        ctx.published(&subject.uid),
    );
    let next = period(decision.next_sync_seconds);
    let kept = Kept {
        history,
        tuned,
        predicted,
        published,
        series,
    };
    remember(&subject, ctx, kept, next);
    log_decision(&subject, &decision, scaled);
    Ok(Action::requeue(next))
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
