//! Vectors from DataDog/watermarkpodautoscaler `controllers/replica_calculator_test.go` and
//! `controllers/watermarkpodautoscaler_controller_test.go`.

use super::fixtures::*;
use crate::api::hpa_plus::{
    Algorithm, ConvergeTowardsWatermark, HorizontalPodAutoscalerPlusSpec, MetricSpec, MetricTarget,
};
use crate::horizontal::limits::{factor_scale_down_limit, factor_scale_up_limit};
use crate::horizontal::observation::Observation;
use crate::horizontal::watermark::Position;
use crate::horizontal::{History, LimitedBy};

/// WPA's resource fixture: CPU watermarks 20 / 40 cores over the pods' total, tolerance 2.5 %.
fn wpa_spec(modulo: i32) -> HorizontalPodAutoscalerPlusSpec {
    let mut spec = HorizontalPodAutoscalerPlusSpec::test()
        .algorithm(Algorithm::Absolute)
        .tolerance("25m")
        .metric(MetricSpec::resource(
            "cpu",
            MetricTarget::watermarks("20", "40"),
        ));
    spec.replica_scaling_absolute_modulo = Some(modulo);
    spec
}

fn three_pods_at(level: i64) -> Observation {
    Observation::test(3, pods(3, |p| p.cpu(100_000, Some(level))))
}

fn propose(spec: &HorizontalPodAutoscalerPlusSpec, obs: &Observation) -> (i32, Position) {
    let out = proposal_with(&spec.metrics[0], obs, spec);
    (out.replicas.unwrap(), out.position.unwrap())
}

#[test]
fn replica_calc_absolute_scale_up() {
    // upstream: replica_calculator_test.go TestReplicaCalcAbsoluteScaleUp
    assert_eq!(
        propose(&wpa_spec(1), &three_pods_at(90_000)),
        (21, Position::Above)
    );
}

#[test]
fn scale_interval_replica_calc_absolute_scale_up() {
    // upstream: TestScaleIntervalReplicaCalcAbsoluteScaleUp (21 rounded up to a multiple of 5)
    assert_eq!(
        propose(&wpa_spec(5), &three_pods_at(90_000)),
        (25, Position::Above)
    );
}

#[test]
fn scale_interval_replica_calc_no_scale() {
    // upstream: TestScaleIntervalReplicaCalcNoScale
    assert_eq!(
        propose(&wpa_spec(5), &three_pods_at(9_000)),
        (3, Position::Within)
    );
}

#[test]
fn converge_no_scale_down() {
    // upstream: TestScaleIntervalReplicaCalcConvergeNoScaleDown
    let mut spec = wpa_spec(1);
    spec.converge_towards_watermark = Some(ConvergeTowardsWatermark::HighWatermark);
    assert_eq!(propose(&spec, &three_pods_at(9_000)), (3, Position::Within));
}

#[test]
fn converge_default_off() {
    // upstream: TestScaleIntervalReplicaCalcConvergeDefault
    assert_eq!(
        propose(&wpa_spec(1), &three_pods_at(8_000)),
        (3, Position::Within)
    );
}

#[test]
fn converge_no_scale_up() {
    // upstream: TestScaleIntervalReplicaCalcConvergeNoScaleUp (low watermark 27)
    let mut spec = wpa_spec(1);
    spec.metrics[0] = MetricSpec::resource("cpu", MetricTarget::watermarks("27", "40"));
    spec.converge_towards_watermark = Some(ConvergeTowardsWatermark::LowWatermark);
    assert_eq!(propose(&spec, &three_pods_at(9_000)), (3, Position::Within));
}

#[test]
fn converge_scale_up() {
    // upstream: TestScaleIntervalReplicaCalcConvergeScaleUp
    let mut spec = wpa_spec(1);
    spec.converge_towards_watermark = Some(ConvergeTowardsWatermark::LowWatermark);
    assert_eq!(propose(&spec, &three_pods_at(9_000)), (4, Position::Within));
}

#[test]
fn converge_scale_down() {
    // upstream: TestScaleIntervalReplicaCalcConvergeScaleDown
    let mut spec = wpa_spec(1);
    spec.converge_towards_watermark = Some(ConvergeTowardsWatermark::HighWatermark);
    assert_eq!(propose(&spec, &three_pods_at(8_000)), (2, Position::Within));
}

#[test]
fn replica_calc_absolute_scale_down() {
    // upstream: TestReplicaCalcAbsoluteScaleDown (tolerance 2 %)
    let spec = wpa_spec(1).tolerance("20m");
    assert_eq!(propose(&spec, &three_pods_at(4_000)), (1, Position::Below));
}

#[test]
fn scale_interval_absolute_scale_down() {
    // upstream: TestScaleIntervalReplicaCalcAbsoluteScaleDown (1 rounded up to 2)
    let spec = wpa_spec(2).tolerance("20m");
    assert_eq!(propose(&spec, &three_pods_at(4_000)), (2, Position::Below));
}

#[test]
fn replica_calc_absolute_scale_down_less_scale() {
    // upstream: TestReplicaCalcAbsoluteScaleDownLessScale
    let spec = wpa_spec(1).tolerance("20m");
    assert_eq!(propose(&spec, &three_pods_at(5_000)), (2, Position::Below));
}

