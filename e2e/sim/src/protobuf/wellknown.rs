//! The apimachinery types whose JSON is not their protobuf structure, as their Go
//! `MarshalJSON` methods write them: `Time` (RFC 3339, seconds), `MicroTime` (RFC 3339,
//! microseconds), `Duration` (a Go duration string), `Quantity` (a string), `IntOrString` (an
//! int or a string), and the raw-JSON carriers `RawExtension`, `FieldsV1` and apiextensions'
//! `JSON` (embedded JSON), and the named string slices (`ExtraValue`, `Verbs`: a Go `[]string`
//! that protobuf must wrap in a message, a plain array in JSON). A zero time is absent, as Go marshals a zero `metav1.Time` to
//! nothing on the wire and `null` in JSON.

use prost_reflect::{DynamicMessage, MessageDescriptor, Value as Pb};
use serde_json::{Value, json};

use crate::clock;

/// A message with its own JSON form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WellKnown {
    Time,
    MicroTime,
    Duration,
    Quantity,
    IntOrString,
    /// Bytes holding JSON: `RawExtension.raw`, `FieldsV1.Raw`, apiextensions `JSON.raw`.
    RawJson(&'static str),
    /// A Go named `[]string` wrapped as `{items}` in protobuf: a plain JSON array.
    StringList,
    /// apiextensions `JSONSchemaPropsOrArray`: a schema or an array of schemas.
    SchemaOrArray,
    /// apiextensions `JSONSchemaPropsOrBool`: a schema or a boolean.
    SchemaOrBool,
    /// apiextensions `JSONSchemaPropsOrStringArray`: a schema or an array of property names.
    SchemaOrStringArray,
}

const EXT: &str = "apiextensions_apiserver.pkg.apis.apiextensions.v1";

impl WellKnown {
    /// The well-known type a message is, by full name.
    pub fn of(full_name: &str) -> Option<Self> {
        let (package, name) = full_name.rsplit_once('.')?;
        match (package, name) {
            ("apimachinery.pkg.apis.meta.v1", "Time") => Some(Self::Time),
            ("apimachinery.pkg.apis.meta.v1", "MicroTime") => Some(Self::MicroTime),
            ("apimachinery.pkg.apis.meta.v1", "Duration") => Some(Self::Duration),
            ("apimachinery.pkg.apis.meta.v1", "FieldsV1") => Some(Self::RawJson("Raw")),
            ("apimachinery.pkg.api.resource", "Quantity") => Some(Self::Quantity),
            ("apimachinery.pkg.util.intstr", "IntOrString") => Some(Self::IntOrString),
            ("apimachinery.pkg.runtime", "RawExtension") | (EXT, "JSON") => {
                Some(Self::RawJson("raw"))
            }
            ("api.authorization.v1" | "api.authentication.v1", "ExtraValue")
            | ("apimachinery.pkg.apis.meta.v1", "Verbs") => Some(Self::StringList),
            (EXT, "JSONSchemaPropsOrArray") => Some(Self::SchemaOrArray),
            (EXT, "JSONSchemaPropsOrBool") => Some(Self::SchemaOrBool),
            (EXT, "JSONSchemaPropsOrStringArray") => Some(Self::SchemaOrStringArray),
            _ => None,
        }
    }
}

fn int_field(msg: &DynamicMessage, name: &str) -> Option<i64> {
    if !msg.has_field_by_name(name) {
        return None;
    }
    match msg.get_field_by_name(name)?.as_ref() {
        Pb::I64(v) => Some(*v),
        Pb::I32(v) => Some(i64::from(*v)),
        _ => None,
    }
}

fn str_field(msg: &DynamicMessage, name: &str) -> Option<String> {
    msg.get_field_by_name(name)
        .and_then(|v| v.as_str().map(String::from))
}

