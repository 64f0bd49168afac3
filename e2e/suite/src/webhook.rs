//! The real vpa-admission on loopback behind the sim's webhook routing, and the pods and VPAs
//! the webhook tests create: a Deployment's ReplicaSet pod, a VPA with a recommendation, and the
//! wait until the webhook's caches hold it.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_sim::ServiceAddress;
use plimsoll_vpa_admission::cli::Args;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::{Env, eventually};

/// The webhook's Service, in the system namespace.
pub const SERVICE: &str = "plimsoll-vpa-admission";
/// How long the webhook tests wait for anything.
pub const WAIT: Duration = Duration::from_secs(60);
/// How often they look.
pub const EVERY: Duration = Duration::from_millis(200);

/// A running webhook.
pub struct Webhook {
    /// Where it listens.
    pub address: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<plimsoll_vpa_admission::Result<()>>,
}

impl Webhook {
    /// Stops it and returns how `run` ended.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.task.await?.context("vpa-admission run")?;
        Ok(())
    }
}

/// Starts vpa-admission on loopback, reachable through Service `<system>/plimsoll-vpa-admission`,
/// registering itself (`--register-webhook`).
pub async fn start(env: &Env, system: &str, extra_args: &[String]) -> anyhow::Result<Webhook> {
    start_with(env, system, extra_args, true).await
}

/// [`start`], with `--register-webhook` only when `register`: without it the webhook expects
/// the MutatingWebhookConfiguration `plimsoll-vpa-admission` installed, as the chart does.
pub async fn start_with(
    env: &Env,
    system: &str,
    extra_args: &[String],
    register: bool,
) -> anyhow::Result<Webhook> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address: SocketAddr = listener.local_addr()?;
    env.sim()?.register_webhook_service(ServiceAddress {
        namespace: system.to_owned(),
        name: SERVICE.to_owned(),
        port: 443,
        address,
    });
    let mut args = vec![
        "vpa-admission".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        "--metrics-address=127.0.0.1:0".to_owned(),
        "--log-format=text".to_owned(),
        "--leader-elect=false".to_owned(),
        format!("--webhook-service-namespace={system}"),
        format!("--status-lease-namespace={system}"),
        "--status-lease-update-interval=1s".to_owned(),
        "--webhook-timeout-seconds=10".to_owned(),
    ];
    if register {
        args.push("--register-webhook".to_owned());
    }
    args.extend(extra_args.iter().cloned());
    let config = Args::parse_from_args(args)?.into_config();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(plimsoll_vpa_admission::run_on(
        config,
        listener,
        shutdown.clone(),
    ));
    // Ready: the status Lease is renewed only once the caches synced and TLS is bound.
    crate::wait_webhook_ready(&env.client, system, WAIT).await?;
    Ok(Webhook {
        address,
        shutdown,
        task,
    })
}

/// A test environment on plimsoll-sim with a namespace `<test namespace>-system` for the
/// webhook. Only the sim: a real cluster's apiserver cannot call a webhook listening on the
/// test's loopback, while the sim routes the webhook's Service there.
pub async fn sim_env(name: &str) -> anyhow::Result<(Env, String)> {
    let env = Env::start(name).await?;
    if let Err(e) = env.sim() {
        env.cleanup().await;
        return Err(e);
    }
    let system = format!("{}-system", env.namespace);
    namespace(&env, &system).await?;
    Ok((env, system))
}

/// Deletes the webhook's namespace and the test's.
pub async fn teardown(env: Env, system: &str) {
    let _ = Api::<Namespace>::all(env.client.clone())
        .delete(system, &DeleteParams::default())
        .await;
    env.cleanup().await;
}

/// Creates namespace `name`.
pub async fn namespace(env: &Env, name: &str) -> anyhow::Result<()> {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    Api::<Namespace>::all(env.client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    Ok(())
}

/// A VPA `name` on Deployment `name` in update mode `mode`.
pub fn vpa(name: &str, mode: &str) -> anyhow::Result<VerticalPodAutoscaler> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "updatePolicy": {"updateMode": mode}
        }
    }))?)
}

/// Writes a recommendation into VPA `name`'s status: 250m/300Mi for `app`, 25m/64Mi for
/// `log-shipper`.
pub async fn recommend(env: &Env, name: &str) -> anyhow::Result<()> {
    let status = json!({"status": {"recommendation": {"containerRecommendations": [
        {"containerName": "app", "target": {"cpu": "250m", "memory": "300Mi"}},
        {"containerName": "log-shipper", "target": {"cpu": "25m", "memory": "64Mi"}}
    ]}}});
    env.api::<VerticalPodAutoscaler>()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

/// The test pods' containers: `app` with requests and limits, `log-shipper` with a CPU request.
pub fn containers() -> Value {
    json!([
        {"name": "app", "image": "nginx:1.27",
         "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "200m", "memory": "256Mi"}}},
        {"name": "log-shipper", "image": "fluent/fluent-bit:3.1", "resources": {"requests": {"cpu": "50m"}}}
    ])
}

/// A pod as the ReplicaSet controller of Deployment `name` creates it.
pub fn replica_pod(name: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {
            "generateName": format!("{name}-5d8f7c9b6-"),
            "labels": {"app": name, "pod-template-hash": "5d8f7c9b6"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{name}-5d8f7c9b6"),
                "uid": "b7a4e0f2-3c1d-4e5f-8a9b-0c1d2e3f4a5b", "controller": true}]
        },
        "spec": {"containers": containers()}
    }))?)
}

/// The request for `resource` of container `container` of `pod`.
pub fn request(pod: &Pod, container: usize, resource: &str) -> Option<String> {
    let c = pod.spec.as_ref()?.containers.get(container)?;
    Some(
        c.resources
            .as_ref()?
            .requests
            .as_ref()?
            .get(resource)?
            .0
            .clone(),
    )
}

/// The limit for `resource` of container `container` of `pod`.
pub fn limit(pod: &Pod, container: usize, resource: &str) -> Option<String> {
    let c = pod.spec.as_ref()?.containers.get(container)?;
    Some(
        c.resources
            .as_ref()?
            .limits
            .as_ref()?
            .get(resource)?
            .0
            .clone(),
    )
}

/// Waits until a dry-run pod create comes back patched: the webhook's caches have the
/// recommendation.
pub async fn wait_for_recommendation(env: &Env, name: &str) -> anyhow::Result<()> {
    let pods = env.api::<Pod>();
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let pod = replica_pod(name)?;
    eventually("webhook sees the recommendation", WAIT, EVERY, || {
        let (pods, dry, pod) = (pods.clone(), dry.clone(), pod.clone());
        async move {
            let created = pods.create(&dry, &pod).await?;
            Ok((request(&created, 0, "cpu").as_deref() == Some("250m")).then_some(()))
        }
    })
    .await
}
