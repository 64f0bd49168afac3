//! `cron-hpa`: scheduled scaling for `CronHorizontalPodAutoscaler` objects.
//!
//! This binary only parses flags and dispatches; the work lives in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use plimsoll_cron_hpa::replay::{self, OutputFormat};

/// Scheduled scaling that cooperates with hpa-plus.
#[derive(Debug, Parser)]
#[command(name = "cron-hpa", version, about)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a `CronReplay` scenario offline and print the firings in its window.
    ///
    /// Exit status: 0 when every `expect` held, 1 when one did not (each miss on stderr),
    /// 2 when the file is invalid.
    Replay {
        /// The scenario file (YAML or JSON), see scenarios/FORMAT.md.
        scenario: PathBuf,
        /// Output format: one JSON object per firing, or a table.
        #[arg(long, value_enum, default_value_t = OutputFormat::Table, env = "PLIMSOLL_OUTPUT")]
        output: OutputFormat,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    match args.command {
        Command::Replay { scenario, output } => {
            let code = replay::replay_file(
                &scenario,
                output,
                &mut std::io::stdout().lock(),
                &mut std::io::stderr().lock(),
            );
            ExitCode::from(code)
        }
    }
}
