//! The hardening docs/install.md promises, checked on the Deployments of deploy/ and of the
//! rendered chart alike.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

fn pod(d: &Deployment) -> &PodSpec {
    d.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod spec")
}

fn selects(selector: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    let wanted = selector
        .and_then(|s| s.match_labels.clone())
        .unwrap_or_default();
    !wanted.is_empty() && wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The fields docs/install.md promises for every pod and container.
pub fn assert_hardened(d: &Deployment) {
    let name = d.metadata.name.clone().unwrap_or_default();
    let pod = pod(d);
    let psc = pod.security_context.as_ref().expect("pod securityContext");
    assert_eq!(psc.run_as_non_root, Some(true), "{name}");
    assert_eq!(psc.run_as_user, Some(65532), "{name}");
    assert_eq!(psc.run_as_group, Some(65532), "{name}");
    assert_eq!(
        psc.seccomp_profile.as_ref().map(|s| s.type_.as_str()),
        Some("RuntimeDefault"),
        "{name}"
    );
    for c in pod
        .containers
        .iter()
        .chain(pod.init_containers.iter().flatten())
    {
        let sc = c
            .security_context
            .as_ref()
            .expect("container securityContext");
        assert_eq!(sc.run_as_non_root, Some(true), "{name}/{}", c.name);
        assert_eq!(sc.run_as_user, Some(65532), "{name}/{}", c.name);
        assert_eq!(sc.run_as_group, Some(65532), "{name}/{}", c.name);
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{name}");
        assert_eq!(sc.read_only_root_filesystem, Some(true), "{name}");
        assert_eq!(sc.privileged, None, "{name}");
        let drop = sc.capabilities.as_ref().and_then(|c| c.drop.clone());
        assert_eq!(drop, Some(vec!["ALL".to_owned()]), "{name}");
        assert_eq!(sc.capabilities.as_ref().and_then(|c| c.add.clone()), None);
        assert_eq!(
            sc.seccomp_profile.as_ref().map(|s| s.type_.as_str()),
            Some("RuntimeDefault"),
            "{name}"
        );
        let resources = c.resources.as_ref().expect("resources");
        let requests = resources.requests.clone().unwrap_or_default();
        let limits = resources.limits.clone().unwrap_or_default();
        assert!(
            requests.contains_key("cpu") && requests.contains_key("memory"),
            "{name}: cpu and memory requests"
        );
        assert!(limits.contains_key("memory"), "{name}: a memory limit");
    }
    assert_ne!(pod.host_network, Some(true), "{name}");
    assert!(
        pod.volumes.iter().flatten().all(|v| v.host_path.is_none()),
        "{name}: no hostPath"
    );
}

/// Two or more replicas, a PodDisruptionBudget keeping one, and a spread over nodes and zones.
pub fn assert_highly_available(d: &Deployment, pdb: &PodDisruptionBudget) {
    let name = d.metadata.name.clone().unwrap_or_default();
    let labels = d
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    assert!(
        d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1) >= 2,
        "{name}: two replicas"
    );
    let pdb_spec = pdb.spec.as_ref().expect("pdb spec");
    // maxUnavailable, not minAvailable: the same with two replicas, and a drain still proceeds
    // where an operator ran one.
    assert_eq!(
        pdb_spec.max_unavailable,
        Some(IntOrString::Int(1)),
        "{name}"
    );
    assert_eq!(pdb_spec.min_available, None, "{name}");
    assert!(
        selects(pdb_spec.selector.as_ref(), &labels),
        "{name}: PDB selects the pods"
    );
    let spread = pod(d)
        .topology_spread_constraints
        .clone()
        .unwrap_or_else(|| panic!("{name}: topologySpreadConstraints"));
    let keys: Vec<_> = spread.iter().map(|c| c.topology_key.as_str()).collect();
    assert_eq!(
        keys,
        ["kubernetes.io/hostname", "topology.kubernetes.io/zone"],
        "{name}"
    );
    for c in &spread {
        assert!(selects(c.label_selector.as_ref(), &labels), "{name}");
        assert_eq!(c.max_skew, 1, "{name}");
        assert_eq!(
            c.when_unsatisfiable, "ScheduleAnyway",
            "{name}: one-node clusters too"
        );
    }
}
