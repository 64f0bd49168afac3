//! Kubernetes quantities.
