//! Decision memory in the object: a [`History`] to its stored form ([`store`]) and back
//! ([`restore`]), and which history a reconcile starts from ([`resume`]).
//!
//! A decision depends, beyond the current observation, on its [`History`]: the recommendations
//! of the stabilization windows, the scale events of the policies' periods, the last scale time
//! (forbidden windows) and since when a metric has been out of its watermarks (delays). The
//! controller keeps it in memory and also writes it into the object (HPA+
//! `status.memory`; for a native `autoscaling/v2` HPA, whose status has no room, the
//! [`ANNOTATION`]), so that a restarted process or a standby that takes over reads it back and
//! decides exactly as the previous leader would have.
//!
//! Invariants:
//! - `restore(store(h))` makes the same decisions as `h` at any later time: recommendations
//!   that can no longer decide a window are dropped (an older one with a later one ≥ it and a
//!   later one ≤ it is never the maximum nor the minimum of a window that holds it), instants
//!   are kept to the millisecond, events are kept as they are.
//! - `store(restore(m)) == m` for anything [`store`] produced, so the controller keeps
//!   `restore(store(h))` as its own memory and a successor starts from the very same history.
//! - The stored form is bounded: at most [`MAX_ENTRIES`] pairs per list (the oldest are dropped
//!   beyond that); for a one-hour window at a 5 s period it serializes to at most
//!   [`BOUND_BYTES_HOUR_AT_5S`] bytes of JSON.
//! - Reading back checks what anyone who may edit the object could have written instead
//!   ([`try_restore`], [`crate::stored`]): a longer list, an instant out of range or a count out
//!   of range makes the whole memory ignored, and [`resume`] says so.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::history::{History, ScaleEvent, TimedReplicas};
use crate::api::hpa_plus::DecisionMemory;
use crate::stored::{self, Order, PairRules, StoredStateError};

/// The annotation that carries the memory of a native `autoscaling/v2` HPA (compact JSON of
/// [`DecisionMemory`]).
pub const ANNOTATION: &str = "plimsoll.dev/decision-memory";

/// The most pairs kept per list; beyond it the oldest are dropped. A one-hour window at a 5 s
/// period has at most 720 evaluations, so the cap only bites below a 3.5 s period.
pub const MAX_ENTRIES: usize = 1024;

/// The most bytes the JSON of a memory takes for a one-hour window at a 5 s period: 720
/// recommendations and 720 scale events (one per evaluation at most), each pair at most
/// `3600000,2147483647,` (19 bytes), plus the keys, the base and the three instants.
pub const BOUND_BYTES_HOUR_AT_5S: usize = 2 * 720 * 19 + 256;

const MS_PER_SECOND: i64 = 1000;

/// The stored form of `history`.
pub fn store(history: &History) -> DecisionMemory {
    let recommendations = essential(&history.recommendations);
    let recommendations = capped(&recommendations);
    let ups = capped(&history.scale_up_events);
    let downs = capped(&history.scale_down_events);
    let instants = recommendations
        .iter()
        .map(|r| r.at)
        .chain(ups.iter().chain(downs).map(|e| e.at))
        .chain(history.last_scale_time)
        .chain(history.above_high_since)
        .chain(history.below_low_since)
        .chain(history.metric_failures.values().copied());
    let Some(oldest) = instants.map(millis).min() else {
        return DecisionMemory::default();
    };
    let base_ms = oldest.div_euclid(MS_PER_SECOND) * MS_PER_SECOND;
    let offset = |at: Timestamp| millis(at) - base_ms;
    DecisionMemory {
        base: Timestamp::from_millisecond(base_ms).ok().map(Time),
        recommendations: pairs(
            base_ms,
            recommendations
                .iter()
                .map(|r| (r.at, i64::from(r.replicas))),
        ),
        scale_ups: pairs(base_ms, ups.iter().map(|e| (e.at, i64::from(e.change)))),
        scale_downs: pairs(base_ms, downs.iter().map(|e| (e.at, i64::from(e.change)))),
        last_scale: history.last_scale_time.map(offset),
        above_high_since: history.above_high_since.map(offset),
        below_low_since: history.below_low_since.map(offset),
        metric_failures: history
            .metric_failures
            .iter()
            .map(|(name, at)| (name.clone(), offset(*at)))
            .collect(),
    }
}

