//! Type defaults and type-specific rules kube-apiserver applies to built-in kinds: defaulting
//! (`SetDefaults_*` in k8s.io/kubernetes/pkg/apis/*/v1/defaults.go), `LimitRange` admission,
//! pod `QoS` class, pod spec immutability, the pods/resize subresource and CRD status.

use serde_json::{Map, Value, json};

use crate::Cluster;
use crate::error::ApiError;
use crate::registry::ResourceDef;
use crate::values::parse_quantity;

fn set_default(obj: &mut Map<String, Value>, key: &str, v: Value) {
    obj.entry(key.to_string()).or_insert(v);
}

/// Applies the built-in defaults of `def`'s kind to `obj` in place.
pub fn builtin_defaults(def: &ResourceDef, obj: &mut Value) {
    let name = obj
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::Null);
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "namespaces") => {
            let spec = root.entry("spec").or_insert_with(|| json!({}));
            if let Some(s) = spec.as_object_mut() {
                set_default(s, "finalizers", json!(["kubernetes"]));
            }
            set_default(root, "status", json!({"phase": "Active"}));
            if let Some(m) = root.get_mut("metadata").and_then(Value::as_object_mut) {
                let labels = m.entry("labels").or_insert_with(|| json!({}));
                if let Some(l) = labels.as_object_mut() {
                    l.insert("kubernetes.io/metadata.name".into(), name);
                }
            }
        }
        ("", "pods") => {
            if let Some(spec) = root.get_mut("spec").and_then(Value::as_object_mut) {
                pod_spec_defaults(spec);
            }
        }
        ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets") => {
            let Some(spec) = root.get_mut("spec").and_then(Value::as_object_mut) else {
                return;
            };
            if def.plural != "daemonsets" {
                set_default(spec, "replicas", json!(1));
            }
            match def.plural.as_str() {
                "deployments" => {
                    set_default(spec, "strategy", json!({}));
                    if let Some(st) = spec.get_mut("strategy").and_then(Value::as_object_mut) {
                        set_default(st, "type", json!("RollingUpdate"));
                    }
                    if let Some(st) = spec.get_mut("strategy").and_then(Value::as_object_mut)
                        && st.get("type").and_then(Value::as_str) == Some("RollingUpdate")
                    {
                        let ru = st.entry("rollingUpdate").or_insert_with(|| json!({}));
                        if let Some(ru) = ru.as_object_mut() {
                            set_default(ru, "maxSurge", json!("25%"));
                            set_default(ru, "maxUnavailable", json!("25%"));
                        }
                    }
                    set_default(spec, "revisionHistoryLimit", json!(10));
                    set_default(spec, "progressDeadlineSeconds", json!(600));
                }
                "statefulsets" => {
                    set_default(spec, "podManagementPolicy", json!("OrderedReady"));
                    set_default(
                        spec,
                        "updateStrategy",
                        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
                    );
                    set_default(spec, "revisionHistoryLimit", json!(10));
                }
                _ => {}
            }
            if let Some(pod_spec) = spec
                .get_mut("template")
                .and_then(|t| t.get_mut("spec"))
                .and_then(Value::as_object_mut)
            {
                pod_spec_defaults(pod_spec);
            }
        }
        ("autoscaling", "horizontalpodautoscalers") => {
            let Some(spec) = root.get_mut("spec").and_then(Value::as_object_mut) else {
                return;
            };
            set_default(spec, "minReplicas", json!(1));
            if spec
                .get("metrics")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                spec.insert(
                    "metrics".into(),
                    json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]),
                );
            }
        }
        ("", "services") => {
            let spec = root.entry("spec").or_insert_with(|| json!({}));
            if let Some(s) = spec.as_object_mut() {
                set_default(s, "type", json!("ClusterIP"));
                set_default(s, "sessionAffinity", json!("None"));
            }
        }
        ("", "secrets") => set_default(root, "type", json!("Opaque")),
        _ => {}
    }
}

