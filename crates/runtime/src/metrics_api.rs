//! Typed clients for the aggregated metrics APIs the horizontal autoscaler reads.
//!
//! | API | what | path |
//! |---|---|---|
//! | `metrics.k8s.io/v1beta1` | pod and container CPU/memory usage | `/namespaces/{ns}/pods?labelSelector=` |
//! | `custom.metrics.k8s.io/v1beta2` | a metric of every selected pod | `/namespaces/{ns}/pods/*/{metric}?labelSelector=&metricLabelSelector=` |
//! | `custom.metrics.k8s.io/v1beta2` | a metric of one object | `/namespaces/{ns}/{resource}/{name}/{metric}?metricLabelSelector=` |
//! | `external.metrics.k8s.io/v1beta1` | a metric from outside the cluster | `/namespaces/{ns}/{metric}?labelSelector=` |
//!
//! Values are decoded into exact [`Quantity`] milli-units. Every error says which API, which
//! metric and which namespace failed, and why (`custom.metrics.k8s.io pods metric
//! "requests_per_second" in default: 404 NotFound: …`).
//!
//! Services depend on the object-safe [`MetricsSource`] trait, so hpa-plus can be tested with a
//! fake; [`ApiMetrics`] is the implementation on the API server.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::Client;
use plimsoll_core::quantity::Quantity;
use serde::{Deserialize, Deserializer};

use crate::args::parse_duration;
use crate::error::{Error, Result};
use crate::kinds::{KindResolver, TargetRef};
use crate::selector::Selector;

/// API group of resource metrics (metrics-server).
pub const RESOURCE_METRICS_API: &str = "metrics.k8s.io";
/// API group of custom metrics (e.g. prometheus-adapter).
pub const CUSTOM_METRICS_API: &str = "custom.metrics.k8s.io";
/// API group of external metrics (e.g. KEDA, prometheus-adapter).
pub const EXTERNAL_METRICS_API: &str = "external.metrics.k8s.io";

/// Resource usage of one pod, as reported by `metrics.k8s.io`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodMetrics {
    /// Pod name.
    pub name: String,
    /// Pod namespace.
    pub namespace: String,
    /// The pod's labels as the metrics server reports them.
    pub labels: BTreeMap<String, String>,
    /// End of the sampling window.
    pub timestamp: Timestamp,
    /// Length of the sampling window (`[timestamp - window, timestamp]`).
    pub window: Duration,
    /// Per-container usage.
    pub containers: Vec<ContainerMetrics>,
}

/// Resource usage of one container.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct ContainerMetrics {
    /// Container name.
    pub name: String,
    /// Usage by resource name (`cpu` in cores, `memory` in bytes).
    pub usage: BTreeMap<String, Quantity>,
}

impl ContainerMetrics {
    /// CPU usage (cores; `.milli()` is millicores).
    pub fn cpu(&self) -> Option<Quantity> {
        self.usage.get("cpu").copied()
    }

    /// Memory usage (bytes; `.milli()` is millibytes).
    pub fn memory(&self) -> Option<Quantity> {
        self.usage.get("memory").copied()
    }
}

impl PodMetrics {
    /// Total usage of `resource` (`cpu`, `memory`) over all containers; `None` when a container
    /// does not report it (upstream then treats the pod as missing metrics).
    pub fn total(&self, resource: &str) -> Option<Quantity> {
        self.containers.iter().try_fold(Quantity::ZERO, |sum, c| {
            sum.checked_add(*c.usage.get(resource)?)
        })
    }
}

/// Which metric a custom-metrics value belongs to.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct MetricIdentifier {
    /// Metric name.
    pub name: String,
    /// The metric label selector the value was computed for, if any.
    #[serde(default)]
    pub selector: Option<LabelSelector>,
}

/// One value from `custom.metrics.k8s.io`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricValue {
    /// The object the value describes (a pod, or the object of an Object metric).
    pub described_object: ObjectReference,
    /// The metric.
    pub metric: MetricIdentifier,
    /// When the value was produced.
    pub timestamp: Timestamp,
    /// The window a rate was computed over, in seconds (absent for instantaneous values).
    /// v1beta1 servers call it `window`.
    #[serde(default, alias = "window")]
    pub window_seconds: Option<i64>,
    /// The value.
    pub value: Quantity,
}

