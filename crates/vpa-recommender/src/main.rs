//! `vpa-recommender`: the Plimsoll VPA recommender (`run` by default, or `replay`).

use std::process::ExitCode;

use clap::Parser;
use plimsoll_runtime::plot::{Format, UnknownFormat};
use plimsoll_vpa_recommender::cli::{Args, Command, Output};
use plimsoll_vpa_recommender::{plot, replay};

fn main() -> ExitCode {
    let args = Args::parse();
    match &args.command {
        Some(Command::Replay {
            scenario,
            output,
            plot,
            checkpoint_out,
        }) => match replay_command(
            scenario,
            *output,
            plot.as_deref(),
            checkpoint_out.as_deref(),
        ) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(2)
            }
        },
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

fn replay_command(
    scenario: &std::path::Path,
    output: Output,
    plot_file: Option<&std::path::Path>,
    checkpoint_out: Option<&std::path::Path>,
) -> anyhow::Result<ExitCode> {
    // Checked before the replay so a typo in the name costs nothing.
    let plot_file = plot_file
        .map(|p| Ok::<_, UnknownFormat>((p, Format::for_plot_file(p)?)))
        .transpose()?;
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
    if let Some((p, format)) = plot_file {
        std::fs::write(p, plot::chart(&outcome.traces).render(format))
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
