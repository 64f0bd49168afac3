//! plimsoll-sim: an in-memory Kubernetes API server with a workload model, for end-to-end
//! tests, benchmarks and the demo. kube-rs clients and `kubectl` use it unmodified.
//!
//! Start it in-process with [`Sim::start`]; the returned [`SimHandle`] gives a kube client,
//! a kubeconfig, the base URLs and the control surface (load, faults, audit log).
//!
//! Where the sim and a real cluster differ, the differences are documented in the module that
//! owns the behaviour (`store`, `api`, `patch`, `workload`, `clock`, `rest`).

pub mod admission;
pub mod api;
pub mod base64;
pub mod clock;
pub mod control;
pub mod defaults;
pub mod demo;
pub mod error;
pub mod events;
pub mod eviction;
pub mod jsonpath;
pub mod kubeconfig;
pub mod managed_fields;
pub mod metrics_api;
pub mod object_size;
pub mod patch;
pub mod prometheus;
pub mod protobuf;
pub mod random;
pub mod rbac;
pub mod registry;
pub mod rest;
pub mod scenario;
pub mod selector;
pub mod services;
pub mod store;
pub mod table;
pub mod tls;
pub mod validation;
pub mod values;
pub mod wire;
pub mod workload;

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use crate::control::{AuditEntry, Caller, Fault, ServiceAddress};
pub use crate::error::{ApiError, Error, Result};
pub use crate::prometheus::{PrometheusStandIn, StandInOptions, StandInSeries};
pub use crate::workload::{LoadProfile, LoadSpec, LoadStep};

use crate::clock::SimClock;
use crate::control::{AuditLog, Faults};
use crate::random::Rng;
use crate::registry::Registry;
use crate::store::Store;
use crate::workload::Model;

/// The Kubernetes version the sim reports.
pub const KUBERNETES_MINOR: &str = "34";

/// `/version`.
pub fn version_info() -> Value {
    json!({
        "major": "1", "minor": KUBERNETES_MINOR, "gitVersion": format!("v1.{KUBERNETES_MINOR}.0-plimsoll-sim"),
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24.0", "compiler": "gc", "platform": "linux/amd64",
        "emulationMajor": "1", "emulationMinor": KUBERNETES_MINOR,
    })
}

/// Settings of a running sim (the parts of [`SimConfig`] the model and handlers read).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Workload model tick, sim time.
    pub tick: Duration,
    /// Pod creation → Running, sim time.
    pub pod_start: Duration,
    /// Running → Ready, sim time.
    pub pod_ready: Duration,
    /// How long a terminating pod takes to stop (capped by its grace period), sim time.
    pub pod_termination: Duration,
    /// Interval between watch bookmarks, real time.
    pub bookmark_interval: Duration,
}

/// How to start a sim.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// HTTPS listen address (default `127.0.0.1:0`).
    pub https_address: SocketAddr,
    /// Plain HTTP listen address (default `127.0.0.1:0`; `None` disables it).
    pub http_address: Option<SocketAddr>,
    /// Sim seconds per real second (default 1).
    pub time_scale: f64,
    /// Workload model tick, sim time (default 200 ms).
    pub tick: Duration,
    /// Pod creation → Running (default 2 s sim).
    pub pod_start: Duration,
    /// Running → Ready (default 1 s sim).
    pub pod_ready: Duration,
    /// Terminating pod → gone, capped by its grace period (default 1 s sim).
    pub pod_termination: Duration,
    /// Watch events retained for resumption (default 100,000); older versions get 410.
    pub watch_window: usize,
    /// Interval between bookmarks on watches that allow them (default 2 s real).
    pub bookmark_interval: Duration,
    /// Seed for uids, names and noise (default 1).
    pub seed: u64,
    /// Number of nodes (default 3; each 8 CPU, 32 GiB).
    pub nodes: usize,
    /// Run the workload model (default true).
    pub workload_model: bool,
    /// Where webhook service references are reached.
    pub webhook_services: Vec<ServiceAddress>,
    /// A scenario to load at start.
    pub scenario: Option<scenario::Scenario>,
    /// Authorize every request against the stored RBAC (`serve --authorize`; default false:
    /// every request is allowed). The admin token ([`TOKEN`]) is in `system:masters` either way.
    pub authorize: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        Self {
            https_address: loopback,
            http_address: Some(loopback),
            time_scale: 1.0,
            tick: Duration::from_millis(200),
            pod_start: Duration::from_secs(2),
            pod_ready: Duration::from_secs(1),
            pod_termination: Duration::from_secs(1),
            watch_window: 100_000,
            bookmark_interval: Duration::from_secs(2),
            seed: 1,
            nodes: 3,
            workload_model: true,
            webhook_services: Vec::new(),
            scenario: None,
            authorize: false,
        }
    }
}

