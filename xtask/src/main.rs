//! `cargo run -p xtask -- crds`: regenerate the CRD manifests from the Rust types.

use anyhow::bail;

fn main() -> anyhow::Result<()> {
    let task = std::env::args().nth(1).unwrap_or_default();
    match task.as_str() {
        "crds" => {
            for path in xtask::write_all(&xtask::repo_root())? {
                println!("wrote {}", path.display());
            }
            Ok(())
        }
        _ => bail!(
            "usage: cargo run -p xtask -- crds   (regenerates deploy/crds and charts/plimsoll/crds)"
        ),
    }
}
