//! `--self-signed` certificates: a CA and a serving certificate generated with rcgen and kept in
//! one Secret, so every replica serves a certificate the same `caBundle` verifies.
//!
//! The Secret (`kubernetes.io/tls` plus two entries):
//! - `tls.crt`, `tls.key`: the serving certificate and its key;
//! - `ca.crt`: every CA a client must trust, newest first — one CA normally, two while a CA
//!   rotation overlaps (the old CA stays until it expires, the serving certificate it signed
//!   expires no later than it);
//! - `ca.key`: the newest CA's key, so a renewed serving certificate is signed by a CA the
//!   registered `caBundle` already carries.
//!
//! This module generates and reads that material; when to renew and how replicas agree on it is
//! in [`crate::renewal`].

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::error::{Error, Result};

/// `tls.crt` (serving certificate), `tls.key`, `ca.crt` — the kubernetes.io/tls layout plus the CA.
pub const CERT_KEY: &str = "tls.crt";
/// Serving key entry.
pub const KEY_KEY: &str = "tls.key";
/// CA certificates entry (the `caBundle`).
pub const CA_KEY: &str = "ca.crt";
/// Newest CA's private key entry.
pub const CA_PRIVATE_KEY: &str = "ca.key";

/// Default lifetime of the serving certificate: one year.
pub const DEFAULT_SERVING_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);
/// Default lifetime of the CA: ten years.
pub const DEFAULT_CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Certificates start this much in the past (at most), so a client whose clock is a little
/// behind still accepts a certificate issued a moment ago.
const BACKDATE: Duration = Duration::from_secs(3600);

/// How long the generated certificates are valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetimes {
    /// Serving certificate.
    pub serving: Duration,
    /// CA.
    pub ca: Duration,
}

impl Lifetimes {
    /// Rejects settings under which renewal would never settle: a zero lifetime or check
    /// interval, or a CA that does not outlive two serving certificates (a serving certificate
    /// is cut to its CA's expiry and must still be fresh right after a renewal).
    pub fn check(&self, check_interval: Duration) -> Result<()> {
        if self.serving.is_zero() || check_interval.is_zero() {
            return Err(Error::Config(
                "--self-signed-validity and --self-signed-check-interval must be positive"
                    .to_owned(),
            ));
        }
        if self.ca < self.serving * 2 {
            return Err(Error::Config(
                "--self-signed-ca-validity must be at least twice --self-signed-validity"
                    .to_owned(),
            ));
        }
        Ok(())
    }
}

impl Default for Lifetimes {
    fn default() -> Self {
        Lifetimes {
            serving: DEFAULT_SERVING_VALIDITY,
            ca: DEFAULT_CA_VALIDITY,
        }
    }
}

/// CAs and the serving certificate the newest of them (or, during a CA rotation, an older one)
/// signed, PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertBundle {
    /// CA certificates, newest first (the webhook's `caBundle`).
    pub ca_pem: String,
    /// The newest CA's private key; `None` in Secrets written before renewal existed (the next
    /// renewal then starts a new CA).
    pub ca_key_pem: Option<String>,
    /// Serving certificate.
    pub cert_pem: String,
    /// Serving private key (PKCS#8).
    pub key_pem: String,
}

fn gen_err(e: impl std::fmt::Display) -> Error {
    Error::CertGen(e.to_string())
}

fn validity(params: &mut CertificateParams, now: SystemTime, not_after: SystemTime) {
    params.not_before = (now - BACKDATE).into();
    params.not_after = not_after.into();
}

/// Generates a CA valid for `lifetime` from `now`; returns its PEM and key.
fn new_ca(now: SystemTime, lifetime: Duration) -> Result<(String, KeyPair)> {
    let ca_key = KeyPair::generate().map_err(gen_err)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(gen_err)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "plimsoll-vpa-admission-ca");
    ca.distinguished_name = dn;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut ca, now, now + lifetime);
    let cert = ca.self_signed(&ca_key).map_err(gen_err)?;
    Ok((cert.pem(), ca_key))
}

