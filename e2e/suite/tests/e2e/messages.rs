//! What a user reads: conditions and Events carry the API server's own message (never kube's
//! debug dump of the answer), for hpa-plus and cron-hpa alike, and the REFERENCE column of
//! `kubectl get hpaplus` (`.status.reference`) shows the target whatever else is wrong with the
//! object.
//!
//! Nothing here needs the sim's control API: the same tests run against a real cluster, whose
//! messages are the ones asserted (`deployments.apps "absent" not found`).

use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use plimsoll_core::api::cron::{CronHorizontalPodAutoscaler, JobState};
use plimsoll_core::api::hpa_plus::{HorizontalPodAutoscalerCondition, HorizontalPodAutoscalerPlus};
use plimsoll_cron_hpa::{CommonArgs, LogFormat};
use plimsoll_e2e::{Env, Running, create_deployment, eventually};
use plimsoll_hpa_plus::cli::Args;
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(60);
const EVERY: Duration = Duration::from_millis(250);

/// What a message must never contain: pieces of a Rust debug dump of `kube::Error`.
const DUMP: [&str; 4] = ["Status {", "ApiError", "Some(", "code: "];

/// An in-process hpa-plus on the test's cluster with a short period.
fn start(env: &Env) -> Running<()> {
    let args = [
        "hpa-plus".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        "--metrics-address=127.0.0.1:0".to_owned(),
        "--leader-elect=false".to_owned(),
        "--sync-period=1s".to_owned(),
    ];
    let config = Args::try_parse_from(args)
        .expect("test flags parse")
        .into_config()
        .expect("test flags are valid");
    plimsoll_e2e::spawn_hpa_plus(config)
}

/// An in-process cron-hpa on the test's cluster.
fn start_cron(env: &Env) -> Running<()> {
    let config = plimsoll_cron_hpa::Config {
        common: CommonArgs {
            kubeconfig: Some(env.kubeconfig.clone()),
            context: None,
            kube_api_qps: 0.0,
            kube_api_burst: None,
            metrics_address: "127.0.0.1:0".parse().expect("an address"),
            log_format: LogFormat::Text,
            log_filter: Some("info".into()),
            leader_elect: false,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            lease_namespace: Some(env.namespace.clone()),
            lease_owner_deployment: None,
            admin_listener: plimsoll_runtime::AdminListenerArgs::default(),
        },
        missed_job_grace: Duration::from_secs(300),
        min_job_interval: Duration::ZERO,
        identity: None,
    };
    Running::spawn("cron-hpa", |token| async move {
        if let Err(e) = plimsoll_cron_hpa::run(config, token).await {
            eprintln!("cron-hpa ended with an error: {e}");
        }
    })
}

/// An HPA+ `name` on Deployment `target` with `spec` merged over the required fields.
fn hpa_plus(name: &str, target: &str, spec: &serde_json::Value) -> HorizontalPodAutoscalerPlus {
    let base = json!({
        "minReplicas": 1,
        "maxReplicas": 5,
    });
    plimsoll_e2e::hpa_plus_fixture(name, target, &base, spec).expect("hpa-plus fixture")
}

/// The condition `type_=False` with `reason` on HPA+ `name`, once the controller wrote it.
async fn false_condition(
    env: &Env,
    name: &str,
    type_: &str,
    reason: &str,
) -> anyhow::Result<(HorizontalPodAutoscalerCondition, Option<String>)> {
    let api = env.api::<HorizontalPodAutoscalerPlus>();
    eventually(&format!("{type_}=False ({reason})"), WITHIN, EVERY, || {
        let api = api.clone();
        async move {
            let status = api.get(name).await?.status;
            Ok(status.and_then(|s| {
                let found = s.conditions.into_iter().find(|c| {
                    c.type_ == type_ && c.status == "False" && c.reason.as_deref() == Some(reason)
                });
                found.map(|c| (c, s.reference))
            }))
        }
    })
    .await
}

/// The note of the first Warning Event `reason` about `name` that satisfies `matches`.
async fn warning_note(
    env: &Env,
    name: &str,
    reason: &str,
    matches: impl Fn(&str) -> bool,
) -> anyhow::Result<String> {
    let events = env.api::<Event>();
    eventually(&format!("a Warning Event {reason}"), WITHIN, EVERY, || {
        let events = events.clone();
        let matches = &matches;
        async move {
            let list = events.list(&ListParams::default()).await?;
            Ok(list.items.into_iter().find_map(|e| {
                let about = e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name);
                let note = e.note.unwrap_or_default();
                (about
                    && e.type_.as_deref() == Some("Warning")
                    && e.reason.as_deref() == Some(reason)
                    && matches(&note))
                .then_some(note)
            }))
        }
    })
    .await
}

