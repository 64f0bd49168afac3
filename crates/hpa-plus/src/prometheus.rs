//! Values of `type: Prometheus` metrics: one instant query per metric through the shared
//! [`PrometheusClient`], with results cached per server and query; and the range queries of
//! `minReplicasTuning` and `spec.predictive` seeding.
//!
//! - The server is the metric's `serverAddress`, else `--prometheus-address`; a metric with
//!   neither fails with a message naming both. A server is queried only when it is under
//!   `--prometheus-allowed-servers` (the `--prometheus-address` always is): any other fails the
//!   metric with `PrometheusServerNotAllowed` before a client exists, so no name is resolved
//!   and no connection made. Whoever may write an autoscaler must not be able to make the
//!   controller connect wherever they like.
//! - A `serverAddress` other than `--prometheus-address` gets its own client with the
//!   controller's TLS trust, timeout and size cap but no credentials: credentials go only to the
//!   server the operator configured, never to one an autoscaler's author names. At most
//!   [`MAX_CLIENTS`] clients are kept; the least recently used one goes (the configured
//!   server's never does).
//! - Budget: all Prometheus queries of one evaluation of one object share one deadline,
//!   [`PrometheusMetrics::deadline`] (`--prometheus-object-budget`, else the object's sync
//!   period up to [`MAX_PERIOD_BUDGET`]), retries included, and its metrics are read at most [`QUERIES_PER_OBJECT`] at a
//!   time; so a server that never answers holds a worker for at most that long. Every query
//!   also races the shutdown token: on SIGTERM a stuck query ends at once
//!   ([`PrometheusMetrics::stopping`] tells the evaluation not to write).
//! - Servers that do not answer: a worker is held by the evaluation awaiting a query, so the
//!   budget alone lets enough objects naming a dead server hold every worker (`--workers`) and
//!   delay objects that never name it. Each server therefore has a gate
//!   (`plimsoll_runtime::prometheus::breaker`): at most `--prometheus-server-concurrency`
//!   queries in flight (one more waits up to [`SLOT_WAIT`] for a slot while the server
//!   answers, so a burst is smoothed; once a query to it timed out it fails at once, `busy`,
//!   since waiting would hold the worker as long as the query it waits for), and a circuit
//!   breaker that, after [`BreakerPolicy::threshold`] timeouts or failed connections in a row
//!   with no answer for its quiet period, fails every query to it at once (`unresponsive; not
//!   queried until …`, no connection) for 30 s, then lets one query probe it (the cooldown
//!   doubles up to 5 min while probes fail). So a dead server holds about that many workers
//!   before its breaker opens, and about none after. The `--prometheus-address` server has no cap: it carries
//!   most objects' queries, so a cap would throttle healthy reading and let one tenant's slow
//!   queries fill it for everyone; its breaker stays closed while anyone's queries to it are
//!   answered.
//! - A "server" for the gate is the `--prometheus-allowed-servers` entry (or
//!   `--prometheus-address`) the address falls under, the most specific one: addresses under one
//!   prefix share its gate, so naming many paths under a dead server multiplies neither its cap
//!   nor the timeouts it takes to open; and gates are as many as the operator's entries, kept
//!   for the life of the process (an evicted client does not reset its server's breaker).
//! - A value is reused for (nine tenths of) the period of the object that asked for it: objects
//!   sharing a query within a period send it once, and an object evaluated early (its spec
//!   changed) does not query again. A failure is never cached, so the next evaluation tries
//!   again. The cache holds at most [`MAX_CACHED`] values and [`MAX_CACHED_KEY_BYTES`] of
//!   addresses and queries; past that a value is simply not kept.
//! - A failure is the metric's `Err(message)`, starting with the client's condition reason
//!   (`PrometheusUnreachable: …`), in the client's own classification (no remote text; the
//!   detail goes to the log): the decision treats it as a failed fetch, so nothing scales down
//!   on it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt as _;
use jiff::Timestamp;
use plimsoll_core::api::hpa_plus::{MetricSpec, PrometheusMetricSource};
use plimsoll_core::horizontal::observation::Fetched;
use plimsoll_core::horizontal::proposals::metric_name;
use plimsoll_core::horizontal::source::typed;
use plimsoll_runtime::prometheus::breaker::Admitted;
use plimsoll_runtime::prometheus::{
    AllowedServers, Auth, BreakerPolicy, Outcome, PrometheusClient, PrometheusConfig,
    PrometheusError, Refusal, ServerGate, Transition,
};
use plimsoll_runtime::repeats::{Repeats, Verdict};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::metrics::{RefusedLabels, ServerLabels, ServerMetrics};

/// Most clients kept (distinct server addresses); the least recently used goes first.
pub const MAX_CLIENTS: usize = 64;

/// The longest an object's own sync period makes its budget. The period is the autoscaler
/// author's to set (`behavior.syncPeriodSeconds`, up to years): an hour's budget would let 32
/// slow queries of one object hold a worker for minutes at each evaluation, and a few dozen
/// such objects every worker. The operator's `--prometheus-object-budget` is not capped.
pub const MAX_PERIOD_BUDGET: Duration = Duration::from_secs(60);

/// Most queries of one object in flight at once.
pub const QUERIES_PER_OBJECT: usize = 4;

/// Default of `--prometheus-server-concurrency`: most queries in flight to one server other
/// than `--prometheus-address`. Eight of the 64 default workers: seven dead servers at once
/// still leave workers for everyone else before their breakers open.
pub const DEFAULT_SERVER_CONCURRENCY: usize = 8;

/// How long a query waits for one of its server's slots while the server answers: a burst of
/// evaluations (all objects are due at once after a start) is smoothed rather than failed.
/// A server that answers in 100 ms serves 80 queries in that time with the default cap. Not
/// waited while the server's last query timed out: the slots are held by queries that may
/// hang as long.
pub const SLOT_WAIT: Duration = Duration::from_secs(1);

/// Most values cached.
pub const MAX_CACHED: usize = 65_536;

/// Most bytes of addresses and queries the value cache holds as keys.
pub const MAX_CACHED_KEY_BYTES: usize = 16 * 1024 * 1024;

/// How often the value cache drops stale entries (not at every insert: that is a walk over all
/// of them).
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// A cached value: milli-units, and until when it may be reused.
type Cached = (i64, Instant);

/// What the `--prometheus-*` flags say for hpa-plus.
#[derive(Clone, Debug)]
pub struct PrometheusSettings {
    /// `--prometheus-address` with its credentials; `None` without it.
    pub server: Option<PrometheusConfig>,
    /// What every other server is queried with (TLS trust, timeout, retries, size cap; no
    /// credentials; the address is set per server).
    pub others: PrometheusConfig,
    /// `--prometheus-address` and `--prometheus-allowed-servers`.
    pub allowed: AllowedServers,
    /// `--prometheus-object-budget`: the time all of one object's queries may take in one
    /// evaluation; `None`: the object's sync period.
    pub object_budget: Option<Duration>,
    /// `--prometheus-server-concurrency`: most queries in flight to one server other than
    /// `--prometheus-address` (at least 1).
    pub server_concurrency: usize,
    /// When a server's circuit breaker opens and for how long (not a flag: tests shorten it).
    pub breaker: BreakerPolicy,
    /// `--prometheus-namespace-parameter`: the URL parameter that carries the autoscaler's
    /// namespace on each of its queries, for a tenancy proxy in front of the servers.
    pub namespace_parameter: Option<String>,
}

