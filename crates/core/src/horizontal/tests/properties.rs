//! Property tests for the decision's invariants.

use proptest::prelude::*;

use super::fixtures::*;
use crate::api::hpa_plus::{
    HorizontalPodAutoscalerPlusSpec, HpaScalingRules, MetricSpec, MetricTarget,
};
use crate::horizontal::history::TimedReplicas;
use crate::horizontal::observation::Observation;
use crate::horizontal::{History, LimitedBy};

fn cpu_spec(min: i32, max: i32, target: i32) -> HorizontalPodAutoscalerPlusSpec {
    HorizontalPodAutoscalerPlusSpec::test()
        .min(min)
        .max(max)
        .metric(MetricSpec::resource(
            "cpu",
            MetricTarget::utilization(target),
        ))
}

proptest! {
    #[test]
    fn decision_within_min_and_max(
        min in 1i32..10, span in 0i32..40, current in 1i32..60, usage in 0i64..5000, target in 10i32..150,
    ) {
        let max = min + span;
        let obs = Observation::test(current, pods(current as usize, |p| p.cpu(1000, Some(usage))));
        let d = run(&cpu_spec(min, max, target), &obs, &History::default(), 0);
        prop_assert!(d.desired_replicas >= min && d.desired_replicas <= max, "{d:?}");
    }

    #[test]
    fn nothing_changes_within_tolerance(current in 1i32..50, target in 20i32..100, f in 0i64..=100) {
        // Utilization (whole percent, as upstream truncates it) inside [0.9, 1.1] × target.
        let lo = (i64::from(target) * 9 + 9) / 10;
        let hi = i64::from(target) * 11 / 10;
        let util = lo + (hi - lo) * f / 100;
        let obs = Observation::test(current, pods(current as usize, |p| p.cpu(1000, Some(util * 10))));
        let d = run(&cpu_spec(1, 100, target), &obs, &History::default(), 0);
        prop_assert_eq!(d.desired_replicas, current);
        prop_assert_eq!(d.scale_to, None);
    }

    #[test]
    fn stabilized_scale_down_keeps_the_window_max(
        current in 2i32..40, past in proptest::collection::vec((1i64..299, 1i32..40), 1..8), usage in 0i64..400,
    ) {
        let history = History {
            recommendations: past.iter().map(|(age, r)| TimedReplicas { at: ago(t0(), *age), replicas: *r }).collect(),
            ..History::default()
        };
        let spec = cpu_spec(1, 100, 50).scale_down(HpaScalingRules::window(300));
        let obs = Observation::test(current, pods(current as usize, |p| p.cpu(1000, Some(usage))));
        let d = run(&spec, &obs, &history, 0);
        if d.desired_replicas < current {
            let highest = past.iter().map(|(_, r)| *r).max().unwrap_or(0);
            prop_assert!(d.desired_replicas >= highest.min(current), "{d:?}");
        }
    }

    #[test]
    fn limit_factors_never_exceeded(
        current in 1i32..80, usage in 0i64..8000, up in 1u32..100, down in 1u32..100,
    ) {
        let spec = cpu_spec(1, 1000, 50).up_limit(&up.to_string()).down_limit(&down.to_string());
        let obs = Observation::test(current, pods(current as usize, |p| p.cpu(1000, Some(usage))));
        let d = run(&spec, &obs, &History::default(), 0);
        let step_up = ((f64::from(up) * f64::from(current) / 100.0).floor() as i32).max(1);
        let step_down = ((f64::from(down) * f64::from(current) / 100.0).floor() as i32).max(1);
        prop_assert!(d.desired_replicas <= current + step_up, "{d:?}");
        prop_assert!(d.desired_replicas >= current - step_down, "{d:?}");
    }

    #[test]
    fn dry_run_never_writes(current in 1i32..30, usage in 0i64..5000) {
        let mut spec = cpu_spec(1, 100, 50);
        spec.dry_run = true;
        let obs = Observation::test(current, pods(current as usize, |p| p.cpu(1000, Some(usage))));
        let d = run(&spec, &obs, &History::default(), 0);
        prop_assert_eq!(d.scale_to, None);
        if d.desired_replicas != current {
            prop_assert_eq!(d.limited_by, Some(LimitedBy::DryRun));
        }
    }
}
