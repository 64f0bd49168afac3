//! The recommender's loop in joint mode ([`super::joint_sizing`]): the joint request replaces
//! the CPU recommendation of a joint VPA, split by the containers' shares; the `JointSizing`
//! condition; `NoHorizontalAutoscaler`; the total usage persisted and restored.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;

use super::*;
use crate::vertical::controlling::NoOwners;
use crate::vertical::joint::{JointReason, JointSettings};
use crate::vertical::joint_sizing::{JointConfig, TOTAL_USAGE_ANNOTATION, UtilizationTarget};
use crate::vertical::resources::Resource;

/// A VPA on Deployment `web` selecting `app=web`, with the horizontal autoscaler the service
/// found (if any).
struct Fake {
    vpa: VerticalPodAutoscaler,
    joint: Option<HorizontalSettings>,
}

impl ServedVpa for Fake {
    fn object(&self) -> &VerticalPodAutoscaler {
        &self.vpa
    }
    fn target_error(&self) -> Option<&str> {
        None
    }
    fn has_pod_selector(&self) -> bool {
        true
    }
    fn selects(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        labels
            .and_then(|l| l.get("app"))
            .is_some_and(|v| v == "web")
    }
    fn joint(&self) -> Option<&HorizontalSettings> {
        self.joint.as_ref()
    }
}

impl Fake {
    fn new(annotations: &serde_json::Value, policies: &serde_json::Value) -> Self {
        let vpa = serde_json::from_value(json!({
            "apiVersion": "autoscaling.k8s.io/v1",
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "ns", "annotations": annotations},
            "spec": {
                "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "resourcePolicy": {"containerPolicies": policies},
            },
        }))
        .expect("a VPA");
        Self { vpa, joint: None }
    }

    fn joint() -> Self {
        Self::new(
            &json!({"plimsoll.dev/horizontal-aware": "true"}),
            &json!([]),
        )
    }

    /// An HPA+ on CPU at 60 % with replicas 2–10.
    fn with_hpa(mut self) -> Self {
        self.joint = Some(HorizontalSettings {
            autoscaler: "HorizontalPodAutoscalerPlus/web".into(),
            min_replicas: 2,
            max_replicas: 10,
            cpu: Some(UtilizationTarget {
                target_utilization: 60,
                container: None,
            }),
            memory: None,
        });
        self
    }
}

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().expect("ts")
}

/// A pod of Deployment `web` with containers `(name, cpu request)`.
fn pod(name: &str, containers: &[(&str, &str)]) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            labels: Some(BTreeMap::from([("app".into(), "web".into())])),
            owner_references: Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "Deployment".into(),
                    name: "web".into(),
                    uid: "uid-web".into(),
                    controller: Some(true),
                    block_owner_deletion: None,
                },
            ]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: containers
                .iter()
                .map(|(c, cpu)| Container {
                    name: (*c).into(),
                    resources: Some(ResourceRequirements {
                        requests: Some(BTreeMap::from([
                            ("cpu".into(), K8sQuantity((*cpu).into())),
                            ("memory".into(), K8sQuantity("100Mi".into())),
                        ])),
                        ..ResourceRequirements::default()
                    }),
                    ..Container::default()
                })
                .collect(),
            ..PodSpec::default()
        }),
        status: None,
    })
}

/// Usage of `pod`: `(container, millicores)`, 200Mi each.
fn usage(pod: &str, containers: &[(&str, i64)], at: Timestamp) -> PodUsage {
    PodUsage {
        namespace: "ns".into(),
        pod: pod.into(),
        time: at,
        containers: containers
            .iter()
            .map(|(c, m)| ContainerUsage {
                container: (*c).into(),
                cpu: Some(Quantity::from_milli(i128::from(*m))),
                memory: Some(Quantity::parse("200Mi").expect("q")),
            })
            .collect(),
    }
}

/// A recommender whose "day" is 10 minutes of 1-minute buckets.
fn recommender() -> Recommender {
    let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
    r.set_joint(JointConfig {
        settings: JointSettings {
            learning_seconds: 600,
            window_seconds: 3_600,
            ..JointSettings::default()
        },
        bucket_seconds: 60,
    });
    r
}

