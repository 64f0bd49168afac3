//! A Prometheus stand-in: `/api/v1/query` and `/api/v1/query_range` (GET, or POST with a form
//! body, as Prometheus accepts both) over HTTPS or HTTP, answering from series set through its
//! API, behind a bearer token that can be rotated, and able to go away and come back.
//!
//! It evaluates no PromQL: a query is looked up verbatim (surrounding whitespace trimmed) in the
//! series set for it, and an unknown query answers an empty result, as a real server does for a
//! selector that matches nothing. A series is samples (the instant value is the latest sample at
//! or before the evaluation time, within Prometheus' 5-minute lookback) or a function of time. A
//! range query evaluates every `step` from `start` to `end` and refuses more than 11,000 points
//! per series, like Prometheus. Values are written as Prometheus writes them (`NaN`, `+Inf`).
//!
//! Authorization is what a proxy in front of Prometheus (kube-rbac-proxy, an ingress) does: a
//! request without the current bearer token gets `401 Unauthorized`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use plimsoll_runtime::prometheus::format_value;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::Result;
use crate::tls::{CertificateAuthority, server_config};

/// Prometheus' default lookback for instant vectors, seconds.
const LOOKBACK_SECONDS: f64 = 300.0;
/// Prometheus' limit of points per series in a range query.
const MAX_POINTS: f64 = 11_000.0;

/// A value as a function of Unix seconds.
pub type ValueFn = Arc<dyn Fn(f64) -> f64 + Send + Sync>;

/// One series the stand-in serves.
#[derive(Clone)]
pub struct StandInSeries {
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    values: Values,
}

#[derive(Clone)]
enum Values {
    Samples(Vec<(f64, f64)>),
    Function(ValueFn),
}

impl std::fmt::Debug for StandInSeries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StandInSeries")
            .field("labels", &self.labels)
            .finish_non_exhaustive()
    }
}

impl StandInSeries {
    /// A series of `(unix seconds, value)` samples (sorted here).
    pub fn samples(labels: &[(&str, &str)], samples: Vec<(f64, f64)>) -> Self {
        let mut samples = samples;
        samples.sort_by(|a, b| a.0.total_cmp(&b.0));
        Self {
            labels: owned(labels),
            values: Values::Samples(samples),
        }
    }

    /// A series whose value at any time is `f(unix seconds)` (NaN and ±Inf are served as such).
    pub fn function(
        labels: &[(&str, &str)],
        f: impl Fn(f64) -> f64 + Send + Sync + 'static,
    ) -> Self {
        Self {
            labels: owned(labels),
            values: Values::Function(Arc::new(f)),
        }
    }

    fn at(&self, time: f64) -> Option<f64> {
        match &self.values {
            Values::Function(f) => Some(f(time)),
            Values::Samples(samples) => samples
                .iter()
                .rev()
                .find(|(t, _)| *t <= time)
                .filter(|(t, _)| time - t <= LOOKBACK_SECONDS)
                .map(|(_, v)| *v),
        }
    }
}

