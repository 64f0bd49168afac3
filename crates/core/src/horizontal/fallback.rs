//! Metric-failure fallback of KEP-5679 (`HPAExternalMetricFallback`), as a decision on plain
//! data, applied by [`super::decision::decide`] right after the metrics propose ([`apply`]).
//!
//! The KEP (kubernetes/enhancements keps/sig-autoscaling/5679-external-metric-fallback,
//! "Design Details") puts `fallback: {failureDuration, replicas}` on an External metric:
//! `failureDuration` (a `metav1.Duration` such as `3m`, default 3m, > 0) is how long the metric
//! must fail without a success in between; `replicas` (> 0) is then that metric's proposal,
//! combined with the other metrics by the usual maximum and still bounded by
//! `minReplicas`/`maxReplicas` and `behavior`. Status per metric: `fallbackActive`,
//! `firstFailureTime` (set on the first failure of a run, cleared on a success),
//! `fallbackReplicas`; condition `ExternalMetricFallbackActive`, True while any metric is in
//! fallback. Plimsoll also accepts `fallback` on a `Prometheus` metric (a failing query is the
//! same case). The KEP has no test vectors; the tests below cite the section they follow.
//!
//! The first failure of each failing metric with a `fallback` is kept in the autoscaler's
//! [`History`](super::history::History) (`metric_failures`, by metric name), which the
//! controller stores with the rest of the decision memory (HPA+ `status.memory`, the
//! `plimsoll.dev/decision-memory` annotation of a native HPA), so a restart or a new leader
//! continues the same run; `status.currentMetrics` shows it as the KEP's `firstFailureTime`.
//!
//! Invariants: a success always clears the run; a stored `firstFailureTime` in the future (a
//! clock step, or a hand-edited status) restarts the run at `now` rather than firing early; a
//! metric without a `fallback` is neither tracked nor changed, so it behaves as before (a
//! failure holds the count by rule 5).

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions::Condition;
use super::proposals::{MetricOutcome, metrics_of};
use super::source;
use crate::api::hpa_plus::{
    FallbackStatus, HorizontalPodAutoscalerPlusSpec, MetricFallback, MetricStatus,
};
use crate::api::validation::FieldErrors;

/// `ExternalMetricFallbackActive` condition type (KEP-5679 "Design Details").
pub const FALLBACK_ACTIVE: &str = "ExternalMetricFallbackActive";

/// The KEP's default `failureDuration`: 3 minutes.
pub const DEFAULT_FAILURE_DURATION_SECONDS: i64 = 180;

/// The longest `failureDuration` accepted: 24 hours (the KEP bounds it only below; a longer
/// wait is no fallback).
pub const MAX_FAILURE_DURATION_SECONDS: i64 = 24 * 3600;

/// The longest `failureDuration` string accepted (the CRD's `maxLength`).
pub const MAX_FAILURE_DURATION_LENGTH: usize = 32;

/// A Go `time.ParseDuration` string as `metav1.Duration` holds it (`3m`, `1h30m`, `1.5h`,
/// `500ms`): one or more decimal numbers, each with a unit `ns`, `us`, `µs`, `ms`, `s`, `m`,
/// `h`, with an optional leading sign; `0` alone is zero. `None` for anything else, or beyond
/// a year (far beyond [`MAX_FAILURE_DURATION_SECONDS`], and no overflow).
pub fn parse_duration(text: &str) -> Option<SignedDuration> {
    let (negative, mut rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Some(SignedDuration::ZERO);
    }
    if rest.is_empty() || text.len() > MAX_FAILURE_DURATION_LENGTH {
        return None;
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = match &rest[..digits] {
            "" | "." => return None,
            n if n.matches('.').count() > 1 => return None,
            n => n.parse().ok()?,
        };
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        nanos += number * scale;
    }
    let year = 366.0 * 24.0 * 3600e9;
    if !nanos.is_finite() || nanos > year {
        return None;
    }
    // Bounded above by a year, so the cast is exact enough and cannot overflow.
    #[allow(clippy::cast_possible_truncation)]
    let d = SignedDuration::from_nanos(nanos.round() as i64);
    Some(if negative { -d } else { d })
}

