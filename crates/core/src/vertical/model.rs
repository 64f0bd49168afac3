//! The recommender's in-memory state for one VPA: one aggregate per container name, fed by the
//! containers of the VPA's pods (upstream `model/cluster.go` + `model/vpa.go`, reduced to what a
//! single VPA needs).
//!
//! The controller and `replay` both drive a [`VpaModel`]: add samples and OOM kills as they are
//! observed, forget pods that are gone, collect garbage, ask for the recommendation, and save
//! checkpoints. Time is always passed in.
//!
//! Invariants: a container instance is keyed by (pod, container name); its samples go into the
//! aggregate of its container name; aggregates without a sample for a whole memory window are
//! dropped by [`VpaModel::garbage_collect`].

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;

use super::aggregate::{
    AggregateContainerState, AggregationsConfig, ContainerState, OomError, ResourceAmount,
};
use super::checkpoint::{self, CheckpointError};
use super::estimator::EstimatorConfig;
use super::per_vpa::PerVpaSettings;
use super::recommendation::{self, RecommendationError, RecommendationReport};
use crate::api::vpa::{VerticalPodAutoscalerCheckpointStatus, VerticalPodAutoscalerSpec};

/// The fewest aggregates a VPA keeps, however few containers its pods have now (see
/// [`VpaModel::cap_aggregates`]).
pub const MIN_AGGREGATES_KEPT: usize = 32;

/// Usage aggregates of one VPA's containers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VpaModel {
    /// Container name → aggregate.
    pub aggregates: BTreeMap<String, AggregateContainerState>,
    /// (pod, container) → running instance state.
    instances: BTreeMap<(String, String), ContainerState>,
    /// The VPA's own aggregation settings (AEP-8026), over the `config` every method is given.
    pub settings: PerVpaSettings,
}

impl VpaModel {
    /// An empty model.
    pub fn new() -> Self {
        Self::default()
    }

    /// Restores the aggregate of `container` from its checkpoint status, replacing any.
    pub fn restore(
        &mut self,
        container: &str,
        status: &VerticalPodAutoscalerCheckpointStatus,
        config: &AggregationsConfig,
        now: Timestamp,
    ) -> Result<(), CheckpointError> {
        let aggregate =
            checkpoint::load(status, &self.settings.for_container(container, config), now)?;
        self.aggregates.insert(container.to_owned(), aggregate);
        Ok(())
    }

    /// Makes sure `container` has an aggregate (an empty one created at `now` if new), so it gets
    /// a recommendation (the pod minimums) before its first sample.
    pub fn ensure_container(
        &mut self,
        container: &str,
        config: &AggregationsConfig,
        now: Timestamp,
    ) {
        let config = self.settings.for_container(container, config);
        self.aggregates
            .entry(container.to_owned())
            .or_insert_with(|| AggregateContainerState::new(&config, now));
    }

    /// The instance and aggregate of `container` in `pod` (created if new), and the settings
    /// it is aggregated with: `base` with the VPA's own.
    fn parts(
        &mut self,
        pod: &str,
        container: &str,
        base: &AggregationsConfig,
        time: Timestamp,
    ) -> (
        &mut ContainerState,
        &mut AggregateContainerState,
        AggregationsConfig,
    ) {
        let config = self.settings.for_container(container, base);
        let aggregate = self
            .aggregates
            .entry(container.to_owned())
            .or_insert_with(|| AggregateContainerState::new(&config, time));
        let instance = self
            .instances
            .entry((pod.to_owned(), container.to_owned()))
            .or_default();
        (instance, aggregate, config)
    }

    /// Adds a CPU usage sample (millicores) of `container` in `pod` measured from `time`.
    /// Returns false for a duplicate, out-of-order or negative sample.
    pub fn add_cpu_sample(
        &mut self,
        pod: &str,
        container: &str,
        millicores: ResourceAmount,
        time: Timestamp,
        config: &AggregationsConfig,
    ) -> bool {
        let (instance, aggregate, _) = self.parts(pod, container, config, time);
        instance.add_cpu_sample(aggregate, millicores, time)
    }

