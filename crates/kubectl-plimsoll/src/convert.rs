//! `kubectl plimsoll convert -f FILE`: every autoscaler document of the input converted by
//! `plimsoll_core::api::convert`, as YAML for `kubectl apply -f -`, with a report of what could
//! not be carried over (as a comment above each object, and for stderr).
//!
//! The input may come from a tenant, and its keys, names and values reach the comments and the
//! report: each is written escaped ([`plimsoll_core::printable`]), so a newline in a key cannot
//! end the comment and add a document of its own to what is applied, and no escape sequence
//! reaches the terminal.

use std::fmt::Write as _;

use plimsoll_core::api::convert::{Conversion, ConvertError, convert};
use plimsoll_core::printable::printable as shown;
use serde_json::Value;

use crate::{Error, Result};

/// The result of converting one input.
#[derive(Debug)]
pub struct Converted {
    /// The conversions, in input order.
    pub conversions: Vec<Conversion>,
    /// Documents that were not autoscalers (`Kind/name`), left out of the output.
    pub skipped: Vec<String>,
}

impl Converted {
    /// The Plimsoll objects as a multi-document YAML stream, each preceded by a comment block
    /// naming its source, what was not carried over and what was set to keep the behaviour.
    pub fn yaml(&self) -> Result<String> {
        let mut out = String::new();
        for c in &self.conversions {
            let values = c
                .object
                .to_values()
                .map_err(|e| Error::Encode(e.to_string()))?;
            for (i, value) in values.iter().enumerate() {
                out.push_str("---\n");
                if i == 0 {
                    out.push_str(&comment_block(c));
                } else {
                    let _ = writeln!(out, "# Converted from {} (continued).", shown(&c.source));
                }
                let yaml =
                    serde_saphyr::to_string(value).map_err(|e| Error::Encode(e.to_string()))?;
                out.push_str(&yaml);
                if !yaml.ends_with('\n') {
                    out.push('\n');
                }
            }
        }
        Ok(out)
    }

    /// The report for stderr: one line per field not carried over, per value set, per
    /// document skipped.
    pub fn report(&self) -> String {
        let mut out = String::new();
        for c in &self.conversions {
            if c.dropped.is_empty() {
                let _ = writeln!(out, "{}: every field carried over", shown(&c.source));
            }
            for d in &c.dropped {
                let _ = writeln!(
                    out,
                    "{}: not carried over: {}: {}",
                    shown(&c.source),
                    shown(&d.field),
                    shown(&d.reason)
                );
            }
            for n in &c.notes {
                let _ = writeln!(out, "{}: note: {}", shown(&c.source), shown(n));
            }
        }
        for s in &self.skipped {
            let _ = writeln!(
                out,
                "{}: skipped (not an autoscaler this command converts)",
                shown(s)
            );
        }
        out
    }
}

fn comment_block(c: &Conversion) -> String {
    let mut out = format!(
        "# Converted from {} by kubectl plimsoll convert.\n",
        shown(&c.source)
    );
    if !c.dropped.is_empty() {
        out.push_str("# Not carried over:\n");
        for d in &c.dropped {
            let _ = writeln!(out, "#   {}: {}", shown(&d.field), shown(&d.reason));
        }
    }
    if !c.notes.is_empty() {
        out.push_str("# Set or rewritten to keep the behaviour:\n");
        for n in &c.notes {
            let _ = writeln!(out, "#   {}", shown(n));
        }
    }
    out
}

/// Converts every autoscaler in `input` (YAML, several documents allowed, or JSON).
pub fn convert_text(input: &str) -> Result<Converted> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(input)
        .map_err(|e| Error::Input(format!("the input is not YAML or JSON: {e}")))?;
    let mut conversions = Vec::new();
    let mut skipped = Vec::new();
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        let items = match doc.get("items").and_then(Value::as_array) {
            // A `kubectl get -o yaml` list.
            Some(items)
                if doc
                    .get("kind")
                    .and_then(Value::as_str)
                    .is_some_and(|k| k.ends_with("List")) =>
            {
                items.clone()
            }
            _ => vec![doc],
        };
        for item in items {
            match convert(&item) {
                Ok(c) => conversions.push(c),
                Err(ConvertError::UnknownKind { kind, .. }) => {
                    let name = item
                        .pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    skipped.push(format!("{kind}/{name}"));
                }
                Err(e) => return Err(Error::Input(shown(&e.to_string()).into_owned())),
            }
        }
    }
    Ok(Converted {
        conversions,
        skipped,
    })
}

#[cfg(test)]
mod tests {
    use plimsoll_core::printable::is_printable_lines;

    use super::*;

    const HOSTILE: &str = include_str!("../tests/data/hpa-hostile-keys.yaml");

    #[test]
    fn keys_and_names_from_the_input_cannot_add_documents_or_reach_the_terminal() -> Result<()> {
        let converted = convert_text(HOSTILE)?;
        let yaml = converted.yaml()?;
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(&yaml).map_err(|e| Error::Input(format!("{e}\n{yaml}")))?;
        // The one HPA+ and nothing the unknown key spelled out.
        assert_eq!(docs.len(), 1, "{yaml}");
        assert_eq!(docs[0]["kind"], "HorizontalPodAutoscalerPlus", "{yaml}");
        assert_eq!(docs[0]["spec"]["maxReplicas"], 5);
        assert_eq!(
            docs[0]["spec"]["metrics"][0]["external"]["metric"]["name"],
            "queue\u{1b}]52;c;cm0gLXJmIH4=\u{7}",
            "the object keeps its values; only the comments and the report escape them"
        );
        let report = converted.report();
        for text in [&yaml, &report] {
            assert!(is_printable_lines(text), "{text}");
        }
        // One line per dropped field and per skipped document, each still naming its field.
        let lines: Vec<&str> = report.lines().collect();
        assert_eq!(lines.len(), 2, "{report}");
        assert!(
            lines[0].contains("not carried over: spec.x\\n---\\napiVersion"),
            "{report}"
        );
        assert!(
            lines[0].starts_with("HorizontalPodAutoscaler/web\\n---\\nkind: Secret\\u{1b}[2K:")
        );
        assert!(lines[1].starts_with("ConfigMap\\r\\u{1b}]0;title\\u{7}/other\\n---\\n: skipped"));
        Ok(())
    }
}
