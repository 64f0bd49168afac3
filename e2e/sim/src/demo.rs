//! `plimsoll-sim demo`: the README's main job. Starts a sim, installs the Plimsoll CRDs and a
//! sample Deployment `demo/web` with an HPA+ (CPU at 60 %), a CronHPA that raises the HPA+'s
//! minimum for the day and a VPA for memory (`InPlaceOrRecreate`), drives it with a day-shaped
//! load compressed into the run, runs the services the caller plugs in (`plimsoll-sim demo`
//! plugs in every Plimsoll service, see `services.rs`), prints a row per sample and a summary of
//! what each service did, and writes a plot.
//!
//! The compression is the one idea to keep in mind: the day runs `compression` times faster than
//! the clock, and so must everything a real cluster measures against the day (see [`timing`]).
//!
//! Pieces: [`timing`] (the compression and the settings it scales), [`objects`] (what is
//! installed), [`observe`] (reading a row from the sim), [`report`] (table, JSON, tracking
//! figure, summary) and [`mod@chart`] (the plot).
//!
//! Services plug in as [`Service`] closures receiving a [`DemoContext`] (a kube client for the
//! sim, its kubeconfig, the namespace, the timing and a shutdown token).

pub mod chart;
pub mod objects;
pub mod observe;
pub mod report;
pub mod timing;

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use plimsoll_plot::Format;

use crate::error::{Error, Result};
use crate::{Sim, SimHandle};

pub use chart::chart;
pub use objects::DayLoad;
pub use observe::Sample;
pub use report::{Output, Summary, Tracking};
pub use timing::Timing;

/// Demo settings.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// The day's compression and the run's real length (default: a day in 120 s).
    pub timing: Timing,
    /// Where the plot goes: SVG or PNG by the extension (default `plimsoll-demo.svg`).
    pub plot: PathBuf,
    /// Namespace of the sample workload (default `demo`).
    pub namespace: String,
    /// The load's peak and trough (default 1,800 and 150 units/s; 1 unit = 1 millicore).
    pub load: DayLoad,
    /// Rows over the run (default 60).
    pub rows: u32,
    /// Table or JSON rows (default table).
    pub output: Output,
    /// Print rows and the summary (default true).
    pub print: bool,
    /// After the run, keep the sim and the services up until Ctrl-C (default false).
    pub keep: bool,
}

impl Default for DemoConfig {
    fn default() -> Self {
        Self {
            timing: Timing {
                compression: timing::DAY_SECONDS / timing::DEFAULT_DURATION.as_secs_f64(),
                duration: timing::DEFAULT_DURATION,
            },
            plot: PathBuf::from("plimsoll-demo.svg"),
            namespace: "demo".into(),
            load: DayLoad {
                peak: 1800.0,
                trough: 150.0,
            },
            rows: 60,
            output: Output::Table,
            print: true,
            keep: false,
        }
    }
}

/// Namespace of the services' own objects (vpa-admission's certificate Secret); the demo
/// creates it.
pub const SYSTEM_NAMESPACE: &str = "plimsoll-system";

/// What a plugged-in service gets.
#[derive(Clone)]
pub struct DemoContext {
    /// A client for the sim (HTTPS, token auth).
    pub client: kube::Client,
    /// The sim's kubeconfig (YAML).
    pub kubeconfig: String,
    /// Namespace of the sample workload.
    pub namespace: String,
    /// The day's compression: services take their time-based flags from it.
    pub timing: Timing,
    /// Fires when the demo ends; services should return soon after.
    pub shutdown: CancellationToken,
}

/// A service to run in-process during the demo.
pub type Service = Box<dyn FnOnce(DemoContext) -> BoxFuture<'static, ()> + Send>;

/// What a run produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Every row.
    pub samples: Vec<Sample>,
    /// What each service did.
    pub summary: Summary,
}

