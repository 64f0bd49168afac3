//! The `vpa` of a `LoadReplay`: the per-pod CPU request, recommended each step from what the
//! step observed, through the same core functions the recommender calls.
//!
//! * **Joint mode** (the VPA annotated [`HORIZONTAL_AWARE_ANNOTATION`]` = "true"`): the
//!   workload's total CPU usage goes into a [`TotalUsage`] and [`joint::size`] chooses the pod's
//!   request from it and the HPA+'s target utilization, `minReplicas` (in force) and
//!   `maxReplicas`, capped by the VPA's `minAllowed` / `maxAllowed`. Its hysteresis decides when
//!   the request changes.
//! * **Plain mode** (no annotation): each Ready pod's usage goes into a [`VpaModel`] and the
//!   recommender's [`VpaModel::recommend`] gives the container's target and bounds.
//!
//! New pods get the target (the admission webhook); the updater updates a running pod when its
//! own [`decide_priority`] accepts it (outside the bounds at once, else after 12 hours and a
//! 10 % difference). Joint mode recommends bounds equal to its target, so every pod follows a
//! change of the joint request at once.
//!
//! The replay carries all usage on a pod's first container, so the request changes there; the
//! other containers keep their requests, and the pod's request is the sum. Memory requests are
//! not resized (the recommender's normal memory recommendation applies in the controller).

use std::collections::BTreeSet;

use jiff::Timestamp;
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlusSpec;
use plimsoll_core::api::vpa::{VerticalPodAutoscaler, VerticalPodAutoscalerSpec};
use plimsoll_core::conflict::{HORIZONTAL_AWARE_ANNOTATION, horizontal_aware};
use plimsoll_core::horizontal::observation::PodSample;
use plimsoll_core::quantity::Quantity;
use plimsoll_core::vertical::Resource;
use plimsoll_core::vertical::aggregate::AggregationsConfig;
use plimsoll_core::vertical::capping::PolicyBounds;
use plimsoll_core::vertical::estimator::EstimatorConfig;
use plimsoll_core::vertical::joint::{
    self, JointInput, JointRequest, JointSettings, TotalUsage, utilization_target,
};
use plimsoll_core::vertical::model::VpaModel;
use plimsoll_core::vertical::policy::UpdateMode;
use plimsoll_core::vertical::priority::{
    ContainerRecommendation, PodContainer, PodPhase, PodSnapshot, Resources, UpdateConfig,
    decide_priority,
};
use plimsoll_core::vertical::resources::ResourceAmounts;
use plimsoll_replay::ReplayError;

use super::invalid;

/// What the VPA recommends at one step, for the pod's first container (millicores), as the
/// updater and the admission webhook read it from `status.recommendation`.
pub(super) struct Recommended {
    /// The request new pods get.
    pub target: i64,
    /// Below this a running pod's request is updated at once.
    pub lower_bound: i64,
    /// Above this a running pod's request is updated at once.
    pub upper_bound: i64,
    /// In joint mode, the model's answer (its reason goes into the table).
    pub joint: Option<JointRequest>,
}

/// The VPA's state between steps.
pub(super) struct Vertical {
    spec: VerticalPodAutoscalerSpec,
    joint: bool,
    mode: UpdateMode,
    /// The first container: it carries the usage and the request changes.
    container: String,
    /// CPU requested by the pod's other containers, millicores.
    others: i64,
    containers_per_pod: usize,
    min_allowed: Option<i64>,
    max_allowed: Option<i64>,
    usage: TotalUsage,
    settings: JointSettings,
    model: VpaModel,
    aggregations: AggregationsConfig,
    estimator: EstimatorConfig,
}