/// Per minute for 20 minutes, the total CPU of the 3 pods: 1200m for 10 minutes then 3000m,
/// split evenly, on `containers` (weights of the split inside a pod); returns the last loop.
fn run(
    r: &mut Recommender,
    vpa: &Fake,
    pods: &[Arc<Pod>],
    containers: &[(&str, i64)],
) -> LoopOutcome {
    let weight: i64 = containers.iter().map(|(_, w)| w).sum();
    let mut last = LoopOutcome::default();
    for minute in 0..20 {
        let at = t0() + SignedDuration::from_mins(minute);
        let total = if minute < 10 { 1_200 } else { 3_000 };
        let samples: Vec<PodUsage> = pods
            .iter()
            .map(|p| {
                let per_pod = total / 3;
                let split: Vec<(&str, i64)> = containers
                    .iter()
                    .map(|(c, w)| (*c, per_pod * w / weight))
                    .collect();
                usage(p.metadata.name.as_deref().unwrap_or_default(), &split, at)
            })
            .collect();
        last = r.run_loop(
            std::slice::from_ref(vpa),
            pods,
            &NoOwners,
            &samples,
            &[],
            at,
        );
    }
    last
}

fn cpu(report: &RecommendationReport) -> (i64, i64, i64) {
    let get = |a: &crate::vertical::resources::ResourceAmounts| a[&Resource::Cpu];
    (
        get(&report.capped.lower_bound),
        get(&report.capped.target),
        get(&report.capped.upper_bound),
    )
}

fn joint_condition(outcome: &LoopOutcome) -> Option<(String, String, String)> {
    outcome.updates.iter().find_map(|u| {
        u.status.conditions.iter().flatten().find_map(|c| {
            (c.type_ == "JointSizing").then(|| {
                (
                    c.status.clone(),
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default(),
                )
            })
        })
    })
}

fn three_pods(containers: &[(&str, &str)]) -> Vec<Arc<Pod>> {
    ["web-1", "web-2", "web-3"]
        .iter()
        .map(|n| pod(n, containers))
        .collect()
}

#[test]
fn the_joint_request_replaces_the_cpu_target_with_bounds_equal_to_it() {
    let pods = three_pods(&[("app", "300m")]);
    let mut joint = recommender();
    let out = run(&mut joint, &Fake::joint().with_hpa(), &pods, &[("app", 1)]);
    let rec = &out.recommendations[0];
    let request = rec.joint.as_ref().expect("sized jointly");
    // Peak 3000m within ⌊0.8 · 10⌋ = 8 pods at 60 % needs ≥ 625m; trough 1200m on 2 pods
    // allows ≤ 1000m; the geometric mean is 790m, and 300m is far below the peak's bound.
    assert_eq!(request.reason, JointReason::BothBoundsMet);
    assert_eq!(request.lower_bound, Some(625));
    assert_eq!(request.upper_bound, Some(1_000));
    assert_eq!(request.request, Some(790));
    assert_eq!(cpu(&rec.containers[0]), (790, 790, 790));
    let (status, reason, message) = joint_condition(&out).expect("the condition");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "BothBoundsMet")
    );
    assert!(
        message.contains("HorizontalPodAutoscalerPlus/web"),
        "{message}"
    );
    assert!(
        !out.updates[0]
            .status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "ConflictingAutoscaler")
    );

    // Memory keeps the normal recommendation: the same as a VPA without the annotation.
    let mut plain = recommender();
    let normal = run(
        &mut plain,
        &Fake::new(&json!({}), &json!([])),
        &pods,
        &[("app", 1)],
    );
    let memory =
        |o: &LoopOutcome| o.recommendations[0].containers[0].capped.target[&Resource::Memory];
    assert_eq!(memory(&out), memory(&normal));
    assert_ne!(cpu(&normal.recommendations[0].containers[0]).1, 790);
    assert!(joint_condition(&normal).is_none());
    assert!(plain.total_usage(&("ns".into(), "web".into())).is_none());
}

#[test]
fn a_peak_no_request_can_serve_with_the_trough_is_preferred_and_said() {
    let pods = three_pods(&[("app", "300m")]);
    let mut r = recommender();
    let mut hpa = Fake::joint().with_hpa();
    // With minReplicas 4 the trough allows ≤ 500m, below the peak's 625m.
    if let Some(h) = hpa.joint.as_mut() {
        h.min_replicas = 4;
    }
    let out = run(&mut r, &hpa, &pods, &[("app", 1)]);
    let (status, reason, message) = joint_condition(&out).expect("the condition");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "PeakPreferred")
    );
    assert!(message.contains("sized for the peak (625m)"), "{message}");
    assert_eq!(cpu(&out.recommendations[0].containers[0]).1, 625);
}

