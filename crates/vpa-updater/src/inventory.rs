//! What one updater loop reads from the cluster, and which pods belong to which VPA.
//!
//! Every loop lists VPAs, pods, LimitRanges and the replica-creating owners (ReplicaSets,
//! StatefulSets, ReplicationControllers, DaemonSets, Jobs) in the namespaces it watches, in
//! pages of [`PAGE`]. A pod belongs to the VPA whose `targetRef` names the pod's controller or
//! that controller's own controller (a Deployment above its ReplicaSet, a CronJob above its Job,
//! or any custom kind that owns ReplicaSets, such as an Argo Rollout); when two VPAs name the
//! same controller the older one wins (then the one whose name sorts first), so the choice is
//! stable across loops.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{LimitRange, Pod, ReplicationController};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{Api, ListParams};
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_core::vertical::limit_range::{self, LimitRangeItem, LimitType};
use plimsoll_core::vertical::priority::Owner;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// Items per list page.
pub const PAGE: u32 = 500;

/// Which namespaces the updater looks at.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    /// Only this namespace (`--vpa-object-namespace`).
    pub namespace: Option<String>,
    /// Never these (`--ignored-vpa-object-namespaces`).
    pub ignored: Vec<String>,
}

impl Scope {
    fn api<K>(&self, client: &kube::Client) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        match &self.namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        }
    }

    fn admits(&self, namespace: &str) -> bool {
        !self.ignored.iter().any(|ns| ns == namespace)
    }
}

/// An owner's controller and desired replicas.
#[derive(Clone, Debug, Default)]
struct OwnerInfo {
    controller: Option<Owner>,
    replicas: Option<u32>,
}

/// Everything one loop reads, indexed.
#[derive(Debug, Default)]
pub struct Inventory {
    /// VPAs, oldest first.
    pub vpas: Vec<VerticalPodAutoscaler>,
    /// Pods per VPA (index into `vpas`), in list order; pods being deleted are left out.
    pub pods: BTreeMap<usize, Vec<Pod>>,
    owners: HashMap<(String, Owner), OwnerInfo>,
    limit_ranges: HashMap<String, Vec<(LimitType, LimitRangeItem)>>,
}

async fn list_all<K>(api: &Api<K>, what: &str) -> Result<Vec<K>>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut out = Vec::new();
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api
            .list(&params)
            .await
            .map_err(|e| Error::kube(format!("list {what}"), e))?;
        let next = page.metadata.continue_.clone().filter(|c| !c.is_empty());
        out.extend(page.items);
        match next {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(out),
        }
    }
}

fn namespace(meta: &ObjectMeta) -> String {
    meta.namespace.clone().unwrap_or_default()
}

fn controller_of(meta: &ObjectMeta) -> Option<Owner> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| Owner {
            kind: o.kind.clone(),
            name: o.name.clone(),
        })
}

fn replicas(n: Option<i32>) -> Option<u32> {
    n.and_then(|n| u32::try_from(n).ok())
}

impl Inventory {
    /// Lists the VPAs in scope, sorted oldest first.
    pub async fn vpas(client: &kube::Client, scope: &Scope) -> Result<Vec<VerticalPodAutoscaler>> {
        let mut vpas: Vec<VerticalPodAutoscaler> =
            list_all(&scope.api(client), "verticalpodautoscalers").await?;
        vpas.retain(|v| scope.admits(&namespace(&v.metadata)));
        vpas.sort_by(|a, b| {
            let key = |v: &VerticalPodAutoscaler| {
                (
                    v.metadata.creation_timestamp.as_ref().map(|t| t.0),
                    namespace(&v.metadata),
                    v.metadata.name.clone(),
                )
            };
            key(a).cmp(&key(b))
        });
        Ok(vpas)
    }

