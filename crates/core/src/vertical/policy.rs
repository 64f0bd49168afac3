//! A VPA's policy as plain data: `spec.updatePolicy.updateMode` and
//! `spec.resourcePolicy.containerPolicies`, read once from the API object and shared by the
//! updater ([`super::eviction`]) and the webhook ([`super::admission`]).

use crate::api::vpa::{self as api, VerticalPodAutoscaler};
use crate::quantity::QuantityError;

use super::resources::{Resource, Resources, resources_from_k8s};

/// `controlledValues` of a container policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ControlledValues {
    /// Requests and limits (the default).
    #[default]
    RequestsAndLimits,
    /// Requests only; limits stay.
    RequestsOnly,
}

/// `mode` of a container policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContainerMode {
    /// Scaled (the default).
    #[default]
    Auto,
    /// Not scaled.
    Off,
}

/// One `spec.resourcePolicy.containerPolicies[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerPolicy {
    /// Container name, or `*` for every container without its own entry.
    pub container_name: String,
    /// `mode`.
    pub mode: ContainerMode,
    /// `minAllowed`.
    pub min_allowed: Resources,
    /// `maxAllowed`.
    pub max_allowed: Resources,
    /// `controlledResources`; `None` means both CPU and memory.
    pub controlled_resources: Option<Vec<Resource>>,
    /// `controlledValues`.
    pub controlled_values: ControlledValues,
}

impl ContainerPolicy {
    /// Whether the policy controls `resource` (`controlledResources`; both when unset).
    pub fn controls(&self, resource: Resource) -> bool {
        self.controlled_resources
            .as_ref()
            .is_none_or(|list| list.contains(&resource))
    }
}

/// Upstream `GetContainerResourcePolicy`: the entry named for the container, else `*`.
pub fn container_policy<'a>(
    policies: &'a [ContainerPolicy],
    container: &str,
) -> Option<&'a ContainerPolicy> {
    policies
        .iter()
        .find(|p| p.container_name == container)
        .or_else(|| policies.iter().find(|p| p.container_name == "*"))
}

/// Reads `spec.resourcePolicy.containerPolicies` of a VPA object.
pub fn container_policies_from_api(
    vpa: &VerticalPodAutoscaler,
) -> Result<Vec<ContainerPolicy>, QuantityError> {
    let policies = vpa
        .spec
        .resource_policy
        .as_ref()
        .and_then(|p| p.container_policies.as_ref());
    policies
        .into_iter()
        .flatten()
        .map(|p| {
            Ok(ContainerPolicy {
                container_name: p.container_name.clone().unwrap_or_else(|| "*".to_owned()),
                mode: match p.mode {
                    Some(api::ContainerScalingMode::Off) => ContainerMode::Off,
                    _ => ContainerMode::Auto,
                },
                min_allowed: resources_from_k8s(p.min_allowed.as_ref())?,
                max_allowed: resources_from_k8s(p.max_allowed.as_ref())?,
                controlled_resources: p
                    .controlled_resources
                    .as_ref()
                    .map(|list| list.iter().filter_map(|n| Resource::from_name(n)).collect()),
                controlled_values: match p.controlled_values {
                    Some(api::ControlledValues::RequestsOnly) => ControlledValues::RequestsOnly,
                    _ => ControlledValues::RequestsAndLimits,
                },
            })
        })
        .collect()
}

/// `spec.updatePolicy.updateMode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UpdateMode {
    /// Recommendations only; nothing is applied.
    Off,
    /// Applied at pod creation by the webhook only.
    Initial,
    /// Evict pods so the webhook recreates them with new requests (the default).
    #[default]
    Recreate,
    /// Deprecated upstream; same as `Recreate`.
    Auto,
    /// Resize in place where possible, evict otherwise.
    InPlaceOrRecreate,
    /// Resize in place only, never evict (AEP-8818); a resize the node cannot fit is not
    /// retried with the same values (see [`super::resize_backoff`]).
    InPlace,
}

impl UpdateMode {
    /// Parses the API value; `None` for unknown modes.
    pub fn parse(s: &str) -> Option<UpdateMode> {
        Some(match s {
            "Off" => UpdateMode::Off,
            "Initial" => UpdateMode::Initial,
            "Recreate" => UpdateMode::Recreate,
            "Auto" => UpdateMode::Auto,
            "InPlaceOrRecreate" => UpdateMode::InPlaceOrRecreate,
            "InPlace" => UpdateMode::InPlace,
            _ => return None,
        })
    }

    /// Maps the API enum; unknown modes become `Off` (the updater never acts on what it does
    /// not understand).
    pub fn from_api(mode: &api::UpdateMode) -> UpdateMode {
        match mode {
            api::UpdateMode::Off | api::UpdateMode::Unknown(_) => UpdateMode::Off,
            api::UpdateMode::InPlace => UpdateMode::InPlace,
            api::UpdateMode::Initial => UpdateMode::Initial,
            api::UpdateMode::Recreate => UpdateMode::Recreate,
            api::UpdateMode::Auto => UpdateMode::Auto,
            api::UpdateMode::InPlaceOrRecreate => UpdateMode::InPlaceOrRecreate,
        }
    }

    /// True for the modes the updater acts on.
    pub fn updater_acts(self) -> bool {
        matches!(
            self,
            UpdateMode::Recreate
                | UpdateMode::Auto
                | UpdateMode::InPlaceOrRecreate
                | UpdateMode::InPlace
        )
    }

    /// True for the modes that may evict a pod (`InPlace` never does).
    pub fn may_evict(self) -> bool {
        matches!(
            self,
            UpdateMode::Recreate | UpdateMode::Auto | UpdateMode::InPlaceOrRecreate
        )
    }
}
