//! The webhook over real TLS on 127.0.0.1: a smoke test with a rustls client (HTTP/1.1 and
//! HTTP/2), the fixture sent with `curl --cacert` (the docs' command), a certificate rotation
//! picked up on the next handshake without a restart, and slow clients closed by the listener's
//! clocks (silent TCP, a handshake then half a header, a stalled body) while reviews keep
//! answering. Clocks are short here; timing assertions are generous bounds only.

// Helpers outside #[test] fns unwrap too; a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use plimsoll_runtime::listener::ListenerConfig;
use plimsoll_vpa_admission::certs::{self, CertBundle};
use plimsoll_vpa_admission::cli::WebhookListenerArgs;
use plimsoll_vpa_admission::review::base64_decode;
use plimsoll_vpa_admission::tls::{self, CertResolver};
use plimsoll_vpa_admission::webhook;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

const REVIEW: &str = include_str!("../../../core/tests/data/admission/review-two-containers.json");
const EXPECTED_PATCH: &str = include_str!("../../../core/tests/data/admission/expected-patch.json");

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vpa-admission-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_pair(dir: &std::path::Path, bundle: &CertBundle) -> (PathBuf, PathBuf, PathBuf) {
    let (cert, key, ca) = (dir.join("tls.crt"), dir.join("tls.key"), dir.join("ca.crt"));
    // Written as cert-manager's kubelet volume does: new files swapped in by rename.
    for (path, text) in [
        (&cert, &bundle.cert_pem),
        (&key, &bundle.key_pem),
        (&ca, &bundle.ca_pem),
    ] {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    }
    (cert, key, ca)
}

struct Server {
    port: u16,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

/// Far above any clock in these tests: only a server that never closes fails it.
const BOUND: Duration = Duration::from_secs(30);

/// The flags' defaults with half-second read and write clocks.
fn short_clocks() -> ListenerConfig {
    ListenerConfig {
        header_read_timeout: Duration::from_millis(500),
        body_read_timeout: Duration::from_millis(500),
        write_timeout: Duration::from_millis(500),
        ..WebhookListenerArgs::default().config()
    }
}

async fn start(cert: PathBuf, key: PathBuf) -> Server {
    start_with(cert, key, WebhookListenerArgs::default().config()).await
}

async fn start_with(cert: PathBuf, key: PathBuf, limits: ListenerConfig) -> Server {
    let resolver = CertResolver::from_files(cert, key).unwrap();
    let config = tls::server_config(Arc::new(resolver)).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(tls::serve(
        listener,
        config,
        webhook::router(Arc::new(webhook::fixture_webhook())),
        limits,
        shutdown.clone(),
    ));
    Server {
        port,
        shutdown,
        task,
    }
}

fn client_config(
    ca_pem: &str,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// Connects, returns the server's leaf certificate, the negotiated version, and the answer to
/// the fixture review.
async fn call(
    port: u16,
    config: rustls::ClientConfig,
) -> (Vec<u8>, rustls::ProtocolVersion, Value) {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    let (_, session) = stream.get_ref();
    let leaf = session.peer_certificates().unwrap()[0].to_vec();
    let version = session.protocol_version().unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let request = hyper::Request::post("/")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(REVIEW.as_bytes())))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (leaf, version, serde_json::from_slice(&body).unwrap())
}

/// A verified TLS connection to the server.
async fn connect_tls(
    port: u16,
    config: rustls::ClientConfig,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap()
}

/// The fixture review over HTTP/2 (ALPN h2); returns the answer.
async fn call_h2(port: u16, mut config: rustls::ClientConfig) -> Value {
    config.alpn_protocols = vec![b"h2".to_vec()];
    let stream = connect_tls(port, config).await;
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let request = hyper::Request::post("https://127.0.0.1/")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(REVIEW.as_bytes())))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&body).unwrap()
}

