//! Horizontal scaling decisions: replica calculation, behavior, watermarks and limits.
//!
//! [`decide`] is the single entry point the controller, `hpa-plus replay` and the tests call:
//! it takes the spec, an [`Observation`], the object's [`History`], the [`ControllerConfig`] and
//! `now`, and returns a [`Decision`] with the desired replicas, each metric's proposal, the rule
//! that limited it and a sentence of reason. No I/O and no clock: the same inputs always give
//! the same decision.
//!
//! Modules: [`metrics`] (upstream replica calculator), [`watermark`] (WPA watermarks),
//! [`tolerance`], [`behavior`] (stabilization and policies), [`limits`] (limit factors,
//! forbidden windows, delays), [`conditions`], [`decision`] (the precedence of all rules).

pub mod behavior;
pub mod conditions;
pub mod decision;
pub mod history;
pub mod limits;
pub mod metrics;
pub mod observation;
pub mod proposals;
pub mod status;
pub mod tolerance;
pub mod watermark;

pub use decision::{ControllerConfig, Countdown, Decision, DecisionInput, LimitedBy, decide};
pub use history::History;
pub use observation::{ContainerSample, Observation, PodPhase, PodSample, RolloutState};
pub use proposals::MetricOutcome;

#[cfg(test)]
mod tests;
