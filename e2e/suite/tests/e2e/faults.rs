//! The fault suite: each of hpa-plus, cron-hpa, vpa-updater and vpa-recommender runs one
//! workload to completion while the sim fails its API calls, and the sim's audit log must show
//! exactly the writes a run without faults makes.
//!
//! Every test is one scenario, with the services as their own processes (`plimsoll-service`)
//! behind a [`Ledger`] that counts what was injected:
//! - bursts of 500 and 429 on the scale subresource, the metrics APIs and the status writes;
//! - dropped watch connections and forced 410 Expired on the next watches;
//! - SIGKILL between deciding and writing: a latency fault holds the write in the sim, the
//!   ledger reports it left the process, and the test kills the process there;
//! - the leader SIGKILLed mid-loop with a standby that takes the Lease over.
//!
//! The fault-free run of each workload is fixed by its arithmetic (stated in each test), so it
//! is not run again: the assertions compare the audit log with it. Each test prints its rows of
//! the table in docs/reliability.md (`just faults`).
//!
//! They need the sim's control API (faults, the audit log, the wiretap on its plain HTTP port),
//! so they are ignored when `PLIMSOLL_E2E_KUBECONFIG` points at a real cluster.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Resource as _;
use kube::api::{ListParams, PostParams};
use plimsoll_core::api::cron::{CronHorizontalPodAutoscaler, JobState};
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus;
use plimsoll_core::api::vpa::{VerticalPodAutoscaler, VerticalPodAutoscalerCheckpoint};
use plimsoll_e2e::chaos::{KubeconfigFile, Ledger, Process, Row, burst, hold, report};
use plimsoll_e2e::{
    Env, create_deployment, create_recreate_vpa_far_above, eventually, one_warning, wait_ready_pods,
};
use plimsoll_sim::{LoadProfile, LoadSpec, SimHandle};
use serde_json::json;

/// Generous bounds for a loaded two-core machine.
const WITHIN: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(250);
/// How long the sim holds a write that the test kills the process in the middle of.
const HOLD: Duration = Duration::from_secs(3);
/// Burst length of each 500 / 429 fault.
const BURST: u64 = 3;

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_plimsoll-service"))
}

/// One scenario's cluster: the sim, the test's namespace, and the ledger its services use.
struct Scenario {
    env: Env,
    ledger: Ledger,
    kubeconfig: KubeconfigFile,
    rows: Vec<Row>,
    service: &'static str,
}

impl Scenario {
    async fn start(service: &'static str) -> anyhow::Result<Scenario> {
        let env = Env::start(&format!("faults-{service}")).await?;
        let ledger = Ledger::start(env.sim()?).await?;
        let kubeconfig = KubeconfigFile::write(&env.namespace, &ledger.kubeconfig())?;
        Ok(Scenario {
            env,
            ledger,
            kubeconfig,
            rows: Vec::new(),
            service,
        })
    }

    fn sim(&self) -> &SimHandle {
        self.env.sim().expect("these tests run on the sim")
    }

    fn spawn(&self, identity: &str, extra: &[String]) -> anyhow::Result<Process> {
        self.spawn_logged(identity, extra, None)
    }

    /// [`Scenario::spawn`] with the service's log written to `log` (when given).
    fn spawn_logged(
        &self,
        identity: &str,
        extra: &[String],
        log: Option<&Path>,
    ) -> anyhow::Result<Process> {
        Process::spawn(
            exe(),
            self.service,
            identity,
            &self.kubeconfig.path,
            &self.env.namespace,
            extra,
            log,
        )
    }

    fn row(&mut self, fault: impl Into<String>, injected: usize, outcome: &str, lost: &str) {
        self.rows.push(Row {
            service: self.service,
            fault: fault.into(),
            injected,
            outcome: outcome.into(),
            lost: lost.into(),
        });
    }

    /// The holder of the service's Lease, if any.
    async fn holder(&self) -> anyhow::Result<Option<String>> {
        let lease = self
            .env
            .api::<Lease>()
            .get_opt(&format!("plimsoll-{}", self.service))
            .await?;
        Ok(lease
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty()))
    }

    async fn wait_holder(&self, identity: &str) -> anyhow::Result<()> {
        eventually(&format!("{identity} leads"), WITHIN, POLL, || async {
            Ok((self.holder().await?.as_deref() == Some(identity)).then_some(()))
        })
        .await
    }

    /// SIGKILLs `process` once `method` on `path` left it (held in the sim by a latency fault
    /// on `verb` `resource`), then lifts the hold and waits until the held request is over.
    /// Returns whether the held write landed.
    async fn kill_mid_write(
        &self,
        process: &mut Process,
        (verb, resource): (&str, &str),
        (method, path): (&str, &str),
        landed: impl Fn() -> usize,
    ) -> anyhow::Result<bool> {
        let before = landed();
        let id = self.sim().add_fault(hold(verb, resource, HOLD));
        let mark = self.ledger.mark();
        self.ledger.wait_for(mark, method, path, WITHIN).await?;
        process.kill()?;
        self.sim().cluster.faults.remove(id);
        tokio::time::sleep(HOLD + Duration::from_secs(1)).await;
        Ok(landed() > before)
    }

    /// Arms `n` forced 410s and drops every open watch; returns the ledger mark to count the
    /// 410s from.
    fn break_watches(&self, n: u32) -> usize {
        let mark = self.ledger.mark();
        self.sim().expire_next_watches(n);
        self.sim().drop_watches();
        mark
    }

    async fn finish(self) {
        report(&self.rows);
        self.env.cleanup().await;
    }

    /// Ends a test of what the service logged: exactly one warning in `log` says `what`, and it
    /// names `web` in this namespace. The log file goes too.
    async fn finish_warned_once(self, log: &Path, what: &str) -> anyhow::Result<()> {
        let warned = one_warning(log, what);
        let namespace = self.env.namespace.clone();
        self.finish().await;
        let _ = std::fs::remove_file(log);
        let warned = warned?;
        anyhow::ensure!(
            warned.contains(&namespace) && warned.contains("\"web\""),
            "the warning names web in {namespace}: {warned}"
        );
        Ok(())
    }
}

