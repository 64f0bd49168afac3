//! A hostile tenant (issue #28): a ServiceAccount holding only the built-in `edit` role in its
//! own namespace (widened, as a cluster does, by the chart's `plimsoll-edit`) tries every way
//! a namespace user has to hurt the services, another tenant or the cluster, on a sim that
//! enforces RBAC (`--authorize`) with each service under its own ServiceAccount and RBAC from
//! `deploy/`. Another tenant's autoscaler runs beside it the whole time.
//!
//! What each test asserts: the services stay up and within their memory budget, the other
//! tenant's autoscaler keeps its cadence (the gaps between its evaluations, measured at the
//! Prometheus server it queries), no request goes where the operator did not allow one, nothing
//! a remote server said reaches a message the tenant reads, and nothing outside the tenant's
//! namespace changes (the sim's access log of every write). Each test prints its rows of the
//! table in docs/security.md (`cargo test -p plimsoll-e2e --test e2e tenants:: -- --nocapture`).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, PostParams};
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus;
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_e2e::access::{self, SYSTEM_NAMESPACE, status_of};
use plimsoll_e2e::chaos::Process;
use plimsoll_e2e::hostile::{Behaviour, HostileServer, MARKER};
use plimsoll_e2e::{Env, create_deployment, eventually, webhook};
use plimsoll_sim::SimConfig;
use serde_json::{Value, json};

const WITHIN: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(250);
/// hpa-plus' sync period in these tests.
const PERIOD: Duration = Duration::from_secs(2);
/// The memory budget of hpa-plus under attack (the chart's limit is 512Mi).
const RSS_BUDGET_KIB: u64 = 300 * 1024;

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_plimsoll-service"))
}

/// One row of the attack table.
fn row(attack: &str, result: &str) {
    println!("| {attack} | {result} |");
}

/// The cluster, the victim's namespace (the Env's) and the tenant's, and a client acting as
/// the tenant's ServiceAccount `mallory` bound to `edit` in its namespace only.
struct Tenancy {
    env: Env,
    tenant: String,
    mallory: kube::Client,
    mallory_user: String,
}

impl Tenancy {
    async fn start(name: &str, components: &[(&str, &[&str])]) -> anyhow::Result<Tenancy> {
        let env = Env::start_with(
            name,
            SimConfig {
                authorize: true,
                ..SimConfig::default()
            },
        )
        .await?;
        access::install_rbac_with_modes(&env.client, components).await?;
        for doc in access::documents(&access::deploy_dir().join("user-roles.yaml"))? {
            access::apply(&env.client, &doc).await?;
        }
        let tenant = format!("{}-mallory", env.namespace);
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": tenant}}))?;
        Api::<Namespace>::all(env.client.clone())
            .create(&PostParams::default(), &ns)
            .await?;
        let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "mallory"}}))?;
        Api::<ServiceAccount>::namespaced(env.client.clone(), &tenant)
            .create(&PostParams::default(), &sa)
            .await?;
        let binding: RoleBinding = serde_json::from_value(json!({
            "metadata": {"name": "mallory-edit"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "ServiceAccount", "name": "mallory", "namespace": tenant}]
        }))?;
        Api::<RoleBinding>::namespaced(env.client.clone(), &tenant)
            .create(&PostParams::default(), &binding)
            .await?;
        let kubeconfig = env.sim()?.service_account_kubeconfig(&tenant, "mallory")?;
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::from_yaml(&kubeconfig)?,
            &kube::config::KubeConfigOptions::default(),
        )
        .await?;
        let mallory = kube::Client::try_from(config)?;
        let mallory_user = format!("system:serviceaccount:{tenant}:mallory");
        Ok(Tenancy {
            env,
            tenant,
            mallory,
            mallory_user,
        })
    }

    fn tenant_api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.mallory.clone(), &self.tenant)
    }

    /// Every write the sim allowed.
    fn writes(&self) -> anyhow::Result<Vec<Write>> {
        Ok(self
            .env
            .sim()?
            .access_log()
            .into_iter()
            .filter(|r| r.allowed && r.attributes.resource_request)
            .filter(|r| {
                ["create", "update", "patch", "delete", "deletecollection"]
                    .contains(&r.attributes.verb.as_str())
            })
            .map(|r| Write {
                resource: r.attributes.combined_resource(),
                user: r.attributes.user.name,
                verb: r.attributes.verb,
                namespace: r.attributes.namespace,
                name: r.attributes.name,
            })
            .collect())
    }
}

/// A write the sim allowed.
#[derive(Debug)]
struct Write {
    user: String,
    verb: String,
    namespace: String,
    /// `resource` or `resource/subresource`.
    resource: String,
    name: String,
}

/// The condition `type_` of an HPA+ as (status, reason, message).
async fn condition(
    api: &Api<HorizontalPodAutoscalerPlus>,
    name: &str,
    type_: &str,
) -> anyhow::Result<Option<(String, String, String)>> {
    let object = serde_json::to_value(api.get(name).await?)?;
    Ok(object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            (text("status"), text("reason"), text("message"))
        }))
}

/// Waits for ScalingActive=False with `reason` on `name`; its message.
async fn failing_with(
    api: &Api<HorizontalPodAutoscalerPlus>,
    name: &str,
    reason: &str,
) -> anyhow::Result<String> {
    eventually(&format!("{name}: {reason}"), WITHIN, POLL, || async {
        Ok(condition(api, name, "ScalingActive")
            .await?
            .filter(|(status, r, _)| status == "False" && r == reason)
            .map(|(_, _, message)| message))
    })
    .await
}

