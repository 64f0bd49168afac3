//! Whether a horizontal and a vertical autoscaler fight over one workload.
//!
//! They fight when the horizontal one (an HPA+, or a native HPA read as one) scales on the
//! per-pod amount of CPU or memory, as a percentage of the request (`Utilization`) or as an
//! average (`AverageValue`, or a `Watermark` band on a `Resource` / `ContainerResource` metric),
//! and a VPA on the same workload changes that resource's requests (update mode `Initial`,
//! `Recreate`, `Auto`, `InPlace` or `InPlaceOrRecreate`, and the container's policy controls the
//! resource). The VPA then shrinks requests toward the usage the HPA holds at its target, the HPA
//! sees a higher utilization and adds pods, usage per pod falls, and requests shrink again.
//!
//! A VPA with the annotation [`HORIZONTAL_AWARE_ANNOTATION`]` = "true"` is in joint mode: its
//! recommender sizes requests from the horizontal autoscaler's own settings, so it does not
//! fight (docs/vpa.md, "HPA and VPA together").
//!
//! Both services call [`conflicts`]: hpa-plus with the VPAs of its autoscaler's namespace, the
//! recommender with the autoscalers of its VPA's namespace; each sets the [`CONDITION`] on its
//! own object and emits a Warning Event when it turns true.

use std::collections::BTreeMap;

use crate::api::hpa_plus::{HorizontalPodAutoscalerPlusSpec, MetricTargetType};
use crate::horizontal::source::pod_resource;
use kube::ResourceExt;

use crate::api::vpa::{
    ContainerScalingMode, DEFAULT_CONTAINER_POLICY, UpdateMode, VerticalPodAutoscaler,
    VerticalPodAutoscalerSpec,
};
use crate::horizontal::conditions::Condition;

/// The VPA annotation that turns on joint horizontal and vertical sizing.
pub const HORIZONTAL_AWARE_ANNOTATION: &str = "plimsoll.dev/horizontal-aware";

/// The condition type both objects carry while they conflict.
pub const CONDITION: &str = "ConflictingAutoscaler";

/// The condition's reason while they conflict.
pub const REASON: &str = "BothControlRequests";

/// The condition's reason once they no longer conflict.
pub const RESOLVED_REASON: &str = "NoConflict";

/// Resources of the requests a VPA controls by default (`controlledResources`).
const DEFAULT_CONTROLLED: [&str; 2] = ["cpu", "memory"];

