//! plimsoll-sim: serve a simulated Kubernetes cluster, or run the demo.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use plimsoll_sim::{Sim, SimConfig, demo, scenario::Scenario};

#[derive(Debug, Parser)]
#[command(
    name = "plimsoll-sim",
    version,
    about = "An in-memory Kubernetes API server with a workload model"
)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the API until interrupted.
    Serve {
        /// HTTPS listen address.
        #[arg(long, env = "PLIMSOLL_SIM_ADDRESS", default_value = "127.0.0.1:0")]
        address: SocketAddr,
        /// Plain HTTP listen address (loopback only, for benchmarks).
        #[arg(long, env = "PLIMSOLL_SIM_HTTP_ADDRESS")]
        http_address: Option<SocketAddr>,
        /// Write a kubeconfig for the server here.
        #[arg(long, env = "PLIMSOLL_SIM_KUBECONFIG_OUT")]
        kubeconfig_out: Option<PathBuf>,
        /// Scenario file (objects and loads) to load at start.
        #[arg(long, env = "PLIMSOLL_SIM_SCENARIO")]
        scenario: Option<PathBuf>,
        /// Sim seconds per real second.
        #[arg(long, env = "PLIMSOLL_SIM_TIME_SCALE")]
        time_scale: Option<f64>,
        /// Authorize every request against the stored RBAC, as kube-apiserver's RBAC
        /// authorizer does (unknown tokens get 401). The written kubeconfig's user is the
        /// cluster admin (`system:masters`); `kubectl create token` issues ServiceAccount tokens.
        #[arg(long, env = "PLIMSOLL_SIM_AUTHORIZE")]
        authorize: bool,
        /// Write a kubeconfig whose user is a ServiceAccount the scenario creates:
        /// `NAMESPACE/NAME=PATH` (repeatable).
        #[arg(long, value_name = "NAMESPACE/NAME=PATH", value_parser = parse_service_account_out)]
        service_account_kubeconfig: Vec<(String, String, PathBuf)>,
    },
    /// Run the demo: a workload following a day curve, every service scaling it, a live table
    /// (or JSON rows), a summary of what each service did and a plot (SVG or PNG).
    Demo {
        /// Real duration of the demo (e.g. 40s, 3m). The simulated day is compressed into it,
        /// with every time-based setting of the sim and the services (default 120s, or one day
        /// at --time-scale).
        #[arg(long, env = "PLIMSOLL_DEMO_DURATION", value_parser = parse_duration)]
        duration: Option<Duration>,
        /// Simulated seconds per real second (default: one day over --duration). With both
        /// flags the run covers duration × time-scale simulated seconds.
        #[arg(long, env = "PLIMSOLL_DEMO_TIME_SCALE")]
        time_scale: Option<f64>,
        /// Where to write the plot: `*.svg` or `*.png`.
        #[arg(long, env = "PLIMSOLL_DEMO_PLOT", default_value = "plimsoll-demo.svg")]
        plot: PathBuf,
        /// `table` for people, `json` for one object per row and a last one with the summary.
        #[arg(long, env = "PLIMSOLL_DEMO_OUTPUT", value_enum, default_value_t = DemoOutput::Table)]
        output: DemoOutput,
        /// After the run, keep the sim and the services up (printing a kubeconfig and kubectl
        /// commands to look around) until Ctrl-C.
        #[arg(long, env = "PLIMSOLL_DEMO_KEEP")]
        keep: bool,
    },
}

/// How the demo prints its rows.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum DemoOutput {
    /// An aligned table.
    Table,
    /// One JSON object per line.
    Json,
}

fn parse_service_account_out(s: &str) -> Result<(String, String, PathBuf), String> {
    let (account, path) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not NAMESPACE/NAME=PATH"))?;
    let (ns, name) = account
        .split_once('/')
        .ok_or_else(|| format!("{account:?} is not NAMESPACE/NAME"))?;
    Ok((ns.to_owned(), name.to_owned(), PathBuf::from(path)))
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|e| format!("invalid duration {s:?}: {e}"))?;
    Ok(Duration::from_secs_f64(v * mult))
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    // The demo prints its own table; the in-process services log only what goes wrong
    // (RUST_LOG overrides either default).
    let default_filter = match args.command {
        Command::Demo { .. } => "warn,plimsoll_vpa_updater::updater=error,kube=error",
        Command::Serve { .. } => "info,kube=warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| default_filter.into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match args.command {
        Command::Serve {
            address,
            http_address,
            kubeconfig_out,
            scenario,
            time_scale,
            authorize,
            service_account_kubeconfig,
        } => {
            let scenario = match scenario {
                Some(path) => {
                    let text = std::fs::read_to_string(&path)
                        .with_context(|| format!("reading {}", path.display()))?;
                    Some(
                        Scenario::parse(&text)
                            .with_context(|| format!("parsing {}", path.display()))?,
                    )
                }
                None => None,
            };
            let scale = time_scale
                .or_else(|| scenario.as_ref().and_then(|s| s.time_scale))
                .unwrap_or(1.0);
            let config = SimConfig {
                https_address: address,
                http_address,
                time_scale: scale,
                scenario,
                authorize,
                ..SimConfig::default()
            };
            let sim = Sim::start(config).await?;
            if let Some(path) = kubeconfig_out {
                std::fs::write(&path, sim.kubeconfig())
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            for (ns, name, path) in service_account_kubeconfig {
                let yaml = sim
                    .service_account_kubeconfig(&ns, &name)
                    .with_context(|| format!("a token for ServiceAccount {ns}/{name}"))?;
                std::fs::write(&path, yaml)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            println!("{}", sim.base_url);
            if let Some(h) = &sim.http_url {
                println!("{h}");
            }
            shutdown_signal().await;
            sim.shutdown().await;
        }
        Command::Demo {
            duration,
            time_scale,
            plot,
            output,
            keep,
        } => {
            let config = demo::DemoConfig {
                timing: demo::Timing::new(duration, time_scale).map_err(anyhow::Error::msg)?,
                plot,
                output: match output {
                    DemoOutput::Table => demo::Output::Table,
                    DemoOutput::Json => demo::Output::Json,
                },
                keep,
                ..demo::DemoConfig::default()
            };
            demo::run(config, plimsoll_sim::services::all()).await?;
        }
    }
    Ok(())
}
