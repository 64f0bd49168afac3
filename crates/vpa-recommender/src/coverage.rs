//! Which VPAs this replica's loop covers, with `--shards N`: pure bookkeeping, no I/O.
//!
//! A VPA belongs to shard `shard_of(uid)` (`plimsoll_runtime::leader::shards`). The loop covers
//! the served VPAs of the shards in its [`Coverage`]: shards this replica acts on *and* whose
//! VPAs' history has been restored from their checkpoints. Invariants:
//!
//! - A shard enters the coverage only after its VPAs were restored, so no recommendation and no
//!   checkpoint is written from an empty history (the rule `restore_until_done` keeps for a
//!   single leader, per shard).
//! - A shard in the coverage keeps a guard (`ShardGuard` in the service): the runtime does not
//!   release a shard given up on purpose while a guard lives, so the loop gets to write the
//!   shard's checkpoints (and joint totals) before its successor restores them, and the writes
//!   of a loop in flight never overlap the successor's.
//! - A shard leaves the coverage when it is no longer acting (given up, or lost at the renew
//!   deadline); its VPAs' models are dropped then, and a later return restores them afresh.
//!
//! Without sharding there is one shard, held while leading: the coverage is everything or
//! nothing, as the single leader's loop always was.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_core::vertical::controlling::{OwnerKey, Owners};
use plimsoll_core::vertical::ownership::{ServedVpa, VpaKey, key_of, owners};

/// The shards covered by the loop, each with the guard that keeps it from being released.
#[derive(Debug)]
pub struct Coverage<G> {
    shards: BTreeMap<u32, G>,
}

impl<G> Default for Coverage<G> {
    fn default() -> Self {
        Self {
            shards: BTreeMap::new(),
        }
    }
}

/// How the coverage must change to follow the shards acting now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Acting, not covered yet: restore their VPAs, then cover them.
    pub acquired: BTreeSet<u32>,
    /// Covered, no longer acting: persist what may still be written, drop their VPAs.
    pub released: BTreeSet<u32>,
}

impl Changes {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.acquired.is_empty() && self.released.is_empty()
    }
}

impl<G> Coverage<G> {
    /// What changes when `acting` are the shards new work may start on.
    pub fn changes(&self, acting: &BTreeSet<u32>) -> Changes {
        let covered = self.shards();
        Changes {
            acquired: acting.difference(&covered).copied().collect(),
            released: covered.difference(acting).copied().collect(),
        }
    }

    /// Covers `shard`, its VPAs restored, keeping `guard` until it is released.
    pub fn cover(&mut self, shard: u32, guard: G) {
        self.shards.insert(shard, guard);
    }

    /// Stops covering `shard`; its guard, to drop once the shard's last writes are done.
    pub fn release(&mut self, shard: u32) -> Option<G> {
        self.shards.remove(&shard)
    }

    /// The covered shards.
    pub fn shards(&self) -> BTreeSet<u32> {
        self.shards.keys().copied().collect()
    }

    /// Whether `shard` is covered.
    pub fn covers(&self, shard: u32) -> bool {
        self.shards.contains_key(&shard)
    }

    /// Stops covering everything; the guards, to drop once the last writes are done.
    pub fn release_all(&mut self) -> Vec<G> {
        std::mem::take(&mut self.shards).into_values().collect()
    }
}

/// The VPAs of `vpas` whose shard (`shard_of` their uid) is in `shards`, in input order. A VPA
/// without a uid belongs to no shard (the API server always sets one).
pub fn in_shards(
    vpas: &[Arc<VerticalPodAutoscaler>],
    shard_of: impl Fn(&str) -> u32,
    shards: &BTreeSet<u32>,
) -> Vec<Arc<VerticalPodAutoscaler>> {
    vpas.iter()
        .filter(|v| {
            v.metadata
                .uid
                .as_deref()
                .is_some_and(|uid| shards.contains(&shard_of(uid)))
        })
        .cloned()
        .collect()
}