#[test]
fn the_request_is_split_by_the_normal_targets_and_uncontrolled_containers_keep_theirs() {
    // `app` and `cache` are controlled (usage 3:1); `log` keeps its 100m (memory only).
    let policies = json!([{"containerName": "log", "controlledResources": ["memory"]}]);
    let vpa = Fake {
        joint: Fake::joint().with_hpa().joint,
        ..Fake::new(&json!({"plimsoll.dev/horizontal-aware": "true"}), &policies)
    };
    let pods = three_pods(&[("app", "150m"), ("cache", "50m"), ("log", "100m")]);
    let mut r = recommender();
    let out = run(&mut r, &vpa, &pods, &[("app", 3), ("cache", 1), ("log", 0)]);
    let rec = &out.recommendations[0];
    let request = rec
        .joint
        .as_ref()
        .and_then(|j| j.request)
        .expect("a request");
    let by_name = |n: &str| rec.containers.iter().find(|c| c.name == n).expect(n);
    let (app, cache) = (cpu(by_name("app")), cpu(by_name("cache")));
    assert_eq!(app.0, app.2, "bounds equal the target");
    assert_eq!(
        app.1 + cache.1 + 100,
        request,
        "the shares and log's 100m make the pod"
    );
    let ratio = app.1 as f64 / cache.1 as f64;
    let normal = by_name("app").uncapped_target[&Resource::Cpu];
    assert!(normal == app.1, "the uncapped target is the share too");
    assert!((2.5..=3.5).contains(&ratio), "{app:?} {cache:?}");
    assert!(!by_name("log").capped.target.contains_key(&Resource::Cpu));
}

#[test]
fn without_a_horizontal_autoscaler_the_normal_recommendation_applies_and_says_why() {
    let pods = three_pods(&[("app", "300m")]);
    let mut joint = recommender();
    let out = run(&mut joint, &Fake::joint(), &pods, &[("app", 1)]);
    let (status, reason, message) = joint_condition(&out).expect("the condition");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "NoHorizontalAutoscaler")
    );
    assert!(message.contains("Deployment/web"), "{message}");
    assert!(out.recommendations[0].joint.is_none());
    let mut plain = recommender();
    let normal = run(
        &mut plain,
        &Fake::new(&json!({}), &json!([])),
        &pods,
        &[("app", 1)],
    );
    assert_eq!(
        out.recommendations[0].containers,
        normal.recommendations[0].containers
    );
    // The total is kept anyway, for when an autoscaler appears.
    let key = ("ns".to_owned(), "web".to_owned());
    assert_eq!(
        joint.total_usage(&key).map(|j| j.usage.buckets().len()),
        Some(20)
    );
}

#[test]
fn the_total_usage_is_persisted_every_interval_and_restored_on_first_sight() {
    let pods = three_pods(&[("app", "300m")]);
    let mut r = recommender();
    let vpa = Fake::joint().with_hpa();
    run(&mut r, &vpa, &pods, &[("app", 1)]);
    let key = ("ns".to_owned(), "web".to_owned());
    let last = t0() + SignedDuration::from_mins(19);
    // First seen at t0: nothing due before 30 minutes have passed, everything changed at once.
    assert!(r.totals_due(last, SignedDuration::from_mins(30)).is_empty());
    let due = r.totals_due(last, SignedDuration::ZERO);
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].0, key);
    assert_eq!(r.totals_due(last, SignedDuration::from_mins(15)), due);
    r.total_persisted(&key, last);
    assert!(r.totals_due(last, SignedDuration::ZERO).is_empty());

    // A new process (or leader) reads the annotation back on first sight.
    let mut annotated = Fake::joint().with_hpa();
    annotated
        .vpa
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(TOTAL_USAGE_ANNOTATION.into(), due[0].1.clone());
    let mut fresh = recommender();
    let out = fresh.run_loop(
        std::slice::from_ref(&annotated),
        &pods,
        &NoOwners,
        &[],
        &[],
        last,
    );
    assert_eq!(
        fresh.total_usage(&key).map(|j| &j.usage),
        r.total_usage(&key).map(|j| &j.usage)
    );
    // Sized from the restored day at once, not learning again.
    let reason = out.recommendations[0].joint.as_ref().map(|j| j.reason);
    assert_eq!(reason, Some(JointReason::BothBoundsMet));
}

/// `pod` after its container `app` was OOM-killed at `at` (request 100Mi).
fn oom_killed(pod: &Arc<Pod>, at: Timestamp) -> Arc<Pod> {
    let mut pod = (**pod).clone();
    pod.status = Some(
        serde_json::from_value(json!({"containerStatuses": [{
            "name": "app", "image": "app", "imageID": "", "ready": true, "restartCount": 1,
            "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                "finishedAt": at.to_string()}},
        }]}))
        .expect("a pod status"),
    );
    Arc::new(pod)
}

