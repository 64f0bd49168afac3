//! vpa-admission: the TLS mutating webhook that applies VPA recommendations to new pods and
//! rejects invalid VerticalPodAutoscalers (a drop-in for upstream's VPA admission controller).
//!
//! [`run`] runs on the service skeleton ([`plimsoll_runtime::service`]) in its no-election mode:
//! every replica serves (`--leader-elect` is accepted and ignored: admission must answer on every
//! replica the Service routes to). The skeleton owns the kube client, the registry and the admin
//! listener (`/metrics`, `/healthz`, `/readyz`) and the shutdown order; the webhook's work
//! (`serve`) is its one leading future: reflectors of VPAs, ReplicaSets, Jobs and LimitRanges
//! (ReplicaSets and Jobs cut down to what the owner walk reads, [`plimsoll_runtime::owners`]),
//! the HTTPS webhook ([`webhook`] over [`tls`]), optionally the webhook registration
//! ([`registration`]), the status Lease renewal ([`status`]) and, with `--self-signed`, the
//! certificate renewal ([`renewal`]), which keeps the `caBundle` of the webhook configuration
//! current: by patching only that field of the configuration the chart or deploy/ installed, or
//! with `--register-webhook` by writing the whole configuration.
//!
//! Shutdown: the webhook stops taking connections and drains (at most the listener's drain
//! period), the tasks stop, then the skeleton stops the admin listener; all within the
//! skeleton's grace period.
//!
//! Readiness: the TLS listener is bound and every reflector has listed once. Before that, pods
//! are admitted unchanged with a warning (the answer never waits for a cache).

pub mod certs;
pub mod cli;
pub mod error;
pub mod matching;
pub mod metrics;
pub mod registration;
pub mod renewal;
pub mod review;
pub mod status;
pub mod tls;
pub mod webhook;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::LimitRange;
use kube::runtime::reflector::{self, Store};
use kube::{Api, Resource};
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_core::vertical::object_fields::{
    leave_out_limit_range, leave_out_vpa, limit_range_fields, vpa_fields,
};
use plimsoll_core::vertical::scope::NamespaceScope;
use plimsoll_runtime::CommonArgs;
use plimsoll_runtime::admin::{Liveness, Readiness};
use plimsoll_runtime::listener::ListenerConfig;
use plimsoll_runtime::owners::owner_fields;
use plimsoll_runtime::service::Service;
use plimsoll_runtime::watch::{Watch, WatchMetrics};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use crate::error::{Error, Result};
use crate::matching::Caches;
use crate::metrics::Metrics;
use crate::registration::{Endpoint, Publish};
use crate::status::StatusLease;
use crate::tls::CertResolver;
use crate::webhook::Webhook;

/// The binary name: metric prefix `plimsoll_vpa_admission_`.
pub const BINARY: &str = "vpa-admission";

/// Where the serving certificate comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TlsSource {
    /// PEM files, reloaded when they change; `ca` goes into the caBundle when registering.
    Files {
        /// Certificate chain.
        cert: PathBuf,
        /// Private key.
        key: PathBuf,
        /// CA for the caBundle (default: `cert`).
        ca: Option<PathBuf>,
    },
    /// Generated, shared through this Secret in the webhook's namespace, renewed when due.
    SelfSigned {
        /// Secret name.
        secret: String,
        /// Lifetimes of generated certificates.
        lifetimes: certs::Lifetimes,
        /// How often each replica checks the Secret.
        check_interval: Duration,
    },
}

/// `--register-webhook` settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    /// MutatingWebhookConfiguration name.
    pub config_name: String,
    /// Service name.
    pub service_name: String,
    /// Service port.
    pub service_port: i32,
    /// Register by URL instead.
    pub url: Option<String>,
    /// `timeoutSeconds`.
    pub timeout_seconds: i32,
}

