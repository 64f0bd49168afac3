//! Authentication, RBAC authorization and the review and token APIs.
//!
//! Every HTTP request passes [`gate`] before routing: it finds who sent it ([`authn`]), applies
//! impersonation, and — in `--authorize` mode ([`crate::SimConfig::authorize`]) — checks the
//! request against the stored Roles, ClusterRoles and bindings ([`authorizer`]), answering 401 or
//! 403 as kube-apiserver does. Without `--authorize` every request is allowed, as before. The
//! gate also serves what is not a stored object: access reviews and TokenReview ([`review`]) and
//! the ServiceAccount TokenRequest subresource ([`token`]).
//!
//! In `--authorize` mode each decision about a caller outside `system:masters` is kept in an
//! access log ([`AccessRecord`]: who, what, allowed or not, and which binding, role and rule
//! admitted it), read with [`crate::SimHandle::access_log`] or `GET /sim/v1/access`, so a test
//! can prove a role is enough (no denial) and no more (every rule admitted something).

pub mod authn;
pub mod authorizer;
pub mod bootstrap;
pub mod request;
pub mod review;
pub mod token;

use std::sync::{Arc, Mutex};

use axum::response::Response;
use http::{HeaderMap, Method};
use serde::Serialize;
use serde_json::{Value, json};

use self::authorizer::{Admission, Attributes, PolicySource, UserInfo, authorize};
use crate::Cluster;
use crate::error::ApiError;
use crate::selector::LabelSelector;
use crate::store::Store;
use crate::wire::{Query, error_response, json_response};

/// The RBAC API group.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// One authorization decision in `--authorize` mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessRecord {
    /// The request (with its user).
    pub attributes: Attributes,
    /// Whether it was allowed.
    pub allowed: bool,
    /// The binding, role and rule that allowed it.
    pub admitted_by: Option<Admission>,
}

/// The authentication and authorization state of a sim.
#[derive(Debug, Default)]
pub struct Rbac {
    /// Whether requests are authorized against RBAC (`--authorize`).
    pub enforce: bool,
    /// Issued ServiceAccount tokens.
    pub tokens: authn::Tokens,
    log: Mutex<Vec<AccessRecord>>,
}

impl Rbac {
    /// A new state; `enforce` turns on authorization.
    pub fn new(enforce: bool) -> Self {
        Self {
            enforce,
            ..Self::default()
        }
    }

    fn record(&self, r: AccessRecord) {
        self.log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(r);
    }

    /// Every decision recorded so far.
    pub fn access_log(&self) -> Vec<AccessRecord> {
        self.log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// Roles and bindings as the store holds them.
pub struct StorePolicy<'a>(pub &'a Store);

impl PolicySource for StorePolicy<'_> {
    fn cluster_role_bindings(&self) -> Vec<Arc<Value>> {
        self.0
            .list(&(GROUP.into(), "clusterrolebindings".into()), None)
            .0
    }
    fn role_bindings(&self, ns: &str) -> Vec<Arc<Value>> {
        self.0
            .list(&(GROUP.into(), "rolebindings".into()), Some(ns))
            .0
    }
    fn cluster_role(&self, name: &str) -> Option<Arc<Value>> {
        let role = self
            .0
            .get(&(GROUP.into(), "clusterroles".into()), "", name)?;
        Some(aggregated(&role, || {
            self.0.list(&(GROUP.into(), "clusterroles".into()), None).0
        }))
    }
    fn role(&self, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.0.get(&(GROUP.into(), "roles".into()), ns, name)
    }
}

/// `role` with the rules of an `aggregationRule` filled in: the union, in name order, of the
/// rules of every other ClusterRole whose labels match one of its `clusterRoleSelectors` (those
/// aggregated themselves with theirs: `admin` takes `edit`'s, which takes `view`'s), as
/// kube-controller-manager's clusterrole-aggregation-controller writes them. The sim computes
/// them when a request is authorized instead of rewriting the stored object. A role without an
/// aggregation rule is returned as it is.
fn aggregated(role: &Arc<Value>, all: impl FnOnce() -> Vec<Arc<Value>>) -> Arc<Value> {
    if role.get("aggregationRule").is_none() {
        return role.clone();
    }
    let all = all();
    let mut out = (**role).clone();
    out["rules"] = Value::Array(aggregated_rules(role, &all, &mut Vec::new()));
    Arc::new(out)
}

