//! The one error type of the hpa-plus service.
//!
//! A reconcile returns `Err` only for failures worth retrying with backoff (the API server or a
//! metrics API misbehaving, a write conflict). A bad object (an invalid spec, a target without a
//! selector) is not an error: it gets a condition and a Warning Event, and waits for a change.

/// Why a reconcile (or the service) failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call through `plimsoll-runtime` (scale subresource, discovery, admin), or the leader
    /// election ending before shutdown (`plimsoll_runtime::Error::ElectionEnded`).
    #[error(transparent)]
    Runtime(#[from] plimsoll_runtime::Error),
    /// A direct Kubernetes API call failed.
    /// Displayed with the API server's message, not the client's debug dump of its answer.
    #[error("{context}: {}", plimsoll_runtime::api_message(.source))]
    Kube {
        /// What was being done.
        context: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A value could not be encoded (should not happen).
    #[error("cannot encode {what}: {source}")]
    Encode {
        /// What was being encoded.
        what: &'static str,
        /// The serializer error.
        #[source]
        source: serde_json::Error,
    },
    /// A cached object could not be read back (should not happen: it is what the watch
    /// decoded, packed; see `cached`).
    #[error("cannot read back the cached object: {0}")]
    Unpack(String),
    /// The configuration is unusable.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The evaluation panicked (a bug): that object's failure, not the service's.
    #[error(transparent)]
    Panicked(#[from] plimsoll_runtime::contained::Panicked),
    /// A watch stream failed for good.
    #[error("watch of {0} ended")]
    WatchEnded(&'static str),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A short, bounded label for `reconcile_failures_total{error}`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Runtime(e) => e.metric_label(),
            Self::Kube { .. } => "kube",
            Self::Encode { .. } => "encode",
            Self::Unpack(_) => "unpack",
            Self::Config(_) => "config",
            Self::Panicked(_) => "panic",
            Self::WatchEnded(_) => "watch",
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
