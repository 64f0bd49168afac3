//! The shard-assignment state machine: pure, no I/O, the clock is a parameter.
//!
//! Work is split into `N` shards, each guarded by its own Lease (`<lease>-shard-<i>`). Every
//! replica runs one [`Assignment`]: each round the runner reads all the Leases, asks
//! [`Assignment::plan`] which to write, writes them with their `resourceVersion`, and reports
//! each result back. Each shard Lease is run by an [`Election`] of its own, so every timing rule
//! of leader election holds per shard (expiry measured on our clock, the holder stops acting at
//! its renew deadline, before anyone may take the Lease over; a conflict means someone else won).
//! What this module adds is *which* shards to contend for:
//!
//! - **Live replicas** are this replica, the holders of shard Leases that have not expired, and
//!   the holder of the *join* Lease (`<lease>-shard-join`): a replica that holds fewer than its
//!   share while no shard is free holds the join Lease, so that the others see it and make room.
//! - With `r` live replicas each replica's share is between `floor(N / r)` and `ceil(N / r)`.
//! - **Take**: free shards (no holder, or expired) while holding fewer than `ceil(N / r)`, or
//!   fewer than `floor(N / r)` while another replica starves (holds less than `floor(N / r)`):
//!   the room made for it is not taken back.
//! - **Release**: shards above `ceil(N / r)`; and one shard, by the busiest replica (ties go to
//!   the smallest identity), while another replica starves and no shard is free.
//! - **Releasing is two steps**: the shard is first *drained* — it stops being acting, so no new
//!   work starts on it, and its Lease keeps being renewed — and only once the runner reports it
//!   idle (no work in flight) is the release written (no holder, one-second duration). A new
//!   holder therefore never overlaps work of the old one.
//!
//! Invariant (inherited from [`Election`] and checked by a property test): at any instant, on one
//! clock, no shard is held by two replicas.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;

use super::super::election::{Election, ObservedLease, Plan, Status};

/// Which Lease a write is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    /// The Lease of shard `i` (`0 ≤ i < N`).
    Shard(u32),
    /// The join Lease, held by a replica waiting for room.
    Join,
}

/// The Leases as read at the start of a round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// Shard `i`'s Lease at index `i`; `None` when it does not exist.
    pub shards: Vec<Option<ObservedLease>>,
    /// The join Lease, if it exists.
    pub join: Option<ObservedLease>,
    /// The single-leader Lease of the same component (`<lease>`), if it exists: held by a
    /// replica of a version, or a `--shards 1` configuration, that knows nothing of shards.
    pub single: Option<ObservedLease>,
}

impl Observed {
    fn lease(&self, target: Target) -> Option<&ObservedLease> {
        match target {
            Target::Shard(i) => self.shards.get(i as usize).and_then(Option::as_ref),
            Target::Join => self.join.as_ref(),
        }
    }
}

/// Who holds a shard, as this replica sees it this round.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Holder {
    /// The Lease names us.
    Us,
    /// Another replica holds a live Lease.
    Other(String),
    /// Nobody: missing, released or expired.
    Free,
}

/// Shard assignment for one replica.
#[derive(Clone, Debug)]
pub struct Assignment {
    identity: String,
    shards: Vec<Election>,
    join: Election,
    /// Only observes the single-leader Lease, to see whether its holder is alive; never writes.
    single: Election,
    /// Shards being given up: not acting, renewed until idle, then released.
    draining: BTreeSet<u32>,
    /// Where this replica starts looking for free shards (spreads contention).
    offset: u32,
    /// The `now` of the last [`Assignment::plan`]: expiries up to it have been acted on.
    planned_at: Option<Timestamp>,
}

impl Assignment {
    /// A replica with this identity among `shards` shards (at least 1). `renew_deadline` must be
    /// below `lease_duration` (checked by the caller's configuration).
    pub fn new(
        identity: impl Into<String>,
        shards: u32,
        lease_duration: Duration,
        renew_deadline: Duration,
    ) -> Self {
        let identity = identity.into();
        let shards = shards.max(1);
        let election = || Election::new(identity.clone(), lease_duration, renew_deadline);
        Self {
            offset: super::shard_of(&identity, shards),
            shards: (0..shards).map(|_| election()).collect(),
            join: election(),
            single: election(),
            draining: BTreeSet::new(),
            planned_at: None,
            identity,
        }
    }

    /// Our identity, as written to `holderIdentity`.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The number of shards.
    pub fn count(&self) -> u32 {
        u32::try_from(self.shards.len()).unwrap_or(u32::MAX)
    }

