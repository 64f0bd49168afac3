//! Command-line flags (each also settable as `PLIMSOLL_<FLAG>`), converted to [`Config`].
//!
//! Upstream's flag names are kept with upstream's meaning: `--port` is the webhook's HTTPS port
//! (all interfaces) and `--address` the metrics listener (`HOST:PORT`; `--metrics-address`, its
//! name in every other Plimsoll service, is accepted as a synonym), `--tls-cert-file`,
//! `--tls-private-key` (alias of `--tls-key-file`), `--client-ca-file`, `--register-webhook`,
//! `--webhook-timeout-seconds`, `--status-lease-name`, `--status-lease-namespace`,
//! `--status-lease-update-interval`, `--vpa-object-namespace`, `--ignored-vpa-object-namespaces`.
//!
//! Until 0.2 `--address` was the webhook listener; a command line still written that way names
//! one port twice, and [`Config::check_ports`] refuses it with a message saying what changed.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use plimsoll_runtime::CommonArgs;
use plimsoll_runtime::args::{parse_byte_size, parse_duration, parse_timeout};
use plimsoll_runtime::listener::ListenerConfig;

use crate::certs::Lifetimes;
use crate::status::{DEFAULT_LEASE_NAME, DEFAULT_LEASE_NAMESPACE};
use crate::{Config, Registration, TlsSource};

/// The webhook's default port (`--port`), upstream's.
pub const DEFAULT_PORT: u16 = 8000;

