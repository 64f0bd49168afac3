//! The HTTP surface: URL routing to discovery, resources, subresources, the metrics APIs and
//! the `/sim/v1` control plane; list (selectors, `limit`/`continue`, Tables), get, create,
//! update, patch, delete, deletecollection and watch (bookmarks, 410, `timeoutSeconds`,
//! `sendInitialEvents`). Bodies are JSON, or protobuf for built-in kinds when the client sends
//! or asks for it first (`protobuf`); errors are `metav1.Status`.
//!
//! Authentication and authorization happen in `rbac::gate` before routing: without
//! `--authorize` any bearer token (or none) is the admin and everything is allowed.

use std::convert::Infallible;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::Response;
use http::{HeaderValue, Method, header};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::api::{DeleteOptions, ObjectRef, Part};
use crate::control::{Caller, Fault, ServiceAddress};
use crate::error::ApiError;
use crate::patch::PatchKind;
use crate::protobuf::{self, Encoding};
use crate::registry::ResourceDef;
use crate::selector::Selectors;
use crate::store::{EventType, Page, StoredEvent};
use crate::wire::{
    Query, bytes_response, encoded_response, error_response, error_response_in, json_response,
    parse_query, percent_decode,
};
use crate::workload::LoadSpec;
use crate::{Cluster, base64, events, eviction, metrics_api, table};

/// The router serving the whole API.
pub fn router(cluster: Arc<Cluster>) -> Router {
    Router::new().fallback(handle).with_state(cluster)
}

/// A boolean query parameter as Go's `strconv.ParseBool` reads it (`True` from Python too).
fn parse_bool(q: &Query, k: &str) -> bool {
    q.get(k)
        .is_some_and(|v| matches!(v.as_str(), "1" | "t" | "T" | "true" | "TRUE" | "True"))
}

fn is_true(q: &Query, k: &str) -> bool {
    q.get(k).is_some_and(|v| v == "1" || v == "true")
}

/// The request as the resource handlers see it.
struct Req {
    method: Method,
    query: Query,
    accept: String,
    content_type: String,
    caller: Caller,
    body: Bytes,
    /// The `apiVersion` and `kind` the URL addresses, for protobuf bodies whose envelope names
    /// none (set once the resource is known).
    url_type: OnceLock<(String, String)>,
}

impl Req {
    fn wants_table(&self) -> bool {
        self.accept.contains("as=Table")
    }

    /// Writes `obj` in the encoding the client negotiated (`Accept`).
    fn respond(&self, code: u16, obj: &Value) -> Result<Response, ApiError> {
        let possible = !self.wants_table() && protobuf::encodable(obj);
        let encoding = protobuf::negotiate(&self.accept, possible)?;
        Ok(encoded_response(code, obj, encoding))
    }

    /// The encoding of a list or watch of `kind` in `api_version`.
    fn encoding_of(&self, api_version: &str, kind: &str) -> Result<Encoding, ApiError> {
        let possible = !self.wants_table() && protobuf::has_message(api_version, kind);
        protobuf::negotiate(&self.accept, possible)
    }

    /// Records what the request addresses, for protobuf bodies whose envelope names no kind,
    /// and negotiates the answer's media type before anything is written, as kube-apiserver
    /// does: a client that takes only protobuf gets 406 for a kind that has none.
    fn addresses(&self, t: &Target<'_>, verb: &str) -> Result<(), ApiError> {
        // Set once per request: a request addresses one resource.
        let _ = self.url_type.set(body_type(t, verb));
        if t.sub.is_none() {
            self.encoding_of(&t.def.api_version(t.version), &t.def.kind)?;
        }
        Ok(())
    }

    /// An error as `metav1.Status`, in protobuf when the client asks for it first.
    fn error(&self, e: &ApiError) -> Response {
        let encoding = protobuf::negotiate(&self.accept, true).unwrap_or(Encoding::Json);
        error_response_in(e, encoding)
    }

    fn json_body(&self) -> Result<Value, ApiError> {
        if self.content_type.contains("protobuf") {
            if self.body.is_empty() {
                return Ok(Value::Null);
            }
            let url_type = self.url_type.get().map(|(a, k)| (a.as_str(), k.as_str()));
            return protobuf::decode(&self.body, url_type);
        }
        if self.content_type.contains("cbor") {
            // Only JSON is spoken; client-go then falls back to JSON.
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {:?})",
                    self.content_type
                ),
            ));
        }
        if self.body.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&self.body).map_err(|e| {
            ApiError::bad_request(format!(
                "the body of the request could not be decoded as JSON: {e}"
            ))
        })
    }

    /// Apply patches may be YAML; JSON is tried first (kubectl and kube-rs send JSON).
    fn yaml_or_json_body(&self) -> Result<Value, ApiError> {
        if let Ok(v) = serde_json::from_slice(&self.body) {
            return Ok(v);
        }
        let text =
            std::str::from_utf8(&self.body).map_err(|e| ApiError::bad_request(e.to_string()))?;
        serde_saphyr::from_str(text)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
    }
}

