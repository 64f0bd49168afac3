//! The controller's flags as the decision reads them, and the period they give each object.
//!
//! Every field has upstream's default, so a `ControllerConfig::default()` behaves like
//! kube-controller-manager's HPA controller.

use serde::{Deserialize, Serialize};

use super::tolerance::DEFAULT_TOLERANCE;
use crate::api::hpa_plus::{HorizontalPodAutoscalerPlusSpec, UtilizationBase};

/// Controller-wide settings (flags). Every field has upstream's default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ControllerConfig {
    /// `--tolerance` (default 0.1).
    pub tolerance: f64,
    /// `--cpu-initialization-period`, seconds (default 300).
    pub cpu_initialization_period_seconds: i64,
    /// `--initial-readiness-delay`, seconds (default 30).
    pub initial_readiness_delay_seconds: i64,
    /// `--downscale-stabilization`, seconds (default 300).
    pub downscale_stabilization_seconds: i64,
    /// `--scale-up-limit-factor`, 1.0–2.0 (default none: upstream rules).
    pub scale_up_limit_factor: Option<f64>,
    /// `--scale-down-limit-factor`, 0–1.0 (default none: upstream rules).
    pub scale_down_limit_factor: Option<f64>,
    /// `--sync-period`, seconds, for objects without `syncPeriodSeconds` (default 5).
    pub sync_period_seconds: i64,
    /// `--min-sync-period`, seconds: the floor of every object's period (default 1).
    pub min_sync_period_seconds: i64,
    /// `--compute-resource-utilization-ratio-by-limits` (HPAPlus): `Utilization` targets of
    /// objects without `spec.utilizationBase` are a percentage of limits (default false:
    /// requests, as upstream). The object's own field wins when set.
    pub compute_resource_utilization_ratio_by_limits: bool,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            tolerance: DEFAULT_TOLERANCE,
            cpu_initialization_period_seconds: 300,
            initial_readiness_delay_seconds: 30,
            downscale_stabilization_seconds: 300,
            scale_up_limit_factor: None,
            scale_down_limit_factor: None,
            sync_period_seconds: 5,
            min_sync_period_seconds: 1,
            compute_resource_utilization_ratio_by_limits: false,
        }
    }
}

impl ControllerConfig {
    /// Seconds between two evaluations of an object with `spec`: its own `syncPeriodSeconds`
    /// when set (> 0), else `--sync-period`; never below `--min-sync-period` nor 1 s.
    pub fn sync_period_seconds(&self, spec: &HorizontalPodAutoscalerPlusSpec) -> i64 {
        let own = i64::from(spec.sync_period_seconds.unwrap_or(0));
        if own > 0 {
            own
        } else {
            self.sync_period_seconds
        }
        .max(self.min_sync_period_seconds)
        .max(1)
    }

    /// What `Utilization` targets of an object with `spec` are a percentage of: its own
    /// `utilizationBase` when set, else the controller-wide flag.
    pub fn utilization_base(&self, spec: &HorizontalPodAutoscalerPlusSpec) -> UtilizationBase {
        spec.utilization_base
            .unwrap_or(if self.compute_resource_utilization_ratio_by_limits {
                UtilizationBase::Limits
            } else {
                UtilizationBase::Requests
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_period_is_the_objects_own_above_the_controller_floor() {
        let mut spec = HorizontalPodAutoscalerPlusSpec::default();
        let cfg = ControllerConfig {
            sync_period_seconds: 15,
            min_sync_period_seconds: 3,
            ..ControllerConfig::default()
        };
        assert_eq!(cfg.sync_period_seconds(&spec), 15);
        spec.sync_period_seconds = Some(30);
        assert_eq!(cfg.sync_period_seconds(&spec), 30);
        spec.sync_period_seconds = Some(1);
        assert_eq!(
            cfg.sync_period_seconds(&spec),
            3,
            "never below --min-sync-period"
        );
        spec.sync_period_seconds = Some(0);
        assert_eq!(cfg.sync_period_seconds(&spec), 15, "0 means unset");
        let zero = ControllerConfig {
            sync_period_seconds: 0,
            min_sync_period_seconds: 0,
            ..ControllerConfig::default()
        };
        assert_eq!(zero.sync_period_seconds(&spec), 1, "never below 1 s");
    }

    #[test]
    fn the_objects_utilization_base_wins_over_the_flag() {
        let mut spec = HorizontalPodAutoscalerPlusSpec::default();
        let by_limits = ControllerConfig {
            compute_resource_utilization_ratio_by_limits: true,
            ..ControllerConfig::default()
        };
        let plain = ControllerConfig::default();
        assert_eq!(plain.utilization_base(&spec), UtilizationBase::Requests);
        assert_eq!(by_limits.utilization_base(&spec), UtilizationBase::Limits);
        spec.utilization_base = Some(UtilizationBase::Requests);
        assert_eq!(by_limits.utilization_base(&spec), UtilizationBase::Requests);
        spec.utilization_base = Some(UtilizationBase::Limits);
        assert_eq!(plain.utilization_base(&spec), UtilizationBase::Limits);
    }
}
