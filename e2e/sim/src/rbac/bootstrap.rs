//! The default RBAC policy a cluster starts with, as kube-apiserver's bootstrap policy creates it
//! (the subset that matters to a client): `cluster-admin` bound to `system:masters`;
//! `system:discovery` (the discovery and OpenAPI paths, `/version`, health) and
//! `system:basic-user` (self access and subject reviews) bound to `system:authenticated`;
//! `system:public-info-viewer` (`/version` and health) bound to authenticated and
//! unauthenticated users; and the user-facing roles a namespace is handed out with, `admin`,
//! `edit` and `view`, each an `aggregationRule` over the `aggregate-to-*` labels, with the rules
//! of `system:aggregate-to-admin`, `-edit` and `-view` (the rules of kube-apiserver's bootstrap
//! policy, `testdata/cluster-roles.yaml`, for the groups the sim serves and the old `extensions`
//! group). A chart's own `aggregate-to-edit` ClusterRole widens `edit` as it does on a cluster.
//! Objects carry the bootstrap label and autoupdate annotation. The many controller roles
//! (`system:controller:*`) are not created.

use serde_json::{Value, json};

const GROUP: &str = "rbac.authorization.k8s.io";

fn meta(name: &str, now: &str, uid: &str) -> Value {
    json!({"name": name, "uid": uid, "creationTimestamp": now,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}})
}

/// The default ClusterRoles and ClusterRoleBindings, with `uid` giving each a uid.
pub fn objects(now: &str, mut uid: impl FnMut() -> String) -> Vec<(&'static str, Value)> {
    let health = json!(["/healthz", "/livez", "/readyz", "/version", "/version/"]);
    let roles = [
        (
            "cluster-admin",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                   {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
            json!([{"apiGroup": GROUP, "kind": "Group", "name": "system:masters"}]),
        ),
        (
            "system:discovery",
            json!([{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez",
                "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
            json!([{"apiGroup": GROUP, "kind": "Group", "name": "system:authenticated"}]),
        ),
        (
            "system:basic-user",
            json!([
                {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}]),
            json!([{"apiGroup": GROUP, "kind": "Group", "name": "system:authenticated"}]),
        ),
        (
            "system:public-info-viewer",
            json!([{"nonResourceURLs": health, "verbs": ["get"]}]),
            json!([{"apiGroup": GROUP, "kind": "Group", "name": "system:authenticated"},
                   {"apiGroup": GROUP, "kind": "Group", "name": "system:unauthenticated"}]),
        ),
    ];
    let mut out = Vec::new();
    for (name, aggregate_to, rules) in user_facing() {
        let mut metadata = meta(name, now, &uid());
        if let Some(parent) = aggregate_to {
            metadata["labels"][format!("{GROUP}/aggregate-to-{parent}")] = json!("true");
        }
        let mut role = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "ClusterRole",
            "metadata": metadata, "rules": rules});
        if ["admin", "edit", "view"].contains(&name) {
            role["aggregationRule"] = json!({"clusterRoleSelectors": [
                {"matchLabels": {format!("{GROUP}/aggregate-to-{name}"): "true"}}]});
        }
        out.push(("clusterroles", role));
    }
    for (name, rules, subjects) in roles {
        out.push((
            "clusterroles",
            json!({"apiVersion": format!("{GROUP}/v1"), "kind": "ClusterRole",
                "metadata": meta(name, now, &uid()), "rules": rules}),
        ));
        out.push((
            "clusterrolebindings",
            json!({"apiVersion": format!("{GROUP}/v1"), "kind": "ClusterRoleBinding",
                "metadata": meta(name, now, &uid()),
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
                "subjects": subjects}),
        ));
    }
    out
}

/// `admin`, `edit` and `view` (aggregated, no rules of their own) and the roles aggregated into
/// them: (name, the role it is aggregated into, rules).
fn user_facing() -> Vec<(&'static str, Option<&'static str>, Value)> {
    let write = json!(["create", "delete", "deletecollection", "patch", "update"]);
    let read = json!(["get", "list", "watch"]);
    vec![
        ("admin", None, json!([])),
        ("edit", Some("admin"), json!([])),
        ("view", Some("edit"), json!([])),
        (
            "system:aggregate-to-admin",
            Some("admin"),
            json!([
                {"apiGroups": ["authorization.k8s.io"], "resources": ["localsubjectaccessreviews"], "verbs": ["create"]},
                {"apiGroups": [GROUP], "resources": ["rolebindings", "roles"],
                 "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]}]),
        ),
        (
            "system:aggregate-to-edit",
            Some("edit"),
            json!([
                {"apiGroups": [""], "resources": ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"], "verbs": read},
                {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]},
                {"apiGroups": [""], "resources": ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"], "verbs": write},
                {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
                {"apiGroups": [""], "resources": ["configmaps", "events", "persistentvolumeclaims", "replicationcontrollers",
                    "replicationcontrollers/scale", "secrets", "serviceaccounts", "services", "services/proxy"], "verbs": write},
                {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]},
                {"apiGroups": ["apps"], "resources": ["daemonsets", "deployments", "deployments/rollback", "deployments/scale",
                    "replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale"], "verbs": write},
                {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"], "verbs": write},
                {"apiGroups": ["batch"], "resources": ["cronjobs", "jobs"], "verbs": write},
                {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": write},
                {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses", "networkpolicies"], "verbs": write},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                 "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]}]),
        ),
        (
            "system:aggregate-to-view",
            Some("view"),
            json!([
                {"apiGroups": [""], "resources": ["configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status",
                    "pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services", "services/status"], "verbs": read},
                {"apiGroups": [""], "resources": ["bindings", "events", "limitranges", "namespaces/status", "pods/log", "pods/status",
                    "replicationcontrollers/status", "resourcequotas", "resourcequotas/status"], "verbs": read},
                {"apiGroups": [""], "resources": ["namespaces"], "verbs": read},
                {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": read},
                {"apiGroups": ["apps"], "resources": ["controllerrevisions", "daemonsets", "daemonsets/status", "deployments",
                    "deployments/scale", "deployments/status", "replicasets", "replicasets/scale", "replicasets/status",
                    "statefulsets", "statefulsets/scale", "statefulsets/status"], "verbs": read},
                {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers", "horizontalpodautoscalers/status"], "verbs": read},
                {"apiGroups": ["batch"], "resources": ["cronjobs", "cronjobs/status", "jobs", "jobs/status"], "verbs": read},
                {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets", "poddisruptionbudgets/status"], "verbs": read},
                {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses", "ingresses/status", "networkpolicies"], "verbs": read}]),
        ),
    ]
}
