//! cron-hpa end to end: the real service (`plimsoll_cron_hpa::run`) against plimsoll-sim (or a
//! real cluster with `PLIMSOLL_E2E_KUBECONFIG`).
//!
//! Jobs are scheduled a few seconds ahead of the wall clock with a one-off 6-field expression,
//! so the tests run in real time (the service reads the wall clock, not the sim's). The
//! cooperation tests also run hpa-plus (`plimsoll_hpa_plus::run`) on the sim's workload model.

use std::time::Duration;

use anyhow::Context as _;
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
use plimsoll_e2e::{Env, Running, eventually};
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
        Self::start_as(env, grace, None)
    }

    /// Starts an instance with its own leader-election identity.
    fn start_as(env: &Env, grace: Duration, identity: Option<&str>) -> Service {
        Self::start_with(env, grace, identity, Duration::ZERO)
    }

    /// Starts an instance with `--min-job-interval`.
    fn start_with(
        env: &Env,
        grace: Duration,
        identity: Option<&str>,
        min_job_interval: Duration,
    ) -> Service {
        let config = Config {
            common: CommonArgs {
                kubeconfig: Some(env.kubeconfig.clone()),
                context: None,
                kube_api_qps: 0.0,
                kube_api_burst: None,
                metrics_address: "127.0.0.1:0".parse().expect("an address"),
                log_format: LogFormat::Text,
                log_filter: Some("info".into()),
                leader_elect: true,
                lease_duration: Duration::from_secs(15),
                renew_deadline: Duration::from_secs(10),
                retry_period: Duration::from_secs(2),
                lease_namespace: Some(env.namespace.clone()),
                lease_owner_deployment: None,
                admin_listener: plimsoll_runtime::AdminListenerArgs::default(),
            },
            missed_job_grace: grace,
            min_job_interval,
            identity: identity.map(str::to_owned),
        };
        let token = CancellationToken::new();
        let task = tokio::spawn(run(config, token.clone()));
        Service { token, task }
    }

    /// Stops the service, then deletes the test's namespace.
    async fn finish(self, env: Env) {
        self.stop().await;
        env.cleanup().await;
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

/// A test's start: Deployment `name` at 1 replica, and cron-hpa running with `grace`.
async fn one_replica(test: &str, name: &str, grace: Duration) -> anyhow::Result<(Env, Service)> {
    let env = Env::start(test).await?;
    deployment(&env, name, 1).await?;
    let service = Service::start(&env, grace);
    Ok((env, service))
}

/// A CronHPA `name` on Deployment `name` whose one job `job_name` sets `size` replicas at the
/// whole second at least `ahead` from now; returns that second.
async fn one_job_in(
    env: &Env,
    name: &str,
    job_name: &str,
    ahead: Duration,
    size: i32,
) -> anyhow::Result<Timestamp> {
    let fire = whole_second_in(ahead);
    create_cron(
        env,
        name,
        target("Deployment", name),
        vec![job(job_name, at_second(fire), size)],
    )
    .await?;
    Ok(fire)
}

async fn deployment(env: &Env, name: &str, replicas: i32) -> anyhow::Result<()> {
    plimsoll_e2e::create_deployment(env, name, replicas, "100m", "64Mi").await
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

/// Scale writes cron-hpa made on `name` (from the sim's audit log; `None` on a real cluster).
fn cron_scale_writes(env: &Env, name: &str) -> Option<usize> {
    env.scale_writes("cron-hpa", name)
}

#[tokio::test]
async fn a_job_fires_within_a_second_and_sets_the_replicas() -> anyhow::Result<()> {
    let (env, service) = one_replica("cron-fires", "web", Duration::from_secs(300)).await?;
    let fire = one_job_in(&env, "web", "peak", Duration::from_secs(8), 4).await?;
    let submitted = condition(&env, "web", "peak", LONG, |c| {
        c.state == JobState::Submitted
    })
    .await?;
    assert!(
        submitted.message.contains(&format!("next run at {fire}")),
        "{}",
        submitted.message
    );
    // The same write gives the next run and the Ready condition (`kubectl get`, `kubectl wait`).
    let status = env
        .api::<CronHorizontalPodAutoscaler>()
        .get("web")
        .await?
        .status
        .unwrap_or_default();
    assert_eq!(status.next_run.map(|t| t.0), Some(fire));
    let ready = status.ready.expect("a Ready condition");
    assert!(ready.status, "{ready:?}");
    assert_eq!(ready.reason, "Scheduled");
    assert_eq!(ready.message, format!("next run at {fire}"));
    assert_eq!(ready.observed_generation, status.observed_generation);
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
    service.finish(env).await;
    Ok(())
}

/// A job every second with the same outcome is one `JobSucceeded` Event whose series counts the
/// runs: the note names the job and what it did, not the time of the run (the condition has
/// it), so the runs after the second cost no Event write.
#[tokio::test]
async fn a_job_every_second_is_one_event_series() -> anyhow::Result<()> {
    let (env, service) = one_replica("cron-every", "web", Duration::from_secs(300)).await?;
    create_cron(
        &env,
        "web",
        target("Deployment", "web"),
        vec![job("tick", "@every 1s".into(), 3)],
    )
    .await?;
    let runs = |c: &JobCondition| c.state == JobState::Succeed;
    let first = condition(&env, "web", "tick", LONG, runs).await?;
    let first_run = first.last_probe_time.map(|t| t.0).context("a run time")?;
    let later = condition(&env, "web", "tick", LONG, |c| {
        runs(c)
            && c.last_probe_time
                .as_ref()
                .is_some_and(|t| t.0 >= first_run + SignedDuration::from_secs(4))
    })
    .await?;
    assert!(later.message.contains("ran at"), "{}", later.message);
    let events: Vec<Event> = env
        .api::<Event>()
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("JobSucceeded"))
        .collect();
    let notes: Vec<_> = events
        .iter()
        .map(|e| e.note.clone().unwrap_or_default())
        .collect();
    // The first run scaled 1 -> 3, the others 3 -> 3: two notes, the second a series.
    assert_eq!(
        notes,
        ["job tick: replicas 1 -> 3", "job tick: replicas 3 -> 3"],
        "{events:?}"
    );
    assert!(
        events[1].series.as_ref().is_some_and(|s| s.count >= 2),
        "{events:?}"
    );
    service.finish(env).await;
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
    service.finish(env).await;
    Ok(())
}

#[tokio::test]
async fn killed_before_a_job_and_restarted_30s_later_runs_it_once() -> anyhow::Result<()> {
    let (env, service) = one_replica("cron-restart", "shop", Duration::from_secs(300)).await?;
    let fire = one_job_in(&env, "shop", "sale", Duration::from_secs(12), 5).await?;
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
    service.finish(env).await;
    Ok(())
}

#[tokio::test]
async fn a_miss_older_than_the_grace_is_reported_not_run() -> anyhow::Result<()> {
    let grace = Duration::from_secs(2);
    let (env, service) = one_replica("cron-missed", "batch", grace).await?;
    let fire = one_job_in(&env, "batch", "nightly", Duration::from_secs(8), 3).await?;
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
    service.finish(env).await;
    Ok(())
}

#[tokio::test]
async fn changes_take_effect_at_once_and_deleting_cancels_the_jobs() -> anyhow::Result<()> {
    let (env, service) = one_replica("cron-change", "app", Duration::from_secs(300)).await?;
    one_job_in(&env, "app", "a", Duration::from_secs(6), 3).await?;
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
    service.finish(env).await;
    Ok(())
}

/// An invalid edit is reported in `status.invalidSpec` (naming the field and the job) and an
/// `InvalidSpec` Event, without touching the job conditions: a `runOnce` job that ran keeps its
/// `Succeed` condition and last run through the edit and its fix (issue #28).
#[tokio::test]
async fn an_invalid_edit_is_reported_and_keeps_the_history() -> anyhow::Result<()> {
    let (env, service) = one_replica("cron-invalid", "web", Duration::from_secs(300)).await?;
    let fire = whole_second_in(Duration::from_secs(4));
    let once = ScalingJob {
        run_once: true,
        ..job("once", at_second(fire), 3)
    };
    create_cron(&env, "web", target("Deployment", "web"), vec![once.clone()]).await?;
    let ran = condition(&env, "web", "once", LONG, |c| c.state == JobState::Succeed).await?;
    assert_eq!(ran.last_probe_time.as_ref().map(|t| t.0), Some(fire));

    let api = env.api::<CronHorizontalPodAutoscaler>();
    let broken = job("broken", "0 0 25 * * *".into(), 3);
    let jobs = |list: Vec<ScalingJob>| serde_json::json!({"spec": {"jobs": list}});
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(&jobs(vec![once.clone(), broken])),
    )
    .await?;
    let invalid = eventually("status.invalidSpec", LONG, POLL, || async {
        Ok(api.get("web").await?.status.and_then(|s| s.invalid_spec))
    })
    .await?;
    assert!(
        invalid.message.contains("spec.jobs[1].schedule")
            && invalid.message.contains("job \"broken\"")
            && invalid.message.contains("hour"),
        "{}",
        invalid.message
    );
    let status = api.get("web").await?.status.unwrap_or_default();
    assert_eq!(
        status.conditions,
        std::slice::from_ref(&ran),
        "the history is untouched"
    );
    let ready = status.ready.expect("a Ready condition");
    assert!(!ready.status, "{ready:?}");
    assert_eq!(ready.reason, "InvalidSpec");
    assert_eq!(
        status.next_run, None,
        "no job runs while the spec is invalid"
    );
    eventually("InvalidSpec event", LONG, POLL, || async {
        let list = env.api::<Event>().list(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("InvalidSpec")))
    })
    .await?;

    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(&jobs(vec![once])),
    )
    .await?;
    let fixed = eventually("invalidSpec cleared", LONG, POLL, || async {
        let status = api.get("web").await?.status.unwrap_or_default();
        Ok((status.invalid_spec.is_none() && status.job_count == Some(1)).then_some(status))
    })
    .await?;
    assert_eq!(fixed.conditions, [ran], "the runOnce job is still done");
    let ready = fixed.ready.expect("a Ready condition");
    assert!(ready.status, "{ready:?}");
    assert_eq!(ready.message, "no job runs again", "the runOnce job ran");
    assert_eq!(fixed.next_run, None);
    assert_eq!(replicas(&env, "web").await?, 3);
    service.finish(env).await;
    Ok(())
}

