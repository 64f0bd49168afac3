//! Decoding `admission.k8s.io/v1` AdmissionReview requests into kube's admission types
//! ([`kube::core::admission`]) and writing the answers on the wire.
//!
//! Invariants: [`decode`] never panics on any input (a fuzz target and a property test feed it
//! arbitrary bytes); anything that is not a v1 AdmissionReview with a `request.uid` is a
//! [`DecodeError`] (answered with HTTP 400). The embedded object stays a [`DynamicObject`] here:
//! what it must be (a Pod, a VerticalPodAutoscaler) is decided by the webhook, which never
//! rejects a pod because its spec does not decode.
//!
//! The answer keeps the JSON this webhook has always written ([`AdmissionReviewResponse`]):
//! `patch` in base64 and `status` only on a denial, where kube's own serialization writes the
//! patch as an array of numbers and an empty `status` on every answer.

use kube::core::DynamicObject;
use kube::core::TypeMeta;
use kube::core::admission::{self, META_API_VERSION_V1, META_KIND};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The only AdmissionReview version served (`admissionReviewVersions: [v1]`).
pub const API_VERSION: &str = META_API_VERSION_V1;
/// `kind` of the envelope.
pub const KIND: &str = META_KIND;

/// HTTP-like code of a denial (an invalid object).
const DENIED_CODE: u16 = 400;

/// A decoded request: the object is kept as a [`DynamicObject`].
pub type AdmissionRequest = admission::AdmissionRequest<DynamicObject>;
/// An answer, built with [`allow`], [`allow_with_warning`], [`patched`] or [`deny`].
pub type AdmissionResponse = admission::AdmissionResponse;
pub use kube::core::admission::Operation;

/// Why a body is not an AdmissionReview.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// Not JSON, or JSON of the wrong shape.
    #[error("body is not an AdmissionReview: {0}")]
    NotJson(String),
    /// `apiVersion`/`kind` are not `admission.k8s.io/v1` `AdmissionReview`.
    #[error(
        "expected apiVersion {API_VERSION} kind {KIND}, got apiVersion {api_version:?} kind {kind:?}"
    )]
    WrongType {
        /// The envelope's `apiVersion`.
        api_version: String,
        /// The envelope's `kind`.
        kind: String,
    },
    /// No `request`, or a request with an empty `uid`.
    #[error("AdmissionReview has no request.uid")]
    NoRequest,
}

/// The envelope, read before the request so that a wrong `apiVersion`/`kind` or a missing
/// request is named as such rather than as a missing request field.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    request: Option<Value>,
}

/// Decodes a request body.
pub fn decode(body: &[u8]) -> Result<AdmissionRequest, DecodeError> {
    let envelope: Envelope =
        serde_json::from_slice(body).map_err(|e| DecodeError::NotJson(e.to_string()))?;
    if envelope.api_version != API_VERSION || envelope.kind != KIND {
        return Err(DecodeError::WrongType {
            api_version: envelope.api_version,
            kind: envelope.kind,
        });
    }
    let Some(request) = envelope.request else {
        return Err(DecodeError::NoRequest);
    };
    if request.get("uid").and_then(Value::as_str) == Some("") {
        return Err(DecodeError::NoRequest);
    }
    let mut request: AdmissionRequest =
        serde_json::from_value(request).map_err(|e| DecodeError::NotJson(e.to_string()))?;
    // What kube's `AdmissionReview` → `AdmissionRequest` conversion copies, so that answers
    // built from the request carry the envelope's type.
    request.types = TypeMeta {
        api_version: API_VERSION.to_owned(),
        kind: KIND.to_owned(),
    };
    Ok(request)
}

/// Allowed, unchanged.
pub fn allow(request: &AdmissionRequest) -> AdmissionResponse {
    AdmissionResponse::from(request)
}

/// Allowed, unchanged, with a warning (shown by kubectl as `Warning: …`).
pub fn allow_with_warning(
    request: &AdmissionRequest,
    warning: impl Into<String>,
) -> AdmissionResponse {
    let mut response = allow(request);
    response.warnings = Some(vec![warning.into()]);
    response
}

/// Allowed with the JSON Patch `ops` (RFC 6902 operations, serialized as they are).
pub fn patched(
    request: &AdmissionRequest,
    ops: &impl Serialize,
) -> Result<AdmissionResponse, PatchError> {
    let patch = serde_json::to_value(ops).and_then(serde_json::from_value)?;
    Ok(allow(request).with_patch(patch)?)
}