async fn handle(State(cluster): State<Arc<Cluster>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, 64 * 1024 * 1024).await {
        Ok(b) => b,
        Err(e) => return error_response(&ApiError::bad_request(e.to_string())),
    };
    let header = |n: header::HeaderName| {
        parts
            .headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let query = parse_query(parts.uri.query());
    let req = Req {
        method: parts.method.clone(),
        accept: header(header::ACCEPT),
        content_type: header(header::CONTENT_TYPE),
        caller: Caller {
            user_agent: header(header::USER_AGENT),
            field_manager: query.get("fieldManager").cloned(),
            strict_fields: query.get("fieldValidation").map(String::as_str) == Some("Strict"),
        },
        query,
        body,
        url_type: OnceLock::new(),
    };
    let path = parts.uri.path().trim_end_matches('/').to_string();
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let incoming = crate::rbac::Incoming {
        method: &parts.method,
        headers: &parts.headers,
        segs: &segs,
        query: &req.query,
    };
    if let Some(answered) = crate::rbac::gate(&cluster, &incoming, || req.json_body()) {
        return answered;
    }
    match route(&cluster, &segs, &req).await {
        Ok(r) => r,
        Err(e) => req.error(&e),
    }
}

async fn route(cluster: &Arc<Cluster>, segs: &[&str], req: &Req) -> Result<Response, ApiError> {
    let not_found = || {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    };
    match segs {
        [] => Ok(json_response(
            200,
            &json!({"paths": ["/api", "/api/v1", "/apis", "/version", "/healthz", "/readyz", "/livez", "/sim/v1"]}),
        )),
        ["version"] => Ok(json_response(200, &crate::version_info())),
        ["healthz" | "readyz" | "livez", ..] => Ok(bytes_response(200, Bytes::from_static(b"ok"))),
        ["sim", "v1", rest @ ..] => control(cluster, rest, req),
        ["openapi", "v3"] => Ok(json_response(200, &cluster.registry.openapi_v3_index())),
        ["openapi", "v3", "api", version] => cluster
            .registry
            .openapi_v3_doc("", version)
            .map(|d| json_response(200, &d))
            .ok_or_else(not_found),
        ["openapi", "v3", "apis", group, version] => cluster
            .registry
            .openapi_v3_doc(group, version)
            .map(|d| json_response(200, &d))
            .ok_or_else(not_found),
        ["api"] => Ok(json_response(
            200,
            &cluster.registry.api_versions(&cluster.server_address()),
        )),
        ["apis"] => Ok(json_response(200, &cluster.registry.api_group_list())),
        ["api", "v1", rest @ ..] => resource(cluster, "", "v1", rest, req).await,
        ["apis", group] => cluster
            .registry
            .api_group(group)
            .map(|g| json_response(200, &g))
            .ok_or_else(not_found),
        ["apis", group, version, rest @ ..] => {
            if metrics_api::is_metrics_group(group) && !rest.is_empty() {
                let (latency, err) = cluster.faults.check("get", group);
                fault_delay(latency).await;
                if let Some(e) = err {
                    return Err(e);
                }
                return metrics_api::handle(cluster, group, version, rest, &req.query)
                    .map(|v| json_response(200, &v));
            }
            resource(cluster, group, version, rest, req).await
        }
        _ => Err(not_found()),
    }
}

async fn fault_delay(latency: Duration) {
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
}

/// What a resource URL addresses.
struct Target<'a> {
    def: Arc<ResourceDef>,
    version: &'a str,
    ns: Option<&'a str>,
    name: Option<&'a str>,
    sub: Option<&'a str>,
}

impl Target<'_> {
    /// The object `name` in this target's resource, version and namespace.
    fn object<'b>(&'b self, name: &'b str) -> ObjectRef<'b> {
        ObjectRef {
            def: &self.def,
            version: self.version,
            ns: self.ns.unwrap_or_default(),
            name,
        }
    }
}

