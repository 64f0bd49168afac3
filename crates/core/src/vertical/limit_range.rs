//! `LimitRange` bounds and limit-to-request proportions for VPA recommendations.
//!
//! Semantics follow upstream VPA (`pkg/utils/limitrange`, `pkg/utils/vpa/capping.go`,
//! `limit_and_request_scaling.go`):
//!
//! * The items of one type (`Container` or `Pod`) in a namespace merge into one: the lowest
//!   `max`, the highest `min`, and the last `default` seen (callers pass `LimitRange`s sorted by
//!   name so the result is deterministic).
//! * A new limit keeps the original limit-to-request ratio: `limit × newRequest / request`
//!   (floor; CPU in milli-units, memory in bytes; capped at `i64::MAX` with an annotation).
//! * A recommended request is bounded so that the *limit derived from it* stays within the
//!   container `LimitRange` `[min, max]`, and the request itself stays above `min`.
//! * Pod-level `LimitRange`s scale all containers' recommendations by one factor.
//! * Beyond upstream: `maxLimitRequestRatio` is honoured too (the apiserver would otherwise reject
//!   the pod): see [`ratio_floor_request`] and [`ratio_ceiling_limit`].

use crate::quantity::{Quantity, QuantityError};

use super::resources::{Resource, Resources};

/// `LimitRange` item type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitType {
    /// Bounds per container.
    Container,
    /// Bounds on the sum over the pod's containers.
    Pod,
    /// Another type (`PersistentVolumeClaim`); ignored.
    Other,
}

/// One (merged) `LimitRange` item, CPU and memory only.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LimitRangeItem {
    /// `min`.
    pub min: Resources,
    /// `max`.
    pub max: Resources,
    /// `default` (the default limit).
    pub default: Resources,
    /// `maxLimitRequestRatio`, as plain ratios.
    pub max_limit_request_ratio: Ratios,
    /// Whether `min` was given at all (upstream distinguishes an absent map from zeros).
    pub has_min: bool,
    /// Whether `max` was given at all.
    pub has_max: bool,
}

/// A ratio per resource.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Ratios {
    /// CPU limit / request.
    pub cpu: Option<f64>,
    /// Memory limit / request.
    pub memory: Option<f64>,
}

impl Ratios {
    /// The ratio of `resource`, if set.
    pub fn get(&self, resource: Resource) -> Option<f64> {
        match resource {
            Resource::Cpu => self.cpu,
            Resource::Memory => self.memory,
        }
    }
}

/// Merges the items of `kind` (upstream `getLimitRangeItem`); `None` when nothing applies.
pub fn merge<'a>(
    items: impl IntoIterator<Item = &'a (LimitType, LimitRangeItem)>,
    kind: LimitType,
) -> Option<LimitRangeItem> {
    let mut result: Option<LimitRangeItem> = None;
    for (t, item) in items {
        let relevant = *t == kind
            && (item.has_min
                || item.has_max
                || !item.default.is_empty()
                || item.max_limit_request_ratio != Ratios::default());
        if !relevant {
            continue;
        }
        let merged = result.get_or_insert_with(LimitRangeItem::default);
        if !item.default.is_empty() {
            merged.default = item.default;
        }
        merged.has_max |= item.has_max;
        merged.has_min |= item.has_min;
        for r in Resource::ALL {
            let max = pick(merged.max.get(r), item.max.get(r), std::cmp::min);
            merged.max.set(r, max);
            let min = pick(merged.min.get(r), item.min.get(r), std::cmp::max);
            merged.min.set(r, min);
        }
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        merged.max_limit_request_ratio = Ratios {
            cpu: ratio(
                merged.max_limit_request_ratio.cpu,
                item.max_limit_request_ratio.cpu,
            ),
            memory: ratio(
                merged.max_limit_request_ratio.memory,
                item.max_limit_request_ratio.memory,
            ),
        };
    }
    result
}

