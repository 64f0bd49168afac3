//! One test per row of the precedence table in docs/hpa-plus.md.

use super::fixtures::*;
use crate::api::hpa_plus::{HorizontalPodAutoscalerPlusSpec, MetricSpec, MetricTarget};
use crate::horizontal::observation::{Observation, RolloutState};
use crate::horizontal::{ControllerConfig, History, LimitedBy};

fn spec() -> HorizontalPodAutoscalerPlusSpec {
    HorizontalPodAutoscalerPlusSpec::test()
        .max(20)
        .metric(MetricSpec::resource("cpu", MetricTarget::utilization(50)))
}

/// 4 pods at 150 % of target: upstream proposes 12, capped at 8 without behavior.
fn hot() -> Observation {
    Observation::test(4, pods(4, |p| p.cpu(1000, Some(1500))))
}

#[test]
fn rule_1_ambiguous_selector_beats_everything() {
    let mut obs = Observation::test(30, vec![]);
    obs.conflicting_autoscalers = vec!["x".into()];
    let d = run(&spec(), &obs, &History::default(), 0);
    assert_eq!(
        (d.desired_replicas, d.limited_by),
        (30, Some(LimitedBy::AmbiguousSelector))
    );
}

#[test]
fn rule_2_zero_replicas_beat_range_correction() {
    let d = run(
        &spec().min(2),
        &Observation::test(0, vec![]),
        &History::default(),
        0,
    );
    assert_eq!(d.limited_by, Some(LimitedBy::ScalingDisabled));
    assert_eq!(d.scale_to, None);
}

#[test]
fn rule_3_range_correction_beats_metrics_and_windows() {
    let mut spec = spec();
    spec.downscale_forbidden_window_seconds = Some(600);
    let history = History {
        last_scale_time: Some(t0()),
        ..History::default()
    };
    let d = run(&spec, &Observation::test(25, vec![]), &history, 10);
    assert_eq!(
        (d.desired_replicas, d.limited_by),
        (20, Some(LimitedBy::MaxReplicas))
    );
}

#[test]
fn rule_4_min_available_beats_metrics() {
    let mut spec = spec();
    spec.min_available_replica_percentage = Some(80);
    let mut obs = hot();
    obs.pods[0].ready = Some(false);
    let d = run(&spec, &obs, &History::default(), 0);
    assert_eq!(
        (d.desired_replicas, d.limited_by),
        (4, Some(LimitedBy::MinAvailable))
    );
}

#[test]
fn rule_5_tolerance_reports_no_change() {
    let obs = Observation::test(4, pods(4, |p| p.cpu(1000, Some(520))));
    let d = run(&spec(), &obs, &History::default(), 0);
    assert_eq!(
        (d.desired_replicas, d.limited_by),
        (4, Some(LimitedBy::Tolerance))
    );
}

#[test]
fn rule_5_within_watermarks_reports_no_change() {
    let spec = HorizontalPodAutoscalerPlusSpec::test().metric(MetricSpec::external(
        "q",
        MetricTarget::watermarks("50", "100"),
    ));
    let obs = Observation::test(4, pods(4, |p| p.cpu(100, None))).external("q", 75_000);
    let d = run(&spec, &obs, &History::default(), 0);
    assert_eq!(
        (d.desired_replicas, d.limited_by),
        (4, Some(LimitedBy::WithinWatermarks))
    );
}

#[test]
fn rule_6_stabilization_before_rate_limits() {
    let history = History {
        recommendations: vec![crate::horizontal::history::TimedReplicas {
            at: ago(t0(), 60),
            replicas: 4,
        }],
        ..History::default()
    };
    let obs = Observation::test(4, pods(4, |p| p.cpu(1000, Some(100))));
    let d = run(&spec(), &obs, &history, 0);
    assert_eq!(
        (d.desired_replicas, d.limited_by),
        (4, Some(LimitedBy::Stabilization))
    );
}

#[test]
fn rule_7_tighter_rate_limit_wins() {
    // Upstream's max(2×, 4) allows 8; a 25 % factor allows 5.
    let d = run(&spec().up_limit("25"), &hot(), &History::default(), 0);
    assert_eq!(
        (d.desired_replicas, d.limited_by),
        (5, Some(LimitedBy::ScaleUpLimit))
    );
    // Controller flag --scale-up-limit-factor 1.5 → 50 % → 6; the object's field overrides it.
    let cfg = ControllerConfig {
        scale_up_limit_factor: Some(1.5),
        ..ControllerConfig::default()
    };
    let d = run_cfg(&spec(), &hot(), &History::default(), 0, &cfg);
    assert_eq!(d.desired_replicas, 6);
    let d = run_cfg(&spec().up_limit("25"), &hot(), &History::default(), 0, &cfg);
    assert_eq!(d.desired_replicas, 5);
}

#[test]
fn rule_8_max_replicas_after_rate_limits() {
    let d = run(&spec().max(6), &hot(), &History::default(), 0);
    assert_eq!(
        (d.desired_replicas, d.limited_by),
        (6, Some(LimitedBy::MaxReplicas))
    );
}

