//! "Why this number?": a VPA's recommendation explained from its checkpoints, for
//! `kubectl plimsoll explain vpa/NAME`.
//!
//! Per container, [`explain`] restores the checkpoint exactly as the recommender does
//! ([`checkpoint::load`]), reads the histograms' percentiles the estimators use (lower bound
//! p50, target p90, upper bound p95 by default), the confidence in the history and the bounds'
//! multipliers it gives, recomputes the recommendation with the recommender's own function
//! ([`recommendation::recommend`]: margin, pod minimums, then the policy's caps), and sets it
//! beside what `status.recommendation` holds. Nothing here re-implements an estimator.
//!
//! What a checkpoint cannot tell: a memory checkpoint stores one histogram of peaks, and an OOM
//! kill enters it as a peak (the bumped usage) like any other sample — so an OOM bump shows as a
//! high peak, but which peaks were OOMs is not recorded. Per-pod samples are not stored either.

use jiff::Timestamp;
use serde::Serialize;

use super::aggregate::{
    AggregateContainerState, AggregationsConfig, amount_from_float, cpu_amount_from_cores,
};
use super::checkpoint;
use super::estimator::{EstimatorConfig, LOWER_CONFIDENCE, UPPER_CONFIDENCE};
use super::per_vpa::PerVpaSettings;
use super::recommendation::{self, NODE_CAPPED_CONDITION, RecommendationReport};
use super::resources::{Resource, ResourceAmounts, amounts_to_list};
use crate::api::vpa::{ResourceList, VerticalPodAutoscaler, VerticalPodAutoscalerCheckpoint};
use crate::printable::printable as shown;

/// Percentiles of one histogram, in the resource's unit (`123m`, `250Mi`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Percentiles {
    // Floats are kept as text with up to four decimals, so explanations compare and serialize
    // exactly.
    /// The lower bound's percentile and its value.
    pub lower: (String, String),
    /// The target's percentile and its value.
    pub target: (String, String),
    /// The upper bound's percentile and its value.
    pub upper: (String, String),
    /// The largest bucket holding weight (its start).
    pub max: String,
}

/// One stage of the recommendation: target and bounds as resource lists.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stage {
    /// The target.
    pub target: ResourceList,
    /// The lower bound.
    pub lower_bound: ResourceList,
    /// The upper bound.
    pub upper_bound: ResourceList,
}

/// The container policy in effect.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyText {
    /// `minAllowed`.
    pub min_allowed: ResourceList,
    /// `maxAllowed`.
    pub max_allowed: ResourceList,
    /// `controlledResources` (default cpu, memory).
    pub controlled_resources: Vec<String>,
    /// `controlledValues` (default RequestsAndLimits).
    pub controlled_values: String,
    /// `mode` (default Auto).
    pub mode: String,
}

/// One container's explanation.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerExplanation {
    /// The container name.
    pub container: String,
    /// The checkpoint it comes from.
    pub checkpoint: String,
    /// Why the checkpoint could not be read, if it could not (the rest is then empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// CPU samples aggregated (one per pod container per metrics interval).
    pub total_samples: i64,
    /// Decayed CPU weight.
    pub cpu_total_weight: String,
    /// Decayed weight of memory peaks.
    pub memory_total_weight: String,
    /// First and last sample start, RFC 3339 (absent when unknown).
    pub first_sample_start: Option<String>,
    /// Last sample start.
    pub last_sample_start: Option<String>,
    /// Confidence: `min(days of history, samples / 1440)`.
    pub confidence: String,
    /// The upper bound's multiplier `(1 + 1/confidence)`.
    pub upper_multiplier: String,
    /// The lower bound's multiplier `(1 + 0.001/confidence)^-2`.
    pub lower_multiplier: String,
    /// CPU usage percentiles.
    pub cpu: Percentiles,
    /// Memory peak percentiles.
    pub memory: Percentiles,
    /// The recommendation before the policy (estimators, margin, minimums).
    pub estimated: Stage,
    /// After the policy.
    pub capped: Stage,
    /// Which caps the target took (`memory capped to minAllowed`).
    pub capped_by: Vec<String>,
    /// The policy.
    pub policy: PolicyText,
    /// The recommender settings this container's policy overrides (AEP-8026 and the target
    /// percentiles), as the policy names them.
    pub own_settings: Vec<String>,
    /// What `status.recommendation` holds for this container: target.
    pub status_target: Option<ResourceList>,
    /// And uncappedTarget.
    pub status_uncapped_target: Option<ResourceList>,
}