    /// Decides this round's writes from the Leases just read. `idle(i)` says that no work on
    /// shard `i` is in flight; a drained shard is released only then.
    pub fn plan(
        &mut self,
        observed: &Observed,
        now: Timestamp,
        idle: impl Fn(u32) -> bool,
    ) -> Vec<(Target, Plan)> {
        self.planned_at = Some(now);
        let n = self.count();
        // Every shard's election observes its Lease (this is what measures expiry), and says
        // what it would write.
        let mut holders = Vec::with_capacity(self.shards.len());
        let mut plans = Vec::with_capacity(self.shards.len());
        for (i, election) in (0..n).zip(self.shards.iter_mut()) {
            let lease = observed.lease(Target::Shard(i));
            let plan = election.plan(lease, now);
            holders.push(classify(&self.identity, lease, &plan));
            plans.push(plan);
        }
        let join_lease = observed.lease(Target::Join);
        let join_plan = self.join.plan(join_lease, now);
        let join_holder = classify(&self.identity, join_lease, &join_plan);
        // A live single leader acts on every object: until its Lease expires or is released
        // (during a rollout from one mode to the other), no shard is taken, so no object is
        // written by both.
        let single_plan = self.single.plan(observed.single.as_ref(), now);
        let single_leader = matches!(
            classify(&self.identity, observed.single.as_ref(), &single_plan),
            Holder::Other(_)
        );

        // A drained shard that someone else now holds is no longer ours to release.
        self.draining
            .retain(|i| holders.get(*i as usize) == Some(&Holder::Us));

        let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
        for holder in &holders {
            if let Holder::Other(h) = holder {
                *counts.entry(h.as_str()).or_default() += 1;
            }
        }
        if let Holder::Other(h) = &join_holder {
            counts.entry(h.as_str()).or_default();
        }
        // Ours and not draining before this round.
        let ours: Vec<u32> = (0..n)
            .filter(|i| holders[*i as usize] == Holder::Us && !self.draining.contains(i))
            .collect();
        let kept = u32::try_from(ours.len()).unwrap_or(u32::MAX);
        let live = u32::try_from(counts.len()).unwrap_or(u32::MAX - 1) + 1;
        let (floor, ceil) = (n / live, n.div_ceil(live));
        let others_starve = counts.values().any(|c| *c < floor);
        let free: Vec<u32> = (0..n)
            .map(|k| (k + self.offset) % n)
            .filter(|i| holders[*i as usize] == Holder::Free)
            .collect();

        // Release: everything above the ceiling; or one shard for a starving replica, by the
        // busiest (ties to the smallest identity), when nothing is free.
        let busiest = counts
            .iter()
            .map(|(h, c)| (*c, std::cmp::Reverse(*h)))
            .chain(std::iter::once((
                kept,
                std::cmp::Reverse(self.identity.as_str()),
            )))
            .max()
            .is_some_and(|(_, std::cmp::Reverse(h))| h == self.identity);
        let excess = if kept > ceil {
            kept - ceil
        } else {
            u32::from(others_starve && free.is_empty() && kept > floor && busiest)
        };
        for i in ours.iter().rev().take(excess as usize) {
            self.draining.insert(*i);
        }
        let kept = kept - excess;
        // Only a shard drained in an earlier round may be released: the runner has published
        // since that it is not acting, so `idle` cannot be overtaken by new work.
        let releasable: BTreeSet<u32> = self
            .draining
            .iter()
            .copied()
            .filter(|i| !ours.contains(i) && idle(*i))
            .collect();

        // Take: free shards up to the share (the floor while another replica starves).
        let limit = if others_starve { floor.max(kept) } else { ceil };
        let take: BTreeSet<u32> = if self.draining.is_empty() && !single_leader {
            free.iter()
                .copied()
                .take(limit.saturating_sub(kept) as usize)
                .collect()
        } else {
            BTreeSet::new()
        };

        let mut writes = Vec::new();
        for (i, (holder, plan)) in (0..n).zip(holders.iter().zip(plans)) {
            let target = Target::Shard(i);
            match holder {
                Holder::Us if releasable.contains(&i) => {
                    let release = observed
                        .lease(target)
                        .and_then(|lease| self.shards[i as usize].release(lease, now));
                    writes.extend(release.map(|plan| (target, plan)));
                }
                Holder::Us => writes.push((target, plan)),
                Holder::Free if take.contains(&i) => writes.push((target, plan)),
                Holder::Free | Holder::Other(_) => {}
            }
        }

        // The join Lease: held while we starve and nothing is free, released as soon as not.
        let starving = !single_leader
            && kept + u32::try_from(take.len()).unwrap_or(0) < floor
            && free.is_empty();
        match (starving, &join_holder) {
            (true, Holder::Us | Holder::Free) => writes.push((Target::Join, join_plan)),
            (false, Holder::Us) => {
                let release = join_lease.and_then(|lease| self.join.release(lease, now));
                writes.extend(release.map(|plan| (Target::Join, plan)));
            }
            _ => {}
        }
        writes
    }

