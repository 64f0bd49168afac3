//! TLS serving: the rustls configuration (ring, TLS 1.2 and 1.3 only, ALPN h2 and http/1.1),
//! a certificate resolver that picks up rewritten certificate files on the next handshake, and
//! [`serve`], which runs the webhook router on the shared listener
//! ([`plimsoll_runtime::listener`]: connection cap, handshake and header/body/write/idle clocks,
//! size caps).
//!
//! Reloading (cert-manager style): on every handshake the resolver `stat`s the certificate and
//! key files; when their modification time or size changed it loads them and swaps the
//! `Arc<CertifiedKey>`. A pair that fails to load (a half-written rotation: new certificate, old
//! key) keeps the previous certificate and is retried on the next handshake. Handshakes are rare
//! (the apiserver keeps connections alive), so the two `stat` calls cost nothing measurable.
//! `--self-signed` renewal ([`crate::renewal`]) swaps the same `Arc` when the shared Secret
//! holds a new pair.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use axum::Router;
use plimsoll_runtime::listener::{self, ListenerConfig, Transport};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};

/// Parses a PEM certificate chain and private key into a rustls `CertifiedKey` (ring).
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::Tls(format!("certificate: {e}")))?;
    if certs.is_empty() {
        return Err(Error::Tls("certificate: no CERTIFICATE block".to_owned()));
    }
    let key =
        PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| Error::Tls(format!("key: {e}")))?;
    let provider = rustls::crypto::ring::default_provider();
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| Error::Tls(format!("key: {e}")))?;
    let ck = CertifiedKey::new(certs, signing);
    ck.keys_match()
        .map_err(|e| Error::Tls(format!("certificate and key: {e}")))?;
    Ok(ck)
}

type Fingerprint = Option<[(SystemTime, u64); 2]>;

fn fingerprint(cert: &Path, key: &Path) -> Fingerprint {
    let stat = |p: &Path| {
        let m = std::fs::metadata(p).ok()?;
        Some((m.modified().ok()?, m.len()))
    };
    Some([stat(cert)?, stat(key)?])
}

/// Serves one certificate, reloaded from files when they change, or replaced through
/// [`CertResolver::install`] when `--self-signed` renewal picks up a new pair from the Secret.
pub struct CertResolver {
    files: Option<(PathBuf, PathBuf)>,
    state: Mutex<(Fingerprint, Arc<CertifiedKey>)>,
}

impl fmt::Debug for CertResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertResolver")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl CertResolver {
    /// Loads `cert` and `key` (PEM files) now; fails when they do not load.
    pub fn from_files(cert: PathBuf, key: PathBuf) -> Result<CertResolver> {
        let print = fingerprint(&cert, &key);
        let loaded = load(&cert, &key)?;
        Ok(CertResolver {
            files: Some((cert, key)),
            state: Mutex::new((print, Arc::new(loaded))),
        })
    }

    /// A certificate not backed by files (replaced only through [`CertResolver::install`]).
    pub fn fixed(key: CertifiedKey) -> CertResolver {
        CertResolver {
            files: None,
            state: Mutex::new((None, Arc::new(key))),
        }
    }

    /// Replaces the certificate (a renewed `--self-signed` pair); the next handshake presents
    /// it. The same swap as a file reload.
    pub fn install(&self, key: CertifiedKey) {
        if let Ok(mut state) = self.state.lock() {
            let print = state.0;
            swap(&mut state, print, key, "the shared Secret");
        }
    }

    /// Expiry of the certificate a handshake would present now, whatever its source (files,
    /// `--self-signed`): the expiry alert must see what clients see.
    pub fn served_not_after(&self) -> Option<SystemTime> {
        let key = self.current()?;
        let leaf = key.cert.first()?;
        crate::certs::der_not_after(leaf).ok()
    }

    /// The certificate to present now (reloading changed files first).
    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        let mut state = self.state.lock().ok()?;
        if let Some((cert, key)) = &self.files {
            let now = fingerprint(cert, key);
            if now.is_some() && now != state.0 {
                match load(cert, key) {
                    Ok(loaded) => {
                        swap(&mut state, now, loaded, &cert.display().to_string());
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, cert = %cert.display(), "changed certificate files do not load; keeping the previous certificate");
                    }
                }
            }
        }
        Some(state.1.clone())
    }
}

/// Puts a new certificate in place: every reload path ends here.
fn swap(
    state: &mut (Fingerprint, Arc<CertifiedKey>),
    print: Fingerprint,
    key: CertifiedKey,
    from: &str,
) {
    tracing::info!(%from, "serving certificate replaced");
    *state = (print, Arc::new(key));
}

fn load(cert: &Path, key: &Path) -> Result<CertifiedKey> {
    let read = |p: &Path| {
        std::fs::read(p).map_err(|source| Error::Io {
            context: format!("reading {}", p.display()),
            source,
        })
    };
    certified_key(&read(cert)?, &read(key)?)
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current()
    }
}

/// The rustls server configuration: ring, TLS 1.3 and 1.2, ALPN h2 and http/1.1.
pub fn server_config(resolver: Arc<CertResolver>) -> Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| Error::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `router` over TLS on `listener` under `limits` until `shutdown` is cancelled, then lets
/// in-flight requests finish (at most [`listener::DRAIN`]).
pub async fn serve(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    router: Router,
    limits: ListenerConfig,
    shutdown: CancellationToken,
) {
    listener::serve(listener, Transport::tls(config), router, limits, shutdown).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::{self, Lifetimes};
    use std::time::Duration;

    fn write_pair(dir: &Path, days: u64) -> SystemTime {
        let lifetimes = Lifetimes {
            serving: Duration::from_secs(days * 86_400),
            ca: Duration::from_secs(400 * 86_400),
        };
        let bundle = certs::generate_with(&["localhost".to_owned()], SystemTime::now(), lifetimes)
            .expect("generate");
        std::fs::write(dir.join("tls.crt"), &bundle.cert_pem).expect("write cert");
        std::fs::write(dir.join("tls.key"), &bundle.key_pem).expect("write key");
        certs::not_after(&bundle.cert_pem).expect("not after")
    }

    #[test]
    fn served_expiry_follows_rotated_files() {
        let dir = std::env::temp_dir().join(format!("plimsoll-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let first = write_pair(&dir, 30);
        let resolver =
            CertResolver::from_files(dir.join("tls.crt"), dir.join("tls.key")).expect("resolver");
        assert_eq!(resolver.served_not_after(), Some(first));

        // cert-manager rewrites both files; the next read sees the new certificate's expiry.
        let second = write_pair(&dir, 90);
        assert!(second > first + Duration::from_secs(50 * 86_400));
        assert_eq!(resolver.served_not_after(), Some(second));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
