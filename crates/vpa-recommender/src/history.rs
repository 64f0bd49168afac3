//! `--storage=prometheus`: usage history at start from a Prometheus server's cAdvisor series
//! (`container_cpu_usage_seconds_total` as a rate, `container_memory_working_set_bytes`), over
//! `--history-length` at `--history-resolution`, as upstream's history provider reads them.
//!
//! The server is reached through [`plimsoll_runtime::prometheus`] (`--prometheus-*` flags: TLS
//! with a CA bundle, bearer or basic auth from a file or a Secret, timeout and retries).
//! Series are keyed by the namespace, pod and container labels named by the flags; samples that
//! are NaN, infinite or negative are skipped.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use plimsoll_runtime::CommonArgs;
use plimsoll_runtime::prometheus::{self, PrometheusClient, Series};

use crate::error::Result;

/// Where and how to read history.
#[derive(Clone, Debug)]
pub struct PrometheusConfig {
    /// The server: address, TLS, credentials, timeout and retries.
    pub server: prometheus::PrometheusConfig,
    /// The flags a Kubernetes client is built from when the credentials are in a Secret.
    pub kube: CommonArgs,
    /// `job` label of the cAdvisor series.
    pub job: String,
    /// How far back to read.
    pub history_length: Duration,
    /// Query step.
    pub resolution: Duration,
    /// Label holding the namespace.
    pub namespace_label: String,
    /// Label holding the pod name.
    pub pod_label: String,
    /// Label holding the container name.
    pub container_label: String,
}

/// One container's samples: (time, value) with CPU in millicores, memory in bytes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContainerHistory {
    /// CPU samples, millicores.
    pub cpu: Vec<(Timestamp, i64)>,
    /// Memory samples, bytes.
    pub memory: Vec<(Timestamp, i64)>,
}

/// (namespace, pod, container) → samples.
pub type History = BTreeMap<(String, String, String), ContainerHistory>;

/// Reads the history of every container the server knows, ending at `now`; a Kubernetes client
/// is built from `config.kube` only when the credentials are in a Secret.
pub async fn load(config: &PrometheusConfig, now: Timestamp) -> Result<History> {
    let kube = if config.server.auth.needs_kube() {
        Some(plimsoll_runtime::client::client(&config.kube).await?)
    } else {
        None
    };
    load_with(config, kube, now).await
}

/// [`load`] with the service's own Kubernetes client (for credentials in a Secret).
pub async fn load_with(
    config: &PrometheusConfig,
    kube: Option<kube::Client>,
    now: Timestamp,
) -> Result<History> {
    let client = PrometheusClient::new(&config.server, kube)?;
    let selector = format!(
        "job=\"{}\", {}=~\".+\", {}!=\"POD\", {}!=\"\"",
        config.job, config.pod_label, config.container_label, config.container_label
    );
    let step = config.resolution.as_secs().max(1);
    let start = Timestamp::from_second(
        now.as_second() - i64::try_from(config.history_length.as_secs()).unwrap_or(0),
    )
    .unwrap_or(Timestamp::MIN);
    let end = Timestamp::from_second(now.as_second()).unwrap_or(now);
    let range = |query: String| {
        let client = &client;
        async move {
            client
                .query_range(&query, start, end, Duration::from_secs(step))
                .await
        }
    };
    let cpu = range(format!(
        "rate(container_cpu_usage_seconds_total{{{selector}}}[{step}s])"
    ))
    .await?;
    let memory = range(format!("container_memory_working_set_bytes{{{selector}}}")).await?;
    Ok(collect(config, cpu, memory))
}

/// Keys the series by container and converts the samples (CPU cores → millicores).
fn collect(config: &PrometheusConfig, cpu: Vec<Series>, memory: Vec<Series>) -> History {
    let mut out = History::new();
    for (series, is_cpu) in cpu
        .into_iter()
        .map(|s| (s, true))
        .chain(memory.into_iter().map(|s| (s, false)))
    {
        let label = |l: &str| series.labels.get(l).cloned().unwrap_or_default();
        let key = (
            label(&config.namespace_label),
            label(&config.pod_label),
            label(&config.container_label),
        );
        let entry = out.entry(key).or_default();
        for sample in &series.samples {
            let Ok(time) = Timestamp::from_millisecond((sample.time * 1000.0) as i64) else {
                continue;
            };
            if !sample.value.is_finite() || sample.value < 0.0 {
                continue;
            }
            if is_cpu {
                entry.cpu.push((time, (sample.value * 1000.0) as i64));
            } else {
                entry.memory.push((time, sample.value as i64));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::extract::Query;
    use axum::routing::get as route_get;

    /// A tiny fake Prometheus: answers `query_range` with one CPU and one memory series.
    async fn fake() -> String {
        async fn handler(
            Query(q): Query<BTreeMap<String, String>>,
        ) -> axum::Json<serde_json::Value> {
            let query = q.get("query").cloned().unwrap_or_default();
            let (metric, values) = if query.starts_with("rate(container_cpu_usage_seconds_total{")
                && query.contains("job=\"kubernetes-cadvisor\"")
            {
                (
                    "cpu",
                    serde_json::json!([[1_700_000_000.0, "0.3"], [1_700_003_600.0, "0.25"]]),
                )
            } else {
                ("mem", serde_json::json!([[1_700_000_000.5, "104857600"]]))
            };
            axum::Json(serde_json::json!({
                "status": "success",
                "data": {"resultType": "matrix", "result": [{
                    "metric": {"namespace": "ns", "pod": "web-1", "name": "app", "m": metric},
                    "values": values,
                }]},
            }))
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("addr");
        let app = axum::Router::new().route("/api/v1/query_range", route_get(handler));
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{address}")
    }

    fn config(address: String) -> PrometheusConfig {
        PrometheusConfig {
            server: prometheus::PrometheusConfig::new(address),
            kube: crate::cli::Args::from_flags(["vpa-recommender"])
                .expect("parses")
                .common,
            job: "kubernetes-cadvisor".into(),
            history_length: Duration::from_secs(8 * 86_400),
            resolution: Duration::from_secs(3600),
            namespace_label: "namespace".into(),
            pod_label: "pod".into(),
            container_label: "name".into(),
        }
    }

    #[tokio::test]
    async fn loads_cpu_rates_and_memory_from_a_fake_prometheus() {
        let address = fake().await;
        let now = Timestamp::from_second(1_700_010_000).expect("ts");
        let history = load(&config(address), now).await.expect("loads");
        let h = &history[&("ns".into(), "web-1".into(), "app".into())];
        assert_eq!(h.cpu.len(), 2);
        assert_eq!(h.cpu[0].1, 300);
        assert_eq!(h.cpu[1].1, 250);
        assert_eq!(
            h.memory,
            vec![(
                Timestamp::from_millisecond(1_700_000_000_500).expect("ts"),
                104_857_600
            )]
        );
    }

    #[tokio::test]
    async fn errors_name_the_server() {
        let err = load(&config("http://127.0.0.1:1".into()), Timestamp::UNIX_EPOCH)
            .await
            .expect_err("nothing listens");
        assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
        // https is supported now; an address with another scheme is refused by name.
        let err = load(&config("ftp://x".into()), Timestamp::UNIX_EPOCH)
            .await
            .expect_err("ftp");
        assert!(err.to_string().contains("http://"), "{err}");
    }
}
