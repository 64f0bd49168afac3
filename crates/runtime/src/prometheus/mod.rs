//! A history source: the Prometheus HTTP API (`/api/v1/query`, `/api/v1/query_range`), one
//! client for every service that reads series (hpa-plus' Prometheus metrics and minReplicas
//! tuning, the recommender's `--storage=prometheus`).
//!
//! | part | what it decides |
//! |---|---|
//! | [`flags`] | the `--prometheus-*` flags and [`PrometheusConfig`] |
//! | [`allow`] | which servers may be queried at all (`--prometheus-allowed-servers`) |
//! | [`auth`] | the `Authorization` header: bearer or basic, literal, file or Secret; rotation |
//! | [`retry`] | which failures are tried again, and the backoff between attempts |
//! | [`breaker`] | when a server that does not answer is no longer queried, and the cap on its queries in flight |
//! | [`response`] | reading the API's JSON (vector, matrix, scalar; `NaN`, `±Inf`; errors) |
//! | [`error`] | the failure classes users read, and the bounded detail operators log |
//! | `transport` | one GET over TCP or rustls with the configured trust, the body capped |
//!
//! Every query answers or fails by its deadline, retries included: `--prometheus-timeout`
//! from its start, or an earlier deadline the caller gives (`*_before`, an autoscaler's
//! budget for all its queries). An answer is read up to `--prometheus-max-response-bytes` and
//! no further. A failure is a [`PrometheusError`] whose [`PrometheusError::reason`] is a
//! condition reason and whose message carries no remote text.

pub mod allow;
pub mod auth;
pub mod breaker;
pub mod error;
pub mod flags;
pub mod response;
pub mod retry;
mod transport;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tokio::time::Instant;

pub use allow::{AllowedServers, parse_allowed_server};
pub use auth::{Auth, SecretKeyRef, SecretSource};
pub use breaker::{BreakerPolicy, Outcome, Refusal, ServerGate, Transition};
pub use error::{PrometheusError, Rejection, Result, Unreachable};
pub use flags::{DEFAULT_MAX_RESPONSE_BYTES, PrometheusArgs, PrometheusConfig};
pub use response::{QueryData, Sample, Series};
pub use retry::RetryPolicy;

