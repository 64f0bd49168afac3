//! vpa-recommender end to end (issue 6 acceptance): the real service runs in-process with a
//! 1 s loop against plimsoll-sim, or a real cluster (with metrics-server) for the tests that do
//! not shape the load through the sim's workload model.
//!
//! * a steady 300m CPU workload gets a CPU target within one histogram bucket of 300m × 1.15;
//! * an OOM-killed container's memory target rises above its usage at the kill;
//! * a recommender restarted mid-run continues from its checkpoints (the target stays, the
//!   sample count keeps growing instead of starting over).

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, PostParams};
use plimsoll_core::api::vpa::{VerticalPodAutoscaler, VerticalPodAutoscalerCheckpoint};
use plimsoll_core::quantity;
use plimsoll_e2e::{Env, Running, eventually};
use plimsoll_sim::{LoadProfile, LoadSpec};
use plimsoll_vpa_recommender::{Config, run};
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(90);
const EVERY: Duration = Duration::from_millis(250);

fn config(env: &Env, extra: &[&str]) -> Config {
    env.recommender_config(extra).expect("flags parse")
}

type Recommender = Running<plimsoll_vpa_recommender::Result<()>>;

fn start(env: &Env) -> Recommender {
    start_with(env, &[])
}

fn start_with(env: &Env, extra: &[&str]) -> Recommender {
    let config = config(env, extra);
    Running::spawn("vpa-recommender", |token| run(config, token))
}

async fn deployment(env: &Env, name: &str, memory_limit: Option<&str>) -> anyhow::Result<()> {
    let mut resources = json!({"requests": {"cpu": "100m", "memory": "100Mi"}});
    if let Some(limit) = memory_limit {
        resources["limits"] = json!({"memory": limit});
    }
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "app", "image": "registry.k8s.io/pause:3.10", "resources": resources
                }]},
            },
        },
    }))?;
    env.api::<Deployment>()
        .create(&PostParams::default(), &d)
        .await?;
    let vpa: VerticalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "recommenders": [{"name": "plimsoll"}],
            "updatePolicy": {"updateMode": "Off"},
        },
    }))?;
    env.api::<VerticalPodAutoscaler>()
        .create(&PostParams::default(), &vpa)
        .await?;
    Ok(())
}

/// The container's current target as (millicores, bytes), when there is one.
async fn target(env: &Env, name: &str) -> anyhow::Result<Option<(i64, i64)>> {
    let vpa = env.api::<VerticalPodAutoscaler>().get(name).await?;
    let Some(rec) = vpa
        .status
        .and_then(|s| s.recommendation)
        .and_then(|r| r.container_recommendations)
        .and_then(|c| c.into_iter().next())
    else {
        return Ok(None);
    };
    let cpu = rec.target.get("cpu").map(quantity::cpu_milli).transpose()?;
    let mem = rec
        .target
        .get("memory")
        .map(quantity::memory_bytes)
        .transpose()?;
    Ok(cpu.zip(mem))
}

async fn samples_in_checkpoint(env: &Env, name: &str) -> anyhow::Result<Option<i64>> {
    let cp = env
        .api::<VerticalPodAutoscalerCheckpoint>()
        .get_opt(&format!("{name}-app"))
        .await?;
    Ok(cp
        .and_then(|c| c.status)
        .and_then(|s| s.total_samples_count))
}

/// Waits until VPA `name` has condition `type_` True; its message.
async fn condition_true(env: &Env, name: &str, type_: &str) -> anyhow::Result<String> {
    let api: Api<VerticalPodAutoscaler> = env.api();
    eventually(&format!("{type_} on VPA {name}"), WITHIN, EVERY, || async {
        let vpa = api.get(name).await?;
        Ok(vpa
            .status
            .and_then(|s| s.conditions)
            .into_iter()
            .flatten()
            .find(|c| c.type_ == type_ && c.status == "True")
            .map(|c| c.message.unwrap_or_default()))
    })
    .await
}

// The CPU histogram's bucket around 0.3 cores is ~15m wide (ratio 1.05 from 10m).
const ONE_BUCKET_MILLI: i64 = 16;