impl Default for PrometheusSettings {
    /// No server, nothing allowed.
    fn default() -> Self {
        Self {
            server: None,
            others: PrometheusConfig::new(""),
            allowed: AllowedServers::none(),
            object_budget: None,
            server_concurrency: DEFAULT_SERVER_CONCURRENCY,
            breaker: BreakerPolicy::default(),
            namespace_parameter: None,
        }
    }
}

impl PrometheusSettings {
    /// `server` as `--prometheus-address`, the only server allowed; others would get its
    /// settings without credentials.
    pub fn with_server(server: PrometheusConfig) -> Self {
        Self {
            allowed: AllowedServers::new([server.address.as_str()]),
            others: PrometheusConfig {
                address: String::new(),
                auth: Auth::None,
                ..server.clone()
            },
            server: Some(server),
            object_budget: None,
            server_concurrency: DEFAULT_SERVER_CONCURRENCY,
            breaker: BreakerPolicy::default(),
            namespace_parameter: None,
        }
    }
}

/// The clients by address, with when each was last used.
#[derive(Default)]
struct Clients {
    by_address: HashMap<String, (Arc<PrometheusClient>, u64)>,
    tick: u64,
}

impl Clients {
    fn get(&mut self, address: &str) -> Option<Arc<PrometheusClient>> {
        self.tick += 1;
        let tick = self.tick;
        self.by_address.get_mut(address).map(|(client, used)| {
            *used = tick;
            client.clone()
        })
    }

    /// Keeps `client`, making room by dropping the least recently used other than `keep` (the
    /// configured server's). A dropped client lives on in the queries still using it.
    fn insert(&mut self, address: &str, client: Arc<PrometheusClient>, keep: Option<&str>) {
        if self.by_address.len() >= MAX_CLIENTS
            && let Some(oldest) = self
                .by_address
                .iter()
                .filter(|(a, _)| Some(a.as_str()) != keep)
                .min_by_key(|(_, (_, used))| *used)
                .map(|(a, _)| a.clone())
        {
            self.by_address.remove(&oldest);
        }
        self.tick += 1;
        self.by_address
            .insert(address.to_owned(), (client, self.tick));
    }
}

/// Values by (address, query), bounded in entries and key bytes.
struct ValueCache {
    entries: HashMap<(String, String), Cached>,
    key_bytes: usize,
    next_sweep: Instant,
}

impl ValueCache {
    fn new() -> Self {
        Self {
            entries: HashMap::new(),
            key_bytes: 0,
            next_sweep: Instant::now(),
        }
    }

    fn get(&self, key: &(String, String), at: Instant) -> Option<i64> {
        self.entries
            .get(key)
            .and_then(|&(value, until)| (at < until).then_some(value))
    }

    fn insert(&mut self, key: (String, String), value: i64, until: Instant, at: Instant) {
        if at >= self.next_sweep {
            // Entries of queries nobody asks for any more go once they are stale.
            self.entries.retain(|_, (_, until)| *until > at);
            self.key_bytes = self.entries.keys().map(|(a, q)| a.len() + q.len()).sum();
            self.next_sweep = at + SWEEP_EVERY;
        }
        let size = key.0.len() + key.1.len();
        if !self.entries.contains_key(&key)
            && (self.entries.len() >= MAX_CACHED || self.key_bytes + size > MAX_CACHED_KEY_BYTES)
        {
            // Full of fresh values: this one is read again next time instead.
            return;
        }
        if self.entries.insert(key, (value, until)).is_none() {
            self.key_bytes += size;
        }
    }
}

/// One server's gate, with its series.
struct Gate {
    /// The allowed-servers entry (the `server` label).
    entry: String,
    state: Mutex<ServerGate>,
    /// Woken whenever a query finishes: a slot is free.
    freed: tokio::sync::Notify,
    open: Gauge,
    refused_unresponsive: Counter,
    refused_busy: Counter,
}

impl Gate {
    fn new(
        entry: &str,
        (policy, limit): (BreakerPolicy, Option<usize>),
        metrics: &ServerMetrics,
    ) -> Self {
        let server = ServerLabels {
            server: entry.to_owned(),
        };
        let refused = |reason| {
            metrics
                .refused
                .get_or_create(&RefusedLabels {
                    server: entry.to_owned(),
                    reason,
                })
                .clone()
        };
        let open = metrics.open.get_or_create(&server).clone();
        open.set(0);
        Self {
            entry: entry.to_owned(),
            state: Mutex::new(ServerGate::new(policy, limit)),
            freed: tokio::sync::Notify::new(),
            open,
            refused_unresponsive: refused("unresponsive"),
            refused_busy: refused("busy"),
        }
    }

    /// A pass for one query to `address`, or the reason none is sent. With every slot taken,
    /// waits for one until [`SLOT_WAIT`] has passed or `deadline` comes, but only while the
    /// gate says a slot is worth waiting for (the server answers).
    async fn admit(
        self: &Arc<Self>,
        address: &str,
        deadline: Instant,
    ) -> Result<Pass, PrometheusError> {
        let wait_until = deadline.min(Instant::now() + SLOT_WAIT);
        loop {
            // Registered before the gate is asked, so that a slot freed in between wakes it.
            let freed = self.freed.notified();
            let mut freed = std::pin::pin!(freed);
            freed.as_mut().enable();
            let admitted = lock(&self.state).admit(Timestamp::now());
            match admitted {
                Ok(admitted) => {
                    return Ok(Pass {
                        gate: self.clone(),
                        admitted: Some(admitted),
                    });
                }
                Err(Refusal::Busy { wait: true, .. }) if Instant::now() < wait_until => {
                    // Woken by a finished query, or at the end of the wait for a last look.
                    let _ = tokio::time::timeout_at(wait_until, freed).await;
                }
                Err(Refusal::Unresponsive { until }) => {
                    self.refused_unresponsive.inc();
                    return Err(PrometheusError::Unresponsive {
                        server: address.to_owned(),
                        until,
                    });
                }
                Err(Refusal::Busy { limit, .. }) => {
                    self.refused_busy.inc();
                    return Err(PrometheusError::Busy {
                        server: address.to_owned(),
                        limit,
                    });
                }
            }
        }
    }

