//! vpa-updater end to end: the real service, in-process, against the sim or a real cluster
//! (where the sim's audit log is not there to cross-check the evictions).
//!
//! The test writes the VPA's `status.recommendation` itself (as the recommender would). Most
//! tests also play the admission webhook by renewing its status Lease (`vpa-admission-controller`)
//! themselves, as a real cluster would also allow: evicted pods then come back with their old
//! requests, so those tests look at one loop's evictions, counted from the updater's metrics and
//! the sim's audit log. `with_the_real_webhook_…` runs the real vpa-admission too and checks the
//! recreated pods.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, bail};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_e2e::{Env, Running, eventually, free_address, scrape};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);

/// The updater running in-process.
struct Updater {
    address: SocketAddr,
    running: Running<plimsoll_vpa_updater::Result<()>>,
}

impl Updater {
    fn start(env: &Env, interval: &str, extra: &[&str]) -> anyhow::Result<Updater> {
        let address = free_address()?;
        let mut args = vec![
            "vpa-updater".to_owned(),
            format!("--kubeconfig={}", env.kubeconfig.display()),
            format!("--metrics-address={address}"),
            format!("--lease-namespace={}", env.namespace),
            format!("--vpa-object-namespace={}", env.namespace),
            format!("--admission-controller-status-namespace={}", env.namespace),
            format!("--updater-interval={interval}"),
            "--log-format=text".to_owned(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let config = plimsoll_vpa_updater::cli::parse_config(args)?;
        Ok(Self::start_with(config, address))
    }

    fn start_with(config: plimsoll_vpa_updater::Config, address: SocketAddr) -> Updater {
        let running = Running::spawn("vpa-updater", |token| async move {
            let result = plimsoll_vpa_updater::run(config, token).await;
            if let Err(e) = &result {
                eprintln!("vpa-updater exited: {e:#}");
            }
            result
        });
        Updater { address, running }
    }

    /// The `/metrics` page.
    async fn scrape(&self) -> anyhow::Result<String> {
        scrape::metrics(self.address).await
    }

    /// The value of one counter or gauge sample of `/metrics` (0 when absent).
    async fn metric(&self, sample: &str) -> anyhow::Result<u64> {
        scrape::count(&self.scrape().await?, sample)
    }

    /// Waits until at least `n` loops ended with `outcome`.
    async fn loops(&self, outcome: &str, n: u64) -> anyhow::Result<()> {
        let sample = format!("plimsoll_vpa_updater_loops_total{{outcome=\"{outcome}\"}}");
        let result = eventually(&format!("{n} loops {outcome}"), WAIT, POLL, || async {
            Ok((self.metric(&sample).await? >= n).then_some(()))
        })
        .await;
        if result.is_err() {
            eprintln!("metrics:\n{}", self.scrape().await.unwrap_or_default());
        }
        result
    }

    async fn evictions(&self, result: &str) -> anyhow::Result<u64> {
        self.metric(&format!(
            "plimsoll_vpa_updater_evictions_total{{result=\"{result}\"}}"
        ))
        .await
    }

    async fn stop(self) -> anyhow::Result<()> {
        self.running.stop().await??;
        Ok(())
    }
}

/// A Deployment `name` with `replicas` pods requesting 10m CPU and 10Mi memory.
async fn deployment(env: &Env, name: &str, replicas: i32) -> anyhow::Result<()> {
    plimsoll_e2e::create_deployment(env, name, replicas, "10m", "10Mi").await?;
    plimsoll_e2e::wait_ready_pods(env, name, usize::try_from(replicas)?, WAIT, POLL).await
}

/// A test's start: Deployment `web` with 4 ready pods and a VPA in `mode` on it.
async fn four_web_pods(test: &str, mode: &str) -> anyhow::Result<Env> {
    let env = Env::start(test).await?;
    deployment(&env, "web", 4).await?;
    vpa(&env, "web", mode).await?;
    Ok(env)
}

/// A VPA on Deployment `name` whose recommendation (written by the test, as the recommender
/// would) is far above the pods' requests.
async fn vpa(env: &Env, name: &str, mode: &str) -> anyhow::Result<()> {
    let api = env.api::<VerticalPodAutoscaler>();
    let vpa: VerticalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "updatePolicy": {"updateMode": mode}
        }
    }))?;
    api.create(&PostParams::default(), &vpa).await?;
    let status = json!({"status": {"recommendation": {"containerRecommendations": [{
        "containerName": "app",
        "target": {"cpu": "500m", "memory": "500Mi"},
        "lowerBound": {"cpu": "400m", "memory": "400Mi"},
        "upperBound": {"cpu": "1", "memory": "1Gi"}
    }]}}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .context("write the recommendation")?;
    Ok(())
}

/// Creates or renews the webhook's status Lease with `renewTime` = now − `ago`.
async fn renew_status_lease(env: &Env, ago: SignedDuration) -> anyhow::Result<()> {
    let renew = (Timestamp::now() - ago)
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string();
    let lease: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "vpa-admission-controller"},
        "spec": {"holderIdentity": "e2e-test", "leaseDurationSeconds": 60, "renewTime": renew}
    }))?;
    env.api::<Lease>()
        .patch(
            "vpa-admission-controller",
            &PatchParams::apply("e2e-webhook").force(),
            &Patch::Apply(&lease),
        )
        .await?;
    Ok(())
}

