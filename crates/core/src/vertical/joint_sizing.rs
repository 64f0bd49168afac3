//! Joint mode in the recommender's loop: what a VPA annotated
//! [`HORIZONTAL_AWARE_ANNOTATION`]` = "true"` recommends for CPU, given the horizontal
//! autoscaler the service found for its workload ([`HorizontalSettings`]), the workload's total
//! usage ([`TotalUsage`], kept per VPA by [`super::recommender::Recommender`]) and its pods.
//! The model itself is [`joint::size`]; this module only measures its inputs in the cluster's
//! shapes and writes its answer into the normal recommendation.
//!
//! * **Scope.** The containers the HPA+'s CPU utilization is computed over: every container of
//!   the pod for a `Resource` metric, the named one for a `ContainerResource` metric. The total
//!   usage, the per-pod request and the split below count only those.
//! * **Per-pod request now.** The hysteresis compares the model's choice with the joint request
//!   recommended last (remembered between loops, or read back from the VPA's status while its
//!   `JointSizing` condition is true): the updater and the admission webhook bring the pods to
//!   it, and pods in between (new pods with the template's request, pods mid-resize) must not
//!   move it. Before any joint recommendation it is the pods' request: per pod, the CPU request
//!   of the scope's containers, read from the pod's status (`containerStatuses[].resources`,
//!   what an in-place resize actually applied) and else its spec; the pods' median (upper).
//!   Containers the VPA
//!   does not control for CPU (`mode: Off`, `controlledResources` without cpu) keep their
//!   requests: the joint request is their sum plus the controlled containers' share, and the
//!   policy's `minAllowed` / `maxAllowed` are summed over the controlled containers the same way.
//! * **Split.** The controlled share goes to the controlled containers in proportion to their
//!   normal CPU targets (equal parts when those are all zero; a single container gets it all),
//!   each at least 1m. Target, lower bound, upper bound and uncapped target for CPU all become
//!   that share, so the updater brings every pod to it at once and the admission webhook gives
//!   it to new pods, as for any recommendation. Memory keeps the normal recommendation.
//! * **Persistence.** The total usage is kept in the VPA's annotation [`TOTAL_USAGE_ANNOTATION`]
//!   (upstream's CRD prunes unknown status fields, an annotation survives): JSON
//!   `{"bucketSeconds":300,"base":B,"values":[o1,v1,o2,v2,…]}`, offsets in buckets from the
//!   previous entry (the first from `base`, buckets since the Unix epoch) and values in
//!   millicores ([`store`], [`restore`]). Its size is bounded by the window: at most
//!   `window / bucket` pairs (2 016 with the defaults), about 10 bytes each for loads below
//!   10 000 cores (≈ 20 KB), at most 42 bytes each in the worst case (≈ 85 KB), below the
//!   256 KiB Kubernetes allows for all annotations of an object.
//!
//! Pure: no clock, no I/O.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

use super::capping::PolicyBounds;
use super::joint::{self, JointInput, JointReason, JointRequest, JointSettings, TotalUsage};
use super::recommendation::RecommendationReport;
use super::resources::Resource;
use crate::api::hpa_plus::{HorizontalPodAutoscalerPlusSpec, MetricSourceType, MetricTargetType};
use crate::api::vpa::VerticalPodAutoscaler;
use crate::conflict::HORIZONTAL_AWARE_ANNOTATION;
use crate::horizontal::proposals::metrics_of;
use crate::quantity;

/// The VPA annotation that keeps a joint VPA's total usage across restarts.
pub const TOTAL_USAGE_ANNOTATION: &str = "plimsoll.dev/total-usage";

/// The condition type of a VPA in joint mode.
pub const CONDITION: &str = "JointSizing";

/// The condition's reason when the VPA is annotated but no horizontal autoscaler scales its
/// workload on CPU utilization.
pub const NO_AUTOSCALER_REASON: &str = "NoHorizontalAutoscaler";

