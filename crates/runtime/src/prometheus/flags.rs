//! `--prometheus-*` flags and the client configuration they describe.
//!
//! A service flattens [`PrometheusArgs`] into its clap `Parser`; every flag also reads
//! `PLIMSOLL_<FLAG>`. Names follow the upstream VPA recommender where it has the flag
//! (`--prometheus-address`, `--prometheus-bearer-token`, `--prometheus-bearer-token-file`), and
//! its `--prometheus-insecure` and `--prometheus-query-timeout` are accepted as aliases; the
//! recommender also accepts upstream's `--username` / `--password`.
//!
//! Limits: `--prometheus-allowed-servers` (the URL prefixes a query may go to; the
//! `--prometheus-address` is always one) and `--prometheus-max-response-bytes` (the most bytes
//! of one answer read; [`DEFAULT_MAX_RESPONSE_BYTES`] says how its default is sized).
//!
//! Credentials: at most one bearer source (`--prometheus-bearer-token`, `-file`, `-secret`), or
//! basic auth with `--prometheus-username` and one password source (`--prometheus-password`,
//! `-file`, `-secret`); not both.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args};

use super::allow::{AllowedServers, parse_allowed_server};
use super::auth::{Auth, SecretKeyRef, SecretSource};
use super::retry::RetryPolicy;
use crate::args::parse_duration;

/// Default of `--prometheus-max-response-bytes`: 4 MiB, sized from the largest answer an
/// autoscaler legitimately asks for. The longest range query is `spec.predictive`'s seeding:
/// `lookbackDays` is at most 30 (the CRD's bound), which with a `168h` season keeps 4 + 1
/// seasons = 840 h = 3,360 buckets of 15 minutes (a `24h` season keeps 31 days = 2,976;
/// `minReplicasTuning` reads 30 × 24 = 720 hourly peaks). One sample is at most about 48 bytes
/// of JSON (`[1700000000.123,"<up to 24 characters>"],`), so one series is 3,360 × 48 ≈
/// 158 KiB with its labels; 16 series of margin (a query that is not aggregated to one) make
/// about 2.5 MiB, rounded up to 4 MiB. An instant query's answer is one sample per series. The
/// recommender reads a whole cluster's history in one answer and sets its own default.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 4 * 1024 * 1024;

/// Where the Prometheus server is and how to reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrometheusConfig {
    /// Base URL, `http(s)://host[:port][/path]`.
    pub address: String,
    /// PEM bundle of the CAs that may sign the server's certificate (else the system's roots).
    pub ca_file: Option<PathBuf>,
    /// Accept any server certificate (the handshake is still signed). For tests only.
    pub insecure_skip_verify: bool,
    /// Credentials.
    pub auth: Auth,
    /// Budget of one query, retries and backoff included. Default 30 s.
    pub timeout: Duration,
    /// Attempts and backoff.
    pub retry: RetryPolicy,
    /// How long a credential read from a Secret is used before it is read again (a 401 re-reads
    /// it at once). Default 1 m.
    pub secret_refresh: Duration,
    /// The most bytes of one answer that are read; a larger one fails as too large. Default
    /// [`DEFAULT_MAX_RESPONSE_BYTES`].
    pub max_response_bytes: u64,
}

impl PrometheusConfig {
    /// A plain configuration for `address`: no CA file, no credentials, the default timeout,
    /// retries and Secret refresh.
    pub fn new(address: impl Into<String>) -> Self {
        Self {
            address: address.into(),
            ca_file: None,
            insecure_skip_verify: false,
            auth: Auth::None,
            timeout: Duration::from_secs(30),
            retry: RetryPolicy::default(),
            secret_refresh: Duration::from_secs(60),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

/// The `--prometheus-*` flags; flatten with `#[command(flatten)]`. clap refuses two sources of
/// one credential, a bearer token with basic auth, and a user name without a password (or the
/// other way round).
#[derive(Clone, Debug, Args)]
#[command(group(
    ArgGroup::new("prometheus_bearer_source")
        .args(["prometheus_bearer_token", "prometheus_bearer_token_file", "prometheus_bearer_token_secret"])
        .multiple(false)
        .conflicts_with("prometheus_username")
))]
#[command(group(
    ArgGroup::new("prometheus_password_source")
        .args(["prometheus_password", "prometheus_password_file", "prometheus_password_secret"])
        .multiple(false)
        .requires("prometheus_username")
))]
pub struct PrometheusArgs {
    /// Base URL of the Prometheus server, `http(s)://host[:port][/path]`. Without it nothing is
    /// read from Prometheus.
    #[arg(long, env = "PLIMSOLL_PROMETHEUS_ADDRESS", value_name = "URL")]
    pub prometheus_address: Option<String>,

