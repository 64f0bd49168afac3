//! The `WatermarkPodAutoscaler` additions of hpa-plus end to end, each test on its own
//! plimsoll-sim with the real service in-process:
//! - watermarks with both algorithms (`absolute` on an External metric, `average` on an Object
//!   metric) and `replicaScalingAbsoluteModulo`;
//! - `upscaleDelayAboveWatermarkSeconds` and the forbidden windows in both directions;
//! - `minAvailableReplicaPercentage` with `readinessDelaySeconds`;
//! - scale to zero and back (`minReplicas: 0` with an External metric);
//! - two autoscalers selecting the same pods (`AmbiguousSelector`).
//!
//! Metric values are set through the sim's workload model; what was written is read from the
//! sim's audit log and from the HPA+ status. Windows are a few seconds, and timing is checked
//! only from below (a window was waited out), from times the controller itself wrote, so a slow
//! machine makes the tests slower, never red.

use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, PostParams};
use plimsoll_core::api::hpa_plus::{
    HorizontalPodAutoscalerPlus, HorizontalPodAutoscalerPlusStatus, LastDecision,
};
use plimsoll_e2e::{Env, Running, eventually};
use plimsoll_hpa_plus::cli::Args;
use plimsoll_sim::SimConfig;
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(60);
const EVERY: Duration = Duration::from_millis(250);

/// Flags for an in-process instance: a 1 s period, admin on an ephemeral port.
fn config(env: &Env) -> plimsoll_hpa_plus::Config {
    let args = [
        "hpa-plus".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        "--metrics-address=127.0.0.1:0".to_owned(),
        "--leader-elect=false".to_owned(),
        "--sync-period=1s".to_owned(),
        "--cpu-initialization-period=1s".to_owned(),
        "--initial-readiness-delay=0s".to_owned(),
    ];
    Args::try_parse_from(args)
        .expect("test flags parse")
        .into_config()
        .expect("test flags are valid")
}

/// Runs an instance until it is stopped.
fn start(env: &Env) -> Running<()> {
    let config = config(env);
    plimsoll_e2e::spawn_hpa_plus(config)
}

/// An HPA+ on Deployment `target` (1–20 replicas, 1 s period, no scale-down stabilization)
/// with `spec` merged over it.
fn hpa_plus(name: &str, target: &str, spec: &serde_json::Value) -> HorizontalPodAutoscalerPlus {
    let base = json!({
        "minReplicas": 1,
        "maxReplicas": 20,
        "syncPeriodSeconds": 1,
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}},
    });
    plimsoll_e2e::hpa_plus_fixture(name, target, &base, spec).expect("hpa-plus fixture")
}

async fn create_plus(env: &Env, plus: &HorizontalPodAutoscalerPlus) -> anyhow::Result<()> {
    env.api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), plus)
        .await?;
    Ok(())
}

/// An External metric `name` with a watermark band.
fn external_watermark(name: &str, low: &str, high: &str) -> serde_json::Value {
    json!({"type": "External", "external": {"metric": {"name": name},
        "target": {"type": "Watermark", "lowWatermark": low, "highWatermark": high}}})
}

/// An External metric `name` with an average-value target.
fn external_average(name: &str, average: &str) -> serde_json::Value {
    json!({"type": "External", "external": {"metric": {"name": name},
        "target": {"type": "AverageValue", "averageValue": average}}})
}

/// Sets External metric `metric` of the test's namespace in the sim.
fn set_external(env: &Env, metric: &str, value: f64) -> anyhow::Result<()> {
    env.sim()?
        .cluster
        .model
        .set_external(&env.namespace, metric, value);
    Ok(())
}

async fn wait_ready(env: &Env, name: &str, replicas: i32) -> anyhow::Result<()> {
    plimsoll_e2e::wait_deployment_ready(env, name, replicas, WITHIN).await
}

async fn spec_replicas(env: &Env, name: &str) -> anyhow::Result<i32> {
    plimsoll_e2e::deployment_replicas(env, name).await
}

