//! The eviction rate limiter: a token bucket shared by every eviction and resize the updater
//! makes (upstream `--eviction-rate-limit` / `--eviction-rate-burst`, a `golang.org/x/time/rate`
//! limiter).
//!
//! Invariants: the bucket holds at most `burst` tokens and refills at `rate` per second; a
//! caller that takes a token when none is left waits for the deficit to refill. A rate of 0 or
//! less means no limit. A burst of 0 counts as 1 (upstream would then refuse every eviction).

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A token bucket; `None` rate means unlimited.
#[derive(Debug)]
pub struct TokenBucket {
    limit: Option<Limit>,
}

#[derive(Debug)]
struct Limit {
    /// Tokens per second (> 0).
    rate: f64,
    /// Bucket size (≥ 1).
    burst: f64,
    /// Tokens at `at` (may be negative: reserved by waiting callers).
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A bucket refilling at `rate` tokens per second, holding `burst`; full at the start.
    pub fn new(rate: f64, burst: u32) -> TokenBucket {
        let limit = (rate.is_finite() && rate > 0.0).then(|| {
            let burst = f64::from(burst.max(1));
            Limit {
                rate,
                burst,
                state: Mutex::new((burst, Instant::now())),
            }
        });
        TokenBucket { limit }
    }

    /// Reserves one token at `now` unless the wait for it would end after `deadline`; returns
    /// how long to wait, or `None` (nothing reserved).
    pub fn reserve(&self, now: Instant, deadline: Instant) -> Option<Duration> {
        let Some(limit) = &self.limit else {
            return Some(Duration::ZERO);
        };
        let mut state = limit
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (tokens, at) = *state;
        let elapsed = now.saturating_duration_since(at).as_secs_f64();
        let tokens = (tokens + elapsed * limit.rate).min(limit.burst) - 1.0;
        let wait = if tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-tokens / limit.rate)
        };
        if now + wait > deadline {
            return None;
        }
        *state = (tokens, now.max(at));
        Some(wait)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[tokio::test]
    async fn burst_then_rate() {
        let bucket = TokenBucket::new(2.0, 3);
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
    async fn non_positive_rate_is_unlimited_and_zero_burst_is_one() {
        let t0 = Instant::now();
        for rate in [0.0, -1.0, f64::NAN] {
            let bucket = TokenBucket::new(rate, 0);
            for _ in 0..100 {
                assert_eq!(bucket.reserve(t0, t0), Some(Duration::ZERO));
            }
        }
        let bucket = TokenBucket::new(1.0, 0);
        assert_eq!(bucket.reserve(t0, t0), Some(Duration::ZERO));
        assert_eq!(bucket.reserve(t0, t0), None);
    }

    #[tokio::test]
    async fn acquire_gives_up_on_cancel() {
        let bucket = TokenBucket::new(0.001, 1);
        let cancel = CancellationToken::new();
        let far = Instant::now() + secs(1e6);
        assert!(bucket.acquire(far, &cancel).await);
        cancel.cancel();
        assert!(!bucket.acquire(far, &cancel).await);
    }
}
