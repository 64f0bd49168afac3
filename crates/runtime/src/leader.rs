//! Leader election on a `coordination.k8s.io/v1` Lease named `plimsoll-<binary>`.
//!
//! Two replicas of a controller can run; only the one holding the Lease acts. The timing logic
//! lives in the pure state machine [`election`] (tested with an injected clock); this module
//! runs it against the API server and publishes the result on a watch channel.
//!
//! Services do not start it themselves: the [`crate::service`] skeleton does, runs their work
//! only while leading, and releases the Lease only after that work ended. Underneath, it is
//! started once and work is gated on the [`LeaderHandle`]:
//!
//! ```no_run
//! # async fn demo(client: kube::Client, args: plimsoll_runtime::CommonArgs,
//! #               shutdown: tokio_util::sync::CancellationToken) -> plimsoll_runtime::Result<()> {
//! use plimsoll_runtime::leader;
//! let election = leader::start(&client, "hpa-plus", &args, shutdown.clone())?;
//! let leader = election.handle.clone();
//! while leader.leading().await {
//!     tokio::select! {
//!         () = leader.lost() => tracing::warn!("lost the lease; pausing until re-elected"),
//!         () = shutdown.cancelled() => break,
//!         // () = run_controller(...) => {}
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! Guarantees:
//! - Every Lease write carries the `resourceVersion` it read; a 409 means another candidate
//!   won that round.
//! - The leader stops acting (the handle leaves [`LeaderState::Leading`]) at the latest when
//!   `renew_deadline` has passed since its last successful renew — the runner wakes up for the
//!   deadline even while a request hangs — which is before anyone else may take the Lease over
//!   (`renew_deadline < lease_duration`).
//! - On shutdown the handle leaves `Leading` *before* the release write, then the Lease is
//!   released (no holder, one-second duration) so a successor takes over at once, and the handle
//!   ends in [`LeaderState::Stopped`]. If the runner task ends for any reason, the handle reports
//!   `Stopped`, never a stale `Leading`.
//!
//! Sharding ([`shards`]): with `N > 1` shards, each replica holds the Leases of a subset of
//! shards instead, and acts only on the objects of those shards.
//!
//! Clock: the runner measures time with tokio's monotonic clock anchored at the wall clock when
//! it starts, so wall-clock steps cannot extend a leadership, and tests can pause time.

pub mod election;
mod lease_store;
pub mod shards;

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use kube::Client;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::args::CommonArgs;
use crate::error::{Error, Result};
use election::{Election, ObservedLease, Plan, Status};
pub use lease_store::owner_reference;
use lease_store::{KubeLeaseStore, LeaseOwner, LeaseStore};

/// Leader-election settings for one service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderConfig {
    /// Lease name, `plimsoll-<binary>`.
    pub lease_name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This candidate's identity (`holderIdentity`): `$POD_NAME`, else the host name.
    pub identity: String,
    /// Field manager for Lease writes: the binary name.
    pub field_manager: String,
    /// How long others wait after the Lease last changed before taking it over (default 15 s).
    pub lease_duration: Duration,
    /// How long the leader acts without a successful renew (default 10 s).
    pub renew_deadline: Duration,
    /// Interval between acquire/renew attempts (default 2 s).
    pub retry_period: Duration,
    /// The Deployment, in `namespace`, every Lease names as its owner (`--lease-owner-deployment`).
    pub owner_deployment: Option<String>,
}

