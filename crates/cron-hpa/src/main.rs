//! `cron-hpa`: scheduled scaling for `CronHorizontalPodAutoscaler` objects.
//!
//! This binary only parses flags and dispatches; the work lives in the library.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;
use plimsoll_cron_hpa::cli::{Args, Command};
use plimsoll_cron_hpa::replay;
use plimsoll_cron_hpa::run;
use plimsoll_replay::Invocation;

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(Command::Replay { scenario, output }) = args.command {
        return replay::run(&Invocation {
            scenario: &scenario,
            output,
            plot: None,
        })
        .into();
    }
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cron-hpa: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: Args) -> anyhow::Result<()> {
    let config = args.into_config();
    let common = config.common.clone();
    plimsoll_runtime::service::block_on(&common, |shutdown| run(config, shutdown))
        .context("cron-hpa failed")
}
