//! The resource kinds the sim serves and their discovery documents. Built-in kinds are fixed;
//! creating a `CustomResourceDefinition` adds its versions (served with its status and scale
//! subresources, printer columns and schema defaults), deleting it removes them.
//!
//! Invariant: a resource is stored once per (group, plural); every served version of a CRD
//! reads and writes the same objects (the sim does no conversion, like `strategy: None`).
//! Events are the one exception, as on a real server: `events.k8s.io` Events are the core
//! ones, stored once and converted on the way in and out (`events.rs`).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::{Value, json};

/// Where the scale subresource reads and writes, as dotted JSON paths (`.spec.replicas`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// Path of the desired replica count.
    pub spec_replicas: String,
    /// Path of the observed replica count.
    pub status_replicas: String,
    /// Path of the label selector string (or structured selector for built-ins).
    pub label_selector: Option<String>,
}

/// A printer column (`kubectl get` tables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    /// Header.
    pub name: String,
    /// `string`, `integer`, `number`, `boolean`, `date`.
    pub type_: String,
    /// JSON path as a CRD states it (`.status.replicas`, `.status.conditions[?(@.type=="Ready")].status`).
    pub json_path: String,
    /// Shown only with `-o wide` when > 0.
    pub priority: i64,
}

/// One served resource.
#[derive(Debug, Clone)]
pub struct ResourceDef {
    /// API group ("" for core).
    pub group: String,
    /// Served versions; the first is the storage/preferred one.
    pub versions: Vec<String>,
    /// Plural resource name (URL segment).
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Short names for kubectl.
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Whether `/status` is a subresource (status isolation applies).
    pub status: bool,
    /// Scale subresource paths.
    pub scale: Option<ScalePaths>,
    /// Other subresources (`eviction`, `resize`).
    pub extra_subresources: Vec<&'static str>,
    /// Printer columns for CRDs (built-ins are printed by `table.rs`).
    pub printer_columns: Vec<PrinterColumn>,
    /// `OpenAPI` v3 schema per version, for defaulting (CRDs).
    pub schemas: BTreeMap<String, Value>,
    /// Whether objects are stored, computed (metrics APIs) or only created (reviews).
    pub serving: Serving,
}

/// How a resource's objects come to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serving {
    /// Stored and served with every verb.
    Stored,
    /// Served from the workload model rather than the store (metrics APIs): get and list.
    Virtual,
    /// Only `create` (access and token reviews: answered, never stored).
    CreateOnly,
}

impl ResourceDef {
    fn builtin(group: &str, version: &str, plural: &str, kind: &str, namespaced: bool) -> Self {
        Self {
            group: group.into(),
            versions: vec![version.into()],
            plural: plural.into(),
            singular: kind.to_lowercase(),
            kind: kind.into(),
            namespaced,
            short_names: Vec::new(),
            categories: Vec::new(),
            status: false,
            scale: None,
            extra_subresources: Vec::new(),
            printer_columns: Vec::new(),
            schemas: BTreeMap::new(),
            serving: Serving::Stored,
        }
    }

    fn short(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|s| (*s).to_string()).collect();
        self
    }

    fn all(mut self) -> Self {
        self.categories = vec!["all".into()];
        self
    }

    fn with_status(mut self) -> Self {
        self.status = true;
        self
    }

    fn with_scale(mut self) -> Self {
        self.scale = Some(ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: Some(".spec.selector".into()),
        });
        self
    }

    fn serving(self, serving: Serving) -> Self {
        Self { serving, ..self }
    }

    /// Whether objects come from the workload model, not the store.
    pub fn is_virtual(&self) -> bool {
        self.serving == Serving::Virtual
    }

    /// Whether only `create` is served.
    pub fn is_create_only(&self) -> bool {
        self.serving == Serving::CreateOnly
    }

    /// `apiVersion` for `version`.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// `apiVersion` of the preferred version.
    pub fn preferred_api_version(&self) -> String {
        self.api_version(self.versions.first().map_or("v1", String::as_str))
    }

    /// Whether `version` is served.
    pub fn serves(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v == version)
    }

    /// The verbs of the main resource, as discovery lists them.
    fn verbs(&self) -> Value {
        match self.serving {
            Serving::CreateOnly => json!(["create"]),
            Serving::Virtual => json!(["get", "list"]),
            Serving::Stored => {
                json!([
                    "create",
                    "delete",
                    "deletecollection",
                    "get",
                    "list",
                    "patch",
                    "update",
                    "watch"
                ])
            }
        }
    }
}