impl LeaderConfig {
    /// Settings for `binary` from the common flags; `default_namespace` is used when neither
    /// `--lease-namespace` nor `$POD_NAMESPACE` is set (pass `client.default_namespace()`).
    pub fn from_args(binary: &str, args: &CommonArgs, default_namespace: &str) -> Result<Self> {
        let config = Self {
            lease_name: format!("plimsoll-{binary}"),
            namespace: args.lease_namespace_or(default_namespace),
            identity: identity(),
            field_manager: binary.to_owned(),
            lease_duration: args.lease_duration,
            renew_deadline: args.renew_deadline,
            retry_period: args.retry_period,
            owner_deployment: args.lease_owner_deployment.clone(),
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks `0 < retry_period < renew_deadline < lease_duration`, a lease duration of at least
    /// one second (the Lease stores whole seconds), and a non-empty identity.
    pub fn validate(&self) -> Result<()> {
        let fail = |m: String| Err(Error::LeaderConfig(m));
        if self.identity.is_empty() {
            return fail("identity is empty (set POD_NAME)".into());
        }
        if self.lease_duration < Duration::from_secs(1) {
            return fail(format!(
                "lease duration {:?} must be at least 1s",
                self.lease_duration
            ));
        }
        if self.renew_deadline >= self.lease_duration {
            return fail(format!(
                "renew deadline {:?} must be shorter than lease duration {:?}",
                self.renew_deadline, self.lease_duration
            ));
        }
        if self.retry_period.is_zero() || self.retry_period >= self.renew_deadline {
            return fail(format!(
                "retry period {:?} must be positive and shorter than renew deadline {:?}",
                self.retry_period, self.renew_deadline
            ));
        }
        Ok(())
    }
}

/// This process's candidate identity: `$POD_NAME` (set it from the downward API), else the host
/// name, else `plimsoll-<pid>`.
pub fn identity() -> String {
    let non_empty = |s: String| {
        let s = s.trim().to_owned();
        (!s.is_empty()).then_some(s)
    };
    std::env::var("POD_NAME")
        .ok()
        .and_then(non_empty)
        .or_else(|| std::env::var("HOSTNAME").ok().and_then(non_empty))
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .and_then(non_empty)
        })
        .unwrap_or_else(|| format!("plimsoll-{}", std::process::id()))
}

/// Where this process stands in the election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaderState {
    /// Not leading; `holder` is the current leader when known.
    Following {
        /// Identity of the current holder, if any.
        holder: Option<String>,
    },
    /// Holding the Lease: act.
    Leading,
    /// The election ended (shutdown, or the runner task died): never act again.
    Stopped,
}

/// A cheap, cloneable view of the election, for gating work.
#[derive(Clone, Debug)]
pub struct LeaderHandle {
    rx: watch::Receiver<LeaderState>,
    /// Keeps the channel open for handles that are not fed by a runner (`always_leading`).
    _sender: Option<std::sync::Arc<watch::Sender<LeaderState>>>,
}

impl LeaderHandle {
    /// A handle that always leads: for `--leader-elect=false` and for tests.
    pub fn always_leading() -> Self {
        let (tx, rx) = watch::channel(LeaderState::Leading);
        Self {
            rx,
            _sender: Some(std::sync::Arc::new(tx)),
        }
    }

    /// True while this process holds the Lease.
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow() == LeaderState::Leading
    }

    /// The current state.
    pub fn state(&self) -> LeaderState {
        self.rx.borrow().clone()
    }

    /// Waits until this process leads (`true`) or the election stopped (`false`).
    pub async fn leading(&self) -> bool {
        let mut rx = self.rx.clone();
        let state = rx
            .wait_for(|s| matches!(s, LeaderState::Leading | LeaderState::Stopped))
            .await
            .map(|s| s.clone());
        matches!(state, Ok(LeaderState::Leading))
    }

    /// Waits until this process is not leading (returns at once if it is not leading now).
    pub async fn lost(&self) {
        let mut rx = self.rx.clone();
        // An error means the runner is gone, which also means we must not act.
        let _ = rx.wait_for(|s| *s != LeaderState::Leading).await;
    }

    /// A raw watch receiver, e.g. to drive a `tokio::select!` on `changed()`.
    pub fn subscribe(&self) -> watch::Receiver<LeaderState> {
        self.rx.clone()
    }

    /// Registers the gauge `leader` (1 while this replica leads, else 0) in `registry` (pass the
    /// service's prefixed sub-registry: it is exported as `plimsoll_<binary>_leader`). Read at
    /// scrape time, so it is never stale.
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(LeaderCollector(self.rx.clone())));
    }
}