/// An HPA+ `name` on Deployment `target` with `metrics`.
fn autoscaler(
    name: &str,
    target: &str,
    metrics: &Value,
) -> anyhow::Result<HorizontalPodAutoscalerPlus> {
    plimsoll_e2e::hpa_plus_fixture(
        name,
        target,
        &json!({"minReplicas": 1, "maxReplicas": 3, "syncPeriodSeconds": PERIOD.as_secs()}),
        &json!({"metrics": metrics}),
    )
}

/// A Prometheus metric named `name` on `server` (`None`: the default server).
fn prometheus_metric(name: &str, query: &str, server: Option<&str>) -> Value {
    let mut p = json!({"name": name, "query": query,
        "target": {"type": "Value", "value": "1"}});
    if let Some(server) = server {
        p["serverAddress"] = json!(server);
    }
    json!({"type": "Prometheus", "prometheus": p})
}

/// Peak resident memory of a process (VmHWM), KiB.
fn peak_rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("VmHWM")
}

/// The largest gap between consecutive queries containing `marker` received after `since`.
fn largest_gap(server: &HostileServer, marker: &str, since: Instant) -> (Duration, usize) {
    let times: Vec<Instant> = server
        .asked()
        .into_iter()
        .filter(|a| a.query.contains(marker) && a.at >= since)
        .map(|a| a.at)
        .collect();
    let gap = times
        .windows(2)
        .map(|w| w[1].duration_since(w[0]))
        .max()
        .unwrap_or(Duration::MAX);
    (gap, times.len())
}

/// The Prometheus servers of the hpa-plus test: the operator's, and three a tenant names.
struct Servers {
    operators: HostileServer,
    huge: HostileServer,
    blackhole: HostileServer,
    unallowed: HostileServer,
}

impl Servers {
    async fn start() -> anyhow::Result<Servers> {
        Ok(Servers {
            operators: HostileServer::start(Behaviour::Answer(1.0)).await?,
            huge: HostileServer::start(Behaviour::Huge(300 * 1024 * 1024)).await?,
            blackhole: HostileServer::start(Behaviour::Silent).await?,
            unallowed: HostileServer::start(Behaviour::Answer(1.0)).await?,
        })
    }
}

/// hpa-plus as its own process under its ServiceAccount, native mode on. The operator allowed
/// two servers besides its own, which the tenant said were its own Prometheus: one turns out
/// to answer 300 MB, the other never answers.
fn start_hpa_plus(t: &Tenancy, servers: &Servers, log: &Path) -> anyhow::Result<Process> {
    let kubeconfig = access::kubeconfig_of(&t.env, "hpa-plus")?;
    Process::spawn(
        exe(),
        "hpa-plus",
        "hpa-plus-0",
        &kubeconfig,
        SYSTEM_NAMESPACE,
        &[
            "--native-hpa=true".to_owned(),
            format!("--sync-period={}s", PERIOD.as_secs()),
            // Two servers a tenant named, two queries in flight each: at most four of the eight
            // workers ever wait on them.
            "--workers=8".to_owned(),
            "--prometheus-server-concurrency=2".to_owned(),
            format!("--prometheus-address={}", servers.operators.url()),
            format!(
                "--prometheus-allowed-servers={},{}",
                servers.huge.url(),
                servers.blackhole.url()
            ),
        ],
        Some(log),
    )
}

/// The other tenant: one autoscaler on the operator's Prometheus, evaluated every period; its
/// query names its namespace, so the operator's server can time its evaluations.
async fn victim(t: &Tenancy, servers: &Servers) -> anyhow::Result<()> {
    let victim_ns = t.env.namespace.clone();
    create_deployment(&t.env, "web", 1, "100m", "64Mi").await?;
    let query = format!("sum(requests{{namespace=\"{victim_ns}\"}})");
    t.env
        .api::<HorizontalPodAutoscalerPlus>()
        .create(
            &PostParams::default(),
            &autoscaler(
                "web",
                "web",
                &json!([prometheus_metric("requests", &query, None)]),
            )?,
        )
        .await?;
    let since = Instant::now();
    eventually(
        "the victim's autoscaler is evaluated",
        WITHIN,
        POLL,
        || async { Ok((largest_gap(&servers.operators, &victim_ns, since).1 >= 2).then_some(())) },
    )
    .await
}

/// Everything the tenant writes, with its own credentials, into its own namespace: a workload,
/// autoscalers on the huge server, the blackhole and a server not allowed (by field and by a
/// native HPA's annotation), and a native HPA with garbage where hpa-plus keeps history.
async fn attack(t: &Tenancy, servers: &Servers) -> anyhow::Result<()> {
    // One workload per autoscaler: autoscalers sharing pods refuse to act (AmbiguousSelector).
    let names = ["huge", "scan", "scan-native", "garbage"]
        .into_iter()
        .map(str::to_owned)
        .chain((0..12).map(|i| format!("hole-{i}")));
    for name in names {
        let target: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "app", "image": "app",
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}
        }))?;
        t.tenant_api::<k8s_openapi::api::apps::v1::Deployment>()
            .create(&PostParams::default(), &target)
            .await?;
    }
    let plus = t.tenant_api::<HorizontalPodAutoscalerPlus>();
    let mut objects = vec![
        autoscaler(
            "huge",
            "huge",
            &json!([prometheus_metric("big", "up", Some(&servers.huge.url()))]),
        )?,
        autoscaler(
            "scan",
            "scan",
            &json!([prometheus_metric(
                "probe",
                "up",
                Some(&servers.unallowed.url())
            )]),
        )?,
    ];
    for i in 0..12 {
        let metrics: Vec<Value> = (0..6)
            .map(|m| {
                let query = format!("q{i}_{m}");
                prometheus_metric(&format!("m{m}"), &query, Some(&servers.blackhole.url()))
            })
            .collect();
        let name = format!("hole-{i}");
        objects.push(autoscaler(&name, &name, &Value::Array(metrics))?);
    }
    for object in &objects {
        plus.create(&PostParams::default(), object).await?;
    }
    let scan: HorizontalPodAutoscaler = serde_json::from_value(json!({
        "metadata": {"name": "scan-native", "annotations": {
            "metric-config.external.prometheus-query.prometheus/prometheus-server": servers.unallowed.url(),
            "metric-config.external.prometheus-query.prometheus/probe": "up"}},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "scan-native"},
            "minReplicas": 1, "maxReplicas": 3,
            "metrics": [{"type": "External", "external": {
                "metric": {"name": "prometheus-query", "selector": {"matchLabels": {"query-name": "probe"}}},
                "target": {"type": "Value", "value": "1"}}}]}
    }))?;
    let huge_number = "9".repeat(400);
    let garbage: HorizontalPodAutoscaler = serde_json::from_value(json!({
        "metadata": {"name": "garbage", "annotations": {
            "plimsoll.dev/decision-memory":
                format!("{{\"recommendations\":[[{huge_number},{huge_number}]]}}"),
            "plimsoll.dev/predictive-status":
                format!("{{\"load\":{{\"newest\":-{huge_number},\"buckets\":[1e308]}}}}"),
            "plimsoll.dev/min-replicas-tuning-status": "\u{0}{{[[[[[[[[[[".repeat(1000)}},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "garbage"},
            "minReplicas": 1, "maxReplicas": 3,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 60}}}]}
    }))?;
    for hpa in [scan, garbage] {
        t.tenant_api::<HorizontalPodAutoscaler>()
            .create(&PostParams::default(), &hpa)
            .await?;
    }
    Ok(())
}

