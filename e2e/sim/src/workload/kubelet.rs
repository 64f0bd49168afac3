//! The scheduler and kubelet: unscheduled pods are bound round-robin to the sim's nodes; a pod is
//! Running `pod_start` after creation and Ready `pod_ready` after its latest container start; a
//! terminating pod is gone `min(pod_termination, grace period)` after its deletion (finalizers
//! permitting); an `OOMKilled` container restarts at once and is not Ready until `pod_ready` later;
//! a resize the node could not fit beside its other pods (`Deferred`) is retried every tick and
//! actuated once it fits.

use serde_json::{Value, json};

use super::{Ctx, deleting, i, key, log_conflict, pod_ready, s};
use crate::clock::{parse_time, rfc3339};
use crate::defaults;
use crate::random::fnv1a;
use crate::store::Mutation;

fn container_statuses(pod: &Value, now: &str, ready: bool, prev: Option<&Value>) -> Value {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let statuses: Vec<Value> = containers
        .iter()
        .enumerate()
        .map(|(idx, c)| {
            let name = c.get("name").cloned().unwrap_or(Value::Null);
            let old = prev.and_then(|p| p.as_array()).and_then(|a| a.iter().find(|x| x["name"] == name)).cloned();
            let mut st = old.unwrap_or_else(|| {
                json!({"name": name, "restartCount": 0, "started": true,
                    "state": {"running": {"startedAt": now}},
                    "image": c.get("image").cloned().unwrap_or(Value::Null),
                    "imageID": format!("sim://{}", c.get("image").and_then(Value::as_str).unwrap_or_default()),
                    "containerID": format!("sim://{}-{idx}", s(pod, "/metadata/uid")),
                    "resources": c.get("resources").cloned().unwrap_or_else(|| json!({})),
                    "allocatedResources": c.pointer("/resources/requests").cloned().unwrap_or_else(|| json!({}))})
            });
            st["ready"] = json!(ready);
            st
        })
        .collect();
    json!(statuses)
}

fn conditions(pod: &Value, ready: bool, now: &str) -> Value {
    let old = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let cond = |t: &str, ok: bool| {
        let status = if ok { "True" } else { "False" };
        let prev = old.iter().find(|c| c["type"] == t);
        let since = match prev {
            Some(p) if p["status"] == status => p["lastTransitionTime"].clone(),
            _ => json!(now),
        };
        json!({"type": t, "status": status, "lastProbeTime": null, "lastTransitionTime": since})
    };
    let mut list = vec![
        cond("PodReadyToStartContainers", true),
        cond("Initialized", true),
        cond("Ready", ready),
        cond("ContainersReady", ready),
        cond("PodScheduled", true),
    ];
    // A pending resize stays pending across restarts and readiness changes.
    list.extend(
        old.iter()
            .filter(|c| c["type"] == "PodResizePending" || c["type"] == "PodResizeInProgress")
            .cloned(),
    );
    json!(list)
}

