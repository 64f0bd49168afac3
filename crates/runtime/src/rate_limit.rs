//! The client-side rate limit on requests to the API server (`--kube-api-qps`,
//! `--kube-api-burst`), as client-go's `rest.Config` QPS/Burst: a token bucket of `burst`
//! tokens refilled at `qps` per second, one token per request.
//!
//! Split as the leader election is: [`TokenBucket`] is pure (the clock is an argument) and
//! decides how long a request waits; [`RateLimitLayer`] is the tower layer in the kube client's
//! service stack that sleeps that long, and counts requests and waits in [`ClientMetrics`].
//! [`SharedBucket`] is the same bucket for callers that wait for their own token, with a
//! deadline past which they would rather not (vpa-updater's `--eviction-rate-limit`).
//!
//! The bucket hands out *reservations*, as `golang.org/x/time/rate` does for client-go: a
//! request that finds the bucket empty takes a token from the future and waits until it is
//! refilled, so waiting requests go out in arrival order at exactly `qps`, none starves. The
//! wait happens in `poll_ready`; the kube client calls it from its request queue (a tower
//! `Buffer`) before each request, so requests queue in order behind the limiter while the ones
//! already sent run concurrently. A watch takes one token when it starts, none per event.
//! kube's retries of a 429 happen below this layer and take no token.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};

/// A validated limit: `qps` requests per second, bursts of up to `burst`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimit {
    /// Refill rate, tokens per second (> 0).
    pub qps: f64,
    /// Bucket size (≥ 1): how many requests may go out at once after a quiet spell.
    pub burst: u32,
}

impl RateLimit {
    /// The limit the flags ask for: `None` for `qps` 0 (no limit; `burst` is then ignored, as
    /// client-go ignores Burst without QPS). An unset `burst` is `max(2 × qps, 1)`; 0 with a
    /// `qps` is an error that names the flags.
    pub fn from_flags(qps: f64, burst: Option<u32>) -> Result<Option<Self>> {
        if !qps.is_finite() || qps < 0.0 {
            return Err(Error::RateLimit(format!(
                "--kube-api-qps={qps}: must be a non-negative number of requests per second"
            )));
        }
        if qps == 0.0 {
            return Ok(None);
        }
        let burst = match burst {
            Some(0) => {
                return Err(Error::RateLimit(format!(
                    "--kube-api-burst=0 with --kube-api-qps={qps}: no request could ever go out; \
                     set a burst of at least 1, or leave --kube-api-burst unset for twice the qps"
                )));
            }
            Some(b) => b,
            // Saturating float-to-int cast: an absurd qps gives u32::MAX, which is no limit.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            None => ((qps * 2.0).ceil() as u32).max(1),
        };
        Ok(Some(Self { qps, burst }))
    }
}

/// A token bucket: holds up to `burst` tokens, refilled continuously at `qps` per second;
/// starts full. Pure: every call takes the time.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    limit: RateLimit,
    /// Tokens now; negative when requests hold reservations on tokens not yet refilled.
    tokens: f64,
    /// When `tokens` was last brought up to date.
    at: Instant,
}

impl TokenBucket {
    /// A full bucket at `now`.
    pub fn new(limit: RateLimit, now: Instant) -> Self {
        Self {
            limit,
            tokens: f64::from(limit.burst),
            at: now,
        }
    }

    /// Takes one token for a request made at `now` and returns how long the request must wait
    /// (zero when a token was there).
    pub fn reserve(&mut self, now: Instant) -> Duration {
        if now > self.at {
            let refill = now.duration_since(self.at).as_secs_f64() * self.limit.qps;
            self.tokens = (self.tokens + refill).min(f64::from(self.limit.burst));
            self.at = now;
        }
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.limit.qps)
        }
    }

    /// As [`TokenBucket::reserve`], unless the wait would end after `deadline`: then nothing is
    /// taken (the next caller waits as long) and the answer is `None`.
    pub fn reserve_by(&mut self, now: Instant, deadline: Instant) -> Option<Duration> {
        let mut after = self.clone();
        let wait = after.reserve(now);
        let in_time = now.checked_add(wait).is_some_and(|end| end <= deadline);
        in_time.then(|| {
            *self = after;
            wait
        })
    }
}

