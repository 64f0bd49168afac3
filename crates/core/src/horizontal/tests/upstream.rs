//! Vectors from kubernetes `pkg/controller/podautoscaler/replica_calculator_test.go` and
//! `horizontal_test.go`. Each pod has one container where upstream's fixture has two identical
//! ones; ratios, and so the expected replicas, are the same.

use super::fixtures::*;
use crate::api::hpa_plus::{
    HorizontalPodAutoscalerPlusSpec, HpaScalingRules, MetricSpec, MetricTarget, ScalingPolicySelect,
};
use crate::horizontal::history::{ScaleEvent, TimedReplicas};
use crate::horizontal::observation::{Observation, PodPhase, PodSample};
use crate::horizontal::{History, LimitedBy};

fn cpu(pct: i32) -> MetricSpec {
    MetricSpec::resource("cpu", MetricTarget::utilization(pct))
}

/// Builds pods from CPU usage levels (request 1 core each); `None` = no sample.
fn cpu_pods(levels: &[Option<i64>]) -> Vec<PodSample> {
    levels
        .iter()
        .enumerate()
        .map(|(i, l)| PodSample::test(&format!("p-{i}")).cpu(1000, *l))
        .collect()
}

fn levels(v: &[i64]) -> Vec<Option<i64>> {
    v.iter().copied().map(Some).collect()
}

struct Case {
    name: &'static str,
    current: i32,
    pods: Vec<PodSample>,
    metric: MetricSpec,
    obs: fn(Observation) -> Observation,
    expect: Result<i32, &'static str>,
}

fn same(o: Observation) -> Observation {
    o
}

fn check(cases: Vec<Case>) {
    for c in cases {
        let obs = (c.obs)(Observation::test(c.current, c.pods));
        let out = proposal(&c.metric, &obs);
        match c.expect {
            Ok(n) => assert_eq!(out.replicas, Some(n), "{}: {out:?}", c.name),
            Err(msg) => {
                let err = out.error.unwrap_or_default();
                assert!(err.contains(msg), "{}: error {err:?} lacks {msg:?}", c.name);
            }
        }
    }
}

fn set_ready(mut pods: Vec<PodSample>, ready: &[bool]) -> Vec<PodSample> {
    for (p, r) in pods.iter_mut().zip(ready) {
        if !r {
            p.ready = Some(false);
        }
    }
    pods
}