/// Names of the pods the sim recorded as evicted (`None` on a real cluster).
fn audited_evictions(env: &Env) -> Option<Vec<String>> {
    Some(env.evictions()?.into_iter().map(|e| e.name).collect())
}

/// Events in the namespace with `reason`, as (regarding kind, name).
async fn events(env: &Env, reason: &str) -> anyhow::Result<Vec<(String, String)>> {
    let list = env.api::<Event>().list(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| {
            let r = e.regarding?;
            Some((r.kind?, r.name?))
        })
        .collect())
}

#[tokio::test]
async fn four_replicas_far_below_the_recommendation_lose_at_most_two_pods_per_loop()
-> anyhow::Result<()> {
    let env = four_web_pods("vpa-upd-rollover", "Recreate").await?;
    renew_status_lease(&env, SignedDuration::ZERO).await?;
    // One loop at start, the next an hour later: this test sees exactly one loop.
    let updater = Updater::start(&env, "1h", &[])?;
    updater.loops("completed", 1).await?;
    assert_eq!(updater.evictions("evicted").await?, 2, "tolerance 0.5 of 4");
    if let Some(evicted) = audited_evictions(&env) {
        assert_eq!(evicted.len(), 2, "audit: {evicted:?}");
    }
    let pod_events = events(&env, "EvictedByVPA").await?;
    let vpa_events = events(&env, "EvictedPod").await?;
    assert_eq!(pod_events.len(), 2, "{pod_events:?}");
    assert!(pod_events.iter().all(|(kind, _)| kind == "Pod"));
    // One per eviction: each names its pod, and Events with other notes are other Events.
    assert_eq!(vpa_events.len(), 2, "{vpa_events:?}");
    assert!(
        vpa_events
            .iter()
            .all(|e| *e == ("VerticalPodAutoscaler".into(), "web".into())),
        "{vpa_events:?}"
    );
    updater.stop().await?;
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the audit log counts the evictions"
)]
async fn loops_keep_to_the_budget_over_time() -> anyhow::Result<()> {
    let env = four_web_pods("vpa-upd-loops", "Auto").await?;
    // Only the sim's audit log counts the evictions of every loop.
    env.sim()?;
    renew_status_lease(&env, SignedDuration::ZERO).await?;
    let updater = Updater::start(&env, "3s", &[])?;
    updater.loops("completed", 3).await?;
    updater.stop().await?;
    // With no webhook the recreated pods keep their old requests and are evicted again later;
    // the budget still holds in every loop: never more than 2 of the 4 down at once per loop.
    // At least 3 loops completed; a fourth may have started before the stop.
    let loops = 4;
    let evicted = audited_evictions(&env).context("needs the sim's audit log")?;
    assert!(!evicted.is_empty());
    assert!(
        evicted.len() <= 2 * (loops + 1),
        "{} evictions in about {loops} loops",
        evicted.len()
    );
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn a_pdb_with_max_unavailable_zero_blocks_every_eviction_and_is_reported()
-> anyhow::Result<()> {
    let env = Env::start("vpa-upd-pdb").await?;
    deployment(&env, "web", 4).await?;
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}}
    }))?;
    env.api::<PodDisruptionBudget>()
        .create(&PostParams::default(), &pdb)
        .await?;
    vpa(&env, "web", "Recreate").await?;
    renew_status_lease(&env, SignedDuration::ZERO).await?;
    let updater = Updater::start(&env, "1h", &[])?;
    updater.loops("completed", 1).await?;
    assert_eq!(updater.evictions("evicted").await?, 0);
    assert_eq!(updater.evictions("blocked").await?, 2, "both tries refused");
    if let Some(evicted) = audited_evictions(&env) {
        assert!(evicted.is_empty(), "{evicted:?}");
    }
    let reported = eventually("EvictionBlocked event on the VPA", WAIT, POLL, || async {
        let found = events(&env, "EvictionBlocked").await?;
        Ok(found
            .iter()
            .any(|(kind, name)| kind == "VerticalPodAutoscaler" && name == "web")
            .then_some(found))
    })
    .await?;
    assert!(reported.iter().any(|(kind, _)| kind == "Pod"));
    assert_eq!(
        env.api::<Pod>()
            .list(&ListParams::default())
            .await?
            .items
            .len(),
        4
    );
    updater.stop().await?;
    env.cleanup().await;
    Ok(())
}

