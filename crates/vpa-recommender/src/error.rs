//! Errors of the vpa-recommender service.

/// Why a part of the recommender failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the Kubernetes API failed.
    /// Displayed with the API server's message, not the client's debug dump of its answer.
    #[error("{context}: {}", plimsoll_runtime::api_message(.source))]
    Kube {
        /// What the request was for.
        context: String,
        /// The kube error.
        #[source]
        source: kube::Error,
    },
    /// The shared runtime failed (client, admin listener, metrics API), or the leader election
    /// ended before shutdown (`plimsoll_runtime::Error::ElectionEnded`).
    #[error(transparent)]
    Runtime(#[from] plimsoll_runtime::Error),
    /// The Prometheus history server failed; the message starts with the reason
    /// (`PrometheusUnauthorized`, …), names the server and the query, and classifies the
    /// failure ([`Error::detail`] has what the server said, for the log).
    #[error("{reason}: {0}", reason = .0.reason())]
    Prometheus(#[from] plimsoll_runtime::prometheus::PrometheusError),
    /// A watch cache stopped before it was ever filled.
    #[error("the {0} watch stopped before its first list")]
    WatchStopped(&'static str),
}

impl Error {
    /// What a Prometheus failure saw beyond its classification (bounded; for the log), else
    /// empty.
    pub fn detail(&self) -> &str {
        match self {
            Error::Prometheus(e) => e.detail(),
            _ => "",
        }
    }

    /// Low-cardinality label for the errors metric.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "kube",
            Error::Runtime(_) => "runtime",
            Error::Prometheus(_) => "prometheus",
            Error::WatchStopped(_) => "watch",
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
