//! `kubectl` against the sim: the acceptance flow of issue 3, and every command a new user
//! tries first (imperative `create` of each built-in kind and of RBAC objects, `describe` with
//! its Events section, `get events`, `auth can-i`, and `apply` of an invalid HPA+ refused at
//! write time). Each feature has its own test so a failure names the part of the sim that is
//! wrong. Skipped, with a printed reason, when `kubectl` is not installed.
#![allow(clippy::unwrap_used, clippy::panic)] // integration tests: helpers fail loudly

use crate::common;

use std::process::{Command, Stdio};

use common::kubectl::{available as kubectl_available, ok, run as kubectl, scratch_dir};

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::Api;
use kube::api::PostParams;
use plimsoll_sim::SimHandle;
use serde_json::{Value, json};

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
    let Some(ks) = KubectlSim::start("kubectl_acceptance_flow").await else {
        return;
    };
    ks.run(|kc, dir| {
        let crd_file = dir.join("crd.yaml");
        std::fs::write(&crd_file, CRD).unwrap();
        applies_crds_and_prints_their_columns(kc, &crd_file);
        creates_and_scales_a_deployment(kc);
        watch_streams_a_new_pod(kc);
        describes_and_deletes_the_deployment(kc);
    })
    .await;
    ks.stop().await;
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

/// A sim with a kubeconfig for it in a fresh directory.
struct KubectlSim {
    sim: SimHandle,
    client: kube::Client,
    dir: PathBuf,
    kubeconfig: PathBuf,
}

impl KubectlSim {
    /// A sim with a kubeconfig for `test`; `None`, saying why, when kubectl is not installed.
    async fn start(test: &str) -> Option<Self> {
        if !kubectl_available() {
            println!("skipping {test}: kubectl is not installed");
            return None;
        }
        let (sim, client) = common::start().await;
        let dir = scratch_dir("kubectl");
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, sim.kubeconfig()).unwrap();
        Some(Self {
            sim,
            client,
            dir,
            kubeconfig,
        })
    }

    /// Runs blocking kubectl steps with the kubeconfig and the scratch directory.
    async fn run<F>(&self, steps: F)
    where
        F: FnOnce(&Path, &Path) + Send + 'static,
    {
        let kc = self.kubeconfig.clone();
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || steps(&kc, &dir))
            .await
            .unwrap();
    }

    async fn stop(self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        self.sim.shutdown().await;
    }
}

/// `kubectl get KIND NAME -o json`.
fn get_json(kc: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&ok(kc, &all)).unwrap()
}

/// Applies the repository's CRDs (HPA+ and friends) server-side.
fn apply_repo_crds(kc: &Path) {
    let repo_crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds");
    ok(
        kc,
        &["apply", "--server-side", "-f", repo_crds.to_str().unwrap()],
    );
}

/// An HPA+ manifest for Deployment `web`.
fn hpaplus_yaml(name: &str, min: i64, max: i64, extra: &str) -> String {
    format!(
        "apiVersion: autoscaling.plimsoll.dev/v1alpha1
kind: HorizontalPodAutoscalerPlus
metadata: {{name: {name}}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}
  minReplicas: {min}
  maxReplicas: {max}
  metrics:
  - type: Resource
    resource: {{name: cpu, target: {{type: Utilization, averageUtilization: 60}}}}
{extra}"
    )
}

/// Runs `kubectl create …` and expects kubectl's one-line confirmation.
fn created(kc: &Path, args: &[&str], expect: &str) {
    let out = ok(kc, args);
    assert_eq!(out.trim(), expect, "kubectl {args:?}");
}

/// `kubectl create namespace|configmap|secret generic|serviceaccount|service clusterip|pdb|job`:
/// kubectl sends these built-in kinds as protobuf; each is created and reads back as sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_builtin_kinds() {
    let Some(ks) = KubectlSim::start("kubectl_create_builtin_kinds").await else {
        return;
    };
    ks.run(|kc, _| {
        creates_configuration_kinds(kc);
        creates_workload_kinds(kc);
        let listed = ok(
            kc,
            &["get", "configmap,secret,serviceaccount,service,pdb,job"],
        );
        for name in [
            "configmap/settings",
            "secret/token",
            "serviceaccount/builder",
            "service/web",
            "poddisruptionbudget.policy/web",
            "job.batch/once",
        ] {
            assert!(listed.contains(name), "{name} listed: {listed}");
        }
    })
    .await;
    ks.stop().await;
}

