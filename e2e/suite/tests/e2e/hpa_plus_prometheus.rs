//! hpa-plus with `type: Prometheus` metrics against the sim's Prometheus stand-in, and
//! `minReplicasTuning` acting in the controller:
//! - a query read over TLS with a bearer token kept in a Secret scales its workload, and status
//!   reports the value;
//! - a server that goes away, or one query that fails while another wants fewer replicas, sets
//!   `ScalingActive=False` (`FailedGetPrometheusMetric`) with a Warning Event and never scales
//!   down; once the server answers again the object scales both ways;
//! - a token rotated in its Secret is picked up on the first refusal, without a failed
//!   evaluation when the Secret is updated first;
//! - a metric naming a server outside `--prometheus-allowed-servers` fails with
//!   `PrometheusServerNotAllowed` and not one connection reaches that address; one naming an
//!   allowed server that never answers does not hold up shutdown;
//! - with `--workers=4`, twenty autoscalers naming a server that never answers do not delay
//!   two that read the configured server: those are evaluated every period all along, while
//!   the silent server gets a handful of connections (its cap, then its circuit breaker);
//! - a week of hourly load peaks restored from `status.minReplicasTuning.loadHistory` lowers
//!   `minReplicas` in `Apply` and only proposes it in `Report`.
//!
//! The stand-in and hpa-plus run in this process; the cluster is the sim or, with
//! `PLIMSOLL_E2E_KUBECONFIG`, a real cluster. The sim's audit log adds cross-checks (writes
//! counted) where there is one. Evaluations are counted by the stand-in's requests: a value is
//! cached for nine tenths of the object's period, so each evaluation asks once per query (three
//! times for a query answered with a retried 503).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use plimsoll_core::api::hpa_plus::{
    HorizontalPodAutoscalerCondition, HorizontalPodAutoscalerPlus,
    HorizontalPodAutoscalerPlusStatus, MinReplicasTuningStatus,
};
use plimsoll_e2e::{Env, Running, TempFile, eventually, prometheus_stand_in};
use plimsoll_sim::{PrometheusStandIn, StandInSeries};
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(30);
const EVERY: Duration = Duration::from_millis(200);

/// The query of the first tests, served verbatim by the stand-in.
const REQUESTS: &str = r#"sum(rate(http_requests_total{app="web"}[1m]))"#;

/// Serves the constant `value` for `query`.
fn serve(server: &PrometheusStandIn, query: &str, value: f64) {
    server.set_series(query, vec![StandInSeries::function(&[], move |_| value)]);
}

/// Creates Secret `name` holding `token` under key `token`.
async fn token_secret(env: &Env, name: &str, token: &str) -> anyhow::Result<()> {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name},
        "stringData": {"token": token},
    }))?;
    env.api::<Secret>()
        .create(&PostParams::default(), &secret)
        .await?;
    Ok(())
}

async fn rotate_secret(env: &Env, name: &str, token: &str) -> anyhow::Result<()> {
    env.api::<Secret>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"token": token}})),
        )
        .await?;
    Ok(())
}

/// hpa-plus reading `server` with the CA in `ca` and the token in Secret `secret` of the test's
/// namespace; short periods, admin on an ephemeral port, and `extra` flags last.
fn config(
    env: &Env,
    server: &PrometheusStandIn,
    ca: &TempFile,
    secret: &str,
    extra: &[&str],
) -> plimsoll_hpa_plus::Config {
    let mut flags = vec![
        format!("--prometheus-address={}", server.url()),
        format!("--prometheus-ca-file={}", ca.0.display()),
        format!(
            "--prometheus-bearer-token-secret={}/{secret}",
            env.namespace
        ),
    ];
    flags.extend(extra.iter().map(|s| (*s).to_owned()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    plimsoll_e2e::hpa_plus_config(env, &flags)
}

/// Runs an instance until it is stopped.
fn start(config: plimsoll_hpa_plus::Config) -> Running<()> {
    plimsoll_e2e::spawn_hpa_plus(config)
}

/// An HPA+ on Deployment `target` with `spec` merged over the required fields.
fn hpa_plus(name: &str, target: &str, spec: &serde_json::Value) -> HorizontalPodAutoscalerPlus {
    let base = json!({
        "minReplicas": 1,
        "maxReplicas": 10,
    });
    plimsoll_e2e::hpa_plus_fixture(name, target, &base, spec).expect("hpa-plus fixture")
}

/// A `type: Prometheus` metric on `query` with an `AverageValue` target, named `name` if given.
fn prometheus_metric(query: &str, name: Option<&str>, average: &str) -> serde_json::Value {
    let mut prometheus = json!({
        "query": query,
        "target": {"type": "AverageValue", "averageValue": average},
    });
    if let Some(name) = name {
        prometheus["name"] = json!(name);
    }
    json!({"type": "Prometheus", "prometheus": prometheus})
}

async fn create_plus(env: &Env, plus: &HorizontalPodAutoscalerPlus) -> anyhow::Result<()> {
    env.api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), plus)
        .await?;
    Ok(())
}

async fn wait_ready(env: &Env, name: &str, replicas: i32) -> anyhow::Result<()> {
    plimsoll_e2e::wait_deployment_ready(env, name, replicas, Duration::from_secs(60)).await
}

