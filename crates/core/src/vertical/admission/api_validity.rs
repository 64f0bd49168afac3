//! Property: whatever a VPA's policy (hostile amounts included: negative, zero, huge,
//! `minAllowed` above `maxAllowed`), the namespace's `LimitRange`s and the recommendation say,
//! the pod the webhook's patch gives and the pod the updater's in-place resize gives pass
//! kube-apiserver's validation of container resources, wherever the pod before the change did.
//!
//! The check is written here from the API server's code, on the pod as JSON after the patch's
//! operations are applied (so every amount is the string the API server parses), apart from
//! `pod_validity`, which the code under test uses:
//! * `ValidateResourceRequirements` (`pkg/apis/core/validation/validation.go`): every request
//!   and limit >= 0 (`ValidateNonnegativeQuantity`); a request <= its limit. A request a container
//!   leaves out while it sets a limit is the limit (`SetDefaults_Pod`).
//! * `LimitRanger`'s `PodValidateLimitFunc` (`plugin/pkg/admission/limitranger/admission.go`), for
//!   the `Container` item on every container and the `Pod` item on the sums over the containers:
//!   `minConstraint`, `maxConstraint` and `limitRequestRatioConstraint`, each on the values
//!   `requestLimitEnforcedValues` picks (milli-values when they fit an `int64`, else whole units).
//!
//! "Where possible", precisely: every rule is evaluated per container and resource (the basic
//! rules and the `Container` item) or per resource (the `Pod` item), before and after the change;
//! each that holds before must hold after. The generated pods always meet the basic rules (the
//! API server stored them), so those always hold after the change; a `LimitRange` rule the pod
//! already breaks (it predates the `LimitRange`) may stay broken.
//!
//! Not modelled: init containers and pod overhead (the webhook changes neither), and the resize
//! rule that a pod's QoS class may not change (the updater evicts when a resize is refused).

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::{AdmissionVpa, admission_patch, admission_pod, resize_patch};
use crate::quantity::Quantity;
use crate::vertical::limit_range::{LimitRangeItem, Ratios};
use crate::vertical::policy::{ContainerMode, ContainerPolicy, ControlledValues, UpdateMode};
use crate::vertical::resources::{ContainerRecommendation, Resource, Resources};

/// `resource.MaxMilliValue`.
const MAX_MILLI_VALUE: i128 = (i64::MAX / 1000) as i128;

// ------------------------------------------------------------------------------------------
// The API server's rules, on pod JSON.
// ------------------------------------------------------------------------------------------

/// One amount as the API server reads it; `Err` when it does not parse.
fn amount(resources: &Value, field: &str, r: Resource) -> Option<Result<Quantity, String>> {
    let text = resources.get(field)?.get(r.name())?;
    Some(
        text.as_str()
            .ok_or_else(|| format!("{text} is not a string"))
            .and_then(|s| Quantity::parse(s).map_err(|e| e.to_string())),
    )
}

