//! `--storage=prometheus`: usage history at start from a Prometheus server's cAdvisor series
//! (`container_cpu_usage_seconds_total` as a rate, `container_memory_working_set_bytes`), over
//! `--history-length` at `--history-resolution`, as upstream's history provider reads them.
//!
//! A plain-HTTP client on hyper (no TLS: Prometheus is usually reached inside the cluster).
//! Series are keyed by the namespace, pod and container labels named by the flags.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use jiff::Timestamp;
use serde::Deserialize;

use crate::error::{Error, Result};

/// Where and how to read history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrometheusConfig {
    /// Base URL (`http://host:port`).
    pub address: String,
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

#[derive(Deserialize)]
struct Response {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    result: Vec<Series>,
}

#[derive(Deserialize)]
struct Series {
    metric: BTreeMap<String, String>,
    values: Vec<(f64, String)>,
}

fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

async fn get(address: &str, path_and_query: &str) -> Result<Bytes> {
    let fail = |reason: String| Error::Prometheus {
        address: address.to_owned(),
        reason,
    };
    let rest = address
        .strip_prefix("http://")
        .ok_or_else(|| fail("only http:// addresses are supported".into()))?;
    let (authority, base_path) = rest.split_once('/').unwrap_or((rest, ""));
    let host_port = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let stream = tokio::net::TcpStream::connect(&host_port)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| fail(e.to_string()))?;
    tokio::spawn(conn);
    let base = base_path.trim_end_matches('/');
    let uri = if base.is_empty() {
        path_and_query.to_owned()
    } else {
        format!("/{base}{path_and_query}")
    };
    let request = hyper::Request::get(uri)
        .header(hyper::header::HOST, authority)
        .body(Empty::<Bytes>::new())
        .map_err(|e| fail(e.to_string()))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| fail(e.to_string()))?
        .to_bytes();
    if !status.is_success() {
        return Err(fail(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&body)
        )));
    }
    Ok(body)
}

async fn query_range(
    config: &PrometheusConfig,
    query: &str,
    now: Timestamp,
) -> Result<Vec<Series>> {
    let start = now.as_second() - i64::try_from(config.history_length.as_secs()).unwrap_or(0);
    let path = format!(
        "/api/v1/query_range?query={}&start={start}&end={}&step={}s",
        encode(query),
        now.as_second(),
        config.resolution.as_secs().max(1)
    );
    let body = get(&config.address, &path).await?;
    let response: Response = serde_json::from_slice(&body).map_err(|e| Error::Prometheus {
        address: config.address.clone(),
        reason: format!("bad response: {e}"),
    })?;
    if response.status != "success" {
        return Err(Error::Prometheus {
            address: config.address.clone(),
            reason: response.error.unwrap_or(response.status),
        });
    }
    Ok(response.data.map(|d| d.result).unwrap_or_default())
}

/// Reads the history of every container the server knows, ending at `now`.
pub async fn load(config: &PrometheusConfig, now: Timestamp) -> Result<History> {
    let selector = format!(
        "job=\"{}\", {}=~\".+\", {}!=\"POD\", {}!=\"\"",
        config.job, config.pod_label, config.container_label, config.container_label
    );
    let step = config.resolution.as_secs().max(1);
    let cpu = query_range(
        config,
        &format!("rate(container_cpu_usage_seconds_total{{{selector}}}[{step}s])"),
        now,
    )
    .await?;
    let memory = query_range(
        config,
        &format!("container_memory_working_set_bytes{{{selector}}}"),
        now,
    )
    .await?;
    let mut out = History::new();
    for (series, is_cpu) in cpu
        .into_iter()
        .map(|s| (s, true))
        .chain(memory.into_iter().map(|s| (s, false)))
    {
        let label = |l: &str| series.metric.get(l).cloned().unwrap_or_default();
        let key = (
            label(&config.namespace_label),
            label(&config.pod_label),
            label(&config.container_label),
        );
        let entry = out.entry(key).or_default();
        for (t, v) in &series.values {
            let (Ok(value), Ok(time)) = (
                v.parse::<f64>(),
                Timestamp::from_millisecond((t * 1000.0) as i64),
            ) else {
                continue;
            };
            if !value.is_finite() || value < 0.0 {
                continue;
            }
            if is_cpu {
                entry.cpu.push((time, (value * 1000.0) as i64));
            } else {
                entry.memory.push((time, value as i64));
            }
        }
    }
    Ok(out)
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
            address,
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
        let err = load(&config("https://x".into()), Timestamp::UNIX_EPOCH)
            .await
            .expect_err("https");
        assert!(err.to_string().contains("http://"), "{err}");
    }
}
