//! The service skeleton: everything a Plimsoll service does around its own work.
//!
//! A service supplies its settings ([`Service::new`]: the binary name, the [`CommonArgs`], an
//! identity override), registers its metrics in [`Started::registry`], builds its context from
//! [`Started::client`] and [`Started::leader`], hands long-lived helpers (watch caches,
//! housekeeping) to [`Started::spawn`], and finally gives [`Started::run`] its *leading* future:
//! what to run while this replica holds the Lease. The skeleton owns the rest, in the shape of
//! kube-runtime / controller-rs:
//!
//! - the kube client (under `--kube-api-qps`; the election renews through a client with a
//!   bucket of its own), the process `Registry` (with the `plimsoll_<binary>_leader` gauge) and the
//!   admin listener (`/metrics`, `/healthz` from [`Liveness`], `/readyz` from [`Readiness`]);
//! - the election on `plimsoll-<binary>` (or an always-leading handle with `--leader-elect=false`);
//! - the leadership loop: the leading future is started each time this replica becomes leader,
//!   with a *term* token; losing the Lease cancels the term and drops the future at once (another
//!   replica may take over after the renew deadline, so nothing of this term may write any more),
//!   and it starts again on re-election;
//! - shutdown, in this order: the term is cancelled (stop taking work); the leading future gets
//!   the grace period (default 15 s) to finish its in-flight writes; only then the Lease is
//!   released (holder cleared), so a successor never overlaps our last write; then the helpers
//!   and the admin listener stop and `run` returns `Ok`;
//! - one error for an election that ended before shutdown: [`Error::ElectionEnded`] (returned after
//!   the same clean-up).
//!
//! **No election** ([`Service::without_election`]) is for a service every replica of which does the
//! same work, the admission webhook: no Lease and no election client, no `plimsoll_<binary>_leader`
//! gauge (an alert on "no leader" would fire for ever), `--leader-elect` and `--shards` ignored.
//! The leading future starts once, right after the admin listener, and has one term that only
//! shutdown ends; shutdown keeps the order above without the Lease step.
//!
//! [`block_on`] is the other half: it owns a binary's tokio runtime, so every `main` starts the
//! same way (ring provider, tracing from the flags, the SIGTERM/Ctrl-C token).
//!
//! ```no_run
//! # use plimsoll_runtime::CommonArgs;
//! # use tokio_util::sync::CancellationToken;
//! use plimsoll_runtime::service::Service;
//!
//! async fn run(common: CommonArgs, shutdown: CancellationToken) -> plimsoll_runtime::Result<()> {
//!     let mut service = Service::new("cron-hpa", &common).start().await?;
//!     // let metrics = Metrics::register(service.registry());
//!     // let ctx = Arc::new(Context::new(service.client.clone(), metrics, ...));
//!     // service.spawn(watch_the_caches(...));
//!     service
//!         .run(shutdown, |term: CancellationToken| async move {
//!             // Run the controller until `term` is cancelled; finish in-flight writes.
//!             term.cancelled().await;
//!             Ok(())
//!         })
//!         .await
//! }
//! ```

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::admin::{self, AdminState, Liveness, Readiness};
use crate::args::CommonArgs;
use crate::error::{Error, Result};
use crate::leader::shards::{ShardConfig, ShardHandle};
use crate::leader::{self, LeaderConfig, LeaderElection, LeaderHandle};
use crate::listener::ListenerConfig;
use crate::rate_limit::ClientMetrics;
use crate::{client, shutdown, telemetry};

/// How long in-flight work may take after shutdown before it is dropped (15 s: the Lease
/// release must still fit in the pod's default 30 s `terminationGracePeriodSeconds`).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(15);

/// How long `/healthz` stays healthy without a [`Liveness::tick`] (60 s).
pub const DEFAULT_LIVENESS_WINDOW: Duration = Duration::from_secs(60);

/// A service's settings for the skeleton; [`Service::start`] turns them into a [`Started`].
#[derive(Debug)]
pub struct Service {
    binary: &'static str,
    common: CommonArgs,
    identity: Option<String>,
    liveness_window: Duration,
    grace: Duration,
    admin_address: Option<oneshot::Sender<SocketAddr>>,
    shards: u32,
    elect: bool,
}

