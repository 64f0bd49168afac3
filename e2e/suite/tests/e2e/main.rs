//! The end-to-end suite as one test binary: one module per area, so the harness, the sim and
//! the five services are compiled and linked once instead of once per file (25 binaries of
//! 90–128 MB each before). `cargo test -p plimsoll-e2e --test e2e <module>::` runs one area.
//!
//! Tests run concurrently with the other tests of this binary. Tests whose assertions measure
//! wall-clock latency or process-wide resources take [`plimsoll_e2e::serial`] first, so they
//! never share the machine with each other.

mod conflict;
mod cron_hpa;
mod faults;
mod harness;
mod hpa_plus;
mod hpa_plus_predictive;
mod hpa_plus_prometheus;
mod hpa_plus_record;
mod hpa_plus_shards;
mod images;
mod install;
mod joint;
mod messages;
mod observability;
mod prometheus;
mod rbac;
mod shutdown;
mod tenants;
mod vpa_admission;
mod vpa_controlling;
mod vpa_flow;
mod vpa_recommender;
mod vpa_recommender_shards;
mod vpa_updater;
mod wpa;