fn constant(value: f64) -> LoadSpec {
    LoadSpec {
        profile: LoadProfile::Constant { value },
        ..LoadSpec::default()
    }
}

async fn replicas(env: &Env, name: &str) -> anyhow::Result<i32> {
    env.api::<Deployment>()
        .get(name)
        .await?
        .spec
        .and_then(|s| s.replicas)
        .context("a Deployment without spec.replicas")
}

async fn wait_replicas(env: &Env, name: &str, want: i32) -> anyhow::Result<()> {
    eventually(&format!("{name} at {want}"), WITHIN, POLL, || async {
        Ok((replicas(env, name).await? == want).then_some(()))
    })
    .await
}

fn scale_writes(env: &Env, manager: &str, name: &str) -> usize {
    env.scale_writes(manager, name).unwrap_or_default()
}

fn landed(held: bool) -> &'static str {
    if held {
        "the held write landed; the next process saw it and did not repeat it"
    } else {
        "the held write was dropped with the connection; the next process made it once"
    }
}

/// Deployment `web` at one Ready pod under 180m, and an HPA+ on it at a 50 % CPU target;
/// returns the resource its status writes go to.
async fn hpa_plus_workload(s: &Scenario) -> anyhow::Result<String> {
    let ns = &s.env.namespace;
    create_deployment(&s.env, "web", 1, "100m", "64Mi").await?;
    wait_ready_pods(&s.env, "web", 1, WITHIN, POLL).await?;
    s.sim().set_load(ns, "deployments", "web", constant(180.0));
    let hpa: HorizontalPodAutoscalerPlus = serde_json::from_value(json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
        "kind": "HorizontalPodAutoscalerPlus",
        "metadata": {"name": "web"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 10, "syncPeriodSeconds": 2,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 50}}}],
            // No scale-up policy limit: each step is one write, whenever it comes.
            "behavior": {"scaleUp": {"policies": [{"type": "Percent", "value": 1000, "periodSeconds": 1}]}},
        }
    }))?;
    s.env
        .api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), &hpa)
        .await?;
    Ok(format!(
        "{}/status",
        HorizontalPodAutoscalerPlus::plural(&())
    ))
}

/// The hpa-plus rows of the table.
fn hpa_plus_rows(
    s: &mut Scenario,
    writes: usize,
    after_handover: usize,
    held: bool,
    expiry_mark: usize,
) {
    let lost = if writes == 2 {
        "nothing"
    } else {
        "extra writes"
    };
    for (what, path, status) in [
        (
            "500 on PATCH deployments/scale",
            "/deployments/web/scale",
            500,
        ),
        (
            "429 on PATCH deployments/scale",
            "/deployments/web/scale",
            429,
        ),
        ("500 on PATCH status", "/status", 500),
        ("429 on PATCH status", "/status", 429),
    ] {
        let n = s.ledger.answered("PATCH", path, status);
        s.row(what, n, "retried with back-off; same writes", lost);
    }
    for status in [500, 429] {
        let n = s.ledger.answered_under("/apis/metrics.k8s.io/", status);
        s.row(
            format!("{status} on metrics.k8s.io"),
            n,
            "ScalingActive false for the period, no write",
            lost,
        );
    }
    let expired = s.ledger.expired_watches(expiry_mark, 3);
    s.row("watches dropped", 1, "re-watched", lost);
    s.row("forced 410 on the next watches", expired, "re-listed", lost);
    s.row(
        "leader SIGKILLed mid-loop, standby takes over",
        1,
        &format!(
            "no write by the standby ({after_handover} write(s) before and after the handover)"
        ),
        lost,
    );
    s.row(
        "SIGKILL between deciding and writing",
        1,
        landed(held),
        lost,
    );
}

