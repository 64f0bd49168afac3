//! The demo's plot: two panels over the simulated day. Above, the offered load (left axis)
//! with the replicas and the HPA+'s minimum as the CronHPA moves it (right axis); below, the CPU
//! of Ready pods against the target and its ±50 % band. Replicas following load and CPU staying
//! in the band is what a reader should see at a glance.

use plimsoll_plot::{
    Anchor, Axes, Chart, Colour, Panel, Scale, Side, Stroke, Text, nice_max, step_points,
};

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
/// Room for a y axis on each side.
const MARGIN: f64 = 70.0;

/// A panel across the canvas between the side margins.
fn panel(top: f64, height: f64) -> Panel {
    Panel {
        left: MARGIN,
        top,
        width: f64::from(WIDTH) - 2.0 * MARGIN,
        height,
    }
}

/// `intervals` grid lines' worth of labels on the left axis and, when given, the right one,
/// then the frame over the grid.
fn grid(c: &mut Chart, left: (&Axes, Colour), right: Option<(&Axes, Colour)>, intervals: u32) {
    let (axes, colour) = left;
    let ticks = axes.y.ticks(intervals);
    axes.y_grid(c, &ticks, GRID);
    axes.y_labels(c, Side::Left, &ticks, |v| format!("{v:.0}"), colour);
    if let Some((axes, colour)) = right {
        let ticks = axes.y.ticks(intervals);
        axes.y_labels(c, Side::Right, &ticks, |v| format!("{v:.0}"), colour);
    }
    axes.frame(c, FRAME);
}

/// Hour labels under the panel, every 2 h of a day (fewer on longer runs).
fn hours(c: &mut Chart, axes: &Axes) {
    let hours = (axes.x.hi() / 3600.0).floor().max(1.0) as u64;
    let step = (hours / 12).max(1);
    let at: Vec<f64> = (0..=hours)
        .step_by(step as usize)
        .map(|hr| hr as f64 * 3600.0)
        .collect();
    axes.x_labels(c, &at, |t| format!("{:.0}h", t / 3600.0));
}

fn scaling_panel(c: &mut Chart, samples: &[Sample], p: Panel, time: Scale) {
    let load_max = nice_max(samples.iter().map(|s| s.load).fold(1.0, f64::max));
    let rep_max = nice_max(
        samples
            .iter()
            .map(|s| s.replicas.max(s.ready).max(s.min_replicas) as f64)
            .fold(1.0, f64::max),
    );
    let load = Axes::new(p, time, Scale::to(load_max));
    let replicas = load.with_y(Scale::to(rep_max));
    grid(c, (&load, LOAD), Some((&replicas, REPLICAS)), 5);
    c.polyline(
        samples
            .iter()
            .map(|s| (load.x(s.t), load.y_clamped(s.load)))
            .collect(),
        Stroke::solid(LOAD, 2.0),
    );
    let steps = |f: fn(&Sample) -> i64| -> Vec<(f64, f64)> {
        let points: Vec<(f64, f64)> = samples
            .iter()
            .map(|s| (replicas.x(s.t), replicas.y_clamped(f(s) as f64)))
            .collect();
        step_points(&points, None)
    };
    c.polyline(
        steps(|s| s.min_replicas),
        Stroke::dashed(MINIMUM, 2.0, 6.0, 4.0),
    );
    c.polyline(steps(|s| s.replicas), Stroke::solid(REPLICAS, 2.0));
    c.text(
        load.title(Anchor::Start, "load (units/s, left)")
            .colour(LOAD),
    );
    c.text(
        load.title(Anchor::Middle, "HPA+ minReplicas (set by cron-hpa, right)")
            .colour(MINIMUM),
    );
    c.text(load.title(Anchor::End, "replicas (right)").colour(REPLICAS));
    hours(c, &load);
}

fn cpu_panel(c: &mut Chart, samples: &[Sample], p: Panel, time: Scale) {
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
    let cpu = Axes::new(p, time, Scale::to(cpu_max));
    let (lo, hi) = (cpu.y_clamped(target * 1.5), cpu.y_clamped(target * 0.5));
    c.fill_rect(p.left, lo, p.width, hi - lo, BAND);
    grid(c, (&cpu, CPU), None, 4);
    cpu.level(c, target, Stroke::dashed(CPU, 1.5, 6.0, 4.0));
    c.polyline(
        samples
            .iter()
            .filter(|s| s.ready > 0)
            .map(|s| (cpu.x(s.t), cpu.y_clamped(s.cpu_percent)))
            .collect(),
        Stroke::solid(CPU, 2.0),
    );
    c.text(
        cpu.title(
            Anchor::Start,
            format!("CPU of Ready pods, % of requests (target {target:.0} %, band ±50 %)"),
        )
        .colour(CPU),
    );
    hours(c, &cpu);
}

/// Draws the samples; SVG or PNG by the plot file's extension.
pub fn chart(samples: &[Sample], title: &str) -> Chart {
    let t_max = samples.iter().map(|s| s.t).fold(3600.0_f64, f64::max);
    let time = Scale::to(t_max);
    let mut c = Chart::new(WIDTH, HEIGHT);
    c.text(
        Text::new(f64::from(WIDTH) / 2.0, 26.0, title)
            .size(16.0)
            .anchor(Anchor::Middle),
    );
    scaling_panel(&mut c, samples, panel(60.0, 260.0), time);
    let bottom = panel(370.0, 130.0);
    cpu_panel(&mut c, samples, bottom, time);
    c.text(
        Text::new(
            bottom.centre(),
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
}
