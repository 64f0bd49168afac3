//! One connection: the TLS handshake under the header clock, then hyper driven next to the
//! connection's clocks (see the parent module for what each allows).
//!
//! The clocks need two facts hyper does not expose, so they are gathered around it: the
//! [`Tracker`] counts requests from the moment hyper hands one to the service (its headers are
//! complete) until hyper drops its response body (written out), and [`Watched`] notes the first
//! byte that arrives while nothing is in flight (a kept-alive HTTP/1.1 connection's next request
//! has begun). From those the driver computes one deadline at a time and sleeps until it, woken
//! early whenever the tracker changes. The tracker also keeps the connection on the listener's
//! register of displaceable connections whenever nothing is in flight.
//!
//! Lock order: a tracker's lock, then the register's; the register never calls into a tracker
//! while holding its own.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use axum::body::Body as AxumBody;
use axum::http::{Request, Response, StatusCode};
use http_body_util::Limited;
use hyper::body::{Body as _, Incoming};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::body::{RequestBody, ResponseBody};
use super::{DRAIN, ListenerConfig, Registration, Shared, Standing, Transport};

/// A connection the accept loop hands over.
pub(super) struct Accepted {
    pub(super) tcp: TcpStream,
    pub(super) peer: SocketAddr,
    /// Its clocks, started at the accept, and its place on the register of displaceable
    /// connections.
    pub(super) tracker: Arc<Tracker>,
    /// Its place under the connection cap, freed when it ends.
    pub(super) slot: OwnedSemaphorePermit,
}

/// Serves one accepted connection until it ends, one of its clocks runs out, or a connection
/// accepted past the cap displaces it.
pub(super) async fn serve(accepted: Accepted, shared: Arc<Shared>, shutdown: CancellationToken) {
    let Accepted {
        tcp,
        peer,
        tracker,
        slot: _slot,
    } = accepted;
    let _ = tcp.set_nodelay(true);
    let connection = Connection {
        peer,
        tracker,
        shared: &shared,
        shutdown: &shutdown,
    };
    match &shared.transport {
        Transport::Plain => connection.drive(tcp, false).await,
        Transport::Tls(acceptor) => {
            let Some(stream) = connection.handshake(acceptor, tcp).await else {
                return;
            };
            let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
            connection.drive(stream, h2).await;
        }
    }
}

/// What the driver does when a deadline passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expiry {
    /// Close at once, for this reason.
    Close(&'static str),
    /// Ask the connection to finish (idle, or displaced while idle): HTTP/1.1 closes, HTTP/2
    /// sends GOAWAY.
    Finish,
}

/// One connection's driver.
struct Connection<'a> {
    peer: SocketAddr,
    tracker: Arc<Tracker>,
    shared: &'a Arc<Shared>,
    shutdown: &'a CancellationToken,
}

