//! The demo's plot: two panels over the simulated day. Above, the offered load (left axis)
//! with the replicas and the HPA+'s minimum as the CronHPA moves it (right axis); below, the CPU
//! of Ready pods against the target and its ±50 % band. Replicas following load and CPU staying
//! in the band is what a reader should see at a glance.

use plimsoll_plot::{Anchor, Chart, Colour, Stroke, Text, step_points};

use crate::demo::observe::Sample;

const LOAD: Colour = Colour::hex(0x1f_77_b4);
const REPLICAS: Colour = Colour::hex(0xd6_27_28);
const MINIMUM: Colour = Colour::hex(0x9a_6f_00);
const CPU: Colour = Colour::hex(0x2c_a0_2c);
const BAND: Colour = Colour::hex(0xe3_f2_e3);
const GRID: Colour = Colour::hex(0xe5_e5_e5);
const FRAME: Colour = Colour::hex(0x33_33_33);

const WIDTH: u32 = 960;
const HEIGHT: u32 = 560;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 70.0;

/// A panel's frame on the canvas and the time axis it shares with the other.
#[derive(Clone, Copy)]
struct Panel {
    top: f64,
    height: f64,
    t_max: f64,
}

impl Panel {
    fn width() -> f64 {
        f64::from(WIDTH) - LEFT - RIGHT
    }

    fn x(&self, t: f64) -> f64 {
        LEFT + Self::width() * t / self.t_max
    }

    /// `v` on an axis from 0 to `max`.
    fn y(&self, v: f64, max: f64) -> f64 {
        self.top + self.height * (1.0 - (v / max).clamp(0.0, 1.0))
    }

    fn frame(&self, c: &mut Chart) {
        c.stroke_rect(
            LEFT,
            self.top,
            Self::width(),
            self.height,
            Stroke::solid(FRAME, 1.0),
        );
    }

    /// Horizontal grid lines with labels for the left axis and, when given, the right one.
    fn grid(&self, c: &mut Chart, left: (f64, Colour), right: Option<(f64, Colour)>, ticks: u32) {
        for i in 0..=ticks {
            let f = f64::from(i) / f64::from(ticks);
            let y = self.top + self.height * (1.0 - f);
            c.polyline(
                vec![(LEFT, y), (LEFT + Self::width(), y)],
                Stroke::solid(GRID, 1.0),
            );
            c.text(
                Text::new(LEFT - 6.0, y + 4.0, format!("{:.0}", left.0 * f))
                    .anchor(Anchor::End)
                    .colour(left.1),
            );
            if let Some((max, colour)) = right {
                c.text(
                    Text::new(
                        LEFT + Self::width() + 6.0,
                        y + 4.0,
                        format!("{:.0}", max * f),
                    )
                    .colour(colour),
                );
            }
        }
    }

    /// Hour labels under the panel, every 2 h of a day (fewer on longer runs).
    fn hours(&self, c: &mut Chart) {
        let hours = (self.t_max / 3600.0).floor().max(1.0) as u64;
        let step = (hours / 12).max(1);
        for hr in (0..=hours).step_by(step as usize) {
            c.text(
                Text::new(
                    self.x(hr as f64 * 3600.0),
                    self.top + self.height + 16.0,
                    format!("{hr}h"),
                )
                .anchor(Anchor::Middle),
            );
        }
    }
}

/// Rounds `v` up to 1, 2, 2.5 or 5 times a power of ten.
pub fn nice_max(v: f64) -> f64 {
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if v <= m * mag {
            return m * mag;
        }
    }
    10.0 * mag
}

fn scaling_panel(c: &mut Chart, samples: &[Sample], p: Panel) {
    let load_max = nice_max(samples.iter().map(|s| s.load).fold(1.0, f64::max));
    let rep_max = nice_max(
        samples
            .iter()
            .map(|s| s.replicas.max(s.ready).max(s.min_replicas) as f64)
            .fold(1.0, f64::max),
    );
    p.grid(c, (load_max, LOAD), Some((rep_max, REPLICAS)), 5);
    p.frame(c);
    c.polyline(
        samples
            .iter()
            .map(|s| (p.x(s.t), p.y(s.load, load_max)))
            .collect(),
        Stroke::solid(LOAD, 2.0),
    );
    let steps = |f: fn(&Sample) -> i64| -> Vec<(f64, f64)> {
        let points: Vec<(f64, f64)> = samples
            .iter()
            .map(|s| (p.x(s.t), p.y(f(s) as f64, rep_max)))
            .collect();
        step_points(&points, None)
    };
    c.polyline(
        steps(|s| s.min_replicas),
        Stroke::dashed(MINIMUM, 2.0, 6.0, 4.0),
    );
    c.polyline(steps(|s| s.replicas), Stroke::solid(REPLICAS, 2.0));
    c.text(Text::new(LEFT, p.top - 8.0, "load (units/s, left)").colour(LOAD));
    c.text(
        Text::new(
            LEFT + Panel::width() / 2.0,
            p.top - 8.0,
            "HPA+ minReplicas (set by cron-hpa, right)",
        )
        .anchor(Anchor::Middle)
        .colour(MINIMUM),
    );
    c.text(
        Text::new(LEFT + Panel::width(), p.top - 8.0, "replicas (right)")
            .anchor(Anchor::End)
            .colour(REPLICAS),
    );
}