/// Everything [`run`] needs (plain data; tests build it directly or through [`cli::Args`]).
#[derive(Clone, Debug)]
pub struct Config {
    /// Client, admin listener and logging flags.
    pub common: CommonArgs,
    /// Webhook HTTPS address (`--port` on all interfaces).
    pub address: SocketAddr,
    /// Serving certificate.
    pub tls: TlsSource,
    /// The webhook's namespace (`None`: the client's default namespace).
    pub namespace: Option<String>,
    /// Register the webhook at start-up.
    pub registration: Option<Registration>,
    /// `--self-signed` without `--register-webhook`: the installed MutatingWebhookConfiguration
    /// whose webhooks' `caBundle` the CA bundle is patched into.
    pub ca_bundle_config: Option<String>,
    /// Service name (DNS names of the self-signed certificate).
    pub service_name: String,
    /// Webhook URL (its host joins the self-signed certificate's names).
    pub url: Option<String>,
    /// `--vpa-object-namespace`: act only in this namespace.
    pub vpa_object_namespace: Option<String>,
    /// `--ignored-vpa-object-namespaces` (`None`: the default list).
    pub ignored_vpa_object_namespaces: Option<Vec<String>>,
    /// Status Lease name.
    pub status_lease_name: String,
    /// Status Lease namespace.
    pub status_lease_namespace: String,
    /// Status Lease renewal interval.
    pub status_lease_interval: Duration,
    /// `--max-allowed-cpu-boost`: the most CPU a startup boost gives a container's request.
    pub max_allowed_cpu_boost: Option<plimsoll_core::quantity::Quantity>,
    /// `holderIdentity` of the status Lease.
    pub identity: String,
    /// Limits of the webhook listener.
    pub listener: ListenerConfig,
}

impl Config {
    /// Refuses a webhook listener and a metrics listener on one port. That is what a command
    /// line written for Plimsoll before 0.2 gives (`--address=0.0.0.0:8000`, then the webhook):
    /// `--address` now has upstream's meaning, so the message says what to write instead.
    pub fn check_ports(&self) -> Result<()> {
        let metrics = self.common.metrics_address;
        if metrics.port() == self.address.port() {
            return Err(Error::Config(format!(
                "--address {metrics} and the webhook port --port {} are the same port: since \
                 Plimsoll 0.2 --address is the metrics listener (upstream's meaning, formerly \
                 --metrics-address, default 0.0.0.0:8944) and the webhook listens on --port \
                 (default 8000); replace --address=HOST:PORT by --port=PORT for the webhook",
                self.address.port()
            )));
        }
        Ok(())
    }

    /// The namespaces the webhook acts in when `namespace` is its own: the rule the updater
    /// follows too ([`NamespaceScope::from_flags`]).
    pub fn scope(&self, namespace: &str) -> NamespaceScope {
        NamespaceScope::from_flags(
            self.vpa_object_namespace.as_deref(),
            self.ignored_vpa_object_namespaces.as_deref(),
            Some(namespace),
        )
    }
}

/// Checks the ports ([`Config::check_ports`]), binds `config.address`, then [`run_on`].
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<()> {
    config.check_ports()?;
    let address = config.address;
    let webhook = TcpListener::bind(address)
        .await
        .map_err(|source| Error::Io {
            context: format!("binding {address}"),
            source,
        })?;
    run_on(config, webhook, shutdown).await
}

/// The watch of every `K` (named `name` in logs and metrics), until `shutdown`.
fn watch<K>(
    name: &'static str,
    client: &kube::Client,
    watches: &WatchMetrics,
    shutdown: &CancellationToken,
) -> Watch<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + 'static,
{
    Watch::new(name, Api::all(client.clone()))
        .metrics(watches)
        .until(shutdown.clone())
}

/// A reflector kept by `watch`.
fn spawn_reflector<K>(watch: Watch<K>) -> (Store<K>, tokio::task::JoinHandle<()>)
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    (reader, tokio::spawn(watch.reflect(writer)))
}

/// The webhook's caches and the tasks of their reflectors, until `shutdown`.
fn spawn_caches(
    client: &kube::Client,
    watches: &WatchMetrics,
    shutdown: &CancellationToken,
) -> (Caches, [tokio::task::JoinHandle<()>; 4]) {
    // VPAs and LimitRanges are written by namespace users too: only what is read is kept.
    let (vpas, t1) = spawn_reflector(
        watch::<VerticalPodAutoscaler>("VerticalPodAutoscaler", client, watches, shutdown)
            .trim(vpa_fields)
            .over_budget(leave_out_vpa),
    );
    // Every ReplicaSet and Job of the cluster, written by tenants: only what the owner walk
    // reads is kept.
    let (replica_sets, t2) = spawn_reflector(
        watch::<ReplicaSet>("ReplicaSet", client, watches, shutdown).trim(owner_fields),
    );
    let (jobs, t3) =
        spawn_reflector(watch::<Job>("Job", client, watches, shutdown).trim(owner_fields));
    let (limit_ranges, t4) = spawn_reflector(
        watch::<LimitRange>("LimitRange", client, watches, shutdown)
            .trim(limit_range_fields)
            .over_budget(leave_out_limit_range),
    );
    let caches = Caches {
        vpas,
        replica_sets,
        jobs,
        limit_ranges,
    };
    (caches, [t1, t2, t3, t4])
}

