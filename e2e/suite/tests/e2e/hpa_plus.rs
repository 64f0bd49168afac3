//! hpa-plus end to end (issue 4 acceptance a–f), each test on its own plimsoll-sim:
//! (a) a CPU load step reaches the expected replicas within two periods; (b) 200 autoscalers
//! on 200 workloads, each at its own period, converge; (c) a failing metrics API sets
//! ScalingActive=False with a Warning Event and changes nothing; (d) two instances: the
//! leader's death hands over within the lease duration and no decision is written twice, and
//! a standby that takes over mid-stabilization continues the leader's window (d');
//! (e) native mode on a plain autoscaling/v2 HPA with annotations, and `--native-hpa-selector`
//! leaving KEDA's HPAs alone; (f) dryRun never writes; and KEP-5325's `podSelectionStrategy`
//! (a neighbour's pods matching the selector count with `LabelSelector`, not `OwnerReferences`).
//!
//! The service runs in-process through `run(config, token)`; workloads get their load from the
//! sim's workload model. Tests poll with `eventually` and generous deadlines.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus;
use plimsoll_core::quantity::Quantity;
use plimsoll_e2e::{Env, Running, eventually};
use plimsoll_runtime::metrics_api::FixedExternalMetrics;
use plimsoll_sim::{Fault, LoadProfile, LoadSpec, SimConfig};
use serde_json::json;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const WITHIN: Duration = Duration::from_secs(60);
const EVERY: Duration = Duration::from_millis(250);

/// Flags for an in-process instance: short periods, admin on an ephemeral port.
fn config(env: &Env, extra: &[&str]) -> plimsoll_hpa_plus::Config {
    plimsoll_e2e::hpa_plus_config(env, extra)
}

/// Runs an instance until it is stopped.
fn start(config: plimsoll_hpa_plus::Config) -> Running<()> {
    plimsoll_e2e::spawn_hpa_plus(config)
}

/// An HPA+ on Deployment `target` with `spec` merged over the required fields.
fn hpa_plus(name: &str, target: &str, spec: &serde_json::Value) -> HorizontalPodAutoscalerPlus {
    let base = json!({
        "minReplicas": 1,
        "maxReplicas": 10,
    });
    plimsoll_e2e::hpa_plus_fixture(name, target, &base, spec).expect("hpa-plus fixture")
}

/// A Pods metric: average `requests_per_second` per pod.
fn rps_per_pod(average: &str) -> serde_json::Value {
    json!([{"type": "Pods", "pods": {
        "metric": {"name": "requests_per_second"},
        "target": {"type": "AverageValue", "averageValue": average}}}])
}

fn constant(value: f64) -> LoadSpec {
    LoadSpec {
        profile: LoadProfile::Constant { value },
        ..LoadSpec::default()
    }
}

/// A Deployment of `replicas` pods labelled `app=<name>`, each requesting `cpu`.
async fn create_deployment(env: &Env, name: &str, replicas: i32, cpu: &str) -> anyhow::Result<()> {
    plimsoll_e2e::create_deployment(env, name, replicas, cpu, "64Mi").await
}

async fn wait_ready(env: &Env, name: &str, replicas: i32, within: Duration) -> anyhow::Result<()> {
    plimsoll_e2e::wait_deployment_ready(env, name, replicas, within).await
}

async fn spec_replicas(env: &Env, name: &str) -> anyhow::Result<i32> {
    plimsoll_e2e::deployment_replicas(env, name).await
}

async fn wait_replicas(
    env: &Env,
    name: &str,
    replicas: i32,
    within: Duration,
) -> anyhow::Result<()> {
    eventually(
        &format!("{name} scaled to {replicas}"),
        within,
        EVERY,
        || async move { Ok((spec_replicas(env, name).await? == replicas).then_some(())) },
    )
    .await
}

/// Scale writes by hpa-plus on `name` so far (from the sim's audit log).
fn scale_writes(env: &Env, name: &str) -> anyhow::Result<usize> {
    env.scale_writes("hpa-plus", name)
        .context("needs the sim's audit log")
}

async fn plus_status(
    env: &Env,
    name: &str,
) -> anyhow::Result<Option<plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlusStatus>> {
    Ok(env
        .api::<HorizontalPodAutoscalerPlus>()
        .get(name)
        .await?
        .status)
}

/// (a) A load step on a CPU-utilization HPA+ reaches the expected replicas within two periods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the workload model's CPU load and the audit log"
)]
async fn a_cpu_load_step_reaches_the_expected_replicas_within_two_periods() -> anyhow::Result<()> {
    let env = Env::start("hpa-plus-cpu-step").await?;
    let sim = env.sim()?;
    create_deployment(&env, "web", 1, "100m").await?;
    wait_ready(&env, "web", 1, WITHIN).await?;
    // 40 units → 45m of 100m requested: 45 % against a 50 % target is inside the tolerance.
    sim.set_load(&env.namespace, "deployments", "web", constant(40.0));
    let service = start(config(&env, &[]));
    let spec = json!({
        "syncPeriodSeconds": 2,
        "metrics": [{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 50}}}],
    });
    env.api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), &hpa_plus("web", "web", &spec))
        .await?;
    eventually("the first decision is in status", WITHIN, EVERY, || async {
        Ok(plus_status(&env, "web")
            .await?
            .and_then(|s| s.last_decision)
            .map(|_| ()))
    })
    .await?;
    assert_eq!(
        spec_replicas(&env, "web").await?,
        1,
        "no change inside the tolerance"
    );

    // Step to 180 units: 185m on one pod = 370 % of the 50 % target → ceil(3.7) = 4 replicas;
    // on 4 pods 200m / 400m = 50 %, so 4 is stable (and within upstream's max(2×, 4) limit).
    sim.set_load(&env.namespace, "deployments", "web", constant(180.0));
    let stepped = Instant::now();
    wait_replicas(&env, "web", 4, WITHIN).await?;
    let took = stepped.elapsed();
    assert_eq!(scale_writes(&env, "web")?, 1, "one decision, one write");
    // Two periods of 2 s plus the sim's metric tick and a loaded machine's scheduling slack.
    assert!(took < Duration::from_secs(4 + 10), "took {took:?}");
    wait_ready(&env, "web", 4, WITHIN).await?;
    let status = plus_status(&env, "web").await?.context("status")?;
    assert_eq!(status.reference.as_deref(), Some("Deployment/web"));
    assert!(status.targets_summary.is_some_and(|t| t.contains('%')));

    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// (b) 200 HPA+ objects on 200 workloads, each with its own period, all converge.
