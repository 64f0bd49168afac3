//! `--plot FILE.svg|FILE.png`: a chart of a replay: replicas over time (top panel) and each
//! metric's value with its target or watermarks (bottom panel, one colour per metric).
//!
//! The scene is built once as a [`Chart`] and rendered by the file's extension. Values are
//! scaled to the panel; the target and watermarks are dashed step lines of the metric's colour.
//! The layout (`LAYOUT`, the time axis, panel frames) is shared with the `LoadReplay` plot;
//! scales, labels and frames are `plimsoll_plot`'s axes.

use plimsoll_core::horizontal::MetricOutcome;
use plimsoll_replay::plot::{
    Anchor, Axes, Chart, Colour, Grid, Scale, Side, Stroke, Text, TimeTicks, label, step_points,
    time_ticks,
};

use plimsoll_replay::ReplayError;
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
/// The time grid's vertical lines: visible behind the data, never mistaken for it.
const GRID: Colour = Colour::hex(0xe4_e4_e4);

/// The time axis shared by the panels: from the first step's time to the last's (at least
/// 1 s wide; 0…1 when there are no steps), or the window of `--from`/`--to`; and its ticks
/// (seconds, minutes, or days and hours of day, by the span: [`time_ticks`]).
#[derive(Clone)]
pub(crate) struct Time {
    scale: Scale,
    ticks: TimeTicks,
}

/// The fewest pixels between two time labels (`day 13`, `12:00` and their gap).
const PIXELS_PER_TICK: f64 = 50.0;

impl Time {
    /// The axis over steps at times `times`, in order.
    pub(crate) fn spanning(mut times: impl DoubleEndedIterator<Item = f64>) -> Time {
        let Some(first) = times.next() else {
            return Time::window(0.0, 1.0);
        };
        let last = times.next_back().unwrap_or(first);
        Time::window(first, last.max(first + 1.0))
    }

    /// The axis from `from` to `to` seconds.
    pub(crate) fn window(from: f64, to: f64) -> Time {
        let most = (LAYOUT.width / PIXELS_PER_TICK) as usize;
        Time {
            scale: Scale::new(from, to),
            ticks: time_ticks(from, to, most),
        }
    }

    /// `t` kept on the axis (a step that began before the window is drawn from its start).
    pub(crate) fn clamp(&self, t: f64) -> f64 {
        t.clamp(self.scale.lo(), self.scale.hi())
    }

    /// What the tick labels count, centred under `axes` (the lowest panel), below its ticks.
    pub(crate) fn label(&self, chart: &mut Chart, axes: &Axes) {
        chart.text(
            Text::new(
                axes.panel.centre(),
                axes.panel.bottom() + CAPTION_DROP,
                self.ticks.caption,
            )
            .anchor(Anchor::Middle),
        );
    }
}

/// How far below the lowest panel the time axis's caption is (under the tick labels).
const CAPTION_DROP: f64 = 34.0;
/// How far below the lowest panel a legend is (under the caption).
pub(crate) const LEGEND_DROP: f64 = 52.0;

/// The axes of the panel in row `row`, over `time`, with values from `lo` to `hi`.
pub(crate) fn axes(row: usize, time: &Time, lo: f64, hi: f64) -> Axes {
    Axes::new(LAYOUT.panel(row, 0), time.scale, Scale::new(lo, hi))
}

/// A panel's outline, its time grid with the tick labels under it, its title above, and its
/// lowest and highest values at the left.
pub(crate) fn frame(chart: &mut Chart, axes: &Axes, time: &Time, title: &str) {
    axes.x_ticks(chart, &time.ticks.ticks, GRID);
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

/// `--from`/`--to` of `replay --plot`: the span of a `LoadReplay` to draw, seconds since its
/// start ([`parse_time`] reads them). The output is the whole replay either way.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PlotWindow {
    /// Draw from this time on; unset, from the replay's start.
    pub from: Option<f64>,
    /// Draw up to this time; unset, to the replay's end.
    pub to: Option<f64>,
}

impl PlotWindow {
    /// Either flag was given.
    pub fn is_set(&self) -> bool {
        self.from.is_some() || self.to.is_some()
    }

    /// The window within a replay from `start` to `end` seconds (`None` when neither flag was
    /// given); a `--from` not before `--to`, or a time past the end, is an error that names
    /// its flag.
    pub fn within(&self, start: f64, end: f64) -> Result<Option<(f64, f64)>, ReplayError> {
        if !self.is_set() {
            return Ok(None);
        }
        let (from, to) = (self.from.unwrap_or(start), self.to.unwrap_or(end));
        let day = |t: f64| format!("{t} s, {}", day_and_hour(t));
        if let Some(from) = self.from
            && from >= end
        {
            return Err(ReplayError::invalid(
                "--from",
                format!(
                    "{} is at or past the replay's end ({})",
                    day(from),
                    day(end)
                ),
            ));
        }
        if let Some(to) = self.to
            && to > end
        {
            return Err(ReplayError::invalid(
                "--to",
                format!("{} is past the replay's end ({})", day(to), day(end)),
            ));
        }
        if from >= to {
            return Err(if self.from.is_none() {
                ReplayError::invalid(
                    "--to",
                    format!(
                        "{} is not after the replay's start ({})",
                        day(to),
                        day(start)
                    ),
                )
            } else {
                ReplayError::invalid(
                    "--from",
                    format!("{} is not before --to ({})", day(from), day(to)),
                )
            });
        }
        Ok(Some((from, to)))
    }
}

