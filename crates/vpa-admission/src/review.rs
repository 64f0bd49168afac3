//! Decoding `admission.k8s.io/v1` AdmissionReview requests and encoding their responses.
//!
//! Invariants: [`decode`] never panics on any input (a fuzz target and a property test feed it
//! arbitrary bytes); anything that is not a v1 AdmissionReview with a `request.uid` is a
//! [`DecodeError`] (answered with HTTP 400). The embedded object stays a JSON value here: what it
//! must be (a Pod, a VerticalPodAutoscaler) is decided by the webhook, which never rejects a pod
//! because its object does not decode.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The only AdmissionReview version served (`admissionReviewVersions: [v1]`).
pub const API_VERSION: &str = "admission.k8s.io/v1";
/// `kind` of the envelope.
pub const KIND: &str = "AdmissionReview";

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
    /// No `request`, or a request without `uid`.
    #[error("AdmissionReview has no request.uid")]
    NoRequest,
}

/// `request.kind` / `request.resource` (group, version, kind or resource).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct GroupVersionKind {
    /// API group (`""` for core).
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
}

/// The parts of `request` the webhook reads.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    /// Echoed in the response.
    pub uid: String,
    /// Kind of the object.
    #[serde(default)]
    pub kind: GroupVersionKind,
    /// Namespace of the request (pods created by controllers carry it only here).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Name (empty for `generateName` creates).
    #[serde(default)]
    pub name: Option<String>,
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT`.
    #[serde(default)]
    pub operation: String,
    /// The object being admitted.
    #[serde(default)]
    pub object: Value,
    /// True for dry runs (nothing here has side effects, so it changes nothing).
    #[serde(default)]
    pub dry_run: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    request: Option<AdmissionRequest>,
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
    match envelope.request {
        Some(r) if !r.uid.is_empty() => Ok(r),
        _ => Err(DecodeError::NoRequest),
    }
}

/// `response.status` of a denial.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Status {
    /// HTTP-like code (400 for an invalid object).
    pub code: u16,
    /// Shown to the user by kubectl.
    pub message: String,
}

/// `response` of an AdmissionReview.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    /// The request's uid.
    pub uid: String,
    /// Whether the object is admitted.
    pub allowed: bool,
    /// Why not (denials only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// Base64 of the JSON Patch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// `JSONPatch` when `patch` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
    /// Shown by kubectl as `Warning: …` (e.g. why a pod was admitted unchanged).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl AdmissionResponse {
    /// Allowed, unchanged.
    pub fn allow(uid: &str) -> Self {
        AdmissionResponse {
            uid: uid.to_owned(),
            allowed: true,
            ..AdmissionResponse::default()
        }
    }

    /// Allowed, unchanged, with a warning.
    pub fn allow_with_warning(uid: &str, warning: impl Into<String>) -> Self {
        AdmissionResponse {
            warnings: vec![warning.into()],
            ..AdmissionResponse::allow(uid)
        }
    }

    /// Allowed with a JSON Patch (serialized `ops`).
    pub fn patched(uid: &str, patch_json: &[u8]) -> Self {
        AdmissionResponse {
            patch: Some(base64_encode(patch_json)),
            patch_type: Some("JSONPatch"),
            ..AdmissionResponse::allow(uid)
        }
    }

    /// Denied with a message (HTTP-like code 400).
    pub fn deny(uid: &str, message: impl Into<String>) -> Self {
        AdmissionResponse {
            uid: uid.to_owned(),
            allowed: false,
            status: Some(Status {
                code: 400,
                message: message.into(),
            }),
            ..AdmissionResponse::default()
        }
    }
}

/// The AdmissionReview answered to the apiserver.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReviewResponse {
    /// Always [`API_VERSION`].
    pub api_version: &'static str,
    /// Always [`KIND`].
    pub kind: &'static str,
    /// The answer.
    pub response: AdmissionResponse,
}

impl From<AdmissionResponse> for AdmissionReviewResponse {
    fn from(response: AdmissionResponse) -> Self {
        AdmissionReviewResponse {
            api_version: API_VERSION,
            kind: KIND,
            response,
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
            decode(br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"a"}}"#),
            Err(DecodeError::WrongType {
                api_version: "admission.k8s.io/v1beta1".to_owned(),
                kind: "AdmissionReview".to_owned()
            })
        );
        assert_eq!(
            decode(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#),
            Err(DecodeError::NoRequest)
        );
        assert_eq!(
            decode(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":""}}"#),
            Err(DecodeError::NoRequest)
        );
    }

    proptest! {
        #[test]
        fn base64_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            prop_assert_eq!(base64_decode(&base64_encode(&bytes)).unwrap(), bytes);
        }
    }
}
