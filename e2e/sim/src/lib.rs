//! plimsoll-sim: a simulated Kubernetes API server.