    /// Adds a memory usage sample (bytes). Returns false for an out-of-order or negative sample.
    pub fn add_memory_sample(
        &mut self,
        pod: &str,
        container: &str,
        bytes: ResourceAmount,
        time: Timestamp,
        config: &AggregationsConfig,
    ) -> bool {
        let (instance, aggregate, config) = self.parts(pod, container, config, time);
        instance.add_memory_sample(aggregate, &config, bytes, time, false)
    }

    /// Records an OOM kill at `time`; `used_bytes` is the container's memory request (or the
    /// usage at the kill, when known).
    pub fn record_oom(
        &mut self,
        pod: &str,
        container: &str,
        used_bytes: ResourceAmount,
        time: Timestamp,
        config: &AggregationsConfig,
    ) -> Result<(), OomError> {
        let (instance, aggregate, config) = self.parts(pod, container, config, time);
        instance.record_oom(aggregate, &config, time, used_bytes)
    }

    /// Forgets the instance state of a pod that no longer exists (its samples stay aggregated).
    pub fn remove_pod(&mut self, pod: &str) {
        self.instances.retain(|(p, _), _| p != pod);
    }

    /// Drops the aggregates of containers that no pod has now, beyond `max(32, 2 × the
    /// containers pods have now)`: those without a sample first, then the longest without one.
    /// Returns their names.
    ///
    /// Container names are written by a namespace user: pods that never run, each with a
    /// thousand new names a minute, would otherwise add an aggregate (two histograms) and a
    /// checkpoint per name until its memory window ends, and the VPA's own policy can set that
    /// window to decades. The aggregates of current containers are never dropped here.
    pub fn cap_aggregates(&mut self, current: &BTreeSet<&str>) -> Vec<String> {
        let limit = MIN_AGGREGATES_KEPT.max(current.len().saturating_mul(2));
        let excess = self.aggregates.len().saturating_sub(limit);
        if excess == 0 {
            return Vec::new();
        }
        let mut former: Vec<(bool, Timestamp, &String)> = self
            .aggregates
            .iter()
            .filter(|(name, _)| !current.contains(name.as_str()))
            .map(|(name, a)| {
                let last = a.last_sample_start.unwrap_or(a.creation_time);
                (a.total_samples_count > 0, last, name)
            })
            .collect();
        former.sort();
        let dropped: Vec<String> = former
            .into_iter()
            .take(excess)
            .map(|(_, _, name)| name.clone())
            .collect();
        for name in &dropped {
            self.aggregates.remove(name);
            self.instances.retain(|(_, c), _| c != name);
        }
        dropped
    }

    /// Drops aggregates that saw no sample for a whole memory window; returns their names.
    pub fn garbage_collect(&mut self, config: &AggregationsConfig, now: Timestamp) -> Vec<String> {
        let expired: Vec<String> = self
            .aggregates
            .iter()
            .filter(|(name, a)| a.is_expired(&self.settings.for_container(name, config), now))
            .map(|(name, _)| name.clone())
            .collect();
        for name in &expired {
            self.aggregates.remove(name);
            self.instances.retain(|(_, c), _| c != name);
        }
        expired
    }

    /// The recommendation for every container (see [`recommendation::recommend`]).
    pub fn recommend(
        &self,
        spec: &VerticalPodAutoscalerSpec,
        containers_per_pod: usize,
        config: &EstimatorConfig,
    ) -> Result<Vec<RecommendationReport>, RecommendationError> {
        recommendation::recommend(spec, &self.aggregates, containers_per_pod, config)
    }

