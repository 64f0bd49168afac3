//! `minReplicasTuning` in the controller: what is I/O of it. The decision itself (record the
//! load, [`plimsoll_core::horizontal::tuning::tune`], the status, the Events) is step 2 of
//! [`plimsoll_core::horizontal::evaluate`]; here are its reads and writes:
//! - on first sight the object's load history (`status.minReplicasTuning.loadHistory`, a native
//!   HPA's [`STATUS_ANNOTATION`]) is topped up from Prometheus for `type: Prometheus` metrics
//!   ([`seed_from_prometheus`], through the one backfill [`crate::seed`]);
//! - the controller's exclusion selector (`--min-replicas-tuning-exclude`, [`Exclusion`]) is
//!   matched against the autoscaler's labels and its pods' labels;
//! - in `Apply`, `spec.minReplicas` is patched ([`write_min_replicas`], merge patch, field
//!   manager `hpa-plus`) before the scale write; the decision already used the lowered minimum;
//! - a native HPA's status goes into its annotation ([`write_native_status`]).
//!
//! Metrics: `low_load`, `min_replicas_tuning_proposal`, `min_replicas_lowered_total`.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use plimsoll_core::api::hpa_plus::{
    HorizontalPodAutoscalerPlus, HorizontalPodAutoscalerPlusSpec, MinReplicasTuning,
    MinReplicasTuningStatus, TuningMode,
};
use plimsoll_core::horizontal::load_history::LoadHistory;
use plimsoll_core::horizontal::proposals::{metric_name, metrics_of};
use plimsoll_core::stored::StoredStateError;
use plimsoll_runtime::selector::Selector;
use serde_json::json;

use crate::error::{Error, Result};
use crate::prometheus::PrometheusMetrics;
use crate::seed::Backfill;
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

    /// The label keys it reads.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.selector.keys()
    }

    /// Whether the autoscaler (its labels) or its workload (any of its pods' labels) matches.
    pub fn matches<'a>(
        &self,
        autoscaler: &BTreeMap<String, String>,
        mut pods: impl Iterator<Item = &'a BTreeMap<String, String>>,
    ) -> bool {
        self.selector.matches(autoscaler) || pods.any(|l| self.selector.matches(l))
    }
}

/// Seeds `loads` from Prometheus ([`crate::seed`]: `max_over_time((query)[1h:])` at the end of
/// each hour) for every `type: Prometheus` metric of `spec` whose history does not cover the
/// lookback yet ([`LoadHistory::backfill_from`]), so that tuning on a metric Prometheus has kept
/// for weeks need not wait a week after the autoscaler is created (or the controller
/// upgraded). A failure is logged and tuning goes on from what it has. The queries end by
/// `deadline`, the object's Prometheus budget.
pub async fn seed_from_prometheus(
    prometheus: &PrometheusMetrics,
    namespace: &str,
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
    // Decided on the history as restored, before anything is read into it.
    let from: BTreeMap<String, i64> = metrics_of(spec)
        .iter()
        .map(metric_name)
        .filter_map(|name| loads.backfill_from(&name, now, days).map(|f| (name, f)))
        .collect();
    let backfill = Backfill {
        from: &|_, name| from.get(name).copied(),
        open: loads.series().bucket_at(now),
        keep_buckets: LoadHistory::keep_buckets(days),
        failure: "could not read the metric's history from Prometheus; tuning records its own",
        namespace,
    };
    crate::seed::seed_from_prometheus(prometheus, spec, loads.series_mut(), &backfill, deadline)
        .await;
}

/// Patches the autoscaler's `spec.minReplicas` to `to` (step 3).
pub async fn write_min_replicas(
    client: &Client,
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
        let api: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), namespace);
        api.patch(name, &params, &Patch::Merge(&body))
            .await
            .map_err(|e| Error::kube(what("HorizontalPodAutoscaler"), e))?;
    } else {
        let api: Api<HorizontalPodAutoscalerPlus> = Api::namespaced(client.clone(), namespace);
        api.patch(name, &params, &Patch::Merge(&body))
            .await
            .map_err(|e| Error::kube(what("HorizontalPodAutoscalerPlus"), e))?;
    }
    Ok(())
}

/// Writes a native HPA's tuning status into its [`STATUS_ANNOTATION`].
pub async fn write_native_status(
    client: &Client,
    namespace: &str,
    name: &str,
    status: &MinReplicasTuningStatus,
) -> Result<()> {
    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), namespace);
    crate::status::write_native_json(
        &api,
        name,
        STATUS_ANNOTATION,
        status,
        "minReplicasTuning status",
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

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
