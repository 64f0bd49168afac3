//! Server-side printing: `meta.k8s.io/v1` Tables for `kubectl get`, with the columns kubectl
//! users expect for the built-in kinds and the printer columns CRDs declare.

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::clock::{human_age, parse_time};
use crate::jsonpath::ColumnPath;
use crate::registry::ResourceDef;

fn col(name: &str, type_: &str, priority: i64) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": type_, "format": format, "description": "", "priority": priority})
}

fn age(obj: &Value, now: Timestamp) -> String {
    obj.pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(parse_time)
        .map_or_else(
            || "<unknown>".into(),
            |t| human_age(now.duration_since(t).as_secs()),
        )
}

fn i(obj: &Value, p: &str) -> i64 {
    obj.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

fn s(obj: &Value, p: &str) -> String {
    obj.pointer(p)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn pod_status(pod: &Value) -> String {
    if pod.pointer("/metadata/deletionTimestamp").is_some() {
        return "Terminating".into();
    }
    if let Some(statuses) = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
    {
        for c in statuses {
            if let Some(r) = c.pointer("/state/waiting/reason").and_then(Value::as_str) {
                return r.into();
            }
            if let Some(r) = c
                .pointer("/state/terminated/reason")
                .and_then(Value::as_str)
            {
                return r.into();
            }
        }
    }
    let phase = s(pod, "/status/phase");
    if phase == "Pending" && pod.pointer("/spec/nodeName").is_some() {
        "ContainerCreating".into()
    } else {
        phase
    }
}

/// A table's column definitions and one row's cells.
type Row = (Vec<Value>, Vec<Value>);

/// The columns kubectl prints for the kind, and the cells of `obj`.
fn columns_and_cells(def: &ResourceDef, obj: &Value, now: Timestamp) -> Row {
    let name = json!(s(obj, "/metadata/name"));
    let a = json!(age(obj, now));
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => pod_row(obj, name, a),
        ("apps", "deployments") => deployment_row(obj, name, a),
        ("apps", "replicasets") => replicaset_row(obj, name, a),
        ("apps", "statefulsets") => statefulset_row(obj, name, a),
        ("", "namespaces") => namespace_row(obj, name, a),
        ("", "nodes") => node_row(obj, name, a),
        ("autoscaling", "horizontalpodautoscalers") => hpa_row(obj, name, a),
        ("policy", "poddisruptionbudgets") => pdb_row(obj, name, a),
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            binding_row(obj, name, a)
        }
        // Both groups' Events are stored in the core shape and printed alike, as upstream's one
        // printer for the internal Event type does.
        ("" | "events.k8s.io", "events") => event_row(obj, name, now),
        _ if !def.printer_columns.is_empty() => crd_row(def, obj, name, now),
        _ => (
            vec![col("Name", "string", 0), col("Age", "string", 0)],
            vec![name, a],
        ),
    }
}

fn pod_row(obj: &Value, name: Value, a: Value) -> Row {
    let statuses = obj
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let total = obj
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let ready = statuses
        .iter()
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    let restarts: i64 = statuses
        .iter()
        .map(|c| c.get("restartCount").and_then(Value::as_i64).unwrap_or(0))
        .sum();
    (
        vec![
            col("Name", "string", 0),
            col("Ready", "string", 0),
            col("Status", "string", 0),
            col("Restarts", "string", 0),
            col("Age", "string", 0),
            col("IP", "string", 1),
            col("Node", "string", 1),
        ],
        vec![
            name,
            json!(format!("{ready}/{total}")),
            json!(pod_status(obj)),
            json!(restarts.to_string()),
            a,
            json!(or_none(s(obj, "/status/podIP"))),
            json!(or_none(s(obj, "/spec/nodeName"))),
        ],
    )
}

fn deployment_row(obj: &Value, name: Value, a: Value) -> Row {
    (
        vec![
            col("Name", "string", 0),
            col("Ready", "string", 0),
            col("Up-to-date", "integer", 0),
            col("Available", "integer", 0),
            col("Age", "string", 0),
        ],
        vec![
            name,
            json!(format!(
                "{}/{}",
                i(obj, "/status/readyReplicas"),
                i(obj, "/spec/replicas")
            )),
            json!(i(obj, "/status/updatedReplicas")),
            json!(i(obj, "/status/availableReplicas")),
            a,
        ],
    )
}