fn pick(
    current: Option<Quantity>,
    new: Option<Quantity>,
    choose: fn(Quantity, Quantity) -> Quantity,
) -> Option<Quantity> {
    match (current, new) {
        (Some(x), Some(y)) => Some(choose(x, y)),
        (x, y) => x.or(y),
    }
}

/// Converts the `spec.limits` of Kubernetes `LimitRange` objects (pass them sorted by name).
pub fn from_k8s(
    ranges: &[k8s_openapi::api::core::v1::LimitRange],
) -> Result<Vec<(LimitType, LimitRangeItem)>, QuantityError> {
    use std::collections::BTreeMap;
    type List = Option<BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>;
    fn resources(list: &List) -> Result<Resources, QuantityError> {
        let mut out = Resources::default();
        if let Some(list) = list {
            for (name, q) in list {
                if let Some(r) = Resource::from_name(name) {
                    out.set(r, Some(Quantity::try_from(q)?));
                }
            }
        }
        Ok(out)
    }
    let mut out = Vec::new();
    for range in ranges {
        let Some(spec) = &range.spec else { continue };
        for limit in &spec.limits {
            let kind = match limit.type_.as_str() {
                "Container" => LimitType::Container,
                "Pod" => LimitType::Pod,
                _ => LimitType::Other,
            };
            let ratios = resources(&limit.max_limit_request_ratio)?;
            out.push((
                kind,
                LimitRangeItem {
                    min: resources(&limit.min)?,
                    max: resources(&limit.max)?,
                    default: resources(&limit.default)?,
                    max_limit_request_ratio: Ratios {
                        cpu: ratios.cpu.map(|q| q.as_f64()),
                        memory: ratios.memory.map(|q| q.as_f64()),
                    },
                    has_min: limit.min.is_some(),
                    has_max: limit.max.is_some(),
                },
            ));
        }
    }
    Ok(out)
}

fn is_zero(q: Option<Quantity>) -> bool {
    q.is_none_or(|q| q.milli() == 0)
}

/// `scaled × result / base` as upstream computes it: CPU on milli-values, memory on whole
/// bytes (rounded up first), floor division, in the format of `scaled`. The flag is true when
/// the value had to be capped at `i64::MAX` (milli-units for CPU, bytes for memory).
pub fn scale_proportionally(
    resource: Resource,
    scaled: Quantity,
    base: Quantity,
    result: Quantity,
) -> (Quantity, bool) {
    let (s, b, r) = match resource {
        Resource::Cpu => (scaled.milli(), base.milli(), result.milli()),
        Resource::Memory => (scaled.value(), base.value(), result.value()),
    };
    let unit = match resource {
        Resource::Cpu => 1,
        Resource::Memory => 1000,
    };
    let value = s
        .checked_mul(r)
        .and_then(|p| p.checked_div(b))
        .filter(|v| i64::try_from(*v).is_ok());
    match value {
        Some(v) => (
            Quantity::from_milli(v * unit).with_format(scaled.format()),
            false,
        ),
        None => (
            Quantity::from_milli(i128::from(i64::MAX) * unit).with_format(scaled.format()),
            true,
        ),
    }
}

