//! Every manifest in `deploy/` is a valid typed Kubernetes object, and the objects agree with each
//! other: service accounts exist, selectors select the pods, ports and webhook paths line up.
//!
//! The files are those `deploy/kustomization.yaml` lists (what `kubectl apply -k deploy/`
//! creates) and the resources of its components; every YAML file under deploy/ is one of them or a
//! kustomization. `e2e/suite/tests/e2e/install.rs` builds the same with kubectl and applies it.

// A test binary: a failed check panics with the reason, including in its helper functions.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use crate::{hardening, service_args};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding, Subject};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::de::DeserializeOwned;
use serde_json::Value;

#[derive(Default)]
struct Manifests {
    namespaces: Vec<Namespace>,
    service_accounts: Vec<ServiceAccount>,
    deployments: Vec<Deployment>,
    services: Vec<Service>,
    pdbs: Vec<PodDisruptionBudget>,
    roles: Vec<Role>,
    role_bindings: Vec<RoleBinding>,
    cluster_roles: Vec<ClusterRole>,
    cluster_role_bindings: Vec<ClusterRoleBinding>,
    webhooks: Vec<MutatingWebhookConfiguration>,
    secrets: Vec<Secret>,
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read deploy dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml") {
            out.push(path);
        }
    }
}

fn deploy_dir() -> PathBuf {
    xtask::repo_root().join("deploy")
}

/// The `resources` (files or directories, relative to it) and `components` of a kustomization.
fn kustomization(dir: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let path = dir.join("kustomization.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let docs = xtask::manifest::documents(&text).expect("kustomization YAML");
    let list = |key: &str| -> Vec<PathBuf> {
        docs[0][key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| dir.join(v.as_str().expect("a path")))
            .collect()
    };
    (list("resources"), list("components"))
}

/// The component directories shipped in deploy/ (each with `kind: Component`).
fn component_dirs() -> Vec<PathBuf> {
    let mut files = Vec::new();
    yaml_files(&deploy_dir(), &mut files);
    files
        .into_iter()
        .filter(|f| f.file_name().is_some_and(|n| n == "kustomization.yaml"))
        .filter(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains("\nkind: Component\n")))
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .collect()
}

/// The files `kubectl apply -k deploy/` creates objects from, and those the components add.
fn resource_files() -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (base, _) = kustomization(&deploy_dir());
    let added = component_dirs()
        .iter()
        .flat_map(|d| kustomization(d).0)
        .collect();
    (base, added)
}

fn typed<T: DeserializeOwned + serde::Serialize>(doc: &Value, origin: &str) -> T {
    xtask::manifest::typed(doc).unwrap_or_else(|e| panic!("{origin}: {e}"))
}

/// The objects of `kubectl apply -k deploy/` (CRDs left out: generated, checked by crds.rs) and
/// the Kubernetes objects its components add (cert-manager's kinds left out).
fn load() -> Manifests {
    let (base, added) = resource_files();
    assert!(!base.is_empty(), "no manifests found");
    let mut m = Manifests::default();
    for file in base.into_iter().chain(added) {
        assert!(
            file.is_file(),
            "{}: list files, not directories",
            file.display()
        );
        if file.parent().is_some_and(|d| d.ends_with("crds")) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read manifest");
        let docs = xtask::manifest::documents(&text)
            .unwrap_or_else(|e| panic!("{}: invalid YAML: {e}", file.display()));
        for (i, doc) in docs.into_iter().enumerate() {
            let origin = format!("{} document {}", file.display(), i + 1);
            match doc["kind"].as_str().unwrap_or_default() {
                "Namespace" => m.namespaces.push(typed(&doc, &origin)),
                "ServiceAccount" => m.service_accounts.push(typed(&doc, &origin)),
                "Deployment" => m.deployments.push(typed(&doc, &origin)),
                "Service" => m.services.push(typed(&doc, &origin)),
                "PodDisruptionBudget" => m.pdbs.push(typed(&doc, &origin)),
                "Role" => m.roles.push(typed(&doc, &origin)),
                "RoleBinding" => m.role_bindings.push(typed(&doc, &origin)),
                "ClusterRole" => m.cluster_roles.push(typed(&doc, &origin)),
                "ClusterRoleBinding" => m.cluster_role_bindings.push(typed(&doc, &origin)),
                "MutatingWebhookConfiguration" => m.webhooks.push(typed(&doc, &origin)),
                "Secret" => m.secrets.push(typed(&doc, &origin)),
                "Certificate" | "Issuer"
                    if doc["apiVersion"]
                        .as_str()
                        .is_some_and(|v| v.starts_with("cert-manager.io/")) => {}
                other => panic!("{origin}: unexpected kind {other:?}"),
            }
        }
    }
    m
}

