//! A wiretap in front of the sim: a plain-HTTP forwarding proxy that records every request as
//! it arrives, before the sim answers it.
//!
//! The sim's audit log records a write once it is committed; a test that must act *while* a
//! write is in flight (send SIGTERM mid-write) needs to see the request leave the service. A
//! service pointed at [`Tap::kubeconfig`] talks to the sim's plain HTTP listener through the
//! tap, unchanged otherwise; [`Tap::wait_for`] returns once a matching request has been sent.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// One request seen by the tap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// `GET`, `PATCH`, `POST`, …
    pub method: String,
    /// The request path, e.g. `/apis/apps/v1/namespaces/ns/deployments/web/scale`.
    pub path: String,
}

/// The running proxy; it stops when dropped.
pub struct Tap {
    address: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    count: watch::Receiver<usize>,
    task: JoinHandle<()>,
}

impl Tap {
    /// Starts forwarding a loopback port to `upstream` (the sim's plain HTTP address).
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<Tap> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (count_tx, count) = watch::channel(0);
        let task = tokio::spawn(accept(
            listener,
            upstream,
            Recorder {
                seen: seen.clone(),
                count: Arc::new(count_tx),
            },
        ));
        Ok(Tap {
            address,
            seen,
            count,
            task,
        })
    }

    /// A kubeconfig for the sim through the tap (plain HTTP, the sim's token).
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: tap\n  cluster:\n    server: http://{}\n\
             users:\n- name: tap\n  user:\n    token: {}\ncontexts:\n- name: tap\n  context:\n    \
             cluster: tap\n    user: tap\ncurrent-context: tap\n",
            self.address,
            plimsoll_sim::TOKEN
        )
    }

    /// Every request seen so far, in arrival order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Waits until a request matching `method` whose path ends with `path_suffix` has arrived.
    pub async fn wait_for(
        &self,
        method: &str,
        path_suffix: &str,
        within: Duration,
    ) -> anyhow::Result<Seen> {
        let mut count = self.count.clone();
        let found = tokio::time::timeout(within, async {
            loop {
                if let Some(seen) = self
                    .seen()
                    .into_iter()
                    .find(|s| s.method == method && s.path.ends_with(path_suffix))
                {
                    return Some(seen);
                }
                count.changed().await.ok()?;
            }
        })
        .await;
        found.ok().flatten().with_context(|| {
            let seen = self.seen();
            let last: Vec<String> = seen
                .iter()
                .skip(seen.len().saturating_sub(20))
                .map(|s| format!("{} {}", s.method, s.path))
                .collect();
            format!(
                "no {method} …{path_suffix} within {within:?}; {} requests seen, the last: {last:#?}",
                seen.len()
            )
        })
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct Recorder {
    seen: Arc<Mutex<Vec<Seen>>>,
    count: Arc<watch::Sender<usize>>,
}

impl Recorder {
    fn record(&self, method: &str, path: &str) {
        let len = {
            let mut seen = self
                .seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            seen.push(Seen {
                method: method.to_owned(),
                path: path.to_owned(),
            });
            seen.len()
        };
        self.count.send_replace(len);
    }
}

async fn accept(listener: TcpListener, upstream: SocketAddr, recorder: Recorder) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((down, _)) = listener.accept().await else {
            continue;
        };
        let recorder = recorder.clone();
        connections.spawn(async move {
            if let Err(e) = forward(down, upstream, recorder).await {
                tracing::debug!(error = %e, "tap connection ended");
            }
        });
    }
}

/// One client connection, paired with one connection to the sim: each request is recorded,
/// then forwarded (HTTP/1.1 carries one request at a time per connection, in order).
async fn forward(down: TcpStream, upstream: SocketAddr, recorder: Recorder) -> anyhow::Result<()> {
    let up = TcpStream::connect(upstream).await?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(up)).await?;
    let upstream_task = tokio::spawn(connection);
    let sender = Arc::new(tokio::sync::Mutex::new(sender));
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let sender = sender.clone();
        let recorder = recorder.clone();
        async move {
            recorder.record(request.method().as_str(), request.uri().path());
            let mut sender = sender.lock().await;
            sender.ready().await?;
            let response: Response<Incoming> = sender.send_request(request).await?;
            Ok::<_, hyper::Error>(response)
        }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(down), service)
        .await;
    upstream_task.abort();
    served?;
    Ok(())
}