/// hpa-plus: 1 → 4 replicas (180m on one pod at a 50 % target), then 4 → 8 (380m). The
/// fault-free run makes exactly these two scale writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: faults, the audit log, the wiretap"
)]
async fn hpa_plus_makes_the_fault_free_writes_under_faults_kills_and_a_handover()
-> anyhow::Result<()> {
    let mut s = Scenario::start("hpa-plus").await?;
    let status = hpa_plus_workload(&s).await?;
    let ns = s.env.namespace.clone();
    let flags = [
        "--sync-period=2s".to_owned(),
        "--cpu-initialization-period=1s".to_owned(),
        "--initial-readiness-delay=0s".to_owned(),
    ];

    // Bursts and broken watches while the leader scales 1 → 4, a standby waiting.
    for fault in [
        burst("patch", "deployments/scale", 500, BURST),
        burst("patch", "deployments/scale", 429, BURST),
        burst("get", "metrics.k8s.io", 500, BURST),
        burst("get", "metrics.k8s.io", 429, BURST),
        burst("patch", &status, 500, BURST),
        burst("patch", &status, 429, BURST),
    ] {
        s.sim().add_fault(fault);
    }
    let mut leader = s.spawn("hpa-plus-a", &flags)?;
    s.wait_holder("hpa-plus-a").await?;
    let standby = s.spawn("hpa-plus-b", &flags)?;
    let expiry_mark = s.break_watches(3);
    wait_replicas(&s.env, "web", 4).await?;
    wait_ready_pods(&s.env, "web", 4, WITHIN, POLL).await?;

    // The leader dies mid-loop; the standby takes over and must not write again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    leader.kill()?;
    s.wait_holder("hpa-plus-b").await?;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let after_handover = scale_writes(&s.env, "hpa-plus", "web");

    // SIGKILL between deciding (4 → 8) and writing; a fresh process finishes the job.
    let mut standby = standby;
    s.sim().set_load(&ns, "deployments", "web", constant(380.0));
    let env = &s.env;
    let held = s
        .kill_mid_write(
            &mut standby,
            ("patch", "deployments/scale"),
            ("PATCH", "/deployments/web/scale"),
            || scale_writes(env, "hpa-plus", "web"),
        )
        .await?;
    let _fresh = s.spawn("hpa-plus-c", &flags)?;
    wait_replicas(&s.env, "web", 8).await?;
    tokio::time::sleep(Duration::from_secs(8)).await;

    let writes = scale_writes(&s.env, "hpa-plus", "web");
    hpa_plus_rows(&mut s, writes, after_handover, held, expiry_mark);
    assert_eq!(
        after_handover, 1,
        "the handover made no write of its own (1 → 4 only)"
    );
    assert_eq!(
        writes, 2,
        "exactly the fault-free run's writes (1 → 4, 4 → 8)"
    );
    assert_eq!(replicas(&s.env, "web").await?, 8);
    s.finish().await;
    Ok(())
}

/// A 6-field UTC schedule for the wall-clock second `at`.
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

fn seconds_from_now(ahead: i64) -> Timestamp {
    Timestamp::from_second(Timestamp::now().as_second() + ahead).expect("a time in range")
}

/// cron-hpa: job `three` sets 3 replicas, job `five` sets 5 twenty seconds later. The
/// fault-free run makes exactly two scale writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: faults, the audit log, the wiretap"
)]
async fn cron_hpa_runs_every_job_exactly_once_under_faults_and_a_kill() -> anyhow::Result<()> {
    let mut s = Scenario::start("cron-hpa").await?;
    create_deployment(&s.env, "web", 1, "100m", "64Mi").await?;
    let mut leader = s.spawn("cron-hpa-a", &[])?;
    s.wait_holder("cron-hpa-a").await?;
    let _standby = s.spawn("cron-hpa-b", &[])?;
    let first = seconds_from_now(15);
    let second = first + SignedDuration::from_secs(20);
    let cron: CronHorizontalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
        "kind": "CronHorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "jobs": [
                {"name": "three", "schedule": at_second(first), "targetSize": 3},
                {"name": "five", "schedule": at_second(second), "targetSize": 5},
            ],
        }
    }))?;
    s.env
        .api::<CronHorizontalPodAutoscaler>()
        .create(&PostParams::default(), &cron)
        .await?;
    let expiry_mark = s.break_watches(2);

    // The leader dies between deciding to run `three` and its write; the standby takes over.
    let env = &s.env;
    let held = s
        .kill_mid_write(
            &mut leader,
            ("patch", "deployments/scale"),
            ("PATCH", "/deployments/web/scale"),
            || scale_writes(env, "cron-hpa", "web"),
        )
        .await?;
    // Error bursts on the scale and status writes: see the two retry tests below.
    s.wait_holder("cron-hpa-b").await?;
    wait_replicas(&s.env, "web", 5).await?;
    let crons = s.env.api::<CronHorizontalPodAutoscaler>();
    eventually("both jobs Succeed in status", WITHIN, POLL, || async {
        let status = crons.get("web").await?.status.unwrap_or_default();
        let succeeded = |job: &str| {
            status
                .conditions
                .iter()
                .any(|c| c.name == job && c.state == JobState::Succeed)
        };
        Ok((succeeded("three") && succeeded("five")).then_some(()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(5)).await;

    let writes = scale_writes(&s.env, "cron-hpa", "web");
    let lost = if writes == 2 {
        "nothing"
    } else {
        "a job ran twice"
    };
    let expired = s.ledger.expired_watches(expiry_mark, 2);
    s.row("watches dropped", 1, "re-watched", lost);
    s.row("forced 410 on the next watches", expired, "re-listed", lost);
    s.row(
        "leader SIGKILLed between deciding and writing, standby takes over",
        1,
        landed(held),
        lost,
    );
    assert_eq!(
        writes, 2,
        "each job exactly once (held write landed: {held})"
    );
    assert_eq!(replicas(&s.env, "web").await?, 5);
    s.finish().await;
    Ok(())
}

/// cron-hpa: bursts of 500 and 429 on the scale write at a job's firing. A transient error
/// is retried with back-off until the write lands (the design's rule for transient API
/// errors), and the job's write lands exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: faults, the audit log, the wiretap"
)]
async fn cron_hpa_retries_a_job_whose_scale_write_fails_transiently() -> anyhow::Result<()> {
    let mut s = Scenario::start("cron-hpa").await?;
    create_deployment(&s.env, "web", 1, "100m", "64Mi").await?;
    let _service = s.spawn("cron-hpa-a", &[])?;
    s.wait_holder("cron-hpa-a").await?;
    s.sim()
        .add_fault(burst("patch", "deployments/scale", 500, BURST));
    s.sim()
        .add_fault(burst("patch", "deployments/scale", 429, BURST));
    job_three(&s.env, 8).await?;
    let reached = wait_replicas(&s.env, "web", 3).await;
    for status in [500, 429] {
        let n = s.ledger.answered("PATCH", "/deployments/web/scale", status);
        s.row(
            format!("{status} on PATCH deployments/scale at the firing"),
            n,
            if reached.is_ok() {
                "retried; the job ran once"
            } else {
                "job marked Failed, not retried"
            },
            if reached.is_ok() {
                "nothing"
            } else {
                "the job"
            },
        );
    }
    let writes = scale_writes(&s.env, "cron-hpa", "web");
    s.finish().await;
    reached?;
    assert_eq!(writes, 1, "the job's write landed exactly once");
    Ok(())
}

