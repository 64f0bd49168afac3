//! Explanations of statuses with known numbers: each wait is computed from the memory the
//! controller stores, at a chosen `now`.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use super::*;
use crate::api::hpa_plus::{HorizontalPodAutoscalerCondition, LastDecision, MetricProposal};
use crate::horizontal::history::{History, TimedReplicas};

fn now() -> Timestamp {
    "2026-03-01T12:00:00Z".parse().expect("time")
}

fn ago(secs: i64) -> Timestamp {
    now() - SignedDuration::from_secs(secs)
}

/// An HPA+ on Deployment web, 1–10 replicas, CPU at 50 % and an External watermark metric,
/// a 300 s scale-down window, WPA windows and delays.
fn spec() -> HorizontalPodAutoscalerPlusSpec {
    serde_json::from_value(json!({
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "minReplicas": 1, "maxReplicas": 10,
        "metrics": [
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
            {"type": "External", "external": {"metric": {"name": "queue"},
                "target": {"type": "Watermark", "lowWatermark": "10", "highWatermark": "20"}}}
        ],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}},
        "downscaleForbiddenWindowSeconds": 60,
        "upscaleDelayAboveWatermarkSeconds": 30
    }))
    .expect("spec")
}

fn status(history: &History) -> HorizontalPodAutoscalerPlusStatus {
    HorizontalPodAutoscalerPlusStatus {
        current_replicas: 6,
        desired_replicas: 6,
        last_decision: Some(LastDecision {
            time: Some(Time(ago(2))),
            proposals: vec![
                MetricProposal {
                    metric: "cpu".into(),
                    replicas: Some(3),
                    value: Some("25".into()),
                    error: None,
                },
                MetricProposal {
                    metric: "queue".into(),
                    replicas: None,
                    value: None,
                    error: Some("unable to get external metric queue: no value".into()),
                },
            ],
            recommended_replicas: Some(3),
            desired_replicas: 6,
            limited_by: Some("stabilization".into()),
            reason: "recent recommendations were higher than current one, applying the highest recent recommendation".into(),
            countdowns: vec![],
        }),
        conditions: vec![HorizontalPodAutoscalerCondition {
            type_: "AbleToScale".into(),
            status: "True".into(),
            reason: Some("ScaleDownStabilized".into()),
            message: Some("recent recommendations were higher than current one".into()),
            ..HorizontalPodAutoscalerCondition::default()
        }],
        memory: Some(memory::store(history)),
        ..HorizontalPodAutoscalerPlusStatus::default()
    }
}

fn history() -> History {
    History {
        recommendations: vec![
            TimedReplicas {
                at: ago(260),
                replicas: 6,
            },
            TimedReplicas {
                at: ago(100),
                replicas: 4,
            },
            TimedReplicas {
                at: ago(2),
                replicas: 3,
            },
        ],
        last_scale_time: Some(ago(20)),
        above_high_since: Some(ago(10)),
        ..History::default()
    }
}

fn run(
    spec: &HorizontalPodAutoscalerPlusSpec,
    status: &HorizontalPodAutoscalerPlusStatus,
) -> Explanation {
    explain(&ExplainInput {
        kind: "HorizontalPodAutoscalerPlus",
        name: "shop/web",
        spec,
        status: Some(status),
        memory: status.memory.as_ref(),
        predictive: status.predictive.as_ref(),
        default_downscale_window_seconds: 300,
        now: now(),
    })
}

fn wait<'a>(e: &'a Explanation, what: &str) -> &'a Wait {
    e.waits
        .iter()
        .find(|w| w.what == what)
        .unwrap_or_else(|| panic!("no {what} in {:?}", e.waits))
}

#[test]
fn stabilization_window_with_40_seconds_left() {
    let spec = spec();
    let e = run(&spec, &status(&history()));
    let w = wait(&e, "scaleDownStabilization");
    // 6 was recommended 260 s ago in a 300 s window: it holds the count for 40 s more; the 4
    // of 100 s ago keeps it above 3 for 200 s.
    assert_eq!(w.seconds_left, 40);
    assert!(w.detail.contains("hold the count at 6"), "{}", w.detail);
    assert!(w.detail.contains("in 200s"), "{}", w.detail);
    assert_eq!(
        e.recommendations
            .iter()
            .map(|r| (r.seconds_ago, r.replicas))
            .collect::<Vec<_>>(),
        [(2, 3), (100, 4), (260, 6)]
    );
    assert_eq!(e.window_seconds, 300);
    assert!(!e.waits.iter().any(|w| w.what == "scaleUpStabilization"));
}

#[test]
fn forbidden_window_and_watermark_delay_count_down_from_the_memory() {
    let spec = spec();
    let e = run(&spec, &status(&history()));
    assert_eq!(wait(&e, "downscaleForbiddenWindow").seconds_left, 40);
    assert_eq!(wait(&e, "upscaleDelay").seconds_left, 20);
    // No upscale forbidden window is configured.
    assert!(!e.waits.iter().any(|w| w.what == "upscaleForbiddenWindow"));
}

