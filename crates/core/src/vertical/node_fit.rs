//! Recommendations that fit a node: a pod sized above the largest node's allocatable can never
//! be scheduled (kubernetes/autoscaler #4515, #7147; GKE's VPA caps at the largest node), so the
//! recommender caps what it recommends for one pod to what the largest node offers.
//!
//! Per resource (CPU, memory), the room of one pod is the largest allocatable among schedulable
//! nodes ([`LargestNode::of`]), less the operator's headroom (DaemonSets and system pods take
//! their share of every node), less what the pod's other containers request (containers the
//! VPA does not recommend that resource for, the largest sum over the VPA's pods). When the
//! recommended targets of one pod's containers add up to more than that room, every
//! container's target is scaled down by the same factor, so the pod fits and the containers
//! keep their proportions. Upper bounds are capped the same way; a lower bound is never left
//! above its target, nor an upper bound below it.
//!
//! This runs after the container policies and joint sizing ([`super::joint_sizing`]), so it
//! wins over `minAllowed`: a minimum no node can hold would leave the pods pending. Init
//! containers are not counted (they run before the others and rarely set the pod's size).
//! Without any node (none listed yet, or none readable) nothing is capped.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::recommendation::RecommendationReport;
use super::resources::{Resource, ResourceAmount, ResourceAmounts, amounts_from_list};

/// The largest allocatable of any schedulable node, per resource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LargestNode {
    /// Largest allocatable CPU (millicores) and memory (bytes).
    pub allocatable: ResourceAmounts,
    /// The node each amount comes from, for the message.
    pub node: BTreeMap<Resource, String>,
}

impl LargestNode {
    /// The largest allocatable per resource over `nodes` that accept pods (not cordoned); over
    /// all of them when every node is cordoned, since a cluster in maintenance still has nodes
    /// its pods will return to. Nodes whose allocatable does not parse are skipped.
    pub fn of<'a>(nodes: impl IntoIterator<Item = &'a Node> + Clone) -> Self {
        let schedulable = |n: &&Node| {
            !n.spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false)
        };
        let largest = Self::over(nodes.clone().into_iter().filter(schedulable));
        if largest.allocatable.is_empty() {
            Self::over(nodes)
        } else {
            largest
        }
    }

    fn over<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> Self {
        let mut out = Self::default();
        for node in nodes {
            let Ok(amounts) =
                amounts_from_list(node.status.as_ref().and_then(|s| s.allocatable.as_ref()))
            else {
                continue;
            };
            for (resource, amount) in amounts {
                if amount > 0 && out.allocatable.get(&resource).is_none_or(|a| amount > *a) {
                    out.allocatable.insert(resource, amount);
                    out.node
                        .insert(resource, node.metadata.name.clone().unwrap_or_default());
                }
            }
        }
        out
    }
}

/// What the operator set: how much of the largest node one pod may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeFitConfig {
    /// Percent of the allocatable kept free for DaemonSets and system pods (0–99).
    pub headroom_percent: u8,
}

impl NodeFitConfig {
    /// The room for one pod of `resource` on the largest node, before other containers.
    pub fn room(&self, largest: &LargestNode, resource: Resource) -> Option<ResourceAmount> {
        let allocatable = *largest.allocatable.get(&resource)?;
        let keep = 100 - i128::from(self.headroom_percent.min(99));
        Some((i128::from(allocatable) * keep / 100) as ResourceAmount)
    }
}

/// One resource capped for one pod, for the condition and `explain`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeCap {
    /// The resource.
    pub resource: Resource,
    /// The sum of the pod's recommended targets before the cap.
    pub wanted: ResourceAmount,
    /// What the pod's recommended containers may take together.
    pub room: ResourceAmount,
    /// The largest node's allocatable and its name.
    pub allocatable: ResourceAmount,
    /// The node.
    pub node: String,
}

impl std::fmt::Display for NodeCap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: ResourceAmount| match self.resource {
            Resource::Cpu => format!("{v}m"),
            Resource::Memory => format!("{}Mi", v / (1024 * 1024)),
        };
        write!(
            f,
            "{} target {} capped to {} to fit the largest node {} (allocatable {})",
            self.resource.name(),
            show(self.wanted),
            show(self.room),
            self.node,
            show(self.allocatable)
        )
    }
}

/// The requests of `pods`' containers that `containers` does not recommend, per resource: the
/// largest sum over the pods.
pub fn other_requests(pods: &[&Pod], containers: &[RecommendationReport]) -> ResourceAmounts {
    let mut out = ResourceAmounts::new();
    for pod in pods {
        let mut sums = ResourceAmounts::new();
        for c in pod.spec.iter().flat_map(|s| &s.containers) {
            let recommended = containers.iter().find(|r| r.name == c.name);
            let requests =
                amounts_from_list(c.resources.as_ref().and_then(|r| r.requests.as_ref()))
                    .unwrap_or_default();
            for (resource, amount) in requests {
                if recommended.is_none_or(|r| !r.capped.target.contains_key(&resource)) {
                    let sum = sums.entry(resource).or_default();
                    *sum = sum.saturating_add(amount.max(0));
                }
            }
        }
        for (resource, sum) in sums {
            let slot = out.entry(resource).or_default();
            *slot = (*slot).max(sum);
        }
    }
    out
}

