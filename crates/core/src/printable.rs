//! How text read from the cluster is shown on a terminal. A namespace user writes metric names,
//! container names, annotations and target kinds as any string the schema allows, and a terminal
//! acts on some of the characters in them: ESC starts sequences that recolour, retitle, hide
//! lines or write the clipboard (OSC 52), CR and newline forge lines, and the Unicode
//! direction overrides reorder what is shown (the class of CVE-2021-25743, which kubectl fixed
//! for its own printers). Those characters are shown as escapes (`\u{1b}`, `\n`) instead.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether a terminal would act on `c` rather than show it: the C0 and C1 controls and DEL,
/// the line and paragraph separators, and the bidirectional marks, embeddings, overrides and
/// isolates.
pub fn acts_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// True when nothing in `s` but its newlines is a character a terminal acts on: what
/// [`printable_lines`] returns, and what a test of a text for a terminal checks.
pub fn is_printable_lines(s: &str) -> bool {
    !s.chars().any(acts_within_lines)
}

/// [`acts_on_terminal`], but for the newlines that end a program's own lines.
fn acts_within_lines(c: char) -> bool {
    c != '\n' && acts_on_terminal(c)
}

/// `s` with every character a terminal acts on ([`acts_on_terminal`]) escaped, newlines
/// included: for one value inside a line of text.
pub fn printable(s: &str) -> Cow<'_, str> {
    escape_where(s, acts_on_terminal)
}

/// `s` with every character a terminal acts on escaped except the newline: for whole text whose
/// lines the program wrote itself.
pub fn printable_lines(s: &str) -> Cow<'_, str> {
    escape_where(s, acts_within_lines)
}