fn owned(labels: &[(&str, &str)]) -> BTreeMap<String, String> {
    labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// What the handlers read; changed through [`PrometheusStandIn`].
#[derive(Default)]
struct Shared {
    series: RwLock<BTreeMap<String, Vec<StandInSeries>>>,
    errors: RwLock<BTreeMap<String, (u16, String, String)>>,
    token: RwLock<Option<String>>,
    requests: AtomicUsize,
}

/// How to start a stand-in.
#[derive(Clone, Debug)]
pub struct StandInOptions {
    /// Serve HTTPS with a certificate for `127.0.0.1` and `localhost` from a fresh CA (default
    /// true); [`PrometheusStandIn::ca_pem`] gives the CA.
    pub tls: bool,
    /// The bearer token required (default none: every request is answered).
    pub token: Option<String>,
    /// Listen address (default `127.0.0.1:0`).
    pub address: SocketAddr,
}

impl Default for StandInOptions {
    fn default() -> Self {
        Self {
            tls: true,
            token: None,
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
        }
    }
}

/// A running (or stopped) Prometheus stand-in.
pub struct PrometheusStandIn {
    shared: Arc<Shared>,
    address: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
    ca_pem: Option<String>,
    running: Mutex<Option<(CancellationToken, JoinHandle<()>)>>,
}

impl std::fmt::Debug for PrometheusStandIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrometheusStandIn")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl PrometheusStandIn {
    /// Binds and starts serving.
    pub async fn start(options: StandInOptions) -> Result<Self> {
        let (tls, ca_pem) = if options.tls {
            let ca = CertificateAuthority::generate("plimsoll-sim prometheus CA")?;
            let cert = ca.issue(&["127.0.0.1", "localhost"])?;
            (Some(server_config(&cert)?), Some(ca.cert_pem))
        } else {
            (None, None)
        };
        let listener = TcpListener::bind(options.address).await?;
        let shared = Arc::new(Shared {
            token: RwLock::new(options.token),
            ..Shared::default()
        });
        let stand_in = Self {
            shared,
            address: listener.local_addr()?,
            tls,
            ca_pem,
            running: Mutex::new(None),
        };
        stand_in.serve(listener);
        Ok(stand_in)
    }

    fn serve(&self, listener: TcpListener) {
        let router = Router::new()
            .route("/api/v1/query", get(instant).post(instant))
            .route("/api/v1/query_range", get(range).post(range))
            .with_state(self.shared.clone());
        let cancel = CancellationToken::new();
        let task = tokio::spawn(crate::tls::serve(
            listener,
            self.tls.clone(),
            router,
            cancel.clone(),
        ));
        if let Ok(mut running) = self.running.lock() {
            *running = Some((cancel, task));
        }
    }

    /// The base URL (`https://127.0.0.1:PORT` or `http://…`).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.address)
    }

    /// The CA certificate (PEM) that signed the server's certificate, when serving HTTPS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// Requires `token` from now on (`None`: no authorization).
    pub fn set_token(&self, token: Option<&str>) {
        if let Ok(mut t) = self.shared.token.write() {
            *t = token.map(str::to_owned);
        }
    }

    /// Serves `series` for `query` (replacing what was set for it).
    pub fn set_series(&self, query: &str, series: Vec<StandInSeries>) {
        if let Ok(mut all) = self.shared.series.write() {
            all.insert(query.trim().to_owned(), series);
        }
    }

    /// Answers `query` with Prometheus' error envelope (`status` e.g. 400 with `bad_data`, 422
    /// with `execution`, 503 with `unavailable`) until [`Self::clear_error`].
    pub fn set_error(&self, query: &str, status: u16, error_type: &str, error: &str) {
        if let Ok(mut all) = self.shared.errors.write() {
            all.insert(
                query.trim().to_owned(),
                (status, error_type.to_owned(), error.to_owned()),
            );
        }
    }

    /// Stops answering `query` with an error.
    pub fn clear_error(&self, query: &str) {
        if let Ok(mut all) = self.shared.errors.write() {
            all.remove(query.trim());
        }
    }

    /// Requests received (authorized or not) since start.
    pub fn requests(&self) -> usize {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// The server goes away: the listener closes and open connections are dropped.
    pub async fn stop(&self) {
        let running = self.running.lock().ok().and_then(|mut r| r.take());
        if let Some((cancel, task)) = running {
            cancel.cancel();
            let _ = task.await;
        }
    }

    /// The server comes back on the same address, with the same series, token and certificate.
    pub async fn restart(&self) -> Result<()> {
        self.stop().await;
        let listener = TcpListener::bind(self.address).await?;
        self.serve(listener);
        Ok(())
    }
}

impl Drop for PrometheusStandIn {
    fn drop(&mut self) {
        if let Ok(mut running) = self.running.lock()
            && let Some((cancel, _)) = running.take()
        {
            cancel.cancel();
        }
    }
}

/// The request's parameters: the query string, then the form body (Prometheus reads both).
fn params(raw: Option<&str>, headers: &HeaderMap, body: &[u8]) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> =
        form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let is_form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if is_form {
        out.extend(form_urlencoded::parse(body).into_owned());
    }
    out
}

fn authorized(shared: &Shared, headers: &HeaderMap) -> bool {
    shared.requests.fetch_add(1, Ordering::SeqCst);
    let Ok(token) = shared.token.read() else {
        return false;
    };
    let Some(token) = token.as_deref() else {
        return true;
    };
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|sent| sent == token)
}

fn error(status: StatusCode, error_type: &str, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"status": "error", "errorType": error_type, "error": message})),
    )
        .into_response()
}

/// Unix seconds from a float or an RFC 3339 time, as the API accepts.
fn parse_time(input: &str) -> Option<f64> {
    input.parse::<f64>().ok().or_else(|| {
        input
            .parse::<jiff::Timestamp>()
            .ok()
            .map(|t| t.as_millisecond() as f64 / 1000.0)
    })
}

/// A step: float seconds, or a duration such as `3600s`, `5m`, `1h`.
fn parse_step(input: &str) -> Option<f64> {
    input.parse::<f64>().ok().or_else(|| {
        plimsoll_runtime::args::parse_duration(input)
            .ok()
            .map(|d| d.as_secs_f64())
    })
}