fn pod_spec_defaults(spec: &mut Map<String, Value>) {
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "securityContext", json!({}));
    for list in ["containers", "initContainers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
            let tag_latest = !image.contains('@')
                && image
                    .rsplit('/')
                    .next()
                    .is_none_or(|last| !last.contains(':') || last.ends_with(":latest"));
            set_default(
                c,
                "imagePullPolicy",
                json!(if tag_latest { "Always" } else { "IfNotPresent" }),
            );
            set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
            set_default(c, "terminationMessagePolicy", json!("File"));
            let res = c.entry("resources").or_insert_with(|| json!({}));
            // Requests default to limits when only limits are given.
            if let Some(limits) = res.get("limits").and_then(Value::as_object).cloned()
                && let Some(r) = res.as_object_mut()
            {
                let req = r.entry("requests").or_insert_with(|| json!({}));
                if let Some(req) = req.as_object_mut() {
                    for (k, v) in limits {
                        req.entry(k).or_insert(v);
                    }
                }
            }
        }
    }
}

/// `LimitRanger` admission: fills absent container limits from `default` and requests from
/// `defaultRequest` (which itself defaults to `default`) of every `Container` limit in `ns`.
pub fn limit_range_defaults(cluster: &Cluster, ns: &str, pod: &mut Value) {
    let (ranges, _) = cluster
        .store
        .list(&(String::new(), "limitranges".into()), Some(ns));
    for lr in ranges {
        let Some(limits) = lr.pointer("/spec/limits").and_then(Value::as_array) else {
            continue;
        };
        for item in limits
            .iter()
            .filter(|i| i.get("type").and_then(Value::as_str) == Some("Container"))
        {
            let default = item
                .get("default")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let mut default_request = item
                .get("defaultRequest")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            for (k, v) in &default {
                default_request
                    .entry(k.clone())
                    .or_insert_with(|| v.clone());
            }
            let Some(containers) = pod
                .pointer_mut("/spec/containers")
                .and_then(Value::as_array_mut)
            else {
                continue;
            };
            for c in containers.iter_mut() {
                if !c.get("resources").is_some_and(Value::is_object) {
                    c["resources"] = json!({});
                }
                for (field, defaults) in [("limits", &default), ("requests", &default_request)] {
                    if defaults.is_empty() {
                        continue;
                    }
                    if !c["resources"].get(field).is_some_and(Value::is_object) {
                        c["resources"][field] = json!({});
                    }
                    if let Some(m) = c["resources"][field].as_object_mut() {
                        for (k, v) in defaults {
                            m.entry(k.clone()).or_insert_with(|| v.clone());
                        }
                    }
                }
            }
        }
    }
}

/// The `QoS` class of a pod (Guaranteed, Burstable, `BestEffort`).
pub fn qos_class(pod: &Value) -> &'static str {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut any = false;
    let mut guaranteed = !containers.is_empty();
    for c in &containers {
        let req = c.pointer("/resources/requests").and_then(Value::as_object);
        let lim = c.pointer("/resources/limits").and_then(Value::as_object);
        if req.is_some_and(|r| !r.is_empty()) || lim.is_some_and(|l| !l.is_empty()) {
            any = true;
        }
        for r in ["cpu", "memory"] {
            let l = lim.and_then(|l| l.get(r));
            if l.is_none() || req.and_then(|q| q.get(r)) != l {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// A new pod's status: Pending, with its `QoS` class.
pub fn pod_create_status(pod: &mut Value) {
    let qos = qos_class(pod);
    pod["status"] = json!({"phase": "Pending", "qosClass": qos});
}

/// Status of a CRD the sim accepts at once: names accepted, established.
pub fn crd_status(crd: &Value) -> Value {
    let storage = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|v| v.get("name"))
        .cloned()
        .unwrap_or(Value::Null);
    json!({
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found"},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
        ],
        "acceptedNames": crd.pointer("/spec/names").cloned().unwrap_or_else(|| json!({})),
        "storedVersions": [storage],
    })
}

/// Strips the fields of a pod spec that an update may change.
fn immutable_part(spec: &Value) -> Value {
    let mut s = spec.clone();
    if let Some(m) = s.as_object_mut() {
        for f in [
            "activeDeadlineSeconds",
            "tolerations",
            "terminationGracePeriodSeconds",
            "schedulingGates",
            "nodeName",
        ] {
            m.remove(f);
        }
        for list in ["containers", "initContainers"] {
            if let Some(cs) = m.get_mut(list).and_then(Value::as_array_mut) {
                for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                    c.remove("image");
                }
            }
        }
    }
    s
}