/// The history `memory` stands for; an empty history when it does not read back
/// ([`try_restore`]: the memory is then ignored as a whole).
pub fn restore(memory: &DecisionMemory) -> History {
    try_restore(memory).unwrap_or_default()
}

/// The history `memory` stands for, or why it cannot be read back (crate::stored's rules): at
/// most [`MAX_ENTRIES`] pairs per list (what [`store`] keeps), every instant inside the time
/// range (checked arithmetic from `base`), recommendations any `i32`, scale events 1 to
/// `i32::MAX` replicas, and without a `base` nothing else. The instants may come in any
/// order: a controller whose clock stepped back stores them so.
pub fn try_restore(memory: &DecisionMemory) -> Result<History, StoredStateError> {
    let Some(base) = &memory.base else {
        let empty = memory.recommendations.is_empty()
            && memory.scale_ups.is_empty()
            && memory.scale_downs.is_empty()
            && memory.last_scale.is_none()
            && memory.above_high_since.is_none()
            && memory.below_low_since.is_none()
            && memory.metric_failures.is_empty();
        return if empty {
            Ok(History::default())
        } else {
            Err(StoredStateError::Missing { field: "base" })
        };
    };
    let base_ms = millis(base.0);
    let list = |field: &'static str, flat: &[i64], values| {
        let rules = PairRules {
            field,
            max_pairs: MAX_ENTRIES,
            positions: stored::millis_range(),
            values,
            order: Order::Any,
        };
        stored::pairs(base_ms, flat, &rules)?
            .into_iter()
            .map(|(ms, value)| {
                let at = Timestamp::from_millisecond(ms)
                    .map_err(|_| StoredStateError::BadPosition { field })?;
                let value =
                    i32::try_from(value).map_err(|_| StoredStateError::BadValue { field })?;
                Ok((at, value))
            })
            .collect::<Result<Vec<_>, StoredStateError>>()
    };
    let replicas = i64::from(i32::MIN)..=i64::from(i32::MAX);
    let changes = 1..=i64::from(i32::MAX);
    let events = |field, flat: &[i64]| -> Result<Vec<ScaleEvent>, StoredStateError> {
        Ok(list(field, flat, changes.clone())?
            .into_iter()
            .map(|(at, change)| ScaleEvent { at, change })
            .collect())
    };
    let instant = |field: &'static str, offset: Option<i64>| {
        offset
            .map(|offset| {
                base_ms
                    .checked_add(offset)
                    .filter(|_| offset >= 0)
                    .and_then(|ms| Timestamp::from_millisecond(ms).ok())
                    .ok_or(StoredStateError::BadPosition { field })
            })
            .transpose()
    };
    Ok(History {
        recommendations: list("recommendations", &memory.recommendations, replicas)?
            .into_iter()
            .map(|(at, replicas)| TimedReplicas { at, replicas })
            .collect(),
        scale_up_events: events("scaleUps", &memory.scale_ups)?,
        scale_down_events: events("scaleDowns", &memory.scale_downs)?,
        last_scale_time: instant("lastScale", memory.last_scale)?,
        above_high_since: instant("aboveHighSince", memory.above_high_since)?,
        below_low_since: instant("belowLowSince", memory.below_low_since)?,
        metric_failures: metric_failures(&memory.metric_failures, &instant)?,
    })
}

