//! Field-path validation errors.
//!
//! Every spec's `validate()` returns *all* problems it finds, each with the JSON path of the
//! offending field as `kubectl explain` would name it (`spec.metrics[1].external.target`), so a
//! user fixes a manifest in one round instead of one error at a time.

use std::fmt;

/// One problem with one field of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// JSON path of the field, e.g. `spec.metrics[1].external.target.highWatermark`.
    pub path: String,
    /// What is wrong, phrased as a requirement (`must be >= lowWatermark`).
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// All problems found in one object, in the order the fields appear.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldErrors(pub Vec<FieldError>);

impl FieldErrors {
    /// Records a problem at `path`.
    pub fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError {
            path: path.into(),
            message: message.into(),
        });
    }

    /// Records a list (or map) at `path` with more than `max` entries.
    pub fn max_items(&mut self, path: impl Into<String>, len: usize, max: usize) {
        if len > max {
            self.push(path, format!("must have at most {max} items, got {len}"));
        }
    }

    /// Records a string at `path` longer than `max` characters (counted as the API server counts
    /// a schema's `maxLength`: Unicode code points).
    pub fn max_length(&mut self, path: impl Into<String>, value: &str, max: usize) {
        let len = value.chars().count();
        if len > max {
            self.push(
                path,
                format!("may not be more than {max} characters, got {len}"),
            );
        }
    }

    /// Records a name at `path` that goes into a URL path as one segment (a metric's name, a
    /// referent's kind or name) and would address another path there: upstream's
    /// `IsValidPathSegmentName`, with its messages. An empty name is left to the `is required`
    /// check.
    pub fn path_segment(&mut self, path: impl Into<String>, value: &str) {
        let path = path.into();
        for message in path_segment_problems(value) {
            self.push(path.clone(), message);
        }
    }

    /// `Ok(())` when nothing was recorded, else every problem.
    pub fn into_result(self) -> Result<(), FieldErrors> {
        if self.0.is_empty() { Ok(()) } else { Err(self) }
    }

    /// True when no problem was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True when a problem was recorded at exactly `path`.
    pub fn has_path(&self, path: &str) -> bool {
        self.0.iter().any(|e| e.path == path)
    }
}

/// Why `name` cannot be one segment of a URL path: `.` and `..` name another path, and `/` and
/// `%` would split or re-encode it (upstream's `IsValidPathSegmentName`).
pub fn path_segment_problems(name: &str) -> Vec<&'static str> {
    match name {
        "." => return vec!["may not be '.'"],
        ".." => return vec!["may not be '..'"],
        _ => {}
    }
    [("/", "may not contain '/'"), ("%", "may not contain '%'")]
        .into_iter()
        .filter(|(c, _)| name.contains(c))
        .map(|(_, message)| message)
        .collect()
}

/// The CRD rule for [`path_segment_problems`], so the API server refuses such a name at write
/// time as it does for a native HPA.
pub fn path_segment_rule() -> serde_json::Value {
    serde_json::json!([{
        "rule": "self != '.' && self != '..' && !self.contains('/') && !self.contains('%')",
        "message": "may not be '.' or '..', and may not contain '/' or '%'",
    }])
}

impl fmt::Display for FieldErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for FieldErrors {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's `IsValidPathSegmentName` cases.
    #[test]
    fn path_segments_as_upstream_checks_them() {
        let cases: [(&str, &[&str]); 9] = [
            ("web", &[]),
            ("...", &[]),
            (".web", &[]),
            ("a.b..c", &[]),
            (".", &["may not be '.'"]),
            ("..", &["may not be '..'"]),
            ("a/b", &["may not contain '/'"]),
            ("50%", &["may not contain '%'"]),
            ("../%2F", &["may not contain '/'", "may not contain '%'"]),
        ];
        for (name, want) in cases {
            assert_eq!(path_segment_problems(name), want, "{name:?}");
        }
        let mut errs = FieldErrors::default();
        errs.path_segment("spec.x", "");
        errs.path_segment("spec.y", "..");
        assert_eq!(errs.to_string(), "spec.y: may not be '..'");
    }
}