#[test]
#[allow(clippy::too_many_lines)] // a table
fn replica_calculator_resource_cases() {
    check(vec![
        // upstream: replica_calculator_test.go TestReplicaCalcScaleUp
        Case {
            name: "ScaleUp",
            current: 3,
            pods: cpu_pods(&levels(&[300, 500, 700])),
            metric: cpu(30),
            obs: same,
            expect: Ok(5),
        },
        // upstream: TestReplicaCalcScaleUpUnreadyLessScale
        Case {
            name: "ScaleUpUnreadyLessScale",
            current: 3,
            pods: set_ready(cpu_pods(&levels(&[300, 500, 700])), &[false, true, true]),
            metric: cpu(30),
            obs: same,
            expect: Ok(4),
        },
        // upstream: TestReplicaCalcScaleUpHotCpuLessScale
        Case {
            name: "ScaleUpHotCpuLessScale",
            current: 3,
            pods: {
                let mut p = cpu_pods(&levels(&[300, 500, 700]));
                p[0] = p[0].clone().hot();
                p
            },
            metric: cpu(30),
            obs: same,
            expect: Ok(4),
        },
        // upstream: TestReplicaCalcScaleUpUnreadyNoScale
        Case {
            name: "ScaleUpUnreadyNoScale",
            current: 3,
            pods: set_ready(cpu_pods(&levels(&[400, 500, 700])), &[true, false, false]),
            metric: cpu(30),
            obs: same,
            expect: Ok(3),
        },
        // upstream: TestReplicaCalcScaleHotCpuNoScale
        Case {
            name: "ScaleHotCpuNoScale",
            current: 3,
            pods: {
                let mut p = set_ready(cpu_pods(&levels(&[400, 500, 700])), &[true, false, false]);
                p[1] = p[1].clone().hot();
                p[2] = p[2].clone().hot();
                p
            },
            metric: cpu(30),
            obs: same,
            expect: Ok(3),
        },
        // upstream: TestReplicaCalcScaleUpIgnoresFailedPods
        Case {
            name: "ScaleUpIgnoresFailedPods",
            current: 2,
            pods: {
                let mut p = cpu_pods(&[Some(500), Some(700), None, None]);
                p[2] = p[2].clone().unready().phase(PodPhase::Failed);
                p[3] = p[3].clone().unready().phase(PodPhase::Failed);
                p
            },
            metric: cpu(30),
            obs: same,
            expect: Ok(4),
        },
        // upstream: TestReplicaCalcScaleUpIgnoresDeletionPods
        Case {
            name: "ScaleUpIgnoresDeletionPods",
            current: 2,
            pods: {
                let mut p = cpu_pods(&[Some(500), Some(700), None, None]);
                p[2] = p[2].clone().unready().deleting();
                p[3] = p[3].clone().unready().deleting();
                p
            },
            metric: cpu(30),
            obs: same,
            expect: Ok(4),
        },
        // upstream: TestReplicaCalcScaleDown
        Case {
            name: "ScaleDown",
            current: 5,
            pods: cpu_pods(&levels(&[100, 300, 500, 250, 250])),
            metric: cpu(50),
            obs: same,
            expect: Ok(3),
        },
        // upstream: TestReplicaCalcScaleDownIncludeUnreadyPods
        Case {
            name: "ScaleDownIncludeUnreadyPods",
            current: 5,
            pods: set_ready(
                cpu_pods(&levels(&[100, 300, 500, 250, 250])),
                &[true, true, true, false, false],
            ),
            metric: cpu(50),
            obs: same,
            expect: Ok(2),
        },
        // upstream: TestReplicaCalcScaleDownExcludeUnscheduledPods
        Case {
            name: "ScaleDownExcludeUnscheduledPods",
            current: 5,
            pods: {
                let mut p = cpu_pods(&[Some(100), None, None, None, None]);
                for q in &mut p[1..] {
                    *q = q.clone().unready().phase(PodPhase::Pending);
                }
                p
            },
            metric: cpu(50),
            obs: same,
            expect: Ok(1),
        },
        // upstream: TestReplicaCalcScaleDownIgnoreHotCpuPods
        Case {
            name: "ScaleDownIgnoreHotCpuPods",
            current: 5,
            pods: {
                let mut p = cpu_pods(&levels(&[100, 300, 500, 250, 250]));
                p[3] = p[3].clone().hot();
                p[4] = p[4].clone().hot();
                p
            },
            metric: cpu(50),
            obs: same,
            expect: Ok(2),
        },
        // upstream: TestReplicaCalcScaleDownIgnoresFailedPods
        Case {
            name: "ScaleDownIgnoresFailedPods",
            current: 5,
            pods: {
                let mut p = cpu_pods(&[
                    Some(100),
                    Some(300),
                    Some(500),
                    Some(250),
                    Some(250),
                    None,
                    None,
                ]);
                p[5] = p[5].clone().unready().phase(PodPhase::Failed);
                p[6] = p[6].clone().unready().phase(PodPhase::Failed);
                p
            },
            metric: cpu(50),
            obs: same,
            expect: Ok(3),
        },
        // upstream: TestReplicaCalcScaleDownIgnoresDeletionPods
        Case {
            name: "ScaleDownIgnoresDeletionPods",
            current: 5,
            pods: {
                let mut p = cpu_pods(&[
                    Some(100),
                    Some(300),
                    Some(500),
                    Some(250),
                    Some(250),
                    None,
                    None,
                ]);
                p[5] = p[5].clone().unready().deleting();
                p[6] = p[6].clone().unready().deleting();
                p
            },
            metric: cpu(50),
            obs: same,
            expect: Ok(3),
        },
        // upstream: TestReplicaCalcTolerance (requests 0.9, 1.0, 1.1)
        Case {
            name: "Tolerance",
            current: 3,
            pods: vec![
                PodSample::test("a").cpu(900, Some(1010)),
                PodSample::test("b").cpu(1000, Some(1030)),
                PodSample::test("c").cpu(1100, Some(1020)),
            ],
            metric: cpu(100),
            obs: same,
            expect: Ok(3),
        },
        // upstream: TestReplicaCalcSuperfluousMetrics (samples of pods that do not exist are dropped)
        Case {
            name: "SuperfluousMetrics",
            current: 4,
            pods: cpu_pods(&levels(&[4000, 9500, 3000, 7000])),
            metric: cpu(100),
            obs: same,
            expect: Ok(24),
        },
        // upstream: TestReplicaCalcMissingMetrics
        Case {
            name: "MissingMetrics",
            current: 4,
            pods: cpu_pods(&[Some(400), Some(95), None, None]),
            metric: cpu(100),
            obs: same,
            expect: Ok(3),
        },
        // upstream: TestReplicaCalcEmptyMetrics
        Case {
            name: "EmptyMetrics",
            current: 4,
            pods: cpu_pods(&[None, None, None]),
            metric: cpu(100),
            obs: same,
            expect: Err("did not receive metrics"),
        },
        // upstream: TestReplicaCalcEmptyCPURequest
        Case {
            name: "EmptyCPURequest",
            current: 1,
            pods: {
                let mut p = PodSample::test("a");
                p.containers[0].usage.insert("cpu".into(), Ok(200));
                vec![p]
            },
            metric: cpu(100),
            obs: same,
            expect: Err("missing request for cpu"),
        },
        // upstream: TestReplicaCalcMissingMetricsNoChangeEq
        Case {
            name: "MissingMetricsNoChangeEq",
            current: 2,
            pods: cpu_pods(&[Some(1000), None]),
            metric: cpu(100),
            obs: same,
            expect: Ok(2),
        },
        // upstream: TestReplicaCalcMissingMetricsNoChangeGt
        Case {
            name: "MissingMetricsNoChangeGt",
            current: 2,
            pods: cpu_pods(&[Some(1900), None]),
            metric: cpu(100),
            obs: same,
            expect: Ok(2),
        },
        // upstream: TestReplicaCalcMissingMetricsNoChangeLt
        Case {
            name: "MissingMetricsNoChangeLt",
            current: 2,
            pods: cpu_pods(&[Some(600), None]),
            metric: cpu(100),
            obs: same,
            expect: Ok(2),
        },
        // upstream: TestReplicaCalcMissingMetricsUnreadyChange
        Case {
            name: "MissingMetricsUnreadyChange",
            current: 3,
            pods: set_ready(
                cpu_pods(&[Some(100), Some(450), None]),
                &[false, true, true],
            ),
            metric: cpu(50),
            obs: same,
            expect: Ok(3),
        },
        // upstream: TestReplicaCalcMissingMetricsHotCpuNoChange
        Case {
            name: "MissingMetricsHotCpuNoChange",
            current: 3,
            pods: {
                let mut p = cpu_pods(&[Some(100), Some(450), None]);
                p[0] = p[0].clone().hot();
                p
            },
            metric: cpu(50),
            obs: same,
            expect: Ok(3),
        },
        // upstream: TestReplicaCalcMissingMetricsUnreadyScaleUp
        Case {
            name: "MissingMetricsUnreadyScaleUp",
            current: 3,
            pods: set_ready(
                cpu_pods(&[Some(100), Some(2000), None]),
                &[false, true, true],
            ),
            metric: cpu(50),
            obs: same,
            expect: Ok(4),
        },
        // upstream: TestReplicaCalcMissingMetricsHotCpuScaleUp
        Case {
            name: "MissingMetricsHotCpuScaleUp",
            current: 3,
            pods: {
                let mut p = set_ready(
                    cpu_pods(&[Some(100), Some(2000), None]),
                    &[false, true, true],
                );
                p[0] = p[0].clone().hot();
                p
            },
            metric: cpu(50),
            obs: same,
            expect: Ok(4),
        },
        // upstream: TestReplicaCalcMissingMetricsUnreadyScaleDown
        Case {
            name: "MissingMetricsUnreadyScaleDown",
            current: 4,
            pods: set_ready(
                cpu_pods(&[Some(100), Some(100), Some(100), None]),
                &[false, true, true, true],
            ),
            metric: cpu(50),
            obs: same,
            expect: Ok(3),
        },
        // upstream: TestReplicaCalcDuringRollingUpdateWithMaxSurge
        Case {
            name: "DuringRollingUpdateWithMaxSurge",
            current: 2,
            pods: cpu_pods(&[Some(100), Some(100), None]),
            metric: cpu(50),
            obs: same,
            expect: Ok(2),
        },
    ]);
}

