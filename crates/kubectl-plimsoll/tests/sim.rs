//! `kubectl plimsoll` against an in-process plimsoll-sim (always, also when
//! `PLIMSOLL_E2E_KUBECONFIG` is set: these test the plugin, staging state through the sim), with
//! the real services in-process where a command reads what they write:
//! - the seed examples (a WatermarkPodAutoscaler with watermarks, Aliyun CronHPAs with several
//!   jobs) convert, apply (the sim validates them against the CRD schemas) and read back, and
//!   cron-hpa accepts the converted CronHPA;
//! - KEDA's documented ScaledObject examples convert into HPA+ and CronHPA objects the sim's CRD
//!   validation accepts;
//! - `explain hpaplus/NAME` after hpa-plus decided names the metric, its value, the limiting rule
//!   and the forbidden window left; `explain hpa/NAME` in native mode reads the memory annotation;
//! - `explain vpa/NAME` on the upstream checkpoint of the shared fixtures;
//! - `status` shows the leaders of the services that run, through the library and the binary;
//!   for a sharded hpa-plus, each shard's holder, and a killed holder's shards as expired.
//!
//! Each test prints the command's output, which docs/kubectl-plimsoll.md quotes.

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::PostParams;
use kubectl_plimsoll::Output;
use kubectl_plimsoll::convert::convert_text;
use kubectl_plimsoll::explain::{Settings, Target, explain};
use plimsoll_core::api::convert::Converted;
use plimsoll_core::api::cron::CronHorizontalPodAutoscaler;
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus;
use plimsoll_core::api::vpa::{VerticalPodAutoscaler, VerticalPodAutoscalerCheckpoint};
use plimsoll_core::service_health::ShardStatus;
use plimsoll_e2e::{Crashable, Env, Running, create_deployment, eventually};
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(60);
const EVERY: Duration = Duration::from_millis(250);

fn data(name: &str) -> anyhow::Result<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))
}

/// hpa-plus in-process with a 1 s period; with `lease` it runs leader election in the test's
/// namespace as that identity.
fn start_hpa_plus(env: &Env, lease: Option<&str>) -> Running<()> {
    start_hpa_plus_with(env, lease, false)
}

/// Like [`start_hpa_plus`], optionally in native mode (`--native-hpa`).
fn start_hpa_plus_with(env: &Env, lease: Option<&str>, native: bool) -> Running<()> {
    let mut args = vec![
        "hpa-plus".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        "--metrics-address=127.0.0.1:0".to_owned(),
        "--sync-period=1s".to_owned(),
        "--cpu-initialization-period=1s".to_owned(),
        "--initial-readiness-delay=0s".to_owned(),
        format!("--leader-elect={}", lease.is_some()),
        format!("--lease-namespace={}", env.namespace),
    ];
    args.push("--log-filter=warn".to_owned());
    args.push(format!("--native-hpa={native}"));
    let mut config = plimsoll_hpa_plus::cli::Args::try_parse_from(args)
        .expect("hpa-plus flags parse")
        .into_config()
        .expect("hpa-plus flags are valid");
    config.identity = lease.map(str::to_owned);
    Running::spawn("hpa-plus", |token| async move {
        if let Err(e) = plimsoll_hpa_plus::run(config, token).await {
            eprintln!("hpa-plus ended with an error: {e}");
        }
    })
}

