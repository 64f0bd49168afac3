//! The recommendation for one VPA: estimators per container, then the policy (upstream
//! `routines/recommender.go` `UpdateVPAs` + `logic/recommender.go` + the capping post-processor).
//!
//! Input is plain data — the VPA spec, one merged [`AggregateContainerState`] per container
//! name, and how many containers a pod of the target has — and the output is the
//! `status.recommendation` to write plus, per container, why each cap was taken and how confident
//! the history is. The controller, `replay` and the tests all call [`recommend`].
//!
//! Invariants: containers are listed sorted by name (upstream sorts too, so status does not
//! churn); containers with `mode: Off` get no entry; `uncappedTarget` is the target before the
//! policy, restricted to the controlled resources.

use std::collections::BTreeMap;

use super::aggregate::AggregateContainerState;
use super::capping::{PolicyBounds, RecommendedResources, apply_policy};
use super::estimator::{EstimatorConfig, container_minimums, estimate};
use super::resources::{Resource, ResourceAmounts, amounts_to_list};
use crate::api::vpa::{
    ContainerResourcePolicy, RecommendedContainerResources, RecommendedPodResources,
    VerticalPodAutoscalerCondition, VerticalPodAutoscalerSpec,
};
use crate::printable;
use crate::quantity::{self, QuantityError};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The recommender's result for one container, with the reasons behind it: integer amounts
/// after the policy, the target before it, the caps taken and the history's confidence. What
/// `status.recommendation` holds of it is [`to_status`]; the webhook and the updater read that
/// back as a [`super::resources::ContainerRecommendation`].
#[derive(Clone, Debug, PartialEq)]
pub struct RecommendationReport {
    /// Container name.
    pub name: String,
    /// Target and bounds after the policy.
    pub capped: RecommendedResources,
    /// Target before the policy (controlled resources only).
    pub uncapped_target: ResourceAmounts,
    /// Upstream-style notes of every cap applied to the target (`cpu capped to maxAllowed`).
    pub capped_by: Vec<String>,
    /// History confidence in days (see [`AggregateContainerState::confidence`]).
    pub confidence: f64,
}

/// Why a recommendation could not be computed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RecommendationError {
    /// A quantity in the container policy does not parse.
    #[error("spec.resourcePolicy for container {container:?}: {source}")]
    BadPolicy {
        /// The container whose policy is broken.
        container: String,
        /// The parse error.
        source: QuantityError,
    },
}

/// The estimator settings for one container: the flags, overridden by the container policy's
/// `targetCPUPercentile` / `targetMemoryPercentile`.
pub fn config_for(
    policy: Option<&ContainerResourcePolicy>,
    base: &EstimatorConfig,
) -> EstimatorConfig {
    let mut config = *base;
    let percentile = |q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
        q.and_then(|q| quantity::Quantity::try_from(q).ok())
            .map(|q| q.milli() as f64 / 1000.0)
            .filter(|p| *p > 0.0 && *p <= 1.0)
    };
    if let Some(p) = policy {
        if let Some(v) = percentile(p.target_cpu_percentile.as_ref()) {
            config.target_cpu_percentile = v;
        }
        if let Some(v) = percentile(p.target_memory_percentile.as_ref()) {
            config.target_memory_percentile = v;
        }
    }
    config
}

/// Computes the recommendation for every container in `aggregates` (container name → merged
/// aggregate). `containers_per_pod` splits the pod minimums (upstream uses the number of
/// containers in the VPA's pods; at least 1).
pub fn recommend(
    spec: &VerticalPodAutoscalerSpec,
    aggregates: &BTreeMap<String, AggregateContainerState>,
    containers_per_pod: usize,
    config: &EstimatorConfig,
) -> Result<Vec<RecommendationReport>, RecommendationError> {
    let minimums = container_minimums(config, containers_per_pod);
    let mut out = Vec::new();
    for (name, aggregate) in aggregates {
        let policy = spec.container_policy(name);
        let bounds =
            PolicyBounds::from_policy(policy).map_err(|source| RecommendationError::BadPolicy {
                container: name.clone(),
                source,
            })?;
        let e = estimate(aggregate, &config_for(policy, config), minimums);
        let both = |a: super::estimator::Amounts| {
            ResourceAmounts::from([(Resource::Cpu, a.cpu), (Resource::Memory, a.memory)])
        };
        let uncapped = RecommendedResources {
            target: both(e.target),
            lower_bound: both(e.lower_bound),
            upper_bound: both(e.upper_bound),
        };
        let Some((capped, capped_by)) = apply_policy(&uncapped, &bounds) else {
            continue;
        };
        let uncapped_target = uncapped
            .target
            .into_iter()
            .filter(|(r, _)| bounds.controlled.contains(r))
            .collect();
        out.push(RecommendationReport {
            name: name.clone(),
            capped,
            uncapped_target,
            capped_by,
            confidence: aggregate.confidence(),
        });
    }
    Ok(out)
}