/// A pod whose labels pass what the updater keeps of a pod (`plimsoll_core::pod_fields::
/// POD_BUDGET`, 32 KiB) is cached as its name and uid: no owner, so no VPA controls it and it is
/// never evicted, while a plain pod under the same kind of VPA is, in the same loop. The watch
/// counts it.
#[tokio::test]
async fn a_pod_too_large_to_cache_is_left_alone() -> anyhow::Result<()> {
    let env = Env::start("vpa-upd-fat-pod").await?;
    deployment(&env, "fat", 1).await?;
    deployment(&env, "slim", 1).await?;
    vpa(&env, "fat", "Recreate").await?;
    vpa(&env, "slim", "Recreate").await?;
    let fat = plimsoll_e2e::fatten_pod(&env, "fat").await?;
    let pods = env.api::<Pod>();
    renew_status_lease(&env, SignedDuration::ZERO).await?;
    // One loop; a single replica may be evicted with --min-replicas=1 (as upstream's).
    let updater = Updater::start(&env, "1h", &["--min-replicas=1"])?;
    updater.loops("completed", 1).await?;
    assert_eq!(updater.evictions("evicted").await?, 1, "slim's pod only");
    if let Some(evicted) = audited_evictions(&env) {
        assert_eq!(evicted.len(), 1, "{evicted:?}");
        assert!(evicted[0].starts_with("slim-"), "{evicted:?}");
    }
    assert!(pods.get_opt(&fat).await?.is_some(), "fat's pod stays");
    assert!(
        updater
            .metric("plimsoll_vpa_updater_watch_over_budget_total{watch=\"Pod\"}")
            .await?
            >= 1
    );
    updater.stop().await?;
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn a_single_replica_is_never_evicted_with_min_replicas_two() -> anyhow::Result<()> {
    let env = Env::start("vpa-upd-single").await?;
    deployment(&env, "solo", 1).await?;
    vpa(&env, "solo", "Recreate").await?;
    renew_status_lease(&env, SignedDuration::ZERO).await?;
    let updater = Updater::start(&env, "1s", &["--min-replicas=2"])?;
    updater.loops("completed", 3).await?;
    for result in ["evicted", "blocked", "error"] {
        assert_eq!(updater.evictions(result).await?, 0, "{result}");
    }
    if let Some(evicted) = audited_evictions(&env) {
        assert!(evicted.is_empty(), "{evicted:?}");
    }
    updater.stop().await?;
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn nothing_is_evicted_while_the_webhook_status_lease_is_stale_or_missing()
-> anyhow::Result<()> {
    let env = four_web_pods("vpa-upd-stale", "Recreate").await?;
    // The contract is one minute; a shorter timeout keeps the test short. A freshly created
    // Lease counts as renewed at creation, so the stale Lease is left to age past it first.
    let start = |env: &Env| -> anyhow::Result<Updater> {
        let address = free_address()?;
        let mut config = plimsoll_vpa_updater::cli::parse_config([
            "vpa-updater".to_owned(),
            format!("--kubeconfig={}", env.kubeconfig.display()),
            format!("--metrics-address={address}"),
            format!("--lease-namespace={}", env.namespace),
            format!("--vpa-object-namespace={}", env.namespace),
            format!("--admission-controller-status-namespace={}", env.namespace),
            "--updater-interval=1s".to_owned(),
            "--log-format=text".to_owned(),
        ])?;
        config.admission_status_timeout = Duration::from_secs(2);
        Ok(Updater::start_with(config, address))
    };
    // Missing Lease: the webhook never ran.
    let updater = start(&env)?;
    updater.loops("admission_unhealthy", 2).await?;
    updater.stop().await?;
    // Stale Lease: last renewed ten minutes ago, created more than the timeout ago.
    renew_status_lease(&env, SignedDuration::from_mins(10)).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let updater = start(&env)?;
    updater.loops("admission_unhealthy", 2).await?;
    let completed = "plimsoll_vpa_updater_loops_total{outcome=\"completed\"}";
    assert_eq!(updater.metric(completed).await?, 0);
    assert_eq!(
        updater
            .metric("plimsoll_vpa_updater_admission_status_valid")
            .await?,
        0
    );
    assert_eq!(updater.evictions("evicted").await?, 0);
    if let Some(evicted) = audited_evictions(&env) {
        assert!(evicted.is_empty(), "{evicted:?}");
    }
    // The webhook comes back: the updater evicts again, so the Lease was what stopped it.
    renew_status_lease(&env, SignedDuration::ZERO).await?;
    eventually("evictions once the Lease is fresh", WAIT, POLL, || async {
        Ok((updater.evictions("evicted").await? >= 1).then_some(()))
    })
    .await?;
    updater.stop().await?;
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn in_place_or_recreate_resizes_through_the_resize_subresource() -> anyhow::Result<()> {
    let env = four_web_pods("vpa-upd-inplace", "InPlaceOrRecreate").await?;
    renew_status_lease(&env, SignedDuration::ZERO).await?;
    let updater = Updater::start(&env, "1h", &[])?;
    updater.loops("completed", 1).await?;
    let resized = updater
        .metric("plimsoll_vpa_updater_resizes_total{result=\"requested\"}")
        .await?;
    assert_eq!(resized, 2);
    assert_eq!(updater.evictions("evicted").await?, 0);
    let pods = env.api::<Pod>().list(&ListParams::default()).await?;
    let mut requests: BTreeMap<String, usize> = BTreeMap::new();
    for pod in &pods.items {
        let cpu = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers[0].resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("cpu"))
            .map(|q| q.0.clone())
            .unwrap_or_default();
        *requests.entry(cpu).or_default() += 1;
    }
    if requests.get("500m") != Some(&2) {
        bail!("expected 2 pods resized to 500m, got {requests:?}");
    }
    assert_eq!(events(&env, "InPlaceResizedByVPA").await?.len(), 2);
    updater.stop().await?;
    env.cleanup().await;
    Ok(())
}

/// Resizes of pods in the namespace recorded by the sim (`None` on a real cluster).
fn audited_resizes(env: &Env) -> Option<Vec<String>> {
    let audit = env.audit()?;
    Some(
        audit
            .into_iter()
            .filter(|e| e.resource == "pods" && e.subresource == "resize")
            .map(|e| e.name)
            .collect(),
    )
}

/// Waits until VPA `name`'s `InPlaceResizeHeld` is `False`/`NoneHeld`: no pod keeps a held resize.
async fn wait_none_held(env: &Env, name: &str) -> anyhow::Result<()> {
    eventually("the condition turned False", WAIT, POLL, || async {
        Ok(held_condition(env, name)
            .await?
            .filter(|(status, reason, _)| status == "False" && reason == "NoneHeld")
            .map(|_| ()))
    })
    .await
}

/// The VPA's `InPlaceResizeHeld` condition as (status, reason, message).
async fn held_condition(env: &Env, name: &str) -> anyhow::Result<Option<(String, String, String)>> {
    let vpa = env.api::<VerticalPodAutoscaler>().get(name).await?;
    Ok(vpa
        .status
        .and_then(|s| s.conditions)
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "InPlaceResizeHeld")
        .map(|c| {
            (
                c.status,
                c.reason.unwrap_or_default(),
                c.message.unwrap_or_default(),
            )
        }))
}

/// The CPU cores the kubelet applied to the pod's first container (its status), else NaN.
fn allocated_cpu(pod: &Pod) -> f64 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .and_then(|c| c.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("cpu"))
        .and_then(|q| plimsoll_core::quantity::parse_f64(&q.0).ok())
        .unwrap_or(f64::NAN)
}

