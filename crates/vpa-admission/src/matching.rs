//! Which VPA controls a new pod, and which `LimitRange`s apply, from reflector caches only.
//!
//! The rule is core's ([`plimsoll_core::vertical::controlling`], upstream's
//! `GetControllingVPAForPod`), shared with the updater and the recommender; this module only
//! hands it the caches. The request path never calls the API server: the pod's controller chain
//! is walked through cached ReplicaSets (→ Deployment, Rollout…) and Jobs (→ CronJob).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{LimitRange, Pod};
use kube::runtime::reflector::Store;
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_core::quantity::QuantityError;
use plimsoll_core::vertical::controlling::{self, OwnerKey, Owners};
use plimsoll_core::vertical::limit_range::LimitRangeItem;

/// The reflector stores the webhook reads.
#[derive(Clone)]
pub struct Caches {
    /// All VPAs.
    pub vpas: Store<VerticalPodAutoscaler>,
    /// All ReplicaSets (pod → ReplicaSet → Deployment), each cut down to its name and controller
    /// reference ([`plimsoll_runtime::owners::owner_fields`]).
    pub replica_sets: Store<ReplicaSet>,
    /// All Jobs (pod → Job → CronJob), cut down as the ReplicaSets are.
    pub jobs: Store<Job>,
    /// All LimitRanges.
    pub limit_ranges: Store<LimitRange>,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches")
            .field("vpas", &self.vpas.len())
            .field("replica_sets", &self.replica_sets.len())
            .field("jobs", &self.jobs.len())
            .field("limit_ranges", &self.limit_ranges.len())
            .finish()
    }
}

impl Owners for Caches {
    /// The controllers of cached ReplicaSets and Jobs (the only owners the walk asks about).
    fn controller_of(&self, namespace: &str, owner: &OwnerKey) -> Option<Option<OwnerKey>> {
        plimsoll_runtime::owners::cached_controller_of(
            (&self.replica_sets, &self.jobs),
            namespace,
            owner,
        )
    }
}

impl Caches {
    /// The VPA that controls `pod` in `namespace` ([`controlling::controlling_vpa`], the rule
    /// the updater and the recommender follow too), walking its owners through the caches.
    pub fn controlling_vpa(
        &self,
        pod: &Pod,
        namespace: &str,
    ) -> Option<Arc<VerticalPodAutoscaler>> {
        let vpas: Vec<Arc<VerticalPodAutoscaler>> = self
            .vpas
            .state()
            .into_iter()
            .filter(|vpa| vpa.metadata.namespace.as_deref() == Some(namespace))
            .collect();
        controlling::controlling_vpa(&pod.metadata, namespace, self, &vpas).cloned()
    }

    /// The merged container and pod `LimitRange` items of `namespace`
    /// ([`controlling::limit_ranges`]).
    pub fn limit_ranges(
        &self,
        namespace: &str,
    ) -> Result<(Option<LimitRangeItem>, Option<LimitRangeItem>), QuantityError> {
        let ranges = self.limit_ranges.state();
        controlling::limit_ranges(ranges.iter().map(AsRef::as_ref), namespace)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;
    use plimsoll_core::vertical::controlling::POD_TEMPLATE_HASH;

    /// Writable stores behind a [`Caches`].
    #[derive(Default)]
    pub(crate) struct TestCaches {
        pub vpas: Writer<VerticalPodAutoscaler>,
        pub replica_sets: Writer<ReplicaSet>,
        pub jobs: Writer<Job>,
        pub limit_ranges: Writer<LimitRange>,
    }

    impl TestCaches {
        pub(crate) fn caches(&self) -> Caches {
            Caches {
                vpas: self.vpas.as_reader(),
                replica_sets: self.replica_sets.as_reader(),
                jobs: self.jobs.as_reader(),
                limit_ranges: self.limit_ranges.as_reader(),
            }
        }

        pub(crate) fn vpa(&mut self, vpa: VerticalPodAutoscaler) -> &mut Self {
            self.vpas.apply_watcher_event(&Event::Apply(vpa));
            self
        }

        pub(crate) fn replica_set(&mut self, rs: ReplicaSet) -> &mut Self {
            self.replica_sets.apply_watcher_event(&Event::Apply(rs));
            self
        }

        pub(crate) fn job(&mut self, job: Job) -> &mut Self {
            self.jobs.apply_watcher_event(&Event::Apply(job));
            self
        }

        pub(crate) fn limit_range(&mut self, lr: LimitRange) -> &mut Self {
            self.limit_ranges.apply_watcher_event(&Event::Apply(lr));
            self
        }
    }

    pub(crate) fn owner(api_version: &str, kind: &str, name: &str) -> OwnerReference {
        OwnerReference {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            uid: format!("uid-{name}"),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    pub(crate) fn vpa(ns: &str, name: &str, kind: &str, target: &str) -> VerticalPodAutoscaler {
        let mut v: VerticalPodAutoscaler = serde_json::from_value(serde_json::json!({
            "apiVersion": "autoscaling.k8s.io/v1",
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": kind, "name": target}}
        }))
        .unwrap();
        v.metadata.creation_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        v
    }

    pub(crate) fn replica_set(ns: &str, name: &str, deployment: &str) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(ns.to_owned()),
                owner_references: Some(vec![owner("apps/v1", "Deployment", deployment)]),
                ..ObjectMeta::default()
            },
            ..ReplicaSet::default()
        }
    }

