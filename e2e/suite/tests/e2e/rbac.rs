//! Each service's RBAC is enough and no more: on a sim in `--authorize` mode, the chart's
//! namespace, ServiceAccounts and RBAC (`deploy/`) are applied, each service runs under its own
//! ServiceAccount with a workload that makes it do its job, and the sim's access log shows
//! (1) the job done with no request denied, and (2) every rule of the component's ClusterRole and
//! Roles admitting at least one request. A service whose binding is missing is refused with 403
//! and reports it (not ready) instead of exiting. And no account reaches what is another's: each
//! service's ServiceAccount is refused (403) on the other services' Leases, on the admission
//! status Lease (read-only for the updater), on an unrelated MutatingWebhookConfiguration and on
//! an unrelated Secret of its namespace, with the RBAC of every mode applied.

use std::time::Duration;

use anyhow::Context as _;
use clap::Parser as _;
use jiff::Timestamp;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{LimitRange, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use plimsoll_core::api::cron::CronHorizontalPodAutoscaler;
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus;
use plimsoll_core::api::vpa::{VerticalPodAutoscaler, VerticalPodAutoscalerCheckpoint};
use plimsoll_e2e::access::{self, SYSTEM_NAMESPACE};
use plimsoll_e2e::{Env, Running, eventually, free_address};
use plimsoll_sim::{LoadProfile, LoadSpec, SimConfig};
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(60);
/// The webhook configuration deploy/'s self-signed RBAC names (`--webhook-config-name`'s default).
const WEBHOOK_CONFIG: &str = "plimsoll-vpa-admission";
const EVERY: Duration = Duration::from_millis(250);

/// A sim enforcing RBAC, with `components`' ServiceAccounts and RBAC applied from `deploy/`.
async fn authorized(name: &str, components: &[&str]) -> anyhow::Result<Env> {
    let with_modes: Vec<(&str, &[&str])> = components.iter().map(|c| (*c, &[][..])).collect();
    authorized_with_modes(name, &with_modes).await
}

/// Like [`authorized`], each component with the RBAC of its modes (`deploy/<component>/<mode>/`).
async fn authorized_with_modes(name: &str, components: &[(&str, &[&str])]) -> anyhow::Result<Env> {
    let env = Env::start_with(
        name,
        SimConfig {
            authorize: true,
            ..SimConfig::default()
        },
    )
    .await?;
    access::install_rbac_with_modes(&env.client, components).await?;
    // Each service's Deployment, as deploy/ ships it (no pods needed): the services own their
    // Leases through it (--lease-owner-deployment), and reading it is a rule of their Role.
    for (component, _) in components {
        owner_deployment(&env, component).await?;
    }
    Ok(env)
}

/// An empty Deployment `plimsoll-<component>` in the system namespace, written by the administrator.
async fn owner_deployment(env: &Env, component: &str) -> anyhow::Result<()> {
    use k8s_openapi::api::apps::v1::Deployment;
    let labels =
        json!({"app.kubernetes.io/name": "plimsoll", "app.kubernetes.io/component": component});
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": format!("plimsoll-{component}"), "namespace": SYSTEM_NAMESPACE},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                         "spec": {"containers": [{"name": component, "image": component}]}}
        }
    }))?;
    Api::<Deployment>::namespaced(env.client.clone(), SYSTEM_NAMESPACE)
        .create(&PostParams::default(), &deployment)
        .await?;
    Ok(())
}

/// Asserts that `component` was denied nothing and that each of its rules admitted something.
fn assert_enough_and_no_more(env: &Env, component: &str) -> anyhow::Result<()> {
    assert_enough_and_no_more_in(env, component, &[])
}

/// [`assert_enough_and_no_more`] with the RBAC of `modes` counted too.
fn assert_enough_and_no_more_in(env: &Env, component: &str, modes: &[&str]) -> anyhow::Result<()> {
    let log = env.sim()?.access_log();
    let report = access::report(&log, &access::user_of(component));
    assert!(report.allowed > 0, "{component} made no request");
    assert!(
        report.denied.is_empty(),
        "{component} was denied: {:#?}",
        report.denied
    );
    let unused = access::unused(component, modes, &report)?;
    assert!(
        unused.is_empty(),
        "rules of {component} that admitted nothing: {unused:#?}"
    );
    Ok(())
}

fn constant(value: f64) -> LoadSpec {
    LoadSpec {
        profile: LoadProfile::Constant { value },
        ..LoadSpec::default()
    }
}

