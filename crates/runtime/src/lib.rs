//! Shared I/O plumbing for every Plimsoll service.

pub mod admin;
pub mod args;
pub mod client;
pub mod error;
pub mod events;
pub mod kinds;
pub mod leader;
pub mod metrics_api;
pub mod rollout;
pub mod scale;
pub mod selector;
pub mod shutdown;
pub mod telemetry;

#[cfg(test)]
mod fake_api;

pub use args::{CommonArgs, LogFormat};
pub use error::{Error, Result};
