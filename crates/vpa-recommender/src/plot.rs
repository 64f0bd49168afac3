//! `replay --plot FILE.svg|FILE.png`: per container and resource, the usage distribution (the
//! final decaying histogram, one bar per non-empty bucket) and the target with its bounds over
//! time, with the usage samples as dots.
//!
//! The scene is built once as a [`Chart`] and rendered by the file's extension. Upper bounds
//! with little history are huge (upstream multiplies them by 1 + 1/confidence), so the y axis is
//! limited to 1.5 × the largest target or usage and lines are clipped at the top.

use plimsoll_core::vertical::aggregate::Resource;
use plimsoll_replay::plot::{Anchor, Chart, Colour, Stroke, Text};

use crate::replay::ResourceTrace;

const PANEL_W: f64 = 460.0;
const PANEL_H: f64 = 220.0;
const MARGIN: f64 = 50.0;
const ROW_H: f64 = PANEL_H + 2.0 * MARGIN;
const WIDTH: f64 = 2.0 * (PANEL_W + 2.0 * MARGIN);
const BAR: Colour = Colour::hex(0x4a_7e_bb);
const USAGE: Colour = Colour::hex(0xe0_8a_2c);
const BOUND: Colour = Colour::hex(0x99_99_99);
const FRAME: Colour = Colour::hex(0xcc_cc_cc);

fn human(resource: Resource, v: f64) -> String {
    match resource {
        Resource::Cpu => format!("{}m", v.round()),
        Resource::Memory => format!("{:.0}Mi", v / (1024.0 * 1024.0)),
    }
}

/// The chart for `traces` (one row per container and resource), ready to render to SVG or PNG.
pub fn chart(traces: &[ResourceTrace]) -> Chart {
    let height = ROW_H * traces.len().max(1) as f64;
    let mut chart = Chart::new(WIDTH as u32, height as u32);
    if traces.is_empty() {
        chart.text(Text::new(20.0, 30.0, "no containers to plot"));
    }
    for (row, trace) in traces.iter().enumerate() {
        let y0 = row as f64 * ROW_H + MARGIN;
        histogram_panel(&mut chart, trace, MARGIN, y0);
        timeline_panel(&mut chart, trace, PANEL_W + 3.0 * MARGIN, y0);
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

fn histogram_panel(chart: &mut Chart, trace: &ResourceTrace, x0: f64, y0: f64) {
    let title = format!(
        "{} {}: usage distribution (decayed weights)",
        trace.container,
        trace.resource.name()
    );
    frame(chart, x0, y0, title);
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
    if max_w <= 0.0 {
        chart.text(Text::new(x0 + 10.0, y0 + 20.0, "no samples"));
        return;
    }
    for (start, end, w) in &trace.histogram {
        let x = x0 + start * scale / max_x * PANEL_W;
        let bw = ((end - start) * scale / max_x * PANEL_W).max(1.0);
        let h = w / max_w * PANEL_H;
        chart.fill_rect(x, y0 + PANEL_H - h, bw, h, BAR);
    }
    axis_labels(
        chart,
        x0,
        y0,
        human(trace.resource, 0.0),
        human(trace.resource, max_x),
    );
}

fn timeline_panel(chart: &mut Chart, trace: &ResourceTrace, x0: f64, y0: f64) {
    let title = format!(
        "{} {}: target (black), bounds (grey), usage (dots)",
        trace.container,
        trace.resource.name()
    );
    frame(chart, x0, y0, title);
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
    let px = |t: f64| x0 + t / t_max * PANEL_W;
    let py = |v: f64| y0 + PANEL_H - (v.min(y_max) / y_max) * PANEL_H;
    for (t, v) in &trace.usage {
        chart.circle(px(*t), py(*v as f64), 1.5, USAGE, None);
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
            .map(|p| (px(p.t), py([p.lower, p.target, p.upper][pick] as f64)))
            .collect();
        // One evaluation (a replay with a single `at`) has no line to draw: mark the point.
        if let [(x, y)] = points[..] {
            chart.circle(x, y, stroke.width + 1.5, stroke.colour, None);
        }
        chart.polyline(points, stroke);
    }
    axis_labels(chart, x0, y0, "0 s".to_owned(), format!("{t_max:.0} s"));
    chart.text(Text::new(x0 - 4.0, y0 + 10.0, human(trace.resource, y_max)).anchor(Anchor::End));
}

fn frame(chart: &mut Chart, x0: f64, y0: f64, title: String) {
    chart.stroke_rect(x0, y0, PANEL_W, PANEL_H, Stroke::solid(FRAME, 1.0));
    chart.text(Text::new(x0, y0 - 8.0, title).bold());
}

fn axis_labels(chart: &mut Chart, x0: f64, y0: f64, left: String, right: String) {
    let y = y0 + PANEL_H + 14.0;
    chart.text(Text::new(x0, y, left));
    chart.text(Text::new(x0 + PANEL_W, y, right).anchor(Anchor::End));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::SeriesPoint;

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
