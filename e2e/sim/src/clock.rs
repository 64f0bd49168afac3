//! Simulated time. Sim time starts at the wall-clock instant the sim starts and runs
//! `time_scale` times faster than real time. Object timestamps, pod lifecycle, load profiles
//! and metrics timestamps follow sim time. Real time still governs everything on the wire:
//! watch `timeoutSeconds`, bookmark intervals, webhook `timeoutSeconds`, injected latency,
//! and client-side timeouts.

use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};

/// A clock running `scale` times faster than the wall clock from its start.
#[derive(Debug, Clone)]
pub struct SimClock {
    origin_real: Instant,
    origin_sim: Timestamp,
    scale: f64,
}

impl SimClock {
    /// Starts a clock at the current wall-clock time; `scale` ≤ 0 is taken as 1.
    pub fn new(scale: f64) -> Self {
        Self {
            origin_real: Instant::now(),
            origin_sim: Timestamp::now(),
            scale: if scale > 0.0 { scale } else { 1.0 },
        }
    }

    /// The time-scale factor (sim seconds per real second).
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// Sim seconds elapsed since the clock started.
    pub fn elapsed_secs(&self) -> f64 {
        self.origin_real.elapsed().as_secs_f64() * self.scale
    }

    /// The current sim time.
    pub fn now(&self) -> Timestamp {
        let nanos = (self.elapsed_secs() * 1e9) as i64;
        self.origin_sim
            .checked_add(SignedDuration::from_nanos(nanos))
            .unwrap_or(self.origin_sim)
    }

    /// The real duration that `sim` sim-time takes.
    pub fn real_duration(&self, sim: Duration) -> Duration {
        sim.div_f64(self.scale)
    }
}

/// Formats a time the way `metav1.Time` serialises (RFC 3339, second precision, UTC).
pub fn rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Formats a time the way `metav1.MicroTime` serialises (RFC 3339, microseconds, UTC).
pub fn rfc3339_micro(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Parses an RFC 3339 timestamp (any precision); `None` when it is not one.
pub fn parse_time(s: &str) -> Option<Timestamp> {
    s.parse().ok()
}

/// Human-readable age, as kubectl and the apiserver's table printer show it
/// (`k8s.io/apimachinery/pkg/util/duration.HumanDuration`): `5s`, `3m5s`, `4m`, `45m`, `4h2m`,
/// `10h`, `3d`, `3d4h`, `30d`, `2y3d`. A unit's remainder is shown only while the larger unit is
/// small (under 10 minutes, 8 hours, 8 days, 8 years), and a zero remainder is left out.
pub fn human_age(secs: i64) -> String {
    let s = secs.max(0);
    let with_rest = |big: i64, big_unit: &str, rest: i64, rest_unit: &str| {
        if rest == 0 {
            format!("{big}{big_unit}")
        } else {
            format!("{big}{big_unit}{rest}{rest_unit}")
        }
    };
    let (minutes, hours, days) = (s / 60, s / 3600, s / 86_400);
    match s {
        0..120 => format!("{s}s"),
        120..600 => with_rest(minutes, "m", s % 60, "s"),
        600..10_800 => format!("{minutes}m"),
        10_800..28_800 => with_rest(hours, "h", minutes % 60, "m"),
        28_800..172_800 => format!("{hours}h"),
        172_800..691_200 => with_rest(days, "d", hours % 24, "h"),
        691_200..63_072_000 => format!("{days}d"),
        63_072_000..252_288_000 => with_rest(days / 365, "y", days % 365, "d"),
        _ => format!("{}y", days / 365),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_kubectl() {
        // upstream: staging/src/k8s.io/apimachinery/pkg/util/duration/duration_test.go TestHumanDuration
        assert_eq!(human_age(5), "5s");
        assert_eq!(human_age(185), "3m5s");
        assert_eq!(human_age(2700), "45m");
        assert_eq!(human_age(4 * 3600 + 120), "4h2m");
        assert_eq!(human_age(10 * 3600), "10h");
        assert_eq!(human_age(120), "2m");
        assert_eq!(human_age(3 * 3600), "3h");
        assert_eq!(human_age(3 * 86_400), "3d");
        assert_eq!(human_age(3 * 86_400 + 4 * 3600), "3d4h");
        assert_eq!(human_age(30 * 86_400), "30d");
        assert_eq!(human_age(2 * 365 * 86_400), "2y");
        assert_eq!(human_age((2 * 365 + 3) * 86_400), "2y3d");
        assert_eq!(human_age(9 * 365 * 86_400), "9y");
    }

    #[test]
    fn time_scale_speeds_up_sim_time() {
        let clock = SimClock::new(1000.0);
        std::thread::sleep(Duration::from_millis(20));
        assert!(clock.elapsed_secs() >= 20.0);
        assert_eq!(
            clock.real_duration(Duration::from_secs(1)),
            Duration::from_millis(1)
        );
    }
}
