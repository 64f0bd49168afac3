//! Rasterises chart primitives into an RGB buffer.
//!
//! Edges are anti-aliased by coverage: a rectangle covers a pixel by the area they share, a line
//! by how far the pixel's centre is from the segment (so thick lines get round ends), a circle
//! by the distance from its centre. A polyline's coverage is collected in a mask first and
//! blended once, so its joints are not painted twice. Text is the bitmap font at an integer
//! scale, unblended, which keeps small labels crisp.

use super::font::{self, ASCENT};
use super::{Anchor, Colour, Stroke, Text};

/// An RGB image being drawn, white until painted.
pub(super) struct Canvas {
    width: usize,
    height: usize,
    rgb: Vec<u8>,
}

/// Pixel range `[lo, hi)` that a span `[from, to]` touches, clamped to `0..limit`.
fn span(from: f64, to: f64, limit: usize) -> std::ops::Range<usize> {
    let lo = from.floor().max(0.0);
    let hi = to.ceil().clamp(0.0, limit as f64);
    if lo >= hi {
        return 0..0;
    }
    lo as usize..hi as usize
}

/// Distance from `p` to the segment `a`–`b`.
fn distance_to_segment(p: (f64, f64), a: (f64, f64), b: (f64, f64)) -> f64 {
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let len2 = dx * dx + dy * dy;
    let t = if len2 <= f64::EPSILON {
        0.0
    } else {
        (((p.0 - a.0) * dx + (p.1 - a.1) * dy) / len2).clamp(0.0, 1.0)
    };
    (p.0 - a.0 - t * dx).hypot(p.1 - a.1 - t * dy)
}

/// The drawn pieces of a polyline: all its segments when solid, the "on" parts when dashed. The
/// dash pattern runs on across corners, as in SVG.
fn dash_segments(points: &[(f64, f64)], dash: Option<(f64, f64)>) -> Vec<[(f64, f64); 2]> {
    let pairs = points.windows(2).map(|w| [w[0], w[1]]);
    let Some((on, off)) = dash.filter(|(on, off)| *on > 0.0 && *off > 0.0) else {
        return pairs.collect();
    };
    let period = on + off;
    let mut out = Vec::new();
    let mut phase = 0.0;
    for [a, b] in pairs {
        let len = (b.0 - a.0).hypot(b.1 - a.1);
        let at = |s: f64| (a.0 + (b.0 - a.0) * s / len, a.1 + (b.1 - a.1) * s / len);
        let mut s = 0.0;
        while s < len {
            let drawing = phase < on;
            let step = if drawing { on - phase } else { period - phase }.min(len - s);
            if drawing {
                out.push([at(s), at(s + step)]);
            }
            s += step;
            phase += step;
            if phase >= period - 1e-9 {
                phase = 0.0;
            }
        }
    }
    out
}

impl Canvas {
    pub fn new(width: u32, height: u32, background: Colour) -> Canvas {
        let (width, height) = (width as usize, height as usize);
        Canvas {
            width,
            height,
            rgb: [background.0, background.1, background.2].repeat(width * height),
        }
    }

    /// Rows of RGB bytes, top to bottom.
    pub fn pixels(&self) -> &[u8] {
        &self.rgb
    }

    /// Mixes `colour` into pixel (`x`, `y`) by `alpha` in 0..=1.
    fn blend(&mut self, x: usize, y: usize, colour: Colour, alpha: f64) {
        if alpha <= 0.0 || x >= self.width || y >= self.height {
            return;
        }
        let a = alpha.min(1.0);
        let i = (y * self.width + x) * 3;
        for (k, c) in [colour.0, colour.1, colour.2].into_iter().enumerate() {
            let old = f64::from(self.rgb[i + k]);
            self.rgb[i + k] = (old + (f64::from(c) - old) * a).round() as u8;
        }
    }