fn hpa_plus_config(
    kubeconfig: &std::path::Path,
    admin: std::net::SocketAddr,
    extra: &[&str],
) -> anyhow::Result<plimsoll_hpa_plus::Config> {
    let mut args = vec![
        "hpa-plus".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--metrics-address={admin}"),
        format!("--lease-namespace={SYSTEM_NAMESPACE}"),
        "--lease-owner-deployment=plimsoll-hpa-plus".to_owned(),
        // Sharded, as deploy/ runs it (its Role lists the shard Leases).
        "--shards=8".to_owned(),
        "--retry-period=1s".to_owned(),
        "--sync-period=2s".to_owned(),
        "--cpu-initialization-period=1s".to_owned(),
        "--initial-readiness-delay=0s".to_owned(),
        "--log-format=text".to_owned(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    Ok(plimsoll_hpa_plus::cli::Args::try_parse_from(args)?.into_config()?)
}

fn run_hpa_plus(
    config: plimsoll_hpa_plus::Config,
) -> Running<Result<(), plimsoll_hpa_plus::Error>> {
    Running::spawn("hpa-plus", |token| plimsoll_hpa_plus::run(config, token))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: --authorize mode, ServiceAccount tokens and the access log"
)]
async fn hpa_plus_scales_under_its_own_role_and_uses_all_of_it() -> anyhow::Result<()> {
    let env = authorized_with_modes("rbac-hpa-plus", &[("hpa-plus", &["native-hpa"])]).await?;
    let sim = env.sim()?;
    // An HPA+ on CPU that holds off during rollouts (reads the Deployment), and in native mode a
    // plain HPA on a per-pod custom metric (the HPA rules and custom.metrics.k8s.io).
    plimsoll_e2e::create_deployment(&env, "web", 1, "100m", "64Mi").await?;
    plimsoll_e2e::create_deployment(&env, "queue", 1, "100m", "64Mi").await?;
    sim.set_load(&env.namespace, "deployments", "web", constant(180.0));
    sim.set_load(&env.namespace, "deployments", "queue", constant(30.0));
    let plus: HorizontalPodAutoscalerPlus = serde_json::from_value(json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
        "kind": "HorizontalPodAutoscalerPlus",
        "metadata": {"name": "web"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 10, "syncPeriodSeconds": 2, "pauseDuringRollout": true,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 50}}}],
        }
    }))?;
    env.api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), &plus)
        .await?;
    let native: HorizontalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "queue", "annotations": {"plimsoll.dev/resync-period": "1s"}},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "queue"},
            "minReplicas": 1, "maxReplicas": 10,
            "metrics": [{"type": "Pods", "pods": {"metric": {"name": "requests_per_second"},
                "target": {"type": "AverageValue", "averageValue": "10"}}}],
        }
    }))?;
    env.api::<HorizontalPodAutoscaler>()
        .create(&PostParams::default(), &native)
        .await?;
    let kubeconfig = access::kubeconfig_of(&env, "hpa-plus")?;
    let service = run_hpa_plus(hpa_plus_config(
        &kubeconfig,
        free_address()?,
        &["--native-hpa"],
    )?);
    let deployments = env.api::<Deployment>();
    for name in ["web", "queue"] {
        eventually(
            &format!("hpa-plus scales {name} up"),
            WITHIN,
            EVERY,
            || async {
                let d = deployments.get(name).await?;
                Ok(d.spec
                    .and_then(|s| s.replicas)
                    .filter(|r| *r > 1)
                    .map(|_| ()))
            },
        )
        .await?;
    }
    let hpas = env.api::<HorizontalPodAutoscaler>();
    eventually(
        "the native HPA's status is written",
        WITHIN,
        EVERY,
        || async {
            Ok(hpas
                .get("queue")
                .await?
                .status
                .filter(|s| s.desired_replicas > 1)
                .map(|_| ()))
        },
    )
    .await?;
    service.stop().await??;
    assert_enough_and_no_more_in(&env, "hpa-plus", &["native-hpa"])?;
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: --authorize mode, ServiceAccount tokens and the access log"
)]
async fn without_its_binding_hpa_plus_is_refused_and_reports_it_without_exiting()
-> anyhow::Result<()> {
    let env = authorized("rbac-denied", &["hpa-plus"]).await?;
    kube::Api::<ClusterRoleBinding>::all(env.client.clone())
        .delete("plimsoll-hpa-plus", &DeleteParams::default())
        .await?;
    let kubeconfig = access::kubeconfig_of(&env, "hpa-plus")?;
    let admin = free_address()?;
    let service = run_hpa_plus(hpa_plus_config(&kubeconfig, admin, &[])?);
    let sim = env.sim()?;
    let user = access::user_of("hpa-plus");
    // Its watches start together, and any of them may be the first refused: wait for the
    // autoscalers' own.
    eventually(
        "the sim refuses hpa-plus its autoscalers",
        WITHIN,
        EVERY,
        || async {
            let report = access::report(&sim.access_log(), &user);
            Ok(report
                .denied
                .iter()
                .any(|d| d.contains("horizontalpodautoscalerpluses"))
                .then_some(()))
        },
    )
    .await?;
    // Still up and saying it is not ready, some seconds later.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let ready = access::admin_status(admin, "/readyz").await?;
    assert_ne!(
        ready, 200,
        "hpa-plus says it is ready without being able to list"
    );
    assert_eq!(access::admin_status(admin, "/healthz").await?, 200);
    service.stop().await??;
    env.cleanup().await;
    Ok(())
}