/// Reports the election state on every scrape.
#[derive(Debug)]
struct LeaderCollector(watch::Receiver<LeaderState>);

impl Collector for LeaderCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let gauge = ConstGauge::new(i64::from(*self.0.borrow() == LeaderState::Leading));
        let metric = encoder.encode_descriptor(
            "leader",
            "1 while this replica holds the leader-election Lease, else 0",
            None,
            gauge.metric_type(),
        )?;
        gauge.encode(metric)
    }
}

/// A running election: the handle to gate work on and the task running it.
#[derive(Debug)]
pub struct LeaderElection {
    /// Gate reconciles on this.
    pub handle: LeaderHandle,
    /// The runner; it ends after shutdown once the Lease is released. If it ends before
    /// shutdown was requested, the process should exit non-zero.
    pub task: JoinHandle<()>,
}

/// Starts leader election for `binary` as configured by the common flags.
///
/// With `--leader-elect=false` the handle always leads and the task just waits for shutdown.
pub fn start(
    client: &Client,
    binary: &str,
    args: &CommonArgs,
    shutdown: CancellationToken,
) -> Result<LeaderElection> {
    if !args.leader_elect {
        return Ok(LeaderElection {
            handle: LeaderHandle::always_leading(),
            task: tokio::spawn(async move { shutdown.cancelled().await }),
        });
    }
    let config = LeaderConfig::from_args(binary, args, client.default_namespace())?;
    Ok(spawn(client.clone(), config, shutdown))
}

/// Runs leader election with explicit settings (see [`start`]).
pub fn spawn(client: Client, config: LeaderConfig, shutdown: CancellationToken) -> LeaderElection {
    let owner = LeaseOwner::new(
        client.clone(),
        &config.namespace,
        config.owner_deployment.clone(),
    );
    let store = KubeLeaseStore::new(
        client,
        &config.namespace,
        &config.lease_name,
        &config.field_manager,
        owner,
    );
    spawn_with_store(store, config, shutdown, Timestamp::now())
}

fn spawn_with_store<S: LeaseStore + 'static>(
    store: S,
    config: LeaderConfig,
    shutdown: CancellationToken,
    wall_now: Timestamp,
) -> LeaderElection {
    let (tx, rx) = watch::channel(LeaderState::Following { holder: None });
    let clock = Clock::new(wall_now);
    let task = tokio::spawn(async move {
        let publisher = Publisher::new(tx, &config);
        run(&store, &config, &publisher, &shutdown, &clock).await;
    });
    LeaderElection {
        handle: LeaderHandle { rx, _sender: None },
        task,
    }
}

/// Wall time derived from tokio's monotonic clock.
struct Clock {
    wall_start: Timestamp,
    start: Instant,
}

impl Clock {
    fn new(wall_start: Timestamp) -> Self {
        Self {
            wall_start,
            start: Instant::now(),
        }
    }

    fn now(&self) -> Timestamp {
        let elapsed = SignedDuration::try_from(self.start.elapsed()).unwrap_or(SignedDuration::MAX);
        self.wall_start
            .saturating_add(elapsed)
            .unwrap_or(self.wall_start)
    }

    /// The instant at which [`Clock::now`] reaches `t`.
    fn instant_at(&self, t: Timestamp) -> Instant {
        let offset = t.duration_since(self.wall_start);
        match Duration::try_from(offset) {
            Ok(d) => self.start + d,
            Err(_) => self.start,
        }
    }
}

/// Publishes state changes (logging transitions) and reports `Stopped` when dropped, so a
/// panicking runner can never leave a stale `Leading` behind.
struct Publisher {
    tx: watch::Sender<LeaderState>,
    lease: String,
}

