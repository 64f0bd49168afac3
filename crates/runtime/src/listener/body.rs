//! Request bodies under the body-read clock and the listener's byte budget, and response bodies
//! that tell the connection when they are done (by dropping the guard they carry).
//!
//! [`RequestBody`] fails its reads once the deadline has passed ([`BodyError::Timeout`]) and
//! charges every data frame to the listener's budget of bytes being received
//! ([`BodyError::Busy`] when it is spent); the bytes are given back when the body is dropped,
//! i.e. once the handler has collected it. The deadline is only seen while someone reads the
//! body: a handler that never reads it answers at once, and hyper then stops reading that body
//! (an HTTP/1.1 connection with a body left unread is closed after the answer).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The body did not arrive within the body-read timeout.
    #[error("request body not received within {0:?}")]
    Timeout(Duration),
    /// The listener is already receiving as many body bytes as it allows at once.
    #[error("too many request bodies are being received at once")]
    Busy,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body read under a deadline and a shared byte budget.
pub(super) struct RequestBody<B> {
    inner: B,
    deadline: Pin<Box<Sleep>>,
    timeout: Duration,
    budget: Arc<Semaphore>,
    held: Option<OwnedSemaphorePermit>,
    failed: bool,
}

impl<B> RequestBody<B> {
    /// `inner`, to be received within `timeout` from now, charging `budget` one permit a byte.
    pub(super) fn new(inner: B, timeout: Duration, budget: Arc<Semaphore>) -> Self {
        Self {
            inner,
            deadline: Box::pin(tokio::time::sleep_until(Instant::now() + timeout)),
            timeout,
            budget,
            held: None,
            failed: false,
        }
    }

    fn charge(&mut self, bytes: usize) -> Result<(), BodyError> {
        let permits = u32::try_from(bytes).map_err(|_| BodyError::Busy)?;
        let taken = self
            .budget
            .clone()
            .try_acquire_many_owned(permits)
            .map_err(|_| BodyError::Busy)?;
        match &mut self.held {
            Some(held) => held.merge(taken),
            None => self.held = Some(taken),
        }
        Ok(())
    }

    fn fail(&mut self, error: BodyError) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.failed = true;
        // Nothing more will be read: give the budget back now.
        self.held = None;
        Poll::Ready(Some(Err(error.into())))
    }
}