fn cron_config(kubeconfig: &std::path::Path) -> anyhow::Result<plimsoll_cron_hpa::Config> {
    Ok(plimsoll_cron_hpa::Config {
        common: plimsoll_cron_hpa::CommonArgs {
            kubeconfig: Some(kubeconfig.to_path_buf()),
            context: None,
            kube_api_qps: 0.0,
            kube_api_burst: None,
            metrics_address: free_address()?,
            log_format: plimsoll_cron_hpa::LogFormat::Text,
            log_filter: Some("info".into()),
            leader_elect: true,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(1),
            lease_namespace: Some(SYSTEM_NAMESPACE.into()),
            lease_owner_deployment: Some("plimsoll-cron-hpa".into()),
            admin_listener: plimsoll_runtime::AdminListenerArgs::default(),
        },
        missed_job_grace: Duration::from_secs(300),
        min_job_interval: Duration::ZERO,
        identity: None,
    })
}

/// A CronHPA `name` on `target` (apiVersion, kind, name) with one job every 2 s to `size`.
async fn create_cron(env: &Env, name: &str, target: [&str; 3], size: i32) -> anyhow::Result<()> {
    let cron: CronHorizontalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1", "kind": "CronHorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": target[0], "kind": target[1], "name": target[2]},
            "jobs": [{"name": "up", "schedule": "*/2 * * * * *", "targetSize": size}],
        }
    }))?;
    env.api::<CronHorizontalPodAutoscaler>()
        .create(&PostParams::default(), &cron)
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: --authorize mode, ServiceAccount tokens and the access log"
)]
async fn cron_hpa_runs_its_jobs_under_its_own_role_and_uses_all_of_it() -> anyhow::Result<()> {
    let env = authorized("rbac-cron-hpa", &["cron-hpa"]).await?;
    // Three targets: a Deployment's replicas (scale subresource), and the minReplicas of a plain
    // HPA and of an HPA+.
    for name in ["app", "b", "c"] {
        plimsoll_e2e::create_deployment(&env, name, 1, "100m", "64Mi").await?;
    }
    plimsoll_e2e::create_plain_hpa(&env, "b", 1, 10).await?;
    let plus: HorizontalPodAutoscalerPlus = serde_json::from_value(json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1", "kind": "HorizontalPodAutoscalerPlus",
        "metadata": {"name": "c"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "c"},
            "minReplicas": 1, "maxReplicas": 10}
    }))?;
    env.api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), &plus)
        .await?;
    create_cron(&env, "app", ["apps/v1", "Deployment", "app"], 3).await?;
    create_cron(
        &env,
        "b",
        ["autoscaling/v2", "HorizontalPodAutoscaler", "b"],
        2,
    )
    .await?;
    create_cron(
        &env,
        "c",
        [
            "autoscaling.plimsoll.dev/v1alpha1",
            "HorizontalPodAutoscalerPlus",
            "c",
        ],
        2,
    )
    .await?;
    let kubeconfig = access::kubeconfig_of(&env, "cron-hpa")?;
    let config = cron_config(&kubeconfig)?;
    let service = Running::spawn("cron-hpa", |token| plimsoll_cron_hpa::run(config, token));
    let deployments = env.api::<Deployment>();
    eventually("the Deployment job ran", WITHIN, EVERY, || async {
        let d = deployments.get("app").await?;
        Ok((d.spec.and_then(|s| s.replicas) == Some(3)).then_some(()))
    })
    .await?;
    let hpas = env.api::<HorizontalPodAutoscaler>();
    eventually("the HPA job ran", WITHIN, EVERY, || async {
        let h = hpas.get("b").await?;
        Ok((h.spec.and_then(|s| s.min_replicas) == Some(2)).then_some(()))
    })
    .await?;
    let pluses = env.api::<HorizontalPodAutoscalerPlus>();
    eventually("the HPA+ job ran", WITHIN, EVERY, || async {
        let h = pluses.get("c").await?;
        Ok((h.spec.min_replicas == Some(2)).then_some(()))
    })
    .await?;
    service.stop().await??;
    assert_enough_and_no_more(&env, "cron-hpa")?;
    env.cleanup().await;
    Ok(())
}

