//! Installing and uninstalling as a user does (issue 29), on a sim that enforces RBAC
//! (`--authorize`), with the real kubectl: `kubectl apply -k deploy/` creates every object of the
//! kustomization and the services run with its RBAC and args; `kubectl delete -k deploy/` leaves
//! only what docs/install.md says it leaves.
//!
//! Also, without a cluster, on `kubectl kustomize` of deploy/ and of each component: no
//! Deployment mounts a Secret that nothing in the build creates (the first-hour failure of
//! issue 29: a webhook pod stuck in ContainerCreating), and no PodDisruptionBudget uses
//! `minAvailable` (a one-replica service would block every drain of its node).
//!
//! The chart's lifecycle as Helm runs it (helm itself cannot be installed here): the chart
//! rendered by the test renderer of `xtask/tests/xtask/helm/mod.rs` (the real templates), for the
//! default values and with every switch on, created in Helm's install order with Helm's
//! ownership annotations and label; upgraded to a changed chart (a printer column added to a CRD,
//! a feature switched off) by patching what changed and deleting what is no longer rendered;
//! uninstalled by deleting every rendered object but those annotated
//! `helm.sh/resource-policy: keep`. What remains must be only those kept CRDs: no webhook
//! configuration, no Secret, no Lease.
//!
//! Skipped, with a printed reason, when kubectl is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // integration tests: fail loudly

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use plimsoll_e2e::access::{self, SYSTEM_NAMESPACE};
use plimsoll_e2e::{Env, eventually, free_address};
use plimsoll_sim::SimConfig;
use serde_json::Value;

/// The renderer of the chart tests, shared rather than copied.
#[path = "../../../../xtask/tests/xtask/helm/mod.rs"]
#[allow(dead_code)]
mod helm;

const WITHIN: Duration = Duration::from_secs(60);
const EVERY: Duration = Duration::from_millis(250);
const WEBHOOK_CONFIG: &str = "plimsoll-vpa-admission";
const WEBHOOK_SECRET: &str = "plimsoll-vpa-admission-tls";
/// The components shipped in deploy/, as deploy/kustomization.yaml names them.
const COMPONENTS: [&str; 3] = [
    "components/cert-manager",
    "components/cert-files",
    "hpa-plus/native-hpa",
];

