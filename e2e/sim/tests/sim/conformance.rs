//! Conformance of plimsoll-sim with kube-apiserver semantics, through an unmodified kube-rs
//! client over TLS.
#![allow(clippy::unwrap_used, clippy::panic)] // integration tests: helpers fail loudly

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{code, eventually, start};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use kube::api::{
    Api, DeleteParams, DynamicObject, EvictParams, ListParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels.iter().map(|(k, v)| ((*k).to_string(), json!(v))).collect::<serde_json::Map<_, _>>()},
        "data": {"k": "v"}
    }))
    .unwrap()
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "registry.example/app:1", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "1Gi"}}}]}}}
    }))
    .unwrap()
}

fn rv<K: kube::Resource>(o: &K) -> u64 {
    o.meta()
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_and_version() {
    let (sim, client) = start().await;
    let v = client.apiserver_version().await.unwrap();
    assert_eq!(v.major, "1");
    let discovery = kube::Discovery::new(client.clone()).run().await.unwrap();
    let groups: Vec<String> = discovery.groups().map(|g| g.name().to_string()).collect();
    for g in [
        "apps",
        "autoscaling",
        "policy",
        "coordination.k8s.io",
        "metrics.k8s.io",
        "custom.metrics.k8s.io",
        "external.metrics.k8s.io",
    ] {
        assert!(
            groups.iter().any(|x| x == g),
            "missing group {g} in {groups:?}"
        );
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_updates_one_wins_one_conflicts() {
    let (sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &cm("race", &[]))
        .await
        .unwrap();
    let mut a = api.get("race").await.unwrap();
    let mut b = api.get("race").await.unwrap();
    a.data
        .get_or_insert_with(BTreeMap::new)
        .insert("who".into(), "a".into());
    b.data
        .get_or_insert_with(BTreeMap::new)
        .insert("who".into(), "b".into());
    let pp = PostParams::default();
    let (ra, rb) = tokio::join!(api.replace("race", &pp, &a), api.replace("race", &pp, &b));
    let results = [ra, rb];
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "exactly one update wins"
    );
    let err = results.iter().find_map(|r| r.as_ref().err()).unwrap();
    assert_eq!(code(err), 409);
    if let kube::Error::Api(s) = err {
        assert_eq!(s.reason, "Conflict");
    }
    // Creating the same name again is AlreadyExists.
    let e = api
        .create(&PostParams::default(), &cm("race", &[]))
        .await
        .unwrap_err();
    assert_eq!(code(&e), 409);
    sim.shutdown().await;
}

/// Labels and annotations are checked as `ValidateObjectMeta` does, on create and on update:
/// a 422 whose message and causes name the field and the value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_and_annotations_are_validated_as_by_kube_apiserver() {
    let (sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let pp = PostParams::default();
    let e = api
        .create(&pp, &cm("bad", &[("has space", "x")]))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = e else {
        panic!("{e}")
    };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert!(
        status.message.starts_with(
            "ConfigMap \"bad\" is invalid: metadata.labels: Invalid value: \"has space\": name part must consist of"
        ),
        "{}",
        status.message
    );
    api.create(&pp, &cm("good", &[("example.com/tier", "web")]))
        .await
        .unwrap();
    let too_long = json!({"metadata": {"labels": {"tier": "x".repeat(64)}}});
    let e = api
        .patch("good", &PatchParams::default(), &Patch::Merge(&too_long))
        .await
        .unwrap_err();
    assert_eq!(code(&e), 422, "{e}");
    let big = json!({"metadata": {"annotations": {"a": "x".repeat(256 * 1024)}}});
    let e = api
        .patch("good", &PatchParams::default(), &Patch::Merge(&big))
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("metadata.annotations: Too long: may not be more than 262144 bytes"),
        "{e}"
    );
    sim.shutdown().await;
}

/// A body over 3 MiB is 413 before anything is decoded; an object etcd would not store (a
/// ConfigMap is held as protobuf, about its data's size) is a 500 with etcd's message and
/// nothing stored; one under both limits is created, and then an update that takes it over is
/// refused the same way, leaving it as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_past_the_size_limits_are_refused_as_by_kube_apiserver() {
    let (sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let sized = |name: &str, bytes: usize| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name},
                                      "data": {"k": "x".repeat(bytes)}}))
        .unwrap()
    };
    let pp = PostParams::default();
    let e = api
        .create(&pp, &sized("body", 3_200_000))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = e else {
        panic!("{e}")
    };
    assert_eq!(
        (status.code, status.reason.as_str()),
        (413, "RequestEntityTooLarge")
    );
    let e = api
        .create(&pp, &sized("etcd", 1_600_000))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = e else {
        panic!("{e}")
    };
    assert_eq!(
        (status.code, status.message.as_str()),
        (500, "etcdserver: request is too large")
    );
    assert_eq!(status.reason, "", "passed on unmapped");
    assert!(api.get_opt("etcd").await.unwrap().is_none());
    let created = api.create(&pp, &sized("fits", 1_500_000)).await.unwrap();
    let grown = json!({"data": {"more": "x".repeat(100_000)}});
    let e = api
        .patch("fits", &PatchParams::default(), &Patch::Merge(&grown))
        .await
        .unwrap_err();
    assert_eq!(code(&e), 500);
    let kept = api.get("fits").await.unwrap();
    assert_eq!(kept.resource_version(), created.resource_version());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generation_and_status_isolation() {
    let (sim, client) = start().await;
    let api: Api<Deployment> = Api::namespaced(client, "default");
    let d = api
        .create(&PostParams::default(), &deployment("gen", 0))
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    assert!(d.metadata.uid.is_some() && d.metadata.creation_timestamp.is_some());
    let d = api
        .patch(
            "gen",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        d.metadata.generation,
        Some(1),
        "metadata changes do not bump generation"
    );
    // A spec write that also carries status: status is ignored.
    let d = api
        .patch(
            "gen",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}, "status": {"replicas": 99}})),
        )
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(2));
    assert_ne!(d.status.as_ref().and_then(|s| s.replicas), Some(99));
    // A status write that also carries spec: spec is ignored, generation unchanged.
    let d = api
        .patch_status(
            "gen",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 7}, "status": {"observedGeneration": 42}})),
        )
        .await
        .unwrap();
    assert_eq!(d.spec.unwrap().replicas, Some(2));
    assert_eq!(d.metadata.generation, Some(2));
    assert_eq!(d.status.unwrap().observed_generation, Some(42));
    // A no-op update keeps the resourceVersion.
    let cur = api.get("gen").await.unwrap();
    let same = api
        .replace("gen", &PostParams::default(), &cur)
        .await
        .unwrap();
    assert_eq!(rv(&same), rv(&cur));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_and_field_selectors_and_pagination() {
    let (sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for (n, app, tier) in [
        ("a", "web", "front"),
        ("b", "web", "back"),
        ("c", "db", "back"),
    ] {
        api.create(
            &PostParams::default(),
            &cm(n, &[("app", app), ("tier", tier)]),
        )
        .await
        .unwrap();
    }
    label_selectors(&api).await;
    field_selectors_and_pages(&api).await;
    pods_by_phase_and_node(client).await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizers_and_namespace_lifecycle() {
    let (sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut c = cm("fin", &[]);
    c.metadata.finalizers = Some(vec!["example.dev/hold".into()]);
    api.create(&PostParams::default(), &c).await.unwrap();
    api.delete("fin", &DeleteParams::default()).await.unwrap();
    let held = api.get("fin").await.unwrap();
    assert!(
        held.metadata.deletion_timestamp.is_some(),
        "deletion waits for finalizers"
    );
    api.patch(
        "fin",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(code(&api.get("fin").await.unwrap_err()), 404);
    // Creating in a missing namespace is 404; deleting a namespace removes its content.
    let other: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    assert_eq!(
        code(
            &other
                .create(&PostParams::default(), &cm("x", &[]))
                .await
                .unwrap_err()
        ),
        404
    );
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "tmp"}})).unwrap(),
    )
    .await
    .unwrap();
    let tmp: Api<ConfigMap> = Api::namespaced(client, "tmp");
    tmp.create(&PostParams::default(), &cm("x", &[]))
        .await
        .unwrap();
    nss.delete("tmp", &DeleteParams::default()).await.unwrap();
    let gone = eventually(Duration::from_secs(10), || async {
        nss.get("tmp").await.err().filter(|e| code(e) == 404)
    })
    .await;
    assert!(
        gone.is_some(),
        "namespace is finalized after its content is gone"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_resume_bookmarks_and_410_then_relist() {
    let (sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let first = api
        .create(&PostParams::default(), &cm("w1", &[]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("w2", &[]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("w3", &[]))
        .await
        .unwrap();
    // Resume from the first object's version: exactly the later writes, in order.
    let mut stream = api
        .watch(&WatchParams::default(), &rv(&first).to_string())
        .await
        .unwrap()
        .boxed();
    let mut seen = Vec::new();
    let mut bookmark = false;
    while let Ok(Ok(Some(ev))) =
        tokio::time::timeout(Duration::from_secs(5), stream.try_next()).await
    {
        match ev {
            WatchEvent::Added(o) => seen.push(o.name_any()),
            WatchEvent::Bookmark(_) => {
                bookmark = true;
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ["w2", "w3"]);
    assert!(bookmark, "a bookmark arrives promptly when allowed");
    // Compact: the old version is gone (ERROR 410 Expired), a relist gives a fresh version.
    sim.compact();
    let mut stream = api
        .watch(&WatchParams::default(), &rv(&first).to_string())
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(s) => {
            assert_eq!(s.code, 410);
            assert_eq!(s.reason, "Expired");
        }
        other => panic!("expected 410, got {other:?}"),
    }
    let list = api.list(&ListParams::default()).await.unwrap();
    let fresh = list.metadata.resource_version.clone().unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &fresh)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &cm("w4", &[]))
        .await
        .unwrap();
    let got = loop {
        match tokio::time::timeout(Duration::from_secs(5), stream.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            WatchEvent::Added(o) => break o.name_any(),
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(got, "w4");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_selector_transitions() {
    let (sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let start_rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(
            &WatchParams::default().labels("app=web").disable_bookmarks(),
            &start_rv,
        )
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &cm("t", &[("app", "db")]))
        .await
        .unwrap();
    api.patch(
        "t",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "web"}}})),
    )
    .await
    .unwrap();
    api.patch(
        "t",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "db"}}})),
    )
    .await
    .unwrap();
    let mut kinds = Vec::new();
    for _ in 0..2 {
        let ev = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        kinds.push(match ev {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            _ => "OTHER",
        });
    }
    assert_eq!(
        kinds,
        ["ADDED", "DELETED"],
        "entering and leaving the selector"
    );
    sim.shutdown().await;
}