// AEP-8818 on the sim: a recommendation above every node's allocatable CPU (20 cores; the sim's
// nodes have 7800m) is sent once per pod, the kubelet answers Infeasible, and the updater
// neither evicts nor sends the same values again, however many loops run; the VPA's condition
// and the pods' Events say why. A lower recommendation is then tried, and applied.
#[tokio::test]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's audit log and its nodes' allocatable (7800m CPU)"
)]
async fn in_place_never_evicts_and_does_not_resend_infeasible_values() -> anyhow::Result<()> {
    let env = four_web_pods("vpa-upd-inplace-only", "InPlace").await?;
    env.sim()?;
    recommend(&env, "web", 20_000).await?;
    renew_status_lease(&env, SignedDuration::ZERO).await?;
    let updater = Updater::start(&env, "1s", &[])?;
    // Two resizes per loop (4 replicas, tolerance 0.5): every pod is asked once by loop 2.
    eventually(
        "every pod's resize reported Infeasible",
        WAIT,
        POLL,
        || async {
            let pods = env.api::<Pod>().list(&ListParams::default()).await?;
            let infeasible = pods
                .items
                .iter()
                .filter(|p| {
                    plimsoll_e2e::pod_condition(p, "PodResizePending")
                        .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"))
                })
                .count();
            Ok((infeasible == 4).then_some(()))
        },
    )
    .await?;
    // Many more loops: nothing is sent again, nothing evicted.
    let done = updater
        .metric("plimsoll_vpa_updater_loops_total{outcome=\"completed\"}")
        .await?;
    updater.loops("completed", done + 5).await?;
    let resized = audited_resizes(&env).context("needs the sim's audit log")?;
    assert_eq!(resized.len(), 4, "each pod asked once: {resized:?}");
    let mut names = resized.clone();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 4, "{resized:?}");
    assert_eq!(audited_evictions(&env), Some(Vec::new()));
    for result in ["evicted", "blocked", "gone", "error"] {
        assert_eq!(updater.evictions(result).await?, 0, "{result}");
    }
    let pods = env.api::<Pod>().list(&ListParams::default()).await?;
    assert!(
        pods.items
            .iter()
            .all(|p| (allocated_cpu(p) - 0.01).abs() < 1e-9),
        "the kubelet applied nothing"
    );
    let (status, reason, message) = held_condition(&env, "web")
        .await?
        .context("the VPA has an InPlaceResizeHeld condition")?;
    assert_eq!((status.as_str(), reason.as_str()), ("True", "Infeasible"));
    assert!(
        message.starts_with("4 pod(s) keep their requests (4 the node cannot fit)"),
        "{message}"
    );
    assert!(message.contains("capacity: 7800"), "{message}");
    let pod_events = events(&env, "InPlaceResizeInfeasible").await?;
    assert_eq!(
        pod_events.iter().filter(|(kind, _)| kind == "Pod").count(),
        4,
        "{pod_events:?}"
    );

    // A recommendation that asks for less may fit: tried, and applied by the kubelet.
    recommend(&env, "web", 2_000).await?;
    eventually("every pod resized to 2 cores", WAIT, POLL, || async {
        let pods = env.api::<Pod>().list(&ListParams::default()).await?;
        Ok(pods
            .items
            .iter()
            .all(|p| (allocated_cpu(p) - 2.0).abs() < 1e-9)
            .then_some(()))
    })
    .await?;
    wait_none_held(&env, "web").await?;
    assert_eq!(audited_resizes(&env).map(|r| r.len()), Some(8));
    assert_eq!(audited_evictions(&env), Some(Vec::new()));
    updater.stop().await?;
    env.cleanup().await;
    Ok(())
}

