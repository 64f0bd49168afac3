//! Reading a target's rollout state, for hpa-plus `pauseDuringRollout`.
//!
//! Only the I/O lives here: the workload object is fetched, and core's rules
//! ([`plimsoll_core::horizontal::rollout`]) judge it, so the controller, `replay` and the tests
//! share one definition of "rolling out". `apps/v1` `Deployment` and `StatefulSet` are read as
//! typed objects; every other kind (Argo `Rollout`, `OpenKruise` `CloneSet`, any custom resource
//! with a scale subresource) as a dynamic object through the shared
//! [`KindResolver`](crate::kinds::KindResolver), judged by [`generic`].

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use kube::api::{Api, DynamicObject};
pub use plimsoll_core::horizontal::rollout::{Rollout, deployment, generic, statefulset};

use crate::error::{Error, Result};
use crate::kinds::TargetRef;
use crate::scale::{ScaleClient, describe};

impl ScaleClient {
    /// The target's rollout state: `Deployment` and `StatefulSet` by their own rules, any other
    /// kind by the `observedGeneration` / `updatedReplicas` conventions
    /// ([`Rollout::Unknown`] when its status does not follow them).
    pub async fn rollout<'t>(
        &self,
        namespace: &str,
        target: impl Into<TargetRef<'t>>,
    ) -> Result<Rollout> {
        let target = target.into();
        target.check_name()?;
        let context = || describe("get rollout state of", namespace, target);
        match (target.api_version, target.kind) {
            ("apps/v1", "Deployment") => {
                let api: Api<Deployment> = Api::namespaced(self.client.clone(), namespace);
                let d = api
                    .get(target.name)
                    .await
                    .map_err(|e| Error::kube(context(), e))?;
                Ok(deployment(&d))
            }
            ("apps/v1", "StatefulSet") => {
                let api: Api<StatefulSet> = Api::namespaced(self.client.clone(), namespace);
                let s = api
                    .get(target.name)
                    .await
                    .map_err(|e| Error::kube(context(), e))?;
                Ok(statefulset(&s))
            }
            _ => {
                let resolved = self.kinds().resolve_workload(target).await?;
                let api: Api<DynamicObject> =
                    Api::namespaced_with(self.client.clone(), namespace, &resolved.resource);
                let object = api
                    .get(target.name)
                    .await
                    .map_err(|e| Error::kube(context(), e))?;
                // The parts the rules read: the generation, and spec and status as stored.
                let json = serde_json::json!({
                    "metadata": {"generation": object.metadata.generation},
                    "spec": object.data.get("spec"),
                    "status": object.data.get("status"),
                });
                Ok(generic(&json))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_api::FakeApi;
    use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;

    fn target(api_version: &str, kind: &str, name: &str) -> CrossVersionObjectReference {
        CrossVersionObjectReference {
            api_version: Some(api_version.into()),
            kind: kind.into(),
            name: name.into(),
        }
    }

    #[tokio::test]
    async fn rollout_state_of_deployments() {
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
        assert_eq!(state, Rollout::InProgress("2 of 3 replicas updated".into()));
    }

    #[tokio::test]
    async fn rollout_state_of_statefulsets() {
        let api = FakeApi::new();
        api.respond(
            "GET",
            "/apis/apps/v1/namespaces/shop/statefulsets/db",
            200,
            r#"{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"db","generation":2},
                "spec":{"replicas":3,"selector":{},"template":{},"serviceName":"db"},
                "status":{"observedGeneration":2,"replicas":3,"updatedReplicas":1,
                          "updateRevision":"db-2","currentRevision":"db-1"}}"#,
        );
        let scales = ScaleClient::new(api.client(), "hpa-plus");
        let state = scales
            .rollout("shop", &target("apps/v1", "StatefulSet", "db"))
            .await
            .unwrap();
        assert_eq!(
            state,
            Rollout::InProgress("1 of 3 replicas at revision db-2".into())
        );
    }

    const DISCOVERY: &str = r#"{
      "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "apps.kruise.io/v1alpha1",
      "resources": [
        {"name": "clonesets", "singularName": "cloneset", "namespaced": true, "kind": "CloneSet",
         "verbs": ["get", "list", "patch"]},
        {"name": "clonesets/scale", "singularName": "", "namespaced": true, "group": "autoscaling",
         "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}
      ]}"#;

    /// A `CloneSet` named `name` with `status` (read through discovery, as a dynamic object).
    fn cloneset(api: &FakeApi, name: &str, status: &str) {
        api.respond(
            "GET",
            &format!("/apis/apps.kruise.io/v1alpha1/namespaces/shop/clonesets/{name}"),
            200,
            &format!(
                r#"{{"apiVersion":"apps.kruise.io/v1alpha1","kind":"CloneSet",
                    "metadata":{{"name":"{name}","generation":3}},
                    "spec":{{"replicas":4}},"status":{status}}}"#
            ),
        );
    }

    #[tokio::test]
    async fn rollout_state_of_custom_resources_by_the_conventions() {
        let api = FakeApi::new();
        api.respond("GET", "/apis/apps.kruise.io/v1alpha1", 200, DISCOVERY);
        cloneset(
            &api,
            "rolling",
            r#"{"observedGeneration":3,"replicas":4,"updatedReplicas":1,"readyReplicas":4}"#,
        );
        cloneset(
            &api,
            "settled",
            r#"{"observedGeneration":3,"replicas":4,"updatedReplicas":4,"readyReplicas":4}"#,
        );
        cloneset(&api, "odd", r#"{"replicas":4,"readyReplicas":4}"#);
        let scales = ScaleClient::new(api.client(), "hpa-plus");
        let of = |name: &'static str| {
            let scales = scales.clone();
            async move {
                scales
                    .rollout("shop", &target("apps.kruise.io/v1alpha1", "CloneSet", name))
                    .await
                    .unwrap()
            }
        };
        assert_eq!(
            of("rolling").await,
            Rollout::InProgress("1 of 4 replicas updated".into())
        );
        assert_eq!(of("settled").await, Rollout::Settled);
        assert!(matches!(of("odd").await, Rollout::Unknown(_)));
    }
}
