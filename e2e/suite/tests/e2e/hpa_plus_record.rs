//! Record on a cluster, replay offline (issue 30): hpa-plus runs live on the sim with
//! `--record-dir` while a workload's load goes up, down, up and down again; the recording then
//! replays through the library's replay of recordings decision for decision, its scale writes
//! are exactly those the sim's audit log saw, and a `--set` of a longer scale-down
//! stabilization window changes decisions.
//!
//! Short periods instead of long sleeps: a 1 s sync period and a 6 s stabilization window, so
//! each phase takes seconds.

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use kube::api::PostParams;
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus;
use plimsoll_core::horizontal::recording::{self, Line};
use plimsoll_e2e::{Env, eventually};
use plimsoll_hpa_plus::replay::{Set, recording_files, replay_recording_files};
use plimsoll_sim::{LoadProfile, LoadSpec};
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(90);
const EVERY: Duration = Duration::from_millis(250);

fn constant(value: f64) -> LoadSpec {
    LoadSpec {
        profile: LoadProfile::Constant { value },
        ..LoadSpec::default()
    }
}

async fn wait_replicas(env: &Env, name: &str, replicas: i32) -> anyhow::Result<()> {
    eventually(
        &format!("{name} scaled to {replicas}"),
        WITHIN,
        EVERY,
        || async move {
            let now = plimsoll_e2e::deployment_replicas(env, name).await?;
            Ok((now == replicas).then_some(()))
        },
    )
    .await
}

/// The recorded evaluations of the recording at `file` (with its rotated files), in order.
fn evaluations(file: &Path) -> anyhow::Result<Vec<recording::Evaluation>> {
    let mut out = Vec::new();
    for f in recording_files(file) {
        let text = std::fs::read_to_string(&f).with_context(|| f.display().to_string())?;
        let parsed = recording::parse(&text)?;
        anyhow::ensure!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        out.extend(parsed.lines.into_iter().filter_map(|(_, l)| match l {
            Line::Evaluation(e) => Some(e),
            _ => None,
        }));
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: the workload model's request load and the audit log"
)]
async fn a_live_recording_replays_decision_for_decision() -> anyhow::Result<()> {
    let env = Env::start("hpa-plus-record").await?;
    let sim = env.sim()?;
    let dir = std::env::temp_dir().join(format!(
        "plimsoll-e2e-record-{}-{}",
        std::process::id(),
        env.namespace
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let record_dir = format!("--record-dir={}", dir.display());
    plimsoll_e2e::create_deployment(&env, "web", 1, "100m", "64Mi").await?;
    plimsoll_e2e::wait_deployment_ready(&env, "web", 1, WITHIN).await?;
    sim.set_load(&env.namespace, "deployments", "web", constant(5.0));
    let service =
        plimsoll_e2e::spawn_hpa_plus(plimsoll_e2e::hpa_plus_config(&env, &[record_dir.as_str()]));
    let spec = json!({
        "syncPeriodSeconds": 1,
        "metrics": [{"type": "Pods", "pods": {
            "metric": {"name": "requests_per_second"},
            "target": {"type": "AverageValue", "averageValue": "10"}}}],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 6}},
    });
    let base = json!({"minReplicas": 1, "maxReplicas": 10});
    let hpa = plimsoll_e2e::hpa_plus_fixture("web", "web", &base, &spec)?;
    env.api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), &hpa)
        .await?;

    // Up (30 against 10 per pod: 3), down (5: 1, after the window), up, down.
    for (load, replicas) in [(30.0, 3), (5.0, 1), (30.0, 3), (5.0, 1)] {
        sim.set_load(&env.namespace, "deployments", "web", constant(load));
        wait_replicas(&env, "web", replicas).await?;
        plimsoll_e2e::wait_deployment_ready(&env, "web", replicas, WITHIN).await?;
    }
    let _ = service.stop().await;

    let file = dir.join(&env.namespace).join("web.jsonl");
    let recorded = evaluations(&file)?;
    // What hpa-plus wrote is what the recording says it wrote.
    let writes: Vec<(i32, i32)> = recorded
        .iter()
        .filter(|e| e.scaled)
        .filter_map(|e| Some((e.observed.current_replicas, e.decision.scale_to?)))
        .collect();
    let audited = env
        .scale_writes("hpa-plus", "web")
        .context("needs the sim's audit log")?;
    assert_eq!(writes.len(), audited, "recorded writes {writes:?}");
    let ups = writes.iter().filter(|(from, to)| to > from).count();
    let downs = writes.iter().filter(|(from, to)| to < from).count();
    assert!(ups >= 2 && downs >= 2, "writes {writes:?}");
    assert_eq!(
        writes.last().map(|w| w.1),
        Some(plimsoll_e2e::deployment_replicas(&env, "web").await?)
    );

    // The replay decides exactly what the controller decided, evaluation for evaluation.
    let replay = replay_recording_files(&file, None, &[])?;
    assert!(replay.misses.is_empty(), "{:#?}", replay.misses);
    assert!(replay.warnings.is_empty(), "{:?}", replay.warnings);
    assert_eq!(replay.steps.len(), recorded.len());
    for (line, e) in replay.steps.iter().zip(&recorded) {
        assert_eq!(line.desired_replicas, e.decision.desired_replicas);
        assert_eq!(
            line.replicas,
            e.decision.scale_to.unwrap_or(e.observed.current_replicas)
        );
    }

    // What if the scale-down window had been two minutes: the scale-downs do not happen.
    let sets = [Set::parse(
        "spec.behavior.scaleDown.stabilizationWindowSeconds=120",
    )?];
    let what_if = replay_recording_files(&file, None, &sets)?;
    assert!(what_if.misses.is_empty(), "differences are the answer");
    let summary = what_if.what_if.context("a --set replay has a summary")?;
    assert!(summary.changed >= 1, "{summary}");
    assert!(summary.first.is_some(), "{summary}");
    let held = what_if
        .steps
        .iter()
        .any(|s| s.limited_by.as_deref() == Some("stabilization") && s.desired_replicas > 1);
    assert!(held, "the longer window holds a scale-down: {summary}");

    // An invalid change is refused with the field named.
    let bad = [Set::parse("spec.maxReplicas=0")?];
    let err = replay_recording_files(&file, None, &bad)
        .err()
        .context("maxReplicas 0 is invalid")?
        .to_string();
    assert!(err.contains("maxReplicas"), "{err}");

    env.cleanup().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
