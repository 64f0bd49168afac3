//! `vpa-recommender`: the Plimsoll VPA recommender. Today it offers `replay`; the controller
//! (`run`) is added by the service work.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use plimsoll_vpa_recommender::{plot, replay};

#[derive(Parser)]
#[command(name = "vpa-recommender", version, about = "Plimsoll VPA recommender")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the recommender over a scenario file with no cluster (see scenarios/FORMAT.md).
    /// Exit 0 when every `expect` held, 1 when one did not, 2 when the file is invalid.
    Replay {
        /// The scenario (YAML or JSON, `kind: VerticalReplay`).
        scenario: PathBuf,
        /// Output format: JSON Lines or a table.
        #[arg(long, value_enum, default_value_t = Output::Json)]
        output: Output,
        /// Also write an SVG of usage distributions and target/bounds over time.
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<PathBuf>,
        /// Write the final state as `VerticalPodAutoscalerCheckpoint` manifests.
        #[arg(long, value_name = "FILE")]
        checkpoint_out: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Json,
    Table,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Replay {
            scenario,
            output,
            plot,
            checkpoint_out,
        } => match replay_command(
            &scenario,
            output,
            plot.as_deref(),
            checkpoint_out.as_deref(),
        ) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(2)
            }
        },
    }
}

fn replay_command(
    scenario: &std::path::Path,
    output: Output,
    plot_file: Option<&std::path::Path>,
    checkpoint_out: Option<&std::path::Path>,
) -> anyhow::Result<ExitCode> {
    if let Some(p) = plot_file
        && p.extension().and_then(|e| e.to_str()) != Some("svg")
    {
        anyhow::bail!("--plot: only .svg files are supported, got {}", p.display());
    }
    let scenario = replay::load(scenario)?;
    let outcome = replay::run(&scenario, plot_file.is_some())?;
    match output {
        Output::Json => {
            for line in &outcome.lines {
                println!("{}", serde_json::to_string(line)?);
            }
        }
        Output::Table => print!("{}", replay::table(&outcome.lines)),
    }
    if let Some(p) = plot_file {
        std::fs::write(p, plot::svg(&outcome.traces))
            .map_err(|e| anyhow::anyhow!("--plot {}: {e}", p.display()))?;
    }
    if let Some(p) = checkpoint_out {
        std::fs::write(p, replay::checkpoints_yaml(&outcome.checkpoints)?)
            .map_err(|e| anyhow::anyhow!("--checkpoint-out {}: {e}", p.display()))?;
    }
    for miss in &outcome.misses {
        eprintln!("{miss}");
    }
    Ok(if outcome.misses.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
