//! [`evaluate`] as the controller and the replays use it: tuning's minimum reaches the
//! decision (and a failed write keeps the old one), the held history is what a successor
//! reads back, and what is held for speed changes no answer.

use jiff::SignedDuration;

use super::*;
use crate::api::hpa_plus::{MetricSpec, MetricTarget};
use crate::horizontal::load_history;
use crate::horizontal::observation::ContainerSample;
use crate::horizontal::predictive::PredictiveReason;

const NOW: i64 = 1_767_225_600 + 30 * 86_400 + 1800;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(NOW + second).unwrap()
}

/// `pods` pods of one container requesting 1 CPU, each using `milli_each`.
fn observed(pods: i32, milli_each: i64) -> Observation {
    let pod = |i: i32| PodSample {
        name: format!("p{i}"),
        start_time: Some(at(-3600)),
        ready_transition_time: Some(at(-3600)),
        containers: vec![ContainerSample {
            name: "app".into(),
            requests: [("cpu".to_owned(), 1000)].into(),
            usage: [("cpu".to_owned(), Ok(milli_each))].into(),
            ..ContainerSample::default()
        }],
        ..PodSample::default()
    };
    Observation {
        current_replicas: pods,
        pods: (0..pods).map(pod).collect(),
        ..Observation::default()
    }
}

fn spec(min: i32) -> HorizontalPodAutoscalerPlusSpec {
    HorizontalPodAutoscalerPlusSpec::test()
        .min(min)
        .max(40)
        .metric(MetricSpec::resource("cpu", MetricTarget::utilization(50)))
}

/// A week of hourly CPU peaks of 900 m (two pods at 50 %) before [`at`]`(0)`: the whole
/// lookback tuning keeps.
fn quiet_week() -> LoadHistory {
    let mut h = LoadHistory::default();
    for hour in (1..=167).rev() {
        h.record("cpu", at(0) - SignedDuration::from_hours(hour), 900, 7);
    }
    h
}

fn apply_tuning() -> MinReplicasTuning {
    MinReplicasTuning {
        mode: TuningMode::Apply,
        lookback_days: None,
        floor: None,
    }
}

struct Run {
    spec: HorizontalPodAutoscalerPlusSpec,
    tuning: MinReplicasTuning,
    config: ControllerConfig,
}

impl Run {
    fn evaluate(
        &self,
        observed: &Observation,
        held: Held,
        write: TuningWrite<'_>,
        now: Timestamp,
    ) -> Evaluation {
        evaluate(
            &EvaluationInput {
                spec: &self.spec,
                observed,
                stored_memory: None,
                config: &self.config,
                tuning: &self.tuning,
                held_by: None,
                excluded_by: None,
                tuning_write: write,
                startup_seconds: None,
                history_bytes: None,
                tuning_history_bytes: None,
                now,
            },
            held,
        )
    }
}

