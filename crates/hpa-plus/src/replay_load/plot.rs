//! `--plot` of a `LoadReplay`: replicas, Ready replicas and the `minReplicas` in force (top
//! panel), and the utilization of the Ready pods' CPU requests against the HPA+'s target and a
//! ±50 % band around it (middle panel), over time. With `spec.predictive` on, the top panel adds
//! the replicas a confident forecast needs, and a panel shows the trace's CPU load with the
//! forecast peak of the lead window. With a `vpa`, a panel shows the CPU load (unless the
//! forecast panel already does) and a last one the CPU request new pods get.
//!
//! Made to be read on a trace of weeks: the time axis counts days and hours of day on a long
//! span ([`crate::plot::Time`]); `--from`/`--to` draw only a window of the replay; a series of
//! more steps than the panel has pixels is drawn as per-pixel min…max envelopes with the mean
//! or last value as the line ([`Axes::series`]); overloaded steps (the report's
//! [`summary::overloaded`]) are shaded in every panel; and the utilization axis always reaches
//! 1.6 × the target, so the target and its band show, with values above the axis marked in a
//! strip at its top instead of being lost.

use plimsoll_replay::plot::{Axes, Chart, Colour, Join, Series, Stroke, Text};

use super::{LoadLine, summary};
use crate::plot::{LAYOUT, LEGEND_DROP, Time, axes, frame};

const READY: Colour = Colour::hex(0x2c_a0_2c);
const MIN: Colour = Colour::hex(0xd6_27_28);
const UTILIZATION: Colour = Colour::hex(0x1f_77_b4);
const FORECAST: Colour = Colour::hex(0xff_7f_0e);
const REQUEST: Colour = Colour::hex(0x94_67_bd);
const BAND: Colour = Colour::hex(0x55_55_55);
/// The ±50 % band behind the utilization.
const BAND_FILL: Colour = Colour::hex(0xe6_f2_e6);
/// The shade of overloaded steps, behind everything.
const OVERLOADED: Colour = Colour::hex(0xfb_d5_d5);
/// The marks of overloaded steps along the bottom of every panel.
const OVERLOADED_MARK: Colour = Colour::hex(0xc0_39_2b);
/// The marks of utilization above the axis, along the top of its panel.
const ABOVE: Colour = Colour::hex(0x7b_1f_a2);
/// The height of a strip of marks, pixels.
const MARK: f64 = 5.0;
/// The utilization axis reaches at least this many times the target (the band's top is 1.5 ×).
const TARGET_HEADROOM: f64 = 1.6;
/// ... and at most this many times the target: a start far off the target would flatten the
/// rest; higher values are marked in the strip.
const TARGET_CEILING: f64 = 3.0;

/// A value of a step, when it has one.
type Field<'a> = &'a dyn Fn(&LoadLine) -> Option<f64>;

/// The chart of a `LoadReplay`; `vertical` when it has a `vpa`; `window` (`--from`, `--to`,
/// seconds, already checked against the replay) draws only that span.
pub fn chart(steps: &[LoadLine], vertical: bool, window: Option<(f64, f64)>) -> Chart {
    let predictive = steps.iter().any(|s| s.predictive.is_some());
    let extra =
        usize::from(predictive) + 2 * usize::from(vertical) - usize::from(vertical && predictive);
    let (time, steps) = match window {
        Some((from, to)) => (Time::window(from, to), visible(steps, from, to)),
        None => (Time::spanning(steps.iter().map(|s| s.t)), steps),
    };
    let mut scene = Scene {
        chart: LAYOUT.chart(2 + extra, 1),
        steps,
        overloaded: runs(steps, &summary::overloaded),
        time,
    };
    scene.replicas(predictive);
    let (middle, hi, above) = scene.utilization();
    let mut last = middle;
    let mut row = 1;
    if predictive {
        row += 1;
        let hi = steps
            .iter()
            .flat_map(|s| [Some(s.load), s.forecast])
            .flatten()
            .fold(1.0, f64::max)
            * 1.1;
        last = scene.panel(
            row,
            hi,
            "CPU load (black) and forecast peak of the lead window (orange), cores",
        );
        let lines = vec![
            scene.load_line(),
            scene.line(&|s| s.forecast, Stroke::solid(FORECAST, 1.5), Join::Step),
        ];
        last.series(&mut scene.chart, lines);
    }
    if vertical {
        if !predictive {
            row += 1;
            let hi = steps.iter().map(|s| s.load).fold(1.0, f64::max) * 1.1;
            let axes = scene.panel(row, hi, "CPU load, all pods together (cores)");
            let lines = vec![scene.load_line()];
            axes.series(&mut scene.chart, lines);
        }
        row += 1;
        let cores = |s: &LoadLine| Some(s.cpu_request as f64 / 1000.0);
        let hi = steps.iter().filter_map(cores).fold(0.1, f64::max) * 1.1;
        last = scene.panel(row, hi, "per-pod CPU request (cores)");
        let lines = vec![scene.line(&cores, Stroke::solid(REQUEST, 2.0), Join::Step)];
        last.series(&mut scene.chart, lines);
    }
    let Scene {
        mut chart,
        time,
        overloaded,
        ..
    } = scene;
    time.label(&mut chart, &last);
    legend(&mut chart, &last, !overloaded.is_empty(), above, hi);
    chart
}

