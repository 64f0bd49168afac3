//! Reading and writing the election Lease: a trait the runner is written against, and its
//! implementation on the Kubernetes API.
//!
//! Every write is conditional: `create` fails with 409 `AlreadyExists` when someone created the
//! Lease first, and `replace` sends the `resourceVersion` it read and fails with 409 Conflict when
//! anyone wrote in between.
//!
//! With `--lease-owner-deployment`, every write carries a non-controller ownerReference to the
//! service's Deployment ([`LeaseOwner`]), so the garbage collector deletes the Leases after an
//! uninstall; `replace` sends the whole object, so a Lease written before gains it at its next
//! renew. The Deployment is read once, at the first write; when it cannot be read the Leases are
//! written without owner (a warning, never a failed election).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::OnceCell;

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

/// How long the one read of the owner Deployment may take before the Leases are written without
/// owner: it delays only the first election write.
const OWNER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The owner of a service's Leases (`--lease-owner-deployment`): resolved once, at the first
/// write, and shared by every Lease of the service (the election's or each shard's).
#[derive(Clone)]
pub(crate) struct LeaseOwner {
    client: Client,
    namespace: String,
    deployment: Option<String>,
    resolved: Arc<OnceCell<Option<OwnerReference>>>,
}

impl LeaseOwner {
    /// The owner `deployment` in `namespace`; `None`: the Leases have no owner.
    pub(crate) fn new(client: Client, namespace: &str, deployment: Option<String>) -> Self {
        Self {
            client,
            namespace: namespace.to_owned(),
            deployment,
            resolved: Arc::new(OnceCell::new()),
        }
    }

    /// The reference to write, read from the API on the first call.
    async fn reference(&self) -> Option<OwnerReference> {
        let deployment = self.deployment.as_deref()?;
        self.resolved
            .get_or_init(|| owner_reference(&self.client, &self.namespace, deployment))
            .await
            .clone()
    }
}

/// A non-controller ownerReference to the Deployment `name` in `namespace`, or `None` (logged as
/// a warning) when it cannot be read within a few seconds: the caller then writes its Leases
/// without owner rather than failing. The webhook's status Lease uses it too.
pub async fn owner_reference(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Option<OwnerReference> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let read = match tokio::time::timeout(OWNER_READ_TIMEOUT, api.get(name)).await {
        Ok(Ok(deployment)) => Ok(deployment),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {OWNER_READ_TIMEOUT:?}")),
    };
    let reference =
        read.and_then(|d| reference_to(&d).ok_or_else(|| "the Deployment has no uid".to_owned()));
    match reference {
        Ok(r) => Some(r),
        Err(error) => {
            tracing::warn!(
                deployment = %format!("{namespace}/{name}"),
                %error,
                "--lease-owner-deployment: cannot read the Deployment; the Leases get no owner \
                 and stay behind after an uninstall (grant `get` on it by name)"
            );
            None
        }
    }
}

/// The ownerReference of a dependent of `deployment`: not its controller, and without
/// `blockOwnerDeletion` (which would need the `update` right on the Deployment's finalizers).
fn reference_to(deployment: &Deployment) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: "apps/v1".to_owned(),
        kind: "Deployment".to_owned(),
        name: deployment.metadata.name.clone()?,
        uid: deployment.metadata.uid.clone()?,
        controller: Some(false),
        block_owner_deletion: None,
    })
}

/// The Lease on the Kubernetes API.
pub(crate) struct KubeLeaseStore {
    api: Api<Lease>,
    name: String,
    namespace: String,
    field_manager: String,
    owner: LeaseOwner,
}

