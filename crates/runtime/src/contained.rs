//! A reconcile that panics fails its own object, not the service. kube-runtime's controller
//! raises a reconciler's panic again in its own stream: one object whose evaluation panics (a
//! bug that a tenant's values reach) would stop every autoscaler the process runs, and after
//! the restart the same object is evaluated again, so the service would crash-loop.
//! controller-runtime recovers a reconciler's panic for the same reason; here the panic becomes
//! that object's error, counted, logged and retried like any other.
//!
//! Unwinding out of the middle of an evaluation is sound here: what the services share between
//! evaluations sits behind mutexes whose poisoning they ignore, and an object's memory taken
//! out for the evaluation and not put back makes its next evaluation a first sight (restored
//! from the object, as after a restart).

use std::any::Any;
use std::panic::AssertUnwindSafe;

use futures::FutureExt as _;

/// The longest panic message kept: it ends up in a log line and an error metric's neighbour.
const MAX_MESSAGE_BYTES: usize = 512;

/// A future panicked; the message it panicked with, escaped and cut.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("panicked: {0}")]
pub struct Panicked(pub String);

/// `future`'s output, or [`Panicked`] when it panicked.
pub async fn contained<F: Future>(future: F) -> Result<F::Output, Panicked> {
    AssertUnwindSafe(future)
        .catch_unwind()
        .await
        .map_err(|payload| Panicked(message_of(payload.as_ref())))
}

/// What `panic!` carried: a `&str` or a `String` (formatted messages), else nothing readable.
fn message_of(payload: &(dyn Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message");
    plimsoll_core::printable::message(text, MAX_MESSAGE_BYTES)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::panic)]

    use super::*;

    #[tokio::test]
    async fn a_panic_becomes_the_futures_error_and_the_rest_goes_on() {
        let overflow = contained(async {
            let values = [i64::MAX, std::hint::black_box(1)];
            values.iter().sum::<i64>()
        })
        .await;
        // Only built with overflow checks (tests are) does the sum panic; either way no unwind
        // leaves `contained`.
        if cfg!(debug_assertions) {
            let Err(Panicked(message)) = overflow else {
                panic!("{overflow:?}");
            };
            assert!(message.contains("overflow"), "{message}");
        }
        let formatted = contained(async {
            assert!(
                !std::hint::black_box(true),
                "object {}: \u{1b}[2J{}",
                "ns/web",
                "x".repeat(4096)
            );
            0
        })
        .await;
        let Err(Panicked(message)) = formatted else {
            panic!("{formatted:?}");
        };
        assert!(
            message.starts_with("object ns/web: \\u{1b}[2J"),
            "{message}"
        );
        assert!(message.len() <= MAX_MESSAGE_BYTES, "{}", message.len());
        assert_eq!(contained(async { 7 }).await, Ok(7));
    }
}
