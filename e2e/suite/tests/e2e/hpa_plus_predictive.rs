//! `spec.predictive` in hpa-plus against the sim and the Prometheus stand-in: a daily rush,
//! a week of history read from Prometheus on first sight, and pods that take 9 s to become
//! Ready (the sim's `pod_start` 2 s + `pod_ready` 7 s).
//!
//! Two Deployments carry the same load (one `type: Prometheus` query, `AverageValue` 100 per
//! pod): 150 all day and 600 for an hour from a time of day 25 s after the test's workloads are
//! Ready, every day. The HPA+ in `mode: Scale` forecasts the rush from the past week and scales
//! 2 → 6 before it begins, so its six pods are Ready when it arrives (per pod 100: within the
//! band); the same HPA+ in `mode: "Off"` scales only once the rush is there, and its two pods
//! carry 300 each until the new ones are Ready.

use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use plimsoll_core::api::hpa_plus::{HorizontalPodAutoscalerPlus, Predictive, PredictiveStatus};
use plimsoll_core::horizontal::predictive::BUCKET_SECONDS;
use plimsoll_core::horizontal::predictive::keep_seconds;
use plimsoll_e2e::{Env, eventually};
use plimsoll_hpa_plus::cli::Args;
use plimsoll_hpa_plus::prometheus::peak_query;
use plimsoll_sim::{PrometheusStandIn, SimConfig, StandInOptions, StandInSeries};
use serde_json::json;

const EVERY: Duration = Duration::from_millis(200);

/// The load's query, served verbatim by the stand-in.
const REQUESTS: &str = r#"sum(rate(http_requests_total{app="shop"}[1m]))"#;

/// Pod creation → Running in the sim.
const POD_START: Duration = Duration::from_secs(2);

/// Running → Ready in the sim. The pods' start-up sets the test's pace: the rush comes after the
/// workloads are Ready by this and the time prediction needs to act (a pod start-up of 17 s and a
/// rush 40 s out, the test's first form, took 75 s; both shortened, the same steps take 44 s).
const POD_READY: Duration = Duration::from_secs(7);

/// Seconds from the workloads being Ready to the rush.
const RUSH_IN: f64 = 25.0;

/// How long each day's rush lasts, seconds.
const RUSH_SECONDS: f64 = 3600.0;

const DAY: f64 = 86_400.0;

/// A pod's creation → Ready in the sim, seconds.
fn startup() -> f64 {
    (POD_START + POD_READY).as_secs_f64()
}

fn unix_now() -> f64 {
    jiff::Timestamp::now().as_duration().as_secs_f64()
}

/// The load at unix time `t` with the rush starting at unix time `rush`: 600 during the hour
/// from `rush`'s time of day, every day, else 150.
fn load(rush: f64, t: f64) -> f64 {
    if (t - rush).rem_euclid(DAY) < RUSH_SECONDS {
        600.0
    } else {
        150.0
    }
}

/// The highest load in the 15-minute bucket that ends at `t` (the rush is longer than a
/// bucket, so it overlaps the bucket exactly when it covers one of its ends).
fn bucket_peak(rush: f64, t: f64) -> f64 {
    load(rush, t - (BUCKET_SECONDS as f64 - 1.0)).max(load(rush, t))
}

fn hpa_plus(name: &str, mode: &str) -> anyhow::Result<HorizontalPodAutoscalerPlus> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
        "kind": "HorizontalPodAutoscalerPlus",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": 2,
            "maxReplicas": 10,
            "syncPeriodSeconds": 1,
            "predictive": {"mode": mode},
            "metrics": [{"type": "Prometheus", "prometheus": {
                "name": "requests",
                "query": REQUESTS,
                "target": {"type": "AverageValue", "averageValue": "100"},
            }}],
        }
    }))?)
}

fn config(env: &Env, server: &PrometheusStandIn) -> plimsoll_hpa_plus::Config {
    let args = [
        "hpa-plus".to_owned(),
        format!("--kubeconfig={}", env.kubeconfig.display()),
        "--metrics-address=127.0.0.1:0".to_owned(),
        "--leader-elect=false".to_owned(),
        "--sync-period=1s".to_owned(),
        "--cpu-initialization-period=1s".to_owned(),
        "--initial-readiness-delay=0s".to_owned(),
        format!("--prometheus-address={}", server.url()),
    ];
    Args::try_parse_from(args)
        .expect("test flags parse")
        .into_config()
        .expect("test flags are valid")
}

