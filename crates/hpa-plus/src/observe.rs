//! Gathering an [`Observation`] for one autoscaler: pods from the shared cache, usage and metric
//! values from the metrics APIs, the rollout state, and CronHPA holds.
//!
//! Only the APIs a spec's metrics need are called: one `metrics.k8s.io` request for all
//! Resource / ContainerResource metrics, one custom-metrics request per Pods metric, one per
//! Object metric and one external-metrics request per External metric. A failed request is not
//! an error of the reconcile: it becomes `Err(message)` on the values it should have produced,
//! and the decision applies upstream's rules for failed metrics.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference as K8sRef;
use plimsoll_core::api::cron::{
    ADJUST_HPA_MIN_ANNOTATION, ADJUST_HPA_MIN_ANNOTATION_STKE, CronHorizontalPodAutoscaler,
};
use plimsoll_core::api::hpa_plus::{
    CrossVersionObjectReference, HorizontalPodAutoscalerPlusSpec, MetricIdentifier,
    MetricSourceType,
};
use plimsoll_core::horizontal::{ContainerSample, Observation, PodSample, RolloutState};
use plimsoll_runtime::metrics_api::PodMetrics;
use plimsoll_runtime::rollout::RolloutState as RuntimeRollout;
use plimsoll_runtime::selector::Selector;

use crate::context::Context;
use crate::pods::PodInfo;

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

/// Builds the observation. `pods` are the pods the target's selector matches.
// One match arm per metric source type; splitting it would scatter the request plan.
#[allow(clippy::too_many_lines)]
pub async fn observe(
    ctx: &Context,
    namespace: &str,
    spec: &HorizontalPodAutoscalerPlusSpec,
    current_replicas: i32,
    status_replicas: i32,
    selector: &Selector,
    pods: &[Arc<PodInfo>],
) -> Observation {
    let mut samples: Vec<PodSample> = pods.iter().map(|p| sample(p)).collect();

    // Resource usage: one request covers every resource metric.
    let resources: Vec<&str> = spec
        .metrics
        .iter()
        .filter_map(|m| match m.type_ {
            MetricSourceType::Resource => m.resource.as_ref().map(|r| r.name.as_str()),
            MetricSourceType::ContainerResource => {
                m.container_resource.as_ref().map(|r| r.name.as_str())
            }
            _ => None,
        })
        .chain(spec.metrics.is_empty().then_some("cpu"))
        .collect();
    if !resources.is_empty() && !samples.is_empty() {
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
                for s in &mut samples {
                    for c in &mut s.containers {
                        for r in &resources {
                            c.usage.insert((*r).to_owned(), Err(msg.clone()));
                        }
                    }
                }
            }
        }
    }

    let mut obs = Observation {
        current_replicas,
        status_replicas: Some(status_replicas),
        ..Observation::default()
    };

    for m in &spec.metrics {
        match m.type_ {
            MetricSourceType::Pods => {
                let Some(p) = &m.pods else { continue };
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
            MetricSourceType::Object => {
                let Some(o) = &m.object else { continue };
                let key = format!(
                    "{}/{}/{}",
                    o.described_object.kind, o.described_object.name, o.metric.name
                );
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
                obs.object_metrics.insert(key, value);
            }
            MetricSourceType::External => {
                let Some(x) = &m.external else { continue };
                let values = match metric_selector(&x.metric) {
                    Ok(sel) => bounded(ctx.metrics_source.external_metric(
                        namespace,
                        &x.metric.name,
                        sel.as_ref(),
                    ))
                    .await
                    .and_then(|vs| vs.into_iter().map(|v| milli(v.value)).collect()),
                    Err(e) => Err(e),
                };
                obs.external_metrics.insert(x.metric.name.clone(), values);
            }
            MetricSourceType::Resource | MetricSourceType::ContainerResource => {}
        }
    }
    obs.pods = samples;

    if spec.pause_during_rollout {
        let target = to_k8s(&spec.scale_target_ref);
        // An unreadable rollout state must not block scaling: treat it as settled.
        match bounded(ctx.scale.rollout(namespace, &target)).await {
            Ok(Some(RuntimeRollout::InProgress(_))) => {
                // The runtime already decided; encode "in progress" in the core's terms.
                obs.rollout = Some(RolloutState {
                    generation: 1,
                    observed_generation: 0,
                    updated_replicas: 0,
                    desired_replicas: current_replicas,
                });
            }
            Ok(_) => obs.rollout = Some(RolloutState::default()),
            Err(e) => tracing::warn!(error = %e, namespace, "cannot read rollout state"),
        }
    }
    obs.held_by = cron_hold(&ctx.crons.state(), namespace, &spec.scale_target_ref);
    obs
}