/// Runs the service with the webhook on the already bound `webhook_listener` until `shutdown`
/// is cancelled: the skeleton without election (client, registry, admin listener on
/// `--address`), and `serve` as its leading future.
pub async fn run_on(
    config: Config,
    webhook_listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<()> {
    let mut service = Service::new(BINARY, &config.common)
        .without_election()
        .start()
        .await?;
    let metrics = Metrics::register(service.registry());
    let watches = WatchMetrics::register(service.registry());
    let plumbing = Plumbing {
        client: service.client.clone(),
        metrics,
        watches,
        liveness: service.liveness.clone(),
        readiness: service.readiness.clone(),
    };
    let config = Arc::new(config);
    // Without election the leading future runs once; the listener is handed to that run.
    let mut webhook_listener = Some(webhook_listener);
    service
        .run(shutdown, move |term| {
            let listener = webhook_listener.take();
            let (config, plumbing) = (config.clone(), plumbing.clone());
            async move {
                let listener = listener.ok_or_else(|| {
                    Error::Task("the webhook was started twice without election".to_owned())
                })?;
                serve(&config, plumbing, listener, &term).await
            }
        })
        .await
}

/// What [`serve`] takes from the service skeleton.
#[derive(Clone)]
struct Plumbing {
    client: kube::Client,
    metrics: Metrics,
    watches: WatchMetrics,
    liveness: Liveness,
    readiness: Readiness,
}

/// The webhook's work, until `term` is cancelled (shutdown) or the webhook server stops (an
/// error): certificates, caches, the HTTPS server, registration and renewal, the status Lease.
async fn serve(
    config: &Config,
    plumbing: Plumbing,
    webhook_listener: TcpListener,
    term: &CancellationToken,
) -> Result<()> {
    let Plumbing {
        client,
        metrics,
        watches,
        liveness,
        readiness,
    } = plumbing;
    // Every task stops when serve returns, also on an early error (e.g. registration failed).
    let shutdown = term.child_token();
    let _stop_tasks = shutdown.clone().drop_guard();
    let namespace = config
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());

    // Certificates first: without them there is nothing to serve.
    let certs = serving_certs(config, &client, &namespace).await?;
    let server_config = tls::server_config(certs.0.clone())?;

    let (caches, reflectors) = spawn_caches(&client, &watches, &shutdown);
    let scope = config.scope(&namespace);
    tracing::info!(?scope, "acting on pods and VPAs in these namespaces");
    let mut webhook = Webhook::new(caches.clone(), metrics.clone(), scope);
    webhook.max_cpu_boost = config.max_allowed_cpu_boost;
    let webhook = Arc::new(webhook);

    let address = webhook_listener.local_addr().ok();
    tracing::info!(?address, "webhook listening (HTTPS, path /)");
    let serving = Arc::new(AtomicBool::new(true));
    let server_task = {
        let serving = serving.clone();
        let router = webhook::router(webhook.clone());
        let limits = config.listener.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            tls::serve(webhook_listener, server_config, router, limits, shutdown).await;
            serving.store(false, Ordering::Release);
        })
    };

    // Mark synced once every store has listed; meanwhile pods pass unchanged.
    let sync_task = tokio::spawn(mark_synced(
        webhook.clone(),
        readiness.clone(),
        serving.clone(),
    ));

    let resolver = certs.0.clone();
    let renewal_task =
        register_and_renew(config, &client, &namespace, certs, &metrics, &shutdown).await?;

    // --lease-owner-deployment: read once; unreadable, the Lease is written without owner.
    let owner = match &config.common.lease_owner_deployment {
        Some(name) => {
            plimsoll_runtime::leader::owner_reference(&client, &config.status_lease_namespace, name)
                .await
        }
        None => None,
    };
    let lease = StatusLease {
        name: config.status_lease_name.clone(),
        namespace: config.status_lease_namespace.clone(),
        interval: config.status_lease_interval,
        identity: config.identity.clone(),
        owner,
    };
    let lease_task = {
        let webhook = webhook.clone();
        let serving = serving.clone();
        tokio::spawn(status::run(
            client.clone(),
            lease,
            metrics.clone(),
            move || webhook.synced.load(Ordering::Acquire) && serving.load(Ordering::Acquire),
            shutdown.clone(),
        ))
    };

    let result = keep_alive(&liveness, &serving, &resolver, &metrics, &shutdown).await;
    readiness.set_ready(false);
    shutdown.cancel();
    let _ = server_task.await;
    sync_task.abort();
    let _ = lease_task.await;
    for t in reflectors.into_iter().chain(renewal_task) {
        let _ = t.await;
    }
    result
}

