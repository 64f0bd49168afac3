//! What a user reads when a request to the API server failed.
//!
//! `kube::Error`'s own `Display` for an API answer is `ApiError: <message>: <reason> (Status {
//! status: Some(Failure), code: 404, … })`: a Rust debug dump no `kubectl` user has seen. Every
//! condition message, Event note and log line that carries a failed request goes through
//! [`api_message`] instead, so it reads as the API server's own words
//! (`deployments.apps "web" not found`), the same text `kubectl` prints for the same failure.
//!
//! The rules:
//! - the server answered with a `Status`: its `message`, verbatim (it names the resource and the
//!   object already);
//! - the server answered with something else (a proxy's plain-text or HTML page): the HTTP
//!   status, plus the body when it is one short line of text;
//! - the request got no answer (connection refused, TLS, timeout): one sentence with the root
//!   cause of the failure, never the chain of wrappers' names;
//! - anything else: the client's own `Display`, which carries no debug formatting.

use std::error::Error as StdError;

use kube::core::Status;
use kube::runtime::watcher;

/// kube's `reason` for an error body that was not a `Status`; its `message` is the raw body.
const UNPARSED_BODY: &str = "Failed to parse error data";

/// Longest raw (non-`Status`) error body worth quoting; longer bodies are pages, not messages.
const MAX_QUOTED_BODY: usize = 200;

/// The message a user should read for a failed request.
pub fn api_message(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => status_message(status),
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            format!("cannot reach the API server: {}", root_cause(err))
        }
        kube::Error::ReadEvents(_) => {
            format!(
                "the API server's watch stream broke off: {}",
                root_cause(err)
            )
        }
        kube::Error::SerdeError(e) => format!("the API server's answer does not decode: {e}"),
        other => other.to_string(),
    }
}

/// The message a user should read for a failed watch (list, watch start, or a watch event of
/// type `ERROR`).
pub fn watch_message(err: &watcher::Error) -> String {
    match err {
        watcher::Error::InitialListFailed(e) => format!("list failed: {}", api_message(e)),
        watcher::Error::WatchStartFailed(e) => format!("watch failed to start: {}", api_message(e)),
        watcher::Error::WatchFailed(e) => format!("watch failed: {}", api_message(e)),
        watcher::Error::WatchError(status) => format!("watch failed: {}", status_message(status)),
        watcher::Error::NoResourceVersion => err.to_string(),
    }
}

/// The server's own words for an error answer.
fn status_message(status: &Status) -> String {
    let phrase = http::StatusCode::from_u16(status.code)
        .ok()
        .and_then(|c| c.canonical_reason());
    let answered = match phrase {
        Some(phrase) => format!("the API server answered {} {phrase}", status.code),
        None => format!("the API server answered {}", status.code),
    };
    if status.reason == UNPARSED_BODY {
        let body = status.message.trim();
        let quotable =
            !body.is_empty() && body.len() <= MAX_QUOTED_BODY && !body.contains(['\n', '<']);
        return if quotable {
            format!("{answered}: {body}")
        } else {
            answered
        };
    }
    if !status.message.is_empty() {
        return status.message.clone();
    }
    if status.reason.is_empty() {
        answered
    } else {
        format!("{answered} ({})", status.reason)
    }
}

/// The innermost error of `err`'s source chain: the one that says what actually happened
/// (`Connection refused (os error 111)`), where the outer ones only name their layer.
fn root_cause(err: &(dyn StdError + 'static)) -> String {
    let mut current = err;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: Status) -> kube::Error {
        kube::Error::Api(status.boxed())
    }

    #[test]
    fn a_not_found_status_reads_as_the_servers_message() {
        let status =
            Status::failure(r#"deployments.apps "web" not found"#, "NotFound").with_code(404);
        let message = api_message(&api(status));
        assert_eq!(message, r#"deployments.apps "web" not found"#);
    }

    #[test]
    fn a_conflict_reads_as_the_servers_message() {
        let text = r#"Operation cannot be fulfilled on deployments.apps "web": the object has been modified; please apply your changes to the latest version and try again"#;
        let status = Status::failure(text, "Conflict").with_code(409);
        assert_eq!(api_message(&api(status)), text);
    }

    #[test]
    fn no_message_has_debug_formatting() {
        let status =
            Status::failure(r#"deployments.apps "web" not found"#, "NotFound").with_code(404);
        let err = api(status);
        // What this module exists to avoid: kube's Display of the same error.
        assert!(err.to_string().contains("Status {"), "{err}");
        let message = api_message(&err);
        for dump in ["Status {", "ApiError", "Some(", "code: "] {
            assert!(!message.contains(dump), "{message}");
        }
    }

    #[test]
    fn a_status_without_a_message_names_the_http_status() {
        let empty = Status::failure("", "").with_code(503);
        assert_eq!(
            api_message(&api(empty)),
            "the API server answered 503 Service Unavailable"
        );
        let reason_only = Status::failure("", "ServiceUnavailable").with_code(503);
        assert_eq!(
            api_message(&api(reason_only)),
            "the API server answered 503 Service Unavailable (ServiceUnavailable)"
        );
    }

    #[test]
    fn a_plain_text_body_is_quoted_and_a_page_is_not() {
        let text = Status::failure("upstream connect error", UNPARSED_BODY).with_code(502);
        assert_eq!(
            api_message(&api(text)),
            "the API server answered 502 Bad Gateway: upstream connect error"
        );
        let page =
            Status::failure("<html><body>Bad Gateway</body></html>", UNPARSED_BODY).with_code(502);
        assert_eq!(
            api_message(&api(page)),
            "the API server answered 502 Bad Gateway"
        );
    }

    #[test]
    fn a_transport_failure_is_one_sentence_with_the_root_cause() {
        let refused =
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        let wrapped: Box<dyn StdError + Send + Sync> = Box::new(Layer(refused));
        let err = kube::Error::Service(wrapped);
        assert_eq!(
            api_message(&err),
            "cannot reach the API server: connection refused"
        );
    }

    #[test]
    fn a_body_that_does_not_decode_says_so() {
        let serde = serde_json::from_str::<Status>("{").unwrap_err();
        let message = api_message(&kube::Error::SerdeError(serde));
        assert!(
            message.starts_with("the API server's answer does not decode: "),
            "{message}"
        );
    }

    #[test]
    fn a_failed_watch_carries_the_api_message() {
        let status = Status::failure(
            r#"pods is forbidden: User "x" cannot list resource "pods""#,
            "Forbidden",
        )
        .with_code(403);
        let err = watcher::Error::InitialListFailed(api(status));
        assert_eq!(
            watch_message(&err),
            r#"list failed: pods is forbidden: User "x" cannot list resource "pods""#
        );
    }

    /// A client layer that names itself and points at its cause, as hyper's errors do.
    #[derive(Debug)]
    struct Layer(std::io::Error);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("client error (Connect)")
        }
    }

    impl StdError for Layer {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }
}
