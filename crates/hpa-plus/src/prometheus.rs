//! Values of `type: Prometheus` metrics: one instant query per metric through the shared
//! [`PrometheusClient`], with results cached per server and query.
//!
//! - The server is the metric's `serverAddress`, else `--prometheus-address`; a metric with
//!   neither fails with a message naming both. A `serverAddress` other than
//!   `--prometheus-address` gets its own client with the controller's TLS trust and timeout but
//!   no credentials (clients are kept, one per address): credentials go only to the server the
//!   operator configured, never to one an autoscaler's author names.
//! - A value is reused for (nine tenths of) the period of the object that asked for it: objects
//!   sharing a query within a period send it once, and an object evaluated early (its spec
//!   changed) does not query again. A failure is never cached, so the next evaluation tries again.
//! - A failure (unreachable, refused, rejected, no series or `NaN`) is the metric's
//!   `Err(message)`, starting with the client's condition reason (`PrometheusUnreachable: …`):
//!   the decision treats it as a failed fetch, so nothing scales down on it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use jiff::Timestamp;
use plimsoll_core::api::hpa_plus::{MetricSourceType, MetricSpec};
use plimsoll_core::horizontal::observation::Fetched;
use plimsoll_core::horizontal::proposals::metric_name;
use plimsoll_runtime::prometheus::{PrometheusClient, PrometheusConfig, PrometheusError};
use tokio::time::Instant;

/// A cached value: milli-units, and until when it may be reused.
type Cached = (i64, Instant);