/// Why a patch cannot be put into an answer.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The operations are not an RFC 6902 patch.
    #[error("not a JSON Patch: {0}")]
    NotJsonPatch(#[from] serde_json::Error),
    /// The patch does not serialize.
    #[error(transparent)]
    Serialize(#[from] admission::SerializePatchError),
}

/// Denied with a message (HTTP-like code 400), shown to the user by kubectl.
pub fn deny(request: &AdmissionRequest, message: impl Into<String>) -> AdmissionResponse {
    let mut response = allow(request).deny(message.into());
    response.result.code = DENIED_CODE;
    response
}

/// The AdmissionReview answered to the apiserver, in this webhook's JSON (see the module docs).
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReviewResponse<'a> {
    /// Always [`API_VERSION`].
    pub api_version: &'static str,
    /// Always [`KIND`].
    pub kind: &'static str,
    /// The answer.
    response: WireResponse<'a>,
}

/// `response` of the answer, field for field as the apiserver reads it.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct WireResponse<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<WireStatus<'a>>,
    /// Base64 of the JSON Patch.
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
}

/// `response.status` of a denial.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
struct WireStatus<'a> {
    code: u16,
    message: &'a str,
}

impl<'a> From<&'a AdmissionResponse> for AdmissionReviewResponse<'a> {
    fn from(response: &'a AdmissionResponse) -> Self {
        let status = (!response.allowed).then(|| WireStatus {
            code: response.result.code,
            message: &response.result.message,
        });
        let patch = response.patch.as_deref().map(base64_encode);
        AdmissionReviewResponse {
            api_version: API_VERSION,
            kind: KIND,
            response: WireResponse {
                uid: &response.uid,
                allowed: response.allowed,
                status,
                // `with_patch` is the only way to a patch, and kube knows only JSONPatch.
                patch_type: patch.is_some().then_some("JSONPatch"),
                patch,
                warnings: response.warnings.as_deref().unwrap_or_default(),
            },
        }
    }
}

/// Standard base64 with padding (RFC 4648 §4), as the apiserver expects for `patch`.
pub fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decodes standard base64 (tests and the load generator read patches with it).
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        // RFC 4648 §10 test vectors.
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64_encode(plain.as_bytes()), encoded);
            assert_eq!(base64_decode(encoded).unwrap(), plain.as_bytes());
        }
    }

    #[test]
    fn rejects_what_is_not_a_v1_review() {
        assert!(matches!(decode(b"not json"), Err(DecodeError::NotJson(_))));
        assert!(matches!(decode(b"[1,2]"), Err(DecodeError::NotJson(_))));
        assert_eq!(
            decode(br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"a"}}"#).err(),
            Some(DecodeError::WrongType {
                api_version: "admission.k8s.io/v1beta1".to_owned(),
                kind: "AdmissionReview".to_owned()
            })
        );
        assert_eq!(
            decode(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#).err(),
            Some(DecodeError::NoRequest)
        );
        assert_eq!(
            decode(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":""}}"#).err(),
            Some(DecodeError::NoRequest)
        );
    }

    /// A request as the apiserver sends it, for building answers.
    fn request() -> AdmissionRequest {
        decode(include_bytes!(
            "../../core/tests/data/admission/review-two-containers.json"
        ))
        .unwrap()
    }

    fn wire(response: &AdmissionResponse) -> String {
        serde_json::to_string(&AdmissionReviewResponse::from(response)).unwrap()
    }

    #[test]
    fn answers_keep_the_webhooks_json() {
        let r = request();
        assert_eq!(r.kind.kind, "Pod");
        assert_eq!(r.operation, Operation::Create);
        let head = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","allowed":"#;
        assert_eq!(wire(&allow(&r)), format!("{head}true}}}}"));
        assert_eq!(
            wire(&allow_with_warning(&r, "careful")),
            format!(r#"{head}true,"warnings":["careful"]}}}}"#)
        );
        assert_eq!(
            wire(&deny(&r, "spec: Required value")),
            format!(r#"{head}false,"status":{{"code":400,"message":"spec: Required value"}}}}}}"#)
        );
        let ops = serde_json::json!([{"op": "add", "path": "/metadata/annotations", "value": {}}]);
        let patch = base64_encode(br#"[{"op":"add","path":"/metadata/annotations","value":{}}]"#);
        assert_eq!(
            wire(&patched(&r, &ops).unwrap()),
            format!(r#"{head}true,"patch":"{patch}","patchType":"JSONPatch"}}}}"#)
        );
        assert!(patched(&r, &serde_json::json!([{"op": "sing"}])).is_err());
    }

    proptest! {
        #[test]
        fn base64_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            prop_assert_eq!(base64_decode(&base64_encode(&bytes)).unwrap(), bytes);
        }
    }
}
