//! An autoscaler as the controller caches it: the metadata decoded, the whole object packed.
//!
//! Decoded, an HPA+ with one metric and its status costs about 9.5 KB (the API types keep every
//! optional metric source inline, and a label selector's map allocates a whole B-tree node);
//! that was most of hpa-plus's memory (docs/benchmarks.md: 1.05 GiB per replica at 100,000
//! objects over four replicas). [`Packed`] keeps what the controller, its predicate and the
//! shard cache read between evaluations (name, namespace, uid, resourceVersion, generation,
//! annotations) and the whole object as JSON, deflated (below). An evaluation reads it back
//! whole ([`Packed::unpack`], about 15 µs: an inflate and a JSON decode of 1.7 KB), so nothing the reconcile reads is lost: the status (its `memory`, conditions and last
//! decision, which a successor must read back: docs/hpa-plus.md, "Decision memory"), labels,
//! everything the watch delivered but `managedFields`.
//!
//! Deflate alone finds little to repeat inside one 1.7 KB object; across objects nearly
//! everything repeats (field names, condition reasons and messages, timestamps' shape). So each
//! object is deflated as the continuation of a `Dictionary`: a representative object of its
//! kind, deflated once and then kept only as the compressor's window. The object's bytes refer
//! back into it, and the same 1.7 KB object packs into about 180 bytes instead of 790. An
//! object is packed again only when the watch delivers a change; the dictionary, inflated ahead
//! of the object, adds about 2 µs to each unpacking.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use plimsoll_core::api::hpa_plus::{NativeHpa, is_read_annotation};
use plimsoll_core::cut_down;
use plimsoll_core::vertical::object_fields::leave_out_hpa;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// What of an autoscaler the controller keeps, cut by its watch ([`Watch::trim`]) before it is
/// packed. The metadata is a namespace user's to fill: labels, annotations, owner references
/// and finalizers up to the API server's 1.5 MiB an object, and with packing each object is
/// kept twice over (its annotations decoded, the whole deflated). Kept: the identity and
/// generation, the annotations the controller reads ([`is_read_annotation`]: settings, stored
/// state, a native HPA's Prometheus queries), the labels `labels_read` names
/// (`--min-replicas-tuning-exclude` and `--record-selector` match them), and spec and status
/// whole. So the rest of the metadata no longer wakes an evaluation either
/// (`spec_or_annotations` hashes what is kept).
///
/// [`Watch::trim`]: plimsoll_runtime::watch::Watch::trim
pub fn kept_fields<K: Resource>(
    labels_read: BTreeSet<String>,
) -> impl Fn(&mut K) + Send + Sync + 'static {
    move |obj: &mut K| {
        let meta = obj.meta_mut();
        let labels = meta
            .labels
            .take()
            .map(|mut all| {
                all.retain(|key, _| labels_read.contains(key));
                all
            })
            .filter(|kept| !kept.is_empty());
        *meta = ObjectMeta {
            generation: meta.generation,
            labels,
            annotations: cut_down::annotations(meta, is_read_annotation),
            ..cut_down::identity(meta)
        };
    }
}

/// Leaves out the spec of a native HPA past
/// [`MAX_SPEC_BYTES`](plimsoll_core::api::limits::MAX_SPEC_BYTES), as
/// [`leave_out_hpa`] does, with the fields the typed object lacks.
pub fn leave_out_native(native: &mut NativeHpa) -> Option<usize> {
    let bytes = leave_out_hpa(&mut native.hpa)?;
    native.metric_fallbacks.clear();
    Some(bytes)
}

