//! Whether a workload is in the middle of a rollout (a pod-template change being rolled out),
//! for `pauseDuringRollout`: scaling while old and new pods coexist makes the metrics of both
//! mix and fights the rollout's own surge. Pure functions of the object; reading it is the
//! service's job (`plimsoll_runtime::scale::ScaleClient::rollout`).
//!
//! `Deployment` (after kubectl's `rollout status`, minus the availability wait, so a plain
//! scale-up does not count as a rollout):
//! - `metadata.generation > status.observedGeneration`: the controller has not seen the spec;
//! - `status.updatedReplicas < spec.replicas`: new-template pods still missing;
//! - `status.replicas > status.updatedReplicas`: old-template pods still running;
//! - `Progressing=False` with reason `ProgressDeadlineExceeded` makes it [`Rollout::Stalled`]
//!   instead — a stuck rollout must not block autoscaling forever.
//!
//! `StatefulSet`: generation not observed; with a `RollingUpdate` partition, fewer than
//! `replicas - partition` pods updated; otherwise `updateRevision != currentRevision`.
//! `OnDelete` `StatefulSets` never report a rollout (pods change only when deleted).
//!
//! Any other kind ([`generic`]: Argo `Rollout`, `OpenKruise` `CloneSet`, `StatefulSetPlus`-style
//! custom resources) is read by the conventions those controllers share with `Deployment`:
//! `status.observedGeneration` (an integer, or Argo's integer in a string) and
//! `status.updatedReplicas`, with `spec.replicas` as the desired count (`status.replicas` when
//! the spec has none) and an integer or percent partition at `spec.updateStrategy.partition` or
//! `spec.updateStrategy.rollingUpdate.partition`. Readiness is not waited for, as for
//! `Deployment`. A status without `observedGeneration` or `updatedReplicas` is
//! [`Rollout::Unknown`]: the autoscaler cannot tell, and says so in the
//! [`PAUSED_FOR_ROLLOUT`] condition rather than treating the target as settled in silence.
//!
//! [`RolloutState`] is the generation view of a workload that [`Observation`]
//! carries (and that `replay` scenarios write); [`Rollout::state`] gives it for a verdict, and
//! no view at all for an unknown one.

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use serde_json::Value;

use super::conditions::Condition;
use super::observation::Observation;
use crate::api::hpa_plus::HorizontalPodAutoscalerPlusSpec;

/// Condition type set while `pauseDuringRollout` is on: True while a rollout holds scaling,
/// False (`NoRolloutInProgress` or `RolloutStateUnknown`) otherwise.
pub const PAUSED_FOR_ROLLOUT: &str = "PausedForRollout";

/// The generation view of a target's rollout, as the decision's `pauseDuringRollout` gate
/// reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutState {
    /// `metadata.generation` of the workload.
    pub generation: i64,
    /// `status.observedGeneration` of the workload.
    pub observed_generation: i64,
    /// `status.updatedReplicas`.
    pub updated_replicas: i32,
    /// `spec.replicas`.
    pub desired_replicas: i32,
}

impl RolloutState {
    /// A rollout is in progress while the controller has not observed the latest generation or
    /// fewer replicas than desired run the latest template.
    pub fn in_progress(&self) -> bool {
        self.observed_generation < self.generation || self.updated_replicas < self.desired_replicas
    }
}

/// Where a workload stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rollout {
    /// No rollout in progress.
    Settled,
    /// A rollout is in progress; the reason says which check failed.
    InProgress(String),
    /// The rollout exceeded its progress deadline and is not expected to finish on its own.
    Stalled(String),
    /// The workload's status does not follow the rollout conventions (no
    /// `observedGeneration` or `updatedReplicas`); the reason says what is missing.
    Unknown(String),
}

impl Rollout {
    /// True only for [`Rollout::InProgress`].
    pub fn is_in_progress(&self) -> bool {
        matches!(self, Self::InProgress(_))
    }