/// Liveness: the webhook has no loop of its own; alive while the server task runs. The same tick
/// reads the served certificate's expiry, so files rotated by cert-manager are seen too.
async fn keep_alive(
    liveness: &Liveness,
    serving: &AtomicBool,
    resolver: &CertResolver,
    metrics: &Metrics,
    shutdown: &CancellationToken,
) -> Result<()> {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            _ = tick.tick() => {
                if let Some(not_after) = resolver.served_not_after() {
                    metrics.served_certificate(not_after);
                }
                if serving.load(Ordering::Acquire) {
                    liveness.tick();
                } else {
                    return Err(Error::Task("webhook server stopped".to_owned()));
                }
            }
        }
    }
}

async fn mark_synced(webhook: Arc<Webhook>, readiness: Readiness, serving: Arc<AtomicBool>) {
    let c = &webhook.caches;
    let synced = futures::future::join4(
        c.vpas.wait_until_ready(),
        c.replica_sets.wait_until_ready(),
        c.jobs.wait_until_ready(),
        c.limit_ranges.wait_until_ready(),
    )
    .await;
    if matches!(synced, (Ok(()), Ok(()), Ok(()), Ok(()))) {
        webhook.set_synced();
        readiness.set_ready(serving.load(Ordering::Acquire));
        tracing::info!(vpas = c.vpas.len(), "caches synced; webhook ready");
    }
}

/// What `--self-signed` renewal starts from: the Secret, the bundle in use, the check interval.
type SelfSignedState = (renewal::SecretKeeper, certs::CertBundle, Duration);

/// The certificate resolver, the CA PEM for the caBundle and, with `--self-signed`, what the
/// renewal loop needs.
type ServingCerts = (Arc<CertResolver>, String, Option<SelfSignedState>);

/// Loads or creates the serving certificate ([`ServingCerts`]).
async fn serving_certs(
    config: &Config,
    client: &kube::Client,
    namespace: &str,
) -> Result<ServingCerts> {
    match &config.tls {
        TlsSource::Files { cert, key, ca } => {
            let resolver = CertResolver::from_files(cert.clone(), key.clone())?;
            let ca_path = ca.as_ref().unwrap_or(cert);
            let ca_pem = std::fs::read_to_string(ca_path).map_err(|source| Error::Io {
                context: format!("reading {}", ca_path.display()),
                source,
            })?;
            Ok((Arc::new(resolver), ca_pem, None))
        }
        TlsSource::SelfSigned {
            secret,
            lifetimes,
            check_interval,
        } => {
            lifetimes.check(*check_interval)?;
            let keeper = renewal::SecretKeeper {
                api: Api::namespaced(client.clone(), namespace),
                namespace: namespace.to_owned(),
                name: secret.clone(),
                names: certificate_names(config, namespace),
                lifetimes: *lifetimes,
            };
            // Nothing is published yet: a due serving certificate is renewed by the loop, after
            // its CA bundle is in the webhook configuration.
            let publishing = config.registration.is_some() || config.ca_bundle_config.is_some();
            let bundle = keeper.sync(|_| !publishing).await?;
            tracing::info!(secret = %secret, %namespace, "serving the shared self-signed certificate");
            let key = tls::certified_key(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes())?;
            let ca_pem = bundle.ca_pem.clone();
            Ok((
                Arc::new(CertResolver::fixed(key)),
                ca_pem,
                Some((keeper, bundle, *check_interval)),
            ))
        }
    }
}

fn certificate_names(config: &Config, namespace: &str) -> Vec<String> {
    let svc = &config.service_name;
    let mut names = vec![
        format!("{svc}.{namespace}.svc"),
        format!("{svc}.{namespace}.svc.cluster.local"),
        format!("{svc}.{namespace}"),
        svc.clone(),
    ];
    if let Some(host) = config.url.as_deref().and_then(url_host) {
        names.push(host);
    }
    names
}

