//! `cargo run -p xtask -- crds`: regenerate the CRD manifests from the Rust types.
//! `cargo run -p xtask -- chart-readme`: regenerate charts/plimsoll/README.md from the chart's
//! values schema.

use anyhow::bail;

fn main() -> anyhow::Result<()> {
    let task = std::env::args().nth(1).unwrap_or_default();
    let root = xtask::repo_root();
    match task.as_str() {
        "crds" => {
            for path in xtask::write_all(&root)? {
                println!("wrote {}", path.display());
            }
            Ok(())
        }
        "chart-readme" => {
            let path = root.join(xtask::chart_readme::README);
            std::fs::write(&path, xtask::chart_readme::render(&root)?)?;
            println!("wrote {}", path.display());
            Ok(())
        }
        _ => bail!(
            "usage: cargo run -p xtask -- crds           (regenerates deploy/crds and charts/plimsoll/templates/crds)\n       \
             cargo run -p xtask -- chart-readme   (regenerates charts/plimsoll/README.md from values.schema.json)"
        ),
    }
}
