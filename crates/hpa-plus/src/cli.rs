//! Command-line flags of `hpa-plus` (a library module so that a workspace test can check that
//! the args in `deploy/hpa-plus/deployment.yaml` parse).
//!
//! Flag names follow kube-controller-manager where the concept is the same; the upstream
//! spellings (`--horizontal-pod-autoscaler-tolerance`, …) are accepted as aliases so a command
//! line can be carried over unchanged. Every flag can also be set from `PLIMSOLL_<FLAG>`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser, Subcommand};
use plimsoll_core::horizontal::ControllerConfig;
use plimsoll_replay::Output;
use plimsoll_runtime::CommonArgs;
use plimsoll_runtime::args::parse_duration;
use plimsoll_runtime::prometheus::PrometheusArgs;
use plimsoll_runtime::selector::Selector;

use crate::Config;
use crate::error::{Error, Result};

/// `hpa-plus`: Plimsoll's enhanced horizontal autoscaler.
#[derive(Debug, Parser)]
#[command(
    name = "hpa-plus",
    version,
    about = "Plimsoll's enhanced horizontal autoscaler"
)]
// Independent on/off flags of the command line, each its own `--flag[=BOOL]`: not a state.
#[allow(clippy::struct_excessive_bools)]
pub struct Args {
    /// Flags every Plimsoll service shares.
    #[command(flatten)]
    pub common: CommonArgs,

    /// Autoscalers reconciled at the same time (one task per object; an object is never
    /// reconciled by two tasks at once).
    #[arg(long, env = "PLIMSOLL_WORKERS", default_value_t = 64, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub workers: u16,

