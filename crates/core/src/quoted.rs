//! How a value a user wrote appears in a message about it: quoted, and cut to
//! [`QUOTED_CHARS`] characters. An annotation may hold 256 KiB and a quantity string any
//! length; the condition, Event or log line that names it needs only enough to find it (an
//! Event's note over 1 KiB is refused by the API server, so an unbounded quote would also lose
//! the message).

/// The most characters of a value a message quotes.
pub const QUOTED_CHARS: usize = 64;

/// `v` quoted as `{:?}` does, cut to [`QUOTED_CHARS`] characters with its length in bytes
/// after it when longer.
pub fn quoted(v: &str) -> String {
    if v.chars().count() <= QUOTED_CHARS {
        return format!("{v:?}");
    }
    let head: String = v.chars().take(QUOTED_CHARS).collect();
    format!("{head:?}… ({} bytes)", v.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_quoted_whole_and_long_ones_cut() {
        assert_eq!(quoted("30s"), "\"30s\"");
        assert_eq!(quoted("a\"b"), "\"a\\\"b\"");
        let long = "é".repeat(10_000);
        let shown = quoted(&long);
        assert!(
            shown.starts_with(&format!("\"{}\"…", "é".repeat(QUOTED_CHARS))),
            "{shown}"
        );
        assert!(shown.ends_with("(20000 bytes)"), "{shown}");
        assert!(shown.len() < 200);
    }
}
