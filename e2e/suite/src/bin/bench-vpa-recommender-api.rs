//! `bench-vpa-recommender-api`: the vpa-recommender loop end to end through the API (issue 20).
//!
//! `bench-vpa-recommender` times the loop on in-memory sources; this one runs the real service
//! against an in-process plimsoll-sim, so every read and write is an HTTP request: 5,000 VPAs
//! (`BENCH_VPAS`), each on a Deployment of 5 pods with 2 containers (25,000 pods, 50,000
//! containers), in 50 namespaces. The sim's workload model is off (the bench measures the
//! recommender, not the simulated kubelet); the bench itself plays metrics-server, publishing a
//! fresh usage sample of every pod every 10 s through the sim's `metrics.k8s.io`.
//!
//! vpa-recommender runs in a child process (this binary re-executed as `serve FLAGS…`, the
//! service's own flags and a multi-threaded runtime as the real binary uses), so its CPU and RSS
//! are its own, with `--recommender-interval=10s`, at two client-side limits, each on a fresh
//! sim: `--kube-api-qps=BENCH_QPS --kube-api-burst=BENCH_BURST` (default 50/100) and no limit.
//! For the first loop (every VPA gets its first status and checkpoints) and then up to
//! `BENCH_STEADY_LOOPS` (default 2) steady loops it reports, from the service's own metrics and
//! logs: loop wall time, status and checkpoint writes, writes/s, requests sent, how long the
//! rate limiter held the request queue, the recommender's CPU (cores) and RSS, whether the
//! `--checkpoints-timeout` budget ran out, and from these what bounds the loop.
//!
//! Bounded: each setting stops at its first-loop and steady-loop count or after
//! `BENCH_SECONDS` (default 330) of service time, whichever comes first: at 50 qps a loop takes
//! minutes, so that setting shows its first loop only unless `BENCH_SECONDS` is raised.
//!
//! Run: `cargo run --profile dist -p plimsoll-e2e --bin bench-vpa-recommender-api`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, PostParams};
use plimsoll_core::api::vpa::{VerticalPodAutoscaler, VerticalPodAutoscalerCheckpoint};
use plimsoll_e2e::process::{Child, Proc, load_average, machine};
use plimsoll_e2e::scrape;
use plimsoll_sim::workload::{ContainerUsage, PodUsage};
use serde_json::{Value, json};

