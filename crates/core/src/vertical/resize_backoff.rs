//! `updateMode: InPlace` (VPA AEP-8818): whether a pod is resized in place now, waits for the
//! kubelet, or keeps its requests because its node could not fit the same values before; and the
//! VPA condition that says which pods keep their requests, and why.
//!
//! Semantics (AEP-8818 "Complete Flow Description"; upstream `CanInPlaceUpdate`,
//! `UpdatePriorityCalculator.AddPod` and `RunOnce`):
//! * The updater remembers, per pod and in memory only, the requests of a resize the node could
//!   not fit: the pod's spec requests when the kubelet reports the resize `Infeasible`
//!   (`PodResizePending`, reason `Infeasible`), or the values of a resize request the API server
//!   refused with a `NodeCapacity` cause (Kubernetes 1.36+ checks at admission).
//! * With values remembered (or the kubelet reporting `Infeasible`), a pod is resized again only
//!   when the new proposal asks less of some resource of some container than those values;
//!   a proposal that asks at least as much everywhere is held back and not sent.
//! * A resize the kubelet reports `Deferred`, `InProgress` or in `Error` is waited on: no new
//!   request, no eviction and no timeout (unlike `InPlaceOrRecreate`).
//! * A resize request the API server accepts forgets the remembered values.
//! * Nothing decided here ever evicts; the replica-group budget of [`super::eviction`] still
//!   paces resizes, PodDisruptionBudgets do not apply (no eviction is made).
//!
//! One difference from upstream's alpha: upstream compares the VPA's raw targets with the
//! remembered ones; this compares the requests the updater would write (the recommendation
//! processed exactly as the webhook processes it: container policies and LimitRanges), which
//! is what the node is asked to fit.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::priority::{PodSnapshot, ResizeStatus};
use super::resources::{ContainerRecommendation, RequestsByContainer, recommendation_for};
use crate::api::vpa::VerticalPodAutoscalerCondition;
use crate::printable;

/// The VPA condition the updater sets for an `InPlace` VPA: `True` while some pods keep their
/// requests because a resize cannot be made or waits on the kubelet.
pub const CONDITION: &str = "InPlaceResizeHeld";

/// Pods named in the condition's message; the rest are counted.
const NAMED_PODS: usize = 5;

/// Longest kubelet message quoted (conditions are read by people; the kubelet's are short).
const MESSAGE_CHARS: usize = 200;

/// What to do with a pod of an `InPlace` VPA whose requests differ from the proposal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InPlaceStep {
    /// Ask for a resize to these requests.
    Resize(RequestsByContainer),
    /// Keep the requests: the node could not fit `infeasible`, and the proposal asks no less.
    HeldBack {
        /// The values the node could not fit (to remember).
        infeasible: RequestsByContainer,
        /// Why, as a sentence.
        why: String,
    },
    /// A resize is pending or under way on the node: wait for the kubelet.
    Waiting(String),
}

/// The requests a resize would write for `pod`: each container's (processed) target, for the
/// containers that have one.
pub fn proposed_requests(
    pod: &PodSnapshot,
    recommendations: &[ContainerRecommendation],
) -> RequestsByContainer {
    pod.containers
        .iter()
        .chain(&pod.init_containers)
        .filter_map(|c| {
            let rec = recommendation_for(recommendations, &c.name)?;
            (!rec.target.is_empty()).then(|| (c.name.clone(), rec.target))
        })
        .collect()
}

/// True when `proposed` asks less of some resource of some container than `infeasible`
/// (upstream `hasLowerResourceRecommendation`): only then may the node fit it.
pub fn asks_less(proposed: &RequestsByContainer, infeasible: &RequestsByContainer) -> bool {
    proposed.iter().any(|(name, new)| {
        infeasible.get(name).is_some_and(|old| {
            new.iter()
                .any(|(r, amount)| old.get(r).is_some_and(|o| amount < o))
        })
    })
}