/// JSON text with every character a terminal acts on, but the newlines between its lines,
/// written as a JSON escape (`\u202e`): the same JSON value, safe on a terminal. serde_json
/// escapes the C0 controls and leaves DEL, the C1 controls and the direction overrides as they
/// are; outside strings JSON holds none of them, so each one is inside a string, where the
/// escape stands for the same character.
pub fn printable_json(json: &str) -> Cow<'_, str> {
    if !json.chars().any(acts_within_lines) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if acts_within_lines(c) {
            // Every such character is in the Basic Multilingual Plane: one `\uXXXX`.
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The longest condition message the services write, in bytes: room for every field error of
/// the largest spec, while a status stays far below etcd's object limit.
pub const MAX_CONDITION_MESSAGE_BYTES: usize = 8 * 1024;

/// The longest Event note, in bytes: the API server refuses a longer one (`events.k8s.io/v1`
/// `note`), and the Event would be lost.
pub const MAX_EVENT_NOTE_BYTES: usize = 1024;

/// A message for a condition or an Event, which `kubectl describe` shows to whoever runs it:
/// [`printable`], cut to at most `max_bytes` at a character boundary (with `…`). Messages
/// repeat values a namespace user wrote (names, queries, a metrics adapter's error text); this
/// is the one place every one passes, so no caller has to remember to escape.
pub fn message(text: &str, max_bytes: usize) -> String {
    let shown = printable(text);
    if shown.len() <= max_bytes {
        return shown.into_owned();
    }
    cut(&shown, max_bytes.saturating_sub('…'.len_utf8()))
}

/// `text` whole when it has at most `max_bytes`, else its first `max_bytes` or fewer (on a
/// character boundary) followed by `…`.
pub fn cut(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_owned();
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn escape_where(s: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if escape(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn json_keeps_its_value_and_escapes_what_serde_json_leaves() {
        let value =
            serde_json::json!({"name": "a\u{9b}31m\u{7f}\u{202e}b\u{2028}", "n": [1, "\u{1b}"]});
        let pretty = serde_json::to_string_pretty(&value).unwrap_or_default();
        assert!(
            !is_printable_lines(&pretty),
            "serde_json leaves some: the test proves nothing"
        );
        let shown = printable_json(&pretty);
        assert!(is_printable_lines(&shown), "{shown}");
        assert!(
            shown.contains("\\u009b") && shown.contains("\\u202e"),
            "{shown}"
        );
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap_or_default();
        assert_eq!(back, value);
    }

    proptest! {
        #[test]
        fn any_json_string_reads_back_the_same_once_printable(s in any::<String>()) {
            let json = serde_json::to_string_pretty(&serde_json::json!({"k": s, "a": [s]}))
                .unwrap_or_default();
            let shown = printable_json(&json);
            prop_assert!(is_printable_lines(&shown));
            let back: serde_json::Value = serde_json::from_str(&shown).unwrap_or_default();
            prop_assert_eq!(&back["k"], &serde_json::Value::String(s));
        }
    }

    #[test]
    fn messages_are_escaped_and_cut_within_their_bytes() {
        assert_eq!(message("scaled to 3", 64), "scaled to 3");
        assert_eq!(message("job \u{1b}]0;x\u{7}", 64), "job \\u{1b}]0;x\\u{7}");
        let long = "é".repeat(1000);
        let cut = message(&long, MAX_EVENT_NOTE_BYTES);
        assert!(cut.len() <= MAX_EVENT_NOTE_BYTES, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert!(cut.trim_end_matches('…').chars().all(|c| c == 'é'));
    }

    #[test]
    fn sequences_a_terminal_acts_on_are_shown_escaped() {
        // OSC 52 (write the clipboard), a colour, CR over a line, a forged line, RLO.
        assert_eq!(
            printable("cpu\u{1b}]52;c;cm0gLXJm\u{7}"),
            "cpu\\u{1b}]52;c;cm0gLXJm\\u{7}"
        );
        assert_eq!(printable("\u{1b}[31mred"), "\\u{1b}[31mred");
        assert_eq!(printable("a\rb\nc\td"), "a\\rb\\nc\\td");
        assert_eq!(printable("x\u{202e}gpj.exe"), "x\\u{202e}gpj.exe");
        assert_eq!(printable("\u{9b}2J"), "\\u{9b}2J");
        assert_eq!(
            printable_lines("one\ntwo\u{1b}[2K\n"),
            "one\ntwo\\u{1b}[2K\n"
        );
    }

    #[test]
    fn plain_text_is_returned_as_it_is() {
        for s in [
            "",
            "cpu",
            "queue/π-ünïcode 日本",
            "a\\u{1b}b",
            "100m per pod",
        ] {
            assert!(matches!(printable(s), Cow::Borrowed(t) if t == s), "{s:?}");
        }
        assert!(matches!(printable_lines("a\nb\n"), Cow::Borrowed(_)));
    }

    proptest! {
        #[test]
        fn nothing_a_terminal_acts_on_is_left(s in any::<String>()) {
            let shown = printable(&s);
            prop_assert!(!shown.chars().any(acts_on_terminal), "{:?}", shown);
            let lines = printable_lines(&s);
            prop_assert!(is_printable_lines(&lines));
            // The newlines of the text are its lines; a value's newlines are escaped.
            prop_assert_eq!(lines.matches('\n').count(), s.matches('\n').count());
            prop_assert_eq!(shown.matches('\n').count(), 0);
        }

        #[test]
        fn a_message_fits_its_bytes_and_acts_on_nothing(s in any::<String>(), max in 3usize..300) {
            let m = message(&s, max);
            prop_assert!(m.len() <= max, "{} > {}", m.len(), max);
            prop_assert!(!m.chars().any(acts_on_terminal), "{:?}", m);
        }

        #[test]
        fn what_is_kept_keeps_its_order(s in "[a-z\u{1b}\n\u{202e} ]{0,40}") {
            let kept: String = s.chars().filter(|c| !acts_on_terminal(*c)).collect();
            let shown: String = printable(&s)
                .replace("\\u{1b}", "")
                .replace("\\n", "")
                .replace("\\u{202e}", "");
            prop_assert_eq!(shown, kept);
        }
    }
}
