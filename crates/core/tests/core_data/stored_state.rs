//! Property tests of every restore of stored state (`plimsoll_core::stored`): arbitrary text,
//! and arbitrary JSON shaped like each stored form with extreme integers, fed to the decision
//! memory, the tuning load history, the predictive load series, a joint VPA's total usage, a VPA
//! checkpoint and a CronHPA's job conditions. The checks are `stored::exercise`'s (shared with
//! the fuzz target): no panic (these run with overflow checks on), restored sizes within the
//! caps, and either a state the controller could have written or a bounded reason it was
//! ignored.

use jiff::Timestamp;
use plimsoll_core::api::cron::CronHorizontalPodAutoscalerStatus;
use plimsoll_core::api::hpa_plus::DecisionMemory;
use plimsoll_core::api::vpa::VerticalPodAutoscalerCheckpointStatus;
use plimsoll_core::horizontal::peak_series::StoredPeakSeries;
use plimsoll_core::stored::{self, exercise};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Integers that break arithmetic: the extremes, the `i32` edges, small ones (so that some
/// lists are valid and the restored state is exercised), and anything.
fn int() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => 0i64..50,
        1 => -3i64..=3,
        1 => Just(i64::MIN),
        1 => Just(i64::MAX),
        1 => Just(i64::from(i32::MAX)),
        1 => Just(i64::from(i32::MAX) + 1),
        1 => Just(i64::from(i32::MIN)),
        1 => any::<i64>(),
    ]
}

/// A flat `[offset, value, …]` list: mostly small ordered offsets (a readable list), sometimes
/// extreme ones; lengths up to past the largest cap.
fn flat(max_len: usize) -> impl Strategy<Value = Vec<i64>> {
    prop_oneof![
        6 => proptest::collection::vec((1i64..5, 0i64..1_000), 0..8)
            .prop_map(|pairs| pairs.into_iter().flat_map(|(o, v)| [o, v]).collect()),
        2 => proptest::collection::vec((1i64..5, int()), 0..max_len / 2)
            .prop_map(|pairs| pairs.into_iter().flat_map(|(o, v)| [o, v]).collect()),
        1 => proptest::collection::vec(int(), 0..max_len),
        1 => Just(vec![1; max_len]),
    ]
}

/// An optional offset: mostly a small one.
fn offset() -> impl Strategy<Value = Option<i64>> {
    proptest::option::of(prop_oneof![6 => 0i64..100_000, 1 => int()])
}

/// An RFC 3339 time anywhere `jiff` can represent (the API server accepts the same).
fn time() -> impl Strategy<Value = String> {
    let range = stored::seconds_range();
    prop_oneof![
        3 => 1_600_000_000i64..4_100_000_000,
        1 => Just(*range.start()),
        1 => Just(*range.end()),
        1 => range,
    ]
    .prop_map(|s| Timestamp::from_second(s).expect("in range").to_string())
}

/// The evaluation time: a clock reading.
fn now() -> impl Strategy<Value = Timestamp> {
    (1_600_000_000i64..4_100_000_000).prop_map(|s| Timestamp::from_second(s).expect("in range"))
}

fn metric_names() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec("[a-z]{1,8}", 0..4)
}

fn memory_json() -> impl Strategy<Value = Value> {
    (
        prop_oneof![3 => time().prop_map(Some), 1 => Just(None)],
        flat(2 * 1024 + 4),
        flat(64),
        flat(64),
        offset(),
        offset(),
        offset(),
    )
        .prop_map(|(base, recs, ups, downs, last, above, below)| {
            json!({
                "base": base, "recommendations": recs, "scaleUps": ups, "scaleDowns": downs,
                "lastScale": last, "aboveHighSince": above, "belowLowSince": below,
            })
        })
}

fn per_metric(max_len: usize) -> impl Strategy<Value = Value> {
    (metric_names(), proptest::collection::vec(flat(max_len), 4)).prop_map(|(names, lists)| {
        Value::Object(
            names
                .into_iter()
                .zip(lists)
                .map(|(n, l)| (n, json!(l)))
                .collect(),
        )
    })
}

