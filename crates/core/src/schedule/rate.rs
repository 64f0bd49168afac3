//! How often a spec's jobs may run, where the operator bounds it (`cron-hpa
//! --min-job-interval`). Each run writes the object's status (the job's condition is what keeps
//! a restart from running a firing twice) and usually the target's scale: a namespace user's
//! hundred CronHPAs with a job every second are two hundred writes a second to the API server,
//! and with a client-side rate limit they take the tokens every other object's writes wait on.
//! The schedule grammar allows a job every second (`* * * * * *`, `@every 1s`), as upstream's
//! does, so the bound is the operator's choice, off by default.

use super::cron::{Fields, Schedule};
use super::plan::CompiledSpec;
use crate::quoted::quoted;

impl Schedule {
    /// The least time between two firings, in seconds, or less (a lower bound): `@every`'s
    /// interval; for calendar fields, the two closest values of the finest field that has more
    /// than one (the seconds, else the minutes, else the hours), each field read as a circle
    /// (`0,59` seconds are one second apart across a minute boundary, whether or not the next
    /// minute fires); a day when each of them has one value.
    pub fn shortest_interval(&self) -> u64 {
        match self {
            Self::Every { seconds } => *seconds,
            Self::Fields(f) => shortest_in_fields(f),
        }
    }
}

fn shortest_in_fields(f: &Fields) -> u64 {
    circle_gap(f.second, 60)
        .or_else(|| circle_gap(f.minute, 60).map(|m| m * 60))
        .or_else(|| circle_gap(f.hour, 24).map(|h| h * 3600))
        .unwrap_or(86_400)
}

/// The least distance between two set bits of `bits` (values `0..size`) on a circle of `size`;
/// `None` with fewer than two.
fn circle_gap(bits: u64, size: u32) -> Option<u64> {
    let values: Vec<u32> = (0..size).filter(|v| bits & (1 << v) != 0).collect();
    let (first, last) = (*values.first()?, *values.last()?);
    if values.len() < 2 {
        return None;
    }
    let within = values.windows(2).map(|w| w[1] - w[0]);
    within.chain([size - last + first]).min().map(u64::from)
}

/// Whether `spec`'s jobs together run at most once every `min_seconds` (each at its
/// [`Schedule::shortest_interval`]); else why not, naming the jobs, for `status.invalidSpec`.
pub fn check(spec: &CompiledSpec, min_seconds: u64) -> Result<(), String> {
    if min_seconds == 0 {
        return Ok(());
    }
    let intervals: Vec<(&str, u64)> = spec
        .jobs
        .iter()
        .map(|j| (j.name.as_str(), j.schedule.shortest_interval().max(1)))
        .collect();
    // Runs per `min_seconds`, all jobs together: at most one.
    let runs: f64 = intervals
        .iter()
        .map(|(_, every)| min_seconds as f64 / *every as f64)
        .sum();
    if runs <= 1.0 + 1e-9 {
        return Ok(());
    }
    let jobs: Vec<String> = intervals
        .iter()
        .map(|(name, every)| format!("{} every {every}s", quoted(name)))
        .collect();
    Err(format!(
        "spec.jobs: the jobs may run {runs:.1} times in {min_seconds}s ({}); this cluster \
         allows one run per {min_seconds}s for all jobs of one CronHPA together (cron-hpa \
         --min-job-interval)",
        jobs.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::cron::{CronHorizontalPodAutoscalerSpec, ScalingJob};

    fn interval(expr: &str) -> u64 {
        Schedule::parse(expr)
            .unwrap_or_else(|e| panic!("{expr}: {e}"))
            .shortest_interval()
    }

    #[test]
    fn the_shortest_interval_of_each_kind_of_schedule() {
        for (expr, seconds) in [
            ("* * * * * *", 1),
            ("*/15 * * * * *", 15),
            ("0,30 5 * * * *", 30),
            ("0,59 5 * * * *", 1),
            ("0 * * * * *", 60),
            ("*/5 * * * *", 300),
            ("0 9-17 * * *", 3_600),
            ("0 9,21 * * *", 43_200),
            ("0 9 * * *", 86_400),
            ("@hourly", 3_600),
            ("@daily", 86_400),
            ("@every 90s", 90),
            ("@every 1h30m", 5_400),
        ] {
            assert_eq!(interval(expr), seconds, "{expr}");
        }
    }

    /// The lower bound holds: no two firings of the first week are closer.
    #[test]
    fn no_two_firings_are_closer_than_the_shortest_interval() {
        use crate::schedule::next::next_after;
        let zone = jiff::tz::TimeZone::UTC;
        for expr in [
            "*/7 * * * * *",
            "0,59 5 * * * *",
            "0 0,59 * * * *",
            "30 */20 3,4 * * *",
            "0 9,21 * * MON-FRI",
        ] {
            let schedule = Schedule::parse(expr).unwrap_or_else(|e| panic!("{e}"));
            let least = schedule.shortest_interval();
            let mut at = jiff::Timestamp::UNIX_EPOCH;
            for _ in 0..2_000 {
                let Some(next) = next_after(&schedule, &zone, at) else {
                    break;
                };
                if at != jiff::Timestamp::UNIX_EPOCH {
                    let gap = (next - at).get_seconds();
                    assert!(gap >= i64::try_from(least).unwrap_or(0), "{expr}: {gap}s");
                }
                at = next;
            }
        }
    }

    fn spec(schedules: &[&str]) -> CompiledSpec {
        let mut spec = CronHorizontalPodAutoscalerSpec::default();
        spec.scale_target_ref.kind = "Deployment".into();
        spec.scale_target_ref.name = "web".into();
        for (i, schedule) in schedules.iter().enumerate() {
            spec.jobs.push(ScalingJob {
                name: format!("j{i}"),
                schedule: (*schedule).into(),
                target_size: 2,
                run_once: false,
            });
        }
        CompiledSpec::compile(&spec).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn all_jobs_of_an_object_together_within_the_bound() {
        // Off: anything goes.
        assert_eq!(check(&spec(&["* * * * * *"]), 0), Ok(()));
        // One a minute, or two every two minutes, fit a minute's bound; a third does not.
        assert_eq!(check(&spec(&["0 * * * * *"]), 60), Ok(()));
        assert_eq!(
            check(&spec(&["0 */2 * * * *", "0 1-59/2 * * * *"]), 60),
            Ok(())
        );
        let err = check(&spec(&["0 * * * * *", "30 */2 * * * *"]), 60).unwrap_err();
        assert!(
            err.contains("1.5 times in 60s") && err.contains("\"j1\" every 120s"),
            "{err}"
        );
        let err = check(&spec(&["* * * * * *"]), 60).unwrap_err();
        assert!(
            err.starts_with("spec.jobs: the jobs may run 60.0 times in 60s"),
            "{err}"
        );
    }
}
