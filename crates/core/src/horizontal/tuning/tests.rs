//! Hand-computed vectors for [`tune`] and the invariants it keeps (never raises, never below the
//! floor, monotone in the peaks).

use proptest::prelude::*;

use super::*;
use crate::api::hpa_plus::{MetricTarget, UtilizationBase};
use crate::horizontal::observation::ContainerSample;

const NOW: i64 = 1_767_225_600 + 30 * 86_400 + 1800;

fn now() -> Timestamp {
    Timestamp::from_second(NOW).unwrap()
}

/// `peaks[k]` (milli) recorded on day k before now (0 = the last 24 hours), on `metric`: half
/// of it in the day's first hour, all of it 21 hours later.
fn history(metric: &str, peaks: &[i64]) -> LoadHistory {
    let mut h = LoadHistory::default();
    record(&mut h, metric, peaks);
    h
}

fn record(h: &mut LoadHistory, metric: &str, peaks: &[i64]) {
    for (k, &p) in peaks.iter().enumerate().rev() {
        let first_hour = now() - SignedDuration::from_hours(24 * k as i64 + 23);
        h.record(metric, first_hour, p / 2, 30);
        h.record(metric, first_hour + SignedDuration::from_hours(21), p, 30);
    }
}

/// One container requesting 1 CPU (limit 2).
fn pod() -> PodSample {
    PodSample {
        containers: vec![ContainerSample {
            name: "app".into(),
            requests: [("cpu".to_owned(), 1000)].into(),
            limits: [("cpu".to_owned(), 2000)].into(),
            ..ContainerSample::default()
        }],
        ..PodSample::default()
    }
}

fn cpu50() -> MetricSpec {
    MetricSpec::resource("cpu", MetricTarget::utilization(50))
}

struct Case {
    spec: HorizontalPodAutoscalerPlusSpec,
    settings: MinReplicasTuning,
    history: LoadHistory,
    pod: PodSample,
    config: ControllerConfig,
    last_applied: Option<Timestamp>,
    held_by: Option<&'static str>,
    excluded_by: Option<&'static str>,
}

impl Case {
    fn new(min: i32, peaks: &[i64]) -> Self {
        Self {
            spec: HorizontalPodAutoscalerPlusSpec::test()
                .min(min)
                .max(40)
                .metric(cpu50()),
            settings: MinReplicasTuning {
                mode: TuningMode::Apply,
                lookback_days: None,
                floor: None,
            },
            history: history("cpu", peaks),
            pod: pod(),
            config: ControllerConfig::default(),
            last_applied: None,
            held_by: None,
            excluded_by: None,
        }
    }

    fn tune(&self) -> Tuning {
        tune(&TuningInput {
            spec: &self.spec,
            settings: &self.settings,
            history: &self.history,
            pod: &self.pod,
            config: &self.config,
            last_applied: self.last_applied,
            held_by: self.held_by,
            excluded_by: self.excluded_by,
            now: now(),
        })
    }
}

const WEEK_AT_1500M: [i64; 7] = [1500; 7];

#[test]
fn linear_weights_favour_recent_days() {
    // 7 days, weights 7..1 (sum 28): (1400 × 27 + 8400 × 1) / 28 = 1650.
    assert_eq!(weighted(&[1400, 1400, 1400, 1400, 1400, 1400, 8400]), 1650);
    // (8400 × 7 + 1400 × 21) / 28 = 3150.
    assert_eq!(weighted(&[8400, 1400, 1400, 1400, 1400, 1400, 1400]), 3150);
    // Rounded up: (2 × 1 + 1 × 0) / 3 = 0.67 → 1.
    assert_eq!(weighted(&[1, 0]), 1);
    assert_eq!(weighted(&[]), 0);
}

#[test]
fn a_week_at_one_and_a_half_cores_needs_three_pods_of_one_core_at_50_percent() {
    // 1500m over 1000m requests = 150 %; 150 / 50 = 3 replicas.
    let t = Case::new(10, &WEEK_AT_1500M).tune();
    assert_eq!(t.needed, Some(3));
    assert_eq!(t.proposed, Some(3));
    assert_eq!(t.reason, TuningReason::Lowered);
    assert!(t.apply);
    assert!(t.low_load, "3 is fewer than half of 10");
    assert_eq!(t.peaks[0].weighted_peak, 1500);
    assert!(t.message.contains("from 10 to 3"), "{}", t.message);
}

