//! A small drawing layer for `replay --plot` and the demo: a [`Chart`] is a list of primitives
//! in pixel coordinates (filled and stroked rectangles, solid or dashed polylines, circles,
//! anchored text) rendered either as SVG ([`Chart::to_svg`]) or as PNG ([`Chart::to_png`]).
//!
//! Every caller builds its scene once and lets the file extension pick the renderer
//! ([`Format::from_path`]), so the two pictures cannot drift apart. Every chart layout places its
//! panels and draws their axes (scales, frames, titles, tick labels, grid lines) through
//! [`axes`], so the charts share one set of conventions. A series of more points than its panel
//! has pixel columns is drawn as per-column envelopes ([`envelope`], [`Axes::series`]), and a
//! time axis is labelled by [`time`] in seconds, minutes, or days and hours of day by its span.
//!
//! The PNG side has no image library: `raster` draws into an RGB buffer with anti-aliased
//! coverage (lines as distance-to-segment, rectangles as area overlap), text comes from the
//! 8×8 bitmap font of the `font8x8` crate (MIT; no dependencies, data only) drawn with
//! proportional spacing, and the maintained `png` crate encodes the pixels (adaptive row
//! filters; its default deflate level).

pub mod axes;
pub mod envelope;
mod font;
mod raster;
pub mod time;

pub use axes::{Axes, Grid, Join, Panel, Scale, Series, Side, nice_max};
pub use time::{TimeTicks, time_ticks};

use std::fmt::Write as _;
use std::path::Path;

/// An sRGB colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Colour(pub u8, pub u8, pub u8);

impl Colour {
    /// White, the background of every chart.
    pub const WHITE: Colour = Colour(0xff, 0xff, 0xff);
    /// Black.
    pub const BLACK: Colour = Colour(0, 0, 0);

    /// The colour written `#rrggbb` as the number `0xrrggbb`.
    pub const fn hex(rgb: u32) -> Colour {
        Colour((rgb >> 16) as u8, (rgb >> 8) as u8, rgb as u8)
    }

    /// This colour mixed with white: `white` 0 keeps it, 1 gives white (for a band behind a
    /// line of the colour).
    #[must_use]
    pub fn lighter(self, white: f64) -> Colour {
        let mix =
            |c: u8| (f64::from(c) + (255.0 - f64::from(c)) * white.clamp(0.0, 1.0)).round() as u8;
        Colour(mix(self.0), mix(self.1), mix(self.2))
    }

    fn css(self) -> String {
        format!("#{:02x}{:02x}{:02x}", self.0, self.1, self.2)
    }
}

/// Where a text's `x` is: its start, its middle or its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Anchor {
    /// `x` is the left edge.
    #[default]
    Start,
    /// `x` is the centre.
    Middle,
    /// `x` is the right edge.
    End,
}

/// A line of text; `y` is its baseline.
#[derive(Clone, Debug, PartialEq)]
pub struct Text {
    x: f64,
    y: f64,
    content: String,
    size: f64,
    anchor: Anchor,
    colour: Colour,
    bold: bool,
}

impl Text {
    /// Black, 11 px, start-anchored text at (`x`, `y`).
    pub fn new(x: f64, y: f64, content: impl Into<String>) -> Self {
        Text {
            x,
            y,
            content: content.into(),
            size: 11.0,
            anchor: Anchor::Start,
            colour: Colour::BLACK,
            bold: false,
        }
    }

    /// The font size in pixels.
    #[must_use]
    pub fn size(mut self, size: f64) -> Self {
        self.size = size;
        self
    }

    /// Which part of the text sits at `x`.
    #[must_use]
    pub fn anchor(mut self, anchor: Anchor) -> Self {
        self.anchor = anchor;
        self
    }

    /// The text colour.
    #[must_use]
    pub fn colour(mut self, colour: Colour) -> Self {
        self.colour = colour;
        self
    }

    /// Bold weight.
    #[must_use]
    pub fn bold(mut self) -> Self {
        self.bold = true;
        self
    }
}

/// How a line is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stroke {
    /// Line colour.
    pub colour: Colour,
    /// Line width in pixels.
    pub width: f64,
    /// `Some((on, off))` for a dashed line: dash and gap lengths in pixels.
    pub dash: Option<(f64, f64)>,
}

impl Stroke {
    /// A solid line.
    pub const fn solid(colour: Colour, width: f64) -> Self {
        Stroke {
            colour,
            width,
            dash: None,
        }
    }