/// The operator's cluster-scoped kind with a scale subresource (a node pool, as some cluster
/// operators have), at one replica.
async fn node_pool(t: &Tenancy) -> anyhow::Result<Api<kube::api::DynamicObject>> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "nodepools.infra.example.com"},
        "spec": {
            "group": "infra.example.com", "scope": "Cluster",
            "names": {"plural": "nodepools", "singular": "nodepool", "kind": "NodePool"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"scale": {"specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas"}}}]
        }
    }))?;
    Api::<CustomResourceDefinition>::all(t.env.client.clone())
        .create(&PostParams::default(), &crd)
        .await?;
    let resource = kube::api::ApiResource {
        group: "infra.example.com".into(),
        version: "v1".into(),
        api_version: "infra.example.com/v1".into(),
        kind: "NodePool".into(),
        plural: "nodepools".into(),
    };
    let pools = Api::<kube::api::DynamicObject>::all_with(t.env.client.clone(), &resource);
    let pool: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "infra.example.com/v1", "kind": "NodePool",
        "metadata": {"name": "pool"}, "spec": {"replicas": 1}
    }))?;
    pools.create(&PostParams::default(), &pool).await?;
    Ok(pools)
}

/// An HPA+ `name` on `target` (a `scaleTargetRef`), 5 to 10 replicas at 60 % CPU.
fn on_cpu(name: &str, target: &Value) -> anyhow::Result<HorizontalPodAutoscalerPlus> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
        "kind": "HorizontalPodAutoscalerPlus",
        "metadata": {"name": name},
        "spec": {"scaleTargetRef": target, "minReplicas": 5, "maxReplicas": 10,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 60}}}]}
    }))?)
}

/// The path the tenant writes as a target's `apiVersion`: the other tenant's Secrets.
fn secrets_path(t: &Tenancy) -> String {
    format!(
        "x/v1/../../../api/v1/namespaces/{}/secrets",
        t.env.namespace
    )
}

/// Autoscalers whose targets are no object of the tenant's namespace: the node pool, which
/// hpa-plus's cluster-wide `*/scale` right could resize, and an `apiVersion` that is a path.
async fn outside_targets(t: &Tenancy) -> anyhow::Result<()> {
    let plus = t.tenant_api::<HorizontalPodAutoscalerPlus>();
    let targets = [
        (
            "cluster-target",
            "infra.example.com/v1".to_owned(),
            "NodePool",
            "pool",
        ),
        ("path-target", secrets_path(t), "Secret", "x"),
    ];
    for (name, api_version, kind, target) in targets {
        let object = on_cpu(
            name,
            &json!({"apiVersion": api_version, "kind": kind, "name": target}),
        )?;
        plus.create(&PostParams::default(), &object).await?;
    }
    Ok(())
}

/// Both are refused before any request for them: the pool keeps its replica, and hpa-plus
/// asked nothing of node pools (but discovery) nor of a path with `..`.
async fn outside_refused(t: &Tenancy, pools: &Api<kube::api::DynamicObject>) -> anyhow::Result<()> {
    let plus = t.tenant_api::<HorizontalPodAutoscalerPlus>();
    for (name, says) in [
        ("cluster-target", "cluster-scoped"),
        ("path-target", "apiVersion must be"),
    ] {
        let seen = std::sync::Mutex::new(None);
        let refused = eventually(&format!("{name} is refused"), WITHIN, POLL, || async {
            let found = condition(&plus, name, "AbleToScale").await?;
            let refused = found
                .as_ref()
                .is_some_and(|(status, _, message)| status == "False" && message.contains(says));
            *seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = found;
            Ok(refused.then_some(()))
        })
        .await;
        refused.with_context(|| format!("last AbleToScale of {name}: {:?}", seen.lock().ok()))?;
    }
    let pool = pools.get("pool").await?;
    assert_eq!(
        pool.data.pointer("/spec/replicas"),
        Some(&json!(1)),
        "the node pool was resized"
    );
    let hpa_plus_user = access::user_of("hpa-plus");
    let secrets = secrets_path(t);
    for r in t.env.sim()?.access_log() {
        let a = &r.attributes;
        if a.user.name != hpa_plus_user {
            continue;
        }
        assert!(
            !(a.resource_request && a.resource == "nodepools"),
            "hpa-plus asked for the node pool: {} {}",
            a.verb,
            a.path
        );
        assert!(
            !a.path.split('/').any(|segment| segment == "..") && !a.path.contains(&secrets),
            "hpa-plus requested the path the tenant wrote: {}",
            a.path
        );
    }
    row(
        "scale target a cluster-scoped kind with `/scale` (a node pool), or an `apiVersion` that is a path (`x/v1/../../../api/v1/namespaces/<other>/secrets`)",
        "`AbleToScale=False` naming why; the pool keeps its replicas; no request for the pool (but discovery) or for the path",
    );
    Ok(())
}

