//! The controller's error type.
//!
//! Transient failures (API errors, a target that is not there yet) make the reconcile return an
//! error, which backs off and retries; a bad object (a schedule that does not parse) is not an
//! error here: it gets a `Failed` condition and a Warning Event instead.

/// What went wrong while reconciling a `CronHorizontalPodAutoscaler`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed; `context` says what was being done.
    #[error("{context}: {source}")]
    Kube {
        /// What was being done (`patch status of ns/name`).
        context: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The shared runtime (scale subresource, discovery, admin server) failed, or the leader
    /// election ended before shutdown (`plimsoll_runtime::Error::ElectionEnded`).
    #[error(transparent)]
    Runtime(#[from] plimsoll_runtime::Error),
    /// The object or its target lacks a field the controller needs.
    #[error("{0}")]
    MissingField(String),
    /// No single autoscaler targets an annotated workload (none, or several).
    #[error(transparent)]
    Autoscaler(#[from] plimsoll_core::schedule::target::ChoiceError),
    /// A JSON (de)serialisation of an API object failed.
    #[error("{context}: {source}")]
    Json {
        /// What was being (de)serialised.
        context: String,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
}

impl Error {
    /// A short, bounded label for `reconcile_failures_total{error=…}`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Kube { .. } => "kube",
            Self::Runtime(e) => e.metric_label(),
            Self::MissingField(_) => "missing_field",
            Self::Autoscaler(e) => e.metric_label(),
            Self::Json { .. } => "json",
        }
    }

    /// Wraps a client error with what was being done.
    pub fn kube(context: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube {
            context: context.into(),
            source,
        }
    }
}

/// Result alias for the controller.
pub type Result<T, E = Error> = std::result::Result<T, E>;