/// Checks a metric's `fallback` as the CRD does (for natives and older objects): `replicas`
/// >= 1, `failureDuration` a duration in `(0, 24h]`.
pub fn validate(fb: &MetricFallback, path: &str, errs: &mut FieldErrors) {
    if fb.replicas < 1 {
        errs.push(format!("{path}.replicas"), "must be >= 1");
    }
    if let Some(text) = &fb.failure_duration {
        let max = SignedDuration::from_secs(MAX_FAILURE_DURATION_SECONDS);
        match parse_duration(text) {
            Some(d) if d.is_positive() && d <= max => {}
            _ => errs.push(
                format!("{path}.failureDuration"),
                "must be a duration such as 3m, > 0 and at most 24h",
            ),
        }
    }
}

impl Fallback {
    /// The decision's view of a spec's `fallback`: the duration in whole seconds, rounded up
    /// (`500ms` waits 1 s), within 1 s to 24 h; an unreadable duration (an object from before
    /// validation) is the default.
    pub fn of(fb: &MetricFallback) -> Self {
        let seconds = fb
            .failure_duration
            .as_deref()
            .and_then(parse_duration)
            .map(|d| {
                let whole = d.as_secs() + i64::from(d.subsec_nanos() > 0);
                whole.clamp(1, MAX_FAILURE_DURATION_SECONDS)
            });
        Self {
            failure_duration_seconds: seconds,
            replicas: fb.replicas,
        }
    }
}

/// A metric's `fallback`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fallback {
    /// `failureDuration` in seconds (`None`: the default, 3 minutes).
    pub failure_duration_seconds: Option<i64>,
    /// `replicas`.
    pub replicas: i32,
}

/// One metric's fallback state after this evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FallbackState {
    /// `firstFailureTime`: start of the current run of failures, `None` after a success.
    pub first_failure: Option<Timestamp>,
    /// `fallbackActive`.
    pub active: bool,
    /// `fallbackReplicas`: the metric's proposal while active.
    pub replicas: Option<i32>,
}

/// The state of one metric after a read that `fetched` (or failed), given the run's stored
/// start `first_failure`. Without a `fallback` the run is still tracked but never activates.
pub fn step(
    fallback: Option<Fallback>,
    fetched: bool,
    first_failure: Option<Timestamp>,
    now: Timestamp,
) -> FallbackState {
    if fetched {
        return FallbackState::default();
    }
    let start = first_failure.filter(|t| *t <= now).unwrap_or(now);
    let Some(fb) = fallback else {
        return FallbackState {
            first_failure: Some(start),
            ..FallbackState::default()
        };
    };
    let duration = fb
        .failure_duration_seconds
        .unwrap_or(DEFAULT_FAILURE_DURATION_SECONDS)
        .max(1);
    let active = now.duration_since(start) >= SignedDuration::from_secs(duration);
    FallbackState {
        first_failure: Some(start),
        active,
        replicas: active.then_some(fb.replicas.max(1)),
    }
}

/// What [`apply`] leaves for the decision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// The first failure of each failing metric with a `fallback` (the history's
    /// `metric_failures` after this evaluation).
    pub failures: BTreeMap<String, Timestamp>,
    /// `ExternalMetricFallbackActive`, when some metric has a `fallback`.
    pub condition: Option<Condition>,
}

