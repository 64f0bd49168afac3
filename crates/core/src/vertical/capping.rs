//! Fitting a recommendation into the container policy and the namespace's `LimitRange`
//! (upstream `pkg/utils/vpa/capping.go` and the recommender's capping post-processor).
//!
//! * [`apply_policy`]: what the recommender does before writing status — drop resources not in
//!   `controlledResources`, then clamp target, lower and upper bound to
//!   `minAllowed`/`maxAllowed` (a zero or absent bound is no bound). `uncappedTarget` is the
//!   target before this step. Containers with `mode: Off` get no recommendation at all.
//! * [`cap_for_container`]: what admission and the updater do with a recommendation for one
//!   concrete container — first the container `LimitRange` item (so that the limit the request
//!   implies stays within `min`/`max`), then the policy, then, for `controlledValues:
//!   RequestsOnly`, the container's current limit (requests can never exceed limits).
//!
//! Every cap taken is reported as upstream's annotation text (`cpu capped to minAllowed`).
//! Amounts are millicores and bytes.

use std::collections::BTreeMap;

use super::aggregate::{Resource, ResourceAmount};
use crate::api::vpa::{
    ContainerResourcePolicy, ContainerScalingMode, ControlledValues, ResourceList,
};
use crate::quantity::{self, QuantityError};

/// Amount per resource (millicores for CPU, bytes for memory).
pub type Resources = BTreeMap<Resource, ResourceAmount>;

/// Target and bounds for one container.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecommendedResources {
    /// The recommended requests.
    pub target: Resources,
    /// The lower bound.
    pub lower_bound: Resources,
    /// The upper bound.
    pub upper_bound: Resources,
}

/// A container's current requests and limits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerResources {
    /// Requests; absent means none.
    pub requests: Resources,
    /// Limits; absent means none.
    pub limits: Resources,
}

/// The `type: Container` item of a `LimitRange`, as amounts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LimitRangeItem {
    /// `min`: both request and limit must be at least this.
    pub min: Resources,
    /// `max`: the limit must be at most this.
    pub max: Resources,
    /// `default`: the limit given to containers without one.
    pub default_limit: Resources,
}

/// Upstream's capping annotations.
pub const CAPPED_TO_MIN_ALLOWED: &str = "capped to minAllowed";
/// Upstream's capping annotations.
pub const CAPPED_TO_MAX_ALLOWED: &str = "capped to maxAllowed";
/// Upstream's capping annotations.
pub const CAPPED_TO_LIMIT: &str = "capped to container limit";
/// Upstream's capping annotations.
pub const CAPPED_TO_LIMIT_RANGE_MAX: &str = "capped to fit Max in container LimitRange";
/// Upstream's capping annotations.
pub const CAPPED_TO_LIMIT_RANGE_MIN: &str = "capped to fit Min in container LimitRange";

/// A container policy's bounds as amounts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyBounds {
    /// `minAllowed`.
    pub min_allowed: Resources,
    /// `maxAllowed`.
    pub max_allowed: Resources,
    /// `controlledResources` (default cpu and memory).
    pub controlled: Vec<Resource>,
    /// `mode: Off`.
    pub off: bool,
    /// `controlledValues: RequestsOnly`.
    pub requests_only: bool,
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
            min_allowed: resources_from_list(p.min_allowed.as_ref())?,
            max_allowed: resources_from_list(p.max_allowed.as_ref())?,
            controlled: match &p.controlled_resources {
                None => vec![Resource::Cpu, Resource::Memory],
                Some(list) => list.iter().filter_map(|r| Resource::from_name(r)).collect(),
            },
            off: p.mode == Some(ContainerScalingMode::Off),
            requests_only: p.controlled_values == Some(ControlledValues::RequestsOnly),
        })
    }
}

/// Amounts of the `cpu` and `memory` entries of a resource list (others are ignored).
pub fn resources_from_list(list: Option<&ResourceList>) -> Result<Resources, QuantityError> {
    let mut out = Resources::new();
    for (name, q) in list.into_iter().flatten() {
        match Resource::from_name(name) {
            Some(Resource::Cpu) => {
                out.insert(Resource::Cpu, quantity::cpu_milli(q)?);
            }
            Some(Resource::Memory) => {
                out.insert(Resource::Memory, quantity::memory_bytes(q)?);
            }
            None => {}
        }
    }
    Ok(out)
}

