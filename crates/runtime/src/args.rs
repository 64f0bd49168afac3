//! Command-line flags every Plimsoll service shares, and the duration syntax they use.
//!
//! A service flattens [`CommonArgs`] into its own clap `Parser`. Every flag can also be set from
//! an environment variable `PLIMSOLL_<FLAG>` (upper case, `-` as `_`), and `--help` is the
//! reference the docs quote.
//!
//! `--metrics-address` defaults to `0.0.0.0:8080`; a service that wants another default port
//! overrides it on its own `Parser` with
//! `#[command(mut_arg("metrics_address", |a| a.default_value("0.0.0.0:8942")))]`, so `--help`
//! shows the real default.
//!
//! Durations use Go's syntax (what `kubectl`, the API server and metrics-server print): one or
//! more `<number><unit>` terms with units `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`, e.g. `15s`,
//! `1m30s`, `500ms`, `1.5h`. A bare `0` is zero. Negative durations are rejected.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args};

use crate::error::{Error, Result};
use crate::listener::ListenerConfig;
use crate::rate_limit::RateLimit;
use crate::telemetry::{self, LogFormat};

/// Flags shared by every Plimsoll service; flatten it with `#[command(flatten)]`.
#[derive(Clone, Debug, Args)]
pub struct CommonArgs {
    /// Path to a kubeconfig file. Without it the client uses $KUBECONFIG, ~/.kube/config, or the
    /// in-cluster service account, in that order.
    #[arg(long, env = "PLIMSOLL_KUBECONFIG", value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context to use instead of the file's current-context.
    #[arg(long, env = "PLIMSOLL_CONTEXT", value_name = "NAME")]
    pub context: Option<String>,