///
/// The sim's workload model is off here: with 200 Deployments it spends minutes of a loaded
/// 2-core machine bringing up pods, which tests the sim, not hpa-plus. The metric is External
/// (from an in-memory metrics source: 30 against an average of 15 → 2 replicas), so every
/// evaluation still reads the scale subresource, decides, writes the scale once and status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the audit log (each object scaled exactly once)"
)]
async fn two_hundred_objects_each_at_its_own_period_converge() -> anyhow::Result<()> {
    const N: usize = 200;
    let env = Env::start_with(
        "hpa-plus-200",
        SimConfig {
            workload_model: false,
            ..SimConfig::default()
        },
    )
    .await?;
    // Each object's scale writes are counted in the sim's audit log.
    env.sim()?;
    for i in 0..N {
        let name = format!("w{i:03}");
        create_deployment(&env, &name, 1, "10m").await?;
        let period = 1 + (i % 5) as i32;
        let spec = json!({"syncPeriodSeconds": period, "metrics": [{"type": "External",
            "external": {"metric": {"name": "queue"},
                "target": {"type": "AverageValue", "averageValue": "15"}}}]});
        env.api::<HorizontalPodAutoscalerPlus>()
            .create(&PostParams::default(), &hpa_plus(&name, &name, &spec))
            .await?;
    }
    let hooks = plimsoll_hpa_plus::Hooks {
        admin_address: None,
        metrics_source: Some(Arc::new(FixedExternalMetrics::new(Quantity::from_units(
            30,
        )))),
    };
    let config = config(&env, &[]);
    let service = Running::spawn("hpa-plus", |token| {
        plimsoll_hpa_plus::run_with(config, token, hooks)
    });
    let api = env.api::<Deployment>();
    eventually(
        "all 200 workloads at 2 replicas",
        Duration::from_secs(180),
        Duration::from_secs(1),
        || {
            let api = api.clone();
            async move {
                let list = api.list(&ListParams::default()).await?;
                let done = list
                    .items
                    .iter()
                    .filter(|d| d.spec.as_ref().and_then(|s| s.replicas) == Some(2))
                    .count();
                Ok((done == N).then_some(()))
            }
        },
    )
    .await?;
    // Every object reports the converged state in its status.
    let plus = env.api::<HorizontalPodAutoscalerPlus>();
    eventually("200 statuses at 2 of 2", WITHIN, EVERY, || {
        let plus = plus.clone();
        async move {
            let list = plus.list(&ListParams::default()).await?;
            let done = list
                .items
                .iter()
                .filter(|h| {
                    h.status
                        .as_ref()
                        .is_some_and(|s| s.desired_replicas == 2 && s.current_replicas == 2)
                })
                .count();
            Ok((done == N).then_some(()))
        }
    })
    .await?;
    // Each object was scaled exactly once.
    for i in [0, 57, 199] {
        assert_eq!(scale_writes(&env, &format!("w{i:03}"))?, 1);
    }
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// (c) A failing metrics API: ScalingActive=False, a Warning Event, nothing scaled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: fault injection on the metrics API and the workload model's load"
)]
async fn a_failing_metrics_api_sets_scaling_active_false_and_changes_nothing() -> anyhow::Result<()>
{
    let env = Env::start("hpa-plus-failing").await?;
    let sim = env.sim()?;
    create_deployment(&env, "web", 2, "100m").await?;
    wait_ready(&env, "web", 2, WITHIN).await?;
    sim.set_load(&env.namespace, "deployments", "web", constant(300.0));
    sim.add_fault(Fault {
        verb: "get".into(),
        resource: "custom.metrics.k8s.io".into(),
        error_rate: 1.0,
        status: Some(503),
        ..Fault::default()
    });
    let service = start(config(&env, &[]));
    let spec = json!({"syncPeriodSeconds": 1, "metrics": rps_per_pod("10")});
    env.api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), &hpa_plus("web", "web", &spec))
        .await?;
    let condition = eventually("ScalingActive=False", WITHIN, EVERY, || async {
        let status = plus_status(&env, "web").await?;
        Ok(status.and_then(|s| {
            s.conditions
                .into_iter()
                .find(|c| c.type_ == "ScalingActive" && c.status == "False")
        }))
    })
    .await?;
    assert_eq!(condition.reason.as_deref(), Some("FailedGetPodsMetric"));
    let events = env.api::<Event>();
    eventually("a Warning Event", WITHIN, EVERY, || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await?;
            Ok(list
                .items
                .into_iter()
                .find(|e| {
                    e.type_.as_deref() == Some("Warning")
                        && e.reason.as_deref() == Some("FailedGetPodsMetric")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("web")
                })
                .map(|_| ()))
        }
    })
    .await?;
    assert_eq!(spec_replicas(&env, "web").await?, 2);
    assert_eq!(scale_writes(&env, "web")?, 0);
    // Once the API recovers, the same object scales (300 / 10 = 30 → capped at 10).
    sim.clear_faults();
    wait_replicas(&env, "web", 4, WITHIN).await?;
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// An instance on its own runtime, so that dropping it is a crash (no Lease release).
struct Crashable {
    runtime: Option<tokio::runtime::Runtime>,
}