/// vpa-admission: the TLS mutating webhook that gives new pods their VPA's recommended
/// requests and limits, and rejects invalid VerticalPodAutoscalers.
#[derive(Clone, Debug, Parser)]
#[command(name = "vpa-admission", version)]
// Upstream's `--address` is the metrics listener: the common `--metrics-address` under that
// name, the Plimsoll name kept as a synonym (and for the PLIMSOLL_METRICS_ADDRESS variable).
#[command(mut_arg("metrics_address", |a| a
    .long("address")
    .visible_alias("metrics-address")
    .default_value("0.0.0.0:8944")
    .help("Address of the admin HTTP listener that serves /metrics, /healthz and /readyz \
(upstream's --address; --metrics-address is a synonym). `:PORT` means all interfaces. Before 0.2 \
--address was the webhook listener, now --port.")))]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,

    /// HTTPS port of the webhook (path `/`), on all interfaces, as upstream's --port. The
    /// webhook Service's targetPort.
    #[arg(long, env = "PLIMSOLL_PORT", value_name = "PORT", default_value_t = DEFAULT_PORT, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,

    /// Serving certificate (PEM, chain allowed). Re-read on the next TLS handshake after the file
    /// changes, so cert-manager rotations need no restart. Required unless --self-signed.
    #[arg(
        long,
        env = "PLIMSOLL_TLS_CERT_FILE",
        value_name = "PATH",
        required_unless_present = "self_signed",
        conflicts_with = "self_signed"
    )]
    pub tls_cert_file: Option<PathBuf>,

    /// Private key of the serving certificate (PEM: PKCS#8, PKCS#1 or SEC1). Reloaded with
    /// --tls-cert-file.
    #[arg(
        long,
        alias = "tls-private-key",
        env = "PLIMSOLL_TLS_KEY_FILE",
        value_name = "PATH",
        required_unless_present = "self_signed",
        conflicts_with = "self_signed"
    )]
    pub tls_key_file: Option<PathBuf>,

    /// CA certificate (PEM) written into the webhook's caBundle by --register-webhook in the
    /// certificate-file mode. Default: the --tls-cert-file contents.
    #[arg(long, env = "PLIMSOLL_CLIENT_CA_FILE", value_name = "PATH")]
    pub client_ca_file: Option<PathBuf>,

    /// Generate a CA and a serving certificate (for the webhook Service's DNS names) and keep
    /// them in the Secret --self-signed-secret, so all replicas serve the same pair. The CA goes
    /// into the caBundle of each webhook of --webhook-config-name, which must exist (the chart
    /// and deploy/ install it) unless --register-webhook creates it.
    #[arg(long, env = "PLIMSOLL_SELF_SIGNED")]
    pub self_signed: bool,

    /// Secret (in the webhook's namespace) holding the --self-signed CA and certificate. When
    /// it exists (the chart and deploy/ install it empty) only its data is written; else it is
    /// created.
    #[arg(
        long,
        env = "PLIMSOLL_SELF_SIGNED_SECRET",
        value_name = "NAME",
        default_value = "plimsoll-vpa-admission-tls"
    )]
    pub self_signed_secret: String,

    /// Lifetime of a --self-signed serving certificate. Each replica renews it (signed by the
    /// same CA) in the last third of its life; replicas pick up the new pair without a restart.
    #[arg(long, env = "PLIMSOLL_SELF_SIGNED_VALIDITY", value_name = "DURATION", default_value = "8760h", value_parser = parse_duration)]
    pub self_signed_validity: Duration,

    /// Lifetime of the --self-signed CA; at least twice --self-signed-validity. Renewed in the
    /// last third of its life: the new CA joins the caBundle next to the old one before it signs
    /// a serving certificate.
    #[arg(long, env = "PLIMSOLL_SELF_SIGNED_CA_VALIDITY", value_name = "DURATION", default_value = "87600h", value_parser = parse_duration)]
    pub self_signed_ca_validity: Duration,

    /// How often each replica reads --self-signed-secret to renew what is due and to pick up
    /// certificates another replica renewed.
    #[arg(long, env = "PLIMSOLL_SELF_SIGNED_CHECK_INTERVAL", value_name = "DURATION", default_value = "1m", value_parser = parse_duration)]
    pub self_signed_check_interval: Duration,

    /// Create the MutatingWebhookConfiguration --webhook-config-name, or replace its webhooks,
    /// at start-up and on CA rotation (caBundle, failurePolicy Ignore, sideEffects None, the
    /// namespaceSelector of --ignored-vpa-object-namespaces or --vpa-object-namespace). For
    /// installs without the chart or deploy/, which ship the configuration themselves; an object
    /// created here is not removed by anything.
    #[arg(long, env = "PLIMSOLL_REGISTER_WEBHOOK")]
    pub register_webhook: bool,

    /// Name of the MutatingWebhookConfiguration: --self-signed patches the caBundle of each of
    /// its webhooks, --register-webhook writes it.
    #[arg(
        long,
        env = "PLIMSOLL_WEBHOOK_CONFIG_NAME",
        value_name = "NAME",
        default_value = "plimsoll-vpa-admission"
    )]
    pub webhook_config_name: String,

    /// Service through which the apiserver reaches the webhook.
    #[arg(
        long,
        env = "PLIMSOLL_WEBHOOK_SERVICE_NAME",
        value_name = "NAME",
        default_value = "plimsoll-vpa-admission"
    )]
    pub webhook_service_name: String,

    /// Namespace of that Service, which is also the home of --self-signed-secret and, by
    /// default, left out of admission. Default: $POD_NAMESPACE, else the client's namespace.
    #[arg(
        long,
        env = "PLIMSOLL_WEBHOOK_SERVICE_NAMESPACE",
        value_name = "NAMESPACE"
    )]
    pub webhook_service_namespace: Option<String>,

    /// Port of that Service.
    #[arg(
        long,
        env = "PLIMSOLL_WEBHOOK_SERVICE_PORT",
        value_name = "PORT",
        default_value_t = 443
    )]
    pub webhook_service_port: i32,

    /// Register the webhook by URL (`https://host:port/`) instead of by Service.
    #[arg(long, env = "PLIMSOLL_WEBHOOK_URL", value_name = "URL")]
    pub webhook_url: Option<String>,

    /// How long the apiserver waits for an answer before ignoring the webhook. Answers come from
    /// memory in well under a millisecond, so the wait only matters when a replica is
    /// unreachable, and then every pod creation pays it: 5, not upstream's 30.
    #[arg(long, env = "PLIMSOLL_WEBHOOK_TIMEOUT_SECONDS", value_name = "SECONDS", default_value_t = 5, value_parser = clap::value_parser!(i32).range(1..=30))]
    pub webhook_timeout_seconds: i32,

    /// Name of the status Lease renewed while healthy. Updaters (upstream's and Plimsoll's) read
    /// the Lease `vpa-admission-controller` and have no flag to name another: change it only
    /// without an updater that checks it (--use-admission-controller-status=false).
    #[arg(long, env = "PLIMSOLL_STATUS_LEASE_NAME", value_name = "NAME", default_value = DEFAULT_LEASE_NAME)]
    pub status_lease_name: String,

    /// Only mutate pods (and validate VPAs) in this namespace; it is also the registered
    /// namespaceSelector. Empty means all namespaces (but the ignored ones). Give the updater
    /// the same value.
    #[arg(long, env = "PLIMSOLL_VPA_OBJECT_NAMESPACE", value_name = "NAMESPACE")]
    pub vpa_object_namespace: Option<String>,

    /// Comma-separated namespaces whose pods and VPAs are admitted unchanged, and which the
    /// registered namespaceSelector leaves out. Default: kube-system and the webhook's own
    /// namespace (its own pods must start while no replica is up). A list replaces that default
    /// (include them to keep them out); an empty value ignores no namespace. The updater takes
    /// the same flag with the same default; give both the same value. Cannot be combined with
    /// --vpa-object-namespace.
    #[arg(
        long,
        env = "PLIMSOLL_IGNORED_VPA_OBJECT_NAMESPACES",
        value_name = "NS,NS",
        value_delimiter = ',',
        conflicts_with = "vpa_object_namespace"
    )]
    pub ignored_vpa_object_namespaces: Option<Vec<String>>,

    /// Namespace of the status Lease. Default: $NAMESPACE, else kube-system (as upstream). Give
    /// the updater's --admission-controller-status-namespace the same value.
    #[arg(
        long,
        env = "PLIMSOLL_STATUS_LEASE_NAMESPACE",
        value_name = "NAMESPACE"
    )]
    pub status_lease_namespace: Option<String>,

    /// How often the status Lease is renewed (also each renewal's timeout). Keep it well below
    /// the updater's status timeout (1 minute upstream).
    #[arg(long, env = "PLIMSOLL_STATUS_LEASE_UPDATE_INTERVAL", value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub status_lease_update_interval: Duration,

    /// The most CPU a startup boost (a VPA's `startupBoost.cpu`) may give a container's
    /// request, as a quantity (`4`, `2500m`); a larger boosted value is cut to it. Unset: no cap
    /// (upstream's --max-allowed-cpu-boost).
    #[arg(long, env = "PLIMSOLL_MAX_ALLOWED_CPU_BOOST", value_name = "QUANTITY", value_parser = parse_cpu_cap)]
    pub max_allowed_cpu_boost: Option<plimsoll_core::quantity::Quantity>,

    /// Limits of the webhook listener (--port).
    #[command(flatten, next_help_heading = "Webhook listener (--port)")]
    pub listener: WebhookListenerArgs,
}

