//! What the scale subresource says about a target ([`TargetScale`]): the value both the
//! `/scale` reader ([`crate::scale`]) and the watch-fed answers ([`crate::watched_scales`])
//! give, so it lives below both.

use k8s_openapi::api::autoscaling::v1::Scale;

use crate::error::Result;
use crate::selector::Selector;

/// What the scale subresource says about a target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetScale {
    /// `spec.replicas`: the desired count.
    pub spec_replicas: i32,
    /// `status.replicas`: the count the workload controller currently has.
    pub status_replicas: i32,
    /// The parsed `status.selector`; `None` when the target reports no selector (a custom
    /// resource without `labelSelectorPath`), which autoscalers must treat as an error.
    pub selector: Option<Selector>,
    /// `metadata.resourceVersion` of the scale (for conditional writes).
    pub resource_version: Option<String>,
}

impl TargetScale {
    /// Reads a Scale object. Errors when its selector string does not parse.
    pub fn from_scale(scale: &Scale) -> Result<Self> {
        let selector = scale
            .status
            .as_ref()
            .and_then(|s| s.selector.as_deref())
            .filter(|s| !s.trim().is_empty())
            .map(Selector::parse)
            .transpose()?;
        Ok(Self {
            spec_replicas: scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0),
            status_replicas: scale.status.as_ref().map_or(0, |s| s.replicas),
            selector,
            resource_version: scale.metadata.resource_version.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_selector_string_is_an_error() {
        let scale: Scale = serde_json::from_str(
            r#"{"metadata":{},"spec":{"replicas":1},"status":{"replicas":1,"selector":"app in (a"}}"#,
        )
        .unwrap();
        assert_eq!(
            TargetScale::from_scale(&scale).unwrap_err().metric_label(),
            "selector"
        );
    }
}
