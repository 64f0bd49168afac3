//! Benchmark of the vpa-admission webhook: requests/s and latency percentiles over TLS
//! keep-alive on loopback, with the fixture pod AdmissionReview (two containers, a VPA with a
//! recommendation; every answer is a 9-operation JSON Patch).
//!
//! The webhook runs in a child process (this binary re-executed as `serve`; a multi-threaded
//! runtime as the real binary has), so its CPU and RSS are its own. The load comes from another
//! process on loopback, `--loadgen`:
//! - `external` (the default when both are on PATH; `just bench-vpa-admission` installs them from
//!   Debian): `wrk` for the maximum rate (closed loop, `--connections` connections) and `hey` for
//!   the fixed rate (`--rate` requests/s over `--connections` workers, `-q` per worker);
//! - `builtin`: a hyper + rustls client in this process (closed loop, then an open loop whose
//!   latency counts from each request's scheduled time, so a stalled server is not hidden).
//!
//! Both tools skip certificate verification (loopback, a throwaway CA); the builtin client
//! verifies against the generated CA, and one verified request checks that answers carry the
//! patch before any load is sent.
//!
//! `cargo run --profile dist -p plimsoll-e2e --bin bench-vpa-admission [-- --rate 5000 --seconds 10
//! --connections 16 --loadgen external|builtin]`

use std::process::Command;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use plimsoll_e2e::process::{Child, Proc};
use plimsoll_vpa_admission::cli::WebhookListenerArgs;
use plimsoll_vpa_admission::{certs, tls, webhook};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

const REVIEW: &str =
    include_str!("../../../../crates/core/tests/data/admission/review-two-containers.json");

struct Options {
    connections: usize,
    rate: u64,
    seconds: u64,
    external: bool,
}

fn options() -> anyhow::Result<Options> {
    let mut o = Options {
        connections: 16,
        rate: 5000,
        seconds: 10,
        external: on_path("wrk") && on_path("hey"),
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).context("flag without value")?;
        match pair[0].as_str() {
            "--connections" => o.connections = value.parse()?,
            "--rate" => o.rate = value.parse()?,
            "--seconds" => o.seconds = value.parse::<u64>()?.min(50),
            "--loadgen" => {
                o.external = match value.as_str() {
                    "external" => true,
                    "builtin" => false,
                    other => anyhow::bail!("--loadgen: {other} is neither external nor builtin"),
                }
            }
            other => {
                anyhow::bail!("unknown flag {other} (--connections, --rate, --seconds, --loadgen)")
            }
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

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
}

/// The child: the fixture webhook over TLS on a loopback port until stdin closes. Prints the
/// port on the first line of stdout; the CA it generated is in `ca_file`.
fn serve(ca_file: &str) -> anyhow::Result<()> {
    let bundle = certs::generate(&["127.0.0.1".to_owned()])?;
    std::fs::write(ca_file, &bundle.ca_pem)?;
    let runtime = tokio::runtime::Runtime::new()?;
    let shutdown = plimsoll_e2e::process::parent_gone();
    runtime.block_on(async {
        let key = tls::certified_key(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes())?;
        let server_config = tls::server_config(Arc::new(tls::CertResolver::fixed(key)))?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("{}", listener.local_addr()?.port());
        tls::serve(
            listener,
            server_config,
            webhook::router(Arc::new(webhook::fixture_webhook())),
            WebhookListenerArgs::default().config(),
            shutdown,
        )
        .await;
        anyhow::Ok(())
    })
}

/// A `wrk` run at the maximum rate; prints requests/s, the latency percentiles and the
/// webhook's CPU over the run.
fn wrk(o: &Options, port: u16, dir: &std::path::Path, server: Proc) -> anyhow::Result<()> {
    let script = dir.join("post.lua");
    std::fs::write(
        &script,
        format!(
            "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.body = [==[{REVIEW}]==]\n"
        ),
    )?;
    let cpu0 = server.cpu_seconds()?;
    let out = Command::new("wrk")
        .args(["-t1", &format!("-c{}", o.connections)])
        .args([&format!("-d{}s", o.seconds), "--latency", "-s"])
        .arg(&script)
        .arg(format!("https://127.0.0.1:{port}/"))
        .output()
        .context("run wrk")?;
    let cpu = server.cpu_seconds()? - cpu0;
    let text = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(out.status.success(), "wrk failed: {text}");
    let field = |prefix: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix).map(str::trim))
            .unwrap_or("?")
            .to_owned()
    };
    let errors = field("Non-2xx or 3xx responses:");
    println!(
        "wrk closed loop, {} connections: {} requests/s, latency p50 {}, p90 {}, p99 {}, non-2xx {}, webhook CPU {:.2} cores",
        o.connections,
        field("Requests/sec:"),
        field("50%"),
        field("90%"),
        field("99%"),
        if errors == "?" {
            "0".to_owned()
        } else {
            errors
        },
        cpu / o.seconds as f64
    );
    Ok(())
}

