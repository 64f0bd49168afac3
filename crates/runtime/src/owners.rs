//! The owner walk's lookups ([`plimsoll_core::vertical::controlling::Owners`]) answered from
//! the reflectors of ReplicaSets and Jobs: the only owners the walk asks about. The webhook and
//! the recommender both answer from their caches; one function keeps their answers the same.
//!
//! Those reflectors hold every ReplicaSet and Job of the cluster, and tenants write them: a
//! zero-replica Deployment with a megabyte template and a long revision history, or suspended
//! Jobs, would otherwise fill every webhook replica until it is killed (and `failurePolicy:
//! Ignore` then admits pods without recommendations). So the watches keep only what the walk
//! reads ([`owner_fields`]).

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use plimsoll_core::cut_down;
use plimsoll_core::vertical::controlling::{self, OwnerKey};

/// The controller of `owner` in `namespace` as the caches hold it: `None` when the cache does
/// not hold the owner (or it is neither a ReplicaSet nor a Job), `Some(None)` when it has no
/// controller.
pub fn cached_controller_of(
    (replica_sets, jobs): (&Store<ReplicaSet>, &Store<Job>),
    namespace: &str,
    owner: &OwnerKey,
) -> Option<Option<OwnerKey>> {
    let controller = match (owner.group.as_str(), owner.kind.as_str()) {
        ("apps", "ReplicaSet") => {
            let key = ObjectRef::new(&owner.name).within(namespace);
            controlling::controller_of(&replica_sets.get(&key)?.metadata)
        }
        ("batch", "Job") => {
            let key = ObjectRef::new(&owner.name).within(namespace);
            controlling::controller_of(&jobs.get(&key)?.metadata)
        }
        _ => return None,
    };
    Some(controller)
}

/// Cuts a ReplicaSet or a Job down to what [`cached_controller_of`] and its store read: the
/// name and namespace (the store's key), uid and resourceVersion (the store's reference to the
/// object), and the controller `ownerReference` ([`controlling::controller_ref`]; other
/// references are never read). Spec, status, labels, annotations and `managedFields` go: for
/// [`crate::watch::Watch::trim`].
pub fn owner_fields<K: Resource + Default>(owner: &mut K) {
    let mut meta = std::mem::take(owner.meta_mut());
    let controller = controlling::controller_ref(&meta).map(|o| vec![o.clone()]);
    *owner = K::default();
    *owner.meta_mut() = ObjectMeta {
        owner_references: controller,
        ..cut_down::identity(&mut meta)
    };
}

#[cfg(test)]
mod tests {
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;
    use serde::Serialize;
    use serde::de::DeserializeOwned;
    use serde_json::json;

    use super::*;