/// Creates CronHPA `web` on Deployment `web` with one job, `three`, that scales it to 3 at
/// `seconds` from now.
async fn job_three(env: &Env, seconds: i64) -> anyhow::Result<()> {
    let cron: CronHorizontalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
        "kind": "CronHorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "jobs": [{"name": "three", "schedule": at_second(seconds_from_now(seconds)),
                      "targetSize": 3}],
        }
    }))?;
    env.api::<CronHorizontalPodAutoscaler>()
        .create(&PostParams::default(), &cron)
        .await?;
    Ok(())
}

/// The state of job `three` in CronHPA `web`'s status, once it has one.
async fn job_three_state(env: &Env) -> anyhow::Result<Option<JobState>> {
    let cron = env.api::<CronHorizontalPodAutoscaler>().get("web").await?;
    let status = cron.status.unwrap_or_default();
    Ok(status
        .conditions
        .iter()
        .find(|c| c.name == "three")
        .map(|c| c.state))
}

/// Waits until job `three` is in `state`.
async fn wait_job_three(env: &Env, state: JobState) -> anyhow::Result<()> {
    eventually(&format!("job three {state:?}"), WITHIN, POLL, || async {
        Ok((job_three_state(env).await? == Some(state)).then_some(()))
    })
    .await
}

/// The vpa-recommender rows of the table.
fn recommender_rows(s: &mut Scenario, seen: &Seen, before: i64, held: bool, expiry_mark: usize) {
    let lost = if seen.resets() == 0 {
        "nothing"
    } else {
        "history"
    };
    for (what, path, status) in [
        ("500 on PATCH VPA status", "/status", 500),
        ("429 on PATCH VPA status", "/status", 429),
    ] {
        let n = s.ledger.answered("PATCH", path, status);
        s.row(what, n, "retried next loop; recommendation kept", lost);
    }
    for status in [500, 429] {
        let n = s.ledger.answered_under("/apis/metrics.k8s.io/", status);
        s.row(
            format!("{status} on metrics.k8s.io"),
            n,
            "no sample that loop",
            lost,
        );
    }
    let n = s
        .ledger
        .exchanges()
        .iter()
        .filter(|e| e.path.contains("/verticalpodautoscalercheckpoints") && e.status == 500)
        .count();
    s.row(
        "500 on checkpoint reads and writes",
        n,
        "written next loop",
        lost,
    );
    let expired = s.ledger.expired_watches(expiry_mark, 3);
    s.row("watches dropped", 1, "re-watched", lost);
    s.row("forced 410 on the next watches", expired, "re-listed", lost);
    s.row(
        "leader SIGKILLed between deciding and writing, standby takes over",
        1,
        &format!(
            "standby continued from the checkpoint ({} → {} samples); {}",
            before,
            seen.max,
            if held {
                "the held status write landed"
            } else {
                "the held status write was dropped"
            }
        ),
        lost,
    );
}

/// Deployment `web` at one pod under 300m, and a VPA for the plimsoll recommender on it.
async fn recommender_workload(s: &Scenario) -> anyhow::Result<()> {
    let ns = &s.env.namespace;
    create_deployment(&s.env, "web", 1, "100m", "100Mi").await?;
    s.sim().set_load(ns, "deployments", "web", constant(300.0));
    let vpa: VerticalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "recommenders": [{"name": "plimsoll"}],
            "updatePolicy": {"updateMode": "Off"}
        }
    }))?;
    s.env
        .api::<VerticalPodAutoscaler>()
        .create(&PostParams::default(), &vpa)
        .await?;
    Ok(())
}

