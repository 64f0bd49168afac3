//! The stored form every persisted series shares (decision memory, the load history of
//! `minReplicasTuning`, the load series of `spec.predictive`): a flat
//! `[offset, value, offset, value, …]` list, each offset counted from the previous entry's
//! position (the first from a `base`), oldest first. Positions are whole units (milliseconds,
//! hours, buckets) chosen by the caller; small offsets keep the JSON short. Reading a list back
//! is [`crate::stored::pairs`]: what an object carries may have been written by anyone, so it
//! is checked before it is used.

/// `entries` (`(position, value)`, oldest first) as a flat list counted from `base`.
pub fn flatten(base: i64, entries: impl IntoIterator<Item = (i64, i64)>) -> Vec<i64> {
    let mut previous = base;
    entries
        .into_iter()
        .flat_map(|(position, value)| {
            let offset = position - previous;
            previous = position;
            [offset, value]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::stored::{Order, PairRules, pairs};

    #[test]
    fn offsets_count_from_the_previous_entry() {
        assert_eq!(flatten(100, [(103, 7), (105, -1)]), [3, 7, 2, -1]);
    }

    proptest! {
        #[test]
        fn flatten_then_read_back_is_the_identity(
            base in -1_000_000i64..1_000_000,
            mut entries in proptest::collection::vec((-1_000_000i64..1_000_000, any::<i64>()), 0..50),
        ) {
            entries.sort_by_key(|e| e.0);
            let flat = flatten(base, entries.iter().copied());
            let rules = PairRules {
                field: "list",
                max_pairs: 50,
                positions: i64::MIN..=i64::MAX,
                values: i64::MIN..=i64::MAX,
                order: Order::Any,
            };
            prop_assert_eq!(pairs(base, &flat, &rules), Ok(entries));
        }
    }
}
