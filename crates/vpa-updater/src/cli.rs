//! The command line of `vpa-updater`: the common service flags, the updater's own flags (named as
//! upstream's updater names them where the concept is the same) and the `replay` subcommand.
//!
//! Every flag can also be set from `PLIMSOLL_<FLAG>`. [`Args::into_config`] turns the parsed flags
//! into the plain [`Config`] that [`crate::run`] takes.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser, Subcommand};
use plimsoll_core::vertical::scope::NamespaceScope;
use plimsoll_replay::Output;
use plimsoll_runtime::CommonArgs;
use plimsoll_runtime::args::parse_duration;

use crate::Config;

/// Plimsoll vpa-updater: evicts (or resizes in place) pods whose requests drift from their VPA
/// recommendation, as the upstream VPA updater does.
#[derive(Debug, Parser)]
#[command(name = "vpa-updater", version, about)]
#[command(mut_arg("metrics_address", |a| a.default_value("0.0.0.0:8943")))]
pub struct Args {
    /// Flags every Plimsoll service shares.
    #[command(flatten)]
    pub common: CommonArgs,

    /// How often the updater looks at every VPA and its pods. Go duration syntax.
    #[arg(
        long,
        env = "PLIMSOLL_UPDATER_INTERVAL",
        value_name = "DURATION",
        default_value = "1m",
        value_parser = parse_duration
    )]
    pub updater_interval: Duration,

    /// A replica group (pods of one ReplicaSet, StatefulSet, …) with fewer live pods than this is
    /// never disrupted. A VPA's `spec.updatePolicy.minReplicas` wins over the flag.
    #[arg(
        long,
        env = "PLIMSOLL_MIN_REPLICAS",
        value_name = "N",
        default_value_t = 2
    )]
    pub min_replicas: u32,

    /// Fraction of a group's configured replicas that may be evicted or resized in one loop
    /// (rounded down; at least one when every replica is running).
    #[arg(
        long,
        env = "PLIMSOLL_EVICTION_TOLERANCE",
        value_name = "FRACTION",
        default_value_t = 0.5
    )]
    pub eviction_tolerance: f64,

    /// Pods that may be evicted (or resized) per second, across all VPAs. 0 or a negative value
    /// disables the rate limiter.
    #[arg(
        long,
        env = "PLIMSOLL_EVICTION_RATE_LIMIT",
        value_name = "PER_SECOND",
        default_value_t = -1.0,
        allow_negative_numbers = true
    )]
    pub eviction_rate_limit: f64,

    /// Burst of the eviction rate limiter: evictions allowed at once before the rate applies.
    #[arg(
        long,
        env = "PLIMSOLL_EVICTION_RATE_BURST",
        value_name = "N",
        default_value_t = 1
    )]
    pub eviction_rate_burst: u32,

    /// A pod whose requests lie inside the recommended range is updated only when its
    /// resourceDiff (relative distance from the target) reaches this value.
    #[arg(
        long,
        env = "PLIMSOLL_POD_UPDATE_THRESHOLD",
        value_name = "FRACTION",
        default_value_t = 0.1
    )]
    pub pod_update_threshold: f64,

    /// A pod whose requests lie inside the recommended range is updated only once it has lived
    /// this long. Go duration syntax.
    #[arg(
        long,
        env = "PLIMSOLL_IN_RECOMMENDATION_BOUNDS_EVICTION_LIFETIME_THRESHOLD",
        value_name = "DURATION",
        default_value = "12h",
        value_parser = parse_duration
    )]
    pub in_recommendation_bounds_eviction_lifetime_threshold: Duration,

    /// A pod with a container OOM-killed less than this after it started is updated at once
    /// (a VPA's `spec.updatePolicy.evictAfterOOMSeconds` wins). Go duration syntax.
    #[arg(
        long,
        env = "PLIMSOLL_EVICT_AFTER_OOM_THRESHOLD",
        value_name = "DURATION",
        default_value = "10m",
        value_parser = parse_duration
    )]
    pub evict_after_oom_threshold: Duration,

    /// Evict or resize only while the admission webhook's status Lease
    /// (`vpa-admission-controller`) was renewed within the last minute: a pod evicted while the
    /// webhook is down comes back with its old requests.
    #[arg(
        long,
        env = "PLIMSOLL_USE_ADMISSION_CONTROLLER_STATUS",
        action = ArgAction::Set,
        value_name = "BOOL",
        default_value_t = true
    )]
    pub use_admission_controller_status: bool,

    /// Namespace of the admission webhook's status Lease. Defaults to `$NAMESPACE` (what the
    /// upstream updater and admission controller read), else `kube-system`.
    #[arg(
        long,
        env = "PLIMSOLL_ADMISSION_CONTROLLER_STATUS_NAMESPACE",
        value_name = "NAMESPACE"
    )]
    pub admission_controller_status_namespace: Option<String>,

    /// Only look at VPAs (and pods) in this namespace. Empty means all namespaces (but the
    /// ignored ones). The admission webhook takes the same flag; give both the same value.
    #[arg(long, env = "PLIMSOLL_VPA_OBJECT_NAMESPACE", value_name = "NAMESPACE")]
    pub vpa_object_namespace: Option<String>,

    /// Comma-separated namespaces whose VPAs and pods are left alone. Default: kube-system and
    /// this updater's own namespace ($POD_NAMESPACE, else $NAMESPACE), so control-plane and
    /// Plimsoll pods are never evicted. A list replaces that default (include them to keep
    /// them out); an empty value ignores no namespace. The admission webhook takes the same
    /// flag with the same default; give both the same value. Cannot be combined with
    /// --vpa-object-namespace.
    #[arg(
        long,
        env = "PLIMSOLL_IGNORED_VPA_OBJECT_NAMESPACES",
        value_name = "NS,NS",
        value_delimiter = ',',
        conflicts_with = "vpa_object_namespace"
    )]
    pub ignored_vpa_object_namespaces: Option<Vec<String>>,

    /// Run something else than the controller.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one updater loop over a scenario file, with no cluster, and print what it would do.
    Replay(ReplayArgs),
}