/// A chart being drawn: the steps shown, their time axis and their overloaded runs.
struct Scene<'a> {
    chart: Chart,
    steps: &'a [LoadLine],
    time: Time,
    /// The time ranges of runs of overloaded steps.
    overloaded: Vec<(f64, f64)>,
}

impl Scene<'_> {
    /// The panel in row `row` from 0 to `hi`, with the overloaded runs shaded behind its grid,
    /// its frame and title; its axes.
    fn panel(&mut self, row: usize, hi: f64, title: &str) -> Axes {
        let axes = axes(row, &self.time, 0.0, hi);
        axes.shade_x(&mut self.chart, &self.overloaded, OVERLOADED);
        // A mark along the bottom too: a run of one step on a two-week axis is under a pixel
        // wide, and a pale pixel is easily missed.
        let bottom = axes.panel.bottom() - MARK;
        strip(
            &mut self.chart,
            &axes,
            &self.overloaded,
            bottom,
            OVERLOADED_MARK,
        );
        frame(&mut self.chart, &axes, &self.time, title);
        axes
    }

    /// Field `f` of every step that has it, as a series.
    fn line(&self, f: Field<'_>, stroke: Stroke, join: Join) -> Series {
        let points = self
            .steps
            .iter()
            .filter_map(|s| f(s).map(|v| (self.time.clamp(s.t), v)))
            .collect();
        Series::new(points, stroke, join)
    }

    /// The trace's CPU load as a series.
    fn load_line(&self) -> Series {
        self.line(
            &|s| Some(s.load),
            Stroke::solid(Colour::BLACK, 1.0),
            Join::Linear,
        )
    }

    /// The top panel: replicas, Ready replicas, `minReplicas` and, with prediction, the
    /// predicted replicas.
    fn replicas(&mut self, predictive: bool) {
        let most = self
            .steps
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
        let title = if predictive {
            "replicas (black), ready (green), minReplicas (red), predicted (orange)"
        } else {
            "replicas (black), ready (green), minReplicas (red)"
        };
        let top = self.panel(0, (f64::from(most) * 1.1).ceil(), title);
        let mut lines = vec![
            self.line(
                &|s| Some(f64::from(s.replicas)),
                Stroke::solid(Colour::BLACK, 2.0),
                Join::Step,
            ),
            self.line(
                &|s| Some(f64::from(s.ready_replicas)),
                Stroke::solid(READY, 1.0),
                Join::Step,
            ),
            self.line(
                &|s| Some(f64::from(s.min_replicas)),
                Stroke::dashed(MIN, 1.5, 6.0, 4.0),
                Join::Step,
            ),
        ];
        if predictive {
            lines.push(self.line(
                &|s| s.predicted_replicas.map(f64::from),
                Stroke::dashed(FORECAST, 1.5, 3.0, 3.0),
                Join::Step,
            ));
        }
        top.series(&mut self.chart, lines);
    }

    /// The utilization panel, with the target, its ±50 % band and the marks of steps above
    /// the axis; its axes, the axis's top and whether any step was above it.
    fn utilization(&mut self) -> (Axes, f64, bool) {
        let target = self.steps.iter().find_map(|s| s.target).map(f64::from);
        let hi = utilization_max(self.steps, target);
        let title = if target.is_some() {
            "utilization of the Ready pods' CPU requests (%), target (dashed), ±50 % (shaded)"
        } else {
            "utilization of the Ready pods' CPU requests (%)"
        };
        if let Some(t) = target {
            // First: the overload shade covers it where steps were overloaded; the band's
            // dotted edges are drawn over everything.
            let band = axes(1, &self.time, 0.0, hi);
            let (upper, lower) = (band.y_clamped(t * 1.5), band.y_clamped(t * 0.5));
            let p = band.panel;
            self.chart
                .fill_rect(p.left, upper, p.width, lower - upper, BAND_FILL);
        }
        let middle = self.panel(1, hi, title);
        let lines = vec![self.line(
            &|s| s.utilization,
            Stroke::solid(UTILIZATION, 1.5),
            Join::Linear,
        )];
        middle.series(&mut self.chart, lines);
        if let Some(t) = target {
            // Over the utilization: the target must stay visible however busy the trace is.
            for (v, stroke) in [
                (t, Stroke::dashed(BAND, 1.5, 6.0, 4.0)),
                (t * 0.5, Stroke::dashed(BAND, 1.0, 2.0, 3.0)),
                (t * 1.5, Stroke::dashed(BAND, 1.0, 2.0, 3.0)),
            ] {
                middle.level(&mut self.chart, v, stroke);
            }
        }
        let above = runs(self.steps, &|s| s.utilization.is_some_and(|u| u > hi));
        strip(&mut self.chart, &middle, &above, middle.panel.top, ABOVE);
        (middle, hi, !above.is_empty())
    }
}