fn replicaset_row(obj: &Value, name: Value, a: Value) -> Row {
    (
        vec![
            col("Name", "string", 0),
            col("Desired", "integer", 0),
            col("Current", "integer", 0),
            col("Ready", "integer", 0),
            col("Age", "string", 0),
        ],
        vec![
            name,
            json!(i(obj, "/spec/replicas")),
            json!(i(obj, "/status/replicas")),
            json!(i(obj, "/status/readyReplicas")),
            a,
        ],
    )
}

fn statefulset_row(obj: &Value, name: Value, a: Value) -> Row {
    (
        vec![
            col("Name", "string", 0),
            col("Ready", "string", 0),
            col("Age", "string", 0),
        ],
        vec![
            name,
            json!(format!(
                "{}/{}",
                i(obj, "/status/readyReplicas"),
                i(obj, "/spec/replicas")
            )),
            a,
        ],
    )
}

fn namespace_row(obj: &Value, name: Value, a: Value) -> Row {
    (
        vec![
            col("Name", "string", 0),
            col("Status", "string", 0),
            col("Age", "string", 0),
        ],
        vec![name, json!(s(obj, "/status/phase")), a],
    )
}

fn node_row(obj: &Value, name: Value, a: Value) -> Row {
    (
        vec![
            col("Name", "string", 0),
            col("Status", "string", 0),
            col("Roles", "string", 0),
            col("Age", "string", 0),
            col("Version", "string", 0),
        ],
        vec![
            name,
            json!("Ready"),
            json!("<none>"),
            a,
            json!(s(obj, "/status/nodeInfo/kubeletVersion")),
        ],
    )
}

