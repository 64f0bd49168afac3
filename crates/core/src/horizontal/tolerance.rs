//! The tolerance band around a usage ratio of 1.0 inside which nothing scales.
//!
//! Precedence (most specific wins): `behavior.scaleUp/scaleDown.tolerance`, then
//! `spec.tolerance`, then the controller's `--tolerance` (default 0.1). Upstream's check is
//! inclusive on both ends: `1 - down <= ratio <= 1 + up` is "within tolerance".

use crate::api::hpa_plus::HorizontalPodAutoscalerPlusSpec;

/// Upstream's default `--horizontal-pod-autoscaler-tolerance`.
pub const DEFAULT_TOLERANCE: f64 = 0.1;

/// Tolerances for each direction, as fractions (0.1 = 10 %).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerances {
    /// Tolerated ratio below 1.0 before scaling down.
    pub scale_down: f64,
    /// Tolerated ratio above 1.0 before scaling up.
    pub scale_up: f64,
}

impl Tolerances {
    /// The same tolerance both ways.
    pub fn both(t: f64) -> Self {
        Self {
            scale_down: t,
            scale_up: t,
        }
    }

    /// Resolves the tolerances of `spec` over the controller default `default`.
    /// Unparsable quantities fall back to the next level (validation reports them).
    pub fn for_spec(spec: &HorizontalPodAutoscalerPlusSpec, default: f64) -> Self {
        let object = spec
            .tolerance
            .as_ref()
            .and_then(|q| crate::api::hpa_plus::quantity_value(q).ok())
            .unwrap_or(default);
        let mut t = Self::both(object);
        if let Some(b) = &spec.behavior {
            if let Some(v) = b
                .scale_up
                .as_ref()
                .and_then(|r| r.tolerance.as_ref())
                .and_then(|q| crate::api::hpa_plus::quantity_value(q).ok())
            {
                t.scale_up = v;
            }
            if let Some(v) = b
                .scale_down
                .as_ref()
                .and_then(|r| r.tolerance.as_ref())
                .and_then(|q| crate::api::hpa_plus::quantity_value(q).ok())
            {
                t.scale_down = v;
            }
        }
        t
    }

    /// True when `ratio` is inside the band (no scaling).
    pub fn is_within(&self, ratio: f64) -> bool {
        (1.0 - self.scale_down) <= ratio && ratio <= (1.0 + self.scale_up)
    }
}