/// The Prometheus side of the controller: configuration, clients, and the value cache.
pub struct PrometheusMetrics {
    /// `--prometheus-*` flags; `None` without `--prometheus-address`.
    config: Option<PrometheusConfig>,
    /// Reads credentials kept in a Secret.
    kube: Option<kube::Client>,
    clients: Mutex<HashMap<String, Arc<PrometheusClient>>>,
    cache: Mutex<HashMap<(String, String), Cached>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl PrometheusMetrics {
    /// Queries through clients built from `config` (`None`: only metrics with their own
    /// `serverAddress` can be read, without credentials).
    pub fn new(config: Option<PrometheusConfig>, kube: Option<kube::Client>) -> Self {
        Self {
            config,
            kube,
            clients: Mutex::new(HashMap::new()),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The configured default server, if any.
    pub fn default_address(&self) -> Option<&str> {
        self.config.as_ref().map(|c| c.address.as_str())
    }

    /// The client for `address`, built once with the controller's TLS and credentials.
    fn client(&self, address: &str) -> Result<Arc<PrometheusClient>, PrometheusError> {
        if let Some(c) = lock(&self.clients).get(address) {
            return Ok(c.clone());
        }
        let config = match &self.config {
            Some(c) if c.address == address => c.clone(),
            // Another server gets the controller's TLS trust but never its credentials: whoever
            // may write an autoscaler must not be able to collect them with a serverAddress of
            // their own.
            Some(c) => PrometheusConfig {
                address: address.to_owned(),
                auth: plimsoll_runtime::prometheus::Auth::None,
                ..c.clone()
            },
            None => PrometheusConfig::new(address),
        };
        let client = Arc::new(PrometheusClient::new(&config, self.kube.clone())?);
        lock(&self.clients).insert(address.to_owned(), client.clone());
        Ok(client)
    }

    /// The value of every Prometheus metric among `metrics`, keyed by metric name, each reused
    /// for `period` after it was read.
    pub async fn values(
        &self,
        metrics: &[MetricSpec],
        period: Duration,
        now: Timestamp,
    ) -> BTreeMap<String, Fetched<i64>> {
        let mut out = BTreeMap::new();
        for m in metrics
            .iter()
            .filter(|m| m.type_ == MetricSourceType::Prometheus)
        {
            let Some(p) = &m.prometheus else { continue };
            let Some(address) = p
                .server_address
                .as_deref()
                .or(self.default_address())
                .map(str::to_owned)
            else {
                out.insert(
                    metric_name(m),
                    Err(
                        "PrometheusUnreachable: no server: set prometheus.serverAddress on the \
                         metric or --prometheus-address on hpa-plus"
                            .to_owned(),
                    ),
                );
                continue;
            };
            out.insert(
                metric_name(m),
                self.value(&address, &p.query, period, now).await,
            );
        }
        out
    }

    /// One query's value (milli), from the cache while fresh.
    async fn value(
        &self,
        address: &str,
        query: &str,
        period: Duration,
        now: Timestamp,
    ) -> Fetched<i64> {
        let key = (address.to_owned(), query.to_owned());
        let at = Instant::now();
        if let Some(&(value, until)) = lock(&self.cache).get(&key)
            && at < until
        {
            return Ok(value);
        }
        let read = match self.client(address) {
            Ok(client) => client.query_value(query, now).await,
            Err(e) => Err(e),
        };
        let value = read.map_err(|e| format!("{}: {e}", e.reason()))?;
        let milli = to_milli(value).ok_or_else(|| {
            format!("PrometheusEmptyResult: {value} is out of range for a metric value")
        })?;
        let mut cache = lock(&self.cache);
        // Entries of queries nobody asks for any more go once they are stale.
        cache.retain(|_, (_, until)| *until > at);
        // A tenth of the period short, so that the object's own next evaluation (requeued one
        // period later, give or take the timer's jitter) reads a fresh value.
        cache.insert(key, (milli, at + period.mul_f64(0.9)));
        Ok(milli)
    }
}

impl PrometheusMetrics {
    /// The server of metric source `p`: its own, else the default.
    pub fn address_of<'a>(
        &'a self,
        p: &'a plimsoll_core::api::hpa_plus::PrometheusMetricSource,
    ) -> Option<&'a str> {
        p.server_address.as_deref().or(self.default_address())
    }

    /// The hourly peaks of `query` over the `days` days before `now`
    /// (`max_over_time((query)[1h:])` every hour), milli, oldest first; non-finite samples are
    /// skipped. What `minReplicasTuning` starts from when Prometheus holds the metric's past.
    pub async fn hourly_peaks(
        &self,
        address: &str,
        query: &str,
        days: i32,
        now: Timestamp,
    ) -> Result<Vec<(Timestamp, i64)>, PrometheusError> {
        let client = self.client(address)?;
        let hours = i64::from(days.max(1)) * 24;
        let start = now - jiff::SignedDuration::from_hours(hours - 1);
        let series = client
            .query_range(
                &format!("max_over_time(({query})[1h:])"),
                start,
                now,
                Duration::from_secs(3600),
            )
            .await?;
        let mut peaks: Vec<(Timestamp, i64)> = series
            .iter()
            .flat_map(|s| &s.samples)
            .filter_map(|sample| {
                let at = Timestamp::from_second(sample.time as i64).ok()?;
                Some((at, to_milli(sample.value)?))
            })
            .collect();
        peaks.sort_by_key(|p| p.0);
        Ok(peaks)
    }
}

impl PrometheusMetrics {
    /// The peak of `query` in each bucket of `step_seconds` from bucket `from` up to (not
    /// including) bucket `to`, buckets counted from the Unix epoch: `max_over_time((query)[15m:])`
    /// (for 15-minute buckets) evaluated at the end of each bucket, milli, oldest first as
    /// `(bucket, peak)`; non-finite samples are skipped. What `spec.predictive` starts from when
    /// Prometheus holds the metric's past.
    pub async fn bucket_peaks(
        &self,
        address: &str,
        query: &str,
        step_seconds: i64,
        from: i64,
        to: i64,
    ) -> Result<Vec<(i64, i64)>, PrometheusError> {
        let client = self.client(address)?;
        let step = step_seconds.max(1);
        // The first sample closes bucket `from`, the last closes bucket `to - 1`.
        let at = |bucket: i64| Timestamp::from_second(bucket.saturating_mul(step));
        let (Ok(start), Ok(end)) = (at(from + 1), at(to.max(from + 1))) else {
            return Ok(Vec::new());
        };
        let series = client
            .query_range(
                &peak_query(query, step),
                start,
                end,
                Duration::from_secs(u64::try_from(step).unwrap_or(1)),
            )
            .await?;
        let mut peaks: Vec<(i64, i64)> = series
            .iter()
            .flat_map(|s| &s.samples)
            .filter_map(|sample| {
                let closes = (sample.time as i64).div_euclid(step);
                Some((closes - 1, to_milli(sample.value)?))
            })
            .filter(|(bucket, _)| (from..to).contains(bucket))
            .collect();
        peaks.sort_unstable();
        Ok(peaks)
    }
}

/// `max_over_time((query)[W:])` with the window `W` of one bucket, in Prometheus' duration
/// units (`15m`, `1h`, `90s`).
pub fn peak_query(query: &str, step_seconds: i64) -> String {
    let window = if step_seconds % 3600 == 0 {
        format!("{}h", step_seconds / 3600)
    } else if step_seconds % 60 == 0 {
        format!("{}m", step_seconds / 60)
    } else {
        format!("{step_seconds}s")
    };
    format!("max_over_time(({query})[{window}:])")
}

/// A finite value in milli-units, rounded; `None` beyond `i64`.
fn to_milli(value: f64) -> Option<i64> {
    let milli = (value * 1000.0).round();
    // i64::MAX as f64 rounds up to 2^63, which is out of range: compare strictly.
    (milli.is_finite() && milli > -(2f64.powi(63)) && milli < 2f64.powi(63)).then_some(milli as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_go_only_to_the_configured_server() {
        let mut config = PrometheusConfig::new("http://prom.monitoring:9090");
        config.auth = plimsoll_runtime::prometheus::Auth::Bearer(
            plimsoll_runtime::prometheus::SecretSource::Literal("s3cret".into()),
        );
        let prom = PrometheusMetrics::new(Some(config), None);
        let same = prom.client("http://prom.monitoring:9090").unwrap();
        let other = prom.client("http://attacker.example:9090").unwrap();
        assert!(same.has_credentials());
        assert!(!other.has_credentials());
    }

    #[test]
    fn the_peak_query_spans_one_bucket() {
        assert_eq!(peak_query("up", 900), "max_over_time((up)[15m:])");
        assert_eq!(peak_query("up", 3600), "max_over_time((up)[1h:])");
        assert_eq!(peak_query("up", 90), "max_over_time((up)[90s:])");
    }

    #[test]
    fn values_become_milli_units_within_range() {
        assert_eq!(to_milli(1.5), Some(1500));
        assert_eq!(to_milli(0.0004), Some(0));
        assert_eq!(to_milli(-2.0), Some(-2000));
        assert_eq!(to_milli(1e300), None);
        assert_eq!(to_milli(f64::NAN), None);
    }

    #[tokio::test]
    async fn a_metric_without_any_server_fails_naming_both_settings() {
        let prom = PrometheusMetrics::new(None, None);
        let metric: MetricSpec = serde_json::from_value(serde_json::json!({
            "type": "Prometheus",
            "prometheus": {"query": "up", "target": {"type": "Value", "value": "1"}}
        }))
        .unwrap();
        let values = prom
            .values(&[metric], Duration::from_secs(5), Timestamp::UNIX_EPOCH)
            .await;
        let err = values["up"].clone().unwrap_err();
        assert!(err.starts_with("PrometheusUnreachable"), "{err}");
        assert!(
            err.contains("serverAddress") && err.contains("--prometheus-address"),
            "{err}"
        );
    }
}