/// A VPA's explanation.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// `VerticalPodAutoscaler namespace/name`.
    pub object: String,
    /// `updatePolicy.updateMode` (default Recreate).
    pub update_mode: String,
    /// One per checkpoint.
    pub containers: Vec<ContainerExplanation>,
    /// What cannot be told from checkpoints.
    pub notes: Vec<String>,
    /// Why the recommendation is capped to fit the largest node, from the VPA's
    /// `RecommendationCappedToNode` condition (the checkpoints do not know the nodes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_cap: Option<String>,
}

/// What the notes say about OOM kills.
pub const OOM_NOTE: &str = "OOM kills: a checkpoint stores memory peaks only; an OOM enters as a peak of the bumped usage (max(1.2 x usage, usage + 100Mi) by default), so it shows as a high peak, but which peaks were OOMs is not recorded";

fn text(x: f64) -> String {
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_owned()
}

fn one(resource: Resource, amount: i64) -> String {
    amounts_to_list(&ResourceAmounts::from([(resource, amount)]))
        .into_values()
        .next()
        .map(|q| q.0)
        .unwrap_or_default()
}

/// Bytes as MiB with one decimal: histogram edges are not round binary amounts, and `10000000`
/// reads worse than `9.5Mi`.
fn mebibytes(bytes: f64) -> String {
    format!(
        "{}Mi",
        text((amount_from_float(bytes) as f64 / 1_048_576.0 * 10.0).round() / 10.0)
    )
}

fn stage(r: &super::capping::RecommendedResources) -> Stage {
    Stage {
        target: amounts_to_list(&r.target),
        lower_bound: amounts_to_list(&r.lower_bound),
        upper_bound: amounts_to_list(&r.upper_bound),
    }
}

/// Explains `vpa` from its `checkpoints` (those whose `spec.vpaObjectName` names it) with the
/// recommender's settings `config` (defaults: upstream's flags).
pub fn explain(
    vpa: &VerticalPodAutoscaler,
    checkpoints: &[VerticalPodAutoscalerCheckpoint],
    config: &EstimatorConfig,
    now: Timestamp,
) -> Explanation {
    let ns = vpa.metadata.namespace.clone().unwrap_or_default();
    let name = vpa.metadata.name.clone().unwrap_or_default();
    let containers_per_pod = checkpoints.len().max(1);
    let mut notes = vec![OOM_NOTE.to_owned()];
    notes.push(format!(
        "the pod minimums (25m CPU, 250Mi memory) are split over {containers_per_pod} container(s), one per checkpoint; the recommender counts the containers of the running pods"
    ));
    if checkpoints.is_empty() {
        notes.push("no checkpoint names this VPA: the recommender has not saved its history yet (it saves every --checkpoints-timeout / interval), or another recommender serves it".to_owned());
    }
    let containers = checkpoints
        .iter()
        .map(|c| container(vpa, c, containers_per_pod, config, now))
        .collect();
    let node_cap = vpa
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .find(|c| c.type_ == NODE_CAPPED_CONDITION && c.status == "True")
        .map(|c| c.message.clone().unwrap_or_default());
    Explanation {
        object: format!("VerticalPodAutoscaler {ns}/{name}"),
        update_mode: vpa.spec.update_mode().as_str().to_owned(),
        containers,
        notes,
        node_cap,
    }
}

