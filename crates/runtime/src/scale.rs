//! The scale subresource of any scalable kind and the selector of a target's pods (its
//! rollout state is read in [`crate::rollout`]).
//!
//! Works for `Deployment`, `StatefulSet`, `ReplicaSet`, `ReplicationController` and custom
//! resources that declare a scale subresource: the target's `apiVersion` + `kind` are resolved
//! through the shared [`KindResolver`], then `/scale` is read (`autoscaling/v1` Scale) or
//! merge-patched under the binary's field manager.
//!
//! The selector string in `status.selector` is parsed into a [`Selector`] so callers can match
//! pods from a reflector store without another request. [`ScaleClient::pod_selector`] also
//! covers the kinds a VPA may target that have no scale subresource (`DaemonSet`, `Job`,
//! `CronJob`). Targets are passed as anything that converts into a [`TargetRef`] (each of the
//! `CrossVersionObjectReference` types).
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> plimsoll_runtime::Result<()> {
//! use plimsoll_runtime::kinds::TargetRef;
//! use plimsoll_runtime::scale::ScaleClient;
//! let scales = ScaleClient::new(client, "hpa-plus");
//! let web = TargetRef::new("apps/v1", "Deployment", "web");
//! let scale = scales.get("shop", web).await?;
//! if scale.spec_replicas != 4 {
//!     scales.set_replicas("shop", web, 4).await?;
//! }
//! # Ok(()) }
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};

use crate::error::{Error, Result};
use crate::kinds::{KindResolver, ResolvedKind, TargetRef};
use crate::selector::Selector;
// Re-exported where callers have always found it; it lives lower, in its own module, so that
// `watched_scales` (below this module) can hold values of it.
pub use crate::target_scale::TargetScale;
use crate::watched_scales::WatchedScales;

/// Reads and writes the scale subresource of targets, and finds their pods' selector
/// (cheap to clone).
#[derive(Clone)]
pub struct ScaleClient {
    pub(crate) client: Client,
    kinds: KindResolver,
    field_manager: String,
    watched: Option<WatchedScales>,
}

impl ScaleClient {
    /// A client whose writes are recorded under `field_manager` (the binary name).
    pub fn new(client: Client, field_manager: &str) -> Self {
        let kinds = KindResolver::new(client.clone());
        Self::with_resolver(client, kinds, field_manager)
    }

    /// Like [`ScaleClient::new`] but sharing a resolver (and its cache) with other clients.
    pub fn with_resolver(client: Client, kinds: KindResolver, field_manager: &str) -> Self {
        Self {
            client,
            kinds,
            field_manager: field_manager.to_owned(),
            watched: None,
        }
    }

    /// The same client answering [`ScaleClient::get`] from `watched` where it can (see
    /// [`crate::watched_scales`]), and telling it of every scale write.
    #[must_use]
    pub fn with_watched(self, watched: WatchedScales) -> Self {
        Self {
            watched: Some(watched),
            ..self
        }
    }

    /// The resolver this client uses.
    pub fn kinds(&self) -> &KindResolver {
        &self.kinds
    }

    async fn api(&self, namespace: &str, target: TargetRef<'_>) -> Result<Api<DynamicObject>> {
        target.check_name()?;
        let resolved = self.kinds.resolve_workload(target).await?;
        Ok(self.api_for(namespace, &resolved))
    }

