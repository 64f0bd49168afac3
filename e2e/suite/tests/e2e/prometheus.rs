//! The runtime's Prometheus client against the sim's Prometheus stand-in over TLS with a bearer
//! token: instant and range values; a wrong token is `PrometheusUnauthorized`; a token rotated
//! in its Secret is picked up on the first refusal; a server that went away is
//! `PrometheusUnreachable` after the retries and within the timeout, and is used again once
//! back; NaN and no series are `PrometheusEmptyResult`; a rejected query is not retried; and the
//! recommender loads its history from the stand-in through its own flags.
//!
//! The Secret test runs against the sim or a real cluster (`PLIMSOLL_E2E_KUBECONFIG`); the
//! stand-in always runs in this process.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams, PostParams};
use plimsoll_e2e::{Env, TempFile, prometheus_stand_in};
use plimsoll_runtime::prometheus::{
    Auth, PrometheusClient, PrometheusConfig, PrometheusError, QueryData, SecretKeyRef,
    SecretSource,
};
use plimsoll_sim::{PrometheusStandIn, StandInOptions, StandInSeries};
use serde_json::json;

fn config(server: &PrometheusStandIn, ca: &TempFile, auth: Auth) -> PrometheusConfig {
    let mut config = PrometheusConfig::new(server.url());
    config.ca_file = Some(ca.0.clone());
    config.auth = auth;
    config.timeout = Duration::from_secs(5);
    config
}

fn bearer(token: &str) -> Auth {
    Auth::Bearer(SecretSource::Literal(token.to_owned()))
}

fn now() -> Timestamp {
    Timestamp::from_second(1_700_000_000).expect("ts")
}

