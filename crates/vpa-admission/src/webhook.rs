//! The webhook's HTTP surface: `POST /` with an `admission.k8s.io/v1` AdmissionReview.
//!
//! * Pod CREATE: the controlling VPA (from [`Caches`]) and the namespace's `LimitRange`s go into
//!   `plimsoll_core::vertical::admission::admission_patch`; its JSON Patch is the answer.
//! * VerticalPodAutoscaler CREATE/UPDATE: denied, with the field path, when the spec does not
//!   decode or `validate()` fails.
//! * Objects in a namespace outside the [`NamespaceScope`] (by default kube-system and the
//!   webhook's own) are admitted unchanged (`result="ignored"`), as the registered
//!   namespaceSelector would have kept them away: a configuration written by hand or by the
//!   chart cannot make the webhook touch pods the updater leaves alone.
//! * Never the reason a pod cannot start: any failure while computing a pod's patch (object
//!   that does not decode, unparseable quantity, cold caches) is answered allowed, unchanged,
//!   with a warning, and counted under `result="error"` / `"cold_cache"`.
//! * A body that is not an AdmissionReview gets HTTP 400 with the reason. Body size and time
//!   are the listener's to limit ([`plimsoll_runtime::listener`], `--max-request-body-bytes`,
//!   default [`MAX_BODY_BYTES`]: 413), so the router itself sets no limit of its own, which
//!   would silently cap that flag.

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
use plimsoll_core::vertical::scope::NamespaceScope;
use plimsoll_runtime::repeats::{Repeats, Verdict};
use serde::Deserialize as _;

use crate::matching::Caches;
use crate::metrics::{Metrics, Outcome};
use crate::review::{
    self, AdmissionRequest, AdmissionResponse, AdmissionReviewResponse, Operation,
};

/// Default of `--max-request-body-bytes` (3 MiB): the API server refuses request bodies over
/// 3 MiB and etcd stores objects up to 1.5 MiB, so every pod review fits; only a VPA UPDATE whose
/// object and old object are both padded near etcd's limit does not, and it is then answered
/// 413 and admitted by `failurePolicy: Ignore` without this webhook's checks (the CRD's schema
/// still applies, and every VPA is read as hostile anyway).
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
    /// The namespaces whose pods and VPAs it acts on.
    pub scope: NamespaceScope,
    /// `--max-allowed-cpu-boost`.
    pub max_cpu_boost: Option<plimsoll_core::quantity::Quantity>,
    /// Pods admitted unchanged already logged, by namespace: each namespace's reason is a
    /// warning once per repeat period ([`plimsoll_runtime::repeats`]), however many pods.
    pub logged: Repeats,
}

