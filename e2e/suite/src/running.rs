//! A service under test running in-process: its task, and the token that stops it as SIGTERM
//! would.

use std::future::Future;
use std::time::Duration;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

/// How long a stopped service may take to return (finish in-flight writes, release its Lease).
pub const STOP_WITHIN: Duration = Duration::from_secs(30);

/// A spawned service returning `T`, stopped by cancelling its token.
pub struct Running<T> {
    name: &'static str,
    token: CancellationToken,
    task: tokio::task::JoinHandle<T>,
}

impl<T: Send + 'static> Running<T> {
    /// Spawns `run(token)`, the service's `run(config, token)` with its config bound.
    pub fn spawn<F>(name: &'static str, run: impl FnOnce(CancellationToken) -> F) -> Running<T>
    where
        F: Future<Output = T> + Send + 'static,
    {
        let token = CancellationToken::new();
        let run = run(token.clone());
        Running::spawn_with(name, token, run)
    }

    /// Spawns `run`, a service already bound to `token`.
    pub fn spawn_with<F>(name: &'static str, token: CancellationToken, run: F) -> Running<T>
    where
        F: Future<Output = T> + Send + 'static,
    {
        let task = tokio::spawn(run);
        Running { name, token, task }
    }

    /// Cancels the service and waits, at most [`STOP_WITHIN`], for what it returned.
    pub async fn stop(self) -> anyhow::Result<T> {
        self.token.cancel();
        tokio::time::timeout(STOP_WITHIN, self.task)
            .await
            .with_context(|| format!("{} did not stop within {STOP_WITHIN:?}", self.name))?
            .with_context(|| format!("{} panicked", self.name))
    }
}

/// A service on a runtime of its own, so that [`Crashable::crash`] (or dropping it) is a crash:
/// its tasks stop where they are, nothing is flushed and no Lease is released, as when a
/// process is killed.
pub struct Crashable {
    runtime: Option<tokio::runtime::Runtime>,
    stop: CancellationToken,
    done: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Crashable {
    /// Starts `run(token)` (the service's `run(config, token)` with its config bound) on one
    /// worker thread; an error it ends with is printed under `name`.
    pub fn start<F, E>(name: &'static str, run: impl FnOnce(CancellationToken) -> F) -> Self
    where
        F: Future<Output = Result<(), E>> + Send + 'static,
        E: std::fmt::Display,
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime for the service");
        let stop = CancellationToken::new();
        let (tx, done) = tokio::sync::oneshot::channel();
        let service = run(stop.clone());
        runtime.spawn(async move {
            if let Err(e) = service.await {
                eprintln!("{name} ended with an error: {e}");
            }
            let _ = tx.send(());
        });
        Self {
            runtime: Some(runtime),
            stop,
            done: Some(done),
        }
    }

    /// Stops it dead.
    pub fn crash(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }

    /// A graceful stop: finish in-flight work, release the Leases (at most 20 s).
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(done) = self.done.take() {
            let _ = tokio::time::timeout(Duration::from_secs(20), done).await;
        }
    }
}

impl Drop for Crashable {
    fn drop(&mut self) {
        self.crash();
    }
}
