//! Sharding across replicas: each replica holds the Leases of a subset of `N` shards and acts
//! only on the objects of those shards.
//!
//! An object belongs to shard [`shard_of`]`(uid, N)`: FNV-1a (64 bit) of its uid, modulo `N`,
//! the same in every replica and every release. Shard `i` is guarded by the Lease
//! `<lease>-shard-<i>` (for hpa-plus `plimsoll-hpa-plus-shard-0` …), and a replica waiting for
//! room holds `<lease>-shard-join`. Which shards a replica contends for, takes and gives up is
//! decided by the pure state machine [`assignment`] (tested with an injected clock); this module
//! runs it against the API server — one List of the Leases of the namespace per retry period,
//! then the renewals, takes and releases it planned — and publishes the result in a
//! [`ShardHandle`].
//!
//! Guarantees, per shard (the same as [`super`]'s for the single Lease):
//! - A replica stops acting on a shard at the latest when `renew_deadline` has passed since its
//!   last successful renew of that shard's Lease, before anyone may take it over.
//! - A shard given up on purpose (rebalancing to a joining replica) first stops acting: new work
//!   cannot [`ShardHandle::enter`] it, and the Lease is released only once every
//!   [`ShardGuard`] of it has been dropped, i.e. the work in flight has finished its writes.
//! - On shutdown (after the service's work has ended) every Lease still naming us is released.
//!   If the runner task ends for any reason, the handle acts on nothing.
//!
//! With a single shard the [`ShardHandle`] is a view of the ordinary leader election
//! ([`ShardHandle::single`]): the one shard is held while leading.

pub mod assignment;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, ListParams};
use plimsoll_core::stable_hash::Fnv1a;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::election::{LeaseRecord, ObservedLease, Plan};
use super::lease_store::{KubeLeaseStore, LeaseOwner, LeaseStore};
use super::{Clock, LeaderConfig, LeaderHandle, LeaderState};
use crate::error::{Error, Result};
use assignment::{Assignment, Observed, Target};

/// The shard of an object: FNV-1a (64 bit) of its uid modulo `shards` (0 when `shards` ≤ 1).
pub fn shard_of(uid: &str, shards: u32) -> u32 {
    if shards <= 1 {
        return 0;
    }
    u32::try_from(Fnv1a::of(uid) % u64::from(shards)).unwrap_or(0)
}

/// Sharding settings for one service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardConfig {
    /// The election settings; `lease_name` is the base of the shard Leases' names.
    pub lease: LeaderConfig,
    /// The number of shards (`--shards`), at least 2.
    pub shards: u32,
}

impl ShardConfig {
    /// The name of `target`'s Lease: `<lease>-shard-<i>` or `<lease>-shard-join`.
    pub fn lease_name(&self, target: Target) -> String {
        match target {
            Target::Shard(i) => format!("{}-shard-{i}", self.lease.lease_name),
            Target::Join => format!("{}-shard-join", self.lease.lease_name),
        }
    }

    /// The election settings' checks, and at least two shards.
    pub fn validate(&self) -> Result<()> {
        self.lease.validate()?;
        if self.shards < 2 {
            return Err(Error::LeaderConfig(format!(
                "{} shards: sharding needs at least 2",
                self.shards
            )));
        }
        Ok(())
    }

    fn target_of(&self, name: &str) -> Option<Target> {
        let rest = name
            .strip_prefix(self.lease.lease_name.as_str())?
            .strip_prefix("-shard-")?;
        if rest == "join" {
            return Some(Target::Join);
        }
        let i: u32 = rest.parse().ok()?;
        (i < self.shards && rest == i.to_string()).then_some(Target::Shard(i))
    }
}

/// What the runner publishes, read under one lock with the in-flight counts so that a shard
/// cannot be entered after it was found idle.
#[derive(Debug)]
struct State {
    acting: Vec<bool>,
    held: Vec<bool>,
    in_flight: Vec<usize>,
    /// How many times each shard has started acting: a shard lost and taken back between two
    /// looks reads as taken.
    takes: Vec<u64>,
}

