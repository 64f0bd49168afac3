//! `plimsoll-sim demo`: placeholder, replaced below.
use std::path::PathBuf;
use std::time::Duration;

/// Demo settings.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// Real duration.
    pub duration: Duration,
    /// Time scale.
    pub time_scale: f64,
    /// SVG output.
    pub plot: PathBuf,
}

impl Default for DemoConfig {
    fn default() -> Self {
        Self {
            duration: Duration::from_secs(120),
            time_scale: 720.0,
            plot: PathBuf::from("plimsoll-demo.svg"),
        }
    }
}

/// Runs the demo.
pub async fn run(_config: DemoConfig, _services: Vec<()>) -> crate::Result<()> {
    Ok(())
}
