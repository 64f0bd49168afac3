//! A history source: the Prometheus HTTP API (`/api/v1/query`, `/api/v1/query_range`), one
//! client for every service that reads series (hpa-plus' Prometheus metrics and minReplicas
//! tuning, the recommender's `--storage=prometheus`).
//!
//! | part | what it decides |
//! |---|---|
//! | [`flags`] | the `--prometheus-*` flags and [`PrometheusConfig`] |
//! | [`auth`] | the `Authorization` header: bearer or basic, literal, file or Secret; rotation |
//! | [`retry`] | which failures are tried again, and the backoff between attempts |
//! | [`response`] | reading the API's JSON (vector, matrix, scalar; `NaN`, `±Inf`; errors) |
//! | `transport` | one GET over TCP or rustls with the configured trust |
//!
//! Every query answers or fails within the configured timeout, retries included, and a failure
//! is a [`PrometheusError`] whose [`PrometheusError::reason`] is a condition reason.

pub mod auth;
pub mod error;
pub mod flags;
pub mod response;
pub mod retry;
mod transport;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tokio::time::Instant;

pub use auth::{Auth, SecretKeyRef, SecretSource};
pub use error::{PrometheusError, Result};
pub use flags::{PrometheusArgs, PrometheusConfig};
pub use response::{QueryData, Sample, Series};
pub use retry::RetryPolicy;

use auth::Credentials;
use response::BodyError;
use transport::{Target, TransportError};

/// The least time worth starting another attempt with.
const MIN_ATTEMPT: Duration = Duration::from_millis(100);

/// A Prometheus HTTP API client. Cheap to share behind an `Arc`; holds no connection between
/// queries.
pub struct PrometheusClient {
    address: String,
    target: Target,
    tls: Option<Arc<rustls::ClientConfig>>,
    credentials: Credentials,
    timeout: Duration,
    retry: RetryPolicy,
}

