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
//! * [`node_fit`]: caps a pod's recommendation to the largest node's allocatable;
//! * [`per_vpa`]: the aggregation settings a VPA's container policy overrides (AEP-8026);
//! * [`capping`]: the recommender's policy step (`minAllowed`/`maxAllowed`, `controlledResources`,
//!   `mode: Off`); `LimitRange` and limit proportions live in [`limit_range`] and [`admission`].
//!
//! The recommender's loop, as the controller and `replay` run it: [`recommender`], with what it
//! decides on the way in [`ownership`] (which VPA a pod belongs to, by [`controlling`]), [`oom`] (which kills count,
//! with how much memory), [`status_change`] (which status to write, and whether it changed) and
//! [`checkpoint_schedule`] (which checkpoints to write first, which to delete).
//!
//! Joint horizontal and vertical sizing (a VPA annotated `plimsoll.dev/horizontal-aware`): [`joint`],
//! the per-pod request from the workload's total usage and the HPA+'s settings.
//!
//! The updater and admission half: [`priority`], [`eviction`], [`resize_backoff`] (mode `InPlace`:
//! resize now, wait, or hold back values the node could not fit), [`admission`], [`limit_range`],
//! [`startup_boost`] (CPU at start-up and when it ends), [`pod_validity`] (what the API server accepts of a pod's resources, which no patch or resize
//! may break) and [`scope`], the namespaces both act in.
//!
//! What the three services keep of the VPAs and LimitRanges they cache: [`object_fields`] (of
//! pods: [`crate::pod_fields`]).
//!
//! Shared types sit at the bottom so that imports only go "down": [`resources`] (resources,
//! amounts, the container recommendation) ← [`policy`] (update mode, container policies) ←
//! [`limit_range`], [`priority`] ← [`resize_backoff`] ← [`eviction`], [`admission`].

pub mod admission;
pub mod aggregate;
pub mod capping;
pub mod checkpoint;
pub mod checkpoint_schedule;
pub mod controlling;
pub mod decaying;
pub mod estimator;
pub mod eviction;
pub mod explain;
pub mod histogram;
pub mod joint;
pub mod joint_sizing;
pub mod limit_range;
pub mod model;
pub mod node_fit;
pub mod object_fields;
pub mod oom;
pub mod ownership;
pub mod per_vpa;
pub mod pod_validity;
pub mod policy;
pub mod priority;
pub mod recommendation;
pub mod recommender;
pub mod resize_backoff;
pub mod resources;
pub mod scope;
pub mod startup_boost;
pub mod status_change;

pub use resources::Resource;