fn parse_target<'a>(
    cluster: &Cluster,
    group: &str,
    version: &'a str,
    rest: &[&'a str],
) -> Result<Target<'a>, ApiError> {
    let not_found = || {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    };
    let lookup = |plural: &str| {
        cluster
            .registry
            .lookup(group, version, plural)
            .ok_or_else(not_found)
    };
    let namespaced_form = rest.len() >= 3
        && rest[0] == "namespaces"
        && !matches!(rest[2], "status" | "finalize")
        && group.is_empty()
        || (rest.len() >= 3 && rest[0] == "namespaces" && !group.is_empty());
    if namespaced_form {
        let def = lookup(rest[2])?;
        if !def.namespaced {
            return Err(not_found());
        }
        return Ok(Target {
            def,
            version,
            ns: Some(rest[1]),
            name: rest.get(3).copied(),
            sub: rest.get(4).copied(),
        });
    }
    match rest {
        [plural] => Ok(Target {
            def: lookup(plural)?,
            version,
            ns: None,
            name: None,
            sub: None,
        }),
        [plural, name] => {
            let def = lookup(plural)?;
            if def.namespaced {
                return Err(not_found());
            }
            Ok(Target {
                def,
                version,
                ns: None,
                name: Some(name),
                sub: None,
            })
        }
        [plural, name, sub] => {
            let def = lookup(plural)?;
            if def.namespaced {
                return Err(not_found());
            }
            Ok(Target {
                def,
                version,
                ns: None,
                name: Some(name),
                sub: Some(sub),
            })
        }
        _ => Err(not_found()),
    }
}

/// The `apiVersion` and `kind` of a request body to `t`, for protobuf bodies whose envelope
/// names none: delete options, an Eviction, a Scale, or the resource's own kind.
fn body_type(t: &Target<'_>, verb: &str) -> (String, String) {
    let pair = |a: &str, k: &str| (a.to_string(), k.to_string());
    match (verb, t.sub) {
        ("delete" | "deletecollection", _) => pair("meta.k8s.io/v1", "DeleteOptions"),
        (_, Some("eviction")) => pair("policy/v1", "Eviction"),
        (_, Some("scale")) => pair("autoscaling/v1", "Scale"),
        _ => (t.def.api_version(t.version), t.def.kind.clone()),
    }
}

fn verb_of(method: &Method, t: &Target<'_>, q: &Query) -> &'static str {
    match (method.as_str(), t.name) {
        ("GET", None) if is_true(q, "watch") => "watch",
        ("GET", None) => "list",
        ("GET", Some(_)) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", None) => "deletecollection",
        ("DELETE", Some(_)) => "delete",
        _ => "unknown",
    }
}

async fn resource(
    cluster: &Arc<Cluster>,
    group: &str,
    version: &str,
    rest: &[&str],
    req: &Req,
) -> Result<Response, ApiError> {
    if rest.is_empty() {
        return cluster
            .registry
            .api_resource_list(group, version)
            .map(|l| json_response(200, &l))
            .ok_or_else(|| {
                ApiError::new(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                )
            });
    }
    let t = parse_target(cluster, group, version, rest)?;
    let verb = verb_of(&req.method, &t, &req.query);
    req.addresses(&t, verb)?;
    let res_name = match t.sub {
        Some(sub) => format!("{}/{sub}", t.def.plural),
        None => t.def.plural.clone(),
    };
    let (latency, err) = cluster.faults.check(verb, &res_name);
    fault_delay(latency).await;
    if let Some(e) = err {
        return Err(e);
    }
    let def = t.def.clone();
    let ns = t.ns.unwrap_or_default();
    if def.namespaced && t.name.is_some() && t.ns.is_none() {
        return Err(ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ));
    }
    crate::object_size::check_body(verb, req.body.len())?;
    let dry_run = req.query.get("dryRun").is_some_and(|v| v == "All");
    match (verb, t.name, t.sub) {
        ("list", None, None) => list(cluster, &def, t.version, t.ns, req),
        ("watch", None, None) => watch(cluster, &def, t.version, t.ns, req),
        ("deletecollection", None, None) => delete_collection(cluster, &t, req),
        ("create", None, None) => {
            let obj = req.json_body()?;
            let created = cluster
                .create(&def, t.version, ns, obj, &req.caller, dry_run)
                .await?;
            req.respond(201, &created)
        }
        ("get", Some(name), None | Some("status")) => get(cluster, t.object(name), req),
        ("get", Some(name), Some("scale")) if def.scale.is_some() => {
            req.respond(200, &cluster.get_scale(t.object(name))?)
        }
        ("update", Some(name), None) => {
            let body = req.json_body()?;
            let out = cluster
                .update(t.object(name), body, Part::Main, &req.caller)
                .await?;
            req.respond(200, &out)
        }
        ("update", Some(name), Some("status")) if def.status => {
            let body = req.json_body()?;
            let out = cluster
                .update(t.object(name), body, Part::Status, &req.caller)
                .await?;
            req.respond(200, &out)
        }
        ("update", Some(name), Some("scale")) if def.scale.is_some() => req.respond(
            200,
            &cluster.update_scale(t.object(name), &req.json_body()?, &req.caller)?,
        ),
        ("update", Some(name), Some("resize")) if def.extra_subresources.contains(&"resize") => {
            let body = req.json_body()?;
            let out = cluster
                .update(t.object(name), body, Part::Resize, &req.caller)
                .await?;
            req.respond(200, &out)
        }
        ("patch", Some(name), sub) => patch(cluster, t.object(name), sub, req).await,
        ("delete", Some(name), None) => {
            let opts = DeleteOptions::from_body(
                &req.json_body()?,
                req.query
                    .get("gracePeriodSeconds")
                    .and_then(|g| g.parse().ok()),
            );
            let out = cluster.delete(t.object(name), &opts, &req.caller)?;
            req.respond(200, &out)
        }
        ("create", Some(name), Some("eviction"))
            if def.extra_subresources.contains(&"eviction") =>
        {
            let status = eviction::evict(cluster, t.object(name), &req.json_body()?, &req.caller)?;
            req.respond(201, &status)
        }
        _ => Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({verb} {res_name})"
        ))),
    }
}

