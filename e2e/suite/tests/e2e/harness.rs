//! The harness itself: a test gets a cluster with the Plimsoll CRDs served and its own namespace,
//! and deleting that namespace takes the test's objects with it.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams};
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus;
use plimsoll_e2e::{Env, eventually};

#[tokio::test]
async fn a_test_gets_the_crds_and_its_own_namespace() -> anyhow::Result<()> {
    let env = Env::start("harness").await?;
    let namespaces = Api::<Namespace>::all(env.client.clone());
    assert!(namespaces.get_opt(&env.namespace).await?.is_some());
    // The HPA+ CRD is served: listing it in the test's namespace works and is empty.
    let listed = env
        .api::<HorizontalPodAutoscalerPlus>()
        .list(&ListParams::default())
        .await?;
    assert!(listed.items.is_empty());

    // What cleanup does first: the namespace goes (or, on a real cluster, starts terminating).
    namespaces
        .delete(&env.namespace, &DeleteParams::default())
        .await?;
    eventually(
        "namespace gone or terminating",
        Duration::from_secs(30),
        Duration::from_millis(100),
        || {
            let api = namespaces.clone();
            let ns = env.namespace.clone();
            async move {
                let found = api.get_opt(&ns).await?;
                Ok(found
                    .is_none_or(|n| n.metadata.deletion_timestamp.is_some())
                    .then_some(()))
            }
        },
    )
    .await?;
    env.cleanup().await;
    Ok(())
}