    fn finish(&self, admitted: Admitted, outcome: Outcome) {
        let transition = lock(&self.state).finish(admitted, outcome, Timestamp::now());
        self.freed.notify_waiters();
        match transition {
            Some(Transition::Opened { until }) => {
                self.open.set(1);
                tracing::warn!(server = %self.entry, until = %until, "prometheus server does not answer: not queried until then, when one query probes it");
            }
            Some(Transition::Closed) => {
                self.open.set(0);
                tracing::info!(server = %self.entry, "prometheus server answers again");
            }
            None => {}
        }
    }
}

/// One admitted query; dropped unfinished (the query abandoned), it counts as telling
/// nothing, so a probe that was abandoned lets the next query probe.
struct Pass {
    gate: Arc<Gate>,
    admitted: Option<Admitted>,
}

impl Pass {
    fn finish<T>(mut self, result: &Result<T, PrometheusError>) {
        if let Some(admitted) = self.admitted.take() {
            self.gate.finish(admitted, Outcome::of(result));
        }
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        if let Some(admitted) = self.admitted.take() {
            self.gate.finish(admitted, Outcome::Neither);
        }
    }
}

/// The Prometheus side of the controller: settings, clients, server gates and the value cache.
pub struct PrometheusMetrics {
    settings: PrometheusSettings,
    /// The allowed-servers entry of `--prometheus-address`: its gate has no cap.
    configured_entry: Option<String>,
    /// Reads credentials kept in a Secret.
    kube: Option<kube::Client>,
    /// Cancelled on shutdown: every query in flight ends at once.
    shutdown: CancellationToken,
    clients: Mutex<Clients>,
    /// By allowed-servers entry: at most one per entry.
    gates: Mutex<HashMap<String, Arc<Gate>>>,
    server_metrics: ServerMetrics,
    cache: Mutex<ValueCache>,
    /// Failed queries already logged, by the autoscaler's namespace ([`Self::failed`]).
    logged: Repeats,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl PrometheusMetrics {
    /// Queries as `settings` say; `kube` reads credentials kept in a Secret.
    pub fn new(settings: PrometheusSettings, kube: Option<kube::Client>) -> Self {
        Self {
            configured_entry: settings
                .server
                .as_ref()
                .and_then(|s| settings.allowed.entry_of(&s.address)),
            settings,
            kube,
            shutdown: CancellationToken::new(),
            clients: Mutex::new(Clients::default()),
            gates: Mutex::new(HashMap::new()),
            server_metrics: ServerMetrics::default(),
            cache: Mutex::new(ValueCache::new()),
            logged: Repeats::default(),
        }
    }

    /// The same, with queries abandoned once `shutdown` is cancelled.
    #[must_use]
    pub fn with_shutdown(self, shutdown: CancellationToken) -> Self {
        Self { shutdown, ..self }
    }

    /// The metric's error text (reason first, then the client's classification), and a log line
    /// with the bounded detail for the operator. A query fails at every evaluation of every
    /// autoscaler that asks it, and its text is a namespace user's (one that does not parse
    /// fails for as long as it is there), so a failure is logged as the autoscalers' own are: the
    /// first time per namespace and error, then at most every
    /// [`plimsoll_runtime::repeats::RELOG_AFTER`], at `debug` in between.
    fn failed(&self, address: &str, namespace: &str, e: &PrometheusError) -> String {
        let now = std::time::Instant::now();
        match self
            .logged
            .verdict_forgetting(namespace, &e.to_string(), now)
        {
            Verdict::Warn { quiet } => {
                log_failure(address, namespace, e, "prometheus query failed", quiet);
            }
            Verdict::Repeat => {
                tracing::debug!(namespace, server = %address, reason = e.reason(), error = %e, "prometheus query failed");
            }
        }
        match e {
            // The operator's settings (a CA file, credentials) could not be used: their error
            // text (a path, an OS error) is for the log, not for whoever wrote the autoscaler.
            PrometheusError::Config(_) => format!(
                "{}: prometheus {address}: hpa-plus's Prometheus settings are unusable (see its log)",
                e.reason()
            ),
            _ => format!("{}: {e}", e.reason()),
        }
    }

    /// The same, with the servers' breakers and refusals counted in `metrics`.
    #[must_use]
    pub fn with_metrics(self, metrics: ServerMetrics) -> Self {
        Self {
            server_metrics: metrics,
            ..self
        }
    }

    /// The configured default server, if any.
    pub fn default_address(&self) -> Option<&str> {
        self.settings.server.as_ref().map(|c| c.address.as_str())
    }

    /// The server of metric source `p`: its own, else the default.
    pub fn address_of<'a>(&'a self, p: &'a PrometheusMetricSource) -> Option<&'a str> {
        p.server_address.as_deref().or(self.default_address())
    }

    /// When all Prometheus queries of an evaluation starting now must have ended, for an
    /// object whose sync period is `period`: `--prometheus-object-budget`, else the period up
    /// to [`MAX_PERIOD_BUDGET`].
    pub fn deadline(&self, period: Duration) -> Instant {
        let budget = self
            .settings
            .object_budget
            .unwrap_or(period.min(MAX_PERIOD_BUDGET));
        Instant::now() + budget
    }

    /// Whether the process is shutting down: queries in flight were abandoned, and an
    /// evaluation that read Prometheus must not write what it made of that.
    pub fn stopping(&self) -> bool {
        self.shutdown.is_cancelled()
    }

    /// Builds the configured server's client now: a setting that can never work (an https
    /// address with no CA to verify it against) then stops the service at start, naming the
    /// flag, instead of failing each query of every autoscaler that reads it.
    pub fn check_configured(&self) -> Result<(), PrometheusError> {
        match &self.settings.server {
            Some(server) if self.settings.allowed.allows(&server.address) => {
                self.client(&server.address).map(|_| ())
            }
            _ => Ok(()),
        }
    }

    /// The client for `address`: refused unless the address is allowed; built once (with the
    /// controller's credentials for the configured server only) and kept.
    fn client(&self, address: &str) -> Result<Arc<PrometheusClient>, PrometheusError> {
        if !self.settings.allowed.allows(address) {
            return Err(PrometheusError::NotAllowed {
                server: address.to_owned(),
            });
        }
        if let Some(c) = lock(&self.clients).get(address) {
            return Ok(c);
        }
        let config = match &self.settings.server {
            Some(c) if c.address == address => c.clone(),
            // Another server gets the controller's TLS trust but never its credentials: whoever
            // may write an autoscaler must not be able to collect them with a serverAddress of
            // their own.
            _ => PrometheusConfig {
                address: address.to_owned(),
                auth: Auth::None,
                ..self.settings.others.clone()
            },
        };
        let client = Arc::new(PrometheusClient::new(&config, self.kube.clone())?);
        lock(&self.clients).insert(address, client.clone(), self.default_address());
        Ok(client)
    }

    /// The gate of allowed-servers `entry`, made on first use.
    fn gate(&self, entry: String) -> Arc<Gate> {
        let mut gates = lock(&self.gates);
        if let Some(gate) = gates.get(&entry) {
            return gate.clone();
        }
        let limit = (self.configured_entry.as_ref() != Some(&entry))
            .then_some(self.settings.server_concurrency.max(1));
        let gate = Arc::new(Gate::new(
            &entry,
            (self.settings.breaker, limit),
            &self.server_metrics,
        ));
        gates.insert(entry, gate.clone());
        gate
    }

    /// What `send` asks `address` with its client: refused unless the address is allowed, and
    /// unless its server's gate admits it (else failing, nothing sent); abandoned with
    /// [`PrometheusError::Canceled`] as soon as the process shuts down, a wait for a slot
    /// included; how it ended goes to the gate. The query (a connection, TLS, HTTP and the body) lives on the heap: only
    /// objects with Prometheus metrics pay for it, and the evaluation's future stays small for
    /// the others.
    async fn ask<T, F>(
        &self,
        address: &str,
        deadline: Instant,
        send: impl FnOnce(Arc<PrometheusClient>) -> F,
    ) -> Result<T, PrometheusError>
    where
        F: Future<Output = Result<T, PrometheusError>>,
    {
        let Some(entry) = self.settings.allowed.entry_of(address) else {
            return Err(PrometheusError::NotAllowed {
                server: address.to_owned(),
            });
        };
        let client = self.client(address)?;
        let gate = self.gate(entry);
        let query = Box::pin(async move {
            let pass = gate.admit(address, deadline).await?;
            let result = send(client).await;
            pass.finish(&result);
            result
        });
        // Abandoned, the query drops its pass: it tells the gate nothing.
        tokio::select! {
            biased;
            () = self.shutdown.cancelled() => Err(PrometheusError::Canceled {
                server: address.to_owned(),
            }),
            result = query => result,
        }
    }

    /// The value of every Prometheus metric among `metrics`, keyed by metric name, each reused
    /// for `period` after it was read; all of them read by `deadline`, at most
    /// [`QUERIES_PER_OBJECT`] at a time. Empty, without allocating, for metrics that include no
    /// Prometheus one.
    pub async fn values(
        &self,
        namespace: &str,
        metrics: &[MetricSpec],
        period: Duration,
        now: Timestamp,
        deadline: Instant,
    ) -> BTreeMap<String, Fetched<i64>> {
        if !metrics
            .iter()
            .any(|m| typed::<PrometheusMetricSource>(m).is_some())
        {
            return BTreeMap::new();
        }
        let sources: Vec<(&MetricSpec, &PrometheusMetricSource)> = metrics
            .iter()
            .filter_map(|m| Some((m, typed::<PrometheusMetricSource>(m)?)))
            .collect();
        // In the spec's order, so that of two metrics with one name the last wins as it did
        // when they were read one after another; at most QUERIES_PER_OBJECT in flight.
        let mut waiting = sources.into_iter();
        let mut reading = futures::stream::FuturesOrdered::new();
        for (m, p) in waiting.by_ref().take(QUERIES_PER_OBJECT) {
            reading.push_back(self.named_value(namespace, m, p, period, now, deadline));
        }
        let mut out = BTreeMap::new();
        while let Some((name, value)) = reading.next().await {
            out.insert(name, value);
            if let Some((m, p)) = waiting.next() {
                reading.push_back(self.named_value(namespace, m, p, period, now, deadline));
            }
        }
        out
    }

    /// One metric's name and value.
    async fn named_value(
        &self,
        namespace: &str,
        m: &MetricSpec,
        p: &PrometheusMetricSource,
        period: Duration,
        now: Timestamp,
        deadline: Instant,
    ) -> (String, Fetched<i64>) {
        (
            metric_name(m),
            self.metric_value(namespace, p, period, now, deadline).await,
        )
    }

    /// One metric's value.
    async fn metric_value(
        &self,
        namespace: &str,
        p: &PrometheusMetricSource,
        period: Duration,
        now: Timestamp,
        deadline: Instant,
    ) -> Fetched<i64> {
        let Some(address) = self.address_of(p) else {
            return Err(
                "PrometheusUnreachable: no server: set prometheus.serverAddress on the \
                        metric or --prometheus-address on hpa-plus"
                    .to_owned(),
            );
        };
        self.value(address, namespace, &p.query, period, now, deadline)
            .await
    }

    /// The URL parameters of a query made for an autoscaler in `namespace`: the
    /// `--prometheus-namespace-parameter`, if set.
    fn scope<'a>(&'a self, namespace: &'a str) -> Vec<(&'a str, &'a str)> {
        self.settings
            .namespace_parameter
            .as_deref()
            .map(|name| (name, namespace))
            .into_iter()
            .collect()
    }

