//! Joint horizontal and vertical sizing: the per-pod request a VPA in joint mode (annotation
//! [`crate::conflict::HORIZONTAL_AWARE_ANNOTATION`]` = "true"`) recommends, chosen from the
//! workload's *total* usage and the horizontal autoscaler's own settings, so that the HPA+ runs
//! near its target across the day instead of chasing the requests (docs/vpa.md, "HPA and VPA
//! together").
//!
//! The model, for one resource (CPU; memory the same way when the HPA+ scales on memory), with
//! `u` the HPA+'s target utilization, `min` / `max` its replica bounds and `R` the per-pod
//! request:
//! 1. **History.** The workload's total usage (all pods together), as the highest value seen in
//!    each bucket of a compact series ([`TotalUsage`], one series of the [`PeakSeries`] every
//!    load history is kept in; default 5-minute buckets kept for 7 days). The request does not
//!    change the total, so the history stays valid when requests change: this is what breaks
//!    the feedback loop of a per-pod recommender.
//! 2. **Peak and trough.** `peak` is the 95th percentile of the buckets and `trough` the 5th
//!    (nearest rank): a spike shorter than 5 % of the window moves neither.
//! 3. **Bounds.** At the peak the HPA+ needs `ceil(peak / (R · u))` replicas; they must stay
//!    within `headroom · max` (default 0.8), which gives the *lower* bound
//!    `R ≥ peak / (u · ⌊headroom · max⌋)`. At the trough the HPA+ must still want at least
//!    `min` replicas at its target, so that the `min` pods do useful work (utilization at the
//!    trough at or above the target rather than idling below it), which gives the *upper*
//!    bound `R ≤ trough / (u · min)`.
//! 4. **Choice.** When both bounds can be met, the request is their geometric mean: the one
//!    farthest, as a ratio, from both, so the load can drift the most either way before a bound
//!    is hit. When no request meets both, the peak wins (`R` = the lower bound): replicas keep
//!    their headroom at the daily peak, and at the trough the `min` pods run below the target.
//!    That is reported as [`JointReason::PeakPreferred`], which the recommender turns into a
//!    condition. The VPA's `minAllowed` / `maxAllowed` for the resource cap the choice last
//!    ([`JointReason::CappedByPolicy`]).
//! 5. **Hysteresis.** The current request is kept unless the choice differs from it by more
//!    than `band` (default ±20 % of the current request), or the current request violates a
//!    bound by more than `boundTolerance` (default 5 %). Requests then change a few times a day
//!    at most, and not at all under a steady daily pattern.
//! 6. **Learning.** Until the history spans one daily cycle (`learningSeconds`, default 24 h)
//!    the trough is not known: only the peak bound acts, and only upward. When the peak seen so
//!    far needs more than `headroom · max` replicas at the current request, the request rises
//!    to the larger of `(1 + band)` × the lower bound and twice the current request, so a
//!    workload whose requests start far too small is unpinned from `max` within a few changes.
//!
//! Pure: no clock, no I/O. The recommender and `hpa-plus replay` call the same [`size`]
//! ([`size_in`] only changes the unit the condition message writes amounts in).

use std::fmt;

use jiff::Timestamp;

use crate::api::hpa_plus::{HorizontalPodAutoscalerPlusSpec, MetricTargetType};
use crate::horizontal::peak_series::PeakSeries;
use crate::horizontal::proposals::metrics_of;
use crate::horizontal::source::pod_resource;

/// Default bucket width of [`TotalUsage`], seconds.
pub const DEFAULT_BUCKET_SECONDS: i64 = 300;

/// The one series of a [`TotalUsage`]'s [`PeakSeries`].
const TOTAL: &str = "total";

/// The workload's total usage of one resource over time: the highest total seen in each
/// `bucket_seconds` bucket, milli-units, oldest first (one series of a [`PeakSeries`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TotalUsage {
    series: PeakSeries,
}

impl Default for TotalUsage {
    fn default() -> Self {
        Self::new(DEFAULT_BUCKET_SECONDS)
    }
}

impl TotalUsage {
    /// An empty history with buckets of `bucket_seconds` (at least 1).
    pub fn new(bucket_seconds: i64) -> Self {
        Self {
            series: PeakSeries::new(bucket_seconds),
        }
    }

    /// A history restored from its buckets (as [`TotalUsage::buckets`] returned them); buckets
    /// out of order are sorted, duplicates keep their highest value.
    pub fn from_buckets(bucket_seconds: i64, mut buckets: Vec<(i64, i64)>) -> Self {
        buckets.sort_unstable();
        let mut usage = Self::new(bucket_seconds);
        for (b, v) in buckets {
            usage.series.raise(TOTAL, b, v);
        }
        usage
    }