/// cron-hpa: a 500 on the status write a job makes (before its scale write, the job writes the
/// status, or the status after it). The job runs once the API answers again, and its `Succeed`
/// condition is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: faults, the audit log, the wiretap"
)]
async fn cron_hpa_retries_a_job_whose_status_write_fails_transiently() -> anyhow::Result<()> {
    let mut s = Scenario::start("cron-hpa").await?;
    create_deployment(&s.env, "web", 1, "100m", "64Mi").await?;
    let _service = s.spawn("cron-hpa-a", &[])?;
    s.wait_holder("cron-hpa-a").await?;
    job_three(&s.env, 10).await?;
    wait_job_three(&s.env, JobState::Submitted).await?;
    let status = format!("{}/status", CronHorizontalPodAutoscaler::plural(&()));
    s.sim().add_fault(burst("patch", &status, 500, 1));
    let succeeded = match wait_replicas(&s.env, "web", 3).await {
        Ok(()) => wait_job_three(&s.env, JobState::Succeed).await,
        Err(e) => Err(e),
    };
    let n = s.ledger.answered("PATCH", "/status", 500);
    let (outcome, lost) = if succeeded.is_ok() {
        ("retried; the job ran once", "nothing")
    } else {
        ("job marked Failed, not retried", "the job")
    };
    s.row("500 on PATCH status at the firing", n, outcome, lost);
    s.finish().await;
    succeeded
}

/// cron-hpa: a status write that fails five times in a row is retried until it lands, and the
/// operator's log says so once, naming the object, not once per retry (the retry every 5 s of a
/// write that keeps failing is otherwise a warning every 5 s for each such object).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: faults, the audit log, the wiretap"
)]
async fn cron_hpa_logs_a_repeated_reconcile_failure_once() -> anyhow::Result<()> {
    let s = Scenario::start("cron-hpa").await?;
    create_deployment(&s.env, "web", 1, "100m", "64Mi").await?;
    let log = std::env::temp_dir().join(format!("{}-cron-hpa.log", s.env.namespace));
    let _service = s.spawn_logged("cron-hpa-a", &[], Some(&log))?;
    s.wait_holder("cron-hpa-a").await?;
    job_three(&s.env, 10).await?;
    wait_job_three(&s.env, JobState::Submitted).await?;
    let status = format!("{}/status", CronHorizontalPodAutoscaler::plural(&()));
    s.sim().add_fault(burst("patch", &status, 500, 5));
    wait_replicas(&s.env, "web", 3).await?;
    wait_job_three(&s.env, JobState::Succeed).await?;
    assert_eq!(s.ledger.answered("PATCH", "/status", 500), 5);
    s.finish_warned_once(&log, "reconcile failed").await
}

/// vpa-recommender: a VPA a tenant padded with labels to just under what etcd stores takes no
/// status: the API server refuses every status write with a 500 (etcd's "request is too
/// large"), at every loop. That is one warning in the operator's log, naming the VPA, not one
/// per loop; the write is retried each loop and lands once the labels are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: faults, the audit log, the wiretap"
)]
async fn vpa_recommender_logs_a_status_write_failing_every_loop_once() -> anyhow::Result<()> {
    let s = Scenario::start("vpa-recommender").await?;
    recommender_workload(&s).await?;
    pad_to_the_etcd_limit(&s.env, "web", 200).await?;
    let log = std::env::temp_dir().join(format!("{}-vpa-recommender.log", s.env.namespace));
    let flags = [
        format!("--vpa-object-namespace={}", s.env.namespace),
        "--recommender-interval=1s".to_owned(),
    ];
    let _recommender = s.spawn_logged("vpa-recommender-a", &flags, Some(&log))?;
    eventually("six refused status writes", WITHIN, POLL, || async {
        Ok((s.ledger.answered("PATCH", "/status", 500) >= 6).then_some(()))
    })
    .await?;
    let vpas = s.env.api::<VerticalPodAutoscaler>();
    let unpad = json!({"metadata": {"labels": null}});
    vpas.patch(
        "web",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&unpad),
    )
    .await?;
    eventually(
        "the recommendation, once the labels are gone",
        WITHIN,
        POLL,
        || async {
            let vpa = vpas.get("web").await?;
            Ok(vpa.status.and_then(|st| st.recommendation).map(|_| ()))
        },
    )
    .await?;
    s.finish_warned_once(&log, "cannot write VPA status").await
}

/// Pads VPA `name` with labels until it is `room` bytes under etcd's limit as the sim measures
/// it (the object's compact JSON, as etcd stores a custom resource), so that a write adding
/// more than `room` bytes is refused.
async fn pad_to_the_etcd_limit(env: &Env, name: &str, room: usize) -> anyhow::Result<()> {
    let resource = kube::api::ApiResource::erase::<VerticalPodAutoscaler>(&());
    let api: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(env.client.clone(), &env.namespace, &resource);
    let want = plimsoll_sim::object_size::ETCD_MAX_REQUEST_BYTES - room;
    let label =
        |key: String, value: usize| json!({"metadata": {"labels": {key: "x".repeat(value)}}});
    let api = &api;
    let merge = |patch: serde_json::Value| async move {
        api.patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .map(|_| ())
    };
    // The last bytes are the value of one label (63 characters at most): a value's length
    // changes the object's by as much.
    merge(label("pad-tune".into(), 0)).await?;
    let mut added = 0;
    loop {
        let size = serde_json::to_vec(&api.get(name).await?)?.len();
        let short = want.checked_sub(size).context("padded past the limit")?;
        if short <= 63 {
            merge(label("pad-tune".into(), short)).await?;
            let size = serde_json::to_vec(&api.get(name).await?)?.len();
            anyhow::ensure!(size.abs_diff(want) <= 8, "padded to {size}, not {want}");
            return Ok(());
        }
        // A label of 9 + 63 characters costs 78 bytes (more where managed fields record it):
        // ask for fewer than fit and measure again.
        let labels: serde_json::Map<String, serde_json::Value> = (added..)
            .take((short - 63) / 100 + 1)
            .map(|i| (format!("pad-{i:05}"), json!("x".repeat(63))))
            .collect();
        added += labels.len();
        merge(json!({"metadata": {"labels": labels}})).await?;
    }
}