    /// One query's value (milli), from the cache while fresh.
    async fn value(
        &self,
        address: &str,
        namespace: &str,
        query: &str,
        period: Duration,
        now: Timestamp,
        deadline: Instant,
    ) -> Fetched<i64> {
        let scope = self.scope(namespace);
        // Scoped, one namespace's answer is not another's: the namespace joins the key.
        let server = match scope.first() {
            Some((name, value)) => format!("{address} {name}={value}"),
            None => address.to_owned(),
        };
        let key = (server, query.to_owned());
        let at = Instant::now();
        if let Some(value) = lock(&self.cache).get(&key, at) {
            return Ok(value);
        }
        let scope = &scope;
        let value = self
            .ask(address, deadline, |client| async move {
                client.query_value_with(query, now, deadline, scope).await
            })
            .await
            .map_err(|e| self.failed(address, namespace, &e))?;
        let milli = to_milli(value).ok_or_else(|| {
            format!("PrometheusEmptyResult: {value} is out of range for a metric value")
        })?;
        // A tenth of the period short, so that the object's own next evaluation (requeued one
        // period later, give or take the timer's jitter) reads a fresh value.
        lock(&self.cache).insert(key, milli, at + period.mul_f64(0.9), at);
        Ok(milli)
    }

    /// The peak of `query` in each bucket of `step_seconds` in `buckets` (from bucket `from`
    /// up to, not including, bucket `to`), buckets counted from the Unix epoch: `max_over_time((query)[15m:])`
    /// (for 15-minute buckets; `[1h:]` for hourly ones) evaluated at the end of each bucket,
    /// milli, oldest first as `(bucket, peak)`; non-finite samples are skipped. What
    /// `spec.predictive` and `minReplicasTuning` start from when Prometheus holds the metric's
    /// past ([`crate::seed`]). Ends by `deadline` (the object's budget).
    pub async fn bucket_peaks(
        &self,
        address: &str,
        namespace: &str,
        query: &str,
        step_seconds: i64,
        std::ops::Range {
            start: from,
            end: to,
        }: std::ops::Range<i64>,
        deadline: Instant,
    ) -> Result<Vec<(i64, i64)>, PrometheusError> {
        if !self.settings.allowed.allows(address) {
            // Before anything else, as every other query: not even a time range is worked out.
            return Err(PrometheusError::NotAllowed {
                server: address.to_owned(),
            });
        }
        let step = step_seconds.max(1);
        // The first sample closes bucket `from`, the last closes bucket `to - 1`.
        let at = |bucket: i64| Timestamp::from_second(bucket.saturating_mul(step));
        let (Ok(start), Ok(end)) = (at(from + 1), at(to.max(from + 1))) else {
            return Ok(Vec::new());
        };
        let peak = peak_query(query, step);
        let every = Duration::from_secs(u64::try_from(step).unwrap_or(1));
        let scope = &self.scope(namespace);
        let series = self
            .ask(address, deadline, |client| async move {
                client
                    .query_range_with(&peak, (start, end, every), deadline, scope)
                    .await
            })
            .await?;
        let mut peaks: Vec<(i64, i64)> = series
            .iter()
            .flat_map(|s| &s.samples)
            .filter_map(|sample| {
                let closes = (sample.time as i64).div_euclid(step);
                Some((closes - 1, to_milli(sample.value)?))
            })
            .filter(|(bucket, _)| (from..to).contains(bucket))
            .collect();
        peaks.sort_unstable();
        Ok(peaks)
    }
}

