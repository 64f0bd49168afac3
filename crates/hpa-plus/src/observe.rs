//! Gathering an [`Observation`] for one autoscaler: pods from the shared cache, usage and metric
//! values from the metrics APIs, the rollout state, and CronHPA holds.
//!
//! Only the APIs a spec's metrics need are called: one `metrics.k8s.io` request for all
//! Resource / ContainerResource metrics, one custom-metrics request per Pods metric, one per
//! Object metric and one external-metrics request per External metric. A failed request is not
//! an error of the reconcile: it becomes `Err(message)` on the values it should have produced,
//! and the decision applies upstream's rules for failed metrics. Each source has its own
//! function below; what counts as rolling out or held is decided in `plimsoll-core`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference as K8sRef;
use plimsoll_core::api::hpa_plus::{
    CrossVersionObjectReference, ExternalMetricSource, HorizontalPodAutoscalerPlusSpec,
    MetricIdentifier, MetricSpec, ObjectMetricSource, PodsMetricSource,
};
use plimsoll_core::horizontal::cron_hold::cron_hold;
use plimsoll_core::horizontal::observation::Fetched;
use plimsoll_core::horizontal::pod_requests::serving_containers_mut;
use plimsoll_core::horizontal::proposals::{metrics_of, object_key};
use plimsoll_core::horizontal::source::{pod_resource, typed};
use plimsoll_core::horizontal::{ContainerSample, Observation, PodSample, Rollout, RolloutState};
use plimsoll_runtime::metrics_api::PodMetrics;
use plimsoll_runtime::selector::Selector;

use crate::context::Context;
use crate::pods::{ContainerInfo, PodInfo};

fn to_k8s(r: &CrossVersionObjectReference) -> K8sRef {
    K8sRef {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        name: r.name.clone(),
    }
}

fn metric_selector(id: &MetricIdentifier) -> Result<Option<Selector>, String> {
    id.selector
        .as_ref()
        .map(Selector::from_label_selector)
        .transpose()
        .map_err(|e| format!("invalid metric selector: {e}"))
}

/// Longest wait for one metrics request. The client retries 503/429 with backoff; a metrics API
/// that stays down must fail this evaluation (ScalingActive=False), not stall it for minutes.
pub const METRICS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

async fn bounded<T>(
    fut: impl std::future::Future<Output = plimsoll_runtime::Result<T>>,
) -> Result<T, String> {
    match tokio::time::timeout(METRICS_TIMEOUT, fut).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("no answer within {}s", METRICS_TIMEOUT.as_secs())),
    }
}

fn milli(q: plimsoll_core::quantity::Quantity) -> Result<i64, String> {
    i64::try_from(q.milli()).map_err(|_| format!("value {q} is out of range"))
}

/// Builds the observation. `pods` are the pods the target's selector matches; the Prometheus
/// queries end by `prometheus_deadline` (the object's budget).
pub async fn observe(
    ctx: &Context,
    namespace: &str,
    spec: &HorizontalPodAutoscalerPlusSpec,
    (current_replicas, status_replicas): (i32, i32),
    selector: &Selector,
    pods: &[Arc<PodInfo>],
    prometheus_deadline: tokio::time::Instant,
) -> Observation {
    let metrics = metrics_of(spec);
    let samples = pods.iter().map(|p| sample(p)).collect();
    let samples = resource_usage(ctx, namespace, &metrics, selector, samples).await;
    let samples = pods_metrics(ctx, namespace, &metrics, selector, samples).await;
    Observation {
        current_replicas,
        status_replicas: Some(status_replicas),
        pods: samples,
        object_metrics: object_metrics(ctx, namespace, &metrics).await,
        external_metrics: external_metrics(ctx, namespace, &metrics).await,
        prometheus_metrics: ctx
            .prometheus
            .values(
                namespace,
                &metrics,
                std::time::Duration::from_secs(
                    u64::try_from(ctx.config.sync_period_seconds(spec)).unwrap_or(5),
                ),
                now(),
                prometheus_deadline,
            )
            .await,
        conflicting_autoscalers: Vec::new(),
        // Read from the autoscaler's status by the caller, like the conflicts.
        scaled_to_zero: false,
        // Read by the caller, which logs why it is unknown against the autoscaler.
        rollout: None,
        held_by: cron_hold(
            ctx.crons.state().iter().map(AsRef::as_ref),
            namespace,
            &spec.scale_target_ref,
        ),
    }
}

