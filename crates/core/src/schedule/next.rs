//! The next firing instant of a schedule.
//!
//! Calendar schedules are matched against local (civil) times in the object's time zone, then
//! mapped to instants with [`zone::resolve`]; because that mapping is monotone, the first
//! matching civil time whose instant lies after `after` is the answer. `@every` schedules fire
//! at multiples of their interval since the Unix epoch, so the instants are the same whenever
//! and wherever the controller (or replay) starts.
//!
//! Invariant: the result is strictly after `after` (property-tested).

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use super::cron::{Fields, Schedule};
use super::zone;

/// How far ahead the search looks, in years. 29 February under a weekday-free schedule recurs
/// at most 8 years apart (2096 → 2104), so this never cuts off a schedule that can fire.
const HORIZON_YEARS: i16 = 30;

/// The first instant strictly after `after` at which `schedule` fires in `tz`.
/// `None` only when nothing fires within `HORIZON_YEARS` (or beyond year 9999).
pub fn next_after(schedule: &Schedule, tz: &TimeZone, after: Timestamp) -> Option<Timestamp> {
    match schedule {
        Schedule::Every { seconds } => {
            let interval = i64::try_from(*seconds).ok()?;
            let next = after
                .as_second()
                .div_euclid(interval)
                .checked_add(1)?
                .checked_mul(interval)?;
            Timestamp::from_second(next).ok()
        }
        Schedule::Fields(fields) => next_calendar(fields, tz, after),
    }
}

/// The first instant at or after `from` at which `schedule` fires.
pub fn first_at_or_after(schedule: &Schedule, tz: &TimeZone, from: Timestamp) -> Option<Timestamp> {
    let just_before = from.checked_sub(SignedDuration::from_nanos(1)).ok()?;
    next_after(schedule, tz, just_before)
}

fn next_calendar(fields: &Fields, tz: &TimeZone, after: Timestamp) -> Option<Timestamp> {
    let local = tz.to_datetime(after);
    // Whole seconds only: the first candidate is the next whole second after `after`.
    let mut start = local
        .with()
        .subsec_nanosecond(0)
        .build()
        .ok()?
        .checked_add(SignedDuration::from_secs(1))
        .ok()?;
    let limit = local.year().saturating_add(HORIZON_YEARS);
    // Candidates inside a fall-back fold map to the first pass; when `after` lies in the
    // second pass they land before it and are skipped. A fold lasts at most a few hours, so
    // this loop runs a bounded number of times.
    for _ in 0..100_000 {
        let civil = next_civil(fields, start, limit)?;
        let at = zone::resolve(civil, tz)?;
        if at > after {
            return Some(at);
        }
        start = civil.checked_add(SignedDuration::from_secs(1)).ok()?;
    }
    None
}

/// The lowest set bit at or above `from`, if any.
fn next_bit(bits: u64, from: i8) -> Option<i8> {
    let from = u32::try_from(from).ok()?;
    if from >= 64 {
        return None;
    }
    let masked = bits & !((1u64 << from) - 1);
    (masked != 0).then(|| masked.trailing_zeros() as i8)
}

/// The first civil time at or after `start` matching `fields`, searching up to year `limit`.
fn next_civil(fields: &Fields, start: DateTime, limit: i16) -> Option<DateTime> {
    let mut date = start.date();
    let (mut hour, mut minute, mut second) = (start.hour(), start.minute(), start.second());
    loop {
        if date.year() > limit {
            return None;
        }
        if fields.month & (1 << date.month()) == 0 {
            date = first_of_next_month(date)?;
            (hour, minute, second) = (0, 0, 0);
            continue;
        }
        if !fields.matches_day(date) {
            date = date.tomorrow().ok()?;
            (hour, minute, second) = (0, 0, 0);
            continue;
        }
        let Some(h) = next_bit(fields.hour, hour) else {
            date = date.tomorrow().ok()?;
            (hour, minute, second) = (0, 0, 0);
            continue;
        };
        if h != hour {
            (hour, minute, second) = (h, 0, 0);
        }
        let Some(m) = next_bit(fields.minute, minute) else {
            // No matching minute left in this hour: try the next hour (or day).
            (minute, second) = (0, 0);
            if hour == 23 {
                date = date.tomorrow().ok()?;
                hour = 0;
            } else {
                hour += 1;
            }
            continue;
        };
        if m != minute {
            (minute, second) = (m, 0);
        }
        let Some(s) = next_bit(fields.second, second) else {
            second = 0;
            if minute == 59 {
                minute = 0;
                if hour == 23 {
                    date = date.tomorrow().ok()?;
                    hour = 0;
                } else {
                    hour += 1;
                }
            } else {
                minute += 1;
            }
            continue;
        };
        return Some(date.at(hour, minute, s, 0));
    }
}