/// The limit that keeps the original limit-to-request proportion for a new request (upstream
/// `getProportionalResourceLimit`), with the annotation upstream adds when it does not set one
/// or had to cap it. Absent and zero amounts are the same, as upstream.
pub fn proportional_limit(
    resource: Resource,
    original_limit: Option<Quantity>,
    original_request: Option<Quantity>,
    recommended_request: Option<Quantity>,
    default_limit: Option<Quantity>,
) -> (Option<Quantity>, Option<String>) {
    let limit = if is_zero(original_limit) {
        default_limit
    } else {
        original_limit
    };
    let (Some(limit), false) = (limit, is_zero(limit)) else {
        return (
            None,
            Some(format!(
                "{resource}: limit NOT set since originalLimit is nil or 0"
            )),
        );
    };
    let (Some(recommended), false) = (recommended_request, is_zero(recommended_request)) else {
        return (
            None,
            Some(format!(
                "{resource}: limit NOT set since recommendedRequest is nil or 0"
            )),
        );
    };
    let Some(request) = original_request.filter(|r| r.milli() != 0) else {
        // A limit without a request makes the request equal to the limit.
        return (Some(recommended), None);
    };
    if request.milli() == limit.milli() {
        return (Some(recommended), None);
    }
    let (value, capped) = scale_proportionally(resource, limit, request, recommended);
    let note = capped.then(|| {
        format!("{resource}: failed to keep limit to request ratio; capping limit to int64")
    });
    (Some(value), note)
}

/// The request whose proportional limit would equal `boundary_limit` (upstream
/// `GetBoundaryRequest`); `None` means "no boundary".
pub fn boundary_request(
    resource: Resource,
    original_request: Option<Quantity>,
    original_limit: Option<Quantity>,
    boundary_limit: Option<Quantity>,
    default_limit: Option<Quantity>,
) -> Option<Quantity> {
    let limit = if is_zero(original_limit) {
        default_limit
    } else {
        original_limit
    };
    let limit = limit.filter(|l| l.milli() != 0)?;
    let Some(request) = original_request.filter(|r| r.milli() != 0) else {
        return boundary_limit.filter(|b| b.milli() != 0);
    };
    let boundary = boundary_limit.unwrap_or(Quantity::ZERO);
    Some(scale_proportionally(resource, request, limit, boundary).0).filter(|q| q.milli() != 0)
}

/// Caps a recommendation (target or a bound) to the container `LimitRange` (upstream
/// `applyContainerLimitRange`), returning the annotations for what it changed.
pub fn cap_to_container_limit_range(
    recommendation: &mut Resources,
    requests: &Resources,
    limits: &Resources,
    range: &LimitRangeItem,
) -> Vec<String> {
    let mut notes = Vec::new();
    for r in Resource::ALL {
        let Some(recommended) = recommendation.get(r) else {
            continue;
        };
        let default = range.default.get(r);
        let max = if range.has_max {
            boundary_request(r, requests.get(r), limits.get(r), range.max.get(r), default)
        } else {
            None
        };
        let min = if range.has_min {
            let for_limit =
                boundary_request(r, requests.get(r), limits.get(r), range.min.get(r), default);
            // Both the request and the limit must be above min.
            match (for_limit, range.min.get(r)) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            }
        } else {
            None
        };
        let mut value = recommended;
        if let Some(min) = min.filter(|m| m.milli() != 0)
            && value < min
        {
            value = min;
            notes.push(format!("{r} capped to fit Min in container LimitRange"));
        }
        if let Some(max) = max.filter(|m| m.milli() != 0)
            && value > max
        {
            value = max;
            notes.push(format!("{r} capped to fit Max in container LimitRange"));
        }
        recommendation.set(r, Some(value));
    }
    notes
}

/// One container's view for the pod-level `LimitRange`.
#[derive(Debug)]
pub struct PodLimitInput<'a> {
    /// The container's current requests.
    pub requests: &'a Resources,
    /// The container's current limits.
    pub limits: &'a Resources,
    /// The recommendation (target or a bound) to adjust in place.
    pub recommendation: &'a mut Resources,
}