fn assert_no_dump(what: &str, text: &str) {
    for piece in DUMP {
        assert!(!text.contains(piece), "{what} has {piece:?}: {text}");
    }
}

/// A target that does not exist: the Event's note is the API server's message and the
/// condition says what failed with that message, as upstream's HPA controller writes them;
/// REFERENCE shows the target all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_target_reads_as_the_api_servers_message() -> anyhow::Result<()> {
    let env = Env::start("messages-missing").await?;
    let service = start(&env);
    env.api::<HorizontalPodAutoscalerPlus>()
        .create(
            &PostParams::default(),
            &hpa_plus("web", "absent", &json!({})),
        )
        .await?;
    let api_message = r#"deployments.apps "absent" not found"#;

    let (condition, reference) =
        false_condition(&env, "web", "AbleToScale", "FailedGetScale").await?;
    let message = condition.message.unwrap_or_default();
    assert_no_dump("the condition message", &message);
    assert_eq!(
        message,
        format!("the HPA controller was unable to get the target's current scale: {api_message}")
    );
    assert_eq!(reference.as_deref(), Some("Deployment/absent"));

    let note = warning_note(&env, "web", "FailedGetScale", |_| true).await?;
    assert_no_dump("the Event note", &note);
    assert_eq!(note, api_message);

    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// A metric that cannot be read (no custom metric of that name): `ScalingActive` is False with
/// the metric's reason, its message is no debug dump, and REFERENCE still shows the target.
/// (An invalid spec is refused at write time by the CRD's rules now, so the controller-side
/// invalid-spec path is covered by `horizontal::status` unit tests instead:
/// `a_failure_before_any_decision_still_fills_the_reference`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_metric_still_shows_the_reference() -> anyhow::Result<()> {
    let env = Env::start("messages-failing-metric").await?;
    create_deployment(&env, "web", 2, "100m", "64Mi").await?;
    let service = start(&env);
    let metrics = json!({"metrics": [{"type": "Pods", "pods": {
        "metric": {"name": "no_such_metric"},
        "target": {"type": "AverageValue", "averageValue": "10"}}}]});
    env.api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), &hpa_plus("web", "web", &metrics))
        .await?;

    let (condition, reference) =
        false_condition(&env, "web", "ScalingActive", "FailedGetPodsMetric").await?;
    let message = condition.message.unwrap_or_default();
    assert!(
        message.starts_with("the HPA was unable to compute the replica count: "),
        "upstream's wording: {message}"
    );
    assert_no_dump("the condition message", &message);
    assert_eq!(reference.as_deref(), Some("Deployment/web"));

    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// A CronHPA job on a Deployment that does not exist: the job's `Failed` condition and its
/// Warning Event carry the API server's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_job_on_a_missing_target_reads_as_the_api_servers_message() -> anyhow::Result<()> {
    let env = Env::start("messages-cron").await?;
    let service = start_cron(&env);
    let cron: CronHorizontalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
        "kind": "CronHorizontalPodAutoscaler",
        "metadata": {"name": "nightly"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "absent"},
            // Every second: the job fires as soon as the service sees it.
            "jobs": [{"name": "peak", "schedule": "* * * * * *", "targetSize": 3}],
        }
    }))?;
    env.api::<CronHorizontalPodAutoscaler>()
        .create(&PostParams::default(), &cron)
        .await?;
    let api_message = r#"deployments.apps "absent" not found"#;

    let api = env.api::<CronHorizontalPodAutoscaler>();
    let failed = eventually("job peak Failed", WITHIN, EVERY, || {
        let api = api.clone();
        async move {
            let status = api.get("nightly").await?.status;
            Ok(status
                .into_iter()
                .flat_map(|s| s.conditions)
                .find(|c| c.name == "peak" && c.state == JobState::Failed))
        }
    })
    .await?;
    assert_no_dump("the job's condition", &failed.message);
    assert!(
        failed.message.contains(api_message),
        "the condition carries the API message: {}",
        failed.message
    );

    let note = warning_note(&env, "nightly", "JobFailed", |n| n.contains(api_message)).await?;
    assert_no_dump("the Event note", &note);

    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}
