//! `--self-signed`: a CA and a serving certificate generated with rcgen and kept in one Secret,
//! so every replica serves a certificate the same `caBundle` verifies.
//!
//! Create-or-get: a replica reads the Secret; when it is absent (or lacks a key) it generates a
//! pair and creates it; a 409 (another replica won the race) makes it read the winner's Secret.
//! Certificates are valid for ten years; delete the Secret and restart to rotate them.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::PostParams;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use crate::error::{Error, Result};

/// `tls.crt` (serving certificate), `tls.key`, `ca.crt` — the kubernetes.io/tls layout plus the CA.
pub const CERT_KEY: &str = "tls.crt";
/// Serving key entry.
pub const KEY_KEY: &str = "tls.key";
/// CA certificate entry.
pub const CA_KEY: &str = "ca.crt";

/// A CA and the serving certificate it signed, PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertBundle {
    /// CA certificate (the webhook's `caBundle`).
    pub ca_pem: String,
    /// Serving certificate.
    pub cert_pem: String,
    /// Serving private key (PKCS#8).
    pub key_pem: String,
}

fn gen_err(e: impl std::fmt::Display) -> Error {
    Error::CertGen(e.to_string())
}

fn ten_years(params: &mut CertificateParams) {
    let now = std::time::SystemTime::now();
    params.not_before = (now - std::time::Duration::from_secs(3600)).into();
    params.not_after = (now + std::time::Duration::from_secs(10 * 365 * 24 * 3600)).into();
}

/// Generates a CA and a serving certificate for `names` (DNS names or IP addresses).
pub fn generate(names: &[String]) -> Result<CertBundle> {
    let ca_key = KeyPair::generate().map_err(gen_err)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(gen_err)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "plimsoll-vpa-admission-ca");
    ca.distinguished_name = dn;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ten_years(&mut ca);
    let ca_cert = ca.self_signed(&ca_key).map_err(gen_err)?;
    let issuer = Issuer::new(ca, ca_key);

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
    ten_years(&mut leaf);
    let cert = leaf.signed_by(&key, &issuer).map_err(gen_err)?;
    Ok(CertBundle {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

fn from_secret(secret: &Secret) -> Option<CertBundle> {
    let data = secret.data.as_ref()?;
    let text = |k: &str| String::from_utf8(data.get(k)?.0.clone()).ok();
    Some(CertBundle {
        ca_pem: text(CA_KEY)?,
        cert_pem: text(CERT_KEY)?,
        key_pem: text(KEY_KEY)?,
    })
}

fn to_secret(namespace: &str, name: &str, bundle: &CertBundle) -> Secret {
    let entry = |s: &str| ByteString(s.as_bytes().to_vec());
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
        data: Some(BTreeMap::from([
            (CA_KEY.to_owned(), entry(&bundle.ca_pem)),
            (CERT_KEY.to_owned(), entry(&bundle.cert_pem)),
            (KEY_KEY.to_owned(), entry(&bundle.key_pem)),
        ])),
        ..Secret::default()
    }
}

/// Reads the shared certificates from Secret `namespace/name`, creating them first if needed.
pub async fn get_or_create(
    client: kube::Client,
    namespace: &str,
    name: &str,
    names: &[String],
) -> Result<CertBundle> {
    let api: Api<Secret> = Api::namespaced(client, namespace);
    let context = || format!("Secret {namespace}/{name}");
    let existing = api
        .get_opt(name)
        .await
        .map_err(|e| Error::kube(context(), e))?;
    if let Some(bundle) = existing.as_ref().and_then(from_secret) {
        tracing::info!(secret = %name, %namespace, "using the shared self-signed certificates");
        return Ok(bundle);
    }
    let bundle = generate(names)?;
    let secret = to_secret(namespace, name, &bundle);
    let written = match existing {
        // Present but incomplete: replace it (resourceVersion makes a concurrent fix a 409).
        Some(old) => {
            let mut secret = secret;
            secret.metadata.resource_version = old.metadata.resource_version;
            api.replace(name, &PostParams::default(), &secret).await
        }
        None => api.create(&PostParams::default(), &secret).await,
    };
    match written {
        Ok(_) => {
            tracing::info!(secret = %name, %namespace, "generated self-signed certificates");
            Ok(bundle)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            // Another replica wrote first: use its certificates.
            let winner = api.get(name).await.map_err(|e| Error::kube(context(), e))?;
            from_secret(&winner).ok_or_else(|| {
                Error::CertGen(format!("{} lacks {CA_KEY}/{CERT_KEY}/{KEY_KEY}", context()))
            })
        }
        Err(e) => Err(Error::kube(context(), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_pair_loads_and_round_trips_through_a_secret() {
        let names = vec!["svc.ns.svc".to_owned(), "127.0.0.1".to_owned()];
        let bundle = generate(&names).unwrap();
        crate::tls::certified_key(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes()).unwrap();
        assert!(bundle.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_ne!(bundle.ca_pem, bundle.cert_pem);
        let secret = to_secret("ns", "s", &bundle);
        assert_eq!(from_secret(&secret), Some(bundle));
        let mut broken = secret;
        broken.data.as_mut().unwrap().remove(KEY_KEY);
        assert_eq!(from_secret(&broken), None);
    }
}
