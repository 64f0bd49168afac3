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
