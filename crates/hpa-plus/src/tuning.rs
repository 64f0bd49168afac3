//! `minReplicasTuning` in the controller: record the evaluation's load, call the pure
//! [`tune`], and apply what it decided.
//!
//! Each evaluation of an object whose tuning is not `Off`:
//! 1. the load of each metric is recorded into the object's hourly [`LoadHistory`] (held in
//!    memory, and on first sight restored from `status.minReplicasTuning.loadHistory`, or for a
//!    native HPA from the [`STATUS_ANNOTATION`], then topped up from Prometheus for
//!    `type: Prometheus` metrics: [`seed_from_prometheus`]), through the same [`record_loads`]
//!    the replay calls;
//! 2. [`tune`] decides with the CronHPA hold ([`tuning_hold`]) and the controller's exclusion
//!    selector (`--min-replicas-tuning-exclude`, matched against the autoscaler's labels and its
//!    pods' labels);
//! 3. in `Apply`, `spec.minReplicas` is patched (merge patch, field manager `hpa-plus`) before
//!    the decision, which already uses the lowered minimum, as the replay does;
//! 4. the status carries what tuning proposed, why, the value it replaced and the history.
//!
//! Events: `MinReplicasLowered` when Apply lowers the minimum, `MinReplicasTuningProposal` when
//! a Report proposal appears or changes, a Warning `LowLoad` when the low-load flag turns on.
//! Metrics: `low_load`, `min_replicas_tuning_proposal`, `min_replicas_lowered_total`.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::Api;
use kube::api::{Patch, PatchParams};
use plimsoll_core::api::hpa_plus::{
    HorizontalPodAutoscalerPlus, HorizontalPodAutoscalerPlusSpec, MinReplicasTuning,
    MinReplicasTuningStatus, TuningMode,
};
use plimsoll_core::horizontal::Observation;
use plimsoll_core::horizontal::cron_hold::tuning_hold;
use plimsoll_core::horizontal::load_history::LoadHistory;
use plimsoll_core::horizontal::proposals::{metric_name, metrics_of};
use plimsoll_core::horizontal::tuning::{
    Tuning, TuningInput, record_loads, times_ready, tune, tuning_status,
};
use plimsoll_core::stored::StoredStateError;
use plimsoll_runtime::selector::Selector;
use serde_json::json;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::status::FIELD_MANAGER;

/// A native HPA's `status.minReplicasTuning` (its status has no field for it), as JSON.
pub const STATUS_ANNOTATION: &str = "plimsoll.dev/min-replicas-tuning-status";

/// The tuning status a native HPA carries in its [`STATUS_ANNOTATION`]: `Ok(None)` when absent,
/// an error when unreadable (tuning then starts over, as with no history, and says so).
pub fn from_annotations(
    annotations: &BTreeMap<String, String>,
) -> std::result::Result<Option<MinReplicasTuningStatus>, StoredStateError> {
    plimsoll_core::stored::annotation(annotations, STATUS_ANNOTATION)
}

/// The controller's exclusion selector (`--min-replicas-tuning-exclude`) with its text.
#[derive(Clone, Debug)]
pub struct Exclusion {
    /// As given on the command line, for messages.
    pub text: String,
    /// The parsed selector.
    pub selector: Selector,
}

impl Exclusion {
    /// Parses `--min-replicas-tuning-exclude`.
    pub fn parse(text: &str) -> Result<Self> {
        let selector = Selector::parse(text)
            .map_err(|e| Error::Config(format!("--min-replicas-tuning-exclude {text:?}: {e}")))?;
        Ok(Self {
            text: text.to_owned(),
            selector,
        })
    }

    /// Whether the autoscaler (its labels) or its workload (any of its pods' labels) matches.
    fn matches<'a>(
        &self,
        autoscaler: &BTreeMap<String, String>,
        mut pods: impl Iterator<Item = &'a BTreeMap<String, String>>,
    ) -> bool {
        self.selector.matches(autoscaler) || pods.any(|l| self.selector.matches(l))
    }
}

/// What one object's tuning needs from the reconcile.
pub struct Subject<'a> {
    /// Namespace and name of the autoscaler.
    pub namespace: &'a str,
    /// Its kind (`HorizontalPodAutoscalerPlus` or `HorizontalPodAutoscaler`).
    pub kind: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its labels.
    pub labels: &'a BTreeMap<String, String>,
    /// The labels of its workload's pods.
    pub pod_labels: Vec<&'a BTreeMap<String, String>>,
    /// The spec (its `minReplicas` is the current one).
    pub spec: &'a HorizontalPodAutoscalerPlusSpec,
    /// The settings in force (spec, else annotations).
    pub settings: &'a MinReplicasTuning,
    /// The tuning status the object carries.
    pub previous: Option<&'a MinReplicasTuningStatus>,
    /// When this evaluation's Prometheus queries must have ended (the object's budget).
    pub prometheus_deadline: tokio::time::Instant,
}