    /// Client-side limit on requests to the API server, per second: a token bucket refilled at
    /// this rate, one token per request (a watch takes one when it starts). 0, the default, is
    /// no limit. Upstream's VPA components default to 5 (burst 10) and kube-controller-manager
    /// to 20 (burst 30); Plimsoll defaults to none because the API server's own priority and
    /// fairness already protects it, and any such limit would throttle hpa-plus, which at
    /// 50,000 objects reads thousands of scales per second.
    #[arg(
        long,
        env = "PLIMSOLL_KUBE_API_QPS",
        value_name = "QPS",
        default_value_t = 0.0,
        allow_negative_numbers = true,
        value_parser = parse_qps
    )]
    pub kube_api_qps: f64,

    /// Requests that may go out at once before --kube-api-qps paces them (the bucket's size).
    /// Default: twice --kube-api-qps, at least 1. Ignored without --kube-api-qps; 0 with it is
    /// rejected.
    #[arg(long, env = "PLIMSOLL_KUBE_API_BURST", value_name = "N")]
    pub kube_api_burst: Option<u32>,

    /// Address of the admin HTTP listener that serves /metrics (Prometheus/OpenMetrics text),
    /// /healthz (liveness) and /readyz (readiness). `:PORT` means all interfaces.
    #[arg(
        long,
        env = "PLIMSOLL_METRICS_ADDRESS",
        value_name = "HOST:PORT",
        default_value = "0.0.0.0:8080",
        value_parser = parse_address
    )]
    pub metrics_address: SocketAddr,

    /// Log line format: `json` (one object per line) or `text` (compact, for terminals).
    #[arg(long, env = "PLIMSOLL_LOG_FORMAT", value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,

    /// Which log lines to keep, in tracing-subscriber `EnvFilter` syntax, e.g.
    /// `info,plimsoll=debug,kube=warn`. Default: `$RUST_LOG` when it is set and not empty, else
    /// `info,kube=warn`.
    #[arg(long, env = "PLIMSOLL_LOG_FILTER", value_name = "FILTER")]
    pub log_filter: Option<String>,

    /// Run leader election on a coordination.k8s.io/v1 Lease named `plimsoll-<binary>` so that
    /// only one replica acts at a time. Set to false when running a single replica.
    #[arg(
        long,
        env = "PLIMSOLL_LEADER_ELECT",
        action = ArgAction::Set,
        value_name = "BOOL",
        default_value_t = true
    )]
    pub leader_elect: bool,

    /// How long a non-leader waits after last seeing the lease change before it may take the lease
    /// over (written to the Lease as leaseDurationSeconds). Go duration syntax: `15s`, `1m`.
    #[arg(
        long,
        env = "PLIMSOLL_LEASE_DURATION",
        value_name = "DURATION",
        default_value = "15s",
        value_parser = parse_duration
    )]
    pub lease_duration: Duration,

    /// How long the leader keeps acting without a successful renew before it steps down. Must be
    /// shorter than --lease-duration so the leader stops before anyone else can take over.
    #[arg(
        long,
        env = "PLIMSOLL_RENEW_DEADLINE",
        value_name = "DURATION",
        default_value = "10s",
        value_parser = parse_duration
    )]
    pub renew_deadline: Duration,

    /// Interval between attempts to acquire or renew the lease. Must be shorter than
    /// --renew-deadline.
    #[arg(
        long,
        env = "PLIMSOLL_RETRY_PERIOD",
        value_name = "DURATION",
        default_value = "2s",
        value_parser = parse_duration
    )]
    pub retry_period: Duration,

    /// Namespace of the leader-election Lease. Defaults to `$POD_NAMESPACE`, then to the client's
    /// default namespace (the service account's namespace in a cluster, else `default`).
    #[arg(long, env = "PLIMSOLL_LEASE_NAMESPACE", value_name = "NAMESPACE")]
    pub lease_namespace: Option<String>,

    /// The Deployment of this service, in the Lease namespace: every Lease the service creates or
    /// renews (its election Lease, each shard's, the webhook's status Lease) names it as a
    /// (non-controller) owner, so the garbage collector deletes the Leases once the Deployment is
    /// gone (`helm uninstall`, `kubectl delete -k`). Read once at start; if it cannot be read (no
    /// `get` on it, not found), the service logs a warning and writes the Leases without owner.
    /// Existing Leases gain the reference at their next write.
    #[arg(long, env = "PLIMSOLL_LEASE_OWNER_DEPLOYMENT", value_name = "NAME")]
    pub lease_owner_deployment: Option<String>,

    /// Limits of the admin listener (--metrics-address).
    #[command(flatten, next_help_heading = "Admin listener (--metrics-address)")]
    pub admin_listener: AdminListenerArgs,
}

impl CommonArgs {
    /// The log filter to install: `--log-filter`, else `$RUST_LOG`, else the default.
    #[must_use]
    pub fn effective_log_filter(&self) -> String {
        let rust_log = std::env::var("RUST_LOG").ok();
        telemetry::log_filter(self.log_filter.as_deref(), rust_log.as_deref()).to_owned()
    }
}

/// Limits of the admin listener, which anyone who can reach the pod can connect to. Its clients
/// (kubelet probes, Prometheus) send small GETs, so the defaults are tight; the endpoints read no
/// request body (a body is capped at 64 KiB and must arrive within the header-read timeout) and
/// the listener speaks HTTP/1.1 only.
#[derive(Clone, Debug, PartialEq, Eq, Args)]
pub struct AdminListenerArgs {
    /// Connections the admin listener keeps open at once. Past it, a new connection closes one
    /// with no request in flight (the oldest that sent none yet, else the one idle longest); when
    /// every one has a request in flight, new connections wait in the kernel's accept queue.
    #[arg(
        long,
        env = "PLIMSOLL_METRICS_MAX_CONNECTIONS",
        value_name = "N",
        default_value_t = 64,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub metrics_max_connections: u32,