    fn election(&mut self, target: Target) -> Option<&mut Election> {
        match target {
            Target::Shard(i) => self.shards.get_mut(i as usize),
            Target::Join => Some(&mut self.join),
        }
    }

    /// A write succeeded; `written` is the Lease the server returned.
    pub fn on_written(&mut self, target: Target, written: &ObservedLease, now: Timestamp) {
        if let Target::Shard(i) = target
            && written.record.holder.as_deref().is_none_or(str::is_empty)
        {
            // Released.
            self.draining.remove(&i);
        }
        if let Some(election) = self.election(target) {
            election.on_written(written, now);
        }
    }

    /// A read or write failed; the renew deadlines keep running from the last success.
    pub fn on_write_failed(&mut self, target: Target, now: Timestamp) {
        if let Some(election) = self.election(target) {
            election.on_write_failed(now);
        }
    }

    /// The shards this replica holds at `now` (renewed within the renew deadline), including
    /// the ones being drained: work already running on them may still write.
    pub fn held(&mut self, now: Timestamp) -> BTreeSet<u32> {
        (0..self.count())
            .zip(self.shards.iter_mut())
            .filter_map(|(i, e)| (e.status(now) == Status::Leading).then_some(i))
            .collect()
    }

    /// The shards new work may start on at `now`: held and not being drained.
    pub fn acting(&mut self, now: Timestamp) -> BTreeSet<u32> {
        let mut held = self.held(now);
        held.retain(|i| !self.draining.contains(i));
        held
    }

    /// The earliest renew deadline among the held shards: the runner must wake up by then.
    pub fn renew_deadline_at(&self) -> Option<Timestamp> {
        self.shards
            .iter()
            .filter_map(Election::renew_deadline_at)
            .min()
    }

    /// The earliest instant after the last plan at which a Lease another replica holds expires
    /// (a shard, the join Lease, or the single leader's). Planning again then, rather than at
    /// the next retry tick, takes a dead replica's shards as soon as the rules allow: up to a
    /// retry period sooner.
    pub fn next_expiry_at(&self) -> Option<Timestamp> {
        let after = self.planned_at?;
        self.shards
            .iter()
            .chain([&self.join, &self.single])
            .filter_map(Election::expiry_at)
            .filter(|expiry| *expiry > after)
            .min()
    }

    /// Stops acting on everything and prepares the release writes of every Lease that still
    /// names us (shutdown, after the work ended).
    pub fn release_all(&mut self, observed: &Observed, now: Timestamp) -> Vec<(Target, Plan)> {
        let mut writes = Vec::new();
        for (i, election) in (0..self.count()).zip(self.shards.iter_mut()) {
            let target = Target::Shard(i);
            if let Some(lease) = observed.lease(target) {
                writes.extend(election.release(lease, now).map(|plan| (target, plan)));
            }
        }
        if let Some(lease) = observed.lease(Target::Join) {
            writes.extend(
                self.join
                    .release(lease, now)
                    .map(|plan| (Target::Join, plan)),
            );
        }
        self.draining.clear();
        writes
    }
}