/// A [`TokenBucket`] shared by concurrent callers that each wait for their own token (the
/// updater's evictions and resizes); no limit lets everyone through at once. The bucket starts
/// full.
#[derive(Debug, Default)]
pub struct SharedBucket {
    bucket: Option<Mutex<TokenBucket>>,
}

impl SharedBucket {
    /// A full bucket of `limit`, or no limit.
    pub fn new(limit: Option<RateLimit>) -> Self {
        Self {
            bucket: limit.map(|limit| Mutex::new(TokenBucket::new(limit, Instant::now()))),
        }
    }

    /// Reserves one token at `now` unless the wait for it would end after `deadline`; returns
    /// how long to wait, or `None` (nothing reserved).
    pub fn reserve(&self, now: Instant, deadline: Instant) -> Option<Duration> {
        let Some(bucket) = &self.bucket else {
            return Some(Duration::ZERO);
        };
        bucket
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .reserve_by(now, deadline)
    }

    /// Waits for a token. False when it would not come before `deadline` or `cancel` fired.
    pub async fn acquire(&self, deadline: Instant, cancel: &CancellationToken) -> bool {
        let Some(wait) = self.reserve(Instant::now(), deadline) else {
            return false;
        };
        if wait.is_zero() {
            return true;
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => true,
            () = cancel.cancelled() => false,
        }
    }
}

/// Counters of the requests the kube client sent and of the time its request queue was held by
/// the limiter (a request waits at the head of the queue, the rest wait behind it, so this is
/// wall time: over a loop, its share of the loop's time), served as
/// `plimsoll_<binary>_kube_client_…`. Clones share the counters.
#[derive(Clone, Debug, Default)]
pub struct ClientMetrics {
    requests: Counter,
    throttled: Counter,
    wait: Counter<f64, AtomicU64>,
}

impl ClientMetrics {
    /// Registers the counters in a service's (prefixed) registry.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "kube_client_requests",
            "Requests sent to the API server (a watch counts once, when it starts)",
            self.requests.clone(),
        );
        registry.register(
            "kube_client_rate_limited_requests",
            "Requests that waited for the client-side rate limit (--kube-api-qps)",
            self.throttled.clone(),
        );
        registry.register(
            "kube_client_rate_limit_wait_seconds",
            "Seconds the client's request queue was held by the client-side rate limit (at most \
             the wall time; the requests queued behind it waited as long)",
            self.wait.clone(),
        );
    }

    /// Requests counted so far.
    pub fn requests(&self) -> u64 {
        self.requests.get()
    }

    /// Seconds the request queue was held by the limiter so far.
    pub fn wait_seconds(&self) -> f64 {
        self.wait.get()
    }
}

/// The tower layer that puts a [`TokenBucket`] in front of a service; with no limit it only
/// counts requests. Each service it builds has a bucket of its own.
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    limit: Option<RateLimit>,
    metrics: ClientMetrics,
}

impl RateLimitLayer {
    /// A layer enforcing `limit` (none: count only), counting into `metrics`.
    pub fn new(limit: Option<RateLimit>, metrics: ClientMetrics) -> Self {
        Self { limit, metrics }
    }
}

impl<S> tower::Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimited {
            inner,
            bucket: self.limit.map(|l| TokenBucket::new(l, Instant::now())),
            metrics: self.metrics.clone(),
            permit: false,
            sleep: None,
        }
    }
}

/// A service whose requests each wait for a token first (see [`RateLimitLayer`]).
pub struct RateLimited<S> {
    inner: S,
    bucket: Option<TokenBucket>,
    metrics: ClientMetrics,
    /// A token is held for the next `call`.
    permit: bool,
    /// The wait for the reserved token.
    sleep: Option<Pin<Box<Sleep>>>,
}

