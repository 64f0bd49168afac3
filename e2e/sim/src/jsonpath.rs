//! Printer-column JSONPath, evaluated as the API server evaluates a CRD's
//! `additionalPrinterColumns` (apiextensions-apiserver's `tableconvertor` on
//! `k8s.io/client-go/util/jsonpath`), and the cells it makes of the results.
//!
//! The Kubernetes dialect (`.status.conditions[?(@.type=="Ready")].status`, no leading `$`,
//! field names that may hold `-` and `/`, `\.` escapes) is translated into RFC 9535
//! (`$['status']['conditions'][?(@['type']=="Ready")]['status']`) and evaluated by
//! `jsonpath-rust`. Supported: `.field`, `..field`, `*`, `[n]`, `[-n]`, `[a:b:c]`, `[a,b]`,
//! `['name']`, and filters `[?(@.path OP literal)]` / `[?(@.path)]` with `==`, `!=`, `<`, `<=`,
//! `>`, `>=`, as upstream's parser has them.
//!
//! Cells follow upstream `tableconvertor.ConvertToTable`: only the first result counts; nothing
//! found gives `null`; a `string` column prints any value (objects and arrays as compact JSON,
//! `null` as `<no value>`); the other types keep a value only of their own type (`integer`
//! truncates a float, `number` widens an integer), and a `date` column shows the age of an RFC
//! 3339 time (`<invalid>` for what does not parse or lies more than a second ahead).
//!
//! Differences from upstream, none of which a well-formed column meets: a filter on an object
//! (not an array) selects among its values where upstream finds nothing; a path upstream cannot
//! parse (the API server then refuses to serve the CRD's tables) gives empty cells here.

use jiff::Timestamp;
use jsonpath_rust::parser::model::JpQuery;
use jsonpath_rust::parser::parse_json_path;
use jsonpath_rust::query::{QueryRef, js_path_process};
use serde_json::{Value, json};

use crate::clock::{human_age, parse_time};

/// A parsed printer-column path.
#[derive(Debug)]
pub struct ColumnPath {
    query: Option<JpQuery>,
}

impl ColumnPath {
    /// Parses a column's `jsonPath`; one that does not parse finds nothing.
    pub fn parse(path: &str) -> Self {
        Self {
            query: to_rfc9535(path).and_then(|p| parse_json_path(&p).ok()),
        }
    }

    /// The first value the path finds in `obj`, as upstream takes `results[0][0]`.
    pub fn first<'a>(&self, obj: &'a Value) -> Option<&'a Value> {
        let query = self.query.as_ref()?;
        js_path_process(query, obj)
            .ok()?
            .into_iter()
            .next()
            .map(QueryRef::val)
    }

    /// The table cell of a column of type `type_` for `obj` (see the module docs).
    pub fn cell(&self, type_: &str, obj: &Value, now: Timestamp) -> Value {
        self.first(obj)
            .map_or(Value::Null, |v| cell_for(type_, v, now))
    }
}

/// Upstream `cellForJSONValue`, plus `PrintResults` for `string` columns.
fn cell_for(type_: &str, v: &Value, now: Timestamp) -> Value {
    match (type_, v) {
        ("string", Value::String(s)) => json!(s),
        ("string", Value::Null) => json!("<no value>"),
        ("string", Value::Number(n)) => json!(go_number(n)),
        ("string", Value::Bool(b)) => json!(b.to_string()),
        ("string", other) => json!(other.to_string()),
        ("integer", Value::Number(n)) => n.as_i64().map_or_else(
            // Go's int64(float64) truncates toward zero.
            || n.as_f64().map_or(Value::Null, |f| json!(f.trunc() as i64)),
            |i| json!(i),
        ),
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, |f| json!(f)),
        ("boolean", Value::Bool(b)) => json!(b),
        ("date", Value::String(s)) => json!(date_cell(s, now)),
        _ => Value::Null,
    }
}

/// Go's `fmt.Fprint` of a JSON number decoded into an `int64` or a `float64`: integers as they
/// are, floats in the shortest form (`1.5`, `1e+21`).
fn go_number(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let value = n.as_f64().unwrap_or_default();
    if value.fract() == 0.0 && value.abs() < 1e21 {
        format!("{value:.0}")
    } else if value.abs() >= 1e21 || (value != 0.0 && value.abs() < 1e-4) {
        // Go switches to an exponent outside [1e-4, 1e21) and always signs it.
        let scientific = format!("{value:e}");
        match scientific.split_once('e') {
            Some((mantissa, power)) if !power.starts_with('-') => {
                format!("{mantissa}e+{power:0>2}")
            }
            Some((mantissa, power)) => {
                format!("{mantissa}e-{:0>2}", power.trim_start_matches('-'))
            }
            None => scientific,
        }
    } else {
        value.to_string()
    }
}