    /// A dashed line: `on` pixels drawn, `off` pixels left out.
    pub const fn dashed(colour: Colour, width: f64, on: f64, off: f64) -> Self {
        Stroke {
            colour,
            width,
            dash: Some((on, off)),
        }
    }
}

/// One primitive of a chart.
#[derive(Clone, Debug, PartialEq)]
enum Shape {
    FillRect {
        x: f64,
        y: f64,
        w: f64,
        h: f64,
        fill: Colour,
    },
    StrokeRect {
        x: f64,
        y: f64,
        w: f64,
        h: f64,
        stroke: Stroke,
    },
    Polyline {
        points: Vec<(f64, f64)>,
        stroke: Stroke,
    },
    Circle {
        cx: f64,
        cy: f64,
        r: f64,
        fill: Colour,
        title: Option<String>,
    },
    Text(Text),
}

/// The output format of a plot, chosen by the file name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Scalable vector graphics (`.svg`).
    Svg,
    /// Portable network graphics (`.png`).
    Png,
}

impl Format {
    /// The format for `path`'s extension (`.svg` or `.png`, any case); `None` for anything else.
    pub fn from_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?;
        if ext.eq_ignore_ascii_case("svg") {
            Some(Format::Svg)
        } else if ext.eq_ignore_ascii_case("png") {
            Some(Format::Png)
        } else {
            None
        }
    }
}

/// `--plot FILE` with a name that is neither `*.svg` nor `*.png`.
#[derive(Debug, thiserror::Error)]
#[error("--plot {path}: name the file *.svg or *.png")]
pub struct UnknownFormat {
    /// The file name given.
    pub path: String,
}

impl Format {
    /// The format for a `--plot` file, or the usage error both services print.
    pub fn for_plot_file(path: &Path) -> Result<Format, UnknownFormat> {
        Format::from_path(path).ok_or_else(|| UnknownFormat {
            path: path.display().to_string(),
        })
    }
}

/// A picture of `width` × `height` pixels on a white background; shapes are drawn in the order
/// they were added.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    width: u32,
    height: u32,
    shapes: Vec<Shape>,
}

impl Chart {
    /// An empty white chart.
    pub fn new(width: u32, height: u32) -> Self {
        Chart {
            width,
            height,
            shapes: Vec::new(),
        }
    }

    /// Width in pixels.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Height in pixels.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// A filled rectangle with its top-left corner at (`x`, `y`).
    pub fn fill_rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: Colour) {
        self.shapes.push(Shape::FillRect { x, y, w, h, fill });
    }

    /// A rectangle's outline, the stroke centred on its edges as in SVG.
    pub fn stroke_rect(&mut self, x: f64, y: f64, w: f64, h: f64, stroke: Stroke) {
        self.shapes.push(Shape::StrokeRect { x, y, w, h, stroke });
    }

    /// An open line through `points`; fewer than two points draw nothing.
    pub fn polyline(&mut self, points: Vec<(f64, f64)>, stroke: Stroke) {
        if points.len() >= 2 {
            self.shapes.push(Shape::Polyline { points, stroke });
        }
    }

    /// A filled circle; `title` becomes an SVG tooltip (PNG has none).
    pub fn circle(&mut self, cx: f64, cy: f64, r: f64, fill: Colour, title: Option<String>) {
        self.shapes.push(Shape::Circle {
            cx,
            cy,
            r,
            fill,
            title,
        });
    }

    /// A line of text.
    pub fn text(&mut self, text: Text) {
        self.shapes.push(Shape::Text(text));
    }

    /// The chart in `format`, ready to write to a file.
    pub fn render(&self, format: Format) -> Vec<u8> {
        match format {
            Format::Svg => self.to_svg().into_bytes(),
            Format::Png => self.to_png(),
        }
    }

    /// The chart as a standalone SVG document.
    pub fn to_svg(&self) -> String {
        let (w, h) = (self.width, self.height);
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif">"#
        );
        let _ = writeln!(out, r##"<rect width="{w}" height="{h}" fill="#ffffff"/>"##);
        for shape in &self.shapes {
            svg_shape(&mut out, shape);
        }
        out.push_str("</svg>\n");
        out
    }

    /// The chart as a PNG file (8-bit RGB, no other chunks than IHDR, IDAT and IEND).
    pub fn to_png(&self) -> Vec<u8> {
        let mut canvas = raster::Canvas::new(self.width, self.height, Colour::WHITE);
        for shape in &self.shapes {
            match shape {
                Shape::FillRect { x, y, w, h, fill } => canvas.fill_rect(*x, *y, *w, *h, *fill),
                Shape::StrokeRect { x, y, w, h, stroke } => {
                    canvas.polyline(&rect_outline(*x, *y, *w, *h), stroke);
                }
                Shape::Polyline { points, stroke } => canvas.polyline(points, stroke),
                Shape::Circle {
                    cx, cy, r, fill, ..
                } => canvas.circle(*cx, *cy, *r, *fill),
                Shape::Text(t) => canvas.text(t),
            }
        }
        encode_png(self.width, self.height, canvas.pixels())
    }
}

