//! The one HTTP server every Plimsoll listener runs on (the admin listener of every service, and
//! vpa-admission's TLS webhook): an accept loop with a connection cap, and per connection the
//! deadlines that keep a slow or silent client from holding memory and file descriptors.
//!
//! # What a connection is allowed
//!
//! The clocks follow Go's `net/http` server (what the API server, kubelet and Prometheus are
//! written against), with the TLS handshake counted as part of the first request's headers:
//!
//! - **Header read** ([`ListenerConfig::header_read_timeout`]): from the accept, the TLS
//!   handshake and the first request's headers must be complete within it. On a kept-alive
//!   HTTP/1.1 connection, the next request's headers must be complete within it of its first
//!   byte. A client that connects and sends nothing, stops in the ClientHello or in the middle of
//!   a request line is closed when it runs out.
//! - **Body read** ([`ListenerConfig::body_read_timeout`]): from the end of a request's headers,
//!   its body must be received within it, else the body reads fail (the handler answers 4xx and
//!   an HTTP/1.1 connection is closed, its body being unfinished).
//! - **Write** ([`ListenerConfig::write_timeout`]): from the handler's answer, the response must
//!   be handed over within it; a client that does not read its response is closed.
//! - **Idle** ([`ListenerConfig::idle_timeout`]): a connection with no request in flight and
//!   nothing received is closed gracefully (HTTP/2: GOAWAY) after it. The default is above the
//!   90 s `IdleConnTimeout` of Go's transport, so an API server closes its idle connections
//!   first and never sends a request on a connection this side is closing.
//! - **Sizes**: request headers up to [`ListenerConfig::max_header_bytes`] (HTTP/1.1: the read
//!   buffer, at least 8 KiB; HTTP/2: `SETTINGS_MAX_HEADER_LIST_SIZE`); request bodies up to
//!   [`ListenerConfig::max_request_body_bytes`] (413, before reading a body whose declared length
//!   is over); and at most [`ListenerConfig::max_inflight_body_bytes`] of request bodies being
//!   received at once over all connections (a request past it fails), so memory stays bounded
//!   whatever the number of connections.
//! - **HTTP/2** (only where [`ListenerConfig::http2_max_concurrent_streams`] is set; otherwise
//!   the listener speaks HTTP/1.1 only): at most that many streams per connection. No PINGs:
//!   a dead peer is closed by the idle or write clock anyway.
//!
//! # The connection cap
//!
//! At most [`ListenerConfig::max_connections`] connections are open at once. A connection
//! accepted past it first **displaces a connection with no request in flight**: the oldest
//! that has not sent a complete request yet (a client that connected and stalls; a real client,
//! such as the API server, sends its request within milliseconds of connecting), else the one
//! kept alive idle the longest (gracefully: a real client reconnects when it needs to). Only
//! when every open connection has a request in flight (real load, or bodies trickling in) does
//! the loop stop accepting: new connections then wait in the kernel's accept queue (the listen
//! backlog, 1024 or `net.core.somaxconn`), where they cost this process neither memory nor a
//! descriptor, and are accepted oldest first as slots free up (each within a body-read plus a
//! write timeout). Closing them at accept instead would serve nobody sooner, and would turn the
//! accept loop into a busy close loop under a flood.
//!
//! On shutdown the loop stops accepting, every connection is asked to finish (HTTP/1.1: after
//! the request in flight; HTTP/2: GOAWAY), and whatever is still open after [`DRAIN`] is dropped.

mod body;
mod connection;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::TokioExecutor;
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use body::BodyError;
use connection::Tracker;

/// How long connections may finish their requests after shutdown starts (10 s: well inside the
/// pod's default 30 s `terminationGracePeriodSeconds`).
pub const DRAIN: Duration = Duration::from_secs(10);

/// The smallest HTTP/1.1 read buffer hyper accepts; request headers always get at least this.
const MIN_HTTP1_BUFFER: usize = 8 * 1024;

/// How often a full listener says so in the log, at most.
const FULL_WARNING_EVERY: Duration = Duration::from_secs(60);

/// What a listener allows its clients. Services build it from their flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerConfig {
    /// Connections open at once. Past it a new connection displaces one with no request in
    /// flight; when every one has a request in flight, new connections wait in the kernel's
    /// accept queue.
    pub max_connections: usize,
    /// TLS handshake and first request headers, from the accept; later request headers, from
    /// their first byte.
    pub header_read_timeout: Duration,
    /// A request body, from the end of its headers.
    pub body_read_timeout: Duration,
    /// A response, from the handler's answer.
    pub write_timeout: Duration,
    /// A connection with nothing in flight and nothing received.
    pub idle_timeout: Duration,
    /// Request headers, in bytes.
    pub max_header_bytes: usize,
    /// One request body, in bytes.
    pub max_request_body_bytes: usize,
    /// Request bodies being received at once, over all connections, in bytes.
    pub max_inflight_body_bytes: usize,
    /// Streams per HTTP/2 connection; `None` serves HTTP/1.1 only.
    pub http2_max_concurrent_streams: Option<u32>,
}

/// How connections arrive.
#[derive(Clone)]
pub enum Transport {
    /// Plain TCP (the admin listener).
    Plain,
    /// TLS; the handshake runs under the header-read timeout. ALPN decides HTTP/2 or HTTP/1.1.
    Tls(tokio_rustls::TlsAcceptor),
}