/// A VPA `name` on Deployment `name` in `mode`, recommended by Plimsoll.
async fn create_vpa(env: &Env, name: &str, mode: &str) -> anyhow::Result<()> {
    let vpa: VerticalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "recommenders": [{"name": "plimsoll"}],
            "updatePolicy": {"updateMode": mode},
        },
    }))?;
    env.api::<VerticalPodAutoscaler>()
        .create(&PostParams::default(), &vpa)
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: --authorize mode, ServiceAccount tokens and the access log"
)]
async fn vpa_recommender_recommends_under_its_own_role_and_uses_all_of_it() -> anyhow::Result<()> {
    let env = authorized("rbac-vpa-recommender", &["vpa-recommender"]).await?;
    let sim = env.sim()?;
    plimsoll_e2e::create_deployment(&env, "web", 1, "100m", "100Mi").await?;
    create_vpa(&env, "web", "Off").await?;
    sim.set_load(&env.namespace, "deployments", "web", constant(295.0));
    // Targets resolved through other rules: a Job (batch), a custom kind through its /scale,
    // and a Deployment that does not exist (ConfigUnsupported and a Warning Event).
    other_vpa_targets(&env).await?;
    let kubeconfig = access::kubeconfig_of(&env, "vpa-recommender")?;
    let kubeconfig = kubeconfig.display().to_string();
    let config = plimsoll_vpa_recommender::cli::Args::from_flags([
        "vpa-recommender",
        "--kubeconfig",
        kubeconfig.as_str(),
        "--metrics-address=127.0.0.1:0",
        "--lease-namespace",
        SYSTEM_NAMESPACE,
        "--lease-owner-deployment=plimsoll-vpa-recommender",
        "--shards=8",
        "--retry-period=1s",
        "--recommender-interval=1s",
        "--checkpoints-timeout=5s",
        "--checkpoints-gc-interval=2s",
        "--vpa-object-namespace",
        env.namespace.as_str(),
        "--log-format=text",
    ])?
    .into_config();
    let service = Running::spawn("vpa-recommender", |token| {
        plimsoll_vpa_recommender::run(config, token)
    });
    let vpas = env.api::<VerticalPodAutoscaler>();
    eventually("a recommendation", WITHIN, EVERY, || async {
        Ok(vpas
            .get("web")
            .await?
            .status
            .and_then(|s| s.recommendation)
            .map(|_| ()))
    })
    .await?;
    let checkpoints = env.api::<VerticalPodAutoscalerCheckpoint>();
    eventually("a checkpoint", WITHIN, EVERY, || async {
        let list = checkpoints.list(&ListParams::default()).await?;
        Ok((!list.items.is_empty()).then_some(()))
    })
    .await?;
    let events = Api::<Event>::namespaced(env.client.clone(), &env.namespace);
    eventually("a ConfigUnsupported Event", WITHIN, EVERY, || async {
        let list = events.list(&ListParams::default()).await?;
        Ok(list
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("ConfigUnsupported"))
            .then_some(()))
    })
    .await?;
    service.stop().await??;
    assert_enough_and_no_more(&env, "vpa-recommender")?;
    env.cleanup().await;
    Ok(())
}

/// VPAs on a Job, on a custom kind with a scale subresource, and on a missing Deployment.
async fn other_vpa_targets(env: &Env) -> anyhow::Result<()> {
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "batchy"},
        "spec": {"selector": {"matchLabels": {"app": "batchy"}}, "template": {
            "metadata": {"labels": {"app": "batchy"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "app", "image": "busybox"}]}}}
    }))?;
    env.api::<Job>()
        .create(&PostParams::default(), &job)
        .await?;
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "webapps.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "webapps", "singular": "webapp", "kind": "WebApp"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}}}]
        }
    }))?;
    Api::<CustomResourceDefinition>::all(env.client.clone())
        .create(&PostParams::default(), &crd)
        .await?;
    let resource = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "WebApp".into(),
        plural: "webapps".into(),
    };
    let apps: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &resource);
    let app: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "WebApp",
        "metadata": {"name": "shop"}, "spec": {"replicas": 1}
    }))?;
    apps.create(&PostParams::default(), &app).await?;
    apps.patch_status(
        "shop",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"replicas": 1, "selector": "app=shop"}})),
    )
    .await?;
    for (name, api_version, kind) in [
        ("batchy", "batch/v1", "Job"),
        ("shop", "example.com/v1", "WebApp"),
        ("ghost", "apps/v1", "Deployment"),
    ] {
        let vpa: VerticalPodAutoscaler = serde_json::from_value(json!({
            "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
            "metadata": {"name": name},
            "spec": {
                "targetRef": {"apiVersion": api_version, "kind": kind, "name": name},
                "recommenders": [{"name": "plimsoll"}],
                "updatePolicy": {"updateMode": "Off"},
            },
        }))?;
        env.api::<VerticalPodAutoscaler>()
            .create(&PostParams::default(), &vpa)
            .await?;
    }
    Ok(())
}

