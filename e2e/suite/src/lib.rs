//! The end-to-end harness: each test gets a cluster and a namespace of its own.
//!
//! By default the cluster is a fresh in-process `plimsoll-sim`; with `PLIMSOLL_E2E_KUBECONFIG`
//! pointing at a kubeconfig the same tests run against that real cluster instead (the CRDs are
//! applied server-side, each test works in its own namespace and deletes it at the end).
//!
//! Tests that need the sim's control API (setting load, injecting faults, the audit log, routing
//! a webhook Service to a loopback listener) call [`Env::sim`], which fails on a real cluster,
//! and carry `#[cfg_attr(real_cluster, ignore = "needs the sim's control API: …")]`: the build
//! script sets `cfg(real_cluster)` when `PLIMSOLL_E2E_KUBECONFIG` is set, so on a real cluster
//! such a test is reported as ignored, never as passed. A test that runs everywhere may add
//! cross-checks from the sim's audit log ([`Env::scale_writes`], [`Env::evictions`]); those
//! are `None` on a real cluster.
//!
//! The services run in-process through their `run(config, shutdown)` functions, talking to the
//! cluster through an ordinary kubeconfig: nothing in them knows it is under test.

use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use plimsoll_sim::{AuditEntry, Sim, SimConfig, SimHandle};

pub mod access;
pub mod chaos;
pub mod external_answers;
pub mod handover;
pub mod hostile;
pub mod loopback;
pub mod process;
pub mod running;
pub mod scrape;
pub mod tap;
pub mod webhook;

pub use loopback::free_address;
pub use running::{Crashable, Running};

/// Holds the serial group: the tests whose assertions are about wall-clock time on a shared
/// machine (takeover within lease + retry, SIGTERM while a write is held, a service's peak RSS
/// under attack) take it first, so at most one of them runs at a time while the rest of the
/// suite runs concurrently around it. A test that fails while holding it releases it as it
/// unwinds (an async lock, so it can be held across awaits and is never poisoned).
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SERIAL.lock().await
}

/// The environment variable that points the suite at a real cluster.
pub const KUBECONFIG_ENV: &str = "PLIMSOLL_E2E_KUBECONFIG";

/// One test's cluster connection and namespace.
pub struct Env {
    /// A client for the cluster.
    pub client: kube::Client,
    /// The namespace this test owns.
    pub namespace: String,
    /// A kubeconfig file for the cluster, for services started by the test.
    pub kubeconfig: PathBuf,
    sim: Option<SimHandle>,
    _dir: TempDir,
}

impl Env {
    /// A cluster with the Plimsoll CRDs installed and a fresh namespace `e2e-<name>-<n>`.
    pub async fn start(name: &str) -> anyhow::Result<Env> {
        Self::start_with(name, SimConfig::default()).await
    }

    /// Like [`Env::start`], with the sim configured as given (ignored on a real cluster).
    pub async fn start_with(name: &str, config: SimConfig) -> anyhow::Result<Env> {
        let real_cluster = std::env::var(KUBECONFIG_ENV).ok().filter(|p| !p.is_empty());
        Self::connect(name, config, real_cluster).await
    }

    /// Always a fresh in-process sim, also when `PLIMSOLL_E2E_KUBECONFIG` is set: for tests of a
    /// client (the kubectl plugin) that stage cluster state through the sim's control API and
    /// check the client, not the cluster.
    pub async fn start_sim(name: &str) -> anyhow::Result<Env> {
        Self::connect(name, SimConfig::default(), None).await
    }