fn hpa_row(obj: &Value, name: Value, a: Value) -> Row {
    (
        vec![
            col("Name", "string", 0),
            col("Reference", "string", 0),
            col("MinPods", "integer", 0),
            col("MaxPods", "integer", 0),
            col("Replicas", "integer", 0),
            col("Age", "string", 0),
        ],
        vec![
            name,
            json!(format!(
                "{}/{}",
                s(obj, "/spec/scaleTargetRef/kind"),
                s(obj, "/spec/scaleTargetRef/name")
            )),
            json!(
                obj.pointer("/spec/minReplicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(1)
            ),
            json!(i(obj, "/spec/maxReplicas")),
            json!(i(obj, "/status/currentReplicas")),
            a,
        ],
    )
}

fn pdb_row(obj: &Value, name: Value, a: Value) -> Row {
    (
        vec![
            col("Name", "string", 0),
            col("Min Available", "string", 0),
            col("Max Unavailable", "string", 0),
            col("Allowed Disruptions", "integer", 0),
            col("Age", "string", 0),
        ],
        vec![
            name,
            json!(int_or_str(obj, "/spec/minAvailable")),
            json!(int_or_str(obj, "/spec/maxUnavailable")),
            json!(i(obj, "/status/disruptionsAllowed")),
            a,
        ],
    )
}

/// upstream `printRoleBinding` / `printClusterRoleBinding`: ROLE is `Kind/name`; the wide
/// columns list the subjects by kind, ServiceAccounts as `namespace/name`.
fn binding_row(obj: &Value, name: Value, a: Value) -> Row {
    let subjects = obj
        .pointer("/subjects")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let of_kind = |kind: &str| {
        subjects
            .iter()
            .filter(|sub| s(sub, "/kind") == kind)
            .map(|sub| match s(sub, "/namespace") {
                ns if ns.is_empty() || kind != "ServiceAccount" => s(sub, "/name"),
                ns => format!("{ns}/{}", s(sub, "/name")),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    (
        vec![
            col("Name", "string", 0),
            col("Role", "string", 0),
            col("Age", "string", 0),
            col("Users", "string", 1),
            col("Groups", "string", 1),
            col("ServiceAccounts", "string", 1),
        ],
        vec![
            name,
            json!(format!(
                "{}/{}",
                s(obj, "/roleRef/kind"),
                s(obj, "/roleRef/name")
            )),
            a,
            json!(of_kind("User")),
            json!(of_kind("Group")),
            json!(of_kind("ServiceAccount")),
        ],
    )
}

/// How long ago the RFC 3339 time at `p` was; `None` when it is absent or null.
fn since(obj: &Value, p: &str, now: Timestamp) -> Option<String> {
    obj.pointer(p)
        .and_then(Value::as_str)
        .and_then(parse_time)
        .map(|t| human_age(now.duration_since(t).as_secs()))
}

/// upstream `printEvent`: LAST SEEN is the series' last observation, else `lastTimestamp`, else
/// FIRST SEEN (`firstTimestamp`, else `eventTime`); COUNT is the series' count, else `count`,
/// else 1; SOURCE is the source component (else the reporting controller) and host (else the
/// reporting instance). The server always sends every column; kubectl hides the wide ones.
fn event_row(obj: &Value, name: Value, now: Timestamp) -> Row {
    let unknown = || "<unknown>".to_string();
    let first = since(obj, "/firstTimestamp", now)
        .or_else(|| since(obj, "/eventTime", now))
        .unwrap_or_else(unknown);
    let (last, count) = if obj.get("series").is_some_and(Value::is_object) {
        (
            since(obj, "/series/lastObservedTime", now).unwrap_or_else(unknown),
            i(obj, "/series/count"),
        )
    } else {
        let last = since(obj, "/lastTimestamp", now).unwrap_or_else(|| first.clone());
        // Singleton events of the new API carry no count.
        let count = match i(obj, "/count") {
            0 => 1,
            c => c,
        };
        (last, count)
    };
    let kind = s(obj, "/involvedObject/kind").to_lowercase();
    let involved = s(obj, "/involvedObject/name");
    let object = if involved.is_empty() {
        kind
    } else {
        format!("{kind}/{involved}")
    };
    let first_non_empty = |a: String, b: String| if a.is_empty() { b } else { a };
    let component = first_non_empty(s(obj, "/source/component"), s(obj, "/reportingComponent"));
    let instance = first_non_empty(s(obj, "/source/host"), s(obj, "/reportingInstance"));
    let source = if instance.is_empty() {
        component
    } else {
        format!("{component}, {instance}")
    };
    let mut name_col = col("Name", "string", 1);
    name_col["format"] = json!("name");
    (
        vec![
            col("Last Seen", "string", 0),
            col("Type", "string", 0),
            col("Reason", "string", 0),
            col("Object", "string", 0),
            col("Subobject", "string", 1),
            col("Source", "string", 1),
            col("Message", "string", 0),
            col("First Seen", "string", 1),
            col("Count", "string", 1),
            name_col,
        ],
        vec![
            json!(last),
            json!(s(obj, "/type")),
            json!(s(obj, "/reason")),
            json!(object),
            json!(s(obj, "/involvedObject/fieldPath")),
            json!(source),
            json!(s(obj, "/message").trim()),
            json!(first),
            json!(count),
            name,
        ],
    )
}

/// Name, then the printer columns a CRD declares, evaluated as the API server evaluates them
/// ([`crate::jsonpath`]).
fn crd_row(def: &ResourceDef, obj: &Value, name: Value, now: Timestamp) -> Row {
    let mut cols = vec![col("Name", "string", 0)];
    let mut cells = vec![name];
    for pc in &def.printer_columns {
        let description = format!(
            "Custom resource definition column (in JSONPath format): {}",
            pc.json_path
        );
        cols.push(json!({"name": pc.name, "type": pc.type_, "format": "", "description": description, "priority": pc.priority}));
        cells.push(ColumnPath::parse(&pc.json_path).cell(&pc.type_, obj, now));
    }
    (cols, cells)
}

fn or_none(v: String) -> String {
    if v.is_empty() { "<none>".into() } else { v }
}

fn int_or_str(obj: &Value, p: &str) -> String {
    match obj.pointer(p) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "N/A".into(),
    }
}

/// A row's `object`: `PartialObjectMetadata` (kubectl's default `includeObject=Metadata`).
fn partial(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({}))})
}

