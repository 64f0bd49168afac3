//! Protobuf bodies for every built-in kind: JSON → protobuf → JSON round trips of realistic
//! objects (`tests/data/protobuf/`), bytes from an independent encoder (kube-rs' `k8s-pb`
//! bindings) decoded into the JSON a real server would hold, protobuf answers (get, list,
//! watch, errors, 406 for custom resources) over HTTP, and kubectl's imperative commands, which
//! send and read protobuf. The kubectl test is skipped, with a printed reason, when `kubectl` is
//! not installed.
#![allow(clippy::unwrap_used, clippy::panic)] // integration tests: helpers fail loudly

use crate::common;

use common::kubectl::{available as kubectl_available, ok as kubectl};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use http_body_util::BodyExt;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use plimsoll_sim::protobuf;
use plimsoll_sim::registry::Registry;
use prost::Message;
use serde_json::{Value, json};

fn fixtures() -> Vec<(PathBuf, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/protobuf");
    let mut out: Vec<(PathBuf, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let v = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            (p, v)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn type_of(v: &Value) -> (String, String) {
    (
        v["apiVersion"].as_str().unwrap_or_default().to_string(),
        v["kind"].as_str().unwrap_or_default().to_string(),
    )
}

#[test]
fn every_builtin_kind_has_a_message_and_a_round_trip_fixture() {
    let fixtures: Vec<(String, String)> = fixtures().iter().map(|(_, v)| type_of(v)).collect();
    let registry = Registry::with_builtins();
    let mut served = 0;
    for def in registry.all().iter().filter(|d| !d.is_virtual()) {
        let api_version = def.preferred_api_version();
        assert!(
            protobuf::has_message(&api_version, &def.kind),
            "{api_version} {} has no protobuf message",
            def.kind
        );
        // Reviews are only created, so there is no List of them (upstream has none either).
        assert!(
            def.is_create_only()
                || protobuf::has_message(&api_version, &format!("{}List", def.kind)),
            "{api_version} {}List has no protobuf message",
            def.kind
        );
        assert!(
            fixtures.contains(&(api_version.clone(), def.kind.clone())),
            "no round-trip fixture for {api_version} {} in tests/data/protobuf",
            def.kind
        );
        served += 1;
    }
    assert!(served >= 20, "only {served} built-in kinds");
    // Custom resources and the metrics APIs have no protobuf form, as on a real server.
    assert!(!protobuf::has_message(
        "autoscaling.plimsoll.dev/v1alpha1",
        "HorizontalPodAutoscalerPlus"
    ));
    assert!(!protobuf::has_message("apps.example.com/v1", "Deployment"));
    assert!(!protobuf::has_message(
        "metrics.k8s.io/v1beta1",
        "PodMetrics"
    ));
}

/// The JSON pointers at which `got` and `want` differ.
fn diff(got: &Value, want: &Value, path: &str, out: &mut Vec<String>) {
    match (got, want) {
        (Value::Object(left), Value::Object(right)) => {
            let keys = left
                .keys()
                .chain(right.keys().filter(|k| !left.contains_key(*k)));
            for key in keys {
                let null = Value::Null;
                let (l, r) = (
                    left.get(key).unwrap_or(&null),
                    right.get(key).unwrap_or(&null),
                );
                diff(l, r, &format!("{path}/{key}"), out);
            }
        }
        (Value::Array(left), Value::Array(right)) if left.len() == right.len() => {
            for (i, (l, r)) in left.iter().zip(right).enumerate() {
                diff(l, r, &format!("{path}/{i}"), out);
            }
        }
        _ if got != want => out.push(format!("{path}: {got} != {want}")),
        _ => {}
    }
}

#[test]
fn realistic_objects_round_trip_through_protobuf() {
    let all = fixtures();
    assert!(all.len() >= 30);
    let mut changed = Vec::new();
    for (path, obj) in all {
        let bytes = protobuf::encode(&obj).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        assert!(bytes.starts_with(protobuf::MAGIC));
        let back = protobuf::decode(&bytes, None).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        diff(&back, &obj, &name, &mut changed);
    }
    assert!(
        changed.is_empty(),
        "changed in a protobuf round trip:\n{}",
        changed.join("\n")
    );
}

/// Wraps a k8s-pb message in the `k8s\0` + `runtime.Unknown` envelope.
fn envelope(api_version: &str, kind: &str, msg: &impl Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(msg.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [b"k8s\0".to_vec(), unknown.encode_to_vec()].concat()
}

/// ObjectMeta as gogo writes it from a Go client's struct: every non-pointer field present,
/// zero or not.
fn go_meta(name: &str, namespace: &str) -> meta::ObjectMeta {
    meta::ObjectMeta {
        name: Some(name.into()),
        generate_name: Some(String::new()),
        namespace: Some(namespace.into()),
        self_link: Some(String::new()),
        uid: Some(String::new()),
        resource_version: Some(String::new()),
        generation: Some(0),
        creation_timestamp: Some(meta::Time::default()),
        labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
        ..meta::ObjectMeta::default()
    }
}

#[test]
fn bytes_from_k8s_pb_decode_to_the_servers_json() {
    let cm = core::ConfigMap {
        metadata: Some(go_meta("settings", "")),
        immutable: None,
        data: BTreeMap::from([("mode".to_string(), "prod".to_string())]),
        binary_data: BTreeMap::from([("blob".to_string(), vec![0, 1, 2])]),
    };
    let got = protobuf::decode(&envelope("v1", "ConfigMap", &cm), None).unwrap();
    assert_eq!(
        got,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "labels": {"app": "web"}},
            "data": {"mode": "prod"}, "binaryData": {"blob": "AAEC"}})
    );

    let ns = core::Namespace {
        metadata: Some(go_meta("team-a", "")),
        spec: Some(core::NamespaceSpec::default()),
        status: Some(core::NamespaceStatus {
            phase: Some(String::new()),
            conditions: Vec::new(),
        }),
    };
    let got = protobuf::decode(&envelope("v1", "Namespace", &ns), None).unwrap();
    assert_eq!(
        got,
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "team-a", "labels": {"app": "web"}}, "spec": {}, "status": {}})
    );

    let svc = core::Service {
        metadata: Some(go_meta("web", "shop")),
        spec: Some(core::ServiceSpec {
            r#type: Some("ClusterIP".into()),
            selector: BTreeMap::from([("app".to_string(), "web".to_string())]),
            ports: vec![core::ServicePort {
                name: Some("80-8080".into()),
                protocol: Some("TCP".into()),
                port: Some(80),
                target_port: Some(k8s_pb::apimachinery::pkg::util::intstr::IntOrString {
                    r#type: Some(0),
                    int_val: Some(8080),
                    str_val: Some(String::new()),
                }),
                node_port: Some(0),
                ..core::ServicePort::default()
            }],
            cluster_ip: Some(String::new()),
            session_affinity: Some(String::new()),
            ..core::ServiceSpec::default()
        }),
        status: None,
    };
    let got = protobuf::decode(&envelope("v1", "Service", &svc), None).unwrap();
    assert_eq!(
        got,
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
            "spec": {"type": "ClusterIP", "selector": {"app": "web"},
                "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}]}})
    );
}

