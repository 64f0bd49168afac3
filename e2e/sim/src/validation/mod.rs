//! Write-time validation of custom resources against their CRD's structural schema, as
//! kube-apiserver's apiextensions strategy does it: unknown fields are pruned, then the OpenAPI
//! v3 shape and bounds are checked (`schema`), then the `x-kubernetes-validations` CEL rules are
//! evaluated (`cel`), and every problem is answered at once as one `422 Invalid`.
//!
//! Invariants: validation only reads the schema of the version the request speaks; a CEL rule is
//! evaluated only when the schema checks found no type error (a real server skips them then and
//! says so); on update, a subtree equal to the stored one is not validated again (CRD validation
//! ratcheting), so an object stored before its CRD gained a rule can still have its status written.

mod cel;
mod field;
mod object_meta;
mod schema;

pub use field::{ErrorKind, FieldError, FieldPath, invalid};

use serde_json::Value;

use crate::error::ApiError;
use crate::registry::ResourceDef;

/// The message a real server adds when type errors kept the CEL rules from running.
const RULES_NOT_CHECKED: &str = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// The `422 Invalid` for `errors` of `obj`, if there are any.
fn refuse(def: &ResourceDef, obj: &Value, errors: &[FieldError]) -> Result<(), ApiError> {
    if errors.is_empty() {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Err(invalid(&def.kind, &def.group, name, errors))
}

/// `fieldValidation=Strict` (what kubectl sends by default): a custom resource carrying fields
/// its schema does not declare is refused with 400, naming every such field, where the default
/// prunes them silently. Built-in resources (no schema) pass.
pub fn refuse_unknown_fields(
    def: &ResourceDef,
    version: &str,
    obj: &Value,
) -> Result<(), ApiError> {
    let Some(root) = schema_of(def, version) else {
        return Ok(());
    };
    let mut pruned = obj.clone();
    schema::prune(root, &mut pruned, true);
    let mut unknown = Vec::new();
    removed_fields(obj, &pruned, "", &mut unknown);
    if unknown.is_empty() {
        return Ok(());
    }
    let fields: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field {f:?}"))
        .collect();
    Err(ApiError::bad_request(format!(
        "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
        fields.join(", "),
        kind = def.kind,
    )))
}

/// The dotted paths (`spec.metrics[0].fooBar`) of the fields of `before` that pruning removed;
/// a `null` that was dropped is not an unknown field.
fn removed_fields(before: &Value, after: &Value, path: &str, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (k, v) in b {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match a.get(k) {
                    Some(kept) => removed_fields(v, kept, &p, out),
                    None if !v.is_null() => out.push(p),
                    None => {}
                }
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            for (i, (v, kept)) in b.iter().zip(a).enumerate() {
                removed_fields(v, kept, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Validates an object about to be stored, as kube-apiserver's strategies do, and answers
/// every problem at once as one `422 Invalid`: its metadata (`object_meta`; `metadata` is false
/// for a write to a subresource, which keeps the stored metadata), then, for a custom resource,
/// its schema and rules after pruning (`old` is the stored object on update). A custom resource
/// with both kinds of error hears of both, metadata first, as from a real server.
pub fn check_write(
    def: &ResourceDef,
    version: &str,
    obj: &mut Value,
    old: Option<&Value>,
    metadata: bool,
) -> Result<(), ApiError> {
    let mut errors = if metadata {
        object_meta::errors(obj)
    } else {
        Vec::new()
    };
    if let Some(root) = schema_of(def, version) {
        errors.extend(prune_and_validate(root, obj, old));
    }
    refuse(def, obj, &errors)
}

/// The schema a custom resource is checked against in `version` (a request in a version the
/// CRD does not list falls back to its first); `None` for a built-in resource.
fn schema_of<'d>(def: &'d ResourceDef, version: &str) -> Option<&'d Value> {
    def.schemas
        .get(version)
        .or_else(|| def.schemas.values().next())
}

/// What a write does to a custom resource under its version's schema `root`: prunes `obj`, then
/// returns every schema and rule error.
pub fn prune_and_validate(root: &Value, obj: &mut Value, old: Option<&Value>) -> Vec<FieldError> {
    schema::prune(root, obj, true);
    validate(root, obj, old)
}

/// Every schema and rule error of `obj` (already pruned) against `root`.
pub fn validate(root: &Value, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    schema::validate(root, obj, old, &FieldPath::root(), &mut errors);
    if errors.iter().any(|e| e.kind == ErrorKind::TypeInvalid) {
        errors.push(FieldError::new(
            ErrorKind::Invalid,
            FieldPath::nil(),
            Some(Value::Null),
            RULES_NOT_CHECKED,
        ));
    } else {
        cel::validate(root, obj, old, &FieldPath::root(), &mut errors);
    }
    errors
}

#[cfg(test)]
mod tests;
