//! `plimsoll-sim demo --duration 40s --output json`, as a user runs it: a day compressed into
//! 40 s, every service in-process. The HPA+ keeps the CPU of Ready pods near its target, the
//! CronHPA raises the HPA+'s minimum ahead of the peak, vpa-admission gives new pods the
//! recommended memory, and vpa-updater resizes the older pods in place.

use std::process::Command;

use serde_json::Value;

/// The rows and the summary of one run.
fn run_demo(duration: &str, plot: &std::path::Path) -> (Vec<Value>, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_plimsoll-sim"))
        .args(["demo", "--duration", duration, "--output", "json", "--plot"])
        .arg(plot)
        .output()
        .expect("plimsoll-sim runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "demo failed: {stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let parsed: Vec<Result<Value, String>> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).map_err(|e| format!("not JSON ({e}): {l}")))
        .collect();
    let bad: Vec<&String> = parsed.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(bad.is_empty(), "{bad:?}");
    let mut lines: Vec<Value> = parsed.into_iter().filter_map(Result::ok).collect();
    let summary = lines.pop().expect("a summary line");
    assert!(summary.get("summary").is_some(), "last line: {summary}");
    assert!(
        stderr.contains("1 simulated minute = "),
        "the compression is printed: {stderr}"
    );
    (lines, summary["summary"].clone())
}

/// A number of a row; NaN (which fails every comparison) when missing, and the test checks
/// first that no row misses one.
fn num(row: &Value, key: &str) -> f64 {
    row[key].as_f64().unwrap_or(f64::NAN)
}

const NUMBERS: [&str; 11] = [
    "t",
    "load",
    "replicas",
    "readyReplicas",
    "cpuPercent",
    "targetPercent",
    "minReplicas",
    "pods",
    "patchedPods",
    "patchedTotal",
    "resizedPods",
];

#[test]
fn a_40s_demo_tracks_the_load_and_shows_every_service() {
    let plot = std::env::temp_dir().join(format!("plimsoll-demo-test-{}.png", std::process::id()));
    let (rows, summary) = run_demo("40s", &plot);
    let png = std::fs::read(&plot).expect("the plot was written");
    let _ = std::fs::remove_file(&plot);
    assert_eq!(&png[1..4], b"PNG");
    assert_eq!(rows.len(), 60, "{rows:?}");
    for r in &rows {
        for key in NUMBERS {
            assert!(r[key].is_number(), "{key} missing from {r}");
        }
        assert!(r["decision"].is_string(), "decision missing from {r}");
    }

    // Tracking: after the first tenth of the day, CPU of Ready pods within ±50 % of the target
    // in at least 80 % of rows.
    let counted: Vec<&Value> = rows
        .iter()
        .filter(|r| num(r, "t") >= 86_400.0 / 10.0)
        .collect();
    let within = counted
        .iter()
        .filter(|r| {
            let (cpu, target) = (num(r, "cpuPercent"), num(r, "targetPercent"));
            num(r, "readyReplicas") > 0.0 && (cpu - target).abs() <= 0.5 * target
        })
        .count();
    let table: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} load {} {}/{} cpu {} min {} {}",
                r["time"],
                r["load"],
                r["readyReplicas"],
                r["replicas"],
                r["cpuPercent"],
                r["minReplicas"],
                r["decision"]
            )
        })
        .collect();
    assert!(
        within * 5 >= counted.len() * 4,
        "{within} of {} rows on target:\n{}",
        counted.len(),
        table.join("\n")
    );
    assert_eq!(summary["hpaPlus"]["trackingWithin"], within);
    // A metric from the first rows: the HPA+ decided something by the fifth row.
    assert!(
        rows.iter().take(5).any(|r| r["decision"] != "-"),
        "{}",
        table.join("\n")
    );
    assert!(
        rows.iter().map(|r| num(r, "replicas")).fold(0.0, f64::max) >= 6.0,
        "the workload scaled up: {}",
        table.join("\n")
    );

    // cron-hpa raised the HPA+'s minimum before the midday peak, and hpa-plus went above it.
    let raised = rows.iter().find(|r| num(r, "minReplicas") > 2.0);
    assert!(
        raised.is_some_and(|r| num(r, "t") < 12.0 * 3600.0),
        "cron did not raise the minimum before noon:\n{}",
        table.join("\n")
    );
    assert!(
        rows.iter()
            .any(|r| num(r, "replicas") > num(r, "minReplicas") && num(r, "minReplicas") > 2.0),
        "hpa-plus kept scaling above the cron minimum:\n{}",
        table.join("\n")
    );

    // vpa-recommender: a memory target appears.
    assert!(
        rows.iter().any(|r| r["recommendation"].is_string()),
        "no recommendation: {summary}"
    );
    // vpa-admission: pods created after it got the recommended memory, CPU untouched.
    let last = rows.last().expect("rows");
    assert!(num(last, "patchedTotal") > 0.0, "no pod patched: {last}");
    assert!(num(last, "patchedTotal") <= num(last, "podsTotal"));
    assert!(rows.iter().all(|r| num(r, "patchedPods") <= num(r, "pods")));
    assert_eq!(summary["vpaAdmission"]["patchedPods"], last["patchedTotal"]);
    let change = summary["vpaAdmission"]["change"]
        .as_str()
        .unwrap_or_default();
    assert!(
        change.starts_with("memory 128Mi→"),
        "admission changed {change:?}"
    );
    assert!(!change.contains("cpu"), "{change:?}");
    // vpa-updater: at least one running pod resized in place.
    assert!(
        num(last, "resizedPods") >= 1.0,
        "no pod resized in place: {summary}"
    );
}
