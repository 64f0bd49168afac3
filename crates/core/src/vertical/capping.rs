//! Fitting a recommendation into the container policy and the namespace's `LimitRange`
//! (upstream `pkg/utils/vpa/capping.go` and the recommender's capping post-processor).
//!
//! * [`apply_policy`]: what the recommender does before writing status — drop resources not in
//!   `controlledResourceAmounts`, then clamp target, lower and upper bound to
//!   `minAllowed`/`maxAllowed` (a zero or absent bound is no bound, as upstream; beyond upstream,
//!   so is a negative one, which would otherwise write a negative recommendation). `uncappedTarget`
//!   is the target before this step. Containers with `mode: Off` get no recommendation at all.
//!
//! What admission and the updater do with a recommendation for one concrete container
//! (`LimitRange` items, limit proportions, `RequestsOnly` capping to the current limit) lives in
//! [`super::limit_range`] and [`super::admission::process_recommendation`]; this module only
//! holds the recommender's policy step so that each decision exists once.
//!
//! Every cap taken is reported as upstream's annotation text (`cpu capped to minAllowed`).
//! Amounts are millicores and bytes.

use super::resources::{Resource, ResourceAmount, ResourceAmounts, amounts_from_list};
use crate::api::vpa::{ContainerResourcePolicy, ContainerScalingMode};
use crate::quantity::QuantityError;

/// Target and bounds for one container.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecommendedResources {
    /// The recommended requests.
    pub target: ResourceAmounts,
    /// The lower bound.
    pub lower_bound: ResourceAmounts,
    /// The upper bound.
    pub upper_bound: ResourceAmounts,
}

/// Upstream's capping annotations.
pub const CAPPED_TO_MIN_ALLOWED: &str = "capped to minAllowed";
/// Upstream's capping annotations.
pub const CAPPED_TO_MAX_ALLOWED: &str = "capped to maxAllowed";

/// A container policy's bounds as amounts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyBounds {
    /// `minAllowed`.
    pub min_allowed: ResourceAmounts,
    /// `maxAllowed`.
    pub max_allowed: ResourceAmounts,
    /// `controlledResourceAmounts` (default cpu and memory).
    pub controlled: Vec<Resource>,
    /// `mode: Off`.
    pub off: bool,
}

impl PolicyBounds {
    /// Bounds of `policy` (`None`: no policy, everything controlled).
    pub fn from_policy(policy: Option<&ContainerResourcePolicy>) -> Result<Self, QuantityError> {
        let Some(p) = policy else {
            return Ok(Self {
                controlled: vec![Resource::Cpu, Resource::Memory],
                ..Self::default()
            });
        };
        Ok(Self {
            min_allowed: amounts_from_list(p.min_allowed.as_ref())?,
            max_allowed: amounts_from_list(p.max_allowed.as_ref())?,
            controlled: match &p.controlled_resources {
                None => vec![Resource::Cpu, Resource::Memory],
                Some(list) => list.iter().filter_map(|r| Resource::from_name(r)).collect(),
            },
            off: p.mode == Some(ContainerScalingMode::Off),
        })
    }
}

fn cap_to_min(value: ResourceAmount, min: Option<&ResourceAmount>) -> (ResourceAmount, bool) {
    match min {
        Some(&m) if m > 0 && value < m => (m, true),
        _ => (value, false),
    }
}

fn cap_to_max(value: ResourceAmount, max: Option<&ResourceAmount>) -> (ResourceAmount, bool) {
    match max {
        Some(&m) if m > 0 && value > m => (m, true),
        _ => (value, false),
    }
}

