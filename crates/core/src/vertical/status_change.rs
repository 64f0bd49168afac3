//! The VPA status the recommender writes, and whether it differs from the one the object has.
//!
//! Status is written only when it changed: the conditions compare exactly (their
//! `lastTransitionTime` is kept while a condition's status stays, see
//! [`recommendation::conditions`]), and the recommendation compares by value, since `1000m` and
//! `1` are the same quantity and another writer (or the API server) may spell them differently.

use jiff::Timestamp;

use super::recommendation::{self, Observation, RecommendationReport};
use crate::api::vpa::VerticalPodAutoscalerStatus;
use crate::quantity::Quantity;

/// The status for `recommendations` and `observed`, keeping `observedGeneration` and the
/// transition times of unchanged conditions from `previous`.
pub fn next_status(
    previous: Option<&VerticalPodAutoscalerStatus>,
    recommendations: &[RecommendationReport],
    observed: &Observation,
    now: Timestamp,
) -> VerticalPodAutoscalerStatus {
    let previous_conditions = previous
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    VerticalPodAutoscalerStatus {
        recommendation: (!recommendations.is_empty())
            .then(|| recommendation::to_status(recommendations)),
        conditions: Some(recommendation::conditions(
            previous_conditions,
            observed,
            now,
        )),
        observed_generation: previous.and_then(|s| s.observed_generation),
    }
}

/// True when `new` says what `previous` says (see the module docs); false without a previous
/// status.
pub fn same_status(
    previous: Option<&VerticalPodAutoscalerStatus>,
    new: &VerticalPodAutoscalerStatus,
) -> bool {
    let Some(previous) = previous else {
        return false;
    };
    previous.conditions == new.conditions && same_recommendation(previous, new)
}

/// True when `previous` carries no `ConfigUnsupported` condition (of either status): a VPA that
/// is unsupported now has just become so, which a Warning Event reports once.
pub fn newly_unsupported(previous: Option<&VerticalPodAutoscalerStatus>) -> bool {
    !previous
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "ConfigUnsupported"))
}

/// True when `previous` carries no `type_` condition with status `True`: a condition that holds
/// now has just turned on, which a Warning Event reports once.
pub fn newly_true(previous: Option<&VerticalPodAutoscalerStatus>, type_: &str) -> bool {
    !previous
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

/// Recommendations compare by value: every quantity is compared as its milli-value.
pub fn same_recommendation(
    a: &VerticalPodAutoscalerStatus,
    b: &VerticalPodAutoscalerStatus,
) -> bool {
    let norm = |s: &VerticalPodAutoscalerStatus| -> Option<serde_json::Value> {
        let mut v = serde_json::to_value(s.recommendation.as_ref()?).ok()?;
        normalize_quantities(&mut v);
        Some(v)
    };
    norm(a) == norm(b)
}

/// Replaces every string that parses as a quantity by its milli-value.
fn normalize_quantities(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => map.values_mut().for_each(normalize_quantities),
        serde_json::Value::Array(list) => list.iter_mut().for_each(normalize_quantities),
        serde_json::Value::String(s) => {
            if let Ok(q) = Quantity::parse(s) {
                *s = q.milli().to_string();
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::vpa::{RecommendedContainerResources, RecommendedPodResources, ResourceList};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

    fn status(cpu: &str) -> VerticalPodAutoscalerStatus {
        let target = ResourceList::from([("cpu".to_owned(), K8sQuantity(cpu.to_owned()))]);
        VerticalPodAutoscalerStatus {
            recommendation: Some(RecommendedPodResources {
                container_recommendations: Some(vec![RecommendedContainerResources {
                    container_name: Some("app".into()),
                    target,
                    ..RecommendedContainerResources::default()
                }]),
            }),
            ..VerticalPodAutoscalerStatus::default()
        }
    }

    #[test]
    fn quantities_compare_by_value() {
        assert!(same_status(Some(&status("1000m")), &status("1")));
        assert!(!same_status(Some(&status("999m")), &status("1")));
        assert!(!same_status(None, &status("1")));
    }
}
