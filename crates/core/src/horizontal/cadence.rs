//! When an autoscaler is evaluated next: at its own phase of its period.
//!
//! Requeueing each object one period after its evaluation keeps for ever whatever bunching the
//! evaluations once had. The objects listed at start-up, or taken over with a shard, are
//! evaluated in one burst and so come due together one period later, every period; and an
//! evaluation that ran late moves all the later ones by as much. Instead each object is due at a
//! fixed point of its period, drawn from its uid: a burst spreads out over the next period, and a
//! late evaluation does not postpone the next one. The gap between two evaluations is never longer
//! than the period plus the queue's lateness; the first one after a burst or a change comes sooner.
//! The next point is counted from the evaluation's start: one that ran past it is followed at once.
//!
//! The phase is counted from the Unix epoch, so every replica gives an object the same one and a
//! shard that moves keeps its spread.

use std::time::Duration;

use jiff::Timestamp;

use crate::stable_hash::Fnv1a;

/// When to evaluate `uid` again, as a delay from `now`: at the first point of its phase in a
/// period of `period_seconds` (at least one second) after `started`, the start of the evaluation
/// that ends now. Counted from the start, an evaluation held up past that point (by a slow
/// request, or a stalled process) is followed by another at once, not skipped to the point after.
pub fn next_evaluation(
    uid: &str,
    period_seconds: i64,
    started: Timestamp,
    now: Timestamp,
) -> Duration {
    let due = started.as_millisecond().saturating_add(
        i64::try_from(phase_wait(uid, period_seconds, started).as_millis()).unwrap_or(i64::MAX),
    );
    Duration::from_millis(
        due.saturating_sub(now.as_millisecond())
            .max(0)
            .unsigned_abs(),
    )
}

/// The delay from `at` to the next point of `uid`'s phase: more than zero, at most one period.
fn phase_wait(uid: &str, period_seconds: i64, at: Timestamp) -> Duration {
    let period_ms = period_seconds.max(1).saturating_mul(1000);
    let at = at.as_millisecond().rem_euclid(period_ms).unsigned_abs();
    let period = period_ms.unsigned_abs();
    let wait = (phase(uid) % period + period - at) % period;
    Duration::from_millis(if wait == 0 { period } else { wait })
}

/// A point of the period drawn from the uid, mixed further than the shard's hash of it so that
/// it tells nothing of the shard.
fn phase(uid: &str) -> u64 {
    // MurmurHash3's 64-bit finalizer.
    let mut hash = Fnv1a::of(uid);
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    hash ^ (hash >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(ms).unwrap()
    }

    const START: i64 = 1_767_225_600_000;

    proptest! {
        #[test]
        fn the_wait_is_more_than_nothing_and_at_most_a_period(
            uid in "[a-f0-9-]{1,40}",
            period in 1i64..600,
            now in 0i64..10_000_000_000_000,
        ) {
            let wait = next_evaluation(&uid, period, at(now), at(now));
            prop_assert!(wait > Duration::ZERO);
            prop_assert!(wait <= Duration::from_secs(period.unsigned_abs()));
        }

        /// However late each evaluation runs (less than a period), the next is due at the same
        /// phase: lateness does not add up.
        #[test]
        fn a_late_evaluation_does_not_postpone_the_next(
            uid in "[a-f0-9-]{36}",
            period in 1i64..120,
            late in proptest::collection::vec(0.0f64..1.0, 1..20),
        ) {
            let mut now = START;
            let due = now + millis(next_evaluation(&uid, period, at(now), at(now)));
            let mut due_each = due;
            for late in late {
                #[allow(clippy::cast_possible_truncation)]
                let lateness = (late * (period * 1000 - 1) as f64) as i64;
                now = due_each + lateness;
                let next = now + millis(next_evaluation(&uid, period, at(now), at(now)));
                prop_assert_eq!(next, due_each + period * 1000);
                due_each = next;
            }
        }
    }

    fn millis(d: Duration) -> i64 {
        i64::try_from(d.as_millis()).unwrap()
    }

    /// Ten thousand objects evaluated in one burst come due spread over the next period, not
    /// together: no second of a 15 s period holds more than 1.2 × its share.
    #[test]
    fn a_burst_spreads_over_the_next_period() {
        let mut per_second = [0u32; 15];
        for i in 0..10_000 {
            let uid = format!("6f1c2a4e-0000-4000-8000-{i:012}");
            let wait = next_evaluation(&uid, 15, at(START), at(START));
            let second = usize::try_from(wait.as_millis().saturating_sub(1) / 1000).unwrap();
            per_second[second] += 1;
        }
        let share = 10_000 / 15;
        for (second, &n) in per_second.iter().enumerate() {
            assert!(
                n * 10 <= share * 12 && n * 10 >= share * 8,
                "second {second}: {n} of 10000 due ({per_second:?})"
            );
        }
    }

    /// An evaluation that ends after the point it should next run at is followed by another at
    /// once; one that ends before it waits for it, however long it took.
    #[test]
    fn a_held_up_evaluation_is_followed_at_once_not_a_period_later() {
        let uid = "0d7c3d9e-7a51-4b9f-9d3c-1f6e2b8a4c10";
        let due = START + millis(next_evaluation(uid, 15, at(START), at(START)));
        let wait = due - START;
        assert_eq!(
            next_evaluation(uid, 15, at(START), at(due + 2_000)),
            Duration::ZERO
        );
        assert_eq!(
            millis(next_evaluation(uid, 15, at(START), at(START + wait / 2))),
            wait - wait / 2
        );
    }

    /// Every replica asks the same question and gets the same answer.
    #[test]
    fn the_phase_is_the_uids_not_the_replicas() {
        let uid = "0d7c3d9e-7a51-4b9f-9d3c-1f6e2b8a4c10";
        let first = START + millis(next_evaluation(uid, 15, at(START), at(START)));
        let later = START + 7_777;
        let second = later + millis(next_evaluation(uid, 15, at(later), at(later)));
        assert_eq!((second - first).rem_euclid(15_000), 0);
    }
}