/// Issues a serving certificate for `names` (DNS names or IP addresses), signed by the CA
/// `ca_pem`/`ca_key`, valid for `lifetime` but never past the CA's own expiry (so it is renewed
/// before the CA that verifies it disappears from the bundle).
fn issue_serving(
    ca_pem: &str,
    ca_key: KeyPair,
    names: &[String],
    now: SystemTime,
    lifetime: Duration,
) -> Result<(String, String)> {
    let ca_not_after = not_after(ca_pem)?;
    let issuer = Issuer::from_ca_cert_pem(ca_pem, ca_key).map_err(gen_err)?;
    let key = KeyPair::generate().map_err(gen_err)?;
    let mut leaf = CertificateParams::new(names.to_vec()).map_err(gen_err)?;
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CommonName,
        names
            .first()
            .map_or("plimsoll-vpa-admission", String::as_str),
    );
    leaf.distinguished_name = dn;
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    validity(&mut leaf, now, (now + lifetime).min(ca_not_after));
    let cert = leaf.signed_by(&key, &issuer).map_err(gen_err)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Generates a CA and a serving certificate for `names` (DNS names or IP addresses) with the
/// default lifetimes.
pub fn generate(names: &[String]) -> Result<CertBundle> {
    generate_with(names, SystemTime::now(), Lifetimes::default())
}

/// Generates a CA and a serving certificate for `names`, valid from `now` for `lifetimes`.
pub fn generate_with(
    names: &[String],
    now: SystemTime,
    lifetimes: Lifetimes,
) -> Result<CertBundle> {
    let (ca_pem, ca_key) = new_ca(now, lifetimes.ca)?;
    let ca_key_pem = ca_key.serialize_pem();
    let (cert_pem, key_pem) = issue_serving(&ca_pem, ca_key, names, now, lifetimes.serving)?;
    Ok(CertBundle {
        ca_pem,
        ca_key_pem: Some(ca_key_pem),
        cert_pem,
        key_pem,
    })
}

/// The certificates of a PEM bundle, in order.
fn pem_certs(pem: &str) -> Result<Vec<CertificateDer<'static>>> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::Tls(format!("certificate: {e}")))
}

