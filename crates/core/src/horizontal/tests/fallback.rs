//! KEP-5679 metric-failure fallback through [`crate::horizontal::decide`]. The KEP has no test
//! vectors; each test names the part of its "Test Plan" (unit tests, "Failure Tracking and
//! Activation", "Replica Calculation") or user story it follows.

use jiff::SignedDuration;

use super::fixtures::*;
use crate::api::hpa_plus::{
    DecisionMemory, FallbackStatus, HorizontalPodAutoscalerPlusSpec, MetricFallback, MetricSpec,
    MetricTarget,
};
use crate::horizontal::fallback::FALLBACK_ACTIVE;
use crate::horizontal::observation::Observation;
use crate::horizontal::{Decision, History, LimitedBy, memory, status};

const FAILED: &str = "external metrics API unavailable";

fn fallback(duration: &str, replicas: i32) -> MetricFallback {
    MetricFallback {
        failure_duration: Some(duration.into()),
        replicas,
    }
}

/// Story 1: queue depth, `failureDuration: 3m`, `replicas: 10`; cpu at 50 %.
fn spec() -> HorizontalPodAutoscalerPlusSpec {
    let mut queue = MetricSpec::external("queue_depth", MetricTarget::average("30"));
    if let Some(e) = queue.external.as_mut() {
        e.fallback = Some(fallback("3m", 10));
    }
    HorizontalPodAutoscalerPlusSpec::test()
        .max(20)
        .metric(MetricSpec::resource("cpu", MetricTarget::utilization(50)))
        .metric(queue)
}

/// 6 pods at 20 % cpu (proposes fewer), the queue failing or at `queue` per pod.
fn obs(queue: Option<i64>) -> Observation {
    let mut o = Observation::test(6, pods(6, |p| p.cpu(1000, Some(200))));
    o.external_metrics.insert(
        "queue_depth".into(),
        queue.map(|q| vec![q * 6]).ok_or(FAILED.into()),
    );
    o
}

fn condition(d: &Decision) -> Option<bool> {
    d.conditions
        .iter()
        .find(|c| c.type_ == FALLBACK_ACTIVE)
        .map(|c| c.status)
}

/// Evaluations at `t0 + at` seconds, each continuing from the previous one's history.
fn steps(spec: &HorizontalPodAutoscalerPlusSpec, seq: &[(i64, Option<i64>)]) -> Vec<Decision> {
    let mut history = History::default();
    seq.iter()
        .map(|(at, queue)| {
            let d = run(spec, &obs(*queue), &history, *at);
            history = d.history.clone();
            d
        })
        .collect()
}

#[test]
fn failing_less_than_failure_duration_holds_as_today() {
    // Test Plan: firstFailureTime set on the first failure and kept through failures; before
    // failureDuration the metric is a failed metric (upstream: no scale-down on partial data).
    let d = steps(&spec(), &[(0, None), (60, None), (179, None)]);
    for d in &d {
        assert_eq!(d.desired_replicas, 6);
        assert_eq!(d.limited_by, Some(LimitedBy::MetricsUnavailable));
        assert_eq!(condition(d), Some(false));
        assert_eq!(d.history.metric_failures.get("queue_depth"), Some(&t0()));
    }
    let entry = d[2].proposals[1].status.as_ref().unwrap();
    let f = &entry.external.as_ref().unwrap().fallback;
    assert!(!f.fallback_active);
    assert_eq!(f.first_failure_time.as_ref().map(|t| t.0), Some(t0()));
    assert_eq!(f.fallback_replicas, None);
}

#[test]
fn failing_for_failure_duration_proposes_the_fallback_replicas() {
    // Test Plan: active once now >= firstFailureTime + failureDuration; the fallback count is
    // this metric's proposal, combined by max() with the others (cpu proposes 3).
    let d = steps(&spec(), &[(0, None), (180, None)]);
    let d = &d[1];
    assert_eq!(d.proposals[1].replicas, Some(10));
    assert_eq!(d.recommended_replicas, Some(10));
    assert_eq!(d.desired_replicas, 10);
    assert_eq!(d.scale_to, Some(10));
    assert_eq!(condition(d), Some(true));
    let c = d
        .conditions
        .iter()
        .find(|c| c.type_ == FALLBACK_ACTIVE)
        .unwrap();
    assert!(c.message.contains("queue_depth: 10"), "{}", c.message);
    let f = &d.proposals[1]
        .status
        .as_ref()
        .unwrap()
        .external
        .as_ref()
        .unwrap()
        .fallback;
    assert!(f.fallback_active);
    assert_eq!(f.fallback_replicas, Some(10));
}

#[test]
fn the_fallback_is_still_bounded_by_max_replicas_and_behavior() {
    // Test Plan: "replica calculations respect min/max constraints with fallback replica counts".
    let mut s = spec();
    if let Some(e) = s.metrics[1].external.as_mut() {
        e.fallback = Some(fallback("3m", 50));
    }
    let d = steps(&s, &[(0, None), (180, None)]);
    // Without behavior: at most max(2 × 6, 4) = 12 per step, then maxReplicas 20.
    assert_eq!(d[1].recommended_replicas, Some(50));
    assert_eq!(d[1].desired_replicas, 12);
    let s = s.max(11);
    let d = steps(&s, &[(0, None), (180, None)]);
    assert_eq!(d[1].desired_replicas, 11);
    assert_eq!(d[1].limited_by, Some(LimitedBy::MaxReplicas));
}

