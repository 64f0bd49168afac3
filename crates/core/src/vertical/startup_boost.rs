//! CPU startup boost (VPA AEP-7862): how much CPU a container gets when its pod is created, and
//! when the updater lowers it again.
//!
//! Semantics (AEP-7862 "Workflow" and "API Changes"; upstream's admission
//! `applyCPUStartupBoost` and updater `GetExpiredStartupCPUBoostAnnotations`):
//! * A container's boost is its container policy's `startupBoost.cpu`, else the VPA's
//!   `spec.startupBoost.cpu`. An unknown `type` means no boost (forward compatibility).
//! * The base is the container's recommended CPU request (what the webhook would set), else,
//!   when there is none or it is zero, the CPU request of the pod spec. `Factor` multiplies the
//!   base; `Quantity` adds to it. A container with no base (no recommendation and no request) is
//!   not boosted.
//! * Limits: with `controlledValues: RequestsOnly` the boosted request is kept just below the
//!   container's CPU limit (1m below, to keep the pod's QoS class); with `RequestsAndLimits` (the
//!   default) the CPU limit keeps its ratio to the request, when the spec has both.
//! * The boost goes beyond `maxAllowed` and applies even where CPU is not a controlled resource,
//!   and to containers in `mode: Off` (the boost takes precedence over the rest of the policy,
//!   AEP "Priority of StartupBoost"); the VPA's `updateMode: Off` turns off recommendations,
//!   not the boost.
//! * `LimitRange`s (beyond upstream, whose webhook lets the API server refuse such a pod): a
//!   boost that would break a rule of the namespace's `Container` item the container met
//!   without it is left out for that container; a boost that would make the pod's CPU sums
//!   break a rule of the `Pod` item (`min`/`max` on the sums of the containers' requests and
//!   limits, `maxLimitRequestRatio` on the sums) that the unboosted pod met is left out for
//!   every container ([`pod_limit_range_breaks`]), as the webhook treats a recommendation that
//!   would break a pod sum. Left out, not cut down: a smaller boost than the VPA asks for would
//!   be a setting nobody wrote, and the note in `vpaUpdates` says why there is none.
//! * The webhook records each boosted container's original requests and limits in the pod
//!   annotation `vpaCpuStartupBoost/<container>` (upstream's key and JSON).
//! * The updater lowers a boosted container once the pod has been `Ready` for
//!   `durationSeconds` (default 0: as soon as it is Ready): to the recommendation when the VPA's
//!   mode applies recommendations and has one for the container, else back to the original
//!   values; in place only, and never by eviction (AEP "Mitigating Failed In-Place Downsizes").

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use super::limit_range::LimitRangeItem;
use super::pod_validity::{Amounts, Violations, pod_violations};
use super::policy::ControlledValues;
use super::resources::{Resource, Resources, resources_from_k8s};
use crate::api::vpa::{StartupBoostType, VerticalPodAutoscaler};
use crate::quantity::{Quantity, QuantityError};

/// The pod annotation prefix; the key is the prefix and the container name, the value the
/// container's original resources as JSON.
pub const ANNOTATION_PREFIX: &str = "vpaCpuStartupBoost/";

/// How a container's CPU is raised at start-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuBoost {
    /// Multiply the base request by this (>= 1).
    Factor(i32),
    /// Add this much to the base request.
    Quantity(Quantity),
}

/// A container's boost and how long it lasts after the pod is Ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoostPolicy {
    /// The raise.
    pub cpu: CpuBoost,
    /// `durationSeconds` (default 0).
    pub duration: SignedDuration,
}

/// The boosts of a VPA: the pod-level one and the container policies' (`*` included).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StartupBoosts {
    /// `spec.startupBoost.cpu`.
    pub pod: Option<BoostPolicy>,
    /// `containerPolicies[].startupBoost.cpu` by container name (`*` for the default entry).
    pub containers: BTreeMap<String, Option<BoostPolicy>>,
    /// The webhook's `--max-allowed-cpu-boost`: no boosted request above it.
    pub max_cpu: Option<Quantity>,
}