/// vpa-recommender: a steady 300m on one pod. A fault-free run keeps a recommendation from its
/// first write on, and its checkpoint's sample count only grows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: faults, the audit log, the wiretap"
)]
async fn vpa_recommender_never_resets_its_recommendation_under_faults_and_a_handover()
-> anyhow::Result<()> {
    let mut s = Scenario::start("vpa-recommender").await?;
    let ns = s.env.namespace.clone();
    recommender_workload(&s).await?;
    let flags = [
        format!("--vpa-object-namespace={ns}"),
        "--recommender-interval=1s".to_owned(),
        "--checkpoints-timeout=5s".to_owned(),
    ];
    let watcher = Watcher::start(&s.env);
    let status = format!("{}/status", VerticalPodAutoscaler::plural(&()));
    let checkpoints = VerticalPodAutoscalerCheckpoint::plural(&()).to_string();
    for fault in [
        burst("patch", &status, 500, BURST),
        burst("patch", &status, 429, BURST),
        burst("get", "metrics.k8s.io", 500, BURST),
        burst("get", "metrics.k8s.io", 429, BURST),
        burst("", &checkpoints, 500, BURST),
    ] {
        s.sim().add_fault(fault);
    }
    let mut leader = s.spawn("vpa-recommender-a", &flags)?;
    s.wait_holder("vpa-recommender-a").await?;
    let _standby = s.spawn("vpa-recommender-b", &flags)?;
    let expiry_mark = s.break_watches(3);
    eventually("a checkpoint with 10 samples", WITHIN, POLL, || async {
        Ok((watcher.max_samples() >= 10).then_some(()))
    })
    .await?;

    // The leader dies between computing a recommendation and writing it.
    let env = &s.env;
    let held = s
        .kill_mid_write(
            &mut leader,
            ("patch", &status),
            ("PATCH", "/verticalpodautoscalers/web/status"),
            || {
                env.audit()
                    .unwrap_or_default()
                    .iter()
                    .filter(|e| e.resource == "verticalpodautoscalers" && e.subresource == "status")
                    .count()
            },
        )
        .await?;
    let before = watcher.max_samples();
    s.wait_holder("vpa-recommender-b").await?;
    eventually("the standby's checkpoints grow", WITHIN, POLL, || async {
        Ok((watcher.max_samples() >= before + 10).then_some(()))
    })
    .await?;
    let seen = watcher.stop().await;

    recommender_rows(&mut s, &seen, before, held, expiry_mark);
    assert!(
        seen.recommendation_gaps == 0,
        "the recommendation vanished from status {} time(s)",
        seen.recommendation_gaps
    );
    assert_eq!(
        seen.resets(),
        0,
        "the checkpoint's samples went back: {seen:?}"
    );
    s.finish().await;
    Ok(())
}

/// vpa-recommender: one 500 on the checkpoint list a new leader restores its history from. The
/// new leader should retry the restore, not start empty and overwrite the checkpoint with fewer
/// samples (it once did: the checkpoint of 10 samples was overwritten with 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: faults, the audit log, the wiretap"
)]
async fn vpa_recommender_retries_a_failed_restore_after_a_handover() -> anyhow::Result<()> {
    let mut s = Scenario::start("vpa-recommender").await?;
    recommender_workload(&s).await?;
    let ns = s.env.namespace.clone();
    let flags = [
        format!("--vpa-object-namespace={ns}"),
        "--recommender-interval=1s".to_owned(),
        "--checkpoints-timeout=5s".to_owned(),
    ];
    let watcher = Watcher::start(&s.env);
    let mut leader = s.spawn("vpa-recommender-a", &flags)?;
    s.wait_holder("vpa-recommender-a").await?;
    eventually("a checkpoint with 10 samples", WITHIN, POLL, || async {
        Ok((watcher.max_samples() >= 10).then_some(()))
    })
    .await?;
    leader.kill()?;
    let checkpoints = VerticalPodAutoscalerCheckpoint::plural(&()).to_string();
    s.sim().add_fault(burst("list", &checkpoints, 500, 1));
    let _next = s.spawn("vpa-recommender-b", &flags)?;
    s.wait_holder("vpa-recommender-b").await?;
    // Long enough for several checkpoint writes by the new leader.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let seen = watcher.stop().await;
    let n = s
        .ledger
        .exchanges()
        .iter()
        .filter(|e| e.path.ends_with("/verticalpodautoscalercheckpoints") && e.status == 500)
        .count();
    let (outcome, lost) = if seen.resets() == 0 {
        ("restore retried; history kept", "nothing")
    } else {
        ("started empty; checkpoint overwritten", "history")
    };
    s.row("500 on the checkpoint list at takeover", n, outcome, lost);
    s.finish().await;
    assert_eq!(
        seen.resets(),
        0,
        "the checkpoint's samples went back: {seen:?}"
    );
    Ok(())
}

/// What the recommender test saw of the VPA and its checkpoint, polled.
#[derive(Debug, Default, Clone)]
struct Seen {
    samples: Vec<i64>,
    max: i64,
    recommended: bool,
    recommendation_gaps: usize,
}

