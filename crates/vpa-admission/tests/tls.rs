//! The webhook over real TLS on 127.0.0.1: a smoke test with a rustls client, the fixture sent
//! with `curl --cacert` (the docs' command), and a certificate rotation picked up on the next
//! handshake without a restart.

// Helpers outside #[test] fns unwrap too; a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use plimsoll_vpa_admission::certs::{self, CertBundle};
use plimsoll_vpa_admission::review::base64_decode;
use plimsoll_vpa_admission::tls::{self, CertResolver};
use plimsoll_vpa_admission::webhook;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

const REVIEW: &str = include_str!("../../core/tests/data/admission/review-two-containers.json");
const EXPECTED_PATCH: &str = include_str!("../../core/tests/data/admission/expected-patch.json");

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

async fn start(cert: PathBuf, key: PathBuf) -> Server {
    let resolver = CertResolver::from_files(cert, key).unwrap();
    let config = tls::server_config(Arc::new(resolver)).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(tls::serve(
        listener,
        config,
        webhook::router(Arc::new(webhook::fixture_webhook())),
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
