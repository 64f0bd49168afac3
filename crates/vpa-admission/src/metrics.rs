//! Prometheus metrics, exported as `plimsoll_vpa_admission_<name>` on the admin listener.
//!
//! * `requests_total{resource, result}` — every AdmissionReview answered. `resource` is `pod`,
//!   `vpa` or `other`; `result` is one of [`Outcome::label`].
//! * `request_duration_seconds{resource}` — time from a decoded body to an encoded answer
//!   (buckets 50 µs … ~1.6 s).
//! * `patches_applied_total` — pods answered with a patch that changes resources.
//! * `bad_requests_total` — bodies that were not an AdmissionReview (HTTP 400).
//! * `status_lease_renewals_total{result}` — renewals of the status Lease (`ok`, `error`).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// What the webhook answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A pod got new requests/limits.
    Patched,
    /// A pod of a VPA got only the observed-containers annotation (mode Off, no recommendation).
    Annotated,
    /// A pod no VPA controls.
    NoVpa,
    /// Caches not synced yet: admitted unchanged with a warning.
    ColdCache,
    /// Something failed inside the webhook: admitted unchanged with a warning.
    Error,
    /// A valid VPA.
    Valid,
    /// An invalid VPA, denied.
    Denied,
    /// Any other kind or operation, admitted unchanged.
    Ignored,
}

impl Outcome {
    /// The `result` label.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Patched => "patched",
            Outcome::Annotated => "annotated",
            Outcome::NoVpa => "no_vpa",
            Outcome::ColdCache => "cold_cache",
            Outcome::Error => "error",
            Outcome::Valid => "valid",
            Outcome::Denied => "denied",
            Outcome::Ignored => "ignored",
        }
    }
}

type Labels2 = [(&'static str, &'static str); 2];
type Labels1 = [(&'static str, &'static str); 1];

/// The webhook's metric handles (cheap to clone).
#[derive(Clone, Debug)]
pub struct Metrics {
    requests: Family<Labels2, Counter>,
    duration: Family<Labels1, Histogram>,
    patches: Counter,
    bad_requests: Counter,
    lease_renewals: Family<Labels1, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: Family::default(),
            duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
            }),
            patches: Counter::default(),
            bad_requests: Counter::default(),
            lease_renewals: Family::default(),
        }
    }
}

impl Metrics {
    /// Creates the metrics and registers them in `registry` (the service sub-registry).
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics::default();
        registry.register(
            "requests",
            "AdmissionReviews answered, by resource and result",
            m.requests.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time to answer one AdmissionReview",
            m.duration.clone(),
        );
        registry.register(
            "patches_applied",
            "Pods admitted with changed resources",
            m.patches.clone(),
        );
        registry.register(
            "bad_requests",
            "Requests that were not an AdmissionReview (HTTP 400)",
            m.bad_requests.clone(),
        );
        registry.register(
            "status_lease_renewals",
            "Renewals of the admission status Lease the updater checks, by result",
            m.lease_renewals.clone(),
        );
        m
    }

    /// Records one answered review.
    pub fn answered(&self, resource: &'static str, outcome: Outcome, seconds: f64) {
        self.requests
            .get_or_create(&[("resource", resource), ("result", outcome.label())])
            .inc();
        self.duration
            .get_or_create(&[("resource", resource)])
            .observe(seconds);
        if outcome == Outcome::Patched {
            self.patches.inc();
        }
    }

    /// Records a body that was not an AdmissionReview.
    pub fn bad_request(&self) {
        self.bad_requests.inc();
    }

    /// Records a status Lease renewal.
    pub fn lease_renewal(&self, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.lease_renewals
            .get_or_create(&[("result", result)])
            .inc();
    }

    /// How many reviews got `outcome` (tests and the benchmark read it).
    pub fn count(&self, resource: &'static str, outcome: Outcome) -> u64 {
        self.requests
            .get_or_create(&[("resource", resource), ("result", outcome.label())])
            .get()
    }
}