    /// A new connection must send its first request's headers within this; a kept-alive one,
    /// the rest of a request's headers within this of their first byte. Slower clients are
    /// closed.
    #[arg(
        long,
        env = "PLIMSOLL_METRICS_HEADER_READ_TIMEOUT",
        value_name = "DURATION",
        default_value = "10s",
        value_parser = parse_timeout
    )]
    pub metrics_header_read_timeout: Duration,

    /// A response must be written within this of the answer; a client that does not read it
    /// is closed.
    #[arg(
        long,
        env = "PLIMSOLL_METRICS_WRITE_TIMEOUT",
        value_name = "DURATION",
        default_value = "10s",
        value_parser = parse_timeout
    )]
    pub metrics_write_timeout: Duration,

    /// A kept-alive connection with no request for this long is closed. Above the 90 s idle
    /// timeout of Go clients (Prometheus), so the client closes first.
    #[arg(
        long,
        env = "PLIMSOLL_METRICS_IDLE_TIMEOUT",
        value_name = "DURATION",
        default_value = "2m",
        value_parser = parse_timeout
    )]
    pub metrics_idle_timeout: Duration,

    /// Largest request headers accepted (bytes, or a quantity such as `16Ki`); larger get 431.
    /// At least 8 KiB is always accepted.
    #[arg(
        long,
        env = "PLIMSOLL_METRICS_MAX_HEADER_BYTES",
        value_name = "BYTES",
        default_value = "16Ki",
        value_parser = parse_byte_size
    )]
    pub metrics_max_header_bytes: usize,
}

/// The admin listener's cap on a request body it never reads.
const ADMIN_MAX_BODY_BYTES: usize = 64 * 1024;

impl Default for AdminListenerArgs {
    /// The flags' defaults (a test checks they agree).
    fn default() -> Self {
        Self {
            metrics_max_connections: 64,
            metrics_header_read_timeout: Duration::from_secs(10),
            metrics_write_timeout: Duration::from_secs(10),
            metrics_idle_timeout: Duration::from_secs(120),
            metrics_max_header_bytes: 16 * 1024,
        }
    }
}

impl AdminListenerArgs {
    /// The listener configuration these flags describe (HTTP/1.1 only).
    pub fn config(&self) -> ListenerConfig {
        let max_connections = usize::try_from(self.metrics_max_connections).unwrap_or(usize::MAX);
        ListenerConfig {
            max_connections,
            header_read_timeout: self.metrics_header_read_timeout,
            body_read_timeout: self.metrics_header_read_timeout,
            write_timeout: self.metrics_write_timeout,
            idle_timeout: self.metrics_idle_timeout,
            max_header_bytes: self.metrics_max_header_bytes,
            max_request_body_bytes: ADMIN_MAX_BODY_BYTES,
            max_inflight_body_bytes: ADMIN_MAX_BODY_BYTES.saturating_mul(max_connections),
            http2_max_concurrent_streams: None,
        }
    }
}

impl CommonArgs {
    /// The client-side rate limit of `--kube-api-qps` / `--kube-api-burst` (`None`: no limit);
    /// an error names the flag that makes it unusable.
    pub fn rate_limit(&self) -> Result<Option<RateLimit>> {
        RateLimit::from_flags(self.kube_api_qps, self.kube_api_burst)
    }

    /// The namespace for the leader-election Lease: the flag, else `$POD_NAMESPACE`, else
    /// `fallback` (pass `client.default_namespace()`).
    pub fn lease_namespace_or(&self, fallback: &str) -> String {
        self.lease_namespace
            .clone()
            .or_else(|| {
                std::env::var("POD_NAMESPACE")
                    .ok()
                    .filter(|ns| !ns.is_empty())
            })
            .unwrap_or_else(|| fallback.to_owned())
    }
}

/// Parses a listen address: `IP:PORT`, `[IPv6]:PORT`, or `:PORT` for all IPv4 interfaces (the
/// Go convention other autoscalers' flags use).
pub fn parse_address(input: &str) -> std::result::Result<SocketAddr, String> {
    let full = match input.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => input.to_owned(),
    };
    full.parse()
        .map_err(|_| format!("invalid address {input:?}: expected IP:PORT or :PORT"))
}

