//! Events: one store served under two API groups, as kube-apiserver does. An Event is stored
//! once, in its `core/v1` shape, under the core key; `events.k8s.io/v1` reads and writes the
//! same objects (same names, uids and resourceVersions) through the field mapping of upstream's
//! `pkg/apis/events/v1` conversion:
//!
//! | `events.k8s.io/v1`          | `core/v1`            |
//! |-----------------------------|----------------------|
//! | `regarding`                 | `involvedObject`     |
//! | `note`                      | `message`            |
//! | `deprecatedCount`           | `count`              |
//! | `deprecatedFirstTimestamp`  | `firstTimestamp`     |
//! | `deprecatedLastTimestamp`   | `lastTimestamp`      |
//! | `deprecatedSource`          | `source`             |
//! | `reportingController`       | `reportingComponent` |
//!
//! and `eventTime`, `series` (count, lastObservedTime), `related`, `action`, `reason`, `type`,
//! `reportingInstance` unchanged. A field that exists only under the other group's name is
//! unknown to the group a request speaks, so it is dropped, as a real server drops unknown
//! fields.
//!
//! Field selectors follow upstream too: `core/v1` accepts the labels of its
//! `AddFieldLabelConversionsForEvent`, `events.k8s.io/v1` its own names mapped onto them; any
//! other label is a 400 `field label not supported: <label>`.

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::registry::{ResourceDef, ResourceKey};
use crate::selector::FieldSelector;

/// The group of the newer Events API.
const EVENTS_GROUP: &str = "events.k8s.io";

/// (`events.k8s.io/v1` name, `core/v1` name) of every field the two shapes name differently.
const RENAMES: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedCount", "count"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedSource", "source"),
    ("reportingController", "reportingComponent"),
];

/// Whether `def` is the `events.k8s.io` resource (stored under the core one).
pub fn is_events_api(def: &ResourceDef) -> bool {
    def.group == EVENTS_GROUP && def.plural == "events"
}

/// Whether `def` is the core `events` resource.
fn is_core_events(def: &ResourceDef) -> bool {
    def.group.is_empty() && def.plural == "events"
}

/// Where `def`'s objects are stored: the core Event table for both Event groups, else the
/// resource's own (group, plural).
pub fn storage_key(def: &ResourceDef) -> ResourceKey {
    if is_events_api(def) {
        (String::new(), "events".into())
    } else {
        (def.group.clone(), def.plural.clone())
    }
}

/// Whether objects of `def` are read in a shape other than the stored one.
pub fn converts(def: &ResourceDef) -> bool {
    is_events_api(def)
}

/// The stored form of an object a request wrote through `def` (unchanged for every resource
/// but `events.k8s.io` Events, which become `core/v1` ones).
pub fn to_storage(def: &ResourceDef, obj: Value) -> Value {
    if is_events_api(def) {
        to_core(&obj)
    } else {
        obj
    }
}

/// A stored object as a request through `def` sees it (`None`: as stored).
pub fn present(def: &ResourceDef, obj: &Value) -> Option<Value> {
    is_events_api(def).then(|| to_events_api(obj))
}

/// Renames the fields of `obj` from one shape to the other: `pairs` are (from, to).
fn rename<'a>(
    obj: &Value,
    pairs: impl Iterator<Item = (&'a str, &'a str)> + Clone,
) -> Map<String, Value> {
    let mut out = obj.as_object().cloned().unwrap_or_default();
    for (_, to) in pairs.clone() {
        out.remove(to);
    }
    for (from, to) in pairs {
        if let Some(v) = out.remove(from) {
            out.insert(to.to_string(), v);
        }
    }
    out
}

/// Fills the fields a real server always writes for the shape (Go structs and non-`omitempty`
/// strings are never omitted; a zero `metav1.Time` is `null`).
fn fill(out: &mut Map<String, Value>, fields: &[(&str, Value)]) {
    for (name, zero) in fields {
        out.entry(*name).or_insert_with(|| zero.clone());
    }
}

