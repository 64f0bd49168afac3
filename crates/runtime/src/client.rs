//! Building the Kubernetes client, and the process-wide TLS crypto provider.
//!
//! Resolution order: `--kubeconfig PATH` (with `--context` if given); else `--context` alone
//! against the default kubeconfig (`$KUBECONFIG`, `~/.kube/config`); else kube's inference
//! (`$KUBECONFIG`/`~/.kube/config`, then the in-cluster service account).
//!
//! Every client carries the client-side rate limit of `--kube-api-qps` / `--kube-api-burst`
//! ([`crate::rate_limit`]) as the outermost layer of its service stack.

use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::args::CommonArgs;
use crate::error::{Error, Result};
use crate::rate_limit::{ClientMetrics, RateLimitLayer};

/// Installs rustls' `ring` crypto provider as the process default. Idempotent: call it first
/// thing in every `main` (and in tests that use TLS); later calls are no-ops.
pub fn install_crypto_provider() {
    // Err means a provider is already installed, which is exactly what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The kube client configuration selected by the common flags.
pub async fn config(args: &CommonArgs) -> Result<Config> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config_error = |message: String, source: Box<dyn std::error::Error + Send + Sync>| {
        Error::Config { message, source }
    };
    if let Some(path) = &args.kubeconfig {
        let what = format!("kubeconfig {}", path.display());
        let kubeconfig =
            Kubeconfig::read_from(path).map_err(|e| config_error(what.clone(), Box::new(e)))?;
        return Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| config_error(what, Box::new(e)));
    }
    if let Some(context) = &args.context {
        return Config::from_kubeconfig(&options)
            .await
            .map_err(|e| config_error(format!("kubeconfig context {context}"), Box::new(e)));
    }
    Config::infer()
        .await
        .map_err(|e| config_error("kubeconfig or in-cluster config".into(), Box::new(e)))
}

/// A kube client as selected by the common flags (installs the crypto provider first), with
/// the client-side rate limit of `--kube-api-qps` / `--kube-api-burst`.
pub async fn client(args: &CommonArgs) -> Result<Client> {
    client_counted(args, None, &ClientMetrics::default()).await
}

/// [`client`] whose requests carry `User-Agent: <binary>/<version> (<identity>)`, so that audit
/// logs tell replicas apart.
pub async fn client_with_user_agent(
    args: &CommonArgs,
    binary: &str,
    identity: &str,
) -> Result<Client> {
    client_counted(args, Some((binary, identity)), &ClientMetrics::default()).await
}

/// [`client`] (with the User-Agent of [`client_with_user_agent`] when `user_agent` is
/// `(binary, identity)`) counting its requests and rate-limit waits into `metrics`.
pub async fn client_counted(
    args: &CommonArgs,
    user_agent: Option<(&str, &str)>,
    metrics: &ClientMetrics,
) -> Result<Client> {
    install_crypto_provider();
    let mut config = config(args).await?;
    if let Some((binary, identity)) = user_agent {
        let agent = user_agent_of(binary, identity);
        let value = http::HeaderValue::from_str(&agent).map_err(|e| Error::Config {
            message: format!("User-Agent {agent:?}"),
            source: Box::new(e),
        })?;
        config.headers.push((http::header::USER_AGENT, value));
    }
    from_config(config, args, metrics)
}

/// `<binary>/<version> (<identity>)`: the User-Agent of [`client_with_user_agent`].
fn user_agent_of(binary: &str, identity: &str) -> String {
    format!("{binary}/{} ({identity})", env!("CARGO_PKG_VERSION"))
}

/// The identity in a User-Agent that [`client_with_user_agent`] set for `binary` (any version),
/// e.g. to tell replicas apart in an audit log; `None` for any other User-Agent.
pub fn identity_in_user_agent<'a>(user_agent: &'a str, binary: &str) -> Option<&'a str> {
    user_agent
        .strip_prefix(binary)?
        .strip_prefix('/')?
        .split_once(" (")?
        .1
        .strip_suffix(')')
}

