//! Field errors as kube-apiserver words them (`k8s.io/apimachinery/pkg/util/validation/field`):
//! a path (`spec.metrics[0].type`), an error type with its cause reason (`FieldValueInvalid`), the
//! offending value when the type shows one, and a detail; and the `422 Invalid` `Status` that
//! carries a list of them.

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::error::ApiError;

/// The type of a field error (`field.ErrorType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// `Required value` (`FieldValueRequired`).
    Required,
    /// `Invalid value` (`FieldValueInvalid`).
    Invalid,
    /// `Invalid value` of the wrong JSON type (`FieldValueTypeInvalid`); keeps CEL rules from running.
    TypeInvalid,
    /// `Unsupported value` outside an enum (`FieldValueNotSupported`).
    NotSupported,
    /// `Too long` (`FieldValueTooLong`).
    TooLong,
    /// `Too many` (`FieldValueTooMany`).
    TooMany,
    /// `Forbidden` (`FieldValueForbidden`).
    Forbidden,
    /// `Duplicate value` (`FieldValueDuplicate`).
    Duplicate,
}

impl ErrorKind {
    /// The cause's `reason` in `Status.details.causes[]`.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Invalid => "FieldValueInvalid",
            Self::TypeInvalid => "FieldValueTypeInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::Forbidden => "FieldValueForbidden",
            Self::Duplicate => "FieldValueDuplicate",
        }
    }

    fn text(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid | Self::TypeInvalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::Forbidden => "Forbidden",
            Self::Duplicate => "Duplicate value",
        }
    }

    /// Whether the error body shows the value (`Required value`, `Forbidden` and `Too long` do not).
    fn shows_value(self) -> bool {
        !matches!(self, Self::Required | Self::Forbidden | Self::TooLong)
    }
}

/// A field path as `field.Path` prints it: `spec.metrics[0].target`, `metadata.labels[app]`;
/// the nil path prints `<nil>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldPath(Option<String>);

impl FieldPath {
    /// The path of the object itself (prints empty, as `field.NewPath("")` does not exist:
    /// children of the root print without a leading dot).
    pub fn root() -> Self {
        Self(Some(String::new()))
    }

    /// The nil path (`<nil>`), for errors about the whole object.
    pub fn nil() -> Self {
        Self(None)
    }

    /// A property of this path.
    #[must_use]
    pub fn child(&self, name: &str) -> Self {
        match &self.0 {
            Some(p) if !p.is_empty() => Self(Some(format!("{p}.{name}"))),
            _ => Self(Some(name.to_string())),
        }
    }

    /// An item of a list.
    #[must_use]
    pub fn index(&self, i: usize) -> Self {
        Self(Some(format!(
            "{}[{i}]",
            self.0.as_deref().unwrap_or_default()
        )))
    }

    /// An entry of a map.
    #[must_use]
    pub fn key(&self, k: &str) -> Self {
        Self(Some(format!(
            "{}[{k}]",
            self.0.as_deref().unwrap_or_default()
        )))
    }

    /// Whether this is the object itself.
    pub fn is_root(&self) -> bool {
        self.0.as_deref() == Some("")
    }
}

impl std::fmt::Display for FieldPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.as_deref().unwrap_or("<nil>"))
    }
}

/// One field error.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// Its type.
    pub kind: ErrorKind,
    /// The field it is about.
    pub field: FieldPath,
    /// The offending value (`None`: the body omits it).
    pub value: Option<Value>,
    /// What is wrong, for people.
    pub detail: String,
}

impl FieldError {
    /// Builds an error.
    pub fn new(
        kind: ErrorKind,
        field: FieldPath,
        value: Option<Value>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            field,
            value,
            detail: detail.into(),
        }
    }

    /// The error without its field (`Invalid value: 10: must be …`), as `ErrorBody()` and the
    /// cause's `message`.
    pub fn body(&self) -> String {
        let mut s = self.kind.text().to_string();
        if self.kind.shows_value()
            && let Some(v) = &self.value
        {
            // Scalars print bare (strings quoted), anything else as JSON: Go's `%v`/`%q`.
            let _ = write!(s, ": {v}");
        }
        if !self.detail.is_empty() {
            let _ = write!(s, ": {}", self.detail);
        }
        s
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// The `422 Invalid` answer for `errors` of the object `name` of `kind` in `group`
/// (`apierrors.NewInvalid`): one error reads bare, several in brackets; identical messages once.
pub fn invalid(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> ApiError {
    let mut messages: Vec<String> = Vec::new();
    for e in errors {
        let m = e.to_string();
        if !messages.contains(&m) {
            messages.push(m);
        }
    }
    let qualified = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    let message = match messages.as_slice() {
        [] => format!("{qualified} \"{name}\" is invalid"),
        [one] => format!("{qualified} \"{name}\" is invalid: {one}"),
        many => format!("{qualified} \"{name}\" is invalid: [{}]", many.join(", ")),
    };
    let causes: Vec<Value> = errors
        .iter()
        .map(|e| json!({"reason": e.kind.reason(), "message": e.body(), "field": e.field.to_string()}))
        .collect();
    ApiError::invalid(message).with_details(json!({
        "name": name,
        "group": group,
        "kind": kind,
        "causes": causes,
    }))
}