/// Rejects pod updates that change immutable spec fields (as pod validation does);
/// `spec.nodeName` may go from unset to set (what a binding does).
pub fn check_pod_update(current: &Value, new: &Value) -> Result<(), ApiError> {
    let (Some(old_spec), Some(new_spec)) = (current.get("spec"), new.get("spec")) else {
        return Ok(());
    };
    let old_node = old_spec
        .get("nodeName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let new_node = new_spec
        .get("nodeName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let node_ok = old_node == new_node || old_node.is_empty();
    if immutable_part(old_spec) != immutable_part(new_spec) || !node_ok {
        let name = current
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return Err(ApiError::invalid(format!(
            "Pod \"{name}\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
        ))
        .with_details(json!({"name": name, "kind": "Pod", "causes": [{"reason": "FieldValueForbidden", "field": "spec"}]})));
    }
    Ok(())
}

/// What the kubelet of a pod's node has handed out to the node's other pods, for deciding a
/// resize the way the kubelet's allocation manager does.
#[derive(Clone, Debug, Default)]
pub struct NodeRoom {
    /// The node's `status.allocatable`.
    pub allocatable: Value,
    /// The CPU (millicores) and memory (bytes) requests allocated to the node's other active
    /// pods (see [`allocated_requests`]).
    pub used: Requests,
}

/// A pod's total CPU (millicores) and memory (bytes) requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Requests {
    pub cpu_millis: i64,
    pub memory: i64,
}

impl Requests {
    fn add(self, other: Requests) -> Requests {
        Requests {
            cpu_millis: self.cpu_millis.saturating_add(other.cpu_millis),
            memory: self.memory.saturating_add(other.memory),
        }
    }

    /// The sum of one `requests`-like map per container (missing resources count 0).
    fn sum<'a>(maps: impl Iterator<Item = Option<&'a Value>>) -> Requests {
        let amount = |m: Option<&Value>, r: &str, scale: f64| -> i64 {
            m.and_then(|m| m.get(r))
                .and_then(Value::as_str)
                .and_then(parse_quantity)
                .map_or(0, |q| (q * scale).round() as i64)
        };
        maps.fold(Requests::default(), |acc, m| {
            acc.add(Requests {
                cpu_millis: amount(m, "cpu", 1000.0),
                memory: amount(m, "memory", 1.0),
            })
        })
    }
}

impl NodeRoom {
    /// The room for pod `pod` on its node `node`: the allocations of every other pod bound to
    /// that node that has not finished (`Succeeded`/`Failed`), terminating pods included (their
    /// containers still run), as the kubelet's active pods.
    pub fn for_pod<'a>(
        node: &Value,
        pods: impl IntoIterator<Item = &'a Value>,
        pod: &Value,
    ) -> NodeRoom {
        let node_name = node.pointer("/metadata/name").and_then(Value::as_str);
        let uid = pod.pointer("/metadata/uid").and_then(Value::as_str);
        let used = pods
            .into_iter()
            .filter(|p| p.pointer("/spec/nodeName").and_then(Value::as_str) == node_name)
            .filter(|p| p.pointer("/metadata/uid").and_then(Value::as_str) != uid)
            .filter(|p| {
                !matches!(
                    p.pointer("/status/phase").and_then(Value::as_str),
                    Some("Succeeded" | "Failed")
                )
            })
            .map(allocated_requests)
            .fold(Requests::default(), Requests::add);
        NodeRoom {
            allocatable: node
                .pointer("/status/allocatable")
                .cloned()
                .unwrap_or_else(|| json!({})),
            used,
        }
    }
}

/// The requests the kubelet has allocated to a pod: per container, its status'
/// `allocatedResources` once the kubelet reported them, else (a pod not started yet) its spec.
pub fn allocated_requests(pod: &Value) -> Requests {
    let statuses = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array);
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    Requests::sum(containers.iter().map(|c| {
        statuses
            .and_then(|ss| ss.iter().find(|s| s.get("name") == c.get("name")))
            .and_then(|s| s.get("allocatedResources"))
            .or_else(|| c.pointer("/resources/requests"))
    }))
}

