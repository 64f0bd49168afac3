//! Proving a component's RBAC on a sim in `--authorize` mode: apply the chart's namespace,
//! ServiceAccounts and RBAC from `deploy/`, give a service the kubeconfig of its own
//! ServiceAccount, and read back from the sim's access log whether that identity was denied
//! anything (the role is not enough) and which of its rules admitted nothing (the role is more
//! than the service needs). A mode's optional RBAC (`deploy/<component>/<mode>/`: hpa-plus's
//! `native-hpa`, vpa-admission's `self-signed`) is applied and judged with the base files when a
//! test names the mode.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use plimsoll_sim::rbac::AccessRecord;
use serde_json::Value;

use crate::Env;

/// The namespace the chart installs every service into (`deploy/namespace.yaml`).
pub const SYSTEM_NAMESPACE: &str = "plimsoll-system";

/// The five components, as named in `deploy/` and in their ServiceAccounts.
pub const COMPONENTS: [&str; 5] = [
    "hpa-plus",
    "cron-hpa",
    "vpa-recommender",
    "vpa-updater",
    "vpa-admission",
];

/// The repository's `deploy/` directory.
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// The manifests that give `component` its identity and permissions in the given modes (each a
/// directory under `deploy/<component>/` whose every file is added).
pub fn rbac_files(component: &str, modes: &[&str]) -> anyhow::Result<Vec<PathBuf>> {
    let dir = deploy_dir().join(component);
    let mut files: Vec<PathBuf> = [
        "service-account.yaml",
        "cluster-rbac.yaml",
        "leader-election-rbac.yaml",
    ]
    .iter()
    .map(|f| dir.join(f))
    .collect();
    for mode in modes {
        let mode_dir = dir.join(mode);
        let mut extra: Vec<PathBuf> = std::fs::read_dir(&mode_dir)
            .with_context(|| format!("read {}", mode_dir.display()))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            // A mode directory may be a kustomize component: its kustomization is no object.
            .filter(|p| p.file_name().is_some_and(|n| n != "kustomization.yaml"))
            .collect();
        extra.sort();
        files.extend(extra);
    }
    Ok(files)
}

/// Every YAML document of `path`, as JSON.
pub fn documents(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let mut out = Vec::new();
    for doc in text.split("\n---") {
        if doc
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
        {
            continue;
        }
        let v: Value = serde_saphyr::from_str(doc)
            .with_context(|| format!("parse a document of {}", path.display()))?;
        out.push(v);
    }
    Ok(out)
}

fn plural(kind: &str) -> String {
    match kind {
        "ServiceAccount" => "serviceaccounts".into(),
        "Namespace" => "namespaces".into(),
        k => format!("{}s", k.to_lowercase()),
    }
}

/// Applies `obj` server-side, as `kubectl apply --server-side` would.
pub async fn apply(client: &kube::Client, obj: &Value) -> anyhow::Result<()> {
    let text = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let (group, version) = text("/apiVersion")
        .rsplit_once('/')
        .unwrap_or(("", text("/apiVersion")));
    let kind = text("/kind");
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &plural(kind));
    let name = text("/metadata/name");
    let api: Api<DynamicObject> = match obj.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        name,
        &PatchParams::apply("plimsoll-e2e").force(),
        &Patch::Apply(obj),
    )
    .await
    .with_context(|| format!("apply {kind} {name}"))?;
    Ok(())
}

/// Applies `deploy/namespace.yaml` and, for each of `components`, its ServiceAccount and RBAC.
pub async fn install_rbac(client: &kube::Client, components: &[&str]) -> anyhow::Result<()> {
    let with_modes: Vec<(&str, &[&str])> = components.iter().map(|c| (*c, &[][..])).collect();
    install_rbac_with_modes(client, &with_modes).await
}

/// Like [`install_rbac`], each component with the RBAC of its `modes` too.
pub async fn install_rbac_with_modes(
    client: &kube::Client,
    components: &[(&str, &[&str])],
) -> anyhow::Result<()> {
    for doc in documents(&deploy_dir().join("namespace.yaml"))? {
        apply(client, &doc).await?;
    }
    for (component, modes) in components {
        for file in rbac_files(component, modes)? {
            for doc in documents(&file)? {
                apply(client, &doc).await?;
            }
        }
    }
    Ok(())
}

