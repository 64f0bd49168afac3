//! Which pods belong to which VPA, read from the watch-fed [`Cache`] at the start of a loop
//! (no request is made here).
//!
//! A pod belongs to the VPA whose `targetRef` names the pod's controller or that controller's
//! own controller (a Deployment above its ReplicaSet, a CronJob above its Job, or any custom
//! kind that owns ReplicaSets, such as an Argo Rollout); the upper one wins when both are
//! targeted. When two VPAs name the same controller the older one wins (then the one whose
//! namespace and name sort first), so the choice is stable across loops. The lookup goes from
//! the VPA to its pods through the cache's controller indexes, never over every pod.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::LimitRange;
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_core::vertical::limit_range::{self, LimitRangeItem, LimitType};
use plimsoll_core::vertical::priority::Owner;

use crate::cache::{Cache, CachedPod};

/// Which namespaces the updater looks at: the rule the admission webhook follows too
/// (`--vpa-object-namespace`, `--ignored-vpa-object-namespaces`, by default all but kube-system
/// and the updater's own namespace).
pub use plimsoll_core::vertical::scope::NamespaceScope as Scope;

/// `(namespace, kind, name)` of a VPA's target.
type TargetKey = (String, String, String);

fn namespace(vpa: &VerticalPodAutoscaler) -> &str {
    vpa.metadata.namespace.as_deref().unwrap_or_default()
}

/// One loop's view: the VPAs to act on and, through the cache, their pods.
pub struct Inventory<'c> {
    cache: &'c Cache,
    /// VPAs, oldest first.
    pub vpas: Vec<Arc<VerticalPodAutoscaler>>,
    /// Each target's VPA (index into `vpas`): the first one naming it.
    targets: HashMap<TargetKey, usize>,
    limit_ranges: HashMap<String, Vec<(LimitType, LimitRangeItem)>>,
}

impl<'c> Inventory<'c> {
    /// The VPAs in scope, oldest first.
    pub fn vpas(cache: &Cache, scope: &Scope) -> Vec<Arc<VerticalPodAutoscaler>> {
        let mut vpas = cache.vpas(scope);
        let created =
            |v: &VerticalPodAutoscaler| v.metadata.creation_timestamp.as_ref().map(|t| t.0);
        vpas.sort_by(|a, b| {
            created(a)
                .cmp(&created(b))
                .then_with(|| namespace(a).cmp(namespace(b)))
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        });
        vpas
    }

    /// The view of `vpas` (sorted as [`Inventory::vpas`] sorts them) over `cache`.
    pub fn new(cache: &'c Cache, vpas: Vec<Arc<VerticalPodAutoscaler>>) -> Inventory<'c> {
        let mut targets = HashMap::with_capacity(vpas.len());
        for (i, vpa) in vpas.iter().enumerate() {
            let r = &vpa.spec.target_ref;
            targets
                .entry((namespace(vpa).to_owned(), r.kind.clone(), r.name.clone()))
                .or_insert(i);
        }
        let mut ranges: BTreeMap<String, Vec<LimitRange>> = BTreeMap::new();
        if !vpas.is_empty() {
            for lr in cache.limit_ranges() {
                let ns = lr.metadata.namespace.clone().unwrap_or_default();
                ranges.entry(ns).or_default().push((*lr).clone());
            }
        }
        let mut limit_ranges = HashMap::new();
        for (ns, mut list) in ranges {
            list.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            match limit_range::from_k8s(&list) {
                Ok(items) => {
                    limit_ranges.insert(ns, items);
                }
                Err(e) => {
                    tracing::warn!(namespace = %ns, error = %e, "cannot read LimitRanges; capping without them");
                }
            }
        }
        Inventory {
            cache,
            vpas,
            targets,
            limit_ranges,
        }
    }

    fn targeted(&self, namespace: &str, owner: &Owner) -> bool {
        self.targets
            .contains_key(&(namespace.to_owned(), owner.kind.clone(), owner.name.clone()))
    }

    /// The live pods of the VPA `vpas[i]`, sorted by name.
    pub fn pods(&self, i: usize) -> Vec<Arc<CachedPod>> {
        let Some(vpa) = self.vpas.get(i) else {
            return Vec::new();
        };
        let ns = namespace(vpa);
        let r = &vpa.spec.target_ref;
        if self
            .targets
            .get(&(ns.to_owned(), r.kind.clone(), r.name.clone()))
            != Some(&i)
        {
            return Vec::new();
        }
        let target = Owner {
            kind: r.kind.clone(),
            name: r.name.clone(),
        };
        let mut pods = Vec::new();
        // Pods the target controls directly, unless its own controller is targeted too.
        let upper_targeted = self
            .cache
            .controller_of_owner(ns, &target)
            .is_some_and(|upper| self.targeted(ns, &upper));
        if !upper_targeted {
            pods.extend(self.cache.pods_of(ns, &target));
        }
        // Pods of the owners the target controls (its ReplicaSets, its Jobs).
        for child in self.cache.owned_by(ns, &target) {
            pods.extend(self.cache.pods_of(ns, &child));
        }
        pods.sort_by(|a, b| a.name().cmp(b.name()));
        pods
    }

    /// Desired replicas of `owner` in `namespace`, when known.
    pub fn replicas(&self, namespace: &str, owner: &Owner) -> Option<u32> {
        self.cache.replicas(namespace, owner)
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

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Pod;
    use kube::runtime::watcher::Event;
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
                // The Deployment above the ReplicaSet is targeted too: it wins.
                ("on-rs".to_owned(), strings(&[])),
                ("on-deploy".to_owned(), strings(&["web-1-a", "web-1-b"])),
                // Two VPAs on one Deployment: the older one has the pods.
                ("newer-on-deploy".to_owned(), strings(&[])),
                // A ReplicaSet with no controller above it.
                ("solo".to_owned(), strings(&["solo-1-a"])),
            ]
        );
        // The Deployment's VPA goes away: its ReplicaSet's VPA takes the pods.
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
                ("on-rs".to_owned(), strings(&["web-1-a", "web-1-b"])),
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
}
