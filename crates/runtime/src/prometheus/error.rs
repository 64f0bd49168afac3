//! What can go wrong asking Prometheus, as a condition reason and a message that names the server
//! and the query.
//!
//! Four reasons, for status conditions and Events: [`PrometheusError::reason`] is
//! `PrometheusUnreachable` (no answer, a 5xx or 429 after the retries, TLS failed),
//! `PrometheusUnauthorized` (401/403, or credentials that could not be read),
//! `PrometheusQueryError` (the server rejected the query, or answered something that is not the
//! Prometheus HTTP API) and `PrometheusEmptyResult` (no series, or a value that is NaN or ±Inf
//! where one number was asked for). A bad flag value is [`PrometheusError::Config`].

/// `Result` with [`PrometheusError`].
pub type Result<T, E = PrometheusError> = std::result::Result<T, E>;

/// A failed Prometheus query. Every variant displays the server and, where one was sent, the
/// query, so that a condition message or a log line is actionable on its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrometheusError {
    /// The flags or configuration do not describe a usable server (bad address, unreadable CA
    /// file, conflicting credentials).
    #[error("prometheus configuration: {0}")]
    Config(String),

    /// No usable answer: connection refused or reset, TLS failure, timeout, or 5xx/429 after the
    /// retries.
    #[error("prometheus {server} unreachable for query {query:?}: {reason}")]
    Unreachable {
        /// The server's base URL.
        server: String,
        /// The PromQL sent.
        query: String,
        /// What the last attempt saw, e.g. `connection refused (3 attempts)`.
        reason: String,
    },

    /// The server refused the credentials (401 or 403), or they could not be read.
    #[error("prometheus {server} refused query {query:?}: {reason}")]
    Unauthorized {
        /// The server's base URL.
        server: String,
        /// The PromQL sent.
        query: String,
        /// The HTTP status, or why the credentials could not be read.
        reason: String,
    },

    /// The server rejected the query (`status: error`, e.g. `bad_data`), or its answer is not the
    /// Prometheus HTTP API.
    #[error("prometheus {server} rejected query {query:?}: {error_type}: {error}")]
    Query {
        /// The server's base URL.
        server: String,
        /// The PromQL sent.
        query: String,
        /// Prometheus' `errorType` (`bad_data`, `execution`, `timeout`, …), or `bad_response`
        /// when the body could not be read.
        error_type: String,
        /// Prometheus' `error`, or what was wrong with the body.
        error: String,
    },

    /// The query answered, but without the one number that was asked for.
    #[error("prometheus {server} query {query:?} returned {detail}")]
    EmptyResult {
        /// The server's base URL.
        server: String,
        /// The PromQL sent.
        query: String,
        /// `no series`, `NaN`, `+Inf`, `3 series` …
        detail: String,
    },
}

impl PrometheusError {
    /// The condition reason: `PrometheusUnreachable`, `PrometheusUnauthorized`,
    /// `PrometheusQueryError` or `PrometheusEmptyResult` (configuration errors count as
    /// unreachable: no query can be sent).
    pub fn reason(&self) -> &'static str {
        match self {
            PrometheusError::Config(_) | PrometheusError::Unreachable { .. } => {
                "PrometheusUnreachable"
            }
            PrometheusError::Unauthorized { .. } => "PrometheusUnauthorized",
            PrometheusError::Query { .. } => "PrometheusQueryError",
            PrometheusError::EmptyResult { .. } => "PrometheusEmptyResult",
        }
    }

    /// A short, bounded label for a `failures_total{error=…}` counter.
    pub fn metric_label(&self) -> &'static str {
        match self {
            PrometheusError::Config(_) => "prometheus_config",
            PrometheusError::Unreachable { .. } => "prometheus_unreachable",
            PrometheusError::Unauthorized { .. } => "prometheus_unauthorized",
            PrometheusError::Query { .. } => "prometheus_query",
            PrometheusError::EmptyResult { .. } => "prometheus_empty_result",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_server_and_the_query() {
        let err = PrometheusError::Unreachable {
            server: "https://prom:9090".into(),
            query: "up".into(),
            reason: "connection refused (3 attempts)".into(),
        };
        let text = err.to_string();
        assert!(text.contains("https://prom:9090"), "{text}");
        assert!(text.contains("\"up\""), "{text}");
        assert_eq!(err.reason(), "PrometheusUnreachable");
        let err = PrometheusError::EmptyResult {
            server: "s".into(),
            query: "q".into(),
            detail: "NaN".into(),
        };
        assert_eq!(err.reason(), "PrometheusEmptyResult");
        assert_eq!(err.metric_label(), "prometheus_empty_result");
    }
}
