//! `--prometheus-*` flags and the client configuration they describe.
//!
//! A service flattens [`PrometheusArgs`] into its clap `Parser`; every flag also reads
//! `PLIMSOLL_<FLAG>`. Names follow the upstream VPA recommender where it has the flag
//! (`--prometheus-address`, `--prometheus-bearer-token`, `--prometheus-bearer-token-file`), and
//! its `--prometheus-insecure` and `--prometheus-query-timeout` are accepted as aliases; the
//! recommender also accepts upstream's `--username` / `--password`.
//!
//! Credentials: at most one bearer source (`--prometheus-bearer-token`, `-file`, `-secret`), or
//! basic auth with `--prometheus-username` and one password source (`--prometheus-password`,
//! `-file`, `-secret`); not both.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args};

use super::auth::{Auth, SecretKeyRef, SecretSource};
use super::retry::RetryPolicy;
use crate::args::parse_duration;

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
    /// Without it the system's roots are trusted.
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
            ..PrometheusConfig::new(address)
        })
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
