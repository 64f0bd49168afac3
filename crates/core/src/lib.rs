//! Plimsoll's API types and pure autoscaling algorithms.
//!
//! Nothing in this crate performs I/O or reads the clock: every decision function takes the
//! spec, the observed state, its history and `now` as plain data, and returns a decision with
//! the reasons for it. The controllers, `replay` and the tests all call the same functions.

pub mod api;
pub mod conflict;
pub mod cut_down;
pub mod horizontal;
pub mod pod_fields;
pub mod printable;
pub mod quantity;
pub mod quoted;
pub mod schedule;
pub mod selector;
pub mod service_health;
pub mod stable_hash;
pub mod stored;
pub mod vertical;
