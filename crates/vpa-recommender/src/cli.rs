//! Command-line flags of `vpa-recommender` (a library module so that a workspace test can check
//! that `deploy/vpa-recommender/deployment.yaml` parses with them).
//!
//! Flags keep upstream's names where the concept is the same (`--recommender-interval`,
//! `--checkpoints-timeout`, `--checkpoints-gc-interval`, `--min-checkpoints`,
//! `--recommender-name`, `--vpa-object-namespace`, and every model setting); each also reads
//! `PLIMSOLL_<FLAG>` from the environment.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser, Subcommand, ValueEnum};
use jiff::SignedDuration;
use plimsoll_core::vertical::aggregate::AggregationsConfig;
use plimsoll_core::vertical::estimator::EstimatorConfig;
use plimsoll_core::vertical::joint::JointSettings;
use plimsoll_core::vertical::joint_sizing::JointConfig;
use plimsoll_core::vertical::node_fit::NodeFitConfig;
use plimsoll_replay::Output;
use plimsoll_runtime::CommonArgs;
use plimsoll_runtime::args::parse_duration;
use plimsoll_runtime::prometheus::{PrometheusArgs, PrometheusConfig};

use crate::Config;

/// Plimsoll VPA recommender: usage histograms to request recommendations, a drop-in for the
/// upstream VPA recommender.
#[derive(Clone, Debug, Parser)]
#[command(name = "vpa-recommender", version)]
#[command(mut_arg("metrics_address", |a| a.default_value("0.0.0.0:8942")))]
// Upstream's defaults and names: the in-cluster address, a 5 m query timeout, `--username` and
// `--password` for basic auth.
#[command(mut_arg("prometheus_address", |a| a.default_value("http://prometheus.monitoring.svc")))]
#[command(mut_arg("prometheus_timeout", |a| a.default_value("5m")))]
// One answer holds the whole cluster's history (every container's samples of
// --history-length at --history-resolution: 192 samples of about 48 bytes, some 10 KB a
// container at the defaults): 256 MiB is about 25,000 containers.
#[command(mut_arg("prometheus_max_response_bytes", |a| a.default_value("268435456")))]
#[command(mut_arg("prometheus_username", |a| a.alias("username")))]
#[command(mut_arg("prometheus_password", |a| a.alias("password")))]
pub struct Args {
    /// Flags every Plimsoll service shares.
    #[command(flatten)]
    pub common: CommonArgs,

    /// How often the recommender loop runs: read usage, update histograms, write recommendations
    /// and checkpoints.
    #[arg(long, env = "PLIMSOLL_RECOMMENDER_INTERVAL", value_name = "DURATION", default_value = "1m", value_parser = parse_duration)]
    pub recommender_interval: Duration,

    /// Time budget for writing checkpoints in one loop. They are written longest-ago first, so
    /// when the budget runs out the freshest ones wait for the next loop.
    #[arg(long, env = "PLIMSOLL_CHECKPOINTS_TIMEOUT", value_name = "DURATION", default_value = "1m", value_parser = parse_duration)]
    pub checkpoints_timeout: Duration,

