//! A Deployment's args, parsed with the command line of the service it runs (as the binary would
//! parse them at start), for the checks of deploy/ and of the rendered chart.

/// Parses `args` with `service`'s own `clap` command line.
pub fn parse(service: &str, args: &[String]) -> Result<(), String> {
    use clap::Parser;
    let command_line = std::iter::once(service.to_owned()).chain(args.iter().cloned());
    let parsed = match service {
        "hpa-plus" => plimsoll_hpa_plus::cli::Args::try_parse_from(command_line).map(drop),
        "cron-hpa" => plimsoll_cron_hpa::cli::Args::try_parse_from(command_line).map(drop),
        "vpa-recommender" => {
            plimsoll_vpa_recommender::cli::Args::try_parse_from(command_line).map(drop)
        }
        "vpa-updater" => plimsoll_vpa_updater::cli::Args::try_parse_from(command_line).map(drop),
        "vpa-admission" => {
            plimsoll_vpa_admission::cli::Args::try_parse_from(command_line).map(drop)
        }
        other => return Err(format!("unknown service {other}")),
    };
    parsed.map_err(|e| e.to_string())
}