impl Seen {
    /// Polls that saw the checkpoint's sample count below an earlier one (0 when it only grew).
    fn resets(&self) -> usize {
        let mut high = 0;
        let mut resets = 0;
        for &n in &self.samples {
            if n < high {
                resets += 1;
            }
            high = high.max(n);
        }
        resets
    }
}

/// Polls the VPA `web` and its checkpoint `web-app` in the background.
struct Watcher {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Watcher {
    fn start(env: &Env) -> Watcher {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let vpas = env.api::<VerticalPodAutoscaler>();
        let checkpoints = env.api::<VerticalPodAutoscalerCheckpoint>();
        let record = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                let recommended = vpas.get("web").await.ok().map(|v| {
                    v.status
                        .and_then(|s| s.recommendation)
                        .and_then(|r| r.container_recommendations)
                        .is_some_and(|c| !c.is_empty())
                });
                let samples = checkpoints
                    .get_opt("web-app")
                    .await
                    .ok()
                    .flatten()
                    .and_then(|c| c.status)
                    .and_then(|s| s.total_samples_count);
                {
                    let mut seen = record
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    match recommended {
                        Some(true) => seen.recommended = true,
                        Some(false) if seen.recommended => seen.recommendation_gaps += 1,
                        _ => {}
                    }
                    if let Some(n) = samples {
                        seen.samples.push(n);
                        seen.max = seen.max.max(n);
                    }
                }
                tokio::time::sleep(POLL).await;
            }
        });
        Watcher { seen, task }
    }

    fn max_samples(&self) -> i64 {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .max
    }

    async fn stop(self) -> Seen {
        self.task.abort();
        let _ = self.task.await;
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// Pods that are Ready and not terminating.
fn ready_count(pods: &[Pod]) -> usize {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count()
}

/// Deployment `web` at four Ready pods, and a Recreate VPA recommending far above them.
async fn updater_workload(s: &Scenario) -> anyhow::Result<()> {
    create_deployment(&s.env, "web", 4, "100m", "64Mi").await?;
    wait_ready_pods(&s.env, "web", 4, WITHIN, POLL).await?;
    create_recreate_vpa_far_above(&s.env.api::<VerticalPodAutoscaler>()).await?;
    Ok(())
}

/// vpa-updater: a namespace user's two PodDisruptionBudgets over the same pods make every
/// eviction of them a 500 (the eviction subresource supports one). Each loop tries again; the
/// operator's log says so once per VPA and error, not once per pod and loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: faults, the audit log, the wiretap"
)]
async fn vpa_updater_logs_evictions_a_tenant_makes_fail_once() -> anyhow::Result<()> {
    let s = Scenario::start("vpa-updater").await?;
    updater_workload(&s).await?;
    for name in ["web-a", "web-b"] {
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}
        }))?;
        s.env
            .api::<PodDisruptionBudget>()
            .create(&PostParams::default(), &pdb)
            .await?;
    }
    let log = std::env::temp_dir().join(format!("{}-vpa-updater.log", s.env.namespace));
    let flags = [
        format!("--vpa-object-namespace={}", s.env.namespace),
        "--use-admission-controller-status=false".to_owned(),
        "--updater-interval=1s".to_owned(),
    ];
    let _updater = s.spawn_logged("vpa-updater-a", &flags, Some(&log))?;
    // Two pods a loop (tolerance 0.5 of 4): five loops at least.
    let failed = || s.ledger.answered("POST", "/eviction", 500);
    eventually("ten refused evictions", WITHIN, POLL, || async {
        Ok((failed() >= 10).then_some(()))
    })
    .await?;
    let warned = one_warning(&log, "eviction failed")
        .with_context(|| format!("{} evictions refused", failed()))?;
    assert!(
        warned.contains("more than one PodDisruptionBudget")
            && warned.contains(&s.env.namespace)
            && warned.contains("\"web\""),
        "the warning names the VPA and why: {warned}"
    );
    let pods = s.env.api::<Pod>().list(&ListParams::default()).await?;
    assert_eq!(pods.items.len(), 4, "nothing evicted");
    s.finish().await;
    let _ = std::fs::remove_file(&log);
    Ok(())
}