#[derive(Debug)]
struct Shared {
    count: u32,
    state: Mutex<State>,
    handovers: Family<[(&'static str, &'static str); 1], Counter>,
    /// Marked whenever a shard starts acting.
    taken: watch::Sender<()>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[derive(Clone, Debug)]
enum Mode {
    /// One shard, held while the election leads.
    Single(LeaderHandle),
    /// `N` shards run by a runner.
    Sharded(Arc<Shared>),
}

/// Which shards this replica acts on: gate work on [`ShardHandle::enter`] and each write on
/// [`ShardHandle::holds`]. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ShardHandle {
    mode: Mode,
}

impl ShardHandle {
    /// One shard, held exactly while `leader` leads (no sharding: today's single leader).
    pub fn single(leader: LeaderHandle) -> Self {
        Self {
            mode: Mode::Single(leader),
        }
    }

    /// The number of shards (1 without sharding).
    pub fn count(&self) -> u32 {
        match &self.mode {
            Mode::Single(_) => 1,
            Mode::Sharded(shared) => shared.count,
        }
    }

    /// True with more than one shard.
    pub fn is_sharded(&self) -> bool {
        matches!(self.mode, Mode::Sharded(_))
    }

    /// The shard of the object with this uid.
    pub fn shard_of(&self, uid: &str) -> u32 {
        shard_of(uid, self.count())
    }

    /// Starts work on the object `uid`: a guard while its shard is acting (held and not being
    /// given up), else `None`. Keep the guard until the work's last write: a shard is released
    /// only after its guards are dropped.
    pub fn enter(&self, uid: &str) -> Option<ShardGuard> {
        self.enter_shard(self.shard_of(uid))
    }

    /// [`ShardHandle::enter`] by shard number: for work that spans a whole shard (a service
    /// keeping per-shard state between passes holds this while the state is not persisted).
    pub fn enter_shard(&self, shard: u32) -> Option<ShardGuard> {
        match &self.mode {
            Mode::Single(leader) => {
                (shard == 0 && leader.is_leader()).then_some(ShardGuard { shard: None })
            }
            Mode::Sharded(inner) => {
                let mut state = inner.lock();
                let i = shard as usize;
                if !state.acting.get(i).copied().unwrap_or(false) {
                    return None;
                }
                state.in_flight[i] += 1;
                Some(ShardGuard {
                    shard: Some((inner.clone(), shard)),
                })
            }
        }
    }

    /// Whether this replica may write for the object `uid` now: its shard is held (renewed
    /// within the renew deadline). Check it right before each write.
    pub fn holds(&self, uid: &str) -> bool {
        self.holds_shard(self.shard_of(uid))
    }

    /// [`ShardHandle::holds`] by shard number.
    pub fn holds_shard(&self, shard: u32) -> bool {
        match &self.mode {
            Mode::Single(leader) => shard == 0 && leader.is_leader(),
            Mode::Sharded(inner) => inner
                .lock()
                .held
                .get(shard as usize)
                .copied()
                .unwrap_or(false),
        }
    }

    /// The shards new work may start on now.
    pub fn acting(&self) -> BTreeSet<u32> {
        match &self.mode {
            Mode::Single(leader) => {
                if leader.is_leader() {
                    BTreeSet::from([0])
                } else {
                    BTreeSet::new()
                }
            }
            Mode::Sharded(shared) => (0..shared.count)
                .zip(shared.lock().acting.iter())
                .filter(|(_, acting)| **acting)
                .map(|(i, _)| i)
                .collect(),
        }
    }

