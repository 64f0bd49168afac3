//! HPA+ and VPA on the same workload and resource (issue 18, conflict detection): with hpa-plus
//! and vpa-recommender running against plimsoll-sim, an HPA+ on CPU utilization and a VPA in
//! `Recreate` on the same Deployment both get `ConflictingAutoscaler=True` naming each other and
//! a Warning Event; the recommender still recommends. Annotating the VPA
//! `plimsoll.dev/horizontal-aware: "true"` (joint mode) ends the conflict on both sides.

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus;
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_e2e::{Env, Running, eventually};
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(45);
const EVERY: Duration = Duration::from_millis(250);

fn hpa_plus_config(env: &Env) -> plimsoll_hpa_plus::Config {
    plimsoll_e2e::hpa_plus_config(env, &["--sync-period=1s"])
}

async fn objects(env: &Env, vpa_annotations: serde_json::Value) -> anyhow::Result<()> {
    plimsoll_e2e::create_deployment(env, "web", 2, "200m", "64Mi").await?;
    let plus: HorizontalPodAutoscalerPlus = serde_json::from_value(json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1",
        "kind": "HorizontalPodAutoscalerPlus",
        "metadata": {"name": "web-hpa"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2,
            "maxReplicas": 6,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 60}}}],
        },
    }))?;
    env.api::<HorizontalPodAutoscalerPlus>()
        .create(&PostParams::default(), &plus)
        .await?;
    let vpa: VerticalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "web-vpa", "annotations": vpa_annotations},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "recommenders": [{"name": "plimsoll"}],
            "updatePolicy": {"updateMode": "Recreate"},
        },
    }))?;
    env.api::<VerticalPodAutoscaler>()
        .create(&PostParams::default(), &vpa)
        .await?;
    Ok(())
}

/// `(status, reason, message)` of the HPA+'s `ConflictingAutoscaler` condition.
async fn plus_condition(env: &Env) -> anyhow::Result<Option<(String, String, String)>> {
    let p = env
        .api::<HorizontalPodAutoscalerPlus>()
        .get("web-hpa")
        .await?;
    Ok(p.status.and_then(|s| {
        s.conditions
            .into_iter()
            .find(|c| c.type_ == "ConflictingAutoscaler")
            .map(|c| {
                (
                    c.status,
                    c.reason.unwrap_or_default(),
                    c.message.unwrap_or_default(),
                )
            })
    }))
}

/// `(status, message)` of the VPA's `ConflictingAutoscaler` condition, and whether it has a
/// recommendation.
async fn vpa_condition(env: &Env) -> anyhow::Result<(Option<(String, String)>, bool)> {
    let v = env.api::<VerticalPodAutoscaler>().get("web-vpa").await?;
    let status = v.status.unwrap_or_default();
    let recommended = status.recommendation.is_some();
    let condition = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "ConflictingAutoscaler")
        .map(|c| (c.status, c.message.unwrap_or_default()));
    Ok((condition, recommended))
}

async fn warnings(env: &Env, object: &str) -> anyhow::Result<Vec<String>> {
    let list = env
        .api::<Event>()
        .list(&ListParams::default().fields(&format!("regarding.name={object}")))
        .await?;
    Ok(list
        .items
        .into_iter()
        .filter(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some("ConflictingAutoscaler")
        })
        .map(|e| e.note.unwrap_or_default())
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hpa_plus_and_a_vpa_on_the_same_cpu_requests_both_say_so_until_joint_mode()
-> anyhow::Result<()> {
    let env = Env::start("conflict").await?;
    objects(&env, json!({})).await?;
    let hpa_plus = {
        let config = hpa_plus_config(&env);
        Running::spawn("hpa-plus", |token| plimsoll_hpa_plus::run(config, token))
    };
    let recommender = {
        let config = env.recommender_config(&[])?;
        Running::spawn("vpa-recommender", |token| {
            plimsoll_vpa_recommender::run(config, token)
        })
    };

    let (status, reason, message) =
        eventually("the HPA+ conflict condition", WITHIN, EVERY, || async {
            plus_condition(&env).await
        })
        .await?;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "BothControlRequests")
    );
    assert!(
        message.contains("web-vpa") && message.contains("Recreate") && message.contains("cpu"),
        "{message}"
    );
    let vpa_message = eventually(
        "the VPA conflict condition, and still a recommendation",
        WITHIN,
        EVERY,
        || async {
            Ok(match vpa_condition(&env).await? {
                (Some((status, message)), true) if status == "True" => Some(message),
                _ => None,
            })
        },
    )
    .await?;
    assert!(
        vpa_message.contains("HorizontalPodAutoscalerPlus/web-hpa") && vpa_message.contains("cpu"),
        "{vpa_message}"
    );
    for object in ["web-hpa", "web-vpa"] {
        let notes = eventually("a ConflictingAutoscaler Warning", WITHIN, EVERY, || async {
            let notes = warnings(&env, object).await?;
            Ok((!notes.is_empty()).then_some(notes))
        })
        .await?;
        assert_eq!(
            notes.len(),
            1,
            "{object}: one Warning, not one per evaluation: {notes:?}"
        );
    }

    // Joint mode: the VPA sizes requests from the HPA+'s settings; nothing fights any more.
    env.api::<VerticalPodAutoscaler>()
        .patch(
            "web-vpa",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "plimsoll.dev/horizontal-aware": "true"}}})),
        )
        .await?;
    let (status, reason, _) = eventually("the HPA+ conflict resolved", WITHIN, EVERY, || async {
        Ok(plus_condition(&env).await?.filter(|c| c.0 == "False"))
    })
    .await?;
    assert_eq!((status.as_str(), reason.as_str()), ("False", "NoConflict"));
    eventually("the VPA condition gone", WITHIN, EVERY, || async {
        Ok(vpa_condition(&env).await?.0.is_none().then_some(()))
    })
    .await?;

    let _ = hpa_plus.stop().await;
    let _ = recommender.stop().await;
    env.cleanup().await;
    Ok(())
}