/// The shared state of one simulated cluster.
#[derive(Debug)]
pub struct Cluster {
    /// Objects and the watch log.
    pub store: Store,
    /// Served resources.
    pub registry: Registry,
    /// Sim time.
    pub clock: SimClock,
    /// Seeded randomness.
    pub rng: Rng,
    /// Every write.
    pub audit: AuditLog,
    /// Injected faults.
    pub faults: Faults,
    /// Load and metrics.
    pub model: Model,
    /// Settings.
    pub settings: Settings,
    /// Fires on shutdown (closes watches).
    pub shutdown: CancellationToken,
    /// Identities, issued tokens and (in `--authorize` mode) the access log.
    pub rbac: rbac::Rbac,
    webhook_services: RwLock<Vec<ServiceAddress>>,
    server_address: RwLock<String>,
}

impl Cluster {
    /// A cluster with the built-in resources, default namespaces and `nodes` nodes.
    pub fn new(config: &SimConfig) -> Arc<Self> {
        let c = Arc::new(Self {
            store: Store::new(config.watch_window),
            registry: Registry::with_builtins(),
            clock: SimClock::new(config.time_scale),
            rng: Rng::new(config.seed),
            audit: AuditLog::default(),
            faults: Faults::new(config.seed ^ 0x5eed),
            model: Model::default(),
            settings: Settings {
                tick: config.tick,
                pod_start: config.pod_start,
                pod_ready: config.pod_ready,
                pod_termination: config.pod_termination,
                bookmark_interval: config.bookmark_interval,
            },
            shutdown: CancellationToken::new(),
            rbac: rbac::Rbac::new(config.authorize),
            webhook_services: RwLock::new(config.webhook_services.clone()),
            server_address: RwLock::new(String::new()),
        });
        c.bootstrap(config.nodes);
        c
    }