#[test]
fn the_lowered_minimum_is_what_the_decision_uses_and_a_failed_write_keeps_the_old_one() {
    let run = Run {
        spec: spec(10),
        tuning: apply_tuning(),
        config: ControllerConfig::default(),
    };
    let held = Held {
        tuning: Some(TuningHeld {
            loads: quiet_week(),
            status: None,
        }),
        ..Held::default()
    };
    // One pod at 45 %: the reactive path wants 1, the spec's minimum says 10.
    let obs = observed(1, 450);
    let lowered = run.evaluate(&obs, held.clone(), TuningWrite::Allowed, at(0));
    let tuned = lowered.tuned.as_ref().unwrap();
    assert!(tuned.tuning.apply, "{}", tuned.tuning.message);
    let min = lowered.lowered_min_replicas.unwrap();
    assert!(min < 10, "{min}");
    assert_eq!(Some(min), tuned.tuning.proposed);
    assert_eq!(
        lowered.decision.scale_to,
        Some(min),
        "{}",
        lowered.decision.reason
    );
    assert_eq!(lowered.spec(&run.spec).min_replicas, Some(min));
    let said: Vec<&str> = lowered.events.iter().map(|e| e.reason).collect();
    assert_eq!(
        said,
        ["MinReplicasLowered", "LowLoad"],
        "the week needs fewer than half of 10"
    );

    let failed = run.evaluate(&obs, held, TuningWrite::Failed("forbidden"), at(0));
    assert_eq!(failed.lowered_min_replicas, None);
    assert_eq!(
        failed.decision.scale_to,
        Some(10),
        "{}",
        failed.decision.reason
    );
    let tuned = failed.tuned.as_ref().unwrap();
    assert!(!tuned.tuning.apply);
    assert!(
        tuned
            .status
            .message
            .ends_with(&format!("could not lower minReplicas to {min}: forbidden")),
        "{}",
        tuned.status.message
    );
    assert_eq!(tuned.status.last_applied_time, None, "nothing was applied");
    let said: Vec<(bool, &str)> = failed
        .events
        .iter()
        .map(|e| (e.warning, e.reason))
        .collect();
    assert_eq!(said[0], (true, "FailedTuneMinReplicas"));
    assert!(
        !said.iter().any(|e| e.1 == "MinReplicasLowered"),
        "{said:?}"
    );
}

#[test]
fn the_held_history_is_what_a_successor_reads_back() {
    let run = Run {
        spec: spec(3),
        tuning: MinReplicasTuning::default(),
        config: ControllerConfig::default(),
    };
    let mut first = run.evaluate(
        &observed(1, 450),
        Held::default(),
        TuningWrite::Allowed,
        at(0),
    );
    assert_eq!(first.decision.scale_to, Some(3));
    assert!(first.tuned.is_none() && first.predicted.is_none());
    first.scaled(at(0), 1, 3);
    let stored = first.store_memory();
    assert_eq!(first.held.history, Some(memory::restore(&stored)));
    // The next evaluation from what this process holds, and from the object alone (a
    // restarted controller), decide the same.
    let obs = observed(3, 100);
    let own = run.evaluate(&obs, first.held.clone(), TuningWrite::Allowed, at(15));
    let restarted = evaluate(
        &EvaluationInput {
            spec: &run.spec,
            observed: &obs,
            stored_memory: Some(&stored),
            config: &run.config,
            tuning: &run.tuning,
            held_by: None,
            excluded_by: None,
            tuning_write: TuningWrite::Allowed,
            startup_seconds: None,
            history_bytes: None,
            tuning_history_bytes: None,
            now: at(15),
        },
        Held::default(),
    );
    // The object's memory reads back with its newest recommendation standing until now
    // (`memory::extended`): the histories differ by that point only, the decisions not at all.
    let decided = |e: &Evaluation| {
        let d = &e.decision;
        (
            d.desired_replicas,
            d.scale_to,
            d.limited_by,
            d.reason.clone(),
        )
    };
    assert_eq!(decided(&own), decided(&restarted));
    assert_eq!(own.decision.proposals, restarted.decision.proposals);
    assert_eq!(own.memory_ignored, None);
}

#[test]
fn parts_that_are_off_are_dropped_and_parts_turned_on_are_restored() {
    let mut held = Held {
        tuning: Some(TuningHeld::default()),
        ..Held::default()
    };
    let mut predictive = spec(1);
    predictive.predictive = Some(Predictive {
        mode: PredictiveMode::Scale,
        ..Predictive::default()
    });
    let stored_series = LoadSeries::new(BUCKET_SECONDS).store();
    let stored_status = PredictiveStatus {
        history: Some(stored_series),
        reason: "NotEnoughHistory".into(),
        ..PredictiveStatus::default()
    };
    let restored = held.restore_missing(
        &predictive,
        &MinReplicasTuning::default(),
        Stored {
            tuning: None,
            predictive: Some(&stored_status),
        },
    );
    assert!(held.tuning.is_none(), "tuning is off");
    assert!(restored.predictive && !restored.tuning);
    assert_eq!(
        held.predictive.as_ref().unwrap().status.as_ref(),
        Some(&stored_status)
    );
    // Held already: not read again.
    let again = held.restore_missing(
        &predictive,
        &MinReplicasTuning::default(),
        Stored::default(),
    );
    assert!(!again.predictive);
    assert!(held.predictive.is_some());
    // A series of another bucket width is ignored whole, and said.
    let mut other = Held::default();
    let wrong = PredictiveStatus {
        history: Some(LoadSeries::new(60).store()),
        ..PredictiveStatus::default()
    };
    let restored = other.restore_missing(
        &predictive,
        &MinReplicasTuning::default(),
        Stored {
            tuning: None,
            predictive: Some(&wrong),
        },
    );
    assert!(restored.predictive_ignored.is_some());
}

