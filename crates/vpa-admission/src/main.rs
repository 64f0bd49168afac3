//! `vpa-admission`: parses flags, sets up logging and signals, and runs the library.

use clap::Parser;
use plimsoll_runtime::{client, shutdown, telemetry};
use plimsoll_vpa_admission::cli::Args;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    client::install_crypto_provider();
    telemetry::init_tracing(args.common.log_format, &args.common.log_filter)?;
    let config = args.into_config();
    let token = shutdown::signal_token();
    plimsoll_vpa_admission::run(config, token).await?;
    Ok(())
}
