//! bench-hpa-plus: how many autoscalers one hpa-plus keeps evaluated.
//!
//! Creates `BENCH_HPA_PLUS_OBJECTS` (default 10,000) Deployments and HorizontalPodAutoscalerPlus
//! objects (100 per namespace) in an in-process plimsoll-sim (workload model off: the bench
//! measures the autoscaler, not the simulated kubelet), then runs hpa-plus in a child process
//! (this binary re-executed as `bench-hpa-plus serve KUBECONFIG`, a multi-threaded runtime as
//! the real binary uses) with the default 5 s period, so its CPU and RSS are its own. Every object has one External metric served by an in-memory metrics
//! source at its target, so each evaluation reads the scale subresource from the sim, decides,
//! and changes nothing — the steady state of a large cluster.
//!
//! After every object has been evaluated once, it measures for `BENCH_HPA_PLUS_SECONDS`
//! (default 60): reconciles per second, p50/p99 reconcile latency (interpolated in the
//! service's own histogram), CPU of the hpa-plus process, and its RSS at the end and at peak.
//! Bounded: it gives up after 3 minutes overall.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus;
use plimsoll_core::quantity::Quantity;
use plimsoll_e2e::process::Child;
use plimsoll_e2e::scrape::quantile;
use plimsoll_runtime::metrics_api::FixedExternalMetrics;
use plimsoll_sim::{Sim, SimConfig};
use serde_json::json;

const PER_NAMESPACE: usize = 100;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn kubeconfig(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: sim\n  cluster:\n    server: {server}\n\
         users:\n- name: sim\n  user:\n    token: {}\ncontexts:\n- name: sim\n  context:\n    \
         cluster: sim\n    user: sim\n    namespace: default\ncurrent-context: sim\n",
        plimsoll_sim::TOKEN
    )
}

/// (runs, reconcile-duration buckets) from one scrape.
async fn scrape(addr: std::net::SocketAddr) -> anyhow::Result<(f64, Buckets)> {
    let text = plimsoll_e2e::scrape::metrics(addr).await?;
    Ok((
        plimsoll_e2e::scrape::value(&text, "plimsoll_hpa_plus_reconcile_runs_total"),
        plimsoll_e2e::scrape::buckets(&text, "plimsoll_hpa_plus_reconcile_duration_seconds"),
    ))
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("serve") {
        let kubeconfig = args.get(2).context("serve KUBECONFIG")?;
        plimsoll_runtime::client::install_crypto_provider();
        // As the real binary: a multi-threaded runtime with one worker per core.
        let runtime = tokio::runtime::Runtime::new()?;
        return runtime.block_on(serve(kubeconfig.into()));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(bench())
}

/// The child: hpa-plus with every External metric at 10, until stdin closes. Prints its admin
/// address on the first line of stdout.
async fn serve(kubeconfig: std::path::PathBuf) -> anyhow::Result<()> {
    let args = [
        "hpa-plus".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--metrics-address=127.0.0.1:0".to_owned(),
        "--leader-elect=false".to_owned(),
        "--log-filter=warn".to_owned(),
    ];
    let config =
        <plimsoll_hpa_plus::cli::Args as clap::Parser>::try_parse_from(args)?.into_config()?;
    let token = plimsoll_e2e::process::parent_gone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let hooks = plimsoll_hpa_plus::Hooks {
        admin_address: Some(tx),
        metrics_source: Some(Arc::new(FixedExternalMetrics::new(Quantity::from_units(
            10,
        )))),
    };
    let service = tokio::spawn(plimsoll_hpa_plus::run_with(config, token, hooks));
    let admin = rx.await.context("admin address")?;
    println!("{admin}");
    service.await??;
    Ok(())
}

/// Setup, warm-up, one measurement window and the report, in order.
async fn bench() -> anyhow::Result<()> {
    let objects: usize = env_or("BENCH_HPA_PLUS_OBJECTS", 10_000);
    let seconds: u64 = env_or("BENCH_HPA_PLUS_SECONDS", 60);
    let deadline = Instant::now() + Duration::from_secs(180);
    let started = Instant::now();
    let sim = Sim::start(SimConfig {
        workload_model: false,
        ..SimConfig::default()
    })
    .await
    .context("start the sim")?;
    let client = sim.http_kube_client()?;
    plimsoll_e2e::install_crds(&client).await?;
    let namespaces = create_objects(&client, objects).await?;
    let created = started.elapsed();
    eprintln!("created {objects} Deployments and HPA+ in {created:.1?}");

    let dir = std::env::temp_dir().join(format!("bench-hpa-plus-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let kc_path = dir.join("kubeconfig");
    let url = sim.http_url.clone().context("plain HTTP")?;
    std::fs::write(&kc_path, kubeconfig(&url))?;
    let mut child = Child::serve(&[kc_path.as_os_str()], true)?;
    let pid = child.proc;
    let admin: std::net::SocketAddr = tokio::task::block_in_place(|| child.first_line())?
        .parse()
        .context("the child's admin address")?;
    let service_started = Instant::now();
    warm_up(admin, objects, deadline).await?;
    let warm = service_started.elapsed();
    eprintln!("all {objects} evaluated once after {warm:.1?}; measuring for {seconds}s");

    let window = Duration::from_secs(seconds).min(
        deadline
            .saturating_duration_since(Instant::now())
            .saturating_sub(Duration::from_secs(10)),
    );
    let window = measure(admin, pid, window).await?;
    report(
        &Setup {
            objects,
            namespaces,
            created,
            warm,
        },
        &window,
    );

    tokio::task::block_in_place(|| child.stop());
    sim.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Creates `objects` Deployments with one HPA+ each, `PER_NAMESPACE` to a namespace; returns
/// the number of namespaces.
async fn create_objects(client: &kube::Client, objects: usize) -> anyhow::Result<usize> {
    let namespaces = objects.div_ceil(PER_NAMESPACE);
    for n in 0..namespaces {
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": format!("bench-{n}")}}))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await?;
    }
    futures::stream::iter(0..objects)
        .map(|i| create_object(client.clone(), i))
        .buffer_unordered(64)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(namespaces)
}

/// Deployment `w<i>` and its HPA+, on an External metric served at its target.
async fn create_object(client: kube::Client, i: usize) -> anyhow::Result<()> {
    let ns = format!("bench-{}", i / PER_NAMESPACE);
    let name = format!("w{i}");
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "app:1"}]}}}
    }))?;
    Api::<Deployment>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &d)
        .await?;
    let h: HorizontalPodAutoscalerPlus = serde_json::from_value(json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
        "kind": "HorizontalPodAutoscalerPlus",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": 1, "maxReplicas": 10,
            "metrics": [{"type": "External", "external": {"metric": {"name": "queue"},
                "target": {"type": "AverageValue", "averageValue": "10"}}}]
        }
    }))?;
    Api::<HorizontalPodAutoscalerPlus>::namespaced(client, &ns)
        .create(&PostParams::default(), &h)
        .await?;
    Ok(())
}

