//! Axes, the one way every chart layout places its panels and draws around them: a [`Grid`] of
//! equal panels on the canvas (or a [`Panel`] placed by hand), a [`Scale`] per axis from data to
//! the panel's pixels, and [`Axes`] (a panel with its two scales) that maps points and draws the
//! frame, the title, tick labels and grid lines.
//!
//! The conventions are fixed here so that the charts agree: a title sits 8 px above the panel's
//! top edge, y labels 6 px off the panel's side with their 11 px text centred on the value's
//! height, x labels 16 px below the bottom edge. A scale whose range is empty still maps (to the
//! panel's start) rather than dividing by zero, so a replay of one step draws.

use crate::envelope::{Reduced, reduce};
use crate::{Anchor, Chart, Colour, Stroke, Text, step_points};

/// How much of white a series' envelope band is mixed with (see [`Axes::series`]).
const BAND_WHITE: f64 = 0.6;

/// How far above the panel a title's baseline is.
const TITLE_RISE: f64 = 8.0;
/// How far off the panel's side a y label ends (left) or starts (right).
const Y_LABEL_GAP: f64 = 6.0;
/// Half the cap height of 11 px text: added to a value's height to centre its label on it.
const Y_LABEL_DROP: f64 = 4.0;
/// How far below the panel an x label's baseline is.
const X_LABEL_DROP: f64 = 16.0;

/// A rectangle of the canvas that data is drawn in, in pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Panel {
    /// Left edge.
    pub left: f64,
    /// Top edge.
    pub top: f64,
    /// Width.
    pub width: f64,
    /// Height.
    pub height: f64,
}

impl Panel {
    /// The right edge.
    pub fn right(&self) -> f64 {
        self.left + self.width
    }

    /// The bottom edge.
    pub fn bottom(&self) -> f64 {
        self.top + self.height
    }

    /// The horizontal middle.
    pub fn centre(&self) -> f64 {
        self.left + self.width / 2.0
    }
}

/// Equal panels in rows and columns with margins around them: the layout of a chart of
/// several panels of one size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grid {
    /// Space left of the first column (room for y labels).
    pub left: f64,
    /// Space above the first row (room for its title).
    pub top: f64,
    /// Space right of the last column.
    pub right: f64,
    /// Space below the last row (room for x labels and a legend).
    pub bottom: f64,
    /// Each panel's width.
    pub width: f64,
    /// Each panel's height.
    pub height: f64,
    /// Space between two columns.
    pub column_gap: f64,
    /// Space between two rows (the lower panel's title and the upper one's x labels).
    pub row_gap: f64,
}

impl Grid {
    /// The panel in row `row` and column `column`, both counted from 0.
    pub fn panel(&self, row: usize, column: usize) -> Panel {
        Panel {
            left: self.left + column as f64 * (self.width + self.column_gap),
            top: self.top + row as f64 * (self.height + self.row_gap),
            width: self.width,
            height: self.height,
        }
    }

    /// The canvas width for `columns` columns.
    pub fn canvas_width(&self, columns: usize) -> f64 {
        self.left + self.right + Self::span(columns, self.width, self.column_gap)
    }

    /// The canvas height for `rows` rows.
    pub fn canvas_height(&self, rows: usize) -> f64 {
        self.top + self.bottom + Self::span(rows, self.height, self.row_gap)
    }

    /// A new chart sized for `rows` × `columns` panels.
    pub fn chart(&self, rows: usize, columns: usize) -> Chart {
        Chart::new(
            self.canvas_width(columns).round() as u32,
            self.canvas_height(rows).round() as u32,
        )
    }

    fn span(n: usize, size: f64, gap: f64) -> f64 {
        let n = n.max(1) as f64;
        n * size + (n - 1.0) * gap
    }
}

/// A linear map from data values `lo`…`hi` onto a panel's extent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scale {
    lo: f64,
    hi: f64,
}