/// `(spec.replicas, status.readyReplicas)` of Deployment `name`.
async fn replicas(env: &Env, name: &str) -> anyhow::Result<(i32, i32)> {
    let d = env.api::<Deployment>().get(name).await?;
    Ok((
        d.spec.and_then(|s| s.replicas).unwrap_or(0),
        d.status.and_then(|s| s.ready_replicas).unwrap_or(0),
    ))
}

async fn wait_ready(env: &Env, name: &str, ready: i32, within: Duration) -> anyhow::Result<()> {
    eventually(
        &format!("{name} has {ready} ready pods"),
        within,
        EVERY,
        || async move { Ok((replicas(env, name).await?.1 == ready).then_some(())) },
    )
    .await
}

async fn predictive(env: &Env, name: &str) -> anyhow::Result<Option<PredictiveStatus>> {
    let plus = env.api::<HorizontalPodAutoscalerPlus>().get(name).await?;
    Ok(plus.status.and_then(|s| s.predictive))
}

async fn events(env: &Env, name: &str, reason: &str) -> anyhow::Result<Vec<Event>> {
    let list = env.api::<Event>().list(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .collect())
}

/// The lead in a status message (`… the next 917s …`), seconds.
fn lead_of(message: &str) -> Option<i64> {
    let rest = message.split("the next ").nth(1)?;
    rest.split('s').next()?.parse().ok()
}

