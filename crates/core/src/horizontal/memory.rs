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

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::history::{History, ScaleEvent, TimedReplicas};
use crate::api::hpa_plus::DecisionMemory;

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
        .chain(history.below_low_since);
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
    }
}

/// The history `memory` stands for. Pairs that cannot be read (an odd length, an instant or a
/// count out of range) are skipped; an entry that is not there only makes a window forget.
pub fn restore(memory: &DecisionMemory) -> History {
    let Some(base) = &memory.base else {
        return History::default();
    };
    let base_ms = millis(base.0);
    let at = |offset: i64| {
        base_ms
            .checked_add(offset)
            .and_then(|ms| Timestamp::from_millisecond(ms).ok())
    };
    let events = |list: &[i64]| -> Vec<ScaleEvent> {
        unpairs(base_ms, list)
            .map(|(at, change)| ScaleEvent { at, change })
            .collect()
    };
    History {
        recommendations: unpairs(base_ms, &memory.recommendations)
            .map(|(at, replicas)| TimedReplicas { at, replicas })
            .collect(),
        scale_up_events: events(&memory.scale_ups),
        scale_down_events: events(&memory.scale_downs),
        last_scale_time: memory.last_scale.and_then(at),
        above_high_since: memory.above_high_since.and_then(at),
        below_low_since: memory.below_low_since.and_then(at),
    }
}

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
) -> History {
    match (held, stored.map(restore)) {
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
    }
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
}

/// The memory in a native HPA's annotations, if there is a readable one.
pub fn from_annotations(annotations: &BTreeMap<String, String>) -> Option<DecisionMemory> {
    annotations
        .get(ANNOTATION)
        .and_then(|text| serde_json::from_str(text).ok())
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

/// The readable `(instant, value)` pairs of a list made by [`pairs`].
fn unpairs(base_ms: i64, list: &[i64]) -> impl Iterator<Item = (Timestamp, i32)> + '_ {
    super::offsets::unflatten(base_ms, list).filter_map(|(ms, value)| {
        Some((
            Timestamp::from_millisecond(ms).ok()?,
            i32::try_from(value).ok()?,
        ))
    })
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
        let h = resume(None, None, 7, t0(), t0());
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
            resume(None, Some(&stored), 7, at(1000), at(0)).recommendations,
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
        let read = resume(None, Some(&written), 2, at(75_000), at(60_000));
        assert_eq!(normalized(&read), normalized(&held));
        // Nothing newer than the stored time: nothing is added.
        let same = resume(None, Some(&written), 2, at(75_000), at(30_000));
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
            resume(Some(&own), Some(&later), 4, at(6000), at(5000)),
            normalized(&theirs)
        );
        let stale = store(&History {
            recommendations: recs(&[(-5000, 2)]),
            ..History::default()
        });
        assert_eq!(resume(Some(&own), Some(&stale), 4, at(6000), at(6000)), own);
    }

    #[test]
    fn annotations_carry_compact_json() {
        let m = store(&History {
            recommendations: recs(&[(0, 3)]),
            ..History::default()
        });
        let annotations = BTreeMap::from([(ANNOTATION.to_owned(), annotation_value(&m))]);
        assert_eq!(from_annotations(&annotations), Some(m));
        let broken = BTreeMap::from([(ANNOTATION.to_owned(), "{".to_owned())]);
        assert_eq!(from_annotations(&broken), None);
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
