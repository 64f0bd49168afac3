//! Limits added on top of upstream: WPA/HPAPlus limit factors, forbidden windows after a scale
//! event, watermark delays and the minimum share of available pods.
//!
//! * Limit factors are percentages of the current replicas (WPA `calculateScaleUpLimit` /
//!   `calculateScaleDownLimit`): at most `current + max(1, floor(pct × current / 100))` and at
//!   least `current − max(1, floor(pct × current / 100))`; 0 turns the direction off. The
//!   controller flags `--scale-up-limit-factor` (1.0–2.0, a multiplier) and
//!   `--scale-down-limit-factor` (0–1.0, the share that may go) map onto the same percentages:
//!   `(f − 1) × 100` and `f × 100`; the object's fields override them.
//! * Forbidden windows: no scale-up (scale-down) until `upscale…` (`downscale…`)
//!   `ForbiddenWindowSeconds` after the last scale event.
//! * Watermark delays: a scale-up (scale-down) needs some watermark metric to have been above
//!   (below) its band for the delay; inside the band (convergence) the delay does not apply.

use jiff::Timestamp;

use super::history::seconds_between;

/// WPA: the most replicas one scale-up may reach; `pct <= 0` disables scale-up.
pub fn factor_scale_up_limit(current: i32, pct: f64) -> i32 {
    if pct <= 0.0 {
        return current;
    }
    let step = (pct * f64::from(current) / 100.0).floor().max(1.0);
    (f64::from(current) + step).min(f64::from(i32::MAX)) as i32
}

/// WPA: the fewest replicas one scale-down may reach; `pct <= 0` disables scale-down.
pub fn factor_scale_down_limit(current: i32, pct: f64) -> i32 {
    if pct <= 0.0 {
        return current;
    }
    let step = (pct * f64::from(current) / 100.0).floor().max(1.0);
    (f64::from(current) - step) as i32
}

/// Seconds left in a window of `window_seconds` that started at `since` (0 when over or unset).
pub fn countdown(since: Option<Timestamp>, window_seconds: i64, now: Timestamp) -> i64 {
    match since {
        Some(at) if window_seconds > 0 => {
            let left = window_seconds as f64 - seconds_between(at, now);
            if left > 0.0 { left.ceil() as i64 } else { 0 }
        }
        _ => 0,
    }
}

/// Seconds a watermark condition must still hold (`since` = when it started, `None` = it does
/// not hold now, which blocks until it has held for the whole delay).
pub fn delay_left(since: Option<Timestamp>, delay_seconds: i64, now: Timestamp) -> i64 {
    if delay_seconds <= 0 {
        return 0;
    }
    match since {
        None => delay_seconds,
        Some(_) => countdown(since, delay_seconds, now),
    }
}

/// Percentage of pods that are available, as WPA computes it (integer division); `None` when no
/// pod counts.
pub fn available_percentage(ready: usize, counted: usize) -> Option<i32> {
    (counted > 0).then(|| (100 * ready / counted) as i32)
}
