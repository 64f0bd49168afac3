//! Vectors after upstream `plugin/pkg/auth/authorizer/rbac/rbac_test.go` (`TestAuthorizer`,
//! `TestRuleMatches`) and `subject_locator_test.go`.

use std::collections::BTreeMap;

use serde_json::json;

use super::*;

#[derive(Default)]
struct Table {
    cluster_roles: BTreeMap<String, Arc<Value>>,
    roles: BTreeMap<(String, String), Arc<Value>>,
    crbs: Vec<Arc<Value>>,
    rbs: Vec<(String, Arc<Value>)>,
}

impl PolicySource for Table {
    fn cluster_role_bindings(&self) -> Vec<Arc<Value>> {
        self.crbs.clone()
    }
    fn role_bindings(&self, ns: &str) -> Vec<Arc<Value>> {
        self.rbs
            .iter()
            .filter(|(n, _)| n == ns)
            .map(|(_, b)| b.clone())
            .collect()
    }
    fn cluster_role(&self, name: &str) -> Option<Arc<Value>> {
        self.cluster_roles.get(name).cloned()
    }
    fn role(&self, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.roles.get(&(ns.into(), name.into())).cloned()
    }
}

impl Table {
    fn cluster_role(mut self, name: &str, rules: &Value) -> Self {
        self.cluster_roles.insert(
            name.into(),
            Arc::new(json!({"metadata": {"name": name}, "rules": rules})),
        );
        self
    }
    fn role(mut self, ns: &str, name: &str, rules: &Value) -> Self {
        self.roles.insert(
            (ns.into(), name.into()),
            Arc::new(json!({"metadata": {"name": name, "namespace": ns}, "rules": rules})),
        );
        self
    }
    fn crb(mut self, name: &str, role: &str, subjects: &Value) -> Self {
        self.crbs.push(Arc::new(json!({"metadata": {"name": name},
            "roleRef": {"kind": "ClusterRole", "name": role}, "subjects": subjects})));
        self
    }
    fn rb(mut self, ns: &str, name: &str, kind: &str, role: &str, subjects: &Value) -> Self {
        self.rbs.push((
            ns.into(),
            Arc::new(json!({"metadata": {"name": name, "namespace": ns},
                "roleRef": {"kind": kind, "name": role}, "subjects": subjects})),
        ));
        self
    }
}

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo {
        name: name.into(),
        groups: groups.iter().map(|g| (*g).to_string()).collect(),
    }
}

fn req(u: &UserInfo, verb: &str, group: &str, resource: &str, ns: &str, name: &str) -> Attributes {
    let (resource, sub) = resource.split_once('/').unwrap_or((resource, ""));
    Attributes {
        user: u.clone(),
        verb: verb.into(),
        resource_request: true,
        group: group.into(),
        resource: resource.into(),
        subresource: sub.into(),
        namespace: ns.into(),
        name: name.into(),
        path: String::new(),
    }
}

fn path(u: &UserInfo, verb: &str, p: &str) -> Attributes {
    Attributes {
        user: u.clone(),
        verb: verb.into(),
        path: p.into(),
        ..Attributes::default()
    }
}