#[test]
fn an_old_spike_weighs_one_twenty_eighth() {
    // Weighted 1650m → 165 % / 50 % = 3.3 → 4 (the plain maximum, 8400m, would need 17).
    let t = Case::new(7, &[1400, 1400, 1400, 1400, 1400, 1400, 8400]).tune();
    assert_eq!((t.needed, t.proposed), (Some(4), Some(4)));
    assert!(!t.low_load, "4 is not fewer than half of 7");
}

#[test]
fn the_floor_bounds_the_proposal() {
    let mut case = Case::new(10, &WEEK_AT_1500M);
    case.settings.floor = Some(5);
    let t = case.tune();
    assert_eq!((t.proposed, t.reason), (Some(5), TuningReason::Floor));
    case.settings.floor = Some(10);
    let t = case.tune();
    assert_eq!(
        (t.proposed, t.reason, t.apply),
        (None, TuningReason::Floor, false)
    );
}

#[test]
fn peaks_above_min_replicas_never_raise_it() {
    // 6000m → 600 % / 50 % = 12 > 10.
    let t = Case::new(10, &[6000; 7]).tune();
    assert_eq!(t.needed, Some(12));
    assert_eq!(
        (t.proposed, t.reason, t.apply),
        (None, TuningReason::AlreadyLow, false)
    );
}

#[test]
fn a_cron_hold_stops_tuning_and_the_low_load_flag() {
    let mut case = Case::new(10, &WEEK_AT_1500M);
    case.held_by = Some("CronHorizontalPodAutoscaler/nightly");
    let t = case.tune();
    assert_eq!(
        (t.proposed, t.reason, t.low_load),
        (None, TuningReason::HeldByCron, false)
    );
}

#[test]
fn an_excluded_workload_is_never_tuned_nor_flagged() {
    let mut case = Case::new(10, &WEEK_AT_1500M);
    case.excluded_by = Some("tier=quorum");
    let t = case.tune();
    assert_eq!(
        (t.proposed, t.reason, t.low_load, t.apply),
        (None, TuningReason::Excluded, false, false)
    );
    assert!(t.message.contains("tier=quorum"), "{}", t.message);
}

#[test]
fn the_status_keeps_what_was_replaced_until_tuning_lowers_again() {
    let case = Case::new(10, &WEEK_AT_1500M);
    let applied = case.tune();
    assert!(applied.apply);
    let first = tuning_status(&applied, None, 10, &case.history, now());
    assert_eq!(first.previous_min_replicas, Some(10));
    assert_eq!(first.last_applied_time.as_ref().map(|t| t.0), Some(now()));
    assert_eq!(first.proposed, applied.proposed);
    assert_eq!(first.reason, "Lowered");
    // The history it read is stored, and reads back as the same history.
    let stored = first.load_history.clone().expect("history stored");
    assert_eq!(LoadHistory::try_restore(&stored), Ok(case.history.clone()));
    // A later evaluation that does not apply keeps the replaced value and its time.
    let mut later = Case::new(applied.proposed.unwrap(), &WEEK_AT_1500M);
    later.last_applied = Some(now());
    let t = later.tune();
    assert!(!t.apply);
    let second = tuning_status(
        &t,
        Some(&first),
        applied.proposed.unwrap(),
        &later.history,
        now(),
    );
    assert_eq!(second.previous_min_replicas, Some(10));
    assert_eq!(second.last_applied_time, first.last_applied_time);
}

#[test]
fn less_than_the_lookback_does_nothing() {
    let t = Case::new(10, &[1500; 6]).tune();
    assert_eq!(
        (t.proposed, t.reason),
        (None, TuningReason::NotEnoughHistory)
    );
    assert!(t.message.contains("6 of the last 7 days"), "{}", t.message);
    // Seven days with samples, but the oldest only 150 hours back: not a full week yet.
    let mut case = Case::new(10, &WEEK_AT_1500M);
    case.history = LoadHistory::default();
    for hour in 0..=150 {
        let at = now() - SignedDuration::from_hours(hour);
        case.history.record("cpu", at, 1500, 7);
    }
    assert_eq!(case.tune().reason, TuningReason::NotEnoughHistory);
    let mut case = Case::new(10, &[1500; 3]);
    case.settings.lookback_days = Some(3);
    assert_eq!(case.tune().proposed, Some(3));
}