/// A 7-core bare pod `filler` and Deployment `web` (2 pods of 100m), all on `sim-node-1`.
async fn web_beside_a_filler(env: &Env) -> anyhow::Result<()> {
    let pinned = |cpu: &str| {
        json!({"nodeName": "sim-node-1", "containers": [{
            "name": "app", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": cpu, "memory": "10Mi"}}
        }]})
    };
    let filler: Pod = serde_json::from_value(json!({
        "metadata": {"name": "filler"}, "spec": pinned("7")
    }))?;
    env.api::<Pod>()
        .create(&PostParams::default(), &filler)
        .await?;
    let web: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": pinned("100m")}}
    }))?;
    env.api::<k8s_openapi::api::apps::v1::Deployment>()
        .create(&PostParams::default(), &web)
        .await?;
    Ok(())
}

/// The pods of Deployment `web`.
async fn web_pods(env: &Env) -> anyhow::Result<Vec<Pod>> {
    let list = env
        .api::<Pod>()
        .list(&ListParams::default().labels("app=web"))
        .await?;
    Ok(list.items)
}

// KEP-1287 `Deferred` on the sim, with AEP-8818's InPlace mode: both pods of `web` and a 7-core
// `filler` pod share one node (7800m allocatable). A 2-core recommendation fits the node but not
// beside the filler, so the kubelet defers each resize; the updater sends each once, then waits
// (no resend, no eviction) and says so in the VPA's condition. Once the filler is deleted the
// kubelet applies both deferred resizes by itself, and the condition clears.
#[tokio::test]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's audit log and its nodes (sim-node-1, 7800m CPU allocatable)"
)]
async fn in_place_waits_on_a_deferred_resize_until_the_node_has_room() -> anyhow::Result<()> {
    let env = Env::start("vpa-upd-inplace-deferred").await?;
    env.sim()?;
    web_beside_a_filler(&env).await?;
    plimsoll_e2e::wait_ready_pods(&env, "web", 2, WAIT, POLL).await?;
    vpa(&env, "web", "InPlace").await?;
    recommend(&env, "web", 2_000).await?;
    renew_status_lease(&env, SignedDuration::ZERO).await?;
    let updater = Updater::start(&env, "1s", &[])?;
    // One resize per loop (2 replicas, tolerance 0.5): both pods asked by loop 2, both deferred.
    let messages = eventually("both resizes reported Deferred", WAIT, POLL, || async {
        let pods = web_pods(&env).await?;
        let deferred: Vec<String> = pods
            .iter()
            .filter_map(|p| plimsoll_e2e::pod_condition(p, "PodResizePending"))
            .filter(|c| c.reason.as_deref() == Some("Deferred"))
            .filter_map(|c| c.message.clone())
            .collect();
        Ok((deferred.len() == 2).then_some(deferred))
    })
    .await?;
    for m in messages {
        assert_eq!(
            m,
            "Node didn't have enough resource: cpu, requested: 2000, used: 7100, capacity: 7800"
        );
    }
    let done = updater
        .metric("plimsoll_vpa_updater_loops_total{outcome=\"completed\"}")
        .await?;
    updater.loops("completed", done + 5).await?;
    let resized = audited_resizes(&env).context("needs the sim's audit log")?;
    assert_eq!(
        resized.len(),
        2,
        "each pod asked once, then waited on: {resized:?}"
    );
    assert_eq!(audited_evictions(&env), Some(Vec::new()));
    let pods = web_pods(&env).await?;
    assert!(
        pods.iter().all(|p| (allocated_cpu(p) - 0.1).abs() < 1e-9),
        "the kubelet applied nothing yet"
    );
    let (status, reason, _) = held_condition(&env, "web")
        .await?
        .context("the VPA has an InPlaceResizeHeld condition")?;
    assert_eq!((status.as_str(), reason.as_str()), ("True", "Waiting"));

    // Room frees up: the kubelet retries its deferred resizes and applies both.
    env.api::<Pod>()
        .delete(
            "filler",
            &kube::api::DeleteParams {
                grace_period_seconds: Some(0),
                ..kube::api::DeleteParams::default()
            },
        )
        .await?;
    eventually("both pods resized to 2 cores", WAIT, POLL, || async {
        let pods = web_pods(&env).await?;
        Ok(pods
            .iter()
            .all(|p| {
                (allocated_cpu(p) - 2.0).abs() < 1e-9
                    && plimsoll_e2e::pod_condition(p, "PodResizePending").is_none()
            })
            .then_some(()))
    })
    .await?;
    wait_none_held(&env, "web").await?;
    assert_eq!(
        audited_resizes(&env).map(|r| r.len()),
        Some(2),
        "the kubelet applied them; the updater sent nothing again"
    );
    assert_eq!(audited_evictions(&env), Some(Vec::new()));
    for result in ["evicted", "blocked", "gone", "error"] {
        assert_eq!(updater.evictions(result).await?, 0, "{result}");
    }
    updater.stop().await?;
    env.cleanup().await;
    Ok(())
}

