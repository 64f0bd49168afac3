//! The Kubernetes API types Plimsoll serves and reads.
//!
//! * [`hpa_plus`]: `HorizontalPodAutoscalerPlus` (`autoscaling.plimsoll.dev/v1alpha1`), the
//!   `autoscaling/v2` HPA spec plus Plimsoll's additions.
//! * [`cron`]: `CronHorizontalPodAutoscaler` (`autoscaling.plimsoll.dev/v1alpha1`).
//! * [`vpa`]: the upstream `autoscaling.k8s.io/v1` `VerticalPodAutoscaler` and
//!   `VerticalPodAutoscalerCheckpoint`, field-compatible with upstream.
//! * [`validation`]: the field-path error every `validate()` returns.
//! * [`cel`]: building blocks of the CRDs' CEL rules on quantities.
//! * [`limits`]: the size bounds of every list and free-form string a namespace user writes.

pub mod cel;
pub mod convert;
pub mod cron;
pub mod hpa_plus;
pub mod limits;
pub mod validation;
pub mod vpa;

/// The API group of Plimsoll's own kinds.
pub const GROUP: &str = "autoscaling.plimsoll.dev";
/// The API version of Plimsoll's own kinds.
pub const VERSION: &str = "v1alpha1";

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// Every CRD Plimsoll's services read or write, as `deploy/crds/` holds them.
pub fn crds() -> Vec<CustomResourceDefinition> {
    use kube::CustomResourceExt;
    vec![
        hpa_plus::HorizontalPodAutoscalerPlus::crd(),
        cron::CronHorizontalPodAutoscaler::crd(),
        with_deprecated_v1beta2(vpa::VerticalPodAutoscaler::crd()),
        vpa::VerticalPodAutoscalerCheckpoint::crd(),
    ]
}

/// Upstream's VPA CRD still serves the deprecated `v1beta2` beside `v1` (same objects, no
/// conversion); serving it too keeps every manifest that applies against upstream applying here.
fn with_deprecated_v1beta2(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    if let Some(v1) = crd.spec.versions.iter().find(|v| v.name == "v1").cloned() {
        let mut beta = v1;
        beta.name = "v1beta2".into();
        beta.storage = false;
        beta.deprecated = Some(true);
        beta.deprecation_warning = Some("autoscaling.k8s.io/v1beta2 API is deprecated".into());
        crd.spec.versions.push(beta);
    }
    crd
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules<'a>(schema: &'a serde_json::Value, out: &mut Vec<&'a serde_json::Value>) {
        match schema {
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::Array(list)) = map.get("x-kubernetes-validations") {
                    out.extend(list);
                }
                for v in map.values() {
                    rules(v, out);
                }
            }
            serde_json::Value::Array(list) => list.iter().for_each(|v| rules(v, out)),
            _ => {}
        }
    }

    /// What a real API server refuses when the CRD is created, and the sim cannot see: a
    /// `string()` conversion (priced as a 3 MiB traversal on an int-or-string, see `api::cel`) and
    /// the member call `.sign()` (Kubernetes declares `sign` as a global function).
    #[test]
    fn no_rule_converts_with_string_or_calls_sign_as_a_member() {
        let mut checked = 0;
        for crd in crds() {
            let value = serde_json::to_value(&crd).expect("CRD serializes");
            let mut found = Vec::new();
            rules(&value, &mut found);
            for rule in found {
                for field in ["rule", "messageExpression"] {
                    let Some(text) = rule.get(field).and_then(serde_json::Value::as_str) else {
                        continue;
                    };
                    checked += 1;
                    assert!(
                        !text.contains("string(") && !text.contains(".sign("),
                        "{}: {field} {text}",
                        crd.spec.names.kind
                    );
                }
            }
        }
        assert!(checked > 50, "only {checked} rules found");
    }

    #[test]
    fn vpa_serves_v1_and_deprecated_v1beta2_like_upstream() {
        let vpa = crds()
            .into_iter()
            .find(|c| c.spec.names.kind == "VerticalPodAutoscaler")
            .expect("VPA CRD");
        let versions: Vec<_> = vpa
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage, v.deprecated))
            .collect();
        assert_eq!(
            versions,
            [
                ("v1", true, true, None),
                ("v1beta2", true, false, Some(true))
            ]
        );
    }
}
