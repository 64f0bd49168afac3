//! `kubectl-plimsoll`: the kubectl plugin binary (`kubectl plimsoll …` finds it on PATH).
//! Parses flags and calls the library; see docs/kubectl-plimsoll.md.

use std::io::{Read as _, Write as _};
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use kubectl_plimsoll::explain::{Settings, Target};
use kubectl_plimsoll::{Connection, Output};

/// Explain Plimsoll's autoscaling decisions, convert the objects of the controllers it replaces,
/// and show the health of its services.
#[derive(Parser, Debug)]
#[command(name = "kubectl plimsoll", bin_name = "kubectl plimsoll", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Which cluster and namespace (kubectl's flags).
#[derive(Args, Debug)]
struct ClusterFlags {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the
    /// in-cluster service account).
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
}

impl ClusterFlags {
    fn connection(&self) -> Connection {
        Connection {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Explain the last decision of an autoscaler: `hpaplus/NAME` (each metric's value and
    /// proposal, what limited it, cooldowns and windows left), `hpa/NAME` (a native HPA that
    /// hpa-plus manages) or `vpa/NAME` (from its checkpoints: samples, percentiles, confidence,
    /// what capped the target).
    Explain {
        /// The object, KIND/NAME: hpaplus/NAME, hpa/NAME or vpa/NAME.
        object: String,
        /// Namespace of the object (default: the kubeconfig context's namespace, else default).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        /// Output format: text for people, yaml or json for scripts.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
        output: Output,
        /// hpa-plus's --downscale-stabilization in seconds, if your installation changed it
        /// (the scale-down window of objects without behavior.scaleDown).
        #[arg(long, default_value_t = 300, value_name = "SECONDS")]
        downscale_stabilization: i64,
        #[command(flatten)]
        cluster: ClusterFlags,
    },
    /// Convert upstream HorizontalPodAutoscalers (autoscaling/v1, v2, v2beta2), DataDog
    /// WatermarkPodAutoscalers and Aliyun CronHorizontalPodAutoscalers into Plimsoll objects.
    /// Prints YAML on stdout (pipe it into `kubectl apply -f -`); every field that could not be
    /// carried over is listed on stderr and as a comment above its object. Other documents in
    /// the input are skipped. Needs no cluster.
    Convert {
        /// The manifest file (YAML, several documents allowed, or JSON; a `kubectl get -o yaml`
        /// list works too). `-` or absent: standard input.
        #[arg(short = 'f', long = "filename", value_name = "FILE")]
        file: Option<PathBuf>,
        /// Also write the report (what was not carried over) to this file.
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
        /// Exit with status 3 when anything could not be carried over (for CI checks).
        #[arg(long)]
        strict: bool,
    },
    /// Show the health of the five services: leader and Lease freshness, ready replicas,
    /// endpoints of their metrics Services and the versions running.
    Status {
        /// The namespace Plimsoll is installed in.
        #[arg(short = 'n', long, default_value = plimsoll_core::service_health::DEFAULT_NAMESPACE)]
        namespace: String,
        /// Output format: text for people, yaml or json for scripts.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
        output: Output,
        #[command(flatten)]
        cluster: ClusterFlags,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let now = jiff::Timestamp::now();
    match cli.command {
        Command::Explain {
            object,
            namespace,
            output,
            downscale_stabilization,
            cluster,
        } => {
            let target = Target::parse(&object)?;
            let client = cluster.connection().client().await?;
            let namespace = namespace.unwrap_or_else(|| client.default_namespace().to_owned());
            let settings = Settings {
                downscale_stabilization_seconds: downscale_stabilization,
            };
            let text = kubectl_plimsoll::explain::explain(
                &client, &namespace, &target, settings, output, now,
            )
            .await?;
            print!("{text}");
        }
        Command::Convert {
            file,
            report,
            strict,
        } => {
            let input = match file.as_deref() {
                None => read_stdin()?,
                Some(p) if p.as_os_str() == "-" => read_stdin()?,
                Some(p) => {
                    std::fs::read_to_string(p).with_context(|| format!("read {}", p.display()))?
                }
            };
            let converted = kubectl_plimsoll::convert::convert_text(&input)?;
            print!("{}", converted.yaml()?);
            let text = converted.report();
            std::io::stderr().write_all(text.as_bytes())?;
            if let Some(path) = report {
                std::fs::write(&path, &text)
                    .with_context(|| format!("write {}", path.display()))?;
            }
            let lost = converted.conversions.iter().any(|c| !c.dropped.is_empty());
            if strict && lost {
                std::io::stdout().flush()?;
                std::process::exit(3);
            }
        }
        Command::Status {
            namespace,
            output,
            cluster,
        } => {
            let client = cluster.connection().client().await?;
            print!(
                "{}",
                kubectl_plimsoll::status::status(&client, &namespace, output, now).await?
            );
        }
    }
    Ok(())
}

fn read_stdin() -> anyhow::Result<String> {
    let mut s = String::new();
    std::io::stdin()
        .read_to_string(&mut s)
        .context("read standard input")?;
    Ok(s)
}