    /// An owner as a hostile tenant may make it: a 1 MiB template, a 200 KiB annotation,
    /// `managedFields`, status, labels, and a second (non-controller) owner reference.
    fn fat<K: DeserializeOwned>(api_version: &str, kind: &str, name: &str, owner: &str) -> K {
        let env: Vec<_> = (0..100)
            .map(|i| json!({"name": format!("E{i}"), "value": "x".repeat(10_000)}))
            .collect();
        let fields: serde_json::Map<String, serde_json::Value> =
            (0..2_000).map(|i| (format!("f:E{i}"), json!({}))).collect();
        let owner_kind = if kind == "Job" {
            ("batch/v1", "CronJob")
        } else {
            ("apps/v1", "Deployment")
        };
        serde_json::from_value(json!({
            "apiVersion": api_version, "kind": kind,
            "metadata": {
                "name": name, "namespace": "shop", "uid": format!("uid-{name}"),
                "resourceVersion": "7", "labels": {"app": "web", "pod-template-hash": "5d8f"},
                "annotations": {"blob": "a".repeat(200 * 1024)},
                "ownerReferences": [
                    {"apiVersion": "example.com/v1", "kind": "Hold", "name": "h", "uid": "h"},
                    {"apiVersion": owner_kind.0, "kind": owner_kind.1, "name": owner,
                     "uid": "top", "controller": true, "blockOwnerDeletion": true},
                ],
                "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": fields}}],
            },
            "spec": {
                "replicas": 0, "suspend": true,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": "web:1", "env": env}]},
                },
            },
            "status": {"replicas": 0, "observedGeneration": 3},
        }))
        .unwrap()
    }

    fn size(object: &impl Serialize) -> usize {
        serde_json::to_vec(object).unwrap().len()
    }

    fn store<K>(object: K) -> Store<K>
    where
        K: kube::runtime::reflector::Lookup + Clone,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    {
        let mut writer = Writer::default();
        writer.apply_watcher_event(&Event::Apply(object));
        writer.as_reader()
    }

    /// The walk's answers for `rs` and `job` (all asked in `shop`, one also elsewhere): whether
    /// the cache knows the owner, and its controller.
    fn answers(rs: ReplicaSet, job: Job) -> Vec<(bool, Option<OwnerKey>)> {
        let (replica_sets, jobs) = (store(rs), store(job));
        let caches = (&replica_sets, &jobs);
        [
            ("shop", OwnerKey::new("apps", "ReplicaSet", "web-5d8f")),
            ("shop", OwnerKey::new("batch", "Job", "report-1")),
            ("other", OwnerKey::new("apps", "ReplicaSet", "web-5d8f")),
        ]
        .iter()
        .map(|(ns, key)| {
            let answer = cached_controller_of(caches, ns, key);
            (answer.is_some(), answer.flatten())
        })
        .collect()
    }

    #[test]
    fn a_fat_replica_set_or_job_comes_out_small_and_walks_the_same() {
        let rs: ReplicaSet = fat("apps/v1", "ReplicaSet", "web-5d8f", "web");
        let job: Job = fat("batch/v1", "Job", "report-1", "report");
        let (mut small_rs, mut small_job) = (rs.clone(), job.clone());
        owner_fields(&mut small_rs);
        owner_fields(&mut small_job);
        for (before, after) in [(size(&rs), size(&small_rs)), (size(&job), size(&small_job))] {
            assert!(before > MIB, "{before}");
            assert!(after < 512, "{after}");
        }
        assert_eq!(
            answers(small_rs.clone(), small_job.clone()),
            answers(rs.clone(), job)
        );
        assert_eq!(
            answers(small_rs.clone(), small_job)[..2],
            [
                (true, Some(OwnerKey::new("apps", "Deployment", "web"))),
                (true, Some(OwnerKey::new("batch", "CronJob", "report")))
            ]
        );
        let meta = &small_rs.metadata;
        assert_eq!(meta.name.as_deref(), Some("web-5d8f"));
        assert_eq!(meta.namespace.as_deref(), Some("shop"));
        assert_eq!(meta.uid.as_deref(), Some("uid-web-5d8f"));
        assert_eq!(meta.resource_version.as_deref(), Some("7"));
        assert_eq!(
            meta.owner_references.as_deref(),
            controlling::controller_ref(&rs.metadata).map(std::slice::from_ref)
        );
        assert_eq!(meta.managed_fields, None);
        assert_eq!(meta.annotations, None);
        assert_eq!(small_rs.spec, None);
        assert_eq!(small_rs.status, None);
    }

    #[test]
    fn an_owner_without_a_controller_keeps_having_none() {
        let mut rs: ReplicaSet = fat("apps/v1", "ReplicaSet", "web-5d8f", "web");
        if let Some(refs) = rs.metadata.owner_references.as_mut() {
            refs.retain(|o| o.controller != Some(true));
        }
        owner_fields(&mut rs);
        assert_eq!(rs.metadata.owner_references, None);
        assert_eq!(controlling::controller_of(&rs.metadata), None);
    }

    const MIB: usize = 1 << 20;
}
