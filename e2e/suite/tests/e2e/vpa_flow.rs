//! The three VPA services together, end to end on plimsoll-sim (issue 7 acceptance).
//!
//! A 4-replica Deployment requests 20m CPU per pod while the sim makes each pod use about 300m.
//! The real vpa-recommender (1 s loop), vpa-admission (self-signed, registered with the sim as a
//! pod CREATE webhook, renewing its status Lease) and vpa-updater (5 s loop, min-replicas 2,
//! tolerance 0.5) run in-process. Nothing in the test writes a recommendation or a Lease: the
//! services do. The test checks that
//!
//! * the recommender's CPU target is far above the 20m requests;
//! * no updater loop evicts more than 2 of the 4 pods, counted two ways: from snapshots of the
//!   updater's `/metrics` (loops and evictions read from one scrape, so they are consistent)
//!   and from the sim's audit log grouped into bursts;
//! * every original pod is replaced and the recreated pods request the recommended CPU, which
//!   only the admission webhook can have written.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_core::quantity;
use plimsoll_e2e::{Env, Running, eventually, free_address, scrape};
use plimsoll_sim::{LoadProfile, LoadSpec};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Generous: the machine running the suite is shared and loaded.
const WAIT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(200);
/// The updater's loop interval; long next to a loop's own duration, so evictions of one loop
/// form a burst well apart from the next loop's.
const UPDATER_INTERVAL_SECS: u64 = 5;
/// Below the recommender's floor for a pod's lowerBound (`--pod-recommendation-min-cpu-millicores`,
/// 25m), so the pods are outside the recommended range from the first recommendation on and the
/// updater evicts them at once instead of waiting out the in-range lifetime threshold (12 h).
const REQUEST_MILLI: i64 = 20;
const REPLICAS: usize = 4;
/// At most `floor(0.5 × 4)` pods per loop.
const PER_LOOP: u64 = 2;

fn recommender(env: &Env) -> anyhow::Result<Running<plimsoll_vpa_recommender::Result<()>>> {
    let config = env.recommender_config(&[])?;
    Ok(Running::spawn("vpa-recommender", |token| {
        plimsoll_vpa_recommender::run(config, token)
    }))
}

/// The real vpa-admission, renewing its status Lease in the test's namespace.
async fn admission(env: &Env) -> anyhow::Result<Running<()>> {
    let (token, run) = env.admission(&env.namespace).await?;
    Ok(Running::spawn_with("vpa-admission", token, run))
}

/// The real vpa-updater and the address of its `/metrics`.
fn updater(env: &Env) -> anyhow::Result<(Running<plimsoll_vpa_updater::Result<()>>, SocketAddr)> {
    let address = free_address()?;
    let config = plimsoll_vpa_updater::cli::parse_config([
        "vpa-updater".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        format!("--metrics-address={address}"),
        format!("--lease-namespace={}", env.namespace),
        format!("--vpa-object-namespace={}", env.namespace),
        format!("--admission-controller-status-namespace={}", env.namespace),
        format!("--updater-interval={UPDATER_INTERVAL_SECS}s"),
        "--min-replicas=2".to_owned(),
        "--eviction-tolerance=0.5".to_owned(),
        "--log-format=text".to_owned(),
    ])?;
    let service = Running::spawn("vpa-updater", |token| async move {
        let result = plimsoll_vpa_updater::run(config, token).await;
        if let Err(e) = &result {
            eprintln!("vpa-updater exited: {e:#}");
        }
        result
    });
    Ok((service, address))
}

/// (completed loops, evicted pods) read from one scrape.
async fn snapshot(address: SocketAddr) -> anyhow::Result<(u64, u64)> {
    let body = scrape::metrics(address).await?;
    Ok((
        scrape::count(
            &body,
            "plimsoll_vpa_updater_loops_total{outcome=\"completed\"}",
        )?,
        scrape::count(
            &body,
            "plimsoll_vpa_updater_evictions_total{result=\"evicted\"}",
        )?,
    ))
}