impl Crashable {
    fn start(config: plimsoll_hpa_plus::Config) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.spawn(async move {
            let _ = plimsoll_hpa_plus::run(config, CancellationToken::new()).await;
        });
        Self {
            runtime: Some(runtime),
        }
    }

    fn crash(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for Crashable {
    fn drop(&mut self) {
        self.crash();
    }
}

async fn holder(env: &Env) -> anyhow::Result<Option<String>> {
    let lease = env.api::<Lease>().get_opt("plimsoll-hpa-plus").await?;
    Ok(lease
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty()))
}

/// (d) Two instances: only the leader acts; its death hands over within the lease duration;
/// no decision is written twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the workload model's request load and the audit log"
)]
async fn the_leaders_death_hands_over_within_the_lease_duration() -> anyhow::Result<()> {
    let env = Env::start("hpa-plus-leader").await?;
    let sim = env.sim()?;
    let lease_ns = format!("--lease-namespace={}", env.namespace);
    let election = [
        "--leader-elect=true",
        lease_ns.as_str(),
        "--lease-duration=4s",
        "--renew-deadline=3s",
        "--retry-period=500ms",
    ];
    let mut a_config = config(&env, &election);
    a_config.identity = Some("instance-a".into());
    let mut b_config = config(&env, &election);
    b_config.identity = Some("instance-b".into());
    create_deployment(&env, "web", 1, "100m").await?;
    wait_ready(&env, "web", 1, WITHIN).await?;
    sim.set_load(&env.namespace, "deployments", "web", constant(30.0));

    let mut a = Crashable::start(a_config);
    eventually("instance-a leads", WITHIN, EVERY, || async {
        Ok(holder(&env)
            .await?
            .filter(|h| h == "instance-a")
            .map(|_| ()))
    })
    .await?;
    let b = start(b_config);
    let spec = json!({"syncPeriodSeconds": 1, "metrics": rps_per_pod("10")});
    env.api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), &hpa_plus("web", "web", &spec))
        .await?;
    wait_replicas(&env, "web", 3, WITHIN).await?;
    wait_ready(&env, "web", 3, WITHIN).await?;
    assert_eq!(holder(&env).await?.as_deref(), Some("instance-a"));

    a.crash();
    let crashed = Instant::now();
    eventually(
        "instance-b takes over",
        WITHIN,
        Duration::from_millis(100),
        || async {
            Ok(holder(&env)
                .await?
                .filter(|h| h == "instance-b")
                .map(|_| ()))
        },
    )
    .await?;
    let handover = crashed.elapsed();
    // Lease duration 4 s, plus one retry period and scheduling slack on a loaded machine.
    assert!(
        handover < Duration::from_secs(4 + 6),
        "handover took {handover:?}"
    );

    sim.set_load(&env.namespace, "deployments", "web", constant(50.0));
    // 50 / 3 pods against 10 per pod → 5 (6 when a new pod's metrics lag: either is one decision).
    eventually("b scales web up", WITHIN, EVERY, || async {
        Ok((spec_replicas(&env, "web").await? >= 5).then_some(()))
    })
    .await?;
    // 1 → 3 by a, then one write by b: one write per decision, never repeated.
    eventually(
        "two scale writes",
        Duration::from_secs(5),
        EVERY,
        || async { Ok((scale_writes(&env, "web")? == 2).then_some(())) },
    )
    .await?;
    let _ = b.stop().await;
    drop(a);
    env.cleanup().await;
    Ok(())
}

/// The last recommendation of at least `replicas` in an HPA+'s decision memory.
async fn last_recommendation_of_at_least(
    env: &Env,
    name: &str,
    replicas: i32,
) -> anyhow::Result<Option<jiff::Timestamp>> {
    let memory = plus_status(env, name).await?.and_then(|s| s.memory);
    let history = memory
        .as_ref()
        .map(plimsoll_core::horizontal::memory::restore)
        .unwrap_or_default();
    Ok(history
        .recommendations
        .iter()
        .filter(|r| r.replicas >= replicas)
        .map(|r| r.at)
        .max())
}