impl<B> Body for RequestBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.failed {
            return Poll::Ready(None);
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            let timeout = self.timeout;
            return self.fail(BodyError::Timeout(timeout));
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref()
                    && let Err(e) = self.charge(data.len())
                {
                    return self.fail(e);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Largest data frame handed to hyper. hyper asks for the next frame only when its write buffer
/// has room, so with bounded frames a response counts as in flight (under the write clock) until
/// all but its last frames are written out; one 30 MB frame would be taken at once, and its
/// request counted as done while it still sat unwritten in hyper's queue.
const RESPONSE_FRAME_BYTES: usize = 64 * 1024;

/// A response body that holds `guard` until hyper has taken its last frame (and drops the body),
/// handed over in frames of at most [`RESPONSE_FRAME_BYTES`]. The connection's guard is its
/// request's in-flight mark, so the request counts as in flight until then; this module needs
/// to know nothing of it but that dropping it is the signal.
pub(super) struct ResponseBody<G> {
    inner: axum::body::Body,
    /// The rest of a frame larger than [`RESPONSE_FRAME_BYTES`].
    rest: Bytes,
    _guard: G,
}

impl<G> ResponseBody<G> {
    pub(super) fn new(inner: axum::body::Body, guard: G) -> Self {
        Self {
            inner,
            rest: Bytes::new(),
            _guard: guard,
        }
    }

    fn next_piece(&mut self) -> Frame<Bytes> {
        let take = self.rest.len().min(RESPONSE_FRAME_BYTES);
        Frame::data(self.rest.split_to(take))
    }
}

impl<G: Unpin> Body for ResponseBody<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if !self.rest.is_empty() {
            return Poll::Ready(Some(Ok(self.next_piece())));
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) if data.len() > RESPONSE_FRAME_BYTES => {
                    self.rest = data;
                    Poll::Ready(Some(Ok(self.next_piece())))
                }
                Ok(data) => Poll::Ready(Some(Ok(Frame::data(data)))),
                Err(frame) => Poll::Ready(Some(Ok(frame))),
            },
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let inner = self.inner.size_hint();
        let rest = self.rest.len() as u64;
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower() + rest);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + rest);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};
    use tokio::sync::mpsc;

    /// A body fed through a channel, so that a test decides when each chunk arrives.
    struct ChannelStream(mpsc::Receiver<Bytes>);

    impl futures::Stream for ChannelStream {
        type Item = Result<Frame<Bytes>, std::convert::Infallible>;
        fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
            self.0.poll_recv(cx).map(|c| c.map(|b| Ok(Frame::data(b))))
        }
    }

    fn channel_body() -> (mpsc::Sender<Bytes>, StreamBody<ChannelStream>) {
        let (tx, rx) = mpsc::channel(8);
        (tx, StreamBody::new(ChannelStream(rx)))
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_body_fails_at_its_deadline() {
        let (tx, inner) = channel_body();
        let budget = Arc::new(Semaphore::new(1000));
        let mut body = RequestBody::new(inner, Duration::from_secs(10), budget.clone());
        tx.send(Bytes::from_static(b"half")).await.unwrap();
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "half");
        assert_eq!(budget.available_permits(), 996);
        let began = Instant::now();
        let err = body.frame().await.unwrap().unwrap_err();
        assert_eq!(began.elapsed(), Duration::from_secs(10));
        assert!(
            matches!(err.downcast_ref::<BodyError>(), Some(BodyError::Timeout(_))),
            "{err}"
        );
        // Failed: the budget is back and the body ends.
        assert_eq!(budget.available_permits(), 1000);
        assert!(body.frame().await.is_none());
        drop(tx);
    }

    #[tokio::test(start_paused = true)]
    async fn bodies_share_the_budget_until_dropped() {
        let budget = Arc::new(Semaphore::new(1000));
        let (tx1, inner1) = channel_body();
        let mut first = RequestBody::new(inner1, Duration::from_secs(10), budget.clone());
        tx1.send(Bytes::from(vec![b'a'; 800])).await.unwrap();
        first.frame().await.unwrap().unwrap();

        // 800 of 1000 bytes are held: a 500-byte chunk does not fit.
        let (tx2, inner2) = channel_body();
        let mut second = RequestBody::new(inner2, Duration::from_secs(10), budget.clone());
        tx2.send(Bytes::from(vec![b'b'; 500])).await.unwrap();
        let err = second.frame().await.unwrap().unwrap_err();
        assert!(
            matches!(err.downcast_ref::<BodyError>(), Some(BodyError::Busy)),
            "{err}"
        );

        // Once the first is collected (dropped), its bytes are free again.
        drop(first);
        let (tx3, inner3) = channel_body();
        let third = RequestBody::new(inner3, Duration::from_secs(10), budget.clone());
        tx3.send(Bytes::from(vec![b'c'; 500])).await.unwrap();
        drop(tx3);
        let collected = third.collect().await.unwrap().to_bytes();
        assert_eq!(collected.len(), 500);
        drop((tx1, tx2));
    }

    #[tokio::test]
    async fn large_responses_are_handed_over_in_bounded_frames() {
        let whole = vec![b'x'; 3 * RESPONSE_FRAME_BYTES + 5];
        let guard = Arc::new(());
        let mut body = ResponseBody::new(axum::body::Body::from(whole.clone()), guard.clone());
        assert_eq!(body.size_hint().exact(), Some(whole.len() as u64));
        let mut sizes = Vec::new();
        let mut collected = Vec::new();
        while let Some(frame) = body.frame().await {
            let data = frame.unwrap().into_data().unwrap();
            sizes.push(data.len());
            collected.extend_from_slice(&data);
            assert_eq!(
                body.size_hint().exact(),
                Some((whole.len() - collected.len()) as u64)
            );
        }
        assert_eq!(
            sizes,
            [
                RESPONSE_FRAME_BYTES,
                RESPONSE_FRAME_BYTES,
                RESPONSE_FRAME_BYTES,
                5
            ]
        );
        assert_eq!(collected, whole);
        assert!(body.is_end_stream());
        // The guard lives exactly as long as the body.
        assert_eq!(Arc::strong_count(&guard), 2);
        drop(body);
        assert_eq!(Arc::strong_count(&guard), 1);
    }
}
