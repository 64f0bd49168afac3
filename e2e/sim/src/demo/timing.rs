//! How the demo compresses a day, and every time-based setting that has to shrink with it.
//!
//! The sim and the services share the real clock (the services read it themselves), so the demo
//! does not speed the clock up: it compresses the *day* (the load curve, the cron instants) by
//! `compression` simulated seconds per real second, and shrinks every window, delay and period
//! that a real cluster measures against that day by the same factor. Left at their real-cluster
//! values, a 5-minute CPU initialization period and a 30-second metrics window would cover hours
//! of the compressed day, new pods would count as unready for most of it, and the HPA would trail
//! the load by hours.
//!
//! Each service setting is a real flag of that service ([`Timing::flags`]); the sim's settings go
//! into its [`SimConfig`] and the workload model. Periods that would drive a loop faster than a
//! loaded machine can serve keep a floor, printed with the setting.

use std::time::Duration;

use crate::SimConfig;
use crate::metrics_api::go_duration;

/// Seconds in the simulated day the load curve spans.
pub const DAY_SECONDS: f64 = 86_400.0;

/// Real duration of the run when neither it nor the compression is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(120);

/// Who a setting belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The simulated cluster (kubelet, metrics-server).
    Sim,
    /// A Plimsoll service, by binary name.
    Service(&'static str),
}

/// One time-based setting: its real-cluster value and how it is set.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// Whose setting it is.
    pub owner: Owner,
    /// The service flag (`--sync-period`), or what the sim calls it.
    pub name: &'static str,
    /// The value a real cluster runs with, in simulated time.
    pub simulated: Duration,
    /// The smallest real value the demo uses (a loop period the machine must keep up with).
    pub floor: Duration,
}

const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

const fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// Every setting the compression scales, with upstream's (or metrics-server's, kubelet's)
/// values: what a real day would run with.
pub const SETTINGS: &[Setting] = &[
    Setting {
        owner: Owner::Sim,
        name: "pod start-up",
        simulated: secs(30),
        floor: millis(50),
    },
    Setting {
        owner: Owner::Sim,
        name: "readiness",
        simulated: secs(10),
        floor: millis(50),
    },
    Setting {
        owner: Owner::Sim,
        name: "pod termination",
        simulated: secs(30),
        floor: millis(50),
    },
    Setting {
        owner: Owner::Sim,
        name: "metrics window",
        simulated: secs(30),
        floor: millis(100),
    },
    Setting {
        owner: Owner::Service("hpa-plus"),
        name: "--sync-period",
        simulated: secs(15),
        floor: secs(1),
    },
    Setting {
        owner: Owner::Service("hpa-plus"),
        name: "--cpu-initialization-period",
        simulated: secs(300),
        floor: Duration::ZERO,
    },
    Setting {
        owner: Owner::Service("hpa-plus"),
        name: "--initial-readiness-delay",
        simulated: secs(30),
        floor: Duration::ZERO,
    },
    Setting {
        owner: Owner::Service("hpa-plus"),
        name: "--downscale-stabilization",
        simulated: secs(300),
        floor: Duration::ZERO,
    },
    Setting {
        owner: Owner::Service("cron-hpa"),
        name: "--missed-job-grace",
        simulated: secs(300),
        floor: secs(1),
    },
    Setting {
        owner: Owner::Service("vpa-recommender"),
        name: "--recommender-interval",
        simulated: secs(60),
        floor: secs(1),
    },
    Setting {
        owner: Owner::Service("vpa-recommender"),
        name: "--checkpoints-gc-interval",
        simulated: secs(600),
        floor: secs(5),
    },
    Setting {
        owner: Owner::Service("vpa-recommender"),
        name: "--memory-aggregation-interval",
        simulated: secs(86_400),
        floor: secs(1),
    },
    Setting {
        owner: Owner::Service("vpa-recommender"),
        name: "--memory-histogram-decay-half-life",
        simulated: secs(86_400),
        floor: secs(1),
    },
    Setting {
        owner: Owner::Service("vpa-recommender"),
        name: "--cpu-histogram-decay-half-life",
        simulated: secs(86_400),
        floor: secs(1),
    },
    Setting {
        owner: Owner::Service("vpa-recommender"),
        name: "--confidence-interval-cpu",
        simulated: secs(86_400),
        floor: secs(1),
    },
    Setting {
        owner: Owner::Service("vpa-recommender"),
        name: "--confidence-interval-memory",
        simulated: secs(86_400),
        floor: secs(1),
    },
    Setting {
        owner: Owner::Service("vpa-updater"),
        name: "--updater-interval",
        simulated: secs(60),
        floor: secs(1),
    },
    Setting {
        owner: Owner::Service("vpa-updater"),
        name: "--in-recommendation-bounds-eviction-lifetime-threshold",
        simulated: secs(43_200),
        floor: Duration::ZERO,
    },
    Setting {
        owner: Owner::Service("vpa-updater"),
        name: "--evict-after-oom-threshold",
        simulated: secs(600),
        floor: Duration::ZERO,
    },
];

