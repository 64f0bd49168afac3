//! Parsing cron expressions into bit sets.
//!
//! Grammar (the robfig/cron dialect the upstream cronhpa controller uses, plus `L`):
//! * 6 fields `second minute hour day-of-month month day-of-week`, or 5 fields without the
//!   seconds (seconds = 0);
//! * each field is a comma list of `*`, `?`, `N`, `N-M`, each optionally `/STEP`; `N/STEP`
//!   means `N-max/STEP`; months `JAN`–`DEC` and weekdays `SUN`–`SAT` by name (any case); weekday 7
//!   is Sunday too;
//! * `L` in the day-of-month field: the last day of the month;
//! * descriptors `@yearly` (`@annually`), `@monthly`, `@weekly`, `@daily` (`@midnight`),
//!   `@hourly`, and `@every DURATION` (Go duration syntax: `90s`, `1h30m`, `1.5h`).
//!
//! Invariant: a parsed [`Fields`] can fire (some month has a matching day), so the next-fire
//! search always terminates with a result.

use super::Error;

/// A parsed job schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Calendar fields, read in the object's time zone.
    Fields(Fields),
    /// `@every DURATION`: every `seconds` seconds, aligned to the Unix epoch (so the firing
    /// instants do not depend on when the controller started; see `next`).
    Every {
        /// Interval in whole seconds, >= 1.
        seconds: u64,
    },
}

/// The calendar fields of a schedule, one bit per allowed value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    /// Bits 0–59.
    pub second: u64,
    /// Bits 0–59.
    pub minute: u64,
    /// Bits 0–23.
    pub hour: u64,
    /// Bits 1–31.
    pub day_of_month: u64,
    /// `L` was given: the last day of each month matches too.
    pub last_day_of_month: bool,
    /// Bits 1–12.
    pub month: u64,
    /// Bits 0–6, Sunday = 0.
    pub day_of_week: u64,
    /// Day of month was `*` or `?` (unrestricted). robfig/cron: when either day field is
    /// unrestricted both must match; when both are restricted, either matching is enough.
    pub day_of_month_any: bool,
    /// Day of week was `*` or `?` (unrestricted).
    pub day_of_week_any: bool,
}

/// A schedule of days, for `spec.excludeDates`: only the day-of-month, month and day-of-week
/// fields of the expression count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DaySchedule(Fields);

