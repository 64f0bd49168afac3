//! Kubernetes quantities (`100m`, `1.5Gi`, `1e3`) as exact integer milli-units.
//!
//! Every amount Plimsoll compares or adds is an `i128` count of thousandths of a unit
//! (millicores for CPU, millibytes for memory), so `0.1 + 0.2 == 0.3` holds and no
//! recommendation flaps because of float drift. Floats appear only where a ratio is the point
//! (utilization, histogram weights) and are converted back at the edge.
//!
//! Parsing follows `k8s.io/apimachinery/pkg/api/resource`: an optional sign, a decimal number,
//! and one suffix — decimal SI (`n`, `u`, `m`, `k`, `M`, `G`, `T`, `P`, `E`), binary SI (`Ki` … `Ei`) or a
//! decimal exponent (`e3`, `E-3`). Precision finer than a milli-unit rounds up, as upstream's
//! `MilliValue()` does. Formatting produces upstream's canonical form in the quantity's own
//! format: the largest suffix that represents the value exactly (`1536Mi` for `1.5Gi`,
//! `1500k` for `1.5M`), falling back to decimal SI for fractional binary values.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a quantity could not be parsed or computed. Every variant quotes the input (at most
/// [`QUOTED_CHARS`](crate::quoted::QUOTED_CHARS) characters of it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The text is not a Kubernetes quantity.
    #[error("invalid quantity {}: {reason}", crate::quoted::quoted(.input))]
    Malformed {
        /// The text as given.
        input: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The value does not fit in the milli-unit range Plimsoll computes with (about ±1.7e35).
    #[error("quantity {} is out of range", crate::quoted::quoted(.input))]
    OutOfRange {
        /// The text (or operation) as given.
        input: String,
    },
}

/// How a quantity is written back out, kept from the text it was parsed from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Format {
    /// `m`, `k`, `M`, `G`, `T`, `P`, `E` or no suffix.
    #[default]
    DecimalSi,
    /// `Ki`, `Mi`, `Gi`, `Ti`, `Pi`, `Ei`.
    BinarySi,
    /// `e3`, `e-3`.
    DecimalExponent,
}

/// Which way to round when a value has precision finer than one milli-unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    /// Toward positive infinity (upstream's `MilliValue()`).
    Up,
    /// Toward negative infinity.
    Down,
}

/// A Kubernetes quantity held as exact milli-units.
///
/// Equality and ordering compare values only: `1Gi == 1024Mi` and `1 == 1000m`.
#[derive(Clone, Copy, Debug)]
pub struct Quantity {
    milli: i128,
    format: Format,
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.milli == other.milli
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.milli.cmp(&other.milli)
    }
}

impl std::hash::Hash for Quantity {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.milli.hash(state);
    }
}

const DECIMAL_SUFFIXES: [(&str, u32); 7] = [
    ("m", 0),
    ("", 1),
    ("k", 2),
    ("M", 3),
    ("G", 4),
    ("T", 5),
    ("P", 6),
];
const EXA: (&str, u32) = ("E", 7);
const BINARY_SUFFIXES: [(&str, u32); 6] = [
    ("Ki", 1),
    ("Mi", 2),
    ("Gi", 3),
    ("Ti", 4),
    ("Pi", 5),
    ("Ei", 6),
];

/// Largest decimal exponent accepted; beyond it no value fits in `i128` milli-units anyway.
const MAX_EXPONENT: i32 = 36;

impl Quantity {
    /// The zero quantity.
    pub const ZERO: Quantity = Quantity {
        milli: 0,
        format: Format::DecimalSi,
    };