/// Writes a recommendation far above the pods' 10m / 10Mi into VPA `name`'s status.
async fn recommend_far_above(env: &Env, name: &str) -> anyhow::Result<()> {
    let status = json!({"status": {"recommendation": {"containerRecommendations": [{
        "containerName": "app",
        "target": {"cpu": "500m", "memory": "500Mi"},
        "lowerBound": {"cpu": "400m", "memory": "400Mi"},
        "upperBound": {"cpu": "1", "memory": "1Gi"}
    }]}}});
    env.api::<VerticalPodAutoscaler>()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

/// Renews the admission webhook's status Lease in the system namespace, as vpa-admission would.
async fn renew_webhook_status(env: &Env) -> anyhow::Result<()> {
    let lease: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "vpa-admission-controller", "namespace": SYSTEM_NAMESPACE},
        "spec": {"holderIdentity": "e2e-test", "leaseDurationSeconds": 60,
            "renewTime": Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}
    }))?;
    Api::<Lease>::namespaced(env.client.clone(), SYSTEM_NAMESPACE)
        .patch(
            "vpa-admission-controller",
            &PatchParams::apply("e2e-webhook").force(),
            &Patch::Apply(&lease),
        )
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: --authorize mode, ServiceAccount tokens and the access log"
)]
async fn vpa_updater_evicts_and_resizes_under_its_own_role_and_uses_all_of_it() -> anyhow::Result<()>
{
    let env = authorized("rbac-vpa-updater", &["vpa-updater"]).await?;
    for (name, mode) in [
        ("web", "Recreate"),
        ("inplace", "InPlaceOrRecreate"),
        ("held", "InPlace"),
    ] {
        plimsoll_e2e::create_deployment(&env, name, 4, "10m", "10Mi").await?;
        plimsoll_e2e::wait_ready_pods(&env, name, 4, WITHIN, EVERY).await?;
        create_vpa(&env, name, mode).await?;
        recommend_far_above(&env, name).await?;
    }
    // More CPU than any node has: the kubelet answers Infeasible and the updater sets the VPA's
    // InPlaceResizeHeld condition (verticalpodautoscalers/status).
    let beyond = json!({"status": {"recommendation": {"containerRecommendations": [{
        "containerName": "app",
        "target": {"cpu": "20", "memory": "10Mi"},
        "lowerBound": {"cpu": "10", "memory": "5Mi"},
        "upperBound": {"cpu": "40", "memory": "20Mi"}
    }]}}});
    env.api::<VerticalPodAutoscaler>()
        .patch_status("held", &PatchParams::default(), &Patch::Merge(&beyond))
        .await?;
    // A pod whose CPU startup boost is over (as the webhook would have annotated it): the
    // updater lowers it and removes the annotation (pods: patch).
    plimsoll_e2e::create_deployment(&env, "boost", 2, "10m", "10Mi").await?;
    plimsoll_e2e::wait_ready_pods(&env, "boost", 2, WITHIN, EVERY).await?;
    let boost_vpa: VerticalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "boost"},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "boost"},
            "updatePolicy": {"updateMode": "Off"},
            "startupBoost": {"cpu": {"type": "Factor", "factor": 2}},
        },
    }))?;
    env.api::<VerticalPodAutoscaler>()
        .create(&PostParams::default(), &boost_vpa)
        .await?;
    let boosted = env
        .api::<Pod>()
        .list(&ListParams::default().labels("app=boost"))
        .await?
        .items
        .into_iter()
        .next()
        .and_then(|p| p.metadata.name)
        .context("a boost pod")?;
    let annotate = json!({"metadata": {"annotations": {
        "vpaCpuStartupBoost/app": r#"{"requests":{"cpu":"10m"},"limits":{}}"#
    }}});
    env.api::<Pod>()
        .patch(&boosted, &PatchParams::default(), &Patch::Merge(&annotate))
        .await?;
    renew_webhook_status(&env).await?;
    let kubeconfig = access::kubeconfig_of(&env, "vpa-updater")?;
    let config = plimsoll_vpa_updater::cli::parse_config([
        "vpa-updater".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--metrics-address=127.0.0.1:0".to_owned(),
        format!("--lease-namespace={SYSTEM_NAMESPACE}"),
        "--lease-owner-deployment=plimsoll-vpa-updater".to_owned(),
        "--retry-period=1s".to_owned(),
        format!("--vpa-object-namespace={}", env.namespace),
        format!("--admission-controller-status-namespace={SYSTEM_NAMESPACE}"),
        "--updater-interval=1s".to_owned(),
        "--log-format=text".to_owned(),
    ])?;
    let service = Running::spawn("vpa-updater", |token| {
        plimsoll_vpa_updater::run(config, token)
    });
    eventually(
        "an eviction, a resize, a held condition and a boost annotation removed",
        WITHIN,
        EVERY,
        || async {
            let audit = env.audit().unwrap_or_default();
            let did = |sub: &str| audit.iter().any(|e| e.subresource == sub);
            let held = audit.iter().any(|e| {
                e.resource == "verticalpodautoscalers"
                    && e.subresource == "status"
                    && e.name == "held"
                    && e.field_manager.as_deref() == Some("vpa-updater")
            });
            let unboosted = audit.iter().any(|e| {
                e.resource == "pods"
                    && e.subresource.is_empty()
                    && e.verb == "patch"
                    && e.field_manager.as_deref() == Some("vpa-updater")
            });
            Ok((did("eviction") && did("resize") && held && unboosted).then_some(()))
        },
    )
    .await?;
    service.stop().await??;
    assert_enough_and_no_more(&env, "vpa-updater")?;
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: --authorize mode, ServiceAccount tokens and the access log"
)]
async fn vpa_admission_mutates_pods_under_its_own_role_and_uses_all_of_it() -> anyhow::Result<()> {
    let env =
        authorized_with_modes("rbac-vpa-admission", &[("vpa-admission", &["self-signed"])]).await?;
    let kubeconfig = access::kubeconfig_of(&env, "vpa-admission")?;
    let webhook = free_address()?;
    shipped_webhook_objects(&env, webhook).await?;
    let args = plimsoll_vpa_admission::cli::Args::try_parse_from([
        "vpa-admission".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--port={}", webhook.port()),
        format!("--metrics-address={}", free_address()?),
        "--self-signed".to_owned(),
        // The names deploy/vpa-admission/self-signed/rbac.yaml allows; no --register-webhook:
        // deploy/ ships the configuration and the Secret, the webhook only fills them in.
        format!("--webhook-config-name={WEBHOOK_CONFIG}"),
        format!("--self-signed-secret={CERTS_SECRET}"),
        "--lease-owner-deployment=plimsoll-vpa-admission".to_owned(),
        // Its host joins the self-signed certificate's names: the sim calls this URL.
        format!("--webhook-url=https://{webhook}/"),
        format!("--webhook-service-namespace={SYSTEM_NAMESPACE}"),
        format!("--status-lease-namespace={SYSTEM_NAMESPACE}"),
        "--status-lease-update-interval=1s".to_owned(),
        "--log-format=text".to_owned(),
    ])?;
    let config = args.into_config();
    let service = Running::spawn("vpa-admission", |token| {
        plimsoll_vpa_admission::run(config, token)
    });
    plimsoll_e2e::wait_webhook_ready(&env.client, SYSTEM_NAMESPACE, WITHIN).await?;
    let hooks = Api::<MutatingWebhookConfiguration>::all(env.client.clone());
    eventually(
        "the webhook filled in its caBundle",
        WITHIN,
        EVERY,
        || async {
            let config = hooks.get(WEBHOOK_CONFIG).await?;
            let filled = config.webhooks.iter().flatten().all(|w| {
                w.client_config
                    .ca_bundle
                    .as_ref()
                    .is_some_and(|b| !b.0.is_empty())
            });
            Ok(filled.then_some(()))
        },
    )
    .await?;
    // A VPA with a recommendation, then its pods: the webhook writes the recommended requests.
    create_vpa(&env, "web", "Recreate").await?;
    recommend_far_above(&env, "web").await?;
    let limits: LimitRange = serde_json::from_value(json!({
        "metadata": {"name": "defaults"},
        "spec": {"limits": [{"type": "Container", "max": {"cpu": "4", "memory": "4Gi"}}]}
    }))?;
    env.api::<LimitRange>()
        .create(&PostParams::default(), &limits)
        .await?;
    // The reflectors must have seen the VPA before the pods come.
    tokio::time::sleep(Duration::from_secs(2)).await;
    plimsoll_e2e::create_deployment(&env, "web", 2, "10m", "10Mi").await?;
    let pods = env.api::<Pod>();
    eventually("pods carry the recommendation", WITHIN, EVERY, || async {
        let list = pods.list(&ListParams::default().labels("app=web")).await?;
        let mutated = list.items.iter().any(|p| {
            p.spec.as_ref().is_some_and(|s| {
                s.containers.iter().any(|c| {
                    c.resources
                        .as_ref()
                        .and_then(|r| r.requests.as_ref())
                        .and_then(|r| r.get("cpu"))
                        .is_some_and(|q| q.0 == "500m")
                })
            })
        });
        Ok(mutated.then_some(()))
    })
    .await?;
    service.stop().await??;
    assert_enough_and_no_more_in(&env, "vpa-admission", &["self-signed"])?;
    env.cleanup().await;
    Ok(())
}