impl Scale {
    /// The range `lo`…`hi`.
    pub const fn new(lo: f64, hi: f64) -> Scale {
        Scale { lo, hi }
    }

    /// The range from 0 to `hi`.
    pub const fn to(hi: f64) -> Scale {
        Scale { lo: 0.0, hi }
    }

    /// The lowest value.
    pub fn lo(&self) -> f64 {
        self.lo
    }

    /// The highest value.
    pub fn hi(&self) -> f64 {
        self.hi
    }

    /// Where `v` lies in the range: 0 at `lo`, 1 at `hi`, beyond outside (0 for any `v` of an
    /// empty range).
    pub fn fraction(&self, v: f64) -> f64 {
        (v - self.lo) / (self.hi - self.lo).max(f64::EPSILON)
    }

    /// `intervals + 1` evenly spaced values from `lo` to `hi`, both included.
    pub fn ticks(&self, intervals: u32) -> Vec<f64> {
        let n = intervals.max(1);
        (0..=n)
            .map(|i| self.lo + (self.hi - self.lo) * f64::from(i) / f64::from(n))
            .collect()
    }
}

/// Which side of a panel a y axis's labels are on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Left of the panel, right-aligned.
    Left,
    /// Right of the panel, left-aligned.
    Right,
}

/// A panel with its x and y scales: maps data to pixels and draws the panel's furniture.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Axes {
    /// Where on the canvas.
    pub panel: Panel,
    /// The horizontal scale (usually time).
    pub x: Scale,
    /// The vertical scale.
    pub y: Scale,
}

impl Axes {
    /// `panel` with the scales `x` and `y`.
    pub const fn new(panel: Panel, x: Scale, y: Scale) -> Axes {
        Axes { panel, x, y }
    }

    /// The same panel and x scale with another y scale (a second y axis, e.g. on the right).
    #[must_use]
    pub fn with_y(self, y: Scale) -> Axes {
        Axes { y, ..self }
    }

    /// The pixel column of `t`.
    pub fn x(&self, t: f64) -> f64 {
        self.panel.left + self.x.fraction(t) * self.panel.width
    }

    /// The pixel row of `v`; values outside the scale land outside the panel.
    pub fn y(&self, v: f64) -> f64 {
        self.panel.bottom() - self.y.fraction(v) * self.panel.height
    }

    /// The pixel row of `v`, kept inside the panel (lines are cut off at its edges).
    pub fn y_clamped(&self, v: f64) -> f64 {
        self.panel.bottom() - self.y.fraction(v).clamp(0.0, 1.0) * self.panel.height
    }

    /// The pixel point of `(t, v)`.
    pub fn point(&self, t: f64, v: f64) -> (f64, f64) {
        (self.x(t), self.y(v))
    }

    /// The panel's outline.
    pub fn frame(&self, chart: &mut Chart, colour: Colour) {
        let p = self.panel;
        chart.stroke_rect(p.left, p.top, p.width, p.height, Stroke::solid(colour, 1.0));
    }

    /// A title above the panel at its left end, middle or right end (by `anchor`); style it
    /// and give it to [`Chart::text`].
    pub fn title(&self, anchor: Anchor, content: impl Into<String>) -> Text {
        let x = match anchor {
            Anchor::Start => self.panel.left,
            Anchor::Middle => self.panel.centre(),
            Anchor::End => self.panel.right(),
        };
        Text::new(x, self.panel.top - TITLE_RISE, content).anchor(anchor)
    }

    /// A text under the panel at its left end, middle or right end (by `anchor`).
    pub fn under(&self, anchor: Anchor, content: impl Into<String>) -> Text {
        let x = match anchor {
            Anchor::Start => self.panel.left,
            Anchor::Middle => self.panel.centre(),
            Anchor::End => self.panel.right(),
        };
        Text::new(x, self.panel.bottom() + X_LABEL_DROP, content).anchor(anchor)
    }