/// How many autoscalers name a kind no cluster serves.
const GHOSTS: usize = 40;

/// Autoscalers naming kinds no cluster serves, each in a group-version of its own: failing at
/// every evaluation, each failure a discovery request and an Event write unless both are
/// remembered.
async fn ghosts(t: &Tenancy) -> anyhow::Result<()> {
    let plus = t.tenant_api::<HorizontalPodAutoscalerPlus>();
    for i in 0..GHOSTS {
        let target = json!({"apiVersion": format!("ghost{i}.example.com/v1"), "kind": "Ghost",
            "name": "g"});
        let object = on_cpu(&format!("ghost-{i}"), &target)?;
        plus.create(&PostParams::default(), &object).await?;
    }
    Ok(())
}

/// An autoscaler pausing for the rollouts of a kind that says nothing of them (a ReplicaSet's
/// status has no `updatedReplicas`): its rollout state is unknown at every evaluation.
async fn unknown_rollout(t: &Tenancy) -> anyhow::Result<()> {
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "unrolled"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "unrolled"}},
            "template": {"metadata": {"labels": {"app": "unrolled"}},
                "spec": {"containers": [{"name": "app", "image": "app",
                    "resources": {"requests": {"cpu": "100m"}}}]}}}
    }))?;
    let replica_sets = t.tenant_api::<ReplicaSet>();
    replica_sets.create(&PostParams::default(), &rs).await?;
    // Until its controller first writes its status, a new ReplicaSet's status lacks even an
    // observedGeneration: an autoscaler evaluated then is told that, and then (a second
    // message, a second warning) that there is no updatedReplicas. The attack is the second.
    eventually(
        "the ReplicaSet's status is written",
        WITHIN,
        POLL,
        || async {
            let rs = replica_sets.get("unrolled").await?;
            Ok(rs.status.and_then(|s| s.observed_generation).map(|_| ()))
        },
    )
    .await?;
    let target = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "unrolled"});
    let mut plus = on_cpu("unrolled", &target)?;
    plus.spec.pause_during_rollout = true;
    plus.spec.min_replicas = Some(1);
    plus.spec.max_replicas = 2;
    t.tenant_api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), &plus)
        .await?;
    Ok(())
}

/// The unknown rollout state is said in the autoscaler's condition, and is one warning in
/// hpa-plus's log, not one per evaluation.
async fn unknown_rollout_logged_once(
    t: &Tenancy,
    elapsed: Duration,
    log: &Path,
) -> anyhow::Result<()> {
    let plus = t
        .tenant_api::<HorizontalPodAutoscalerPlus>()
        .get("unrolled")
        .await?;
    let paused = plus
        .status
        .iter()
        .flat_map(|s| s.conditions.iter())
        .find(|c| c.type_ == "PausedForRollout")
        .map(|c| (c.status.clone(), c.reason.clone()));
    assert_eq!(
        paused,
        Some(("False".to_owned(), Some("RolloutStateUnknown".to_owned()))),
        "{:?}",
        plus.status
    );
    let warned = plimsoll_e2e::one_warning(log, "rollout state unknown")?;
    assert!(warned.contains("\"unrolled\""), "{warned}");
    row(
        "`pauseDuringRollout` on a kind whose status says nothing of rollouts (a ReplicaSet)",
        &format!(
            "`PausedForRollout` `False` / `RolloutStateUnknown` (it holds nothing); 1 warning \
             in hpa-plus's log over {:.0} s at a {} s period",
            elapsed.as_secs_f64(),
            PERIOD.as_secs()
        ),
    );
    Ok(())
}