/// The answers (HTTP status) to get, update, patch and delete of `name` through `api`;
/// `current` is the object as the administrator read it (for the update).
async fn answers<K>(api: &Api<K>, name: &str, current: &K) -> anyhow::Result<[u16; 4]>
where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + k8s_openapi::serde::de::DeserializeOwned
        + k8s_openapi::serde::Serialize,
{
    let marker = json!({"metadata": {"labels": {"plimsoll.dev/intruder": "true"}}});
    Ok([
        access::status_of(api.get(name).await)?,
        access::status_of(api.replace(name, &PostParams::default(), current).await)?,
        access::status_of(
            api.patch(name, &PatchParams::default(), &Patch::Merge(&marker))
                .await,
        )?,
        access::status_of(api.delete(name, &DeleteParams::default()).await)?,
    ])
}

const REFUSED: [u16; 4] = [403; 4];

/// The Leases a component renews in deploy/ (the webhook: its status Lease).
fn own_lease(component: &str) -> String {
    match component {
        "vpa-admission" => STATUS_LEASE.to_owned(),
        c => format!("plimsoll-{c}"),
    }
}

const STATUS_LEASE: &str = "vpa-admission-controller";
const OTHERS_WEBHOOK: &str = "someone-elses-webhook";
const UNRELATED_SECRET: &str = "unrelated";
const CERTS_SECRET: &str = "plimsoll-vpa-admission-tls";