impl Service {
    /// The service `binary` (Lease `plimsoll-<binary>`, metric prefix, field manager) configured
    /// by the common flags.
    pub fn new(binary: &'static str, common: &CommonArgs) -> Self {
        Self {
            binary,
            common: common.clone(),
            identity: None,
            liveness_window: DEFAULT_LIVENESS_WINDOW,
            grace: DEFAULT_GRACE,
            admin_address: None,
            shards: 1,
            elect: true,
        }
    }

    /// Runs without leader election: every replica serves (see the module documentation). The
    /// leading future runs once, from start-up until shutdown.
    #[must_use]
    pub fn without_election(mut self) -> Self {
        self.elect = false;
        self
    }

    /// Splits the work into `shards` shards, each on its own Lease (`plimsoll-<binary>-shard-<i>`,
    /// see [`leader::shards`]), instead of one election: every replica runs the leading future
    /// all along and acts on the objects of the shards it holds ([`Started::shards`]). 1 (the
    /// default) keeps the single Lease; so does `--leader-elect=false`.
    #[must_use]
    pub fn shards(mut self, shards: u32) -> Self {
        self.shards = shards.max(1);
        self
    }

    /// The election identity; `None` keeps `$POD_NAME`, else the host name. Tests that run two
    /// replicas in one process give each its own.
    #[must_use]
    pub fn identity(mut self, identity: Option<String>) -> Self {
        self.identity = identity;
        self
    }

    /// How long `/healthz` stays healthy without a tick (default [`DEFAULT_LIVENESS_WINDOW`]).
    #[must_use]
    pub fn liveness_window(mut self, window: Duration) -> Self {
        self.liveness_window = window;
        self
    }

    /// How long in-flight work may finish after shutdown (default [`DEFAULT_GRACE`]).
    #[must_use]
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Sends the admin listener's bound address here once bound (for `--metrics-address` with
    /// port 0 in tests and benchmarks).
    #[must_use]
    pub fn report_admin_address(mut self, to: Option<oneshot::Sender<SocketAddr>>) -> Self {
        self.admin_address = to;
        self
    }

    /// Builds the client, binds the admin listener and starts the election (unless
    /// [`Service::without_election`]).
    pub async fn start(self) -> Result<Started> {
        let sharded = self.elect && self.shards > 1 && self.common.leader_elect;
        let client_metrics = ClientMetrics::default();
        // Each replica of a sharded service writes under its own User-Agent, so that an audit
        // log tells which replica wrote what (`<binary>/<version> (<identity>)`).
        let identity = sharded.then(|| self.identity.clone().unwrap_or_else(leader::identity));
        let user_agent = identity.as_deref().map(|id| (self.binary, id));
        let client = client::client_counted(&self.common, user_agent, &client_metrics).await?;
        let listener = TcpListener::bind(self.common.metrics_address)
            .await
            .map_err(|source| Error::AdminServer {
                address: self.common.metrics_address,
                source,
            })?;
        if let (Some(to), Ok(address)) = (self.admin_address, listener.local_addr()) {
            let _ = to.send(address);
        }
        let election_stop = CancellationToken::new();
        let (election, shards) = if !self.elect {
            let election = unelected(election_stop.clone());
            let shards = ShardHandle::single(election.handle.clone());
            (election, shards)
        } else if sharded {
            let election_client =
                election_client(&self.common, user_agent, &client_metrics).await?;
            let mut lease =
                LeaderConfig::from_args(self.binary, &self.common, client.default_namespace())?;
            if let Some(identity) = self.identity {
                lease.identity = identity;
            }
            let config = ShardConfig {
                lease,
                shards: self.shards,
            };
            config.validate()?;
            let sharded = leader::shards::spawn(election_client, config, election_stop.clone());
            let election = LeaderElection {
                handle: sharded.leader,
                task: sharded.task,
            };
            (election, sharded.handle)
        } else {
            let election_client =
                election_client(&self.common, user_agent, &client_metrics).await?;
            let election = elect(
                &election_client,
                self.binary,
                &self.common,
                self.identity,
                election_stop.clone(),
            )?;
            let shards = ShardHandle::single(election.handle.clone());
            (election, shards)
        };
        let mut registry = Registry::default();
        if self.elect {
            election
                .handle
                .register_metrics(telemetry::service_registry(&mut registry, self.binary));
        }
        shards.register_metrics(telemetry::service_registry(&mut registry, self.binary));
        client_metrics.register(telemetry::service_registry(&mut registry, self.binary));
        Ok(Started {
            client,
            leader: election.handle,
            shards,
            liveness: Liveness::new(self.liveness_window),
            readiness: Readiness::new(),
            binary: self.binary,
            grace: self.grace,
            registry,
            listener,
            admin_limits: self.common.admin_listener.config(),
            election: election.task,
            election_stop: election_stop.drop_guard(),
            helpers: Vec::new(),
            helpers_stop: CancellationToken::new().drop_guard(),
        })
    }
}

