//! vpa-recommender sharded across replicas (issue 20): three instances with `--shards 6` share
//! 30 VPAs; one is killed mid-run. Every VPA keeps being recommended for (its checkpoint, written
//! every loop, is written again within one lease duration, a retry period, the restore and one
//! loop of the kill, and again after that), and the sim's audit log — where each instance writes
//! under its own User-Agent — shows no VPA whose status or checkpoint was written by two
//! instances in turn more often than its shard's Lease changed hands: no double writes, during
//! the start-up rebalancing nor the takeover.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::{ListParams, PostParams};
use plimsoll_core::api::vpa::{VerticalPodAutoscaler, VerticalPodAutoscalerCheckpoint};
use plimsoll_e2e::handover::Sharded;
use plimsoll_e2e::{Crashable, Env, eventually};
use plimsoll_sim::{LoadProfile, LoadSpec};
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(40);
const EVERY: Duration = Duration::from_millis(250);
const SHARDS: u32 = 6;
/// The service under test: its shard Leases, and the binary its User-Agent names.
const SERVICE: Sharded<'static> = Sharded {
    lease: "plimsoll-vpa-recommender",
    shards: SHARDS,
    binary: "vpa-recommender",
};
const OBJECTS: usize = 30;
/// `--lease-duration`.
const LEASE: Duration = Duration::from_secs(4);
/// `--retry-period`.
const RETRY: Duration = Duration::from_millis(500);
/// `--recommender-interval` (the harness's).
const INTERVAL: Duration = Duration::from_secs(1);

