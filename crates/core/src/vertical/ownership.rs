//! Which VPA a pod's usage teaches: the VPA that controls it, by the rule the admission webhook
//! and the updater follow too ([`controlling`], upstream's `GetControllingVPAForPod`), so that a
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

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::controlling::{self, Candidate, Owners};
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

/// A served VPA competing for pods ([`controlling::controlling`]).
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
/// owners are walked through `known`.
pub fn owners<'p, V: ServedVpa>(
    vpas: &[V],
    pods: &'p [Arc<Pod>],
    known: &dyn Owners,
) -> Vec<(VpaKey, &'p Pod)> {
    let mut by_namespace: HashMap<&str, Vec<Served<'_, V>>> = HashMap::new();
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
            let owner = controlling::controlling_vpa(&pod.metadata, namespace, &known, candidates)?;
            Some((key_of(owner.vpa()), pod.as_ref()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