#[derive(Clone, Copy)]
struct Bounds {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const SECOND: Bounds = Bounds {
    name: "second",
    min: 0,
    max: 59,
    names: &[],
};
const MINUTE: Bounds = Bounds {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: Bounds = Bounds {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
};
const DAY_OF_MONTH: Bounds = Bounds {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: Bounds = Bounds {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
// 7 is accepted as a second Sunday (as Vixie cron does) and folded onto bit 0 after parsing.
const DAY_OF_WEEK: Bounds = Bounds {
    name: "day-of-week",
    min: 0,
    max: 7,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

/// Days in each month of a leap year: the most a month can have, for the "can ever fire" check.
const MAX_DAYS: [u32; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

impl Schedule {
    /// Parses a job schedule. The error quotes the expression and names the bad field.
    pub fn parse(expr: &str) -> Result<Self, Error> {
        let trimmed = expr.trim();
        if let Some(rest) = trimmed.strip_prefix("@every") {
            let seconds = parse_every(rest.trim()).map_err(|m| invalid(expr, m))?;
            return Ok(Self::Every { seconds });
        }
        Fields::parse(expr).map(Self::Fields)
    }
}

impl Fields {
    /// Parses a 5- or 6-field expression or a calendar descriptor (`@daily`, not `@every`).
    pub fn parse(expr: &str) -> Result<Self, Error> {
        let trimmed = expr.trim();
        if trimmed.starts_with("TZ=") || trimmed.starts_with("CRON_TZ=") {
            // robfig/cron allows a per-expression zone; here the zone is the object's.
            return Err(invalid(
                expr,
                "a time zone prefix (CRON_TZ=) is not supported; set spec.timeZone".to_string(),
            ));
        }
        let expanded = match trimmed.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => "0 0 0 1 1 *",
            "@monthly" => "0 0 0 1 * *",
            "@weekly" => "0 0 0 * * 0",
            "@daily" | "@midnight" => "0 0 0 * * *",
            "@hourly" => "0 0 * * * *",
            other if other.starts_with('@') => {
                return Err(invalid(
                    expr,
                    format!(
                        "unknown descriptor \"{trimmed}\" (expected @yearly, @monthly, @weekly, @daily, @hourly or @every)"
                    ),
                ));
            }
            _ => trimmed,
        };
        let parts: Vec<&str> = expanded.split_whitespace().collect();
        let (second, rest) = match parts.len() {
            6 => (parts[0], &parts[1..]),
            5 => ("0", &parts[..]),
            0 => return Err(invalid(expr, "empty schedule".to_string())),
            n => {
                return Err(invalid(expr, format!("expected 5 or 6 fields, found {n}")));
            }
        };
        let field =
            |text: &str, bounds: Bounds| parse_field(text, bounds).map_err(|m| invalid(expr, m));
        let (day_of_month, last_day_of_month, day_of_month_any) =
            parse_day_of_month(rest[2]).map_err(|m| invalid(expr, m))?;
        let (mut day_of_week, day_of_week_any) = field(rest[4], DAY_OF_WEEK)?;
        if day_of_week & (1 << 7) != 0 {
            day_of_week = (day_of_week & !(1 << 7)) | 1;
        }
        let fields = Self {
            second: field(second, SECOND)?.0,
            minute: field(rest[0], MINUTE)?.0,
            hour: field(rest[1], HOUR)?.0,
            day_of_month,
            last_day_of_month,
            month: field(rest[3], MONTH)?.0,
            day_of_week,
            day_of_month_any,
            day_of_week_any,
        };
        if !fields.can_fire() {
            return Err(invalid(
                expr,
                "day-of-month never occurs in the given months".to_string(),
            ));
        }
        Ok(fields)
    }

    /// True when `date` matches the day fields.
    pub fn matches_day(&self, date: jiff::civil::Date) -> bool {
        self.matches_day_of(DayFacts::of(date))
    }

    /// [`Fields::matches_day`] on what it reads of a date (the month aside).
    fn matches_day_of(&self, facts: DayFacts) -> bool {
        let on_day_of_month = self.day_of_month & (1 << facts.day) != 0
            || (self.last_day_of_month && facts.last_of_month);
        let on_day_of_week = self.day_of_week & (1 << facts.weekday) != 0;
        if self.day_of_month_any || self.day_of_week_any {
            on_day_of_month && on_day_of_week
        } else {
            on_day_of_month || on_day_of_week
        }
    }

    /// Whether some date in some year matches the day fields. With a restricted day of week
    /// (OR semantics) every month has matching days; otherwise a month needs a day of month it
    /// actually has (30 February never comes).
    fn can_fire(&self) -> bool {
        if !self.day_of_month_any && !self.day_of_week_any {
            return self.month != 0;
        }
        if self.day_of_week == 0 {
            return false;
        }
        (1..=12u32).any(|m| {
            self.month & (1 << m) != 0
                && (self.last_day_of_month
                    || (1..=MAX_DAYS[(m - 1) as usize]).any(|d| self.day_of_month & (1 << d) != 0))
        })
    }
}

impl DaySchedule {
    /// Parses an `excludeDates` entry (5 or 6 fields, or a calendar descriptor); the time
    /// fields must still be valid but are ignored.
    pub fn parse(expr: &str) -> Result<Self, Error> {
        if expr.trim().starts_with("@every") {
            return Err(invalid(
                expr,
                "@every is not a set of days; use the day fields".to_string(),
            ));
        }
        Fields::parse(expr).map(Self)
    }

    /// True when no job may fire on `date` (a civil date in the object's time zone). The month
    /// counts as the day fields do: upstream excludes a date when the entry's next firing falls
    /// on it, so `* * * 25 12 *` is Christmas, not the 25th of every month.
    pub fn contains(&self, date: jiff::civil::Date) -> bool {
        self.contains_day_of(DayFacts::of(date))
    }

    /// [`DaySchedule::contains`] on what it reads of a date.
    pub fn contains_day_of(&self, facts: DayFacts) -> bool {
        self.0.month & (1 << facts.month) != 0 && self.0.matches_day_of(facts)
    }
}

/// All that the day fields read of a date: whether a date matches depends on nothing else, so
/// a set of day schedules can be decided once for every combination (see
/// [`super::excluded::ExcludedDays`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DayFacts {
    /// 1 to 12.
    pub month: i8,
    /// 1 to 31.
    pub day: i8,
    /// The month has no later day.
    pub last_of_month: bool,
    /// 0 (Sunday) to 6.
    pub weekday: i8,
}

impl DayFacts {
    /// The facts of `date`.
    pub fn of(date: jiff::civil::Date) -> Self {
        Self {
            month: date.month(),
            day: date.day(),
            last_of_month: date.day() == date.days_in_month(),
            weekday: date.weekday().to_sunday_zero_offset(),
        }
    }
}

fn invalid(expr: &str, message: String) -> Error {
    Error::InvalidSchedule {
        expr: expr.to_string(),
        message,
    }
}

/// Parses the day-of-month field, which alone allows `L`. Returns (bits, has `L`, unrestricted).
fn parse_day_of_month(text: &str) -> Result<(u64, bool, bool), String> {
    let mut bits = 0;
    let mut last = false;
    let mut any = false;
    for part in text.split(',') {
        if part.eq_ignore_ascii_case("l") {
            last = true;
        } else {
            let (b, a) = parse_range(part, DAY_OF_MONTH)?;
            bits |= b;
            any |= a;
        }
    }
    Ok((bits, last, any))
}

/// Parses a comma list. Returns the bits and whether the field was unrestricted (`*` or `?`
/// without a step greater than one, as robfig/cron decides).
fn parse_field(text: &str, bounds: Bounds) -> Result<(u64, bool), String> {
    let mut bits = 0;
    let mut any = false;
    for part in text.split(',') {
        let (b, a) = parse_range(part, bounds)?;
        bits |= b;
        any |= a;
    }
    Ok((bits, any))
}

fn parse_range(part: &str, bounds: Bounds) -> Result<(u64, bool), String> {
    let field = bounds.name;
    if part.is_empty() {
        return Err(format!("{field} field has an empty list element"));
    }
    let mut range_and_step = part.split('/');
    let range = range_and_step.next().unwrap_or_default();
    let step_text = range_and_step.next();
    if range_and_step.next().is_some() {
        return Err(format!("{field} field \"{part}\" has more than one '/'"));
    }
    let mut any = false;
    let (start, mut end, single) = if range == "*" || range == "?" {
        any = true;
        (bounds.min, bounds.max, false)
    } else {
        let mut ends = range.split('-');
        let low = parse_value(ends.next().unwrap_or_default(), bounds, part)?;
        match (ends.next(), ends.next()) {
            (None, _) => (low, low, true),
            (Some(high), None) => (low, parse_value(high, bounds, part)?, false),
            (Some(_), Some(_)) => {
                return Err(format!("{field} field \"{part}\" has more than one '-'"));
            }
        }
    };
    let step = match step_text {
        None => 1,
        Some(s) => {
            let step: u32 = s
                .parse()
                .map_err(|_| format!("{field} field \"{part}\": step \"{s}\" is not a number"))?;
            if step == 0 {
                return Err(format!("{field} field \"{part}\": step must be positive"));
            }
            if single {
                end = bounds.max;
            }
            if step > 1 {
                any = false;
            }
            step
        }
    };
    if start > end {
        return Err(format!(
            "{field} field \"{part}\": range start {start} is after its end {end}"
        ));
    }
    let mut bits = 0u64;
    let mut v = start;
    while v <= end {
        bits |= 1 << v;
        // A step larger than the field (`59/4294967295`) ends the list after its start.
        let Some(next) = v.checked_add(step) else {
            break;
        };
        v = next;
    }
    Ok((bits, any))
}

fn parse_value(text: &str, bounds: Bounds, part: &str) -> Result<u32, String> {
    let field = bounds.name;
    let lower = text.to_ascii_lowercase();
    if let Some(i) = bounds.names.iter().position(|n| *n == lower) {
        // Month names count from 1 (the month minimum), weekday names from 0 (Sunday).
        return Ok(i as u32 + bounds.min);
    }
    if text.eq_ignore_ascii_case("l") {
        return Err(format!(
            "{field} field \"{part}\": L is only allowed alone in the day-of-month field"
        ));
    }
    let value: u32 = text
        .parse()
        .map_err(|_| format!("{field} field \"{part}\": \"{text}\" is not a number or name"))?;
    if value < bounds.min {
        return Err(format!(
            "{field} field \"{part}\": {value} is below the minimum {}",
            bounds.min
        ));
    }
    if value > bounds.max {
        return Err(format!(
            "{field} field \"{part}\": {value} is above the maximum {}",
            bounds.max
        ));
    }
    Ok(value)
}

/// Parses a Go-style duration (`90s`, `1h30m`, `1.5h`, `500ms`) into whole seconds (the
/// fraction of a second is dropped, as robfig/cron does). Rejects intervals under a second.
fn parse_every(text: &str) -> Result<u64, String> {
    if text.is_empty() {
        return Err("@every needs a duration, e.g. @every 90s".to_string());
    }
    let mut nanos: f64 = 0.0;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(number_len);
        let value: f64 = number
            .parse()
            .map_err(|_| format!("@every duration \"{text}\" is not like 90s or 1h30m"))?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let scale = match unit {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => {
                return Err(format!(
                    "@every duration \"{text}\" is missing a unit (s, m or h)"
                ));
            }
            other => {
                return Err(format!(
                    "@every duration \"{text}\" has an unknown unit \"{other}\""
                ));
            }
        };
        nanos += value * scale;
        rest = next;
    }
    let seconds = (nanos / 1e9).floor();
    if seconds < 1.0 {
        return Err(format!("@every duration \"{text}\" is under one second"));
    }
    // Ten years is far beyond any useful interval and keeps the arithmetic in range.
    if seconds > 315_576_000.0 {
        return Err(format!(
            "@every duration \"{text}\" is longer than ten years"
        ));
    }
    Ok(seconds as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(values: &[u32]) -> u64 {
        values.iter().fold(0, |acc, v| acc | 1 << v)
    }

    fn fields(expr: &str) -> Fields {
        match Schedule::parse(expr).unwrap() {
            Schedule::Fields(f) => f,
            Schedule::Every { .. } => panic!("{expr} parsed as @every"),
        }
    }

    // upstream: robfig/cron parser_test.go TestRange
    #[test]
    fn ranges_and_steps() {
        let cases: &[(&str, Bounds, u64)] = &[
            ("5", MINUTE, bits(&[5])),
            ("0", MINUTE, bits(&[0])),
            ("7", DAY_OF_WEEK, bits(&[7])),
            ("5-5", MINUTE, bits(&[5])),
            ("5-6", MINUTE, bits(&[5, 6])),
            ("5-7", MINUTE, bits(&[5, 6, 7])),
            ("5-6/2", MINUTE, bits(&[5])),
            ("5-7/2", MINUTE, bits(&[5, 7])),
            ("5-7/1", MINUTE, bits(&[5, 6, 7])),
            ("*/10", MINUTE, bits(&[0, 10, 20, 30, 40, 50])),
            ("50/5", MINUTE, bits(&[50, 55])),
            // A step past the end of u32 stops after the start, not wraps round to 0–58.
            ("59/4294967238", MINUTE, bits(&[59])),
            ("*/4294967295", MINUTE, bits(&[0])),
            ("mon-fri", DAY_OF_WEEK, bits(&[1, 2, 3, 4, 5])),
            ("JAN-MAR", MONTH, bits(&[1, 2, 3])),
            ("Dec", MONTH, bits(&[12])),
            ("SUN", DAY_OF_WEEK, bits(&[0])),
        ];
        for (text, b, want) in cases {
            assert_eq!(parse_field(text, *b).unwrap().0, *want, "{text}");
        }
    }

    // upstream: robfig/cron parser_test.go TestRange (error rows)
    #[test]
    fn malformed_ranges() {
        let cases: &[(&str, Bounds, &str)] = &[
            ("5--5", MINUTE, "more than one '-'"),
            ("jan-x", MONTH, "not a number or name"),
            ("2-", MINUTE, "not a number"),
            ("*/-12", MINUTE, "not a number"),
            ("*//2", MINUTE, "more than one '/'"),
            ("1", DAY_OF_MONTH, ""),
            ("0", DAY_OF_MONTH, "below the minimum 1"),
            ("60", MINUTE, "above the maximum 59"),
            ("6-5", MINUTE, "after its end"),
            ("*/0", MINUTE, "step must be positive"),
            ("1,,2", MINUTE, "empty list element"),
            ("L", HOUR, "only allowed alone in the day-of-month"),
        ];
        for (text, b, want) in cases {
            let got = parse_field(text, *b);
            if want.is_empty() {
                assert!(got.is_ok(), "{text}: {got:?}");
            } else {
                let message = got.unwrap_err();
                assert!(message.contains(want), "{text}: {message}");
            }
        }
    }

    // upstream: robfig/cron parser_test.go TestAll / TestBits (star bit only without a step)
    #[test]
    fn star_and_question_mark_are_unrestricted() {
        assert_eq!(parse_field("*", MINUTE).unwrap(), ((1 << 60) - 1, true));
        assert_eq!(parse_field("?", HOUR).unwrap(), ((1 << 24) - 1, true));
        assert!(parse_field("*/1", HOUR).unwrap().1);
        assert!(!parse_field("*/2", HOUR).unwrap().1);
    }

    // upstream: robfig/cron parser_test.go TestStandardSpecSchedule / TestParseSchedule
    #[test]
    fn whole_expressions() {
        let f = fields("5 * * * *");
        assert_eq!((f.second, f.minute), (bits(&[0]), bits(&[5])));
        let f = fields("0 5 * * * *");
        assert_eq!((f.second, f.minute), (bits(&[0]), bits(&[5])));
        let f = fields("* 5 * * * *");
        assert_eq!(f.second, (1 << 60) - 1);
        let f = fields("0 30 8 * * mon-fri");
        assert_eq!(f.day_of_week, bits(&[1, 2, 3, 4, 5]));
        assert!(f.day_of_month_any && !f.day_of_week_any);
        let f = fields("0 0 0 L * *");
        assert!(f.last_day_of_month);
        assert_eq!(f.day_of_month, 0);
        let f = fields("0 0 0 1,15,L * *");
        assert_eq!(f.day_of_month, bits(&[1, 15]));
        let f = fields("0 0 * * 7");
        assert_eq!(f.day_of_week, bits(&[0]), "7 is Sunday");
        let f = fields("@weekly");
        assert_eq!((f.hour, f.day_of_week), (bits(&[0]), bits(&[0])));
        assert_eq!(fields("@hourly").hour, (1 << 24) - 1);
        assert_eq!(fields("@annually"), fields("0 0 0 1 1 *"));
        assert_eq!(fields("@midnight"), fields("0 0 * * *"));
    }

    // upstream: robfig/cron constantdelay_test.go TestConstantDelayNext (sub-second truncation)
    #[test]
    fn every_durations() {
        let cases = [
            ("@every 90s", 90),
            ("@every 1h30m", 5400),
            ("@every 1.5h", 5400),
            ("@every 5m", 300),
            ("@every 1500ms", 1),
            ("@every 2h3m4s", 7384),
        ];
        for (expr, want) in cases {
            assert_eq!(
                Schedule::parse(expr).unwrap(),
                Schedule::Every { seconds: want },
                "{expr}"
            );
        }
    }

    #[test]
    fn malformed_schedules_name_the_field() {
        let cases = [
            ("", "empty schedule"),
            ("* * *", "expected 5 or 6 fields, found 3"),
            ("* * * * * * *", "expected 5 or 6 fields, found 7"),
            (
                "0 0 24 * * *",
                "hour field \"24\": 24 is above the maximum 23",
            ),
            ("0 61 * * * *", "minute field"),
            ("60 * * * * *", "second field"),
            ("0 0 0 32 * *", "day-of-month field"),
            ("0 0 0 * 13 *", "month field"),
            ("0 0 0 * * 8", "day-of-week field"),
            ("0 0 0 * * funday", "not a number or name"),
            ("0 0 0 30 2 *", "never occurs"),
            ("@fortnightly", "unknown descriptor"),
            ("@every", "needs a duration"),
            ("@every 10", "missing a unit"),
            ("@every 10d", "unknown unit"),
            ("@every 500ms", "under one second"),
            ("CRON_TZ=Asia/Tokyo 0 0 8 * * *", "set spec.timeZone"),
            ("0 0 8 ? * 5L", "day-of-week field"),
        ];
        for (expr, want) in cases {
            let message = Schedule::parse(expr).unwrap_err().to_string();
            assert!(message.contains(want), "{expr:?}: {message}");
            assert!(message.contains(&format!("{expr:?}")), "{message}");
        }
    }

    #[test]
    fn day_schedules() {
        let christmas = DaySchedule::parse("* * * 25 12 *").unwrap();
        assert!(christmas.contains(jiff::civil::date(2026, 12, 25)));
        assert!(!christmas.contains(jiff::civil::date(2026, 12, 24)));
        assert!(!christmas.contains(jiff::civil::date(2026, 3, 25)));
        let november_fridays = DaySchedule::parse("* * * ? 11 fri").unwrap();
        assert!(november_fridays.contains(jiff::civil::date(2026, 11, 27)));
        assert!(!november_fridays.contains(jiff::civil::date(2026, 12, 4)));
        let weekend = DaySchedule::parse("0 0 * * sat,sun").unwrap();
        assert!(weekend.contains(jiff::civil::date(2026, 3, 28)));
        assert!(!weekend.contains(jiff::civil::date(2026, 3, 27)));
        assert!(DaySchedule::parse("@every 1h").is_err());
    }

    // upstream: robfig/cron spec_test.go TestNext ("dom OR dow when both restricted")
    #[test]
    fn both_day_fields_restricted_means_either() {
        let f = fields("0 0 0 1 * mon");
        // 2026-06-01 is a Monday; 2026-06-08 a Monday; 2026-07-01 a Wednesday.
        assert!(f.matches_day(jiff::civil::date(2026, 6, 8)));
        assert!(f.matches_day(jiff::civil::date(2026, 7, 1)));
        assert!(!f.matches_day(jiff::civil::date(2026, 7, 2)));
        let g = fields("0 0 0 1 * ?");
        assert!(!g.matches_day(jiff::civil::date(2026, 6, 8)));
    }
}
