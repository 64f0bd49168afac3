//! `--plot FILE.svg`: a hand-written SVG of a replay: replicas over time (top panel) and each
//! metric's value with its target or watermarks (bottom panel, one colour per metric).
//!
//! No plotting dependency: the chart is a few polylines, axes and labels. Values are scaled to
//! the panel; the target and watermarks are dashed lines of the metric's colour.

use std::fmt::Write as _;

use crate::replay::StepLine;

const WIDTH: f64 = 900.0;
const PANEL: f64 = 240.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 40.0;
const GAP: f64 = 70.0;
const COLOURS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
];

/// Escapes text for SVG.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

struct Axis {
    t_min: f64,
    t_max: f64,
}

impl Axis {
    fn x(&self, t: f64) -> f64 {
        let span = (self.t_max - self.t_min).max(1.0);
        LEFT + (t - self.t_min) / span * (WIDTH - LEFT - RIGHT)
    }
}

fn y(v: f64, lo: f64, hi: f64, top: f64) -> f64 {
    let span = (hi - lo).max(f64::EPSILON);
    top + PANEL - (v - lo) / span * PANEL
}

fn frame(out: &mut String, top: f64, title: &str, lo: f64, hi: f64) {
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{top}" width="{w}" height="{PANEL}" fill="none" stroke="#888"/>"##,
        w = WIDTH - LEFT - RIGHT
    );
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="{ty}" font-size="14" font-weight="bold">{}</text>"#,
        esc(title),
        ty = top - 8.0
    );
    for (v, yy) in [(hi, top), (lo, top + PANEL)] {
        let _ = writeln!(
            out,
            r#"<text x="{x}" y="{yy}" font-size="11" text-anchor="end" dominant-baseline="middle">{}</text>"#,
            trim(v),
            x = LEFT - 6.0
        );
    }
}

fn trim(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// A step-shaped polyline: the value holds until the next point.
fn steps_path(points: &[(f64, f64)]) -> String {
    let mut d = String::new();
    for (i, (x, yy)) in points.iter().enumerate() {
        if i == 0 {
            let _ = write!(d, "M{x:.1},{yy:.1}");
        } else {
            let _ = write!(d, " H{x:.1} V{yy:.1}");
        }
    }
    d
}

/// Renders the replay as an SVG document.
pub fn svg(steps: &[StepLine]) -> String {
    let height = TOP + PANEL + GAP + PANEL + 60.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif">"#
    );
    let _ = writeln!(
        out,
        r##"<rect width="{WIDTH}" height="{height}" fill="#fff"/>"##
    );
    let axis = Axis {
        t_min: steps.first().map_or(0.0, |s| s.t),
        t_max: steps.last().map_or(1.0, |s| s.t),
    };

    replicas_panel(&mut out, steps, &axis);
    metrics_panel(&mut out, steps, &axis);
    let top = TOP + PANEL + GAP;
    let _ = writeln!(
        out,
        r#"<text x="{x}" y="{yy}" font-size="11" text-anchor="middle">t (s): {} … {}</text>"#,
        trim(axis.t_min),
        trim(axis.t_max),
        x = WIDTH / 2.0,
        yy = top + PANEL + 16.0
    );
    out.push_str("</svg>\n");
    out
}

/// The top panel: replicas after each step, as a step line.
fn replicas_panel(out: &mut String, steps: &[StepLine], axis: &Axis) {
    let max_r = steps
        .iter()
        .flat_map(|s| [s.replicas, s.current_replicas, s.desired_replicas])
        .max()
        .unwrap_or(1)
        .max(1);
    let (lo, hi) = (0.0, f64::from(max_r) * 1.1);
    frame(out, TOP, "replicas", lo, hi);
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
    if let Some(last) = pts.last().copied() {
        pts.push((WIDTH - RIGHT, last.1));
    }
    let _ = writeln!(
        out,
        r##"<path d="{}" fill="none" stroke="#000" stroke-width="2"/>"##,
        steps_path(&pts)
    );
    for s in steps {
        let _ = writeln!(
            out,
            r##"<circle cx="{:.1}" cy="{:.1}" r="3" fill="#000"><title>t={} replicas={} desired={} {}</title></circle>"##,
            axis.x(s.t),
            y(f64::from(s.replicas), lo, hi, TOP),
            s.t,
            s.replicas,
            s.desired_replicas,
            esc(&s.reason)
        );
    }
}

/// The bottom panel: each metric's value, with its target or watermarks dashed.
fn metrics_panel(out: &mut String, steps: &[StepLine], axis: &Axis) {
    let top = TOP + PANEL + GAP;
    let names: Vec<String> = steps
        .iter()
        .flat_map(|s| s.proposals.iter().map(|p| p.metric.clone()))
        .fold(Vec::new(), |mut acc, n| {
            if !acc.contains(&n) {
                acc.push(n);
            }
            acc
        });
    let all: Vec<f64> = steps
        .iter()
        .flat_map(|s| {
            s.proposals.iter().flat_map(|p| {
                [p.value, p.target, p.low_watermark, p.high_watermark]
                    .into_iter()
                    .flatten()
            })
        })
        .collect();
    let hi = all.iter().copied().fold(0.0, f64::max).max(1.0) * 1.1;
    frame(out, top, "metric value, target and watermarks", 0.0, hi);
    for (i, name) in names.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let series = |f: &dyn Fn(&plimsoll_core::horizontal::MetricOutcome) -> Option<f64>| {
            steps
                .iter()
                .filter_map(|s| {
                    s.proposals
                        .iter()
                        .find(|p| &p.metric == name)
                        .and_then(f)
                        .map(|v| (axis.x(s.t), y(v, 0.0, hi, top)))
                })
                .collect::<Vec<_>>()
        };
        let value = series(&|p| p.value);
        if !value.is_empty() {
            let pts: Vec<String> = value
                .iter()
                .map(|(x, yy)| format!("{x:.1},{yy:.1}"))
                .collect();
            let _ = writeln!(
                out,
                r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#,
                pts.join(" ")
            );
        }
        for bound in [
            series(&|p| p.target),
            series(&|p| p.low_watermark),
            series(&|p| p.high_watermark),
        ] {
            if bound.is_empty() {
                continue;
            }
            let mut pts = bound.clone();
            if let Some(last) = pts.last().copied() {
                pts.push((WIDTH - RIGHT, last.1));
            }
            let _ = writeln!(
                out,
                r#"<path d="{}" fill="none" stroke="{colour}" stroke-dasharray="6 4"/>"#,
                steps_path(&pts)
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="{x}" y="{yy}" font-size="12" fill="{colour}">{}</text>"#,
            esc(name),
            x = LEFT + 10.0 + 180.0 * i as f64,
            yy = top + PANEL + 36.0
        );
    }
}