    /// The generation view of this verdict, for [`Observation::rollout`](super::Observation):
    /// a rollout in progress reads as a generation the workload controller has not observed
    /// yet; a settled or stalled one as fully rolled out at `replicas`; an unknown one has no
    /// view (`None`). Either way [`RolloutState::in_progress`] agrees with
    /// [`Rollout::is_in_progress`].
    pub fn state(&self, replicas: i32) -> Option<RolloutState> {
        match self {
            Self::InProgress(_) => Some(RolloutState {
                generation: 1,
                observed_generation: 0,
                updated_replicas: 0,
                desired_replicas: replicas,
            }),
            Self::Settled | Self::Stalled(_) => Some(RolloutState {
                generation: 1,
                observed_generation: 1,
                updated_replicas: replicas,
                desired_replicas: replicas,
            }),
            Self::Unknown(_) => None,
        }
    }
}

/// The [`PAUSED_FOR_ROLLOUT`] condition of a decision, only when `spec.pauseDuringRollout` is
/// on. An observation without a rollout state (the target's kind does not follow the rollout
/// conventions, or its object could not be read) gives False with reason `RolloutStateUnknown`,
/// so a user sees that the pause cannot work for this target.
pub fn condition(
    spec: &HorizontalPodAutoscalerPlusSpec,
    observed: &Observation,
) -> Option<Condition> {
    if !spec.pause_during_rollout {
        return None;
    }
    Some(match observed.rollout {
        Some(state) if state.in_progress() => Condition::new(
            PAUSED_FOR_ROLLOUT,
            true,
            "RolloutInProgress",
            "the target is rolling out; scaling waits until the rollout completes",
        ),
        Some(_) => Condition::new(
            PAUSED_FOR_ROLLOUT,
            false,
            "NoRolloutInProgress",
            "the target is not rolling out",
        ),
        None => Condition::new(
            PAUSED_FOR_ROLLOUT,
            false,
            "RolloutStateUnknown",
            "pauseDuringRollout is set, but the target's rollout state is unknown (its status has \
             no observedGeneration or updatedReplicas, or it could not be read); scaling goes on \
             as if no rollout were in progress",
        ),
    })
}

/// The rollout state of a `Deployment`.
pub fn deployment(deployment: &Deployment) -> Rollout {
    let generation = deployment.metadata.generation.unwrap_or(0);
    let status = deployment.status.clone().unwrap_or_default();
    let observed = status.observed_generation.unwrap_or(0);
    if generation > observed {
        return Rollout::InProgress(format!(
            "generation {generation} not yet observed (observed {observed})"
        ));
    }
    let stalled = status.conditions.iter().flatten().any(|c| {
        c.type_ == "Progressing"
            && c.status == "False"
            && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
    });
    let desired = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let updated = status.updated_replicas.unwrap_or(0);
    let total = status.replicas.unwrap_or(0);
    let in_progress = if updated < desired {
        Some(format!("{updated} of {desired} replicas updated"))
    } else if total > updated {
        Some(format!(
            "{} old replicas pending termination",
            total - updated
        ))
    } else {
        None
    };
    match (in_progress, stalled) {
        (None, _) => Rollout::Settled,
        (Some(reason), true) => Rollout::Stalled(format!("progress deadline exceeded: {reason}")),
        (Some(reason), false) => Rollout::InProgress(reason),
    }
}

/// The rollout state of a `StatefulSet`.
pub fn statefulset(statefulset: &StatefulSet) -> Rollout {
    let spec = statefulset.spec.clone().unwrap_or_default();
    let strategy = spec.update_strategy.unwrap_or_default();
    if strategy.type_.as_deref() == Some("OnDelete") {
        return Rollout::Settled;
    }
    let generation = statefulset.metadata.generation.unwrap_or(0);
    let status = statefulset.status.clone().unwrap_or_default();
    let observed = status.observed_generation.unwrap_or(0);
    if generation > observed {
        return Rollout::InProgress(format!(
            "generation {generation} not yet observed (observed {observed})"
        ));
    }
    let desired = spec.replicas.unwrap_or(1);
    let partition = strategy
        .rolling_update
        .and_then(|r| r.partition)
        .unwrap_or(0);
    let updated = status.updated_replicas.unwrap_or(0);
    if partition > 0 {
        let want = (desired - partition).max(0);
        return if updated < want {
            Rollout::InProgress(format!(
                "{updated} of {want} replicas above partition {partition} updated"
            ))
        } else {
            Rollout::Settled
        };
    }
    match (&status.update_revision, &status.current_revision) {
        (Some(update), Some(current)) if update != current => Rollout::InProgress(format!(
            "{updated} of {desired} replicas at revision {update}"
        )),
        _ => Rollout::Settled,
    }
}