#[tokio::test]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the workload model's CPU load"
)]
async fn steady_cpu_gets_p90_plus_margin_and_restart_continues_from_checkpoints()
-> anyhow::Result<()> {
    let env = Env::start("vpa-rec-steady").await?;
    let sim = env.sim()?;
    deployment(&env, "web", None).await?;
    sim.set_load(
        &env.namespace,
        "deployments",
        "web",
        LoadSpec {
            profile: LoadProfile::Constant { value: 295.0 },
            ..LoadSpec::default()
        },
    );
    let service = start(&env);
    let want = 345; // 300m × 1.15
    let (cpu, _) = eventually("a CPU target near 345m", WITHIN, EVERY, || async {
        Ok(target(&env, "web")
            .await?
            .filter(|(cpu, _)| (cpu - want).abs() <= ONE_BUCKET_MILLI))
    })
    .await?;
    let before = eventually("a checkpoint with samples", WITHIN, EVERY, || async {
        Ok(samples_in_checkpoint(&env, "web")
            .await?
            .filter(|n| *n >= 3))
    })
    .await?;
    service.stop().await??;

    let service = start(&env);
    let after = eventually(
        "the restarted recommender's checkpoint",
        WITHIN,
        EVERY,
        || async {
            Ok(samples_in_checkpoint(&env, "web")
                .await?
                .filter(|n| *n > before))
        },
    )
    .await?;
    assert!(after > before, "samples went from {before} to {after}");
    let (cpu_after, _) = target(&env, "web").await?.expect("still recommended");
    assert!(
        (cpu_after - cpu).abs() <= ONE_BUCKET_MILLI,
        "target moved from {cpu}m to {cpu_after}m across the restart"
    );
    service.stop().await??;
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the workload model's memory use and OOM kills"
)]
async fn oom_kill_raises_the_memory_target_above_the_kill_usage() -> anyhow::Result<()> {
    let env = Env::start("vpa-rec-oom").await?;
    let sim = env.sim()?;
    deployment(&env, "hog", Some("100Mi")).await?;
    let usage = 150.0 * 1024.0 * 1024.0;
    sim.set_load(
        &env.namespace,
        "deployments",
        "hog",
        LoadSpec {
            profile: LoadProfile::Constant { value: 10.0 },
            memory_base_bytes: usage,
            ..LoadSpec::default()
        },
    );
    let service = start(&env);
    let (_, memory) = eventually(
        "a memory target above the kill usage",
        WITHIN,
        EVERY,
        || async {
            Ok(target(&env, "hog")
                .await?
                .filter(|(_, mem)| *mem as f64 > usage))
        },
    )
    .await?;
    assert!(memory as f64 > usage);
    service.stop().await??;
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the workload model's CPU load and its node sizes"
)]
async fn a_recommendation_above_the_largest_node_is_capped_to_it() -> anyhow::Result<()> {
    let env = Env::start("vpa-rec-node-cap").await?;
    let sim = env.sim()?;
    deployment(&env, "huge", None).await?;
    // Twelve cores on the sim's nodes of 7800m allocatable.
    sim.set_load(
        &env.namespace,
        "deployments",
        "huge",
        LoadSpec {
            profile: LoadProfile::Constant { value: 12_000.0 },
            ..LoadSpec::default()
        },
    );
    let service = start_with(&env, &["--node-headroom-percent=10"]);
    let room = 7_800 * 90 / 100;
    let (cpu, _) = eventually("a CPU target at the node's room", WITHIN, EVERY, || async {
        Ok(target(&env, "huge").await?.filter(|(cpu, _)| *cpu == room))
    })
    .await?;
    assert_eq!(cpu, room);
    let vpa = env.api::<VerticalPodAutoscaler>().get("huge").await?;
    let status = vpa.status.expect("a status");
    let rec = status
        .recommendation
        .and_then(|r| r.container_recommendations)
        .and_then(|c| c.into_iter().next())
        .expect("a recommendation");
    let uncapped = rec
        .uncapped_target
        .as_ref()
        .and_then(|t| t.get("cpu"))
        .map(quantity::cpu_milli)
        .transpose()?
        .expect("an uncapped CPU target");
    assert!(uncapped > 7_800, "the usage asked for {uncapped}m");
    let upper = rec
        .upper_bound
        .as_ref()
        .and_then(|t| t.get("cpu"))
        .map(quantity::cpu_milli)
        .transpose()?
        .expect("an upper bound");
    assert!(upper <= room, "upper bound {upper}m above the room");
    let condition = status
        .conditions
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "RecommendationCappedToNode")
        .expect("the RecommendationCappedToNode condition");
    assert_eq!(condition.status, "True");
    let message = condition.message.unwrap_or_default();
    assert!(
        message.contains("7020m") && message.contains("sim-node-"),
        "{message}"
    );
    service.stop().await??;
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn vpas_for_other_recommenders_are_left_alone() -> anyhow::Result<()> {
    let env = Env::start("vpa-rec-other").await?;
    deployment(&env, "mine", None).await?;
    let other: VerticalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "theirs"},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "mine"},
            "recommenders": [{"name": "someone-else"}],
        },
    }))?;
    let api: Api<VerticalPodAutoscaler> = env.api();
    api.create(&PostParams::default(), &other).await?;
    let service = start(&env);
    eventually("a recommendation for ours", WITHIN, EVERY, || async {
        target(&env, "mine").await
    })
    .await?;
    assert!(api.get("theirs").await?.status.is_none());
    service.stop().await??;
    env.cleanup().await;
    Ok(())
}