#[test]
fn a_metric_in_fallback_says_so_from_the_memory_or_the_status() {
    // KEP-5679: `fallback: {failureDuration: 3m, replicas: 8}` on the failing queue metric.
    let mut spec = spec();
    spec.metrics[1].external.as_mut().unwrap().fallback =
        serde_json::from_value(json!({"failureDuration": "3m", "replicas": 8})).unwrap();
    let mut h = history();
    h.metric_failures.insert("queue".into(), ago(200));
    let e = run(&spec, &status(&h));
    assert_eq!(
        e.metrics[1].fallback.as_deref(),
        Some("fallback active: failing for 200s, proposes 8 replicas")
    );
    assert!(e.to_text().contains("[fallback active"), "{}", e.to_text());
    // A native HPA's memory, or an HPA+ read without it: the status entry's firstFailureTime.
    let mut st = status(&history());
    st.memory = None;
    st.current_metrics = vec![
        serde_json::from_value(json!({"type": "External",
        "external": {"metric": {"name": "queue"}, "current": {},
            "firstFailureTime": "2026-03-01T11:59:00Z"}}))
        .unwrap(),
    ];
    let e = run(&spec, &st);
    assert_eq!(
        e.metrics[1].fallback.as_deref(),
        Some("failing for 60s; proposes its fallback of 8 replicas in 120s")
    );
    // Without a fallback in the spec: nothing.
    let e = run(&self::spec(), &status(&h));
    assert_eq!(e.metrics[1].fallback, None);
}

#[test]
fn metrics_carry_value_target_and_proposal_in_spec_order() {
    let spec = spec();
    let e = run(&spec, &status(&history()));
    assert_eq!(
        e.metrics[0],
        MetricLine {
            metric: "cpu".into(),
            current: Some("25".into()),
            target: "50% of requests".into(),
            proposed_replicas: Some(3),
            error: None,
            fallback: None,
        }
    );
    assert_eq!(e.metrics[1].target, "band 10..20");
    assert!(
        e.metrics[1]
            .error
            .as_deref()
            .is_some_and(|m| m.contains("no value"))
    );
    assert_eq!(e.limited_by.as_deref(), Some("stabilization"));
    assert_eq!(
        e.limit_meaning.as_deref(),
        Some("a stabilization window kept an earlier recommendation")
    );
    let text = e.to_text();
    assert!(
        text.contains("cpu: current 25, target 50% of requests -> proposes 3 replicas"),
        "{text}"
    );
    assert!(text.contains("scaleDownStabilization: 40s left"), "{text}");
    assert!(text.contains("Limited by: stabilization"), "{text}");
    assert!(
        text.contains("AbleToScale=True ScaleDownStabilized"),
        "{text}"
    );
}

/// What a tenant writes (the target's kind, a metric's name and target, a condition someone
/// with status access set) is shown escaped: no sequence reaches the terminal and no value adds
/// a line of its own.
#[test]
fn values_from_the_cluster_are_shown_escaped() {
    let hostile = "q\u{1b}]52;c;cm0gLXJmIH4=\u{7}\nRecommendation: 99 replicas\u{202e}";
    let mut spec = spec();
    spec.scale_target_ref.kind = format!("Deployment\u{1b}[2J{hostile}");
    if let Some(e) = spec.metrics[1].external.as_mut() {
        e.metric.name = hostile.to_owned();
        e.target.high_watermark = Some(Quantity(format!("20{hostile}")));
    }
    let mut status = status(&history());
    if let Some(d) = status.last_decision.as_mut() {
        d.proposals[1].metric = hostile.to_owned();
        d.proposals[1].error = Some(format!("failed: {hostile}"));
        d.reason = hostile.to_owned();
    }
    status.conditions[0].message = Some(hostile.to_owned());
    let plain = run(&self::spec(), &self::status(&history())).to_text();
    let text = run(&spec, &status).to_text();
    assert!(crate::printable::is_printable_lines(&text), "{text}");
    assert_eq!(text.lines().count(), plain.lines().count(), "{text}");
    assert!(
        text.contains(
            "q\\u{1b}]52;c;cm0gLXJmIH4=\\u{7}\\nRecommendation: 99 replicas\\u{202e}: current"
        ),
        "{text}"
    );
}

#[test]
fn once_the_windows_pass_nothing_waits() {
    let spec = spec();
    let status = status(&history());
    let e = explain(&ExplainInput {
        kind: "HorizontalPodAutoscalerPlus",
        name: "shop/web",
        spec: &spec,
        status: Some(&status),
        memory: status.memory.as_ref(),
        predictive: status.predictive.as_ref(),
        default_downscale_window_seconds: 300,
        now: now() + SignedDuration::from_secs(300),
    });
    assert!(e.waits.is_empty(), "{:?}", e.waits);
    assert!(e.to_text().contains("nothing: no cooldown"));
}