    fn pod(owner_ref: Option<OwnerReference>, hash: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                owner_references: owner_ref.map(|o| vec![o]),
                labels: hash.map(|h| [(POD_TEMPLATE_HASH.to_owned(), h.to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    fn top(t: &TestCaches, p: &Pod, namespace: &str) -> Option<OwnerKey> {
        controlling::top_controller(&p.metadata, namespace, &t.caches())
    }

    #[test]
    fn walks_cached_replica_sets_and_jobs() {
        let mut t = TestCaches::default();
        t.replica_set(replica_set("shop", "web-abc", "web"));
        t.job(Job {
            metadata: ObjectMeta {
                name: Some("report-29000".to_owned()),
                namespace: Some("shop".to_owned()),
                owner_references: Some(vec![owner("batch/v1", "CronJob", "report")]),
                ..ObjectMeta::default()
            },
            ..Job::default()
        });
        let p = pod(Some(owner("apps/v1", "ReplicaSet", "web-abc")), None);
        assert_eq!(
            top(&t, &p, "shop"),
            Some(OwnerKey::new("apps", "Deployment", "web"))
        );
        // Same name in another namespace is not this pod's ReplicaSet.
        assert_eq!(
            top(&t, &p, "other"),
            Some(OwnerKey::new("apps", "ReplicaSet", "web-abc"))
        );
        let p = pod(Some(owner("batch/v1", "Job", "report-29000")), None);
        assert_eq!(
            top(&t, &p, "shop"),
            Some(OwnerKey::new("batch", "CronJob", "report"))
        );
        // An uncached ReplicaSet: named after its Deployment.
        let p = pod(
            Some(owner("apps/v1", "ReplicaSet", "api-5d8f")),
            Some("5d8f"),
        );
        assert_eq!(
            top(&t, &p, "shop"),
            Some(OwnerKey::new("apps", "Deployment", "api"))
        );
    }

    #[test]
    fn oldest_vpa_on_the_top_controller_wins() {
        let mut t = TestCaches::default();
        let mut newer = vpa("shop", "a-newer", "Deployment", "web");
        newer.metadata.creation_timestamp = Some(Time(
            jiff::Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_secs(60),
        ));
        t.replica_set(replica_set("shop", "web-abc", "web"))
            .vpa(newer)
            .vpa(vpa("shop", "b-older", "Deployment", "web"))
            .vpa(vpa("shop", "on-rs", "ReplicaSet", "web-abc"))
            .vpa(vpa("shop", "other", "Deployment", "api"))
            .vpa(vpa("elsewhere", "c", "Deployment", "web"));
        let p = pod(Some(owner("apps/v1", "ReplicaSet", "web-abc")), None);
        let got = t.caches().controlling_vpa(&p, "shop");
        assert_eq!(got.unwrap().metadata.name.as_deref(), Some("b-older"));
        let orphan = pod(None, None);
        assert!(t.caches().controlling_vpa(&orphan, "shop").is_none());
        let sts = pod(Some(owner("apps/v1", "StatefulSet", "db")), None);
        assert!(t.caches().controlling_vpa(&sts, "shop").is_none());
    }
}
