//! Running the real kubectl against a sim: the tests that check what a user of kubectl sees.
//! Each test is skipped, saying why, when kubectl is not on the PATH.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Whether `kubectl` runs here.
pub fn available() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs kubectl against `kubeconfig`: whether it succeeded, and stdout followed by stderr.
pub fn run(kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    run_with_stdin(kubeconfig, args, None)
}

/// As [`run`], writing `stdin` to kubectl's standard input (`apply -f -`).
pub fn run_with_stdin(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String) {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let input = child.stdin.take().expect("kubectl's stdin");
    if let Some(text) = stdin {
        let mut input = input;
        input
            .write_all(text.as_bytes())
            .expect("kubectl reads stdin");
    }
    let out = child.wait_with_output().expect("kubectl finishes");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Runs kubectl and fails the test, with kubectl's output, when it does not succeed.
pub fn ok(kubeconfig: &Path, args: &[&str]) -> String {
    let (success, text) = run(kubeconfig, args);
    assert!(success, "kubectl {args:?} failed: {text}");
    text
}

/// A fresh directory for one test's kubeconfig and files. Tests of one file run in parallel in
/// one process, so the name carries a counter as well as the process id: a shared kubeconfig
/// would point one test's kubectl at another test's sim.
pub fn scratch_dir(prefix: &str) -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "plimsoll-sim-{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}
