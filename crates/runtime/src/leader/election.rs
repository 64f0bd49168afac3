//! The leader-election state machine: pure, no I/O, the clock is a parameter.
//!
//! The runner in [`super`] reads the Lease, asks [`Election::plan`] what to write, performs the
//! write with the Lease's `resourceVersion` (optimistic concurrency), and reports the result
//! back with [`Election::on_written`] / [`Election::on_write_failed`]. [`Election::status`]
//! says whether this process may act *now*.
//!
//! Timing rules (the same as client-go's leaderelection package):
//! - A lease held by someone else is expired when it has not changed for its
//!   `leaseDurationSeconds`, measured on **our** clock from when we first saw the current
//!   record. The holder's `renewTime` is never compared with our clock, so clock skew between
//!   nodes cannot make us take a live lease.
//! - A lease with no holder (released) can be taken at once.
//! - Taking the lease from someone else (or from nobody) increments `leaseTransitions` and
//!   sets `acquireTime`; renewing our own lease keeps both.
//! - The leader steps down as soon as `renew_deadline` has passed since its last successful
//!   renew. Because `renew_deadline < lease_duration`, it stops acting before any other
//!   candidate can consider the lease expired.
//! - Seeing another holder on the lease while we think we lead means we lost it: step down at
//!   once.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// The fields of a Lease's spec that leader election reads and writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRecord {
    /// `holderIdentity`; `None` or empty means nobody holds the lease.
    pub holder: Option<String>,
    /// `leaseDurationSeconds`.
    pub lease_duration_seconds: i32,
    /// `acquireTime`: when the current holder took the lease.
    pub acquire_time: Option<Timestamp>,
    /// `renewTime`: when the holder last renewed.
    pub renew_time: Option<Timestamp>,
    /// `leaseTransitions`: how many times the lease changed hands.
    pub transitions: i32,
}

impl LeaseRecord {
    fn holder(&self) -> Option<&str> {
        self.holder.as_deref().filter(|h| !h.is_empty())
    }
}

/// A Lease as read from (or written to) the API server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedLease {
    /// The leader-election fields.
    pub record: LeaseRecord,
    /// `metadata.resourceVersion`, sent back on the next write.
    pub resource_version: String,
}

/// What the runner should write next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// The Lease does not exist: create it with this record.
    Create(LeaseRecord),
    /// Replace the Lease's spec with this record, only if it still has `resource_version`.
    Update {
        /// The record to write.
        record: LeaseRecord,
        /// The resourceVersion the write is conditional on.
        resource_version: String,
    },
    /// Someone else holds a live lease; try again after the retry period.
    Wait,
}

/// Whether this process may act.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// We hold the lease and renewed it within the renew deadline.
    Leading,
    /// We do not hold the lease; `holder` is who does, when known.
    Following {
        /// The identity of the current holder, if any.
        holder: Option<String>,
    },
}

/// Leader-election state for one candidate.
#[derive(Clone, Debug)]
pub struct Election {
    identity: String,
    lease_duration: Duration,
    renew_deadline: Duration,
    /// The last record seen and when (our clock) it was first seen unchanged.
    observed: Option<(LeaseRecord, Timestamp)>,
    /// When our last successful acquire or renew completed, while we consider ourselves leader.
    last_renew: Option<Timestamp>,
}

impl Election {
    /// A candidate with this identity. `renew_deadline` must be below `lease_duration`
    /// (checked by the caller's configuration).
    pub fn new(
        identity: impl Into<String>,
        lease_duration: Duration,
        renew_deadline: Duration,
    ) -> Self {
        Self {
            identity: identity.into(),
            lease_duration,
            renew_deadline,
            observed: None,
            last_renew: None,
        }
    }

