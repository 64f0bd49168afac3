//! Resolving `apiVersion` + `kind` to an API resource (plural, scope, scale subresource).
//!
//! Targets are named by kind (`scaleTargetRef`, `targetRef`, object metrics'
//! `describedObject`), but URLs need the plural resource name. The built-in workload kinds
//! (`apps/v1` `Deployment`, `StatefulSet`, `ReplicaSet`, `DaemonSet`; `batch/v1` `Job`,
//! `CronJob`; `v1` `ReplicationController`) are known without asking; everything else (custom
//! resources with a scale subresource, object-metric targets) goes through discovery once per
//! `apiVersion`+`kind` and is cached for the life of the resolver. [`KindResolver::forget`] drops
//! an entry (e.g. after a 404 suggests a CRD was reinstalled with another version).
//!
//! A kind that does not resolve is not asked about again and again: the names come from
//! namespace users, and a thousand autoscalers naming a thousand kinds no cluster serves would
//! otherwise make a discovery request each at every evaluation (tens a second, and with
//! `--kube-api-qps` the tokens every other write waits on). Misses are answered from the
//! group-versions the cluster serves (`/api`, `/apis`) and from each served group-version's
//! resources, both read again at most every [`REDISCOVER_AFTER`]: whatever the autoscalers
//! name, discovery costs at most two requests plus one per served group-version they name, per
//! period. Upstream's controller manager resets its discovery cache every 30 s for the same
//! reason; a kind installed since is found within [`REDISCOVER_AFTER`].

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use kube::Client;
use kube::core::gvk::{GroupVersion, GroupVersionKind};
use kube::discovery::{self, ApiCapabilities, ApiResource, Scope};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::error::{Error, Result};

/// A borrowed reference to one object by `apiVersion`, `kind` and `name` (its namespace is
/// passed alongside). Built from any of the three `CrossVersionObjectReference` types in use
/// (`autoscaling/v1` for the VPA, `autoscaling/v2` for `CronHPA`, Plimsoll's own for HPA+), so the
/// clients take `impl Into<TargetRef>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TargetRef<'a> {
    /// `apps/v1`, `v1`, `example.com/v1alpha1`; empty when the reference had none.
    pub api_version: &'a str,
    /// `Deployment`, `WebApp`, …
    pub kind: &'a str,
    /// Object name.
    pub name: &'a str,
}

impl<'a> TargetRef<'a> {
    /// A reference from its parts.
    pub fn new(api_version: &'a str, kind: &'a str, name: &'a str) -> Self {
        Self {
            api_version,
            kind,
            name,
        }
    }

    /// `Ok` when the name can go into a request's path as one segment. Upstream validation
    /// refuses `.`, `..`, `/` and `%` in it; `?` and `#` would end the path. The API server
    /// does not normalise paths, and kube-rs joins the name in unescaped, so without this a
    /// name could address another object or subresource than the one it names.
    pub fn check_name(&self) -> crate::Result<()> {
        let mut problems = plimsoll_core::api::validation::path_segment_problems(self.name);
        for (c, problem) in [('?', "may not contain '?'"), ('#', "may not contain '#'")] {
            if self.name.contains(c) {
                problems.push(problem);
            }
        }
        if problems.is_empty() {
            return Ok(());
        }
        Err(crate::Error::TargetName {
            name: plimsoll_core::quoted::quoted(self.name),
            reason: problems.join(", "),
        })
    }

    /// The API group (`apps`; empty for the core group).
    pub fn group(&self) -> &'a str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }
}

impl std::fmt::Display for TargetRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let api_version = if self.api_version.is_empty() {
            "<no apiVersion>"
        } else {
            self.api_version
        };
        write!(f, "{api_version} {} {}", self.kind, self.name)
    }
}

impl<'a> From<&'a k8s_openapi::api::autoscaling::v1::CrossVersionObjectReference>
    for TargetRef<'a>
{
    fn from(r: &'a k8s_openapi::api::autoscaling::v1::CrossVersionObjectReference) -> Self {
        Self::new(
            r.api_version.as_deref().unwrap_or_default(),
            &r.kind,
            &r.name,
        )
    }
}