/// Scales the recommendations of all containers so the pod's total fits the pod `LimitRange`
/// (upstream `applyPodLimitRange`): totals below `min` are raised to it, total limits above `max`
/// lowered to it, each container by the same factor.
///
/// Beyond upstream, `containers` should hold every container of the pod: one without a
/// recommendation for a resource keeps its current request, so that request counts towards
/// `min` and only the recommended part is scaled to make up the rest. When nothing recommended
/// can be scaled (a recommendation of zero) and the pod would fall below `min`, the recommended
/// containers keep their current requests: the API server would refuse the pod otherwise.
pub fn cap_to_pod_limit_range(containers: &mut [PodLimitInput<'_>], range: &LimitRangeItem) {
    for r in Resource::ALL {
        let min = range.min.get(r).unwrap_or(Quantity::ZERO);
        let max = range.max.get(r).unwrap_or(Quantity::ZERO);
        let default = range.default.get(r);
        let mut sum_limit = Quantity::ZERO;
        let mut sum_rec = Quantity::ZERO;
        let mut kept = Quantity::ZERO;
        for c in containers.iter() {
            let rec = c.recommendation.get(r);
            if let (Some(limit), _) =
                proportional_limit(r, c.limits.get(r), c.requests.get(r), rec, default)
            {
                sum_limit = sum_limit.checked_add(limit).unwrap_or(sum_limit);
            }
            match (rec, c.requests.get(r)) {
                (Some(rec), _) => sum_rec = sum_rec.checked_add(rec).unwrap_or(sum_rec),
                (None, Some(request)) => kept = kept.checked_add(request).unwrap_or(kept),
                (None, None) => {}
            }
        }
        let total = sum_rec
            .checked_add(kept)
            .unwrap_or(Quantity::from_milli(i128::MAX));
        if min <= sum_limit && min <= total && (max.milli() == 0 || max >= sum_limit) {
            continue;
        }
        let (base, target) = if min > total {
            (sum_rec, min.checked_sub(kept).unwrap_or(min))
        } else if max.milli() != 0 && max < sum_limit {
            (sum_limit, max)
        } else {
            (sum_limit, min)
        };
        if base.milli() == 0 {
            if min > total {
                for c in containers.iter_mut() {
                    if c.recommendation.get(r).is_some() {
                        c.recommendation.set(r, c.requests.get(r));
                    }
                }
            }
            continue;
        }
        for c in containers.iter_mut() {
            if let Some(rec) = c.recommendation.get(r) {
                let (scaled, _) = scale_proportionally(r, rec, base, target);
                c.recommendation.set(r, Some(scaled));
            }
        }
    }
}

/// Beyond upstream: the smallest request that keeps `limit / request ≤ ratio`, when `request`
/// is below it (used when requests move and limits stay: `RequestsOnly`).
pub fn ratio_floor_request(
    resource: Resource,
    request: Quantity,
    limit: Option<Quantity>,
    ratio: Option<f64>,
) -> Option<Quantity> {
    let (limit, ratio) = (limit?, ratio?);
    if ratio <= 0.0 || !ratio.is_finite() {
        return None;
    }
    let floor = limit.scale_f64(1.0 / ratio, crate::quantity::Rounding::Up)?;
    let floor = round_up_to_unit(resource, floor).with_format(request.format());
    (request < floor).then(|| floor.min(limit))
}

/// Beyond upstream: the largest limit that keeps `limit / request ≤ ratio`, when `limit` is
/// above it (used when limits follow requests: `RequestsAndLimits`).
pub fn ratio_ceiling_limit(
    request: Quantity,
    limit: Quantity,
    ratio: Option<f64>,
) -> Option<Quantity> {
    let ratio = ratio?;
    if ratio <= 0.0 || !ratio.is_finite() {
        return None;
    }
    let ceiling = request
        .scale_f64(ratio, crate::quantity::Rounding::Down)?
        .with_format(limit.format());
    (limit > ceiling).then_some(ceiling)
}

/// Memory is whole bytes; CPU whole milli-units already.
fn round_up_to_unit(resource: Resource, q: Quantity) -> Quantity {
    match resource {
        Resource::Cpu => q,
        Resource::Memory => Quantity::from_milli(q.value() * 1000).with_format(q.format()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    fn oq(s: &str) -> Option<Quantity> {
        (!s.is_empty()).then(|| q(s))
    }

    // upstream: pkg/utils/vpa/limit_and_request_scaling_test.go TestGetProportionalResourceLimitCPU
    // and TestGetProportionalResourceLimitMem: (limit, request, recommended, default) → limit, note?
    #[test]
    fn proportional_limit_table() {
        let rows = [
            (
                "scale proportionally",
                "2",
                "1",
                "10",
                "",
                Some("20"),
                false,
            ),
            (
                "scale proportionally with default",
                "",
                "1",
                "10",
                "2",
                Some("20"),
                false,
            ),
            ("no original limit", "", "1", "10", "", None, true),
            ("no original request", "2", "", "10", "", Some("10"), false),
            ("no recommendation", "", "1", "0", "2", None, true),
            (
                "limit equal to request",
                "1",
                "1",
                "10",
                "",
                Some("10"),
                false,
            ),
        ];
        for resource in Resource::ALL {
            for (name, limit, request, rec, default, want, note) in rows {
                let (got, got_note) =
                    proportional_limit(resource, oq(limit), oq(request), oq(rec), oq(default));
                assert_eq!(got, want.map(q), "{resource} {name}");
                assert_eq!(got_note.is_some(), note, "{resource} {name}");
            }
        }
        // "handle non-integer ratios": CPU 2 × 1 / 1.5 = 1.333; memory 200 × 100 / 150 = 133.
        let (cpu, _) = proportional_limit(Resource::Cpu, oq("2"), oq("1.50"), oq("1"), None);
        assert_eq!(cpu, Some(q("1.333")));
        let (mem, _) = proportional_limit(Resource::Memory, oq("200"), oq("150"), oq("100"), None);
        assert_eq!(mem, Some(q("133")));
        // "go over milli cap".
        let (cpu, note) = proportional_limit(Resource::Cpu, oq("10G"), oq("1m"), oq("10G"), None);
        assert_eq!(cpu.unwrap().milli(), i128::from(i64::MAX));
        assert!(note.unwrap().contains("capping limit to int64"));
        let (mem, note) =
            proportional_limit(Resource::Memory, oq("10G"), oq("1m"), oq("10G"), None);
        assert_eq!(mem.unwrap().value(), i128::from(i64::MAX));
        assert!(note.is_some());
    }

    #[test]
    fn boundary_request_cases() {
        // request 1, limit 2, max limit 4 → request may go up to 2.
        assert_eq!(
            boundary_request(Resource::Cpu, oq("1"), oq("2"), oq("4"), None),
            Some(q("2"))
        );
        // No limit and no default: no boundary.
        assert_eq!(
            boundary_request(Resource::Cpu, oq("1"), None, oq("4"), None),
            None
        );
        // No request: the boundary is the limit boundary itself.
        assert_eq!(
            boundary_request(Resource::Memory, None, oq("1Gi"), oq("2Gi"), None),
            Some(q("2Gi"))
        );
        // Default limit stands in for a missing limit.
        assert_eq!(
            boundary_request(Resource::Cpu, oq("500m"), None, oq("2"), oq("1")),
            Some(q("1"))
        );
    }

    // upstream: pkg/utils/vpa/capping_test.go TestApplyCapsToLimitRange
    #[test]
    fn caps_to_container_limit_range() {
        let range = LimitRangeItem {
            max: Resources {
                cpu: oq("1"),
                memory: None,
            },
            min: Resources {
                cpu: None,
                memory: oq("500M"),
            },
            has_max: true,
            has_min: true,
            ..LimitRangeItem::default()
        };
        let requests = Resources {
            cpu: oq("1"),
            memory: oq("1G"),
        };
        let mut rec = Resources {
            cpu: oq("2"),
            memory: oq("200M"),
        };
        let notes = cap_to_container_limit_range(&mut rec, &requests, &requests, &range);
        assert_eq!(rec.cpu, oq("1000m"));
        assert_eq!(rec.memory, oq("500000000"));
        assert_eq!(
            notes,
            [
                "cpu capped to fit Max in container LimitRange",
                "memory capped to fit Min in container LimitRange"
            ]
        );
    }

    // upstream: capping_test.go TestApplyPodLimitRange "cap target cpu to max"
    #[test]
    fn pod_limit_range_scales_all_containers() {
        let range = LimitRangeItem {
            max: Resources {
                cpu: oq("1"),
                memory: None,
            },
            has_max: true,
            ..LimitRangeItem::default()
        };
        let requests = Resources {
            cpu: oq("1"),
            memory: None,
        };
        let mut a = Resources {
            cpu: oq("1"),
            memory: None,
        };
        let mut b = a;
        let mut inputs = vec![
            PodLimitInput {
                requests: &requests,
                limits: &requests,
                recommendation: &mut a,
            },
            PodLimitInput {
                requests: &requests,
                limits: &requests,
                recommendation: &mut b,
            },
        ];
        cap_to_pod_limit_range(&mut inputs, &range);
        assert_eq!(a.cpu, oq("500m"));
        assert_eq!(b.cpu, oq("500m"));
    }

    // upstream: pkg/utils/limitrange/limit_range_calculator_test.go (merging rules)
    #[test]
    fn merge_takes_tightest_bounds_and_last_default() {
        let item = |max: &str, min: &str, default: &str| LimitRangeItem {
            max: Resources {
                cpu: oq(max),
                memory: None,
            },
            min: Resources {
                cpu: oq(min),
                memory: None,
            },
            default: Resources {
                cpu: oq(default),
                memory: None,
            },
            has_max: true,
            has_min: true,
            ..LimitRangeItem::default()
        };
        let items = vec![
            (LimitType::Container, item("4", "100m", "1")),
            (LimitType::Container, item("2", "200m", "500m")),
            (LimitType::Pod, item("1", "1", "1")),
        ];
        let merged = merge(&items, LimitType::Container).unwrap();
        assert_eq!(merged.max.cpu, oq("2"));
        assert_eq!(merged.min.cpu, oq("200m"));
        assert_eq!(merged.default.cpu, oq("500m"));
        assert!(merge(&items[..0], LimitType::Container).is_none());
    }

    #[test]
    fn ratio_helpers() {
        // limit 2, ratio 2: the request may not go below 1.
        assert_eq!(
            ratio_floor_request(Resource::Cpu, q("500m"), oq("2"), Some(2.0)),
            Some(q("1"))
        );
        assert_eq!(
            ratio_floor_request(Resource::Cpu, q("1500m"), oq("2"), Some(2.0)),
            None
        );
        // request 1Gi, ratio 1.5: limit at most 1.5Gi.
        assert_eq!(
            ratio_ceiling_limit(q("1Gi"), q("4Gi"), Some(1.5)),
            Some(q("1536Mi"))
        );
        assert_eq!(ratio_ceiling_limit(q("1Gi"), q("1Gi"), Some(1.5)), None);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            // The proportional CPU limit keeps limit/request within one milli-unit of rounding.
            #[test]
            fn proportional_keeps_ratio(req in 1i64..100_000, lim_extra in 0i64..100_000, rec in 1i64..100_000) {
                let request = Quantity::from_milli(i128::from(req));
                let limit = Quantity::from_milli(i128::from(req + lim_extra));
                let recq = Quantity::from_milli(i128::from(rec));
                let (got, _) = proportional_limit(Resource::Cpu, Some(limit), Some(request), Some(recq), None);
                let got = got.unwrap().milli();
                let exact = i128::from(req + lim_extra) * i128::from(rec) / i128::from(req);
                prop_assert!(got == exact || (lim_extra == 0 && got == i128::from(rec)));
                prop_assert!(got >= i128::from(rec));
            }
        }
    }
}