/// Seeds `loads` from Prometheus for every `type: Prometheus` metric of `spec` whose history
/// does not cover the lookback yet, so that tuning on a metric Prometheus has kept for weeks
/// need not wait a week after the autoscaler is created (or the controller upgraded). Only
/// metrics whose recorded load is the query's value itself are seeded (not `Value` targets or
/// absolute watermarks, which record the value times the ready pods, a count Prometheus does
/// not hold). A failure is logged and tuning goes on from what it has. The queries end by
/// `deadline`, the object's Prometheus budget.
pub async fn seed_from_prometheus(
    ctx: &Context,
    spec: &HorizontalPodAutoscalerPlusSpec,
    settings: &MinReplicasTuning,
    loads: &mut LoadHistory,
    now: Timestamp,
    deadline: tokio::time::Instant,
) {
    if settings.mode == TuningMode::Off {
        return;
    }
    let days = settings.lookback_days();
    for m in metrics_of(spec).iter() {
        let Some(p) = m.prometheus.as_ref() else {
            continue;
        };
        let name = metric_name(m);
        if times_ready(m, spec) || loads.covers(&name, now, days) {
            continue;
        }
        let Some(address) = ctx.prometheus.address_of(p).map(str::to_owned) else {
            continue;
        };
        match ctx
            .prometheus
            .hourly_peaks(&address, &p.query, days, now, deadline)
            .await
        {
            Ok(peaks) => {
                for (at, value) in peaks {
                    loads.record(&name, at, value, days);
                }
            }
            Err(e) => {
                crate::prometheus::log_failure(
                    &address,
                    &e,
                    "could not read the metric's history from Prometheus; tuning records its own",
                );
            }
        }
    }
}

/// What tuning came to at one evaluation.
pub struct Tuned {
    /// What [`tune`] decided.
    pub tuning: Tuning,
    /// The history after this evaluation's record.
    pub loads: LoadHistory,
    /// `status.minReplicasTuning`.
    pub status: MinReplicasTuningStatus,
    /// Why the load history the object carries was ignored on first sight, if it was.
    pub ignored: Option<StoredStateError>,
}

/// Records the load and tunes (steps 1 and 2 of the module docs); `None` when tuning is off.
/// `held` is this process's history for the object (`None` on first sight: then the history
/// the object carries, topped up from Prometheus by [`seed_from_prometheus`]).
pub async fn evaluate(
    subject: &Subject<'_>,
    ctx: &Context,
    held: Option<LoadHistory>,
    observed: &Observation,
    now: Timestamp,
) -> Option<Tuned> {
    let settings = subject.settings;
    if settings.mode == TuningMode::Off {
        return None;
    }
    let mut ignored = None;
    let mut loads = if let Some(loads) = held {
        loads
    } else {
        let mut loads = match subject
            .previous
            .and_then(|p| p.load_history.as_ref())
            .map(LoadHistory::try_restore)
        {
            Some(Ok(loads)) => loads,
            Some(Err(why)) => {
                ignored = Some(why);
                LoadHistory::default()
            }
            None => LoadHistory::default(),
        };
        seed_from_prometheus(
            ctx,
            subject.spec,
            settings,
            &mut loads,
            now,
            subject.prometheus_deadline,
        )
        .await;
        loads
    };
    record_loads(
        &mut loads,
        subject.spec,
        observed,
        now,
        settings.lookback_days(),
    );
    let held_by = tuning_hold(
        ctx.crons.state().iter().map(AsRef::as_ref),
        subject.namespace,
        (subject.kind, subject.name),
        &subject.spec.scale_target_ref,
    );
    let excluded = ctx
        .tuning_exclude
        .as_ref()
        .filter(|e| e.matches(subject.labels, subject.pod_labels.iter().copied()));
    // One pod of the workload stands for its requests (utilization targets); without a pod
    // the need of such a target cannot be computed and tuning says so.
    let pod = observed.pods.first().cloned().unwrap_or_default();
    let tuning = tune(&TuningInput {
        spec: subject.spec,
        settings,
        history: &loads,
        pod: &pod,
        config: &ctx.config,
        last_applied: subject
            .previous
            .and_then(|p| p.last_applied_time.as_ref())
            .map(|t| t.0),
        held_by: held_by.as_deref(),
        excluded_by: excluded.map(|e| e.text.as_str()),
        now,
    });
    let status = tuning_status(
        &tuning,
        subject.previous,
        subject.spec.min_replicas.unwrap_or(1),
        &loads,
        now,
    );
    Some(Tuned {
        tuning,
        loads,
        status,
        ignored,
    })
}

