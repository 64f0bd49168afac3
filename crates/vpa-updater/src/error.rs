//! Errors of the updater service.

/// What can go wrong in the service.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Shared plumbing (client, admin listener, leader election setup), or the leader election
    /// ending before shutdown (`plimsoll_runtime::Error::ElectionEnded`).
    #[error(transparent)]
    Runtime(#[from] plimsoll_runtime::Error),
    /// A Kubernetes API call failed.
    /// Displayed with the API server's message, not the client's debug dump of its answer.
    #[error("{context}: {}", plimsoll_runtime::api_message(.source))]
    Kube {
        /// What was being done.
        context: String,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// A loop was asked to run before every watch had listed once.
    #[error("the watch caches have not listed everything yet")]
    NotSynced,
    /// A background task panicked or was cancelled.
    #[error("task failed: {0}")]
    Task(String),
}

impl Error {
    /// Wraps a kube error with what was being done.
    pub fn kube(context: impl Into<String>, source: kube::Error) -> Error {
        Error::Kube {
            context: context.into(),
            source,
        }
    }

    /// A short label for the `error` metric label and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Runtime(e) => e.metric_label(),
            Error::Kube { .. } => "kube",
            Error::NotSynced => "not_synced",
            Error::Task(_) => "task",
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
