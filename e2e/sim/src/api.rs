//! The API server's write semantics, shared by the HTTP handlers and the in-process
//! controllers of the workload model (so controller writes go through admission and the
//! audit log exactly like client writes).
//!
//! What a write does, in order (as kube-apiserver): resolve the namespace (`NamespaceLifecycle`),
//! call mutating webhooks, generate the name, set system metadata (uid, creationTimestamp,
//! generation), apply type defaults and `LimitRange` defaults, enforce status isolation and
//! immutability, bump `generation` only when the spec changed, then store and record the write
//! in the audit log.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::admission;
use crate::clock::rfc3339;
use crate::control::{AuditEntry, Caller};
use crate::error::ApiError;
use crate::patch::{self, PatchKind};
use crate::registry::{self, ResourceDef, ResourceKey, json_path, set_json_path};
use crate::selector::{LabelSelector, Selectors};
use crate::store::Mutation;
use crate::{Cluster, defaults, events, managed_fields, validation};

/// Options of a DELETE (`metav1.DeleteOptions`).
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `gracePeriodSeconds`; `None` = the object's default (pods: terminationGracePeriodSeconds).
    pub grace_period_seconds: Option<i64>,
    /// `preconditions.resourceVersion`.
    pub precondition_rv: Option<String>,
    /// `preconditions.uid`.
    pub precondition_uid: Option<String>,
}

impl DeleteOptions {
    /// Reads `DeleteOptions` from a request body (may be empty) and query parameters.
    pub fn from_body(body: &Value, query_grace: Option<i64>) -> Self {
        Self {
            grace_period_seconds: body
                .get("gracePeriodSeconds")
                .and_then(Value::as_i64)
                .or(query_grace),
            precondition_rv: body
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(String::from),
            precondition_uid: body
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(String::from),
        }
    }
}

/// One object as a request addresses it: its resource, the API version the request speaks
/// (bodies are read and answered at it), and its namespace ("" when cluster-scoped) and name.
#[derive(Debug, Clone, Copy)]
pub struct ObjectRef<'a> {
    /// The resource.
    pub def: &'a ResourceDef,
    /// The API version of the request.
    pub version: &'a str,
    /// Namespace, or "" for a cluster-scoped resource.
    pub ns: &'a str,
    /// Object name.
    pub name: &'a str,
}

impl ObjectRef<'_> {
    fn not_found(&self) -> ApiError {
        ApiError::not_found(&self.def.group, &self.def.plural, self.name)
    }

    fn conflict(&self) -> ApiError {
        ApiError::conflict(&self.def.group, &self.def.plural, self.name)
    }
}

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The main resource (status changes ignored when a status subresource exists).
    Main,
    /// `/status` (only status changes kept).
    Status,
    /// `/resize` (only container resources kept; pods).
    Resize,
}

/// Who gains the fields a write sets (`metadata.managedFields`).
#[derive(Debug, Clone, Copy)]
enum Owner<'a> {
    /// A server-side apply: the object carries the managedFields the apply computed.
    Applied,
    /// An update (PUT or non-apply PATCH) by this manager.
    Updater(&'a str),
}

/// Who writes, how the audit log names the write, and who owns what it sets.
#[derive(Debug, Clone, Copy)]
struct Write<'a> {
    caller: &'a Caller,
    verb: &'static str,
    owner: Owner<'a>,
}

/// Where `def`'s objects are stored (Events of both groups share one table).
fn key_of(def: &ResourceDef) -> ResourceKey {
    events::storage_key(def)
}

/// A stored object as a request through `def` sees it.
fn view(def: &ResourceDef, stored: Arc<Value>) -> Arc<Value> {
    events::present(def, &stored).map_or(stored, Arc::new)
}

fn meta(obj: &Value, field: &str) -> String {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    match &mut obj["metadata"] {
        Value::Object(m) => m,
        // Both levels were made objects just above.
        _ => unreachable!("metadata is an object"),
    }
}

