//! Owner-reference pod filtering (KEP-5325, `podSelectionStrategy: OwnerReferences`): which of
//! the pods the target's label selector matched are the target's own.
//!
//! The KEP (kubernetes/enhancements `keps/sig-autoscaling/5325-hpa-pod-selection-accuracy`,
//! "Design Details") keeps the label selection and, with `OwnerReferences`, "further filters the
//! label-selected pods", keeping only "pods that are owned by the target workload through owner
//! references", following "the ownership chain (e.g., Deployment → ReplicaSet → Pods)" and
//! "excludes pods that matched labels but aren't in the ownership chain". No Kubernetes release
//! implements it (kubernetes#132628 was closed), so the vectors below are derived from that text.
//!
//! A pod counts when its controller reference (the `ownerReferences` entry with
//! `controller: true`) is
//! 1. the target itself (a StatefulSet, a ReplicaSet that is the target, a custom kind), or
//! 2. a ReplicaSet whose own controller reference is the target (Deployment → ReplicaSet → Pod).
//!
//! Invariants: the chain is followed at most two links (no loop or long chain that a namespace
//! user writes into `ownerReferences` is walked); a pod without a controller reference, or whose
//! ReplicaSet is not known, does not count; non-controller owner references never count (the
//! garbage collector's owners are not the workload's).

use serde::{Deserialize, Serialize};

/// How the pods of the target are chosen (KEP-5325's `PodSelectionStrategy`).
pub use crate::api::hpa_plus::PodSelectionStrategy;

/// The controller owner reference of an object (`ownerReferences[]` with `controller: true`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerRef {
    /// `kind` of the owner.
    pub kind: String,
    /// `name` of the owner.
    pub name: String,
    /// `uid` of the owner.
    pub uid: String,
}

/// The scale target, as the filter compares owners with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target<'a> {
    /// `scaleTargetRef.kind`.
    pub kind: &'a str,
    /// `scaleTargetRef.name`.
    pub name: &'a str,
    /// The target's `metadata.uid` when known; without it kind and name decide (names are unique
    /// per kind within a namespace).
    pub uid: Option<&'a str>,
}

impl Target<'_> {
    /// Whether `owner` names this target.
    pub fn is(&self, owner: &ControllerRef) -> bool {
        owner.kind == self.kind
            && owner.name == self.name
            && self.uid.is_none_or(|uid| uid == owner.uid)
    }
}

/// The `kind` of a ReplicaSet owner reference: the one intermediate link that is followed.
pub const REPLICA_SET: &str = "ReplicaSet";

/// Whether a pod whose controller reference is `pod_controller` belongs to `target`;
/// `replica_set_controller` gives, for a ReplicaSet uid, that ReplicaSet's controller reference
/// (`None` when the ReplicaSet is unknown or has no controller).
pub fn owned_by<'r>(
    target: &Target<'_>,
    pod_controller: Option<&ControllerRef>,
    replica_set_controller: impl Fn(&str) -> Option<&'r ControllerRef>,
) -> bool {
    let Some(owner) = pod_controller else {
        return false;
    };
    if target.is(owner) {
        return true;
    }
    // One more link, only through a ReplicaSet (the Deployment's pods); its controller must be
    // the target itself, never another ReplicaSet's owner.
    owner.kind == REPLICA_SET
        && target.kind != REPLICA_SET
        && replica_set_controller(&owner.uid).is_some_and(|rs_owner| target.is(rs_owner))
}

