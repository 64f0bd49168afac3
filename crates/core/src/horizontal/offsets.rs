//! The stored form every persisted series shares (decision memory, the load history of
//! `minReplicasTuning`, the load series of `spec.predictive`): a flat
//! `[offset, value, offset, value, …]` list, each offset counted from the previous entry's
//! position (the first from a `base`), oldest first. Positions are whole units (milliseconds,
//! hours, buckets) chosen by the caller; small offsets keep the JSON short.

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

/// The `(position, value)` entries of a list made by [`flatten`] from `base`; a trailing odd
/// entry is skipped, and positions saturate instead of overflowing.
pub fn unflatten(base: i64, flat: &[i64]) -> impl Iterator<Item = (i64, i64)> + '_ {
    flat.chunks_exact(2).scan(base, |position, pair| {
        *position = position.saturating_add(pair[0]);
        Some((*position, pair[1]))
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn offsets_count_from_the_previous_entry() {
        assert_eq!(flatten(100, [(103, 7), (105, -1)]), [3, 7, 2, -1]);
        assert_eq!(
            unflatten(100, &[3, 7, 2, -1, 9]).collect::<Vec<_>>(),
            [(103, 7), (105, -1)]
        );
    }

    proptest! {
        #[test]
        fn flatten_then_unflatten_is_the_identity(
            base in -1_000_000i64..1_000_000,
            mut entries in proptest::collection::vec((-1_000_000i64..1_000_000, any::<i64>()), 0..50),
        ) {
            entries.sort_by_key(|e| e.0);
            let flat = flatten(base, entries.iter().copied());
            prop_assert_eq!(unflatten(base, &flat).collect::<Vec<_>>(), entries);
        }
    }
}