/// The rollout state of any other workload kind, from its object as JSON (`metadata`, `spec`,
/// `status`), by the conventions in the module docs.
pub fn generic(object: &Value) -> Rollout {
    let status = object.get("status").unwrap_or(&Value::Null);
    let Some(observed) = status.get("observedGeneration").and_then(integer) else {
        return Rollout::Unknown(
            "the target's status has no observedGeneration (or it is not a number)".into(),
        );
    };
    let Some(updated) = status.get("updatedReplicas").and_then(integer) else {
        return Rollout::Unknown("the target's status has no updatedReplicas".into());
    };
    let generation = object
        .pointer("/metadata/generation")
        .and_then(integer)
        .unwrap_or(0);
    if generation > observed {
        return Rollout::InProgress(format!(
            "generation {generation} not yet observed (observed {observed})"
        ));
    }
    let replicas = status.get("replicas").and_then(integer);
    let desired = object
        .pointer("/spec/replicas")
        .and_then(integer)
        .or(replicas)
        .unwrap_or(1);
    let partition = [
        "/spec/updateStrategy/partition",
        "/spec/updateStrategy/rollingUpdate/partition",
    ]
    .iter()
    .find_map(|path| object.pointer(path))
    .map_or(0, |p| partition_of(p, desired));
    let want = (desired - partition).max(0);
    let in_progress = if updated < want {
        Some(if partition > 0 {
            format!("{updated} of {want} replicas above partition {partition} updated")
        } else {
            format!("{updated} of {desired} replicas updated")
        })
    } else if partition == 0 && replicas.is_some_and(|total| total > updated) {
        // With a partition, old-revision pods stay by design; without one they are leaving.
        let old = replicas.unwrap_or(0) - updated;
        Some(format!("{old} old replicas pending termination"))
    } else {
        None
    };
    let stalled = status
        .get("conditions")
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Progressing")
                    && c.get("status").and_then(Value::as_str) == Some("False")
                    && c.get("reason").and_then(Value::as_str) == Some("ProgressDeadlineExceeded")
            })
        });
    match (in_progress, stalled) {
        (None, _) => Rollout::Settled,
        (Some(reason), true) => Rollout::Stalled(format!("progress deadline exceeded: {reason}")),
        (Some(reason), false) => Rollout::InProgress(reason),
    }
}

/// An integer field, also when written as a decimal string (Argo Rollouts'
/// `status.observedGeneration`); counts beyond `i32` are not counts, so they do not read.
fn integer<T: TryFrom<i64>>(v: &Value) -> Option<T> {
    let n = match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }?;
    T::try_from(n).ok()
}

