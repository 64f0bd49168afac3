//! Glyphs for PNG text: the 8×8 bitmaps of `font8x8` (Basic Latin and Latin-1), trimmed to the
//! columns they use so text is proportionally spaced and about as wide as SVG's sans-serif.

use font8x8::legacy::{BASIC_LEGACY, LATIN_LEGACY};

/// Rows of a glyph above the baseline; the eighth row holds descenders.
pub(super) const ASCENT: u32 = 7;
/// Columns a space advances (a bitmap space has no columns to measure).
const SPACE: u32 = 3;

/// One glyph ready to draw: its rows (bit 0 is the leftmost pixel), the first column in use and
/// how many columns it spans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Glyph {
    pub rows: [u8; 8],
    pub first: u32,
    pub width: u32,
}

impl Glyph {
    fn new(rows: [u8; 8]) -> Glyph {
        let used = rows.iter().fold(0u8, |acc, r| acc | r);
        if used == 0 {
            return Glyph {
                rows,
                first: 0,
                width: SPACE,
            };
        }
        let first = used.trailing_zeros();
        let last = used.ilog2();
        Glyph {
            rows,
            first,
            width: last - first + 1,
        }
    }

    /// Columns from this glyph's start to the next one's, including the one-column gap.
    pub fn advance(&self) -> u32 {
        self.width + 1
    }
}

/// The glyphs for `text`. Characters the font lacks are spelled with ones it has (`…` as three
/// dots, dashes as `-`, curly quotes as straight ones), anything else as `?`.
pub(super) fn layout(text: &str) -> Vec<Glyph> {
    let ascii = |b: u8| Glyph::new(BASIC_LEGACY[usize::from(b)]);
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '…' => out.extend([ascii(b'.'); 3]),
            '‐' | '‑' | '–' | '—' | '−' => out.push(ascii(b'-')),
            '‘' | '’' => out.push(ascii(b'\'')),
            '“' | '”' => out.push(ascii(b'"')),
            ' '..='~' => out.push(ascii(c as u8)),
            '\u{a0}'..='\u{ff}' => out.push(Glyph::new(LATIN_LEGACY[c as usize - 0xa0])),
            _ => out.push(ascii(b'?')),
        }
    }
    out
}

/// The width of `text` in font pixels (before scaling), without the trailing gap.
pub(super) fn width(glyphs: &[Glyph]) -> u32 {
    glyphs
        .iter()
        .map(Glyph::advance)
        .sum::<u32>()
        .saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_letters_advance_less_than_wide_ones() {
        let i = layout("i")[0];
        let m = layout("m")[0];
        assert!(i.advance() < m.advance(), "{i:?} {m:?}");
        assert!(m.advance() <= 8);
    }

    #[test]
    fn missing_characters_are_spelled_readably() {
        assert_eq!(layout("…"), layout("..."));
        assert_eq!(layout("—"), layout("-"));
        assert_eq!(layout("\u{2603}"), layout("?"));
        assert_eq!(layout("×").len(), 1);
        assert_ne!(layout("×"), layout("?"), "Latin-1 has ×");
    }

    #[test]
    fn width_counts_gaps_between_glyphs_only() {
        let one = width(&layout("l"));
        assert_eq!(width(&layout("ll")), 2 * one + 1);
        assert_eq!(width(&[]), 0);
    }
}
