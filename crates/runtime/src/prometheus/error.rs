//! What can go wrong asking Prometheus: a condition reason, a message in Plimsoll's own words,
//! and a bounded detail for the operator's logs.
//!
//! The message ([`std::fmt::Display`]) is what namespace users read in conditions, Events and
//! status, and it may be shown to whoever wrote an autoscaler that names the server. It is
//! therefore made of Plimsoll's classification only: refused, timed out, connection failed,
//! TLS failed, an HTTP status class, too large, not allowed, unauthorized, or a rejected query
//! with Prometheus' `errorType` when it is one of the documented ones (else `unknown`). It never
//! carries bytes of a remote body, the server's `error` text, or an OS or TLS error string:
//! otherwise a server (or anything answering at an address a tenant names) could write into
//! other people's objects, and the controller would be an oracle for what answers where.
//! [`PrometheusError::detail`] keeps what was seen, cut to [`MAX_DETAIL`] bytes, for logs.
//!
//! Reasons ([`PrometheusError::reason`]): `PrometheusUnreachable` (no answer, a 5xx or 429
//! after the retries, TLS failed), `PrometheusUnauthorized` (401/403, or credentials that could
//! not be read), `PrometheusQueryError` (the server rejected the query, or answered something
//! that is not the Prometheus HTTP API), `PrometheusEmptyResult` (no series, or a value that is
//! NaN or ±Inf where one number was asked for), `PrometheusResponseTooLarge` (the answer is
//! larger than `--prometheus-max-response-bytes`), `PrometheusServerNotAllowed` (the address is
//! not under `--prometheus-allowed-servers`; nothing was sent) and `PrometheusCanceled` (the
//! process is shutting down). A server whose circuit breaker is open, or that has as many
//! queries in flight as it may ([`super::breaker`]), is `PrometheusUnreachable` too, and
//! nothing is sent to it. A bad flag value is [`PrometheusError::Config`].

use std::fmt;

/// `Result` with [`PrometheusError`].
pub type Result<T, E = PrometheusError> = std::result::Result<T, E>;

/// The most bytes of [`PrometheusError::detail`] (a log field, never a message users read).
pub const MAX_DETAIL: usize = 256;

/// The condition reason of an address outside `--prometheus-allowed-servers`.
pub const SERVER_NOT_ALLOWED: &str =
    plimsoll_core::horizontal::proposals::PROMETHEUS_SERVER_NOT_ALLOWED;

/// Why no usable answer came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreachable {
    /// The connection was refused.
    Refused,
    /// No answer before the query's deadline. (How long that was goes to the detail: the
    /// message stays the same from one evaluation to the next, so a status is not rewritten.)
    TimedOut,
    /// The connection failed otherwise (reset, name resolution, broken HTTP framing).
    Connection,
    /// The TLS handshake failed (certificate, name, protocol).
    Tls,
    /// A 5xx answer after the attempts.
    ServerError,
    /// A 429 answer after the attempts.
    Throttled,
}

impl fmt::Display for Unreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreachable::Refused => f.write_str("connection refused"),
            Unreachable::TimedOut => f.write_str("timed out"),
            Unreachable::Connection => f.write_str("connection failed"),
            Unreachable::Tls => f.write_str("TLS handshake failed"),
            Unreachable::ServerError => f.write_str("server error (HTTP 5xx)"),
            Unreachable::Throttled => f.write_str("throttled (HTTP 429)"),
        }
    }
}

/// The `errorType`s the Prometheus HTTP API documents; anything else reads as `unknown`.
pub const ERROR_TYPES: [&str; 8] = [
    "bad_data",
    "execution",
    "timeout",
    "canceled",
    "internal",
    "unavailable",
    "not_found",
    "not_acceptable",
];

/// Prometheus' `errorType` as a message may quote it: one of [`ERROR_TYPES`], else `unknown`.
pub fn error_type(remote: &str) -> &'static str {
    ERROR_TYPES
        .iter()
        .find(|t| **t == remote)
        .copied()
        .unwrap_or("unknown")
}

/// Why an answer did not give what was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// `status: error` with this `errorType` (from [`error_type`]).
    Rejected(&'static str),
    /// Not the Prometheus HTTP API (not JSON, no `data`, a value that is no number), with the
    /// HTTP status class (`2xx`, `4xx`).
    NotTheApi(&'static str),
    /// A vector of this many series where one number was asked for.
    MultipleSeries(usize),
    /// Another result type than asked for.
    WrongType {
        /// What came.
        got: &'static str,
        /// What was asked for.
        wanted: &'static str,
    },
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::Rejected(error_type) => write!(f, "{error_type}"),
            Rejection::NotTheApi(class) => write!(
                f,
                "the answer (HTTP {class}) is not the Prometheus HTTP API"
            ),
            Rejection::MultipleSeries(n) => write!(f, "{n} series where one number was expected"),
            Rejection::WrongType { got, wanted } => {
                write!(f, "a {got} where a {wanted} was expected")
            }
        }
    }
}