impl Connection<'_> {
    /// The TLS handshake, under the header clock; `None` when it failed, ran out of time, or the
    /// connection was displaced or the listener shut down meanwhile.
    async fn handshake(
        &self,
        acceptor: &tokio_rustls::TlsAcceptor,
        tcp: TcpStream,
    ) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
        let peer = self.peer;
        let deadline = self.tracker.accepted() + self.shared.config.header_read_timeout;
        let handshake = tokio::time::timeout_at(deadline, acceptor.accept(tcp));
        let mut handshake = std::pin::pin!(handshake);
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => return None,
                () = self.tracker.changed.notified() => {
                    if self.tracker.is_displaced() {
                        tracing::debug!(%peer, "displaced during the TLS handshake by a connection accepted past the cap");
                        return None;
                    }
                }
                handshake = &mut handshake => match handshake {
                    Ok(Ok(stream)) => return Some(stream),
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return None;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake not done within the header-read timeout; closed");
                        return None;
                    }
                },
            }
        }
    }

    /// Runs hyper on `io` until the connection ends or a clock runs out. `h2`: the connection
    /// speaks HTTP/2 (ALPN), where bytes on an idle connection are frames (PING, WINDOW_UPDATE),
    /// not the start of a request, and do not start the header clock.
    async fn drive<S>(self, io: S, h2: bool)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Connection {
            peer,
            tracker,
            shared,
            shutdown,
        } = self;
        let config = &shared.config;
        let service = ConnectionService {
            shared: shared.clone(),
            tracker: tracker.clone(),
        };
        let io = TokioIo::new(Watched {
            inner: io,
            tracker: tracker.clone(),
        });
        let conn = shared.builder.serve_connection(io, service);
        let mut conn = std::pin::pin!(conn);
        // Set once the connection was asked to finish: when it must be gone.
        let mut closing: Option<Instant> = None;
        loop {
            let (deadline, expiry) = match closing {
                Some(at) => (
                    Some(at),
                    Expiry::Close("did not finish after being asked to"),
                ),
                None => tracker.deadline(config, h2),
            };
            tokio::select! {
                biased;
                result = conn.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    }
                    return;
                }
                () = tracker.changed.notified() => {}
                () = sleep_until(deadline) => {
                    // Act only on a deadline that still holds: the tracker may have moved on.
                    let still = match closing {
                        Some(_) => (deadline, expiry),
                        None => tracker.deadline(config, h2),
                    };
                    if still.0.is_some_and(|at| at <= Instant::now()) {
                        match still.1 {
                            Expiry::Close(reason) => {
                                tracing::debug!(%peer, reason, "connection closed");
                                return;
                            }
                            Expiry::Finish => {
                                conn.as_mut().graceful_shutdown();
                                closing = Some(Instant::now() + config.write_timeout);
                            }
                        }
                    }
                }
                () = shutdown.cancelled(), if closing.is_none() => {
                    conn.as_mut().graceful_shutdown();
                    closing = Some(Instant::now() + DRAIN);
                }
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The state the clocks read, shared by the service, the I/O wrapper and the driver; it also
/// keeps the connection on the listener's register of displaceable connections while nothing is
/// in flight.
pub(super) struct Tracker {
    state: Mutex<State>,
    /// The listener, to enlist on its register (`None` in unit tests of the bodies).
    shared: Option<Arc<Shared>>,
    /// Signalled on every change that moves the next deadline.
    pub(super) changed: Notify,
}

struct State {
    accepted: Instant,
    /// Requests whose headers arrived and whose response is not yet written.
    in_flight: usize,
    /// Requests ever started on this connection.
    started: u64,
    /// Answered requests whose response is being written, with the time it must be done by.
    writing: Vec<(u64, Instant)>,
    /// When the last request in flight finished (or the first one started).
    idle_since: Instant,
    /// The first byte received while nothing was in flight (HTTP/1.1: a request has begun).
    read_while_idle: Option<Instant>,
    /// The connection's place on the register, while nothing is in flight.
    registration: Option<Registration>,
    /// A connection accepted past the cap asked this one to make room.
    displaced: bool,
}

impl Tracker {
    /// The tracker of a connection accepted at `accepted`, enlisted as unproven on `shared`'s
    /// register.
    pub(super) fn new(accepted: Instant, shared: Option<Arc<Shared>>) -> Arc<Self> {
        let tracker = Arc::new(Self {
            state: Mutex::new(State {
                accepted,
                in_flight: 0,
                started: 0,
                writing: Vec::new(),
                idle_since: accepted,
                read_while_idle: None,
                registration: None,
                displaced: false,
            }),
            shared,
            changed: Notify::new(),
        });
        tracker.enlist(&mut tracker.lock(), Standing::Unproven);
        tracker
    }

