//! A check that a CRD schema is *structural*, as the apiserver requires of `apiextensions/v1`.
//!
//! The apiserver rejects a CRD whose schema is not structural; this catches it in a unit test
//! instead of at `kubectl apply`. The rules checked (from the Kubernetes "structural schema"
//! definition): every node states a `type` unless it is `x-kubernetes-int-or-string` or
//! `x-kubernetes-preserve-unknown-fields`; no `$ref` or `definitions`; `properties` and
//! `additionalProperties` never together; inside `anyOf` / `oneOf` / `allOf` / `not`, no `type`,
//! `description`, `default`, `nullable` or `additionalProperties` (value validations only), and every
//! property named there also exists beside it.

use serde_json::Value;

/// Every violation found, each with the JSON path of the node.
pub fn violations(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    check_node(schema, "", false, &mut out);
    out
}

const LOGICAL: [&str; 4] = ["anyOf", "oneOf", "allOf", "not"];
const FORBIDDEN_IN_LOGICAL: [&str; 5] = [
    "type",
    "description",
    "default",
    "nullable",
    "additionalProperties",
];

fn check_node(node: &Value, path: &str, in_logical: bool, out: &mut Vec<String>) {
    let Some(object) = node.as_object() else {
        out.push(format!("{path}: schema node is not an object"));
        return;
    };
    for key in ["$ref", "definitions", "$defs"] {
        if object.contains_key(key) {
            out.push(format!("{path}: `{key}` is not allowed"));
        }
    }
    let flag = |k: &str| object.get(k).and_then(Value::as_bool).unwrap_or(false);
    if in_logical {
        for key in FORBIDDEN_IN_LOGICAL {
            if object.contains_key(key) {
                out.push(format!(
                    "{path}: `{key}` is not allowed inside anyOf/oneOf/allOf/not"
                ));
            }
        }
    } else if !object.contains_key("type")
        && !flag("x-kubernetes-int-or-string")
        && !flag("x-kubernetes-preserve-unknown-fields")
    {
        out.push(format!("{path}: no `type`"));
    }
    if object.contains_key("properties") && object.contains_key("additionalProperties") {
        out.push(format!(
            "{path}: both `properties` and `additionalProperties`"
        ));
    }
    if let Some(properties) = object.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            check_node(child, &format!("{path}.{name}"), in_logical, out);
        }
    }
    if let Some(items) = object.get("items") {
        check_node(items, &format!("{path}[]"), in_logical, out);
    }
    if let Some(additional) = object.get("additionalProperties").filter(|v| v.is_object()) {
        check_node(additional, &format!("{path}{{}}"), in_logical, out);
    }
    for key in LOGICAL {
        if key == "anyOf"
            && flag("x-kubernetes-int-or-string")
            && is_int_or_string_pair(object.get(key))
        {
            // The one `type` inside anyOf the apiserver allows: int-or-string's two alternatives.
            continue;
        }
        let branches: Vec<&Value> = match object.get(key) {
            Some(Value::Array(list)) => list.iter().collect(),
            Some(single @ Value::Object(_)) => vec![single],
            _ => continue,
        };
        for (i, branch) in branches.into_iter().enumerate() {
            let branch_path = format!("{path}.{key}[{i}]");
            check_node(branch, &branch_path, true, out);
            if let Some(names) = branch.get("properties").and_then(Value::as_object) {
                for name in names.keys() {
                    let declared = object
                        .get("properties")
                        .and_then(Value::as_object)
                        .is_some_and(|p| p.contains_key(name));
                    if !declared {
                        out.push(format!(
                            "{branch_path}: property `{name}` is not declared outside the {key}"
                        ));
                    }
                }
            }
        }
    }
}

fn is_int_or_string_pair(any_of: Option<&Value>) -> bool {
    let Some(Value::Array(list)) = any_of else {
        return false;
    };
    let mut types: Vec<&str> = list
        .iter()
        .filter_map(|b| b.get("type").and_then(Value::as_str))
        .collect();
    types.sort_unstable();
    list.len() == 2 && types == ["integer", "string"]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accepts_a_structural_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "replicas": {"type": "integer", "minimum": 0},
                    "cpu": {"x-kubernetes-int-or-string": true,
                            "anyOf": [{"type": "integer"}, {"type": "string"}]},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "either": {"type": "object",
                               "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                               "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}
                }},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }
        });
        assert_eq!(violations(&schema), Vec::<String>::new());
    }

    #[test]
    fn reports_each_violation_with_its_path() {
        let schema = json!({
            "type": "object",
            "properties": {
                "spec": {"properties": {"x": {"$ref": "#/definitions/X"}}},
                "m": {"type": "object", "properties": {"a": {"type": "string"}},
                      "additionalProperties": {"type": "string"}},
                "o": {"type": "object", "anyOf": [{"properties": {"z": {"type": "string"}}}]},
                "n": {"anyOf": [{"type": "integer"}, {"type": "string"}]}
            }
        });
        let found = violations(&schema);
        assert!(found.contains(&".spec: no `type`".to_owned()), "{found:?}");
        assert!(
            found.contains(&".spec.x: `$ref` is not allowed".to_owned()),
            "{found:?}"
        );
        assert!(found.contains(&".m: both `properties` and `additionalProperties`".to_owned()));
        assert!(
            found
                .iter()
                .any(|v| v.contains("property `z` is not declared")),
            "{found:?}"
        );
        // Without x-kubernetes-int-or-string the same anyOf is not structural.
        assert!(found.contains(&".n: no `type`".to_owned()), "{found:?}");
        assert!(
            found.iter().any(|v| v.starts_with(".n.anyOf[0]: `type`")),
            "{found:?}"
        );
    }
}
