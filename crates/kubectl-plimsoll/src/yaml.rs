//! `-o yaml` that a terminal shows as written. The encoder escapes the controls, but writes
//! the Unicode direction marks, embeddings, overrides and isolates as they are, in any scalar
//! style, and a tenant's metric or container name with U+202E reorders the line it is shown on
//! (the class of CVE-2021-25743). A YAML escape (`\u202E`) exists only inside a double-quoted
//! scalar, so every string holding a character a terminal acts on is written double-quoted,
//! and then each such character left in the text is replaced by its escape: the same YAML
//! value, read back by any YAML reader. The encoder chooses a key's style itself; where a key
//! holds such a character, the document is written as JSON instead (a YAML flow mapping: the
//! same value), with [`printable_json`]'s escapes.

use std::fmt::Write as _;

use plimsoll_core::printable::{acts_on_terminal, printable_json};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::Value;

/// `value` as YAML with nothing in it a terminal acts on but the newlines between its lines.
pub fn printable_yaml<T: Serialize>(value: &T) -> Result<String, String> {
    let value = serde_json::to_value(value).map_err(|e| e.to_string())?;
    if has_key_needing_quotes(&value) {
        let json = serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?;
        return Ok(printable_json(&json).into_owned() + "\n");
    }
    let yaml = serde_saphyr::to_string(&Quoting(&value)).map_err(|e| e.to_string())?;
    if !yaml.chars().any(|c| c != '\n' && acts_on_terminal(c)) {
        return Ok(yaml);
    }
    let mut out = String::with_capacity(yaml.len() + 16);
    for c in yaml.chars() {
        if c != '\n' && acts_on_terminal(c) {
            // Inside a double-quoted scalar (`Quoting`): the escape is the same character.
            // Every such character is in the Basic Multilingual Plane: one `\uXXXX`.
            let _ = write!(out, "\\u{:04X}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// A JSON value serialized with every string value that holds a character a terminal acts on
/// as a double-quoted scalar.
struct Quoting<'a>(&'a Value);

fn needs_quotes(s: &str) -> bool {
    s.chars().any(acts_on_terminal)
}

fn has_key_needing_quotes(value: &Value) -> bool {
    match value {
        Value::Array(items) => items.iter().any(has_key_needing_quotes),
        Value::Object(fields) => fields
            .iter()
            .any(|(key, value)| needs_quotes(key) || has_key_needing_quotes(value)),
        _ => false,
    }
}

impl Serialize for Quoting<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::String(s) if needs_quotes(s) => {
                serde_saphyr::DoubleQuoted(s.as_str()).serialize(serializer)
            }
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Quoting(item))?;
                }
                seq.end()
            }
            Value::Object(fields) => {
                let mut map = serializer.serialize_map(Some(fields.len()))?;
                for (key, value) in fields {
                    map.serialize_entry(key, &Quoting(value))?;
                }
                map.end()
            }
            other => other.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use plimsoll_core::printable::is_printable_lines;
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn direction_overrides_are_escaped_and_read_back() {
        let value = json!({
            "metric": "cpu\u{202e}lanretxe",
            "list": ["\u{9b}31m", "plain", "two\nlines\u{200f}"],
            "n": 3,
        });
        let shown = printable_yaml(&value).unwrap_or_default();
        assert!(is_printable_lines(&shown), "{shown}");
        assert!(shown.contains("metric: \"cpu\\u202Elanretxe\""), "{shown}");
        let back: Value = serde_saphyr::from_str(&shown).unwrap_or_default();
        assert_eq!(back, value);
        // A key the encoder would write plain: the document is JSON, still YAML.
        let keyed = json!({"cpu\u{2066}": {"n": 1}});
        let shown = printable_yaml(&keyed).unwrap_or_default();
        assert!(
            is_printable_lines(&shown) && shown.starts_with('{'),
            "{shown}"
        );
        let back: Value = serde_saphyr::from_str(&shown).unwrap_or_default();
        assert_eq!(back, keyed);
        // What has nothing to escape is the encoder's own output.
        let plain = json!({"metric": "cpu", "n": 3});
        assert_eq!(
            printable_yaml(&plain).ok(),
            serde_saphyr::to_string(&plain).ok()
        );
    }

    proptest! {
        #[test]
        fn any_string_reads_back_the_same_once_printable(s in any::<String>()) {
            let value = json!({"k": s, "a": [s], s.clone(): 1});
            let shown = printable_yaml(&value).unwrap_or_default();
            prop_assert!(is_printable_lines(&shown), "{}", shown);
            let back: Value = serde_saphyr::from_str(&shown).unwrap_or_default();
            prop_assert_eq!(back, value);
        }
    }
}
