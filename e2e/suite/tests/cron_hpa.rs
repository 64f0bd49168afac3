//! cron-hpa end to end: the real service (`plimsoll_cron_hpa::run`) against plimsoll-sim (or a
//! real cluster with `PLIMSOLL_E2E_KUBECONFIG`).
//!
//! Jobs are scheduled a few seconds ahead of the wall clock with a one-off 6-field expression,
//! so the tests run in real time (the service reads the wall clock, not the sim's).

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::{CrossVersionObjectReference, HorizontalPodAutoscaler};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use plimsoll_core::api::cron::{
    CronHorizontalPodAutoscaler, CronHorizontalPodAutoscalerSpec, JobCondition, JobState,
    ScalingJob,
};
use plimsoll_cron_hpa::{CommonArgs, Config, LogFormat, run};
use plimsoll_e2e::{Env, eventually};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const LONG: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);

/// A running cron-hpa.
struct Service {
    token: CancellationToken,
    task: JoinHandle<plimsoll_cron_hpa::Result<()>>,
}

impl Service {
    fn start(env: &Env, grace: Duration) -> Service {
        let config = Config {
            common: CommonArgs {
                kubeconfig: Some(env.kubeconfig.clone()),
                context: None,
                metrics_address: "127.0.0.1:0".parse().expect("an address"),
                log_format: LogFormat::Text,
                log_filter: "info".into(),
                leader_elect: true,
                lease_duration: Duration::from_secs(15),
                renew_deadline: Duration::from_secs(10),
                retry_period: Duration::from_secs(2),
                lease_namespace: Some(env.namespace.clone()),
            },
            missed_job_grace: grace,
        };
        let token = CancellationToken::new();
        let task = tokio::spawn(run(config, token.clone()));
        Service { token, task }
    }

    /// SIGTERM: returns once the service stopped (in-flight writes done, Lease released).
    async fn stop(self) {
        self.token.cancel();
        let result = tokio::time::timeout(LONG, self.task)
            .await
            .expect("cron-hpa stops within a minute")
            .expect("cron-hpa task does not panic");
        assert!(result.is_ok(), "cron-hpa returned {result:?}");
    }
}

async fn deployment(env: &Env, name: &str, replicas: i32) -> anyhow::Result<()> {
    let d: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "app", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}
                }]}
            }
        }
    }))?;
    env.api::<Deployment>()
        .create(&PostParams::default(), &d)
        .await?;
    Ok(())
}

fn target(kind: &str, name: &str) -> CrossVersionObjectReference {
    CrossVersionObjectReference {
        api_version: Some(
            if kind == "HorizontalPodAutoscaler" {
                "autoscaling/v2"
            } else {
                "apps/v1"
            }
            .into(),
        ),
        kind: kind.into(),
        name: name.into(),
    }
}

/// A 6-field UTC schedule that matches the wall-clock second `at` (once a year).
fn at_second(at: Timestamp) -> String {
    let t = at.to_zoned(jiff::tz::TimeZone::UTC);
    format!(
        "{} {} {} {} {} *",
        t.second(),
        t.minute(),
        t.hour(),
        t.day(),
        t.month()
    )
}

/// The next whole second at least `ahead` from now.
fn whole_second_in(ahead: Duration) -> Timestamp {
    let t = Timestamp::now() + SignedDuration::try_from(ahead).expect("a short duration");
    Timestamp::from_second(t.as_second() + 1).expect("a time in range")
}

fn job(name: &str, schedule: String, size: i32) -> ScalingJob {
    ScalingJob {
        name: name.into(),
        schedule,
        target_size: size,
        run_once: false,
    }
}

async fn create_cron(
    env: &Env,
    name: &str,
    target: CrossVersionObjectReference,
    jobs: Vec<ScalingJob>,
) -> anyhow::Result<()> {
    let mut cron = CronHorizontalPodAutoscaler::new(
        name,
        CronHorizontalPodAutoscalerSpec {
            scale_target_ref: target,
            jobs,
            ..CronHorizontalPodAutoscalerSpec::default()
        },
    );
    cron.metadata.namespace = Some(env.namespace.clone());
    env.api::<CronHorizontalPodAutoscaler>()
        .create(&PostParams::default(), &cron)
        .await?;
    Ok(())
}