async fn sleep_until(unix: f64) {
    let left = unix - unix_now();
    if left > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(left)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's pod startup time: the rush is timed against it"
)]
async fn scale_mode_is_ready_for_the_daily_rush_and_off_meets_it_overloaded() -> anyhow::Result<()>
{
    let env = Env::start_with(
        "hpa-plus-predictive",
        SimConfig {
            pod_start: POD_START,
            pod_ready: POD_READY,
            ..SimConfig::default()
        },
    )
    .await?;
    for name in ["ahead", "behind"] {
        plimsoll_e2e::create_deployment(&env, name, 2, "10m", "16Mi").await?;
    }
    for name in ["ahead", "behind"] {
        wait_ready(&env, name, 2, Duration::from_secs(40)).await?;
    }

    let rush = unix_now() + RUSH_IN;
    let server = PrometheusStandIn::start(StandInOptions {
        tls: false,
        ..StandInOptions::default()
    })
    .await?;
    server.set_series(
        REQUESTS,
        vec![StandInSeries::function(&[], move |t| load(rush, t))],
    );
    server.set_series(
        &peak_query(REQUESTS, BUCKET_SECONDS),
        vec![StandInSeries::function(&[], move |t| bucket_peak(rush, t))],
    );
    let api = env.api::<HorizontalPodAutoscalerPlus>();
    api.create(&PostParams::default(), &hpa_plus("ahead", "Scale")?)
        .await?;
    api.create(&PostParams::default(), &hpa_plus("behind", "Off")?)
        .await?;
    let service = plimsoll_e2e::spawn_hpa_plus(config(&env, &server));

    // Before the rush: the forecast from the past week raises `ahead` to the rush's 6 (600 at
    // 100 per pod) while its load is still 150; `behind` stays at the reactive 2.
    let raised = eventually(
        "ahead raised ahead of the rush",
        Duration::from_secs(20),
        EVERY,
        || async {
            let status = predictive(&env, "ahead").await?;
            let (spec, _) = replicas(&env, "ahead").await?;
            Ok(status.filter(|s| s.acting && spec == 6))
        },
    )
    .await?;
    what_was_raised(&env, &raised, rush).await?;

    // Just before the rush `ahead` has its six pods Ready and `behind` is still at 2.
    sleep_until(rush - 1.5).await;
    assert_eq!(replicas(&env, "ahead").await?, (6, 6), "ahead is ready");
    assert_eq!(
        replicas(&env, "behind").await?,
        (2, 2),
        "behind has not moved"
    );
    // 2 -> 6 within the scale-up rate limit (at most doubling per step: 2 -> 4 -> 6).
    let writes_before = env.scale_writes("hpa-plus", "ahead");
    if let Some(writes) = writes_before {
        assert!((1..=2).contains(&writes), "{writes} writes");
    }

    // The rush: `ahead` carries 600 on 6 pods (100 each, the target); `behind` reacts now, and
    // until its new pods are Ready its 2 pods carry 300 each, three times the target.
    sleep_until(rush + 3.0).await;
    assert_eq!(replicas(&env, "ahead").await?, (6, 6));
    let (spec, ready) = replicas(&env, "behind").await?;
    assert_eq!(ready, 2, "behind meets the rush with 2 Ready pods");
    assert!(600 / ready > 110, "{} per pod", 600 / ready);
    assert_eq!(spec, 6, "behind scaled up once the rush arrived");
    wait_ready(&env, "behind", 6, Duration::from_secs(30)).await?;
    // Reacting at the rush, `behind` is short for about its pods' start-up.
    let late = unix_now() - rush;
    assert!(
        late > startup() * 0.6,
        "behind was ready only {late:.1}s into the rush"
    );
    let status = env
        .api::<HorizontalPodAutoscalerPlus>()
        .get("ahead")
        .await?
        .status
        .unwrap_or_default();
    assert_eq!(
        status.desired_replicas, 6,
        "no reactive scale-up was needed"
    );
    assert_eq!(
        env.scale_writes("hpa-plus", "ahead"),
        writes_before,
        "ahead: no write during the rush"
    );
    assert!(events(&env, "ahead", "PredictionOff").await?.is_empty());
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

#[test]
fn the_bucket_peak_sees_a_rush_anywhere_in_its_bucket() {
    let rush = 10_000.0;
    let rushing = |v: f64| v > 300.0;
    assert!(!rushing(load(rush, rush - 1.0)));
    assert!(rushing(load(rush, rush + DAY)));
    assert!(!rushing(load(rush, rush - DAY + RUSH_SECONDS)));
    // A bucket ending 100 s after the rush began, one ending just before it, one that ends
    // 100 s after the rush ended, and the bucket after that.
    assert!(rushing(bucket_peak(rush, rush + 100.0)));
    assert!(!rushing(bucket_peak(rush, rush - 1.0)));
    assert!(rushing(bucket_peak(rush, rush + RUSH_SECONDS + 100.0)));
    assert!(!rushing(bucket_peak(
        rush,
        rush + RUSH_SECONDS + BUCKET_SECONDS as f64
    )));
    assert_eq!(
        lead_of("the load forecast for the next 917s needs 6"),
        Some(917)
    );
}

/// What `ahead`'s status and Events say once prediction raised it, and that `behind` waits.
async fn what_was_raised(env: &Env, raised: &PredictiveStatus, rush: f64) -> anyhow::Result<()> {
    let early = rush - unix_now();
    assert!(
        early > startup(),
        "raised only {early:.1}s before the rush: {raised:?}"
    );
    assert_eq!(
        (raised.reason.as_str(), raised.forecast_replicas),
        ("Raised", Some(6)),
        "{raised:?}"
    );
    assert_eq!(
        raised.forecast.as_deref(),
        Some("requests: 600"),
        "{raised:?}"
    );
    assert_eq!(raised.recent_error_percent, Some(0), "{raised:?}");
    // auto: the pods' measured startup (about 9 s) plus one 15-minute bucket.
    let lead = lead_of(&raised.message).unwrap_or_default();
    assert!(
        (BUCKET_SECONDS + 6..=BUCKET_SECONDS + 32).contains(&lead),
        "lead {lead}: {}",
        raised.message
    );
    // What was read from Prometheus is the object's own history now: with the default
    // `season: auto`, two weeks of buckets (a week to forecast from, one to check it on).
    let history = raised.history.clone().unwrap_or_default();
    let buckets = history.metrics.get("requests").map_or(0, Vec::len) / 2;
    let kept = usize::try_from(keep_seconds(&Predictive::default()) / BUCKET_SECONDS + 1)?;
    assert_eq!(kept, 14 * 96 + 1);
    assert!(
        (kept - 9..=kept).contains(&buckets),
        "{buckets} buckets kept"
    );
    assert_eq!(history.step_seconds, Some(BUCKET_SECONDS));
    let on = events(env, "ahead", "PredictionOn").await?;
    assert_eq!(on.len(), 1, "{on:?}");
    assert_eq!(on[0].type_.as_deref(), Some("Normal"));
    assert_eq!(replicas(env, "behind").await?.0, 2, "behind waits");
    assert_eq!(
        predictive(env, "behind").await?,
        None,
        "Off reports nothing"
    );
    Ok(())
}
