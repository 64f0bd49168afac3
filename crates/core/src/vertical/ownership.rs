//! Which VPA a pod belongs to (upstream `model/cluster.go` picks one controlling VPA per pod).
//!
//! Per namespace, the first VPA by name whose pod selector is resolved, has at least one
//! requirement, and matches the pod's labels. A VPA whose selector is empty (it would select every
//! pod of the namespace) or unresolved owns no pod. The selector itself is the caller's: the
//! service resolves `spec.targetRef` through the scale subresource and hands it in behind
//! [`ServedVpa`].
//!
//! Invariant: a pod belongs to at most one VPA; pods keep their input order.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

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

/// Each pod that belongs to a VPA, with that VPA's key, in the order of `pods`.
pub fn owners<'p, V: ServedVpa>(vpas: &[V], pods: &'p [Arc<Pod>]) -> Vec<(VpaKey, &'p Pod)> {
    let mut by_namespace: HashMap<&str, Vec<&V>> = HashMap::new();
    for v in vpas.iter().filter(|v| V::has_pod_selector(v)) {
        by_namespace
            .entry(v.object().metadata.namespace.as_deref().unwrap_or_default())
            .or_default()
            .push(v);
    }
    for list in by_namespace.values_mut() {
        list.sort_by(|a, b| a.object().metadata.name.cmp(&b.object().metadata.name));
    }
    pods.iter()
        .filter_map(|pod| {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            let labels = pod.metadata.labels.as_ref();
            let owner = by_namespace
                .get(namespace)?
                .iter()
                .find(|v| v.selects(labels))?;
            Some((key_of(owner.object()), pod.as_ref()))
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

    fn fake(name: &str, label: Option<(&'static str, &'static str)>) -> Fake {
        let vpa: VerticalPodAutoscaler = serde_json::from_value(serde_json::json!({
            "apiVersion": "autoscaling.k8s.io/v1",
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}},
        }))
        .unwrap();
        Fake { vpa, label }
    }

    fn pod(name: &str, labels: &[(&str, &str)]) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        })
    }

    #[test]
    fn first_matching_vpa_by_name_owns_the_pod() {
        let vpas = [
            fake("b", Some(("tier", "web"))),
            fake("a", Some(("tier", "web"))),
            fake("c", None),
        ];
        let pods = [pod("p", &[("tier", "web")]), pod("q", &[("tier", "db")])];
        let got: Vec<(String, String)> = owners(&vpas, &pods)
            .into_iter()
            .map(|(k, p)| (k.1, p.metadata.name.clone().unwrap_or_default()))
            .collect();
        assert_eq!(got, [("a".to_owned(), "p".to_owned())]);
    }
}