/// cron-hpa in-process, leader-elected in the test's namespace as `identity`.
fn start_cron_hpa(env: &Env, identity: &str) -> Running<()> {
    let args = [
        "cron-hpa".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        "--metrics-address=127.0.0.1:0".to_owned(),
        "--leader-elect=true".to_owned(),
        format!("--lease-namespace={}", env.namespace),
        "--log-filter=warn".to_owned(),
    ];
    let mut config = plimsoll_cron_hpa::cli::Args::try_parse_from(args)
        .expect("cron-hpa flags parse")
        .into_config();
    config.identity = Some(identity.to_owned());
    Running::spawn("cron-hpa", |token| async move {
        if let Err(e) = plimsoll_cron_hpa::run(config, token).await {
            eprintln!("cron-hpa ended with an error: {e}");
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_examples_convert_apply_and_read_back() -> anyhow::Result<()> {
    let env = Env::start_sim("plugin-convert").await?;
    let mut input = String::new();
    for file in [
        "wpa-readme.yaml",
        "wpa-sample.yaml",
        "aliyun-cronhpa-exclude-dates.yaml",
    ] {
        input.push_str(&data(file)?);
        input.push_str("\n---\n");
    }
    let mut converted = convert_text(&input)?;
    println!("{}", converted.yaml()?);
    eprintln!("{}", converted.report());
    assert_eq!(converted.skipped, ["Deployment/nginx-deployment-basic"]);
    assert_eq!(converted.conversions.len(), 3);
    // Both DataDog examples are called example-watermarkpodautoscaler; the second gets a name
    // of its own so that both apply side by side.
    if let Converted::HpaPlus(o) = &mut converted.conversions[1].object {
        o.metadata.name = Some("example-watermarkpodautoscaler-sample".into());
    }
    let pluses = env.api::<HorizontalPodAutoscalerPlus>();
    let crons = env.api::<CronHorizontalPodAutoscaler>();
    for c in &converted.conversions {
        match &c.object {
            Converted::Several(_) => anyhow::bail!("{}: one object expected", c.source),
            Converted::HpaPlus(o) => {
                let name = o.metadata.name.clone().unwrap_or_default();
                pluses
                    .create(&PostParams::default(), o)
                    .await
                    .with_context(|| format!("apply {}", c.source))?;
                let back = pluses.get(&name).await?;
                assert_eq!(back.spec, o.spec, "{} reads back as written", c.source);
            }
            Converted::Cron(o) => {
                let name = o.metadata.name.clone().unwrap_or_default();
                crons
                    .create(&PostParams::default(), o)
                    .await
                    .with_context(|| format!("apply {}", c.source))?;
                let back = crons.get(&name).await?;
                assert_eq!(back.spec, o.spec, "{} reads back as written", c.source);
                assert_eq!(back.spec.jobs.len(), 2);
            }
        }
    }
    // The converted CronHPA is one cron-hpa runs: it submits both jobs. Its target exists, as
    // the seed's own Deployment does, because the jobs fire every 30 s: one that fires during
    // the test scales it (a missing target would fail the run, which is not what this checks).
    create_deployment(&env, "nginx-deployment-basic", 2, "100m", "64Mi").await?;
    let cron = start_cron_hpa(&env, "cron-hpa-test-0");
    let states = eventually("cron-hpa submits the converted jobs", WITHIN, EVERY, || {
        let crons = crons.clone();
        async move {
            let c = crons.get("cronhpa-sample").await?;
            let conditions = c.status.map(|s| s.conditions).unwrap_or_default();
            Ok((conditions.len() == 2).then(|| {
                conditions
                    .iter()
                    .map(|j| (j.name.clone(), format!("{:?}", j.state)))
                    .collect::<Vec<_>>()
            }))
        }
    })
    .await?;
    assert!(
        states
            .iter()
            .all(|(_, s)| s == "Submitted" || s == "Succeed"),
        "each job is submitted or ran: {states:?}"
    );
    cron.stop().await?;
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keda_examples_convert_and_the_sim_accepts_them() -> anyhow::Result<()> {
    let env = Env::start_sim("plugin-convert-keda").await?;
    let pluses = env.api::<HorizontalPodAutoscalerPlus>();
    let crons = env.api::<CronHorizontalPodAutoscaler>();
    let (mut hpa_plus_count, mut cron_count) = (0, 0);
    for file in [
        "keda-cpu-memory.yaml",
        "keda-cron.yaml",
        "keda-prometheus.yaml",
        "keda-spec.yaml",
    ] {
        let converted = convert_text(&data(file)?)?;
        println!("{}", converted.yaml()?);
        eprintln!("{}", converted.report());
        assert!(
            converted.skipped.is_empty(),
            "{file}: {:?}",
            converted.skipped
        );
        for (i, c) in converted.conversions.iter().enumerate() {
            // The examples share names and namespaces: each object gets a name of its own in
            // the test's namespace (and a CronHPA the name of the HPA+ it raises).
            let unique = format!("{}-{i}", file.trim_end_matches(".yaml"));
            for mut value in c.object.to_values()? {
                value["metadata"]["name"] = json!(unique);
                if let Some(meta) = value["metadata"].as_object_mut() {
                    meta.remove("namespace");
                }
                match value["kind"].as_str() {
                    Some("HorizontalPodAutoscalerPlus") => {
                        let o: HorizontalPodAutoscalerPlus = serde_json::from_value(value)?;
                        pluses
                            .create(&PostParams::default(), &o)
                            .await
                            .with_context(|| format!("{file}: apply {}", c.source))?;
                        assert_eq!(pluses.get(&unique).await?.spec, o.spec);
                        hpa_plus_count += 1;
                    }
                    Some("CronHorizontalPodAutoscaler") => {
                        if value["spec"]["scaleTargetRef"]["kind"] == "HorizontalPodAutoscalerPlus"
                        {
                            value["spec"]["scaleTargetRef"]["name"] = json!(unique);
                        }
                        let o: CronHorizontalPodAutoscaler = serde_json::from_value(value)?;
                        crons
                            .create(&PostParams::default(), &o)
                            .await
                            .with_context(|| format!("{file}: apply {}", c.source))?;
                        assert_eq!(crons.get(&unique).await?.spec, o.spec);
                        cron_count += 1;
                    }
                    other => anyhow::bail!("{file}: unexpected kind {other:?}"),
                }
            }
        }
    }
    // cpu, memory, cron+cpu, 2 × prometheus, the full spec; cron only and cron+cpu.
    assert_eq!((hpa_plus_count, cron_count), (6, 2));
    // A cron-raised HPA+ and its CronHPA are what cron-hpa runs: the CronHPA's jobs submit.
    let cron = start_cron_hpa(&env, "cron-hpa-keda-0");
    let states = eventually(
        "cron-hpa reads the converted KEDA cron jobs",
        WITHIN,
        EVERY,
        || {
            let crons = crons.clone();
            async move {
                let c = crons.get("keda-cron-1").await?;
                let conditions = c.status.map(|s| s.conditions).unwrap_or_default();
                Ok((conditions.len() == 2).then(|| {
                    conditions
                        .iter()
                        .map(|j| format!("{:?}", j.state))
                        .collect::<Vec<_>>()
                }))
            }
        },
    )
    .await?;
    assert!(
        states.iter().all(|s| s != "Failed"),
        "no job fails validation: {states:?}"
    );
    cron.stop().await?;
    env.cleanup().await;
    Ok(())
}

/// HPA+ `web`: 1–3 replicas on an External watermark metric `queue_messages` (band 10..20),
/// with a 600 s scale-down forbidden window.
fn web_on_queue() -> anyhow::Result<HorizontalPodAutoscalerPlus> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1", "kind": "HorizontalPodAutoscalerPlus",
        "metadata": {"name": "web"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 3, "syncPeriodSeconds": 1,
            "downscaleForbiddenWindowSeconds": 600,
            "metrics": [{"type": "External", "external": {"metric": {"name": "queue_messages"},
                "target": {"type": "Watermark", "lowWatermark": "10", "highWatermark": "20"}}}]
        }
    }))?)
}