/// Waits until every object was evaluated at least once.
async fn warm_up(
    admin: std::net::SocketAddr,
    objects: usize,
    deadline: Instant,
) -> anyhow::Result<()> {
    loop {
        let (runs, _) = scrape(admin).await?;
        if runs >= objects as f64 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("only {runs} of {objects} objects evaluated before the deadline");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What the setup took.
struct Setup {
    objects: usize,
    namespaces: usize,
    created: Duration,
    warm: Duration,
}

/// A histogram's cumulative buckets `(upper bound, count)`.
type Buckets = Vec<(f64, f64)>;

/// One measurement window: the service's counters and histogram at both ends, its CPU, RSS.
struct Window {
    runs: (f64, f64),
    hist: (Buckets, Buckets),
    cpu: (f64, f64),
    elapsed: f64,
    rss: f64,
    peak: f64,
    load: f64,
}

async fn measure(
    admin: std::net::SocketAddr,
    pid: plimsoll_e2e::process::Proc,
    window: Duration,
) -> anyhow::Result<Window> {
    let (runs0, hist0) = scrape(admin).await?;
    let cpu0 = pid.cpu_seconds()?;
    let t0 = Instant::now();
    tokio::time::sleep(window).await;
    let (runs1, hist1) = scrape(admin).await?;
    let cpu1 = pid.cpu_seconds()?;
    let elapsed = t0.elapsed().as_secs_f64();
    Ok(Window {
        runs: (runs0, runs1),
        hist: (hist0, hist1),
        cpu: (cpu0, cpu1),
        elapsed,
        rss: pid.rss_mib()?,
        peak: pid.peak_rss_mib()?,
        load: plimsoll_e2e::process::load_average(),
    })
}

fn report(setup: &Setup, w: &Window) {
    let Setup {
        objects,
        namespaces,
        created,
        warm,
    } = setup;
    let elapsed = w.elapsed;
    let rate = (w.runs.1 - w.runs.0) / elapsed;
    let needed = *objects as f64 / 5.0;
    let (hist0, hist1) = (&w.hist.0, &w.hist.1);
    let (cpu0, cpu1) = w.cpu;
    let (rss, peak, load) = (w.rss, w.peak, w.load);
    println!("bench-hpa-plus");
    println!("  objects:                 {objects} ({namespaces} namespaces), period 5 s");
    println!("  create objects:          {created:.1?}");
    println!("  first full pass:         {warm:.1?}");
    println!("  window:                  {elapsed:.1} s");
    println!("  reconciles/s:            {rate:.0} (all every 5 s needs {needed:.0})");
    println!(
        "  reconcile p50 / p99:     {:.1} ms / {:.1} ms",
        quantile(hist0, hist1, 0.50) * 1000.0,
        quantile(hist0, hist1, 0.99) * 1000.0
    );
    println!(
        "  hpa-plus CPU:            {:.2} cores ({:.1} CPU-s over the window)",
        (cpu1 - cpu0) / elapsed,
        cpu1 - cpu0
    );
    println!("  hpa-plus RSS:            {rss:.0} MiB (peak {peak:.0} MiB)");
    println!("  load average (1 min):    {load:.1}");
    println!(
        "  machine:                 {}",
        plimsoll_e2e::process::machine()
    );
}