/// The name of a replica-mode CronHorizontalPodAutoscaler in `namespace` that targets the same
/// workload and holds its scale-up keep window.
pub fn cron_hold(
    crons: &[Arc<CronHorizontalPodAutoscaler>],
    namespace: &str,
    target: &CrossVersionObjectReference,
) -> Option<String> {
    crons
        .iter()
        .filter(|c| c.metadata.namespace.as_deref() == Some(namespace))
        .filter(|c| {
            let t = &c.spec.scale_target_ref;
            t.kind == target.kind && t.name == target.name
        })
        .filter(|c| {
            // Min-replicas mode (the adjust-hpa-min annotation) only raises minReplicas.
            let annotations = c.metadata.annotations.as_ref();
            let adjust_min = annotations.is_some_and(|a| {
                [ADJUST_HPA_MIN_ANNOTATION, ADJUST_HPA_MIN_ANNOTATION_STKE]
                    .iter()
                    .any(|k| a.get(*k).is_some_and(|v| v.trim() == "true"))
            });
            !adjust_min
        })
        .find(|c| c.status.as_ref().is_some_and(|s| s.scale_up_keep_window))
        .map(|c| {
            format!(
                "CronHorizontalPodAutoscaler/{}",
                c.metadata.name.as_deref().unwrap_or_default()
            )
        })
}

fn sample(p: &PodInfo) -> PodSample {
    PodSample {
        name: p.name.clone(),
        phase: p.phase,
        ready: p.ready,
        deleting: p.deleting,
        start_time: p.start_time,
        ready_transition_time: p.ready_transition_time,
        metrics_timestamp: None,
        containers: p
            .containers
            .iter()
            .map(|c| ContainerSample {
                name: c.name.clone(),
                requests: c.requests.clone(),
                limits: c.limits.clone(),
                usage: BTreeMap::new(),
            })
            .collect(),
        ..PodSample::default()
    }
}

fn apply_usage(s: &mut PodSample, pm: &PodMetrics, resources: &[&str]) {
    s.metrics_timestamp = Some(pm.timestamp);
    s.metrics_window_seconds = i64::try_from(pm.window.as_secs()).unwrap_or(i64::MAX);
    for c in &mut s.containers {
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
    use plimsoll_core::api::cron::{
        CronHorizontalPodAutoscalerSpec, CronHorizontalPodAutoscalerStatus,
    };

    fn cron(
        name: &str,
        kind: &str,
        target: &str,
        keep: bool,
        adjust: bool,
    ) -> Arc<CronHorizontalPodAutoscaler> {
        let mut c = CronHorizontalPodAutoscaler::new(
            name,
            CronHorizontalPodAutoscalerSpec {
                scale_target_ref: K8sRef {
                    api_version: Some("apps/v1".into()),
                    kind: kind.into(),
                    name: target.into(),
                },
                ..Default::default()
            },
        );
        c.metadata.namespace = Some("ns".into());
        if adjust {
            c.metadata.annotations =
                Some([(ADJUST_HPA_MIN_ANNOTATION.to_owned(), "true".to_owned())].into());
        }
        c.status = Some(CronHorizontalPodAutoscalerStatus {
            scale_up_keep_window: keep,
            ..Default::default()
        });
        Arc::new(c)
    }

    fn target(kind: &str, name: &str) -> CrossVersionObjectReference {
        CrossVersionObjectReference {
            api_version: Some("apps/v1".into()),
            kind: kind.into(),
            name: name.into(),
        }
    }

    #[test]
    fn a_replica_mode_cron_in_its_keep_window_holds_the_target() {
        let crons = [
            cron("other", "Deployment", "db", true, false),
            cron("closed", "Deployment", "web", false, false),
            cron("open", "Deployment", "web", true, false),
        ];
        assert_eq!(
            cron_hold(&crons, "ns", &target("Deployment", "web")).as_deref(),
            Some("CronHorizontalPodAutoscaler/open")
        );
        assert_eq!(
            cron_hold(&crons, "other-ns", &target("Deployment", "web")),
            None
        );
        assert_eq!(cron_hold(&crons, "ns", &target("StatefulSet", "web")), None);
    }

    #[test]
    fn a_min_replicas_mode_cron_does_not_hold() {
        let crons = [cron("min", "Deployment", "web", true, true)];
        assert_eq!(cron_hold(&crons, "ns", &target("Deployment", "web")), None);
    }
}