/// The requests a pod's spec asks for (what a resize wants allocated).
fn desired_requests(pod: &Value) -> Requests {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    Requests::sum(containers.iter().map(|c| c.pointer("/resources/requests")))
}

/// The pod's pending-resize reason (`Deferred`, `Infeasible`), if it has one.
pub fn resize_pending_reason(pod: &Value) -> Option<&str> {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == "PodResizePending")?
        .get("reason")
        .and_then(Value::as_str)
}

/// Whether the pod's spec asks more CPU or memory than the kubelet allocated it.
pub fn resize_increases_requests(pod: &Value) -> bool {
    let (want, have) = (desired_requests(pod), allocated_requests(pod));
    want.cpu_millis > have.cpu_millis || want.memory > have.memory
}

/// The pods/resize subresource: takes only container resources (and resizePolicy) from the
/// body, then lets the simulated kubelet decide at once ([`settle_resize`]), as the real one
/// (KEP-1287) does on its next sync.
pub fn resize_pod(
    current: &Value,
    body: &Value,
    room: Option<&NodeRoom>,
    now: &str,
) -> Result<Value, ApiError> {
    let mut new = current.clone();
    let body_containers = body
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let Some(containers) = new
        .pointer_mut("/spec/containers")
        .and_then(Value::as_array_mut)
    else {
        return Err(ApiError::invalid("pod has no containers"));
    };
    for bc in &body_containers {
        let name = bc.get("name").and_then(Value::as_str).unwrap_or_default();
        let Some(c) = containers
            .iter_mut()
            .find(|c| c.get("name").and_then(Value::as_str) == Some(name))
        else {
            return Err(ApiError::invalid(format!(
                "Pod is invalid: spec.containers: Not found: {name:?}"
            )));
        };
        for f in ["resources", "resizePolicy"] {
            if let Some(v) = bc.get(f) {
                c[f] = v.clone();
            }
        }
    }
    settle_resize(&mut new, room, now);
    Ok(new)
}

/// The simulated kubelet's verdict on the resources a pod's spec asks for, as its allocation
/// manager gives it (KEP-1287, Kubernetes 1.33+), given `room` on the pod's node:
///
/// - the pod's total requests exceed the node's allocatable CPU or memory: `Infeasible`, with
///   the kubelet's message (memory checked first; CPU in millicores, memory in bytes);
/// - they fit the node but not beside what its other pods are allocated: `Deferred`, with the
///   kubelet's admission message (`Node didn't have enough resource: cpu, requested: 2000,
///   used: 7100, capacity: 7800`; CPU checked first, as the kubelet's admission does);
/// - otherwise the resize is actuated: the container statuses (`resources`,
///   `allocatedResources`) take the spec's values and any pending-resize condition goes.
///
/// A pending resize keeps the spec's new values and the statuses' old ones, with the condition
/// `PodResizePending` (reason, message; `lastTransitionTime` kept while the reason stays the
/// same). A `Deferred` resize is retried by the kubelet loop ([`crate::workload`]) until it fits.
/// Without `room` (a pod on no known node) the resize is actuated.
pub fn settle_resize(pod: &mut Value, room: Option<&NodeRoom>, now: &str) {
    let desired = desired_requests(pod);
    let verdict = room.and_then(|room| {
        infeasible_message(desired, &room.allocatable)
            .map(|m| ("Infeasible", m))
            .or_else(|| deferred_message(desired, room).map(|m| ("Deferred", m)))
    });
    match verdict {
        Some((reason, message)) => set_resize_pending(pod, reason, &message, now),
        None => actuate_resize(pod),
    }
}

