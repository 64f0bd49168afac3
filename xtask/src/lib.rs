//! Generation of the CRD manifests in `deploy/crds/` and `charts/plimsoll/templates/crds/`, and
//! of the chart's README from its values schema ([`chart_readme`]); the predictive-scaling
//! report of docs/hpa-plus.md ([`predictive_report`]).
//!
//! The Rust types in `plimsoll-core` are the only source of truth for the schemas; the YAML files
//! are produced by `cargo run -p xtask -- crds` and a test fails when they are stale, so a type
//! change can never ship with an old CRD.
//!
//! The chart's copies are templates (as KEDA's chart ships its CRDs), so `helm upgrade` upgrades
//! them: each is wrapped in `crds.install` (and, for the upstream VPA CRDs, in "a VPA service is
//! enabled"), carries the chart's labels, and `helm.sh/resource-policy: keep` with `crds.keep`,
//! so that uninstalling leaves the CRDs and with them every object users wrote.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

pub mod chart_readme;
pub mod manifest;
pub mod predictive_report;
pub mod structural;

/// Plain CRD manifests for `kubectl apply` (relative to the repository root).
pub const DEPLOY_CRD_DIR: &str = "deploy/crds";
/// The chart's CRD templates.
pub const CHART_CRD_DIR: &str = "charts/plimsoll/templates/crds";
/// The directories (relative to the repository root) that hold generated CRDs.
pub const CRD_DIRS: [&str; 2] = [DEPLOY_CRD_DIR, CHART_CRD_DIR];
/// Where the chart kept its CRDs before they became templates; Helm would still install (never
/// upgrade) anything left there, so the generator removes it and a test checks it is gone.
pub const OLD_CHART_CRD_DIR: &str = "charts/plimsoll/crds";

/// The group of the upstream VPA CRDs, rendered by the chart only with a VPA service enabled.
const VPA_GROUP: &str = "autoscaling.k8s.io";

const HEADER: &str =
    "Generated from the Rust types in crates/core by `cargo run -p xtask -- crds`. Do not edit.";

/// The repository root, found from this crate's manifest directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Each CRD's file name (`<plural>.<group>.yaml`) and its YAML text (the deploy/ copy).
pub fn render_all() -> anyhow::Result<Vec<(String, String)>> {
    plimsoll_core::api::crds()
        .iter()
        .map(|crd| Ok((file_name(crd), render(crd)?)))
        .collect()
}

/// Every generated CRD file: its directory (one of [`CRD_DIRS`]), file name and text.
pub fn render_files() -> anyhow::Result<Vec<(&'static str, String, String)>> {
    let mut files = Vec::new();
    for crd in plimsoll_core::api::crds() {
        files.push((DEPLOY_CRD_DIR, file_name(&crd), render(&crd)?));
        files.push((CHART_CRD_DIR, file_name(&crd), render_chart(&crd)?));
    }
    Ok(files)
}

/// The file a CRD is written to.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.{}.yaml", crd.spec.names.plural, crd.spec.group)
}

/// The YAML text of one CRD, with a header saying it is generated.
pub fn render(crd: &CustomResourceDefinition) -> anyhow::Result<String> {
    let body = serde_saphyr::to_string(crd)?;
    Ok(format!("# {HEADER}\n{body}"))
}

/// The chart's template of one CRD: the same object, with the chart's labels and the keep
/// policy, rendered only with `crds.install` (and a VPA service, for the VPA group).
pub fn render_chart(crd: &CustomResourceDefinition) -> anyhow::Result<String> {
    let mut bare = crd.clone();
    let metadata = std::mem::take(&mut bare.metadata);
    let body = serde_saphyr::to_string(&bare)?;
    // The text goes through the template engine as is.
    anyhow::ensure!(
        !body.contains("{{"),
        "a schema of {} holds `{{{{`, which the template engine would read",
        crd.spec.names.kind
    );
    let name = metadata
        .name
        .ok_or_else(|| anyhow::anyhow!("a CRD without a name"))?;
    // Values are JSON strings: valid YAML whatever they hold.
    let quoted = |s: &String| serde_json::Value::from(s.as_str()).to_string();
    let mut meta = String::from("metadata:\n  name: ");
    meta.push_str(&name);
    meta.push_str("\n  labels:\n");
    for (k, v) in metadata.labels.iter().flatten() {
        let _ = writeln!(meta, "    {k}: {}", quoted(v));
    }
    meta.push_str("    {{- include \"plimsoll.labels\" (list . \"crds\") | nindent 4 }}\n");
    // crds.keep: `helm uninstall` leaves the CRD, and so every object of its kind. No empty
    // `annotations:` (a null) when the CRD has none of its own and keep is off.
    let own: Vec<(&String, &String)> = metadata.annotations.iter().flatten().collect();
    if own.is_empty() {
        meta.push_str("  {{- if .Values.crds.keep }}\n  annotations:\n");
    } else {
        meta.push_str("  annotations:\n");
        for (k, v) in own {
            let _ = writeln!(meta, "    {k}: {}", quoted(v));
        }
        meta.push_str("    {{- if .Values.crds.keep }}\n");
    }
    meta.push_str("    helm.sh/resource-policy: keep\n  {{- end }}\n");
    // The serializer writes an empty `metadata: {}` first-level key; put the chart's there.
    let body = body.replacen("metadata: {}\n", &meta, 1);
    anyhow::ensure!(
        body.contains("\n  name: "),
        "{name}: no metadata block in {body:.200}"
    );
    let condition = if crd.spec.group == VPA_GROUP {
        "and .Values.crds.install (or .Values.vpaRecommender.enabled .Values.vpaUpdater.enabled .Values.vpaAdmission.enabled)"
    } else {
        ".Values.crds.install"
    };
    Ok(format!(
        "{{{{- /* {HEADER} */}}}}\n{{{{- if {condition} }}}}\n{body}{{{{- end }}}}\n"
    ))
}

/// Writes every CRD into every CRD directory, removing generated files no type produces any
/// more, and the chart's old `crds/` directory.
pub fn write_all(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let rendered = render_files()?;
    let mut written = Vec::new();
    let old = root.join(OLD_CHART_CRD_DIR);
    if old.is_dir() {
        std::fs::remove_dir_all(&old)?;
    }
    for dir in CRD_DIRS {
        let dir_path = root.join(dir);
        std::fs::create_dir_all(&dir_path)?;
        for entry in std::fs::read_dir(&dir_path)? {
            let path = entry?.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let is_yaml = path.extension().is_some_and(|e| e == "yaml");
            if is_yaml && !rendered.iter().any(|(d, n, _)| *d == dir && n == name) {
                std::fs::remove_file(&path)?;
            }
        }
    }
    for (dir, name, text) in &rendered {
        let path = root.join(dir).join(name);
        std::fs::write(&path, text)?;
        written.push(path);
    }
    Ok(written)
}
