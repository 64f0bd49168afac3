//! Hand-written SVG for `replay --plot`: per container and resource, the usage distribution
//! (the final decaying histogram, one bar per non-empty bucket) and the target with its bounds
//! over time, with the usage samples as dots.
//!
//! No plotting dependency: the picture is a few rectangles, polylines and labels. Upper bounds
//! with little history are huge (upstream multiplies them by 1 + 1/confidence), so the y axis is
//! limited to 1.5 × the largest target or usage and lines are clipped at the top.

use std::fmt::Write as _;

use plimsoll_core::vertical::aggregate::Resource;

use crate::replay::ResourceTrace;

const PANEL_W: f64 = 460.0;
const PANEL_H: f64 = 220.0;
const MARGIN: f64 = 50.0;
const ROW_H: f64 = PANEL_H + 2.0 * MARGIN;
const WIDTH: f64 = 2.0 * (PANEL_W + 2.0 * MARGIN);

fn human(resource: Resource, v: f64) -> String {
    match resource {
        Resource::Cpu => format!("{}m", v.round()),
        Resource::Memory => format!("{:.0}Mi", v / (1024.0 * 1024.0)),
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The SVG document for `traces` (one row per container and resource).
pub fn svg(traces: &[ResourceTrace]) -> String {
    let height = ROW_H * traces.len().max(1) as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    if traces.is_empty() {
        let _ = writeln!(out, r#"<text x="20" y="30">no containers to plot</text>"#);
    }
    for (row, trace) in traces.iter().enumerate() {
        let y0 = row as f64 * ROW_H + MARGIN;
        histogram_panel(&mut out, trace, MARGIN, y0);
        timeline_panel(&mut out, trace, PANEL_W + 3.0 * MARGIN, y0);
    }
    out.push_str("</svg>\n");
    out
}

/// Amount in the unit the traces use for the axis: millicores for CPU, bytes for memory.
fn unit_scale(resource: Resource) -> f64 {
    match resource {
        Resource::Cpu => 1000.0, // histogram values are cores
        Resource::Memory => 1.0,
    }
}

fn histogram_panel(out: &mut String, trace: &ResourceTrace, x0: f64, y0: f64) {
    let title = format!(
        "{} {}: usage distribution (decayed weights)",
        escape(&trace.container),
        trace.resource.name()
    );
    frame(out, x0, y0, &title);
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
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}">no samples</text>"#,
            x0 + 10.0,
            y0 + 20.0
        );
        return;
    }
    for (start, end, w) in &trace.histogram {
        let x = x0 + start * scale / max_x * PANEL_W;
        let bw = ((end - start) * scale / max_x * PANEL_W).max(1.0);
        let h = w / max_w * PANEL_H;
        let _ = writeln!(
            out,
            r##"<rect x="{x:.1}" y="{:.1}" width="{bw:.1}" height="{h:.1}" fill="#4a7ebb"/>"##,
            y0 + PANEL_H - h
        );
    }
    axis_labels(
        out,
        x0,
        y0,
        &human(trace.resource, 0.0),
        &human(trace.resource, max_x),
    );
}

fn timeline_panel(out: &mut String, trace: &ResourceTrace, x0: f64, y0: f64) {
    let title = format!(
        "{} {}: target (black), lower/upper bound (grey), usage (dots)",
        escape(&trace.container),
        trace.resource.name()
    );
    frame(out, x0, y0, &title);
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
        let _ = writeln!(
            out,
            r##"<circle cx="{:.1}" cy="{:.1}" r="1.5" fill="#e08a2c"/>"##,
            px(*t),
            py(*v as f64)
        );
    }
    for (pick, color, width) in [
        (0usize, "#999999", 1.0),
        (2, "#999999", 1.0),
        (1, "#000000", 2.0),
    ] {
        let points: Vec<String> = trace
            .series
            .iter()
            .map(|p| {
                let v = [p.lower, p.target, p.upper][pick] as f64;
                format!("{:.1},{:.1}", px(p.t), py(v))
            })
            .collect();
        if !points.is_empty() {
            let _ = writeln!(
                out,
                r#"<polyline fill="none" stroke="{color}" stroke-width="{width}" points="{}"/>"#,
                points.join(" ")
            );
        }
    }
    axis_labels(out, x0, y0, "0 s", &format!("{t_max:.0} s"));
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
        x0 - 4.0,
        y0 + 10.0,
        human(trace.resource, y_max)
    );
}

fn frame(out: &mut String, x0: f64, y0: f64, title: &str) {
    let _ = writeln!(
        out,
        r##"<rect x="{x0}" y="{y0}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#cccccc"/>"##
    );
    let _ = writeln!(
        out,
        r#"<text x="{x0}" y="{:.1}" font-weight="bold">{title}</text>"#,
        y0 - 8.0
    );
}

fn axis_labels(out: &mut String, x0: f64, y0: f64, left: &str, right: &str) {
    let y = y0 + PANEL_H + 14.0;
    let _ = writeln!(out, r#"<text x="{x0}" y="{y}">{left}</text>"#);
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{y}" text-anchor="end">{right}</text>"#,
        x0 + PANEL_W
    );
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
        let s = svg(&[trace]);
        assert!(s.starts_with("<svg"));
        assert!(s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 3);
        assert_eq!(s.matches("<circle").count(), 2);
        assert!(s.contains("app&lt;1&gt;"));
        assert!(!s.contains("NaN"));
    }

    #[test]
    fn empty_plot_is_valid() {
        let s = svg(&[]);
        assert!(s.contains("no containers"));
    }
}
