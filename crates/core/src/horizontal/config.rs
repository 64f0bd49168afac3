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

/// The longest `behavior.syncPeriodSeconds` honoured (KEP-6003 "Design Details": at most 3600):
/// an object written before validation, or a native HPA, cannot park itself for longer.
pub const MAX_SYNC_PERIOD_SECONDS: i64 = 3600;

impl ControllerConfig {
    /// Seconds between two evaluations of an object with `spec`: its own `syncPeriodSeconds`
    /// when set (> 0), else upstream's `behavior.syncPeriodSeconds` (KEP-6003) when set (> 0),
    /// at most [`MAX_SYNC_PERIOD_SECONDS`], else `--sync-period`; never below
    /// `--min-sync-period` nor 1 s.
    pub fn sync_period_seconds(&self, spec: &HorizontalPodAutoscalerPlusSpec) -> i64 {
        let own = spec.sync_period_seconds.filter(|p| *p > 0).map(i64::from);
        let upstream = || {
            let p = spec.behavior.as_ref()?.sync_period_seconds?;
            (p > 0).then(|| i64::from(p).min(MAX_SYNC_PERIOD_SECONDS))
        };
        own.or_else(upstream)
            .unwrap_or(self.sync_period_seconds)
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
    fn behavior_sync_period_seconds_kep_6003() {
        // Vectors from KEP-6003 "Proposal" and "Design Details" (the KEP has no table of its
        // own): unset -> the global period; 1..=3600 -> that period; Plimsoll's own
        // spec.syncPeriodSeconds wins; --min-sync-period stays the floor; a value past 3600
        // (only a native HPA or an object from before validation can carry one) is held at 3600.
        let cfg = ControllerConfig {
            sync_period_seconds: 15,
            min_sync_period_seconds: 2,
            ..ControllerConfig::default()
        };
        let cases: &[(Option<i32>, Option<i32>, i64)] = &[
            (None, None, 15),
            (None, Some(2), 2),
            (None, Some(60), 60),
            (None, Some(3600), 3600),
            (None, Some(86_400), 3600),
            (None, Some(1), 2),
            (None, Some(0), 15),
            (None, Some(-5), 15),
            (Some(30), Some(2), 30),
            (Some(0), Some(45), 45),
        ];
        for (own, behavior, want) in cases {
            let spec = HorizontalPodAutoscalerPlusSpec {
                sync_period_seconds: *own,
                behavior: Some(crate::api::hpa_plus::HorizontalPodAutoscalerBehavior {
                    sync_period_seconds: *behavior,
                    ..Default::default()
                }),
                ..HorizontalPodAutoscalerPlusSpec::default()
            };
            assert_eq!(
                cfg.sync_period_seconds(&spec),
                *want,
                "own {own:?} behavior {behavior:?}"
            );
        }
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