#[tokio::test]
async fn instant_and_range_values_over_tls_with_a_bearer_token() {
    let (server, ca) = prometheus_stand_in("t0k3n").await.expect("stand-in starts");
    let client =
        PrometheusClient::new(&config(&server, &ca, bearer("t0k3n")), None).expect("client");
    server.set_series(
        "sum(rate(http_requests_total[1m]))",
        vec![StandInSeries::function(&[("app", "web")], |t| {
            if t < 1_700_000_000.0 { 10.0 } else { 42.5 }
        })],
    );
    let value = client
        .query_value("sum(rate(http_requests_total[1m]))", now())
        .await
        .expect("value");
    assert!((value - 42.5).abs() < 1e-9, "{value}");
    let QueryData::Vector(series) = client
        .query("sum(rate(http_requests_total[1m]))", now())
        .await
        .expect("vector")
    else {
        panic!("not a vector");
    };
    assert_eq!(series[0].labels["app"], "web");

    let start = 1_700_000_000.0;
    server.set_series(
        "container_memory_working_set_bytes",
        vec![
            StandInSeries::samples(
                &[("pod", "web-1")],
                (0..4)
                    .map(|i| (start + f64::from(i) * 60.0, 100.0 * f64::from(i + 1)))
                    .collect(),
            ),
            StandInSeries::samples(&[("pod", "web-2")], vec![(start + 120.0, 7.0)]),
        ],
    );
    let series = client
        .query_range(
            "container_memory_working_set_bytes",
            now(),
            Timestamp::from_second(1_700_000_180).expect("ts"),
            Duration::from_secs(60),
        )
        .await
        .expect("matrix");
    let by_pod: BTreeMap<&str, Vec<(f64, f64)>> = series
        .iter()
        .map(|s| {
            (
                s.labels["pod"].as_str(),
                s.samples
                    .iter()
                    .map(|p| (p.time - start, p.value))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        by_pod["web-1"],
        vec![(0.0, 100.0), (60.0, 200.0), (120.0, 300.0), (180.0, 400.0)]
    );
    assert_eq!(by_pod["web-2"], vec![(120.0, 7.0), (180.0, 7.0)]);
}

#[tokio::test]
async fn a_wrong_token_or_an_untrusted_certificate_is_refused_without_retries() {
    let (server, ca) = prometheus_stand_in("right").await.expect("stand-in starts");
    server.set_series("up", vec![StandInSeries::function(&[], |_| 1.0)]);
    let client =
        PrometheusClient::new(&config(&server, &ca, bearer("wrong")), None).expect("client");
    let before = server.requests();
    let err = client.query("up", now()).await.expect_err("refused");
    assert_eq!(err.reason(), "PrometheusUnauthorized", "{err}");
    assert!(err.to_string().contains(&server.url()), "{err}");
    assert!(err.to_string().contains("401"), "{err}");
    assert_eq!(
        server.requests() - before,
        1,
        "a literal token is not re-read"
    );

    // The system roots do not know the stand-in's CA: refused at the handshake, not retried.
    // (A machine with no system roots at all refuses the client itself, naming the flag.)
    let mut untrusted = config(&server, &ca, bearer("right"));
    untrusted.ca_file = None;
    let before = server.requests();
    let client = match PrometheusClient::new(&untrusted, None) {
        Ok(client) => client,
        Err(e) => {
            assert!(e.to_string().contains("--prometheus-ca-file"), "{e}");
            return;
        }
    };
    let err = client.query("up", now()).await.expect_err("untrusted");
    assert_eq!(err.reason(), "PrometheusUnreachable", "{err}");
    assert!(err.to_string().contains("TLS handshake failed"), "{err}");
    assert!(err.to_string().contains("(1 attempt)"), "{err}");
    assert_eq!(server.requests(), before);
}

#[tokio::test]
async fn a_token_rotated_in_its_secret_is_picked_up() {
    let env = Env::start("prometheus-secret").await.expect("env");
    let secrets = env.api::<Secret>();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "prometheus-reader"},
        "stringData": {"token": "first"},
    }))
    .expect("secret");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create secret");
    let (server, ca) = prometheus_stand_in("first").await.expect("stand-in starts");
    server.set_series("up", vec![StandInSeries::function(&[], |_| 1.0)]);
    let mut config = config(
        &server,
        &ca,
        Auth::Bearer(SecretSource::Secret(SecretKeyRef {
            namespace: env.namespace.clone(),
            name: "prometheus-reader".into(),
            key: "token".into(),
        })),
    );
    // Only a refusal may make the client read the Secret again within this test.
    config.secret_refresh = Duration::from_secs(3600);
    let client = PrometheusClient::new(&config, Some(env.client.clone())).expect("client");
    assert!((client.query_value("up", now()).await.expect("first token") - 1.0).abs() < 1e-9);

    server.set_token(Some("second"));
    secrets
        .patch(
            "prometheus-reader",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"token": "second"}})),
        )
        .await
        .expect("rotate");
    let before = server.requests();
    let value = client
        .query_value("up", now())
        .await
        .expect("rotated token");
    assert!((value - 1.0).abs() < 1e-9);
    assert_eq!(
        server.requests() - before,
        2,
        "one refusal with the old token, one answer with the new"
    );

    // A Secret that still holds a refused token ends as unauthorized after one re-read.
    server.set_token(Some("third"));
    let err = client.query("up", now()).await.expect_err("stale secret");
    assert_eq!(err.reason(), "PrometheusUnauthorized", "{err}");
    env.cleanup().await;
}

#[tokio::test]
async fn a_server_that_went_away_is_unreachable_within_the_timeout_and_used_again_once_back() {
    let (server, ca) = prometheus_stand_in("t").await.expect("stand-in starts");
    server.set_series("up", vec![StandInSeries::function(&[], |_| 1.0)]);
    let mut config = config(&server, &ca, bearer("t"));
    config.timeout = Duration::from_secs(3);
    let client = PrometheusClient::new(&config, None).expect("client");
    client.query_value("up", now()).await.expect("up");

    server.stop().await;
    let started = Instant::now();
    let err = client.query("up", now()).await.expect_err("gone");
    let took = started.elapsed();
    assert_eq!(err.reason(), "PrometheusUnreachable", "{err}");
    assert!(err.to_string().contains("(3 attempts)"), "{err}");
    assert!(err.to_string().contains(&server.url()), "{err}");
    assert!(took <= config.timeout, "took {took:?}");
    // Two backoffs of at least half of 250 ms and 500 ms were waited.
    assert!(took >= Duration::from_millis(375), "took {took:?}");

    server.restart().await.expect("restart");
    client.query_value("up", now()).await.expect("back");
}