async fn spec_replicas(env: &Env, name: &str) -> anyhow::Result<i32> {
    plimsoll_e2e::deployment_replicas(env, name).await
}

async fn wait_replicas(env: &Env, name: &str, replicas: i32) -> anyhow::Result<()> {
    eventually(
        &format!("{name} scaled to {replicas}"),
        WITHIN,
        EVERY,
        || async move { Ok((spec_replicas(env, name).await? == replicas).then_some(())) },
    )
    .await
}

async fn plus(env: &Env, name: &str) -> anyhow::Result<HorizontalPodAutoscalerPlus> {
    Ok(env.api::<HorizontalPodAutoscalerPlus>().get(name).await?)
}

async fn plus_status(
    env: &Env,
    name: &str,
) -> anyhow::Result<Option<HorizontalPodAutoscalerPlusStatus>> {
    Ok(plus(env, name).await?.status)
}

/// The `ScalingActive` condition of HPA+ `name`, once it has `status` (`"True"`/`"False"`).
async fn scaling_active(
    env: &Env,
    name: &str,
    status: &str,
) -> anyhow::Result<Option<HorizontalPodAutoscalerCondition>> {
    Ok(plus_status(env, name).await?.and_then(|s| {
        s.conditions
            .into_iter()
            .find(|c| c.type_ == "ScalingActive" && c.status == status)
    }))
}

/// Events of `reason` regarding object `name` in the test's namespace.
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

async fn wait_event(env: &Env, name: &str, reason: &str) -> anyhow::Result<Event> {
    let found = eventually(&format!("a {reason} Event"), WITHIN, EVERY, || async {
        Ok(events(env, name, reason).await?.into_iter().next())
    })
    .await;
    if found.is_err() {
        // Say what was emitted instead.
        let list = env.api::<Event>().list(&ListParams::default()).await?;
        let seen: Vec<String> = list
            .items
            .iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .map(|e| {
                format!(
                    "{} {}: {}",
                    e.type_.as_deref().unwrap_or_default(),
                    e.reason.as_deref().unwrap_or_default(),
                    e.note.as_deref().unwrap_or_default()
                )
            })
            .collect();
        return found.map_err(|e| anyhow::anyhow!("{e:#}; Events of {name}: {seen:#?}"));
    }
    found
}

/// Scale writes of Deployment `name` by hpa-plus (`None` on a real cluster: no audit log).
fn scale_writes(env: &Env, name: &str) -> Option<usize> {
    env.scale_writes("hpa-plus", name)
}

/// Writes of HPA+ `name` itself (not its status) by hpa-plus: tuning's `minReplicas` patches
/// (`None` on a real cluster).
fn spec_writes(env: &Env, name: &str) -> Option<usize> {
    Some(
        env.audit()?
            .iter()
            .filter(|e| {
                e.resource == "horizontalpodautoscalerpluses"
                    && e.subresource.is_empty()
                    && e.name == name
                    && e.field_manager.as_deref() == Some("hpa-plus")
            })
            .count(),
    )
}

/// Waits until the stand-in has answered `more` requests beyond `from`: evaluations that read it.
async fn wait_requests(server: &PrometheusStandIn, from: usize, more: usize) -> anyhow::Result<()> {
    eventually(
        &format!("{more} more requests to the stand-in"),
        WITHIN,
        EVERY,
        || async move { Ok((server.requests() >= from + more).then_some(())) },
    )
    .await
}

