//! The default RBAC policy a cluster starts with, as kube-apiserver's bootstrap policy creates it
//! (the subset that matters to a client): `cluster-admin` bound to `system:masters`;
//! `system:discovery` (the discovery and OpenAPI paths, `/version`, health) and
//! `system:basic-user` (self access and subject reviews) bound to `system:authenticated`;
//! `system:public-info-viewer` (`/version` and health) bound to authenticated and
//! unauthenticated users. Objects carry the bootstrap label and autoupdate annotation.
//! The many controller roles (`system:controller:*`) and aggregated user-facing roles
//! (`admin`, `edit`, `view`) are not created.

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
