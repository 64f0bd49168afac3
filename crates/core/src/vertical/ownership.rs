//! Which VPA a pod's usage teaches: the VPA that controls it, by the rule the admission webhook
//! and the updater follow too ([`super::controlling`], upstream's `GetControllingVPAForPod`), so that a
//! VPA learns from exactly the pods it acts on.
//!
//! Among the VPAs whose `targetRef` names the pod's top controller, those whose pod selector is
//! resolved, has at least one requirement and matches the pod's labels compete; the oldest wins
//! (then the smaller name). A VPA whose selector is empty (it would select every pod of the
//! namespace) or unresolved owns no pod (upstream skips a VPA whose selector it cannot fetch).
//! The selector itself is the caller's: the service resolves `spec.targetRef` through the scale
//! subresource and hands it in behind [`ServedVpa`]; so is the owner lookup ([`Owners`]).
//!
//! Invariant: a pod belongs to at most one VPA; pods keep their input order.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::controlling::{Candidate, ControllingIndex, Owners};
use super::joint_sizing::HorizontalSettings;
use crate::api::vpa::VerticalPodAutoscaler;

/// `namespace/name` of a VPA.
pub type VpaKey = (String, String);

/// The key of `vpa`.
pub fn key_of(vpa: &VerticalPodAutoscaler) -> VpaKey {
    (
        vpa.metadata.namespace.clone().unwrap_or_default(),
        vpa.metadata.name.clone().unwrap_or_default(),
    )
}

/// A VPA the recommender serves, with its target's pod selector resolved by the caller.
pub trait ServedVpa {
    /// The object as last seen.
    fn object(&self) -> &VerticalPodAutoscaler;
    /// Why the target cannot be served (no such object, no scale subresource…), if it cannot.
    fn target_error(&self) -> Option<&str>;
    /// True when the selector is resolved and has at least one requirement.
    fn has_pod_selector(&self) -> bool;
    /// True when the resolved selector matches `labels` (false when unresolved).
    fn selects(&self, labels: Option<&BTreeMap<String, String>>) -> bool;
    /// A horizontal autoscaler that fights this VPA over the same requests, as the
    /// `ConflictingAutoscaler` condition's message ([`crate::conflict`]); none by default.
    fn conflict(&self) -> Option<&str> {
        None
    }
    /// For a VPA in joint mode ([`crate::conflict::HORIZONTAL_AWARE_ANNOTATION`]), the
    /// horizontal autoscaler that scales its workload on CPU utilization, whose settings the
    /// joint request is sized from ([`super::joint_sizing`]); none by default.
    fn joint(&self) -> Option<&HorizontalSettings> {
        None
    }
}

/// A borrowed served VPA serves the same (ownership over VPAs gathered from several lists).
impl<T: ServedVpa + ?Sized> ServedVpa for &T {
    fn object(&self) -> &VerticalPodAutoscaler {
        (**self).object()
    }
    fn target_error(&self) -> Option<&str> {
        (**self).target_error()
    }
    fn has_pod_selector(&self) -> bool {
        (**self).has_pod_selector()
    }
    fn selects(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        (**self).selects(labels)
    }
    fn conflict(&self) -> Option<&str> {
        (**self).conflict()
    }
    fn joint(&self) -> Option<&HorizontalSettings> {
        (**self).joint()
    }
}

/// A served VPA competing for pods ([`super::controlling::controlling`]).
struct Served<'v, V>(&'v V);

impl<V: ServedVpa> Candidate for Served<'_, V> {
    fn vpa(&self) -> &VerticalPodAutoscaler {
        self.0.object()
    }
    fn selects(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        self.0.selects(labels)
    }
}

