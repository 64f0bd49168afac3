//! How text read from the cluster is shown on a terminal. A namespace user writes metric names,
//! container names, annotations and target kinds as any string the schema allows, and a terminal
//! acts on some of the characters in them: ESC starts sequences that recolour, retitle, hide
//! lines or write the clipboard (OSC 52), CR and newline forge lines, and the Unicode
//! direction overrides reorder what is shown (the class of CVE-2021-25743, which kubectl fixed
//! for its own printers). Those characters are shown as escapes (`\u{1b}`, `\n`) instead.

use std::borrow::Cow;

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
