//! `--self-signed` renewal: every replica checks the shared Secret at start and every
//! `--self-signed-check-interval`, renews what is due, and serves what the Secret holds.
//!
//! - A certificate is due in the last third of its configured lifetime ([`renewal_due`], as
//!   cert-manager's default `renewBefore`): a one-year serving certificate four months before it
//!   expires, a ten-year CA at 6⅔ years.
//! - Replicas agree through the Secret alone: a renewal is written with the `resourceVersion` it
//!   was computed from, so when two replicas renew at once the second gets a 409, re-reads and
//!   uses the first one's certificates instead of writing its own.
//! - The CA is kept while it is valid (the registered `caBundle` stays valid). Its rotation has
//!   two steps: first the new CA joins the bundle in front of the old one (the serving
//!   certificate is unchanged), and a replica renews the serving certificate with the new CA
//!   only once it has itself published a bundle carrying that CA into the webhook configuration
//!   (its `caBundle`, [`Publish`]).
//!   The old CA leaves the bundle when it expires; the serving certificates it signed expire no
//!   later than it.
//! - The Secret may exist before the first replica starts: the chart and deploy/ install it
//!   empty (type Opaque, no data), so that uninstalling removes it. An existing Secret keeps its
//!   type (immutable in the API), labels and annotations; only `data` is written. A Secret that
//!   is absent is created (`kubernetes.io/tls`).
//! - A new pair reaches the TLS listener through [`CertResolver::install`], the same swap the
//!   certificate-file mode's reload uses: the next handshake presents it, no restart.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use tokio_util::sync::CancellationToken;

use crate::certs::{self, CertBundle, Lifetimes};
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::registration::Publish;
use crate::tls::{self, CertResolver};

/// True when a certificate expiring at `not_after` should be renewed at `now`: it expires within
/// `window` (or already has).
pub fn renewal_due(not_after: SystemTime, now: SystemTime, window: Duration) -> bool {
    not_after
        .duration_since(now)
        .map_or(true, |left| left <= window)
}

/// The renewal window of a certificate issued for `lifetime`: its last third.
pub fn window(lifetime: Duration) -> Duration {
    lifetime / 3
}

/// What the Secret holds, as far as renewal cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expiry {
    /// Expiry of the newest CA; `None` when the bundle does not parse.
    pub ca: Option<SystemTime>,
    /// Whether the newest CA's key is stored (Secrets from before renewal lack it).
    pub ca_key: bool,
    /// Expiry of the serving certificate; `None` when it does not load with its key.
    pub serving: Option<SystemTime>,
}

impl Expiry {
    /// Reads the expiries from a bundle.
    pub fn of(bundle: &CertBundle) -> Expiry {
        let loads =
            tls::certified_key(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes()).is_ok();
        Expiry {
            ca: certs::not_after(&bundle.ca_pem).ok(),
            ca_key: bundle.ca_key_pem.is_some(),
            serving: certs::not_after(&bundle.cert_pem).ok().filter(|_| loads),
        }
    }
}

/// What a check does to the Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing is due.
    Keep,
    /// Nothing usable is stored: generate a new CA and serving certificate.
    Create,
    /// The CA is due (or its key is not stored): a new CA joins the bundle.
    RotateCa,
    /// The serving certificate is due: the newest CA signs a new one.
    RenewServing,
}

/// The renewal decision. A CA rotation goes first; the serving certificate is renewed at a later
/// check, after the bundle with the new CA has been registered.
pub fn decide(expiry: &Expiry, now: SystemTime, lifetimes: Lifetimes) -> Action {
    let Some(ca) = expiry.ca else {
        return Action::Create;
    };
    if !expiry.ca_key && expiry.serving.is_none() {
        // Nothing to keep and nothing to sign with.
        return Action::Create;
    }
    if !expiry.ca_key || renewal_due(ca, now, window(lifetimes.ca)) {
        return Action::RotateCa;
    }
    match expiry.serving {
        Some(serving) if !renewal_due(serving, now, window(lifetimes.serving)) => Action::Keep,
        _ => Action::RenewServing,
    }
}

/// The shared Secret and what goes into new certificates.
#[derive(Clone)]
pub struct SecretKeeper {
    /// The Secrets of the webhook's namespace.
    pub api: Api<Secret>,
    /// Namespace (for the object and messages).
    pub namespace: String,
    /// Secret name.
    pub name: String,
    /// DNS names and IP addresses of the serving certificate.
    pub names: Vec<String>,
    /// Lifetimes of new certificates.
    pub lifetimes: Lifetimes,
}

