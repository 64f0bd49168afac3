//! The Kubernetes protobuf envelope: the 4-byte magic `k8s\0` followed by a `runtime.Unknown`
//! whose `typeMeta` names the object's `apiVersion` and `kind` and whose `raw` holds the
//! object's own message. Watch streams frame each `meta.v1.WatchEvent` (without envelope) with
//! a 4-byte big-endian length; the event's `object.raw` is an enveloped object.

use prost::Message;
use prost_reflect::{DynamicMessage, Value as Pb};
use serde_json::{Value, json};

use super::json;
use super::schema::{META_V1, Schema, schema};
use crate::error::ApiError;

/// The prefix of every enveloped protobuf body.
pub const MAGIC: &[u8] = b"k8s\0";

const UNKNOWN: &str = "apimachinery.pkg.runtime.Unknown";

fn bad(msg: &str) -> ApiError {
    ApiError::bad_request(format!(
        "the body of the request could not be decoded as protobuf: {msg}"
    ))
}

fn loaded() -> Result<&'static Schema, ApiError> {
    schema().map_err(|e| ApiError::internal(format!("the protobuf schema did not load: {e}")))
}

fn message(schema: &Schema, name: &str) -> Result<prost_reflect::MessageDescriptor, ApiError> {
    schema
        .message(name)
        .ok_or_else(|| ApiError::internal(format!("no message {name} in the protobuf schema")))
}

fn str_of(msg: &DynamicMessage, name: &str) -> String {
    msg.get_field_by_name(name)
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// Decodes an enveloped body into the JSON object it carries, with `apiVersion` and `kind` from
/// the envelope, or from `fallback` (the URL's resource) when the envelope names none.
pub fn decode(body: &[u8], fallback: Option<(&str, &str)>) -> Result<Value, ApiError> {
    let schema = loaded()?;
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("missing k8s magic prefix"))?;
    let unknown =
        DynamicMessage::decode(message(schema, UNKNOWN)?, rest).map_err(|e| bad(&e.to_string()))?;
    let type_meta = match unknown.get_field_by_name("typeMeta").as_deref() {
        Some(Pb::Message(m)) => (str_of(m, "apiVersion"), str_of(m, "kind")),
        _ => (String::new(), String::new()),
    };
    let (api_version, kind) = match (type_meta, fallback) {
        ((_, k), Some((av, fk))) if k.is_empty() => (av.to_string(), fk.to_string()),
        (tm, _) => tm,
    };
    if !str_of(&unknown, "contentEncoding").is_empty() {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            "the sim does not decode protobuf bodies with a content encoding",
        ));
    }
    let desc = schema.message_for(&api_version, &kind).ok_or_else(|| {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (no protobuf message for {api_version} {kind})"
            ),
        )
    })?;
    let raw = match unknown.get_field_by_name("raw").as_deref() {
        Some(Pb::Bytes(b)) => b.clone(),
        _ => prost::bytes::Bytes::new(),
    };
    let msg = DynamicMessage::decode(desc, raw).map_err(|e| bad(&e.to_string()))?;
    let mut obj = json::to_json(schema, &nested, &msg).map_err(|e| bad(&e))?;
    if let Some(map) = obj.as_object_mut() {
        if !api_version.is_empty() {
            map.insert("apiVersion".into(), json!(api_version));
        }
        if !kind.is_empty() {
            map.insert("kind".into(), json!(kind));
        }
    }
    Ok(obj)
}

/// Embedded bytes that are an envelope themselves, decoded (a `RawExtension` holding an object).
fn nested(b: &[u8]) -> Option<Result<Value, String>> {
    b.starts_with(MAGIC)
        .then(|| decode(b, None).map_err(|e| e.message))
}

/// Whether `api_version`/`kind` has a protobuf message (a built-in kind or a meta kind).
pub fn has_message(api_version: &str, kind: &str) -> bool {
    schema().is_ok_and(|s| s.message_for(api_version, kind).is_some())
}

/// Encodes a JSON object (with `apiVersion` and `kind`) into an enveloped protobuf body.
pub fn encode(obj: &Value) -> Result<Vec<u8>, ApiError> {
    let schema = loaded()?;
    let field = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    let desc = schema.message_for(api_version, kind).ok_or_else(|| {
        ApiError::internal(format!("no protobuf message for {api_version} {kind}"))
    })?;
    let raw = json::from_json(schema, &desc, obj)
        .map_err(|e| ApiError::internal(format!("encoding {kind} as protobuf: {e}")))?
        .encode_to_vec();
    let unknown_desc = message(schema, UNKNOWN)?;
    let type_meta_field = unknown_desc
        .get_field_by_name("typeMeta")
        .ok_or_else(|| ApiError::internal("runtime.Unknown has no typeMeta"))?;
    let prost_reflect::Kind::Message(type_meta_desc) = type_meta_field.kind() else {
        return Err(ApiError::internal(
            "runtime.Unknown.typeMeta is not a message",
        ));
    };
    let mut type_meta = DynamicMessage::new(type_meta_desc);
    type_meta.set_field_by_name("apiVersion", Pb::String(api_version.into()));
    type_meta.set_field_by_name("kind", Pb::String(kind.into()));
    let mut unknown = DynamicMessage::new(unknown_desc);
    unknown.set_field(&type_meta_field, Pb::Message(type_meta));
    unknown.set_field_by_name("raw", Pb::Bytes(raw.into()));
    // gogo writes the non-pointer strings even when empty; so does the sim.
    unknown.set_field_by_name("contentEncoding", Pb::String(String::new()));
    unknown.set_field_by_name("contentType", Pb::String(String::new()));
    let mut out = MAGIC.to_vec();
    unknown
        .encode(&mut out)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(out)
}

/// One watch stream frame: the length-prefixed `WatchEvent` of `event_type` and `object`.
pub fn watch_frame(event_type: &str, object: &Value) -> Result<Vec<u8>, ApiError> {
    let schema = loaded()?;
    let desc = message(schema, &format!("{META_V1}.WatchEvent"))?;
    let mut event = DynamicMessage::new(desc.clone());
    event.set_field_by_name("type", Pb::String(event_type.into()));
    let object_field = desc
        .get_field_by_name("object")
        .ok_or_else(|| ApiError::internal("WatchEvent has no object"))?;
    let prost_reflect::Kind::Message(raw_desc) = object_field.kind() else {
        return Err(ApiError::internal("WatchEvent.object is not a message"));
    };
    let mut raw = DynamicMessage::new(raw_desc);
    raw.set_field_by_name("raw", Pb::Bytes(encode(object)?.into()));
    event.set_field(&object_field, Pb::Message(raw));
    let body = event.encode_to_vec();
    let len = u32::try_from(body.len()).map_err(|e| ApiError::internal(e.to_string()))?;
    let mut frame = len.to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    Ok(frame)
}