/// One value from `external.metrics.k8s.io`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalMetricValue {
    /// Metric name.
    pub metric_name: String,
    /// Labels identifying this series of the metric.
    #[serde(default)]
    pub metric_labels: BTreeMap<String, String>,
    /// When the value was produced.
    pub timestamp: Timestamp,
    /// The window a rate was computed over, in seconds.
    #[serde(default, rename = "window")]
    pub window_seconds: Option<i64>,
    /// The value.
    pub value: Quantity,
}

/// Where the horizontal autoscaler gets its metrics. Object-safe: hold it as
/// `Arc<dyn MetricsSource>` and substitute a fake in tests.
pub trait MetricsSource: Send + Sync {
    /// Resource usage of the pods in `namespace` matching `selector`.
    fn pod_metrics<'a>(
        &'a self,
        namespace: &'a str,
        selector: &'a Selector,
    ) -> BoxFuture<'a, Result<Vec<PodMetrics>>>;

    /// Custom metric `metric` of every pod in `namespace` matching `selector`, optionally
    /// restricted by the metric's own label selector.
    fn pods_metric<'a>(
        &'a self,
        namespace: &'a str,
        metric: &'a str,
        selector: &'a Selector,
        metric_selector: Option<&'a Selector>,
    ) -> BoxFuture<'a, Result<Vec<MetricValue>>>;

    /// Custom metric `metric` of one object (e.g. an Ingress), exactly one value. Build the
    /// reference with `TargetRef::from(&described_object)`.
    fn object_metric<'a>(
        &'a self,
        namespace: &'a str,
        object: TargetRef<'a>,
        metric: &'a str,
        metric_selector: Option<&'a Selector>,
    ) -> BoxFuture<'a, Result<MetricValue>>;

    /// External metric `metric` in `namespace`, every series matching `metric_selector`.
    fn external_metric<'a>(
        &'a self,
        namespace: &'a str,
        metric: &'a str,
        metric_selector: Option<&'a Selector>,
    ) -> BoxFuture<'a, Result<Vec<ExternalMetricValue>>>;
}

/// [`MetricsSource`] on the Kubernetes API (cheap to clone).
#[derive(Clone)]
pub struct ApiMetrics {
    client: Client,
    kinds: KindResolver,
}

impl ApiMetrics {
    /// A metrics client; `kinds` resolves Object-metric targets to resources (share the one
    /// the scale client uses).
    pub fn new(client: Client, kinds: KindResolver) -> Self {
        Self { client, kinds }
    }

    async fn get<T: serde::de::DeserializeOwned>(
        &self,
        path: String,
        failure: impl Fn(String) -> Error,
    ) -> Result<T> {
        let request = http::Request::get(&path)
            .body(Vec::new())
            .map_err(|e| failure(format!("cannot build request for {path}: {e}")))?;
        self.client
            .request::<T>(request)
            .await
            .map_err(|e| failure(reason(&e)))
    }
}

/// The server's answer, as short as it can be while staying useful.
fn reason(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => {
            let mut out = status.code.to_string();
            // kube's placeholder when the body was not a Status (a proxy's plain-text error):
            // the HTTP reason phrase says more.
            let reason = if status.reason == "Failed to parse error data" {
                http::StatusCode::from_u16(status.code)
                    .ok()
                    .and_then(|c| c.canonical_reason())
                    .unwrap_or_default()
            } else {
                status.reason.as_str()
            };
            if !reason.is_empty() {
                out.push(' ');
                out.push_str(reason);
            }
            if !status.message.is_empty() {
                out.push_str(": ");
                out.push_str(&status.message);
            }
            out
        }
        kube::Error::SerdeError(e) => format!("cannot decode the response: {e}"),
        other => crate::api_message(other),
    }
}

fn failure<'a>(
    api: &'static str,
    what: &'static str,
    metric: &'a str,
    namespace: &'a str,
) -> impl Fn(String) -> Error + 'a {
    move |reason| Error::MetricsApi {
        api,
        what,
        metric: metric.to_owned(),
        namespace: namespace.to_owned(),
        reason,
    }
}

#[derive(Deserialize)]
struct List<T> {
    #[serde(default = "Vec::new")]
    items: Vec<T>,
}