/// Namespace, ConfigMap, Secret and ServiceAccount.
fn creates_configuration_kinds(kc: &Path) {
    created(
        kc,
        &["create", "namespace", "team-a"],
        "namespace/team-a created",
    );
    let ns = get_json(kc, &["get", "namespace", "team-a"]);
    assert_eq!(ns["status"]["phase"], "Active");

    created(
        kc,
        &[
            "create",
            "configmap",
            "settings",
            "--from-literal=mode=fast",
        ],
        "configmap/settings created",
    );
    let cm = get_json(kc, &["get", "configmap", "settings"]);
    assert_eq!(cm["data"], json!({"mode": "fast"}));

    created(
        kc,
        &[
            "create",
            "secret",
            "generic",
            "token",
            "--from-literal=key=v",
        ],
        "secret/token created",
    );
    let secret = get_json(kc, &["get", "secret", "token"]);
    assert_eq!(secret["type"], "Opaque");
    assert_eq!(
        secret["data"],
        json!({"key": "dg=="}),
        "base64 of the value"
    );

    created(
        kc,
        &["create", "serviceaccount", "builder"],
        "serviceaccount/builder created",
    );
    get_json(kc, &["get", "serviceaccount", "builder"]);
}

/// Service, PodDisruptionBudget and Job.
fn creates_workload_kinds(kc: &Path) {
    created(
        kc,
        &["create", "service", "clusterip", "web", "--tcp=80:8080"],
        "service/web created",
    );
    let svc = get_json(kc, &["get", "service", "web"]);
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(svc["spec"]["ports"][0]["port"], 80);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);
    assert_eq!(svc["spec"]["selector"], json!({"app": "web"}));
    assert!(
        svc["spec"]["clusterIP"]
            .as_str()
            .is_some_and(|ip| !ip.is_empty()),
        "a cluster IP is allocated: {svc}"
    );

    created(
        kc,
        &[
            "create",
            "pdb",
            "web",
            "--selector=app=web",
            "--min-available=1",
        ],
        "poddisruptionbudget.policy/web created",
    );
    let pdb = get_json(kc, &["get", "pdb", "web"]);
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        json!({"app": "web"})
    );

    created(
        kc,
        &["create", "job", "once", "--image=registry.example/job:1"],
        "job.batch/once created",
    );
    let job = get_json(kc, &["get", "job", "once"]);
    assert_eq!(
        job["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example/job:1"
    );
    assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
}

/// `kubectl create role|rolebinding|clusterrole`: the RBAC API stores and lists them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_rbac_objects() {
    let Some(ks) = KubectlSim::start("kubectl_create_rbac_objects").await else {
        return;
    };
    ks.run(|kc, _| {
        let out = ok(
            kc,
            &[
                "create",
                "role",
                "pod-reader",
                "--verb=get,list,watch",
                "--resource=pods",
            ],
        );
        assert_eq!(
            out.trim(),
            "role.rbac.authorization.k8s.io/pod-reader created"
        );
        let role = get_json(kc, &["get", "role", "pod-reader"]);
        assert_eq!(
            role["rules"],
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}])
        );

        let out = ok(
            kc,
            &[
                "create",
                "rolebinding",
                "read-pods",
                "--role=pod-reader",
                "--serviceaccount=default:builder",
            ],
        );
        assert_eq!(
            out.trim(),
            "rolebinding.rbac.authorization.k8s.io/read-pods created"
        );
        let binding = get_json(kc, &["get", "rolebinding", "read-pods"]);
        assert_eq!(
            binding["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"})
        );
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "builder", "namespace": "default"}])
        );

        let out = ok(
            kc,
            &[
                "create",
                "clusterrole",
                "scale-reader",
                "--verb=get",
                "--resource=deployments.apps/scale",
            ],
        );
        assert_eq!(
            out.trim(),
            "clusterrole.rbac.authorization.k8s.io/scale-reader created"
        );
        let cr = get_json(kc, &["get", "clusterrole", "scale-reader"]);
        assert_eq!(
            cr["rules"],
            json!([{"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["get"]}])
        );
        let listed = ok(kc, &["get", "roles,rolebindings"]);
        assert!(
            listed.contains("role.rbac.authorization.k8s.io/pod-reader"),
            "{listed}"
        );
        assert!(
            listed.contains("rolebinding.rbac.authorization.k8s.io/read-pods"),
            "{listed}"
        );
    })
    .await;
    ks.stop().await;
}

