//! Cron schedule evaluation, deterministic so that replay and the tests can use it.
//!
//! * [`cron`]: the expression grammar (5 or 6 fields, names, `L`, descriptors, `@every`).
//! * [`zone`]: time zones and daylight-saving rules (skipped times fire once at the end of the
//!   gap, repeated times fire once).
//! * [`next`]: the next firing instant strictly after a given instant.
//! * [`excluded`]: which local days `excludeDates` takes out, decided once per spec.
//! * [`plan`]: which jobs fire in a window, which are due now, which were missed.
//! * [`effect`]: what a firing job does to its target (replica mode or min-replicas mode) and
//!   the keep-window rule.
//! * [`retry`]: when a firing whose write failed transiently runs again.
//! * [`resume`]: where a controller's next evaluation resumes, from what it remembers of the
//!   last one and the cached status; which jobs are (re)submitted.
//! * [`history`]: the job history in status, and why an invalid spec leaves it alone.
//! * [`target`]: which autoscaler a min-replicas job adjusts when the object targets a workload.
//! * [`validity`]: whether a spec can be scheduled (`CronHorizontalPodAutoscalerSpec::validate`).
//! * [`rate`]: whether its jobs run no more often than the operator allows.
//!
//! Nothing here reads the clock: every function takes the instants it needs.

pub mod cron;
pub mod effect;
pub mod excluded;
pub mod history;
pub mod next;
pub mod plan;
pub mod rate;
pub mod resume;
pub mod retry;
pub mod target;
pub mod validity;
pub mod zone;

pub use cron::{DaySchedule, Fields, Schedule};

/// Why a schedule, a time zone or a plan is not usable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A cron expression does not parse; the message names the field.
    #[error("invalid schedule {expr:?}: {message}")]
    InvalidSchedule {
        /// The expression as written.
        expr: String,
        /// What is wrong, naming the field (`hour field "25": 25 is above the maximum 23`).
        message: String,
    },
    /// `spec.timeZone` is not in the bundled IANA database.
    #[error("unknown time zone {0:?}")]
    UnknownTimeZone(String),
    /// A problem with one job of a spec.
    #[error("spec.jobs[{index}].schedule: job {name:?}: {source}")]
    Job {
        /// Index in `spec.jobs`.
        index: usize,
        /// The job's name.
        name: String,
        /// The underlying problem.
        #[source]
        source: Box<Error>,
    },
    /// A problem with one `spec.excludeDates` entry.
    #[error("spec.excludeDates[{index}]: {source}")]
    ExcludeDate {
        /// Index in `spec.excludeDates`.
        index: usize,
        /// The underlying problem.
        #[source]
        source: Box<Error>,
    },
    /// `spec.timeZone` is unknown.
    #[error("spec.timeZone: {0}")]
    TimeZone(#[source] Box<Error>),
    /// A window holds more firings than a plan may list.
    #[error("more than {limit} firings between {from} and {to}; use a shorter window")]
    TooManyFirings {
        /// The cap.
        limit: usize,
        /// Window start.
        from: jiff::Timestamp,
        /// Window end.
        to: jiff::Timestamp,
    },
}

impl Error {
    /// A short label for metrics (`invalid_schedule`, `unknown_time_zone`, …).
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::InvalidSchedule { .. } | Self::Job { .. } | Self::ExcludeDate { .. } => {
                "invalid_schedule"
            }
            Self::UnknownTimeZone(_) | Self::TimeZone(_) => "unknown_time_zone",
            Self::TooManyFirings { .. } => "too_many_firings",
        }
    }
}

/// Result alias for this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;