fn qps(target_milli: &str) -> MetricSpec {
    MetricSpec::pods("qps", MetricTarget::average(target_milli))
}

fn deployment_qps(target: MetricTarget) -> MetricSpec {
    MetricSpec::object("Deployment", "some-deployment", "qps", target)
}

fn ext_qps(target: MetricTarget) -> MetricSpec {
    MetricSpec::external("qps", target)
}

const OBJ: &str = "Deployment/some-deployment/qps";

#[test]
#[allow(clippy::too_many_lines)] // a table
fn replica_calculator_custom_metric_cases() {
    check(vec![
        // upstream: TestReplicaCalcScaleUpCM (levels 20, 10, 30 vs 15)
        Case {
            name: "ScaleUpCM",
            current: 3,
            pods: vec![
                PodSample::test("a").metric("qps", 20000),
                PodSample::test("b").metric("qps", 10000),
                PodSample::test("c").metric("qps", 30000),
            ],
            metric: qps("15"),
            obs: same,
            expect: Ok(4),
        },
        // upstream: TestReplicaCalcScaleUpCMUnreadyHotCpuNoLessScale (readiness does not matter for Pods metrics)
        Case {
            name: "ScaleUpCMUnreadyHotCpuNoLessScale",
            current: 3,
            pods: vec![
                PodSample::test("a").metric("qps", 50000),
                PodSample::test("b").metric("qps", 10000),
                PodSample::test("c").hot().unready().metric("qps", 30000),
            ],
            metric: qps("15"),
            obs: same,
            expect: Ok(6),
        },
        // upstream: TestReplicaCalcScaleUpCMUnreadyHotCpuScaleWouldScaleDown
        Case {
            name: "ScaleUpCMUnreadyHotCpuScaleWouldScaleDown",
            current: 3,
            pods: vec![
                PodSample::test("a").hot().unready().metric("qps", 50000),
                PodSample::test("b").metric("qps", 15000),
                PodSample::test("c").hot().unready().metric("qps", 30000),
            ],
            metric: qps("15"),
            obs: same,
            expect: Ok(7),
        },
        // upstream: TestReplicaCalcScaleDownCM
        Case {
            name: "ScaleDownCM",
            current: 5,
            pods: qps_pods(5, 12000),
            metric: qps("20"),
            obs: same,
            expect: Ok(3),
        },
        // upstream: TestReplicaCalcToleranceCM
        Case {
            name: "ToleranceCM",
            current: 3,
            pods: vec![
                PodSample::test("a").metric("qps", 20000),
                PodSample::test("b").metric("qps", 21000),
                PodSample::test("c").metric("qps", 21000),
            ],
            metric: qps("20"),
            obs: same,
            expect: Ok(3),
        },
        // upstream: TestReplicaCalcScaleUpCMObject
        Case {
            name: "ScaleUpCMObject",
            current: 3,
            pods: qps_pods(3, 0),
            metric: deployment_qps(MetricTarget::value("15")),
            obs: |o| o.object(OBJ, 20000),
            expect: Ok(4),
        },
        // upstream: TestReplicaCalcScaleUpCMPerPodObject
        Case {
            name: "ScaleUpCMPerPodObject",
            current: 3,
            pods: qps_pods(3, 0),
            metric: deployment_qps(MetricTarget::average("5")),
            obs: |o| o.object(OBJ, 20000),
            expect: Ok(4),
        },
        // upstream: TestReplicaCalcScaleUpCMObjectIgnoresUnreadyPods
        Case {
            name: "ScaleUpCMObjectIgnoresUnreadyPods",
            current: 3,
            pods: set_ready(qps_pods(3, 0), &[false, true, false]),
            metric: deployment_qps(MetricTarget::value("10")),
            obs: |o| o.object(OBJ, 50000),
            expect: Ok(5),
        },
        // upstream: TestReplicaCalcScaleDownCMObject
        Case {
            name: "ScaleDownCMObject",
            current: 5,
            pods: qps_pods(5, 0),
            metric: deployment_qps(MetricTarget::value("20")),
            obs: |o| o.object(OBJ, 12000),
            expect: Ok(3),
        },
        // upstream: TestReplicaCalcScaleDownPerPodCMObject
        Case {
            name: "ScaleDownPerPodCMObject",
            current: 5,
            pods: qps_pods(5, 0),
            metric: deployment_qps(MetricTarget::average("2")),
            obs: |o| o.object(OBJ, 6000),
            expect: Ok(3),
        },
        // upstream: TestReplicaCalcToleranceCMObject
        Case {
            name: "ToleranceCMObject",
            current: 3,
            pods: qps_pods(3, 0),
            metric: deployment_qps(MetricTarget::value("20")),
            obs: |o| o.object(OBJ, 20666),
            expect: Ok(3),
        },
        // upstream: TestReplicaCalcTolerancePerPodCMObject
        Case {
            name: "TolerancePerPodCMObject",
            current: 4,
            pods: qps_pods(4, 0),
            metric: deployment_qps(MetricTarget::average("5")),
            obs: |o| o.object(OBJ, 20166),
            expect: Ok(4),
        },
        // upstream: TestReplicaCalcScaleUpCMExternal (Value 8.6 vs 4.4, one pod)
        Case {
            name: "ScaleUpCMExternal",
            current: 1,
            pods: qps_pods(1, 0),
            metric: ext_qps(MetricTarget::value("4400m")),
            obs: |o| o.external("qps", 8600),
            expect: Ok(2),
        },
        // upstream: TestReplicaCalcScaleUpCMExternalIgnoresUnreadyPods
        Case {
            name: "ScaleUpCMExternalIgnoresUnreadyPods",
            current: 3,
            pods: set_ready(qps_pods(3, 0), &[false, true, false]),
            metric: ext_qps(MetricTarget::value("4400m")),
            obs: |o| o.external("qps", 8600),
            expect: Ok(2),
        },
        // upstream: TestReplicaCalcScaleUpPerPodCMExternal
        Case {
            name: "ScaleUpPerPodCMExternal",
            current: 3,
            pods: qps_pods(3, 0),
            metric: ext_qps(MetricTarget::average("2150m")),
            obs: |o| o.external("qps", 8600),
            expect: Ok(4),
        },
        // upstream: TestReplicaCalcScaleDownCMExternal
        Case {
            name: "ScaleDownCMExternal",
            current: 5,
            pods: qps_pods(5, 0),
            metric: ext_qps(MetricTarget::value("14334m")),
            obs: |o| o.external("qps", 8600),
            expect: Ok(3),
        },
        // upstream: TestReplicaCalcScaleDownPerPodCMExternal
        Case {
            name: "ScaleDownPerPodCMExternal",
            current: 5,
            pods: qps_pods(5, 0),
            metric: ext_qps(MetricTarget::average("2867m")),
            obs: |o| o.external("qps", 8600),
            expect: Ok(3),
        },
        // upstream: TestReplicaCalcToleranceCMExternal
        Case {
            name: "ToleranceCMExternal",
            current: 3,
            pods: qps_pods(3, 0),
            metric: ext_qps(MetricTarget::value("8888m")),
            obs: |o| o.external("qps", 8600),
            expect: Ok(3),
        },
        // upstream: TestReplicaCalcTolerancePerPodCMExternal
        Case {
            name: "TolerancePerPodCMExternal",
            current: 3,
            pods: qps_pods(3, 0),
            metric: ext_qps(MetricTarget::average("2900m")),
            obs: |o| o.external("qps", 8600),
            expect: Ok(3),
        },
    ]);
}