/// Why an object could not be packed or read back (neither happens to an object the watch
/// decoded: it is its own serialization read back).
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// JSON out or in.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// Deflate out.
    #[error("deflate: {0}")]
    Deflate(#[from] flate2::CompressError),
    /// Inflate in.
    #[error("inflate: {0}")]
    Inflate(#[from] flate2::DecompressError),
    /// The packed bytes end before the object does.
    #[error("inflate: the packed bytes end early")]
    Truncated,
    /// The compressor's start differed from the dictionary's (it is deterministic: never).
    #[error("deflate: the dictionary deflated differently")]
    Dictionary,
}

/// How hard deflate looks for repeats: zlib's default. Measured on the test fixture (1.7 KB of
/// JSON, `--release` at opt-level 3): level 1 packs it into 344 bytes in 36 µs, level 6 into 181
/// in 51 µs, level 9 no smaller; unpacking takes 15 µs at either. An object is packed once per
/// change and unpacked once per evaluation.
const LEVEL: Compression = Compression::new(6);

/// The start every packed object of one kind continues from.
struct Dictionary {
    /// A representative object of the kind, as the kind serializes it (field order matters: a
    /// repeat is a run of the same bytes).
    text: Vec<u8>,
    /// `text` deflated and flushed to a byte boundary, so that the object's blocks follow it;
    /// inflated ahead of them to fill the window they refer into.
    deflated: Vec<u8>,
}

impl Dictionary {
    fn new(text: Vec<u8>) -> Result<Self, PackError> {
        let mut compress = Compress::new(LEVEL, false);
        let mut deflated = Vec::new();
        deflate(&mut compress, &text, &mut deflated, FlushCompress::Sync)?;
        Ok(Self { text, deflated })
    }

    /// The dictionary of `K`: its representative object read as `K` and written again, so
    /// that its text follows the type's own field order. A kind without a representative, or
    /// one whose representative does not read, packs without (empty text).
    fn of<K: Resource<DynamicType = ()> + Serialize + DeserializeOwned>() -> &'static Self {
        static HPA_PLUS: OnceLock<Dictionary> = OnceLock::new();
        static NATIVE: OnceLock<Dictionary> = OnceLock::new();
        static NONE: OnceLock<Dictionary> = OnceLock::new();
        let (cell, representative) = match K::kind(&()).as_ref() {
            "HorizontalPodAutoscalerPlus" => (&HPA_PLUS, REPRESENTATIVE_HPA_PLUS),
            "HorizontalPodAutoscaler" => (&NATIVE, REPRESENTATIVE_NATIVE),
            _ => (&NONE, ""),
        };
        cell.get_or_init(|| {
            let text = serde_json::from_str::<K>(representative)
                .and_then(|obj| serde_json::to_vec(&obj))
                .unwrap_or_default();
            Dictionary::new(text).unwrap_or(Dictionary {
                text: Vec::new(),
                deflated: Vec::new(),
            })
        })
    }
}

/// An HPA+ as hpa-plus leaves and caches it ([`kept_fields`]): the common metric types, a
/// behavior, the status it writes.
const REPRESENTATIVE_HPA_PLUS: &str = r#"{
  "apiVersion": "autoscaling.plimsoll.dev/v1alpha1", "kind": "HorizontalPodAutoscalerPlus",
  "metadata": {"name": "web-frontend", "namespace": "default", "uid": "0f5c2a9e-7d41-4b8a-9c3e-2a6b1d8f4e07",
    "resourceVersion": "1234567", "generation": 1,
    "annotations": {"plimsoll.dev/tolerance": "0.1"}},
  "spec": {
    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web-frontend"},
    "minReplicas": 1, "maxReplicas": 10,
    "metrics": [
      {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
      {"type": "External", "external": {"metric": {"name": "queue", "selector": {"matchLabels": {"object": "web-frontend"}}},
        "target": {"type": "AverageValue", "averageValue": "10"}}}],
    "behavior": {
      "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}, {"type": "Pods", "value": 4, "periodSeconds": 15}]},
      "scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Max",
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}
  },
  "status": {
    "currentReplicas": 3, "desiredReplicas": 3, "lastScaleTime": "2026-01-01T00:00:00Z",
    "reference": "Deployment/web-frontend", "targetsSummary": "cpu: 45%/60%, queue: 10/10",
    "currentMetrics": [
      {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 45, "averageValue": "450m"}}},
      {"type": "External", "external": {"metric": {"name": "queue", "selector": {"matchLabels": {"object": "web-frontend"}}},
        "current": {"averageValue": "10"}}}],
    "conditions": [
      {"type": "AbleToScale", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
       "reason": "ReadyForNewScale", "message": "recommended size matches current size"},
      {"type": "ScalingActive", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
       "reason": "ValidMetricFound", "message": "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)"},
      {"type": "ScalingLimited", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z",
       "reason": "DesiredWithinRange", "message": "the desired count is within the acceptable range"}],
    "lastDecision": {"time": "2026-01-01T00:00:00Z", "desiredReplicas": 3, "recommendedReplicas": 3,
      "reason": "within tolerance", "proposals": [{"metric": "cpu", "replicas": 3, "value": "45"}]},
    "memory": {"base": "2026-01-01T00:00:00Z", "recommendations": [0, 3, 15000, 3]}
  }
}"#;

