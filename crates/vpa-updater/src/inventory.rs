//! Which pods belong to which VPA, read from the watch-fed [`Cache`] at the start of a loop
//! (no request is made here).
//!
//! The rule is core's ([`controlling`], upstream's `GetControllingVPAForPod`), the one the
//! admission webhook patches by and the recommender learns by: a pod belongs to the oldest VPA
//! (then the smaller name) whose `targetRef` names the pod's top controller — its controller, or
//! the controller above its ReplicaSet or Job (a Deployment, a CronJob, a Rollout, any custom
//! `/scale` kind), compared by API group, kind and name. The updater must cap exactly as the
//! webhook does, or pods would be evicted and recreated forever. The lookup goes from the VPAs'
//! targets to their candidate pods through the cache's controller indexes, never over every pod,
//! and each candidate is then checked against the rule.
//!
//! The pods of every VPA are found once, when the loop's [`Inventory`] is made: each target the
//! VPAs name is looked up once, whatever the number of VPAs naming it, and each candidate pod is
//! checked once against the VPAs grouped by target ([`controlling::ControllingIndex`]). VPAs
//! cost a tenant nothing to create; asking per VPA made 10,000 VPAs on one Deployment cost
//! 10,000 × pods × 10,000 comparisons, a loop of minutes that held back every namespace.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_core::quantity::QuantityError;
use plimsoll_core::vertical::controlling;
use plimsoll_core::vertical::limit_range::LimitRangeItem;
use plimsoll_core::vertical::priority::Owner;

use crate::cache::{Cache, CachedPod};

/// Which namespaces the updater looks at: the rule the admission webhook follows too
/// (`--vpa-object-namespace`, `--ignored-vpa-object-namespaces`, by default all but kube-system
/// and the updater's own namespace).
pub use plimsoll_core::vertical::scope::NamespaceScope as Scope;

/// The merged container and pod LimitRange items of a namespace, or why they cannot be read.
type Ranges = Result<(Option<LimitRangeItem>, Option<LimitRangeItem>), QuantityError>;

fn namespace(vpa: &VerticalPodAutoscaler) -> &str {
    vpa.metadata.namespace.as_deref().unwrap_or_default()
}

/// One loop's view: the VPAs to act on and their pods, read from the cache when it is made.
pub struct Inventory<'c> {
    cache: &'c Cache,
    /// VPAs, oldest first.
    pub vpas: Vec<Arc<VerticalPodAutoscaler>>,
    /// The live pods of each of `vpas` (same positions), sorted by name.
    pods: Vec<Vec<Arc<CachedPod>>>,
    /// Candidate pods checked against the rule to make `pods`.
    checked: usize,
    limit_ranges: BTreeMap<String, Ranges>,
}

impl<'c> Inventory<'c> {
    /// The VPAs in scope, oldest first ([`controlling::stronger`], then the namespace).
    pub fn vpas(cache: &Cache, scope: &Scope) -> Vec<Arc<VerticalPodAutoscaler>> {
        let mut vpas = cache.vpas(scope);
        vpas.sort_by(|a, b| {
            controlling::stronger(a, b).then_with(|| namespace(a).cmp(namespace(b)))
        });
        vpas
    }

