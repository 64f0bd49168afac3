//! One row of the demo: what the sim's store and workload model say about the sample workload
//! and its autoscalers at one instant. Read straight from the sim (no API round trip), so taking
//! a row never competes with the services for the API server.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::Cluster;
use crate::demo::objects::WORKLOAD;
use crate::values::parse_quantity;

/// One row of the table / point of the plot.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sample {
    /// Simulated seconds since the demo's midnight.
    pub t: f64,
    /// Offered load, units/s.
    pub load: f64,
    /// Desired replicas (`spec.replicas`).
    pub replicas: i64,
    /// Ready replicas.
    pub ready: i64,
    /// Mean CPU utilisation of Ready pods, percent of requests (0 with no Ready pod).
    pub cpu_percent: f64,
    /// The HPA+'s CPU target, percent of requests.
    pub target_percent: i64,
    /// The HPA+'s `minReplicas` (the CronHPA moves it).
    pub min_replicas: i64,
    /// Last autoscaler decision and reason.
    pub decision: String,
    /// Pods of the workload.
    pub pods: i64,
    /// Of those, pods the admission webhook patched (annotated `vpaUpdates`).
    pub patched: i64,
    /// What admission changed in the newest patched pod against the template, e.g.
    /// `memory 128Mi→262144k`; empty when no pod was patched.
    pub admission: String,
    /// The VPA's memory target for the workload's container, once the recommender wrote one.
    pub recommendation: Option<String>,
    /// Pods of the workload seen so far in the run.
    pub pods_total: i64,
    /// Of those, pods the admission webhook patched.
    pub patched_total: i64,
    /// Pods vpa-updater resized in place so far (its `InPlaceResizedByVPA` events).
    pub resized: i64,
    /// Pods vpa-updater evicted so far (its `EvictedByVPA` events).
    pub evicted: i64,
}

fn str_at<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default()
}

