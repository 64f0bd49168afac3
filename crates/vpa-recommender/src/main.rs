//! `vpa-recommender`: the Plimsoll VPA recommender (`run` by default, or `replay`).

use std::process::ExitCode;

use clap::Parser;
use plimsoll_replay::Invocation;
use plimsoll_vpa_recommender::cli::{Args, Command};
use plimsoll_vpa_recommender::replay;

fn main() -> ExitCode {
    let args = Args::parse();
    match &args.command {
        Some(Command::Replay {
            scenario,
            output,
            plot,
            checkpoint_out,
        }) => replay::run(
            &Invocation {
                scenario,
                output: *output,
                plot: plot.as_deref(),
            },
            checkpoint_out.as_deref(),
        )
        .into(),
        None => match serve(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}

fn serve(args: Args) -> anyhow::Result<()> {
    let config = args.into_config();
    let common = config.common.clone();
    plimsoll_runtime::service::block_on(&common, |shutdown| {
        plimsoll_vpa_recommender::run(config, shutdown)
    })?;
    Ok(())
}