    pub fn fill_rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: Colour) {
        let (x1, y1) = (x + w, y + h);
        for py in span(y, y1, self.height) {
            let cover_y = (y1.min(py as f64 + 1.0) - y.max(py as f64)).max(0.0);
            for px in span(x, x1, self.width) {
                let cover_x = (x1.min(px as f64 + 1.0) - x.max(px as f64)).max(0.0);
                self.blend(px, py, fill, cover_x * cover_y);
            }
        }
    }

    pub fn polyline(&mut self, points: &[(f64, f64)], stroke: &Stroke) {
        let half = stroke.width / 2.0;
        let segments = dash_segments(points, stroke.dash);
        let reach = half + 1.0;
        let (mut x0, mut y0, mut x1, mut y1) = (f64::MAX, f64::MAX, f64::MIN, f64::MIN);
        for &(x, y) in points {
            (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y));
        }
        let (xs, ys) = (
            span(x0 - reach, x1 + reach, self.width),
            span(y0 - reach, y1 + reach, self.height),
        );
        if xs.is_empty() || ys.is_empty() {
            return;
        }
        let mask_w = xs.len();
        let mut mask = vec![0.0_f64; mask_w * ys.len()];
        for [a, b] in segments {
            let sx = span(a.0.min(b.0) - reach, a.0.max(b.0) + reach, self.width);
            let sy = span(a.1.min(b.1) - reach, a.1.max(b.1) + reach, self.height);
            for py in sy {
                for px in sx.clone() {
                    let d = distance_to_segment((px as f64 + 0.5, py as f64 + 0.5), a, b);
                    // A hairline thinner than a pixel is drawn one pixel wide but fainter.
                    let cover = (half.max(0.5) + 0.5 - d).clamp(0.0, 1.0) * stroke.width.min(1.0);
                    let cell = &mut mask[(py - ys.start) * mask_w + (px - xs.start)];
                    *cell = cell.max(cover);
                }
            }
        }
        for (i, cover) in mask.into_iter().enumerate() {
            self.blend(
                xs.start + i % mask_w,
                ys.start + i / mask_w,
                stroke.colour,
                cover,
            );
        }
    }

    pub fn circle(&mut self, cx: f64, cy: f64, r: f64, fill: Colour) {
        for py in span(cy - r - 1.0, cy + r + 1.0, self.height) {
            for px in span(cx - r - 1.0, cx + r + 1.0, self.width) {
                let d = (px as f64 + 0.5 - cx).hypot(py as f64 + 0.5 - cy);
                self.blend(px, py, fill, (r + 0.5 - d).clamp(0.0, 1.0));
            }
        }
    }

    pub fn text(&mut self, text: &Text) {
        // The 8×8 font reads well at 11–14 px as is; larger sizes double it, and so on.
        let scale = (text.size / 12.0).round().max(1.0);
        let glyphs = font::layout(&text.content);
        // Bold strikes each glyph twice, one pixel apart, so it is one column wider.
        let bold = u32::from(text.bold);
        let width = f64::from(font::width(&glyphs) + bold * glyphs.len() as u32) * scale;
        let mut pen = match text.anchor {
            Anchor::Start => text.x,
            Anchor::Middle => text.x - width / 2.0,
            Anchor::End => text.x - width,
        }
        .round();
        let top = text.y.round() - f64::from(ASCENT) * scale;
        for g in glyphs {
            for (row, bits) in (0u32..).zip(g.rows) {
                for col in (0..8u32).filter(|col| bits & (1 << col) != 0) {
                    for strike in 0..=bold {
                        let x = pen + f64::from(col - g.first + strike) * scale;
                        let y = top + f64::from(row) * scale;
                        self.fill_rect(x, y, scale, scale, text.colour);
                    }
                }
            }
            pen += f64::from(g.advance() + bold) * scale;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLUE: Colour = Colour(0, 0, 255);

    fn at(c: &Canvas, x: usize, y: usize) -> (u8, u8, u8) {
        let i = (y * c.width + x) * 3;
        (c.rgb[i], c.rgb[i + 1], c.rgb[i + 2])
    }

    #[test]
    fn filled_rect_covers_its_pixels_and_blends_its_edges() {
        let mut c = Canvas::new(10, 10, Colour::WHITE);
        c.fill_rect(2.0, 2.0, 3.5, 3.0, BLUE);
        assert_eq!(at(&c, 2, 2), (0, 0, 255));
        assert_eq!(at(&c, 4, 4), (0, 0, 255));
        assert_eq!(at(&c, 5, 3), (128, 128, 255), "half-covered column");
        assert_eq!(at(&c, 6, 3), (255, 255, 255));
        assert_eq!(at(&c, 2, 5), (255, 255, 255));
    }

    #[test]
    fn thick_line_is_solid_across_its_width() {
        let mut c = Canvas::new(20, 20, Colour::WHITE);
        c.polyline(
            &[(0.0, 10.0), (20.0, 10.0)],
            &Stroke::solid(Colour::BLACK, 2.0),
        );
        assert_eq!(at(&c, 5, 9), (0, 0, 0));
        assert_eq!(at(&c, 5, 10), (0, 0, 0));
        assert_eq!(at(&c, 5, 8), (255, 255, 255));
        assert_eq!(at(&c, 5, 11), (255, 255, 255));
    }

    #[test]
    fn dashed_line_has_gaps() {
        let mut c = Canvas::new(30, 5, Colour::WHITE);
        c.polyline(
            &[(0.0, 2.5), (30.0, 2.5)],
            &Stroke::dashed(BLUE, 1.0, 6.0, 4.0),
        );
        assert_eq!(at(&c, 3, 2), (0, 0, 255), "inside the first dash");
        assert_eq!(at(&c, 8, 2), (255, 255, 255), "inside the first gap");
        assert_eq!(at(&c, 13, 2), (0, 0, 255), "inside the second dash");
    }

    #[test]
    fn dashes_run_on_across_corners() {
        let segs = dash_segments(&[(0.0, 0.0), (4.0, 0.0), (4.0, 10.0)], Some((6.0, 4.0)));
        assert_eq!(segs.len(), 3);
        assert_eq!(segs[1], [(4.0, 0.0), (4.0, 2.0)]);
        assert_eq!(segs[2], [(4.0, 6.0), (4.0, 10.0)]);
    }

    #[test]
    fn diagonal_line_crosses_the_pixel_it_passes_through() {
        let mut c = Canvas::new(20, 20, Colour::WHITE);
        c.polyline(&[(0.0, 0.0), (20.0, 20.0)], &Stroke::solid(BLUE, 2.0));
        assert_eq!(at(&c, 7, 7), (0, 0, 255));
        assert_eq!(at(&c, 15, 2), (255, 255, 255));
    }

    #[test]
    fn circle_is_filled_inside_only() {
        let mut c = Canvas::new(20, 20, Colour::WHITE);
        c.circle(10.0, 10.0, 3.0, BLUE);
        assert_eq!(at(&c, 10, 10), (0, 0, 255));
        assert_eq!(at(&c, 10, 15), (255, 255, 255));
    }

    #[test]
    fn text_is_drawn_left_of_an_end_anchor_and_above_the_baseline() {
        let mut c = Canvas::new(60, 20, Colour::WHITE);
        c.text(&Text::new(50.0, 15.0, "MW").anchor(Anchor::End));
        let inked: Vec<(usize, usize)> = (0..20)
            .flat_map(|y| (0..60).map(move |x| (x, y)))
            .filter(|&(x, y)| at(&c, x, y) != (255, 255, 255))
            .collect();
        assert!(!inked.is_empty());
        assert!(
            inked
                .iter()
                .all(|&(x, y)| (35..50).contains(&x) && (8..15).contains(&y)),
            "{inked:?}"
        );
    }
}
