//! Metric-failure fallback of KEP-5679 (`HPAExternalMetricFallback`), as a decision on plain
//! data. Not yet wired into [`super::decision::decide`]: the API field and the per-metric memory
//! come next (see docs/hpa-plus.md, "Metric-failure fallback").
//!
//! The KEP (kubernetes/enhancements keps/sig-autoscaling/5679-external-metric-fallback,
//! "Design Details") puts `fallback: {failureDuration, replicas}` on an External metric:
//! `failureDuration` (default 3m, > 0) is how long the metric must fail without a success in
//! between; `replicas` (> 0) is then that metric's proposal, combined with the other metrics by
//! the usual maximum and still bounded by `minReplicas`/`maxReplicas` and `behavior`. Status per
//! metric: `fallbackActive`, `firstFailureTime` (set on the first failure of a run, cleared on a
//! success), `fallbackReplicas`; condition `ExternalMetricFallbackActive`, True while any metric
//! is in fallback. The KEP has no test vectors; the tests below cite the section they follow.
//!
//! Invariants: a success always clears the run; a stored `firstFailureTime` in the future (a
//! clock step, or a hand-edited status) restarts the run at `now` rather than firing early.

use jiff::{SignedDuration, Timestamp};

use super::conditions::Condition;

/// `ExternalMetricFallbackActive` condition type (KEP-5679 "Design Details").
pub const FALLBACK_ACTIVE: &str = "ExternalMetricFallbackActive";

/// The KEP's default `failureDuration`: 3 minutes.
pub const DEFAULT_FAILURE_DURATION_SECONDS: i64 = 180;

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

/// The `ExternalMetricFallbackActive` condition over every metric's state.
pub fn condition(states: &[FallbackState]) -> Condition {
    let active: Vec<i32> = states.iter().filter_map(|s| s.replicas).collect();
    match active.iter().max() {
        Some(most) => Condition::new(
            FALLBACK_ACTIVE,
            true,
            "FallbackActive",
            format!(
                "{} external metric(s) failed for their failureDuration; fallback proposes {most} replicas",
                active.len()
            ),
        ),
        None => Condition::new(
            FALLBACK_ACTIVE,
            false,
            "NoFallbackActive",
            "no external metric is using its fallback",
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
        let on = |r| FallbackState {
            first_failure: Some(at(0)),
            active: true,
            replicas: Some(r),
        };
        let c = condition(&[on(15), on(12), FallbackState::default()]);
        assert!(c.status);
        assert!(c.message.contains("2 external metric(s)"));
        assert!(c.message.contains("15 replicas"));
        let c = condition(&[FallbackState::default()]);
        assert!(!c.status);
    }
}
