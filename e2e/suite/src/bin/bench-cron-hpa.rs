//! `bench-cron-hpa`: 1,000 `CronHorizontalPodAutoscaler` objects with 10 jobs each, every job
//! firing once a minute, against an in-process plimsoll-sim; cron-hpa runs in a child process
//! so its CPU time and RSS are measured alone.
//!
//! Job `k` of object `i` fires at second `(6k + i) mod 60` of every minute, so the 10,000
//! firings a minute are spread over the minute (about 167 a second) rather than all landing
//! on second 0; consecutive jobs of an object alternate between 1 and 2 replicas, so every
//! firing writes the scale subresource. Lateness is what the controller reports in each
//! condition (`ran at … (N ms late)`): from the scheduled instant to the end of the job's
//! writes.
//!
//! Usage: `bench-cron-hpa [OBJECTS] [MEASURE_SECONDS]` (defaults 1000 and 60). Prints one
//! `key: value` line per number. Bounded: about 40 s of setup plus the measured window.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;
use kube::api::{Api, ListParams, PostParams};
use plimsoll_core::api::cron::{
    CronHorizontalPodAutoscaler, CronHorizontalPodAutoscalerSpec, JobState, ScalingJob,
};
use plimsoll_cron_hpa::{CommonArgs, Config, LogFormat};
use plimsoll_e2e::process::{Child, Proc};
use plimsoll_e2e::scrape::quantile;
use plimsoll_sim::{Sim, SimConfig};

const NAMESPACE: &str = "default";
const JOBS: usize = 10;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Runtime::new()?;
    if args.get(1).map(String::as_str) == Some("serve") {
        let kubeconfig = args.get(2).context("serve KUBECONFIG METRICS_ADDRESS")?;
        let metrics: std::net::SocketAddr = args
            .get(3)
            .context("serve KUBECONFIG METRICS_ADDRESS")?
            .parse()?;
        return runtime.block_on(serve(kubeconfig.into(), metrics));
    }
    let objects: usize = args.get(1).map_or(Ok(1000), |s| s.parse())?;
    let seconds: u64 = args.get(2).map_or(Ok(60), |s| s.parse())?;
    runtime.block_on(bench(objects, seconds))
}

/// The child: cron-hpa until stdin closes.
async fn serve(
    kubeconfig: std::path::PathBuf,
    metrics_address: std::net::SocketAddr,
) -> anyhow::Result<()> {
    let config = Config {
        common: CommonArgs {
            kubeconfig: Some(kubeconfig),
            context: None,
            kube_api_qps: 0.0,
            kube_api_burst: None,
            metrics_address,
            log_format: LogFormat::Text,
            log_filter: Some("warn".into()),
            leader_elect: false,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            lease_namespace: None,
            lease_owner_deployment: None,
            admin_listener: plimsoll_runtime::AdminListenerArgs::default(),
        },
        missed_job_grace: Duration::from_secs(300),
        min_job_interval: Duration::ZERO,
        identity: None,
    };
    plimsoll_cron_hpa::run(config, plimsoll_e2e::process::parent_gone()).await?;
    Ok(())
}

