//! `vpa-updater replay` end to end: every scenario in `scenarios/vpa-updater-*.yaml` holds, a
//! wrong expectation exits 1, an invalid file exits 2 naming the field.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn replay(path: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vpa-updater"))
        .arg("replay")
        .arg(path)
        .args(args)
        .output()
        .expect("run vpa-updater")
}

fn scenarios() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("scenarios directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            let is_yaml = p
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("yaml"));
            let ours = p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vpa-updater-"));
            is_yaml && ours
        })
        .collect();
    found.sort();
    found
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "plimsoll-vpa-updater-replay-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write scenario");
    path
}

#[test]
fn every_scenario_holds() {
    let all = scenarios();
    assert!(all.len() >= 4, "scenarios: {all:?}");
    for path in all {
        let out = replay(&path, &["--output", "json"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("JSON line");
            for key in ["pod", "priority", "resourceDiff", "action", "reason"] {
                assert!(
                    v.get(key).is_some(),
                    "{}: {line} lacks {key}",
                    path.display()
                );
            }
        }
    }
}

#[test]
fn rollover_json_is_in_action_order() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/vpa-updater-rollover.yaml");
    let out = replay(&path, &["--output", "json"]);
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let order: Vec<(&str, &str)> = lines
        .iter()
        .map(|v| {
            (
                v["pod"].as_str().unwrap_or(""),
                v["action"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            ("web-2", "evict"),
            ("web-1", "evict"),
            ("web-3", "skip"),
            ("web-4", "skip")
        ]
    );
    assert_eq!(lines[0]["priority"], 1);
    assert_eq!(lines[0]["resourceDiff"], 12.0);
}

#[test]
fn table_output_has_a_header() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/vpa-updater-single-replica.yaml");
    let out = replay(&path, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("POD"), "{text}");
    assert!(text.contains("too few replicas"), "{text}");
}

const VPA: &str = r#"
vpa:
  apiVersion: autoscaling.k8s.io/v1
  kind: VerticalPodAutoscaler
  metadata: {name: web, namespace: shop}
  spec:
    targetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  status:
    recommendation:
      containerRecommendations:
        - containerName: app
          target: {cpu: 500m, memory: 512Mi}
          lowerBound: {cpu: 400m, memory: 400Mi}
          upperBound: {cpu: "1", memory: 1Gi}
owner: {kind: ReplicaSet, name: web-1a, replicas: 2}
"#;

#[test]
fn wrong_expectation_exits_1() {
    let text = format!(
        "kind: UpdaterReplay\n{VPA}pods:\n  - {{name: web, count: 2, startedSecondsAgo: 50000, containers: [{{name: app, requests: {{cpu: 100m, memory: 128Mi}}}}]}}\nexpect: {{evicted: [web-1, web-2]}}\n"
    );
    let out = replay(&temp_file("miss.yaml", &text), &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("step 1: expected evicted"), "{err}");
}

#[test]
fn invalid_files_exit_2_naming_the_field() {
    let cases = [
        (
            "bad-quantity.yaml",
            format!(
                "kind: UpdaterReplay\n{VPA}pods:\n  - {{name: p, containers: [{{name: app, requests: {{cpu: lots}}}}]}}\n"
            ),
            "pods[0].containers[0].requests.cpu",
        ),
        (
            "unknown-field.yaml",
            format!("kind: UpdaterReplay\n{VPA}pods: []\nsurprise: 1\n"),
            "surprise",
        ),
        (
            "wrong-kind.yaml",
            format!("kind: HorizontalReplay\n{VPA}pods: []\n"),
            "kind",
        ),
        (
            "bad-phase.yaml",
            format!(
                "kind: UpdaterReplay\n{VPA}pods:\n  - {{name: p, phase: Sleeping, containers: []}}\n"
            ),
            "pods[0].phase",
        ),
        // An age past what the replay's clock holds, and more pods than a cluster holds.
        (
            "far-age.yaml",
            format!(
                "kind: UpdaterReplay\n{VPA}pods:\n  - {{name: p, startedSecondsAgo: 9223372036854775807, containers: []}}\n"
            ),
            "pods[0].startedSecondsAgo",
        ),
        (
            "many-pods.yaml",
            format!(
                "kind: UpdaterReplay\n{VPA}pods:\n  - {{name: p, count: 1000000000000, containers: []}}\n"
            ),
            "pods[0].count",
        ),
    ];
    for (name, text, field) in cases {
        let out = replay(&temp_file(name, &text), &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(field), "{name}: {err}");
    }
    let missing = replay(Path::new("/nonexistent/scenario.yaml"), &[]);
    assert_eq!(missing.status.code(), Some(2));
}
