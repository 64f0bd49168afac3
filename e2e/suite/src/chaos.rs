//! A cluster under injected faults, and the ledger that counts them.
//!
//! The fault suite (`tests/faults.rs`) runs each service as its own process (the
//! `plimsoll-service` binary), so a test can SIGKILL it between deciding and writing, and points
//! it at a [`Ledger`]: a plain-HTTP forwarding proxy in front of the sim that records every
//! request and the status it was answered with. The sim's fault rules say what to inject; the
//! ledger says how often it was injected (each 500 or 429 the service received, each watch the
//! sim answered with a forced 410), and the sim's audit log says what was written.
//!
//! Every number a test measures goes into a [`Row`] printed as one line of the table in
//! docs/reliability.md (`just faults` prints them).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use plimsoll_sim::{Fault, SimHandle};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One request the ledger forwarded, with the status the sim answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exchange {
    /// `GET`, `PATCH`, `POST`, …
    pub method: String,
    /// The request path.
    pub path: String,
    /// The query string ("" when none).
    pub query: String,
    /// The HTTP status of the answer; 0 while the answer has not come (or never came).
    pub status: u16,
}

impl Exchange {
    /// Whether this was a watch request.
    pub fn is_watch(&self) -> bool {
        self.query
            .split('&')
            .any(|p| p == "watch=true" || p == "watch=1")
    }
}

/// The running proxy; it stops when dropped.
pub struct Ledger {
    address: SocketAddr,
    log: Arc<Mutex<Vec<Exchange>>>,
    task: JoinHandle<()>,
}

impl Ledger {
    /// Starts forwarding a loopback port to the sim's plain HTTP listener.
    pub async fn start(sim: &SimHandle) -> anyhow::Result<Ledger> {
        let upstream: SocketAddr = sim
            .http_url
            .as_deref()
            .and_then(|u| u.strip_prefix("http://"))
            .context("the sim serves plain HTTP")?
            .parse()?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn(accept(listener, upstream, log.clone()));
        Ok(Ledger { address, log, task })
    }

    /// A kubeconfig for the sim through the ledger (plain HTTP, the sim's token).
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: ledger\n  cluster:\n    server: http://{}\n\
             users:\n- name: ledger\n  user:\n    token: {}\ncontexts:\n- name: ledger\n  context:\n    \
             cluster: ledger\n    user: ledger\ncurrent-context: ledger\n",
            self.address,
            plimsoll_sim::TOKEN
        )
    }

    /// Every exchange so far, in arrival order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        lock(&self.log).clone()
    }

    /// How many exchanges there were so far (a mark for [`Ledger::since`]).
    pub fn mark(&self) -> usize {
        lock(&self.log).len()
    }

    /// The exchanges from `mark` on.
    pub fn since(&self, mark: usize) -> Vec<Exchange> {
        lock(&self.log).iter().skip(mark).cloned().collect()
    }

    /// Answers with `status` to `method` on a path ending in `path_suffix`: how many faults of
    /// that kind the service received.
    pub fn answered(&self, method: &str, path_suffix: &str, status: u16) -> usize {
        lock(&self.log)
            .iter()
            .filter(|e| e.method == method && e.path.ends_with(path_suffix) && e.status == status)
            .count()
    }

    /// Answers with `status` to GETs under an API group path (`/apis/metrics.k8s.io/`).
    pub fn answered_under(&self, path_prefix: &str, status: u16) -> usize {
        lock(&self.log)
            .iter()
            .filter(|e| e.path.starts_with(path_prefix) && e.status == status)
            .count()
    }

    /// Watches sent from `mark` on, at most `armed`: the sim answers the first `armed` watches
    /// after [`SimHandle::expire_next_watches`] with 410, and this ledger's services are the
    /// only clients that watch.
    pub fn expired_watches(&self, mark: usize, armed: usize) -> usize {
        self.since(mark)
            .iter()
            .filter(|e| e.is_watch())
            .count()
            .min(armed)
    }

    /// Waits until `method` on a path ending in `path_suffix` has been sent from `mark` on.
    pub async fn wait_for(
        &self,
        mark: usize,
        method: &str,
        path_suffix: &str,
        within: Duration,
    ) -> anyhow::Result<()> {
        crate::eventually(
            &format!("{method} …{path_suffix}"),
            within,
            Duration::from_millis(50),
            || async {
                Ok(self
                    .since(mark)
                    .iter()
                    .any(|e| e.method == method && e.path.ends_with(path_suffix))
                    .then_some(()))
            },
        )
        .await
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(log: &Mutex<Vec<Exchange>>) -> std::sync::MutexGuard<'_, Vec<Exchange>> {
    log.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn accept(listener: TcpListener, upstream: SocketAddr, log: Arc<Mutex<Vec<Exchange>>>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((down, _)) = listener.accept().await else {
            continue;
        };
        let log = log.clone();
        connections.spawn(async move {
            if let Err(e) = forward(down, upstream, log).await {
                tracing::debug!(error = %e, "ledger connection ended");
            }
        });
    }
}