/// Each pod that belongs to a VPA, with that VPA's key, in the order of `pods`; the pods'
/// owners are walked through `known`. The VPAs are grouped once ([`ControllingIndex`]): a pod
/// is compared with the VPAs on its own top controller only, not with every VPA of its
/// namespace.
pub fn owners<'p, V: ServedVpa>(
    vpas: &[V],
    pods: &'p [Arc<Pod>],
    known: &dyn Owners,
) -> Vec<(VpaKey, &'p Pod)> {
    let served: Vec<Served<'_, V>> = vpas
        .iter()
        .filter(|v| V::has_pod_selector(v))
        .map(Served)
        .collect();
    let index = ControllingIndex::new(&served);
    pods.iter()
        .filter_map(|pod| {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            let (_, owner) = index.controlling_vpa(&pod.metadata, namespace, &known)?;
            Some((key_of(owner.vpa()), pod.as_ref()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vertical::controlling;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// A VPA whose selector is one `key=value` label (`None`: unresolved).
    struct Fake {
        vpa: VerticalPodAutoscaler,
        label: Option<(&'static str, &'static str)>,
    }

    impl ServedVpa for Fake {
        fn object(&self) -> &VerticalPodAutoscaler {
            &self.vpa
        }
        fn target_error(&self) -> Option<&str> {
            self.label.is_none().then_some("not found")
        }
        fn has_pod_selector(&self) -> bool {
            self.label.is_some()
        }
        fn selects(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
            self.label
                .is_some_and(|(k, v)| labels.and_then(|l| l.get(k)).is_some_and(|x| x == v))
        }
    }

    fn fake(
        name: &str,
        created: &str,
        target: &str,
        label: Option<(&'static str, &'static str)>,
    ) -> Fake {
        let vpa: VerticalPodAutoscaler = serde_json::from_value(serde_json::json!({
            "apiVersion": "autoscaling.k8s.io/v1",
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target}},
        }))
        .unwrap();
        Fake { vpa, label }
    }

    /// A pod of ReplicaSet `web-5d8f` (Deployment `web` by its `pod-template-hash`), or of
    /// nothing.
    fn pod(name: &str, owned: bool, labels: &[(&str, &str)]) -> Arc<Pod> {
        let references = serde_json::json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "name": "web-5d8f", "uid": "rs", "controller": true}]);
        let mut labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        labels.insert(controlling::POD_TEMPLATE_HASH.to_owned(), "5d8f".to_owned());
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                labels: Some(labels),
                owner_references: owned.then(|| serde_json::from_value(references).unwrap()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        })
    }

    /// Was "the first matching VPA by name" (`a`) before the rule was shared with the webhook
    /// and the updater: now the oldest VPA on the pod's controller that selects it.
    #[test]
    fn the_oldest_selecting_vpa_on_the_pods_controller_owns_it() {
        let vpas = [
            fake("b", "2026-01-01T00:00:00Z", "web", Some(("tier", "web"))),
            fake("a", "2026-01-02T00:00:00Z", "web", Some(("tier", "web"))),
            fake("c", "2025-01-01T00:00:00Z", "web", None),
            fake("d", "2025-01-01T00:00:00Z", "api", Some(("tier", "web"))),
        ];
        let pods = [
            pod("p", true, &[("tier", "web")]),
            pod("q", true, &[("tier", "db")]),
            pod("r", false, &[("tier", "web")]),
        ];
        let got: Vec<(String, String)> = owners(&vpas, &pods, &controlling::NoOwners)
            .into_iter()
            .map(|(k, p)| (k.1, p.metadata.name.clone().unwrap_or_default()))
            .collect();
        assert_eq!(got, [("b".to_owned(), "p".to_owned())]);
    }

    /// What [`owners`] computed before the VPAs were grouped: every pod against every VPA of
    /// its namespace through [`controlling::controlling_vpa`].
    fn owners_per_pod<'p, V: ServedVpa>(
        vpas: &[V],
        pods: &'p [Arc<Pod>],
        known: &dyn Owners,
    ) -> Vec<(VpaKey, &'p Pod)> {
        let mut by_namespace: std::collections::HashMap<&str, Vec<Served<'_, V>>> =
            std::collections::HashMap::new();
        for v in vpas.iter().filter(|v| V::has_pod_selector(v)) {
            by_namespace
                .entry(v.object().metadata.namespace.as_deref().unwrap_or_default())
                .or_default()
                .push(Served(v));
        }
        pods.iter()
            .filter_map(|pod| {
                let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
                let candidates = by_namespace.get(namespace)?;
                let owner =
                    controlling::controlling_vpa(&pod.metadata, namespace, &known, candidates)?;
                Some((key_of(owner.vpa()), pod.as_ref()))
            })
            .collect()
    }

    proptest::proptest! {
        /// Grouped or not, the same pods go to the same VPAs in the same order: VPAs on two
        /// Deployments in two namespaces, created on one of two days, with one of two selectors
        /// or none, named so that names repeat.
        #[test]
        fn grouping_the_vpas_assigns_what_the_per_pod_rule_assigns(
            vpas in proptest::collection::vec((0u8..3, 0u8..2, proptest::bool::ANY, 0u8..3, proptest::bool::ANY), 0..10),
            pods in proptest::collection::vec((proptest::bool::ANY, proptest::bool::ANY, proptest::bool::ANY), 0..8),
        ) {
            let vpas: Vec<Fake> = vpas
                .into_iter()
                .map(|(name, day, api, label, elsewhere)| {
                    let created = ["2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"][usize::from(day)];
                    let label = [None, Some(("tier", "web")), Some(("tier", "db"))][usize::from(label)];
                    let mut f = fake(&format!("v{name}"), created, if api { "api" } else { "web" }, label);
                    if elsewhere {
                        f.vpa.metadata.namespace = Some("other".to_owned());
                    }
                    f
                })
                .collect();
            let pods: Vec<Arc<Pod>> = pods
                .into_iter()
                .enumerate()
                .map(|(i, (owned, web, elsewhere))| {
                    let mut p = pod(&format!("p{i}"), owned, &[("tier", if web { "web" } else { "db" })]);
                    if elsewhere {
                        Arc::make_mut(&mut p).metadata.namespace = Some("other".to_owned());
                    }
                    p
                })
                .collect();
            let grouped = owners(&vpas, &pods, &controlling::NoOwners);
            let per_pod = owners_per_pod(&vpas, &pods, &controlling::NoOwners);
            proptest::prop_assert_eq!(grouped.len(), per_pod.len());
            for ((k1, p1), (k2, p2)) in grouped.iter().zip(&per_pod) {
                proptest::prop_assert_eq!(k1, k2);
                proptest::prop_assert!(std::ptr::eq(*p1, *p2));
            }
        }
    }

    /// A VPA that counts how often ownership reads it.
    struct Counted<'a> {
        fake: Fake,
        reads: &'a std::cell::Cell<usize>,
        matches: &'a std::cell::Cell<usize>,
    }

    impl ServedVpa for Counted<'_> {
        fn object(&self) -> &VerticalPodAutoscaler {
            self.reads.set(self.reads.get() + 1);
            self.fake.object()
        }
        fn target_error(&self) -> Option<&str> {
            self.fake.target_error()
        }
        fn has_pod_selector(&self) -> bool {
            self.fake.has_pod_selector()
        }
        fn selects(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
            self.matches.set(self.matches.get() + 1);
            self.fake.selects(labels)
        }
    }

    /// 10,000 VPAs on one Deployment and 10 of its pods: each VPA is read once (and each owned
    /// pod's VPA once more, for its key), each pod asks one selector. Before the grouping each
    /// pod asked all 10,000. Counted, not timed.
    #[test]
    fn many_vpas_on_one_target_are_read_once() {
        const VPAS: usize = 10_000;
        const PODS: usize = 10;
        let (reads, matches) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
        let vpas: Vec<Counted<'_>> = (0..VPAS)
            .map(|i| Counted {
                fake: fake(
                    &format!("v{i:05}"),
                    "2026-01-01T00:00:00Z",
                    "web",
                    Some(("tier", "web")),
                ),
                reads: &reads,
                matches: &matches,
            })
            .collect();
        let pods: Vec<Arc<Pod>> = (0..PODS)
            .map(|i| pod(&format!("p{i}"), true, &[("tier", "web")]))
            .collect();
        let got = owners(&vpas, &pods, &controlling::NoOwners);
        assert_eq!(got.len(), PODS);
        assert!(got.iter().all(|(k, _)| k.1 == "v00000"));
        assert_eq!(reads.get(), VPAS + PODS);
        assert_eq!(matches.get(), PODS);
    }
}