/// Waits until hpa-plus has scaled `web` to 3 and holds it there at maxReplicas.
async fn held_at_max(
    api: &kube::Api<HorizontalPodAutoscalerPlus>,
) -> anyhow::Result<Option<plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlusStatus>> {
    eventually("hpa-plus holds web at maxReplicas", WITHIN, EVERY, || {
        let api = api.clone();
        async move {
            let status = api.get("web").await?.status;
            let held = status.as_ref().is_some_and(|s| {
                s.current_replicas == 3
                    && s.last_decision
                        .as_ref()
                        .is_some_and(|d| d.limited_by.as_deref() == Some("maxReplicas"))
            });
            Ok(held.then_some(status))
        }
    })
    .await
}

/// The seconds left on `what` in an explanation's "Waiting:" lines.
fn seconds_left(text: &str, what: &str) -> anyhow::Result<i64> {
    let prefix = format!("{what}: ");
    let line = text
        .lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(&prefix))
        .with_context(|| format!("no {what} line in {text}"))?;
    Ok(line[prefix.len()..]
        .split('s')
        .next()
        .unwrap_or_default()
        .parse()?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_hpaplus_names_metric_value_and_limit_after_a_decision() -> anyhow::Result<()> {
    let env = Env::start_sim("plugin-explain").await?;
    create_deployment(&env, "web", 2, "100m", "64Mi").await?;
    env.sim()?
        .cluster
        .model
        .set_external(&env.namespace, "queue_messages", 100.0);
    let api = env.api::<HorizontalPodAutoscalerPlus>();
    api.create(&PostParams::default(), &web_on_queue()?).await?;
    let hpa_plus = start_hpa_plus(&env, None);
    let decided = held_at_max(&api).await?;
    hpa_plus.stop().await?;
    let client = env.client.clone();
    let target = Target::parse("hpaplus/web")?;
    let now = jiff::Timestamp::now();
    let text = explain(
        &client,
        &env.namespace,
        &target,
        Settings::default(),
        Output::Text,
        now,
    )
    .await?;
    println!("{text}");
    assert!(
        text.contains(&format!(
            "HorizontalPodAutoscalerPlus {}/web -> Deployment/web",
            env.namespace
        )),
        "{text}"
    );
    assert!(
        text.contains("Replicas: 3 current, 3 desired (min 1, max 3)"),
        "{text}"
    );
    // The metric, its value (as the controller saw it) and its target band.
    let value = decided
        .as_ref()
        .and_then(|s| s.current_metrics.first())
        .and_then(|m| m.external.as_ref())
        .and_then(|e| e.current.value.as_ref())
        .map(|q| q.0.clone())
        .context("the status has the metric's value")?;
    assert_eq!(value, "100");
    assert!(
        text.contains("queue_messages: current 100, target band 10..20 -> proposes"),
        "{text}"
    );
    assert!(
        text.contains("Limited by: maxReplicas (clamped down to maxReplicas)"),
        "{text}"
    );
    // The scale to 3 started the 600 s scale-down forbidden window.
    let left = seconds_left(&text, "downscaleForbiddenWindow")?;
    assert!((500..=600).contains(&left), "{text}");
    // The same explanation as JSON, for scripts.
    let json_text = explain(
        &client,
        &env.namespace,
        &target,
        Settings::default(),
        Output::Json,
        now,
    )
    .await?;
    let v: serde_json::Value = serde_json::from_str(&json_text)?;
    assert_eq!(v["limitedBy"], "maxReplicas");
    assert_eq!(v["metrics"][0]["metric"], "queue_messages");
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_native_hpa_reads_the_memory_annotation() -> anyhow::Result<()> {
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    let env = Env::start_sim("plugin-native").await?;
    create_deployment(&env, "web", 2, "100m", "64Mi").await?;
    env.sim()?
        .cluster
        .model
        .set_external(&env.namespace, "queue_messages", 100.0);
    let hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "annotations": {"plimsoll.dev/resync-period": "1s"}},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 3,
            "metrics": [{"type": "External", "external": {"metric": {"name": "queue_messages"},
                "target": {"type": "AverageValue", "averageValue": "10"}}}]
        }
    }))?;
    let api = env.api::<HorizontalPodAutoscaler>();
    api.create(&PostParams::default(), &hpa).await?;
    let hpa_plus = start_hpa_plus_with(&env, None, true);
    eventually(
        "hpa-plus scales the native HPA's target to 3",
        WITHIN,
        EVERY,
        || {
            let api = api.clone();
            async move {
                let hpa = api.get("web").await?;
                let scaled = hpa
                    .status
                    .as_ref()
                    .is_some_and(|s| s.current_replicas == Some(3));
                let remembered = hpa
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key("plimsoll.dev/decision-memory"));
                // An evaluation after the scale-up can come before the new pods count (100 per
                // pod over 1); wait for one that averages over all 3.
                let averaged = hpa
                    .status
                    .as_ref()
                    .and_then(|s| s.current_metrics.as_ref())
                    .and_then(|m| m.first())
                    .and_then(|m| m.external.as_ref())
                    .and_then(|e| e.current.average_value.as_ref())
                    .is_some_and(|v| v.0 == "33334m");
                Ok((scaled && remembered && averaged).then_some(()))
            }
        },
    )
    .await?;
    hpa_plus.stop().await?;
    let text = explain(
        &env.client,
        &env.namespace,
        &Target::parse("hpa/web")?,
        Settings::default(),
        Output::Text,
        jiff::Timestamp::now(),
    )
    .await?;
    println!("{text}");
    assert!(
        text.contains(&format!(
            "HorizontalPodAutoscaler {}/web -> Deployment/web",
            env.namespace
        )),
        "{text}"
    );
    // An AverageValue External metric is reported per pod: 100 over the 3 replicas.
    assert!(
        text.contains("queue_messages: current 33334m per pod"),
        "{text}"
    );
    assert!(text.contains("target 10 per pod"), "{text}");
    assert!(
        text.contains("ScalingLimited=True TooManyReplicas"),
        "{text}"
    );
    assert!(text.contains("no last decision"), "{text}");
    // The memory annotation carries the recommendations the stabilization window considers.
    assert!(
        text.contains("Recommendations stabilization considers (last 300s"),
        "{text}"
    );
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_vpa_from_the_upstream_checkpoint() -> anyhow::Result<()> {
    let env = Env::start_sim("plugin-vpa").await?;
    let mut vpa: VerticalPodAutoscaler = serde_saphyr::from_str(&data("vpa-nginx.yaml")?)?;
    vpa.metadata.namespace = None;
    env.api::<VerticalPodAutoscaler>()
        .create(&PostParams::default(), &vpa)
        .await?;
    let mut checkpoint: VerticalPodAutoscalerCheckpoint =
        serde_saphyr::from_str(&data("vpa-checkpoint-nginx.yaml")?)?;
    checkpoint.metadata.namespace = None;
    checkpoint.metadata.creation_timestamp = None;
    env.api::<VerticalPodAutoscalerCheckpoint>()
        .create(&PostParams::default(), &checkpoint)
        .await?;
    let text = explain(
        &env.client,
        &env.namespace,
        &Target::parse("vpa/nginx-vpa")?,
        Settings::default(),
        Output::Text,
        jiff::Timestamp::now(),
    )
    .await?;
    println!("{text}");
    assert!(
        text.contains("Container nginx (checkpoint nginx-vpa-nginx)"),
        "{text}"
    );
    assert!(text.contains("History: 9371 CPU samples"), "{text}");
    assert!(text.contains("Confidence: 6.5076"), "{text}");
    assert!(
        text.contains("Capped: cpu capped to minAllowed -> target cpu 90m, memory 250Mi"),
        "{text}"
    );
    assert!(text.contains("Note: OOM kills"), "{text}");
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_the_leaders_of_running_services() -> anyhow::Result<()> {
    let env = Env::start_sim("plugin-status").await?;
    // The hpa-plus Deployment as deploy/ labels it; the sim runs its pod.
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "plimsoll-hpa-plus"},
        "spec": {"replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "plimsoll", "app.kubernetes.io/component": "hpa-plus"}},
            "template": {"metadata": {"labels": {"app.kubernetes.io/name": "plimsoll", "app.kubernetes.io/component": "hpa-plus"}},
                "spec": {"containers": [{"name": "hpa-plus", "image": "ghcr.io/plimsoll-dev/hpa-plus:0.1.0",
                    "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}]}}}
    }))?;
    env.api::<Deployment>()
        .create(&PostParams::default(), &d)
        .await?;
    let hpa_plus = start_hpa_plus(&env, Some("hpa-plus-test-0"));
    let cron = start_cron_hpa(&env, "cron-hpa-test-0");
    let client = env.client.clone();
    let namespace = env.namespace.clone();
    let health = eventually(
        "both leaders elected, the hpa-plus pod ready",
        WITHIN,
        EVERY,
        || {
            let client = client.clone();
            let namespace = namespace.clone();
            async move {
                let all = kubectl_plimsoll::status::assess_all(
                    &client,
                    &namespace,
                    jiff::Timestamp::now(),
                )
                .await?;
                let leading = |i: usize| all[i].lease.as_ref().is_some_and(|l| !l.expired);
                Ok((leading(0) && leading(1) && all[0].ready_pods == 1).then_some(all))
            }
        },
    )
    .await?;
    let text =
        kubectl_plimsoll::status::status(&client, &namespace, Output::Text, jiff::Timestamp::now())
            .await?;
    println!("{text}");
    let row = |service: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{service} ")))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(row("hpa-plus").contains("Healthy"), "{text}");
    assert!(row("hpa-plus").contains("hpa-plus-test-0"), "{text}");
    assert!(row("hpa-plus").contains("0.1.0"), "{text}");
    assert!(row("cron-hpa").contains("cron-hpa-test-0"), "{text}");
    assert!(
        text.contains("cron-hpa: Deployment plimsoll-cron-hpa not found"),
        "{text}"
    );
    assert!(row("vpa-recommender").contains("NotInstalled"), "{text}");
    assert_eq!(health[0].versions, ["0.1.0"]);

    // The binary, as `kubectl plimsoll status` runs it, with the test's kubeconfig.
    let exe = env!("CARGO_BIN_EXE_kubectl-plimsoll");
    let args = [
        "status".to_owned(),
        "-n".to_owned(),
        namespace.clone(),
        "-o".to_owned(),
        "json".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
    ];
    let out =
        tokio::task::spawn_blocking(move || std::process::Command::new(exe).args(args).output())
            .await??;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(v[0]["service"], "hpa-plus");
    assert_eq!(v[0]["lease"]["holder"], "hpa-plus-test-0");
    assert_eq!(v[1]["lease"]["holder"], "cron-hpa-test-0");
    hpa_plus.stop().await?;
    cron.stop().await?;
    env.cleanup().await;
    Ok(())
}

#[test]
fn the_binary_converts_from_stdin_and_reports_on_stderr() -> anyhow::Result<()> {
    use std::io::Write as _;
    let exe = env!("CARGO_BIN_EXE_kubectl-plimsoll");
    let run = |args: &[&str], input: &str| -> anyhow::Result<std::process::Output> {
        let mut child = std::process::Command::new(exe)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        child
            .stdin
            .take()
            .context("stdin")?
            .write_all(input.as_bytes())?;
        Ok(child.wait_with_output()?)
    };
    let out = run(&["convert", "-f", "-"], &data("wpa-readme.yaml")?)?;
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout)?;
    assert!(
        stdout.starts_with(
            "---\n# Converted from WatermarkPodAutoscaler/example-watermarkpodautoscaler"
        ),
        "{stdout}"
    );
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&stdout)?;
    assert_eq!(docs[0]["kind"], "HorizontalPodAutoscalerPlus");
    assert_eq!(
        docs[0]["spec"]["metrics"][0]["external"]["target"]["highWatermark"],
        "400m"
    );
    let stderr = String::from_utf8(out.stderr)?;
    assert!(stderr.contains("every field carried over"), "{stderr}");
    // --strict fails when something is lost: the @date schedules lose their year.
    let out = run(&["convert", "--strict"], &data("aliyun-cronhpa-date.yaml")?)?;
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8(out.stderr)?;
    assert!(
        stderr.contains("not carried over: spec.jobs[0].schedule"),
        "{stderr}"
    );
    Ok(())
}

