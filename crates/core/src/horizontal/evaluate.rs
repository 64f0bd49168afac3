//! One evaluation of a horizontal autoscaler, whole: `minReplicasTuning`, the reactive
//! [`decide`] and `spec.predictive`, in that order, from what was observed and what the
//! controller holds of the object ([`Held`]). The controller and both replays
//! (`HorizontalReplay`, `LoadReplay`) call [`evaluate`]; they only observe before it and write
//! after it, so what a replay shows is what the controller does by construction.
//!
//! The steps:
//! 1. **History.** The decision history resumes ([`memory::resume`]): this process's own, or
//!    on first sight (or when another instance wrote later) the memory the object carries.
//! 2. **Tuning** (`minReplicasTuning` not `Off`, [`super::tuning`]): the load is recorded into
//!    the hourly [`LoadHistory`] and [`tune`] proposes a `minReplicas`. In `Apply` the proposed
//!    minimum is what the decision uses, and the caller writes it to the spec
//!    ([`Evaluation::lowered_min_replicas`]); when that write fails the caller evaluates again,
//!    from the same [`Held`], with [`TuningWrite::Failed`], and the decision keeps the old
//!    minimum (tuning is an optimisation: it must never stop the autoscaler from scaling).
//! 3. **Decision** ([`decide`]) with the spec tuning left.
//! 4. **Prediction** (`spec.predictive` not `Off`, [`super::predictive`]): the load is
//!    recorded into the [`LoadSeries`]; the forecast reads only the buckets that have ended
//!    (the open bucket's peak so far would count a rush due later in it as an error before it
//!    came); in `Scale` [`raise`] lifts the decision ([`raised_decision`]).
//! 5. **Events** the user is owed ([`OwedEvent`]): tuning's, prediction's.
//!
//! After the caller wrote the scale it calls [`Evaluation::scaled`], and keeps exactly what a
//! successor will read back ([`Evaluation::store_memory`]).
//!
//! What is held between evaluations is one value per object ([`Held`]); on first sight the
//! parts that are on are restored from the object ([`Held::restore_missing`]), and the caller
//! may top them up from Prometheus before evaluating (I/O, so not here).

use std::borrow::Cow;

use jiff::Timestamp;

use super::config::ControllerConfig;
use super::decision::{Decision, DecisionInput, decide};
use super::history::History;
use super::load_history::LoadHistory;
use super::memory;
use super::observation::{Observation, PodSample};
use super::peak_series::StoredPeakSeries;
use super::predictive::{
    self, BUCKET_SECONDS, FALLBACK_STARTUP_SECONDS, Fit, Forecast, ForecastInput, LoadSeries,
    PredictiveReason, Raise, RaiseInput, SeasonalRead, forecast_reading, predictive_status, raise,
    refit,
};
use super::tuning::{self, Tuning, TuningInput, tune, tuning_status};
use crate::api::hpa_plus::{
    DecisionMemory, HorizontalPodAutoscalerPlusSpec, MinReplicasTuning, MinReplicasTuningStatus,
    Predictive, PredictiveMode, PredictiveStatus, TuningMode,
};
use crate::stored::StoredStateError;

/// What the controller keeps of one object between its evaluations (and a replay between its
/// steps). Parts that are off are `None`.
#[derive(Clone, Debug, Default)]
pub struct Held {
    /// The decision history; `None` before the first evaluation (first sight).
    pub history: Option<History>,
    /// `minReplicasTuning`'s load history and last status.
    pub tuning: Option<TuningHeld>,
    /// `spec.predictive`'s load series, startup time, fit and last status.
    pub predictive: Option<PredictiveHeld>,
}

/// What tuning keeps.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TuningHeld {
    /// The hourly load peaks tuning reads.
    pub loads: LoadHistory,
    /// The status written last (this process's, else the object's).
    pub status: Option<MinReplicasTuningStatus>,
}

