//! Runs every `scenarios/vpa-*.yaml` through `replay` and checks the CLI's exit codes.

use std::path::{Path, PathBuf};
use std::process::Command;

use plimsoll_vpa_recommender::{plot, replay};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scenarios() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(repo_root().join("scenarios"))
        .expect("scenarios dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vpa-"))
                && p.extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("yaml"))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_vpa_scenario_holds() {
    let files = scenarios();
    assert!(
        files.len() >= 4,
        "expected the vpa scenarios, found {files:?}"
    );
    for file in files {
        let scenario = replay::load(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let outcome = replay::run(&scenario, true).expect("runs");
        assert!(
            outcome.misses.is_empty(),
            "{}: {:?}",
            file.display(),
            outcome.misses
        );
        assert!(!outcome.lines.is_empty(), "{}: no output", file.display());
        let svg = plot::svg(&outcome.traces);
        assert!(svg.contains("<polyline"), "{}: empty plot", file.display());
    }
}

#[test]
fn checkpoint_out_round_trips_into_a_new_replay() {
    let scenario = replay::load(&repo_root().join("scenarios/vpa-steady-cpu.yaml")).expect("loads");
    let outcome = replay::run(&scenario, false).expect("runs");
    let yaml = replay::checkpoints_yaml(&outcome.checkpoints).expect("yaml");
    let parsed: Vec<plimsoll_core::api::vpa::VerticalPodAutoscalerCheckpoint> =
        serde_saphyr::from_multiple(&yaml).expect("parses back");
    assert_eq!(parsed, outcome.checkpoints);
    // The restored state recommends what the live state recommended.
    let dir = std::env::temp_dir().join(format!("plimsoll-vr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    std::fs::write(dir.join("cp.yaml"), &yaml).expect("write");
    let restart = r"
kind: VerticalReplay
vpa:
  apiVersion: autoscaling.k8s.io/v1
  kind: VerticalPodAutoscaler
  metadata: {name: web, namespace: default}
  spec:
    targetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
checkpointIn: cp.yaml
containers: [{name: app}]
at: [0]
";
    let restored = replay::run(
        &replay::Scenario::parse(restart, &dir).expect("parses"),
        false,
    )
    .expect("runs");
    let live = outcome.lines.last().expect("line");
    let again = &restored.lines[0];
    assert_eq!(again.target, live.target);
    assert!((again.confidence - live.confidence).abs() < 1e-9);
}

fn cli(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vpa-recommender"))
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn exit_codes_follow_format_md() {
    let root = repo_root();
    let ok = root.join("scenarios/vpa-policy-caps.yaml");
    let (code, stdout, _) = cli(&["replay", ok.to_str().expect("utf8")]);
    assert_eq!(code, 0);
    let line: serde_json::Value =
        serde_json::from_str(stdout.lines().next().expect("line")).expect("json");
    assert_eq!(line["target"]["cpu"], "200m");

    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let (code, _, stderr) = cli(&[
        "replay",
        data.join("missed-expectation.yaml").to_str().expect("utf8"),
    ]);
    assert_eq!(code, 1);
    assert!(stderr.contains("step 0: expected target.cpu 5"), "{stderr}");

    let (code, _, stderr) = cli(&[
        "replay",
        data.join("invalid-sample.yaml").to_str().expect("utf8"),
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("samples[1]"), "{stderr}");

    let (code, stdout, _) = cli(&["replay", ok.to_str().expect("utf8"), "--output", "table"]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("T "), "{stdout}");
}