/// The JSON of a leaf well-known message; `None` when it is absent in JSON (zero time, no raw
/// bytes). The schema-or-X kinds are handled by the caller, which recurses.
pub fn to_json(
    kind: WellKnown,
    msg: &DynamicMessage,
    nested: Nested<'_>,
) -> Result<Option<Value>, String> {
    Ok(match kind {
        WellKnown::Time | WellKnown::MicroTime => {
            let Some(seconds) = int_field(msg, "seconds") else {
                return Ok(None);
            };
            let nanos = int_field(msg, "nanos").unwrap_or(0);
            let t = jiff::Timestamp::new(seconds, 0).map_err(|e| e.to_string())?;
            Some(json!(if kind == WellKnown::Time {
                clock::rfc3339(t)
            } else {
                // Go truncates MicroTime to microseconds on the way in.
                let micros = jiff::SignedDuration::from_nanos(nanos - nanos % 1000);
                clock::rfc3339_micro(t.checked_add(micros).map_err(|e| e.to_string())?)
            }))
        }
        WellKnown::Duration => int_field(msg, "duration").map(|ns| json!(go_duration(ns))),
        WellKnown::Quantity => str_field(msg, "string").map(Value::String),
        WellKnown::IntOrString => {
            if int_field(msg, "type") == Some(1) {
                Some(json!(str_field(msg, "strVal").unwrap_or_default()))
            } else {
                Some(json!(int_field(msg, "intVal").unwrap_or(0)))
            }
        }
        WellKnown::RawJson(field) => match msg.get_field_by_name(field).as_deref() {
            Some(Pb::Bytes(b)) if !b.is_empty() => Some(raw_to_json(b, nested)?),
            _ => None,
        },
        WellKnown::StringList => match msg.get_field_by_name("items").as_deref() {
            Some(Pb::List(items)) => Some(Value::Array(
                items
                    .iter()
                    .filter_map(|i| i.as_str().map(|s| json!(s)))
                    .collect(),
            )),
            _ => Some(json!([])),
        },
        WellKnown::SchemaOrArray | WellKnown::SchemaOrBool | WellKnown::SchemaOrStringArray => None,
    })
}

/// How embedded bytes that are themselves a protobuf envelope (`k8s\0`) are decoded: `None`
/// when they are not one. The envelope's decoder passes itself down, so the recursion the data
/// has (a `RawExtension` may hold an object) needs no import back up.
pub type Nested<'a> = &'a dyn Fn(&[u8]) -> Option<Result<Value, String>>;

/// Embedded bytes as JSON: JSON itself, or a nested protobuf envelope decoded by `nested`.
fn raw_to_json(b: &[u8], nested: Nested<'_>) -> Result<Value, String> {
    if let Some(decoded) = nested(b) {
        return decoded;
    }
    serde_json::from_slice(b).map_err(|e| format!("embedded JSON: {e}"))
}

/// The message of a leaf well-known type from its JSON.
pub fn from_json(
    kind: WellKnown,
    desc: &MessageDescriptor,
    value: &Value,
) -> Result<DynamicMessage, String> {
    let mut msg = DynamicMessage::new(desc.clone());
    let mut set = |name: &str, v: Pb| -> Result<(), String> {
        let field = desc
            .get_field_by_name(name)
            .ok_or_else(|| format!("{} has no field {name}", desc.full_name()))?;
        msg.set_field(&field, v);
        Ok(())
    };
    match kind {
        WellKnown::Time | WellKnown::MicroTime => {
            let s = value.as_str().ok_or("a time must be a string")?;
            let t = clock::parse_time(s).ok_or_else(|| format!("{s:?} is not an RFC 3339 time"))?;
            set("seconds", Pb::I64(t.as_second()))?;
            let nanos = if kind == WellKnown::Time {
                0
            } else {
                t.subsec_nanosecond()
            };
            set("nanos", Pb::I32(nanos))?;
        }
        WellKnown::Duration => {
            let s = value.as_str().ok_or("a duration must be a string")?;
            set("duration", Pb::I64(parse_go_duration(s)?))?;
        }
        WellKnown::Quantity => {
            let s = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err("a quantity must be a string or a number".into()),
            };
            set("string", Pb::String(s))?;
        }
        WellKnown::IntOrString => match value {
            Value::String(s) => {
                set("type", Pb::I64(1))?;
                set("intVal", Pb::I32(0))?;
                set("strVal", Pb::String(s.clone()))?;
            }
            Value::Number(n) => {
                let i = n
                    .as_i64()
                    .and_then(|i| i32::try_from(i).ok())
                    .ok_or("an int-or-string must be a 32-bit integer")?;
                set("type", Pb::I64(0))?;
                set("intVal", Pb::I32(i))?;
                set("strVal", Pb::String(String::new()))?;
            }
            _ => return Err("an int-or-string must be an integer or a string".into()),
        },
        WellKnown::RawJson(field) => {
            let raw = serde_json::to_vec(value).map_err(|e| e.to_string())?;
            set(field, Pb::Bytes(raw.into()))?;
        }
        WellKnown::StringList => {
            let items = value
                .as_array()
                .ok_or("a string list must be an array")?
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(|s| Pb::String(s.to_owned()))
                        .ok_or("a string list holds strings")
                })
                .collect::<Result<Vec<_>, _>>()?;
            set("items", Pb::List(items))?;
        }
        WellKnown::SchemaOrArray | WellKnown::SchemaOrBool | WellKnown::SchemaOrStringArray => {
            return Err("schema unions are encoded by the caller".into());
        }
    }
    Ok(msg)
}

