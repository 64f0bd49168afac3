//! `cargo run -p xtask -- crds`: regenerate the CRD manifests from the Rust types.
//! `cargo run -p xtask -- chart-readme`: regenerate charts/plimsoll/README.md from the chart's
//! values schema.
//! `cargo run -p xtask -- predictive-report [DIR…]`: the predictive-scaling table of
//! docs/hpa-plus.md from the traces' replays (`xtask::predictive_report`).

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
        "predictive-report" => {
            let mut dirs: Vec<std::path::PathBuf> =
                std::env::args().skip(2).map(Into::into).collect();
            if dirs.is_empty() {
                dirs.push(xtask::repo_root().join("scenarios"));
            }
            xtask::predictive_report::run(&dirs)
        }
        _ => bail!(
            "usage: cargo run -p xtask -- crds           (regenerates deploy/crds and charts/plimsoll/templates/crds)\n       \
             cargo run -p xtask -- chart-readme   (regenerates charts/plimsoll/README.md from values.schema.json)\n       \
             cargo run -p xtask -- predictive-report [DIR...]   (docs/hpa-plus.md, \"Predictive scaling\")"
        ),
    }
}