/// With `--min-job-interval 60s`, a CronHPA whose job fires every second is an invalid spec:
/// `status.invalidSpec` names the flag, and the job never runs (no scale write); one whose job
/// fires every minute is left alone.
#[tokio::test]
async fn jobs_past_the_min_job_interval_never_run() -> anyhow::Result<()> {
    let env = Env::start("cron-rate").await?;
    deployment(&env, "web", 1).await?;
    deployment(&env, "calm", 1).await?;
    let service = Service::start_with(
        &env,
        Duration::from_secs(300),
        None,
        Duration::from_secs(60),
    );
    create_cron(
        &env,
        "web",
        target("Deployment", "web"),
        vec![job("pulse", "* * * * * *".into(), 3)],
    )
    .await?;
    create_cron(
        &env,
        "calm",
        target("Deployment", "calm"),
        vec![job("minute", "0 * * * * *".into(), 3)],
    )
    .await?;
    let api = env.api::<CronHorizontalPodAutoscaler>();
    let invalid = eventually("status.invalidSpec", LONG, POLL, || async {
        Ok(api.get("web").await?.status.and_then(|s| s.invalid_spec))
    })
    .await?;
    assert!(
        invalid.message.contains("60.0 times in 60s")
            && invalid.message.contains("\"pulse\" every 1s")
            && invalid.message.contains("--min-job-interval"),
        "{}",
        invalid.message
    );
    eventually("the calm CronHPA is ready", LONG, POLL, || async {
        let status = api.get("calm").await?.status.unwrap_or_default();
        Ok((status.invalid_spec.is_none() && status.ready.is_some_and(|r| r.status)).then_some(()))
    })
    .await?;
    // Three seconds in which the pulse would have fired three times.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = api.get("web").await?.status.unwrap_or_default();
    assert!(status.conditions.is_empty(), "{:?}", status.conditions);
    assert_eq!(cron_scale_writes(&env, "web").unwrap_or_default(), 0);
    service.finish(env).await;
    Ok(())
}