#[test]
fn every_file_in_deploy_is_applied_by_the_kustomization_or_a_component() {
    let (base, added) = resource_files();
    let mut files = Vec::new();
    yaml_files(&deploy_dir(), &mut files);
    for file in files {
        let listed = base.contains(&file) || added.contains(&file);
        let kustomization = file.file_name().is_some_and(|n| n == "kustomization.yaml");
        assert!(
            listed || kustomization,
            "{} is in no kustomization: `kubectl apply -k deploy/` would not apply it",
            file.display()
        );
    }
    // Every component is named in deploy/kustomization.yaml's comment, where users enable it.
    let top = std::fs::read_to_string(deploy_dir().join("kustomization.yaml")).expect("read");
    let components = component_dirs();
    assert_eq!(components.len(), 3, "{components:?}");
    for dir in components {
        let rel = dir.strip_prefix(deploy_dir()).expect("under deploy/");
        assert!(
            top.contains(&format!("#   - {}\n", rel.display())),
            "{} not offered in deploy/kustomization.yaml",
            rel.display()
        );
    }
}

#[test]
fn no_pdb_blocks_a_drain_and_no_pod_waits_for_a_secret_nobody_creates() {
    let m = load();
    for p in &m.pdbs {
        let spec = p.spec.as_ref().expect("PDB spec");
        assert!(
            spec.min_available.is_none(),
            "{:?}: minAvailable",
            p.metadata.name
        );
        assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
    }
    // The base alone: in its mode no Deployment mounts a Secret (the webhook reads its own
    // through the API), and the Secret it fills is shipped.
    let (base, _) = resource_files();
    let base_text: String = base
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("read"))
        .collect();
    for d in &m.deployments {
        let volumes = d
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|p| p.volumes.clone())
            .unwrap_or_default();
        for v in volumes {
            if let Some(secret) = v.secret {
                let name = secret.secret_name.unwrap_or_default();
                assert!(
                    base_text.contains(&format!("kind: Secret\nmetadata:\n  name: {name}\n")),
                    "{:?} mounts Secret {name}, which deploy/ does not create",
                    d.metadata.name
                );
            }
        }
    }
    let secret = m
        .secrets
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some("plimsoll-vpa-admission-tls"))
        .expect("the webhook's Secret is shipped");
    assert!(
        secret.data.iter().flatten().all(|(_, v)| v.0.is_empty()),
        "shipped empty: the pods fill it"
    );
}

