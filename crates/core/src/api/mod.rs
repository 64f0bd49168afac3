//! The Kubernetes API types Plimsoll serves and reads.
//!
//! * [`hpa_plus`]: `HorizontalPodAutoscalerPlus` (`autoscaling.plimsoll.dev/v1alpha1`), the
//!   `autoscaling/v2` HPA spec plus Plimsoll's additions.
//! * [`cron`]: `CronHorizontalPodAutoscaler` (`autoscaling.plimsoll.dev/v1alpha1`).
//! * [`vpa`]: the upstream `autoscaling.k8s.io/v1` `VerticalPodAutoscaler` and
//!   `VerticalPodAutoscalerCheckpoint`, field-compatible with upstream.
//! * [`validation`]: the field-path error every `validate()` returns.
//! * [`limits`]: the size bounds of every list and free-form string a namespace user writes.

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
