//! bench-hpa-plus: how many autoscalers one hpa-plus keeps evaluated.
//!
//! Creates `BENCH_HPA_PLUS_OBJECTS` (default 10,000) Deployments and HorizontalPodAutoscalerPlus
//! objects (100 per namespace) in an in-process plimsoll-sim (workload model off: the bench
//! measures the autoscaler, not the simulated kubelet), then runs hpa-plus in a child process
//! (this binary re-executed as `bench-hpa-plus serve KUBECONFIG PERIOD`, a multi-threaded runtime
//! as the real binary uses) with a `--sync-period` of `BENCH_HPA_PLUS_PERIOD` seconds (default 5),
//! so its CPU and RSS are its own. Every object has one External metric served by an in-memory metrics
//! source at its target, so each evaluation reads the scale subresource from the sim, decides,
//! and changes nothing — the steady state of a large cluster.
//!
//! After every object has been evaluated once, it measures for `BENCH_HPA_PLUS_SECONDS`
//! (default 60): reconciles per second, p50/p99 reconcile latency (interpolated in the
//! service's own histogram), CPU of the hpa-plus process, and its RSS at the end and at peak.
//! Bounded: it gives up after 3 minutes plus one minute per 10,000 objects overall.
//!
//! Sharded mode (issue 20), `BENCH_HPA_PLUS_PROCESSES` ≥ 2: that many hpa-plus processes with
//! `--leader-elect=true --shards=BENCH_HPA_PLUS_SHARDS` (default 4 per process), each with its own
//! identity, and the flags' production defaults for the Leases (15 s duration, 10 s renew
//! deadline, 2 s retry period). Each object's External metric names it
//! (`selector: {matchLabels: {object: w<i>}}`), and each child appends `w<i> <unix ms>` to a
//! file of its own on every query — one line per evaluation, flushed every second. Every 100th
//! object also carries `churn: "yes"` and sees a value alternating within tolerance (10.01,
//! 9.99), so its status changes, and is written, on every evaluation without any scaling: the
//! sim's audit log, where each child writes under `hpa-plus/<version> (<identity>)`, shows who
//! wrote what. Once every object was evaluated and the shard Leases sit balanced and still, it
//! measures for `BENCH_HPA_PLUS_SECONDS` (default 90) and SIGKILLs the last process at one
//! third of the window. It checks, from the evaluation records and the audit log of the window:
//! objects of shards that did not move are evaluated at least every period (plus a margin of
//! max(2 s, period / 5)); the killed process's objects are evaluated by their new holder within
//! one lease duration and one retry period of the kill, plus the same margin; every object is
//! evaluated after the
//! kill; an object's writers follow its shard Lease's holders (a writer changes only when the
//! Lease did, never back to an earlier one), and the killed process writes nothing after the
//! kill. It exits non-zero when a check fails. Setup and warm-up are bounded by 3 minutes plus
//! 5 s per 1,000 objects.
//!
//! `BENCH_HPA_PLUS_PROFILE=COMMAND` (sharded mode) starts the first process under COMMAND, a
//! wrapper that runs its arguments: `scripts/heaptrack-child.sh` profiles its heap, with the
//! binary built with `--features system-allocator` so that heaptrack's malloc hooks see it.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, PostParams};
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus;
use plimsoll_core::quantity::Quantity;
use plimsoll_e2e::external_answers::ExternalAnswers;
use plimsoll_e2e::process::{Child, Proc};
use plimsoll_e2e::scrape::quantile;
use plimsoll_runtime::client::identity_in_user_agent;
use plimsoll_runtime::metrics_api::{FixedExternalMetrics, MetricsSource};
use plimsoll_runtime::selector::{Requirement, Selector};
use plimsoll_sim::{AuditEntry, SimHandle};
use serde_json::json;

// As the hpa-plus binary: the child measures the service as it ships. With the feature
// `system-allocator`, the C library's malloc instead, for a heap profiler that hooks it
// (`BENCH_HPA_PLUS_PROFILE`).
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
        let kubeconfig = args.get(2).context("serve KUBECONFIG PERIOD [FLAGS…]")?;
        let period: u64 = args
            .get(3)
            .context("serve KUBECONFIG PERIOD [FLAGS…]")?
            .parse()
            .context("PERIOD in seconds")?;
        let flags = args.get(4..).unwrap_or_default().to_vec();
        plimsoll_runtime::client::install_crypto_provider();
        // As the real binary: a multi-threaded runtime with one worker per core.
        let runtime = tokio::runtime::Runtime::new()?;
        return runtime.block_on(serve(kubeconfig.into(), period, flags));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let processes: usize = env_or("BENCH_HPA_PLUS_PROCESSES", 1);
    match processes {
        0 => bail!("BENCH_HPA_PLUS_PROCESSES must be at least 1"),
        1 => runtime.block_on(bench()),
        _ => runtime.block_on(sharded(Plan::from_env(processes)?)),
    }
}

/// What `serve` takes for itself from the flags after PERIOD; the rest go to hpa-plus.
#[derive(Default)]
struct ServeFlags {
    /// `--record=FILE`: serve the sharded mode's [`Recorder`], appending to FILE.
    record: Option<PathBuf>,
    /// `--identity=ID`: the election identity (and User-Agent).
    identity: Option<String>,
    /// hpa-plus flags.
    hpa_plus: Vec<String>,
}

impl ServeFlags {
    fn parse(flags: Vec<String>) -> Self {
        let mut out = Self::default();
        for flag in flags {
            if let Some(file) = flag.strip_prefix("--record=") {
                out.record = Some(file.into());
            } else if let Some(identity) = flag.strip_prefix("--identity=") {
                out.identity = Some(identity.to_owned());
            } else {
                out.hpa_plus.push(flag);
            }
        }
        out
    }
}

