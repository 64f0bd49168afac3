//! `CronHorizontalPodAutoscaler`: scheduled scaling jobs for a workload or an autoscaler.