/// Evictions per loop from a series of snapshots: loop k's count is the eviction total at the
/// first snapshot showing k completed loops minus the total at the first showing k − 1. Loops
/// whose end fell between two snapshots together with the previous loop's end (a slow scrape)
/// are reported together as (first loop, loops, evictions).
fn per_loop(snapshots: &[(u64, u64)]) -> Vec<(u64, u64, u64)> {
    let mut out = Vec::new();
    let mut previous: Option<(u64, u64)> = None;
    for &(loops, evicted) in snapshots {
        match previous {
            None => previous = Some((loops, evicted)),
            Some((l0, e0)) if loops > l0 => {
                out.push((l0 + 1, loops - l0, evicted.saturating_sub(e0)));
                previous = Some((loops, evicted));
            }
            Some(_) => {}
        }
    }
    out
}

/// Sim times (RFC 3339) of the evictions in the test's namespace, grouped into bursts: a gap
/// of more than half the updater interval starts a new burst.
fn audited_bursts(env: &Env) -> anyhow::Result<Vec<Vec<String>>> {
    let mut evictions: Vec<(Timestamp, String)> = Vec::new();
    for e in env.evictions().context("needs the sim's audit log")? {
        let at: Timestamp = e.time.parse().with_context(|| e.time.clone())?;
        evictions.push((at, e.name));
    }
    evictions.sort();
    let gap = jiff::SignedDuration::from_millis(
        i64::try_from(UPDATER_INTERVAL_SECS * 1000 / 2).unwrap_or(i64::MAX),
    );
    let mut bursts: Vec<Vec<String>> = Vec::new();
    let mut last: Option<Timestamp> = None;
    for (at, name) in evictions {
        let new_burst = last.is_none_or(|l| at.duration_since(l) > gap);
        if new_burst {
            bursts.push(Vec::new());
        }
        if let Some(burst) = bursts.last_mut() {
            burst.push(name);
        }
        last = Some(at);
    }
    Ok(bursts)
}

/// The Deployment `web`: 4 replicas requesting 20m CPU each.
async fn deployment(env: &Env) -> anyhow::Result<()> {
    let replicas = i32::try_from(REPLICAS)?;
    plimsoll_e2e::create_deployment(env, "web", replicas, &format!("{REQUEST_MILLI}m"), "100Mi")
        .await
}

/// A Recreate VPA on `web`, for the plimsoll recommender.
async fn vpa(env: &Env) -> anyhow::Result<()> {
    let vpa: VerticalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "recommenders": [{"name": "plimsoll"}],
            "updatePolicy": {"updateMode": "Recreate"}
        }
    }))?;
    env.api::<VerticalPodAutoscaler>()
        .create(&PostParams::default(), &vpa)
        .await?;
    Ok(())
}

/// The CPU recommendation for `app` as (lowerBound, target, upperBound) millicores.
async fn cpu_recommendation(env: &Env) -> anyhow::Result<Option<(i64, i64, i64)>> {
    cpu_recommendation_in(&env.api()).await
}

async fn cpu_recommendation_in(
    api: &Api<VerticalPodAutoscaler>,
) -> anyhow::Result<Option<(i64, i64, i64)>> {
    let vpa = api.get("web").await?;
    let Some(rec) = vpa
        .status
        .and_then(|s| s.recommendation)
        .and_then(|r| r.container_recommendations)
        .and_then(|c| {
            c.into_iter()
                .find(|c| c.container_name.as_deref() == Some("app"))
        })
    else {
        return Ok(None);
    };
    let milli = |m: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
        m.map(quantity::cpu_milli).transpose()
    };
    let lower = milli(rec.lower_bound.as_ref().and_then(|m| m.get("cpu")))?;
    let target = milli(rec.target.get("cpu"))?;
    let upper = milli(rec.upper_bound.as_ref().and_then(|m| m.get("cpu")))?;
    Ok(lower
        .zip(target)
        .zip(upper)
        .map(|((lower, target), upper)| (lower, target, upper)))
}

fn cpu_request_milli(pod: &Pod) -> anyhow::Result<Option<i64>> {
    let q = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("cpu"));
    Ok(q.map(quantity::cpu_milli).transpose()?)
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Live (not terminating) pods of `web`.
async fn live_pods(env: &Env) -> anyhow::Result<Vec<LivePod>> {
    let list = env
        .api::<Pod>()
        .list(&ListParams::default().labels("app=web"))
        .await?;
    list.items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            Ok((
                p.metadata.uid.clone().unwrap_or_default(),
                p.metadata.name.clone().unwrap_or_default(),
                cpu_request_milli(p)?,
                is_ready(p),
            ))
        })
        .collect()
}

