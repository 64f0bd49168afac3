//! One HTTP/1.1 GET to the Prometheus server, over TCP or rustls (ring), on a fresh connection.
//!
//! A fresh connection per request keeps the client stateless between the recommender's start-up
//! load and an autoscaler's period (seconds to minutes apart); it also means a restarted server or
//! a new certificate is simply used by the next request. Trust: the `--prometheus-ca-file` bundle
//! when given, else the system's roots; `--prometheus-insecure-skip-verify` still checks the
//! handshake signatures but accepts any certificate.
//!
//! The body is read through a cap (`--prometheus-max-response-bytes`): a `Content-Length` above
//! it fails before a byte of the body is read, and a body without one (chunked) fails as soon
//! as the bytes read pass the cap, so the memory one answer takes is bounded by the cap whatever
//! the server sends. The connection's task is aborted when the request ends or is dropped (a
//! timeout, a shutdown), so a server that never answers holds nothing afterwards.

use std::path::Path;
use std::sync::Arc;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// Where requests go: scheme, host, port and the base path the API lives under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    pub https: bool,
    pub host: String,
    pub port: u16,
    /// `host[:port]` as written, for the `Host` header.
    pub authority: String,
    /// The address' path without a trailing `/` (`""` or `/prometheus`).
    pub base_path: String,
}

impl Target {
    /// Reads `http(s)://host[:port][/path]`.
    pub(crate) fn parse(address: &str) -> Result<Self, String> {
        let uri: http::Uri = address
            .parse()
            .map_err(|e| format!("address {address:?}: {e}"))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(format!("address {address:?}: expected http:// or https://"));
            }
        };
        let authority = uri
            .authority()
            .ok_or_else(|| format!("address {address:?}: no host"))?;
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        Ok(Self {
            https,
            host: host.to_owned(),
            port: authority.port_u16().unwrap_or(if https { 443 } else { 80 }),
            authority: authority.as_str().to_owned(),
            base_path: uri.path().trim_end_matches('/').to_owned(),
        })
    }
}

/// A request that got no usable HTTP answer. The strings are details for logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TransportError {
    /// The TCP connection was refused; worth another attempt.
    Refused(String),
    /// TCP, DNS or HTTP framing failed; worth another attempt.
    Connection(String),
    /// The TLS handshake rejected the server (certificate, name); another attempt would too.
    Certificate(String),
    /// The answer is larger than the cap; another attempt would be too.
    TooLarge,
}

/// An answer: status and body.
pub(crate) struct Answer {
    pub status: u16,
    pub body: Bytes,
}

/// The rustls configuration for `--prometheus-ca-file` / `--prometheus-insecure-skip-verify`.
pub(crate) fn tls_config(
    ca_file: Option<&Path>,
    insecure: bool,
) -> Result<Arc<rustls::ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let mut config = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        if let Some(path) = ca_file {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                .map_err(|e| format!("CA file {}: {e}", path.display()))?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(format!("CA file {}: no certificate", path.display()));
            }
        } else {
            // Unreadable system certificates are skipped: the ones that load still verify.
            system_roots(&mut roots, rustls_native_certs::load_native_certs().certs)?;
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Adds the system's CA certificates to `roots`. None at all is an error now rather than an
/// "unknown issuer" at every query: Plimsoll's images carry no CA bundle, so an https server
/// with no `--prometheus-ca-file` could never be verified there.
fn system_roots(
    roots: &mut rustls::RootCertStore,
    system: Vec<CertificateDer<'static>>,
) -> Result<(), String> {
    let (added, _) = roots.add_parsable_certificates(system);
    if added == 0 {
        return Err(
            "an https address needs a CA to verify the server: no --prometheus-ca-file \
                    was given and the system has no CA certificates (Plimsoll's images carry \
                    none); give the CA that signs the server's certificate with \
                    --prometheus-ca-file, or mount a bundle and point SSL_CERT_FILE at it"
                .to_owned(),
        );
    }
    Ok(())
}

/// Sends `GET path_and_query` with an optional `Authorization` header and reads the answer, at
/// most `max_body` bytes of it.
pub(crate) async fn get(
    target: &Target,
    tls: Option<&Arc<rustls::ClientConfig>>,
    path_and_query: &str,
    authorization: Option<&str>,
    max_body: u64,
) -> Result<Answer, TransportError> {
    let connection = |e: &dyn std::fmt::Display| TransportError::Connection(e.to_string());
    let tcp = tokio::net::TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::ConnectionRefused {
                TransportError::Refused(e.to_string())
            } else {
                connection(&e)
            }
        })?;
    let _ = tcp.set_nodelay(true);
    let mut request = hyper::Request::get(format!("{}{path_and_query}", target.base_path))
        .header(hyper::header::HOST, &target.authority)
        .header(hyper::header::ACCEPT, "application/json");
    if let Some(value) = authorization {
        request = request.header(hyper::header::AUTHORIZATION, value);
    }
    let request = request
        .body(Empty::<Bytes>::new())
        .map_err(|e| connection(&e))?;
    match tls {
        None => exchange(TokioIo::new(tcp), request, max_body).await,
        Some(config) => {
            let name = ServerName::try_from(target.host.clone())
                .map_err(|e| TransportError::Certificate(e.to_string()))?;
            let stream = tokio_rustls::TlsConnector::from(config.clone())
                .connect(name, tcp)
                .await
                .map_err(|e| {
                    // A rustls error inside the I/O error is a verdict on the certificate.
                    if e.get_ref()
                        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                        .is_some()
                    {
                        TransportError::Certificate(format!("TLS: {e}"))
                    } else {
                        TransportError::Connection(format!("TLS: {e}"))
                    }
                })?;
            exchange(TokioIo::new(stream), request, max_body).await
        }
    }
}

