//! Kubernetes protobuf bodies (`application/vnd.kubernetes.protobuf`), both directions, for
//! every built-in kind: client-go's typed clients (kubectl's `create`, `scale`, `drain`, the
//! controllers of a real cluster) send protobuf for built-in kinds and ask for protobuf
//! answers. The mapping is generic, driven by the upstream `generated.proto` files vendored in
//! `proto/` and compiled by `build.rs` (`schema`); `json` maps a message to Kubernetes' own JSON
//! and back (`wellknown` for the apimachinery types with their own JSON); `envelope` wraps
//! objects in `k8s\0` + `runtime.Unknown` and frames watch events.
//!
//! Content negotiation is the real server's: protobuf when the client lists it first among the
//! types it accepts and the object is a built-in kind; custom resources, Tables and the metrics
//! APIs stay JSON, and a client that accepts only protobuf for them gets 406.

mod envelope;
mod json;
mod schema;
mod wellknown;

use serde_json::Value;

use crate::error::ApiError;

pub use envelope::{MAGIC, decode, encode, has_message, watch_frame};

/// The protobuf media type.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The media type of a protobuf watch stream.
pub const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// How a response body is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `application/json`.
    Json,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

/// The encoding of a response to a client sending `accept`, where `protobuf_possible` says
/// whether the response has a protobuf form (a built-in kind, not a Table). The first media
/// type the sim can produce wins; a client that accepts only protobuf where there is none gets
/// 406, as from kube-apiserver. Media types the sim does not know (or no `Accept`) get JSON.
pub fn negotiate(accept: &str, protobuf_possible: bool) -> Result<Encoding, ApiError> {
    let mut refused_protobuf = false;
    for entry in accept.split(',') {
        let mut parts = entry.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default().to_ascii_lowercase();
        let params: Vec<&str> = parts.collect();
        if params.iter().any(|p| p.replace(' ', "") == "q=0") {
            continue;
        }
        let table = params.iter().any(|p| p.starts_with("as="));
        match media.as_str() {
            PROTOBUF if protobuf_possible && !table => return Ok(Encoding::Protobuf),
            PROTOBUF => refused_protobuf = true,
            "application/json" | "application/yaml" | "application/*" | "*/*" => {
                return Ok(Encoding::Json);
            }
            _ => {}
        }
    }
    if refused_protobuf {
        return Err(ApiError::new(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json, application/yaml, application/json;stream=watch",
        ));
    }
    Ok(Encoding::Json)
}

/// Whether a JSON object has a protobuf form (its `apiVersion`/`kind` is a built-in message).
pub fn encodable(obj: &Value) -> bool {
    let field = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or_default();
    has_message(field("apiVersion"), field("kind"))
}
