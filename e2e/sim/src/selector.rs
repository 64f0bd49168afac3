//! Label and field selectors as the sim's API serves them: the query-string syntax
//! (`app=web,tier in (a,b),!legacy`) and the structured `metav1.LabelSelector`
//! (`matchLabels` + `matchExpressions`), matched against objects held as JSON. Parsing and
//! matching of labels is core's ([`plimsoll_core::selector`], the one the services use); the sim
//! adds only reading labels out of JSON, `null` selectors, and field selectors. An empty selector
//! matches everything; a structured selector that is JSON `null` matches nothing (as for a PDB or
//! webhook with no selector set the caller decides).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as ApiLabelSelector;
use plimsoll_core::selector::Selector;
use serde_json::{Map, Value};

use crate::error::ApiError;

/// The `labelSelector` and `fieldSelector` of a list, watch or deletecollection request: an
/// object is selected when it satisfies both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selectors {
    /// The label selector.
    pub labels: LabelSelector,
    /// The field selector.
    pub fields: FieldSelector,
}

impl Selectors {
    /// Parses both query-string forms ("" selects everything); 400 when either does not parse.
    pub fn parse(labels: &str, fields: &str) -> Result<Self, ApiError> {
        Ok(Self {
            labels: LabelSelector::parse(labels)?,
            fields: FieldSelector::parse(fields)?,
        })
    }

    /// Whether neither selector says anything (every object matches).
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    /// Whether the object satisfies both selectors.
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches_object(obj) && self.fields.matches(obj)
    }
}

/// A parsed label selector: all requirements must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    selector: Selector,
    /// The query-string form, as written for a structured selector (see [`Self::to_query`]).
    query: String,
}

impl LabelSelector {
    /// Parses the query-string form (a `labelSelector` parameter); 400 when it does not parse.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        Selector::parse(s)
            .map(|selector| Self {
                query: selector.to_string(),
                selector,
            })
            .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))
    }

    /// Converts a structured `metav1.LabelSelector`. `null` → `None` (matches nothing); 422 when
    /// it is malformed or uses an unknown operator.
    pub fn from_structured(v: &Value) -> Result<Option<Self>, ApiError> {
        if !v.is_object() {
            return Ok(None);
        }
        let structured: ApiLabelSelector = serde_json::from_value(v.clone())
            .map_err(|e| ApiError::invalid(format!("invalid label selector: {e}")))?;
        let selector = Selector::from_label_selector(&structured)
            .map_err(|e| ApiError::invalid(e.to_string()))?;
        Ok(Some(Self {
            selector,
            query: format_structured(&structured),
        }))
    }

    /// True when the selector has no requirements.
    pub fn is_empty(&self) -> bool {
        self.selector.is_empty()
    }

    /// Whether `labels` (a JSON object of strings, or null) satisfies every requirement; a label
    /// whose value is not a string counts as absent.
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.selector
            .matches_with(|key| labels.and_then(|l| l.get(key)).and_then(Value::as_str))
    }

    /// Whether the object's `metadata.labels` satisfy the selector.
    pub fn matches_object(&self, obj: &Value) -> bool {
        self.is_empty() || self.matches(obj.pointer("/metadata/labels").and_then(Value::as_object))
    }

    /// The query-string form (what `status.selector` of a scale subresource holds). For a
    /// structured selector it is written as upstream's `FormatLabelSelector` does: `matchLabels`
    /// as `key=value`, then each expression in order as `key in (a,b)`, `key notin (a)`, `key`,
    /// `!key`.
    pub fn to_query(&self) -> String {
        self.query.clone()
    }
}

fn format_structured(selector: &ApiLabelSelector) -> String {
    let labels = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"));
    let expressions = selector.match_expressions.iter().flatten().map(|e| {
        let (key, values) = (&e.key, e.values.as_deref().unwrap_or_default().join(","));
        match e.operator.as_str() {
            "In" => format!("{key} in ({values})"),
            "NotIn" => format!("{key} notin ({values})"),
            "DoesNotExist" => format!("!{key}"),
            _ => key.clone(),
        }
    });
    labels.chain(expressions).collect::<Vec<_>>().join(",")
}

/// A field selector: `path=value`, `path==value`, `path!=value`, comma-separated, `ANDed`.
/// Paths are dotted JSON paths (`metadata.name`, `status.phase`, `spec.nodeName`,
/// `involvedObject.uid`); a missing field compares as the empty string, as upstream does
/// for the fields it supports. A kind whose labels are not JSON paths maps them with
/// [`Self::convert_labels`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

/// One `label=value` or `label!=value` requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    /// The JSON paths the label reads; the first non-empty value is the field's value.
    paths: Vec<String>,
    /// `=` / `==` (true) or `!=` (false).
    equals: bool,
    /// The value compared with.
    value: String,
}

impl FieldSelector {
    /// Parses the query-string form.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (path, equals, value) = if let Some((k, v)) = term.split_once("!=") {
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
            terms.push(FieldTerm {
                paths: vec![path.trim().to_string()],
                equals,
                value: value.trim().to_string(),
            });
        }
        Ok(Self { terms })
    }

    /// True when the selector has no terms.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Replaces each term's label (as written in the query) by the JSON paths `f` says it reads
    /// (the first non-empty one counts); an error from `f` (an unsupported label) is returned.
    pub fn convert_labels<F>(self, f: F) -> Result<Self, ApiError>
    where
        F: Fn(&str) -> Result<Vec<String>, ApiError>,
    {
        let terms = self
            .terms
            .into_iter()
            .map(|t| {
                let label = t.paths.first().map_or("", String::as_str);
                Ok(FieldTerm {
                    paths: f(label)?,
                    ..t
                })
            })
            .collect::<Result<_, ApiError>>()?;
        Ok(Self { terms })
    }

    /// Whether the object satisfies every term.
    pub fn matches(&self, obj: &Value) -> bool {
        self.terms.iter().all(|t| {
            let actual = t
                .paths
                .iter()
                .map(|p| field_value(obj, p))
                .find(|v| !v.is_empty())
                .unwrap_or_default();
            (actual == t.value) == t.equals
        })
    }
}

/// The value at a dotted JSON path as a field selector compares it ("" when absent or null).
fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for seg in path.split('.') {
        match cur.get(seg) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
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
    fn request_selectors_need_both() {
        let pod = json!({"metadata": {"name": "a", "labels": {"app": "web"}}, "status": {"phase": "Running"}});
        assert!(Selectors::default().matches(&pod));
        assert!(Selectors::parse("", "").unwrap().matches(&pod));
        assert!(
            Selectors::parse("app=web", "status.phase=Running")
                .unwrap()
                .matches(&pod)
        );
        assert!(
            !Selectors::parse("app=web", "status.phase=Pending")
                .unwrap()
                .matches(&pod)
        );
        assert!(
            !Selectors::parse("app=db", "status.phase=Running")
                .unwrap()
                .matches(&pod)
        );
        assert_eq!(Selectors::parse("", "phase").unwrap_err().code, 400);
        assert_eq!(Selectors::parse("app in (", "").unwrap_err().code, 400);
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