/// Patches the autoscaler's `spec.minReplicas` to `to` (step 3).
pub async fn write_min_replicas(
    ctx: &Context,
    native: bool,
    namespace: &str,
    name: &str,
    to: i32,
) -> Result<()> {
    let body = json!({"spec": {"minReplicas": to}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let what = |kind: &str| format!("lower minReplicas of {kind} {name}");
    if native {
        let api: Api<HorizontalPodAutoscaler> = Api::namespaced(ctx.client.clone(), namespace);
        api.patch(name, &params, &Patch::Merge(&body))
            .await
            .map_err(|e| Error::kube(what("HorizontalPodAutoscaler"), e))?;
    } else {
        let api: Api<HorizontalPodAutoscalerPlus> = Api::namespaced(ctx.client.clone(), namespace);
        api.patch(name, &params, &Patch::Merge(&body))
            .await
            .map_err(|e| Error::kube(what("HorizontalPodAutoscalerPlus"), e))?;
    }
    Ok(())
}

/// Writes a native HPA's tuning status into its [`STATUS_ANNOTATION`].
pub async fn write_native_status(
    ctx: &Context,
    namespace: &str,
    name: &str,
    status: &MinReplicasTuningStatus,
) -> Result<()> {
    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(ctx.client.clone(), namespace);
    crate::status::write_native_json(
        &api,
        name,
        STATUS_ANNOTATION,
        status,
        "minReplicasTuning status",
    )
    .await
}

/// The Events tuning owes the user after this evaluation, each `(warning, reason, note)`: a
/// lowered minimum, a new or changed Report proposal, and the low-load flag turning on (a
/// proposal and the flag often come together; both are said).
pub fn events(
    tuned: &Tuned,
    previous: Option<&MinReplicasTuningStatus>,
    min_before: i32,
) -> Vec<(bool, &'static str, String)> {
    let t = &tuned.tuning;
    let mut out = Vec::new();
    if t.apply {
        out.push((
            false,
            "MinReplicasLowered",
            format!(
                "minReplicas lowered from {min_before} to {}: {}",
                t.proposed.unwrap_or(min_before),
                t.message
            ),
        ));
    } else if t.proposed.is_some() && t.proposed != previous.and_then(|p| p.proposed) {
        out.push((false, "MinReplicasTuningProposal", t.message.clone()));
    }
    if t.low_load && !previous.is_some_and(|p| p.low_load) {
        out.push((
            true,
            "LowLoad",
            format!(
                "the weighted daily peaks need {} replicas, fewer than half of minReplicas \
                 {min_before}: {}",
                t.needed.unwrap_or_default(),
                t.message
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use plimsoll_core::horizontal::tuning::TuningReason;

    use super::*;

    fn tuned(proposed: Option<i32>, low_load: bool, apply: bool) -> Tuned {
        let tuning = Tuning {
            proposed,
            needed: Some(3),
            peaks: Vec::new(),
            reason: TuningReason::Lowered,
            low_load,
            apply,
            message: "the weighted peaks of 7 days need 3 replicas".into(),
        };
        let status = MinReplicasTuningStatus {
            proposed,
            low_load,
            ..MinReplicasTuningStatus::default()
        };
        Tuned {
            tuning,
            loads: LoadHistory::default(),
            status,
            ignored: None,
        }
    }

    fn reasons(events: &[(bool, &'static str, String)]) -> Vec<&'static str> {
        events.iter().map(|e| e.1).collect()
    }

    #[test]
    fn a_proposal_and_low_load_arriving_together_are_both_said_once() {
        let first = tuned(Some(3), true, false);
        let said = events(&first, None, 10);
        assert_eq!(reasons(&said), ["MinReplicasTuningProposal", "LowLoad"]);
        assert!(said[1].0, "LowLoad is a Warning");
        // The next evaluation, with the same proposal and the flag still on, says nothing.
        assert!(events(&tuned(Some(3), true, false), Some(&first.status), 10).is_empty());
        // A changed proposal is said again; the flag is not.
        assert_eq!(
            reasons(&events(
                &tuned(Some(2), true, false),
                Some(&first.status),
                10
            )),
            ["MinReplicasTuningProposal"]
        );
    }

    #[test]
    fn applying_says_what_was_replaced() {
        let said = events(&tuned(Some(3), false, true), None, 10);
        assert_eq!(reasons(&said), ["MinReplicasLowered"]);
        assert!(
            said[0].2.starts_with("minReplicas lowered from 10 to 3"),
            "{}",
            said[0].2
        );
    }

    #[test]
    fn the_exclusion_matches_the_autoscaler_or_any_pod() {
        let exclusion = Exclusion::parse("tier in (quorum)").unwrap();
        let quorum: BTreeMap<String, String> = [("tier".into(), "quorum".into())].into();
        let web: BTreeMap<String, String> = [("tier".into(), "web".into())].into();
        assert!(exclusion.matches(&quorum, std::iter::empty()));
        assert!(exclusion.matches(&web, [&web, &quorum].into_iter()));
        assert!(!exclusion.matches(&web, [&web].into_iter()));
        assert!(Exclusion::parse("tier in (").is_err());
    }
}