/// The rules of `role`, aggregated; `visiting` holds the names on the current path, so that a
/// cycle of selectors ends instead of recursing.
fn aggregated_rules(role: &Value, all: &[Arc<Value>], visiting: &mut Vec<String>) -> Vec<Value> {
    let name = role
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let Some(selectors) = role
        .pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
    else {
        return role
            .get("rules")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
    };
    if visiting.contains(&name) {
        return Vec::new();
    }
    visiting.push(name.clone());
    let selectors: Vec<LabelSelector> = selectors
        .iter()
        .filter_map(|s| LabelSelector::from_structured(s).ok().flatten())
        .collect();
    let mut sources: Vec<&Arc<Value>> = all
        .iter()
        .filter(|r| r.pointer("/metadata/name").and_then(Value::as_str) != Some(name.as_str()))
        .filter(|r| selectors.iter().any(|s| s.matches_object(r)))
        .collect();
    sources.sort_by_key(|r| {
        r.pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let mut rules: Vec<Value> = Vec::new();
    for source in sources {
        for rule in aggregated_rules(source, all, visiting) {
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        }
    }
    visiting.pop();
    rules
}

/// A request as the gate sees it.
pub struct Incoming<'a> {
    /// HTTP method.
    pub method: &'a Method,
    /// Headers (Authorization, Impersonate-*).
    pub headers: &'a HeaderMap,
    /// Decoded path segments.
    pub segs: &'a [&'a str],
    /// Query parameters.
    pub query: &'a Query,
}

fn unauthorized() -> Response {
    error_response(&ApiError::new(401, "Unauthorized", "Unauthorized"))
}

/// 403 for a denied request, with the apiserver's message and details.
pub fn forbidden(attrs: &Attributes) -> ApiError {
    let mut details = json!({"group": attrs.group, "kind": attrs.resource});
    if !attrs.name.is_empty() {
        details["name"] = json!(attrs.name);
    }
    let e = ApiError::new(403, "Forbidden", authorizer::forbidden_message(attrs));
    if attrs.resource_request {
        e.with_details(details)
    } else {
        e
    }
}

/// Whether `attrs` is allowed; the decision goes to the access log either way.
fn authorized_and_logged(cluster: &Cluster, attrs: &Attributes) -> bool {
    let decision = authorize(&StorePolicy(&cluster.store), attrs);
    cluster.rbac.record(AccessRecord {
        attributes: attrs.clone(),
        allowed: decision.allowed,
        admitted_by: decision.admitted_by,
    });
    decision.allowed
}

/// The `create` a server-side apply also needs when it would create its object: kube-apiserver's
/// patch handler authorizes the create path again with the verb `create` (`withAuthorization` in
/// `handlers/patch.go`), so `patch` alone can change an object but not make one. `None` for any
/// other request, and for an apply to an object that exists.
fn apply_creates(cluster: &Cluster, headers: &HeaderMap, attrs: &Attributes) -> Option<Attributes> {
    let apply = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/apply-patch"));
    if !(apply && attrs.resource_request && attrs.verb == "patch" && attrs.subresource.is_empty()) {
        return None;
    }
    let def = cluster.registry.by_key(&attrs.group, &attrs.resource)?;
    let key = crate::events::storage_key(&def);
    if cluster
        .store
        .get(&key, &attrs.namespace, &attrs.name)
        .is_some()
    {
        return None;
    }
    Some(Attributes {
        verb: "create".into(),
        ..attrs.clone()
    })
}

/// kube-apiserver's answer when that `create` is refused: `NewForbidden` with the authorizer's
/// reason, which RBAC leaves empty when no rule matched (hence the message ending in `: `).
fn forbidden_to_create(attrs: &Attributes) -> ApiError {
    let resource = if attrs.group.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}.{}", attrs.resource, attrs.group)
    };
    ApiError::new(
        403,
        "Forbidden",
        format!("{resource} \"{}\" is forbidden: ", attrs.name),
    )
    .with_details(json!({"name": attrs.name, "group": attrs.group, "kind": attrs.resource}))
}

