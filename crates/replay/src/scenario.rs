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

/// The largest time, age or span a scenario may give, seconds (about 317 years): every time a
/// replay derives from one, counted from its epoch either way, stays a timestamp it can
/// represent, so a file cannot make the replay's clock overflow.
pub const MAX_SECONDS: f64 = 1e10;

/// The most pods one scenario step may describe (with `count`): Kubernetes' documented ceiling
/// for a whole cluster, 150,000 pods. A count past it is a typo or a file meant to exhaust
/// memory.
pub const MAX_PODS: usize = 150_000;

/// Checks that `adds` more pods, after `so_far`, stay within [`MAX_PODS`].
pub fn pod_count(so_far: usize, adds: usize, field: impl Display) -> Result<()> {
    if adds <= MAX_PODS.saturating_sub(so_far) {
        Ok(())
    } else {
        Err(ReplayError::invalid(
            field,
            format!("a step describes at most {MAX_PODS} pods"),
        ))
    }
}

/// Checks a time, age or span a scenario gives: a finite number within ±[`MAX_SECONDS`].
pub fn seconds(value: f64, field: impl Display) -> Result<f64> {
    if value.is_finite() && value.abs() <= MAX_SECONDS {
        Ok(value)
    } else {
        Err(ReplayError::invalid(
            field,
            // 1e300 in full is three hundred digits.
            format!("must be a number of seconds within ±{MAX_SECONDS:e}, got {value:e}"),
        ))
    }
}

/// [`seconds`] for a whole number of seconds.
pub fn whole_seconds(value: i64, field: impl Display) -> Result<i64> {
    // Exact: MAX_SECONDS is a whole number well inside f64's 2^53.
    seconds(value as f64, field).map(|_| value)
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
    fn times_are_finite_and_within_the_bound() {
        assert!(seconds(-3600.5, "t").is_ok_and(|s| s.to_bits() == (-3600.5f64).to_bits()));
        assert_eq!(whole_seconds(10_000_000_000, "t").unwrap(), 10_000_000_000);
        for bad in [f64::NAN, f64::INFINITY, 1e300, -1.000_000_1e10] {
            let err = seconds(bad, "steps[2].t").unwrap_err().to_string();
            assert!(err.contains("steps[2].t: must be"), "{err}");
        }
        let err = whole_seconds(i64::MIN, "pods[0].startedSecondsAgo").unwrap_err();
        assert!(err.to_string().contains("startedSecondsAgo"), "{err}");
    }

    #[test]
    fn pods_are_counted_up_to_a_clusters_worth() {
        assert!(pod_count(0, MAX_PODS, "pods[0].count").is_ok());
        assert!(pod_count(1, MAX_PODS, "pods[1].count").is_err());
        let err = pod_count(MAX_PODS, usize::MAX, "pods[2].count").unwrap_err();
        assert!(err.to_string().contains("pods[2].count: "), "{err}");
    }

    #[test]
    fn a_miss_reads_expected_then_got() {
        assert_eq!(
            miss(3, "replicas 4", "5"),
            "step 3: expected replicas 4, got 5"
        );
    }
}