/// DELETE on a collection: deletes what the label and field selectors select.
fn delete_collection(
    cluster: &Arc<Cluster>,
    t: &Target<'_>,
    req: &Req,
) -> Result<Response, ApiError> {
    let def = &t.def;
    let selectors = selectors(def, &req.query)?;
    let opts = DeleteOptions::from_body(
        &req.json_body()?,
        req.query
            .get("gracePeriodSeconds")
            .and_then(|g| g.parse().ok()),
    );
    let deleted =
        cluster.delete_collection(def, t.version, t.ns, &selectors, &opts, &req.caller)?;
    let items: Vec<Value> = deleted.iter().map(|o| (**o).clone()).collect();
    req.respond(
        200,
        &json!({"kind": format!("{}List", def.kind), "apiVersion": def.api_version(t.version),
        "metadata": {"resourceVersion": cluster.store.current_rv().to_string()}, "items": items}),
    )
}

/// GET of one object (or its status): as JSON, a Table, or converted to the requested version.
fn get(cluster: &Arc<Cluster>, target: ObjectRef<'_>, req: &Req) -> Result<Response, ApiError> {
    let ObjectRef {
        def,
        version,
        ns,
        name,
    } = target;
    let obj = cluster
        .store
        .get(&events::storage_key(def), ns, name)
        .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
    if req.wants_table() {
        return Ok(json_response(
            200,
            &table::to_table(
                def,
                [&*obj],
                cluster.clock.now(),
                cluster.store.current_rv(),
                false,
            ),
        ));
    }
    if presents(def) {
        return req.respond(200, &present(def, version, &obj));
    }
    req.respond(200, &obj)
}

/// PATCH of an object or its status, resize or scale subresource, in any patch flavour; 201
/// when server-side apply created the object.
async fn patch(
    cluster: &Arc<Cluster>,
    target: ObjectRef<'_>,
    sub: Option<&str>,
    req: &Req,
) -> Result<Response, ApiError> {
    let ObjectRef { def, ns, name, .. } = target;
    let kind = PatchKind::from_content_type(&req.content_type)
        .ok_or_else(|| ApiError::new(415, "UnsupportedMediaType", format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {:?})", req.content_type)))?;
    let body = if kind == PatchKind::Apply {
        req.yaml_or_json_body()?
    } else {
        req.json_body()?
    };
    if kind == PatchKind::Apply && req.caller.field_manager.is_none() {
        return Err(ApiError::bad_request(
            "PATCH /apply requires fieldManager to be set",
        ));
    }
    let part = match sub {
        None => Part::Main,
        Some("status") if def.status => Part::Status,
        Some("resize") if def.extra_subresources.contains(&"resize") => Part::Resize,
        Some("scale") if def.scale.is_some() => {
            return req.respond(200, &cluster.patch_scale(target, kind, &body, &req.caller)?);
        }
        _ => {
            return Err(ApiError::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ));
        }
    };
    let existed = cluster
        .store
        .get(&events::storage_key(def), ns, name)
        .is_some();
    let out = cluster
        .patch(
            target,
            kind,
            &body,
            part,
            &req.caller,
            parse_bool(&req.query, "force"),
        )
        .await?;
    req.respond(if existed { 200 } else { 201 }, &out)
}

/// Whether a stored object of `def` is answered in another shape ([`present`]).
fn presents(def: &ResourceDef) -> bool {
    def.versions.len() > 1 || events::converts(def)
}

/// Rewrites `apiVersion` when a CRD served at several versions is read at another one, and
/// converts a stored Event to the shape of the group it is read through.
fn present(def: &ResourceDef, version: &str, obj: &Arc<Value>) -> Value {
    if let Some(o) = events::present(def, obj) {
        return o;
    }
    let mut o = (**obj).clone();
    if def.versions.len() > 1 {
        o["apiVersion"] = json!(def.api_version(version));
    }
    o
}