fn name_ns(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

fn matches(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn pod_labels(d: &Deployment) -> BTreeMap<String, String> {
    d.spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default()
}

const SERVICES: [&str; 5] = [
    "hpa-plus",
    "cron-hpa",
    "vpa-recommender",
    "vpa-updater",
    "vpa-admission",
];

#[test]
fn every_service_has_its_objects() {
    let m = load();
    assert_eq!(m.namespaces.len(), 1);
    for svc in SERVICES {
        let name = format!("plimsoll-{svc}");
        let d = m
            .deployments
            .iter()
            .find(|d| d.metadata.name.as_deref() == Some(name.as_str()))
            .unwrap_or_else(|| panic!("no Deployment {name}"));
        let spec = d.spec.as_ref().expect("deployment spec");
        assert_eq!(spec.replicas, Some(2), "{name}: two replicas");
        assert!(matches(
            spec.selector.match_labels.as_ref().expect("matchLabels"),
            &pod_labels(d)
        ));
        for kind in ["PodDisruptionBudget", "ClusterRole", "Service"] {
            let found = match kind {
                "PodDisruptionBudget" => m
                    .pdbs
                    .iter()
                    .any(|p| p.metadata.name.as_deref() == Some(name.as_str())),
                "ClusterRole" => m
                    .cluster_roles
                    .iter()
                    .any(|r| r.metadata.name.as_deref() == Some(name.as_str())),
                _ => m.services.iter().any(|s| {
                    s.spec
                        .as_ref()
                        .and_then(|s| s.selector.as_ref())
                        .is_some_and(|sel| matches(sel, &pod_labels(d)))
                }),
            };
            assert!(found, "{name}: no {kind}");
        }
    }
}

#[test]
fn pods_run_restricted_with_probes_on_named_ports() {
    for d in load().deployments {
        let name = d.metadata.name.clone().unwrap_or_default();
        hardening::assert_hardened(&d);
        let pod = d.spec.and_then(|s| s.template.spec).expect("pod spec");
        for c in pod.containers {
            let ports: Vec<String> = c
                .ports
                .iter()
                .flatten()
                .filter_map(|p| p.name.clone())
                .collect();
            for probe in [&c.liveness_probe, &c.readiness_probe] {
                let port = probe
                    .as_ref()
                    .and_then(|p| p.http_get.as_ref())
                    .map_or_else(
                        || panic!("{name}: liveness and readiness probes over HTTP"),
                        |h| h.port.clone(),
                    );
                match port {
                    IntOrString::String(p) => assert!(ports.contains(&p), "{name}: probe port {p}"),
                    IntOrString::Int(p) => {
                        panic!("{name}: probe on numeric port {p}; use a named port")
                    }
                }
            }
            let paths: Vec<_> = [&c.liveness_probe, &c.readiness_probe]
                .iter()
                .filter_map(|p| p.as_ref()?.http_get.as_ref()?.path.clone())
                .collect();
            assert_eq!(paths, ["/healthz", "/readyz"], "{name}");
        }
    }
}

#[test]
fn every_service_keeps_a_replica_through_disruptions_on_different_nodes() {
    let m = load();
    for svc in SERVICES {
        let name = format!("plimsoll-{svc}");
        let is_named = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            meta.name.as_deref() == Some(name.as_str())
        };
        let d = m.deployments.iter().find(|d| is_named(&d.metadata));
        let pdb = m.pdbs.iter().find(|p| is_named(&p.metadata));
        hardening::assert_highly_available(d.expect("Deployment"), pdb.expect("PDB"));
    }
}

#[test]
fn bindings_name_existing_roles_and_service_accounts() {
    let m = load();
    let accounts: Vec<(String, String)> = m
        .service_accounts
        .iter()
        .map(|s| name_ns(&s.metadata))
        .collect();
    let check_subjects = |subjects: &Option<Vec<Subject>>, origin: &str| {
        for s in subjects.iter().flatten() {
            assert_eq!(s.kind, "ServiceAccount", "{origin}");
            let key = (s.namespace.clone().unwrap_or_default(), s.name.clone());
            assert!(
                accounts.contains(&key),
                "{origin}: no ServiceAccount {key:?}"
            );
        }
    };
    for b in &m.cluster_role_bindings {
        let origin = format!("ClusterRoleBinding {:?}", b.metadata.name);
        assert!(
            m.cluster_roles
                .iter()
                .any(|r| r.metadata.name.as_deref() == Some(b.role_ref.name.as_str())),
            "{origin}: no ClusterRole {}",
            b.role_ref.name
        );
        check_subjects(&b.subjects, &origin);
    }
    for b in &m.role_bindings {
        let origin = format!("RoleBinding {:?}", b.metadata.name);
        assert!(
            m.roles.iter().any(
                |r| r.metadata.name.as_deref() == Some(b.role_ref.name.as_str())
                    && r.metadata.namespace == b.metadata.namespace
            ),
            "{origin}: no Role {} in its namespace",
            b.role_ref.name
        );
        check_subjects(&b.subjects, &origin);
    }
    for d in &m.deployments {
        let (ns, _) = name_ns(&d.metadata);
        let sa = d
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|p| p.service_account_name.clone());
        let sa = sa.expect("serviceAccountName");
        assert!(
            accounts.contains(&(ns, sa.clone())),
            "no ServiceAccount {sa}"
        );
    }
}