/// A CronHPA created before its Deployment is not `Ready` (`TargetUnresolved`), and turns
/// ready once the Deployment exists (re-checked every 30 s while unresolved).
#[tokio::test]
async fn ready_waits_for_the_target_to_resolve() -> anyhow::Result<()> {
    let env = Env::start("cron-ready").await?;
    let service = Service::start(&env, Duration::from_secs(300));
    create_cron(
        &env,
        "late",
        target("Deployment", "late"),
        vec![job("daily", "0 0 8 * * *".into(), 2)],
    )
    .await?;
    let api = env.api::<CronHorizontalPodAutoscaler>();
    let ready = |want: bool| {
        let api = api.clone();
        async move {
            eventually(
                &format!("Ready={want}"),
                Duration::from_secs(90),
                POLL,
                || {
                    let api = api.clone();
                    async move {
                        let status = api.get("late").await?.status.unwrap_or_default();
                        Ok(status
                            .ready
                            .filter(|r| r.status == want)
                            .map(|r| (r, status.next_run)))
                    }
                },
            )
            .await
        }
    };
    let (unresolved, next_run) = ready(false).await?;
    assert_eq!(unresolved.reason, "TargetUnresolved");
    assert!(
        unresolved.message.contains("late"),
        "{}",
        unresolved.message
    );
    assert!(
        next_run.is_some(),
        "the schedule is known even without a target"
    );
    deployment(&env, "late", 1).await?;
    let (resolved, _) = ready(true).await?;
    assert_eq!(resolved.reason, "Scheduled");
    assert!(
        resolved.last_transition_time > unresolved.last_transition_time,
        "the flip moved the transition time"
    );
    service.finish(env).await;
    Ok(())
}

