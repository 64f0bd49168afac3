//! Benchmark of the vpa-admission webhook: requests/s and latency percentiles over TLS
//! keep-alive on loopback, with the fixture pod AdmissionReview (two containers, a VPA with a
//! recommendation; every answer is a 9-operation JSON Patch).
//!
//! The webhook runs in-process on its own 2-thread runtime, as in a pod with 2 cores; the load
//! generator (hyper HTTP/1.1 over rustls, one request in flight per connection) runs on another.
//! Two phases, bounded to about 30 s:
//! 1. closed loop: `--connections` connections send back to back for `--seconds` (max rate);
//! 2. open loop: `--rate` requests/s spread over the connections for `--seconds`; latency is
//!    measured from each request's scheduled time, so a stalled server is not hidden
//!    (no coordinated omission).
//!
//! `cargo run --release -p plimsoll-e2e --bin bench-vpa-admission [-- --rate 5000 --seconds 10]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use plimsoll_vpa_admission::{certs, tls, webhook};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio_util::sync::CancellationToken;

const REVIEW: &str =
    include_str!("../../../../crates/core/tests/data/admission/review-two-containers.json");

struct Options {
    connections: usize,
    rate: u64,
    seconds: u64,
}

fn options() -> anyhow::Result<Options> {
    let mut o = Options {
        connections: 16,
        rate: 5000,
        seconds: 10,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).context("flag without value")?;
        match pair[0].as_str() {
            "--connections" => o.connections = value.parse()?,
            "--rate" => o.rate = value.parse()?,
            "--seconds" => o.seconds = value.parse::<u64>()?.min(50),
            other => anyhow::bail!("unknown flag {other} (--connections, --rate, --seconds)"),
        }
    }
    Ok(o)
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn connect(port: u16, config: Arc<rustls::ClientConfig>) -> anyhow::Result<Sender> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    tcp.set_nodelay(true)?;
    let stream = tokio_rustls::TlsConnector::from(config)
        .connect(ServerName::try_from("127.0.0.1")?, tcp)
        .await?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    Ok(sender)
}

async fn send(sender: &mut Sender) -> anyhow::Result<()> {
    sender.ready().await?;
    let request = hyper::Request::post("/")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(REVIEW.as_bytes())))?;
    let response = sender.send_request(request).await?;
    anyhow::ensure!(response.status() == 200, "HTTP {}", response.status());
    let body = response.into_body().collect().await?.to_bytes();
    anyhow::ensure!(
        body.windows(9).any(|w| w == b"JSONPatch"),
        "answer has no patch"
    );
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn report(name: &str, mut latencies: Vec<Duration>, elapsed: Duration, errors: usize) {
    latencies.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name}: {} requests in {:.1} s = {:.0} requests/s, errors {errors}, latency p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, p99.9 {:.3} ms, max {:.3} ms",
        latencies.len(),
        elapsed.as_secs_f64(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        ms(percentile(&latencies, 0.50)),
        ms(percentile(&latencies, 0.90)),
        ms(percentile(&latencies, 0.99)),
        ms(percentile(&latencies, 0.999)),
        ms(latencies.last().copied().unwrap_or_default()),
    );
}

async fn closed_loop(senders: Vec<Sender>, duration: Duration) -> anyhow::Result<Vec<Sender>> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for mut s in senders {
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0;
            while started.elapsed() < duration {
                let t = Instant::now();
                match send(&mut s).await {
                    Ok(()) => lat.push(t.elapsed()),
                    Err(_) => errors += 1,
                }
            }
            (s, lat, errors)
        }));
    }
    let (mut senders, mut all, mut errors) = (Vec::new(), Vec::new(), 0);
    for t in tasks {
        let (s, lat, e) = t.await?;
        senders.push(s);
        all.extend(lat);
        errors += e;
    }
    report("closed loop (max rate)", all, started.elapsed(), errors);
    Ok(senders)
}

async fn open_loop(
    senders: Vec<Sender>,
    duration: Duration,
    rate: u64,
    connections: usize,
) -> anyhow::Result<()> {
    let per_connection = Duration::from_secs_f64(connections as f64 / rate as f64);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (i, mut s) in senders.into_iter().enumerate() {
        let offset = per_connection.mul_f64(i as f64 / connections as f64);
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0;
            let mut next = started + offset;
            // A server that cannot keep up would stretch the phase; stop sending at 3× duration.
            while next < started + duration && started.elapsed() < duration * 3 {
                tokio::time::sleep_until(next.into()).await;
                match send(&mut s).await {
                    Ok(()) => lat.push(next.elapsed()),
                    Err(_) => errors += 1,
                }
                next += per_connection;
            }
            (lat, errors)
        }));
    }
    let (mut all, mut errors) = (Vec::new(), 0);
    for t in tasks {
        let (lat, e) = t.await?;
        all.extend(lat);
        errors += e;
    }
    report(
        &format!("open loop at {rate} requests/s"),
        all,
        started.elapsed(),
        errors,
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let o = options()?;
    rustls::crypto::ring::default_provider()
        .install_default()
        .ok();
    let bundle = certs::generate(&["127.0.0.1".to_owned()])?;

    // The webhook, on its own 2-thread runtime.
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("webhook")
        .build()?;
    let shutdown = CancellationToken::new();
    let key = tls::certified_key(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes())?;
    let server_config = tls::server_config(Arc::new(tls::CertResolver::fixed(key)))?;
    let listener = server_rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let port = listener.local_addr()?.port();
    let server = server_rt.spawn(tls::serve(
        listener,
        server_config,
        webhook::router(Arc::new(webhook::fixture_webhook())),
        shutdown.clone(),
    ));

    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(bundle.ca_pem.as_bytes()) {
        roots.add(c?)?;
    }
    let client_config = Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth(),
    );
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("loadgen")
        .build()?;
    println!(
        "vpa-admission benchmark: {} cores, {} keep-alive TLS connections, fixture pod review ({} bytes)",
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        o.connections,
        REVIEW.len()
    );
    client_rt.block_on(async {
        let duration = Duration::from_secs(o.seconds);
        // Warm-up: handshakes and allocator.
        let mut senders = Vec::new();
        for _ in 0..o.connections {
            senders.push(connect(port, client_config.clone()).await?);
        }
        for s in &mut senders {
            for _ in 0..20 {
                send(s).await?;
            }
        }

        let senders = closed_loop(senders, duration).await?;
        open_loop(senders, duration, o.rate, o.connections).await?;
        anyhow::Ok(())
    })?;
    shutdown.cancel();
    server_rt.block_on(server)?;
    Ok(())
}
