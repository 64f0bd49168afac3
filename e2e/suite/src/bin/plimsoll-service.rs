//! Runs one Plimsoll controller the way its own binary does — flags parsed by the service's
//! `cli::Args`, the runtime, signals and tracing from `plimsoll_runtime::service::block_on` — so
//! a test can start it as a separate process and stop it with a real SIGTERM:
//!
//! `plimsoll-service <hpa-plus|cron-hpa|vpa-updater|vpa-recommender> FLAGS…`
//!
//! Exits 0 when the service returned `Ok`, 1 with the error on stderr otherwise, 2 on a usage
//! error.

use std::process::ExitCode;

use clap::Parser as _;
use plimsoll_runtime::service::block_on;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(service) = args.first().cloned() else {
        eprintln!("usage: plimsoll-service <service> FLAGS…");
        return ExitCode::from(2);
    };
    match serve(&service, &args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{service}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Parses `args` (the service name first, as `argv[0]`) with the service's own flags and runs it.
fn serve(service: &str, args: &[String]) -> anyhow::Result<()> {
    match service {
        "hpa-plus" => {
            let config = plimsoll_hpa_plus::cli::Args::try_parse_from(args)?.into_config()?;
            let common = config.common.clone();
            block_on(&common, |shutdown| plimsoll_hpa_plus::run(config, shutdown))?;
        }
        "cron-hpa" => {
            let config = plimsoll_cron_hpa::cli::Args::try_parse_from(args)?.into_config();
            let common = config.common.clone();
            block_on(&common, |shutdown| plimsoll_cron_hpa::run(config, shutdown))?;
        }
        "vpa-updater" => {
            let config = plimsoll_vpa_updater::cli::Args::try_parse_from(args)?.into_config();
            let common = config.common.clone();
            block_on(&common, |shutdown| {
                plimsoll_vpa_updater::run(config, shutdown)
            })?;
        }
        "vpa-recommender" => {
            let config = plimsoll_vpa_recommender::cli::Args::try_parse_from(args)?.into_config();
            let common = config.common.clone();
            block_on(&common, |shutdown| {
                plimsoll_vpa_recommender::run(config, shutdown)
            })?;
        }
        other => anyhow::bail!("unknown service {other:?}"),
    }
    Ok(())
}