impl Publisher {
    fn new(tx: watch::Sender<LeaderState>, config: &LeaderConfig) -> Self {
        Self {
            tx,
            lease: format!("{}/{}", config.namespace, config.lease_name),
        }
    }

    fn publish(&self, status: Status) {
        let next = match status {
            Status::Leading => LeaderState::Leading,
            Status::Following { holder } => LeaderState::Following { holder },
        };
        let lease = &self.lease;
        self.tx.send_if_modified(|current| {
            if *current == next {
                return false;
            }
            match (&*current, &next) {
                (_, LeaderState::Leading) => tracing::info!(lease, "acquired leadership"),
                // Released on shutdown (nobody holds it): expected, not a warning.
                (LeaderState::Leading, LeaderState::Following { holder: None }) => {
                    tracing::info!(lease, "stepped down; the lease is free");
                }
                (LeaderState::Leading, LeaderState::Following { holder }) => {
                    tracing::warn!(lease, holder = holder.as_deref(), "lost leadership");
                }
                (_, LeaderState::Following { holder }) => {
                    tracing::debug!(lease, holder = holder.as_deref(), "following");
                }
                (_, LeaderState::Stopped) => {}
            }
            *current = next;
            true
        });
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.tx.send_replace(LeaderState::Stopped);
    }
}

/// The election loop: one attempt per retry period (and one when a Lease seen held by another
/// replica expires) until shutdown, then release.
async fn run<S: LeaseStore>(
    store: &S,
    config: &LeaderConfig,
    publisher: &Publisher,
    shutdown: &CancellationToken,
    clock: &Clock,
) {
    let mut election = Election::new(
        config.identity.clone(),
        config.lease_duration,
        config.renew_deadline,
    );
    // Wake up no later than the renew deadline, so stepping down never waits on a slow request
    // or on the next tick.
    let cap = |election: &Election, t: Instant| {
        election
            .renew_deadline_at()
            .map_or(t, |deadline| t.min(clock.instant_at(deadline)))
    };
    'election: loop {
        let started = Instant::now();
        let next_tick = started + config.retry_period;
        let attempt_until = cap(&election, next_tick);
        tokio::select! {
            biased;
            () = shutdown.cancelled() => break 'election,
            outcome = tokio::time::timeout_at(attempt_until, attempt(store, &mut election, clock)) => {
                match outcome {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) if err.is_conflict() => {
                        tracing::debug!(error = %err, "lease changed concurrently; retrying");
                    }
                    Ok(Err(err)) => tracing::warn!(error = %err, "leader election attempt failed"),
                    Err(_) => tracing::warn!("leader election attempt timed out"),
                }
            }
        }
        publisher.publish(election.status(clock.now()));
        // A Lease seen expiring before the next tick is tried at its expiry (the 1 ms puts the
        // attempt past it on our clock): a standby takes over from a dead leader up to a retry
        // period sooner.
        let now = clock.now();
        let next_attempt = election
            .expiry_at()
            .filter(|expiry| *expiry > now)
            .map_or(next_tick, |expiry| {
                next_tick.min(clock.instant_at(expiry) + Duration::from_millis(1))
            });
        while Instant::now() < next_attempt {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break 'election,
                () = tokio::time::sleep_until(cap(&election, next_attempt)) => {}
            }
            publisher.publish(election.status(clock.now()));
        }
    }
    release(store, &mut election, publisher, config, clock).await;
}