/// The part of an object whose change bumps `generation`: everything but metadata and status.
fn spec_part(obj: &Value) -> Value {
    match obj {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| {
                    !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind")
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn without_rv(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    o
}

/// The object an update of `part` leads to: the main resource keeps the stored status (when
/// there is a status subresource), `/status` keeps everything but the status, `/resize` only
/// changes container resources (`room`: on the pod's node, for the kubelet's verdict, at `now`).
fn isolate(
    def: &ResourceDef,
    part: Part,
    current: &Value,
    obj: Value,
    room: Option<&defaults::NodeRoom>,
    now: &str,
) -> Result<Value, ApiError> {
    let with_status_of = |mut new: Value, source: &Value| {
        match source.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        new
    };
    Ok(match part {
        Part::Main if def.status => with_status_of(obj, current),
        Part::Main => obj,
        Part::Status => with_status_of(current.clone(), &obj),
        Part::Resize => defaults::resize_pod(current, &obj, room, now)?,
    })
}

/// System-managed metadata survives any update; `managedFields` are the server's to compute.
fn keep_system_metadata(current: &Value, new: &mut Value) {
    let cur_meta = current
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let m = meta_mut(new);
    for f in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "namespace",
        "name",
    ] {
        match cur_meta.get(f) {
            Some(v) => {
                m.insert(f.into(), v.clone());
            }
            None => {
                m.remove(f);
            }
        }
    }
    m.remove("managedFields");
}

/// The part of an object a write to `part` may own fields of.
fn scope_of(def: &ResourceDef, part: Part) -> managed_fields::Scope {
    match part {
        Part::Status => managed_fields::Scope::Status,
        Part::Main | Part::Resize => managed_fields::Scope::Main {
            status_subresource: def.status,
        },
    }
}

fn is_crd(def: &ResourceDef) -> bool {
    def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions"
}

impl Cluster {
    /// Records that `caller` did `verb` to `target` (its `sub`resource, or "" for the object
    /// itself), leaving it at `stored`'s resourceVersion.
    fn audit(&self, caller: &Caller, verb: &str, target: ObjectRef<'_>, sub: &str, stored: &Value) {
        self.audit.record(AuditEntry {
            time: rfc3339(self.clock.now()),
            user_agent: caller.user_agent.clone(),
            field_manager: caller.field_manager.clone(),
            verb: verb.into(),
            group: target.def.group.clone(),
            resource: target.def.plural.clone(),
            subresource: sub.into(),
            namespace: target.ns.into(),
            name: target.name.into(),
            resource_version: meta(stored, "resourceVersion"),
        });
    }

    fn check_namespace(&self, def: &ResourceDef, ns: &str) -> Result<(), ApiError> {
        if !def.namespaced {
            return Ok(());
        }
        let nsdef = (String::new(), "namespaces".to_string());
        match self.store.get(&nsdef, "", ns) {
            None => Err(ApiError::not_found("", "namespaces", ns)),
            Some(n) if n.pointer("/metadata/deletionTimestamp").is_some() => Err(ApiError::new(
                403,
                "Forbidden",
                format!(
                    "{} is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                    def.plural
                ),
            )),
            Some(_) => Ok(()),
        }
    }

    /// Creates an object. `ns` is the request's namespace ("" for cluster-scoped).
    pub async fn create(
        &self,
        def: &ResourceDef,
        version: &str,
        ns: &str,
        mut obj: Value,
        caller: &Caller,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request was not an object",
            ));
        }
        obj["apiVersion"] = json!(def.api_version(version));
        obj["kind"] = json!(def.kind);
        let body_ns = meta(&obj, "namespace");
        if def.namespaced {
            if !body_ns.is_empty() && body_ns != ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            meta_mut(&mut obj).insert("namespace".into(), json!(ns));
        } else {
            meta_mut(&mut obj).remove("namespace");
        }
        self.check_namespace(def, ns)?;
        let obj = admission::mutate(self, def, version, "CREATE", obj, None, caller).await?;
        let mut obj = obj;
        let mut name = meta(&obj, "name");
        if name.is_empty() {
            let gen_name = meta(&obj, "generateName");
            if gen_name.is_empty() {
                return Err(ApiError::invalid(format!(
                    "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                    def.kind
                )));
            }
            name = format!("{gen_name}{}", self.rng.name_suffix(5));
        }
        let now = self.clock.now();
        {
            let m = meta_mut(&mut obj);
            m.insert("name".into(), json!(name));
            m.insert("uid".into(), json!(self.rng.uuid()));
            m.insert("creationTimestamp".into(), json!(rfc3339(now)));
            m.remove("deletionTimestamp");
            m.remove("deletionGracePeriodSeconds");
            m.remove("resourceVersion");
            // A create keeps the managedFields it carries (server-side apply sets them).
            if m.get("managedFields")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                m.remove("managedFields");
            }
        }
        if obj.get("spec").is_some() {
            meta_mut(&mut obj).insert("generation".into(), json!(1));
        }
        if def.status
            && let Some(m) = obj.as_object_mut()
        {
            m.remove("status");
        }
        if caller.strict_fields {
            validation::refuse_unknown_fields(def, version, &obj)?;
        }
        Self::apply_type_defaults(def, version, &mut obj);
        defaults::validate(def, &obj, None)?;
        validation::check_write(def, version, &mut obj, None, true)?;
        if def.group.is_empty() && def.plural == "pods" {
            defaults::limit_range_defaults(self, ns, &mut obj);
            defaults::pod_create_status(&mut obj);
        }
        if def.group.is_empty() && def.plural == "services" {
            defaults::allocate_cluster_ip(self, &mut obj);
        }
        if is_crd(def) {
            obj["status"] = defaults::crd_status(&obj);
        }
        let obj = events::to_storage(def, obj);
        events::validate(def, &obj, None)?;
        if dry_run {
            return Ok(view(def, Arc::new(obj)));
        }
        let stored = self.store.create(&key_of(def), obj, &def.group)?;
        if is_crd(def)
            && let Some(r) = registry::crd_resource(&stored)
        {
            self.registry.upsert(r);
        }
        let created = ObjectRef {
            def,
            version,
            ns,
            name: &name,
        };
        self.audit(caller, "create", created, "", &stored);
        Ok(view(def, stored))
    }

    fn apply_type_defaults(def: &ResourceDef, version: &str, obj: &mut Value) {
        if let Some(schema) = def
            .schemas
            .get(version)
            .or_else(|| def.schemas.values().next())
        {
            registry::apply_defaults(schema, obj);
        }
        defaults::builtin_defaults(def, obj);
    }

    /// Replaces an object (PUT), or its status or resize part.
    pub async fn update(
        &self,
        target: ObjectRef<'_>,
        obj: Value,
        part: Part,
        caller: &Caller,
    ) -> Result<Arc<Value>, ApiError> {
        let manager =
            managed_fields::update_manager(caller.field_manager.as_deref(), &caller.user_agent);
        let write = Write {
            caller,
            verb: "update",
            owner: Owner::Updater(&manager),
        };
        self.write(target, obj, part, write).await
    }

    /// The common path of update and patch.
    async fn write(
        &self,
        target: ObjectRef<'_>,
        mut obj: Value,
        part: Part,
        write: Write<'_>,
    ) -> Result<Arc<Value>, ApiError> {
        let Write {
            caller,
            verb,
            owner,
        } = write;
        let ObjectRef {
            def,
            version,
            ns,
            name,
        } = target;
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request was not an object",
            ));
        }
        let body_name = meta(&obj, "name");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(
                "the name of the object does not match the name on the URL",
            ));
        }
        obj["apiVersion"] = json!(def.api_version(version));
        obj["kind"] = json!(def.kind);
        if caller.strict_fields {
            validation::refuse_unknown_fields(def, version, &obj)?;
        }
        if part == Part::Main {
            let current = self
                .store
                .get(&key_of(def), ns, name)
                .ok_or_else(|| target.not_found())?;
            let old = view(def, current);
            obj = admission::mutate(self, def, version, "UPDATE", obj, Some(&old), caller).await?;
        }
        let stored = self.replace(target, events::to_storage(def, obj), part, owner)?;
        let sub = match part {
            Part::Main => "",
            Part::Status => "status",
            Part::Resize => "resize",
        };
        self.audit(caller, verb, target, sub, &stored);
        self.after_write(def, &stored);
        Ok(view(def, stored))
    }

    fn after_write(&self, def: &ResourceDef, stored: &Value) {
        if is_crd(def)
            && stored.pointer("/metadata/deletionTimestamp").is_none()
            && let Some(r) = registry::crd_resource(stored)
        {
            self.registry.upsert(r);
        }
    }

    /// The synchronous core of an update: precondition, isolation, generation, finalizers.
    fn replace(
        &self,
        target: ObjectRef<'_>,
        obj: Value,
        part: Part,
        owner: Owner<'_>,
    ) -> Result<Arc<Value>, ApiError> {
        let ObjectRef {
            def,
            version,
            ns,
            name,
        } = target;
        let key = key_of(def);
        let api_version = def.api_version(version);
        let time = rfc3339(self.clock.now());
        let writer = managed_fields::Writer {
            manager: match owner {
                Owner::Applied => "",
                Owner::Updater(m) => m,
            },
            api_version: &api_version,
            scope: scope_of(def, part),
            time: &time,
        };
        // The kubelet's verdict on a resize needs the pod's node and what the node's other pods
        // are allocated (read outside the mutation).
        let room = (part == Part::Resize)
            .then(|| self.store.get(&key, ns, name))
            .flatten()
            .and_then(|pod| {
                let node_name = pod.pointer("/spec/nodeName")?.as_str()?.to_owned();
                let node = self
                    .store
                    .get(&(String::new(), "nodes".into()), "", &node_name)?;
                let (pods, _) = self.store.list(&key, None);
                Some(defaults::NodeRoom::for_pod(
                    &node,
                    pods.iter().map(AsRef::as_ref),
                    &pod,
                ))
            });
        let stored = self.store.mutate(&key, ns, name, &def.group, |current| {
            let applied_fields = obj.pointer("/metadata/managedFields").cloned();
            let body_rv = meta(&obj, "resourceVersion");
            if !body_rv.is_empty() && body_rv != meta(current, "resourceVersion") {
                return Err(target.conflict());
            }
            let mut new = isolate(def, part, current, obj, room.as_ref(), &time)?;
            keep_system_metadata(current, &mut new);
            if part == Part::Main {
                Self::apply_type_defaults(def, version, &mut new);
                defaults::validate(def, &new, Some(current))?;
                events::validate(def, &new, Some(current))?;
                if def.group.is_empty() && def.plural == "pods" {
                    defaults::check_pod_update(current, &new)?;
                }
                if def.group.is_empty() && def.plural == "services" {
                    defaults::keep_cluster_ip(current, &mut new);
                }
                if is_crd(def) {
                    new["status"] = current
                        .get("status")
                        .cloned()
                        .unwrap_or_else(|| defaults::crd_status(&new));
                }
            }
            validation::check_write(def, version, &mut new, Some(current), part == Part::Main)?;
            if spec_part(&new) != spec_part(current)
                && new.pointer("/metadata/generation").is_some()
            {
                let g = current
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                meta_mut(&mut new).insert("generation".into(), json!(g + 1));
            }
            let managed = match owner {
                Owner::Applied => applied_fields,
                Owner::Updater(_) => managed_fields::after_update(current, &new, writer),
            };
            if let Some(managed) = managed {
                meta_mut(&mut new).insert("managedFields".into(), managed);
            }
            if Self::finalized(def, &new) {
                return Ok(Mutation::Delete);
            }
            if managed_fields::without_times(&without_rv(&new))
                == managed_fields::without_times(&without_rv(current))
            {
                return Ok(Mutation::Unchanged);
            }
            Ok(Mutation::Replace(new))
        })?;
        Ok(stored)
    }

    /// Whether a terminating object may now be removed: no finalizers left, and for a pod,
    /// its grace period is over (the kubelet confirmed with a zero-grace delete).
    fn finalized(def: &ResourceDef, obj: &Value) -> bool {
        if obj.pointer("/metadata/deletionTimestamp").is_none() {
            return false;
        }
        let finalizers_empty = obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if !finalizers_empty {
            return false;
        }
        if def.group.is_empty() && def.plural == "namespaces" {
            return obj
                .pointer("/spec/finalizers")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty);
        }
        if def.group.is_empty() && def.plural == "pods" {
            return obj
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                == 0;
        }
        true
    }

    /// Patches an object (or its status / resize part). Server-side apply of a missing object
    /// creates it; `force` (apply only) takes over fields other managers own instead of
    /// answering a conflict.
    pub async fn patch(
        &self,
        target: ObjectRef<'_>,
        kind: PatchKind,
        body: &Value,
        part: Part,
        caller: &Caller,
        force: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let key = key_of(target.def);
        let patch_sets_rv = body.pointer("/metadata/resourceVersion").is_some();
        let api_version = target.def.api_version(target.version);
        let time = rfc3339(self.clock.now());
        let field_manager =
            managed_fields::update_manager(caller.field_manager.as_deref(), &caller.user_agent);
        let writer = managed_fields::Writer {
            manager: &field_manager,
            api_version: &api_version,
            scope: scope_of(target.def, part),
            time: &time,
        };
        for _ in 0..8 {
            let Some(current) = self.store.get(&key, target.ns, target.name) else {
                if kind == PatchKind::Apply && part == Part::Main {
                    let mut obj = body.clone();
                    let managed = managed_fields::after_apply(None, body, writer, force)?;
                    let m = meta_mut(&mut obj);
                    m.insert("name".into(), json!(target.name));
                    m.insert("managedFields".into(), managed);
                    return self
                        .create(target.def, target.version, target.ns, obj, caller, false)
                        .await;
                }
                return Err(target.not_found());
            };
            // A patch speaks the request's shape of the object, not the stored one.
            let mut patched = patch::apply(kind, &view(target.def, current.clone()), body)?;
            let owner = if kind == PatchKind::Apply {
                let managed = managed_fields::after_apply(Some(&current), body, writer, force)?;
                meta_mut(&mut patched).insert("managedFields".into(), managed);
                Owner::Applied
            } else {
                Owner::Updater(&field_manager)
            };
            if !patch_sets_rv {
                meta_mut(&mut patched).insert(
                    "resourceVersion".into(),
                    json!(meta(&current, "resourceVersion")),
                );
            }
            let write = Write {
                caller,
                verb: "patch",
                owner,
            };
            match self.write(target, patched, part, write).await {
                Err(e) if e.reason == "Conflict" && !patch_sets_rv => {}
                other => return other,
            }
        }
        Err(target.conflict())
    }

    /// Deletes an object: immediately, or by setting deletionTimestamp when finalizers or a
    /// grace period remain. Returns the object's last (or current, terminating) state, as
    /// stored (whatever version the request speaks; an `events.k8s.io` Event in that group's
    /// shape).
    pub fn delete(
        &self,
        target: ObjectRef<'_>,
        opts: &DeleteOptions,
        caller: &Caller,
    ) -> Result<Arc<Value>, ApiError> {
        let ObjectRef { def, ns, name, .. } = target;
        let key = key_of(def);
        let now = self.clock.now();
        let is_pod = def.group.is_empty() && def.plural == "pods";
        let is_ns = def.group.is_empty() && def.plural == "namespaces";
        let stored = self.store.mutate(&key, ns, name, &def.group, |current| {
            if let Some(rv) = &opts.precondition_rv
                && *rv != meta(current, "resourceVersion")
            {
                return Err(target.conflict().with_details(json!({"name": name})));
            }
            if let Some(uid) = &opts.precondition_uid
                && *uid != meta(current, "uid")
            {
                return Err(target.conflict());
            }
            let has_finalizers = current
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
            let grace = if is_pod {
                opts.grace_period_seconds
                    .or_else(|| {
                        current
                            .pointer("/spec/terminationGracePeriodSeconds")
                            .and_then(Value::as_i64)
                    })
                    .unwrap_or(30)
                    .max(0)
            } else {
                0
            };
            let unscheduled = is_pod
                && current
                    .pointer("/spec/nodeName")
                    .is_none_or(|v| v.as_str().unwrap_or_default().is_empty());
            let terminal = is_pod
                && matches!(
                    current.pointer("/status/phase").and_then(Value::as_str),
                    Some("Succeeded" | "Failed")
                );
            let already = current.pointer("/metadata/deletionTimestamp").is_some();
            if !has_finalizers && !is_ns && (!is_pod || grace == 0 || unscheduled || terminal) {
                return Ok(Mutation::Delete);
            }
            let mut new = (**current).clone();
            if already {
                // A second delete may only shorten a pod's grace period.
                let cur_grace = current
                    .pointer("/metadata/deletionGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                if !(is_pod && grace < cur_grace) {
                    return Ok(Mutation::Unchanged);
                }
            }
            let deadline = now
                .checked_add(jiff::SignedDuration::from_secs(grace))
                .unwrap_or(now);
            let m = meta_mut(&mut new);
            m.insert("deletionTimestamp".into(), json!(rfc3339(deadline)));
            m.insert("deletionGracePeriodSeconds".into(), json!(grace));
            if is_ns {
                new["status"] = json!({"phase": "Terminating"});
            }
            Ok(Mutation::Replace(new))
        })?;
        self.audit(caller, "delete", target, "", &stored);
        if is_crd(def) && self.store.get(&key, ns, name).is_none() {
            self.remove_crd_resource(&stored);
        }
        Ok(view(def, stored))
    }

    /// Drops a CRD's resource and its objects after the CRD is gone.
    fn remove_crd_resource(&self, crd: &Value) {
        if let Some(r) = registry::crd_resource(crd) {
            let key = (r.group.clone(), r.plural.clone());
            let (items, _) = self.store.list(&key, None);
            for o in items {
                let _ = self.store.mutate(
                    &key,
                    &meta(&o, "namespace"),
                    &meta(&o, "name"),
                    &r.group,
                    |_| Ok(Mutation::Delete),
                );
            }
            self.registry.remove(&r.group, &r.plural);
        }
    }

    /// Deletes every object in `ns` (all namespaces when `None`) that `selectors` select, as a
    /// request at `version`; returns the deleted (or terminating) objects.
    pub fn delete_collection(
        &self,
        def: &ResourceDef,
        version: &str,
        ns: Option<&str>,
        selectors: &Selectors,
        opts: &DeleteOptions,
        caller: &Caller,
    ) -> Result<Vec<Arc<Value>>, ApiError> {
        let (items, _) = self.store.list(&key_of(def), ns);
        let mut out = Vec::new();
        for o in items.iter().filter(|o| selectors.matches(o)) {
            let target = ObjectRef {
                def,
                version,
                ns: &meta(o, "namespace"),
                name: &meta(o, "name"),
            };
            match self.delete(target, opts, caller) {
                Ok(d) => out.push(d),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// The autoscaling/v1 Scale of an object with a scale subresource.
    pub fn get_scale(&self, target: ObjectRef<'_>) -> Result<Value, ApiError> {
        let obj = self
            .store
            .get(&key_of(target.def), target.ns, target.name)
            .ok_or_else(|| target.not_found())?;
        Ok(scale_of(target.def, &obj))
    }

    /// Writes the desired replicas of a scale subresource (PUT or PATCH on `/scale`).
    pub fn update_scale(
        &self,
        target: ObjectRef<'_>,
        scale: &Value,
        caller: &Caller,
    ) -> Result<Value, ApiError> {
        let ObjectRef { def, ns, name, .. } = target;
        let paths = def.scale.clone().ok_or_else(|| {
            ApiError::not_found(&def.group, &format!("{}/scale", def.plural), name)
        })?;
        let replicas = scale
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if replicas < 0 {
            return Err(ApiError::invalid(format!(
                "Scale.autoscaling \"{name}\" is invalid: spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0"
            )));
        }
        let rv = scale
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .map(String::from);
        let key = key_of(def);
        for _ in 0..8 {
            let current = self
                .store
                .get(&key, ns, name)
                .ok_or_else(|| target.not_found())?;
            let mut new = (*current).clone();
            set_json_path(&mut new, &paths.spec_replicas, json!(replicas));
            if let Some(rv) = &rv {
                meta_mut(&mut new).insert("resourceVersion".into(), json!(rv));
            }
            let manager =
                managed_fields::update_manager(caller.field_manager.as_deref(), &caller.user_agent);
            match self.replace(target, new, Part::Main, Owner::Updater(&manager)) {
                Ok(stored) => {
                    self.audit(caller, "update", target, "scale", &stored);
                    return Ok(scale_of(def, &stored));
                }
                Err(e) if e.reason == "Conflict" && rv.is_none() => {}
                Err(e) => return Err(e),
            }
        }
        Err(target.conflict())
    }

    /// Patches a scale subresource.
    pub fn patch_scale(
        &self,
        target: ObjectRef<'_>,
        kind: PatchKind,
        body: &Value,
        caller: &Caller,
    ) -> Result<Value, ApiError> {
        let current = self.get_scale(target)?;
        let patched = patch::apply(kind, &current, body)?;
        let mut scale = patched;
        if body.pointer("/metadata/resourceVersion").is_none()
            && let Some(m) = scale.get_mut("metadata").and_then(Value::as_object_mut)
        {
            m.remove("resourceVersion");
        }
        self.update_scale(target, &scale, caller)
    }
}

/// Builds the autoscaling/v1 Scale view of an object.
pub fn scale_of(def: &ResourceDef, obj: &Value) -> Value {
    let paths = def.scale.clone().unwrap_or(registry::ScalePaths {
        spec_replicas: ".spec.replicas".into(),
        status_replicas: ".status.replicas".into(),
        label_selector: None,
    });
    let spec_replicas = json_path(obj, &paths.spec_replicas)
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let status_replicas = json_path(obj, &paths.status_replicas)
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let selector = paths
        .label_selector
        .as_deref()
        .and_then(|p| json_path(obj, p))
        .map(|s| match s {
            Value::String(s) => s.clone(),
            structured => LabelSelector::from_structured(structured)
                .ok()
                .flatten()
                .map(|s| s.to_query())
                .unwrap_or_default(),
        });
    let m = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let mut status = json!({"replicas": status_replicas});
    if let Some(sel) = selector.filter(|s| !s.is_empty()) {
        status["selector"] = json!(sel);
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": m.get("name"), "namespace": m.get("namespace"), "uid": m.get("uid"),
            "resourceVersion": m.get("resourceVersion"), "creationTimestamp": m.get("creationTimestamp"),
        },
        "spec": {"replicas": spec_replicas},
        "status": status,
    })
}
