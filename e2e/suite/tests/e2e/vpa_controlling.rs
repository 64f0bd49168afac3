//! Which VPA controls a pod, end to end on plimsoll-sim: one VPA on a standalone ReplicaSet (its
//! pods made by the sim's ReplicaSet controller) and one on a custom kind with a `/scale`
//! subresource (its pods made by the test, as the kind's operator would). The real
//! vpa-admission patches each pod with its own VPA's recommendation: the older of two VPAs on
//! the same ReplicaSet, the custom kind's VPA for its pods, a look-alike kind in another API
//! group for its own pods only, nothing for a pod whose top controller no VPA names. The rule is
//! core's (`plimsoll_core::vertical::controlling`), which the updater and the recommender call
//! too: the same rule over what the API server holds picks the same VPA for every pod.

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt as _;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_core::vertical::controlling::{self, OwnerIndex, OwnerKey};
use plimsoll_e2e::webhook::{EVERY, WAIT, containers, request, sim_env, start, teardown};
use plimsoll_e2e::{Env, eventually};
use serde_json::json;

/// A VPA `name` on `api_version`/`kind` `target`, in mode Recreate.
async fn vpa_on(
    env: &Env,
    name: &str,
    api_version: &str,
    kind: &str,
    target: &str,
    cpu: &str,
) -> anyhow::Result<()> {
    let vpa: VerticalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "targetRef": {"apiVersion": api_version, "kind": kind, "name": target},
            "updatePolicy": {"updateMode": "Recreate"}
        }
    }))?;
    let vpas = env.api::<VerticalPodAutoscaler>();
    vpas.create(&PostParams::default(), &vpa)
        .await
        .with_context(|| format!("create VPA {name}"))?;
    let status = json!({"status": {"recommendation": {"containerRecommendations": [
        {"containerName": "app", "target": {"cpu": cpu, "memory": "300Mi"}}
    ]}}});
    vpas.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

/// The `Shard` kind (`shards.example.com`) with a `/scale` subresource.
async fn shard_kind(env: &Env) -> anyhow::Result<ApiResource> {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "shards.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "shards", "singular": "shard", "kind": "Shard", "listKind": "ShardList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector"}}}]
        }
    }))?;
    let crds = Api::<CustomResourceDefinition>::all(env.client.clone());
    if let Err(e) = crds.create(&PostParams::default(), &crd).await {
        // Another run of the suite on the same sim installed it already.
        if !matches!(&e, kube::Error::Api(r) if r.code == 409) {
            return Err(e.into());
        }
    }
    Ok(ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Shard"),
        "shards",
    ))
}

/// A pod of the given controller, as its controller would create it (dry run: only the
/// webhook's patch is looked at).
fn pod_of(api_version: &str, kind: &str, name: &str, uid: &str, app: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {
            "generateName": format!("{name}-"),
            "labels": {"app": app},
            "ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": name,
                "uid": uid, "controller": true}]
        },
        "spec": {"containers": [containers()[0].clone()]}
    }))?)
}

/// The CPU request of `pod` as admitted by a dry-run create.
async fn admitted_cpu(env: &Env, pod: &Pod) -> anyhow::Result<Option<String>> {
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let created = env.api::<Pod>().create(&dry, pod).await?;
    Ok(request(&created, 0, "cpu"))
}

#[tokio::test]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: routing the webhook Service to loopback"
)]
async fn the_webhook_patches_each_pod_from_its_controlling_vpa() -> anyhow::Result<()> {
    let (env, system) = sim_env("vpa-controlling").await?;
    let result = Box::pin(run(&env, &system)).await;
    teardown(env, &system).await;
    result
}