#[test]
fn pointer_zeros_stay_and_value_zeros_go_as_in_the_go_structs() {
    use k8s_pb::api::apps::v1 as apps;
    let deploy = apps::Deployment {
        metadata: Some(go_meta("web", "shop")),
        spec: Some(apps::DeploymentSpec {
            // A pointer: an explicit zero is a value.
            replicas: Some(0),
            // Not a pointer: gogo writes the zero, Go's JSON omits it.
            min_ready_seconds: Some(0),
            paused: Some(false),
            selector: Some(meta::LabelSelector {
                match_labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
                match_expressions: Vec::new(),
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta::default()),
                spec: Some(core::PodSpec {
                    containers: vec![core::Container {
                        name: Some("web".into()),
                        image: Some("nginx".into()),
                        ..core::Container::default()
                    }],
                    termination_grace_period_seconds: Some(0),
                    host_network: Some(false),
                    ..core::PodSpec::default()
                }),
            }),
            ..apps::DeploymentSpec::default()
        }),
        status: Some(apps::DeploymentStatus {
            replicas: Some(0),
            observed_generation: Some(0),
            ..apps::DeploymentStatus::default()
        }),
    };
    // No typeMeta: the URL says what the body is.
    let unknown = Unknown {
        type_meta: Some(TypeMeta::default()),
        raw: Some(deploy.encode_to_vec()),
        ..Unknown::default()
    };
    let body = [b"k8s\0".to_vec(), unknown.encode_to_vec()].concat();
    let got = protobuf::decode(&body, Some(("apps/v1", "Deployment"))).unwrap();
    assert_eq!(
        got,
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {}, "spec": {"containers": [{"name": "web", "image": "nginx"}],
                    "terminationGracePeriodSeconds": 0}}},
            "status": {}})
    );
    assert!(protobuf::decode(b"nope", None).is_err());
    // A kind the sim has no message for is refused with 415, not guessed.
    let widget = envelope("example.dev/v1", "Widget", &deploy);
    assert_eq!(protobuf::decode(&widget, None).unwrap_err().code, 415);
}