/// Waits until job `job` of `name` has a condition satisfying `check`.
async fn condition(
    env: &Env,
    name: &str,
    job: &str,
    within: Duration,
    check: impl Fn(&JobCondition) -> bool,
) -> anyhow::Result<JobCondition> {
    let api = env.api::<CronHorizontalPodAutoscaler>();
    eventually(&format!("{name} job {job}"), within, POLL, || {
        let api = api.clone();
        let check = &check;
        async move {
            let cron = api.get(name).await?;
            Ok(cron
                .status
                .into_iter()
                .flat_map(|s| s.conditions)
                .find(|c| c.name == job && check(c)))
        }
    })
    .await
}

async fn replicas(env: &Env, name: &str) -> anyhow::Result<i32> {
    let d = env.api::<Deployment>().get(name).await?;
    Ok(d.spec.and_then(|s| s.replicas).unwrap_or_default())
}

/// Scale writes cron-hpa made (from the sim's audit log).
fn cron_scale_writes(env: &Env, name: &str) -> Option<usize> {
    let sim = env.sim()?;
    Some(
        sim.audit()
            .iter()
            .filter(|e| {
                e.field_manager.as_deref() == Some("cron-hpa")
                    && e.subresource == "scale"
                    && e.name == name
                    && e.namespace == env.namespace
            })
            .count(),
    )
}

