use proptest::prelude::*;
use serde_json::json;

use super::*;

const DAY_BUCKETS: i64 = 86_400 / DEFAULT_BUCKET_SECONDS;

/// One day of 5-minute buckets: `low` buckets at `trough`, the rest at `peak`.
fn flat_day(low: i64, trough: i64, peak: i64) -> TotalUsage {
    TotalUsage::from_buckets(
        DEFAULT_BUCKET_SECONDS,
        (0..DAY_BUCKETS)
            .map(|b| (b, if b < low { trough } else { peak }))
            .collect(),
    )
}

/// [`size`] with target 60 %, `min`/`max`, `current`, and the default settings.
fn sized(usage: &TotalUsage, min: i32, max: i32, current: Option<i64>) -> JointRequest {
    size(&JointInput {
        usage,
        target_utilization: 60,
        min_replicas: min,
        max_replicas: max,
        current,
        min_allowed: None,
        max_allowed: None,
        settings: &JointSettings::default(),
    })
}

#[test]
fn total_usage_keeps_the_highest_per_bucket_and_the_window() {
    let t0: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
    let mut u = TotalUsage::default();
    let at = |s: i64| t0 + jiff::SignedDuration::from_secs(s);
    u.record(at(0), 1000, 900);
    u.record(at(100), 3000, 900);
    u.record(at(200), 2000, 900);
    assert_eq!(u.buckets().len(), 1);
    assert_eq!(u.percentile(0.5), Some(3000));
    u.record(at(300), 500, 900);
    u.record(at(600), 700, 900);
    assert_eq!(u.span_seconds(), 900);
    // A fourth bucket pushes the first out of a 900-second window.
    u.record(at(900), 800, 900);
    assert_eq!(
        u.buckets().iter().map(|(_, v)| *v).collect::<Vec<_>>(),
        [500, 700, 800]
    );
    // Nearest rank: p5 of three is the lowest, p95 the highest.
    assert_eq!(
        (u.percentile(0.05), u.percentile(0.95)),
        (Some(500), Some(800))
    );
    assert_eq!(TotalUsage::default().percentile(0.5), None);
}

/// One row of [`table_of_choices_and_hysteresis`].
struct Case {
    name: &'static str,
    current: Option<i64>,
    request: i64,
    changed: bool,
}

#[test]
fn table_of_choices_and_hysteresis() {
    // p5 = 2 cores, p95 = 16 cores; target 60 %, min 2, max 30 (24 replicas at the peak):
    // lower = ceil(16000·100 / (60·24)) = 1112m, upper = floor(2000·100 / (60·2)) = 1666m,
    // the choice isqrt(1112·1666) = 1361m.
    let day = flat_day(100, 2000, 16_000);
    let cases = [
        Case {
            name: "no request yet: the choice",
            current: None,
            request: 1361,
            changed: true,
        },
        Case {
            name: "inside the band: kept",
            current: Some(1300),
            request: 1300,
            changed: false,
        },
        Case {
            name: "inside the band, high: kept",
            current: Some(1600),
            request: 1600,
            changed: false,
        },
        Case {
            name: "outside the band: changed",
            current: Some(1100),
            request: 1361,
            changed: true,
        },
        Case {
            name: "past the peak bound: changed",
            current: Some(1050),
            request: 1361,
            changed: true,
        },
        Case {
            name: "past the trough bound: changed",
            current: Some(1760),
            request: 1361,
            changed: true,
        },
        Case {
            name: "far too small",
            current: Some(100),
            request: 1361,
            changed: true,
        },
        Case {
            name: "far too large",
            current: Some(16_000),
            request: 1361,
            changed: true,
        },
    ];
    for c in cases {
        let r = sized(&day, 2, 30, c.current);
        assert_eq!(
            (r.request, r.changed),
            (Some(c.request), c.changed),
            "{}",
            c.name
        );
        assert_eq!(r.reason, JointReason::BothBoundsMet, "{}", c.name);
        assert_eq!((r.lower_bound, r.upper_bound), (Some(1112), Some(1666)));
        assert_eq!(
            (r.peak, r.trough, r.ideal),
            (Some(16_000), Some(2000), Some(1361))
        );
    }
    // 16 cores at 60 % of 1361m: ceil(19.6) = 20 replicas at the peak.
    assert_eq!(sized(&day, 2, 30, None).peak_replicas, Some(20));
}