    /// Parses a quantity, rounding sub-milli precision up.
    pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
        Self::parse_rounding(s, Rounding::Up)
    }

    /// Parses a quantity, rounding sub-milli precision the given way.
    pub fn parse_rounding(s: &str, rounding: Rounding) -> Result<Quantity, QuantityError> {
        let out_of_range = || QuantityError::OutOfRange {
            input: s.to_owned(),
        };
        let Parts {
            negative,
            mantissa,
            fraction_digits,
            format,
            decimal_exponent,
            binary_power,
        } = Parts::parse(s)?;

        // value × 1000 = mantissa × 10^(decimal_exponent − fraction_digits + 3) × 1024^binary_power
        let mut numerator = mantissa;
        for _ in 0..binary_power {
            numerator = numerator.checked_mul(1024).ok_or_else(out_of_range)?;
        }
        let exponent = decimal_exponent - fraction_digits + 3;
        let milli = if exponent >= 0 {
            let scale = pow10(exponent).ok_or_else(out_of_range)?;
            numerator.checked_mul(scale).ok_or_else(out_of_range)?
        } else {
            match pow10(-exponent) {
                Some(scale) => div_round(numerator, scale, rounding),
                // A divisor beyond i128 leaves less than one milli-unit.
                None => i128::from(numerator != 0 && rounding == Rounding::Up),
            }
        };
        let milli = if negative {
            // Round the magnitude the opposite way so the signed value still rounds `rounding`.
            let magnitude = if exponent >= 0 {
                milli
            } else {
                let flipped = match rounding {
                    Rounding::Up => Rounding::Down,
                    Rounding::Down => Rounding::Up,
                };
                match pow10(-exponent) {
                    Some(scale) => div_round(numerator, scale, flipped),
                    None => i128::from(numerator != 0 && flipped == Rounding::Up),
                }
            };
            -magnitude
        } else {
            milli
        };
        Ok(Quantity { milli, format })
    }

    /// A quantity of `milli` thousandths of a unit, written in decimal SI.
    pub const fn from_milli(milli: i128) -> Quantity {
        Quantity {
            milli,
            format: Format::DecimalSi,
        }
    }

    /// A quantity of `milli` thousandths of a unit, written with `Ki` … `Ei` when exact.
    pub const fn from_milli_binary(milli: i128) -> Quantity {
        Quantity {
            milli,
            format: Format::BinarySi,
        }
    }

    /// A quantity of whole units (cores, bytes), written in decimal SI.
    pub const fn from_units(units: i64) -> Quantity {
        Quantity::from_milli(units as i128 * 1000)
    }

    /// The value in thousandths of a unit.
    pub const fn milli(&self) -> i128 {
        self.milli
    }

    /// The value in whole units, rounded up (upstream's `Value()`).
    pub const fn value(&self) -> i128 {
        self.milli.div_euclid(1000)
            + if self.milli.rem_euclid(1000) == 0 {
                0
            } else {
                1
            }
    }

    /// The value in units as a float, for ratios only.
    pub fn as_f64(&self) -> f64 {
        self.milli as f64 / 1000.0
    }

    /// The format the quantity is written in.
    pub const fn format(&self) -> Format {
        self.format
    }

    /// The same value written in another format.
    #[must_use]
    pub const fn with_format(self, format: Format) -> Quantity {
        Quantity {
            milli: self.milli,
            format,
        }
    }

    /// The sum, in this quantity's format; `None` on overflow.
    pub fn checked_add(self, other: Quantity) -> Option<Quantity> {
        Some(Quantity {
            milli: self.milli.checked_add(other.milli)?,
            format: self.format,
        })
    }

    /// The difference, in this quantity's format; `None` on overflow.
    pub fn checked_sub(self, other: Quantity) -> Option<Quantity> {
        Some(Quantity {
            milli: self.milli.checked_sub(other.milli)?,
            format: self.format,
        })
    }

    /// The value × `numerator` / `denominator`, exact up to the final rounding to a milli-unit.
    /// `None` when `denominator` is zero or the result overflows.
    pub fn scale(self, numerator: i128, denominator: i128, rounding: Rounding) -> Option<Quantity> {
        if denominator == 0 {
            return None;
        }
        let product = self.milli.checked_mul(numerator)?;
        let (product, denominator) = if denominator < 0 {
            (product.checked_neg()?, -denominator)
        } else {
            (product, denominator)
        };
        Some(Quantity {
            milli: div_round(product, denominator, rounding),
            format: self.format,
        })
    }

    /// The value × `ratio`, rounded to a milli-unit; `None` for a non-finite ratio or overflow.
    pub fn scale_f64(self, ratio: f64, rounding: Rounding) -> Option<Quantity> {
        let scaled = self.milli as f64 * ratio;
        if !scaled.is_finite() || scaled.abs() >= i128::MAX as f64 {
            return None;
        }
        let rounded = match rounding {
            Rounding::Up => scaled.ceil(),
            Rounding::Down => scaled.floor(),
        };
        Some(Quantity {
            milli: rounded as i128,
            format: self.format,
        })
    }
}

