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
    /// The API client.
    pub client: kube::Client,
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
        match map.get(key) {
            Some(t) => Some(*t),
            None if resizing => {
                map.insert(key.clone(), now);
                Some(now)
            }
            None => None,
        }
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
