//! Reading a source object field by field, so that whatever is not read is reported.
//!
//! A [`Fields`] wraps one JSON object with its path; each field the conversion uses is
//! [`take`](Fields::take)n, and [`finish`](Fields::finish) reports the rest as [`Dropped`].
//! Metadata is carried over by [`metadata`]: name, namespace, labels and annotations stay,
//! server-set fields go (they describe the old object, not the new one).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value};

use super::ConvertError;
use crate::quoted::{QUOTED_CHARS, quoted};

/// A parser's message, which may repeat the whole value it refused, cut to a few quotes' length.
fn bounded(message: &str) -> String {
    let limit = 4 * QUOTED_CHARS;
    if message.chars().count() <= limit {
        return message.to_owned();
    }
    let head: String = message.chars().take(limit).collect();
    format!("{head}… ({} bytes)", message.len())
}

/// A field of the source that the Plimsoll object does not carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// JSON path in the source, e.g. `spec.recommender`.
    pub field: String,
    /// Why it is not carried over, and what to do instead.
    pub reason: String,
}

impl Dropped {
    pub(crate) fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// The reason given for a field this conversion does not know.
pub(crate) const UNKNOWN: &str = "no counterpart in Plimsoll";

/// One JSON object being read.
pub(crate) struct Fields {
    path: String,
    map: Map<String, Value>,
}

impl Fields {
    /// The object at `path` (`None` or `null`: an empty object); an error when it is not one.
    pub(crate) fn new(path: &str, value: Option<&Value>) -> Result<Self, ConvertError> {
        let map = match value {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(other) => {
                return Err(ConvertError::invalid(
                    path,
                    format!("expected an object, got {}", quoted(&other.to_string())),
                ));
            }
        };
        Ok(Self {
            path: path.to_owned(),
            map,
        })
    }

    /// The path of a field of this object.
    pub(crate) fn at(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// Removes and returns a field (`null` counts as absent).
    pub(crate) fn take(&mut self, key: &str) -> Option<Value> {
        self.map.remove(key).filter(|v| !v.is_null())
    }

    /// A field deserialized as `T`.
    pub(crate) fn take_as<T: serde::de::DeserializeOwned>(
        &mut self,
        key: &str,
    ) -> Result<Option<T>, ConvertError> {
        let path = self.at(key);
        self.take(key)
            .map(|v| {
                serde_json::from_value(v)
                    .map_err(|e| ConvertError::invalid(path, bounded(&e.to_string())))
            })
            .transpose()
    }

    /// Every field not taken, as dropped with `reason`.
    pub(crate) fn finish(self, reason: &str, dropped: &mut Vec<Dropped>) {
        for key in self.map.keys() {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            dropped.push(Dropped::new(path, reason));
        }
    }
}

/// A quantity written as a string or a number (`x-kubernetes-int-or-string` fields), as the
/// string Plimsoll stores.
pub(crate) fn quantity_text(path: &str, v: &Value) -> Result<String, ConvertError> {
    match v {
        Value::String(s) => Ok(s.trim().to_owned()),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(ConvertError::invalid(
            path,
            format!("expected a quantity, got {}", quoted(&other.to_string())),
        )),
    }
}

/// The metadata of the new object: name, namespace, labels and annotations of the source,
/// without the annotations `drop_annotation` claims (they are reported with its reason).
pub(crate) fn metadata(
    doc: &Value,
    drop_annotation: impl Fn(&str) -> Option<&'static str>,
    dropped: &mut Vec<Dropped>,
) -> Result<ObjectMeta, ConvertError> {
    let mut meta = Fields::new("metadata", doc.get("metadata"))?;
    let name: Option<String> = meta.take_as("name")?;
    let namespace: Option<String> = meta.take_as("namespace")?;
    let labels: Option<BTreeMap<String, String>> = meta.take_as("labels")?;
    let annotations: Option<BTreeMap<String, String>> = meta.take_as("annotations")?;
    let annotations = annotations.map(|all| {
        all.into_iter()
            .filter(|(k, _)| {
                if k == "kubectl.kubernetes.io/last-applied-configuration" {
                    return false;
                }
                match drop_annotation(k) {
                    Some(reason) => {
                        dropped.push(Dropped::new(format!("metadata.annotations.{k}"), reason));
                        false
                    }
                    None => true,
                }
            })
            .collect::<BTreeMap<_, _>>()
    });
    // What the API server set on the old object describes that object, not the new one.
    for key in [
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "managedFields",
        "selfLink",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        meta.take(key);
    }
    meta.finish(
        "not carried over: the new object gets its own (owners and finalizers belong to the old object)",
        dropped,
    );
    Ok(ObjectMeta {
        name,
        namespace,
        labels: labels.filter(|l| !l.is_empty()),
        annotations: annotations.filter(|a| !a.is_empty()),
        ..ObjectMeta::default()
    })
}

/// Reports a source `status` (the new controller computes its own).
pub(crate) fn drop_status(doc: &Value, dropped: &mut Vec<Dropped>) {
    if doc
        .get("status")
        .is_some_and(|s| !s.is_null() && s != &Value::Object(Map::new()))
    {
        dropped.push(Dropped::new(
            "status",
            "not carried over: the Plimsoll controller writes its own status at its first evaluation",
        ));
    }
}