impl Vertical {
    /// The VPA of `value` (an `autoscaling.k8s.io/v1` manifest) over pods like `template`,
    /// recording the total usage in buckets of `step_seconds`.
    pub fn new(
        value: &serde_json::Value,
        template: &PodSample,
        step_seconds: i64,
    ) -> Result<Self, ReplayError> {
        let vpa: VerticalPodAutoscaler =
            serde_json::from_value(value.clone()).map_err(|e| invalid("vpa", e))?;
        let annotations = vpa.metadata.annotations.clone().unwrap_or_default();
        if let Some(v) = annotations.get(HORIZONTAL_AWARE_ANNOTATION)
            && !matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "false")
        {
            return Err(invalid(
                &format!("vpa.metadata.annotations.{HORIZONTAL_AWARE_ANNOTATION}"),
                format!("must be \"true\" or \"false\", got {v:?}"),
            ));
        }
        let first = template
            .containers
            .first()
            .ok_or_else(|| invalid("containers", "at least one container is required"))?;
        let bounds = PolicyBounds::from_policy(vpa.spec.container_policy(&first.name))
            .map_err(|e| invalid("vpa.spec.resourcePolicy", e))?;
        let others = template
            .containers
            .iter()
            .skip(1)
            .filter_map(|c| c.requests.get("cpu"))
            .sum();
        let controls_cpu = !bounds.off && bounds.controlled.contains(&Resource::Cpu);
        Ok(Self {
            mode: if controls_cpu {
                UpdateMode::from_api(&vpa.spec.update_mode())
            } else {
                UpdateMode::Off
            },
            joint: horizontal_aware(&annotations),
            container: first.name.clone(),
            others,
            containers_per_pod: template.containers.len().max(1),
            min_allowed: bounds.min_allowed.get(&Resource::Cpu).map(|m| m + others),
            max_allowed: bounds.max_allowed.get(&Resource::Cpu).map(|m| m + others),
            usage: TotalUsage::new(step_seconds),
            settings: JointSettings::default(),
            model: VpaModel::new(),
            aggregations: AggregationsConfig::default(),
            estimator: EstimatorConfig::default(),
            spec: vpa.spec,
        })
    }

    /// How the recommendation reaches the pods.
    pub fn mode(&self) -> UpdateMode {
        self.mode
    }

    /// Forgets a pod that is gone (the recommender's instance state).
    pub fn forget(&mut self, pod: &str) {
        self.model.remove_pod(pod);
    }

    /// The CPU of the first container of each Ready pod with a sample: `(pod, millicores)`.
    fn usage_of(&self, pods: &[PodSample]) -> Vec<(String, i64)> {
        pods.iter()
            .filter(|p| p.ready == Some(true))
            .filter_map(|p| {
                let c = p.containers.iter().find(|c| c.name == self.container)?;
                let v = c.usage.get("cpu")?.as_ref().ok()?;
                Some((p.name.clone(), *v))
            })
            .collect()
    }

    /// The CPU request of the pod's other containers, millicores.
    pub fn others(&self) -> i64 {
        self.others
    }

    /// Records what the step observed in `pods` and recommends the first container's CPU
    /// request; `current` is the pod's request new pods get now. `None` while the recommender
    /// has nothing to say.
    pub fn recommend(
        &mut self,
        pods: &[PodSample],
        hpa: &HorizontalPodAutoscalerPlusSpec,
        current: i64,
        now: Timestamp,
    ) -> Option<Recommended> {
        let usage = self.usage_of(pods);
        if self.joint {
            if !usage.is_empty() {
                let total = usage.iter().map(|(_, v)| v).sum();
                self.usage.record(now, total, self.settings.window_seconds);
            }
            let r = joint::size(&JointInput {
                usage: &self.usage,
                target_utilization: utilization_target(hpa, "cpu").unwrap_or(0),
                min_replicas: hpa.min_replicas.unwrap_or(1),
                max_replicas: hpa.max_replicas,
                current: Some(current),
                min_allowed: self.min_allowed,
                max_allowed: self.max_allowed,
                settings: &self.settings,
            });
            // The joint request is exact: the bounds are the target, so the updater brings
            // every pod to it.
            let mine = (r.request? - self.others).max(1);
            return Some(Recommended {
                target: mine,
                lower_bound: mine,
                upper_bound: mine,
                joint: Some(r),
            });
        }
        for (pod, v) in &usage {
            self.model
                .add_cpu_sample(pod, &self.container, *v, now, &self.aggregations);
        }
        self.model
            .ensure_container(&self.container, &self.aggregations, now);
        let reports = self
            .model
            .recommend(&self.spec, self.containers_per_pod, &self.estimator)
            .ok()?;
        let r = reports.iter().find(|r| r.name == self.container)?;
        let get = |a: &ResourceAmounts| a.get(&Resource::Cpu).copied();
        Some(Recommended {
            target: get(&r.capped.target)?.max(1),
            lower_bound: get(&r.capped.lower_bound)?,
            upper_bound: get(&r.capped.upper_bound)?,
            joint: None,
        })
    }

    /// Whether the updater would update `pod` (its first container requesting `cpu`
    /// millicores, started at `born`) to `rec`: the updater's own [`decide_priority`] (outside
    /// the bounds at once; inside them after 12 hours and a 10 % difference).
    pub fn accepts(&self, cpu: i64, born: Timestamp, rec: &Recommended, now: Timestamp) -> bool {
        let cpu_only = |milli: i64| Resources {
            cpu: Some(Quantity::from_milli(i128::from(milli))),
            memory: None,
        };
        let pod = PodSnapshot {
            name: String::new(),
            phase: PodPhase::Running,
            containers: vec![PodContainer {
                name: self.container.clone(),
                requests: cpu_only(cpu),
                limits: Resources::default(),
            }],
            start_time: Some(born),
            ..PodSnapshot::default()
        };
        let recommendation = ContainerRecommendation {
            container: self.container.clone(),
            target: cpu_only(rec.target),
            lower_bound: cpu_only(rec.lower_bound),
            upper_bound: cpu_only(rec.upper_bound),
        };
        decide_priority(
            &pod,
            &[recommendation],
            &BTreeSet::new(),
            &UpdateConfig::default(),
            now,
        )
        .verdict
        .is_ok()
    }
}
