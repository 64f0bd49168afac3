//! Which local days `spec.excludeDates` takes out.
//!
//! Whether an entry matches a date depends only on the date's [`DayFacts`] (month, day of
//! month, weekday, last day of its month), so every combination is decided once per spec and
//! a date then costs one lookup however many entries there are. A tenant may write 366 entries
//! and 100 jobs; read entry by entry, the days a job's next run steps over (up to ten years of
//! them) cost seconds of controller time at every evaluation.

use jiff::civil::Date;

use super::cron::{DayFacts, DaySchedule};

const MONTHS: usize = 12;
const DAYS: usize = 31;
const WEEKDAYS: usize = 7;
const COMBINATIONS: usize = MONTHS * DAYS * WEEKDAYS * 2;

/// The excluded days of one spec, by [`DayFacts`].
#[derive(Clone, PartialEq, Eq)]
pub struct ExcludedDays {
    /// Whether each combination is excluded; `None` when there are no entries.
    table: Option<Box<[bool]>>,
    /// Every combination is.
    every_day: bool,
}

impl ExcludedDays {
    /// Decides every combination against `entries` (none: no day is excluded).
    pub fn new(entries: &[DaySchedule]) -> Self {
        if entries.is_empty() {
            return Self {
                table: None,
                every_day: false,
            };
        }
        let mut table = vec![false; COMBINATIONS];
        for month in 1..=MONTHS {
            for day in 1..=DAYS {
                for weekday in 0..WEEKDAYS {
                    for last_of_month in [false, true] {
                        // Each is below 32, so the casts are exact.
                        let facts = DayFacts {
                            month: month as i8,
                            day: day as i8,
                            last_of_month,
                            weekday: weekday as i8,
                        };
                        table[index(facts)] = entries.iter().any(|e| e.contains_day_of(facts));
                    }
                }
            }
        }
        Self {
            every_day: table.iter().all(|e| *e),
            table: Some(table.into_boxed_slice()),
        }
    }

    /// True when every date is excluded: no job ever runs, and there is nothing to search.
    pub fn every_day(&self) -> bool {
        self.every_day
    }

    /// True when no job may fire on `date` (a civil date in the object's time zone).
    pub fn contains(&self, date: Date) -> bool {
        self.table
            .as_ref()
            .is_some_and(|table| table[index(DayFacts::of(date))])
    }
}

impl std::fmt::Debug for ExcludedDays {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self
            .table
            .as_ref()
            .map_or(0, |table| table.iter().filter(|e| **e).count());
        write!(f, "ExcludedDays({count} of {COMBINATIONS} combinations)")
    }
}

fn index(facts: DayFacts) -> usize {
    // A civil date's month, day and weekday are always in range, so none is negative.
    let at = |v: i8| usize::try_from(v).unwrap_or(0);
    (((at(facts.month) - 1) * DAYS + (at(facts.day) - 1)) * WEEKDAYS + at(facts.weekday)) * 2
        + usize::from(facts.last_of_month)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const ENTRIES: &[&str] = &[
        "* * * 25 12 *",
        "0 0 * * sat,sun",
        "* * * L 2 *",
        "* * * 1-7 * mon",
        "* * * 13 * fri",
        "* * * ? 11 fri",
        "* * * 29 2 *",
    ];

    proptest! {
        /// The table says what reading each entry says, on any date of four centuries.
        #[test]
        fn the_table_agrees_with_the_entries(
            days in 0i32..146_097,
            picked in proptest::collection::vec(0..ENTRIES.len(), 0..4),
        ) {
            let entries: Vec<DaySchedule> = picked
                .iter()
                .map(|&i| DaySchedule::parse(ENTRIES[i]).unwrap())
                .collect();
            let date = jiff::civil::date(2000, 1, 1)
                .checked_add(jiff::Span::new().days(days))
                .unwrap();
            let excluded = ExcludedDays::new(&entries);
            prop_assert_eq!(
                excluded.contains(date),
                entries.iter().any(|e| e.contains(date)),
                "{} with {:?}",
                date,
                picked
            );
        }
    }

    #[test]
    fn christmas_is_one_day_a_year() {
        let excluded = ExcludedDays::new(&[DaySchedule::parse("* * * 25 12 *").unwrap()]);
        let year = jiff::civil::date(2026, 1, 1);
        let days: Vec<Date> = (0..365)
            .map(|d| year.checked_add(jiff::Span::new().days(d)).unwrap())
            .filter(|d| excluded.contains(*d))
            .collect();
        assert_eq!(days, [jiff::civil::date(2026, 12, 25)]);
        assert!(!ExcludedDays::new(&[]).contains(jiff::civil::date(2026, 12, 25)));
        assert!(!excluded.every_day() && !ExcludedDays::new(&[]).every_day());
    }

    #[test]
    fn weekdays_and_weekends_together_are_every_day() {
        let parse = |e: &str| DaySchedule::parse(e).unwrap();
        let both = ExcludedDays::new(&[parse("0 0 * * mon-fri"), parse("0 0 * * sat,sun")]);
        assert!(both.every_day());
        let weekends = ExcludedDays::new(&[parse("0 0 * * sat,sun")]);
        assert!(!weekends.every_day());
    }
}