/// A CPU quantity above 0.
fn parse_cpu_cap(text: &str) -> Result<plimsoll_core::quantity::Quantity, String> {
    match plimsoll_core::quantity::Quantity::parse(text) {
        Ok(q) if q.milli() > 0 => Ok(q),
        Ok(_) => Err(format!("must be above 0, got {text:?}")),
        Err(e) => Err(e.to_string()),
    }
}

/// Limits of the webhook listener. Any pod in the cluster that can reach the webhook's port can
/// connect to it, and with `failurePolicy: Ignore` a webhook that slow clients have exhausted
/// admits pods without recommendations; the API server itself sends small requests, at once,
/// over few kept-alive connections (usually one HTTP/2 connection per API server).
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct WebhookListenerArgs {
    /// Connections kept open at once. Past it, a new connection closes one with no request in
    /// flight: the oldest that sent none yet (a stalled client; the API server sends its review at
    /// once), else the one idle longest. When every one has a request in flight, new connections
    /// wait in the kernel's accept queue.
    #[arg(long, env = "PLIMSOLL_MAX_CONNECTIONS", value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,

    /// A new connection must finish its TLS handshake and send its first request's headers
    /// within this; a kept-alive one, the rest of a request's headers within this of their
    /// first byte. Slower clients are closed.
    #[arg(long, env = "PLIMSOLL_HEADER_READ_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = parse_timeout)]
    pub header_read_timeout: Duration,

    /// A request body must arrive within this of its headers; a slower one is answered 400 and
    /// its connection closed. The API server gives up after --webhook-timeout-seconds anyway.
    #[arg(long, env = "PLIMSOLL_BODY_READ_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = parse_timeout)]
    pub body_read_timeout: Duration,

    /// A response must be written within this of the answer; a client that does not read it is
    /// closed.
    #[arg(long, env = "PLIMSOLL_WRITE_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = parse_timeout)]
    pub write_timeout: Duration,

    /// A kept-alive connection with no request for this long is closed (HTTP/2: GOAWAY). Above
    /// the API server's 90 s idle-connection timeout, so the API server closes first and never
    /// sends a review on a connection being closed.
    #[arg(long, env = "PLIMSOLL_IDLE_TIMEOUT", value_name = "DURATION", default_value = "2m", value_parser = parse_timeout)]
    pub idle_timeout: Duration,

    /// Largest request headers accepted (bytes, or a quantity such as `16Ki`): the HTTP/1.1
    /// header buffer (at least 8 KiB) and HTTP/2's SETTINGS_MAX_HEADER_LIST_SIZE.
    #[arg(long, env = "PLIMSOLL_MAX_HEADER_BYTES", value_name = "BYTES", default_value = "16Ki", value_parser = parse_byte_size)]
    pub max_header_bytes: usize,

    /// Largest AdmissionReview accepted; larger get 413 (and the API server's failurePolicy,
    /// Ignore). 3 MiB holds every review of a pod: the API server refuses larger request bodies.
    #[arg(long, env = "PLIMSOLL_MAX_REQUEST_BODY_BYTES", value_name = "BYTES", default_value = "3Mi", value_parser = parse_byte_size)]
    pub max_request_body_bytes: usize,

    /// Request bodies being received at once, summed over all connections; a request that would
    /// pass it fails (400) at once. Bounds the memory slow or large uploads can take whatever
    /// the number of connections (--max-connections × --max-request-body-bytes would be 1.5 GiB).
    #[arg(long, env = "PLIMSOLL_MAX_INFLIGHT_BODY_BYTES", value_name = "BYTES", default_value = "64Mi", value_parser = parse_byte_size)]
    pub max_inflight_body_bytes: usize,

    /// Concurrent streams (reviews) per HTTP/2 connection; the API server opens another
    /// connection past it.
    #[arg(long, env = "PLIMSOLL_HTTP2_MAX_CONCURRENT_STREAMS", value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub http2_max_concurrent_streams: u32,
}

