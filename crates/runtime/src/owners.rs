//! The owner walk's lookups ([`plimsoll_core::vertical::controlling::Owners`]) answered from
//! the reflectors of ReplicaSets and Jobs: the only owners the walk asks about. The webhook and
//! the recommender both answer from their caches; one function keeps their answers the same.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::batch::v1::Job;
use kube::runtime::reflector::{ObjectRef, Store};
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
