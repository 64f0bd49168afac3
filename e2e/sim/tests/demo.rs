//! `plimsoll-sim demo`, shortened: every service runs in-process, the HPA+ and the CronHPA scale
//! the sample workload, and vpa-admission (self-signed TLS, registered with the sim) gives the
//! pods created after the first recommendation the VPA's memory request.

use std::time::Duration;

use plimsoll_sim::demo::{self, DemoConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_scales_the_workload_and_admission_patches_new_pods() -> anyhow::Result<()> {
    let plot = std::env::temp_dir().join(format!("plimsoll-demo-test-{}.svg", std::process::id()));
    let config = DemoConfig {
        // The recommender (every 10 s) has a recommendation well before the CronHPA raises the
        // minimum at 35 % of the run (21 s), which creates the pods admission patches.
        duration: Duration::from_secs(60),
        plot: plot.clone(),
        print: false,
        ..DemoConfig::default()
    };
    let samples = demo::run(config, plimsoll_sim::services::all()).await?;
    let svg = std::fs::read_to_string(&plot)?;
    let _ = std::fs::remove_file(&plot);
    assert!(svg.contains("<polyline"));

    let last = samples.last().expect("the demo took samples");
    assert!(
        samples.iter().map(|s| s.replicas).max() >= Some(6),
        "the CronHPA raised the workload to 6: {samples:?}"
    );
    // Pods created by the scale-up went through the webhook: memory request as recommended,
    // CPU (the HPA+'s metric) as the template has it.
    assert!(last.patched > 0, "no pod patched by admission: {last:?}");
    assert!(last.patched <= last.pods);
    assert!(
        last.admission.starts_with("memory 128Mi→"),
        "admission changed {:?}",
        last.admission
    );
    assert!(!last.admission.contains("cpu"), "{:?}", last.admission);
    Ok(())
}