#[test]
fn rule_matching_vectors() {
    let u = user("u", &[]);
    let rule = |r: Value| r;
    // (rule, request, allowed): from TestRuleMatches.
    let cases = [
        (
            rule(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})),
            req(&u, "get", "apps", "deployments/scale", "ns", "x"),
            true,
        ),
        (
            rule(json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]})),
            req(&u, "get", "", "pods/status", "ns", "x"),
            false,
        ),
        (
            rule(json!({"verbs": ["create"], "apiGroups": [""], "resources": ["pods/eviction"]})),
            req(&u, "create", "", "pods/eviction", "ns", "x"),
            true,
        ),
        (
            rule(json!({"verbs": ["get"], "apiGroups": ["*"], "resources": ["*/scale"]})),
            req(&u, "get", "apps", "deployments/scale", "ns", "x"),
            true,
        ),
        (
            rule(json!({"verbs": ["get"], "apiGroups": ["*"], "resources": ["*/scale"]})),
            req(&u, "get", "apps", "deployments", "ns", "x"),
            false,
        ),
        (
            rule(
                json!({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["deployments/scale"]}),
            ),
            req(&u, "patch", "apps", "deployments/scale", "ns", "x"),
            false,
        ),
        (
            rule(json!({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["deployments"]})),
            req(&u, "get", "extensions", "deployments", "ns", "x"),
            false,
        ),
        // resourceNames restrict to named objects; a list names none.
        (
            rule(
                json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
            ),
            req(&u, "get", "", "configmaps", "ns", "a"),
            true,
        ),
        (
            rule(
                json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
            ),
            req(&u, "get", "", "configmaps", "ns", "b"),
            false,
        ),
        (
            rule(
                json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
            ),
            req(&u, "list", "", "configmaps", "ns", ""),
            false,
        ),
        // A list or watch naming the object in its field selector carries the name (see
        // request.rs), and then a resourceNames rule allows it, as upstream.
        (
            rule(
                json!({"verbs": ["list", "watch"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
            ),
            req(&u, "watch", "", "configmaps", "ns", "a"),
            true,
        ),
        // A create never carries a name (a POST to the collection): resourceNames never allow it.
        (
            rule(
                json!({"verbs": ["create"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
            ),
            req(&u, "create", "", "configmaps", "ns", ""),
            false,
        ),
        // A create on a named object's subresource does (pods/eviction).
        (
            rule(
                json!({"verbs": ["create"], "apiGroups": [""], "resources": ["pods/eviction"], "resourceNames": ["a"]}),
            ),
            req(&u, "create", "", "pods/eviction", "ns", "a"),
            true,
        ),
        // Non-resource URLs: exact and trailing-star prefix; never a resource request.
        (
            rule(json!({"verbs": ["get"], "nonResourceURLs": ["/apis/*"]})),
            path(&u, "get", "/apis/apps/v1"),
            true,
        ),
        (
            rule(json!({"verbs": ["get"], "nonResourceURLs": ["/version"]})),
            path(&u, "get", "/versions"),
            false,
        ),
        (
            rule(json!({"verbs": ["get"], "nonResourceURLs": ["*"]})),
            req(&u, "get", "", "pods", "ns", ""),
            false,
        ),
        (
            rule(json!({"verbs": ["get"], "apiGroups": ["*"], "resources": ["*"]})),
            path(&u, "get", "/healthz"),
            false,
        ),
    ];
    for (i, (rule, attrs, want)) in cases.iter().enumerate() {
        assert_eq!(
            rule_allows(attrs, rule),
            *want,
            "case {i}: {rule} vs {attrs:?}"
        );
    }
}

fn policy() -> Table {
    Table::default()
        .cluster_role("admin", &json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]))
        .cluster_role("pod-reader", &json!([
            {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}]))
        .role("ns1", "lease-writer", &json!([
            {"verbs": ["get"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"]},
            {"verbs": ["update"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["mine"]}]))
        .crb("readers", "pod-reader", &json!([{"kind": "Group", "name": "readers"}]))
        .rb("ns1", "local-admin", "ClusterRole", "admin", &json!([{"kind": "User", "name": "alice"}]))
        .rb("ns1", "leases", "Role", "lease-writer", &json!([{"kind": "ServiceAccount", "name": "ctl"}]))
}

#[test]
fn bindings_scope_and_subjects() {
    let p = policy();
    let alice = user("alice", &["system:authenticated"]);
    let reader = user("bob", &["readers"]);
    let sa = UserInfo::service_account("ns1", "ctl");
    let other_sa = UserInfo::service_account("ns2", "ctl");
    // A RoleBinding to a ClusterRole grants it only in the binding's namespace.
    assert!(
        authorize(
            &p,
            &req(&alice, "delete", "apps", "deployments", "ns1", "x")
        )
        .allowed
    );
    assert!(
        !authorize(
            &p,
            &req(&alice, "delete", "apps", "deployments", "ns2", "x")
        )
        .allowed
    );
    assert!(!authorize(&p, &req(&alice, "list", "", "nodes", "", "")).allowed);
    // A ClusterRoleBinding to a group grants in every namespace.
    assert!(authorize(&p, &req(&reader, "watch", "", "pods", "ns2", "")).allowed);
    assert!(authorize(&p, &req(&reader, "list", "", "pods", "", "")).allowed);
    assert!(!authorize(&p, &req(&reader, "delete", "", "pods", "ns2", "x")).allowed);
    // A ServiceAccount subject without a namespace means the binding's namespace.
    assert!(
        authorize(
            &p,
            &req(&sa, "get", "coordination.k8s.io", "leases", "ns1", "any")
        )
        .allowed
    );
    assert!(
        !authorize(
            &p,
            &req(
                &other_sa,
                "get",
                "coordination.k8s.io",
                "leases",
                "ns2",
                "any"
            )
        )
        .allowed
    );
    // resourceNames on the second rule.
    assert!(
        authorize(
            &p,
            &req(
                &sa,
                "update",
                "coordination.k8s.io",
                "leases",
                "ns1",
                "mine"
            )
        )
        .allowed
    );
    assert!(
        !authorize(
            &p,
            &req(
                &sa,
                "update",
                "coordination.k8s.io",
                "leases",
                "ns1",
                "theirs"
            )
        )
        .allowed
    );
    // Masters bypass RBAC.
    let root = user("root", &[MASTERS_GROUP]);
    assert!(authorize(&p, &req(&root, "delete", "", "nodes", "", "n")).allowed);
}

#[test]
fn the_admitting_rule_and_reason_are_reported() {
    let p = policy();
    let sa = UserInfo::service_account("ns1", "ctl");
    let d = authorize(
        &p,
        &req(
            &sa,
            "update",
            "coordination.k8s.io",
            "leases",
            "ns1",
            "mine",
        ),
    );
    assert_eq!(
        d.admitted_by,
        Some(Admission {
            binding: "RoleBinding/ns1/leases".into(),
            role: "Role/ns1/lease-writer".into(),
            rule: 1
        })
    );
    assert_eq!(
        d.reason,
        "RBAC: allowed by RoleBinding \"leases/ns1\" of Role \"lease-writer\" to ServiceAccount \"ctl/ns1\""
    );
}

#[test]
fn a_cluster_role_binding_cannot_use_a_role() {
    let p = Table::default()
        .role(
            "ns1",
            "r",
            &json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]),
        )
        .crbs_with_role_ref();
    let u = user("u", &[]);
    assert!(!authorize(&p, &req(&u, "get", "", "pods", "ns1", "x")).allowed);
}

impl Table {
    fn crbs_with_role_ref(mut self) -> Self {
        self.crbs.push(Arc::new(json!({"metadata": {"name": "bad"},
            "roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "User", "name": "u"}]})));
        self
    }
}

#[test]
fn forbidden_messages_match_the_apiserver() {
    let sa = UserInfo::service_account("ns", "sa");
    assert_eq!(
        forbidden_message(&req(&sa, "create", "apps", "deployments", "ns", "")),
        "deployments.apps is forbidden: User \"system:serviceaccount:ns:sa\" cannot create resource \"deployments\" in API group \"apps\" in the namespace \"ns\""
    );
    assert_eq!(
        forbidden_message(&req(&sa, "get", "", "pods/log", "ns", "p")),
        "pods \"p\" is forbidden: User \"system:serviceaccount:ns:sa\" cannot get resource \"pods/log\" in API group \"\" in the namespace \"ns\""
    );
    assert_eq!(
        forbidden_message(&req(&sa, "list", "", "nodes", "", "")),
        "nodes is forbidden: User \"system:serviceaccount:ns:sa\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
    );
    assert_eq!(
        forbidden_message(&path(&sa, "get", "/metrics")),
        "forbidden: User \"system:serviceaccount:ns:sa\" cannot get path \"/metrics\""
    );
}