/// The served VPAs outside the coverage that may take pods from a covered VPA: a pod belongs to
/// the oldest VPA on its top controller ([`plimsoll_core::vertical::controlling`]), so only an uncovered VPA naming the
/// same target in the same namespace as a covered one can. The loop resolves these too, so that
/// ownership is the same as in an unsharded loop.
pub fn ownership_context(
    served: &[Arc<VerticalPodAutoscaler>],
    covered: &[Arc<VerticalPodAutoscaler>],
) -> Vec<Arc<VerticalPodAutoscaler>> {
    let target = |v: &VerticalPodAutoscaler| {
        (
            v.metadata.namespace.clone().unwrap_or_default(),
            OwnerKey::of_target(&v.spec.target_ref),
        )
    };
    let covered_keys: HashSet<VpaKey> = covered.iter().map(|v| key_of(v)).collect();
    let covered_targets: HashSet<(String, OwnerKey)> = covered.iter().map(|v| target(v)).collect();
    served
        .iter()
        .filter(|v| !covered_keys.contains(&key_of(v)) && covered_targets.contains(&target(v)))
        .cloned()
        .collect()
}

/// The pods a loop over `covered` may see: all but those owned (over `covered` and `context`
/// together, walking owners through `known`) by a context VPA. The covered VPAs then own
/// exactly the pods they own in an unsharded loop.
pub fn pods_for<V: ServedVpa>(
    covered: &[V],
    context: &[V],
    pods: Vec<Arc<Pod>>,
    known: &dyn Owners,
) -> Vec<Arc<Pod>> {
    if context.is_empty() {
        return pods;
    }
    let outside: HashSet<VpaKey> = context.iter().map(|v| key_of(v.object())).collect();
    let everyone: Vec<&V> = covered.iter().chain(context).collect();
    let taken: HashSet<(String, String)> = owners(&everyone, &pods, known)
        .into_iter()
        .filter(|(owner, _)| outside.contains(owner))
        .map(|(_, pod)| {
            (
                pod.metadata.namespace.clone().unwrap_or_default(),
                pod.metadata.name.clone().unwrap_or_default(),
            )
        })
        .collect();
    pods.into_iter()
        .filter(|p| {
            let id = (
                p.metadata.namespace.clone().unwrap_or_default(),
                p.metadata.name.clone().unwrap_or_default(),
            );
            !taken.contains(&id)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use k8s_openapi::api::autoscaling::v1::CrossVersionObjectReference;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
    use plimsoll_core::api::vpa::VerticalPodAutoscalerSpec;
    use plimsoll_core::vertical::controlling::NoOwners;
    use plimsoll_runtime::leader::shards::shard_of;

    fn vpa(namespace: &str, name: &str) -> Arc<VerticalPodAutoscaler> {
        on(namespace, name, name)
    }

    /// VPA `namespace/name` on Deployment `target`, created at `created`.
    fn on(namespace: &str, name: &str, target: &str) -> Arc<VerticalPodAutoscaler> {
        let mut v = VerticalPodAutoscaler::new(
            name,
            VerticalPodAutoscalerSpec {
                target_ref: CrossVersionObjectReference {
                    api_version: Some("apps/v1".into()),
                    kind: "Deployment".into(),
                    name: target.into(),
                },
                update_policy: None,
                resource_policy: None,
                recommenders: None,
                startup_boost: None,
            },
        );
        v.metadata.namespace = Some(namespace.into());
        v.metadata.uid = Some(format!("uid-{namespace}-{name}"));
        Arc::new(v)
    }

    fn names(vpas: &[Arc<VerticalPodAutoscaler>]) -> Vec<String> {
        vpas.iter().map(|v| key_of(v).1).collect()
    }

    #[test]
    fn changes_follow_the_acting_shards() {
        let mut c: Coverage<()> = Coverage::default();
        let acting = BTreeSet::from([1, 3]);
        let first = c.changes(&acting);
        assert_eq!(first.acquired, BTreeSet::from([1, 3]));
        assert!(first.released.is_empty());
        // Shard 3's restore failed: only 1 is covered; 3 is still to acquire next time.
        c.cover(1, ());
        assert_eq!(c.changes(&acting).acquired, BTreeSet::from([3]));
        c.cover(3, ());
        assert!(c.changes(&acting).is_empty());
        // 1 given up (or lost), 4 taken over.
        let next = c.changes(&BTreeSet::from([3, 4]));
        assert_eq!(next.acquired, BTreeSet::from([4]));
        assert_eq!(next.released, BTreeSet::from([1]));
        assert_eq!(c.release(1), Some(()));
        assert_eq!(c.release(1), None);
        assert!(c.covers(3) && !c.covers(1));
        assert_eq!(c.release_all().len(), 1);
        assert!(c.shards().is_empty());
    }

    #[test]
    fn a_loop_covers_exactly_the_vpas_of_its_shards() {
        let vpas: Vec<_> = (0..40).map(|k| vpa("ns", &format!("v{k:02}"))).collect();
        let of = |uid: &str| shard_of(uid, 4);
        let mut seen = BTreeSet::new();
        for shard in 0..4 {
            let mine = in_shards(&vpas, of, &BTreeSet::from([shard]));
            for v in &mine {
                assert_eq!(of(v.metadata.uid.as_deref().unwrap_or_default()), shard);
                assert!(seen.insert(key_of(v)), "each VPA in one shard only");
            }
        }
        assert_eq!(seen.len(), vpas.len(), "every VPA in some shard");
        assert_eq!(in_shards(&vpas, of, &BTreeSet::from([0, 1, 2, 3])), vpas);
        assert!(in_shards(&vpas, of, &BTreeSet::new()).is_empty());
        let mut no_uid = (*vpas[0]).clone();
        no_uid.metadata.uid = None;
        assert!(in_shards(&[Arc::new(no_uid)], of, &BTreeSet::from([0, 1, 2, 3])).is_empty());
    }

    /// Was "earlier names in covered namespaces" while a pod went to the first VPA by name.
    #[test]
    fn ownership_context_is_the_other_vpas_on_covered_targets() {
        let served = vec![
            on("a", "api", "web"),
            on("a", "batch", "batch"),
            on("a", "web", "web"),
            on("a", "zeta", "web"),
            on("b", "alpha", "web"),
        ];
        let covered = vec![served[2].clone()];
        // `api` and `zeta` name web too and could own its pods; `batch` names another target,
        // and namespace b is another namespace.
        assert_eq!(
            names(&ownership_context(&served, &covered)),
            ["api", "zeta"]
        );
        assert!(ownership_context(&served, &served).is_empty());
        assert!(ownership_context(&served, &[]).is_empty());
    }

    /// A served VPA with a one-label selector.
    struct Input(Arc<VerticalPodAutoscaler>, &'static str);

    impl ServedVpa for Input {
        fn object(&self) -> &VerticalPodAutoscaler {
            &self.0
        }
        fn target_error(&self) -> Option<&str> {
            None
        }
        fn has_pod_selector(&self) -> bool {
            true
        }
        fn selects(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
            labels.is_some_and(|l| l.get("app").map(String::as_str) == Some(self.1))
        }
        fn conflict(&self) -> Option<&str> {
            None
        }
        fn joint(&self) -> Option<&plimsoll_core::vertical::joint_sizing::HorizontalSettings> {
            None
        }
    }

    /// A pod of Deployment `shared`, labelled `app`.
    fn pod(name: &str, app: &str) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("a".into()),
                labels: Some(BTreeMap::from([("app".into(), app.into())])),
                owner_references: Some(vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "Deployment".into(),
                    name: "shared".into(),
                    uid: "uid-shared".into(),
                    controller: Some(true),
                    block_owner_deletion: None,
                }]),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        })
    }

    #[test]
    fn pods_owned_outside_the_coverage_are_not_seen() {
        // `api` (uncovered, older) and `web` (covered) both name Deployment shared and select
        // app=shared; the older one has the pod, in the sharded loop as in the unsharded one.
        let created = |v: Arc<VerticalPodAutoscaler>, at: &str| {
            let mut v = (*v).clone();
            v.metadata.creation_timestamp = Some(Time(at.parse().unwrap()));
            Arc::new(v)
        };
        let covered = [Input(
            created(on("a", "web", "shared"), "2026-01-02T00:00:00Z"),
            "shared",
        )];
        let context = [Input(
            created(on("a", "api", "shared"), "2026-01-01T00:00:00Z"),
            "shared",
        )];
        let pods = vec![pod("p1", "shared"), pod("p2", "other")];
        let seen = pods_for(&covered, &context, pods.clone(), &NoOwners);
        let seen: Vec<_> = seen
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        assert_eq!(seen, ["p2"]);
        assert_eq!(pods_for(&covered, &[], pods.clone(), &NoOwners).len(), 2);
        // Nobody outside selects it: the covered VPA keeps it.
        let elsewhere = [Input(
            created(on("a", "api", "shared"), "2026-01-01T00:00:00Z"),
            "else",
        )];
        assert_eq!(pods_for(&covered, &elsewhere, pods, &NoOwners).len(), 2);
    }
}