impl KubeLeaseStore {
    pub(crate) fn new(
        client: Client,
        namespace: &str,
        name: &str,
        field_manager: &str,
        owner: LeaseOwner,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            field_manager: field_manager.to_owned(),
            owner,
        }
    }

    fn context(&self, verb: &str) -> String {
        format!("{verb} lease {}/{}", self.namespace, self.name)
    }

    async fn lease(&self, record: &LeaseRecord, resource_version: Option<&str>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                resource_version: resource_version.map(str::to_owned),
                owner_references: self.owner.reference().await.map(|r| vec![r]),
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
        let lease = self.lease(record, None).await;
        let lease = self
            .api
            .create(&self.post_params(), &lease)
            .await
            .map_err(|e| Error::kube(self.context("create"), e))?;
        observed(&lease, &self.context("create"))
    }

    async fn replace(&self, record: &LeaseRecord, resource_version: &str) -> Result<ObservedLease> {
        let lease = self.lease(record, Some(resource_version)).await;
        let lease = self
            .api
            .replace(&self.name, &self.post_params(), &lease)
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
    use crate::fake_api::FakeApi;
    use jiff::Timestamp;
    use serde_json::{Value, json};

    const DEPLOYMENT: &str = "/apis/apps/v1/namespaces/sys/deployments/plimsoll-x";
    const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/sys/leases";

    fn record() -> LeaseRecord {
        LeaseRecord {
            holder: Some("pod-a".into()),
            lease_duration_seconds: 15,
            acquire_time: None,
            renew_time: None,
            transitions: 0,
        }
    }

    /// A fake API with the Lease `l` (create and replace answer with a written Lease) and,
    /// when `deployment` is given, the Deployment answering with it.
    fn api(deployment: Option<(u16, Value)>) -> FakeApi {
        let fake = FakeApi::new();
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "l", "namespace": "sys", "resourceVersion": "7"}, "spec": {}})
        .to_string();
        fake.respond("POST", LEASES, 201, &lease);
        fake.respond("PUT", &format!("{LEASES}/l"), 200, &lease);
        if let Some((status, body)) = deployment {
            fake.respond("GET", DEPLOYMENT, status, &body.to_string());
        }
        fake
    }

    fn store(fake: &FakeApi, owner: Option<&str>) -> KubeLeaseStore {
        let client = fake.client();
        let owner = LeaseOwner::new(client.clone(), "sys", owner.map(str::to_owned));
        KubeLeaseStore::new(client, "sys", "l", "test", owner)
    }

    /// The ownerReferences of every Lease written, in order.
    fn written_owners(fake: &FakeApi) -> Vec<Value> {
        fake.requests()
            .iter()
            .filter(|r| r.method == "POST" || r.method == "PUT")
            .map(|r| {
                let body: Value = serde_json::from_str(&r.body).unwrap();
                body["metadata"]["ownerReferences"].clone()
            })
            .collect()
    }

    fn deployment_reads(fake: &FakeApi) -> usize {
        fake.requests()
            .iter()
            .filter(|r| r.method == "GET" && r.uri.starts_with(DEPLOYMENT))
            .count()
    }

    #[tokio::test]
    async fn every_write_names_the_deployment_as_owner_read_once() {
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "plimsoll-x", "namespace": "sys", "uid": "u-1"}});
        let fake = api(Some((200, deployment)));
        let store = store(&fake, Some("plimsoll-x"));
        store.create(&record()).await.unwrap();
        // A Lease written before (by a release without the flag) gains it at its next write.
        store.replace(&record(), "7").await.unwrap();
        store.replace(&record(), "7").await.unwrap();
        let want = json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "plimsoll-x",
                           "uid": "u-1", "controller": false}]);
        assert_eq!(written_owners(&fake), [want.clone(), want.clone(), want]);
        assert_eq!(deployment_reads(&fake), 1, "read once, not per write");
    }

    #[tokio::test]
    async fn an_unreadable_deployment_leaves_the_leases_without_owner() {
        // Forbidden (no `get` on it): a warning, and the election writes on.
        let forbidden = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "Forbidden", "code": 403, "message": "forbidden"});
        for answer in [Some((403, forbidden)), None] {
            let fake = api(answer);
            let store = store(&fake, Some("plimsoll-x"));
            store.create(&record()).await.unwrap();
            store.replace(&record(), "7").await.unwrap();
            assert_eq!(written_owners(&fake), [Value::Null, Value::Null]);
            assert_eq!(deployment_reads(&fake), 1, "not retried on every write");
        }
        // Without the flag nothing is read.
        let fake = api(None);
        store(&fake, None).create(&record()).await.unwrap();
        assert_eq!(written_owners(&fake), [Value::Null]);
        assert_eq!(deployment_reads(&fake), 0);
    }

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