/// A native HPA as hpa-plus leaves and caches it ([`kept_fields`]).
const REPRESENTATIVE_NATIVE: &str = r#"{
  "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
  "metadata": {"name": "web-frontend", "namespace": "default", "uid": "0f5c2a9e-7d41-4b8a-9c3e-2a6b1d8f4e07",
    "resourceVersion": "1234567",
    "annotations": {"plimsoll.dev/tolerance": "0.1", "plimsoll.dev/memory": "{}"}},
  "spec": {
    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web-frontend"},
    "minReplicas": 1, "maxReplicas": 10,
    "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}],
    "behavior": {
      "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
        "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]},
      "scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Max",
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}
  },
  "status": {
    "currentReplicas": 3, "desiredReplicas": 3, "lastScaleTime": "2026-01-01T00:00:00Z",
    "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 45, "averageValue": "450m"}}}],
    "conditions": [
      {"type": "AbleToScale", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
       "reason": "ReadyForNewScale", "message": "recommended size matches current size"},
      {"type": "ScalingActive", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
       "reason": "ValidMetricFound", "message": "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)"},
      {"type": "ScalingLimited", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z",
       "reason": "DesiredWithinRange", "message": "the desired count is within the acceptable range"}]
  }
}"#;

thread_local! {
    /// One compressor and one decompressor per thread, reset for each object: each holds tens
    /// of kilobytes of tables that would otherwise be allocated and freed per object.
    static DEFLATE: RefCell<Compress> = RefCell::new(Compress::new(LEVEL, false));
    static INFLATE: RefCell<(Decompress, Vec<u8>)> =
        RefCell::new((Decompress::new(false), Vec::new()));
}

/// Deflates all of `input` onto the end of `out`, growing it as needed.
fn deflate(
    compress: &mut Compress,
    mut input: &[u8],
    out: &mut Vec<u8>,
    flush: FlushCompress,
) -> Result<(), PackError> {
    loop {
        out.reserve(input.len() / 2 + 64);
        let before = compress.total_in();
        let status = compress.compress_vec(input, out, flush)?;
        let read = usize::try_from(compress.total_in() - before).unwrap_or(input.len());
        input = &input[read.min(input.len())..];
        // Done when the input is consumed and the flush fit in the room left: `StreamEnd` for
        // `Finish`; for a sync flush, room to spare (a full buffer may hold more to come).
        match status {
            Status::StreamEnd => return Ok(()),
            _ if input.is_empty()
                && flush != FlushCompress::Finish
                && out.len() < out.capacity() =>
            {
                return Ok(());
            }
            _ => {}
        }
    }
}