use auth::Credentials;
use error::bounded;
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
    max_response_bytes: u64,
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
            max_response_bytes: config.max_response_bytes,
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

    /// An instant query (`/api/v1/query`) evaluated at `at`, within `--prometheus-timeout`.
    pub async fn query(&self, promql: &str, at: Timestamp) -> Result<QueryData> {
        self.query_before(promql, at, self.default_deadline()).await
    }

    /// [`Self::query`] that also ends by `deadline`.
    pub async fn query_before(
        &self,
        promql: &str,
        at: Timestamp,
        deadline: Instant,
    ) -> Result<QueryData> {
        self.query_with(promql, at, deadline, &[]).await
    }

    /// [`Self::query_before`] with `params` added to the URL (a tenancy proxy's
    /// `namespace=…`, which scopes what the query may read).
    pub async fn query_with(
        &self,
        promql: &str,
        at: Timestamp,
        deadline: Instant,
        params: &[(&str, &str)],
    ) -> Result<QueryData> {
        let form = form_urlencoded::Serializer::new(String::new())
            .append_pair("query", promql)
            .append_pair("time", &format_time(at))
            .extend_pairs(params)
            .finish();
        self.call(promql, &format!("/api/v1/query?{form}"), deadline)
            .await
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
        self.query_range_before(promql, start, end, step, self.default_deadline())
            .await
    }

    /// [`Self::query_range`] that also ends by `deadline`.
    pub async fn query_range_before(
        &self,
        promql: &str,
        start: Timestamp,
        end: Timestamp,
        step: Duration,
        deadline: Instant,
    ) -> Result<Vec<Series>> {
        self.query_range_with(promql, (start, end, step), deadline, &[])
            .await
    }

    /// [`Self::query_range_before`] over `(start, end, step)` with `params` added to the URL
    /// (see [`Self::query_with`]).
    pub async fn query_range_with(
        &self,
        promql: &str,
        (start, end, step): (Timestamp, Timestamp, Duration),
        deadline: Instant,
        params: &[(&str, &str)],
    ) -> Result<Vec<Series>> {
        let form = form_urlencoded::Serializer::new(String::new())
            .append_pair("query", promql)
            .append_pair("start", &format_time(start))
            .append_pair("end", &format_time(end))
            .append_pair("step", &format_step(step))
            .extend_pairs(params)
            .finish();
        match self
            .call(promql, &format!("/api/v1/query_range?{form}"), deadline)
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
        self.query_value_before(promql, at, self.default_deadline())
            .await
    }

    /// [`Self::query_value`] that also ends by `deadline`.
    pub async fn query_value_before(
        &self,
        promql: &str,
        at: Timestamp,
        deadline: Instant,
    ) -> Result<f64> {
        self.query_value_with(promql, at, deadline, &[]).await
    }

    /// [`Self::query_value_before`] with `params` added to the URL (see [`Self::query_with`]).
    pub async fn query_value_with(
        &self,
        promql: &str,
        at: Timestamp,
        deadline: Instant,
        params: &[(&str, &str)],
    ) -> Result<f64> {
        let value = match self.query_with(promql, at, deadline, params).await? {
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
                        rejection: Rejection::MultipleSeries(many.len()),
                        detail: String::new(),
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

    fn default_deadline(&self) -> Instant {
        Instant::now() + self.timeout
    }

    /// Sends one API request, retrying as [`retry`] decides, until the earlier of `deadline`
    /// and the timeout.
    async fn call(
        &self,
        promql: &str,
        path_and_query: &str,
        deadline: Instant,
    ) -> Result<QueryData> {
        let started = Instant::now();
        let deadline = deadline.min(started + self.timeout);
        let timed_out = |attempts: u32, last: &str| {
            let within = Duration::from_millis(
                u64::try_from(deadline.saturating_duration_since(started).as_millis())
                    .unwrap_or(u64::MAX),
            );
            let mut detail = format!("no answer within {}", crate::args::format_duration(within));
            if !last.is_empty() {
                detail = format!("{detail}; before: {last}");
            }
            PrometheusError::Unreachable {
                server: self.address.clone(),
                query: promql.to_owned(),
                cause: Unreachable::TimedOut,
                attempts,
                detail: bounded(&detail),
            }
        };
        let mut failed = 0;
        let mut reread = false;
        let mut last = String::new();
        loop {
            // A Secret read goes to the API server: it counts against the deadline too.
            let authorization = match tokio::time::timeout_at(deadline, self.credentials.header())
                .await
            {
                Err(_) => return Err(timed_out(failed + 1, "reading the credentials")),
                Ok(header) => header.map_err(|reason| self.unauthorized(promql, true, &reason))?,
            };
            let attempt = tokio::time::timeout_at(
                deadline,
                transport::get(
                    &self.target,
                    self.tls.as_ref(),
                    path_and_query,
                    authorization.as_deref(),
                    self.max_response_bytes,
                ),
            )
            .await;
            let (cause, detail) = match attempt {
                Err(_) => return Err(timed_out(failed + 1, &last)),
                Ok(Err(TransportError::Certificate(reason))) => {
                    return Err(self.unreachable(promql, Unreachable::Tls, failed + 1, &reason));
                }
                Ok(Err(TransportError::TooLarge)) => {
                    return Err(PrometheusError::TooLarge {
                        server: self.address.clone(),
                        query: promql.to_owned(),
                        limit: self.max_response_bytes,
                    });
                }
                Ok(Err(TransportError::Refused(reason))) => (Unreachable::Refused, reason),
                Ok(Err(TransportError::Connection(reason))) => (Unreachable::Connection, reason),
                Ok(Ok(answer)) if matches!(answer.status, 401 | 403) => {
                    // A rotated credential: read it again, and send once more if it changed.
                    if !reread && self.credentials.forget().await {
                        reread = true;
                        let fresh = tokio::time::timeout_at(deadline, self.credentials.header())
                            .await
                            .ok()
                            .and_then(Result::ok)
                            .flatten();
                        if fresh.is_some() && fresh != authorization {
                            continue;
                        }
                    }
                    return Err(self.unauthorized(
                        promql,
                        false,
                        &format!("HTTP {}", answer.status),
                    ));
                }
                Ok(Ok(answer)) if retry::is_retryable_status(answer.status) => {
                    let cause = if answer.status == 429 {
                        Unreachable::Throttled
                    } else {
                        Unreachable::ServerError
                    };
                    (
                        cause,
                        format!("HTTP {}{}", answer.status, rejection(&answer.body)),
                    )
                }
                Ok(Ok(answer)) => return self.read_answer(promql, answer.status, &answer.body),
            };
            failed += 1;
            let remaining = deadline.saturating_duration_since(Instant::now());
            let Some(delay) =
                self.retry
                    .next_delay(failed, retry::jitter(), remaining, MIN_ATTEMPT)
            else {
                return Err(self.unreachable(promql, cause, failed, &detail));
            };
            tracing::debug!(server = %self.address, %cause, detail = %bounded(&detail), ?delay, "prometheus request failed; retrying");
            last = detail;
            tokio::time::sleep(delay).await;
        }
    }

    fn read_answer(&self, promql: &str, status: u16, body: &[u8]) -> Result<QueryData> {
        let query_error = |rejection: Rejection, detail: String| PrometheusError::Query {
            server: self.address.clone(),
            query: promql.to_owned(),
            rejection,
            detail: bounded(&detail),
        };
        match response::parse_body(body) {
            Ok(data) if (200..300).contains(&status) => Ok(data),
            Ok(_) => Err(query_error(
                Rejection::NotTheApi(status_class(status)),
                format!("HTTP {status} with a success body"),
            )),
            Err(BodyError::Rejected { error_type, error }) => Err(query_error(
                Rejection::Rejected(error::error_type(&error_type)),
                format!("{error_type}: {error}"),
            )),
            Err(BodyError::Malformed(reason)) => Err(query_error(
                Rejection::NotTheApi(status_class(status)),
                format!("HTTP {status}: {reason}"),
            )),
        }
    }

    fn unreachable(
        &self,
        promql: &str,
        cause: Unreachable,
        attempts: u32,
        detail: &str,
    ) -> PrometheusError {
        PrometheusError::Unreachable {
            server: self.address.clone(),
            query: promql.to_owned(),
            cause,
            attempts,
            detail: bounded(detail),
        }
    }

    fn unauthorized(&self, promql: &str, unreadable: bool, detail: &str) -> PrometheusError {
        PrometheusError::Unauthorized {
            server: self.address.clone(),
            query: promql.to_owned(),
            unreadable,
            detail: bounded(detail),
        }
    }

    fn empty(&self, promql: &str, detail: &str) -> PrometheusError {
        PrometheusError::EmptyResult {
            server: self.address.clone(),
            query: promql.to_owned(),
            detail: detail.to_owned(),
        }
    }

    fn unexpected(&self, promql: &str, data: &QueryData, wanted: &'static str) -> PrometheusError {
        let got = match data {
            QueryData::Vector(_) => "vector",
            QueryData::Matrix(_) => "matrix",
            QueryData::Scalar(_) => "scalar",
            QueryData::String(..) => "string",
        };
        PrometheusError::Query {
            server: self.address.clone(),
            query: promql.to_owned(),
            rejection: Rejection::WrongType { got, wanted },
            detail: String::new(),
        }
    }
}

/// An HTTP status as its class (`2xx`, `4xx`, …): all a message users read says of it.
fn status_class(status: u16) -> &'static str {
    match status / 100 {
        1 => "1xx",
        2 => "2xx",
        3 => "3xx",
        4 => "4xx",
        5 => "5xx",
        _ => "status",
    }
}