/// deploy/'s webhook configuration and empty certificate Secret, applied by the administrator
/// as `kubectl apply -k deploy/` would, the configuration pointed at the in-process webhook
/// (the sim reaches no Service).
async fn shipped_webhook_objects(env: &Env, webhook: std::net::SocketAddr) -> anyhow::Result<()> {
    let dir = access::deploy_dir().join("vpa-admission");
    let mut docs = access::documents(&dir.join("webhook.yaml"))?;
    docs.extend(access::documents(&dir.join("tls-secret.yaml"))?);
    for mut doc in docs {
        match doc.get("kind").and_then(serde_json::Value::as_str) {
            Some("MutatingWebhookConfiguration") => {
                for hook in doc["webhooks"].as_array_mut().into_iter().flatten() {
                    hook["clientConfig"] = json!({"url": format!("https://{webhook}/")});
                }
            }
            Some("Secret") => {}
            _ => continue,
        }
        access::apply(&env.client, &doc).await?;
    }
    Ok(())
}

/// What the services would have created, and what belongs to someone else, written by the
/// administrator: every service's Lease (returned, sorted), the webhook's own configuration and
/// an unrelated one, the webhook's certificate Secret and an unrelated one.
async fn stage_others_objects(env: &Env) -> anyhow::Result<Vec<String>> {
    use k8s_openapi::api::core::v1::Secret;
    let leases = Api::<Lease>::namespaced(env.client.clone(), SYSTEM_NAMESPACE);
    let mut lease_names: Vec<String> = access::COMPONENTS.iter().map(|c| own_lease(c)).collect();
    lease_names.sort();
    for name in &lease_names {
        let lease: Lease = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"holderIdentity": format!("{name}-0"), "leaseDurationSeconds": 15}
        }))?;
        leases.create(&PostParams::default(), &lease).await?;
    }
    let hooks = Api::<MutatingWebhookConfiguration>::all(env.client.clone());
    for name in [OTHERS_WEBHOOK, WEBHOOK_CONFIG] {
        let hook: MutatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": name},
            "webhooks": [{"name": "x.example.com", "sideEffects": "None",
                "admissionReviewVersions": ["v1"], "failurePolicy": "Ignore",
                "clientConfig": {"url": "https://127.0.0.1:1/"},
                "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["widgets"]}]}]
        }))?;
        hooks.create(&PostParams::default(), &hook).await?;
    }
    let secrets = Api::<Secret>::namespaced(env.client.clone(), SYSTEM_NAMESPACE);
    for name in [UNRELATED_SECRET, CERTS_SECRET] {
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": name}, "stringData": {"k": "v"}
        }))?;
        secrets.create(&PostParams::default(), &secret).await?;
    }
    Ok(lease_names)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: --authorize mode and ServiceAccount tokens"
)]
async fn no_account_reaches_another_services_lease_an_unrelated_webhook_or_secret()
-> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Secret;
    // Every component with the RBAC of every mode: the most any account is ever given.
    let env = authorized_with_modes(
        "rbac-isolation",
        &[
            ("hpa-plus", &["native-hpa"]),
            ("cron-hpa", &[]),
            ("vpa-recommender", &[]),
            ("vpa-updater", &[]),
            ("vpa-admission", &["self-signed"]),
        ],
    )
    .await?;
    let lease_names = stage_others_objects(&env).await?;
    let leases = Api::<Lease>::namespaced(env.client.clone(), SYSTEM_NAMESPACE);
    let hooks = Api::<MutatingWebhookConfiguration>::all(env.client.clone());
    let secrets = Api::<Secret>::namespaced(env.client.clone(), SYSTEM_NAMESPACE);

    for component in access::COMPONENTS {
        let client = access::client_of(&env, component).await?;
        let own = own_lease(component);
        let as_component = Api::<Lease>::namespaced(client.clone(), SYSTEM_NAMESPACE);
        // Its own Lease answers: the account and the objects are real, so a 403 below means RBAC.
        assert_eq!(
            access::status_of(as_component.get(&own).await)?,
            200,
            "{component} reads its own Lease {own}"
        );
        for name in lease_names.iter().filter(|n| **n != own) {
            let current = leases.get(name).await?;
            let got = answers(&as_component, name, &current).await?;
            // The updater reads the webhook's status Lease, and may do nothing else with it.
            let want = if component == "vpa-updater" && name == STATUS_LEASE {
                [200, 403, 403, 403]
            } else {
                REFUSED
            };
            assert_eq!(
                got, want,
                "{component} on Lease {name} (get, update, patch, delete)"
            );
        }

        let as_component = Api::<MutatingWebhookConfiguration>::all(client.clone());
        let current = hooks.get(OTHERS_WEBHOOK).await?;
        assert_eq!(
            answers(&as_component, OTHERS_WEBHOOK, &current).await?,
            REFUSED,
            "{component} on MutatingWebhookConfiguration {OTHERS_WEBHOOK}"
        );
        let own_hook = access::status_of(as_component.get(WEBHOOK_CONFIG).await)?;
        let want = if component == "vpa-admission" {
            200
        } else {
            403
        };
        assert_eq!(own_hook, want, "{component} reads {WEBHOOK_CONFIG}");

        let as_component = Api::<Secret>::namespaced(client.clone(), SYSTEM_NAMESPACE);
        let current = secrets.get(UNRELATED_SECRET).await?;
        assert_eq!(
            answers(&as_component, UNRELATED_SECRET, &current).await?,
            REFUSED,
            "{component} on Secret {UNRELATED_SECRET}"
        );
        assert_eq!(
            access::status_of(as_component.list(&ListParams::default()).await)?,
            403,
            "{component} lists Secrets"
        );
        let certs = access::status_of(as_component.get(CERTS_SECRET).await)?;
        let want = if component == "vpa-admission" {
            200
        } else {
            403
        };
        assert_eq!(certs, want, "{component} reads {CERTS_SECRET}");
    }
    // Nothing was changed behind the checks' back.
    for name in &lease_names {
        let labels = leases.get(name).await?.metadata.labels.unwrap_or_default();
        assert!(!labels.contains_key("plimsoll.dev/intruder"), "{name}");
    }
    env.cleanup().await;
    Ok(())
}