    /// PEM file of the CA certificates that sign the server's certificate (https addresses).
    /// Without it the system's roots are trusted; Plimsoll's images have none, so there an
    /// https address needs this flag (the service refuses to start without either).
    #[arg(long, env = "PLIMSOLL_PROMETHEUS_CA_FILE", value_name = "PATH")]
    pub prometheus_ca_file: Option<PathBuf>,

    /// Accept any server certificate. For tests; never in production.
    #[arg(
        long,
        env = "PLIMSOLL_PROMETHEUS_INSECURE_SKIP_VERIFY",
        alias = "prometheus-insecure"
    )]
    pub prometheus_insecure_skip_verify: bool,

    /// Bearer token, literally (visible in the pod spec: prefer the -file or -secret flag).
    #[arg(long, env = "PLIMSOLL_PROMETHEUS_BEARER_TOKEN", value_name = "TOKEN")]
    pub prometheus_bearer_token: Option<String>,

    /// File holding the bearer token, read before every request (a projected token rotates).
    #[arg(
        long,
        env = "PLIMSOLL_PROMETHEUS_BEARER_TOKEN_FILE",
        value_name = "PATH"
    )]
    pub prometheus_bearer_token_file: Option<PathBuf>,

    /// Secret key holding the bearer token, `NAMESPACE/NAME[:KEY]` (key `token` by default);
    /// needs `get` on that Secret.
    #[arg(
        long,
        env = "PLIMSOLL_PROMETHEUS_BEARER_TOKEN_SECRET",
        value_name = "NS/NAME[:KEY]",
        value_parser = |s: &str| SecretKeyRef::parse(s, "token")
    )]
    pub prometheus_bearer_token_secret: Option<SecretKeyRef>,

    /// User name for basic auth (with one of the password flags).
    #[arg(
        long,
        env = "PLIMSOLL_PROMETHEUS_USERNAME",
        value_name = "USER",
        requires = "prometheus_password_source"
    )]
    pub prometheus_username: Option<String>,

    /// Basic-auth password, literally (prefer the -file or -secret flag).
    #[arg(long, env = "PLIMSOLL_PROMETHEUS_PASSWORD", value_name = "PASSWORD")]
    pub prometheus_password: Option<String>,

    /// File holding the basic-auth password, read before every request.
    #[arg(long, env = "PLIMSOLL_PROMETHEUS_PASSWORD_FILE", value_name = "PATH")]
    pub prometheus_password_file: Option<PathBuf>,

    /// Secret key holding the basic-auth password, `NAMESPACE/NAME[:KEY]` (key `password` by
    /// default); needs `get` on that Secret.
    #[arg(
        long,
        env = "PLIMSOLL_PROMETHEUS_PASSWORD_SECRET",
        value_name = "NS/NAME[:KEY]",
        value_parser = |s: &str| SecretKeyRef::parse(s, "password")
    )]
    pub prometheus_password_secret: Option<SecretKeyRef>,

    /// Budget of one query, retries and backoff included.
    #[arg(
        long,
        env = "PLIMSOLL_PROMETHEUS_TIMEOUT",
        alias = "prometheus-query-timeout",
        value_name = "DURATION",
        default_value = "30s",
        value_parser = parse_duration
    )]
    pub prometheus_timeout: Duration,

    /// Attempts per query (connection errors, 5xx and 429 are retried with backoff).
    #[arg(
        long,
        env = "PLIMSOLL_PROMETHEUS_ATTEMPTS",
        value_name = "N",
        default_value_t = 3
    )]
    pub prometheus_attempts: u32,

    /// How long a credential read from a Secret is used before it is read again; a 401 or 403
    /// re-reads it at once.
    #[arg(
        long,
        env = "PLIMSOLL_PROMETHEUS_SECRET_REFRESH",
        value_name = "DURATION",
        default_value = "1m",
        value_parser = parse_duration
    )]
    pub prometheus_secret_refresh: Duration,

    /// URL prefixes, comma-separated, of the other Prometheus servers an autoscaler may name
    /// (`prometheus.serverAddress`, the native `prometheus-server` annotation); the
    /// --prometheus-address is always allowed, and without this flag it is the only one. A
    /// metric naming any other server fails with PrometheusServerNotAllowed and no request is
    /// sent. Prefixes match on the parsed URL: the same scheme, host and port (80/443 when not
    /// written), then whole path segments, so `http://prom.team-a:9090` allows
    /// `http://prom.team-a:9090/x` but not `http://prom.team-a.evil.com`, and
    /// `http://prom:9090/a` does not allow `http://prom:9090/ab`. Other servers never get the
    /// credentials.
    #[arg(
        long,
        env = "PLIMSOLL_PROMETHEUS_ALLOWED_SERVERS",
        value_name = "URL,...",
        value_delimiter = ',',
        value_parser = parse_allowed_server
    )]
    pub prometheus_allowed_servers: Vec<String>,

    /// The most bytes of one answer that are read: a larger one (by its Content-Length, or
    /// as it arrives) fails the query as too large before it is parsed, so one query holds at
    /// most this much. The default, 4 MiB, fits the longest range query an autoscaler makes:
    /// 30 days (the largest lookbackDays) of a 168h season keep 3,360 buckets of 15 minutes, at
    /// about 48 bytes of JSON each about 158 KiB per series, with room for 16 series.
    #[arg(
        long,
        env = "PLIMSOLL_PROMETHEUS_MAX_RESPONSE_BYTES",
        value_name = "BYTES",
        default_value_t = DEFAULT_MAX_RESPONSE_BYTES,
        value_parser = clap::value_parser!(u64).range(1024..)
    )]
    pub prometheus_max_response_bytes: u64,
}