#[test]
fn no_request_fits_both_bounds_the_peak_wins_and_says_so() {
    // min 4: the trough allows at most floor(2000·100 / 240) = 833m, the peak needs 1112m.
    let r = sized(&flat_day(100, 2000, 16_000), 4, 30, Some(800));
    assert_eq!((r.request, r.changed), (Some(1112), true));
    assert_eq!(r.reason, JointReason::PeakPreferred);
    assert_eq!(r.reason.as_str(), "PeakPreferred");
    assert!(r.message.contains("sized for the peak"), "{}", r.message);
    assert_eq!(r.peak_replicas, Some(24));
    // Kept once there, even though the trough bound stays violated.
    let again = sized(&flat_day(100, 2000, 16_000), 4, 30, r.request);
    assert!(!again.changed);
}

#[test]
fn policy_caps_come_last_and_are_reported() {
    let usage = flat_day(100, 2000, 16_000);
    let r = size(&JointInput {
        usage: &usage,
        target_utilization: 60,
        min_replicas: 2,
        max_replicas: 30,
        current: None,
        min_allowed: None,
        max_allowed: Some(1000),
        settings: &JointSettings::default(),
    });
    assert_eq!(
        (r.request, r.reason),
        (Some(1000), JointReason::CappedByPolicy)
    );
    // 16 cores at 60 % of 1 core: 27 replicas, more than the 24 of the headroom.
    assert_eq!(r.peak_replicas, Some(27));
}

#[test]
fn a_short_spike_moves_neither_percentile() {
    let mut buckets: Vec<(i64, i64)> = flat_day(100, 2000, 16_000).buckets().to_vec();
    // Half an hour at 40 cores.
    for b in buckets.iter_mut().skip(150).take(6) {
        b.1 = 40_000;
    }
    let spiky = TotalUsage::from_buckets(DEFAULT_BUCKET_SECONDS, buckets);
    let r = sized(&spiky, 2, 30, Some(1361));
    assert_eq!(
        (r.peak, r.request, r.changed),
        (Some(16_000), Some(1361), false)
    );
}

#[test]
fn while_learning_the_request_only_rises_and_at_least_doubles() {
    // One hour at 4 cores: lower = ceil(4000·100 / (60·24)) = 278m.
    let hour = TotalUsage::from_buckets(300, (0..12).map(|b| (b, 4000)).collect());
    let r = sized(&hour, 2, 30, Some(100));
    assert_eq!((r.request, r.changed), (Some(334), true), "1.2 × 278");
    assert_eq!(r.reason, JointReason::LearningDailyCycle);
    let r = sized(&hour, 2, 30, Some(250));
    assert_eq!((r.request, r.changed), (Some(500), true), "twice 250");
    // At or above the bound (within the tolerance), and far above it: kept.
    for current in [270, 300, 16_000] {
        let r = sized(&hour, 2, 30, Some(current));
        assert_eq!((r.request, r.changed), (Some(current), false), "{current}");
    }
    assert_eq!(sized(&hour, 2, 30, None).request, Some(334));
}

#[test]
fn no_usage_or_no_target_keeps_the_request() {
    let empty = TotalUsage::default();
    let r = sized(&empty, 2, 30, Some(500));
    assert_eq!(
        (r.request, r.changed, r.reason),
        (Some(500), false, JointReason::NoUsage)
    );
    let day = flat_day(100, 2000, 16_000);
    let r = size(&JointInput {
        usage: &day,
        target_utilization: 0,
        min_replicas: 2,
        max_replicas: 30,
        current: Some(500),
        min_allowed: None,
        max_allowed: None,
        settings: &JointSettings::default(),
    });
    assert_eq!((r.request, r.reason), (Some(500), JointReason::NoUsage));
    assert!(r.message.contains("no utilization target"), "{}", r.message);
}