/// The election's client: one of its own, with a bucket of its own (as kube-controller-manager's
/// leader-election client): a renew queued behind a loop's rate-limited writes would miss the
/// renew deadline and give up the Lease.
async fn election_client(
    common: &CommonArgs,
    user_agent: Option<(&str, &str)>,
    metrics: &ClientMetrics,
) -> Result<Client> {
    client::client_counted(common, user_agent, metrics).await
}

/// No election ([`Service::without_election`]): a handle that always leads and a task that ends
/// only when `stop` is cancelled (after the leading future), so the leadership loop runs one
/// term that only shutdown ends and never sees the election end early.
fn unelected(stop: CancellationToken) -> LeaderElection {
    LeaderElection {
        handle: LeaderHandle::always_leading(),
        task: tokio::spawn(async move { stop.cancelled().await }),
    }
}

/// Starts the election for `binary`, with `identity` instead of the default when given.
fn elect(
    client: &Client,
    binary: &str,
    common: &CommonArgs,
    identity: Option<String>,
    stop: CancellationToken,
) -> Result<LeaderElection> {
    let Some(identity) = identity.filter(|_| common.leader_elect) else {
        return leader::start(client, binary, common, stop);
    };
    let mut config = LeaderConfig::from_args(binary, common, client.default_namespace())?;
    config.identity = identity;
    config.validate()?;
    Ok(leader::spawn(client.clone(), config, stop))
}

/// A started service: the plumbing to build a context from, then [`Started::run`].
///
/// Dropped without `run` (the service failed to build its context), it stops the election,
/// which releases the Lease, and the helpers.
pub struct Started {
    /// The kube client built from the common flags.
    pub client: Client,
    /// The election: gate writes on [`LeaderHandle::is_leader`]. With sharding it leads while
    /// the shard assignment runs; gate each object's work on [`Started::shards`] instead.
    pub leader: LeaderHandle,
    /// The shards this replica acts on (one shard, held while leading, without sharding).
    pub shards: ShardHandle,
    /// Tick it whenever the service's loop makes progress.
    pub liveness: Liveness,
    /// Set it once the service's caches have synced.
    pub readiness: Readiness,
    binary: &'static str,
    grace: Duration,
    registry: Registry,
    listener: TcpListener,
    admin_limits: ListenerConfig,
    election: JoinHandle<()>,
    election_stop: DropGuard,
    helpers: Vec<JoinHandle<()>>,
    helpers_stop: DropGuard,
}

impl Started {
    /// The service's metrics registry: everything registered here is served on `/metrics` as
    /// `plimsoll_<binary>_<name>`.
    pub fn registry(&mut self) -> &mut Registry {
        telemetry::service_registry(&mut self.registry, self.binary)
    }

    /// Runs `helper` (a watch cache, a housekeeping loop) until the service stops: after the
    /// Lease is released, or when `run` ends for any reason.
    pub fn spawn(&mut self, helper: impl Future<Output = ()> + Send + 'static) {
        let stop = self.helpers_stop.token().clone();
        self.helpers.push(tokio::spawn(async move {
            tokio::select! {
                () = helper => {}
                () = stop.cancelled() => {}
            }
        }));
    }

