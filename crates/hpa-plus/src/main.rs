//! `hpa-plus`: parses flags, then runs the controller or the `replay` subcommand.

use std::process::ExitCode;

use clap::Parser;
use plimsoll_hpa_plus::cli::{Args, Command};
use plimsoll_hpa_plus::plot::PlotWindow;
use plimsoll_hpa_plus::replay_kinds;
use plimsoll_replay::Invocation;

// glibc's allocator spent almost half of a busy controller's CPU merging and splitting freed
// chunks; mimalloc's per-thread pages do not (docs/benchmarks.md, "hpa-plus").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let mut args = Args::parse();
    if let Some(Command::Replay {
        scenario,
        output,
        plot,
        from,
        to,
        set,
    }) = args.command.take()
    {
        return replay_kinds::run(
            &Invocation {
                scenario: &scenario,
                output,
                plot: plot.as_deref(),
            },
            &set,
            PlotWindow { from, to },
        )
        .into();
    }
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "hpa-plus failed");
            eprintln!("hpa-plus: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: Args) -> anyhow::Result<()> {
    let config = args.into_config()?;
    let common = config.common.clone();
    plimsoll_runtime::service::block_on(&common, |shutdown| {
        plimsoll_hpa_plus::run(config, shutdown)
    })?;
    Ok(())
}