const PODS_PER_VPA: usize = 5;
const CONTAINERS: [&str; 2] = ["app", "sidecar"];
const NAMESPACES: usize = 50;
const INTERVAL: &str = "10s";
/// How often the bench publishes a new usage sample of every pod (metrics-server's resolution
/// is 15 s; a new sample per loop keeps every loop's model changing).
const SAMPLE_EVERY: Duration = Duration::from_secs(10);
const PREFIX: &str = "plimsoll_vpa_recommender_";

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn namespace(i: usize) -> String {
    format!("bench-{}", i % NAMESPACES)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("serve") {
        return serve(&args[2..]);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(bench())
}

/// The child: vpa-recommender with `flags`, logging to stderr, until the parent closes stdin.
fn serve(flags: &[String]) -> anyhow::Result<()> {
    let argv = std::iter::once("vpa-recommender".to_owned()).chain(flags.iter().cloned());
    let config =
        <plimsoll_vpa_recommender::cli::Args as clap::Parser>::try_parse_from(argv)?.into_config();
    plimsoll_runtime::client::install_crypto_provider();
    plimsoll_runtime::telemetry::init_tracing(
        config.common.log_format,
        &config.common.effective_log_filter(),
    )?;
    let token = plimsoll_e2e::process::parent_gone();
    // As the real binary: a multi-threaded runtime with one worker per core.
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(plimsoll_vpa_recommender::run(config, token))?;
    Ok(())
}

/// One client-side limit to run the service at.
#[derive(Clone, Copy)]
struct Setting {
    qps: f64,
    burst: u32,
}

impl Setting {
    fn label(self) -> String {
        if self.qps > 0.0 {
            format!(
                "--kube-api-qps={} --kube-api-burst={}",
                self.qps, self.burst
            )
        } else {
            "no client-side limit (--kube-api-qps=0)".to_owned()
        }
    }
}

async fn bench() -> anyhow::Result<()> {
    let vpas: usize = env_or("BENCH_VPAS", 5_000);
    let settings = [
        Setting {
            qps: env_or("BENCH_QPS", 50.0),
            burst: env_or("BENCH_BURST", 100),
        },
        Setting { qps: 0.0, burst: 0 },
    ];
    println!(
        "bench-vpa-recommender-api: {vpas} VPAs, {} pods, {} containers, {NAMESPACES} namespaces; \
         vpa-recommender in a child process against an in-process plimsoll-sim, \
         --recommender-interval={INTERVAL}, default --checkpoints-timeout (1m)",
        vpas * PODS_PER_VPA,
        vpas * PODS_PER_VPA * CONTAINERS.len()
    );
    println!("machine: {}, load average {:.2}", machine(), load_average());
    for setting in settings {
        run_setting(vpas, setting).await?;
    }
    println!("load average at the end {:.2}", load_average());
    Ok(())
}

/// A fresh sim with the objects, the recommender at `setting`, the loops measured and printed.
async fn run_setting(vpas: usize, setting: Setting) -> anyhow::Result<()> {
    println!("\n== {} ==", setting.label());
    let started = Instant::now();
    let (sim, client) = plimsoll_e2e::bench_sim().await?;
    create_objects(&client, vpas).await?;
    let cluster = sim.cluster.clone();
    publish_usage(&cluster, vpas, 0);
    let sampler = tokio::spawn(async move {
        let mut step = 0;
        loop {
            tokio::time::sleep(SAMPLE_EVERY).await;
            step += 1;
            publish_usage(&cluster, vpas, step);
        }
    });
    println!(
        "setup: {vpas} Deployments, {} pods, {vpas} VPAs created in {:.1} s",
        vpas * PODS_PER_VPA,
        started.elapsed().as_secs_f64()
    );

    let dir = std::env::temp_dir().join(format!("bench-vpa-rec-api-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = dir.join("kubeconfig");
    // HTTPS, as a real API server: TLS is part of every request's cost.
    std::fs::write(&kubeconfig, sim.kubeconfig())?;
    let log = dir.join("recommender.log");
    let admin = plimsoll_e2e::free_address()?;
    let flags = service_flags(&kubeconfig, admin, setting);
    let flags: Vec<&std::ffi::OsStr> = flags.iter().map(std::ffi::OsStr::new).collect();
    let child = Child::serve_logging_to(&flags, false, std::fs::File::create(&log)?)?;
    let measured = measure(admin, child.proc, &Proc::This).await;
    tokio::task::block_in_place(|| child.stop());
    let loops = measured?;
    let budget = budgets_per_loop(&log);
    report(setting, &loops, &budget);
    outcome(&client, vpas).await?;
    sampler.abort();
    sim.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn service_flags(kubeconfig: &Path, admin: SocketAddr, setting: Setting) -> Vec<String> {
    let mut flags = vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--metrics-address={admin}"),
        "--leader-elect=false".to_owned(),
        format!("--recommender-interval={INTERVAL}"),
        "--log-format=json".to_owned(),
        format!("--kube-api-qps={}", setting.qps),
    ];
    if setting.qps > 0.0 {
        flags.push(format!("--kube-api-burst={}", setting.burst));
    }
    flags
}

/// Namespaces, then for each VPA its Deployment, its pods and itself.
async fn create_objects(client: &kube::Client, vpas: usize) -> anyhow::Result<()> {
    for n in 0..NAMESPACES {
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": format!("bench-{n}")}}))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await?;
    }
    futures::stream::iter(0..vpas)
        .map(|i| create_vpa(client.clone(), i))
        .buffer_unordered(64)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

fn container(name: &str) -> Value {
    json!({"name": name, "image": "app:1",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}})
}

/// Deployment `w-<i>`, its pods `w-<i>-<p>` (created directly: the workload model is off) and
/// VPA `w-<i>` for the `plimsoll` recommender.
async fn create_vpa(client: kube::Client, i: usize) -> anyhow::Result<()> {
    let ns = namespace(i);
    let name = format!("w-{i}");
    let containers: Vec<Value> = CONTAINERS.iter().map(|c| container(c)).collect();
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": PODS_PER_VPA, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": containers}}}
    }))?;
    Api::<Deployment>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &d)
        .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    for p in 0..PODS_PER_VPA {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("{name}-{p}"), "labels": {"app": name}},
            "spec": {"nodeName": "node-0", "containers": containers}
        }))?;
        pods.create(&PostParams::default(), &pod).await?;
    }
    let vpa: VerticalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "updatePolicy": {"updateMode": "Off"}, "recommenders": [{"name": "plimsoll"}]}
    }))?;
    Api::<VerticalPodAutoscaler>::namespaced(client, &ns)
        .create(&PostParams::default(), &vpa)
        .await?;
    Ok(())
}