#[test]
fn computed_tolerance_alg_implementation() {
    // upstream: TestReplicaCalcComputedToleranceAlgImplementation. 10 pods using 150m of ~300m
    // requested; a target just past the tolerance scales down, just inside does not.
    let requests = [400, 200, 310, 290, 302, 298, 301, 299, 300, 300];
    let pods: Vec<PodSample> = requests
        .iter()
        .enumerate()
        .map(|(i, r)| PodSample::test(&format!("p-{i}")).cpu(*r, Some(150)))
        .collect();
    let obs = Observation::test(10, pods);
    // target = 1 / (2 × 0.9) + 0.01 = 0.5656 → 56 %; ratio 50/56 → ceil(0.892 × 10) = 9
    let out = proposal(&cpu(56), &obs);
    assert_eq!(out.replicas, Some(9));
    // + 0.004 → 55 %: ratio 50/55 = 0.909, inside the tolerance.
    let out = proposal(&cpu(55), &obs);
    assert_eq!(out.replicas, Some(10));
    assert!(out.within_tolerance);
}

#[test]
fn group_pods_cases() {
    use crate::horizontal::metrics::{CalcContext, group_pods};
    use crate::horizontal::tolerance::Tolerances;
    let now = t0();
    let ctx_for = |pods: &[PodSample]| -> (usize, usize, usize, usize) {
        let ctx = CalcContext {
            now,
            current_replicas: 1,
            status_replicas: 1,
            tolerances: Tolerances::both(0.1),
            cpu_initialization_period_seconds: 300,
            initial_readiness_delay_seconds: 30,
            readiness_delay_seconds: 0,
            utilization_base: crate::api::hpa_plus::UtilizationBase::Requests,
            pods,
        };
        let metrics = pods
            .iter()
            .filter(|p| p.containers[0].usage.contains_key("cpu"))
            .map(|p| (p.name.clone(), 1))
            .collect();
        let g = group_pods(&ctx, &metrics, true);
        (g.ready, g.unready.len(), g.missing.len(), g.ignored.len())
    };
    // upstream: TestGroupPods "void"
    assert_eq!(ctx_for(&[]), (0, 0, 0, 0));
    // upstream: TestGroupPods "ignore a pod without ready condition - CPU"
    let mut p = PodSample::test("lucretius").cpu(100, Some(1));
    p.ready = None;
    assert_eq!(ctx_for(&[p]), (0, 1, 0, 0));
    // upstream: TestGroupPods "count in a ready pod with fresh metrics during initialization period - CPU"
    let mut p = PodSample::test("bentham").cpu(100, Some(1));
    p.start_time = Some(ago(now, 60));
    p.ready_transition_time = Some(ago(now, 30));
    p.metrics_window_seconds = 30;
    assert_eq!(ctx_for(&[p.clone()]), (1, 0, 0, 0));
    // upstream: TestGroupPods "ignore a ready pod without fresh metrics during initialization period - CPU"
    p.metrics_window_seconds = 60;
    assert_eq!(ctx_for(&[p]), (0, 1, 0, 0));
    // upstream: TestGroupPods "count in a ready pod without fresh metrics after initialization period - CPU"
    let mut p = PodSample::test("bentham").cpu(100, Some(1));
    p.start_time = Some(ago(now, 3 * 60 * 60));
    p.ready_transition_time = Some(ago(now, 3 * 60 * 60 - 60));
    assert_eq!(ctx_for(&[p]), (1, 0, 0, 0));
    // upstream: TestGroupPods "count in an unready pod that was ready after initialization period - CPU"
    let mut p = PodSample::test("lucretius").cpu(100, Some(1)).unready();
    p.start_time = Some(ago(now, 10 * 60));
    p.ready_transition_time = Some(ago(now, 9 * 60));
    assert_eq!(ctx_for(&[p]), (1, 0, 0, 0));
    // upstream: TestGroupPods "ignore pod that has never been ready after initialization period - CPU"
    let mut p = PodSample::test("lucretius").cpu(100, Some(1)).unready();
    p.start_time = Some(ago(now, 10 * 60));
    p.ready_transition_time = Some(ago(now, 10 * 60));
    assert_eq!(ctx_for(&[p]), (0, 1, 0, 0));
    // upstream: TestGroupPods "a missing pod"
    let p = PodSample::test("epicurus").cpu(100, None);
    assert_eq!(ctx_for(&[p]), (0, 0, 1, 0));
    // upstream: TestGroupPods "ignore pods with deletion timestamps" / "ignore failed pods"
    let a = PodSample::test("a").cpu(100, Some(1)).deleting();
    let b = PodSample::test("b")
        .cpu(100, Some(1))
        .phase(PodPhase::Failed);
    assert_eq!(ctx_for(&[a, b]), (0, 0, 0, 2));
    // upstream: TestGroupPods "pending pods are unready"
    let p = PodSample::test("c").cpu(100, None).phase(PodPhase::Pending);
    assert_eq!(ctx_for(&[p]), (0, 1, 0, 0));
}