fn container(
    vpa: &VerticalPodAutoscaler,
    c: &VerticalPodAutoscalerCheckpoint,
    containers_per_pod: usize,
    config: &EstimatorConfig,
    now: Timestamp,
) -> ContainerExplanation {
    let name = c.spec.container_name.clone().unwrap_or_default();
    let policy = vpa.spec.container_policy(&name);
    // The settings the recommender gives this container: the flags with the policy's own.
    let overrides = PerVpaSettings::from_spec(&vpa.spec).overrides(&name);
    let aggregations = overrides.apply(&AggregationsConfig::default());
    let config = &recommendation::config_for(policy, config);
    let mut own_settings = overrides.describe();
    if policy.is_some_and(|p| p.target_cpu_percentile.is_some()) {
        own_settings.push(format!(
            "targetCPUPercentile {}",
            text(config.target_cpu_percentile)
        ));
    }
    if policy.is_some_and(|p| p.target_memory_percentile.is_some()) {
        own_settings.push(format!(
            "targetMemoryPercentile {}",
            text(config.target_memory_percentile)
        ));
    }
    let mut out = ContainerExplanation {
        container: name.clone(),
        checkpoint: c.metadata.name.clone().unwrap_or_default(),
        error: None,
        total_samples: 0,
        cpu_total_weight: String::new(),
        memory_total_weight: String::new(),
        first_sample_start: None,
        last_sample_start: None,
        confidence: String::new(),
        upper_multiplier: String::new(),
        lower_multiplier: String::new(),
        cpu: empty_percentiles(),
        memory: empty_percentiles(),
        estimated: Stage::default(),
        capped: Stage::default(),
        capped_by: Vec::new(),
        policy: PolicyText {
            min_allowed: policy
                .and_then(|p| p.min_allowed.clone())
                .unwrap_or_default(),
            max_allowed: policy
                .and_then(|p| p.max_allowed.clone())
                .unwrap_or_default(),
            controlled_resources: policy
                .and_then(|p| p.controlled_resources.clone())
                .unwrap_or_else(|| vec!["cpu".into(), "memory".into()]),
            controlled_values: policy
                .and_then(|p| p.controlled_values.as_ref())
                .map_or("RequestsAndLimits", |v| v.as_str())
                .to_owned(),
            mode: policy
                .and_then(|p| p.mode.as_ref())
                .map_or("Auto", |m| m.as_str())
                .to_owned(),
        },
        own_settings,
        status_target: None,
        status_uncapped_target: None,
    };
    let status_rec = vpa
        .status
        .as_ref()
        .and_then(|s| s.recommendation.as_ref())
        .and_then(|r| r.container_recommendations.as_ref())
        .and_then(|list| {
            list.iter()
                .find(|r| r.container_name.as_deref() == Some(name.as_str()))
        });
    out.status_target = status_rec.map(|r| r.target.clone());
    out.status_uncapped_target = status_rec.and_then(|r| r.uncapped_target.clone());
    let Some(status) = &c.status else {
        out.error = Some("the checkpoint has no status".to_owned());
        return out;
    };
    let aggregate = match checkpoint::load(status, &aggregations, now) {
        Ok(a) => a,
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    describe_history(&mut out, &aggregate, config);
    let aggregates = std::collections::BTreeMap::from([(name.clone(), aggregate)]);
    match recommendation::recommend(&vpa.spec, &aggregates, containers_per_pod, config) {
        Ok(reports) => describe_recommendation(&mut out, reports.first()),
        Err(e) => out.error = Some(e.to_string()),
    }
    out
}

fn empty_percentiles() -> Percentiles {
    Percentiles {
        lower: (String::new(), String::new()),
        target: (String::new(), String::new()),
        upper: (String::new(), String::new()),
        max: String::new(),
    }
}

fn describe_history(
    out: &mut ContainerExplanation,
    a: &AggregateContainerState,
    config: &EstimatorConfig,
) {
    out.total_samples = a.total_samples_count;
    out.cpu_total_weight = text(a.cpu.histogram().total_weight());
    out.memory_total_weight = text(a.memory.histogram().total_weight());
    out.first_sample_start = a.first_sample_start.map(|t| t.to_string());
    out.last_sample_start = a.last_sample_start.map(|t| t.to_string());
    let confidence = a.confidence();
    out.confidence = text(confidence);
    let multiplier = |(m, e): (f64, f64)| (1.0 + m / confidence).powf(e);
    out.upper_multiplier = text(multiplier(UPPER_CONFIDENCE));
    out.lower_multiplier = text(multiplier(LOWER_CONFIDENCE));
    let cpu = |p: f64| one(Resource::Cpu, cpu_amount_from_cores(a.cpu.percentile(p)));
    let mem = |p: f64| mebibytes(a.memory.percentile(p));
    let max_start = |h: &super::histogram::Histogram| {
        h.buckets()
            .filter(|(_, w)| *w > 0.0)
            .map(|(b, _)| h.options().bucket_start(b))
            .fold(0.0, f64::max)
    };
    out.cpu = Percentiles {
        lower: (
            text(config.lower_bound_cpu_percentile),
            cpu(config.lower_bound_cpu_percentile),
        ),
        target: (
            text(config.target_cpu_percentile),
            cpu(config.target_cpu_percentile),
        ),
        upper: (
            text(config.upper_bound_cpu_percentile),
            cpu(config.upper_bound_cpu_percentile),
        ),
        max: one(
            Resource::Cpu,
            cpu_amount_from_cores(max_start(a.cpu.histogram())),
        ),
    };
    out.memory = Percentiles {
        lower: (
            text(config.lower_bound_memory_percentile),
            mem(config.lower_bound_memory_percentile),
        ),
        target: (
            text(config.target_memory_percentile),
            mem(config.target_memory_percentile),
        ),
        upper: (
            text(config.upper_bound_memory_percentile),
            mem(config.upper_bound_memory_percentile),
        ),
        max: mebibytes(max_start(a.memory.histogram())),
    };
}

fn describe_recommendation(out: &mut ContainerExplanation, report: Option<&RecommendationReport>) {
    let Some(r) = report else {
        out.error = Some(
            "mode: Off — the recommender writes no recommendation for this container".to_owned(),
        );
        return;
    };
    out.capped = stage(&r.capped);
    out.estimated = Stage {
        target: amounts_to_list(&r.uncapped_target),
        ..Stage::default()
    };
    out.capped_by.clone_from(&r.capped_by);
}

fn list_text(list: &ResourceList) -> String {
    if list.is_empty() {
        return "-".to_owned();
    }
    list.iter()
        .map(|(k, v)| format!("{} {}", shown(k), shown(&v.0)))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Explanation {
    /// The explanation as text for a terminal.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} (updateMode {})",
            shown(&self.object),
            shown(&self.update_mode)
        );
        for c in &self.containers {
            container_text(&mut out, c);
        }
        if let Some(cap) = &self.node_cap {
            let _ = writeln!(
                out,
                "\nCapped to fit the largest node (RecommendationCappedToNode): {}",
                shown(cap)
            );
        }
        for n in &self.notes {
            let _ = writeln!(out, "\nNote: {}", shown(n));
        }
        out
    }
}