/// What prediction keeps.
#[derive(Clone, Debug)]
pub struct PredictiveHeld {
    /// The load series, the open bucket included.
    pub series: LoadSeries,
    /// The last measured startup time, seconds.
    pub startup_seconds: Option<i64>,
    /// The status written last (this process's, else the object's).
    pub status: Option<PredictiveStatus>,
    /// The season chosen per metric; redone when a bucket ends ([`Fit::through`]).
    pub fit: Option<Fit>,
    /// `series` without its open bucket, its stored form, and that bucket: the forecast's
    /// input and the status's history are the same until a bucket ends, and copying them at
    /// every evaluation was most of a long replay's cost.
    ended: Option<Ended>,
}

/// The ended buckets of a [`PredictiveHeld`]'s series as of one open bucket.
#[derive(Clone, Debug)]
struct Ended {
    open: i64,
    series: LoadSeries,
    stored: StoredPeakSeries,
    /// What the last forecast read from `series` ([`ForecastInput::reads`]).
    reads: Vec<SeasonalRead>,
}

impl PredictiveHeld {
    /// A held prediction over `series`, as restored or seeded.
    pub fn new(series: LoadSeries, status: Option<PredictiveStatus>) -> Self {
        Self {
            series,
            startup_seconds: None,
            status,
            fit: None,
            ended: None,
        }
    }

    /// `series` without its open bucket at `now`, copied (and stored) once a bucket.
    /// With `bytes`, the series first forgets its oldest buckets until their stored form fits
    /// ([`LoadSeries::fit_stored`]).
    fn ended(&mut self, now: Timestamp, bytes: Option<usize>) -> &Ended {
        let open = self.series.bucket_at(now);
        let ended = match self.ended.take() {
            Some(e) if e.open == open => e,
            _ => {
                let mut series = self.series.ended(now);
                let mut stored = series.store();
                // Measured once a bucket; only a history past its bytes is cut and stored again.
                if let Some(bytes) = bytes
                    && predictive::stored_bytes(&stored) > bytes
                    && self.series.fit_stored(now, bytes)
                {
                    series = self.series.ended(now);
                    stored = series.store();
                }
                Ended {
                    open,
                    stored,
                    series,
                    reads: Vec::new(),
                }
            }
        };
        self.ended.insert(ended)
    }

    /// Keeps what a forecast read from the ended buckets for the next one in the same bucket.
    fn keep_reads(&mut self, reads: Vec<SeasonalRead>) {
        if let Some(ended) = self.ended.as_mut() {
            ended.reads = reads;
        }
    }
}

/// The stored parts of an object that [`Held::restore_missing`] reads.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stored<'a> {
    /// `status.minReplicasTuning` (a native HPA: its annotation).
    pub tuning: Option<&'a MinReplicasTuningStatus>,
    /// `status.predictive` (a native HPA: its annotation).
    pub predictive: Option<&'a PredictiveStatus>,
}

/// What [`Held::restore_missing`] restored, and what it could not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Nothing was held: not even a decision history (this process has not evaluated the
    /// object yet, since it started or took the object over).
    pub first_sight: bool,
    /// Tuning's load history was read from the object just now: a caller may top it up.
    pub tuning: bool,
    /// Prediction's series was read from the object just now: a caller may top it up.
    pub predictive: bool,
    /// Why the object's load history was ignored, if it was.
    pub tuning_ignored: Option<StoredStateError>,
    /// Why the object's load series was ignored, if it was.
    pub predictive_ignored: Option<StoredStateError>,
}

