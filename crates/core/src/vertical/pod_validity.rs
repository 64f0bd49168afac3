//! What kube-apiserver accepts of a pod's CPU and memory, as pure checks: the rules that the
//! webhook's patch and the updater's in-place resize must not break, whatever a VPA's policy,
//! its recommendation or the namespace's `LimitRange`s say.
//!
//! The rules, per resource:
//! * `ValidateResourceRequirements` (`pkg/apis/core/validation`): every amount is >= 0, and a
//!   request is at most its limit ([`Rule::Negative`], [`Rule::RequestAboveLimit`]).
//! * The `LimitRanger` admission plugin (`plugin/pkg/admission/limitranger`), for a `Container`
//!   item on each container and for a `Pod` item on the sums over the pod's containers: with a
//!   `min`, a request must exist and be >= min, and a limit, when set, too ([`Rule::BelowMin`]);
//!   with a `max`, a limit must exist and be <= max, and a request, when set, too
//!   ([`Rule::AboveMax`]); with a `maxLimitRequestRatio`, both must exist, be non-zero, and
//!   `limit / request` (computed as `LimitRanger` computes it, in floating point on milli-values)
//!   must not exceed it ([`Rule::AboveRatio`]).
//!
//! A request a container leaves out while it sets a limit is the limit (the API server defaults
//! it so). Amounts compare as exact milli-units, which is at least as strict as `LimitRanger`'s
//! comparison (milli-values, or whole units for amounts beyond `i64` milli-units).
//!
//! A change is acceptable when it breaks no rule the container (or the pod) met before it: rules
//! the pod already breaks (it predates a `LimitRange`, say) cannot be the change's fault, and
//! leaving the resource as it is keeps every rule the pod met. That is what "where possible"
//! means in [`super::admission`]'s guarantee.

use std::fmt;

use crate::quantity::Quantity;

use super::limit_range::LimitRangeItem;
use super::resources::Resource;

/// One rule of the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    /// An amount below zero.
    Negative,
    /// A request above its limit.
    RequestAboveLimit,
    /// Below a `LimitRange` `min` (or no request to compare).
    BelowMin,
    /// Above a `LimitRange` `max` (or no limit to compare).
    AboveMax,
    /// `limit / request` above a `LimitRange` `maxLimitRequestRatio` (or either missing or 0).
    AboveRatio,
}

impl Rule {
    const ALL: [Rule; 5] = [
        Rule::Negative,
        Rule::RequestAboveLimit,
        Rule::BelowMin,
        Rule::AboveMax,
        Rule::AboveRatio,
    ];

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rule::Negative => "amounts >= 0",
            Rule::RequestAboveLimit => "request <= limit",
            Rule::BelowMin => "the LimitRange min",
            Rule::AboveMax => "the LimitRange max",
            Rule::AboveRatio => "the LimitRange maxLimitRequestRatio",
        })
    }
}

/// The set of rules an amount pair breaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Violations(u8);

impl Violations {
    fn add(&mut self, rule: Rule) {
        self.0 |= rule.bit();
    }

    /// True when no rule is broken.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The rules broken here and not in `before`.
    #[must_use]
    pub fn new_since(self, before: Violations) -> Violations {
        Violations(self.0 & !before.0)
    }

    /// The rules broken, in declaration order.
    pub fn rules(self) -> impl Iterator<Item = Rule> {
        Rule::ALL.into_iter().filter(move |r| self.0 & r.bit() != 0)
    }
}

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.rules().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// A request and a limit of one resource, each optional (absent is not zero).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Amounts {
    /// The request.
    pub request: Option<Quantity>,
    /// The limit.
    pub limit: Option<Quantity>,
}

impl Amounts {
    /// The pair as the API server stores it: a missing request defaults to the limit.
    #[must_use]
    pub fn defaulted(self) -> Amounts {
        Amounts {
            request: self.request.or(self.limit),
            limit: self.limit,
        }
    }
}

/// The rules one container's `resource` breaks (`range`: the namespace's merged `Container`
/// item).
pub fn container_violations(
    resource: Resource,
    amounts: Amounts,
    range: Option<&LimitRangeItem>,
) -> Violations {
    let a = amounts.defaulted();
    let mut v = Violations::default();
    if a.request.is_some_and(|q| q.milli() < 0) || a.limit.is_some_and(|q| q.milli() < 0) {
        v.add(Rule::Negative);
    }
    if let (Some(req), Some(lim)) = (a.request, a.limit)
        && req > lim
    {
        v.add(Rule::RequestAboveLimit);
    }
    if let Some(range) = range {
        v.0 |= limit_range_violations(resource, a, range).0;
    }
    v
}

/// The rules the sums over a pod's containers break against the merged `Pod` item `range`
/// (`containers`: every container's pair, defaulted as the API server stores it).
pub fn pod_violations(
    resource: Resource,
    containers: impl IntoIterator<Item = Amounts>,
    range: &LimitRangeItem,
) -> Violations {
    let mut sum = Amounts::default();
    for c in containers {
        let c = c.defaulted();
        // `PodRequests`/`PodLimits` add what each container sets; a sum no container
        // contributes to is absent.
        for (total, part) in [(&mut sum.request, c.request), (&mut sum.limit, c.limit)] {
            if let Some(part) = part {
                *total = Some(
                    total
                        .unwrap_or(Quantity::ZERO)
                        .checked_add(part)
                        .unwrap_or(Quantity::from_milli(i128::MAX)),
                );
            }
        }
    }
    limit_range_violations(resource, sum, range)
}

