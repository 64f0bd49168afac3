//! What the updater loop shares between loops: the client, Events, metrics, the rate limiter,
//! the watch-fed cache, and what it did to pods the cache may not show yet (the in-place resize
//! requests it made, the evictions it made), and the resize values a node could not fit (mode
//! `InPlace`, upstream `infeasibleAttempts`: in memory only, so a restarted or new leader may
//! try such values once more before it learns them again, as upstream's).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use plimsoll_core::vertical::priority::RequestsByContainer;
use plimsoll_runtime::events::Events;
use plimsoll_runtime::rate_limit::SharedBucket;
use plimsoll_runtime::repeats::Repeats;

use crate::cache::Cache;
use crate::metrics::Metrics;

/// Shared state of the updater.
pub struct Context {
    /// The API client for reads (kube's default retries on 429/503/504).
    pub client: kube::Client,
    /// The client for evictions and resizes: no automatic retry, so a 429 from a
    /// PodDisruptionBudget comes back at once.
    pub write_client: kube::Client,
    /// Events reported as `vpa-updater`.
    pub events: Events,
    /// Metric families.
    pub metrics: Arc<Metrics>,
    /// The eviction (and resize) rate limiter.
    pub limiter: SharedBucket,
    /// VPAs, pods, owners and LimitRanges, kept by watches.
    pub cache: Cache,
    /// Pods the updater acted on.
    pub memory: Mutex<PodMemory>,
    /// The VPAs whose unreadable spec or recommendation was reported ([`Reported`]).
    pub reported: Mutex<Reported>,
    /// Failures to act on a VPA's pods already logged ([`Context::log_failure`]).
    pub logged: Repeats,
}

/// What was reported of each VPA that cannot be read, by uid: the generation and the text.
/// A VPA is a namespace user's to create, thousands at a time; an Event for each of them in
/// every loop would be thousands of API writes a minute, each (with `--kube-api-qps`) taking a
/// token of the bucket every other VPA's Events and conditions wait on. Once per change is
/// enough.
#[derive(Debug, Default)]
pub struct Reported {
    by_uid: HashMap<String, (Option<i64>, String)>,
}

impl Reported {
    /// Whether `note` about the VPA `uid` at `generation` is new (and remembers it).
    pub fn first(&mut self, uid: &str, generation: Option<i64>, note: &str) -> bool {
        let entry = (generation, note.to_owned());
        if self.by_uid.get(uid) == Some(&entry) {
            return false;
        }
        self.by_uid.insert(uid.to_owned(), entry);
        true
    }

    /// Forgets the VPAs `live` does not hold (deleted ones).
    pub fn retain(&mut self, live: impl Fn(&str) -> bool) {
        self.by_uid.retain(|uid, _| live(uid));
    }

    /// Forgets the VPA `uid`, read fine again: the same problem later is reported again.
    pub fn clear(&mut self, uid: &str) {
        self.by_uid.remove(uid);
    }
}

/// Where a remembered pod is: namespace and name (the map key is its uid).
type PodRef = (String, String);

/// What the updater remembers of pods it acted on, by uid; pods that disappear from the cache
/// are forgotten.
#[derive(Debug, Default)]
pub struct PodMemory {
    /// When the updater asked for each pod's in-place resize, or first saw it resizing
    /// (upstream `lastInPlaceAttemptTimeMap`).
    in_place: HashMap<String, (PodRef, Timestamp)>,
    /// Pods evicted: the next loop must not count them, even before the watch reports their
    /// deletion.
    evicted: HashMap<String, PodRef>,
    /// Resize values each pod's node could not fit (mode `InPlace`).
    infeasible: HashMap<String, (PodRef, RequestsByContainer)>,
}

fn pod_ref(pod: &Pod) -> (String, PodRef) {
    (
        pod.metadata.uid.clone().unwrap_or_default(),
        (
            pod.metadata.namespace.clone().unwrap_or_default(),
            pod.metadata.name.clone().unwrap_or_default(),
        ),
    )
}