/// The child: hpa-plus with every External metric at 10 (or, with `--record`, the
/// [`Recorder`]) and a default period of `period` seconds, until stdin closes. Prints its admin
/// address on the first line of stdout.
async fn serve(
    kubeconfig: std::path::PathBuf,
    period: u64,
    flags: Vec<String>,
) -> anyhow::Result<()> {
    let flags = ServeFlags::parse(flags);
    let mut args = vec![
        "hpa-plus".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--sync-period={period}s"),
        "--metrics-address=127.0.0.1:0".to_owned(),
    ];
    if !flags
        .hpa_plus
        .iter()
        .any(|f| f.starts_with("--leader-elect"))
    {
        args.push("--leader-elect=false".to_owned());
    }
    args.push("--log-filter=warn".to_owned());
    args.extend(flags.hpa_plus);
    let mut config =
        <plimsoll_hpa_plus::cli::Args as clap::Parser>::try_parse_from(args)?.into_config()?;
    config.identity = flags.identity;
    let recorder = flags
        .record
        .as_deref()
        .map(Recorder::create)
        .transpose()?
        .map(Arc::new);
    let metrics_source: Arc<dyn MetricsSource> = match &recorder {
        Some(recorder) => {
            tokio::spawn(flush_every_second(recorder.clone()));
            let recorder = recorder.clone();
            Arc::new(ExternalAnswers::new(move |_, selector| {
                recorder.answer(selector)
            }))
        }
        None => Arc::new(FixedExternalMetrics::new(Quantity::from_units(10))),
    };
    let token = plimsoll_e2e::process::parent_gone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let hooks = plimsoll_hpa_plus::Hooks {
        admin_address: Some(tx),
        metrics_source: Some(metrics_source),
    };
    let service = tokio::spawn(plimsoll_hpa_plus::run_with(config, token, hooks));
    let admin = rx.await.context("admin address")?;
    println!("{admin}");
    service.await??;
    if let Some(recorder) = recorder {
        recorder.flush()?;
    }
    Ok(())
}

/// Which objects see a changing metric value in the sharded mode: every 100th, so that its
/// status is written on every evaluation and the audit log shows who wrote it.
const CHURN_EVERY: usize = 100;

/// The sharded mode's External metrics ([`ExternalAnswers`]). A query is one evaluation of the
/// object its selector names (`object=w<i>`): it is appended to a file as `w<i> <unix ms>`. The
/// value is 10 (the target), or for objects labelled `churn` 10.01 and 9.99 in turn (inside the
/// tolerance: the status changes, the replicas do not).
struct Recorder {
    out: Mutex<std::io::BufWriter<std::fs::File>>,
    /// Queries so far of each churning object.
    queries: Mutex<BTreeMap<String, u64>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Recorder {
    fn create(path: &Path) -> anyhow::Result<Self> {
        let file =
            std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
        Ok(Self {
            out: Mutex::new(std::io::BufWriter::new(file)),
            queries: Mutex::new(BTreeMap::new()),
        })
    }

    fn record(&self, object: &str) {
        if let Err(e) = writeln!(lock(&self.out), "{object} {}", unix_ms()) {
            eprintln!("bench-hpa-plus serve: cannot record an evaluation: {e}");
        }
    }

    /// The value for a query with `selector`, recorded when it names an object.
    fn answer(&self, selector: Option<&Selector>) -> Quantity {
        let object = selector.and_then(|s| label(s, "object"));
        let churn = selector.is_some_and(|s| label(s, "churn").is_some());
        match object {
            Some(object) => {
                self.record(object);
                self.value(object, churn)
            }
            None => Quantity::from_units(10),
        }
    }

    fn value(&self, object: &str, churn: bool) -> Quantity {
        if !churn {
            return Quantity::from_units(10);
        }
        let mut queries = lock(&self.queries);
        let n = queries.entry(object.to_owned()).or_default();
        *n += 1;
        Quantity::from_milli(if n.is_multiple_of(2) { 10_010 } else { 9_990 })
    }

    fn flush(&self) -> std::io::Result<()> {
        lock(&self.out).flush()
    }
}

/// Flushes the evaluation records every second, so that a killed child loses at most the last
/// second of them.
async fn flush_every_second(recorder: Arc<Recorder>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        if let Err(e) = recorder.flush() {
            eprintln!("bench-hpa-plus serve: cannot flush the evaluation records: {e}");
        }
    }
}

/// The value of label `key` that `selector` requires (`key=value`).
fn label<'s>(selector: &'s Selector, key: &str) -> Option<&'s str> {
    selector.requirements().iter().find_map(|r| match r {
        Requirement::In(k, values) if k == key => values.iter().next().map(String::as_str),
        _ => None,
    })
}