/// The user name of a component's ServiceAccount.
pub fn user_of(component: &str) -> String {
    format!("system:serviceaccount:{SYSTEM_NAMESPACE}:plimsoll-{component}")
}

/// Writes a kubeconfig for `component`'s ServiceAccount next to the test's admin kubeconfig.
pub fn kubeconfig_of(env: &Env, component: &str) -> anyhow::Result<PathBuf> {
    let yaml = env
        .sim()?
        .service_account_kubeconfig(SYSTEM_NAMESPACE, &format!("plimsoll-{component}"))?;
    let path = env
        .kubeconfig
        .with_file_name(format!("kubeconfig-{component}"));
    std::fs::write(&path, yaml)?;
    Ok(path)
}

/// A client acting as `component`'s ServiceAccount.
pub async fn client_of(env: &Env, component: &str) -> anyhow::Result<kube::Client> {
    let path = kubeconfig_of(env, component)?;
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&path)?,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    Ok(kube::Client::try_from(config)?)
}

/// The HTTP status of a request's answer: 200 for a success, the API error's code otherwise
/// (a transport error is an error).
pub fn status_of<T>(result: Result<T, kube::Error>) -> anyhow::Result<u16> {
    match result {
        Ok(_) => Ok(200),
        Err(kube::Error::Api(s)) => Ok(s.code),
        Err(e) => Err(e.into()),
    }
}

/// One rule of a component's roles: `ClusterRole/<name>` or `Role/<ns>/<name>`, its index and
/// the rule itself.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RuleRef {
    /// The role, labelled as the sim's access log labels it.
    pub role: String,
    /// The rule's index in `rules`.
    pub index: usize,
    /// The rule, as JSON text (for messages).
    pub rule: String,
}

/// Every rule of the roles in `component`'s manifests, in `modes`.
pub fn rules_of(component: &str, modes: &[&str]) -> anyhow::Result<Vec<RuleRef>> {
    let mut out = Vec::new();
    for file in rbac_files(component, modes)? {
        for doc in documents(&file)? {
            let name = doc
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let role = match doc.get("kind").and_then(Value::as_str) {
                Some("ClusterRole") => format!("ClusterRole/{name}"),
                Some("Role") => {
                    let ns = doc
                        .pointer("/metadata/namespace")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    format!("Role/{ns}/{name}")
                }
                _ => continue,
            };
            for (index, rule) in doc
                .get("rules")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                out.push(RuleRef {
                    role: role.clone(),
                    index,
                    rule: rule.to_string(),
                });
            }
        }
    }
    Ok(out)
}

/// What the access log says about one identity.
#[derive(Debug, Default)]
pub struct Report {
    /// Allowed requests.
    pub allowed: usize,
    /// Denied requests, described.
    pub denied: Vec<String>,
    /// (role, rule index) pairs that admitted at least one request.
    pub used: BTreeSet<(String, usize)>,
}

fn describe(r: &AccessRecord) -> String {
    let a = &r.attributes;
    if a.resource_request {
        format!(
            "{} {}/{} ns={:?} name={:?}",
            a.verb,
            a.group,
            a.combined_resource(),
            a.namespace,
            a.name
        )
    } else {
        format!("{} {}", a.verb, a.path)
    }
}

/// The access log's verdicts on `user`.
pub fn report(log: &[AccessRecord], user: &str) -> Report {
    let mut out = Report::default();
    for r in log.iter().filter(|r| r.attributes.user.name == user) {
        if r.allowed {
            out.allowed += 1;
            if let Some(a) = &r.admitted_by {
                out.used.insert((a.role.clone(), a.rule));
            }
        } else {
            out.denied.push(describe(r));
        }
    }
    out.denied.sort();
    out.denied.dedup();
    out
}

/// The rules of `component` (in `modes`) that admitted nothing in `report`.
pub fn unused(component: &str, modes: &[&str], report: &Report) -> anyhow::Result<Vec<RuleRef>> {
    Ok(rules_of(component, modes)?
        .into_iter()
        .filter(|r| !report.used.contains(&(r.role.clone(), r.index)))
        .collect())
}

/// The HTTP status of `GET path` on a service's admin listener.
pub async fn admin_status(addr: std::net::SocketAddr, path: &str) -> anyhow::Result<u16> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: test\r\n\r\n").as_bytes())
        .await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    out.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("no HTTP status line")
}
