//! Field ownership for server-side apply (`metadata.managedFields`): which manager owns which
//! field, the conflicts an apply meets, and how an ordinary update moves ownership.
//!
//! As in kube-apiserver: an apply owns exactly the fields its configuration names (entry
//! `operation: Apply`); it conflicts (409, `Apply failed with N conflict(s)…`, one
//! `FieldManagerConflict` cause per field) when it would change the value of a field another
//! manager owns, unless `force` is set, which takes those fields over. Applying the value a
//! field already has shares the field. An update (PUT or a non-apply PATCH) gives its manager
//! (`fieldManager`, else the User-Agent up to its first `/`) the fields it changed and takes
//! them from every other manager (entry `operation: Update`).
//!
//! Field sets use the `FieldsV1` trie (`f:<field>`, `k:<merge key JSON>` for list items keyed
//! by their merge key, `v:<value JSON>` for set lists, `.` for a list item itself); any other
//! list is atomic. Differences from kube-apiserver, which a client can notice:
//! - ownership is tracked only on objects that have been applied at least once (created or
//!   updated otherwise, an object has no managedFields, and its creator owns nothing);
//! - an applier that stops naming a field keeps it in the object (no pruning);
//! - `managedFields` sent in an update body are ignored (a create keeps those it carries).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::patch;

/// One path in a field set: trie keys from the object's root.
pub type FieldPath = Vec<String>;

/// A set of leaf paths.
pub type FieldSet = BTreeSet<FieldPath>;

/// Which part of the object a write may own fields of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The main resource; `status` excluded when the resource has a status subresource.
    Main {
        /// The resource has a status subresource.
        status_subresource: bool,
    },
    /// The status subresource: only `status`.
    Status,
}

impl Scope {
    fn subresource(self) -> &'static str {
        match self {
            Self::Main { .. } => "",
            Self::Status => "status",
        }
    }

    fn keeps(self, path: &FieldPath) -> bool {
        let first = path.first().map_or("", String::as_str);
        match self {
            Self::Main { status_subresource } => !(status_subresource && first == "f:status"),
            Self::Status => first == "f:status",
        }
    }
}

/// Who writes, at which API version and sim time.
#[derive(Debug, Clone, Copy)]
pub struct Writer<'a> {
    /// The field manager.
    pub manager: &'a str,
    /// `apiVersion` of the request (`apps/v1`).
    pub api_version: &'a str,
    /// What the write may own.
    pub scope: Scope,
    /// Sim time, RFC 3339.
    pub time: &'a str,
}

/// The manager name of a non-apply write: `fieldManager`, else the User-Agent's first segment.
pub fn update_manager(field_manager: Option<&str>, user_agent: &str) -> String {
    match field_manager {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => user_agent
            .split('/')
            .next()
            .unwrap_or_default()
            .chars()
            .take(128)
            .collect(),
    }
}

/// Metadata no manager owns (set by the server).
const SYSTEM_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// The leaf fields of `obj` a write in `scope` may own.
pub fn fields_of(obj: &Value, scope: Scope) -> FieldSet {
    let mut out = FieldSet::new();
    if let Value::Object(m) = obj {
        for (k, v) in m {
            if k == "apiVersion" || k == "kind" {
                continue;
            }
            let mut prefix = vec![format!("f:{k}")];
            if k == "metadata"
                && let Value::Object(meta) = v
            {
                for (mk, mv) in meta {
                    if SYSTEM_METADATA.contains(&mk.as_str()) {
                        continue;
                    }
                    prefix.push(format!("f:{mk}"));
                    collect(mv, mk, &mut prefix, &mut out);
                    prefix.pop();
                }
                continue;
            }
            collect(v, k, &mut prefix, &mut out);
        }
    }
    out.retain(|p| scope.keeps(p));
    out
}