impl Held {
    /// Restores from `stored` the parts that `spec` and `tuning` turn on and this value does not
    /// hold yet (first sight, or a part just turned on), and drops the parts that are off. A
    /// stored part that breaks [`crate::stored`]'s rules is ignored whole (and said in
    /// [`Restored`]): the part starts empty.
    pub fn restore_missing(
        &mut self,
        spec: &HorizontalPodAutoscalerPlusSpec,
        tuning: &MinReplicasTuning,
        stored: Stored<'_>,
    ) -> Restored {
        let mut restored = Restored {
            first_sight: self.history.is_none(),
            ..Restored::default()
        };
        if tuning.mode == TuningMode::Off {
            self.tuning = None;
        } else if self.tuning.is_none() {
            let loads = match stored.tuning.and_then(|s| s.load_history.as_ref()) {
                Some(h) => LoadHistory::try_restore(h).unwrap_or_else(|why| {
                    restored.tuning_ignored = Some(why);
                    LoadHistory::default()
                }),
                None => LoadHistory::default(),
            };
            self.tuning = Some(TuningHeld {
                loads,
                status: stored.tuning.cloned(),
            });
            restored.tuning = true;
        }
        if predictive_settings(spec).is_none() {
            self.predictive = None;
        } else if self.predictive.is_none() {
            let series = match stored.predictive.and_then(|s| s.history.as_ref()) {
                Some(h) => match LoadSeries::try_restore(h, BUCKET_SECONDS) {
                    Ok(mut series) => {
                        series.restore_means(h);
                        series
                    }
                    Err(why) => {
                        restored.predictive_ignored = Some(why);
                        LoadSeries::new(BUCKET_SECONDS)
                    }
                },
                None => LoadSeries::new(BUCKET_SECONDS),
            };
            self.predictive = Some(PredictiveHeld::new(series, stored.predictive.cloned()));
            restored.predictive = true;
        }
        restored
    }
}

/// `spec.predictive` when it is on.
pub fn predictive_settings(spec: &HorizontalPodAutoscalerPlusSpec) -> Option<&Predictive> {
    spec.predictive
        .as_ref()
        .filter(|p| p.mode != PredictiveMode::Off)
}

/// Whether the caller may lower `spec.minReplicas` as tuning proposes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TuningWrite<'a> {
    /// The caller writes what [`Evaluation::lowered_min_replicas`] says (a replay "writes" at once).
    #[default]
    Allowed,
    /// The caller's write of the proposed minimum failed, for this reason: the decision keeps
    /// the spec's minimum and the status and an Event say why.
    Failed(&'a str),
}

/// Everything an evaluation reads besides what is held: plain data, no clock.
#[derive(Clone, Copy, Debug)]
pub struct EvaluationInput<'a> {
    /// The autoscaler's spec (a native HPA's, converted; prediction from its annotations).
    pub spec: &'a HorizontalPodAutoscalerPlusSpec,
    /// What was observed.
    pub observed: &'a Observation,
    /// The decision memory the object carries.
    pub stored_memory: Option<&'a DecisionMemory>,
    /// The controller's flags.
    pub config: &'a ControllerConfig,
    /// `minReplicasTuning` (a native HPA: from its annotations).
    pub tuning: &'a MinReplicasTuning,
    /// The CronHPA that holds the target, if one does (tuning waits while it does).
    pub held_by: Option<&'a str>,
    /// The operator's exclusion that matches the object, if one does (tuning only reports).
    pub excluded_by: Option<&'a str>,
    /// Whether the tuned minimum may be written.
    pub tuning_write: TuningWrite<'a>,
    /// The workload's measured startup time, seconds ([`predictive::startup_seconds`]);
    /// `None` when no pod could be measured (the last measurement stands).
    pub startup_seconds: Option<i64>,
    /// The most JSON bytes the stored predictive history may take: a native HPA's share of its
    /// annotations ([`predictive::NATIVE_HISTORY_BYTES`]); `None` for an HPA+, whose status
    /// the bucket bound keeps within etcd's limit.
    pub history_bytes: Option<usize>,
    /// The most JSON bytes the stored tuning history may take: a native HPA's share of its
    /// annotations ([`super::load_history::NATIVE_HISTORY_BYTES`]); `None` for an HPA+.
    pub tuning_history_bytes: Option<usize>,
    /// The evaluation time.
    pub now: Timestamp,
}

/// What tuning came to.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuned {
    /// What [`tune`] decided (`apply` false when the write failed).
    pub tuning: Tuning,
    /// `status.minReplicasTuning`.
    pub status: MinReplicasTuningStatus,
    /// The status differs from the one held before (a native HPA's annotation is rewritten).
    pub changed: bool,
}

/// What prediction came to.
#[derive(Clone, Debug, PartialEq)]
pub struct Predicted {
    /// The forecast.
    pub forecast: Forecast,
    /// How it changed the reactive decision.
    pub raised: Raise,
    /// `status.predictive`, with the series of ended buckets.
    pub status: PredictiveStatus,
    /// The status differs from the one held before.
    pub changed: bool,
}

