//! The TokenRequest subresource (`POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`,
//! `authentication.k8s.io/v1 TokenRequest`, what `kubectl create token` sends). The token is an
//! opaque random string, not a signed JWT: only the sim can read it, which is all its clients
//! need (they send it back as a bearer token). `expirationSeconds` (default 3600) is echoed in
//! `status.expirationTimestamp` but the sim does not expire tokens.

use serde_json::{Value, json};

use super::authorizer::UserInfo;
use crate::Cluster;
use crate::clock;
use crate::error::ApiError;

/// The audience a token is for when the request names none.
pub const DEFAULT_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// Issues a token for the ServiceAccount `ns/name`; 404 when it does not exist.
pub fn issue(cluster: &Cluster, ns: &str, name: &str) -> Result<String, ApiError> {
    cluster
        .store
        .get(&(String::new(), "serviceaccounts".into()), ns, name)
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", name))?;
    let token = format!("sim-sa.{}.{}", cluster.rng.uuid(), cluster.rng.uuid());
    cluster
        .rbac
        .tokens
        .issue(token.clone(), UserInfo::service_account(ns, name));
    Ok(token)
}

/// Answers a TokenRequest for `ns/name` with `body` (the TokenRequest the client sent).
pub fn token_request(
    cluster: &Cluster,
    ns: &str,
    name: &str,
    mut body: Value,
) -> Result<Value, ApiError> {
    let token = issue(cluster, ns, name)?;
    let seconds = body
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(3600);
    let expires = cluster
        .clock
        .now()
        .checked_add(jiff::SignedDuration::from_secs(seconds))
        .map_err(|e| ApiError::invalid(format!("spec.expirationSeconds: {e}")))?;
    if !body.is_object() {
        body = json!({});
    }
    body["apiVersion"] = json!("authentication.k8s.io/v1");
    body["kind"] = json!("TokenRequest");
    body["metadata"] = json!({"name": name, "namespace": ns,
        "creationTimestamp": clock::rfc3339(cluster.clock.now())});
    let audiences = body
        .pointer("/spec/audiences")
        .filter(|a| a.as_array().is_some_and(|a| !a.is_empty()))
        .cloned()
        .unwrap_or_else(|| json!([DEFAULT_AUDIENCE]));
    body["spec"]["audiences"] = audiences;
    body["spec"]["expirationSeconds"] = json!(seconds);
    body["status"] = json!({"token": token, "expirationTimestamp": clock::rfc3339(expires)});
    Ok(body)
}

/// A kubeconfig for `server` (trusting `ca_pem`) whose user is the ServiceAccount `ns/name` and
/// whose default namespace is `ns`.
pub fn kubeconfig_for(
    cluster: &Cluster,
    server: &str,
    ca_pem: &str,
    ns: &str,
    name: &str,
) -> Result<String, ApiError> {
    let token = issue(cluster, ns, name)?;
    Ok(crate::kubeconfig::render_in(server, ca_pem, &token, ns))
}