    /// Checkpoints written per loop even when --checkpoints-timeout has run out.
    #[arg(
        long,
        env = "PLIMSOLL_MIN_CHECKPOINTS",
        value_name = "N",
        default_value_t = 10
    )]
    pub min_checkpoints: usize,

    /// How often checkpoints of deleted VPAs and of containers that no longer exist are
    /// deleted, and aggregates without samples for the whole memory window are dropped.
    #[arg(long, env = "PLIMSOLL_CHECKPOINTS_GC_INTERVAL", value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    pub checkpoints_gc_interval: Duration,

    /// The recommender name VPAs select in `spec.recommenders[].name`.
    #[arg(
        long,
        env = "PLIMSOLL_RECOMMENDER_NAME",
        value_name = "NAME",
        default_value = "plimsoll"
    )]
    pub recommender_name: String,

    /// Also answer VPAs that name no recommender (what upstream's `default` recommender does).
    /// Do not run it next to an upstream recommender that does the same.
    #[arg(long, env = "PLIMSOLL_DEFAULT")]
    pub default: bool,

    /// Only watch VPAs, pods and checkpoints in this namespace (empty: all namespaces).
    #[arg(
        long,
        env = "PLIMSOLL_VPA_OBJECT_NAMESPACE",
        value_name = "NAMESPACE",
        default_value = ""
    )]
    pub vpa_object_namespace: String,

    /// Where history comes from at start: `checkpoint` (VerticalPodAutoscalerCheckpoint objects)
    /// or `prometheus` (container metrics of a Prometheus server; see --prometheus-address).
    #[arg(long, env = "PLIMSOLL_STORAGE", value_enum, default_value_t = Storage::Checkpoint)]
    pub storage: Storage,

    /// The Prometheus server for --storage=prometheus: address, TLS, credentials, timeout.
    #[command(flatten)]
    pub prometheus: PrometheusArgs,

    /// `job` label of the cAdvisor series in Prometheus.
    #[arg(
        long,
        env = "PLIMSOLL_PROMETHEUS_CADVISOR_JOB_NAME",
        value_name = "JOB",
        default_value = "kubernetes-cadvisor"
    )]
    pub prometheus_cadvisor_job_name: String,

    /// How much history to load from Prometheus at start.
    #[arg(long, env = "PLIMSOLL_HISTORY_LENGTH", value_name = "DURATION", default_value = "192h", value_parser = parse_duration)]
    pub history_length: Duration,

    /// Resolution (query step) of the history loaded from Prometheus.
    #[arg(long, env = "PLIMSOLL_HISTORY_RESOLUTION", value_name = "DURATION", default_value = "1h", value_parser = parse_duration)]
    pub history_resolution: Duration,

    /// Label of the cAdvisor series that holds the namespace.
    #[arg(
        long,
        env = "PLIMSOLL_CONTAINER_NAMESPACE_LABEL",
        value_name = "LABEL",
        default_value = "namespace"
    )]
    pub container_namespace_label: String,

    /// Label of the cAdvisor series that holds the pod name.
    #[arg(
        long,
        env = "PLIMSOLL_CONTAINER_POD_NAME_LABEL",
        value_name = "LABEL",
        default_value = "pod"
    )]
    pub container_pod_name_label: String,

    /// Label of the cAdvisor series that holds the container name.
    #[arg(
        long,
        env = "PLIMSOLL_CONTAINER_NAME_LABEL",
        value_name = "LABEL",
        default_value = "name"
    )]
    pub container_name_label: String,

    /// Percentile of CPU usage the target is computed from.
    #[arg(
        long,
        env = "PLIMSOLL_TARGET_CPU_PERCENTILE",
        value_name = "FRACTION",
        default_value_t = 0.9
    )]
    pub target_cpu_percentile: f64,

    /// Percentile of memory peaks the target is computed from.
    #[arg(
        long,
        env = "PLIMSOLL_TARGET_MEMORY_PERCENTILE",
        value_name = "FRACTION",
        default_value_t = 0.9
    )]
    pub target_memory_percentile: f64,

    /// Percentile of CPU usage the lower bound is computed from.
    #[arg(
        long,
        env = "PLIMSOLL_RECOMMENDATION_LOWER_BOUND_CPU_PERCENTILE",
        value_name = "FRACTION",
        default_value_t = 0.5
    )]
    pub recommendation_lower_bound_cpu_percentile: f64,

    /// Percentile of CPU usage the upper bound is computed from.
    #[arg(
        long,
        env = "PLIMSOLL_RECOMMENDATION_UPPER_BOUND_CPU_PERCENTILE",
        value_name = "FRACTION",
        default_value_t = 0.95
    )]
    pub recommendation_upper_bound_cpu_percentile: f64,

    /// Percentile of memory peaks the lower bound is computed from.
    #[arg(
        long,
        env = "PLIMSOLL_RECOMMENDATION_LOWER_BOUND_MEMORY_PERCENTILE",
        value_name = "FRACTION",
        default_value_t = 0.5
    )]
    pub recommendation_lower_bound_memory_percentile: f64,

    /// Percentile of memory peaks the upper bound is computed from.
    #[arg(
        long,
        env = "PLIMSOLL_RECOMMENDATION_UPPER_BOUND_MEMORY_PERCENTILE",
        value_name = "FRACTION",
        default_value_t = 0.95
    )]
    pub recommendation_upper_bound_memory_percentile: f64,

    /// Safety margin added to every estimate (0.15 = 15 %).
    #[arg(
        long,
        env = "PLIMSOLL_RECOMMENDATION_MARGIN_FRACTION",
        value_name = "FRACTION",
        default_value_t = 0.15
    )]
    pub recommendation_margin_fraction: f64,

    /// Smallest CPU recommendation for a whole pod, split across its containers (millicores).
    #[arg(
        long,
        env = "PLIMSOLL_POD_RECOMMENDATION_MIN_CPU_MILLICORES",
        value_name = "MILLICORES",
        default_value_t = 25.0
    )]
    pub pod_recommendation_min_cpu_millicores: f64,

    /// Smallest memory recommendation for a whole pod, split across its containers (MiB).
    #[arg(
        long,
        env = "PLIMSOLL_POD_RECOMMENDATION_MIN_MEMORY_MB",
        value_name = "MIB",
        default_value_t = 250.0
    )]
    pub pod_recommendation_min_memory_mb: f64,

    /// Length of one memory peak interval.
    #[arg(long, env = "PLIMSOLL_MEMORY_AGGREGATION_INTERVAL", value_name = "DURATION", default_value = "24h", value_parser = parse_duration)]
    pub memory_aggregation_interval: Duration,

    /// Number of memory peak intervals kept; interval × count is also how long an aggregate
    /// without samples lives.
    #[arg(
        long,
        env = "PLIMSOLL_MEMORY_AGGREGATION_INTERVAL_COUNT",
        value_name = "N",
        default_value_t = 8
    )]
    pub memory_aggregation_interval_count: i64,

    /// Half-life of memory peak weights.
    #[arg(long, env = "PLIMSOLL_MEMORY_HISTOGRAM_DECAY_HALF_LIFE", value_name = "DURATION", default_value = "24h", value_parser = parse_duration)]
    pub memory_histogram_decay_half_life: Duration,

    /// Half-life of CPU sample weights.
    #[arg(long, env = "PLIMSOLL_CPU_HISTOGRAM_DECAY_HALF_LIFE", value_name = "DURATION", default_value = "24h", value_parser = parse_duration)]
    pub cpu_histogram_decay_half_life: Duration,

    /// Memory multiplier after an OOM kill.
    #[arg(
        long,
        env = "PLIMSOLL_OOM_BUMP_UP_RATIO",
        value_name = "RATIO",
        default_value_t = 1.2
    )]
    pub oom_bump_up_ratio: f64,

    /// Smallest memory increase after an OOM kill (bytes).
    #[arg(long, env = "PLIMSOLL_OOM_MIN_BUMP_UP_BYTES", value_name = "BYTES", default_value_t = 100.0 * 1024.0 * 1024.0)]
    pub oom_min_bump_up_bytes: f64,

    /// History that counts as one unit of CPU confidence (the bounds widen below it).
    #[arg(long, env = "PLIMSOLL_CONFIDENCE_INTERVAL_CPU", value_name = "DURATION", default_value = "24h", value_parser = parse_duration)]
    pub confidence_interval_cpu: Duration,

    /// History that counts as one unit of memory confidence.
    #[arg(long, env = "PLIMSOLL_CONFIDENCE_INTERVAL_MEMORY", value_name = "DURATION", default_value = "24h", value_parser = parse_duration)]
    pub confidence_interval_memory: Duration,

    /// Joint mode (VPAs annotated `plimsoll.dev/horizontal-aware: "true"`): the daily cycle of
    /// the workload's load. It is also the learning period: until the total usage spans one
    /// cycle, the CPU request only rises (docs/vpa.md, "HPA and VPA together").
    #[arg(long, env = "PLIMSOLL_JOINT_CYCLE", value_name = "DURATION", default_value = "24h", value_parser = parse_duration)]
    pub joint_cycle: Duration,

    /// Joint mode: how much total usage is kept; the peak and trough percentiles are taken
    /// over it.
    #[arg(long, env = "PLIMSOLL_JOINT_WINDOW", value_name = "DURATION", default_value = "168h", value_parser = parse_duration)]
    pub joint_window: Duration,

    /// Joint mode: the total usage keeps the highest value of each bucket this wide.
    #[arg(long, env = "PLIMSOLL_JOINT_BUCKET", value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub joint_bucket: Duration,

    /// Joint mode: the total usage is written to the VPA's `plimsoll.dev/total-usage`
    /// annotation at most this often (and at the end of a leadership term), so a restart or a
    /// new leader loses at most this much of it.
    #[arg(long, env = "PLIMSOLL_JOINT_PERSIST_INTERVAL", value_name = "DURATION", default_value = "15m", value_parser = parse_duration)]
    pub joint_persist_interval: Duration,

    /// Let a VPA's container policies override --oom-bump-up-ratio, --oom-min-bump-up-bytes,
    /// --memory-aggregation-interval and --memory-aggregation-interval-count for its own
    /// containers (oomBumpUpRatio, oomMinBumpUp, memoryAggregationIntervalSeconds,
    /// memoryAggregationIntervalCount: upstream's per-VPA configuration, AEP-8026, feature gate
    /// PerVPAConfig). With false, the flags apply to every VPA and those fields are ignored.
    #[arg(long, env = "PLIMSOLL_PER_VPA_CONFIG", action = ArgAction::Set, default_value_t = true,
          value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub per_vpa_config: bool,

    /// Cap each pod's recommendation to what the largest node can hold: per resource, the
    /// largest allocatable of any schedulable node, less --node-headroom-percent, less what the
    /// pod's other containers request. Needs get/list/watch on Nodes; with false, Nodes are not
    /// read and recommendations may exceed every node (the pods then stay Pending).
    #[arg(long, env = "PLIMSOLL_CAP_TO_LARGEST_NODE", action = ArgAction::Set, default_value_t = true,
          value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub cap_to_largest_node: bool,

    /// With --cap-to-largest-node: percent of the largest node's allocatable left to
    /// DaemonSets and system pods (0 to 99).
    #[arg(long, env = "PLIMSOLL_NODE_HEADROOM_PERCENT", value_name = "PERCENT",
          default_value_t = crate::DEFAULT_NODE_HEADROOM_PERCENT,
          value_parser = clap::value_parser!(u8).range(0..=99))]
    pub node_headroom_percent: u8,

    /// Split the VPAs into this many shards, each on its own Lease
    /// (`plimsoll-vpa-recommender-shard-<i>`): every replica recommends for the VPAs of the
    /// shards it holds, restoring their history from their checkpoints when it takes a shard,
    /// and shards move when replicas join or leave. 1 runs a single leader on the
    /// `plimsoll-vpa-recommender` Lease. Ignored with --leader-elect=false.
    #[arg(long, env = "PLIMSOLL_SHARDS", default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub shards: u32,

    /// Run something else than the controller.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Where the recommender's history comes from at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Storage {
    /// `VerticalPodAutoscalerCheckpoint` objects (upstream's default).
    Checkpoint,
    /// A Prometheus server's cAdvisor series.
    Prometheus,
}