async fn wait_ready(api: &Api<Deployment>, name: &str, n: i32) {
    let ok = eventually(Duration::from_secs(15), || async {
        let d = api.get(name).await.ok()?;
        (d.status?.ready_replicas.unwrap_or(0) == n).then_some(())
    })
    .await;
    assert!(ok.is_some(), "{name} reaches {n} ready replicas");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_rollout_and_scale_subresource() {
    let (sim, client) = start().await;
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &deployment("web", 1))
        .await
        .unwrap();
    api.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .unwrap();
    wait_ready(&api, "web", 3).await;
    let scale = api.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=web"));
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let list = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 3);
    let owner = &list.items[0].metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.kind, "ReplicaSet");
    assert!(list.items[0].labels().contains_key("pod-template-hash"));
    // Template change: a new ReplicaSet takes over, all pods end up updated.
    api.patch("web", &PatchParams::default(), &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "registry.example/app:2"}]}}}}))).await.unwrap();
    let done = eventually(Duration::from_secs(30), || async {
        let d = api.get("web").await.ok()?;
        let st = d.status?;
        (st.updated_replicas == Some(3)
            && st.replicas == Some(3)
            && st.available_replicas == Some(3)
            && st.observed_generation == d.metadata.generation)
            .then_some(())
    })
    .await;
    assert!(done.is_some(), "rollout completes");
    let images: Vec<String> = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            p.spec.as_ref().unwrap().containers[0]
                .image
                .clone()
                .unwrap()
        })
        .collect();
    assert!(images.iter().all(|i| i.ends_with(":2")), "{images:?}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_blocked_by_pdb() {
    let (sim, _) = start().await;
    // kube's default client retries 429 with backoff for minutes (as it would against a real
    // cluster); an evicting controller turns that off to see the refusal.
    let kc = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig()).unwrap();
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    let deps: Api<Deployment> = Api::namespaced(client.clone(), "default");
    deps.create(&PostParams::default(), &deployment("db", 2))
        .await
        .unwrap();
    wait_ready(&deps, "db", 2).await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "db"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}}})).unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let victim = pods
        .list(&ListParams::default().labels("app=db"))
        .await
        .unwrap()
        .items[0]
        .name_any();
    let err = pods
        .evict(&victim, &EvictParams::default())
        .await
        .unwrap_err();
    assert_eq!(code(&err), 429);
    if let kube::Error::Api(s) = &err {
        assert_eq!(s.reason, "TooManyRequests");
    }
    let status = eventually(Duration::from_secs(5), || async {
        pdbs.get("db")
            .await
            .ok()?
            .status
            .filter(|s| s.expected_pods == 2)
    })
    .await
    .unwrap();
    assert_eq!(
        (
            status.current_healthy,
            status.desired_healthy,
            status.disruptions_allowed
        ),
        (2, 2, 0)
    );
    // Relax the budget: the eviction goes through and the pod terminates.
    pdbs.patch(
        "db",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"minAvailable": "50%"}})),
    )
    .await
    .unwrap();
    // An eviction for another pod of the same name (a uid precondition that does not hold) is
    // a conflict, and the pod stays; the pod's own uid evicts it. (kube's `Api::evict` sends its
    // options as `delete_options`, which an API server drops: the body is built here.)
    let evict_uid = |uid: &str| {
        let body = json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": victim, "namespace": "default"},
            "deleteOptions": {"preconditions": {"uid": uid}}});
        let pods = pods.clone();
        let victim = victim.clone();
        async move {
            pods.create_subresource::<_, kube::core::Status>(
                "eviction",
                &victim,
                &PostParams::default(),
                &body,
            )
            .await
        }
    };
    let err = evict_uid("00000000-0000-0000-0000-000000000000")
        .await
        .unwrap_err();
    assert_eq!(code(&err), 409);
    let pod = pods.get(&victim).await.unwrap();
    assert!(pod.metadata.deletion_timestamp.is_none());
    evict_uid(pod.metadata.uid.as_deref().unwrap_or_default())
        .await
        .unwrap();
    assert!(
        pods.get(&victim)
            .await
            .map_or(true, |p| p.metadata.deletion_timestamp.is_some())
    );
    assert!(
        sim.audit()
            .iter()
            .any(|e| e.subresource == "eviction" && e.name == victim)
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_scale_status_printer_columns_and_defaults() {
    let (sim, client) = start().await;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(client.clone());
    let crd = serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.dev"},
        "spec": {"group": "example.dev", "scope": "Namespaced", "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size", "labelSelectorPath": ".status.selector"}},
                "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer", "default": 1}, "color": {"type": "string", "default": "blue"}}},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    }))
    .unwrap();
    let created = crds.create(&PostParams::default(), &crd).await.unwrap();
    assert!(
        created
            .status
            .unwrap()
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.dev", "v1", "Widget"),
        "widgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let w = api
        .create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "example.dev/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"color": "red"}, "status": {"size": 9}})).unwrap())
        .await
        .unwrap();
    assert_eq!(
        w.data["spec"],
        json!({"color": "red", "size": 1}),
        "schema defaults applied, given values kept"
    );
    assert!(
        w.data.get("status").is_none(),
        "status dropped on create when the status subresource is on"
    );
    api.patch_status(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"size": 1, "selector": "app=w"}})),
    )
    .await
    .unwrap();
    let scale = api.get_scale("w").await.unwrap();
    assert_eq!(scale.spec.as_ref().unwrap().replicas, Some(1));
    assert_eq!(
        scale.status.as_ref().unwrap().selector.as_deref(),
        Some("app=w")
    );
    let scaled = api
        .patch_scale(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(4));
    let w = api.get("w").await.unwrap();
    assert_eq!(w.data["spec"]["size"], 4);
    assert_eq!(w.metadata.generation, Some(2));
    // Server-side apply merges into the existing object.
    let applied = api
        .patch("w", &PatchParams::apply("test").force(), &Patch::Apply(json!({"apiVersion": "example.dev/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"color": "green"}})))
        .await
        .unwrap();
    assert_eq!(applied.data["spec"], json!({"color": "green", "size": 4}));
    // Deleting the CRD stops serving the resource.
    crds.delete("widgets.example.dev", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(code(&api.get("w").await.unwrap_err()), 404);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_creates_and_patch_flavours() {
    let (sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = api.patch("ssa", &PatchParams::apply("me"), &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1"}}))).await.unwrap();
    assert_eq!(created.data.unwrap()["a"], "1");
    let p = api
        .patch(
            "ssa",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{"op": "add", "path": "/data/b", "value": "2"}]))
                    .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(p.data.unwrap().len(), 2);
    let audit = sim.audit();
    assert!(audit.iter().any(|e| e.name == "ssa"
        && e.verb == "create"
        && e.field_manager.as_deref() == Some("me")));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_resize_and_immutability() {
    let (sim, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "r"}, "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}})).unwrap()).await.unwrap();
    let err = pods.patch("r", &PatchParams::default(), &Patch::Strategic(json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "200m"}}}]}}))).await.unwrap_err();
    assert_eq!(
        code(&err),
        422,
        "pod resources are immutable on the main resource"
    );
    let req = http::Request::patch("/api/v1/namespaces/default/pods/r/resize")
        .header("content-type", "application/strategic-merge-patch+json")
        .body(serde_json::to_vec(&json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "200m"}}}]}})).unwrap())
        .unwrap();
    let resized: Pod = client.request(req).await.unwrap();
    assert_eq!(
        resized.spec.unwrap().containers[0]
            .resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap()["cpu"]
            .0,
        "200m"
    );
    sim.shutdown().await;
}

