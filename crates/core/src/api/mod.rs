//! The Kubernetes API types Plimsoll serves and reads.
//!
//! * [`hpa_plus`]: `HorizontalPodAutoscalerPlus` (`autoscaling.plimsoll.dev/v1alpha1`), the
//!   `autoscaling/v2` HPA spec plus Plimsoll's additions.
//! * [`cron`]: `CronHorizontalPodAutoscaler` (`autoscaling.plimsoll.dev/v1alpha1`).
//! * [`vpa`]: the upstream `autoscaling.k8s.io/v1` `VerticalPodAutoscaler` and
//!   `VerticalPodAutoscalerCheckpoint`, field-compatible with upstream.
//! * [`validation`]: the field-path error every `validate()` returns.

pub mod cron;
pub mod hpa_plus;
pub mod validation;
pub mod vpa;

/// The API group of Plimsoll's own kinds.
pub const GROUP: &str = "autoscaling.plimsoll.dev";
/// The API version of Plimsoll's own kinds.
pub const VERSION: &str = "v1alpha1";

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// Every CRD Plimsoll's services read or write, as `deploy/crds/` holds them.
pub fn crds() -> Vec<CustomResourceDefinition> {
    Vec::new()
}