/// The query's value as a number, from a quantity in status.
fn number(q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> Option<f64> {
    plimsoll_core::quantity::parse_f64(&q?.0).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hpa_plus_scales_on_a_prometheus_query_over_tls_with_a_bearer_token()
-> anyhow::Result<()> {
    let env = Env::start("hpa-plus-prom-tls").await?;
    token_secret(&env, "prometheus-reader", "t0k3n").await?;
    let (server, ca) = prometheus_stand_in("t0k3n").await.expect("stand-in starts");
    serve(&server, REQUESTS, 450.0);
    plimsoll_e2e::create_deployment(&env, "web", 1, "100m", "64Mi").await?;
    wait_ready(&env, "web", 1).await?;
    let service = start(config(&env, &server, &ca, "prometheus-reader", &[]));
    let spec =
        json!({"syncPeriodSeconds": 1, "metrics": [prometheus_metric(REQUESTS, None, "100")]});
    create_plus(&env, &hpa_plus("web", "web", &spec)).await?;

    // 450 against an average of 100 per replica: ceil(4.5) = 5.
    wait_replicas(&env, "web", 5).await?;
    wait_ready(&env, "web", 5).await?;
    // On 5 replicas the average is 90: inside the tolerance, so 5 stays.
    let entry = eventually(
        "status reports the query's average",
        WITHIN,
        EVERY,
        || async {
            let status = plus_status(&env, "web").await?;
            Ok(status
                .filter(|s| s.desired_replicas == 5 && s.current_replicas == 5)
                .and_then(|s| s.current_metrics.into_iter().find_map(|m| m.prometheus))
                .filter(|p| {
                    number(p.current.average_value.as_ref())
                        .is_some_and(|v| (v - 90.0).abs() < 1e-9)
                }))
        },
    )
    .await?;
    // Without `name`, the metric is named by its query.
    assert_eq!(entry.name, REQUESTS);
    assert_eq!(entry.query, REQUESTS);
    let active = scaling_active(&env, "web", "True").await?;
    assert!(active.is_some(), "ScalingActive is True");
    assert_eq!(spec_replicas(&env, "web").await?, 5);
    if let Some(writes) = scale_writes(&env, "web") {
        assert!(
            (1..=2).contains(&writes),
            "1 -> 5 in one or two steps, {writes} writes"
        );
    }
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prometheus_server_that_goes_away_leaves_a_condition_and_no_scale_down()
-> anyhow::Result<()> {
    const QUEUE: &str = r#"sum(queue_depth{app="web"})"#;
    let env = Env::start("hpa-plus-prom-gone").await?;
    token_secret(&env, "prometheus-reader", "t").await?;
    let (server, ca) = prometheus_stand_in("t").await.expect("stand-in starts");
    serve(&server, REQUESTS, 450.0);
    serve(&server, QUEUE, 50.0);
    plimsoll_e2e::create_deployment(&env, "web", 1, "100m", "64Mi").await?;
    wait_ready(&env, "web", 1).await?;
    // A failing query answers within a second, retries included.
    let service = start(config(
        &env,
        &server,
        &ca,
        "prometheus-reader",
        &["--prometheus-timeout=1s"],
    ));
    // No stabilization: the only thing between a lower proposal and a scale-down is the rule
    // under test.
    let spec = json!({
        "syncPeriodSeconds": 1,
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}},
        "metrics": [
            prometheus_metric(REQUESTS, Some("requests"), "100"),
            prometheus_metric(QUEUE, Some("queue"), "100"),
        ],
    });
    create_plus(&env, &hpa_plus("web", "web", &spec)).await?;
    wait_replicas(&env, "web", 5).await?;
    wait_ready(&env, "web", 5).await?;
    let writes = scale_writes(&env, "web");

    // The server goes away: every query fails.
    server.stop().await;
    let condition = eventually("ScalingActive=False", WITHIN, EVERY, || {
        scaling_active(&env, "web", "False")
    })
    .await?;
    assert_eq!(
        condition.reason.as_deref(),
        Some("FailedGetPrometheusMetric")
    );
    // Upstream's wording around the first failed metric's error (spec order).
    let message = condition.message.unwrap_or_default();
    assert!(
        message.starts_with(
            "the HPA was unable to compute the replica count: unable to get Prometheus metric \
             requests: PrometheusUnreachable: "
        ),
        "{message}"
    );
    assert!(message.contains(&server.url()), "{message}");
    let event = wait_event(&env, "web", "FailedGetPrometheusMetric").await?;
    assert_eq!(event.type_.as_deref(), Some("Warning"));

    // Back, but the first query is refused (503, retried): the second alone wants 1 replica.
    server.set_error(
        REQUESTS,
        503,
        "unavailable",
        "the query engine is overloaded",
    );
    server.restart().await?;
    let held = eventually(
        "one metric failed and the other proposed 1",
        WITHIN,
        EVERY,
        || async {
            Ok(plus_status(&env, "web").await?.and_then(|s| {
                let decision = s.last_decision?;
                let failed = decision
                    .proposals
                    .iter()
                    .any(|p| p.metric.contains("requests") && p.error.is_some());
                let low = decision
                    .proposals
                    .iter()
                    .any(|p| p.metric.contains("queue") && p.replicas == Some(1));
                (failed && low).then_some(decision)
            }))
        },
    )
    .await?;
    assert_eq!(held.desired_replicas, 5, "{held:?}");
    let condition = scaling_active(&env, "web", "False").await?;
    assert_eq!(
        condition.and_then(|c| c.reason).as_deref(),
        Some("FailedGetPrometheusMetric")
    );
    // Three more evaluations (4 requests each: 3 for the refused query, 1 for the other).
    wait_requests(&server, server.requests(), 12).await?;
    assert_eq!(spec_replicas(&env, "web").await?, 5, "never scaled down");
    assert_eq!(scale_writes(&env, "web"), writes, "nothing written");

    // Recovered: the same object is active again and scales down once the load falls.
    server.clear_error(REQUESTS);
    eventually("ScalingActive=True", WITHIN, EVERY, || {
        scaling_active(&env, "web", "True")
    })
    .await?;
    assert_eq!(spec_replicas(&env, "web").await?, 5);
    serve(&server, REQUESTS, 50.0);
    wait_replicas(&env, "web", 1).await?;
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// The status once it says a Prometheus metric's fallback is active. The scale is written
/// before the status of the same evaluation, so the status may lag the replicas it explains.
async fn fallback_in_status(env: &Env) -> anyhow::Result<HorizontalPodAutoscalerPlusStatus> {
    eventually("fallbackActive in status", WITHIN, EVERY, || async {
        Ok(plus_status(env, "web").await?.filter(|s| {
            s.current_metrics
                .iter()
                .filter_map(|m| m.prometheus.as_ref())
                .any(|p| p.fallback.fallback_active)
        }))
    })
    .await
}

/// KEP-5679 on a Prometheus metric: a query refused for its `failureDuration` proposes its
/// `fallback.replicas`; status and condition say so; a success ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_failing_for_its_failure_duration_proposes_its_fallback() -> anyhow::Result<()> {
    let env = Env::start("hpa-plus-prom-fallback").await?;
    token_secret(&env, "prometheus-reader", "t").await?;
    let (server, ca) = prometheus_stand_in("t").await.expect("stand-in starts");
    serve(&server, REQUESTS, 50.0);
    plimsoll_e2e::create_deployment(&env, "web", 1, "100m", "64Mi").await?;
    wait_ready(&env, "web", 1).await?;
    let service = start(config(
        &env,
        &server,
        &ca,
        "prometheus-reader",
        &["--prometheus-timeout=1s"],
    ));
    let mut metric = prometheus_metric(REQUESTS, Some("requests"), "100");
    metric["prometheus"]["fallback"] = json!({"failureDuration": "3s", "replicas": 4});
    let spec = json!({"syncPeriodSeconds": 1, "metrics": [metric]});
    create_plus(&env, &hpa_plus("web", "web", &spec)).await?;
    eventually(
        "ExternalMetricFallbackActive=False",
        WITHIN,
        EVERY,
        || async {
            Ok(plus_status(&env, "web").await?.and_then(|s| {
                s.conditions
                    .into_iter()
                    .find(|c| c.type_ == "ExternalMetricFallbackActive" && c.status == "False")
            }))
        },
    )
    .await?;
    assert_eq!(spec_replicas(&env, "web").await?, 1);

    // Refused from now on: held for 3 s, then the metric proposes 4.
    server.set_error(
        REQUESTS,
        503,
        "unavailable",
        "the query engine is overloaded",
    );
    wait_replicas(&env, "web", 4).await?;
    let status = fallback_in_status(&env).await?;
    let entry = status
        .current_metrics
        .iter()
        .find_map(|m| m.prometheus.as_ref())
        .expect("a currentMetrics entry for the failing query");
    assert!(entry.fallback.fallback_active, "{entry:?}");
    assert_eq!(entry.fallback.fallback_replicas, Some(4));
    let first = entry
        .fallback
        .first_failure_time
        .clone()
        .expect("firstFailureTime");
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == "ExternalMetricFallbackActive")
        .expect("the condition");
    assert_eq!(condition.status, "True");
    assert!(
        condition
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("requests: 4"),
        "{condition:?}"
    );
    // The first failure is in the decision memory, for a successor.
    let memory = status.memory.expect("memory");
    assert!(
        memory.metric_failures.contains_key("requests"),
        "{memory:?}"
    );
    assert!(first.0 <= jiff::Timestamp::now());

    // Back: the fallback ends and the fields are cleared.
    server.clear_error(REQUESTS);
    eventually(
        "ExternalMetricFallbackActive=False again",
        WITHIN,
        EVERY,
        || async {
            Ok(plus_status(&env, "web").await?.and_then(|s| {
                let off = s
                    .conditions
                    .iter()
                    .any(|c| c.type_ == "ExternalMetricFallbackActive" && c.status == "False");
                let cleared = s
                    .current_metrics
                    .iter()
                    .filter_map(|m| m.prometheus.as_ref())
                    .all(|p| {
                        p.fallback.first_failure_time.is_none() && !p.fallback.fallback_active
                    });
                (off && cleared).then_some(())
            }))
        },
    )
    .await?;
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_rotated_in_its_secret_is_picked_up_by_hpa_plus() -> anyhow::Result<()> {
    let env = Env::start("hpa-plus-prom-rotate").await?;
    token_secret(&env, "prometheus-reader", "first").await?;
    let (server, ca) = prometheus_stand_in("first").await.expect("stand-in starts");
    serve(&server, REQUESTS, 250.0);
    plimsoll_e2e::create_deployment(&env, "web", 1, "100m", "64Mi").await?;
    wait_ready(&env, "web", 1).await?;
    // Only a refusal may make hpa-plus read the Secret again within this test.
    let service = start(config(
        &env,
        &server,
        &ca,
        "prometheus-reader",
        &["--prometheus-secret-refresh=1h", "--prometheus-timeout=2s"],
    ));
    let spec =
        json!({"syncPeriodSeconds": 1, "metrics": [prometheus_metric(REQUESTS, None, "100")]});
    create_plus(&env, &hpa_plus("web", "web", &spec)).await?;
    wait_replicas(&env, "web", 3).await?;

    // Rotated in order: the Secret first, then the server. The first refusal re-reads the
    // Secret, so no evaluation fails; the value that follows is read with the new token.
    rotate_secret(&env, "prometheus-reader", "second").await?;
    server.set_token(Some("second"));
    serve(&server, REQUESTS, 450.0);
    wait_replicas(&env, "web", 5).await?;
    let failed = events(&env, "web", "FailedGetPrometheusMetric").await?;
    assert!(failed.is_empty(), "a read failed: {failed:?}");

    // The server moves on alone: refused even after the Secret is read again.
    server.set_token(Some("third"));
    let condition = eventually("ScalingActive=False", WITHIN, EVERY, || {
        scaling_active(&env, "web", "False")
    })
    .await?;
    assert_eq!(
        condition.reason.as_deref(),
        Some("FailedGetPrometheusMetric")
    );
    let message = condition.message.unwrap_or_default();
    assert!(message.contains("PrometheusUnauthorized"), "{message}");
    // Once the Secret catches up, reads resume without a restart.
    rotate_secret(&env, "prometheus-reader", "third").await?;
    eventually("ScalingActive=True", WITHIN, EVERY, || {
        scaling_active(&env, "web", "True")
    })
    .await?;
    serve(&server, REQUESTS, 650.0);
    wait_replicas(&env, "web", 7).await?;
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// A listener that accepts connections and never answers them, counting them.
async fn silent_listener() -> anyhow::Result<(String, Arc<std::sync::atomic::AtomicUsize>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = format!("http://{}", listener.local_addr()?);
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = count.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(stream);
        }
    });
    Ok((address, count))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_not_allowed_gets_no_connection_and_a_condition() -> anyhow::Result<()> {
    let env = Env::start("hpa-plus-prom-not-allowed").await?;
    token_secret(&env, "prometheus-reader", "t").await?;
    let (server, ca) = prometheus_stand_in("t").await.expect("stand-in starts");
    serve(&server, REQUESTS, 250.0);
    let (elsewhere, connections) = silent_listener().await?;
    plimsoll_e2e::create_deployment(&env, "web", 1, "100m", "64Mi").await?;
    wait_ready(&env, "web", 1).await?;
    // Only the configured server is allowed (the default).
    let service = start(config(&env, &server, &ca, "prometheus-reader", &[]));
    let mut metric = prometheus_metric(REQUESTS, Some("requests"), "100");
    metric["prometheus"]["serverAddress"] = json!(elsewhere);
    let spec = json!({"syncPeriodSeconds": 1, "metrics": [metric]});
    create_plus(&env, &hpa_plus("web", "web", &spec)).await?;
    let condition = eventually("ScalingActive=False", WITHIN, EVERY, || {
        scaling_active(&env, "web", "False")
    })
    .await?;
    assert_eq!(
        condition.reason.as_deref(),
        Some("PrometheusServerNotAllowed")
    );
    let message = condition.message.unwrap_or_default();
    assert!(
        message.contains("--prometheus-allowed-servers"),
        "{message}"
    );
    let event = wait_event(&env, "web", "PrometheusServerNotAllowed").await?;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    // A few more evaluations, and still not one connection.
    let before = server.requests();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        connections.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "hpa-plus connected to a server that is not allowed"
    );
    assert_eq!(
        server.requests(),
        before,
        "nor did it ask the default server"
    );
    assert_eq!(spec_replicas(&env, "web").await?, 1);
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_that_never_answers_does_not_hold_up_shutdown() -> anyhow::Result<()> {
    let env = Env::start("hpa-plus-prom-stuck").await?;
    token_secret(&env, "prometheus-reader", "t").await?;
    let (server, ca) = prometheus_stand_in("t").await.expect("stand-in starts");
    let (stuck, connections) = silent_listener().await?;
    plimsoll_e2e::create_deployment(&env, "web", 1, "100m", "64Mi").await?;
    wait_ready(&env, "web", 1).await?;
    // A long period, budget and timeout: only shutdown can end the query early.
    let allowed = format!("--prometheus-allowed-servers={stuck}");
    let service = start(config(
        &env,
        &server,
        &ca,
        "prometheus-reader",
        &[&allowed, "--prometheus-timeout=5m"],
    ));
    let mut metric = prometheus_metric(REQUESTS, Some("requests"), "100");
    metric["prometheus"]["serverAddress"] = json!(stuck);
    let spec = json!({"syncPeriodSeconds": 600, "metrics": [metric]});
    create_plus(&env, &hpa_plus("web", "web", &spec)).await?;
    eventually(
        "a connection to the silent server",
        WITHIN,
        EVERY,
        || async { Ok((connections.load(std::sync::atomic::Ordering::SeqCst) > 0).then_some(())) },
    )
    .await?;
    let stopping = std::time::Instant::now();
    service.stop().await?;
    let took = stopping.elapsed();
    // Without the cancellation this waits out the grace period (15 s) or the query (5 m).
    assert!(took < Duration::from_secs(10), "shutdown took {took:?}");
    // The abandoned evaluation wrote nothing.
    assert!(scaling_active(&env, "web", "False").await?.is_none());
    env.cleanup().await;
    Ok(())
}