/// Parses a timeout: a Go-style duration ([`parse_duration`]) greater than zero.
pub fn parse_timeout(input: &str) -> Result<Duration> {
    let duration = parse_duration(input)?;
    if duration.is_zero() {
        return Err(Error::Duration {
            input: input.to_owned(),
            reason: "must be greater than zero".to_owned(),
        });
    }
    Ok(duration)
}

/// Parses a size in bytes: a whole number or a Kubernetes quantity (`16Ki`, `3Mi`, `1M`),
/// greater than zero.
pub fn parse_byte_size(input: &str) -> std::result::Result<usize, String> {
    let quantity = plimsoll_core::quantity::Quantity::parse(input.trim())
        .map_err(|e| format!("{input:?} is not a size in bytes (e.g. 65536, 16Ki, 3Mi): {e}"))?;
    let bytes = quantity.value();
    if bytes <= 0 {
        return Err(format!("{input:?} must be greater than zero"));
    }
    usize::try_from(bytes).map_err(|_| format!("{input:?} is too large"))
}

/// Parses `--kube-api-qps`: a finite, non-negative number of requests per second.
pub fn parse_qps(input: &str) -> std::result::Result<f64, String> {
    match input.trim().parse::<f64>() {
        Ok(qps) if qps.is_finite() && qps >= 0.0 => Ok(qps),
        Ok(_) => Err(format!(
            "{input:?} must be a non-negative number of requests per second (0 = no limit)"
        )),
        Err(_) => Err(format!(
            "{input:?} is not a number of requests per second (e.g. 5, 0.5; 0 = no limit)"
        )),
    }
}

