//! `replay --plot FILE.svg|FILE.png`: per container and resource, the usage distribution (the
//! final decaying histogram, one bar per non-empty bucket) and the target with its bounds over
//! time, with the usage samples as dots.
//!
//! The scene is built once as a [`Chart`] and rendered by the file's extension. Upper bounds
//! with little history are huge (upstream multiplies them by 1 + 1/confidence), so the y axis is
//! limited to 1.5 × the largest target or usage and lines are clipped at the top.
//!
//! The plot's input ([`ResourceTrace`]) is defined here and filled by the replay: the replay
//! imports the plot, never the reverse. Panels, scales and labels are `plimsoll_plot`'s axes.

use plimsoll_core::vertical::aggregate::Resource;
use plimsoll_replay::plot::{Anchor, Axes, Chart, Colour, Grid, Panel, Scale, Side, Stroke, Text};

/// One row per container and resource: the histogram left, the timeline right.
const LAYOUT: Grid = Grid {
    left: 50.0,
    top: 50.0,
    right: 50.0,
    bottom: 50.0,
    width: 460.0,
    height: 220.0,
    column_gap: 100.0,
    row_gap: 100.0,
};
const BAR: Colour = Colour::hex(0x4a_7e_bb);
const USAGE: Colour = Colour::hex(0xe0_8a_2c);
const BOUND: Colour = Colour::hex(0x99_99_99);
const FRAME: Colour = Colour::hex(0xcc_cc_cc);

/// One point of a container's recommendation over time (for plots).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeriesPoint {
    /// Seconds since start.
    pub t: f64,
    /// Target (millicores / bytes).
    pub target: i64,
    /// Lower bound.
    pub lower: i64,
    /// Upper bound.
    pub upper: i64,
}

/// What a plot shows for one container and one resource (the replay collects it).
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceTrace {
    /// Container name.
    pub container: String,
    /// Which resource.
    pub resource: Resource,
    /// `(t, usage)` of every sample.
    pub usage: Vec<(f64, i64)>,
    /// Recommendation over time.
    pub series: Vec<SeriesPoint>,
    /// Final histogram: `(bucket start, bucket end, weight)` of non-empty buckets (cores or bytes).
    pub histogram: Vec<(f64, f64, f64)>,
}

fn human(resource: Resource, v: f64) -> String {
    match resource {
        Resource::Cpu => format!("{}m", v.round()),
        Resource::Memory => format!("{:.0}Mi", v / (1024.0 * 1024.0)),
    }
}

/// The chart for `traces` (one row per container and resource), ready to render to SVG or PNG.
pub fn chart(traces: &[ResourceTrace]) -> Chart {
    let mut chart = LAYOUT.chart(traces.len().max(1), 2);
    if traces.is_empty() {
        chart.text(Text::new(20.0, 30.0, "no containers to plot"));
    }
    for (row, trace) in traces.iter().enumerate() {
        histogram_panel(&mut chart, trace, LAYOUT.panel(row, 0));
        timeline_panel(&mut chart, trace, LAYOUT.panel(row, 1));
    }
    chart
}

/// Amount in the unit the traces use for the axis: millicores for CPU, bytes for memory.
fn unit_scale(resource: Resource) -> f64 {
    match resource {
        Resource::Cpu => 1000.0, // histogram values are cores
        Resource::Memory => 1.0,
    }
}

fn histogram_panel(chart: &mut Chart, trace: &ResourceTrace, panel: Panel) {
    let title = format!(
        "{} {}: usage distribution (decayed weights)",
        trace.container,
        trace.resource.name()
    );
    let scale = unit_scale(trace.resource);
    let max_x = trace
        .histogram
        .iter()
        .map(|(_, end, _)| end * scale)
        .fold(0.0_f64, f64::max)
        .max(1.0);
    let max_w = trace
        .histogram
        .iter()
        .map(|(_, _, w)| *w)
        .fold(0.0_f64, f64::max);
    let axes = Axes::new(panel, Scale::to(max_x), Scale::to(max_w));
    frame(chart, &axes, title);
    if max_w <= 0.0 {
        chart.text(Text::new(panel.left + 10.0, panel.top + 20.0, "no samples"));
        return;
    }
    for (start, end, w) in &trace.histogram {
        let x = axes.x(start * scale);
        let bw = (axes.x(end * scale) - x).max(1.0);
        let top = axes.y(*w);
        chart.fill_rect(x, top, bw, panel.bottom() - top, BAR);
    }
    chart.text(axes.under(Anchor::Start, human(trace.resource, 0.0)));
    chart.text(axes.under(Anchor::End, human(trace.resource, max_x)));
}