/// An Event the evaluation owes the user (the caller emits it while it leads).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwedEvent {
    /// A Warning (else Normal).
    pub warning: bool,
    /// The Event's reason.
    pub reason: &'static str,
    /// The Event's action.
    pub action: &'static str,
    /// The note.
    pub note: String,
}

/// What one evaluation came to.
#[derive(Clone, Debug)]
pub struct Evaluation {
    /// The minimum tuning lowered the spec to, which the decision used; the caller writes it
    /// (`None`: the spec's own minimum stood).
    pub lowered_min_replicas: Option<i32>,
    /// Tuning's outcome (`None` while it is off).
    pub tuned: Option<Tuned>,
    /// The decision to write: the reactive one, raised by prediction.
    pub decision: Decision,
    /// Prediction's outcome (`None` while it is off).
    pub predicted: Option<Predicted>,
    /// What to hold for the next evaluation (its history without this evaluation's scale write:
    /// see [`Evaluation::scaled`]).
    pub held: Held,
    /// Why the object's decision memory was ignored, if it was.
    pub memory_ignored: Option<StoredStateError>,
    /// Events owed, in order.
    pub events: Vec<OwedEvent>,
}

impl Evaluation {
    /// The spec the decision used: `spec` with the lowered minimum.
    pub fn spec<'a>(
        &self,
        spec: &'a HorizontalPodAutoscalerPlusSpec,
    ) -> Cow<'a, HorizontalPodAutoscalerPlusSpec> {
        match self.lowered_min_replicas {
            Some(min) => Cow::Owned(HorizontalPodAutoscalerPlusSpec {
                min_replicas: Some(min),
                ..spec.clone()
            }),
            None => Cow::Borrowed(spec),
        }
    }

    /// Records that the caller wrote the scale from `from` to `to` at `at`.
    pub fn scaled(&mut self, at: Timestamp, from: i32, to: i32) {
        if let Some(history) = self.held.history.as_mut() {
            history.record_scale(at, from, to);
        }
    }

    /// The decision memory to write into the object; the held history becomes what a
    /// successor reads back from it, so the next evaluation starts from exactly that.
    pub fn store_memory(&mut self) -> DecisionMemory {
        let history = self.held.history.take().unwrap_or_default();
        let stored = memory::store(&history);
        self.held.history = Some(memory::restore(&stored));
        stored
    }
}

/// Steps 1–5 of the module docs.
pub fn evaluate(input: &EvaluationInput<'_>, held: Held) -> Evaluation {
    let now = input.now;
    let Held {
        history,
        tuning: tuning_held,
        predictive: predictive_held,
    } = held;
    let resumed = memory::resume(
        history.as_ref(),
        input.stored_memory,
        input.observed.current_replicas,
        now,
        now,
    );
    let mut events = Vec::new();
    let (tuned, tuning_held, lowered) = tune_step(input, tuning_held, &mut events);
    let spec: Cow<'_, HorizontalPodAutoscalerPlusSpec> = match lowered {
        Some(min) => Cow::Owned(HorizontalPodAutoscalerPlusSpec {
            min_replicas: Some(min),
            ..input.spec.clone()
        }),
        None => Cow::Borrowed(input.spec),
    };
    let reactive = decide(&DecisionInput {
        spec: &spec,
        observed: input.observed,
        history: &resumed.history,
        config: input.config,
        now,
    });
    let (decision, predicted, predictive_held) =
        predict_step(input, &spec, reactive, predictive_held, &mut events);
    let history = decision.history.clone();
    Evaluation {
        lowered_min_replicas: lowered,
        tuned,
        decision,
        predicted,
        held: Held {
            history: Some(history),
            tuning: tuning_held,
            predictive: predictive_held,
        },
        memory_ignored: resumed.ignored,
        events,
    }
}

