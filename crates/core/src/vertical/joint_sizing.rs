//! Joint mode in the recommender's loop: what a VPA annotated
//! [`HORIZONTAL_AWARE_ANNOTATION`]` = "true"` recommends for CPU, and for memory when the
//! horizontal autoscaler scales on memory utilization too, given the autoscaler the service found
//! for its workload ([`HorizontalSettings`]), the workload's total usage of each resource
//! ([`TotalUsage`], kept per VPA in a [`JointState`] by [`super::recommender::Recommender`]) and
//! its pods. The model itself is [`joint::size`]; this module only measures its inputs in the
//! cluster's shapes and writes its answer into the normal recommendation.
//!
//! Everything below holds per resource, for each resource the autoscaler has a `Utilization`
//! target on ([`HorizontalSettings::target`]); a resource it does not scale on keeps the normal
//! recommendation (an autoscaler on CPU only: memory as without joint mode).
//! * **Scope.** The containers the autoscaler's utilization of the resource is computed over:
//!   every container of the pod for a `Resource` metric, the named one for a
//!   `ContainerResource` metric. The total usage, the per-pod request and the split below count
//!   only those.
//! * **Per-pod request now.** The hysteresis compares the model's choice with the joint request
//!   recommended last (remembered between loops, or read back from the VPA's status while its
//!   `JointSizing` condition is true): the updater and the admission webhook bring the pods to
//!   it, and pods in between (new pods with the template's request, pods mid-resize) must not
//!   move it. Before any joint recommendation it is the pods' request: per pod, the request of
//!   the scope's containers, read from the pod's status (`containerStatuses[].resources`, what an
//!   in-place resize actually applied) and else its spec; the pods' median (upper). Containers
//!   the VPA does not control for the resource (`mode: Off`, `controlledResources` without it)
//!   keep their requests: the joint request is their sum plus the controlled containers' share,
//!   and the policy's `minAllowed` / `maxAllowed` are summed over the controlled containers the
//!   same way.
//! * **Split.** The controlled share goes to the controlled containers in proportion to their
//!   normal targets for the resource (equal parts when those are all zero; a single container
//!   gets it all), each at least 1 (millicore or byte). Target, lower bound, upper bound and
//!   uncapped target for the resource all become that share, so the updater brings every pod to
//!   it at once and the admission webhook gives it to new pods, as for any recommendation.
//! * **Persistence.** The total usage is kept in the VPA's annotation [`TOTAL_USAGE_ANNOTATION`]
//!   (upstream's CRD prunes unknown status fields, an annotation survives), in the stored form
//!   of every load history ([`StoredPeakSeries`]): JSON
//!   `{"stepSeconds":300,"baseBucket":B,"metrics":{"cpu":[o1,v1,o2,v2,…],"memory":[…]}}`,
//!   offsets in buckets from the previous entry (the first from `baseBucket`, buckets since the
//!   Unix epoch), CPU in millicores and memory in bytes, `memory` only once memory usage is
//!   recorded (only while the autoscaler scales on memory) ([`store`], [`restore`]). The form
//!   written before (`{"bucketSeconds":300,"base":B,"values":[…],"memory":{…}}`, CPU at the top
//!   level) is still read. Its size is bounded by the window: at most `window / bucket` pairs
//!   per resource (2 016 with the defaults), about 10 bytes each for CPU below 10 000 cores and
//!   15 for memory below 1 TB (≈ 50 KB for both), at most 42 bytes each in the worst case
//!   (≈ 170 KB), below the 256 KiB Kubernetes allows for all annotations of an object.
//!
//! Pure: no clock, no I/O.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

use super::capping::PolicyBounds;
use super::joint::{self, JointInput, JointReason, JointRequest, JointSettings, TotalUsage, Unit};
use super::recommendation::{JointCondition, RecommendationReport};
use super::resources::Resource;
use crate::api::hpa_plus::history::StoredPeakSeries;
use crate::api::hpa_plus::{HorizontalPodAutoscalerPlusSpec, MetricTargetType};
use crate::api::vpa::VerticalPodAutoscaler;
use crate::conflict::HORIZONTAL_AWARE_ANNOTATION;
use crate::horizontal::offsets::flatten;
use crate::horizontal::proposals::metrics_of;
use crate::horizontal::source::pod_resource;
use crate::quantity;
use crate::quantity::saturating_total;
use crate::stored::{self, Order, PairRules, StoredStateError};

/// The VPA annotation that keeps a joint VPA's total usage across restarts.
pub const TOTAL_USAGE_ANNOTATION: &str = "plimsoll.dev/total-usage";

/// The condition's reason when the VPA is annotated but no horizontal autoscaler scales its
/// workload on CPU or memory utilization.
pub const NO_AUTOSCALER_REASON: &str = "NoHorizontalAutoscaler";

/// One `Utilization` target of the horizontal autoscaler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UtilizationTarget {
    /// The target utilization, percent.
    pub target_utilization: i32,
    /// The container of a `ContainerResource` metric; `None` for a `Resource` metric (the
    /// whole pod).
    pub container: Option<String>,
}

/// The horizontal autoscaler a VPA in joint mode sizes against: what [`joint::size`] needs of
/// it, per resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HorizontalSettings {
    /// `Kind/name` of the autoscaler, for messages.
    pub autoscaler: String,
    /// Its `minReplicas` (1 when unset).
    pub min_replicas: i32,
    /// Its `maxReplicas`.
    pub max_replicas: i32,
    /// Its target on CPU utilization, if it scales on one.
    pub cpu: Option<UtilizationTarget>,
    /// Its target on memory utilization, if it scales on one.
    pub memory: Option<UtilizationTarget>,
}

/// The first `Utilization` target of `spec` on `resource`.
fn utilization_target(
    spec: &HorizontalPodAutoscalerPlusSpec,
    resource: Resource,
) -> Option<UtilizationTarget> {
    metrics_of(spec).iter().find_map(|m| {
        let (name, container) = pod_resource(m)?;
        let t = m.target()?;
        let target = t.average_utilization.filter(|u| *u > 0)?;
        (name == resource.name() && t.type_ == MetricTargetType::Utilization).then_some(
            UtilizationTarget {
                target_utilization: target,
                container: container.map(str::to_owned),
            },
        )
    })
}