/// hpa-plus in-process with short periods (the flags its own e2e tests use).
fn start_hpa_plus(env: &Env) -> Running<()> {
    use clap::Parser as _;
    let args = [
        "hpa-plus".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        "--metrics-address=127.0.0.1:0".to_owned(),
        "--leader-elect=false".to_owned(),
        "--sync-period=2s".to_owned(),
        "--cpu-initialization-period=1s".to_owned(),
        "--initial-readiness-delay=0s".to_owned(),
    ];
    let config = plimsoll_hpa_plus::cli::Args::try_parse_from(args)
        .expect("hpa-plus flags parse")
        .into_config()
        .expect("hpa-plus flags are valid");
    Running::spawn("hpa-plus", |token| async move {
        if let Err(e) = plimsoll_hpa_plus::run(config, token).await {
            eprintln!("hpa-plus ended with an error: {e}");
        }
    })
}

/// An HPA+ on Deployment `name` scaling on requests per second per pod (10 per pod), with
/// no scale-down stabilization so that it would act at once.
async fn create_hpa_plus(env: &Env, name: &str, min: i32, max: i32) -> anyhow::Result<()> {
    let hpa: plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus =
        serde_json::from_value(serde_json::json!({
            "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
            "kind": "HorizontalPodAutoscalerPlus",
            "metadata": {"name": name},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                "minReplicas": min,
                "maxReplicas": max,
                "metrics": [{"type": "Pods", "pods": {
                    "metric": {"name": "requests_per_second"},
                    "target": {"type": "AverageValue", "averageValue": "10"}}}],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}
            }
        }))?;
    env.api::<plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), &hpa)
        .await?;
    Ok(())
}