/// Wall-clock milliseconds since the Unix epoch: the parent and its children share this clock.
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Setup, warm-up, one measurement window and the report, in order.
async fn bench() -> anyhow::Result<()> {
    let objects: usize = env_or("BENCH_HPA_PLUS_OBJECTS", 10_000);
    let seconds: u64 = env_or("BENCH_HPA_PLUS_SECONDS", 60);
    let period: u64 = env_or("BENCH_HPA_PLUS_PERIOD", 5);
    if period == 0 {
        bail!("BENCH_HPA_PLUS_PERIOD must be a positive number of seconds");
    }
    let deadline = Instant::now() + Duration::from_secs(180 + 6 * objects as u64 / 1_000);
    let started = Instant::now();
    let (sim, client) = plimsoll_e2e::bench_sim().await?;
    let (namespaces, _) = create_objects(&client, objects, false).await?;
    let created = started.elapsed();
    eprintln!("created {objects} Deployments and HPA+ in {created:.1?}");

    let dir = std::env::temp_dir().join(format!("bench-hpa-plus-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let kc_path = dir.join("kubeconfig");
    let url = sim.http_url.clone().context("plain HTTP")?;
    std::fs::write(&kc_path, kubeconfig(&url))?;
    let period_arg = OsString::from(period.to_string());
    let mut child = Child::serve(&[kc_path.as_os_str(), &period_arg], true)?;
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
            period,
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
/// the number of namespaces and each HPA+'s uid (by object index). With `labelled`, each
/// External metric's selector names its object (the sharded mode's [`Recorder`]).
async fn create_objects(
    client: &kube::Client,
    objects: usize,
    labelled: bool,
) -> anyhow::Result<(usize, Vec<String>)> {
    let namespaces = objects.div_ceil(PER_NAMESPACE);
    for n in 0..namespaces {
        create_namespace(client, &format!("bench-{n}")).await?;
    }
    let mut uids = vec![String::new(); objects];
    let mut created = futures::stream::iter(0..objects)
        .map(|i| {
            let client = client.clone();
            async move { Ok::<_, anyhow::Error>((i, create_object(client, i, labelled).await?)) }
        })
        .buffer_unordered(64);
    while let Some(next) = created.next().await {
        let (i, uid) = next?;
        uids[i] = uid;
    }
    Ok((namespaces, uids))
}

async fn create_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    Ok(())
}

/// The External metric of object `i`: `queue`, with a selector naming the object (and, every
/// `CHURN_EVERY`th, asking for a changing value) when `labelled`.
fn external_metric(i: usize, labelled: bool) -> serde_json::Value {
    if !labelled {
        return json!({"name": "queue"});
    }
    let mut labels = serde_json::Map::new();
    labels.insert("object".into(), json!(format!("w{i}")));
    if i.is_multiple_of(CHURN_EVERY) {
        labels.insert("churn".into(), json!("yes"));
    }
    json!({"name": "queue", "selector": {"matchLabels": labels}})
}

/// Deployment `w<i>` and its HPA+, on an External metric served at its target; returns the
/// HPA+'s uid.
async fn create_object(client: kube::Client, i: usize, labelled: bool) -> anyhow::Result<String> {
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
            "metrics": [{"type": "External", "external": {"metric": external_metric(i, labelled),
                "target": {"type": "AverageValue", "averageValue": "10"}}}]
        }
    }))?;
    let created = Api::<HorizontalPodAutoscalerPlus>::namespaced(client, &ns)
        .create(&PostParams::default(), &h)
        .await?;
    created
        .metadata
        .uid
        .with_context(|| format!("the created HPA+ {ns}/{name} has no uid"))
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
    period: u64,
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
        period,
        created,
        warm,
    } = setup;
    let elapsed = w.elapsed;
    let rate = (w.runs.1 - w.runs.0) / elapsed;
    let needed = *objects as f64 / *period as f64;
    let (hist0, hist1) = (&w.hist.0, &w.hist.1);
    let (cpu0, cpu1) = w.cpu;
    let (rss, peak, load) = (w.rss, w.peak, w.load);
    println!("bench-hpa-plus");
    println!("  objects:                 {objects} ({namespaces} namespaces), period {period} s");
    println!("  create objects:          {created:.1?}");
    println!("  first full pass:         {warm:.1?}");
    println!("  window:                  {elapsed:.1} s");
    println!("  reconciles/s:            {rate:.0} (all every {period} s needs {needed:.0})");
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

// ---- Sharded mode -------------------------------------------------------------------------

/// `--lease-duration` of the sharded mode, seconds (the flag's default, as in production).
const LEASE_DURATION: u64 = 15;
/// `--renew-deadline`, seconds.
const RENEW_DEADLINE: u64 = 10;
/// `--retry-period`, seconds.
const RETRY_PERIOD: u64 = 2;
/// Where the shard Leases live.
const LEASE_NAMESPACE: &str = "bench-hpa-plus-leases";
/// The shard Leases' names: this and the shard's number.
const SHARD_LEASE_PREFIX: &str = "plimsoll-hpa-plus-shard-";

/// The sharded run asked for by the environment.
struct Plan {
    objects: usize,
    processes: usize,
    shards: u32,
    period: u64,
    seconds: u64,
}

impl Plan {
    fn from_env(processes: usize) -> anyhow::Result<Self> {
        let plan = Self {
            objects: env_or("BENCH_HPA_PLUS_OBJECTS", 10_000),
            processes,
            shards: env_or(
                "BENCH_HPA_PLUS_SHARDS",
                u32::try_from(4 * processes).unwrap_or(u32::MAX),
            ),
            period: env_or("BENCH_HPA_PLUS_PERIOD", 5),
            seconds: env_or("BENCH_HPA_PLUS_SECONDS", 90),
        };
        if plan.period == 0 {
            bail!("BENCH_HPA_PLUS_PERIOD must be a positive number of seconds");
        }
        if (plan.shards as usize) < processes {
            bail!("BENCH_HPA_PLUS_SHARDS must be at least BENCH_HPA_PLUS_PROCESSES");
        }
        // After the kill: the Lease expires, a survivor takes it within a retry period and
        // evaluates the shard's objects within a period; then some margin to see it.
        let needed = 3 * (LEASE_DURATION + RETRY_PERIOD + plan.period + 5) / 2;
        if plan.seconds < needed {
            eprintln!(
                "warning: a {} s window leaves too little time after the kill; {needed} s would do",
                plan.seconds
            );
        }
        Ok(plan)
    }

    /// Seconds the shard Leases must stay balanced and unchanged before the window: a period
    /// (every object of a shard that moved during the start-up has been evaluated by its new
    /// holder, so no gap of the start-up reaches into the window) and three retry periods.
    fn still_for(&self) -> u64 {
        self.period + 3 * RETRY_PERIOD
    }

    /// Allowed lateness of an object whose shard did not move, beyond its period.
    fn margin_ms(&self) -> u64 {
        (self.period * 1000 / 5).max(2_000)
    }

    /// Allowed time from the kill to a moved object's first evaluation by its new holder: a
    /// survivor sees the last renew within a retry period and takes the Lease one lease
    /// duration later; then the same lateness as a kept shard's object, for evaluating the
    /// shard's objects.
    fn takeover_bound_ms(&self) -> u64 {
        (LEASE_DURATION + RETRY_PERIOD) * 1000 + self.margin_ms()
    }
}