fn continue_token(ns: &str, name: &str) -> String {
    base64::encode(format!("{ns}\u{0}{name}").as_bytes())
}

/// The `labelSelector` and `fieldSelector` query parameters of a request on `def`.
fn selectors(def: &ResourceDef, q: &Query) -> Result<Selectors, ApiError> {
    let param = |k: &str| q.get(k).map_or("", String::as_str);
    let mut s = Selectors::parse(param("labelSelector"), param("fieldSelector"))?;
    s.fields = events::field_selector(def, s.fields)?;
    Ok(s)
}

fn list(
    cluster: &Cluster,
    def: &ResourceDef,
    version: &str,
    ns: Option<&str>,
    req: &Req,
) -> Result<Response, ApiError> {
    let selectors = selectors(def, &req.query)?;
    let after: Option<(String, String)> = match req.query.get("continue").filter(|c| !c.is_empty())
    {
        None => None,
        Some(c) => {
            let raw = base64::decode(c)
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?;
            let (n, m) = raw
                .split_once('\u{0}')
                .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?;
            Some((n.to_string(), m.to_string()))
        }
    };
    let limit: usize = req
        .query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let keep = |o: &Value| selectors.matches(o);
    let filtered: Option<&dyn Fn(&Value) -> bool> = (!selectors.is_empty()).then_some(&keep);
    let Page {
        items: page,
        rv,
        more,
        remaining,
    } = cluster.store.page(
        &events::storage_key(def),
        ns,
        after.as_ref(),
        limit,
        filtered,
    );
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if more && let Some(last) = page.last() {
        let name = |p: &str| last.pointer(p).and_then(Value::as_str).unwrap_or_default();
        meta["continue"] = json!(continue_token(
            name("/metadata/namespace"),
            name("/metadata/name")
        ));
        // Unset for a filtered list, as kube-apiserver leaves it: the count is not known.
        if let Some(remaining) = remaining {
            meta["remainingItemCount"] = json!(remaining);
        }
    }
    if req.wants_table() {
        let mut t = table::to_table(
            def,
            page.iter().map(|o| &**o),
            cluster.clock.now(),
            rv,
            false,
        );
        t["metadata"] = meta;
        return Ok(json_response(200, &t));
    }
    let api_version = def.api_version(version);
    let list_kind = format!("{}List", def.kind);
    if req.encoding_of(&api_version, &list_kind)? == Encoding::Protobuf {
        let items: Vec<Value> = page.iter().map(|o| present(def, version, o)).collect();
        let list =
            json!({"kind": list_kind, "apiVersion": api_version, "metadata": meta, "items": items});
        return Ok(encoded_response(200, &list, Encoding::Protobuf));
    }
    // Hand-assembled so the (possibly large) items are serialised without cloning them.
    let mut buf = Vec::with_capacity(256 + page.len() * 512);
    buf.extend_from_slice(b"{\"kind\":");
    buf.extend_from_slice(&serde_json::to_vec(&format!("{}List", def.kind)).unwrap_or_default());
    buf.extend_from_slice(b",\"apiVersion\":");
    buf.extend_from_slice(&serde_json::to_vec(&def.api_version(version)).unwrap_or_default());
    buf.extend_from_slice(b",\"metadata\":");
    buf.extend_from_slice(&serde_json::to_vec(&meta).unwrap_or_default());
    buf.extend_from_slice(b",\"items\":[");
    for (i, o) in page.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        if presents(def) {
            buf.extend_from_slice(
                &serde_json::to_vec(&present(def, version, o)).unwrap_or_default(),
            );
        } else {
            buf.extend_from_slice(&serde_json::to_vec(&**o).unwrap_or_default());
        }
    }
    buf.extend_from_slice(b"]}");
    Ok(bytes_response(200, Bytes::from(buf)))
}

/// How one watcher sees the events of its resource.
struct WatchFilter {
    group: String,
    plural: String,
    ns: Option<String>,
    selectors: Selectors,
}

impl WatchFilter {
    fn matches(&self, o: &Value) -> bool {
        self.selectors.matches(o)
    }