/// Publishes sample `step` of every pod, stamped now, as metrics-server would after a scrape.
/// Usage varies with the step so that every loop moves many histogram buckets.
#[allow(clippy::cast_precision_loss)] // below 2^20: exact in an f64
fn publish_usage(cluster: &plimsoll_sim::Cluster, vpas: usize, step: usize) {
    let now = cluster.clock.now();
    for i in 0..vpas {
        for p in 0..PODS_PER_VPA {
            let cpu = 50 + (i * 7 + p * 13 + step * 3) % 400;
            let memory = (64 + (i + p + step) % 256) << 20;
            let containers = CONTAINERS
                .iter()
                .map(|c| ContainerUsage {
                    name: (*c).to_owned(),
                    cpu_millis: cpu as f64,
                    memory_bytes: memory as f64,
                })
                .collect();
            let usage = PodUsage {
                containers,
                custom: BTreeMap::new(),
                timestamp: now,
                node: "node-0".to_owned(),
            };
            cluster
                .model
                .set_pod_usage(&namespace(i), &format!("w-{i}-{p}"), usage);
        }
    }
}

/// The service's counters at one scrape, with the process readings.
#[derive(Clone, Copy, Default)]
struct Snapshot {
    loops: f64,
    loop_seconds: f64,
    status_writes: f64,
    checkpoint_writes: f64,
    requests: f64,
    limiter_seconds: f64,
    cpu: f64,
    sim_cpu: f64,
}

async fn snapshot(admin: SocketAddr, child: Proc, sim: &Proc) -> anyhow::Result<Snapshot> {
    let text = scrape::metrics(admin).await?;
    let v = |name: &str| scrape::value(&text, &format!("{PREFIX}{name}"));
    Ok(Snapshot {
        loops: v("loop_duration_seconds_count"),
        loop_seconds: v("loop_duration_seconds_sum"),
        status_writes: v("status_writes_total"),
        checkpoint_writes: v("checkpoint_writes_total"),
        requests: v("kube_client_requests_total"),
        limiter_seconds: v("kube_client_rate_limit_wait_seconds_total"),
        cpu: child.cpu_seconds()?,
        sim_cpu: sim.cpu_seconds()?,
    })
}

/// One loop: the difference between the snapshots at its end and at the previous loop's end
/// (the service's start for the first), and the RSS at its end. A loop still running at the
/// deadline is cut there: its wall time is the time since the previous cut.
struct Loop {
    delta: Snapshot,
    rss_mib: f64,
    finished: bool,
}

/// Scrapes every 250 ms and cuts a [`Loop`] each time the loop count moves, until the first
/// loop and `BENCH_STEADY_LOOPS` more are done or `BENCH_SECONDS` have passed.
async fn measure(admin: SocketAddr, child: Proc, sim: &Proc) -> anyhow::Result<Vec<Loop>> {
    let steady: usize = env_or("BENCH_STEADY_LOOPS", 2);
    let deadline = Instant::now() + Duration::from_secs(env_or("BENCH_SECONDS", 330));
    let mut last = loop {
        if let Ok(s) = snapshot(admin, child, sim).await {
            break s;
        }
        if Instant::now() > deadline {
            bail!("the recommender's admin listener never answered");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Whatever ran before the first scrape (the client's first requests) counts from zero.
    last.requests = 0.0;
    let mut cut = Instant::now();
    let mut loops = Vec::new();
    while loops.len() <= steady {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = snapshot(admin, child, sim).await?;
        let finished = now.loops > last.loops;
        if finished || Instant::now() >= deadline {
            let mut delta = difference(&now, &last);
            if !finished {
                delta.loop_seconds = cut.elapsed().as_secs_f64();
            }
            loops.push(Loop {
                delta,
                rss_mib: child.rss_mib().unwrap_or(f64::NAN),
                finished,
            });
            if !finished {
                break;
            }
            last = now;
            cut = Instant::now();
        }
    }
    Ok(loops)
}

fn difference(a: &Snapshot, b: &Snapshot) -> Snapshot {
    Snapshot {
        loops: a.loops - b.loops,
        loop_seconds: a.loop_seconds - b.loop_seconds,
        status_writes: a.status_writes - b.status_writes,
        checkpoint_writes: a.checkpoint_writes - b.checkpoint_writes,
        requests: a.requests - b.requests,
        limiter_seconds: a.limiter_seconds - b.limiter_seconds,
        cpu: a.cpu - b.cpu,
        sim_cpu: a.sim_cpu - b.sim_cpu,
    }
}

/// Per loop, in order (one per "recommender loop done" line the service logged), the
/// `(written, left)` of its "checkpoint time budget used" line if its budget ran out.
fn budgets_per_loop(log: &Path) -> Vec<Option<(u64, u64)>> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut loops = Vec::new();
    let mut budget = None;
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let message = field(&v, "message").and_then(Value::as_str).unwrap_or("");
        if message.starts_with("checkpoint time budget used") {
            let number = |name| field(&v, name).and_then(Value::as_u64).unwrap_or(0);
            budget = Some((number("written"), number("left")));
        } else if message == "recommender loop done" {
            loops.push(budget.take());
        }
    }
    loops
}

/// A field of a JSON log line, at the top level or under `fields`.
fn field<'v>(line: &'v Value, name: &str) -> Option<&'v Value> {
    line.get(name)
        .or_else(|| line.get("fields").and_then(|f| f.get(name)))
}