impl Webhook {
    /// A webhook over `caches` acting in `scope`, not yet synced.
    pub fn new(caches: Caches, metrics: Metrics, scope: NamespaceScope) -> Webhook {
        Webhook {
            caches,
            synced: AtomicBool::new(false),
            metrics,
            scope,
            max_cpu_boost: None,
            logged: Repeats::default(),
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
        let in_scope = plimsoll_core::vertical::controlling::in_scope(
            &self.scope,
            request.namespace.as_deref().unwrap_or_default(),
        );
        match (kind.group.as_str(), kind.kind.as_str()) {
            ("", "Pod") if !in_scope => ("pod", Outcome::Ignored, review::allow(request)),
            ("autoscaling.k8s.io", "VerticalPodAutoscaler") if !in_scope => {
                ("vpa", Outcome::Ignored, review::allow(request))
            }
            ("", "Pod") if request.operation == Operation::Create => {
                let (outcome, response) = self.pod(request);
                ("pod", outcome, response)
            }
            ("autoscaling.k8s.io", "VerticalPodAutoscaler")
                if matches!(request.operation, Operation::Create | Operation::Update) =>
            {
                let (outcome, response) = validate_vpa(request);
                ("vpa", outcome, response)
            }
            _ => ("other", Outcome::Ignored, review::allow(request)),
        }
    }

    fn pod(&self, request: &AdmissionRequest) -> (Outcome, AdmissionResponse) {
        let pod: Pod = match pod_of(request) {
            Ok(p) => p,
            Err(e) => {
                return self.unchanged(
                    request,
                    Outcome::Error,
                    &format!("pod does not decode: {e}"),
                );
            }
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
                "VPA caches are not synced yet; pod admitted without recommendations",
            );
        }
        let Some(vpa) = self.caches.controlling_vpa(&pod, &namespace) else {
            return (Outcome::NoVpa, review::allow(request));
        };
        let vpa_name = vpa.metadata.name.clone().unwrap_or_default();
        let computed = (|| {
            let mut vpa = AdmissionVpa::from_api(&vpa)?;
            vpa.boosts.max_cpu = self.max_cpu_boost;
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
                    &format!("VPA {namespace}/{vpa_name}: {e}"),
                );
            }
        };
        let response = match review::patched(request, &patch.ops) {
            Ok(response) => response,
            Err(e) => {
                return self.unchanged(
                    request,
                    Outcome::Error,
                    &format!("cannot encode patch: {e}"),
                );
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
        (outcome, response)
    }

    /// Admits the pod unchanged with `warning`, and logs it. Each pod created in a namespace
    /// whose VPA cannot be applied gets the same warning, and how many pods that is is the
    /// namespace user's to choose (a Deployment scaled up, a Job's pods failing): so it is a
    /// warning in the log the first time per namespace and message, then at most every
    /// [`plimsoll_runtime::repeats::RELOG_AFTER`] with the repeats not logged, and debug in
    /// between. The pod's creator still gets the warning each time, and the
    /// `result="error"` / `"cold_cache"` counters count each one.
    fn unchanged(
        &self,
        request: &AdmissionRequest,
        outcome: Outcome,
        warning: &str,
    ) -> (Outcome, AdmissionResponse) {
        let namespace = request.namespace.as_deref().unwrap_or_default();
        match self
            .logged
            .verdict_forgetting(namespace, warning, Instant::now())
        {
            Verdict::Warn { quiet } => tracing::warn!(
                namespace,
                name = %request.name,
                result = outcome.label(),
                %warning,
                repeats_not_logged = quiet,
                "pod admitted unchanged"
            ),
            Verdict::Repeat => tracing::debug!(
                namespace,
                name = %request.name,
                result = outcome.label(),
                %warning,
                "pod admitted unchanged"
            ),
        }
        let message = format!("plimsoll vpa-admission: {warning}");
        (outcome, review::allow_with_warning(request, message))
    }
}

fn pod_name(request: &AdmissionRequest, pod: &Pod) -> String {
    Some(request.name.clone())
        .filter(|n| !n.is_empty())
        .or_else(|| pod.metadata.name.clone())
        .or_else(|| pod.metadata.generate_name.clone().map(|g| format!("{g}*")))
        .unwrap_or_default()
}

/// The request's object as a Pod (a CREATE without an object decodes as `null` did).
fn pod_of(request: &AdmissionRequest) -> Result<Pod, serde_json::Error> {
    match &request.object {
        Some(object) => serde_json::to_value(object).and_then(serde_json::from_value),
        None => serde_json::from_value(serde_json::Value::Null),
    }
}

fn validate_vpa(request: &AdmissionRequest) -> (Outcome, AdmissionResponse) {
    let Some(spec) = request.object.as_ref().and_then(|o| o.data.get("spec")) else {
        return (
            Outcome::Denied,
            review::deny(request, "spec: Required value"),
        );
    };
    let spec = match VerticalPodAutoscalerSpec::deserialize(spec) {
        Ok(s) => s,
        Err(e) => {
            return (Outcome::Denied, review::deny(request, format!("spec: {e}")));
        }
    };
    match spec.validate() {
        Ok(()) => (Outcome::Valid, review::allow(request)),
        Err(errs) => (Outcome::Denied, review::deny(request, errs.to_string())),
    }
}

/// A synced webhook whose caches hold the fixture VPA `shop/web` and its ReplicaSet
/// (`tests/data/`), for the fuzz target and property tests.
#[cfg(any(test, feature = "fixtures"))]
#[allow(clippy::unwrap_used)]
pub fn fixture_webhook() -> Webhook {
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;
    let mut vpas = Writer::default();
    vpas.apply_watcher_event(&Event::Apply(
        serde_json::from_str(include_str!("../tests/data/vpa-web.json")).unwrap(),
    ));
    let mut replica_sets = Writer::default();
    replica_sets.apply_watcher_event(&Event::Apply(
        serde_json::from_str(include_str!("../tests/data/replicaset-web.json")).unwrap(),
    ));
    let (jobs, limit_ranges) = (Writer::default(), Writer::default());
    let caches = Caches {
        vpas: vpas.as_reader(),
        replica_sets: replica_sets.as_reader(),
        jobs: jobs.as_reader(),
        limit_ranges: limit_ranges.as_reader(),
    };
    // Readers keep the data; the writers are only needed for wait_until_ready.
    std::mem::forget((vpas, replica_sets, jobs, limit_ranges));
    let w = Webhook::new(caches, Metrics::default(), NamespaceScope::default());
    w.set_synced();
    w
}

/// The webhook router: `POST /` (any other path answers 404). Serve it on the listener, which
/// caps request bodies (axum's own 2 MB default is turned off so that the listener's cap is the
/// only one).
pub fn router(webhook: Arc<Webhook>) -> Router {
    Router::new()
        .route("/", post(handle))
        .layer(DefaultBodyLimit::disable())
        .with_state(webhook)
}

async fn handle(State(webhook): State<Arc<Webhook>>, body: Bytes) -> Response {
    match webhook.answer(&body) {
        Ok(response) => json(StatusCode::OK, &AdmissionReviewResponse::from(&response)),
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
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot encode answer: {e}\n"),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matching::tests::TestCaches;
    use crate::review::base64_decode;
    use axum::body::Body;
    use http_body_util::BodyExt;
    use serde_json::{Value, json};
    use tower::ServiceExt;

    const REVIEW: &str = include_str!("../../core/tests/data/admission/review-two-containers.json");
    const EXPECTED_PATCH: &str =
        include_str!("../../core/tests/data/admission/expected-patch.json");

    fn fixture<T: serde::de::DeserializeOwned>(text: &str) -> T {
        serde_json::from_str(text).unwrap()
    }

    /// Caches holding the fixture VPA and ReplicaSet.
    fn shop() -> TestCaches {
        let mut t = TestCaches::default();
        t.vpa(fixture(include_str!("../tests/data/vpa-web.json")))
            .replica_set(fixture(include_str!("../tests/data/replicaset-web.json")));
        t
    }

    fn webhook(t: &TestCaches, synced: bool) -> Arc<Webhook> {
        let w = Webhook::new(
            t.caches(),
            Metrics::default(),
            NamespaceScope::from_flags(None, None, Some("plimsoll-system")),
        );
        if synced {
            w.set_synced();
        }
        Arc::new(w)
    }

    /// A synced webhook whose VPA `shop/web` recommends a CPU that does not parse.
    fn unreadable_recommendation() -> Arc<Webhook> {
        let mut vpa: Value = fixture(include_str!("../tests/data/vpa-web.json"));
        vpa["status"]["recommendation"]["containerRecommendations"][0]["target"]["cpu"] =
            json!("lots");
        let mut t = shop();
        t.vpa(serde_json::from_value(vpa).unwrap());
        webhook(&t, true)
    }

    async fn post(w: &Arc<Webhook>, body: impl Into<Body>) -> (StatusCode, Vec<u8>) {
        let response = router(w.clone())
            .oneshot(
                http::Request::post("/")
                    .header("content-type", "application/json")
                    .body(body.into())
                    .unwrap(),
            )
            .await
            .unwrap();
        let status = response.status();
        (
            status,
            response
                .into_body()
                .collect()
                .await
                .unwrap()
                .to_bytes()
                .to_vec(),
        )
    }

    async fn answer(w: &Arc<Webhook>, review: &Value) -> Value {
        let (status, body) = post(w, serde_json::to_vec(review).unwrap()).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(v["kind"], "AdmissionReview");
        assert_eq!(v["response"]["uid"], review["request"]["uid"]);
        v["response"].clone()
    }

    fn patch_of(response: &Value) -> Value {
        assert_eq!(response["patchType"], "JSONPatch");
        let bytes = base64_decode(response["patch"].as_str().unwrap()).unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn fixture_pod_gets_exactly_the_expected_patch() {
        let w = webhook(&shop(), true);
        let response = answer(&w, &fixture(REVIEW)).await;
        assert_eq!(response["allowed"], true);
        assert!(response.get("warnings").is_none());
        assert_eq!(patch_of(&response), fixture::<Value>(EXPECTED_PATCH));
        assert_eq!(w.metrics.count("pod", Outcome::Patched), 1);
    }

    #[tokio::test]
    async fn pods_and_vpas_outside_the_scope_are_admitted_unchanged() {
        let w = webhook(&shop(), true);
        for ns in ["kube-system", "plimsoll-system"] {
            let mut review: Value = fixture(REVIEW);
            review["request"]["namespace"] = json!(ns);
            let response = answer(&w, &review).await;
            assert_eq!(response["allowed"], true, "{ns}");
            assert!(response.get("patch").is_none(), "{ns}: {response}");
        }
        assert_eq!(w.metrics.count("pod", Outcome::Ignored), 2);
        // An invalid VPA there is not judged either.
        let mut review: Value = fixture(REVIEW);
        review["request"]["kind"] = json!({"group": "autoscaling.k8s.io", "version": "v1", "kind": "VerticalPodAutoscaler"});
        review["request"]["namespace"] = json!("kube-system");
        review["request"]["object"] = json!({"spec": "not a VPA"});
        assert_eq!(answer(&w, &review).await["allowed"], true);
        assert_eq!(w.metrics.count("vpa", Outcome::Ignored), 1);
        // The same pod in its own namespace is patched: the check above can fail.
        let response = answer(&w, &fixture(REVIEW)).await;
        assert_eq!(patch_of(&response), fixture::<Value>(EXPECTED_PATCH));
    }

    #[tokio::test]
    async fn replica_set_not_yet_cached_still_finds_the_vpa() {
        let mut t = TestCaches::default();
        t.vpa(fixture(include_str!("../tests/data/vpa-web.json")));
        let response = answer(&webhook(&t, true), &fixture(REVIEW)).await;
        assert_eq!(patch_of(&response), fixture::<Value>(EXPECTED_PATCH));
    }

    #[tokio::test]
    async fn cold_caches_admit_unchanged_with_a_warning() {
        let w = webhook(&shop(), false);
        let response = answer(&w, &fixture(REVIEW)).await;
        assert_eq!(response["allowed"], true);
        assert!(response.get("patch").is_none());
        assert!(
            response["warnings"][0]
                .as_str()
                .unwrap()
                .contains("not synced")
        );
        assert_eq!(w.metrics.count("pod", Outcome::ColdCache), 1);
    }

    /// A namespace's pods that cannot be patched are one warning in the log per namespace and
    /// reason, not one per pod; each pod's creator still gets the warning.
    #[test]
    fn pods_admitted_unchanged_are_one_warning_per_namespace_and_reason() {
        let w = unreadable_recommendation();
        let review = fixture::<Value>(REVIEW);
        let mut undecodable = review.clone();
        undecodable["request"]["object"]["spec"]["containers"] = json!("not a list");
        let in_namespace = |review: &Value, ns: &str| {
            let mut review = review.clone();
            review["request"]["namespace"] = json!(ns);
            serde_json::to_vec(&review).unwrap()
        };
        let logged = plimsoll_runtime::log_sink::warnings(|| {
            for _ in 0..50 {
                let response = w.answer(&in_namespace(&review, "shop")).unwrap();
                assert!(response.warnings.is_some() && response.patch.is_none());
            }
            // Another reason in the same namespace, and the same one in another.
            w.answer(&in_namespace(&undecodable, "shop")).unwrap();
            w.answer(&in_namespace(&undecodable, "shop")).unwrap();
            w.answer(&in_namespace(&undecodable, "other")).unwrap();
        });
        assert_eq!(w.metrics.count("pod", Outcome::Error), 53);
        assert_eq!(logged.len(), 3, "{logged:#?}");
        assert!(
            logged[0].contains("pod admitted unchanged") && logged[0].contains("shop/web"),
            "{}",
            logged[0]
        );
        assert!(logged[1].contains("does not decode"), "{}", logged[1]);
        assert!(logged[2].contains("namespace=\"other\""), "{}", logged[2]);
    }

    #[tokio::test]
    async fn pod_without_vpa_is_admitted_unchanged() {
        let w = webhook(&TestCaches::default(), true);
        let response = answer(&w, &fixture(REVIEW)).await;
        assert_eq!(
            response,
            json!({"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": true})
        );
        assert_eq!(w.metrics.count("pod", Outcome::NoVpa), 1);
    }

    #[tokio::test]
    async fn unparseable_recommendation_admits_unchanged_with_warning_and_metric() {
        let w = unreadable_recommendation();
        let response = answer(&w, &fixture(REVIEW)).await;
        assert_eq!(response["allowed"], true);
        assert!(response.get("patch").is_none());
        assert!(
            response["warnings"][0]
                .as_str()
                .unwrap()
                .contains("shop/web")
        );
        assert_eq!(w.metrics.count("pod", Outcome::Error), 1);
    }

    #[tokio::test]
    async fn pod_that_does_not_decode_is_admitted_with_warning() {
        let mut review: Value = fixture(REVIEW);
        review["request"]["object"]["spec"]["containers"] = json!("not a list");
        let w = webhook(&shop(), true);
        let response = answer(&w, &review).await;
        assert_eq!(response["allowed"], true);
        assert!(response.get("patch").is_none());
        assert!(
            response["warnings"][0]
                .as_str()
                .unwrap()
                .contains("does not decode")
        );
    }

    #[tokio::test]
    async fn update_mode_off_only_annotates() {
        let mut vpa: Value = fixture(include_str!("../tests/data/vpa-web.json"));
        vpa["spec"]["updatePolicy"]["updateMode"] = json!("Off");
        let mut t = shop();
        t.vpa(serde_json::from_value(vpa).unwrap());
        let w = webhook(&t, true);
        let patch = patch_of(&answer(&w, &fixture(REVIEW)).await);
        assert_eq!(
            patch,
            json!([
                {"op": "add", "path": "/metadata/annotations", "value": {}},
                {"op": "add", "path": "/metadata/annotations/vpaObservedContainers", "value": "app, log-shipper"}
            ])
        );
        assert_eq!(w.metrics.count("pod", Outcome::Annotated), 1);
    }

    #[tokio::test]
    async fn limit_range_max_caps_the_limit_and_scales_the_request() {
        // upstream: pkg/admission-controller/resource/pod/recommendation/recommendation_provider_test.go
        // "limit over LimitRange max": the request is lowered so the proportional limit fits.
        let mut t = shop();
        t.limit_range(fixture(include_str!(
            "../tests/data/limitrange-max-cpu.json"
        )));
        let patch = patch_of(&answer(&webhook(&t, true), &fixture(REVIEW)).await);
        let value = |path: &str| {
            patch
                .as_array()
                .unwrap()
                .iter()
                .find(|op| op["path"] == path)
                .map(|op| op["value"].clone())
        };
        // app: 100m/200m is a 2× ratio; target 250m would need a 500m limit > max 300m.
        assert_eq!(
            value("/spec/containers/0/resources/requests/cpu"),
            Some(json!("150m"))
        );
        assert_eq!(
            value("/spec/containers/0/resources/limits/cpu"),
            Some(json!("300m"))
        );
        // log-shipper has no limit: its request stays the target.
        assert_eq!(
            value("/spec/containers/1/resources/requests/cpu"),
            Some(json!("25m"))
        );
    }

    // AEP-7862 under a `Pod` LimitRange: the fixture pod gets app 250m (limit 500m) and
    // log-shipper 25m, within a 600m pod max; a 2× startup boost would make the pod's CPU limit
    // 1 core, which the API server would refuse, so the webhook leaves the boost out (a note in
    // vpaUpdates, no boost annotation) and still applies the recommendation. With room (2
    // cores) the boost is applied.
    #[tokio::test]
    async fn a_startup_boost_past_a_pod_limit_range_max_is_left_out() {
        for (max, boosted) in [("600m", false), ("2", true)] {
            let mut vpa: Value = fixture(include_str!("../tests/data/vpa-web.json"));
            vpa["spec"]["startupBoost"] = json!({"cpu": {"type": "Factor", "factor": 2}});
            let mut t = TestCaches::default();
            t.vpa(serde_json::from_value(vpa).unwrap())
                .replica_set(fixture(include_str!("../tests/data/replicaset-web.json")))
                .limit_range(fixture(
                    &json!({
                        "apiVersion": "v1", "kind": "LimitRange",
                        "metadata": {"name": "pod-caps", "namespace": "shop"},
                        "spec": {"limits": [{"type": "Pod", "max": {"cpu": max}}]}
                    })
                    .to_string(),
                ));
            let patch = patch_of(&answer(&webhook(&t, true), &fixture(REVIEW)).await);
            let value = |path: &str| {
                patch
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|op| op["path"] == path)
                    .map(|op| op["value"].clone())
            };
            let (app, limit) = if boosted {
                ("500m", "1")
            } else {
                ("250m", "500m")
            };
            assert_eq!(
                value("/spec/containers/0/resources/requests/cpu"),
                Some(json!(app)),
                "pod max {max}"
            );
            assert_eq!(
                value("/spec/containers/0/resources/limits/cpu"),
                Some(json!(limit)),
                "pod max {max}"
            );
            assert_eq!(
                value("/metadata/annotations/vpaCpuStartupBoost~1app").is_some(),
                boosted,
                "pod max {max}"
            );
            let updates = value("/metadata/annotations/vpaUpdates").unwrap();
            assert_eq!(
                updates.as_str().unwrap().contains(
                    "cpu startup boost left out: it would break the LimitRange max of the pod"
                ),
                !boosted,
                "{updates}"
            );
        }
    }

    #[tokio::test]
    async fn invalid_vpa_is_denied_naming_the_field() {
        let w = webhook(&TestCaches::default(), false);
        let response = answer(
            &w,
            &fixture(include_str!("../tests/data/review-vpa-invalid.json")),
        )
        .await;
        assert_eq!(response["allowed"], false);
        assert_eq!(response["status"]["code"], 400);
        let message = response["status"]["message"].as_str().unwrap();
        assert!(
            message.contains("spec.updatePolicy.updateMode"),
            "{message}"
        );
        assert!(message.contains("Sometimes"), "{message}");
        assert_eq!(w.metrics.count("vpa", Outcome::Denied), 1);

        let ok = answer(
            &w,
            &fixture(include_str!("../tests/data/review-vpa-valid.json")),
        )
        .await;
        assert_eq!(ok["allowed"], true);
        assert_eq!(w.metrics.count("vpa", Outcome::Valid), 1);
    }

    #[tokio::test]
    async fn vpa_spec_of_the_wrong_shape_is_denied() {
        let mut review: Value = fixture(include_str!("../tests/data/review-vpa-valid.json"));
        review["request"]["object"]["spec"]["targetRef"] = json!("web");
        let response = answer(&webhook(&TestCaches::default(), true), &review).await;
        assert_eq!(response["allowed"], false);
        assert!(
            response["status"]["message"]
                .as_str()
                .unwrap()
                .starts_with("spec: ")
        );
    }

    #[tokio::test]
    async fn other_kinds_and_operations_pass() {
        let mut review: Value = fixture(REVIEW);
        review["request"]["operation"] = json!("UPDATE");
        let w = webhook(&shop(), true);
        let response = answer(&w, &review).await;
        assert_eq!(response["allowed"], true);
        assert!(response.get("patch").is_none());
        assert_eq!(w.metrics.count("other", Outcome::Ignored), 1);
    }

    #[tokio::test]
    async fn not_a_review_is_400_with_a_message() {
        let w = webhook(&shop(), true);
        let (status, body) = post(&w, "hello").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(String::from_utf8_lossy(&body).contains("not an AdmissionReview"));
        let (status, body) = post(&w, r#"{"apiVersion":"v1","kind":"Pod"}"#).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(String::from_utf8_lossy(&body).contains("admission.k8s.io/v1"));
    }
}
