//! The explanation of a real upstream checkpoint (`tests/data/vpa-checkpoint-nginx.yaml` of
//! kubectl-plimsoll, from a real cluster) with its VPA, numbers worked out by hand below.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::*;
use crate::api::vpa::{VerticalPodAutoscaler, VerticalPodAutoscalerCheckpoint};

const CHECKPOINT: &str =
    include_str!("../../../../kubectl-plimsoll/tests/data/vpa-checkpoint-nginx.yaml");
const VPA: &str = include_str!("../../../../kubectl-plimsoll/tests/data/vpa-nginx.yaml");

fn explained() -> Explanation {
    let checkpoint: VerticalPodAutoscalerCheckpoint =
        serde_saphyr::from_str(CHECKPOINT).expect("checkpoint");
    let vpa: VerticalPodAutoscaler = serde_saphyr::from_str(VPA).expect("vpa");
    let now = "2021-11-29T12:00:00Z".parse().expect("time");
    explain(&vpa, &[checkpoint], &EstimatorConfig::default(), now)
}

#[test]
fn history_and_confidence_of_the_nginx_checkpoint() {
    let e = explained();
    let c = &e.containers[0];
    assert_eq!(c.error, None);
    assert_eq!(c.container, "nginx");
    assert_eq!(c.checkpoint, "nginx-vpa-nginx");
    assert_eq!(c.total_samples, 9371);
    assert_eq!(c.cpu_total_weight, "560.4882");
    // firstSampleStart is null: the lifespan counts from Go's zero time, so the sample count
    // decides: 9371 / 1440 = 6.5076…; upper bound × (1 + 1/6.5076) = 1.1537.
    assert_eq!(c.confidence, "6.5076");
    assert_eq!(c.upper_multiplier, "1.1537");
    assert_eq!(c.first_sample_start, None);
    assert_eq!(c.last_sample_start.as_deref(), Some("2021-11-28T14:13:59Z"));
}

#[test]
fn percentiles_and_caps_of_the_nginx_checkpoint() {
    let e = explained();
    let c = &e.containers[0];
    // Bucket 0 holds 10000 of 10842 stored CPU weight (92 %): p50 and p90 end at bucket 1's
    // start, 0.01 cores; p95 falls in bucket 75, the busy bucket.
    assert_eq!(c.cpu.lower, ("0.5".to_owned(), "10m".to_owned()));
    assert_eq!(c.cpu.target, ("0.9".to_owned(), "10m".to_owned()));
    // 10m + 15 % margin = 11m, raised to the pod minimum 25m; minAllowed 90m caps it up.
    assert_eq!(
        c.estimated.target.get("cpu").map(|q| q.0.as_str()),
        Some("25m")
    );
    assert_eq!(
        c.capped.target.get("cpu").map(|q| q.0.as_str()),
        Some("90m")
    );
    assert_eq!(c.capped_by, ["cpu capped to minAllowed"]);
    // Memory: p90 ends bucket 0 (10 MB), + 15 % is below the 250Mi pod minimum, which wins.
    assert_eq!(
        c.capped.target.get("memory").map(|q| q.0.as_str()),
        Some("250Mi")
    );
    assert_eq!(c.memory.target, ("0.9".to_owned(), "9.5Mi".to_owned()));
    assert_eq!(c.policy.controlled_values, "RequestsAndLimits");
    assert_eq!(
        c.policy.min_allowed.get("cpu").map(|q| q.0.as_str()),
        Some("90m")
    );
    assert!(e.notes.iter().any(|n| n.starts_with("OOM kills")));
    let text = e.to_text();
    assert!(
        text.contains("Capped: cpu capped to minAllowed -> target cpu 90m, memory 250Mi"),
        "{text}"
    );
    assert!(text.contains("Confidence: 6.5076"), "{text}");
    assert!(
        text.contains("Status: no recommendation for this container yet"),
        "{text}"
    );
}