/// A VPA whose spec passes every bound of the CRD one field at a time and 256 KiB in sum (64
/// container policies of 16 resources with long names): the recommender caches its target
/// only, says why in `ConfigUnsupported`, recommends nothing for it, and serves the others.
#[tokio::test]
async fn a_vpa_spec_past_the_bound_is_refused_and_not_cached() -> anyhow::Result<()> {
    let env = Env::start("vpa-rec-fat").await?;
    deployment(&env, "mine", None).await?;
    deployment(&env, "fat", None).await?;
    let policies: Vec<serde_json::Value> = (0..64)
        .map(|i| {
            let min: serde_json::Map<String, serde_json::Value> = (0..16)
                .map(|r| {
                    (
                        format!("example.com/{}-{r:02}", "r".repeat(300)),
                        json!("1"),
                    )
                })
                .collect();
            json!({"containerName": format!("c{i}"), "minAllowed": min})
        })
        .collect();
    let api: Api<VerticalPodAutoscaler> = env.api();
    let patch = json!({"spec": {"resourcePolicy": {"containerPolicies": policies}}});
    api.patch(
        "fat",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await?;
    let service = start(&env);
    eventually("a recommendation for ours", WITHIN, EVERY, || async {
        target(&env, "mine").await
    })
    .await?;
    let message = condition_true(&env, "fat", "ConfigUnsupported").await?;
    assert!(
        message.starts_with("spec: ")
            && message.ends_with("at most 262144 are served (and cached)"),
        "{message}"
    );
    assert_eq!(target(&env, "fat").await?, None, "no recommendation");
    println!("ConfigUnsupported: {message}");
    service.stop().await??;
    env.cleanup().await;
    Ok(())
}

/// A pod whose labels pass what the recommender keeps of a pod (`plimsoll_core::pod_fields::
/// POD_BUDGET`) is cached as its name and uid: it belongs to no workload, so its VPA matches no
/// pod (`NoPodsMatched`, no recommendation) while a plain pod's VPA is served.
#[tokio::test]
async fn a_pod_too_large_to_cache_counts_for_no_vpa() -> anyhow::Result<()> {
    let env = Env::start("vpa-rec-fat-pod").await?;
    deployment(&env, "mine", None).await?;
    deployment(&env, "fat", None).await?;
    plimsoll_e2e::fatten_pod(&env, "fat").await?;
    let service = start(&env);
    eventually("a recommendation for ours", WITHIN, EVERY, || async {
        target(&env, "mine").await
    })
    .await?;
    condition_true(&env, "fat", "NoPodsMatched").await?;
    assert_eq!(target(&env, "fat").await?, None, "no recommendation");
    service.stop().await??;
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn gc_deletes_checkpoints_of_deleted_vpas() -> anyhow::Result<()> {
    let env = Env::start("vpa-rec-gc").await?;
    deployment(&env, "short", None).await?;
    let service = start_with(&env, &["--checkpoints-gc-interval=1s"]);
    eventually("a checkpoint", WITHIN, EVERY, || async {
        samples_in_checkpoint(&env, "short").await
    })
    .await?;
    env.api::<VerticalPodAutoscaler>()
        .delete("short", &kube::api::DeleteParams::default())
        .await?;
    eventually("the checkpoint deleted", WITHIN, EVERY, || async {
        let cp = env
            .api::<VerticalPodAutoscalerCheckpoint>()
            .get_opt("short-app")
            .await?;
        Ok(cp.is_none().then_some(()))
    })
    .await?;
    service.stop().await??;
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn a_standby_replica_takes_over_from_the_checkpoints() -> anyhow::Result<()> {
    let env = Env::start("vpa-rec-leader").await?;
    deployment(&env, "ha", None).await?;
    let lease = [
        "--leader-elect=true",
        "--lease-namespace",
        env.namespace.as_str(),
        "--lease-duration=3s",
        "--renew-deadline=2s",
        "--retry-period=250ms",
    ];
    let first = start_with(&env, &lease);
    let before = eventually("the leader's checkpoint", WITHIN, EVERY, || async {
        samples_in_checkpoint(&env, "ha").await
    })
    .await?;
    let second = start_with(&env, &lease);
    // Stopping the leader releases the Lease; the standby restores and continues.
    first.stop().await??;
    let after = eventually("the standby's checkpoint", WITHIN, EVERY, || async {
        Ok(samples_in_checkpoint(&env, "ha")
            .await?
            .filter(|n| *n > before))
    })
    .await?;
    assert!(after > before);
    second.stop().await??;
    env.cleanup().await;
    Ok(())
}
