//! Vertical scaling: histograms, estimators, capping, update priority, eviction budget and
//! admission patches.
//!
//! The recommender half follows upstream's VPA recommender model exactly (same buckets, decay,
//! percentiles, estimators and checkpoint format) so that its checkpoints and recommendations
//! are interchangeable with upstream's:
//! * [`histogram`]: exponential-bucket histograms and percentiles;
//! * [`decaying`]: the exponentially decaying histogram used for CPU and memory;
//! * [`aggregate`]: per-container aggregate state (samples, memory peaks, OOM bumps);
//! * [`checkpoint`]: save and load of aggregates as `VerticalPodAutoscalerCheckpoint`s;
//! * [`estimator`]: percentile estimators, confidence scaling, margins and minimums;
//! * [`recommendation`]: the full per-VPA recommendation (estimators + capping);
//! * [`model`]: one VPA's aggregates fed by samples and OOM kills, as the controller and replay
//!   drive them;
//! * [`capping`]: container policy, `controlledResources`/`controlledValues` and `LimitRange` caps.
//!
//! The updater and admission half: [`priority`], [`eviction`], [`admission`], [`limit_range`].

pub mod admission;
pub mod aggregate;
pub mod capping;
pub mod checkpoint;
pub mod decaying;
pub mod estimator;
pub mod eviction;
pub mod histogram;
pub mod limit_range;
pub mod model;
pub mod priority;
pub mod recommendation;

use std::fmt;

/// A compute resource the VPA manages (the one enum every vertical module uses; `aggregate` and
/// `priority` re-export it). Amounts are millicores / bytes in the model and exact quantities in
/// the admission path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    /// CPU (cores).
    Cpu,
    /// Memory (bytes).
    Memory,
}

impl Resource {
    /// Both resources, in the order patches and annotations list them (`cpu` before `memory`).
    pub const ALL: [Resource; 2] = [Resource::Cpu, Resource::Memory];

    /// The Kubernetes resource name (`cpu`, `memory`).
    pub fn name(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Memory => "memory",
        }
    }

    /// Parses a Kubernetes resource name; other resources are not managed by VPA.
    pub fn from_name(name: &str) -> Option<Resource> {
        match name {
            "cpu" => Some(Resource::Cpu),
            "memory" => Some(Resource::Memory),
            _ => None,
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
