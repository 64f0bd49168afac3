//! Which autoscaler a min-replicas job adjusts when the `CronHorizontalPodAutoscaler` targets a
//! workload and is annotated `plimsoll.dev/adjust-hpa-min: "true"`: the one
//! `HorizontalPodAutoscaler` or `HorizontalPodAutoscalerPlus` in the namespace whose
//! `spec.scaleTargetRef` names that workload, whatever the autoscaler itself is called.
//!
//! References match on API group (not version: `apps/v1` and `apps/v1beta2` are one
//! `Deployment`), kind and name; a reference without `apiVersion` matches any group. No match
//! and more than one match are both errors a job reports: with two autoscalers on one workload,
//! raising either minimum would not hold the size.

use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;

/// The kind of an autoscaler a job can adjust.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoscalerKind {
    /// `autoscaling/v2` `HorizontalPodAutoscaler`.
    Hpa,
    /// `autoscaling.plimsoll.dev` `HorizontalPodAutoscalerPlus`.
    HpaPlus,
}

impl AutoscalerKind {
    /// The kind as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hpa => "HorizontalPodAutoscaler",
            Self::HpaPlus => "HorizontalPodAutoscalerPlus",
        }
    }
}

/// One autoscaler found in the namespace, with what it scales and its bounds (which the job's
/// effect needs once it is chosen).
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// Its kind.
    pub kind: AutoscalerKind,
    /// Its name.
    pub name: String,
    /// Its `spec.scaleTargetRef`.
    pub scale_target_ref: CrossVersionObjectReference,
    /// Its `spec.minReplicas`.
    pub min_replicas: Option<i32>,
    /// Its `spec.maxReplicas`.
    pub max_replicas: i32,
}

impl Candidate {
    /// `Kind/name`, for messages.
    pub fn describe(&self) -> String {
        format!("{}/{}", self.kind.as_str(), self.name)
    }
}

/// Why no single autoscaler was chosen.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChoiceError {
    /// No autoscaler in the namespace targets the workload.
    #[error(
        "no HorizontalPodAutoscaler or HorizontalPodAutoscalerPlus in the namespace has \
         scaleTargetRef {workload}; create one, or remove the adjust-hpa-min annotation to set \
         the workload's replicas"
    )]
    NoAutoscaler {
        /// The workload, as `apiVersion Kind name`.
        workload: String,
    },
    /// More than one autoscaler targets the workload.
    #[error(
        "ambiguous: {} all have scaleTargetRef {workload}; keep one autoscaler per workload",
        autoscalers.join(", ")
    )]
    Ambiguous {
        /// The workload, as `apiVersion Kind name`.
        workload: String,
        /// Every matching autoscaler as `Kind/name`, sorted.
        autoscalers: Vec<String>,
    },
}

impl ChoiceError {
    /// A short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::NoAutoscaler { .. } => "no_autoscaler",
            Self::Ambiguous { .. } => "ambiguous_autoscaler",
        }
    }
}

/// The API group of an `apiVersion` (`apps` of `apps/v1`, empty for `v1`).
fn group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// Whether two references name the same object: group, kind and name (see the module docs).
pub fn same_workload(a: &CrossVersionObjectReference, b: &CrossVersionObjectReference) -> bool {
    let groups_match = match (a.api_version.as_deref(), b.api_version.as_deref()) {
        (Some(x), Some(y)) if !x.is_empty() && !y.is_empty() => group(x) == group(y),
        _ => true,
    };
    groups_match && a.kind == b.kind && a.name == b.name
}

/// The one autoscaler among `candidates` whose `scaleTargetRef` is `workload`.
pub fn choose<'a>(
    workload: &CrossVersionObjectReference,
    candidates: &'a [Candidate],
) -> Result<&'a Candidate, ChoiceError> {
    let describe = || {
        format!(
            "{} {} {}",
            workload.api_version.as_deref().unwrap_or("<no apiVersion>"),
            workload.kind,
            workload.name
        )
    };
    let matching: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| same_workload(&c.scale_target_ref, workload))
        .collect();
    match matching.as_slice() {
        [] => Err(ChoiceError::NoAutoscaler {
            workload: describe(),
        }),
        [one] => Ok(one),
        many => {
            let mut autoscalers: Vec<String> = many.iter().map(|c| c.describe()).collect();
            autoscalers.sort();
            Err(ChoiceError::Ambiguous {
                workload: describe(),
                autoscalers,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(api_version: Option<&str>, kind: &str, name: &str) -> CrossVersionObjectReference {
        CrossVersionObjectReference {
            api_version: api_version.map(str::to_owned),
            kind: kind.into(),
            name: name.into(),
        }
    }

    fn candidate(kind: AutoscalerKind, name: &str, workload: &str) -> Candidate {
        Candidate {
            kind,
            name: name.into(),
            scale_target_ref: target(Some("apps/v1"), "Deployment", workload),
            min_replicas: Some(1),
            max_replicas: 10,
        }
    }

    #[test]
    fn references_match_on_group_kind_and_name() {
        let web = target(Some("apps/v1"), "Deployment", "web");
        assert!(same_workload(
            &web,
            &target(Some("apps/v1"), "Deployment", "web")
        ));
        assert!(same_workload(
            &web,
            &target(Some("apps/v1beta2"), "Deployment", "web")
        ));
        assert!(same_workload(&web, &target(None, "Deployment", "web")));
        assert!(!same_workload(
            &web,
            &target(Some("apps/v1"), "StatefulSet", "web")
        ));
        assert!(!same_workload(
            &web,
            &target(Some("apps/v1"), "Deployment", "api")
        ));
        assert!(!same_workload(
            &web,
            &target(Some("example.com/v1"), "Deployment", "web")
        ));
        // The core group (`v1`) is not `apps`.
        assert!(!same_workload(
            &target(Some("v1"), "ReplicationController", "web"),
            &target(Some("apps/v1"), "ReplicationController", "web")
        ));
    }

    #[test]
    fn the_autoscaler_is_found_by_its_target_not_its_name() {
        let web = target(Some("apps/v1"), "Deployment", "web");
        let candidates = [
            candidate(AutoscalerKind::Hpa, "web", "api"),
            candidate(AutoscalerKind::HpaPlus, "web-autoscaler", "web"),
        ];
        let chosen = choose(&web, &candidates).unwrap();
        assert_eq!(
            chosen.describe(),
            "HorizontalPodAutoscalerPlus/web-autoscaler"
        );
    }

    #[test]
    fn none_or_several_are_errors_that_name_them() {
        let web = target(Some("apps/v1"), "Deployment", "web");
        let err = choose(&web, &[candidate(AutoscalerKind::Hpa, "web", "api")]).unwrap_err();
        assert_eq!(
            err,
            ChoiceError::NoAutoscaler {
                workload: "apps/v1 Deployment web".into()
            }
        );
        assert_eq!(err.metric_label(), "no_autoscaler");
        let both = [
            candidate(AutoscalerKind::HpaPlus, "web-plus", "web"),
            candidate(AutoscalerKind::Hpa, "web", "web"),
        ];
        let err = choose(&web, &both).unwrap_err();
        assert_eq!(
            err.to_string(),
            "ambiguous: HorizontalPodAutoscaler/web, HorizontalPodAutoscalerPlus/web-plus all \
             have scaleTargetRef apps/v1 Deployment web; keep one autoscaler per workload"
        );
        assert_eq!(err.metric_label(), "ambiguous_autoscaler");
    }
}