impl SecretKeeper {
    fn context(&self) -> String {
        format!("Secret {}/{}", self.namespace, self.name)
    }

    /// Reads the Secret, writes whatever [`decide`] says is due, and returns the bundle the
    /// Secret holds afterwards. `registered(ca_bundle)` tells whether that bundle is known to be
    /// in the webhook registration; a serving certificate is renewed only when it is (the new
    /// one is signed by the bundle's newest CA, which clients must trust first), unless the
    /// stored one does not load at all.
    pub async fn sync(&self, registered: impl Fn(&str) -> bool) -> Result<CertBundle> {
        // Each conflict means another replica wrote; its certificates are fresh, so the next
        // read decides Keep. Three rounds cover a writer racing with a replaced Secret.
        for _ in 0..3 {
            let existing = self
                .api
                .get_opt(&self.name)
                .await
                .map_err(|e| Error::kube(self.context(), e))?;
            let stored = existing.as_ref().and_then(certs::from_secret);
            let now = SystemTime::now();
            let expiry = stored.as_ref().map(Expiry::of);
            let action = expiry.map_or(Action::Create, |e| decide(&e, now, self.lifetimes));
            // Deferring a renewal only helps while the stored certificate can still be served.
            let servable = expiry.is_some_and(|e| e.serving.is_some());
            let next = match (action, &stored) {
                (Action::Keep, Some(bundle)) => return Ok(bundle.clone()),
                (Action::RenewServing, Some(bundle)) if servable && !registered(&bundle.ca_pem) => {
                    tracing::info!(secret = %self.context(), "serving certificate due; renewing once the CA bundle is registered");
                    return Ok(bundle.clone());
                }
                (Action::RotateCa, Some(bundle)) => bundle.with_new_ca(now, self.lifetimes.ca)?,
                (Action::RenewServing, Some(bundle)) => {
                    bundle.with_new_serving(&self.names, now, self.lifetimes.serving)?
                }
                _ => certs::generate_with(&self.names, now, self.lifetimes)?,
            };
            let mut secret = certs::to_secret(&self.namespace, &self.name, &next);
            let written = match existing {
                Some(old) => {
                    // Optimistic: a concurrent write by another replica makes this a 409.
                    secret.metadata.resource_version = old.metadata.resource_version;
                    secret.metadata.labels = old.metadata.labels.or(secret.metadata.labels);
                    secret.metadata.annotations = old.metadata.annotations;
                    // The chart's empty Secret is Opaque (or has no type, which means Opaque),
                    // and a type cannot change.
                    secret.type_ = old.type_;
                    self.api
                        .replace(&self.name, &PostParams::default(), &secret)
                        .await
                }
                None => self.api.create(&PostParams::default(), &secret).await,
            };
            match written {
                Ok(_) => {
                    tracing::info!(secret = %self.context(), ?action, "self-signed certificates written");
                    return Ok(next);
                }
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    tracing::info!(secret = %self.context(), ?action, "another replica wrote the certificates first; using theirs");
                }
                Err(e) => return Err(Error::kube(self.context(), e)),
            }
        }
        Err(Error::CertGen(format!(
            "{}: kept conflicting with other writers",
            self.context()
        )))
    }
}

/// What the renewal loop started from: the bundle served and (when publishing) published at
/// start-up.
pub struct Renewal {
    /// The Secret.
    pub keeper: SecretKeeper,
    /// Where the serving certificate is swapped.
    pub resolver: Arc<CertResolver>,
    /// Where the CA bundle goes when it changes.
    pub publish: Option<Publish>,
    /// Whether `current`'s CA bundle is published (false when publishing at start-up failed).
    pub published: bool,
    /// The bundle serving now.
    pub current: CertBundle,
    /// Time between checks.
    pub interval: Duration,
    /// Where checks and the served certificate's expiry are reported.
    pub metrics: Metrics,
}