fn cpu_panel(c: &mut Chart, samples: &[Sample], p: Panel) {
    let target = samples
        .iter()
        .map(|s| s.target_percent)
        .find(|t| *t > 0)
        .unwrap_or(60) as f64;
    let cpu_max = nice_max(
        samples
            .iter()
            .map(|s| s.cpu_percent)
            .fold(target * 2.0, f64::max),
    );
    let (lo, hi) = (p.y(target * 1.5, cpu_max), p.y(target * 0.5, cpu_max));
    c.fill_rect(LEFT, lo, Panel::width(), hi - lo, BAND);
    p.grid(c, (cpu_max, CPU), None, 4);
    p.frame(c);
    c.polyline(
        vec![
            (LEFT, p.y(target, cpu_max)),
            (LEFT + Panel::width(), p.y(target, cpu_max)),
        ],
        Stroke::dashed(CPU, 1.5, 6.0, 4.0),
    );
    c.polyline(
        samples
            .iter()
            .filter(|s| s.ready > 0)
            .map(|s| (p.x(s.t), p.y(s.cpu_percent, cpu_max)))
            .collect(),
        Stroke::solid(CPU, 2.0),
    );
    c.text(
        Text::new(
            LEFT,
            p.top - 8.0,
            format!("CPU of Ready pods, % of requests (target {target:.0} %, band ±50 %)"),
        )
        .colour(CPU),
    );
}

/// Draws the samples; SVG or PNG by the plot file's extension.
pub fn chart(samples: &[Sample], title: &str) -> Chart {
    let t_max = samples.iter().map(|s| s.t).fold(3600.0_f64, f64::max);
    let mut c = Chart::new(WIDTH, HEIGHT);
    c.text(
        Text::new(f64::from(WIDTH) / 2.0, 26.0, title)
            .size(16.0)
            .anchor(Anchor::Middle),
    );
    let top = Panel {
        top: 60.0,
        height: 260.0,
        t_max,
    };
    let bottom = Panel {
        top: 370.0,
        height: 130.0,
        t_max,
    };
    scaling_panel(&mut c, samples, top);
    top.hours(&mut c);
    cpu_panel(&mut c, samples, bottom);
    bottom.hours(&mut c);
    c.text(
        Text::new(
            LEFT + Panel::width() / 2.0,
            f64::from(HEIGHT) - 12.0,
            "simulated time of day (hours)",
        )
        .anchor(Anchor::Middle),
    );
    c
}

#[cfg(test)]
mod tests {
    use plimsoll_plot::Format;

    use super::*;

    fn sample(t: f64, load: f64, replicas: i64, min: i64) -> Sample {
        Sample {
            t,
            load,
            replicas,
            ready: replicas,
            cpu_percent: 55.0,
            target_percent: 60,
            min_replicas: min,
            ..Sample::default()
        }
    }

    #[test]
    fn the_chart_has_every_series_and_both_panels_in_either_format() {
        let c = chart(
            &[
                sample(0.0, 100.0, 2, 2),
                sample(7.0 * 3600.0, 900.0, 10, 10),
                sample(20.0 * 3600.0, 300.0, 3, 2),
            ],
            "a <b>",
        );
        let svg = c.to_svg();
        assert!(svg.starts_with("<svg"));
        // Six + five grid lines, load, minimum, replicas, target and CPU lines.
        assert_eq!(svg.matches("<polyline").count(), 16);
        assert!(svg.contains("a &lt;b&gt;"));
        assert!(
            svg.contains(">1000<"),
            "load axis rounded up to a nice maximum"
        );
        assert!(svg.contains(">20h<"), "time axis in simulated hours");
        assert!(svg.contains("minReplicas"));
        let png = c.render(Format::Png);
        assert_eq!(&png[1..4], b"PNG");
        assert_eq!(&png[16..24], [0, 0, 3, 192, 0, 0, 2, 48], "960 × 560");
    }

    #[test]
    fn nice_maxima() {
        assert!((nice_max(7.0) - 10.0).abs() < 1e-9);
        assert!((nice_max(180.0) - 200.0).abs() < 1e-9);
        assert!((nice_max(1800.0) - 2000.0).abs() < 1e-9);
    }
}