#[test]
fn replica_calc_average_external() {
    // upstream: TestReplicaCalcAverageScaleUp-style external average: 3 ready pods, value 300
    // averaged to 100 per pod over a high watermark of 40 → ceil(3 × 100 / 40) = 8.
    let spec = HorizontalPodAutoscalerPlusSpec::test()
        .algorithm(Algorithm::Average)
        .metric(MetricSpec::external(
            "queue",
            MetricTarget::watermarks("20", "40"),
        ));
    let obs = Observation::test(3, pods(3, |p| p.cpu(100, None))).external("queue", 300_000);
    assert_eq!(propose(&spec, &obs), (8, Position::Above));
}

#[test]
fn tolerate_zero() {
    // upstream: TestReplicaCalcExternalZero… — a zero value holds unless tolerateZero.
    let mut spec = HorizontalPodAutoscalerPlusSpec::test().metric(MetricSpec::external(
        "queue",
        MetricTarget::watermarks("20", "40"),
    ));
    let obs = Observation::test(3, pods(3, |p| p.cpu(100, None))).external("queue", 0);
    assert_eq!(propose(&spec, &obs), (3, Position::Within));
    spec.tolerate_zero = true;
    assert_eq!(propose(&spec, &obs), (1, Position::Below));
}

#[test]
fn limit_factor_vectors() {
    // upstream: watermarkpodautoscaler_controller_test.go TestCalculateScaleUpLimit /
    // TestCalculateScaleDownLimit, and the worked examples.
    assert_eq!(factor_scale_up_limit(10, 30.0), 13);
    assert_eq!(factor_scale_up_limit(10, 29.0), 12);
    assert_eq!(factor_scale_down_limit(10, 29.0), 8);
    assert_eq!(factor_scale_up_limit(1, 10.0), 2); // at least one replica per step
    assert_eq!(factor_scale_down_limit(3, 10.0), 2);
    assert_eq!(factor_scale_up_limit(10, 0.0), 10); // 0 turns the direction off
    assert_eq!(factor_scale_down_limit(10, 0.0), 10);
    assert_eq!(factor_scale_up_limit(10, 100.0), 20);
}

#[test]
fn scale_up_limit_factor_caps_the_step() {
    // upstream: watermarkpodautoscaler_controller_test.go TestReconcileWPA_ScaleUpLimit? :
    // 10 replicas, 140 over a high watermark of 100 → 14, limited to 13 by 30 %.
    let spec = HorizontalPodAutoscalerPlusSpec::test()
        .max(50)
        .tolerance("0.01")
        .up_limit("30")
        .metric(MetricSpec::external(
            "d",
            MetricTarget::watermarks("50", "100"),
        ));
    let obs = Observation::test(10, pods(10, |p| p.cpu(100, None))).external("d", 140_000);
    let d = run(&spec, &obs, &History::default(), 0);
    assert_eq!(d.recommended_replicas, Some(14));
    assert_eq!(d.desired_replicas, 13);
    assert_eq!(d.limited_by, Some(LimitedBy::ScaleUpLimit));
}

#[test]
fn scale_down_limit_factor_and_ready_guard() {
    // upstream: TestConvertDesiredReplicasWithRules (scale-down capping, then the ready-pod
    // abort): 10 → 3 asked with 29 % gives 8; with only 5 ready pods nothing changes.
    let spec = HorizontalPodAutoscalerPlusSpec::test()
        .max(50)
        .down_limit("29")
        .metric(MetricSpec::external(
            "d",
            MetricTarget::watermarks("50", "100"),
        ));
    let obs = Observation::test(10, pods(10, |p| p.cpu(100, None))).external("d", 16_000);
    let d = run(&spec, &obs, &History::default(), 400);
    assert_eq!(d.desired_replicas, 8);
    assert_eq!(d.limited_by, Some(LimitedBy::ScaleDownLimit));
    let mut obs = obs;
    for p in obs.pods.iter_mut().take(5) {
        p.ready = Some(false);
    }
    let d = run(&spec, &obs, &History::default(), 400);
    assert_eq!(d.desired_replicas, 10);
    assert_eq!(d.limited_by, Some(LimitedBy::ReadyPods));
}

#[test]
fn min_available_replica_percentage() {
    // upstream: replica_calculator_test.go TestTooManyUnreadyPods: 1 of 3 ready is 33 % < 50 %.
    let mut spec = HorizontalPodAutoscalerPlusSpec::test().metric(MetricSpec::external(
        "d",
        MetricTarget::watermarks("50", "100"),
    ));
    spec.min_available_replica_percentage = Some(50);
    let mut obs = Observation::test(3, pods(3, |p| p.cpu(100, None))).external("d", 500_000);
    obs.pods[1].ready = Some(false);
    obs.pods[2].ready = Some(false);
    let d = run(&spec, &obs, &History::default(), 0);
    assert_eq!(d.desired_replicas, 3);
    assert_eq!(d.limited_by, Some(LimitedBy::MinAvailable));
}

#[test]
fn readiness_delay_ignores_young_pods() {
    // upstream: TestReplicaCalcReadinessDelay-style: pods younger than readinessDelaySeconds do
    // not count as ready for External watermarks (2 ready of 3 → ceil(2 × 140 / 100) = 3).
    let mut spec = HorizontalPodAutoscalerPlusSpec::test().metric(MetricSpec::external(
        "d",
        MetricTarget::watermarks("50", "100"),
    ));
    spec.readiness_delay_seconds = Some(60);
    let mut obs = Observation::test(3, pods(3, |p| p.cpu(100, None))).external("d", 140_000);
    obs.pods[2] = obs.pods[2].clone().started_ago(30);
    assert_eq!(propose(&spec, &obs), (3, Position::Above));
}
