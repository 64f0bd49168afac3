//! Mutating webhooks over TLS, fault injection with kube-runtime's watcher, and the metrics APIs.
#![allow(clippy::unwrap_used, clippy::panic)] // integration tests: helpers fail loudly

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{code, eventually, start, start_with};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use plimsoll_sim::tls::CertificateAuthority;
use plimsoll_sim::{Fault, LoadProfile, LoadSpec, ServiceAddress, SimConfig, base64};
use serde_json::{Value, json};

/// A webhook server on 127.0.0.1 that labels every pod `mutated=yes`; counts its calls.
async fn webhook_server(
    ca: &CertificateAuthority,
    calls: Arc<AtomicUsize>,
) -> std::net::SocketAddr {
    let cert = ca.issue(&["hook.default.svc"]).unwrap();
    let tls = plimsoll_sim::tls::server_config(&cert).unwrap();
    let router = axum::Router::new().route(
        "/mutate",
        axum::routing::post(move |body: axum::Json<Value>| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                let uid = body.0["request"]["uid"].clone();
                let patch = json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]);
                axum::Json(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "response": {"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": base64::encode(patch.to_string().as_bytes())}}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(plimsoll_sim::tls::serve(
        listener,
        Some(tls),
        router,
        tokio_util::sync::CancellationToken::new(),
    ));
    addr
}

fn webhook_config(name: &str, ca_pem: &str, policy: &str) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": {"name": name},
        "webhooks": [{"name": format!("{name}.example.dev"), "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": policy, "timeoutSeconds": 5,
            "clientConfig": {"service": {"namespace": "default", "name": "hook", "port": 443, "path": "/mutate"}, "caBundle": base64::encode(ca_pem.as_bytes())},
            "objectSelector": {"matchLabels": {"hooked": "true"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}]})
}

fn pod(name: &str, hooked: bool) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"hooked": hooked.to_string()}}, "spec": {"containers": [{"name": "c", "image": "x"}]}})).unwrap()
}

