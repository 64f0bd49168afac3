//! The one error type of `plimsoll-runtime`.
//!
//! Every fallible function in this crate returns [`Result`]. Variants say *what* was being done
//! (which API, which metric, which object) so that a log line or an Event is actionable on its
//! own; [`Error::metric_label`] gives a short, bounded label for a `failures_total{error=…}`
//! counter.

use std::net::SocketAddr;

use crate::api_message::api_message;

/// `Result` with this crate's [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the shared runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kube client configuration could not be loaded (kubeconfig, context or in-cluster).
    #[error("cannot load Kubernetes client configuration: {message}")]
    Config {
        /// What was being loaded, e.g. `kubeconfig /path/to/file`.
        message: String,
        /// The underlying kube error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A request to the Kubernetes API failed. Displayed with the API server's message
    /// ([`mod@crate::api_message`]), never kube's debug dump of the answer.
    #[error("{context}: {}", api_message(.source))]
    Kube {
        /// What the request was for, e.g. `get scale of apps/v1 Deployment default/web`.
        context: String,
        /// The error returned by the kube client.
        #[source]
        source: kube::Error,
    },

    /// A request to one of the aggregated metrics APIs failed or returned something unusable.
    ///
    /// Displayed as `<api> <what> "<metric>" in <namespace>: <reason>`, e.g.
    /// `custom.metrics.k8s.io pods metric "requests_per_second" in default: 404 Not Found: …`.
    #[error("{api} {what} \"{metric}\" in {namespace}: {reason}")]
    MetricsApi {
        /// The API group, e.g. `metrics.k8s.io`.
        api: &'static str,
        /// What kind of metric was requested, e.g. `pods metric`, `object metric`.
        what: &'static str,
        /// The metric name (`cpu/memory` for resource metrics).
        metric: String,
        /// The namespace queried.
        namespace: String,
        /// Why it failed, including the HTTP status when the server answered.
        reason: String,
    },

    /// A kind could not be resolved to a resource, or does not have a scale subresource.
    #[error("cannot resolve {api_version} {kind}: {reason}")]
    Discovery {
        /// The `apiVersion` that was looked up.
        api_version: String,
        /// The `kind` that was looked up.
        kind: String,
        /// Why it failed.
        reason: String,
    },

    /// A target's name that cannot be one segment of a request's URL (`..`, `a/b`, `x?y`):
    /// refused before any request, as client-go refuses it (kube-rs puts a name into the path
    /// as it is).
    #[error("the target name {name} cannot be one segment of a URL: {reason}")]
    TargetName {
        /// The name, quoted and cut ([`plimsoll_core::quoted`]).
        name: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A label selector string could not be parsed.
    #[error("invalid label selector {input:?}: {reason}")]
    Selector {
        /// The selector as given.
        input: String,
        /// What is wrong with it, with the byte offset where it went wrong.
        reason: String,
    },

    /// A duration string (flag value or API field) could not be parsed.
    #[error("invalid duration {input:?}: {reason}")]
    Duration {
        /// The duration as given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A leader-election setting is inconsistent (e.g. renew deadline not below lease duration).
    #[error("invalid leader election settings: {0}")]
    LeaderConfig(String),

    /// `--kube-api-qps` / `--kube-api-burst` do not make a usable client-side rate limit.
    #[error("invalid client rate limit: {0}")]
    RateLimit(String),

    /// The admin HTTP listener could not be bound or failed while serving.
    #[error("admin server on {address}: {source}")]
    AdminServer {
        /// The address it tried to serve on.
        address: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },

    /// Tracing could not be initialised (bad filter, or a subscriber was already installed).
    #[error("cannot initialise logging: {0}")]
    Telemetry(String),

    /// The leader-election task ended while the service was still running (not on shutdown):
    /// the one error every service reports for a dead election.
    #[error("leader election stopped before shutdown")]
    ElectionEnded,

    /// The tokio runtime of a binary could not be built.
    #[error("cannot start the tokio runtime: {0}")]
    TokioRuntime(#[source] std::io::Error),
}

impl Error {
    /// A short, bounded label for this error, suitable as a Prometheus label value
    /// (e.g. `failures_total{error="kube"}`). Never contains user data.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Config { .. } => "config",
            Error::Kube { .. } => "kube",
            Error::MetricsApi { .. } => "metrics_api",
            Error::Discovery { .. } => "discovery",
            Error::TargetName { .. } => "target_name",
            Error::Selector { .. } => "selector",
            Error::Duration { .. } => "duration",
            Error::LeaderConfig(_) => "leader_config",
            Error::RateLimit(_) => "rate_limit",
            Error::AdminServer { .. } => "admin_server",
            Error::Telemetry(_) => "telemetry",
            Error::ElectionEnded => "leader_election",
            Error::TokioRuntime(_) => "tokio_runtime",
        }
    }

    /// Wraps a kube error with a description of the request that failed.
    pub fn kube(context: impl Into<String>, source: kube::Error) -> Self {
        Error::Kube {
            context: context.into(),
            source,
        }
    }

    /// The HTTP status code the API server answered with, when this is an API error.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Error::Kube {
                source: kube::Error::Api(status),
                ..
            } => Some(status.code),
            _ => None,
        }
    }

    /// The message a user should read in a condition or an Event: for a failed request, the API
    /// server's own message (`deployments.apps "web" not found`, see
    /// [`mod@crate::api_message`]) without the request's description; for everything else, this
    /// error's `Display`.
    pub fn api_message(&self) -> String {
        match self {
            Error::Kube { source, .. } => api_message(source),
            other => other.to_string(),
        }
    }

    /// True when the API server answered 404 Not Found.
    pub fn is_not_found(&self) -> bool {
        self.status_code() == Some(404)
    }

    /// True when the API server answered 409 Conflict (stale resourceVersion or already exists).
    pub fn is_conflict(&self) -> bool {
        self.status_code() == Some(409)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_api_error_names_api_metric_and_namespace() {
        let err = Error::MetricsApi {
            api: "custom.metrics.k8s.io",
            what: "pods metric",
            metric: "requests_per_second".into(),
            namespace: "default".into(),
            reason: "404 Not Found: the server could not find the metric".into(),
        };
        assert_eq!(
            err.to_string(),
            "custom.metrics.k8s.io pods metric \"requests_per_second\" in default: \
             404 Not Found: the server could not find the metric"
        );
        assert_eq!(err.metric_label(), "metrics_api");
    }

    #[test]
    fn status_helpers_read_the_api_status() {
        let status = kube::core::Status::failure("lease changed", "Conflict").with_code(409);
        let err = Error::kube("update lease", kube::Error::Api(status.boxed()));
        assert!(err.is_conflict());
        assert!(!err.is_not_found());
        assert_eq!(err.metric_label(), "kube");
        assert_eq!(err.api_message(), "lease changed");
        assert_eq!(err.to_string(), "update lease: lease changed");
        let other = Error::LeaderConfig("x".into());
        assert_eq!(other.api_message(), other.to_string());
        assert_eq!(other.status_code(), None);
    }
}