    fn bootstrap(&self, nodes: usize) {
        let now = clock::rfc3339(self.clock.now());
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "uid": self.rng.uuid(), "creationTimestamp": now, "labels": {"kubernetes.io/metadata.name": ns}},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
            let _ = self
                .store
                .create(&(String::new(), "namespaces".into()), obj, "");
        }
        for n in 1..=nodes {
            let name = format!("sim-node-{n}");
            let obj = json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "uid": self.rng.uuid(), "creationTimestamp": now,
                    "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "topology.kubernetes.io/zone": format!("sim-zone-{}", (n - 1) % 3)}},
                "spec": {},
                "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}, "allocatable": {"cpu": "7800m", "memory": "31Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status", "lastHeartbeatTime": now, "lastTransitionTime": now}],
                    "addresses": [{"type": "InternalIP", "address": format!("10.0.0.{}", n + 9)}, {"type": "Hostname", "address": name}],
                    "nodeInfo": {"kubeletVersion": format!("v1.{KUBERNETES_MINOR}.0"), "containerRuntimeVersion": "sim://1.0", "operatingSystem": "linux", "architecture": "amd64",
                        "kernelVersion": "6.0.0", "osImage": "plimsoll-sim", "kubeProxyVersion": "", "machineID": "", "systemUUID": "", "bootID": ""}}});
            let _ = self.store.create(&(String::new(), "nodes".into()), obj, "");
        }
        for (plural, obj) in rbac::bootstrap::objects(&now, || self.rng.uuid()) {
            let _ = self
                .store
                .create(&(rbac::GROUP.into(), plural.into()), obj, rbac::GROUP);
        }
    }

    /// The address `/api` advertises.
    pub fn server_address(&self) -> String {
        self.server_address
            .read()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// Registers (or replaces) where a webhook Service is reached.
    pub fn register_webhook_service(&self, svc: ServiceAddress) {
        if let Ok(mut v) = self.webhook_services.write() {
            v.retain(|s| {
                !(s.namespace == svc.namespace && s.name == svc.name && s.port == svc.port)
            });
            v.push(svc);
        }
    }

    /// The loopback address of a webhook Service port.
    pub fn webhook_service(&self, ns: &str, name: &str, port: u16) -> Option<SocketAddr> {
        self.webhook_services
            .read()
            .ok()?
            .iter()
            .find(|s| s.namespace == ns && s.name == name && s.port == port)
            .map(|s| s.address)
    }

    /// Creates an object from a full manifest (apiVersion, kind, metadata) as a client would.
    pub async fn create_manifest(
        &self,
        obj: Value,
        caller: &Caller,
    ) -> Result<Arc<Value>, ApiError> {
        let api_version = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let kind = obj
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let (group, version) = api_version
            .rsplit_once('/')
            .map_or((String::new(), api_version.clone()), |(g, v)| {
                (g.to_string(), v.to_string())
            });
        let def = self.registry.by_kind(&group, &kind).ok_or_else(|| {
            ApiError::bad_request(format!("no resource for {api_version} {kind}"))
        })?;
        let ns = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or(if def.namespaced { "default" } else { "" })
            .to_string();
        self.create(&def, &version, &ns, obj, caller, false).await
    }
}

/// Entry point for starting a sim.
#[derive(Debug)]
pub struct Sim;

/// A running sim.
#[derive(Debug)]
pub struct SimHandle {
    /// `https://127.0.0.1:PORT`.
    pub base_url: String,
    /// `http://127.0.0.1:PORT`, when plain HTTP is enabled.
    pub http_url: Option<String>,
    /// The CA that signed the server certificate, PEM.
    pub ca_pem: String,
    /// The CA, to issue certificates for webhook servers in tests.
    pub ca: Arc<tls::CertificateAuthority>,
    /// The cluster state.
    pub cluster: Arc<Cluster>,
    tasks: Vec<JoinHandle<()>>,
}

impl Sim {
    /// Starts the servers and the workload model.
    pub async fn start(config: SimConfig) -> Result<SimHandle> {
        // Several crates may enable rustls providers; pick ring once for the process.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let cluster = Cluster::new(&config);
        let ca = Arc::new(tls::CertificateAuthority::generate("plimsoll-sim-ca")?);
        let serving = ca.issue(&["localhost", "127.0.0.1", "kubernetes.default.svc", "::1"])?;
        let tls_config = tls::server_config(&serving)?;
        let https = tokio::net::TcpListener::bind(config.https_address).await?;
        let https_addr = https.local_addr()?;
        if let Ok(mut a) = cluster.server_address.write() {
            *a = https_addr.to_string();
        }
        let router = rest::router(cluster.clone());
        let mut tasks = vec![tokio::spawn(tls::serve(
            https,
            Some(tls_config),
            router.clone(),
            cluster.shutdown.clone(),
        ))];
        let mut http_url = None;
        if let Some(addr) = config.http_address {
            let http = tokio::net::TcpListener::bind(addr).await?;
            http_url = Some(format!("http://{}", http.local_addr()?));
            tasks.push(tokio::spawn(tls::serve(
                http,
                None,
                router,
                cluster.shutdown.clone(),
            )));
        }
        if let Some(sc) = &config.scenario {
            scenario::apply(&cluster, sc).await?;
        }
        if config.workload_model {
            tasks.push(tokio::spawn(workload::run(
                cluster.clone(),
                cluster.shutdown.clone(),
            )));
        }
        Ok(SimHandle {
            base_url: format!("https://{https_addr}"),
            http_url,
            ca_pem: ca.cert_pem.clone(),
            ca,
            cluster,
            tasks,
        })
    }
}