#[test]
fn a_success_clears_the_run() {
    // Test Plan: firstFailureTime cleared on a successful retrieval; scaling resumes on the
    // metric's value (30 per pod at target 30: no change) and a new failure starts over.
    let d = steps(
        &spec(),
        &[
            (0, None),
            (180, None),
            (195, Some(30)),
            (210, None),
            (389, None),
        ],
    );
    assert_eq!(d[2].history.metric_failures.get("queue_depth"), None);
    assert_eq!(condition(&d[2]), Some(false));
    let entry = d[2].proposals[1].status.as_ref().unwrap();
    assert_eq!(
        entry.external.as_ref().unwrap().fallback,
        FallbackStatus::default()
    );
    let t210 = t0() + SignedDuration::from_secs(210);
    assert_eq!(d[3].history.metric_failures.get("queue_depth"), Some(&t210));
    assert_eq!(condition(&d[4]), Some(false), "389 - 210 < 180");
}

#[test]
fn a_restart_keeps_the_first_failure_through_the_stored_memory() {
    // Upgrade section: "On subsequent failures, the timestamp is preserved". A new process
    // reads the memory back from the object (status.memory / the native annotation).
    let d = steps(&spec(), &[(0, None), (100, None)]);
    let stored = memory::store(&d[1].history);
    let json = serde_json::to_value(&stored).unwrap();
    assert!(
        json.pointer("/metricFailures/queue_depth").is_some(),
        "{json}"
    );
    let read: DecisionMemory = serde_json::from_value(json).unwrap();
    let now = t0() + SignedDuration::from_secs(180);
    let resumed = memory::resume(None, Some(&read), 6, now, now);
    assert_eq!(resumed.ignored, None);
    assert_eq!(
        resumed.history.metric_failures.get("queue_depth"),
        Some(&t0())
    );
    let after = run(&spec(), &obs(None), &resumed.history, 180);
    assert_eq!(after.desired_replicas, 10);
    // And the status shows the KEP's fields.
    let st = status::status_after(&spec(), None, &after, Some(1), true, now);
    let v = serde_json::to_value(&st.current_metrics).unwrap();
    assert_eq!(v.pointer("/1/external/fallbackActive"), Some(&true.into()));
    assert_eq!(v.pointer("/1/external/fallbackReplicas"), Some(&10.into()));
    assert!(v.pointer("/1/external/firstFailureTime").is_some(), "{v}");
}

#[test]
fn a_hostile_stored_memory_is_ignored_as_a_whole() {
    let mut m = memory::store(&steps(&spec(), &[(0, None)])[0].history);
    m.metric_failures.insert("x".repeat(5000), 0);
    assert!(memory::try_restore(&m).is_err());
    let mut m = memory::store(&steps(&spec(), &[(0, None)])[0].history);
    m.metric_failures.insert("queue_depth".into(), -1);
    assert!(memory::try_restore(&m).is_err());
}

#[test]
fn without_a_fallback_nothing_changes() {
    // KEP: "External metrics without fallback configuration behave as they do today".
    let mut s = spec();
    s.metrics[1].external.as_mut().unwrap().fallback = None;
    let d = steps(&s, &[(0, None), (900, None)]);
    assert_eq!(d[1].desired_replicas, 6);
    assert_eq!(d[1].limited_by, Some(LimitedBy::MetricsUnavailable));
    assert_eq!(condition(&d[1]), None);
    assert!(d[1].history.metric_failures.is_empty());
    assert!(d[1].proposals[1].status.is_none());
}

#[test]
fn two_metrics_in_fallback_take_the_larger_and_prometheus_counts_too() {
    // Story 2: two metrics with fallbacks 15 and 12 -> 15; the second here is a Prometheus
    // query (Plimsoll's addition: a failing query is the same case).
    let mut s = spec();
    s.metrics[1].external.as_mut().unwrap().fallback = Some(fallback("1m", 12));
    let mut p = MetricSpec::prometheus("errors", "sum(rate(e[1m]))", MetricTarget::value("1"));
    p.prometheus.as_mut().unwrap().fallback = Some(fallback("90s", 15));
    let s = s.metric(p);
    let seq = [(0, None), (60, None), (90, None)];
    let mut history = History::default();
    let mut out = Vec::new();
    for (at, q) in seq {
        let o = obs(q).prometheus("errors", Err("connection refused"));
        let d = run(&s, &o, &history, at);
        history = d.history.clone();
        out.push(d);
    }
    assert_eq!(
        out[1].recommended_replicas,
        Some(12),
        "only the 1m fallback is active"
    );
    assert_eq!(out[2].recommended_replicas, Some(15));
    let c = out[2]
        .conditions
        .iter()
        .find(|c| c.type_ == FALLBACK_ACTIVE)
        .unwrap();
    assert!(c.message.contains("2 metric(s)"), "{}", c.message);
}