/// A quantity's text taken apart: value = ±mantissa × 10^(decimal_exponent − fraction_digits)
/// × 1024^binary_power.
struct Parts {
    negative: bool,
    mantissa: i128,
    fraction_digits: i32,
    format: Format,
    decimal_exponent: i32,
    binary_power: u32,
}

impl Parts {
    fn parse(s: &str) -> Result<Parts, QuantityError> {
        let malformed = |reason| QuantityError::Malformed {
            input: s.to_owned(),
            reason,
        };
        let out_of_range = || QuantityError::OutOfRange {
            input: s.to_owned(),
        };
        let text = s.trim();
        if text.is_empty() {
            return Err(malformed("empty"));
        }
        if text.len() != s.len() {
            return Err(malformed("surrounding white space"));
        }
        let (negative, rest) = match text.as_bytes()[0] {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_end);
        let (whole, fraction) = match number.split_once('.') {
            Some((w, f)) => (w, f),
            None => (number, ""),
        };
        if whole.is_empty() && fraction.is_empty() {
            return Err(malformed("no digits"));
        }
        if fraction.contains('.') {
            return Err(malformed("more than one decimal point"));
        }
        // Mantissa as an integer of all significant digits, scaled by 10^-fraction_digits.
        let digits = format!("{whole}{fraction}");
        let digits = digits.trim_start_matches('0');
        if digits.len() > 38 {
            return Err(out_of_range());
        }
        let mantissa: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| out_of_range())?
        };
        let fraction_digits = i32::try_from(fraction.len()).map_err(|_| out_of_range())?;

        let (format, decimal_exponent, binary_power) = parse_suffix(suffix).ok_or_else(|| {
            malformed("unknown suffix (expected n, u, m, k, M, G, T, P, E, Ki … Ei or an exponent)")
        })?;

        Ok(Parts {
            negative,
            mantissa,
            fraction_digits,
            format,
            decimal_exponent,
            binary_power,
        })
    }
}

/// Parses a quantity into a float without rounding to milli-units, for models that keep finer
/// precision (a simulated kubelet's nanocores). Accepts exactly what [`Quantity::parse`] accepts.
pub fn parse_f64(s: &str) -> Result<f64, QuantityError> {
    let parts = Parts::parse(s)?;
    let exponent = parts.decimal_exponent - parts.fraction_digits;
    // Dividing by an exact power of ten (not multiplying by its inexact inverse) rounds once.
    let mut value = if exponent >= 0 {
        parts.mantissa as f64 * 10f64.powi(exponent)
    } else {
        parts.mantissa as f64 / 10f64.powi(-exponent)
    };
    for _ in 0..parts.binary_power {
        value *= 1024.0;
    }
    Ok(if parts.negative { -value } else { value })
}

fn parse_suffix(suffix: &str) -> Option<(Format, i32, u32)> {
    if let Some((_, power)) = BINARY_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        return Some((Format::BinarySi, 0, *power));
    }
    // `n` and `u` are accepted as upstream's pattern allows them; values round to milli-units.
    match suffix {
        "n" => return Some((Format::DecimalSi, -9, 0)),
        "u" => return Some((Format::DecimalSi, -6, 0)),
        "m" => return Some((Format::DecimalSi, -3, 0)),
        _ => {}
    }
    if let Some((_, index)) = DECIMAL_SUFFIXES
        .iter()
        .chain(std::iter::once(&EXA))
        .find(|(s, _)| *s == suffix)
    {
        return Some((Format::DecimalSi, 3 * (*index as i32 - 1), 0));
    }
    let exponent = suffix.strip_prefix(['e', 'E'])?;
    let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: i32 = exponent.parse().ok()?;
    if value.abs() > MAX_EXPONENT {
        return None;
    }
    Some((Format::DecimalExponent, value, 0))
}

fn pow10(exponent: i32) -> Option<i128> {
    10_i128.checked_pow(u32::try_from(exponent).ok()?)
}