#[tokio::test]
async fn nan_no_series_and_a_rejected_query_are_reported_as_such() {
    let (server, ca) = prometheus_stand_in("t").await.expect("stand-in starts");
    let client = PrometheusClient::new(&config(&server, &ca, bearer("t")), None).expect("client");
    server.set_series("nan", vec![StandInSeries::function(&[], |_| f64::NAN)]);
    let err = client.query_value("nan", now()).await.expect_err("NaN");
    assert_eq!(err.reason(), "PrometheusEmptyResult", "{err}");
    assert!(err.to_string().contains("NaN"), "{err}");
    // The raw vector still carries the NaN.
    let QueryData::Vector(series) = client.query("nan", now()).await.expect("vector") else {
        panic!("not a vector");
    };
    assert!(series[0].samples[0].value.is_nan());

    let err = client
        .query_value("absent_metric", now())
        .await
        .expect_err("empty");
    assert!(
        matches!(&err, PrometheusError::EmptyResult { detail, .. } if detail == "no series"),
        "{err}"
    );

    server.set_error(
        "sum(",
        400,
        "bad_data",
        "1:5: parse error: unclosed left parenthesis",
    );
    let before = server.requests();
    let err = client.query("sum(", now()).await.expect_err("bad query");
    assert_eq!(err.reason(), "PrometheusQueryError", "{err}");
    // The documented errorType is quoted; the server's own text goes to the log detail only.
    assert!(err.to_string().ends_with(": bad_data"), "{err}");
    assert!(
        !err.to_string().contains("unclosed left parenthesis"),
        "{err}"
    );
    assert!(
        err.detail().contains("unclosed left parenthesis"),
        "{}",
        err.detail()
    );
    assert_eq!(server.requests() - before, 1, "a bad query is not retried");

    server.set_error(
        "slow",
        503,
        "timeout",
        "query timed out in expression evaluation",
    );
    let before = server.requests();
    let err = client.query("slow", now()).await.expect_err("503");
    assert_eq!(err.reason(), "PrometheusUnreachable", "{err}");
    assert_eq!(server.requests() - before, 3, "a 503 is retried");
}

#[tokio::test]
async fn the_recommender_loads_its_history_over_tls_with_its_flags() {
    let (server, ca) = prometheus_stand_in("recommender-token")
        .await
        .expect("stand-in starts");
    let token = TempFile::new("token", "recommender-token\n").expect("temp file");
    let selector = r#"job="kubernetes-cadvisor", pod=~".+", name!="POD", name!="""#;
    let labels = [("namespace", "shop"), ("pod", "web-1"), ("name", "app")];
    let end = 1_700_010_000.0;
    server.set_series(
        &format!("rate(container_cpu_usage_seconds_total{{{selector}}}[3600s])"),
        vec![StandInSeries::samples(
            &labels,
            vec![
                (end - 7200.0, 0.3),
                (end - 3600.0, 0.25),
                (end - 100.0, f64::NAN),
            ],
        )],
    );
    server.set_series(
        &format!("container_memory_working_set_bytes{{{selector}}}"),
        vec![StandInSeries::samples(
            &labels,
            vec![(end - 3600.0, 104_857_600.0)],
        )],
    );
    let url = server.url();
    let ca_path = ca.0.display().to_string();
    let token_path = token.0.display().to_string();
    let config = plimsoll_vpa_recommender::cli::Args::from_flags([
        "vpa-recommender",
        "--storage=prometheus",
        "--prometheus-address",
        url.as_str(),
        "--prometheus-ca-file",
        ca_path.as_str(),
        "--prometheus-bearer-token-file",
        token_path.as_str(),
    ])
    .expect("flags parse")
    .into_config();
    let prom = config.prometheus.expect("prometheus storage");
    let now = Timestamp::from_second(1_700_010_000).expect("ts");
    let history = plimsoll_vpa_recommender::history::load(&prom, now)
        .await
        .expect("history loads");
    let h = &history[&("shop".into(), "web-1".into(), "app".into())];
    // Hourly steps over 8 days ending at `end`: 0.3 and 0.25 at the two hours before it; the
    // step at `end` itself answers the NaN, which the recommender skips.
    assert_eq!(
        h.cpu,
        vec![
            (Timestamp::from_second(1_700_002_800).expect("ts"), 300),
            (Timestamp::from_second(1_700_006_400).expect("ts"), 250),
        ]
    );
    assert_eq!(
        h.memory,
        vec![(
            Timestamp::from_second(1_700_006_400).expect("ts"),
            104_857_600
        )]
    );

    // The same flags with a stale token file: the recommender's error names the server and why.
    std::fs::write(&token.0, "old").expect("write");
    let err = plimsoll_vpa_recommender::history::load(&prom, now)
        .await
        .expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains(&url) && text.contains("PrometheusUnauthorized"),
        "{text}"
    );
}