impl HorizontalSettings {
    /// The settings of `spec` (named `autoscaler` in messages) when it scales on CPU or memory
    /// utilization (for each, its first such metric, as [`joint::utilization_target`] reads
    /// it); `None` otherwise.
    pub fn of(autoscaler: &str, spec: &HorizontalPodAutoscalerPlusSpec) -> Option<Self> {
        let cpu = utilization_target(spec, Resource::Cpu);
        let memory = utilization_target(spec, Resource::Memory);
        (cpu.is_some() || memory.is_some()).then(|| Self {
            autoscaler: autoscaler.to_owned(),
            min_replicas: spec.min_replicas.unwrap_or(1).max(1),
            max_replicas: spec.max_replicas,
            cpu,
            memory,
        })
    }

    /// The target on `resource`, if the autoscaler scales on it.
    pub fn target(&self, resource: Resource) -> Option<&UtilizationTarget> {
        match resource {
            Resource::Cpu => self.cpu.as_ref(),
            Resource::Memory => self.memory.as_ref(),
        }
    }

    /// Whether `container` counts for the autoscaler's utilization of `resource` (every
    /// container when it has no target on it).
    pub fn in_scope(&self, resource: Resource, container: &str) -> bool {
        self.target(resource)
            .and_then(|t| t.container.as_deref())
            .is_none_or(|c| c == container)
    }

    /// The resources it scales on, `cpu` first.
    pub fn resources(&self) -> Vec<Resource> {
        Resource::ALL
            .into_iter()
            .filter(|r| self.target(*r).is_some())
            .collect()
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

/// One resource's [`TotalUsage`] as the annotation held it before it took the stored form of
/// every load history (still read, never written; see the module docs), and the checks both
/// forms' series go through.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredSeries {
    /// Bucket width, seconds.
    pub bucket_seconds: i64,
    /// The bucket (since the Unix epoch) the first offset counts from.
    pub base: i64,
    /// `[offset, value, offset, value, …]`.
    pub values: Vec<i64>,
}

/// A joint VPA's total usage as written before the annotation took the stored form of every
/// load history (still read): CPU at the top level (the form written before memory was sized),
/// memory under `memory` when recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredTotalUsage {
    /// The total CPU usage, millicores.
    #[serde(flatten)]
    pub cpu: StoredSeries,
    /// The total memory usage, bytes; absent when none was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<StoredSeries>,
}

impl StoredSeries {
    /// In buckets of `bucket_seconds` (see [`restore`]), checked by `crate::stored`'s rules:
    /// a stored width from 1 second to the window, at most the buckets [`TotalUsage::record`]
    /// keeps for `window_seconds` at that width, buckets strictly increasing from `base` and
    /// inside the time range, values from 0 (record keeps no negative total).
    fn usage(
        &self,
        bucket_seconds: i64,
        window_seconds: i64,
        (width_field, field): (&'static str, &'static str),
    ) -> Result<TotalUsage, StoredStateError> {
        let window = window_seconds.max(1);
        let width = self.bucket_seconds;
        if !(1..=window).contains(&width) {
            return Err(StoredStateError::BadValue { field: width_field });
        }
        let target = bucket_seconds.max(1);
        let rules = PairRules {
            field,
            max_pairs: usize::try_from(window / width + 1).unwrap_or(usize::MAX),
            positions: stored::buckets_range(width),
            values: 0..=i64::MAX,
            order: Order::Increasing,
        };
        let buckets = stored::pairs(self.base, &self.values, &rules)?
            .into_iter()
            // In range: the start of each bucket is a representable second.
            .map(|(bucket, value)| ((bucket * width).div_euclid(target), value))
            .collect();
        Ok(TotalUsage::from_buckets(target, buckets))
    }
}

/// The series names of the annotation's [`StoredPeakSeries`].
const CPU_SERIES: &str = "cpu";
const MEMORY_SERIES: &str = "memory";

/// The annotation value for the total CPU usage `cpu` and memory usage `memory`: the stored
/// form of every load history ([`StoredPeakSeries`]), one series per resource, memory left out
/// when empty.
pub fn store(cpu: &TotalUsage, memory: &TotalUsage) -> String {
    let series = [(CPU_SERIES, cpu), (MEMORY_SERIES, memory)];
    let base = series
        .iter()
        .filter_map(|(_, usage)| usage.buckets().first().map(|(b, _)| *b))
        .min();
    let metrics = series
        .iter()
        .filter(|(_, usage)| !usage.is_empty())
        .filter_map(|(name, usage)| {
            let base = base?;
            Some((
                (*name).to_owned(),
                flatten(base, usage.buckets().iter().copied()),
            ))
        })
        .collect();
    let stored = StoredPeakSeries {
        step_seconds: Some(cpu.bucket_seconds()),
        base_bucket: base,
        metrics,
        ..StoredPeakSeries::default()
    };
    serde_json::to_string(&stored).unwrap_or_default()
}