/// Parses a Go-style duration (`15s`, `1m30s`, `500ms`, `1.5h`, `0`).
///
/// Fractions are kept to the nanosecond. Errors quote the input and say what is wrong.
pub fn parse_duration(input: &str) -> Result<Duration> {
    let err = |reason: &str| Error::Duration {
        input: input.to_owned(),
        reason: reason.to_owned(),
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    if s.starts_with('-') {
        return Err(err("must not be negative"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = s;
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        if number.is_empty() || number == "." {
            return Err(err("expected a number, e.g. 15s, 1m30s, 500ms"));
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(err("missing unit (ns, us, ms, s, m, h)")),
            _ => {
                return Err(err(&format!(
                    "unknown unit {unit:?} (use ns, us, ms, s, m, h)"
                )));
            }
        };
        total_nanos = total_nanos
            .checked_add(term_nanos(number, unit_nanos).ok_or_else(|| err("malformed number"))?)
            .ok_or_else(|| err("too large"))?;
        rest = next;
    }
    let secs = u64::try_from(total_nanos / 1_000_000_000).map_err(|_| err("too large"))?;
    Ok(Duration::new(secs, (total_nanos % 1_000_000_000) as u32))
}

/// `number` (digits with at most one `.`) times `unit_nanos`, rounded to the nearest nanosecond
/// (so `0.3333333333333333333h` is 20m, as in Go).
///
/// Exact integer arithmetic: only the first 20 fraction digits are read, which is more than
/// enough since the largest unit is below 10^13 ns.
fn term_nanos(number: &str, unit_nanos: u128) -> Option<u128> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if fraction.contains('.') {
        return None;
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let digits = &fraction[..fraction.len().min(20)];
    let numerator: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let denominator = 10u128.checked_pow(u32::try_from(digits.len()).ok()?)?;
    let fraction_nanos = (numerator.checked_mul(unit_nanos)? + denominator / 2) / denominator;
    whole.checked_mul(unit_nanos)?.checked_add(fraction_nanos)
}

/// Formats a duration the way [`parse_duration`] reads it back, in the largest whole units
/// (`1h30m`, `15s`, `500ms`, `0s`).
pub fn format_duration(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    let mut out = String::new();
    let mut rest = nanos;
    for (unit, size) in [
        ("h", 3_600_000_000_000u128),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
        ("ns", 1),
    ] {
        if rest >= size {
            let _ = write!(out, "{}{unit}", rest / size);
            rest %= size;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};
    use proptest::prelude::*;

    #[derive(Debug, Parser)]
    #[command(mut_arg("metrics_address", |a| a.default_value("0.0.0.0:8942")))]
    struct ServiceArgs {
        #[command(flatten)]
        common: CommonArgs,
    }

    #[derive(Debug, Parser)]
    struct PlainArgs {
        #[command(flatten)]
        common: CommonArgs,
    }

    #[test]
    fn durations_parse() {
        // Go's time.ParseDuration vectors (time/time_test.go parseDurationTests), the valid ones.
        let cases: &[(&str, Duration)] = &[
            ("0", Duration::ZERO),
            ("5s", Duration::from_secs(5)),
            ("30s", Duration::from_secs(30)),
            ("1478s", Duration::from_secs(1478)),
            ("+5s", Duration::from_secs(5)),
            ("5.0s", Duration::from_secs(5)),
            ("5.6s", Duration::from_millis(5600)),
            ("5.s", Duration::from_secs(5)),
            (".5s", Duration::from_millis(500)),
            ("1.0s", Duration::from_secs(1)),
            ("1.004s", Duration::from_millis(1004)),
            ("100.00100s", Duration::from_millis(100_001)),
            ("10ns", Duration::from_nanos(10)),
            ("11us", Duration::from_micros(11)),
            ("12µs", Duration::from_micros(12)),
            ("13ms", Duration::from_millis(13)),
            ("14s", Duration::from_secs(14)),
            ("15m", Duration::from_secs(15 * 60)),
            ("16h", Duration::from_secs(16 * 3600)),
            ("3h30m", Duration::from_secs(3 * 3600 + 30 * 60)),
            ("10.5s4m", Duration::from_millis(4 * 60_000 + 10_500)),
            ("1h2m3s4ms5us6ns", Duration::new(3723, 4_005_006)),
            ("39h9m14.425s", Duration::from_millis(140_954_425)),
            ("52763797000ns", Duration::from_micros(52_763_797)),
            ("0.3333333333333333333h", Duration::from_secs(1200)),
            ("0.100000000000000000000h", Duration::from_secs(360)),
            ("1.5h", Duration::from_secs(5400)),
            ("500ms", Duration::from_millis(500)),
            ("1m", Duration::from_secs(60)),
        ];
        for (input, want) in cases {
            assert_eq!(parse_duration(input).unwrap(), *want, "{input}");
        }
    }

    #[test]
    fn bad_durations_are_rejected_with_the_input_quoted() {
        for input in [
            "", "3", "-3s", "s", ".s", "1.2.3s", "10x", "1d", "5 s", "1e3s",
        ] {
            let err = parse_duration(input).unwrap_err().to_string();
            assert!(err.contains(&format!("{input:?}")), "{err}");
        }
    }

    #[test]
    fn durations_format() {
        assert_eq!(format_duration(Duration::ZERO), "0s");
        assert_eq!(format_duration(Duration::from_secs(15)), "15s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1s500ms");
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
    }

    proptest! {
        #[test]
        fn format_then_parse_round_trips(nanos in 0u64..u64::MAX / 2) {
            let d = Duration::from_nanos(nanos);
            prop_assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
        }
    }

    #[test]
    fn defaults_match_the_documented_ones() {
        let args = PlainArgs::try_parse_from(["svc"]).unwrap().common;
        assert_eq!(args.metrics_address, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(args.log_format, LogFormat::Json);
        assert_eq!(args.log_filter, None);
        assert_eq!(
            crate::telemetry::log_filter(None, None),
            crate::telemetry::DEFAULT_LOG_FILTER
        );
        assert!(args.leader_elect);
        assert_eq!(args.lease_duration, Duration::from_secs(15));
        assert_eq!(args.renew_deadline, Duration::from_secs(10));
        assert_eq!(args.retry_period, Duration::from_secs(2));
        assert_eq!(args.kubeconfig, None);
        assert!(!args.lease_namespace_or("fallback-ns").is_empty());
        assert_eq!(args.rate_limit().unwrap(), None);
    }

    #[test]
    fn a_service_overrides_the_metrics_address_default() {
        let args = ServiceArgs::try_parse_from(["svc"]).unwrap().common;
        assert_eq!(args.metrics_address, "0.0.0.0:8942".parse().unwrap());
        let help = ServiceArgs::command().render_long_help().to_string();
        assert!(help.contains("0.0.0.0:8942"), "{help}");
    }

    #[test]
    fn flags_parse() {
        let args = PlainArgs::try_parse_from([
            "svc",
            "--kubeconfig",
            "/tmp/kc",
            "--context",
            "kind-a",
            "--metrics-address",
            "127.0.0.1:9000",
            "--log-format",
            "text",
            "--leader-elect=false",
            "--lease-duration",
            "1m",
            "--renew-deadline",
            "40s",
            "--retry-period",
            "500ms",
            "--lease-namespace",
            "plimsoll-system",
        ])
        .unwrap()
        .common;
        assert_eq!(args.kubeconfig, Some(PathBuf::from("/tmp/kc")));
        assert_eq!(args.context.as_deref(), Some("kind-a"));
        assert_eq!(args.log_format, LogFormat::Text);
        assert!(!args.leader_elect);
        assert_eq!(args.lease_duration, Duration::from_secs(60));
        assert_eq!(args.retry_period, Duration::from_millis(500));
        assert_eq!(args.lease_namespace_or("x"), "plimsoll-system");
    }

    #[test]
    fn addresses_parse() {
        assert_eq!(
            parse_address(":8942").unwrap(),
            "0.0.0.0:8942".parse().unwrap()
        );
        assert_eq!(
            parse_address("127.0.0.1:9").unwrap(),
            "127.0.0.1:9".parse().unwrap()
        );
        assert_eq!(
            parse_address("[::1]:80").unwrap(),
            "[::1]:80".parse().unwrap()
        );
        assert!(
            parse_address("localhost:80")
                .unwrap_err()
                .contains("\"localhost:80\"")
        );
        assert!(parse_address(":").is_err());
    }

    #[test]
    fn rate_limit_flags_parse_and_default_the_burst() {
        let parse = |extra: &[&str]| {
            PlainArgs::try_parse_from(std::iter::once("svc").chain(extra.iter().copied()))
                .map(|a| a.common)
        };
        let args = parse(&["--kube-api-qps=50", "--kube-api-burst", "100"]).unwrap();
        let limit = args.rate_limit().unwrap().unwrap();
        assert!((limit.qps - 50.0).abs() < f64::EPSILON);
        assert_eq!(limit.burst, 100);
        let args = parse(&["--kube-api-qps", "2.5"]).unwrap();
        assert_eq!(args.rate_limit().unwrap().unwrap().burst, 5);
        for bad in [
            "--kube-api-qps=-1",
            "--kube-api-qps=abc",
            "--kube-api-qps=inf",
        ] {
            let err = parse(&[bad]).unwrap_err().to_string();
            assert!(err.contains("--kube-api-qps"), "{err}");
        }
        let err = parse(&["--kube-api-qps", "-1"]).unwrap_err().to_string();
        assert!(err.contains("non-negative"), "{err}");
        let args = parse(&["--kube-api-qps=5", "--kube-api-burst=0"]).unwrap();
        let err = args.rate_limit().unwrap_err().to_string();
        assert!(err.contains("--kube-api-burst=0"), "{err}");
        assert!(parse(&["--kube-api-burst=-1"]).is_err());
        let help = PlainArgs::command().render_long_help().to_string();
        assert!(help.contains("VPA components default to 5"), "{help}");
    }

    #[test]
    fn bad_flag_values_are_rejected() {
        assert!(PlainArgs::try_parse_from(["svc", "--lease-duration", "15"]).is_err());
        assert!(PlainArgs::try_parse_from(["svc", "--log-format", "xml"]).is_err());
        assert!(PlainArgs::try_parse_from(["svc", "--metrics-address", "nope"]).is_err());
    }

    #[test]
    fn every_flag_has_an_env_var_and_help() {
        let cmd = PlainArgs::command();
        for arg in cmd.get_arguments() {
            if arg.get_id() == "help" {
                continue;
            }
            let env = arg
                .get_env()
                .expect("env var")
                .to_string_lossy()
                .to_string();
            let want = format!("PLIMSOLL_{}", arg.get_id().as_str().to_uppercase());
            assert_eq!(env, want);
            assert!(arg.get_help().is_some(), "{} has no help", arg.get_id());
        }
    }

    #[test]
    fn admin_listener_defaults_are_the_flags_defaults() {
        let args = PlainArgs::try_parse_from(["svc"]).unwrap().common;
        assert_eq!(args.admin_listener, AdminListenerArgs::default());
        let config = args.admin_listener.config();
        assert_eq!(config.max_connections, 64);
        assert_eq!(config.header_read_timeout, Duration::from_secs(10));
        assert_eq!(config.body_read_timeout, Duration::from_secs(10));
        assert_eq!(config.write_timeout, Duration::from_secs(10));
        assert_eq!(config.idle_timeout, Duration::from_secs(120));
        assert_eq!(config.max_header_bytes, 16 * 1024);
        assert_eq!(config.http2_max_concurrent_streams, None);
        let help = PlainArgs::command().render_long_help().to_string();
        assert!(
            help.contains("Admin listener (--metrics-address)"),
            "{help}"
        );
        assert!(help.contains("PLIMSOLL_METRICS_MAX_CONNECTIONS"), "{help}");
    }

    #[test]
    fn admin_listener_flags_parse() {
        let parse = |extra: &[&str]| {
            PlainArgs::try_parse_from(std::iter::once("svc").chain(extra.iter().copied()))
                .map(|a| a.common.admin_listener)
        };
        let args = parse(&[
            "--metrics-max-connections=8",
            "--metrics-header-read-timeout=2s",
            "--metrics-write-timeout=3s",
            "--metrics-idle-timeout=1m",
            "--metrics-max-header-bytes=32Ki",
        ])
        .unwrap();
        assert_eq!(args.metrics_max_connections, 8);
        assert_eq!(args.metrics_header_read_timeout, Duration::from_secs(2));
        assert_eq!(args.metrics_write_timeout, Duration::from_secs(3));
        assert_eq!(args.metrics_idle_timeout, Duration::from_secs(60));
        assert_eq!(args.metrics_max_header_bytes, 32 * 1024);
        for bad in [
            "--metrics-max-connections=0",
            "--metrics-header-read-timeout=0",
            "--metrics-idle-timeout=-1s",
            "--metrics-max-header-bytes=0",
            "--metrics-max-header-bytes=lots",
        ] {
            assert!(parse(&[bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn byte_sizes_parse() {
        assert_eq!(parse_byte_size("65536").unwrap(), 65536);
        assert_eq!(parse_byte_size("16Ki").unwrap(), 16 * 1024);
        assert_eq!(parse_byte_size("3Mi").unwrap(), 3 * 1024 * 1024);
        assert_eq!(parse_byte_size("1M").unwrap(), 1_000_000);
        for bad in ["0", "-1", "", "x", "1.5.1"] {
            let err = parse_byte_size(bad).unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
    }
}
