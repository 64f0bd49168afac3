//! Vertical scaling: histograms, estimators, capping, update priority, eviction budget and admission patches.