/// Usage of every Resource / ContainerResource metric's resource, from one `metrics.k8s.io`
/// request for all of them.
async fn resource_usage(
    ctx: &Context,
    namespace: &str,
    metrics: &[MetricSpec],
    selector: &Selector,
    mut samples: Vec<PodSample>,
) -> Vec<PodSample> {
    let resources: Vec<&str> = metrics
        .iter()
        .filter_map(|m| pod_resource(m).map(|(resource, _)| resource))
        .collect();
    if resources.is_empty() || samples.is_empty() {
        return samples;
    }
    match bounded(ctx.metrics_source.pod_metrics(namespace, selector)).await {
        Ok(list) => {
            let by_name: HashMap<&str, &PodMetrics> =
                list.iter().map(|m| (m.name.as_str(), m)).collect();
            for s in &mut samples {
                if let Some(pm) = by_name.get(s.name.as_str()) {
                    apply_usage(s, pm, &resources);
                }
            }
        }
        Err(msg) => {
            for c in samples.iter_mut().flat_map(serving_containers_mut) {
                for r in &resources {
                    c.usage.insert((*r).to_owned(), Err(msg.clone()));
                }
            }
        }
    }
    samples
}

/// Per-pod values of every Pods metric, one custom-metrics request each.
async fn pods_metrics(
    ctx: &Context,
    namespace: &str,
    metrics: &[MetricSpec],
    selector: &Selector,
    mut samples: Vec<PodSample>,
) -> Vec<PodSample> {
    for p in metrics.iter().filter_map(typed::<PodsMetricSource>) {
        let result = match metric_selector(&p.metric) {
            Ok(sel) => {
                bounded(ctx.metrics_source.pods_metric(
                    namespace,
                    &p.metric.name,
                    selector,
                    sel.as_ref(),
                ))
                .await
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(values) => {
                let by_pod: HashMap<&str, _> = values
                    .iter()
                    .filter_map(|v| Some((v.described_object.name.as_deref()?, v.value)))
                    .collect();
                for s in &mut samples {
                    if let Some(v) = by_pod.get(s.name.as_str()) {
                        s.metrics.insert(p.metric.name.clone(), milli(*v));
                    }
                }
            }
            Err(msg) => {
                for s in &mut samples {
                    s.metrics.insert(p.metric.name.clone(), Err(msg.clone()));
                }
            }
        }
    }
    samples
}

/// The value of every Object metric, keyed as the decision reads it.
async fn object_metrics(
    ctx: &Context,
    namespace: &str,
    metrics: &[MetricSpec],
) -> BTreeMap<String, Fetched<i64>> {
    let mut values = BTreeMap::new();
    for o in metrics.iter().filter_map(typed::<ObjectMetricSource>) {
        let target = to_k8s(&o.described_object);
        let value = match metric_selector(&o.metric) {
            Ok(sel) => bounded(ctx.metrics_source.object_metric(
                namespace,
                (&target).into(),
                &o.metric.name,
                sel.as_ref(),
            ))
            .await
            .and_then(|v| milli(v.value)),
            Err(e) => Err(e),
        };
        values.insert(object_key(o), value);
    }
    values
}

/// Every series of every External metric, keyed by metric name.
async fn external_metrics(
    ctx: &Context,
    namespace: &str,
    metrics: &[MetricSpec],
) -> BTreeMap<String, Fetched<Vec<i64>>> {
    let mut values = BTreeMap::new();
    for x in metrics.iter().filter_map(typed::<ExternalMetricSource>) {
        let series = match metric_selector(&x.metric) {
            Ok(sel) => bounded(ctx.metrics_source.external_metric(
                namespace,
                &x.metric.name,
                sel.as_ref(),
            ))
            .await
            .and_then(|vs| vs.into_iter().map(|v| milli(v.value)).collect()),
            Err(e) => Err(e),
        };
        values.insert(x.metric.name.clone(), series);
    }
    values
}

/// The target's rollout state when `pauseDuringRollout` asks for it, judged by core's rules;
/// `Err` with why when it cannot be known (a status without the rollout conventions, or a failed
/// read), which the decision reports in its `PausedForRollout` condition without holding scaling.
pub async fn rollout(
    ctx: &Context,
    namespace: &str,
    spec: &HorizontalPodAutoscalerPlusSpec,
    current_replicas: i32,
) -> Result<Option<RolloutState>, String> {
    if !spec.pause_during_rollout {
        return Ok(None);
    }
    let target = to_k8s(&spec.scale_target_ref);
    match bounded(ctx.scale.rollout(namespace, &target)).await {
        Ok(Rollout::Unknown(why)) => Err(why),
        Ok(verdict) => Ok(verdict.state(current_replicas)),
        // An unreadable rollout state must not block scaling: it is reported as unknown.
        Err(e) => Err(format!("cannot read it: {e}")),
    }
}

fn sample(p: &PodInfo) -> PodSample {
    let containers = |list: &[ContainerInfo]| -> Vec<ContainerSample> {
        list.iter()
            .map(|c| ContainerSample {
                name: c.name.clone(),
                requests: c.requests.clone(),
                limits: c.limits.clone(),
                usage: BTreeMap::new(),
                sidecar: c.sidecar,
                allocated: c.allocated.clone(),
                actual_requests: c.actual_requests.clone(),
                actual_limits: c.actual_limits.clone(),
            })
            .collect()
    };
    PodSample {
        name: p.name.clone(),
        phase: p.phase,
        ready: p.ready,
        deleting: p.deleting,
        start_time: p.start_time,
        ready_transition_time: p.ready_transition_time,
        metrics_timestamp: None,
        containers: containers(&p.containers),
        init_containers: containers(&p.init_containers),
        pod_requests: p.pod_requests.clone(),
        pod_limits: p.pod_limits.clone(),
        overhead: p.overhead.clone(),
        ..PodSample::default()
    }
}

fn apply_usage(s: &mut PodSample, pm: &PodMetrics, resources: &[&str]) {
    s.metrics_timestamp = Some(pm.timestamp);
    s.metrics_window_seconds = i64::try_from(pm.window.as_secs()).unwrap_or(i64::MAX);
    // Usage is recorded for the containers whose usage counts (containers and sidecars).
    for c in serving_containers_mut(s) {
        let Some(cm) = pm.containers.iter().find(|m| m.name == c.name) else {
            continue;
        };
        for r in resources {
            if let Some(q) = cm.usage.get(*r) {
                c.usage.insert((*r).to_owned(), milli(*q));
            }
        }
    }
}

/// The reconcile time, as the decision wants it.
pub fn now() -> Timestamp {
    Timestamp::now()
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt as _;
    use futures::future::BoxFuture;
    use k8s_openapi::api::core::v1::Pod;
    use kube::runtime::watcher::Event;
    use plimsoll_core::api::hpa_plus::MetricSpec;
    use plimsoll_core::horizontal::ControllerConfig;
    use plimsoll_core::quantity::Quantity;
    use plimsoll_runtime::events::Events;
    use plimsoll_runtime::leader::LeaderHandle;
    use plimsoll_runtime::metrics_api::{
        ContainerMetrics, ExternalMetricValue, MetricValue, MetricsSource,
    };
    use plimsoll_runtime::scale::ScaleClient;
    use prometheus_client::registry::Registry;
    use std::time::Duration;

    use crate::context::ContextParts;
    use crate::metrics::Metrics;
    use crate::pods::PodIndex;

    /// A metrics source answering from fixed values, or failing, or hanging.
    #[derive(Default)]
    struct Fake {
        cpu_millis: BTreeMap<String, &'static str>,
        rps: BTreeMap<String, &'static str>,
        external: Vec<&'static str>,
        /// CPU usage of a `proxy` container in every pod, when set.
        sidecar_cpu: Option<&'static str>,
        fail: bool,
        hang: bool,
    }

    fn err(metric: &str) -> plimsoll_runtime::Error {
        plimsoll_runtime::Error::MetricsApi {
            api: "metrics.k8s.io",
            what: "pod metrics",
            metric: metric.to_owned(),
            namespace: "ns".into(),
            reason: "503 ServiceUnavailable".into(),
        }
    }

    impl Fake {
        async fn gate(&self, metric: &str) -> plimsoll_runtime::Result<()> {
            if self.hang {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            if self.fail { Err(err(metric)) } else { Ok(()) }
        }
    }

    impl MetricsSource for Fake {
        fn pod_metrics<'a>(
            &'a self,
            namespace: &'a str,
            _: &'a Selector,
        ) -> BoxFuture<'a, plimsoll_runtime::Result<Vec<PodMetrics>>> {
            async move {
                self.gate("cpu").await?;
                Ok(self
                    .cpu_millis
                    .iter()
                    .map(|(pod, cpu)| PodMetrics {
                        name: pod.clone(),
                        namespace: namespace.to_owned(),
                        labels: BTreeMap::new(),
                        timestamp: Timestamp::from_second(1000).unwrap(),
                        window: Duration::from_secs(15),
                        containers: std::iter::once(("app", *cpu))
                            .chain(self.sidecar_cpu.map(|s| ("proxy", s)))
                            .map(|(name, cpu)| ContainerMetrics {
                                name: name.into(),
                                usage: [("cpu".to_owned(), Quantity::parse(cpu).unwrap())].into(),
                            })
                            .collect(),
                    })
                    .collect())
            }
            .boxed()
        }
        fn pods_metric<'a>(
            &'a self,
            namespace: &'a str,
            metric: &'a str,
            _: &'a Selector,
            _: Option<&'a Selector>,
        ) -> BoxFuture<'a, plimsoll_runtime::Result<Vec<MetricValue>>> {
            async move {
                self.gate(metric).await?;
                Ok(self
                    .rps
                    .iter()
                    .map(|(pod, v)| {
                        serde_json::from_value(serde_json::json!({
                            "describedObject": {"kind": "Pod", "name": pod, "namespace": namespace},
                            "metric": {"name": metric},
                            "timestamp": "2026-01-01T00:00:00Z",
                            "value": v,
                        }))
                        .unwrap()
                    })
                    .collect())
            }
            .boxed()
        }
        fn object_metric<'a>(
            &'a self,
            _: &'a str,
            _: plimsoll_runtime::kinds::TargetRef<'a>,
            metric: &'a str,
            _: Option<&'a Selector>,
        ) -> BoxFuture<'a, plimsoll_runtime::Result<MetricValue>> {
            async move { Err(err(metric)) }.boxed()
        }
        fn external_metric<'a>(
            &'a self,
            _: &'a str,
            metric: &'a str,
            _: Option<&'a Selector>,
        ) -> BoxFuture<'a, plimsoll_runtime::Result<Vec<ExternalMetricValue>>> {
            async move {
                self.gate(metric).await?;
                Ok(self
                    .external
                    .iter()
                    .map(|v| ExternalMetricValue {
                        metric_name: metric.to_owned(),
                        metric_labels: BTreeMap::new(),
                        timestamp: Timestamp::from_second(1000).unwrap(),
                        window_seconds: None,
                        value: Quantity::parse(v).unwrap(),
                    })
                    .collect())
            }
            .boxed()
        }
    }

    fn pod(name: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap()
    }

    /// A pod with a native sidecar (`proxy`) and an init container that has completed.
    fn pod_with_sidecar(name: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"}},
            "spec": {
                "initContainers": [
                    {"name": "migrate", "resources": {"requests": {"cpu": "1"}}},
                    {"name": "proxy", "restartPolicy": "Always",
                     "resources": {"requests": {"cpu": "50m"}}}
                ],
                "containers": [{"name": "app", "resources": {"requests": {"cpu": "100m"}}}]
            },
            "status": {"phase": "Running", "startTime": "1970-01-01T00:00:00Z",
                "conditions": [{"type": "Ready", "status": "True",
                                "lastTransitionTime": "1970-01-01T00:00:00Z"}]}
        }))
        .unwrap()
    }

    /// A context whose client points nowhere: `observe` must not call the API server for
    /// pods (they come from the index) nor for metrics (they come from the fake).
    fn context(fake: Fake, pods: &[&str]) -> Context {
        context_with(fake, pods.iter().map(|p| pod(p)).collect())
    }

    fn context_with(fake: Fake, pods: Vec<Pod>) -> Context {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let index = PodIndex::new();
        index.apply(&Event::Init);
        for p in pods {
            index.apply(&Event::InitApply(p));
        }
        index.apply(&Event::InitDone);
        let (crons, _writer) = kube::runtime::reflector::store();
        let mut registry = Registry::default();
        Context::from_parts(ContextParts {
            client: client.clone(),
            scale: ScaleClient::new(client.clone(), "hpa-plus"),
            metrics_source: Arc::new(fake),
            events: Events::new(client, "hpa-plus"),
            metrics: Arc::new(Metrics::register(&mut registry)),
            pods: index,
            crons,
            config: ControllerConfig::default(),
            leader: LeaderHandle::always_leading(),
            prometheus: crate::prometheus::PrometheusMetrics::new(
                crate::prometheus::PrometheusSettings::default(),
                None,
            ),
            tuning_exclude: None,
            vpas: crate::vpa_targets(),
        })
    }

    fn spec(metrics: &serde_json::Value) -> HorizontalPodAutoscalerPlusSpec {
        serde_json::from_value(serde_json::json!({
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 10,
            "metrics": metrics,
        }))
        .unwrap()
    }

    async fn run(ctx: &Context, spec: &HorizontalPodAutoscalerPlusSpec) -> Observation {
        let selector = Selector::parse("app=web").unwrap();
        let pods = ctx.pods.select("ns", &selector);
        observe(
            ctx,
            "ns",
            spec,
            (2, 2),
            &selector,
            &pods,
            tokio::time::Instant::now() + std::time::Duration::from_secs(5),
        )
        .await
    }

    fn cpu_metric() -> serde_json::Value {
        serde_json::json!([{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 50}}}])
    }

    #[tokio::test]
    async fn pods_come_from_the_index_and_usage_from_the_metrics_source() {
        let fake = Fake {
            cpu_millis: [("a".to_owned(), "80m"), ("b".to_owned(), "120m")].into(),
            ..Fake::default()
        };
        let ctx = context(fake, &["a", "b", "c"]);
        let obs = run(&ctx, &spec(&cpu_metric())).await;
        assert_eq!(obs.current_replicas, 2);
        assert_eq!(obs.pods.len(), 3);
        let usage = |i: usize| obs.pods[i].containers[0].usage.get("cpu").cloned();
        assert_eq!(usage(0), Some(Ok(80)));
        assert_eq!(usage(1), Some(Ok(120)));
        // No sample for c: "missing", as upstream.
        assert_eq!(usage(2), None);
        assert_eq!(obs.pods[0].containers[0].requests["cpu"], 100);
        assert_eq!(obs.pods[0].metrics_window_seconds, 15);
    }

    #[tokio::test]
    async fn a_failing_metrics_api_marks_every_sample_failed() {
        let ctx = context(
            Fake {
                fail: true,
                ..Fake::default()
            },
            &["a", "b"],
        );
        let obs = run(&ctx, &spec(&cpu_metric())).await;
        for p in &obs.pods {
            assert!(matches!(p.containers[0].usage.get("cpu"), Some(Err(m)) if m.contains("503")));
        }
        let ext = spec(&serde_json::json!([{"type": "External", "external": {
            "metric": {"name": "queue"}, "target": {"type": "Value", "value": "10"}}}]));
        let obs = run(&ctx, &ext).await;
        assert!(matches!(obs.external_metrics.get("queue"), Some(Err(_))));
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_metrics_api_fails_after_the_timeout() {
        let ctx = context(
            Fake {
                hang: true,
                ..Fake::default()
            },
            &["a"],
        );
        let obs = run(&ctx, &spec(&cpu_metric())).await;
        assert!(matches!(
            obs.pods[0].containers[0].usage.get("cpu"),
            Some(Err(m)) if m.contains("no answer within 5s")
        ));
    }

    #[tokio::test]
    async fn pods_external_and_object_metrics_are_keyed_as_the_decision_reads_them() {
        let fake = Fake {
            rps: [("a".to_owned(), "10"), ("b".to_owned(), "500m")].into(),
            external: vec!["3", "4"],
            ..Fake::default()
        };
        let ctx = context(fake, &["a", "b"]);
        let metrics: Vec<MetricSpec> = serde_json::from_value(serde_json::json!([
            {"type": "Pods", "pods": {"metric": {"name": "rps"},
                "target": {"type": "AverageValue", "averageValue": "10"}}},
            {"type": "External", "external": {"metric": {"name": "queue"},
                "target": {"type": "Value", "value": "10"}}},
            {"type": "Object", "object": {"describedObject": {"apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress", "name": "main"}, "metric": {"name": "hits"},
                "target": {"type": "Value", "value": "10"}}}
        ]))
        .unwrap();
        let obs = run(&ctx, &spec(&serde_json::to_value(metrics).unwrap())).await;
        assert_eq!(obs.pods[0].metrics.get("rps"), Some(&Ok(10_000)));
        assert_eq!(obs.pods[1].metrics.get("rps"), Some(&Ok(500)));
        assert_eq!(
            obs.external_metrics.get("queue"),
            Some(&Ok(vec![3000, 4000]))
        );
        assert!(matches!(
            obs.object_metrics.get("Ingress/main/hits"),
            Some(Err(_))
        ));
        // No Resource metric: no metrics.k8s.io request, so no usage at all.
        assert!(obs.pods[0].containers[0].usage.is_empty());
    }

    #[tokio::test]
    async fn sidecar_usage_is_recorded_and_counted() {
        let fake = Fake {
            cpu_millis: [("a".to_owned(), "80m"), ("b".to_owned(), "70m")].into(),
            sidecar_cpu: Some("40m"),
            ..Fake::default()
        };
        let ctx = context_with(fake, vec![pod_with_sidecar("a"), pod_with_sidecar("b")]);
        let obs = run(&ctx, &spec(&cpu_metric())).await;
        let proxy = &obs.pods[0].init_containers[1];
        assert!(proxy.sidecar);
        assert_eq!(proxy.usage.get("cpu"), Some(&Ok(40)));
        assert!(
            obs.pods[0].init_containers[0].usage.is_empty(),
            "an init container that completed gets no sample"
        );
        // The decision: (80 + 40 + 70 + 40) / (2 × (100 + 50)) = 76 % against a 50 % target.
        let now = Timestamp::from_second(1000).unwrap();
        let proposals = plimsoll_core::horizontal::proposals::propose(
            &spec(&cpu_metric()),
            &obs,
            &ControllerConfig::default(),
            now,
        );
        assert_eq!(proposals[0].value, Some(76.0), "{proposals:?}");
    }
}