/// An `events.k8s.io/v1` Event in its `core/v1` shape.
pub fn to_core(obj: &Value) -> Value {
    let mut out = rename(obj, RENAMES.iter().copied());
    out.insert("apiVersion".into(), json!("v1"));
    out.insert("kind".into(), json!("Event"));
    drop_zero_count(&mut out, "count");
    fill(
        &mut out,
        &[
            ("involvedObject", json!({})),
            ("source", json!({})),
            ("firstTimestamp", Value::Null),
            ("lastTimestamp", Value::Null),
            ("eventTime", Value::Null),
            ("reportingComponent", json!("")),
            ("reportingInstance", json!("")),
        ],
    );
    Value::Object(out)
}

/// A `core/v1` Event in its `events.k8s.io/v1` shape.
pub fn to_events_api(obj: &Value) -> Value {
    let mut out = rename(obj, RENAMES.iter().map(|&(new, old)| (old, new)));
    out.insert("apiVersion".into(), json!(format!("{EVENTS_GROUP}/v1")));
    out.insert("kind".into(), json!("Event"));
    drop_zero_count(&mut out, "deprecatedCount");
    // `reportingController` and `reportingInstance` are `omitempty` here, not in core/v1.
    for f in ["reportingController", "reportingInstance"] {
        if out
            .get(f)
            .is_some_and(|v| v.as_str().is_none_or(str::is_empty))
        {
            out.remove(f);
        }
    }
    fill(
        &mut out,
        &[
            ("regarding", json!({})),
            ("deprecatedSource", json!({})),
            ("deprecatedFirstTimestamp", Value::Null),
            ("deprecatedLastTimestamp", Value::Null),
            ("eventTime", Value::Null),
        ],
    );
    Value::Object(out)
}

/// A count of zero is the Go zero value of an `omitempty` integer: not written.
fn drop_zero_count(out: &mut Map<String, Value>, field: &str) {
    if out
        .get(field)
        .is_some_and(|v| v.is_null() || v.as_i64() == Some(0))
    {
        out.remove(field);
    }
}

/// The field selector labels `core/v1` Events accept (upstream
/// `AddFieldLabelConversionsForEvent`), each with the stored JSON paths it reads; the first
/// non-empty one is the value. `source` is the source component, else the reporting controller,
/// as upstream's `ToSelectableFields`.
const CORE_LABELS: &[(&str, &[&str])] = &[
    ("involvedObject.kind", &["involvedObject.kind"]),
    ("involvedObject.namespace", &["involvedObject.namespace"]),
    ("involvedObject.name", &["involvedObject.name"]),
    ("involvedObject.uid", &["involvedObject.uid"]),
    ("involvedObject.apiVersion", &["involvedObject.apiVersion"]),
    (
        "involvedObject.resourceVersion",
        &["involvedObject.resourceVersion"],
    ),
    ("involvedObject.fieldPath", &["involvedObject.fieldPath"]),
    ("reason", &["reason"]),
    ("reportingComponent", &["reportingComponent"]),
    ("source", &["source.component", "reportingComponent"]),
    ("type", &["type"]),
    ("metadata.namespace", &["metadata.namespace"]),
    ("metadata.name", &["metadata.name"]),
];

/// The `events.k8s.io/v1` labels that are named differently from their `core/v1` label
/// (upstream `pkg/apis/events/v1` `AddFieldLabelConversionsForEvent`); `reason`, `source`,
/// `type` and `metadata.*` keep their names.
const EVENTS_API_LABELS: &[(&str, &str)] = &[
    ("regarding.kind", "involvedObject.kind"),
    ("regarding.namespace", "involvedObject.namespace"),
    ("regarding.name", "involvedObject.name"),
    ("regarding.uid", "involvedObject.uid"),
    ("regarding.apiVersion", "involvedObject.apiVersion"),
    (
        "regarding.resourceVersion",
        "involvedObject.resourceVersion",
    ),
    ("regarding.fieldPath", "involvedObject.fieldPath"),
    ("reportingController", "reportingComponent"),
];