    /// The label of `v` on the y axis at `side`, centred on `v`'s height.
    pub fn y_label(&self, side: Side, v: f64, content: impl Into<String>) -> Text {
        let y = self.y_clamped(v) + Y_LABEL_DROP;
        match side {
            Side::Left => Text::new(self.panel.left - Y_LABEL_GAP, y, content).anchor(Anchor::End),
            Side::Right => Text::new(self.panel.right() + Y_LABEL_GAP, y, content),
        }
    }

    /// Labels the y axis at `side` at each of `values`, written by `format`, in `colour`.
    pub fn y_labels(
        &self,
        chart: &mut Chart,
        side: Side,
        values: &[f64],
        format: impl Fn(f64) -> String,
        colour: Colour,
    ) {
        for &v in values {
            chart.text(self.y_label(side, v, format(v)).colour(colour));
        }
    }

    /// Horizontal grid lines across the panel at each of `values`.
    pub fn y_grid(&self, chart: &mut Chart, values: &[f64], colour: Colour) {
        for &v in values {
            let y = self.y_clamped(v);
            chart.polyline(
                vec![(self.panel.left, y), (self.panel.right(), y)],
                Stroke::solid(colour, 1.0),
            );
        }
    }

    /// Labels the x axis under the panel at each of `values`, centred on each, written by
    /// `format`.
    pub fn x_labels(&self, chart: &mut Chart, values: &[f64], format: impl Fn(f64) -> String) {
        for &t in values {
            chart.text(
                Text::new(self.x(t), self.panel.bottom() + X_LABEL_DROP, format(t))
                    .anchor(Anchor::Middle),
            );
        }
    }

    /// A line at height `v` across the whole panel.
    pub fn level(&self, chart: &mut Chart, v: f64, stroke: Stroke) {
        let y = self.y(v);
        chart.polyline(vec![(self.panel.left, y), (self.panel.right(), y)], stroke);
    }
}

/// How a series runs between its points, and which value of a pixel column its line follows
/// when it is drawn as envelopes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Join {
    /// Straight segments; a column's line is the mean of its points.
    Linear,
    /// Each value holds until the next point's time and the last to the panel's right edge
    /// (replicas, a request); a column's line is its last value.
    Step,
}

/// A data series to draw on an [`Axes`]: points `(x, value)` ordered by x, in data units.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The points.
    pub points: Vec<(f64, f64)>,
    /// The line's stroke; its envelope band is the stroke's colour, lighter.
    pub stroke: Stroke,
    /// How the points are joined.
    pub join: Join,
}

impl Series {
    /// `points` drawn with `stroke`, joined by `join`.
    pub fn new(points: Vec<(f64, f64)>, stroke: Stroke, join: Join) -> Series {
        Series {
            points,
            stroke,
            join,
        }
    }
}