    async fn connect(
        name: &str,
        config: SimConfig,
        real_cluster: Option<String>,
    ) -> anyhow::Result<Env> {
        let dir = TempDir::new(name)?;
        let kubeconfig = dir.path.join("kubeconfig");
        let (client, sim) = if let Some(path) = real_cluster {
            std::fs::copy(&path, &kubeconfig).with_context(|| format!("copy {path}"))?;
            let config = kube::Config::from_custom_kubeconfig(
                kube::config::Kubeconfig::read_from(&path)?,
                &kube::config::KubeConfigOptions::default(),
            )
            .await?;
            (kube::Client::try_from(config)?, None)
        } else {
            let sim = Sim::start(config).await.context("start plimsoll-sim")?;
            std::fs::write(&kubeconfig, sim.kubeconfig())?;
            (sim.kube_client().await?, Some(sim))
        };
        install_crds(&client).await?;
        let namespace = format!("e2e-{name}-{}", unique_suffix());
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": namespace, "labels": {"plimsoll.dev/e2e": "true"}}
        }))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("create namespace {namespace}"))?;
        Ok(Env {
            client,
            namespace,
            kubeconfig,
            sim,
            _dir: dir,
        })
    }

    /// The sim's control API; an error on a real cluster. A test that calls it is marked
    /// `#[cfg_attr(real_cluster, ignore = "needs the sim's control API: …")]`, so this error
    /// is seen only when such a test is run on a real cluster with `--ignored`.
    pub fn sim(&self) -> anyhow::Result<&SimHandle> {
        self.sim.as_ref().with_context(|| {
            format!("this test needs plimsoll-sim's control API, and {KUBECONFIG_ENV} is set")
        })
    }

    /// A wiretap in front of the sim's plain HTTP listener and a kubeconfig through it (beside
    /// this test's own): a service given that kubeconfig has every request it sends recorded.
    pub async fn tap(&self) -> anyhow::Result<(tap::Tap, PathBuf)> {
        let upstream: std::net::SocketAddr = self
            .sim()?
            .http_url
            .as_deref()
            .and_then(|u| u.strip_prefix("http://"))
            .context("the sim serves plain HTTP")?
            .parse()?;
        let tap = tap::Tap::start(upstream).await?;
        let kubeconfig = self.kubeconfig.with_file_name("tap.kubeconfig");
        std::fs::write(&kubeconfig, tap.kubeconfig())?;
        Ok((tap, kubeconfig))
    }

    /// The holder and transition count of each shard Lease `<lease>-shard-<i>` (`i` below
    /// `shards`) in this test's namespace.
    pub async fn shard_leases(
        &self,
        lease: &str,
        shards: u32,
    ) -> anyhow::Result<Vec<(Option<String>, i32)>> {
        let api = self.api::<k8s_openapi::api::coordination::v1::Lease>();
        let mut out = Vec::new();
        for i in 0..shards {
            let spec = api
                .get_opt(&format!("{lease}-shard-{i}"))
                .await?
                .and_then(|l| l.spec);
            out.push((
                spec.as_ref()
                    .and_then(|s| s.holder_identity.clone())
                    .filter(|h| !h.is_empty()),
                spec.and_then(|s| s.lease_transitions).unwrap_or(0),
            ));
        }
        Ok(out)
    }

    /// The sim's audit log of writes in this test's namespace; `None` on a real cluster,
    /// which keeps no such log.
    pub fn audit(&self) -> Option<Vec<AuditEntry>> {
        let sim = self.sim.as_ref()?;
        let mut entries = sim.audit();
        entries.retain(|e| e.namespace == self.namespace);
        Some(entries)
    }

    /// Writes of the scale subresource of `name` by `field_manager`, from the audit log
    /// (`None` on a real cluster).
    pub fn scale_writes(&self, field_manager: &str, name: &str) -> Option<usize> {
        let audit = self.audit()?;
        Some(
            audit
                .iter()
                .filter(|e| {
                    e.subresource == "scale"
                        && e.name == name
                        && e.field_manager.as_deref() == Some(field_manager)
                })
                .count(),
        )
    }

    /// Pod evictions, in the order the audit log recorded them (`None` on a real cluster).
    pub fn evictions(&self) -> Option<Vec<AuditEntry>> {
        let mut audit = self.audit()?;
        audit.retain(|e| e.subresource == "eviction");
        Some(audit)
    }

    /// A namespaced API in this test's namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Deletes the namespace and stops the sim.
    pub async fn cleanup(self) {
        let _ = Api::<Namespace>::all(self.client.clone())
            .delete(&self.namespace, &DeleteParams::default())
            .await;
        if let Some(sim) = self.sim {
            sim.shutdown().await;
        }
    }
}