fn limit_range_violations(resource: Resource, a: Amounts, range: &LimitRangeItem) -> Violations {
    let mut v = Violations::default();
    if let Some(min) = range.min.get(resource) {
        let below = match a.request {
            None => true,
            Some(req) => req < min || a.limit.is_some_and(|lim| lim < min),
        };
        if below {
            v.add(Rule::BelowMin);
        }
    }
    if let Some(max) = range.max.get(resource) {
        let above = match a.limit {
            None => true,
            Some(lim) => lim > max || a.request.is_some_and(|req| req > max),
        };
        if above {
            v.add(Rule::AboveMax);
        }
    }
    if let Some(ratio) = range.max_limit_request_ratio.get(resource) {
        let ok = match (a.request, a.limit) {
            (Some(req), Some(lim)) if req.milli() != 0 && lim.milli() != 0 => {
                within_ratio(req, lim, ratio)
            }
            _ => false,
        };
        if !ok {
            v.add(Rule::AboveRatio);
        }
    }
    v
}

/// `resource.MaxMilliValue`: the largest value whose milli-value fits an `int64`.
const MAX_MILLI_VALUE: i128 = (i64::MAX / 1000) as i128;

/// `limitRequestRatioConstraint`, as `LimitRanger` computes it: on milli-values when the request,
/// the limit and the ratio all fit them (`requestLimitEnforcedValues`), else on whole units;
/// the observed ratio in floating point, scaled by 1000 against the ratio's milli-value when the
/// ratio fits. Mirrored to the letter, rounding included: an exact comparison would pass pods at
/// the boundary that the API server refuses.
#[allow(clippy::cast_precision_loss)] // the floating point is LimitRanger's
fn within_ratio(request: Quantity, limit: Quantity, ratio: f64) -> bool {
    #[allow(clippy::cast_possible_truncation)] // a LimitRange ratio is a small quantity
    let enforced = Quantity::from_milli((ratio * 1000.0).round() as i128);
    let milli = [request, limit, enforced]
        .iter()
        .all(|q| q.value() <= MAX_MILLI_VALUE);
    let (req, lim) = if milli {
        (request.milli(), limit.milli())
    } else {
        (request.value(), limit.value())
    };
    let mut observed = lim as f64 / req as f64;
    let mut max = enforced.value() as f64;
    if enforced.value() <= MAX_MILLI_VALUE {
        observed *= 1000.0;
        max = enforced.milli() as f64;
    }
    observed <= max
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vertical::limit_range::Ratios;
    use crate::vertical::resources::Resources;

    fn q(s: &str) -> Option<Quantity> {
        (!s.is_empty()).then(|| Quantity::parse(s).expect("quantity"))
    }

    fn pair(request: &str, limit: &str) -> Amounts {
        Amounts {
            request: q(request),
            limit: q(limit),
        }
    }

    #[test]
    fn basic_rules() {
        let cpu = Resource::Cpu;
        assert!(container_violations(cpu, pair("1", "2"), None).is_empty());
        assert!(container_violations(cpu, pair("", "2"), None).is_empty());
        assert!(container_violations(cpu, pair("0", ""), None).is_empty());
        let v = container_violations(cpu, pair("-1", "2"), None);
        assert_eq!(v.rules().collect::<Vec<_>>(), [Rule::Negative]);
        let v = container_violations(cpu, pair("3", "2"), None);
        assert_eq!(v.rules().collect::<Vec<_>>(), [Rule::RequestAboveLimit]);
    }

    // upstream: plugin/pkg/admission/limitranger/admission_test.go TestPodLimitFunc (the
    // container cases: below min, above max, ratio, missing request or limit).
    #[test]
    fn limit_range_rules() {
        let cpu = Resource::Cpu;
        let range = LimitRangeItem {
            min: Resources {
                cpu: q("100m"),
                memory: None,
            },
            max: Resources {
                cpu: q("2"),
                memory: None,
            },
            max_limit_request_ratio: Ratios {
                cpu: Some(2.0),
                memory: None,
            },
            has_min: true,
            has_max: true,
            ..LimitRangeItem::default()
        };
        let r = Some(&range);
        assert!(container_violations(cpu, pair("500m", "1"), r).is_empty());
        let rules = |a| container_violations(cpu, a, r).rules().collect::<Vec<_>>();
        assert_eq!(rules(pair("50m", "100m")), [Rule::BelowMin]);
        assert_eq!(rules(pair("1", "3")), [Rule::AboveMax, Rule::AboveRatio]);
        assert_eq!(rules(pair("500m", "")), [Rule::AboveMax, Rule::AboveRatio]);
        assert_eq!(rules(pair("200m", "1")), [Rule::AboveRatio]);
        assert_eq!(
            rules(pair("", "")),
            [Rule::BelowMin, Rule::AboveMax, Rule::AboveRatio]
        );
        // The pod sums: two containers of 1.5 each exceed a pod max of 2.
        let pod = |a, b| {
            pod_violations(cpu, [a, b], &range)
                .rules()
                .collect::<Vec<_>>()
        };
        assert_eq!(
            pod(pair("750m", "1500m"), pair("750m", "1500m")),
            [Rule::AboveMax]
        );
        assert!(pod(pair("500m", "1"), pair("500m", "1")).is_empty());
    }

    #[test]
    fn new_since_keeps_only_fresh_breaks() {
        let before = container_violations(Resource::Cpu, pair("3", "2"), None);
        let after = container_violations(Resource::Cpu, pair("-3", "2"), None);
        assert_eq!(
            after.new_since(before).rules().collect::<Vec<_>>(),
            [Rule::Negative]
        );
        assert_eq!(after.to_string(), "amounts >= 0");
    }
}