/// Storage key of a resource: (group, plural).
pub type ResourceKey = (String, String);

/// All served resources, shared between the REST layer and the workload model.
#[derive(Debug, Default)]
pub struct Registry {
    defs: RwLock<Vec<Arc<ResourceDef>>>,
}

impl Registry {
    /// A registry of the built-in kinds.
    pub fn with_builtins() -> Self {
        let defs = builtins().into_iter().map(Arc::new).collect();
        Self {
            defs: RwLock::new(defs),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<ResourceDef>>> {
        self.defs
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The resource served at group/version/plural.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.read()
            .iter()
            .find(|d| d.group == group && d.plural == plural && d.serves(version))
            .cloned()
    }

    /// The resource stored under group/plural (any version).
    pub fn by_key(&self, group: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.read()
            .iter()
            .find(|d| d.group == group && d.plural == plural)
            .cloned()
    }

    /// The resource of `kind` in `group`.
    pub fn by_kind(&self, group: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        self.read()
            .iter()
            .find(|d| d.group == group && d.kind == kind)
            .cloned()
    }

    /// Every resource.
    pub fn all(&self) -> Vec<Arc<ResourceDef>> {
        self.read().clone()
    }

    /// Adds or replaces a resource (by group and plural).
    pub fn upsert(&self, def: ResourceDef) {
        let mut defs = self
            .defs
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        defs.retain(|d| !(d.group == def.group && d.plural == def.plural));
        defs.push(Arc::new(def));
    }

    /// Removes a resource.
    pub fn remove(&self, group: &str, plural: &str) {
        let mut defs = self
            .defs
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        defs.retain(|d| !(d.group == group && d.plural == plural));
    }

    /// `/api`: the core group's versions.
    pub fn api_versions(&self, server_address: &str) -> Value {
        json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
        })
    }

    fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for d in self.read().iter().filter(|d| !d.group.is_empty()) {
            let versions = groups.entry(d.group.clone()).or_default();
            for v in &d.versions {
                if !versions.contains(v) {
                    versions.push(v.clone());
                }
            }
        }
        groups
    }

    fn group_json(name: &str, versions: &[String]) -> Value {
        let vs: Vec<Value> = versions
            .iter()
            .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
            .collect();
        json!({"name": name, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
    }

    /// `/apis`: every non-core group.
    pub fn api_group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .groups()
            .iter()
            .map(|(g, vs)| Self::group_json(g, vs))
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// `/apis/{group}`.
    pub fn api_group(&self, group: &str) -> Option<Value> {
        let groups = self.groups();
        let vs = groups.get(group)?;
        let mut g = Self::group_json(group, vs);
        g["kind"] = json!("APIGroup");
        g["apiVersion"] = json!("v1");
        Some(g)
    }

    /// `/api/v1` or `/apis/{group}/{version}`: the resources and subresources served there.
    pub fn api_resource_list(&self, group: &str, version: &str) -> Option<Value> {
        let defs: Vec<Arc<ResourceDef>> = self
            .read()
            .iter()
            .filter(|d| d.group == group && d.serves(version))
            .cloned()
            .collect();
        if defs.is_empty() {
            return None;
        }
        let mut resources = Vec::new();
        for d in &defs {
            let mut r = json!({
                "name": d.plural, "singularName": d.singular, "namespaced": d.namespaced,
                "kind": d.kind, "verbs": d.verbs(),
            });
            if !d.short_names.is_empty() {
                r["shortNames"] = json!(d.short_names);
            }
            if !d.categories.is_empty() {
                r["categories"] = json!(d.categories);
            }
            resources.push(r);
            if d.status {
                resources.push(json!({"name": format!("{}/status", d.plural), "singularName": "", "namespaced": d.namespaced,
                    "kind": d.kind, "verbs": ["get", "patch", "update"]}));
            }
            if d.scale.is_some() {
                resources.push(json!({"name": format!("{}/scale", d.plural), "singularName": "", "namespaced": d.namespaced,
                    "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}));
            }
            for sub in &d.extra_subresources {
                let (kind, group, verbs) = match *sub {
                    "eviction" => ("Eviction", "policy", json!(["create"])),
                    "token" => ("TokenRequest", "authentication.k8s.io", json!(["create"])),
                    _ => ("Pod", "", json!(["get", "patch", "update"])),
                };
                let mut r = json!({"name": format!("{}/{sub}", d.plural), "singularName": "", "namespaced": d.namespaced,
                    "kind": kind, "verbs": verbs});
                if !group.is_empty() {
                    r["group"] = json!(group);
                    r["version"] = json!("v1");
                }
                resources.push(r);
            }
        }
        let gv = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        Some(
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
        )
    }
}

impl Registry {
    fn group_versions(&self) -> Vec<(String, String)> {
        let mut gvs: Vec<(String, String)> = Vec::new();
        for d in self.read().iter().filter(|d| !d.is_virtual()) {
            for v in &d.versions {
                let gv = (d.group.clone(), v.clone());
                if !gvs.contains(&gv) {
                    gvs.push(gv);
                }
            }
        }
        gvs
    }

    /// `/openapi/v3`: one entry per served group-version.
    pub fn openapi_v3_index(&self) -> Value {
        let mut paths = serde_json::Map::new();
        for (g, v) in self.group_versions() {
            let p = if g.is_empty() {
                format!("api/{v}")
            } else {
                format!("apis/{g}/{v}")
            };
            paths.insert(
                p.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=0")}),
            );
        }
        json!({"paths": paths})
    }

    /// `/openapi/v3/{api|apis/g}/{v}`: a minimal document with one operation per resource that
    /// declares its group-version-kind and the `fieldValidation` parameter, which is what
    /// kubectl looks for to use server-side field validation. No schemas are published.
    pub fn openapi_v3_doc(&self, group: &str, version: &str) -> Option<Value> {
        let defs: Vec<Arc<ResourceDef>> = self
            .read()
            .iter()
            .filter(|d| d.group == group && d.serves(version) && !d.is_virtual())
            .cloned()
            .collect();
        if defs.is_empty() {
            return None;
        }
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let mut paths = serde_json::Map::new();
        let params = json!([
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        ]);
        for d in defs {
            let gvk = json!({"group": group, "version": version, "kind": d.kind});
            let path = if d.namespaced {
                format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", d.plural)
            } else {
                format!("{prefix}/{}/{{name}}", d.plural)
            };
            let op = |verb: &str| json!({"operationId": format!("{verb}{}", d.kind), "x-kubernetes-action": verb, "x-kubernetes-group-version-kind": gvk, "parameters": params, "responses": {"200": {"description": "OK"}}});
            paths.insert(path, json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}));
            let coll = if d.namespaced {
                format!("{prefix}/namespaces/{{namespace}}/{}", d.plural)
            } else {
                format!("{prefix}/{}", d.plural)
            };
            paths.insert(coll, json!({"get": op("list"), "post": op("post")}));
        }
        Some(
            json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.34.0"}, "paths": paths, "components": {"schemas": {}}}),
        )
    }
}

/// What a built-in kind serves beyond get/list/watch/write.
#[derive(Clone, Copy)]
enum Trait {
    /// In the `all` category (`kubectl get all`).
    All,
    /// A `/status` subresource.
    Status,
    /// A `/scale` subresource on `.spec.replicas` / `.status.replicas` / `.spec.selector`.
    Scale,
    /// Served from the workload model, not the store (metrics APIs).
    Virtual,
    /// Only `create` (reviews).
    CreateOnly,
    /// Further subresources (`pods/eviction`, `pods/resize`).
    Subresources(&'static [&'static str]),
    /// Server-side printer columns after NAME: (header, type, JSON path), for kinds whose
    /// columns are plain fields.
    Columns(&'static [(&'static str, &'static str, &'static str)]),
}

/// A built-in kind: group, version, plural, kind, namespaced, short names, traits.
type Builtin = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
    &'static [Trait],
);