/// `rgb` (`width` × `height` pixels of three bytes, rows top to bottom) as a PNG file.
fn encode_png(width: u32, height: u32, rgb: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    // Per row, the filter whose output is smallest: white areas and repeated rows become zeros.
    encoder.set_filter(png::Filter::Adaptive);
    // Writing to a Vec cannot fail, and the canvas always holds exactly width × height pixels;
    // an error here would be a bug in this crate, so it yields an empty file rather than a panic.
    let written = encoder
        .write_header()
        .and_then(|mut writer| writer.write_image_data(rgb).and_then(|()| writer.finish()));
    match written {
        Ok(()) => out,
        Err(_) => Vec::new(),
    }
}

/// The closed outline of a rectangle, starting and ending at its top-left corner.
fn rect_outline(x: f64, y: f64, w: f64, h: f64) -> Vec<(f64, f64)> {
    vec![(x, y), (x + w, y), (x + w, y + h), (x, y + h), (x, y)]
}

fn svg_shape(out: &mut String, shape: &Shape) {
    match shape {
        Shape::FillRect { x, y, w, h, fill } => {
            let _ = writeln!(
                out,
                r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}"/>"#,
                number(*x),
                number(*y),
                number(*w),
                number(*h),
                fill.css()
            );
        }
        Shape::StrokeRect { x, y, w, h, stroke } => {
            let _ = writeln!(
                out,
                r#"<rect x="{}" y="{}" width="{}" height="{}" fill="none"{}/>"#,
                number(*x),
                number(*y),
                number(*w),
                number(*h),
                svg_stroke(stroke)
            );
        }
        Shape::Polyline { points, stroke } => {
            let pts: Vec<String> = points
                .iter()
                .map(|(x, y)| format!("{},{}", number(*x), number(*y)))
                .collect();
            let _ = writeln!(
                out,
                r#"<polyline points="{}" fill="none"{}/>"#,
                pts.join(" "),
                svg_stroke(stroke)
            );
        }
        Shape::Circle {
            cx,
            cy,
            r,
            fill,
            title,
        } => {
            let head = format!(
                r#"<circle cx="{}" cy="{}" r="{}" fill="{}""#,
                number(*cx),
                number(*cy),
                number(*r),
                fill.css()
            );
            let _ = match title {
                Some(t) => writeln!(out, "{head}><title>{}</title></circle>", escape(t)),
                None => writeln!(out, "{head}/>"),
            };
        }
        Shape::Text(t) => {
            let anchor = match t.anchor {
                Anchor::Start => "",
                Anchor::Middle => r#" text-anchor="middle""#,
                Anchor::End => r#" text-anchor="end""#,
            };
            let weight = if t.bold { r#" font-weight="bold""# } else { "" };
            let fill = if t.colour == Colour::BLACK {
                String::new()
            } else {
                format!(r#" fill="{}""#, t.colour.css())
            };
            let _ = writeln!(
                out,
                r#"<text x="{}" y="{}" font-size="{}"{anchor}{weight}{fill}>{}</text>"#,
                number(t.x),
                number(t.y),
                number(t.size),
                escape(&t.content)
            );
        }
    }
}

fn svg_stroke(stroke: &Stroke) -> String {
    let mut s = format!(
        r#" stroke="{}" stroke-width="{}""#,
        stroke.colour.css(),
        number(stroke.width)
    );
    if let Some((on, off)) = stroke.dash {
        let _ = write!(s, r#" stroke-dasharray="{} {}""#, number(on), number(off));
    }
    s
}

/// Escapes text for SVG content and attribute values.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A coordinate with at most one decimal, without a trailing `.0`.
fn number(v: f64) -> String {
    let s = format!("{v:.1}");
    match s.strip_suffix(".0") {
        Some("-0") => "0".to_owned(),
        Some(whole) => whole.to_owned(),
        None => s,
    }
}

/// An axis label: whole numbers without decimals, anything else with two.
pub fn label(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// A step-shaped line through `points`: each value holds until the next point's `x`, then jumps.
/// With `extend_to`, the last value also holds until that `x` (the panel's right edge).
pub fn step_points(points: &[(f64, f64)], extend_to: Option<f64>) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(points.len() * 2 + 1);
    for &(x, y) in points {
        if let Some(&(_, prev_y)) = out.last() {
            out.push((x, prev_y));
        }
        out.push((x, y));
    }
    if let (Some(end), Some(&(_, y))) = (extend_to, out.last()) {
        out.push((end, y));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const RED: Colour = Colour::hex(0xd6_27_28);

    fn sample() -> Chart {
        let mut c = Chart::new(60, 40);
        c.fill_rect(10.0, 10.0, 10.0, 10.0, RED);
        c.polyline(
            vec![(0.0, 30.5), (60.0, 30.5)],
            Stroke::solid(Colour::BLACK, 1.0),
        );
        c.circle(45.0, 10.0, 3.0, RED, Some("a<b".into()));
        c.text(Text::new(30.0, 38.0, "x&y").anchor(Anchor::Middle).bold());
        c
    }

    #[test]
    fn format_follows_the_extension_in_any_case() {
        assert_eq!(Format::from_path(Path::new("a/b.SVG")), Some(Format::Svg));
        assert_eq!(Format::from_path(Path::new("b.Png")), Some(Format::Png));
        assert_eq!(Format::from_path(Path::new("b.jpg")), None);
        assert_eq!(Format::from_path(Path::new("png")), None);
        let err = Format::for_plot_file(Path::new("out.jpeg")).expect_err("jpeg");
        assert_eq!(
            err.to_string(),
            "--plot out.jpeg: name the file *.svg or *.png"
        );
    }

    #[test]
    fn svg_has_every_shape_escaped() {
        let svg = sample().to_svg();
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains(r#"width="60" height="40""#), "{svg}");
        assert!(svg.contains(r##"<rect x="10" y="10" width="10" height="10" fill="#d62728"/>"##));
        assert!(
            svg.contains(r#"<polyline points="0,30.5 60,30.5""#),
            "{svg}"
        );
        assert!(svg.contains("<title>a&lt;b</title>"), "{svg}");
        assert!(svg.contains(r#"text-anchor="middle" font-weight="bold">x&amp;y</text>"#));
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn dashed_stroke_is_written_as_a_dasharray() {
        let mut c = Chart::new(10, 10);
        c.polyline(
            vec![(0.0, 0.0), (5.0, 5.0)],
            Stroke::dashed(RED, 1.5, 6.0, 4.0),
        );
        c.polyline(vec![(1.0, 1.0)], Stroke::solid(RED, 1.0));
        let svg = c.to_svg();
        assert!(
            svg.contains(r#"stroke-width="1.5" stroke-dasharray="6 4""#),
            "{svg}"
        );
        assert_eq!(
            svg.matches("<polyline").count(),
            1,
            "one-point lines are dropped"
        );
    }

    #[test]
    fn step_points_hold_each_value_until_the_next_x() {
        let pts = step_points(&[(0.0, 5.0), (10.0, 7.0), (20.0, 6.0)], Some(30.0));
        assert_eq!(
            pts,
            vec![
                (0.0, 5.0),
                (10.0, 5.0),
                (10.0, 7.0),
                (20.0, 7.0),
                (20.0, 6.0),
                (30.0, 6.0)
            ]
        );
        assert!(step_points(&[], Some(3.0)).is_empty());
    }

    /// Decodes a PNG as [`Chart::to_png`] writes it, checking every chunk's CRC on the way:
    /// (width, height, RGB rows).
    fn decode(png: &[u8]) -> (u32, u32, Vec<u8>) {
        assert_eq!(png[..8], [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a]);
        let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let (mut pos, mut kinds, mut idat) = (8, Vec::new(), Vec::new());
        let (mut width, mut height) = (0, 0);
        while pos < png.len() {
            let len = be(&png[pos..]) as usize;
            let body = &png[pos + 4..pos + 8 + len];
            assert_eq!(
                be(&png[pos + 8 + len..]),
                crc32fast::hash(body),
                "CRC of chunk at {pos}"
            );
            let (kind, data) = body.split_at(4);
            match kind {
                b"IHDR" => {
                    (width, height) = (be(data), be(&data[4..]));
                    assert_eq!(data[8..], [8, 2, 0, 0, 0], "8-bit RGB");
                }
                b"IDAT" => idat.extend_from_slice(data),
                _ => {}
            }
            kinds.push(String::from_utf8_lossy(kind).into_owned());
            pos += 12 + len;
        }
        assert_eq!(kinds, ["IHDR", "IDAT", "IEND"]);
        let raw = miniz_oxide::inflate::decompress_to_vec_zlib(&idat).expect("IDAT inflates");
        let stride = width as usize * 3;
        assert_eq!(raw.len(), (stride + 1) * height as usize);
        let mut rgb: Vec<u8> = Vec::with_capacity(stride * height as usize);
        for (y, line) in raw.chunks(stride + 1).enumerate() {
            for (i, &b) in line[1..].iter().enumerate() {
                let left = if i >= 3 { rgb[y * stride + i - 3] } else { 0 };
                let up = if y > 0 { rgb[(y - 1) * stride + i] } else { 0 };
                let up_left = if i >= 3 && y > 0 {
                    rgb[(y - 1) * stride + i - 3]
                } else {
                    0
                };
                rgb.push(match line[0] {
                    0 => b,
                    1 => b.wrapping_add(left),
                    2 => b.wrapping_add(up),
                    3 => b.wrapping_add(u8::midpoint(left, up)),
                    4 => b.wrapping_add(paeth(left, up, up_left)),
                    other => unreachable!("filter {other} is not in the PNG specification"),
                });
            }
        }
        (width, height, rgb)
    }

    /// The Paeth predictor of the PNG specification (section 9.4).
    fn paeth(a: u8, b: u8, c: u8) -> u8 {
        let p = i16::from(a) + i16::from(b) - i16::from(c);
        let (pa, pb, pc) = (
            (p - i16::from(a)).abs(),
            (p - i16::from(b)).abs(),
            (p - i16::from(c)).abs(),
        );
        if pa <= pb && pa <= pc {
            a
        } else if pb <= pc {
            b
        } else {
            c
        }
    }

    #[test]
    fn png_decodes_to_the_drawn_pixels() {
        let (w, h, rgb) = decode(&sample().to_png());
        assert_eq!((w, h), (60, 40));
        let px = |x: usize, y: usize| {
            let i = (y * w as usize + x) * 3;
            Colour(rgb[i], rgb[i + 1], rgb[i + 2])
        };
        assert_eq!(px(0, 0), Colour::WHITE, "background");
        assert_eq!(px(59, 20), Colour::WHITE, "background");
        assert_eq!(px(15, 15), RED, "inside the filled rect");
        assert_eq!(px(10, 10), RED, "the rect's first pixel");
        assert_eq!(px(20, 15), Colour::WHITE, "just right of the rect");
        assert_eq!(px(3, 30), Colour::BLACK, "on the line");
        assert_eq!(px(3, 29), Colour::WHITE, "above the 1 px line");
        assert_eq!(px(45, 10), RED, "the circle's centre");
        let inked = (26..34).any(|x| (31..38).any(|y| px(x, y) == Colour::BLACK));
        assert!(inked, "the text is drawn around its middle anchor");
    }

    #[test]
    fn a_mostly_white_chart_compresses_to_a_small_file() {
        let mut c = Chart::new(900, 650);
        c.polyline(vec![(70.0, 100.0), (870.0, 300.0)], Stroke::solid(RED, 2.0));
        let png = c.to_png();
        let raw = 900 * 650 * 3;
        assert!(png.len() < raw / 50, "{} bytes", png.len());
        let (w, h, rgb) = decode(&png);
        assert_eq!((w, h, rgb.len()), (900, 650, raw));
    }

    #[test]
    fn render_picks_the_renderer() {
        let c = sample();
        assert!(c.render(Format::Svg).starts_with(b"<svg"));
        assert!(c.render(Format::Png).starts_with(b"\x89PNG"));
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(number(70.0), "70");
        assert_eq!(number(12.345), "12.3");
        assert_eq!(number(-0.01), "0");
        assert_eq!(label(3.0), "3");
        assert_eq!(label(0.375), "0.38");
    }
}