    /// Serves the admin endpoints and runs `leading` during every leadership term until
    /// `shutdown` is cancelled; then stops in the order the module documentation gives.
    ///
    /// `leading` gets the term token, cancelled on shutdown (finish in-flight writes, then
    /// return) or when the Lease is lost (the future is then dropped). If it returns before its
    /// term is cancelled, that result ends the service.
    pub async fn run<E, F, Fut>(self, shutdown: CancellationToken, leading: F) -> Result<(), E>
    where
        E: From<Error>,
        F: FnMut(CancellationToken) -> Fut,
        Fut: Future<Output = Result<(), E>>,
    {
        let Started {
            leader,
            liveness,
            readiness,
            grace,
            registry,
            listener,
            admin_limits,
            mut election,
            election_stop,
            helpers,
            helpers_stop,
            ..
        } = self;
        let admin_stop = CancellationToken::new();
        let router = admin::router(AdminState {
            registry: Arc::new(registry),
            liveness,
            readiness,
        });
        let admin = tokio::spawn(admin::serve_on(
            listener,
            router,
            admin_limits,
            admin_stop.clone(),
        ));

        let result = lead(&leader, &mut election, &shutdown, grace, leading).await;

        // Nothing of this replica writes any more: now the Lease may go.
        election_stop.disarm().cancel();
        if !election.is_finished() && tokio::time::timeout(grace, &mut election).await.is_err() {
            tracing::warn!("releasing the Lease took too long; it will expire");
        }
        helpers_stop.disarm().cancel();
        for helper in helpers {
            let _ = helper.await;
        }
        admin_stop.cancel();
        match admin.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "admin listener failed"),
            Err(e) => tracing::warn!(error = %e, "admin listener task failed"),
        }
        if result.is_ok() {
            tracing::info!("stopped");
        }
        result
    }
}

/// The leadership loop: `leading` once per term, until shutdown or the election ends.
async fn lead<E, F, Fut>(
    leader: &LeaderHandle,
    election: &mut JoinHandle<()>,
    shutdown: &CancellationToken,
    grace: Duration,
    mut leading: F,
) -> Result<(), E>
where
    E: From<Error>,
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    loop {
        tokio::select! {
            biased;
            () = shutdown.cancelled() => return Ok(()),
            _ = &mut *election => return Err(Error::ElectionEnded.into()),
            leads = leader.leading() => if !leads {
                return if shutdown.is_cancelled() { Ok(()) } else { Err(Error::ElectionEnded.into()) };
            }
        }
        tracing::info!("leading: starting work");
        let term = CancellationToken::new();
        let work = leading(term.clone());
        let mut work = std::pin::pin!(work);
        tokio::select! {
            biased;
            () = shutdown.cancelled() => {
                term.cancel();
                tracing::info!(?grace, "shutting down: finishing in-flight work before releasing the Lease");
                return shutdown::with_grace(&term, grace, work).await.unwrap_or(Ok(()));
            }
            _ = &mut *election => {
                term.cancel();
                return Err(Error::ElectionEnded.into());
            }
            () = leader.lost() => {
                term.cancel();
                tracing::warn!("lost the Lease: stopping work until re-elected");
            }
            result = &mut work => {
                term.cancel();
                return result;
            }
        }
    }
}

