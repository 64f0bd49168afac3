//! Label and field selectors, in both forms the API uses: the query-string syntax
//! (`app=web,tier in (a,b),!legacy`) and the structured `metav1.LabelSelector`
//! (`matchLabels` + `matchExpressions`). An empty selector matches everything; a structured
//! selector that is JSON `null` matches nothing (as for a PDB or webhook with no selector set
//! the caller decides).

use serde_json::{Map, Value};

use crate::error::ApiError;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value`, `key==value`.
    Eq(String, String),
    /// `key!=value` (also true when the key is absent).
    NotEq(String, String),
    /// `key in (a,b)`.
    In(String, Vec<String>),
    /// `key notin (a,b)` (also true when the key is absent).
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
}

/// A parsed label selector: all requirements must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// The requirements, `ANDed`.
    pub requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses the query-string form.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for term in split_terms(s) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            requirements.push(parse_term(term)?);
        }
        Ok(Self { requirements })
    }

    /// Converts a structured `metav1.LabelSelector`. `null` → `None` (matches nothing).
    pub fn from_structured(v: &Value) -> Result<Option<Self>, ApiError> {
        let Some(obj) = v.as_object() else {
            return Ok(None);
        };
        let mut requirements = Vec::new();
        if let Some(ml) = obj.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in ml {
                requirements.push(Requirement::Eq(
                    k.clone(),
                    v.as_str().unwrap_or_default().to_string(),
                ));
            }
        }
        if let Some(exprs) = obj.get("matchExpressions").and_then(Value::as_array) {
            for e in exprs {
                let key = e
                    .get("key")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let values: Vec<String> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                let op = e
                    .get("operator")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                requirements.push(match op {
                    "In" => Requirement::In(key, values),
                    "NotIn" => Requirement::NotIn(key, values),
                    "Exists" => Requirement::Exists(key),
                    "DoesNotExist" => Requirement::DoesNotExist(key),
                    other => {
                        return Err(ApiError::invalid(format!(
                            "invalid label selector operator {other:?}"
                        )));
                    }
                });
            }
        }
        Ok(Some(Self { requirements }))
    }

    /// True when the selector has no requirements.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `labels` (a JSON object of strings, or null) satisfies every requirement.
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.requirements.iter().all(|r| match r {
            Requirement::Eq(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEq(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        })
    }

    /// Whether the object's `metadata.labels` satisfy the selector.
    pub fn matches_object(&self, obj: &Value) -> bool {
        self.is_empty() || self.matches(obj.pointer("/metadata/labels").and_then(Value::as_object))
    }

    /// The query-string form (what `status.selector` of a scale subresource holds).
    pub fn to_query(&self) -> String {
        self.requirements
            .iter()
            .map(|r| match r {
                Requirement::Eq(k, v) => format!("{k}={v}"),
                Requirement::NotEq(k, v) => format!("{k}!={v}"),
                Requirement::In(k, vs) => format!("{k} in ({})", vs.join(",")),
                Requirement::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
                Requirement::Exists(k) => k.clone(),
                Requirement::DoesNotExist(k) => format!("!{k}"),
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Splits on commas that are not inside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_term(term: &str) -> Result<Requirement, ApiError> {
    let bad = || {
        ApiError::bad_request(format!(
            "unable to parse requirement: invalid label selector {term:?}"
        ))
    };
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(key.trim().to_string()));
    }
    for (op, notin) in [(" notin ", true), (" in ", false)] {
        if let Some(pos) = term.find(op) {
            let key = term[..pos].trim().to_string();
            let rest = term[pos + op.len()..].trim();
            let inner = rest
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(bad)?;
            let values = inner
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect();
            return Ok(if notin {
                Requirement::NotIn(key, values)
            } else {
                Requirement::In(key, values)
            });
        }
    }
    if let Some((k, v)) = term.split_once("!=") {
        return Ok(Requirement::NotEq(
            k.trim().to_string(),
            v.trim().to_string(),
        ));
    }
    if let Some((k, v)) = term.split_once("==") {
        return Ok(Requirement::Eq(k.trim().to_string(), v.trim().to_string()));
    }
    if let Some((k, v)) = term.split_once('=') {
        return Ok(Requirement::Eq(k.trim().to_string(), v.trim().to_string()));
    }
    if term.contains(|c: char| c.is_whitespace() || c == '(' || c == ')') {
        return Err(bad());
    }
    Ok(Requirement::Exists(term.to_string()))
}

/// A field selector: `path=value`, `path==value`, `path!=value`, comma-separated, `ANDed`.
/// Paths are dotted JSON paths (`metadata.name`, `status.phase`, `spec.nodeName`,
/// `involvedObject.uid`); a missing field compares as the empty string, as upstream does
/// for the fields it supports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses the query-string form.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (path, eq, value) = if let Some((k, v)) = term.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = term.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = term.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                )));
            };
            terms.push((path.trim().to_string(), eq, value.trim().to_string()));
        }
        Ok(Self { terms })
    }

    /// True when the selector has no terms.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether the object satisfies every term.
    pub fn matches(&self, obj: &Value) -> bool {
        self.terms.iter().all(|(path, eq, value)| {
            let mut cur = obj;
            let mut found = true;
            for seg in path.split('.') {
                if let Some(v) = cur.get(seg) {
                    cur = v;
                } else {
                    found = false;
                    break;
                }
            }
            let actual = if found {
                match cur {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                }
            } else {
                String::new()
            };
            (actual == *value) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: &Value) -> Option<&Map<String, Value>> {
        v.as_object()
    }

    #[test]
    fn query_selectors() {
        // upstream: staging/src/k8s.io/apimachinery/pkg/labels/selector_test.go TestSelectorMatches
        let l = json!({"app": "web", "tier": "front"});
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app!=db", true),
            ("tier in (front,back)", true),
            ("tier notin (front)", false),
            ("missing notin (x)", true),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("app=web,tier in (back)", false),
            ("app=web, tier in (front, back)", true),
        ];
        for (sel, want) in cases {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(labels(&l)),
                want,
                "{sel}"
            );
        }
        assert!(LabelSelector::parse("a in b").is_err());
    }

    #[test]
    fn structured_selectors() {
        let sel = LabelSelector::from_structured(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]
        }))
        .unwrap()
        .unwrap();
        assert!(sel.matches(labels(&json!({"app": "web"}))));
        assert!(!sel.matches(labels(&json!({"app": "web", "tier": "db"}))));
        assert_eq!(sel.to_query(), "app=web,tier notin (db)");
        assert!(
            LabelSelector::from_structured(&Value::Null)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn field_selectors() {
        let pod =
            json!({"metadata": {"name": "a", "namespace": "ns"}, "status": {"phase": "Running"}});
        assert!(
            FieldSelector::parse("metadata.name=a")
                .unwrap()
                .matches(&pod)
        );
        assert!(
            FieldSelector::parse("status.phase!=Pending,metadata.namespace==ns")
                .unwrap()
                .matches(&pod)
        );
        assert!(
            FieldSelector::parse("spec.nodeName=")
                .unwrap()
                .matches(&pod)
        );
        assert!(
            !FieldSelector::parse("spec.nodeName=n1")
                .unwrap()
                .matches(&pod)
        );
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