/// The memory target after one minute of 200Mi usage and an OOM kill of the 100Mi request.
fn memory_after_oom(r: &mut Recommender, vpa: &Fake) -> i64 {
    let pods = [pod("web-1", &[("app", "100m")])];
    r.run_loop(
        std::slice::from_ref(vpa),
        &pods,
        &NoOwners,
        &[usage("web-1", &[("app", 100)], t0())],
        &[],
        t0(),
    );
    let later = t0() + SignedDuration::from_mins(1);
    let killed = [oom_killed(&pods[0], later)];
    let outcome = r.run_loop(
        std::slice::from_ref(vpa),
        &killed,
        &NoOwners,
        &[],
        &[],
        later,
    );
    assert_eq!(outcome.ooms, 1);
    outcome.recommendations[0].containers[0].capped.target[&Resource::Memory]
}

#[test]
fn a_vpa_s_own_oom_bump_ratio_replaces_the_flag_unless_the_operator_turned_it_off() {
    const MI: i64 = 1024 * 1024;
    let plain = Fake::new(&json!({}), &json!([]));
    let own = Fake::new(
        &json!({}),
        &json!([{"containerName": "*", "oomBumpUpRatio": "6", "oomMinBumpUp": "0"}]),
    );
    let flag = memory_after_oom(&mut recommender(), &plain);
    let ratio = memory_after_oom(&mut recommender(), &own);
    // Flags: max(200Mi peak + 100Mi, 200Mi × 1.2) = 300Mi; the VPA's: 200Mi × 6 = 1200Mi, each
    // with the estimator's margin and bucket rounding.
    assert!((300 * MI..400 * MI).contains(&flag), "{flag}");
    assert!((1200 * MI..1500 * MI).contains(&ratio), "{ratio}");
    let mut off = recommender();
    off.set_per_vpa(false);
    assert_eq!(memory_after_oom(&mut off, &own), flag);
}

/// Node `small` with `cpu` and 4Gi allocatable.
fn small_node(cpu: &str) -> k8s_openapi::api::core::v1::Node {
    serde_json::from_value(json!({
        "metadata": {"name": "small"},
        "status": {"allocatable": {"cpu": cpu, "memory": "4Gi"}},
    }))
    .expect("a node")
}

#[test]
fn a_recommendation_above_the_largest_node_is_capped_and_says_so() {
    let node = small_node("1");
    let vpa = Fake::new(&json!({}), &json!([]));
    let pods = three_pods(&[("app", "100m")]);
    let mut r = recommender();
    let uncapped = run(&mut r, &vpa, &pods, &[("app", 1)]);
    assert!(cpu(&uncapped.recommendations[0].containers[0]).1 > 900);
    let mut r = recommender();
    r.set_node_fit(Some(NodeFitConfig {
        headroom_percent: 10,
    }));
    r.set_largest_node(LargestNode::of(&[node]));
    let capped = run(&mut r, &vpa, &pods, &[("app", 1)]);
    let report = &capped.recommendations[0].containers[0];
    assert_eq!(cpu(report).1, 900);
    assert!(cpu(report).2 <= 900);
    assert_eq!(report.capped_by, ["cpu capped to fit the largest node"]);
    let condition = capped
        .updates
        .iter()
        .flat_map(|u| u.status.conditions.iter().flatten())
        .find(|c| c.type_ == crate::vertical::recommendation::NODE_CAPPED_CONDITION)
        .expect("the condition");
    assert_eq!(condition.status, "True");
    assert!(
        condition
            .message
            .as_deref()
            .is_some_and(|m| m.contains("to 900m to fit the largest node small")),
        "{condition:?}"
    );
}

#[test]
fn the_joint_request_is_capped_to_the_largest_node_too() {
    let node = small_node("500m");
    let vpa = Fake::joint().with_hpa();
    let pods = three_pods(&[("app", "100m")]);
    let uncapped = run(&mut recommender(), &vpa, &pods, &[("app", 1)]);
    assert!(uncapped.recommendations[0].joint.is_some(), "sized jointly");
    assert!(cpu(&uncapped.recommendations[0].containers[0]).1 > 500);
    let mut r = recommender();
    r.set_node_fit(Some(NodeFitConfig {
        headroom_percent: 0,
    }));
    r.set_largest_node(LargestNode::of(&[node]));
    let capped = run(&mut r, &vpa, &pods, &[("app", 1)]);
    assert!(
        capped.recommendations[0].joint.is_some(),
        "still sized jointly"
    );
    let (lower, target, upper) = cpu(&capped.recommendations[0].containers[0]);
    assert_eq!(target, 500);
    assert!(lower <= target && upper <= 500, "{lower} {target} {upper}");
}

