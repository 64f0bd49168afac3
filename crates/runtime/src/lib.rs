//! Shared I/O plumbing for every Plimsoll service.
//!
//! | module | what it gives a service |
//! |---|---|
//! | [`service`] | the skeleton every service runs on: client, admin listener, election, leadership loop, ordered shutdown; [`service::block_on`] for `main` |
//! | [`args`] | [`CommonArgs`], the flags every service flattens (`PLIMSOLL_<FLAG>` env vars); Go-style durations |
//! | [`client`] | the kube `Client` from `--kubeconfig`/`--context` or in-cluster; the rustls `ring` provider |
//! | [`rate_limit`] | the client-side limit `--kube-api-qps`/`--kube-api-burst` (a token bucket in the client's stack) and its counters |
//! | [`telemetry`] | tracing (JSON or text), the `plimsoll_<binary>_` metrics sub-registry, reconcile metrics |
//! | [`one_line`] | the text log format's writer: each event one line, whatever newlines its values hold |
//! | [`admin`] | one axum listener for `/metrics`, `/healthz` ([`admin::Liveness`]), `/readyz` ([`admin::Readiness`]) |
//! | [`listener`] | the HTTP server under every listener (admin, webhook): connection cap, header/body/write/idle clocks, size caps, TLS |
//! | [`shutdown`] | a `CancellationToken` cancelled by SIGTERM/Ctrl-C; a grace-period helper |
//! | [`leader`] | Lease leader election (`plimsoll-<binary>`) and the [`leader::LeaderHandle`] to gate work on |
//! | [`scale`] | the scale subresource of any scalable kind ([`target_scale::TargetScale`]), its pod [`selector::Selector`], rollout state |
//! | [`metrics_api`] | `metrics.k8s.io`, `custom.metrics.k8s.io`, `external.metrics.k8s.io` behind [`metrics_api::MetricsSource`] |
//! | [`prometheus`] | the Prometheus HTTP API (`query`, `query_range`) over TLS with bearer or basic auth, retries and timeouts |
//! | [`events`] | Kubernetes Events reported as the binary |
//! | [`mod@api_message`] | the API server's message for a failed request, for conditions, Events and logs |
//! | [`kinds`] | `apiVersion` + `kind` → resource, through cached discovery |
//! | [`watch`] | every watch of every service: kube's watcher with backoff, one log and metric policy, first-list readiness, pages of 50, stop on shutdown |
//! | [`paged`] | one-off lists a page at a time, keeping a summary of each object |
//! | [`repeats`] | which warnings about an object reach the log: the first, then one per 10 minutes |
//! | [`contained`] | a reconcile's panic as that object's error, so one object cannot stop (and crash-loop) a service |
//!
//! Decisions live in `plimsoll-core`; this crate only moves data in and out of the cluster.
//!
//! # A service
//!
//! `main` parses the flags and hands the runtime to [`service::block_on`]; the library's `run`
//! builds its context on a started [`service::Service`], says what to watch, and gives the
//! skeleton the future to run while it leads. On SIGTERM the skeleton stops the work, lets the
//! writes in flight finish, then releases the Lease, stops the admin listener and returns `Ok`.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use clap::Parser;
//! use plimsoll_runtime::service::{self, Service};
//! use plimsoll_runtime::{CommonArgs, telemetry};
//! use tokio_util::sync::CancellationToken;
//!
//! const BINARY: &str = "hpa-plus";
//!
//! /// hpa-plus: enhanced horizontal autoscaler.
//! #[derive(Parser)]
//! #[command(mut_arg("metrics_address", |a| a.default_value("0.0.0.0:8080")))]
//! struct Args {
//!     #[command(flatten)]
//!     common: CommonArgs,
//! }
//!
//! fn main() -> Result<(), plimsoll_runtime::Error> {
//!     let args = Args::parse();
//!     // The ring provider, tracing from the flags, and the SIGTERM/Ctrl-C token.
//!     service::block_on(&args.common.clone(), |shutdown| run(args.common, shutdown))
//! }
//!
//! async fn run(common: CommonArgs, shutdown: CancellationToken) -> plimsoll_runtime::Result<()> {
//!     // The client, the admin listener's address and the election on `plimsoll-hpa-plus`.
//!     let mut service = Service::new(BINARY, &common)
//!         .liveness_window(Duration::from_secs(60))
//!         .start()
//!         .await?;
//!     let reconciles = telemetry::ReconcileMetrics::register(service.registry());
//!     // ... build the Context (service.client, Events::new(client, BINARY), ScaleClient,
//!     // ApiMetrics, reflectors) with service.leader to gate writes on; hand the watches to
//!     // service.spawn; set service.readiness once they synced; tick service.liveness.
//!     # let _ = reconciles;
//!     service
//!         .run(shutdown, |term| async move {
//!             // The controller, until the term ends (shutdown or a lost Lease).
//!             term.cancelled().await;
//!             Ok(())
//!         })
//!         .await
//! }
//! ```

// Every public item is documented; the services are written against these docs.
#![warn(missing_docs)]

pub mod admin;
pub mod api_message;
pub mod args;
pub mod client;
pub mod contained;
pub mod error;
pub mod events;
pub mod kinds;
pub mod leader;
pub mod listener;
pub mod log_sink;
pub mod metrics_api;
pub mod one_line;
pub mod owners;
pub mod paged;
pub mod prometheus;
pub mod rate_limit;
pub mod repeats;
pub mod rollout;
pub mod scale;
pub mod selector;
pub mod service;
pub mod shutdown;
pub mod target_index;
pub mod target_scale;
pub mod telemetry;
pub mod watch;
pub mod watched_scales;

#[cfg(test)]
mod fake_api;

pub use api_message::api_message;
pub use args::{AdminListenerArgs, CommonArgs};
pub use error::{Error, Result};
pub use telemetry::LogFormat;