/// Aborts the connection's task when dropped: with the request done, or abandoned.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn exchange<S>(
    io: TokioIo<S>,
    request: hyper::Request<Empty<Bytes>>,
    max_body: u64,
) -> Result<Answer, TransportError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let connection = |e: &dyn std::fmt::Display| TransportError::Connection(e.to_string());
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| connection(&e))?;
    let _conn = AbortOnDrop(tokio::spawn(async move {
        let _ = conn.await;
    }));
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| connection(&e))?;
    let status = response.status().as_u16();
    // Early, when the server says; the limit below holds whatever it says.
    let declared = response
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max_body) {
        return Err(TransportError::TooLarge);
    }
    let limit = usize::try_from(max_body).unwrap_or(usize::MAX);
    let body = Limited::new(response.into_body(), limit)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                TransportError::TooLarge
            } else {
                TransportError::Connection(e.to_string())
            }
        })?
        .to_bytes();
    Ok(Answer { status, body })
}

/// `--prometheus-insecure-skip-verify`: any certificate, but the handshake signatures are still
/// checked with the provider's algorithms.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse() {
        let t = Target::parse("https://prometheus.monitoring:9090/prom/").unwrap();
        assert!(t.https);
        assert_eq!(
            (t.host.as_str(), t.port, t.base_path.as_str()),
            ("prometheus.monitoring", 9090, "/prom")
        );
        let t = Target::parse("http://prometheus.monitoring.svc").unwrap();
        assert_eq!((t.port, t.base_path.as_str()), (80, ""));
        assert_eq!(Target::parse("https://[::1]").unwrap().host, "::1");
        assert_eq!(Target::parse("https://x").unwrap().port, 443);
        for bad in ["prometheus:9090", "ftp://x", "http://"] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_missing_ca_file_is_named() {
        let err = tls_config(Some(Path::new("/nonexistent/ca.pem")), false).unwrap_err();
        assert!(err.contains("/nonexistent/ca.pem"), "{err}");
        assert!(tls_config(None, true).is_ok());
    }

    #[test]
    fn no_system_certificates_and_no_ca_file_is_refused_naming_the_flag() {
        let mut roots = rustls::RootCertStore::empty();
        let err = system_roots(&mut roots, Vec::new()).unwrap_err();
        assert!(err.contains("--prometheus-ca-file"), "{err}");
        assert!(err.contains("SSL_CERT_FILE"), "{err}");
        // Certificates that do not parse are skipped, and count as none.
        let garbage = vec![CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x01])];
        assert!(system_roots(&mut roots, garbage).is_err());
        assert!(roots.is_empty());
    }
}