/// The horizontal autoscaler a VPA in joint mode sizes against: what [`joint::size`] needs of
/// it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HorizontalSettings {
    /// `Kind/name` of the autoscaler, for messages.
    pub autoscaler: String,
    /// Its target CPU utilization, percent.
    pub target_utilization: i32,
    /// Its `minReplicas` (1 when unset).
    pub min_replicas: i32,
    /// Its `maxReplicas`.
    pub max_replicas: i32,
    /// The container of a `ContainerResource` metric; `None` for a `Resource` metric (the
    /// whole pod).
    pub container: Option<String>,
}

impl HorizontalSettings {
    /// The settings of `spec` (named `autoscaler` in messages) when it scales on CPU
    /// utilization (its first such metric, as [`joint::utilization_target`] reads it); `None`
    /// otherwise.
    pub fn of(autoscaler: &str, spec: &HorizontalPodAutoscalerPlusSpec) -> Option<Self> {
        metrics_of(spec).iter().find_map(|m| {
            let (name, container) = match m.type_ {
                MetricSourceType::Resource => (m.resource.as_ref()?.name.as_str(), None),
                MetricSourceType::ContainerResource => {
                    let c = m.container_resource.as_ref()?;
                    (c.name.as_str(), Some(c.container.clone()))
                }
                _ => return None,
            };
            let t = m.target()?;
            let target = t.average_utilization.filter(|u| *u > 0)?;
            (name == "cpu" && t.type_ == MetricTargetType::Utilization).then(|| Self {
                autoscaler: autoscaler.to_owned(),
                target_utilization: target,
                min_replicas: spec.min_replicas.unwrap_or(1).max(1),
                max_replicas: spec.max_replicas,
                container,
            })
        })
    }

    /// Whether `container` counts for the autoscaler's utilization.
    pub fn in_scope(&self, container: &str) -> bool {
        self.container.as_deref().is_none_or(|c| c == container)
    }
}

/// The model's settings and the bucket width of the total usage, as the service's flags set
/// them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JointConfig {
    /// The model's settings (learning period = one daily cycle, window, …).
    pub settings: JointSettings,
    /// Bucket width of [`TotalUsage`], seconds (default 300).
    pub bucket_seconds: i64,
}

impl Default for JointConfig {
    fn default() -> Self {
        Self {
            settings: JointSettings::default(),
            bucket_seconds: joint::DEFAULT_BUCKET_SECONDS,
        }
    }
}

/// Whether `annotations` put the VPA in joint mode.
pub fn annotated(annotations: Option<&BTreeMap<String, String>>) -> bool {
    annotations.is_some_and(crate::conflict::horizontal_aware)
}

/// The stored form of a [`TotalUsage`] (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredTotalUsage {
    /// Bucket width, seconds.
    pub bucket_seconds: i64,
    /// The bucket (since the Unix epoch) the first offset counts from.
    pub base: i64,
    /// `[offset, value, offset, value, …]`.
    pub values: Vec<i64>,
}

/// The annotation value for `usage`.
pub fn store(usage: &TotalUsage) -> String {
    let base = usage.buckets().first().map_or(0, |(b, _)| *b);
    let mut previous = base;
    let values = usage
        .buckets()
        .iter()
        .flat_map(|&(bucket, value)| {
            let offset = bucket - previous;
            previous = bucket;
            [offset, value]
        })
        .collect();
    let stored = StoredTotalUsage {
        bucket_seconds: usage.bucket_seconds(),
        base,
        values,
    };
    serde_json::to_string(&stored).unwrap_or_default()
}

/// The total usage an annotation value stands for, in buckets of `bucket_seconds` (stored
/// buckets of another width are moved to the bucket their start falls in, keeping the highest
/// value). A trailing odd entry is skipped.
pub fn restore(text: &str, bucket_seconds: i64) -> Result<TotalUsage, serde_json::Error> {
    let stored: StoredTotalUsage = serde_json::from_str(text)?;
    let width = stored.bucket_seconds.max(1);
    let target = bucket_seconds.max(1);
    let mut bucket = stored.base;
    let buckets = stored
        .values
        .chunks_exact(2)
        .map(|pair| {
            bucket = bucket.saturating_add(pair[0]);
            let start = bucket.saturating_mul(width);
            (start.div_euclid(target), pair[1])
        })
        .collect();
    Ok(TotalUsage::from_buckets(target, buckets))
}