/// A sim for a benchmark that makes every object itself: no workload model, the Plimsoll CRDs
/// installed; with a client over plain HTTP.
pub async fn bench_sim() -> anyhow::Result<(SimHandle, kube::Client)> {
    let sim = Sim::start(SimConfig {
        workload_model: false,
        ..SimConfig::default()
    })
    .await
    .context("start the sim")?;
    let client = sim.http_kube_client()?;
    install_crds(&client).await?;
    Ok((sim, client))
}

/// Applies every Plimsoll CRD server-side and waits until each is served.
pub async fn install_crds(client: &kube::Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("plimsoll-e2e").force();
    for crd in plimsoll_core::api::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .with_context(|| format!("apply CRD {name}"))?;
    }
    Ok(())
}

/// Polls `check` every `every` until it returns `Some`, or fails after `within`.
pub async fn eventually<T, F, Fut>(
    what: &str,
    within: Duration,
    every: Duration,
    mut check: F,
) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + within;
    let mut last_error = None;
    loop {
        match check().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(e) => last_error = Some(e),
        }
        if Instant::now() >= deadline {
            match last_error {
                Some(e) => bail!("{what}: not within {within:?} (last error: {e:#})"),
                None => bail!("{what}: not within {within:?}"),
            }
        }
        tokio::time::sleep(every).await;
    }
}

/// Creates the VerticalPodAutoscaler `web` for the Deployment `web` in `Recreate` mode, with a
/// recommendation for container `app` far above the 100m / 64Mi the harness's pods request, so
/// that every pod is due for eviction.
pub async fn create_recreate_vpa_far_above(
    vpas: &Api<plimsoll_core::api::vpa::VerticalPodAutoscaler>,
) -> anyhow::Result<()> {
    let vpa = serde_json::from_value(serde_json::json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "updatePolicy": {"updateMode": "Recreate"}
        }
    }))?;
    vpas.create(&PostParams::default(), &vpa).await?;
    let recommendation = serde_json::json!({"status": {"recommendation": {"containerRecommendations": [{
        "containerName": "app",
        "target": {"cpu": "500m", "memory": "500Mi"},
        "lowerBound": {"cpu": "400m", "memory": "400Mi"},
        "upperBound": {"cpu": "1", "memory": "1Gi"}
    }]}}});
    vpas.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(&recommendation),
    )
    .await?;
    Ok(())
}

/// Waits until vpa-admission has renewed its status Lease `vpa-admission-controller` in
/// `namespace`: it renews it only once its caches synced and TLS is bound, so the webhook then
/// answers.
pub async fn wait_webhook_ready(
    client: &kube::Client,
    namespace: &str,
    within: Duration,
) -> anyhow::Result<()> {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), namespace);
    eventually(
        "the webhook's status Lease is renewed",
        within,
        Duration::from_millis(200),
        || async {
            Ok(leases
                .get_opt("vpa-admission-controller")
                .await?
                .and_then(|l| l.spec)
                .and_then(|s| s.renew_time)
                .map(|_| ()))
        },
    )
    .await
}

/// Creates the autoscaling/v2 HorizontalPodAutoscaler `name` for the Deployment `name`, with
/// replicas in [`min`, `max`] and no metrics (a target for cron-hpa's minReplicas).
pub async fn create_plain_hpa(env: &Env, name: &str, min: i32, max: i32) -> anyhow::Result<()> {
    let hpa: k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler = serde_json::from_value(
        serde_json::json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                "minReplicas": min, "maxReplicas": max}
        }),
    )?;
    env.api::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>()
        .create(&PostParams::default(), &hpa)
        .await
        .with_context(|| format!("create HPA {name}"))?;
    Ok(())
}

