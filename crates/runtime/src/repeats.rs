//! Which warnings about an object reach the log. An evaluation that fails fails again at every
//! period until someone changes the object or the cluster, a job that fails fails at every
//! firing, and a namespace user can make a thousand fail on purpose: logged each time, that is
//! a warning line every 15 ms, and the operator's log shipping (or its quota) pays for it. The
//! condition and the Event already tell the object's owner; the log is for the operator, who
//! needs to see each failure, not each repeat. So a message about an object is logged at warn
//! the first time, then at most once per [`RELOG_AFTER`] with the number of repeats not logged;
//! in between, at debug.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a warning about one object is not repeated. The same as an Event series' refresh
/// (`plimsoll_runtime::events::REFRESH_AFTER` is 30 min) would hide a failure a person is
/// watching for; ten minutes is a few lines an hour per failing object.
pub const RELOG_AFTER: Duration = Duration::from_secs(600);

/// The messages remembered per object: one failing in two ways (a write refused, then the read
/// before it) alternates between them, and each keeps its own clock.
const PER_OBJECT: usize = 4;

/// The last warnings logged, per object uid.
#[derive(Debug, Default)]
pub struct Repeats {
    logged: Mutex<HashMap<String, Vec<Logged>>>,
}

#[derive(Debug)]
struct Logged {
    message: u64,
    at: Instant,
    /// Repeats not logged since `at`.
    quiet: u64,
    /// When it was last seen, logged or not.
    last: Instant,
}

/// What to do with one warning.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Log it at warn.
    Warn {
        /// Repeats of it not logged since the last time.
        quiet: u64,
    },
    /// A repeat within [`RELOG_AFTER`]: log it at debug.
    Repeat,
}

impl Repeats {
    /// Whether `message` about the object `uid` is logged at warn `now`.
    pub fn verdict(&self, uid: &str, message: &str, now: Instant) -> Verdict {
        let message = {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            message.hash(&mut h);
            h.finish()
        };
        let mut all = self
            .logged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let logged = all.entry(uid.to_owned()).or_default();
        if let Some(seen) = logged.iter_mut().find(|l| l.message == message) {
            seen.last = now;
            if now.saturating_duration_since(seen.at) < RELOG_AFTER {
                seen.quiet += 1;
                return Verdict::Repeat;
            }
            let quiet = std::mem::take(&mut seen.quiet);
            seen.at = now;
            return Verdict::Warn { quiet };
        }
        if logged.len() == PER_OBJECT
            && let Some(oldest) = (0..logged.len()).min_by_key(|&i| logged[i].at)
        {
            // A message that changes at every evaluation (a count, a tenant's text in it) is
            // still at most PER_OBJECT warnings per RELOG_AFTER.
            if now.saturating_duration_since(logged[oldest].at) < RELOG_AFTER {
                return Verdict::Repeat;
            }
            logged.swap_remove(oldest);
        }
        logged.push(Logged {
            message,
            at: now,
            quiet: 0,
            last: now,
        });
        Verdict::Warn { quiet: 0 }
    }

    /// [`Repeats::verdict`] for a caller that is never told when an object ends (the webhook's
    /// namespaces, the objects a file or a query failed for): the objects no warning was seen
    /// about within [`RELOG_AFTER`] are forgotten first (a failure that goes on is kept, with
    /// its count), so what is kept is bounded by what failed in the last ten minutes.
    pub fn verdict_forgetting(&self, uid: &str, message: &str, now: Instant) -> Verdict {
        self.forget_settled(now);
        self.verdict(uid, message, now)
    }

    /// Whether `message` about the object `uid` is logged at warn now: `Some(repeats not
    /// logged since the last time)`, or `None` for a repeat to log at debug.
    pub fn first(&self, uid: &str, message: &str) -> Option<u64> {
        match self.verdict(uid, message, Instant::now()) {
            Verdict::Warn { quiet } => Some(quiet),
            Verdict::Repeat => None,
        }
    }

    /// Forgets the object `uid` (deleted, or its shard lost).
    pub fn forget(&self, uid: &str) {
        self.logged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(uid);
    }

