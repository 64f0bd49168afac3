//! Shared I/O plumbing for every Plimsoll service.

pub mod admin;
pub mod args;
pub mod client;
pub mod error;
pub mod events;
pub mod leader;
pub mod selector;
pub mod shutdown;
pub mod telemetry;

pub use args::{CommonArgs, LogFormat};
pub use error::{Error, Result};
