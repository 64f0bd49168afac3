//! Is the admission webhook alive? The upstream contract, kept so that a Plimsoll webhook keeps
//! an upstream updater evicting and vice versa:
//!
//! * the webhook renews a `coordination.k8s.io/v1` Lease named `vpa-admission-controller`
//!   (upstream `status.AdmissionControllerStatusName`) in the namespace from `$NAMESPACE`, else
//!   `kube-system`;
//! * the updater treats the status as valid while `creationTimestamp + 1m` or
//!   `spec.renewTime + 1m` lies in the future (upstream `isStatusValid`), and evicts nothing
//!   otherwise — a pod evicted while the webhook is down would come back with its old requests.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

use crate::error::{Error, Result};

/// Name of the webhook's status Lease (upstream constant).
pub const STATUS_LEASE_NAME: &str = "vpa-admission-controller";

/// How old the last renewal may be (upstream `AdmissionControllerStatusTimeout`).
pub const STATUS_TIMEOUT: SignedDuration = SignedDuration::from_mins(1);

/// The verdict on the webhook status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Renewed (or created) within the timeout.
    Valid,
    /// The Lease exists but is older than the timeout; holds the last renewal if any.
    Stale(Option<Timestamp>),
    /// There is no such Lease.
    Missing,
}

/// Upstream `isStatusValid`: created or renewed less than `timeout` before `now`.
pub fn is_valid(lease: &Lease, timeout: SignedDuration, now: Timestamp) -> bool {
    let fresh = |t: Timestamp| t + timeout > now;
    lease
        .metadata
        .creation_timestamp
        .as_ref()
        .is_some_and(|t| fresh(t.0))
        || lease
            .spec
            .as_ref()
            .and_then(|s| s.renew_time.as_ref())
            .is_some_and(|t| fresh(t.0))
}

/// Reads the status Lease in `namespace` and judges it at `now`.
pub async fn check(client: &kube::Client, namespace: &str, now: Timestamp) -> Result<Status> {
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let lease = api
        .get_opt(STATUS_LEASE_NAME)
        .await
        .map_err(|e| Error::kube(format!("get Lease {namespace}/{STATUS_LEASE_NAME}"), e))?;
    Ok(match lease {
        None => Status::Missing,
        Some(lease) if is_valid(&lease, STATUS_TIMEOUT, now) => Status::Valid,
        Some(lease) => Status::Stale(
            lease
                .spec
                .as_ref()
                .and_then(|s| s.renew_time.as_ref())
                .map(|t| t.0),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn lease(created_ago: i64, renewed_ago: Option<i64>) -> Lease {
        let mut lease = Lease::default();
        lease.metadata.creation_timestamp =
            Some(Time(now() - SignedDuration::from_secs(created_ago)));
        lease.spec = Some(LeaseSpec {
            renew_time: renewed_ago.map(|s| MicroTime(now() - SignedDuration::from_secs(s))),
            ..LeaseSpec::default()
        });
        lease
    }

    // upstream: pkg/utils/status/status_object_test.go TestIsStatusValid
    #[test]
    fn validity_follows_creation_or_renewal() {
        let cases = [
            ("just created, never renewed", lease(10, None), true),
            ("old, never renewed", lease(3600, None), false),
            ("old, renewed recently", lease(3600, Some(30)), true),
            (
                "old, renewed exactly a minute ago",
                lease(3600, Some(60)),
                false,
            ),
            ("old, renewed long ago", lease(3600, Some(120)), false),
        ];
        for (name, lease, want) in cases {
            assert_eq!(is_valid(&lease, STATUS_TIMEOUT, now()), want, "{name}");
        }
        assert!(
            !is_valid(&Lease::default(), STATUS_TIMEOUT, now()),
            "empty lease"
        );
    }
}
