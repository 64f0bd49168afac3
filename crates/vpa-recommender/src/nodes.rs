//! The Nodes as the recommender needs them: name, cordon and allocatable CPU and memory, kept
//! current by a watch, so each loop caps recommendations to the largest node
//! ([`plimsoll_core::vertical::node_fit`]).
//!
//! A Node object is large (images, conditions, addresses); only what the cap reads is kept, so
//! a cluster of thousands of nodes costs a few hundred bytes each here. Invariant, as kube's
//! reflector: after a (re)list completes the index holds exactly the listed nodes.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus};
use kube::ResourceExt;
use kube::runtime::watcher::Event;
use plimsoll_core::vertical::node_fit::LargestNode;
use plimsoll_runtime::service::Started;
use plimsoll_runtime::watch::{Watch, WatchMetrics};

#[derive(Default)]
struct Inner {
    nodes: BTreeMap<String, Node>,
    /// Nodes of a relist in progress.
    relist: Option<BTreeMap<String, Node>>,
}

/// The watched Nodes, trimmed.
#[derive(Clone, Default)]
pub struct Nodes {
    inner: Arc<RwLock<Inner>>,
}

/// What the cap reads of a Node.
fn trimmed(node: &Node) -> Node {
    Node {
        metadata: kube::api::ObjectMeta {
            name: node.metadata.name.clone(),
            ..kube::api::ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            unschedulable: node.spec.as_ref().and_then(|s| s.unschedulable),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            allocatable: node.status.as_ref().and_then(|s| {
                s.allocatable.as_ref().map(|a| {
                    a.iter()
                        .filter(|(k, _)| *k == "cpu" || *k == "memory")
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
            }),
            ..NodeStatus::default()
        }),
    }
}

impl Nodes {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// An index kept current by a watch of every Node, spawned on `service` when `enabled`
    /// (with the cap off, Nodes are not read at all: the ClusterRole may leave them out).
    pub fn watched(
        enabled: bool,
        service: &mut Started,
        client: &kube::Client,
        metrics: &WatchMetrics,
    ) -> Self {
        let nodes = Self::new();
        if !enabled {
            return nodes;
        }
        let index = nodes.clone();
        service.spawn(
            Watch::new("Node", kube::Api::all(client.clone()))
                .metrics(metrics)
                .run(move |e| index.apply(&e)),
        );
        nodes
    }

    /// Folds one watch event in.
    pub fn apply(&self, event: &Event<Node>) {
        let mut inner = self
            .inner
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match event {
            Event::Apply(node) => {
                inner.nodes.insert(node.name_any(), trimmed(node));
            }
            Event::Delete(node) => {
                inner.nodes.remove(&node.name_any());
            }
            Event::Init => inner.relist = Some(BTreeMap::new()),
            Event::InitApply(node) => {
                inner
                    .relist
                    .get_or_insert_with(BTreeMap::new)
                    .insert(node.name_any(), trimmed(node));
            }
            Event::InitDone => {
                let fresh = inner.relist.take().unwrap_or_default();
                inner.nodes = fresh;
            }
        }
    }

    /// The largest node per resource now.
    pub fn largest(&self) -> LargestNode {
        let inner = self
            .inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        LargestNode::of(inner.nodes.values())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plimsoll_core::vertical::Resource;

    fn node(name: &str, memory: &str) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"zone": "a"}},
            "status": {
                "allocatable": {"cpu": "4", "memory": memory, "pods": "110"},
                "images": [{"names": ["registry/app:1"], "sizeBytes": 1}],
            },
        }))
        .expect("a node")
    }

    #[test]
    fn a_relist_replaces_the_nodes_and_deletes_are_forgotten() {
        let nodes = Nodes::new();
        nodes.apply(&Event::Apply(node("big", "64Gi")));
        nodes.apply(&Event::Apply(node("small", "8Gi")));
        assert_eq!(nodes.largest().node[&Resource::Memory], "big");
        nodes.apply(&Event::Delete(node("big", "64Gi")));
        assert_eq!(nodes.largest().node[&Resource::Memory], "small");
        // During a relist the old view stays; at its end only the listed nodes remain.
        nodes.apply(&Event::Init);
        nodes.apply(&Event::InitApply(node("medium", "16Gi")));
        assert_eq!(nodes.largest().node[&Resource::Memory], "small");
        nodes.apply(&Event::InitDone);
        assert_eq!(nodes.largest().node[&Resource::Memory], "medium");
        let inner = nodes.inner.read().expect("lock");
        let kept = &inner.nodes["medium"];
        assert!(kept.metadata.labels.is_none());
        assert!(kept.status.as_ref().is_some_and(|s| s.images.is_none()));
        assert_eq!(
            kept.status
                .as_ref()
                .and_then(|s| s.allocatable.as_ref())
                .map(BTreeMap::len),
            Some(2)
        );
    }
}