#[test]
fn rule_9_forbidden_window_after_limits() {
    let mut spec = spec();
    spec.upscale_forbidden_window_seconds = Some(120);
    let history = History {
        last_scale_time: Some(t0()),
        ..History::default()
    };
    let d = run(&spec, &hot(), &history, 60);
    assert_eq!(
        (d.desired_replicas, d.limited_by),
        (4, Some(LimitedBy::ForbiddenWindow))
    );
    assert_eq!(d.countdowns[0].seconds_left, 60);
    let d = run(&spec, &hot(), &history, 121);
    assert_eq!(d.desired_replicas, 8);
}

#[test]
fn rule_10_watermark_delay() {
    let mut spec = HorizontalPodAutoscalerPlusSpec::test()
        .max(50)
        .metric(MetricSpec::external(
            "q",
            MetricTarget::watermarks("50", "100"),
        ));
    spec.upscale_delay_above_watermark_seconds = Some(30);
    let obs = Observation::test(4, pods(4, |p| p.cpu(100, None))).external("q", 200_000);
    let first = run(&spec, &obs, &History::default(), 0);
    assert_eq!(
        (first.desired_replicas, first.limited_by),
        (4, Some(LimitedBy::WatermarkDelay))
    );
    let later = run(&spec, &obs, &first.history, 31);
    assert_eq!(later.desired_replicas, 8);
    // Back inside the band resets the clock.
    let calm = Observation::test(4, pods(4, |p| p.cpu(100, None))).external("q", 75_000);
    let reset = run(&spec, &calm, &first.history, 10);
    assert_eq!(reset.history.above_high_since, None);
}

#[test]
fn rule_11_paused_reports_without_writing() {
    let mut spec = spec();
    spec.paused = true;
    spec.dry_run = true;
    let d = run(&spec, &hot(), &History::default(), 0);
    assert_eq!((d.desired_replicas, d.scale_to), (8, None));
    assert_eq!(d.limited_by, Some(LimitedBy::Paused));
}

#[test]
fn rule_11_cron_hold_beats_rollout_and_dry_run() {
    let mut spec = spec();
    spec.dry_run = true;
    spec.pause_during_rollout = true;
    let mut obs = hot();
    obs.held_by = Some("default/nightly".into());
    obs.rollout = Some(RolloutState {
        generation: 2,
        observed_generation: 1,
        updated_replicas: 0,
        desired_replicas: 4,
    });
    let d = run(&spec, &obs, &History::default(), 0);
    assert_eq!((d.desired_replicas, d.scale_to), (4, None));
    assert_eq!(d.limited_by, Some(LimitedBy::CronHold));
    obs.held_by = None;
    let d = run(&spec, &obs, &History::default(), 0);
    assert_eq!(d.limited_by, Some(LimitedBy::Rollout));
    obs.rollout = Some(RolloutState {
        generation: 2,
        observed_generation: 2,
        updated_replicas: 4,
        desired_replicas: 4,
    });
    let d = run(&spec, &obs, &History::default(), 0);
    assert_eq!((d.desired_replicas, d.scale_to), (8, None));
    assert_eq!(d.limited_by, Some(LimitedBy::DryRun));
}

#[test]
fn unlimited_decision_writes_and_says_why() {
    let obs = Observation::test(4, pods(4, |p| p.cpu(1000, Some(750))));
    let d = run(&spec(), &obs, &History::default(), 0);
    assert_eq!(
        (d.desired_replicas, d.scale_to, d.limited_by),
        (6, Some(6), None)
    );
    assert!(d.reason.contains("cpu above target"), "{}", d.reason);
}

#[test]
fn sync_period_follows_the_object_at_once() {
    let mut spec = spec();
    let d = run(&spec, &hot(), &History::default(), 0);
    assert_eq!(d.next_sync_seconds, 5);
    spec.sync_period_seconds = Some(30);
    let d = run(&spec, &hot(), &History::default(), 0);
    assert_eq!(d.next_sync_seconds, 30);
    let cfg = ControllerConfig {
        min_sync_period_seconds: 60,
        ..ControllerConfig::default()
    };
    let d = run_cfg(&spec, &hot(), &History::default(), 0, &cfg);
    assert_eq!(d.next_sync_seconds, 60);
}

#[test]
fn status_after_keeps_transition_times_and_fills_columns() {
    use crate::horizontal::status::status_after;
    let spec = spec();
    let d = run(&spec, &hot(), &History::default(), 0);
    let first = status_after(&spec, None, &d, Some(3), true, t0());
    assert_eq!(first.reference.as_deref(), Some("Deployment/web"));
    assert_eq!(first.targets_summary.as_deref(), Some("cpu: 150%/50%"));
    assert_eq!(first.desired_replicas, 8);
    assert!(first.last_scale_time.is_some());
    let last = first.last_decision.as_ref().unwrap();
    assert_eq!(last.limited_by.as_deref(), Some("scaleUpLimit"));
    assert_eq!(last.proposals[0].replicas, Some(12));
    // Same statuses a minute later keep their lastTransitionTime.
    let later = t0() + jiff::SignedDuration::from_secs(60);
    let second = status_after(&spec, Some(&first), &d, Some(3), false, later);
    let able = |s: &crate::api::hpa_plus::HorizontalPodAutoscalerPlusStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "ScalingActive")
            .unwrap()
            .last_transition_time
            .clone()
    };
    assert_eq!(able(&first), able(&second));
    assert_eq!(second.last_scale_time, first.last_scale_time);
}