/// Runs a binary's service on a new multi-threaded tokio runtime: installs the ring crypto
/// provider and the tracing subscriber the common flags ask for, then calls `run` with a token
/// that SIGTERM or Ctrl-C cancels, and blocks until it returns.
pub fn block_on<E, F, Fut>(common: &CommonArgs, run: F) -> Result<(), E>
where
    E: From<Error>,
    F: FnOnce(CancellationToken) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    client::install_crypto_provider();
    telemetry::init_tracing(common.log_format, &common.effective_log_filter())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(Error::TokioRuntime)?;
    runtime.block_on(async move { run(shutdown::signal_token()).await })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// What happened, in order.
    #[derive(Clone, Default)]
    struct Log(Arc<Mutex<Vec<&'static str>>>);

    impl Log {
        fn push(&self, what: &'static str) {
            self.0.lock().unwrap().push(what);
        }
        fn entries(&self) -> Vec<&'static str> {
            self.0.lock().unwrap().clone()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_lets_the_write_in_flight_finish() {
        let leader = LeaderHandle::always_leading();
        let mut election = tokio::spawn(std::future::pending());
        let shutdown = CancellationToken::new();
        let log = Log::default();
        let run = {
            let log = log.clone();
            lead::<Error, _, _>(
                &leader,
                &mut election,
                &shutdown,
                DEFAULT_GRACE,
                move |term| {
                    let log = log.clone();
                    async move {
                        log.push("write started");
                        tokio::time::sleep(Duration::from_secs(3)).await;
                        log.push("write landed");
                        assert!(term.is_cancelled(), "the term ends with the shutdown");
                        Ok(())
                    }
                },
            )
        };
        let cancel = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            shutdown.cancel();
        };
        let (result, ()) = tokio::join!(run, cancel);
        assert!(result.is_ok());
        assert_eq!(log.entries(), ["write started", "write landed"]);
    }

    #[tokio::test(start_paused = true)]
    async fn work_past_the_grace_period_is_dropped() {
        let leader = LeaderHandle::always_leading();
        let mut election = tokio::spawn(std::future::pending());
        let shutdown = CancellationToken::new();
        shutdown.cancel();
        // Cancelled before leading: the work never starts.
        let started = Log::default();
        let log = started.clone();
        let result = lead::<Error, _, _>(&leader, &mut election, &shutdown, DEFAULT_GRACE, |_| {
            log.push("started");
            std::future::pending()
        })
        .await;
        assert!(result.is_ok());
        assert!(started.entries().is_empty());

        let shutdown = CancellationToken::new();
        let began = tokio::time::Instant::now();
        let cancel = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            shutdown.cancel();
        };
        let run = lead::<Error, _, _>(&leader, &mut election, &shutdown, DEFAULT_GRACE, |_| {
            std::future::pending()
        });
        let (result, ()) = tokio::join!(run, cancel);
        assert!(result.is_ok());
        assert_eq!(began.elapsed(), Duration::from_secs(1) + DEFAULT_GRACE);
    }

    #[tokio::test]
    async fn an_election_that_ends_before_shutdown_is_an_error() {
        let leader = LeaderHandle::always_leading();
        let mut election = tokio::spawn(async {});
        let shutdown = CancellationToken::new();
        let result = lead::<Error, _, _>(
            &leader,
            &mut election,
            &shutdown,
            DEFAULT_GRACE,
            |t| async move {
                t.cancelled().await;
                Ok(())
            },
        )
        .await;
        assert!(matches!(result, Err(Error::ElectionEnded)), "{result:?}");
    }

    #[derive(clap::Parser)]
    struct Args {
        #[command(flatten)]
        common: CommonArgs,
    }

    /// `GET path` on the admin listener at `address`: the status line.
    async fn get(address: SocketAddr, path: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response.lines().next().unwrap_or_default().to_owned()
    }

    #[tokio::test]
    async fn without_election_the_work_runs_at_once_until_shutdown_and_no_leader_is_exported() {
        // A client is built but never used: nothing listens at the kubeconfig's server.
        let kubeconfig =
            std::env::temp_dir().join(format!("plimsoll-runtime-service-{}", std::process::id()));
        std::fs::write(
            &kubeconfig,
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n\
             users: [{name: u, user: {token: t}}]\n\
             contexts: [{name: c, context: {cluster: k, user: u}}]\n",
        )
        .unwrap();
        // --leader-elect=true (the default) is ignored: no Lease is ever asked for.
        let args = <Args as clap::Parser>::try_parse_from([
            "svc",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--metrics-address=127.0.0.1:0",
            "--leader-elect=true",
        ])
        .unwrap();
        let (to, address) = oneshot::channel();
        let started = Service::new("webhook", &args.common)
            .without_election()
            .report_admin_address(Some(to))
            .start()
            .await
            .unwrap();
        std::fs::remove_file(&kubeconfig).unwrap();
        let address = address.await.unwrap();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &started.registry).unwrap();
        assert!(!text.contains("leader"), "{text}");
        assert!(
            text.contains("plimsoll_webhook_kube_client_requests"),
            "{text}"
        );
        assert!(started.leader.is_leader());

        let shutdown = CancellationToken::new();
        let log = Log::default();
        let run = {
            let log = log.clone();
            started.run::<Error, _, _>(shutdown.clone(), move |term| {
                let log = log.clone();
                async move {
                    log.push("started");
                    term.cancelled().await;
                    log.push("term ended");
                    Ok(())
                }
            })
        };
        let probe = async {
            // The admin listener answers while the work runs; the work has started and waits.
            let status = get(address, "/healthz").await;
            assert!(status.contains(" 200 "), "{status}");
            while log.entries().is_empty() {
                tokio::task::yield_now().await;
            }
            assert_eq!(log.entries(), ["started"]);
            shutdown.cancel();
        };
        let (result, ()) = tokio::join!(run, probe);
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(log.entries(), ["started", "term ended"]);
    }

    #[tokio::test]
    async fn work_that_ends_on_its_own_ends_the_service() {
        let leader = LeaderHandle::always_leading();
        let mut election = tokio::spawn(std::future::pending());
        let shutdown = CancellationToken::new();
        let result = lead::<Error, _, _>(
            &leader,
            &mut election,
            &shutdown,
            DEFAULT_GRACE,
            |_| async { Err(Error::Telemetry("watch ended".into())) },
        )
        .await;
        assert!(matches!(result, Err(Error::Telemetry(_))), "{result:?}");
    }
}
