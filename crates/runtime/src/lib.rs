//! Shared I/O plumbing for every Plimsoll service.

pub mod args;
pub mod error;
pub mod leader;
pub mod selector;

pub use args::{CommonArgs, LogFormat};
pub use error::{Error, Result};