/// `metatable.ConvertToHumanReadableDateType` of an RFC 3339 time: its age as
/// `duration.HumanDuration` gives it; `<unknown>` for the zero time, `<invalid>` for what does
/// not parse or lies more than a second in the future.
fn date_cell(s: &str, now: Timestamp) -> String {
    let Some(t) = parse_time(s) else {
        return "<invalid>".into();
    };
    if t.as_second() == ZERO_TIME_SECONDS {
        return "<unknown>".into();
    }
    let secs = now.duration_since(t).as_secs();
    if secs < -1 {
        "<invalid>".into()
    } else {
        human_age(secs)
    }
}

/// Go's zero `time.Time` (`0001-01-01T00:00:00Z`) in Unix seconds.
const ZERO_TIME_SECONDS: i64 = -62_135_596_800;

/// Characters that end an unquoted field name (upstream `isTerminator`), plus, inside a
/// filter, the comparison operators and the closing parenthesis.
fn ends_field(c: char, in_filter: bool) -> bool {
    c.is_whitespace()
        || matches!(c, '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}')
        || (in_filter && matches!(c, '=' | '!' | '<' | '>' | ')'))
}

/// An RFC 9535 name selector for `name`.
fn name_selector(name: &str) -> String {
    let mut out = String::from("['");
    for c in name.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push_str("']");
    out
}

/// Translates a Kubernetes JSONPath (with or without the `{}` of a template) into RFC 9535;
/// `None` when it is not in the subset the module docs list.
pub fn to_rfc9535(path: &str) -> Option<String> {
    let p = path.trim();
    let p = p
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(p)
        .trim();
    if p.is_empty() {
        return None;
    }
    let chars: Vec<char> = p.chars().collect();
    let start = usize::from(chars.first() == Some(&'$'));
    let (segments, end) = segments(&chars, start, false)?;
    (end == chars.len()).then(|| format!("${segments}"))
}

/// Translates the segments from `i` on; returns them and where they stop (at the end, or inside
/// a filter at whatever cannot continue a path).
fn segments(chars: &[char], mut i: usize, in_filter: bool) -> Option<(String, usize)> {
    let mut out = String::new();
    while let Some(&c) = chars.get(i) {
        match c {
            '.' => {
                i += 1;
                if chars.get(i) == Some(&'.') {
                    out.push_str("..");
                    i += 1;
                    if chars.get(i) == Some(&'[') {
                        continue;
                    }
                } else if chars.get(i).is_none() && out.is_empty() && !in_filter {
                    // `.` alone: the whole object.
                    return Some((out, i));
                }
                let (name, next) = field(chars, i, in_filter)?;
                i = next;
                if name == "*" {
                    out.push_str(if out.ends_with("..") { "*" } else { "[*]" });
                } else {
                    out.push_str(&name_selector(&name));
                }
            }
            '[' => {
                let close = closing_bracket(chars, i)?;
                let inner: String = chars[i + 1..close].iter().collect();
                out.push_str(&bracket(inner.trim())?);
                i = close + 1;
            }
            _ if in_filter => break,
            _ => return None,
        }
    }
    Some((out, i))
}

/// An unquoted field name from `i` (upstream `parseField`: up to a terminator, `\` escapes the
/// next character); it must not be empty.
fn field(chars: &[char], mut i: usize, in_filter: bool) -> Option<(String, usize)> {
    let mut name = String::new();
    while let Some(&c) = chars.get(i) {
        if c == '\\' {
            name.push(*chars.get(i + 1)?);
            i += 2;
        } else if ends_field(c, in_filter) {
            break;
        } else {
            name.push(c);
            i += 1;
        }
    }
    (!name.is_empty()).then_some((name, i))
}