impl PrometheusArgs {
    /// The client configuration, or `None` without `--prometheus-address`.
    pub fn config(&self) -> Option<PrometheusConfig> {
        let address = self.prometheus_address.clone().filter(|a| !a.is_empty())?;
        let bearer = source(
            self.prometheus_bearer_token.as_ref(),
            self.prometheus_bearer_token_file.as_ref(),
            self.prometheus_bearer_token_secret.as_ref(),
        );
        let password = source(
            self.prometheus_password.as_ref(),
            self.prometheus_password_file.as_ref(),
            self.prometheus_password_secret.as_ref(),
        );
        // clap already refused the other combinations.
        let auth = match (bearer, &self.prometheus_username, password) {
            (Some(token), _, _) => Auth::Bearer(token),
            (None, Some(username), Some(password)) => Auth::Basic {
                username: username.clone(),
                password,
            },
            _ => Auth::None,
        };
        Some(PrometheusConfig {
            ca_file: self.prometheus_ca_file.clone(),
            insecure_skip_verify: self.prometheus_insecure_skip_verify,
            auth,
            timeout: self.prometheus_timeout,
            retry: RetryPolicy {
                attempts: self.prometheus_attempts.max(1),
                ..RetryPolicy::default()
            },
            secret_refresh: self.prometheus_secret_refresh,
            max_response_bytes: self.prometheus_max_response_bytes,
            ..PrometheusConfig::new(address)
        })
    }

    /// What a server other than --prometheus-address is queried with: the same TLS trust,
    /// timeout, retries and size cap, no credentials, and the address left empty (the caller
    /// sets it per server).
    pub fn anonymous(&self) -> PrometheusConfig {
        PrometheusConfig {
            ca_file: self.prometheus_ca_file.clone(),
            insecure_skip_verify: self.prometheus_insecure_skip_verify,
            timeout: self.prometheus_timeout,
            retry: RetryPolicy {
                attempts: self.prometheus_attempts.max(1),
                ..RetryPolicy::default()
            },
            max_response_bytes: self.prometheus_max_response_bytes,
            ..PrometheusConfig::new("")
        }
    }

    /// The servers queries may go to: --prometheus-address and --prometheus-allowed-servers.
    pub fn allowed_servers(&self) -> AllowedServers {
        AllowedServers::new(
            self.prometheus_address
                .iter()
                .filter(|a| !a.is_empty())
                .chain(&self.prometheus_allowed_servers),
        )
    }
}