thread_local! {
    /// Compare in milli-units whatever the size ([`broken_before`]).
    static EXACT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `requestLimitEnforcedValues`: (request, limit, enforced).
fn enforced_values(req: Quantity, lim: Quantity, enforced: Quantity) -> (i128, i128, i128) {
    if EXACT.get()
        || [req, lim, enforced]
            .iter()
            .all(|q| q.value() <= MAX_MILLI_VALUE)
    {
        (req.milli(), lim.milli(), enforced.milli())
    } else {
        (req.value(), lim.value(), enforced.value())
    }
}

fn enforced_ratio(ratio: f64) -> Quantity {
    #[allow(clippy::cast_possible_truncation)]
    Quantity::from_milli((ratio * 1000.0).round() as i128)
}

/// `minConstraint`, `maxConstraint` and `limitRequestRatioConstraint` of one `LimitRange` item
/// on one (request, limit) pair; `out` gets `"{at}: {rule}"` for each broken.
fn limit_range_rules(
    at: &str,
    r: Resource,
    req: Option<Quantity>,
    lim: Option<Quantity>,
    item: &LimitRangeItem,
    out: &mut Vec<String>,
) {
    if let Some(min) = item.min.get(r) {
        let broken = match req {
            None => true,
            Some(req) => {
                let zero = Quantity::ZERO;
                let (rv, lv, ev) = enforced_values(req, lim.unwrap_or(zero), min);
                rv < ev || (lim.is_some() && lv < ev)
            }
        };
        if broken {
            out.push(format!("{at}: min"));
        }
    }
    if let Some(max) = item.max.get(r) {
        let broken = match lim {
            None => true,
            Some(lim) => {
                let zero = Quantity::ZERO;
                let (rv, lv, ev) = enforced_values(req.unwrap_or(zero), lim, max);
                lv > ev || (req.is_some() && rv > ev)
            }
        };
        if broken {
            out.push(format!("{at}: max"));
        }
    }
    if let Some(ratio) = item.max_limit_request_ratio.get(r) {
        let enforced = enforced_ratio(ratio);
        let broken = match (req, lim) {
            (Some(req), Some(lim)) => {
                let (rv, lv, _) = enforced_values(req, lim, enforced);
                if rv == 0 || lv == 0 {
                    true
                } else {
                    #[allow(clippy::cast_precision_loss)]
                    let (mut observed, mut max) = (lv as f64 / rv as f64, enforced.value() as f64);
                    if enforced.value() <= MAX_MILLI_VALUE {
                        observed *= 1000.0;
                        #[allow(clippy::cast_precision_loss)]
                        {
                            max = enforced.milli() as f64;
                        }
                    }
                    observed > max
                }
            }
            _ => true,
        };
        if broken {
            out.push(format!("{at}: maxLimitRequestRatio"));
        }
    }
}

/// Every rule `pod` breaks, as `"<container>/<resource>: <rule>"` and `"pod/<resource>: <rule>"`.
fn broken_rules(
    pod: &Value,
    container_range: Option<&LimitRangeItem>,
    pod_range: Option<&LimitRangeItem>,
) -> Vec<String> {
    let mut out = Vec::new();
    let containers = pod["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for r in Resource::ALL {
        let mut sum_req: Option<Quantity> = None;
        let mut sum_lim: Option<Quantity> = None;
        for c in &containers {
            let at = format!("{}/{r}", c["name"].as_str().unwrap_or_default());
            let resources = &c["resources"];
            let parsed = |field| match amount(resources, field, r) {
                None => Ok(None),
                Some(Ok(q)) => Ok(Some(q)),
                Some(Err(e)) => Err(e),
            };
            let (req, lim) = match (parsed("requests"), parsed("limits")) {
                (Ok(req), Ok(lim)) => (req.or(lim), lim),
                (req, lim) => {
                    out.push(format!("{at}: unparseable {req:?} {lim:?}"));
                    continue;
                }
            };
            if req.is_some_and(|q| q.milli() < 0) || lim.is_some_and(|q| q.milli() < 0) {
                out.push(format!("{at}: negative"));
            }
            if let (Some(req), Some(lim)) = (req, lim)
                && req > lim
            {
                out.push(format!("{at}: request above limit"));
            }
            if let Some(item) = container_range {
                limit_range_rules(&at, r, req, lim, item, &mut out);
            }
            for (sum, part) in [(&mut sum_req, req), (&mut sum_lim, lim)] {
                if let Some(part) = part {
                    *sum = Some(
                        sum.unwrap_or(Quantity::ZERO)
                            .checked_add(part)
                            .expect("sums of generated amounts fit"),
                    );
                }
            }
        }
        if let Some(item) = pod_range {
            limit_range_rules(&format!("pod/{r}"), r, sum_req, sum_lim, item, &mut out);
        }
    }
    out
}

/// The rules the stored pod already breaks: as the API server compares, and in exact
/// milli-units. A pod whose request is beyond 2^63 milli-units met a rule only through the API
/// server's rounding to whole units when any amount is that large (4001m and 4002m are both
/// 5 then); once the webhook lowers that request the comparison is exact again, and a limit the
/// webhook never touched (4001m under a pod minimum of 4002m) is found short. No patch of
/// requests can keep such a rounding, so those rules count as broken before.
fn broken_before(
    pod: &Value,
    container_range: Option<&LimitRangeItem>,
    pod_range: Option<&LimitRangeItem>,
) -> Vec<String> {
    let mut out = broken_rules(pod, container_range, pod_range);
    EXACT.set(true);
    out.extend(broken_rules(pod, container_range, pod_range));
    EXACT.set(false);
    out
}

// ------------------------------------------------------------------------------------------
// Generators: the pod as the API server stored it, the VPA, the LimitRanges.
// ------------------------------------------------------------------------------------------

/// Amounts in milli-units, from hostile to ordinary: negative, zero, small, typical, huge
/// (beyond what `i64` milli-units hold, up to 10^18 units).
fn any_milli() -> impl Strategy<Value = i128> {
    prop_oneof![
        1 => -5_000_000i128..0,
        1 => Just(0i128),
        4 => 1i128..5_000,
        4 => 1i128..10_000_000_000_000,
        1 => 1_000_000_000_000_000_000i128..1_000_000_000_000_000_000_000,
    ]
}

fn non_negative_milli() -> impl Strategy<Value = i128> {
    any_milli().prop_map(i128::abs)
}

fn quantity(milli: impl Strategy<Value = i128>) -> impl Strategy<Value = Quantity> {
    (milli, any::<bool>()).prop_map(|(m, binary)| {
        if binary {
            Quantity::from_milli_binary(m)
        } else {
            Quantity::from_milli(m)
        }
    })
}

fn resources<S: Strategy<Value = i128>>(milli: fn() -> S) -> impl Strategy<Value = Resources> {
    (
        proptest::option::of(quantity(milli())),
        proptest::option::of(quantity(milli())),
    )
        .prop_map(|(cpu, memory)| Resources { cpu, memory })
}

/// One container's stored (request, limit): non-negative, request <= limit, and a request
/// whenever there is a limit (defaulting).
fn stored_pair() -> impl Strategy<Value = (Option<Quantity>, Option<Quantity>)> {
    (
        proptest::option::of(quantity(non_negative_milli())),
        prop_oneof![
            Just(None::<i128>),
            Just(Some(0i128)),
            non_negative_milli().prop_map(Some)
        ],
    )
        .prop_map(|(req, extra)| match (req, extra) {
            (Some(req), Some(extra)) => (
                Some(req),
                Some(Quantity::from_milli(req.milli() + extra).with_format(req.format())),
            ),
            (req, _) => (req, None),
        })
}

/// A pod of one to three containers `c0`, `c1`, … as JSON.
fn pod_json() -> impl Strategy<Value = Value> {
    proptest::collection::vec((stored_pair(), stored_pair()), 1..=3).prop_map(|containers| {
        let containers: Vec<Value> = containers
            .into_iter()
            .enumerate()
            .map(|(i, (cpu, memory))| {
                let mut requests = Map::new();
                let mut limits = Map::new();
                for (r, (req, lim)) in [(Resource::Cpu, cpu), (Resource::Memory, memory)] {
                    if let Some(q) = req {
                        requests.insert(r.name().into(), q.to_string().into());
                    }
                    if let Some(q) = lim {
                        limits.insert(r.name().into(), q.to_string().into());
                    }
                }
                let mut resources = Map::new();
                if !requests.is_empty() {
                    resources.insert("requests".into(), requests.into());
                }
                if !limits.is_empty() {
                    resources.insert("limits".into(), limits.into());
                }
                json!({"name": format!("c{i}"), "image": "app", "resources": resources})
            })
            .collect();
        json!({"metadata": {"name": "p", "annotations": {}}, "spec": {"containers": containers}})
    })
}

fn any_ratio() -> impl Strategy<Value = Option<f64>> {
    proptest::option::of(prop_oneof![
        Just(1.0),
        Just(1.5),
        Just(2.0),
        Just(3.7),
        Just(10.0)
    ])
}

fn limit_range_item() -> impl Strategy<Value = LimitRangeItem> {
    (
        resources(non_negative_milli),
        resources(non_negative_milli),
        resources(non_negative_milli),
        any_ratio(),
        any_ratio(),
    )
        .prop_map(|(min, max, default, cpu, memory)| LimitRangeItem {
            has_min: !min.is_empty(),
            has_max: !max.is_empty(),
            min,
            max,
            default,
            max_limit_request_ratio: Ratios { cpu, memory },
        })
}

fn policy() -> impl Strategy<Value = ContainerPolicy> {
    (
        prop_oneof![Just("*"), Just("c0"), Just("c1")],
        prop_oneof![9 => Just(ContainerMode::Auto), 1 => Just(ContainerMode::Off)],
        resources(any_milli),
        resources(any_milli),
        prop_oneof![
            Just(None),
            Just(Some(vec![Resource::Cpu])),
            Just(Some(vec![Resource::Memory]))
        ],
        prop_oneof![
            Just(ControlledValues::RequestsAndLimits),
            Just(ControlledValues::RequestsOnly)
        ],
    )
        .prop_map(
            |(name, mode, min_allowed, max_allowed, controlled_resources, controlled_values)| {
                ContainerPolicy {
                    container_name: name.to_owned(),
                    mode,
                    min_allowed,
                    max_allowed,
                    controlled_resources,
                    controlled_values,
                }
            },
        )
}

fn vpa() -> impl Strategy<Value = AdmissionVpa> {
    (
        proptest::collection::vec(policy(), 0..=2),
        proptest::collection::vec(
            (
                resources(any_milli),
                resources(any_milli),
                resources(any_milli),
            ),
            3,
        ),
    )
        .prop_map(|(policies, recs)| AdmissionVpa {
            name: "vpa".to_owned(),
            update_mode: UpdateMode::Recreate,
            policies,
            recommendation: Some(
                recs.into_iter()
                    .enumerate()
                    .map(
                        |(i, (target, lower_bound, upper_bound))| ContainerRecommendation {
                            container: format!("c{i}"),
                            target,
                            lower_bound,
                            upper_bound,
                        },
                    )
                    .collect(),
            ),
            boosts: super::StartupBoosts::default(),
        })
}

/// `ops` applied to `pod` as the API server applies a JSON Patch.
fn apply(pod: &Value, ops: &[super::JsonPatchOp]) -> Value {
    let patch: json_patch::Patch =
        serde_json::from_value(serde_json::to_value(ops).expect("ops serialize"))
            .expect("a JSON Patch");
    let mut out = pod.clone();
    json_patch::patch(&mut out, &patch).expect("the patch applies");
    out
}

fn newly_broken(before: &[String], after: &[String]) -> Vec<String> {
    after
        .iter()
        .filter(|rule| !before.contains(rule))
        .cloned()
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The webhook's patch and the in-place resize break no rule the pod met (module docs).
    #[test]
    fn patched_and_resized_pods_pass_the_api_servers_validation(
        pod in pod_json(),
        vpa in vpa(),
        container_range in proptest::option::of(limit_range_item()),
        pod_range in proptest::option::of(limit_range_item()),
    ) {
        let k8s_pod: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(pod.clone()).expect("a pod");
        let admission = admission_pod(&k8s_pod).expect("stored amounts parse");
        let (cr, pr) = (container_range.as_ref(), pod_range.as_ref());
        let stored = broken_rules(&pod, cr, pr);
        prop_assert!(
            !stored.iter().any(|r| r.contains("negative") || r.contains("above limit")),
            "the generator makes stored pods: {stored:?}"
        );
        let before = broken_before(&pod, cr, pr);

        let patched = apply(&pod, &admission_patch(&admission, &vpa, cr, pr).ops);
        let fresh = newly_broken(&before, &broken_rules(&patched, cr, pr));
        prop_assert!(fresh.is_empty(), "the webhook's patch breaks {fresh:?}: {patched}");

        let resized = apply(&pod, &resize_patch(&admission, &vpa, cr, pr));
        let fresh = newly_broken(&before, &broken_rules(&resized, cr, pr));
        prop_assert!(fresh.is_empty(), "the resize breaks {fresh:?}: {resized}");
    }
}

fn one_container_vpa(min_cpu: &str, max_cpu: &str, target_cpu: &str) -> AdmissionVpa {
    let q = |s: &str| Some(Quantity::parse(s).expect("quantity"));
    AdmissionVpa {
        name: "vpa".to_owned(),
        update_mode: UpdateMode::Recreate,
        policies: vec![ContainerPolicy {
            container_name: "*".to_owned(),
            min_allowed: Resources {
                cpu: q(min_cpu),
                memory: None,
            },
            max_allowed: Resources {
                cpu: q(max_cpu),
                memory: None,
            },
            ..ContainerPolicy::default()
        }],
        recommendation: Some(vec![ContainerRecommendation {
            container: "c0".to_owned(),
            target: Resources {
                cpu: q(target_cpu),
                memory: None,
            },
            ..ContainerRecommendation::default()
        }]),
        boosts: super::StartupBoosts::default(),
    }
}

/// The case of issue #28, by hand: `maxAllowed: {cpu: "-1"}` capped every request to -1, which
/// the API server refused. A negative bound is no bound now.
#[test]
fn a_negative_max_allowed_never_becomes_a_negative_request() {
    let pod = json!({"metadata": {"annotations": {}}, "spec": {"containers": [
        {"name": "c0", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}}]}});
    let k8s_pod: k8s_openapi::api::core::v1::Pod =
        serde_json::from_value(pod.clone()).expect("a pod");
    let admission = admission_pod(&k8s_pod).expect("amounts parse");
    let resources = |vpa: &AdmissionVpa| {
        let patched = apply(&pod, &admission_patch(&admission, vpa, None, None).ops);
        assert!(broken_rules(&patched, None, None).is_empty(), "{patched}");
        patched["spec"]["containers"][0]["resources"].clone()
    };
    let got = resources(&one_container_vpa("2", "-1", "250m"));
    assert_eq!(got["requests"]["cpu"], "2");
    assert_eq!(got["limits"]["cpu"], "4");
    // A huge minAllowed: the limit that keeps the proportion (2E cores) is beyond what upstream
    // writes (it caps limits at 2^63-1 millicores), below the request: the container keeps its
    // values rather than getting a request above its limit.
    let got = resources(&one_container_vpa("1E", "-1", "250m"));
    assert_eq!(got["requests"]["cpu"], "100m");
    assert_eq!(got["limits"]["cpu"], "200m");
}

