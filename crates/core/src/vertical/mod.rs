//! Vertical scaling: histograms, estimators, capping, update priority, eviction budget and admission patches.

pub mod admission;
pub mod eviction;
pub mod limit_range;
pub mod priority;