/// Steps the fallback of every metric of `spec` that has one, from its outcome in `proposals`
/// (same order, [`metrics_of`]) and its stored first failure in `failures`. A metric in
/// fallback becomes a valid proposal of its `fallback.replicas` (so rule 5 neither holds on it
/// nor refuses to scale down because of it); every metric with a `fallback` gets the KEP's
/// status fields. Metrics without one are left as they are.
pub fn apply(
    spec: &HorizontalPodAutoscalerPlusSpec,
    proposals: &mut [MetricOutcome],
    failures: &BTreeMap<String, Timestamp>,
    now: Timestamp,
) -> Applied {
    let metrics = metrics_of(spec);
    let mut out = Applied::default();
    let mut states = Vec::new();
    for (m, p) in metrics.iter().zip(proposals.iter_mut()) {
        let Some(src) = source::of(m) else { continue };
        let Some(fb) = src.fallback() else { continue };
        let fetched = p.error.is_none();
        let state = step(
            Some(Fallback::of(fb)),
            fetched,
            failures.get(&p.metric).copied(),
            now,
        );
        if let Some(first) = state.first_failure {
            out.failures.insert(p.metric.clone(), first);
        }
        let entry = p
            .status
            .get_or_insert_with(|| src.status(crate::api::hpa_plus::MetricValueStatus::default()));
        if let Some(f) = fallback_status_mut(entry) {
            *f = FallbackStatus {
                fallback_active: state.active,
                first_failure_time: state.first_failure.map(Time),
                fallback_replicas: state.replicas,
            };
        }
        if let Some(replicas) = state.replicas {
            p.replicas = Some(replicas);
            p.error = None;
            p.failure_reason = None;
            p.summary = format!("{}: <fallback {replicas}>", p.metric);
        }
        states.push((p.metric.clone(), state));
    }
    if !states.is_empty() {
        out.condition = Some(condition(&states));
    }
    out
}

/// The fallback fields of an External or Prometheus status entry.
fn fallback_status_mut(status: &mut MetricStatus) -> Option<&mut FallbackStatus> {
    if let Some(e) = status.external.as_mut() {
        return Some(&mut e.fallback);
    }
    status.prometheus.as_mut().map(|p| &mut p.fallback)
}

/// The fallback fields of a status entry, if it has any set.
pub fn status_of(status: &MetricStatus) -> Option<&FallbackStatus> {
    status
        .external
        .as_ref()
        .map(|e| &e.fallback)
        .or_else(|| status.prometheus.as_ref().map(|p| &p.fallback))
        .filter(|f| **f != FallbackStatus::default())
}

