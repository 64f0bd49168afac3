//! The official Kubernetes Python client against the sim: `tests/python/conformance.py` runs
//! CRUD, label selectors and paging, watches (from a resourceVersion, bookmarks, 410 Gone),
//! 409 conflicts, server-side apply with a conflicting manager, the scale subresource of a
//! Deployment and of a custom resource, and eviction with a PodDisruptionBudget, over the
//! sim's TLS with the CA from its kubeconfig verified.
//!
//! The client (`kubernetes`, pinned) is installed from PyPI into a virtualenv under the cargo
//! target directory and reused while it holds the pinned version. Skipped, with a printed
//! reason, only when `python3` with the `venv` module is absent; a failing `pip install` with
//! Python present fails the test.
#![allow(clippy::unwrap_used, clippy::panic)] // integration tests: helpers fail loudly

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The Python client release the test runs (PyPI `kubernetes`).
const CLIENT_VERSION: &str = "37.0.2";

/// Why Python cannot run the test, or `None` when `python3` with `venv` and `ensurepip` is there.
fn python_missing() -> Option<String> {
    let probe = Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match probe {
        Err(_) => {
            Some("python3 is not installed (Debian: apt-get install python3 python3-venv)".into())
        }
        Ok(s) if !s.success() => Some(
            "python3 has no venv/ensurepip module (Debian: apt-get install python3-venv)".into(),
        ),
        Ok(_) => None,
    }
}

fn shown(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The virtualenv's interpreter, with the pinned client installed (created on first use).
fn client_venv() -> PathBuf {
    let venv =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("python-kubernetes-{CLIENT_VERSION}"));
    let python = venv.join("bin").join("python");
    let has_pin = |python: &Path| {
        Command::new(python)
            .args([
                "-c",
                &format!(
                    "import kubernetes, sys; sys.exit(kubernetes.__version__ != {CLIENT_VERSION:?})"
                ),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if python.exists() && has_pin(&python) {
        return python;
    }
    let out = Command::new("python3")
        .args(["-m", "venv", "--clear"])
        .arg(&venv)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "python3 -m venv failed:\n{}",
        shown(&out)
    );
    let out = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            &format!("kubernetes=={CLIENT_VERSION}"),
        ])
        .output()
        .expect("pip runs");
    assert!(
        out.status.success(),
        "pip install kubernetes=={CLIENT_VERSION} failed:\n{}",
        shown(&out)
    );
    assert!(
        has_pin(&python),
        "the virtualenv holds kubernetes {CLIENT_VERSION}"
    );
    python
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_conformance() {
    if let Some(why) = python_missing() {
        println!("skipping python_client_conformance: {why}");
        return;
    }
    let python = tokio::task::spawn_blocking(client_venv).await.unwrap();
    let (sim, _) = common::start().await;
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("python-conformance-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig()).unwrap();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = manifest.join("tests/python/conformance.py");
    let crds = manifest.join("../../deploy/crds");
    let control = sim.http_url.clone().unwrap();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .arg(kubeconfig)
            .arg(crds)
            .arg(control)
            // The dynamic client caches discovery under the home directory by default.
            .env("HOME", &dir)
            .output()
            .expect("the conformance script runs")
    })
    .await
    .unwrap();
    let text = shown(&out);
    println!("{text}");
    sim.shutdown().await;
    assert!(
        out.status.success(),
        "the Python client's conformance checks failed:\n{text}"
    );
}