/// `container: cpu 2, memory 1Gi; …`, for messages.
pub fn describe(values: &RequestsByContainer) -> String {
    values
        .iter()
        .map(|(name, r)| {
            let amounts: Vec<String> = r.iter().map(|(res, q)| format!("{res} {q}")).collect();
            format!("{name}: {}", amounts.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn kubelet_says(pod: &PodSnapshot) -> String {
    match &pod.resize_message {
        Some(m) => {
            let cut: String = m.chars().take(MESSAGE_CHARS).collect();
            format!(" (kubelet: {cut})")
        }
        None => String::new(),
    }
}

/// The values the pod's node is known not to fit: its spec requests while the kubelet reports
/// the resize `Infeasible`, else what the updater remembers.
pub fn known_infeasible(pod: &PodSnapshot) -> Option<RequestsByContainer> {
    if pod.resize == ResizeStatus::Infeasible {
        Some(pod.desired_requests.clone())
    } else {
        pod.infeasible.clone()
    }
}

/// The `InPlace` step for a pod whose requests differ from `proposed` (the caller checked the
/// update priority and the group budget separately).
pub fn in_place_step(pod: &PodSnapshot, proposed: &RequestsByContainer) -> InPlaceStep {
    if let Some(infeasible) = known_infeasible(pod)
        && !asks_less(proposed, &infeasible)
    {
        let why = format!(
            "the node cannot fit {}{}; not retried until the recommendation asks for less",
            describe(&infeasible),
            kubelet_says(pod)
        );
        return InPlaceStep::HeldBack { infeasible, why };
    }
    let waiting = |what: &str| InPlaceStep::Waiting(format!("{what}{}", kubelet_says(pod)));
    match pod.resize {
        // A lower proposal replaces the infeasible resize (upstream retries it the same way).
        ResizeStatus::None | ResizeStatus::Infeasible => InPlaceStep::Resize(proposed.clone()),
        ResizeStatus::Deferred => waiting("resize deferred by the kubelet; waiting"),
        ResizeStatus::InProgress => waiting("resize in progress; waiting"),
        ResizeStatus::Error => waiting("the kubelet reported a resize error; waiting"),
        ResizeStatus::PendingOther | ResizeStatus::InProgressOther => {
            waiting("resize pending on the node; waiting")
        }
    }
}

/// One pod that keeps its requests, for the condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldPod<'a> {
    /// Pod name.
    pub pod: &'a str,
    /// True when the node cannot fit the resize (else the kubelet holds it).
    pub infeasible: bool,
    /// Why, as a sentence.
    pub why: &'a str,
}

/// The [`CONDITION`] to set given the pods held this loop, keeping `previous`'s transition time
/// while the status stays. `None` when nothing is held and the VPA has no such condition (so
/// VPAs that never had a held pod get no condition at all).
pub fn held_condition(
    previous: Option<&VerticalPodAutoscalerCondition>,
    held: &[HeldPod<'_>],
    now: Timestamp,
) -> Option<VerticalPodAutoscalerCondition> {
    if held.is_empty() && previous.is_none() {
        return None;
    }
    let status = if held.is_empty() { "False" } else { "True" };
    let (reason, message) = if held.is_empty() {
        (
            "NoneHeld",
            "every pod's resize was made or needs none".to_owned(),
        )
    } else {
        let infeasible = held.iter().filter(|h| h.infeasible).count();
        let reason = if infeasible > 0 {
            "Infeasible"
        } else {
            "Waiting"
        };
        let mut parts: Vec<String> = held
            .iter()
            .take(NAMED_PODS)
            .map(|h| format!("{}: {}", h.pod, h.why))
            .collect();
        if held.len() > NAMED_PODS {
            parts.push(format!("and {} more", held.len() - NAMED_PODS));
        }
        let message = format!(
            "{} pod(s) keep their requests ({infeasible} the node cannot fit); never evicted in mode InPlace. {}",
            held.len(),
            parts.join(". ")
        );
        (reason, message)
    };
    let last_transition_time = previous
        .filter(|p| p.status == status)
        .and_then(|p| p.last_transition_time.clone())
        .or(Some(Time(now)));
    Some(VerticalPodAutoscalerCondition {
        type_: CONDITION.to_owned(),
        status: status.to_owned(),
        last_transition_time,
        reason: Some(reason.to_owned()),
        message: Some(printable::message(
            &message,
            printable::MAX_CONDITION_MESSAGE_BYTES,
        )),
        observed_generation: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vertical::priority::tests::t0;
    use crate::vertical::resources::Resources;

    fn values(cpu: i64, mem: i64) -> RequestsByContainer {
        RequestsByContainer::from([("app".to_owned(), Resources::new(cpu, mem))])
    }

    fn pod() -> PodSnapshot {
        PodSnapshot::test("web-1").container("app", Resources::new(100, 1 << 20))
    }

    // AEP-8818 "Complete Flow Description", the stored-attempt rows.
    #[test]
    fn remembered_values_hold_back_proposals_that_ask_no_less() {
        let mut p = pod();
        p.infeasible = Some(values(20_000, 1 << 30));
        // Same values: held.
        assert!(matches!(
            in_place_step(&p, &values(20_000, 1 << 30)),
            InPlaceStep::HeldBack { .. }
        ));
        // More of everything: held.
        assert!(matches!(
            in_place_step(&p, &values(30_000, 2 << 30)),
            InPlaceStep::HeldBack { .. }
        ));
        // Less CPU, more memory: one resource lower, so it may fit: tried.
        assert_eq!(
            in_place_step(&p, &values(10_000, 2 << 30)),
            InPlaceStep::Resize(values(10_000, 2 << 30))
        );
        // Nothing remembered: tried.
        p.infeasible = None;
        assert_eq!(
            in_place_step(&p, &values(20_000, 1 << 30)),
            InPlaceStep::Resize(values(20_000, 1 << 30))
        );
    }

    #[test]
    fn kubelet_infeasible_holds_back_the_spec_values_and_says_why() {
        let mut p = pod().resize(ResizeStatus::Infeasible);
        p.desired_requests = values(20_000, 1 << 20);
        p.resize_message =
            Some("Node didn't have enough capacity: cpu, requested: 20000, capacity: 7800".into());
        match in_place_step(&p, &values(20_000, 1 << 20)) {
            InPlaceStep::HeldBack { infeasible, why } => {
                assert_eq!(infeasible, values(20_000, 1 << 20));
                assert!(why.contains("app: cpu 20"), "{why}");
                assert!(why.contains("capacity: 7800"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        // A lower proposal replaces the infeasible resize.
        assert_eq!(
            in_place_step(&p, &values(4_000, 1 << 20)),
            InPlaceStep::Resize(values(4_000, 1 << 20))
        );
    }

    // AEP-8818: Deferred, InProgress and Error are waited on, whatever their age.
    #[test]
    fn pending_resizes_are_waited_on() {
        for state in [
            ResizeStatus::Deferred,
            ResizeStatus::InProgress,
            ResizeStatus::Error,
            ResizeStatus::PendingOther,
            ResizeStatus::InProgressOther,
        ] {
            let mut p = pod().resize(state);
            p.last_in_place_attempt = Some(t0() - jiff::SignedDuration::from_hours(48));
            assert!(
                matches!(
                    in_place_step(&p, &values(200, 1 << 20)),
                    InPlaceStep::Waiting(_)
                ),
                "{state:?}"
            );
        }
    }

    #[test]
    fn asks_less_looks_at_common_containers_and_resources() {
        let other = RequestsByContainer::from([("side".to_owned(), Resources::new(1, 1))]);
        assert!(!asks_less(&other, &values(20_000, 1 << 30)));
        let cpu_only = RequestsByContainer::from([("app".to_owned(), Resources::cpu(100))]);
        assert!(asks_less(&cpu_only, &values(20_000, 1 << 30)));
        assert!(!asks_less(
            &cpu_only,
            &RequestsByContainer::from([(
                "app".to_owned(),
                Resources {
                    cpu: None,
                    memory: Resources::new(0, 1).memory
                }
            )])
        ));
    }

    #[test]
    fn condition_names_held_pods_and_clears_once_set() {
        assert_eq!(held_condition(None, &[], t0()), None);
        let held = [
            HeldPod {
                pod: "web-1",
                infeasible: true,
                why: "the node cannot fit app: cpu 20",
            },
            HeldPod {
                pod: "web-2",
                infeasible: false,
                why: "resize deferred by the kubelet; waiting",
            },
        ];
        let on = held_condition(None, &held, t0()).unwrap();
        assert_eq!(on.status, "True");
        assert_eq!(on.reason.as_deref(), Some("Infeasible"));
        let message = on.message.clone().unwrap();
        assert!(message.starts_with("2 pod(s) keep their requests (1 the node cannot fit)"));
        assert!(
            message.contains("web-1: the node cannot fit app: cpu 20"),
            "{message}"
        );
        // The transition time stays while the status does.
        let later = t0() + jiff::SignedDuration::from_mins(5);
        let again = held_condition(Some(&on), &held[1..], later).unwrap();
        assert_eq!(again.last_transition_time, on.last_transition_time);
        assert_eq!(again.reason.as_deref(), Some("Waiting"));
        let off = held_condition(Some(&again), &[], later).unwrap();
        assert_eq!(off.status, "False");
        assert_eq!(off.last_transition_time, Some(Time(later)));
    }

    #[test]
    fn long_lists_are_counted() {
        let names: Vec<String> = (0..8).map(|i| format!("p{i}")).collect();
        let held: Vec<HeldPod<'_>> = names
            .iter()
            .map(|n| HeldPod {
                pod: n,
                infeasible: true,
                why: "x",
            })
            .collect();
        let c = held_condition(None, &held, t0()).unwrap();
        assert!(c.message.unwrap().ends_with("and 3 more"));
    }
}