// --- horizontal_test.go: normalization, behavior, multiple metrics, conditions ---

fn spec_cpu() -> HorizontalPodAutoscalerPlusSpec {
    HorizontalPodAutoscalerPlusSpec::test()
        .max(1000)
        .metric(cpu(50))
}

/// `n` pods at `level` millicores of a 1-core request.
fn at(n: usize, level: i64) -> Vec<PodSample> {
    pods(n, |p| p.cpu(1000, Some(level)))
}

#[test]
fn scale_up_limit_without_behavior() {
    // upstream: horizontal_test.go TestScaleUpLimit? (calculateScaleUpLimit: max(2×, 4)):
    // 3 replicas at 500 % of target would go to 30; at most 6.
    let d = run(
        &spec_cpu(),
        &Observation::test(3, at(3, 5000)),
        &History::default(),
        0,
    );
    assert_eq!(d.desired_replicas, 6);
    assert_eq!(d.limited_by, Some(LimitedBy::ScaleUpLimit));
    // upstream: TestScaleUpLimitMinimum: 1 replica may go to 4.
    let d = run(
        &spec_cpu(),
        &Observation::test(1, at(1, 5000)),
        &History::default(),
        0,
    );
    assert_eq!(d.desired_replicas, 4);
}

#[test]
fn scale_down_stabilized_by_default_window() {
    // upstream: horizontal_test.go TestNormalizeDesiredReplicas / stabilizeRecommendation: the
    // highest recommendation of the last 300 s wins.
    let history = History {
        recommendations: vec![TimedReplicas {
            at: ago(t0(), 100),
            replicas: 5,
        }],
        ..History::default()
    };
    let d = run(&spec_cpu(), &Observation::test(5, at(5, 100)), &history, 0);
    assert_eq!(d.recommended_replicas, Some(1));
    assert_eq!(d.desired_replicas, 5);
    assert_eq!(d.limited_by, Some(LimitedBy::Stabilization));
    // After the window the old recommendation no longer counts.
    let d = run(
        &spec_cpu(),
        &Observation::test(5, at(5, 100)),
        &history,
        201,
    );
    assert_eq!(d.desired_replicas, 1);
}