/// Reads until the server closes; returns what arrived and how long it took from `since`.
async fn until_closed<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
    since: Instant,
) -> (Vec<u8>, Duration) {
    let mut received = Vec::new();
    let read = tokio::time::timeout(BOUND, async {
        let mut buf = vec![0; 16 * 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server did not close the connection");
    (received, since.elapsed())
}

fn decoded_patch(review: &Value) -> Value {
    let b64 = review["response"]["patch"].as_str().unwrap();
    serde_json::from_slice(&base64_decode(b64).unwrap()).unwrap()
}

fn names() -> Vec<String> {
    vec!["127.0.0.1".to_owned(), "localhost".to_owned()]
}

fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

#[tokio::test]
async fn tls_smoke_tls13_and_tls12() {
    let dir = temp_dir("smoke");
    let bundle = certs::generate(&names()).unwrap();
    let (cert, key, _) = write_pair(&dir, &bundle);
    let server = start(cert, key).await;
    let expected: Value = serde_json::from_str(EXPECTED_PATCH).unwrap();

    let (_, version, review) = call(
        server.port,
        client_config(&bundle.ca_pem, &[&rustls::version::TLS13]),
    )
    .await;
    assert_eq!(version, rustls::ProtocolVersion::TLSv1_3);
    assert_eq!(decoded_patch(&review), expected);

    let (_, version, review) = call(
        server.port,
        client_config(&bundle.ca_pem, &[&rustls::version::TLS12]),
    )
    .await;
    assert_eq!(version, rustls::ProtocolVersion::TLSv1_2);
    assert_eq!(decoded_patch(&review), expected);

    server.shutdown.cancel();
    server.task.await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn curl_with_cacert_gets_the_exact_patch() {
    if std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("skipped: curl is not installed");
        return;
    }
    let dir = temp_dir("curl");
    let bundle = certs::generate(&names()).unwrap();
    let (cert, key, ca) = write_pair(&dir, &bundle);
    let review_path = dir.join("review.json");
    std::fs::write(&review_path, REVIEW).unwrap();
    let server = start(cert, key).await;
    let url = format!("https://127.0.0.1:{}/", server.port);
    // Blocking child process on the blocking pool: the server runs on this runtime.
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("curl")
            .args(["-sS", "--fail", "--cacert"])
            .arg(&ca)
            .args(["-H", "Content-Type: application/json", "--data-binary"])
            .arg(format!("@{}", review_path.display()))
            .arg(&url)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "curl failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let review: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(review["response"]["allowed"], true);
    assert_eq!(
        review["response"]["uid"],
        "705ab4f5-6393-11e8-b7cc-42010a800002"
    );
    assert_eq!(
        decoded_patch(&review),
        serde_json::from_str::<Value>(EXPECTED_PATCH).unwrap()
    );
    server.shutdown.cancel();
    server.task.await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn rotated_certificate_is_served_on_the_next_handshake() {
    let dir = temp_dir("rotation");
    let first = certs::generate(&names()).unwrap();
    let (cert, key, _) = write_pair(&dir, &first);
    let server = start(cert, key).await;

    let (leaf, _, _) = call(
        server.port,
        client_config(&first.ca_pem, &[&rustls::version::TLS13]),
    )
    .await;
    assert_eq!(leaf, der(&first.cert_pem));

    // A new CA and certificate, as after a cert-manager renewal with a new issuer.
    let second = certs::generate(&names()).unwrap();
    write_pair(&dir, &second);
    let (leaf, _, review) = call(
        server.port,
        client_config(&second.ca_pem, &[&rustls::version::TLS13]),
    )
    .await;
    assert_eq!(leaf, der(&second.cert_pem));
    assert_eq!(review["response"]["allowed"], true);

    // A half-written rotation (certificate without its key) keeps serving the last good pair.
    let third = certs::generate(&names()).unwrap();
    std::fs::write(dir.join("tls.crt"), &third.cert_pem).unwrap();
    let (leaf, _, _) = call(
        server.port,
        client_config(&second.ca_pem, &[&rustls::version::TLS13]),
    )
    .await;
    assert_eq!(leaf, der(&second.cert_pem));

    server.shutdown.cancel();
    server.task.await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn reviews_answer_over_http2() {
    let dir = temp_dir("h2");
    let bundle = certs::generate(&names()).unwrap();
    let (cert, key, _) = write_pair(&dir, &bundle);
    let server = start(cert, key).await;
    let review = call_h2(
        server.port,
        client_config(&bundle.ca_pem, &[&rustls::version::TLS13]),
    )
    .await;
    assert_eq!(
        decoded_patch(&review),
        serde_json::from_str::<Value>(EXPECTED_PATCH).unwrap()
    );
    server.shutdown.cancel();
    server.task.await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn slow_clients_are_closed_while_reviews_keep_answering() {
    let dir = temp_dir("slow");
    let bundle = certs::generate(&names()).unwrap();
    let (cert, key, _) = write_pair(&dir, &bundle);
    let server = start_with(cert, key, short_clocks()).await;
    let tls13 = || client_config(&bundle.ca_pem, &[&rustls::version::TLS13]);
    let began = Instant::now();

    // TCP only, never a ClientHello.
    let mut silent = TcpStream::connect(("127.0.0.1", server.port))
        .await
        .unwrap();
    // A TLS handshake, then half a request line.
    let mut half_header = connect_tls(server.port, tls13()).await;
    half_header.write_all(b"POST / HT").await.unwrap();
    half_header.flush().await.unwrap();
    // Full headers, then a tenth of the declared body.
    let mut stalled_body = connect_tls(server.port, tls13()).await;
    stalled_body
        .write_all(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"apiVersion\":")
        .await
        .unwrap();
    stalled_body.flush().await.unwrap();

    // Meanwhile a real review answers, over HTTP/1.1 and HTTP/2.
    let (_, _, review) = call(server.port, tls13()).await;
    assert_eq!(review["response"]["allowed"], true);
    let review = call_h2(server.port, tls13()).await;
    assert_eq!(review["response"]["allowed"], true);

    let (received, took) = until_closed(&mut silent, began).await;
    assert!(received.is_empty(), "{received:?}");
    assert!(took >= Duration::from_millis(400), "closed early: {took:?}");
    let (received, _) = until_closed(&mut half_header, began).await;
    assert!(
        received.is_empty(),
        "{}",
        String::from_utf8_lossy(&received)
    );
    let (received, _) = until_closed(&mut stalled_body, began).await;
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");

    // And after them.
    let (_, _, review) = call(server.port, tls13()).await;
    assert_eq!(review["response"]["allowed"], true);
    server.shutdown.cancel();
    server.task.await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn reviews_over_the_body_cap_are_413() {
    let dir = temp_dir("cap");
    let bundle = certs::generate(&names()).unwrap();
    let (cert, key, _) = write_pair(&dir, &bundle);
    let server = start_with(
        cert,
        key,
        ListenerConfig {
            max_request_body_bytes: 64 * 1024,
            ..WebhookListenerArgs::default().config()
        },
    )
    .await;
    let tls13 = || client_config(&bundle.ca_pem, &[&rustls::version::TLS13]);

    // Declared too large: refused before the body is sent.
    let mut declared = connect_tls(server.port, tls13()).await;
    declared
        .write_all(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 65537\r\n\r\n")
        .await
        .unwrap();
    let (received, _) = until_closed(&mut declared, Instant::now()).await;
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");

    // Chunked, found too large while reading.
    let stream = connect_tls(server.port, tls13()).await;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let chunks = futures::stream::iter((0..20).map(|_| {
        Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(Bytes::from(vec![
            b' ';
            8 * 1024
        ])))
    }));
    let request = hyper::Request::post("/")
        .header("content-type", "application/json")
        .body(http_body_util::StreamBody::new(chunks))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 413);

    // A review under the cap still answers.
    let (_, _, review) = call(server.port, tls13()).await;
    assert_eq!(review["response"]["allowed"], true);
    server.shutdown.cancel();
    server.task.await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}