/// Found by the property test: a pod LimitRange `min` of 4002m, a container the VPA gives no CPU
/// target (it keeps 4001m) and one it gives a target of zero. Scaling the recommended part
/// cannot lift a zero, so the pod would have come out at 4001m and been refused; the recommended
/// container keeps its request instead, and a scalable recommendation is raised by what the kept
/// container does not already cover.
#[test]
fn a_pod_minimum_counts_the_containers_that_keep_their_requests() {
    let pod = json!({"metadata": {"annotations": {}}, "spec": {"containers": [
        {"name": "c0", "resources": {"requests": {"cpu": "4001m"}}},
        {"name": "c1", "resources": {"requests": {"cpu": "3"}}}]}});
    let k8s_pod: k8s_openapi::api::core::v1::Pod =
        serde_json::from_value(pod.clone()).expect("a pod");
    let admission = admission_pod(&k8s_pod).expect("amounts parse");
    let range = LimitRangeItem {
        min: Resources {
            cpu: Some(Quantity::parse("4002m").expect("quantity")),
            memory: None,
        },
        has_min: true,
        ..LimitRangeItem::default()
    };
    let vpa_for_c1 = |target: &str| {
        let mut vpa = one_container_vpa("0", "0", target);
        vpa.policies.clear();
        if let Some(recs) = vpa.recommendation.as_mut() {
            recs[0].container = "c1".to_owned();
        }
        vpa
    };
    let c1_request = |vpa: &AdmissionVpa| {
        let patched = apply(
            &pod,
            &admission_patch(&admission, vpa, None, Some(&range)).ops,
        );
        let broken = broken_rules(&patched, None, Some(&range));
        assert!(broken.is_empty(), "{broken:?} {patched}");
        patched["spec"]["containers"][1]["resources"]["requests"]["cpu"].clone()
    };
    assert_eq!(c1_request(&vpa_for_c1("0")), "3");
    // 500m recommended, 4001m kept: the pod needs 1m more, so 500m stays (the floor is met).
    assert_eq!(c1_request(&vpa_for_c1("500m")), "500m");
}
