//! Mutating admission webhooks. On CREATE and UPDATE of an object, every webhook of every
//! `MutatingWebhookConfiguration` (in name order, webhooks in list order) whose rules,
//! namespaceSelector and objectSelector match is called with an `admission.k8s.io/v1`
//! `AdmissionReview` over TLS, verifying the server against `clientConfig.caBundle` and the
//! name `<service>.<namespace>.svc` (service references) or the URL's host. A service reference
//! is reached at the loopback address registered for it (`SimConfig::webhook_services` or
//! `PUT /sim/v1/webhook-services`). The returned base64 `JSONPatch` is applied; a denial fails
//! the write; a call error or timeout (`timeoutSeconds`, default 10) fails the write when
//! `failurePolicy` is `Fail` (the default) and is skipped when it is `Ignore`.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};

use crate::Cluster;
use crate::base64;
use crate::control::Caller;
use crate::error::ApiError;
use crate::patch;
use crate::registry::ResourceDef;
use crate::selector::LabelSelector;

fn strs(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn rule_matches(rule: &Value, op: &str, def: &ResourceDef, version: &str) -> bool {
    let has = |field: &str, want: &str| strs(rule.get(field)).iter().any(|x| x == "*" || x == want);
    let resources = strs(rule.get("resources"));
    let res_ok = resources.iter().any(|r| r == "*" || r == &def.plural);
    let scope = rule.get("scope").and_then(Value::as_str).unwrap_or("*");
    let scope_ok = match scope {
        "Namespaced" => def.namespaced,
        "Cluster" => !def.namespaced,
        _ => true,
    };
    has("operations", op)
        && has("apiGroups", &def.group)
        && has("apiVersions", version)
        && res_ok
        && scope_ok
}

fn selector_matches(sel: Option<&Value>, labels: Option<&serde_json::Map<String, Value>>) -> bool {
    match sel {
        None | Some(Value::Null) => true,
        Some(s) => LabelSelector::from_structured(s)
            .ok()
            .flatten()
            .is_some_and(|s| s.matches(labels)),
    }
}

/// The write the webhooks are asked about.
struct Write<'a> {
    def: &'a ResourceDef,
    version: &'a str,
    op: &'a str,
    old: Option<&'a Value>,
    caller: &'a Caller,
    namespace: String,
}

/// Runs the mutating webhooks for a write and returns the (possibly patched) object.
pub async fn mutate(
    cluster: &Cluster,
    def: &ResourceDef,
    version: &str,
    op: &str,
    obj: Value,
    old: Option<&Value>,
    caller: &Caller,
) -> Result<Value, ApiError> {
    let key = (
        "admissionregistration.k8s.io".to_string(),
        "mutatingwebhookconfigurations".to_string(),
    );
    let (configs, _) = cluster.store.list(&key, None);
    if configs.is_empty() || def.is_virtual() {
        return Ok(obj);
    }
    let write = Write {
        def,
        version,
        op,
        old,
        caller,
        namespace: obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    };
    let ns_obj = if def.namespaced {
        cluster
            .store
            .get(&(String::new(), "namespaces".into()), "", &write.namespace)
    } else {
        None
    };
    let mut obj = obj;
    for config in configs {
        let Some(hooks) = config.get("webhooks").and_then(Value::as_array) else {
            continue;
        };
        for hook in hooks {
            if hook_selects(hook, &write, ns_obj.as_deref(), &obj) {
                obj = call_hook(cluster, hook, &write, obj).await?;
            }
        }
    }
    Ok(obj)
}

/// Whether a webhook's rules, namespaceSelector and objectSelector (new or old object) match.
fn hook_selects(hook: &Value, write: &Write<'_>, ns_obj: Option<&Value>, obj: &Value) -> bool {
    let def = write.def;
    let rules = hook
        .get("rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !rules
        .iter()
        .any(|r| rule_matches(r, write.op, def, write.version))
    {
        return false;
    }
    let ns_labels = if def.namespaced {
        ns_obj
            .and_then(|n| n.pointer("/metadata/labels"))
            .and_then(Value::as_object)
            .cloned()
    } else if def.group.is_empty() && def.plural == "namespaces" {
        obj.pointer("/metadata/labels")
            .and_then(Value::as_object)
            .cloned()
    } else {
        Some(serde_json::Map::new())
    };
    if !selector_matches(hook.get("namespaceSelector"), ns_labels.as_ref()) {
        return false;
    }
    let obj_labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
    let old_labels = write
        .old
        .and_then(|o| o.pointer("/metadata/labels"))
        .and_then(Value::as_object);
    selector_matches(hook.get("objectSelector"), obj_labels)
        || (write.old.is_some() && selector_matches(hook.get("objectSelector"), old_labels))
}

/// Calls one webhook and returns the object it admits: patched, or unchanged when the call
/// failed under `failurePolicy: Ignore`. A denial, or a failure under `Fail`, fails the write.
async fn call_hook(
    cluster: &Cluster,
    hook: &Value,
    write: &Write<'_>,
    obj: Value,
) -> Result<Value, ApiError> {
    let name = hook
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let uid = cluster.rng.uuid();
    let review = review(write, &obj, &uid);
    let fail_open = hook.get("failurePolicy").and_then(Value::as_str) == Some("Ignore");
    let timeout = Duration::from_secs(
        hook.get("timeoutSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(10),
    );
    let result = match tokio::time::timeout(timeout, call(cluster, hook, &review)).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "context deadline exceeded (timeout {}s)",
            timeout.as_secs()
        )),
    };
    let response = match result {
        Ok(r) => r,
        Err(e) if fail_open => {
            tracing::warn!(webhook = %name, error = %e, "webhook call failed; failurePolicy Ignore");
            return Ok(obj);
        }
        Err(e) => {
            return Err(ApiError::internal(format!(
                "failed calling webhook \"{name}\": {e}"
            )));
        }
    };
    let resp = response.get("response").cloned().unwrap_or(Value::Null);
    if resp.get("uid").and_then(Value::as_str) != Some(uid.as_str()) && !fail_open {
        return Err(ApiError::internal(format!(
            "failed calling webhook \"{name}\": expected response.uid={uid:?}"
        )));
    }
    admit(&resp, &name, obj)
}