/// The stored paths a `core/v1` label reads, or `None` when the label is not supported.
fn core_paths(label: &str) -> Option<Vec<String>> {
    CORE_LABELS
        .iter()
        .find(|(l, _)| *l == label)
        .map(|(_, paths)| paths.iter().map(|p| (*p).to_string()).collect())
}

/// The stored paths an `events.k8s.io/v1` label reads.
fn events_api_paths(label: &str) -> Option<Vec<String>> {
    if let Some((_, core)) = EVENTS_API_LABELS.iter().find(|(l, _)| *l == label) {
        return core_paths(core);
    }
    match label {
        "reason" | "source" | "type" | "metadata.namespace" | "metadata.name" => core_paths(label),
        _ => None,
    }
}

/// Checks and maps the field selector of a request on `def` onto the stored objects; every
/// other resource's selector is returned as it is.
pub fn field_selector(def: &ResourceDef, fields: FieldSelector) -> Result<FieldSelector, ApiError> {
    let paths: fn(&str) -> Option<Vec<String>> = if is_events_api(def) {
        events_api_paths
    } else if is_core_events(def) {
        core_paths
    } else {
        return Ok(fields);
    };
    fields.convert_labels(|label| {
        paths(label)
            .ok_or_else(|| ApiError::bad_request(format!("field label not supported: {label}")))
    })
}

/// One failed check, as upstream's `field.Error`: the field path, the cause reason and the text
/// after the path.
struct FieldError {
    field: &'static str,
    reason: &'static str,
    body: String,
}

impl FieldError {
    fn required(field: &'static str) -> Self {
        Self {
            field,
            reason: "FieldValueRequired",
            body: "Required value".into(),
        }
    }

    /// `field.Invalid(path, value, detail)`; upstream passes "" as the value for most Event checks.
    fn invalid(field: &'static str, value: &Value, detail: &str) -> Self {
        let shown = match value {
            Value::String(s) => format!("{s:?}"),
            Value::Null => "\"\"".into(),
            other => other.to_string(),
        };
        Self {
            field,
            reason: "FieldValueInvalid",
            body: format!("Invalid value: {shown}: {detail}"),
        }
    }
}

/// Upstream's limits on the newer API's fields (`pkg/apis/core/validation/events.go`).
const REPORTING_INSTANCE_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;

/// A field's value with Go's zero values (absent, null, "", {}, 0) all as `null`, so stored and
/// written forms compare as the typed objects upstream compares would.
fn field(obj: &Value, path: &str) -> Value {
    match obj.pointer(path) {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(s)) if s.is_empty() => Value::Null,
        Some(Value::Object(m)) if m.values().all(Value::is_null) => Value::Null,
        Some(Value::Number(n)) if n.as_i64() == Some(0) => Value::Null,
        Some(v) => v.clone(),
    }
}

fn text(obj: &Value, path: &str) -> String {
    obj.pointer(path)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// `validation.IsQualifiedName` for the common case of a name without a prefix.
fn qualified_name_error(name: &str) -> Option<&'static str> {
    let (_, local) = name.rsplit_once('/').unwrap_or(("", name));
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let ends_ok = local.starts_with(|c: char| c.is_ascii_alphanumeric())
        && local.ends_with(|c: char| c.is_ascii_alphanumeric());
    if local.len() > 63 {
        Some("name part must be no more than 63 characters")
    } else if !(ends_ok && local.chars().all(ok_char)) {
        Some(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        )
    } else {
        None
    }
}

