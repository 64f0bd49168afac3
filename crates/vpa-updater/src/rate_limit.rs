//! The eviction rate limiter: one token bucket shared by every eviction and resize the updater
//! makes (upstream `--eviction-rate-limit` / `--eviction-rate-burst`, a `golang.org/x/time/rate`
//! limiter). The bucket is the runtime's ([`plimsoll_runtime::rate_limit::SharedBucket`], the
//! one the kube client's limit uses too); this module only reads the flags as upstream does.
//!
//! Invariants: the bucket holds at most `burst` tokens and refills at `rate` per second; a
//! caller that takes a token when none is left waits for the deficit to refill. A rate of 0 or
//! less means no limit. A burst of 0 counts as 1 (upstream would then refuse every eviction).

use plimsoll_runtime::rate_limit::{RateLimit, SharedBucket};

/// The limiter for `--eviction-rate-limit` (`rate`, per second) and `--eviction-rate-burst`,
/// full at the start.
pub fn eviction_limiter(rate: f64, burst: u32) -> SharedBucket {
    let limit = (rate.is_finite() && rate > 0.0).then(|| RateLimit {
        qps: rate,
        burst: burst.max(1),
    });
    SharedBucket::new(limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::time::Instant;

    #[tokio::test]
    async fn non_positive_rate_is_unlimited_and_zero_burst_is_one() {
        let t0 = Instant::now();
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let bucket = eviction_limiter(rate, 0);
            for _ in 0..100 {
                assert_eq!(bucket.reserve(t0, t0), Some(Duration::ZERO));
            }
        }
        let bucket = eviction_limiter(1.0, 0);
        assert_eq!(bucket.reserve(t0, t0), Some(Duration::ZERO));
        assert_eq!(bucket.reserve(t0, t0), None);
    }

    #[tokio::test]
    async fn the_flags_set_the_burst_and_the_rate() {
        let t0 = Instant::now();
        let far = t0 + Duration::from_secs(100);
        let bucket = eviction_limiter(2.0, 3);
        for _ in 0..3 {
            assert_eq!(bucket.reserve(t0, far), Some(Duration::ZERO));
        }
        assert_eq!(bucket.reserve(t0, far), Some(Duration::from_millis(500)));
    }
}