#[test]
fn webhook_points_at_the_admission_service_and_port() {
    let m = load();
    let hook = m.webhooks.first().expect("a MutatingWebhookConfiguration");
    for w in hook.webhooks.iter().flatten() {
        assert_eq!(w.failure_policy.as_deref(), Some("Ignore"));
        assert_eq!(w.side_effects, "None");
        assert_eq!(w.admission_review_versions, ["v1"]);
        assert_eq!(w.timeout_seconds, Some(5), "a short timeout");
        let svc_ref = w.client_config.service.as_ref().expect("service reference");
        assert_eq!(svc_ref.path.as_deref(), Some("/"), "upstream serves on /");
        let svc = m
            .services
            .iter()
            .find(|s| {
                s.metadata.name.as_deref() == Some(svc_ref.name.as_str())
                    && s.metadata.namespace.as_deref() == Some(svc_ref.namespace.as_str())
            })
            .expect("the webhook's Service");
        let port = svc
            .spec
            .as_ref()
            .and_then(|s| s.ports.as_ref())
            .and_then(|p| p.iter().find(|p| Some(p.port) == svc_ref.port))
            .expect("the webhook's Service port");
        let target = port.target_port.clone().expect("targetPort");
        let d = m
            .deployments
            .iter()
            .find(|d| d.metadata.name.as_deref() == Some("plimsoll-vpa-admission"))
            .expect("admission deployment");
        let container = &d
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("pod")
            .containers[0];
        let named = container
            .ports
            .iter()
            .flatten()
            .find(|p| IntOrString::String(p.name.clone().unwrap_or_default()) == target);
        let named = named.expect("targetPort names a container port");
        let args = container.args.clone().unwrap_or_default();
        assert!(
            args.contains(&format!("--port={}", named.container_port)),
            "the webhook listens on the port the Service targets: {args:?}"
        );
        // The default mode: the pods fill caBundle, so the shipped registration has none.
        assert!(w.client_config.ca_bundle.is_none());
        let excluded = w
            .namespace_selector
            .as_ref()
            .and_then(|s| s.match_expressions.as_ref())
            .map(|e| {
                e.iter()
                    .flat_map(|e| e.values.clone().unwrap_or_default())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        assert!(
            excluded.contains(&"kube-system".to_owned())
                && excluded.contains(&"plimsoll-system".to_owned())
        );
    }
}

/// The lines under `rules:` up to the end of that document.
fn rules_block(text: &str) -> Vec<&str> {
    text.lines()
        .skip_while(|l| l.trim_end() != "rules:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect()
}

#[test]
fn chart_cluster_roles_match_deploy() {
    let root = xtask::repo_root();
    for svc in SERVICES {
        let deploy = std::fs::read_to_string(root.join(format!("deploy/{svc}/cluster-rbac.yaml")))
            .expect("deploy rbac");
        let chart = std::fs::read_to_string(
            root.join(format!("charts/plimsoll/templates/clusterrole-{svc}.yaml")),
        )
        .expect("chart cluster role");
        let want = rules_block(&deploy);
        assert!(want.len() > 3, "{svc}: rules found in deploy/");
        assert_eq!(
            rules_block(&chart),
            want,
            "{svc}: chart ClusterRole differs from deploy/"
        );
    }
}

#[test]
fn deployment_args_parse_with_each_services_command_line() {
    let m = load();
    for svc in SERVICES {
        let name = format!("plimsoll-{svc}");
        let d = m
            .deployments
            .iter()
            .find(|d| d.metadata.name.as_deref() == Some(name.as_str()))
            .unwrap_or_else(|| panic!("no Deployment {name}"));
        let container = &d
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("pod")
            .containers[0];
        let args = container.args.clone().unwrap_or_default();
        assert!(!args.is_empty(), "{name}: no args");
        if let Err(e) = service_args::parse(svc, &args) {
            panic!("{name}: {args:?} do not parse: {e}");
        }
    }
    // And the check can fail: a misspelt flag is refused.
    assert!(
        service_args::parse("hpa-plus", &["--metrics-adress=0.0.0.0:8080".to_owned()]).is_err()
    );
}
