//! `--plot FILE.svg|FILE.png`: a chart of a replay: replicas over time (top panel) and each
//! metric's value with its target or watermarks (bottom panel, one colour per metric).
//!
//! The scene is built once as a [`Chart`] and rendered by the file's extension. Values are
//! scaled to the panel; the target and watermarks are dashed step lines of the metric's colour.
//! The two-panel layout (axis, panel frames, time label) is shared with the `LoadReplay` plot.

use plimsoll_core::horizontal::MetricOutcome;
use plimsoll_replay::plot::{Anchor, Chart, Colour, Stroke, Text, label, step_points};

use crate::replay::StepLine;

pub(crate) const WIDTH: f64 = 900.0;
pub(crate) const PANEL: f64 = 240.0;
const LEFT: f64 = 70.0;
pub(crate) const RIGHT: f64 = 30.0;
pub(crate) const TOP: f64 = 40.0;
pub(crate) const GAP: f64 = 70.0;
pub(crate) const HEIGHT: f64 = TOP + PANEL + GAP + PANEL + 60.0;
const COLOURS: [Colour; 6] = [
    Colour::hex(0x1f_77_b4),
    Colour::hex(0xd6_27_28),
    Colour::hex(0x2c_a0_2c),
    Colour::hex(0x94_67_bd),
    Colour::hex(0xff_7f_0e),
    Colour::hex(0x17_be_cf),
];
const FRAME: Colour = Colour::hex(0x88_88_88);

/// The time axis shared by both panels: from the first step's time to the last's.
pub(crate) struct Axis {
    t_min: f64,
    t_max: f64,
}

impl Axis {
    /// The axis over steps at times `times` (0…1 when there are none).
    pub(crate) fn spanning(mut times: impl DoubleEndedIterator<Item = f64>) -> Axis {
        let Some(t_min) = times.next() else {
            return Axis {
                t_min: 0.0,
                t_max: 1.0,
            };
        };
        Axis {
            t_min,
            t_max: times.next_back().unwrap_or(t_min),
        }
    }

    pub(crate) fn x(&self, t: f64) -> f64 {
        let span = (self.t_max - self.t_min).max(1.0);
        LEFT + (t - self.t_min) / span * (WIDTH - LEFT - RIGHT)
    }

    /// The time range, centred under the panel whose top is at `top`.
    pub(crate) fn label(&self, chart: &mut Chart, top: f64) {
        chart.text(
            Text::new(
                WIDTH / 2.0,
                top + PANEL + 16.0,
                format!("t (s): {} … {}", label(self.t_min), label(self.t_max)),
            )
            .anchor(Anchor::Middle),
        );
    }
}

/// The height of value `v` in the panel whose top is at `top` and whose range is `lo`…`hi`.
pub(crate) fn y(v: f64, lo: f64, hi: f64, top: f64) -> f64 {
    let span = (hi - lo).max(f64::EPSILON);
    top + PANEL - (v - lo) / span * PANEL
}

/// A panel's outline, its title above, and its lowest and highest values at the left.
pub(crate) fn frame(chart: &mut Chart, top: f64, title: &str, lo: f64, hi: f64) {
    chart.stroke_rect(
        LEFT,
        top,
        WIDTH - LEFT - RIGHT,
        PANEL,
        Stroke::solid(FRAME, 1.0),
    );
    chart.text(Text::new(LEFT, top - 8.0, title).size(14.0).bold());
    for (v, yy) in [(hi, top), (lo, top + PANEL)] {
        // +4 centres an 11 px label on the value's height.
        chart.text(Text::new(LEFT - 6.0, yy + 4.0, label(v)).anchor(Anchor::End));
    }
}

/// The replay as a chart, ready to render to SVG or PNG.
pub fn chart(steps: &[StepLine]) -> Chart {
    let mut chart = Chart::new(WIDTH as u32, HEIGHT as u32);
    let axis = Axis::spanning(steps.iter().map(|s| s.t));
    replicas_panel(&mut chart, steps, &axis);
    metrics_panel(&mut chart, steps, &axis);
    axis.label(&mut chart, TOP + PANEL + GAP);
    chart
}

/// The top panel: replicas after each step, as a step line.
fn replicas_panel(chart: &mut Chart, steps: &[StepLine], axis: &Axis) {
    let max_r = steps
        .iter()
        .flat_map(|s| [s.replicas, s.current_replicas, s.desired_replicas])
        .max()
        .unwrap_or(1)
        .max(1);
    let (lo, hi) = (0.0, f64::from(max_r) * 1.1);
    frame(chart, TOP, "replicas", lo, hi);
    let mut pts: Vec<(f64, f64)> = Vec::new();
    if let Some(first) = steps.first() {
        pts.push((
            axis.x(first.t),
            y(f64::from(first.current_replicas), lo, hi, TOP),
        ));
    }
    for s in steps {
        pts.push((axis.x(s.t), y(f64::from(s.replicas), lo, hi, TOP)));
    }
    chart.polyline(
        step_points(&pts, Some(WIDTH - RIGHT)),
        Stroke::solid(Colour::BLACK, 2.0),
    );
    for s in steps {
        chart.circle(
            axis.x(s.t),
            y(f64::from(s.replicas), lo, hi, TOP),
            3.0,
            Colour::BLACK,
            Some(format!(
                "t={} replicas={} desired={} {}",
                s.t, s.replicas, s.desired_replicas, s.reason
            )),
        );
    }
}

/// The bottom panel: each metric's value, with its target or watermarks dashed.
fn metrics_panel(chart: &mut Chart, steps: &[StepLine], axis: &Axis) {
    let top = TOP + PANEL + GAP;
    let mut names: Vec<&str> = Vec::new();
    for p in steps.iter().flat_map(|s| &s.proposals) {
        if !names.contains(&p.metric.as_str()) {
            names.push(&p.metric);
        }
    }
    let hi = steps
        .iter()
        .flat_map(|s| &s.proposals)
        .flat_map(|p| [p.value, p.target, p.low_watermark, p.high_watermark])
        .flatten()
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.1;
    frame(chart, top, "metric value, target and watermarks", 0.0, hi);
    for (i, name) in names.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let series = |f: fn(&MetricOutcome) -> Option<f64>| -> Vec<(f64, f64)> {
            steps
                .iter()
                .filter_map(|s| {
                    s.proposals
                        .iter()
                        .find(|p| p.metric == *name)
                        .and_then(f)
                        .map(|v| (axis.x(s.t), y(v, 0.0, hi, top)))
                })
                .collect()
        };
        chart.polyline(series(|p| p.value), Stroke::solid(colour, 2.0));
        for bound in [
            series(|p| p.target),
            series(|p| p.low_watermark),
            series(|p| p.high_watermark),
        ] {
            // A single point still shows as a dashed line to the panel's right edge.
            chart.polyline(
                step_points(&bound, Some(WIDTH - RIGHT)),
                Stroke::dashed(colour, 1.0, 6.0, 4.0),
            );
        }
        chart.text(
            Text::new(LEFT + 10.0 + 180.0 * i as f64, top + PANEL + 36.0, *name)
                .size(12.0)
                .colour(colour),
        );
    }
}