/// A failed Prometheus query. The message names the server and, where one was sent, the query
/// (both written by whoever configured them), and classifies the failure in Plimsoll's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrometheusError {
    /// The flags or configuration do not describe a usable server (bad address, unreadable CA
    /// file, conflicting credentials).
    #[error("prometheus configuration: {0}")]
    Config(String),

    /// The address is not under `--prometheus-allowed-servers`: nothing was sent.
    #[error(
        "prometheus server {server} is not allowed (--prometheus-allowed-servers); nothing was sent"
    )]
    NotAllowed {
        /// The address as written.
        server: String,
    },

    /// No usable answer.
    #[error("prometheus {server} unreachable for query {query:?}: {cause} ({})", attempts_text(*.attempts))]
    Unreachable {
        /// The server's base URL.
        server: String,
        /// The PromQL sent.
        query: String,
        /// What the last attempt came to.
        cause: Unreachable,
        /// Attempts made.
        attempts: u32,
        /// What the last attempt saw (for logs).
        detail: String,
    },

    /// The server refused the credentials (401 or 403), or they could not be read.
    #[error("prometheus {server} refused query {query:?}: {}", if *.unreadable { "the credentials could not be read" } else { "unauthorized (HTTP 401/403)" })]
    Unauthorized {
        /// The server's base URL.
        server: String,
        /// The PromQL sent.
        query: String,
        /// The credentials could not be read (else the server refused them).
        unreadable: bool,
        /// The HTTP status, or why the credentials could not be read (for logs).
        detail: String,
    },

    /// The answer is larger than `--prometheus-max-response-bytes`; it was not read further.
    #[error("prometheus {server} answer to query {query:?} is too large (over {limit} bytes)")]
    TooLarge {
        /// The server's base URL.
        server: String,
        /// The PromQL sent.
        query: String,
        /// The cap, bytes.
        limit: u64,
    },

    /// The server rejected the query, or its answer is not the Prometheus HTTP API.
    #[error("prometheus {server} rejected query {query:?}: {rejection}")]
    Query {
        /// The server's base URL.
        server: String,
        /// The PromQL sent.
        query: String,
        /// Plimsoll's classification.
        rejection: Rejection,
        /// Prometheus' `errorType` and `error`, or what was wrong with the body (for logs).
        detail: String,
    },

    /// The query answered, but without the one number that was asked for.
    #[error("prometheus {server} query {query:?} returned {detail}")]
    EmptyResult {
        /// The server's base URL.
        server: String,
        /// The PromQL sent.
        query: String,
        /// `no series`, `NaN`, `+Inf` … (Plimsoll's words).
        detail: String,
    },

    /// The query was abandoned because the process is shutting down.
    #[error("prometheus {server}: query abandoned, shutting down")]
    Canceled {
        /// The server's base URL.
        server: String,
    },

    /// Not sent: the server did not answer several queries in a row, and its circuit breaker
    /// is open ([`super::breaker`]).
    #[error("prometheus {server} unresponsive; not queried until {until:.0}")]
    Unresponsive {
        /// The server's base URL.
        server: String,
        /// When the breaker lets a query probe the server again (whole seconds).
        until: jiff::Timestamp,
    },

    /// Not sent: `limit` queries to the server are in flight already.
    #[error("prometheus {server} busy: {limit} queries to it in flight already; not sent")]
    Busy {
        /// The server's base URL.
        server: String,
        /// The cap on queries in flight to one server.
        limit: usize,
    },
}

/// `1 attempt`, `3 attempts`.
fn attempts_text(attempts: u32) -> String {
    if attempts == 1 {
        "1 attempt".to_owned()
    } else {
        format!("{attempts} attempts")
    }
}