/// A live pod of `web`: (uid, name, CPU request in millicores, ready).
type LivePod = (String, String, Option<i64>, bool);

/// Creates `web`, makes each pod use ~300m, waits for its 4 pods; returns their uids.
async fn overloaded_web(
    env: &Env,
    sim: &plimsoll_sim::SimHandle,
) -> anyhow::Result<BTreeSet<String>> {
    deployment(env).await?;
    // The load is shared by the ready pods: 1180 units over 4 pods plus 5m idle each is 300m
    // per pod, 15 times the 20m they request.
    sim.set_load(
        &env.namespace,
        "deployments",
        "web",
        LoadSpec {
            profile: LoadProfile::Constant { value: 1180.0 },
            ..LoadSpec::default()
        },
    );
    let original: BTreeSet<String> = eventually("4 ready pods of web", WAIT, POLL, || async {
        let pods = live_pods(env).await?;
        let ready = pods.iter().filter(|p| p.3).count();
        Ok((ready == REPLICAS && pods.len() == REPLICAS)
            .then(|| pods.into_iter().map(|p| p.0).collect()))
    })
    .await?;
    assert!(
        live_pods(env)
            .await?
            .iter()
            .all(|p| p.2 == Some(REQUEST_MILLI)),
        "the pods start at the Deployment's 20m"
    );
    Ok(original)
}