    /// Our identity as written to `holderIdentity`.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    fn observe(&mut self, record: &LeaseRecord, now: Timestamp) {
        let changed = self
            .observed
            .as_ref()
            .is_none_or(|(seen, _)| seen != record);
        if changed {
            self.observed = Some((record.clone(), now));
        }
    }

    fn our_record(&self, now: Timestamp, previous: Option<&LeaseRecord>) -> LeaseRecord {
        let lease_duration_seconds =
            i32::try_from(self.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        match previous {
            // Renewing our own lease: keep acquireTime and the transition count.
            Some(prev) if prev.holder() == Some(self.identity.as_str()) => LeaseRecord {
                holder: Some(self.identity.clone()),
                lease_duration_seconds,
                acquire_time: prev.acquire_time.or(Some(now)),
                renew_time: Some(now),
                transitions: prev.transitions,
            },
            // Taking over (from someone, or from a released lease): a new transition.
            Some(prev) => LeaseRecord {
                holder: Some(self.identity.clone()),
                lease_duration_seconds,
                acquire_time: Some(now),
                renew_time: Some(now),
                transitions: prev.transitions.saturating_add(1),
            },
            None => LeaseRecord {
                holder: Some(self.identity.clone()),
                lease_duration_seconds,
                acquire_time: Some(now),
                renew_time: Some(now),
                transitions: 0,
            },
        }
    }

    /// Decides what to write given the Lease as just read (`None` when it does not exist).
    pub fn plan(&mut self, current: Option<&ObservedLease>, now: Timestamp) -> Plan {
        let Some(current) = current else {
            return Plan::Create(self.our_record(now, None));
        };
        self.observe(&current.record, now);
        let update = |record| Plan::Update {
            record,
            resource_version: current.resource_version.clone(),
        };
        match current.record.holder() {
            Some(holder) if holder == self.identity => {
                update(self.our_record(now, Some(&current.record)))
            }
            None => update(self.our_record(now, Some(&current.record))),
            Some(_) => {
                // Someone else holds it: if we thought we led, we have lost it.
                self.last_renew = None;
                if self.is_expired(now) {
                    update(self.our_record(now, Some(&current.record)))
                } else {
                    Plan::Wait
                }
            }
        }
    }

    /// True when the observed record has not changed for its lease duration (our clock).
    fn is_expired(&self, now: Timestamp) -> bool {
        let Some((record, seen_at)) = &self.observed else {
            return true;
        };
        let duration = SignedDuration::from_secs(i64::from(record.lease_duration_seconds.max(0)));
        seen_at
            .checked_add(duration)
            .is_ok_and(|expiry| expiry <= now)
    }

    /// When the Lease as last observed expires on our clock, if someone else holds it: the
    /// instant from which [`Election::plan`] would take it. `None` for our own Lease, a free
    /// one, or one not read yet.
    pub fn expiry_at(&self) -> Option<Timestamp> {
        let (record, seen_at) = self.observed.as_ref()?;
        if record.holder()? == self.identity {
            return None;
        }
        let duration = SignedDuration::from_secs(i64::from(record.lease_duration_seconds.max(0)));
        seen_at.checked_add(duration).ok()
    }

    /// The write succeeded; `written` is the Lease the server returned.
    pub fn on_written(&mut self, written: &ObservedLease, now: Timestamp) {
        self.observed = Some((written.record.clone(), now));
        if written.record.holder() == Some(self.identity.as_str()) {
            self.last_renew = Some(now);
        } else {
            self.last_renew = None;
        }
    }

    /// The read or write failed (conflict, network, server error). Nothing to record: the
    /// renew deadline keeps running from the last success, and a conflict means someone else
    /// wrote, which the next read will show.
    pub fn on_write_failed(&mut self, _now: Timestamp) {}

    /// Whether we may act at `now`. Demotes us when the renew deadline has passed.
    pub fn status(&mut self, now: Timestamp) -> Status {
        if let Some(deadline) = self.renew_deadline_at() {
            if now < deadline {
                return Status::Leading;
            }
            self.last_renew = None;
        }
        Status::Following {
            holder: self
                .observed
                .as_ref()
                .and_then(|(record, _)| record.holder().map(str::to_owned))
                .filter(|holder| *holder != self.identity),
        }
    }

    /// When we must step down unless a renew succeeds first (`None` when not leading).
    pub fn renew_deadline_at(&self) -> Option<Timestamp> {
        let last = self.last_renew?;
        let deadline = SignedDuration::try_from(self.renew_deadline).ok()?;
        last.checked_add(deadline).ok()
    }

    /// Prepares the release write on shutdown. Steps down at once (before the write), so we never
    /// act after deciding to release. Returns `None` when the lease is not ours.
    ///
    /// The released record has no holder and a one-second duration, so any candidate takes it
    /// on its next attempt instead of waiting for a full lease duration.
    pub fn release(&mut self, current: &ObservedLease, now: Timestamp) -> Option<Plan> {
        self.last_renew = None;
        if current.record.holder() != Some(self.identity.as_str()) {
            return None;
        }
        Some(Plan::Update {
            record: LeaseRecord {
                holder: None,
                lease_duration_seconds: 1,
                acquire_time: Some(now),
                renew_time: Some(now),
                transitions: current.record.transitions,
            },
            resource_version: current.resource_version.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: SignedDuration = SignedDuration::from_secs(1);

    fn t(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + seconds).unwrap()
    }

    fn election(id: &str) -> Election {
        Election::new(id, Duration::from_secs(15), Duration::from_secs(10))
    }

    /// A Lease held by `holder`, renewed at `renewed`, with resourceVersion `rv`.
    fn lease(holder: Option<&str>, renewed: i64, transitions: i32, rv: &str) -> ObservedLease {
        ObservedLease {
            record: LeaseRecord {
                holder: holder.map(str::to_owned),
                lease_duration_seconds: 15,
                acquire_time: Some(t(0)),
                renew_time: Some(t(renewed)),
                transitions,
            },
            resource_version: rv.to_owned(),
        }
    }

    /// What the server returns after accepting `plan` on a lease with resourceVersion `rv`.
    fn accept(plan: &Plan, rv: &str) -> ObservedLease {
        let record = match plan {
            Plan::Create(record) | Plan::Update { record, .. } => record.clone(),
            Plan::Wait => panic!("nothing to accept"),
        };
        ObservedLease {
            record,
            resource_version: rv.to_owned(),
        }
    }

    #[test]
    fn creates_a_missing_lease_and_leads() {
        let mut e = election("a");
        let plan = e.plan(None, t(0));
        let Plan::Create(record) = &plan else {
            panic!("{plan:?}")
        };
        assert_eq!(record.holder.as_deref(), Some("a"));
        assert_eq!(record.transitions, 0);
        assert_eq!(record.lease_duration_seconds, 15);
        assert_eq!(record.acquire_time, Some(t(0)));
        assert_eq!(e.status(t(0)), Status::Following { holder: None });
        e.on_written(&accept(&plan, "1"), t(0));
        assert_eq!(e.status(t(1)), Status::Leading);
    }

    #[test]
    fn waits_on_a_live_lease_held_by_another() {
        let mut e = election("b");
        let held = lease(Some("a"), 0, 3, "7");
        assert_eq!(e.plan(Some(&held), t(100)), Plan::Wait);
        assert_eq!(
            e.status(t(100)),
            Status::Following {
                holder: Some("a".into())
            }
        );
        // The holder keeps renewing: each new record restarts our expiry clock.
        assert_eq!(
            e.plan(Some(&lease(Some("a"), 10, 3, "8")), t(110)),
            Plan::Wait
        );
        assert_eq!(
            e.plan(Some(&lease(Some("a"), 20, 3, "9")), t(124)),
            Plan::Wait
        );
        assert_eq!(
            e.plan(Some(&lease(Some("a"), 20, 3, "9")), t(138)),
            Plan::Wait
        );
    }

    #[test]
    fn takes_over_an_expired_lease_incrementing_transitions() {
        // upstream: client-go tools/leaderelection/leaderelection_test.go
        // "acquire from led, unacked object" / "acquire from unled, expired object".
        let mut e = election("b");
        let stale = lease(Some("a"), 0, 3, "7");
        assert_eq!(e.plan(Some(&stale), t(100)), Plan::Wait);
        // Unchanged for 14 s: not yet.
        assert_eq!(e.plan(Some(&stale), t(114)), Plan::Wait);
        // Unchanged for the full lease duration (15 s), measured from our first sighting — not
        // from its renewTime, which is 100 s old on our clock.
        let plan = e.plan(Some(&stale), t(115));
        let Plan::Update {
            record,
            resource_version,
        } = &plan
        else {
            panic!("{plan:?}")
        };
        assert_eq!(resource_version, "7");
        assert_eq!(record.holder.as_deref(), Some("b"));
        assert_eq!(record.transitions, 4);
        assert_eq!(record.acquire_time, Some(t(115)));
        assert_eq!(record.renew_time, Some(t(115)));
        e.on_written(&accept(&plan, "8"), t(115));
        assert_eq!(e.status(t(115)), Status::Leading);
    }

    #[test]
    fn renewal_keeps_acquire_time_and_transitions() {
        let mut e = election("a");
        let ours = lease(Some("a"), 0, 2, "5");
        let plan = e.plan(Some(&ours), t(4));
        let Plan::Update { record, .. } = &plan else {
            panic!("{plan:?}")
        };
        assert_eq!(record.transitions, 2);
        assert_eq!(record.acquire_time, Some(t(0)));
        assert_eq!(record.renew_time, Some(t(4)));
    }

    #[test]
    fn takes_a_released_lease_at_once() {
        let mut e = election("b");
        let released = lease(None, 50, 4, "12");
        let plan = e.plan(Some(&released), t(51));
        let Plan::Update { record, .. } = &plan else {
            panic!("{plan:?}")
        };
        assert_eq!(record.holder.as_deref(), Some("b"));
        assert_eq!(record.transitions, 5);
        // An empty string holder is also "released".
        let mut e = election("c");
        let empty = lease(Some(""), 50, 4, "12");
        assert!(matches!(e.plan(Some(&empty), t(51)), Plan::Update { .. }));
    }

    #[test]
    fn renew_failures_step_down_after_the_renew_deadline() {
        let mut e = election("a");
        let plan = e.plan(None, t(0));
        e.on_written(&accept(&plan, "1"), t(0));
        // Renews fail (API unreachable) at 2, 4, 6, 8 s: still leading inside the deadline.
        for s in [2, 4, 6, 8] {
            e.on_write_failed(t(s));
            assert_eq!(e.status(t(s)), Status::Leading, "at {s}s");
        }
        assert_eq!(e.renew_deadline_at(), Some(t(10)));
        assert_eq!(e.status(t(9) + SECOND / 2), Status::Leading);
        // At the deadline: step down, and stay down.
        assert_eq!(e.status(t(10)), Status::Following { holder: None });
        assert_eq!(e.status(t(11)), Status::Following { holder: None });
        assert_eq!(e.renew_deadline_at(), None);
    }

    #[test]
    fn a_successful_renew_moves_the_deadline() {
        let mut e = election("a");
        let plan = e.plan(None, t(0));
        e.on_written(&accept(&plan, "1"), t(0));
        let plan = e.plan(Some(&accept(&plan, "1")), t(8));
        e.on_written(&accept(&plan, "2"), t(8));
        assert_eq!(e.renew_deadline_at(), Some(t(18)));
        assert_eq!(e.status(t(17)), Status::Leading);
    }

    #[test]
    fn stepped_down_leader_renews_again_if_the_lease_is_still_its_own() {
        let mut e = election("a");
        let plan = e.plan(None, t(0));
        let first = accept(&plan, "1");
        e.on_written(&first, t(0));
        assert!(matches!(e.status(t(12)), Status::Following { .. }));
        // The API comes back before anyone took over: the lease still names us.
        let plan = e.plan(Some(&first), t(13));
        let Plan::Update { record, .. } = &plan else {
            panic!("{plan:?}")
        };
        assert_eq!(
            record.transitions, 0,
            "renewing our own lease is not a transition"
        );
        e.on_written(&accept(&plan, "2"), t(13));
        assert_eq!(e.status(t(13)), Status::Leading);
    }

    #[test]
    fn conflicting_writer_wins_and_we_follow() {
        // Two candidates see the same released lease; both plan an update on rv 12. The server
        // accepts b's and answers a's with 409 Conflict.
        let released = lease(None, 50, 4, "12");
        let mut a = election("a");
        let mut b = election("b");
        let plan_a = a.plan(Some(&released), t(60));
        let plan_b = b.plan(Some(&released), t(60));
        let written = accept(&plan_b, "13");
        b.on_written(&written, t(60));
        a.on_write_failed(t(60));
        assert_eq!(b.status(t(60)), Status::Leading);
        assert!(matches!(a.status(t(60)), Status::Following { .. }));
        assert!(matches!(plan_a, Plan::Update { .. }));
        // Next round a reads b's fresh lease and waits.
        assert_eq!(a.plan(Some(&written), t(62)), Plan::Wait);
        assert_eq!(
            a.status(t(62)),
            Status::Following {
                holder: Some("b".into())
            }
        );
    }

    #[test]
    fn seeing_another_holder_while_leading_steps_down_at_once() {
        let mut e = election("a");
        let plan = e.plan(None, t(0));
        e.on_written(&accept(&plan, "1"), t(0));
        assert_eq!(e.status(t(1)), Status::Leading);
        let stolen = lease(Some("b"), 2, 1, "3");
        assert_eq!(e.plan(Some(&stolen), t(2)), Plan::Wait);
        assert_eq!(
            e.status(t(2)),
            Status::Following {
                holder: Some("b".into())
            }
        );
    }

    #[test]
    fn release_clears_the_holder_and_steps_down_first() {
        let mut e = election("a");
        let plan = e.plan(None, t(0));
        let ours = accept(&plan, "1");
        e.on_written(&ours, t(0));
        let release = e.release(&ours, t(5)).unwrap();
        assert!(matches!(e.status(t(5)), Status::Following { .. }));
        let Plan::Update {
            record,
            resource_version,
        } = &release
        else {
            panic!("{release:?}")
        };
        assert_eq!(resource_version, "1");
        assert_eq!(record.holder, None);
        assert_eq!(record.lease_duration_seconds, 1);
        assert_eq!(record.transitions, 0);
        // A successor takes it on its very next attempt.
        let mut b = election("b");
        let released = accept(&release, "2");
        assert!(matches!(b.plan(Some(&released), t(5)), Plan::Update { .. }));
    }

    /// How one simulated request round ends.
    #[derive(Clone, Copy, Debug)]
    enum Outcome {
        /// Read and write both reach the server and the answer comes back.
        Ok,
        /// The read fails: nothing reaches the server.
        ReadFails,
        /// The write is applied by the server but the answer is lost.
        AnswerLost,
    }

    fn outcome() -> impl proptest::strategy::Strategy<Value = Outcome> {
        use proptest::prelude::*;
        prop_oneof![
            6 => Just(Outcome::Ok),
            2 => Just(Outcome::ReadFails),
            1 => Just(Outcome::AnswerLost),
        ]
    }

    proptest::proptest! {
        /// Whatever the interleaving, delays and failures, two candidates never both consider
        /// themselves leader at the same instant (one shared clock, a linearizable store).
        #[test]
        fn never_two_leaders(
            steps in proptest::collection::vec(
                (0u64..4_000, proptest::bool::ANY, outcome()),
                1..200,
            )
        ) {
            let mut candidates = [election("a"), election("b")];
            let mut stored: Option<ObservedLease> = None;
            let mut version = 0u64;
            let mut now = t(0);
            for (advance_ms, second, outcome) in steps {
                now += SignedDuration::from_millis(i64::try_from(advance_ms).unwrap());
                let e = &mut candidates[usize::from(second)];
                if let Outcome::ReadFails = outcome {
                    e.on_write_failed(now);
                } else {
                    let plan = e.plan(stored.as_ref(), now);
                    let applied = match (&plan, &stored) {
                        (Plan::Create(record), None) => Some(record.clone()),
                        (Plan::Update { record, resource_version }, Some(current))
                            if *resource_version == current.resource_version =>
                        {
                            Some(record.clone())
                        }
                        _ => None,
                    };
                    if let Some(record) = applied.filter(|_| !matches!(plan, Plan::Wait)) {
                        version += 1;
                        let written = ObservedLease { record, resource_version: version.to_string() };
                        stored = Some(written.clone());
                        if let Outcome::Ok = outcome {
                            e.on_written(&written, now);
                        } else {
                            e.on_write_failed(now);
                        }
                    } else if !matches!(plan, Plan::Wait) {
                        e.on_write_failed(now);
                    }
                }
                let leading = candidates
                    .iter_mut()
                    .map(|c| c.status(now))
                    .filter(|status| *status == Status::Leading)
                    .count();
                proptest::prop_assert!(leading <= 1, "two leaders at {now}");
            }
        }
    }

    #[test]
    fn release_of_someone_elses_lease_writes_nothing() {
        let mut e = election("a");
        assert_eq!(e.release(&lease(Some("b"), 0, 1, "4"), t(1)), None);
    }
}