/// The `AdmissionReview` request for a write.
fn review(write: &Write<'_>, obj: &Value, uid: &str) -> Value {
    let (def, version, op) = (write.def, write.version, write.op);
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": def.group, "version": version, "kind": def.kind},
            "resource": {"group": def.group, "version": version, "resource": def.plural},
            "requestKind": {"group": def.group, "version": version, "kind": def.kind},
            "requestResource": {"group": def.group, "version": version, "resource": def.plural},
            "name": obj.pointer("/metadata/name").cloned().unwrap_or(json!("")),
            "namespace": write.namespace,
            "operation": op,
            "userInfo": {"username": write.caller.user_agent, "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": write.old.cloned().unwrap_or(Value::Null),
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": if op == "CREATE" { "CreateOptions" } else { "UpdateOptions" }},
        }
    })
}

/// Applies a webhook's response: a denial becomes the write's error (with the webhook's code),
/// an allowed response's base64 JSONPatch is applied to the object.
fn admit(resp: &Value, name: &str, obj: Value) -> Result<Value, ApiError> {
    if !resp
        .get("allowed")
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        let code = resp
            .pointer("/status/code")
            .and_then(Value::as_u64)
            .unwrap_or(400) as u16;
        let msg = resp
            .pointer("/status/message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let reason = if code == 403 {
            "Forbidden"
        } else {
            "BadRequest"
        };
        return Err(ApiError::new(
            code,
            reason,
            format!("admission webhook \"{name}\" denied the request: {msg}"),
        ));
    }
    let Some(p) = resp.get("patch").and_then(Value::as_str) else {
        return Ok(obj);
    };
    let bytes = base64::decode(p).ok_or_else(|| {
        ApiError::internal(format!(
            "webhook \"{name}\" returned a patch that is not base64"
        ))
    })?;
    let ops: Value = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::internal(format!("webhook \"{name}\" returned an invalid patch: {e}"))
    })?;
    patch::json_patch(&obj, &ops)
        .map_err(|e| ApiError::internal(format!("webhook \"{name}\" patch failed: {}", e.message)))
}

/// Where a webhook is reached: socket address, TLS server name, request path.
fn endpoint(cluster: &Cluster, cc: &Value) -> Result<(String, String, String), String> {
    if let Some(url) = cc.get("url").and_then(Value::as_str) {
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| format!("webhook url {url:?} is not https"))?;
        let (hostport, path) = rest
            .split_once('/')
            .map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
        let host = hostport
            .rsplit_once(':')
            .map_or(hostport, |(h, _)| h)
            .trim_matches(['[', ']'])
            .to_string();
        let addr = if hostport.contains(':') {
            hostport.to_string()
        } else {
            format!("{hostport}:443")
        };
        return Ok((addr, host, path));
    }
    let svc = cc
        .get("service")
        .ok_or("clientConfig has neither url nor service")?;
    let ns = svc
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = svc.get("name").and_then(Value::as_str).unwrap_or_default();
    let port = svc.get("port").and_then(Value::as_u64).unwrap_or(443) as u16;
    let path = svc
        .get("path")
        .and_then(Value::as_str)
        .unwrap_or("/")
        .to_string();
    let addr = cluster.webhook_service(ns, name, port).ok_or_else(|| {
        format!("service \"{ns}/{name}:{port}\" has no endpoints (register it with the sim)")
    })?;
    Ok((addr.to_string(), format!("{name}.{ns}.svc"), path))
}

async fn call(cluster: &Cluster, hook: &Value, review: &Value) -> Result<Value, String> {
    let cc = hook
        .get("clientConfig")
        .ok_or("webhook has no clientConfig")?;
    let (addr, host, path) = endpoint(cluster, cc)?;
    let mut roots = rustls::RootCertStore::empty();
    if let Some(bundle) = cc.get("caBundle").and_then(Value::as_str) {
        let pem = base64::decode(bundle).ok_or("caBundle is not base64")?;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| format!("caBundle: {e}"))?;
            roots.add(cert).map_err(|e| format!("caBundle: {e}"))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = tokio::net::TcpStream::connect(&addr)
        .await
        .map_err(|e| format!("dial tcp {addr}: {e}"))?;
    let server_name = ServerName::try_from(host.clone()).map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(server_name, tcp)
        .await
        .map_err(|e| format!("Post \"https://{host}{path}\": tls: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let body = serde_json::to_vec(review).map_err(|e| e.to_string())?;
    let req = hyper::Request::post(&path)
        .header("host", &host)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    if !status.is_success() {
        return Err(format!("webhook answered HTTP {status}"));
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| format!("webhook response is not an AdmissionReview: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    #[test]
    fn rules_match_operations_groups_resources() {
        let reg = Registry::with_builtins();
        let pods = reg.lookup("", "v1", "pods").unwrap();
        let rule = json!({"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]});
        assert!(rule_matches(&rule, "CREATE", &pods, "v1"));
        assert!(!rule_matches(&rule, "UPDATE", &pods, "v1"));
        let deploy = reg.lookup("apps", "v1", "deployments").unwrap();
        assert!(!rule_matches(&rule, "CREATE", &deploy, "v1"));
        let any = json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Namespaced"});
        assert!(rule_matches(&any, "UPDATE", &deploy, "v1"));
    }
}