    /// The event type this watcher gets for `e`, if any (selector transitions become
    /// ADDED / DELETED, as kube-apiserver's watch cache does).
    fn classify(&self, e: &StoredEvent) -> Option<EventType> {
        if e.key.0 != self.group
            || e.key.1 != self.plural
            || self.ns.as_ref().is_some_and(|n| *n != e.namespace)
        {
            return None;
        }
        let now = self.matches(&e.object);
        let before = e.prev.as_ref().is_some_and(|p| self.matches(p));
        match e.event_type {
            EventType::Added => now.then_some(EventType::Added),
            EventType::Modified => match (before, now) {
                (true, true) => Some(EventType::Modified),
                (false, true) => Some(EventType::Added),
                (true, false) => Some(EventType::Deleted),
                (false, false) => None,
            },
            EventType::Deleted => (before || now).then_some(EventType::Deleted),
        }
    }
}

fn event_line(event_type: &str, object_json: &[u8]) -> Bytes {
    let mut buf = Vec::with_capacity(object_json.len() + 32);
    buf.extend_from_slice(b"{\"type\":\"");
    buf.extend_from_slice(event_type.as_bytes());
    buf.extend_from_slice(b"\",\"object\":");
    buf.extend_from_slice(object_json);
    buf.extend_from_slice(b"}\n");
    Bytes::from(buf)
}

struct WatchCtx {
    def: Arc<ResourceDef>,
    version: String,
    table: bool,
    /// Length-prefixed protobuf `WatchEvent` frames instead of JSON lines.
    protobuf: bool,
    cluster: Arc<Cluster>,
}

/// One protobuf watch frame; an object that cannot be encoded becomes an ERROR event.
fn protobuf_frame(event_type: &str, obj: &Value) -> Bytes {
    protobuf::watch_frame(event_type, obj)
        .or_else(|e| protobuf::watch_frame("ERROR", &e.to_status()))
        .map(Bytes::from)
        .unwrap_or_default()
}

impl WatchCtx {
    fn line(&self, t: EventType, obj: &Value, encoded: Option<Bytes>) -> Bytes {
        if self.protobuf {
            return protobuf_frame(t.as_str(), obj);
        }
        if self.table {
            let tbl = table::to_table(&self.def, [obj], self.cluster.clock.now(), 0, false);
            return event_line(t.as_str(), &serde_json::to_vec(&tbl).unwrap_or_default());
        }
        if let Some(o) = events::present(&self.def, obj) {
            return event_line(t.as_str(), &serde_json::to_vec(&o).unwrap_or_default());
        }
        if self.def.versions.len() > 1 {
            let mut o = obj.clone();
            o["apiVersion"] = json!(self.def.api_version(&self.version));
            return event_line(t.as_str(), &serde_json::to_vec(&o).unwrap_or_default());
        }
        match encoded {
            Some(b) => event_line(t.as_str(), &b),
            None => event_line(t.as_str(), &serde_json::to_vec(obj).unwrap_or_default()),
        }
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.def.kind, "apiVersion": self.def.api_version(&self.version), "metadata": meta});
        if self.protobuf {
            return protobuf_frame("BOOKMARK", &obj);
        }
        event_line("BOOKMARK", &serde_json::to_vec(&obj).unwrap_or_default())
    }
}

fn expired_stream(message: &str, encoding: Encoding) -> Response {
    let status = ApiError::expired(message).to_status();
    let line = if encoding == Encoding::Protobuf {
        protobuf_frame("ERROR", &status)
    } else {
        event_line("ERROR", &serde_json::to_vec(&status).unwrap_or_default())
    };
    stream_response(
        futures::stream::iter([Ok::<Bytes, Infallible>(line)]),
        encoding,
    )
}

fn stream_response<S>(s: S, encoding: Encoding) -> Response
where
    S: futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    let mut resp = Response::new(Body::from_stream(s));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(match encoding {
            Encoding::Protobuf => protobuf::PROTOBUF_WATCH,
            Encoding::Json => "application/json",
        }),
    );
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    resp
}