/// Who holds `lease`, given what its election planned.
fn classify(identity: &str, lease: Option<&ObservedLease>, plan: &Plan) -> Holder {
    let holder = lease
        .and_then(|l| l.record.holder.as_deref())
        .filter(|h| !h.is_empty());
    match (holder, plan) {
        (Some(h), _) if h == identity => Holder::Us,
        // The election waits only on a live Lease held by someone else.
        (Some(h), Plan::Wait) => Holder::Other(h.to_owned()),
        _ => Holder::Free,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;

    use super::super::super::election::LeaseRecord;

    fn t(millis: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000).unwrap() + SignedDuration::from_millis(millis)
    }

    /// An in-memory set of Leases with API-server semantics (resourceVersion checks).
    #[derive(Default)]
    struct Store {
        observed: Observed,
        version: u64,
    }

    impl Store {
        fn new(n: u32) -> Self {
            Self {
                observed: Observed {
                    shards: vec![None; n as usize],
                    join: None,
                    single: None,
                },
                version: 0,
            }
        }

        fn slot(&mut self, target: Target) -> &mut Option<ObservedLease> {
            match target {
                Target::Shard(i) => &mut self.observed.shards[i as usize],
                Target::Join => &mut self.observed.join,
            }
        }

        /// Applies `plan` if its precondition holds; the Lease as written.
        fn apply(&mut self, target: Target, plan: &Plan) -> Option<ObservedLease> {
            self.version += 1;
            let version = self.version.to_string();
            let slot = self.slot(target);
            let record = match (plan, &*slot) {
                (Plan::Create(record), None) => record.clone(),
                (
                    Plan::Update {
                        record,
                        resource_version,
                    },
                    Some(current),
                ) if *resource_version == current.resource_version => record.clone(),
                _ => return None,
            };
            let written = ObservedLease {
                record,
                resource_version: version,
            };
            *slot = Some(written.clone());
            Some(written)
        }

        fn holder(&self, i: u32) -> Option<String> {
            self.observed.shards[i as usize]
                .as_ref()
                .and_then(|l| l.record.holder.clone())
        }
    }

    fn replica(id: &str, n: u32) -> Assignment {
        Assignment::new(id, n, Duration::from_secs(4), Duration::from_secs(3))
    }

    /// One round of `replica` against `store` at `now`, every write answered.
    fn round(replica: &mut Assignment, store: &mut Store, now: Timestamp) {
        let observed = store.observed.clone();
        for (target, plan) in replica.plan(&observed, now, |_| true) {
            match store.apply(target, &plan) {
                Some(written) => replica.on_written(target, &written, now),
                None => replica.on_write_failed(target, now),
            }
        }
    }

    /// Runs rounds of every replica every 500 ms from `from` for `millis`.
    fn run(replicas: &mut [Assignment], store: &mut Store, from: i64, millis: i64) -> i64 {
        let mut now = from;
        while now < from + millis {
            for r in replicas.iter_mut() {
                round(r, store, t(now));
            }
            now += 500;
        }
        now
    }

    fn counts(replicas: &mut [Assignment], now: Timestamp) -> Vec<usize> {
        replicas.iter_mut().map(|r| r.acting(now).len()).collect()
    }

    #[test]
    fn a_single_replica_takes_every_shard() {
        let mut store = Store::new(6);
        let mut a = [replica("a", 6)];
        let now = run(&mut a, &mut store, 0, 500);
        assert_eq!(counts(&mut a, t(now)), [6]);
        assert!((0..6).all(|i| store.holder(i).as_deref() == Some("a")));
    }

    #[test]
    fn replicas_starting_together_share_fairly() {
        let mut store = Store::new(6);
        let mut rs = [replica("a", 6), replica("b", 6), replica("c", 6)];
        let now = run(&mut rs, &mut store, 0, 20_000);
        assert_eq!(counts(&mut rs, t(now)), [2, 2, 2]);
    }

    /// A single leader's Lease (`version` bumped on each renewal by the old leader).
    fn single_leader(holder: Option<&str>, version: u64, now: Timestamp) -> ObservedLease {
        ObservedLease {
            record: LeaseRecord {
                holder: holder.map(str::to_owned),
                lease_duration_seconds: 4,
                acquire_time: Some(t(0)),
                renew_time: Some(now),
                transitions: 0,
            },
            resource_version: format!("single-{version}"),
        }
    }

    #[test]
    fn no_shard_is_taken_while_a_single_leader_is_alive() {
        let mut store = Store::new(4);
        let mut rs = vec![replica("a", 4), replica("b", 4)];
        // The old single leader renews every 500 ms for 10 s: nobody takes a shard.
        let mut now = 0;
        for k in 0..20u64 {
            store.observed.single = Some(single_leader(Some("old-0"), k, t(now)));
            now = run(&mut rs, &mut store, now, 500);
        }
        assert_eq!(counts(&mut rs, t(now)), [0, 0]);
        assert!((0..4).all(|i| store.holder(i).is_none()));
        // It stops renewing (the old pod is gone): once the Lease has expired on our clock,
        // the shards are shared out.
        let now = run(&mut rs, &mut store, now, 10_000);
        let mut c = counts(&mut rs, t(now));
        c.sort_unstable();
        assert_eq!(c, [2, 2], "{c:?}");
        // A released single Lease (empty holder) is no obstacle either.
        let mut fresh = Store::new(2);
        fresh.observed.single = Some(single_leader(None, 0, t(0)));
        let mut solo = vec![replica("c", 2)];
        let now = run(&mut solo, &mut fresh, 0, 2_000);
        assert_eq!(counts(&mut solo, t(now)), [2]);
    }

    #[test]
    fn a_joining_replica_gets_its_share() {
        let mut store = Store::new(6);
        let mut rs = vec![replica("a", 6), replica("b", 6), replica("c", 6)];
        let now = run(&mut rs, &mut store, 0, 20_000);
        rs.push(replica("d", 6));
        let now = run(&mut rs, &mut store, now, 20_000);
        let mut c = counts(&mut rs, t(now));
        assert_eq!(c.iter().sum::<usize>(), 6);
        c.sort_unstable();
        assert_eq!(c, [1, 1, 2, 2], "{c:?}");
        // Nobody waits for room any more.
        assert!(
            store
                .observed
                .join
                .as_ref()
                .is_none_or(|l| l.record.holder.is_none())
        );
    }

    #[test]
    fn a_dead_replicas_shards_are_taken_after_expiry() {
        let mut store = Store::new(6);
        let mut rs = vec![replica("a", 6), replica("b", 6), replica("c", 6)];
        let now = run(&mut rs, &mut store, 0, 20_000);
        let dead: Vec<u32> = rs[2].acting(t(now)).into_iter().collect();
        rs.pop();
        // Within the lease duration (4 s) nobody takes them.
        let later = run(&mut rs, &mut store, now, 3_000);
        for i in &dead {
            assert_eq!(store.holder(*i).as_deref(), Some("c"), "at {later}");
        }
        let now = run(&mut rs, &mut store, later, 3_000);
        assert_eq!(counts(&mut rs, t(now)), [3, 3]);
    }

    #[test]
    fn the_next_expiry_is_a_lease_duration_after_the_last_renew_seen() {
        let mut store = Store::new(2);
        let mut rs = vec![replica("a", 2), replica("b", 2)];
        let now = run(&mut rs, &mut store, 0, 10_000);
        let ours: Vec<u32> = rs[0].acting(t(now)).into_iter().collect();
        assert_eq!(ours.len(), 1);
        // In the last round (at `now - 500`) a saw the renew b wrote in the round before.
        assert_eq!(rs[0].next_expiry_at(), Some(t(now - 500 + 4_000)));
        rs.pop();
        // b is gone. a sees b's last renew (written after a's last round) when it next looks;
        // the expiry counts from then, and stays there however often a looks again.
        let seen = now + 1_200;
        round(&mut rs[0], &mut store, t(seen));
        assert_eq!(rs[0].next_expiry_at(), Some(t(seen + 4_000)));
        round(&mut rs[0], &mut store, t(seen + 2_000));
        assert_eq!(rs[0].next_expiry_at(), Some(t(seen + 4_000)));
        // Just before the expiry the shard stays b's; planned at the expiry, a takes it, and no
        // other replica's Lease is left to expire.
        round(&mut rs[0], &mut store, t(seen + 3_999));
        assert_eq!(counts(&mut rs, t(seen + 3_999)), [1]);
        round(&mut rs[0], &mut store, t(seen + 4_000));
        assert_eq!(counts(&mut rs, t(seen + 4_000)), [2]);
        assert_eq!(rs[0].next_expiry_at(), None);
        // A newcomer waits on a's Leases: their expiry moves with each renew it sees.
        let mut c = replica("c", 2);
        round(&mut c, &mut store, t(seen + 4_100));
        assert_eq!(c.next_expiry_at(), Some(t(seen + 4_100 + 4_000)));
        round(&mut rs[0], &mut store, t(seen + 5_000));
        round(&mut c, &mut store, t(seen + 5_100));
        assert_eq!(c.next_expiry_at(), Some(t(seen + 5_100 + 4_000)));
    }

    #[test]
    fn more_replicas_than_shards_leave_standbys() {
        let mut store = Store::new(2);
        let mut rs = [replica("a", 2), replica("b", 2), replica("c", 2)];
        let now = run(&mut rs, &mut store, 0, 20_000);
        let mut c = counts(&mut rs, t(now));
        c.sort_unstable();
        assert_eq!(c, [0, 1, 1]);
    }

    #[test]
    fn a_drained_shard_stops_acting_and_is_released_only_when_idle() {
        let mut store = Store::new(2);
        let mut a = replica("a", 2);
        round(&mut a, &mut store, t(0));
        assert_eq!(a.acting(t(0)).len(), 2);
        // b waits for room on the join Lease.
        let mut b = replica("b", 2);
        round(&mut b, &mut store, t(100));
        assert_eq!(
            store
                .observed
                .join
                .as_ref()
                .and_then(|l| l.record.holder.as_deref()),
            Some("b")
        );
        // a drains shard 1 (the highest): it stops acting on it at once, keeps renewing it.
        round(&mut a, &mut store, t(500));
        assert_eq!(a.acting(t(500)), BTreeSet::from([0]));
        assert_eq!(a.held(t(500)), BTreeSet::from([0, 1]));
        // Work on it is still in flight: not released, still renewed.
        for at in [1000, 1500] {
            let observed = store.observed.clone();
            for (target, plan) in a.plan(&observed, t(at), |i| i != 1) {
                let written = store.apply(target, &plan).unwrap();
                a.on_written(target, &written, t(at));
            }
            assert_eq!(a.held(t(at)), BTreeSet::from([0, 1]), "at {at}");
            assert_eq!(store.holder(1).as_deref(), Some("a"));
        }
        // Idle now: released, then b takes it.
        round(&mut a, &mut store, t(2000));
        assert_eq!(store.holder(1), None);
        assert_eq!(a.held(t(2000)), BTreeSet::from([0]));
        round(&mut b, &mut store, t(2100));
        assert_eq!(b.acting(t(2100)), BTreeSet::from([1]));
    }

    #[test]
    fn release_all_clears_every_lease_we_hold() {
        let mut store = Store::new(3);
        let mut a = replica("a", 3);
        round(&mut a, &mut store, t(0));
        let observed = store.observed.clone();
        let writes = a.release_all(&observed, t(100));
        assert_eq!(writes.len(), 3);
        assert!(a.acting(t(100)).is_empty());
        for (target, plan) in &writes {
            store.apply(*target, plan).unwrap();
        }
        assert!((0..3).all(|i| store.holder(i).is_none()));
    }

    #[test]
    fn object_shards_are_stable() {
        // FNV-1a of the uid: the same uid maps to the same shard in every replica and release.
        assert_eq!(
            u64::from(super::super::shard_of("", 7)),
            0xcbf2_9ce4_8422_2325_u64 % 7
        );
        let uid = "0b7c5a3e-6d5f-4d7e-9a51-0d2f3c1b9e11";
        assert_eq!(
            super::super::shard_of(uid, 6),
            super::super::shard_of(uid, 6)
        );
        let spread: BTreeSet<u32> = (0..100)
            .map(|k| super::super::shard_of(&format!("uid-{k}"), 6))
            .collect();
        assert_eq!(spread.len(), 6);
    }

    /// How one simulated request round ends.
    #[derive(Clone, Copy, Debug)]
    enum Outcome {
        Ok,
        ReadFails,
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
        /// Whatever the interleaving, delays, failures, joins and leaves, no shard is held by
        /// two replicas at the same instant (one shared clock, a linearizable store).
        #[test]
        fn never_two_holders(
            steps in proptest::collection::vec(
                (0i64..1_500, 0usize..3, outcome(), proptest::bool::weighted(0.9)),
                1..300,
            )
        ) {
            let n = 5;
            let mut store = Store::new(n);
            let mut replicas = [replica("a", n), replica("b", n), replica("c", n)];
            let mut alive = [true; 3];
            let mut now = 0;
            for (advance, who, outcome, up) in steps {
                now += advance;
                // A replica that goes down stops running rounds (a crash: nothing released).
                alive[who] = up || !alive[who];
                if alive[who] {
                    let r = &mut replicas[who];
                    if let Outcome::ReadFails = outcome {
                        r.on_write_failed(Target::Join, t(now));
                    } else {
                        let observed = store.observed.clone();
                        for (target, plan) in r.plan(&observed, t(now), |_| true) {
                            match (store.apply(target, &plan), outcome) {
                                (Some(written), Outcome::Ok) => r.on_written(target, &written, t(now)),
                                _ => r.on_write_failed(target, t(now)),
                            }
                        }
                    }
                }
                for i in 0..n {
                    let holders = replicas.iter_mut().filter_map(|r| r.held(t(now)).contains(&i).then_some(())).count();
                    proptest::prop_assert!(holders <= 1, "shard {i} held twice at {now}");
                }
            }
        }
    }
}
