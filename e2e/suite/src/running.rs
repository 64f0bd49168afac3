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