impl Renewal {
    /// Checks now and then every `interval` until `shutdown`; errors are logged and retried at
    /// the next check (the certificate in use stays valid for the whole renewal window).
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut registered =
            (self.publish.is_some() && self.published).then(|| self.current.ca_pem.clone());
        loop {
            let checked = self.check(&mut registered).await;
            if let Err(e) = &checked {
                tracing::warn!(error = %e, "self-signed certificate check failed; retrying at the next check");
            }
            self.metrics.certificate_check(
                certs::not_after(&self.current.cert_pem).ok(),
                checked.is_ok(),
            );
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(self.interval) => {}
            }
        }
    }

    async fn check(&mut self, registered: &mut Option<String>) -> Result<()> {
        let has_registration = self.publish.is_some();
        let bundle = {
            let known = registered.clone();
            self.keeper
                .sync(move |ca| !has_registration || known.as_deref() == Some(ca))
                .await?
        };
        if let Some(publish) = &self.publish
            && registered.as_deref() != Some(bundle.ca_pem.as_str())
        {
            // The bundle goes into the configuration before a certificate it verifies is
            // served; on failure the previous (still valid) certificate stays.
            let client = self.keeper.api.clone().into_client();
            publish.publish(client, bundle.ca_pem.as_bytes()).await?;
            tracing::info!(cas = bundle.ca_count(), "webhook caBundle updated");
            *registered = Some(bundle.ca_pem.clone());
        }
        if bundle.cert_pem != self.current.cert_pem {
            let key = tls::certified_key(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes())?;
            self.resolver.install(key);
        }
        self.current = bundle;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 3600);

    fn at(days: u32) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000) + DAY * days
    }

    fn lifetimes() -> Lifetimes {
        Lifetimes {
            serving: 300 * DAY,
            ca: 3000 * DAY,
        }
    }

    #[test]
    fn due_in_the_window_and_after_expiry() {
        let window = 100 * DAY;
        assert!(!renewal_due(at(300), at(0), window));
        assert!(!renewal_due(at(300), at(199), window));
        assert!(renewal_due(at(300), at(200), window), "window edge");
        assert!(renewal_due(at(300), at(250), window));
        assert!(renewal_due(at(300), at(301), window), "expired");
        assert_eq!(super::window(300 * DAY), window);
    }

    #[test]
    fn decisions() {
        let fresh = Expiry {
            ca: Some(at(3000)),
            ca_key: true,
            serving: Some(at(300)),
        };
        assert_eq!(decide(&fresh, at(10), lifetimes()), Action::Keep);
        assert_eq!(decide(&fresh, at(200), lifetimes()), Action::RenewServing);
        let unloadable = Expiry {
            serving: None,
            ..fresh
        };
        assert_eq!(
            decide(&unloadable, at(10), lifetimes()),
            Action::RenewServing
        );
        // The CA goes first, even when the serving certificate is due too.
        assert_eq!(decide(&fresh, at(2000), lifetimes()), Action::RotateCa);
        let legacy = Expiry {
            ca_key: false,
            ..fresh
        };
        assert_eq!(decide(&legacy, at(10), lifetimes()), Action::RotateCa);
        let garbage = Expiry { ca: None, ..fresh };
        assert_eq!(decide(&garbage, at(10), lifetimes()), Action::Create);
        let nothing_usable = Expiry {
            ca_key: false,
            serving: None,
            ..fresh
        };
        assert_eq!(decide(&nothing_usable, at(10), lifetimes()), Action::Create);
    }

    #[test]
    fn a_renewed_bundle_is_kept_until_its_own_window() {
        // Whatever a check writes, the next check must not renew again (no renewal loop), as
        // long as the CA outlives two serving lifetimes (the flags enforce it).
        let names = vec!["svc.ns.svc".to_owned()];
        let now = SystemTime::now();
        let l = Lifetimes {
            serving: 30 * DAY,
            ca: 60 * DAY,
        };
        let first = certs::generate_with(&names, now, l).unwrap();
        assert_eq!(decide(&Expiry::of(&first), now, l), Action::Keep);
        // Serving due at day 20; renewed, the next one is fine.
        let t = now + 21 * DAY;
        assert_eq!(decide(&Expiry::of(&first), t, l), Action::RenewServing);
        let second = first.with_new_serving(&names, t, l.serving).unwrap();
        assert_eq!(decide(&Expiry::of(&second), t, l), Action::Keep);
        // CA due at day 40; rotated, then the serving certificate (capped at the old CA's
        // expiry, day 60) is due at day 41 and renewed by the new CA.
        let t = now + 41 * DAY;
        assert_eq!(decide(&Expiry::of(&second), t, l), Action::RotateCa);
        let third = second.with_new_ca(t, l.ca).unwrap();
        assert_eq!(decide(&Expiry::of(&third), t, l), Action::RenewServing);
        let fourth = third.with_new_serving(&names, t, l.serving).unwrap();
        assert_eq!(decide(&Expiry::of(&fourth), t, l), Action::Keep);
    }
}