/// What the shades and marks mean, under the caption of the lowest panel `axes`; only those
/// that were drawn.
fn legend(chart: &mut Chart, axes: &Axes, overloaded: bool, above: bool, hi: f64) {
    let mut parts = Vec::new();
    if overloaded {
        parts.push(format!(
            "red: overloaded steps (peak utilization > {} × target)",
            summary::OVERLOAD_FACTOR
        ));
    }
    if above {
        parts.push(format!("purple: utilization above {hi:.0} %"));
    }
    if !parts.is_empty() {
        chart.text(
            Text::new(
                axes.panel.left,
                axes.panel.bottom() + LEGEND_DROP,
                parts.join("; "),
            )
            .colour(OVERLOADED_MARK),
        );
    }
}

/// Marks `MARK` pixels high from `top` on `axes` over each of `ranges`, at least 2 px wide.
fn strip(chart: &mut Chart, axes: &Axes, ranges: &[(f64, f64)], top: f64, colour: Colour) {
    for &(from, to) in ranges {
        let (a, b) = (
            axes.x(from).max(axes.panel.left),
            axes.x(to).min(axes.panel.right()),
        );
        if b >= a {
            chart.fill_rect(a, top, (b - a).max(2.0), MARK, colour);
        }
    }
}

/// The top of the utilization axis: what the steps reach, at least 1.6 × the target (so the
/// target and its band always show) and at most 3 × (100 % and 300 % without a target), plus
/// 5 % headroom, rounded up to 10 %.
fn utilization_max(steps: &[LoadLine], target: Option<f64>) -> f64 {
    let reached = steps
        .iter()
        .filter_map(|s| s.utilization)
        .fold(0.0, f64::max);
    let hi = match target {
        Some(t) => reached.min(t * TARGET_CEILING).max(t * TARGET_HEADROOM),
        None => reached.clamp(100.0, 300.0),
    };
    // Up to a multiple of 10 %, a label a reader takes in at a glance.
    (hi * 1.05 / 10.0).ceil() * 10.0
}

/// The steps drawn in the window `from`…`to`: those that begin in it, and the one in progress
/// at `from` (drawn from `from`, so lines start at the panel's left edge).
fn visible(steps: &[LoadLine], from: f64, to: f64) -> &[LoadLine] {
    let start = steps.partition_point(|s| s.t <= from).saturating_sub(1);
    let end = steps.partition_point(|s| s.t <= to).max(start);
    &steps[start..end]
}