/// `--lease-duration` of the sharded replicas: a killed holder's shards expire this long after
/// its last renewal.
const SHARD_LEASE: Duration = Duration::from_secs(4);

/// hpa-plus flags for one replica of a sharded run (`--shards 4`) as `identity`.
fn sharded_hpa_plus(env: &Env, identity: &str) -> plimsoll_hpa_plus::Config {
    let args = [
        "hpa-plus".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        "--metrics-address=127.0.0.1:0".to_owned(),
        "--sync-period=1s".to_owned(),
        "--leader-elect=true".to_owned(),
        format!("--lease-namespace={}", env.namespace),
        format!("--lease-duration={}s", SHARD_LEASE.as_secs()),
        "--renew-deadline=3s".to_owned(),
        "--retry-period=500ms".to_owned(),
        "--shards=4".to_owned(),
        "--log-filter=warn".to_owned(),
    ];
    let mut config = plimsoll_hpa_plus::cli::Args::try_parse_from(args)
        .expect("hpa-plus flags parse")
        .into_config()
        .expect("hpa-plus flags are valid");
    config.identity = Some(identity.to_owned());
    config
}

/// The health of hpa-plus (the first service) as `status` assesses it now.
async fn hpa_plus_health(
    env: &Env,
) -> anyhow::Result<plimsoll_core::service_health::ServiceHealth> {
    let all =
        kubectl_plimsoll::status::assess_all(&env.client, &env.namespace, jiff::Timestamp::now())
            .await?;
    all.into_iter()
        .next()
        .context("status lists hpa-plus first")
}