/// As kube-apiserver: a server-side apply that would create its object needs `create` as well
/// as `patch` (the patch handler authorizes the create path again), while an apply to an
/// object that exists needs `patch` alone. The services' rules rely on it: the recommender
/// writes checkpoints by apply, and keeps `create` for the first one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: --authorize mode and ServiceAccount tokens"
)]
async fn an_apply_that_creates_needs_create_and_one_that_changes_needs_patch() -> anyhow::Result<()>
{
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let env = authorized("rbac-apply-create", &[]).await?;
    let role = |verbs: serde_json::Value| -> anyhow::Result<Role> {
        Ok(serde_json::from_value(json!({
            "metadata": {"name": "probe", "namespace": SYSTEM_NAMESPACE},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}],
        }))?)
    };
    let roles = Api::<Role>::namespaced(env.client.clone(), SYSTEM_NAMESPACE);
    roles
        .create(&PostParams::default(), &role(json!(["patch"]))?)
        .await?;
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "probe", "namespace": SYSTEM_NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "probe"},
        "subjects": [{"kind": "ServiceAccount", "name": "plimsoll-probe",
                      "namespace": SYSTEM_NAMESPACE}],
    }))?;
    Api::<RoleBinding>::namespaced(env.client.clone(), SYSTEM_NAMESPACE)
        .create(&PostParams::default(), &binding)
        .await?;
    let account: k8s_openapi::api::core::v1::ServiceAccount = serde_json::from_value(
        json!({"metadata": {"name": "plimsoll-probe", "namespace": SYSTEM_NAMESPACE}}),
    )?;
    Api::namespaced(env.client.clone(), SYSTEM_NAMESPACE)
        .create(&PostParams::default(), &account)
        .await?;
    let admin = Api::<ConfigMap>::namespaced(env.client.clone(), SYSTEM_NAMESPACE);
    let probe =
        Api::<ConfigMap>::namespaced(access::client_of(&env, "probe").await?, SYSTEM_NAMESPACE);
    let apply = |name: &str| {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": name}, "data": {"k": "v"}});
        let probe = probe.clone();
        let name = name.to_owned();
        async move {
            probe
                .patch(&name, &PatchParams::apply("probe"), &Patch::Apply(&body))
                .await
        }
    };
    // Patch alone: the existing object changes, a new one is refused with the patch handler's
    // message (the authorizer's reason, empty for RBAC).
    let existing: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "there"}}))?;
    admin.create(&PostParams::default(), &existing).await?;
    assert_eq!(access::status_of(apply("there").await)?, 200);
    let refused = apply("new").await;
    assert_eq!(access::status_of(apply("new").await)?, 403);
    let Err(kube::Error::Api(status)) = refused else {
        anyhow::bail!("{refused:?}");
    };
    assert_eq!(status.message, "configmaps \"new\" is forbidden: ");
    assert!(admin.get_opt("new").await?.is_none());
    // With create, the apply makes it.
    roles
        .replace(
            "probe",
            &PostParams::default(),
            &role(json!(["patch", "create"]))?,
        )
        .await?;
    assert_eq!(access::status_of(apply("new").await)?, 200);
    assert!(admin.get_opt("new").await?.is_some());
    env.cleanup().await;
    Ok(())
}