/// The total CPU and memory usage an annotation value stands for, in buckets of
/// `config.bucket_seconds` (stored buckets of another width are moved to the bucket their
/// start falls in, keeping the highest value); memory is empty when the value has none. The
/// value is the [`store`] form, or the form written before it (`bucketSeconds`, `base`,
/// `values` for CPU and `memory` in the same shape). An annotation that is neither, or breaks
/// a rule of [`StoredSeries`]'s checks, is refused as a whole.
pub fn restore(
    text: &str,
    config: &JointConfig,
) -> Result<(TotalUsage, TotalUsage), StoredStateError> {
    let unreadable = StoredStateError::Unreadable {
        field: TOTAL_USAGE_ANNOTATION,
    };
    let value: serde_json::Value = serde_json::from_str(text).map_err(|_| unreadable.clone())?;
    let (bucket, window) = (config.bucket_seconds, config.settings.window_seconds);
    if value.get("bucketSeconds").is_some() {
        let stored: StoredTotalUsage = serde_json::from_value(value).map_err(|_| unreadable)?;
        let memory = match stored.memory {
            None => TotalUsage::new(bucket),
            Some(m) => m.usage(bucket, window, ("memory.bucketSeconds", "memory.values"))?,
        };
        let cpu = stored
            .cpu
            .usage(bucket, window, ("bucketSeconds", "values"))?;
        return Ok((cpu, memory));
    }
    let stored: StoredPeakSeries = serde_json::from_value(value).map_err(|_| unreadable)?;
    // Only what `store` writes: two named series, no means, no tuning-history base.
    if stored.base_hour.is_some() {
        return Err(StoredStateError::BadValue { field: "baseHour" });
    }
    if !stored.means.is_empty() {
        return Err(StoredStateError::BadValue { field: "means" });
    }
    if stored
        .metrics
        .keys()
        .any(|name| ![CPU_SERIES, MEMORY_SERIES].contains(&name.as_str()))
    {
        return Err(StoredStateError::BadValue { field: "metrics" });
    }
    let Some(width) = stored.step_seconds else {
        return Err(StoredStateError::Missing {
            field: "stepSeconds",
        });
    };
    let series = |name: &str, field: &'static str| -> Result<TotalUsage, StoredStateError> {
        match (stored.metrics.get(name), stored.base_bucket) {
            (None, _) => Ok(TotalUsage::new(bucket)),
            (Some(values), Some(base)) => StoredSeries {
                bucket_seconds: width,
                base,
                values: values.clone(),
            }
            .usage(bucket, window, ("stepSeconds", field)),
            (Some(_), None) => Err(StoredStateError::Missing {
                field: "baseBucket",
            }),
        }
    };
    Ok((
        series(CPU_SERIES, "metrics.cpu")?,
        series(MEMORY_SERIES, "metrics.memory")?,
    ))
}

/// A joint VPA's memory between loops: its total usage and when that was last persisted.
#[derive(Clone, Debug, PartialEq)]
pub struct JointState {
    /// The workload's total CPU usage, millicores.
    pub usage: TotalUsage,
    /// The workload's total memory usage, bytes (recorded while the autoscaler scales on
    /// memory).
    pub memory_usage: TotalUsage,
    /// When the annotation last held the usage (or when the VPA was first seen).
    pub persisted_at: Timestamp,
    /// The usage changed since.
    pub dirty: bool,
    /// The per-pod CPU request recommended last, millicores.
    pub last_request: Option<i64>,
    /// The per-pod memory request recommended last, bytes.
    pub last_memory_request: Option<i64>,
    /// Why the annotation was ignored on first sight, if it was (the usage then started
    /// afresh; the VPA says so while this state lives).
    pub ignored: Option<StoredStateError>,
}

impl JointState {
    /// The state on first sight of a joint VPA: the history in its annotation (empty when there
    /// is none, or when it is ignored: [`restore`]; then [`Self::ignored`] says why), counted as
    /// persisted at `now`.
    pub fn first_sight(
        annotations: Option<&BTreeMap<String, String>>,
        config: &JointConfig,
        now: Timestamp,
    ) -> Self {
        let empty = || {
            (
                TotalUsage::new(config.bucket_seconds),
                TotalUsage::new(config.bucket_seconds),
            )
        };
        let ((usage, memory_usage), ignored) = match annotations
            .and_then(|a| a.get(TOTAL_USAGE_ANNOTATION))
            .map(|text| restore(text, config))
        {
            None => (empty(), None),
            Some(Ok(read)) => (read, None),
            Some(Err(why)) => (empty(), Some(why)),
        };
        Self {
            usage,
            memory_usage,
            persisted_at: now,
            dirty: false,
            last_request: None,
            last_memory_request: None,
            ignored,
        }
    }

    /// The total usage of `resource`.
    pub fn usage_of(&self, resource: Resource) -> &TotalUsage {
        match resource {
            Resource::Cpu => &self.usage,
            Resource::Memory => &self.memory_usage,
        }
    }

    /// Records the total `amount` of `resource` (millicores, bytes) at `now`.
    pub fn record(
        &mut self,
        now: Timestamp,
        resource: Resource,
        amount: i64,
        config: &JointConfig,
    ) {
        let usage = match resource {
            Resource::Cpu => &mut self.usage,
            Resource::Memory => &mut self.memory_usage,
        };
        let before = usage.buckets().last().copied();
        usage.record(now, amount, config.settings.window_seconds);
        self.dirty |= usage.buckets().last().copied() != before;
    }

    /// The annotation value for the usage ([`store`]).
    pub fn stored(&self) -> String {
        store(&self.usage, &self.memory_usage)
    }

    /// Forgets the requests recommended last (the VPA is no longer sized jointly).
    pub fn forget_requests(&mut self) {
        self.last_request = None;
        self.last_memory_request = None;
    }

    fn last_mut(&mut self, resource: Resource) -> &mut Option<i64> {
        match resource {
            Resource::Cpu => &mut self.last_request,
            Resource::Memory => &mut self.last_memory_request,
        }
    }
}

/// `q` as the model's integer amount of `resource` (millicores, bytes).
fn amount(
    resource: Resource,
    q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
) -> Option<i64> {
    match resource {
        Resource::Cpu => quantity::cpu_milli(q).ok(),
        Resource::Memory => quantity::memory_bytes(q).ok(),
    }
}

/// The request of `resource` of `container` of `pod` (millicores, bytes): what its status says
/// was applied (an in-place resize), else its spec; `None` without one.
fn request_of(pod: &Pod, container: &str, resource: Resource) -> Option<i64> {
    let applied = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|list| list.iter().find(|c| c.name == container))
        .and_then(|c| c.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get(resource.name()))
        .and_then(|q| amount(resource, q));
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
            .get(resource.name())
            .and_then(|q| amount(resource, q))
    })
}

