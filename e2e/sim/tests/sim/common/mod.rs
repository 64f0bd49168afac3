//! Shared helpers for the sim's integration tests.
#![allow(clippy::unwrap_used, clippy::panic)] // integration tests: helpers fail loudly
#![allow(dead_code)]

pub mod kubectl;

use std::future::Future;
use std::time::{Duration, Instant};

use plimsoll_sim::{Sim, SimConfig, SimHandle};

/// Starts a sim with fast defaults and returns it with an HTTPS kube client.
pub async fn start() -> (SimHandle, kube::Client) {
    start_with(SimConfig::default()).await
}

pub async fn start_with(config: SimConfig) -> (SimHandle, kube::Client) {
    let sim = Sim::start(config).await.expect("sim starts");
    let client = sim.kube_client().await.expect("kube client");
    (sim, client)
}

/// Polls `f` until it returns Some or `timeout` passes.
pub async fn eventually<T, F, Fut>(timeout: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    while start.elapsed() < timeout {
        if let Some(v) = f().await {
            return Some(v);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// The HTTP status of a kube API error (0 when it is not one).
pub fn code(e: &kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        _ => 0,
    }
}