/// Logs a failed query of an autoscaler in `namespace` with what the message users read leaves
/// out: at `warn` when the server said or did something worth a look (the detail), else at
/// `debug`; `quiet` is the number of such failures not logged since the last time. The
/// namespace is named here, not only by the evaluation's span: that is at info, and a
/// `--log-filter` at warn would leave a warning that names no tenant.
pub fn log_failure(address: &str, namespace: &str, e: &PrometheusError, what: &str, quiet: u64) {
    if let PrometheusError::Config(detail) = e {
        tracing::warn!(namespace, server = %address, reason = e.reason(), detail = %plimsoll_runtime::prometheus::error::bounded(detail), repeats_not_logged = quiet, "{what}");
    } else if e.detail().is_empty() {
        tracing::debug!(namespace, server = %address, reason = e.reason(), error = %e, "{what}");
    } else {
        tracing::warn!(namespace, server = %address, reason = e.reason(), error = %e, detail = e.detail(), repeats_not_logged = quiet, "{what}");
    }
}

/// `max_over_time((query)[W:])` with the window `W` of one bucket, in Prometheus' duration
/// units (`15m`, `1h`, `90s`).
pub fn peak_query(query: &str, step_seconds: i64) -> String {
    let window = if step_seconds % 3600 == 0 {
        format!("{}h", step_seconds / 3600)
    } else if step_seconds % 60 == 0 {
        format!("{}m", step_seconds / 60)
    } else {
        format!("{step_seconds}s")
    };
    format!("max_over_time(({query})[{window}:])")
}