/// The pods' request of `resource` now over the scope: `(per-pod request, of which
/// uncontrolled)`, from the pod with the median (upper) request; `None` when no pod requests
/// the resource in the scope.
fn current_request(
    pods: &[&Pod],
    resource: Resource,
    horizontal: &HorizontalSettings,
    controlled: &dyn Fn(&str) -> bool,
) -> Option<(i64, i64)> {
    let mut per_pod: Vec<(i64, i64)> = pods
        .iter()
        .filter_map(|pod| {
            let containers = &pod.spec.as_ref()?.containers;
            let (mut total, mut others) = (0, 0);
            for c in containers
                .iter()
                .filter(|c| horizontal.in_scope(resource, &c.name))
            {
                let r = request_of(pod, &c.name, resource).unwrap_or(0);
                // Requests are a namespace user's: summed without wrapping.
                total = i64::saturating_add(total, r);
                if !controlled(&c.name) {
                    others = i64::saturating_add(others, r);
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

/// The target of `resource` the VPA's status recommends for the containers `controlled` picks,
/// summed, while its `JointSizing` condition is true (the recommendation is a joint one).
fn status_request(
    vpa: &VerticalPodAutoscaler,
    resource: Resource,
    controlled: &dyn Fn(&str) -> bool,
) -> Option<i64> {
    let status = vpa.status.as_ref()?;
    let joint = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == JointCondition::TYPE && c.status == "True");
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
        .filter_map(|c| amount(resource, c.target.get(resource.name())?))
        .collect();
    // The targets of several containers, each up to i64::MAX: the recommender's own (a tenant's
    // minAllowed can make them that large) or whatever someone with write access put there.
    (!targets.is_empty()).then(|| saturating_total(targets))
}

/// The model's answers for a VPA in joint mode, one per resource the autoscaler scales on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JointAnswer {
    /// For CPU (millicores), when the autoscaler scales on CPU utilization.
    pub cpu: Option<JointRequest>,
    /// For memory (bytes), when the autoscaler scales on memory utilization.
    pub memory: Option<JointRequest>,
}

impl JointAnswer {
    /// The answers with their resource, `cpu` first.
    pub fn sized(&self) -> Vec<(Resource, &JointRequest)> {
        [(Resource::Cpu, &self.cpu), (Resource::Memory, &self.memory)]
            .into_iter()
            .filter_map(|(r, a)| Some((r, a.as_ref()?)))
            .collect()
    }
}

/// What sizing one VPA in one loop works from, whatever the resource.
struct Sizing<'a> {
    vpa: &'a VerticalPodAutoscaler,
    horizontal: &'a HorizontalSettings,
    pods: &'a [&'a Pod],
    settings: &'a JointSettings,
}

impl Sizing<'_> {
    /// The joint request of `resource` (the autoscaler's `target` on it, the workload's
    /// `usage`, the per-pod request recommended `last`), written into the normal recommendation
    /// `reports`.
    fn resource(
        &self,
        resource: Resource,
        target: &UtilizationTarget,
        usage: &TotalUsage,
        last: Option<i64>,
        reports: &mut [RecommendationReport],
    ) -> JointRequest {
        let Sizing {
            vpa,
            horizontal,
            pods,
            settings,
        } = *self;
        let spec = &vpa.spec;
        let controls = |r: &RecommendationReport| r.capped.target.contains_key(&resource);
        let controlled = |name: &str| {
            horizontal.in_scope(resource, name)
                && reports.iter().any(|r| r.name == name && controls(r))
        };
        let in_pods = current_request(pods, resource, horizontal, &controlled);
        let others = in_pods.map_or(0, |(_, o)| o);
        let current = last
            .or_else(|| {
                status_request(vpa, resource, &controlled).map(|c| c.saturating_add(others))
            })
            .or(in_pods.map(|(c, _)| c));
        let bounds: Vec<PolicyBounds> = reports
            .iter()
            .filter(|r| controlled(&r.name))
            .filter_map(|r| PolicyBounds::from_policy(spec.container_policy(&r.name)).ok())
            .collect();
        let allowed = |of: &dyn Fn(&PolicyBounds) -> Option<i64>, all: bool| {
            let values: Vec<Option<i64>> = bounds.iter().map(of).collect();
            let present: Vec<i64> = values.iter().flatten().copied().collect();
            let ok = if all {
                !values.is_empty() && present.len() == values.len()
            } else {
                !present.is_empty()
            };
            // A tenant's minAllowed / maxAllowed and requests may each be near i64::MAX: past
            // it, the largest request, not a panic or a wrapped (negative) bound.
            ok.then(|| saturating_total(present.iter().copied().chain([others])))
        };
        let min_allowed = allowed(&|b| b.min_allowed.get(&resource).copied(), false);
        let max_allowed = allowed(&|b| b.max_allowed.get(&resource).copied(), true);
        let unit = match resource {
            Resource::Cpu => Unit::Millicores,
            Resource::Memory => Unit::Bytes,
        };
        let request = joint::size_in(
            &JointInput {
                usage,
                target_utilization: target.target_utilization,
                min_replicas: horizontal.min_replicas,
                max_replicas: horizontal.max_replicas,
                current,
                min_allowed,
                max_allowed,
                settings,
            },
            unit,
        );
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
                    .get(&resource)
                    .copied()
                    .unwrap_or(0)
            })
            .collect();
        let count = i64::try_from(shared.len()).unwrap_or(i64::MAX);
        // A request kept from the status may be anything written there, negative included.
        let parts = split(per_pod.saturating_sub(others).max(count), &weights);
        for (&i, part) in shared.iter().zip(parts) {
            let r = &mut reports[i];
            for amounts in [
                &mut r.capped.target,
                &mut r.capped.lower_bound,
                &mut r.capped.upper_bound,
                &mut r.uncapped_target,
            ] {
                amounts.insert(resource, part);
            }
            r.capped_by
                .retain(|note| !note.starts_with(resource.name()));
            if request.reason == JointReason::CappedByPolicy {
                r.capped_by.push(format!(
                    "{resource} sized jointly, capped to minAllowed/maxAllowed"
                ));
            }
        }
        request
    }
}