impl<'a> From<&'a k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference>
    for TargetRef<'a>
{
    fn from(r: &'a k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference) -> Self {
        Self::new(
            r.api_version.as_deref().unwrap_or_default(),
            &r.kind,
            &r.name,
        )
    }
}

impl<'a> From<&'a plimsoll_core::api::hpa_plus::CrossVersionObjectReference> for TargetRef<'a> {
    fn from(r: &'a plimsoll_core::api::hpa_plus::CrossVersionObjectReference) -> Self {
        Self::new(
            r.api_version.as_deref().unwrap_or_default(),
            &r.kind,
            &r.name,
        )
    }
}

/// A kind resolved to its resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedKind {
    /// Group, version, kind and plural, for building `Api<DynamicObject>` or URLs.
    pub resource: ApiResource,
    /// True for namespaced kinds.
    pub namespaced: bool,
    /// True when the resource has a `scale` subresource.
    pub scalable: bool,
}

impl ResolvedKind {
    /// The qualified resource name used in URLs such as the custom metrics API:
    /// `deployments.apps`, or just `pods` for the core group.
    pub fn qualified_resource(&self) -> String {
        if self.resource.group.is_empty() {
            self.resource.plural.clone()
        } else {
            format!("{}.{}", self.resource.plural, self.resource.group)
        }
    }
}

/// How long what discovery said is trusted for a kind that did not resolve (module docs).
pub const REDISCOVER_AFTER: Duration = Duration::from_secs(5);

/// The resources of one group-version, top-level only, with their capabilities.
type Resources = Vec<(ApiResource, ApiCapabilities)>;

/// What discovery said, and when.
type Read<T> = (Instant, Arc<T>);

/// A cached resolver shared by the scale and metrics clients (cheap to clone).
#[derive(Clone)]
pub struct KindResolver {
    client: Client,
    cache: Arc<RwLock<HashMap<(String, String), ResolvedKind>>>,
    /// The group-versions the cluster serves. Locked across its read: concurrent misses wait
    /// for one read.
    served: Arc<Mutex<Option<Read<HashSet<String>>>>>,
    /// Per served group-version, its resources; keyed only by served group-versions.
    resources: Arc<Mutex<HashMap<String, Read<Resources>>>>,
}