/// One row per loop, then what bounds the loops.
fn report(setting: Setting, loops: &[Loop], budgets: &[Option<(u64, u64)>]) {
    println!(
        "{:<8} {:>8} {:>7} {:>11} {:>8} {:>9} {:>9} {:>8} {:>7} {:>8}  bound",
        "loop",
        "wall s",
        "status",
        "checkpoints",
        "writes/s",
        "requests",
        "limiter s",
        "cores",
        "RSS MiB",
        "sim cores"
    );
    for (n, l) in loops.iter().enumerate() {
        let d = &l.delta;
        let writes = d.status_writes + d.checkpoint_writes;
        let wall = d.loop_seconds.max(f64::EPSILON);
        println!(
            "{:<8} {:>8.1} {:>7.0} {:>11.0} {:>8.0} {:>9.0} {:>9.1} {:>8.2} {:>7.0} {:>8.2}  {}",
            match (n, l.finished) {
                (0, true) => "first".to_owned(),
                (0, false) => "first*".to_owned(),
                (n, true) => format!("steady {n}"),
                (n, false) => format!("steady {n}*"),
            },
            d.loop_seconds,
            d.status_writes,
            d.checkpoint_writes,
            writes / wall,
            d.requests,
            d.limiter_seconds,
            d.cpu / wall,
            l.rss_mib,
            d.sim_cpu / wall,
            bound(setting, d, budgets.get(n).copied().flatten()),
        );
    }
    if loops.iter().any(|l| !l.finished) {
        println!("* still running at BENCH_SECONDS: counted up to then");
    }
}

/// What bounds a loop: the limiter when it held the request queue most of the loop; else the
/// checkpoint budget when it ran out; else CPU when the service used most of a core; else the
/// round trips of its one-at-a-time writes.
fn bound(setting: Setting, d: &Snapshot, budget: Option<(u64, u64)>) -> String {
    let wall = d.loop_seconds.max(f64::EPSILON);
    let mut why = Vec::new();
    if setting.qps > 0.0 {
        why.push(format!(
            "limiter held the queue {:.0}% of the loop ({:.0} requests / {} qps = {:.0} s)",
            100.0 * d.limiter_seconds / wall,
            d.requests,
            setting.qps,
            d.requests / setting.qps
        ));
    }
    if let Some((written, left)) = budget {
        why.push(format!(
            "checkpoint budget ran out ({written} written, {left} left)"
        ));
    }
    if d.cpu / wall > 0.8 {
        why.push("CPU".to_owned());
    }
    if why.is_empty() {
        why.push(format!(
            "round trips: {:.2} ms per request, one write at a time",
            1000.0 * wall / d.requests.max(1.0)
        ));
    }
    why.join("; ")
}

/// How many VPAs have a recommendation and how many checkpoints exist at the end.
async fn outcome(client: &kube::Client, vpas: usize) -> anyhow::Result<()> {
    let recommended = Api::<VerticalPodAutoscaler>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|v| {
            v.status
                .as_ref()
                .and_then(|s| s.recommendation.as_ref())
                .is_some()
        })
        .count();
    let checkpoints = Api::<VerticalPodAutoscalerCheckpoint>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .len();
    println!(
        "at the end: {recommended}/{vpas} VPAs have a recommendation, {checkpoints}/{} checkpoints exist",
        vpas * CONTAINERS.len()
    );
    Ok(())
}
