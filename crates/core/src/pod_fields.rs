//! What the services keep of the pods they cache. hpa-plus, the recommender and the updater
//! watch every pod of the namespaces they serve and hold them for as long as they live; tenants
//! write those pods, and an annotation of 256 KiB, an environment or a command line of a
//! megabyte, or a volume list kept per pod would set the size of the services' heaps. So a
//! cached pod holds what the decisions read, no more ([`keep_read_fields`]), and a pod that
//! still holds more than [`POD_BUDGET`] is left out ([`leave_out_over_budget`]).
//!
//! Kept, and who reads it:
//! * `metadata.name`, `namespace`, `uid`, `resourceVersion`: the caches' keys, the updater's
//!   memory of its evictions and resizes, and the object reference of its Events;
//! * `metadata.creationTimestamp`: hpa-plus's measured start-up time (`predictive`);
//! * `metadata.labels`: selectors (hpa-plus's targets, VPAs:
//!   [`crate::vertical::controlling::Candidate::selects`]) and the `pod-template-hash` of an
//!   unseen ReplicaSet ([`crate::vertical::controlling::top_controller`]);
//! * the controller `ownerReference`, alone: the owner walks and the updater's replica groups
//!   read no other ([`crate::vertical::controlling::controller_ref`]);
//! * `metadata.deletionTimestamp`: the updater leaves a pod being deleted, hpa-plus does not
//!   count it;
//! * the annotations the caller names, in a map that stays present (emptied) when the pod has
//!   one: the admission patch, which the updater's resize reuses, adds `/metadata/annotations`
//!   only to a pod without it ([`crate::vertical::admission::admission_pod`]);
//! * `name`, `resources` and `restartPolicy` (a native sidecar) of each container and init
//!   container: requests, limits and OOM kills
//!   ([`crate::vertical::priority::PodSnapshot::from_pod`], [`crate::vertical::oom`],
//!   [`crate::vertical::joint_sizing`], [`crate::vertical::node_fit`], hpa-plus's resource
//!   metrics);
//! * the pod-level `spec.resources` and `spec.overhead`: hpa-plus's resource metrics;
//! * `status`, whole: phase, conditions, start time and container statuses are read, and the
//!   kubelet writes and bounds it (a termination message is at most 4 KiB a container).
//!
//! Dropped: `managedFields`, finalizers and the rest of the metadata, every other field of a
//! container (command, args, env, probes, volume mounts, …) and the rest of the spec (volumes,
//! affinity, tolerations, ephemeral containers, …).
//!
//! What is kept still grows with what a tenant writes: a megabyte of labels (the API server
//! bounds each, not their number), thousands of containers, hundreds of extended resources a
//! container, or a named annotation of 256 KiB. [`POD_BUDGET`] bounds it; a pod past it is cut
//! to its identity, which no selector, owner walk or decision reads as a workload's pod, so it
//! counts for no autoscaler. Selectors and owners stay within a namespace, so only the tenant's
//! own autoscalers miss it; the watch reports it (`plimsoll_runtime::watch::Watch::over_budget`).

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::cut_down;
use crate::vertical::controlling;

/// Cuts `pod` down to what the decisions read (see the module docs), keeping the annotations
/// whose key `keep_annotation` accepts.
pub fn keep_read_fields(pod: &mut Pod, keep_annotation: fn(&str) -> bool) {
    let meta = &mut pod.metadata;
    let controller = controlling::controller_ref(meta).map(|o| vec![o.clone()]);
    pod.metadata = ObjectMeta {
        labels: meta.labels.take(),
        owner_references: controller,
        creation_timestamp: meta.creation_timestamp.take(),
        deletion_timestamp: meta.deletion_timestamp.take(),
        annotations: cut_down::annotations(meta, keep_annotation),
        ..cut_down::identity(meta)
    };
    pod.spec = pod.spec.take().map(|spec| PodSpec {
        containers: spec.containers.into_iter().map(container_fields).collect(),
        init_containers: spec
            .init_containers
            .map(|list| list.into_iter().map(container_fields).collect()),
        resources: spec.resources,
        overhead: spec.overhead,
        ..PodSpec::default()
    });
}

