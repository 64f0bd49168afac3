//! xtask's tests as one test binary (the chart, the manifests, the CRDs, the release steps, the
//! service checklist and the docs' references), so they are linked once.
//! `cargo test -p xtask --test xtask <module>::` runs one area.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // tests: fail loudly

mod hardening;
mod helm;
mod service_args;

mod chart;
mod crds;
mod manifests;
mod references;
mod release;
mod services;
