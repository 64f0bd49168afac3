//! SIGTERM in the middle of a write, for each of the four Lease-holding services.
//!
//! Each test runs the real service as a separate process (`plimsoll-service`, the same
//! `plimsoll_runtime::service::block_on` entry point the service's `main` uses), so the signal
//! path is the real one. The service talks to plimsoll-sim through a [`Tap`], which reports the
//! moment the write leaves the service; a latency fault on that write holds it in the sim for a
//! few seconds, and the test sends SIGTERM while it is held. Then:
//!
//! - the process exits 0;
//! - the write landed (the object's state and the sim's audit log);
//! - the Lease `plimsoll-<binary>` has no holder;
//! - in the audit log the write comes before the Lease's last write (the release): the service
//!   finished its in-flight write first, then released the Lease.
//!
//! They need the sim's control API (latency faults, the audit log, the wiretap on its plain HTTP
//! port), so they are ignored when `PLIMSOLL_E2E_KUBECONFIG` points at a real cluster.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, PostParams};
use plimsoll_core::api::cron::CronHorizontalPodAutoscaler;
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus;
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_e2e::tap::Tap;
use plimsoll_e2e::{create_recreate_vpa_far_above, eventually, free_address, install_crds};
use plimsoll_sim::{AuditEntry, Fault, LoadProfile, LoadSpec, Sim, SimConfig, SimHandle};
use serde_json::json;

/// How long the sim holds the write: long enough that SIGTERM surely arrives, and is handled,
/// while it is held. At 3 s a run of the whole suite on a starved machine (twice its usual time)
/// failed the updater's test once: the test sees the request, checks the audit, sends SIGTERM,
/// and the service must have cancelled its loop before the write returns, each step waiting for
/// a core.
const WRITE_LATENCY: Duration = Duration::from_secs(6);
/// Generous bounds for a loaded two-core machine.
const WORK_WITHIN: Duration = Duration::from_secs(120);
const EXIT_WITHIN: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(250);

/// A sim, a namespace, and the wiretap the service's kubeconfig points at.
struct Cluster {
    sim: SimHandle,
    client: kube::Client,
    namespace: String,
    tap: Tap,
    kubeconfig: PathBuf,
}

impl Cluster {
    async fn start(name: &str) -> anyhow::Result<Cluster> {
        let sim = Sim::start(SimConfig::default()).await?;
        let client = sim.kube_client().await?;
        install_crds(&client).await?;
        let namespace = format!("shutdown-{name}-{}", std::process::id());
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}}))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await?;
        let upstream: SocketAddr = sim
            .http_url
            .as_deref()
            .and_then(|u| u.strip_prefix("http://"))
            .context("the sim serves plain HTTP")?
            .parse()?;
        let tap = Tap::start(upstream).await?;
        let kubeconfig = std::env::temp_dir().join(format!("{namespace}.kubeconfig"));
        std::fs::write(&kubeconfig, tap.kubeconfig())?;
        Ok(Cluster {
            sim,
            client,
            namespace,
            tap,
            kubeconfig,
        })
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Holds every `verb` of `resource` (`plural/subresource`) in the sim for [`WRITE_LATENCY`].
    fn slow(&self, verb: &str, resource: &str) {
        self.sim.add_fault(Fault {
            verb: verb.into(),
            resource: resource.into(),
            latency_ms: u64::try_from(WRITE_LATENCY.as_millis()).unwrap_or(u64::MAX),
            ..Fault::default()
        });
    }

    /// A Deployment `name` of `replicas` pods requesting 100m CPU, with its pods Ready.
    async fn deployment(&self, name: &str, replicas: i32) -> anyhow::Result<()> {
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "app", "image": "app:1",
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
                }
            }
        }))?;
        self.api::<Deployment>()
            .create(&PostParams::default(), &d)
            .await?;
        let pods = self.api::<Pod>();
        let selector = format!("app={name}");
        let want = usize::try_from(replicas)?;
        eventually("the pods are ready", WORK_WITHIN, POLL, || async {
            let ready = pods
                .list(&ListParams::default().labels(&selector))
                .await?
                .items
                .iter()
                .filter(|p| {
                    p.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
                })
                .count();
            Ok((ready == want).then_some(()))
        })
        .await
    }

    async fn replicas(&self, name: &str) -> anyhow::Result<i32> {
        let d = self.api::<Deployment>().get(name).await?;
        d.spec
            .and_then(|s| s.replicas)
            .context("a Deployment without spec.replicas")
    }

    /// Starts `binary` in its own process against the tap, electing on `plimsoll-<binary>` in
    /// this namespace.
    fn spawn(&self, binary: &str, extra: &[String]) -> anyhow::Result<Service> {
        let mut command = Command::new(env!("CARGO_BIN_EXE_plimsoll-service"));
        command
            .arg(binary)
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .arg(format!("--metrics-address={}", free_address()?))
            .arg("--leader-elect=true")
            .arg(format!("--lease-namespace={}", self.namespace))
            .arg("--log-format=text")
            // The skeleton's steps (leading, shutting down, released, stopped), the service's
            // own steps (caches synced, loops done: what a test that times out needs), warnings.
            .arg(format!(
                "--log-filter=warn,plimsoll_runtime=info,plimsoll_{}=info",
                binary.replace('-', "_")
            ))
            .args(extra)
            .env("POD_NAME", format!("e2e-{binary}"))
            .stdin(Stdio::null());
        let child = command.spawn().context("start plimsoll-service")?;
        Ok(Service {
            child: Some(child),
            binary: binary.to_owned(),
        })
    }

    /// SIGTERM while the write (`method` on a path ending in `path`) is held in the sim, then
    /// every check of the module documentation.
    async fn sigterm_mid_write(
        &self,
        mut service: Service,
        method: &str,
        path: &str,
        is_write: impl Fn(&AuditEntry) -> bool,
    ) -> anyhow::Result<()> {
        self.tap.wait_for(method, path, WORK_WITHIN).await?;
        ensure!(
            !self.sim.audit().iter().any(&is_write),
            "the write landed before SIGTERM: the latency fault did not hold it"
        );
        let lease_name = format!("plimsoll-{}", service.binary);
        service.terminate()?;
        let status = service.wait(EXIT_WITHIN).await?;
        ensure!(status.success(), "{} exited with {status}", service.binary);

        let audit = self.sim.audit();
        let write = audit
            .iter()
            .position(&is_write)
            .context("the write in flight at SIGTERM never landed")?;
        let release = audit
            .iter()
            .rposition(|e| {
                e.resource == "leases" && e.namespace == self.namespace && e.name == lease_name
            })
            .context("the Lease was never written")?;
        ensure!(
            write < release,
            "the Lease was released (audit #{release}) before the write in flight landed \
             (audit #{write})"
        );
        let lease = self.api::<Lease>().get(&lease_name).await?;
        let holder = lease.spec.and_then(|s| s.holder_identity);
        ensure!(holder.is_none(), "the Lease still names {holder:?}");
        Ok(())
    }

    async fn cleanup(self) {
        let _ = std::fs::remove_file(&self.kubeconfig);
        self.sim.shutdown().await;
    }
}

