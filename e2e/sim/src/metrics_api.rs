//! The metrics APIs, served from the workload model's latest samples:
//! - `metrics.k8s.io/v1beta1`: `PodMetrics` (per container usage; CPU in nanocores, memory in
//!   KiB, like metrics-server) and `NodeMetrics` (sum of the node's pods plus a system baseline);
//! - `custom.metrics.k8s.io/v1beta2`: per-pod metrics (`namespaces/{ns}/pods/*/{metric}` with
//!   a labelSelector, or one pod) and per-object metrics (`namespaces/{ns}/{resource}/{name}/{metric}`);
//! - `external.metrics.k8s.io/v1beta1`: `namespaces/{ns}/{metric}`.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::Cluster;
use crate::clock::rfc3339;
use crate::error::ApiError;
use crate::selector::LabelSelector;
use crate::wire::Query;

/// Whether `group` is one of the metrics API groups.
pub fn is_metrics_group(group: &str) -> bool {
    matches!(
        group,
        "metrics.k8s.io" | "custom.metrics.k8s.io" | "external.metrics.k8s.io"
    )
}

/// Formats a value as a quantity with milli precision (`1500m`, `3`).
pub fn format_milli(v: f64) -> String {
    let m = (v * 1000.0).round() as i64;
    if m % 1000 == 0 {
        format!("{}", m / 1000)
    } else {
        format!("{m}m")
    }
}

/// A window as metrics-server writes it: whole seconds (`30s`), else milliseconds (`417ms`).
pub fn go_duration(d: std::time::Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis().max(1))
    }
}

fn not_found() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

/// Serves one metrics API request (`rest` is the path after `/apis/{group}/{version}`).
pub fn handle(
    cluster: &Arc<Cluster>,
    group: &str,
    version: &str,
    rest: &[&str],
    q: &Query,
) -> Result<Value, ApiError> {
    let selector = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))?;
    match (group, version) {
        ("metrics.k8s.io", "v1beta1") => resource_metrics(cluster, rest, &selector),
        ("custom.metrics.k8s.io", "v1beta2") => custom_metrics(cluster, rest, &selector, q),
        ("external.metrics.k8s.io", "v1beta1") => external_metrics(cluster, rest, &selector),
        _ => Err(not_found()),
    }
}

fn pod_metrics_item(cluster: &Cluster, pod: &Value, window: &str) -> Option<Value> {
    let ns = pod.pointer("/metadata/namespace")?.as_str()?;
    let name = pod.pointer("/metadata/name")?.as_str()?;
    let u = cluster.model.pod_usage(ns, name)?;
    let containers: Vec<Value> = u
        .containers
        .iter()
        .map(|c| {
            json!({"name": c.name, "usage": {
                "cpu": format!("{}n", (c.cpu_millis * 1e6).round() as i64),
                "memory": format!("{}Ki", (c.memory_bytes / 1024.0).round() as i64),
            }})
        })
        .collect();
    Some(json!({
        "metadata": {"name": name, "namespace": ns, "labels": pod.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({})),
            "creationTimestamp": rfc3339(cluster.clock.now())},
        "timestamp": rfc3339(u.timestamp), "window": window, "containers": containers,
    }))
}

fn resource_metrics(
    cluster: &Cluster,
    rest: &[&str],
    selector: &LabelSelector,
) -> Result<Value, ApiError> {
    let pods_key = (String::new(), "pods".to_string());
    let window = go_duration(cluster.model.metrics_window());
    let list = |kind: &str, items: Vec<Value>| json!({"kind": kind, "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {}, "items": items});
    let with_kind = |mut v: Value, kind: &str| {
        v["kind"] = json!(kind);
        v["apiVersion"] = json!("metrics.k8s.io/v1beta1");
        v
    };
    match rest {
        ["pods"] | ["namespaces", _, "pods"] => {
            let ns = if let ["namespaces", ns, _] = rest {
                Some(*ns)
            } else {
                None
            };
            let (pods, _) = cluster.store.list(&pods_key, ns);
            let items = pods
                .iter()
                .filter(|p| selector.matches_object(p))
                .filter_map(|p| pod_metrics_item(cluster, p, &window))
                .collect();
            Ok(list("PodMetricsList", items))
        }
        ["namespaces", ns, "pods", name] => {
            let pod = cluster
                .store
                .get(&pods_key, ns, name)
                .ok_or_else(|| ApiError::not_found("metrics.k8s.io", "pods", name))?;
            pod_metrics_item(cluster, &pod, &window)
                .map(|v| with_kind(v, "PodMetrics"))
                .ok_or_else(|| ApiError::not_found("metrics.k8s.io", "pods", name))
        }
        ["nodes"] | ["nodes", _] => {
            let (nodes, _) = cluster.store.list(&(String::new(), "nodes".into()), None);
            let mut per_node: HashMap<String, (f64, f64)> = HashMap::new();
            for (_, u) in cluster.model.pods_in(None) {
                let e = per_node.entry(u.node.clone()).or_default();
                e.0 += u.containers.iter().map(|c| c.cpu_millis).sum::<f64>();
                e.1 += u.containers.iter().map(|c| c.memory_bytes).sum::<f64>();
            }
            let now = rfc3339(cluster.clock.now());
            let item = |n: &Value| {
                let name = n
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let (cpu, mem) = per_node.get(name).copied().unwrap_or_default();
                // The system baseline (kubelet, runtime): 100m and 512Mi.
                json!({"metadata": {"name": name, "labels": n.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({})), "creationTimestamp": now},
                    "timestamp": now, "window": "20s",
                    "usage": {"cpu": format!("{}n", ((cpu + 100.0) * 1e6).round() as i64), "memory": format!("{}Ki", ((mem + 512.0 * 1024.0 * 1024.0) / 1024.0).round() as i64)}})
            };
            if let ["nodes", name] = rest {
                let n = nodes
                    .iter()
                    .find(|n| n.pointer("/metadata/name").and_then(Value::as_str) == Some(*name))
                    .ok_or_else(|| ApiError::not_found("metrics.k8s.io", "nodes", name))?;
                return Ok(with_kind(item(n), "NodeMetrics"));
            }
            Ok(list(
                "NodeMetricsList",
                nodes
                    .iter()
                    .filter(|n| selector.matches_object(n))
                    .map(|n| item(n))
                    .collect(),
            ))
        }
        _ => Err(not_found()),
    }
}

/// The object a custom metric value describes (`describedObject`).
struct DescribedObject<'a> {
    kind: &'a str,
    /// `/{preferred version}` as the custom metrics API writes it ("/v1" for a pod; "" when
    /// the resource is not served).
    api_version: &'a str,
    ns: &'a str,
    name: &'a str,
}

