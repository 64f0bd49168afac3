//! Time zones and the mapping from local (civil) times to instants across daylight-saving
//! transitions.
//!
//! Rules (the same as Vixie cron uses and Kubernetes `CronJob` users expect):
//! * a local time that does not exist (skipped by spring-forward) maps to the first instant
//!   after it, i.e. the transition itself (02:30 on the Berlin spring-forward day fires at
//!   03:00 CEST); several skipped times collapse onto that one instant, so the job fires once;
//! * a local time that occurs twice (fall-back) maps to its first occurrence, so a repeated hour
//!   fires once.
//!
//! Invariant: [`resolve`] is monotone (a later civil time never maps to an earlier instant), which
//! the next-fire search relies on.

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, TimeZone};

use super::Error;

/// Looks up an IANA time zone in the bundled database. An empty name is UTC (the default).
pub fn parse_time_zone(name: &str) -> Result<TimeZone, Error> {
    if name.is_empty() {
        return Ok(TimeZone::UTC);
    }
    TimeZone::get(name).map_err(|_| Error::UnknownTimeZone(name.to_string()))
}

/// The instant at which a job scheduled for local time `civil` fires in `tz`.
/// `None` only outside jiff's supported range (years beyond ±9999).
pub fn resolve(civil: DateTime, tz: &TimeZone) -> Option<Timestamp> {
    match tz.to_ambiguous_timestamp(civil).offset() {
        AmbiguousOffset::Unambiguous { offset } => offset.to_timestamp(civil).ok(),
        // `before` is the offset in force before the transition: for a fold that is the first
        // occurrence of the repeated local time.
        AmbiguousOffset::Fold { before, .. } => before.to_timestamp(civil).ok(),
        AmbiguousOffset::Gap { before, after } => {
            // Read with the later offset, the civil time lies before the transition; the first
            // transition after that is where the gap ends.
            let early = after.to_timestamp(civil).ok()?;
            match tz.following(early).next() {
                Some(transition) => Some(transition.timestamp()),
                None => before.to_timestamp(civil).ok(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::date;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn time_zone_names() {
        assert_eq!(parse_time_zone("").unwrap(), TimeZone::UTC);
        assert!(parse_time_zone("Europe/Berlin").is_ok());
        assert!(parse_time_zone("America/New_York").is_ok());
        assert_eq!(
            parse_time_zone("Mars/Base").unwrap_err().to_string(),
            r#"unknown time zone "Mars/Base""#
        );
    }

    #[test]
    fn resolves_gaps_folds_and_plain_times() {
        let berlin = parse_time_zone("Europe/Berlin").unwrap();
        let new_york = parse_time_zone("America/New_York").unwrap();
        let cases = [
            // Plain winter and summer times.
            (
                &berlin,
                date(2026, 1, 15).at(8, 0, 0, 0),
                "2026-01-15T07:00:00Z",
            ),
            (
                &berlin,
                date(2026, 7, 15).at(8, 0, 0, 0),
                "2026-07-15T06:00:00Z",
            ),
            // Spring-forward: 02:00–02:59 do not exist on 2026-03-29 → 03:00 CEST = 01:00Z.
            (
                &berlin,
                date(2026, 3, 29).at(2, 0, 0, 0),
                "2026-03-29T01:00:00Z",
            ),
            (
                &berlin,
                date(2026, 3, 29).at(2, 30, 0, 0),
                "2026-03-29T01:00:00Z",
            ),
            (
                &berlin,
                date(2026, 3, 29).at(3, 0, 0, 0),
                "2026-03-29T01:00:00Z",
            ),
            // Fall-back: 02:00–02:59 happen twice on 2026-10-25 → the first (CEST) one.
            (
                &berlin,
                date(2026, 10, 25).at(2, 30, 0, 0),
                "2026-10-25T00:30:00Z",
            ),
            (
                &berlin,
                date(2026, 10, 25).at(3, 0, 0, 0),
                "2026-10-25T02:00:00Z",
            ),
            // New York: spring-forward 2026-03-08 02:00 EST → 03:00 EDT = 07:00Z.
            (
                &new_york,
                date(2026, 3, 8).at(2, 15, 0, 0),
                "2026-03-08T07:00:00Z",
            ),
            // Fall-back 2026-11-01: 01:30 happens twice; first is EDT = 05:30Z.
            (
                &new_york,
                date(2026, 11, 1).at(1, 30, 0, 0),
                "2026-11-01T05:30:00Z",
            ),
        ];
        for (tz, civil, want) in cases {
            assert_eq!(resolve(civil, tz), Some(ts(want)), "{civil}");
        }
    }
}