/// The admin's bearer token, written into [`SimHandle::kubeconfig`]: user `plimsoll-sim-admin`
/// in `system:masters`. Without `--authorize` any token (or none) is the admin too.
pub const TOKEN: &str = "plimsoll-sim-token";

impl SimHandle {
    /// A kubeconfig for the HTTPS server (CA data, token user).
    pub fn kubeconfig(&self) -> String {
        kubeconfig::render(&self.base_url, &self.ca_pem, TOKEN)
    }

    /// A kube client over HTTPS, configured from [`Self::kubeconfig`].
    pub async fn kube_client(&self) -> Result<kube::Client> {
        let kc = kube::config::Kubeconfig::from_yaml(&self.kubeconfig())
            .map_err(|e| Error::Kubeconfig(e.to_string()))?;
        let config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| Error::Kubeconfig(e.to_string()))?;
        Ok(kube::Client::try_from(config)?)
    }

    /// A kubeconfig whose user is the ServiceAccount `ns/name` (a token issued as the
    /// TokenRequest API would); fails when the ServiceAccount does not exist.
    pub fn service_account_kubeconfig(&self, ns: &str, name: &str) -> Result<String> {
        Ok(rbac::token::kubeconfig_for(
            &self.cluster,
            &self.base_url,
            &self.ca_pem,
            ns,
            name,
        )?)
    }

    /// Every authorization decision about callers outside `system:masters` (recorded in
    /// `--authorize` mode only).
    pub fn access_log(&self) -> Vec<rbac::AccessRecord> {
        self.cluster.rbac.access_log()
    }

    /// A kube client over plain HTTP (cheaper per request; for benchmarks).
    pub fn http_kube_client(&self) -> Result<kube::Client> {
        let url = self
            .http_url
            .as_deref()
            .ok_or_else(|| Error::Kubeconfig("plain HTTP is disabled".into()))?;
        let uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| Error::Kubeconfig(e.to_string()))?;
        Ok(kube::Client::try_from(kube::Config::new(uri))?)
    }

    /// Sets a workload's offered load (`kind`: `deployments` or `statefulsets`).
    pub fn set_load(&self, ns: &str, kind: &str, name: &str, spec: LoadSpec) {
        self.cluster
            .model
            .set_load(ns, kind, name, spec, self.cluster.clock.elapsed_secs());
    }

    /// Adds a fault; returns its id.
    pub fn add_fault(&self, fault: Fault) -> u64 {
        self.cluster.faults.add(fault)
    }

    /// Removes every fault.
    pub fn clear_faults(&self) {
        self.cluster.faults.clear();
    }

    /// Every write so far.
    pub fn audit(&self) -> Vec<AuditEntry> {
        self.cluster.audit.since(0)
    }

    /// The writes from position `since` of the audit log on: with [`SimHandle::audit_len`], the
    /// writes of a window, without copying (and holding every write up for) the whole log.
    pub fn audit_since(&self, since: usize) -> Vec<AuditEntry> {
        self.cluster.audit.since(since)
    }

    /// How many writes the audit log holds.
    pub fn audit_len(&self) -> usize {
        self.cluster.audit.len()
    }

    /// Closes every open watch connection.
    pub fn drop_watches(&self) {
        self.cluster.faults.drop_watches();
    }

    /// Answers the next `n` watches with 410 Expired.
    pub fn expire_next_watches(&self, n: u32) {
        self.cluster.faults.expire_next_watches(n);
    }

    /// Drops the watch event log (older resourceVersions get 410).
    pub fn compact(&self) {
        self.cluster.store.compact();
    }

    /// Registers where a webhook Service is reached.
    pub fn register_webhook_service(&self, svc: ServiceAddress) {
        self.cluster.register_webhook_service(svc);
    }

    /// Stops the servers and the model, closing open watches.
    pub async fn shutdown(self) {
        self.cluster.shutdown.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
    }
}
