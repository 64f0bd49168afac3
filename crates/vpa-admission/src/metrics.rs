//! Prometheus metrics, exported as `plimsoll_vpa_admission_<name>` on the admin listener.
//!
//! * `requests_total{resource, result}` — every AdmissionReview answered. `resource` is `pod`,
//!   `vpa` or `other`; `result` is one of [`Outcome::label`].
//! * `request_duration_seconds{resource}` — time from a decoded body to an encoded answer
//!   (buckets 50 µs … ~1.6 s).
//! * `patches_applied_total` — pods answered with a patch that changes resources.
//! * `bad_requests_total` — bodies that were not an AdmissionReview (HTTP 400).
//! * `status_lease_renewals_total{result}` — renewals of the status Lease (`ok`, `error`).
//! * `certificate_checks_total{result}` — `--self-signed` checks of the shared Secret (`ok`,
//!   `error`).
//! * `certificate_expiry_timestamp_seconds` — `notAfter` of the serving certificate being
//!   served (Unix seconds), from `--self-signed` or certificate files alike; alert when it comes
//!   near.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
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
    certificate_checks: Family<Labels1, Counter>,
    certificate_expiry: Gauge,
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
            certificate_checks: Family::default(),
            certificate_expiry: Gauge::default(),
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
        registry.register(
            "certificate_checks",
            "Checks of the shared --self-signed certificate Secret, by result",
            m.certificate_checks.clone(),
        );
        registry.register(
            "certificate_expiry_timestamp_seconds",
            "Expiry (Unix seconds) of the --self-signed serving certificate being served",
            m.certificate_expiry.clone(),
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

    /// Records a `--self-signed` certificate check and, when it succeeded, the expiry of the
    /// certificate served afterwards.
    pub fn certificate_check(&self, served_expiry: Option<std::time::SystemTime>, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.certificate_checks
            .get_or_create(&[("result", result)])
            .inc();
        if let Some(t) = served_expiry {
            self.served_certificate(t);
        }
    }

    /// Records the expiry of the certificate being served.
    pub fn served_certificate(&self, not_after: std::time::SystemTime) {
        if let Some(secs) = not_after
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .and_then(|d| i64::try_from(d.as_secs()).ok())
        {
            self.certificate_expiry.set(secs);
        }
    }

    /// How many reviews got `outcome` (tests and the benchmark read it).
    pub fn count(&self, resource: &'static str, outcome: Outcome) -> u64 {
        self.requests
            .get_or_create(&[("resource", resource), ("result", outcome.label())])
            .get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_checks_and_expiry_are_exported() {
        let mut registry = Registry::default();
        let m = Metrics::register(&mut registry);
        let expiry = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_900_000_000);
        m.certificate_check(Some(expiry), true);
        m.certificate_check(None, false);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("certificate_checks_total{result=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("certificate_checks_total{result=\"error\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("certificate_expiry_timestamp_seconds 1900000000"),
            "{text}"
        );
    }
}