/// A resource list from amounts: CPU as millicores (`345m`, `2`), memory as bytes in binary
/// form when exact (`1Gi`), as upstream writes recommendations.
pub fn resources_to_list(resources: &Resources) -> ResourceList {
    resources
        .iter()
        .map(|(r, &v)| {
            let q = match r {
                Resource::Cpu => quantity::Quantity::from_milli(i128::from(v)),
                Resource::Memory => quantity::Quantity::from_milli_binary(i128::from(v) * 1000),
            };
            (r.name().to_owned(), q.into())
        })
        .collect()
}

fn cap_to_min(value: ResourceAmount, min: Option<&ResourceAmount>) -> (ResourceAmount, bool) {
    match min {
        Some(&m) if m != 0 && value < m => (m, true),
        _ => (value, false),
    }
}

fn cap_to_max(value: ResourceAmount, max: Option<&ResourceAmount>) -> (ResourceAmount, bool) {
    match max {
        Some(&m) if m != 0 && value > m => (m, true),
        _ => (value, false),
    }
}

/// Clamps every resource of `rec` to the policy bounds; returns the annotations of the caps.
fn clamp_to_policy(rec: &mut Resources, bounds: &PolicyBounds) -> Vec<String> {
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
    let filter = |r: &Resources| -> Resources {
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

/// The request that keeps the container's limit at `boundary` when the limit scales with the
/// request (upstream `GetBoundaryRequest`): `boundary × request / limit`, or `boundary` itself
/// when the container has a limit but no request, or no bound (0) without any limit.
pub fn boundary_request(
    request: ResourceAmount,
    limit: ResourceAmount,
    boundary: ResourceAmount,
    default_limit: ResourceAmount,
) -> ResourceAmount {
    let limit = if limit == 0 { default_limit } else { limit };
    if limit == 0 {
        return 0;
    }
    if request == 0 {
        return boundary;
    }
    let scaled = i128::from(boundary) * i128::from(request) / i128::from(limit);
    scaled.clamp(0, i128::from(i64::MAX)) as ResourceAmount
}

/// Clamps `rec` so that the limits it implies fit the container `LimitRange` item.
fn apply_limit_range(
    rec: &mut Resources,
    container: &ContainerResources,
    item: &LimitRangeItem,
) -> Vec<String> {
    let mut notes = Vec::new();
    for (resource, value) in rec.iter_mut() {
        let request = container.requests.get(resource).copied().unwrap_or(0);
        let limit = container.limits.get(resource).copied().unwrap_or(0);
        let default_limit = item.default_limit.get(resource).copied().unwrap_or(0);
        let min = item
            .min
            .get(resource)
            .map(|&m| boundary_request(request, limit, m, default_limit).max(m));
        let max = item
            .max
            .get(resource)
            .map(|&m| boundary_request(request, limit, m, default_limit));
        let (v, capped) = cap_to_min(*value, min.as_ref());
        if capped {
            notes.push(format!("{} {CAPPED_TO_LIMIT_RANGE_MIN}", resource.name()));
        }
        let (v, capped) = cap_to_max(v, max.as_ref());
        if capped {
            notes.push(format!("{} {CAPPED_TO_LIMIT_RANGE_MAX}", resource.name()));
        }
        *value = v;
    }
    notes
}

/// A recommendation fitted to one concrete container (upstream
/// `getCappedRecommendationForContainer`): container `LimitRange`, then policy, then — for
/// `RequestsOnly` — the container's current limits. Returns the annotations of the target's caps.
pub fn cap_for_container(
    rec: &RecommendedResources,
    container: &ContainerResources,
    bounds: &PolicyBounds,
    limit_range: Option<&LimitRangeItem>,
) -> (RecommendedResources, Vec<String>) {
    let mut out = rec.clone();
    let mut notes = Vec::new();
    for (i, field) in [&mut out.target, &mut out.lower_bound, &mut out.upper_bound]
        .into_iter()
        .enumerate()
    {
        let mut field_notes = Vec::new();
        if let Some(item) = limit_range {
            field_notes.extend(apply_limit_range(field, container, item));
        }
        field_notes.extend(clamp_to_policy(field, bounds));
        if bounds.requests_only {
            for (resource, value) in field.iter_mut() {
                if let Some(&limit) = container.limits.get(resource)
                    && *value > limit
                {
                    *value = limit;
                    field_notes.push(format!("{} {CAPPED_TO_LIMIT}", resource.name()));
                }
            }
        }
        if i == 0 {
            notes = field_notes;
        }
    }
    (out, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use proptest::prelude::*;

    fn res(cpu: i64, mem: i64) -> Resources {
        Resources::from([(Resource::Cpu, cpu), (Resource::Memory, mem)])
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

    // upstream: logic/recommender.go FilterControlledResources
    #[test]
    fn uncontrolled_resources_are_dropped() {
        let r = rec((50, 10_000), (30, 5_000), (5_000, 90_000));
        let mut b = policy((0, 0), (0, 0));
        b.controlled = vec![Resource::Memory];
        let (out, _) = apply_policy(&r, &b).expect("on");
        assert_eq!(out.target, Resources::from([(Resource::Memory, 10_000)]));
        assert!(!out.upper_bound.contains_key(&Resource::Cpu));
    }

    // upstream: RecommendedContainerResources doc — no recommendation for mode Off
    #[test]
    fn mode_off_gives_no_recommendation() {
        let mut b = policy((0, 0), (0, 0));
        b.off = true;
        assert!(apply_policy(&RecommendedResources::default(), &b).is_none());
    }

    #[test]
    fn limit_range_max_scales_with_request_to_limit_ratio() {
        // request 1 core / limit 2 cores; LimitRange max 1 core → request may be at most 500m.
        let container = ContainerResources {
            requests: res(1_000, 1_000_000),
            limits: res(2_000, 2_000_000),
        };
        let item = LimitRangeItem {
            max: res(1_000, 100_000_000),
            min: res(0, 0),
            default_limit: Resources::new(),
        };
        let r = rec((2_000, 1_000_000), (1_500, 500_000), (3_000, 2_000_000));
        let (out, notes) = cap_for_container(&r, &container, &policy((0, 0), (0, 0)), Some(&item));
        assert_eq!(out.target[&Resource::Cpu], 500);
        assert_eq!(out.upper_bound[&Resource::Cpu], 500);
        assert_eq!(out.target[&Resource::Memory], 1_000_000);
        assert_eq!(notes, vec!["cpu capped to fit Max in container LimitRange"]);
    }

    #[test]
    fn limit_range_min_applies_to_requests_without_limits() {
        let container = ContainerResources::default();
        let item = LimitRangeItem {
            min: res(200, 0),
            ..LimitRangeItem::default()
        };
        let r = rec((100, 1), (100, 1), (100, 1));
        let (out, notes) = cap_for_container(&r, &container, &policy((0, 0), (0, 0)), Some(&item));
        assert_eq!(out.target[&Resource::Cpu], 200);
        assert_eq!(notes, vec!["cpu capped to fit Min in container LimitRange"]);
    }

    #[test]
    fn requests_only_caps_to_current_limit() {
        let container = ContainerResources {
            requests: Resources::new(),
            limits: res(1_000, 1_000_000),
        };
        let mut b = policy((0, 0), (0, 0));
        b.requests_only = true;
        let r = rec((2_000, 500_000), (1_000, 500_000), (3_000, 3_000_000));
        let (out, notes) = cap_for_container(&r, &container, &b, None);
        assert_eq!(out.target, res(1_000, 500_000));
        assert_eq!(out.upper_bound, res(1_000, 1_000_000));
        assert_eq!(notes, vec!["cpu capped to container limit"]);
        // RequestsAndLimits: limits scale, nothing to cap.
        let (out, _) = cap_for_container(&r, &container, &policy((0, 0), (0, 0)), None);
        assert_eq!(out, r);
    }

    // upstream: pkg/utils/vpa/capping_test.go TestApplyCapsToLimitRange
    #[test]
    fn upstream_apply_caps_to_limit_range() {
        let item = LimitRangeItem {
            max: Resources::from([(Resource::Cpu, 1_000)]),
            min: Resources::from([(Resource::Memory, 500_000_000)]),
            default_limit: Resources::new(),
        };
        let container = ContainerResources {
            requests: res(1_000, 1_000_000_000),
            limits: res(1_000, 1_000_000_000),
        };
        let r = RecommendedResources {
            target: res(2_000, 200_000_000),
            ..RecommendedResources::default()
        };
        let (out, mut notes) = cap_for_container(
            &r,
            &container,
            &PolicyBounds::from_policy(None).expect("ok"),
            Some(&item),
        );
        assert_eq!(out.target, res(1_000, 500_000_000));
        notes.sort();
        assert_eq!(
            notes,
            vec![
                "cpu capped to fit Max in container LimitRange",
                "memory capped to fit Min in container LimitRange"
            ]
        );
    }

    // upstream: pkg/utils/vpa/capping_test.go TestRecommendationToLimitCapping
    #[test]
    fn upstream_recommendation_to_limit_capping() {
        // limits cpu 30, memory 70000; target 20 / 80000; upper 100 / 90000 (cores, bytes)
        let container = ContainerResources {
            requests: Resources::new(),
            limits: res(30_000, 70_000),
        };
        let r = RecommendedResources {
            target: res(20_000, 80_000),
            lower_bound: Resources::new(),
            upper_bound: res(100_000, 90_000),
        };
        let none = PolicyBounds::from_policy(None).expect("ok");
        let requests_and_limits = policy((0, 0), (0, 0));
        let mut requests_only = policy((0, 0), (0, 0));
        requests_only.requests_only = true;
        let cases = [
            (
                "no capping for default policy",
                &none,
                res(20_000, 80_000),
                res(100_000, 90_000),
                false,
            ),
            (
                "no capping for RequestsAndLimits",
                &requests_and_limits,
                res(20_000, 80_000),
                res(100_000, 90_000),
                false,
            ),
            (
                "capping for RequestsOnly",
                &requests_only,
                res(20_000, 70_000),
                res(30_000, 70_000),
                true,
            ),
        ];
        for (name, bounds, target, upper, annotated) in cases {
            let (out, notes) = cap_for_container(&r, &container, bounds, None);
            assert_eq!(out.target, target, "{name}");
            assert_eq!(out.upper_bound, upper, "{name}");
            assert_eq!(
                notes.contains(&"memory capped to container limit".to_owned()),
                annotated,
                "{name}: {notes:?}"
            );
        }
    }

    // upstream: pkg/utils/vpa/capping_test.go TestRecommendationCappedToMinMaxPolicy
    #[test]
    fn upstream_capped_to_min_max_policy() {
        let r = rec((300_000, 50_000), (200_000, 43_000), (500_000, 55_000));
        let bounds = policy((400_000, 40_000), (450_000, 45_000));
        let (out, notes) = cap_for_container(&r, &ContainerResources::default(), &bounds, None);
        assert_eq!(
            out,
            rec((400_000, 45_000), (400_000, 43_000), (450_000, 45_000))
        );
        assert_eq!(
            notes,
            vec!["cpu capped to minAllowed", "memory capped to maxAllowed"]
        );
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
    fn boundary_request_cases() {
        // (request, limit, boundary, default) → request at boundary
        let cases = [
            (1_000, 2_000, 1_000, 0, 500),
            (0, 2_000, 1_000, 0, 1_000),
            (1_000, 0, 1_000, 0, 0),
            (1_000, 0, 1_000, 4_000, 250),
        ];
        for (request, limit, boundary, default, want) in cases {
            assert_eq!(boundary_request(request, limit, boundary, default), want);
        }
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
        let list = resources_to_list(&res(1_500, 1 << 30));
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