/// A finite value in milli-units, rounded; `None` beyond `i64`.
fn to_milli(value: f64) -> Option<i64> {
    let milli = (value * 1000.0).round();
    // i64::MAX as f64 rounds up to 2^63, which is out of range: compare strictly.
    (milli.is_finite() && milli > -(2f64.powi(63)) && milli < 2f64.powi(63)).then_some(milli as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    fn metric(query: &str, server: Option<&str>) -> MetricSpec {
        serde_json::from_value(serde_json::json!({
            "type": "Prometheus",
            "prometheus": {"query": query, "serverAddress": server,
                           "target": {"type": "Value", "value": "1"}}
        }))
        .unwrap()
    }

    /// A listener that accepts connections and never answers, counting them.
    async fn silent() -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let count = Arc::new(AtomicUsize::new(0));
        let counter = count.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                held.push(stream);
            }
        });
        (address, count)
    }

    fn allowing(default: &str, others: &[&str]) -> PrometheusSettings {
        let mut settings = PrometheusSettings::with_server(PrometheusConfig::new(default));
        settings.allowed =
            AllowedServers::new(std::iter::once(default).chain(others.iter().copied()));
        settings
    }

    #[test]
    fn credentials_go_only_to_the_configured_server() {
        let mut config = PrometheusConfig::new("http://prom.monitoring:9090");
        config.auth = Auth::Bearer(plimsoll_runtime::prometheus::SecretSource::Literal(
            "s3cret".into(),
        ));
        let mut settings = PrometheusSettings::with_server(config);
        settings.allowed =
            AllowedServers::new(["http://prom.monitoring:9090", "http://team.example:9090"]);
        let prom = PrometheusMetrics::new(settings, None);
        let same = prom.client("http://prom.monitoring:9090").unwrap();
        let other = prom.client("http://team.example:9090").unwrap();
        assert!(same.has_credentials());
        assert!(!other.has_credentials());
    }

    #[tokio::test]
    async fn a_server_not_allowed_gets_no_connection_from_any_query() {
        let (address, connections) = silent().await;
        // Same host, another port: not under the prefix.
        let prom = PrometheusMetrics::new(allowing("http://127.0.0.1:1", &[]), None);
        let values = prom
            .values(
                "shop",
                &[metric("up", Some(&address))],
                Duration::from_secs(5),
                Timestamp::UNIX_EPOCH,
                Instant::now() + Duration::from_secs(5),
            )
            .await;
        let err = values["up"].clone().unwrap_err();
        assert!(err.starts_with("PrometheusServerNotAllowed: "), "{err}");
        let deadline = Instant::now() + Duration::from_secs(5);
        let tuning = prom
            .bucket_peaks(&address, "shop", "up", 3600, 0..168, deadline)
            .await
            .unwrap_err();
        let predictive = prom
            .bucket_peaks(&address, "shop", "up", 900, 0..10, deadline)
            .await
            .unwrap_err();
        for e in [tuning, predictive] {
            assert_eq!(e.reason(), "PrometheusServerNotAllowed", "{e}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            connections.load(Ordering::SeqCst),
            0,
            "a connection was made"
        );
        assert!(
            lock(&prom.clients).by_address.is_empty(),
            "a client was built"
        );
    }

    #[tokio::test]
    async fn a_long_sync_period_does_not_make_a_long_budget() {
        let prom = PrometheusMetrics::new(allowing("http://prometheus:9090", &[]), None);
        let start = Instant::now();
        let budget = |period| prom.deadline(period).saturating_duration_since(start);
        assert!(budget(Duration::from_secs(15)) <= Duration::from_secs(16));
        assert!(budget(Duration::from_secs(15)) >= Duration::from_secs(15));
        let hour = budget(Duration::from_secs(3600));
        assert!(hour >= MAX_PERIOD_BUDGET && hour <= MAX_PERIOD_BUDGET + Duration::from_secs(1));
        // The operator's budget is the operator's.
        let mut settings = allowing("http://prometheus:9090", &[]);
        settings.object_budget = Some(Duration::from_secs(600));
        let prom = PrometheusMetrics::new(settings, None);
        let start = Instant::now();
        let own = prom
            .deadline(Duration::from_secs(3600))
            .saturating_duration_since(start);
        assert!(own >= Duration::from_secs(600));
    }

    #[tokio::test]
    async fn a_silent_server_holds_an_object_no_longer_than_its_budget() {
        let (address, connections) = silent().await;
        let prom = PrometheusMetrics::new(allowing(&address, &[]), None);
        // Six metrics, read four at a time, with the client's 30 s timeout and 3 attempts: one
        // after another that would be minutes; all of them share the object's budget.
        let metrics: Vec<MetricSpec> = (0..6).map(|i| metric(&format!("q{i}"), None)).collect();
        let started = std::time::Instant::now();
        let values = prom
            .values(
                "shop",
                &metrics,
                Duration::from_secs(5),
                Timestamp::UNIX_EPOCH,
                prom.deadline(Duration::from_millis(500)),
            )
            .await;
        let took = started.elapsed();
        assert_eq!(values.len(), 6);
        for v in values.values() {
            let err = v.clone().unwrap_err();
            assert!(err.starts_with("PrometheusUnreachable: "), "{err}");
            // The last two start once the first four timed out: by then the server's breaker
            // may be open.
            assert!(
                err.contains("timed out") || err.contains("unresponsive; not queried until"),
                "{err}"
            );
        }
        // Generous for a loaded machine; sequential reads would take 6 × 30 s.
        assert!(took < Duration::from_secs(10), "{took:?}");
        assert!(connections.load(Ordering::SeqCst) >= 4);
    }

    /// A server that holds every connection while `answering` is false, and answers each
    /// request with the scalar 42 while it is true; counting connections.
    async fn switchable() -> (String, Arc<AtomicBool>, Arc<AtomicUsize>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let answering = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicUsize::new(0));
        let (on, counter) = (answering.clone(), count.clone());
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                if !on.load(Ordering::SeqCst) {
                    held.push(stream);
                    continue;
                }
                tokio::spawn(async move {
                    let body =
                        r#"{"status":"success","data":{"resultType":"scalar","result":[1,"42"]}}"#;
                    let mut buf = [0u8; 4096];
                    let _ = stream.read(&mut buf).await;
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(reply.as_bytes()).await;
                });
            }
        });
        (address, answering, count)
    }

    /// A server that records each request's first line and answers the scalar 1 to a query
    /// scoped to `namespace=a`, 2 to any other, and `bad_data` (400) to one that holds
    /// `unparsable`.
    async fn recording() -> (String, Arc<Mutex<Vec<String>>>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let n = stream.read(&mut buf).await.unwrap_or(0);
                    let request = String::from_utf8_lossy(&buf[..n]);
                    let line = request.lines().next().unwrap_or_default().to_owned();
                    let value = if line.contains("namespace=a ") || line.contains("namespace=a&") {
                        1
                    } else {
                        2
                    };
                    lock(&log).push(line.clone());
                    let (status, body) = if line.contains("unparsable") {
                        (
                            "400 Bad Request",
                            r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#
                                .to_owned(),
                        )
                    } else if request.contains("/query_range") {
                        (
                            "200 OK",
                            r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#
                                .to_owned(),
                        )
                    } else {
                        (
                            "200 OK",
                            format!(
                                r#"{{"status":"success","data":{{"resultType":"scalar","result":[1,"{value}"]}}}}"#
                            ),
                        )
                    };
                    let reply = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(reply.as_bytes()).await;
                });
            }
        });
        (address, seen)
    }

    /// With `--prometheus-namespace-parameter`, each query carries its autoscaler's namespace
    /// (metrics and history alike), and one namespace's cached answer is not another's.
    #[tokio::test]
    async fn the_namespace_parameter_scopes_each_query_and_its_cached_value() {
        let (address, seen) = recording().await;
        let mut settings = allowing(&address, &[]);
        settings.namespace_parameter = Some("namespace".to_owned());
        let prom = PrometheusMetrics::new(settings, None);
        let metrics = [metric("sum(rate(x[1m]))", None)];
        let read = |namespace| {
            prom.values(
                namespace,
                &metrics,
                Duration::from_secs(60),
                Timestamp::UNIX_EPOCH,
                Instant::now() + Duration::from_secs(5),
            )
        };
        let a = read("a").await;
        let b = read("b").await;
        assert_eq!(a.values().next().cloned(), Some(Ok(1000)));
        assert_eq!(
            b.values().next().cloned(),
            Some(Ok(2000)),
            "not a's cached value"
        );
        prom.bucket_peaks(
            &address,
            "b",
            "up",
            900,
            0..4,
            Instant::now() + Duration::from_secs(5),
        )
        .await
        .unwrap();
        let lines = lock(&seen).clone();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].contains("/api/v1/query?") && lines[0].contains("&namespace=a "));
        assert!(lines[1].contains("&namespace=b "), "{}", lines[1]);
        assert!(lines[2].contains("/api/v1/query_range?") && lines[2].contains("&namespace=b "));
        // Without the flag, no parameter.
        let prom = PrometheusMetrics::new(allowing(&address, &[]), None);
        prom.values(
            "a",
            &[metric("up", None)],
            Duration::from_secs(60),
            Timestamp::UNIX_EPOCH,
            Instant::now() + Duration::from_secs(5),
        )
        .await;
        let last = lock(&seen).last().cloned().unwrap_or_default();
        assert!(!last.contains("namespace="), "{last}");
    }

    /// A query that fails at every evaluation (a namespace user's query that does not parse) is
    /// asked again each time, and is one warning per namespace and error in the log, not one per
    /// evaluation.
    #[test]
    fn a_query_failing_at_every_evaluation_is_one_warning_per_namespace() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (address, seen) = rt.block_on(recording());
        let prom = PrometheusMetrics::new(allowing(&address, &[]), None);
        let metrics = [metric("unparsable", None)];
        let evaluate = |prom: &PrometheusMetrics, namespace: &'static str| {
            let values = rt.block_on(prom.values(
                namespace,
                &metrics,
                Duration::from_secs(60),
                Timestamp::UNIX_EPOCH,
                Instant::now() + Duration::from_secs(5),
            ));
            let error = values.values().next().cloned().unwrap().unwrap_err();
            assert!(error.contains("unparsable"), "{error}");
        };
        let logged = plimsoll_runtime::log_sink::warnings(|| {
            for namespace in ["shop", "shop", "shop", "shop", "shop", "other"] {
                evaluate(&prom, namespace);
            }
        });
        assert_eq!(lock(&seen).len(), 6, "asked again at each evaluation");
        assert_eq!(logged.len(), 2, "{logged:#?}");
        assert!(logged[0].contains("parse error"), "{}", logged[0]);
        // Each names its namespace, whatever span the log filter leaves out.
        assert!(logged[0].contains("namespace=\"shop\""), "{}", logged[0]);
        assert!(logged[1].contains("namespace=\"other\""), "{}", logged[1]);
    }

    /// One evaluation's values of `metrics` with a budget of `budget`.
    async fn read(
        prom: &PrometheusMetrics,
        metrics: &[MetricSpec],
        budget: Duration,
    ) -> BTreeMap<String, Fetched<i64>> {
        prom.values(
            "shop",
            metrics,
            Duration::from_secs(5),
            Timestamp::UNIX_EPOCH,
            Instant::now() + budget,
        )
        .await
    }

    fn error_of(values: &BTreeMap<String, Fetched<i64>>, name: &str) -> String {
        values[name].clone().unwrap_err()
    }

    /// The text exposition of `metrics`.
    fn exposition(registry: &prometheus_client::registry::Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    #[tokio::test]
    async fn a_dead_server_is_not_queried_once_three_queries_in_a_row_timed_out() {
        let (dead, connections) = silent().await;
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = crate::metrics::Metrics::register(&mut registry);
        let prom = PrometheusMetrics::new(allowing("http://127.0.0.1:1", &[&dead]), None)
            .with_metrics(metrics.prometheus_servers.clone());
        // Three objects, each naming another address under the one allowed entry: they share
        // its breaker.
        for path in ["a", "b", "c"] {
            let values = read(
                &prom,
                &[metric("up", Some(&format!("{dead}/{path}")))],
                Duration::from_millis(200),
            )
            .await;
            let err = error_of(&values, "up");
            assert!(err.contains("timed out"), "{err}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let before = connections.load(Ordering::SeqCst);
        assert_eq!(before, 3);
        // Open: the next query fails at once, long before its budget, without a connection.
        let started = std::time::Instant::now();
        let values = read(
            &prom,
            &[metric("up", Some(&format!("{dead}/d")))],
            Duration::from_secs(10),
        )
        .await;
        assert!(started.elapsed() < Duration::from_secs(2));
        let err = error_of(&values, "up");
        assert!(
            err.starts_with("PrometheusUnreachable: prometheus "),
            "{err}"
        );
        assert!(err.contains("/d unresponsive; not queried until "), "{err}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            connections.load(Ordering::SeqCst),
            before,
            "a query was sent"
        );
        // Range queries (tuning's, prediction's history) are refused alike.
        let err = prom
            .bucket_peaks(&dead, "shop", "up", 3600, 0..168, Instant::now())
            .await
            .unwrap_err();
        assert!(matches!(err, PrometheusError::Unresponsive { .. }), "{err}");
        // One gate for the entry, whatever the paths; its series say so.
        assert_eq!(lock(&prom.gates).len(), 1);
        let text = exposition(&registry);
        let entry = dead.clone();
        assert!(
            text.contains(&format!("prometheus_server_open{{server=\"{entry}\"}} 1")),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "prometheus_queries_refused_total{{server=\"{entry}\",reason=\"unresponsive\"}} 2"
            )),
            "{text}"
        );
    }

    #[tokio::test]
    async fn after_the_cooldown_one_query_probes_and_an_answer_closes_the_breaker() {
        let (address, answering, connections) = switchable().await;
        let mut settings = allowing("http://127.0.0.1:1", &[&address]);
        settings.breaker.cooldown = Duration::from_millis(300);
        let prom = PrometheusMetrics::new(settings, None);
        let up = [metric("up", Some(&address))];
        for _ in 0..3 {
            read(&prom, &up, Duration::from_millis(100)).await;
        }
        let err = error_of(&read(&prom, &up, Duration::from_secs(5)).await, "up");
        assert!(err.contains("unresponsive"), "{err}");
        // Still silent at the end of the cooldown (0.3 s, up to the whole second): the probe
        // times out, and the next cooldown is twice as long.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let before = connections.load(Ordering::SeqCst);
        let err = error_of(&read(&prom, &up, Duration::from_millis(100)).await, "up");
        assert!(err.contains("timed out"), "the probe: {err}");
        let err = error_of(&read(&prom, &up, Duration::from_secs(5)).await, "up");
        assert!(err.contains("unresponsive"), "{err}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(connections.load(Ordering::SeqCst), before + 1, "one probe");
        // It answers again: the next probe reads the value and closes the breaker.
        answering.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(1800)).await;
        assert_eq!(
            read(&prom, &up, Duration::from_secs(5)).await["up"],
            Ok(42_000)
        );
        let more = [metric("q2", Some(&address)), metric("q3", Some(&address))];
        let values = read(&prom, &more, Duration::from_secs(5)).await;
        assert_eq!(values["q2"], Ok(42_000));
        assert_eq!(values["q3"], Ok(42_000));
    }

    #[tokio::test]
    async fn an_abandoned_probe_leaves_the_probe_to_the_next_query() {
        let (address, _, connections) = switchable().await;
        let mut settings = allowing("http://127.0.0.1:1", &[&address]);
        settings.breaker.cooldown = Duration::from_millis(200);
        let prom = PrometheusMetrics::new(settings, None);
        let up = [metric("up", Some(&address))];
        for _ in 0..3 {
            read(&prom, &up, Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // The probe's evaluation is dropped midway (its future is not polled to the end).
        let abandoned = tokio::time::timeout(
            Duration::from_millis(200),
            read(&prom, &up, Duration::from_secs(30)),
        )
        .await;
        assert!(abandoned.is_err(), "the probe was still waiting");
        let before = connections.load(Ordering::SeqCst);
        let err = error_of(&read(&prom, &up, Duration::from_millis(100)).await, "up");
        assert!(err.contains("timed out"), "another probe was sent: {err}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(connections.load(Ordering::SeqCst), before + 1);
    }

    #[tokio::test]
    async fn a_burst_to_a_server_that_answers_waits_for_its_slots() {
        let (address, answering, _) = switchable().await;
        answering.store(true, Ordering::SeqCst);
        let mut settings = allowing("http://127.0.0.1:1", &[&address]);
        settings.server_concurrency = 1;
        let prom = PrometheusMetrics::new(settings, None);
        // Four queries at once, one slot: the others wait their turn instead of failing.
        let metrics: Vec<MetricSpec> = (0..4)
            .map(|i| metric(&format!("q{i}"), Some(&address)))
            .collect();
        let values = read(&prom, &metrics, Duration::from_secs(10)).await;
        for (name, value) in &values {
            assert_eq!(*value, Ok(42_000), "{name}");
        }
    }

    #[tokio::test]
    async fn once_a_query_timed_out_a_full_server_refuses_one_more_at_once() {
        let (slow, connections) = silent().await;
        let mut settings = allowing("http://127.0.0.1:1", &[&slow]);
        settings.server_concurrency = 2;
        let prom = Arc::new(PrometheusMetrics::new(settings, None));
        let err = error_of(
            &read(
                &prom,
                &[metric("q", Some(&slow))],
                Duration::from_millis(200),
            )
            .await,
            "q",
        );
        assert!(err.contains("timed out"), "{err}");
        // Two queries hang in its two slots...
        let hanging: Vec<_> = (0..2)
            .map(|i| {
                let prom = prom.clone();
                let m = metric(&format!("h{i}"), Some(&slow));
                tokio::spawn(async move { read(&prom, &[m], Duration::from_secs(3)).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        // ...so a third fails at once, nothing sent, not waiting for either.
        let started = std::time::Instant::now();
        let err = error_of(
            &read(&prom, &[metric("q3", Some(&slow))], Duration::from_secs(3)).await,
            "q3",
        );
        assert!(
            started.elapsed() < Duration::from_millis(1500),
            "{:?}",
            started.elapsed()
        );
        assert!(err.starts_with("PrometheusUnreachable: "), "{err}");
        assert!(
            err.contains("busy: 2 queries to it in flight already; not sent"),
            "{err}"
        );
        assert_eq!(connections.load(Ordering::SeqCst), 3);
        for h in hanging {
            let values = h.await.unwrap();
            let err = values.values().next().unwrap().clone().unwrap_err();
            assert!(err.contains("timed out"), "{err}");
        }
    }

    #[tokio::test]
    async fn the_configured_server_has_no_cap() {
        let (slow, _) = silent().await;
        let mut settings = allowing(&slow, &[]);
        settings.server_concurrency = 1;
        let prom = PrometheusMetrics::new(settings, None);
        let metrics: Vec<MetricSpec> = (0..3).map(|i| metric(&format!("q{i}"), None)).collect();
        let values = read(&prom, &metrics, Duration::from_millis(300)).await;
        for v in values.values() {
            let err = v.clone().unwrap_err();
            assert!(err.contains("timed out"), "{err}");
        }
    }

    #[tokio::test]
    async fn shutdown_ends_a_stuck_query_at_once() {
        let (address, _) = silent().await;
        let shutdown = CancellationToken::new();
        let prom = Arc::new(
            PrometheusMetrics::new(allowing(&address, &[]), None).with_shutdown(shutdown.clone()),
        );
        let reading = {
            let prom = prom.clone();
            tokio::spawn(async move {
                prom.values(
                    "shop",
                    &[metric("up", None)],
                    Duration::from_secs(60),
                    Timestamp::UNIX_EPOCH,
                    Instant::now() + Duration::from_secs(60),
                )
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!prom.stopping());
        let cancelled = std::time::Instant::now();
        shutdown.cancel();
        let values = tokio::time::timeout(Duration::from_secs(5), reading)
            .await
            .expect("the query ended on shutdown")
            .unwrap();
        assert!(cancelled.elapsed() < Duration::from_secs(5));
        let err = values["up"].clone().unwrap_err();
        assert!(err.starts_with("PrometheusCanceled"), "{err}");
        assert!(prom.stopping());
    }

    #[tokio::test]
    async fn the_operators_configuration_errors_are_not_shown_to_the_author() {
        let mut settings = allowing("https://prom:9090", &[]);
        settings.others.ca_file = Some("/nonexistent/operator-ca.pem".into());
        settings.allowed = AllowedServers::new(["https://prom:9090", "https://team:9090"]);
        let prom = PrometheusMetrics::new(settings, None);
        let values = prom
            .values(
                "shop",
                &[metric("up", Some("https://team:9090"))],
                Duration::from_secs(5),
                Timestamp::UNIX_EPOCH,
                Instant::now() + Duration::from_secs(5),
            )
            .await;
        let err = values["up"].clone().unwrap_err();
        assert!(err.starts_with("PrometheusUnreachable: "), "{err}");
        assert!(!err.contains("operator-ca.pem"), "{err}");
    }

    #[test]
    fn the_client_map_is_bounded_and_keeps_the_configured_server() {
        let prom = PrometheusMetrics::new(allowing("http://prom:9090", &[]), None);
        prom.client("http://prom:9090").unwrap();
        for i in 0..(MAX_CLIENTS * 2) {
            prom.client(&format!("http://prom:9090/tenant-{i}"))
                .unwrap();
        }
        let clients = lock(&prom.clients);
        assert_eq!(clients.by_address.len(), MAX_CLIENTS);
        assert!(clients.by_address.contains_key("http://prom:9090"));
        // The most recent ones stay.
        assert!(
            clients
                .by_address
                .contains_key(&format!("http://prom:9090/tenant-{}", MAX_CLIENTS * 2 - 1))
        );
        assert!(!clients.by_address.contains_key("http://prom:9090/tenant-0"));
    }

    #[test]
    fn the_value_cache_is_bounded() {
        let at = Instant::now();
        let until = at + Duration::from_secs(60);
        let mut cache = ValueCache::new();
        for i in 0..(MAX_CACHED + 100) {
            cache.insert(("s".into(), format!("q{i}")), 1, until, at);
        }
        assert_eq!(cache.entries.len(), MAX_CACHED);
        // A known key is still refreshed when full.
        cache.insert(("s".into(), "q0".into()), 2, until, at);
        assert_eq!(cache.get(&("s".into(), "q0".into()), at), Some(2));
        // Key bytes: a few huge queries fill it.
        let mut cache = ValueCache::new();
        let huge = "x".repeat(MAX_CACHED_KEY_BYTES / 4);
        for i in 0..8 {
            cache.insert(("s".into(), format!("{huge}{i}")), 1, until, at);
        }
        assert!(
            cache.key_bytes <= MAX_CACHED_KEY_BYTES,
            "{}",
            cache.key_bytes
        );
        assert!(cache.entries.len() < 8);
        // Stale entries go at the next sweep.
        let later = at + Duration::from_secs(120);
        cache.insert(
            ("s".into(), "fresh".into()),
            1,
            later + Duration::from_secs(1),
            later,
        );
        assert_eq!(cache.entries.len(), 1);
    }

    #[test]
    fn the_peak_query_spans_one_bucket() {
        assert_eq!(peak_query("up", 900), "max_over_time((up)[15m:])");
        assert_eq!(peak_query("up", 3600), "max_over_time((up)[1h:])");
        assert_eq!(peak_query("up", 90), "max_over_time((up)[90s:])");
    }

    #[test]
    fn values_become_milli_units_within_range() {
        assert_eq!(to_milli(1.5), Some(1500));
        assert_eq!(to_milli(0.0004), Some(0));
        assert_eq!(to_milli(-2.0), Some(-2000));
        assert_eq!(to_milli(1e300), None);
        assert_eq!(to_milli(f64::NAN), None);
    }

    #[tokio::test]
    async fn a_metric_without_any_server_fails_naming_both_settings() {
        let prom = PrometheusMetrics::new(PrometheusSettings::default(), None);
        let values = prom
            .values(
                "shop",
                &[metric("up", None)],
                Duration::from_secs(5),
                Timestamp::UNIX_EPOCH,
                Instant::now() + Duration::from_secs(5),
            )
            .await;
        let err = values["up"].clone().unwrap_err();
        assert!(err.starts_with("PrometheusUnreachable"), "{err}");
        assert!(
            err.contains("serverAddress") && err.contains("--prometheus-address"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn objects_without_prometheus_metrics_read_nothing() {
        let prom = PrometheusMetrics::new(PrometheusSettings::default(), None);
        let cpu = MetricSpec::resource_default_cpu();
        let values = prom
            .values(
                "shop",
                &[cpu],
                Duration::from_secs(5),
                Timestamp::UNIX_EPOCH,
                Instant::now(),
            )
            .await;
        assert!(values.is_empty());
    }
}
