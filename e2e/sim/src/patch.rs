//! Patch application: JSON merge patch (RFC 7386), JSON patch (RFC 6902), and strategic merge
//! patch for the built-in kinds. Server-side apply is served as a strategic merge of the applied
//! configuration onto the live object; who owns which field, and the conflicts an apply meets,
//! are decided in `managed_fields` (fields a manager stopped applying are not pruned).
//!
//! Strategic merge knows the merge keys of the lists the autoscalers and kubectl touch
//! (containers by `name`, ports by `containerPort`, conditions by `type`, …); any other list is
//! replaced, and `$patch: replace|delete` and `$deleteFromPrimitiveList/<field>` directives work.

use serde_json::Value;

use crate::error::ApiError;

/// The patch flavours a PATCH request may carry (its `Content-Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchKind {
    /// Maps a `Content-Type` header to a patch kind.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let ct = ct.split(';').next().unwrap_or_default().trim();
        match ct {
            "application/merge-patch+json" => Some(Self::Merge),
            "application/json-patch+json" => Some(Self::Json),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Applies `patch` of `kind` to `target`, returning the patched object.
pub fn apply(kind: PatchKind, target: &Value, patch: &Value) -> Result<Value, ApiError> {
    match kind {
        PatchKind::Merge => Ok(merge_patch(target, patch)),
        PatchKind::Json => json_patch(target, patch),
        PatchKind::Strategic | PatchKind::Apply => Ok(strategic_merge(target, patch, "")),
    }
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    let mut doc = target.clone();
    json_patch::merge(&mut doc, patch);
    doc
}

/// RFC 6902 JSON patch (add, remove, replace, move, copy, test). A patch that is not an array
/// of operations is a bad request (400); an operation that cannot apply (a missing path, a
/// failed test) makes the request invalid (422), with upstream's wording.
pub fn json_patch(target: &Value, patch: &Value) -> Result<Value, ApiError> {
    if !patch.is_array() {
        return Err(ApiError::bad_request("json patch must be an array"));
    }
    let ops: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| ApiError::bad_request(format!("invalid json patch: {e}")))?;
    let mut doc = target.clone();
    json_patch::patch(&mut doc, &ops).map_err(|e| {
        let reason = match e.kind {
            json_patch::PatchErrorKind::TestFailed => format!("test failed at {}", e.path),
            _ => format!("doc is missing path: {}", e.path),
        };
        ApiError::invalid(format!(
            "the server rejected our request due to an error in our request: {reason}"
        ))
    })?;
    Ok(doc)
}

/// The merge key of a list field, by field name, for the built-in kinds (from the
/// `patchMergeKey` struct tags in k8s.io/api). `None` → the list is replaced.
pub(crate) fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "containerStatuses"
        | "initContainerStatuses"
        | "resourceClaims"
        | "readinessGates"
        | "hostAliases" => {
            if field == "readinessGates" {
                "conditionType"
            } else if field == "hostAliases" {
                "ip"
            } else {
                "name"
            }
        }
        "ports" => "containerPort",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "conditions" => "type",
        "ownerReferences" => "uid",
        "topologySpreadConstraints" => "topologyKey",
        _ => return None,
    })
}

/// Lists of scalars that strategic merge treats as sets (merged, not replaced).
pub(crate) fn is_set_list(field: &str) -> bool {
    matches!(field, "finalizers")
}

/// Strategic merge of `patch` into `target`; `field` is the name of the field being merged
/// (it selects the list merge key).
pub fn strategic_merge(target: &Value, patch: &Value, field: &str) -> Value {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            if p.get("$patch").and_then(Value::as_str) == Some("replace") {
                let mut p = p.clone();
                p.remove("$patch");
                return Value::Object(p);
            }
            let mut out = t.clone();
            for (k, v) in p {
                if k == "$patch" || k.starts_with("$setElementOrder/") || k == "$retainKeys" {
                    continue;
                }
                if let Some(list_field) = k.strip_prefix("$deleteFromPrimitiveList/") {
                    if let (Some(Value::Array(cur)), Some(del)) =
                        (out.get_mut(list_field), v.as_array())
                    {
                        cur.retain(|x| !del.contains(x));
                    }
                    continue;
                }
                if v.is_null() {
                    out.remove(k);
                    continue;
                }
                let merged = match out.get(k) {
                    Some(cur) => strategic_merge(cur, v, k),
                    None => strip_directives(v),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(t), Value::Array(p)) => {
            if let Some(key) = merge_key(field) {
                merge_keyed_list(t, p, key)
            } else if is_set_list(field) {
                let mut out = t.clone();
                for x in p {
                    if !out.contains(x) {
                        out.push(x.clone());
                    }
                }
                Value::Array(out)
            } else {
                Value::Array(p.iter().map(strip_directives).collect())
            }
        }
        (_, p) => strip_directives(p),
    }
}