/// upstream `legacyValidateEvent`: what every Event must satisfy whichever group wrote it.
/// An Event of the newer API (with `eventTime`) must name its reporter, action and reason.
fn legacy_errors(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ns = text(obj, "/metadata/namespace");
    let involved_ns = text(obj, "/involvedObject/namespace");
    let mismatch = || {
        FieldError::invalid(
            "involvedObject.namespace",
            &json!(involved_ns),
            "does not match event.namespace",
        )
    };
    if field(obj, "/eventTime").is_null() {
        let agrees = if involved_ns.is_empty() {
            ns.is_empty() || ns == "default"
        } else {
            ns == involved_ns
        };
        if !agrees {
            errs.push(mismatch());
        }
        return errs;
    }
    if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
        errs.push(mismatch());
    }
    let controller = text(obj, "/reportingComponent");
    if controller.is_empty() {
        errs.push(FieldError::required("reportingController"));
    } else if let Some(msg) = qualified_name_error(&controller) {
        errs.push(FieldError::invalid(
            "reportingController",
            &json!(controller),
            msg,
        ));
    }
    let limited: [(&'static str, &str, usize); 4] = [
        (
            "reportingInstance",
            "/reportingInstance",
            REPORTING_INSTANCE_LIMIT,
        ),
        ("action", "/action", ACTION_LIMIT),
        ("reason", "/reason", REASON_LIMIT),
        ("message", "/message", NOTE_LIMIT),
    ];
    for (name, path, limit) in limited {
        let v = text(obj, path);
        if v.is_empty() && name != "message" {
            errs.push(FieldError::required(name));
        } else if v.chars().count() > limit {
            errs.push(FieldError::invalid(
                name,
                &Value::Null,
                &format!("can have at most {limit} characters"),
            ));
        }
    }
    errs
}

/// upstream `validateV1EventSeries`.
fn series_errors(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if obj.get("series").is_some_and(Value::is_object) {
        if obj
            .pointer("/series/count")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            < 2
        {
            errs.push(FieldError::invalid(
                "series.count",
                &Value::Null,
                "should be at least 2",
            ));
        }
        if field(obj, "/series/lastObservedTime").is_null() {
            errs.push(FieldError::required("series.lastObservedTime"));
        }
    }
    errs
}

/// The strict checks of a create through `events.k8s.io/v1` (upstream `ValidateEventCreate`):
/// `eventTime` set, a known type, and none of the deprecated fields.
fn strict_create_errors(obj: &Value) -> Vec<FieldError> {
    let mut errs = series_errors(obj);
    if field(obj, "/eventTime").is_null() {
        errs.push(FieldError::required("eventTime"));
    }
    let type_ = text(obj, "/type");
    if type_ != "Normal" && type_ != "Warning" {
        errs.push(FieldError::invalid(
            "type",
            &Value::Null,
            &format!("has invalid value: {type_}"),
        ));
    }
    for (name, path) in [
        ("firstTimestamp", "/firstTimestamp"),
        ("lastTimestamp", "/lastTimestamp"),
        ("count", "/count"),
        ("source", "/source"),
    ] {
        if !field(obj, path).is_null() {
            errs.push(FieldError::invalid(name, &Value::Null, "needs to be unset"));
        }
    }
    errs
}