/// The demo's compression and the run's real length.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Simulated seconds per real second.
    pub compression: f64,
    /// Real length of the run.
    pub duration: Duration,
}

impl Timing {
    /// From `--duration` and `--time-scale`: either alone makes the run one simulated day; both
    /// make it `duration × time_scale` simulated seconds; neither is a day in 120 s.
    ///
    /// # Errors
    /// A duration under one second, or a scale that is not a positive number.
    pub fn new(duration: Option<Duration>, time_scale: Option<f64>) -> Result<Self, String> {
        if let Some(scale) = time_scale
            && !(scale.is_finite() && scale > 0.0)
        {
            return Err(format!(
                "--time-scale must be a positive number, not {scale}"
            ));
        }
        let duration = match (duration, time_scale) {
            (Some(d), _) => d,
            (None, Some(scale)) => Duration::from_secs_f64(DAY_SECONDS / scale),
            (None, None) => DEFAULT_DURATION,
        };
        if duration < Duration::from_secs(1) {
            return Err(format!(
                "--duration must be at least 1s, not {}",
                go_duration(duration)
            ));
        }
        let compression = time_scale.unwrap_or(DAY_SECONDS / duration.as_secs_f64());
        Ok(Self {
            compression,
            duration,
        })
    }

    /// Simulated seconds `real` real time makes.
    pub fn simulated_secs(&self, real: Duration) -> f64 {
        real.as_secs_f64() * self.compression
    }

    /// Simulated seconds the whole run makes.
    pub fn span_secs(&self) -> f64 {
        self.simulated_secs(self.duration)
    }

    /// The real time a setting gets: its simulated value compressed, not below its floor, to the
    /// millisecond.
    pub fn real(&self, setting: &Setting) -> Duration {
        let ms = (setting.simulated.as_secs_f64() * 1000.0 / self.compression).round();
        Duration::from_millis(ms as u64).max(setting.floor)
    }

    fn sim_setting(&self, name: &str) -> Duration {
        SETTINGS
            .iter()
            .find(|s| s.owner == Owner::Sim && s.name == name)
            .map_or(Duration::ZERO, |s| self.real(s))
    }

    /// The flags of `binary` that the compression sets (`--sync-period=1s`, …).
    pub fn flags(&self, binary: &str) -> Vec<String> {
        SETTINGS
            .iter()
            .filter(|s| matches!(s.owner, Owner::Service(b) if b == binary))
            .map(|s| format!("{}={}", s.name, go_duration(self.real(s))))
            .collect()
    }

    /// The sim's pod lifecycle, scaled; the workload model ticks often enough to resolve it.
    pub fn sim_config(&self) -> SimConfig {
        SimConfig {
            pod_start: self.sim_setting("pod start-up"),
            pod_ready: self.sim_setting("readiness"),
            pod_termination: self.sim_setting("pod termination"),
            tick: Duration::from_millis(100),
            ..SimConfig::default()
        }
    }

    /// The window the sim's metrics API reports with each sample.
    pub fn metrics_window(&self) -> Duration {
        self.sim_setting("metrics window")
    }