/// Creates the Deployment `name` in the test's namespace: `replicas` pods labelled `app: <name>`,
/// each with one container `app` requesting `cpu` and `memory`.
pub async fn create_deployment(
    env: &Env,
    name: &str,
    replicas: i32,
    cpu: &str,
    memory: &str,
) -> anyhow::Result<()> {
    let labels = serde_json::json!({"app": name});
    create_labelled_deployment(env, name, &labels, replicas, (cpu, memory)).await
}

/// A Deployment `name` whose selector and pod labels are `labels`, each pod requesting
/// `(cpu, memory)`.
pub async fn create_labelled_deployment(
    env: &Env,
    name: &str,
    labels: &serde_json::Value,
    replicas: i32,
    (cpu, memory): (&str, &str),
) -> anyhow::Result<()> {
    let d: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{
                    "name": "app", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}}
                }]}
            }
        }
    }))?;
    env.api::<Deployment>()
        .create(&PostParams::default(), &d)
        .await
        .with_context(|| format!("create deployment {name}"))?;
    Ok(())
}

/// The one warning in a service's log file `log` that says `what`: an error when there is none
/// or more than one (the tests of what a tenant's repeated failures cost the operator's log).
pub fn one_warning(log: &std::path::Path, what: &str) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(log)?;
    let warned: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("WARN") && l.contains(what))
        .collect();
    anyhow::ensure!(warned.len() == 1, "{} warnings: {warned:#?}", warned.len());
    Ok(warned[0].to_owned())
}

/// `count` labels of about 85 bytes, each within the API server's bounds (which bound each label,
/// not their number): 5,000 are 425 KB, past what any service keeps of a pod
/// (`plimsoll_core::pod_fields::POD_BUDGET`, 32 KiB). Every key holds `fat.example.com`, for a
/// test that checks none reached a log.
pub fn many_labels(count: usize) -> serde_json::Map<String, serde_json::Value> {
    (0..count)
        .map(|i| {
            (
                format!("fat.example.com/label-{i:05}"),
                serde_json::json!("v".repeat(60)),
            )
        })
        .collect()
}

/// Adds [`many_labels`]`(5_000)` to the pod of Deployment `app` (its first, once there is one),
/// keeping its own: it stays its ReplicaSet's pod. Returns its name.
pub async fn fatten_pod(env: &Env, app: &str) -> anyhow::Result<String> {
    let pods = env.api::<Pod>();
    let name = eventually(
        &format!("a pod of {app}"),
        Duration::from_secs(60),
        Duration::from_millis(200),
        || async {
            let list = pods
                .list(&kube::api::ListParams::default().labels(&format!("app={app}")))
                .await?;
            Ok(list.items.into_iter().find_map(|p| p.metadata.name))
        },
    )
    .await?;
    let patch = serde_json::json!({"metadata": {"labels": many_labels(5_000)}});
    pods.patch(
        &name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .with_context(|| format!("add labels to {name}"))?;
    Ok(name)
}

/// The pod's condition of type `type_`, if it has one.
pub fn pod_condition<'a>(
    pod: &'a Pod,
    type_: &str,
) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Waits until exactly `count` pods labelled `app: <name>` are Ready.
pub async fn wait_ready_pods(
    env: &Env,
    name: &str,
    count: usize,
    within: Duration,
    every: Duration,
) -> anyhow::Result<()> {
    let pods = env.api::<Pod>();
    let selector = format!("app={name}");
    eventually(
        &format!("{count} ready pods of {name}"),
        within,
        every,
        || async {
            let list = pods.list(&ListParams::default().labels(&selector)).await?;
            let ready = list
                .items
                .iter()
                .filter(|p| pod_condition(p, "Ready").is_some_and(|c| c.status == "True"))
                .count();
            Ok((ready == count).then_some(()))
        },
    )
    .await
}