/// The gaps between successive times, longest first.
fn gaps(times: &[std::time::Instant]) -> Vec<Duration> {
    let mut gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_unstable_by(|a, b| b.cmp(a));
    gaps
}

/// `good` autoscalers reading the stand-in and `bad` naming the `dead` server, each with one
/// `type: Prometheus` metric, a Deployment of its own and `period`; for each good one, when the
/// stand-in was asked its query: when it was evaluated (a value is cached for nine tenths of
/// the period, so once per evaluation).
async fn good_and_bad(
    env: &Env,
    server: &PrometheusStandIn,
    dead: &str,
    (good, bad): (usize, usize),
    period: Duration,
) -> anyhow::Result<Vec<Arc<Mutex<Vec<std::time::Instant>>>>> {
    let asked: Vec<Arc<Mutex<Vec<std::time::Instant>>>> = (0..good)
        .map(|_| Arc::new(Mutex::new(Vec::new())))
        .collect();
    for (i, times) in asked.iter().enumerate() {
        let times = times.clone();
        server.set_series(
            &format!("sum(good_{i})"),
            vec![StandInSeries::function(&[], move |_| {
                times.lock().expect("lock").push(std::time::Instant::now());
                50.0
            })],
        );
    }
    let period = period.as_secs();
    for i in 0..bad {
        let name = format!("bad-{i}");
        plimsoll_e2e::create_deployment(env, &name, 1, "10m", "16Mi").await?;
        let mut metric = prometheus_metric(&format!("sum(bad_{i})"), Some("bad"), "100");
        metric["prometheus"]["serverAddress"] = json!(dead);
        let spec = json!({"syncPeriodSeconds": period, "metrics": [metric]});
        create_plus(env, &hpa_plus(&name, &name, &spec)).await?;
    }
    for i in 0..good {
        let name = format!("good-{i}");
        plimsoll_e2e::create_deployment(env, &name, 1, "10m", "16Mi").await?;
        let metric = prometheus_metric(&format!("sum(good_{i})"), Some("good"), "100");
        let spec = json!({"syncPeriodSeconds": period, "metrics": [metric]});
        create_plus(env, &hpa_plus(&name, &name, &spec)).await?;
    }
    Ok(asked)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_delays_only_the_autoscalers_that_name_it() -> anyhow::Result<()>
{
    const BAD: usize = 20;
    const GOOD: usize = 2;
    // Every object's period, and so its Prometheus budget.
    const PERIOD: Duration = Duration::from_secs(2);
    // How long the good objects' evaluations are watched.
    const WATCH: Duration = Duration::from_secs(20);
    let env = Env::start("hpa-plus-prom-blackhole").await?;
    token_secret(&env, "prometheus-reader", "t").await?;
    let (server, ca) = prometheus_stand_in("t").await.expect("stand-in starts");
    let (dead, connections) = silent_listener().await?;
    let asked = good_and_bad(&env, &server, &dead, (GOOD, BAD), PERIOD).await?;
    // All 22 are due at once when hpa-plus starts, with four workers between them. Without a
    // cap on the silent server's queries in flight, and no breaker, each bad evaluation holds a
    // worker for its whole budget and the good objects wait behind them (tried: one of them
    // was evaluated once in the 20 s).
    let allowed = format!("--prometheus-allowed-servers={dead}");
    let service = start(config(
        &env,
        &server,
        &ca,
        "prometheus-reader",
        &[&allowed, "--workers=4", "--prometheus-server-concurrency=2"],
    ));
    let started = std::time::Instant::now();
    eventually("both good objects evaluated", WITHIN, EVERY, || async {
        Ok(asked
            .iter()
            .all(|t| !t.lock().expect("lock").is_empty())
            .then_some(()))
    })
    .await?;
    let first = started.elapsed();
    tokio::time::sleep(WATCH).await;

    // Generous for a loaded machine: a period late at most, plus two seconds.
    let late = PERIOD * 2 + Duration::from_secs(2);
    assert!(
        first < late + PERIOD,
        "first good evaluation after {first:?}"
    );
    for (i, times) in asked.iter().enumerate() {
        let times = times.lock().expect("lock").clone();
        let gaps = gaps(&times);
        assert!(
            times.len() >= 5,
            "good-{i} evaluated {} times in {WATCH:?}: {gaps:?}",
            times.len()
        );
        assert!(
            gaps.first().is_some_and(|g| *g <= late),
            "good-{i} waited {:?} between evaluations (period {PERIOD:?}): {gaps:?}",
            gaps.first()
        );
    }
    // The bad objects fail, and their server is no longer asked: a few queries while the cap
    // let two at a time through, then its breaker opened (30 s, so no probe yet).
    let opened = eventually(
        "a bad object's condition says its server is not queried",
        WITHIN,
        EVERY,
        || async {
            for i in 0..BAD {
                if let Some(c) = scaling_active(&env, &format!("bad-{i}"), "False").await?
                    && c.message
                        .as_deref()
                        .is_some_and(|m| m.contains("unresponsive; not queried until"))
                {
                    return Ok(Some(c));
                }
            }
            Ok(None)
        },
    )
    .await?;
    assert_eq!(
        opened.reason.as_deref(),
        Some("FailedGetPrometheusMetric"),
        "{opened:?}"
    );
    let message = opened.message.unwrap_or_default();
    assert!(message.contains("PrometheusUnreachable: "), "{message}");
    assert!(message.contains(&dead), "{message}");
    let sent = connections.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        (1..=6).contains(&sent),
        "{sent} connections to the silent server"
    );
    for i in 0..GOOD {
        let active = scaling_active(&env, &format!("good-{i}"), "True").await?;
        assert!(active.is_some(), "good-{i} is ScalingActive");
    }
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// Hourly peaks of a full `days`-day lookback ending with the current hour, in the stored form:
/// every hour at `base` milli-units except one `peak` hour a day.
fn week_of_history(metric: &str, days: i64, base: i64, peak: i64) -> serde_json::Value {
    let now_hour = jiff::Timestamp::now().as_second().div_euclid(3600);
    let hours = 24 * days;
    let mut flat = Vec::new();
    for i in 0..hours {
        let offset = i64::from(i > 0);
        let value = if i % 24 == 12 { peak } else { base };
        flat.extend([offset, value]);
    }
    json!({"baseHour": now_hour - (hours - 1), "metrics": {metric: flat}})
}

/// The Deployment `web` at 10 replicas, an HPA+ on it with `minReplicas: 10`, a `requests`
/// Prometheus metric (50 against an average of 100) and `minReplicasTuning` in `mode`, and a
/// week of history in its status whose daily peaks are 300: they need 3 replicas.
async fn tuned_workload(env: &Env, server: &PrometheusStandIn, mode: &str) -> anyhow::Result<()> {
    serve(server, REQUESTS, 50.0);
    plimsoll_e2e::create_deployment(env, "web", 10, "10m", "16Mi").await?;
    let spec = json!({
        "syncPeriodSeconds": 1,
        "minReplicas": 10,
        "maxReplicas": 20,
        "metrics": [prometheus_metric(REQUESTS, Some("requests"), "100")],
        "minReplicasTuning": {"mode": mode},
    });
    create_plus(env, &hpa_plus("web", "web", &spec)).await?;
    // Written before hpa-plus starts: it restores the history from status on first sight.
    let history = week_of_history("requests", 7, 120_000, 300_000);
    env.api::<HorizontalPodAutoscalerPlus>()
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"minReplicasTuning": {"loadHistory": history}}})),
        )
        .await?;
    let seeded = plus_status(env, "web")
        .await?
        .and_then(|s| s.min_replicas_tuning)
        .and_then(|t| t.load_history);
    assert!(seeded.is_some(), "the status subresource kept the history");
    Ok(())
}

