//! `vpa-admission`: parses flags, sets up logging and signals, and runs the library.

use clap::Parser;
use plimsoll_runtime::service;
use plimsoll_vpa_admission::cli::Args;

fn main() -> anyhow::Result<()> {
    let config = Args::parse().into_config();
    let common = config.common.clone();
    service::block_on(&common, |shutdown| {
        plimsoll_vpa_admission::run(config, shutdown)
    })?;
    Ok(())
}