fn collect(v: &Value, field: &str, prefix: &mut FieldPath, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                prefix.push(format!("f:{k}"));
                collect(child, k, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => {
            if let Some(key) =
                patch::merge_key(field).filter(|k| items.iter().all(|i| i.get(*k).is_some()))
            {
                for item in items {
                    prefix.push(format!("k:{}", json!({key: item[key]})));
                    prefix.push(".".into());
                    out.insert(prefix.clone());
                    prefix.pop();
                    collect(item, "", prefix, out);
                    prefix.pop();
                }
            } else if patch::is_set_list(field)
                && items.iter().all(|i| !i.is_object() && !i.is_array())
            {
                for item in items {
                    prefix.push(format!("v:{item}"));
                    out.insert(prefix.clone());
                    prefix.pop();
                }
            } else {
                out.insert(prefix.clone());
            }
        }
        _ => {
            out.insert(prefix.clone());
        }
    }
}

/// The value at `path` in `obj` (for a path ending in `.`, the list item itself).
fn value_at<'v>(obj: &'v Value, path: &[String]) -> Option<&'v Value> {
    let mut cur = obj;
    for step in path {
        if step == "." {
            return Some(cur);
        }
        cur = if let Some(f) = step.strip_prefix("f:") {
            cur.get(f)?
        } else if let Some(k) = step.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(k).ok()?;
            cur.as_array()?
                .iter()
                .find(|item| key.iter().all(|(kk, kv)| item.get(kk) == Some(kv)))?
        } else if let Some(v) = step.strip_prefix("v:") {
            let want: Value = serde_json::from_str(v).ok()?;
            cur.as_array()?.iter().find(|x| **x == want)?
        } else {
            return None;
        };
    }
    Some(cur)
}

/// Whether `path` has a different value (or presence) in `a` and `b`.
fn differs(a: &Value, b: &Value, path: &FieldPath) -> bool {
    value_at(a, path) != value_at(b, path)
}

/// A path as kube-apiserver prints it in conflicts: `.spec.containers[name="c"].image`.
pub fn display(path: &FieldPath) -> String {
    let mut out = String::new();
    for step in path {
        if let Some(f) = step.strip_prefix("f:") {
            out.push('.');
            out.push_str(f);
        } else if let Some(k) = step.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let parts: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = write!(out, "[{}]", parts.join(","));
        } else if let Some(v) = step.strip_prefix("v:") {
            let _ = write!(out, "[={v}]");
        }
    }
    out
}

/// The `FieldsV1` trie of a set.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for step in path {
            let child = node
                .entry(step.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            if !child.is_object() {
                *child = Value::Object(Map::new());
            }
            node = match child {
                Value::Object(m) => m,
                // Made an object just above.
                _ => unreachable!("trie nodes are objects"),
            };
        }
    }
    Value::Object(root)
}

/// The set a `FieldsV1` trie describes (every node without children is a leaf).
pub fn from_fields_v1(trie: &Value) -> FieldSet {
    fn walk(node: &Value, prefix: &mut FieldPath, out: &mut FieldSet) {
        match node.as_object() {
            Some(m) if !m.is_empty() => {
                for (k, child) in m {
                    prefix.push(k.clone());
                    walk(child, prefix, out);
                    prefix.pop();
                }
            }
            _ => {
                if !prefix.is_empty() {
                    out.insert(prefix.clone());
                }
            }
        }
    }
    let mut out = FieldSet::new();
    walk(trie, &mut Vec::new(), &mut out);
    out
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    subresource: String,
    fields: FieldSet,
}

impl Entry {
    fn parse(v: &Value) -> Option<Self> {
        let s = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Some(Self {
            manager: v.get("manager")?.as_str()?.to_string(),
            operation: s("operation"),
            api_version: s("apiVersion"),
            time: s("time"),
            subresource: s("subresource"),
            fields: from_fields_v1(v.get("fieldsV1").unwrap_or(&Value::Null)),
        })
    }

    fn to_json(&self) -> Value {
        let mut v = json!({
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(&self.fields),
        });
        if !self.subresource.is_empty() {
            v["subresource"] = json!(self.subresource);
        }
        v
    }

    fn is(&self, manager: &str, operation: &str, subresource: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == subresource
    }

    /// How a conflict names this manager (`"m"`, or `"m" using v1` for an update).
    fn label(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            let _ = write!(s, " with subresource {:?}", self.subresource);
        }
        if self.operation == "Update" {
            let _ = write!(s, " using {}", self.api_version);
            if !self.time.is_empty() {
                let _ = write!(s, " at {}", self.time);
            }
        }
        s
    }
}