/// Pods kept at the old revision: an integer, or a percent of `desired` rounded up (as
/// `OpenKruise` scales `partition`).
fn partition_of(v: &Value, desired: i32) -> i32 {
    let percent = v
        .as_str()
        .and_then(|s| s.trim().strip_suffix('%'))
        .and_then(|p| p.trim().parse::<i64>().ok());
    let n = match percent {
        // The workload's author writes any percent; past the i64 range it saturates, which
        // the clamp below turns into all pods (or none), as the exact product would.
        Some(p) => i64::from(desired)
            .saturating_mul(p)
            .saturating_add(99)
            .div_euclid(100),
        None => integer::<i64>(v).unwrap_or(0),
    };
    i32::try_from(n.clamp(0, i64::from(desired.max(0)))).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{
        DeploymentCondition, DeploymentSpec, DeploymentStatus, RollingUpdateStatefulSetStrategy,
        StatefulSetSpec, StatefulSetStatus, StatefulSetUpdateStrategy,
    };

    /// Builder for `Deployments` in a given rollout position.
    struct D(Deployment);

    impl D {
        fn new(desired: i32) -> Self {
            let mut d = Deployment::default();
            d.metadata.generation = Some(2);
            d.spec = Some(DeploymentSpec {
                replicas: Some(desired),
                ..DeploymentSpec::default()
            });
            d.status = Some(DeploymentStatus {
                observed_generation: Some(2),
                replicas: Some(desired),
                updated_replicas: Some(desired),
                available_replicas: Some(desired),
                ..DeploymentStatus::default()
            });
            Self(d)
        }
        fn status(mut self, f: impl FnOnce(&mut DeploymentStatus)) -> Self {
            f(self.0.status.as_mut().unwrap());
            self
        }
        fn generation(mut self, g: i64) -> Self {
            self.0.metadata.generation = Some(g);
            self
        }
    }

    // Cases follow kubectl pkg/polymorphichelpers/rollout_status_test.go TestDeploymentStatusViewerStatus.
    #[test]
    fn deployment_states() {
        assert_eq!(deployment(&D::new(3).0), Rollout::Settled);
        assert!(deployment(&D::new(3).generation(3).0).is_in_progress());
        let updating = D::new(3).status(|s| {
            s.updated_replicas = Some(1);
            s.replicas = Some(4);
        });
        assert_eq!(
            deployment(&updating.0),
            Rollout::InProgress("1 of 3 replicas updated".into())
        );
        let old_pods = D::new(3).status(|s| s.replicas = Some(5));
        assert_eq!(
            deployment(&old_pods.0),
            Rollout::InProgress("2 old replicas pending termination".into())
        );
        // New pods not yet available after a plain scale-up: not a rollout.
        let scaling = D::new(5).status(|s| s.available_replicas = Some(3));
        assert_eq!(deployment(&scaling.0), Rollout::Settled);
        let stalled = D::new(3).status(|s| {
            s.updated_replicas = Some(1);
            s.conditions = Some(vec![DeploymentCondition {
                type_: "Progressing".into(),
                status: "False".into(),
                reason: Some("ProgressDeadlineExceeded".into()),
                ..DeploymentCondition::default()
            }]);
        });
        let state = deployment(&stalled.0);
        assert!(matches!(state, Rollout::Stalled(_)), "{state:?}");
        assert!(!state.is_in_progress());
        // Just created: the controller has not observed generation 1 yet.
        let mut fresh = Deployment::default();
        fresh.metadata.generation = Some(1);
        assert!(deployment(&fresh).is_in_progress());
    }

    fn sts(
        desired: i32,
        update: &str,
        current: &str,
        partition: Option<i32>,
        updated: i32,
    ) -> StatefulSet {
        let mut s = StatefulSet::default();
        s.metadata.generation = Some(1);
        s.spec = Some(StatefulSetSpec {
            replicas: Some(desired),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: partition.map(|p| RollingUpdateStatefulSetStrategy {
                    partition: Some(p),
                    ..RollingUpdateStatefulSetStrategy::default()
                }),
            }),
            ..StatefulSetSpec::default()
        });
        s.status = Some(StatefulSetStatus {
            observed_generation: Some(1),
            replicas: desired,
            updated_replicas: Some(updated),
            update_revision: Some(update.into()),
            current_revision: Some(current.into()),
            ..StatefulSetStatus::default()
        });
        s
    }

    // Cases follow kubectl pkg/polymorphichelpers/rollout_status_test.go TestStatefulSetStatusViewerStatus.
    #[test]
    fn statefulset_states() {
        assert_eq!(statefulset(&sts(3, "r1", "r1", None, 3)), Rollout::Settled);
        assert_eq!(
            statefulset(&sts(3, "r2", "r1", None, 1)),
            Rollout::InProgress("1 of 3 replicas at revision r2".into())
        );
        assert!(statefulset(&sts(5, "r2", "r1", Some(2), 2)).is_in_progress());
        assert_eq!(
            statefulset(&sts(5, "r2", "r1", Some(2), 3)),
            Rollout::Settled
        );
        let mut unobserved = sts(3, "r1", "r1", None, 3);
        unobserved.metadata.generation = Some(2);
        assert!(statefulset(&unobserved).is_in_progress());
        let mut on_delete = sts(3, "r2", "r1", None, 0);
        on_delete.spec.as_mut().unwrap().update_strategy = Some(StatefulSetUpdateStrategy {
            type_: Some("OnDelete".into()),
            rolling_update: None,
        });
        assert_eq!(statefulset(&on_delete), Rollout::Settled);
    }

    #[test]
    fn the_generation_view_agrees_with_the_verdict() {
        for (verdict, rolling) in [
            (Rollout::Settled, false),
            (Rollout::InProgress("1 of 3 replicas updated".into()), true),
            (Rollout::Stalled("progress deadline exceeded".into()), false),
        ] {
            let state = verdict
                .state(3)
                .expect("a known verdict has a generation view");
            assert_eq!(state.in_progress(), rolling, "{verdict:?}");
            assert_eq!(verdict.is_in_progress(), rolling, "{verdict:?}");
        }
        let unknown = Rollout::Unknown("no observedGeneration".into());
        assert_eq!(unknown.state(3), None);
        assert!(!unknown.is_in_progress());
    }

    /// A custom resource with `spec.replicas`, `metadata.generation` and the given status.
    fn custom(desired: i32, generation: i64, status: &Value) -> Value {
        serde_json::json!({
            "apiVersion": "example.com/v1", "kind": "WebApp",
            "metadata": {"name": "web", "generation": generation},
            "spec": {"replicas": desired},
            "status": status,
        })
    }

    // Argo Rollouts (observedGeneration as a string), OpenKruise CloneSet (integer, partition)
    // and a StatefulSetPlus-style status, in progress and settled.
    #[test]
    fn generic_workloads_by_the_rollout_conventions() {
        use serde_json::json;
        let settled = json!({"observedGeneration": 3, "replicas": 4, "updatedReplicas": 4, "readyReplicas": 4});
        assert_eq!(generic(&custom(4, 3, &settled)), Rollout::Settled);
        // The spec changed and the controller has not caught up.
        assert_eq!(
            generic(&custom(4, 4, &settled)),
            Rollout::InProgress("generation 4 not yet observed (observed 3)".into())
        );
        // Argo Rollouts writes observedGeneration as a string; a canary at 1 of 4.
        let argo = json!({"observedGeneration": "7", "replicas": 5, "updatedReplicas": 1,
            "readyReplicas": 5, "phase": "Paused"});
        assert_eq!(
            generic(&custom(4, 7, &argo)),
            Rollout::InProgress("1 of 4 replicas updated".into())
        );
        // Surge pods of the old revision still terminating.
        let surge = json!({"observedGeneration": 2, "replicas": 6, "updatedReplicas": 4});
        assert_eq!(
            generic(&custom(4, 2, &surge)),
            Rollout::InProgress("2 old replicas pending termination".into())
        );
        // A plain scale-up: new pods not ready yet is not a rollout.
        let scaling = json!({"observedGeneration": 2, "replicas": 6, "updatedReplicas": 6, "readyReplicas": 4});
        assert_eq!(generic(&custom(6, 2, &scaling)), Rollout::Settled);
        // CloneSet partition: 2 of 5 pods stay old by design.
        let mut cloneset = custom(
            5,
            2,
            &json!({"observedGeneration": 2, "replicas": 5, "updatedReplicas": 2}),
        );
        cloneset["spec"]["updateStrategy"] = json!({"partition": 2});
        assert_eq!(
            generic(&cloneset),
            Rollout::InProgress("2 of 3 replicas above partition 2 updated".into())
        );
        cloneset["status"]["updatedReplicas"] = json!(3);
        assert_eq!(generic(&cloneset), Rollout::Settled);
        // A percent partition rounds up: 50 % of 5 keeps 3 old pods.
        cloneset["spec"]["updateStrategy"] = json!({"partition": "50%"});
        cloneset["status"]["updatedReplicas"] = json!(1);
        assert!(generic(&cloneset).is_in_progress());
        cloneset["status"]["updatedReplicas"] = json!(2);
        assert_eq!(generic(&cloneset), Rollout::Settled);
        // StatefulSetPlus-style rollingUpdate.partition.
        let mut plus = custom(
            4,
            1,
            &json!({"observedGeneration": 1, "replicas": 4, "updatedReplicas": 1}),
        );
        plus["spec"]["updateStrategy"] =
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 3}});
        assert_eq!(generic(&plus), Rollout::Settled);
        // A stuck rollout does not block autoscaling.
        let stalled = json!({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 1,
            "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]});
        assert!(matches!(
            generic(&custom(4, 2, &stalled)),
            Rollout::Stalled(_)
        ));
        // Without spec.replicas the status count is the desired one.
        let mut no_spec = custom(
            4,
            2,
            &json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3}),
        );
        no_spec["spec"] = json!({"size": 3});
        assert_eq!(generic(&no_spec), Rollout::Settled);
    }

    #[test]
    fn a_percent_partition_past_i64_keeps_every_pod_old_not_a_panic() {
        use serde_json::json;
        // The workload is the tenant's: its partition may be any number of percent.
        let mut cloneset = custom(
            5,
            2,
            &json!({"observedGeneration": 2, "replicas": 5, "updatedReplicas": 0}),
        );
        for (percent, verdict) in [
            (format!("{}%", i64::MAX), Rollout::Settled),
            (
                format!("{}%", i64::MIN),
                Rollout::InProgress("0 of 5 replicas updated".into()),
            ),
        ] {
            cloneset["spec"]["updateStrategy"] = json!({ "partition": percent });
            assert_eq!(generic(&cloneset), verdict, "{percent}");
        }
    }

    #[test]
    fn shapes_without_the_conventions_are_unknown() {
        use serde_json::json;
        for status in [
            json!(null),
            json!({"replicas": 3}),
            json!({"observedGeneration": 1, "replicas": 3, "readyReplicas": 3}),
            json!({"observedGeneration": "abc123", "updatedReplicas": 3}),
        ] {
            let verdict = generic(&custom(3, 1, &status));
            assert!(
                matches!(verdict, Rollout::Unknown(_)),
                "{status}: {verdict:?}"
            );
            assert_eq!(verdict.state(3), None);
        }
        assert_eq!(
            generic(&custom(3, 1, &json!({"observedGeneration": 1}))),
            Rollout::Unknown("the target's status has no updatedReplicas".into())
        );
    }

    #[test]
    fn an_unknown_rollout_state_is_reported_and_does_not_hold_scaling() {
        use crate::horizontal::decision::{ControllerConfig, DecisionInput, decide};
        use crate::horizontal::history::History;
        let spec = HorizontalPodAutoscalerPlusSpec {
            min_replicas: Some(3),
            max_replicas: 10,
            pause_during_rollout: true,
            ..HorizontalPodAutoscalerPlusSpec::default()
        };
        let mut observed = Observation {
            current_replicas: 1,
            rollout: None,
            ..Observation::default()
        };
        let decide_now = |observed: &Observation| {
            decide(&DecisionInput {
                spec: &spec,
                observed,
                history: &History::default(),
                config: &ControllerConfig::default(),
                now: "2026-11-22T08:00:00Z".parse().unwrap(),
            })
        };
        let d = decide_now(&observed);
        assert_eq!(
            d.scale_to,
            Some(3),
            "below minReplicas: scaled despite unknown"
        );
        let c = d.conditions.iter().find(|c| c.type_ == PAUSED_FOR_ROLLOUT);
        assert_eq!(c.map(|c| c.reason), Some("RolloutStateUnknown"));
        observed.rollout = Rollout::InProgress("0 of 1 replicas updated".into()).state(1);
        let d = decide_now(&observed);
        assert_eq!(d.scale_to, None, "held while rolling out");
        let c = d.conditions.iter().find(|c| c.type_ == PAUSED_FOR_ROLLOUT);
        assert_eq!(
            c.map(|c| (c.status, c.reason)),
            Some((true, "RolloutInProgress"))
        );
    }

    #[test]
    fn the_condition_says_rolling_settled_or_unknown_only_when_asked() {
        let mut spec = HorizontalPodAutoscalerPlusSpec::default();
        let mut observed = Observation {
            rollout: Rollout::InProgress("1 of 3 replicas updated".into()).state(3),
            ..Observation::default()
        };
        assert_eq!(condition(&spec, &observed), None, "pauseDuringRollout off");
        spec.pause_during_rollout = true;
        let of = |observed: &Observation| {
            condition(&spec, observed).map(|c| (c.type_, c.status, c.reason))
        };
        assert_eq!(
            of(&observed),
            Some((PAUSED_FOR_ROLLOUT, true, "RolloutInProgress"))
        );
        observed.rollout = Rollout::Settled.state(3);
        assert_eq!(
            of(&observed),
            Some((PAUSED_FOR_ROLLOUT, false, "NoRolloutInProgress"))
        );
        observed.rollout = Rollout::Unknown("no updatedReplicas".into()).state(3);
        assert_eq!(
            of(&observed),
            Some((PAUSED_FOR_ROLLOUT, false, "RolloutStateUnknown"))
        );
    }
}
