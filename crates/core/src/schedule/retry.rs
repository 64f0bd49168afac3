//! When a due firing whose write failed transiently runs again: soon, with an exponential
//! back-off, for as long as the firing is still within the missed-job grace (so that the
//! retried firing is still due when [`super::plan::evaluate`] runs at the retry instant).
//! After that the job is `Failed`.

use jiff::{SignedDuration, Timestamp};

/// The wait after the first failed attempt.
pub const FIRST_BACKOFF: SignedDuration = SignedDuration::from_millis(500);

/// The longest wait between two attempts.
pub const MAX_BACKOFF: SignedDuration = SignedDuration::from_secs(10);

/// The wait after `failures` consecutive failed attempts (1 for the first): doubles from
/// [`FIRST_BACKOFF`] up to [`MAX_BACKOFF`].
pub fn backoff(failures: u32) -> SignedDuration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_BACKOFF
        .checked_mul(1 << doublings)
        .unwrap_or(MAX_BACKOFF)
        .min(MAX_BACKOFF)
}

/// When to try the firing at `firing_at` again after `failures` consecutive failures, the last
/// one at `now`; `None` when that instant would be past the grace (`missed_job_grace` after the
/// firing), and the job has failed for good.
pub fn retry_at(
    firing_at: Timestamp,
    now: Timestamp,
    failures: u32,
    missed_job_grace: SignedDuration,
) -> Option<Timestamp> {
    let at = now.checked_add(backoff(failures)).ok()?;
    let deadline = firing_at.checked_add(missed_job_grace).ok()?;
    (at <= deadline).then_some(at)
}

/// A firing whose write failed transiently, to run again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// The instant the job fired.
    pub firing: Timestamp,
    /// When to try again ([`retry_at`]).
    pub at: Timestamp,
}

impl Retry {
    /// One retry for two: evaluation must resume before the earlier firing and wake at the
    /// earlier retry instant.
    #[must_use]
    pub fn earliest(self, other: Retry) -> Retry {
        Retry {
            firing: self.firing.min(other.firing),
            at: self.at.min(other.at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_backoff_doubles_up_to_its_cap() {
        let waits: Vec<i64> = (1..=7).map(|n| backoff(n).as_millis() as i64).collect();
        assert_eq!(waits, [500, 1_000, 2_000, 4_000, 8_000, 10_000, 10_000]);
        assert_eq!(backoff(0), FIRST_BACKOFF);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }

    #[test]
    fn a_firing_is_retried_only_within_the_grace() {
        let fired = ts("2026-11-22T08:00:00Z");
        let grace = SignedDuration::from_mins(5);
        assert_eq!(
            retry_at(fired, ts("2026-11-22T08:00:01Z"), 1, grace),
            Some(ts("2026-11-22T08:00:01.5Z"))
        );
        // The last retry lands exactly at the end of the grace.
        assert_eq!(
            retry_at(fired, ts("2026-11-22T08:04:50Z"), 9, grace),
            Some(ts("2026-11-22T08:05:00Z"))
        );
        assert_eq!(retry_at(fired, ts("2026-11-22T08:04:51Z"), 9, grace), None);
        // No grace, no retry.
        assert_eq!(retry_at(fired, fired, 1, SignedDuration::ZERO), None);
    }

    #[test]
    fn two_retries_resume_before_the_earlier_firing_and_wake_at_the_earlier_retry() {
        let a = Retry {
            firing: ts("2026-01-01T08:00:00Z"),
            at: ts("2026-01-01T08:00:04Z"),
        };
        let b = Retry {
            firing: ts("2026-01-01T08:00:01Z"),
            at: ts("2026-01-01T08:00:02Z"),
        };
        let both = Retry {
            firing: a.firing,
            at: b.at,
        };
        assert_eq!(a.earliest(b), both);
        assert_eq!(b.earliest(a), both);
    }
}