impl<S, R> tower::Service<R> for RateLimited<S>
where
    S: tower::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if !self.permit {
            if self.sleep.is_none() {
                self.metrics.requests.inc();
                let wait = self
                    .bucket
                    .as_mut()
                    .map_or(Duration::ZERO, |b| b.reserve(Instant::now()));
                if wait.is_zero() {
                    self.permit = true;
                } else {
                    self.metrics.throttled.inc();
                    self.metrics.wait.inc_by(wait.as_secs_f64());
                    self.sleep = Some(Box::pin(tokio::time::sleep(wait)));
                }
            }
            if let Some(sleep) = self.sleep.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.sleep = None;
                self.permit = true;
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.permit = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Layer as _, Service as _, ServiceExt as _};

    fn limit(qps: f64, burst: u32) -> RateLimit {
        RateLimit { qps, burst }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A wait in whole milliseconds, rounded (the bucket computes in floating point).
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    fn whole_ms(d: Duration) -> u64 {
        (d.as_secs_f64() * 1000.0).round() as u64
    }

    #[test]
    fn a_full_bucket_lets_a_burst_through_then_paces_at_qps() {
        // As client-go's util/flowcontrol TestBasicThrottle (a burst of 3 goes through at
        // once) and TestThrottle (then one request per 1/qps).
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(limit(10.0, 3), t0);
        for _ in 0..3 {
            assert_eq!(bucket.reserve(t0), Duration::ZERO);
        }
        // Reservations queue: the 4th waits one refill, the 5th two.
        assert_eq!(whole_ms(bucket.reserve(t0)), 100);
        assert_eq!(whole_ms(bucket.reserve(t0)), 200);
        // 250 ms later two and a half tokens came back, both spoken for: the next waits 50 ms.
        assert_eq!(whole_ms(bucket.reserve(t0 + ms(250))), 50);
    }

    #[test]
    fn a_quiet_spell_refills_no_more_than_the_burst() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(limit(2.0, 2), t0);
        assert_eq!(bucket.reserve(t0), Duration::ZERO);
        assert_eq!(bucket.reserve(t0), Duration::ZERO);
        let later = t0 + Duration::from_secs(3600);
        assert_eq!(bucket.reserve(later), Duration::ZERO);
        assert_eq!(bucket.reserve(later), Duration::ZERO);
        assert_eq!(whole_ms(bucket.reserve(later)), 500);
    }

    #[test]
    fn a_clock_that_goes_back_refills_nothing() {
        let t0 = Instant::now() + Duration::from_secs(10);
        let mut bucket = TokenBucket::new(limit(1.0, 1), t0);
        assert_eq!(bucket.reserve(t0), Duration::ZERO);
        assert_eq!(whole_ms(bucket.reserve(t0 - Duration::from_secs(5))), 1000);
    }

    #[test]
    fn flags_become_a_limit_or_a_clear_error() {
        assert_eq!(RateLimit::from_flags(0.0, None).unwrap(), None);
        assert_eq!(RateLimit::from_flags(0.0, Some(0)).unwrap(), None);
        assert_eq!(
            RateLimit::from_flags(5.0, Some(10)).unwrap(),
            Some(limit(5.0, 10))
        );
        assert_eq!(
            RateLimit::from_flags(50.0, None).unwrap(),
            Some(limit(50.0, 100))
        );
        assert_eq!(
            RateLimit::from_flags(0.2, None).unwrap(),
            Some(limit(0.2, 1))
        );
        let err = RateLimit::from_flags(5.0, Some(0)).unwrap_err().to_string();
        assert!(err.contains("--kube-api-burst=0"), "{err}");
        let err = RateLimit::from_flags(-1.0, None).unwrap_err().to_string();
        assert!(err.contains("--kube-api-qps=-1"), "{err}");
        assert!(RateLimit::from_flags(f64::NAN, None).is_err());
    }

    /// A service that answers at once with the (paused) time it was called at.
    fn clock_service()
    -> impl tower::Service<(), Response = Instant, Error = std::convert::Infallible, Future: Send>
    {
        tower::service_fn(|()| async { Ok(Instant::now()) })
    }

    #[tokio::test(start_paused = true)]
    async fn the_layer_sends_requests_at_the_limited_rate_and_counts_the_waits() {
        let metrics = ClientMetrics::default();
        let layer = RateLimitLayer::new(Some(limit(4.0, 2)), metrics.clone());
        let mut service = layer.layer(clock_service());
        let t0 = Instant::now();
        let mut sent = Vec::new();
        for _ in 0..5 {
            let at = service.ready().await.unwrap().call(()).await.unwrap();
            sent.push(whole_ms(at - t0));
        }
        assert_eq!(sent, [0, 0, 250, 500, 750]);
        assert_eq!(metrics.requests(), 5);
        assert_eq!(metrics.throttled.get(), 3);
        assert!((metrics.wait_seconds() - 0.75).abs() < 1e-6);
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_limit_the_layer_only_counts() {
        let metrics = ClientMetrics::default();
        let mut service = RateLimitLayer::new(None, metrics.clone()).layer(clock_service());
        let t0 = Instant::now();
        for _ in 0..100 {
            let at = service.ready().await.unwrap().call(()).await.unwrap();
            assert_eq!(at, t0);
        }
        assert_eq!(metrics.requests(), 100);
        assert!(metrics.wait_seconds().abs() < f64::EPSILON);
    }

    #[tokio::test(start_paused = true)]
    async fn a_kube_client_with_the_layer_paces_concurrent_requests() {
        use http::{Request, Response};
        use k8s_openapi::api::core::v1::ConfigMap;
        use kube::client::{Body, ClientBuilder};

        let api = tower::service_fn(|_: Request<Body>| async {
            let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}"#;
            Response::builder()
                .header("content-type", "application/json")
                .body(Body::from(body.as_bytes().to_vec()))
                .map_err(|e| Box::new(e) as tower::BoxError)
        });
        let metrics = ClientMetrics::default();
        let client = ClientBuilder::new(api, "default")
            .with_layer(&RateLimitLayer::new(Some(limit(2.0, 2)), metrics.clone()))
            .build();
        let configmaps: kube::Api<ConfigMap> = kube::Api::default_namespaced(client);
        let t0 = Instant::now();
        let done = futures::future::join_all((0..6).map(|_| {
            let configmaps = configmaps.clone();
            async move {
                configmaps.get("c").await.unwrap();
                whole_ms(t0.elapsed())
            }
        }))
        .await;
        // Concurrent callers all queue behind the limiter: 2 at once, then one per 500 ms.
        assert_eq!(done, [0, 0, 500, 1000, 1500, 2000]);
        assert_eq!(metrics.requests(), 6);
        // The queue was held 4 × 500 ms; the time callers spent queued behind it is not added.
        assert!((metrics.wait_seconds() - 2.0).abs() < 1e-6);
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[tokio::test]
    async fn a_shared_bucket_gives_a_burst_then_the_rate_within_the_deadline() {
        let bucket = SharedBucket::new(Some(limit(2.0, 3)));
        let t0 = Instant::now();
        let far = t0 + secs(100.0);
        for _ in 0..3 {
            assert_eq!(bucket.reserve(t0, far), Some(Duration::ZERO));
        }
        // Fourth and fifth: 0.5 s and 1 s of refill at 2 per second.
        assert_eq!(bucket.reserve(t0, far), Some(secs(0.5)));
        assert_eq!(bucket.reserve(t0, far), Some(secs(1.0)));
        // A deadline before the token comes: nothing reserved, so the next caller waits as long.
        assert_eq!(bucket.reserve(t0, t0 + secs(1.0)), None);
        assert_eq!(bucket.reserve(t0, far), Some(secs(1.5)));
        // Ten seconds later the bucket is full again, but never fuller than the burst.
        let later = t0 + secs(10.0);
        for _ in 0..3 {
            assert_eq!(bucket.reserve(later, far), Some(Duration::ZERO));
        }
        assert_eq!(bucket.reserve(later, far), Some(secs(0.5)));
    }

    #[tokio::test]
    async fn a_shared_bucket_without_a_limit_lets_everyone_through() {
        let bucket = SharedBucket::new(None);
        let t0 = Instant::now();
        for _ in 0..100 {
            assert_eq!(bucket.reserve(t0, t0), Some(Duration::ZERO));
        }
    }

    #[tokio::test]
    async fn acquire_gives_up_on_cancel() {
        let bucket = SharedBucket::new(Some(limit(0.001, 1)));
        let cancel = CancellationToken::new();
        let far = Instant::now() + secs(1e6);
        assert!(bucket.acquire(far, &cancel).await);
        cancel.cancel();
        assert!(!bucket.acquire(far, &cancel).await);
    }
}
