//! The admin HTTP listener: `/metrics`, `/healthz`, `/readyz` on one address.
//!
//! - `/metrics`: the process registry in `OpenMetrics` text format.
//! - `/healthz` (liveness): 200 while the service's main loop has ticked its [`Liveness`]
//!   within the configured window, 503 otherwise — a stuck loop gets the pod restarted.
//! - `/readyz` (readiness): 200 once the service marked its [`Readiness`] ready (reflector stores
//!   synced, or for the webhook the TLS listener bound), 503 before.
//!
//! [`router`] builds the axum `Router` (tests call it with `tower::ServiceExt::oneshot`);
//! [`serve`] binds it and runs it on the [`crate::listener`] (HTTP/1.1, under the limits of the
//! `--metrics-*` flags, [`crate::args::AdminListenerArgs`]) until the shutdown token is cancelled.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::listener::{self, ListenerConfig, Transport};

/// `Content-Type` of `/metrics`.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Liveness: the main loop calls [`Liveness::tick`] each time it makes progress; the process is
/// alive while the last tick is more recent than the window. A new handle counts as just ticked,
/// so a slow start is not mistaken for a hang.
#[derive(Clone, Debug)]
pub struct Liveness {
    last_tick: Arc<Mutex<Instant>>,
    window: Duration,
}

impl Liveness {
    /// A handle that reports unhealthy when not ticked for `window`.
    pub fn new(window: Duration) -> Self {
        Self {
            last_tick: Arc::new(Mutex::new(Instant::now())),
            window,
        }
    }

    /// Records progress.
    pub fn tick(&self) {
        if let Ok(mut last) = self.last_tick.lock() {
            *last = Instant::now();
        }
    }

    /// Time since the last tick.
    pub fn since_last_tick(&self) -> Duration {
        self.last_tick
            .lock()
            .map_or(Duration::MAX, |last| last.elapsed())
    }

    /// True when the last tick is within the window.
    pub fn is_alive(&self) -> bool {
        self.since_last_tick() <= self.window
    }
}

/// Readiness: false until the service calls [`Readiness::set_ready`].
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    ready: Arc<AtomicBool>,
}

impl Readiness {
    /// A handle that starts not ready.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks the service ready (or not ready again, e.g. while re-syncing).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// True once marked ready.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }
}

/// What the admin endpoints read.
#[derive(Clone, Debug)]
pub struct AdminState {
    /// The process registry (the root, holding the service's prefixed sub-registry).
    pub registry: Arc<Registry>,
    /// Liveness of the main loop.
    pub liveness: Liveness,
    /// Readiness of the service.
    pub readiness: Readiness,
}

/// The admin router: `/metrics`, `/healthz`, `/readyz`.
pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

async fn metrics(State(state): State<AdminState>) -> Response {
    let mut body = String::new();
    match encode(&mut body, &state.registry) {
        Ok(()) => ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], body).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "cannot encode metrics\n").into_response(),
    }
}

async fn healthz(State(state): State<AdminState>) -> Response {
    if state.liveness.is_alive() {
        (StatusCode::OK, "ok\n").into_response()
    } else {
        let since = state.liveness.since_last_tick();
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "main loop stalled: last progress {}s ago\n",
                since.as_secs()
            ),
        )
            .into_response()
    }
}

async fn readyz(State(state): State<AdminState>) -> Response {
    if state.readiness.is_ready() {
        (StatusCode::OK, "ok\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

/// Binds `address` and serves `router` under `limits` until `shutdown` is cancelled.
pub async fn serve(
    address: SocketAddr,
    router: Router,
    limits: ListenerConfig,
    shutdown: CancellationToken,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| Error::AdminServer { address, source })?;
    serve_on(listener, router, limits, shutdown).await
}

/// Serves `router` on an already bound listener (lets tests bind `127.0.0.1:0`).
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: ListenerConfig,
    shutdown: CancellationToken,
) -> Result<()> {
    let address = listener.local_addr().map_err(|source| Error::AdminServer {
        address: SocketAddr::from(([0, 0, 0, 0], 0)),
        source,
    })?;
    tracing::info!(%address, "admin server listening (/metrics, /healthz, /readyz)");
    listener::serve(listener, Transport::Plain, router, limits, shutdown).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::AdminListenerArgs;
    use crate::telemetry::{ReconcileMetrics, service_registry};
    use axum::body::Body;
    use http_body_util::BodyExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tower::ServiceExt;

    fn state() -> (AdminState, ReconcileMetrics) {
        let mut registry = Registry::default();
        let metrics = ReconcileMetrics::register(service_registry(&mut registry, "hpa-plus"));
        let state = AdminState {
            registry: Arc::new(registry),
            liveness: Liveness::new(Duration::from_secs(60)),
            readiness: Readiness::new(),
        };
        (state, metrics)
    }

    async fn get(router: Router, path: &str) -> (StatusCode, String, Option<String>) {
        let response = router
            .oneshot(
                http::Request::builder()
                    .uri(path)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_owned());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            String::from_utf8(body.to_vec()).unwrap(),
            content_type,
        )
    }

    #[tokio::test]
    async fn metrics_are_served_as_openmetrics() {
        let (state, metrics) = state();
        let _timer = metrics.start();
        let (status, body, content_type) = get(router(state), "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(content_type.as_deref(), Some(OPENMETRICS_CONTENT_TYPE));
        assert!(
            body.contains("plimsoll_hpa_plus_reconcile_runs_total 1"),
            "{body}"
        );
        assert!(body.ends_with("# EOF\n"), "{body}");
    }

    #[tokio::test]
    async fn readyz_follows_the_readiness_handle() {
        let (state, _) = state();
        let readiness = state.readiness.clone();
        let app = router(state);
        assert_eq!(
            get(app.clone(), "/readyz").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        readiness.set_ready(true);
        assert_eq!(get(app.clone(), "/readyz").await.0, StatusCode::OK);
        readiness.set_ready(false);
        assert_eq!(get(app, "/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
    }

    #[tokio::test(start_paused = true)]
    async fn healthz_fails_when_the_loop_stops_ticking() {
        let (state, _) = state();
        let liveness = state.liveness.clone();
        let app = router(state);
        assert_eq!(get(app.clone(), "/healthz").await.0, StatusCode::OK);
        tokio::time::advance(Duration::from_secs(50)).await;
        liveness.tick();
        tokio::time::advance(Duration::from_secs(50)).await;
        assert_eq!(get(app.clone(), "/healthz").await.0, StatusCode::OK);
        tokio::time::advance(Duration::from_secs(11)).await;
        let (status, body, _) = get(app.clone(), "/healthz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("61s ago"), "{body}");
        liveness.tick();
        assert_eq!(get(app, "/healthz").await.0, StatusCode::OK);
    }

    #[tokio::test]
    async fn unknown_paths_are_404() {
        let (state, _) = state();
        assert_eq!(get(router(state), "/nope").await.0, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn serves_over_tcp_and_stops_on_shutdown() {
        let (state, _) = state();
        state.readiness.set_ready(true);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let server = tokio::spawn(serve_on(
            listener,
            router(state),
            AdminListenerArgs::default().config(),
            shutdown.clone(),
        ));
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        stream
            .write_all(b"GET /readyz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        shutdown.cancel();
        server.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn binding_a_taken_address_names_it() {
        let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = taken.local_addr().unwrap();
        let (state, _) = state();
        let err = serve(
            address,
            router(state),
            AdminListenerArgs::default().config(),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains(&address.to_string()), "{err}");
    }
}
