//! State a controller stores in an object and reads back after a restart or a leader change:
//! `status.memory` (a native HPA: the `plimsoll.dev/decision-memory` annotation), the load
//! history of `status.minReplicasTuning` (`plimsoll.dev/min-replicas-tuning-status`), the load
//! series of `status.predictive` (`plimsoll.dev/predictive-status`), a joint VPA's
//! `plimsoll.dev/total-usage`, VPA checkpoints, and a CronHPA's job conditions.
//!
//! Anyone who may edit the object (or its status) may write these, so every restore treats
//! them as hostile and follows the same rules:
//! * **sizes** are capped by what the controller itself writes (each restore documents its
//!   cap); a longer list is refused as a whole, never truncated or allocated first;
//! * **positions** (instants, hours, buckets) are computed with checked arithmetic and must fall
//!   inside the range `jiff` represents (years −9999 to 9999), so every later subtraction of
//!   two of them fits an `i64`; offsets must keep the order the controller writes;
//! * **values** must lie in the range the controller records;
//! * a restore that breaks a rule is **ignored** as a whole: the controller starts that history
//!   afresh and says so (hpa-plus: the `StoredStateIgnored` condition and a Warning Event; the
//!   VPA recommender: the same condition on the VPA), with a message made from a
//!   [`StoredStateError`], which names the field and the rule and never repeats the stored text.

#[cfg(any(test, feature = "fixtures"))]
pub mod exercise;

use std::ops::RangeInclusive;

use jiff::Timestamp;

use crate::horizontal::conditions::Condition;

/// The most metrics a stored load history or series may hold. The controller keeps one list per
/// metric of the spec it has seen; no autoscaler has anywhere near this many metrics (the
/// upstream controller evaluates each one on every sync).
pub const MAX_METRICS: usize = 64;

/// The condition type an object carries after stored state was ignored.
pub const IGNORED_CONDITION: &str = "StoredStateIgnored";

/// The condition's reason while stored state was ignored.
pub const IGNORED_REASON: &str = "InvalidStoredState";

/// The condition's reason once the stored state reads back again.
pub const RESTORED_REASON: &str = "StoredStateRestored";

/// The Warning Event's reason when stored state is ignored.
pub const IGNORED_EVENT: &str = "StoredStateIgnored";

/// Why stored state was ignored. The messages are bounded: they name the field (a constant of
/// the code) and the rule, and never include the stored text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoredStateError {
    /// The text is not JSON of the stored form.
    #[error("{field} is not JSON of the form the controller writes")]
    Unreadable {
        /// The annotation or field.
        field: &'static str,
    },
    /// A list is longer than the controller ever writes.
    #[error("{field} holds {len} entries, more than the {max} the controller writes")]
    TooLong {
        /// The list.
        field: &'static str,
        /// Its length.
        len: usize,
        /// The cap.
        max: usize,
    },
    /// A flat `[offset, value, …]` list has an odd length.
    #[error("{field} has an odd number of entries (it holds offset, value pairs)")]
    OddLength {
        /// The list.
        field: &'static str,
    },
    /// An offset is negative where the controller writes entries in order, or a position is
    /// outside the representable time range.
    #[error("{field} has an offset out of order or a time out of range")]
    BadPosition {
        /// The list or field.
        field: &'static str,
    },
    /// A value outside the range the controller records.
    #[error("{field} holds a value out of range")]
    BadValue {
        /// The list or field.
        field: &'static str,
    },
    /// A part the rest needs is missing.
    #[error("{field} is missing")]
    Missing {
        /// The field.
        field: &'static str,
    },
    /// The stored form was written with another bucket width than the controller uses.
    #[error("{field} was written with {stored}-second buckets, not {expected}")]
    OtherStep {
        /// The field.
        field: &'static str,
        /// The stored width, clamped to the representable range for the message.
        stored: i64,
        /// The width the controller uses.
        expected: i64,
    },
}

/// Where a restore failed, for the condition and the Event: `what` is the field or annotation
/// the controller read (`status.memory`, `annotation plimsoll.dev/decision-memory`, …).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ignored {
    /// What was read.
    pub what: &'static str,
    /// Why it was ignored.
    pub why: StoredStateError,
}