#[derive(Deserialize)]
struct RawPodMetrics {
    metadata: ObjectMeta,
    timestamp: Timestamp,
    #[serde(deserialize_with = "go_duration")]
    window: Duration,
    #[serde(default)]
    containers: Vec<ContainerMetrics>,
}

fn go_duration<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    parse_duration(&text).map_err(serde::de::Error::custom)
}

impl From<RawPodMetrics> for PodMetrics {
    fn from(raw: RawPodMetrics) -> Self {
        Self {
            name: raw.metadata.name.unwrap_or_default(),
            namespace: raw.metadata.namespace.unwrap_or_default(),
            labels: raw.metadata.labels.unwrap_or_default(),
            timestamp: raw.timestamp,
            window: raw.window,
            containers: raw.containers,
        }
    }
}

impl MetricsSource for ApiMetrics {
    fn pod_metrics<'a>(
        &'a self,
        namespace: &'a str,
        selector: &'a Selector,
    ) -> BoxFuture<'a, Result<Vec<PodMetrics>>> {
        Box::pin(async move {
            let fail = failure(
                RESOURCE_METRICS_API,
                "resource metrics",
                "cpu/memory",
                namespace,
            );
            let list: List<RawPodMetrics> = self
                .get(paths::pod_metrics(namespace, selector), fail)
                .await?;
            Ok(list.items.into_iter().map(PodMetrics::from).collect())
        })
    }

    fn pods_metric<'a>(
        &'a self,
        namespace: &'a str,
        metric: &'a str,
        selector: &'a Selector,
        metric_selector: Option<&'a Selector>,
    ) -> BoxFuture<'a, Result<Vec<MetricValue>>> {
        Box::pin(async move {
            let fail = failure(CUSTOM_METRICS_API, "pods metric", metric, namespace);
            let path = paths::custom_pods(namespace, metric, selector, metric_selector);
            let list: List<MetricValue> = self.get(path, fail).await?;
            Ok(list.items)
        })
    }

    fn object_metric<'a>(
        &'a self,
        namespace: &'a str,
        object: TargetRef<'a>,
        metric: &'a str,
        metric_selector: Option<&'a Selector>,
    ) -> BoxFuture<'a, Result<MetricValue>> {
        Box::pin(async move {
            let fail = failure(CUSTOM_METRICS_API, "object metric", metric, namespace);
            let resolved = self
                .kinds
                .resolve_target(object)
                .await
                .map_err(|e| fail(e.to_string()))?;
            let path = paths::custom_object(
                namespace,
                &resolved.qualified_resource(),
                object.name,
                metric,
                metric_selector,
            );
            let list: List<MetricValue> = self.get(path, &fail).await?;
            let count = list.items.len();
            let mut items = list.items.into_iter();
            match (items.next(), count) {
                (Some(value), 1) => Ok(value),
                _ => Err(fail(format!(
                    "expected exactly one value for {} {}, got {count}",
                    object.kind, object.name
                ))),
            }
        })
    }

    fn external_metric<'a>(
        &'a self,
        namespace: &'a str,
        metric: &'a str,
        metric_selector: Option<&'a Selector>,
    ) -> BoxFuture<'a, Result<Vec<ExternalMetricValue>>> {
        Box::pin(async move {
            let fail = failure(EXTERNAL_METRICS_API, "external metric", metric, namespace);
            let list: List<ExternalMetricValue> = self
                .get(paths::external(namespace, metric, metric_selector), fail)
                .await?;
            Ok(list.items)
        })
    }
}

/// URL paths of the metrics APIs (pure, so they can be tested on their own).
pub mod paths {
    use std::fmt::Write as _;

    use crate::selector::Selector;