/// Subcommands.
#[derive(Clone, Debug, Subcommand)]
pub enum Command {
    /// Run the recommender over a scenario file with no cluster (format: docs/replay.md).
    /// Exit 0 when every `expect` held, 1 when one did not, 2 when the file is invalid.
    Replay {
        /// The scenario (YAML or JSON, `kind: VerticalReplay`).
        scenario: PathBuf,
        /// Output format: JSON Lines or a table.
        #[arg(long, value_enum, default_value_t = Output::Json)]
        output: Output,
        /// Also write a chart of usage distributions and target/bounds over time: SVG or PNG,
        /// by the file's extension (`.svg`, `.png`).
        #[arg(long, value_name = "FILE.svg|FILE.png")]
        plot: Option<PathBuf>,
        /// Write the final state as `VerticalPodAutoscalerCheckpoint` manifests.
        #[arg(long, value_name = "FILE")]
        checkpoint_out: Option<PathBuf>,
    },
}

fn signed(d: Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

/// Whole seconds of `d`, at least 1.
fn seconds(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX).max(1)
}

impl Args {
    /// Parses `flags` (the first item is the program name), as the binary would; lets tests and
    /// the deploy-manifest check use the flags without depending on clap.
    pub fn from_flags<I, T>(flags: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        Self::try_parse_from(flags)
    }

