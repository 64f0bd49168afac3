//! Reading a scenario: YAML (or JSON, which is YAML) typed by the service, with errors that name
//! the field, and the one wording of a missed expectation.

use std::fmt::Display;

use serde::de::DeserializeOwned;

use crate::error::{ReplayError, Result};

/// Parses scenario text into the service's type. serde-saphyr's message names the field (and
/// the line and column) that does not fit.
pub fn parse<T: DeserializeOwned>(text: &str) -> Result<T> {
    serde_saphyr::from_str(text).map_err(|e| ReplayError::Invalid(e.to_string()))
}

/// Checks the scenario's `kind`.
pub fn expect_kind(kind: &str, want: &str) -> Result<()> {
    if kind == want {
        Ok(())
    } else {
        Err(ReplayError::invalid(
            "kind",
            format!("must be {want}, got {kind:?}"),
        ))
    }
}

/// A missed expectation as printed on stderr: `step N: expected …, got …`.
pub fn miss(step: usize, expected: impl Display, got: impl Display) -> String {
    format!("step {step}: expected {expected}, got {got}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // read for its errors
    struct Sample {
        kind: String,
        steps: Vec<Step>,
    }

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // read for its errors
    struct Step {
        t: f64,
    }

    #[test]
    fn yaml_and_json_parse_alike() {
        let yaml: Sample = parse("kind: X\nsteps: [{t: 1}]").unwrap();
        let json: Sample = parse(r#"{"kind": "X", "steps": [{"t": 1}]}"#).unwrap();
        assert_eq!(format!("{yaml:?}"), format!("{json:?}"));
    }

    #[test]
    fn errors_name_the_field() {
        let err = parse::<Sample>("kind: X\nsteps: [{t: 1, u: 2}]").unwrap_err();
        assert!(err.to_string().contains('u'), "{err}");
        let err = parse::<Sample>("kind: X\nsteps: [{t: soon}]").unwrap_err();
        assert!(err.to_string().starts_with("invalid scenario: "), "{err}");
        let err = expect_kind("CronReplay", "HorizontalReplay").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid scenario: kind: must be HorizontalReplay, got \"CronReplay\""
        );
    }

    #[test]
    fn a_miss_reads_expected_then_got() {
        assert_eq!(
            miss(3, "replicas 4", "5"),
            "step 3: expected replicas 4, got 5"
        );
    }
}