/// Prints to stdout, ignoring a closed pipe (`demo | head`).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Runs the demo.
///
/// # Errors
/// A plot file with an unknown extension, a sim that does not start, an object it refuses, or
/// a plot that cannot be written.
pub async fn run(config: DemoConfig, services: Vec<Service>) -> Result<Outcome> {
    // A bad plot name fails now, not after the whole run.
    let plot_format =
        Format::for_plot_file(&config.plot).map_err(|e| Error::Usage(e.to_string()))?;
    let timing = config.timing;
    let sim = Sim::start(timing.sim_config()).await?;
    sim.cluster
        .model
        .set_metrics_window(timing.metrics_window());
    let crds = objects::install_crds(&sim.cluster).await;
    objects::install(
        &sim,
        &config.namespace,
        SYSTEM_NAMESPACE,
        &timing,
        config.load,
    )
    .await?;
    let shutdown = CancellationToken::new();
    let ctx = DemoContext {
        client: sim.kube_client().await?,
        kubeconfig: sim.kubeconfig(),
        namespace: config.namespace.clone(),
        timing,
        shutdown: shutdown.clone(),
    };
    let handles: Vec<_> = services
        .into_iter()
        .map(|s| tokio::spawn(s(ctx.clone())))
        .collect();
    if config.print {
        introduce(&config, &sim, crds, handles.len());
    }
    let samples = sample_until_done(&sim, &config).await;
    let summary = Summary::of(&samples, timing.span_secs());
    std::fs::write(
        &config.plot,
        chart(
            &samples,
            "plimsoll demo: replicas follow the load over a simulated day",
        )
        .render(plot_format),
    )
    .map_err(Error::Io)?;
    if config.print {
        conclude(&config, &summary);
    }
    if config.keep {
        keep_until_interrupted(&sim, &config).await?;
    }
    shutdown.cancel();
    for h in handles {
        let _ = tokio::time::timeout(Duration::from_secs(5), h).await;
    }
    sim.shutdown().await;
    Ok(Outcome { samples, summary })
}

/// The opening lines: where the sim is, what the compression does to every setting, and the
/// table's header. In JSON mode they go to stderr, so stdout holds only JSON.
fn introduce(config: &DemoConfig, sim: &SimHandle, crds: usize, services: usize) {
    let mut lines = vec![format!(
        "plimsoll demo: sim at {} ({crds} CRDs installed, {services} services in-process)",
        sim.base_url
    )];
    lines.extend(config.timing.describe());
    match config.output {
        Output::Table => {
            lines.push(report::header());
            for l in lines {
                say(&l);
            }
        }
        Output::Json => {
            for l in lines {
                eprintln!("{l}");
            }
        }
    }
}

/// The closing lines: the summary, and where the plot went.
fn conclude(config: &DemoConfig, summary: &Summary) {
    match config.output {
        Output::Table => {
            for l in summary.lines() {
                say(&l);
            }
            say(&format!("plot written to {}", config.plot.display()));
        }
        Output::Json => {
            say(&summary.json().to_string());
            eprintln!("plot written to {}", config.plot.display());
        }
    }
}

/// Takes `rows` rows at even real intervals over the run, printing each as it comes.
async fn sample_until_done(sim: &SimHandle, config: &DemoConfig) -> Vec<Sample> {
    let timing = config.timing;
    let rows = config.rows.max(1);
    let every = timing.duration.div_f64(f64::from(rows));
    let started = Instant::now();
    let mut samples: Vec<Sample> = Vec::with_capacity(rows as usize);
    let mut seen = observe::Seen::default();
    for i in 1..=rows {
        // Sleep to each row's own deadline, so slow rows do not stretch the run.
        tokio::time::sleep_until((started + every * i).into()).await;
        let t = timing.simulated_secs(started.elapsed());
        let s = observe::take(&sim.cluster, &config.namespace, t, &mut seen);
        if config.print {
            match config.output {
                Output::Table => say(&report::table_row(&s, samples.last())),
                Output::Json => say(&report::json_row(&s).to_string()),
            }
        }
        samples.push(s);
    }
    samples
}

/// `--keep`: writes the kubeconfig, prints how to look around, and waits for Ctrl-C while the
/// sim and the services keep running (the load goes on into the next day).
async fn keep_until_interrupted(sim: &SimHandle, config: &DemoConfig) -> Result<()> {
    let path =
        std::env::temp_dir().join(format!("plimsoll-demo-{}.kubeconfig", std::process::id()));
    std::fs::write(&path, sim.kubeconfig()).map_err(Error::Io)?;
    let ns = &config.namespace;
    let lines = [
        format!(
            "the sim and the services keep running; kubeconfig: {}",
            path.display()
        ),
        format!("  export KUBECONFIG={}", path.display()),
        "  kubectl get hpaplus -A -w".to_owned(),
        format!("  kubectl describe hpaplus -n {ns} web"),
        // The services write events.k8s.io/v1 Events; the sim serves them as core/v1 ones too.
        format!("  kubectl get events -n {ns}"),
        "press Ctrl-C to stop".to_owned(),
    ];
    for l in &lines {
        match config.output {
            Output::Table => say(l),
            Output::Json => eprintln!("{l}"),
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    let _ = std::fs::remove_file(&path);
    Ok(())
}
