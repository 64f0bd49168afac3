//! hpa-plus sharded across replicas (issue 20): three instances with `--shards 6` share 30
//! autoscalers; one is killed mid-run. Every autoscaler keeps being evaluated (its
//! `status.lastDecision.time` advances within one lease duration, a retry period and its own
//! period of the kill), and the sim's audit log — where each instance writes under its own
//! User-Agent — shows no object written by two instances in turn more often than its shard's
//! Lease changed hands: no double writes, during the start-up rebalancing nor the takeover.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clap::Parser;
use kube::ResourceExt;
use kube::api::PostParams;
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus;
use plimsoll_e2e::handover::Sharded;
use plimsoll_e2e::{Crashable, Env, eventually};
use plimsoll_hpa_plus::cli::Args;
use plimsoll_sim::{LoadProfile, LoadSpec};
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(60);
const EVERY: Duration = Duration::from_millis(250);
const SHARDS: u32 = 6;
/// The service under test: its shard Leases, and the binary its User-Agent names.
const SERVICE: Sharded<'static> = Sharded {
    lease: "plimsoll-hpa-plus",
    shards: SHARDS,
    binary: "hpa-plus",
};
const OBJECTS: usize = 30;
/// `--lease-duration`.
const LEASE: Duration = Duration::from_secs(4);

fn config(env: &Env, identity: &str) -> plimsoll_hpa_plus::Config {
    let args = [
        "hpa-plus".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        "--metrics-address=127.0.0.1:0".to_owned(),
        "--sync-period=1s".to_owned(),
        "--cpu-initialization-period=1s".to_owned(),
        "--initial-readiness-delay=0s".to_owned(),
        "--leader-elect=true".to_owned(),
        format!("--lease-namespace={}", env.namespace),
        format!("--lease-duration={}s", LEASE.as_secs()),
        "--renew-deadline=3s".to_owned(),
        "--retry-period=500ms".to_owned(),
        format!("--shards={SHARDS}"),
    ];
    let mut config = Args::try_parse_from(args)
        .expect("test flags parse")
        .into_config()
        .expect("test flags are valid");
    config.identity = Some(identity.to_owned());
    config
}

fn sine(phase: f64) -> LoadSpec {
    LoadSpec {
        profile: LoadProfile::Sine {
            base: 15.0,
            amplitude: 10.0,
            period_seconds: 20.0,
            phase_seconds: phase,
        },
        ..LoadSpec::default()
    }
}

/// Each autoscaler's uid and `status.lastDecision.time`, by name.
async fn decisions(
    env: &Env,
) -> anyhow::Result<BTreeMap<String, (String, Option<jiff::Timestamp>)>> {
    let list = env
        .api::<HorizontalPodAutoscalerPlus>()
        .list(&kube::api::ListParams::default())
        .await?;
    Ok(list
        .items
        .into_iter()
        .map(|o| {
            let time = o
                .status
                .as_ref()
                .and_then(|s| s.last_decision.as_ref())
                .and_then(|d| d.time.as_ref())
                .map(|t| t.0);
            (o.name_any(), (o.uid().unwrap_or_default(), time))
        })
        .collect())
}

/// The audit log: per autoscaler, its status and its target's scale were written by one replica
/// at a time ([`Env::check_single_writer`]).
async fn assert_no_double_writes(env: &Env) -> anyhow::Result<()> {
    let uids = decisions(env)
        .await?
        .into_iter()
        .map(|(name, (uid, _))| (name, uid))
        .collect::<BTreeMap<_, _>>();
    assert_eq!(uids.len(), OBJECTS, "every object is listed");
    let audited = env
        .check_single_writer(&SERVICE, &uids, |entry| {
            match (entry.resource.as_str(), entry.subresource.as_str()) {
                ("horizontalpodautoscalerplus" | "horizontalpodautoscalerpluses", "status")
                | ("deployments", "scale") => Some(entry.name.clone()),
                _ => None,
            }
        })
        .await?;
    eprintln!(
        "{} writes audited; {} writer changes, none more than its shard's Lease transitions",
        audited.writes, audited.writer_changes
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the workload model's load and the audit log"
)]
async fn three_sharded_instances_survive_a_kill_without_double_writes() -> anyhow::Result<()> {
    let _serial = plimsoll_e2e::serial().await;
    let env = Env::start("hpa-plus-shards").await?;
    let sim = env.sim()?;
    for k in 0..OBJECTS {
        let name = format!("w{k}");
        plimsoll_e2e::create_deployment(&env, &name, 1, "100m", "64Mi").await?;
        #[allow(clippy::cast_precision_loss)]
        sim.set_load(&env.namespace, "deployments", &name, sine(k as f64));
    }
    let mut instances: BTreeMap<&str, Crashable> = ["instance-a", "instance-b", "instance-c"]
        .into_iter()
        .map(|id| {
            let config = config(&env, id);
            (
                id,
                Crashable::start("hpa-plus", |token| plimsoll_hpa_plus::run(config, token)),
            )
        })
        .collect();
    for k in 0..OBJECTS {
        let name = format!("w{k}");
        let object = plimsoll_e2e::hpa_plus_fixture(
            &name,
            &name,
            &json!({"minReplicas": 1, "maxReplicas": 3}),
            &json!({"syncPeriodSeconds": 1, "metrics": [{"type": "Pods", "pods": {
                "metric": {"name": "requests_per_second"},
                "target": {"type": "AverageValue", "averageValue": "10"}}}]}),
        )?;
        env.api::<HorizontalPodAutoscalerPlus>()
            .create(&PostParams::default(), &object)
            .await?;
    }

    // The shards spread: two each.
    eventually("six shards, two per instance", WITHIN, EVERY, || async {
        let per = env.shards_per_holder(&SERVICE).await?;
        Ok((per.len() == 3 && per.values().all(|c| *c == 2)).then_some(()))
    })
    .await?;
    eventually("every autoscaler evaluated", WITHIN, EVERY, || async {
        let d = decisions(&env).await?;
        Ok((d.len() == OBJECTS && d.values().all(|(_, t)| t.is_some())).then_some(()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Kill c: no Lease released, its shards wait for expiry.
    let killed_at = jiff::Timestamp::now();
    let killed = Instant::now();
    instances.get_mut("instance-c").expect("instance c").crash();
    // Every autoscaler is evaluated again after the kill within the lease duration, one retry
    // period and its own period (plus slack for a loaded machine).
    let bound = LEASE + Duration::from_millis(500) + Duration::from_secs(1);
    let evaluated = eventually(
        "every autoscaler evaluated after the kill",
        WITHIN,
        EVERY,
        || async {
            let d = decisions(&env).await?;
            Ok(d.values()
                .all(|(_, t)| t.is_some_and(|t| t > killed_at))
                .then(|| killed.elapsed()))
        },
    )
    .await?;
    eprintln!("every autoscaler evaluated {evaluated:?} after the kill (bound {bound:?})");
    assert!(
        evaluated < bound + Duration::from_secs(4),
        "evaluation gap after the kill: {evaluated:?}"
    );
    eventually("six shards, three per survivor", WITHIN, EVERY, || async {
        let per = env.shards_per_holder(&SERVICE).await?;
        let survivors: usize = ["instance-a", "instance-b"]
            .iter()
            .filter_map(|id| per.get(*id))
            .sum();
        Ok((survivors == 6).then_some(()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;

    assert_no_double_writes(&env).await?;

    for (_, instance) in instances {
        instance.stop().await;
    }
    env.cleanup().await;
    Ok(())
}