/// The index of the `]` closing the `[` at `open`, skipping quoted text and nested brackets.
fn closing_bracket(chars: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut i = open;
    while let Some(&c) = chars.get(i) {
        match (quote, c) {
            (Some(_), '\\') => i += 1,
            (Some(q), c) if c == q => quote = None,
            (None, '\'' | '"') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The content of a bracket: a filter, a quoted name, or indices, slices, unions and `*`
/// (the same in both dialects).
fn bracket(inner: &str) -> Option<String> {
    if let Some(filter) = inner.strip_prefix('?') {
        let expr = filter
            .trim()
            .strip_prefix('(')
            .and_then(|f| f.strip_suffix(')'))?;
        return Some(format!("[?({})]", filter_expression(expr.trim())?));
    }
    let plain = inner
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '-' | ':' | ',' | '*' | ' '));
    let quoted = inner.len() >= 2
        && ((inner.starts_with('\'') && inner.ends_with('\''))
            || (inner.starts_with('"') && inner.ends_with('"')));
    (plain && !inner.is_empty() || quoted).then(|| format!("[{inner}]"))
}

/// A filter: `@path`, or `operand OP operand` where an operand is `@path`, a quoted string, a
/// number, `true`, `false` or `null`.
fn filter_expression(expr: &str) -> Option<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let mut operands = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            _ if c.is_whitespace() => i += 1,
            '@' => {
                let (segs, next) = segments(&chars, i + 1, true)?;
                out.push('@');
                out.push_str(&segs);
                i = next;
                operands += 1;
            }
            '\'' | '"' => {
                let mut j = i + 1;
                while *chars.get(j)? != c {
                    j += if chars[j] == '\\' { 2 } else { 1 };
                }
                out.extend(&chars[i..=j]);
                i = j + 1;
                operands += 1;
            }
            '=' | '!' | '<' | '>' => {
                let two = chars.get(i + 1) == Some(&'=');
                let op: String = chars[i..i + 1 + usize::from(two)].iter().collect();
                if !matches!(op.as_str(), "==" | "!=" | "<" | "<=" | ">" | ">=") {
                    return None;
                }
                out.push(' ');
                out.push_str(&op);
                out.push(' ');
                i += op.len();
            }
            _ => {
                let j = (i..chars.len())
                    .find(|&j| {
                        chars[j].is_whitespace() || matches!(chars[j], '=' | '!' | '<' | '>')
                    })
                    .unwrap_or(chars.len());
                let word: String = chars[i..j].iter().collect();
                let literal = matches!(word.as_str(), "true" | "false" | "null")
                    || word.parse::<f64>().is_ok();
                if !literal {
                    return None;
                }
                out.push_str(&word);
                i = j;
                operands += 1;
            }
        }
    }
    (1..=2).contains(&operands).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-01-01T01:00:00Z".parse().unwrap()
    }

    fn cell(path: &str, type_: &str, obj: &Value) -> Value {
        ColumnPath::parse(path).cell(type_, obj, now())
    }

    #[test]
    fn kubernetes_paths_translate_to_rfc_9535() {
        for (k8s, rfc) in [
            (".spec.size", "$['spec']['size']"),
            ("{.spec.size}", "$['spec']['size']"),
            ("$.spec.size", "$['spec']['size']"),
            (".", "$"),
            (
                ".metadata.labels.app\\.kubernetes\\.io/name",
                "$['metadata']['labels']['app.kubernetes.io/name']",
            ),
            (
                ".metadata.labels.pod-template-hash",
                "$['metadata']['labels']['pod-template-hash']",
            ),
            (
                ".spec.containers[0].name",
                "$['spec']['containers'][0]['name']",
            ),
            (
                ".spec.containers[-1:].name",
                "$['spec']['containers'][-1:]['name']",
            ),
            (
                ".spec.containers[*].name",
                "$['spec']['containers'][*]['name']",
            ),
            (".spec.*", "$['spec'][*]"),
            ("..name", "$..['name']"),
            (".metadata['name']", "$['metadata']['name']"),
            (
                ".status.conditions[?(@.type=='Ready')].status",
                "$['status']['conditions'][?(@['type'] == 'Ready')]['status']",
            ),
            (
                ".status.conditions[?(@.type==\"Ready\")].status",
                "$['status']['conditions'][?(@['type'] == \"Ready\")]['status']",
            ),
            (
                ".items[?(@.spec.replicas >= 2)]",
                "$['items'][?(@['spec']['replicas'] >= 2)]",
            ),
            (
                ".items[?(@.status.ready)]",
                "$['items'][?(@['status']['ready'])]",
            ),
        ] {
            assert_eq!(to_rfc9535(k8s).as_deref(), Some(rfc), "{k8s}");
        }
        for bad in [
            "",
            "spec.size",
            ".spec.",
            ".a[",
            ".a[?(@.x=~'y')]",
            ".a[?(@.x==y)]",
        ] {
            assert_eq!(to_rfc9535(bad), None, "{bad}");
        }
    }

    /// The upstream VPA CRD's columns (deploy/crds), on a status with a recommendation.
    #[test]
    fn the_vpa_columns_find_the_target_and_the_condition() {
        let vpa = json!({"metadata": {"name": "v", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"updatePolicy": {"updateMode": "Auto"}},
        "status": {
            "recommendation": {"containerRecommendations": [
                {"containerName": "app", "target": {"cpu": "250m", "memory": "262144k"}},
                {"containerName": "sidecar", "target": {"cpu": "10m", "memory": "1Mi"}},
            ]},
            "conditions": [
                {"type": "LowConfidence", "status": "True"},
                {"type": "RecommendationProvided", "status": "True"},
            ],
        }});
        let target = ".status.recommendation.containerRecommendations[0].target";
        assert_eq!(cell(&format!("{target}.cpu"), "string", &vpa), "250m");
        assert_eq!(cell(&format!("{target}.memory"), "string", &vpa), "262144k");
        assert_eq!(
            cell(
                ".status.conditions[?(@.type=='RecommendationProvided')].status",
                "string",
                &vpa
            ),
            "True"
        );
        assert_eq!(
            cell(".spec.updatePolicy.updateMode", "string", &vpa),
            "Auto"
        );
        assert_eq!(cell(".metadata.creationTimestamp", "date", &vpa), "60m");
        // Several results: the first only.
        assert_eq!(
            cell(
                ".status.recommendation.containerRecommendations[*].containerName",
                "string",
                &vpa
            ),
            "app"
        );
        // Nothing yet: an empty cell, whatever the type.
        let empty = json!({"metadata": {"name": "v"}});
        for type_ in ["string", "integer", "number", "boolean", "date"] {
            assert_eq!(cell(&format!("{target}.cpu"), type_, &empty), Value::Null);
        }
        assert_eq!(
            cell(
                ".status.conditions[?(@.type=='RecommendationProvided')].status",
                "string",
                &empty
            ),
            Value::Null
        );
    }

    /// upstream: apiextensions-apiserver tableconvertor `cellForJSONValue` and
    /// `TestConvertor` (a string column prints any value; the others keep their own type).
    #[test]
    fn cells_are_formatted_by_column_type() {
        let obj = json!({"spec": {"i": 3, "f": 2.75, "whole": 4.0, "b": true, "s": "x", "n": null,
            "o": {"a": [1, "b"]}, "t": "2026-01-01T00:55:00Z", "future": "2026-01-01T01:05:00Z",
            "soon": "2026-01-01T01:00:01Z", "zero": "0001-01-01T00:00:00Z", "bad": "yesterday",
            "big": 1e21}});
        for (path, type_, want) in [
            (".spec.i", "integer", json!(3)),
            (".spec.f", "integer", json!(2)),
            (".spec.s", "integer", Value::Null),
            (".spec.i", "number", json!(3.0)),
            (".spec.f", "number", json!(2.75)),
            (".spec.b", "boolean", json!(true)),
            (".spec.s", "boolean", Value::Null),
            (".spec.s", "string", json!("x")),
            (".spec.i", "string", json!("3")),
            (".spec.f", "string", json!("2.75")),
            (".spec.whole", "string", json!("4")),
            (".spec.big", "string", json!("1e+21")),
            (".spec.b", "string", json!("true")),
            (".spec.o", "string", json!(r#"{"a":[1,"b"]}"#)),
            (".spec.n", "string", json!("<no value>")),
            (".spec.n", "integer", Value::Null),
            (".spec.t", "date", json!("5m")),
            (".spec.soon", "date", json!("0s")),
            (".spec.future", "date", json!("<invalid>")),
            (".spec.zero", "date", json!("<unknown>")),
            (".spec.bad", "date", json!("<invalid>")),
            (".spec.i", "date", Value::Null),
            (".spec.missing", "string", Value::Null),
        ] {
            assert_eq!(cell(path, type_, &obj), want, "{path} as {type_}");
        }
    }

    #[test]
    fn filters_compare_strings_and_numbers_and_test_existence() {
        let obj = json!({"items": [
            {"name": "a", "n": 1},
            {"name": "b", "n": 5, "flag": true},
            {"name": "c-d", "n": 7},
        ]});
        assert_eq!(cell(".items[?(@.n > 4)].name", "string", &obj), "b");
        assert_eq!(cell(".items[?(@.n<=1)].name", "string", &obj), "a");
        assert_eq!(
            cell(".items[?(@.name != 'a')].n", "integer", &obj),
            json!(5)
        );
        assert_eq!(cell(".items[?(@.flag)].name", "string", &obj), "b");
        assert_eq!(
            cell(".items[?(@.name==\"c-d\")].n", "integer", &obj),
            json!(7)
        );
        assert_eq!(cell(".items[-1].name", "string", &obj), "c-d");
        assert_eq!(cell(".items[1:].name", "string", &obj), "b");
        assert_eq!(cell(".items[9].name", "string", &obj), Value::Null);
    }
}
