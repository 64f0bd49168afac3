//! The `vpa-updater` binary: parses the command line and dispatches.
//!
//! `vpa-updater replay SCENARIO [--output json|table]` runs the updater's decision code over a
//! scenario file with no cluster (see `docs/replay.md`).

mod replay;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Plimsoll vpa-updater: evicts (or resizes in place) pods whose requests drift from their VPA
/// recommendation.
#[derive(Debug, Parser)]
#[command(name = "vpa-updater", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one updater loop over a scenario file, with no cluster, and print what it would do.
    Replay(replay::ReplayArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Replay(args)) => ExitCode::from(replay::run(&args)),
        None => {
            // The controller loop lives in the library and is wired here when it lands.
            eprintln!(
                "vpa-updater: the controller is not part of this build yet; use `vpa-updater replay`"
            );
            ExitCode::from(2)
        }
    }
}