fn load_history_json() -> impl Strategy<Value = Value> {
    let hour = prop_oneof![3 => 440_000i64..1_200_000, 1 => int()];
    (proptest::option::of(hour), per_metric(2 * 720 + 4))
        .prop_map(|(base, metrics)| json!({"baseHour": base, "metrics": metrics}))
}

fn load_series_json() -> impl Strategy<Value = Value> {
    let bucket = prop_oneof![3 => 1_700_000i64..4_000_000, 1 => int()];
    let step = prop_oneof![3 => Just(900i64), 1 => int()];
    (step, proptest::option::of(bucket), per_metric(2 * 3361 + 4)).prop_map(
        |(step, base, metrics)| json!({"stepSeconds": step, "baseBucket": base, "metrics": metrics}),
    )
}

fn usage_series_json() -> impl Strategy<Value = Value> {
    let width = prop_oneof![3 => Just(300i64), 1 => Just(1i64), 1 => int()];
    let base = prop_oneof![3 => 5_000_000i64..12_000_000, 1 => int()];
    (width, base, flat(4100)).prop_map(
        |(width, base, values)| json!({"bucketSeconds": width, "base": base, "values": values}),
    )
}

fn total_usage_json() -> impl Strategy<Value = Value> {
    (
        usage_series_json(),
        proptest::option::of(usage_series_json()),
    )
        .prop_map(|(cpu, memory)| {
            let mut v = cpu;
            if let (Some(m), Some(obj)) = (memory, v.as_object_mut()) {
                obj.insert("memory".into(), m);
            }
            v
        })
}

fn histogram_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![3 => (0u64..200).prop_map(|k| k.to_string()), 1 => "[0-9a-z-]{0,22}"];
    let weight = prop_oneof![Just(-1.0f64), Just(0.0), Just(1e308), 0.0f64..1e6];
    (
        proptest::option::of(time()),
        proptest::collection::btree_map(key, any::<u32>(), 0..40),
        proptest::option::of(weight),
    )
        .prop_map(|(reference, weights, total)| {
            json!({"referenceTimestamp": reference, "bucketWeights": weights, "totalWeight": total})
        })
}

fn checkpoint_json() -> impl Strategy<Value = Value> {
    (
        prop_oneof![3 => Just("v3".to_owned()), 1 => "v[0-9]"],
        proptest::option::of(histogram_json()),
        proptest::option::of(histogram_json()),
        proptest::option::of(time()),
        proptest::option::of(time()),
        proptest::option::of(int()),
    )
        .prop_map(|(version, cpu, memory, first, last, count)| {
            json!({
                "version": version, "cpuHistogram": cpu, "memoryHistogram": memory,
                "firstSampleStart": first, "lastSampleStart": last, "totalSamplesCount": count,
            })
        })
}

