//! `type: Prometheus` metrics: one number per query, calculated exactly as an External metric
//! of the same value and target (the facts of upstream's external-metric vectors carry over),
//! and a failed query is a failed metric (no scale-down on it).

use proptest::prelude::*;

use super::fixtures::*;
use crate::api::hpa_plus::{HorizontalPodAutoscalerPlusSpec, MetricSpec, MetricTarget};
use crate::horizontal::observation::Observation;
use crate::horizontal::{History, LimitedBy};

const QUERY: &str = "sum(rate(http_requests_total{app=\"web\"}[1m]))";

fn targets() -> Vec<MetricTarget> {
    vec![
        MetricTarget::value("400"),
        MetricTarget::average("100"),
        MetricTarget::watermarks("80", "120"),
    ]
}

proptest! {
    /// Whatever the value, target type and replicas, a Prometheus metric proposes what an
    /// External metric with the same value proposes, and reports the same value.
    #[test]
    fn a_query_proposes_what_the_same_external_value_proposes(
        milli in 0i64..5_000_000,
        current in 1i32..30,
        which in 0usize..3,
    ) {
        let target = targets()[which].clone();
        let ready = pods(usize::try_from(current).unwrap(), |p| p.cpu(1000, Some(500)));
        let spec = HorizontalPodAutoscalerPlusSpec::test().max(1000);
        let external = proposal_with(
            &MetricSpec::external("rps", target.clone()),
            &Observation::test(current, ready.clone()).external("rps", milli),
            &spec,
        );
        let prometheus = proposal_with(
            &MetricSpec::prometheus("rps", QUERY, target),
            &Observation::test(current, ready).prometheus("rps", Ok(milli)),
            &spec,
        );
        prop_assert_eq!(prometheus.replicas, external.replicas);
        prop_assert_eq!(prometheus.value, external.value);
        prop_assert_eq!(prometheus.position, external.position);
        let status = prometheus.status.and_then(|s| s.prometheus).expect("a prometheus status");
        prop_assert_eq!(status.name, "rps");
        prop_assert_eq!(status.query, QUERY);
    }
}

#[test]
fn the_query_is_the_name_when_none_is_given() {
    let mut m = MetricSpec::prometheus("x", QUERY, MetricTarget::average("100"));
    if let Some(p) = m.prometheus.as_mut() {
        p.name = None;
    }
    let obs =
        Observation::test(2, pods(2, |p| p.cpu(1000, Some(500)))).prometheus(QUERY, Ok(450_000));
    let o = proposal(&m, &obs);
    assert_eq!(o.metric, QUERY);
    // 450 in all at 100 per pod: ceil(450 / 100) = 5.
    assert_eq!(o.replicas, Some(5));
}

#[test]
fn a_failed_query_holds_the_replicas_and_says_why() {
    let spec = HorizontalPodAutoscalerPlusSpec::test()
        .min(1)
        .max(20)
        .metric(MetricSpec::prometheus(
            "rps",
            QUERY,
            MetricTarget::average("100"),
        ));
    let obs = Observation::test(6, pods(6, |p| p.cpu(1000, Some(500)))).prometheus(
        "rps",
        Err("PrometheusUnreachable: prometheus https://prom:9090 unreachable"),
    );
    let d = run(&spec, &obs, &History::default(), 0);
    assert_eq!(d.desired_replicas, 6, "no scale-down on a failed metric");
    assert_eq!(d.scale_to, None);
    assert_eq!(d.limited_by, Some(LimitedBy::MetricsUnavailable));
    let p = &d.proposals[0];
    assert_eq!(p.failure_reason, Some("FailedGetPrometheusMetric"));
    let error = p.error.as_deref().unwrap_or_default();
    assert!(
        error.starts_with("unable to get Prometheus metric rps: PrometheusUnreachable"),
        "{error}"
    );
    let active = d
        .conditions
        .iter()
        .find(|c| c.type_ == "ScalingActive")
        .expect("ScalingActive");
    assert!(!active.status, "{}", active.message);
    assert_eq!(active.reason, "FailedGetPrometheusMetric");
}

#[test]
fn a_missing_value_is_a_failed_metric_too() {
    let m = MetricSpec::prometheus("rps", QUERY, MetricTarget::value("1"));
    let o = proposal(&m, &Observation::test(3, pods(3, |p| p.cpu(1000, Some(1)))));
    assert_eq!(o.replicas, None);
    assert_eq!(o.failure_reason, Some("FailedGetPrometheusMetric"));
}

#[test]
fn a_server_that_is_not_allowed_is_the_reason_scaling_stopped() {
    let spec = HorizontalPodAutoscalerPlusSpec::test()
        .min(1)
        .max(20)
        .metric(MetricSpec::prometheus(
            "rps",
            QUERY,
            MetricTarget::average("100"),
        ));
    let obs = Observation::test(4, pods(4, |p| p.cpu(1000, Some(500)))).prometheus(
        "rps",
        Err("PrometheusServerNotAllowed: prometheus server http://10.0.0.1:22 is not allowed"),
    );
    let d = run(&spec, &obs, &History::default(), 0);
    assert_eq!(d.scale_to, None);
    assert_eq!(
        d.proposals[0].failure_reason,
        Some(crate::horizontal::proposals::PROMETHEUS_SERVER_NOT_ALLOWED)
    );
    let active = d
        .conditions
        .iter()
        .find(|c| c.type_ == "ScalingActive")
        .expect("ScalingActive");
    assert!(!active.status, "{}", active.message);
    assert_eq!(active.reason, "PrometheusServerNotAllowed");
    // Any other failure keeps upstream's reason, even if its text mentions the words.
    let obs = Observation::test(4, pods(4, |p| p.cpu(1000, Some(500)))).prometheus(
        "rps",
        Err("PrometheusUnreachable: PrometheusServerNotAllowed"),
    );
    let d = run(&spec, &obs, &History::default(), 0);
    assert_eq!(
        d.proposals[0].failure_reason,
        Some("FailedGetPrometheusMetric")
    );
}