/// One container's part of [`Explanation::to_text`].
fn container_text(out: &mut String, c: &ContainerExplanation) {
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "\nContainer {} (checkpoint {})",
        shown(&c.container),
        shown(&c.checkpoint)
    );
    if let Some(e) = &c.error {
        let _ = writeln!(out, "  cannot explain: {}", shown(e));
        return;
    }
    let _ = writeln!(
        out,
        "  History: {} CPU samples (decayed weight {}), memory peaks weight {}; samples from {} to {}",
        c.total_samples,
        c.cpu_total_weight,
        c.memory_total_weight,
        shown(c.first_sample_start.as_deref().unwrap_or("(unknown)")),
        shown(c.last_sample_start.as_deref().unwrap_or("(unknown)"))
    );
    let _ = writeln!(
        out,
        "  Confidence: {} (min(days of history, samples/1440)); upper bound x{}, lower bound x{}",
        c.confidence, c.upper_multiplier, c.lower_multiplier
    );
    for (what, p) in [("CPU usage", &c.cpu), ("Memory peaks", &c.memory)] {
        let _ = writeln!(
            out,
            "  {what}: p{} {} (lower bound), p{} {} (target), p{} {} (upper bound); highest bucket from {}",
            percent(&p.lower.0),
            p.lower.1,
            percent(&p.target.0),
            p.target.1,
            percent(&p.upper.0),
            p.upper.1,
            p.max
        );
    }
    let _ = writeln!(
        out,
        "  Estimated target (percentile + 15% margin, at least the pod minimum share): {}",
        list_text(&c.estimated.target)
    );
    let _ = writeln!(
        out,
        "  Policy: minAllowed {}; maxAllowed {}; controlledResources {}; controlledValues {}; mode {}",
        list_text(&c.policy.min_allowed),
        list_text(&c.policy.max_allowed),
        shown(&c.policy.controlled_resources.join(", ")),
        shown(&c.policy.controlled_values),
        shown(&c.policy.mode)
    );
    if !c.own_settings.is_empty() {
        let _ = writeln!(
            out,
            "  Own settings (override the recommender's flags unless it runs with --per-vpa-config=false): {}",
            shown(&c.own_settings.join(", "))
        );
    }
    let caps = if c.capped_by.is_empty() {
        "nothing capped the target".to_owned()
    } else {
        shown(&c.capped_by.join(", ")).into_owned()
    };
    let _ = writeln!(
        out,
        "  Capped: {caps} -> target {}; lower bound {}; upper bound {}",
        list_text(&c.capped.target),
        list_text(&c.capped.lower_bound),
        list_text(&c.capped.upper_bound)
    );
    match (&c.status_target, &c.status_uncapped_target) {
        (Some(t), u) => {
            let _ = writeln!(
                out,
                "  Status: target {}; uncappedTarget {}{}",
                list_text(t),
                u.as_ref().map_or_else(|| "-".to_owned(), list_text),
                if *t == c.capped.target {
                    " (matches the checkpoint)"
                } else {
                    " (differs: the status was computed from the live history, which moved since the checkpoint was saved)"
                }
            );
        }
        (None, _) => {
            let _ = writeln!(out, "  Status: no recommendation for this container yet");
        }
    }
    if c.policy.controlled_values == "RequestsOnly" {
        let _ = writeln!(
            out,
            "  Limits are left as they are (controlledValues RequestsOnly)"
        );
    } else {
        let _ = writeln!(
            out,
            "  Limits scale with requests in the pod's original limit/request ratio (controlledValues RequestsAndLimits)"
        );
    }
}

fn percent(fraction: &str) -> String {
    fraction
        .parse::<f64>()
        .map_or_else(|_| fraction.to_owned(), |f| text(f * 100.0))
}

#[cfg(test)]
mod tests;