fn cron_status_json() -> impl Strategy<Value = Value> {
    let condition = (
        "[0-9a-f]{0,16}",
        prop_oneof![
            Just("every-second".to_owned()),
            Just("once".to_owned()),
            "[a-z]{0,6}"
        ],
        prop_oneof![Just("Submitted"), Just("Succeed"), Just("Failed")],
        proptest::option::of(time()),
    )
        .prop_map(|(id, name, state, at)| {
            json!({"jobId": id, "name": name, "schedule": "@daily", "state": state,
                   "lastProbeTime": at, "message": "m"})
        });
    (proptest::collection::vec(condition, 0..5), any::<bool>())
        .prop_map(|(conditions, keep)| json!({"conditions": conditions, "scaleUpKeepWindow": keep}))
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        // An integration test has no lib.rs next to it to persist failures beside.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Any text, in every place a restore reads text from.
    #[test]
    fn any_text_is_restored_or_ignored(text in "\\PC{0,200}", now in now()) {
        exercise::text(&text, now);
    }

    /// Text built from the stored forms' own tokens, so that some of it parses.
    #[test]
    fn json_like_text_is_restored_or_ignored(
        parts in proptest::collection::vec(
            prop_oneof![
                Just("{".to_owned()), Just("}".to_owned()), Just("[".to_owned()),
                Just("]".to_owned()), Just(",".to_owned()), Just(":".to_owned()),
                Just("\"base\"".to_owned()), Just("\"values\"".to_owned()),
                Just("\"bucketSeconds\"".to_owned()), Just("\"recommendations\"".to_owned()),
                Just("\"baseHour\"".to_owned()), Just("\"metrics\"".to_owned()),
                Just("\"cpu\"".to_owned()), Just("\"2026-01-01T00:00:00Z\"".to_owned()),
                int().prop_map(|i| i.to_string()),
            ],
            0..40,
        ),
        now in now(),
    ) {
        exercise::text(&parts.concat(), now);
    }

    #[test]
    fn decision_memory(v in memory_json(), now in now()) {
        let m: DecisionMemory = serde_json::from_value(v.clone()).expect("the stored form");
        exercise::decision_memory(&m, now);
        exercise::text(&v.to_string(), now);
    }

    #[test]
    fn tuning_load_history(v in load_history_json(), now in now()) {
        let h: StoredPeakSeries = serde_json::from_value(v.clone()).expect("the stored form");
        exercise::load_history(&h, now);
        exercise::text(&json!({"loadHistory": v}).to_string(), now);
    }

    #[test]
    fn predictive_load_series(v in load_series_json(), now in now()) {
        let s: StoredPeakSeries = serde_json::from_value(v.clone()).expect("the stored form");
        exercise::load_series(&s, now);
        exercise::text(&json!({"history": v, "reason": "Off"}).to_string(), now);
    }

    #[test]
    fn joint_total_usage(v in total_usage_json(), now in now()) {
        exercise::total_usage(&v.to_string(), now);
    }

    #[test]
    fn vpa_checkpoint(v in checkpoint_json(), now in now()) {
        if let Ok(status) = serde_json::from_value::<VerticalPodAutoscalerCheckpointStatus>(v.clone()) {
            exercise::vpa_checkpoint(&status, now);
        }
        exercise::text(&v.to_string(), now);
    }

    #[test]
    fn cron_status(v in cron_status_json(), now in now()) {
        let status: CronHorizontalPodAutoscalerStatus =
            serde_json::from_value(v).expect("the status form");
        exercise::cron_status(&status, now);
    }
}

/// Stored forms the controller writes, with the extreme values it may record, read back and
/// run through the code that uses them (the `Ok` side of every check).
#[test]
fn valid_forms_with_extreme_values_read_back() {
    let now = exercise::now();
    let memory = json!({"base": "2026-01-01T00:00:00Z",
                        "recommendations": [0, i32::MAX, 5000, i32::MIN, 5000, 0],
                        "scaleUps": [0, i32::MAX, 1, i32::MAX, 1, i32::MAX],
                        "scaleDowns": [0, i32::MAX, 1, i32::MAX],
                        "lastScale": 10_000});
    let m: DecisionMemory = serde_json::from_value(memory).expect("the stored form");
    assert!(plimsoll_core::horizontal::memory::try_restore(&m).is_ok());
    exercise::decision_memory(&m, now);
    let hour = now.as_second() / 3600;
    let history = json!({"baseHour": hour - 48,
                         "metrics": {"cpu": [0, i64::MIN, 24, i64::MAX, 24, 0]}});
    let h: StoredPeakSeries = serde_json::from_value(history).expect("the stored form");
    assert!(plimsoll_core::horizontal::load_history::LoadHistory::try_restore(&h).is_ok());
    exercise::load_history(&h, now);
    let bucket = now.as_second() / 900;
    let series = json!({"stepSeconds": 900, "baseBucket": bucket - 192,
                        "metrics": {"rps": [0, i64::MIN, 96, i64::MAX, 96, 1]}});
    let s: StoredPeakSeries = serde_json::from_value(series).expect("the stored form");
    assert!(plimsoll_core::horizontal::predictive::LoadSeries::try_restore(&s, 900).is_ok());
    exercise::load_series(&s, now);
    let usage = json!({"bucketSeconds": 300, "base": now.as_second() / 300 - 10,
                       "values": [0, i64::MAX, 1, 0],
                       "memory": {"bucketSeconds": 60, "base": 0, "values": []}});
    assert!(
        plimsoll_core::vertical::joint_sizing::restore(
            &usage.to_string(),
            &plimsoll_core::vertical::joint_sizing::JointConfig::default()
        )
        .is_ok()
    );
    exercise::total_usage(&usage.to_string(), now);
    let checkpoint = json!({"version": "v3", "totalSamplesCount": i64::MAX,
                            "cpuHistogram": {"referenceTimestamp": "9999-12-30T00:00:00Z",
                                             "bucketWeights": {"0": u32::MAX, "175": 1},
                                             "totalWeight": 1e308},
                            "firstSampleStart": "0001-01-01T00:00:00Z",
                            "lastSampleStart": "9999-12-30T00:00:00Z"});
    let status: VerticalPodAutoscalerCheckpointStatus =
        serde_json::from_value(checkpoint).expect("the stored form");
    exercise::vpa_checkpoint(&status, now);
}