#[test]
fn negotiation_follows_the_accept_header() {
    use protobuf::{Encoding, negotiate};
    let pb = "application/vnd.kubernetes.protobuf, application/json";
    assert_eq!(negotiate(pb, true).unwrap(), Encoding::Protobuf);
    assert_eq!(negotiate(pb, false).unwrap(), Encoding::Json);
    assert_eq!(negotiate("application/json", true).unwrap(), Encoding::Json);
    assert_eq!(negotiate("", true).unwrap(), Encoding::Json);
    assert_eq!(
        negotiate("application/vnd.kubernetes.protobuf, */*", false).unwrap(),
        Encoding::Json
    );
    assert_eq!(
        negotiate("application/vnd.kubernetes.protobuf", false)
            .unwrap_err()
            .code,
        406
    );
    // Tables stay JSON.
    assert_eq!(
        negotiate(
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json",
            true
        )
        .unwrap(),
        Encoding::Json
    );
}

/// A raw request to the sim with an `Accept` header; returns status, content type and body.
async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    accept: &str,
    body: Option<(&str, Vec<u8>)>,
) -> (u16, String, Vec<u8>) {
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("accept", accept);
    if let Some((ct, _)) = &body {
        req = req.header("content-type", *ct);
    }
    let req = req
        .body(kube::client::Body::from(
            body.map(|(_, b)| b).unwrap_or_default(),
        ))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, ct, bytes)
}

/// The object inside an enveloped protobuf body, decoded with k8s-pb.
fn unwrap_envelope(bytes: &[u8]) -> (TypeMeta, Vec<u8>) {
    let unknown = Unknown::decode(bytes.strip_prefix(b"k8s\0").unwrap()).unwrap();
    (unknown.type_meta.unwrap(), unknown.raw.unwrap())
}

const PB: &str = "application/vnd.kubernetes.protobuf, application/json";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sim_answers_protobuf_to_clients_that_ask_first() {
    let (sim, client) = common::start().await;
    creates_gets_and_lists_in_protobuf(&client).await;
    errors_are_protobuf_and_tables_json(&client).await;
    custom_resources_stay_json(&client).await;
    watches_stream_protobuf_frames(&client).await;
    sim.shutdown().await;
}

