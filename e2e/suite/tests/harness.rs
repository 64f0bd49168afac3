//! The harness itself: a test gets a cluster with the Plimsoll CRDs served and its own namespace.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
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
    let ns = env.namespace.clone();
    let client = env.client.clone();
    env.cleanup().await;
    // On a real cluster deletion is asynchronous; the namespace at least starts terminating.
    let _ = eventually(
        "namespace gone or terminating",
        Duration::from_secs(10),
        Duration::from_millis(100),
        || {
            let api = Api::<Namespace>::all(client.clone());
            let ns = ns.clone();
            async move {
                Ok(match api.get_opt(&ns).await {
                    Ok(None) => Some(()),
                    Ok(Some(n)) if n.metadata.deletion_timestamp.is_some() => Some(()),
                    Ok(Some(_)) => None,
                    // The sim has stopped by now: nothing answers, which is also "gone".
                    Err(_) => Some(()),
                })
            }
        },
    )
    .await;
    Ok(())
}