/// Over `elapsed` of failing evaluations the ghosts cost no discovery request of their own (the
/// served group-versions are read at most every 5 s) and two Event writes each (the Event, and
/// its series at the second report; the count of the later reports is written every 30 min).
async fn ghosts_cost_nothing(
    t: &Tenancy,
    elapsed: Duration,
    hpa_plus_log: &Path,
) -> anyhow::Result<()> {
    let hpa_plus_user = access::user_of("hpa-plus");
    let log = t.env.sim()?.access_log();
    let by_hpa_plus = log
        .iter()
        .map(|r| &r.attributes)
        .filter(|a| a.user.name == hpa_plus_user);
    let (mut own, mut lists, mut patches) = (0, 0, 0);
    for a in by_hpa_plus {
        own += usize::from(a.path.starts_with("/apis/ghost"));
        lists += usize::from(a.path == "/apis");
        patches += usize::from(
            a.resource == "events" && a.verb == "patch" && a.name.starts_with("ghost-"),
        );
    }
    assert_eq!(own, 0, "discovery requests for the ghosts' group-versions");
    let periods = usize::try_from(elapsed.as_secs() / 5).unwrap_or(usize::MAX) + 2;
    assert!(lists <= periods, "{lists} reads of /apis in {elapsed:?}");
    let events =
        Api::<k8s_openapi::api::events::v1::Event>::namespaced(t.env.client.clone(), &t.tenant)
            .list(&kube::api::ListParams::default())
            .await?;
    let ghost_events: Vec<_> = events
        .items
        .iter()
        .filter(|e| {
            e.regarding
                .as_ref()
                .and_then(|r| r.name.as_deref())
                .is_some_and(|n| n.starts_with("ghost-"))
        })
        .collect();
    // Each ghost failed at every period since it was created: at least twice (its Event is a
    // series), and about `elapsed / PERIOD` times, each a write before.
    let series = ghost_events.iter().filter(|e| e.series.is_some()).count();
    assert_eq!(
        series, GHOSTS,
        "every ghost was reported again: {ghost_events:?}"
    );
    let evaluations = elapsed.as_secs() / PERIOD.as_secs().max(1);
    assert!(evaluations >= 5, "{elapsed:?}: too short to prove anything");
    let writes = ghost_events.len() + patches;
    assert!(
        writes <= 2 * ghost_events.len() && ghost_events.len() <= 2 * GHOSTS,
        "{writes} Event writes for {} Events",
        ghost_events.len()
    );
    // One warning per ghost, however often it failed (a warning again after 10 minutes).
    let text = std::fs::read_to_string(hpa_plus_log)
        .with_context(|| format!("read {}", hpa_plus_log.display()))?;
    let warnings = text
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("ghost-"))
        .count();
    assert!(
        (1..=GHOSTS).contains(&warnings),
        "{warnings} warnings about the ghosts"
    );
    row(
        &format!(
            "{GHOSTS} autoscalers naming kinds no cluster serves, each in its own group-version"
        ),
        &format!(
            "failing at every {} s period for {:.0} s: {} Events in {writes} writes (one and its \
             series each); no discovery request for their group-versions, {lists} reads of \
             `/apis`; {warnings} warnings in hpa-plus's log",
            PERIOD.as_secs(),
            elapsed.as_secs_f64(),
            ghost_events.len(),
        ),
    );
    Ok(())
}

/// Pods with more labels than any cache keeps of a pod (`plimsoll_core::pod_fields::POD_BUDGET`).
const FAT_PODS: usize = 20;
const FAT_LABELS: usize = 5_000;

/// Pods holding a megabyte of labels between them each few: every service caches every pod.
async fn fat_pods(t: &Tenancy) -> anyhow::Result<()> {
    let pods = t.tenant_api::<Pod>();
    let labels = plimsoll_e2e::many_labels(FAT_LABELS);
    for i in 0..FAT_PODS {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("fat-{i}"), "labels": labels},
            "spec": {"containers": [{"name": "app", "image": "app:1"}]},
        }))?;
        pods.create(&PostParams::default(), &pod).await?;
    }
    Ok(())
}

/// hpa-plus left every fat pod out with a warning naming it (once, or once more after a
/// relist), and none of the labels reached its log.
fn fat_pods_left_out(log: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(log).with_context(|| format!("read {}", log.display()))?;
    let warned: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("too large to cache"))
        .filter(|l| l.contains("\"Pod\""))
        .collect();
    let named: std::collections::BTreeSet<usize> = (0..FAT_PODS)
        .filter(|i| {
            let name = format!("fat-{i}");
            // The name is a quoted field value, with or without colours around `=`.
            warned.iter().any(|l| l.contains(&format!("\"{name}\"")))
        })
        .collect();
    assert_eq!(
        named.len(),
        FAT_PODS,
        "pods warned of: {named:?} in {warned:?}"
    );
    assert!(warned.len() <= 2 * FAT_PODS, "{} warnings", warned.len());
    assert!(
        !text.contains("fat.example.com"),
        "a tenant's label in the log"
    );
    row(
        &format!(
            "{FAT_PODS} pods with {FAT_LABELS} labels each ({} KB)",
            FAT_LABELS * 85 / 1000
        ),
        &format!(
            "left out of every decision (what a cached pod keeps is at most 32 KiB); {} \
             warnings naming them, none of their labels in hpa-plus's log",
            warned.len()
        ),
    );
    Ok(())
}

/// An HPA+ every field of which is within the CRD's bounds, and the whole past what hpa-plus
/// evaluates (`plimsoll_core::api::limits::MAX_SPEC_BYTES`): two metrics whose selectors list
/// 64 expressions of 64 values.
fn fat_spec() -> anyhow::Result<HorizontalPodAutoscalerPlus> {
    let expressions: Vec<Value> = (0..64)
        .map(|e| {
            let values: Vec<String> = (0..64).map(|v| format!("{e:02}-{v:0>57}")).collect();
            json!({"key": format!("k{e}"), "operator": "In", "values": values})
        })
        .collect();
    let metrics: Vec<Value> = (0..2)
        .map(|i| {
            json!({"type": "External", "external": {
                "metric": {"name": format!("queue-{i}"),
                    "selector": {"matchExpressions": expressions}},
                "target": {"type": "AverageValue", "averageValue": "10"}}})
        })
        .collect();
    autoscaler("fat-spec", "fat-spec", &Value::Array(metrics))
}

/// The same spec in a native HPA, which no schema bounds.
fn fat_native() -> anyhow::Result<HorizontalPodAutoscaler> {
    let plus = serde_json::to_value(fat_spec()?)?;
    Ok(serde_json::from_value(json!({
        "metadata": {"name": "fat-native"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                    "name": "fat-native"},
                 "minReplicas": 1, "maxReplicas": 3, "metrics": plus["spec"]["metrics"]},
    }))?)
}