/// (d') A standby that takes over mid-stabilization continues the leader's decisions: it reads
/// the decision memory from `status.memory` and scales down no earlier than the stabilization
/// window after the last high recommendation, and not a handover later either (as a standby
/// that only seeded its history with the current replicas would).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the workload model's request load and the audit log"
)]
async fn a_standby_taking_over_mid_stabilization_scales_down_when_the_leader_would_have()
-> anyhow::Result<()> {
    const WINDOW: i64 = 40;
    let _serial = plimsoll_e2e::serial().await;
    let env = Env::start("hpa-plus-memory").await?;
    let sim = env.sim()?;
    let lease_ns = format!("--lease-namespace={}", env.namespace);
    let election = [
        "--leader-elect=true",
        lease_ns.as_str(),
        "--lease-duration=4s",
        "--renew-deadline=3s",
        "--retry-period=500ms",
    ];
    let mut a_config = config(&env, &election);
    a_config.identity = Some("instance-a".into());
    let mut b_config = config(&env, &election);
    b_config.identity = Some("instance-b".into());
    create_deployment(&env, "web", 1, "100m").await?;
    wait_ready(&env, "web", 1, WITHIN).await?;
    sim.set_load(&env.namespace, "deployments", "web", constant(30.0));

    let mut a = Crashable::start(a_config);
    eventually("instance-a leads", WITHIN, EVERY, || async {
        Ok(holder(&env)
            .await?
            .filter(|h| h == "instance-a")
            .map(|_| ()))
    })
    .await?;
    let b = start(b_config);
    let spec = json!({
        "syncPeriodSeconds": 1,
        "metrics": rps_per_pod("10"),
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": WINDOW}},
    });
    env.api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), &hpa_plus("web", "web", &spec))
        .await?;
    wait_replicas(&env, "web", 3, WITHIN).await?;
    wait_ready(&env, "web", 3, WITHIN).await?;
    let writes_up = scale_writes(&env, "web")?;

    // Load falls: 5 / 3 pods against 10 per pod recommends 1; the window holds 3.
    sim.set_load(&env.namespace, "deployments", "web", constant(5.0));
    eventually("a recommends 1 and keeps 3", WITHIN, EVERY, || async {
        let status = plus_status(&env, "web").await?;
        let low = status
            .and_then(|s| s.last_decision)
            .is_some_and(|d| d.recommended_replicas == Some(1) && d.desired_replicas == 3);
        Ok(low.then_some(()))
    })
    .await?;
    let last_high = last_recommendation_of_at_least(&env, "web", 3)
        .await?
        .context("the memory holds the high recommendation")?;
    // Mid-stabilization: far enough in that a standby seeding its history at takeover would
    // scale down a handover (at least 4 s) later than the leader would have.
    let crash_at = last_high + jiff::SignedDuration::from_secs(10);
    while jiff::Timestamp::now() < crash_at {
        tokio::time::sleep(EVERY).await;
    }
    assert_eq!(holder(&env).await?.as_deref(), Some("instance-a"));
    assert_eq!(spec_replicas(&env, "web").await?, 3, "still stabilizing");
    a.crash();
    eventually("instance-b takes over", WITHIN, EVERY, || async {
        Ok(holder(&env)
            .await?
            .filter(|h| h == "instance-b")
            .map(|_| ()))
    })
    .await?;

    wait_replicas(&env, "web", 1, Duration::from_secs(120)).await?;
    // The scale is written before the status: wait for the status of that decision.
    let scaled_down = eventually(
        "the status records the scale-down",
        WITHIN,
        EVERY,
        || async {
            Ok(plus_status(&env, "web")
                .await?
                .filter(|s| s.desired_replicas == 1)
                .and_then(|s| s.last_scale_time))
        },
    )
    .await?
    .0;
    let after_last_high = scaled_down.duration_since(last_high).as_secs_f64();
    // lastScaleTime is written to the second: allow 1 s below; above, a few periods of slack.
    assert!(
        after_last_high >= (WINDOW - 1) as f64,
        "scaled down {after_last_high:.1} s after the last high recommendation, window {WINDOW} s"
    );
    assert!(
        after_last_high < (WINDOW + 8) as f64,
        "scaled down {after_last_high:.1} s after the last high recommendation: the standby did \
         not continue the leader's window"
    );
    assert_eq!(
        scale_writes(&env, "web")?,
        writes_up + 1,
        "one scale-down, 3 -> 1"
    );
    let _ = b.stop().await;
    drop(a);
    env.cleanup().await;
    Ok(())
}

/// (e) Native mode: a plain autoscaling/v2 HPA with Plimsoll annotations is reconciled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the workload model's request load and the audit log"
)]
async fn native_mode_reconciles_a_plain_hpa_with_annotations() -> anyhow::Result<()> {
    let env = Env::start("hpa-plus-native").await?;
    let sim = env.sim()?;
    create_deployment(&env, "web", 1, "100m").await?;
    create_deployment(&env, "off", 1, "100m").await?;
    wait_ready(&env, "web", 1, WITHIN).await?;
    wait_ready(&env, "off", 1, WITHIN).await?;
    sim.set_load(&env.namespace, "deployments", "web", constant(30.0));
    sim.set_load(&env.namespace, "deployments", "off", constant(30.0));
    let service = start(config(&env, &["--native-hpa", "--sync-period=30s"]));
    let hpa = |name: &str, annotations: serde_json::Value| -> HorizontalPodAutoscaler {
        serde_json::from_value(json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                "minReplicas": 1, "maxReplicas": 10,
                "metrics": rps_per_pod("10"),
            }
        }))
        .expect("hpa fixture")
    };
    let api = env.api::<HorizontalPodAutoscaler>();
    // The resync-period annotation overrides the 30 s controller default.
    api.create(
        &PostParams::default(),
        &hpa("web", json!({"plimsoll.dev/resync-period": "1s"})),
    )
    .await?;
    api.create(
        &PostParams::default(),
        &hpa("off", json!({"platform.stke/autoscale-disabled": "true"})),
    )
    .await?;
    wait_replicas(&env, "web", 3, WITHIN).await?;
    let status = eventually("native status written", WITHIN, EVERY, || {
        let api = api.clone();
        async move {
            let h = api.get("off").await?;
            Ok(h.status.filter(|s| s.desired_replicas == 3))
        }
    })
    .await?;
    assert_eq!(status.current_replicas, Some(1));
    assert_eq!(
        spec_replicas(&env, "off").await?,
        1,
        "autoscale-disabled never writes"
    );
    assert_eq!(scale_writes(&env, "off")?, 0);
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// Writes by hpa-plus (any resource, any subresource) on objects named `name`, from the audit
/// log: the HPA's status and annotations and its Deployment's scale share the name.
fn writes_on(env: &Env, name: &str) -> anyhow::Result<usize> {
    let audit = env.audit().context("needs the sim's audit log")?;
    Ok(audit
        .iter()
        .filter(|e| e.name == name)
        .filter(|e| {
            e.field_manager.as_deref() == Some("hpa-plus") || e.user_agent.starts_with("hpa-plus")
        })
        .count())
}