fn set_resize_pending(pod: &mut Value, reason: &str, message: &str, now: &str) {
    let since = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "PodResizePending"))
        .filter(|c| c["reason"] == reason)
        .map_or_else(|| json!(now), |c| c["lastTransitionTime"].clone());
    let status = pod
        .as_object_mut()
        .map(|o| o.entry("status").or_insert_with(|| json!({})));
    if let Some(status) = status.and_then(Value::as_object_mut) {
        let mut conditions: Vec<Value> = status
            .get("conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        conditions.retain(|c| c["type"] != "PodResizePending");
        conditions.push(json!({"type": "PodResizePending", "status": "True",
            "reason": reason, "message": message, "lastProbeTime": null,
            "lastTransitionTime": since}));
        status.insert("conditions".into(), json!(conditions));
    }
}

fn actuate_resize(pod: &mut Value) {
    let resources: Vec<(String, Value)> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|c| {
            (
                c.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                c.get("resources").cloned().unwrap_or_else(|| json!({})),
            )
        })
        .collect();
    if let Some(statuses) = pod
        .pointer_mut("/status/containerStatuses")
        .and_then(Value::as_array_mut)
    {
        for s in statuses.iter_mut() {
            let name = s
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if let Some((_, r)) = resources.iter().find(|(n, _)| *n == name) {
                s["resources"] = r.clone();
                s["allocatedResources"] = r.get("requests").cloned().unwrap_or_else(|| json!({}));
            }
        }
    }
    if let Some(status) = pod.get_mut("status").and_then(Value::as_object_mut) {
        // The deprecated status.resize field: nothing is pending once actuated.
        status.remove("resize");
        if let Some(cs) = status.get_mut("conditions").and_then(Value::as_array_mut) {
            cs.retain(|c| c["type"] != "PodResizePending");
        }
    }
}

/// The node's allocatable `resource` in millicores (`scale` 1000) or bytes (`scale` 1).
fn allocatable_amount(allocatable: &Value, resource: &str, scale: f64) -> Option<i64> {
    allocatable
        .get(resource)
        .and_then(Value::as_str)
        .and_then(parse_quantity)
        .map(|q| (q * scale).round() as i64)
}

/// The kubelet's admission message when the pod's `desired` requests fit the node's allocatable
/// but not beside the other pods' allocations (its `InsufficientResourceError`), else `None`.
fn deferred_message(desired: Requests, room: &NodeRoom) -> Option<String> {
    let checks = [
        ("cpu", desired.cpu_millis, room.used.cpu_millis, 1000.0),
        ("memory", desired.memory, room.used.memory, 1.0),
    ];
    checks.into_iter().find_map(|(resource, requested, used, scale)| {
        let capacity = allocatable_amount(&room.allocatable, resource, scale)?;
        (requested > 0 && requested > capacity.saturating_sub(used)).then(|| {
            format!(
                "Node didn't have enough resource: {resource}, requested: {requested}, used: {used}, capacity: {capacity}"
            )
        })
    })
}

/// The kubelet's `Infeasible` message when the pod's `desired` requests exceed the node's
/// allocatable memory or CPU (the kubelet's wording and order), else `None`.
fn infeasible_message(desired: Requests, allocatable: &Value) -> Option<String> {
    let checks = [
        ("memory", desired.memory, 1.0),
        ("cpu", desired.cpu_millis, 1000.0),
    ];
    checks.into_iter().find_map(|(resource, requested, scale)| {
        let capacity = allocatable_amount(allocatable, resource, scale)?;
        (requested > capacity).then(|| {
            format!(
                "Node didn't have enough capacity: {resource}, requested: {requested}, capacity: {capacity}"
            )
        })
    })
}

fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name
            .as_bytes()
            .first()
            .is_some_and(u8::is_ascii_alphanumeric)
        && name
            .as_bytes()
            .last()
            .is_some_and(u8::is_ascii_alphanumeric)
}