async fn creates_gets_and_lists_in_protobuf(client: &kube::Client) {
    // Create through protobuf, answered in protobuf.
    let cm = core::ConfigMap {
        metadata: Some(go_meta("settings", "default")),
        data: BTreeMap::from([("mode".to_string(), "prod".to_string())]),
        ..core::ConfigMap::default()
    };
    let body = envelope("v1", "ConfigMap", &cm);
    let (code, ct, bytes) = raw(
        client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        PB,
        Some(("application/vnd.kubernetes.protobuf", body)),
    )
    .await;
    assert_eq!(
        (code, ct.as_str()),
        (201, "application/vnd.kubernetes.protobuf")
    );
    let (tm, raw_cm) = unwrap_envelope(&bytes);
    assert_eq!(
        (tm.api_version.as_deref(), tm.kind.as_deref()),
        (Some("v1"), Some("ConfigMap"))
    );
    let created = core::ConfigMap::decode(raw_cm.as_slice()).unwrap();
    let created_meta = created.metadata.unwrap();
    assert_eq!(created_meta.name.as_deref(), Some("settings"));
    assert!(!created_meta.uid.unwrap_or_default().is_empty());
    assert_eq!(created.data["mode"], "prod");

    // Get and list in protobuf; JSON when asked for JSON.
    let (_, ct, bytes) = raw(
        client,
        "GET",
        "/api/v1/namespaces/default/configmaps/settings",
        PB,
        None,
    )
    .await;
    assert_eq!(ct, "application/vnd.kubernetes.protobuf");
    assert_eq!(
        core::ConfigMap::decode(unwrap_envelope(&bytes).1.as_slice())
            .unwrap()
            .data["mode"],
        "prod"
    );
    let (_, ct, bytes) = raw(
        client,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        PB,
        None,
    )
    .await;
    assert_eq!(ct, "application/vnd.kubernetes.protobuf");
    let (tm, raw_list) = unwrap_envelope(&bytes);
    assert_eq!(tm.kind.as_deref(), Some("ConfigMapList"));
    let list = core::ConfigMapList::decode(raw_list.as_slice()).unwrap();
    assert!(
        list.items
            .iter()
            .any(|c| c.metadata.as_ref().unwrap().name.as_deref() == Some("settings"))
    );
    assert!(
        !list
            .metadata
            .unwrap()
            .resource_version
            .unwrap_or_default()
            .is_empty()
    );
    let (_, ct, _) = raw(
        client,
        "GET",
        "/api/v1/namespaces/default/configmaps/settings",
        "application/json",
        None,
    )
    .await;
    assert_eq!(ct, "application/json");
}

async fn errors_are_protobuf_and_tables_json(client: &kube::Client) {
    let (code, ct, bytes) = raw(
        client,
        "GET",
        "/api/v1/namespaces/default/configmaps/missing",
        PB,
        None,
    )
    .await;
    assert_eq!(
        (code, ct.as_str()),
        (404, "application/vnd.kubernetes.protobuf")
    );
    let (tm, raw_status) = unwrap_envelope(&bytes);
    assert_eq!(tm.kind.as_deref(), Some("Status"));
    let status = meta::Status::decode(raw_status.as_slice()).unwrap();
    assert_eq!(
        (status.code, status.reason.as_deref()),
        (Some(404), Some("NotFound"))
    );

    // Tables stay JSON.
    let (_, ct, _) = raw(
        client,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        None,
    )
    .await;
    assert_eq!(ct, "application/json");
}

