//! `bench-vpa-updater`: one vpa-updater loop over 1,000 VPAs and 10,000 pods on an in-process
//! plimsoll-sim; prints the loop time and the process RSS.
//!
//! The updater's watches list everything once (timed: "caches synced"); then two kinds of loop
//! are timed, calling `updater::run_once` directly (the loop the service runs every
//! `--updater-interval`):
//! * steady: every pod's requests lie inside its VPA's recommended range, so the loop only
//!   reads its caches and decides (no request);
//! * drift: every recommendation moves far above the requests, so each VPA evicts half of its
//!   10 pods (tolerance 0.5): 5,000 evictions and 10,000 Events in one loop.
//!
//! RSS includes the sim (it holds every object); the report gives it before the updater ran and
//! after each phase. Bounded: every wait gives up after a timeout.

use plimsoll_e2e::process::Proc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_sim::{Sim, SimConfig};
use plimsoll_vpa_updater::{cli, updater};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// VPAs (one Deployment each); `BENCH_VPAS` overrides it for a quick run.
const DEFAULT_VPAS: usize = 1_000;
const REPLICAS: usize = 10;
const NS: &str = "bench";
const CONCURRENCY: usize = 32;
const STEADY_LOOPS: usize = 5;

fn rss() -> String {
    let mib = |r: anyhow::Result<f64>| r.map_or_else(|_| "?".to_owned(), |v| format!("{v:.0} MiB"));
    format!(
        "VmRSS {} (peak {})",
        mib(Proc::This.rss_mib()),
        mib(Proc::This.peak_rss_mib())
    )
}

fn recommendation(
    cpu: &str,
    memory: &str,
    low: (&str, &str),
    high: (&str, &str),
) -> serde_json::Value {
    json!({"status": {"recommendation": {"containerRecommendations": [{
        "containerName": "app",
        "target": {"cpu": cpu, "memory": memory},
        "lowerBound": {"cpu": low.0, "memory": low.1},
        "upperBound": {"cpu": high.0, "memory": high.1}
    }]}}})
}

async fn running_pods(pods: &Api<Pod>) -> anyhow::Result<usize> {
    let list = pods.list(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .count())
}

/// Sim, workloads, VPAs, then the steady and the drift loops, each step printing its line.
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let started = Instant::now();
    let vpas_n: usize = std::env::var("BENCH_VPAS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_VPAS);
    let sim = Sim::start(SimConfig {
        pod_start: Duration::from_millis(200),
        pod_ready: Duration::from_millis(200),
        tick: Duration::from_millis(500),
        nodes: 150,
        ..SimConfig::default()
    })
    .await?;
    let kubeconfig = std::env::temp_dir().join(format!(
        "bench-vpa-updater-{}.kubeconfig",
        std::process::id()
    ));
    std::fs::write(&kubeconfig, sim.kubeconfig())?;
    let client = sim.kube_client().await?;
    plimsoll_e2e::install_crds(&client).await?;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    println!("rss with an empty sim: {}", rss());

    create_deployments(&Api::namespaced(client.clone(), NS), vpas_n).await?;
    wait_running(&Api::namespaced(client.clone(), NS), vpas_n * REPLICAS).await?;
    println!(
        "{} deployments, {} running pods after {:.1} s",
        vpas_n,
        vpas_n * REPLICAS,
        started.elapsed().as_secs_f64()
    );

    let vpas: Api<VerticalPodAutoscaler> = Api::namespaced(client.clone(), NS);
    let steady = recommendation("100m", "100Mi", ("50m", "50Mi"), ("200m", "200Mi"));
    create_vpas(&vpas, vpas_n, &steady).await?;
    println!("rss with the sim loaded (before the updater): {}", rss());

    let config = cli::parse_config([
        "vpa-updater".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--vpa-object-namespace={NS}"),
        "--use-admission-controller-status=false".to_owned(),
        "--updater-interval=3m".to_owned(),
    ])?;
    let (ctx, watches) = updater::detached_context(sim.kube_client().await?, &config);
    let watching = tokio::spawn(watches.run());
    let t = Instant::now();
    tokio::time::timeout(Duration::from_secs(120), ctx.cache.synced())
        .await
        .context("caches not synced within 120 s")?;
    println!(
        "caches synced: {:.3} s ({} pods)",
        t.elapsed().as_secs_f64(),
        ctx.cache.pod_count()
    );
    let settings = updater::Settings::from_config(&config);
    let cancel = CancellationToken::new();
    for i in 1..=STEADY_LOOPS {
        let t = Instant::now();
        let report = updater::run_once(&ctx, &settings, &cancel).await?;
        println!(
            "steady loop {i}: {:.3} s, {} VPAs, {} evicted",
            t.elapsed().as_secs_f64(),
            report.vpas,
            report.evicted
        );
    }
    println!("rss after steady loops: {}", rss());

    let drift = recommendation("1", "1Gi", ("800m", "800Mi"), ("2", "2Gi"));
    recommend(&vpas, vpas_n, &drift).await?;
    wait_cached_recommendations(&ctx, &settings, vpas_n).await?;
    let t = Instant::now();
    let report = updater::run_once(&ctx, &settings, &cancel).await?;
    println!(
        "drift loop: {:.3} s, {} VPAs, {} evicted, {} blocked",
        t.elapsed().as_secs_f64(),
        report.vpas,
        report.evicted,
        report.blocked
    );
    println!("rss after the drift loop: {}", rss());
    println!("total {:.1} s", started.elapsed().as_secs_f64());
    watching.abort();
    let _ = std::fs::remove_file(&kubeconfig);
    sim.shutdown().await;
    Ok(())
}

