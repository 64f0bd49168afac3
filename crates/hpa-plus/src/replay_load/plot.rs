//! `--plot` of a `LoadReplay`: replicas, Ready replicas and the `minReplicas` in force (top
//! panel), and the utilization of the Ready pods' CPU requests (middle panel), over time. With
//! `spec.predictive` on, the top panel adds the replicas a confident forecast needs, and a
//! bottom panel shows the trace's CPU load with the forecast peak of the lead window.

use plimsoll_replay::plot::{Chart, Colour, Stroke, step_points};

use super::LoadLine;
use crate::plot::{Axis, GAP, HEIGHT, PANEL, RIGHT, TOP, WIDTH, frame, y};

const READY: Colour = Colour::hex(0x2c_a0_2c);
const MIN: Colour = Colour::hex(0xd6_27_28);
const UTILIZATION: Colour = Colour::hex(0x1f_77_b4);
const FORECAST: Colour = Colour::hex(0xff_7f_0e);

/// A value of a step, when it has one.
type Field<'a> = &'a dyn Fn(&LoadLine) -> Option<f64>;

/// The chart of a `LoadReplay`.
pub fn chart(steps: &[LoadLine]) -> Chart {
    let predictive = steps.iter().any(|s| s.predictive.is_some());
    let height = if predictive {
        HEIGHT + PANEL + GAP
    } else {
        HEIGHT
    };
    let mut chart = Chart::new(WIDTH as u32, height as u32);
    let axis = Axis::spanning(steps.iter().map(|s| s.t));
    let series = |f: Field<'_>, hi: f64, top: f64| series(steps, &axis, f, hi, top);
    let most = steps
        .iter()
        .flat_map(|s| {
            [
                s.replicas,
                s.ready_replicas,
                s.min_replicas,
                s.predicted_replicas.unwrap_or(0),
            ]
        })
        .max()
        .unwrap_or(1)
        .max(1);
    let hi = f64::from(most) * 1.1;
    let title = if predictive {
        "replicas (black), ready (green), minReplicas (red), predicted (orange)"
    } else {
        "replicas (black), ready (green), minReplicas (red)"
    };
    frame(&mut chart, TOP, title, 0.0, hi);
    let mut lines: Vec<(Field<'_>, Stroke)> = vec![
        (
            &|s: &LoadLine| Some(f64::from(s.replicas)),
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
    ];
    if predictive {
        lines.push((
            &|s: &LoadLine| s.predicted_replicas.map(f64::from),
            Stroke::dashed(FORECAST, 1.5, 3.0, 3.0),
        ));
    }
    for (f, stroke) in lines {
        chart.polyline(
            step_points(&series(f, hi, TOP), Some(WIDTH - RIGHT)),
            stroke,
        );
    }
    let middle = TOP + PANEL + GAP;
    let hi = steps
        .iter()
        .filter_map(|s| s.utilization)
        .fold(100.0, f64::max)
        * 1.1;
    frame(
        &mut chart,
        middle,
        "utilization of the Ready pods' CPU requests (%)",
        0.0,
        hi,
    );
    chart.polyline(
        series(&|s: &LoadLine| s.utilization, hi, middle),
        Stroke::solid(UTILIZATION, 1.5),
    );
    if !predictive {
        axis.label(&mut chart, middle);
        return chart;
    }
    let bottom = middle + PANEL + GAP;
    forecast_panel(&mut chart, steps, &axis, bottom);
    axis.label(&mut chart, bottom);
    chart
}

/// The points of field `f` of every step that has it, in a panel at `top` scaled to `hi`.
fn series(steps: &[LoadLine], axis: &Axis, f: Field<'_>, hi: f64, top: f64) -> Vec<(f64, f64)> {
    steps
        .iter()
        .filter_map(|s| f(s).map(|v| (axis.x(s.t), y(v, 0.0, hi, top))))
        .collect()
}

/// The panel of the load and the forecast peak of the lead window, at `top`.
fn forecast_panel(chart: &mut Chart, steps: &[LoadLine], axis: &Axis, top: f64) {
    let hi = steps
        .iter()
        .flat_map(|s| [Some(s.load), s.forecast])
        .flatten()
        .fold(1.0, f64::max)
        * 1.1;
    frame(
        chart,
        top,
        "CPU load (black) and forecast peak of the lead window (orange), cores",
        0.0,
        hi,
    );
    chart.polyline(
        series(steps, axis, &|s: &LoadLine| Some(s.load), hi, top),
        Stroke::solid(Colour::BLACK, 1.0),
    );
    chart.polyline(
        step_points(
            &series(steps, axis, &|s: &LoadLine| s.forecast, hi, top),
            Some(WIDTH - RIGHT),
        ),
        Stroke::solid(FORECAST, 1.5),
    );
}