impl Env {
    /// The namespace the admission webhook lives in: it leaves its own namespace out of
    /// admission, so it lives apart from the test's pods.
    pub fn webhook_home(&self) -> String {
        format!("{}-webhook", self.namespace)
    }

    /// A vpa-recommender configuration for this test: a 1 s interval, checkpoints within 5 s,
    /// only this namespace's VPAs, and a single replica unless `extra` sets `--leader-elect`.
    pub fn recommender_config(
        &self,
        extra: &[&str],
    ) -> anyhow::Result<plimsoll_vpa_recommender::Config> {
        let kubeconfig = self.kubeconfig.display().to_string();
        let flags = [
            "vpa-recommender",
            "--kubeconfig",
            kubeconfig.as_str(),
            "--metrics-address",
            "127.0.0.1:0",
            "--recommender-interval=1s",
            "--checkpoints-timeout=5s",
            "--vpa-object-namespace",
            self.namespace.as_str(),
            "--log-format=text",
        ];
        let election = extra.iter().any(|f| f.starts_with("--leader-elect"));
        let single: &[&str] = if election {
            &[]
        } else {
            &["--leader-elect=false"]
        };
        Ok(plimsoll_vpa_recommender::cli::Args::from_flags(
            flags.iter().chain(single).chain(extra),
        )?
        .into_config())
    }

    /// The real vpa-admission, ready to spawn: self-signed, registered with the cluster by URL
    /// for pod CREATE, renewing its status Lease (`vpa-admission-controller`) in
    /// `status_namespace` every second. Creates [`Env::webhook_home`]; cancel the token to stop.
    pub async fn admission(
        &self,
        status_namespace: &str,
    ) -> anyhow::Result<(
        tokio_util::sync::CancellationToken,
        impl Future<Output = ()> + Send + 'static,
    )> {
        use clap::Parser as _;
        let home = self.webhook_home();
        let ns: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": home}}))?;
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await?;
        let webhook = free_address()?;
        let admin = free_address()?;
        let args = plimsoll_vpa_admission::cli::Args::try_parse_from([
            "vpa-admission".to_owned(),
            format!("--kubeconfig={}", self.kubeconfig.display()),
            format!("--port={}", webhook.port()),
            format!("--metrics-address={admin}"),
            "--self-signed".to_owned(),
            "--register-webhook".to_owned(),
            format!("--webhook-config-name={}", self.namespace),
            format!("--webhook-url=https://{webhook}/"),
            format!("--webhook-service-namespace={home}"),
            format!("--status-lease-namespace={status_namespace}"),
            "--status-lease-update-interval=1s".to_owned(),
            "--log-format=text".to_owned(),
        ])?;
        let token = tokio_util::sync::CancellationToken::new();
        let run = plimsoll_vpa_admission::run(args.into_config(), token.clone());
        Ok((token, async move {
            if let Err(e) = run.await {
                eprintln!("vpa-admission exited: {e:#}");
            }
        }))
    }
}

fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A directory removed on drop.
struct TempDir {
    path: PathBuf,
}