/// A client for `config` (already loaded, perhaps adjusted, e.g. without retries) under the
/// rate limit of `args`, counting into `metrics`. Every service client is built here, so none
/// escapes the limit.
pub fn from_config(config: Config, args: &CommonArgs, metrics: &ClientMetrics) -> Result<Client> {
    let layer = RateLimitLayer::new(args.rate_limit()?, metrics.clone());
    let builder = ClientBuilder::try_from(config).map_err(|e| Error::Config {
        message: "building the HTTP client".into(),
        source: Box::new(e),
    })?;
    Ok(builder.with_layer(&layer).build())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn the_identity_is_read_back_from_the_user_agent_of_its_binary_only() {
        let agent = user_agent_of("hpa-plus", "hpa-plus-7d9f-x2");
        assert_eq!(
            identity_in_user_agent(&agent, "hpa-plus"),
            Some("hpa-plus-7d9f-x2")
        );
        assert_eq!(
            identity_in_user_agent("hpa-plus/0.9.0 (a (b))", "hpa-plus"),
            Some("a (b)")
        );
        assert_eq!(identity_in_user_agent(&agent, "hpa"), None);
        assert_eq!(identity_in_user_agent(&agent, "vpa-recommender"), None);
        assert_eq!(identity_in_user_agent("hpa-plus/0.9.0", "hpa-plus"), None);
        assert_eq!(identity_in_user_agent("kubectl/v1.31.0", "hpa-plus"), None);
    }

    #[derive(Parser)]
    struct Args {
        #[command(flatten)]
        common: CommonArgs,
    }

    const KUBECONFIG: &str = r"
apiVersion: v1
kind: Config
current-context: one
clusters:
- name: one
  cluster: {server: 'https://one.example:6443', insecure-skip-tls-verify: true}
- name: two
  cluster: {server: 'https://two.example:6443', insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: abc}
contexts:
- name: one
  context: {cluster: one, user: u, namespace: team-a}
- name: two
  context: {cluster: two, user: u}
";

    fn kubeconfig_file(name: &str) -> std::path::PathBuf {
        let path =
            std::env::temp_dir().join(format!("plimsoll-runtime-{name}-{}", std::process::id()));
        std::fs::write(&path, KUBECONFIG).unwrap();
        path
    }

    #[tokio::test]
    async fn kubeconfig_flag_and_context_select_the_cluster() {
        let path = kubeconfig_file("ctx");
        let p = path.to_str().unwrap();
        let args = Args::try_parse_from(["svc", "--kubeconfig", p])
            .unwrap()
            .common;
        let config = super::config(&args).await.unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://one.example:6443/");
        assert_eq!(config.default_namespace, "team-a");
        let args = Args::try_parse_from(["svc", "--kubeconfig", p, "--context", "two"])
            .unwrap()
            .common;
        let config = super::config(&args).await.unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://two.example:6443/");
        assert_eq!(config.default_namespace, "default");
        install_crypto_provider();
        install_crypto_provider();
        assert!(Client::try_from(config).is_ok());
        std::fs::remove_file(path).unwrap();
    }

    #[tokio::test]
    async fn a_bad_rate_limit_fails_the_client_and_names_the_flag() {
        let path = kubeconfig_file("limit");
        let p = path.to_str().unwrap();
        let metrics = ClientMetrics::default();
        let args = Args::try_parse_from(["svc", "--kubeconfig", p, "--kube-api-qps=5"])
            .unwrap()
            .common;
        assert!(client_counted(&args, None, &metrics).await.is_ok());
        let args = Args::try_parse_from([
            "svc",
            "--kubeconfig",
            p,
            "--kube-api-qps=5",
            "--kube-api-burst=0",
        ])
        .unwrap()
        .common;
        let Err(err) = client_counted(&args, None, &metrics).await else {
            panic!("burst 0 with a qps must be rejected");
        };
        let err = err.to_string();
        assert!(err.contains("--kube-api-burst=0"), "{err}");
        std::fs::remove_file(path).unwrap();
    }

    #[tokio::test]
    async fn a_missing_kubeconfig_names_the_file() {
        let args = Args::try_parse_from(["svc", "--kubeconfig", "/nonexistent/kubeconfig"])
            .unwrap()
            .common;
        let err = super::config(&args).await.unwrap_err().to_string();
        assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
    }
}