/// Who the request acts as: the authenticated caller, or whom it impersonates if the caller may.
fn effective_user(
    cluster: &Cluster,
    caller: UserInfo,
    headers: &HeaderMap,
) -> Result<UserInfo, ApiError> {
    let Some(target) = authn::impersonation(headers) else {
        return Ok(caller);
    };
    let policy = StorePolicy(&cluster.store);
    let mut checks = vec![("users", target.name.clone())];
    checks.extend(
        headers
            .get_all("impersonate-group")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(|g| ("groups", g.to_string())),
    );
    for (resource, name) in checks {
        let attrs = Attributes {
            user: caller.clone(),
            verb: "impersonate".into(),
            resource_request: true,
            resource: resource.into(),
            name,
            ..Attributes::default()
        };
        if !authorize(&policy, &attrs).allowed {
            return Err(forbidden(&attrs));
        }
    }
    Ok(target)
}

/// Authenticates and authorizes a request; answers it when the gate refuses it or when it is one
/// of the APIs the gate serves. `None`: route it as usual.
pub fn gate(
    cluster: &Cluster,
    incoming: &Incoming<'_>,
    body: impl FnOnce() -> Result<Value, ApiError>,
) -> Option<Response> {
    let rbac = &cluster.rbac;
    let Ok(caller) =
        authn::authenticate(&rbac.tokens, incoming.headers, crate::TOKEN, rbac.enforce)
    else {
        return Some(unauthorized());
    };
    let user = match effective_user(cluster, caller, incoming.headers) {
        Ok(u) => u,
        Err(e) if rbac.enforce => return Some(error_response(&e)),
        Err(_) => authn::admin(),
    };
    let query = request::QueryInfo {
        watch: incoming
            .query
            .get("watch")
            .is_some_and(|v| v == "1" || v == "true"),
        field_selector: incoming.query.get("fieldSelector").map(String::as_str),
    };
    let attrs = request::attributes(user, incoming.method, incoming.segs, query);
    if rbac.enforce && !attrs.user.in_group(authorizer::MASTERS_GROUP) {
        if !authorized_and_logged(cluster, &attrs) {
            return Some(error_response(&forbidden(&attrs)));
        }
        if let Some(create) = apply_creates(cluster, incoming.headers, &attrs)
            && !authorized_and_logged(cluster, &create)
        {
            return Some(error_response(&forbidden_to_create(&create)));
        }
    }
    serve(cluster, &attrs, body).map(|r| match r {
        // The control endpoint reads; everything else the gate serves is a create.
        Ok(v) if !attrs.resource_request => json_response(200, &v),
        Ok(v) => json_response(201, &v),
        Err(e) => error_response(&e),
    })
}

/// The APIs answered here rather than from the store.
fn serve(
    cluster: &Cluster,
    attrs: &Attributes,
    body: impl FnOnce() -> Result<Value, ApiError>,
) -> Option<Result<Value, ApiError>> {
    if attrs.resource_request && attrs.verb == "create" {
        match (
            attrs.group.as_str(),
            attrs.resource.as_str(),
            attrs.subresource.as_str(),
        ) {
            ("authorization.k8s.io", resource, "") => {
                let review = review::AccessReview::from_resource(resource)?;
                let policy = StorePolicy(&cluster.store);
                return Some(body().and_then(|b| {
                    review::access_review(&policy, review, &attrs.namespace, &attrs.user, b)
                }));
            }
            ("authentication.k8s.io", "tokenreviews", "") => {
                return Some(
                    body().map(|b| review::token_review(&cluster.rbac.tokens, crate::TOKEN, b)),
                );
            }
            ("authentication.k8s.io", "selfsubjectreviews", "") => {
                return Some(Ok(review::self_subject_review(&attrs.user)));
            }
            ("", "serviceaccounts", "token") => {
                return Some(body().and_then(|b| {
                    token::token_request(cluster, &attrs.namespace, &attrs.name, b)
                }));
            }
            _ => return None,
        }
    }
    if !attrs.resource_request && attrs.verb == "get" && attrs.path == "/sim/v1/access" {
        return Some(serde_json::to_value(cluster.rbac.access_log()).map_err(ApiError::from));
    }
    None
}