impl StartupBoosts {
    /// Reads the boosts of a VPA object (unknown types and unreadable amounts: no boost).
    pub fn from_api(vpa: &VerticalPodAutoscaler) -> StartupBoosts {
        let read = |b: Option<&crate::api::vpa::StartupBoost>| -> Option<BoostPolicy> {
            let cpu = b?.cpu.as_ref()?;
            let raise = match cpu.type_ {
                StartupBoostType::Factor => CpuBoost::Factor(cpu.factor?.max(1)),
                StartupBoostType::Quantity => {
                    CpuBoost::Quantity(Quantity::try_from(cpu.quantity.as_ref()?).ok()?)
                }
                StartupBoostType::Unknown(_) => return None,
            };
            Some(BoostPolicy {
                cpu: raise,
                duration: SignedDuration::from_secs(i64::from(
                    cpu.duration_seconds.unwrap_or(0).max(0),
                )),
            })
        };
        let containers = vpa
            .spec
            .resource_policy
            .as_ref()
            .and_then(|p| p.container_policies.as_ref())
            .into_iter()
            .flatten()
            .filter(|p| p.startup_boost.is_some())
            .map(|p| {
                (
                    p.container_name.clone().unwrap_or_else(|| "*".to_owned()),
                    read(p.startup_boost.as_ref()),
                )
            })
            .collect();
        StartupBoosts {
            pod: read(vpa.spec.startup_boost.as_ref()),
            containers,
            max_cpu: None,
        }
    }

    /// True when some container may be boosted.
    pub fn any(&self) -> bool {
        self.pod.is_some() || self.containers.values().any(Option::is_some)
    }

    /// The boost of `container`: its container policy's (by name, else `*`) when that policy
    /// has one, else the pod-level one.
    pub fn for_container(&self, container: &str) -> Option<BoostPolicy> {
        match self
            .containers
            .get(container)
            .or_else(|| self.containers.get("*"))
        {
            Some(own) => *own,
            None => self.pod,
        }
    }
}

/// The boosted CPU request for `base` (a `Factor` rounds down to a milli-core, as upstream),
/// cut to `max` (`--max-allowed-cpu-boost`) when set.
pub fn boosted_cpu(base: Quantity, boost: CpuBoost, max: Option<Quantity>) -> Quantity {
    let raised = match boost {
        CpuBoost::Factor(f) => Quantity::from_milli(base.milli().saturating_mul(i128::from(f))),
        CpuBoost::Quantity(q) => Quantity::from_milli(base.milli().saturating_add(q.milli())),
    };
    match max {
        Some(max) if raised > max => max,
        _ => raised,
    }
}

/// The CPU a boosted container gets: request and, where it changes, limit. `recommended` is the
/// request the webhook sets without the boost (if any), `original` the pod spec's container,
/// `max` the `--max-allowed-cpu-boost`. `None` when there is no base to boost.
pub fn boost_container(
    recommended: Option<Quantity>,
    (original_requests, original_limits): (&Resources, &Resources),
    controlled: ControlledValues,
    boost: CpuBoost,
    max: Option<Quantity>,
) -> Option<(Quantity, Option<Quantity>)> {
    let base = recommended
        .filter(|q| q.milli() > 0)
        .or(original_requests.cpu)
        .filter(|q| q.milli() > 0)?;
    let mut request = boosted_cpu(base, boost, max);
    let limit = original_limits.cpu;
    match controlled {
        ControlledValues::RequestsOnly => {
            // Kept 1m below the limit so that a Guaranteed or Burstable pod stays so.
            if let Some(limit) = limit
                && request > limit
            {
                request = if limit.milli() > 1 {
                    Quantity::from_milli(limit.milli() - 1)
                } else {
                    limit
                };
            }
            Some((request, None))
        }
        ControlledValues::RequestsAndLimits => {
            let new_limit = match (limit, original_requests.cpu) {
                (Some(l), Some(r)) if r.milli() > 0 => Some(Quantity::from_milli(
                    request.milli().saturating_mul(l.milli()) / r.milli(),
                )),
                _ => None,
            };
            Some((request, new_limit))
        }
    }
}

/// The rules of the namespace's `Pod` `LimitRange` item `range` that boosting would newly
/// break: `unboosted` holds each container's CPU (request, limit) as the pod would be created
/// without the boost, `boosted` the same with every boost applied. Rules the unboosted pod
/// already breaks are not the boost's fault and do not count. Empty: the boosts may be applied.
pub fn pod_limit_range_breaks(
    unboosted: &[Amounts],
    boosted: &[Amounts],
    range: Option<&LimitRangeItem>,
) -> Violations {
    let Some(range) = range else {
        return Violations::default();
    };
    let before = pod_violations(Resource::Cpu, unboosted.iter().copied(), range);
    pod_violations(Resource::Cpu, boosted.iter().copied(), range).new_since(before)
}

/// A container's original resources, as the annotation holds them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginalResources {
    /// Requests (`cpu`, `memory`).
    #[serde(default)]
    pub requests: BTreeMap<String, String>,
    /// Limits (`cpu`, `memory`).
    #[serde(default)]
    pub limits: BTreeMap<String, String>,
}

impl OriginalResources {
    /// The record of a container's spec requests and limits.
    pub fn of(requests: &Resources, limits: &Resources) -> OriginalResources {
        let list = |r: &Resources| {
            r.iter()
                .map(|(k, v)| (k.name().to_owned(), v.to_string()))
                .collect()
        };
        OriginalResources {
            requests: list(requests),
            limits: list(limits),
        }
    }