    /// The shards new work may start on now, each with the number of times it has started
    /// acting: compare with an earlier answer to find the shards taken since, even one lost and
    /// taken back in between.
    pub fn acting_takes(&self) -> BTreeMap<u32, u64> {
        match &self.mode {
            Mode::Single(_) => self.acting().into_iter().map(|i| (i, 0)).collect(),
            Mode::Sharded(shared) => {
                let state = shared.lock();
                (0..shared.count)
                    .zip(state.acting.iter().zip(&state.takes))
                    .filter(|(_, (acting, _))| **acting)
                    .map(|(i, (_, takes))| (i, *takes))
                    .collect()
            }
        }
    }

    /// With sharding, a receiver marked changed whenever this replica starts acting on a shard
    /// (then read [`ShardHandle::acting_takes`]); `None` without sharding.
    pub fn taken(&self) -> Option<watch::Receiver<()>> {
        match &self.mode {
            Mode::Single(_) => None,
            Mode::Sharded(shared) => Some(shared.taken.subscribe()),
        }
    }

    /// Registers `shards_held` (gauge, read at scrape time) and `shard_handovers_total{change}`
    /// (`acquired`, `released` on purpose, `lost` at the renew deadline) in `registry` (the
    /// service's prefixed sub-registry). Nothing without sharding.
    pub fn register_metrics(&self, registry: &mut Registry) {
        let Mode::Sharded(shared) = &self.mode else {
            return;
        };
        registry.register_collector(Box::new(HeldCollector(shared.clone())));
        registry.register(
            "shard_handovers",
            "Shard Leases this replica acquired, released on purpose, or lost",
            shared.handovers.clone(),
        );
    }
}

/// Work in progress on one shard; the shard is not released while it lives.
#[derive(Debug)]
#[must_use = "the shard may be released as soon as the guard is dropped"]
pub struct ShardGuard {
    shard: Option<(Arc<Shared>, u32)>,
}

impl Drop for ShardGuard {
    fn drop(&mut self) {
        if let Some((shared, shard)) = &self.shard {
            let mut state = shared.lock();
            let count = &mut state.in_flight[*shard as usize];
            *count = count.saturating_sub(1);
        }
    }
}

#[derive(Debug)]
struct HeldCollector(Arc<Shared>);

impl Collector for HeldCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let held = self.0.lock().acting.iter().filter(|a| **a).count();
        let gauge = ConstGauge::new(i64::try_from(held).unwrap_or(i64::MAX));
        let metric = encoder.encode_descriptor(
            "shards_held",
            "Shards this replica holds and acts on",
            None,
            gauge.metric_type(),
        )?;
        gauge.encode(metric)
    }
}

/// A running shard assignment.
#[derive(Debug)]
pub struct ShardElection {
    /// Gate work and writes on this.
    pub handle: ShardHandle,
    /// Leading while the runner runs (the service's work runs all along; the shards gate it),
    /// `Stopped` once it ended.
    pub leader: LeaderHandle,
    /// The runner; it ends after shutdown once the Leases are released. If it ends before
    /// shutdown was requested, the process should exit non-zero.
    pub task: JoinHandle<()>,
}

/// Runs shard assignment with these settings (validate them first).
pub fn spawn(client: Client, config: ShardConfig, shutdown: CancellationToken) -> ShardElection {
    let store = KubeShardStore::new(client, &config);
    spawn_with_store(store, config, shutdown, Timestamp::now())
}

fn spawn_with_store<S: ShardStore + 'static>(
    store: S,
    config: ShardConfig,
    shutdown: CancellationToken,
    wall_now: Timestamp,
) -> ShardElection {
    let n = config.shards as usize;
    let shared = Arc::new(Shared {
        count: config.shards,
        state: Mutex::new(State {
            acting: vec![false; n],
            held: vec![false; n],
            in_flight: vec![0; n],
            takes: vec![0; n],
        }),
        handovers: Family::default(),
        taken: watch::Sender::new(()),
    });
    let (tx, rx) = watch::channel(LeaderState::Leading);
    let clock = Clock::new(wall_now);
    let publisher = Publisher {
        shared: shared.clone(),
        leader: tx,
        lease: format!("{}/{}", config.lease.namespace, config.lease.lease_name),
    };
    let task = tokio::spawn(async move {
        run(&store, &config, &publisher, &shutdown, &clock).await;
    });
    ShardElection {
        handle: ShardHandle {
            mode: Mode::Sharded(shared),
        },
        leader: LeaderHandle { rx, _sender: None },
        task,
    }
}