impl std::fmt::Display for Ignored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} was ignored: {}", self.what, self.why)
    }
}

/// The stored form an annotation `key` holds: `Ok(None)` when absent,
/// [`StoredStateError::Unreadable`] (naming the key, never the text) when it is not JSON of that
/// form. The caller checks the form's rules before building anything from it.
pub fn annotation<T: serde::de::DeserializeOwned>(
    annotations: &std::collections::BTreeMap<String, String>,
    key: &'static str,
) -> Result<Option<T>, StoredStateError> {
    annotations
        .get(key)
        .map(|text| {
            serde_json::from_str(text).map_err(|_| StoredStateError::Unreadable { field: key })
        })
        .transpose()
}

/// The message of the condition and Event for `ignored` (one sentence per part).
pub fn message(ignored: &[Ignored]) -> String {
    let parts: Vec<String> = ignored.iter().map(ToString::to_string).collect();
    format!(
        "{}; the controller started that history afresh",
        parts.join("; ")
    )
}

/// The `StoredStateIgnored` condition of a horizontal autoscaler: `True` with why when this
/// evaluation ignored some of its stored state; `False` (`StoredStateRestored`) when, on first
/// sight after an earlier one ignored some (`was_ignored`), everything read back; `None` when
/// there is nothing to say (a condition already there stays as it is: the history this process
/// holds still descends from what was ignored).
pub fn horizontal_condition(
    ignored: &[Ignored],
    was_ignored: bool,
    first_sight: bool,
) -> Option<Condition> {
    if !ignored.is_empty() {
        Some(Condition::new(
            IGNORED_CONDITION,
            true,
            IGNORED_REASON,
            message(ignored),
        ))
    } else if was_ignored && first_sight {
        Some(Condition::new(
            IGNORED_CONDITION,
            false,
            RESTORED_REASON,
            "the stored state read back whole",
        ))
    } else {
        None
    }
}

/// The seconds since the Unix epoch a `jiff` timestamp can hold.
pub fn seconds_range() -> RangeInclusive<i64> {
    Timestamp::MIN.as_second()..=Timestamp::MAX.as_second()
}

/// The milliseconds since the Unix epoch a `jiff` timestamp can hold.
pub fn millis_range() -> RangeInclusive<i64> {
    Timestamp::MIN.as_millisecond()..=Timestamp::MAX.as_millisecond()
}

/// The positions of `width`-second buckets (or hours, with 3600) whose start a `jiff`
/// timestamp can hold.
pub fn buckets_range(width: i64) -> RangeInclusive<i64> {
    let width = width.max(1);
    let seconds = seconds_range();
    seconds.start().div_euclid(width) + 1..=seconds.end().div_euclid(width)
}

/// What a stored `[offset, value, …]` list may hold.
#[derive(Clone, Debug)]
pub struct PairRules {
    /// The list's name, for messages.
    pub field: &'static str,
    /// The most pairs the controller writes.
    pub max_pairs: usize,
    /// Where a position may fall.
    pub positions: RangeInclusive<i64>,
    /// What a value may be.
    pub values: RangeInclusive<i64>,
    /// The order the controller writes the entries in.
    pub order: Order,
}

/// The order of the positions of a stored list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Any order (a history whose instants come from a clock that may step back).
    Any,
    /// Each position after the previous one: one entry per bucket, oldest first. The first
    /// offset (from the base, the oldest position of all lists) is never negative either.
    Increasing,
}