// AEP-7862 on the sim, with the real webhook: a VPA in mode Off with a CPU startup boost
// (factor 3, 8 s after Ready) gives new pods 3 × their 100m request with the original in the
// `vpaCpuStartupBoost/app` annotation; once a pod has been Ready 8 s the updater lowers it in
// place to its original request and drops the annotation; nothing is evicted.
#[tokio::test]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: webhook calls to loopback and the audit log"
)]
async fn a_startup_boost_is_applied_at_creation_and_lowered_after_readiness() -> anyhow::Result<()>
{
    let env = Env::start("vpa-upd-boost").await?;
    env.sim()?;
    let vpa: VerticalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "updatePolicy": {"updateMode": "Off"},
            "startupBoost": {"cpu": {"type": "Factor", "factor": 3, "durationSeconds": 8}}
        }
    }))?;
    env.api::<VerticalPodAutoscaler>()
        .create(&PostParams::default(), &vpa)
        .await?;
    let (admission_token, run) = env.admission(&env.namespace).await?;
    let admission = tokio::spawn(run);
    plimsoll_e2e::wait_webhook_ready(&env.client, &env.namespace, WAIT).await?;
    plimsoll_e2e::create_deployment(&env, "web", 2, "100m", "10Mi").await?;
    let pods = env.api::<Pod>();
    let boosted = |p: &Pod| {
        p.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("vpaCpuStartupBoost/app"))
            .cloned()
    };
    let started = eventually("two pods created boosted", WAIT, POLL, || async {
        let list = pods.list(&ListParams::default().labels("app=web")).await?;
        let ok: Vec<(String, Option<String>)> = list
            .items
            .iter()
            .map(|p| (cpu_request(p), boosted(p)))
            .collect();
        Ok((ok.len() == 2).then_some(ok))
    })
    .await?;
    for (cpu, annotation) in &started {
        assert_eq!(cpu, "300m", "{started:?}");
        assert_eq!(
            annotation.as_deref(),
            Some(r#"{"requests":{"cpu":"100m","memory":"10Mi"},"limits":{}}"#),
            "{started:?}"
        );
    }
    let updater = Updater::start(&env, "1s", &[])?;
    let lowered = eventually(
        "both pods lowered to 100m",
        Duration::from_secs(90),
        POLL,
        || async {
            let list = pods.list(&ListParams::default().labels("app=web")).await?;
            let done = list.items.iter().all(|p| {
                cpu_request(p) == "100m"
                    && (allocated_cpu(p) - 0.1).abs() < 1e-9
                    && boosted(p).is_none()
            });
            Ok((done && list.items.len() == 2).then_some(list.items))
        },
    )
    .await?;
    // Lowered no sooner than 8 s after the pod became Ready (the sim's clock on both sides).
    let audit = env.audit().context("needs the sim's audit log")?;
    for pod in &lowered {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let ready = plimsoll_e2e::pod_condition(pod, "Ready")
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0)
            .context("Ready time")?;
        let resized: Vec<Timestamp> = audit
            .iter()
            .filter(|e| e.subresource == "resize" && e.name == name)
            .filter_map(|e| e.time.parse().ok())
            .collect();
        assert_eq!(resized.len(), 1, "{name}: one resize");
        assert!(
            resized[0] >= ready + SignedDuration::from_secs(8),
            "{name}: lowered at {} but Ready at {ready}",
            resized[0]
        );
    }
    assert_eq!(audited_evictions(&env), Some(Vec::new()));
    updater.stop().await?;
    admission_token.cancel();
    let _ = admission.await;
    env.cleanup().await;
    Ok(())
}