/// The stored first failures: at most [`crate::api::limits::MAX_METRICS`] names (a spec has no
/// more metrics), each at most [`MAX_FAILURE_KEY_LENGTH`] bytes, each instant as the others.
fn metric_failures(
    stored: &BTreeMap<String, i64>,
    instant: &dyn Fn(&'static str, Option<i64>) -> Result<Option<Timestamp>, StoredStateError>,
) -> Result<BTreeMap<String, Timestamp>, StoredStateError> {
    const FIELD: &str = "metricFailures";
    if stored.len() > crate::api::limits::MAX_METRICS
        || stored.keys().any(|k| k.len() > MAX_FAILURE_KEY_LENGTH)
    {
        return Err(StoredStateError::BadValue { field: FIELD });
    }
    stored
        .iter()
        .map(|(name, offset)| {
            let at = instant(FIELD, Some(*offset))?
                .ok_or(StoredStateError::BadPosition { field: FIELD })?;
            Ok((name.clone(), at))
        })
        .collect()
}

/// The longest metric name a stored first failure may carry: a Prometheus metric without a
/// `name` is named by its query.
pub const MAX_FAILURE_KEY_LENGTH: usize = crate::api::limits::MAX_QUERY_LENGTH;

/// `history` as a successor would read it back: what the controller keeps after each decision.
pub fn normalized(history: &History) -> History {
    restore(&store(history))
}

/// The history a reconcile at `now` starts from: this process's own (`held`) unless the object
/// carries a memory written later (another instance led meanwhile), the object's memory on first
/// sight, and, when nothing was stored, upstream's `recordInitialRecommendation`: the current
/// replicas as a recommendation at `now`.
///
/// A memory read from the object is [`extended`] to `until`, the latest instant its writer may
/// have evaluated: a write that would only move the newest recommendation's time is skipped
/// ([`same_but_newest_time`]), so the newest recommendation stood until the writer's last
/// evaluation. The replay passes its previous step; a controller taking an object over passes
/// `now`, since it cannot know when its predecessor stopped — a stabilization window may then
/// last longer by the takeover's gap, never end sooner.
pub fn resume(
    held: Option<&History>,
    stored: Option<&DecisionMemory>,
    current_replicas: i32,
    now: Timestamp,
    until: Timestamp,
) -> Resumed {
    let (read, ignored) = match stored.map(try_restore) {
        Some(Ok(read)) => (Some(read), None),
        Some(Err(why)) => (None, Some(why)),
        None => (None, None),
    };
    let history = match (held, read) {
        (Some(own), Some(read)) if latest(&read) > latest(own) => extended(read, until),
        (Some(own), _) => own.clone(),
        (None, Some(read)) => extended(read, until),
        (None, None) => History {
            recommendations: vec![TimedReplicas {
                at: now,
                replicas: current_replicas,
            }],
            ..History::default()
        },
    };
    Resumed { history, ignored }
}

/// What [`resume`] starts from, and why the object's memory was ignored, if it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resumed {
    /// The history the decision starts from.
    pub history: History,
    /// Why the stored memory was not read ([`try_restore`]); `None` when it was, or there was
    /// none.
    pub ignored: Option<StoredStateError>,
}

/// `history` with its newest recommendation standing until `until` (a recommendation of the
/// same count at `until`), when that is later.
pub fn extended(mut history: History, until: Timestamp) -> History {
    if let Some(newest) = history.recommendations.last().copied()
        && newest.at < until
    {
        history.recommendations.push(TimedReplicas {
            at: until,
            replicas: newest.replicas,
        });
    }
    history
}

/// Whether `new` says nothing `old` does not, but a later time of the same newest
/// recommendation. Such a memory is not written: at a steady count every evaluation would
/// otherwise write the status only to move that time, and [`resume`] restores it.
pub fn same_but_newest_time(old: &DecisionMemory, new: &DecisionMemory) -> bool {
    let (old, new) = (restore(old), restore(new));
    let (Some((old_newest, old_rest)), Some((new_newest, new_rest))) = (
        old.recommendations.split_last(),
        new.recommendations.split_last(),
    ) else {
        return old == new;
    };
    old_newest.replicas == new_newest.replicas
        && old_newest.at <= new_newest.at
        && old_rest == new_rest
        && old.scale_up_events == new.scale_up_events
        && old.scale_down_events == new.scale_down_events
        && old.last_scale_time == new.last_scale_time
        && old.above_high_since == new.above_high_since
        && old.below_low_since == new.below_low_since
        && old.metric_failures == new.metric_failures
}