/// The validation kube-apiserver applies that the sim enforces: object names are DNS
/// subdomains; workload selectors are required, match the template's labels and are immutable.
pub fn validate(def: &ResourceDef, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !is_dns_subdomain(name) {
        let kind = &def.kind;
        return Err(ApiError::invalid(format!(
            "{kind} \"{name}\" is invalid: metadata.name: Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        ))
        .with_details(json!({"name": name, "kind": def.kind, "causes": [{"reason": "FieldValueInvalid", "field": "metadata.name"}]})));
    }
    if def.group == "apps"
        && matches!(
            def.plural.as_str(),
            "deployments" | "replicasets" | "statefulsets" | "daemonsets"
        )
    {
        let invalid = |field: &str, msg: &str| {
            ApiError::invalid(format!("{}.apps \"{name}\" is invalid: {field}: {msg}", def.kind))
                .with_details(json!({"name": name, "group": "apps", "kind": def.kind, "causes": [{"reason": "FieldValueInvalid", "field": field, "message": msg}]}))
        };
        let selector = obj
            .pointer("/spec/selector")
            .cloned()
            .unwrap_or(Value::Null);
        let Some(sel) =
            crate::selector::LabelSelector::from_structured(&selector)?.filter(|s| !s.is_empty())
        else {
            return Err(invalid("spec.selector", "Required value"));
        };
        if !sel.matches(
            obj.pointer("/spec/template/metadata/labels")
                .and_then(Value::as_object),
        ) {
            return Err(invalid(
                "spec.template.metadata.labels",
                "Invalid value: `selector` does not match template `labels`",
            ));
        }
        if let Some(old) = old
            && old.pointer("/spec/selector") != obj.pointer("/spec/selector")
        {
            return Err(invalid(
                "spec.selector",
                "Invalid value: field is immutable",
            ));
        }
    }
    Ok(())
}

/// Gives a new Service (other than `ExternalName`) a cluster IP, as kube-apiserver's allocator
/// does: the one requested, else the lowest free address of the default service range
/// 10.96.0.0/12 from 10.96.0.2 (kube-apiserver picks at random; the sim stays deterministic).
/// The dual-stack fields get their single-stack IPv4 defaults.
pub fn allocate_cluster_ip(cluster: &Cluster, svc: &mut Value) {
    let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec.get("type").and_then(Value::as_str) == Some("ExternalName") {
        return;
    }
    let requested = spec
        .get("clusterIP")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let ip = if requested.is_empty() {
        let (services, _) = cluster
            .store
            .list(&(String::new(), "services".into()), None);
        let used: std::collections::HashSet<&str> = services
            .iter()
            .filter_map(|s| s.pointer("/spec/clusterIP").and_then(Value::as_str))
            .collect();
        let Some(ip) = (2u32..(1 << 20))
            .map(|n| format!("10.{}.{}.{}", 96 + (n >> 16), (n >> 8) & 0xff, n & 0xff))
            .find(|ip| !used.contains(ip.as_str()))
        else {
            return;
        };
        ip
    } else {
        requested
    };
    spec.insert("clusterIP".into(), json!(ip));
    set_default(spec, "clusterIPs", json!([ip]));
    set_default(spec, "ipFamilies", json!(["IPv4"]));
    set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
    set_default(spec, "internalTrafficPolicy", json!("Cluster"));
}

/// An update that leaves out a Service's allocated cluster IP keeps it (kube-apiserver's
/// `patchAllocatedValues`).
pub fn keep_cluster_ip(current: &Value, svc: &mut Value) {
    let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let omitted = spec
        .get("clusterIP")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty);
    if !omitted {
        return;
    }
    for f in ["clusterIP", "clusterIPs"] {
        if let Some(v) = current.pointer(&format!("/spec/{f}")) {
            spec.insert(f.into(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_classes() {
        // upstream: pkg/apis/core/helper/qos/qos_test.go TestComputePodQOS
        let pod = |res: Value| json!({"spec": {"containers": [{"name": "a", "resources": res}]}});
        assert_eq!(qos_class(&pod(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&pod(json!({"requests": {"cpu": "1"}}))),
            "Burstable"
        );
        let lim = json!({"cpu": "1", "memory": "1Gi"});
        assert_eq!(
            qos_class(&pod(json!({"requests": lim, "limits": lim}))),
            "Guaranteed"
        );
    }

    #[test]
    fn pod_spec_is_immutable_except_image() {
        let old = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "x", "resources": {}}]}});
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = json!("y");
        assert!(check_pod_update(&old, &new).is_ok());
        new["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "1"}});
        assert_eq!(check_pod_update(&old, &new).unwrap_err().code, 422);
    }

    #[test]
    fn validation_names_and_selectors() {
        // upstream: pkg/apis/apps/validation/validation_test.go TestValidateDeployment
        let reg = crate::registry::Registry::with_builtins();
        let deploy = reg.lookup("apps", "v1", "deployments").unwrap();
        let d = |name: &str, sel: &str, label: &str| json!({"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": sel}}, "template": {"metadata": {"labels": {"app": label}}}}});
        assert!(validate(&deploy, &d("web", "web", "web"), None).is_ok());
        assert_eq!(
            validate(&deploy, &d("Web", "web", "web"), None)
                .unwrap_err()
                .code,
            422
        );
        assert_eq!(
            validate(&deploy, &d("web", "web", "db"), None)
                .unwrap_err()
                .code,
            422
        );
        let old = d("web", "web", "web");
        let mut new = d("web", "x", "x");
        new["spec"]["template"]["metadata"]["labels"]["app"] = json!("x");
        assert!(
            validate(&deploy, &new, Some(&old))
                .unwrap_err()
                .message
                .contains("immutable")
        );
    }

    const NOW: &str = "2026-11-28T10:00:00Z";

    #[test]
    fn resize_takes_only_resources() {
        let pod = json!({"spec": {"containers": [{"name": "a", "image": "x", "resources": {}}]},
            "status": {"containerStatuses": [{"name": "a"}]}});
        let body = json!({"spec": {"containers": [{"name": "a", "image": "evil", "resources": {"requests": {"cpu": "2"}}}]}});
        let out = resize_pod(&pod, &body, None, NOW).unwrap();
        assert_eq!(out["spec"]["containers"][0]["image"], "x");
        assert_eq!(
            out["status"]["containerStatuses"][0]["allocatedResources"]["cpu"],
            "2"
        );
    }

    // KEP-1287 as the kubelet does it (the message of its `canResizePod`): the spec takes the
    // new values, the status keeps the old ones, the condition says why; a resize that fits
    // later is actuated and clears the condition.
    #[test]
    fn a_resize_beyond_the_nodes_allocatable_is_infeasible() {
        let pod = json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"containerStatuses": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}],
                "conditions": [{"type": "Ready", "status": "True"}]}});
        let node = NodeRoom {
            allocatable: json!({"cpu": "7800m", "memory": "31Gi"}),
            used: Requests::default(),
        };
        let big = json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "20"}}}]}});
        let out = resize_pod(&pod, &big, Some(&node), NOW).unwrap();
        assert_eq!(
            out["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "20"
        );
        assert_eq!(
            out["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"],
            "100m"
        );
        let pending = &out["status"]["conditions"][1];
        assert_eq!(pending["type"], "PodResizePending");
        assert_eq!(pending["reason"], "Infeasible");
        assert_eq!(
            pending["message"],
            "Node didn't have enough capacity: cpu, requested: 20000, capacity: 7800"
        );
        let mem = json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "20", "memory": "40Gi"}}}]}});
        let out2 = resize_pod(&out, &mem, Some(&node), NOW).unwrap();
        let message = out2["status"]["conditions"][1]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(message.starts_with("Node didn't have enough capacity: memory, requested: 42949672960, capacity: 33285996544"), "{message}");
        assert_eq!(out2["status"]["conditions"].as_array().unwrap().len(), 2);
        let fits = json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "2"}}}]}});
        let out3 = resize_pod(&out2, &fits, Some(&node), NOW).unwrap();
        assert_eq!(
            out3["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"],
            "2"
        );
        assert_eq!(out3["status"]["conditions"].as_array().unwrap().len(), 1);
    }

    /// A sim node (7800m CPU, 31Gi memory allocatable) named `sim-node-1`.
    fn sim_node() -> Value {
        json!({"metadata": {"name": "sim-node-1"}, "status": {"allocatable": {"cpu": "7800m", "memory": "31Gi", "pods": "110"}}})
    }

    /// A Running pod on `sim-node-1` whose one container requests (and was allocated) `cpu`.
    fn running_pod(name: &str, cpu: &str) -> Value {
        json!({"metadata": {"name": name, "uid": format!("uid-{name}")},
            "spec": {"nodeName": "sim-node-1", "containers": [{"name": "a", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "a", "resources": {"requests": {"cpu": cpu}}, "allocatedResources": {"cpu": cpu}}],
                "conditions": [{"type": "Ready", "status": "True"}]}})
    }

    // KEP-1287 as the kubelet's allocation manager does it: a resize within the node's
    // allocatable but beyond what the other pods leave is Deferred with the kubelet's admission
    // message (used = the others' allocations, the resized pod's own old request left out); the
    // spec keeps the new values, the status the old ones. Once another pod goes, the same pod
    // settles to its new size and the condition goes. Pods that are finished or on another node
    // take no room; a pod not started yet takes its spec's requests.
    #[test]
    fn a_resize_that_fits_the_node_but_not_beside_its_pods_is_deferred_then_applied() {
        let node = sim_node();
        let pod = running_pod("web", "100m");
        let filler = running_pod("filler", "7000m");
        let mut done = running_pod("done", "4");
        done["status"]["phase"] = json!("Succeeded");
        let mut elsewhere = running_pod("elsewhere", "4");
        elsewhere["spec"]["nodeName"] = json!("sim-node-2");
        let mut starting = running_pod("starting", "100m");
        starting["status"] = json!({"phase": "Pending"});
        let pods = [
            pod.clone(),
            filler.clone(),
            done,
            elsewhere,
            starting.clone(),
        ];
        let room = NodeRoom::for_pod(&node, &pods, &pod);
        assert_eq!(room.used.cpu_millis, 7100);
        let body = json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "2"}}}]}});
        let out = resize_pod(&pod, &body, Some(&room), NOW).unwrap();
        assert_eq!(
            out["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "2"
        );
        assert_eq!(
            out["status"]["containerStatuses"][0]["allocatedResources"]["cpu"],
            "100m"
        );
        assert_eq!(resize_pending_reason(&out), Some("Deferred"));
        let pending = &out["status"]["conditions"][1];
        assert_eq!(
            pending["message"],
            "Node didn't have enough resource: cpu, requested: 2000, used: 7100, capacity: 7800"
        );
        assert_eq!(pending["lastTransitionTime"], NOW);
        assert!(resize_increases_requests(&out));
        // The others still hold their room: a retry later keeps it Deferred, since the first time.
        let mut again = out.clone();
        settle_resize(
            &mut again,
            Some(&NodeRoom::for_pod(&node, &pods, &out)),
            "2026-11-28T11:00:00Z",
        );
        assert_eq!(again, out);
        // The filler goes: the retry actuates the resize.
        let pods = [out.clone(), starting];
        let mut settled = out.clone();
        settle_resize(
            &mut settled,
            Some(&NodeRoom::for_pod(&node, &pods, &out)),
            NOW,
        );
        assert_eq!(
            settled["status"]["containerStatuses"][0]["allocatedResources"]["cpu"],
            "2"
        );
        assert_eq!(
            settled["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"],
            "2"
        );
        assert_eq!(resize_pending_reason(&settled), None);
        assert!(!resize_increases_requests(&settled));
        // Beyond the node's allocatable it is Infeasible, whatever the others hold.
        let huge = json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "9"}}}]}});
        let out = resize_pod(
            &settled,
            &huge,
            Some(&NodeRoom::for_pod(&node, &pods, &settled)),
            NOW,
        )
        .unwrap();
        assert_eq!(resize_pending_reason(&out), Some("Infeasible"));
        // Memory: checked after CPU, in bytes.
        let mem = json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "30Gi"}}}]}});
        let mut big_filler = running_pod("filler", "100m");
        big_filler["status"]["containerStatuses"][0]["allocatedResources"] =
            json!({"cpu": "100m", "memory": "2Gi"});
        let room = NodeRoom::for_pod(&node, &[big_filler], &pod);
        let out = resize_pod(&pod, &mem, Some(&room), NOW).unwrap();
        assert_eq!(
            out["status"]["conditions"][1]["message"],
            "Node didn't have enough resource: memory, requested: 32212254720, used: 2147483648, capacity: 33285996544"
        );
    }
}