/// One client connection paired with one connection to the sim; each request is logged as it
/// arrives and its status filled in when the sim answers.
async fn forward(
    down: TcpStream,
    upstream: SocketAddr,
    log: Arc<Mutex<Vec<Exchange>>>,
) -> anyhow::Result<()> {
    let up = TcpStream::connect(upstream).await?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(up)).await?;
    let upstream_task = tokio::spawn(connection);
    let sender = Arc::new(tokio::sync::Mutex::new(sender));
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let sender = sender.clone();
        let log = log.clone();
        async move {
            let index = {
                let mut log = lock(&log);
                log.push(Exchange {
                    method: request.method().as_str().to_owned(),
                    path: request.uri().path().to_owned(),
                    query: request.uri().query().unwrap_or_default().to_owned(),
                    status: 0,
                });
                log.len() - 1
            };
            let mut sender = sender.lock().await;
            sender.ready().await?;
            let response: Response<Incoming> = sender.send_request(request).await?;
            if let Some(e) = lock(&log).get_mut(index) {
                e.status = response.status().as_u16();
            }
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

/// A burst of `count` answers with `status` (500, 429, …) to `verb` on `resource`
/// (`plural[/subresource]`, or an API group for the metrics APIs).
pub fn burst(verb: &str, resource: &str, status: u16, count: u64) -> Fault {
    Fault {
        verb: verb.into(),
        resource: resource.into(),
        error_rate: 1.0,
        status: Some(status),
        count,
        ..Fault::default()
    }
}

/// Holds every `verb` on `resource` in the sim for `latency` (real time) before answering: the
/// window in which a test kills the service between deciding and writing.
pub fn hold(verb: &str, resource: &str, latency: Duration) -> Fault {
    Fault {
        verb: verb.into(),
        resource: resource.into(),
        latency_ms: u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
        ..Fault::default()
    }
}

/// A service in its own process (`plimsoll-service <binary> FLAGS…`); SIGKILLed when dropped.
pub struct Process {
    child: Option<Child>,
    /// The leader-election identity (`POD_NAME`).
    pub identity: String,
}

impl Process {
    /// Starts `binary` from the `plimsoll-service` executable `exe` against `kubeconfig`,
    /// electing on `plimsoll-<binary>` in `lease_namespace` with short lease timings (a standby
    /// takes over within about 4 s of the leader's death). Its log (standard error) goes to
    /// `log` when given, for a test that reads what was logged, else to the test's.
    pub fn spawn(
        exe: &Path,
        binary: &str,
        identity: &str,
        kubeconfig: &Path,
        lease_namespace: &str,
        extra: &[String],
        log: Option<&Path>,
    ) -> anyhow::Result<Process> {
        let stderr = match log {
            Some(path) => Stdio::from(
                std::fs::File::create(path)
                    .with_context(|| format!("create {}", path.display()))?,
            ),
            None => Stdio::inherit(),
        };
        let child = Command::new(exe)
            .arg(binary)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            // Port 0: nothing here scrapes the admin server, so the service binds a port of
            // its own and none has to be found for it.
            .arg("--metrics-address=127.0.0.1:0")
            .arg("--leader-elect=true")
            .arg("--lease-duration=4s")
            .arg("--renew-deadline=3s")
            .arg("--retry-period=1s")
            .arg(format!("--lease-namespace={lease_namespace}"))
            .arg("--log-format=text")
            .args(
                (!extra.iter().any(|a| a.starts_with("--log-filter")))
                    .then_some("--log-filter=warn,plimsoll_runtime=info"),
            )
            .args(extra)
            .env("POD_NAME", identity)
            .stdin(Stdio::null())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("start plimsoll-service {binary}"))?;
        Ok(Process {
            child: Some(child),
            identity: identity.to_owned(),
        })
    }

    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// SIGKILL: the process dies at once, whatever it was doing.
    pub fn kill(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill().context("SIGKILL")?;
            child.wait().context("reap")?;
        }
        Ok(())
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

/// A kubeconfig file that is removed on drop.
pub struct KubeconfigFile {
    /// Where it is.
    pub path: PathBuf,
}

impl KubeconfigFile {
    /// Writes `contents` to a fresh file named after `name`.
    pub fn write(name: &str, contents: &str) -> anyhow::Result<KubeconfigFile> {
        let path = std::env::temp_dir().join(format!(
            "plimsoll-faults-{name}-{}.kubeconfig",
            std::process::id()
        ));
        std::fs::write(&path, contents)?;
        Ok(KubeconfigFile { path })
    }
}

impl Drop for KubeconfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One line of the fault table: a fault injected into a service, how often, and what came of it.
#[derive(Clone, Debug)]
pub struct Row {
    /// The service under test.
    pub service: &'static str,
    /// The fault, in words.
    pub fault: String,
    /// How often it was injected (counted by the ledger, or by the test for kills and drops).
    pub injected: usize,
    /// What the service did about it.
    pub outcome: String,
    /// What was lost ("nothing" is the goal).
    pub lost: String,
}

impl Row {
    /// The row as a Markdown table line.
    pub fn markdown(&self) -> String {
        format!(
            "| {} | {} | {} | {} | {} |",
            self.service, self.fault, self.injected, self.outcome, self.lost
        )
    }
}

/// Prints the rows (with `--nocapture` they reach the terminal; `just faults` keeps them).
pub fn report(rows: &[Row]) {
    for row in rows {
        println!("{}", row.markdown());
    }
}
