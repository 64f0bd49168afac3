//! `--plot` of a `LoadReplay`: replicas, Ready replicas and the `minReplicas` in force (top
//! panel), and the utilization of the Ready pods' CPU requests (bottom panel), over time.

use plimsoll_replay::plot::{Anchor, Chart, Colour, Stroke, Text, label, step_points};

use super::LoadLine;

const WIDTH: f64 = 900.0;
const PANEL: f64 = 240.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 40.0;
const GAP: f64 = 70.0;
const HEIGHT: f64 = TOP + PANEL + GAP + PANEL + 60.0;
const FRAME: Colour = Colour::hex(0x88_88_88);
const READY: Colour = Colour::hex(0x2c_a0_2c);
const MIN: Colour = Colour::hex(0xd6_27_28);
const UTILIZATION: Colour = Colour::hex(0x1f_77_b4);

/// Maps a step's time and a value to the chart.
struct Scale {
    t_min: f64,
    t_max: f64,
}

impl Scale {
    fn x(&self, t: f64) -> f64 {
        LEFT + (t - self.t_min) / (self.t_max - self.t_min).max(1.0) * (WIDTH - LEFT - RIGHT)
    }
}

fn y(v: f64, hi: f64, top: f64) -> f64 {
    top + PANEL - v / hi.max(f64::EPSILON) * PANEL
}

/// A panel's outline, title, and its top value at the left (the bottom is 0).
fn frame(chart: &mut Chart, top: f64, title: &str, hi: f64) {
    chart.stroke_rect(
        LEFT,
        top,
        WIDTH - LEFT - RIGHT,
        PANEL,
        Stroke::solid(FRAME, 1.0),
    );
    chart.text(Text::new(LEFT, top - 8.0, title).size(14.0).bold());
    for (v, yy) in [(hi, top), (0.0, top + PANEL)] {
        chart.text(Text::new(LEFT - 6.0, yy + 4.0, label(v)).anchor(Anchor::End));
    }
}

/// The chart of a `LoadReplay`.
pub fn chart(steps: &[LoadLine]) -> Chart {
    let mut chart = Chart::new(WIDTH as u32, HEIGHT as u32);
    let scale = Scale {
        t_min: steps.first().map_or(0.0, |s| s.t),
        t_max: steps.last().map_or(1.0, |s| s.t),
    };
    let series = |f: &dyn Fn(&LoadLine) -> Option<f64>, hi: f64, top: f64| -> Vec<(f64, f64)> {
        steps
            .iter()
            .filter_map(|s| f(s).map(|v| (scale.x(s.t), y(v, hi, top))))
            .collect()
    };
    let most = steps
        .iter()
        .flat_map(|s| [s.replicas, s.ready_replicas, s.min_replicas])
        .max()
        .unwrap_or(1)
        .max(1);
    let hi = f64::from(most) * 1.1;
    frame(
        &mut chart,
        TOP,
        "replicas (black), ready (green), minReplicas (red)",
        hi,
    );
    for (f, stroke) in [
        (
            &(|s: &LoadLine| Some(f64::from(s.replicas))) as &dyn Fn(&LoadLine) -> Option<f64>,
            Stroke::solid(Colour::BLACK, 2.0),
        ),
        (
            &|s: &LoadLine| Some(f64::from(s.ready_replicas)),
            Stroke::solid(READY, 1.0),
        ),
        (
            &|s: &LoadLine| Some(f64::from(s.min_replicas)),
            Stroke::dashed(MIN, 1.5, 6.0, 4.0),
        ),
    ] {
        chart.polyline(
            step_points(&series(f, hi, TOP), Some(WIDTH - RIGHT)),
            stroke,
        );
    }
    let bottom = TOP + PANEL + GAP;
    let hi = steps
        .iter()
        .filter_map(|s| s.utilization)
        .fold(100.0, f64::max)
        * 1.1;
    frame(
        &mut chart,
        bottom,
        "utilization of the Ready pods' CPU requests (%)",
        hi,
    );
    chart.polyline(
        series(&|s: &LoadLine| s.utilization, hi, bottom),
        Stroke::solid(UTILIZATION, 1.5),
    );
    chart.text(
        Text::new(
            WIDTH / 2.0,
            bottom + PANEL + 16.0,
            format!("t (s): {} … {}", label(scale.t_min), label(scale.t_max)),
        )
        .anchor(Anchor::Middle),
    );
    chart
}