/// The joint requests for `vpa` (its normal recommendation `reports`, its `pods`, and its
/// `state`: total usage and the requests recommended last, which this updates), written into
/// `reports` for each resource `horizontal` scales on (see the module docs); the model's
/// answers, for the condition.
pub fn apply(
    vpa: &VerticalPodAutoscaler,
    horizontal: &HorizontalSettings,
    state: &mut JointState,
    pods: &[&Pod],
    reports: &mut [RecommendationReport],
    settings: &JointSettings,
) -> JointAnswer {
    let sizing = Sizing {
        vpa,
        horizontal,
        pods,
        settings,
    };
    let mut answer = JointAnswer::default();
    for resource in Resource::ALL {
        let Some(target) = horizontal.target(resource) else {
            *state.last_mut(resource) = None;
            continue;
        };
        let last = *state.last_mut(resource);
        let request = sizing.resource(resource, target, state.usage_of(resource), last, reports);
        *state.last_mut(resource) = request.request;
        match resource {
            Resource::Cpu => answer.cpu = Some(request),
            Resource::Memory => answer.memory = Some(request),
        }
    }
    answer
}

/// The `JointSizing` condition for a VPA in joint mode: `(status, reason, message)`. With both
/// resources sized, the reason is the first of them (`cpu` first) that is not `BothBoundsMet`.
pub fn condition(
    horizontal: Option<&HorizontalSettings>,
    answer: Option<&JointAnswer>,
    target: &str,
) -> (bool, String, String) {
    let sized = answer.map(JointAnswer::sized).unwrap_or_default();
    match horizontal {
        Some(h) if !sized.is_empty() => {
            let reason = sized
                .iter()
                .map(|(_, r)| r.reason)
                .find(|r| *r != JointReason::BothBoundsMet)
                .unwrap_or(JointReason::BothBoundsMet);
            let parts: Vec<String> = sized
                .iter()
                .map(|(resource, r)| format!("{resource}: {}", r.message))
                .collect();
            let names: Vec<&str> = sized.iter().map(|(r, _)| r.name()).collect();
            (
                true,
                reason.as_str().to_owned(),
                format!(
                    "{} (sized {} with {})",
                    parts.join("; "),
                    names.join(" and "),
                    h.autoscaler
                ),
            )
        }
        _ => (
            false,
            NO_AUTOSCALER_REASON.to_owned(),
            format!(
                "{HORIZONTAL_AWARE_ANNOTATION} is set but no HorizontalPodAutoscalerPlus or \
                 HorizontalPodAutoscaler scales {target} on CPU or memory utilization; the \
                 normal recommendation applies"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;
    use serde_json::json;

    use crate::vertical::capping::RecommendedResources;

    const MI: i64 = 1 << 20;
    const GI: i64 = 1 << 30;

    fn t0() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().expect("ts")
    }

    /// 25 hours of 5-minute buckets: `low` for the first half, `high` for the second, so the
    /// 5th percentile is `low` and the 95th `high`, past the learning period.
    fn history(low: i64, high: i64) -> TotalUsage {
        let mut usage = TotalUsage::new(300);
        for i in 0..300 {
            let v = if i < 150 { low } else { high };
            usage.record(t0() + SignedDuration::from_mins(5 * i), v, 7 * 86_400);
        }
        usage
    }

    /// A joint VPA on Deployment `web`, default policies.
    fn vpa() -> VerticalPodAutoscaler {
        serde_json::from_value(json!({
            "apiVersion": "autoscaling.k8s.io/v1",
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "ns",
                         "annotations": {"plimsoll.dev/horizontal-aware": "true"}},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
        }))
        .expect("a VPA")
    }

    /// A pod with one container `app` requesting 300m and 256Mi.
    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "ns"},
            "spec": {"containers": [{"name": "app",
                "resources": {"requests": {"cpu": "300m", "memory": "256Mi"}}}]},
        }))
        .expect("a pod")
    }

    /// The normal recommendation for `app`: 250m / 200Mi, bounds around it.
    fn reports() -> Vec<RecommendationReport> {
        let amounts = |cpu: i64, memory: i64| {
            BTreeMap::from([(Resource::Cpu, cpu), (Resource::Memory, memory)])
        };
        vec![RecommendationReport {
            name: "app".into(),
            capped: RecommendedResources {
                target: amounts(250, 200 * MI),
                lower_bound: amounts(200, 150 * MI),
                upper_bound: amounts(400, 300 * MI),
            },
            uncapped_target: amounts(250, 200 * MI),
            capped_by: Vec::new(),
            confidence: 1.0,
        }]
    }

    /// An HPA+ with replicas 2–10 and a 60 % target on each of `resources`.
    fn hpa(resources: &[Resource]) -> HorizontalSettings {
        let on = |r: Resource| {
            resources.contains(&r).then_some(UtilizationTarget {
                target_utilization: 60,
                container: None,
            })
        };
        HorizontalSettings {
            autoscaler: "HorizontalPodAutoscalerPlus/web".into(),
            min_replicas: 2,
            max_replicas: 10,
            cpu: on(Resource::Cpu),
            memory: on(Resource::Memory),
        }
    }

    /// A state with a day of CPU (1200m–3000m) and memory (2Gi–6Gi) totals.
    fn state() -> JointState {
        let mut state = JointState::first_sight(None, &JointConfig::default(), t0());
        state.usage = history(1_200, 3_000);
        state.memory_usage = history(2 * GI, 6 * GI);
        state
    }

    fn of(report: &RecommendationReport, r: Resource) -> [i64; 4] {
        [
            report.capped.target[&r],
            report.capped.lower_bound[&r],
            report.capped.upper_bound[&r],
            report.uncapped_target[&r],
        ]
    }

    #[test]
    fn settings_read_cpu_and_memory_utilization_targets() {
        let spec = |metrics: serde_json::Value| -> HorizontalPodAutoscalerPlusSpec {
            serde_json::from_value(json!({
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "maxReplicas": 10,
                "metrics": metrics,
            }))
            .expect("a spec")
        };
        let resource = |name: &str, u: i32| {
            json!({"type": "Resource", "resource": {"name": name,
                "target": {"type": "Utilization", "averageUtilization": u}}})
        };
        let memory = HorizontalSettings::of(
            "HorizontalPodAutoscalerPlus/web",
            &spec(json!([resource("memory", 70)])),
        )
        .expect("scales on memory");
        assert_eq!(memory.resources(), [Resource::Memory]);
        assert_eq!(
            memory.memory.as_ref().map(|t| t.target_utilization),
            Some(70)
        );
        let both = HorizontalSettings::of(
            "x",
            &spec(json!([resource("cpu", 60), resource("memory", 70)])),
        )
        .expect("scales on both");
        assert_eq!(both.resources(), [Resource::Cpu, Resource::Memory]);
        let external = json!([{"type": "External", "external": {"metric": {"name": "q"},
            "target": {"type": "Value", "value": "1"}}}]);
        assert!(HorizontalSettings::of("x", &spec(external)).is_none());
    }

    #[test]
    fn memory_is_sized_when_the_autoscaler_scales_on_memory() {
        let (vpa, pod) = (vpa(), pod());
        let mut state = state();
        let mut reports = reports();
        let h = hpa(&[Resource::Memory]);
        let answer = apply(
            &vpa,
            &h,
            &mut state,
            &[&pod],
            &mut reports,
            &JointSettings::default(),
        );
        assert!(answer.cpu.is_none());
        let memory = answer.memory.as_ref().expect("memory sized");
        // Peak 6Gi within ⌊0.8 · 10⌋ = 8 pods at 60 % needs ≥ 1.25Gi; trough 2Gi on 2 pods
        // allows ≤ 1.67Gi; the request is their geometric mean, and 256Mi is far below.
        assert_eq!(memory.reason, JointReason::BothBoundsMet);
        assert_eq!(memory.lower_bound, Some(1_342_177_280));
        assert_eq!(memory.upper_bound, Some(1_789_569_706));
        let request = memory.request.expect("a request");
        assert!(
            1_342_177_280 < request && request < 1_789_569_706,
            "{request}"
        );
        assert_eq!(of(&reports[0], Resource::Memory), [request; 4]);
        // CPU keeps the normal recommendation.
        assert_eq!(of(&reports[0], Resource::Cpu), [250, 200, 400, 250]);
        assert_eq!(
            (state.last_request, state.last_memory_request),
            (None, Some(request))
        );
        let (status, reason, message) = condition(Some(&h), Some(&answer), "Deployment/web");
        assert!(status);
        assert_eq!(reason, "BothBoundsMet");
        assert!(message.starts_with("memory: peak 6144.0Mi"), "{message}");
        assert!(
            message.ends_with("(sized memory with HorizontalPodAutoscalerPlus/web)"),
            "{message}"
        );
    }

    #[test]
    fn both_resources_are_sized_when_the_autoscaler_scales_on_both() {
        let (vpa, pod) = (vpa(), pod());
        let mut state = state();
        let mut reports = reports();
        let h = hpa(&[Resource::Cpu, Resource::Memory]);
        let answer = apply(
            &vpa,
            &h,
            &mut state,
            &[&pod],
            &mut reports,
            &JointSettings::default(),
        );
        let cpu = answer
            .cpu
            .as_ref()
            .and_then(|a| a.request)
            .expect("cpu sized");
        let memory = answer
            .memory
            .as_ref()
            .and_then(|a| a.request)
            .expect("memory sized");
        // CPU as in the recommender's test: 625m ≤ 790m ≤ 1000m.
        assert_eq!(cpu, 790);
        assert_eq!(of(&reports[0], Resource::Cpu), [790; 4]);
        assert_eq!(of(&reports[0], Resource::Memory), [memory; 4]);
        assert_eq!(
            (state.last_request, state.last_memory_request),
            (Some(790), Some(memory))
        );
        let (_, reason, message) = condition(Some(&h), Some(&answer), "Deployment/web");
        assert_eq!(reason, "BothBoundsMet");
        assert!(message.starts_with("cpu: peak 3000m"), "{message}");
        assert!(message.contains("; memory: peak 6144.0Mi"), "{message}");
        assert!(message.contains("(sized cpu and memory with"), "{message}");
    }

    #[test]
    fn cpu_only_leaves_memory_to_the_normal_recommendation() {
        let (vpa, pod) = (vpa(), pod());
        let mut state = state();
        state.last_memory_request = Some(GI);
        let mut reports = reports();
        let h = hpa(&[Resource::Cpu]);
        let answer = apply(
            &vpa,
            &h,
            &mut state,
            &[&pod],
            &mut reports,
            &JointSettings::default(),
        );
        assert!(answer.memory.is_none());
        assert_eq!(answer.cpu.as_ref().and_then(|a| a.request), Some(790));
        assert_eq!(of(&reports[0], Resource::Cpu), [790; 4]);
        assert_eq!(
            of(&reports[0], Resource::Memory),
            [200 * MI, 150 * MI, 300 * MI, 200 * MI]
        );
        assert_eq!(
            state.last_memory_request, None,
            "forgotten once memory is not sized"
        );
        let (_, _, message) = condition(Some(&h), Some(&answer), "Deployment/web");
        assert!(
            message.ends_with("(sized cpu with HorizontalPodAutoscalerPlus/web)"),
            "{message}"
        );
        let (status, reason, _) = condition(None, None, "Deployment/web");
        assert_eq!((status, reason.as_str()), (false, NO_AUTOSCALER_REASON));
    }

    #[test]
    fn memory_usage_is_stored_next_to_cpu_and_restored() {
        let config = JointConfig::default();
        let mut state = JointState::first_sight(None, &config, t0());
        state.record(t0(), Resource::Cpu, 700, &config);
        state.record(t0(), Resource::Memory, 3 * GI, &config);
        let text = state.stored();
        assert_eq!(
            text,
            r#"{"stepSeconds":300,"baseBucket":5890752,"metrics":{"cpu":[0,700],"memory":[0,3221225472]}}"#
        );
        let annotations = BTreeMap::from([(TOTAL_USAGE_ANNOTATION.to_owned(), text)]);
        let again = JointState::first_sight(Some(&annotations), &config, t0());
        assert_eq!(
            (&again.usage, &again.memory_usage),
            (&state.usage, &state.memory_usage)
        );
    }

    #[test]
    fn an_annotation_written_before_memory_was_sized_still_restores() {
        // The form written by the CPU-only joint mode: no `memory` key.
        let old = r#"{"bucketSeconds":300,"base":5890752,"values":[0,1200,1,1500]}"#;
        let annotations = BTreeMap::from([(TOTAL_USAGE_ANNOTATION.to_owned(), old.to_owned())]);
        let state = JointState::first_sight(Some(&annotations), &JointConfig::default(), t0());
        assert_eq!(
            state.usage.buckets(),
            [(5_890_752, 1_200), (5_890_753, 1_500)]
        );
        assert!(state.memory_usage.is_empty());
        // Written back in the one stored form, CPU only.
        assert_eq!(
            state.stored(),
            r#"{"stepSeconds":300,"baseBucket":5890752,"metrics":{"cpu":[0,1200,1,1500]}}"#
        );
    }

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
        let empty = TotalUsage::new(300);
        let text = store(&usage, &empty);
        assert!(
            text.starts_with(r#"{"stepSeconds":300,"baseBucket":"#),
            "{text}"
        );
        assert!(
            text.ends_with(r#""metrics":{"cpu":[0,1200,1,1500,6,900,23,2000]}}"#),
            "{text}"
        );
        let config = |bucket_seconds| JointConfig {
            bucket_seconds,
            ..JointConfig::default()
        };
        assert_eq!(
            restore(&text, &config(300)).expect("parses"),
            (usage.clone(), empty)
        );
        // Into 10-minute buckets: 0 and 1 merge (highest kept).
        let (coarse, _) = restore(&text, &config(600)).expect("parses");
        let values: Vec<i64> = coarse.buckets().iter().map(|(_, v)| *v).collect();
        assert_eq!(values, [1500, 900, 2000]);
        assert_eq!(
            restore("not json", &config(300)),
            Err(StoredStateError::Unreadable {
                field: TOTAL_USAGE_ANNOTATION
            })
        );
        assert_eq!(
            store(&TotalUsage::new(60), &TotalUsage::new(60)),
            r#"{"stepSeconds":60}"#
        );
        assert_eq!(
            restore(r#"{"stepSeconds":60}"#, &config(300)).expect("parses"),
            (TotalUsage::new(300), TotalUsage::new(300))
        );
    }

    #[test]
    fn first_sight_restores_the_annotation() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().expect("ts");
        let config = JointConfig::default();
        let mut state = JointState::first_sight(None, &config, t0);
        assert!(state.usage.is_empty() && !state.dirty);
        state.record(t0, Resource::Cpu, 700, &config);
        assert!(state.dirty);
        let annotations = BTreeMap::from([(TOTAL_USAGE_ANNOTATION.to_owned(), state.stored())]);
        let again = JointState::first_sight(Some(&annotations), &config, t0);
        assert_eq!(again.usage, state.usage);
        assert_eq!(again.ignored, None);
        let broken = BTreeMap::from([(TOTAL_USAGE_ANNOTATION.to_owned(), "[".to_owned())]);
        let state = JointState::first_sight(Some(&broken), &config, t0);
        assert!(state.usage.is_empty());
        assert_eq!(
            state.ignored,
            Some(StoredStateError::Unreadable {
                field: TOTAL_USAGE_ANNOTATION
            })
        );
    }

    #[test]
    fn a_hostile_annotation_is_ignored_whole() {
        let config = JointConfig::default();
        let cases = [
            (
                r#"{"bucketSeconds":0,"base":0,"values":[]}"#.to_owned(),
                StoredStateError::BadValue {
                    field: "bucketSeconds",
                },
            ),
            (
                r#"{"bucketSeconds":300,"base":9223372036854775807,"values":[1,1]}"#.to_owned(),
                StoredStateError::BadPosition { field: "values" },
            ),
            (
                r#"{"bucketSeconds":300,"base":5890752,"values":[0,-1]}"#.to_owned(),
                StoredStateError::BadValue { field: "values" },
            ),
            (
                format!(
                    r#"{{"bucketSeconds":300,"base":5890752,"values":[0,1],"memory":{{"bucketSeconds":1,"base":0,"values":{:?}}}}}"#,
                    vec![1; 2 * 604_802]
                ),
                StoredStateError::TooLong {
                    field: "memory.values",
                    len: 2 * 604_802,
                    max: 2 * 604_801,
                },
            ),
            (
                r#"{"stepSeconds":300,"baseBucket":5890752,"metrics":{"rps":[0,1]}}"#.to_owned(),
                StoredStateError::BadValue { field: "metrics" },
            ),
            (
                r#"{"baseBucket":5890752,"metrics":{"cpu":[0,1]}}"#.to_owned(),
                StoredStateError::Missing {
                    field: "stepSeconds",
                },
            ),
            (
                r#"{"stepSeconds":300,"metrics":{"cpu":[0,1]}}"#.to_owned(),
                StoredStateError::Missing {
                    field: "baseBucket",
                },
            ),
            (
                r#"{"stepSeconds":300,"baseBucket":5890752,"metrics":{"memory":[0,-1]}}"#
                    .to_owned(),
                StoredStateError::BadValue {
                    field: "metrics.memory",
                },
            ),
            (
                r#"{"stepSeconds":300,"baseBucket":1,"means":{"cpu":[0,1]}}"#.to_owned(),
                StoredStateError::BadValue { field: "means" },
            ),
        ];
        for (text, why) in cases {
            assert_eq!(restore(&text, &config), Err(why));
        }
    }

    /// A joint VPA on Deployment `web` with container `policies` and `status`.
    fn vpa_with(policies: &serde_json::Value, status: &serde_json::Value) -> VerticalPodAutoscaler {
        serde_json::from_value(json!({
            "apiVersion": "autoscaling.k8s.io/v1",
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "ns",
                         "annotations": {"plimsoll.dev/horizontal-aware": "true"}},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "resourcePolicy": {"containerPolicies": policies}},
            "status": status,
        }))
        .expect("a VPA")
    }

    /// A pod with `(container, cpu request)`s.
    fn pod_with(containers: &[(&str, &str)]) -> Pod {
        let containers: Vec<serde_json::Value> = containers
            .iter()
            .map(|(name, cpu)| json!({"name": name, "resources": {"requests": {"cpu": cpu}}}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "ns"},
            "spec": {"containers": containers},
        }))
        .expect("a pod")
    }

    /// The normal recommendation of [`reports`] for each of `names`.
    fn reports_for(names: &[&str]) -> Vec<RecommendationReport> {
        let app = reports().remove(0);
        names
            .iter()
            .map(|n| RecommendationReport {
                name: (*n).to_owned(),
                ..app.clone()
            })
            .collect()
    }

    /// `apply` for CPU alone on `pod`, with a report per name of `names`.
    fn sized_cpu(
        vpa: &VerticalPodAutoscaler,
        state: &mut JointState,
        pod: &Pod,
        names: &[&str],
    ) -> (JointAnswer, Vec<RecommendationReport>) {
        let mut reports = reports_for(names);
        let answer = apply(
            vpa,
            &hpa(&[Resource::Cpu]),
            state,
            &[pod],
            &mut reports,
            &JointSettings::default(),
        );
        (answer, reports)
    }

    /// A status whose joint recommendation gives each `(container, cpu)`.
    fn joint_status(targets: &[(&str, &str)]) -> serde_json::Value {
        let recommendations: Vec<serde_json::Value> = targets
            .iter()
            .map(|(name, cpu)| json!({"containerName": name, "target": {"cpu": cpu}}))
            .collect();
        json!({
            "conditions": [{"type": JointCondition::TYPE, "status": "True"}],
            "recommendation": {"containerRecommendations": recommendations},
        })
    }

    #[test]
    fn allowed_amounts_summing_past_i64_cap_to_the_largest_request_rather_than_panic() {
        // 5e15 cores is 5e18 millicores: two containers' minAllowed pass i64::MAX, and so does
        // one container's 9e18 with the 9e18 a container the VPA does not size requests.
        let big = |field: &str, names: &[&str], cpu: &str| -> serde_json::Value {
            names
                .iter()
                .map(|n| json!({"containerName": n, field: {"cpu": cpu}}))
                .collect()
        };
        let cases = [
            (
                big("minAllowed", &["app", "cache"], "5e15"),
                pod_with(&[("app", "300m"), ("cache", "300m")]),
                vec!["app", "cache"],
                i64::MAX,
            ),
            (
                big("minAllowed", &["app"], "9e15"),
                pod_with(&[("app", "300m"), ("log", "9e15")]),
                vec!["app"],
                i64::MAX,
            ),
            (
                big("maxAllowed", &["app", "cache"], "5e15"),
                pod_with(&[("app", "300m"), ("cache", "300m")]),
                vec!["app", "cache"],
                790,
            ),
        ];
        for (policies, pod, names, want) in cases {
            let vpa = vpa_with(&policies, &json!({}));
            let (answer, reports) = sized_cpu(&vpa, &mut state(), &pod, &names);
            let cpu = answer.cpu.as_ref().expect("cpu sized");
            assert_eq!(cpu.request, Some(want), "{policies}");
            for r in &reports {
                assert!(r.capped.target[&Resource::Cpu] >= 1, "{policies}");
            }
        }
    }

    #[test]
    fn joint_targets_in_status_summing_past_i64_read_as_the_largest_request_rather_than_panic() {
        // Read back while no usage is recorded (a restart): the status is kept as the request.
        let cases = [
            (
                joint_status(&[("app", "5e15"), ("cache", "5e15")]),
                pod_with(&[("app", "300m"), ("cache", "300m")]),
                vec!["app", "cache"],
            ),
            (
                joint_status(&[("app", "9e15")]),
                pod_with(&[("app", "300m"), ("log", "9e15")]),
                vec!["app"],
            ),
        ];
        for (status, pod, names) in cases {
            let vpa = vpa_with(&json!([]), &status);
            let mut state = JointState::first_sight(None, &JointConfig::default(), t0());
            let (answer, _) = sized_cpu(&vpa, &mut state, &pod, &names);
            let cpu = answer.cpu.as_ref().expect("cpu sized");
            assert_eq!(
                (cpu.request, cpu.reason),
                (Some(i64::MAX), JointReason::NoUsage),
                "{status}"
            );
        }
    }

    #[test]
    fn a_negative_request_remembered_from_the_status_is_split_without_overflow() {
        // A status written with a negative target (by whoever may write it) is kept as the
        // request while no usage is recorded; a sidecar's request is then taken off it.
        let vpa = vpa_with(
            &json!([]),
            &joint_status(&[("app", "-9223372036854775807m")]),
        );
        let mut state = JointState::first_sight(None, &JointConfig::default(), t0());
        for pod in [
            pod_with(&[("app", "300m")]),
            pod_with(&[("app", "300m"), ("log", "100m")]),
        ] {
            let (_, reports) = sized_cpu(&vpa, &mut state, &pod, &["app"]);
            assert_eq!(of(&reports[0], Resource::Cpu), [1; 4]);
        }
        assert_eq!(state.last_request, Some(i64::MIN + 1));
    }
}
