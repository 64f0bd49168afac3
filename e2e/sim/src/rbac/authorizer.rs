//! The RBAC authorizer: decides a request's [`Attributes`] against stored Roles, ClusterRoles and
//! their bindings the way kube-apiserver's RBAC authorizer does: ClusterRoleBindings first, then
//! the RoleBindings of the request's namespace, the first rule that allows the request wins, and
//! nothing is ever denied explicitly (no rule → not allowed). Members of `system:masters` are
//! allowed everything before RBAC is consulted, like the apiserver's privileged-group authorizer.
//!
//! Rule matching follows upstream `RuleAllows`: verbs and API groups match exactly or by `*`;
//! resources match `*`, the combined `resource/subresource`, or `*/subresource`; a rule with
//! `resourceNames` admits only requests naming one of them; `nonResourceURLs` match exactly or
//! by a trailing `*` prefix. ClusterRole aggregation is resolved by the [`PolicySource`] (the store's
//! fills in an aggregated role's rules). Not modelled:
//! escalation checks on writes of roles and bindings.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

/// The group whose members bypass RBAC.
pub const MASTERS_GROUP: &str = "system:masters";

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct UserInfo {
    /// `system:serviceaccount:<ns>:<name>`, `plimsoll-sim-admin`, …
    pub name: String,
    /// Group memberships (`system:authenticated`, `system:serviceaccounts`, …).
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The identity of a ServiceAccount's tokens.
    pub fn service_account(ns: &str, name: &str) -> Self {
        Self {
            name: format!("system:serviceaccount:{ns}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                "system:authenticated".into(),
            ],
        }
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// What a request asks to do, as the apiserver's request-info resolver describes it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Attributes {
    /// Who asks.
    pub user: UserInfo,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`,
    /// `impersonate`; for non-resource requests the lower-case HTTP method.
    pub verb: String,
    /// Whether the request addresses an API resource (otherwise it is a non-resource URL).
    pub resource_request: bool,
    /// API group ("" for core).
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource or "".
    pub subresource: String,
    /// Namespace or "" (cluster scope).
    pub namespace: String,
    /// Object name or "".
    pub name: String,
    /// The URL path (non-resource requests).
    pub path: String,
}

impl Attributes {
    /// `resource/subresource`, or the resource alone.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// Which binding and rule admitted a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    /// `ClusterRoleBinding/<name>` or `RoleBinding/<ns>/<name>`.
    pub binding: String,
    /// `ClusterRole/<name>` or `Role/<ns>/<name>`.
    pub role: String,
    /// Index of the rule in the role's `rules`.
    pub rule: usize,
}

/// The authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// Allowed or not (RBAC never denies explicitly).
    pub allowed: bool,
    /// Why, phrased like the RBAC authorizer (`RBAC: allowed by ClusterRoleBinding …`).
    pub reason: String,
    /// The rule that allowed it (`None` for masters and for denials).
    pub admitted_by: Option<Admission>,
}

/// Where the authorizer reads roles and bindings (the store, or a test table).
pub trait PolicySource {
    /// Every ClusterRoleBinding.
    fn cluster_role_bindings(&self) -> Vec<Arc<Value>>;
    /// The RoleBindings of one namespace.
    fn role_bindings(&self, ns: &str) -> Vec<Arc<Value>>;
    /// A ClusterRole by name.
    fn cluster_role(&self, name: &str) -> Option<Arc<Value>>;
    /// A Role by namespace and name.
    fn role(&self, ns: &str, name: &str) -> Option<Arc<Value>>;
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn has(list: &[String], wanted: &str) -> bool {
    list.iter().any(|s| s == "*" || s == wanted)
}

fn resource_matches(rule: &[String], combined: &str, subresource: &str) -> bool {
    rule.iter().any(|r| {
        r == "*"
            || r == combined
            || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource))
    })
}

fn url_matches(rule: &[String], path: &str) -> bool {
    rule.iter().any(|u| {
        u == "*"
            || u == path
            || u.strip_suffix('*')
                .is_some_and(|prefix| path.starts_with(prefix))
    })
}

/// Whether one `PolicyRule` (as JSON) allows the request (upstream `RuleAllows`).
pub fn rule_allows(attrs: &Attributes, rule: &Value) -> bool {
    if !has(&strings(rule, "verbs"), &attrs.verb) {
        return false;
    }
    if !attrs.resource_request {
        return url_matches(&strings(rule, "nonResourceURLs"), &attrs.path);
    }
    if !has(&strings(rule, "apiGroups"), &attrs.group) {
        return false;
    }
    if !resource_matches(
        &strings(rule, "resources"),
        &attrs.combined_resource(),
        &attrs.subresource,
    ) {
        return false;
    }
    let names = strings(rule, "resourceNames");
    names.is_empty() || names.contains(&attrs.name)
}

/// Whether a binding's subject is the user (upstream `appliesToUser`); a ServiceAccount subject
/// without a namespace means the binding's own namespace.
fn subject_applies(subject: &Value, user: &UserInfo, binding_ns: &str) -> bool {
    let name = text(subject, "/name");
    match text(subject, "/kind") {
        "User" => user.name == name,
        "Group" => user.in_group(name),
        "ServiceAccount" => {
            let ns = match text(subject, "/namespace") {
                "" => binding_ns,
                ns => ns,
            };
            user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

fn describe_subject(subject: &Value, binding_ns: &str) -> String {
    let name = text(subject, "/name");
    match text(subject, "/kind") {
        "ServiceAccount" => {
            let ns = match text(subject, "/namespace") {
                "" => binding_ns,
                ns => ns,
            };
            format!("ServiceAccount \"{name}/{ns}\"")
        }
        kind => format!("{kind} \"{name}\""),
    }
}

/// The role a binding refers to, with its label (`ClusterRole/x`, `Role/ns/x`).
fn bound_role(
    policy: &dyn PolicySource,
    binding: &Value,
    binding_ns: &str,
) -> Option<(Arc<Value>, String)> {
    let name = text(binding, "/roleRef/name");
    match text(binding, "/roleRef/kind") {
        "ClusterRole" => policy
            .cluster_role(name)
            .map(|r| (r, format!("ClusterRole/{name}"))),
        // A RoleBinding's Role lives in the binding's namespace; a ClusterRoleBinding cannot
        // refer to a Role.
        "Role" if !binding_ns.is_empty() => policy
            .role(binding_ns, name)
            .map(|r| (r, format!("Role/{binding_ns}/{name}"))),
        _ => None,
    }
}

/// Tries one binding: the first of its role's rules that allows the request.
fn try_binding(
    policy: &dyn PolicySource,
    attrs: &Attributes,
    binding: &Value,
    binding_ns: &str,
) -> Option<Decision> {
    let subjects = binding.get("subjects").and_then(Value::as_array)?;
    let subject = subjects
        .iter()
        .find(|s| subject_applies(s, &attrs.user, binding_ns))?;
    let (role, role_label) = bound_role(policy, binding, binding_ns)?;
    let rules = role.get("rules").and_then(Value::as_array)?;
    let index = rules.iter().position(|r| rule_allows(attrs, r))?;
    let name = text(binding, "/metadata/name");
    let (kind, binding_label, described) = if binding_ns.is_empty() {
        (
            "ClusterRoleBinding",
            format!("ClusterRoleBinding/{name}"),
            name.to_string(),
        )
    } else {
        (
            "RoleBinding",
            format!("RoleBinding/{binding_ns}/{name}"),
            format!("{name}/{binding_ns}"),
        )
    };
    Some(Decision {
        allowed: true,
        reason: format!(
            "RBAC: allowed by {kind} \"{described}\" of {} \"{}\" to {}",
            text(binding, "/roleRef/kind"),
            text(binding, "/roleRef/name"),
            describe_subject(subject, binding_ns)
        ),
        admitted_by: Some(Admission {
            binding: binding_label,
            role: role_label,
            rule: index,
        }),
    })
}

/// Decides a request.
pub fn authorize(policy: &dyn PolicySource, attrs: &Attributes) -> Decision {
    if attrs.user.in_group(MASTERS_GROUP) {
        return Decision {
            allowed: true,
            reason: format!("member of {MASTERS_GROUP}"),
            admitted_by: None,
        };
    }
    let cluster_wide = policy.cluster_role_bindings();
    let local = if attrs.namespace.is_empty() {
        Vec::new()
    } else {
        policy.role_bindings(&attrs.namespace)
    };
    cluster_wide
        .iter()
        .find_map(|b| try_binding(policy, attrs, b, ""))
        .or_else(|| {
            local
                .iter()
                .find_map(|b| try_binding(policy, attrs, b, &attrs.namespace))
        })
        .unwrap_or(Decision {
            allowed: false,
            reason: String::new(),
            admitted_by: None,
        })
}

/// The apiserver's 403 message for a denied request (`forbiddenMessage` + `NewForbidden`).
pub fn forbidden_message(attrs: &Attributes) -> String {
    let user = &attrs.user.name;
    let verb = &attrs.verb;
    if !attrs.resource_request {
        return format!(
            "forbidden: User \"{user}\" cannot {verb} path \"{}\"",
            attrs.path
        );
    }
    let what = format!(
        "User \"{user}\" cannot {verb} resource \"{}\" in API group \"{}\"",
        attrs.combined_resource(),
        attrs.group
    );
    let scope = if attrs.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{}\"", attrs.namespace)
    };
    let qualified = if attrs.group.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}.{}", attrs.resource, attrs.group)
    };
    if attrs.name.is_empty() {
        format!("{qualified} is forbidden: {what} {scope}")
    } else {
        format!(
            "{qualified} \"{}\" is forbidden: {what} {scope}",
            attrs.name
        )
    }
}

#[cfg(test)]
mod tests;