/// A Table of `objs`. An empty list still carries the kind's columns.
pub fn to_table<'a>(
    def: &ResourceDef,
    objs: impl IntoIterator<Item = &'a Value>,
    now: Timestamp,
    rv: u64,
    include_full: bool,
) -> Value {
    let empty = json!({"metadata": {}});
    let mut columns = columns_and_cells(def, &empty, now).0;
    let mut rows = Vec::new();
    for obj in objs {
        let (cols, cells) = columns_and_cells(def, obj, now);
        columns = cols;
        let object = if include_full {
            obj.clone()
        } else {
            partial(obj)
        };
        rows.push(json!({"cells": cells, "object": object}));
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv.to_string()},
        "columnDefinitions": columns,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    #[test]
    fn pod_rows_show_ready_and_status() {
        let reg = Registry::with_builtins();
        let def = reg.lookup("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "a", "ready": true, "restartCount": 2}]}});
        let now: Timestamp = "2026-01-01T00:00:30Z".parse().unwrap();
        let t = to_table(&def, [&pod], now, 5, false);
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["p", "1/1", "Running", "2", "30s", "<none>", "<none>"])
        );
        assert_eq!(t["columnDefinitions"][0]["format"], "name");
    }

    #[test]
    fn binding_rows_name_the_role_and_group_subjects_by_kind() {
        let binding = json!({
            "metadata": {"name": "b", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [
                {"kind": "User", "name": "ann"},
                {"kind": "ServiceAccount", "name": "sa", "namespace": "ops"},
                {"kind": "Group", "name": "devs"},
                {"kind": "User", "name": "bob"},
            ],
        });
        let (cols, cells) = binding_row(&binding, json!("b"), json!("1d"));
        let headers: Vec<&str> = cols.iter().filter_map(|c| c["name"].as_str()).collect();
        assert_eq!(
            headers,
            ["Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"]
        );
        assert_eq!(
            cells,
            [
                json!("b"),
                json!("ClusterRole/view"),
                json!("1d"),
                json!("ann, bob"),
                json!("devs"),
                json!("ops/sa")
            ]
        );
    }

    #[test]
    fn event_rows_follow_the_upstream_printer() {
        // upstream: pkg/printers/internalversion/printers_test.go TestPrintEvent
        let reg = Registry::with_builtins();
        let now: Timestamp = "2026-01-01T01:00:00Z".parse().unwrap();
        let legacy = json!({"metadata": {"name": "e1"}, "type": "Warning", "reason": "BackOff",
            "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{a}"},
            "source": {"component": "kubelet", "host": "n1"}, "message": " restarting \n", "count": 6,
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:59:30Z"});
        let recorded = json!({"metadata": {"name": "e2"}, "type": "Normal", "reason": "Scaled",
            "involvedObject": {"kind": "Deployment", "name": "web"}, "message": "to 3",
            "eventTime": "2026-01-01T00:57:30.000000Z", "firstTimestamp": null, "lastTimestamp": null,
            "reportingComponent": "hpa-plus", "reportingInstance": "hpa-plus-0",
            "series": {"count": 4, "lastObservedTime": "2026-01-01T00:59:50.000000Z"}});
        let single = json!({"metadata": {"name": "e3"}, "involvedObject": {"kind": "Node"},
            "eventTime": "2026-01-01T00:59:00.000000Z", "reportingComponent": "c"});
        for group in ["", "events.k8s.io"] {
            let def = reg.lookup(group, "v1", "events").unwrap();
            let t = to_table(&def, [&legacy, &recorded, &single], now, 5, false);
            let names: Vec<&str> = t["columnDefinitions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["name"].as_str().unwrap())
                .collect();
            assert_eq!(
                names,
                [
                    "Last Seen",
                    "Type",
                    "Reason",
                    "Object",
                    "Subobject",
                    "Source",
                    "Message",
                    "First Seen",
                    "Count",
                    "Name"
                ]
            );
            assert_eq!(
                t["rows"][0]["cells"],
                json!([
                    "30s",
                    "Warning",
                    "BackOff",
                    "pod/p",
                    "spec.containers{a}",
                    "kubelet, n1",
                    "restarting",
                    "60m",
                    6,
                    "e1"
                ])
            );
            assert_eq!(
                t["rows"][1]["cells"],
                json!([
                    "10s",
                    "Normal",
                    "Scaled",
                    "deployment/web",
                    "",
                    "hpa-plus, hpa-plus-0",
                    "to 3",
                    "2m30s",
                    4,
                    "e2"
                ])
            );
            assert_eq!(
                t["rows"][2]["cells"],
                json!(["60s", "", "", "node", "", "c", "", "60s", 1, "e3"])
            );
        }
    }
}
