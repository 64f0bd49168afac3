//! `kubectl` against the sim: the acceptance flow of issue 3. Skipped, with a printed reason,
//! when `kubectl` is not installed.
#![allow(clippy::unwrap_used, clippy::panic)] // integration tests: helpers fail loudly

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn kubectl_available() -> bool {
    Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn ok(kubeconfig: &Path, args: &[&str]) -> String {
    let (success, text) = kubectl(kubeconfig, args);
    assert!(success, "kubectl {args:?} failed: {text}");
    text
}

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.dev
spec:
  group: example.dev
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, shortNames: [gd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, default: 3}
";

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "plimsoll-sim-kubectl-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn ready_running(pods: &Value) -> usize {
    pods["items"].as_array().map_or(0, |items| {
        items
            .iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .filter(|p| p["status"]["phase"] == "Running")
            .filter(|p| {
                p["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
            })
            .count()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_acceptance_flow() {
    if !kubectl_available() {
        println!("skipping kubectl_acceptance_flow: kubectl is not installed");
        return;
    }
    let (sim, _) = common::start().await;
    let dir = temp_dir();
    let kc = dir.join("kubeconfig");
    std::fs::write(&kc, sim.kubeconfig()).unwrap();
    let crd_file = dir.join("crd.yaml");
    std::fs::write(&crd_file, CRD).unwrap();
    let kc2 = kc.clone();
    tokio::task::spawn_blocking(move || {
        let kc = kc2.as_path();
        applies_crds_and_prints_their_columns(kc, &crd_file);
        creates_and_scales_a_deployment(kc);
        watch_streams_a_new_pod(kc);
        describes_and_deletes_the_deployment(kc);
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    sim.shutdown().await;
}

/// `apply --server-side` of a CRD (and the repository's, when present); a custom object is
/// printed with its printer column and schema default.
fn applies_crds_and_prints_their_columns(kc: &Path, crd_file: &Path) {
    assert!(ok(kc, &["get", "ns"]).contains("kube-system"));
    assert!(
        ok(
            kc,
            &["apply", "--server-side", "-f", crd_file.to_str().unwrap()]
        )
        .contains("serverside-applied")
    );
    // The repository's CRDs, when present (hpaplus and friends).
    let repo_crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds");
    if repo_crds.is_dir() {
        ok(
            kc,
            &["apply", "--server-side", "-f", repo_crds.to_str().unwrap()],
        );
        let (_, out) = kubectl(kc, &["get", "hpaplus"]);
        assert!(
            out.contains("No resources found") || out.contains("NAME"),
            "{out}"
        );
    } else {
        println!("deploy/crds not present; applied only the test CRD");
    }
    let gadget = crd_file.with_file_name("gadget.yaml");
    std::fs::write(
        &gadget,
        "apiVersion: example.dev/v1\nkind: Gadget\nmetadata: {name: g1}\nspec: {}\n",
    )
    .unwrap();
    ok(
        kc,
        &["apply", "--server-side", "-f", gadget.to_str().unwrap()],
    );
    let table = ok(kc, &["get", "gadgets"]);
    assert!(
        table.contains("SIZE") && table.contains('3'),
        "printer column with the schema default: {table}"
    );
}

/// `create deployment` and `scale` give 3 Running and Ready pods.
fn creates_and_scales_a_deployment(kc: &Path) {
    ok(
        kc,
        &[
            "create",
            "deployment",
            "web",
            "--image=registry.example/web:1",
        ],
    );
    ok(kc, &["scale", "deployment", "web", "--replicas", "3"]);
    let start = Instant::now();
    loop {
        let pods: Value =
            serde_json::from_str(&ok(kc, &["get", "pods", "-l", "app=web", "-o", "json"])).unwrap();
        if ready_running(&pods) == 3 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "3 pods Running and Ready within 10 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `get pods -w` streams: scaling to 4 shows a new pod.
fn watch_streams_a_new_pod(kc: &Path) {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kc)
        .args(["get", "pods", "-w", "--no-headers"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut initial = 0;
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(3)) {
        initial += 1;
        if initial == 3 {
            break;
        }
        let _ = line;
    }
    ok(kc, &["scale", "deployment", "web", "--replicas", "4"]);
    let mut streamed = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) {
            streamed.push(line);
            if streamed
                .iter()
                .any(|l| l.contains("Running") && l.contains("1/1"))
            {
                break;
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        streamed.iter().any(|l| l.contains("Running")),
        "watch streamed the new pod: {streamed:?}"
    );
}

/// `describe` shows replicas and events; `delete` garbage-collects the pods.
fn describes_and_deletes_the_deployment(kc: &Path) {
    let described = ok(kc, &["describe", "deployment", "web"]);
    assert!(
        described.contains("Replicas:") && described.contains("4 desired"),
        "{described}"
    );
    assert!(
        described.contains("ScalingReplicaSet"),
        "events are shown: {described}"
    );

    ok(kc, &["delete", "deployment", "web"]);
    let start = Instant::now();
    loop {
        let pods: Value =
            serde_json::from_str(&ok(kc, &["get", "pods", "-l", "app=web", "-o", "json"])).unwrap();
        if pods["items"].as_array().is_some_and(Vec::is_empty) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "pods are garbage-collected after the deployment is deleted"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