/// Native mode with the default `--native-hpa-selector`: an HPA labelled as KEDA labels the
/// HPAs it generates is left alone (never written, its workload never scaled) while a plain one
/// is scaled; a plain one that KEDA adopts (it gains the label) is released: no write after, its
/// status left as last written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the workload model's request load and the audit log"
)]
async fn native_mode_leaves_kedas_hpas_alone_and_releases_one_that_stops_matching()
-> anyhow::Result<()> {
    let env = Env::start("hpa-plus-native-keda").await?;
    let sim = env.sim()?;
    for name in ["web", "orders"] {
        create_deployment(&env, name, 1, "100m").await?;
        wait_ready(&env, name, 1, WITHIN).await?;
        sim.set_load(&env.namespace, "deployments", name, constant(30.0));
    }
    let service = start(config(&env, &["--native-hpa", "--sync-period=1s"]));
    let hpa = |name: &str, labels: serde_json::Value| -> HorizontalPodAutoscaler {
        serde_json::from_value(json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                "minReplicas": 1, "maxReplicas": 10,
                "metrics": rps_per_pod("10"),
            }
        }))
        .expect("hpa fixture")
    };
    let api = env.api::<HorizontalPodAutoscaler>();
    // The labels KEDA gives the HPA of ScaledObject `orders` (kedacore/keda
    // controllers/keda/hpa.go), here with a Helm-installed ScaledObject's managed-by copied over
    // KEDA's own: the ScaledObject's scaledobject.keda.sh/name still marks it.
    api.create(
        &PostParams::default(),
        &hpa(
            "orders",
            json!({"app.kubernetes.io/name": "keda-hpa-orders",
                   "app.kubernetes.io/part-of": "orders",
                   "app.kubernetes.io/managed-by": "Helm",
                   "scaledobject.keda.sh/name": "orders"}),
        ),
    )
    .await?;
    api.create(&PostParams::default(), &hpa("web", json!({"app": "web"})))
        .await?;
    wait_replicas(&env, "web", 3, WITHIN).await?;
    let web = eventually("web's status written", WITHIN, EVERY, || {
        let api = api.clone();
        async move {
            Ok(api
                .get("web")
                .await?
                .status
                .filter(|s| s.desired_replicas == 3))
        }
    })
    .await?;
    assert_eq!(web.desired_replicas, 3);
    // Several periods of orders at the same load as web: never evaluated.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(spec_replicas(&env, "orders").await?, 1);
    assert_eq!(writes_on(&env, "orders")?, 0, "KEDA's HPA is never written");
    assert!(api.get("orders").await?.status.is_none());

    // KEDA adopts web (transfer-hpa-ownership labels it): it leaves hpa-plus's watch.
    let patch = json!({"metadata": {"labels": {"scaledobject.keda.sh/name": "web"}}});
    api.patch(
        "web",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await?;
    // Generous: the watch delivers the change within milliseconds in-process.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = writes_on(&env, "web")?;
    // Twice the load: an evaluation would scale web to 6 within a period or two.
    sim.set_load(&env.namespace, "deployments", "web", constant(60.0));
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        writes_on(&env, "web")?,
        before,
        "no write after the release"
    );
    assert_eq!(spec_replicas(&env, "web").await?, 3);
    let status = api.get("web").await?.status.context("status stays")?;
    assert_eq!(status.desired_replicas, 3, "left as last written");
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// A native HPA carrying a hostile decision memory (instants that would overflow the arithmetic
/// that compares them): the memory is ignored whole, the HPA says so in the
/// `StoredStateIgnored` condition and a Warning Event (naming the annotation and the rule,
/// not repeating its text), and the controller writes a memory of its own in its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_decision_memory_is_ignored_and_reported() -> anyhow::Result<()> {
    let env = Env::start("hpa-plus-stored-state").await?;
    create_deployment(&env, "web", 1, "100m").await?;
    let service = start(config(&env, &["--native-hpa"]));
    let hostile = json!({"base": "2026-01-01T00:00:00Z",
                         "scaleUps": [i64::MAX, 1, i64::MAX, 1]})
    .to_string();
    let hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "annotations": {
            "plimsoll.dev/decision-memory": hostile,
            "plimsoll.dev/resync-period": "1s",
        }},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 10,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}],
        }
    }))?;
    let api = env.api::<HorizontalPodAutoscaler>();
    api.create(&PostParams::default(), &hpa).await?;
    let condition = eventually("StoredStateIgnored=True", WITHIN, EVERY, || {
        let api = api.clone();
        async move {
            let h = api.get("web").await?;
            Ok(h.status
                .and_then(|s| s.conditions)
                .into_iter()
                .flatten()
                .find(|c| c.type_ == "StoredStateIgnored" && c.status == "True"))
        }
    })
    .await?;
    let message = condition.message.unwrap_or_default();
    assert_eq!(condition.reason.as_deref(), Some("InvalidStoredState"));
    assert_eq!(
        message,
        "annotation plimsoll.dev/decision-memory was ignored: scaleUps has an offset out of \
         order or a time out of range; the controller started that history afresh"
    );
    let note = eventually("StoredStateIgnored event", WITHIN, EVERY, || async {
        let list = env.api::<Event>().list(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("StoredStateIgnored"))
            .and_then(|e| e.note))
    })
    .await?;
    assert_eq!(note, message);
    // The controller's own memory replaces it, and reads back.
    eventually("a readable memory", WITHIN, EVERY, || {
        let api = api.clone();
        async move {
            let h = api.get("web").await?;
            let annotations = h.metadata.annotations.unwrap_or_default();
            Ok(
                plimsoll_core::horizontal::memory::from_annotations(&annotations)
                    .ok()
                    .flatten()
                    .filter(|m| plimsoll_core::horizontal::memory::try_restore(m).is_ok()),
            )
        }
    })
    .await?;
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// (f) dryRun computes and reports, and never writes the scale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the workload model's request load and the audit log"
)]
async fn dry_run_never_writes() -> anyhow::Result<()> {
    let env = Env::start("hpa-plus-dry-run").await?;
    let sim = env.sim()?;
    create_deployment(&env, "web", 1, "100m").await?;
    wait_ready(&env, "web", 1, WITHIN).await?;
    sim.set_load(&env.namespace, "deployments", "web", constant(30.0));
    let service = start(config(&env, &[]));
    let spec = json!({"syncPeriodSeconds": 1, "dryRun": true, "metrics": rps_per_pod("10")});
    env.api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), &hpa_plus("web", "web", &spec))
        .await?;
    let decision = eventually("a dry-run decision of 3", WITHIN, EVERY, || async {
        let status = plus_status(&env, "web").await?;
        Ok(status
            .and_then(|s| s.last_decision)
            .filter(|d| d.desired_replicas == 3))
    })
    .await?;
    assert_eq!(decision.limited_by.as_deref(), Some("dryRun"));
    // A negative property needs time to pass: several more 1 s periods.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(spec_replicas(&env, "web").await?, 1);
    assert_eq!(scale_writes(&env, "web")?, 0);
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// The `WebApp` custom resource: a scale subresource on `.spec.replicas` / `.status.replicas`
/// with its pods' selector at `.status.selector`, and a status subresource, like `CloneSet`
/// or Argo `Rollout`.
async fn install_webapp_crd(env: &Env) -> anyhow::Result<kube::api::ApiResource> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
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
    kube::Api::<CustomResourceDefinition>::all(env.client.clone())
        .create(&PostParams::default(), &crd)
        .await?;
    Ok(kube::api::ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "WebApp".into(),
        plural: "webapps".into(),
    })
}

