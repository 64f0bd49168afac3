//! Graceful shutdown: one token every task watches, cancelled by SIGTERM or Ctrl-C.
//!
//! [`crate::service::block_on`] calls [`signal_token`] once and hands the token to the service's
//! `run`; the [`crate::service`] skeleton turns it into the shutdown order (stop taking work,
//! finish the writes in flight, release the Lease, stop the admin server). Work in flight gets a
//! bounded grace period with [`with_grace`]; the grace period must be shorter than the pod's
//! `terminationGracePeriodSeconds` (30 s by default) so the lease release still happens.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Resolves on the first SIGTERM (what the kubelet sends) or Ctrl-C / SIGINT.
pub async fn signal() {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %err, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut stream) => {
                stream.recv().await;
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("received Ctrl-C, shutting down"),
        () = terminate => tracing::info!("received SIGTERM, shutting down"),
    }
}

/// A token cancelled by the first SIGTERM or Ctrl-C (a background task listens for them).
/// Must be called inside a tokio runtime.
pub fn signal_token() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = signal() => cancel.cancel(),
            // Someone else cancelled: stop listening.
            () = cancel.cancelled() => {}
        }
    });
    token
}

/// Runs `work` to completion, but once `token` is cancelled gives it at most `grace` more.
/// Returns `None` when the grace period ran out (the future is dropped).
pub async fn with_grace<F: Future>(
    token: &CancellationToken,
    grace: Duration,
    work: F,
) -> Option<F::Output> {
    let deadline = async {
        token.cancelled().await;
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        output = work => Some(output),
        () = deadline => {
            tracing::warn!(grace = ?grace, "shutdown grace period ran out; abandoning work");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_finishes_when_not_cancelled() {
        let token = CancellationToken::new();
        let out = with_grace(&token, Duration::from_secs(1), async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            7
        })
        .await;
        assert_eq!(out, Some(7));
    }

    #[tokio::test(start_paused = true)]
    async fn work_gets_the_grace_period_after_cancellation() {
        let token = CancellationToken::new();
        token.cancel();
        let quick = with_grace(&token, Duration::from_secs(5), async {
            tokio::time::sleep(Duration::from_secs(4)).await;
            "done"
        })
        .await;
        assert_eq!(quick, Some("done"));
        let started = tokio::time::Instant::now();
        let slow = with_grace(&token, Duration::from_secs(5), std::future::pending::<()>()).await;
        assert_eq!(slow, None);
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test]
    async fn signal_token_can_be_cancelled_by_hand() {
        let token = signal_token();
        assert!(!token.is_cancelled());
        token.cancel();
        token.cancelled().await;
    }
}
