//! Which checkpoints the recommender writes first and which it deletes.
//!
//! * Writes go oldest first: never written, then written longest ago (ties by object name), so a
//!   loop that runs out of `--checkpoints-timeout` leaves the freshest for later.
//! * A checkpoint is stale when its VPA no longer exists (whoever served it), or when its VPA is
//!   served here and has no aggregate for the container any more (the container is gone, or had
//!   no sample for the whole memory window). A checkpoint of a VPA that exists but is not served
//!   here is another recommender's and stays.
//!
//! Object names and specs are upstream's, so either recommender can read the other's.

use std::collections::HashSet;
use std::hash::BuildHasher;

use jiff::Timestamp;

use super::ownership::VpaKey;
use crate::api::vpa::{
    VerticalPodAutoscalerCheckpoint, VerticalPodAutoscalerCheckpointSpec,
    VerticalPodAutoscalerCheckpointStatus,
};

/// A checkpoint to write (see [`oldest_first`]).
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointWrite {
    /// The object to apply.
    pub checkpoint: VerticalPodAutoscalerCheckpoint,
    /// When this (VPA, container) was last written by this process, if ever.
    pub last_written: Option<Timestamp>,
}

/// Sorts writes never written first, then by when they were last written, then by name.
pub fn oldest_first(writes: &mut [CheckpointWrite]) {
    writes.sort_by(|a, b| {
        a.last_written
            .cmp(&b.last_written)
            .then_with(|| a.checkpoint.metadata.name.cmp(&b.checkpoint.metadata.name))
    });
}

/// `(namespace, name)` of `checkpoint` when it is stale (see the module docs).
/// `has_aggregate(vpa, container)` answers for the VPAs served here and is `None` for others.
pub fn stale<S: BuildHasher>(
    checkpoint: &VerticalPodAutoscalerCheckpoint,
    all_vpas: &HashSet<VpaKey, S>,
    has_aggregate: impl Fn(&VpaKey, &str) -> Option<bool>,
) -> Option<(String, String)> {
    let namespace = checkpoint.metadata.namespace.clone().unwrap_or_default();
    let name = checkpoint.metadata.name.clone()?;
    let vpa = checkpoint.spec.vpa_object_name.clone().unwrap_or_default();
    let key = (namespace.clone(), vpa);
    let is_stale = if all_vpas.contains(&key) {
        checkpoint
            .spec
            .container_name
            .as_deref()
            .and_then(|container| has_aggregate(&key, container))
            .is_some_and(|has| !has)
    } else {
        true
    };
    is_stale.then_some((namespace, name))
}

/// The checkpoint object of `container` of VPA `namespace/vpa` (upstream's name and spec).
pub fn checkpoint_object(
    namespace: &str,
    vpa: &str,
    container: &str,
    status: VerticalPodAutoscalerCheckpointStatus,
) -> VerticalPodAutoscalerCheckpoint {
    let mut cp = VerticalPodAutoscalerCheckpoint::new(
        &VerticalPodAutoscalerCheckpoint::object_name(vpa, container),
        VerticalPodAutoscalerCheckpointSpec {
            vpa_object_name: Some(vpa.to_owned()),
            container_name: Some(container.to_owned()),
        },
    );
    cp.metadata.namespace = Some(namespace.to_owned());
    cp.status = Some(status);
    cp
}
