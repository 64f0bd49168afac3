//! Reading and writing the election Lease: a trait the runner is written against, and its
//! implementation on the Kubernetes API.
//!
//! Every write is conditional: `create` fails with 409 `AlreadyExists` when someone created the
//! Lease first, and `replace` sends the `resourceVersion` it read and fails with 409 Conflict when
//! anyone wrote in between.

use std::future::Future;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};

use super::election::{LeaseRecord, ObservedLease};
use crate::error::{Error, Result};

/// Where the election Lease lives. Implemented on the API server by [`KubeLeaseStore`] and by
/// an in-memory fake in the tests.
pub(crate) trait LeaseStore: Send + Sync {
    /// Reads the Lease; `None` when it does not exist.
    fn get(&self) -> impl Future<Output = Result<Option<ObservedLease>>> + Send;
    /// Creates the Lease (fails with a 409 error when it exists).
    fn create(&self, record: &LeaseRecord) -> impl Future<Output = Result<ObservedLease>> + Send;
    /// Replaces the Lease's spec if its resourceVersion is still `resource_version`
    /// (fails with a 409 error otherwise).
    fn replace(
        &self,
        record: &LeaseRecord,
        resource_version: &str,
    ) -> impl Future<Output = Result<ObservedLease>> + Send;
}

/// The Lease on the Kubernetes API.
pub(crate) struct KubeLeaseStore {
    api: Api<Lease>,
    name: String,
    namespace: String,
    field_manager: String,
}

impl KubeLeaseStore {
    pub(crate) fn new(client: Client, namespace: &str, name: &str, field_manager: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            field_manager: field_manager.to_owned(),
        }
    }

    fn context(&self, verb: &str) -> String {
        format!("{verb} lease {}/{}", self.namespace, self.name)
    }

    fn lease(&self, record: &LeaseRecord, resource_version: Option<&str>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                resource_version: resource_version.map(str::to_owned),
                ..ObjectMeta::default()
            },
            spec: Some(to_spec(record)),
        }
    }

    fn post_params(&self) -> PostParams {
        PostParams {
            dry_run: false,
            field_manager: Some(self.field_manager.clone()),
        }
    }
}

impl LeaseStore for KubeLeaseStore {
    async fn get(&self) -> Result<Option<ObservedLease>> {
        let lease = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(|e| Error::kube(self.context("get"), e))?;
        lease
            .map(|l| observed(&l, &self.context("read")))
            .transpose()
    }

    async fn create(&self, record: &LeaseRecord) -> Result<ObservedLease> {
        let lease = self
            .api
            .create(&self.post_params(), &self.lease(record, None))
            .await
            .map_err(|e| Error::kube(self.context("create"), e))?;
        observed(&lease, &self.context("create"))
    }

    async fn replace(&self, record: &LeaseRecord, resource_version: &str) -> Result<ObservedLease> {
        let lease = self
            .api
            .replace(
                &self.name,
                &self.post_params(),
                &self.lease(record, Some(resource_version)),
            )
            .await
            .map_err(|e| Error::kube(self.context("update"), e))?;
        observed(&lease, &self.context("update"))
    }
}

fn to_spec(record: &LeaseRecord) -> LeaseSpec {
    LeaseSpec {
        holder_identity: record.holder.clone(),
        lease_duration_seconds: Some(record.lease_duration_seconds),
        acquire_time: record.acquire_time.map(MicroTime),
        renew_time: record.renew_time.map(MicroTime),
        lease_transitions: Some(record.transitions),
        ..LeaseSpec::default()
    }
}

fn from_spec(spec: Option<&LeaseSpec>) -> LeaseRecord {
    let time = |t: Option<&MicroTime>| t.map(|t| t.0);
    LeaseRecord {
        holder: spec.and_then(|s| s.holder_identity.clone()),
        lease_duration_seconds: spec.and_then(|s| s.lease_duration_seconds).unwrap_or(0),
        acquire_time: time(spec.and_then(|s| s.acquire_time.as_ref())),
        renew_time: time(spec.and_then(|s| s.renew_time.as_ref())),
        transitions: spec.and_then(|s| s.lease_transitions).unwrap_or(0),
    }
}

pub(super) fn observed(lease: &Lease, context: &str) -> Result<ObservedLease> {
    let resource_version = lease.metadata.resource_version.clone().ok_or_else(|| {
        Error::LeaderConfig(format!(
            "{context}: the API server returned a Lease without resourceVersion"
        ))
    })?;
    Ok(ObservedLease {
        record: from_spec(lease.spec.as_ref()),
        resource_version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;

    #[test]
    fn spec_round_trips() {
        let record = LeaseRecord {
            holder: Some("pod-a".into()),
            lease_duration_seconds: 15,
            acquire_time: Some(Timestamp::from_second(1_700_000_000).unwrap()),
            renew_time: Some(Timestamp::from_second(1_700_000_010).unwrap()),
            transitions: 3,
        };
        assert_eq!(from_spec(Some(&to_spec(&record))), record);
        let empty = from_spec(None);
        assert_eq!(empty.holder, None);
        assert_eq!(empty.transitions, 0);
    }
}