/// Custom resources: JSON when the client also takes JSON, 406 when it takes only protobuf.
async fn custom_resources_stay_json(client: &kube::Client) {
    let crd = serde_json::to_vec(&json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.dev"},
        "spec": {"group": "example.dev", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})).unwrap();
    let (code, ct, _) = raw(
        client,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        PB,
        Some(("application/json", crd)),
    )
    .await;
    assert_eq!(
        (code, ct.as_str()),
        (201, "application/vnd.kubernetes.protobuf")
    );
    let (code, ct, _) = raw(
        client,
        "GET",
        "/apis/example.dev/v1/namespaces/default/widgets",
        "application/vnd.kubernetes.protobuf, */*",
        None,
    )
    .await;
    assert_eq!((code, ct.as_str()), (200, "application/json"));
    let (code, _, _) = raw(
        client,
        "GET",
        "/apis/example.dev/v1/namespaces/default/widgets",
        "application/vnd.kubernetes.protobuf",
        None,
    )
    .await;
    assert_eq!(code, 406);
    // Refused before the write, as kube-apiserver negotiates first.
    let widget = serde_json::to_vec(&json!({"apiVersion": "example.dev/v1", "kind": "Widget",
        "metadata": {"name": "w1"}}))
    .unwrap();
    let (code, _, _) = raw(
        client,
        "POST",
        "/apis/example.dev/v1/namespaces/default/widgets",
        "application/vnd.kubernetes.protobuf",
        Some(("application/json", widget)),
    )
    .await;
    assert_eq!(code, 406);
    let (code, _, _) = raw(
        client,
        "GET",
        "/apis/example.dev/v1/namespaces/default/widgets/w1",
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 404);
}