/// The pods (`items`; `controller_of` gives each one's controller reference) that count under
/// `strategy`: all of them with `LabelSelector`, the target's own with `OwnerReferences`.
pub fn select<'r, T>(
    strategy: PodSelectionStrategy,
    target: &Target<'_>,
    items: impl IntoIterator<Item = T>,
    controller_of: impl Fn(&T) -> Option<&ControllerRef>,
    replica_set_controller: impl Fn(&str) -> Option<&'r ControllerRef>,
) -> Vec<T> {
    items
        .into_iter()
        .filter(|item| match strategy {
            PodSelectionStrategy::LabelSelector => true,
            PodSelectionStrategy::OwnerReferences => {
                owned_by(target, controller_of(item), &replica_set_controller)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn r(kind: &str, name: &str, uid: &str) -> ControllerRef {
        ControllerRef {
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
        }
    }

    const DEPLOY: Target<'static> = Target {
        kind: "Deployment",
        name: "web",
        uid: Some("d-web"),
    };

    /// ReplicaSet uid → its controller.
    fn replica_sets() -> BTreeMap<String, ControllerRef> {
        BTreeMap::from([
            ("rs-web-1".into(), r("Deployment", "web", "d-web")),
            ("rs-web-2".into(), r("Deployment", "web", "d-web")),
            ("rs-other".into(), r("Deployment", "other", "d-other")),
            // The same name as the target, another uid: a deleted and recreated `web`.
            ("rs-stale".into(), r("Deployment", "web", "d-web-old")),
            // A ReplicaSet owned by a ReplicaSet (hostile): not followed further.
            ("rs-nested".into(), r("ReplicaSet", "rs-web-1", "rs-web-1")),
        ])
    }

    #[test]
    fn vectors_from_the_kep_text() {
        let rss = replica_sets();
        let lookup = |uid: &str| rss.get(uid);
        let sts = Target {
            kind: "StatefulSet",
            name: "db",
            uid: None,
        };
        let rs_target = Target {
            kind: "ReplicaSet",
            name: "rs-web-1",
            uid: Some("rs-web-1"),
        };
        // (target, pod's controller, counts) — KEP-5325 "Design Details".
        let cases: Vec<(Target<'_>, Option<ControllerRef>, bool)> = vec![
            // "Follows the ownership chain (e.g., Deployment → ReplicaSet → Pods)", across
            // revisions of the rollout.
            (DEPLOY, Some(r("ReplicaSet", "web-1", "rs-web-1")), true),
            (DEPLOY, Some(r("ReplicaSet", "web-2", "rs-web-2")), true),
            // "Excludes pods that matched labels but aren't in the ownership chain": another
            // Deployment's pods, the Job of the KEP's Motivation, a bare pod.
            (DEPLOY, Some(r("ReplicaSet", "other-1", "rs-other")), false),
            (DEPLOY, Some(r("Job", "test-job", "j-1")), false),
            (DEPLOY, None, false),
            // A ReplicaSet not (yet) known: not counted.
            (DEPLOY, Some(r("ReplicaSet", "web-3", "rs-unknown")), false),
            // A recreated target: the old generation's ReplicaSet is not its own.
            (DEPLOY, Some(r("ReplicaSet", "web-0", "rs-stale")), false),
            // A pod claiming the Deployment directly is the target's ("owned by the target").
            (DEPLOY, Some(r("Deployment", "web", "d-web")), true),
            // "Handles different workload types (Deployments, StatefulSets, etc.)": the pods'
            // controller is the target itself.
            (sts, Some(r("StatefulSet", "db", "s-db")), true),
            (sts, Some(r("StatefulSet", "db-2", "s-db2")), false),
            (
                rs_target,
                Some(r("ReplicaSet", "rs-web-1", "rs-web-1")),
                true,
            ),
            (
                rs_target,
                Some(r("ReplicaSet", "rs-web-2", "rs-web-2")),
                false,
            ),
            // Depth 2 at most: ReplicaSet → ReplicaSet → target is not followed.
            (
                rs_target,
                Some(r("ReplicaSet", "nested", "rs-nested")),
                false,
            ),
            (DEPLOY, Some(r("ReplicaSet", "nested", "rs-nested")), false),
        ];
        for (i, (target, owner, want)) in cases.iter().enumerate() {
            assert_eq!(owned_by(target, owner.as_ref(), lookup), *want, "case {i}");
        }
    }

    #[test]
    fn label_selector_keeps_every_pod_owner_references_only_the_targets() {
        let rss = replica_sets();
        let mine = r("ReplicaSet", "web-1", "rs-web-1");
        let theirs = r("ReplicaSet", "other-1", "rs-other");
        let pods = || vec![("a", Some(&mine)), ("b", Some(&theirs)), ("c", None)];
        let names = |kept: Vec<(&str, Option<&ControllerRef>)>| -> Vec<String> {
            kept.into_iter().map(|(n, _)| n.to_owned()).collect()
        };
        let pick = |strategy| names(select(strategy, &DEPLOY, pods(), |p| p.1, |u| rss.get(u)));
        assert_eq!(pick(PodSelectionStrategy::LabelSelector), ["a", "b", "c"]);
        assert_eq!(pick(PodSelectionStrategy::OwnerReferences), ["a"]);
    }

    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("web".to_owned()),
            Just("other".to_owned()),
            "[a-z]{1,3}"
        ]
    }

    fn owner() -> impl Strategy<Value = ControllerRef> {
        (
            prop_oneof![
                Just("Deployment".to_owned()),
                Just("ReplicaSet".to_owned()),
                Just("StatefulSet".to_owned()),
                Just("Job".to_owned())
            ],
            name(),
            prop_oneof![Just("d-web".to_owned()), "[a-z-]{1,6}"],
        )
            .prop_map(|(kind, name, uid)| ControllerRef { kind, name, uid })
    }

    proptest! {
        /// A pod not owned by the target never counts: whatever the pods' and ReplicaSets'
        /// references say, every pod kept is the target's directly or through one ReplicaSet
        /// that the target controls.
        #[test]
        fn a_pod_not_owned_by_the_target_never_counts(
            pods in prop::collection::vec(prop::option::of(owner()), 0..12),
            rss in prop::collection::btree_map("[a-z-]{1,6}", owner(), 0..6),
        ) {
            let pick = |strategy| {
                select(strategy, &DEPLOY, pods.iter(), |o| o.as_ref(), |u| rss.get(u))
            };
            for o in pick(PodSelectionStrategy::OwnerReferences) {
                let o = o.as_ref().expect("a pod without an owner was kept");
                let direct = DEPLOY.is(o);
                let via_rs = o.kind == REPLICA_SET
                    && rss.get(&o.uid).is_some_and(|rs| DEPLOY.is(rs));
                prop_assert!(direct || via_rs, "kept {o:?}");
            }
            prop_assert_eq!(pick(PodSelectionStrategy::LabelSelector).len(), pods.len());
        }
    }
}