impl Default for WebhookListenerArgs {
    /// The flags' defaults (a test checks they agree).
    fn default() -> Self {
        Self {
            max_connections: 512,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            max_header_bytes: 16 * 1024,
            max_request_body_bytes: crate::webhook::MAX_BODY_BYTES,
            max_inflight_body_bytes: 64 * 1024 * 1024,
            http2_max_concurrent_streams: 100,
        }
    }
}

impl WebhookListenerArgs {
    /// The listener configuration these flags describe (HTTP/2 and HTTP/1.1, by ALPN).
    pub fn config(&self) -> ListenerConfig {
        ListenerConfig {
            max_connections: usize::try_from(self.max_connections).unwrap_or(usize::MAX),
            header_read_timeout: self.header_read_timeout,
            body_read_timeout: self.body_read_timeout,
            write_timeout: self.write_timeout,
            idle_timeout: self.idle_timeout,
            max_header_bytes: self.max_header_bytes,
            max_request_body_bytes: self.max_request_body_bytes,
            max_inflight_body_bytes: self.max_inflight_body_bytes,
            http2_max_concurrent_streams: Some(self.http2_max_concurrent_streams),
        }
    }
}

impl Args {
    /// Parses a command line (first item: the program name); for tests that start the service
    /// in-process.
    pub fn parse_from_args<I, T>(args: I) -> Result<Args, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        Args::try_parse_from(args)
    }

    /// The service configuration (reads `$POD_NAMESPACE` and `$NAMESPACE` for the defaults).
    /// The certificate lifetimes are checked when the service starts ([`Lifetimes::check`]).
    pub fn into_config(self) -> Config {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let tls = match (self.tls_cert_file, self.tls_key_file) {
            (Some(cert), Some(key)) if !self.self_signed => TlsSource::Files {
                cert,
                key,
                ca: self.client_ca_file,
            },
            _ => TlsSource::SelfSigned {
                secret: self.self_signed_secret,
                lifetimes: Lifetimes {
                    serving: self.self_signed_validity,
                    ca: self.self_signed_ca_validity,
                },
                check_interval: self.self_signed_check_interval,
            },
        };
        Config {
            common: self.common,
            address: SocketAddr::from((Ipv4Addr::UNSPECIFIED, self.port)),
            tls,
            namespace: self
                .webhook_service_namespace
                .or_else(|| env("POD_NAMESPACE")),
            ca_bundle_config: (self.self_signed && !self.register_webhook)
                .then(|| self.webhook_config_name.clone()),
            registration: self.register_webhook.then(|| Registration {
                config_name: self.webhook_config_name,
                service_name: self.webhook_service_name.clone(),
                service_port: self.webhook_service_port,
                url: self.webhook_url.clone(),
                timeout_seconds: self.webhook_timeout_seconds,
            }),
            service_name: self.webhook_service_name,
            url: self.webhook_url,
            vpa_object_namespace: self.vpa_object_namespace,
            ignored_vpa_object_namespaces: self.ignored_vpa_object_namespaces,
            status_lease_name: self.status_lease_name,
            status_lease_namespace: self
                .status_lease_namespace
                .or_else(|| env("NAMESPACE"))
                .unwrap_or_else(|| DEFAULT_LEASE_NAMESPACE.to_owned()),
            status_lease_interval: self.status_lease_update_interval,
            identity: plimsoll_runtime::leader::identity(),
            listener: self.listener.config(),
            max_allowed_cpu_boost: self.max_allowed_cpu_boost,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_allowed_cpu_boost_is_a_positive_quantity() {
        let config = Args::try_parse_from([
            "vpa-admission",
            "--self-signed",
            "--max-allowed-cpu-boost=2500m",
        ])
        .unwrap()
        .into_config();
        assert_eq!(config.max_allowed_cpu_boost.map(|q| q.milli()), Some(2500));
        for bad in ["0", "-1", "lots"] {
            let flag = format!("--max-allowed-cpu-boost={bad}");
            assert!(Args::try_parse_from(["vpa-admission", "--self-signed", &flag]).is_err());
        }
    }

    #[test]
    fn cert_files_or_self_signed_is_required() {
        assert!(Args::try_parse_from(["vpa-admission"]).is_err());
        assert!(
            Args::try_parse_from(["vpa-admission", "--self-signed", "--tls-cert-file=/a"]).is_err()
        );
        let a = Args::try_parse_from([
            "vpa-admission",
            "--tls-cert-file=/c",
            "--tls-private-key=/k",
        ])
        .unwrap();
        assert_eq!(a.port, 8000);
        assert_eq!(a.common.metrics_address, "0.0.0.0:8944".parse().unwrap());
        assert_eq!(a.webhook_timeout_seconds, 5);
        assert_eq!(a.status_lease_update_interval, Duration::from_secs(10));
        let c = a.into_config();
        assert_eq!(c.address, "0.0.0.0:8000".parse().unwrap());
        c.check_ports().unwrap();
        assert!(matches!(c.tls, TlsSource::Files { .. }));
        assert!(c.registration.is_none());
        assert_eq!(c.status_lease_name, "vpa-admission-controller");
        assert_eq!(c.listener, WebhookListenerArgs::default().config());
        assert_eq!(
            c.listener,
            ListenerConfig {
                max_connections: 512,
                header_read_timeout: Duration::from_secs(10),
                body_read_timeout: Duration::from_secs(10),
                write_timeout: Duration::from_secs(10),
                idle_timeout: Duration::from_secs(120),
                max_header_bytes: 16 * 1024,
                max_request_body_bytes: crate::webhook::MAX_BODY_BYTES,
                max_inflight_body_bytes: 64 * 1024 * 1024,
                http2_max_concurrent_streams: Some(100),
            }
        );
    }

    #[test]
    fn port_and_address_have_upstreams_meaning() {
        let parse = |extra: &[&str]| {
            let mut args = vec!["vpa-admission", "--self-signed"];
            args.extend_from_slice(extra);
            Args::try_parse_from(args).map(Args::into_config)
        };
        // Upstream's command line: --port is the webhook, --address the metrics listener.
        let c = parse(&["--port=9443", "--address=127.0.0.1:8945"]).unwrap();
        assert_eq!(c.address, "0.0.0.0:9443".parse().unwrap());
        assert_eq!(c.common.metrics_address, "127.0.0.1:8945".parse().unwrap());
        c.check_ports().unwrap();
        // --metrics-address, as in every other Plimsoll service, is the same flag.
        let c = parse(&["--metrics-address=:9000"]).unwrap();
        assert_eq!(c.common.metrics_address, "0.0.0.0:9000".parse().unwrap());
        assert!(parse(&["--address=:9000", "--metrics-address=:9001"]).is_err());
        assert!(parse(&["--port=0"]).is_err());
        assert!(parse(&["--port=0.0.0.0:8000"]).is_err());
        // A pre-0.2 command line (--address was the webhook) names port 8000 twice: refused,
        // and the message says what changed.
        let old = parse(&["--address=0.0.0.0:8000"]).unwrap();
        let message = old.check_ports().unwrap_err().to_string();
        assert!(
            message.contains("--address is the metrics listener") && message.contains("--port"),
            "{message}"
        );
        let help = <Args as clap::CommandFactory>::command()
            .render_long_help()
            .to_string();
        assert!(help.contains("--port <PORT>"), "{help}");
        assert!(help.contains("--address <HOST:PORT>"), "{help}");
        assert!(help.contains("metrics-address"), "{help}");
        // The updater has no flag for the status Lease's name.
        assert!(!help.contains("status-lease-name`"), "{help}");
        assert!(
            !help.contains("--admission-controller-status-lease"),
            "{help}"
        );
    }

    #[test]
    fn self_signed_patches_the_installed_configuration_unless_it_registers() {
        let config = |flags: &[&str]| {
            let mut args = vec!["vpa-admission"];
            args.extend_from_slice(flags);
            Args::try_parse_from(args).unwrap().into_config()
        };
        let c = config(&["--self-signed"]);
        assert_eq!(
            c.ca_bundle_config.as_deref(),
            Some("plimsoll-vpa-admission")
        );
        assert!(c.registration.is_none(), "never creates the configuration");
        assert!(
            matches!(&c.tls, TlsSource::SelfSigned { secret, .. } if secret == "plimsoll-vpa-admission-tls")
        );
        let c = config(&["--self-signed", "--register-webhook"]);
        assert_eq!(c.ca_bundle_config, None);
        assert!(c.registration.is_some());
        // Certificate files: cert-manager's CA injector (or the operator) owns caBundle.
        let c = config(&["--tls-cert-file=/c", "--tls-key-file=/k"]);
        assert_eq!(c.ca_bundle_config, None);
    }

    #[test]
    fn listener_flags_parse() {
        let parse = |extra: &[&str]| {
            let mut args = vec!["vpa-admission", "--self-signed"];
            args.extend_from_slice(extra);
            Args::try_parse_from(args).map(|a| a.listener.config())
        };
        let c = parse(&[
            "--max-connections=10",
            "--header-read-timeout=2s",
            "--body-read-timeout=3s",
            "--write-timeout=4s",
            "--idle-timeout=5m",
            "--max-header-bytes=32Ki",
            "--max-request-body-bytes=8Mi",
            "--max-inflight-body-bytes=1Gi",
            "--http2-max-concurrent-streams=7",
        ])
        .unwrap();
        assert_eq!(c.max_connections, 10);
        assert_eq!(c.header_read_timeout, Duration::from_secs(2));
        assert_eq!(c.body_read_timeout, Duration::from_secs(3));
        assert_eq!(c.write_timeout, Duration::from_secs(4));
        assert_eq!(c.idle_timeout, Duration::from_secs(300));
        assert_eq!(c.max_header_bytes, 32 * 1024);
        assert_eq!(c.max_request_body_bytes, 8 * 1024 * 1024);
        assert_eq!(c.max_inflight_body_bytes, 1024 * 1024 * 1024);
        assert_eq!(c.http2_max_concurrent_streams, Some(7));
        for bad in [
            "--max-connections=0",
            "--header-read-timeout=0s",
            "--body-read-timeout=soon",
            "--max-request-body-bytes=0",
            "--http2-max-concurrent-streams=0",
        ] {
            assert!(parse(&[bad]).is_err(), "{bad}");
        }
        // The admin listener has its own flags.
        let a = Args::try_parse_from([
            "vpa-admission",
            "--self-signed",
            "--metrics-max-connections=3",
        ])
        .unwrap();
        assert_eq!(a.common.admin_listener.config().max_connections, 3);
        assert_eq!(a.listener.config().max_connections, 512);
    }

    #[test]
    fn the_scope_defaults_to_all_but_kube_system_and_the_own_namespace() {
        let config = |flags: &[&str]| {
            let mut args = vec!["vpa-admission", "--self-signed"];
            args.extend_from_slice(flags);
            Args::try_parse_from(args).map(Args::into_config)
        };
        let default = config(&[]).unwrap().scope("plimsoll-system");
        assert_eq!(default.ignored(), ["kube-system", "plimsoll-system"]);
        let listed = config(&["--ignored-vpa-object-namespaces=a,b"]).unwrap();
        assert_eq!(listed.scope("plimsoll-system").ignored(), ["a", "b"]);
        let only = config(&["--vpa-object-namespace=shop"]).unwrap();
        assert_eq!(only.scope("plimsoll-system").only(), Some("shop"));
        assert!(
            config(&[
                "--vpa-object-namespace=shop",
                "--ignored-vpa-object-namespaces=a"
            ])
            .is_err()
        );
    }

    #[test]
    fn self_signed_lifetimes() {
        let parse = |extra: &[&str]| {
            let mut args = vec!["vpa-admission", "--self-signed"];
            args.extend_from_slice(extra);
            match Args::try_parse_from(args).unwrap().into_config().tls {
                TlsSource::SelfSigned {
                    lifetimes,
                    check_interval,
                    ..
                } => lifetimes
                    .check(check_interval)
                    .map(|()| (lifetimes, check_interval)),
                TlsSource::Files { .. } => panic!("not self-signed"),
            }
        };
        let (lifetimes, check_interval) = parse(&[]).unwrap();
        assert_eq!(lifetimes, Lifetimes::default());
        assert_eq!(lifetimes.serving, Duration::from_secs(365 * 24 * 3600));
        assert_eq!(check_interval, Duration::from_secs(60));
        let (lifetimes, _) =
            parse(&["--self-signed-validity=3s", "--self-signed-ca-validity=6s"]).unwrap();
        assert_eq!(lifetimes.serving, Duration::from_secs(3));
        assert!(parse(&["--self-signed-ca-validity=8000h"]).is_err());
        assert!(parse(&["--self-signed-check-interval=0"]).is_err());
    }

    #[test]
    fn deployment_args_parse() {
        let text = include_str!("../../../deploy/vpa-admission/deployment.yaml");
        let args: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter_map(|l| l.strip_prefix("- --"))
            .collect();
        assert!(!args.is_empty());
        let command_line = std::iter::once("vpa-admission".to_owned())
            .chain(args.iter().map(|a| format!("--{a}")));
        Args::try_parse_from(command_line).unwrap();
    }
}