#[test]
fn behavior_default_scale_up_policies() {
    // upstream: horizontal_test.go TestScalingWithRules "scaleUp with default behavior":
    // 10 → 50 asked, default policies allow max(+4, +100 %) = 20.
    let spec = spec_cpu().scale_up(HpaScalingRules::default());
    let d = run(
        &spec,
        &Observation::test(10, at(10, 2500)),
        &History::default(),
        0,
    );
    assert_eq!(d.recommended_replicas, Some(50));
    assert_eq!(d.desired_replicas, 20);
    assert_eq!(d.limited_by, Some(LimitedBy::Policy));
}

#[test]
fn behavior_pods_policy_larger_than_percent() {
    // upstream: TestScalingWithRules "scaleUp with pods policy larger than percent policy"
    let spec = spec_cpu().scale_up(HpaScalingRules::window(0).pods(100, 60).percent(100, 60));
    let d = run(
        &spec,
        &Observation::test(10, at(10, 25000)),
        &History::default(),
        0,
    );
    assert_eq!(d.desired_replicas, 110);
}

#[test]
fn behavior_percent_policy_larger_than_pods() {
    // upstream: TestScalingWithRules "scaleUp with percent policy larger than pods policy"
    let spec = spec_cpu().scale_up(HpaScalingRules::window(0).pods(2, 60).percent(100, 60));
    let d = run(
        &spec,
        &Observation::test(10, at(10, 25000)),
        &History::default(),
        0,
    );
    assert_eq!(d.desired_replicas, 20);
}

#[test]
fn behavior_select_min() {
    // upstream: TestScalingWithRules "scaleUp with Min selectPolicy"
    let spec = spec_cpu().scale_up(
        HpaScalingRules::window(0)
            .pods(2, 60)
            .percent(100, 60)
            .select(ScalingPolicySelect::Min),
    );
    let d = run(
        &spec,
        &Observation::test(10, at(10, 25000)),
        &History::default(),
        0,
    );
    assert_eq!(d.desired_replicas, 12);
}