impl KindResolver {
    /// A resolver with an empty cache.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            cache: Arc::default(),
            served: Arc::default(),
            resources: Arc::default(),
        }
    }

    /// Resolves the kind of `target` (its name is not used).
    pub async fn resolve_target(&self, target: TargetRef<'_>) -> Result<ResolvedKind> {
        self.resolve(target.api_version, target.kind).await
    }

    /// Resolves the kind of a workload an autoscaler acts on: `target` must be namespaced,
    /// so that it is read and written in the autoscaler's own namespace. A cluster-scoped
    /// kind with a scale subresource would otherwise let a namespace's user steer an object
    /// no namespace owns, with the controller's credentials (upstream's scale client always
    /// addresses the autoscaler's namespace).
    pub async fn resolve_workload(&self, target: TargetRef<'_>) -> Result<ResolvedKind> {
        let resolved = self.resolve_target(target).await?;
        if !resolved.namespaced {
            return Err(Error::Discovery {
                api_version: target.api_version.to_owned(),
                kind: target.kind.to_owned(),
                reason:
                    "the resource is cluster-scoped; a target must be in the autoscaler's namespace"
                        .into(),
            });
        }
        Ok(resolved)
    }

    /// Resolves `api_version` (`apps/v1`, `v1`, `example.com/v1alpha1`) and `kind`.
    pub async fn resolve(&self, api_version: &str, kind: &str) -> Result<ResolvedKind> {
        let key = (api_version.to_owned(), kind.to_owned());
        if let Some(found) = self.cache.read().ok().and_then(|c| c.get(&key).cloned()) {
            return Ok(found);
        }
        let gvk = parse_gvk(api_version, kind)?;
        let resolved = if let Some(resolved) = builtin(&gvk) {
            resolved
        } else {
            let failed = |e: &kube::Error| discovery_error(api_version, kind, e);
            if !self
                .served()
                .await
                .map_err(|e| failed(&e))?
                .contains(api_version)
            {
                return Err(Error::Discovery {
                    api_version: api_version.to_owned(),
                    kind: kind.to_owned(),
                    reason: not_served(api_version),
                });
            }
            let resources = self.resources(&gvk).await.map_err(|e| failed(&e))?;
            let Some((resource, caps)) = resources.iter().find(|(r, _)| r.kind == kind) else {
                return Err(failed(&kube::Error::Discovery(
                    kube::error::DiscoveryError::MissingKind(kind.to_owned()),
                )));
            };
            ResolvedKind {
                resource: resource.clone(),
                namespaced: caps.scope == Scope::Namespaced,
                scalable: caps
                    .subresources
                    .iter()
                    .any(|(sub, _)| sub.plural == "scale"),
            }
        };
        if let Ok(mut cache) = self.cache.write() {
            cache.insert(key, resolved.clone());
        }
        Ok(resolved)
    }

    /// Drops the cached resolution of `api_version` + `kind`.
    pub fn forget(&self, api_version: &str, kind: &str) {
        if let Ok(mut cache) = self.cache.write() {
            cache.remove(&(api_version.to_owned(), kind.to_owned()));
        }
    }

    /// The client this resolver queries.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The group-versions the cluster serves, read again when older than
    /// [`REDISCOVER_AFTER`] (only a kind not cached asks).
    async fn served(&self) -> kube::Result<Arc<HashSet<String>>> {
        let mut served = self.served.lock().await;
        if let Some((at, set)) = served.as_ref()
            && at.elapsed() < REDISCOVER_AFTER
        {
            return Ok(set.clone());
        }
        let core = self.client.list_core_api_versions().await?;
        let groups = self.client.list_api_groups().await?;
        let set: HashSet<String> = core
            .versions
            .into_iter()
            .chain(
                groups
                    .groups
                    .into_iter()
                    .flat_map(|g| g.versions.into_iter().map(|v| v.group_version)),
            )
            .collect();
        let set = Arc::new(set);
        *served = Some((Instant::now(), set.clone()));
        Ok(set)
    }

    /// The resources of `gvk`'s group-version (served: [`Self::served`] said so), read again
    /// when older than [`REDISCOVER_AFTER`].
    async fn resources(&self, gvk: &GroupVersionKind) -> kube::Result<Arc<Resources>> {
        let api_version = gvk.api_version();
        let mut all = self.resources.lock().await;
        if let Some((at, list)) = all.get(&api_version)
            && at.elapsed() < REDISCOVER_AFTER
        {
            return Ok(list.clone());
        }
        let gv = GroupVersion::gv(&gvk.group, &gvk.version);
        let group = discovery::pinned_group(&self.client, &gv).await?;
        let list = Arc::new(group.versioned_resources(&gvk.version));
        all.insert(api_version, (Instant::now(), list.clone()));
        Ok(list)
    }
}

/// Why a group-version the cluster does not serve resolves nothing.
fn not_served(api_version: &str) -> String {
    format!("API version {api_version} is not served by this cluster")
}

fn parse_gvk(api_version: &str, kind: &str) -> Result<GroupVersionKind> {
    let fail = |reason: &str| Error::Discovery {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        reason: reason.to_owned(),
    };
    if api_version.is_empty() {
        return Err(fail("apiVersion is empty"));
    }
    if kind.is_empty() {
        return Err(fail("kind is empty"));
    }
    let gv: GroupVersion = api_version
        .parse()
        .map_err(|_| fail("apiVersion must be <group>/<version> or <version>"))?;
    // The group and version become segments of the discovery URL: they must be what an API
    // server can serve (a DNS subdomain, a DNS label), not a path or a query of the tenant's.
    let label = |s: &str, max: usize, dots: bool| {
        !s.is_empty()
            && s.len() <= max
            && s.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || (dots && b == b'.')
            })
    };
    if !(gv.group.is_empty() || label(&gv.group, 253, true)) || !label(&gv.version, 63, false) {
        return Err(fail(
            "apiVersion must be <group>/<version> or <version>, in lower-case letters, digits, '-' and '.'",
        ));
    }
    Ok(gv.with_kind(kind))
}

fn discovery_error(api_version: &str, kind: &str, err: &kube::Error) -> Error {
    let reason = match err {
        kube::Error::Api(status) if status.code == 404 => not_served(api_version),
        kube::Error::Discovery(_) => format!("kind {kind} is not served in {api_version}"),
        other => crate::api_message(other),
    };
    Error::Discovery {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        reason,
    }
}

