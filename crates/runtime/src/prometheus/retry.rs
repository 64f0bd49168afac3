//! When a failed Prometheus request is tried again, and after how long.
//!
//! Retried: connection failures (refused, reset, DNS, TLS I/O), 5xx and 429 answers: the server
//! or a proxy in front of it may be restarting or overloaded. Not retried: other 4xx (a bad
//! query stays bad; 401/403 are handled by the credentials, which re-read a rotated token once),
//! certificate errors, and bodies that are not the Prometheus API.
//!
//! The delay before attempt `n + 1` is `initial × 2^(n-1)`, capped at `max`, with equal jitter
//! (a random point in the upper half) so that replicas that failed together do not retry
//! together. No retry starts when its delay would not leave time for it within the query's
//! budget (`--prometheus-timeout`).

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// How often and how far apart a request is tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (at least 1). Default 3.
    pub attempts: u32,
    /// Delay before the second attempt, before jitter. Default 250 ms.
    pub initial_backoff: Duration,
    /// Largest delay between attempts. Default 4 s.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 3,
            initial_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(4),
        }
    }
}

/// Whether an HTTP status is worth another attempt: 429 and every 5xx.
pub fn is_retryable_status(status: u16) -> bool {
    status == 429 || (500..=599).contains(&status)
}

impl RetryPolicy {
    /// The delay after `failed` attempts (≥ 1), for a jitter in `[0, 1]`: between half and all of
    /// `initial × 2^(failed-1)`, capped at `max_backoff`.
    pub fn backoff(&self, failed: u32, jitter: f64) -> Duration {
        let exponent = failed.saturating_sub(1).min(30);
        let full = self
            .initial_backoff
            .saturating_mul(1u32 << exponent)
            .min(self.max_backoff);
        full.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
    }

    /// The delay before the next attempt after `failed` attempts, or `None` when the attempts are
    /// used up or the delay would leave less than `min_attempt` of the `remaining` budget.
    pub fn next_delay(
        &self,
        failed: u32,
        jitter: f64,
        remaining: Duration,
        min_attempt: Duration,
    ) -> Option<Duration> {
        if failed >= self.attempts.max(1) {
            return None;
        }
        let delay = self.backoff(failed, jitter);
        (delay + min_attempt <= remaining).then_some(delay)
    }
}

/// A number in `[0, 1)` that differs between processes and calls: std's per-instance random
/// hash keys are enough to spread retries, no generator needed.
pub fn jitter() -> f64 {
    let mut hasher = std::hash::RandomState::new().build_hasher();
    hasher.write_u64(0);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn statuses() {
        for s in [429, 500, 502, 503, 504] {
            assert!(is_retryable_status(s), "{s}");
        }
        for s in [200, 400, 401, 403, 404, 405, 422] {
            assert!(!is_retryable_status(s), "{s}");
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_and_jitter_keeps_the_upper_half() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff(1, 1.0), Duration::from_millis(250));
        assert_eq!(p.backoff(2, 1.0), Duration::from_millis(500));
        assert_eq!(p.backoff(3, 1.0), Duration::from_secs(1));
        assert_eq!(p.backoff(10, 1.0), Duration::from_secs(4));
        assert_eq!(p.backoff(40, 1.0), Duration::from_secs(4));
        assert_eq!(p.backoff(2, 0.0), Duration::from_millis(250));
        assert_eq!(p.backoff(2, 0.5), Duration::from_millis(375));
    }

    #[test]
    fn no_retry_past_the_attempts_or_the_budget() {
        let p = RetryPolicy::default();
        let ms = Duration::from_millis;
        assert_eq!(p.next_delay(1, 1.0, 10 * SECOND, ms(100)), Some(ms(250)));
        assert_eq!(p.next_delay(2, 1.0, 10 * SECOND, ms(100)), Some(ms(500)));
        assert_eq!(p.next_delay(3, 1.0, 10 * SECOND, ms(100)), None);
        assert_eq!(p.next_delay(1, 1.0, ms(300), ms(100)), None);
        let once = RetryPolicy { attempts: 1, ..p };
        assert_eq!(once.next_delay(1, 0.0, 10 * SECOND, ms(1)), None);
    }

    #[test]
    fn jitter_is_in_range_and_varies() {
        let values: Vec<f64> = (0..32).map(|_| jitter()).collect();
        assert!(values.iter().all(|j| (0.0..1.0).contains(j)));
        assert!(values.iter().any(|j| (j - values[0]).abs() > f64::EPSILON));
    }
}
