//! The webhook's HTTP surface: `POST /` with an `admission.k8s.io/v1` AdmissionReview.
//!
//! * Pod CREATE: the controlling VPA (from [`Caches`]) and the namespace's `LimitRange`s go into
//!   `plimsoll_core::vertical::admission::admission_patch`; its JSON Patch is the answer.
//! * VerticalPodAutoscaler CREATE/UPDATE: denied, with the field path, when the spec does not
//!   decode or `validate()` fails.
//! * Never the reason a pod cannot start: any failure while computing a pod's patch (object
//!   that does not decode, unparseable quantity, cold caches) is answered allowed, unchanged,
//!   with a warning, and counted under `result="error"` / `"cold_cache"`.
//! * A body that is not an AdmissionReview gets HTTP 400 with the reason; bodies over
//!   [`MAX_BODY_BYTES`] get 413 (axum's body limit).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use k8s_openapi::api::core::v1::Pod;
use plimsoll_core::api::vpa::VerticalPodAutoscalerSpec;
use plimsoll_core::vertical::admission::{AdmissionVpa, admission_patch, admission_pod};

use crate::matching::Caches;
use crate::metrics::{Metrics, Outcome};
use crate::review::{self, AdmissionRequest, AdmissionResponse, AdmissionReviewResponse};

/// Largest request body accepted (bytes); the apiserver's own limit for an object is 3 MiB.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// What the handler reads.
#[derive(Debug)]
pub struct Webhook {
    /// Reflector stores.
    pub caches: Caches,
    /// Set once every store has listed (before that, pods are admitted unchanged).
    pub synced: AtomicBool,
    /// Metric handles.
    pub metrics: Metrics,
}

impl Webhook {
    /// A webhook over `caches`, not yet synced.
    pub fn new(caches: Caches, metrics: Metrics) -> Webhook {
        Webhook {
            caches,
            synced: AtomicBool::new(false),
            metrics,
        }
    }

    /// Marks the caches as synced.
    pub fn set_synced(&self) {
        self.synced.store(true, Ordering::Release);
    }

    /// Answers one request body: `Err` when it is not an AdmissionReview.
    pub fn answer(&self, body: &[u8]) -> Result<AdmissionResponse, review::DecodeError> {
        let started = Instant::now();
        let request = review::decode(body)?;
        let (resource, outcome, response) = self.decide(&request);
        self.metrics
            .answered(resource, outcome, started.elapsed().as_secs_f64());
        Ok(response)
    }

    fn decide(&self, request: &AdmissionRequest) -> (&'static str, Outcome, AdmissionResponse) {
        let kind = &request.kind;
        match (kind.group.as_str(), kind.kind.as_str()) {
            ("", "Pod") if request.operation == "CREATE" => {
                let (outcome, response) = self.pod(request);
                ("pod", outcome, response)
            }
            ("autoscaling.k8s.io", "VerticalPodAutoscaler")
                if matches!(request.operation.as_str(), "CREATE" | "UPDATE") =>
            {
                let (outcome, response) = validate_vpa(request);
                ("vpa", outcome, response)
            }
            _ => ("other", Outcome::Ignored, AdmissionResponse::allow(&request.uid)),
        }
    }

