//! The `cron-hpa` command line: every flag, its environment variable and its default.
//!
//! A library module (not in `main.rs`) so that workspace tests can check that the arguments in
//! `deploy/cron-hpa/deployment.yaml` parse, and `plimsoll-sim demo` starts the service with the
//! same flags a Deployment passes.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use plimsoll_replay::Output;
use plimsoll_runtime::CommonArgs;
use plimsoll_runtime::args::parse_duration;

use crate::Config;

/// Scheduled scaling that cooperates with hpa-plus.
///
/// Without a subcommand, runs the controller: each CronHorizontalPodAutoscaler's jobs run at
/// their scheduled instants (set replicas, or raise an autoscaler's minReplicas).
#[derive(Debug, Parser)]
#[command(
    name = "cron-hpa",
    version,
    about,
    mut_arg("metrics_address", |a| a.default_value("0.0.0.0:8081"))
)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,

    /// After a restart or a leader change, a job whose time passed less than this long ago runs
    /// once at startup; older misses are reported (a Failed condition, a Warning Event and
    /// plimsoll_cron_hpa_job_runs_total{result="missed"}). Go duration syntax: `5m`, `90s`.
    #[arg(
        long,
        env = "PLIMSOLL_MISSED_JOB_GRACE",
        value_name = "DURATION",
        default_value = "5m",
        value_parser = parse_duration
    )]
    pub missed_job_grace: Duration,

    /// The least time between two runs of one CronHorizontalPodAutoscaler's jobs, all jobs
    /// together (each at its shortest interval): a spec whose jobs may run more often is
    /// invalid (status.invalidSpec, a Warning Event) and none of its jobs runs. Each run writes
    /// the object's status and the target's scale; the schedule grammar allows a job every
    /// second. `0s` (the default): no bound. Go duration syntax: `1m`, `30s`.
    #[arg(
        long,
        env = "PLIMSOLL_MIN_JOB_INTERVAL",
        value_name = "DURATION",
        default_value = "0s",
        value_parser = parse_duration
    )]
    pub min_job_interval: Duration,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a `CronReplay` scenario offline and print the firings in its window.
    ///
    /// Exit status: 0 when every `expect` held, 1 when one did not (each miss on stderr),
    /// 2 when the file is invalid.
    Replay {
        /// The scenario file (YAML or JSON), format: docs/replay.md.
        scenario: PathBuf,
        /// Output format: one JSON object per firing, or a table.
        #[arg(long, value_enum, default_value_t = Output::Table, env = "PLIMSOLL_OUTPUT")]
        output: Output,
    },
}

impl Args {
    /// The service configuration these flags describe.
    pub fn into_config(self) -> Config {
        Config {
            common: self.common,
            missed_job_grace: self.missed_job_grace,
            min_job_interval: self.min_job_interval,
            identity: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn flags_have_env_vars_and_defaults() {
        let args = Args::try_parse_from(["cron-hpa"]).unwrap();
        assert_eq!(args.missed_job_grace, Duration::from_secs(300));
        assert_eq!(args.min_job_interval, Duration::ZERO);
        assert_eq!(args.common.metrics_address, "0.0.0.0:8081".parse().unwrap());
        let cmd = Args::command();
        for arg in cmd.get_arguments() {
            if ["help", "version"].contains(&arg.get_id().as_str()) {
                continue;
            }
            let env = arg.get_env().unwrap().to_string_lossy().to_string();
            assert_eq!(
                env,
                format!("PLIMSOLL_{}", arg.get_id().as_str().to_uppercase())
            );
        }
    }

    #[test]
    fn grace_parses_go_durations_and_replay_still_parses() {
        let args = Args::try_parse_from(["cron-hpa", "--missed-job-grace", "90s"]).unwrap();
        assert_eq!(args.missed_job_grace, Duration::from_secs(90));
        assert!(Args::try_parse_from(["cron-hpa", "--missed-job-grace", "5"]).is_err());
        let args =
            Args::try_parse_from(["cron-hpa", "replay", "x.yaml", "--output", "json"]).unwrap();
        assert!(matches!(args.command, Some(Command::Replay { .. })));
    }
}