/// A joint VPA's memory between loops: its total usage and when that was last persisted.
#[derive(Clone, Debug, PartialEq)]
pub struct JointState {
    /// The workload's total CPU usage, millicores.
    pub usage: TotalUsage,
    /// When the annotation last held `usage` (or when the VPA was first seen).
    pub persisted_at: Timestamp,
    /// `usage` changed since.
    pub dirty: bool,
    /// The per-pod request recommended last, millicores.
    pub last_request: Option<i64>,
}

impl JointState {
    /// The state on first sight of a joint VPA: the history in its annotation (empty when there
    /// is none or it does not parse), counted as persisted at `now`.
    pub fn first_sight(
        annotations: Option<&BTreeMap<String, String>>,
        config: &JointConfig,
        now: Timestamp,
    ) -> Self {
        let usage = annotations
            .and_then(|a| a.get(TOTAL_USAGE_ANNOTATION))
            .and_then(|text| restore(text, config.bucket_seconds).ok())
            .unwrap_or_else(|| TotalUsage::new(config.bucket_seconds));
        Self {
            usage,
            persisted_at: now,
            dirty: false,
            last_request: None,
        }
    }

    /// Records the total `milli` at `now`.
    pub fn record(&mut self, now: Timestamp, milli: i64, config: &JointConfig) {
        let before = self.usage.buckets().last().copied();
        self.usage
            .record(now, milli, config.settings.window_seconds);
        self.dirty |= self.usage.buckets().last().copied() != before;
    }
}

/// The CPU request of `container` of `pod` in millicores: what its status says was applied (an
/// in-place resize), else its spec; `None` without one.
fn cpu_request(pod: &Pod, container: &str) -> Option<i64> {
    let applied = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|list| list.iter().find(|c| c.name == container))
        .and_then(|c| c.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("cpu"))
        .and_then(|q| quantity::cpu_milli(q).ok());
    applied.or_else(|| {
        pod.spec
            .as_ref()?
            .containers
            .iter()
            .find(|c| c.name == container)?
            .resources
            .as_ref()?
            .requests
            .as_ref()?
            .get("cpu")
            .and_then(|q| quantity::cpu_milli(q).ok())
    })
}

/// The pods' request now over the scope: `(per-pod request, of which uncontrolled)`, from the
/// pod with the median (upper) request; `None` when no pod requests CPU in the scope.
fn current_request(
    pods: &[&Pod],
    horizontal: &HorizontalSettings,
    controlled: &dyn Fn(&str) -> bool,
) -> Option<(i64, i64)> {
    let mut per_pod: Vec<(i64, i64)> = pods
        .iter()
        .filter_map(|pod| {
            let containers = &pod.spec.as_ref()?.containers;
            let (mut total, mut others) = (0, 0);
            for c in containers.iter().filter(|c| horizontal.in_scope(&c.name)) {
                let r = cpu_request(pod, &c.name).unwrap_or(0);
                total += r;
                if !controlled(&c.name) {
                    others += r;
                }
            }
            (total > 0).then_some((total, others))
        })
        .collect();
    per_pod.sort_unstable();
    per_pod.get(per_pod.len() / 2).copied()
}

