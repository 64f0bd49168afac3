//! Credentials presented to Prometheus: none, a bearer token, or basic auth, each secret part
//! given literally, in a file, or in a key of a Kubernetes Secret.
//!
//! Rotation: a file is read before every request (a projected ServiceAccount token or a
//! remounted Secret volume is swapped in place, and reading a few hundred bytes costs nothing next
//! to the query). A Secret is read through the API and kept for at most `--prometheus-secret-refresh`;
//! a 401 or 403 drops it, and when the re-read value differs the request is sent once more with
//! it, so a rotated token is picked up on the first refusal rather than at the next refresh.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use tokio::sync::Mutex;

/// A key of a Kubernetes Secret: `NAMESPACE/NAME[:KEY]` on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretKeyRef {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
    /// The key in `data` (or `stringData` as stored).
    pub key: String,
}

impl SecretKeyRef {
    /// Parses `NAMESPACE/NAME[:KEY]`, with `default_key` when no key is given.
    pub fn parse(input: &str, default_key: &str) -> Result<Self, String> {
        let (object, key) = input.split_once(':').unwrap_or((input, default_key));
        let (namespace, name) = object
            .split_once('/')
            .ok_or_else(|| format!("{input:?}: expected NAMESPACE/NAME[:KEY]"))?;
        if namespace.is_empty() || name.is_empty() || key.is_empty() || name.contains('/') {
            return Err(format!("{input:?}: expected NAMESPACE/NAME[:KEY]"));
        }
        Ok(Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            key: key.to_owned(),
        })
    }
}

impl std::fmt::Display for SecretKeyRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Secret {}/{} key {}",
            self.namespace, self.name, self.key
        )
    }
}

/// Where one secret string (a token, a password) comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// Given on the command line or in the environment (upstream's `--prometheus-bearer-token`,
    /// `--password`); prefer a file or a Secret.
    Literal(String),
    /// A file, read before every request; surrounding whitespace is trimmed.
    File(PathBuf),
    /// A key of a Secret, read through the Kubernetes API (needs `get` on that Secret).
    Secret(SecretKeyRef),
}

impl std::fmt::Debug for SecretSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SecretSource::Literal(_) => f.write_str("Literal(<redacted>)"),
            SecretSource::File(path) => f.debug_tuple("File").field(path).finish(),
            SecretSource::Secret(r) => f.debug_tuple("Secret").field(r).finish(),
        }
    }
}

/// How requests authenticate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Auth {
    /// No `Authorization` header.
    #[default]
    None,
    /// `Authorization: Bearer <token>`.
    Bearer(SecretSource),
    /// `Authorization: Basic base64(<username>:<password>)`.
    Basic {
        /// The user name.
        username: String,
        /// The password.
        password: SecretSource,
    },
}

impl Auth {
    /// Whether the secret part is read from a Secret (and a kube client is needed).
    pub fn needs_kube(&self) -> bool {
        matches!(
            self,
            Auth::Bearer(SecretSource::Secret(_))
                | Auth::Basic {
                    password: SecretSource::Secret(_),
                    ..
                }
        )
    }

    fn source(&self) -> Option<&SecretSource> {
        match self {
            Auth::None => None,
            Auth::Bearer(source)
            | Auth::Basic {
                password: source, ..
            } => Some(source),
        }
    }
}

/// The credentials of one client, with the cached Secret value.
pub(crate) struct Credentials {
    auth: Auth,
    kube: Option<kube::Client>,
    refresh: Duration,
    cached: Mutex<Option<(Arc<str>, Instant)>>,
}

impl Credentials {
    pub(crate) fn new(auth: Auth, kube: Option<kube::Client>, refresh: Duration) -> Self {
        Self {
            auth,
            kube,
            refresh,
            cached: Mutex::new(None),
        }
    }

    /// Whether any credential is configured.
    pub(crate) fn configured(&self) -> bool {
        self.auth.source().is_some()
    }