#[test]
fn behavior_disabled_direction() {
    // upstream: TestScalingWithRules "scaleUp with scaleUp disabled" / "scaleDown disabled"
    let spec =
        spec_cpu().scale_up(HpaScalingRules::window(0).select(ScalingPolicySelect::Disabled));
    let d = run(
        &spec,
        &Observation::test(10, at(10, 2500)),
        &History::default(),
        0,
    );
    assert_eq!(d.desired_replicas, 10);
    let spec =
        spec_cpu().scale_down(HpaScalingRules::window(0).select(ScalingPolicySelect::Disabled));
    let d = run(
        &spec,
        &Observation::test(10, at(10, 100)),
        &History::default(),
        0,
    );
    assert_eq!(d.desired_replicas, 10);
}

#[test]
fn behavior_scale_up_events_consume_the_period() {
    // upstream: horizontal_test.go TestScalingWithRules "scaleUp with 1 scaleUp event in
    // period": 5 were added 30 s ago, so the period started at 5 and +100 % allows 10.
    let spec = spec_cpu().scale_up(HpaScalingRules::window(0).percent(100, 60));
    let history = History {
        scale_up_events: vec![ScaleEvent {
            at: ago(t0(), 30),
            change: 5,
        }],
        ..History::default()
    };
    let d = run(&spec, &Observation::test(10, at(10, 25000)), &history, 0);
    assert_eq!(d.desired_replicas, 10);
    assert_eq!(d.limited_by, Some(LimitedBy::Policy));
}

#[test]
fn behavior_scale_down_percent_truncates() {
    // upstream: TestScalingWithRules "scaleDown with percent policy": 10 % per period from 72
    // leaves int(64.8) = 64.
    let spec = spec_cpu().scale_down(HpaScalingRules::window(0).percent(10, 60));
    let d = run(
        &spec,
        &Observation::test(72, at(72, 50)),
        &History::default(),
        0,
    );
    assert_eq!(d.desired_replicas, 64);
}

#[test]
fn behavior_stabilization_windows_both_ways() {
    // upstream: horizontal_test.go TestNormalizeDesiredReplicasWithBehavior "scale up
    // stabilization": a scale-up window keeps the lowest recent recommendation.
    let spec = spec_cpu().scale_up(HpaScalingRules::window(60).percent(1000, 15));
    let history = History {
        recommendations: vec![TimedReplicas {
            at: ago(t0(), 30),
            replicas: 4,
        }],
        ..History::default()
    };
    let d = run(&spec, &Observation::test(3, at(3, 2000)), &history, 0);
    assert_eq!(d.recommended_replicas, Some(12));
    assert_eq!(d.desired_replicas, 4);
    assert_eq!(d.limited_by, Some(LimitedBy::Stabilization));
}

#[test]
fn multiple_metrics_take_the_largest() {
    // upstream: horizontal_test.go TestScaleUpCMUnreadyAndHotCpuNoLessScale / multi-metric:
    // the largest proposal wins.
    let spec = spec_cpu().metric(qps("10"));
    let obs = Observation::test(4, pods(4, |p| p.cpu(1000, Some(500)).metric("qps", 25000)));
    let d = run(&spec, &obs, &History::default(), 0);
    assert_eq!(d.recommended_replicas, Some(10));
    assert_eq!(d.desired_replicas, 8);
}

#[test]
fn one_metric_invalid_scales_up_on_the_rest() {
    // upstream: horizontal_test.go TestScaleUpOneMetricInvalid
    let spec = spec_cpu().metric(qps("10"));
    let obs = Observation::test(3, at(3, 1000));
    let d = run(&spec, &obs, &History::default(), 0);
    assert_eq!(d.desired_replicas, 6);
    assert!(d.proposals[1].error.is_some());
}

#[test]
fn one_metric_invalid_never_scales_down() {
    // upstream: horizontal_test.go TestScaleDownOneMetricInvalid
    let spec = spec_cpu().metric(qps("10"));
    let d = run(
        &spec,
        &Observation::test(5, at(5, 100)),
        &History::default(),
        0,
    );
    assert_eq!(d.desired_replicas, 5);
    assert_eq!(d.limited_by, Some(LimitedBy::MetricsUnavailable));
    let active = d
        .conditions
        .iter()
        .find(|c| c.type_ == "ScalingActive")
        .unwrap();
    assert!(!active.status);
    assert_eq!(active.reason, "FailedGetPodsMetric");
}

#[test]
fn all_metrics_invalid_change_nothing() {
    // upstream: horizontal_test.go TestScaleDownOneMetricEmpty / TestMissingReports
    let d = run(
        &spec_cpu(),
        &Observation::test(4, at(0, 0)),
        &History::default(),
        0,
    );
    assert_eq!(d.desired_replicas, 4);
    assert_eq!(d.scale_to, None);
    assert_eq!(d.limited_by, Some(LimitedBy::MetricsUnavailable));
}

#[test]
fn zero_replicas_disable_scaling() {
    // upstream: horizontal_test.go TestZeroReplicas
    let d = run(
        &spec_cpu(),
        &Observation::test(0, vec![]),
        &History::default(),
        0,
    );
    assert_eq!(d.desired_replicas, 0);
    assert_eq!(d.scale_to, None);
    let active = d
        .conditions
        .iter()
        .find(|c| c.type_ == "ScalingActive")
        .unwrap();
    assert_eq!(active.reason, "ScalingDisabled");
}