/// Publishes the assignment (logging and counting changes); acts on nothing once dropped, so a
/// dying runner never leaves a stale shard behind.
struct Publisher {
    shared: Arc<Shared>,
    leader: watch::Sender<LeaderState>,
    lease: String,
}

impl Publisher {
    fn publish(&self, acting: &BTreeSet<u32>, held: &BTreeSet<u32>) {
        let lease = &self.lease;
        let mut state = self.shared.lock();
        let mut taken = false;
        for i in 0..self.shared.count {
            let k = i as usize;
            let (was_held, was_acting) = (state.held[k], state.acting[k]);
            let (now_held, now_acting) = (held.contains(&i), acting.contains(&i));
            if !was_held && now_held {
                tracing::info!(lease, shard = i, "acquired shard");
                self.count("acquired");
            } else if was_held && !now_held {
                if was_acting {
                    tracing::warn!(lease, shard = i, "lost shard (renew deadline passed)");
                    self.count("lost");
                } else {
                    tracing::info!(lease, shard = i, "released shard");
                    self.count("released");
                }
            } else if was_acting && !now_acting && now_held {
                tracing::info!(
                    lease,
                    shard = i,
                    "giving up shard: stopped acting, releasing once idle"
                );
            }
            if !was_acting && now_acting {
                state.takes[k] += 1;
                taken = true;
            }
            state.held[k] = now_held;
            state.acting[k] = now_acting;
        }
        drop(state);
        if taken {
            self.shared.taken.send_replace(());
        }
    }

    fn count(&self, change: &'static str) {
        self.shared
            .handovers
            .get_or_create(&[("change", change)])
            .inc();
    }

    fn idle(&self, shard: u32) -> bool {
        self.shared.lock().in_flight[shard as usize] == 0
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.acting.fill(false);
        state.held.fill(false);
        drop(state);
        self.leader.send_replace(LeaderState::Stopped);
    }
}

/// The assignment loop: one round per retry period until shutdown, then release.
async fn run<S: ShardStore>(
    store: &S,
    config: &ShardConfig,
    publisher: &Publisher,
    shutdown: &CancellationToken,
    clock: &Clock,
) {
    let lease = &config.lease;
    let mut assignment = Assignment::new(
        lease.identity.clone(),
        config.shards,
        lease.lease_duration,
        lease.renew_deadline,
    );
    // Wake up no later than the earliest renew deadline, so that a shard stops acting on time
    // whatever a request does.
    let cap = |assignment: &Assignment, t: Instant| {
        assignment
            .renew_deadline_at()
            .map_or(t, |deadline| t.min(clock.instant_at(deadline)))
    };
    let publish = |assignment: &mut Assignment| {
        let now = clock.now();
        publisher.publish(&assignment.acting(now), &assignment.held(now));
    };
    'rounds: loop {
        let next_tick = Instant::now() + lease.retry_period;
        let until = cap(&assignment, next_tick);
        tokio::select! {
            biased;
            () = shutdown.cancelled() => break 'rounds,
            outcome = tokio::time::timeout_at(until, round(store, &mut assignment, publisher, clock)) => {
                match outcome {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) => tracing::warn!(error = %err, "shard lease round failed"),
                    Err(_) => tracing::warn!("shard lease round timed out"),
                }
            }
        }
        publish(&mut assignment);
        // A Lease that expires before the next tick is taken at its expiry (the 1 ms puts the
        // round past it on our clock).
        let next_round = assignment.next_expiry_at().map_or(next_tick, |expiry| {
            next_tick.min(clock.instant_at(expiry) + Duration::from_millis(1))
        });
        while Instant::now() < next_round {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break 'rounds,
                () = tokio::time::sleep_until(cap(&assignment, next_round)) => {}
            }
            publish(&mut assignment);
        }
    }
    release(store, &mut assignment, publisher, config, clock).await;
}