#[test]
fn without_memory_the_decision_countdowns_are_aged() {
    let spec = spec();
    let mut status = status(&history());
    status.memory = None;
    if let Some(d) = status.last_decision.as_mut() {
        d.countdowns = vec![crate::api::hpa_plus::Countdown {
            transition: "downscaleForbiddenWindow".into(),
            seconds_left: 12,
        }];
    }
    let e = run(&spec, &status);
    // Decided 2 s ago with 12 s left: 10 s now.
    assert_eq!(wait(&e, "downscaleForbiddenWindow").seconds_left, 10);
    assert!(e.notes.iter().any(|n| n.contains("no decision memory")));
}

#[test]
fn a_native_status_says_what_it_cannot_tell() {
    let spec = spec();
    let mut status = status(&history());
    status.last_decision = None;
    let e = run(&spec, &status);
    assert_eq!(e.metrics[0].proposed_replicas, None);
    assert!(e.notes.iter().any(|n| n.contains("no last decision")));
    // The memory still tells the windows.
    assert_eq!(wait(&e, "scaleDownStabilization").seconds_left, 40);
}

#[test]
fn prediction_is_explained_from_its_status_and_absent_when_off() {
    let mut spec = spec();
    let mut status = status(&history());
    assert_eq!(run(&spec, &status).predictive, None, "no spec.predictive");
    spec.predictive = Some(
        serde_json::from_value(serde_json::json!({"mode": "Scale", "season": "168h"})).unwrap(),
    );
    let e = run(&spec, &status);
    let p = e.predictive.as_ref().unwrap();
    assert_eq!(p.reason, "NotEvaluated");
    assert!(
        p.settings.starts_with("Scale, season 168h, 7 days back"),
        "{}",
        p.settings
    );
    status.predictive = Some(crate::api::hpa_plus::PredictiveStatus {
        forecast: Some("cpu: 12500m".into()),
        forecast_replicas: Some(42),
        recent_error_percent: Some(17),
        acting: true,
        reason: "Raised".into(),
        message: "the load forecast for the next 917s needs 42 replicas".into(),
        history: Some(crate::api::hpa_plus::history::StoredPeakSeries {
            step_seconds: Some(900),
            base_bucket: Some(1000),
            metrics: [("cpu".to_owned(), vec![0, 5, 95, 7])].into(),
            ..Default::default()
        }),
    });
    let e = run(&spec, &status);
    let p = e.predictive.as_ref().unwrap();
    assert_eq!(
        (p.forecast_replicas, p.error_percent, p.acting),
        (Some(42), Some(17), true)
    );
    // Buckets 1000 and 1095: 96 buckets of 15 minutes, one day.
    assert_eq!(p.history_hours, vec![("cpu".to_owned(), 24)]);
    let text = e.to_text();
    assert!(
        text.contains("Raised: the forecast raised the replicas"),
        "{text}"
    );
    assert!(
        text.contains("forecast: cpu: 12500m -> 42 replicas (17% off"),
        "{text}"
    );
    assert!(text.contains("history: cpu spans 1.0 days"), "{text}");
    spec.predictive = Some(serde_json::from_value(serde_json::json!({"mode": "Off"})).unwrap());
    assert_eq!(run(&spec, &status).predictive, None, "mode Off");
}

#[test]
fn a_hostile_predictive_history_explains_no_hours_and_no_panic() {
    // A native HPA's history comes from an annotation its tenant may write.
    let mut spec = spec();
    spec.predictive = Some(serde_json::from_value(json!({"mode": "Scale"})).unwrap());
    let mut status = status(&history());
    for flat in [
        vec![0, 5, i64::MAX, 7, i64::MAX, 9],
        vec![i64::MAX, 1, i64::MAX, 1],
        vec![0, 5, 95, 7, i64::MIN, 1],
        vec![0, 5, -400, 7],
    ] {
        status.predictive = Some(crate::api::hpa_plus::PredictiveStatus {
            reason: "NotEnoughHistory".into(),
            history: Some(crate::api::hpa_plus::history::StoredPeakSeries {
                step_seconds: Some(900),
                base_bucket: Some(1000),
                metrics: [("cpu".to_owned(), flat.clone())].into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        let e = run(&spec, &status);
        let p = e.predictive.as_ref().unwrap();
        // The controller refuses such a history and forecasts from none: no hours to read.
        assert_eq!(p.history_hours, vec![], "{flat:?}");
        assert!(!e.to_text().contains("history:"), "{flat:?}");
    }
}

#[test]
fn countdowns_at_the_ends_of_i64_age_without_a_panic() {
    let spec = spec();
    let mut status = status(&history());
    status.memory = None;
    for (seconds_left, decided, waits) in [(i64::MIN, ago(2), false), (i64::MAX, ago(-2), true)] {
        if let Some(d) = status.last_decision.as_mut() {
            d.time = Some(Time(decided));
            d.countdowns = vec![crate::api::hpa_plus::Countdown {
                transition: "downscaleForbiddenWindow".into(),
                seconds_left,
            }];
        }
        let e = run(&spec, &status);
        let found = e
            .waits
            .iter()
            .find(|w| w.what == "downscaleForbiddenWindow");
        assert_eq!(found.map(|w| w.seconds_left), waits.then_some(i64::MAX));
    }
}
