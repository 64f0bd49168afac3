//! The upstream `autoscaling.k8s.io/v1` `VerticalPodAutoscaler` and `VerticalPodAutoscalerCheckpoint`.