/// The time ranges of runs of consecutive steps that `pick` picks, each from its first step's
/// start to its last step's end.
fn runs(steps: &[LoadLine], pick: &dyn Fn(&LoadLine) -> bool) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut open = false;
    for s in steps {
        if pick(s) {
            match out.last_mut() {
                Some(run) if open => run.1 = s.t + s.seconds,
                _ => out.push((s.t, s.t + s.seconds)),
            }
            open = true;
        } else {
            open = false;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::replay_load::{LoadReplay, replay_load_str};

    /// Three days of 5-minute steps (864, more than the panel's 800 pixels): 1 core, and 10
    /// cores for an hour from day 1 12:00, which overloads the 2 pods running then.
    fn three_days() -> LoadReplay {
        let cpu: Vec<&str> = (0..864)
            .map(|i| if (432..444).contains(&i) { "10" } else { "1" })
            .collect();
        let text = format!(
            "kind: LoadReplay
autoscaler:
  apiVersion: autoscaling.plimsoll.dev/v1alpha1
  kind: HorizontalPodAutoscalerPlus
  metadata: {{name: web}}
  spec:
    scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}
    minReplicas: 1
    maxReplicas: 20
    metrics: [{{type: Resource, resource: {{name: cpu, target: {{type: Utilization, averageUtilization: 50}}}}}}]
containers: [{{name: app, requests: {{cpu: '1'}}}}]
podStartupSeconds: 600
stepSeconds: 300
load:
  cpu: [{}]
",
            cpu.join(", ")
        );
        replay_load_str(&text, Path::new(".")).unwrap()
    }

    /// The overload shade's fill, as the SVG writes it.
    const SHADE: &str = r##"fill="#fbd5d5""##;

    /// Each polyline's points.
    fn polylines(svg: &str) -> Vec<Vec<(f64, f64)>> {
        svg.lines()
            .filter_map(|l| l.strip_prefix(r#"<polyline points=""#))
            .map(|l| {
                l.split('"')
                    .next()
                    .unwrap()
                    .split(' ')
                    .map(|p| {
                        let (x, y) = p.split_once(',').unwrap();
                        (x.parse().unwrap(), y.parse().unwrap())
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn three_days_are_labelled_by_day_drawn_as_envelopes_and_overloads_are_shaded() {
        let r = three_days();
        assert_eq!(r.steps.len(), 864);
        assert!(
            r.steps.iter().any(summary::overloaded),
            "the hour at 10 cores"
        );
        let svg = chart(&r.steps, false, None).to_svg();
        for day in ["day 0", "day 1", "day 2"] {
            assert!(svg.contains(&format!(">{day}</text>")), "{day}");
        }
        assert!(!svg.contains("t (s)"));
        assert!(svg.contains("day N = N × 24 h"), "the caption");
        // A step line through 864 steps has 1,729 points; a column's band has 2, its line 1.
        let longest = polylines(&svg).iter().map(Vec::len).max().unwrap();
        assert!(longest <= 2 * 800 + 1, "{longest} points in one polyline");
        assert!(svg.contains(SHADE), "overloaded steps shaded");
        assert!(svg.contains("red: overloaded steps (peak utilization &gt; 1.5 × target)"));
        assert!(svg.contains(r##"height="5" fill="#c0392b""##), "the marks");
    }

    #[test]
    fn a_window_draws_only_its_span_with_hours_of_day() {
        let r = three_days();
        let svg = chart(&r.steps, false, Some((86_400.0, 2.0 * 86_400.0))).to_svg();
        for label in ["day 1", "12:00", "day 2"] {
            assert!(svg.contains(&format!(">{label}</text>")), "{label}");
        }
        assert!(!svg.contains(">day 0<"));
        let (left, right) = (LAYOUT.left, LAYOUT.left + LAYOUT.width);
        for line in polylines(&svg) {
            for (x, _) in line {
                assert!(
                    (left - 0.5..=right + 0.5).contains(&x),
                    "x {x} off the panel"
                );
            }
        }
        assert!(svg.contains(SHADE), "the overload is in day 1");
        let svg = chart(&r.steps, false, Some((2.0 * 86_400.0, 3.0 * 86_400.0))).to_svg();
        assert!(!svg.contains(SHADE), "none on day 2");
    }

    #[test]
    fn the_utilization_axis_always_shows_the_band_and_marks_what_is_above() {
        let mut r = three_days();
        let target = Some(50.0);
        for s in &mut r.steps {
            s.utilization = Some(20.0);
        }
        assert!(
            (utilization_max(&r.steps, target) - 90.0).abs() < 1e-9,
            "1.6 × 50 → 84 → 90"
        );
        assert!((utilization_max(&r.steps, None) - 110.0).abs() < 1e-9);
        r.steps[5].utilization = Some(900.0);
        let hi = utilization_max(&r.steps, target);
        assert!((hi - 160.0).abs() < 1e-9, "at most 3 × the target: {hi}");
        let svg = chart(&r.steps, false, None).to_svg();
        assert!(svg.contains(r##"height="5" fill="#7b1fa2""##));
        assert!(svg.contains("purple: utilization above 160 %"));
    }

    #[test]
    fn the_window_keeps_the_step_in_progress_and_runs_join_consecutive_steps() {
        let r = three_days();
        let shown = visible(&r.steps, 1_000.0, 2_000.0);
        let times: Vec<f64> = shown.iter().map(|s| s.t).collect();
        assert_eq!(times, [900.0, 1_200.0, 1_500.0, 1_800.0]);
        let picked = runs(&r.steps, &|s| {
            (3..5).contains(&((s.t / 300.0) as i32)) || (s.t - 3_000.0).abs() < 1.0
        });
        assert_eq!(picked, [(900.0, 1_500.0), (3_000.0, 3_300.0)]);
    }
}