/// Creates `WebApp` `name` at 2 replicas and writes `status` (plus `selector`) to its status.
async fn create_webapp(
    api: &kube::Api<kube::api::DynamicObject>,
    name: &str,
    mut status: serde_json::Value,
) -> anyhow::Result<()> {
    let app: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "WebApp",
        "metadata": {"name": name}, "spec": {"replicas": 2}
    }))?;
    api.create(&PostParams::default(), &app).await?;
    status["selector"] = json!(format!("app={name}"));
    api.patch_status(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({ "status": status })),
    )
    .await?;
    Ok(())
}

async fn webapp_replicas(
    api: &kube::Api<kube::api::DynamicObject>,
    name: &str,
) -> anyhow::Result<i64> {
    let app = api.get(name).await?;
    Ok(app.data["spec"]["replicas"].as_i64().unwrap_or_default())
}

/// The reason of the `PausedForRollout` condition of HPA+ `name`, when set.
async fn rollout_reason(env: &Env, name: &str) -> anyhow::Result<Option<String>> {
    Ok(plus_status(env, name).await?.and_then(|s| {
        s.conditions
            .into_iter()
            .find(|c| c.type_ == "PausedForRollout")
            .and_then(|c| c.reason)
    }))
}

/// pauseDuringRollout on a custom resource: held while its status says a rollout is under way
/// (`updatedReplicas` below `spec.replicas`), scaled once it settles; a custom resource whose
/// status has no `observedGeneration` is reported as `RolloutStateUnknown` and still scaled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the audit log; installs a cluster-wide CRD"
)]
async fn pause_during_rollout_holds_a_custom_resource_while_it_rolls_out() -> anyhow::Result<()> {
    let env = Env::start_with(
        "hpa-plus-rollout-crd",
        SimConfig {
            workload_model: false,
            ..SimConfig::default()
        },
    )
    .await?;
    env.sim()?;
    let resource = install_webapp_crd(&env).await?;
    let apps: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(env.client.clone(), &env.namespace, &resource);
    // A new revision on 1 of 2 replicas.
    create_webapp(
        &apps,
        "rolling",
        json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 1, "readyReplicas": 2}),
    )
    .await?;
    create_webapp(&apps, "odd", json!({"replicas": 2, "readyReplicas": 2})).await?;
    // 30 against an average of 5 wants 6 replicas.
    let spec = json!({"syncPeriodSeconds": 1, "pauseDuringRollout": true,
        "metrics": [{"type": "External", "external": {"metric": {"name": "queue"},
            "target": {"type": "AverageValue", "averageValue": "5"}}}]});
    for name in ["rolling", "odd"] {
        let mut plus = hpa_plus(name, name, &spec);
        plus.spec.scale_target_ref.api_version = Some("example.com/v1".into());
        plus.spec.scale_target_ref.kind = "WebApp".into();
        env.api::<HorizontalPodAutoscalerPlus>()
            .create(&PostParams::default(), &plus)
            .await?;
    }
    let hooks = plimsoll_hpa_plus::Hooks {
        admin_address: None,
        metrics_source: Some(Arc::new(FixedExternalMetrics::new(Quantity::from_units(
            30,
        )))),
    };
    let config = config(&env, &[]);
    let service = Running::spawn("hpa-plus", |token| {
        plimsoll_hpa_plus::run_with(config, token, hooks)
    });

    let held = eventually("rolling is held for its rollout", WITHIN, EVERY, || async {
        Ok(plus_status(&env, "rolling")
            .await?
            .and_then(|s| s.last_decision)
            .filter(|d| d.limited_by.as_deref() == Some("rollout")))
    })
    .await?;
    assert_eq!(held.desired_replicas, 2, "{held:?}");
    assert_eq!(
        rollout_reason(&env, "rolling").await?.as_deref(),
        Some("RolloutInProgress")
    );
    // The unknown shape is said, and does not hold scaling.
    eventually("odd is reported unknown", WITHIN, EVERY, || async {
        Ok(rollout_reason(&env, "odd")
            .await?
            .filter(|r| r == "RolloutStateUnknown"))
    })
    .await?;
    eventually("odd scales up", WITHIN, EVERY, || async {
        Ok((webapp_replicas(&apps, "odd").await? > 2).then_some(()))
    })
    .await?;
    // Several more periods: still held.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(webapp_replicas(&apps, "rolling").await?, 2);
    assert_eq!(scale_writes(&env, "rolling")?, 0);

    // The rollout completes: the next evaluation scales.
    apps.patch_status(
        "rolling",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"status": {"updatedReplicas": 2}})),
    )
    .await?;
    eventually("rolling scales up once settled", WITHIN, EVERY, || async {
        Ok((webapp_replicas(&apps, "rolling").await? > 2).then_some(()))
    })
    .await?;
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// Evaluations read a Deployment's scale from hpa-plus's watch, not from `/scale`: through a
/// wiretap, steady evaluations of an HPA+ on a Deployment send no `GET …/scale`, a replica count
/// changed by someone else still reaches the status, and an HPA+ on a custom resource (not
/// watched) reads its `/scale` on every evaluation as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the wiretap on its plain HTTP listener; installs a CRD"
)]
async fn evaluations_read_a_deployments_scale_from_the_watch() -> anyhow::Result<()> {
    let env = Env::start_with(
        "hpa-plus-watched-scale",
        SimConfig {
            workload_model: false,
            ..SimConfig::default()
        },
    )
    .await?;
    let (tap, kubeconfig) = env.tap().await?;
    create_deployment(&env, "web", 2, "10m").await?;
    let webapps = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        env.client.clone(),
        &env.namespace,
        &install_webapp_crd(&env).await?,
    );
    create_webapp(&webapps, "shop", json!({"replicas": 2})).await?;
    // 20 against an average of 10: 2 replicas, what both targets have.
    let spec = json!({"syncPeriodSeconds": 1, "metrics": [{"type": "External",
        "external": {"metric": {"name": "queue"},
            "target": {"type": "AverageValue", "averageValue": "10"}}}]});
    let mut on_webapp = hpa_plus("shop", "shop", &spec);
    on_webapp.spec.scale_target_ref.api_version = Some("example.com/v1".into());
    on_webapp.spec.scale_target_ref.kind = "WebApp".into();
    let plus = env.api::<HorizontalPodAutoscalerPlus>();
    for object in [hpa_plus("web", "web", &spec), on_webapp] {
        plus.create(&PostParams::default(), &object).await?;
    }
    let hooks = plimsoll_hpa_plus::Hooks {
        admin_address: None,
        metrics_source: Some(Arc::new(FixedExternalMetrics::new(Quantity::from_units(
            20,
        )))),
    };
    let kubeconfig_flag = format!("--kubeconfig={}", kubeconfig.display());
    let config = config(&env, &[&kubeconfig_flag]);
    let service = Running::spawn("hpa-plus", |token| {
        plimsoll_hpa_plus::run_with(config, token, hooks)
    });

    let scale_reads = |name: &str| {
        let path = format!("/{name}/scale");
        tap.seen()
            .iter()
            .filter(|s| s.method == "GET" && s.path.ends_with(&path))
            .count()
    };
    // An evaluation before the watch has listed reads /scale, as it must; after that, three
    // more evaluations of each at a 1 s period read only the WebApp's.
    eventually("web evaluated", WITHIN, EVERY, || async {
        Ok(plus_status(&env, "web")
            .await?
            .and_then(|s| s.last_decision)
            .map(|_| ()))
    })
    .await?;
    let (web_before, shop_before) = (scale_reads("web"), scale_reads("shop"));
    eventually(
        "three more reads of the WebApp's /scale",
        WITHIN,
        EVERY,
        || async { Ok((scale_reads("shop") >= shop_before + 3).then_some(())) },
    )
    .await?;
    assert_eq!(
        scale_reads("web"),
        web_before,
        "the Deployment's scale comes from the watch"
    );
    let status = plus_status(&env, "web").await?.context("web's status")?;
    assert_eq!((status.current_replicas, status.desired_replicas), (2, 2));

    // Someone else scales the Deployment: the watch brings the new count to the next
    // evaluation, which scales it back to the 2 the metric asks for (every recommendation in the
    // stabilization window was 2).
    env.api::<Deployment>()
        .patch_scale(
            "web",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await?;
    wait_replicas(&env, "web", 2, WITHIN).await?;
    assert_eq!(scale_writes(&env, "web")?, 1, "one write, from 3 back to 2");
    assert_eq!(
        scale_reads("web"),
        web_before,
        "still no read of the Deployment's /scale"
    );

    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// A Deployment `name` whose pods also carry `app=<shares>`: the label selector of
/// Deployment `shares` matches them, its owner references do not (KEP-5325's motivation).
async fn create_intruder(env: &Env, name: &str, shares: &str, cpu: &str) -> anyhow::Result<()> {
    let labels = json!({"app": shares, "role": name});
    plimsoll_e2e::create_labelled_deployment(env, name, &labels, 1, (cpu, "64Mi")).await
}

/// KEP-5325 with `--pod-selection-strategy`: a busy second Deployment whose pods match the
/// target's label selector makes a `LabelSelector` HPA+ scale its idle target up (the pods are
/// over-counted), while `podSelectionStrategy: OwnerReferences` counts only the target's own pod
/// and leaves it at 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the workload model's CPU load and the audit log"
)]
async fn owner_references_count_only_the_targets_pods() -> anyhow::Result<()> {
    let env = Env::start("hpa-plus-owner-references").await?;
    let sim = env.sim()?;
    for (web, intruder) in [("web-labels", "busy-labels"), ("web-owners", "busy-owners")] {
        create_deployment(&env, web, 1, "100m").await?;
        create_intruder(&env, intruder, web, "100m").await?;
        wait_ready(&env, web, 1, WITHIN).await?;
        wait_ready(&env, intruder, 1, WITHIN).await?;
        // The target at 45 % of a 50 % target (inside the tolerance); its neighbour at 185 %.
        sim.set_load(&env.namespace, "deployments", web, constant(40.0));
        sim.set_load(&env.namespace, "deployments", intruder, constant(180.0));
    }
    let service = start(config(&env, &["--pod-selection-strategy"]));
    let cpu = json!([{"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": 50}}}]);
    for (web, strategy) in [
        ("web-labels", "LabelSelector"),
        ("web-owners", "OwnerReferences"),
    ] {
        let spec = json!({"syncPeriodSeconds": 2, "metrics": cpu,
            "podSelectionStrategy": strategy});
        env.api::<HorizontalPodAutoscalerPlus>()
            .create(&PostParams::default(), &hpa_plus(web, web, &spec))
            .await?;
    }
    // Label selection averages both pods: (45 + 185) / 2 = 115 % → more than one replica.
    eventually(
        "web-labels over-counts and scales up",
        WITHIN,
        EVERY,
        || async { Ok((spec_replicas(&env, "web-labels").await? > 1).then_some(())) },
    )
    .await?;
    // By then the owner-selected one has decided several times; give it three more periods.
    let decided = |name: &'static str| {
        let env = &env;
        async move {
            Ok::<_, anyhow::Error>(
                plus_status(env, name)
                    .await?
                    .and_then(|s| s.last_decision)
                    .is_some(),
            )
        }
    };
    eventually("web-owners has decided", WITHIN, EVERY, || async {
        Ok(decided("web-owners").await?.then_some(()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        spec_replicas(&env, "web-owners").await?,
        1,
        "only the target's own pod (45 %) counts"
    );
    assert_eq!(scale_writes(&env, "web-owners")?, 0);

    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// External metrics of one fixed value, except `explode`, whose read panics: a stand-in for a
/// bug that one object's values reach.
struct PanicsOnExplode(FixedExternalMetrics);

impl plimsoll_runtime::metrics_api::MetricsSource for PanicsOnExplode {
    fn pod_metrics<'a>(
        &'a self,
        namespace: &'a str,
        selector: &'a plimsoll_runtime::selector::Selector,
    ) -> futures::future::BoxFuture<
        'a,
        plimsoll_runtime::Result<Vec<plimsoll_runtime::metrics_api::PodMetrics>>,
    > {
        self.0.pod_metrics(namespace, selector)
    }

    fn pods_metric<'a>(
        &'a self,
        namespace: &'a str,
        metric: &'a str,
        selector: &'a plimsoll_runtime::selector::Selector,
        metric_selector: Option<&'a plimsoll_runtime::selector::Selector>,
    ) -> futures::future::BoxFuture<
        'a,
        plimsoll_runtime::Result<Vec<plimsoll_runtime::metrics_api::MetricValue>>,
    > {
        self.0
            .pods_metric(namespace, metric, selector, metric_selector)
    }

    fn object_metric<'a>(
        &'a self,
        namespace: &'a str,
        object: plimsoll_runtime::kinds::TargetRef<'a>,
        metric: &'a str,
        metric_selector: Option<&'a plimsoll_runtime::selector::Selector>,
    ) -> futures::future::BoxFuture<
        'a,
        plimsoll_runtime::Result<plimsoll_runtime::metrics_api::MetricValue>,
    > {
        self.0
            .object_metric(namespace, object, metric, metric_selector)
    }

    fn external_metric<'a>(
        &'a self,
        namespace: &'a str,
        metric: &'a str,
        metric_selector: Option<&'a plimsoll_runtime::selector::Selector>,
    ) -> futures::future::BoxFuture<
        'a,
        plimsoll_runtime::Result<Vec<plimsoll_runtime::metrics_api::ExternalMetricValue>>,
    > {
        assert_ne!(
            metric, "explode",
            "attempt to add with overflow (a stand-in)"
        );
        self.0.external_metric(namespace, metric, metric_selector)
    }
}

