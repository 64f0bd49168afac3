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
//! [`RolloutState`] is the generation view of a workload that [`Observation`](super::Observation)
//! carries (and that `replay` scenarios write); [`Rollout::state`] gives it for a verdict.

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};

/// The generation view of a target's rollout, as the decision's `pauseDuringRollout` gate
/// reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
}

impl Rollout {
    /// True only for [`Rollout::InProgress`].
    pub fn is_in_progress(&self) -> bool {
        matches!(self, Self::InProgress(_))
    }

    /// The generation view of this verdict, for [`Observation::rollout`](super::Observation):
    /// a rollout in progress reads as a generation the workload controller has not observed
    /// yet; a settled or stalled one as fully rolled out at `replicas`. Either way
    /// [`RolloutState::in_progress`] agrees with [`Rollout::is_in_progress`].
    pub fn state(&self, replicas: i32) -> RolloutState {
        if self.is_in_progress() {
            RolloutState {
                generation: 1,
                observed_generation: 0,
                updated_replicas: 0,
                desired_replicas: replicas,
            }
        } else {
            RolloutState {
                generation: 1,
                observed_generation: 1,
                updated_replicas: replicas,
                desired_replicas: replicas,
            }
        }
    }
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
            assert_eq!(verdict.state(3).in_progress(), rolling, "{verdict:?}");
            assert_eq!(verdict.is_in_progress(), rolling, "{verdict:?}");
        }
    }
}