/// The series set for a query, or the error set for it.
fn lookup(shared: &Shared, query: &str) -> std::result::Result<Vec<StandInSeries>, Box<Response>> {
    if let Some((status, error_type, message)) = shared
        .errors
        .read()
        .ok()
        .and_then(|e| e.get(query).cloned())
    {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
        return Err(Box::new(error(status, &error_type, &message)));
    }
    Ok(shared
        .series
        .read()
        .ok()
        .and_then(|s| s.get(query).cloned())
        .unwrap_or_default())
}

fn success(result_type: &str, result: &[Value]) -> Response {
    axum::Json(json!({"status": "success", "data": {"resultType": result_type, "result": result}}))
        .into_response()
}

async fn instant(
    State(shared): State<Arc<Shared>>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !authorized(&shared, &headers) {
        return (StatusCode::UNAUTHORIZED, "Unauthorized\n").into_response();
    }
    let p = params(raw.as_deref(), &headers, &body);
    let Some(query) = p.get("query").map(|q| q.trim().to_owned()) else {
        return error(
            StatusCode::BAD_REQUEST,
            "bad_data",
            "invalid parameter \"query\": missing",
        );
    };
    let time = match p.get("time") {
        None => jiff::Timestamp::now().as_millisecond() as f64 / 1000.0,
        Some(t) => match parse_time(t) {
            Some(t) => t,
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "bad_data",
                    &format!("invalid parameter \"time\": cannot parse {t:?} to a valid timestamp"),
                );
            }
        },
    };
    let series = match lookup(&shared, &query) {
        Ok(s) => s,
        Err(response) => return *response,
    };
    let result: Vec<Value> = series
        .iter()
        .filter_map(|s| {
            s.at(time)
                .map(|v| json!({"metric": s.labels, "value": [time, format_value(v)]}))
        })
        .collect();
    success("vector", &result)
}

async fn range(
    State(shared): State<Arc<Shared>>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !authorized(&shared, &headers) {
        return (StatusCode::UNAUTHORIZED, "Unauthorized\n").into_response();
    }
    let p = params(raw.as_deref(), &headers, &body);
    let bad = |m: &str| error(StatusCode::BAD_REQUEST, "bad_data", m);
    let (Some(query), Some(start), Some(end), Some(step)) = (
        p.get("query").map(|q| q.trim().to_owned()),
        p.get("start").and_then(|s| parse_time(s)),
        p.get("end").and_then(|s| parse_time(s)),
        p.get("step").and_then(|s| parse_step(s)),
    ) else {
        return bad("invalid parameters: query, start, end and step are required");
    };
    if end < start {
        return bad("end timestamp must not be before start time");
    }
    if step <= 0.0 {
        return bad(
            "zero or negative query resolution step widths are not accepted. Try a positive integer",
        );
    }
    if (end - start) / step > MAX_POINTS {
        return bad(
            "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)",
        );
    }
    let series = match lookup(&shared, &query) {
        Ok(s) => s,
        Err(response) => return *response,
    };
    let steps = ((end - start) / step).floor() as u64;
    let result: Vec<Value> = series
        .iter()
        .filter_map(|s| {
            let values: Vec<Value> = (0..=steps)
                .map(|i| start + i as f64 * step)
                .filter_map(|t| s.at(t).map(|v| json!([t, format_value(v)])))
                .collect();
            (!values.is_empty()).then(|| json!({"metric": s.labels, "values": values}))
        })
        .collect();
    success("matrix", &result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_answer_within_the_lookback() {
        let s = StandInSeries::samples(&[("pod", "a")], vec![(200.0, 2.0), (100.0, 1.0)]);
        assert_eq!(s.at(99.0), None);
        assert_eq!(s.at(150.0), Some(1.0));
        assert_eq!(s.at(200.0), Some(2.0));
        assert_eq!(s.at(500.0), Some(2.0));
        assert_eq!(s.at(501.0), None);
        let f = StandInSeries::function(&[], |t| t * 2.0);
        assert_eq!(f.at(3.0), Some(6.0));
    }

    #[test]
    fn times_and_steps_parse_as_the_api_reads_them() {
        assert_eq!(parse_time("1700000000.5"), Some(1_700_000_000.5));
        assert_eq!(parse_time("2023-11-14T22:13:20Z"), Some(1_700_000_000.0));
        assert_eq!(parse_time("soon"), None);
        assert_eq!(parse_step("3600s"), Some(3600.0));
        assert_eq!(parse_step("15"), Some(15.0));
        assert_eq!(parse_step("1h"), Some(3600.0));
    }
}
