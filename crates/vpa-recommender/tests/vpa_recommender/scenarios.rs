//! Runs every `scenarios/vpa-recommender-*.yaml` through `replay` and checks the CLI's exit codes.

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
                .is_some_and(|n| n.starts_with("vpa-recommender-"))
                && p.extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("yaml"))
        })
        .collect();
    out.sort();
    out
}

/// The target of the first container at the last `at` time of `file`, with `controller` put in.
fn last_target(file: &str, controller: &str, resource: &str) -> String {
    let path = repo_root().join("scenarios").join(file);
    let text = std::fs::read_to_string(&path).expect("scenario");
    let text = text.replacen(
        "kind: VerticalReplay\n",
        &format!("kind: VerticalReplay\ncontroller: {controller}\n"),
        1,
    );
    let scenario = replay::Scenario::parse(&text, &repo_root().join("scenarios")).expect("parses");
    let outcome = replay::simulate(&scenario, false).expect("runs");
    let line = outcome.lines.last().expect("a line");
    line.target[resource].0.clone()
}

#[test]
fn with_per_vpa_config_off_the_flags_apply_again() {
    // The numbers the scenarios expect with the VPA's own settings, and the flags' numbers.
    assert_eq!(
        last_target("vpa-recommender-per-vpa-oom-bump.yaml", "{}", "memory"),
        "1238659775"
    );
    assert_eq!(
        last_target(
            "vpa-recommender-per-vpa-oom-bump.yaml",
            "{perVpaConfig: false}",
            "memory"
        ),
        last_target("vpa-recommender-oom-bump.yaml", "{}", "memory")
    );
    assert_eq!(
        last_target(
            "vpa-recommender-per-vpa-memory-interval.yaml",
            "{perVpaConfig: false}",
            "memory"
        ),
        "1238659775"
    );
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
        let outcome = replay::simulate(&scenario, true).expect("runs");
        assert!(
            outcome.misses.is_empty(),
            "{}: {:?}",
            file.display(),
            outcome.misses
        );
        assert!(!outcome.lines.is_empty(), "{}: no output", file.display());
        let svg = plot::chart(&outcome.traces).to_svg();
        // The target as a line, or as a black dot when the replay evaluates only once.
        assert!(
            svg.contains("<polyline") || svg.contains(r##"fill="#000000""##),
            "{}: empty plot",
            file.display()
        );
    }
}

#[test]
fn checkpoint_out_round_trips_into_a_new_replay() {
    let scenario = replay::load(&repo_root().join("scenarios/vpa-recommender-steady-cpu.yaml"))
        .expect("loads");
    let outcome = replay::simulate(&scenario, false).expect("runs");
    let yaml = replay::checkpoints_yaml(&outcome.checkpoints).expect("yaml");
    let parsed: Vec<plimsoll_core::api::vpa::VerticalPodAutoscalerCheckpoint> =
        serde_saphyr::from_multiple(&yaml).expect("parses back");
    assert_eq!(parsed, outcome.checkpoints);
    // The restored state recommends what the live state recommended.
    let dir = std::env::temp_dir().join(format!("plimsoll-vr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    std::fs::write(dir.join("cp.yaml"), &yaml).expect("write");
    let restart = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/restart-from-checkpoint.yaml"),
    )
    .expect("fixture");
    let restored = replay::simulate(
        &replay::Scenario::parse(&restart, &dir).expect("parses"),
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
    let ok = root.join("scenarios/vpa-recommender-policy-caps.yaml");
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

#[test]
fn invalid_scenarios_name_the_field() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let cases = [
        ("invalid-sample.yaml", "samples[1]"),
        ("invalid-percentile.yaml", "controller.targetPercentile"),
        ("invalid-order.yaml", "samples[1].t"),
        ("invalid-expect-time.yaml", "expect[0].t"),
        ("invalid-unknown-field.yaml", "sampels"),
        ("invalid-vpa.yaml", "vpa.spec.updatePolicy.updateMode"),
        // Times past what the replay's clock holds are refused, not overflowed.
        ("invalid-far-time.yaml", "samples[1].t"),
        (
            "invalid-far-interval.yaml",
            "controller.memoryAggregationIntervalSeconds",
        ),
    ];
    for (file, path) in cases {
        let err = replay::load(&data.join(file)).expect_err(file);
        let message = err.to_string();
        assert!(message.contains(path), "{file}: {message}");
    }
}

#[test]
fn plot_is_written_as_svg_or_png_by_extension() {
    let scenario = repo_root().join("scenarios/vpa-recommender-steady-cpu.yaml");
    let scenario = scenario.to_str().expect("utf8");
    let dir = std::env::temp_dir().join(format!("plimsoll-vr-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let traces = replay::simulate(&replay::load(Path::new(scenario)).expect("loads"), true)
        .expect("runs")
        .traces;
    assert!(!traces.is_empty());

    let png = dir.join("plot.png");
    let (code, _, stderr) = cli(&["replay", scenario, "--plot", png.to_str().expect("utf8")]);
    assert_eq!(code, 0, "{stderr}");
    let bytes = std::fs::read(&png).expect("png written");
    assert_eq!(bytes[..8], [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a]);
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    // Two panels side by side, one 320 px row per container and resource.
    assert_eq!((be(16), be(20)), (1120, 320 * traces.len() as u32));

    let svg = dir.join("plot.Svg");
    let (code, _, stderr) = cli(&["replay", scenario, "--plot", svg.to_str().expect("utf8")]);
    assert_eq!(code, 0, "{stderr}");
    let doc = std::fs::read_to_string(&svg).expect("svg written");
    assert!(
        doc.starts_with("<svg") && doc.contains("target (black)"),
        "{doc}"
    );

    let gif = dir.join("plot.gif");
    let (code, stdout, stderr) = cli(&["replay", scenario, "--plot", gif.to_str().expect("utf8")]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--plot") && stderr.contains("*.png"),
        "{stderr}"
    );
    assert!(stdout.is_empty() && !gif.exists());
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