/// Step 2: records and tunes; the outcome, what tuning holds next, and the lowered minimum.
fn tune_step(
    input: &EvaluationInput<'_>,
    held: Option<TuningHeld>,
    events: &mut Vec<OwedEvent>,
) -> (Option<Tuned>, Option<TuningHeld>, Option<i32>) {
    let settings = input.tuning;
    if settings.mode == TuningMode::Off {
        return (None, None, None);
    }
    let TuningHeld {
        mut loads,
        status: previous,
    } = held.unwrap_or_default();
    tuning::record_loads(
        &mut loads,
        input.spec,
        input.observed,
        input.now,
        settings.lookback_days(),
    );
    if let Some(bytes) = input.tuning_history_bytes {
        loads.fit_stored(bytes);
    }
    // One pod of the workload stands for its requests (utilization targets); without a pod
    // the need of such a target cannot be computed and tuning says so.
    let pod = input.observed.pods.first().cloned().unwrap_or_default();
    let mut tuning = tune(&TuningInput {
        spec: input.spec,
        settings,
        history: &loads,
        pod: &pod,
        config: input.config,
        last_applied: previous
            .as_ref()
            .and_then(|p| p.last_applied_time.as_ref())
            .map(|t| t.0),
        held_by: input.held_by,
        excluded_by: input.excluded_by,
        now: input.now,
    });
    let min_before = input.spec.min_replicas.unwrap_or(1);
    let failed = match input.tuning_write {
        TuningWrite::Failed(why) if tuning.apply => {
            tuning.apply = false;
            Some(why)
        }
        _ => None,
    };
    let mut status = tuning_status(&tuning, previous.as_ref(), min_before, &loads, input.now);
    if let (Some(why), Some(to)) = (failed, tuning.proposed) {
        let note = format!("could not lower minReplicas to {to}: {why}");
        status.message = format!("{}; {note}", status.message);
        events.push(OwedEvent {
            warning: true,
            reason: "FailedTuneMinReplicas",
            action: "Tune",
            note,
        });
    }
    events.extend(tuning_events(&tuning, previous.as_ref(), min_before));
    let lowered = tuning.proposed.filter(|_| tuning.apply);
    let changed = previous.as_ref() != Some(&status);
    let held = TuningHeld {
        loads,
        status: Some(status.clone()),
    };
    (
        Some(Tuned {
            tuning,
            status,
            changed,
        }),
        Some(held),
        lowered,
    )
}

/// The Events tuning owes after `tuning`: a lowered minimum, a new or changed Report proposal,
/// and the low-load flag turning on (a proposal and the flag often come together; both are
/// said).
pub fn tuning_events(
    tuning: &Tuning,
    previous: Option<&MinReplicasTuningStatus>,
    min_before: i32,
) -> Vec<OwedEvent> {
    let mut out = Vec::new();
    let event = |warning, reason, note| OwedEvent {
        warning,
        reason,
        action: "Tune",
        note,
    };
    if tuning.apply {
        out.push(event(
            false,
            "MinReplicasLowered",
            format!(
                "minReplicas lowered from {min_before} to {}: {}",
                tuning.proposed.unwrap_or(min_before),
                tuning.message
            ),
        ));
    } else if tuning.proposed.is_some() && tuning.proposed != previous.and_then(|p| p.proposed) {
        out.push(event(
            false,
            "MinReplicasTuningProposal",
            tuning.message.clone(),
        ));
    }
    if tuning.low_load && !previous.is_some_and(|p| p.low_load) {
        out.push(event(
            true,
            "LowLoad",
            format!(
                "the weighted daily peaks need {} replicas, fewer than half of minReplicas \
                 {min_before}: {}",
                tuning.needed.unwrap_or_default(),
                tuning.message
            ),
        ));
    }
    out
}