    /// Percent-encodes everything outside RFC 3986's unreserved set, so a value is safe as one
    /// path segment or one query value.
    pub fn encode(s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                out.push(char::from(b));
            } else {
                let _ = write!(out, "%{b:02X}");
            }
        }
        out
    }

    fn query(params: &[(&str, Option<&Selector>)]) -> String {
        let mut out = String::new();
        for (name, selector) in params {
            let Some(selector) = selector.filter(|s| !s.is_empty()) else {
                continue;
            };
            out.push(if out.is_empty() { '?' } else { '&' });
            let _ = write!(out, "{name}={}", encode(&selector.to_string()));
        }
        out
    }

    /// `metrics.k8s.io` pod metrics of the pods matching `selector`.
    pub fn pod_metrics(namespace: &str, selector: &Selector) -> String {
        format!(
            "/apis/metrics.k8s.io/v1beta1/namespaces/{}/pods{}",
            encode(namespace),
            query(&[("labelSelector", Some(selector))])
        )
    }

    /// `custom.metrics.k8s.io` metric of every pod matching `selector`.
    pub fn custom_pods(
        namespace: &str,
        metric: &str,
        selector: &Selector,
        metric_selector: Option<&Selector>,
    ) -> String {
        format!(
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/{}/pods/*/{}{}",
            encode(namespace),
            encode(metric),
            query(&[
                ("labelSelector", Some(selector)),
                ("metricLabelSelector", metric_selector)
            ])
        )
    }

    /// `custom.metrics.k8s.io` metric of one object; `resource` is qualified
    /// (`ingresses.networking.k8s.io`).
    pub fn custom_object(
        namespace: &str,
        resource: &str,
        name: &str,
        metric: &str,
        metric_selector: Option<&Selector>,
    ) -> String {
        format!(
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/{}/{}/{}/{}{}",
            encode(namespace),
            encode(resource),
            encode(name),
            encode(metric),
            query(&[("metricLabelSelector", metric_selector)])
        )
    }

    /// `external.metrics.k8s.io` metric, series matching `metric_selector`.
    pub fn external(namespace: &str, metric: &str, metric_selector: Option<&Selector>) -> String {
        format!(
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/{}/{}{}",
            encode(namespace),
            encode(metric),
            query(&[("labelSelector", metric_selector)])
        )
    }
}

/// A metrics source with no metrics APIs behind it: every External metric has one fixed value
/// (or none), pods have no usage and object metrics are not served. For benchmarks and tests
/// that exercise a controller's own path without metrics-server or an adapter.
#[derive(Clone, Debug, Default)]
pub struct FixedExternalMetrics {
    value: Option<Quantity>,
}

impl FixedExternalMetrics {
    /// Every External metric is `value`.
    pub fn new(value: Quantity) -> Self {
        Self { value: Some(value) }
    }

    /// No metric has a value.
    pub fn empty() -> Self {
        Self::default()
    }
}

impl MetricsSource for FixedExternalMetrics {
    fn pod_metrics<'a>(
        &'a self,
        _: &'a str,
        _: &'a Selector,
    ) -> BoxFuture<'a, Result<Vec<PodMetrics>>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn pods_metric<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a Selector,
        _: Option<&'a Selector>,
    ) -> BoxFuture<'a, Result<Vec<MetricValue>>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn object_metric<'a>(
        &'a self,
        namespace: &'a str,
        _: TargetRef<'a>,
        metric: &'a str,
        _: Option<&'a Selector>,
    ) -> BoxFuture<'a, Result<MetricValue>> {
        Box::pin(async move {
            Err(Error::MetricsApi {
                api: "custom.metrics.k8s.io",
                what: "object metric",
                metric: metric.to_owned(),
                namespace: namespace.to_owned(),
                reason: "not served by this metrics source".into(),
            })
        })
    }

    fn external_metric<'a>(
        &'a self,
        _: &'a str,
        metric: &'a str,
        _: Option<&'a Selector>,
    ) -> BoxFuture<'a, Result<Vec<ExternalMetricValue>>> {
        let value = self.value;
        Box::pin(async move {
            Ok(value
                .map(|value| ExternalMetricValue {
                    metric_name: metric.to_owned(),
                    metric_labels: BTreeMap::new(),
                    timestamp: Timestamp::now(),
                    window_seconds: None,
                    value,
                })
                .into_iter()
                .collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_api::FakeApi;

    const POD_METRICS: &str = include_str!("../tests/data/pod-metrics.json");
    const CUSTOM_PODS: &str = include_str!("../tests/data/custom-pods-metric.json");
    const CUSTOM_OBJECT: &str = include_str!("../tests/data/custom-object-metric.json");
    const EXTERNAL: &str = include_str!("../tests/data/external-metric.json");

    fn source(api: &FakeApi) -> ApiMetrics {
        let client = api.client();
        ApiMetrics::new(client.clone(), KindResolver::new(client))
    }

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    fn ingress() -> TargetRef<'static> {
        TargetRef::new("networking.k8s.io/v1", "Ingress", "storefront")
    }

    const NETWORKING_DISCOVERY: &str = r#"{"kind":"APIResourceList","apiVersion":"v1",
        "groupVersion":"networking.k8s.io/v1","resources":[
        {"name":"ingresses","singularName":"ingress","namespaced":true,"kind":"Ingress","verbs":["get"]}]}"#;

    #[test]
    fn paths_match_the_aggregated_apis() {
        let web = Selector::parse("app=web,tier in (a,b)").unwrap();
        let metric_sel = Selector::parse("path=checkout").unwrap();
        assert_eq!(
            paths::pod_metrics("shop", &web),
            "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods?labelSelector=app%3Dweb%2Ctier%20in%20%28a%2Cb%29"
        );
        assert_eq!(
            paths::pod_metrics("shop", &Selector::everything()),
            "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods"
        );
        assert_eq!(
            paths::custom_pods("shop", "requests_per_second", &web, Some(&metric_sel)),
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/shop/pods/*/requests_per_second\
             ?labelSelector=app%3Dweb%2Ctier%20in%20%28a%2Cb%29&metricLabelSelector=path%3Dcheckout"
        );
        assert_eq!(
            paths::custom_object(
                "shop",
                "ingresses.networking.k8s.io",
                "storefront",
                "hits",
                None
            ),
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/shop/ingresses.networking.k8s.io/storefront/hits"
        );
        assert_eq!(
            paths::external("shop", "queue/depth", Some(&metric_sel)),
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/shop/queue%2Fdepth?labelSelector=path%3Dcheckout"
        );
    }

    #[tokio::test]
    async fn pod_metrics_decode_with_window_and_exact_usage() {
        let api = FakeApi::new();
        api.respond(
            "GET",
            "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods",
            200,
            POD_METRICS,
        );
        let pods = source(&api)
            .pod_metrics("shop", &Selector::parse("app=web").unwrap())
            .await
            .unwrap();
        assert_eq!(pods.len(), 2);
        let first = &pods[0];
        assert_eq!(first.name, "web-7c9f8d7b5-abcde");
        assert_eq!(first.labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(first.window, Duration::from_millis(15_007));
        assert_eq!(first.timestamp.to_string(), "2026-11-21T10:14:47Z");
        // 250123456n rounds up to 251m, as upstream's MilliValue().
        assert_eq!(first.containers[0].cpu().unwrap().milli(), 251);
        assert_eq!(first.containers[0].memory().unwrap(), q("187364Ki"));
        assert_eq!(first.total("cpu").unwrap().milli(), 254);
        assert_eq!(first.total("gpu"), None);
        assert_eq!(pods[1].window, Duration::from_secs(60));
        assert_eq!(pods[1].total("memory").unwrap(), q("256Mi"));
        assert_eq!(
            api.requests()[0].uri,
            "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods?labelSelector=app%3Dweb"
        );
    }

    #[tokio::test]
    async fn custom_pods_metric_decodes() {
        let api = FakeApi::new();
        api.respond(
            "GET",
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/shop/pods/*/requests_per_second",
            200,
            CUSTOM_PODS,
        );
        let values = source(&api)
            .pods_metric(
                "shop",
                "requests_per_second",
                &Selector::parse("app=web").unwrap(),
                None,
            )
            .await
            .unwrap();
        assert_eq!(values.len(), 2);
        assert_eq!(
            values[0].described_object.name.as_deref(),
            Some("web-7c9f8d7b5-abcde")
        );
        assert_eq!(values[0].metric.name, "requests_per_second");
        assert_eq!(values[0].window_seconds, Some(60));
        assert_eq!(values[0].value.milli(), 12_500);
        assert_eq!(values[1].value.milli(), 8_000);
    }

    #[tokio::test]
    async fn object_metric_resolves_the_resource_and_decodes() {
        let api = FakeApi::new();
        api.respond(
            "GET",
            "/apis/networking.k8s.io/v1",
            200,
            NETWORKING_DISCOVERY,
        );
        api.respond(
            "GET",
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/shop/ingresses.networking.k8s.io/storefront/requests_per_second",
            200,
            CUSTOM_OBJECT,
        );
        let metric_selector = Selector::parse("path=checkout").unwrap();
        let value = source(&api)
            .object_metric(
                "shop",
                ingress(),
                "requests_per_second",
                Some(&metric_selector),
            )
            .await
            .unwrap();
        assert_eq!(value.value, q("2000"));
        assert_eq!(value.window_seconds, None);
        assert_eq!(value.described_object.kind.as_deref(), Some("Ingress"));
        assert!(value.metric.selector.is_some());
        let last = api.requests().pop().unwrap();
        assert!(
            last.uri.ends_with("?metricLabelSelector=path%3Dcheckout"),
            "{}",
            last.uri
        );
    }

    #[tokio::test]
    async fn object_metric_needs_exactly_one_value() {
        let api = FakeApi::new();
        api.respond(
            "GET",
            "/apis/networking.k8s.io/v1",
            200,
            NETWORKING_DISCOVERY,
        );
        api.respond(
            "GET",
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/shop/ingresses.networking.k8s.io/storefront/hits",
            200,
            CUSTOM_PODS,
        );
        let err = source(&api)
            .object_metric("shop", ingress(), "hits", None)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "custom.metrics.k8s.io object metric \"hits\" in shop: \
             expected exactly one value for Ingress storefront, got 2"
        );
    }

    #[tokio::test]
    async fn external_metric_decodes_both_window_spellings() {
        let api = FakeApi::new();
        api.respond(
            "GET",
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/shop/queue_messages_ready",
            200,
            EXTERNAL,
        );
        let values = source(&api)
            .external_metric("shop", "queue_messages_ready", None)
            .await
            .unwrap();
        assert_eq!(values.len(), 2);
        assert_eq!(
            values[0].metric_labels.get("queue").map(String::as_str),
            Some("orders")
        );
        assert_eq!(values[0].window_seconds, Some(30));
        assert_eq!(values[0].value, q("1234"));
        assert_eq!(values[1].window_seconds, None);
        assert_eq!(values[1].value.milli(), 1_500_000);
    }

    #[tokio::test]
    async fn errors_say_which_api_and_metric_failed() {
        let api = FakeApi::new();
        let metrics = source(&api);
        let web = Selector::parse("app=web").unwrap();
        let err = metrics
            .pods_metric("default", "requests_per_second", &web, None)
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(
                "custom.metrics.k8s.io pods metric \"requests_per_second\" in default: 404 NotFound: "
            ),
            "{text}"
        );
        assert_eq!(err.metric_label(), "metrics_api");
        let err = metrics.pod_metrics("default", &web).await.unwrap_err();
        assert!(
            err.to_string()
                .starts_with("metrics.k8s.io resource metrics \"cpu/memory\" in default: 404"),
            "{err}"
        );
        let err = metrics
            .external_metric("default", "queue_depth", None)
            .await
            .unwrap_err();
        assert!(
            err.to_string().starts_with(
                "external.metrics.k8s.io external metric \"queue_depth\" in default: 404"
            ),
            "{err}"
        );
        // A kind the cluster does not serve is reported against the metric too.
        let err = metrics
            .object_metric("default", ingress(), "hits", None)
            .await
            .unwrap_err();
        assert!(
            err.to_string().starts_with(
                "custom.metrics.k8s.io object metric \"hits\" in default: cannot resolve networking.k8s.io/v1 Ingress"
            ),
            "{err}"
        );
    }

    #[tokio::test]
    async fn plain_text_errors_keep_the_http_reason() {
        let api = FakeApi::new();
        api.respond(
            "GET",
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/shop/q",
            503,
            "upstream connect error",
        );
        let err = source(&api)
            .external_metric("shop", "q", None)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "external.metrics.k8s.io external metric \"q\" in shop: \
             503 Service Unavailable: upstream connect error"
        );
    }

    #[tokio::test]
    async fn malformed_values_are_reported_not_zeroed() {
        let api = FakeApi::new();
        api.respond(
            "GET",
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/shop/q",
            200,
            &EXTERNAL.replace("\"1234\"", "\"12x34\""),
        );
        let err = source(&api)
            .external_metric("shop", "q", None)
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("cannot decode the response"), "{text}");
        assert!(text.contains("12x34"), "{text}");
    }

    /// The trait is object-safe: hpa-plus holds it as `Arc<dyn MetricsSource>`.
    #[tokio::test]
    async fn metrics_source_is_object_safe() {
        let api = FakeApi::new();
        let _shared: std::sync::Arc<dyn MetricsSource> = std::sync::Arc::new(source(&api));
    }
}