/// Writes an `events.k8s.io/v1` Event about `regarding`, as kube-runtime's recorder does.
async fn record_event(client: &kube::Client, regarding: &Value, reason: &str, note: &str) {
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    let event = serde_json::from_value(json!({
        "metadata": {"generateName": format!("{}.", regarding["name"].as_str().unwrap())},
        "eventTime": jiff::Timestamp::now().to_string(),
        "reportingController": "hpa-plus",
        "reportingInstance": "hpa-plus-0",
        "action": "Scale",
        "reason": reason,
        "note": note,
        "type": "Normal",
        "regarding": regarding,
    }))
    .unwrap();
    events.create(&PostParams::default(), &event).await.unwrap();
}

/// The `regarding` reference of an object read with kubectl.
fn reference(obj: &Value) -> Value {
    json!({
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "namespace": obj["metadata"]["namespace"],
        "uid": obj["metadata"]["uid"],
    })
}

/// `kubectl describe` of a Deployment and of an HPA+: both show their Events, including those
/// written through `events.k8s.io/v1` (which describe reads as `core/v1`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_describe_shows_events() {
    let Some(ks) = KubectlSim::start("kubectl_describe_shows_events").await else {
        return;
    };
    let (tx, rx) = std::sync::mpsc::channel();
    ks.run(move |kc, dir| {
        apply_repo_crds(kc);
        ok(
            kc,
            &[
                "create",
                "deployment",
                "web",
                "--image=registry.example/web:1",
            ],
        );
        let file = dir.join("hpaplus.yaml");
        std::fs::write(&file, hpaplus_yaml("web", 1, 5, "")).unwrap();
        ok(kc, &["apply", "-f", file.to_str().unwrap()]);
        let hpa = get_json(kc, &["get", "hpaplus", "web"]);
        let dep = get_json(kc, &["get", "deployment", "web"]);
        tx.send((reference(&hpa), reference(&dep))).unwrap();
    })
    .await;
    let (hpa, dep) = rx.recv().unwrap();
    record_event(
        &ks.client,
        &hpa,
        "SuccessfulRescale",
        "New size: 3; reason: cpu above target",
    )
    .await;
    record_event(&ks.client, &dep, "Tuned", "requests lowered by the test").await;
    ks.run(|kc, _| {
        let described = ok(kc, &["describe", "hpaplus", "web"]);
        assert!(
            described.contains("Name:") && described.contains("web"),
            "{described}"
        );
        assert!(
            described.contains("Min Replicas:") && described.contains("Max Replicas:"),
            "spec fields: {described}"
        );
        let events = described
            .split("Events:")
            .nth(1)
            .unwrap_or_else(|| panic!("an Events section: {described}"));
        assert!(
            events.contains("Type")
                && events.contains("Reason")
                && events.contains("From")
                && events.contains("Message"),
            "{events}"
        );
        assert!(
            events.contains("Normal") && events.contains("SuccessfulRescale"),
            "{events}"
        );
        assert!(
            events.contains("hpa-plus"),
            "From is the reporting controller: {events}"
        );
        assert!(
            events.contains("New size: 3; reason: cpu above target"),
            "{events}"
        );

        let described = ok(kc, &["describe", "deployment", "web"]);
        let events = described
            .split("Events:")
            .nth(1)
            .unwrap_or_else(|| panic!("an Events section: {described}"));
        assert!(
            events.contains("ScalingReplicaSet"),
            "the sim's own core/v1 event: {events}"
        );
        assert!(
            events.contains("Tuned") && events.contains("requests lowered by the test"),
            "the events.k8s.io event: {events}"
        );
    })
    .await;
    ks.stop().await;
}

