//! Errors: `ApiError` is what a client sees (a `metav1.Status` body with an HTTP code);
//! `Error` is the crate's error for everything else (I/O, TLS, configuration).

use serde_json::{Value, json};

/// A Kubernetes API error answered as a `metav1.Status` JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code (404, 409, 410, 422, 429, …).
    pub code: u16,
    /// `Status.reason` (`NotFound`, `AlreadyExists`, `Conflict`, …).
    pub reason: &'static str,
    /// Human-readable message, phrased like kube-apiserver's.
    pub message: String,
    /// `Status.details` (name, group, kind, causes), when there is one.
    pub details: Option<Value>,
}

impl ApiError {
    /// Builds an error with no details.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// Adds `Status.details`.
    #[must_use]
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// 404: `<resource>.<group> "<name>" not found`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, plural)),
        )
        .with_details(json!({"name": name, "group": group, "kind": plural}))
    }

    /// 409: `<resource>.<group> "<name>" already exists`.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, plural)),
        )
        .with_details(json!({"name": name, "group": group, "kind": plural}))
    }

    /// 409 on a stale `metadata.resourceVersion`.
    pub fn conflict(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                qualified(group, plural)
            ),
        )
        .with_details(json!({"name": name, "group": group, "kind": plural}))
    }

    /// 422 Invalid.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    /// 400 `BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 405 `MethodNotAllowed`.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 410 Gone / reason Expired, as a watch or list from a compacted version gets it.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 500 `InternalError`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    /// The `metav1.Status` body.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        });
        // As metav1.Status's `omitempty`: an error kube-apiserver passes on unmapped (etcd's)
        // has no reason.
        if !self.reason.is_empty() {
            status["reason"] = self.reason.into();
        }
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

/// The crate's error type for everything that is not an API answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call made in-process failed.
    #[error("api: {0}")]
    Api(#[from] ApiError),
    /// Binding or serving sockets.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// Certificate generation or TLS configuration.
    #[error("tls: {0}")]
    Tls(String),
    /// Building a kube client.
    #[error("kube: {0}")]
    Kube(#[from] kube::Error),
    /// Building a kube client configuration.
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    /// Reading a scenario or load file.
    #[error("scenario: {0}")]
    Scenario(String),
    /// JSON (de)serialisation.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// A flag or setting that cannot work (the message names it).
    #[error("{0}")]
    Usage(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