fn first_of_next_month(date: Date) -> Option<Date> {
    date.first_of_month()
        .checked_add(jiff::Span::new().months(1))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn next(zone: &str, after: &str, expr: &str) -> Option<Timestamp> {
        let tz = zone::parse_time_zone(zone).unwrap();
        let schedule = Schedule::parse(expr).unwrap();
        next_after(&schedule, &tz, ts(after))
    }

    /// (time zone, after, schedule, expected next firing or "" for none).
    const CASES: &[(&str, &str, &str, &str)] = &[
        // upstream: robfig/cron spec_test.go TestNext (written with the seconds field first)
        (
            "UTC",
            "2012-07-09T14:45:00Z",
            "0 0/15 * * * *",
            "2012-07-09T15:00:00Z",
        ),
        (
            "UTC",
            "2012-07-09T14:59:00Z",
            "0 0/15 * * * *",
            "2012-07-09T15:00:00Z",
        ),
        (
            "UTC",
            "2012-07-09T14:59:59Z",
            "0 0/15 * * * *",
            "2012-07-09T15:00:00Z",
        ),
        (
            "UTC",
            "2012-07-09T15:45:00Z",
            "0 20-35/15 * * * *",
            "2012-07-09T16:20:00Z",
        ),
        (
            "UTC",
            "2012-07-09T23:46:00Z",
            "0 */15 * * * *",
            "2012-07-10T00:00:00Z",
        ),
        (
            "UTC",
            "2012-07-09T23:45:00Z",
            "0 20-35/15 * * * *",
            "2012-07-10T00:20:00Z",
        ),
        (
            "UTC",
            "2012-07-09T23:35:51Z",
            "15/35 20-35/15 * * * *",
            "2012-07-10T00:20:15Z",
        ),
        (
            "UTC",
            "2012-07-09T23:35:51Z",
            "15/35 20-35/15 1/2 * * *",
            "2012-07-10T01:20:15Z",
        ),
        (
            "UTC",
            "2012-07-09T23:35:51Z",
            "15/35 20-35/15 10-12 * * *",
            "2012-07-10T10:20:15Z",
        ),
        (
            "UTC",
            "2012-07-09T23:35:51Z",
            "15/35 20-35/15 1/2 */2 * *",
            "2012-07-11T01:20:15Z",
        ),
        (
            "UTC",
            "2012-07-09T23:35:51Z",
            "15/35 20-35/15 * 9-20 * *",
            "2012-07-10T00:20:15Z",
        ),
        (
            "UTC",
            "2012-07-09T23:35:51Z",
            "15/35 20-35/15 * 9-20 Jul *",
            "2012-07-10T00:20:15Z",
        ),
        (
            "UTC",
            "2012-07-09T23:35:00Z",
            "0 0 0 9 Apr-Oct ?",
            "2012-08-09T00:00:00Z",
        ),
        // robfig/cron v3: */5 is restricted, so day-of-month OR Monday (1 Aug 2012).
        (
            "UTC",
            "2012-07-09T23:35:00Z",
            "0 0 0 */5 Apr,Aug,Oct Mon",
            "2012-08-01T00:00:00Z",
        ),
        (
            "UTC",
            "2012-07-09T23:35:00Z",
            "0 0 0 */5 Oct Mon",
            "2012-10-01T00:00:00Z",
        ),
        (
            "UTC",
            "2012-07-09T23:35:00Z",
            "0 0 0 * Feb Mon",
            "2013-02-04T00:00:00Z",
        ),
        (
            "UTC",
            "2012-07-09T23:35:00Z",
            "0 0 0 * Feb Mon/2",
            "2013-02-01T00:00:00Z",
        ),
        (
            "UTC",
            "2012-12-31T23:59:45Z",
            "0 * * * * *",
            "2013-01-01T00:00:00Z",
        ),
        // 29 February. upstream: robfig/cron spec_test.go TestNext "Leap year"
        (
            "UTC",
            "2012-07-09T23:35:00Z",
            "0 0 0 29 Feb ?",
            "2016-02-29T00:00:00Z",
        ),
        // 2100 is not a leap year: eight years to the next 29 February.
        (
            "UTC",
            "2096-03-01T00:00:00Z",
            "0 0 12 29 2 *",
            "2104-02-29T12:00:00Z",
        ),
        (
            "Europe/Berlin",
            "2028-02-28T12:00:00Z",
            "0 0 8 29 2 *",
            "2028-02-29T07:00:00Z",
        ),
        // L: the last day of the month.
        (
            "UTC",
            "2027-01-01T00:00:00Z",
            "0 0 0 L 2 *",
            "2027-02-28T00:00:00Z",
        ),
        (
            "UTC",
            "2028-01-01T00:00:00Z",
            "0 0 0 L 2 *",
            "2028-02-29T00:00:00Z",
        ),
        (
            "UTC",
            "2026-04-15T00:00:00Z",
            "0 0 0 L * *",
            "2026-04-30T00:00:00Z",
        ),
        (
            "UTC",
            "2026-04-30T00:00:00Z",
            "0 0 0 L * *",
            "2026-05-31T00:00:00Z",
        ),
        (
            "UTC",
            "2026-02-15T00:00:00Z",
            "0 0 0 15,L * *",
            "2026-02-28T00:00:00Z",
        ),
        (
            "Europe/Berlin",
            "2026-01-31T20:00:00Z",
            "0 0 22 L * *",
            "2026-01-31T21:00:00Z",
        ),
        // @every: multiples of the interval since the epoch, whatever the time zone.
        (
            "UTC",
            "2026-01-01T00:00:00Z",
            "@every 90s",
            "2026-01-01T00:01:30Z",
        ),
        (
            "UTC",
            "2026-01-01T00:01:30Z",
            "@every 90s",
            "2026-01-01T00:03:00Z",
        ),
        (
            "UTC",
            "2026-01-01T00:01:29.5Z",
            "@every 90s",
            "2026-01-01T00:01:30Z",
        ),
        (
            "Asia/Kolkata",
            "2026-01-01T00:10:00Z",
            "@every 1h",
            "2026-01-01T01:00:00Z",
        ),
        (
            "UTC",
            "2026-01-01T00:03:00Z",
            "@every 7m",
            "2026-01-01T00:07:00Z",
        ),
        // Descriptors and 5-field schedules in a zone.
        (
            "America/New_York",
            "2026-07-01T12:00:00Z",
            "@daily",
            "2026-07-02T04:00:00Z",
        ),
        (
            "UTC",
            "2026-03-25T10:00:00Z",
            "@weekly",
            "2026-03-29T00:00:00Z",
        ),
        (
            "UTC",
            "2026-03-25T10:00:00Z",
            "@monthly",
            "2026-04-01T00:00:00Z",
        ),
        (
            "UTC",
            "2026-03-25T10:00:00Z",
            "@yearly",
            "2027-01-01T00:00:00Z",
        ),
        (
            "UTC",
            "2026-03-25T10:00:00Z",
            "@hourly",
            "2026-03-25T11:00:00Z",
        ),
        (
            "Europe/Berlin",
            "2026-03-27T08:00:00Z",
            "30 8 * * mon-fri",
            "2026-03-30T06:30:00Z",
        ),
        (
            "Asia/Shanghai",
            "2019-12-18T15:00:00Z",
            "0 9 * * *",
            "2019-12-19T01:00:00Z",
        ),
        (
            "UTC",
            "2026-01-01T00:00:00.5Z",
            "* * * * * *",
            "2026-01-01T00:00:01Z",
        ),
        // Spring-forward, Europe/Berlin 2026-03-29: 02:00–02:59 are skipped. Skipped times
        // fire once, at 03:00 CEST (01:00Z).
        (
            "Europe/Berlin",
            "2026-03-29T00:00:00Z",
            "0 30 2 * * *",
            "2026-03-29T01:00:00Z",
        ),
        (
            "Europe/Berlin",
            "2026-03-29T01:00:00Z",
            "0 30 2 * * *",
            "2026-03-30T00:30:00Z",
        ),
        (
            "Europe/Berlin",
            "2026-03-29T00:50:00Z",
            "0 */15 * * * *",
            "2026-03-29T01:00:00Z",
        ),
        (
            "Europe/Berlin",
            "2026-03-29T01:00:00Z",
            "0 */15 * * * *",
            "2026-03-29T01:15:00Z",
        ),
        (
            "Europe/Berlin",
            "2026-03-29T00:00:00Z",
            "0 0 3 * * *",
            "2026-03-29T01:00:00Z",
        ),
        // Fall-back, Europe/Berlin 2026-10-25: 02:00–02:59 happen twice; only the first fires.
        (
            "Europe/Berlin",
            "2026-10-25T00:00:00Z",
            "0 30 2 * * *",
            "2026-10-25T00:30:00Z",
        ),
        (
            "Europe/Berlin",
            "2026-10-25T00:30:00Z",
            "0 30 2 * * *",
            "2026-10-26T01:30:00Z",
        ),
        (
            "Europe/Berlin",
            "2026-10-25T00:30:00Z",
            "@hourly",
            "2026-10-25T02:00:00Z",
        ),
        (
            "Europe/Berlin",
            "2026-10-25T01:10:00Z",
            "0 */30 * * * *",
            "2026-10-25T02:00:00Z",
        ),
        // Spring-forward, America/New_York 2026-03-08: 02:00–02:59 EST are skipped.
        (
            "America/New_York",
            "2026-03-08T05:00:00Z",
            "0 30 2 * * *",
            "2026-03-08T07:00:00Z",
        ),
        // upstream: robfig/cron spec_test.go TestNext "Daylight savings time EST -> EDT"
        // robfig skips the missing 02:30 to the next year; here it fires at 03:00 EDT.
        (
            "America/New_York",
            "2012-03-11T05:00:00Z",
            "0 30 2 11 Mar ?",
            "2012-03-11T07:00:00Z",
        ),
        // upstream: robfig/cron spec_test.go TestNext "Daylight savings time EDT -> EST"
        (
            "America/New_York",
            "2012-11-04T04:00:00Z",
            "0 30 2 04 Nov ?",
            "2012-11-04T07:30:00Z",
        ),
        // robfig fires 01:30 a second time (EST); here the repeated hour fires once.
        (
            "America/New_York",
            "2012-11-04T05:45:00Z",
            "0 30 1 04 Nov ?",
            "2013-11-04T06:30:00Z",
        ),
        (
            "America/New_York",
            "2026-11-01T04:00:00Z",
            "0 0 1 * * *",
            "2026-11-01T05:00:00Z",
        ),
        (
            "America/New_York",
            "2026-11-01T05:00:00Z",
            "0 0 1 * * *",
            "2026-11-02T06:00:00Z",
        ),
        // Both day fields restricted: either matches (robfig/cron spec_test.go TestActivation).
        (
            "UTC",
            "2012-06-14T00:00:00Z",
            "0 0 0 1,15 * Sun",
            "2012-06-15T00:00:00Z",
        ),
        (
            "UTC",
            "2012-07-14T00:00:00Z",
            "0 0 0 1,15 * Sun",
            "2012-07-15T00:00:00Z",
        ),
        // robfig/cron v3: a step over `*` is a restriction, so `*/2` OR Sunday → 9 July 2012.
        (
            "UTC",
            "2012-07-08T00:00:00Z",
            "0 0 0 */2 * Sun",
            "2012-07-09T00:00:00Z",
        ),
        // One unrestricted: both must match (`?` and Sunday → 15 July 2012).
        (
            "UTC",
            "2012-07-08T00:00:00Z",
            "0 0 0 ? * Sun",
            "2012-07-15T00:00:00Z",
        ),
        (
            "UTC",
            "2012-07-15T00:00:00Z",
            "0 0 0 1,15 * *",
            "2012-08-01T00:00:00Z",
        ),
    ];

    #[test]
    fn next_firing_table() {
        assert!(CASES.len() >= 40);
        for (zone, after, expr, want) in CASES {
            let got = next(zone, after, expr);
            let want = (!want.is_empty()).then(|| ts(want));
            assert_eq!(got, want, "{zone} after {after}: {expr:?}");
        }
    }

    #[test]
    fn first_at_or_after_includes_the_instant() {
        let tz = TimeZone::UTC;
        let s = Schedule::parse("0 * * * * *").unwrap();
        let at = ts("2026-01-01T00:01:00Z");
        assert_eq!(first_at_or_after(&s, &tz, at), Some(at));
    }

    fn zone_strategy() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "UTC",
            "Europe/Berlin",
            "America/New_York",
            "Australia/Lord_Howe",
            "Asia/Kolkata",
        ])
    }

    fn expr_strategy() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "0 */7 * * * ?",
            "0 30 2 * * *",
            "*/20 * * * * *",
            "0 0 1 * * *",
            "0 15 2 L * *",
            "0 0 0 29 2 *",
            "30 8 * * mon-fri",
            "@hourly",
            "@every 90s",
            "0 0 0 1,15 * Sun",
        ])
    }

    proptest! {
        // Invariants: the next firing is strictly after `after`, and nothing fires in between
        // (asking again from any instant before it gives the same answer).
        #[test]
        fn next_is_strictly_after_and_nothing_is_skipped(
            zone in zone_strategy(),
            expr in expr_strategy(),
            start in 1_500_000_000i64..2_000_000_000,
            nanos in 0i32..1_000_000_000,
            fraction in 0.0f64..1.0,
        ) {
            let tz = zone::parse_time_zone(zone).unwrap();
            let schedule = Schedule::parse(expr).unwrap();
            let after = Timestamp::new(start, nanos).unwrap();
            let first = next_after(&schedule, &tz, after).unwrap();
            prop_assert!(first > after);
            let gap = first.duration_since(after).as_secs_f64();
            let between = after
                .checked_add(SignedDuration::from_secs_f64(gap * fraction))
                .unwrap();
            if between < first {
                prop_assert_eq!(next_after(&schedule, &tz, between), Some(first));
            }
        }
    }
}