impl Axes {
    /// Draws `series` (values kept inside the panel). A series with more points than the
    /// panel has pixel columns is drawn as its per-column envelope ([`crate::envelope`]): the
    /// range min…max of each column as a band of vertical strokes in its lighter colour, and
    /// over it the column's mean ([`Join::Linear`]) or last value ([`Join::Step`]) as the line.
    /// Every band is drawn before every line, so no band hides another series' line.
    pub fn series(&self, chart: &mut Chart, series: Vec<Series>) {
        let columns = self.panel.width.round().max(1.0) as usize;
        let column_x =
            |i: usize| self.panel.left + (i as f64 + 0.5) * self.panel.width / columns as f64;
        let reduced: Vec<(Reduced, Stroke, Join)> = series
            .into_iter()
            .map(|s| {
                (
                    reduce(s.points, self.x.lo, self.x.hi, columns),
                    s.stroke,
                    s.join,
                )
            })
            .collect();
        for (r, stroke, _) in &reduced {
            let Reduced::Columns(cols) = r else { continue };
            let band = Stroke::solid(stroke.colour.lighter(BAND_WHITE), 1.0);
            // One zigzag polyline per run of adjacent columns: down one column, up the next.
            // A column whose band is under a pixel high is hidden by the line over it and left
            // out, which keeps the stretches where a series holds (replicas) out of the file.
            let mut run: Vec<(f64, f64)> = Vec::new();
            let mut previous: Option<usize> = None;
            for c in cols {
                let (x, top, bottom) = (
                    column_x(c.index),
                    self.y_clamped(c.max),
                    self.y_clamped(c.min),
                );
                if previous.is_none_or(|p| p + 1 != c.index) {
                    chart.polyline(std::mem::take(&mut run), band);
                }
                if bottom - top < 1.0 {
                    previous = None;
                    continue;
                }
                if run.len().is_multiple_of(4) {
                    run.extend([(x, top), (x, bottom)]);
                } else {
                    run.extend([(x, bottom), (x, top)]);
                }
                previous = Some(c.index);
            }
            chart.polyline(run, band);
        }
        for (r, stroke, join) in reduced {
            let line = match (r, join) {
                (Reduced::Points(points), join) => {
                    let pts: Vec<(f64, f64)> = points
                        .into_iter()
                        .map(|(t, v)| (self.x(t), self.y_clamped(v)))
                        .collect();
                    match join {
                        Join::Linear => pts,
                        Join::Step => step_points(&pts, Some(self.panel.right())),
                    }
                }
                (Reduced::Columns(cols), Join::Linear) => cols
                    .iter()
                    .map(|c| (column_x(c.index), self.y_clamped(c.mean)))
                    .collect(),
                (Reduced::Columns(cols), Join::Step) => {
                    let mut pts: Vec<(f64, f64)> = cols
                        .iter()
                        .map(|c| (column_x(c.index), self.y_clamped(c.last)))
                        .collect();
                    if let Some(&(_, y)) = pts.last() {
                        pts.push((self.panel.right(), y));
                    }
                    pts
                }
            };
            chart.polyline(line, stroke);
        }
    }

    /// Vertical grid lines at each of `ticks` and their labels under the panel.
    pub fn x_ticks(&self, chart: &mut Chart, ticks: &[(f64, String)], grid: Colour) {
        for (t, text) in ticks {
            let x = self.x(*t);
            chart.polyline(
                vec![(x, self.panel.top), (x, self.panel.bottom())],
                Stroke::solid(grid, 1.0),
            );
            chart.text(
                Text::new(x, self.panel.bottom() + X_LABEL_DROP, text.clone())
                    .anchor(Anchor::Middle),
            );
        }
    }

    /// Shades the x ranges `ranges` (data units, each `(from, to)`) over the panel's height,
    /// each at least one pixel wide so a short one still shows.
    pub fn shade_x(&self, chart: &mut Chart, ranges: &[(f64, f64)], fill: Colour) {
        for &(from, to) in ranges {
            let (a, b) = (
                self.x(from).max(self.panel.left),
                self.x(to).min(self.panel.right()),
            );
            if b >= a {
                chart.fill_rect(a, self.panel.top, (b - a).max(1.0), self.panel.height, fill);
            }
        }
    }
}