fn div_round(numerator: i128, denominator: i128, rounding: Rounding) -> i128 {
    let quotient = numerator.div_euclid(denominator);
    if rounding == Rounding::Up && numerator.rem_euclid(denominator) != 0 {
        quotient + 1
    } else {
        quotient
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.milli < 0 { "-" } else { "" };
        let magnitude = self.milli.unsigned_abs();
        if magnitude == 0 {
            return f.write_str("0");
        }
        if self.format == Format::BinarySi && magnitude.is_multiple_of(1000) {
            let units = magnitude / 1000;
            let mut best = (units, "");
            let mut divisor: u128 = 1;
            for (suffix, _) in BINARY_SUFFIXES {
                divisor *= 1024;
                if units.is_multiple_of(divisor) {
                    best = (units / divisor, suffix);
                } else {
                    break;
                }
            }
            return write!(f, "{sign}{}{}", best.0, best.1);
        }
        // Decimal: the largest power of 1000 (starting at milli) that divides the value exactly.
        let mut mantissa = magnitude;
        let mut index = 0usize;
        while index < 7 && mantissa.is_multiple_of(1000) {
            mantissa /= 1000;
            index += 1;
        }
        if self.format == Format::DecimalExponent {
            let exponent = 3 * (index as i32 - 1);
            return if exponent == 0 {
                write!(f, "{sign}{mantissa}")
            } else {
                write!(f, "{sign}{mantissa}e{exponent}")
            };
        }
        let suffix = if index == 7 {
            EXA.0
        } else {
            DECIMAL_SUFFIXES[index].0
        };
        write!(f, "{sign}{mantissa}{suffix}")
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Kubernetes accepts quantities as strings or bare numbers (int-or-string).
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Int(i64),
            Float(f64),
        }
        let text = match Raw::deserialize(deserializer)? {
            Raw::Text(s) => s,
            Raw::Int(i) => i.to_string(),
            Raw::Float(x) => x.to_string(),
        };
        Quantity::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl TryFrom<&K8sQuantity> for Quantity {
    type Error = QuantityError;

    fn try_from(q: &K8sQuantity) -> Result<Self, Self::Error> {
        Quantity::parse(&q.0)
    }
}

impl From<Quantity> for K8sQuantity {
    fn from(q: Quantity) -> Self {
        K8sQuantity(q.to_string())
    }
}

/// `x` within the `i64` range: past it, the nearest end, never a wrapped value.
pub fn clamp_i64(x: i128) -> i64 {
    i64::try_from(x).unwrap_or(if x < 0 { i64::MIN } else { i64::MAX })
}

/// The sum of `values` (milli-units, bytes), saturating at the `i64` range. Requests, limits,
/// policy bounds and metric values are whatever a tenant or an adapter reports: a sum that
/// wrapped would read a loaded workload as idle (and scale it down), or panic where overflow is
/// checked. Summed in `i128`, which no count of `i64`s can overflow, so the order does not
/// change the result.
pub fn saturating_total(values: impl IntoIterator<Item = i64>) -> i64 {
    clamp_i64(values.into_iter().map(i128::from).sum())
}

/// Millicores of a CPU quantity, rounded up.
pub fn cpu_milli(q: &K8sQuantity) -> Result<i64, QuantityError> {
    let parsed = Quantity::try_from(q)?;
    i64::try_from(parsed.milli()).map_err(|_| QuantityError::OutOfRange { input: q.0.clone() })
}

/// Bytes of a memory quantity, rounded up.
pub fn memory_bytes(q: &K8sQuantity) -> Result<i64, QuantityError> {
    let parsed = Quantity::try_from(q)?;
    i64::try_from(parsed.value()).map_err(|_| QuantityError::OutOfRange { input: q.0.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    // Parse vectors; many from apimachinery's quantity_test.go TestQuantityParse, with the
    // expected value restated as milli-units.
    #[test]
    fn parses_floats_without_milli_rounding() {
        // Values the simulated kubelet reads; sub-milli precision survives.
        for (input, want) in [
            ("500m", 0.5),
            ("1Gi", 1024.0 * 1024.0 * 1024.0),
            ("1500000n", 0.0015),
            ("3k", 3000.0),
            ("1.5", 1.5),
            ("1e3", 1000.0),
            ("-2", -2.0),
        ] {
            assert_eq!(parse_f64(input), Ok(want), "{input}");
        }
        assert!(parse_f64("x").is_err());
        assert!(parse_f64(" 1").is_err());
    }

    #[test]
    fn parses_to_exact_milli_units() {
        let cases: &[(&str, i128)] = &[
            ("0", 0),
            ("0m", 0),
            ("-0", 0),
            ("1", 1_000),
            ("100m", 100),
            ("1500m", 1_500),
            ("0.5", 500),
            (".5", 500),
            ("5.", 5_000),
            ("1.5Gi", 1_610_612_736_000),
            ("1Ki", 1_024_000),
            ("8Ei", 9_223_372_036_854_775_808_000),
            ("1e3", 1_000_000),
            ("1E3", 1_000_000),
            ("12e-3", 12),
            ("1e+3", 1_000_000),
            ("1k", 1_000_000),
            ("2M", 2_000_000_000),
            ("3G", 3_000_000_000_000),
            ("1T", 1_000_000_000_000_000),
            ("1P", 1_000_000_000_000_000_000),
            ("1E", 1_000_000_000_000_000_000_000),
            ("1Mi", 1_048_576_000),
            ("1Ti", 1_099_511_627_776_000),
            ("-100m", -100),
            ("+250m", 250),
            ("0.1m", 1),   // sub-milli rounds up, as MilliValue() does
            ("0.0001", 1), // likewise
            ("1.0001", 1_001),
            ("0.001", 1),
            ("123456789", 123_456_789_000),
            ("007", 7_000),
            ("250000000n", 250), // metrics-server reports CPU in nanocores
            ("1500u", 2),
            ("1000000u", 1_000),
        ];
        for (input, milli) in cases {
            assert_eq!(q(input).milli(), *milli, "parse {input}");
        }
    }

    #[test]
    fn rounds_sub_milli_down_on_request() {
        let cases: &[(&str, i128)] = &[("0.1m", 0), ("1.9m", 1), ("-0.1m", -1), ("2.5m", 2)];
        for (input, milli) in cases {
            assert_eq!(
                Quantity::parse_rounding(input, Rounding::Down)
                    .unwrap()
                    .milli(),
                *milli,
                "parse {input} rounding down"
            );
        }
        assert_eq!(q("-0.1m").milli(), 0, "negative values round toward +inf");
    }

    // Canonical forms as apimachinery's TestQuantityCanonicalize / TestQuantityString expect.
    #[test]
    fn formats_canonically() {
        let cases: &[(&str, &str)] = &[
            ("1.5Gi", "1536Mi"),
            ("1024Mi", "1Gi"),
            ("1536", "1536"),
            ("1.5Ki", "1536"),
            ("0.5Ki", "512"),
            ("1000m", "1"),
            ("1500m", "1500m"),
            ("1.5", "1500m"),
            ("1500000", "1500k"),
            ("1.5M", "1500k"),
            ("2000", "2k"),
            ("1e3", "1e3"),
            ("1500", "1500"),
            ("12e-3", "12e-3"),
            ("100m", "100m"),
            ("0", "0"),
            ("0Gi", "0"),
            ("-5Mi", "-5Mi"),
            ("1E", "1E"),
            ("1000P", "1E"),
            ("0.5Mi", "512Ki"),
        ];
        for (input, canonical) in cases {
            assert_eq!(q(input).to_string(), *canonical, "format {input}");
        }
    }

    #[test]
    fn binary_fraction_falls_back_to_decimal() {
        // 0.1Ki = 102.4 bytes: not a whole number of bytes, so decimal SI.
        assert_eq!(q("0.1Ki").to_string(), "102400m");
    }

    #[test]
    fn compares_by_value_across_formats() {
        assert_eq!(q("1Gi"), q("1024Mi"));
        assert_eq!(q("1"), q("1000m"));
        assert_eq!(q("1e3"), q("1k"));
        assert!(q("999m") < q("1"));
        assert!(q("1Ki") > q("1k"));
        assert!(q("-1") < q("0"));
        assert_eq!(q("0.1").checked_add(q("0.2")).unwrap(), q("0.3"));
    }

    #[test]
    fn adds_and_subtracts() {
        assert_eq!(
            q("1Gi").checked_add(q("512Mi")).unwrap().to_string(),
            "1536Mi"
        );
        assert_eq!(q("1").checked_sub(q("250m")).unwrap().to_string(), "750m");
        assert_eq!(q("100m").checked_sub(q("200m")).unwrap().milli(), -100);
        assert!(
            Quantity::from_milli(i128::MAX)
                .checked_add(q("1m"))
                .is_none()
        );
    }

    #[test]
    fn scales_by_ratio() {
        let cases: &[(&str, i128, i128, Rounding, &str)] = &[
            ("1", 3, 2, Rounding::Up, "1500m"),
            ("100m", 1, 3, Rounding::Up, "34m"),
            ("100m", 1, 3, Rounding::Down, "33m"),
            ("1Gi", 1, 2, Rounding::Up, "512Mi"),
            ("300m", 115, 100, Rounding::Up, "345m"),
            ("-100m", 1, 3, Rounding::Down, "-34m"),
            ("2", -1, 2, Rounding::Up, "-1"),
        ];
        for (input, n, d, rounding, want) in cases {
            assert_eq!(
                q(input).scale(*n, *d, *rounding).unwrap().to_string(),
                *want,
                "{input} × {n}/{d}"
            );
        }
        assert!(q("1").scale(1, 0, Rounding::Up).is_none());
        assert_eq!(
            q("200m").scale_f64(1.15, Rounding::Up).unwrap().milli(),
            230
        );
        assert!(q("1").scale_f64(f64::NAN, Rounding::Up).is_none());
    }

    #[test]
    fn whole_unit_value_rounds_up() {
        assert_eq!(q("1500m").value(), 2);
        assert_eq!(q("1").value(), 1);
        assert_eq!(q("1m").value(), 1);
        assert_eq!(q("-1500m").value(), -1);
        assert_eq!(
            memory_bytes(&K8sQuantity("256Mi".into())).unwrap(),
            268_435_456
        );
        assert_eq!(cpu_milli(&K8sQuantity("0.25".into())).unwrap(), 250);
    }

    #[test]
    fn rejects_malformed_input_quoting_it() {
        let cases = [
            "", " 1", "1 ", "abc", "1.2.3", "1Qi", "1kb", "1e", "1e+", "--1", ".", "1ee3", "1e3.5",
            "1mi", "Gi", "1e99",
        ];
        for input in cases {
            let err = Quantity::parse(input).expect_err(input);
            assert!(
                err.to_string().contains(&format!("{input:?}")),
                "error for {input:?} must quote it: {err}"
            );
        }
    }

    #[test]
    fn rejects_values_beyond_range() {
        let err = Quantity::parse("999999999999999999999999999999999999999999").unwrap_err();
        assert!(matches!(err, QuantityError::OutOfRange { .. }));
        assert!(Quantity::parse("1e36Ei").is_err());
    }

    #[test]
    fn serde_accepts_strings_and_numbers() {
        let v: Vec<Quantity> = serde_json::from_str(r#"["100m", 2, 0.5]"#).unwrap();
        assert_eq!(
            v.iter().map(Quantity::milli).collect::<Vec<_>>(),
            [100, 2_000, 500]
        );
        assert_eq!(serde_json::to_string(&q("1.5Gi")).unwrap(), "\"1536Mi\"");
        assert!(serde_json::from_str::<Quantity>("\"12x\"").is_err());
    }

    proptest! {
        #[test]
        fn parse_format_parse_round_trips(milli in -(1_i128 << 80)..(1_i128 << 80), binary in any::<bool>()) {
            let original = if binary { Quantity::from_milli_binary(milli) } else { Quantity::from_milli(milli) };
            let text = original.to_string();
            let reparsed = Quantity::parse(&text).unwrap();
            prop_assert_eq!(reparsed.milli(), milli, "{}", text);
            prop_assert_eq!(reparsed.to_string(), text);
        }

        #[test]
        fn ordering_matches_milli_ordering(a in -(1_i128 << 60)..(1_i128 << 60), b in -(1_i128 << 60)..(1_i128 << 60)) {
            prop_assert_eq!(Quantity::from_milli(a).cmp(&Quantity::from_milli_binary(b)), a.cmp(&b));
        }
    }
}