/// Step 4: records, forecasts and raises; the decision to write, the outcome, and what
/// prediction holds next.
fn predict_step(
    input: &EvaluationInput<'_>,
    spec: &HorizontalPodAutoscalerPlusSpec,
    reactive: Decision,
    held: Option<PredictiveHeld>,
    events: &mut Vec<OwedEvent>,
) -> (Decision, Option<Predicted>, Option<PredictiveHeld>) {
    let Some(settings) = predictive_settings(spec) else {
        return (reactive, None, None);
    };
    let now = input.now;
    let mut held =
        held.unwrap_or_else(|| PredictiveHeld::new(LoadSeries::new(BUCKET_SECONDS), None));
    predictive::record_loads(&mut held.series, spec, settings, input.observed, now);
    held.startup_seconds = input.startup_seconds.or(held.startup_seconds);
    let startup = held.startup_seconds.unwrap_or(FALLBACK_STARTUP_SECONDS);
    // One pod of the workload stands for its requests (utilization targets), as in tuning.
    let pod: PodSample = input.observed.pods.first().cloned().unwrap_or_default();
    let fit = held.fit.take();
    let ended = held.ended(now, input.history_bytes);
    let fitted = refit(fit, &ended.series, settings, now);
    let (fc, reads) = forecast_reading(&ForecastInput {
        spec,
        settings,
        series: &ended.series,
        pod: &pod,
        config: input.config,
        startup_seconds: startup,
        now,
        fit: Some(&fitted),
        reads: &ended.reads,
    });
    let raised = raise(&RaiseInput {
        spec,
        settings,
        observed: input.observed,
        config: input.config,
        decision: &reactive,
        forecast: &fc,
        now,
    });
    let mut status = predictive_status(&fc, &raised);
    status.history = Some(ended.stored.clone());
    held.keep_reads(reads);
    held.fit = Some(fitted);
    let previous = held.status.replace(status.clone());
    if let Some(event) = prediction_event(previous.as_ref(), &status, &fc, &raised) {
        events.push(event);
    }
    let decision = raised_decision(reactive, &raised);
    let predicted = Predicted {
        changed: previous.as_ref() != Some(&status),
        forecast: fc,
        raised,
        status,
    };
    (decision, Some(predicted), Some(held))
}

/// The decision to write: `decision`, or as [`raise`] changed it ([`raise_to`]).
pub fn raised_decision(decision: Decision, raised: &Raise) -> Decision {
    raise_to(
        decision,
        (raised.scale_to, raised.desired_replicas),
        &raised.message,
    )
}

/// `decision` with prediction's `(scale_to, desired_replicas)`, when they differ; the
/// prediction's `message` joins the reason, so the rescale Event and the log say why.
pub fn raise_to(
    decision: Decision,
    (scale_to, desired_replicas): (Option<i32>, i32),
    message: &str,
) -> Decision {
    if scale_to == decision.scale_to && desired_replicas == decision.desired_replicas {
        return decision;
    }
    let reason = if decision.reason.is_empty() {
        format!("predictive: {message}")
    } else {
        format!("{}; predictive: {message}", decision.reason)
    };
    Decision {
        desired_replicas,
        scale_to,
        reason,
        ..decision
    }
}

/// Whether the forecast of `status` is trusted: a prediction exists, or the model is sound
/// and declines to act at this phase only (`CostsMore`). That refusal changes with the time
/// of day, and an Event each time would flood the object's Events; its reason and message
/// are in the status.
fn trusted(status: &PredictiveStatus) -> bool {
    status.forecast_replicas.is_some() || status.reason == PredictiveReason::CostsMore.as_str()
}

/// The Event prediction owes: `PredictionOn` when the forecast becomes trusted,
/// `PredictionOff` when it stops being trusted (not on first sight of an object that never
/// predicted).
pub fn prediction_event(
    previous: Option<&PredictiveStatus>,
    status: &PredictiveStatus,
    forecast: &Forecast,
    raised: &Raise,
) -> Option<OwedEvent> {
    let (reason, note) = match (previous.is_some_and(trusted), trusted(status)) {
        (false, true) => (
            "PredictionOn",
            format!(
                "the forecast is trusted (recent error {}%): {}",
                status.recent_error_percent.unwrap_or_default(),
                raised.message
            ),
        ),
        (true, false) => ("PredictionOff", forecast.message.clone()),
        _ => return None,
    };
    Some(OwedEvent {
        warning: false,
        reason,
        action: "Predict",
        note,
    })
}

#[cfg(test)]
mod tests;