/// One read-plan-write round. `now` is taken before the read (the renew deadlines count from
/// before the writes were sent). Newly drained shards stop acting before any write is sent.
async fn round<S: ShardStore>(
    store: &S,
    assignment: &mut Assignment,
    publisher: &Publisher,
    clock: &Clock,
) -> Result<()> {
    let now = clock.now();
    let observed = store.list().await?;
    let writes = assignment.plan(&observed, now, |i| publisher.idle(i));
    publisher.publish(&assignment.acting(now), &assignment.held(now));
    let results = futures::future::join_all(writes.into_iter().map(|(target, plan)| async move {
        let result = match &plan {
            Plan::Wait => return (target, None),
            Plan::Create(record) => store.create(target, record).await,
            Plan::Update {
                record,
                resource_version,
            } => store.replace(target, record, resource_version).await,
        };
        (target, Some(result))
    }))
    .await;
    for (target, result) in results {
        match result {
            None => {}
            Some(Ok(written)) => assignment.on_written(target, &written, now),
            Some(Err(err)) => {
                assignment.on_write_failed(target, now);
                if err.is_conflict() {
                    tracing::debug!(error = %err, "shard lease changed concurrently");
                } else {
                    tracing::warn!(error = %err, "shard lease write failed");
                }
            }
        }
    }
    Ok(())
}

/// Stops acting, then clears every Lease still naming us (bounded by one retry period).
async fn release<S: ShardStore>(
    store: &S,
    assignment: &mut Assignment,
    publisher: &Publisher,
    config: &ShardConfig,
    clock: &Clock,
) {
    publisher.publish(&BTreeSet::new(), &BTreeSet::new());
    let released = tokio::time::timeout(config.lease.retry_period, async {
        let observed = store.list().await?;
        let writes = assignment.release_all(&observed, clock.now());
        let results = futures::future::join_all(writes.iter().map(|(target, plan)| async move {
            match plan {
                Plan::Update {
                    record,
                    resource_version,
                } => store
                    .replace(*target, record, resource_version)
                    .await
                    .map(|_| ()),
                Plan::Create(_) | Plan::Wait => Ok(()),
            }
        }))
        .await;
        results.into_iter().collect::<Result<Vec<()>>>()
    })
    .await;
    match released {
        Ok(Ok(_)) => tracing::info!(lease = %publisher.lease, "shard leases released"),
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "could not release every shard lease; they will expire");
        }
        Err(_) => tracing::warn!("releasing the shard leases timed out; they will expire"),
    }
}

/// Where the shard Leases live: the Kubernetes API, or an in-memory fake in the tests.
pub(crate) trait ShardStore: Send + Sync {
    /// Reads every shard Lease and the join Lease.
    fn list(&self) -> impl Future<Output = Result<Observed>> + Send;
    /// Creates `target`'s Lease (409 when it exists).
    fn create(
        &self,
        target: Target,
        record: &LeaseRecord,
    ) -> impl Future<Output = Result<ObservedLease>> + Send;
    /// Replaces `target`'s Lease if it still has `resource_version` (409 otherwise).
    fn replace(
        &self,
        target: Target,
        record: &LeaseRecord,
        resource_version: &str,
    ) -> impl Future<Output = Result<ObservedLease>> + Send;
}

/// The shard Leases on the Kubernetes API: one List of the namespace's Leases per round (kept:
/// the names of this service's shards), writes through [`KubeLeaseStore`].
struct KubeShardStore {
    api: Api<Lease>,
    config: ShardConfig,
    shards: Vec<KubeLeaseStore>,
    join: KubeLeaseStore,
}

