//! What the updater loop shares between loops: the client, Events, metrics, the rate limiter
//! and the in-place resize requests it made.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use plimsoll_runtime::events::Events;

use crate::metrics::Metrics;
use crate::rate_limit::TokenBucket;

/// A pod as the updater remembers it across loops: namespace, name, uid.
pub type PodKey = (String, String, String);

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
    pub limiter: TokenBucket,
    /// When the updater asked for each pod's in-place resize, or first saw it resizing
    /// (upstream `lastInPlaceAttemptTimeMap`); pods that disappear are forgotten.
    pub in_place_attempts: Mutex<HashMap<PodKey, Timestamp>>,
}

impl Context {
    /// The remembered attempt for `key`, recording `now` when the pod is seen resizing for the
    /// first time.
    pub fn in_place_attempt(
        &self,
        key: &PodKey,
        resizing: bool,
        now: Timestamp,
    ) -> Option<Timestamp> {
        let mut map = self
            .in_place_attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        attempt_for(&mut map, key, resizing, now)
    }

    /// Records a resize request made at `now`.
    pub fn record_in_place_attempt(&self, key: PodKey, now: Timestamp) {
        self.in_place_attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, now);
    }

    /// Forgets pods not in `live`.
    pub fn forget_other_pods(&self, live: &std::collections::HashSet<PodKey>) {
        self.in_place_attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|k, _| live.contains(k));
    }
}

/// The remembered attempt for `key`; a pod seen resizing with none recorded (the resize was
/// asked before this process started) counts from `now`, as upstream does.
fn attempt_for(
    map: &mut HashMap<PodKey, Timestamp>,
    key: &PodKey,
    resizing: bool,
    now: Timestamp,
) -> Option<Timestamp> {
    match map.get(key) {
        Some(t) => Some(*t),
        None if resizing => {
            map.insert(key.clone(), now);
            Some(now)
        }
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> PodKey {
        ("ns".into(), name.into(), format!("uid-{name}"))
    }

    #[test]
    fn first_sighting_of_a_resize_is_remembered() {
        let mut map = HashMap::new();
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let t1 = t0 + jiff::SignedDuration::from_mins(10);
        assert_eq!(attempt_for(&mut map, &key("a"), false, t0), None);
        assert!(map.is_empty(), "a pod not resizing is not recorded");
        assert_eq!(attempt_for(&mut map, &key("a"), true, t0), Some(t0));
        // Ten minutes later the first sighting still counts, so a Deferred resize times out.
        assert_eq!(attempt_for(&mut map, &key("a"), true, t1), Some(t0));
        // A recorded request is returned even once the pod stopped resizing.
        assert_eq!(attempt_for(&mut map, &key("a"), false, t1), Some(t0));
        assert_eq!(attempt_for(&mut map, &key("b"), true, t1), Some(t1));
    }
}