/// The most a pod cut down by [`keep_read_fields`] may hold of what its writer wrote: its
/// metadata and spec, in bytes of JSON (the status, which the kubelet writes, is not counted).
/// A large real pod (forty labels, ten containers with four resources each, the VPA
/// annotations) holds under 8 KiB; a pod past the budget costs at most this much, not the
/// 1.5 MiB of labels the API server would store.
pub const POD_BUDGET: usize = 32 * 1024;

/// Leaves out a pod cut down by [`keep_read_fields`] that holds more than [`POD_BUDGET`]: cuts
/// it to its identity and returns how many bytes it held; `None` (and `pod` unchanged) within
/// the budget.
pub fn leave_out_over_budget(pod: &mut Pod) -> Option<usize> {
    let held = cut_down::json_len(&pod.metadata) + pod.spec.as_ref().map_or(0, cut_down::json_len);
    (held > POD_BUDGET).then(|| {
        *pod = Pod {
            metadata: cut_down::identity(&mut pod.metadata),
            spec: None,
            status: None,
        };
        held
    })
}

/// Whether `pod` was left out by [`leave_out_over_budget`]: it has no spec, as no pod the API
/// server serves does.
pub fn is_left_out(pod: &Pod) -> bool {
    pod.spec.is_none()
}

fn container_fields(c: Container) -> Container {
    Container {
        name: c.name,
        resources: c.resources,
        restart_policy: c.restart_policy,
        ..Container::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vertical::admission::admission_pod;
    use crate::vertical::controlling::NoOwners;
    use crate::vertical::priority::{PodSnapshot, snapshot_annotation};
    use crate::vertical::{node_fit, oom};
    use serde_json::json;
    use std::collections::BTreeMap;

    const MIB: usize = 1 << 20;

    /// A pod as a hostile tenant may write it, with everything the decisions read: an OOM kill,
    /// an in-place resize, a native sidecar, the webhook's annotations.
    fn fat_pod() -> Pod {
        let big = "x".repeat(MIB);
        let fields: serde_json::Map<String, serde_json::Value> = (0..2_000)
            .map(|i| (format!("f:label-{i}"), json!({})))
            .collect();
        let env: Vec<_> = (0..100)
            .map(|i| json!({"name": format!("E{i}"), "value": "y".repeat(10_000)}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {
                "name": "web-1", "namespace": "shop", "uid": "u-1", "resourceVersion": "42",
                "generateName": "web-", "finalizers": ["example.com/hold"],
                "labels": {"app": "web", "pod-template-hash": "5d8f"},
                "annotations": {
                    "blob": big,
                    "vpaObservedContainers": "app, sidecar",
                    "vpaCpuStartupBoost/app": "{\"requests\":{\"cpu\":\"100m\"}}",
                },
                "ownerReferences": [
                    {"apiVersion": "example.com/v1", "kind": "Hold", "name": "h", "uid": "h"},
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f",
                     "uid": "rs", "controller": true},
                ],
                "managedFields": [{"manager": "kubectl", "operation": "Update",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": fields}}}],
            },
            "spec": {
                "containers": [{
                    "name": "app", "image": "web:1", "command": ["sh", "-c", big],
                    "env": env,
                    "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                                  "limits": {"memory": "512Mi"}},
                    "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
                    "livenessProbe": {"exec": {"command": ["true"]}},
                }],
                "initContainers": [
                    {"name": "sidecar", "restartPolicy": "Always",
                     "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}},
                    {"name": "setup", "args": ["x".repeat(10_000)],
                     "resources": {"requests": {"cpu": "1"}}},
                ],
                "volumes": [{"name": "v", "configMap": {"name": "c", "items": [
                    {"key": "k", "path": "y".repeat(4_000)}]}}],
                "nodeSelector": {"zone": "a"},
                "tolerations": [{"key": "k", "operator": "Exists"}],
            },
            "status": {
                "phase": "Running",
                "startTime": "2026-01-01T00:00:00Z",
                "conditions": [
                    {"type": "Ready", "status": "True",
                     "lastTransitionTime": "2026-01-01T00:01:00Z"},
                    {"type": "PodResizePending", "status": "True", "reason": "Deferred",
                     "message": "node is full"},
                ],
                "containerStatuses": [{
                    "name": "app", "ready": true, "restartCount": 1, "image": "web:1",
                    "imageID": "", "resources": {"requests": {"cpu": "200m", "memory": "300Mi"}},
                    "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                        "startedAt": "2026-01-01T00:00:00Z",
                        "finishedAt": "2026-01-01T00:00:30Z"}},
                }],
                "initContainerStatuses": [{
                    "name": "sidecar", "ready": true, "restartCount": 0, "image": "s",
                    "imageID": "",
                }],
            },
        }))
        .unwrap()
    }

    fn size(pod: &Pod) -> usize {
        serde_json::to_vec(pod).unwrap().len()
    }

    /// Everything the decisions read of a pod, as they read it.
    fn readings(pod: &Pod) -> impl PartialEq + std::fmt::Debug {
        (
            admission_pod(pod),
            oom::status_ooms(pod),
            oom::memory_request(pod, "app"),
            node_fit::other_requests(&[pod], &[]),
            controlling::top_controller(&pod.metadata, "shop", &NoOwners),
            pod.metadata.labels.clone(),
            (pod.metadata.name.clone(), pod.metadata.namespace.clone()),
            (
                pod.metadata.uid.clone(),
                pod.metadata.resource_version.clone(),
            ),
            pod.metadata.deletion_timestamp.clone(),
            pod.status.clone(),
        )
    }

    #[test]
    fn a_fat_pod_comes_out_small_and_reads_the_same() {
        let fat = fat_pod();
        let mut trimmed = fat.clone();
        keep_read_fields(&mut trimmed, snapshot_annotation);
        assert!(size(&fat) > 2 * MIB, "{}", size(&fat));
        assert!(size(&trimmed) < 4 * 1024, "{}", size(&trimmed));
        assert_eq!(readings(&trimmed), readings(&fat));
        assert_eq!(
            PodSnapshot::from_pod(&trimmed),
            PodSnapshot::from_pod(&fat),
            "the updater's snapshot"
        );
        let meta = &trimmed.metadata;
        assert_eq!(meta.managed_fields, None);
        assert_eq!(meta.finalizers, None);
        let kept: Vec<_> = meta.annotations.iter().flatten().map(|(k, _)| k).collect();
        assert_eq!(kept, ["vpaCpuStartupBoost/app", "vpaObservedContainers"]);
        let owners = meta.owner_references.as_deref().unwrap_or_default();
        assert_eq!(owners.len(), 1, "the controller only");
        let spec = trimmed.spec.as_ref().unwrap();
        assert_eq!(spec.volumes, None);
        assert_eq!(spec.containers[0].env, None);
        assert_eq!(spec.containers[0].command, None);
    }

    #[test]
    fn without_annotations_kept_the_map_stays_when_the_pod_had_one() {
        let mut pod = fat_pod();
        keep_read_fields(&mut pod, |_| false);
        assert_eq!(pod.metadata.annotations, Some(BTreeMap::new()));
        assert_eq!(
            admission_pod(&pod).map(|p| p.has_annotations),
            Ok(true),
            "a patch must not recreate the map"
        );
        let mut bare = Pod::default();
        keep_read_fields(&mut bare, |_| false);
        assert_eq!(bare, Pod::default());
    }

    /// A pod with `labels` labels of 60 bytes and `containers` containers of four resources.
    fn pod_of(labels: usize, containers: usize) -> Pod {
        let labels: serde_json::Map<String, serde_json::Value> = (0..labels)
            .map(|i| {
                let key = format!("team.example.com/label-{i:04}");
                (key, json!("v".repeat(30)))
            })
            .collect();
        let containers: Vec<_> = (0..containers)
            .map(|i| {
                json!({"name": format!("container-{i}"), "image": "app:1",
                    "resources": {
                        "requests": {"cpu": "250m", "memory": "256Mi",
                                     "ephemeral-storage": "1Gi", "example.com/gpu": "1"},
                        "limits": {"memory": "512Mi", "example.com/gpu": "1"}}})
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1",
                "resourceVersion": "42", "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": labels,
                "annotations": {"vpaObservedContainers": "container-0, container-1",
                    "vpaUpdates": "Pod resources updated by web: container 0: cpu request"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web-5d8f", "uid": "rs", "controller": true}]},
            "spec": {"containers": containers},
            "status": {"phase": "Running"},
        }))
        .unwrap()
    }

    fn held(pod: &Pod) -> usize {
        cut_down::json_len(&pod.metadata) + pod.spec.as_ref().map_or(0, cut_down::json_len)
    }

    #[test]
    fn a_large_real_pod_holds_under_8_kib_and_is_kept() {
        let mut pod = pod_of(40, 10);
        keep_read_fields(&mut pod, snapshot_annotation);
        assert!(held(&pod) < 8 * 1024, "{}", held(&pod));
        let kept = pod.clone();
        assert_eq!(leave_out_over_budget(&mut pod), None);
        assert_eq!(pod, kept);
        assert!(!is_left_out(&pod));
    }

    #[test]
    fn what_is_dropped_does_not_count_against_the_budget() {
        // Megabytes of environment, command line, managed fields and unread annotations.
        let mut pod = fat_pod();
        keep_read_fields(&mut pod, snapshot_annotation);
        assert_eq!(leave_out_over_budget(&mut pod), None);
        assert!(!is_left_out(&pod));
    }

    #[test]
    fn a_pod_past_the_budget_keeps_its_identity_only_and_counts_for_no_workload() {
        for (labels, containers) in [(1_000, 1), (1, 200)] {
            let whole = pod_of(labels, containers);
            let mut pod = whole.clone();
            keep_read_fields(&mut pod, snapshot_annotation);
            let before = held(&pod);
            assert!(
                before > POD_BUDGET,
                "{labels} labels, {containers} containers"
            );
            assert_eq!(leave_out_over_budget(&mut pod), Some(before));
            assert!(is_left_out(&pod));
            assert_eq!(
                pod.metadata,
                ObjectMeta {
                    name: Some("web-1".into()),
                    namespace: Some("shop".into()),
                    uid: Some("u-1".into()),
                    resource_version: Some("42".into()),
                    ..ObjectMeta::default()
                }
            );
            assert_eq!(pod.status, None);
            assert!(
                controlling::top_controller(&whole.metadata, "shop", &NoOwners).is_some(),
                "the whole pod has a workload"
            );
            assert_eq!(
                controlling::top_controller(&pod.metadata, "shop", &NoOwners),
                None
            );
        }
    }

    #[test]
    fn one_byte_over_the_budget_is_left_out() {
        // Grow one label's value until the pod holds exactly the budget, then one byte more.
        let mut pod = pod_of(1, 1);
        keep_read_fields(&mut pod, |_| false);
        let room = POD_BUDGET - held(&pod);
        let fill = |pod: &mut Pod, value: String| {
            pod.metadata
                .labels
                .get_or_insert_default()
                .insert("fill".into(), value);
        };
        fill(&mut pod, String::new());
        let base = held(&pod);
        fill(&mut pod, "x".repeat(POD_BUDGET - base));
        assert_eq!(held(&pod), POD_BUDGET, "room was {room}");
        let mut at = pod.clone();
        assert_eq!(leave_out_over_budget(&mut at), None);
        if let Some(fill) = pod.metadata.labels.get_or_insert_default().get_mut("fill") {
            fill.push('x');
        }
        assert_eq!(leave_out_over_budget(&mut pod), Some(POD_BUDGET + 1));
    }

    /// What the cut costs per watch event beside the decode of the same event (`just
    /// bench-pod-cut`; docs/benchmarks.md). The pod is a typical one as the API server sends
    /// it: 10 labels, two containers with environment and probes, managed fields, a status.
    #[test]
    #[ignore = "benchmark: run with --ignored --nocapture (just bench-pod-cut)"]
    fn bench_pod_cut() {
        use std::hint::black_box;
        use std::time::Instant;
        let mut value = serde_json::to_value(pod_of(10, 2)).unwrap();
        let container = |name: &str| {
            json!({"name": name, "image": "registry.example.com/shop/web:1.42.0",
                "env": ((0..12).map(|i| json!({"name": format!("SETTING_{i}"),
                    "value": "a-typical-value"})).collect::<Vec<_>>()),
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
                "livenessProbe": {"httpGet": {"path": "/live", "port": 8080}},
                "volumeMounts": [{"name": "config", "mountPath": "/etc/web"}],
                "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                              "limits": {"memory": "512Mi"}}})
        };
        value["spec"]["containers"] = json!([container("web"), container("proxy")]);
        value["spec"]["volumes"] = json!([{"name": "config", "configMap": {"name": "web"}}]);
        value["metadata"]["managedFields"] = json!([{"manager": "kube-controller-manager",
            "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": ((0..10).map(|i|
                (format!("f:team.example.com/label-{i:04}"), json!({})))
                .collect::<serde_json::Map<_, _>>())}}}]);
        value["status"] = json!({"phase": "Running", "podIP": "10.0.0.7",
            "startTime": "2026-01-01T00:00:00Z",
            "conditions": (["Initialized", "Ready", "ContainersReady", "PodScheduled"].iter()
                .map(|t| json!({"type": t, "status": "True",
                    "lastTransitionTime": "2026-01-01T00:01:00Z"})).collect::<Vec<_>>()),
            "containerStatuses": (["web", "proxy"].iter().map(|n| json!({"name": n,
                "ready": true, "restartCount": 0, "image": "registry.example.com/shop/web:1.42.0",
                "imageID": "sha256:0123456789abcdef", "started": true,
                "state": {"running": {"startedAt": "2026-01-01T00:00:30Z"}}})).collect::<Vec<_>>())});
        let bytes = serde_json::to_vec(&value).unwrap();
        let rounds = 20_000u32;
        let time = |f: &mut dyn FnMut()| {
            let start = Instant::now();
            for _ in 0..rounds {
                f();
            }
            start.elapsed() / rounds
        };
        let decode = time(&mut || {
            black_box(serde_json::from_slice::<Pod>(black_box(&bytes)).unwrap());
        });
        let pod: Pod = serde_json::from_slice(&bytes).unwrap();
        let trim = time(&mut || {
            let mut p = pod.clone();
            keep_read_fields(&mut p, snapshot_annotation);
            black_box(p);
        });
        let clone = time(&mut || {
            black_box(pod.clone());
        });
        let mut trimmed = pod.clone();
        keep_read_fields(&mut trimmed, snapshot_annotation);
        let budget = time(&mut || {
            black_box(leave_out_over_budget(black_box(&mut trimmed)));
        });
        println!(
            "pod of {} bytes as sent, {} held after the trim; per event: decode {decode:?}, \
             trim {:?}, budget check {budget:?} ({:.1} % of the decode)",
            bytes.len(),
            held(&trimmed),
            trim.saturating_sub(clone),
            100.0 * budget.as_secs_f64() / decode.as_secs_f64()
        );
    }
}