fn load(value: f64) -> plimsoll_sim::LoadSpec {
    plimsoll_sim::LoadSpec {
        profile: plimsoll_sim::LoadProfile::Constant { value },
        ..plimsoll_sim::LoadSpec::default()
    }
}

async fn wait_replicas(env: &Env, name: &str, want: i32, within: Duration) -> anyhow::Result<()> {
    eventually(
        &format!("{name} at {want} replicas"),
        within,
        POLL,
        || async { Ok((replicas(env, name).await? == want).then_some(())) },
    )
    .await
}

/// Scale writes hpa-plus made on `name` (from the sim's audit log).
fn hpa_plus_scale_writes(env: &Env, name: &str) -> anyhow::Result<usize> {
    env.scale_writes("hpa-plus", name)
        .context("needs the sim's audit log")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the workload model's request load"
)]
async fn min_replicas_mode_with_hpa_plus_scales_above_the_floor_under_load_and_holds_it_when_idle()
-> anyhow::Result<()> {
    let env = Env::start("cron-hpaplus-min").await?;
    let sim = env.sim()?;
    deployment(&env, "web", 1).await?;
    // Low load: 5 requests/s at 10 per pod wants 1 replica.
    sim.set_load(&env.namespace, "deployments", "web", load(5.0));
    create_hpa_plus(&env, "web", 1, 10).await?;
    let hpa_plus = start_hpa_plus(&env);
    let cron = Service::start(&env, Duration::from_secs(300));
    let fire = whole_second_in(Duration::from_secs(8));
    let mut target = target("Deployment", "web");
    target.api_version = Some("autoscaling.plimsoll.dev/v1alpha1".into());
    target.kind = "HorizontalPodAutoscalerPlus".into();
    create_cron(&env, "web", target, vec![job("floor", at_second(fire), 4)]).await?;
    let ran = condition(&env, "web", "floor", LONG, |c| c.state == JobState::Succeed).await?;
    assert!(
        ran.message.contains("minReplicas 1 -> 4"),
        "{}",
        ran.message
    );
    // Low load: hpa-plus keeps the workload at the cron floor, not below it.
    wait_replicas(&env, "web", 4, LONG).await?;
    let api = env.api::<plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus>();
    eventually("hpa-plus decides at the floor", LONG, POLL, || async {
        let h = api.get("web").await?;
        Ok(h.status
            .filter(|s| s.desired_replicas == 4 && h.spec.min_replicas == Some(4))
            .map(|_| ()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        replicas(&env, "web").await?,
        4,
        "idle: stays at the cron minimum"
    );
    // High load: 80 requests/s wants 8 replicas, above the floor; hpa-plus scales there.
    sim.set_load(&env.namespace, "deployments", "web", load(80.0));
    wait_replicas(&env, "web", 8, Duration::from_secs(90)).await?;
    cron.stop().await;
    let _ = hpa_plus.stop().await;
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the workload model's request load and the audit log"
)]
async fn replica_mode_hpa_plus_does_not_undo_the_cron_size_during_the_keep_window()
-> anyhow::Result<()> {
    let env = Env::start("cron-hpaplus-keep").await?;
    let sim = env.sim()?;
    deployment(&env, "shop", 1).await?;
    sim.set_load(&env.namespace, "deployments", "shop", load(5.0));
    create_hpa_plus(&env, "shop", 1, 10).await?;
    let hpa_plus = start_hpa_plus(&env);
    let cron = Service::start(&env, Duration::from_secs(300));
    let up = whole_second_in(Duration::from_secs(8));
    let down = up + SignedDuration::from_secs(20);
    create_cron(
        &env,
        "shop",
        target("Deployment", "shop"),
        vec![job("up", at_second(up), 6), job("down", at_second(down), 2)],
    )
    .await?;
    condition(&env, "shop", "up", LONG, |c| c.state == JobState::Succeed).await?;
    let status = env
        .api::<CronHorizontalPodAutoscaler>()
        .get("shop")
        .await?
        .status
        .unwrap();
    assert!(status.scale_up_keep_window);
    let writes_before = hpa_plus_scale_writes(&env, "shop")?;
    // Inside the window hpa-plus (which alone would want 1 replica) leaves the cron size.
    while Timestamp::now() < down - SignedDuration::from_secs(2) {
        assert_eq!(
            replicas(&env, "shop").await?,
            6,
            "hpa-plus undid the cron size"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(hpa_plus_scale_writes(&env, "shop")?, writes_before);
    // The "down" job lowers the size and closes the window; hpa-plus then takes over.
    condition(&env, "shop", "down", LONG, |c| c.state == JobState::Succeed).await?;
    let status = env
        .api::<CronHorizontalPodAutoscaler>()
        .get("shop")
        .await?
        .status
        .unwrap();
    assert!(!status.scale_up_keep_window);
    wait_replicas(&env, "shop", 1, Duration::from_secs(90)).await?;
    cron.stop().await;
    let _ = hpa_plus.stop().await;
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn two_replicas_run_each_job_once_and_hand_over_on_shutdown() -> anyhow::Result<()> {
    let env = Env::start("cron-two").await?;
    deployment(&env, "web", 1).await?;
    let a = Service::start_as(&env, Duration::from_secs(300), Some("cron-a"));
    let b = Service::start_as(&env, Duration::from_secs(300), Some("cron-b"));
    let leases = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        env.client.clone(),
        &env.namespace,
    );
    let holder = || async {
        Ok(leases
            .get_opt("plimsoll-cron-hpa")
            .await?
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty()))
    };
    let first_leader = eventually("a leader", LONG, POLL, holder).await?;
    let first = whole_second_in(Duration::from_secs(6));
    create_cron(
        &env,
        "web",
        target("Deployment", "web"),
        vec![job("first", at_second(first), 3)],
    )
    .await?;
    condition(&env, "web", "first", LONG, |c| c.state == JobState::Succeed).await?;
    assert_eq!(replicas(&env, "web").await?, 3);
    // Stop the leader; the other takes over (the Lease is released on shutdown).
    let (leader, follower) = if first_leader == "cron-a" {
        (a, b)
    } else {
        (b, a)
    };
    leader.stop().await;
    eventually("the other replica leads", LONG, POLL, || async {
        Ok(holder().await?.filter(|h| *h != first_leader))
    })
    .await?;
    let second = whole_second_in(Duration::from_secs(5));
    let patch = serde_json::json!({"spec": {"jobs": [
        {"name": "first", "schedule": at_second(first), "targetSize": 3},
        {"name": "second", "schedule": at_second(second), "targetSize": 5}
    ]}});
    env.api::<CronHorizontalPodAutoscaler>()
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    condition(&env, "web", "second", LONG, |c| {
        c.state == JobState::Succeed
    })
    .await?;
    assert_eq!(replicas(&env, "web").await?, 5);
    if let Some(writes) = cron_scale_writes(&env, "web") {
        assert_eq!(writes, 2, "each job ran once across the two replicas");
    }
    follower.stop().await;
    env.cleanup().await;
    Ok(())
}

/// A CronHPA `name` on Deployment `workload`, annotated `plimsoll.dev/adjust-hpa-min: "true"`,
/// with one job setting `size` at `fire`.
async fn create_annotated_cron(
    env: &Env,
    name: &str,
    workload: &str,
    fire: Timestamp,
    size: i32,
) -> anyhow::Result<()> {
    let mut cron = CronHorizontalPodAutoscaler::new(
        name,
        CronHorizontalPodAutoscalerSpec {
            scale_target_ref: target("Deployment", workload),
            jobs: vec![job("floor", at_second(fire), size)],
            ..CronHorizontalPodAutoscalerSpec::default()
        },
    );
    cron.metadata.namespace = Some(env.namespace.clone());
    cron.metadata.annotations =
        Some([("plimsoll.dev/adjust-hpa-min".to_owned(), "true".to_owned())].into());
    env.api::<CronHorizontalPodAutoscaler>()
        .create(&PostParams::default(), &cron)
        .await?;
    Ok(())
}

/// A native HPA `name` on Deployment `workload`, between 1 and 5 replicas.
fn hpa_on(name: &str, workload: &str) -> anyhow::Result<HorizontalPodAutoscaler> {
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": workload},
            "minReplicas": 1, "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 60}}}]
        }
    }))?)
}