#[test]
fn report_proposes_and_apply_waits_a_day() {
    let mut case = Case::new(10, &WEEK_AT_1500M);
    case.settings.mode = TuningMode::Report;
    let t = case.tune();
    assert_eq!((t.proposed, t.apply), (Some(3), false));
    assert!(t.message.contains("would lower"), "{}", t.message);
    case.settings.mode = TuningMode::Apply;
    case.last_applied = Some(now() - SignedDuration::from_hours(2));
    let t = case.tune();
    assert_eq!(
        (t.proposed, t.reason, t.apply),
        (Some(3), TuningReason::TooSoon, false)
    );
    case.last_applied = Some(now() - SignedDuration::from_hours(24));
    assert!(case.tune().apply);
    case.settings.mode = TuningMode::Off;
    assert_eq!(case.tune().reason, TuningReason::Off);
}

#[test]
fn each_target_type_converts_as_the_controller_does() {
    let mut case = Case::new(20, &[]);
    // Pods AverageValue 100 per pod, 1050 in total → 10.5 → 11.
    case.spec.metrics = vec![MetricSpec::pods("rps", MetricTarget::average("100"))];
    case.history = history("rps", &[1_050_000; 7]);
    assert_eq!(case.tune().needed, Some(11));
    // External Value 200, recorded as value × ready pods = 900 → 4.5 → 5.
    case.spec.metrics = vec![MetricSpec::external("queue", MetricTarget::value("200"))];
    case.history = history("queue", &[900_000; 7]);
    assert_eq!(case.tune().needed, Some(5));
    // External AverageValue 30 per pod, 95 in total → 4.
    case.spec.metrics = vec![MetricSpec::external("queue", MetricTarget::average("30"))];
    assert_eq!(case.tune().needed, Some(30));
    case.history = history("queue", &[95_000; 7]);
    assert_eq!(case.tune().needed, Some(4));
    // CPU AverageValue 500m per pod, 1500m in total → 3.
    case.spec.metrics = vec![MetricSpec::resource("cpu", MetricTarget::average("500m"))];
    case.history = history("cpu", &WEEK_AT_1500M);
    assert_eq!(case.tune().needed, Some(3));
}

#[test]
fn the_largest_metric_need_wins() {
    let mut case = Case::new(20, &WEEK_AT_1500M);
    case.spec
        .metrics
        .push(MetricSpec::external("queue", MetricTarget::average("30")));
    record(&mut case.history, "queue", &[95_000; 7]);
    let t = case.tune();
    assert_eq!(t.needed, Some(4));
    assert_eq!(
        t.peaks.iter().map(|p| p.replicas).collect::<Vec<_>>(),
        [Some(3), Some(4)]
    );
}

#[test]
fn utilization_follows_the_base_and_needs_a_request() {
    let mut case = Case::new(10, &WEEK_AT_1500M);
    // Against the 2-CPU limit: 75 % / 50 % = 1.5 → 2.
    case.config.compute_resource_utilization_ratio_by_limits = true;
    assert_eq!(case.tune().needed, Some(2));
    case.spec.utilization_base = Some(UtilizationBase::Requests);
    assert_eq!(case.tune().needed, Some(3), "the object's base wins");
    case.pod.containers[0].requests.clear();
    let t = case.tune();
    assert_eq!((t.proposed, t.reason), (None, TuningReason::NoMetrics));
}

#[test]
fn a_history_of_i64_max_peaks_needs_the_most_replicas_not_a_panic() {
    // A native HPA's history comes back from an annotation its tenant may write: any peak.
    let mut case = Case::new(10, &[i64::MAX; 7]);
    for (metric, limits) in [(cpu50(), false), (cpu50(), true)] {
        case.spec.metrics = vec![metric];
        case.config.compute_resource_utilization_ratio_by_limits = limits;
        let t = case.tune();
        assert_eq!(t.peaks[0].weighted_peak, i64::MAX);
        assert_eq!(
            (t.needed, t.proposed),
            (Some(i32::MAX), None),
            "limits {limits}"
        );
        assert_eq!(t.reason, TuningReason::AlreadyLow);
    }
    case.spec.metrics = vec![MetricSpec::pods("rps", MetricTarget::average("100"))];
    case.history = history("rps", &[i64::MAX; 7]);
    assert_eq!(case.tune().needed, Some(i32::MAX));
    // The rest of the week at zero, i64::MAX only a week ago: still the most replicas.
    case.spec.metrics = vec![cpu50()];
    case.history = history("cpu", &[0, 0, 0, 0, 0, 0, i64::MAX]);
    let t = case.tune();
    assert!(t.peaks[0].weighted_peak > 0);
    assert_eq!(t.needed, Some(i32::MAX));
}