    /// The `Authorization` header value, or `None` without credentials.
    pub(crate) async fn header(&self) -> Result<Option<String>, String> {
        let Some(source) = self.auth.source() else {
            return Ok(None);
        };
        let secret = self.read(source).await?;
        Ok(Some(match &self.auth {
            Auth::Basic { username, .. } => format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{username}:{secret}"))
            ),
            _ => format!("Bearer {secret}"),
        }))
    }

    /// After a 401/403: forget the cached Secret value so that the next [`Self::header`] reads
    /// it again. Returns whether a re-read can give a different value (a file or a Secret).
    pub(crate) async fn forget(&self) -> bool {
        *self.cached.lock().await = None;
        matches!(
            self.auth.source(),
            Some(SecretSource::File(_) | SecretSource::Secret(_))
        )
    }

    async fn read(&self, source: &SecretSource) -> Result<Arc<str>, String> {
        match source {
            SecretSource::Literal(value) => Ok(Arc::from(value.as_str())),
            SecretSource::File(path) => std::fs::read_to_string(path)
                .map(|s| Arc::from(s.trim()))
                .map_err(|e| format!("cannot read credentials file {}: {e}", path.display())),
            SecretSource::Secret(key_ref) => {
                let mut cached = self.cached.lock().await;
                if let Some((value, read_at)) = cached.as_ref()
                    && read_at.elapsed() < self.refresh
                {
                    return Ok(value.clone());
                }
                let value = self.read_secret(key_ref).await?;
                *cached = Some((value.clone(), Instant::now()));
                Ok(value)
            }
        }
    }

    async fn read_secret(&self, key_ref: &SecretKeyRef) -> Result<Arc<str>, String> {
        let client = self
            .kube
            .clone()
            .ok_or_else(|| format!("{key_ref}: no Kubernetes client to read it with"))?;
        let secrets: kube::Api<Secret> = kube::Api::namespaced(client, &key_ref.namespace);
        let secret = secrets
            .get(&key_ref.name)
            .await
            .map_err(|e| format!("cannot read {key_ref}: {}", crate::api_message(&e)))?;
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(&key_ref.key))
            .map(|b| b.0.clone())
            .or_else(|| {
                secret
                    .string_data
                    .as_ref()
                    .and_then(|d| d.get(&key_ref.key))
                    .map(|s| s.clone().into_bytes())
            })
            .ok_or_else(|| format!("{key_ref}: no such key"))?;
        let text =
            String::from_utf8(bytes).map_err(|_| format!("{key_ref}: the value is not UTF-8"))?;
        Ok(Arc::from(text.trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_refs_parse() {
        assert_eq!(
            SecretKeyRef::parse("monitoring/prom-token", "token").unwrap(),
            SecretKeyRef {
                namespace: "monitoring".into(),
                name: "prom-token".into(),
                key: "token".into()
            }
        );
        assert_eq!(
            SecretKeyRef::parse("monitoring/prom:bearer", "token")
                .unwrap()
                .key,
            "bearer"
        );
        for bad in ["prom", "/prom", "ns/", "ns/a/b", "ns/a:"] {
            assert!(SecretKeyRef::parse(bad, "token").is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn headers_and_file_rotation() {
        let creds = Credentials::new(
            Auth::Basic {
                username: "admin".into(),
                password: SecretSource::Literal("s3cret".into()),
            },
            None,
            Duration::from_secs(60),
        );
        // base64("admin:s3cret")
        assert_eq!(
            creds.header().await.unwrap().as_deref(),
            Some("Basic YWRtaW46czNjcmV0")
        );
        assert!(!creds.forget().await);

        let path = std::env::temp_dir().join(format!("plimsoll-token-{}", std::process::id()));
        std::fs::write(&path, "first\n").unwrap();
        let creds = Credentials::new(
            Auth::Bearer(SecretSource::File(path.clone())),
            None,
            Duration::from_secs(60),
        );
        assert_eq!(
            creds.header().await.unwrap().as_deref(),
            Some("Bearer first")
        );
        std::fs::write(&path, "second").unwrap();
        assert_eq!(
            creds.header().await.unwrap().as_deref(),
            Some("Bearer second")
        );
        assert!(creds.forget().await);
        std::fs::remove_file(&path).unwrap();
        let err = creds.header().await.unwrap_err();
        assert!(err.contains(&path.display().to_string()), "{err}");
    }

    #[test]
    fn literals_are_not_printed() {
        let text = format!("{:?}", Auth::Bearer(SecretSource::Literal("abc".into())));
        assert!(!text.contains("abc"), "{text}");
    }
}