#[tokio::test]
async fn an_annotated_workload_finds_its_autoscaler_by_scale_target_ref_not_by_name()
-> anyhow::Result<()> {
    let env = Env::start("cron-by-target").await?;
    deployment(&env, "web", 1).await?;
    deployment(&env, "other", 1).await?;
    // The HPA+ of `web` has another name; an HPA called `web` scales a different workload.
    create_hpa_plus(&env, "web-autoscaler", 1, 10).await?;
    let api = env.api::<plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus>();
    let mut plus = api.get("web-autoscaler").await?;
    plus.spec.scale_target_ref.name = "web".into();
    plus.metadata.managed_fields = None;
    api.replace("web-autoscaler", &PostParams::default(), &plus)
        .await?;
    let hpas = env.api::<HorizontalPodAutoscaler>();
    hpas.create(&PostParams::default(), &hpa_on("web", "other")?)
        .await?;
    let service = Service::start(&env, Duration::from_secs(300));
    create_annotated_cron(
        &env,
        "web",
        "web",
        whole_second_in(Duration::from_secs(6)),
        4,
    )
    .await?;
    let ran = condition(&env, "web", "floor", LONG, |c| c.state == JobState::Succeed).await?;
    assert!(
        ran.message.contains("minReplicas 1 -> 4; replicas 1 -> 4"),
        "{}",
        ran.message
    );
    assert_eq!(api.get("web-autoscaler").await?.spec.min_replicas, Some(4));
    let untouched = hpas.get("web").await?.spec.and_then(|s| s.min_replicas);
    assert_eq!(
        untouched,
        Some(1),
        "the HPA named like the workload scales another one"
    );
    assert_eq!(replicas(&env, "web").await?, 4);
    assert_eq!(replicas(&env, "other").await?, 1);

    // A second autoscaler on `web` makes the choice ambiguous: the job fails naming both.
    hpas.create(&PostParams::default(), &hpa_on("web-native", "web")?)
        .await?;
    create_annotated_cron(
        &env,
        "web-2",
        "web",
        whole_second_in(Duration::from_secs(4)),
        6,
    )
    .await?;
    let failed = condition(&env, "web-2", "floor", LONG, |c| {
        c.state == JobState::Failed
    })
    .await?;
    assert!(
        failed.message.contains(
            "ambiguous: HorizontalPodAutoscaler/web-native, \
             HorizontalPodAutoscalerPlus/web-autoscaler all have scaleTargetRef apps/v1 Deployment web"
        ),
        "{}",
        failed.message
    );
    assert_eq!(api.get("web-autoscaler").await?.spec.min_replicas, Some(4));
    let native = hpas
        .get("web-native")
        .await?
        .spec
        .and_then(|s| s.min_replicas);
    assert_eq!(native, Some(1), "nothing written when ambiguous");

    // No autoscaler at all on `other` once its HPA is gone: the job fails and says so.
    hpas.delete("web", &DeleteParams::default()).await?;
    create_annotated_cron(
        &env,
        "other",
        "other",
        whole_second_in(Duration::from_secs(4)),
        3,
    )
    .await?;
    let failed = condition(&env, "other", "floor", LONG, |c| {
        c.state == JobState::Failed
    })
    .await?;
    assert!(
        failed.message.contains(
            "no HorizontalPodAutoscaler or HorizontalPodAutoscalerPlus in the namespace has \
             scaleTargetRef apps/v1 Deployment other"
        ),
        "{}",
        failed.message
    );
    assert_eq!(replicas(&env, "other").await?, 1);
    service.finish(env).await;
    Ok(())
}
