//! The structural-schema half of CRD validation: pruning of fields the schema does not declare,
//! and the OpenAPI v3 checks kube-apiserver runs through kube-openapi's validator (`type`,
//! `x-kubernetes-int-or-string`, `nullable`, `enum`, `required`, numeric bounds, string length,
//! `pattern`, `format: date-time`, item and property counts), worded as it words them
//! (`spec.minReplicas in body should be greater than or equal to 0`).
//!
//! Invariants: the root's `apiVersion`, `kind` and `metadata` (and those of embedded resources)
//! are never pruned; `x-kubernetes-preserve-unknown-fields` keeps unknown fields; a `null` in a
//! property that is not `nullable` is dropped, as the server drops it before defaulting; on
//! update, a value equal to the stored one is not checked again (ratcheting).

use serde_json::{Map, Value};

use super::field::{ErrorKind, FieldError, FieldPath};

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool).unwrap_or(false)
}

/// Removes the fields `schema` does not declare from `value`, and the `null`s of properties that
/// are not nullable. `root` marks the object itself (its `apiVersion`, `kind`, `metadata` stay).
pub fn prune(schema: &Value, value: &mut Value, root: bool) {
    match value {
        Value::Object(map) => prune_object(schema, map, root),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    prune(item_schema, item, false);
                }
            }
        }
        _ => {}
    }
}

fn prune_object(schema: &Value, map: &mut Map<String, Value>, root: bool) {
    let keeps_meta = root || flag(schema, "x-kubernetes-embedded-resource");
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    map.retain(|k, v| {
        if keeps_meta && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            return true;
        }
        match props.and_then(|p| p.get(k)) {
            Some(prop) => !v.is_null() || flag(prop, "nullable"),
            None => additional.is_some() || preserve,
        }
    });
    for (k, v) in map.iter_mut() {
        if keeps_meta && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        if let Some(prop) = props.and_then(|p| p.get(k)) {
            prune(prop, v, false);
        } else if let Some(a) = additional {
            prune(a, v, false);
        }
    }
}

/// Checks `value` against `schema`, appending every problem; `old` is the stored value at the
/// same place on update (ratcheting: an unchanged value is not checked).
pub fn validate(
    schema: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) {
    if old == Some(value) {
        return;
    }
    if !check_type(schema, value, path, errors) {
        return;
    }
    check_enum(schema, value, path, errors);
    match value {
        Value::Object(map) => validate_object(schema, map, old, path, errors),
        Value::Array(items) => validate_array(schema, items, path, errors),
        Value::String(s) => check_string(schema, s, path, errors),
        Value::Number(n) => {
            if let Some(v) = n.as_f64() {
                check_number(schema, value, v, path, errors);
            }
        }
        Value::Bool(_) | Value::Null => {}
    }
}

/// "spec.x in body …": kube-openapi names the field in its message too.
fn in_body(path: &FieldPath, rest: &str) -> String {
    format!("{path} in body {rest}")
}

/// Go's `%v` of a float64 bound: `0`, `1.5`, `100`.
fn bound(v: &Value) -> String {
    match v.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        Some(f) => format!("{f}"),
        None => v.to_string(),
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Checks `type`, `nullable` and `x-kubernetes-int-or-string`; false when the value has the
/// wrong type (nothing more is checked below it).
fn check_type(
    schema: &Value,
    value: &Value,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) -> bool {
    if value.is_null() && flag(schema, "nullable") {
        return true;
    }
    let actual = json_type(value);
    let expected = if flag(schema, "x-kubernetes-int-or-string") {
        if matches!(actual, "integer" | "string") || whole_number(value) {
            return true;
        }
        "integer,string"
    } else {
        let Some(t) = schema.get("type").and_then(Value::as_str) else {
            // No type (preserve-unknown-fields or a bare schema): anything but null.
            return true;
        };
        let ok = match t {
            "integer" => actual == "integer" || whole_number(value),
            "number" => matches!(actual, "integer" | "number"),
            other => other == actual,
        };
        if ok {
            return true;
        }
        t
    };
    errors.push(FieldError::new(
        ErrorKind::TypeInvalid,
        path.clone(),
        Some(value.clone()),
        in_body(path, &format!("must be of type {expected}: \"{actual}\"")),
    ));
    false
}

/// A JSON float with no fraction, which Go's decoder would have read as an integer.
fn whole_number(value: &Value) -> bool {
    value.as_f64().is_some_and(|f| f.fract() == 0.0)
}

fn check_enum(schema: &Value, value: &Value, path: &FieldPath, errors: &mut Vec<FieldError>) {
    let Some(allowed) = schema.get("enum").and_then(Value::as_array) else {
        return;
    };
    if value.is_null() || allowed.contains(value) {
        return;
    }
    let supported: Vec<String> = allowed
        .iter()
        .map(|a| match a {
            Value::String(s) => format!("{s:?}"),
            other => format!("\"{other}\""),
        })
        .collect();
    errors.push(FieldError::new(
        ErrorKind::NotSupported,
        path.clone(),
        Some(value.clone()),
        format!("supported values: {}", supported.join(", ")),
    ));
}

fn validate_object(
    schema: &Value,
    map: &Map<String, Value>,
    old: Option<&Value>,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) {
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(name) {
                errors.push(FieldError::new(
                    ErrorKind::Required,
                    path.child(name),
                    None,
                    "",
                ));
            }
        }
    }
    // `maxProperties` (kube-openapi's TooManyProperties, answered as `field.TooMany`).
    let len = map.len() as u64;
    if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
        && len > max
    {
        errors.push(FieldError::new(
            ErrorKind::TooMany,
            path.clone(),
            Some(Value::from(len)),
            format!("must have at most {max} items"),
        ));
    }
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    for k in keys {
        if path.is_root() && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        let old_child = old.and_then(|o| o.get(k));
        if let Some(prop) = props.and_then(|p| p.get(k)) {
            validate(prop, &map[k], old_child, &path.child(k), errors);
        } else if let Some(a) = additional {
            validate(a, &map[k], old_child, &path.key(k), errors);
        }
    }
}