impl TempDir {
    fn new(name: &str) -> anyhow::Result<TempDir> {
        let path = std::env::temp_dir().join(format!("plimsoll-e2e-{name}-{}", unique_suffix()));
        std::fs::create_dir_all(&path)?;
        Ok(TempDir { path })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A file in the temp directory (named after the process, a counter and `name`), removed on
/// drop.
pub struct TempFile(pub PathBuf);

impl TempFile {
    /// Writes `contents` to a fresh file.
    pub fn new(name: &str, contents: &str) -> anyhow::Result<TempFile> {
        let path = std::env::temp_dir().join(format!("plimsoll-e2e-{}-{name}", unique_suffix()));
        std::fs::write(&path, contents)?;
        Ok(TempFile(path))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// An HTTPS Prometheus stand-in that requires the bearer `token`, and a file with the CA that
/// signed its certificate.
pub async fn prometheus_stand_in(
    token: &str,
) -> anyhow::Result<(plimsoll_sim::PrometheusStandIn, TempFile)> {
    let server = plimsoll_sim::PrometheusStandIn::start(plimsoll_sim::StandInOptions {
        token: Some(token.to_owned()),
        ..plimsoll_sim::StandInOptions::default()
    })
    .await?;
    let ca = TempFile::new(
        "prometheus-ca.pem",
        server.ca_pem().context("the stand-in serves https")?,
    )?;
    Ok((server, ca))
}

/// An HPA+ `name` on Deployment `target`: `base` is the spec without the target, and `spec` is
/// merged over it field by field.
pub fn hpa_plus_fixture(
    name: &str,
    target: &str,
    base: &serde_json::Value,
    spec: &serde_json::Value,
) -> anyhow::Result<plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus> {
    let mut fields = serde_json::json!({
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
    });
    for layer in [base, spec] {
        if let (Some(dst), Some(src)) = (fields.as_object_mut(), layer.as_object()) {
            for (k, v) in src {
                dst.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
        "kind": "HorizontalPodAutoscalerPlus",
        "metadata": {"name": name},
        "spec": fields,
    }))?)
}

/// Runs hpa-plus with `config` until it is stopped; an error it ends with is printed.
pub fn spawn_hpa_plus(config: plimsoll_hpa_plus::Config) -> Running<()> {
    Running::spawn("hpa-plus", |token| async move {
        if let Err(e) = plimsoll_hpa_plus::run(config, token).await {
            eprintln!("hpa-plus ended with an error: {e}");
        }
    })
}

/// hpa-plus flags for an in-process instance: short periods (sync 2 s, CPU initialization 1 s,
/// no readiness delay), admin on an ephemeral port, no election; a flag of `extra` replaces the
/// default of the same name.
pub fn hpa_plus_config(env: &Env, extra: &[&str]) -> plimsoll_hpa_plus::Config {
    use clap::Parser as _;
    let kubeconfig = env.kubeconfig.display().to_string();
    let defaults = [
        format!("--kubeconfig={kubeconfig}"),
        "--metrics-address=127.0.0.1:0".to_owned(),
        "--leader-elect=false".to_owned(),
        "--sync-period=2s".to_owned(),
        "--cpu-initialization-period=1s".to_owned(),
        "--initial-readiness-delay=0s".to_owned(),
    ];
    let flag = |s: &str| s.split('=').next().unwrap_or_default().to_owned();
    let mut args = vec!["hpa-plus".to_owned()];
    args.extend(
        defaults
            .into_iter()
            .filter(|d| !extra.iter().any(|e| flag(e) == flag(d))),
    );
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    plimsoll_hpa_plus::cli::Args::try_parse_from(args)
        .expect("test flags parse")
        .into_config()
        .expect("test flags are valid")
}

/// Waits until Deployment `name` reports exactly `replicas` ready replicas (`status.readyReplicas`).
pub async fn wait_deployment_ready(
    env: &Env,
    name: &str,
    replicas: i32,
    within: Duration,
) -> anyhow::Result<()> {
    let api = env.api::<Deployment>();
    eventually(
        &format!("{name} has {replicas} ready pods"),
        within,
        Duration::from_millis(250),
        || {
            let api = api.clone();
            async move {
                let d = api.get(name).await?;
                let ready = d.status.and_then(|s| s.ready_replicas).unwrap_or(0);
                Ok((ready == replicas).then_some(()))
            }
        },
    )
    .await
}

/// `spec.replicas` of Deployment `name` (0 when unset).
pub async fn deployment_replicas(env: &Env, name: &str) -> anyhow::Result<i32> {
    let d = env.api::<Deployment>().get(name).await?;
    Ok(d.spec.and_then(|s| s.replicas).unwrap_or(0))
}
