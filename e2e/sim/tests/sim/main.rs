//! The sim's integration tests as one test binary: one module per area, so the sim and its
//! dependencies are linked once instead of once per file. `cargo test -p plimsoll-sim --test sim
//! <module>::` runs one area.

mod common;

mod authorization;
mod bench;
mod conformance;
mod crd_validation;
mod demo;
mod events;
mod kubectl;
mod protobuf;
mod python_client;
mod webhooks_faults_metrics;