/// The one source given (clap allows at most one).
fn source(
    literal: Option<&String>,
    file: Option<&PathBuf>,
    secret: Option<&SecretKeyRef>,
) -> Option<SecretSource> {
    literal
        .map(|v| SecretSource::Literal(v.clone()))
        .or_else(|| file.map(|p| SecretSource::File(p.clone())))
        .or_else(|| secret.map(|r| SecretSource::Secret(r.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        prometheus: PrometheusArgs,
    }

    fn parse(flags: &[&str]) -> Result<PrometheusArgs, clap::Error> {
        Flags::try_parse_from(std::iter::once("svc").chain(flags.iter().copied()))
            .map(|f| f.prometheus)
    }

    fn config(flags: &[&str]) -> Option<PrometheusConfig> {
        parse(flags).unwrap().config()
    }

    #[test]
    fn no_address_no_client() {
        assert_eq!(config(&[]), None);
    }

    #[test]
    fn defaults_and_a_secret_token() {
        let c = config(&[
            "--prometheus-address",
            "https://prom:9090",
            "--prometheus-ca-file",
            "/etc/prom/ca.crt",
            "--prometheus-bearer-token-secret",
            "monitoring/prom-reader",
        ])
        .unwrap();
        assert_eq!(c.timeout, Duration::from_secs(30));
        assert_eq!(c.retry.attempts, 3);
        assert_eq!(c.max_response_bytes, 4 * 1024 * 1024);
        assert_eq!(c.ca_file, Some(PathBuf::from("/etc/prom/ca.crt")));
        assert_eq!(
            c.auth,
            Auth::Bearer(SecretSource::Secret(SecretKeyRef {
                namespace: "monitoring".into(),
                name: "prom-reader".into(),
                key: "token".into()
            }))
        );
    }

    #[test]
    fn upstream_aliases_and_basic_auth() {
        let c = config(&[
            "--prometheus-address",
            "http://prom",
            "--prometheus-insecure",
            "--prometheus-query-timeout",
            "5m",
            "--prometheus-username",
            "reader",
            "--prometheus-password-file",
            "/run/pw",
        ])
        .unwrap();
        assert!(c.insecure_skip_verify);
        assert_eq!(c.timeout, Duration::from_secs(300));
        assert_eq!(
            c.auth,
            Auth::Basic {
                username: "reader".into(),
                password: SecretSource::File("/run/pw".into())
            }
        );
    }

    #[test]
    fn only_the_address_is_allowed_by_default() {
        let args = parse(&["--prometheus-address", "http://prom.monitoring:9090"]).unwrap();
        let allowed = args.allowed_servers();
        assert!(allowed.allows("http://prom.monitoring:9090"));
        assert!(allowed.allows("http://prom.monitoring:9090/sub"));
        assert!(!allowed.allows("http://prom.team-a:9090"));
        assert!(parse(&[]).unwrap().allowed_servers().is_empty());
    }

    #[test]
    fn allowed_servers_and_the_size_cap_from_flags() {
        let args = parse(&[
            "--prometheus-address",
            "https://prom:9090",
            "--prometheus-allowed-servers",
            "http://prom.team-a:9090,http://thanos:10902/team-b",
            "--prometheus-max-response-bytes",
            "65536",
            "--prometheus-timeout",
            "7s",
            "--prometheus-bearer-token",
            "t",
        ])
        .unwrap();
        let allowed = args.allowed_servers();
        assert!(allowed.allows("https://prom:9090"));
        assert!(allowed.allows("http://prom.team-a:9090"));
        assert!(allowed.allows("http://thanos:10902/team-b/x"));
        assert!(!allowed.allows("http://thanos:10902/team-c"));
        assert_eq!(args.config().unwrap().max_response_bytes, 65536);
        let other = args.anonymous();
        assert_eq!(other.auth, Auth::None);
        assert_eq!(other.timeout, Duration::from_secs(7));
        assert_eq!(other.max_response_bytes, 65536);
        for bad in [
            &["--prometheus-allowed-servers", "prom:9090"][..],
            &["--prometheus-allowed-servers", "http://u@prom"],
            &["--prometheus-max-response-bytes", "10"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn conflicting_credentials_are_refused() {
        for flags in [
            &[
                "--prometheus-bearer-token",
                "t",
                "--prometheus-bearer-token-file",
                "/f",
            ][..],
            &[
                "--prometheus-bearer-token",
                "t",
                "--prometheus-username",
                "u",
                "--prometheus-password",
                "p",
            ],
            &["--prometheus-username", "u"],
            &["--prometheus-password", "p"],
            &["--prometheus-bearer-token-secret", "no-namespace"],
        ] {
            let mut all = vec!["--prometheus-address", "http://prom"];
            all.extend_from_slice(flags);
            assert!(parse(&all).is_err(), "{flags:?}");
        }
    }
}