/// The memory in a native HPA's annotations: `Ok(None)` without the annotation, an error when
/// it is not the JSON [`annotation_value`] writes.
pub fn from_annotations(
    annotations: &BTreeMap<String, String>,
) -> Result<Option<DecisionMemory>, StoredStateError> {
    crate::stored::annotation(annotations, ANNOTATION)
}

/// The annotation value for `memory` (compact JSON).
pub fn annotation_value(memory: &DecisionMemory) -> String {
    serde_json::to_string(memory).unwrap_or_default()
}

/// The most recent instant a history holds.
fn latest(history: &History) -> Option<Timestamp> {
    history
        .recommendations
        .iter()
        .map(|r| r.at)
        .chain(
            history
                .scale_up_events
                .iter()
                .chain(&history.scale_down_events)
                .map(|e| e.at),
        )
        .chain(history.last_scale_time)
        .chain(history.above_high_since)
        .chain(history.below_low_since)
        .chain(history.metric_failures.values().copied())
        .max()
}

/// The recommendations that can still be the highest or the lowest of some window: each one
/// strictly above or strictly below every later one (the newest always stays).
fn essential(recommendations: &[TimedReplicas]) -> Vec<TimedReplicas> {
    let mut kept = Vec::new();
    let mut later_max = i32::MIN;
    let mut later_min = i32::MAX;
    for r in recommendations.iter().rev() {
        if r.replicas > later_max || r.replicas < later_min {
            kept.push(*r);
        }
        later_max = later_max.max(r.replicas);
        later_min = later_min.min(r.replicas);
    }
    kept.reverse();
    kept
}

/// The newest [`MAX_ENTRIES`] of `list`.
fn capped<T: Copy>(list: &[T]) -> &[T] {
    &list[list.len().saturating_sub(MAX_ENTRIES)..]
}

fn millis(at: Timestamp) -> i64 {
    at.as_millisecond()
}

/// `[offset from the previous, value, …]`, the first offset from `base_ms`.
fn pairs(base_ms: i64, entries: impl Iterator<Item = (Timestamp, i64)>) -> Vec<i64> {
    super::offsets::flatten(base_ms, entries.map(|(at, value)| (millis(at), value)))
}

#[cfg(test)]
mod tests {
    use jiff::SignedDuration;
    use proptest::prelude::*;

    use super::*;
    use crate::api::hpa_plus::HpaScalingPolicyType;
    use crate::api::hpa_plus::ScalingPolicySelect;
    use crate::horizontal::behavior::{
        Policy, Rules, scale_down_limit, scale_up_limit, stabilize_default,
        stabilize_with_behaviors,
    };

    fn t0() -> Timestamp {
        "2026-03-01T12:00:00.250Z".parse().unwrap()
    }

    fn at(ms: i64) -> Timestamp {
        t0() + SignedDuration::from_millis(ms)
    }

    fn recs(list: &[(i64, i32)]) -> Vec<TimedReplicas> {
        list.iter()
            .map(|&(ms, replicas)| TimedReplicas {
                at: at(ms),
                replicas,
            })
            .collect()
    }

    #[test]
    fn an_empty_history_stores_nothing() {
        let m = store(&History::default());
        assert_eq!(m, DecisionMemory::default());
        assert_eq!(serde_json::to_string(&m).unwrap(), "{}");
        assert_eq!(restore(&m), History::default());
    }