/// `: <errorType>: <error>` when a failed answer carries Prometheus' error envelope (log detail).
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
        assert!(err.to_string().ends_with(": bad_data"), "{err}");
        // The server's own words go to the log detail only.
        assert!(!err.to_string().contains("parse error"), "{err}");
        assert!(err.detail().contains("parse error"), "{}", err.detail());
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
        assert!(
            err.to_string()
                .contains("server error (HTTP 5xx) (3 attempts)"),
            "{err}"
        );
        assert!(!err.to_string().contains("starting"), "{err}");
        assert!(err.detail().contains("starting"), "{}", err.detail());
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
        assert!(
            err.to_string().contains("connection refused (3 attempts)"),
            "{err}"
        );
        assert!(!err.to_string().contains("os error"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn remote_text_never_reaches_the_message() {
        let (address, _) = canned(
            400,
            r#"{"status":"error","errorType":"see http://evil.example","error":"<a href=x>click</a>"}"#,
        )
        .await;
        let err = client(&address)
            .query("up", Timestamp::UNIX_EPOCH)
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(text.ends_with(": unknown"), "{text}");
        assert!(!text.contains("evil") && !text.contains("click"), "{text}");
        let (address, _) = canned(
            404,
            "<html><body>Not Found: secret-internal-page</body></html>",
        )
        .await;
        let err = client(&address)
            .query("up", Timestamp::UNIX_EPOCH)
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("(HTTP 4xx) is not the Prometheus HTTP API"),
            "{text}"
        );
        assert!(!text.contains("secret-internal-page"), "{text}");
        assert!(
            err.detail().contains("secret-internal-page"),
            "{}",
            err.detail()
        );
        assert!(err.detail().len() <= error::MAX_DETAIL + 3);
    }

    /// A server that answers with `head` and then `body_bytes` bytes of a JSON vector, sent in
    /// chunks of 64 KiB; returns its address and how many bytes it managed to write.
    async fn big(
        head: &'static str,
        body_bytes: usize,
    ) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let written = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = written.clone();
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = stream.read(&mut buf).await;
                    let head = head.replace("{len}", &body_bytes.to_string());
                    if stream.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    let chunk = vec![b' '; 64 * 1024];
                    let chunked = head.contains("chunked");
                    let mut sent = 0;
                    while sent < body_bytes {
                        let n = chunk.len().min(body_bytes - sent);
                        let frame = if chunked {
                            [format!("{n:x}\r\n").as_bytes(), &chunk[..n], b"\r\n"].concat()
                        } else {
                            chunk[..n].to_vec()
                        };
                        if stream.write_all(&frame).await.is_err() {
                            return;
                        }
                        sent += n;
                        counter.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
                    }
                });
            }
        });
        (address, written)
    }

    #[tokio::test]
    async fn an_answer_over_the_cap_is_too_large_and_not_read_on() {
        let mut config = PrometheusConfig::new("");
        config.max_response_bytes = 1024 * 1024;
        // Declared: refused before the body is read.
        let (address, written) = big(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len}\r\n\r\n",
            300 * 1024 * 1024,
        )
        .await;
        config.address = address;
        let err = PrometheusClient::new(&config, None)
            .unwrap()
            .query("up", Timestamp::UNIX_EPOCH)
            .await
            .unwrap_err();
        assert_eq!(err.reason(), "PrometheusResponseTooLarge", "{err}");
        assert!(
            err.to_string().contains("too large (over 1048576 bytes)"),
            "{err}"
        );
        // Chunked, no length: cut once the cap is passed, long before the 300 MB.
        let (address, written_chunked) = big(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n",
            300 * 1024 * 1024,
        )
        .await;
        config.address = address;
        let err = PrometheusClient::new(&config, None)
            .unwrap()
            .query("up", Timestamp::UNIX_EPOCH)
            .await
            .unwrap_err();
        assert_eq!(err.reason(), "PrometheusResponseTooLarge", "{err}");
        tokio::time::sleep(Duration::from_millis(200)).await;
        // The server could only write what the socket buffers took after the cut.
        for w in [&written, &written_chunked] {
            let w = w.load(std::sync::atomic::Ordering::SeqCst);
            assert!(w < 64 * 1024 * 1024, "{w} bytes written");
        }
        // Not retried: a bigger answer will not get smaller.
    }

    #[tokio::test]
    async fn a_server_that_never_answers_fails_by_the_callers_deadline() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                held.push(stream);
            }
        });
        let started = std::time::Instant::now();
        let err = client(&address)
            .query_value_before(
                "up",
                Timestamp::UNIX_EPOCH,
                Instant::now() + Duration::from_millis(300),
            )
            .await
            .unwrap_err();
        assert_eq!(err.reason(), "PrometheusUnreachable", "{err}");
        assert!(err.to_string().contains("timed out (1 attempt)"), "{err}");
        assert!(
            err.detail().starts_with("no answer within "),
            "{}",
            err.detail()
        );
        // The client's own timeout is 30 s: the earlier deadline is the one kept.
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