impl PodMemory {
    /// The remembered resize attempt for `pod` (by uid); a pod seen resizing with none recorded
    /// (the resize was asked before this process started) counts from `now`, as upstream does.
    fn attempt(&mut self, pod: &Pod, resizing: bool, now: Timestamp) -> Option<Timestamp> {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        match self.in_place.get(uid) {
            Some((_, t)) => Some(*t),
            None if resizing => {
                let (uid, at) = pod_ref(pod);
                self.in_place.insert(uid, (at, now));
                Some(now)
            }
            None => None,
        }
    }

    /// Forgets the pods for which `live(namespace, name, uid)` is false.
    fn forget(&mut self, live: impl Fn(&str, &str, &str) -> bool) {
        self.in_place
            .retain(|uid, ((ns, name), _)| live(ns, name, uid));
        self.evicted.retain(|uid, (ns, name)| live(ns, name, uid));
        self.infeasible
            .retain(|uid, ((ns, name), _)| live(ns, name, uid));
    }

    /// Remembers `values` as infeasible for `pod`; true when they were not remembered already
    /// (then the change is worth an Event).
    fn remember_infeasible(&mut self, pod: &Pod, values: &RequestsByContainer) -> bool {
        let (uid, at) = pod_ref(pod);
        let new = self.infeasible.get(&uid).is_none_or(|(_, v)| v != values);
        self.infeasible.insert(uid, (at, values.clone()));
        new
    }
}

impl Context {
    fn memory(&self) -> MutexGuard<'_, PodMemory> {
        self.memory
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The remembered attempt for `pod`, recording `now` when the pod is seen resizing for the
    /// first time.
    pub fn in_place_attempt(&self, pod: &Pod, resizing: bool, now: Timestamp) -> Option<Timestamp> {
        self.memory().attempt(pod, resizing, now)
    }

    /// Records a resize request made at `now`.
    pub fn record_in_place_attempt(&self, pod: &Pod, now: Timestamp) {
        let (uid, at) = pod_ref(pod);
        self.memory().in_place.insert(uid, (at, now));
    }

    /// Records an eviction.
    pub fn record_eviction(&self, pod: &Pod) {
        let (uid, at) = pod_ref(pod);
        self.memory().evicted.insert(uid, at);
    }

    /// The resize values `pod`'s node could not fit, if remembered.
    pub fn infeasible(&self, pod: &Pod) -> Option<RequestsByContainer> {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        self.memory().infeasible.get(uid).map(|(_, v)| v.clone())
    }

    /// Remembers resize values `pod`'s node could not fit; true when newly remembered.
    pub fn remember_infeasible(&self, pod: &Pod, values: &RequestsByContainer) -> bool {
        self.memory().remember_infeasible(pod, values)
    }

    /// Forgets the infeasible values of `pod` (a resize request was accepted).
    pub fn forget_infeasible(&self, pod: &Pod) {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        self.memory().infeasible.remove(uid);
    }

    /// Whether the pod with `uid` was evicted by this process (and may still be in the cache).
    pub fn evicted(&self, uid: &str) -> bool {
        self.memory().evicted.contains_key(uid)
    }

    /// Whether `note` about `vpa` should be published: the first time for its generation.
    pub fn first_report(
        &self,
        vpa: &plimsoll_core::api::vpa::VerticalPodAutoscaler,
        note: &str,
    ) -> bool {
        let uid = vpa.metadata.uid.as_deref().unwrap_or_default();
        self.reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .first(uid, vpa.metadata.generation, note)
    }

    /// Forgets what was reported of `vpa`: it was read fine.
    pub fn report_cleared(&self, vpa: &plimsoll_core::api::vpa::VerticalPodAutoscaler) {
        let uid = vpa.metadata.uid.as_deref().unwrap_or_default();
        self.reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear(uid);
    }