fn timeline_panel(chart: &mut Chart, trace: &ResourceTrace, panel: Panel) {
    let title = format!(
        "{} {}: target (black), bounds (grey), usage (dots)",
        trace.container,
        trace.resource.name()
    );
    let t_max = trace
        .series
        .iter()
        .map(|p| p.t)
        .chain(trace.usage.iter().map(|u| u.0))
        .fold(0.0_f64, f64::max)
        .max(1.0);
    let y_max = trace
        .series
        .iter()
        .map(|p| p.target as f64)
        .chain(trace.usage.iter().map(|u| u.1 as f64))
        .fold(0.0_f64, f64::max)
        .max(1.0)
        * 1.5;
    // Upper bounds with little history run far off the top: clipped there.
    let axes = Axes::new(panel, Scale::to(t_max), Scale::to(y_max));
    frame(chart, &axes, title);
    let point = |t: f64, v: f64| (axes.x(t), axes.y_clamped(v));
    for (t, v) in &trace.usage {
        let (x, y) = point(*t, *v as f64);
        chart.circle(x, y, 1.5, USAGE, None);
    }
    // Bounds first so the target is drawn over them.
    for (pick, stroke) in [
        (0usize, Stroke::solid(BOUND, 1.0)),
        (2, Stroke::solid(BOUND, 1.0)),
        (1, Stroke::solid(Colour::BLACK, 2.0)),
    ] {
        let points: Vec<(f64, f64)> = trace
            .series
            .iter()
            .map(|p| point(p.t, [p.lower, p.target, p.upper][pick] as f64))
            .collect();
        // One evaluation (a replay with a single `at`) has no line to draw: mark the point.
        if let [(x, y)] = points[..] {
            chart.circle(x, y, stroke.width + 1.5, stroke.colour, None);
        }
        chart.polyline(points, stroke);
    }
    chart.text(axes.under(Anchor::Start, "0 s"));
    chart.text(axes.under(Anchor::End, format!("{t_max:.0} s")));
    chart.text(axes.y_label(Side::Left, y_max, human(trace.resource, y_max)));
}

/// A panel's outline and its title above.
fn frame(chart: &mut Chart, axes: &Axes, title: String) {
    axes.frame(chart, FRAME);
    chart.text(axes.title(Anchor::Start, title).bold());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_has_bars_lines_and_dots() {
        let trace = ResourceTrace {
            container: "app<1>".into(),
            resource: Resource::Cpu,
            usage: vec![(0.0, 300), (60.0, 310)],
            series: vec![
                SeriesPoint {
                    t: 0.0,
                    target: 345,
                    lower: 300,
                    upper: 1_000_000,
                },
                SeriesPoint {
                    t: 60.0,
                    target: 350,
                    lower: 310,
                    upper: 500,
                },
            ],
            histogram: vec![(0.29, 0.31, 2.0)],
        };
        let s = chart(&[trace]).to_svg();
        assert!(s.starts_with("<svg"));
        assert!(s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 3);
        assert_eq!(s.matches("<circle").count(), 2);
        assert!(s.contains("app&lt;1&gt;"));
        assert!(!s.contains("NaN"));
    }

    #[test]
    fn png_has_one_row_per_trace() {
        let trace = ResourceTrace {
            container: "app".into(),
            resource: Resource::Memory,
            usage: vec![(0.0, 100 << 20)],
            series: vec![],
            histogram: vec![(90e6, 110e6, 1.0)],
        };
        let c = chart(&[trace.clone(), trace]);
        assert_eq!((c.width(), c.height()), (1120, 640));
        let png = c.to_png();
        assert_eq!(&png[12..16], b"IHDR");
        assert_eq!(png[16..24], [0, 0, 0x04, 0x60, 0, 0, 0x02, 0x80]);
    }

    #[test]
    fn empty_plot_is_valid() {
        let s = chart(&[]).to_svg();
        assert!(s.contains("no containers"));
    }
}