/// Expiry (`notAfter`) of one DER certificate.
pub fn der_not_after(der: &CertificateDer<'_>) -> Result<SystemTime> {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref())
        .map_err(|e| Error::Tls(format!("certificate: {e}")))?;
    let secs = cert.validity().not_after.timestamp();
    let secs = u64::try_from(secs)
        .map_err(|_| Error::Tls("certificate: expires before 1970".to_owned()))?;
    Ok(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
}

/// Expiry of the first certificate in `pem`.
pub fn not_after(pem: &str) -> Result<SystemTime> {
    let certs = pem_certs(pem)?;
    let first = certs
        .first()
        .ok_or_else(|| Error::Tls("certificate: no CERTIFICATE block".to_owned()))?;
    der_not_after(first)
}

/// Re-encodes certificates as PEM.
fn to_pem(certs: &[CertificateDer<'_>]) -> String {
    certs.iter().map(|der| pem_block(der.as_ref())).collect()
}

fn pem_block(der: &[u8]) -> String {
    use base64::Engine as _;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in text.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// `bundle` without the CAs that expired before `now`; the newest CA (first) always stays.
fn prune_expired(bundle: &str, now: SystemTime) -> Result<String> {
    let certs = pem_certs(bundle)?;
    let kept: Vec<CertificateDer<'_>> = certs
        .iter()
        .enumerate()
        .filter(|(i, der)| *i == 0 || der_not_after(der).is_ok_and(|t| t > now))
        .map(|(_, der)| der.clone())
        .collect();
    Ok(to_pem(&kept))
}

impl CertBundle {
    /// Starts a CA rotation: a new CA (valid `lifetime`) goes first into the bundle, the CAs
    /// still valid stay behind it, and the serving certificate is kept — it is re-signed by the
    /// new CA only at its own renewal, after the new bundle has been registered.
    pub fn with_new_ca(&self, now: SystemTime, lifetime: Duration) -> Result<CertBundle> {
        let (ca_pem, ca_key) = new_ca(now, lifetime)?;
        let older = prune_expired(&self.ca_pem, now)?;
        Ok(CertBundle {
            ca_pem: format!("{ca_pem}{older}"),
            ca_key_pem: Some(ca_key.serialize_pem()),
            cert_pem: self.cert_pem.clone(),
            key_pem: self.key_pem.clone(),
        })
    }

    /// A new serving certificate for `names`, signed by the newest CA; expired CAs leave the
    /// bundle.
    pub fn with_new_serving(
        &self,
        names: &[String],
        now: SystemTime,
        lifetime: Duration,
    ) -> Result<CertBundle> {
        let ca_key_pem = self
            .ca_key_pem
            .as_deref()
            .ok_or_else(|| Error::CertGen("the CA's key is not stored".to_owned()))?;
        let ca_key = KeyPair::from_pem(ca_key_pem).map_err(gen_err)?;
        let newest = pem_certs(&self.ca_pem)?
            .into_iter()
            .next()
            .ok_or_else(|| Error::Tls("CA bundle: no CERTIFICATE block".to_owned()))?;
        let (cert_pem, key_pem) = issue_serving(&to_pem(&[newest]), ca_key, names, now, lifetime)?;
        Ok(CertBundle {
            ca_pem: prune_expired(&self.ca_pem, now)?,
            ca_key_pem: Some(ca_key_pem.to_owned()),
            cert_pem,
            key_pem,
        })
    }

    /// Number of CA certificates in the bundle.
    pub fn ca_count(&self) -> usize {
        pem_certs(&self.ca_pem).map_or(0, |c| c.len())
    }
}

/// Reads the bundle from a Secret; `None` when an entry is missing or not UTF-8.
pub fn from_secret(secret: &Secret) -> Option<CertBundle> {
    let data = secret.data.as_ref()?;
    let text = |k: &str| String::from_utf8(data.get(k)?.0.clone()).ok();
    Some(CertBundle {
        ca_pem: text(CA_KEY)?,
        ca_key_pem: text(CA_PRIVATE_KEY),
        cert_pem: text(CERT_KEY)?,
        key_pem: text(KEY_KEY)?,
    })
}

/// The Secret `namespace/name` holding `bundle`.
pub fn to_secret(namespace: &str, name: &str, bundle: &CertBundle) -> Secret {
    let entry = |s: &str| ByteString(s.as_bytes().to_vec());
    let mut data = BTreeMap::from([
        (CA_KEY.to_owned(), entry(&bundle.ca_pem)),
        (CERT_KEY.to_owned(), entry(&bundle.cert_pem)),
        (KEY_KEY.to_owned(), entry(&bundle.key_pem)),
    ]);
    if let Some(ca_key) = &bundle.ca_key_pem {
        data.insert(CA_PRIVATE_KEY.to_owned(), entry(ca_key));
    }
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([
                ("app.kubernetes.io/name".to_owned(), "plimsoll".to_owned()),
                (
                    "app.kubernetes.io/component".to_owned(),
                    "vpa-admission".to_owned(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(data),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests {
    use rustls::client::danger::ServerCertVerifier as _;

    use super::*;

    fn names() -> Vec<String> {
        vec!["svc.ns.svc".to_owned(), "127.0.0.1".to_owned()]
    }

    fn verifies(ca_bundle: &str, cert_pem: &str, now: SystemTime) -> bool {
        let mut roots = rustls::RootCertStore::empty();
        for der in pem_certs(ca_bundle).unwrap() {
            roots.add(der).unwrap();
        }
        let leaf = pem_certs(cert_pem).unwrap().remove(0);
        let provider = rustls::crypto::ring::default_provider();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            std::sync::Arc::new(provider),
        )
        .build()
        .unwrap();
        let name = rustls::pki_types::ServerName::try_from("svc.ns.svc").unwrap();
        let unix = rustls::pki_types::UnixTime::since_unix_epoch(
            now.duration_since(SystemTime::UNIX_EPOCH).unwrap(),
        );
        verifier
            .verify_server_cert(&leaf, &[], &name, &[], unix)
            .is_ok()
    }

    #[test]
    fn generated_pair_loads_and_round_trips_through_a_secret() {
        let bundle = generate(&names()).unwrap();
        crate::tls::certified_key(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes()).unwrap();
        assert!(bundle.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_ne!(bundle.ca_pem, bundle.cert_pem);
        assert!(bundle.ca_key_pem.is_some());
        let secret = to_secret("ns", "s", &bundle);
        assert_eq!(from_secret(&secret), Some(bundle.clone()));
        let mut legacy = secret.clone();
        legacy.data.as_mut().unwrap().remove(CA_PRIVATE_KEY);
        assert_eq!(from_secret(&legacy).unwrap().ca_key_pem, None);
        let mut broken = secret;
        broken.data.as_mut().unwrap().remove(KEY_KEY);
        assert_eq!(from_secret(&broken), None);
    }

    #[test]
    fn lifetimes_are_honoured_and_the_serving_cert_never_outlives_its_ca() {
        // Certificates carry whole seconds.
        let since_epoch = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(since_epoch.as_secs());
        let day = Duration::from_secs(24 * 3600);
        let bundle = generate_with(
            &names(),
            now,
            Lifetimes {
                serving: 30 * day,
                ca: 300 * day,
            },
        )
        .unwrap();
        let secs = |t: SystemTime| t.duration_since(now).unwrap().as_secs();
        assert_eq!(secs(not_after(&bundle.cert_pem).unwrap()), 30 * 24 * 3600);
        assert_eq!(secs(not_after(&bundle.ca_pem).unwrap()), 300 * 24 * 3600);
        // Ten days before the CA expires, a 30-day certificate is cut to the CA's expiry.
        let late = now + 290 * day;
        let renewed = bundle.with_new_serving(&names(), late, 30 * day).unwrap();
        assert_eq!(
            not_after(&renewed.cert_pem).unwrap(),
            not_after(&bundle.ca_pem).unwrap()
        );
    }

    #[test]
    fn renewed_serving_cert_keeps_the_ca_and_verifies_against_the_old_bundle() {
        let now = SystemTime::now();
        let bundle = generate(&names()).unwrap();
        let renewed = bundle
            .with_new_serving(&names(), now, DEFAULT_SERVING_VALIDITY)
            .unwrap();
        assert_eq!(renewed.ca_pem, bundle.ca_pem);
        assert_eq!(renewed.ca_key_pem, bundle.ca_key_pem);
        assert_ne!(renewed.cert_pem, bundle.cert_pem);
        assert!(verifies(&bundle.ca_pem, &renewed.cert_pem, now));
    }

    #[test]
    fn ca_rotation_overlaps_then_drops_the_expired_ca() {
        let now = SystemTime::now();
        let hour = Duration::from_secs(3600);
        let lifetimes = Lifetimes {
            serving: 2 * hour,
            ca: 6 * hour,
        };
        let first = generate_with(&names(), now, lifetimes).unwrap();
        // Phase 1: new CA in front, old CA kept, serving certificate unchanged and still
        // verified by the new bundle.
        let rotated = first.with_new_ca(now + 4 * hour, lifetimes.ca).unwrap();
        assert_eq!(rotated.ca_count(), 2);
        assert!(rotated.ca_pem.ends_with(&first.ca_pem));
        assert_eq!(rotated.cert_pem, first.cert_pem);
        assert_ne!(rotated.ca_key_pem, first.ca_key_pem);
        assert!(verifies(&rotated.ca_pem, &first.cert_pem, now + hour));
        // Phase 2: the serving certificate renewed by the new CA, which the old bundle
        // does not verify (hence register before serving it).
        let later = now + 5 * hour;
        let renewed = rotated
            .with_new_serving(&names(), later, lifetimes.serving)
            .unwrap();
        assert_eq!(renewed.ca_count(), 2, "old CA still valid: kept");
        assert!(verifies(&renewed.ca_pem, &renewed.cert_pem, later));
        assert!(!verifies(&first.ca_pem, &renewed.cert_pem, later));
        // After the old CA expired it leaves the bundle.
        let after = now + 6 * hour + Duration::from_secs(60);
        let pruned = renewed
            .with_new_serving(&names(), after, lifetimes.serving)
            .unwrap();
        assert_eq!(pruned.ca_count(), 1);
        assert!(rotated.ca_pem.starts_with(&pruned.ca_pem));
    }

    #[test]
    fn renewal_without_a_stored_ca_key_is_an_error() {
        let mut legacy = generate(&names()).unwrap();
        legacy.ca_key_pem = None;
        assert!(
            legacy
                .with_new_serving(&names(), SystemTime::now(), DEFAULT_SERVING_VALIDITY)
                .is_err()
        );
    }
}