    fn enlist(self: &Arc<Self>, state: &mut State, standing: Standing) {
        if let Some(shared) = &self.shared {
            state.registration = Some(shared.enlist(standing, Arc::downgrade(self)));
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn accepted(&self) -> Instant {
        self.lock().accepted
    }

    fn is_displaced(&self) -> bool {
        self.lock().displaced
    }

    /// Asked by a connection accepted past the cap: close if nothing is in flight.
    pub(super) fn displace(&self) {
        {
            let mut state = self.lock();
            if state.in_flight > 0 {
                return;
            }
            state.displaced = true;
        }
        self.changed.notify_one();
    }

    /// The next deadline and what happens at it; `None`: no clock runs (a handler is working).
    fn deadline(&self, config: &ListenerConfig, h2: bool) -> (Option<Instant>, Expiry) {
        let state = self.lock();
        if state.in_flight > 0 {
            let writing = state.writing.iter().map(|(_, at)| *at).min();
            return (
                writing,
                Expiry::Close("response not written within the write timeout"),
            );
        }
        if state.displaced {
            // Already due: `accepted` is in the past.
            return if state.started == 0 {
                (
                    Some(state.accepted),
                    Expiry::Close(
                        "displaced by a connection accepted past the cap (no request yet)",
                    ),
                )
            } else {
                (Some(state.accepted), Expiry::Finish)
            };
        }
        if state.started == 0 {
            return (
                Some(state.accepted + config.header_read_timeout),
                Expiry::Close("no complete request headers within the header-read timeout"),
            );
        }
        if let Some(first_byte) = state.read_while_idle.filter(|_| !h2) {
            return (
                Some(first_byte + config.header_read_timeout),
                Expiry::Close("request headers not complete within the header-read timeout"),
            );
        }
        (Some(state.idle_since + config.idle_timeout), Expiry::Finish)
    }

    /// A request's headers arrived.
    pub(super) fn start(self: &Arc<Self>) -> InFlight {
        let (id, registration) = {
            let mut state = self.lock();
            state.in_flight += 1;
            state.started += 1;
            state.read_while_idle = None;
            // A request in flight is never displaced (a displacement racing it is void).
            state.displaced = false;
            (state.started, state.registration.take())
        };
        // Off the register, outside this lock (the register's lock is taken after this one).
        drop(registration);
        self.changed.notify_one();
        InFlight {
            tracker: self.clone(),
            id,
        }
    }

    /// Bytes arrived.
    fn read(&self) {
        let mut state = self.lock();
        if state.in_flight == 0 && state.started > 0 && state.read_while_idle.is_none() {
            state.read_while_idle = Some(Instant::now());
            drop(state);
            self.changed.notify_one();
        }
    }
}

/// A request in flight; dropped with its response body (or with the request, when it never got
/// one).
pub(super) struct InFlight {
    tracker: Arc<Tracker>,
    id: u64,
}

impl InFlight {
    /// The handler answered: the response must be written by `deadline`.
    fn answered(&self, deadline: Instant) {
        self.tracker.lock().writing.push((self.id, deadline));
        self.tracker.changed.notify_one();
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        {
            let mut state = self.tracker.lock();
            state.writing.retain(|(id, _)| *id != self.id);
            state.in_flight = state.in_flight.saturating_sub(1);
            if state.in_flight == 0 {
                state.idle_since = Instant::now();
                state.read_while_idle = None;
                self.tracker.enlist(&mut state, Standing::Idle);
            }
        }
        self.tracker.changed.notify_one();
    }
}

/// The connection's I/O, reporting reads to the tracker.
struct Watched<S> {
    inner: S,
    tracker: Arc<Tracker>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.tracker.read();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The hyper service of one connection: the router, with each request tracked, its body under
/// the body clock, the budget and the size cap.
#[derive(Clone)]
struct ConnectionService {
    shared: Arc<Shared>,
    tracker: Arc<Tracker>,
}

type ResponseFuture =
    Pin<Box<dyn Future<Output = Result<Response<ResponseBody<InFlight>>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for ConnectionService {
    type Response = Response<ResponseBody<InFlight>>;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn call(&self, request: Request<Incoming>) -> ResponseFuture {
        let in_flight = self.tracker.start();
        let config = &self.shared.config;
        let limit = config.max_request_body_bytes;
        if request.body().size_hint().lower() > u64::try_from(limit).unwrap_or(u64::MAX) {
            // Declared too large: answer before reading any of it.
            let mut response =
                Response::new(AxumBody::from(format!("request body over {limit} bytes\n")));
            *response.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
            in_flight.answered(Instant::now() + config.write_timeout);
            return Box::pin(std::future::ready(Ok(
                response.map(|inner| ResponseBody::new(inner, in_flight))
            )));
        }
        let request = request.map(|body| {
            let timed = RequestBody::new(
                body,
                config.body_read_timeout,
                self.shared.body_budget.clone(),
            );
            AxumBody::new(Limited::new(timed, limit))
        });
        let router = self.shared.router.clone();
        let write_timeout = config.write_timeout;
        Box::pin(async move {
            let response = match router.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            in_flight.answered(Instant::now() + write_timeout);
            Ok(response.map(|inner| ResponseBody::new(inner, in_flight)))
        })
    }
}
