//! Reading a target's rollout state, for hpa-plus `pauseDuringRollout`.
//!
//! Only the I/O lives here: the workload object is fetched, and core's rules
//! ([`plimsoll_core::horizontal::rollout`]) judge it, so the controller, `replay` and the tests
//! share one definition of "rolling out".

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use kube::api::Api;
pub use plimsoll_core::horizontal::rollout::{Rollout, deployment, statefulset};

use crate::error::{Error, Result};
use crate::kinds::TargetRef;
use crate::scale::{ScaleClient, describe};

impl ScaleClient {
    /// The target's rollout state for `apps/v1` `Deployment` and `StatefulSet`; `None` for every
    /// other kind (no notion of a rollout the autoscaler knows how to read).
    pub async fn rollout<'t>(
        &self,
        namespace: &str,
        target: impl Into<TargetRef<'t>>,
    ) -> Result<Option<Rollout>> {
        let target = target.into();
        let context = || describe("get rollout state of", namespace, target);
        match (target.api_version, target.kind) {
            ("apps/v1", "Deployment") => {
                let api: Api<Deployment> = Api::namespaced(self.client.clone(), namespace);
                let d = api
                    .get(target.name)
                    .await
                    .map_err(|e| Error::kube(context(), e))?;
                Ok(Some(deployment(&d)))
            }
            ("apps/v1", "StatefulSet") => {
                let api: Api<StatefulSet> = Api::namespaced(self.client.clone(), namespace);
                let s = api
                    .get(target.name)
                    .await
                    .map_err(|e| Error::kube(context(), e))?;
                Ok(Some(statefulset(&s)))
            }
            _ => Ok(None),
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
            Some(Rollout::InProgress("2 of 3 replicas updated".into()))
        );
        let none = scales
            .rollout("shop", &target("apps/v1", "ReplicaSet", "web-1"))
            .await
            .unwrap();
        assert_eq!(none, None);
    }
}
