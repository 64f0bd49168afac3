//! `kubectl plimsoll`: the commands of the kubectl plugin, for the binary and the tests.
//!
//! * [`explain`]: an HPA+ (or a native HPA Plimsoll manages) or a VPA, in words;
//! * [`convert`]: upstream HPAs, WatermarkPodAutoscalers and Aliyun CronHPAs → Plimsoll objects;
//! * [`status`]: the five services' health, leadership and versions.
//!
//! Every decision (what an object means, what a conversion loses, whether a service is healthy)
//! is a pure function of `plimsoll-core`; this crate reads objects from the cluster, calls it and
//! prints the result. `main.rs` only parses flags.

pub mod convert;
pub mod explain;
pub mod status;
pub mod yaml;

use std::path::PathBuf;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use plimsoll_core::printable::{printable_json, printable_lines};

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    /// A request to the API server failed.
    #[error("{what}: {source}")]
    Kube {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// The command line named something this plugin does not handle.
    #[error("{0}")]
    Usage(String),
    /// An input document could not be read or converted.
    #[error("{0}")]
    Input(String),
    /// Output could not be encoded.
    #[error("encoding the output: {0}")]
    Encode(String),
}

impl Error {
    pub(crate) fn kube(what: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube {
            what: what.into(),
            source,
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How results are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Output {
    /// Sentences and tables for people.
    #[default]
    Text,
    /// The explanation's fields as YAML.
    Yaml,
    /// The explanation's fields as JSON.
    Json,
}

impl Output {
    /// `value` printed in this format, `text` for [`Output::Text`]. Text goes to a terminal, so
    /// whatever in it a terminal would act on is escaped; the core's texts already escape each
    /// value read from the cluster, and this catches what a new text forgets.
    pub(crate) fn render<T: serde::Serialize>(
        self,
        value: &T,
        text: impl FnOnce() -> String,
    ) -> Result<String> {
        match self {
            Self::Text => Ok(printable_lines(&text()).into_owned()),
            Self::Json => serde_json::to_string_pretty(value)
                .map(|s| printable_json(&s).into_owned() + "\n")
                .map_err(|e| Error::Encode(e.to_string())),
            Self::Yaml => yaml::printable_yaml(value).map_err(Error::Encode),
        }
    }
}

/// Which cluster to talk to: kubectl's `--kubeconfig` and `--context`.
#[derive(Clone, Debug, Default)]
pub struct Connection {
    /// A kubeconfig file; without it `$KUBECONFIG`, `~/.kube/config`, then in-cluster.
    pub kubeconfig: Option<PathBuf>,
    /// A context of the kubeconfig instead of its current-context.
    pub context: Option<String>,
}

impl Connection {
    /// A client for the selected cluster (installs the `ring` TLS provider first).
    pub async fn client(&self) -> Result<Client> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        let failed = |e: &dyn std::fmt::Display| Error::Kubeconfig(e.to_string());
        let config = match (&self.kubeconfig, &self.context) {
            (Some(path), _) => {
                let kc = Kubeconfig::read_from(path)
                    .map_err(|e| Error::Kubeconfig(format!("{}: {e}", path.display())))?;
                kube::Config::from_custom_kubeconfig(kc, &options)
                    .await
                    .map_err(|e| failed(&e))?
            }
            (None, Some(_)) => kube::Config::from_kubeconfig(&options)
                .await
                .map_err(|e| failed(&e))?,
            (None, None) => kube::Config::infer().await.map_err(|e| failed(&e))?,
        };
        Client::try_from(config).map_err(|e| Error::Kubeconfig(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use plimsoll_core::printable::is_printable_lines;

    use super::*;

    #[test]
    fn every_output_is_safe_on_a_terminal_and_json_keeps_the_value() {
        let value = serde_json::json!({"metric": "rps\u{202e}\u{9b}2J\u{1b}]52;c;x\u{7}"});
        for output in [Output::Text, Output::Json] {
            let shown = output
                .render(&value, || format!("metric {}\n", value["metric"]))
                .unwrap_or_default();
            assert!(is_printable_lines(&shown), "{output:?}: {shown}");
        }
        let json = Output::Json.render(&value, String::new).unwrap_or_default();
        let back: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
        assert_eq!(back, value);
    }
}