/// One second in nanoseconds.
const SECOND: u64 = 1_000_000_000;

/// Formats nanoseconds as Go's `time.Duration.String()` does (`1h30m0s`, `1.5s`, `250ms`).
pub fn go_duration(ns: i64) -> String {
    if ns == 0 {
        return "0s".into();
    }
    let sign = if ns < 0 { "-" } else { "" };
    let u = ns.unsigned_abs();
    if u < SECOND {
        let (unit, div) = match u {
            0..1_000 => ("ns", 1),
            1_000..1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{sign}{}{unit}", decimal(u, div));
    }
    let (h, rest) = (u / (3600 * SECOND), u % (3600 * SECOND));
    let (m, s) = (rest / (60 * SECOND), rest % (60 * SECOND));
    let hours = if h > 0 {
        format!("{h}h")
    } else {
        String::new()
    };
    let minutes = if h > 0 || m > 0 {
        format!("{m}m")
    } else {
        String::new()
    };
    format!("{sign}{hours}{minutes}{}s", decimal(s, SECOND))
}

/// `v / div` with the remainder as trailing decimals, zeros trimmed.
fn decimal(v: u64, div: u64) -> String {
    let (int, frac) = (v / div, v % div);
    if frac == 0 {
        return int.to_string();
    }
    let width = div.ilog10() as usize;
    let digits = format!("{frac:0width$}");
    format!("{int}.{}", digits.trim_end_matches('0'))
}

/// Parses a Go duration string (`1h30m`, `1.5s`, `-250ms`, `0`) into nanoseconds.
pub fn parse_go_duration(s: &str) -> Result<i64, String> {
    let bad = || format!("{s:?} is not a Go duration");
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (num, tail) = rest.split_at(num_end);
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_end);
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(bad()),
        };
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        if int.is_empty() && frac.is_empty() {
            return Err(bad());
        }
        let int: i128 = if int.is_empty() {
            0
        } else {
            int.parse().map_err(|_| bad())?
        };
        let mut part = int * scale;
        let mut unit_scale = scale;
        for d in frac.chars() {
            unit_scale /= 10;
            part += i128::from(d.to_digit(10).ok_or_else(bad)?) * unit_scale;
        }
        total += part;
        rest = tail;
    }
    let total = if neg { -total } else { total };
    i64::try_from(total).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_format_and_parse_like_go() {
        // upstream: Go's time/time_test.go durationTests
        for (ns, s) in [
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1µs"),
            (2_200_000, "2.2ms"),
            (3_300_000_000, "3.3s"),
            (4 * 60_000_000_000 + 5_000_000_000, "4m5s"),
            (4 * 60_000_000_000 + 5_001_000_000, "4m5.001s"),
            (
                5 * 3_600_000_000_000 + 6 * 60_000_000_000 + 7_001_000_000,
                "5h6m7.001s",
            ),
            (8 * 60_000_000_000 + 1, "8m0.000000001s"),
            (-1_500_000_000, "-1.5s"),
            (90 * 60_000_000_000, "1h30m0s"),
        ] {
            assert_eq!(go_duration(ns), s);
            assert_eq!(parse_go_duration(s), Ok(ns), "{s}");
        }
        assert_eq!(parse_go_duration("1h30m"), Ok(90 * 60_000_000_000));
        assert_eq!(parse_go_duration(".5s"), Ok(500_000_000));
        assert!(parse_go_duration("5").is_err());
        assert!(parse_go_duration("").is_err());
        assert!(parse_go_duration("1x").is_err());
    }
}