    /// Re-evaluation period of autoscalers without spec.syncPeriodSeconds (or the resync-period
    /// annotation).
    #[arg(long, env = "PLIMSOLL_SYNC_PERIOD", default_value = "5s", value_name = "DURATION",
          value_parser = parse_duration,
          alias = "horizontal-pod-autoscaler-sync-period")]
    pub sync_period: Duration,

    /// Floor of every object's period: a smaller syncPeriodSeconds is raised to this, which
    /// bounds the load one object can put on the metrics APIs.
    #[arg(long, env = "PLIMSOLL_MIN_SYNC_PERIOD", default_value = "1s", value_name = "DURATION",
          value_parser = parse_duration)]
    pub min_sync_period: Duration,

    /// Minimum change of the usage ratio (|ratio - 1|) before the autoscaler acts, for objects
    /// without spec.tolerance or behavior.*.tolerance.
    #[arg(
        long,
        env = "PLIMSOLL_TOLERANCE",
        default_value_t = 0.1,
        value_name = "RATIO",
        alias = "horizontal-pod-autoscaler-tolerance"
    )]
    pub tolerance: f64,

    /// After a pod starts, CPU samples are ignored while it is unready, and samples taken before
    /// it became ready are ignored, during this period.
    #[arg(long, env = "PLIMSOLL_CPU_INITIALIZATION_PERIOD", default_value = "5m",
          value_name = "DURATION", value_parser = parse_duration,
          alias = "horizontal-pod-autoscaler-cpu-initialization-period")]
    pub cpu_initialization_period: Duration,

    /// After a pod starts, readiness flips within this delay are taken as the pod's initial
    /// readiness (an unready pod in this delay is ignored for CPU).
    #[arg(long, env = "PLIMSOLL_INITIAL_READINESS_DELAY", default_value = "30s",
          value_name = "DURATION", value_parser = parse_duration,
          alias = "horizontal-pod-autoscaler-initial-readiness-delay")]
    pub initial_readiness_delay: Duration,

    /// Scale-down stabilization window for objects without behavior.scaleDown: the highest
    /// recommendation of this window is used.
    #[arg(long, env = "PLIMSOLL_DOWNSCALE_STABILIZATION", default_value = "5m",
          value_name = "DURATION", value_parser = parse_duration,
          alias = "horizontal-pod-autoscaler-downscale-stabilization")]
    pub downscale_stabilization: Duration,

    /// Largest scale-up step as a multiple of current replicas (1.0–2.0), for objects without
    /// spec.scaleUpLimitFactor. Unset: upstream's max(2 × current, 4).
    #[arg(long, env = "PLIMSOLL_SCALE_UP_LIMIT_FACTOR", value_name = "FACTOR",
          value_parser = factor_in(1.0, 2.0))]
    pub scale_up_limit_factor: Option<f64>,

    /// Largest scale-down step as a fraction of current replicas removed (0–1.0), for objects
    /// without spec.scaleDownLimitFactor. Unset: no limit beyond behavior.
    #[arg(long, env = "PLIMSOLL_SCALE_DOWN_LIMIT_FACTOR", value_name = "FACTOR",
          value_parser = factor_in(0.0, 1.0))]
    pub scale_down_limit_factor: Option<f64>,

    /// Utilization targets are a percentage of the containers' limits (falling back to requests
    /// where a container has none), for objects without spec.utilizationBase (or the
    /// utilization-base annotation); the object's own setting wins.
    #[arg(long, env = "PLIMSOLL_COMPUTE_RESOURCE_UTILIZATION_RATIO_BY_LIMITS",
          action = ArgAction::Set, default_value_t = false, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true")]
    pub compute_resource_utilization_ratio_by_limits: bool,

    /// Also reconcile plain autoscaling/v2 HorizontalPodAutoscalers, reading the Plimsoll
    /// additions from plimsoll.dev/* (or platform.stke/*) annotations. Turn the
    /// kube-controller-manager HPA controller off first (--controllers=-horizontalpodautoscaling).
    #[arg(long, env = "PLIMSOLL_NATIVE_HPA", action = ArgAction::Set, default_value_t = false,
          value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub native_hpa: bool,

    /// With --native-hpa, take over only the HPAs whose labels match this label selector
    /// (`kubectl -l` syntax; sent to the API server with the watch, so other HPAs are never
    /// read). The default leaves out the HPAs KEDA generates for its ScaledObjects: they carry
    /// the ScaledObject's label `scaledobject.keda.sh/name` and KEDA's
    /// `app.kubernetes.io/managed-by=keda-operator`. An HPA that stops matching is released: no
    /// longer evaluated or written, its status left as last written. The empty string takes
    /// every HPA.
    #[arg(long, env = "PLIMSOLL_NATIVE_HPA_SELECTOR", value_name = "SELECTOR",
          default_value = crate::NATIVE_HPA_SELECTOR_DEFAULT)]
    pub native_hpa_selector: String,

    /// Act on `spec.podSelectionStrategy: OwnerReferences` (KEP-5325; upstream gate
    /// `HPASelectionStrategy`, alpha and off): count only the pods the target controls, directly
    /// or through a ReplicaSet it controls, instead of every pod its selector matches. Turning
    /// it on watches ReplicaSets (list/watch `apps/replicasets`). Off, the field is accepted
    /// and ignored, as upstream with the gate off.
    #[arg(long, env = "PLIMSOLL_POD_SELECTION_STRATEGY", action = ArgAction::Set,
          default_value_t = false, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true")]
    pub pod_selection_strategy: bool,

    /// Never tune minReplicas (spec.minReplicasTuning or its annotation) of an autoscaler whose
    /// labels, or whose workload's pods' labels, match this label selector: workloads that
    /// must keep a floor whatever their load (a ZooKeeper or etcd quorum, say). Example:
    /// `plimsoll.dev/keep-min-replicas=true,tier in (quorum)`.
    #[arg(
        long,
        env = "PLIMSOLL_MIN_REPLICAS_TUNING_EXCLUDE",
        value_name = "SELECTOR"
    )]
    pub min_replicas_tuning_exclude: Option<String>,

    /// Split the autoscalers into this many shards, each on its own Lease
    /// (`plimsoll-hpa-plus-shard-<i>`): every replica evaluates the autoscalers of the shards it
    /// holds, and shards move when replicas join or leave. 1 runs a single leader on the
    /// `plimsoll-hpa-plus` Lease. Ignored with --leader-elect=false.
    #[arg(long, env = "PLIMSOLL_SHARDS", default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub shards: u32,

    /// The Prometheus server of `type: Prometheus` metrics (and native `prometheus-query`
    /// External metrics) without their own serverAddress: address, TLS, credentials, timeout;
    /// the other servers an autoscaler may name, and the size cap of an answer.
    #[command(flatten)]
    pub prometheus: PrometheusArgs,

    /// The time all Prometheus queries of one evaluation of one autoscaler may take together,
    /// retries included (its metrics, read at most 4 at a time, and on first sight
    /// minReplicasTuning's and spec.predictive's history). Default: the autoscaler's own sync
    /// period, at most 60s, so a server that never answers holds a worker for at most one period
    /// and delays only the autoscalers that name it. Each query also ends within --prometheus-timeout.
    #[arg(long, env = "PLIMSOLL_PROMETHEUS_OBJECT_BUDGET", value_name = "DURATION",
          value_parser = parse_duration)]
    pub prometheus_object_budget: Option<Duration>,

    /// The most Prometheus queries in flight at once to one server other than
    /// --prometheus-address (one --prometheus-allowed-servers entry: the addresses under it
    /// share it). One more waits up to 1 s for a slot while the server answers, and fails as
    /// busy once a query to it timed out, so that a server that stops answering holds about
    /// this many workers (--workers) until its circuit breaker opens, and autoscalers that
    /// never name it keep theirs. Keep it times the number of allowed servers that could fail
    /// together well below --workers; raise it for a team server that answers slowly but
    /// surely.
    #[arg(long, env = "PLIMSOLL_PROMETHEUS_SERVER_CONCURRENCY", value_name = "N",
          default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    pub prometheus_server_concurrency: u16,

    /// Add NAME=<the autoscaler's namespace> to the URL of every Prometheus query hpa-plus
    /// makes for an autoscaler (its metrics, and the history tuning and prediction read), for
    /// a tenancy proxy in front of the servers that confines a query to one namespace's series
    /// (prom-label-proxy with -label namespace, a Thanos or OpenShift tenancy port). Without
    /// one, a query an autoscaler's author writes reads any series the server holds, with
    /// --prometheus-address's credentials, and its value shows in the autoscaler's status.
    /// Unset: no parameter.
    #[arg(long, env = "PLIMSOLL_PROMETHEUS_NAMESPACE_PARAMETER", value_name = "NAME",
          value_parser = parse_parameter_name)]
    pub prometheus_namespace_parameter: Option<String>,

    /// Record every evaluation of the selected autoscalers (what was observed: metric values,
    /// the target's pods with readiness, requests and usage, replicas, time; and the decision)
    /// to `DIR/<namespace>/<name>.jsonl`, for `hpa-plus replay FILE` to reproduce offline
    /// (docs/replay.md, "Record on a cluster, replay offline"). A recording holds the metric
    /// values and pod names of the namespace: give DIR the access the namespaces' data needs.
    /// A write failure is logged and counted, never fails the evaluation.
    #[arg(long, env = "PLIMSOLL_RECORD_DIR", value_name = "DIR")]
    pub record_dir: Option<PathBuf>,

    /// With --record-dir, a recording file is rotated (FILE -> FILE.1 -> FILE.2 …) before it
    /// grows past this many bytes.
    #[arg(long, env = "PLIMSOLL_RECORD_MAX_BYTES", value_name = "BYTES",
          default_value_t = plimsoll_core::horizontal::recording::DEFAULT_MAX_BYTES,
          value_parser = clap::value_parser!(u64).range(4096..))]
    pub record_max_bytes: u64,

    /// With --record-dir, the files kept per autoscaler, the current one included: at most
    /// --record-max-bytes times this much disk per recorded autoscaler.
    #[arg(long, env = "PLIMSOLL_RECORD_FILES", value_name = "N",
          default_value_t = plimsoll_core::horizontal::recording::DEFAULT_FILES,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub record_files: u32,

    /// With --record-dir, record only the autoscalers whose labels match this label selector
    /// (`kubectl -l` syntax). Default: every autoscaler.
    #[arg(long, env = "PLIMSOLL_RECORD_SELECTOR", value_name = "SELECTOR")]
    pub record_selector: Option<String>,

    /// With --record-dir, record only those (selected) autoscalers whose owners opted in with the
    /// annotation plimsoll.dev/record: "true". Without this flag the annotation is ignored and
    /// only the operator's --record-selector decides.
    #[arg(long, env = "PLIMSOLL_RECORD_ANNOTATION_ALLOWED", action = ArgAction::Set,
          default_value_t = false, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true")]
    pub record_annotation_allowed: bool,

    /// An offline subcommand; without one, hpa-plus runs the controller.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Offline subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a `HorizontalReplay` or `LoadReplay` scenario, or a recording (--record-dir),
    /// through the decision code, with no cluster.
    Replay {
        /// The scenario file (YAML or JSON), or a recording: given FILE, its rotated FILE.N …
        /// FILE.1 are read first; given FILE.N, just it. A recording replays every evaluation
        /// and exits 1 when a decision differs from the recorded one.
        scenario: PathBuf,
        /// How to print each step.
        #[arg(long, value_enum, default_value_t = Output::Json, env = "PLIMSOLL_OUTPUT")]
        output: Output,
        /// Write a chart of replicas, metric values and targets to this file: SVG or PNG, by
        /// its extension (`.svg`, `.png`).
        #[arg(long, env = "PLIMSOLL_PLOT", value_name = "FILE.svg|FILE.png")]
        plot: Option<PathBuf>,
        /// With --plot, draw a LoadReplay only from this time on (a zoom; the output is the
        /// whole replay either way): seconds since the replay's start (`3600`), or days,
        /// hours, minutes and seconds in that order (`6d`, `6d12h`, `36h`, `90m`). Default:
        /// the start. Past the replay's end, or not before --to, is an error.
        #[arg(long, env = "PLIMSOLL_PLOT_FROM", value_name = "TIME", requires = "plot",
              value_parser = crate::plot::parse_time)]
        from: Option<f64>,
        /// With --plot, draw a LoadReplay only up to this time, written as for --from
        /// (`--from 8d --to 9d` draws the day the axis labels `day 8`, days counting from 0).
        /// Default: the replay's end; past it is an error.
        #[arg(long, env = "PLIMSOLL_PLOT_TO", value_name = "TIME", requires = "plot",
              value_parser = crate::plot::parse_time)]
        to: Option<f64>,
        /// Change a field of the autoscaler before replaying (repeatable), e.g.
        /// `spec.behavior.scaleDown.stabilizationWindowSeconds=60`: a dotted path (an array
        /// index as `metrics.0` or `metrics[0]`, a dot inside a key as `\.`), and a YAML value.
        /// The changed spec must validate. The output is the changed replay; a summary on
        /// stderr says how many decisions changed, the first that did and the replica-seconds
        /// before and after; differences are not failures (exit 0).
        #[arg(long = "set", env = "PLIMSOLL_SET", value_name = "PATH=VALUE")]
        set: Vec<String>,
    },
}