proptest! {
    /// Never raises, never below the floor (nor 1), and a higher peak on any day never
    /// proposes less.
    #[test]
    fn never_raises_never_below_floor_monotone(
        peaks in proptest::collection::vec(0i64..40_000, 7),
        bumps in proptest::collection::vec(0i64..10_000, 7),
        min in 1i32..40,
        floor in 1i32..40,
    ) {
        let mut case = Case::new(min, &peaks);
        case.settings.floor = Some(floor);
        let t = case.tune();
        if let Some(p) = t.proposed {
            prop_assert!(p < min);
            prop_assert!(p >= floor && p >= 1);
            prop_assert!(t.apply);
        }
        let higher: Vec<i64> = peaks.iter().zip(&bumps).map(|(p, b)| p + b).collect();
        let mut bumped = Case::new(min, &higher);
        bumped.settings.floor = Some(floor);
        let u = bumped.tune();
        prop_assert!(u.needed >= t.needed);
        prop_assert!(u.proposed.unwrap_or(min) >= t.proposed.unwrap_or(min));
    }
}

#[test]
fn the_observed_load_leaves_out_pods_without_a_sample_and_fails_with_a_fetch() {
    let with = |name: &str, usage: Option<Result<i64, String>>| PodSample {
        name: name.to_owned(),
        containers: vec![ContainerSample {
            usage: usage.map(|u| ("cpu".to_owned(), u)).into_iter().collect(),
            ..pod().containers[0].clone()
        }],
        ..pod()
    };
    let spec = HorizontalPodAutoscalerPlusSpec::test().max(40);
    let load = |pods: Vec<PodSample>| {
        observed_load(
            &cpu50(),
            &spec,
            &Observation {
                current_replicas: 3,
                pods,
                ..Observation::default()
            },
        )
    };
    assert_eq!(
        load(vec![
            with("a", Some(Ok(400))),
            with("b", None),
            with("c", Some(Ok(250)))
        ]),
        Some(650),
        "a pod without a sample adds nothing"
    );
    assert_eq!(load(vec![with("a", None), with("b", None)]), None);
    assert_eq!(load(vec![]), None);
    assert_eq!(
        load(vec![
            with("a", Some(Ok(400))),
            with("b", Some(Err("metrics API down".to_owned())))
        ]),
        None,
        "a failed fetch fails the load"
    );
}

#[test]
fn the_observed_load_is_what_one_pod_must_carry_for_the_same_proposal() {
    let ready = |cpu: i64, rps: i64| PodSample {
        name: format!("web-{cpu}"),
        metrics: [("rps".to_owned(), Ok(rps))].into(),
        containers: vec![ContainerSample {
            usage: [("cpu".to_owned(), Ok(cpu))].into(),
            ..pod().containers[0].clone()
        }],
        ..pod()
    };
    let observed = Observation {
        current_replicas: 3,
        pods: vec![ready(400, 10_000), ready(600, 20_000), ready(500, 30_000)],
        external_metrics: [("queue".to_owned(), Ok(vec![200_000, 100_000]))].into(),
        ..Observation::default()
    };
    let spec = HorizontalPodAutoscalerPlusSpec::test().max(40);
    let load = |m: MetricSpec| observed_load(&m, &spec, &observed);
    assert_eq!(load(cpu50()), Some(1500), "the pods' sum");
    assert_eq!(
        load(MetricSpec::pods("rps", MetricTarget::average("10"))),
        Some(60_000)
    );
    assert_eq!(
        load(MetricSpec::external("queue", MetricTarget::average("30"))),
        Some(300_000)
    );
    assert_eq!(
        load(MetricSpec::external("queue", MetricTarget::value("30"))),
        Some(900_000),
        "a Value target's proposal is ready × value / target"
    );
    assert_eq!(
        load(MetricSpec::external(
            "queue",
            MetricTarget::watermarks("10", "20")
        )),
        Some(900_000)
    );
    assert_eq!(
        load(MetricSpec::external("absent", MetricTarget::value("30"))),
        None
    );
    // The proposal the three pods get for Value 30 (ceil(3 × 300 / 30) = 30) is the one a
    // single pod carrying the load gets.
    let mut case = Case::new(40, &[]);
    case.spec.metrics = vec![MetricSpec::external("queue", MetricTarget::value("30"))];
    case.history = history("queue", &[900_000; 7]);
    assert_eq!(case.tune().needed, Some(30));
}