/// The service's process; killed if the test ends before it exits.
struct Service {
    child: Option<Child>,
    binary: String,
}

impl Service {
    fn terminate(&self) -> anyhow::Result<()> {
        let pid = self.child.as_ref().context("already exited")?.id();
        let status = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .context("run kill")?;
        ensure!(status.success(), "kill -TERM {pid}: {status}");
        Ok(())
    }

    async fn wait(&mut self, within: Duration) -> anyhow::Result<ExitStatus> {
        let mut child = self.child.take().context("already exited")?;
        let waited = tokio::task::spawn_blocking(move || {
            let deadline = std::time::Instant::now() + within;
            loop {
                if let Some(status) = child.try_wait()? {
                    return Ok(Ok(status));
                }
                if std::time::Instant::now() >= deadline {
                    return Ok::<_, std::io::Error>(Err(child));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
        .await??;
        match waited {
            Ok(status) => Ok(status),
            Err(child) => {
                self.child = Some(child);
                bail!("{} did not exit within {within:?} of SIGTERM", self.binary)
            }
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// hpa-plus: SIGTERM while the scale write is held; the reconcile finishes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: latency faults, the audit log, the wiretap"
)]
async fn hpa_plus_finishes_the_scale_write_then_releases_the_lease() -> anyhow::Result<()> {
    let _serial = plimsoll_e2e::serial().await;
    let cluster = Cluster::start("hpa-plus").await?;
    cluster.deployment("web", 1).await?;
    // 185m on one pod against a 50 % target of 100m: scale up (to 4).
    cluster.sim.set_load(
        &cluster.namespace,
        "deployments",
        "web",
        LoadSpec {
            profile: LoadProfile::Constant { value: 180.0 },
            ..LoadSpec::default()
        },
    );
    cluster.slow("patch", "deployments/scale");
    let service = cluster.spawn(
        "hpa-plus",
        &[
            "--sync-period=2s".into(),
            "--cpu-initialization-period=1s".into(),
            "--initial-readiness-delay=0s".into(),
        ],
    )?;
    let hpa: HorizontalPodAutoscalerPlus = serde_json::from_value(json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
        "kind": "HorizontalPodAutoscalerPlus",
        "metadata": {"name": "web"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 10, "syncPeriodSeconds": 2,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 50}}}],
        }
    }))?;
    cluster
        .api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), &hpa)
        .await?;
    let ns = cluster.namespace.clone();
    cluster
        .sigterm_mid_write(service, "PATCH", "/deployments/web/scale", |e| {
            e.resource == "deployments"
                && e.subresource == "scale"
                && e.namespace == ns
                && e.name == "web"
        })
        .await?;
    let replicas = cluster.replicas("web").await?;
    assert!(replicas > 1, "the scale-up landed: {replicas} replicas");
    cluster.cleanup().await;
    Ok(())
}