#[test]
fn the_target_is_the_cpu_utilization_metric() {
    let spec = |metrics: serde_json::Value| -> HorizontalPodAutoscalerPlusSpec {
        serde_json::from_value(json!({
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 10,
            "metrics": metrics,
        }))
        .unwrap()
    };
    let cpu = spec(json!([{"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": 60}}}]));
    assert_eq!(utilization_target(&cpu, "cpu"), Some(60));
    assert_eq!(utilization_target(&cpu, "memory"), None);
    // Upstream's default: CPU at 80 %.
    assert_eq!(utilization_target(&spec(json!([])), "cpu"), Some(80));
    let average = spec(json!([{"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "AverageValue", "averageValue": "500m"}}}]));
    assert_eq!(utilization_target(&average, "cpu"), None);
}

/// A day with `low` buckets at `trough` and the rest at `peak`, for property tests.
fn any_day() -> impl Strategy<Value = TotalUsage> {
    (1i64..200, 1i64..50_000, 1i64..200_000)
        .prop_map(|(low, trough, extra)| flat_day(low, trough, trough + extra))
}

proptest! {
    #[test]
    fn the_choice_keeps_the_peak_within_max_when_feasible(
        usage in any_day(),
        target in 10i32..100,
        min in 1i32..10,
        extra in 0i32..100,
        current in proptest::option::of(1i64..100_000),
    ) {
        let max = min + extra;
        let r = size(&JointInput {
            usage: &usage,
            target_utilization: target,
            min_replicas: min,
            max_replicas: max,
            current,
            min_allowed: None,
            max_allowed: None,
            settings: &JointSettings::default(),
        });
        let request = r.request.unwrap();
        let peak = r.peak.unwrap();
        // A new request serves the peak within the headroom whatever the trough (the peak is
        // preferred); with both bounds met, the trough still wants at least minReplicas.
        if r.changed {
            let allowed = ((0.8 * f64::from(max)).floor() as i64).clamp(i64::from(min), i64::from(max));
            prop_assert!(replicas_needed(peak, request, target) <= allowed, "{r:?}");
            if r.reason == JointReason::BothBoundsMet {
                // And the trough still wants at least minReplicas.
                prop_assert!(replicas_needed(r.trough.unwrap(), request, target) >= i64::from(min), "{r:?}");
            }
        }
        // Sizing again from the request it chose changes nothing.
        let again = size(&JointInput {
            usage: &usage,
            target_utilization: target,
            min_replicas: min,
            max_replicas: max,
            current: Some(request),
            min_allowed: None,
            max_allowed: None,
            settings: &JointSettings::default(),
        });
        prop_assert!(!again.changed, "{again:?}");
    }

    #[test]
    fn no_change_inside_the_band(
        usage in any_day(),
        target in 10i32..100,
        min in 1i32..10,
        extra in 0i32..100,
        factor in 0.85f64..1.15,
    ) {
        let settings = JointSettings::default();
        let input = |current| JointInput {
            usage: &usage,
            target_utilization: target,
            min_replicas: min,
            max_replicas: min + extra,
            current,
            min_allowed: None,
            max_allowed: None,
            settings: &settings,
        };
        let ideal = size(&input(None)).request.unwrap();
        let current = ((ideal as f64) * factor).round() as i64;
        let r = size(&input(Some(current)));
        let lower = r.lower_bound.unwrap();
        let upper = r.upper_bound.unwrap();
        let inside_bounds = current >= lower && (upper < lower || current <= upper);
        // ±15 % of the choice is within ±20 % of the current request.
        if inside_bounds {
            prop_assert!(!r.changed && r.request == Some(current), "{r:?}");
        }
    }
}