pub(super) async fn run(ctx: &Ctx<'_>) {
    let cluster = ctx.cluster;
    let (pods, _) = cluster.store.list(&key("", "pods"), None);
    let (nodes, _) = cluster.store.list(&key("", "nodes"), None);
    let node_names: Vec<String> = nodes
        .iter()
        .map(|n| s(n, "/metadata/name").to_string())
        .collect();
    let now_s = rfc3339(ctx.now);
    let settings = &cluster.settings;
    for pod in pods {
        let ns = s(&pod, "/metadata/namespace").to_string();
        let name = s(&pod, "/metadata/name").to_string();
        let created = parse_time(s(&pod, "/metadata/creationTimestamp")).unwrap_or(ctx.now);
        let age = ctx.now.duration_since(created).as_secs_f64();
        if deleting(&pod) {
            let grace = i(&pod, "/metadata/deletionGracePeriodSeconds");
            let deadline = parse_time(s(&pod, "/metadata/deletionTimestamp")).unwrap_or(ctx.now);
            let started = deadline
                .checked_sub(jiff::SignedDuration::from_secs(grace))
                .unwrap_or(deadline);
            let elapsed = ctx.now.duration_since(started).as_secs_f64();
            let needed = settings.pod_termination.as_secs_f64().min(grace as f64);
            if grace > 0 && elapsed >= needed {
                ctx.delete("", "pods", &pod, Some(0), "kubelet");
            }
            continue;
        }
        if s(&pod, "/spec/nodeName").is_empty() {
            if node_names.is_empty() {
                continue;
            }
            let node =
                node_names[(fnv1a(name.as_bytes()) % node_names.len() as u64) as usize].clone();
            let r = cluster.store.mutate(&key("", "pods"), &ns, &name, "", |cur| {
                let mut new = (**cur).clone();
                new["spec"]["nodeName"] = json!(node);
                if let Some(st) = new.get_mut("status").and_then(Value::as_object_mut) {
                    st.insert("conditions".into(), json!([{"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now_s}]));
                }
                Ok(Mutation::Replace(new))
            });
            log_conflict(r.err());
            continue;
        }
        let phase = s(&pod, "/status/phase");
        if phase == "Pending" && age >= settings.pod_start.as_secs_f64() {
            let node_idx = node_names
                .iter()
                .position(|n| n == s(&pod, "/spec/nodeName"))
                .unwrap_or(0);
            let ip_n = fnv1a(s(&pod, "/metadata/uid").as_bytes());
            let mut status = pod.get("status").cloned().unwrap_or_else(|| json!({}));
            status["phase"] = json!("Running");
            status["hostIP"] = json!(format!("10.0.0.{}", node_idx + 10));
            status["podIP"] = json!(format!("10.244.{}.{}", node_idx, 2 + ip_n % 250));
            status["podIPs"] = json!([{"ip": status["podIP"].clone()}]);
            status["startTime"] = json!(now_s);
            status["containerStatuses"] = container_statuses(&pod, &now_s, false, None);
            status["conditions"] = conditions(&pod, false, &now_s);
            ctx.write_status("", "pods", &pod, status, "kubelet").await;
            continue;
        }
        if phase == "Running" && !pod_ready(&pod) {
            // Ready `pod_ready` after the latest container (re)start.
            let latest_start = pod
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .and_then(|a| {
                    a.iter()
                        .filter_map(|c| {
                            c.pointer("/state/running/startedAt")
                                .and_then(Value::as_str)
                                .and_then(parse_time)
                        })
                        .max()
                })
                .unwrap_or(created);
            if ctx.now.duration_since(latest_start).as_secs_f64()
                >= settings.pod_ready.as_secs_f64()
            {
                let mut status = pod["status"].clone();
                status["containerStatuses"] = container_statuses(
                    &pod,
                    &now_s,
                    true,
                    pod.pointer("/status/containerStatuses"),
                );
                status["conditions"] = conditions(&pod, true, &now_s);
                ctx.write_status("", "pods", &pod, status, "kubelet").await;
            }
        }
    }
    retry_deferred_resizes(ctx).await;
}

/// Every tick, the kubelet takes its `Deferred` resizes again (the real one does when a pod is
/// removed or resized, and every 3 minutes) in its order: resizes that ask for no more first,
/// then higher `spec.priority`, then Guaranteed pods, then the longest deferred. Each decision
/// sees the allocations the earlier ones made, so two deferred pods never both take the same
/// freed room.
async fn retry_deferred_resizes(ctx: &Ctx<'_>) {
    let cluster = ctx.cluster;
    let (pods, _) = cluster.store.list(&key("", "pods"), None);
    let mut pods: Vec<Value> = pods.iter().map(|p| (**p).clone()).collect();
    let mut deferred: Vec<usize> = (0..pods.len())
        .filter(|&n| defaults::resize_pending_reason(&pods[n]) == Some("Deferred"))
        .filter(|&n| !deleting(&pods[n]))
        .collect();
    if deferred.is_empty() {
        return;
    }
    let since = |p: &Value| {
        p.pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == "PodResizePending"))
            .and_then(|c| c["lastTransitionTime"].as_str())
            .and_then(parse_time)
    };
    deferred.sort_by_key(|&n| {
        let p = &pods[n];
        (
            defaults::resize_increases_requests(p),
            std::cmp::Reverse(i(p, "/spec/priority")),
            defaults::qos_class(p) != "Guaranteed",
            since(p),
            s(p, "/metadata/name").to_owned(),
        )
    });
    let now_s = rfc3339(ctx.now);
    for n in deferred {
        let Some(node) = cluster
            .store
            .get(&key("", "nodes"), "", s(&pods[n], "/spec/nodeName"))
        else {
            continue;
        };
        let room = defaults::NodeRoom::for_pod(&node, &pods, &pods[n]);
        let mut settled = pods[n].clone();
        defaults::settle_resize(&mut settled, Some(&room), &now_s);
        if settled != pods[n] {
            ctx.write_status("", "pods", &pods[n], settled["status"].clone(), "kubelet")
                .await;
            pods[n] = settled;
        }
    }
}

/// The container is `OOMKilled` and restarted at once: restartCount+1, lastState.terminated
/// reason `OOMKilled`, not ready until `pod_ready` after the restart.
pub(super) async fn oom_kill(ctx: &Ctx<'_>, pod: &Value, container: &str) {
    let now_s = rfc3339(ctx.now);
    let mut status = pod["status"].clone();
    let Some(statuses) = status
        .get_mut("containerStatuses")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in statuses.iter_mut().filter(|c| c["name"] == container) {
        let started = c
            .pointer("/state/running/startedAt")
            .cloned()
            .unwrap_or_else(|| json!(now_s));
        c["lastState"] = json!({"terminated": {"exitCode": 137, "reason": "OOMKilled", "startedAt": started, "finishedAt": now_s,
            "containerID": c["containerID"].clone()}});
        c["restartCount"] = json!(c["restartCount"].as_i64().unwrap_or(0) + 1);
        c["state"] = json!({"running": {"startedAt": now_s}});
        c["ready"] = json!(false);
    }
    status["conditions"] = conditions(pod, false, &now_s);
    ctx.write_status("", "pods", pod, status, "kubelet").await;
    ctx.event(
        pod,
        "OOMKilling",
        &format!("Container {container} was OOM killed (memory limit exceeded)"),
        "kubelet",
    );
}