fn validate_array(schema: &Value, items: &[Value], path: &FieldPath, errors: &mut Vec<FieldError>) {
    let len = items.len() as u64;
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
        && len > max
    {
        errors.push(FieldError::new(
            ErrorKind::TooMany,
            path.clone(),
            Some(Value::from(len)),
            format!("must have at most {max} items"),
        ));
    }
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
        && len < min
    {
        errors.push(FieldError::new(
            ErrorKind::Invalid,
            path.clone(),
            Some(Value::from(len)),
            in_body(path, &format!("should have at least {min} items")),
        ));
    }
    if let Some(item_schema) = schema.get("items") {
        // Items of an atomic list have no stored counterpart to ratchet against.
        for (i, item) in items.iter().enumerate() {
            validate(item_schema, item, None, &path.index(i), errors);
        }
    }
}

fn check_string(schema: &Value, s: &str, path: &FieldPath, errors: &mut Vec<FieldError>) {
    let value = || Some(Value::String(s.to_string()));
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && s.chars().count() as u64 > max
    {
        let unit = if max == 1 { "byte" } else { "bytes" };
        errors.push(FieldError::new(
            ErrorKind::TooLong,
            path.clone(),
            value(),
            format!("may not be more than {max} {unit}"),
        ));
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && (s.chars().count() as u64) < min
    {
        errors.push(FieldError::new(
            ErrorKind::Invalid,
            path.clone(),
            value(),
            in_body(path, &format!("should be at least {min} chars long")),
        ));
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        // An unparsable pattern would have been refused with the CRD; nothing to check then.
        if let Ok(re) = regex::Regex::new(pattern)
            && !re.is_match(s)
        {
            errors.push(FieldError::new(
                ErrorKind::Invalid,
                path.clone(),
                value(),
                in_body(path, &format!("should match '{pattern}'")),
            ));
        }
    }
    if schema.get("format").and_then(Value::as_str) == Some("date-time")
        && s.parse::<jiff::Timestamp>().is_err()
    {
        errors.push(FieldError::new(
            ErrorKind::TypeInvalid,
            path.clone(),
            value(),
            in_body(path, &format!("must be of type date-time: {s:?}")),
        ));
    }
}

fn check_number(
    schema: &Value,
    value: &Value,
    v: f64,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) {
    let mut push = |detail: String| {
        errors.push(FieldError::new(
            ErrorKind::Invalid,
            path.clone(),
            Some(value.clone()),
            in_body(path, &detail),
        ));
    };
    if let Some(min) = schema.get("minimum") {
        let exclusive = flag(schema, "exclusiveMinimum");
        let m = min.as_f64().unwrap_or(f64::MIN);
        if exclusive && v <= m {
            push(format!("should be greater than {}", bound(min)));
        } else if !exclusive && v < m {
            push(format!("should be greater than or equal to {}", bound(min)));
        }
    }
    if let Some(max) = schema.get("maximum") {
        let exclusive = flag(schema, "exclusiveMaximum");
        let m = max.as_f64().unwrap_or(f64::MAX);
        if exclusive && v >= m {
            push(format!("should be less than {}", bound(max)));
        } else if !exclusive && v > m {
            push(format!("should be less than or equal to {}", bound(max)));
        }
    }
}