async fn put_webhook(client: &kube::Client, obj: &Value) {
    let ar = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "MutatingWebhookConfiguration",
        ),
        "mutatingwebhookconfigurations",
    );
    let api: Api<kube::core::DynamicObject> = Api::all_with(client.clone(), &ar);
    let name = obj["metadata"]["name"].as_str().unwrap();
    let _ = api.delete(name, &kube::api::DeleteParams::default()).await;
    api.create(
        &PostParams::default(),
        &serde_json::from_value(obj.clone()).unwrap(),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_over_tls_and_failure_policy() {
    let (sim, client) = start().await;
    let webhook_ca = CertificateAuthority::generate("webhook-ca").unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let addr = webhook_server(&webhook_ca, calls.clone()).await;
    sim.register_webhook_service(ServiceAddress {
        namespace: "default".into(),
        name: "hook".into(),
        port: 443,
        address: addr,
    });
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    // Right caBundle: the pod is mutated; the objectSelector skips unlabelled pods.
    put_webhook(
        &client,
        &webhook_config("good", &webhook_ca.cert_pem, "Fail"),
    )
    .await;
    let p = pods
        .create(&PostParams::default(), &pod("a", true))
        .await
        .unwrap();
    assert_eq!(
        p.metadata
            .labels
            .unwrap()
            .get("mutated")
            .map(String::as_str),
        Some("yes")
    );
    let p = pods
        .create(&PostParams::default(), &pod("b", false))
        .await
        .unwrap();
    assert!(!p.metadata.labels.unwrap().contains_key("mutated"));
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // Wrong caBundle (the sim's own CA did not sign the webhook): TLS fails.
    put_webhook(&client, &webhook_config("good", &sim.ca_pem, "Fail")).await;
    let err = pods
        .create(&PostParams::default(), &pod("c", true))
        .await
        .unwrap_err();
    assert_eq!(
        code(&err),
        500,
        "failurePolicy Fail rejects the write: {err}"
    );
    assert!(err.to_string().contains("failed calling webhook"), "{err}");
    put_webhook(&client, &webhook_config("good", &sim.ca_pem, "Ignore")).await;
    let p = pods
        .create(&PostParams::default(), &pod("d", true))
        .await
        .unwrap();
    assert!(
        !p.metadata.labels.unwrap().contains_key("mutated"),
        "failurePolicy Ignore admits unmutated"
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "TLS verification failed before any request"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_recovers_from_dropped_connections_and_410() {
    let (sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let seen = Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    let seen2 = seen.clone();
    let task = tokio::spawn(async move {
        // With backoff, as every watcher in the product runs: without it a retry that fails at
        // once (connection refused, once the sim is shut down) never yields, so the task
        // cannot be aborted and the runtime never shuts down (the test hung CI for an hour).
        let mut stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = stream.next().await {
            if let Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) = ev {
                seen2.lock().unwrap().insert(cm.metadata.name.unwrap());
            }
        }
    });
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mk =
        |n: &str| serde_json::from_value::<ConfigMap>(json!({"metadata": {"name": n}})).unwrap();
    let wait_for = |n: &'static str| {
        let seen = seen.clone();
        async move {
            eventually(Duration::from_secs(20), || async {
                seen.lock().unwrap().contains(n).then_some(())
            })
            .await
            .is_some()
        }
    };
    api.create(&PostParams::default(), &mk("one"))
        .await
        .unwrap();
    assert!(wait_for("one").await);
    // Drop every watch connection, then write: the watcher re-watches from its last version.
    sim.drop_watches();
    api.create(&PostParams::default(), &mk("two"))
        .await
        .unwrap();
    assert!(
        wait_for("two").await,
        "recovered after a dropped connection"
    );
    // Compact and force the next watches to 410: the watcher relists.
    sim.expire_next_watches(2);
    sim.compact();
    sim.drop_watches();
    api.create(&PostParams::default(), &mk("three"))
        .await
        .unwrap();
    assert!(wait_for("three").await, "recovered after 410 Gone");
    // Injected 500s on list: the watcher backs off and still converges.
    let id = sim.add_fault(Fault {
        verb: "list".into(),
        resource: "configmaps".into(),
        error_rate: 1.0,
        count: 2,
        ..Fault::default()
    });
    sim.expire_next_watches(1);
    sim.drop_watches();
    api.create(&PostParams::default(), &mk("four"))
        .await
        .unwrap();
    assert!(
        wait_for("four").await,
        "recovered after injected list errors"
    );
    let _ = id;
    task.abort();
    let _ = task.await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_status_and_latency() {
    let (sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    sim.add_fault(Fault {
        verb: "get".into(),
        resource: "configmaps".into(),
        error_rate: 1.0,
        status: Some(500),
        count: 1,
        ..Fault::default()
    });
    assert_eq!(code(&api.get("x").await.unwrap_err()), 500);
    assert_eq!(
        code(&api.get("x").await.unwrap_err()),
        404,
        "the fault fired once"
    );
    sim.add_fault(Fault {
        verb: "list".into(),
        latency_ms: 300,
        ..Fault::default()
    });
    let t = std::time::Instant::now();
    api.list(&ListParams::default()).await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(300));
    sim.shutdown().await;
}

async fn raw(client: &kube::Client, path: &str) -> Value {
    client
        .request::<Value>(http::Request::get(path).body(Vec::new()).unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_apis_follow_the_load_and_oom_kills() {
    let (sim, client) = start_with(SimConfig {
        time_scale: 5.0,
        ..SimConfig::default()
    })
    .await;
    let deps: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "image": "x",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "200Mi"}}}]}}}})).unwrap();
    deps.create(&PostParams::default(), &d).await.unwrap();
    sim.set_load(
        "default",
        "deployments",
        "web",
        LoadSpec {
            profile: LoadProfile::Constant { value: 400.0 },
            cpu_millis_per_unit: 1.0,
            cpu_base_millis: 0.0,
            capacity_per_pod: Some(100.0),
            queue_metric: Some("queue_messages".into()),
            ..LoadSpec::default()
        },
    );
    let items = eventually(Duration::from_secs(15), || async {
        let v = raw(
            &client,
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Dweb",
        )
        .await;
        let items = v["items"].as_array()?.clone();
        (items.len() == 2
            && items
                .iter()
                .all(|i| i["containers"][0]["usage"]["cpu"] == "200000000n"))
        .then_some(items)
    })
    .await
    .expect("two pods share 400 units: 200m each");
    assert_eq!(items[0]["window"], "30s");
    let custom = raw(&client, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/requests_per_second?labelSelector=app%3Dweb").await;
    assert_eq!(custom["items"].as_array().unwrap().len(), 2);
    assert_eq!(custom["items"][0]["value"], "200");
    let object = raw(&client, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/deployments.apps/web/requests_per_second").await;
    assert_eq!(object["items"][0]["value"], "400");
    // Capacity 2 × 100 < 400: the queue grows.
    let q = eventually(Duration::from_secs(10), || async {
        let v = raw(
            &client,
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages",
        )
        .await;
        let q: f64 = v["items"][0]["value"]
            .as_str()?
            .trim_end_matches('m')
            .parse()
            .ok()?;
        (q > 0.0).then_some(q)
    })
    .await;
    assert!(q.is_some(), "queue grows when capacity falls short");
    let nodes = raw(&client, "/apis/metrics.k8s.io/v1beta1/nodes").await;
    assert_eq!(nodes["items"].as_array().unwrap().len(), 3);
    // Memory past the limit: the container is OOMKilled and restarted.
    sim.set_load(
        "default",
        "deployments",
        "web",
        LoadSpec {
            profile: LoadProfile::Constant { value: 400.0 },
            memory_bytes_per_unit: 1024.0 * 1024.0,
            ..LoadSpec::default()
        },
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let oom = eventually(Duration::from_secs(15), || async {
        let l = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .ok()?;
        l.items.into_iter().find_map(|p| {
            let cs = p.status?.container_statuses?.into_iter().next()?;
            let reason = cs.last_state?.terminated?.reason?;
            (cs.restart_count >= 1 && reason == "OOMKilled").then_some(())
        })
    })
    .await;
    assert!(oom.is_some(), "OOMKilled with a restart");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulset_pods_come_up_in_order() {
    let (sim, client) = start().await;
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let ss: StatefulSet = serde_json::from_value(json!({"metadata": {"name": "db"}, "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
        "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}})).unwrap();
    api.create(&PostParams::default(), &ss).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    // Before db-0 is Ready, db-1 does not exist.
    let early = eventually(Duration::from_secs(5), || async {
        pods.get("db-0").await.ok()
    })
    .await
    .unwrap();
    assert!(
        early
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .as_deref()
            != Some("Running")
            || pods.get("db-1").await.is_err()
    );
    let ready = eventually(Duration::from_secs(20), || async {
        (api.get("db").await.ok()?.status?.ready_replicas == Some(3)).then_some(())
    })
    .await;
    assert!(ready.is_some(), "three ordered replicas");
    let names: Vec<String> = pods
        .list(&ListParams::default().labels("app=db"))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| p.metadata.name.unwrap())
        .collect();
    assert_eq!(names, ["db-0", "db-1", "db-2"]);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_file_creates_objects_and_loads() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/scenario-day.yaml"
    ))
    .unwrap();
    let scenario = plimsoll_sim::scenario::Scenario::parse(&text).unwrap();
    assert_eq!(scenario.time_scale, Some(60.0));
    let (sim, client) = start_with(SimConfig {
        time_scale: 60.0,
        scenario: Some(scenario),
        ..SimConfig::default()
    })
    .await;
    let deps: Api<Deployment> = Api::namespaced(client.clone(), "shop");
    let ready = eventually(Duration::from_secs(10), || async {
        (deps.get("web").await.ok()?.status?.ready_replicas == Some(2)).then_some(())
    })
    .await;
    assert!(ready.is_some());
    let v = raw(
        &client,
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/shop/orders_pending",
    )
    .await;
    assert_eq!(v["items"][0]["value"], "12");
    assert!(
        sim.cluster
            .model
            .current_load("shop", "deployments", "web")
            .is_some()
    );
    let audit = sim.audit();
    assert!(audit.iter().any(|e| e.resource == "deployments"
        && e.verb == "create"
        && e.user_agent == "plimsoll-sim/scenario"));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_plane_over_http() {
    let (sim, client) = start().await;
    let post = |path: &str, body: Value| {
        http::Request::post(path)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap()
    };
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "audited"}})).unwrap(),
    )
    .await
    .unwrap();
    let audit = raw(&client, "/sim/v1/audit").await;
    let entry = audit
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "audited")
        .unwrap()
        .clone();
    assert_eq!(entry["verb"], "create");
    assert_eq!(entry["resource"], "configmaps");
    assert!(!entry["resourceVersion"].as_str().unwrap().is_empty());
    let id: Value = client
        .request(post(
            "/sim/v1/faults",
            json!({"verb": "get", "resource": "configmaps", "errorRate": 1.0, "status": 503}),
        ))
        .await
        .unwrap();
    assert!(id["id"].as_u64().is_some());
    let mut config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&sim.kubeconfig()).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    config.default_retry = false;
    let no_retry: Api<ConfigMap> =
        Api::namespaced(kube::Client::try_from(config).unwrap(), "default");
    assert_eq!(code(&no_retry.get("audited").await.unwrap_err()), 503);
    client
        .request::<Value>(
            http::Request::delete("/sim/v1/faults")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert!(no_retry.get("audited").await.is_ok());
    client
        .request::<Value>(post(
            "/sim/v1/namespaces/default/external/queue",
            json!({"value": 5.5}),
        ))
        .await
        .unwrap();
    assert_eq!(
        raw(
            &client,
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue"
        )
        .await["items"][0]["value"],
        "5500m"
    );
    let time = raw(&client, "/sim/v1/time").await;
    assert!(time["timeScale"].as_f64().is_some());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_with_streaming_lists() {
    let (sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for n in ["s1", "s2"] {
        api.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": n}})).unwrap(),
        )
        .await
        .unwrap();
    }
    let mut stream = watcher(api, watcher::Config::default().streaming_lists()).boxed();
    let mut initial = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::InitApply(cm) => initial.push(cm.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(
        initial,
        ["s1", "s2"],
        "initial events end with the initial-events-end bookmark"
    );
    sim.shutdown().await;
}