#[tokio::test]
async fn a_job_fires_within_a_second_and_sets_the_replicas() -> anyhow::Result<()> {
    let env = Env::start("cron-fires").await?;
    deployment(&env, "web", 1).await?;
    let service = Service::start(&env, Duration::from_secs(300));
    let fire = whole_second_in(Duration::from_secs(8));
    create_cron(
        &env,
        "web",
        target("Deployment", "web"),
        vec![job("peak", at_second(fire), 4)],
    )
    .await?;
    let submitted = condition(&env, "web", "peak", LONG, |c| {
        c.state == JobState::Submitted
    })
    .await?;
    assert!(
        submitted.message.contains(&format!("next run at {fire}")),
        "{}",
        submitted.message
    );
    // Watch the replicas from the test side as well: the write must land within a second of
    // the firing (plus the test's own polling on a loaded machine).
    let seen = eventually("replicas 4", LONG, Duration::from_millis(20), || async {
        Ok((replicas(&env, "web").await? == 4).then(Timestamp::now))
    })
    .await?;
    let observed_late = seen.duration_since(fire);
    assert!(
        observed_late < SignedDuration::from_secs(3),
        "replicas seen {observed_late:#} after the firing"
    );
    let ran = condition(&env, "web", "peak", LONG, |c| c.state == JobState::Succeed).await?;
    assert_eq!(ran.last_probe_time.map(|t| t.0), Some(fire));
    // The controller's own measurement: "ran at … (Nms late)".
    let late_ms: i64 = ran
        .message
        .split(" (")
        .nth(1)
        .and_then(|s| s.split("ms late").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(i64::MAX);
    assert!(late_ms < 1000, "{}", ran.message);
    assert!(ran.message.contains("replicas 1 -> 4"), "{}", ran.message);
    let cron = env.api::<CronHorizontalPodAutoscaler>().get("web").await?;
    let status = cron.status.unwrap();
    assert!(
        status.scale_up_keep_window,
        "a scale-up opens the keep window"
    );
    assert_eq!(status.job_count, Some(1));
    if let Some(writes) = cron_scale_writes(&env, "web") {
        assert_eq!(writes, 1);
    }
    // An Event tells the user.
    let events = eventually("JobSucceeded event", LONG, POLL, || async {
        let list = env.api::<Event>().list(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("JobSucceeded")))
    })
    .await?;
    assert!(events.note.unwrap_or_default().contains("job peak"));
    service.stop().await;
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn min_replicas_mode_sets_the_hpa_minimum_clamped_and_raises_replicas() -> anyhow::Result<()>
{
    let env = Env::start("cron-minrep").await?;
    deployment(&env, "api", 2).await?;
    let hpa: HorizontalPodAutoscaler = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "api"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"},
            "minReplicas": 1,
            "maxReplicas": 6,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 60}}}]
        }
    }))?;
    env.api::<HorizontalPodAutoscaler>()
        .create(&PostParams::default(), &hpa)
        .await?;
    let service = Service::start(&env, Duration::from_secs(300));
    let fire = whole_second_in(Duration::from_secs(6));
    create_cron(
        &env,
        "api",
        target("HorizontalPodAutoscaler", "api"),
        vec![job("business-hours", at_second(fire), 10)],
    )
    .await?;
    let ran = condition(&env, "api", "business-hours", LONG, |c| {
        c.state == JobState::Succeed
    })
    .await?;
    assert!(
        ran.message.contains(
            "minReplicas 1 -> 6 (targetSize 10 clamped to maxReplicas 6); replicas 2 -> 6"
        ),
        "{}",
        ran.message
    );
    let hpa = env.api::<HorizontalPodAutoscaler>().get("api").await?;
    assert_eq!(hpa.spec.unwrap().min_replicas, Some(6));
    assert_eq!(replicas(&env, "api").await?, 6);
    service.stop().await;
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn killed_before_a_job_and_restarted_30s_later_runs_it_once() -> anyhow::Result<()> {
    let env = Env::start("cron-restart").await?;
    deployment(&env, "shop", 1).await?;
    let service = Service::start(&env, Duration::from_secs(300));
    let fire = whole_second_in(Duration::from_secs(12));
    create_cron(
        &env,
        "shop",
        target("Deployment", "shop"),
        vec![job("sale", at_second(fire), 5)],
    )
    .await?;
    condition(&env, "shop", "sale", LONG, |c| {
        c.state == JobState::Submitted
    })
    .await?;
    // Kill it shortly before the job.
    let kill_at = fire - SignedDuration::from_secs(4);
    if let Ok(wait) = Duration::try_from(kill_at.duration_since(Timestamp::now())) {
        tokio::time::sleep(wait).await;
    }
    service.stop().await;
    let killed = Timestamp::now();
    assert!(killed < fire, "the service was stopped before the job time");
    // Nothing runs while it is down.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(replicas(&env, "shop").await?, 1, "nothing ran while down");
    let service = Service::start(&env, Duration::from_secs(300));
    let ran = condition(&env, "shop", "sale", LONG, |c| c.state == JobState::Succeed).await?;
    assert_eq!(ran.last_probe_time.map(|t| t.0), Some(fire));
    assert_eq!(replicas(&env, "shop").await?, 5);
    // Once: let it settle, then a further restart does not run it again either.
    service.stop().await;
    let service = Service::start(&env, Duration::from_secs(300));
    condition(&env, "shop", "sale", LONG, |c| c.state == JobState::Succeed).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    if let Some(writes) = cron_scale_writes(&env, "shop") {
        assert_eq!(writes, 1, "the missed job ran exactly once");
    }
    service.stop().await;
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn a_miss_older_than_the_grace_is_reported_not_run() -> anyhow::Result<()> {
    let env = Env::start("cron-missed").await?;
    deployment(&env, "batch", 1).await?;
    let grace = Duration::from_secs(2);
    let service = Service::start(&env, grace);
    let fire = whole_second_in(Duration::from_secs(8));
    create_cron(
        &env,
        "batch",
        target("Deployment", "batch"),
        vec![job("nightly", at_second(fire), 3)],
    )
    .await?;
    condition(&env, "batch", "nightly", LONG, |c| {
        c.state == JobState::Submitted
    })
    .await?;
    service.stop().await;
    // Restart well after the firing plus the grace.
    let restart_at = fire + SignedDuration::from_secs(5);
    if let Ok(wait) = Duration::try_from(restart_at.duration_since(Timestamp::now())) {
        tokio::time::sleep(wait).await;
    }
    let service = Service::start(&env, grace);
    let failed = condition(&env, "batch", "nightly", LONG, |c| {
        c.state == JobState::Failed
    })
    .await?;
    assert!(
        failed.message.starts_with("missed 1 run"),
        "{}",
        failed.message
    );
    assert_eq!(failed.last_probe_time.map(|t| t.0), Some(fire));
    assert_eq!(
        replicas(&env, "batch").await?,
        1,
        "a missed job does not run"
    );
    eventually("JobMissed event", LONG, POLL, || async {
        let list = env.api::<Event>().list(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("JobMissed")))
    })
    .await?;
    service.stop().await;
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn changes_take_effect_at_once_and_deleting_cancels_the_jobs() -> anyhow::Result<()> {
    let env = Env::start("cron-change").await?;
    deployment(&env, "app", 1).await?;
    let service = Service::start(&env, Duration::from_secs(300));
    let first = whole_second_in(Duration::from_secs(6));
    create_cron(
        &env,
        "app",
        target("Deployment", "app"),
        vec![job("a", at_second(first), 3)],
    )
    .await?;
    let ran = condition(&env, "app", "a", LONG, |c| c.state == JobState::Succeed).await?;
    assert_eq!(replicas(&env, "app").await?, 3);

    // Change the job: a new jobId, Submitted at once, then it runs at its new time.
    let second = whole_second_in(Duration::from_secs(6));
    let api = env.api::<CronHorizontalPodAutoscaler>();
    let patch = serde_json::json!({"spec": {"jobs": [
        {"name": "a", "schedule": at_second(second), "targetSize": 7}
    ]}});
    api.patch("app", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let resubmitted = condition(&env, "app", "a", Duration::from_secs(5), |c| {
        c.state == JobState::Submitted
    })
    .await?;
    assert_ne!(resubmitted.job_id, ran.job_id);
    condition(&env, "app", "a", LONG, |c| {
        c.state == JobState::Succeed && c.job_id == resubmitted.job_id
    })
    .await?;
    assert_eq!(replicas(&env, "app").await?, 7);

    // Delete the object with a job pending: it never runs.
    let third = whole_second_in(Duration::from_secs(5));
    let patch = serde_json::json!({"spec": {"jobs": [
        {"name": "a", "schedule": at_second(third), "targetSize": 2}
    ]}});
    api.patch("app", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    condition(&env, "app", "a", LONG, |c| c.state == JobState::Submitted).await?;
    api.delete("app", &DeleteParams::default()).await?;
    let after = third + SignedDuration::from_secs(3);
    if let Ok(wait) = Duration::try_from(after.duration_since(Timestamp::now())) {
        tokio::time::sleep(wait).await;
    }
    assert_eq!(
        replicas(&env, "app").await?,
        7,
        "the deleted object's job did not run"
    );
    service.stop().await;
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn an_invalid_schedule_fails_the_job_with_a_message_naming_it() -> anyhow::Result<()> {
    let env = Env::start("cron-invalid").await?;
    deployment(&env, "web", 1).await?;
    let service = Service::start(&env, Duration::from_secs(300));
    create_cron(
        &env,
        "web",
        target("Deployment", "web"),
        vec![job("broken", "0 0 25 * * *".into(), 3)],
    )
    .await?;
    let failed = condition(&env, "web", "broken", LONG, |c| c.state == JobState::Failed).await?;
    assert!(
        failed.message.contains("spec.jobs[0].schedule")
            && failed.message.contains("job \"broken\"")
            && failed.message.contains("hour"),
        "{}",
        failed.message
    );
    eventually("InvalidSpec event", LONG, POLL, || async {
        let list = env.api::<Event>().list(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("InvalidSpec")))
    })
    .await?;
    service.stop().await;
    env.cleanup().await;
    Ok(())
}
