//! Tick marks of a time axis whose values are seconds since a start (a replay's or a trace's
//! `t`), labelled the way a reader thinks of that span.
//!
//! The style follows the span shown: up to 20 minutes in seconds (`t (s)`), up to 6 hours in
//! minutes (`t (min)`), and anything longer, or any window that starts a day or more in, as a
//! day count and the hour of the day: `day 3` at each midnight, `12:00` between. A day is 24 h
//! from `t = 0` (a trace has no wall clock; its start is midnight of day 0), so the hour of day
//! is `t mod 86400`. The tick step is the smallest of a fixed list that gives at most as many
//! ticks as the caller has room for, so labels never overlap.

/// Seconds in a day.
pub const DAY: f64 = 86_400.0;

/// Shorter spans are labelled in seconds.
const SECONDS_UP_TO: f64 = 1_200.0;
/// Shorter spans (starting within day 0) are labelled in minutes; longer ones by day and hour.
const MINUTES_UP_TO: f64 = 6.0 * 3_600.0;

/// Tick steps of the seconds style.
const SECOND_STEPS: [f64; 9] = [1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0];
/// Tick steps of the minutes style, in seconds.
const MINUTE_STEPS: [f64; 7] = [60.0, 120.0, 300.0, 600.0, 900.0, 1_800.0, 3_600.0];
/// Tick steps of the day-and-hour style, in seconds (each divides a day, or is whole days).
const CLOCK_STEPS: [f64; 13] = [
    300.0,
    600.0,
    900.0,
    1_800.0,
    3_600.0,
    7_200.0,
    10_800.0,
    21_600.0,
    43_200.0,
    DAY,
    2.0 * DAY,
    7.0 * DAY,
    14.0 * DAY,
];

/// The ticks of a time axis and the caption that says how to read them.
#[derive(Clone, Debug, PartialEq)]
pub struct TimeTicks {
    /// Each tick's time (seconds) and label, in order.
    pub ticks: Vec<(f64, String)>,
    /// What the labels count: `t (s)`, `t (min)`, or days and hours of day.
    pub caption: &'static str,
}

/// The ticks of the span `lo`…`hi` seconds, at most `most` of them (at least 2).
pub fn time_ticks(lo: f64, hi: f64, most: usize) -> TimeTicks {
    let span = (hi - lo).max(0.0);
    let (steps, caption, label): (&[f64], &'static str, fn(f64) -> String) =
        if lo < DAY && span <= SECONDS_UP_TO {
            (&SECOND_STEPS, "t (s)", |t| crate::label(t))
        } else if lo < DAY && span <= MINUTES_UP_TO {
            (&MINUTE_STEPS, "t (min)", |t| crate::label(t / 60.0))
        } else {
            (
                &CLOCK_STEPS,
                "day N = N × 24 h after the start; hh:mm = time of day (t mod 24 h)",
                clock,
            )
        };
    let most = most.max(2);
    let count = |step: f64| ((hi / step).floor() - (lo / step).ceil()) as i64 + 1;
    // The last step is the coarsest; a span too long even for it is labelled at its ends.
    let step = steps
        .iter()
        .copied()
        .find(|&s| usize::try_from(count(s)).is_ok_and(|n| n <= most));
    let ticks = match step {
        Some(step) => {
            let first = (lo / step).ceil() as i64;
            let last = (hi / step).floor() as i64;
            (first..=last)
                .map(|i| {
                    let t = i as f64 * step;
                    (t, label(t))
                })
                .collect()
        }
        None => vec![(lo, label(lo)), (hi, label(hi))],
    };
    TimeTicks { ticks, caption }
}

/// `day N` at a midnight, else the hour of day `hh:mm`.
fn clock(t: f64) -> String {
    let seconds = t.round() as i64;
    let (day, of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    if of_day == 0 {
        format!("day {day}")
    } else {
        format!("{:02}:{:02}", of_day / 3_600, of_day % 3_600 / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(t: &TimeTicks) -> Vec<&str> {
        t.ticks.iter().map(|(_, l)| l.as_str()).collect()
    }

    #[test]
    fn a_short_scenario_keeps_seconds() {
        let t = time_ticks(0.0, 600.0, 16);
        assert_eq!(t.caption, "t (s)");
        assert_eq!(
            labels(&t),
            [
                "0", "60", "120", "180", "240", "300", "360", "420", "480", "540", "600"
            ]
        );
    }

    #[test]
    fn an_hour_or_two_is_in_minutes() {
        let t = time_ticks(0.0, 7_200.0, 16);
        assert_eq!(t.caption, "t (min)");
        assert_eq!(
            labels(&t),
            [
                "0", "10", "20", "30", "40", "50", "60", "70", "80", "90", "100", "110", "120"
            ]
        );
    }

    #[test]
    fn two_weeks_are_labelled_by_day() {
        let t = time_ticks(0.0, 1_209_300.0, 16);
        assert!(t.caption.starts_with("day N"), "{}", t.caption);
        let got = labels(&t);
        assert_eq!(got.len(), 14, "{got:?}");
        assert_eq!((got[0], got[3], got[13]), ("day 0", "day 3", "day 13"));
        let t = time_ticks(0.0, 1_209_300.0, 8);
        assert_eq!(labels(&t)[..3], ["day 0", "day 2", "day 4"], "less room");
    }

    #[test]
    fn a_day_of_a_long_trace_shows_the_hours_and_the_day() {
        let t = time_ticks(8.0 * DAY, 9.0 * DAY, 16);
        let got = labels(&t);
        assert_eq!(got.first(), Some(&"day 8"));
        assert_eq!(got.last(), Some(&"day 9"));
        assert!(got.contains(&"12:00"), "{got:?}");
        // Even two hours late in a trace are read as the time of day, not minutes from the start.
        let t = time_ticks(8.0 * DAY + 3_600.0, 8.0 * DAY + 3.0 * 3_600.0, 16);
        assert_eq!(labels(&t)[..2], ["01:00", "01:10"]);
    }

    #[test]
    fn a_span_beyond_every_step_is_labelled_at_its_ends() {
        let t = time_ticks(0.0, 1_000.0 * DAY, 4);
        assert_eq!(labels(&t), ["day 0", "day 1000"]);
    }
}