async fn run(env: &Env, system: &str) -> anyhow::Result<()> {
    let webhook = start(env, system, &["--self-signed".to_owned()]).await?;
    let shards = shard_kind(env).await?;
    let shard_api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &shards);
    let shard: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Shard",
        "metadata": {"name": "db"},
        "spec": {"replicas": 2}
    }))?;
    // The new kind is served once the sim has read its definition.
    let shard = eventually("the Shard kind is served", WAIT, EVERY, || {
        let (api, shard) = (shard_api.clone(), shard.clone());
        async move { Ok(api.create(&PostParams::default(), &shard).await.ok()) }
    })
    .await?;
    let shard_uid = shard.uid().context("the Shard has no uid")?;

    // Two VPAs on the ReplicaSet: `a-first` is created first (and sorts first on a tie of the
    // seconds-resolution creationTimestamp), so it controls the ReplicaSet's pods.
    vpa_on(env, "a-first", "apps/v1", "ReplicaSet", "solo", "250m").await?;
    vpa_on(env, "b-second", "apps/v1", "ReplicaSet", "solo", "111m").await?;
    vpa_on(env, "on-shard", "example.com/v1", "Shard", "db", "333m").await?;
    // Same kind and name as the ReplicaSet, another API group: never the ReplicaSet's.
    vpa_on(
        env,
        "look-alike",
        "evil.example/v1",
        "ReplicaSet",
        "solo",
        "444m",
    )
    .await?;

    // The webhook's caches have the custom kind's VPA and recommendation.
    let of_shard = pod_of("example.com/v1", "Shard", "db", &shard_uid, "db")?;
    eventually("the webhook patches the Shard's pods", WAIT, EVERY, || {
        let pod = of_shard.clone();
        async move { Ok((admitted_cpu(env, &pod).await?.as_deref() == Some("333m")).then_some(())) }
    })
    .await?;
    let look_alike = pod_of("evil.example/v1", "ReplicaSet", "solo", "uid-evil", "solo")?;
    assert_eq!(
        admitted_cpu(env, &look_alike).await?.as_deref(),
        Some("444m")
    );
    // A pod of a Deployment's ReplicaSet (named from its pod-template-hash) no VPA names.
    let mut unrelated = pod_of("apps/v1", "ReplicaSet", "web-5d8f7c9b6", "uid-rs", "web")?;
    unrelated
        .metadata
        .labels
        .get_or_insert_default()
        .insert("pod-template-hash".to_owned(), "5d8f7c9b6".to_owned());
    assert_eq!(
        admitted_cpu(env, &unrelated).await?.as_deref(),
        Some("100m")
    );

    // A standalone ReplicaSet: the sim's controller creates its pods, the webhook patches them.
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "solo"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "solo"}},
            "template": {"metadata": {"labels": {"app": "solo"}},
                "spec": {"containers": [containers()[0].clone()]}}
        }
    }))?;
    env.api::<ReplicaSet>()
        .create(&PostParams::default(), &rs)
        .await?;
    let pods = env.api::<Pod>();
    let solo = eventually("the ReplicaSet's two pods", WAIT, EVERY, || {
        let pods = pods.clone();
        async move {
            let list = pods.list(&ListParams::default().labels("app=solo")).await?;
            Ok((list.items.len() == 2).then_some(list.items))
        }
    })
    .await?;
    for p in &solo {
        assert_eq!(
            request(p, 0, "cpu").as_deref(),
            Some("250m"),
            "pod {} of ReplicaSet solo",
            p.name_any()
        );
    }

    Box::pin(same_rule_over_the_api(
        env,
        [
            ("solo", solo[0].clone(), Some("a-first")),
            ("shard", of_shard, Some("on-shard")),
            ("look-alike", look_alike, Some("look-alike")),
            ("unrelated", unrelated, None),
        ],
    ))
    .await?;
    webhook.stop().await
}

/// The updater and the recommender call the same rule as the webhook: over the objects the API
/// server holds (the ReplicaSets as the owner lookup), it names the expected VPA for each pod.
async fn same_rule_over_the_api(
    env: &Env,
    cases: [(&str, Pod, Option<&str>); 4],
) -> anyhow::Result<()> {
    let vpas: Vec<VerticalPodAutoscaler> = env
        .api::<VerticalPodAutoscaler>()
        .list(&ListParams::default())
        .await?
        .items;
    let mut owners = OwnerIndex::new();
    for rs in env
        .api::<ReplicaSet>()
        .list(&ListParams::default())
        .await?
        .items
    {
        owners.insert(
            (
                env.namespace.clone(),
                OwnerKey::new("apps", "ReplicaSet", &rs.name_any()),
            ),
            controlling::controller_of(&rs.metadata),
        );
    }
    for (case, pod, expected) in cases {
        let chosen = controlling::controlling_vpa(&pod.metadata, &env.namespace, &owners, &vpas)
            .and_then(|v| v.metadata.name.as_deref());
        assert_eq!(chosen, expected, "{case}");
    }
    Ok(())
}