fn watch(
    cluster: &Arc<Cluster>,
    def: &Arc<ResourceDef>,
    version: &str,
    ns: Option<&str>,
    req: &Req,
) -> Result<Response, ApiError> {
    let (group, plural) = events::storage_key(def);
    let filter = WatchFilter {
        group,
        plural,
        ns: ns.map(String::from),
        selectors: selectors(def, &req.query)?,
    };
    let encoding = req.encoding_of(&def.api_version(version), &def.kind)?;
    if cluster.faults.take_forced_expiry() {
        return Ok(expired_stream(
            "too old resource version (forced by the sim)",
            encoding,
        ));
    }
    let settings = WatchSettings {
        bookmarks: is_true(&req.query, "allowWatchBookmarks"),
        bookmark_every: cluster.settings.bookmark_interval,
        timeout: req
            .query
            .get("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .map(Duration::from_secs),
        drop_signal: cluster.faults.drop_signal(),
        shutdown: cluster.shutdown.clone(),
    };
    let initial_events = is_true(&req.query, "sendInitialEvents");
    let rv_param = req
        .query
        .get("resourceVersion")
        .cloned()
        .unwrap_or_default();
    let key = events::storage_key(def);
    let ctx = WatchCtx {
        def: def.clone(),
        version: version.to_string(),
        table: req.wants_table(),
        protobuf: encoding == Encoding::Protobuf,
        cluster: cluster.clone(),
    };
    let start = if initial_events || rv_param.is_empty() || rv_param == "0" {
        let (items, rv, events) = cluster.store.snapshot_and_watch(&key, ns);
        WatchStart {
            catch_up: CatchUp::Snapshot {
                items,
                end_bookmark: initial_events,
            },
            rv,
            events,
        }
    } else {
        let from: u64 = rv_param
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version {rv_param:?}")))?;
        match cluster.store.watch_from(from) {
            Err(e) => return Ok(expired_stream(&e.message, encoding)),
            Ok((backlog, events)) => WatchStart {
                rv: backlog.last().map_or(from, |e| e.rv),
                catch_up: CatchUp::Backlog(backlog),
                events,
            },
        }
    };
    let (tx, out_rx) = mpsc::channel::<Bytes>(256);
    tokio::spawn(pump(ctx, filter, start, settings, tx));
    let stream = futures::stream::unfold(out_rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<Bytes, Infallible>(b), rx))
    });
    Ok(stream_response(stream, encoding))
}

/// Where a watch starts: what it owes before live events, the resourceVersion that reaches,
/// and the live events, subscribed under the same store lock so none falls in between (live
/// events the catch-up already covered are skipped by resourceVersion).
struct WatchStart {
    catch_up: CatchUp,
    rv: u64,
    events: broadcast::Receiver<Arc<StoredEvent>>,
}

/// What a watch owes before its live events. Filtered and encoded by the watch's own task as
/// the client reads it, as kube-apiserver's watch cache does: encoded in the request handler,
/// a catch-up of tens of thousands of events held one of the sim's workers for seconds and
/// allocated every line before the first was sent, and with two such watches at once every
/// other request (and every controller waiting on one) stood still.
enum CatchUp {
    /// The objects as of the watch's start, sent as ADDED; then, for `sendInitialEvents`, the
    /// bookmark that ends them.
    Snapshot {
        items: Vec<Arc<Value>>,
        end_bookmark: bool,
    },
    /// The logged writes after the client's resourceVersion (of every resource: filtered here).
    Backlog(Vec<Arc<StoredEvent>>),
}

impl CatchUp {
    /// Sends the catch-up's lines; false once the client is gone.
    async fn send(
        self,
        ctx: &WatchCtx,
        filter: &WatchFilter,
        rv: u64,
        tx: &mpsc::Sender<Bytes>,
    ) -> bool {
        match self {
            CatchUp::Snapshot {
                items,
                end_bookmark,
            } => {
                for o in items.iter().filter(|o| filter.matches(o)) {
                    if tx.send(ctx.line(EventType::Added, o, None)).await.is_err() {
                        return false;
                    }
                }
                !end_bookmark || tx.send(ctx.bookmark(rv, true)).await.is_ok()
            }
            CatchUp::Backlog(events) => {
                for e in &events {
                    if let Some(t) = filter.classify(e)
                        && tx
                            .send(ctx.line(t, &e.object, Some(e.object_json())))
                            .await
                            .is_err()
                    {
                        return false;
                    }
                }
                true
            }
        }
    }
}

/// How a watch stream runs: whether and how often it sends bookmarks, and what ends it besides
/// the client going away.
struct WatchSettings {
    /// `allowWatchBookmarks`.
    bookmarks: bool,
    /// The sim's bookmark interval.
    bookmark_every: Duration,
    /// `timeoutSeconds`; 30 minutes when the client sets none.
    timeout: Option<Duration>,
    /// Fires when a fault drops every open watch.
    drop_signal: tokio::sync::watch::Receiver<u64>,
    /// The sim shutting down.
    shutdown: tokio_util::sync::CancellationToken,
}