/// Waits until Deployment `name` no longer has `from` replicas and returns its new count.
async fn wait_change(env: &Env, name: &str, from: i32) -> anyhow::Result<i32> {
    eventually(
        &format!("{name} scaled from {from}"),
        WITHIN,
        EVERY,
        || async move {
            let now = spec_replicas(env, name).await?;
            Ok((now != from).then_some(now))
        },
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
) -> anyhow::Result<Option<HorizontalPodAutoscalerPlusStatus>> {
    Ok(env
        .api::<HorizontalPodAutoscalerPlus>()
        .get(name)
        .await?
        .status)
}

/// Waits for a decision of HPA+ `name` limited by `rule`.
async fn wait_limited_by(env: &Env, name: &str, rule: &str) -> anyhow::Result<LastDecision> {
    eventually(
        &format!("{name} limited by {rule}"),
        WITHIN,
        EVERY,
        || async move {
            Ok(plus_status(env, name)
                .await?
                .and_then(|s| s.last_decision)
                .filter(|d| d.limited_by.as_deref() == Some(rule)))
        },
    )
    .await
}

/// `status.lastScaleTime` of HPA+ `name`.
/// `status.lastScaleTime` of `name` once it is later than `after`: hpa-plus writes the scale
/// before the status, so right after a replica change the status may still name the previous
/// scale (a loaded machine made that window wide enough to read a stale time).
async fn last_scale_time(
    env: &Env,
    name: &str,
    after: Option<Timestamp>,
) -> anyhow::Result<Timestamp> {
    eventually(
        &format!("{name}'s lastScaleTime after {after:?}"),
        WITHIN,
        EVERY,
        || async move {
            let time = plus_status(env, name)
                .await?
                .and_then(|s| s.last_scale_time)
                .map(|t| t.0);
            Ok(time.filter(|t| after.is_none_or(|a| *t > a)))
        },
    )
    .await
}

/// The reason of condition `type_` of HPA+ `name` when it has `status`.
async fn condition_reason(
    env: &Env,
    name: &str,
    type_: &str,
    status: &str,
) -> anyhow::Result<Option<String>> {
    Ok(plus_status(env, name).await?.and_then(|s| {
        s.conditions
            .into_iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .and_then(|c| c.reason)
    }))
}

/// Seconds from `from` to `to`.
fn seconds(from: Timestamp, to: Timestamp) -> f64 {
    to.duration_since(from).as_secs_f64()
}

/// Watermarks with both algorithms and the modulo. `abs` (External, `absolute`): 2 ready pods,
/// 30 above the 5–10 band → `ceil(2 × 30 / 10)` = 6. `avg` (Object, `average`, modulo 4):
/// 30 / 2 pods = 15 → `ceil(2 × 15 / 10)` = 3, rounded up to 4; on 4 pods 7.5 is inside the band.
/// Below the band `abs` scales down to `floor(ready × value / low)`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: External and Object metric values and the audit log"
)]
async fn watermarks_scale_by_both_algorithms_and_round_to_the_modulo() -> anyhow::Result<()> {
    // New pods take 5 s to be ready, so that `abs` is moved inside its band before its new
    // pods count (`absolute` multiplies the value by the ready pods).
    let env = Env::start_with(
        "wpa-watermarks",
        SimConfig {
            pod_start: Duration::from_secs(4),
            ..SimConfig::default()
        },
    )
    .await?;
    let sim = env.sim()?;
    for name in ["abs", "avg"] {
        plimsoll_e2e::create_deployment(&env, name, 2, "10m", "64Mi").await?;
    }
    wait_ready(&env, "abs", 2).await?;
    wait_ready(&env, "avg", 2).await?;
    set_external(&env, "abs_queue", 30.0)?;
    sim.cluster
        .model
        .set_object_metric(&env.namespace, "deployments", "avg", "avg_queue", 30.0);
    create_plus(
        &env,
        &hpa_plus(
            "abs",
            "abs",
            &json!({"algorithm": "absolute",
                "metrics": [external_watermark("abs_queue", "5", "10")]}),
        ),
    )
    .await?;
    let object = json!({"type": "Object", "object": {
        "describedObject": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "avg"},
        "metric": {"name": "avg_queue"},
        "target": {"type": "Watermark", "lowWatermark": "5", "highWatermark": "10"}}});
    create_plus(
        &env,
        &hpa_plus(
            "avg",
            "avg",
            &json!({"algorithm": "average", "replicaScalingAbsoluteModulo": 4,
                "metrics": [object]}),
        ),
    )
    .await?;
    let service = start(&env);

    // The first write of each is decided on the 2 ready pods.
    assert_eq!(
        wait_change(&env, "abs", 2).await?,
        6,
        "absolute: ceil(2 × 30 / 10)"
    );
    // Inside the band: `absolute` would otherwise keep growing with the ready pods.
    set_external(&env, "abs_queue", 8.0)?;
    assert_eq!(
        wait_change(&env, "avg", 2).await?,
        4,
        "average: 3 rounded up to 4"
    );
    assert_eq!(scale_writes(&env, "abs")?, 1);
    assert_eq!(scale_writes(&env, "avg")?, 1);
    wait_ready(&env, "avg", 4).await?;
    let held = wait_limited_by(&env, "avg", "withinWatermarks").await?;
    assert_eq!(held.desired_replicas, 4, "{held:?}");
    wait_ready(&env, "abs", 6).await?;
    wait_limited_by(&env, "abs", "withinWatermarks").await?;
    assert_eq!(spec_replicas(&env, "abs").await?, 6);
    assert_eq!(spec_replicas(&env, "avg").await?, 4);

    // Below the band: 2 on 6 ready pods → floor(6 × 2 / 5) = 2.
    set_external(&env, "abs_queue", 2.0)?;
    assert_eq!(
        wait_change(&env, "abs", 6).await?,
        2,
        "absolute: floor(6 × 2 / 5)"
    );
    assert_eq!(scale_writes(&env, "abs")?, 2);
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// `upscaleDelayAboveWatermarkSeconds` holds a scale-up until the value has stayed above the
/// band that long; `downscaleForbiddenWindowSeconds` then holds the scale-down after it, and
/// `upscaleForbiddenWindowSeconds` the scale-up after that. Each wait is measured between times
/// the controller wrote (`status.lastScaleTime`), less a second for their rounding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: External metric values and the audit log"
)]
async fn watermark_delay_and_forbidden_windows_hold_each_direction() -> anyhow::Result<()> {
    const DELAY: f64 = 4.0;
    const WINDOW: f64 = 8.0;
    let env = Env::start("wpa-windows").await?;
    env.sim()?;
    plimsoll_e2e::create_deployment(&env, "web", 2, "10m", "64Mi").await?;
    wait_ready(&env, "web", 2).await?;
    // Inside the 5–10 band on 2 pods: nothing to do yet.
    set_external(&env, "queue", 14.0)?;
    create_plus(
        &env,
        &hpa_plus(
            "web",
            "web",
            &json!({"algorithm": "average",
                "upscaleDelayAboveWatermarkSeconds": DELAY as i32,
                "downscaleForbiddenWindowSeconds": WINDOW as i32,
                "upscaleForbiddenWindowSeconds": WINDOW as i32,
                "metrics": [external_watermark("queue", "5", "10")]}),
        ),
    )
    .await?;
    let service = start(&env);
    wait_limited_by(&env, "web", "withinWatermarks").await?;

    // 30 / 2 = 15 is above the band: wants ceil(2 × 15 / 10) = 3, after the delay.
    let above = Timestamp::now();
    set_external(&env, "queue", 30.0)?;
    let delayed = wait_limited_by(&env, "web", "watermarkDelay").await?;
    assert_eq!(delayed.recommended_replicas, Some(3), "{delayed:?}");
    assert!(
        delayed.countdowns.iter().any(|c| c.seconds_left > 0),
        "{delayed:?}"
    );
    assert_eq!(scale_writes(&env, "web")?, 0, "held by the delay");
    assert_eq!(wait_change(&env, "web", 2).await?, 3);
    let up = last_scale_time(&env, "web", None).await?;
    assert!(
        seconds(above, up) >= DELAY - 1.0,
        "scaled up {:.1} s after the value rose",
        seconds(above, up)
    );

    // Below the band (3 / 3 pods = 1): wants 1, held by the scale-down forbidden window.
    set_external(&env, "queue", 3.0)?;
    let backoff = wait_limited_by(&env, "web", "forbiddenWindow").await?;
    assert_eq!(backoff.desired_replicas, 3, "{backoff:?}");
    // Both windows run from the same scale event.
    assert_eq!(
        condition_reason(&env, "web", "AbleToScale", "False")
            .await?
            .as_deref(),
        Some("BackoffBoth")
    );
    assert_eq!(wait_change(&env, "web", 3).await?, 1);
    let down = last_scale_time(&env, "web", Some(up)).await?;
    assert!(
        seconds(up, down) >= WINDOW - 1.0,
        "scaled down {:.1} s after the scale-up",
        seconds(up, down)
    );

    // Above again: the scale-up forbidden window runs from the scale-down.
    set_external(&env, "queue", 30.0)?;
    wait_limited_by(&env, "web", "forbiddenWindow").await?;
    let again = wait_change(&env, "web", 1).await?;
    assert!(again > 1, "scaled up to {again}");
    let up_again = last_scale_time(&env, "web", Some(down)).await?;
    assert!(
        seconds(down, up_again) >= WINDOW - 1.0,
        "scaled up {:.1} s after the scale-down",
        seconds(down, up_again)
    );
    assert_eq!(scale_writes(&env, "web")?, 3, "one write per decision");
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// `minAvailableReplicaPercentage` with `readinessDelaySeconds`: pods younger than the delay do
/// not count as available, so nothing scales until half of the pods are old enough, and again
/// after the scale-up, while the new pods are young.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: External metric values and the audit log"
)]
async fn min_available_waits_for_pods_past_the_readiness_delay() -> anyhow::Result<()> {
    const DELAY: f64 = 8.0;
    let env = Env::start("wpa-min-available").await?;
    env.sim()?;
    plimsoll_e2e::create_deployment(&env, "web", 2, "10m", "64Mi").await?;
    wait_ready(&env, "web", 2).await?;
    // 30 against an average of 5: wants 6.
    set_external(&env, "queue", 30.0)?;
    create_plus(
        &env,
        &hpa_plus(
            "web",
            "web",
            &json!({"minAvailableReplicaPercentage": 50, "readinessDelaySeconds": DELAY as i32,
                "metrics": [external_average("queue", "5")]}),
        ),
    )
    .await?;
    let service = start(&env);
    let held = wait_limited_by(&env, "web", "minAvailable").await?;
    assert_eq!(held.desired_replicas, 2, "{held:?}");
    assert_eq!(
        condition_reason(&env, "web", "ScalingActive", "False")
            .await?
            .as_deref(),
        Some("NotEnoughAvailablePods")
    );
    assert_eq!(scale_writes(&env, "web")?, 0);
    assert_eq!(wait_change(&env, "web", 2).await?, 6);
    let scaled = last_scale_time(&env, "web", None).await?;
    let pods = env
        .api::<Pod>()
        .list(&ListParams::default().labels("app=web"))
        .await?;
    let oldest_start = pods
        .items
        .iter()
        .filter_map(|p| p.status.as_ref()?.start_time.as_ref().map(|t| t.0))
        .min()
        .context("a started pod")?;
    assert!(
        seconds(oldest_start, scaled) >= DELAY - 1.0,
        "scaled {:.1} s after the first pod started",
        seconds(oldest_start, scaled)
    );

    // 2 of 6 pods past the delay (33 %): held again, now wanting 12.
    set_external(&env, "queue", 60.0)?;
    let again = wait_limited_by(&env, "web", "minAvailable").await?;
    assert_eq!(again.desired_replicas, 6, "{again:?}");
    assert_eq!(scale_writes(&env, "web")?, 1);
    assert_eq!(wait_change(&env, "web", 6).await?, 12);
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// `minReplicas: 0` with an External metric: a zero value scales the target to zero, and a
/// value again scales it back from zero (`ceil(12 / 5)` = 3) without any pod to measure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: External metric values and the audit log"
)]
async fn an_external_metric_scales_to_zero_and_back() -> anyhow::Result<()> {
    let env = Env::start("wpa-zero").await?;
    env.sim()?;
    plimsoll_e2e::create_deployment(&env, "worker", 1, "10m", "64Mi").await?;
    wait_ready(&env, "worker", 1).await?;
    set_external(&env, "jobs", 0.0)?;
    create_plus(
        &env,
        &hpa_plus(
            "worker",
            "worker",
            &json!({"minReplicas": 0, "metrics": [external_average("jobs", "5")]}),
        ),
    )
    .await?;
    let service = start(&env);
    assert_eq!(wait_change(&env, "worker", 1).await?, 0);
    wait_ready(&env, "worker", 0).await?;
    let status = eventually("status at 0 of 0", WITHIN, EVERY, || async {
        Ok(plus_status(&env, "worker")
            .await?
            .filter(|s| s.current_replicas == 0 && s.desired_replicas == 0))
    })
    .await?;
    assert_ne!(
        status.last_decision.and_then(|d| d.limited_by).as_deref(),
        Some("scalingDisabled"),
        "minReplicas 0 keeps scaling active at zero"
    );

    set_external(&env, "jobs", 12.0)?;
    assert_eq!(wait_change(&env, "worker", 0).await?, 3, "ceil(12 / 5)");
    wait_ready(&env, "worker", 3).await?;
    assert_eq!(scale_writes(&env, "worker")?, 2);
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// Two HPA+ objects on the same Deployment select the same pods: neither acts
/// (`ScalingActive=False AmbiguousSelector`); once one is deleted the other scales.
///
/// The second autoscaler is created once the first has decided, and the load rises only once
/// both report the overlap: the controller learns an autoscaler's selector when it first
/// evaluates it, so the very first evaluation after a start cannot know of the others yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: External metric values and the audit log"
)]
async fn two_autoscalers_on_the_same_pods_refuse_to_act() -> anyhow::Result<()> {
    let env = Env::start("wpa-ambiguous").await?;
    env.sim()?;
    plimsoll_e2e::create_deployment(&env, "web", 2, "10m", "64Mi").await?;
    wait_ready(&env, "web", 2).await?;
    // 10 against an average of 5: 2 replicas, as they are.
    set_external(&env, "queue", 10.0)?;
    let spec = json!({"metrics": [external_average("queue", "5")]});
    create_plus(&env, &hpa_plus("first", "web", &spec)).await?;
    let service = start(&env);
    wait_limited_by(&env, "first", "tolerance").await?;
    create_plus(&env, &hpa_plus("second", "web", &spec)).await?;
    for name in ["first", "second"] {
        wait_limited_by(&env, name, "ambiguousSelector").await?;
    }
    // 30 against an average of 5: each alone would want 6 (as the end shows). A negative
    // property needs time to pass: several more 1 s periods.
    set_external(&env, "queue", 30.0)?;
    tokio::time::sleep(Duration::from_secs(4)).await;
    for name in ["first", "second"] {
        let held = plus_status(&env, name)
            .await?
            .and_then(|s| s.last_decision)
            .context("a decision")?;
        assert_eq!(
            held.limited_by.as_deref(),
            Some("ambiguousSelector"),
            "{name}: {held:?}"
        );
        assert_eq!(held.desired_replicas, 2, "{name}: {held:?}");
        assert_eq!(
            condition_reason(&env, name, "ScalingActive", "False")
                .await?
                .as_deref(),
            Some("AmbiguousSelector"),
            "{name}"
        );
    }
    assert_eq!(spec_replicas(&env, "web").await?, 2);
    assert_eq!(scale_writes(&env, "web")?, 0);

    env.api::<HorizontalPodAutoscalerPlus>()
        .delete("second", &DeleteParams::default())
        .await?;
    assert_eq!(wait_change(&env, "web", 2).await?, 6);
    assert_eq!(scale_writes(&env, "web")?, 1);
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}