impl PrometheusError {
    /// The condition reason: `PrometheusUnreachable`, `PrometheusUnauthorized`,
    /// `PrometheusQueryError`, `PrometheusEmptyResult`, `PrometheusResponseTooLarge`,
    /// `PrometheusServerNotAllowed` or `PrometheusCanceled` (configuration errors count as
    /// unreachable: no query can be sent; so do a server's open breaker and its full cap).
    pub fn reason(&self) -> &'static str {
        match self {
            PrometheusError::Config(_)
            | PrometheusError::Unreachable { .. }
            | PrometheusError::Unresponsive { .. }
            | PrometheusError::Busy { .. } => "PrometheusUnreachable",
            PrometheusError::NotAllowed { .. } => SERVER_NOT_ALLOWED,
            PrometheusError::Unauthorized { .. } => "PrometheusUnauthorized",
            PrometheusError::TooLarge { .. } => "PrometheusResponseTooLarge",
            PrometheusError::Query { .. } => "PrometheusQueryError",
            PrometheusError::EmptyResult { .. } => "PrometheusEmptyResult",
            PrometheusError::Canceled { .. } => "PrometheusCanceled",
        }
    }

    /// A short, bounded label for a `failures_total{error=…}` counter.
    pub fn metric_label(&self) -> &'static str {
        match self {
            PrometheusError::Config(_) => "prometheus_config",
            PrometheusError::NotAllowed { .. } => "prometheus_not_allowed",
            PrometheusError::Unreachable { .. } => "prometheus_unreachable",
            PrometheusError::Unauthorized { .. } => "prometheus_unauthorized",
            PrometheusError::TooLarge { .. } => "prometheus_too_large",
            PrometheusError::Query { .. } => "prometheus_query",
            PrometheusError::EmptyResult { .. } => "prometheus_empty_result",
            PrometheusError::Canceled { .. } => "prometheus_canceled",
            PrometheusError::Unresponsive { .. } => "prometheus_unresponsive",
            PrometheusError::Busy { .. } => "prometheus_busy",
        }
    }

    /// What was seen beyond the classification (the server's `errorType` and `error`, the start
    /// of a body, the OS or TLS error), at most [`MAX_DETAIL`] bytes: for the operator's logs
    /// only, never for a condition, an Event or status. Empty when there is nothing more.
    pub fn detail(&self) -> &str {
        match self {
            PrometheusError::Unreachable { detail, .. }
            | PrometheusError::Unauthorized { detail, .. }
            | PrometheusError::Query { detail, .. } => detail,
            _ => "",
        }
    }
}

/// `text` cut to at most [`MAX_DETAIL`] bytes (on a character boundary), with `…` when cut.
pub fn bounded(text: &str) -> String {
    plimsoll_core::printable::cut(text, MAX_DETAIL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_server_and_the_query() {
        let err = PrometheusError::Unreachable {
            server: "https://prom:9090".into(),
            query: "up".into(),
            cause: Unreachable::Refused,
            attempts: 3,
            detail: "Connection refused (os error 111)".into(),
        };
        let text = err.to_string();
        assert!(text.contains("https://prom:9090"), "{text}");
        assert!(text.contains("\"up\""), "{text}");
        assert!(text.contains("connection refused (3 attempts)"), "{text}");
        assert!(!text.contains("os error"), "{text}");
        assert_eq!(err.detail(), "Connection refused (os error 111)");
        assert_eq!(err.reason(), "PrometheusUnreachable");
        let err = PrometheusError::EmptyResult {
            server: "s".into(),
            query: "q".into(),
            detail: "NaN".into(),
        };
        assert_eq!(err.reason(), "PrometheusEmptyResult");
        assert_eq!(err.metric_label(), "prometheus_empty_result");
    }

    #[test]
    fn only_documented_error_types_are_quoted() {
        assert_eq!(error_type("bad_data"), "bad_data");
        assert_eq!(error_type("not_acceptable"), "not_acceptable");
        assert_eq!(error_type("<script>alert(1)</script>"), "unknown");
        assert_eq!(error_type(""), "unknown");
        let err = PrometheusError::Query {
            server: "s".into(),
            query: "q".into(),
            rejection: Rejection::Rejected(error_type("pwned: visit evil.example")),
            detail: bounded("pwned: visit evil.example: the remote text"),
        };
        assert!(!err.to_string().contains("evil"), "{err}");
        assert!(err.to_string().ends_with(": unknown"), "{err}");
        assert!(err.detail().contains("evil"));
    }

    #[test]
    fn details_are_bounded() {
        let long = "é".repeat(1000);
        let cut = bounded(&long);
        assert!(cut.len() <= MAX_DETAIL + '…'.len_utf8(), "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert_eq!(bounded("short"), "short");
    }

    #[test]
    fn refusals_of_the_breaker_and_the_cap_read_as_unreachable() {
        let err = PrometheusError::Unresponsive {
            server: "http://team:9090".into(),
            until: jiff::Timestamp::from_second(1_700_000_030).unwrap(),
        };
        assert_eq!(err.reason(), "PrometheusUnreachable");
        assert_eq!(
            err.to_string(),
            "prometheus http://team:9090 unresponsive; not queried until 2023-11-14T22:13:50Z"
        );
        assert_eq!(err.metric_label(), "prometheus_unresponsive");
        let err = PrometheusError::Busy {
            server: "http://team:9090".into(),
            limit: 8,
        };
        assert_eq!(err.reason(), "PrometheusUnreachable");
        assert!(err.to_string().contains("busy: 8 queries"), "{err}");
        assert_eq!(err.detail(), "");
    }

    #[test]
    fn not_allowed_has_its_own_reason() {
        let err = PrometheusError::NotAllowed {
            server: "http://10.0.0.1:22".into(),
        };
        assert_eq!(err.reason(), "PrometheusServerNotAllowed");
        assert!(err.to_string().contains("nothing was sent"), "{err}");
    }
}