fn cpu_request(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers[0].resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("cpu"))
        .map(|q| q.0.clone())
        .unwrap_or_default()
}

#[tokio::test]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: webhook calls to loopback and the audit log"
)]
async fn with_the_real_webhook_recreated_pods_carry_the_recommendation() -> anyhow::Result<()> {
    let env = four_web_pods("vpa-upd-full", "Recreate").await?;
    // The sim calls the webhook on loopback, as a real cluster's apiserver cannot.
    env.sim()?;
    let (admission_token, run) = env.admission(&env.namespace).await?;
    let admission = tokio::spawn(run);
    // The updater only evicts once the webhook's own status Lease says it is alive.
    let updater = Updater::start(&env, "2s", &[])?;
    let pods = env.api::<Pod>();
    let rolled = eventually(
        "every pod recreated with 500m",
        Duration::from_secs(120),
        POLL,
        || async {
            let list = pods.list(&ListParams::default().labels("app=web")).await?;
            let live: Vec<&Pod> = list
                .items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            Ok(
                (live.len() == 4 && live.iter().all(|p| cpu_request(p) == "500m"))
                    .then_some(live.len()),
            )
        },
    )
    .await?;
    assert_eq!(rolled, 4);
    // Each original pod was evicted once; the recreated ones carry the target, so the updater
    // leaves them alone.
    let evicted = audited_evictions(&env).context("needs the sim's audit log")?;
    assert!(evicted.len() >= 4, "{evicted:?}");
    let blocked = updater.evictions("blocked").await?;
    assert_eq!(blocked, 0);
    updater.stop().await?;
    admission_token.cancel();
    let _ = admission.await;
    env.cleanup().await;
    Ok(())
}

/// Writes `target` (with bounds at half and twice it) as the recommendation of VPA `name`.
async fn recommend(env: &Env, name: &str, cpu_millis: u32) -> anyhow::Result<()> {
    let (low, high) = (cpu_millis / 2, cpu_millis * 2);
    let status = json!({"status": {"recommendation": {"containerRecommendations": [{
        "containerName": "app",
        "target": {"cpu": format!("{cpu_millis}m"), "memory": "10Mi"},
        "lowerBound": {"cpu": format!("{low}m"), "memory": "5Mi"},
        "upperBound": {"cpu": format!("{high}m"), "memory": "20Mi"}
    }]}}});
    env.api::<VerticalPodAutoscaler>()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .context("write the recommendation")?;
    Ok(())
}

/// The requests the updater sent through the tap from `from` on, other than Lease requests
/// (leader election and the webhook status check), as `METHOD path`.
fn requests_other_than_leases(tap: &plimsoll_e2e::tap::Tap, from: usize) -> Vec<String> {
    tap.seen()
        .into_iter()
        .skip(from)
        .filter(|s| !s.path.contains("/leases"))
        .map(|s| format!("{} {}", s.method, s.path))
        .collect()
}