    /// The bucket width, seconds.
    pub fn bucket_seconds(&self) -> i64 {
        self.series.step_seconds()
    }

    /// The buckets, oldest first: `(bucket since the Unix epoch, highest total)`.
    pub fn buckets(&self) -> &[(i64, i64)] {
        self.series.points(TOTAL)
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// Records the total `value` (milli-units; negative is taken as 0) at `at`, and forgets
    /// buckets more than `window_seconds` older than the newest.
    pub fn record(&mut self, at: Timestamp, value: i64, window_seconds: i64) {
        let keep = window_seconds.max(0) / self.bucket_seconds();
        self.series.record(TOTAL, at, value.max(0), keep.max(1));
    }

    /// Seconds covered, from the start of the oldest bucket to the end of the newest (0 when
    /// empty).
    pub fn span_seconds(&self) -> i64 {
        match (self.buckets().first(), self.buckets().last()) {
            (Some((a, _)), Some((b, _))) => (b - a + 1) * self.bucket_seconds(),
            _ => 0,
        }
    }

    /// The `p` percentile (0…1) of the buckets by nearest rank: the value at rank `⌈p · n⌉`
    /// (at least 1) in ascending order. `None` when empty.
    pub fn percentile(&self, p: f64) -> Option<i64> {
        let mut values: Vec<i64> = self.buckets().iter().map(|(_, v)| *v).collect();
        values.sort_unstable();
        let n = values.len();
        let rank = ((p.clamp(0.0, 1.0) * n as f64).ceil() as usize).clamp(1, n.max(1));
        values.get(rank - 1).copied()
    }
}

/// The model's settings; defaults as documented in the module docs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JointSettings {
    /// Percentile of the total usage taken as the daily peak (default 0.95).
    pub peak_percentile: f64,
    /// Percentile of the total usage taken as the daily trough (default 0.05).
    pub trough_percentile: f64,
    /// Share of `maxReplicas` the peak may need (default 0.8).
    pub headroom: f64,
    /// Hysteresis: the request is kept while the choice is within this fraction of it
    /// (default 0.2, ±20 %).
    pub band: f64,
    /// How far past a bound the current request may be before it counts as violated
    /// (default 0.05, 5 %).
    pub bound_tolerance: f64,
    /// History needed before the trough is trusted: one daily cycle (default 86 400 s).
    pub learning_seconds: i64,
    /// History kept (default 7 days).
    pub window_seconds: i64,
}

impl Default for JointSettings {
    fn default() -> Self {
        Self {
            peak_percentile: 0.95,
            trough_percentile: 0.05,
            headroom: 0.8,
            band: 0.2,
            bound_tolerance: 0.05,
            learning_seconds: 86_400,
            window_seconds: 7 * 86_400,
        }
    }
}

/// What [`size`] works from.
#[derive(Clone, Copy, Debug)]
pub struct JointInput<'a> {
    /// The workload's total usage of the resource.
    pub usage: &'a TotalUsage,
    /// The HPA+'s target utilization of the resource, percent.
    pub target_utilization: i32,
    /// The HPA+'s `minReplicas` in force (at least 1).
    pub min_replicas: i32,
    /// The HPA+'s `maxReplicas`.
    pub max_replicas: i32,
    /// The per-pod request now (milli-units), if the pods have one.
    pub current: Option<i64>,
    /// The VPA's `minAllowed` for the resource, per pod (milli-units).
    pub min_allowed: Option<i64>,
    /// The VPA's `maxAllowed` for the resource, per pod (milli-units).
    pub max_allowed: Option<i64>,
    /// The model's settings.
    pub settings: &'a JointSettings,
}

/// Why the request is what it is; the recommender's condition reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JointReason {
    /// No usage recorded yet, or the HPA+ has no usable target: the current request is kept.
    NoUsage,
    /// Less than one daily cycle of history: only the peak bound acts, upward.
    LearningDailyCycle,
    /// A request meets both bounds.
    BothBoundsMet,
    /// No request meets both bounds: sized for the peak; at the trough the `minReplicas` pods
    /// run below the target.
    PeakPreferred,
    /// `minAllowed` / `maxAllowed` moved the request off the model's choice.
    CappedByPolicy,
}

impl JointReason {
    /// The reason as a condition reason.
    pub fn as_str(self) -> &'static str {
        match self {
            JointReason::NoUsage => "NoUsage",
            JointReason::LearningDailyCycle => "LearningDailyCycle",
            JointReason::BothBoundsMet => "BothBoundsMet",
            JointReason::PeakPreferred => "PeakPreferred",
            JointReason::CappedByPolicy => "CappedByPolicy",
        }
    }
}