/// The built-in kinds (issue 3's list plus what kubectl and the controllers read), in
/// discovery order.
const BUILTINS: &[Builtin] = {
    use Trait::{All, Columns, CreateOnly, Scale, Status, Subresources, Virtual};
    // `kubectl get roles|clusterroles` prints NAME and CREATED AT (a timestamp, not an age).
    const CREATED_AT: Trait = Columns(&[("Created At", "string", ".metadata.creationTimestamp")]);
    &[
        (
            "",
            "v1",
            "namespaces",
            "Namespace",
            false,
            &["ns"],
            &[Status],
        ),
        ("", "v1", "nodes", "Node", false, &["no"], &[Status]),
        (
            "",
            "v1",
            "pods",
            "Pod",
            true,
            &["po"],
            &[All, Status, Subresources(&["eviction", "resize"])],
        ),
        ("", "v1", "events", "Event", true, &["ev"], &[]),
        (
            "",
            "v1",
            "limitranges",
            "LimitRange",
            true,
            &["limits"],
            &[],
        ),
        ("", "v1", "secrets", "Secret", true, &[], &[]),
        ("", "v1", "configmaps", "ConfigMap", true, &["cm"], &[]),
        (
            "",
            "v1",
            "serviceaccounts",
            "ServiceAccount",
            true,
            &["sa"],
            &[Subresources(&["token"])],
        ),
        (
            "",
            "v1",
            "services",
            "Service",
            true,
            &["svc"],
            &[All, Status],
        ),
        ("", "v1", "endpoints", "Endpoints", true, &["ep"], &[]),
        ("events.k8s.io", "v1", "events", "Event", true, &["ev"], &[]),
        (
            "apps",
            "v1",
            "deployments",
            "Deployment",
            true,
            &["deploy"],
            &[All, Status, Scale],
        ),
        (
            "apps",
            "v1",
            "replicasets",
            "ReplicaSet",
            true,
            &["rs"],
            &[All, Status, Scale],
        ),
        (
            "apps",
            "v1",
            "statefulsets",
            "StatefulSet",
            true,
            &["sts"],
            &[All, Status, Scale],
        ),
        (
            "apps",
            "v1",
            "daemonsets",
            "DaemonSet",
            true,
            &["ds"],
            &[All, Status],
        ),
        (
            "apps",
            "v1",
            "controllerrevisions",
            "ControllerRevision",
            true,
            &[],
            &[],
        ),
        ("batch", "v1", "jobs", "Job", true, &[], &[All, Status]),
        (
            "autoscaling",
            "v2",
            "horizontalpodautoscalers",
            "HorizontalPodAutoscaler",
            true,
            &["hpa"],
            &[All, Status],
        ),
        (
            "policy",
            "v1",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            true,
            &["pdb"],
            &[Status],
        ),
        (
            "coordination.k8s.io",
            "v1",
            "leases",
            "Lease",
            true,
            &[],
            &[],
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "clusterroles",
            "ClusterRole",
            false,
            &[],
            &[CREATED_AT],
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            "ClusterRoleBinding",
            false,
            &[],
            &[],
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "roles",
            "Role",
            true,
            &[],
            &[CREATED_AT],
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "rolebindings",
            "RoleBinding",
            true,
            &[],
            &[],
        ),
        // Reviews are answered by `rbac::gate`, never stored; listed here for discovery.
        (
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
            "SelfSubjectAccessReview",
            false,
            &[],
            &[CreateOnly],
        ),
        (
            "authorization.k8s.io",
            "v1",
            "subjectaccessreviews",
            "SubjectAccessReview",
            false,
            &[],
            &[CreateOnly],
        ),
        (
            "authorization.k8s.io",
            "v1",
            "localsubjectaccessreviews",
            "LocalSubjectAccessReview",
            true,
            &[],
            &[CreateOnly],
        ),
        (
            "authentication.k8s.io",
            "v1",
            "tokenreviews",
            "TokenReview",
            false,
            &[],
            &[CreateOnly],
        ),
        (
            "authentication.k8s.io",
            "v1",
            "selfsubjectreviews",
            "SelfSubjectReview",
            false,
            &[],
            &[CreateOnly],
        ),
        (
            "admissionregistration.k8s.io",
            "v1",
            "mutatingwebhookconfigurations",
            "MutatingWebhookConfiguration",
            false,
            &[],
            &[],
        ),
        (
            "admissionregistration.k8s.io",
            "v1",
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
            false,
            &[],
            &[],
        ),
        (
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
            &["crd", "crds"],
            &[Status],
        ),
        (
            "metrics.k8s.io",
            "v1beta1",
            "pods",
            "PodMetrics",
            true,
            &[],
            &[Virtual],
        ),
        (
            "metrics.k8s.io",
            "v1beta1",
            "nodes",
            "NodeMetrics",
            false,
            &[],
            &[Virtual],
        ),
        (
            "custom.metrics.k8s.io",
            "v1beta2",
            "pods/*",
            "MetricValueList",
            true,
            &[],
            &[Virtual],
        ),
        (
            "external.metrics.k8s.io",
            "v1beta1",
            "*",
            "ExternalMetricValueList",
            true,
            &[],
            &[Virtual],
        ),
    ]
};