/// Sends a watch's lines to `tx` until the watch ends: its catch-up first, then the live events
/// this watcher selects, with bookmarks when asked for.
async fn pump(
    ctx: WatchCtx,
    filter: WatchFilter,
    start: WatchStart,
    settings: WatchSettings,
    tx: mpsc::Sender<Bytes>,
) {
    let WatchStart {
        catch_up,
        rv: mut last_rv,
        events: mut rx,
    } = start;
    let WatchSettings {
        bookmarks,
        bookmark_every,
        timeout,
        mut drop_signal,
        shutdown,
    } = settings;
    drop_signal.mark_unchanged();
    let caught_up = tokio::select! {
        sent = catch_up.send(&ctx, &filter, last_rv, &tx) => sent,
        _ = drop_signal.changed() => false,
        () = shutdown.cancelled() => false,
    };
    if !caught_up {
        return;
    }
    if bookmarks && tx.send(ctx.bookmark(last_rv, false)).await.is_err() {
        return;
    }
    let deadline = tokio::time::sleep(timeout.unwrap_or(Duration::from_secs(1800)));
    tokio::pin!(deadline);
    let mut ticker = tokio::time::interval(bookmark_every);
    ticker.tick().await;
    loop {
        tokio::select! {
            ev = rx.recv() => match ev {
                Ok(e) => {
                    if e.rv <= last_rv {
                        continue;
                    }
                    last_rv = e.rv;
                    if let Some(t) = filter.classify(&e) {
                        let encoded = (t == e.event_type && !ctx.table).then(|| e.object_json());
                        if tx.send(ctx.line(t, &e.object, encoded)).await.is_err() {
                            return;
                        }
                    }
                }
                // A watcher too slow for the broadcast buffer is closed; the client resumes.
                Err(_) => return,
            },
            _ = ticker.tick(), if bookmarks => {
                if tx.send(ctx.bookmark(last_rv, false)).await.is_err() {
                    return;
                }
            }
            () = &mut deadline => return,
            _ = drop_signal.changed() => return,
            () = shutdown.cancelled() => return,
            () = tx.closed() => return,
        }
    }
}

fn control(cluster: &Arc<Cluster>, rest: &[&str], req: &Req) -> Result<Response, ApiError> {
    let ok = || json_response(200, &json!({"status": "ok"}));
    match (req.method.as_str(), rest) {
        ("GET", ["audit"]) => {
            let since = req
                .query
                .get("since")
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            Ok(json_response(
                200,
                &serde_json::to_value(cluster.audit.since(since))?,
            ))
        }
        ("POST", ["faults"]) => {
            let fault: Fault = serde_json::from_value(req.json_body()?)
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
            Ok(json_response(
                200,
                &json!({"id": cluster.faults.add(fault)}),
            ))
        }
        ("DELETE", ["faults"]) => {
            cluster.faults.clear();
            Ok(ok())
        }
        ("DELETE", ["faults", id]) => {
            let id: u64 = id
                .parse()
                .map_err(|_| ApiError::bad_request("fault id must be a number"))?;
            if cluster.faults.remove(id) {
                Ok(ok())
            } else {
                Err(ApiError::new(404, "NotFound", "no such fault"))
            }
        }
        ("POST", ["watches", "drop"]) => {
            cluster.faults.drop_watches();
            Ok(ok())
        }
        ("POST", ["watches", "expire"]) => {
            let n = req
                .query
                .get("count")
                .and_then(|c| c.parse().ok())
                .unwrap_or(1);
            cluster.faults.expire_next_watches(n);
            Ok(ok())
        }
        ("POST", ["compact"]) => {
            cluster.store.compact();
            Ok(ok())
        }
        ("PUT" | "POST", ["namespaces", ns, kind, name, "load"]) => {
            let spec: LoadSpec = serde_json::from_value(req.json_body()?)
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
            cluster
                .model
                .set_load(ns, kind, name, spec, cluster.clock.elapsed_secs());
            Ok(ok())
        }
        ("PUT" | "POST", ["namespaces", ns, "external", metric]) => {
            let body = req.json_body()?;
            let value = body
                .get("value")
                .and_then(Value::as_f64)
                .ok_or_else(|| ApiError::bad_request("body must be {\"value\": number}"))?;
            cluster.model.set_external(ns, metric, value);
            Ok(ok())
        }
        ("PUT" | "POST", ["webhook-services"]) => {
            let svc: ServiceAddress = serde_json::from_value(req.json_body()?)
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
            cluster.register_webhook_service(svc);
            Ok(ok())
        }
        ("GET", ["time"]) => Ok(json_response(
            200,
            &json!({"now": crate::clock::rfc3339(cluster.clock.now()), "timeScale": cluster.clock.scale(), "elapsedSeconds": cluster.clock.elapsed_secs()}),
        )),
        _ => Err(ApiError::new(
            404,
            "NotFound",
            "unknown sim control endpoint",
        )),
    }
}

impl From<serde_json::Error> for ApiError {
    fn from(e: serde_json::Error) -> Self {
        ApiError::internal(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_decode() {
        let q = parse_query(Some("labelSelector=app%3Dweb%2Ctier+in+%28a%29&watch=1&x"));
        assert_eq!(q["labelSelector"], "app=web,tier in (a)");
        assert!(is_true(&q, "watch"));
        assert_eq!(q["x"], "");
        assert_eq!(percent_decode("100%"), "100%");
    }
}