    fn pod(&self, request: &AdmissionRequest) -> (Outcome, AdmissionResponse) {
        let uid = &request.uid;
        let pod: Pod = match Pod::deserialize_from(&request.object) {
            Ok(p) => p,
            Err(e) => return self.unchanged(request, Outcome::Error, format!("pod does not decode: {e}")),
        };
        let namespace = request
            .namespace
            .clone()
            .or_else(|| pod.metadata.namespace.clone())
            .unwrap_or_default();
        if !self.synced.load(Ordering::Acquire) {
            return self.unchanged(
                request,
                Outcome::ColdCache,
                "VPA caches are not synced yet; pod admitted without recommendations".to_owned(),
            );
        }
        let Some(controller) = self.caches.top_controller(&pod, &namespace) else {
            return (Outcome::NoVpa, AdmissionResponse::allow(uid));
        };
        let Some(vpa) = self.caches.controlling_vpa(&namespace, &controller) else {
            return (Outcome::NoVpa, AdmissionResponse::allow(uid));
        };
        let vpa_name = vpa.metadata.name.clone().unwrap_or_default();
        let computed = (|| {
            let vpa = AdmissionVpa::from_api(&vpa)?;
            let pod = admission_pod(&pod)?;
            let (container_range, pod_range) = self.caches.limit_ranges(&namespace)?;
            Ok::<_, plimsoll_core::quantity::QuantityError>(admission_patch(
                &pod,
                &vpa,
                container_range.as_ref(),
                pod_range.as_ref(),
            ))
        })();
        let patch = match computed {
            Ok(p) => p,
            Err(e) => {
                return self.unchanged(
                    request,
                    Outcome::Error,
                    format!("VPA {namespace}/{vpa_name}: {e}"),
                );
            }
        };
        let ops = match serde_json::to_vec(&patch.ops) {
            Ok(ops) => ops,
            Err(e) => {
                return self.unchanged(request, Outcome::Error, format!("cannot encode patch: {e}"));
            }
        };
        let outcome = if patch.updates.is_empty() {
            Outcome::Annotated
        } else {
            Outcome::Patched
        };
        tracing::info!(
            namespace = %namespace,
            pod = %pod_name(request, &pod),
            vpa = %vpa_name,
            containers = patch.updates.len(),
            updates = patch.annotations.get(plimsoll_core::vertical::admission::UPDATES_ANNOTATION).map(String::as_str),
            "pod admitted with VPA patch"
        );
        (outcome, AdmissionResponse::patched(uid, &ops))
    }

    fn unchanged(
        &self,
        request: &AdmissionRequest,
        outcome: Outcome,
        warning: String,
    ) -> (Outcome, AdmissionResponse) {
        tracing::warn!(
            namespace = request.namespace.as_deref().unwrap_or_default(),
            name = request.name.as_deref().unwrap_or_default(),
            result = outcome.label(),
            %warning,
            "pod admitted unchanged"
        );
        let message = format!("plimsoll vpa-admission: {warning}");
        (outcome, AdmissionResponse::allow_with_warning(&request.uid, message))
    }
}

fn pod_name(request: &AdmissionRequest, pod: &Pod) -> String {
    request
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| pod.metadata.name.clone())
        .or_else(|| pod.metadata.generate_name.clone().map(|g| format!("{g}*")))
        .unwrap_or_default()
}

/// Deserializing straight from the borrowed JSON value (no clone of the object).
trait FromValueRef: Sized {
    fn deserialize_from(value: &serde_json::Value) -> Result<Self, serde_json::Error>;
}

impl<T: serde::de::DeserializeOwned> FromValueRef for T {
    fn deserialize_from(value: &serde_json::Value) -> Result<Self, serde_json::Error> {
        serde::Deserialize::deserialize(value)
    }
}

fn validate_vpa(request: &AdmissionRequest) -> (Outcome, AdmissionResponse) {
    let uid = &request.uid;
    let Some(spec) = request.object.get("spec") else {
        return (Outcome::Denied, AdmissionResponse::deny(uid, "spec: Required value"));
    };
    let spec = match VerticalPodAutoscalerSpec::deserialize_from(spec) {
        Ok(s) => s,
        Err(e) => return (Outcome::Denied, AdmissionResponse::deny(uid, format!("spec: {e}"))),
    };
    match spec.validate() {
        Ok(()) => (Outcome::Valid, AdmissionResponse::allow(uid)),
        Err(errs) => (Outcome::Denied, AdmissionResponse::deny(uid, errs.to_string())),
    }
}

/// The webhook router: `POST /` (any other path answers 404).
pub fn router(webhook: Arc<Webhook>) -> Router {
    Router::new()
        .route("/", post(handle))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(webhook)
}

async fn handle(State(webhook): State<Arc<Webhook>>, body: Bytes) -> Response {
    match webhook.answer(&body) {
        Ok(response) => json(StatusCode::OK, &AdmissionReviewResponse::from(response)),
        Err(e) => {
            webhook.metrics.bad_request();
            tracing::warn!(error = %e, "request is not an AdmissionReview");
            (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response()
        }
    }
}

fn json(status: StatusCode, value: &impl serde::Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => (status, [(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode answer: {e}\n"))
            .into_response(),
    }
}