/// The `(position, value)` pairs of a flat list counted from `base` ([`crate::horizontal::offsets`]),
/// checked against `rules` before anything is allocated for them: the length first, then each
/// offset (with [`Order::Increasing`]: the first never negative, the others positive), each
/// position (checked addition, inside `rules.positions`) and each value.
pub fn pairs(
    base: i64,
    flat: &[i64],
    rules: &PairRules,
) -> Result<Vec<(i64, i64)>, StoredStateError> {
    let field = rules.field;
    let max_len = rules.max_pairs.saturating_mul(2);
    if flat.len() > max_len {
        return Err(StoredStateError::TooLong {
            field,
            len: flat.len(),
            max: max_len,
        });
    }
    if !flat.len().is_multiple_of(2) {
        return Err(StoredStateError::OddLength { field });
    }
    let mut out = Vec::with_capacity(flat.len() / 2);
    let mut position = base;
    for (i, pair) in flat.chunks_exact(2).enumerate() {
        let (offset, value) = (pair[0], pair[1]);
        let in_order = match rules.order {
            Order::Any => true,
            Order::Increasing if i == 0 => offset >= 0,
            Order::Increasing => offset > 0,
        };
        position = position
            .checked_add(offset)
            .filter(|p| in_order && rules.positions.contains(p))
            .ok_or(StoredStateError::BadPosition { field })?;
        if !rules.values.contains(&value) {
            return Err(StoredStateError::BadValue { field });
        }
        out.push((position, value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(max_pairs: usize) -> PairRules {
        PairRules {
            field: "list",
            max_pairs,
            positions: 0..=1000,
            values: 0..=10,
            order: Order::Increasing,
        }
    }

    #[test]
    fn a_good_list_reads_back() {
        assert_eq!(
            pairs(100, &[0, 1, 5, 2, 1, 3], &rules(3)),
            Ok(vec![(100, 1), (105, 2), (106, 3)])
        );
    }

    #[test]
    fn every_rule_is_checked_before_allocating() {
        let long = vec![1; 1_000_000];
        assert_eq!(
            pairs(0, &long, &rules(3)),
            Err(StoredStateError::TooLong {
                field: "list",
                len: 1_000_000,
                max: 6
            })
        );
        assert_eq!(
            pairs(0, &[1, 1, 1], &rules(3)),
            Err(StoredStateError::OddLength { field: "list" })
        );
        for bad in [
            vec![-1, 1],
            vec![1, 1, 0, 1],
            vec![i64::MAX, 1],
            vec![2000, 1],
        ] {
            assert_eq!(
                pairs(0, &bad, &rules(3)),
                Err(StoredStateError::BadPosition { field: "list" }),
                "{bad:?}"
            );
        }
        assert_eq!(
            pairs(i64::MAX, &[1, 1], &rules(3)),
            Err(StoredStateError::BadPosition { field: "list" })
        );
        assert_eq!(
            pairs(0, &[1, 11], &rules(3)),
            Err(StoredStateError::BadValue { field: "list" })
        );
    }

    #[test]
    fn messages_never_repeat_the_stored_text() {
        let ignored = Ignored {
            what: "status.memory",
            why: StoredStateError::TooLong {
                field: "recommendations",
                len: 5000,
                max: 2048,
            },
        };
        assert_eq!(
            message(&[ignored]),
            "status.memory was ignored: recommendations holds 5000 entries, more than the 2048 \
             the controller writes; the controller started that history afresh"
        );
    }

    #[test]
    fn the_condition_turns_on_with_why_and_off_only_on_a_clean_first_sight() {
        let ignored = [Ignored {
            what: "status.memory",
            why: StoredStateError::Missing { field: "base" },
        }];
        let on = horizontal_condition(&ignored, false, true).unwrap();
        assert!(on.status);
        assert_eq!((on.type_, on.reason), (IGNORED_CONDITION, IGNORED_REASON));
        assert!(
            on.message
                .starts_with("status.memory was ignored: base is missing")
        );
        // Still holding the afresh history: nothing to say, the condition stays.
        assert_eq!(horizontal_condition(&[], true, false), None);
        // Never ignored: no condition at all.
        assert_eq!(horizontal_condition(&[], false, true), None);
        let off = horizontal_condition(&[], true, true).unwrap();
        assert!(!off.status);
        assert_eq!(off.reason, RESTORED_REASON);
    }

    #[test]
    fn bucket_ranges_stay_inside_the_time_range() {
        for width in [1, 900, 3600] {
            let range = buckets_range(width);
            assert!(Timestamp::from_second(range.start() * width).is_ok());
            assert!(Timestamp::from_second(range.end() * width).is_ok());
        }
    }
}