/// `day N hh:mm` of `t` seconds, as the time axis counts.
fn day_and_hour(t: f64) -> String {
    let minutes = (t / 60.0).floor() as i64;
    format!(
        "day {} {:02}:{:02}",
        minutes.div_euclid(1_440),
        minutes.rem_euclid(1_440) / 60,
        minutes.rem_euclid(60)
    )
}

/// The units of a `--from`/`--to` time, in the order they are written.
const UNITS: [(char, f64); 4] = [('d', 86_400.0), ('h', 3_600.0), ('m', 60.0), ('s', 1.0)];

/// A `--from`/`--to` time: seconds (`3600`, `90.5`), or whole numbers of days, hours, minutes
/// and seconds in that order (`6d`, `6d12h`, `36h`, `90m`, `1h30m`, `45s`).
pub fn parse_time(text: &str) -> Result<f64, String> {
    let bad = || {
        format!(
            "{text:?} is not a time: seconds (3600) or days, hours, minutes, seconds in that \
             order (6d, 6d12h, 36h, 90m)"
        )
    };
    let s = text.trim();
    if let Ok(seconds) = s.parse::<f64>() {
        return if seconds.is_finite() && seconds >= 0.0 {
            Ok(seconds)
        } else {
            Err(bad())
        };
    }
    let mut rest = s;
    let mut next_unit = 0;
    let mut total = 0.0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let n: u32 = rest[..digits].parse().map_err(|_| bad())?;
        let unit = rest[digits..].chars().next().ok_or_else(bad)?;
        let at = UNITS[next_unit..]
            .iter()
            .position(|(u, _)| *u == unit)
            .ok_or_else(bad)?;
        total += f64::from(n) * UNITS[next_unit + at].1;
        next_unit += at + 1;
        rest = &rest[digits + unit.len_utf8()..];
    }
    if s.is_empty() { Err(bad()) } else { Ok(total) }
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
    let axes = axes(0, time, 0.0, (f64::from(max_r) * 1.1).ceil());
    frame(chart, &axes, time, "replicas");
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
    frame(chart, &axes, time, "metric value, target and watermarks");
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
        // The legend, under the time axis's caption.
        chart.text(
            Text::new(
                axes.panel.left + 10.0 + 180.0 * i as f64,
                axes.panel.bottom() + LEGEND_DROP,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_seconds_or_days_hours_minutes_and_seconds_in_order() {
        for (text, seconds) in [
            ("3600", 3_600.0),
            ("90.5", 90.5),
            ("6d", 518_400.0),
            ("6d12h", 561_600.0),
            ("36h", 129_600.0),
            ("90m", 5_400.0),
            ("1h30m15s", 5_415.0),
            (" 0d ", 0.0),
        ] {
            assert_eq!(parse_time(text), Ok(seconds), "{text}");
        }
        for text in [
            "", "d", "6", "-5", "1.5h", "12h6d", "6d6d", "6x", "6d12", "inf", "NaN",
        ] {
            if text == "6" {
                continue; // bare seconds
            }
            let err = parse_time(text).unwrap_err();
            assert!(err.contains("is not a time"), "{text}: {err}");
        }
    }

    #[test]
    fn a_window_must_lie_within_the_replay_and_each_error_names_its_flag() {
        let window =
            |from: Option<f64>, to: Option<f64>| PlotWindow { from, to }.within(0.0, 1_209_600.0);
        assert_eq!(window(None, None).unwrap(), None);
        assert_eq!(
            window(Some(691_200.0), Some(777_600.0)).unwrap(),
            Some((691_200.0, 777_600.0))
        );
        assert_eq!(
            window(Some(86_400.0), None).unwrap(),
            Some((86_400.0, 1_209_600.0))
        );
        assert_eq!(
            window(None, Some(1_209_600.0)).unwrap(),
            Some((0.0, 1_209_600.0)),
            "to the end"
        );
        for (from, to, flag, says) in [
            (
                Some(777_600.0),
                Some(691_200.0),
                "--from",
                "is not before --to",
            ),
            (
                Some(86_400.0),
                Some(86_400.0),
                "--from",
                "is not before --to",
            ),
            (
                Some(1_728_000.0),
                None,
                "--from",
                "at or past the replay's end",
            ),
            (None, Some(1_728_000.0), "--to", "past the replay's end"),
            (None, Some(0.0), "--to", "not after the replay's start"),
        ] {
            let err = window(from, to).unwrap_err().to_string();
            assert!(
                err.contains(&format!("{flag}: ")) && err.contains(says),
                "{from:?} {to:?}: {err}"
            );
        }
        let err = window(Some(1_728_000.0), None).unwrap_err().to_string();
        assert!(
            err.contains("day 20 00:00") && err.contains("day 14 00:00"),
            "{err}"
        );
    }
}