/// The built-in kinds as served resources.
fn builtins() -> Vec<ResourceDef> {
    BUILTINS
        .iter()
        .map(
            |&(group, version, plural, kind, namespaced, short, traits)| {
                let def =
                    ResourceDef::builtin(group, version, plural, kind, namespaced).short(short);
                traits.iter().fold(def, |def, t| match t {
                    Trait::All => def.all(),
                    Trait::Status => def.with_status(),
                    Trait::Scale => def.with_scale(),
                    Trait::Virtual => def.serving(Serving::Virtual),
                    Trait::CreateOnly => def.serving(Serving::CreateOnly),
                    Trait::Subresources(subs) => ResourceDef {
                        extra_subresources: subs.to_vec(),
                        ..def
                    },
                    Trait::Columns(cols) => ResourceDef {
                        printer_columns: cols
                            .iter()
                            .map(|&(name, type_, path)| PrinterColumn {
                                name: name.into(),
                                type_: type_.into(),
                                json_path: path.into(),
                                priority: 0,
                            })
                            .collect(),
                        ..def
                    },
                })
            },
        )
        .collect()
}

/// Builds the served resource of a CRD object (`apiextensions.k8s.io/v1`).
pub fn crd_resource(crd: &Value) -> Option<ResourceDef> {
    let spec = crd.get("spec")?;
    let group = spec.get("group")?.as_str()?.to_string();
    let names = spec.get("names")?;
    let plural = names.get("plural")?.as_str()?.to_string();
    let kind = names.get("kind")?.as_str()?.to_string();
    let singular = names
        .get("singular")
        .and_then(Value::as_str)
        .map_or_else(|| kind.to_lowercase(), String::from);
    let strs = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut versions = Vec::new();
    let mut schemas = BTreeMap::new();
    let mut status = false;
    let mut scale = None;
    let mut printer_columns = Vec::new();
    let mut all_versions: Vec<&Value> = spec
        .get("versions")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    // The storage version is preferred, as kube-apiserver orders discovery by priority.
    all_versions.sort_by_key(|v| !v.get("storage").and_then(Value::as_bool).unwrap_or(false));
    for v in all_versions {
        if !v.get("served").and_then(Value::as_bool).unwrap_or(true) {
            continue;
        }
        let name = v.get("name")?.as_str()?.to_string();
        if let Some(schema) = v.pointer("/schema/openAPIV3Schema") {
            schemas.insert(name.clone(), schema.clone());
        }
        if versions.is_empty() {
            status = v.pointer("/subresources/status").is_some();
            scale = v.pointer("/subresources/scale").map(|s| ScalePaths {
                spec_replicas: s
                    .get("specReplicasPath")
                    .and_then(Value::as_str)
                    .unwrap_or(".spec.replicas")
                    .into(),
                status_replicas: s
                    .get("statusReplicasPath")
                    .and_then(Value::as_str)
                    .unwrap_or(".status.replicas")
                    .into(),
                label_selector: s
                    .get("labelSelectorPath")
                    .and_then(Value::as_str)
                    .map(String::from),
            });
            if let Some(cols) = v.get("additionalPrinterColumns").and_then(Value::as_array) {
                printer_columns = cols
                    .iter()
                    .map(|c| PrinterColumn {
                        name: c
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .into(),
                        type_: c
                            .get("type")
                            .and_then(Value::as_str)
                            .unwrap_or("string")
                            .into(),
                        json_path: c
                            .get("jsonPath")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .into(),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                    })
                    .collect();
            }
        }
        versions.push(name);
    }
    if versions.is_empty() {
        return None;
    }
    Some(ResourceDef {
        group,
        versions,
        plural,
        singular,
        kind,
        namespaced: spec.get("scope").and_then(Value::as_str) != Some("Cluster"),
        short_names: strs(names.get("shortNames")),
        categories: strs(names.get("categories")),
        status,
        scale,
        extra_subresources: Vec::new(),
        printer_columns,
        schemas,
        serving: Serving::Stored,
    })
}