/// Caps `containers` (one pod's recommended containers) so their targets fit `room` per
/// resource, less `others`; returns what was capped.
pub fn fit(
    containers: &mut [RecommendationReport],
    largest: &LargestNode,
    config: NodeFitConfig,
    others: &ResourceAmounts,
) -> Vec<NodeCap> {
    let mut caps = Vec::new();
    for resource in Resource::ALL {
        let Some(room) = config.room(largest, resource) else {
            continue;
        };
        let room = (room - others.get(&resource).copied().unwrap_or(0)).max(0);
        let wanted: i128 = containers
            .iter()
            .filter_map(|c| c.capped.target.get(&resource))
            .map(|v| i128::from(*v))
            .sum();
        let upper: i128 = containers
            .iter()
            .filter_map(|c| c.capped.upper_bound.get(&resource))
            .map(|v| i128::from(*v))
            .sum();
        if wanted.max(upper) <= i128::from(room) {
            continue;
        }
        for c in containers.iter_mut() {
            let scale = |v: &mut ResourceAmount, total: i128| {
                if total > i128::from(room) {
                    *v = (i128::from(*v) * i128::from(room) / total) as ResourceAmount;
                }
            };
            let b = &mut c.capped;
            if let Some(t) = b.target.get_mut(&resource) {
                scale(t, wanted);
            }
            let target = b.target.get(&resource).copied();
            if let Some(u) = b.upper_bound.get_mut(&resource) {
                scale(u, upper);
                *u = (*u).max(target.unwrap_or(0));
            }
            if let (Some(l), Some(t)) = (b.lower_bound.get_mut(&resource), target) {
                *l = (*l).min(t);
            }
        }
        if wanted > i128::from(room) {
            for c in containers.iter_mut() {
                if c.capped.target.contains_key(&resource) {
                    c.capped_by.push(format!(
                        "{} capped to fit the largest node",
                        resource.name()
                    ));
                }
            }
            caps.push(NodeCap {
                resource,
                wanted: wanted.clamp(0, i128::from(ResourceAmount::MAX)) as ResourceAmount,
                room,
                allocatable: largest.allocatable.get(&resource).copied().unwrap_or(0),
                node: largest.node.get(&resource).cloned().unwrap_or_default(),
            });
        }
    }
    caps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vertical::capping::RecommendedResources;
    use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use proptest::prelude::*;

    const GI: i64 = 1024 * 1024 * 1024;

    fn node(name: &str, cpu: &str, memory: &str, cordoned: bool) -> Node {
        Node {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                unschedulable: cordoned.then_some(true),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                allocatable: Some(
                    [("cpu", cpu), ("memory", memory), ("pods", "110")]
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), Quantity(v.to_owned())))
                        .collect(),
                ),
                ..NodeStatus::default()
            }),
        }
    }

    fn report(name: &str, cpu: [i64; 3], memory: [i64; 3]) -> RecommendationReport {
        let amounts = |i: usize| {
            ResourceAmounts::from([(Resource::Cpu, cpu[i]), (Resource::Memory, memory[i])])
        };
        RecommendationReport {
            name: name.to_owned(),
            capped: RecommendedResources {
                lower_bound: amounts(0),
                target: amounts(1),
                upper_bound: amounts(2),
            },
            uncapped_target: amounts(1),
            capped_by: Vec::new(),
            confidence: 1.0,
        }
    }

    #[test]
    fn the_largest_node_is_per_resource_and_skips_cordoned_nodes() {
        let nodes = [
            node("cpu-heavy", "31850m", "28Gi", false),
            node("mem-heavy", "7910m", "60Gi", false),
            node("cordoned-giant", "96", "380Gi", true),
        ];
        let largest = LargestNode::of(&nodes);
        assert_eq!(largest.allocatable[&Resource::Cpu], 31_850);
        assert_eq!(largest.allocatable[&Resource::Memory], 60 * GI);
        assert_eq!(largest.node[&Resource::Memory], "mem-heavy");
        // A cluster whose every node is cordoned still has a largest node.
        let all_cordoned = LargestNode::of(&nodes[2..]);
        assert_eq!(all_cordoned.allocatable[&Resource::Cpu], 96_000);
        assert_eq!(LargestNode::of(&[]), LargestNode::default());
    }

    #[test]
    fn a_memory_target_above_the_largest_node_is_capped_to_it_less_headroom() {
        let largest = LargestNode::of(&[node("n1", "4", "16Gi", false)]);
        let mut pod = vec![report("app", [100, 200, 300], [20 * GI, 40 * GI, 80 * GI])];
        let caps = fit(
            &mut pod,
            &largest,
            NodeFitConfig {
                headroom_percent: 10,
            },
            &ResourceAmounts::new(),
        );
        let room = 16 * GI * 9 / 10;
        assert_eq!(pod[0].capped.target[&Resource::Memory], room);
        assert_eq!(pod[0].capped.upper_bound[&Resource::Memory], room);
        assert_eq!(
            pod[0].capped.lower_bound[&Resource::Memory],
            room,
            "lower ≤ target"
        );
        assert_eq!(
            pod[0].capped.target[&Resource::Cpu],
            200,
            "CPU fits: untouched"
        );
        assert_eq!(caps.len(), 1);
        assert_eq!(
            caps[0].to_string(),
            "memory target 40960Mi capped to 14745Mi to fit the largest node n1 (allocatable 16384Mi)"
        );
        assert_eq!(pod[0].capped_by, ["memory capped to fit the largest node"]);
    }

    #[test]
    fn containers_share_the_room_in_proportion_after_what_others_request() {
        let largest = LargestNode::of(&[node("n1", "4", "16Gi", false)]);
        let mut pod = vec![
            report("app", [1000, 3000, 3000], [GI; 3]),
            report("sidecar", [500, 1000, 1000], [GI; 3]),
        ];
        let others = ResourceAmounts::from([(Resource::Cpu, 1000)]);
        let caps = fit(
            &mut pod,
            &largest,
            NodeFitConfig {
                headroom_percent: 0,
            },
            &others,
        );
        // 4000m less 1000m requested by a container the VPA does not size: 3000m for 4000m wanted.
        assert_eq!(pod[0].capped.target[&Resource::Cpu], 2250);
        assert_eq!(pod[1].capped.target[&Resource::Cpu], 750);
        assert_eq!(pod[0].capped.lower_bound[&Resource::Cpu], 1000);
        assert_eq!(caps[0].room, 3000);
    }

    #[test]
    fn an_upper_bound_above_the_node_is_capped_even_when_the_target_fits() {
        let largest = LargestNode::of(&[node("n1", "4", "16Gi", false)]);
        let mut pod = vec![report("app", [100, 200, 9000], [GI; 3])];
        let caps = fit(
            &mut pod,
            &largest,
            NodeFitConfig {
                headroom_percent: 0,
            },
            &ResourceAmounts::new(),
        );
        assert_eq!(pod[0].capped.upper_bound[&Resource::Cpu], 4000);
        assert_eq!(pod[0].capped.target[&Resource::Cpu], 200);
        assert!(caps.is_empty(), "the target was not capped: no condition");
    }

    #[test]
    fn other_requests_count_containers_and_resources_without_a_recommendation() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [
                {"name": "app", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                {"name": "proxy", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}
            ]}
        }))
        .expect("pod");
        let mut app = report("app", [1; 3], [1; 3]);
        app.capped.target.remove(&Resource::Memory);
        let others = other_requests(&[&pod], &[app]);
        assert_eq!(others[&Resource::Cpu], 250);
        assert_eq!(others[&Resource::Memory], GI + 64 * 1024 * 1024);
    }

    #[test]
    fn requests_a_tenant_writes_past_i64_saturate() {
        // 9e15 cores is 9e18 millicores; two of them pass i64::MAX.
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [
                {"name": "a", "resources": {"requests": {"cpu": "9e15"}}},
                {"name": "b", "resources": {"requests": {"cpu": "9e15"}}}
            ]}
        }))
        .expect("pod");
        let others = other_requests(&[&pod], &[]);
        assert_eq!(others[&Resource::Cpu], i64::MAX);
    }

    proptest! {
        #[test]
        fn the_pod_fits_and_bounds_stay_ordered(
            node_cpu in 1i64..100_000,
            headroom in 0u8..100,
            other in 0i64..50_000,
            amounts in prop::collection::vec((0i64..200_000, 0i64..200_000, 0i64..200_000), 1..5),
        ) {
            let largest = LargestNode {
                allocatable: ResourceAmounts::from([(Resource::Cpu, node_cpu)]),
                node: BTreeMap::new(),
            };
            let mut pod: Vec<RecommendationReport> = amounts
                .iter()
                .enumerate()
                .map(|(i, &(a, b, c))| {
                    let mut v = [a, b, c];
                    v.sort_unstable();
                    report(&format!("c{i}"), v, [1; 3])
                })
                .collect();
            let config = NodeFitConfig { headroom_percent: headroom };
            let others = ResourceAmounts::from([(Resource::Cpu, other)]);
            let before: i64 = pod.iter().map(|c| c.capped.target[&Resource::Cpu]).sum();
            fit(&mut pod, &largest, config, &others);
            let room = (config.room(&largest, Resource::Cpu).unwrap_or(0) - other).max(0);
            let after: i64 = pod.iter().map(|c| c.capped.target[&Resource::Cpu]).sum();
            prop_assert!(after <= room.max(0) || after == before && before <= room);
            prop_assert!(after <= before);
            for c in &pod {
                let b = &c.capped;
                prop_assert!(b.lower_bound[&Resource::Cpu] <= b.target[&Resource::Cpu]);
                prop_assert!(b.target[&Resource::Cpu] <= b.upper_bound[&Resource::Cpu]);
            }
        }
    }
}