/// Rounds `v` up to 1, 2, 2.5 or 5 times a power of ten: an axis maximum a reader can divide.
pub fn nice_max(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if v <= m * mag {
            return m * mag;
        }
    }
    10.0 * mag
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values are equal to well within a pixel's rounding.
    fn near(got: &[f64], want: &[f64]) -> bool {
        got.len() == want.len() && got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-9)
    }

    fn pt((x, y): (f64, f64)) -> [f64; 2] {
        [x, y]
    }

    const PANEL: Panel = Panel {
        left: 70.0,
        top: 40.0,
        width: 800.0,
        height: 240.0,
    };

    #[test]
    fn scales_map_the_range_onto_the_panel_and_flip_y() {
        let axes = Axes::new(PANEL, Scale::new(100.0, 500.0), Scale::to(10.0));
        assert!(
            near(&pt(axes.point(100.0, 0.0)), &[70.0, 280.0]),
            "bottom left"
        );
        assert!(
            near(&pt(axes.point(500.0, 10.0)), &[870.0, 40.0]),
            "top right"
        );
        assert!(
            near(&[axes.x(300.0), axes.y(20.0)], &[470.0, -200.0]),
            "unclamped beyond the top"
        );
        assert!(near(
            &[axes.y_clamped(20.0), axes.y_clamped(-5.0)],
            &[40.0, 280.0]
        ));
    }

    #[test]
    fn an_empty_range_maps_to_the_start_instead_of_dividing_by_zero() {
        let axes = Axes::new(PANEL, Scale::new(5.0, 5.0), Scale::new(0.0, 0.0));
        assert!(near(&pt(axes.point(5.0, 0.0)), &[70.0, 280.0]));
        assert!(axes.x(6.0).is_finite());
    }

    #[test]
    fn a_grid_places_panels_and_sizes_the_canvas() {
        let grid = Grid {
            left: 50.0,
            top: 50.0,
            right: 50.0,
            bottom: 50.0,
            width: 460.0,
            height: 220.0,
            column_gap: 100.0,
            row_gap: 100.0,
        };
        let p = grid.panel(1, 1);
        assert!(near(&[p.left, p.top], &[610.0, 370.0]));
        let chart = grid.chart(2, 2);
        assert_eq!((chart.width(), chart.height()), (1120, 640));
        assert!(
            near(&[grid.canvas_height(0)], &[grid.canvas_height(1)]),
            "room for one row at least"
        );
    }

    #[test]
    fn ticks_include_both_ends() {
        assert!(near(&Scale::to(10.0).ticks(4), &[0.0, 2.5, 5.0, 7.5, 10.0]));
        assert!(near(&Scale::new(1.0, 2.0).ticks(0), &[1.0, 2.0]));
    }

    #[test]
    fn labels_sit_by_their_values_and_titles_above_the_panel() {
        let axes = Axes::new(PANEL, Scale::to(1.0), Scale::to(100.0));
        let mut chart = Chart::new(900, 400);
        axes.frame(&mut chart, Colour::BLACK);
        chart.text(axes.title(Anchor::Start, "t<1>"));
        axes.y_labels(
            &mut chart,
            Side::Left,
            &[0.0, 100.0],
            crate::label,
            Colour::BLACK,
        );
        axes.y_labels(
            &mut chart,
            Side::Right,
            &[50.0],
            crate::label,
            Colour::BLACK,
        );
        axes.y_grid(&mut chart, &Scale::to(100.0).ticks(2), Colour::WHITE);
        axes.x_labels(&mut chart, &[0.5], |t| format!("{t}s"));
        let svg = chart.to_svg();
        assert!(svg.contains(r#"x="70" y="32""#), "title 8 px above: {svg}");
        assert!(
            svg.contains(r#"x="64" y="284" "#),
            "lowest label by the bottom: {svg}"
        );
        assert!(
            svg.contains(r#"x="64" y="44" "#),
            "highest label by the top: {svg}"
        );
        assert!(
            svg.contains(r#"x="876" y="164" "#),
            "right label at the middle: {svg}"
        );
        assert!(
            svg.contains(r#"x="470" y="296" "#),
            "x label under its time: {svg}"
        );
        assert!(svg.contains("t&lt;1&gt;"));
        assert_eq!(
            svg.matches("<polyline").count(),
            3,
            "one grid line per tick"
        );
    }

    /// Each polyline's point count, in drawing order.
    fn polyline_lengths(chart: &Chart) -> Vec<usize> {
        chart
            .to_svg()
            .lines()
            .filter_map(|l| l.strip_prefix(r#"<polyline points=""#))
            .map(|l| l.split('"').next().unwrap_or_default().split(' ').count())
            .collect()
    }

    #[test]
    fn a_series_of_few_points_is_drawn_point_by_point() {
        let axes = Axes::new(PANEL, Scale::to(10.0), Scale::to(10.0));
        let mut chart = Chart::new(900, 400);
        let points = vec![(0.0, 1.0), (5.0, 3.0), (10.0, 2.0)];
        axes.series(
            &mut chart,
            vec![
                Series::new(
                    points.clone(),
                    Stroke::solid(Colour::BLACK, 1.0),
                    Join::Linear,
                ),
                Series::new(points, Stroke::solid(Colour::BLACK, 1.0), Join::Step),
            ],
        );
        // The line through 3 points; the step line jumps at 2 and holds to the right edge.
        assert_eq!(polyline_lengths(&chart), [3, 6]);
    }

    #[test]
    fn a_series_of_more_points_than_pixels_is_a_band_under_one_line_per_column() {
        let axes = Axes::new(PANEL, Scale::to(10_000.0), Scale::to(10.0));
        let mut chart = Chart::new(900, 400);
        let points: Vec<(f64, f64)> = (0..10_000)
            .map(|i| (f64::from(i), f64::from(i % 10)))
            .collect();
        axes.series(
            &mut chart,
            vec![Series::new(
                points,
                Stroke::solid(Colour::BLACK, 2.0),
                Join::Step,
            )],
        );
        // 800 columns: a band of two points each, then a line of one each and the right edge.
        assert_eq!(polyline_lengths(&chart), [1_600, 801]);
        let svg = chart.to_svg();
        assert!(
            svg.contains(r##"stroke="#999999" stroke-width="1""##),
            "the band is the line's black, lighter"
        );
        // Every column spans the whole range 0…9: from y(9) to y(0).
        assert!(svg.contains("70.5,64 70.5,280 71.5,280 71.5,64"));

        // A series that holds for a stretch has no band there: only the line.
        let points: Vec<(f64, f64)> = (0..10_000)
            .map(|i| {
                (
                    f64::from(i),
                    if i < 5_000 { 5.0 } else { f64::from(i % 10) },
                )
            })
            .collect();
        let mut chart = Chart::new(900, 400);
        axes.series(
            &mut chart,
            vec![Series::new(
                points,
                Stroke::solid(Colour::BLACK, 2.0),
                Join::Linear,
            )],
        );
        assert_eq!(
            polyline_lengths(&chart),
            [800, 800],
            "band over the second half only"
        );
    }

    #[test]
    fn x_ticks_draw_a_grid_line_and_a_label_each_and_shades_stay_inside() {
        let axes = Axes::new(PANEL, Scale::new(100.0, 200.0), Scale::to(1.0));
        let mut chart = Chart::new(900, 400);
        axes.x_ticks(&mut chart, &[(150.0, "day 1".into())], Colour::WHITE);
        axes.shade_x(&mut chart, &[(50.0, 120.0), (199.99, 300.0)], Colour::BLACK);
        let svg = chart.to_svg();
        assert!(
            svg.contains(r#"<polyline points="470,40 470,280""#),
            "{svg}"
        );
        assert!(
            svg.contains(r#"x="470" y="296" font-size="11" text-anchor="middle">day 1<"#),
            "{svg}"
        );
        assert!(
            svg.contains(r#"<rect x="70" y="40" width="160" height="240""#),
            "{svg}"
        );
        assert!(
            svg.contains(r#"<rect x="869.9" y="40" width="1" height="240""#),
            "at least a pixel: {svg}"
        );
    }

    #[test]
    fn nice_maxima() {
        assert!((nice_max(7.0) - 10.0).abs() < 1e-9);
        assert!((nice_max(180.0) - 200.0).abs() < 1e-9);
        assert!((nice_max(1800.0) - 2000.0).abs() < 1e-9);
        assert!((nice_max(0.0) - 1.0).abs() < 1e-9, "no data: a unit axis");
    }
}