#[test]
fn scale_to_zero_with_external_metric() {
    // upstream: horizontal_test.go TestScaleUpFromZeroWithExternalMetric (HPAScaleToZero; in
    // 1.37 the HPA's status carries ScaledToZero=True from the scale-down)
    let spec = HorizontalPodAutoscalerPlusSpec::test()
        .min(0)
        .metric(ext_qps(MetricTarget::value("2")));
    let mut obs = Observation::test(0, vec![]).external("qps", 3000);
    // Without the condition the zero is a person's: autoscaling is off (1.37).
    let d = run(&spec, &obs, &History::default(), 0);
    assert_eq!((d.desired_replicas, d.scale_to), (0, None));
    assert_eq!(d.limited_by, Some(LimitedBy::ScalingDisabled));
    obs.scaled_to_zero = true;
    let d = run(&spec, &obs, &History::default(), 0);
    assert_eq!(d.desired_replicas, 2);
    assert_eq!(d.scale_to, Some(2));
    let c = d
        .conditions
        .iter()
        .find(|c| c.type_ == "ScaledToZero")
        .unwrap();
    assert_eq!((c.status, c.reason), (false, "NotScaledToZero"));
}

#[test]
fn out_of_range_replicas_are_corrected_without_metrics() {
    // upstream: horizontal_test.go TestMinReplicas / TestMaxReplicas "current above max"
    let spec = spec_cpu().min(2).max(5);
    let d = run(&spec, &Observation::test(8, vec![]), &History::default(), 0);
    assert_eq!(
        (d.desired_replicas, d.limited_by),
        (5, Some(LimitedBy::MaxReplicas))
    );
    let d = run(&spec, &Observation::test(1, vec![]), &History::default(), 0);
    assert_eq!(
        (d.desired_replicas, d.limited_by),
        (2, Some(LimitedBy::MinReplicas))
    );
}

#[test]
fn tolerance_per_direction() {
    // upstream: horizontal_test.go TestConfigurableTolerance (behavior.*.tolerance): 3 pods at
    // 108 % of target stay at 3 with the default tolerance, scale with scaleUp.tolerance 5 %.
    let obs = Observation::test(3, at(3, 540));
    let d = run(&spec_cpu(), &obs, &History::default(), 0);
    assert_eq!(d.desired_replicas, 3);
    assert_eq!(d.limited_by, Some(LimitedBy::Tolerance));
    let rules = HpaScalingRules {
        tolerance: Some(crate::api::hpa_plus::fixtures::q("0.05")),
        ..HpaScalingRules::default()
    };
    let d = run(&spec_cpu().scale_up(rules), &obs, &History::default(), 0);
    assert_eq!(d.desired_replicas, 4);
}

#[test]
fn ambiguous_selector_refuses_to_act() {
    // upstream: horizontal_test.go TestMultipleHPAs
    let mut obs = Observation::test(3, at(3, 2000));
    obs.conflicting_autoscalers = vec!["default/other".into()];
    let d = run(&spec_cpu(), &obs, &History::default(), 0);
    assert_eq!((d.desired_replicas, d.scale_to), (3, None));
    assert_eq!(d.limited_by, Some(LimitedBy::AmbiguousSelector));
}

#[test]
fn utilization_base_limits_falls_back_to_requests() {
    // HPAPlus utilizationBase: Limits. Pod a: limit 2 cores; pod b has no limit (request 1).
    let mut spec = spec_cpu();
    spec.utilization_base = Some(crate::api::hpa_plus::UtilizationBase::Limits);
    let pods = vec![
        PodSample::test("a").cpu(1000, Some(1000)).cpu_limit(2000),
        PodSample::test("b").cpu(1000, Some(1000)),
    ];
    let out = proposal_with(&cpu(50), &Observation::test(2, pods), &spec);
    // 2000 used of 3000 base = 66 % vs 50 % → ceil(1.32 × 2) = 3 (against requests: 200 % → 8).
    assert_eq!(out.value, Some(66.0));
    assert_eq!(out.replicas, Some(3));
}

#[test]
fn scale_to_zero_with_external_metric_at_zero() {
    // upstream: horizontal_test.go TestScaleDownToZeroWithExternalMetric (HPAScaleToZero)
    let spec = HorizontalPodAutoscalerPlusSpec::test()
        .min(0)
        .metric(ext_qps(MetricTarget::value("2")))
        .scale_down(HpaScalingRules::window(0));
    let obs = Observation::test(3, qps_pods(3, 0)).external("qps", 0);
    let d = run(&spec, &obs, &History::default(), 0);
    assert_eq!((d.desired_replicas, d.scale_to), (0, Some(0)));
    let c = d
        .conditions
        .iter()
        .find(|c| c.type_ == "ScaledToZero")
        .unwrap();
    assert_eq!((c.status, c.reason), (true, "ScaledToZero"));
    assert_eq!(c.message, "the HPA controller scaled the workload to zero");
}
