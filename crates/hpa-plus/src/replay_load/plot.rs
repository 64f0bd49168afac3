//! `--plot` of a `LoadReplay`: replicas, Ready replicas and the `minReplicas` in force (top
//! panel), and the utilization of the Ready pods' CPU requests (bottom panel), over time.

use plimsoll_replay::plot::{Chart, Colour, Stroke, step_points};

use super::LoadLine;
use crate::plot::{Axis, GAP, HEIGHT, PANEL, RIGHT, TOP, WIDTH, frame, y};

const READY: Colour = Colour::hex(0x2c_a0_2c);
const MIN: Colour = Colour::hex(0xd6_27_28);
const UTILIZATION: Colour = Colour::hex(0x1f_77_b4);

/// The chart of a `LoadReplay`.
pub fn chart(steps: &[LoadLine]) -> Chart {
    let mut chart = Chart::new(WIDTH as u32, HEIGHT as u32);
    let axis = Axis::spanning(steps.iter().map(|s| s.t));
    let series = |f: &dyn Fn(&LoadLine) -> Option<f64>, hi: f64, top: f64| -> Vec<(f64, f64)> {
        steps
            .iter()
            .filter_map(|s| f(s).map(|v| (axis.x(s.t), y(v, 0.0, hi, top))))
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
        0.0,
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
        0.0,
        hi,
    );
    chart.polyline(
        series(&|s: &LoadLine| s.utilization, hi, bottom),
        Stroke::solid(UTILIZATION, 1.5),
    );
    axis.label(&mut chart, bottom);
    chart
}
