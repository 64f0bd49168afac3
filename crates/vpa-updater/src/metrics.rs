//! Prometheus metrics of the updater, exported as `plimsoll_vpa_updater_<name>`.
//!
//! | name | type | labels | meaning |
//! |---|---|---|---|
//! | `evictions_total` | counter | `result` | eviction requests: `evicted`, `blocked` (429 from a PodDisruptionBudget), `gone` (404), `error` |
//! | `resizes_total` | counter | `result` | in-place resize requests: `requested`, `refused` (the API server said no; the pod is evicted instead, except in mode `InPlace`), `infeasible` (refused for node capacity, mode `InPlace`), `held_back` (values the node could not fit, newly remembered), `error` |
//! | `loops_total` | counter | `outcome` | loops: `completed`, `admission_unhealthy` (status Lease stale or missing: nothing done), `error` |
//! | `loop_duration_seconds` | histogram | | time one loop took, including rate-limiter waits |
//! | `admission_status_valid` | gauge | | 1 when the webhook's status Lease was fresh at the last loop |
//! | `vpas` | gauge | | VPAs in an acting mode (`Recreate`, `Auto`, `InPlaceOrRecreate`) at the last loop |
//! | `leader` | gauge | | 1 while this replica leads |

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

type Labelled = Family<[(&'static str, &'static str); 1], Counter>;

/// The updater's metric families.
#[derive(Clone, Debug)]
pub struct Metrics {
    evictions: Labelled,
    resizes: Labelled,
    loops: Labelled,
    loop_duration: Histogram,
    admission_status_valid: Gauge,
    vpas: Gauge,
}

/// Outcome of one eviction request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictionResult {
    /// The pod was evicted.
    Evicted,
    /// A PodDisruptionBudget refused (429): a normal outcome.
    Blocked,
    /// The pod was already gone (404).
    Gone,
    /// Any other failure.
    Error,
}

impl EvictionResult {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            EvictionResult::Evicted => "evicted",
            EvictionResult::Blocked => "blocked",
            EvictionResult::Gone => "gone",
            EvictionResult::Error => "error",
        }
    }
}

impl Metrics {
    /// Registers the families in `registry` (the service's prefixed sub-registry).
    pub fn register(registry: &mut Registry) -> Metrics {
        let metrics = Metrics {
            evictions: Family::default(),
            resizes: Family::default(),
            loops: Family::default(),
            // 10 ms … ~164 s.
            loop_duration: Histogram::new(exponential_buckets(0.01, 2.0, 15)),
            admission_status_valid: Gauge::default(),
            vpas: Gauge::default(),
        };
        registry.register(
            "evictions",
            "Eviction requests by result (evicted, blocked by a PodDisruptionBudget, gone, error)",
            metrics.evictions.clone(),
        );
        registry.register(
            "resizes",
            "In-place resize requests by result (requested, refused, infeasible, held_back, error)",
            metrics.resizes.clone(),
        );
        registry.register(
            "loops",
            "Updater loops by outcome (completed, admission_unhealthy, error)",
            metrics.loops.clone(),
        );
        registry.register(
            "loop_duration_seconds",
            "Time one updater loop took",
            metrics.loop_duration.clone(),
        );
        registry.register(
            "admission_status_valid",
            "1 when the admission webhook's status Lease was fresh at the last loop",
            metrics.admission_status_valid.clone(),
        );
        registry.register(
            "vpas",
            "VPAs in an acting update mode at the last loop",
            metrics.vpas.clone(),
        );
        metrics
    }

    /// Counts an eviction request.
    pub fn eviction(&self, result: EvictionResult) {
        self.evictions
            .get_or_create(&[("result", result.as_str())])
            .inc();
    }

    /// Counts a resize request (`requested`, `refused`, `infeasible`, `held_back`, `error`).
    pub fn resize(&self, result: &'static str) {
        self.resizes.get_or_create(&[("result", result)]).inc();
    }

    /// Counts a finished loop and records its duration in seconds.
    pub fn finished_loop(&self, outcome: &'static str, seconds: f64) {
        self.loops.get_or_create(&[("outcome", outcome)]).inc();
        self.loop_duration.observe(seconds);
    }

    /// Records whether the webhook status was valid.
    pub fn admission_status(&self, valid: bool) {
        self.admission_status_valid.set(i64::from(valid));
    }

    /// Records how many VPAs were in an acting mode.
    pub fn acting_vpas(&self, n: usize) {
        self.vpas.set(i64::try_from(n).unwrap_or(i64::MAX));
    }
}