/// One hpa-plus process of the sharded run.
struct Member {
    identity: String,
    /// `None` once killed or stopped.
    child: Option<Child>,
    proc: Proc,
    admin: std::net::SocketAddr,
    /// Its evaluation records.
    records: PathBuf,
}

/// Each shard's holder (`None`: not held), by shard number.
type Holders = Vec<Option<String>>;

/// How long the setup phases took.
struct Phases {
    created: Duration,
    warm: Duration,
    namespaces: usize,
}

/// Sharded mode: setup, warm-up, the window with its kill, the checks and the report.
async fn sharded(plan: Plan) -> anyhow::Result<()> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(180 + 5 * plan.objects as u64 / 1_000);
    let (sim, client) = plimsoll_e2e::bench_sim().await?;
    create_namespace(&client, LEASE_NAMESPACE).await?;
    let (namespaces, uids) = create_objects(&client, plan.objects, true).await?;
    let created = started.elapsed();
    eprintln!(
        "created {} Deployments and HPA+ in {created:.1?}",
        plan.objects
    );

    let dir = std::env::temp_dir().join(format!("bench-hpa-plus-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let kc_path = dir.join("kubeconfig");
    std::fs::write(
        &kc_path,
        kubeconfig(&sim.http_url.clone().context("plain HTTP")?),
    )?;
    let mut members = start_members(&plan, &dir, &kc_path)?;
    let service_started = Instant::now();
    let holders = warm_up_sharded(&members, &client, &plan, deadline).await?;
    let warm = service_started.elapsed();
    eprintln!(
        "all {} evaluated, shards balanced and still after {warm:.1?}; measuring for {} s",
        plan.objects, plan.seconds
    );
    let window = Duration::from_secs(plan.seconds);
    let timeline = run_window(&mut members, &sim, &client, &plan, window, holders).await?;
    for member in &mut members {
        if let Some(child) = member.child.take() {
            tokio::task::block_in_place(|| child.stop());
        }
    }
    sim.shutdown().await;
    let analysed = Instant::now();
    let evaluations = read_records(&members, plan.objects)?;
    let outcome = analyse(&plan, &members, &uids, &timeline, &evaluations);
    let phases = Phases {
        created,
        warm,
        namespaces,
    };
    report_sharded(&plan, &phases, &members, &timeline, &outcome);
    eprintln!(
        "analysed in {:.1?}; {:.1?} in all",
        analysed.elapsed(),
        started.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
    let failed = outcome
        .checks(&plan)
        .iter()
        .filter(|(_, passed)| !passed)
        .count();
    if failed > 0 {
        bail!("{failed} check(s) failed");
    }
    Ok(())
}

/// Starts the hpa-plus processes `hpa-plus-0` … with sharding and the production Lease timings.
fn start_members(plan: &Plan, dir: &Path, kubeconfig: &Path) -> anyhow::Result<Vec<Member>> {
    let mut members = Vec::new();
    for k in 0..plan.processes {
        let identity = format!("hpa-plus-{k}");
        let records = dir.join(format!("{identity}.evaluations"));
        let args: Vec<OsString> = vec![
            kubeconfig.into(),
            plan.period.to_string().into(),
            format!("--record={}", records.display()).into(),
            format!("--identity={identity}").into(),
            "--leader-elect=true".into(),
            format!("--shards={}", plan.shards).into(),
            format!("--lease-namespace={LEASE_NAMESPACE}").into(),
            format!("--lease-duration={LEASE_DURATION}s").into(),
            format!("--renew-deadline={RENEW_DEADLINE}s").into(),
            format!("--retry-period={RETRY_PERIOD}s").into(),
        ];
        let args: Vec<&OsStr> = args.iter().map(OsString::as_os_str).collect();
        // The first process under a profiler, when asked: `BENCH_HPA_PLUS_PROFILE` is a
        // command that runs its arguments, such as `scripts/heaptrack-child.sh` (with the
        // `system-allocator` feature, so that the profiler sees the heap).
        let wrapper = std::env::var_os("BENCH_HPA_PLUS_PROFILE").filter(|_| k == 0);
        let wrapper: Vec<OsString> = wrapper
            .iter()
            .flat_map(|w| {
                w.to_string_lossy()
                    .split_whitespace()
                    .map(OsString::from)
                    .collect::<Vec<_>>()
            })
            .collect();
        let wrapper: Vec<&OsStr> = wrapper.iter().map(OsString::as_os_str).collect();
        let mut child = Child::serve_wrapped(&wrapper, &args, true)?;
        let proc = child.proc;
        let admin = tokio::task::block_in_place(|| child.first_line())?
            .parse()
            .with_context(|| format!("{identity}'s admin address"))?;
        members.push(Member {
            identity,
            child: Some(child),
            proc,
            admin,
            records,
        });
    }
    Ok(members)
}

/// The shard Leases' holders.
async fn shard_holders(client: &kube::Client, shards: u32) -> anyhow::Result<Holders> {
    let leases = Api::<Lease>::namespaced(client.clone(), LEASE_NAMESPACE)
        .list(&ListParams::default())
        .await?;
    let mut holders = vec![None; shards as usize];
    for lease in leases.items {
        let Some(i) = lease
            .metadata
            .name
            .as_deref()
            .and_then(|n| n.strip_prefix(SHARD_LEASE_PREFIX))
            .and_then(|i| i.parse::<usize>().ok())
        else {
            continue;
        };
        if let Some(slot) = holders.get_mut(i) {
            *slot = lease
                .spec
                .and_then(|s| s.holder_identity)
                .filter(|h| !h.is_empty());
        }
    }
    Ok(holders)
}

/// Shards per holder.
fn per_holder(holders: &Holders) -> BTreeMap<&str, usize> {
    let mut per = BTreeMap::new();
    for holder in holders.iter().flatten() {
        *per.entry(holder.as_str()).or_default() += 1;
    }
    per
}

/// Every shard held, by every process, each holding its share (⌊N/P⌋ to ⌈N/P⌉).
fn balanced(holders: &Holders, processes: usize) -> bool {
    let n = holders.len();
    let per = per_holder(holders);
    holders.iter().all(Option::is_some)
        && per.len() == processes
        && per
            .values()
            .all(|c| (n / processes..=n.div_ceil(processes)).contains(c))
}

/// Waits until the processes together evaluated every object once and the shard Leases sit
/// balanced and unchanged for [`Plan::still_for`]; returns their holders.
async fn warm_up_sharded(
    members: &[Member],
    client: &kube::Client,
    plan: &Plan,
    deadline: Instant,
) -> anyhow::Result<Holders> {
    let still_for = Duration::from_secs(plan.still_for());
    let mut still: Option<(Holders, Instant)> = None;
    loop {
        let mut runs = 0.0;
        for member in members {
            runs += scrape(member.admin).await?.0;
        }
        let holders = shard_holders(client, plan.shards).await?;
        if runs < plan.objects as f64 || !balanced(&holders, plan.processes) {
            still = None;
        } else if let Some((seen, since)) = &still
            && *seen == holders
        {
            if since.elapsed() >= still_for {
                return Ok(holders);
            }
        } else {
            still = Some((holders.clone(), Instant::now()));
        }
        if Instant::now() > deadline {
            bail!(
                "not settled before the deadline: {runs} evaluations of {} objects, shards held {:?}",
                plan.objects,
                per_holder(&holders)
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// What one process did over the window (the killed one: until its kill).
struct Usage {
    runs: f64,
    cpu: f64,
    seconds: f64,
    rss: f64,
    peak: f64,
}

/// A process's counters at one instant.
struct Mark {
    runs: f64,
    cpu: f64,
    at: Instant,
}

async fn mark(member: &Member) -> anyhow::Result<Mark> {
    Ok(Mark {
        runs: scrape(member.admin).await?.0,
        cpu: member.proc.cpu_seconds()?,
        at: Instant::now(),
    })
}

async fn usage_since(member: &Member, from: &Mark) -> anyhow::Result<Usage> {
    let to = mark(member).await?;
    Ok(Usage {
        runs: to.runs - from.runs,
        cpu: to.cpu - from.cpu,
        seconds: (to.at - from.at).as_secs_f64(),
        rss: member.proc.rss_mib()?,
        peak: member.proc.peak_rss_mib()?,
    })
}

/// The measurement window and what was seen in it. Instants are Unix milliseconds.
struct Timeline {
    start_ms: u64,
    /// Just before the SIGKILL.
    kill_ms: u64,
    end_ms: u64,
    /// Seconds from the start to the kill, and to the end.
    kill_at: f64,
    elapsed: f64,
    /// The killed process's index.
    victim: usize,
    /// By process.
    usage: Vec<Usage>,
    /// The shard holders at the start and at every change seen (the Leases are read every
    /// second).
    holders: Vec<(u64, Holders)>,
    /// The audit log's entries of the window.
    audit: Vec<AuditEntry>,
    load: f64,
    /// This process (the sim, the bench's Lease reads): CPU cores over the window, RSS MiB now.
    sim_cores: f64,
    sim_rss: f64,
}

/// Measures for `window`, SIGKILLs the last process at one third of it, and reads the shard
/// Leases every second throughout.
async fn run_window(
    members: &mut [Member],
    sim: &SimHandle,
    client: &kube::Client,
    plan: &Plan,
    window: Duration,
    holders: Holders,
) -> anyhow::Result<Timeline> {
    let victim = members.len() - 1;
    // Only a position: a copy of the whole log (every create of the setup) would hold up every
    // write to the sim, and with them the services, at the start of the window.
    let audit_start = sim.audit_len();
    let start_ms = unix_ms();
    let t0 = Instant::now();
    let sim_cpu = Proc::This.cpu_seconds()?;
    let mut marks = Vec::new();
    for member in members.iter() {
        marks.push(mark(member).await?);
    }
    let mut usage: Vec<Option<Usage>> = members.iter().map(|_| None).collect();
    let mut seen = vec![(start_ms, holders)];
    let mut kill = None;
    while t0.elapsed() < window {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if kill.is_none() && t0.elapsed() >= window / 3 {
            usage[victim] = Some(usage_since(&members[victim], &marks[victim]).await?);
            kill = Some(kill_member(&mut members[victim], t0)?);
        }
        match shard_holders(client, plan.shards).await {
            Ok(now) if seen.last().is_none_or(|(_, last)| *last != now) => {
                seen.push((unix_ms(), now));
            }
            Ok(_) => {}
            Err(e) => eprintln!("cannot read the shard Leases: {e:#}"),
        }
    }
    for (k, member) in members.iter().enumerate() {
        if usage[k].is_none() {
            usage[k] = Some(usage_since(member, &marks[k]).await?);
        }
    }
    let end_ms = unix_ms();
    let elapsed = t0.elapsed().as_secs_f64();
    let sim_cores = (Proc::This.cpu_seconds()? - sim_cpu) / elapsed;
    let audit: Vec<AuditEntry> = sim.audit_since(audit_start);
    let (kill_ms, kill_at) = kill.context("the window ended before the kill")?;
    Ok(Timeline {
        start_ms,
        kill_ms,
        end_ms,
        kill_at,
        elapsed,
        victim,
        usage: usage.into_iter().flatten().collect(),
        holders: seen,
        audit,
        load: plimsoll_e2e::process::load_average(),
        sim_cores,
        sim_rss: Proc::This.rss_mib()?,
    })
}

/// SIGKILLs `member` (no Lease released, nothing flushed) and waits until it is gone; returns
/// the Unix ms just before the signal and the seconds since `t0`.
fn kill_member(member: &mut Member, t0: Instant) -> anyhow::Result<(u64, f64)> {
    let child = member.child.take().context("the process to kill runs")?;
    let kill_ms = unix_ms();
    let at = t0.elapsed().as_secs_f64();
    tokio::task::block_in_place(|| child.kill())?;
    eprintln!("killed {} (SIGKILL) at {at:.1} s", member.identity);
    Ok((kill_ms, at))
}

/// Each object's evaluations as `(Unix ms, process index)`, in time order, read from the
/// processes' record files. A last line cut short by the kill is skipped.
fn read_records(members: &[Member], objects: usize) -> anyhow::Result<Vec<Vec<(u64, usize)>>> {
    let mut evaluations = vec![Vec::new(); objects];
    for (k, member) in members.iter().enumerate() {
        let text = std::fs::read_to_string(&member.records)
            .with_context(|| format!("read {}", member.records.display()))?;
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        for line in complete.lines() {
            let Some((object, ms)) = line.split_once(' ') else {
                continue;
            };
            let index = object
                .strip_prefix('w')
                .and_then(|i| i.parse::<usize>().ok());
            if let (Some(list), Ok(ms)) = (index.and_then(|i| evaluations.get_mut(i)), ms.parse()) {
                list.push((ms, k));
            }
        }
    }
    for list in &mut evaluations {
        list.sort_unstable();
    }
    Ok(evaluations)
}

/// The longest time an object went without an evaluation during `[start, end]`: between two
/// consecutive evaluations (the first may precede the window), or from its last one to `end`;
/// and when that gap ended (Unix ms).
fn largest_gap(evaluations: &[(u64, usize)], start: u64, end: u64) -> (u64, u64) {
    let mut previous: Option<u64> = None;
    let mut largest = (0, start);
    for &(ms, _) in evaluations.iter().take_while(|(ms, _)| *ms <= end) {
        if let Some(p) = previous
            && ms >= start
            && ms - p > largest.0
        {
            largest = (ms - p, ms);
        }
        previous = Some(ms);
    }
    let to_end = end.saturating_sub(previous.unwrap_or(start));
    if to_end > largest.0 {
        largest = (to_end, end);
    }
    largest
}

/// What happened to a shard's Lease over the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// Held by one process throughout.
    Kept,
    /// Held by the killed process (and then, normally, taken over).
    Killed,
    /// Handed from one survivor to another.
    Moved,
}

/// A shard's holders over the window, in turn.
struct ShardHistory {
    fate: Fate,
    holders: Vec<String>,
    /// For a shard of the killed process: ms from the kill until the Lease named its new holder.
    taken_after: Option<u64>,
}

fn shard_histories(t: &Timeline, victim: &str, shards: usize) -> Vec<ShardHistory> {
    (0..shards)
        .map(|i| {
            let mut holders: Vec<String> = Vec::new();
            let mut taken_after = None;
            for (ms, snapshot) in &t.holders {
                let Some(holder) = snapshot.get(i).cloned().flatten() else {
                    continue;
                };
                if holders.last() == Some(&holder) {
                    continue;
                }
                if holders.last().is_some_and(|h| h == victim) && taken_after.is_none() {
                    taken_after = Some(ms.saturating_sub(t.kill_ms));
                }
                holders.push(holder);
            }
            // A shard of the killed process is one even if nobody took it over.
            let fate = match holders.first() {
                Some(first) if first == victim => Fate::Killed,
                _ if holders.len() <= 1 => Fate::Kept,
                _ => Fate::Moved,
            };
            ShardHistory {
                fate,
                holders,
                taken_after,
            }
        })
        .collect()
}

/// The largest evaluation gap over a group of objects.
#[derive(Default)]
struct Gaps {
    objects: usize,
    largest_ms: u64,
    /// The object with the largest gap, and when (Unix ms) that gap ended.
    worst: usize,
    worst_end_ms: u64,
    /// Objects whose largest gap was over `allowed_ms`.
    over: usize,
    allowed_ms: u64,
}

impl Gaps {
    fn allowing(allowed_ms: u64) -> Self {
        Self {
            allowed_ms,
            ..Self::default()
        }
    }

    fn add(&mut self, object: usize, (gap_ms, end_ms): (u64, u64)) {
        self.objects += 1;
        if gap_ms > self.allowed_ms {
            self.over += 1;
        }
        if gap_ms >= self.largest_ms {
            self.largest_ms = gap_ms;
            self.worst = object;
            self.worst_end_ms = end_ms;
        }
    }
}

/// Writes of the window (HPA+ status and the targets' scale), by writer.
#[derive(Default)]
struct WriteAudit {
    writes: usize,
    objects: usize,
    /// Writes whose User-Agent names no identity.
    anonymous: usize,
    /// Changes of writer, by the fate of the object's shard (`Fate as usize`).
    changes: [usize; 3],
    /// Objects with more than one change of writer.
    changed_twice: usize,
    /// Objects whose writers do not follow their shard Lease's holders: a new writer without a
    /// Lease change, or back to an earlier one.
    unfollowed: usize,
    example: Option<String>,
    /// Writes by the killed process that the sim applied after the SIGKILL (requests it had
    /// sent before), and the latest of them, ms after the SIGKILL.
    by_killed_after: usize,
    by_killed_latest_ms: u64,
    /// Of those, writes applied once the object's shard Lease named its new holder: the
    /// double writes a takeover must exclude.
    by_killed_after_takeover: usize,
}

/// Counts a write by the killed process if the sim applied it after the kill (its audit time is
/// the wall clock at a time scale of 1).
fn killed_write(
    out: &mut WriteAudit,
    t: &Timeline,
    entry: &AuditEntry,
    shard: Option<&ShardHistory>,
) {
    let Ok(at) = entry.time.parse::<jiff::Timestamp>() else {
        return;
    };
    let Some(after) = u64::try_from(at.as_millisecond())
        .ok()
        .and_then(|ms| ms.checked_sub(t.kill_ms))
        .filter(|after| *after > 0)
    else {
        return;
    };
    out.by_killed_after += 1;
    out.by_killed_latest_ms = out.by_killed_latest_ms.max(after);
    if shard
        .and_then(|s| s.taken_after)
        .is_some_and(|taken| after >= taken)
    {
        out.by_killed_after_takeover += 1;
    }
}

/// Whether `writers` are holders of the shard in the holders' order.
fn follows(writers: &[&str], holders: &[String]) -> bool {
    let mut rest = holders.iter();
    writers.iter().all(|w| rest.any(|h| h == w))
}

fn audit_writes(
    t: &Timeline,
    victim: &str,
    shard_of: &[usize],
    histories: &[ShardHistory],
) -> WriteAudit {
    let mut out = WriteAudit::default();
    let mut writers: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for entry in &t.audit {
        let object_write = matches!(
            (entry.resource.as_str(), entry.subresource.as_str()),
            (
                "horizontalpodautoscalerplus" | "horizontalpodautoscalerpluses",
                "status"
            ) | ("deployments", "scale")
        );
        let Some(i) = entry
            .name
            .strip_prefix('w')
            .and_then(|i| i.parse::<usize>().ok())
            .filter(|_| object_write)
        else {
            continue;
        };
        out.writes += 1;
        let Some(who) = identity_in_user_agent(&entry.user_agent, "hpa-plus") else {
            out.anonymous += 1;
            continue;
        };
        if who == victim {
            killed_write(
                &mut out,
                t,
                entry,
                shard_of.get(i).and_then(|s| histories.get(*s)),
            );
        }
        let list = writers.entry(i).or_default();
        if list.last() != Some(&who) {
            list.push(who);
        }
    }
    out.objects = writers.len();
    for (i, sequence) in &writers {
        let Some(history) = shard_of.get(*i).and_then(|s| histories.get(*s)) else {
            continue;
        };
        out.changes[history.fate as usize] += sequence.len() - 1;
        out.changed_twice += usize::from(sequence.len() > 2);
        if !follows(sequence, &history.holders) {
            out.unfollowed += 1;
            out.example.get_or_insert_with(|| {
                format!(
                    "w{i} written by {sequence:?}, its shard held by {:?}",
                    history.holders
                )
            });
        }
    }
    out
}

/// The sharded run's findings.
struct Outcome {
    histories: Vec<ShardHistory>,
    /// Largest gaps by the fate of the object's shard.
    kill_ms: u64,
    kept: Gaps,
    killed: Gaps,
    moved: Gaps,
    /// Ms from the kill to each of the killed process's objects' first evaluation by another
    /// process, ascending.
    takeover: Vec<u64>,
    /// The longest wait, over those objects, from their shard's handover to their evaluation.
    after_handover: u64,
    /// Objects with no evaluation between the kill and the end of the window.
    not_after_kill: usize,
    writes: WriteAudit,
}

impl Outcome {
    /// Each check and whether it passed.
    fn checks(&self, plan: &Plan) -> Vec<(&'static str, bool)> {
        let w = &self.writes;
        vec![
            (
                "objects of kept shards evaluated every period (+ margin)",
                self.kept.largest_ms <= plan.period * 1000 + plan.margin_ms(),
            ),
            (
                "the killed process's objects taken over within lease + retry (+ margin)",
                self.killed.objects > 0
                    && self.takeover.len() == self.killed.objects
                    && self
                        .takeover
                        .last()
                        .is_some_and(|ms| *ms <= plan.takeover_bound_ms()),
            ),
            (
                "every object evaluated after the kill",
                self.not_after_kill == 0,
            ),
            (
                "writes audited, each naming its process",
                w.writes > 0 && w.anonymous == 0,
            ),
            (
                "writers follow the shard Leases (no double writes)",
                w.unfollowed == 0,
            ),
            (
                "no write by the killed process once its shard changed hands",
                w.by_killed_after_takeover == 0,
            ),
        ]
    }
}

fn analyse(
    plan: &Plan,
    members: &[Member],
    uids: &[String],
    t: &Timeline,
    evaluations: &[Vec<(u64, usize)>],
) -> Outcome {
    let victim = members.get(t.victim).map_or("", |m| m.identity.as_str());
    let histories = shard_histories(t, victim, plan.shards as usize);
    let shard_of: Vec<usize> = uids
        .iter()
        .map(|uid| plimsoll_runtime::leader::shards::shard_of(uid, plan.shards) as usize)
        .collect();
    let allowed = plan.period * 1000 + plan.margin_ms();
    let mut gaps: [Gaps; 3] = [
        Gaps::allowing(allowed),
        Gaps::allowing(allowed),
        Gaps::allowing(allowed),
    ];
    let mut takeover = Vec::new();
    let mut not_after_kill = 0;
    let mut after_handover = 0;
    for (i, (list, shard)) in evaluations.iter().zip(&shard_of).enumerate() {
        let fate = histories.get(*shard).map_or(Fate::Kept, |h| h.fate);
        gaps[fate as usize].add(i, largest_gap(list, t.start_ms, t.end_ms));
        let mut after = list
            .iter()
            .filter(|(ms, _)| *ms > t.kill_ms && *ms <= t.end_ms)
            .peekable();
        if after.peek().is_none() {
            not_after_kill += 1;
        }
        if fate == Fate::Killed
            && let Some((ms, _)) = after.find(|(_, k)| *k != t.victim)
        {
            let since_kill = ms - t.kill_ms;
            takeover.push(since_kill);
            let handover = histories.get(*shard).and_then(|h| h.taken_after);
            after_handover = after_handover.max(since_kill.saturating_sub(handover.unwrap_or(0)));
        }
    }
    takeover.sort_unstable();
    let writes = audit_writes(t, victim, &shard_of, &histories);
    let [kept, killed, moved] = gaps;
    Outcome {
        kill_ms: t.kill_ms,
        histories,
        kept,
        killed,
        moved,
        takeover,
        after_handover,
        not_after_kill,
        writes,
    }
}

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

fn report_sharded(plan: &Plan, phases: &Phases, members: &[Member], t: &Timeline, o: &Outcome) {
    let Plan {
        objects,
        processes,
        shards,
        period,
        ..
    } = plan;
    let victim = members.get(t.victim).map_or("", |m| m.identity.as_str());
    let runs: f64 = t.usage.iter().map(|u| u.runs).sum();
    println!("bench-hpa-plus, sharded");
    println!(
        "  objects:                 {objects} ({} namespaces), period {period} s",
        phases.namespaces
    );
    println!("  processes:               {processes}, --leader-elect=true --shards={shards}");
    println!(
        "  leases:                  duration {LEASE_DURATION} s, renew deadline {RENEW_DEADLINE} s, \
         retry period {RETRY_PERIOD} s"
    );
    println!("  create objects:          {:.1?}", phases.created);
    println!(
        "  warm-up:                 {:.1?} (every object evaluated; shards balanced, then still {} s)",
        phases.warm,
        plan.still_for()
    );
    println!(
        "  window:                  {:.1} s; {victim} killed (SIGKILL) at {:.1} s",
        t.elapsed, t.kill_at
    );
    println!(
        "  reconciles/s:            {:.0} summed (all every {period} s needs {:.0})",
        runs / t.elapsed,
        *objects as f64 / *period as f64
    );
    report_processes(members, t);
    println!(
        "  sim (bench process):     {:.2} cores, RSS {:.0} MiB",
        t.sim_cores, t.sim_rss
    );
    report_evaluations(plan, o, victim);
    report_writes(&o.writes);
    for (check, passed) in o.checks(plan) {
        println!(
            "  check:                   {check}: {}",
            if passed { "pass" } else { "FAIL" }
        );
    }
    println!("  load average (1 min):    {:.1}", t.load);
    println!(
        "  machine:                 {}",
        plimsoll_e2e::process::machine()
    );
}

/// One line per process: CPU, RSS, its rate and its shards at the start and the end.
fn report_processes(members: &[Member], t: &Timeline) {
    let count = |snapshot: Option<&(u64, Holders)>, who: &str| {
        snapshot.map_or(0, |(_, h)| {
            h.iter().flatten().filter(|holder| *holder == who).count()
        })
    };
    for (k, (member, usage)) in members.iter().zip(&t.usage).enumerate() {
        let who = member.identity.as_str();
        let before = count(t.holders.first(), who);
        let (label, after) = if k == t.victim {
            (format!("{who} (killed):"), "killed".to_owned())
        } else {
            (format!("{who}:"), count(t.holders.last(), who).to_string())
        };
        println!(
            "  {label:<24} {:.2} cores, RSS {:.0} MiB (peak {:.0} MiB), {:.0} reconciles/s, \
             shards {before} → {after}",
            usage.cpu / usage.seconds,
            usage.rss,
            usage.peak,
            usage.runs / usage.seconds
        );
    }
}

/// Shard moves, evaluation gaps by group, the takeover of the killed process's objects.
fn report_evaluations(plan: &Plan, o: &Outcome, victim: &str) {
    let taken: Vec<u64> = o.histories.iter().filter_map(|h| h.taken_after).collect();
    let moved = o.histories.iter().filter(|h| h.fate == Fate::Moved).count();
    println!(
        "  shards moved:            {} of {victim}'s, on the Lease of the new holder {:.1}–{:.1} s \
         after the kill; {moved} between survivors",
        taken.len(),
        seconds(taken.iter().copied().min().unwrap_or(0)),
        seconds(taken.iter().copied().max().unwrap_or(0)),
    );
    let period_ms = plan.period * 1000;
    println!(
        "  largest gap, kept shard: {:.1} s over {} objects (period + {:.1} s; allowed + {:.1} s); \
         {} over; the longest ended {:+.1} s from the kill",
        seconds(o.kept.largest_ms),
        o.kept.objects,
        seconds(o.kept.largest_ms.saturating_sub(period_ms)),
        seconds(plan.margin_ms()),
        o.kept.over,
        (o.kept.worst_end_ms as f64 - o.kill_ms as f64) / 1000.0
    );
    println!(
        "  largest gap, killed's:   {:.1} s over {} objects (w{})",
        seconds(o.killed.largest_ms),
        o.killed.objects,
        o.killed.worst
    );
    if o.moved.objects > 0 {
        println!(
            "  largest gap, moved:      {:.1} s over {} objects",
            seconds(o.moved.largest_ms),
            o.moved.objects
        );
    }
    let p50 = o.takeover.get(o.takeover.len() / 2).copied().unwrap_or(0);
    println!(
        "  kill → new holder eval:  p50 {:.1} s, max {:.1} s over {} objects (bound lease + retry \
         + margin = {:.1} s)",
        seconds(p50),
        seconds(o.takeover.last().copied().unwrap_or(0)),
        o.takeover.len(),
        seconds(plan.takeover_bound_ms())
    );
    // hpa-plus evaluates the objects of a shard as soon as it takes it
    // (crates/hpa-plus/src/lib.rs, `taken_over`).
    let taken = o.histories.iter().filter_map(|h| h.taken_after).max();
    println!(
        "  … of which:              Lease handover {:.1} s (read every second), then up to {:.1} s \
         to the object's evaluation",
        seconds(taken.unwrap_or(0)),
        seconds(o.after_handover),
    );
    println!(
        "  unevaluated after kill:  {} of {} objects",
        o.not_after_kill,
        o.kept.objects + o.killed.objects + o.moved.objects
    );
}

fn report_writes(w: &WriteAudit) {
    println!(
        "  writes audited:          {} (status, scale) of {} objects, {} without an identity",
        w.writes, w.objects, w.anonymous
    );
    println!(
        "  writer changes:          {} on the killed process's shards, {} on moved, {} on kept; \
         {} objects changed twice",
        w.changes[Fate::Killed as usize],
        w.changes[Fate::Moved as usize],
        w.changes[Fate::Kept as usize],
        w.changed_twice
    );
    println!(
        "  not following the Lease: {} objects{}",
        w.unfollowed,
        w.example
            .as_deref()
            .map(|e| format!(" (e.g. {e})"))
            .unwrap_or_default()
    );
    println!(
        "  killed's writes after:   {} the SIGKILL (sent before it; the last applied {:.2} s after), \
         {} once its shard changed hands",
        w.by_killed_after,
        seconds(w.by_killed_latest_ms),
        w.by_killed_after_takeover
    );
}