    /// Keeps only the objects whose uid `keep` accepts: for a caller that learns what exists by
    /// looking (a loop over a cache) rather than by deletions.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.logged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|uid, _| keep(uid));
    }

    /// Forgets the objects no warning was seen about within [`RELOG_AFTER`] of `now`: for a
    /// caller that is never told when an object ends (the webhook, by namespace). A failure that
    /// goes on is kept, and its next warning counts the repeats not logged; one that stopped
    /// would be logged as new at its next occurrence anyway, and only the count of its last
    /// repeats goes with it (the caller's metrics still hold them).
    fn forget_settled(&self, now: Instant) {
        self.logged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|_, logged| {
                logged
                    .iter()
                    .any(|l| now.saturating_duration_since(l.last) < RELOG_AFTER)
            });
    }

    /// Forgets every object (after a relist, which does not tell what was deleted meanwhile).
    pub fn clear(&self) {
        self.logged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }

    /// How many objects are remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.logged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_every_period_is_one_warning_per_ten_minutes() {
        let repeats = Repeats::default();
        let start = Instant::now();
        let mut warned = Vec::new();
        // An hour of one object failing the same way every 15 s.
        for i in 0..240u64 {
            let now = start + Duration::from_secs(15 * i);
            if let Verdict::Warn { quiet } = repeats.verdict("u1", "target not found", now) {
                warned.push((i * 15, quiet));
            }
        }
        assert_eq!(
            warned,
            [
                (0, 0),
                (600, 39),
                (1200, 39),
                (1800, 39),
                (2400, 39),
                (3000, 39)
            ]
        );
    }

    #[test]
    fn each_object_and_each_message_is_warned_of_once() {
        let repeats = Repeats::default();
        let now = Instant::now();
        let first = Verdict::Warn { quiet: 0 };
        assert_eq!(repeats.verdict("u1", "a", now), first);
        assert_eq!(repeats.verdict("u2", "a", now), first);
        assert_eq!(repeats.verdict("u1", "b", now), first);
        assert_eq!(repeats.verdict("u1", "a", now), Verdict::Repeat);
        assert_eq!(repeats.verdict("u1", "b", now), Verdict::Repeat);
        // A message that changes every time: the first few are warnings, and what is kept of
        // them is bounded.
        let verdicts: Vec<Verdict> = (0..1000)
            .map(|i| repeats.verdict("u3", &format!("m{i}"), now))
            .collect();
        assert!(verdicts[..PER_OBJECT].iter().all(|v| *v == first));
        assert!(verdicts[PER_OBJECT..].iter().all(|v| *v == Verdict::Repeat));
        assert_eq!(
            repeats.logged.lock().expect("not poisoned")["u3"].len(),
            PER_OBJECT
        );
        // Ten minutes on, the next new message is a warning again.
        let later = now + RELOG_AFTER;
        assert_eq!(repeats.verdict("u3", "m1000", later), first);
        repeats.forget("u1");
        repeats.forget("u3");
        assert_eq!(repeats.len(), 1);
        assert_eq!(repeats.verdict("u1", "a", later), first);
        // Objects no longer there are dropped; the others keep their clocks.
        repeats.retain(|uid| uid == "u2");
        assert_eq!(repeats.len(), 1);
        assert_eq!(
            repeats.verdict("u2", "a", now + RELOG_AFTER / 2),
            Verdict::Repeat
        );
        assert_eq!(repeats.verdict("u1", "a", later), first);
    }

    #[test]
    fn settled_objects_are_forgotten_and_warned_of_again() {
        let repeats = Repeats::default();
        let start = Instant::now();
        let first = Verdict::Warn { quiet: 0 };
        assert_eq!(repeats.verdict("ns-a", "cold", start), first);
        let later = start + RELOG_AFTER / 2;
        assert_eq!(repeats.verdict("ns-b", "cold", later), first);
        // Within ten minutes of its last sight an object is kept, and a repeat stays quiet.
        repeats.forget_settled(later);
        assert_eq!(repeats.len(), 2);
        assert_eq!(repeats.verdict("ns-a", "cold", later), Verdict::Repeat);
        // Ten minutes after a was last seen, only b (seen five minutes ago) is kept.
        let gone = later + RELOG_AFTER;
        assert_eq!(
            repeats.verdict("ns-b", "cold", later + RELOG_AFTER / 2),
            Verdict::Repeat
        );
        repeats.forget_settled(gone);
        assert_eq!(repeats.len(), 1);
        assert_eq!(repeats.verdict("ns-a", "cold", gone), first);
    }

    /// A failure that goes on, pruned before each verdict as the webhook does, still says how
    /// many repeats were not logged.
    #[test]
    fn a_failure_that_goes_on_keeps_its_count_through_pruning() {
        let repeats = Repeats::default();
        let start = Instant::now();
        let mut warned = Vec::new();
        for i in 0..100u64 {
            let now = start + Duration::from_secs(15 * i);
            if let Verdict::Warn { quiet } = repeats.verdict_forgetting("ns", "cold", now) {
                warned.push((i * 15, quiet));
            }
        }
        assert_eq!(warned, [(0, 0), (600, 39), (1200, 39)]);
    }
}