#[test]
fn a_vpa_s_own_settings_and_a_node_cap_are_shown() {
    let checkpoint: VerticalPodAutoscalerCheckpoint =
        serde_saphyr::from_str(CHECKPOINT).expect("checkpoint");
    let mut vpa: VerticalPodAutoscaler = serde_saphyr::from_str(VPA).expect("vpa");
    let policies = vpa
        .spec
        .resource_policy
        .as_mut()
        .and_then(|p| p.container_policies.as_mut())
        .expect("the nginx VPA has a policy");
    let p = policies.first_mut().expect("one policy");
    p.oom_bump_up_ratio = Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
        "2".into(),
    ));
    p.target_cpu_percentile = Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
        "0.95".into(),
    ));
    vpa.status = Some(
        serde_json::from_value(serde_json::json!({"conditions": [{
            "type": "RecommendationCappedToNode", "status": "True",
            "message": "memory target 40960Mi capped to 14745Mi to fit the largest node n1 (allocatable 16384Mi)",
        }]}))
        .expect("a status"),
    );
    let now = "2021-11-29T12:00:00Z".parse().expect("time");
    let e = explain(&vpa, &[checkpoint], &EstimatorConfig::default(), now);
    let c = &e.containers[0];
    assert_eq!(
        c.own_settings,
        ["oomBumpUpRatio 2", "targetCPUPercentile 0.95"]
    );
    // The target percentile read from the histogram is the VPA's, not the flag's.
    assert_eq!(c.cpu.target.0, "0.95");
    let text = e.to_text();
    assert!(
        text.contains("Own settings (override the recommender's flags unless it runs with --per-vpa-config=false): oomBumpUpRatio 2, targetCPUPercentile 0.95"),
        "{text}"
    );
    assert!(
        text.contains(
            "Capped to fit the largest node (RecommendationCappedToNode): memory target 40960Mi"
        ),
        "{text}"
    );
}

/// What a tenant writes in the VPA (a container name, resource names, quantities) is shown
/// escaped: no sequence reaches the terminal and no value adds a line of its own.
#[test]
fn values_from_the_cluster_are_shown_escaped() {
    let hostile = "x\u{1b}]52;c;cm0gLXJmIH4=\u{7}\nStatus: forged\u{202e}";
    let mut checkpoint: VerticalPodAutoscalerCheckpoint =
        serde_saphyr::from_str(CHECKPOINT).expect("checkpoint");
    let mut vpa: VerticalPodAutoscaler = serde_saphyr::from_str(VPA).expect("vpa");
    let now = "2021-11-29T12:00:00Z".parse().expect("time");
    let plain = explain(
        &vpa,
        &[checkpoint.clone()],
        &EstimatorConfig::default(),
        now,
    )
    .to_text();
    let container = format!("nginx{hostile}");
    checkpoint.spec.container_name = Some(container.clone());
    checkpoint.metadata.name = Some(format!("nginx-vpa{hostile}"));
    let policies = vpa
        .spec
        .resource_policy
        .as_mut()
        .and_then(|p| p.container_policies.as_mut())
        .expect("the fixture has a container policy");
    policies[0].container_name = Some(container);
    if let Some(min) = policies[0].min_allowed.as_mut() {
        min.insert(hostile.to_owned(), Quantity(hostile.to_owned()));
    }
    if let Some(r) = policies[0].controlled_resources.as_mut() {
        r.push(hostile.to_owned());
    }
    let text = explain(&vpa, &[checkpoint], &EstimatorConfig::default(), now).to_text();
    assert!(crate::printable::is_printable_lines(&text), "{text}");
    assert_eq!(text.lines().count(), plain.lines().count(), "{text}");
    assert!(
        text.contains(
            "Container nginxx\\u{1b}]52;c;cm0gLXJmIH4=\\u{7}\\nStatus: forged\\u{202e} (checkpoint"
        ),
        "{text}"
    );
}