/// hpa-plus refuses the fat spec with a condition naming the bound, and caches none of it.
async fn fat_spec_refused(t: &Tenancy) -> anyhow::Result<()> {
    let plus = t.tenant_api::<HorizontalPodAutoscalerPlus>();
    let message = failing_with(&plus, "fat-spec", "InvalidSpec").await?;
    assert!(
        message.contains("bytes of JSON; at most 262144 are served"),
        "{message}"
    );
    assert!(
        !message.contains("00000"),
        "a tenant's value in the message: {message}"
    );
    let native = eventually("the fat native HPA is refused", WITHIN, POLL, || async {
        let hpa = t
            .tenant_api::<HorizontalPodAutoscaler>()
            .get("fat-native")
            .await?;
        Ok(hpa
            .status
            .and_then(|s| s.conditions)
            .into_iter()
            .flatten()
            .find(|c| {
                c.type_ == "ScalingActive"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("InvalidSpec")
            })
            .and_then(|c| c.message))
    })
    .await?;
    assert!(
        native.contains("bytes of JSON; at most 262144 are served"),
        "{native}"
    );
    row(
        "an HPA+ of 520 KB, each field within the CRD's bounds (two metrics, 64 expressions of 64 values each), and a native HPA with the same metrics",
        &format!(
            "`ScalingActive=False` `InvalidSpec` on both: `{message}`; only their target, \
             bounds and status are cached"
        ),
    );
    Ok(())
}

/// A Deployment whose selector passes what the scale cache holds
/// (`plimsoll_runtime::watched_scales::SELECTOR_BUDGET`), its pods plainly labelled (the bulk is
/// a `NotIn`), with an HPA+ on it.
async fn fat_selector(t: &Tenancy) -> anyhow::Result<()> {
    let values: Vec<String> = (0..500).map(|i| format!("{i:0>40}")).collect();
    let deployment: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(json!({
        "metadata": {"name": "fat-selector"},
        "spec": {"replicas": 1,
            "selector": {"matchLabels": {"app": "fat-selector"},
                "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": values}]},
            "template": {"metadata": {"labels": {"app": "fat-selector"}},
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m"}}}]}}}
    }))?;
    t.tenant_api::<k8s_openapi::api::apps::v1::Deployment>()
        .create(&PostParams::default(), &deployment)
        .await?;
    let target = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "fat-selector"});
    t.tenant_api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), &on_cpu("fat-selector", &target)?)
        .await?;
    Ok(())
}

/// hpa-plus left the fat selector out of its scale cache (a warning) and read the target's
/// `/scale` instead: the autoscaler scales.
async fn fat_selector_read_from_scale(t: &Tenancy, log: &Path) -> anyhow::Result<()> {
    let plus = t.tenant_api::<HorizontalPodAutoscalerPlus>();
    eventually(
        "the fat selector's autoscaler is able to scale",
        WITHIN,
        POLL,
        || async {
            Ok(condition(&plus, "fat-selector", "AbleToScale")
                .await?
                .filter(|(status, _, _)| status == "True")
                .map(|_| ()))
        },
    )
    .await?;
    let hpa_plus_user = access::user_of("hpa-plus");
    let scale_reads = t
        .env
        .sim()?
        .access_log()
        .iter()
        .filter(|r| {
            r.attributes.user.name == hpa_plus_user
                && r.attributes.verb == "get"
                && r.attributes.name == "fat-selector"
                && r.attributes.combined_resource() == "deployments/scale"
        })
        .count();
    assert!(scale_reads >= 1, "hpa-plus never read the target's /scale");
    let text = std::fs::read_to_string(log).with_context(|| format!("read {}", log.display()))?;
    let warned = text
        .lines()
        .filter(|l| l.contains("too large to cache") && l.contains("\"fat-selector\""))
        .count();
    assert!(warned >= 1, "no warning about the fat selector");
    row(
        "a Deployment whose selector is 21 KB (a `NotIn` of 500 values), with an HPA+ on it",
        &format!(
            "not in the scale cache (which holds 16 KiB a selector; {warned} warning); the \
             autoscaler reads `/scale` instead ({scale_reads} reads) and scales"
        ),
    );
    Ok(())
}

/// Writes outside the tenant's namespace, and of status, are refused by RBAC.
async fn overreach(t: &Tenancy) -> anyhow::Result<()> {
    let outside = status_of(
        Api::<HorizontalPodAutoscalerPlus>::namespaced(t.mallory.clone(), &t.env.namespace)
            .create(
                &PostParams::default(),
                &autoscaler("intruder", "web", &json!([]))?,
            )
            .await,
    )?;
    assert_eq!(outside, 403, "the tenant wrote in another namespace");
    let status_write = status_of(
        t.tenant_api::<HorizontalPodAutoscalerPlus>()
            .patch_status(
                "huge",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"status": {"desiredReplicas": 3}})),
            )
            .await,
    )?;
    assert_eq!(
        status_write, 403,
        "the tenant forged its autoscaler's status"
    );
    row(
        "writes in another namespace, or of status, with `edit`",
        "403 (RBAC); nothing written",
    );
    Ok(())
}

/// The tenant's autoscalers say what went wrong in Plimsoll's words, never the servers'.
async fn classified(t: &Tenancy) -> anyhow::Result<()> {
    let plus = t.tenant_api::<HorizontalPodAutoscalerPlus>();
    let too_large = failing_with(&plus, "huge", "FailedGetPrometheusMetric").await?;
    assert!(too_large.contains("too large"), "{too_large}");
    let not_allowed = failing_with(&plus, "scan", "PrometheusServerNotAllowed").await?;
    for message in [&too_large, &not_allowed] {
        assert!(
            !message.contains(MARKER),
            "a remote body was echoed: {message}"
        );
    }
    let seen = std::sync::Mutex::new(None);
    let refused = eventually(
        "the native HPA is refused its server",
        WITHIN,
        POLL,
        || async {
            let hpa = t
                .tenant_api::<HorizontalPodAutoscaler>()
                .get("scan-native")
                .await?;
            let conditions = hpa.status.and_then(|s| s.conditions).unwrap_or_default();
            let refused = conditions
                .iter()
                .any(|c| c.reason.as_deref() == Some("PrometheusServerNotAllowed"));
            *seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(conditions);
            Ok(refused.then_some(()))
        },
    )
    .await;
    refused.with_context(|| format!("last conditions: {:?}", seen.lock().ok()))
}