    #[test]
    fn offsets_count_from_the_previous_entry_and_the_base_is_a_whole_second() {
        let history = History {
            recommendations: recs(&[(0, 10), (5000, 4)]),
            scale_down_events: vec![ScaleEvent {
                at: at(5000),
                change: 6,
            }],
            last_scale_time: Some(at(5000)),
            ..History::default()
        };
        let m = store(&history);
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"base":"2026-03-01T12:00:00Z","recommendations":[250,10,5000,4],"scaleDowns":[5250,6],"lastScale":5250}"#
        );
        assert_eq!(restore(&m), history);
    }

    #[test]
    fn consecutive_equal_recommendations_keep_the_newest() {
        let history = History {
            recommendations: recs(&[(0, 5), (5000, 5), (10_000, 5)]),
            ..History::default()
        };
        assert_eq!(
            restore(&store(&history)).recommendations,
            recs(&[(10_000, 5)])
        );
    }

    #[test]
    fn a_recommendation_between_later_ones_is_dropped() {
        // 6 at 0 is below the later 8 and above the later 3: no window holding it has it as
        // its highest or lowest.
        let history = History {
            recommendations: recs(&[(0, 6), (5000, 8), (10_000, 3), (15_000, 5)]),
            ..History::default()
        };
        assert_eq!(
            restore(&store(&history)).recommendations,
            recs(&[(5000, 8), (10_000, 3), (15_000, 5)])
        );
    }

    #[test]
    fn the_newest_entries_stay_under_the_cap() {
        let events: Vec<ScaleEvent> = (0..2000)
            .map(|i| ScaleEvent {
                at: at(i * 1000),
                change: 1,
            })
            .collect();
        let history = History {
            scale_up_events: events.clone(),
            ..History::default()
        };
        let back = restore(&store(&history));
        assert_eq!(back.scale_up_events.len(), MAX_ENTRIES);
        assert_eq!(back.scale_up_events.last(), events.last());
    }

    #[test]
    fn first_sight_without_memory_seeds_the_current_replicas() {
        let h = resume(None, None, 7, t0(), t0()).history;
        assert_eq!(
            h.recommendations,
            vec![TimedReplicas {
                at: t0(),
                replicas: 7
            }]
        );
        let stored = store(&History {
            recommendations: recs(&[(0, 9)]),
            ..History::default()
        });
        assert_eq!(
            resume(None, Some(&stored), 7, at(1000), at(0))
                .history
                .recommendations,
            recs(&[(0, 9)])
        );
    }

    #[test]
    fn only_a_later_time_of_the_same_newest_recommendation_is_not_worth_writing() {
        let memory = |entries: &[(i64, i32)]| {
            store(&History {
                recommendations: recs(entries),
                ..History::default()
            })
        };
        let old = memory(&[(0, 8), (30_000, 2)]);
        assert!(same_but_newest_time(&old, &memory(&[(0, 8), (45_000, 2)])));
        assert!(same_but_newest_time(&old, &old));
        assert!(
            !same_but_newest_time(&old, &memory(&[(0, 8), (45_000, 3)])),
            "another count"
        );
        assert!(
            !same_but_newest_time(&old, &memory(&[(15_000, 8), (45_000, 2)])),
            "older ones"
        );
        assert!(!same_but_newest_time(
            &old,
            &memory(&[(0, 8), (30_000, 2), (45_000, 5)])
        ));
        assert!(
            !same_but_newest_time(&old, &memory(&[(0, 8), (15_000, 2)])),
            "earlier"
        );
        let scaled = store(&History {
            recommendations: recs(&[(0, 8), (45_000, 2)]),
            last_scale_time: Some(at(45_000)),
            ..History::default()
        });
        assert!(!same_but_newest_time(&old, &scaled), "a scale is news");
    }

    #[test]
    fn a_memory_read_back_stands_until_its_writer_last_evaluated() {
        // Written at 30 s (2 after 8); evaluations at 45 s and 60 s moved only the newest time
        // and were not written. Read back at 75 s with the writer's last evaluation at 60 s,
        // the history is what the writer held.
        let held = History {
            recommendations: recs(&[(0, 8), (60_000, 2)]),
            ..History::default()
        };
        let written = store(&History {
            recommendations: recs(&[(0, 8), (30_000, 2)]),
            ..History::default()
        });
        let read = resume(None, Some(&written), 2, at(75_000), at(60_000)).history;
        assert_eq!(normalized(&read), normalized(&held));
        // Nothing newer than the stored time: nothing is added.
        let same = resume(None, Some(&written), 2, at(75_000), at(30_000)).history;
        assert_eq!(same.recommendations, recs(&[(0, 8), (30_000, 2)]));
    }

    #[test]
    fn a_memory_written_later_by_another_leader_wins_over_our_own() {
        let own = History {
            recommendations: recs(&[(0, 4)]),
            ..History::default()
        };
        let theirs = History {
            recommendations: recs(&[(0, 4), (5000, 9)]),
            ..History::default()
        };
        let later = store(&theirs);
        assert_eq!(
            resume(Some(&own), Some(&later), 4, at(6000), at(5000)).history,
            normalized(&theirs)
        );
        let stale = store(&History {
            recommendations: recs(&[(-5000, 2)]),
            ..History::default()
        });
        assert_eq!(
            resume(Some(&own), Some(&stale), 4, at(6000), at(6000)).history,
            own
        );
    }

    #[test]
    fn annotations_carry_compact_json() {
        let m = store(&History {
            recommendations: recs(&[(0, 3)]),
            ..History::default()
        });
        let annotations = BTreeMap::from([(ANNOTATION.to_owned(), annotation_value(&m))]);
        assert_eq!(from_annotations(&annotations), Ok(Some(m)));
        assert_eq!(from_annotations(&BTreeMap::new()), Ok(None));
        let broken = BTreeMap::from([(ANNOTATION.to_owned(), "{".to_owned())]);
        assert_eq!(
            from_annotations(&broken),
            Err(StoredStateError::Unreadable { field: ANNOTATION })
        );
    }

    #[test]
    fn a_hostile_memory_is_ignored_whole_and_resume_says_why() {
        let good = store(&History {
            recommendations: recs(&[(0, 3), (5000, 4)]),
            ..History::default()
        });
        let cases = [
            (
                DecisionMemory {
                    recommendations: vec![1, 1],
                    ..DecisionMemory::default()
                },
                StoredStateError::Missing { field: "base" },
            ),
            (
                DecisionMemory {
                    recommendations: [0, 1].repeat(MAX_ENTRIES + 1),
                    ..good.clone()
                },
                StoredStateError::TooLong {
                    field: "recommendations",
                    len: 2 * MAX_ENTRIES + 2,
                    max: 2 * MAX_ENTRIES,
                },
            ),
            (
                DecisionMemory {
                    scale_ups: vec![i64::MAX, 1],
                    ..good.clone()
                },
                StoredStateError::BadPosition { field: "scaleUps" },
            ),
            (
                DecisionMemory {
                    scale_downs: vec![0, 0],
                    ..good.clone()
                },
                StoredStateError::BadValue {
                    field: "scaleDowns",
                },
            ),
            (
                DecisionMemory {
                    recommendations: vec![0, i64::from(i32::MAX) + 1],
                    ..good.clone()
                },
                StoredStateError::BadValue {
                    field: "recommendations",
                },
            ),
            (
                DecisionMemory {
                    last_scale: Some(-1),
                    ..good.clone()
                },
                StoredStateError::BadPosition { field: "lastScale" },
            ),
        ];
        for (memory, why) in cases {
            assert_eq!(try_restore(&memory), Err(why.clone()), "{memory:?}");
            assert_eq!(restore(&memory), History::default());
            let resumed = resume(None, Some(&memory), 6, t0(), t0());
            assert_eq!(resumed.ignored, Some(why));
            assert_eq!(resumed.history, resume(None, None, 6, t0(), t0()).history);
        }
        assert_eq!(
            resume(None, Some(&good), 6, at(9000), at(9000)).ignored,
            None
        );
    }

    /// A history as the controller builds it: one evaluation every `period_ms` (jittered),
    /// each with a recommendation and maybe a scale event, within an hour.
    fn history_strategy(max_replicas: i32) -> impl Strategy<Value = History> {
        proptest::collection::vec(
            (
                0i64..2000,
                0..max_replicas,
                -3i32..=3,
                any::<bool>(),
                any::<bool>(),
            ),
            0..720,
        )
        .prop_map(|evals| {
            let mut h = History::default();
            let mut ms = 0i64;
            for (jitter, replicas, scale, above, below) in evals {
                ms += 4000 + jitter;
                let now = at(ms);
                h.recommendations.push(TimedReplicas { at: now, replicas });
                match scale.signum() {
                    1 => h.scale_up_events.push(ScaleEvent {
                        at: now,
                        change: scale,
                    }),
                    -1 => h.scale_down_events.push(ScaleEvent {
                        at: now,
                        change: -scale,
                    }),
                    _ => {}
                }
                if scale != 0 {
                    h.last_scale_time = Some(now);
                }
                if above && h.above_high_since.is_none() {
                    h.above_high_since = Some(now);
                }
                if below {
                    h.below_low_since = Some(now);
                }
            }
            h
        })
    }

    fn rules(select: ScalingPolicySelect, pods: i32, percent: i32, period: i64) -> Rules {
        Rules {
            window_seconds: 0,
            select,
            policies: vec![
                Policy {
                    kind: HpaScalingPolicyType::Pods,
                    value: pods,
                    period_seconds: period,
                },
                Policy {
                    kind: HpaScalingPolicyType::Percent,
                    value: percent,
                    period_seconds: period / 2 + 1,
                },
            ],
        }
    }

    proptest! {
        #[test]
        fn a_restored_history_decides_as_the_original(
            h in history_strategy(60),
            later_ms in 0i64..4_000_000,
            up_window in 0i64..3600,
            down_window in 0i64..3600,
            period in 1i64..3600,
            current in 1i32..60,
            desired in 0i32..60,
            select in prop_oneof![Just(ScalingPolicySelect::Max), Just(ScalingPolicySelect::Min)],
        ) {
            let back = restore(&store(&h));
            let now = at(later_ms);
            prop_assert_eq!(
                stabilize_with_behaviors(current, desired, &h, up_window, down_window, now),
                stabilize_with_behaviors(current, desired, &back, up_window, down_window, now)
            );
            prop_assert_eq!(
                stabilize_default(desired, &h, down_window, now),
                stabilize_default(desired, &back, down_window, now)
            );
            let r = rules(select, 4, 100, period);
            prop_assert_eq!(scale_up_limit(current, &h, &r, now), scale_up_limit(current, &back, &r, now));
            prop_assert_eq!(scale_down_limit(current, &h, &r, now), scale_down_limit(current, &back, &r, now));
            prop_assert_eq!(back.last_scale_time, h.last_scale_time);
            prop_assert_eq!(back.above_high_since, h.above_high_since);
            prop_assert_eq!(back.below_low_since, h.below_low_since);
            // What a successor reads is what the leader keeps.
            prop_assert_eq!(normalized(&back), back.clone());
            prop_assert_eq!(store(&back), store(&h));
        }

        #[test]
        fn an_hour_at_five_seconds_stays_within_the_bound(h in history_strategy(i32::MAX)) {
            let json = serde_json::to_string(&store(&h)).unwrap();
            prop_assert!(json.len() <= BOUND_BYTES_HOUR_AT_5S, "{} bytes", json.len());
            let back: DecisionMemory = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(back, store(&h));
        }
    }

    #[test]
    fn the_worst_hour_at_five_seconds_stays_within_the_bound() {
        // Alternating extremes keep every recommendation; a scale event at every evaluation.
        let mut h = History::default();
        for i in 0..720i64 {
            let now = at(i * 5000);
            let replicas = if i % 2 == 0 {
                i32::MAX - i as i32
            } else {
                i as i32
            };
            h.recommendations.push(TimedReplicas { at: now, replicas });
            h.scale_up_events.push(ScaleEvent {
                at: now,
                change: i32::MAX,
            });
        }
        h.last_scale_time = Some(at(3_600_000));
        h.above_high_since = Some(at(0));
        h.below_low_since = Some(at(3_600_000));
        let json = serde_json::to_string(&store(&h)).unwrap();
        assert!(json.len() <= BOUND_BYTES_HOUR_AT_5S, "{} bytes", json.len());
    }
}