    /// The service configuration these flags describe.
    pub fn into_config(self) -> Config {
        Config {
            common: self.common.clone(),
            interval: self.recommender_interval,
            checkpoints_timeout: self.checkpoints_timeout,
            min_checkpoints: self.min_checkpoints,
            gc_interval: self.checkpoints_gc_interval,
            recommender_name: self.recommender_name.clone(),
            answer_default: self.default,
            namespace: (!self.vpa_object_namespace.is_empty())
                .then(|| self.vpa_object_namespace.clone()),
            prometheus: (self.storage == Storage::Prometheus).then(|| {
                crate::history::PrometheusConfig {
                    // An empty --prometheus-address fails at load with the address named.
                    server: self
                        .prometheus
                        .config()
                        .unwrap_or_else(|| PrometheusConfig::new("")),
                    kube: self.common.clone(),
                    job: self.prometheus_cadvisor_job_name.clone(),
                    history_length: self.history_length,
                    resolution: self.history_resolution,
                    namespace_label: self.container_namespace_label.clone(),
                    pod_label: self.container_pod_name_label.clone(),
                    container_label: self.container_name_label.clone(),
                }
            }),
            aggregations: AggregationsConfig {
                memory_aggregation_interval: signed(self.memory_aggregation_interval),
                memory_aggregation_interval_count: self.memory_aggregation_interval_count,
                memory_histogram_decay_half_life: signed(self.memory_histogram_decay_half_life),
                cpu_histogram_decay_half_life: signed(self.cpu_histogram_decay_half_life),
                oom_bump_up_ratio: self.oom_bump_up_ratio,
                oom_min_bump_up_bytes: self.oom_min_bump_up_bytes,
            },
            joint: JointConfig {
                settings: JointSettings {
                    learning_seconds: seconds(self.joint_cycle),
                    window_seconds: seconds(self.joint_window),
                    ..JointSettings::default()
                },
                bucket_seconds: seconds(self.joint_bucket),
            },
            joint_persist_interval: self.joint_persist_interval,
            shards: self.shards,
            per_vpa_config: self.per_vpa_config,
            node_fit: self.cap_to_largest_node.then_some(NodeFitConfig {
                headroom_percent: self.node_headroom_percent,
            }),
            identity: None,
            estimator: EstimatorConfig {
                target_cpu_percentile: self.target_cpu_percentile,
                lower_bound_cpu_percentile: self.recommendation_lower_bound_cpu_percentile,
                upper_bound_cpu_percentile: self.recommendation_upper_bound_cpu_percentile,
                target_memory_percentile: self.target_memory_percentile,
                lower_bound_memory_percentile: self.recommendation_lower_bound_memory_percentile,
                upper_bound_memory_percentile: self.recommendation_upper_bound_memory_percentile,
                safety_margin_fraction: self.recommendation_margin_fraction,
                pod_min_cpu_millicores: self.pod_recommendation_min_cpu_millicores,
                pod_min_memory_mb: self.pod_recommendation_min_memory_mb,
                confidence_interval_cpu: signed(self.confidence_interval_cpu),
                confidence_interval_memory: signed(self.confidence_interval_memory),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn defaults_are_upstreams() {
        let args = Args::try_parse_from(["vpa-recommender"]).expect("parses");
        let c = args.into_config();
        assert_eq!(c.interval, Duration::from_secs(60));
        assert_eq!(c.gc_interval, Duration::from_secs(600));
        assert_eq!(c.recommender_name, "plimsoll");
        assert!(!c.answer_default);
        assert_eq!(c.aggregations, AggregationsConfig::default());
        assert_eq!(c.estimator, EstimatorConfig::default());
        assert_eq!(c.joint, JointConfig::default());
        assert_eq!(c.joint_persist_interval, Duration::from_secs(900));
        assert_eq!(c.common.metrics_address.port(), 8942);
        assert!(c.prometheus.is_none());
    }

    #[test]
    fn joint_flags_compress_the_day() {
        let args = Args::try_parse_from([
            "vpa-recommender",
            "--joint-cycle=90s",
            "--joint-window=10m",
            "--joint-bucket=3s",
            "--joint-persist-interval=20s",
        ])
        .expect("parses");
        let c = args.into_config();
        assert_eq!(c.joint.settings.learning_seconds, 90);
        assert_eq!(c.joint.settings.window_seconds, 600);
        assert_eq!(c.joint.bucket_seconds, 3);
        let defaults = JointSettings::default();
        assert!((c.joint.settings.headroom - defaults.headroom).abs() < 1e-9);
        assert!((c.joint.settings.band - defaults.band).abs() < 1e-9);
        assert_eq!(c.joint_persist_interval, Duration::from_secs(20));
    }

    #[test]
    fn upstream_prometheus_flags_are_accepted() {
        let args = Args::try_parse_from([
            "vpa-recommender",
            "--storage=prometheus",
            "--prometheus-address=https://prom.monitoring:9090",
            "--prometheus-insecure",
            "--username=reader",
            "--password=pw",
            "--prometheus-query-timeout=2m",
        ])
        .expect("parses");
        let prom = args.into_config().prometheus.expect("prometheus storage");
        assert_eq!(prom.server.address, "https://prom.monitoring:9090");
        assert!(prom.server.insecure_skip_verify);
        assert_eq!(prom.server.timeout, Duration::from_secs(120));
        assert!(matches!(
            prom.server.auth,
            plimsoll_runtime::prometheus::Auth::Basic { ref username, .. } if username == "reader"
        ));
        let args = Args::try_parse_from([
            "vpa-recommender",
            "--storage=prometheus",
            "--prometheus-bearer-token-file=/var/run/secrets/prom/token",
        ])
        .expect("parses");
        let prom = args.into_config().prometheus.expect("prometheus storage");
        assert_eq!(prom.server.address, "http://prometheus.monitoring.svc");
        assert_eq!(prom.server.timeout, Duration::from_secs(300));
        // A whole cluster's history in one answer: a larger cap than an autoscaler's.
        assert_eq!(prom.server.max_response_bytes, 256 * 1024 * 1024);
    }

    #[test]
    fn every_flag_has_env_and_help() {
        for arg in Args::command().get_arguments() {
            if arg.is_positional() || arg.get_id() == "help" || arg.get_id() == "version" {
                continue;
            }
            assert!(arg.get_env().is_some(), "{} has no env", arg.get_id());
            assert!(arg.get_help().is_some(), "{} has no help", arg.get_id());
        }
    }

    #[test]
    fn shards_default_to_one_leader() {
        let shards = |flags: &[&str]| {
            Args::try_parse_from(std::iter::once("vpa-recommender").chain(flags.iter().copied()))
                .map(|a| a.into_config().shards)
        };
        assert_eq!(shards(&[]).ok(), Some(1));
        assert_eq!(shards(&["--shards=6"]).ok(), Some(6));
        assert!(shards(&["--shards=0"]).is_err());
        assert!(shards(&["--shards=1025"]).is_err());
    }

    #[test]
    fn replay_is_a_subcommand() {
        let args =
            Args::try_parse_from(["vpa-recommender", "replay", "x.yaml", "--output", "table"])
                .expect("parses");
        assert!(matches!(args.command, Some(Command::Replay { .. })));
    }
}
