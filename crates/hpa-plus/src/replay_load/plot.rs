//! `--plot` of a `LoadReplay`: replicas, Ready replicas and the `minReplicas` in force (top
//! panel), and the utilization of the Ready pods' CPU requests against the HPA+'s target and a
//! ±50 % band around it (middle panel), over time. With `spec.predictive` on, the top panel adds
//! the replicas a confident forecast needs, and a panel shows the trace's CPU load with the
//! forecast peak of the lead window. With a `vpa`, a panel shows the CPU load (unless the
//! forecast panel already does) and a last one the CPU request new pods get.

use plimsoll_replay::plot::{Axes, Chart, Colour, Stroke, step_points};

use super::LoadLine;
use crate::plot::{LAYOUT, Time, axes, frame};

const READY: Colour = Colour::hex(0x2c_a0_2c);
const MIN: Colour = Colour::hex(0xd6_27_28);
const UTILIZATION: Colour = Colour::hex(0x1f_77_b4);
const FORECAST: Colour = Colour::hex(0xff_7f_0e);
const REQUEST: Colour = Colour::hex(0x94_67_bd);
const BAND: Colour = Colour::hex(0x99_99_99);

/// A value of a step, when it has one.
type Field<'a> = &'a dyn Fn(&LoadLine) -> Option<f64>;

/// The chart of a `LoadReplay`; `vertical` when it has a `vpa`.
pub fn chart(steps: &[LoadLine], vertical: bool) -> Chart {
    let predictive = steps.iter().any(|s| s.predictive.is_some());
    let extra =
        usize::from(predictive) + 2 * usize::from(vertical) - usize::from(vertical && predictive);
    let mut chart = LAYOUT.chart(2 + extra, 1);
    let time = Time::spanning(steps.iter().map(|s| s.t));
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
    let top = axes(0, &time, 0.0, f64::from(most) * 1.1);
    let title = if predictive {
        "replicas (black), ready (green), minReplicas (red), predicted (orange)"
    } else {
        "replicas (black), ready (green), minReplicas (red)"
    };
    frame(&mut chart, &top, title);
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
            step_points(&series(steps, &top, f), Some(top.panel.right())),
            stroke,
        );
    }
    let target = steps.iter().find_map(|s| s.target).map(f64::from);
    // Scaled to what the steps reach, but at most 3 × the target (300 % without one): a
    // start far off the target would flatten the rest; higher values are drawn at the top.
    let ceiling = target.map_or(300.0, |t| (t * 3.0).max(100.0));
    let hi = steps
        .iter()
        .filter_map(|s| s.utilization)
        .chain(target.map(|t| t * 1.5))
        .fold(100.0, f64::max)
        .min(ceiling)
        * 1.1;
    let title = if target.is_some() {
        "utilization of the Ready pods' CPU requests (%), target (dashed) and ±50 % (dotted)"
    } else {
        "utilization of the Ready pods' CPU requests (%)"
    };
    let middle = axes(1, &time, 0.0, hi);
    frame(&mut chart, &middle, title);
    if let Some(t) = target {
        for (v, stroke) in [
            (t, Stroke::dashed(BAND, 1.5, 6.0, 4.0)),
            (t * 0.5, Stroke::dashed(BAND, 1.0, 2.0, 3.0)),
            (t * 1.5, Stroke::dashed(BAND, 1.0, 2.0, 3.0)),
        ] {
            chart.polyline(series(steps, &middle, &|_: &LoadLine| Some(v)), stroke);
        }
    }
    chart.polyline(
        series(steps, &middle, &|s: &LoadLine| {
            s.utilization.map(|u| u.min(hi))
        }),
        Stroke::solid(UTILIZATION, 1.5),
    );
    let mut last = middle;
    let mut row = 1;
    if predictive {
        row += 1;
        last = forecast_panel(&mut chart, steps, &time, row);
    }
    if vertical {
        if !predictive {
            row += 1;
            load_panel(&mut chart, steps, &time, row);
        }
        row += 1;
        last = request_panel(&mut chart, steps, &time, row);
    }
    time.label(&mut chart, &last);
    chart
}

/// The panel of the trace's CPU load, in row `row` (never the last: the request panel follows).
fn load_panel(chart: &mut Chart, steps: &[LoadLine], time: &Time, row: usize) {
    let hi = steps.iter().map(|s| s.load).fold(1.0, f64::max) * 1.1;
    let axes = axes(row, time, 0.0, hi);
    frame(chart, &axes, "CPU load, all pods together (cores)");
    chart.polyline(
        series(steps, &axes, &|s: &LoadLine| Some(s.load)),
        Stroke::solid(Colour::BLACK, 1.0),
    );
}

/// The panel of the CPU request new pods get (the VPA's), in row `row`; its axes.
fn request_panel(chart: &mut Chart, steps: &[LoadLine], time: &Time, row: usize) -> Axes {
    let hi = steps
        .iter()
        .map(|s| s.cpu_request as f64 / 1000.0)
        .fold(0.1, f64::max)
        * 1.1;
    let axes = axes(row, time, 0.0, hi);
    frame(chart, &axes, "per-pod CPU request (cores)");
    chart.polyline(
        step_points(
            &series(steps, &axes, &|s: &LoadLine| {
                Some(s.cpu_request as f64 / 1000.0)
            }),
            Some(axes.panel.right()),
        ),
        Stroke::solid(REQUEST, 2.0),
    );
    axes
}

/// The points of field `f` of every step that has it, on `axes`.
fn series(steps: &[LoadLine], axes: &Axes, f: Field<'_>) -> Vec<(f64, f64)> {
    steps
        .iter()
        .filter_map(|s| f(s).map(|v| axes.point(s.t, v)))
        .collect()
}

/// The panel of the load and the forecast peak of the lead window, in row `row`; its axes.
fn forecast_panel(chart: &mut Chart, steps: &[LoadLine], time: &Time, row: usize) -> Axes {
    let hi = steps
        .iter()
        .flat_map(|s| [Some(s.load), s.forecast])
        .flatten()
        .fold(1.0, f64::max)
        * 1.1;
    let axes = axes(row, time, 0.0, hi);
    frame(
        chart,
        &axes,
        "CPU load (black) and forecast peak of the lead window (orange), cores",
    );
    chart.polyline(
        series(steps, &axes, &|s: &LoadLine| Some(s.load)),
        Stroke::solid(Colour::BLACK, 1.0),
    );
    chart.polyline(
        step_points(
            &series(steps, &axes, &|s: &LoadLine| s.forecast),
            Some(axes.panel.right()),
        ),
        Stroke::solid(FORECAST, 1.5),
    );
    axes
}