#[tokio::test]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the wiretap on its plain HTTP listener"
)]
async fn loops_read_pods_and_vpas_from_watches_not_from_lists() -> anyhow::Result<()> {
    let env = Env::start("vpa-upd-watch").await?;
    deployment(&env, "web", 4).await?;
    vpa(&env, "web", "Recreate").await?;
    // Requests of 10m are inside 5m..20m: nothing to evict.
    recommend(&env, "web", 10).await?;
    renew_status_lease(&env, SignedDuration::ZERO).await?;
    let (tap, kubeconfig) = env.tap().await?;
    let address = free_address()?;
    let config = plimsoll_vpa_updater::cli::parse_config([
        "vpa-updater".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--metrics-address={address}"),
        format!("--lease-namespace={}", env.namespace),
        format!("--vpa-object-namespace={}", env.namespace),
        format!("--admission-controller-status-namespace={}", env.namespace),
        "--updater-interval=1s".to_owned(),
        "--log-format=text".to_owned(),
    ])?;
    let updater = Updater::start_with(config, address);
    updater.loops("completed", 1).await?;
    let first = tap.seen().len();
    let listed = requests_other_than_leases(&tap, 0);
    assert!(
        listed
            .iter()
            .any(|r| r.starts_with("GET ") && r.ends_with("/pods")),
        "the pods were listed and watched once at start: {listed:?}"
    );
    updater.loops("completed", 4).await?;
    // Steady loops: the status Lease read and nothing else.
    let steady = requests_other_than_leases(&tap, first);
    assert!(steady.is_empty(), "requests in steady loops: {steady:?}");
    let status_reads = tap
        .seen()
        .iter()
        .skip(first)
        .filter(|s| s.method == "GET" && s.path.ends_with("/leases/vpa-admission-controller"))
        .count();
    assert!(
        status_reads >= 3,
        "one status Lease read per loop: {status_reads}"
    );

    // The recommendation moves far above the requests: the watch brings it, and a loop evicts
    // within the budget, still without listing anything.
    let before = tap.seen().len();
    recommend(&env, "web", 500).await?;
    eventually(
        "evictions after the recommendation moved",
        WAIT,
        POLL,
        || async { Ok((updater.evictions("evicted").await? >= 2).then_some(())) },
    )
    .await?;
    let acting: Vec<String> = requests_other_than_leases(&tap, before)
        .into_iter()
        .filter(|r| !r.contains("/events"))
        .collect();
    assert!(
        !acting.is_empty()
            && acting
                .iter()
                .all(|r| r.starts_with("POST ") && r.ends_with("/eviction")),
        "only evictions (and Events): {acting:?}"
    );
    updater.stop().await?;
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
#[cfg_attr(
    real_cluster,
    ignore = "creates a Deployment and a Recreate VPA in kube-system, and needs the sim's audit log"
)]
async fn a_recreate_vpa_in_kube_system_evicts_nothing_by_default_and_the_same_vpa_elsewhere_does()
-> anyhow::Result<()> {
    use k8s_openapi::api::apps::v1::Deployment;
    let env = four_web_pods("vpa-upd-kube-system", "Recreate").await?;
    let sim = env.sim()?;
    // The same Deployment and VPA in kube-system: in Recreate mode, evicted pods come back with
    // the old requests (kube-system is not admitted either) and are evicted again, forever.
    let in_kube_system = |kind: &str| format!("{kind} kube-system/web");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "kube-system"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "10m", "memory": "10Mi"}}}]}}}
    }))?;
    kube::Api::<Deployment>::namespaced(env.client.clone(), "kube-system")
        .create(&PostParams::default(), &deployment)
        .await
        .with_context(|| in_kube_system("create Deployment"))?;
    let pods = kube::Api::<Pod>::namespaced(env.client.clone(), "kube-system");
    // Ready, as the test namespace's: evictable but for the scope.
    plimsoll_e2e::eventually("4 ready pods in kube-system", WAIT, POLL, || async {
        let list = pods.list(&ListParams::default().labels("app=web")).await?;
        let ready = list
            .items
            .iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        Ok((ready == 4).then_some(()))
    })
    .await?;
    let vpas = kube::Api::<VerticalPodAutoscaler>::namespaced(env.client.clone(), "kube-system");
    let vpa: VerticalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "kube-system"},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "updatePolicy": {"updateMode": "Recreate"}}
    }))?;
    vpas.create(&PostParams::default(), &vpa).await?;
    let status = json!({"status": {"recommendation": {"containerRecommendations": [{
        "containerName": "app", "target": {"cpu": "500m", "memory": "500Mi"},
        "lowerBound": {"cpu": "400m", "memory": "400Mi"},
        "upperBound": {"cpu": "1", "memory": "1Gi"}}]}}});
    vpas.patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .with_context(|| in_kube_system("write the recommendation of VPA"))?;
    renew_status_lease(&env, SignedDuration::ZERO).await?;

    // No namespace flag: the updater watches every namespace, with its default scope.
    let address = free_address()?;
    let config = plimsoll_vpa_updater::cli::parse_config([
        "vpa-updater".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        format!("--metrics-address={address}"),
        format!("--lease-namespace={}", env.namespace),
        format!("--admission-controller-status-namespace={}", env.namespace),
        "--updater-interval=1h".to_owned(),
        "--log-format=text".to_owned(),
    ])?;
    assert!(!config.scope.admits("kube-system"), "{:?}", config.scope);
    let updater = Updater::start_with(config, address);
    updater.loops("completed", 1).await?;
    let evicted_in = |ns: &str| {
        sim.audit()
            .into_iter()
            .filter(|e| e.subresource == "eviction" && e.namespace == ns)
            .count()
    };
    // The test's namespace shows that the loop evicts at all: two of its four pods.
    assert_eq!(evicted_in(&env.namespace), 2);
    assert_eq!(updater.evictions("evicted").await?, 2);
    assert_eq!(evicted_in("kube-system"), 0, "kube-system is left alone");
    updater.stop().await?;
    env.cleanup().await;
    Ok(())
}
