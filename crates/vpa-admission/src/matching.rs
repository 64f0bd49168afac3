//! Which VPA controls a new pod, and which `LimitRange`s apply, from reflector caches only.
//!
//! The request path never calls the API server: the pod's controller chain is walked through
//! cached ReplicaSets (→ Deployment) and Jobs (→ CronJob); the top-most controller is compared
//! with each VPA's `spec.targetRef` in the pod's namespace (upstream `GetControllingVPAForPod`).
//! When several VPAs target the same controller the oldest wins (then the name), so every
//! replica of the webhook picks the same one.
//!
//! A ReplicaSet missing from the cache (its watch event not yet seen: the ReplicaSet controller
//! creates pods right after the ReplicaSet) is resolved from the `pod-template-hash` label: the
//! Deployment controller names ReplicaSets `<deployment>-<hash>`.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{LimitRange, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::runtime::reflector::{ObjectRef, Store};
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_core::quantity::QuantityError;
use plimsoll_core::vertical::limit_range::{self, LimitRangeItem, LimitType};

/// The reflector stores the webhook reads.
#[derive(Clone)]
pub struct Caches {
    /// All VPAs.
    pub vpas: Store<VerticalPodAutoscaler>,
    /// All ReplicaSets (pod → ReplicaSet → Deployment).
    pub replica_sets: Store<ReplicaSet>,
    /// All Jobs (pod → Job → CronJob).
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

/// The top-most known controller of a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Controller {
    /// API group (`apps`, `batch`, `""`).
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
}

impl Controller {
    fn from_owner(owner: &OwnerReference) -> Controller {
        Controller {
            group: group_of(&owner.api_version).to_owned(),
            kind: owner.kind.clone(),
            name: owner.name.clone(),
        }
    }
}

fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

