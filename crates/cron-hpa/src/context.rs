//! What every reconcile shares: the client, Events, metrics, the scale client, settings, and
//! the controller's memory of what it wrote.
//!
//! The memory ([`Memory`], whose use is [`plimsoll_core::schedule::resume`]'s) exists because the
//! reflector cache lags behind our own status writes. Entries are per object (keyed by
//! namespace/name, checked against the UID) and are cleared whenever this replica becomes
//! leader, so after a leader change the status written by the previous leader is the truth.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use jiff::SignedDuration;
use plimsoll_core::api::cron::CronHorizontalPodAutoscalerStatus;
use plimsoll_core::schedule::resume::Memory;
use plimsoll_runtime::admin::Liveness;
use plimsoll_runtime::events::Events;
use plimsoll_runtime::scale::ScaleClient;

use crate::compiled::CompiledSpecs;
use crate::metrics::Metrics;

/// The field manager of every write, and the Events' reporting controller: the binary name.
pub const FIELD_MANAGER: &str = "cron-hpa";

/// Shared state of the controller (cheap to clone).
#[derive(Clone)]
pub struct Context {
    /// The Kubernetes client.
    pub client: kube::Client,
    /// Event publisher (reporting controller `cron-hpa`).
    pub events: Events,
    /// Metric families.
    pub metrics: Arc<Metrics>,
    /// Scale subresource access (with a shared kind resolver).
    pub scale: ScaleClient,
    /// `--missed-job-grace`: firings older than this at startup are reported, not run.
    pub missed_job_grace: SignedDuration,
    /// Ticked on every reconcile.
    pub liveness: Liveness,
    /// Each object's compiled spec, per generation.
    pub compiled: CompiledSpecs,
    memory: Arc<Mutex<HashMap<(String, String), Memory>>>,
    /// The failures logged per object (`namespace/name`), so that a job failing at every
    /// firing is not a warning at every firing.
    pub repeats: Arc<plimsoll_runtime::repeats::Repeats>,
}

impl Context {
    /// Specs whose jobs together may run more often than every `seconds` are invalid
    /// (`--min-job-interval`; zero: no bound).
    #[must_use]
    pub fn with_min_job_interval(mut self, seconds: u64) -> Self {
        self.compiled = CompiledSpecs::with_min_interval(seconds);
        self
    }

    /// A context for `client`.
    pub fn new(
        client: kube::Client,
        metrics: Arc<Metrics>,
        missed_job_grace: SignedDuration,
        liveness: Liveness,
    ) -> Self {
        Self {
            events: Events::new(client.clone(), FIELD_MANAGER),
            scale: ScaleClient::new(client.clone(), FIELD_MANAGER),
            client,
            metrics,
            missed_job_grace,
            liveness,
            compiled: CompiledSpecs::default(),
            memory: Arc::default(),
            repeats: Arc::default(),
        }
    }

    /// The memory for `namespace/name` if it belongs to the object with `uid`.
    pub fn recall(&self, namespace: &str, name: &str, uid: &str) -> Option<Memory> {
        let memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        memory
            .get(&(namespace.to_owned(), name.to_owned()))
            .filter(|m| m.uid == uid)
            .cloned()
    }

    /// Stores the memory for `namespace/name`.
    pub fn remember(&self, namespace: &str, name: &str, entry: Memory) {
        let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        memory.insert((namespace.to_owned(), name.to_owned()), entry);
    }

    /// Records that `status` was written for `namespace/name`.
    pub fn mark_written(
        &self,
        namespace: &str,
        name: &str,
        status: CronHorizontalPodAutoscalerStatus,
    ) {
        let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = memory.get_mut(&(namespace.to_owned(), name.to_owned())) {
            entry.written = Some(status);
        }
    }

    /// Makes the next reconcile of `namespace/name` evaluate whatever the time: its status write
    /// failed, and skipping until the next firing would leave the status unwritten until then.
    pub fn wake_early(&self, namespace: &str, name: &str) {
        let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = memory.get_mut(&(namespace.to_owned(), name.to_owned())) {
            entry.next_wake = None;
        }
    }

    /// Forgets `namespace/name` (the object was deleted) and returns what was known.
    pub fn forget(&self, namespace: &str, name: &str) -> Option<Memory> {
        self.compiled.forget(namespace, name);
        self.repeats.forget(&format!("{namespace}/{name}"));
        let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        memory.remove(&(namespace.to_owned(), name.to_owned()))
    }

    /// Forgets everything (this replica just became leader: trust the status).
    pub fn forget_all(&self) {
        let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        memory.clear();
    }
}