impl std::fmt::Debug for PrometheusClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrometheusClient")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl PrometheusClient {
    /// A client for `config`; `kube` reads credentials kept in a Secret (required then).
    pub fn new(config: &PrometheusConfig, kube: Option<kube::Client>) -> Result<Self> {
        let target = Target::parse(&config.address).map_err(PrometheusError::Config)?;
        if config.auth.needs_kube() && kube.is_none() {
            return Err(PrometheusError::Config(
                "credentials in a Secret need a Kubernetes client".into(),
            ));
        }
        let tls = if target.https {
            Some(
                transport::tls_config(config.ca_file.as_deref(), config.insecure_skip_verify)
                    .map_err(PrometheusError::Config)?,
            )
        } else {
            None
        };
        Ok(Self {
            address: config.address.clone(),
            target,
            tls,
            credentials: Credentials::new(config.auth.clone(), kube, config.secret_refresh),
            timeout: config.timeout,
            retry: config.retry,
        })
    }

    /// The server's base URL, as configured.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Whether requests carry credentials (bearer or basic).
    pub fn has_credentials(&self) -> bool {
        self.credentials.configured()
    }

    /// An instant query (`/api/v1/query`) evaluated at `at`.
    pub async fn query(&self, promql: &str, at: Timestamp) -> Result<QueryData> {
        let form = form_urlencoded::Serializer::new(String::new())
            .append_pair("query", promql)
            .append_pair("time", &format_time(at))
            .finish();
        self.call(promql, &format!("/api/v1/query?{form}")).await
    }

    /// A range query (`/api/v1/query_range`) from `start` to `end` every `step`; the series of
    /// the answer's matrix.
    pub async fn query_range(
        &self,
        promql: &str,
        start: Timestamp,
        end: Timestamp,
        step: Duration,
    ) -> Result<Vec<Series>> {
        let form = form_urlencoded::Serializer::new(String::new())
            .append_pair("query", promql)
            .append_pair("start", &format_time(start))
            .append_pair("end", &format_time(end))
            .append_pair("step", &format_step(step))
            .finish();
        match self
            .call(promql, &format!("/api/v1/query_range?{form}"))
            .await?
        {
            QueryData::Matrix(series) => Ok(series),
            other => Err(self.unexpected(promql, &other, "matrix")),
        }
    }

    /// An instant query that must reduce to one finite number (a scalar, or a vector of exactly
    /// one series). No series, NaN or ±Inf is [`PrometheusError::EmptyResult`]; several series is
    /// a [`PrometheusError::Query`] error (the query should aggregate them).
    pub async fn query_value(&self, promql: &str, at: Timestamp) -> Result<f64> {
        let value = match self.query(promql, at).await? {
            QueryData::Scalar(sample) => sample.value,
            QueryData::Vector(series) => match series.as_slice() {
                [] => return Err(self.empty(promql, "no series")),
                [one] => one
                    .samples
                    .last()
                    .map(|s| s.value)
                    .ok_or_else(|| self.empty(promql, "a series without a sample"))?,
                many => {
                    return Err(PrometheusError::Query {
                        server: self.address.clone(),
                        query: promql.to_owned(),
                        error_type: "multiple_series".into(),
                        error: format!("{} series where one number was expected", many.len()),
                    });
                }
            },
            other => return Err(self.unexpected(promql, &other, "vector or scalar")),
        };
        if value.is_finite() {
            Ok(value)
        } else {
            Err(self.empty(promql, &format_value(value)))
        }
    }

    /// Sends one API request, retrying as [`retry`] decides, within the timeout.
    async fn call(&self, promql: &str, path_and_query: &str) -> Result<QueryData> {
        let deadline = Instant::now() + self.timeout;
        let mut failed = 0;
        let mut reread = false;
        loop {
            let authorization = self
                .credentials
                .header()
                .await
                .map_err(|reason| self.unauthorized(promql, reason))?;
            let remaining = deadline.saturating_duration_since(Instant::now());
            let attempt = tokio::time::timeout(
                remaining,
                transport::get(
                    &self.target,
                    self.tls.as_ref(),
                    path_and_query,
                    authorization.as_deref(),
                ),
            )
            .await;
            let reason = match attempt {
                Err(_) => {
                    return Err(self.unreachable(
                        promql,
                        format!(
                            "no answer within {} ({} attempts)",
                            crate::args::format_duration(self.timeout),
                            failed + 1
                        ),
                    ));
                }
                Ok(Err(TransportError::Certificate(reason))) => {
                    return Err(self.unreachable(promql, reason));
                }
                Ok(Err(TransportError::Connection(reason))) => reason,
                Ok(Ok(answer)) if matches!(answer.status, 401 | 403) => {
                    // A rotated credential: read it again, and send once more if it changed.
                    if !reread && self.credentials.forget().await {
                        reread = true;
                        let fresh = self.credentials.header().await.ok().flatten();
                        if fresh.is_some() && fresh != authorization {
                            continue;
                        }
                    }
                    return Err(self.unauthorized(promql, format!("HTTP {}", answer.status)));
                }
                Ok(Ok(answer)) if retry::is_retryable_status(answer.status) => {
                    format!("HTTP {}{}", answer.status, rejection(&answer.body))
                }
                Ok(Ok(answer)) => return self.read_answer(promql, answer.status, &answer.body),
            };
            failed += 1;
            let remaining = deadline.saturating_duration_since(Instant::now());
            let Some(delay) =
                self.retry
                    .next_delay(failed, retry::jitter(), remaining, MIN_ATTEMPT)
            else {
                return Err(self.unreachable(promql, format!("{reason} ({failed} attempts)")));
            };
            tracing::debug!(server = %self.address, %reason, ?delay, "prometheus request failed; retrying");
            tokio::time::sleep(delay).await;
        }
    }

    fn read_answer(&self, promql: &str, status: u16, body: &[u8]) -> Result<QueryData> {
        let query_error = |error_type: String, error: String| PrometheusError::Query {
            server: self.address.clone(),
            query: promql.to_owned(),
            error_type,
            error,
        };
        match response::parse_body(body) {
            Ok(data) if (200..300).contains(&status) => Ok(data),
            Ok(_) => Err(query_error(
                "bad_response".into(),
                format!("HTTP {status} with a success body"),
            )),
            Err(BodyError::Rejected { error_type, error }) => Err(query_error(error_type, error)),
            Err(BodyError::Malformed(reason)) => Err(query_error(
                "bad_response".into(),
                format!("HTTP {status}: {reason}"),
            )),
        }
    }

    fn unreachable(&self, promql: &str, reason: String) -> PrometheusError {
        PrometheusError::Unreachable {
            server: self.address.clone(),
            query: promql.to_owned(),
            reason,
        }
    }

    fn unauthorized(&self, promql: &str, reason: String) -> PrometheusError {
        PrometheusError::Unauthorized {
            server: self.address.clone(),
            query: promql.to_owned(),
            reason,
        }
    }

    fn empty(&self, promql: &str, detail: &str) -> PrometheusError {
        PrometheusError::EmptyResult {
            server: self.address.clone(),
            query: promql.to_owned(),
            detail: detail.to_owned(),
        }
    }

    fn unexpected(&self, promql: &str, data: &QueryData, wanted: &str) -> PrometheusError {
        let got = match data {
            QueryData::Vector(_) => "vector",
            QueryData::Matrix(_) => "matrix",
            QueryData::Scalar(_) => "scalar",
            QueryData::String(..) => "string",
        };
        PrometheusError::Query {
            server: self.address.clone(),
            query: promql.to_owned(),
            error_type: "bad_response".into(),
            error: format!("a {got} where a {wanted} was expected"),
        }
    }
}

