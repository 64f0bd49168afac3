//! The admission status Lease: renewed every `--status-lease-update-interval` (10 s) while the
//! webhook is healthy, so an updater (Plimsoll's or upstream's) knows admission is working and
//! evicted pods will come back with the recommended resources.
//!
//! Same object and semantics as upstream (`pkg/utils/status`): Lease `vpa-admission-controller`
//! in `--status-lease-namespace` (default `$NAMESPACE`, else `kube-system`), `holderIdentity` =
//! this replica, `renewTime` = now, `leaseDurationSeconds` = the interval. Every replica renews
//! it; a 409 means another replica just did, which is as good. Created when missing.
//!
//! With `--lease-owner-deployment`, the Lease names the webhook's Deployment as a (non-controller)
//! owner, added at the next renewal to a Lease written without it, so the garbage collector
//! deletes it after an uninstall.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use kube::Api;
use kube::api::PostParams;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::metrics::Metrics;

/// Upstream's status Lease name (`AdmissionControllerStatusName`).
pub const DEFAULT_LEASE_NAME: &str = "vpa-admission-controller";
/// Upstream's default namespace for it when `$NAMESPACE` is unset.
pub const DEFAULT_LEASE_NAMESPACE: &str = "kube-system";

/// Which Lease, renewed how often, by whom.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusLease {
    /// Lease name.
    pub name: String,
    /// Lease namespace.
    pub namespace: String,
    /// Renewal interval (also written as `leaseDurationSeconds`).
    pub interval: Duration,
    /// `holderIdentity`.
    pub identity: String,
    /// The owner to name (`--lease-owner-deployment`, resolved at start).
    pub owner: Option<OwnerReference>,
}

/// Renews the Lease once (creating it if missing).
pub async fn renew(client: kube::Client, lease: &StatusLease) -> Result<()> {
    let api: Api<Lease> = Api::namespaced(client, &lease.namespace);
    let context = || format!("status Lease {}/{}", lease.namespace, lease.name);
    let now = MicroTime(jiff::Timestamp::now());
    let current = api
        .get_opt(&lease.name)
        .await
        .map_err(|e| Error::kube(context(), e))?;
    let result = if let Some(mut current) = current {
        {
            let spec = current.spec.get_or_insert_with(LeaseSpec::default);
            spec.renew_time = Some(now);
            spec.holder_identity = Some(lease.identity.clone());
            if let Some(owner) = &lease.owner {
                let owners = current
                    .metadata
                    .owner_references
                    .get_or_insert_with(Vec::new);
                if !owners.iter().any(|o| o.uid == owner.uid) {
                    owners.push(owner.clone());
                }
            }
            api.replace(&lease.name, &PostParams::default(), &current)
                .await
                .map(|_| ())
        }
    } else {
        {
            let new = Lease {
                metadata: ObjectMeta {
                    name: Some(lease.name.clone()),
                    namespace: Some(lease.namespace.clone()),
                    owner_references: lease.owner.clone().map(|o| vec![o]),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(lease.identity.clone()),
                    lease_duration_seconds: Some(
                        i32::try_from(lease.interval.as_secs()).unwrap_or(i32::MAX),
                    ),
                    renew_time: Some(now),
                    ..LeaseSpec::default()
                }),
            };
            api.create(&PostParams::default(), &new).await.map(|_| ())
        }
    };
    match result {
        Ok(()) => Ok(()),
        // Another replica renewed or created it at the same moment.
        Err(e) if is_conflict(&e) => Ok(()),
        Err(e) => Err(Error::kube(context(), e)),
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// Renews every interval while `healthy()` holds, until `shutdown`.
pub async fn run(
    client: kube::Client,
    lease: StatusLease,
    metrics: Metrics,
    healthy: impl Fn() -> bool + Send,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(lease.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if !healthy() {
            continue;
        }
        // Bounded by the interval, as upstream: a slow apiserver must not stack renewals.
        let outcome = tokio::time::timeout(lease.interval, renew(client.clone(), &lease)).await;
        match outcome {
            Ok(Ok(())) => metrics.lease_renewal(true),
            Ok(Err(e)) => {
                metrics.lease_renewal(false);
                tracing::warn!(error = %e, "status Lease renewal failed");
            }
            Err(_) => {
                metrics.lease_renewal(false);
                tracing::warn!(lease = %lease.name, "status Lease renewal timed out");
            }
        }
    }
}