impl fmt::Display for JointReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The joint recommendation for one resource.
#[derive(Clone, Debug, PartialEq)]
pub struct JointRequest {
    /// The per-pod request to recommend (milli-units): the current one when kept; `None` only
    /// when there is neither a current request nor usage.
    pub request: Option<i64>,
    /// Whether `request` differs from the current request.
    pub changed: bool,
    /// The model's choice before hysteresis (after the policy caps).
    pub ideal: Option<i64>,
    /// The peak and trough of the total usage used (milli-units).
    pub peak: Option<i64>,
    /// See `peak`.
    pub trough: Option<i64>,
    /// The lower bound of the request (from the peak), milli-units.
    pub lower_bound: Option<i64>,
    /// The upper bound of the request (from the trough), milli-units; absent while learning.
    pub upper_bound: Option<i64>,
    /// Replicas the HPA+ needs at the peak with `request`.
    pub peak_replicas: Option<i32>,
    /// Why.
    pub reason: JointReason,
    /// A sentence for the condition message and the replay.
    pub message: String,
}

/// The unit of a resource's amounts, for messages: the model itself only sees integers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unit {
    /// CPU, millicores (`790m`).
    #[default]
    Millicores,
    /// Memory, bytes (written in MiB, `512.0Mi`).
    Bytes,
}

impl Unit {
    /// `amount` in this unit, as a message writes it.
    pub fn show(self, amount: i64) -> String {
        match self {
            Unit::Millicores => format!("{amount}m"),
            Unit::Bytes => format!("{:.1}Mi", amount as f64 / 1_048_576.0),
        }
    }
}

/// The target utilization (percent) of the HPA+'s `Resource` metric on `resource`
/// (`cpu` or `memory`), when it scales on one; `None` otherwise. Upstream's default metric (no
/// metrics: CPU at 80 %) counts.
pub fn utilization_target(spec: &HorizontalPodAutoscalerPlusSpec, resource: &str) -> Option<i32> {
    metrics_of(spec).iter().find_map(|m| {
        let (name, _) = pod_resource(m)?;
        let t = m.target()?;
        (name == resource && t.type_ == MetricTargetType::Utilization)
            .then_some(t.average_utilization?)
            .filter(|u| *u > 0)
    })
}

/// `ceil(a / b)` for positive `b`, in i128 so products of milli-amounts cannot overflow.
fn div_ceil(a: i128, b: i128) -> i128 {
    (a + b - 1).div_euclid(b)
}

fn to_i64(v: i128) -> i64 {
    i64::try_from(v.clamp(0, i128::from(i64::MAX))).unwrap_or(i64::MAX)
}

/// Replicas the HPA+ needs for a total `load` at `request` per pod and `target` percent
/// (`ceil(load / (request · target))`, unbounded).
pub fn replicas_needed(load: i64, request: i64, target: i32) -> i64 {
    let denominator = i128::from(request.max(1)) * i128::from(target.max(1));
    to_i64(div_ceil(i128::from(load.max(0)) * 100, denominator))
}

/// The replicas allowed at the peak: `⌊headroom · max⌋`, within `[min, max]` and at least 1.
fn peak_replicas_allowed(input: &JointInput<'_>) -> i64 {
    let max = i64::from(input.max_replicas.max(1));
    let min = i64::from(input.min_replicas.max(1)).min(max);
    ((input.settings.headroom * max as f64).floor() as i64).clamp(min, max)
}

/// The answer when there is nothing to size from: the current request is kept.
fn keep(input: &JointInput<'_>) -> JointRequest {
    JointRequest {
        request: input.current,
        changed: false,
        ideal: None,
        peak: None,
        trough: None,
        lower_bound: None,
        upper_bound: None,
        peak_replicas: None,
        reason: JointReason::NoUsage,
        message: if input.target_utilization > 0 {
            "no usage recorded yet; the request is kept".into()
        } else {
            "the horizontal autoscaler has no utilization target on this resource; the request \
             is kept"
                .into()
        },
    }
}

impl JointInput<'_> {
    /// `r` within `minAllowed` / `maxAllowed`, at least 1.
    fn cap(&self, r: i64) -> i64 {
        let r = self.min_allowed.map_or(r, |m| r.max(m));
        self.max_allowed.map_or(r, |m| r.min(m)).max(1)
    }

    /// Whether `c` is below the peak's lower bound by more than the tolerance.
    fn violates_peak(&self, c: i64, lower: i64) -> bool {
        (c as f64) * (1.0 + self.settings.bound_tolerance) < lower as f64
    }

    fn peak_replicas(&self, peak: i64, r: i64) -> Option<i32> {
        i32::try_from(replicas_needed(peak, r, self.target_utilization)).ok()
    }
}

