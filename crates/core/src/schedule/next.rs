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
/// `None` only when nothing fires within [`HORIZON_YEARS`] (or beyond year 9999).
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