fn controller_ref(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// The label the Deployment controller puts on its ReplicaSets' pods.
const POD_TEMPLATE_HASH: &str = "pod-template-hash";

impl Caches {
    /// The pod's top-most controller, or `None` for a pod without a controller.
    pub fn top_controller(&self, pod: &Pod, namespace: &str) -> Option<Controller> {
        let owner = controller_ref(&pod.metadata)?;
        let first = Controller::from_owner(owner);
        let parent = match (first.group.as_str(), first.kind.as_str()) {
            ("apps", "ReplicaSet") => {
                let key = ObjectRef::new(&first.name).within(namespace);
                match self.replica_sets.get(&key) {
                    Some(rs) => controller_ref(&rs.metadata).map(Controller::from_owner),
                    None => deployment_from_hash(pod, &first.name),
                }
            }
            ("batch", "Job") => {
                let key = ObjectRef::new(&first.name).within(namespace);
                self.jobs
                    .get(&key)
                    .and_then(|job| controller_ref(&job.metadata).map(Controller::from_owner))
            }
            _ => None,
        };
        Some(parent.unwrap_or(first))
    }

    /// The VPA whose `targetRef` is `controller`, oldest first.
    pub fn controlling_vpa(
        &self,
        namespace: &str,
        controller: &Controller,
    ) -> Option<Arc<VerticalPodAutoscaler>> {
        self.vpas
            .state()
            .into_iter()
            .filter(|vpa| vpa.metadata.namespace.as_deref() == Some(namespace))
            .filter(|vpa| {
                let t = &vpa.spec.target_ref;
                t.kind == controller.kind
                    && t.name == controller.name
                    && group_of(t.api_version.as_deref().unwrap_or_default()) == controller.group
            })
            .min_by(|a, b| {
                let created =
                    |v: &VerticalPodAutoscaler| v.metadata.creation_timestamp.as_ref().map(|t| t.0);
                created(a)
                    .cmp(&created(b))
                    .then_with(|| a.metadata.name.cmp(&b.metadata.name))
            })
    }

    /// The merged container and pod `LimitRange` items of `namespace`.
    pub fn limit_ranges(
        &self,
        namespace: &str,
    ) -> Result<(Option<LimitRangeItem>, Option<LimitRangeItem>), QuantityError> {
        let mut ranges: Vec<LimitRange> = self
            .limit_ranges
            .state()
            .iter()
            .filter(|lr| lr.metadata.namespace.as_deref() == Some(namespace))
            .map(|lr| (**lr).clone())
            .collect();
        if ranges.is_empty() {
            return Ok((None, None));
        }
        // Sorted by name so the "last default wins" merge is the same on every replica.
        ranges.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let items = limit_range::from_k8s(&ranges)?;
        Ok((
            limit_range::merge(&items, LimitType::Container),
            limit_range::merge(&items, LimitType::Pod),
        ))
    }
}

fn deployment_from_hash(pod: &Pod, replica_set: &str) -> Option<Controller> {
    let hash = pod.metadata.labels.as_ref()?.get(POD_TEMPLATE_HASH)?;
    let name = replica_set.strip_suffix(hash.as_str())?.strip_suffix('-')?;
    (!name.is_empty()).then(|| Controller {
        group: "apps".to_owned(),
        kind: "Deployment".to_owned(),
        name: name.to_owned(),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;

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

    fn deployment(name: &str) -> Controller {
        Controller {
            group: "apps".to_owned(),
            kind: "Deployment".to_owned(),
            name: name.to_owned(),
        }
    }

    #[test]
    fn walks_replica_set_to_deployment() {
        let mut t = TestCaches::default();
        t.replica_set(replica_set("shop", "web-abc", "web"));
        let p = pod(Some(owner("apps/v1", "ReplicaSet", "web-abc")), None);
        assert_eq!(
            t.caches().top_controller(&p, "shop"),
            Some(deployment("web"))
        );
        // Same name in another namespace is not this pod's ReplicaSet.
        assert_eq!(
            t.caches().top_controller(&p, "other").map(|c| c.kind),
            Some("ReplicaSet".to_owned())
        );
    }

    #[test]
    fn uncached_replica_set_resolves_through_pod_template_hash() {
        let t = TestCaches::default();
        let p = pod(
            Some(owner("apps/v1", "ReplicaSet", "web-5d8f")),
            Some("5d8f"),
        );
        assert_eq!(
            t.caches().top_controller(&p, "shop"),
            Some(deployment("web"))
        );
        let bare = pod(
            Some(owner("apps/v1", "ReplicaSet", "web-5d8f")),
            Some("zzz"),
        );
        assert_eq!(
            t.caches().top_controller(&bare, "shop").map(|c| c.kind),
            Some("ReplicaSet".to_owned())
        );
    }

    #[test]
    fn statefulset_pod_and_orphan_pod() {
        let t = TestCaches::default();
        let p = pod(Some(owner("apps/v1", "StatefulSet", "db")), None);
        assert_eq!(
            t.caches().top_controller(&p, "shop"),
            Some(Controller {
                group: "apps".to_owned(),
                kind: "StatefulSet".to_owned(),
                name: "db".to_owned()
            })
        );
        assert_eq!(t.caches().top_controller(&pod(None, None), "shop"), None);
    }

    #[test]
    fn walks_job_to_cron_job() {
        let mut t = TestCaches::default();
        t.job(Job {
            metadata: ObjectMeta {
                name: Some("report-29000".to_owned()),
                namespace: Some("shop".to_owned()),
                owner_references: Some(vec![owner("batch/v1", "CronJob", "report")]),
                ..ObjectMeta::default()
            },
            ..Job::default()
        });
        let p = pod(Some(owner("batch/v1", "Job", "report-29000")), None);
        assert_eq!(
            t.caches().top_controller(&p, "shop"),
            Some(Controller {
                group: "batch".to_owned(),
                kind: "CronJob".to_owned(),
                name: "report".to_owned()
            })
        );
    }

    #[test]
    fn oldest_matching_vpa_wins() {
        let mut t = TestCaches::default();
        let mut newer = vpa("shop", "a-newer", "Deployment", "web");
        newer.metadata.creation_timestamp = Some(Time(
            jiff::Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_secs(60),
        ));
        t.vpa(newer)
            .vpa(vpa("shop", "b-older", "Deployment", "web"))
            .vpa(vpa("shop", "other", "Deployment", "api"))
            .vpa(vpa("elsewhere", "c", "Deployment", "web"));
        let got = t.caches().controlling_vpa("shop", &deployment("web"));
        assert_eq!(got.unwrap().metadata.name.as_deref(), Some("b-older"));
        assert!(
            t.caches()
                .controlling_vpa("shop", &deployment("nope"))
                .is_none()
        );
    }
}