fn entries_of(obj: &Value) -> Option<Vec<Entry>> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
        .map(|a| a.iter().filter_map(Entry::parse).collect())
}

fn to_json(entries: &[Entry]) -> Value {
    Value::Array(
        entries
            .iter()
            .filter(|e| !e.fields.is_empty())
            .map(Entry::to_json)
            .collect(),
    )
}

/// The 409 kube-apiserver answers for apply conflicts.
fn conflict_error(conflicts: &[(String, FieldPath)]) -> ApiError {
    let message = if let [(owner, path)] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {owner}: {}",
            display(path)
        )
    } else {
        let owners: BTreeSet<&String> = conflicts.iter().map(|(o, _)| o).collect();
        let mut lines = Vec::new();
        for owner in owners {
            lines.push(format!("conflicts with {owner}:"));
            for (o, path) in conflicts {
                if o == owner {
                    lines.push(format!("- {}", display(path)));
                }
            }
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(owner, path)| {
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with {owner}"), "field": display(path)})
        })
        .collect();
    ApiError::new(409, "Conflict", message).with_details(json!({"causes": causes}))
}

/// The `managedFields` after `writer` applies `config` to `current` (`None`: the object is
/// being created), or the conflicts when another manager owns a field the apply would change
/// and `force` is not set.
pub fn after_apply(
    current: Option<&Value>,
    config: &Value,
    writer: Writer<'_>,
    force: bool,
) -> Result<Value, ApiError> {
    let applied = fields_of(config, writer.scope);
    let mut entries = current.and_then(entries_of).unwrap_or_default();
    if let Some(live) = current {
        let merged = patch::strategic_merge(live, config, "");
        let subresource = writer.scope.subresource();
        let mut conflicts = Vec::new();
        for e in &mut entries {
            if e.is(writer.manager, "Apply", subresource) {
                continue;
            }
            let taken: Vec<FieldPath> = applied
                .iter()
                .filter(|p| e.fields.contains(*p) && differs(live, &merged, p))
                .cloned()
                .collect();
            if force {
                for p in &taken {
                    e.fields.remove(p);
                }
            } else {
                conflicts.extend(taken.into_iter().map(|p| (e.label(), p)));
            }
        }
        if !conflicts.is_empty() {
            return Err(conflict_error(&conflicts));
        }
    }
    let subresource = writer.scope.subresource();
    let mine = Entry {
        manager: writer.manager.to_string(),
        operation: "Apply".into(),
        api_version: writer.api_version.to_string(),
        time: writer.time.to_string(),
        subresource: subresource.to_string(),
        fields: applied,
    };
    match entries
        .iter_mut()
        .find(|e| e.is(writer.manager, "Apply", subresource))
    {
        Some(e) => *e = mine,
        None => entries.push(mine),
    }
    Ok(to_json(&entries))
}

/// The `managedFields` after an update by `writer` turned `current` into `new`: the fields it
/// changed become its own and leave every other manager. `None` when `current` has none
/// (ownership is tracked only once an object has been applied).
pub fn after_update(current: &Value, new: &Value, writer: Writer<'_>) -> Option<Value> {
    let mut entries = entries_of(current)?;
    let candidates: FieldSet = fields_of(new, writer.scope)
        .into_iter()
        .chain(fields_of(current, writer.scope))
        .collect();
    let changed: FieldSet = candidates
        .into_iter()
        .filter(|p| differs(current, new, p))
        .collect();
    if changed.is_empty() {
        return Some(to_json(&entries));
    }
    let subresource = writer.scope.subresource();
    for e in &mut entries {
        if !e.is(writer.manager, "Update", subresource) {
            e.fields.retain(|p| !changed.contains(p));
        }
    }
    let gained: FieldSet = changed
        .into_iter()
        .filter(|p| value_at(new, p).is_some())
        .collect();
    match entries
        .iter_mut()
        .find(|e| e.is(writer.manager, "Update", subresource))
    {
        Some(e) => {
            e.fields.extend(gained);
            e.time = writer.time.to_string();
            e.api_version = writer.api_version.to_string();
        }
        None => entries.push(Entry {
            manager: writer.manager.to_string(),
            operation: "Update".into(),
            api_version: writer.api_version.to_string(),
            time: writer.time.to_string(),
            subresource: subresource.to_string(),
            fields: gained,
        }),
    }
    Some(to_json(&entries))
}