fn kubectl_available() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs kubectl (against `kubeconfig` when given): whether it succeeded, stdout and stderr.
fn kubectl(kubeconfig: Option<&Path>, args: &[&str]) -> (bool, String) {
    let mut command = Command::new("kubectl");
    if let Some(kc) = kubeconfig {
        command.arg("--kubeconfig").arg(kc);
    }
    let out = command.args(args).output().expect("kubectl runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn ok(kubeconfig: Option<&Path>, args: &[&str]) -> String {
    let (success, text) = kubectl(kubeconfig, args);
    assert!(success, "kubectl {args:?} failed: {text}");
    text
}

/// A copy of deploy/ in a fresh directory, with throwaway PEM files where the cert-files
/// component reads the user's (their content is never parsed by kustomize), and an overlay per
/// component: `<dir>/deploy` and `<dir>/overlay-<i>`.
fn staged_deploy(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("plimsoll-install-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    copy_dir(&access::deploy_dir(), &dir.join("deploy"));
    for file in ["tls.crt", "tls.key", "ca.crt"] {
        std::fs::write(
            dir.join("deploy/components/cert-files").join(file),
            "-----BEGIN PLACEHOLDER-----\n-----END PLACEHOLDER-----\n",
        )
        .unwrap();
    }
    for (i, component) in COMPONENTS.iter().enumerate() {
        let overlay = dir.join(format!("overlay-{i}"));
        std::fs::create_dir_all(&overlay).unwrap();
        std::fs::write(
            overlay.join("kustomization.yaml"),
            format!(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
                 resources: [../deploy]\ncomponents: [../deploy/{component}]\n"
            ),
        )
        .unwrap();
    }
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// The objects `kubectl kustomize dir` builds.
fn build(dir: &Path) -> Vec<Value> {
    // stdout alone: kustomize's warnings on stderr are no YAML.
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let file = dir.join("built.yaml.out");
    std::fs::write(&file, text).unwrap();
    let docs = access::documents(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    docs
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Every Secret a Deployment of `objects` mounts exists in `objects`: created as a Secret, or
/// written by a cert-manager Certificate of the build. And no PDB has `minAvailable`.
fn assert_installable(what: &str, objects: &[Value]) {
    let created: BTreeSet<&str> = objects
        .iter()
        .filter_map(|o| match str_at(o, "/kind") {
            "Secret" => Some(str_at(o, "/metadata/name")),
            "Certificate" => Some(str_at(o, "/spec/secretName")),
            _ => None,
        })
        .collect();
    let mut deployments = 0;
    for d in objects.iter().filter(|o| o["kind"] == "Deployment") {
        deployments += 1;
        let volumes = d
            .pointer("/spec/template/spec/volumes")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for v in volumes {
            if let Some(secret) = v.pointer("/secret/secretName").and_then(Value::as_str) {
                assert!(
                    created.contains(secret),
                    "{what}: {} mounts Secret {secret}, which nothing in the build creates",
                    str_at(d, "/metadata/name")
                );
            }
        }
    }
    assert_eq!(deployments, 5, "{what}: the five services");
    for p in objects
        .iter()
        .filter(|o| o["kind"] == "PodDisruptionBudget")
    {
        assert!(
            p.pointer("/spec/minAvailable").is_none(),
            "{what}: {} has minAvailable",
            str_at(p, "/metadata/name")
        );
        assert_eq!(p.pointer("/spec/maxUnavailable"), Some(&Value::from(1)));
    }
}

#[test]
fn every_mode_of_deploy_mounts_only_secrets_it_creates() {
    if !kubectl_available() {
        println!("skipped: kubectl is not installed (it builds the kustomization)");
        return;
    }
    let dir = staged_deploy("modes");
    let base = build(&dir.join("deploy"));
    assert_installable("deploy/", &base);
    // The default mode ships the webhook's registration and its (empty) Secret: uninstall
    // removes both, and the pod only fills them in.
    let find = |objects: &[Value], kind: &str, name: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .cloned()
    };
    let secret = find(&base, "Secret", WEBHOOK_SECRET).expect("the webhook's Secret is shipped");
    assert!(
        secret["data"]
            .as_object()
            .is_none_or(|d| d.values().all(|v| v == "")),
        "shipped empty: {secret}"
    );
    assert!(find(&base, "MutatingWebhookConfiguration", WEBHOOK_CONFIG).is_some());
    for (i, component) in COMPONENTS.iter().enumerate() {
        let objects = build(&dir.join(format!("overlay-{i}")));
        assert_installable(component, &objects);
        let admission = find(&objects, "Deployment", "plimsoll-vpa-admission").unwrap();
        let args = admission
            .pointer("/spec/template/spec/containers/0/args")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let self_signed = args.iter().any(|a| a == "--self-signed");
        let webhook = find(&objects, "MutatingWebhookConfiguration", WEBHOOK_CONFIG).unwrap();
        match *component {
            "components/cert-manager" => {
                assert!(!self_signed, "{args:?}");
                assert!(
                    find(&objects, "Secret", WEBHOOK_SECRET).is_none(),
                    "cert-manager's"
                );
                assert_eq!(
                    webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
                    "plimsoll-system/plimsoll-vpa-admission"
                );
                assert!(
                    find(
                        &objects,
                        "ClusterRole",
                        "plimsoll-vpa-admission-registration"
                    )
                    .is_none()
                );
            }
            "components/cert-files" => {
                assert!(!self_signed, "{args:?}");
                let secret = find(&objects, "Secret", WEBHOOK_SECRET).unwrap();
                assert!(
                    secret["data"]["tls.crt"]
                        .as_str()
                        .is_some_and(|c| !c.is_empty())
                );
                for w in webhook["webhooks"].as_array().unwrap() {
                    assert!(
                        w["clientConfig"]["caBundle"]
                            .as_str()
                            .is_some_and(|c| !c.is_empty())
                    );
                }
                // The carrier of ca.crt is not applied.
                assert!(find(&objects, "Secret", "plimsoll-vpa-admission-ca-bundle").is_none());
                assert!(find(&objects, "Role", "plimsoll-vpa-admission-certs").is_none());
            }
            _ => {
                assert!(self_signed, "{args:?}");
                let hpa_plus = find(&objects, "Deployment", "plimsoll-hpa-plus").unwrap();
                let args = hpa_plus["spec"]["template"]["spec"]["containers"][0]["args"].clone();
                assert!(
                    args.as_array()
                        .unwrap()
                        .iter()
                        .any(|a| a == "--native-hpa=true"),
                    "{args}"
                );
                assert!(find(&objects, "ClusterRole", "plimsoll-hpa-plus-native-hpa").is_some());
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: --authorize mode and ServiceAccount tokens"
)]
async fn apply_k_installs_everything_and_delete_k_leaves_what_the_docs_say() -> anyhow::Result<()> {
    if !kubectl_available() {
        println!("skipped: kubectl is not installed");
        return Ok(());
    }
    let env = Env::start_with(
        "install",
        SimConfig {
            authorize: true,
            ..SimConfig::default()
        },
    )
    .await?;
    let kc = env.kubeconfig.clone();
    let deploy = access::deploy_dir();
    let deploy = deploy.to_str().unwrap();

    // Install: every object of the build exists afterwards.
    ok(Some(&kc), &["apply", "-k", deploy]);
    let built = build(&access::deploy_dir());
    let listed = ok(Some(&kc), &["get", "-k", deploy, "-o", "name"]);
    assert_eq!(
        listed.lines().filter(|l| !l.trim().is_empty()).count(),
        built.len(),
        "every object of the kustomization: {listed}"
    );

    // The webhook in its default mode, as deployed: its ServiceAccount, its RBAC, its args.
    let (token, task) = start_admission(&env, &built)?;
    {
        let client = env.client.clone();
        eventually(
            "the pod fills caBundle of the shipped configuration",
            WITHIN,
            EVERY,
            || {
                let client = client.clone();
                async move { anyhow::Ok(ca_bundle_filled(client).await) }
            },
        )
        .await?;
        eventually("the pod fills the shipped Secret", WITHIN, EVERY, || {
            let client = client.clone();
            async move { anyhow::Ok(secret_filled(client).await) }
        })
        .await?;
        // An upgrade applies deploy/ again: the certificates the pod wrote stay (a value in
        // the shipped Secret would overwrite them, and the served certificate would no longer
        // match the caBundle until the pod noticed).
        let secrets: Api<Secret> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
        let certificate = |s: Secret| s.data.and_then(|d| d.get("tls.crt").cloned());
        let before = certificate(secrets.get(WEBHOOK_SECRET).await?);
        ok(Some(&kc), &["apply", "-k", deploy]);
        let after = certificate(secrets.get(WEBHOOK_SECRET).await?);
        assert!(before.as_ref().is_some_and(|c| !c.0.is_empty()));
        assert_eq!(
            before, after,
            "kubectl apply -k deploy/ again kept the certificate"
        );
        // Its status Lease names the Deployment as owner (--lease-owner-deployment).
        eventually(
            "the status Lease is owned by the Deployment",
            WITHIN,
            EVERY,
            || {
                let client = client.clone();
                async move { anyhow::Ok(status_lease_owned(client).await) }
            },
        )
        .await?;
        token.cancel();
        task.await;
    }

    // Uninstall keeping the autoscalers: every object but the CRDs carries the label.
    ok(
        Some(&kc),
        &[
            "delete",
            "-k",
            deploy,
            "-l",
            "app.kubernetes.io/name=plimsoll",
            "--wait=false",
        ],
    );
    let crds = ok(Some(&kc), &["get", "crd", "-o", "name"]);
    for crd in built
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
    {
        let name = str_at(crd, "/metadata/name");
        assert!(crds.contains(name), "{name} kept: {crds}");
    }
    // Then everything.
    ok(
        Some(&kc),
        &["delete", "-k", deploy, "--ignore-not-found", "--wait=false"],
    );
    eventually("nothing of deploy/ remains", WITHIN, EVERY, || {
        let kc = kc.clone();
        let built = built.clone();
        async move { anyhow::Ok(leftovers(&kc, &built).is_empty().then_some(())) }
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e}; left: {:?}", leftovers(&kc, &built)))?;
    env.cleanup().await;
    Ok(())
}

async fn ca_bundle_filled(client: kube::Client) -> Option<()> {
    let configs: Api<MutatingWebhookConfiguration> = Api::all(client);
    let hooks = configs.get(WEBHOOK_CONFIG).await.ok()?.webhooks?;
    let filled = |w: &k8s_openapi::api::admissionregistration::v1::MutatingWebhook| {
        w.client_config
            .ca_bundle
            .as_ref()
            .is_some_and(|b| !b.0.is_empty())
    };
    (!hooks.is_empty() && hooks.iter().all(filled)).then_some(())
}

async fn secret_filled(client: kube::Client) -> Option<()> {
    let secrets: Api<Secret> = Api::namespaced(client, SYSTEM_NAMESPACE);
    let data = secrets.get(WEBHOOK_SECRET).await.ok()?.data?;
    data.get("tls.crt")
        .is_some_and(|c| !c.0.is_empty())
        .then_some(())
}

async fn status_lease_owned(client: kube::Client) -> Option<()> {
    let leases: Api<Lease> = Api::namespaced(client, SYSTEM_NAMESPACE);
    let lease = leases.get("vpa-admission-controller").await.ok()?;
    lease
        .metadata
        .owner_references?
        .iter()
        .any(|o| o.kind == "Deployment" && o.name == "plimsoll-vpa-admission")
        .then_some(())
}

/// What of the install is still in the cluster: any object of the build, any Lease of the
/// services (plimsoll-* or the webhook's status Lease) in any namespace.
fn leftovers(kc: &Path, built: &[Value]) -> Vec<String> {
    let mut left = Vec::new();
    for o in built {
        let kind = str_at(o, "/kind");
        let name = str_at(o, "/metadata/name");
        let mut args = vec!["get", kind, name, "--ignore-not-found", "-o", "name"];
        let ns = str_at(o, "/metadata/namespace");
        if !ns.is_empty() {
            args.extend(["-n", ns]);
        }
        let (_, out) = kubectl(Some(kc), &args);
        if !out.trim().is_empty() {
            left.push(out.trim().to_owned());
        }
    }
    let (_, leases) = kubectl(
        Some(kc),
        &[
            "get",
            "leases",
            "-A",
            "-o",
            "custom-columns=NS:.metadata.namespace,NAME:.metadata.name",
            "--no-headers",
        ],
    );
    left.extend(
        leases
            .lines()
            .filter(|l| l.contains("plimsoll-") || l.contains("vpa-admission-controller"))
            .map(|l| format!("lease {}", l.trim())),
    );
    left
}

/// Starts vpa-admission in-process as the Deployment of `built` would: its args (the admin and
/// webhook ports made free ones), as its ServiceAccount. Returns its stop token and task.
fn start_admission(
    env: &Env,
    built: &[Value],
) -> anyhow::Result<(
    tokio_util::sync::CancellationToken,
    impl std::future::Future<Output = ()> + use<>,
)> {
    use clap::Parser as _;
    let d = built
        .iter()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "plimsoll-vpa-admission")
        .expect("the webhook's Deployment");
    let kubeconfig = access::kubeconfig_of(env, "vpa-admission")?;
    let admin = free_address()?;
    let webhook = free_address()?;
    let mut args = vec![
        "vpa-admission".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
    ];
    for a in d["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
    {
        let a = a.as_str().expect("a string");
        args.push(if a.starts_with("--address=") {
            format!("--address={admin}")
        } else if a.starts_with("--port=") {
            format!("--port={}", webhook.port())
        } else {
            a.to_owned()
        });
    }
    // What the pod has from its environment ($NAMESPACE, $POD_NAMESPACE), as flags: a test
    // cannot set a process's environment for one service alone.
    args.push(format!("--status-lease-namespace={SYSTEM_NAMESPACE}"));
    args.push(format!("--webhook-service-namespace={SYSTEM_NAMESPACE}"));
    let config = plimsoll_vpa_admission::cli::Args::try_parse_from(&args)?.into_config();
    let token = tokio_util::sync::CancellationToken::new();
    let run = plimsoll_vpa_admission::run(config, token.clone());
    let task = tokio::spawn(async move {
        if let Err(e) = run.await {
            eprintln!("vpa-admission exited: {e:#}");
        }
    });
    Ok((token, async move {
        let _ = task.await;
    }))
}

/// Helm's install order (`releaseutil.InstallOrder`); kinds not listed come last, uninstall runs
/// it backwards.
const HELM_INSTALL_ORDER: &[&str] = &[
    "PriorityClass",
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

const RELEASE: &str = "plimsoll";
const RELEASE_NAMESPACE: &str = "plimsoll-system";

fn install_rank(kind: &str) -> usize {
    HELM_INSTALL_ORDER
        .iter()
        .position(|k| *k == kind)
        .unwrap_or(HELM_INSTALL_ORDER.len())
}

/// The manifests of the chart rendered with `values`, as Helm sends them: Helm's ownership
/// annotations and label added, in install order.
fn render_chart(values: &Value) -> Vec<Value> {
    let chart_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/plimsoll");
    let chart = helm::Chart::load(&chart_dir);
    let rendered = chart
        .render(values, RELEASE_NAMESPACE)
        .unwrap_or_else(|e| panic!("render {values}: {e}"));
    let mut objects = Vec::new();
    // Manifests only: NOTES.txt is text for the user.
    for file in rendered.iter().filter(|r| r.file != "NOTES.txt") {
        for doc in file.text.split("\n---") {
            if doc
                .lines()
                .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
            {
                continue;
            }
            let mut o = helm::yaml(doc, &file.file);
            if o.is_null() {
                continue;
            }
            let meta = o["metadata"].as_object_mut().expect("metadata");
            let annotations = meta
                .entry("annotations")
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            annotations["meta.helm.sh/release-name"] = RELEASE.into();
            annotations["meta.helm.sh/release-namespace"] = RELEASE_NAMESPACE.into();
            let labels = meta
                .entry("labels")
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            labels["app.kubernetes.io/managed-by"] = "Helm".into();
            objects.push(o);
        }
    }
    objects.sort_by_key(|o| install_rank(str_at(o, "/kind")));
    objects
}

/// kind/namespace/name of an object, to compare renders.
fn key(o: &Value) -> (String, String, String) {
    (
        str_at(o, "/kind").to_owned(),
        str_at(o, "/metadata/namespace").to_owned(),
        str_at(o, "/metadata/name").to_owned(),
    )
}

fn kept(o: &Value) -> bool {
    o.pointer("/metadata/annotations/helm.sh~1resource-policy")
        .and_then(Value::as_str)
        == Some("keep")
}

/// Runs kubectl with `objects` as one YAML stream on stdin (JSON is YAML).
fn kubectl_objects(kc: &Path, args: &[&str], objects: &[Value]) -> String {
    let stream = objects.iter().fold(String::new(), |mut s, o| {
        use std::fmt::Write as _;
        let _ = writeln!(s, "---\n{o}");
        s
    });
    let file = kc.with_file_name(format!("objects-{}.yaml", std::process::id()));
    std::fs::write(&file, stream).unwrap();
    let mut all = args.to_vec();
    // The sim serves no OpenAPI document for client-side validation (the server validates);
    // `delete` validates nothing and has no such flag.
    if args.first() != Some(&"delete") {
        all.push("--validate=false");
    }
    all.extend(["-f", file.to_str().unwrap()]);
    let out = ok(Some(kc), &all);
    std::fs::remove_file(&file).unwrap();
    out
}

/// Stand-ins for the CRDs of the projects the every-switch values use (cert-manager, the
/// Prometheus Operator): an operator enabling those switches has them installed.
fn third_party_crds() -> Vec<Value> {
    [
        ("cert-manager.io", "Certificate", "certificates"),
        ("cert-manager.io", "Issuer", "issuers"),
        ("monitoring.coreos.com", "ServiceMonitor", "servicemonitors"),
        ("monitoring.coreos.com", "PrometheusRule", "prometheusrules"),
    ]
    .iter()
    .map(|(group, kind, plural)| {
        serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {
                "group": group,
                "scope": "Namespaced",
                "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]
            }
        })
    })
    .collect()
}

/// The upgrade's chart: a printer column added to the first CRD the chart renders.
fn with_crd_change(objects: &[Value]) -> Vec<Value> {
    let mut objects = objects.to_vec();
    let crd = objects
        .iter_mut()
        .find(|o| o["kind"] == "CustomResourceDefinition")
        .expect("the chart renders its CRDs as templates (helm upgrade updates them)");
    for version in crd["spec"]["versions"].as_array_mut().expect("versions") {
        let columns = version
            .as_object_mut()
            .expect("a version")
            .entry("additionalPrinterColumns")
            .or_insert_with(|| Value::Array(Vec::new()));
        columns
            .as_array_mut()
            .expect("columns")
            .push(serde_json::json!(
                {"name": "Upgraded", "type": "string", "jsonPath": ".metadata.uid"}
            ));
    }
    objects
}

/// The harness installs Plimsoll's CRDs into every sim; a cluster Helm installs into has none,
/// and Helm creates them (as templates of the release).
fn delete_harness_crds(kc: &Path) {
    let ours: Vec<String> = plimsoll_core::api::crds()
        .into_iter()
        .filter_map(|crd| crd.metadata.name)
        .collect();
    let mut delete = vec!["delete", "crd"];
    delete.extend(ours.iter().map(String::as_str));
    ok(Some(kc), &delete);
}

async fn chart_lifecycle(name: &str, install: &Value, upgrade: &Value) -> anyhow::Result<()> {
    let env = Env::start_with(
        name,
        SimConfig {
            authorize: true,
            ..SimConfig::default()
        },
    )
    .await?;
    let kc = env.kubeconfig.clone();
    for ns in [RELEASE_NAMESPACE, "monitoring"] {
        ok(Some(&kc), &["create", "namespace", ns]);
    }
    kubectl_objects(&kc, &["create"], &third_party_crds());
    delete_harness_crds(&kc);

    // helm install: create in order.
    let first = render_chart(install);
    kubectl_objects(&kc, &["create"], &first);

    // helm upgrade to a changed chart: patch every object still rendered (a server-side apply
    // changes only what changed), delete those no longer rendered.
    let second = with_crd_change(&render_chart(upgrade));
    kubectl_objects(
        &kc,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=helm",
        ],
        &second,
    );
    let still: BTreeSet<_> = second.iter().map(key).collect();
    let mut gone: Vec<Value> = first
        .iter()
        .filter(|o| !still.contains(&key(o)))
        .cloned()
        .collect();
    gone.reverse();
    if !gone.is_empty() {
        kubectl_objects(&kc, &["delete", "--wait=false"], &gone);
    }
    let crd = second
        .iter()
        .find(|o| o["kind"] == "CustomResourceDefinition")
        .expect("a CRD");
    let columns = ok(
        Some(&kc),
        &[
            "get",
            "crd",
            str_at(crd, "/metadata/name"),
            "-o",
            "jsonpath={.spec.versions[*].additionalPrinterColumns[*].name}",
        ],
    );
    assert!(
        columns.contains("Upgraded"),
        "the upgrade updated the CRD: {columns}"
    );

    // helm uninstall: every rendered object but those kept, in reverse install order.
    let mut doomed: Vec<Value> = second.iter().filter(|o| !kept(o)).cloned().collect();
    doomed.reverse();
    kubectl_objects(
        &kc,
        &["delete", "--wait=false", "--ignore-not-found"],
        &doomed,
    );
    let ever: Vec<Value> = first.iter().chain(&second).cloned().collect();
    let want: BTreeSet<String> = second
        .iter()
        .filter(|o| kept(o))
        .map(|o| format!("{}/{}", str_at(o, "/kind"), str_at(o, "/metadata/name")))
        .collect();
    assert!(
        second
            .iter()
            .filter(|o| kept(o))
            .all(|o| o["kind"] == "CustomResourceDefinition"),
        "only CRDs are kept (docs/install.md)"
    );
    eventually("only the kept CRDs remain", WITHIN, EVERY, || {
        let (kc, ever, want) = (kc.clone(), ever.clone(), want.clone());
        async move {
            let left: BTreeSet<String> = leftovers(&kc, &ever)
                .iter()
                .map(|l| {
                    // kubectl's `-o name`: <resource>.<group>/<name>; compare kind/name.
                    let (_, name) = l.rsplit_once('/').unwrap_or(("", l));
                    ever.iter()
                        .find(|o| {
                            str_at(o, "/metadata/name") == name
                                && l.contains(&str_at(o, "/kind").to_lowercase())
                        })
                        .map_or_else(|| l.clone(), |o| format!("{}/{name}", str_at(o, "/kind")))
                })
                .collect();
            anyhow::Ok((left == want).then_some(()))
        }
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e}; left: {:?}, want {want:?}", leftovers(&kc, &ever)))?;
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(real_cluster, ignore = "needs the sim: --authorize mode")]
async fn chart_install_upgrade_uninstall_with_the_defaults() -> anyhow::Result<()> {
    if !kubectl_available() {
        println!("skipped: kubectl is not installed");
        return Ok(());
    }
    // Upgrade: cron-hpa switched off (its objects are deleted).
    chart_lifecycle(
        "chart-defaults",
        &serde_json::json!({}),
        &serde_json::json!({"cronHpa": {"enabled": false}}),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(real_cluster, ignore = "needs the sim: --authorize mode")]
async fn chart_install_upgrade_uninstall_with_every_switch() -> anyhow::Result<()> {
    if !kubectl_available() {
        println!("skipped: kubectl is not installed");
        return Ok(());
    }
    let all_on = serde_json::json!({
        "hpaPlus": {"nativeHpa": true},
        "vpa": {"ignoredNamespaces": ["legacy"]},
        "vpaRecommender": {"enabled": true},
        "vpaUpdater": {"enabled": true},
        "prometheus": {"address": "https://prometheus.monitoring:9090",
                       "bearerToken": {"secretName": "prometheus-reader", "secretNamespace": "monitoring"}},
        "vpaAdmission": {"enabled": true, "certManager": {"enabled": true}},
        // networkPolicy is left out: the sim serves no networking.k8s.io API.
        "serviceMonitor": {"enabled": true},
        "grafana": {"dashboards": {"enabled": true}},
        "prometheusRule": {"enabled": true},
    });
    // Upgrade: cert-manager and the monitoring objects switched off.
    let mut upgrade = all_on.clone();
    upgrade["vpaAdmission"]["certManager"]["enabled"] = false.into();
    upgrade["serviceMonitor"]["enabled"] = false.into();
    upgrade["prometheusRule"]["enabled"] = false.into();
    chart_lifecycle("chart-all-on", &all_on, &upgrade).await
}
