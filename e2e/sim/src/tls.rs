//! Certificates and TLS serving: a generated CA (rcgen, ring) issues the API server's
//! certificate (and, for tests, webhook servers' certificates); connections are served with
//! rustls and hyper's HTTP/1.1 + HTTP/2 auto-detection (ALPN `h2`, `http/1.1`).

use std::sync::Arc;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};

fn tls_err(e: impl std::fmt::Display) -> Error {
    Error::Tls(e.to_string())
}

/// A certificate authority that can issue server certificates.
pub struct CertificateAuthority {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate, PEM.
    pub cert_pem: String,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .finish_non_exhaustive()
    }
}

/// A certificate and its private key, PEM.
#[derive(Debug, Clone)]
pub struct IssuedCert {
    /// Certificate chain, PEM.
    pub cert_pem: String,
    /// Private key, PEM (PKCS#8).
    pub key_pem: String,
}

impl CertificateAuthority {
    /// Generates a new CA named `common_name`.
    pub fn generate(common_name: &str) -> Result<Self> {
        let key = KeyPair::generate().map_err(tls_err)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(tls_err)?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).map_err(tls_err)?;
        Ok(Self {
            issuer: Issuer::new(params, key),
            cert_pem: cert.pem(),
        })
    }

    /// Issues a server certificate for `names` (DNS names or IP addresses).
    pub fn issue(&self, names: &[&str]) -> Result<IssuedCert> {
        let key = KeyPair::generate().map_err(tls_err)?;
        let sans: Vec<String> = names.iter().map(|s| (*s).to_string()).collect();
        let mut params = CertificateParams::new(sans).map_err(tls_err)?;
        let mut dn = DistinguishedName::new();
        dn.push(
            DnType::CommonName,
            names.first().copied().unwrap_or("plimsoll-sim"),
        );
        params.distinguished_name = dn;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &self.issuer).map_err(tls_err)?;
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// A rustls server configuration (ring provider) for a certificate, offering h2 and http/1.1.
pub fn server_config(cert: &IssuedCert) -> Result<Arc<rustls::ServerConfig>> {
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(cert.cert_pem.as_bytes())
            .collect::<std::result::Result<_, _>>()
            .map_err(tls_err)?;
    let key = PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes()).map_err(tls_err)?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(tls_err)?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .map_err(tls_err)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `router` on `listener` (TLS when `tls` is given) until `cancel` fires.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    router: Router,
    cancel: CancellationToken,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    loop {
        let (tcp, _) = tokio::select! {
            () = cancel.cancelled() => return,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let router = router.clone();
        let acceptor = acceptor.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let service = TowerToHyperService::new(router);
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            if let Some(acceptor) = acceptor {
                let Ok(stream) = acceptor.accept(tcp).await else {
                    return;
                };
                let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                tokio::select! {
                    _ = conn => {}
                    () = cancel.cancelled() => {}
                }
            } else {
                let conn = builder.serve_connection_with_upgrades(TokioIo::new(tcp), service);
                tokio::select! {
                    _ = conn => {}
                    () = cancel.cancelled() => {}
                }
            }
        });
    }
}
