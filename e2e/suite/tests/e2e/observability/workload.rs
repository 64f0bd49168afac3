//! Work that makes each service export every metric family it has.
//!
//! prometheus-client leaves a labelled family out of `/metrics` (no `# TYPE` line) until it has
//! a series, so the services must do, on the sim, what the dashboards and alerts watch: scale
//! and be limited, fire cron jobs, recommend, evict and resize, answer AdmissionReviews, and
//! fail now and then. Failures come from count-limited faults on writes only one service makes,
//! so each service sees its own.

use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use plimsoll_core::api::cron::CronHorizontalPodAutoscaler;
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus;
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_e2e::{Env, eventually};
use plimsoll_sim::{Fault, LoadProfile, LoadSpec};
use serde_json::json;

/// The namespace of the VPAs the updater acts on (the recommender only sees the test's own).
pub fn updater_namespace(env: &Env) -> String {
    format!("{}-vpa", env.namespace)
}

/// A fault failing the first `count` requests `verb resource` with a 500.
fn failing(verb: &str, resource: &str, count: u64) -> Fault {
    Fault {
        verb: verb.into(),
        resource: resource.into(),
        error_rate: 1.0,
        status: Some(500),
        count,
        ..Fault::default()
    }
}

/// Faults in place before the services start: the recommender's first restore of its history
/// fails once, and hpa-plus's custom metrics API is down for good (a metric that fails).
pub fn faults_before_start(env: &Env) -> anyhow::Result<()> {
    let sim = env.sim()?;
    sim.add_fault(failing("list", "verticalpodautoscalercheckpoints", 1));
    sim.add_fault(Fault {
        verb: "get".into(),
        resource: "custom.metrics.k8s.io".into(),
        error_rate: 1.0,
        status: Some(503),
        ..Fault::default()
    });
    Ok(())
}

/// Faults on writes only one service makes: HPA+ status (hpa-plus), HPA spec (cron-hpa's job
/// on an HPA) and VPA status in the test's namespace (the recommender; the updater's VPAs got
/// their recommendation before).
pub fn faults_on_writes(env: &Env) -> anyhow::Result<()> {
    let sim = env.sim()?;
    sim.add_fault(failing("patch", "horizontalpodautoscalerpluses/status", 2));
    sim.add_fault(failing("patch", "horizontalpodautoscalers", 2));
    sim.add_fault(failing("patch", "verticalpodautoscalers/status", 2));
    Ok(())
}

/// Creates [`updater_namespace`].
async fn create_updater_namespace(env: &Env) -> anyhow::Result<()> {
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {"name": updater_namespace(env), "labels": {"plimsoll.dev/e2e": "true"}}
    }))?;
    Api::<Namespace>::all(env.client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    Ok(())
}