/// The garbage history was ignored, and an Event says so.
async fn garbage_reported(t: &Tenancy) -> anyhow::Result<()> {
    eventually("the garbage history is reported", WITHIN, POLL, || async {
        let events =
            Api::<k8s_openapi::api::events::v1::Event>::namespaced(t.env.client.clone(), &t.tenant)
                .list(&kube::api::ListParams::default())
                .await?;
        Ok(events
            .items
            .iter()
            .any(|e| {
                let about_it =
                    e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("garbage");
                let says =
                    |text: Option<&str>| text.is_some_and(|t| t.to_lowercase().contains("ignored"));
                about_it && (says(e.reason.as_deref()) || says(e.note.as_deref()))
            })
            .then_some(()))
    })
    .await
}

/// Nothing outside the tenant's namespace changed because of the tenant: the tenant wrote only
/// there, and hpa-plus only there, in its own Lease, and on the other tenant's own autoscaler.
fn nothing_outside(t: &Tenancy) -> anyhow::Result<()> {
    let hpa_plus_user = access::user_of("hpa-plus");
    for w in t.writes()? {
        if w.user == t.mallory_user {
            assert_eq!(
                w.namespace, t.tenant,
                "the tenant's {} of {}",
                w.verb, w.resource
            );
        } else if w.user == hpa_plus_user {
            let own_lease = w.namespace == SYSTEM_NAMESPACE && w.resource == "leases";
            let victims_own =
                w.namespace == t.env.namespace && (w.name == "web" || w.resource == "events");
            assert!(
                w.namespace == t.tenant || own_lease || victims_own,
                "hpa-plus: {} of {} {}/{}",
                w.verb,
                w.resource,
                w.namespace,
                w.name
            );
        }
    }
    row(
        "anything written outside the tenant's namespace",
        "none: the access log shows the tenant writing only in its namespace, and hpa-plus only \
         there, in its Lease and on the other tenant's own autoscaler",
    );
    Ok(())
}

#[tokio::test]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's --authorize mode and access log"
)]
async fn a_tenant_cannot_steer_crash_or_starve_hpa_plus() -> anyhow::Result<()> {
    let _serial = plimsoll_e2e::serial().await;
    let t = Tenancy::start("tenants-hpa", &[("hpa-plus", &["native-hpa"])]).await?;
    let servers = Servers::start().await?;
    let log = std::env::temp_dir().join(format!("{}-hpa-plus.log", t.tenant));
    let mut hpa_plus = start_hpa_plus(&t, &servers, &log)?;
    let pid = hpa_plus.pid().context("hpa-plus runs")?;
    victim(&t, &servers).await?;
    let attack_start = Instant::now();
    attack(&t, &servers).await?;
    let pools = node_pool(&t).await?;
    outside_targets(&t).await?;
    ghosts(&t).await?;
    unknown_rollout(&t).await?;
    fat_pods(&t).await?;
    fat_selector(&t).await?;
    t.tenant_api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), &fat_spec()?)
        .await?;
    t.tenant_api::<HorizontalPodAutoscaler>()
        .create(&PostParams::default(), &fat_native()?)
        .await?;
    overreach(&t).await?;
    classified(&t).await?;
    outside_refused(&t, &pools).await?;

    // Let the blackhole and the huge answers work on hpa-plus for a while, then measure.
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(hpa_plus.running(), "hpa-plus died under attack");
    let (gap, evaluations) = largest_gap(
        &servers.operators,
        &t.env.namespace,
        attack_start + Duration::from_secs(8),
    );
    let peak = peak_rss_kib(pid)?;
    let huge_asks = servers.huge.asked().len();
    assert_eq!(
        servers.unallowed.connections(),
        0,
        "a request reached a server not allowed"
    );
    assert!(peak <= RSS_BUDGET_KIB, "hpa-plus peaked at {peak} KiB");
    assert!(
        huge_asks >= 1,
        "the huge server was never asked: the test proves nothing"
    );
    let plus = t.tenant_api::<HorizontalPodAutoscalerPlus>();
    let breaker = eventually("the blackhole's breaker opens", WITHIN, POLL, || async {
        Ok(condition(&plus, "hole-0", "ScalingActive")
            .await?
            .filter(|(_, reason, message)| {
                reason == "FailedGetPrometheusMetric" && message.contains("unresponsive")
            })
            .map(|(_, _, message)| message))
    })
    .await?;
    assert!(!breaker.contains(MARKER), "{breaker}");
    let blackhole_connections = servers.blackhole.connections();
    assert!(
        blackhole_connections >= 1,
        "the blackhole was never reached: the test proves nothing"
    );
    // The victim's evaluation is requeued one period after the previous one ends; a gap of two
    // periods plus scheduling slack on a loaded machine means it never waited for a worker.
    assert!(
        gap <= 2 * PERIOD + Duration::from_secs(2),
        "the other tenant's autoscaler waited {gap:?} between evaluations"
    );
    row(
        "Prometheus answer of 300 MB (allowed server)",
        &format!(
            "metric failed `too large` ({huge_asks} queries); hpa-plus peak RSS {} MiB; no body \
             bytes in the message",
            peak / 1024
        ),
    );
    row(
        "12 autoscalers × 6 metrics at a blackhole (allowed server), 8 workers, 2 queries in flight per server",
        &format!(
            "other tenant's autoscaler: largest gap {:.1} s at a {} s period over {evaluations} \
             evaluations; {blackhole_connections} connections to the blackhole (72 metrics) \
             before its breaker opened (`unresponsive; not queried until …`)",
            gap.as_secs_f64(),
            PERIOD.as_secs()
        ),
    );
    row(
        "server not allowed, by `serverAddress` and by `prometheus-server` annotation",
        "`PrometheusServerNotAllowed`; 0 connections",
    );

    garbage_reported(&t).await?;
    assert!(hpa_plus.running(), "hpa-plus died on garbage history");
    row(
        "garbage in decision-memory, predictive-status and tuning-status annotations",
        "stored state ignored with an Event; hpa-plus stays up",
    );
    ghosts_cost_nothing(&t, attack_start.elapsed(), &log).await?;
    unknown_rollout_logged_once(&t, attack_start.elapsed(), &log).await?;
    fat_pods_left_out(&log)?;
    fat_spec_refused(&t).await?;
    fat_selector_read_from_scale(&t, &log).await?;
    nothing_outside(&t)?;
    t.env.cleanup().await;
    Ok(())
}