/// A panic in one object's evaluation fails that object only: the service stays up and goes
/// on evaluating the others (before, kube-runtime raised the panic in the controller's stream
/// and every autoscaler stopped).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs a metrics source injected into the service"
)]
async fn a_panic_evaluating_one_autoscaler_leaves_the_others_evaluated() -> anyhow::Result<()> {
    let env = Env::start_with(
        "hpa-plus-panic",
        SimConfig {
            workload_model: false,
            ..SimConfig::default()
        },
    )
    .await?;
    for (name, metric) in [("bomb", "explode"), ("calm", "queue")] {
        create_deployment(&env, name, 1, "10m").await?;
        let spec = json!({"syncPeriodSeconds": 1, "metrics": [{"type": "External",
            "external": {"metric": {"name": metric},
                "target": {"type": "AverageValue", "averageValue": "15"}}}]});
        env.api::<HorizontalPodAutoscalerPlus>()
            .create(&PostParams::default(), &hpa_plus(name, name, &spec))
            .await?;
    }
    let hooks = plimsoll_hpa_plus::Hooks {
        admin_address: None,
        metrics_source: Some(Arc::new(PanicsOnExplode(FixedExternalMetrics::new(
            Quantity::from_units(30),
        )))),
    };
    let config = config(&env, &[]);
    let service = Running::spawn("hpa-plus", |token| {
        plimsoll_hpa_plus::run_with(config, token, hooks)
    });
    wait_replicas(&env, "calm", 2, WITHIN).await?;
    // Seconds (and a panic of the bomb's evaluation every second) later, an edit of the calm
    // one is still acted on: 30 at 10 a pod needs 3.
    tokio::time::sleep(Duration::from_secs(4)).await;
    env.api::<HorizontalPodAutoscalerPlus>()
        .patch(
            "calm",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"metrics": [{"type": "External",
                "external": {"metric": {"name": "queue"},
                    "target": {"type": "AverageValue", "averageValue": "10"}}}]}})),
        )
        .await?;
    wait_replicas(&env, "calm", 3, WITHIN).await?;
    assert_eq!(
        spec_replicas(&env, "bomb").await?,
        1,
        "nothing done for the bomb"
    );
    service.stop().await??;
    env.cleanup().await;
    Ok(())
}
