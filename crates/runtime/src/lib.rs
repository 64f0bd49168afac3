//! Shared I/O plumbing for every Plimsoll service.
//!
//! | module | what it gives a service |
//! |---|---|
//! | [`args`] | [`CommonArgs`], the flags every service flattens (`PLIMSOLL_<FLAG>` env vars); Go-style durations |
//! | [`client`] | the kube `Client` from `--kubeconfig`/`--context` or in-cluster; the rustls `ring` provider |
//! | [`telemetry`] | tracing (JSON or text), the `plimsoll_<binary>_` metrics sub-registry, reconcile metrics |
//! | [`admin`] | one axum listener for `/metrics`, `/healthz` ([`admin::Liveness`]), `/readyz` ([`admin::Readiness`]) |
//! | [`shutdown`] | a `CancellationToken` cancelled by SIGTERM/Ctrl-C; a grace-period helper |
//! | [`leader`] | Lease leader election (`plimsoll-<binary>`) and the [`leader::LeaderHandle`] to gate work on |
//! | [`scale`] | the scale subresource of any scalable kind, its pod [`selector::Selector`], rollout state |
//! | [`metrics_api`] | `metrics.k8s.io`, `custom.metrics.k8s.io`, `external.metrics.k8s.io` behind [`metrics_api::MetricsSource`] |
//! | [`events`] | Kubernetes Events reported as the binary |
//! | [`kinds`] | `apiVersion` + `kind` → resource, through cached discovery |
//! | [`plot`] | a chart of primitives rendered to SVG or PNG, for `replay --plot` |
//!
//! Decisions live in `plimsoll-core`; this crate only moves data in and out of the cluster.
//!
//! # A service's `main`
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use clap::Parser;
//! use plimsoll_runtime::admin::{self, AdminState, Liveness, Readiness};
//! use plimsoll_runtime::{CommonArgs, client, leader, shutdown, telemetry};
//! use prometheus_client::registry::Registry;
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
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let args = Args::parse();
//!     telemetry::init_tracing(args.common.log_format, &args.common.log_filter)?;
//!     let client = client::client(&args.common).await?; // also installs the ring provider
//!     let shutdown = shutdown::signal_token();
//!
//!     let mut registry = Registry::default();
//!     let reconciles =
//!         telemetry::ReconcileMetrics::register(telemetry::service_registry(&mut registry, BINARY));
//!     let liveness = Liveness::new(Duration::from_secs(60));
//!     let readiness = Readiness::new();
//!     let admin = admin::router(AdminState {
//!         registry: Arc::new(registry),
//!         liveness: liveness.clone(),
//!         readiness: readiness.clone(),
//!     });
//!     let server = tokio::spawn(admin::serve(args.common.metrics_address, admin, shutdown.clone()));
//!
//!     let election = leader::start(&client, BINARY, &args.common, shutdown.clone())?;
//!     let leader = election.handle.clone();
//!     // ... build the Context (client, Events::new(client, BINARY), ScaleClient, ApiMetrics,
//!     // reflectors), call readiness.set_ready(true) once stores are synced, tick liveness in
//!     // the loop, and skip reconciles while !leader.is_leader().
//!     # let _ = (reconciles, leader);
//!
//!     shutdown.cancelled().await;
//!     // Bounded: the pod's terminationGracePeriodSeconds (30 s) must not run out first.
//!     shutdown::with_grace(&shutdown, Duration::from_secs(15), election.task).await;
//!     server.await??;
//!     Ok(())
//! }
//! ```

// Every public item is documented; the services are written against these docs.
#![warn(missing_docs)]

pub mod admin;
pub mod args;
pub mod client;
pub mod error;
pub mod events;
pub mod kinds;
pub mod leader;
pub mod metrics_api;
pub mod plot;
pub mod rollout;
pub mod scale;
pub mod selector;
pub mod service;
pub mod shutdown;
pub mod telemetry;

#[cfg(test)]
mod fake_api;

pub use args::{CommonArgs, LogFormat};
pub use error::{Error, Result};
