//! The `vpa-updater` binary: parses the command line and runs the service, or `replay`.

use std::process::ExitCode;

use clap::Parser;
use plimsoll_replay::Invocation;
use plimsoll_runtime::service;
use plimsoll_vpa_updater::cli::{Args, Command};
use plimsoll_vpa_updater::replay;

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(Command::Replay(replay_args)) = &args.command {
        return replay::run(&Invocation {
            scenario: &replay_args.scenario,
            output: replay_args.output,
            plot: None,
        })
        .into();
    }
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vpa-updater: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: Args) -> anyhow::Result<()> {
    let config = args.into_config();
    let common = config.common.clone();
    service::block_on(&common, |shutdown| {
        plimsoll_vpa_updater::run(config, shutdown)
    })?;
    Ok(())
}
