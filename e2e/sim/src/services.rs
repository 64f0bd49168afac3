//! The Plimsoll services `plimsoll-sim demo` runs in-process against the sim.
//!
//! Each service is started exactly as in a cluster: its own command-line parser reads the same
//! flags a Deployment would pass (a kubeconfig file for the sim, a loopback admin address, leader
//! election on, and the time-based flags the demo's compression sets, see
//! [`crate::demo::timing`]), and its `run(config, shutdown)` talks to the sim over HTTPS. Nothing
//! in the services knows it is in a demo.
//!
//! vpa-admission serves its webhook on a loopback port it binds first, with `--self-signed`
//! certificates in a Secret of [`SYSTEM_NAMESPACE`] and `--register-webhook` by URL, so the sim
//! calls it over TLS (verifying the registered caBundle) whenever a pod is created.

use std::future::Future;
use std::path::PathBuf;

use clap::Parser;
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::demo::{DemoContext, SYSTEM_NAMESPACE, Service};

/// Every service, in the order they start.
pub fn all() -> Vec<Service> {
    vec![
        service(
            "hpa-plus",
            &[],
            |args: &[String], shutdown: CancellationToken| {
                let config = plimsoll_hpa_plus::cli::Args::try_parse_from(args)
                    .map_err(|e| e.to_string())?
                    .into_config()
                    .map_err(|e| e.to_string())?;
                Ok(run(plimsoll_hpa_plus::run, config, shutdown))
            },
        ),
        service(
            "cron-hpa",
            &[],
            |args: &[String], shutdown: CancellationToken| {
                let config = plimsoll_cron_hpa::cli::Args::try_parse_from(args)
                    .map_err(|e| e.to_string())?
                    .into_config();
                Ok(run(plimsoll_cron_hpa::run, config, shutdown))
            },
        ),
        service(
            "vpa-recommender",
            &[],
            |args: &[String], shutdown: CancellationToken| {
                let config = plimsoll_vpa_recommender::cli::Args::try_parse_from(args)
                    .map_err(|e| e.to_string())?
                    .into_config();
                Ok(run(plimsoll_vpa_recommender::run, config, shutdown))
            },
        ),
        service(
            "vpa-admission",
            &["--self-signed", "--register-webhook"],
            start_admission,
        ),
        service(
            "vpa-updater",
            &[],
            |args: &[String], shutdown: CancellationToken| {
                let config = plimsoll_vpa_updater::cli::Args::try_parse_from(args)
                    .map_err(|e| e.to_string())?
                    .into_config();
                Ok(run(plimsoll_vpa_updater::run, config, shutdown))
            },
        ),
    ]
}

/// vpa-admission on a loopback port bound here (so the registration can name it), registered by
/// URL; the service skeleton binds the admin listener on `--metrics-address` as in a cluster.
fn start_admission(args: &[String], shutdown: CancellationToken) -> Result<Running, String> {
    let webhook = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    webhook.set_nonblocking(true).map_err(|e| e.to_string())?;
    let port = webhook.local_addr().map_err(|e| e.to_string())?.port();
    let mut args = args.to_vec();
    args.push(format!("--webhook-url=https://127.0.0.1:{port}/"));
    // Its own namespace is left out of admission and holds the certificates' Secret.
    args.push(format!("--webhook-service-namespace={SYSTEM_NAMESPACE}"));
    let config = plimsoll_vpa_admission::cli::Args::try_parse_from(&args)
        .map_err(|e| e.to_string())?
        .into_config();
    Ok(async move {
        let webhook = TcpListener::from_std(webhook).map_err(|e| e.to_string())?;
        plimsoll_vpa_admission::run_on(config, webhook, shutdown)
            .await
            .map_err(|e| e.to_string())
    }
    .boxed())
}

type Running = BoxFuture<'static, Result<(), String>>;
type Start = fn(&[String], CancellationToken) -> Result<Running, String>;

/// A demo service: writes the sim's kubeconfig to a file, builds the flags a Deployment would
/// pass, parses them with the service's own parser and runs it until the demo ends.
fn service(binary: &'static str, extra: &'static [&'static str], start: Start) -> Service {
    Box::new(move |ctx: DemoContext| {
        async move {
            let path = kubeconfig_file(binary, &ctx.kubeconfig);
            let Some(path) = path else {
                eprintln!("plimsoll demo: {binary}: could not write a kubeconfig; not started");
                return;
            };
            let mut args = vec![
                binary.to_owned(),
                format!("--kubeconfig={}", path.display()),
                "--metrics-address=127.0.0.1:0".to_owned(),
                "--log-format=text".to_owned(),
                // Quiet unless something goes wrong: the demo prints its own table.
                "--log-filter=warn".to_owned(),
                format!("--lease-namespace={}", ctx.namespace),
            ];
            // The day is compressed: every window, delay and period a real cluster measures
            // against it shrinks with it, set through the service's own flags.
            args.extend(ctx.timing.flags(binary));
            args.extend(extra.iter().map(|s| (*s).to_owned()));
            // The service gets the demo's own shutdown token, so it stops the way SIGTERM stops it.
            match start(&args, ctx.shutdown.clone()) {
                Ok(running) => {
                    if let Err(e) = running.await {
                        eprintln!("plimsoll demo: {binary} stopped: {e}");
                    }
                }
                Err(e) => eprintln!("plimsoll demo: {binary} not started: {e}"),
            }
            let _ = std::fs::remove_file(&path);
        }
        .boxed()
    })
}

fn run<C, F, E>(
    entry: fn(C, CancellationToken) -> F,
    config: C,
    shutdown: CancellationToken,
) -> Running
where
    C: Send + 'static,
    F: Future<Output = Result<(), E>> + Send + 'static,
    E: std::fmt::Display,
{
    async move { entry(config, shutdown).await.map_err(|e| e.to_string()) }.boxed()
}

fn kubeconfig_file(binary: &str, kubeconfig: &str) -> Option<PathBuf> {
    let path = std::env::temp_dir().join(format!(
        "plimsoll-demo-{binary}-{}.kubeconfig",
        std::process::id()
    ));
    std::fs::write(&path, kubeconfig).ok()?;
    Some(path)
}
