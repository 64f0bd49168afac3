//! Generation of the CRD manifests in `deploy/crds/` and `charts/plimsoll/crds/`.
//!
//! The Rust types in `plimsoll-core` are the only source of truth for the schemas; the YAML files
//! are produced by `cargo run -p xtask -- crds` and a test fails when they are stale, so a type
//! change can never ship with an old CRD.

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

pub mod manifest;
pub mod structural;

/// The directories (relative to the repository root) that hold generated CRDs.
pub const CRD_DIRS: [&str; 2] = ["deploy/crds", "charts/plimsoll/crds"];

/// The repository root, found from this crate's manifest directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Each CRD's file name (`<plural>.<group>.yaml`) and its YAML text.
pub fn render_all() -> anyhow::Result<Vec<(String, String)>> {
    plimsoll_core::api::crds()
        .iter()
        .map(|crd| Ok((file_name(crd), render(crd)?)))
        .collect()
}

/// The file a CRD is written to.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.{}.yaml", crd.spec.names.plural, crd.spec.group)
}

/// The YAML text of one CRD, with a header saying it is generated.
pub fn render(crd: &CustomResourceDefinition) -> anyhow::Result<String> {
    let body = serde_saphyr::to_string(crd)?;
    Ok(format!(
        "# Generated from the Rust types in crates/core by `cargo run -p xtask -- crds`. Do not edit.\n{body}"
    ))
}

/// Writes every CRD into every CRD directory, removing generated files no type produces any more.
pub fn write_all(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let rendered = render_all()?;
    let mut written = Vec::new();
    for dir in CRD_DIRS {
        let dir = root.join(dir);
        std::fs::create_dir_all(&dir)?;
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let is_yaml = path.extension().is_some_and(|e| e == "yaml");
            if is_yaml && !rendered.iter().any(|(n, _)| n == name) {
                std::fs::remove_file(&path)?;
            }
        }
        for (name, text) in &rendered {
            let path = dir.join(name);
            std::fs::write(&path, text)?;
            written.push(path);
        }
    }
    Ok(written)
}