/// A `hey` run at `--rate` requests/s; prints what it reached, the latency percentiles, the
/// status codes and the webhook's CPU over the run.
fn hey(o: &Options, port: u16, dir: &std::path::Path, server: Proc) -> anyhow::Result<()> {
    let body = dir.join("review.json");
    std::fs::write(&body, REVIEW)?;
    let per_worker = (o.rate as f64 / o.connections as f64).ceil() as u64;
    let cpu0 = server.cpu_seconds()?;
    let out = Command::new("hey")
        .args(["-z", &format!("{}s", o.seconds)])
        .args([
            "-c",
            &o.connections.to_string(),
            "-q",
            &per_worker.to_string(),
        ])
        // hey puts its Host header, port included, into the TLS server name unless told
        // otherwise; rustls rightly refuses such a name (illegal_parameter).
        .args(["-host", "localhost"])
        .args(["-m", "POST", "-T", "application/json", "-D"])
        .arg(&body)
        .arg(format!("https://127.0.0.1:{port}/"))
        .output()
        .context("run hey")?;
    let cpu = server.cpu_seconds()? - cpu0;
    let text = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(out.status.success(), "hey failed: {text}");
    let rate = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:").map(str::trim))
        .unwrap_or("?");
    // "  99% in 0.0012 secs"
    let pct = |p: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{p}% in ")))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .map_or_else(|| "?".to_owned(), |s| format!("{:.3} ms", s * 1000.0))
    };
    let codes: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('[') && l.contains("responses"))
        .collect();
    println!(
        "hey at {} requests/s ({} workers × {per_worker}/s): {rate} requests/s, latency p50 {}, p90 {}, p99 {}, status {}, webhook CPU {:.2} cores",
        o.rate,
        o.connections,
        pct("50"),
        pct("90"),
        pct("99"),
        codes.join(", ").replace('\t', " "),
        cpu / o.seconds as f64
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("serve") {
        rustls::crypto::ring::default_provider()
            .install_default()
            .ok();
        return serve(args.get(2).context("serve CA_FILE")?);
    }
    let o = options()?;
    rustls::crypto::ring::default_provider()
        .install_default()
        .ok();
    let dir = std::env::temp_dir().join(format!("bench-vpa-admission-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let ca_file = dir.join("ca.pem");
    let mut child = Child::serve(&[ca_file.as_os_str()], true)?;
    let server = child.proc;
    let port: u16 = child.first_line()?.parse().context("the webhook's port")?;

    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(&ca_file)? {
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
        "vpa-admission benchmark: {}, load average {:.1}, {} keep-alive TLS connections, fixture pod review ({} bytes), load from {}",
        plimsoll_e2e::process::machine(),
        plimsoll_e2e::process::load_average(),
        o.connections,
        REVIEW.len(),
        if o.external {
            "wrk and hey"
        } else {
            "the builtin client"
        }
    );
    let duration = Duration::from_secs(o.seconds);
    let senders = client_rt.block_on(async {
        // A verified connection first: the answer must carry the patch. Then warm up.
        let mut senders = Vec::new();
        for _ in 0..o.connections {
            senders.push(connect(port, client_config.clone()).await?);
        }
        for s in &mut senders {
            for _ in 0..20 {
                send(s).await?;
            }
        }
        anyhow::Ok(senders)
    })?;
    if o.external {
        drop(senders);
        wrk(&o, port, &dir, server)?;
        hey(&o, port, &dir, server)?;
    } else {
        client_rt.block_on(async {
            let senders = closed_loop(senders, duration).await?;
            open_loop(senders, duration, o.rate, o.connections).await
        })?;
    }
    println!(
        "webhook RSS {:.0} MiB (peak {:.0} MiB)",
        server.rss_mib()?,
        server.peak_rss_mib()?
    );
    child.stop();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