/// `vpa-updater replay` arguments.
#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// The scenario file (YAML or JSON).
    pub scenario: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// Upstream's default namespace of the admission status Lease.
pub const DEFAULT_STATUS_NAMESPACE: &str = "kube-system";

/// Parses a command line (the first item is the program name) into a [`Config`]; for tests and
/// for checking the args of `deploy/vpa-updater/deployment.yaml`.
pub fn parse_config<I, T>(args: I) -> Result<Config, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    Args::try_parse_from(args).map(Args::into_config)
}

impl Args {
    /// The service configuration these flags describe (reads `$NAMESPACE` and `$POD_NAMESPACE`
    /// for the defaults).
    pub fn into_config(self) -> Config {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let status_namespace = self
            .admission_controller_status_namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .or_else(|| env("NAMESPACE"))
            .unwrap_or_else(|| DEFAULT_STATUS_NAMESPACE.to_owned());
        let own_namespace = env("POD_NAMESPACE").or_else(|| env("NAMESPACE"));
        Config {
            common: self.common.clone(),
            updater_interval: self.updater_interval,
            min_replicas: self.min_replicas,
            eviction_tolerance: self.eviction_tolerance,
            eviction_rate_limit: self.eviction_rate_limit,
            eviction_rate_burst: self.eviction_rate_burst,
            pod_update_threshold: self.pod_update_threshold,
            pod_lifetime_update_threshold: self
                .in_recommendation_bounds_eviction_lifetime_threshold,
            evict_after_oom_threshold: self.evict_after_oom_threshold,
            use_admission_controller_status: self.use_admission_controller_status,
            admission_controller_status_namespace: status_namespace,
            admission_status_timeout: crate::admission_status::STATUS_TIMEOUT.unsigned_abs(),
            scope: NamespaceScope::from_flags(
                self.vpa_object_namespace.as_deref(),
                self.ignored_vpa_object_namespaces.as_deref(),
                own_namespace.as_deref(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_upstream() {
        let args = Args::parse_from(["vpa-updater"]);
        assert_eq!(args.updater_interval, Duration::from_secs(60));
        assert_eq!(args.min_replicas, 2);
        assert!((args.eviction_tolerance - 0.5).abs() < f64::EPSILON);
        assert!(args.eviction_rate_limit < 0.0);
        assert_eq!(args.eviction_rate_burst, 1);
        assert!((args.pod_update_threshold - 0.1).abs() < f64::EPSILON);
        assert_eq!(
            args.in_recommendation_bounds_eviction_lifetime_threshold,
            Duration::from_secs(12 * 3600)
        );
        assert_eq!(args.evict_after_oom_threshold, Duration::from_secs(600));
        assert!(args.use_admission_controller_status);
        assert_eq!(args.common.metrics_address.port(), 8943);
        assert!(args.command.is_none());
    }

    #[test]
    fn flags_parse_and_namespace_flags_conflict() {
        let args = Args::parse_from([
            "vpa-updater",
            "--updater-interval=30s",
            "--eviction-rate-limit=0.5",
            "--eviction-rate-burst=3",
            "--use-admission-controller-status=false",
            "--admission-controller-status-namespace=vpa",
            "--ignored-vpa-object-namespaces=a,b",
        ]);
        let config = args.into_config();
        assert_eq!(config.updater_interval, Duration::from_secs(30));
        assert!((config.eviction_rate_limit - 0.5).abs() < f64::EPSILON);
        assert_eq!(config.eviction_rate_burst, 3);
        assert!(!config.use_admission_controller_status);
        assert_eq!(config.admission_controller_status_namespace, "vpa");
        assert_eq!(config.scope.ignored(), ["a", "b"]);
        assert!(
            Args::try_parse_from([
                "vpa-updater",
                "--vpa-object-namespace=x",
                "--ignored-vpa-object-namespaces=y"
            ])
            .is_err()
        );
    }

    #[test]
    fn kube_system_is_left_alone_unless_the_flags_say_otherwise() {
        let scope = |flags: &[&str]| {
            let mut args = vec!["vpa-updater"];
            args.extend_from_slice(flags);
            Args::parse_from(args).into_config().scope
        };
        let default = scope(&[]);
        assert!(!default.admits("kube-system"));
        assert!(default.admits("shop"));
        // A list replaces the default; an empty value ignores nothing.
        let listed = scope(&["--ignored-vpa-object-namespaces=team-a"]);
        assert!(listed.admits("kube-system") && !listed.admits("team-a"));
        assert!(scope(&["--ignored-vpa-object-namespaces="]).admits("kube-system"));
        let only = scope(&["--vpa-object-namespace=kube-system"]);
        assert!(only.admits("kube-system") && !only.admits("shop"));
    }

    #[test]
    fn replay_subcommand_still_parses() {
        let args = Args::parse_from(["vpa-updater", "replay", "s.yaml", "--output", "json"]);
        assert!(matches!(args.command, Some(Command::Replay(_))));
    }

    #[test]
    fn deployment_args_parse() {
        let text = include_str!("../../../deploy/vpa-updater/deployment.yaml");
        let d: k8s_openapi::api::apps::v1::Deployment = serde_saphyr::from_str(text).unwrap();
        let container = &d.spec.unwrap().template.spec.unwrap().containers[0];
        let mut args = vec!["vpa-updater".to_owned()];
        args.extend(container.args.clone().unwrap_or_default());
        let config = parse_config(args).unwrap();
        assert_eq!(config.common.metrics_address.port(), 8943);
        assert_eq!(config.min_replicas, 2);
    }
}