    /// Lists the rest for `vpas` and matches pods to them.
    pub async fn load(
        client: &kube::Client,
        scope: &Scope,
        vpas: Vec<VerticalPodAutoscaler>,
    ) -> Result<Inventory> {
        let mut inventory = Inventory {
            vpas,
            ..Inventory::default()
        };
        if inventory.vpas.is_empty() {
            return Ok(inventory);
        }
        let mut owner = |meta: &ObjectMeta, kind: &str, replicas: Option<u32>| {
            let key = (
                namespace(meta),
                Owner {
                    kind: kind.to_owned(),
                    name: meta.name.clone().unwrap_or_default(),
                },
            );
            inventory.owners.insert(
                key,
                OwnerInfo {
                    controller: controller_of(meta),
                    replicas,
                },
            );
        };
        for rs in list_all::<ReplicaSet>(&scope.api(client), "replicasets").await? {
            let n = replicas(rs.spec.as_ref().and_then(|s| s.replicas));
            owner(&rs.metadata, "ReplicaSet", n);
        }
        for ss in list_all::<StatefulSet>(&scope.api(client), "statefulsets").await? {
            let n = replicas(ss.spec.as_ref().and_then(|s| s.replicas));
            owner(&ss.metadata, "StatefulSet", n);
        }
        for rc in
            list_all::<ReplicationController>(&scope.api(client), "replicationcontrollers").await?
        {
            let n = replicas(rc.spec.as_ref().and_then(|s| s.replicas));
            owner(&rc.metadata, "ReplicationController", n);
        }
        for ds in list_all::<DaemonSet>(&scope.api(client), "daemonsets").await? {
            let n = replicas(ds.status.as_ref().map(|s| s.number_ready));
            owner(&ds.metadata, "DaemonSet", n);
        }
        for job in list_all::<Job>(&scope.api(client), "jobs").await? {
            owner(&job.metadata, "Job", None);
        }
        let mut ranges: BTreeMap<String, Vec<LimitRange>> = BTreeMap::new();
        for lr in list_all::<LimitRange>(&scope.api(client), "limitranges").await? {
            ranges.entry(namespace(&lr.metadata)).or_default().push(lr);
        }
        for (ns, mut list) in ranges {
            list.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            match limit_range::from_k8s(&list) {
                Ok(items) => {
                    inventory.limit_ranges.insert(ns, items);
                }
                Err(e) => {
                    tracing::warn!(namespace = %ns, error = %e, "cannot read LimitRanges; capping without them");
                }
            }
        }

        let mut targets: HashMap<(String, String, String), usize> = HashMap::new();
        for (i, vpa) in inventory.vpas.iter().enumerate() {
            let r = &vpa.spec.target_ref;
            targets
                .entry((namespace(&vpa.metadata), r.kind.clone(), r.name.clone()))
                .or_insert(i);
        }
        for pod in list_all::<Pod>(&scope.api(client), "pods").await? {
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let ns = namespace(&pod.metadata);
            let Some(direct) = controller_of(&pod.metadata) else {
                continue;
            };
            let upper = inventory
                .owners
                .get(&(ns.clone(), direct.clone()))
                .and_then(|o| o.controller.clone());
            let vpa = upper
                .iter()
                .chain(std::iter::once(&direct))
                .find_map(|o| targets.get(&(ns.clone(), o.kind.clone(), o.name.clone())));
            if let Some(&i) = vpa {
                inventory.pods.entry(i).or_default().push(pod);
            }
        }
        Ok(inventory)
    }

    /// Desired replicas of `owner` in `namespace`, when known.
    pub fn replicas(&self, namespace: &str, owner: &Owner) -> Option<u32> {
        self.owners
            .get(&(namespace.to_owned(), owner.clone()))
            .and_then(|o| o.replicas)
    }

    /// The merged container and pod LimitRange items of `namespace`.
    pub fn limit_ranges(
        &self,
        namespace: &str,
    ) -> (Option<LimitRangeItem>, Option<LimitRangeItem>) {
        match self.limit_ranges.get(namespace) {
            None => (None, None),
            Some(items) => (
                limit_range::merge(items, LimitType::Container),
                limit_range::merge(items, LimitType::Pod),
            ),
        }
    }
}