    fn api_for(&self, namespace: &str, resolved: &ResolvedKind) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &resolved.resource)
    }

    async fn scalable_api(
        &self,
        namespace: &str,
        target: TargetRef<'_>,
    ) -> Result<Api<DynamicObject>> {
        target.check_name()?;
        let resolved = self.kinds.resolve_workload(target).await?;
        if !resolved.scalable {
            return Err(Error::Discovery {
                api_version: target.api_version.to_owned(),
                kind: target.kind.to_owned(),
                reason: "the resource has no scale subresource".into(),
            });
        }
        Ok(self.api_for(namespace, &resolved))
    }

    /// Reads the target's scale: desired and current replicas and its pod selector; from the
    /// watches when the client has them ([`ScaleClient::with_watched`]) and they know the
    /// target, else from `/scale`.
    pub async fn get<'t>(
        &self,
        namespace: &str,
        target: impl Into<TargetRef<'t>>,
    ) -> Result<TargetScale> {
        let target = target.into();
        if let Some(scale) = self.watched.as_ref().and_then(|w| w.get(namespace, target)) {
            return Ok(scale);
        }
        let api = self.scalable_api(namespace, target).await?;
        let scale = api
            .get_scale(target.name)
            .await
            .map_err(|e| Error::kube(describe("get scale of", namespace, target), e))?;
        TargetScale::from_scale(&scale)
    }

    /// Sets `spec.replicas` with a merge patch on `/scale`; returns the scale after the write.
    pub async fn set_replicas<'t>(
        &self,
        namespace: &str,
        target: impl Into<TargetRef<'t>>,
        replicas: i32,
    ) -> Result<TargetScale> {
        let target = target.into();
        let api = self.scalable_api(namespace, target).await?;
        let patch = serde_json::json!({ "spec": { "replicas": replicas } });
        let params = PatchParams {
            field_manager: Some(self.field_manager.clone()),
            ..PatchParams::default()
        };
        let scale = api
            .patch_scale(target.name, &params, &Patch::Merge(&patch))
            .await
            .map_err(|e| {
                Error::kube(
                    format!("{} to {replicas}", describe("scale", namespace, target)),
                    e,
                )
            })?;
        let scale = TargetScale::from_scale(&scale)?;
        if let Some(watched) = &self.watched {
            watched.wrote(namespace, target, &scale);
        }
        Ok(scale)
    }

    /// The selector of the pods `target` manages, as the VPA and HPA find them:
    /// `spec.selector` of `Deployment`, `StatefulSet`, `ReplicaSet`, `DaemonSet` and `Job`; the
    /// pod template labels of a `CronJob`'s job template; the `spec.selector` map of a
    /// `ReplicationController`; for any other kind, `status.selector` of its scale subresource.
    /// Errors when the target has no selector (an empty one would select every pod).
    pub async fn pod_selector<'t>(
        &self,
        namespace: &str,
        target: impl Into<TargetRef<'t>>,
    ) -> Result<Selector> {
        let target = target.into();
        // A loop over thousands of VPAs would otherwise read every target on every loop.
        if let Some(selector) = self
            .watched
            .as_ref()
            .and_then(|w| w.get(namespace, target))
            .and_then(|scale| scale.selector)
        {
            return Ok(selector);
        }
        let context = || describe("get pod selector of", namespace, target);
        let no_selector = || Error::Selector {
            input: String::new(),
            reason: format!("{} has no pod selector", context()),
        };
        if selector_source(target).is_some() {
            let object = self
                .api(namespace, target)
                .await?
                .get(target.name)
                .await
                .map_err(|e| Error::kube(context(), e))?;
            return selector_from_object(target, &object.data)?.ok_or_else(no_selector);
        }
        self.get(namespace, target)
            .await?
            .selector
            .filter(|s| !s.is_empty())
            .ok_or_else(no_selector)
    }
}

/// Where a built-in workload keeps its pod selector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SelectorSource {
    /// `spec.selector` as a `LabelSelector`.
    LabelSelector,
    /// `spec.selector` as a plain label map (`ReplicationController`).
    LabelMap,
    /// `spec.jobTemplate.spec.template.metadata.labels` (`CronJob`).
    CronJobTemplateLabels,
}

fn selector_source(target: TargetRef<'_>) -> Option<SelectorSource> {
    match (target.group(), target.kind) {
        ("apps", "Deployment" | "StatefulSet" | "ReplicaSet" | "DaemonSet") | ("batch", "Job") => {
            Some(SelectorSource::LabelSelector)
        }
        ("batch", "CronJob") => Some(SelectorSource::CronJobTemplateLabels),
        ("", "ReplicationController") => Some(SelectorSource::LabelMap),
        _ => None,
    }
}

/// Extracts the pod selector of a built-in workload from its JSON (`None` when absent).
fn selector_from_object(
    target: TargetRef<'_>,
    object: &serde_json::Value,
) -> Result<Option<Selector>> {
    let invalid = |e: serde_json::Error| Error::Selector {
        input: String::new(),
        reason: format!("{target}: malformed selector: {e}"),
    };
    let label_map = |value: Option<&serde_json::Value>| -> Result<Option<Selector>> {
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        let labels: std::collections::BTreeMap<String, String> =
            serde_json::from_value(value.clone()).map_err(invalid)?;
        Selector::from_label_selector(&LabelSelector {
            match_labels: Some(labels),
            match_expressions: None,
        })
        .map(Some)
        .map_err(Error::from)
    };
    match selector_source(target) {
        Some(SelectorSource::LabelSelector) => {
            let Some(value) = object.pointer("/spec/selector").filter(|v| !v.is_null()) else {
                return Ok(None);
            };
            let selector: LabelSelector = serde_json::from_value(value.clone()).map_err(invalid)?;
            Ok(Some(Selector::from_label_selector(&selector)?))
        }
        Some(SelectorSource::LabelMap) => label_map(object.pointer("/spec/selector")),
        Some(SelectorSource::CronJobTemplateLabels) => {
            label_map(object.pointer("/spec/jobTemplate/spec/template/metadata/labels"))
        }
        None => Ok(None),
    }
}