/// The stand-in reads a POST form body like Prometheus does (clients switch to POST for long
/// queries); plain HTTP here, so the request is written by hand.
#[tokio::test]
async fn the_stand_in_answers_a_post_form_like_prometheus() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = PrometheusStandIn::start(StandInOptions {
        tls: false,
        token: Some("t".into()),
        ..StandInOptions::default()
    })
    .await
    .expect("stand-in starts");
    server.set_series(
        "sum(up)",
        vec![StandInSeries::function(&[("job", "a")], |t| t / 1000.0)],
    );
    let body = "query=sum%28up%29&start=1000&end=3000&step=1000";
    let address = server.url().trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address)
        .await
        .expect("connect");
    let request = format!(
        "POST /api/v1/query_range HTTP/1.1\r\nhost: {address}\r\nauthorization: Bearer t\r\n\
         content-type: application/x-www-form-urlencoded\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("read");
    let (head, json) = answer.split_once("\r\n\r\n").expect("head and body");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let data = plimsoll_runtime::prometheus::response::parse_body(json.as_bytes()).expect("api");
    let QueryData::Matrix(series) = data else {
        panic!("not a matrix: {json}");
    };
    let values: Vec<f64> = series[0].samples.iter().map(|s| s.value).collect();
    assert_eq!(values, vec![1.0, 2.0, 3.0]);
}

/// Plimsoll's images carry no CA bundle: hpa-plus, and the recommender with its history in
/// Prometheus, given an https server and no CA to verify it against stop at start naming the
/// flag, rather than run and fail every query. The machine's roots are taken away with
/// `SSL_CERT_FILE` pointing at an empty file.
#[tokio::test]
async fn an_https_server_with_no_ca_at_all_stops_the_service_at_start_naming_the_flag()
-> anyhow::Result<()> {
    use std::process::{Command, Stdio};
    // The exit status within `limit`, or `None` (then the process is killed).
    async fn exited(
        child: &mut std::process::Child,
        limit: Duration,
    ) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }
    let env = Env::start("prometheus-no-roots").await?;
    let empty = TempFile::new("no-roots.pem", "")?;
    let log = TempFile::new("no-roots.log", "")?;
    let (_server, ca) = prometheus_stand_in("t").await?;
    for (service, storage) in [
        ("hpa-plus", None),
        ("vpa-recommender", Some("--storage=prometheus")),
    ] {
        let spawn = |ca: Option<&TempFile>| {
            Command::new(env!("CARGO_BIN_EXE_plimsoll-service"))
                .arg(service)
                .arg(format!("--kubeconfig={}", env.kubeconfig.display()))
                .args([
                    "--metrics-address=127.0.0.1:0",
                    "--leader-elect=false",
                    "--prometheus-address=https://127.0.0.1:9",
                ])
                .args(storage)
                .args(ca.map(|f| format!("--prometheus-ca-file={}", f.0.display())))
                .env("SSL_CERT_FILE", &empty.0)
                .env_remove("SSL_CERT_DIR")
                .stdin(Stdio::null())
                .stderr(std::fs::File::create(&log.0)?)
                .spawn()
        };
        let mut child = spawn(None)?;
        let status = exited(&mut child, Duration::from_secs(60)).await;
        let stderr = std::fs::read_to_string(&log.0)?;
        assert!(
            status.is_some_and(|s| !s.success()),
            "{service}: {status:?}: {stderr}"
        );
        assert!(
            stderr.contains("--prometheus-ca-file"),
            "{service}: {stderr}"
        );
        assert!(stderr.contains("no CA certificates"), "{service}: {stderr}");

        // With a CA file it starts, and runs until stopped.
        let mut child = spawn(Some(&ca))?;
        let status = exited(&mut child, Duration::from_secs(3)).await;
        let stderr = std::fs::read_to_string(&log.0)?;
        assert!(status.is_none(), "{service} exited: {status:?}: {stderr}");
    }
    env.cleanup().await;
    Ok(())
}