fn url_host(url: &str) -> Option<String> {
    let rest = url.strip_prefix("https://")?;
    let hostport = rest.split('/').next()?;
    let host = if hostport.starts_with('[') {
        hostport.split(']').next()?.trim_start_matches('[')
    } else {
        hostport.rsplit_once(':').map_or(hostport, |(h, _)| h)
    };
    (!host.is_empty()).then(|| host.to_owned())
}

/// Registers the webhook (`--register-webhook`) with `ca_pem`, or patches `ca_pem` into the
/// installed configuration's caBundle (`--self-signed` alone), then starts the `--self-signed`
/// renewal loop, which keeps that caBundle current.
async fn register_and_renew(
    config: &Config,
    client: &kube::Client,
    namespace: &str,
    (resolver, ca_pem, self_signed): ServingCerts,
    metrics: &Metrics,
    shutdown: &CancellationToken,
) -> Result<Option<tokio::task::JoinHandle<()>>> {
    let registration = config.registration.as_ref().map(|reg| {
        webhook_registration(
            reg,
            namespace,
            config.scope(namespace),
            ca_pem.clone().into_bytes(),
        )
    });
    let mut published = true;
    let publish = if let Some(reg) = registration {
        register_with_retry(client, &reg, shutdown).await?;
        Some(Publish::Register(reg))
    } else if let (Some(name), Some(_)) = (&config.ca_bundle_config, &self_signed) {
        let publish = Publish::CaBundle {
            config_name: name.clone(),
        };
        // Not fatal: the configuration may be applied after the pod starts (failurePolicy
        // Ignore admits pods unchanged meanwhile); the renewal loop retries every check.
        published = publish_with_retry(client, &publish, ca_pem.as_bytes(), shutdown).await;
        Some(publish)
    } else {
        None
    };
    Ok(self_signed.map(|(keeper, current, interval)| {
        let renewal = renewal::Renewal {
            keeper,
            resolver,
            publish,
            published,
            current,
            interval,
            metrics: metrics.clone(),
        };
        tokio::spawn(renewal.run(shutdown.clone()))
    }))
}

/// The registration `--register-webhook` writes, with `ca_pem` as the caBundle.
fn webhook_registration(
    reg: &Registration,
    namespace: &str,
    scope: NamespaceScope,
    ca_pem: Vec<u8>,
) -> registration::Registration {
    registration::Registration {
        config_name: reg.config_name.clone(),
        endpoint: match &reg.url {
            Some(url) => Endpoint::Url(url.clone()),
            None => Endpoint::Service {
                namespace: namespace.to_owned(),
                name: reg.service_name.clone(),
                port: reg.service_port,
            },
        },
        ca_bundle: ca_pem,
        timeout_seconds: reg.timeout_seconds,
        scope,
    }
}

/// Publishes `ca_pem` a few times over about 15 s; false when it did not succeed.
async fn publish_with_retry(
    client: &kube::Client,
    publish: &Publish,
    ca_pem: &[u8],
    shutdown: &CancellationToken,
) -> bool {
    let mut delay = Duration::from_millis(500);
    for attempt in 1..=6 {
        match publish.publish(client.clone(), ca_pem).await {
            Ok(()) => return true,
            Err(e) => {
                tracing::warn!(error = %e, attempt, "setting the webhook's caBundle failed; retrying");
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return false,
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(10));
    }
    false
}

async fn register_with_retry(
    client: &kube::Client,
    r: &registration::Registration,
    shutdown: &CancellationToken,
) -> Result<()> {
    let mut delay = Duration::from_millis(500);
    let mut attempt = 0;
    loop {
        attempt += 1;
        match registration::register(client.clone(), r).await {
            Ok(()) => return Ok(()),
            Err(e) if attempt < 6 => {
                tracing::warn!(error = %e, attempt, "webhook registration failed; retrying");
            }
            Err(e) => return Err(e),
        }
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_hosts() {
        assert_eq!(
            url_host("https://10.0.0.1:8000/"),
            Some("10.0.0.1".to_owned())
        );
        assert_eq!(
            url_host("https://hook.example.com/x"),
            Some("hook.example.com".to_owned())
        );
        assert_eq!(url_host("https://[::1]:8000/"), Some("::1".to_owned()));
        assert_eq!(url_host("http://x/"), None);
    }
}