fn config(env: &Env, identity: &str) -> plimsoll_vpa_recommender::Config {
    let flags = [
        "--leader-elect=true".to_owned(),
        format!("--lease-namespace={}", env.namespace),
        format!("--lease-duration={}s", LEASE.as_secs()),
        "--renew-deadline=3s".to_owned(),
        format!("--retry-period={}ms", RETRY.as_millis()),
        format!("--shards={SHARDS}"),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut config = env.recommender_config(&flags).expect("test flags parse");
    config.identity = Some(identity.to_owned());
    config
}

async fn vpa(env: &Env, name: &str) -> anyhow::Result<()> {
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

/// What the recommender wrote for one VPA: its uid, whether its status has a recommendation, and
/// when its checkpoint was last written.
struct Written {
    uid: String,
    recommended: bool,
    checkpoint: Option<jiff::Timestamp>,
}

/// Each VPA's [`Written`], by name.
async fn written(env: &Env) -> anyhow::Result<BTreeMap<String, Written>> {
    let vpas = env
        .api::<VerticalPodAutoscaler>()
        .list(&ListParams::default())
        .await?;
    let checkpoints = env
        .api::<VerticalPodAutoscalerCheckpoint>()
        .list(&ListParams::default())
        .await?;
    let mut at: BTreeMap<String, jiff::Timestamp> = BTreeMap::new();
    for cp in checkpoints.items {
        if let (Some(vpa), Some(time)) = (
            cp.spec.vpa_object_name.clone(),
            cp.status.and_then(|s| s.last_update_time).map(|t| t.0),
        ) {
            at.insert(vpa, time);
        }
    }
    Ok(vpas
        .items
        .into_iter()
        .map(|v| {
            let name = v.name_any();
            let recommended = v
                .status
                .and_then(|s| s.recommendation)
                .and_then(|r| r.container_recommendations)
                .is_some_and(|c| !c.is_empty());
            let written = Written {
                uid: v.metadata.uid.clone().unwrap_or_default(),
                recommended,
                checkpoint: at.get(&name).copied(),
            };
            (name, written)
        })
        .collect())
}

/// Waits until every VPA has a recommendation and a checkpoint written after `since`; returns
/// how long after `from` that was.
async fn all_written_after(
    env: &Env,
    what: &str,
    since: jiff::Timestamp,
    from: Instant,
) -> anyhow::Result<Duration> {
    eventually(what, WITHIN, EVERY, || async {
        let w = written(env).await?;
        Ok((w.len() == OBJECTS
            && w.values()
                .all(|w| w.recommended && w.checkpoint.is_some_and(|t| t > since)))
        .then(|| from.elapsed()))
    })
    .await
}

/// The audit log: per VPA, its status and its checkpoints (`<vpa>-app`) were written by one
/// replica at a time ([`Env::check_single_writer`]).
async fn assert_no_double_writes(env: &Env) -> anyhow::Result<()> {
    let uids = written(env)
        .await?
        .into_iter()
        .map(|(name, w)| (name, w.uid))
        .collect::<BTreeMap<_, _>>();
    assert_eq!(uids.len(), OBJECTS, "every object is listed");
    let audited = env
        .check_single_writer(&SERVICE, &uids, |entry| {
            match (entry.resource.as_str(), entry.subresource.as_str()) {
                ("verticalpodautoscalers", "status") => Some(entry.name.clone()),
                ("verticalpodautoscalercheckpoints", "") => {
                    entry.name.strip_suffix("-app").map(str::to_owned)
                }
                _ => None,
            }
        })
        .await?;
    eprintln!(
        "{} VPA status and checkpoint writes audited; {} writer changes, none more than its \
         shard's Lease transitions",
        audited.writes, audited.writer_changes
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the workload model's load and the audit log"
)]
async fn three_sharded_recommenders_survive_a_kill_without_double_writes() -> anyhow::Result<()> {
    let _serial = plimsoll_e2e::serial().await;
    let env = Env::start("vpa-rec-shards").await?;
    let sim = env.sim()?;
    for k in 0..OBJECTS {
        let name = format!("w{k}");
        plimsoll_e2e::create_deployment(&env, &name, 1, "100m", "64Mi").await?;
        #[allow(clippy::cast_precision_loss)]
        let load = LoadSpec {
            profile: LoadProfile::Constant {
                value: 100.0 + 10.0 * k as f64,
            },
            ..LoadSpec::default()
        };
        sim.set_load(&env.namespace, "deployments", &name, load);
        vpa(&env, &name).await?;
    }
    let started = Instant::now();
    let mut instances: BTreeMap<&str, Crashable> = ["instance-a", "instance-b", "instance-c"]
        .into_iter()
        .map(|id| {
            let config = config(&env, id);
            (
                id,
                Crashable::start("vpa-recommender", |token| {
                    plimsoll_vpa_recommender::run(config, token)
                }),
            )
        })
        .collect();

    eventually("six shards, two per instance", WITHIN, EVERY, || async {
        let per = env.shards_per_holder(&SERVICE).await?;
        Ok((per.len() == 3 && per.values().all(|c| *c == 2)).then_some(()))
    })
    .await?;
    let settled = jiff::Timestamp::now();
    let first = all_written_after(&env, "every VPA recommended", settled, started).await?;
    eprintln!("every VPA recommended and checkpointed {first:?} after the start");
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Kill c: no Lease released, its shards wait for expiry.
    let killed_at = jiff::Timestamp::now();
    let killed = Instant::now();
    instances.get_mut("instance-c").expect("instance c").crash();
    // Every VPA is written again after the kill within the lease duration, one retry period,
    // the restore from checkpoints and one loop (plus slack for a loaded machine).
    let bound = LEASE + RETRY + INTERVAL + Duration::from_secs(1);
    let after =
        all_written_after(&env, "every VPA written after the kill", killed_at, killed).await?;
    eprintln!("every VPA recommended and checkpointed {after:?} after the kill (bound {bound:?})");
    assert!(
        after < bound + Duration::from_secs(4),
        "recommendation gap after the kill: {after:?}"
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
    // And they keep being written.
    let again = jiff::Timestamp::now();
    let kept = Instant::now();
    let kept = all_written_after(&env, "every VPA written again", again, kept).await?;
    assert!(kept < INTERVAL * 4 + Duration::from_secs(2), "{kept:?}");

    assert_no_double_writes(&env).await?;

    for (_, instance) in instances {
        instance.stop().await;
    }
    env.cleanup().await;
    Ok(())
}
