//! The controller's error type.
//!
//! Transient failures (API errors, a target that is not there yet) make the reconcile return an
//! error, which backs off and retries; a bad object (a schedule that does not parse) is not an
//! error here: it gets a `Failed` condition and a Warning Event instead.

/// What went wrong while reconciling a `CronHorizontalPodAutoscaler`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed; `context` says what was being done.
    /// Displayed with the API server's message, not the client's debug dump of its answer.
    #[error("{context}: {}", plimsoll_runtime::api_message(.source))]
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
    /// The evaluation panicked (a bug): that object's failure, not the service's.
    #[error(transparent)]
    Panicked(#[from] plimsoll_runtime::contained::Panicked),
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
            Self::Panicked(_) => "panic",
        }
    }

    /// True when trying the same request again may succeed: the API server answered 5xx, 429
    /// (throttled) or 408, or the request did not get an answer (connection error, timeout).
    /// A 404, 403 or 422 (and a bad object) is permanent.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Kube { source, .. }
            | Self::Runtime(plimsoll_runtime::Error::Kube { source, .. }) => {
                kube_is_transient(source)
            }
            _ => false,
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

/// The rule of [`Error::is_transient`] for one client error.
fn kube_is_transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status_is_transient(status.code),
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        _ => false,
    }
}

/// True for the HTTP statuses worth retrying: 5xx, 429 Too Many Requests, 408 Request Timeout.
fn status_is_transient(code: u16) -> bool {
    code >= 500 || code == 429 || code == 408
}

/// Result alias for the controller.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> Error {
        let status = kube::core::Status::failure("injected", "Injected").with_code(code);
        Error::kube("patch", kube::Error::Api(Box::new(status)))
    }

    #[test]
    fn server_errors_throttling_and_timeouts_are_transient() {
        for code in [500, 502, 503, 504, 429, 408] {
            assert!(api(code).is_transient(), "{code}");
        }
        let scale = Error::Runtime(plimsoll_runtime::Error::kube(
            "patch scale",
            kube::Error::Api(Box::new(
                kube::core::Status::failure("injected", "Injected").with_code(503),
            )),
        ));
        assert!(scale.is_transient());
    }

    #[test]
    fn client_errors_and_bad_objects_are_permanent() {
        for code in [400, 403, 404, 409, 422] {
            assert!(!api(code).is_transient(), "{code}");
        }
        assert!(!Error::MissingField("spec.scaleTargetRef".into()).is_transient());
    }

    #[test]
    fn api_errors_read_as_the_servers_message() {
        // What lands in a job's condition and Event: what was done, then the server's words.
        assert_eq!(api(404).to_string(), "patch: injected");
        let scale = Error::Runtime(plimsoll_runtime::Error::kube(
            "patch scale of apps/v1 Deployment ns/web",
            kube::Error::Api(Box::new(
                kube::core::Status::failure(r#"deployments.apps "web" not found"#, "NotFound")
                    .with_code(404),
            )),
        ));
        assert_eq!(
            scale.to_string(),
            r#"patch scale of apps/v1 Deployment ns/web: deployments.apps "web" not found"#
        );
    }
}
