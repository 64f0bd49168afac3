//! `cron-hpa replay` end to end: the example scenarios of the format (`scenarios/examples/`),
//! the repository's own scenarios, and the exit status contract of docs/replay.md (0 pass,
//! 1 expectation missed, 2 invalid file).

// The helpers below are test code too; clippy.toml's test allowances only cover #[test] fns.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use plimsoll_cron_hpa::replay;
use plimsoll_replay::{Invocation, Output, Status};

/// The example scenarios that come with the format, kept in the repository.
fn shared_examples() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/examples"
    ))
}

fn cron_scenarios(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("cron-") && (name.ends_with(".yaml") || name.ends_with(".json"))
        })
        .collect();
    files.sort();
    files
}

fn replay_in_process(path: &Path) -> (u8, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let invocation = Invocation {
        scenario: path,
        output: Output::Json,
        plot: None,
    };
    let status = plimsoll_replay::run_with(
        &invocation,
        |source| replay::replay_text(&source.text),
        &mut out,
        &mut err,
    );
    assert_ne!(status, Status::Invalid, "{}", path.display());
    (
        status.code(),
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

#[test]
fn every_shared_cron_example_passes() {
    let files = cron_scenarios(&shared_examples());
    assert!(!files.is_empty(), "no cron-*.yaml in scenarios/examples");
    for path in files {
        let (code, out, err) = replay_in_process(&path);
        assert_eq!(code, 0, "{}: {err}", path.display());
        assert!(!out.is_empty(), "{}: no firings", path.display());
    }
}

#[test]
fn every_repository_cron_scenario_passes_and_states_its_expectations() {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios"));
    let files = cron_scenarios(&dir);
    assert!(files.len() >= 4, "{files:?}");
    for path in files {
        let scenario = replay::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(
            scenario.expect.as_ref().is_some_and(|e| !e.is_empty()),
            "{}: a repository scenario pins its firings",
            path.display()
        );
        let (code, _, err) = replay_in_process(&path);
        assert_eq!(code, 0, "{}: {err}", path.display());
    }
}

fn data(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data")).join(name)
}

fn binary(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_cron-hpa"))
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[test]
fn binary_prints_json_lines_and_exits_zero() {
    let example = shared_examples().join("cron-every-few-minutes.yaml");
    let (code, out, err) = binary(&["replay", example.to_str().unwrap(), "--output", "json"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6);
    assert_eq!(lines[0]["at"], "2019-12-18T15:00:00Z");
    assert_eq!(lines[0]["job"], "scale-down");
    assert_eq!(lines[1]["job"], "scale-up");
    assert_eq!(lines[1]["targetSize"], 6);
    assert!(lines[0]["skipped"].is_null());
}

#[test]
fn binary_prints_a_table_by_default() {
    let example = shared_examples().join("cron-every-few-minutes.yaml");
    let (code, out, _) = binary(&["replay", example.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.starts_with("AT"), "{out}");
    assert_eq!(out.lines().count(), 7);
}

#[test]
fn a_missed_expectation_exits_one_and_names_the_steps() {
    let path = data("cron-wrong-expect.yaml");
    let (code, _, err) = binary(&["replay", path.to_str().unwrap(), "--output", "json"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("step 1: expected {at: 2026-01-01T00:03:00Z, job: tick, targetSize: 2, skipped: null}, got {at: 2026-01-01T00:02:00Z"),
        "{err}"
    );
    assert!(
        err.contains("step 2: expected no line, got {at: 2026-01-01T00:04:00Z"),
        "{err}"
    );
}

#[test]
fn an_invalid_file_exits_two_and_names_the_field() {
    let cases = [
        (
            "cron-invalid-schedule.yaml",
            r#"cronhpa.spec.jobs[1].schedule: job "peak": invalid schedule "0 0 25 * * *": hour field"#,
        ),
        (
            "cron-invalid-time.yaml",
            r#"to: "tomorrow" is not an RFC 3339 time"#,
        ),
        ("does-not-exist.yaml", "cannot read"),
    ];
    for (name, want) in cases {
        let path = data(name);
        let (code, out, err) = binary(&["replay", path.to_str().unwrap()]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(out.is_empty(), "{name}: {out}");
        assert!(err.contains(want), "{name}: {err}");
    }
    let hpa = shared_examples().join("hpa-cpu-utilization.yaml");
    let (code, _, err) = binary(&["replay", hpa.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("kind: must be CronReplay"), "{err}");
}
