//! Per-object memory the decision needs between reconciles.
//!
//! The controller keeps one `History` per autoscaler in memory (as upstream keeps
//! `recommendations`, `scaleUpEvents` and `scaleDownEvents` per HPA key) and passes it to every
//! decision; the decision returns the next one. After a successful scale write the controller
//! calls [`History::record_scale`]. Entries older than the longest window in use are dropped, so
//! the history stays small. The controller also keeps it in the object (`super::memory`), so a
//! restarted or newly elected controller continues from it.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// A recommendation (replicas before stabilization) at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimedReplicas {
    /// When the recommendation was made.
    pub at: Timestamp,
    /// Recommended replicas.
    pub replicas: i32,
}

/// A scale event: how many replicas were added or removed, at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScaleEvent {
    /// When the scale was written.
    pub at: Timestamp,
    /// Replicas added (scale-up list) or removed (scale-down list), > 0.
    pub change: i32,
}

/// The memory of one autoscaler.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    /// Past recommendations, for stabilization windows.
    pub recommendations: Vec<TimedReplicas>,
    /// Past scale-ups, for policies' periods.
    pub scale_up_events: Vec<ScaleEvent>,
    /// Past scale-downs, for policies' periods.
    pub scale_down_events: Vec<ScaleEvent>,
    /// The last time this autoscaler changed the target's replicas (forbidden windows).
    pub last_scale_time: Option<Timestamp>,
    /// Since when some watermark metric has been above its high watermark.
    pub above_high_since: Option<Timestamp>,
    /// Since when some watermark metric has been below its low watermark.
    pub below_low_since: Option<Timestamp>,
    /// KEP-5679 `firstFailureTime` of each failing metric that has a `fallback`, by metric name
    /// ([`super::fallback`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metric_failures: BTreeMap<String, Timestamp>,
}

impl History {
    /// Records a successful scale from `from` to `to` replicas at `now`.
    pub fn record_scale(&mut self, now: Timestamp, from: i32, to: i32) {
        if to > from {
            self.scale_up_events.push(ScaleEvent {
                at: now,
                change: to - from,
            });
        } else if to < from {
            self.scale_down_events.push(ScaleEvent {
                at: now,
                change: from - to,
            });
        }
        if to != from {
            self.last_scale_time = Some(now);
        }
    }

    /// Records the recommendation (before stabilization) made at `now`.
    pub(crate) fn record_recommendation(&mut self, now: Timestamp, replicas: i32) {
        self.recommendations
            .push(TimedReplicas { at: now, replicas });
    }

    /// Drops entries older than `keep_seconds` before `now`.
    pub(crate) fn prune(&mut self, now: Timestamp, keep_seconds: i64) {
        let keep = |at: &Timestamp| seconds_between(*at, now) <= keep_seconds as f64;
        self.recommendations.retain(|r| keep(&r.at));
        self.scale_up_events.retain(|e| keep(&e.at));
        self.scale_down_events.retain(|e| keep(&e.at));
    }
}

/// Seconds from `earlier` to `later` (negative when `later` is before `earlier`).
pub(crate) fn seconds_between(earlier: Timestamp, later: Timestamp) -> f64 {
    later.duration_since(earlier).as_secs_f64()
}