    /// Forgets what was reported and logged of VPAs other than `live` (by uid): deleted, or
    /// out of scope.
    pub fn forget_reports(&self, live: &std::collections::HashSet<&str>) {
        self.reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|uid| live.contains(uid));
        self.logged.retain(|uid| live.contains(uid));
    }

    /// Logs that acting on `pod` (or, without one, on the VPA itself) for `vpa` failed: at warn the first time per VPA and message,
    /// then at most every [`plimsoll_runtime::repeats::RELOG_AFTER`] with the repeats not logged,
    /// at debug in between. A namespace user can make every eviction of their pods fail (two
    /// PodDisruptionBudgets over one pod make each eviction a 500), and each loop tries again
    /// up to half of every workload's pods: a warning per pod and loop otherwise. The VPA's
    /// Events still tell its owner each time.
    pub fn log_failure(
        &self,
        vpa: &plimsoll_core::api::vpa::VerticalPodAutoscaler,
        pod: Option<&str>,
        what: &str,
        error: &str,
    ) {
        let uid = vpa.metadata.uid.as_deref().unwrap_or_default();
        // The VPA is named here and not only by the loop's span: the span is at info, and an
        // operator filtering at warn would see warnings that name nothing.
        let namespace = vpa.metadata.namespace.as_deref().unwrap_or_default();
        let name = vpa.metadata.name.as_deref().unwrap_or_default();
        if let Some(quiet) = self.logged.first(uid, &format!("{what}: {error}")) {
            tracing::warn!(
                namespace,
                name,
                pod,
                error,
                repeats_not_logged = quiet,
                "{what}"
            );
        } else {
            tracing::debug!(namespace, name, pod, error, "{what}");
        }
    }

    /// Forgets the pods the cache no longer holds (deleted, or being deleted).
    pub fn forget_gone_pods(&self) {
        self.memory()
            .forget(|ns, name, uid| self.cache.pod_uid(ns, name).is_some_and(|live| live == uid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.namespace = Some("ns".into());
        pod.metadata.name = Some(name.into());
        pod.metadata.uid = Some(format!("uid-{name}"));
        pod
    }

    #[test]
    fn an_unreadable_vpa_is_reported_once_per_generation_and_text() {
        let mut reported = Reported::default();
        assert!(reported.first("u1", Some(1), "bad mode"));
        assert!(
            !reported.first("u1", Some(1), "bad mode"),
            "every loop after"
        );
        assert!(reported.first("u1", Some(2), "bad mode"), "edited");
        assert!(
            reported.first("u1", Some(2), "bad target"),
            "another problem"
        );
        assert!(reported.first("u2", Some(2), "bad target"), "another VPA");
        reported.retain(|uid| uid == "u2");
        assert!(
            reported.first("u1", Some(2), "bad target"),
            "forgotten once gone"
        );
        assert!(!reported.first("u2", Some(2), "bad target"));
        // A recommendation (status: no new generation) that reads fine, then fails again.
        reported.clear("u2");
        assert!(reported.first("u2", Some(2), "bad target"));
    }

    #[test]
    fn first_sighting_of_a_resize_is_remembered() {
        let mut memory = PodMemory::default();
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let t1 = t0 + jiff::SignedDuration::from_mins(10);
        assert_eq!(memory.attempt(&pod("a"), false, t0), None);
        assert!(
            memory.in_place.is_empty(),
            "a pod not resizing is not recorded"
        );
        assert_eq!(memory.attempt(&pod("a"), true, t0), Some(t0));
        // Ten minutes later the first sighting still counts, so a Deferred resize times out.
        assert_eq!(memory.attempt(&pod("a"), true, t1), Some(t0));
        // A recorded request is returned even once the pod stopped resizing.
        assert_eq!(memory.attempt(&pod("a"), false, t1), Some(t0));
        assert_eq!(memory.attempt(&pod("b"), true, t1), Some(t1));
    }

    #[test]
    fn pods_gone_or_replaced_under_the_same_name_are_forgotten() {
        let mut memory = PodMemory::default();
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        memory.attempt(&pod("a"), true, t0);
        memory.attempt(&pod("b"), true, t0);
        let (uid, at) = pod_ref(&pod("c"));
        memory.evicted.insert(uid, at);
        assert!(memory.remember_infeasible(&pod("b"), &RequestsByContainer::new()));
        assert!(!memory.remember_infeasible(&pod("b"), &RequestsByContainer::new()));
        // a is still there; b was recreated with a new uid (a StatefulSet pod); c is gone.
        memory.forget(|_, name, uid| match name {
            "a" => uid == "uid-a",
            "b" => uid == "uid-b2",
            _ => false,
        });
        assert_eq!(memory.in_place.keys().collect::<Vec<_>>(), ["uid-a"]);
        assert!(memory.evicted.is_empty());
        assert!(memory.infeasible.is_empty(), "b's values went with its uid");
    }
}