/// The strict checks of an update through `events.k8s.io/v1` (upstream `ValidateEventUpdate`):
/// a changed series must be valid, and everything but the series is immutable.
fn strict_update_errors(obj: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if field(obj, "/series") != field(old, "/series") {
        errs.extend(series_errors(obj));
    }
    let immutable: [(&'static str, &str); 13] = [
        ("involvedObject", "/involvedObject"),
        ("reason", "/reason"),
        ("message", "/message"),
        ("source", "/source"),
        ("firstTimestamp", "/firstTimestamp"),
        ("lastTimestamp", "/lastTimestamp"),
        ("count", "/count"),
        ("type", "/type"),
        ("eventTime", "/eventTime"),
        ("action", "/action"),
        ("related", "/related"),
        ("reportingController", "/reportingComponent"),
        ("reportingInstance", "/reportingInstance"),
    ];
    for (name, path) in immutable {
        let new = field(obj, path);
        if new != field(old, path) {
            errs.push(FieldError::invalid(name, &new, "field is immutable"));
        }
    }
    errs
}

/// Validates an Event written through `def` (stored shape `obj`; `old` on update), as
/// kube-apiserver's Event strategy does: every write passes the legacy checks, and writes
/// through `events.k8s.io/v1` the strict ones too. 422 naming every failed field; other
/// resources pass.
pub fn validate(def: &ResourceDef, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
    if !is_core_events(def) && !is_events_api(def) {
        return Ok(());
    }
    let mut errs = legacy_errors(obj);
    if is_events_api(def) {
        errs.extend(match old {
            None => strict_create_errors(obj),
            Some(old) => strict_update_errors(obj, old),
        });
    }
    if errs.is_empty() {
        return Ok(());
    }
    let name = text(obj, "/metadata/name");
    let lines: Vec<String> = errs
        .iter()
        .map(|e| format!("{}: {}", e.field, e.body))
        .collect();
    let joined = if lines.len() == 1 {
        lines.join("")
    } else {
        format!("[{}]", lines.join(", "))
    };
    let causes: Vec<Value> = errs
        .iter()
        .map(|e| json!({"reason": e.reason, "message": e.body, "field": e.field}))
        .collect();
    // The strategy validates the internal (core) Event, so the error names the core kind.
    Err(
        ApiError::invalid(format!("Event \"{name}\" is invalid: {joined}"))
            .with_details(json!({"name": name, "kind": "Event", "causes": causes})),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    /// What kube-runtime's `Recorder` posts (crates/runtime/src/events.rs), with a series.
    fn recorded() -> Value {
        json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "web.1", "namespace": "shop"},
            "eventTime": "2026-11-21T10:00:00.000000Z",
            "regarding": {"kind": "Deployment", "name": "web", "namespace": "shop", "uid": "u1", "apiVersion": "apps/v1"},
            "note": "scaled to 3", "reason": "SuccessfulRescale", "action": "Scale", "type": "Normal",
            "reportingController": "hpa-plus", "reportingInstance": "hpa-plus-0",
            "series": {"count": 2, "lastObservedTime": "2026-11-21T10:01:00.000000Z"},
            "related": {"kind": "Pod", "name": "p"},
        })
    }

    #[test]
    fn events_api_maps_onto_core_fields() {
        // upstream: pkg/apis/events/v1/conversion_test.go TestEventConversion
        let core = to_core(&recorded());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "web");
        assert_eq!(core["message"], "scaled to 3");
        assert_eq!(core["reportingComponent"], "hpa-plus");
        assert_eq!(core["reportingInstance"], "hpa-plus-0");
        assert_eq!(core["series"]["count"], 2);
        assert_eq!(core["related"]["name"], "p");
        assert_eq!(core["action"], "Scale");
        assert_eq!(core["firstTimestamp"], Value::Null);
        assert_eq!(core["source"], json!({}));
        assert!(core.get("count").is_none(), "a zero count is omitted");
        for gone in [
            "regarding",
            "note",
            "reportingController",
            "deprecatedSource",
        ] {
            assert!(core.get(gone).is_none(), "{gone}");
        }
    }

    #[test]
    fn conversion_round_trips() {
        let back = to_events_api(&to_core(&recorded()));
        let mut want = recorded();
        want["deprecatedSource"] = json!({});
        want["deprecatedFirstTimestamp"] = Value::Null;
        want["deprecatedLastTimestamp"] = Value::Null;
        assert_eq!(back, want);

        let legacy = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
            "involvedObject": {"kind": "Pod", "name": "p"}, "message": "m", "count": 4,
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:01:00Z",
            "source": {"component": "kubelet", "host": "n1"}, "reportingComponent": "", "reportingInstance": ""});
        let new = to_events_api(&legacy);
        assert_eq!(new["deprecatedCount"], 4);
        assert_eq!(new["deprecatedSource"]["component"], "kubelet");
        assert_eq!(new["deprecatedLastTimestamp"], "2026-01-01T00:01:00Z");
        assert_eq!(new["eventTime"], Value::Null);
        assert!(new.get("reportingController").is_none());
        assert_eq!(to_core(&new), legacy_with_event_time(legacy));
    }

    fn legacy_with_event_time(mut legacy: Value) -> Value {
        legacy["eventTime"] = Value::Null;
        legacy
    }

    #[test]
    fn writes_are_validated_as_upstream_does() {
        // upstream: pkg/apis/core/validation/events_test.go TestValidateEventForCoreV1Events,
        // TestValidateEventForNewV1beta1Events, TestEventV1EventTimeImmutability
        let reg = Registry::with_builtins();
        let core_def = reg.lookup("", "v1", "events").unwrap();
        let api_def = reg.lookup("events.k8s.io", "v1", "events").unwrap();
        let good = to_core(&recorded());
        assert_eq!(validate(&api_def, &good, None), Ok(()));
        assert_eq!(validate(&core_def, &good, None), Ok(()));

        let mut bare = recorded();
        for f in ["eventTime", "reportingController", "action", "series"] {
            bare.as_object_mut().unwrap().remove(f);
        }
        let err = validate(&api_def, &to_core(&bare), None).unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message, "Event \"web.1\" is invalid: eventTime: Required value",
            "an Event without eventTime is a legacy one, checked as such, then refused by the strict rules"
        );
        let mut no_reporter = recorded();
        no_reporter
            .as_object_mut()
            .unwrap()
            .remove("reportingController");
        no_reporter["series"]["count"] = json!(1);
        no_reporter["deprecatedCount"] = json!(3);
        let err = validate(&api_def, &to_core(&no_reporter), None).unwrap_err();
        assert_eq!(
            err.message,
            "Event \"web.1\" is invalid: [reportingController: Required value, series.count: Invalid value: \"\": should be at least 2, count: Invalid value: \"\": needs to be unset]"
        );
        assert_eq!(err.details.unwrap()["causes"].as_array().unwrap().len(), 3);

        let elsewhere = json!({"metadata": {"name": "e", "namespace": "shop"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "other"}});
        assert_eq!(
            validate(&core_def, &elsewhere, None).unwrap_err().message,
            "Event \"e\" is invalid: involvedObject.namespace: Invalid value: \"other\": does not match event.namespace"
        );

        let mut renoted = good.clone();
        renoted["message"] = json!("other");
        assert_eq!(
            validate(&core_def, &renoted, Some(&good)),
            Ok(()),
            "core/v1 updates are free"
        );
        assert_eq!(
            validate(&api_def, &renoted, Some(&good))
                .unwrap_err()
                .message,
            "Event \"web.1\" is invalid: message: Invalid value: \"other\": field is immutable"
        );
        let mut repeated = good.clone();
        repeated["series"] = json!({"count": 3, "lastObservedTime": "2026-11-21T10:02:00.000000Z"});
        assert_eq!(
            validate(&api_def, &repeated, Some(&good)),
            Ok(()),
            "a series may grow"
        );
    }

    #[test]
    fn field_selectors_use_each_groups_labels() {
        let reg = Registry::with_builtins();
        let core_def = reg.lookup("", "v1", "events").unwrap();
        let api_def = reg.lookup("events.k8s.io", "v1", "events").unwrap();
        let stored = to_core(&recorded());
        let sel = |def: &ResourceDef, s: &str| {
            field_selector(def, FieldSelector::parse(s).unwrap()).map(|f| f.matches(&stored))
        };
        assert_eq!(
            sel(&core_def, "involvedObject.name=web,type=Normal"),
            Ok(true)
        );
        assert_eq!(sel(&core_def, "reportingComponent=hpa-plus"), Ok(true));
        assert_eq!(
            sel(&core_def, "source=hpa-plus"),
            Ok(true),
            "falls back to the controller"
        );
        assert_eq!(
            sel(&api_def, "regarding.name=web,reportingController=hpa-plus"),
            Ok(true)
        );
        assert_eq!(sel(&api_def, "regarding.kind=Pod"), Ok(false));
        let err = sel(&core_def, "regarding.name=web").unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "field label not supported: regarding.name")
        );
        assert_eq!(
            sel(&api_def, "involvedObject.name=web").unwrap_err().code,
            400
        );
        assert_eq!(sel(&api_def, "reportingComponent=x").unwrap_err().code, 400);
    }
}
