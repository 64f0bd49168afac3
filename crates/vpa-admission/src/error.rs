//! The crate's error type.

/// Everything that can go wrong in vpa-admission outside the request path (the request path
/// never fails: it admits unchanged with a warning).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Certificate or key material that does not load.
    #[error("TLS: {0}")]
    Tls(String),
    /// Generating the self-signed CA or serving certificate.
    #[error("generating certificates: {0}")]
    CertGen(String),
    /// A file or socket operation.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// An API call.
    /// Displayed with the API server's message, not the client's debug dump of its answer.
    #[error("{context}: {}", plimsoll_runtime::api_message(.source))]
    Kube {
        /// What was being done.
        context: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Invalid configuration.
    #[error("configuration: {0}")]
    Config(String),
    /// A runtime component (admin listener, client).
    #[error(transparent)]
    Runtime(#[from] plimsoll_runtime::error::Error),
    /// A background task ended unexpectedly.
    #[error("{0}")]
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

    /// Short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Tls(_) => "tls",
            Error::CertGen(_) => "cert_gen",
            Error::Io { .. } => "io",
            Error::Kube { .. } => "kube",
            Error::Config(_) => "config",
            Error::Runtime(_) => "runtime",
            Error::Task(_) => "task",
        }
    }

    /// The HTTP status of an API error, if any.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Error::Kube {
                source: kube::Error::Api(status),
                ..
            } => Some(status.code),
            _ => None,
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