    /// What the compression does, for people: the first line says how long a simulated minute
    /// is, then one line per owner with each setting's real-cluster value and the demo's.
    pub fn describe(&self) -> Vec<String> {
        let minute = Duration::from_secs_f64(60.0 / self.compression);
        let mut lines = vec![format!(
            "1 simulated minute = {}; the run ({}) covers {} simulated",
            human(minute),
            human(self.duration),
            human(Duration::from_secs_f64(self.span_secs())),
        )];
        let mut owners: Vec<Owner> = Vec::new();
        for s in SETTINGS {
            if !owners.contains(&s.owner) {
                owners.push(s.owner);
            }
        }
        for owner in owners {
            let items: Vec<String> = SETTINGS
                .iter()
                .filter(|s| s.owner == owner)
                .map(|s| {
                    let real = self.real(s);
                    let floored = if real == s.floor && s.floor > Duration::ZERO {
                        " (floor)"
                    } else {
                        ""
                    };
                    format!(
                        "{} {} → {}{floored}",
                        s.name,
                        human(s.simulated),
                        human(real)
                    )
                })
                .collect();
            let who = match owner {
                Owner::Sim => "sim",
                Owner::Service(b) => b,
            };
            lines.push(format!("  {who}: {}", items.join("; ")));
        }
        lines
    }
}

/// A duration for people: `417 ms`, `10 s`, `5 min`, `24 h`, `2 min 30 s`.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms} ms");
    }
    let s = d.as_secs_f64();
    if s < 60.0 {
        let text = format!("{s:.1}");
        return format!("{} s", text.strip_suffix(".0").unwrap_or(&text));
    }
    let whole = d.as_secs();
    let (h, m, sec) = (whole / 3600, (whole % 3600) / 60, whole % 60);
    match (h, m, sec) {
        (0, m, 0) => format!("{m} min"),
        (0, m, s) => format!("{m} min {s} s"),
        (h, 0, _) => format!("{h} h"),
        (h, m, _) => format!("{h} h {m} min"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_flag_makes_a_day() {
        let t = Timing::new(None, None).unwrap();
        assert_eq!(t.duration, DEFAULT_DURATION);
        assert!((t.compression - 720.0).abs() < 1e-9);
        let t = Timing::new(Some(secs(40)), None).unwrap();
        assert!((t.compression - 2160.0).abs() < 1e-9);
        let t = Timing::new(None, Some(1440.0)).unwrap();
        assert_eq!(t.duration, secs(60));
        let t = Timing::new(Some(secs(30)), Some(60.0)).unwrap();
        assert!((t.span_secs() - 1800.0).abs() < 1e-9);
        assert!(Timing::new(Some(millis(10)), None).is_err());
        assert!(Timing::new(None, Some(0.0)).is_err());
        assert!(Timing::new(None, Some(f64::NAN)).is_err());
    }

    #[test]
    fn settings_shrink_with_the_day_down_to_their_floors() {
        let t = Timing::new(Some(secs(120)), None).unwrap();
        assert_eq!(
            t.flags("hpa-plus"),
            [
                "--sync-period=1s",
                "--cpu-initialization-period=417ms",
                "--initial-readiness-delay=42ms",
                "--downscale-stabilization=417ms",
            ]
        );
        assert!(
            t.flags("vpa-updater")
                .contains(&"--updater-interval=1s".to_owned())
        );
        assert!(
            t.flags("vpa-recommender")
                .contains(&"--memory-aggregation-interval=120s".to_owned())
        );
        assert_eq!(t.metrics_window(), millis(100));
        let slow = Timing::new(Some(secs(600)), None).unwrap();
        assert_eq!(slow.metrics_window(), millis(208));
        assert_eq!(slow.sim_config().pod_start, millis(208));
    }

    #[test]
    fn the_description_says_what_a_minute_is_and_marks_floors() {
        let t = Timing::new(Some(secs(120)), None).unwrap();
        let lines = t.describe();
        assert_eq!(
            lines[0],
            "1 simulated minute = 83 ms; the run (2 min) covers 24 h simulated"
        );
        let hpa = lines.iter().find(|l| l.contains("hpa-plus:")).unwrap();
        assert!(
            hpa.contains("--cpu-initialization-period 5 min → 417 ms"),
            "{hpa}"
        );
        assert!(hpa.contains("--sync-period 15 s → 1 s (floor)"), "{hpa}");
    }

    #[test]
    fn human_durations() {
        assert_eq!(human(millis(417)), "417 ms");
        assert_eq!(human(millis(2500)), "2.5 s");
        assert_eq!(human(secs(10)), "10 s");
        assert_eq!(human(secs(150)), "2 min 30 s");
        assert_eq!(human(secs(86_400)), "24 h");
        assert_eq!(human(secs(5400)), "1 h 30 min");
    }
}