/// Equality, set-based and existence label selectors on LIST.
async fn label_selectors(api: &Api<ConfigMap>) {
    let names = |l: kube::core::ObjectList<ConfigMap>| {
        l.items
            .iter()
            .map(ResourceExt::name_any)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("app=web"))
                .await
                .unwrap()
        ),
        ["a", "b"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("app!=web"))
                .await
                .unwrap()
        ),
        ["c"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("tier in (front),app"))
                .await
                .unwrap()
        ),
        ["a"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("tier notin (front)"))
                .await
                .unwrap()
        ),
        ["b", "c"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("!tier"))
                .await
                .unwrap()
        ),
        Vec::<String>::new()
    );
}

/// Field selectors on metadata, and `limit` / `continue` pagination.
async fn field_selectors_and_pages(api: &Api<ConfigMap>) {
    let names = |l: kube::core::ObjectList<ConfigMap>| {
        l.items
            .iter()
            .map(ResourceExt::name_any)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(
            api.list(&ListParams::default().fields("metadata.name=b"))
                .await
                .unwrap()
        ),
        ["b"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().fields("metadata.namespace!=default"))
                .await
                .unwrap()
        ),
        Vec::<String>::new()
    );
    let page = api.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(names(page.clone()), ["a", "b"]);
    assert_eq!(page.metadata.remaining_item_count, Some(1));
    let token = page.metadata.continue_.clone().unwrap();
    let last = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(names(last.clone()), ["c"]);
    assert_eq!(last.metadata.continue_, None);
    assert_eq!(last.metadata.remaining_item_count, None);
    // With a selector kube-apiserver cannot count what follows: the field stays unset.
    let selected = ListParams::default().fields("metadata.name!=a").limit(1);
    let page = api.list(&selected).await.unwrap();
    assert_eq!(names(page.clone()), ["b"]);
    assert_eq!(page.metadata.remaining_item_count, None);
    let token = page.metadata.continue_.clone().unwrap();
    let last = api
        .list(&selected.clone().continue_token(&token))
        .await
        .unwrap();
    assert_eq!(names(last.clone()), ["c"]);
    assert_eq!(last.metadata.continue_, None);
}

/// Pods by status.phase and spec.nodeName.
async fn pods_by_phase_and_node(client: kube::Client) {
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})).unwrap()).await.unwrap();
    let running = eventually(Duration::from_secs(10), || async {
        let l = pods
            .list(&ListParams::default().fields("status.phase=Running"))
            .await
            .ok()?;
        (!l.items.is_empty()).then_some(l)
    })
    .await
    .expect("pod reaches Running");
    let node = running.items[0]
        .spec
        .as_ref()
        .unwrap()
        .node_name
        .clone()
        .unwrap();
    assert_eq!(
        pods.list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    assert_eq!(
        pods.list(&ListParams::default().fields("status.phase=Pending"))
            .await
            .unwrap()
            .items
            .len(),
        0
    );
}