/// `kubectl get events` prints the server's Event table: LAST SEEN, TYPE, REASON, OBJECT,
/// MESSAGE, with events written through either API group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_events_columns() {
    let Some(ks) = KubectlSim::start("kubectl_get_events_columns").await else {
        return;
    };
    let (tx, rx) = std::sync::mpsc::channel();
    ks.run(move |kc, dir| {
        apply_repo_crds(kc);
        let file = dir.join("hpaplus.yaml");
        std::fs::write(&file, hpaplus_yaml("web", 1, 5, "")).unwrap();
        ok(kc, &["apply", "-f", file.to_str().unwrap()]);
        tx.send(reference(&get_json(kc, &["get", "hpaplus", "web"])))
            .unwrap();
    })
    .await;
    let hpa = rx.recv().unwrap();
    record_event(
        &ks.client,
        &hpa,
        "SuccessfulRescale",
        "New size: 3; reason: cpu above target",
    )
    .await;
    ks.run(|kc, _| {
        let out = ok(kc, &["get", "events"]);
        let mut lines = out.lines();
        let header: Vec<&str> = lines
            .next()
            .unwrap_or_default()
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(
            header,
            ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
            "{out}"
        );
        let row = lines
            .find(|l| l.contains("SuccessfulRescale"))
            .unwrap_or_else(|| panic!("the events.k8s.io event is listed: {out}"));
        assert!(row.contains("Normal"), "{row}");
        assert!(
            row.contains("horizontalpodautoscalerplus/web"),
            "OBJECT is kind/name: {row}"
        );
        assert!(
            row.contains("New size: 3; reason: cpu above target"),
            "{row}"
        );
        let wide = ok(kc, &["get", "events", "-o", "wide"]);
        let header = wide.lines().next().unwrap_or_default();
        for column in ["SUBOBJECT", "SOURCE", "FIRST SEEN", "COUNT", "NAME"] {
            assert!(header.contains(column), "wide column {column}: {header}");
        }
        let by_field = ok(
            kc,
            &[
                "get",
                "events",
                "--field-selector",
                "involvedObject.kind=HorizontalPodAutoscalerPlus,involvedObject.name=web",
            ],
        );
        assert!(
            by_field.contains("SuccessfulRescale"),
            "field selector on involvedObject: {by_field}"
        );
        let (_, none) = kubectl(
            kc,
            &[
                "get",
                "events",
                "--field-selector",
                "involvedObject.name=other",
            ],
        );
        assert!(none.contains("No resources found"), "{none}");
    })
    .await;
    ks.stop().await;
}