/// The pods each VPA learns from are filed once per loop: for VPAs on two Deployments (two on
/// `web`, one on `api`, one on nothing running), each VPA's pods are what a scan of every owned
/// pod finds for it, in pod order.
#[test]
fn each_vpa_gets_the_pods_a_scan_of_the_owned_pods_finds() {
    let on = |name: &str, target: &str, created: &str| {
        let mut f = Fake::new(&json!({}), &json!([]));
        f.vpa.metadata.name = Some(name.to_owned());
        f.vpa.metadata.creation_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(created.parse().expect("ts")),
        );
        f.vpa.spec.target_ref.name = target.to_owned();
        f
    };
    let vpas = [
        on("newer", "web", "2026-01-02T00:00:00Z"),
        on("api", "api", "2026-01-01T00:00:00Z"),
        on("web", "web", "2026-01-01T00:00:00Z"),
        on("idle", "idle", "2026-01-01T00:00:00Z"),
    ];
    let of = |name: &str, target: &str| {
        let mut p = pod(name, &[("app", "1")]);
        if let Some(owner) = Arc::make_mut(&mut p)
            .metadata
            .owner_references
            .as_mut()
            .and_then(|o| o.first_mut())
        {
            owner.name = target.to_owned();
        }
        p
    };
    let pods = [
        of("w2", "web"),
        of("a1", "api"),
        of("w1", "web"),
        of("x", "gone"),
        of("a0", "api"),
    ];
    let assignment = Assignment::new(&vpas, &pods, &NoOwners);
    let names = |pods: &[&Pod]| -> Vec<String> {
        pods.iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect()
    };
    for vpa in &vpas {
        let key = key_of(&vpa.vpa);
        let scanned: Vec<&Pod> = assignment
            .owned
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, p)| *p)
            .collect();
        assert_eq!(names(assignment.pods_of(&key)), names(&scanned), "{key:?}");
    }
    let pods_of = |name: &str| names(assignment.pods_of(&("ns".to_owned(), name.to_owned())));
    assert_eq!(pods_of("web"), ["w2", "w1"]);
    assert_eq!(pods_of("api"), ["a1", "a0"]);
    assert!(pods_of("newer").is_empty());
    assert!(pods_of("idle").is_empty());
}

#[test]
fn usage_summing_past_i64_is_recorded_as_the_largest_total_rather_than_panic() {
    // The metrics API reports whatever its provider serves: 9e15 cores is 9e18 millicores and
    // 8Ei is 9.2e18 bytes, so two containers, or two pods, pass i64::MAX.
    let mut vpa = Fake::joint().with_hpa();
    if let Some(h) = vpa.joint.as_mut() {
        h.memory = h.cpu.clone();
    }
    let huge = |pod: &str, containers: &[&str]| PodUsage {
        namespace: "ns".into(),
        pod: pod.into(),
        time: t0(),
        containers: containers
            .iter()
            .map(|c| ContainerUsage {
                container: (*c).into(),
                cpu: Some(Quantity::parse("9e15").expect("q")),
                memory: Some(Quantity::parse("8Ei").expect("q")),
            })
            .collect(),
    };
    let key = ("ns".to_owned(), "web".to_owned());
    for (pods, usage) in [
        (
            vec![pod("web-1", &[("app", "100m"), ("log", "100m")])],
            vec![huge("web-1", &["app", "log"])],
        ),
        (
            vec![
                pod("web-1", &[("app", "100m")]),
                pod("web-2", &[("app", "100m")]),
            ],
            vec![huge("web-1", &["app"]), huge("web-2", &["app"])],
        ),
    ] {
        let mut r = recommender();
        let out = r.run_loop(
            std::slice::from_ref(&vpa),
            &pods,
            &NoOwners,
            &usage,
            &[],
            t0(),
        );
        let state = r.total_usage(&key).expect("joint state");
        assert_eq!(state.usage.buckets().last().map(|b| b.1), Some(i64::MAX));
        assert_eq!(
            state.memory_usage.buckets().last().map(|b| b.1),
            Some(i64::MAX)
        );
        assert!(out.recommendations[0].joint.is_some(), "sized jointly");
    }
}