/// Whether `annotations` put a VPA in joint mode.
pub fn horizontal_aware(annotations: &BTreeMap<String, String>) -> bool {
    annotations
        .get(HORIZONTAL_AWARE_ANNOTATION)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Whether the update mode changes pods' requests (every mode but `Off`; an unknown mode is
/// taken to change them, as a newer upstream mode most likely does).
fn changes_requests(mode: &UpdateMode) -> bool {
    !matches!(mode, UpdateMode::Off)
}

/// Whether `vpa` controls `resource` of `container` (`None`: some container of the pod).
fn controls(vpa: &VerticalPodAutoscalerSpec, resource: &str, container: Option<&str>) -> bool {
    let policy_controls = |p: Option<&crate::api::vpa::ContainerResourcePolicy>| {
        let Some(p) = p else { return true };
        if p.mode.as_ref() == Some(&ContainerScalingMode::Off) {
            return false;
        }
        p.controlled_resources.as_ref().map_or_else(
            || DEFAULT_CONTROLLED.contains(&resource),
            |list| list.iter().any(|r| r == resource),
        )
    };
    if let Some(c) = container {
        return policy_controls(vpa.container_policy(c));
    }
    // Containers without a policy of their own follow `*` (or the defaults); any container
    // with one that controls the resource is enough too.
    let policies = vpa
        .resource_policy
        .as_ref()
        .and_then(|p| p.container_policies.as_deref())
        .unwrap_or_default();
    let default = policies
        .iter()
        .find(|p| p.container_name.as_deref() == Some(DEFAULT_CONTAINER_POLICY));
    policy_controls(default)
        || policies
            .iter()
            .filter(|p| p.container_name.as_deref() != Some(DEFAULT_CONTAINER_POLICY))
            .any(|p| policy_controls(Some(p)))
}

/// The resources (`cpu`, `memory`, sorted, each once) over which `hpa` and `vpa` fight, when
/// both aim at the same workload (the caller checks the namespace); empty when they do not.
pub fn conflicts(
    hpa: &HorizontalPodAutoscalerPlusSpec,
    vpa: &VerticalPodAutoscalerSpec,
    vpa_annotations: &BTreeMap<String, String>,
) -> Vec<String> {
    let same_target = hpa.scale_target_ref.kind == vpa.target_ref.kind
        && hpa.scale_target_ref.name == vpa.target_ref.name;
    if !same_target || horizontal_aware(vpa_annotations) || !changes_requests(&vpa.update_mode()) {
        return Vec::new();
    }
    let mut out: Vec<String> = super::horizontal::proposals::metrics_of(hpa)
        .iter()
        .filter_map(|m| {
            let (resource, container) = pod_resource(m)?;
            let per_pod = matches!(
                m.target()?.type_,
                MetricTargetType::Utilization
                    | MetricTargetType::AverageValue
                    | MetricTargetType::Watermark
            );
            (per_pod
                && DEFAULT_CONTROLLED.contains(&resource)
                && controls(vpa, resource, container))
            .then(|| resource.to_owned())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The `ConflictingAutoscaler` condition of a horizontal autoscaler (`hpa`) given the VPAs
/// aiming at its workload, in name order: `True` naming the first one that fights it, with the
/// resources; `False` (`NoConflict`) when none does but `was_conflicting`, so the status says it
/// is over; `None` when there is nothing to say.
pub fn horizontal_condition<'a>(
    hpa: &HorizontalPodAutoscalerPlusSpec,
    vpas: impl IntoIterator<Item = &'a VerticalPodAutoscaler>,
    was_conflicting: bool,
) -> Option<Condition> {
    let fight = vpas.into_iter().find_map(|v| {
        let resources = conflicts(hpa, &v.spec, v.annotations());
        (!resources.is_empty()).then_some((v, resources))
    });
    match fight {
        Some((v, resources)) => Some(Condition::new(
            CONDITION,
            true,
            REASON,
            horizontal_message(&v.name_any(), &v.spec.update_mode(), &resources),
        )),
        None if was_conflicting => Some(Condition::new(
            CONDITION,
            false,
            RESOLVED_REASON,
            "no VerticalPodAutoscaler changes the requests this autoscaler scales on".to_owned(),
        )),
        None => None,
    }
}

/// The condition message on the horizontal side: which VPA, which resources.
pub fn horizontal_message(vpa_name: &str, mode: &UpdateMode, resources: &[String]) -> String {
    format!(
        "VerticalPodAutoscaler {vpa_name} (updateMode {mode}) changes the {} requests this \
         autoscaler scales on; the two chase each other. Set updateMode Off, exclude {} from the \
         VPA's controlledResources, or annotate the VPA {HORIZONTAL_AWARE_ANNOTATION}=\"true\" \
         for joint sizing",
        resources.join(" and "),
        resources.join(" and "),
    )
}

/// The condition message on the vertical side: which autoscaler, which resources.
pub fn vertical_message(autoscaler: &str, resources: &[String]) -> String {
    format!(
        "{autoscaler} scales on the {} of the pods whose requests this VPA changes; the two \
         chase each other. Annotate this VPA {HORIZONTAL_AWARE_ANNOTATION}=\"true\" for joint \
         sizing, set updateMode Off, or exclude {} from controlledResources",
        resources.join(" and "),
        resources.join(" and "),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn hpa(metrics: &serde_json::Value) -> HorizontalPodAutoscalerPlusSpec {
        serde_json::from_value(json!({
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 10,
            "metrics": metrics,
        }))
        .unwrap()
    }

    fn vpa(extra: &serde_json::Value) -> VerticalPodAutoscalerSpec {
        let mut spec =
            json!({"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        serde_json::from_value(spec).unwrap()
    }

    fn cpu(target: &serde_json::Value) -> serde_json::Value {
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": target}}])
    }

    fn none() -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    #[test]
    fn cpu_utilization_against_a_default_vpa_conflicts_on_cpu() {
        let h = hpa(&cpu(
            &json!({"type": "Utilization", "averageUtilization": 60}),
        ));
        assert_eq!(conflicts(&h, &vpa(&json!({})), &none()), ["cpu"]);
        // Upstream's default metric (no metrics: CPU at 80 %) conflicts too.
        assert_eq!(
            conflicts(&hpa(&json!([])), &vpa(&json!({})), &none()),
            ["cpu"]
        );
    }

    #[test]
    fn each_mode_that_changes_requests_conflicts_and_off_does_not() {
        let h = hpa(&cpu(
            &json!({"type": "AverageValue", "averageValue": "500m"}),
        ));
        for mode in [
            "Initial",
            "Recreate",
            "Auto",
            "InPlaceOrRecreate",
            "InPlace",
        ] {
            let v = vpa(&json!({"updatePolicy": {"updateMode": mode}}));
            assert_eq!(conflicts(&h, &v, &none()), ["cpu"], "{mode}");
        }
        let off = vpa(&json!({"updatePolicy": {"updateMode": "Off"}}));
        assert!(conflicts(&h, &off, &none()).is_empty());
    }

    #[test]
    fn joint_mode_another_workload_or_an_external_metric_is_no_conflict() {
        let h = hpa(&cpu(
            &json!({"type": "Utilization", "averageUtilization": 60}),
        ));
        let aware: BTreeMap<String, String> =
            [(HORIZONTAL_AWARE_ANNOTATION.to_owned(), "True".to_owned())].into();
        assert!(conflicts(&h, &vpa(&json!({})), &aware).is_empty());
        let other = vpa(&json!({"targetRef": {"kind": "Deployment", "name": "db"}}));
        assert!(conflicts(&h, &other, &none()).is_empty());
        let queue = hpa(
            &json!([{"type": "External", "external": {"metric": {"name": "q"},
            "target": {"type": "Value", "value": "5"}}}]),
        );
        assert!(conflicts(&queue, &vpa(&json!({})), &none()).is_empty());
    }

    #[test]
    fn container_policies_decide_which_resources_are_controlled() {
        let both = hpa(&json!([
            {"type": "Resource", "resource": {"name": "memory",
                "target": {"type": "AverageValue", "averageValue": "1Gi"}}},
            {"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "app",
                "target": {"type": "Utilization", "averageUtilization": 60}}}
        ]));
        assert_eq!(
            conflicts(&both, &vpa(&json!({})), &none()),
            ["cpu", "memory"]
        );
        // Only memory controlled for every container: the CPU metric is left alone.
        let memory_only = vpa(&json!({"resourcePolicy": {"containerPolicies": [
            {"containerName": "*", "controlledResources": ["memory"]}]}}));
        assert_eq!(conflicts(&both, &memory_only, &none()), ["memory"]);
        // The app container off: its CPU is not controlled, but other containers' memory is.
        let app_off = vpa(&json!({"resourcePolicy": {"containerPolicies": [
            {"containerName": "app", "mode": "Off"}]}}));
        assert_eq!(conflicts(&both, &app_off, &none()), ["memory"]);
        // Every container off but a sidecar that controls only CPU: no memory conflict.
        let sidecar_cpu = vpa(&json!({"resourcePolicy": {"containerPolicies": [
            {"containerName": "*", "mode": "Off"},
            {"containerName": "sidecar", "controlledResources": ["cpu"]}]}}));
        assert!(conflicts(&both, &sidecar_cpu, &none()).is_empty());
    }

    #[test]
    fn the_horizontal_condition_names_the_first_fighting_vpa_and_says_when_it_is_over() {
        let h = hpa(&cpu(
            &json!({"type": "Utilization", "averageUtilization": 60}),
        ));
        let mut off = VerticalPodAutoscaler::new(
            "a-off",
            vpa(&json!({"updatePolicy": {"updateMode": "Off"}})),
        );
        off.metadata.namespace = Some("ns".into());
        let mut auto = VerticalPodAutoscaler::new("b-auto", vpa(&json!({})));
        auto.metadata.namespace = Some("ns".into());
        let c = horizontal_condition(&h, [&off, &auto], false).expect("a condition");
        assert!(c.status);
        assert_eq!((c.type_, c.reason), (CONDITION, REASON));
        assert!(
            c.message.contains("b-auto") && c.message.contains("cpu"),
            "{}",
            c.message
        );
        assert!(horizontal_condition(&h, [&off], false).is_none());
        let over = horizontal_condition(&h, [&off], true).expect("a resolved condition");
        assert!(!over.status);
        assert_eq!(over.reason, RESOLVED_REASON);
    }

    #[test]
    fn messages_name_the_other_object_and_the_resources() {
        let m = horizontal_message("web-vpa", &UpdateMode::Recreate, &["cpu".into()]);
        assert!(
            m.contains("web-vpa") && m.contains("Recreate") && m.contains("cpu"),
            "{m}"
        );
        let m = vertical_message("HorizontalPodAutoscalerPlus/web", &["memory".into()]);
        assert!(
            m.contains("HorizontalPodAutoscalerPlus/web") && m.contains("memory"),
            "{m}"
        );
    }
}