/// Three days of a daily rush (8:00–10:00 at 6 pods' worth) on 2 pods, every 5 minutes: the
/// decisions and statuses with the held copy of the ended buckets are those made with it
/// dropped before every evaluation.
#[test]
fn the_held_copy_of_the_ended_buckets_changes_no_answer() {
    let mut s = spec(2);
    s.predictive = Some(Predictive {
        mode: PredictiveMode::Scale,
        ..Predictive::default()
    });
    let run = Run {
        spec: s,
        tuning: MinReplicasTuning::default(),
        config: ControllerConfig::default(),
    };
    let (mut cached, mut fresh) = (Held::default(), Held::default());
    let mut raised = 0;
    for step in 0..(3 * 288) {
        let now = at(step * 300);
        let hour = (step % 288) / 12;
        let load = if (8..10).contains(&hour) { 1_500 } else { 300 };
        let obs = observed(2, load);
        if let Some(p) = fresh.predictive.as_mut() {
            p.ended = None;
        }
        let a = run.evaluate(&obs, cached, TuningWrite::Allowed, now);
        let b = run.evaluate(&obs, fresh, TuningWrite::Allowed, now);
        assert_eq!(a.decision, b.decision, "step {step}");
        assert_eq!(a.predicted, b.predicted, "step {step}");
        raised += usize::from(
            a.predicted
                .as_ref()
                .is_some_and(|p| p.raised.reason == PredictiveReason::Raised),
        );
        cached = a.held;
        fresh = b.held;
    }
    let series = &cached.predictive.as_ref().unwrap().series;
    assert!(
        series.points("cpu").len() > 200,
        "{}",
        series.points("cpu").len()
    );
    assert!(raised > 0, "the third day's rush is forecast and acted on");
}

/// With `history_bytes` (a native HPA's annotation), the history in every status fits, and
/// what the controller holds is what that status restores: a restart forecasts from the same.
#[test]
fn a_bounded_history_fits_its_bytes_and_is_what_the_controller_holds() {
    let mut s = spec(2);
    s.predictive = Some(Predictive {
        mode: PredictiveMode::Scale,
        ..Predictive::default()
    });
    let bytes = 1_024;
    let (config, tuning) = (ControllerConfig::default(), MinReplicasTuning::default());
    let (mut bounded, mut unbounded) = (Held::default(), Held::default());
    let mut largest = 0;
    for step in 0..(3 * 96) {
        let now = at(step * 900);
        let obs = observed(2, 300 + 7 * step);
        let input = EvaluationInput {
            spec: &s,
            observed: &obs,
            stored_memory: None,
            config: &config,
            tuning: &tuning,
            held_by: None,
            excluded_by: None,
            tuning_write: TuningWrite::Allowed,
            startup_seconds: None,
            history_bytes: Some(bytes),
            tuning_history_bytes: None,
            now,
        };
        let a = evaluate(&input, bounded);
        let b = evaluate(
            &EvaluationInput {
                history_bytes: None,
                ..input
            },
            unbounded,
        );
        let history = a.predicted.as_ref().and_then(|p| p.status.history.clone());
        let history = history.unwrap_or_default();
        let written = serde_json::to_vec(&history).unwrap_or_default().len();
        assert!(written <= bytes, "step {step}: {written}");
        let held = &a.held.predictive.as_ref().unwrap().series;
        let mut restored = LoadSeries::try_restore(&history, BUCKET_SECONDS).unwrap();
        restored.restore_means(&history);
        assert_eq!(restored.store(), held.ended(now).store(), "step {step}");
        let full = b.predicted.as_ref().and_then(|p| p.status.history.clone());
        largest = largest.max(serde_json::to_vec(&full).unwrap_or_default().len());
        bounded = a.held;
        unbounded = b.held;
    }
    assert!(largest > 2 * bytes, "unbounded, it grew to {largest}");
}