/// The hpa-plus Deployment as the chart renders it for two replicas: the shard count is its
/// `--shards`. The sim runs its pods.
async fn create_sharded_deployment(env: &Env) -> anyhow::Result<()> {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "plimsoll-hpa-plus"},
        "spec": {"replicas": 2,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "plimsoll", "app.kubernetes.io/component": "hpa-plus"}},
            "template": {"metadata": {"labels": {"app.kubernetes.io/name": "plimsoll", "app.kubernetes.io/component": "hpa-plus"}},
                "spec": {"containers": [{"name": "hpa-plus", "image": "ghcr.io/plimsoll-dev/hpa-plus:0.1.0",
                    "args": ["--leader-elect=true", "--shards=4"],
                    "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}]}}}
    }))?;
    env.api::<Deployment>()
        .create(&PostParams::default(), &d)
        .await?;
    Ok(())
}

/// `kubectl plimsoll status -o json`, run as the binary with the test's kubeconfig.
async fn status_json(env: &Env) -> anyhow::Result<serde_json::Value> {
    let exe = env!("CARGO_BIN_EXE_kubectl-plimsoll");
    let args = [
        "status".to_owned(),
        "-n".to_owned(),
        env.namespace.clone(),
        "-o".to_owned(),
        "json".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
    ];
    let out =
        tokio::task::spawn_blocking(move || std::process::Command::new(exe).args(args).output())
            .await??;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// Every shard of `health` expired, its Lease still naming `holder` and renewed at least a lease
/// duration ago; the service down and each shard named as a problem.
fn assert_expired_naming(
    health: &plimsoll_core::service_health::ServiceHealth,
    holder: &str,
) -> anyhow::Result<()> {
    let sharded = health.shards.as_ref().context("sharded")?;
    for s in &sharded.shards {
        let lease = s.lease.as_ref().context("the Lease stays")?;
        assert_eq!(lease.holder.as_deref(), Some(holder), "shard {}", s.shard);
        assert!(
            lease.renewed_seconds_ago.unwrap_or_default() >= i64::try_from(SHARD_LEASE.as_secs())?,
            "shard {}: {lease:?}",
            s.shard
        );
    }
    assert!(sharded.holders.is_empty());
    assert_eq!(
        health.verdict,
        plimsoll_core::service_health::Verdict::Down,
        "{:?}",
        health.problems
    );
    let named = format!(
        "shard 3 not held: Lease plimsoll-hpa-plus-shard-3 has expired: its holder {holder}"
    );
    assert!(
        health.problems.iter().any(|p| p.starts_with(&named)),
        "{:?}",
        health.problems
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_each_shard_of_a_sharded_hpa_plus() -> anyhow::Result<()> {
    let env = Env::start_sim("plugin-status-shards").await?;
    create_sharded_deployment(&env).await?;
    let config_a = sharded_hpa_plus(&env, "hpa-plus-a");
    let config_b = sharded_hpa_plus(&env, "hpa-plus-b");
    let a = Crashable::start("hpa-plus-a", |token| {
        plimsoll_hpa_plus::run(config_a, token)
    });
    let mut b = Crashable::start("hpa-plus-b", |token| {
        plimsoll_hpa_plus::run(config_b, token)
    });

    // Both replicas hold two shards each.
    let health = eventually("four shards, two per replica", WITHIN, EVERY, || async {
        let h = hpa_plus_health(&env).await?;
        let spread = h.shards.as_ref().is_some_and(|s| {
            s.held() == 4 && s.holders.len() == 2 && s.holders.values().all(|n| *n == 2)
        });
        Ok((spread && h.ready_pods == 2).then_some(h))
    })
    .await?;
    let sharded = health.shards.as_ref().context("sharded")?;
    assert_eq!(sharded.count, 4, "the Deployment's --shards");
    assert_eq!(health.lease, None, "no single Lease");
    // Each shard's holder is the one its Lease names, read on its own.
    let leases = env.api::<Lease>();
    for s in &sharded.shards {
        let lease = leases.get(&s.lease_name).await?;
        let named = lease.spec.and_then(|spec| spec.holder_identity);
        let shown = s.lease.as_ref().and_then(|l| l.holder.clone());
        // Balanced and both alive, no shard moves between the two reads.
        assert_eq!(shown, named, "shard {}", s.shard);
        assert!(
            matches!(shown.as_deref(), Some("hpa-plus-a" | "hpa-plus-b")),
            "shard {}: {shown:?}",
            s.shard
        );
    }
    let text = kubectl_plimsoll::status::status(
        &env.client,
        &env.namespace,
        Output::Text,
        jiff::Timestamp::now(),
    )
    .await?;
    println!("{text}");
    assert!(text.contains("4/4 shards, 2 holders"), "{text}");
    assert!(
        text.contains("hpa-plus: 4 shards (--shards of its Deployment)"),
        "{text}"
    );

    // a stops gracefully: it releases its shards, and b takes them.
    a.stop().await;
    eventually("b holds every shard", WITHIN, EVERY, || async {
        let h = hpa_plus_health(&env).await?;
        let all_b = h
            .shards
            .as_ref()
            .is_some_and(|s| s.held() == 4 && s.holders.get("hpa-plus-b") == Some(&4));
        Ok(all_b.then_some(()))
    })
    .await?;

    // b is killed: nothing is released, and nobody is left to take its shards over, so once its
    // Leases have run out every shard shows as expired, naming b.
    b.crash();
    let health = eventually("every shard expired, naming b", WITHIN, EVERY, || async {
        let h = hpa_plus_health(&env).await?;
        let expired = h
            .shards
            .as_ref()
            .is_some_and(|s| s.shards.iter().all(|s| s.status == ShardStatus::Expired));
        Ok(expired.then_some(h))
    })
    .await?;
    assert_expired_naming(&health, "hpa-plus-b")?;
    let text = kubectl_plimsoll::status::status(
        &env.client,
        &env.namespace,
        Output::Text,
        jiff::Timestamp::now(),
    )
    .await?;
    println!("{text}");
    assert!(text.contains("0/4 shards, 0 holders"), "{text}");
    assert_eq!(text.matches("EXPIRED (holder gone)").count(), 4, "{text}");

    // The binary says the same in JSON.
    let v = status_json(&env).await?;
    assert_eq!(v[0]["service"], "hpa-plus");
    assert_eq!(v[0]["shards"]["count"], 4);
    for i in 0..4 {
        assert_eq!(
            v[0]["shards"]["shards"][i]["status"], "Expired",
            "shard {i}"
        );
        assert_eq!(v[0]["shards"]["shards"][i]["lease"]["holder"], "hpa-plus-b");
    }
    drop(b);
    env.cleanup().await;
    Ok(())
}