/// The issue's example: a series claiming buckets far apart made `newest - bucket` overflow;
/// a list claiming 10^12 entries by its offsets allocates nothing for them.
#[test]
fn the_examples_of_the_issue_are_ignored() {
    let now = Timestamp::from_second(1_767_225_600).expect("in range");
    let overflow = json!({"stepSeconds": 900, "baseBucket": i64::MIN / 2,
                          "metrics": {"rps": [0, 1, i64::MAX, 1]}});
    let s: StoredPeakSeries = serde_json::from_value(overflow).expect("the stored form");
    exercise::load_series(&s, now);
    let sparse = json!({"bucketSeconds": 1, "base": 0, "values": [0, 1, 1_000_000_000_000i64, 1]});
    exercise::total_usage(&sparse.to_string(), now);
    let far = json!({"base": "2026-01-01T00:00:00Z", "scaleUps": [i64::MAX, 1, i64::MAX, 1]});
    let m: DecisionMemory = serde_json::from_value(far).expect("the stored form");
    assert!(plimsoll_core::horizontal::memory::try_restore(&m).is_err());
}

/// The strategies above reach both sides of every restore (a property test that only ever
/// ignores its input would prove little about what is restored).
#[test]
fn the_strategies_reach_both_outcomes() {
    use plimsoll_core::horizontal::load_history::LoadHistory;
    use plimsoll_core::horizontal::memory::try_restore;
    use plimsoll_core::horizontal::predictive::LoadSeries;
    use plimsoll_core::vertical::aggregate::AggregationsConfig;
    use plimsoll_core::vertical::checkpoint;
    use plimsoll_core::vertical::joint_sizing::{JointConfig, restore};
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    fn count(
        strategy: impl Strategy<Value = Value>,
        restores: impl Fn(Value) -> bool,
    ) -> (u32, u32) {
        let mut runner = TestRunner::deterministic();
        let mut outcomes = (0, 0);
        for _ in 0..60 {
            let v = strategy.new_tree(&mut runner).expect("a value").current();
            if restores(v) {
                outcomes.0 += 1;
            } else {
                outcomes.1 += 1;
            }
        }
        outcomes
    }
    let now = exercise::now();
    let cases = [
        (
            "decision memory",
            count(memory_json(), |v| {
                try_restore(&serde_json::from_value(v).expect("form")).is_ok()
            }),
        ),
        (
            "load history",
            count(load_history_json(), |v| {
                LoadHistory::try_restore(&serde_json::from_value(v).expect("form")).is_ok()
            }),
        ),
        (
            "load series",
            count(load_series_json(), |v| {
                LoadSeries::try_restore(&serde_json::from_value(v).expect("form"), 900).is_ok()
            }),
        ),
        (
            "total usage",
            count(total_usage_json(), |v| {
                restore(&v.to_string(), &JointConfig::default()).is_ok()
            }),
        ),
        (
            "checkpoint",
            count(checkpoint_json(), |v| {
                serde_json::from_value::<VerticalPodAutoscalerCheckpointStatus>(v).is_ok_and(|s| {
                    checkpoint::load(&s, &AggregationsConfig::default(), now).is_ok()
                })
            }),
        ),
    ];
    for (form, (restored, ignored)) in cases {
        assert!(
            restored >= 4 && ignored >= 4,
            "{form}: {restored} restored, {ignored} ignored"
        );
    }
}
