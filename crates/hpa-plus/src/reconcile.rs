//! One evaluation of one autoscaler: read the target's scale, observe pods and metrics, call
//! the pure [`decide`], write the scale when the decision says so, write status when it
//! changed, publish Events, and requeue after the object's own period.
//!
//! Both kinds go through [`evaluate`]: an HPA+ as it is, a native `autoscaling/v2` HPA after
//! the conversion in `plimsoll-core` (annotations → additions). Writes happen only while this
//! instance leads; a reconcile that loses the lease mid-way writes nothing more.
//!
//! Failures and what they do:
//! - invalid spec or annotations: `ScalingActive=False` (`InvalidSpec`), Warning Event, requeue
//!   after the period (a fix of the object triggers a reconcile at once);
//! - scale subresource unreadable: `AbleToScale=False` (`FailedGetScale`), Warning Event, error
//!   (backoff);
//! - metrics failing: the decision sets `ScalingActive=False` and changes nothing; one Warning
//!   Event per failing metric;
//! - scale write failed: `AbleToScale=False` (`FailedUpdateScale`), Warning Event, error.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference as K8sRef, HorizontalPodAutoscaler,
};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};
use plimsoll_core::api::hpa_plus::{
    HorizontalPodAutoscalerPlus, HorizontalPodAutoscalerPlusSpec, HorizontalPodAutoscalerPlusStatus,
};
use plimsoll_core::horizontal::conditions::{ABLE_TO_SCALE, Condition, SCALING_ACTIVE};
use plimsoll_core::horizontal::status::status_after;
use plimsoll_core::horizontal::{DecisionInput, LimitedBy, decide};
use tracing::{Span, instrument};

use crate::context::{Context, Memory};
use crate::error::{Error, Result};
use crate::observe::{now, observe};
use crate::status;

/// Which API the object came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Plus,
    Native,
}

/// What [`evaluate`] needs of an object, whatever its kind.
struct Subject {
    kind: Kind,
    uid: String,
    namespace: String,
    name: String,
    generation: Option<i64>,
    spec: HorizontalPodAutoscalerPlusSpec,
    previous: Option<HorizontalPodAutoscalerPlusStatus>,
    reference: ObjectReference,
}

/// Reconciles a `HorizontalPodAutoscalerPlus`.
#[instrument(skip_all, fields(namespace, name))]
pub async fn reconcile(obj: Arc<HorizontalPodAutoscalerPlus>, ctx: Arc<Context>) -> Result<Action> {
    let subject = Subject {
        kind: Kind::Plus,
        uid: obj.uid().unwrap_or_default(),
        namespace: obj.namespace().unwrap_or_default(),
        name: obj.name_any(),
        generation: obj.meta().generation,
        spec: obj.spec.clone(),
        previous: obj.status.clone(),
        reference: obj.object_ref(&()),
    };
    run(subject, &ctx).await
}

/// Reconciles a native `autoscaling/v2` `HorizontalPodAutoscaler` (`--native-hpa`).
#[instrument(skip_all, fields(namespace, name))]
pub async fn reconcile_native(
    obj: Arc<HorizontalPodAutoscaler>,
    ctx: Arc<Context>,
) -> Result<Action> {
    let namespace = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let previous = status::from_native(&obj);
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
                spec: HorizontalPodAutoscalerPlusSpec::default(),
                previous,
                reference,
            };
            return invalid(&subject, &ctx, &e.to_string()).await;
        }
    };
    let subject = Subject {
        kind: Kind::Native,
        uid: obj.uid().unwrap_or_default(),
        namespace,
        name,
        generation: obj.meta().generation,
        spec: plus.spec,
        previous,
        reference,
    };
    run(subject, &ctx).await
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

fn period(ctx: &Context, spec: &HorizontalPodAutoscalerPlusSpec) -> Duration {
    let own = i64::from(spec.sync_period_seconds.unwrap_or(0));
    let secs = if own > 0 {
        own
    } else {
        ctx.config.sync_period_seconds
    }
    .max(ctx.config.min_sync_period_seconds)
    .max(1);
    Duration::from_secs(u64::try_from(secs).unwrap_or(5))
}

async fn write_status(
    subject: &Subject,
    ctx: &Context,
    new: &HorizontalPodAutoscalerPlusStatus,
) -> Result<()> {
    let changed = match subject.kind {
        Kind::Plus => status::changed(subject.previous.as_ref(), new),
        Kind::Native => status::changed(
            subject
                .previous
                .as_ref()
                .map(status::native_subset)
                .as_ref(),
            &status::native_subset(new),
        ),
    };
    if !changed || !ctx.leader.is_leader() {
        return Ok(());
    }
    match subject.kind {
        Kind::Plus => {
            let api: Api<HorizontalPodAutoscalerPlus> =
                Api::namespaced(ctx.client.clone(), &subject.namespace);
            status::write_plus(&api, &subject.name, new).await?;
        }
        Kind::Native => {
            let api: Api<HorizontalPodAutoscaler> =
                Api::namespaced(ctx.client.clone(), &subject.namespace);
            status::write_native(&api, &subject.name, new).await?;
        }
    }
    ctx.metrics.status_writes.inc();
    Ok(())
}