/// cron-hpa: SIGTERM while a job's scale write is held; the reconcile finishes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: latency faults, the audit log, the wiretap"
)]
async fn cron_hpa_finishes_the_job_write_then_releases_the_lease() -> anyhow::Result<()> {
    let _serial = plimsoll_e2e::serial().await;
    let cluster = Cluster::start("cron-hpa").await?;
    cluster.deployment("web", 1).await?;
    cluster.slow("patch", "deployments/scale");
    let service = cluster.spawn("cron-hpa", &[])?;
    // Every second: the first firing after the controller starts scales to 3.
    let cron: CronHorizontalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
        "kind": "CronHorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "jobs": [{"name": "up", "schedule": "* * * * * *", "targetSize": 3}],
        }
    }))?;
    cluster
        .api::<CronHorizontalPodAutoscaler>()
        .create(&PostParams::default(), &cron)
        .await?;
    let ns = cluster.namespace.clone();
    cluster
        .sigterm_mid_write(service, "PATCH", "/deployments/web/scale", |e| {
            e.resource == "deployments"
                && e.subresource == "scale"
                && e.namespace == ns
                && e.name == "web"
        })
        .await?;
    assert_eq!(cluster.replicas("web").await?, 3, "the job's write landed");
    cluster.cleanup().await;
    Ok(())
}

/// vpa-updater: SIGTERM while an eviction is held; it lands, and no further one starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: latency faults, the audit log, the wiretap"
)]
async fn vpa_updater_finishes_the_eviction_then_releases_the_lease() -> anyhow::Result<()> {
    let _serial = plimsoll_e2e::serial().await;
    let cluster = Cluster::start("vpa-updater").await?;
    cluster.deployment("web", 4).await?;
    // Far above the pods' 100m: every pod is due for eviction.
    create_recreate_vpa_far_above(&cluster.api::<VerticalPodAutoscaler>()).await?;
    cluster.slow("create", "pods/eviction");
    let service = cluster.spawn(
        "vpa-updater",
        &[
            format!("--vpa-object-namespace={}", cluster.namespace),
            "--use-admission-controller-status=false".into(),
            // One loop at start; the next would be an hour later.
            "--updater-interval=1h".into(),
        ],
    )?;
    let ns = cluster.namespace.clone();
    let evictions = |audit: &[AuditEntry]| {
        audit
            .iter()
            .filter(|e| e.subresource == "eviction" && e.namespace == ns)
            .map(|e| e.name.clone())
            .collect::<Vec<_>>()
    };
    let pods_before: Vec<String> = cluster
        .api::<Pod>()
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    cluster
        .sigterm_mid_write(service, "POST", "/eviction", |e| {
            e.subresource == "eviction" && e.namespace == ns
        })
        .await?;
    let evicted = evictions(&cluster.sim.audit());
    assert_eq!(
        evicted.len(),
        1,
        "the eviction in flight landed, and no other started after SIGTERM: {evicted:?}"
    );
    assert!(pods_before.contains(&evicted[0]), "{evicted:?}");
    cluster.cleanup().await;
    Ok(())
}

/// vpa-recommender: SIGTERM while a VPA status write is held; the loop finishes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: latency faults, the audit log, the wiretap"
)]
async fn vpa_recommender_finishes_the_status_write_then_releases_the_lease() -> anyhow::Result<()> {
    let _serial = plimsoll_e2e::serial().await;
    let cluster = Cluster::start("vpa-recommender").await?;
    cluster.deployment("web", 1).await?;
    let vpa: VerticalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "recommenders": [{"name": "plimsoll"}],
            "updatePolicy": {"updateMode": "Off"}
        }
    }))?;
    cluster
        .api::<VerticalPodAutoscaler>()
        .create(&PostParams::default(), &vpa)
        .await?;
    cluster.slow("patch", "verticalpodautoscalers/status");
    let service = cluster.spawn(
        "vpa-recommender",
        &[
            format!("--vpa-object-namespace={}", cluster.namespace),
            "--recommender-interval=1s".into(),
            "--checkpoints-timeout=5s".into(),
        ],
    )?;
    let ns = cluster.namespace.clone();
    cluster
        .sigterm_mid_write(
            service,
            "PATCH",
            "/verticalpodautoscalers/web/status",
            |e| {
                e.resource == "verticalpodautoscalers"
                    && e.subresource == "status"
                    && e.namespace == ns
                    && e.name == "web"
            },
        )
        .await?;
    let vpa = cluster.api::<VerticalPodAutoscaler>().get("web").await?;
    let recommendation = vpa.status.and_then(|s| s.recommendation);
    assert!(
        recommendation.is_some(),
        "the status write in flight at SIGTERM landed"
    );
    cluster.cleanup().await;
    Ok(())
}