/// `: <errorType>: <error>` when a failed answer carries Prometheus' error envelope.
fn rejection(body: &[u8]) -> String {
    match response::parse_body(body) {
        Err(BodyError::Rejected { error_type, error }) => format!(": {error_type}: {error}"),
        _ => String::new(),
    }
}

/// Unix seconds, with milliseconds when there are any (what the API reads as `time`).
pub fn format_time(at: Timestamp) -> String {
    let millis = at.as_millisecond();
    if millis % 1000 == 0 {
        (millis / 1000).to_string()
    } else {
        format!("{}.{:03}", millis.div_euclid(1000), millis.rem_euclid(1000))
    }
}

/// A query step: whole seconds as `<n>s`, else float seconds; at least 1 ms.
pub fn format_step(step: Duration) -> String {
    let step = step.max(Duration::from_millis(1));
    if step.subsec_nanos() == 0 {
        format!("{}s", step.as_secs())
    } else {
        format!("{}", step.as_secs_f64())
    }
}

/// A sample value as Prometheus writes it (`NaN`, `+Inf`, `-Inf`, shortest round-trip digits).
pub fn format_value(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value == f64::INFINITY {
        "+Inf".into()
    } else if value == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_steps_and_values_format_as_the_api_reads_them() {
        let t = Timestamp::from_millisecond(1_700_000_000_500).unwrap();
        assert_eq!(format_time(t), "1700000000.500");
        assert_eq!(
            format_time(Timestamp::from_second(1_700_000_000).unwrap()),
            "1700000000"
        );
        assert_eq!(format_step(Duration::from_secs(3600)), "3600s");
        assert_eq!(format_step(Duration::from_millis(1500)), "1.5");
        assert_eq!(format_step(Duration::ZERO), "0.001");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_value(0.25), "0.25");
        for v in [0.25, 1e6, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(
                format_value(v).parse::<f64>().unwrap().to_bits(),
                v.to_bits()
            );
        }
    }

    #[test]
    fn secrets_need_a_client_and_addresses_must_parse() {
        let mut config = PrometheusConfig::new("https://prom:9090");
        config.auth = Auth::Bearer(SecretSource::Secret(SecretKeyRef {
            namespace: "m".into(),
            name: "t".into(),
            key: "token".into(),
        }));
        assert!(matches!(
            PrometheusClient::new(&config, None),
            Err(PrometheusError::Config(_))
        ));
        assert!(matches!(
            PrometheusClient::new(&PrometheusConfig::new("prom:9090"), None),
            Err(PrometheusError::Config(_))
        ));
    }

    /// A server that answers every connection with `status` and `body`, counting requests.
    async fn canned(
        status: u16,
        body: &'static str,
    ) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = count.clone();
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let reply = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
            }
        });
        (address, count)
    }

    fn client(address: &str) -> PrometheusClient {
        let mut config = PrometheusConfig::new(address);
        config.retry.initial_backoff = Duration::from_millis(10);
        PrometheusClient::new(&config, None).unwrap()
    }

    /// Controllers spawn queries on the multi-threaded runtime and share one client.
    #[test]
    fn queries_can_be_spawned_from_a_shared_client() {
        fn spawnable<T: Send + 'static>(_: &T) {}
        fn shareable<T: Send + Sync>() {}
        shareable::<PrometheusClient>();
        let client = Arc::new(client("http://127.0.0.1:1"));
        let query = async move {
            client
                .query_range(
                    "up",
                    Timestamp::UNIX_EPOCH,
                    Timestamp::UNIX_EPOCH,
                    Duration::from_secs(1),
                )
                .await
        };
        spawnable(&query);
    }

    #[tokio::test]
    async fn a_bad_query_is_not_retried_and_a_503_is() {
        let (address, count) = canned(
            400,
            r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#,
        )
        .await;
        let err = client(&address)
            .query("sum(", Timestamp::UNIX_EPOCH)
            .await
            .unwrap_err();
        assert_eq!(err.reason(), "PrometheusQueryError", "{err}");
        assert!(err.to_string().contains("parse error"), "{err}");
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);

        let (address, count) = canned(
            503,
            r#"{"status":"error","errorType":"unavailable","error":"starting"}"#,
        )
        .await;
        let err = client(&address)
            .query("up", Timestamp::UNIX_EPOCH)
            .await
            .unwrap_err();
        assert_eq!(err.reason(), "PrometheusUnreachable", "{err}");
        assert!(err.to_string().contains("(3 attempts)"), "{err}");
        assert!(err.to_string().contains("starting"), "{err}");
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn one_number_or_an_empty_result() {
        let (address, _) = canned(
            200,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}}"#,
        )
        .await;
        let err = client(&address)
            .query_value("x", Timestamp::UNIX_EPOCH)
            .await
            .unwrap_err();
        assert_eq!(err.reason(), "PrometheusEmptyResult");
        assert!(err.to_string().contains("NaN"), "{err}");
        let (address, _) = canned(
            200,
            r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#,
        )
        .await;
        let err = client(&address)
            .query_value("x", Timestamp::UNIX_EPOCH)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no series"), "{err}");
        let (address, _) = canned(
            200,
            r#"{"status":"success","data":{"resultType":"scalar","result":[1,"42.5"]}}"#,
        )
        .await;
        let value = client(&address)
            .query_value("x", Timestamp::UNIX_EPOCH)
            .await
            .unwrap();
        assert!((value - 42.5).abs() < f64::EPSILON);
    }

    #[tokio::test]
    async fn a_refused_connection_is_unreachable_after_the_attempts() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let started = std::time::Instant::now();
        let err = client(&address)
            .query("up", Timestamp::UNIX_EPOCH)
            .await
            .unwrap_err();
        assert_eq!(err.reason(), "PrometheusUnreachable");
        assert!(err.to_string().contains(&address), "{err}");
        assert!(err.to_string().contains("(3 attempts)"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