/// vpa-updater: an in-place VPA recommending 20 cores, more than any node has, holds every
/// resize, which the updater reports in the VPA's `InPlaceResizeHeld` condition. A namespace
/// user who pads the VPA to just under what etcd stores makes that write fail at every loop:
/// one warning in the operator's log, and the condition lands once the labels are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: faults, the audit log, the wiretap"
)]
async fn vpa_updater_logs_a_condition_write_failing_every_loop_once() -> anyhow::Result<()> {
    let s = Scenario::start("vpa-updater").await?;
    create_deployment(&s.env, "web", 4, "100m", "64Mi").await?;
    wait_ready_pods(&s.env, "web", 4, WITHIN, POLL).await?;
    let vpas = s.env.api::<VerticalPodAutoscaler>();
    let vpa: VerticalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "updatePolicy": {"updateMode": "InPlace"}
        }
    }))?;
    vpas.create(&PostParams::default(), &vpa).await?;
    let status = json!({"status": {"recommendation": {"containerRecommendations": [{
        "containerName": "app",
        "target": {"cpu": "20", "memory": "64Mi"},
        "lowerBound": {"cpu": "10", "memory": "64Mi"},
        "upperBound": {"cpu": "40", "memory": "64Mi"}
    }]}}});
    let params = kube::api::PatchParams::default();
    vpas.patch_status("web", &params, &kube::api::Patch::Merge(&status))
        .await?;
    // The condition's message alone is longer than this.
    pad_to_the_etcd_limit(&s.env, "web", 100).await?;
    let log = std::env::temp_dir().join(format!("{}-vpa-updater.log", s.env.namespace));
    let flags = [
        format!("--vpa-object-namespace={}", s.env.namespace),
        "--use-admission-controller-status=false".to_owned(),
        "--updater-interval=1s".to_owned(),
    ];
    let _updater = s.spawn_logged("vpa-updater-a", &flags, Some(&log))?;
    eventually("five refused condition writes", WITHIN, POLL, || async {
        Ok((s.ledger.answered("PATCH", "/status", 500) >= 5).then_some(()))
    })
    .await?;
    let unpad = json!({"metadata": {"labels": null}});
    vpas.patch("web", &params, &kube::api::Patch::Merge(&unpad))
        .await?;
    eventually(
        "the condition, once the labels are gone",
        WITHIN,
        POLL,
        || async {
            let vpa = vpas.get("web").await?;
            let held = vpa
                .status
                .and_then(|st| st.conditions)
                .into_iter()
                .flatten()
                .find(|c| c.type_ == "InPlaceResizeHeld" && c.status == "True");
            Ok(held.map(|_| ()))
        },
    )
    .await?;
    s.finish_warned_once(&log, "cannot write the InPlaceResizeHeld condition")
        .await
}

/// The lowest number of Ready pods of `web` seen, polled in the background until aborted.
fn lowest_ready(env: &Env) -> (Arc<Mutex<usize>>, tokio::task::JoinHandle<()>) {
    let lowest = Arc::new(Mutex::new(usize::MAX));
    let poll = {
        let lowest = lowest.clone();
        let env_pods = env.api::<Pod>();
        tokio::spawn(async move {
            loop {
                if let Ok(list) = env_pods
                    .list(&ListParams::default().labels("app=web"))
                    .await
                {
                    let ready = ready_count(&list.items);
                    let mut low = lowest
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    *low = (*low).min(ready);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    (lowest, poll)
}

/// The vpa-updater rows of the table.
fn updater_rows(s: &mut Scenario, lowest: usize, evictions: usize, held: bool) {
    let lost = if lowest >= 2 {
        "nothing"
    } else {
        "availability beyond the budget"
    };
    for status in [500, 429] {
        let n = s.ledger.answered("POST", "/eviction", status);
        s.row(
            format!("{status} on POST pods/eviction"),
            n,
            "pod left for a later loop; budget kept",
            lost,
        );
    }
    let n = s
        .ledger
        .exchanges()
        .iter()
        .filter(|e| e.method == "GET" && e.path.ends_with("/pods") && e.status == 500)
        .count();
    s.row("500 on LIST pods", n, "loop skipped", lost);
    s.row(
        "leader SIGKILLed between deciding and evicting, standby takes over",
        1,
        &format!(
            "{}; {evictions} evictions in all, never fewer than {lowest} of 4 Ready",
            if held {
                "the held eviction landed"
            } else {
                "the held eviction was dropped"
            }
        ),
        lost,
    );
}

/// vpa-updater: four pods far below their recommendation, an eviction tolerance of 0.5: never
/// fewer than two of the four Ready, whatever fails or dies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: faults, the audit log, the wiretap"
)]
async fn vpa_updater_keeps_to_the_eviction_budget_under_faults_and_a_kill() -> anyhow::Result<()> {
    let mut s = Scenario::start("vpa-updater").await?;
    let ns = s.env.namespace.clone();
    updater_workload(&s).await?;
    let flags = [
        format!("--vpa-object-namespace={ns}"),
        "--use-admission-controller-status=false".to_owned(),
        "--eviction-tolerance=0.5".to_owned(),
        "--updater-interval=5s".to_owned(),
    ];
    let (lowest, poll) = lowest_ready(&s.env);
    let mut leader = s.spawn("vpa-updater-a", &flags)?;
    s.wait_holder("vpa-updater-a").await?;
    let _standby = s.spawn("vpa-updater-b", &flags)?;
    let env = &s.env;
    let held = s
        .kill_mid_write(
            &mut leader,
            ("create", "pods/eviction"),
            ("POST", "/eviction"),
            || env.evictions().unwrap_or_default().len(),
        )
        .await?;
    for fault in [
        burst("create", "pods/eviction", 500, BURST),
        burst("create", "pods/eviction", 429, BURST),
        burst("list", "pods", 500, BURST),
    ] {
        s.sim().add_fault(fault);
    }
    s.wait_holder("vpa-updater-b").await?;
    // Six evictions in all: every pod replaced at least once, some several times.
    eventually("six evictions", WITHIN, POLL, || async {
        Ok((env.evictions().unwrap_or_default().len() >= 6).then_some(()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    poll.abort();
    let lowest = *lowest
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let evictions = s.env.evictions().unwrap_or_default().len();
    updater_rows(&mut s, lowest, evictions, held);
    assert!(
        lowest >= 2,
        "at least 2 of 4 pods Ready throughout (tolerance 0.5): saw {lowest}"
    );
    s.finish().await;
    Ok(())
}