fn merge_keyed_list(target: &[Value], patch: &[Value], key: &str) -> Value {
    let mut out: Vec<Value> = target.to_vec();
    for item in patch {
        let Some(k) = item.get(key) else {
            out.push(strip_directives(item));
            continue;
        };
        let pos = out.iter().position(|x| x.get(key) == Some(k));
        let directive = item.get("$patch").and_then(Value::as_str);
        match (pos, directive) {
            (Some(i), Some("delete")) => {
                out.remove(i);
            }
            (None, Some("delete")) => {}
            (Some(i), Some("replace")) => out[i] = strip_directives(item),
            (Some(i), _) => out[i] = strategic_merge(&out[i], item, ""),
            (None, _) => out.push(strip_directives(item)),
        }
    }
    Value::Array(out)
}

/// Removes `$patch`-style directive keys from a value being inserted as is.
fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_rfc7386_examples() {
        // upstream: RFC 7386 appendix A test cases
        assert_eq!(
            merge_patch(&json!({"a": "b"}), &json!({"a": "c"})),
            json!({"a": "c"})
        );
        assert_eq!(
            merge_patch(&json!({"a": "b"}), &json!({"a": null})),
            json!({})
        );
        assert_eq!(
            merge_patch(&json!({"a": [{"b": "c"}]}), &json!({"a": [1]})),
            json!({"a": [1]})
        );
        assert_eq!(
            merge_patch(
                &json!({"a": {"b": "c"}}),
                &json!({"a": {"b": "d", "c": null}})
            ),
            json!({"a": {"b": "d"}})
        );
    }

    #[test]
    fn json_patch_ops() {
        let doc = json!({"spec": {"containers": [{"name": "a"}]}, "metadata": {}});
        let out = json_patch(
            &doc,
            &json!([
                {"op": "add", "path": "/metadata/labels", "value": {"x": "1"}},
                {"op": "add", "path": "/spec/containers/-", "value": {"name": "b"}},
                {"op": "replace", "path": "/spec/containers/0/name", "value": "z"},
                {"op": "test", "path": "/metadata/labels/x", "value": "1"},
            ]),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"spec": {"containers": [{"name": "z"}, {"name": "b"}]}, "metadata": {"labels": {"x": "1"}}})
        );
        assert_eq!(
            json_patch(&doc, &json!([{"op": "remove", "path": "/nope"}]))
                .unwrap_err()
                .code,
            422
        );
        assert!(
            json_patch(
                &doc,
                &json!([{"op": "test", "path": "/metadata", "value": 1}])
            )
            .is_err()
        );
    }

    #[test]
    fn strategic_merge_uses_merge_keys() {
        // upstream: staging/src/k8s.io/apimachinery/pkg/util/strategicpatch/patch_test.go (merging lists by merge key)
        let pod = json!({"spec": {"containers": [
            {"name": "a", "image": "x", "env": [{"name": "E1", "value": "1"}]},
            {"name": "b", "image": "y"}
        ]}, "metadata": {"finalizers": ["f1"]}});
        let patch = json!({"spec": {"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1"}}, "env": [{"name": "E2", "value": "2"}]},
            {"name": "b", "$patch": "delete"},
            {"name": "c", "image": "z"}
        ]}, "metadata": {"finalizers": ["f2"]}});
        let out = strategic_merge(&pod, &patch, "");
        assert_eq!(out["spec"]["containers"].as_array().unwrap().len(), 2);
        assert_eq!(out["spec"]["containers"][0]["image"], "x");
        assert_eq!(
            out["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "1"
        );
        assert_eq!(
            out["spec"]["containers"][0]["env"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert_eq!(out["spec"]["containers"][1]["name"], "c");
        assert_eq!(out["metadata"]["finalizers"], json!(["f1", "f2"]));
        let out = strategic_merge(
            &out,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"]}}),
            "",
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["f2"]));
    }

    #[test]
    fn unknown_lists_are_replaced() {
        let out = strategic_merge(&json!({"args": ["a", "b"]}), &json!({"args": ["c"]}), "");
        assert_eq!(out, json!({"args": ["c"]}));
    }
}