/// `kubectl auth can-i` for the admin and, with `--as`, for a service account whose Role
/// allows reading pods and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i() {
    let Some(ks) = KubectlSim::start("kubectl_auth_can_i").await else {
        return;
    };
    let post = PostParams::default();
    let roles: Api<k8s_openapi::api::rbac::v1::Role> =
        Api::namespaced(ks.client.clone(), "default");
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
        Api::namespaced(ks.client.clone(), "default");
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(ks.client.clone(), "default");
    sas.create(
        &post,
        &serde_json::from_value(json!({"metadata": {"name": "reader"}})).unwrap(),
    )
    .await
    .unwrap();
    roles
        .create(&post, &serde_json::from_value(json!({"metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]})).unwrap())
        .await
        .unwrap();
    bindings
        .create(&post, &serde_json::from_value(json!({"metadata": {"name": "reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "default"}]})).unwrap())
        .await
        .unwrap();
    ks.run(|kc, _| {
        let can_i = |args: &[&str]| {
            let mut all = vec!["auth", "can-i"];
            all.extend(args);
            let (allowed, out) = kubectl(kc, &all);
            (allowed, out.trim().to_string())
        };
        let sa = "--as=system:serviceaccount:default:reader";
        assert_eq!(
            can_i(&["create", "deployments"]),
            (true, "yes".into()),
            "the admin may"
        );
        assert_eq!(
            can_i(&["*", "*"]),
            (true, "yes".into()),
            "the admin may do anything"
        );
        assert_eq!(
            can_i(&["list", "pods", sa]),
            (true, "yes".into()),
            "granted by the Role"
        );
        let (allowed, out) = can_i(&["delete", "pods", sa]);
        assert!(
            !allowed && out.starts_with("no"),
            "delete is not granted: {out}"
        );
        let (allowed, out) = can_i(&["list", "pods", "--namespace=kube-system", sa]);
        assert!(
            !allowed && out.starts_with("no"),
            "a Role grants in its namespace only: {out}"
        );
        let (allowed, out) = can_i(&[
            "get",
            "secrets",
            "--as=system:serviceaccount:default:nobody",
        ]);
        assert!(
            !allowed && out.starts_with("no"),
            "an unbound service account: {out}"
        );
    })
    .await;
    ks.stop().await;
}

/// `kubectl apply` of an HPA+ with minReplicas > maxReplicas (or a negative tolerance) is
/// refused at write time, the message naming the fields; nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_invalid_hpaplus_is_refused() {
    let Some(ks) = KubectlSim::start("kubectl_apply_invalid_hpaplus_is_refused").await else {
        return;
    };
    ks.run(|kc, dir| {
        apply_repo_crds(kc);
        let file = dir.join("inverted.yaml");
        std::fs::write(&file, hpaplus_yaml("inverted", 10, 2, "")).unwrap();
        let (applied, out) = kubectl(kc, &["apply", "-f", file.to_str().unwrap()]);
        assert!(!applied, "min > max is refused: {out}");
        assert!(out.contains("is invalid"), "{out}");
        assert!(
            out.contains("spec.minReplicas") || out.contains("spec.maxReplicas"),
            "the message names the field: {out}"
        );
        assert!(
            out.contains("minReplicas") && out.contains("maxReplicas"),
            "{out}"
        );
        let (_, out) = kubectl(kc, &["get", "hpaplus", "inverted"]);
        assert!(
            out.contains("NotFound") || out.contains("not found"),
            "nothing stored: {out}"
        );

        let file = dir.join("tolerance.yaml");
        std::fs::write(
            &file,
            hpaplus_yaml("tolerance", 1, 5, "  tolerance: -0.1\n"),
        )
        .unwrap();
        let (applied, out) = kubectl(kc, &["apply", "-f", file.to_str().unwrap()]);
        assert!(!applied, "a negative tolerance is refused: {out}");
        assert!(
            out.contains("spec.tolerance"),
            "the message names the field: {out}"
        );

        let file = dir.join("valid.yaml");
        std::fs::write(&file, hpaplus_yaml("valid", 2, 10, "")).unwrap();
        ok(kc, &["apply", "-f", file.to_str().unwrap()]);
    })
    .await;
    ks.stop().await;
}

/// A VPA with a recommendation, for `kubectl get vpa`.
const VPA: &str = "apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata: {name: web}
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  updatePolicy: {updateMode: Initial}
";

/// What a recommender writes: two containers' targets and the upstream conditions.
const VPA_STATUS: &str = r#"{"status": {
  "recommendation": {"containerRecommendations": [
    {"containerName": "app", "target": {"cpu": "250m", "memory": "262144k"},
     "lowerBound": {"cpu": "100m", "memory": "100Mi"}, "upperBound": {"cpu": "1", "memory": "1Gi"}},
    {"containerName": "sidecar", "target": {"cpu": "15m", "memory": "10Mi"}}]},
  "conditions": [
    {"type": "LowConfidence", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"},
    {"type": "RecommendationProvided", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}"#;

/// A CronHPA on Deployment `web` with one daily job.
const CRONHPA: &str = "apiVersion: autoscaling.plimsoll.dev/v1alpha1
kind: CronHorizontalPodAutoscaler
metadata: {name: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  jobs:
  - {name: morning, schedule: '0 0 8 * * *', targetSize: 3}
";

/// The printer columns of the repository's CRDs are the API server's: `kubectl get vpa` shows
/// the recommendation (JSONPath with `[0]` and a `[?(@.type==…)]` filter), and with cron-hpa
/// running in-process `kubectl get cronhpa` shows the next run and `kubectl wait
/// --for=condition=Ready` returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_shows_printer_columns_of_the_repository_crds() {
    let Some(ks) = KubectlSim::start("kubectl_get_shows_printer_columns").await else {
        return;
    };
    let kubeconfig = ks.kubeconfig.clone();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let cron_hpa = {
        use clap::Parser as _;
        let args = [
            "cron-hpa".to_owned(),
            format!("--kubeconfig={}", kubeconfig.display()),
            "--metrics-address=127.0.0.1:0".to_owned(),
            "--log-filter=warn".to_owned(),
            "--lease-namespace=default".to_owned(),
        ];
        let config = plimsoll_cron_hpa::cli::Args::try_parse_from(args)
            .unwrap()
            .into_config();
        tokio::spawn(plimsoll_cron_hpa::run(config, shutdown.clone()))
    };
    ks.run(|kc, dir| {
        apply_repo_crds(kc);
        ok(
            kc,
            &[
                "create",
                "deployment",
                "web",
                "--image=registry.example/web:1",
            ],
        );

        vpa_columns_show_the_target(kc, dir);
        cronhpa_shows_the_next_run_and_waits_for_ready(kc, dir);
    })
    .await;
    shutdown.cancel();
    let _ = cron_hpa.await;
    ks.stop().await;
}

/// `kubectl get vpa` on a VPA with a recommendation: the `[0]` and `[?(@.type==…)]` columns.
fn vpa_columns_show_the_target(kc: &Path, dir: &Path) {
    let vpa = dir.join("vpa.yaml");
    std::fs::write(&vpa, VPA).unwrap();
    ok(kc, &["apply", "-f", vpa.to_str().unwrap()]);
    ok(
        kc,
        &[
            "patch",
            "vpa",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            VPA_STATUS,
        ],
    );
    let table = ok(kc, &["get", "vpa", "web"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "MODE", "CPU", "MEM", "PROVIDED", "AGE"],
        "{table}"
    );
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        &row[..5],
        ["web", "Initial", "250m", "262144k", "True"],
        "{table}"
    );
}

/// With cron-hpa running: `kubectl wait --for=condition=Ready`, the NEXT RUN column, and a
/// CronHPA whose target does not exist is not ready.
fn cronhpa_shows_the_next_run_and_waits_for_ready(kc: &Path, dir: &Path) {
    let cron = dir.join("cronhpa.yaml");
    std::fs::write(&cron, CRONHPA).unwrap();
    ok(kc, &["apply", "-f", cron.to_str().unwrap()]);
    let waited = ok(
        kc,
        &[
            "wait",
            "--for=condition=Ready",
            "cronhpa/web",
            "--timeout=60s",
        ],
    );
    assert!(waited.contains("condition met"), "{waited}");
    let next = ok(
        kc,
        &["get", "cronhpa", "web", "-o", "jsonpath={.status.nextRun}"],
    );
    let next: jiff::Timestamp = next.trim().parse().expect("status.nextRun is a time");
    let time = next.to_zoned(jiff::tz::TimeZone::UTC);
    assert_eq!(
        (time.hour(), time.minute(), time.second()),
        (8, 0, 0),
        "{next}"
    );
    assert!(next > jiff::Timestamp::now(), "{next}");
    let table = ok(kc, &["get", "cronhpa"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap()
        .split("  ")
        .filter(|s| !s.is_empty())
        .map(str::trim)
        .collect();
    assert_eq!(
        header,
        ["NAME", "TARGET", "JOBS", "READY", "NEXT RUN", "AGE"],
        "{table}"
    );
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        &row[..5],
        ["web", "web", "1", "True", next.to_string().as_str()],
        "{table}"
    );

    // A CronHPA whose target does not exist is not ready, and says why.
    let missing = CRONHPA.replace("{name: web}", "{name: lost}").replace(
        "kind: Deployment, name: web}",
        "kind: Deployment, name: nowhere}",
    );
    std::fs::write(&cron, missing).unwrap();
    ok(kc, &["apply", "-f", cron.to_str().unwrap()]);
    ok(
        kc,
        &[
            "wait",
            "--for=condition=Ready=false",
            "cronhpa/lost",
            "--timeout=60s",
        ],
    );
    let reason = ok(
        kc,
        &[
            "get",
            "cronhpa",
            "lost",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].reason}",
        ],
    );
    assert_eq!(reason.trim(), "TargetUnresolved");
}