/// Applies `OpenAPI` v3 schema `default`s to `obj` in place (structural-schema defaulting:
/// a property with a default that is absent gets it; recursion into objects, arrays and
/// additionalProperties that are present).
pub fn apply_defaults(schema: &Value, obj: &mut Value) {
    match obj {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (name, prop) in props {
                    if !map.contains_key(name)
                        && let Some(d) = prop.get("default")
                    {
                        map.insert(name.clone(), d.clone());
                    }
                    if let Some(child) = map.get_mut(name) {
                        apply_defaults(prop, child);
                    }
                }
            }
            if let Some(ap) = schema.get("additionalProperties").filter(|v| v.is_object()) {
                for (_, child) in map.iter_mut() {
                    apply_defaults(ap, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    apply_defaults(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

/// Reads a simple JSON path (`.status.replicas`, `.spec.selector`) from an object.
pub fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let p = path.trim_start_matches('{').trim_end_matches('}');
    let mut cur = obj;
    for seg in p
        .trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
    {
        cur = cur.get(seg)?;
    }
    Some(cur)
}

/// Writes a simple JSON path, creating intermediate objects.
pub fn set_json_path(obj: &mut Value, path: &str, value: Value) {
    let segs: Vec<&str> = path
        .trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
        .collect();
    let mut cur = obj;
    for (i, seg) in segs.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Some(map) = cur.as_object_mut() else {
            return;
        };
        if i + 1 == segs.len() {
            map.insert((*seg).to_string(), value);
            return;
        }
        cur = map.entry((*seg).to_string()).or_insert_with(|| json!({}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_absent_fields_only() {
        // upstream: staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting/algorithm_test.go TestDefault
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "minReplicas": {"type": "integer", "default": 1},
            "behavior": {"type": "object", "properties": {"tolerance": {"type": "number", "default": 0.1}}},
            "metrics": {"type": "array", "items": {"type": "object", "properties": {"weight": {"default": 5}}}}
        }}}});
        let mut obj =
            json!({"spec": {"minReplicas": 3, "behavior": {}, "metrics": [{}, {"weight": 1}]}});
        apply_defaults(&schema, &mut obj);
        assert_eq!(
            obj,
            json!({"spec": {"minReplicas": 3, "behavior": {"tolerance": 0.1}, "metrics": [{"weight": 5}, {"weight": 1}]}})
        );
    }

    #[test]
    fn crd_becomes_a_resource() {
        let crd = json!({"spec": {"group": "x.dev", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"}},
                "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]}]}});
        let d = crd_resource(&crd).unwrap();
        assert!(d.status && d.namespaced);
        assert_eq!(d.scale.unwrap().spec_replicas, ".spec.size");
        assert_eq!(d.printer_columns[0].name, "Size");
        let reg = Registry::with_builtins();
        assert!(
            reg.api_resource_list("apps", "v1").unwrap()["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["name"] == "deployments/scale")
        );
    }

    #[test]
    fn json_paths_read_and_write() {
        let mut v = json!({});
        set_json_path(&mut v, ".spec.size", json!(3));
        assert_eq!(json_path(&v, ".spec.size"), Some(&json!(3)));
        assert_eq!(json_path(&v, "{.spec.size}"), Some(&json!(3)));
    }
}