/// Clamps every resource of `rec` to the policy bounds; returns the annotations of the caps.
fn clamp_to_policy(rec: &mut ResourceAmounts, bounds: &PolicyBounds) -> Vec<String> {
    let mut notes = Vec::new();
    for (resource, value) in rec.iter_mut() {
        let (v, capped) = cap_to_min(*value, bounds.min_allowed.get(resource));
        if capped {
            notes.push(format!("{} {CAPPED_TO_MIN_ALLOWED}", resource.name()));
        }
        let (v, capped) = cap_to_max(v, bounds.max_allowed.get(resource));
        if capped {
            notes.push(format!("{} {CAPPED_TO_MAX_ALLOWED}", resource.name()));
        }
        *value = v;
    }
    notes
}

/// The recommender's capping: `None` for `mode: Off`; otherwise the recommendation restricted to
/// the controlled resources and clamped to the policy, with the annotations of the target's caps.
pub fn apply_policy(
    uncapped: &RecommendedResources,
    bounds: &PolicyBounds,
) -> Option<(RecommendedResources, Vec<String>)> {
    if bounds.off {
        return None;
    }
    let filter = |r: &ResourceAmounts| -> ResourceAmounts {
        r.iter()
            .filter(|(k, _)| bounds.controlled.contains(k))
            .map(|(k, v)| (*k, *v))
            .collect()
    };
    let mut out = RecommendedResources {
        target: filter(&uncapped.target),
        lower_bound: filter(&uncapped.lower_bound),
        upper_bound: filter(&uncapped.upper_bound),
    };
    let notes = clamp_to_policy(&mut out.target, bounds);
    clamp_to_policy(&mut out.lower_bound, bounds);
    clamp_to_policy(&mut out.upper_bound, bounds);
    Some((out, notes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::vpa::ResourceList;
    use crate::vertical::resources::amounts_to_list;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use proptest::prelude::*;

    fn res(cpu: i64, mem: i64) -> ResourceAmounts {
        ResourceAmounts::from([(Resource::Cpu, cpu), (Resource::Memory, mem)])
    }

    fn rec(target: (i64, i64), lower: (i64, i64), upper: (i64, i64)) -> RecommendedResources {
        RecommendedResources {
            target: res(target.0, target.1),
            lower_bound: res(lower.0, lower.1),
            upper_bound: res(upper.0, upper.1),
        }
    }

    fn policy(min: (i64, i64), max: (i64, i64)) -> PolicyBounds {
        PolicyBounds {
            min_allowed: res(min.0, min.1),
            max_allowed: res(max.0, max.1),
            controlled: vec![Resource::Cpu, Resource::Memory],
            ..PolicyBounds::default()
        }
    }

    #[test]
    fn policy_clamps_all_three() {
        let r = rec((50, 10_000), (30, 5_000), (5_000, 90_000));
        let (out, notes) = apply_policy(&r, &policy((100, 20_000), (1_000, 50_000))).expect("on");
        assert_eq!(out, rec((100, 20_000), (100, 20_000), (1_000, 50_000)));
        assert_eq!(
            notes,
            vec!["cpu capped to minAllowed", "memory capped to minAllowed"]
        );
    }

    // upstream semantics: a zero minAllowed/maxAllowed is no bound (maybeCapToMin/Max)
    #[test]
    fn zero_bounds_are_no_bounds() {
        let r = rec((50, 10_000), (30, 5_000), (5_000, 90_000));
        let (out, notes) = apply_policy(&r, &policy((0, 0), (0, 0))).expect("on");
        assert_eq!(out, r);
        assert!(notes.is_empty());
    }

    // Beyond upstream (issue #28): a negative bound, which `validate()` refuses but a VPA stored
    // before that may hold, is no bound; the recommendation never goes below zero.
    #[test]
    fn negative_bounds_are_no_bounds() {
        let r = rec((50, 10_000), (30, 5_000), (5_000, 90_000));
        let (out, notes) = apply_policy(&r, &policy((-10, -1), (-1, -5))).expect("on");
        assert_eq!(out, r);
        assert!(notes.is_empty());
    }

    // upstream: logic/recommender.go FilterControlledResourceAmounts
    #[test]
    fn uncontrolled_resources_are_dropped() {
        let r = rec((50, 10_000), (30, 5_000), (5_000, 90_000));
        let mut b = policy((0, 0), (0, 0));
        b.controlled = vec![Resource::Memory];
        let (out, _) = apply_policy(&r, &b).expect("on");
        assert_eq!(
            out.target,
            ResourceAmounts::from([(Resource::Memory, 10_000)])
        );
        assert!(!out.upper_bound.contains_key(&Resource::Cpu));
    }

    // upstream: RecommendedContainerResourceAmounts doc — no recommendation for mode Off
    #[test]
    fn mode_off_gives_no_recommendation() {
        let mut b = policy((0, 0), (0, 0));
        b.off = true;
        assert!(apply_policy(&RecommendedResources::default(), &b).is_none());
    }

    // upstream: pkg/utils/vpa/capping_test.go TestApplyVPAPolicy (minAllowed and maxAllowed cases)
    #[test]
    fn upstream_apply_vpa_policy() {
        const MI: i64 = 1 << 20;
        let r = rec((42, 42 * MI), (31, 31 * MI), (53, 53 * MI));
        let (out, _) = apply_policy(&r, &policy((50, 50 * MI), (0, 0))).expect("on");
        assert_eq!(out, rec((50, 50 * MI), (50, 50 * MI), (53, 53 * MI)));
        let (out, _) = apply_policy(&r, &policy((0, 0), (40, 40 * MI))).expect("on");
        assert_eq!(out, rec((40, 40 * MI), (31, 31 * MI), (40, 40 * MI)));
        let (out, notes) =
            apply_policy(&r, &PolicyBounds::from_policy(None).expect("ok")).expect("on");
        assert_eq!(out, r);
        assert!(notes.is_empty());
    }

    #[test]
    fn policy_from_api_and_back() {
        let p = ContainerResourcePolicy {
            container_name: Some("app".into()),
            min_allowed: Some(ResourceList::from([("cpu".into(), Quantity("90m".into()))])),
            max_allowed: Some(ResourceList::from([(
                "memory".into(),
                Quantity("1Gi".into()),
            )])),
            controlled_resources: Some(vec!["memory".into()]),
            ..ContainerResourcePolicy::default()
        };
        let b = PolicyBounds::from_policy(Some(&p)).expect("valid");
        assert_eq!(b.min_allowed[&Resource::Cpu], 90);
        assert_eq!(b.max_allowed[&Resource::Memory], 1 << 30);
        assert_eq!(b.controlled, vec![Resource::Memory]);
        let list = amounts_to_list(&res(1_500, 1 << 30));
        assert_eq!(list["cpu"], Quantity("1500m".into()));
        assert_eq!(list["memory"], Quantity("1Gi".into()));
    }

    proptest! {
        /// Capped recommendations stay within minAllowed..=maxAllowed when min <= max.
        #[test]
        fn capped_within_bounds(
            t in (0_i64..10_000, 0_i64..10_000_000),
            min in (0_i64..5_000, 0_i64..5_000_000),
            extra in (0_i64..5_000, 0_i64..5_000_000),
        ) {
            let max = (min.0 + extra.0, min.1 + extra.1);
            let r = rec(t, (t.0 / 2, t.1 / 2), (t.0 * 2, t.1 * 2));
            let (out, _) = apply_policy(&r, &policy(min, max)).expect("on");
            for field in [&out.target, &out.lower_bound, &out.upper_bound] {
                for (resource, lo, hi) in [(Resource::Cpu, min.0, max.0), (Resource::Memory, min.1, max.1)] {
                    let v = field[&resource];
                    prop_assert!(lo == 0 || v >= lo);
                    prop_assert!(hi == 0 || v <= hi);
                }
            }
            prop_assert!(out.lower_bound[&Resource::Cpu] <= out.target[&Resource::Cpu]);
            prop_assert!(out.target[&Resource::Cpu] <= out.upper_bound[&Resource::Cpu]);
        }
    }
}
