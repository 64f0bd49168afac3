//! `--plot FILE.svg|FILE.png`: a chart of a replay: replicas over time (top panel) and each
//! metric's value with its target or watermarks (bottom panel, one colour per metric).
//!
//! The scene is built once as a [`Chart`] and rendered by the file's extension. Values are
//! scaled to the panel; the target and watermarks are dashed step lines of the metric's colour.
//! The layout ([`LAYOUT`], the time axis, panel frames) is shared with the `LoadReplay` plot;
//! scales, labels and frames are `plimsoll_plot`'s axes.

use plimsoll_core::horizontal::MetricOutcome;
use plimsoll_replay::plot::{
    Anchor, Axes, Chart, Colour, Grid, Scale, Side, Stroke, Text, label, step_points,
};

use serde::Serialize;

/// Both replay charts (this one and the `LoadReplay`'s): full-width panels stacked over one
/// time axis, 900 px wide; two panels make 900 × 650.
pub(crate) const LAYOUT: Grid = Grid {
    left: 70.0,
    top: 40.0,
    right: 30.0,
    bottom: 60.0,
    width: 800.0,
    height: 240.0,
    column_gap: 0.0,
    row_gap: 70.0,
};
const COLOURS: [Colour; 6] = [
    Colour::hex(0x1f_77_b4),
    Colour::hex(0xd6_27_28),
    Colour::hex(0x2c_a0_2c),
    Colour::hex(0x94_67_bd),
    Colour::hex(0xff_7f_0e),
    Colour::hex(0x17_be_cf),
];
const FRAME: Colour = Colour::hex(0x88_88_88);

/// The time axis shared by the panels: from the first step's time to the last's (at least
/// 1 s wide; 0…1 when there are no steps), and those two times for the label.
#[derive(Clone, Copy)]
pub(crate) struct Time {
    scale: Scale,
    first: f64,
    last: f64,
}

impl Time {
    /// The axis over steps at times `times`, in order.
    pub(crate) fn spanning(mut times: impl DoubleEndedIterator<Item = f64>) -> Time {
        let Some(first) = times.next() else {
            return Time {
                scale: Scale::new(0.0, 1.0),
                first: 0.0,
                last: 1.0,
            };
        };
        let last = times.next_back().unwrap_or(first);
        Time {
            scale: Scale::new(first, last.max(first + 1.0)),
            first,
            last,
        }
    }

    /// The time range, centred under `axes` (the lowest panel).
    pub(crate) fn label(&self, chart: &mut Chart, axes: &Axes) {
        chart.text(axes.under(
            Anchor::Middle,
            format!("t (s): {} … {}", label(self.first), label(self.last)),
        ));
    }
}

/// The axes of the panel in row `row`, over `time`, with values from `lo` to `hi`.
pub(crate) fn axes(row: usize, time: &Time, lo: f64, hi: f64) -> Axes {
    Axes::new(LAYOUT.panel(row, 0), time.scale, Scale::new(lo, hi))
}

/// A panel's outline, its title above, and its lowest and highest values at the left.
pub(crate) fn frame(chart: &mut Chart, axes: &Axes, title: &str) {
    axes.frame(chart, FRAME);
    chart.text(axes.title(Anchor::Start, title).size(14.0).bold());
    axes.y_labels(
        chart,
        Side::Left,
        &[axes.y.lo(), axes.y.hi()],
        label,
        Colour::BLACK,
    );
}

/// The replay as a chart, ready to render to SVG or PNG.
pub fn chart(steps: &[StepLine]) -> Chart {
    let mut chart = LAYOUT.chart(2, 1);
    let time = Time::spanning(steps.iter().map(|s| s.t));
    replicas_panel(&mut chart, steps, &time);
    let bottom = metrics_panel(&mut chart, steps, &time);
    time.label(&mut chart, &bottom);
    chart
}

/// The top panel: replicas after each step, as a step line.
fn replicas_panel(chart: &mut Chart, steps: &[StepLine], time: &Time) {
    let max_r = steps
        .iter()
        .flat_map(|s| [s.replicas, s.current_replicas, s.desired_replicas])
        .max()
        .unwrap_or(1)
        .max(1);
    let axes = axes(0, time, 0.0, f64::from(max_r) * 1.1);
    frame(chart, &axes, "replicas");
    let mut pts: Vec<(f64, f64)> = Vec::new();
    if let Some(first) = steps.first() {
        pts.push(axes.point(first.t, f64::from(first.current_replicas)));
    }
    for s in steps {
        pts.push(axes.point(s.t, f64::from(s.replicas)));
    }
    chart.polyline(
        step_points(&pts, Some(axes.panel.right())),
        Stroke::solid(Colour::BLACK, 2.0),
    );
    for s in steps {
        let (x, y) = axes.point(s.t, f64::from(s.replicas));
        chart.circle(
            x,
            y,
            3.0,
            Colour::BLACK,
            Some(format!(
                "t={} replicas={} desired={} {}",
                s.t, s.replicas, s.desired_replicas, s.reason
            )),
        );
    }
}

/// The bottom panel: each metric's value, with its target or watermarks dashed; its axes.
fn metrics_panel(chart: &mut Chart, steps: &[StepLine], time: &Time) -> Axes {
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
    let axes = axes(1, time, 0.0, hi);
    frame(chart, &axes, "metric value, target and watermarks");
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
                        .map(|v| axes.point(s.t, v))
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
                step_points(&bound, Some(axes.panel.right())),
                Stroke::dashed(colour, 1.0, 6.0, 4.0),
            );
        }
        // The legend, under the time label.
        chart.text(
            Text::new(
                axes.panel.left + 10.0 + 180.0 * i as f64,
                axes.panel.bottom() + 36.0,
                *name,
            )
            .size(12.0)
            .colour(colour),
        );
    }
    axes
}

/// One step's result, as printed with `--output json`.
#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct StepLine {
    /// Seconds since the scenario start.
    pub t: f64,
    /// The workload's replicas when the step ran.
    pub current_replicas: i32,
    /// What the autoscaler wants.
    pub desired_replicas: i32,
    /// The workload's replicas after the step (the write, if any).
    pub replicas: i32,
    /// The largest metric proposal before stabilization and limits.
    pub recommended_replicas: Option<i32>,
    /// One entry per metric.
    pub proposals: Vec<plimsoll_core::horizontal::MetricOutcome>,
    /// The rule that changed or held the recommendation.
    pub limited_by: Option<String>,
    /// A sentence a person can read.
    pub reason: String,
    /// Cooldowns and delays still running.
    pub countdowns: Vec<plimsoll_core::horizontal::Countdown>,
    /// `AbleToScale` condition status.
    pub able_to_scale: bool,
}
