//! `hpa-plus`: parses flags and dispatches; everything else lives in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use plimsoll_hpa_plus::replay::{self, Output};

#[derive(Parser)]
#[command(
    name = "hpa-plus",
    version,
    about = "Plimsoll's enhanced horizontal autoscaler"
)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a `HorizontalReplay` scenario through the decision code, with no cluster.
    Replay {
        /// The scenario file (YAML or JSON).
        scenario: PathBuf,
        /// How to print each step.
        #[arg(long, value_enum, default_value_t = Format::Json, env = "PLIMSOLL_OUTPUT")]
        output: Format,
        /// Write an SVG chart of replicas, metric values and targets to this file.
        #[arg(long, env = "PLIMSOLL_PLOT")]
        plot: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Json,
    Table,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match args.command {
        Command::Replay {
            scenario,
            output,
            plot,
        } => replay::run(
            &scenario,
            match output {
                Format::Json => Output::Json,
                Format::Table => Output::Table,
            },
            plot.as_deref(),
        ),
    }
}