async fn bench(objects: usize, seconds: u64) -> anyhow::Result<()> {
    let sim = Sim::start(SimConfig {
        workload_model: false,
        ..SimConfig::default()
    })
    .await?;
    let client = sim.kube_client().await?;
    plimsoll_e2e::install_crds(&client).await?;
    let dir = std::env::temp_dir().join(format!("bench-cron-hpa-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig())?;

    let started = Instant::now();
    create_objects(&client, objects).await?;
    let created = started.elapsed();

    let metrics = plimsoll_e2e::free_address()?;
    let metrics_arg = metrics.to_string();
    let child = Child::serve(&[kubeconfig.as_os_str(), metrics_arg.as_ref()], false)?;
    let pid = child.proc;
    let submitted_in = wait_submitted(&client, objects).await?;

    let (cpu_before, t0) = (pid.cpu_seconds()?, Timestamp::now());
    let sim_cpu_before = Proc::This.cpu_seconds()?;
    let start_delay_before = start_delays(metrics).await?;
    let wall = Instant::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let cpu = pid.cpu_seconds()? - cpu_before;
    let sim_cpu = Proc::This.cpu_seconds()? - sim_cpu_before;
    let start_delay_after = start_delays(metrics).await?;
    let busy = wall.elapsed().as_secs_f64();
    let rss = pid.rss_mib()?;
    let t1 = Timestamp::now();

    let mut lateness = collect_lateness(&client, t0, t1).await?;
    child.stop();
    let _ = std::fs::remove_dir_all(&dir);
    sim.shutdown().await;

    lateness.sort_unstable();
    let pick = |q: f64| -> i64 {
        if lateness.is_empty() {
            return -1;
        }
        let i = ((lateness.len() as f64 - 1.0) * q).round() as usize;
        lateness[i.min(lateness.len() - 1)]
    };
    println!("objects: {objects}");
    println!("jobs: {}", objects * JOBS);
    println!("create_objects_seconds: {:.1}", created.as_secs_f64());
    println!("all_submitted_seconds: {:.1}", submitted_in.as_secs_f64());
    println!("measured_seconds: {busy:.1}");
    println!("runs_measured: {}", lateness.len());
    println!("lateness_p50_ms: {}", pick(0.50));
    println!("lateness_p99_ms: {}", pick(0.99));
    println!("lateness_max_ms: {}", pick(1.0));
    for (label, q) in [("p50", 0.5), ("p99", 0.99)] {
        let seconds = quantile(&start_delay_before, &start_delay_after, q);
        println!("start_delay_{label}_ms: {:.1}", seconds * 1000.0);
    }
    println!("cpu_seconds: {cpu:.2}");
    println!("cpu_cores_avg: {:.3}", cpu / busy);
    // The benchmark process is the sim plus this loop (idle while measuring).
    println!("sim_cpu_cores_avg: {:.3}", sim_cpu / busy);
    println!("rss_mib: {rss:.1}");
    println!(
        "load_average_1m: {:.1}",
        plimsoll_e2e::process::load_average()
    );
    println!("machine: {}", plimsoll_e2e::process::machine());
    Ok(())
}

async fn create_objects(client: &kube::Client, objects: usize) -> anyhow::Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let crons: Api<CronHorizontalPodAutoscaler> = Api::namespaced(client.clone(), NAMESPACE);
    futures::stream::iter(0..objects)
        .map(|i| {
            let (deployments, crons) = (deployments.clone(), crons.clone());
            async move {
                let name = format!("app-{i:04}");
                let d: Deployment = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": name},
                    "spec": {
                        "replicas": 1,
                        "selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}},
                            "spec": {"containers": [{"name": "app", "image": "pause"}]}}
                    }
                }))?;
                deployments.create(&PostParams::default(), &d).await?;
                let jobs = (0..JOBS)
                    .map(|k| ScalingJob {
                        name: format!("job-{k}"),
                        schedule: format!("{} * * * * *", (6 * k + i) % 60),
                        target_size: 1 + (k % 2) as i32,
                        run_once: false,
                    })
                    .collect();
                let mut cron = CronHorizontalPodAutoscaler::new(
                    &name,
                    CronHorizontalPodAutoscalerSpec {
                        scale_target_ref: CrossVersionObjectReference {
                            api_version: Some("apps/v1".into()),
                            kind: "Deployment".into(),
                            name: name.clone(),
                        },
                        jobs,
                        ..CronHorizontalPodAutoscalerSpec::default()
                    },
                );
                cron.metadata.namespace = Some(NAMESPACE.into());
                crons.create(&PostParams::default(), &cron).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Waits until every object has its 10 conditions; returns how long that took.
async fn wait_submitted(client: &kube::Client, objects: usize) -> anyhow::Result<Duration> {
    let crons: Api<CronHorizontalPodAutoscaler> = Api::namespaced(client.clone(), NAMESPACE);
    let started = Instant::now();
    loop {
        let list = crons.list(&ListParams::default()).await?;
        let ready = list
            .items
            .iter()
            .filter(|c| {
                c.status
                    .as_ref()
                    .is_some_and(|s| s.conditions.len() == JOBS)
            })
            .count();
        if ready == objects {
            return Ok(started.elapsed());
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!("only {ready} of {objects} objects submitted after 120 s");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The buckets of cron-hpa's start-delay histogram.
async fn start_delays(metrics: std::net::SocketAddr) -> anyhow::Result<Vec<(f64, f64)>> {
    let text = plimsoll_e2e::scrape::metrics(metrics).await?;
    Ok(plimsoll_e2e::scrape::buckets(
        &text,
        "plimsoll_cron_hpa_job_start_delay_seconds",
    ))
}

/// Lateness (ms) of every run whose firing lies in `[t0, t1)`, from the condition messages.
async fn collect_lateness(
    client: &kube::Client,
    t0: Timestamp,
    t1: Timestamp,
) -> anyhow::Result<Vec<i64>> {
    let crons: Api<CronHorizontalPodAutoscaler> = Api::namespaced(client.clone(), NAMESPACE);
    let list = crons.list(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .flat_map(|c| c.status.iter().flat_map(|s| s.conditions.iter()))
        .filter(|c| c.state == JobState::Succeed)
        .filter(|c| {
            c.last_probe_time
                .as_ref()
                .is_some_and(|t| t.0 >= t0 && t.0 < t1)
        })
        .filter_map(|c| {
            c.message
                .split(" (")
                .nth(1)?
                .split("ms late")
                .next()?
                .parse()
                .ok()
        })
        .collect())
}