/// The requests of a pod's first container, or of the template in a Deployment.
pub fn requests(containers: Option<&Value>) -> serde_json::Map<String, Value> {
    containers
        .and_then(|c| c.pointer("/0/resources/requests"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// `resource old→new` for each request the pod has differently from the template.
pub fn changed_requests(
    template: &serde_json::Map<String, Value>,
    pod: &serde_json::Map<String, Value>,
) -> String {
    pod.iter()
        .filter(|(k, v)| template.get(*k) != Some(*v))
        .map(|(k, v)| {
            let old = template.get(k).and_then(Value::as_str).unwrap_or("none");
            format!("{k} {old}→{}", v.as_str().unwrap_or_default())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A memory quantity in MiB for the table (`262144k` → `256Mi`).
pub fn mebibytes(q: &str) -> String {
    parse_quantity(q).map_or_else(
        || q.to_owned(),
        |b| format!("{:.0}Mi", b / (1024.0 * 1024.0)),
    )
}

/// The newest decision of any HorizontalPodAutoscaler-like object targeting the workload: an
/// HPA+'s `status.lastDecision`, else the newest condition.
fn last_decision(cluster: &Cluster, ns: &str) -> String {
    let mut best: Option<(String, String)> = None;
    for def in cluster
        .registry
        .all()
        .iter()
        .filter(|d| d.kind.contains("HorizontalPodAutoscaler"))
    {
        let (items, _) = cluster
            .store
            .list(&(def.group.clone(), def.plural.clone()), Some(ns));
        for o in items
            .iter()
            .filter(|o| str_at(o, "/spec/scaleTargetRef/name") == WORKLOAD)
        {
            if let Some(reason) = o
                .pointer("/status/lastDecision/reason")
                .and_then(Value::as_str)
            {
                let at = str_at(o, "/status/lastDecision/time").to_owned();
                let text = match o
                    .pointer("/status/lastDecision/desiredReplicas")
                    .and_then(Value::as_i64)
                {
                    Some(n) => format!("→{n}: {reason}"),
                    None => reason.to_owned(),
                };
                if best.as_ref().is_none_or(|(t, _)| at >= *t) {
                    best = Some((at, text));
                }
                continue;
            }
            for c in o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let at = str_at(c, "/lastTransitionTime").to_owned();
                let text = format!("{}: {}", str_at(c, "/reason"), str_at(c, "/message"));
                if best.as_ref().is_none_or(|(t, _)| at > *t) {
                    best = Some((at, text));
                }
            }
        }
    }
    best.map_or_else(|| "-".to_string(), |(_, t)| t)
}

/// Distinct pods named by events of `reason` in `ns`. Events are stored once, in the core/v1
/// shape, whichever group wrote them.
fn pods_with_event(cluster: &Cluster, ns: &str, reason: &str) -> i64 {
    let (events, _) = cluster
        .store
        .list(&(String::new(), "events".into()), Some(ns));
    let pods: BTreeSet<&str> = events
        .iter()
        .filter(|e| str_at(e, "/reason") == reason)
        .filter_map(|e| e.pointer("/involvedObject"))
        .filter(|object| str_at(object, "/kind") == "Pod")
        .map(|object| str_at(object, "/name"))
        .collect();
    pods.len() as i64
}

fn pod_ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// Mean CPU utilisation of the Ready, not terminating pods among `pods`, percent of requests.
fn ready_cpu_percent(cluster: &Cluster, ns: &str, pods: &[&Value]) -> f64 {
    let (mut used, mut requested) = (0.0, 0.0);
    for p in pods
        .iter()
        .filter(|p| pod_ready(p) && p.pointer("/metadata/deletionTimestamp").is_none())
    {
        let Some(u) = cluster.model.pod_usage(ns, str_at(p, "/metadata/name")) else {
            continue;
        };
        used += u.containers.iter().map(|c| c.cpu_millis).sum::<f64>();
        requested += p
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| parse_quantity(str_at(c, "/resources/requests/cpu")))
            .sum::<f64>()
            * 1000.0;
    }
    if requested > 0.0 {
        100.0 * used / requested
    } else {
        0.0
    }
}

/// The VPA's memory target for the workload's first container.
fn recommendation(cluster: &Cluster, ns: &str) -> Option<String> {
    let vpa = cluster.store.get(
        &("autoscaling.k8s.io".into(), "verticalpodautoscalers".into()),
        ns,
        WORKLOAD,
    )?;
    vpa.pointer("/status/recommendation/containerRecommendations/0/target/memory")
        .and_then(Value::as_str)
        .map(mebibytes)
}

/// Pods the run has seen across rows: pods come and go, the run's counts should not.
#[derive(Debug, Default)]
pub struct Seen {
    pods: BTreeSet<String>,
    patched: BTreeSet<String>,
}

/// What admission did: pods it patched, and the change in the newest of them.
fn admission(
    template: &serde_json::Map<String, Value>,
    web: &[&Value],
    seen: &mut Seen,
) -> (i64, String) {
    let patched: Vec<_> = web
        .iter()
        .filter(|p| p.pointer("/metadata/annotations/vpaUpdates").is_some())
        .collect();
    seen.pods
        .extend(web.iter().map(|p| str_at(p, "/metadata/name").to_owned()));
    seen.patched.extend(
        patched
            .iter()
            .map(|p| str_at(p, "/metadata/name").to_owned()),
    );
    let change = patched
        .iter()
        .max_by_key(|p| str_at(p, "/metadata/creationTimestamp").to_owned())
        .map(|p| changed_requests(template, &requests(p.pointer("/spec/containers"))))
        .unwrap_or_default();
    (patched.len() as i64, change)
}

/// Reads one row at simulated time `t`, adding what it saw to `seen`.
pub fn take(cluster: &Cluster, ns: &str, t: f64, seen: &mut Seen) -> Sample {
    let dep = cluster
        .store
        .get(&("apps".into(), "deployments".into()), ns, WORKLOAD);
    let hpa = cluster.store.get(
        &(
            "autoscaling.plimsoll.dev".into(),
            "horizontalpodautoscalerpluses".into(),
        ),
        ns,
        WORKLOAD,
    );
    let int = |o: Option<&std::sync::Arc<Value>>, p: &str| {
        o.and_then(|o| o.pointer(p))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let (pods, _) = cluster
        .store
        .list(&(String::new(), "pods".into()), Some(ns));
    let web: Vec<&Value> = pods
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| str_at(p, "/metadata/labels/app") == WORKLOAD)
        .collect();
    let template = requests(
        dep.as_ref()
            .and_then(|d| d.pointer("/spec/template/spec/containers")),
    );
    let (patched, admission) = admission(&template, &web, seen);
    Sample {
        t,
        load: cluster
            .model
            .current_load(ns, "deployments", WORKLOAD)
            .unwrap_or(0.0),
        replicas: int(dep.as_ref(), "/spec/replicas"),
        ready: int(dep.as_ref(), "/status/readyReplicas"),
        cpu_percent: ready_cpu_percent(cluster, ns, &web),
        target_percent: int(
            hpa.as_ref(),
            "/spec/metrics/0/resource/target/averageUtilization",
        ),
        min_replicas: int(hpa.as_ref(), "/spec/minReplicas"),
        decision: last_decision(cluster, ns),
        pods: web.len() as i64,
        patched,
        admission,
        recommendation: recommendation(cluster, ns),
        pods_total: seen.pods.len() as i64,
        patched_total: seen.patched.len() as i64,
        resized: pods_with_event(cluster, ns, "InPlaceResizedByVPA"),
        evicted: pods_with_event(cluster, ns, "EvictedByVPA"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn admission_changes_against_the_template() {
        let template = requests(Some(
            &json!([{"resources": {"requests": {"cpu": "200m", "memory": "128Mi"}}}]),
        ));
        let pod = requests(Some(
            &json!([{"resources": {"requests": {"cpu": "200m", "memory": "262144k"}}}]),
        ));
        assert_eq!(changed_requests(&template, &pod), "memory 128Mi→262144k");
        assert_eq!(changed_requests(&template, &template), "");
    }

    #[test]
    fn memory_reads_in_mebibytes() {
        assert_eq!(mebibytes("262144k"), "250Mi");
        assert_eq!(mebibytes("128Mi"), "128Mi");
        assert_eq!(mebibytes("junk"), "junk");
    }
}