/// Every `status.minReplicasTuning` of the namespace's HPA+ objects, in the order written.
fn watch_tuning_statuses(
    env: &Env,
) -> (
    Arc<Mutex<Vec<MinReplicasTuningStatus>>>,
    tokio::task::JoinHandle<()>,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let api = env.api::<HorizontalPodAutoscalerPlus>();
    let into = seen.clone();
    let task = tokio::spawn(async move {
        // Backoff, as in the product: a retry that fails at once would never yield to abort.
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects();
        let mut stream = std::pin::pin!(stream);
        while let Some(next) = stream.next().await {
            if let Some(t) = next.ok().and_then(|o| o.status?.min_replicas_tuning) {
                into.lock().expect("lock").push(t);
            }
        }
    });
    (seen, task)
}

fn tuning_of(plus: &HorizontalPodAutoscalerPlus) -> Option<&MinReplicasTuningStatus> {
    plus.status.as_ref()?.min_replicas_tuning.as_ref()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minreplicas_tuning_applies_from_a_restored_week_of_history() -> anyhow::Result<()> {
    let env = Env::start("hpa-plus-tuning-apply").await?;
    token_secret(&env, "prometheus-reader", "t").await?;
    let (server, ca) = prometheus_stand_in("t").await.expect("stand-in starts");
    tuned_workload(&env, &server, "Apply").await?;
    let (seen, watch) = watch_tuning_statuses(&env);
    let service = start(config(&env, &server, &ca, "prometheus-reader", &[]));

    let lowered = eventually("minReplicas lowered to 3", WITHIN, EVERY, || async {
        let p = plus(&env, "web").await?;
        Ok((p.spec.min_replicas == Some(3)).then_some(p))
    })
    .await?;
    assert_eq!(lowered.spec.max_replicas, 20);
    let event = wait_event(&env, "web", "MinReplicasLowered").await?;
    let note = event.note.unwrap_or_default();
    assert!(note.contains("from 10 to 3"), "{note}");
    // The evaluation that lowered it said so in status.
    let applied = eventually(
        "the status of the lowering evaluation",
        WITHIN,
        EVERY,
        || async {
            let seen = seen.lock().expect("lock").clone();
            Ok(seen.into_iter().find(|t| t.reason == "Lowered"))
        },
    )
    .await?;
    assert_eq!(applied.proposed, Some(3), "{applied:?}");
    assert_eq!(applied.needed, Some(3), "{applied:?}");
    assert_eq!(applied.previous_min_replicas, Some(10), "{applied:?}");
    assert!(applied.last_applied_time.is_some(), "{applied:?}");

    // Later evaluations keep what was replaced and when, and lower nothing again.
    let from = server.requests();
    wait_requests(&server, from, 3).await?;
    let now = plus(&env, "web").await?;
    assert_eq!(now.spec.min_replicas, Some(3));
    let tuning = tuning_of(&now).cloned().unwrap_or_default();
    assert_eq!(tuning.previous_min_replicas, Some(10), "{tuning:?}");
    assert_eq!(
        tuning.last_applied_time, applied.last_applied_time,
        "{tuning:?}"
    );
    assert_eq!(tuning.needed, Some(3), "{tuning:?}");
    let history = tuning.load_history.unwrap_or_default();
    let restored = history.metrics.get("requests").map_or(0, Vec::len) / 2;
    assert!(
        restored >= 167,
        "{restored} hours kept of the restored week"
    );
    if let Some(writes) = spec_writes(&env, "web") {
        assert_eq!(writes, 1, "minReplicas lowered once");
    }
    assert_eq!(
        events(&env, "web", "MinReplicasLowered").await?.len(),
        1,
        "one MinReplicasLowered Event"
    );
    watch.abort();
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minreplicas_tuning_reports_from_a_restored_week_of_history() -> anyhow::Result<()> {
    let env = Env::start("hpa-plus-tuning-report").await?;
    token_secret(&env, "prometheus-reader", "t").await?;
    let (server, ca) = prometheus_stand_in("t").await.expect("stand-in starts");
    tuned_workload(&env, &server, "Report").await?;
    let service = start(config(&env, &server, &ca, "prometheus-reader", &[]));

    let proposal = eventually("a proposal of 3", WITHIN, EVERY, || async {
        let p = plus(&env, "web").await?;
        Ok(tuning_of(&p).filter(|t| t.proposed == Some(3)).cloned())
    })
    .await?;
    assert_eq!(proposal.reason, "Lowered", "{proposal:?}");
    assert_eq!(proposal.needed, Some(3), "{proposal:?}");
    assert!(
        proposal.low_load,
        "3 is fewer than half of 10: {proposal:?}"
    );
    assert_eq!(proposal.previous_min_replicas, None, "{proposal:?}");
    // The proposal has its Event, and the low load its Warning.
    let event = wait_event(&env, "web", "MinReplicasTuningProposal").await?;
    let note = event.note.unwrap_or_default();
    assert!(note.contains("from 10 to 3"), "{note}");
    let low = wait_event(&env, "web", "LowLoad").await?;
    assert_eq!(low.type_.as_deref(), Some("Warning"));

    // Several evaluations later minReplicas is still 10 and the proposal stands.
    let from = server.requests();
    wait_requests(&server, from, 3).await?;
    let now = plus(&env, "web").await?;
    assert_eq!(now.spec.min_replicas, Some(10));
    let tuning = tuning_of(&now).cloned().unwrap_or_default();
    assert_eq!(
        (tuning.proposed, tuning.reason.as_str()),
        (Some(3), "Lowered"),
        "{tuning:?}"
    );
    if let Some(writes) = spec_writes(&env, "web") {
        assert_eq!(writes, 0, "Report never writes the spec");
    }
    assert!(
        events(&env, "web", "MinReplicasLowered").await?.is_empty(),
        "Report lowers nothing"
    );
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}

/// The seeded hours are relative to now and span exactly the lookback, a peak on each day.
#[test]
fn a_seeded_week_spans_168_hours_ending_now() {
    let history = week_of_history("m", 7, 1, 5);
    let flat: Vec<i64> = serde_json::from_value(history["metrics"]["m"].clone()).expect("list");
    let pairs: Vec<(i64, i64)> = flat.chunks_exact(2).map(|p| (p[0], p[1])).collect();
    assert_eq!(pairs.len(), 168);
    assert_eq!(pairs[0].0, 0);
    assert!(pairs.iter().skip(1).all(|(offset, _)| *offset == 1));
    assert_eq!(pairs.iter().filter(|(_, v)| *v == 5).count(), 7);
    let now_hour = jiff::Timestamp::now().as_second().div_euclid(3600);
    let base = history["baseHour"].as_i64().expect("baseHour");
    assert!((now_hour - 168..=now_hour - 167).contains(&base), "{base}");
}

/// No history in status at all: on first sight hpa-plus reads the metric's past week from
/// Prometheus (`max_over_time((query)[1h:])` hourly) and tunes from it the same evaluation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minreplicas_tuning_reads_the_past_week_from_prometheus() -> anyhow::Result<()> {
    let env = Env::start("hpa-plus-tuning-prometheus-past").await?;
    token_secret(&env, "prometheus-reader", "t").await?;
    let (server, ca) = prometheus_stand_in("t").await.expect("stand-in starts");
    serve(&server, REQUESTS, 50.0);
    // Hourly peaks: 300 at noon (UTC) every day, 120 otherwise; they need 3 replicas of 100.
    server.set_series(
        &format!("max_over_time(({REQUESTS})[1h:])"),
        vec![StandInSeries::function(&[], |t| {
            // Whole hours since the epoch; the series is read at whole hours.
            let hour = (t / 3600.0).floor() as i64;
            if hour.rem_euclid(24) == 12 {
                300.0
            } else {
                120.0
            }
        })],
    );
    plimsoll_e2e::create_deployment(&env, "web", 10, "10m", "16Mi").await?;
    let spec = json!({
        "syncPeriodSeconds": 1,
        "minReplicas": 10,
        "maxReplicas": 20,
        "metrics": [prometheus_metric(REQUESTS, Some("requests"), "100")],
        "minReplicasTuning": {"mode": "Apply"},
    });
    create_plus(&env, &hpa_plus("web", "web", &spec)).await?;
    let service = start(config(&env, &server, &ca, "prometheus-reader", &[]));

    let lowered = eventually("minReplicas lowered to 3", WITHIN, EVERY, || async {
        let p = plus(&env, "web").await?;
        Ok((p.spec.min_replicas == Some(3)).then_some(p))
    })
    .await?;
    assert_eq!(lowered.spec.max_replicas, 20);
    // The week read from Prometheus is now the object's own history.
    let kept = eventually("the history in status", WITHIN, EVERY, || async {
        let p = plus(&env, "web").await?;
        Ok(tuning_of(&p)
            .and_then(|t| t.load_history.clone())
            .and_then(|h| h.metrics.get("requests").map(|l| l.len() / 2))
            .filter(|hours| *hours >= 167))
    })
    .await?;
    assert!(kept <= 168, "{kept} hours for a 7-day lookback");
    let _ = service.stop().await;
    env.cleanup().await;
    Ok(())
}