/// Every CPU target the VPA shows while it runs, polled faster than the recommender writes
/// (once a second), so the request the webhook copied into a pod is among them.
struct TargetWatch {
    targets: Arc<Mutex<BTreeSet<i64>>>,
    token: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl TargetWatch {
    fn start(env: &Env, first: i64) -> TargetWatch {
        let targets = Arc::new(Mutex::new(BTreeSet::from([first])));
        let token = CancellationToken::new();
        let task = tokio::spawn({
            let api: Api<VerticalPodAutoscaler> = env.api();
            let targets = Arc::clone(&targets);
            let token = token.clone();
            async move {
                while !token.is_cancelled() {
                    if let Ok(Some((_, target, _))) = cpu_recommendation_in(&api).await {
                        targets
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .insert(target);
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        });
        TargetWatch {
            targets,
            token,
            task,
        }
    }

    async fn finish(self) -> anyhow::Result<BTreeSet<i64>> {
        self.token.cancel();
        self.task.await?;
        Ok(self
            .targets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone())
    }
}

/// Polls the pods until every original is replaced by a ready pod requesting far more than
/// 20m, snapshotting the updater's counters on each round. Returns the pods and the snapshots.
async fn roll_over(
    env: &Env,
    metrics: SocketAddr,
    original: &BTreeSet<String>,
) -> anyhow::Result<(Vec<LivePod>, Vec<(u64, u64)>)> {
    // The counters start at zero with the updater.
    let snapshots: RefCell<Vec<(u64, u64)>> = RefCell::new(vec![(0, 0)]);
    let rolled = eventually(
        "every pod recreated with the recommended CPU",
        Duration::from_secs(180),
        POLL,
        || {
            let snapshots = &snapshots;
            async move {
                if let Ok(s) = snapshot(metrics).await {
                    snapshots.borrow_mut().push(s);
                }
                let pods = live_pods(env).await?;
                let replaced = pods.len() == REPLICAS
                    && pods.iter().all(|p| p.3 && !original.contains(&p.0))
                    && pods
                        .iter()
                        .all(|p| p.2.is_some_and(|c| c > 10 * REQUEST_MILLI));
                Ok(replaced.then_some(pods))
            }
        },
    )
    .await;
    let mut snapshots = snapshots.into_inner();
    // One more snapshot so the last loop's evictions are attributed.
    if let Ok(s) = snapshot(metrics).await {
        snapshots.push(s);
    }
    match rolled {
        Ok(pods) => Ok((pods, snapshots)),
        Err(e) => {
            eprintln!("pods: {:?}", live_pods(env).await);
            eprintln!(
                "updater metrics:\n{}",
                scrape::metrics(metrics).await.unwrap_or_default()
            );
            Err(e)
        }
    }
}

/// At most 2 evictions per loop, from the updater's counters and from the sim's audit log;
/// every original pod evicted, over at least two loops.
fn assert_at_most_two_per_loop(env: &Env, snapshots: &[(u64, u64)]) -> anyhow::Result<()> {
    let loops = per_loop(snapshots);
    eprintln!("(first loop, loops, evictions): {loops:?}");
    for &(first, n, evicted) in &loops {
        assert!(
            evicted <= PER_LOOP * n,
            "loops {first}..{}: {evicted} evictions",
            first + n - 1
        );
    }
    let total = snapshots.last().map_or(0, |s| s.1);
    assert!(
        total >= u64::try_from(REPLICAS)?,
        "each original pod evicted"
    );
    // The rollover took more than one loop, as it must at 2 per loop.
    assert!(
        loops.iter().filter(|l| l.2 > 0).count() >= 2
            || loops.iter().any(|l| l.1 > 1 && l.2 > PER_LOOP),
        "{loops:?}"
    );
    // Every eviction burst in the audit log (one loop) has at most 2 pods.
    let bursts = audited_bursts(env)?;
    eprintln!("audited eviction bursts: {bursts:?}");
    let audited: usize = bursts.iter().map(Vec::len).sum();
    assert!(audited >= REPLICAS, "{bursts:?}");
    assert!(bursts.len() >= 2, "{bursts:?}");
    for burst in &bursts {
        assert!(burst.len() <= 2, "one loop evicted {burst:?}");
    }
    Ok(())
}

#[tokio::test]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the workload model's CPU load, webhook calls to loopback and the audit log"
)]
async fn recommender_admission_and_updater_roll_four_pods_two_at_a_time() -> anyhow::Result<()> {
    let env = Env::start("vpa-flow").await?;
    let sim = env.sim()?;
    let started = std::time::Instant::now();
    let original = overloaded_web(&env, sim).await?;
    vpa(&env).await?;

    let recommender = recommender(&env)?;
    let (_, first_target, _) = eventually(
        "a CPU recommendation well above 20m",
        WAIT,
        POLL,
        || async {
            Ok(cpu_recommendation(&env)
                .await?
                .filter(|(_, target, _)| *target >= 10 * REQUEST_MILLI))
        },
    )
    .await?;
    eprintln!("first CPU target: {first_target}m");
    let watch = TargetWatch::start(&env, first_target);
    let admission = admission(&env).await?;
    let (updater, metrics) = updater(&env)?;

    let (rolled, snapshots) = roll_over(&env, metrics, &original).await?;
    let targets = watch.finish().await?;
    eprintln!("CPU targets seen: {targets:?}");
    let (lower, target, upper) = cpu_recommendation(&env)
        .await?
        .context("the recommendation is still there")?;
    eprintln!("CPU recommendation now: lower {lower}m, target {target}m, upper {upper}m");
    eprintln!("pods: {rolled:?}");

    // Recreated pods carry the recommendation: only the webhook writes pod requests.
    for (_, name, cpu, _) in &rolled {
        let cpu = cpu.context("a CPU request")?;
        assert!(
            targets.contains(&cpu),
            "{name} requests {cpu}m, not a target the VPA showed: {targets:?}"
        );
        // And the updater is done with it: inside the recommended range.
        assert!(
            (lower..=upper).contains(&cpu) && cpu >= 10 * REQUEST_MILLI,
            "{name} requests {cpu}m, recommendation [{lower}m, {upper}m] target {target}m"
        );
    }
    assert_at_most_two_per_loop(&env, &snapshots)?;

    updater.stop().await??;
    admission.stop().await?;
    recommender.stop().await??;
    let _ = Api::<Namespace>::all(env.client.clone())
        .delete(&env.webhook_home(), &DeleteParams::default())
        .await;
    env.cleanup().await;
    eprintln!("vpa flow took {:.1?}", started.elapsed());
    Ok(())
}