impl Transport {
    /// TLS with this rustls configuration.
    pub fn tls(config: Arc<rustls::ServerConfig>) -> Self {
        Transport::Tls(tokio_rustls::TlsAcceptor::from(config))
    }
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transport::Plain => "Plain",
            Transport::Tls(_) => "Tls",
        })
    }
}

/// What every connection of one listener shares.
struct Shared {
    router: Router,
    config: ListenerConfig,
    transport: Transport,
    builder: auto::Builder<TokioExecutor>,
    /// Permits are bytes of request bodies being received ([`ListenerConfig::max_inflight_body_bytes`]).
    body_budget: Arc<Semaphore>,
    /// Open connections with nothing in flight, in the order a connection accepted past the cap
    /// displaces them.
    displaceable: Mutex<Displaceable>,
}

/// Why a connection may be displaced; the first ones go first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Standing {
    /// No complete request yet (a client that connected and stalls; real clients send theirs
    /// within milliseconds).
    Unproven,
    /// Kept alive between requests (a real client reconnects when it needs to).
    Idle,
}

/// The register of displaceable connections: by standing, then oldest first (the sequence
/// number of enlisting; for idle connections, the one idle longest).
#[derive(Default)]
struct Displaceable {
    next: u64,
    connections: BTreeMap<(Standing, u64), Weak<Tracker>>,
}

impl Shared {
    /// Enlists `tracker`'s connection as displaceable; it stays on the register as long as the
    /// returned [`Registration`] lives.
    fn enlist(self: &Arc<Self>, standing: Standing, tracker: Weak<Tracker>) -> Registration {
        let mut register = self
            .displaceable
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        register.next += 1;
        let key = (standing, register.next);
        register.connections.insert(key, tracker);
        Registration {
            shared: self.clone(),
            key,
        }
    }

    /// Asks the first displaceable connection to close; false when there is none.
    fn displace_first(&self) -> bool {
        loop {
            let first = self
                .displaceable
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .connections
                .pop_first();
            match first {
                None => return false,
                Some((_, tracker)) => {
                    if let Some(tracker) = tracker.upgrade() {
                        tracker.displace();
                        return true;
                    }
                }
            }
        }
    }
}

/// A connection's place on the register of displaceable ones; dropping it takes it off.
struct Registration {
    shared: Arc<Shared>,
    key: (Standing, u64),
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.shared
            .displaceable
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .connections
            .remove(&self.key);
    }
}

/// The hyper connection builder for `config`.
fn builder(config: &ListenerConfig) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .keep_alive(true)
        // The header clock is this module's (it must not run while a kept-alive connection
        // waits for its next request); hyper's would need a timer and starts at once.
        .header_read_timeout(None)
        .max_buf_size(config.max_header_bytes.max(MIN_HTTP1_BUFFER));
    match config.http2_max_concurrent_streams {
        Some(streams) => {
            builder
                .http2()
                .max_concurrent_streams(streams)
                .max_header_list_size(u32::try_from(config.max_header_bytes).unwrap_or(u32::MAX));
            builder
        }
        None => builder.http1_only(),
    }
}

/// Serves `router` on `listener` under `config` until `shutdown` is cancelled, then drains (at
/// most [`DRAIN`]). Connection errors are logged at debug level; nothing here fails the caller.
pub async fn serve(
    listener: TcpListener,
    transport: Transport,
    router: Router,
    config: ListenerConfig,
    shutdown: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let shared = Arc::new(Shared {
        router,
        builder: builder(&config),
        body_budget: Arc::new(Semaphore::new(
            config.max_inflight_body_bytes.min(Semaphore::MAX_PERMITS),
        )),
        config,
        transport,
        displaceable: Mutex::new(Displaceable::default()),
    });
    let mut connections = JoinSet::new();
    let mut warned_full: Option<Instant> = None;
    loop {
        while connections.try_join_next().is_some() {}
        let (tcp, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // EMFILE and friends: back off briefly instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let accepted_at = Instant::now();
        let slot = if let Ok(slot) = slots.clone().try_acquire_owned() {
            slot
        } else {
            let displaced = shared.displace_first();
            if warned_full.is_none_or(|at| at.elapsed() >= FULL_WARNING_EVERY) {
                warned_full = Some(Instant::now());
                if displaced {
                    tracing::warn!(
                        max_connections = shared.config.max_connections,
                        "connection cap reached: closing connections that have no request in flight"
                    );
                } else {
                    tracing::warn!(
                        max_connections = shared.config.max_connections,
                        "connection cap reached: new connections wait in the accept queue"
                    );
                }
            }
            // A displaced connection frees its slot at once (an idle HTTP/2 one after its
            // GOAWAY); otherwise this connection (its header clock running since the accept)
            // waits for a slot, and later ones wait in the kernel's queue.
            tokio::select! {
                () = shutdown.cancelled() => break,
                slot = slots.clone().acquire_owned() => match slot {
                    Ok(slot) => slot,
                    Err(_) => break,
                },
            }
        };
        // Enlisted here, in accept order, as the oldest unproven connection goes first.
        let tracker = Tracker::new(accepted_at, Some(shared.clone()));
        connections.spawn(connection::serve(
            connection::Accepted {
                tcp,
                peer,
                tracker,
                slot,
            },
            shared.clone(),
            shutdown.clone(),
        ));
    }
    let drained = tokio::time::timeout(DRAIN, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = connections.len(),
            "connections still open after the drain period; closing them"
        );
        connections.abort_all();
    }
}

#[cfg(test)]
mod tests;