/// Watch: length-prefixed WatchEvent frames whose objects are enveloped.
async fn watches_stream_protobuf_frames(client: &kube::Client) {
    let (code, ct, bytes) = raw(
        client,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1&allowWatchBookmarks=true",
        PB,
        None,
    )
    .await;
    assert_eq!(
        (code, ct.as_str()),
        (200, "application/vnd.kubernetes.protobuf;stream=watch")
    );
    let mut frames = Vec::new();
    let mut rest = bytes.as_slice();
    while rest.len() >= 4 {
        let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        let event = meta::WatchEvent::decode(&rest[4..4 + len]).unwrap();
        rest = &rest[4 + len..];
        let (tm, obj) = unwrap_envelope(&event.object.unwrap().raw.unwrap());
        frames.push((event.r#type.unwrap(), tm.kind.unwrap(), obj));
    }
    assert!(rest.is_empty(), "a partial frame");
    let (_, kind, obj) = frames
        .iter()
        .find(|(t, _, _)| t == "ADDED")
        .expect("an ADDED frame");
    assert_eq!(kind, "ConfigMap");
    assert_eq!(
        core::ConfigMap::decode(obj.as_slice()).unwrap().data["mode"],
        "prod"
    );
    assert!(frames.iter().any(|(t, _, _)| t == "BOOKMARK"));
}

fn get_json(kc: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&kubectl(kc, &all)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_imperative_commands_speak_protobuf() {
    if !kubectl_available() {
        println!("skipping kubectl_imperative_commands_speak_protobuf: kubectl is not installed");
        return;
    }
    let (sim, _) = common::start().await;
    let dir = common::kubectl::scratch_dir("protobuf");
    let kc = dir.join("kubeconfig");
    std::fs::write(&kc, sim.kubeconfig()).unwrap();
    let kc2 = kc.clone();
    tokio::task::spawn_blocking(move || imperative_flow(&kc2))
        .await
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    sim.shutdown().await;
}

fn imperative_flow(kc: &Path) {
    creates_core_kinds(kc);
    creates_policy_and_workloads(kc);
    reads_back_as_yaml(kc);
    scales_and_drains(kc);
}

/// `create namespace|configmap|secret generic|serviceaccount|service clusterip`.
fn creates_core_kinds(kc: &Path) {
    let k = |args: &[&str]| kubectl(kc, args);
    assert!(k(&["create", "namespace", "shop"]).contains("namespace/shop created"));
    let ns = get_json(kc, &["get", "namespace", "shop"]);
    assert_eq!(ns["status"]["phase"], "Active");
    // Written from an empty Go field, so absent, not "".
    assert!(ns["metadata"].get("namespace").is_none());

    k(&[
        "-n",
        "shop",
        "create",
        "configmap",
        "settings",
        "--from-literal=mode=prod",
    ]);
    assert_eq!(
        get_json(kc, &["-n", "shop", "get", "configmap", "settings"])["data"]["mode"],
        "prod"
    );

    k(&[
        "-n",
        "shop",
        "create",
        "secret",
        "generic",
        "creds",
        "--from-literal=password=hunter2",
    ]);
    let secret = get_json(kc, &["-n", "shop", "get", "secret", "creds"]);
    assert_eq!(secret["data"]["password"], "aHVudGVyMg==");

    k(&["-n", "shop", "create", "serviceaccount", "robot"]);
    assert_eq!(
        get_json(kc, &["-n", "shop", "get", "serviceaccount", "robot"])["metadata"]["name"],
        "robot"
    );

    k(&[
        "-n",
        "shop",
        "create",
        "service",
        "clusterip",
        "web",
        "--tcp=80:8080",
    ]);
    let svc = get_json(kc, &["-n", "shop", "get", "service", "web"]);
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(svc["spec"]["ports"][0]["port"], 80);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);
    assert_eq!(svc["spec"]["selector"]["app"], "web");
}

/// `create pdb|job|deployment`.
fn creates_policy_and_workloads(kc: &Path) {
    let k = |args: &[&str]| kubectl(kc, args);

    k(&[
        "-n",
        "shop",
        "create",
        "pdb",
        "web",
        "--selector=app=web",
        "--min-available=50%",
    ]);
    let pdb = get_json(kc, &["-n", "shop", "get", "pdb", "web"]);
    assert_eq!(pdb["spec"]["minAvailable"], "50%");
    assert_eq!(pdb["spec"]["selector"]["matchLabels"]["app"], "web");

    k(&[
        "-n",
        "shop",
        "create",
        "job",
        "migrate",
        "--image=busybox",
        "--",
        "echo",
        "hi",
    ]);
    let job = get_json(kc, &["-n", "shop", "get", "job", "migrate"]);
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "busybox");
    assert_eq!(container["command"], json!(["echo", "hi"]));
    assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");

    k(&[
        "-n",
        "shop",
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=0",
        "--port=8080",
    ]);
    let deploy = get_json(kc, &["-n", "shop", "get", "deployment", "web"]);
    // A pointer field: the explicit zero survives protobuf.
    assert_eq!(deploy["spec"]["replicas"], 0);
    assert_eq!(
        deploy["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
        8080
    );
    assert_eq!(
        deploy["spec"]["strategy"]["rollingUpdate"]["maxSurge"],
        "25%"
    );
}

/// `-o yaml` of each, read back through kubectl's decoders.
fn reads_back_as_yaml(kc: &Path) {
    let k = |args: &[&str]| kubectl(kc, args);
    for what in [
        "configmap/settings",
        "secret/creds",
        "serviceaccount/robot",
        "service/web",
        "pdb/web",
        "job/migrate",
        "deployment/web",
    ] {
        assert!(
            k(&["-n", "shop", "get", what, "-o", "yaml"]).contains("name: "),
            "{what}"
        );
    }
}

/// `scale` (the scale subresource) and `drain` (node get, cordon, pod list and evictions, all
/// through the typed clients).
fn scales_and_drains(kc: &Path) {
    let k = |args: &[&str]| kubectl(kc, args);
    assert!(k(&["-n", "shop", "scale", "deployment", "web", "--replicas=3"]).contains("scaled"));
    assert_eq!(
        get_json(kc, &["-n", "shop", "get", "deployment", "web"])["spec"]["replicas"],
        3
    );

    let out = k(&[
        "drain",
        "sim-node-1",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--force",
        "--timeout=60s",
    ]);
    assert!(out.contains("drained"), "{out}");
    assert_eq!(
        get_json(kc, &["get", "node", "sim-node-1"])["spec"]["unschedulable"],
        true
    );
}