/// Deployments `w0000`… of `REPLICAS` pods requesting 100m and 100Mi.
async fn create_deployments(deployments: &Api<Deployment>, n: usize) -> anyhow::Result<()> {
    stream::iter(0..n)
        .map(|i| {
            let api = deployments.clone();
            async move {
                let name = format!("w{i:04}");
                let d: Deployment = serde_json::from_value(json!({
                    "metadata": {"name": name},
                    "spec": {
                        "replicas": REPLICAS,
                        "selector": {"matchLabels": {"app": name}},
                        "template": {
                            "metadata": {"labels": {"app": name}},
                            "spec": {"containers": [{"name": "app", "image": "pause",
                                "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}]}
                        }
                    }
                }))?;
                api.create(&PostParams::default(), &d).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

/// Waits (at most 120 s) until `want` pods are running.
async fn wait_running(pods: &Api<Pod>, want: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let n = running_pods(pods).await?;
        if n >= want {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("only {n} pods running after 120 s");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// A Recreate VPA on each Deployment, with `status` as its recommendation.
async fn create_vpas(
    vpas: &Api<VerticalPodAutoscaler>,
    n: usize,
    status: &serde_json::Value,
) -> anyhow::Result<()> {
    stream::iter(0..n)
        .map(|i| {
            let api = vpas.clone();
            async move {
                let name = format!("w{i:04}");
                let vpa: VerticalPodAutoscaler = serde_json::from_value(json!({
                    "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
                    "metadata": {"name": name},
                    "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                             "updatePolicy": {"updateMode": "Recreate"}}
                }))?;
                api.create(&PostParams::default(), &vpa).await?;
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
                    .await
                    .context("status")?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

/// Writes `status` as every VPA's recommendation.
async fn recommend(
    vpas: &Api<VerticalPodAutoscaler>,
    n: usize,
    status: &serde_json::Value,
) -> anyhow::Result<()> {
    stream::iter(0..n)
        .map(|i| {
            let api = vpas.clone();
            async move {
                api.patch_status(
                    &format!("w{i:04}"),
                    &PatchParams::default(),
                    &Patch::Merge(status),
                )
                .await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

/// Waits (at most 60 s) until the updater's VPA cache holds the drift recommendation of all `n`
/// VPAs, so that the drift loop is timed on what it acts on.
async fn wait_cached_recommendations(
    ctx: &plimsoll_vpa_updater::context::Context,
    settings: &updater::Settings,
    n: usize,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let moved = ctx
            .cache
            .vpas(&settings.scope)
            .iter()
            .filter(|v| {
                v.status
                    .as_ref()
                    .and_then(|s| serde_json::to_value(s).ok())
                    .and_then(|s| {
                        s.pointer("/recommendation/containerRecommendations/0/target/cpu")
                            .cloned()
                    })
                    == Some(json!("1"))
            })
            .count();
        if moved >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("only {moved} of {n} VPAs seen with the new recommendation after 60 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
