//! An autoscaler as the controller caches it: the metadata decoded, the whole object packed.
//!
//! Decoded, an HPA+ with one metric and its status costs about 9.5 KB (the API types keep every
//! optional metric source inline, and a label selector's map allocates a whole B-tree node);
//! that was most of hpa-plus's memory (docs/benchmarks.md: 1.05 GiB per replica at 100,000
//! objects over four replicas). [`Packed`] keeps what the controller, its predicate and the
//! shard cache read between evaluations (name, namespace, uid, resourceVersion, generation,
//! annotations) and the whole object as JSON, deflated: about 750 bytes for that object. An
//! evaluation reads it back whole ([`Packed::unpack`], some microseconds: a JSON decode of 1.7
//! KB), so nothing the reconcile reads is lost: the status (its `memory`, conditions and last
//! decision, which a successor must read back: docs/hpa-plus.md, "Decision memory"), labels,
//! everything the watch delivered but `managedFields`.

use std::borrow::Cow;
use std::io::Write as _;
use std::marker::PhantomData;
use std::sync::Arc;

use flate2::Compression;
use flate2::write::{DeflateDecoder, DeflateEncoder};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Why an object could not be packed or read back (neither happens to an object the watch
/// decoded: it is its own serialization read back).
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// JSON out or in.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// Deflate out or in.
    #[error("deflate: {0}")]
    Deflate(#[from] std::io::Error),
}

/// An object of kind `K`, packed; a [`Resource`] of the same kind, so kube's reflector and
/// controller keep it as they kept `K`. Cheap to clone (the packed bytes are shared).
pub struct Packed<K> {
    meta: ObjectMeta,
    bytes: Arc<[u8]>,
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Packed<K> {
    fn clone(&self) -> Self {
        Self {
            meta: self.meta.clone(),
            bytes: self.bytes.clone(),
            kind: PhantomData,
        }
    }
}

impl<K> std::fmt::Debug for Packed<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packed")
            .field("namespace", &self.meta.namespace)
            .field("name", &self.meta.name)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

impl<K: Resource> Packed<K> {
    /// The metadata kept decoded: what identifies the object (the store's key, its shard), and
    /// what the controller's predicate hashes (generation, annotations).
    fn meta_of(obj: &K) -> ObjectMeta {
        let meta = obj.meta();
        ObjectMeta {
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            generation: meta.generation,
            annotations: meta.annotations.clone(),
            ..ObjectMeta::default()
        }
    }

    /// `obj` packed.
    pub fn pack(obj: &K) -> Result<Self, PackError>
    where
        K: Serialize,
    {
        let mut encoder = DeflateEncoder::new(Vec::new(), Compression::fast());
        serde_json::to_writer(&mut encoder, obj)?;
        Ok(Self {
            meta: Self::meta_of(obj),
            bytes: encoder.finish()?.into(),
            kind: PhantomData,
        })
    }

    /// Only the metadata, for a deletion (nothing reads a deleted object back).
    pub fn deleted(obj: &K) -> Self {
        Self {
            meta: Self::meta_of(obj),
            bytes: Arc::from(Vec::new()),
            kind: PhantomData,
        }
    }

    /// The object, whole.
    pub fn unpack(&self) -> Result<K, PackError>
    where
        K: DeserializeOwned,
    {
        let mut decoder = DeflateDecoder::new(Vec::new());
        decoder.write_all(&self.bytes)?;
        Ok(serde_json::from_slice(&decoder.finish()?)?)
    }

    /// The packed size in bytes.
    pub fn packed_bytes(&self) -> usize {
        self.bytes.len()
    }
}

impl<K: Resource> Resource for Packed<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

/// A watch event of `K` as one of [`Packed<K>`]. An object that does not pack (none: see
/// [`PackError`]) is left out with a warning, and cached again at its next change.
pub fn pack_event<K>(
    event: kube::runtime::watcher::Event<K>,
) -> Option<kube::runtime::watcher::Event<Packed<K>>>
where
    K: Resource + Serialize,
{
    use kube::runtime::watcher::Event;
    let pack = |obj: &K| match Packed::pack(obj) {
        Ok(packed) => Some(packed),
        Err(error) => {
            tracing::warn!(%error, name = obj.meta().name.as_deref().unwrap_or_default(),
                "could not pack an autoscaler for the cache; it is cached at its next change");
            None
        }
    };
    Some(match event {
        Event::Apply(obj) => Event::Apply(pack(&obj)?),
        Event::InitApply(obj) => Event::InitApply(pack(&obj)?),
        Event::Delete(obj) => Event::Delete(Packed::deleted(&obj)),
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
    })
}

/// Decodes `K` and packs it: kube's controller asks its objects to be decodable, although it is
/// handed them here ([`pack_event`]) and never decodes one itself.
impl<'de, K> serde::Deserialize<'de> for Packed<K>
where
    K: Resource + Serialize + DeserializeOwned,
{
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let obj = K::deserialize(d)?;
        Self::pack(&obj).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use plimsoll_core::api::hpa_plus::{HorizontalPodAutoscalerPlus, NativeHpa};
    use serde_json::json;

    /// An HPA+ as the bench's after its first evaluation: an External metric, every status
    /// field a successor reads (memory, conditions, last decision, current metrics).
    pub(crate) fn autoscaler(
        uid: &str,
        version: &str,
        replicas: i32,
    ) -> HorizontalPodAutoscalerPlus {
        serde_json::from_value(json!({
            "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
            "kind": "HorizontalPodAutoscalerPlus",
            "metadata": {"name": format!("w-{uid}"), "namespace": "bench-0", "uid": uid,
                "resourceVersion": version, "generation": 1, "labels": {"team": "shop"},
                "annotations": {"note": "kept decoded"},
                "creationTimestamp": "2026-11-28T13:00:00Z"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "w1"},
                "minReplicas": 1, "maxReplicas": 10,
                "metrics": [{"type": "External", "external": {
                    "metric": {"name": "queue", "selector": {"matchLabels": {"object": "w1"}}},
                    "target": {"type": "AverageValue", "averageValue": "10"}}}]
            },
            "status": {
                "currentReplicas": replicas, "desiredReplicas": replicas,
                "reference": "Deployment/w1", "targetsSummary": "queue: 10/10",
                "currentMetrics": [{"type": "External", "external": {
                    "metric": {"name": "queue", "selector": {"matchLabels": {"object": "w1"}}},
                    "current": {"averageValue": "10"}}}],
                "conditions": [
                    {"type": "AbleToScale", "status": "True",
                     "lastTransitionTime": "2026-11-28T13:00:05Z", "reason": "ReadyForNewScale",
                     "message": "recommended size matches current size"},
                    {"type": "ScalingActive", "status": "True",
                     "lastTransitionTime": "2026-11-28T13:00:05Z", "reason": "ValidMetricFound",
                     "message": "the HPA was able to successfully calculate a replica count from external metric queue"},
                    {"type": "ScalingLimited", "status": "False",
                     "lastTransitionTime": "2026-11-28T13:00:05Z", "reason": "DesiredWithinRange",
                     "message": "the desired count is within the acceptable range"}],
                "lastDecision": {"time": "2026-11-28T13:00:05Z", "desiredReplicas": replicas,
                    "recommendedReplicas": replicas, "reason": "within tolerance",
                    "proposals": [{"metric": "queue", "replicas": replicas, "value": "10"}]},
                "memory": {"base": "2026-11-28T13:00:05Z", "recommendations": [0, replicas, 15000, replicas]}
            }
        }))
        .expect("the fixture decodes")
    }

    #[test]
    fn an_autoscaler_comes_back_whole_with_its_status() {
        let object = autoscaler("u1", "7", 3);
        let packed = Packed::pack(&object).expect("packs");
        let back = packed.unpack().expect("unpacks");
        // Everything a successor reads, not only what identifies the object: status.memory
        // (the history a stabilization window needs), the conditions (their transition times
        // and the Events owed on a change), the last decision and the metrics (whether the
        // status changed, and so whether to write it), the labels.
        assert_eq!(
            serde_json::to_value(&back).expect("encodes"),
            serde_json::to_value(&object).expect("encodes")
        );
        let status = back.status.expect("status kept");
        assert_eq!(
            status.memory.expect("memory kept").recommendations,
            [0, 3, 15000, 3]
        );
        assert_eq!(status.conditions.len(), 3);
        assert_eq!(back.metadata.labels, object.metadata.labels);
        // Decoded between evaluations: what the store, the shard and the predicate read.
        let meta = packed.meta();
        assert_eq!(meta.uid.as_deref(), Some("u1"));
        assert_eq!(meta.resource_version.as_deref(), Some("7"));
        assert_eq!(meta.generation, Some(1));
        assert_eq!(meta.annotations, object.metadata.annotations);
        assert_eq!(
            meta.labels, None,
            "labels are read from the unpacked object only"
        );
        // What the packing is for: the decoded object costs about 9.5 KB, its JSON 1.7 KB.
        let json = serde_json::to_vec(&object).expect("encodes").len();
        assert!(
            packed.packed_bytes() * 2 < json,
            "{} of {json} bytes",
            packed.packed_bytes()
        );
    }

    #[test]
    fn a_native_hpa_comes_back_with_what_the_typed_hpa_lacks() {
        let object: NativeHpa = serde_json::from_value(json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u2",
                "annotations": {"plimsoll.dev/tolerance": "0.05"}},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "maxReplicas": 5, "behavior": {"syncPeriodSeconds": 30}},
            "status": {"currentReplicas": 2, "desiredReplicas": 2}
        }))
        .expect("the fixture decodes");
        let back = Packed::pack(&object)
            .expect("packs")
            .unpack()
            .expect("unpacks");
        assert_eq!(back, object);
        assert_eq!(
            serde_json::to_value(&back).expect("encodes")["spec"]["behavior"]["syncPeriodSeconds"],
            30
        );
    }

    #[test]
    fn a_deletion_keeps_what_identifies_the_object() {
        let object = autoscaler("u3", "9", 1);
        let deleted = Packed::deleted(&object);
        assert_eq!(deleted.meta().uid.as_deref(), Some("u3"));
        assert_eq!(deleted.meta().name, object.metadata.name);
        assert_eq!(deleted.meta().namespace, object.metadata.namespace);
    }
}