/// Before one daily cycle: only the peak bound, only upward (see the module docs).
fn learning(
    input: &JointInput<'_>,
    unit: Unit,
    peak: i64,
    lower: i64,
    n_peak: i64,
) -> JointRequest {
    let raise = |c: i64| {
        let grown = (lower as f64 * (1.0 + input.settings.band)).ceil() as i64;
        input.cap(grown.max(c.saturating_mul(2)))
    };
    let (request, changed) = match input.current {
        Some(c) if !input.violates_peak(c, lower) => (c, false),
        Some(c) => (raise(c), raise(c) != c),
        None => (raise(0), true),
    };
    JointRequest {
        request: Some(request),
        changed,
        ideal: Some(input.cap(lower)),
        peak: Some(peak),
        trough: None,
        lower_bound: Some(lower),
        upper_bound: None,
        peak_replicas: input.peak_replicas(peak, request),
        reason: JointReason::LearningDailyCycle,
        message: format!(
            "less than one daily cycle of usage: the request only rises when the peak so far \
             ({}) needs more than {n_peak} replicas",
            unit.show(peak)
        ),
    }
}

/// The per-pod request for `input` (see the module docs), amounts in millicores.
pub fn size(input: &JointInput<'_>) -> JointRequest {
    size_in(input, Unit::Millicores)
}

/// [`size`] for a resource whose amounts the message writes in `unit`.
pub fn size_in(input: &JointInput<'_>, unit: Unit) -> JointRequest {
    let s = input.settings;
    let u = i128::from(input.target_utilization);
    let Some(peak) = input.usage.percentile(s.peak_percentile) else {
        return keep(input);
    };
    if input.target_utilization <= 0 || input.max_replicas <= 0 {
        return keep(input);
    }
    let n_peak = peak_replicas_allowed(input);
    let lower = to_i64(div_ceil(i128::from(peak) * 100, u * i128::from(n_peak))).max(1);
    if input.usage.span_seconds() < s.learning_seconds {
        return learning(input, unit, peak, lower, n_peak);
    }
    let trough = input.usage.percentile(s.trough_percentile).unwrap_or(peak);
    let min = i128::from(input.min_replicas.max(1));
    let upper = to_i64((i128::from(trough) * 100).div_euclid(u * min));
    let feasible = lower <= upper;
    let model = if feasible {
        // The geometric mean of the bounds, in integers.
        to_i64((i128::from(lower) * i128::from(upper)).isqrt())
    } else {
        lower
    };
    let ideal = input.cap(model);
    let violates = |c: i64| {
        input.violates_peak(c, lower)
            || (feasible && c as f64 > upper as f64 * (1.0 + s.bound_tolerance))
    };
    let within_band = |c: i64| (ideal - c).abs() as f64 <= s.band * c as f64;
    let (request, changed) = match input.current {
        Some(c) if !violates(c) && within_band(c) => (c, false),
        Some(c) => (ideal, ideal != c),
        None => (ideal, true),
    };
    let reason = if ideal != model {
        JointReason::CappedByPolicy
    } else if feasible {
        JointReason::BothBoundsMet
    } else {
        JointReason::PeakPreferred
    };
    let [model_, ideal_, peak_, trough_, lower_, upper_] =
        [model, ideal, peak, trough, lower, upper].map(|v| unit.show(v));
    let message = match reason {
        JointReason::CappedByPolicy => format!(
            "the model's request {model_} is outside the VPA's minAllowed/maxAllowed; {ideal_} \
             recommended (peak {peak_}, trough {trough_})"
        ),
        JointReason::PeakPreferred => format!(
            "no request keeps both the peak ({peak_}) within {n_peak} replicas and the trough \
             ({trough_}) at the target on {min} replicas: sized for the peak ({lower_}); at the \
             trough the minReplicas pods run below the target"
        ),
        _ => format!(
            "peak {peak_} within {n_peak} replicas needs at least {lower_}, trough {trough_} on \
             {min} replicas allows at most {upper_}"
        ),
    };
    JointRequest {
        request: Some(request),
        changed,
        ideal: Some(ideal),
        peak: Some(peak),
        trough: Some(trough),
        lower_bound: Some(lower),
        upper_bound: Some(upper),
        peak_replicas: input.peak_replicas(peak, request),
        reason,
        message,
    }
}

#[cfg(test)]
mod tests;