/// The built-in workload kinds: stable, so no discovery round trip is needed.
fn builtin(gvk: &GroupVersionKind) -> Option<ResolvedKind> {
    let (plural, scalable) = match (gvk.group.as_str(), gvk.version.as_str(), gvk.kind.as_str()) {
        ("apps", "v1", "Deployment") => ("deployments", true),
        ("apps", "v1", "StatefulSet") => ("statefulsets", true),
        ("apps", "v1", "ReplicaSet") => ("replicasets", true),
        ("", "v1", "ReplicationController") => ("replicationcontrollers", true),
        ("apps", "v1", "DaemonSet") => ("daemonsets", false),
        ("batch", "v1", "Job") => ("jobs", false),
        ("batch", "v1", "CronJob") => ("cronjobs", false),
        _ => return None,
    };
    Some(ResolvedKind {
        resource: ApiResource::from_gvk_with_plural(gvk, plural),
        namespaced: true,
        scalable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_api::FakeApi;

    const DISCOVERY: &str = r#"{
      "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "example.com/v1",
      "resources": [
        {"name": "webapps", "singularName": "webapp", "namespaced": true, "kind": "WebApp",
         "verbs": ["get", "list", "patch"]},
        {"name": "webapps/scale", "singularName": "", "namespaced": true, "group": "autoscaling",
         "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]},
        {"name": "webapps/status", "singularName": "", "namespaced": true, "kind": "WebApp",
         "verbs": ["get"]},
        {"name": "dashboards", "singularName": "dashboard", "namespaced": false, "kind": "Dashboard",
         "verbs": ["get"]}
      ]}"#;

    const CORE: &str = r#"{"kind": "APIVersions", "versions": ["v1"],
      "serverAddressByClientCIDRs": []}"#;

    const GROUPS: &str = r#"{"kind": "APIGroupList", "apiVersion": "v1", "groups": [
      {"name": "example.com", "versions": [{"groupVersion": "example.com/v1", "version": "v1"}],
       "preferredVersion": {"groupVersion": "example.com/v1", "version": "v1"}}]}"#;

    /// A cluster serving `v1` and `example.com/v1` ([`DISCOVERY`]).
    fn cluster() -> FakeApi {
        let api = FakeApi::new();
        api.respond("GET", "/api", 200, CORE);
        api.respond("GET", "/apis", 200, GROUPS);
        api.respond("GET", "/apis/example.com/v1", 200, DISCOVERY);
        api
    }

    /// Kinds no cluster serves, named by a thousand autoscalers and evaluated again and
    /// again: three requests in all until [`REDISCOVER_AFTER`], then three more.
    #[tokio::test(start_paused = true)]
    async fn kinds_not_served_are_answered_from_memory() {
        let api = cluster();
        let kinds = KindResolver::new(api.client());
        for _ in 0..3 {
            for i in 0..500 {
                let err = kinds
                    .resolve(&format!("x{i}.example.com/v1"), "WebApp")
                    .await
                    .unwrap_err();
                assert!(
                    err.to_string().contains("not served by this cluster"),
                    "{err}"
                );
                let err = kinds
                    .resolve("example.com/v1", &format!("Nope{i}"))
                    .await
                    .unwrap_err();
                assert!(err.to_string().contains("is not served in"), "{err}");
            }
        }
        let paths =
            |api: &FakeApi| -> Vec<String> { api.requests().into_iter().map(|r| r.uri).collect() };
        assert_eq!(paths(&api), ["/api", "/apis", "/apis/example.com/v1"]);
        tokio::time::advance(REDISCOVER_AFTER).await;
        kinds
            .resolve("x0.example.com/v1", "WebApp")
            .await
            .unwrap_err();
        kinds.resolve("example.com/v1", "Nope0").await.unwrap_err();
        assert_eq!(paths(&api).len(), 6, "{:?}", paths(&api));
    }

    /// A group-version or a kind installed after a miss is found once the miss is
    /// [`REDISCOVER_AFTER`] old.
    #[tokio::test(start_paused = true)]
    async fn a_kind_installed_later_is_found_after_the_rediscovery_period() {
        let api = FakeApi::new();
        api.respond("GET", "/api", 200, CORE);
        api.respond(
            "GET",
            "/apis",
            200,
            r#"{"kind": "APIGroupList", "groups": []}"#,
        );
        let kinds = KindResolver::new(api.client());
        kinds.resolve("example.com/v1", "WebApp").await.unwrap_err();
        api.respond("GET", "/apis", 200, GROUPS);
        api.respond("GET", "/apis/example.com/v1", 200, DISCOVERY);
        kinds.resolve("example.com/v1", "WebApp").await.unwrap_err();
        tokio::time::advance(REDISCOVER_AFTER).await;
        let web = kinds.resolve("example.com/v1", "WebApp").await.unwrap();
        assert!(web.scalable && web.namespaced);
    }

    #[tokio::test]
    async fn builtins_need_no_discovery() {
        let api = FakeApi::new();
        let kinds = KindResolver::new(api.client());
        let d = kinds.resolve("apps/v1", "Deployment").await.unwrap();
        assert_eq!(d.resource.plural, "deployments");
        assert_eq!(d.qualified_resource(), "deployments.apps");
        assert!(d.scalable && d.namespaced);
        let rc = kinds.resolve("v1", "ReplicationController").await.unwrap();
        assert_eq!(rc.qualified_resource(), "replicationcontrollers");
        assert!(api.requests().is_empty());
    }

    /// The group and version go into the discovery URL: anything but a group and a version
    /// is refused before a request.
    #[tokio::test]
    async fn an_api_version_that_is_not_a_group_and_version_makes_no_request() {
        let api = FakeApi::new();
        let kinds = KindResolver::new(api.client());
        for api_version in [
            "x/v1/../../../api/v1/namespaces/kube-system/secrets",
            "example.com/v1?watch=true",
            "example.com/v1#x",
            "Example.com/v1",
            "example.com/",
            "example com/v1",
        ] {
            let err = kinds.resolve(api_version, "WebApp").await.unwrap_err();
            assert!(
                err.to_string().contains("apiVersion must be"),
                "{api_version}: {err}"
            );
        }
        assert!(api.requests().is_empty(), "{:?}", api.requests());
        kinds.resolve("apps/v1", "Deployment").await.unwrap();
        kinds.resolve("v1", "ReplicationController").await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn custom_kinds_are_discovered_once() {
        let api = cluster();
        let kinds = KindResolver::new(api.client());
        let web = kinds.resolve("example.com/v1", "WebApp").await.unwrap();
        assert_eq!(web.qualified_resource(), "webapps.example.com");
        assert!(web.scalable && web.namespaced);
        tokio::time::advance(REDISCOVER_AFTER).await;
        let again = kinds.resolve("example.com/v1", "WebApp").await.unwrap();
        assert_eq!(again, web);
        assert_eq!(
            api.requests().len(),
            3,
            "served versions, the group-version; cached"
        );
        let dash = kinds.resolve("example.com/v1", "Dashboard").await.unwrap();
        assert!(!dash.scalable && !dash.namespaced);
        assert_eq!(
            api.requests().len(),
            6,
            "a miss, read again after the period"
        );
        kinds.forget("example.com/v1", "WebApp");
        kinds.resolve("example.com/v1", "WebApp").await.unwrap();
        assert_eq!(
            api.requests().len(),
            6,
            "a miss within the period: from memory"
        );
    }

    #[tokio::test]
    async fn unknown_kinds_and_versions_are_explained() {
        let api = cluster();
        let kinds = KindResolver::new(api.client());
        let err = kinds.resolve("example.com/v1", "Nope").await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot resolve example.com/v1 Nope: kind Nope is not served in example.com/v1"
        );
        let err = kinds.resolve("example.com/v9", "WebApp").await.unwrap_err();
        assert!(
            err.to_string().contains("not served by this cluster"),
            "{err}"
        );
        let err = kinds.resolve("", "WebApp").await.unwrap_err();
        assert!(err.to_string().contains("apiVersion is empty"), "{err}");
        let err = kinds.resolve("a/b/c", "WebApp").await.unwrap_err();
        assert_eq!(err.metric_label(), "discovery");
    }
}
