//! Horizontal scaling decisions: replica calculation, behavior, watermarks and limits.
//!
//! [`decide`] is the single entry point the controller, `hpa-plus replay` and the tests call:
//! it takes the spec, an [`Observation`], the object's [`History`], the [`ControllerConfig`] and
//! `now`, and returns a [`Decision`] with the desired replicas, each metric's proposal, the rule
//! that limited it and a sentence of reason. No I/O and no clock: the same inputs always give
//! the same decision.
//!
//! Modules: [`decision`] (the precedence of all rules, applied step by step), [`config`]
//! (controller flags), [`preconditions`] (rules 1–4), [`proposals`] (the metrics and the
//! recommendation), [`metrics`] (upstream replica calculator), [`watermark`] (WPA watermarks),
//! [`tolerance`], [`behavior`] (stabilization and policies), [`limits`] (rate limits, bounds,
//! limit factors, forbidden windows, delays), [`gates`] (what stops a write), [`cron_hold`] (does a CronHPA hold the target), [`rollout`] (is the target rolling out), [`limited`] (the
//! rule that limited a decision), [`conditions`], [`history`], [`memory`] (the history kept in
//! the object across restarts), [`observation`], [`pod_requests`] (which containers and requests
//! utilization counts), [`status`], [`tuning`] (`minReplicasTuning`: the `minReplicas` a
//! week of load needs), [`load_history`] (the hourly peaks it reads without Prometheus),
//! [`peak_series`] (the one bucketed history every load history is kept in) and
//! [`predictive`] (`spec.predictive`: a seasonal forecast that scales up before a rush);
//! [`source`] is what each metric source is (one file per source: its validation, name, value
//! and status), and `validate` the spec's validation (`HorizontalPodAutoscalerPlusSpec::validate`);
//! [`recording`] is what `hpa-plus --record-dir` writes and the one step both replays take.

pub mod behavior;
pub mod conditions;
pub mod config;
pub mod cron_hold;
pub mod decision;
pub mod evaluate;
pub mod explain;
pub mod fallback;
pub mod gates;
pub mod history;
pub mod limited;
pub mod limits;
pub mod load_history;
pub mod memory;
pub mod metrics;
pub mod observation;
pub mod offsets;
pub mod peak_series;
pub mod pod_owner;
pub mod pod_requests;
pub mod preconditions;
pub mod predictive;
pub mod proposals;
pub mod recording;
pub mod rollout;
pub mod scale_to_zero;
pub mod source;
pub mod status;
pub mod tolerance;
pub mod tuning;
mod validate;
pub mod watermark;

pub use decision::{ControllerConfig, Countdown, Decision, DecisionInput, LimitedBy, decide};
pub use history::History;
pub use observation::{ContainerSample, Observation, PodPhase, PodSample, RolloutState};
pub use proposals::MetricOutcome;
pub use rollout::Rollout;

#[cfg(test)]
mod tests;