/// `obj` with the times of its `managedFields` removed: a write that changes nothing else is
/// no change (kube-apiserver does not bump resourceVersion for a timestamp alone).
pub fn without_times(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(Value::Array(entries)) = o.pointer_mut("/metadata/managedFields") {
        for e in entries {
            if let Some(m) = e.as_object_mut() {
                m.remove("time");
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAIN: Scope = Scope::Main {
        status_subresource: true,
    };

    fn writer(manager: &str) -> Writer<'_> {
        Writer {
            manager,
            api_version: "v1",
            scope: MAIN,
            time: "2026-01-01T00:00:00Z",
        }
    }

    fn with_managed(mut obj: Value, managed: Value) -> Value {
        obj["metadata"]["managedFields"] = managed;
        obj
    }

    #[test]
    fn field_sets_follow_the_fields_v1_trie() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"app": "a"}, "finalizers": ["x"]},
            "spec": {"containers": [{"name": "c", "image": "i"}], "args": ["a"]},
            "status": {"phase": "Running"}});
        let set = fields_of(&pod, MAIN);
        let trie = to_fields_v1(&set);
        // upstream: the FieldsV1 shape kube-apiserver writes for a Pod
        assert_eq!(
            trie,
            json!({"f:metadata": {"f:labels": {"f:app": {}}, "f:finalizers": {"v:\"x\"": {}}},
                "f:spec": {"f:args": {}, "f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}})
        );
        assert_eq!(from_fields_v1(&trie), set);
        let image = set
            .iter()
            .find(|p| p.last().is_some_and(|s| s == "f:image"))
            .unwrap();
        assert_eq!(display(image), ".spec.containers[name=\"c\"].image");
        assert_eq!(value_at(&pod, image), Some(&json!("i")));
    }

    #[test]
    fn a_second_applier_conflicts_unless_it_forces_or_agrees() {
        let config = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data});
        let created = after_apply(None, &config(json!({"a": "1"})), writer("a"), false).unwrap();
        let live = with_managed(config(json!({"a": "1"})), created);
        // The same value: shared, no conflict.
        let shared =
            after_apply(Some(&live), &config(json!({"a": "1"})), writer("b"), false).unwrap();
        assert_eq!(shared.as_array().unwrap().len(), 2);
        let err =
            after_apply(Some(&live), &config(json!({"a": "2"})), writer("b"), false).unwrap_err();
        assert_eq!(err.code, 409);
        assert_eq!(
            err.message,
            "Apply failed with 1 conflict: conflict with \"a\": .data.a"
        );
        let forced =
            after_apply(Some(&live), &config(json!({"a": "2"})), writer("b"), true).unwrap();
        // `a` lost its only field, so its entry is gone.
        let managers: Vec<&str> = forced
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, ["b"]);
    }

    #[test]
    fn an_update_takes_the_fields_it_changes() {
        let live = json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
        let managed = after_apply(None, &live, writer("a"), false).unwrap();
        let live = with_managed(live, managed);
        let mut new = live.clone();
        new["data"]["a"] = json!("9");
        let managed = after_update(&live, &new, writer("kubectl-edit")).unwrap();
        let entries = managed.as_array().unwrap();
        assert_eq!(entries[0]["fieldsV1"], json!({"f:data": {"f:b": {}}}));
        assert_eq!(entries[1]["operation"], "Update");
        assert_eq!(entries[1]["fieldsV1"], json!({"f:data": {"f:a": {}}}));
        let new = with_managed(new, managed);
        let err =
            after_apply(Some(&new), &json!({"data": {"a": "1"}}), writer("a"), false).unwrap_err();
        assert_eq!(
            err.message,
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1 at 2026-01-01T00:00:00Z: .data.a"
        );
        assert!(
            after_update(
                &json!({"data": {}}),
                &json!({"data": {"a": "1"}}),
                writer("x")
            )
            .is_none()
        );
    }
}