/// `total` split in proportion to `weights` (equal parts when they sum to 0), each at least 1;
/// the parts sum to `total` when it is at least the number of parts.
pub fn split(total: i64, weights: &[i64]) -> Vec<i64> {
    let n = weights.len();
    if n == 0 {
        return Vec::new();
    }
    let sum: i128 = weights.iter().map(|w| i128::from((*w).max(0))).sum();
    let weight = |w: i64| if sum > 0 { i128::from(w.max(0)) } else { 1 };
    let whole = if sum > 0 { sum } else { n as i128 };
    let mut parts: Vec<i64> = weights
        .iter()
        .map(|w| {
            let share = i128::from(total.max(0)) * weight(*w) / whole;
            i64::try_from(share).unwrap_or(i64::MAX)
        })
        .collect();
    // The rounding remainder goes to the largest weight (the first of equals).
    let given: i64 = parts.iter().sum();
    if let Some(i) = (0..n).max_by_key(|&i| (weight(weights[i]), std::cmp::Reverse(i))) {
        parts[i] += total.max(0) - given;
    }
    parts.into_iter().map(|p| p.max(1)).collect()
}

/// The CPU target the VPA's status recommends for the containers `controlled` picks, summed,
/// while its `JointSizing` condition is true (the recommendation is a joint one).
fn status_request(vpa: &VerticalPodAutoscaler, controlled: &dyn Fn(&str) -> bool) -> Option<i64> {
    let status = vpa.status.as_ref()?;
    let joint = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == CONDITION && c.status == "True");
    if !joint {
        return None;
    }
    let targets: Vec<i64> = status
        .recommendation
        .as_ref()?
        .container_recommendations
        .iter()
        .flatten()
        .filter(|c| c.container_name.as_deref().is_some_and(controlled))
        .filter_map(|c| quantity::cpu_milli(c.target.get("cpu")?).ok())
        .collect();
    (!targets.is_empty()).then(|| targets.iter().sum())
}

/// The joint request for `vpa` (its normal recommendation `reports`, its `pods`, and the
/// per-pod request recommended `last`), written into `reports` (see the module docs); the
/// model's answer, for the condition.
pub fn apply(
    vpa: &VerticalPodAutoscaler,
    horizontal: &HorizontalSettings,
    usage: &TotalUsage,
    pods: &[&Pod],
    last: Option<i64>,
    reports: &mut [RecommendationReport],
    settings: &JointSettings,
) -> JointRequest {
    let spec = &vpa.spec;
    let controls_cpu = |r: &RecommendationReport| r.capped.target.contains_key(&Resource::Cpu);
    let controlled = |name: &str| {
        horizontal.in_scope(name) && reports.iter().any(|r| r.name == name && controls_cpu(r))
    };
    let in_pods = current_request(pods, horizontal, &controlled);
    let others = in_pods.map_or(0, |(_, o)| o);
    let current = last
        .or_else(|| status_request(vpa, &controlled).map(|c| c + others))
        .or(in_pods.map(|(c, _)| c));
    let bounds: Vec<PolicyBounds> = reports
        .iter()
        .filter(|r| controlled(&r.name))
        .filter_map(|r| PolicyBounds::from_policy(spec.container_policy(&r.name)).ok())
        .collect();
    let allowed = |of: fn(&PolicyBounds) -> Option<i64>, all: bool| {
        let values: Vec<Option<i64>> = bounds.iter().map(of).collect();
        let present: Vec<i64> = values.iter().flatten().copied().collect();
        let ok = if all {
            !values.is_empty() && present.len() == values.len()
        } else {
            !present.is_empty()
        };
        ok.then(|| present.iter().sum::<i64>() + others)
    };
    let min_allowed = allowed(|b| b.min_allowed.get(&Resource::Cpu).copied(), false);
    let max_allowed = allowed(|b| b.max_allowed.get(&Resource::Cpu).copied(), true);
    let request = joint::size(&JointInput {
        usage,
        target_utilization: horizontal.target_utilization,
        min_replicas: horizontal.min_replicas,
        max_replicas: horizontal.max_replicas,
        current,
        min_allowed,
        max_allowed,
        settings,
    });
    let Some(per_pod) = request.request else {
        return request;
    };
    let shared: Vec<usize> = (0..reports.len())
        .filter(|&i| controlled(&reports[i].name))
        .collect();
    let weights: Vec<i64> = shared
        .iter()
        .map(|&i| {
            reports[i]
                .capped
                .target
                .get(&Resource::Cpu)
                .copied()
                .unwrap_or(0)
        })
        .collect();
    let count = i64::try_from(shared.len()).unwrap_or(i64::MAX);
    let parts = split((per_pod - others).max(count), &weights);
    for (&i, part) in shared.iter().zip(parts) {
        let r = &mut reports[i];
        for amounts in [
            &mut r.capped.target,
            &mut r.capped.lower_bound,
            &mut r.capped.upper_bound,
            &mut r.uncapped_target,
        ] {
            amounts.insert(Resource::Cpu, part);
        }
        r.capped_by.retain(|note| !note.starts_with("cpu"));
        if request.reason == JointReason::CappedByPolicy {
            r.capped_by
                .push("cpu sized jointly, capped to minAllowed/maxAllowed".to_owned());
        }
    }
    request
}