    /// The view of `vpas` (sorted as [`Inventory::vpas`] sorts them) over `cache`.
    pub fn new(cache: &'c Cache, vpas: Vec<Arc<VerticalPodAutoscaler>>) -> Inventory<'c> {
        let (pods, checked) = assign(cache, &vpas);
        tracing::debug!(
            vpas = vpas.len(),
            candidates = checked,
            "pods assigned to their VPAs"
        );
        let mut limit_ranges = BTreeMap::new();
        if !vpas.is_empty() {
            let ranges = cache.limit_ranges();
            for vpa in &vpas {
                let ns = namespace(vpa);
                if !limit_ranges.contains_key(ns) {
                    let merged = controlling::limit_ranges(ranges.iter().map(AsRef::as_ref), ns);
                    if let Err(e) = &merged {
                        tracing::warn!(namespace = %ns, error = %e, "cannot read LimitRanges; no pod of the namespace is updated");
                    }
                    limit_ranges.insert(ns.to_owned(), merged);
                }
            }
        }
        Inventory {
            cache,
            vpas,
            pods,
            checked,
            limit_ranges,
        }
    }

    /// The live pods of the VPA `vpas[i]`, sorted by name.
    pub fn pods(&self, i: usize) -> Vec<Arc<CachedPod>> {
        self.pods.get(i).cloned().unwrap_or_default()
    }

    /// How many candidate pods were checked against the rule to find every VPA's pods: the
    /// candidates of each target once, however many VPAs name it.
    pub fn candidates_checked(&self) -> usize {
        self.checked
    }

    /// Desired replicas of `owner` in `namespace`, when known.
    pub fn replicas(&self, namespace: &str, owner: &Owner) -> Option<u32> {
        self.cache.replicas(namespace, owner)
    }

    /// The merged container and pod LimitRange items of `namespace`
    /// ([`controlling::limit_ranges`], as the webhook merges them).
    pub fn limit_ranges(
        &self,
        namespace: &str,
    ) -> Result<(Option<LimitRangeItem>, Option<LimitRangeItem>), &QuantityError> {
        match self.limit_ranges.get(namespace) {
            None => Ok((None, None)),
            Some(Ok(merged)) => Ok(merged.clone()),
            Some(Err(e)) => Err(e),
        }
    }
}

/// The live pods of each of `vpas` (by position, sorted by name) and how many candidates were
/// checked. A VPA's pods are the candidates of its target (the pods the target controls, and
/// those of the ReplicaSets and Jobs it controls: the cache files them by kind and name, the rule
/// checks the group) that [`controlling::controlling_vpa`] gives to that VPA. The candidates of a
/// `(namespace, kind, name)` are checked once for all the VPAs naming it: a candidate whose top
/// controller is that target goes to the winner of the target's VPAs, and one whose top is
/// elsewhere to none of them (a VPA only takes pods from its own target's candidates).
fn assign(cache: &Cache, vpas: &[Arc<VerticalPodAutoscaler>]) -> (Vec<Vec<Arc<CachedPod>>>, usize) {
    let index = controlling::ControllingIndex::new(vpas);
    let mut pods: Vec<Vec<Arc<CachedPod>>> = vec![Vec::new(); vpas.len()];
    let mut checked = 0;
    let mut looked_up: HashSet<(&str, &str, &str)> = HashSet::new();
    for vpa in vpas {
        let ns = namespace(vpa);
        let r = &vpa.spec.target_ref;
        if !looked_up.insert((ns, &r.kind, &r.name)) {
            continue;
        }
        let target = Owner {
            kind: r.kind.clone(),
            name: r.name.clone(),
        };
        let mut candidates = cache.pods_of(ns, &target);
        for child in cache.owned_by(ns, &target) {
            candidates.extend(cache.pods_of(ns, &child));
        }
        for pod in candidates {
            checked += 1;
            let meta = &pod.pod.metadata;
            let Some(top) = controlling::top_controller(meta, ns, cache) else {
                continue;
            };
            if top.kind != r.kind || top.name != r.name {
                continue;
            }
            if let Some((winner, _)) = index.controlling(ns, meta.labels.as_ref(), &top) {
                pods[winner].push(pod);
            }
        }
    }
    for list in &mut pods {
        list.sort_by(|a, b| a.name().cmp(b.name()));
        list.dedup_by(|a, b| a.uid() == b.uid() && a.name() == b.name());
    }
    (pods, checked)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Pod;
    use kube::runtime::watcher::Event;
    use plimsoll_core::vertical::controlling::OwnerKey;
    use serde_json::json;

    use super::*;

    fn controlled(kind: &str, owner: Option<&str>) -> serde_json::Value {
        match owner {
            Some(name) => json!([{"apiVersion": "apps/v1", "kind": kind, "name": name,
                "uid": format!("uid-{name}"), "controller": true}]),
            None => json!([]),
        }
    }

    fn replica_set(name: &str, deployment: Option<&str>) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns",
                "ownerReferences": controlled("Deployment", deployment)},
            "spec": {"replicas": 2, "selector": {}}
        }))
        .unwrap()
    }

    fn pod(name: &str, replica_set: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                "ownerReferences": controlled("ReplicaSet", Some(replica_set))},
            "spec": {"containers": [{"name": "app"}]}
        }))
        .unwrap()
    }

    fn vpa(name: &str, created: &str, kind: &str, target: &str) -> VerticalPodAutoscaler {
        serde_json::from_value(json!({
            "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": kind, "name": target}}
        }))
        .unwrap()
    }

    /// Pod names per VPA name.
    fn assignment(cache: &Cache) -> Vec<(String, Vec<String>)> {
        let vpas = Inventory::vpas(cache, &Scope::AllBut(Vec::new()));
        let inventory = Inventory::new(cache, vpas);
        (0..inventory.vpas.len())
            .map(|i| {
                let pods = inventory
                    .pods(i)
                    .iter()
                    .map(|p| p.name().to_owned())
                    .collect();
                (
                    inventory.vpas[i].metadata.name.clone().unwrap_or_default(),
                    pods,
                )
            })
            .collect()
    }

    #[test]
    fn the_default_scope_leaves_kube_system_and_the_own_namespace_out() {
        let (cache, mut vpas) = Cache::for_tests();
        for ns in ["kube-system", "plimsoll-system", "shop"] {
            let mut v = vpa("web", "2026-01-01T00:00:00Z", "Deployment", "web");
            v.metadata.namespace = Some(ns.to_owned());
            vpas.apply_watcher_event(&Event::Apply(v));
        }
        let scope = Scope::from_flags(None, None, Some("plimsoll-system"));
        let namespaces: Vec<_> = Inventory::vpas(&cache, &scope)
            .iter()
            .filter_map(|v| v.metadata.namespace.clone())
            .collect();
        assert_eq!(namespaces, ["shop"]);
        assert_eq!(Inventory::vpas(&cache, &Scope::AllBut(Vec::new())).len(), 3);
    }

    #[test]
    fn pods_go_to_the_upper_controllers_vpa_and_the_oldest_of_two() {
        let (cache, mut vpas) = Cache::for_tests();
        cache.apply_replica_set(Event::Apply(replica_set("web-1", Some("web"))));
        cache.apply_replica_set(Event::Apply(replica_set("solo-1", None)));
        for (name, rs) in [
            ("web-1-b", "web-1"),
            ("web-1-a", "web-1"),
            ("solo-1-a", "solo-1"),
        ] {
            cache.apply_pod(Event::Apply(pod(name, rs)));
        }
        for v in [
            vpa("on-rs", "2026-01-01T00:00:00Z", "ReplicaSet", "web-1"),
            vpa("on-deploy", "2026-01-02T00:00:00Z", "Deployment", "web"),
            vpa(
                "newer-on-deploy",
                "2026-01-03T00:00:00Z",
                "Deployment",
                "web",
            ),
            vpa("solo", "2026-01-04T00:00:00Z", "ReplicaSet", "solo-1"),
        ] {
            vpas.apply_watcher_event(&Event::Apply(v));
        }
        let strings = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            assignment(&cache),
            [
                // The pods' top controller is the Deployment above the ReplicaSet.
                ("on-rs".to_owned(), strings(&[])),
                ("on-deploy".to_owned(), strings(&["web-1-a", "web-1-b"])),
                // Two VPAs on one Deployment: the older one has the pods.
                ("newer-on-deploy".to_owned(), strings(&[])),
                // A ReplicaSet with no controller above it.
                ("solo".to_owned(), strings(&["solo-1-a"])),
            ]
        );
        // The Deployment's VPAs go away: the pods' top controller is still the Deployment, so
        // the ReplicaSet's VPA does not take them (upstream's rule, as the webhook patches;
        // this expectation was "the ReplicaSet's VPA takes the pods" before the rule was shared).
        vpas.apply_watcher_event(&Event::Delete(vpa(
            "on-deploy",
            "2026-01-02T00:00:00Z",
            "Deployment",
            "web",
        )));
        vpas.apply_watcher_event(&Event::Delete(vpa(
            "newer-on-deploy",
            "2026-01-03T00:00:00Z",
            "Deployment",
            "web",
        )));
        assert_eq!(
            assignment(&cache),
            [
                ("on-rs".to_owned(), strings(&[])),
                ("solo".to_owned(), strings(&["solo-1-a"])),
            ]
        );
        assert_eq!(
            cache.replicas(
                "ns",
                &Owner {
                    kind: "ReplicaSet".into(),
                    name: "web-1".into()
                }
            ),
            Some(2)
        );
    }

    /// A tenant's 10,000 VPAs on one Deployment with 10 pods: the oldest (then the smallest
    /// name) has the pods, the others none, and the Deployment's 10 candidate pods are checked
    /// once for all 10,000 VPAs (asking per VPA checked 100,000, each against 10,000 VPAs).
    /// Counted, not timed.
    #[test]
    fn many_vpas_on_one_target_check_its_pods_once() {
        const VPAS: usize = 10_000;
        const PODS: usize = 10;
        let (cache, mut vpas) = Cache::for_tests();
        cache.apply_replica_set(Event::Apply(replica_set("web-1", Some("web"))));
        for p in 0..PODS {
            cache.apply_pod(Event::Apply(pod(&format!("web-1-{p}"), "web-1")));
        }
        for v in 0..VPAS {
            vpas.apply_watcher_event(&Event::Apply(vpa(
                &format!("v{v:05}"),
                "2026-01-01T00:00:00Z",
                "Deployment",
                "web",
            )));
        }
        let sorted = Inventory::vpas(&cache, &Scope::AllBut(Vec::new()));
        let inventory = Inventory::new(&cache, sorted);
        assert_eq!(inventory.candidates_checked(), PODS);
        assert_eq!(inventory.vpas[0].metadata.name.as_deref(), Some("v00000"));
        assert_eq!(inventory.pods(0).len(), PODS);
        assert!((1..VPAS).all(|i| inventory.pods(i).is_empty()));
    }

    /// The owner lookup of the webhook and the recommender: watched ReplicaSets and Jobs in
    /// reflector stores, read through `plimsoll_runtime::owners` (their `Owners` impls are that
    /// call and nothing else).
    struct ServiceStores {
        replica_sets: kube::runtime::reflector::Store<ReplicaSet>,
        jobs: kube::runtime::reflector::Store<k8s_openapi::api::batch::v1::Job>,
    }

    impl controlling::Owners for ServiceStores {
        fn controller_of(&self, namespace: &str, owner: &OwnerKey) -> Option<Option<OwnerKey>> {
            plimsoll_runtime::owners::cached_controller_of(
                (&self.replica_sets, &self.jobs),
                namespace,
                owner,
            )
        }
    }

    /// For generated ReplicaSets (under a Deployment, a look-alike kind of another group, a
    /// custom `/scale` kind, or nothing), pods (of a ReplicaSet, a StatefulSet, a custom kind or
    /// a look-alike ReplicaSet) and VPAs (any of those targets, various creation times), the
    /// three services agree on every pod: it is in the updater's pods of exactly the VPA that
    /// core's `controlling_vpa` names over the updater's cache, and the same rule over the
    /// webhook's and the recommender's owner lookup (reflector stores fed the same
    /// ReplicaSets) names the same VPA. Seeded, so a failure replays.
    #[test]
    fn the_updater_assigns_pods_as_the_webhook_rule_does() {
        let mut seed: u64 = 0x5eed;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        let targets = [
            ("apps/v1", "Deployment", "d0"),
            ("apps/v1", "Deployment", "d1"),
            ("evil.example/v1", "Deployment", "d0"),
            ("example.com/v1", "Shard", "s0"),
            ("apps/v1", "ReplicaSet", "r0"),
            ("apps/v1", "ReplicaSet", "r1"),
            ("evil.example/v1", "ReplicaSet", "r0"),
            ("apps/v1", "StatefulSet", "db"),
        ];
        for _ in 0..300 {
            let (cache, mut vpa_writer) = Cache::for_tests();
            let mut replica_sets = kube::runtime::reflector::store::Writer::default();
            for rs in ["r0", "r1"] {
                let parent =
                    [None, Some(0), Some(1), Some(2), Some(3)][usize::try_from(next(5)).unwrap()];
                let refs = parent.map_or(json!([]), |i: usize| {
                    let (api, kind, name) = targets[i];
                    json!([{"apiVersion": api, "kind": kind, "name": name, "uid": name, "controller": true}])
                });
                let object: ReplicaSet = serde_json::from_value(json!({
                    "metadata": {"name": rs, "namespace": "ns", "ownerReferences": refs},
                    "spec": {"replicas": 1, "selector": {}}
                }))
                .unwrap();
                replica_sets.apply_watcher_event(&Event::Apply(object.clone()));
                cache.apply_replica_set(Event::Apply(object));
            }
            let stores = ServiceStores {
                replica_sets: replica_sets.as_reader(),
                jobs: kube::runtime::reflector::store::Writer::default().as_reader(),
            };
            let mut pods = Vec::new();
            for p in 0..6 {
                let (api, kind, name) = targets[usize::try_from(3 + next(5)).unwrap()];
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": format!("p{p}"), "namespace": "ns", "uid": format!("uid-p{p}"),
                        "ownerReferences": [{"apiVersion": api, "kind": kind, "name": name,
                            "uid": name, "controller": true}]},
                    "spec": {"containers": [{"name": "app"}]}
                }))
                .unwrap();
                cache.apply_pod(Event::Apply(pod.clone()));
                pods.push(pod);
            }
            for v in 0..4 {
                let (api, kind, name) = targets[usize::try_from(next(8)).unwrap()];
                let created = format!("2026-01-0{}T00:00:00Z", 1 + next(2));
                let mut object = vpa(&format!("v{v}"), &created, kind, name);
                object.spec.target_ref.api_version = Some(api.to_owned());
                vpa_writer.apply_watcher_event(&Event::Apply(object));
            }
            let vpas = Inventory::vpas(&cache, &Scope::AllBut(Vec::new()));
            let inventory = Inventory::new(&cache, vpas.clone());
            for pod in &pods {
                let expected = controlling::controlling_vpa(&pod.metadata, "ns", &cache, &vpas)
                    .and_then(|v| v.metadata.name.clone());
                let webhook = controlling::controlling_vpa(&pod.metadata, "ns", &stores, &vpas)
                    .and_then(|v| v.metadata.name.clone());
                assert_eq!(webhook, expected, "{pod:?} {vpas:?}");
                let holders: Vec<String> = (0..inventory.vpas.len())
                    .filter(|&i| {
                        inventory
                            .pods(i)
                            .iter()
                            .any(|p| p.name() == pod.metadata.name.as_deref().unwrap_or_default())
                    })
                    .filter_map(|i| inventory.vpas[i].metadata.name.clone())
                    .collect();
                assert_eq!(
                    holders,
                    expected.into_iter().collect::<Vec<_>>(),
                    "{pod:?} {vpas:?}"
                );
            }
        }
    }
}