/// `"<verb> <apiVersion> <kind> <namespace>/<name>"`, for error context.
pub(crate) fn describe(verb: &str, namespace: &str, target: TargetRef<'_>) -> String {
    let api_version = if target.api_version.is_empty() {
        "<no apiVersion>"
    } else {
        target.api_version
    };
    format!(
        "{verb} {api_version} {} {namespace}/{}",
        target.kind, target.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_api::FakeApi;
    use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;
    use std::collections::BTreeMap;

    fn target(api_version: &str, kind: &str, name: &str) -> CrossVersionObjectReference {
        CrossVersionObjectReference {
            api_version: Some(api_version.into()),
            kind: kind.into(),
            name: name.into(),
        }
    }

    const WEB_SCALE: &str = r#"{"kind":"Scale","apiVersion":"autoscaling/v1",
        "metadata":{"name":"web","namespace":"shop","resourceVersion":"42"},
        "spec":{"replicas":3},
        "status":{"replicas":2,"selector":"app=web,tier in (frontend)"}}"#;

    #[tokio::test]
    async fn reads_the_scale_and_parses_the_selector() {
        let api = FakeApi::new();
        api.respond(
            "GET",
            "/apis/apps/v1/namespaces/shop/deployments/web/scale",
            200,
            WEB_SCALE,
        );
        let scales = ScaleClient::new(api.client(), "hpa-plus");
        let scale = scales
            .get("shop", &target("apps/v1", "Deployment", "web"))
            .await
            .unwrap();
        assert_eq!(scale.spec_replicas, 3);
        assert_eq!(scale.status_replicas, 2);
        assert_eq!(scale.resource_version.as_deref(), Some("42"));
        let selector = scale.selector.unwrap();
        let labels: BTreeMap<String, String> = [
            ("app".to_owned(), "web".to_owned()),
            ("tier".to_owned(), "frontend".to_owned()),
        ]
        .into();
        assert!(selector.matches(&labels));
        assert_eq!(selector.to_string(), "app=web,tier=frontend");
    }

    #[tokio::test]
    async fn patches_spec_replicas_on_the_scale_subresource() {
        let api = FakeApi::new();
        api.respond(
            "PATCH",
            "/apis/apps/v1/namespaces/shop/statefulsets/db/scale",
            200,
            &WEB_SCALE.replace("\"replicas\":3", "\"replicas\":5"),
        );
        let scales = ScaleClient::new(api.client(), "hpa-plus");
        let scale = scales
            .set_replicas("shop", &target("apps/v1", "StatefulSet", "db"), 5)
            .await
            .unwrap();
        assert_eq!(scale.spec_replicas, 5);
        let req = &api.requests()[0];
        assert_eq!(req.method, "PATCH");
        assert!(req.uri.contains("fieldManager=hpa-plus"), "{}", req.uri);
        assert_eq!(req.body, r#"{"spec":{"replicas":5}}"#);
    }

    #[tokio::test]
    async fn custom_resources_go_through_discovery() {
        let api = FakeApi::new();
        api.respond(
            "GET",
            "/apis/example.com/v1",
            200,
            r#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"example.com/v1","resources":[
              {"name":"webapps","singularName":"webapp","namespaced":true,"kind":"WebApp","verbs":["get"]},
              {"name":"webapps/scale","singularName":"","namespaced":true,"kind":"Scale","verbs":["get","patch"]},
              {"name":"reports","singularName":"report","namespaced":true,"kind":"Report","verbs":["get"]}]}"#,
        );
        api.respond(
            "GET",
            "/apis/example.com/v1/namespaces/shop/webapps/web/scale",
            200,
            r#"{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"web"},"spec":{"replicas":1},"status":{"replicas":1}}"#,
        );
        let scales = ScaleClient::new(api.client(), "cron-hpa");
        let scale = scales
            .get("shop", &target("example.com/v1", "WebApp", "web"))
            .await
            .unwrap();
        assert_eq!(scale.spec_replicas, 1);
        assert_eq!(scale.selector, None, "no labelSelectorPath");
        let err = scales
            .get("shop", &target("example.com/v1", "Report", "r"))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot resolve example.com/v1 Report: the resource has no scale subresource"
        );
    }

    /// A cluster-scoped kind with a scale subresource belongs to no namespace: a tenant's
    /// autoscaler naming one is refused after discovery, with no read or write of it.
    #[tokio::test]
    async fn a_cluster_scoped_target_is_refused() {
        let api = FakeApi::new();
        api.respond(
            "GET",
            "/apis/example.com/v1",
            200,
            r#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"example.com/v1","resources":[
              {"name":"nodepools","singularName":"nodepool","namespaced":false,"kind":"NodePool","verbs":["get","patch"]},
              {"name":"nodepools/scale","singularName":"","namespaced":false,"kind":"Scale","verbs":["get","patch"]}]}"#,
        );
        api.respond(
            "GET",
            "/apis/example.com/v1/nodepools/big/scale",
            200,
            r#"{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"big"},"spec":{"replicas":1},"status":{"replicas":1}}"#,
        );
        let scales = ScaleClient::new(api.client(), "cron-hpa");
        let pool = target("example.com/v1", "NodePool", "big");
        let want = "cannot resolve example.com/v1 NodePool: the resource is cluster-scoped; a target must be in the autoscaler's namespace";
        let err = scales.get("shop", &pool).await.unwrap_err();
        assert_eq!(err.to_string(), want);
        let err = scales.set_replicas("shop", &pool, 500).await.unwrap_err();
        assert_eq!(err.to_string(), want);
        let err = scales.pod_selector("shop", &pool).await.unwrap_err();
        assert_eq!(err.to_string(), want);
        let paths: Vec<String> = api.requests().iter().map(|r| r.uri.clone()).collect();
        assert_eq!(
            paths,
            ["/api", "/apis", "/apis/example.com/v1"],
            "discovery only"
        );
    }

    #[tokio::test]
    async fn errors_name_the_target() {
        let api = FakeApi::new();
        let scales = ScaleClient::new(api.client(), "hpa-plus");
        let err = scales
            .get("shop", &target("apps/v1", "Deployment", "gone"))
            .await
            .unwrap_err();
        assert!(err.is_not_found());
        assert!(
            err.to_string()
                .starts_with("get scale of apps/v1 Deployment shop/gone: "),
            "{err}"
        );
    }

    /// A name that is not one path segment would address something else (kube-rs joins it
    /// into the path as it is): refused before any request, discovery included.
    #[tokio::test]
    async fn a_name_that_is_not_one_path_segment_makes_no_request() {
        let api = FakeApi::new();
        let scales = ScaleClient::new(api.client(), "hpa-plus");
        for (name, reason) in [
            ("..", "may not be '..'"),
            (
                "../../../api/v1/namespaces/kube-system/secrets/x",
                "may not contain '/'",
            ),
            ("web%2Fstatus", "may not contain '%'"),
            ("web?dryRun=All", "may not contain '?'"),
            ("web#x", "may not contain '#'"),
        ] {
            let target = target("apps/v1", "Deployment", name);
            let err = scales.get("shop", &target).await.unwrap_err();
            assert!(err.to_string().ends_with(reason), "{name}: {err}");
            let err = scales.set_replicas("shop", &target, 3).await.unwrap_err();
            assert!(err.to_string().ends_with(reason), "{name}: {err}");
            let err = scales.pod_selector("shop", &target).await.unwrap_err();
            assert!(err.to_string().ends_with(reason), "{name}: {err}");
        }
        assert_eq!(api.requests().len(), 0, "{:?}", api.requests());
    }

    #[tokio::test]
    async fn pod_selectors_of_workloads() {
        let api = FakeApi::new();
        api.respond(
            "GET",
            "/apis/apps/v1/namespaces/shop/daemonsets/agent",
            200,
            r#"{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"agent"},
                "spec":{"selector":{"matchLabels":{"app":"agent"},
                  "matchExpressions":[{"key":"track","operator":"NotIn","values":["canary"]}]}}}"#,
        );
        api.respond(
            "GET",
            "/apis/batch/v1/namespaces/shop/cronjobs/report",
            200,
            r#"{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"report"},
                "spec":{"schedule":"* * * * *","jobTemplate":{"spec":{"template":{
                  "metadata":{"labels":{"job":"report"}},"spec":{"containers":[]}}}}}}"#,
        );
        api.respond(
            "GET",
            "/api/v1/namespaces/shop/replicationcontrollers/legacy",
            200,
            r#"{"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"legacy"},
                "spec":{"selector":{"app":"legacy"}}}"#,
        );
        api.respond(
            "GET",
            "/apis/apps/v1/namespaces/shop/deployments/web/scale",
            200,
            WEB_SCALE,
        );
        let scales = ScaleClient::new(api.client(), "vpa-recommender");
        let agent = scales
            .pod_selector("shop", &target("apps/v1", "DaemonSet", "agent"))
            .await
            .unwrap();
        assert_eq!(agent.to_string(), "app=agent,track!=canary");
        let report = scales
            .pod_selector("shop", &target("batch/v1", "CronJob", "report"))
            .await
            .unwrap();
        assert_eq!(report.to_string(), "job=report");
        let legacy = scales
            .pod_selector("shop", &target("v1", "ReplicationController", "legacy"))
            .await
            .unwrap();
        assert_eq!(legacy.to_string(), "app=legacy");
        // The VPA's autoscaling/v1 reference works the same way.
        let vpa_ref = k8s_openapi::api::autoscaling::v1::CrossVersionObjectReference {
            api_version: Some("apps/v1".into()),
            kind: "DaemonSet".into(),
            name: "agent".into(),
        };
        assert_eq!(scales.pod_selector("shop", &vpa_ref).await.unwrap(), agent);
        // A Deployment's selector is read from its own spec, not from the scale.
        api.respond(
            "GET",
            "/apis/apps/v1/namespaces/shop/deployments/web",
            200,
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
                "spec":{"selector":{"matchLabels":{"app":"web"}},"template":{}}}"#,
        );
        let web = scales
            .pod_selector("shop", &target("apps/v1", "Deployment", "web"))
            .await
            .unwrap();
        assert_eq!(web.to_string(), "app=web");
    }

    #[tokio::test]
    async fn custom_kinds_use_the_scale_selector_and_none_is_an_error() {
        let api = FakeApi::new();
        api.respond(
            "GET",
            "/apis/example.com/v1",
            200,
            r#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"example.com/v1","resources":[
              {"name":"webapps","singularName":"webapp","namespaced":true,"kind":"WebApp","verbs":["get"]},
              {"name":"webapps/scale","singularName":"","namespaced":true,"kind":"Scale","verbs":["get","patch"]}]}"#,
        );
        api.respond(
            "GET",
            "/apis/example.com/v1/namespaces/shop/webapps/with/scale",
            200,
            r#"{"metadata":{"name":"with"},"spec":{"replicas":1},"status":{"replicas":1,"selector":"app=with"}}"#,
        );
        api.respond(
            "GET",
            "/apis/example.com/v1/namespaces/shop/webapps/without/scale",
            200,
            r#"{"metadata":{"name":"without"},"spec":{"replicas":1},"status":{"replicas":1}}"#,
        );
        let scales = ScaleClient::new(api.client(), "vpa-recommender");
        let with = scales
            .pod_selector("shop", TargetRef::new("example.com/v1", "WebApp", "with"))
            .await
            .unwrap();
        assert_eq!(with.to_string(), "app=with");
        let err = scales
            .pod_selector(
                "shop",
                TargetRef::new("example.com/v1", "WebApp", "without"),
            )
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains(
                "get pod selector of example.com/v1 WebApp shop/without has no pod selector"
            ),
            "{err}"
        );
    }

    #[test]
    fn selectors_are_extracted_from_workload_json() {
        let sts = TargetRef::new("apps/v1", "StatefulSet", "db");
        let without: serde_json::Value = serde_json::json!({"spec": {}});
        assert_eq!(selector_from_object(sts, &without).unwrap(), None);
        let bad = serde_json::json!({"spec": {"selector": {"matchExpressions": [
            {"key": "a", "operator": "Between", "values": ["x"]}]}}});
        assert!(selector_from_object(sts, &bad).is_err());
        let job = TargetRef::new("batch/v1", "Job", "j");
        let labels =
            serde_json::json!({"spec": {"selector": {"matchLabels": {"controller-uid": "u1"}}}});
        assert_eq!(
            selector_from_object(job, &labels)
                .unwrap()
                .unwrap()
                .to_string(),
            "controller-uid=u1"
        );
    }
}