/// Inflates all of `input` onto the end of `out`, growing it as needed.
fn inflate(
    decompress: &mut Decompress,
    mut input: &[u8],
    out: &mut Vec<u8>,
    flush: FlushDecompress,
) -> Result<(), PackError> {
    loop {
        out.reserve(input.len() * 4 + 256);
        let before = decompress.total_in();
        let status = decompress.decompress_vec(input, out, flush)?;
        let read = usize::try_from(decompress.total_in() - before).unwrap_or(input.len());
        input = &input[read.min(input.len())..];
        match status {
            Status::StreamEnd => return Ok(()),
            _ if input.is_empty() && out.len() < out.capacity() => {
                return if flush == FlushDecompress::Finish {
                    Err(PackError::Truncated)
                } else {
                    Ok(())
                };
            }
            _ => {}
        }
    }
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

impl<K: Resource<DynamicType = ()>> Packed<K> {
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
        K: Serialize + DeserializeOwned,
    {
        Ok(Self {
            meta: Self::meta_of(obj),
            bytes: deflate_after::<K>(obj)?.into(),
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
        K: Serialize + DeserializeOwned,
    {
        inflate_after::<K, K>(&self.bytes)
    }

    /// The packed size in bytes.
    pub fn packed_bytes(&self) -> usize {
        self.bytes.len()
    }
}

/// `value` as JSON, deflated as the continuation of `K`'s `Dictionary`: an object of kind `K`,
/// or a part of one (its status).
pub fn deflate_after<K>(value: &impl Serialize) -> Result<Box<[u8]>, PackError>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned,
{
    let json = serde_json::to_vec(value)?;
    let dictionary = Dictionary::of::<K>();
    DEFLATE.with_borrow_mut(|compress| {
        compress.reset();
        let mut out = Vec::with_capacity(dictionary.deflated.len() + json.len() / 4);
        deflate(compress, &dictionary.text, &mut out, FlushCompress::Sync)?;
        // The compressor is deterministic, so its start is the dictionary's own; were it not,
        // the value's blocks would continue a window the reader cannot rebuild.
        if out != dictionary.deflated {
            return Err(PackError::Dictionary);
        }
        deflate(compress, &json, &mut out, FlushCompress::Finish)?;
        Ok(Box::from(&out[dictionary.deflated.len()..]))
    })
}

/// The value [`deflate_after`] packed into `bytes`.
pub fn inflate_after<K, T>(bytes: &[u8]) -> Result<T, PackError>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    T: DeserializeOwned,
{
    let dictionary = Dictionary::of::<K>();
    INFLATE.with_borrow_mut(|(decompress, out)| {
        decompress.reset(false);
        out.clear();
        inflate(decompress, &dictionary.deflated, out, FlushDecompress::None)?;
        inflate(decompress, bytes, out, FlushDecompress::Finish)?;
        let json = out
            .get(dictionary.text.len()..)
            .ok_or(PackError::Truncated)?;
        let value = serde_json::from_slice(json);
        // A rare large object does not keep its buffer's size for the life of the thread.
        if out.capacity() > 64 * 1024 {
            *out = Vec::new();
        }
        Ok(value?)
    })
}

impl<K: Resource<DynamicType = ()>> Resource for Packed<K> {
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
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned,
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
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned,
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
    use plimsoll_core::api::limits::MAX_SPEC_BYTES;
    use plimsoll_core::vertical::object_fields::leave_out_hpa_plus;
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
        // What the packing is for: the decoded object costs about 9.5 KB, its JSON 1.7 KB,
        // deflated alone about 790 bytes; continuing the dictionary, about 180.
        let json = serde_json::to_vec(&object).expect("encodes").len();
        assert!(
            packed.packed_bytes() * 6 < json,
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
    fn each_kind_continues_its_own_representative() {
        // A representative that no longer reads as its type would leave the kind without a
        // dictionary, and each object several times larger, silently.
        for (kind, text) in [
            (
                "HPA+",
                &Dictionary::of::<HorizontalPodAutoscalerPlus>().text,
            ),
            ("native", &Dictionary::of::<NativeHpa>().text),
        ] {
            let value: serde_json::Value = serde_json::from_slice(text).expect("JSON");
            assert!(
                value["status"]["conditions"]
                    .as_array()
                    .is_some_and(|c| c.len() == 3),
                "{kind}: {value}"
            );
        }
        // Two objects packed on two threads, with their compressors' state, read back alike.
        let a = autoscaler("u4", "11", 2);
        let packed = std::thread::spawn(move || Packed::pack(&a).expect("packs"))
            .join()
            .expect("joins");
        let b = Packed::pack(&autoscaler("u5", "12", 5)).expect("packs");
        assert_eq!(packed.unpack().expect("unpacks"), autoscaler("u4", "11", 2));
        assert_eq!(b.unpack().expect("unpacks"), autoscaler("u5", "12", 5));
    }

    #[test]
    fn a_truncated_object_is_an_error_not_a_guess() {
        let packed = Packed::pack(&autoscaler("u6", "1", 1)).expect("packs");
        let cut = Packed::<HorizontalPodAutoscalerPlus> {
            meta: packed.meta.clone(),
            bytes: Arc::from(&packed.bytes[..packed.bytes.len() / 2]),
            kind: PhantomData,
        };
        assert!(cut.unpack().is_err());
    }

    #[test]
    fn a_deletion_keeps_what_identifies_the_object() {
        let object = autoscaler("u3", "9", 1);
        let deleted = Packed::deleted(&object);
        assert_eq!(deleted.meta().uid.as_deref(), Some("u3"));
        assert_eq!(deleted.meta().name, object.metadata.name);
        assert_eq!(deleted.meta().namespace, object.metadata.namespace);
    }

    /// `obj` as a tenant can fatten it without changing what it asks for: 200 KiB of foreign
    /// annotations, a megabyte of labels, owner references and finalizers.
    fn fattened<K: Resource>(mut obj: K) -> K {
        let meta = obj.meta_mut();
        let annotations = meta.annotations.get_or_insert_default();
        for i in 0..50 {
            annotations.insert(format!("example.com/a{i}"), "x".repeat(4096));
        }
        let labels = meta.labels.get_or_insert_default();
        for i in 0..16_000 {
            labels.insert(format!("example.com/l{i}"), "v".repeat(63));
        }
        meta.owner_references = Some(
            (0..1000)
                .map(
                    |i| k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                        api_version: "v1".into(),
                        kind: "ConfigMap".into(),
                        name: format!("c{i}"),
                        uid: format!("u{i}"),
                        ..Default::default()
                    },
                )
                .collect(),
        );
        meta.finalizers = Some((0..1000).map(|i| format!("example.com/f{i}")).collect());
        meta.creation_timestamp = None;
        obj
    }

    #[test]
    fn a_fattened_autoscaler_is_kept_as_the_lean_one() {
        let mut lean = autoscaler("u1", "7", 3);
        let annotations = lean.metadata.annotations.get_or_insert_default();
        annotations.insert("plimsoll.dev/tolerance".into(), "0.05".into());
        annotations.insert("platform.stke/autoscale-disabled".into(), "false".into());
        let mut fat = fattened(lean.clone());
        let trim = kept_fields::<HorizontalPodAutoscalerPlus>(["team".to_owned()].into());
        assert!(serde_json::to_vec(&fat).expect("encodes").len() > 1_500_000);
        trim(&mut fat);
        trim(&mut lean);
        assert_eq!(
            serde_json::to_value(&fat).expect("encodes"),
            serde_json::to_value(&lean).expect("encodes")
        );
        let meta = &fat.metadata;
        // What the reconcile reads is all there: identity, generation, settings, the label the
        // exclusion names; the spec and status whole.
        assert_eq!(
            (
                meta.name.as_deref(),
                meta.namespace.as_deref(),
                meta.uid.as_deref()
            ),
            (Some("w-u1"), Some("bench-0"), Some("u1"))
        );
        assert_eq!(
            (meta.resource_version.as_deref(), meta.generation),
            (Some("7"), Some(1))
        );
        assert_eq!(
            meta.annotations
                .as_ref()
                .map(|a| a.keys().map(String::as_str).collect::<Vec<_>>()),
            Some(vec![
                "platform.stke/autoscale-disabled",
                "plimsoll.dev/tolerance"
            ])
        );
        assert_eq!(
            meta.labels,
            Some([("team".to_owned(), "shop".to_owned())].into())
        );
        assert_eq!(fat.spec, autoscaler("u1", "7", 3).spec);
        assert_eq!(fat.status, autoscaler("u1", "7", 3).status);
        let packed = Packed::pack(&fat).expect("packs");
        assert!(
            packed.packed_bytes() < 400,
            "{} bytes",
            packed.packed_bytes()
        );
        // No exclusion: no label is read, none is kept.
        let mut unlabelled = autoscaler("u1", "7", 3);
        kept_fields::<HorizontalPodAutoscalerPlus>(BTreeSet::new())(&mut unlabelled);
        assert_eq!(unlabelled.metadata.labels, None);
    }

    #[test]
    fn a_fattened_native_hpa_reads_as_the_lean_one() {
        // With a Prometheus query, which a native HPA keeps in an annotation of its own.
        let mut json: serde_json::Value =
            serde_json::from_str(REPRESENTATIVE_NATIVE).expect("the fixture is JSON");
        json["metadata"]["annotations"]["metric-config.external.prometheus-query.prometheus/rps"] =
            json!("sum(rate(http_requests_total[1m]))");
        json["spec"]["metrics"]
            .as_array_mut()
            .expect("metrics")
            .push(json!({"type": "External", "external": {
                "metric": {"name": "prometheus-query",
                    "selector": {"matchLabels": {"query-name": "rps"}}},
                "target": {"type": "AverageValue", "averageValue": "100"}}}));
        let lean = NativeHpa::from_value(json).expect("the fixture decodes");
        let mut fat = fattened(lean.clone());
        kept_fields::<NativeHpa>(BTreeSet::new())(&mut fat);
        let as_plus = |hpa: &NativeHpa| {
            HorizontalPodAutoscalerPlus::from_native_object(hpa)
                .expect("converts")
                .spec
        };
        assert_eq!(as_plus(&fat), as_plus(&lean));
        assert!(
            as_plus(&fat).metrics[1]
                .prometheus
                .as_ref()
                .is_some_and(|p| p.query.starts_with("sum(rate")),
            "the query is read from the kept annotation"
        );
        assert_eq!(fat.metadata.annotations, lean.metadata.annotations);
        assert!(serde_json::to_vec(&fat).expect("encodes").len() < 2_000);
    }

    /// `obj`'s first metric given a selector of `values` values of 60 bytes.
    fn with_selector(mut json: serde_json::Value, values: usize) -> serde_json::Value {
        let values: Vec<String> = (0..values).map(|i| format!("{i:0>60}")).collect();
        json["spec"]["metrics"] = json!([{"type": "External", "external": {
            "metric": {"name": "queue", "selector": {"matchExpressions": [
                {"key": "queue", "operator": "In", "values": values}]}},
            "target": {"type": "AverageValue", "averageValue": "10"}}}]);
        json
    }

    #[test]
    fn a_spec_past_the_bound_is_left_out_marked_and_refused() {
        let plus: serde_json::Value = serde_json::to_value(autoscaler("u1", "7", 3)).unwrap();
        let native: serde_json::Value = serde_json::from_str(REPRESENTATIVE_NATIVE).unwrap();
        for values in [10, 5_000] {
            let over = values > 10;
            let mut plus: HorizontalPodAutoscalerPlus =
                serde_json::from_value(with_selector(plus.clone(), values)).unwrap();
            let mut native = NativeHpa::from_value(with_selector(native.clone(), values)).unwrap();
            let (plus_before, native_before) = (plus.clone(), native.clone());
            let plus_bytes = leave_out_hpa_plus(&mut plus);
            let native_bytes = leave_out_native(&mut native);
            if !over {
                assert_eq!((plus_bytes, native_bytes), (None, None));
                assert_eq!(plus, plus_before);
                assert_eq!(native, native_before);
                assert_eq!(cut_down::spec_left_out(&plus.metadata), None);
                continue;
            }
            let bytes = plus_bytes.expect("left out");
            assert!(bytes > MAX_SPEC_BYTES, "{bytes}");
            assert!(native_bytes.is_some_and(|b| b > MAX_SPEC_BYTES));
            // Target and bounds stay (status and the shard cache show them), the metrics go.
            assert_eq!(
                plus.spec.scale_target_ref,
                plus_before.spec.scale_target_ref
            );
            assert_eq!(plus.spec.max_replicas, plus_before.spec.max_replicas);
            assert!(plus.spec.metrics.is_empty());
            let spec = native.hpa.spec.as_ref().expect("a spec");
            assert_eq!(spec.metrics, None);
            assert_eq!(spec.max_replicas, 10);
            // The status hpa-plus wrote stays: a successor reads its memory.
            assert_eq!(plus.status, plus_before.status);
            let why = cut_down::spec_left_out(&plus.metadata).expect("refused");
            assert!(why.contains(&bytes.to_string()), "{why}");
            assert!(cut_down::spec_left_out(&native.metadata).is_some());
            // The mark survives packing, and the packed object is small.
            let packed = Packed::pack(&plus).unwrap();
            assert!(packed.bytes.len() < 1_000, "{}", packed.bytes.len());
            assert!(cut_down::spec_left_out(&packed.unpack().unwrap().metadata).is_some());
        }
    }

    #[test]
    fn no_annotation_the_api_server_accepts_reads_as_left_out() {
        // A tenant's look-alike (a valid key) is an annotation like any other.
        let mut plus = autoscaler("u1", "7", 3);
        plus.metadata
            .annotations
            .get_or_insert_default()
            .insert("plimsoll.dev/spec-left-out".into(), "999999".into());
        assert_eq!(cut_down::spec_left_out(&plus.metadata), None);
        let name = cut_down::SPEC_LEFT_OUT
            .split_once('/')
            .map(|(_, n)| n)
            .unwrap();
        assert!(
            name.contains(':'),
            "a name segment the API server refuses: {name}"
        );
    }
}