fn tuning(proposed: Option<i32>, low_load: bool, apply: bool) -> Tuning {
    Tuning {
        proposed,
        needed: Some(3),
        peaks: Vec::new(),
        reason: tuning::TuningReason::Lowered,
        low_load,
        apply,
        message: "the weighted peaks of 7 days need 3 replicas".into(),
    }
}

fn status_of(t: &Tuning) -> MinReplicasTuningStatus {
    MinReplicasTuningStatus {
        proposed: t.proposed,
        low_load: t.low_load,
        ..MinReplicasTuningStatus::default()
    }
}

fn reasons(events: &[OwedEvent]) -> Vec<&'static str> {
    events.iter().map(|e| e.reason).collect()
}

#[test]
fn a_proposal_and_low_load_arriving_together_are_both_said_once() {
    let first = tuning(Some(3), true, false);
    let said = tuning_events(&first, None, 10);
    assert_eq!(reasons(&said), ["MinReplicasTuningProposal", "LowLoad"]);
    assert!(said[1].warning, "LowLoad is a Warning");
    let before = status_of(&first);
    // The next evaluation, with the same proposal and the flag still on, says nothing.
    assert!(tuning_events(&tuning(Some(3), true, false), Some(&before), 10).is_empty());
    // A changed proposal is said again; the flag is not.
    assert_eq!(
        reasons(&tuning_events(
            &tuning(Some(2), true, false),
            Some(&before),
            10
        )),
        ["MinReplicasTuningProposal"]
    );
}

#[test]
fn applying_says_what_was_replaced() {
    let said = tuning_events(&tuning(Some(3), false, true), None, 10);
    assert_eq!(reasons(&said), ["MinReplicasLowered"]);
    assert!(
        said[0].note.starts_with("minReplicas lowered from 10 to 3"),
        "{}",
        said[0].note
    );
}

fn forecast_and_raise(replicas: Option<i32>) -> (Forecast, Raise) {
    (
        Forecast {
            metrics: Vec::new(),
            replicas,
            lead_seconds: 920,
            reason: PredictiveReason::LargeError,
            message: "the recent forecasts of rps were 80% off".into(),
        },
        Raise {
            scale_to: None,
            desired_replicas: 2,
            acting: false,
            reason: PredictiveReason::BelowReactive,
            message: "the load forecast for the next 920s needs 6 replicas".into(),
        },
    )
}

fn trusted_status(replicas: Option<i32>) -> PredictiveStatus {
    PredictiveStatus {
        forecast_replicas: replicas,
        recent_error_percent: Some(3),
        ..PredictiveStatus::default()
    }
}

#[test]
fn events_say_when_the_forecast_becomes_trusted_and_when_it_stops() {
    let event = |before: Option<Option<i32>>, now: Option<i32>| {
        let (f, r) = forecast_and_raise(now);
        let previous = before.map(trusted_status);
        prediction_event(previous.as_ref(), &trusted_status(now), &f, &r)
    };
    let reason = |e: Option<OwedEvent>| e.map(|e| e.reason);
    assert_eq!(reason(event(None, Some(6))), Some("PredictionOn"));
    assert_eq!(reason(event(Some(None), Some(6))), Some("PredictionOn"));
    assert_eq!(reason(event(Some(Some(6)), Some(7))), None);
    assert_eq!(reason(event(Some(Some(6)), None)), Some("PredictionOff"));
    assert_eq!(reason(event(None, None)), None, "never on, never off");
    assert!(event(Some(Some(6)), None).unwrap().note.contains("80% off"));
    // Declining at one phase (`CostsMore`) and acting at the next is one trusted model: no
    // Event either way.
    let declined = PredictiveStatus {
        reason: PredictiveReason::CostsMore.as_str().into(),
        ..trusted_status(None)
    };
    let (f, r) = forecast_and_raise(None);
    assert_eq!(
        prediction_event(Some(&trusted_status(Some(6))), &declined, &f, &r),
        None
    );
    let (f, r) = forecast_and_raise(Some(6));
    assert_eq!(
        prediction_event(Some(&declined), &trusted_status(Some(6)), &f, &r),
        None
    );
    assert!(
        event(None, Some(6))
            .unwrap()
            .note
            .contains("recent error 3%")
    );
}