    /// The annotation value (upstream's JSON: `{"requests":{…},"limits":{…}}`).
    pub fn annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses an annotation value; `None` when it is not such JSON (the annotation is the
    /// pod author's to write too: hostile).
    pub fn parse(value: &str) -> Option<OriginalResources> {
        if value.len() > 4096 {
            return None;
        }
        serde_json::from_str(value).ok()
    }

    /// Requests and limits as amounts (unknown resources ignored).
    pub fn resources(&self) -> Result<(Resources, Resources), QuantityError> {
        let read = |m: &BTreeMap<String, String>| {
            let list: BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity> = m
                .iter()
                .filter(|(k, _)| Resource::from_name(k).is_some())
                .map(|(k, v)| {
                    (
                        k.clone(),
                        k8s_openapi::apimachinery::pkg::api::resource::Quantity(v.clone()),
                    )
                })
                .collect();
            resources_from_k8s(Some(&list))
        };
        Ok((read(&self.requests)?, read(&self.limits)?))
    }
}

/// The annotation key for `container`.
pub fn annotation_key(container: &str) -> String {
    format!("{ANNOTATION_PREFIX}{container}")
}

/// The boosted containers of a pod, from its annotations: container → original resources
/// (a value that does not parse counts as no original record).
pub fn boosted_containers<'a>(
    annotations: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> BTreeMap<String, Option<OriginalResources>> {
    annotations
        .into_iter()
        .filter_map(|(k, v)| {
            let name = k.strip_prefix(ANNOTATION_PREFIX)?;
            Some((name.to_owned(), OriginalResources::parse(v)))
        })
        .collect()
}

/// The boosted containers whose boost is over at `now`: the pod has been Ready (since
/// `ready_since`) for the container's boost duration (upstream: a container with no boost left in
/// the VPA counts as duration 0).
pub fn expired<'a>(
    boosted: impl IntoIterator<Item = &'a String>,
    boosts: &StartupBoosts,
    ready_since: Option<Timestamp>,
    now: Timestamp,
) -> Vec<String> {
    let Some(ready) = ready_since else {
        return Vec::new();
    };
    let ready_for = now.duration_since(ready);
    boosted
        .into_iter()
        .filter(|c| {
            let duration = boosts
                .for_container(c)
                .map_or(SignedDuration::ZERO, |b| b.duration);
            duration.is_zero() || ready_for > duration
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vertical::limit_range::Ratios;
    use crate::vertical::pod_validity::Rule;

    fn cpu(request: &str, limit: &str) -> Amounts {
        let q = |s: &str| (!s.is_empty()).then(|| Quantity::parse(s).unwrap());
        Amounts {
            request: q(request),
            limit: q(limit),
        }
    }

    fn pod_range(max_cpu: Option<&str>, ratio: Option<f64>) -> LimitRangeItem {
        LimitRangeItem {
            max: Resources {
                cpu: max_cpu.map(|m| Quantity::parse(m).unwrap()),
                memory: None,
            },
            has_max: max_cpu.is_some(),
            max_limit_request_ratio: Ratios {
                cpu: ratio,
                memory: None,
            },
            ..LimitRangeItem::default()
        }
    }

    // A `Pod` item's max bounds the sums: two containers of 1 core limit fit a 3-core pod
    // max; boosted 2× (limits keep their ratio) they make 4 cores, which breaks it.
    #[test]
    fn a_boost_past_the_pod_max_breaks_it() {
        let range = pod_range(Some("3"), None);
        let unboosted = [cpu("500m", "1"), cpu("500m", "1")];
        let boosted = [cpu("1", "2"), cpu("1", "2")];
        let breaks = pod_limit_range_breaks(&unboosted, &boosted, Some(&range));
        assert_eq!(breaks.rules().collect::<Vec<_>>(), vec![Rule::AboveMax]);
        // Boosting one container only: 3 cores, at the max, allowed.
        let one = [cpu("1", "2"), cpu("500m", "1")];
        assert!(pod_limit_range_breaks(&unboosted, &one, Some(&range)).is_empty());
        assert!(pod_limit_range_breaks(&unboosted, &boosted, None).is_empty());
    }

    // maxLimitRequestRatio on the sums: with `RequestsOnly` a boost raises requests only, so
    // the ratio of the sums falls and never breaks; a boost whose limit grows faster than its
    // request (a container with no CPU request of its own has none to scale) can.
    #[test]
    fn the_pod_ratio_counts_on_the_sums() {
        let range = pod_range(None, Some(2.0));
        let unboosted = [cpu("500m", "1"), cpu("1", "1")];
        let requests_only = [cpu("999m", "1"), cpu("1", "1")];
        assert!(pod_limit_range_breaks(&unboosted, &requests_only, Some(&range)).is_empty());
        let limit_grows = [cpu("500m", "4"), cpu("1", "1")];
        assert_eq!(
            pod_limit_range_breaks(&unboosted, &limit_grows, Some(&range))
                .rules()
                .collect::<Vec<_>>(),
            vec![Rule::AboveRatio]
        );
    }

    // A rule the unboosted pod already breaks is not the boost's doing.
    #[test]
    fn a_rule_broken_before_is_not_counted() {
        let range = pod_range(Some("1"), None);
        let unboosted = [cpu("2", "2")];
        assert!(pod_limit_range_breaks(&unboosted, &[cpu("4", "4")], Some(&range)).is_empty());
    }

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    fn res(cpu: &str) -> Resources {
        Resources {
            cpu: Some(q(cpu)),
            memory: None,
        }
    }

    // AEP-7862 "Workflow" step 3: base = recommendation, else the spec's request.
    #[test]
    fn factor_and_quantity_raise_the_base() {
        let none = Resources::default();
        let rr = ControlledValues::RequestsAndLimits;
        assert_eq!(
            boost_container(
                Some(q("250m")),
                (&res("100m"), &none),
                rr,
                CpuBoost::Factor(3),
                None
            ),
            Some((q("750m"), None))
        );
        assert_eq!(
            boost_container(
                None,
                (&res("100m"), &none),
                rr,
                CpuBoost::Quantity(q("2")),
                None
            ),
            Some((q("2100m"), None))
        );
        // A zero recommendation falls back to the spec's request.
        assert_eq!(
            boost_container(
                Some(q("0")),
                (&res("100m"), &none),
                rr,
                CpuBoost::Factor(2),
                None
            ),
            Some((q("200m"), None))
        );
        // Nothing to boost from.
        assert_eq!(
            boost_container(None, (&none, &none), rr, CpuBoost::Factor(2), None),
            None
        );
        // --max-allowed-cpu-boost cuts the boosted request.
        assert_eq!(
            boost_container(
                None,
                (&res("1"), &none),
                rr,
                CpuBoost::Factor(8),
                Some(q("4"))
            ),
            Some((q("4"), None))
        );
    }

    #[test]
    fn limits_keep_their_ratio_or_cap_the_request() {
        let limits = res("200m");
        assert_eq!(
            boost_container(
                None,
                (&res("100m"), &limits),
                ControlledValues::RequestsAndLimits,
                CpuBoost::Factor(3),
                None
            ),
            Some((q("300m"), Some(q("600m"))))
        );
        assert_eq!(
            boost_container(
                None,
                (&res("100m"), &limits),
                ControlledValues::RequestsOnly,
                CpuBoost::Factor(3),
                None
            ),
            Some((q("199m"), None))
        );
    }

    #[test]
    fn annotation_round_trips_and_hostile_values_are_ignored() {
        let original = OriginalResources::of(&Resources::new(100, 1 << 20), &res("1"));
        let text = original.annotation();
        assert_eq!(
            text,
            r#"{"requests":{"cpu":"100m","memory":"1Mi"},"limits":{"cpu":"1"}}"#
        );
        assert_eq!(OriginalResources::parse(&text), Some(original.clone()));
        assert_eq!(
            original.resources().unwrap(),
            (Resources::new(100, 1 << 20), res("1"))
        );
        assert_eq!(OriginalResources::parse("not json"), None);
        assert_eq!(OriginalResources::parse(&"x".repeat(5000)), None);
    }

    #[test]
    fn container_policy_wins_and_expiry_counts_from_ready() {
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let boosts = StartupBoosts {
            pod: Some(BoostPolicy {
                cpu: CpuBoost::Factor(2),
                duration: SignedDuration::from_secs(60),
            }),
            containers: BTreeMap::from([
                ("side".to_owned(), None),
                (
                    "fast".to_owned(),
                    Some(BoostPolicy {
                        cpu: CpuBoost::Factor(2),
                        duration: SignedDuration::ZERO,
                    }),
                ),
            ]),
            max_cpu: None,
        };
        assert_eq!(boosts.for_container("side"), None);
        assert_eq!(boosts.for_container("app"), boosts.pod);
        let names = ["app".to_owned(), "fast".to_owned()];
        assert!(expired(&names, &boosts, None, t0).is_empty(), "not Ready");
        assert_eq!(expired(&names, &boosts, Some(t0), t0), ["fast"]);
        assert_eq!(
            expired(
                &names,
                &boosts,
                Some(t0),
                t0 + SignedDuration::from_secs(61)
            ),
            ["app", "fast"]
        );
    }
}