fn factor_in(lo: f64, hi: f64) -> impl Fn(&str) -> std::result::Result<f64, String> + Clone {
    move |s: &str| {
        let v: f64 = s
            .parse()
            .map_err(|e| format!("{s:?} is not a number: {e}"))?;
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(format!("{v} is outside {lo}–{hi}"))
        }
    }
}

/// A URL query parameter's name: letters, digits, `_`, `-`, `.`, so it needs no escaping.
fn parse_parameter_name(s: &str) -> std::result::Result<String, String> {
    let fits = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if s.is_empty() || s.len() > 63 || !s.chars().all(fits) {
        return Err("a parameter name: 1 to 63 letters, digits, '_', '-' or '.'".to_owned());
    }
    Ok(s.to_owned())
}

fn whole_seconds(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

impl Args {
    /// The service configuration these flags describe.
    pub fn into_config(self) -> Result<Config> {
        if !(0.0..1.0).contains(&self.tolerance) {
            return Err(Error::Config(format!(
                "--tolerance {} must be in [0, 1)",
                self.tolerance
            )));
        }
        if self.min_sync_period.is_zero() {
            return Err(Error::Config("--min-sync-period must be positive".into()));
        }
        let decision = ControllerConfig {
            tolerance: self.tolerance,
            cpu_initialization_period_seconds: whole_seconds(self.cpu_initialization_period),
            initial_readiness_delay_seconds: whole_seconds(self.initial_readiness_delay),
            downscale_stabilization_seconds: whole_seconds(self.downscale_stabilization),
            scale_up_limit_factor: self.scale_up_limit_factor,
            scale_down_limit_factor: self.scale_down_limit_factor,
            sync_period_seconds: whole_seconds(self.sync_period).max(1),
            min_sync_period_seconds: whole_seconds(self.min_sync_period).max(1),
            compute_resource_utilization_ratio_by_limits: self
                .compute_resource_utilization_ratio_by_limits,
        };
        let tuning_exclude = self
            .min_replicas_tuning_exclude
            .as_deref()
            .filter(|s| !s.trim().is_empty())
            .map(crate::tuning::Exclusion::parse)
            .transpose()?;
        let native_hpa_selector = Selector::parse(&self.native_hpa_selector).map_err(|e| {
            Error::Config(format!(
                "--native-hpa-selector {:?}: {e}",
                self.native_hpa_selector
            ))
        })?;
        let record = self
            .record_dir
            .map(|dir| {
                let selector = self.record_selector.as_deref().unwrap_or_default();
                Selector::parse(selector)
                    .map_err(|e| Error::Config(format!("--record-selector {selector:?}: {e}")))
                    .map(|selector| crate::record::RecordSettings {
                        dir,
                        max_bytes: self.record_max_bytes,
                        files: self.record_files,
                        selector,
                        annotation_allowed: self.record_annotation_allowed,
                    })
            })
            .transpose()?;
        Ok(Config {
            record,
            common: self.common,
            workers: self.workers,
            native_hpa: self.native_hpa,
            native_hpa_selector,
            decision,
            identity: None,
            prometheus: crate::prometheus::PrometheusSettings {
                server: self.prometheus.config(),
                others: self.prometheus.anonymous(),
                allowed: self.prometheus.allowed_servers(),
                object_budget: self.prometheus_object_budget.filter(|b| !b.is_zero()),
                server_concurrency: usize::from(self.prometheus_server_concurrency),
                breaker: plimsoll_runtime::prometheus::BreakerPolicy::default(),
                namespace_parameter: self.prometheus_namespace_parameter.clone(),
            },
            tuning_exclude,
            shards: self.shards,
            pod_selection_strategy: self.pod_selection_strategy,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn parse(args: &[&str]) -> std::result::Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("hpa-plus").chain(args.iter().copied()))
    }

    #[test]
    fn the_namespace_parameter_is_a_plain_name() {
        let config = |args: &[&str]| parse(args).map(|a| a.into_config().map(|c| c.prometheus));
        let unset = config(&[]).unwrap().unwrap();
        assert_eq!(unset.namespace_parameter, None);
        let set = config(&["--prometheus-namespace-parameter=namespace"])
            .unwrap()
            .unwrap();
        assert_eq!(set.namespace_parameter.as_deref(), Some("namespace"));
        // Anything that would need escaping in a URL, or add a parameter of its own, is refused.
        for bad in ["", "a&b", "ns=x", "a b", "tenant#"] {
            let arg = format!("--prometheus-namespace-parameter={bad}");
            assert!(config(&[arg.as_str()]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn recording_is_off_by_default_and_takes_its_flags() {
        assert!(parse(&[]).unwrap().into_config().unwrap().record.is_none());
        let config = parse(&[
            "--record-dir=/var/plimsoll",
            "--record-max-bytes=65536",
            "--record-files=2",
            "--record-selector=team=web",
            "--record-annotation-allowed",
        ])
        .unwrap()
        .into_config()
        .unwrap();
        let record = config.record.unwrap();
        assert_eq!(record.max_bytes, 65536);
        assert_eq!(record.files, 2);
        assert!(record.annotation_allowed);
        assert!(!record.selector.is_empty());
        assert!(
            parse(&["--record-dir=/x", "--record-selector=a in"])
                .unwrap()
                .into_config()
                .is_err()
        );
        let replay = parse(&[
            "replay",
            "f.jsonl",
            "--set",
            "spec.maxReplicas=3",
            "--set=a=b",
        ]);
        assert!(
            matches!(replay.unwrap().command, Some(Command::Replay { set, .. }) if set.len() == 2)
        );
    }

    #[test]
    fn defaults_match_upstream() {
        let config = parse(&[]).unwrap().into_config().unwrap();
        assert_eq!(config.workers, 64);
        assert!(!config.native_hpa);
        assert_eq!(config.decision, ControllerConfig::default());
    }

    #[test]
    fn upstream_flag_names_are_aliases() {
        let config = parse(&[
            "--horizontal-pod-autoscaler-tolerance=0.2",
            "--horizontal-pod-autoscaler-sync-period=30s",
            "--horizontal-pod-autoscaler-downscale-stabilization=1m",
            "--horizontal-pod-autoscaler-cpu-initialization-period=2m",
            "--horizontal-pod-autoscaler-initial-readiness-delay=10s",
        ])
        .unwrap()
        .into_config()
        .unwrap();
        assert!((config.decision.tolerance - 0.2).abs() < 1e-12);
        assert_eq!(config.decision.sync_period_seconds, 30);
        assert_eq!(config.decision.downscale_stabilization_seconds, 60);
        assert_eq!(config.decision.cpu_initialization_period_seconds, 120);
        assert_eq!(config.decision.initial_readiness_delay_seconds, 10);
    }

    #[test]
    fn limit_factors_are_range_checked() {
        assert!(parse(&["--scale-up-limit-factor=2.5"]).is_err());
        assert!(parse(&["--scale-up-limit-factor=0.9"]).is_err());
        assert!(parse(&["--scale-down-limit-factor=1.1"]).is_err());
        let config = parse(&[
            "--scale-up-limit-factor=1.5",
            "--scale-down-limit-factor=0.3",
        ])
        .unwrap()
        .into_config()
        .unwrap();
        assert_eq!(config.decision.scale_up_limit_factor, Some(1.5));
        assert_eq!(config.decision.scale_down_limit_factor, Some(0.3));
    }

    #[test]
    fn pod_selection_strategy_is_off_unless_asked_for() {
        let on = |args: &[&str]| {
            parse(args)
                .unwrap()
                .into_config()
                .unwrap()
                .pod_selection_strategy
        };
        assert!(!on(&[]), "off by default, as upstream's alpha gate");
        assert!(on(&["--pod-selection-strategy"]));
        assert!(!on(&["--pod-selection-strategy=false"]));
    }

    #[test]
    fn native_hpa_is_a_switch_or_a_bool() {
        assert!(parse(&["--native-hpa"]).unwrap().native_hpa);
        assert!(!parse(&["--native-hpa=false"]).unwrap().native_hpa);
        assert!(parse(&["--workers=0"]).is_err());
    }

    /// The labels KEDA puts on the HPA of ScaledObject `orders` (kedacore/keda
    /// `controllers/keda/hpa.go` newHPAForScaledObject), then the ScaledObject's own labels
    /// copied over them.
    fn keda_hpa_labels(scaled_object_labels: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut labels: BTreeMap<String, String> = [
            ("app.kubernetes.io/name", "keda-hpa-orders"),
            ("app.kubernetes.io/version", "2.17.0"),
            ("app.kubernetes.io/part-of", "orders"),
            ("app.kubernetes.io/managed-by", "keda-operator"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        for (k, v) in scaled_object_labels {
            labels.insert((*k).to_owned(), (*v).to_owned());
        }
        labels
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_default_native_selector_leaves_out_kedas_hpas() {
        let selector = parse(&[])
            .unwrap()
            .into_config()
            .unwrap()
            .native_hpa_selector;
        let so = ("scaledobject.keda.sh/name", "orders");
        // (labels, selected): KEDA's HPAs in every shape, plain HPAs, one carrying Helm's labels.
        let cases = [
            (keda_hpa_labels(&[so]), false),
            // A ScaledObject installed by Helm overwrites KEDA's managed-by.
            (
                keda_hpa_labels(&[so, ("app.kubernetes.io/managed-by", "Helm")]),
                false,
            ),
            // Old KEDA (no label copy), or the label excluded by hpa-excluded-labels.
            (keda_hpa_labels(&[]), false),
            (labels(&[]), true),
            (labels(&[("app", "web")]), true),
            (labels(&[("app.kubernetes.io/managed-by", "Helm")]), true),
        ];
        for (labels, selected) in cases {
            assert_eq!(selector.matches(&labels), selected, "{labels:?}");
        }
        // What the watch sends: the same requirements, in the API server's syntax.
        let sent = crate::native_watch(&selector).label_selector;
        assert_eq!(
            sent.as_deref(),
            Some("app.kubernetes.io/managed-by!=keda-operator,!scaledobject.keda.sh/name")
        );
        assert_eq!(Selector::parse(sent.as_deref().unwrap()).unwrap(), selector);
    }

    #[test]
    fn the_native_selector_can_take_every_hpa_or_a_chosen_few() {
        let everything = parse(&["--native-hpa-selector="])
            .unwrap()
            .into_config()
            .unwrap()
            .native_hpa_selector;
        assert!(everything.is_empty());
        assert!(everything.matches(&keda_hpa_labels(&[])));
        // No selector at all on the watch, not an empty one.
        assert_eq!(crate::native_watch(&everything).label_selector, None);
        let chosen = parse(&["--native-hpa-selector", "plimsoll.dev/native in (true)"])
            .unwrap()
            .into_config()
            .unwrap()
            .native_hpa_selector;
        assert!(chosen.matches(&labels(&[("plimsoll.dev/native", "true")])));
        assert!(!chosen.matches(&labels(&[])));
        let bad = parse(&["--native-hpa-selector=app in ("])
            .unwrap()
            .into_config()
            .unwrap_err()
            .to_string();
        assert!(bad.contains("--native-hpa-selector"), "{bad}");
    }

    #[test]
    fn the_plot_window_flags_take_seconds_or_days_and_hours_and_need_plot() {
        let Some(Command::Replay { from, to, .. }) = parse(&[
            "replay", "x.yaml", "--plot", "x.png", "--from", "6d12h", "--to", "90000",
        ])
        .unwrap()
        .command
        else {
            panic!("replay");
        };
        assert_eq!((from, to), (Some(561_600.0), Some(90_000.0)));
        let err = parse(&["replay", "x.yaml", "--from", "1d"]).unwrap_err();
        assert!(err.to_string().contains("--plot"), "{err}");
        let err = parse(&["replay", "x.yaml", "--plot", "x.svg", "--to", "1.5h"]).unwrap_err();
        assert!(err.to_string().contains("--to"), "{err}");
    }

    #[test]
    fn replay_is_still_a_subcommand() {
        let args = parse(&["replay", "x.yaml", "--output", "table"]).unwrap();
        assert!(matches!(args.command, Some(Command::Replay { .. })));
    }

    #[test]
    fn the_deployment_manifest_args_parse() {
        let manifest = include_str!("../../../deploy/hpa-plus/deployment.yaml");
        let deployment: k8s_openapi::api::apps::v1::Deployment =
            serde_saphyr::from_str(manifest).unwrap();
        let pod = deployment.spec.unwrap().template.spec.unwrap();
        let container = pod
            .containers
            .iter()
            .find(|c| c.name == "hpa-plus")
            .unwrap();
        let args = container.args.clone().unwrap_or_default();
        let parsed = parse(&args.iter().map(String::as_str).collect::<Vec<_>>()).unwrap();
        assert!(
            parsed.command.is_none(),
            "the Deployment runs the controller"
        );
        parsed.into_config().unwrap();
    }

    #[test]
    fn utilization_by_limits_is_a_switch() {
        let on = parse(&["--compute-resource-utilization-ratio-by-limits"])
            .unwrap()
            .into_config()
            .unwrap();
        assert!(on.decision.compute_resource_utilization_ratio_by_limits);
        let off = parse(&["--compute-resource-utilization-ratio-by-limits=false"])
            .unwrap()
            .into_config()
            .unwrap();
        assert!(!off.decision.compute_resource_utilization_ratio_by_limits);
    }

    #[test]
    fn shards_default_to_one_leader() {
        assert_eq!(parse(&[]).unwrap().into_config().unwrap().shards, 1);
        assert_eq!(
            parse(&["--shards=6"])
                .unwrap()
                .into_config()
                .unwrap()
                .shards,
            6
        );
        assert!(parse(&["--shards=0"]).is_err());
    }

    #[test]
    fn the_server_concurrency_has_its_default_and_is_at_least_one() {
        let config = parse(&[]).unwrap().into_config().unwrap();
        assert_eq!(
            config.prometheus.server_concurrency,
            crate::prometheus::DEFAULT_SERVER_CONCURRENCY
        );
        let config = parse(&["--prometheus-server-concurrency=2"])
            .unwrap()
            .into_config()
            .unwrap();
        assert_eq!(config.prometheus.server_concurrency, 2);
        assert!(parse(&["--prometheus-server-concurrency=0"]).is_err());
    }

    #[test]
    fn bad_tolerance_is_rejected() {
        assert!(parse(&["--tolerance=1.5"]).unwrap().into_config().is_err());
    }
}