#[test]
fn the_raised_decision_replaces_the_reactive_scale_and_says_why() {
    let reactive = Decision {
        current_replicas: 2,
        desired_replicas: 2,
        scale_to: None,
        recommended_replicas: Some(2),
        proposals: Vec::new(),
        limited_by: None,
        reason: String::new(),
        conditions: Vec::new(),
        countdowns: Vec::new(),
        next_sync_seconds: 5,
        history: History::default(),
    };
    let (_, not_raised) = forecast_and_raise(Some(6));
    assert_eq!(raised_decision(reactive.clone(), &not_raised), reactive);
    let raised = Raise {
        scale_to: Some(6),
        desired_replicas: 6,
        acting: true,
        reason: PredictiveReason::Raised,
        message: "raises the reactive 2 to 6".into(),
    };
    let d = raised_decision(reactive, &raised);
    assert_eq!((d.scale_to, d.desired_replicas), (Some(6), 6));
    assert_eq!(d.reason, "predictive: raises the reactive 2 to 6");
}

/// With `tuning_history_bytes` (a native HPA's annotation), the tuning history in the status
/// fits, and what the controller holds is what that status restores.
#[test]
fn a_bounded_tuning_history_fits_its_bytes_and_is_what_the_controller_holds() {
    let mut loads = LoadHistory::default();
    for m in 0..32 {
        for hour in (1..=720).rev() {
            let when = at(0) - SignedDuration::from_hours(hour);
            loads.record(&format!("m{m}"), when, i64::MAX - hour, 30);
        }
    }
    let settings = MinReplicasTuning {
        mode: TuningMode::Report,
        lookback_days: Some(30),
        floor: None,
    };
    let (s, config, obs) = (spec(2), ControllerConfig::default(), observed(2, 300));
    let held = || Held {
        tuning: Some(TuningHeld {
            loads: loads.clone(),
            status: None,
        }),
        ..Held::default()
    };
    let input = EvaluationInput {
        spec: &s,
        observed: &obs,
        stored_memory: None,
        config: &config,
        tuning: &settings,
        held_by: None,
        excluded_by: None,
        tuning_write: TuningWrite::Allowed,
        startup_seconds: None,
        history_bytes: None,
        tuning_history_bytes: Some(load_history::NATIVE_HISTORY_BYTES),
        now: at(0),
    };
    let bounded = evaluate(&input, held());
    let written = |e: &Evaluation| {
        e.tuned
            .as_ref()
            .and_then(|t| t.status.load_history.clone())
            .unwrap_or_default()
    };
    let stored = written(&bounded);
    let bytes = predictive::stored_bytes(&stored);
    assert!(bytes <= load_history::NATIVE_HISTORY_BYTES, "{bytes}");
    let kept = &bounded.held.tuning.as_ref().unwrap().loads;
    assert_eq!(&LoadHistory::try_restore(&stored).unwrap(), kept);
    // Unbounded (an HPA+, whose status holds it), all of it is written.
    let unbounded = evaluate(
        &EvaluationInput {
            tuning_history_bytes: None,
            ..input
        },
        held(),
    );
    let whole = predictive::stored_bytes(&written(&unbounded));
    assert!(whole > 4 * load_history::NATIVE_HISTORY_BYTES, "{whole}");
}