impl KubeShardStore {
    fn new(client: Client, config: &ShardConfig) -> Self {
        let lease = &config.lease;
        // One read of the owner for all the shards' Leases.
        let owner = LeaseOwner::new(
            client.clone(),
            &lease.namespace,
            lease.owner_deployment.clone(),
        );
        let store = |target| {
            KubeLeaseStore::new(
                client.clone(),
                &lease.namespace,
                &config.lease_name(target),
                &lease.field_manager,
                owner.clone(),
            )
        };
        let shards = (0..config.shards)
            .map(|i| store(Target::Shard(i)))
            .collect();
        let join = store(Target::Join);
        Self {
            api: Api::namespaced(client, &lease.namespace),
            shards,
            join,
            config: config.clone(),
        }
    }

    fn store(&self, target: Target) -> &KubeLeaseStore {
        match target {
            Target::Shard(i) => &self.shards[i as usize],
            Target::Join => &self.join,
        }
    }
}

impl ShardStore for KubeShardStore {
    async fn list(&self) -> Result<Observed> {
        let context = format!("list leases in {}", self.config.lease.namespace);
        let leases = self
            .api
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube(context.clone(), e))?;
        let mut observed = Observed {
            shards: vec![None; self.config.shards as usize],
            join: None,
            single: None,
        };
        for lease in &leases.items {
            let name = lease.metadata.name.as_deref();
            if name == Some(self.config.lease.lease_name.as_str()) {
                observed.single = Some(super::lease_store::observed(lease, &context)?);
                continue;
            }
            let Some(target) = name.and_then(|n| self.config.target_of(n)) else {
                continue;
            };
            let read = Some(super::lease_store::observed(lease, &context)?);
            match target {
                Target::Shard(i) => observed.shards[i as usize] = read,
                Target::Join => observed.join = read,
            }
        }
        Ok(observed)
    }

    async fn create(&self, target: Target, record: &LeaseRecord) -> Result<ObservedLease> {
        self.store(target).create(record).await
    }

    async fn replace(
        &self,
        target: Target,
        record: &LeaseRecord,
        resource_version: &str,
    ) -> Result<ObservedLease> {
        self.store(target).replace(record, resource_version).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::time::Duration;

    /// In-memory Leases with API-server semantics.
    #[derive(Clone, Default)]
    struct FakeStore {
        inner: Arc<Mutex<(BTreeMap<Target, ObservedLease>, u64)>>,
        shards: u32,
    }

    fn api_error(code: u16, reason: &str) -> Error {
        let status = kube::core::Status::failure(reason, reason).with_code(code);
        Error::kube("fake", kube::Error::Api(status.boxed()))
    }

    impl FakeStore {
        fn new(shards: u32) -> Self {
            Self {
                inner: Arc::default(),
                shards,
            }
        }
        fn holder(&self, target: Target) -> Option<String> {
            let inner = self.inner.lock().unwrap();
            inner.0.get(&target).and_then(|l| l.record.holder.clone())
        }
        fn put(&self, target: Target, record: &LeaseRecord) -> ObservedLease {
            let mut inner = self.inner.lock().unwrap();
            inner.1 += 1;
            let lease = ObservedLease {
                record: record.clone(),
                resource_version: inner.1.to_string(),
            };
            inner.0.insert(target, lease.clone());
            lease
        }
    }

    impl ShardStore for FakeStore {
        async fn list(&self) -> Result<Observed> {
            let inner = self.inner.lock().unwrap();
            Ok(Observed {
                shards: (0..self.shards)
                    .map(|i| inner.0.get(&Target::Shard(i)).cloned())
                    .collect(),
                join: inner.0.get(&Target::Join).cloned(),
                single: None,
            })
        }
        async fn create(&self, target: Target, record: &LeaseRecord) -> Result<ObservedLease> {
            if self.inner.lock().unwrap().0.contains_key(&target) {
                return Err(api_error(409, "AlreadyExists"));
            }
            Ok(self.put(target, record))
        }
        async fn replace(
            &self,
            target: Target,
            record: &LeaseRecord,
            rv: &str,
        ) -> Result<ObservedLease> {
            let current = self.inner.lock().unwrap().0.get(&target).cloned();
            match current {
                Some(l) if l.resource_version == rv => Ok(self.put(target, record)),
                Some(_) => Err(api_error(409, "Conflict")),
                None => Err(api_error(404, "NotFound")),
            }
        }
    }

    fn config(identity: &str, shards: u32) -> ShardConfig {
        ShardConfig {
            lease: LeaderConfig {
                lease_name: "plimsoll-test".into(),
                namespace: "default".into(),
                identity: identity.into(),
                field_manager: "test".into(),
                lease_duration: Duration::from_secs(4),
                renew_deadline: Duration::from_secs(3),
                retry_period: Duration::from_millis(500),
                owner_deployment: None,
            },
            shards,
        }
    }

    fn wall() -> Timestamp {
        Timestamp::from_second(1_700_000_000).unwrap()
    }

    async fn advance(seconds: f64) {
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    }

    #[test]
    fn lease_names_and_validation() {
        let c = config("a", 6);
        assert_eq!(c.lease_name(Target::Shard(3)), "plimsoll-test-shard-3");
        assert_eq!(c.lease_name(Target::Join), "plimsoll-test-shard-join");
        assert_eq!(c.target_of("plimsoll-test-shard-5"), Some(Target::Shard(5)));
        assert_eq!(c.target_of("plimsoll-test-shard-join"), Some(Target::Join));
        assert_eq!(c.target_of("plimsoll-test-shard-6"), None);
        assert_eq!(c.target_of("plimsoll-test-shard-05"), None);
        assert_eq!(c.target_of("plimsoll-test"), None);
        assert!(c.validate().is_ok());
        assert!(config("a", 1).validate().is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn three_replicas_share_six_shards_and_survive_a_crash() {
        let store = FakeStore::new(6);
        let stop = CancellationToken::new();
        let mut replicas: Vec<ShardElection> = ["a", "b", "c"]
            .iter()
            .map(|id| spawn_with_store(store.clone(), config(id, 6), stop.clone(), wall()))
            .collect();
        advance(20.0).await;
        let counts: Vec<usize> = replicas.iter().map(|r| r.handle.acting().len()).collect();
        assert_eq!(counts, [2, 2, 2]);
        // Every object is acted on by exactly one replica.
        for k in 0..50 {
            let uid = format!("uid-{k}");
            let acting = replicas
                .iter()
                .filter(|r| r.handle.enter(&uid).is_some())
                .count();
            assert_eq!(acting, 1, "{uid}");
        }
        // c crashes: its shards are taken once their Leases expire.
        let c = replicas.pop().unwrap();
        let lost: Vec<u32> = c.handle.acting().into_iter().collect();
        c.task.abort();
        let _ = c.task.await;
        assert!(
            c.handle.acting().is_empty(),
            "a dead runner acts on nothing"
        );
        advance(3.0).await;
        assert_eq!(store.holder(Target::Shard(lost[0])).as_deref(), Some("c"));
        advance(3.0).await;
        let counts: Vec<usize> = replicas.iter().map(|r| r.handle.acting().len()).collect();
        assert_eq!(counts, [3, 3]);
        stop.cancel();
        for r in replicas {
            r.task.await.unwrap();
            assert_eq!(r.leader.state(), LeaderState::Stopped);
        }
        assert!((0..6).all(|i| store.holder(Target::Shard(i)).is_none()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_dead_holders_shard_is_taken_at_its_expiry_and_announced() {
        let store = FakeStore::new(2);
        let dead = LeaseRecord {
            holder: Some("dead".into()),
            lease_duration_seconds: 4,
            acquire_time: Some(wall()),
            renew_time: Some(wall()),
            transitions: 0,
        };
        store.put(Target::Shard(0), &dead);
        let mut config = config("a", 2);
        // Retry ticks at 0, 2.5 and 5 s: the Lease seen at 0 expires at 4 s, between two ticks.
        config.lease.retry_period = Duration::from_millis(2_500);
        let stop = CancellationToken::new();
        let a = spawn_with_store(store.clone(), config, stop.clone(), wall());
        let mut taken = a.handle.taken().expect("sharded");
        advance(0.1).await;
        assert_eq!(a.handle.acting_takes(), BTreeMap::from([(1, 1)]));
        assert!(taken.has_changed().unwrap());
        taken.mark_unchanged();
        advance(3.8).await;
        assert_eq!(store.holder(Target::Shard(0)).as_deref(), Some("dead"));
        assert!(!taken.has_changed().unwrap());
        advance(0.2).await;
        assert_eq!(store.holder(Target::Shard(0)).as_deref(), Some("a"));
        assert!(taken.has_changed().unwrap());
        assert_eq!(a.handle.acting_takes(), BTreeMap::from([(0, 1), (1, 1)]));
        stop.cancel();
        a.task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_shard_is_released_only_after_its_work_ended() {
        let store = FakeStore::new(2);
        let stop = CancellationToken::new();
        let a = spawn_with_store(store.clone(), config("a", 2), stop.clone(), wall());
        advance(1.0).await;
        assert_eq!(a.handle.acting().len(), 2);
        // Work in flight on both shards.
        let uids: Vec<String> = (0..2)
            .map(|s| {
                (0..100)
                    .map(|k| format!("uid-{k}"))
                    .find(|u| shard_of(u, 2) == s)
                    .unwrap()
            })
            .collect();
        let guards: Vec<ShardGuard> = uids.iter().map(|u| a.handle.enter(u).unwrap()).collect();
        let b = spawn_with_store(store.clone(), config("b", 2), stop.clone(), wall());
        advance(5.0).await;
        // a gave one shard up: no new work starts on it, but it is not released while busy.
        assert_eq!(a.handle.acting().len(), 1);
        let given_up = *[0, 1]
            .iter()
            .find(|s| !a.handle.acting().contains(s))
            .unwrap();
        let busy = &uids[given_up as usize];
        assert!(a.handle.enter(busy).is_none());
        assert!(a.handle.holds(busy), "in-flight work may still write");
        assert_eq!(store.holder(Target::Shard(given_up)).as_deref(), Some("a"));
        assert!(b.handle.acting().is_empty());
        drop(guards);
        advance(2.0).await;
        assert!(!a.handle.holds(busy));
        assert_eq!(b.handle.acting(), BTreeSet::from([given_up]));
        stop.cancel();
        a.task.await.unwrap();
        b.task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn metrics_count_shards_and_handovers() {
        let mut registry = Registry::default();
        let store = FakeStore::new(3);
        let stop = CancellationToken::new();
        let a = spawn_with_store(store, config("a", 3), stop.clone(), wall());
        a.handle
            .register_metrics(crate::telemetry::service_registry(
                &mut registry,
                "hpa-plus",
            ));
        advance(1.0).await;
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("plimsoll_hpa_plus_shards_held 3"), "{text}");
        assert!(
            text.contains(r#"plimsoll_hpa_plus_shard_handovers_total{change="acquired"} 3"#),
            "{text}"
        );
        stop.cancel();
        a.task.await.unwrap();
    }

    #[tokio::test]
    async fn a_single_shard_follows_the_leader() {
        let handle = ShardHandle::single(LeaderHandle::always_leading());
        assert_eq!(handle.count(), 1);
        assert!(!handle.is_sharded());
        assert!(handle.enter("any").is_some());
        assert!(handle.holds("any"));
        assert_eq!(handle.acting(), BTreeSet::from([0]));
        assert!(handle.enter_shard(0).is_some() && handle.holds_shard(0));
        assert!(handle.enter_shard(1).is_none() && !handle.holds_shard(1));
    }
}