/// hpa-plus: `web` under CPU load and an External metric above its high watermark, with a
/// Pods metric whose API fails and a low maxReplicas (limited); `held` above the same
/// watermark, waiting out `upscaleDelayAboveWatermarkSeconds` (a countdown).
/// cron-hpa: a job every 2 s on the HPA `b`'s minReplicas.
pub async fn horizontal(env: &Env) -> anyhow::Result<()> {
    let sim = env.sim()?;
    plimsoll_e2e::create_deployment(env, "web", 1, "100m", "64Mi").await?;
    plimsoll_e2e::create_deployment(env, "b", 1, "100m", "64Mi").await?;
    sim.set_load(
        &env.namespace,
        "deployments",
        "web",
        LoadSpec {
            profile: LoadProfile::Constant { value: 300.0 },
            ..LoadSpec::default()
        },
    );
    sim.cluster
        .model
        .set_external(&env.namespace, "queue_depth", 50.0);
    let plus: HorizontalPodAutoscalerPlus = serde_json::from_value(json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1", "kind": "HorizontalPodAutoscalerPlus",
        "metadata": {"name": "web"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 3, "syncPeriodSeconds": 1,
            "metrics": [
                {"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 50}}},
                {"type": "External", "external": {"metric": {"name": "queue_depth"},
                    "target": {"type": "Watermark", "lowWatermark": "5", "highWatermark": "10"}}},
                {"type": "Pods", "pods": {"metric": {"name": "requests_per_second"},
                    "target": {"type": "AverageValue", "averageValue": "10"}}}
            ]
        }
    }))?;
    env.api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), &plus)
        .await
        .context("create HPA+ web")?;
    // The same External metric, held back by a watermark delay: a countdown.
    plimsoll_e2e::create_deployment(env, "held", 1, "100m", "64Mi").await?;
    let held: HorizontalPodAutoscalerPlus = serde_json::from_value(json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1", "kind": "HorizontalPodAutoscalerPlus",
        "metadata": {"name": "held"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "held"},
            "minReplicas": 1, "maxReplicas": 3, "syncPeriodSeconds": 1,
            "upscaleDelayAboveWatermarkSeconds": 600,
            "metrics": [
                {"type": "External", "external": {"metric": {"name": "queue_depth"},
                    "target": {"type": "Watermark", "lowWatermark": "5", "highWatermark": "10"}}}
            ]
        }
    }))?;
    env.api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), &held)
        .await
        .context("create HPA+ held")?;
    plimsoll_e2e::create_plain_hpa(env, "b", 1, 10).await?;
    let cron: CronHorizontalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1", "kind": "CronHorizontalPodAutoscaler",
        "metadata": {"name": "b"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "name": "b"},
            "jobs": [{"name": "every-2s", "schedule": "*/2 * * * * *", "targetSize": 2}]
        }
    }))?;
    env.api::<CronHorizontalPodAutoscaler>()
        .create(&PostParams::default(), &cron)
        .await
        .context("create CronHPA b")?;
    Ok(())
}

/// A VPA `name` on Deployment `name` in `namespace`, in update `mode`.
async fn create_vpa(env: &Env, namespace: &str, name: &str, mode: &str) -> anyhow::Result<()> {
    let vpa: VerticalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "recommenders": [{"name": "plimsoll"}],
            "updatePolicy": {"updateMode": mode}
        }
    }))?;
    Api::<VerticalPodAutoscaler>::namespaced(env.client.clone(), namespace)
        .create(&PostParams::default(), &vpa)
        .await
        .with_context(|| format!("create VPA {namespace}/{name}"))?;
    Ok(())
}

/// The recommender's VPA: `web` (under load, see [`horizontal`]) in mode Off, in the test's
/// namespace.
pub async fn recommended(env: &Env) -> anyhow::Result<()> {
    create_vpa(env, &env.namespace, "web", "Off").await
}

/// In the updater's namespace, a Recreate and an InPlaceOrRecreate VPA whose pods request far
/// less than the recommendation written into their status. Created before the webhook is
/// registered, so that the pods keep their small requests until the updater acts.
pub async fn updater_targets(env: &Env) -> anyhow::Result<()> {
    create_updater_namespace(env).await?;
    let ns = updater_namespace(env);
    let vpas = Api::<VerticalPodAutoscaler>::namespaced(env.client.clone(), &ns);
    for (name, mode) in [("evict", "Recreate"), ("resize", "InPlaceOrRecreate")] {
        create_vpa(env, &ns, name, mode).await?;
        let status = json!({"status": {"recommendation": {"containerRecommendations": [{
            "containerName": "app",
            "target": {"cpu": "500m", "memory": "500Mi"},
            "lowerBound": {"cpu": "400m", "memory": "400Mi"},
            "upperBound": {"cpu": "1", "memory": "1Gi"}
        }]}}});
        vpas.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "replicas": 4,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{
                        "name": "app", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "10m", "memory": "10Mi"}}
                    }]}
                }
            }
        }))?;
        Api::<Deployment>::namespaced(env.client.clone(), &ns)
            .create(&PostParams::default(), &deployment)
            .await?;
    }
    // Every pod exists before the webhook could patch it.
    let pods = Api::<Pod>::namespaced(env.client.clone(), &ns);
    eventually(
        "the updater's 8 pods exist",
        Duration::from_secs(60),
        Duration::from_millis(250),
        || async {
            let list = pods.list(&ListParams::default()).await?;
            Ok((list.items.len() == 8).then_some(()))
        },
    )
    .await
}