/// One read-plan-write round. `now` is taken before the read, so the renew deadline is counted
/// from before the write was sent (conservative).
async fn attempt<S: LeaseStore>(store: &S, election: &mut Election, clock: &Clock) -> Result<()> {
    let now = clock.now();
    let result = async {
        let current = store.get().await?;
        let written = match election.plan(current.as_ref(), now) {
            Plan::Wait => return Ok(None),
            Plan::Create(record) => store.create(&record).await?,
            Plan::Update {
                record,
                resource_version,
            } => store.replace(&record, &resource_version).await?,
        };
        Ok::<Option<ObservedLease>, Error>(Some(written))
    }
    .await;
    match result {
        Ok(Some(written)) => {
            election.on_written(&written, now);
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(err) => {
            election.on_write_failed(now);
            Err(err)
        }
    }
}

/// Steps down, then clears the Lease if it still names us (bounded by one retry period). This
/// also runs when the renew deadline already demoted us: the Lease may still carry our name,
/// and clearing it spares the successor a full lease duration.
async fn release<S: LeaseStore>(
    store: &S,
    election: &mut Election,
    publisher: &Publisher,
    config: &LeaderConfig,
    clock: &Clock,
) {
    // Stop acting before anything else.
    publisher.publish(Status::Following { holder: None });
    let released = tokio::time::timeout(config.retry_period, async {
        let current = store.get().await?;
        let Some(current) = current else {
            return Ok(());
        };
        if let Some(Plan::Update {
            record,
            resource_version,
        }) = election.release(&current, clock.now())
        {
            store.replace(&record, &resource_version).await?;
        }
        Ok::<(), Error>(())
    })
    .await;
    match released {
        Ok(Ok(())) => tracing::info!(lease = %publisher.lease, "election stopped"),
        Ok(Err(err)) => tracing::warn!(error = %err, "could not release the lease; it will expire"),
        Err(_) => tracing::warn!("releasing the lease timed out; it will expire"),
    }
}

#[cfg(test)]
mod tests {
    use super::election::LeaseRecord;
    use super::*;
    use std::sync::{Arc, Mutex};

    /// An in-memory Lease with API-server semantics: resourceVersion checks and 409s.
    #[derive(Clone, Default)]
    struct FakeStore {
        inner: Arc<Mutex<FakeLease>>,
    }

    #[derive(Default)]
    struct FakeLease {
        lease: Option<ObservedLease>,
        next_rv: u64,
        /// While true, every call fails like an unreachable API server.
        down: bool,
        /// While true, every call hangs forever.
        hang: bool,
        writes: Vec<LeaseRecord>,
    }

    fn api_error(code: u16, reason: &str) -> Error {
        let status = kube::core::Status::failure(reason, reason).with_code(code);
        Error::kube("fake", kube::Error::Api(status.boxed()))
    }

    impl FakeStore {
        fn with(&self, f: impl FnOnce(&mut FakeLease)) {
            f(&mut self.inner.lock().unwrap());
        }
        fn lease(&self) -> Option<ObservedLease> {
            self.inner.lock().unwrap().lease.clone()
        }
        async fn gate(&self) -> Result<()> {
            let (down, hang) = {
                let inner = self.inner.lock().unwrap();
                (inner.down, inner.hang)
            };
            if hang {
                std::future::pending::<()>().await;
            }
            if down {
                return Err(api_error(503, "ServiceUnavailable"));
            }
            Ok(())
        }
        fn store(&self, record: &LeaseRecord) -> ObservedLease {
            let mut inner = self.inner.lock().unwrap();
            inner.next_rv += 1;
            let lease = ObservedLease {
                record: record.clone(),
                resource_version: inner.next_rv.to_string(),
            };
            inner.lease = Some(lease.clone());
            inner.writes.push(record.clone());
            lease
        }
    }

    impl LeaseStore for FakeStore {
        async fn get(&self) -> Result<Option<ObservedLease>> {
            self.gate().await?;
            Ok(self.lease())
        }
        async fn create(&self, record: &LeaseRecord) -> Result<ObservedLease> {
            self.gate().await?;
            if self.lease().is_some() {
                return Err(api_error(409, "AlreadyExists"));
            }
            Ok(self.store(record))
        }
        async fn replace(&self, record: &LeaseRecord, rv: &str) -> Result<ObservedLease> {
            self.gate().await?;
            match self.lease() {
                Some(l) if l.resource_version == rv => Ok(self.store(record)),
                Some(_) => Err(api_error(409, "Conflict")),
                None => Err(api_error(404, "NotFound")),
            }
        }
    }

    fn config(identity: &str) -> LeaderConfig {
        LeaderConfig {
            lease_name: "plimsoll-test".into(),
            namespace: "default".into(),
            identity: identity.into(),
            field_manager: "test".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            owner_deployment: None,
        }
    }

    fn wall() -> Timestamp {
        Timestamp::from_second(1_700_000_000).unwrap()
    }

    async fn advance(seconds: f64) {
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    }

    #[test]
    fn config_validation() {
        assert!(config("a").validate().is_ok());
        let mut c = config("a");
        c.renew_deadline = c.lease_duration;
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("renew deadline")
        );
        let mut c = config("a");
        c.retry_period = c.renew_deadline;
        assert!(c.validate().is_err());
        let mut c = config("a");
        c.retry_period = Duration::ZERO;
        assert!(c.validate().is_err());
        assert!(config("").validate().is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn single_candidate_acquires_and_renews() {
        let store = FakeStore::default();
        let shutdown = CancellationToken::new();
        let election = spawn_with_store(store.clone(), config("a"), shutdown.clone(), wall());
        assert!(election.handle.leading().await);
        let lease = store.lease().unwrap();
        assert_eq!(lease.record.holder.as_deref(), Some("a"));
        advance(7.0).await;
        assert!(election.handle.is_leader());
        let writes = store.inner.lock().unwrap().writes.len();
        assert!(
            writes >= 4,
            "renewed every retry period, got {writes} writes"
        );
        shutdown.cancel();
        election.task.await.unwrap();
        assert_eq!(election.handle.state(), LeaderState::Stopped);
        // Released: no holder, so a successor does not wait.
        assert_eq!(store.lease().unwrap().record.holder, None);
    }

    #[tokio::test(start_paused = true)]
    async fn follower_takes_over_after_the_leader_dies() {
        let store = FakeStore::default();
        let shutdown_a = CancellationToken::new();
        let a = spawn_with_store(store.clone(), config("a"), shutdown_a.clone(), wall());
        assert!(a.handle.leading().await);
        let shutdown_b = CancellationToken::new();
        let b = spawn_with_store(store.clone(), config("b"), shutdown_b.clone(), wall());
        advance(20.0).await;
        assert!(!b.handle.is_leader(), "a keeps renewing");
        assert_eq!(
            b.handle.state(),
            LeaderState::Following {
                holder: Some("a".into())
            }
        );
        // a dies without releasing.
        a.task.abort();
        let _ = a.task.await;
        assert_eq!(a.handle.state(), LeaderState::Stopped);
        let died_at = Instant::now();
        assert!(b.handle.leading().await);
        let waited = died_at.elapsed();
        assert!(
            waited >= Duration::from_secs(13) && waited <= Duration::from_secs(18),
            "took over after {waited:?}"
        );
        let lease = store.lease().unwrap();
        assert_eq!(lease.record.holder.as_deref(), Some("b"));
        assert_eq!(lease.record.transitions, 1);
        shutdown_b.cancel();
        b.task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_dead_leaders_lease_is_taken_at_its_expiry_not_the_next_tick() {
        let store = FakeStore::default();
        store.store(&LeaseRecord {
            holder: Some("dead".into()),
            lease_duration_seconds: 15,
            acquire_time: Some(wall()),
            renew_time: Some(wall()),
            transitions: 0,
        });
        let mut config = config("b");
        // Attempts at 0, 4, 8, 12, 16 s: the Lease seen at 0 expires at 15 s, between two.
        config.retry_period = Duration::from_secs(4);
        let shutdown = CancellationToken::new();
        let b = spawn_with_store(store.clone(), config, shutdown.clone(), wall());
        advance(14.9).await;
        assert!(!b.handle.is_leader());
        advance(0.2).await;
        assert!(b.handle.is_leader(), "taken at 15 s");
        shutdown.cancel();
        b.task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn release_on_shutdown_hands_over_at_once() {
        let store = FakeStore::default();
        let shutdown_a = CancellationToken::new();
        let a = spawn_with_store(store.clone(), config("a"), shutdown_a.clone(), wall());
        assert!(a.handle.leading().await);
        let shutdown_b = CancellationToken::new();
        let b = spawn_with_store(store.clone(), config("b"), shutdown_b.clone(), wall());
        advance(5.0).await;
        shutdown_a.cancel();
        a.task.await.unwrap();
        let released_at = Instant::now();
        assert!(b.handle.leading().await);
        assert!(
            released_at.elapsed() <= Duration::from_secs(2),
            "b waited {:?}",
            released_at.elapsed()
        );
        shutdown_b.cancel();
        b.task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn leader_steps_down_when_renewals_fail_past_the_deadline() {
        let store = FakeStore::default();
        let shutdown = CancellationToken::new();
        let a = spawn_with_store(store.clone(), config("a"), shutdown.clone(), wall());
        assert!(a.handle.leading().await);
        store.with(|l| l.down = true);
        let failed_at = Instant::now();
        a.handle.lost().await;
        let after = failed_at.elapsed();
        // Last success was at most one retry period before the outage; the deadline is 10 s.
        assert!(
            after >= Duration::from_secs(8) && after <= Duration::from_secs(10),
            "stepped down after {after:?}"
        );
        // The API comes back and the lease still names us: leading again.
        store.with(|l| l.down = false);
        assert!(a.handle.leading().await);
        shutdown.cancel();
        a.task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_api_server_cannot_delay_stepping_down() {
        let store = FakeStore::default();
        let shutdown = CancellationToken::new();
        let a = spawn_with_store(store.clone(), config("a"), shutdown.clone(), wall());
        assert!(a.handle.leading().await);
        store.with(|l| l.hang = true);
        let hung_at = Instant::now();
        a.handle.lost().await;
        assert!(hung_at.elapsed() <= Duration::from_secs(10));
        // Shutdown while hanging still finishes (release is bounded by the retry period).
        shutdown.cancel();
        a.task.await.unwrap();
        assert_eq!(a.handle.state(), LeaderState::Stopped);
    }

    #[tokio::test(start_paused = true)]
    async fn only_one_of_two_simultaneous_candidates_leads() {
        let store = FakeStore::default();
        let shutdown = CancellationToken::new();
        let a = spawn_with_store(store.clone(), config("a"), shutdown.clone(), wall());
        let b = spawn_with_store(store.clone(), config("b"), shutdown.clone(), wall());
        for _ in 0..20 {
            advance(1.0).await;
            assert!(
                !(a.handle.is_leader() && b.handle.is_leader()),
                "both lead at once"
            );
        }
        assert!(a.handle.is_leader() ^ b.handle.is_leader());
        shutdown.cancel();
        a.task.await.unwrap();
        b.task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn leader_gauge_follows_the_election() {
        let mut registry = Registry::default();
        let store = FakeStore::default();
        let shutdown = CancellationToken::new();
        let a = spawn_with_store(store, config("a"), shutdown.clone(), wall());
        a.handle
            .register_metrics(crate::telemetry::service_registry(
                &mut registry,
                "vpa-updater",
            ));
        let scrape = |registry: &Registry| {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
            text
        };
        assert!(a.handle.leading().await);
        let text = scrape(&registry);
        assert!(text.contains("plimsoll_vpa_updater_leader 1"), "{text}");
        shutdown.cancel();
        a.task.await.unwrap();
        let text = scrape(&registry);
        assert!(text.contains("plimsoll_vpa_updater_leader 0"), "{text}");
    }

    #[tokio::test]
    async fn always_leading_handle() {
        let handle = LeaderHandle::always_leading();
        assert!(handle.is_leader());
        assert!(handle.leading().await);
        let lost = tokio::time::timeout(Duration::from_millis(20), handle.lost()).await;
        assert!(lost.is_err(), "an always-leading handle never loses");
    }
}