/// One `MetricValue`: `metric`'s `value` for `object`, labelled with the request's
/// `metricLabelSelector`.
fn metric_value(
    cluster: &Cluster,
    object: &DescribedObject<'_>,
    metric: &str,
    value: f64,
    q: &Query,
) -> Value {
    let mut m = json!({"name": metric});
    if let Some(sel) = q.get("metricLabelSelector") {
        m["selector"] = json!({"matchLabels": {}, "matchExpressions": [], "raw": sel});
    }
    let DescribedObject {
        kind,
        api_version,
        ns,
        name,
    } = object;
    json!({
        "describedObject": {"kind": kind, "namespace": ns, "name": name, "apiVersion": api_version},
        "metric": m, "timestamp": rfc3339(cluster.clock.now()), "windowSeconds": 60, "value": format_milli(value),
    })
}

#[allow(clippy::needless_pass_by_value)] // built and handed over in one expression
fn custom_list(items: Vec<Value>) -> Value {
    json!({"kind": "MetricValueList", "apiVersion": "custom.metrics.k8s.io/v1beta2", "metadata": {}, "items": items})
}

fn custom_metrics(
    cluster: &Cluster,
    rest: &[&str],
    selector: &LabelSelector,
    q: &Query,
) -> Result<Value, ApiError> {
    let missing = |metric: &str| {
        ApiError::new(
            404,
            "NotFound",
            format!("the server could not find the metric {metric} for the requested objects"),
        )
    };
    match rest {
        ["namespaces", ns, "pods", name, metric] => {
            let (pods, _) = cluster
                .store
                .list(&(String::new(), "pods".into()), Some(ns));
            let mut items = Vec::new();
            for p in pods.iter().filter(|p| selector.matches_object(p)) {
                let pname = p
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if *name != "*" && pname != *name {
                    continue;
                }
                if let Some(v) = cluster
                    .model
                    .pod_usage(ns, pname)
                    .and_then(|u| u.custom.get(*metric).copied())
                {
                    let pod = DescribedObject {
                        kind: "Pod",
                        api_version: "/v1",
                        ns,
                        name: pname,
                    };
                    items.push(metric_value(cluster, &pod, metric, v, q));
                }
            }
            if items.is_empty() {
                return Err(missing(metric));
            }
            Ok(custom_list(items))
        }
        ["namespaces", ns, qualified, name, metric] => {
            // `deployments.apps` (what the HPA sends: resource.group) or a bare plural.
            let resource = &qualified.split('.').next().unwrap_or(qualified);
            let v = cluster
                .model
                .object_metric(ns, resource, name, metric)
                .ok_or_else(|| missing(metric))?;
            let def = cluster
                .registry
                .all()
                .into_iter()
                .find(|d| d.plural == *resource && !d.is_virtual());
            let (kind, av) = def.map_or_else(
                || (resource.to_string(), String::new()),
                |d| (d.kind.clone(), format!("/{}", d.preferred_api_version())),
            );
            let object = DescribedObject {
                kind: &kind,
                api_version: &av,
                ns,
                name,
            };
            Ok(custom_list(vec![metric_value(
                cluster, &object, metric, v, q,
            )]))
        }
        _ => Err(not_found()),
    }
}

fn external_metrics(
    cluster: &Cluster,
    rest: &[&str],
    _selector: &LabelSelector,
) -> Result<Value, ApiError> {
    let ["namespaces", ns, metric] = rest else {
        return Err(not_found());
    };
    let v = cluster
        .model
        .external(ns, metric)
        .ok_or_else(|| ApiError::new(404, "NotFound", format!("the server could not find the requested resource (get {metric}.external.metrics.k8s.io)")))?;
    Ok(
        json!({"kind": "ExternalMetricValueList", "apiVersion": "external.metrics.k8s.io/v1beta1", "metadata": {},
        "items": [{"metricName": metric, "metricLabels": {}, "timestamp": rfc3339(cluster.clock.now()), "value": format_milli(v)}]}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_read_as_go_durations() {
        assert_eq!(go_duration(std::time::Duration::from_secs(30)), "30s");
        assert_eq!(go_duration(std::time::Duration::from_millis(417)), "417ms");
        assert_eq!(go_duration(std::time::Duration::from_micros(10)), "1ms");
    }

    #[test]
    fn milli_format() {
        assert_eq!(format_milli(1.5), "1500m");
        assert_eq!(format_milli(3.0), "3");
        assert_eq!(format_milli(0.0), "0");
    }
}
