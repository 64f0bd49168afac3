//! Building the Kubernetes client, and the process-wide TLS crypto provider.
//!
//! Resolution order: `--kubeconfig PATH` (with `--context` if given); else `--context` alone
//! against the default kubeconfig (`$KUBECONFIG`, `~/.kube/config`); else kube's inference
//! (`$KUBECONFIG`/`~/.kube/config`, then the in-cluster service account).

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::args::CommonArgs;
use crate::error::{Error, Result};

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

/// A kube client as selected by the common flags (installs the crypto provider first).
pub async fn client(args: &CommonArgs) -> Result<Client> {
    install_crypto_provider();
    let config = config(args).await?;
    Client::try_from(config).map_err(|e| Error::Config {
        message: "building the HTTP client".into(),
        source: Box::new(e),
    })
}

/// [`client`] whose requests carry `User-Agent: <binary>/<version> (<identity>)`, so that audit
/// logs tell replicas apart.
pub async fn client_with_user_agent(
    args: &CommonArgs,
    binary: &str,
    identity: &str,
) -> Result<Client> {
    install_crypto_provider();
    let mut config = config(args).await?;
    let agent = format!("{binary}/{} ({identity})", env!("CARGO_PKG_VERSION"));
    let value = http::HeaderValue::from_str(&agent).map_err(|e| Error::Config {
        message: format!("User-Agent {agent:?}"),
        source: Box::new(e),
    })?;
    config.headers.push((http::header::USER_AGENT, value));
    Client::try_from(config).map_err(|e| Error::Config {
        message: "building the HTTP client".into(),
        source: Box::new(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

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
    async fn a_missing_kubeconfig_names_the_file() {
        let args = Args::try_parse_from(["svc", "--kubeconfig", "/nonexistent/kubeconfig"])
            .unwrap()
            .common;
        let err = super::config(&args).await.unwrap_err().to_string();
        assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
    }
}