/// The `ExternalMetricFallbackActive` condition over every metric's state, by name.
pub fn condition(states: &[(String, FallbackState)]) -> Condition {
    let active: Vec<(&str, i32)> = states
        .iter()
        .filter_map(|(name, s)| s.replicas.map(|r| (name.as_str(), r)))
        .collect();
    match active.iter().map(|(_, r)| *r).max() {
        Some(most) => Condition::new(
            FALLBACK_ACTIVE,
            true,
            "FallbackActive",
            format!(
                "{} metric(s) failed for their failureDuration ({}); fallback proposes {most} replicas",
                active.len(),
                active
                    .iter()
                    .map(|(n, r)| format!("{n}: {r}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        None => Condition::new(
            FALLBACK_ACTIVE,
            false,
            "NoFallbackActive",
            "no metric is using its fallback",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    /// (fallback, fetched, stored first failure, now, want (first, active, replicas))
    type Case = (
        Option<Fallback>,
        bool,
        Option<i64>,
        i64,
        (Option<i64>, bool, Option<i32>),
    );

    #[test]
    fn activation_table() {
        // KEP-5679 "Design Details" (failureDuration measured from the first consecutive
        // failure, default 3m; replicas is the metric's proposal) and "Test Plan" (firstFailureTime
        // set on the first failure, kept through failures, cleared on success; fallback active
        // once now reaches firstFailureTime + failureDuration). User story 1: failureDuration 3m,
        // replicas 10.
        let story = Some(Fallback {
            failure_duration_seconds: Some(180),
            replicas: 10,
        });
        let default = Some(Fallback {
            failure_duration_seconds: None,
            replicas: 4,
        });
        // (fallback, fetched, stored first failure, now, want (first, active, replicas))
        let cases: &[Case] = &[
            (story, true, Some(0), 500, (None, false, None)),
            (story, false, None, 0, (Some(0), false, None)),
            (story, false, Some(0), 179, (Some(0), false, None)),
            (story, false, Some(0), 180, (Some(0), true, Some(10))),
            (story, false, Some(0), 900, (Some(0), true, Some(10))),
            (default, false, Some(0), 179, (Some(0), false, None)),
            (default, false, Some(0), 180, (Some(0), true, Some(4))),
            (None, false, Some(0), 900, (Some(0), false, None)),
            // A stored start in the future restarts the run now.
            (story, false, Some(10_000), 900, (Some(900), false, None)),
        ];
        for (fb, fetched, first, now, (want_first, active, replicas)) in cases {
            let got = step(*fb, *fetched, first.map(at), at(*now));
            let want = FallbackState {
                first_failure: want_first.map(at),
                active: *active,
                replicas: *replicas,
            };
            assert_eq!(
                got, want,
                "{fb:?} fetched {fetched} first {first:?} now {now}"
            );
        }
    }

    #[test]
    fn durations_read_as_go_writes_them() {
        // metav1.Duration is Go's time.ParseDuration format.
        let secs = |t: &str| parse_duration(t).map(|d| d.as_millis());
        assert_eq!(secs("3m"), Some(180_000));
        assert_eq!(secs("1h30m"), Some(5_400_000));
        assert_eq!(secs("1.5h"), Some(5_400_000));
        assert_eq!(secs("500ms"), Some(500));
        assert_eq!(secs("0"), Some(0));
        assert_eq!(secs("-5s"), Some(-5000));
        for bad in ["", "3", "m", "3x", "1..5s", "3 m", "9999999999h", "1e3s"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
        let check = |d: &str, r| {
            let mut errs = FieldErrors::default();
            let fb = MetricFallback {
                failure_duration: Some(d.into()),
                replicas: r,
            };
            validate(&fb, "f", &mut errs);
            errs.is_empty()
        };
        assert!(check("3m", 1));
        assert!(check("24h", 10));
        assert!(!check("24h1s", 10));
        assert!(!check("0s", 10));
        assert!(!check("-1m", 10));
        assert!(!check("3m", 0));
        let of = |d: &str| {
            Fallback::of(&MetricFallback {
                failure_duration: Some(d.into()),
                replicas: 2,
            })
            .failure_duration_seconds
        };
        assert_eq!(of("500ms"), Some(1));
        assert_eq!(of("90s"), Some(90));
        assert_eq!(of("nonsense"), None);
        assert_eq!(of("8000h"), Some(MAX_FAILURE_DURATION_SECONDS));
    }

    #[test]
    fn hostile_values_are_bounded() {
        // KEP-5679 "Risks and Mitigations": validation keeps replicas > 0 and failureDuration > 0;
        // an object from before validation gets the same floor here.
        let fb = Some(Fallback {
            failure_duration_seconds: Some(-60),
            replicas: -3,
        });
        let s = step(fb, false, Some(at(0)), at(1));
        assert_eq!((s.active, s.replicas), (true, Some(1)));
        let s = step(fb, false, Some(at(0)), at(0));
        assert!(!s.active);
    }

    #[test]
    fn condition_is_true_while_any_metric_is_in_fallback() {
        // KEP-5679 "Design Details": ExternalMetricFallbackActive True if any external metric
        // is in fallback, False if none; story 2: two metrics, fallback 15 and 12 -> 15.
        let on = |name: &str, r| {
            (
                name.to_owned(),
                FallbackState {
                    first_failure: Some(at(0)),
                    active: true,
                    replicas: Some(r),
                },
            )
        };
        let off = ("c".to_owned(), FallbackState::default());
        let c = condition(&[on("error_rate", 15), on("p99_latency_ms", 12), off.clone()]);
        assert!(c.status);
        assert!(c.message.contains("2 metric(s)"), "{}", c.message);
        assert!(c.message.contains("error_rate: 15"), "{}", c.message);
        assert!(c.message.contains("15 replicas"));
        let c = condition(&[off]);
        assert!(!c.status);
    }
}
