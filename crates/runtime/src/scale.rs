//! The scale subresource of any scalable kind, and the pod selector it reports.
//!
//! Works for `Deployments`, `StatefulSets`, `ReplicaSets`, `ReplicationControllers` and custom resources
//! that declare a scale subresource: the target's `apiVersion` + `kind` are resolved through the
//! shared [`KindResolver`], then `/scale` is read (`autoscaling/v1` Scale) or merge-patched.
//!
//! The selector string in `status.selector` is parsed into a [`Selector`] so callers can match
//! pods from a reflector store without another request.

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};

use crate::error::{Error, Result};
use crate::kinds::{KindResolver, ResolvedKind};
use crate::rollout::{self, RolloutState};
use crate::selector::Selector;

/// What the scale subresource says about a target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetScale {
    /// `spec.replicas`: the desired count.
    pub spec_replicas: i32,
    /// `status.replicas`: the count the workload controller currently has.
    pub status_replicas: i32,
    /// The parsed `status.selector`; `None` when the target reports no selector (a custom
    /// resource without `labelSelectorPath`), which autoscalers must treat as an error.
    pub selector: Option<Selector>,
    /// `metadata.resourceVersion` of the scale (for conditional writes).
    pub resource_version: Option<String>,
}

impl TargetScale {
    /// Reads a Scale object. Errors when its selector string does not parse.
    pub fn from_scale(scale: &Scale) -> Result<Self> {
        let selector = scale
            .status
            .as_ref()
            .and_then(|s| s.selector.as_deref())
            .filter(|s| !s.trim().is_empty())
            .map(Selector::parse)
            .transpose()?;
        Ok(Self {
            spec_replicas: scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0),
            status_replicas: scale.status.as_ref().map_or(0, |s| s.replicas),
            selector,
            resource_version: scale.metadata.resource_version.clone(),
        })
    }
}

/// Reads and writes the scale subresource of targets (cheap to clone).
#[derive(Clone)]
pub struct ScaleClient {
    client: Client,
    kinds: KindResolver,
    field_manager: String,
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
        }
    }

    /// The resolver this client uses.
    pub fn kinds(&self) -> &KindResolver {
        &self.kinds
    }

    async fn api(
        &self,
        namespace: &str,
        target: &CrossVersionObjectReference,
    ) -> Result<(Api<DynamicObject>, ResolvedKind)> {
        let api_version = target.api_version.as_deref().unwrap_or_default();
        let resolved = self.kinds.resolve(api_version, &target.kind).await?;
        if !resolved.scalable {
            return Err(Error::Discovery {
                api_version: api_version.to_owned(),
                kind: target.kind.clone(),
                reason: "the resource has no scale subresource".into(),
            });
        }
        let api = if resolved.namespaced {
            Api::namespaced_with(self.client.clone(), namespace, &resolved.resource)
        } else {
            Api::all_with(self.client.clone(), &resolved.resource)
        };
        Ok((api, resolved))
    }

    /// Reads the target's scale: desired and current replicas and its pod selector.
    pub async fn get(
        &self,
        namespace: &str,
        target: &CrossVersionObjectReference,
    ) -> Result<TargetScale> {
        let (api, _) = self.api(namespace, target).await?;
        let scale = api
            .get_scale(&target.name)
            .await
            .map_err(|e| Error::kube(describe("get scale of", namespace, target), e))?;
        TargetScale::from_scale(&scale)
    }

    /// Sets `spec.replicas` with a merge patch on `/scale`; returns the scale after the write.
    pub async fn set_replicas(
        &self,
        namespace: &str,
        target: &CrossVersionObjectReference,
        replicas: i32,
    ) -> Result<TargetScale> {
        let (api, _) = self.api(namespace, target).await?;
        let patch = serde_json::json!({ "spec": { "replicas": replicas } });
        let params = PatchParams {
            field_manager: Some(self.field_manager.clone()),
            ..PatchParams::default()
        };
        let scale = api
            .patch_scale(&target.name, &params, &Patch::Merge(&patch))
            .await
            .map_err(|e| {
                Error::kube(
                    format!("{} to {replicas}", describe("scale", namespace, target)),
                    e,
                )
            })?;
        TargetScale::from_scale(&scale)
    }

    /// The target's rollout state for `apps/v1` `Deployments` and `StatefulSets`; `None` for every
    /// other kind (no notion of a rollout the autoscaler knows how to read).
    pub async fn rollout(
        &self,
        namespace: &str,
        target: &CrossVersionObjectReference,
    ) -> Result<Option<RolloutState>> {
        let context = || describe("get rollout state of", namespace, target);
        match (target.api_version.as_deref(), target.kind.as_str()) {
            (Some("apps/v1"), "Deployment") => {
                let api: Api<Deployment> = Api::namespaced(self.client.clone(), namespace);
                let d = api
                    .get(&target.name)
                    .await
                    .map_err(|e| Error::kube(context(), e))?;
                Ok(Some(rollout::deployment(&d)))
            }
            (Some("apps/v1"), "StatefulSet") => {
                let api: Api<StatefulSet> = Api::namespaced(self.client.clone(), namespace);
                let s = api
                    .get(&target.name)
                    .await
                    .map_err(|e| Error::kube(context(), e))?;
                Ok(Some(rollout::statefulset(&s)))
            }
            _ => Ok(None),
        }
    }
}

/// `"<verb> <apiVersion> <kind> <namespace>/<name>"`, for error context.
fn describe(verb: &str, namespace: &str, target: &CrossVersionObjectReference) -> String {
    format!(
        "{verb} {} {} {namespace}/{}",
        target.api_version.as_deref().unwrap_or("<no apiVersion>"),
        target.kind,
        target.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_api::FakeApi;
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

    #[tokio::test]
    async fn rollout_state_of_deployments_only() {
        let api = FakeApi::new();
        api.respond(
            "GET",
            "/apis/apps/v1/namespaces/shop/deployments/web",
            200,
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","generation":4},
                "spec":{"replicas":3,"selector":{},"template":{}},
                "status":{"observedGeneration":4,"replicas":4,"updatedReplicas":2}}"#,
        );
        let scales = ScaleClient::new(api.client(), "hpa-plus");
        let state = scales
            .rollout("shop", &target("apps/v1", "Deployment", "web"))
            .await
            .unwrap();
        assert_eq!(
            state,
            Some(RolloutState::InProgress("2 of 3 replicas updated".into()))
        );
        let none = scales
            .rollout("shop", &target("apps/v1", "ReplicaSet", "web-1"))
            .await
            .unwrap();
        assert_eq!(none, None);
    }

    #[test]
    fn a_bad_selector_string_is_an_error() {
        let scale: Scale = serde_json::from_str(
            r#"{"metadata":{},"spec":{"replicas":1},"status":{"replicas":1,"selector":"app in (a"}}"#,
        )
        .unwrap();
        assert_eq!(
            TargetScale::from_scale(&scale).unwrap_err().metric_label(),
            "selector"
        );
    }
}