    /// The checkpoint status of every container, stamped `now`.
    pub fn checkpoints(
        &self,
        now: Timestamp,
    ) -> Vec<(String, VerticalPodAutoscalerCheckpointStatus)> {
        self.aggregates
            .iter()
            .map(|(name, a)| (name.clone(), checkpoint::save(a, now)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    #[test]
    fn names_pods_no_longer_have_are_capped_and_current_ones_kept() {
        let config = AggregationsConfig::default();
        let t = ts("2024-03-01T00:00:00Z");
        let mut m = VpaModel::new();
        assert!(m.add_cpu_sample("web-1", "app", 100, t, &config));
        // A container of an earlier template, with samples, and 60 names that pods which never
        // ran had, one minute apart.
        assert!(m.add_cpu_sample("web-0", "former", 100, t, &config));
        for i in 0..60 {
            let at = t + SignedDuration::from_mins(i);
            m.ensure_container(&format!("churn-{i:02}"), &config, at);
        }
        let current = BTreeSet::from(["app"]);
        let dropped = m.cap_aggregates(&current);
        assert_eq!(m.aggregates.len(), MIN_AGGREGATES_KEPT);
        assert_eq!(dropped.len(), 62 - MIN_AGGREGATES_KEPT);
        assert!(m.aggregates.contains_key("app") && m.aggregates.contains_key("former"));
        // The oldest names without a sample went first.
        assert_eq!(dropped.first().map(String::as_str), Some("churn-00"));
        assert!(m.aggregates.contains_key("churn-59"));
        assert!(
            m.cap_aggregates(&current).is_empty(),
            "already within the cap"
        );
        // Current containers are never dropped, however many: the cap is twice their number.
        let many: Vec<String> = (0..100).map(|i| format!("c{i}")).collect();
        for name in &many {
            m.ensure_container(name, &config, t);
        }
        let current: BTreeSet<&str> = many.iter().map(String::as_str).collect();
        m.cap_aggregates(&current);
        assert!(many.iter().all(|n| m.aggregates.contains_key(n)));
        assert!(m.aggregates.len() <= 200);
    }

    // cf. upstream model/cluster_test.go (samples per container name, garbage collection)
    #[test]
    fn samples_aggregate_by_container_name_and_expire() {
        let config = AggregationsConfig::default();
        let t = ts("2024-03-01T00:00:00Z");
        let mut m = VpaModel::new();
        assert!(m.add_cpu_sample("web-1", "app", 100, t, &config));
        assert!(m.add_cpu_sample("web-2", "app", 200, t, &config));
        assert!(
            !m.add_cpu_sample("web-1", "app", 100, t, &config),
            "duplicate per instance"
        );
        assert_eq!(m.aggregates["app"].total_samples_count, 2);
        m.remove_pod("web-1");
        assert!(
            m.add_cpu_sample("web-1", "app", 100, t, &config),
            "new instance after removal"
        );
        m.ensure_container("sidecar", &config, t);
        let later = t + SignedDuration::from_hours(24 * 8);
        assert_eq!(m.garbage_collect(&config, later), vec!["app", "sidecar"]);
        assert!(m.aggregates.is_empty());
    }

    #[test]
    fn checkpoints_restore_into_a_new_model() {
        let config = AggregationsConfig::default();
        let t = ts("2024-03-01T00:00:00Z");
        let mut m = VpaModel::new();
        for i in 0..100 {
            let at = t + SignedDuration::from_mins(i);
            m.add_cpu_sample("web-1", "app", 300, at, &config);
            m.add_memory_sample("web-1", "app", 1 << 28, at, &config);
        }
        m.record_oom(
            "web-1",
            "app",
            1 << 28,
            t + SignedDuration::from_mins(100),
            &config,
        )
        .expect("recorded");
        let now = t + SignedDuration::from_hours(2);
        let mut restored = VpaModel::new();
        for (name, status) in m.checkpoints(now) {
            restored
                .restore(&name, &status, &config, now)
                .expect("restores");
        }
        assert_eq!(restored.checkpoints(now), m.checkpoints(now));
    }
}