/// The `JointSizing` condition for a VPA in joint mode: `(status, reason, message)`.
pub fn condition(
    horizontal: Option<&HorizontalSettings>,
    request: Option<&JointRequest>,
    target: &str,
) -> (bool, String, String) {
    match (horizontal, request) {
        (Some(h), Some(r)) => (
            true,
            r.reason.as_str().to_owned(),
            format!("{} (sized with {})", r.message, h.autoscaler),
        ),
        _ => (
            false,
            NO_AUTOSCALER_REASON.to_owned(),
            format!(
                "{HORIZONTAL_AWARE_ANNOTATION} is set but no HorizontalPodAutoscalerPlus or \
                 HorizontalPodAutoscaler scales {target} on CPU utilization; the normal \
                 recommendation applies"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;

    #[test]
    fn split_keeps_the_total_and_the_proportions() {
        assert_eq!(split(1000, &[300]), [1000]);
        assert_eq!(split(1000, &[300, 100]), [750, 250]);
        assert_eq!(split(1000, &[1, 1, 1]), [334, 333, 333]);
        assert_eq!(split(10, &[0, 0]), [5, 5]);
        assert_eq!(split(1, &[5, 5]), [1, 1]);
        assert!(split(7, &[]).is_empty());
    }

    #[test]
    fn stored_form_round_trips_and_rebuckets() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().expect("ts");
        let mut usage = TotalUsage::new(300);
        for (i, v) in [(0, 1200), (1, 1500), (7, 900), (30, 2000)] {
            usage.record(t0 + SignedDuration::from_mins(5 * i), v, 7 * 86_400);
        }
        let text = store(&usage);
        assert!(
            text.starts_with(r#"{"bucketSeconds":300,"base":"#),
            "{text}"
        );
        assert!(
            text.ends_with(r#""values":[0,1200,1,1500,6,900,23,2000]}"#),
            "{text}"
        );
        assert_eq!(restore(&text, 300).expect("parses"), usage);
        // Into 10-minute buckets: 0 and 1 merge (highest kept).
        let coarse = restore(&text, 600).expect("parses");
        let values: Vec<i64> = coarse.buckets().iter().map(|(_, v)| *v).collect();
        assert_eq!(values, [1500, 900, 2000]);
        assert!(restore("not json", 300).is_err());
        assert_eq!(
            store(&TotalUsage::new(60)),
            r#"{"bucketSeconds":60,"base":0,"values":[]}"#
        );
    }

    #[test]
    fn first_sight_restores_the_annotation() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().expect("ts");
        let config = JointConfig::default();
        let mut state = JointState::first_sight(None, &config, t0);
        assert!(state.usage.is_empty() && !state.dirty);
        state.record(t0, 700, &config);
        assert!(state.dirty);
        let annotations =
            BTreeMap::from([(TOTAL_USAGE_ANNOTATION.to_owned(), store(&state.usage))]);
        let again = JointState::first_sight(Some(&annotations), &config, t0);
        assert_eq!(again.usage, state.usage);
        let broken = BTreeMap::from([(TOTAL_USAGE_ANNOTATION.to_owned(), "[".to_owned())]);
        assert!(
            JointState::first_sight(Some(&broken), &config, t0)
                .usage
                .is_empty()
        );
    }
}