/// A spec that cannot be evaluated: condition, Warning Event, wait for a change.
async fn invalid(subject: &Subject, ctx: &Context, message: &str) -> Result<Action> {
    let conditions = [Condition {
        type_: SCALING_ACTIVE,
        status: false,
        reason: "InvalidSpec",
        message: message.to_owned(),
    }];
    let new = status::with_conditions(subject.previous.as_ref(), &conditions, now());
    if ctx.leader.is_leader() && status::changed(subject.previous.as_ref(), &new) {
        ctx.events
            .warning(&subject.reference, "InvalidSpec", "Validate", message)
            .await;
    }
    write_status(subject, ctx, &new).await?;
    tracing::warn!(namespace = %subject.namespace, name = %subject.name, error = message, "invalid autoscaler");
    Ok(Action::requeue(period(ctx, &subject.spec)))
}

// The steps of one evaluation, in order; each early return is one failure mode of the module doc.
#[allow(clippy::too_many_lines)]
async fn run(subject: Subject, ctx: &Context) -> Result<Action> {
    let span = Span::current();
    span.record("namespace", subject.namespace.as_str());
    span.record("name", subject.name.as_str());
    let _timer = ctx.metrics.reconcile.start();
    if !ctx.leader.is_leader() {
        // A follower never acts; the controller is stopped when the lease is lost, this covers
        // a reconcile that was already running.
        return Ok(Action::await_change());
    }
    if let Err(errors) = subject.spec.validate() {
        return invalid(&subject, ctx, &errors.to_string()).await;
    }
    let spec = &subject.spec;
    let target = K8sRef {
        api_version: spec.scale_target_ref.api_version.clone(),
        kind: spec.scale_target_ref.kind.clone(),
        name: spec.scale_target_ref.name.clone(),
    };
    let started = now();
    let scale = match ctx.scale.get(&subject.namespace, &target).await {
        Ok(scale) => scale,
        Err(e) => {
            let message =
                format!("the HPA controller was unable to get the target's current scale: {e}");
            let conditions = [Condition {
                type_: ABLE_TO_SCALE,
                status: false,
                reason: "FailedGetScale",
                message: message.clone(),
            }];
            let new = status::with_conditions(subject.previous.as_ref(), &conditions, started);
            ctx.events
                .warning(&subject.reference, "FailedGetScale", "GetScale", &message)
                .await;
            write_status(&subject, ctx, &new).await?;
            if e.is_not_found() {
                // The target may be created later; look again after the period.
                return Ok(Action::requeue(period(ctx, spec)));
            }
            return Err(e.into());
        }
    };
    let Some(selector) = scale.selector.clone() else {
        let message = format!(
            "the target {}/{} reports no pod selector (status.selector of its scale subresource)",
            target.kind, target.name
        );
        let conditions = [Condition {
            type_: SCALING_ACTIVE,
            status: false,
            reason: "InvalidSelector",
            message: message.clone(),
        }];
        let new = status::with_conditions(subject.previous.as_ref(), &conditions, started);
        if status::changed(subject.previous.as_ref(), &new) {
            ctx.events
                .warning(&subject.reference, "InvalidSelector", "Evaluate", &message)
                .await;
        }
        write_status(&subject, ctx, &new).await?;
        return Ok(Action::requeue(period(ctx, spec)));
    };
    let pods = ctx.pods.select(&subject.namespace, &selector);
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
        &selector,
        pods.iter().map(|p| &p.labels),
    );
    let mut observed = observe(
        ctx,
        &subject.namespace,
        spec,
        scale.spec_replicas,
        scale.status_replicas,
        &selector,
        &pods,
    )
    .await;
    observed.conflicting_autoscalers = conflicting;

    let at = now();
    let history = ctx.history(&subject.uid);
    let decision = decide(&DecisionInput {
        spec,
        observed: &observed,
        history: &history,
        config: &ctx.config,
        now: at,
    });
    let mut history = decision.history.clone();

    // Write the scale (only while leading; the gates are inside the decision).
    let mut scaled = false;
    if let Some(to) = decision.scale_to.filter(|to| *to != scale.spec_replicas) {
        if !ctx.leader.is_leader() {
            return Ok(Action::await_change());
        }
        match ctx
            .scale
            .set_replicas(&subject.namespace, &target, to)
            .await
        {
            Ok(_) => {
                scaled = true;
                history.record_scale(at, scale.spec_replicas, to);
                ctx.metrics.rescaled(scale.spec_replicas, to);
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
                        format!("New size: {to}; was {}{reason}", scale.spec_replicas),
                    )
                    .await;
            }
            Err(e) => {
                let message =
                    format!("the HPA controller was unable to update the target scale: {e}");
                let mut conditions = decision.conditions.clone();
                conditions.retain(|c| c.type_ != ABLE_TO_SCALE);
                conditions.push(Condition {
                    type_: ABLE_TO_SCALE,
                    status: false,
                    reason: "FailedUpdateScale",
                    message: message.clone(),
                });
                let new = status::with_conditions(subject.previous.as_ref(), &conditions, at);
                ctx.events
                    .warning(&subject.reference, "FailedRescale", "Scale", &message)
                    .await;
                write_status(&subject, ctx, &new).await?;
                return Err(e.into());
            }
        }
    }

    // Warning Events for failures the decision reports.
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

    let new = status_after(
        spec,
        subject.previous.as_ref(),
        &decision,
        subject.generation,
        scaled,
        at,
    );
    write_status(&subject, ctx, &new).await?;

    ctx.metrics
        .observe(&subject.namespace, &subject.name, &decision);
    let next = period(ctx, spec);
    ctx.remember(
        &subject.uid,
        Memory {
            namespace: subject.namespace.clone(),
            name: subject.name.clone(),
            history,
            metric_names: decision
                .proposals
                .iter()
                .map(|p| p.metric.clone())
                .collect(),
            next_due: Some(Instant::now() + next),
            native: subject.kind == Kind::Native,
        },
    );
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
    Ok(Action::requeue(next))
}