/// The `status.recommendation` for `recommendations`.
pub fn to_status(recommendations: &[RecommendationReport]) -> RecommendedPodResources {
    RecommendedPodResources {
        container_recommendations: Some(
            recommendations
                .iter()
                .map(|r| RecommendedContainerResources {
                    container_name: Some(r.name.clone()),
                    target: amounts_to_list(&r.capped.target),
                    lower_bound: Some(amounts_to_list(&r.capped.lower_bound)),
                    upper_bound: Some(amounts_to_list(&r.capped.upper_bound)),
                    uncapped_target: Some(amounts_to_list(&r.uncapped_target)),
                })
                .collect(),
        ),
    }
}

/// What the recommender observed about one VPA in one loop, for its conditions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observation {
    /// At least one pod matches the VPA's target.
    pub pods_matched: bool,
    /// A recommendation is written.
    pub has_recommendation: bool,
    /// Some container's history is shorter than the confidence the operator asks for.
    pub low_confidence: bool,
    /// Why the VPA cannot be served (unknown target kind, invalid spec), if it cannot.
    pub config_unsupported: Option<String>,
    /// A horizontal autoscaler that fights this VPA over the same requests
    /// ([`crate::conflict`]), as the condition's message.
    pub conflict: Option<String>,
    /// For a VPA in joint mode, its `JointSizing` condition ([`super::joint_sizing`]).
    pub joint: Option<JointCondition>,
    /// Stored state this process ignored for the VPA (its `plimsoll.dev/total-usage`
    /// annotation, a checkpoint), as the `StoredStateIgnored` condition's message
    /// ([`crate::stored`]); the condition stands while the history descends from it.
    pub stored_state_ignored: Option<String>,
    /// What was capped to fit the largest node ([`super::node_fit`]), as the
    /// `RecommendationCappedToNode` condition's message.
    pub node_capped: Option<String>,
}

/// The condition a VPA carries while its recommendation is capped to fit the largest node.
pub const NODE_CAPPED_CONDITION: &str = "RecommendationCappedToNode";

/// The `JointSizing` condition of a VPA in joint mode.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JointCondition {
    /// True while the request is sized jointly; false when no horizontal autoscaler scales the
    /// workload on CPU utilization.
    pub status: bool,
    /// A [`super::joint::JointReason`], or `NoHorizontalAutoscaler`.
    pub reason: String,
    /// Why, in a sentence.
    pub message: String,
}

impl JointCondition {
    /// The condition's type. It lives here, with the condition, because the conditions of a
    /// VPA are written here; [`super::joint_sizing`] reads it back to tell a VPA in joint mode.
    pub const TYPE: &'static str = "JointSizing";
}

