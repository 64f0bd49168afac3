//! Watermark targets, as the `WatermarkPodAutoscaler` defines them
//! (DataDog/watermarkpodautoscaler `controllers/replica_calculator.go`).
//!
//! The value is compared with a band widened by the tolerance:
//! `low × (1 − tolerance) <= value <= high × (1 + tolerance)` is "within" and proposes the
//! current count (or a one-step move with `convergeTowardsWatermark`). Above the band the
//! proposal is `ceil(ready × value / high)`, below it `floor(ready × value / low)` (at least 1);
//! both are rounded up to a multiple of `replicaScalingAbsoluteModulo` and never move against
//! their direction. With `absolute` the value is the total over all pods (or the metric as
//! reported); with `average` it is divided by the ready pod count first.

use crate::api::hpa_plus::ConvergeTowardsWatermark;

/// Where a watermark metric's value sits relative to its band.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Position {
    /// Above `high × (1 + tolerance)`.
    Above,
    /// Below `low × (1 − tolerance)`.
    Below,
    /// Inside the band.
    Within,
}

/// Inputs of one watermark calculation. Values are milli-units.
#[derive(Clone, Copy, Debug)]
pub struct WatermarkInput {
    /// Current replicas of the target.
    pub current_replicas: i32,
    /// Ready pods (WPA's `currentReadyReplicas`).
    pub ready_replicas: i32,
    /// The value after the `average` division, milli.
    pub usage: f64,
    /// Low watermark, milli.
    pub low: f64,
    /// High watermark, milli.
    pub high: f64,
    /// Tolerance below the low watermark (fraction).
    pub tolerance_low: f64,
    /// Tolerance above the high watermark (fraction).
    pub tolerance_high: f64,
    /// `replicaScalingAbsoluteModulo` (1 = off).
    pub modulo: i32,
    /// `convergeTowardsWatermark`.
    pub converge: Option<ConvergeTowardsWatermark>,
    /// `minReplicas` (WPA bounds convergence by it, at least 1).
    pub min_replicas: i32,
    /// `maxReplicas`.
    pub max_replicas: i32,
}

/// A watermark proposal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatermarkCalc {
    /// Proposed replicas.
    pub replicas: i32,
    /// Where the value sits.
    pub position: Position,
    /// True when the proposal is a convergence step inside the band.
    pub converging: bool,
}

/// Rounds `replicas` up to a multiple of `modulo` (WPA `roundReplicaCountToAbsoluteModulo`).
pub fn round_up_to_modulo(replicas: i32, modulo: i32) -> i32 {
    if modulo <= 1 {
        return replicas;
    }
    let rem = replicas.rem_euclid(modulo);
    if rem > 0 {
        replicas.saturating_add(modulo - rem)
    } else {
        replicas
    }
}

fn to_i32(x: f64) -> i32 {
    if x.is_nan() {
        0
    } else {
        x.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
    }
}

/// WPA's `getReplicaCount`.
pub fn watermark_replicas(w: &WatermarkInput) -> WatermarkCalc {
    let adjusted_high = w.high * (1.0 + w.tolerance_high);
    let adjusted_low = w.low * (1.0 - w.tolerance_low);
    let ready = f64::from(w.ready_replicas);
    if w.usage > adjusted_high {
        let raw = to_i32((ready * w.usage / w.high).ceil());
        let replicas = round_up_to_modulo(raw, w.modulo).max(w.current_replicas);
        return WatermarkCalc {
            replicas,
            position: Position::Above,
            converging: false,
        };
    }
    if w.usage < adjusted_low {
        let raw = to_i32((ready * w.usage / w.low).floor()).max(1);
        let replicas = round_up_to_modulo(raw, w.modulo).min(w.current_replicas);
        return WatermarkCalc {
            replicas,
            position: Position::Below,
            converging: false,
        };
    }
    let min = w.min_replicas.max(1);
    let max = w.max_replicas.max(min);
    let step = w.modulo.max(1);
    let (replicas, converging) = match w.converge {
        None => (w.current_replicas, false),
        Some(ConvergeTowardsWatermark::HighWatermark) => {
            let lower_bound = to_i32((ready / w.high * w.usage).ceil()).clamp(min, max);
            let candidate = (w.current_replicas - step).max(1);
            if candidate < lower_bound {
                (w.current_replicas, false)
            } else {
                (candidate, true)
            }
        }
        Some(ConvergeTowardsWatermark::LowWatermark) => {
            let upper_bound = to_i32((ready / w.low * w.usage).floor()).clamp(min, max);
            let candidate = w.current_replicas.saturating_add(step);
            if candidate > upper_bound {
                (w.current_replicas, false)
            } else {
                (candidate, true)
            }
        }
    };
    WatermarkCalc {
        replicas,
        position: Position::Within,
        converging,
    }
}