#[tokio::test]
#[cfg_attr(real_cluster, ignore = "needs the sim's --authorize mode")]
async fn a_tenant_cannot_store_a_vpa_policy_that_breaks_pods() -> anyhow::Result<()> {
    let t = Tenancy::start("tenants-vpa", &[]).await?;
    let vpas = t.tenant_api::<VerticalPodAutoscaler>();
    let vpa = |name: &str, policy: Value| -> anyhow::Result<VerticalPodAutoscaler> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
            "metadata": {"name": name},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "app"},
                "resourcePolicy": {"containerPolicies": [policy]}}
        }))?)
    };
    let cases = [
        (
            "negative",
            json!({"containerName": "*", "maxAllowed": {"cpu": "-1"}}),
        ),
        (
            "inverted",
            json!({"containerName": "*", "minAllowed": {"memory": "10Gi"}, "maxAllowed": {"memory": "1Gi"}}),
        ),
    ];
    for (name, policy) in cases {
        let code = status_of(
            vpas.create(&PostParams::default(), &vpa(name, policy)?)
                .await,
        )?;
        assert_eq!(code, 422, "{name}");
    }
    // The same tenant may store a sane one: the refusals are about the values, not the right.
    let ok =
        json!({"containerName": "*", "minAllowed": {"cpu": "100m"}, "maxAllowed": {"cpu": "2"}});
    assert_eq!(
        status_of(vpas.create(&PostParams::default(), &vpa("sane", ok)?).await)?,
        200
    );
    row(
        "VPA with `maxAllowed: {cpu: \"-1\"}`, or minAllowed above maxAllowed",
        "422 at apply (CRD rules); a sane policy by the same tenant is stored",
    );
    t.env.cleanup().await;
    Ok(())
}

#[tokio::test]
#[cfg_attr(real_cluster, ignore = "needs the sim's webhook routing")]
async fn slow_clients_do_not_hold_the_webhook() -> anyhow::Result<()> {
    let _serial = plimsoll_e2e::serial().await;
    let (env, system) = webhook::sim_env("tenants-webhook").await?;
    let header_timeout = Duration::from_secs(3);
    let hook = webhook::start(
        &env,
        &system,
        &[
            "--self-signed".to_owned(),
            format!("--header-read-timeout={}s", header_timeout.as_secs()),
        ],
    )
    .await?;
    env.api::<VerticalPodAutoscaler>()
        .create(&PostParams::default(), &webhook::vpa("web", "Initial")?)
        .await?;
    webhook::recommend(&env, "web").await?;
    webhook::wait_for_recommendation(&env, "web").await?;

    // 300 stalled connections: half never send a byte, half stop inside the TLS ClientHello.
    let opened = Instant::now();
    let mut stalled = Vec::new();
    for i in 0..300 {
        let mut stream = tokio::net::TcpStream::connect(hook.address).await?;
        if i % 2 == 1 {
            use tokio::io::AsyncWriteExt as _;
            // A TLS record header announcing a 512-byte handshake, and nothing more.
            stream
                .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
                .await?;
        }
        stalled.push(tokio::spawn(async move {
            use tokio::io::AsyncReadExt as _;
            let mut buf = [0u8; 64];
            while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
            opened.elapsed()
        }));
    }

    // Pods created meanwhile go through the webhook at its usual speed and carry the
    // recommendation (a pod the webhook did not answer for would keep its 100m).
    let pods = env.api::<Pod>();
    let mut slowest = Duration::ZERO;
    for _ in 0..3 {
        let began = Instant::now();
        let created = pods
            .create(&PostParams::default(), &webhook::replica_pod("web")?)
            .await?;
        slowest = slowest.max(began.elapsed());
        assert_eq!(
            webhook::request(&created, 0, "cpu").as_deref(),
            Some("250m"),
            "a pod was admitted without the webhook's patch"
        );
    }
    let mut closed_by = Duration::ZERO;
    for s in stalled {
        let lived = tokio::time::timeout(Duration::from_secs(60), s)
            .await
            .context("a stalled connection was never closed")??;
        closed_by = closed_by.max(lived);
    }
    assert!(
        slowest < Duration::from_secs(2),
        "a pod took {slowest:?} through the webhook"
    );
    assert!(
        closed_by >= header_timeout,
        "closed before its clock: {closed_by:?}"
    );
    assert!(
        closed_by <= header_timeout + Duration::from_secs(10),
        "stalled connections lived {closed_by:?}"
    );
    row(
        "300 stalled connections to the webhook (TCP only, and half a ClientHello)",
        &format!(
            "all closed by {:.1} s (header-read timeout {} s); pods created meanwhile patched, in at most {} ms",
            closed_by.as_secs_f64(),
            header_timeout.as_secs(),
            slowest.as_millis()
        ),
    );
    hook.stop().await?;
    webhook::teardown(env, &system).await;
    Ok(())
}