/// The conditions for `observed` (upstream `Vpa.UpdateConditions` plus `LowConfidence` and
/// `ConfigUnsupported`), sorted by type. A condition whose status did not change keeps its
/// `lastTransitionTime` from `previous`, so writing status only when it changed stays quiet.
pub fn conditions(
    previous: &[VerticalPodAutoscalerCondition],
    observed: &Observation,
    now: Timestamp,
) -> Vec<VerticalPodAutoscalerCondition> {
    let mut out = Vec::new();
    let mut set = |type_: &str, status: bool, reason: &str, message: &str| {
        let status = if status { "True" } else { "False" }.to_owned();
        let last_transition_time = previous
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .and_then(|c| c.last_transition_time.clone())
            .or(Some(Time(now)));
        out.push(VerticalPodAutoscalerCondition {
            type_: type_.to_owned(),
            status,
            last_transition_time,
            reason: (!reason.is_empty()).then(|| reason.to_owned()),
            message: (!message.is_empty())
                .then(|| printable::message(message, printable::MAX_CONDITION_MESSAGE_BYTES)),
            observed_generation: None,
        });
    };
    let (reason, message) = if observed.pods_matched {
        ("", "")
    } else {
        set(
            "NoPodsMatched",
            true,
            "NoPodsMatched",
            "No pods match this VPA object",
        );
        ("NoPodsMatched", "No pods match this VPA object")
    };
    if let Some(why) = &observed.config_unsupported {
        set("ConfigUnsupported", true, "ConfigUnsupported", why);
    }
    if observed.has_recommendation {
        set("RecommendationProvided", true, "", "");
    } else {
        set("RecommendationProvided", false, reason, message);
    }
    if let Some(message) = &observed.conflict {
        set(
            crate::conflict::CONDITION,
            true,
            crate::conflict::REASON,
            message,
        );
    }
    if let Some(j) = &observed.joint {
        set(JointCondition::TYPE, j.status, &j.reason, &j.message);
    }
    if let Some(message) = &observed.node_capped {
        set(
            NODE_CAPPED_CONDITION,
            true,
            "LargestNodeAllocatable",
            message,
        );
    }
    if let Some(message) = &observed.stored_state_ignored {
        set(
            crate::stored::IGNORED_CONDITION,
            true,
            crate::stored::IGNORED_REASON,
            message,
        );
    }
    if observed.low_confidence {
        set(
            "LowConfidence",
            true,
            "LowConfidence",
            "Some containers have a short usage history",
        );
    }
    // The updater's condition (mode InPlace) is the updater's to set and clear: carried over.
    out.extend(
        previous
            .iter()
            .filter(|c| c.type_ == super::resize_backoff::CONDITION)
            .cloned(),
    );
    out.sort_by(|a, b| a.type_.cmp(&b.type_));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::vpa::VerticalPodAutoscaler;
    use crate::vertical::aggregate::AggregationsConfig;
    use jiff::{SignedDuration, Timestamp};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use proptest::prelude::*;

    const VPA: &str = include_str!("../../tests/data/vpa-nginx.yaml");

    fn spec() -> VerticalPodAutoscalerSpec {
        serde_saphyr::from_str::<VerticalPodAutoscaler>(VPA)
            .expect("fixture")
            .spec
    }

    fn steady(cpu_milli: i64, mem_bytes: i64, days: i64) -> AggregateContainerState {
        let config = AggregationsConfig::default();
        let t0: Timestamp = "2024-03-01T00:00:00Z".parse().expect("ts");
        let mut agg = AggregateContainerState::new(&config, t0);
        for i in 0..days * 1440 {
            let t = t0 + SignedDuration::from_mins(i);
            agg.add_cpu_sample(cpu_milli, t);
            if i % 1440 == 0 {
                agg.add_memory_peak(mem_bytes, t);
            }
        }
        agg
    }

    // policy caps with uncappedTarget kept (cf. upstream routines/capping_post_processor.go)
    #[test]
    fn caps_to_max_allowed_and_keeps_uncapped() {
        let aggs = BTreeMap::from([("nginx".to_owned(), steady(2_000, 2 << 30, 2))]);
        let recs = recommend(&spec(), &aggs, 1, &EstimatorConfig::default()).expect("ok");
        assert_eq!(recs.len(), 1);
        let r = &recs[0];
        assert_eq!(r.capped.target[&Resource::Cpu], 1_000);
        assert_eq!(r.capped.target[&Resource::Memory], 1 << 30);
        assert!(r.uncapped_target[&Resource::Cpu] > 2_000);
        assert_eq!(
            r.capped_by,
            vec!["cpu capped to maxAllowed", "memory capped to maxAllowed"]
        );
        let status = to_status(&recs);
        let c = &status.container_recommendations.expect("list")[0];
        assert_eq!(c.target["cpu"], Quantity("1".into()));
        assert_eq!(c.target["memory"], Quantity("1Gi".into()));
        assert!(c.uncapped_target.as_ref().expect("u")["cpu"] != Quantity("1".into()));
    }

    // pod minimums and policy minAllowed together (cf. upstream logic/recommender_test.go TestMinResourcesApplied)
    #[test]
    fn caps_to_min_allowed() {
        let aggs = BTreeMap::from([("nginx".to_owned(), steady(10, 1 << 20, 2))]);
        let recs = recommend(&spec(), &aggs, 1, &EstimatorConfig::default()).expect("ok");
        assert_eq!(recs[0].capped.target[&Resource::Cpu], 90);
        // memory: pod minimum 250Mi is above minAllowed 10Mi
        assert_eq!(recs[0].capped.target[&Resource::Memory], 262_144_000);
    }

    #[test]
    fn mode_off_and_controlled_resources() {
        let mut s = spec();
        let policies = s
            .resource_policy
            .as_mut()
            .expect("rp")
            .container_policies
            .as_mut()
            .expect("cp");
        policies[0].controlled_resources = Some(vec!["memory".into()]);
        policies.push(ContainerResourcePolicy {
            container_name: Some("sidecar".into()),
            mode: Some(crate::api::vpa::ContainerScalingMode::Off),
            ..ContainerResourcePolicy::default()
        });
        let aggs = BTreeMap::from([
            ("nginx".to_owned(), steady(300, 1 << 28, 1)),
            ("sidecar".to_owned(), steady(300, 1 << 28, 1)),
        ]);
        let recs = recommend(&s, &aggs, 2, &EstimatorConfig::default()).expect("ok");
        assert_eq!(recs.len(), 1);
        assert!(!recs[0].capped.target.contains_key(&Resource::Cpu));
        assert!(!recs[0].uncapped_target.contains_key(&Resource::Cpu));
    }

    #[test]
    fn percentile_override_from_policy() {
        let mut s = spec();
        s.resource_policy
            .as_mut()
            .expect("rp")
            .container_policies
            .as_mut()
            .expect("cp")[0]
            .max_allowed = None;
        let aggs = BTreeMap::from([("nginx".to_owned(), steady(300, 1 << 28, 1))]);
        let base = recommend(&s, &aggs, 1, &EstimatorConfig::default()).expect("ok");
        s.resource_policy
            .as_mut()
            .expect("rp")
            .container_policies
            .as_mut()
            .expect("cp")[0]
            .target_cpu_percentile = Some(Quantity("0.5".into()));
        let p50 = recommend(&s, &aggs, 1, &EstimatorConfig::default()).expect("ok");
        // A constant load has the same p50 and p90.
        assert_eq!(base[0].capped.target, p50[0].capped.target);
    }

    // upstream: model/vpa_test.go TestUpdateConditions
    #[test]
    fn upstream_update_conditions() {
        const NO_PODS: &str = "No pods match this VPA object";
        // (pods matched, has recommendation, expected (type, status, reason, message), absent)
        type Case = (
            bool,
            bool,
            &'static [(&'static str, &'static str, &'static str, &'static str)],
            Option<&'static str>,
        );
        let cases: [Case; 4] = [
            (
                true,
                true,
                &[("RecommendationProvided", "True", "", "")],
                Some("NoPodsMatched"),
            ),
            (
                false,
                true,
                &[
                    ("NoPodsMatched", "True", "NoPodsMatched", NO_PODS),
                    ("RecommendationProvided", "True", "", ""),
                ],
                None,
            ),
            (
                true,
                false,
                &[("RecommendationProvided", "False", "", "")],
                Some("NoPodsMatched"),
            ),
            (
                false,
                false,
                &[
                    ("NoPodsMatched", "True", "NoPodsMatched", NO_PODS),
                    ("RecommendationProvided", "False", "NoPodsMatched", NO_PODS),
                ],
                None,
            ),
        ];
        let now: Timestamp = "2024-03-01T00:00:00Z".parse().expect("ts");
        for (pods_matched, has_recommendation, expected, absent) in cases {
            let got = conditions(
                &[],
                &Observation {
                    pods_matched,
                    has_recommendation,
                    ..Observation::default()
                },
                now,
            );
            let got: Vec<(&str, &str, &str, &str)> = got
                .iter()
                .map(|c| {
                    (
                        c.type_.as_str(),
                        c.status.as_str(),
                        c.reason.as_deref().unwrap_or(""),
                        c.message.as_deref().unwrap_or(""),
                    )
                })
                .collect();
            assert_eq!(got, expected.to_vec());
            if let Some(absent) = absent {
                assert!(got.iter().all(|c| c.0 != absent));
            }
        }
    }

    #[test]
    fn the_updaters_condition_is_carried_over() {
        let t1: Timestamp = "2024-03-01T00:00:00Z".parse().expect("ts");
        let held = VerticalPodAutoscalerCondition {
            type_: crate::vertical::resize_backoff::CONDITION.to_owned(),
            status: "True".to_owned(),
            last_transition_time: Some(Time(t1)),
            reason: Some("Infeasible".to_owned()),
            message: Some("1 pod(s) keep their requests".to_owned()),
            observed_generation: None,
        };
        let ok = Observation {
            pods_matched: true,
            has_recommendation: true,
            ..Observation::default()
        };
        let out = conditions(std::slice::from_ref(&held), &ok, t1);
        assert!(out.contains(&held), "{out:?}");
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn conditions_keep_transition_times() {
        let t1: Timestamp = "2024-03-01T00:00:00Z".parse().expect("ts");
        let t2: Timestamp = "2024-03-01T00:01:00Z".parse().expect("ts");
        let none = conditions(&[], &Observation::default(), t1);
        let types: Vec<(&str, &str)> = none
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect();
        assert_eq!(
            types,
            vec![
                ("NoPodsMatched", "True"),
                ("RecommendationProvided", "False")
            ]
        );
        assert_eq!(none[1].reason.as_deref(), Some("NoPodsMatched"));
        let ok = Observation {
            pods_matched: true,
            has_recommendation: true,
            ..Observation::default()
        };
        let provided = conditions(&none, &ok, t2);
        assert_eq!(provided.len(), 1);
        assert_eq!(provided[0].status, "True");
        assert_eq!(provided[0].last_transition_time, Some(Time(t2)));
        // Unchanged status keeps its transition time.
        let again = conditions(&provided, &ok, "2024-03-01T00:02:00Z".parse().expect("ts"));
        assert_eq!(again, provided);
        let unsupported = Observation {
            config_unsupported: Some("Cannot read targetRef".into()),
            low_confidence: true,
            ..ok.clone()
        };
        let types: Vec<String> = conditions(&provided, &unsupported, t2)
            .into_iter()
            .map(|c| c.type_)
            .collect();
        assert_eq!(
            types,
            vec![
                "ConfigUnsupported",
                "LowConfidence",
                "RecommendationProvided"
            ]
        );
        // A conflict is a condition of its own; the recommendation is still provided.
        let fighting = Observation {
            conflict: Some("HorizontalPodAutoscalerPlus/web scales on the cpu".into()),
            ..ok
        };
        let got = conditions(&provided, &fighting, t2);
        let conflict = got
            .iter()
            .find(|c| c.type_ == "ConflictingAutoscaler")
            .expect("the condition");
        assert_eq!(conflict.status, "True");
        assert_eq!(conflict.reason.as_deref(), Some("BothControlRequests"));
        assert!(
            got.iter()
                .any(|c| c.type_ == "RecommendationProvided" && c.status == "True")
        );
    }

    proptest! {
        /// Recommendations stay within minAllowed / maxAllowed and bounds stay ordered.
        #[test]
        fn within_policy(cpu in 1_i64..5_000, mem in 1_i64..(4 << 30), days in 1_i64..3) {
            let aggs = BTreeMap::from([("nginx".to_owned(), steady(cpu, mem, days))]);
            let recs = recommend(&spec(), &aggs, 1, &EstimatorConfig::default()).expect("ok");
            let r = &recs[0].capped;
            for field in [&r.target, &r.lower_bound, &r.upper_bound] {
                prop_assert!((90..=1_000).contains(&field[&Resource::Cpu]));
                prop_assert!((10 << 20..=1 << 30).contains(&field[&Resource::Memory]));
            }
            prop_assert!(r.lower_bound[&Resource::Cpu] <= r.target[&Resource::Cpu]);
            prop_assert!(r.target[&Resource::Cpu] <= r.upper_bound[&Resource::Cpu]);
        }
    }
}
