//! Which jobs fire when: [`evaluate`], the "what runs now" decision the controller makes on every
//! wake-up, and [`plan`], the window `replay` prints, which is [`evaluate`] run at every instant a
//! job fires, the way a controller woken exactly then would see it.
//!
//! The skip rules, stated once in [`skip_reason`]:
//! * a firing on a day matched by `spec.excludeDates` (in the object's time zone) is skipped
//!   with [`SkipReason::ExcludedDate`];
//! * a `runOnce` job runs at its first non-excluded firing; later firings are skipped with
//!   [`SkipReason::RunOnceDone`] (and so are all firings when its progress says it is done).
//!
//! Firings at the same instant are ordered as the jobs appear in the spec.
//!
//! Invariants: plan output is sorted by (instant, spec index); every due firing lies in
//! `(last evaluated, now]` and is at most `missed_job_grace` old; a job is never due twice in one
//! evaluation.

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use super::cron::{DaySchedule, Schedule};
use super::excluded::ExcludedDays;
use super::{Error, Result, next, zone};
use crate::api::cron::{
    CronHorizontalPodAutoscalerSpec, CronHorizontalPodAutoscalerStatus, JobCondition, JobState,
    ScalingJob,
};
use crate::stable_hash::Fnv1a;

/// Most firings one [`plan`] lists; a wider window is an error rather than a huge allocation.
pub const MAX_FIRINGS: usize = 100_000;

/// Most excluded days (about ten years) a job's next run is looked for past; beyond, the job
/// has no next run.
const MAX_EXCLUDED_DAYS: usize = 3_700;

/// Most firings counted per job as missed in one [`evaluate`]; the count saturates there.
pub const MAX_MISSED_COUNT: usize = 10_000;

/// A spec with its time zone, excluded days and schedules parsed, ready to evaluate.
#[derive(Clone, Debug)]
pub struct CompiledSpec {
    /// `spec.timeZone` (UTC when absent or empty).
    pub time_zone: TimeZone,
    /// The days `spec.excludeDates` takes out.
    pub excluded: ExcludedDays,
    /// `spec.jobs`, parsed, in spec order.
    pub jobs: Vec<CompiledJob>,
}

/// One parsed job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompiledJob {
    /// The job's name.
    pub name: String,
    /// The parsed schedule.
    pub schedule: Schedule,
    /// The size the job sets.
    pub target_size: i32,
    /// Fire once, then stay done.
    pub run_once: bool,
}

/// What the controller knows about a job's past (from its status condition).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobProgress {
    /// A `runOnce` job that already ran.
    pub run_once_done: bool,
    /// When the job last ran; firings at or before it are not run again.
    pub last_run: Option<Timestamp>,
    /// When this version of the job was submitted (added or changed); firings at or before it
    /// belong to an earlier version and do not run.
    pub submitted: Option<Timestamp>,
}

impl JobProgress {
    /// What `condition`, the condition of `job`'s current version, records: its
    /// `lastProbeTime` is the last run when the state is `Succeed` or `Failed`, the submission
    /// time when it is `Submitted`; a `runOnce` job is done once it `Succeed`ed.
    pub fn from_condition(job: &ScalingJob, condition: &JobCondition) -> Self {
        let probed = condition.last_probe_time.as_ref().map(|t| t.0);
        let ran = condition.state != JobState::Submitted;
        Self {
            run_once_done: job.run_once && condition.state == JobState::Succeed,
            last_run: if ran { probed } else { None },
            submitted: if ran { None } else { probed },
        }
    }

    /// The instant up to which this job's firings are settled, given an overall lower bound.
    fn settled_until(self, floor: Timestamp) -> Timestamp {
        [self.last_run, self.submitted]
            .into_iter()
            .flatten()
            .fold(floor, Timestamp::max)
    }
}

/// The identity of one version of a job: a hash of the object's UID and every field of the job,
/// as 16 hex digits. Changing, renaming or re-adding a job gives a new id (its condition goes
/// back to `Submitted`); restarting the controller does not.
pub fn job_id(object_uid: &str, job: &ScalingJob) -> String {
    let parts = [
        object_uid,
        job.name.as_str(),
        job.schedule.as_str(),
        &job.target_size.to_string(),
        if job.run_once { "once" } else { "repeat" },
    ];
    // The separator keeps ("ab", "c") and ("a", "bc") apart.
    let hash = parts
        .into_iter()
        .fold(Fnv1a::default(), |hash, part| {
            hash.write(part.bytes().chain(std::iter::once(0xff)))
        })
        .finish();
    format!("{hash:016x}")
}

/// Each job's progress as recorded in `status.conditions`, in spec order. A condition counts
/// only when its `jobId` is the job's current [`job_id`] (a changed job starts afresh). Its
/// `lastProbeTime` is the last run when the state is `Succeed` or `Failed`, and the submission
/// time when it is `Submitted`.
pub fn progress_from_status(
    object_uid: &str,
    spec: &CronHorizontalPodAutoscalerSpec,
    status: Option<&CronHorizontalPodAutoscalerStatus>,
) -> Vec<JobProgress> {
    spec.jobs
        .iter()
        .map(|job| {
            let id = job_id(object_uid, job);
            let condition = status
                .into_iter()
                .flat_map(|s| s.conditions.iter())
                .find(|c| c.job_id == id && c.name == job.name);
            condition.map_or_else(JobProgress::default, |c| {
                JobProgress::from_condition(job, c)
            })
        })
        .collect()
}

/// Why a firing does not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SkipReason {
    /// The local day matches `spec.excludeDates`.
    ExcludedDate,
    /// A `runOnce` job that already ran.
    RunOnceDone,
}

impl SkipReason {
    /// The wire name (`excludedDate`, `runOnceDone`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ExcludedDate => "excludedDate",
            Self::RunOnceDone => "runOnceDone",
        }
    }
}

/// One scheduled firing of one job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Firing {
    /// The instant the job fires.
    pub at: Timestamp,
    /// Index of the job in `spec.jobs`.
    pub job_index: usize,
    /// The job's name.
    pub job: String,
    /// The size the job sets.
    pub target_size: i32,
    /// `None` when the job runs, else why it does not.
    pub skipped: Option<SkipReason>,
}

/// Firings older than the grace period that were not run (reported, never silently dropped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missed {
    /// Index of the job in `spec.jobs`.
    pub job_index: usize,
    /// The job's name.
    pub job: String,
    /// The most recent missed firing (once `count` saturates, the last one counted).
    pub last: Timestamp,
    /// How many firings were missed (saturates at [`MAX_MISSED_COUNT`]).
    pub count: usize,
}

/// What the controller should do at `now`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Evaluation {
    /// Jobs to run now, in order (instant, then spec order); at most one entry per job, its
    /// latest firing within the grace period.
    pub due: Vec<Firing>,
    /// Firings in the evaluated interval that were skipped (for Events).
    pub skipped: Vec<Firing>,
    /// Jobs whose firings passed more than the grace period ago without running.
    pub missed: Vec<Missed>,
    /// Per job (spec order): the next firing after `now` that will run, if any.
    pub next_runs: Vec<Option<Timestamp>>,
    /// When to evaluate again: the earliest of `next_runs`.
    pub next_wake: Option<Timestamp>,
}

impl CompiledSpec {
    /// Parses the spec. Errors carry the field path (`spec.jobs[2].schedule: job "c": …`).
    pub fn compile(spec: &CronHorizontalPodAutoscalerSpec) -> Result<Self> {
        let time_zone = zone::parse_time_zone(spec.time_zone.as_deref().unwrap_or_default())
            .map_err(|e| Error::TimeZone(Box::new(e)))?;
        let exclude_dates: Vec<DaySchedule> = spec
            .exclude_dates
            .iter()
            .enumerate()
            .map(|(index, expr)| {
                DaySchedule::parse(expr).map_err(|e| Error::ExcludeDate {
                    index,
                    source: Box::new(e),
                })
            })
            .collect::<Result<_>>()?;
        let jobs = spec
            .jobs
            .iter()
            .enumerate()
            .map(|(index, job)| {
                Ok(CompiledJob {
                    name: job.name.clone(),
                    schedule: Schedule::parse(&job.schedule).map_err(|e| Error::Job {
                        index,
                        name: job.name.clone(),
                        source: Box::new(e),
                    })?,
                    target_size: job.target_size,
                    run_once: job.run_once,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            time_zone,
            excluded: ExcludedDays::new(&exclude_dates),
            jobs,
        })
    }

    /// True when `at` falls on an excluded day in the object's time zone.
    pub fn is_excluded(&self, at: Timestamp) -> bool {
        self.excluded
            .contains(self.time_zone.to_datetime(at).date())
    }

    /// The next firing of job `index` strictly after `after` that is not on an excluded day.
    /// `None` when the job never fires again or is a finished `runOnce` job.
    pub fn next_run(
        &self,
        index: usize,
        progress: JobProgress,
        after: Timestamp,
    ) -> Option<Timestamp> {
        let job = self.jobs.get(index)?;
        if (job.run_once && progress.run_once_done) || self.excluded.every_day() {
            return None;
        }
        self.next_free_firing(&job.schedule, after).0
    }

    /// The first firing of `schedule` after `after` on a day that is not excluded, and how many
    /// firings the search asked the schedule for.
    fn next_free_firing(
        &self,
        schedule: &Schedule,
        after: Timestamp,
    ) -> (Option<Timestamp>, usize) {
        // The search gives up after about ten years of excluded days (or of excluded firings,
        // each on a day of its own), and at a firing more than that many days of the calendar
        // away: a schedule that fires rarely (29 February) on days that are all excluded would
        // otherwise be searched, one firing at a time, to the year 9999.
        let horizon = i64::try_from(MAX_EXCLUDED_DAYS).ok().and_then(|days| {
            let today = self.time_zone.to_datetime(after).date();
            today.checked_add(jiff::Span::new().days(days)).ok()
        });
        let Some(horizon) = horizon else {
            return (None, 0);
        };
        let mut cursor = after;
        let mut excluded_days = 0;
        for asked in 1..=MAX_EXCLUDED_DAYS {
            let Some(at) = next::next_after(schedule, &self.time_zone, cursor) else {
                return (None, asked);
            };
            let mut day = self.time_zone.to_datetime(at).date();
            if day > horizon {
                return (None, asked);
            }
            if !self.excluded.contains(day) {
                return (Some(at), asked);
            }
            // Step over the excluded days by the calendar alone, then ask the schedule again
            // from the first day that is not.
            while self.excluded.contains(day) {
                excluded_days += 1;
                let next = day.tomorrow().ok();
                match next {
                    Some(next) if excluded_days <= MAX_EXCLUDED_DAYS => day = next,
                    _ => return (None, asked),
                }
            }
            match self.before_local_day(day) {
                Some(before) => cursor = before,
                None => return (None, asked),
            }
        }
        (None, MAX_EXCLUDED_DAYS)
    }

    /// The last instant before local day `day` (so `next_after` of it is the first firing on
    /// `day` or later).
    fn before_local_day(&self, day: jiff::civil::Date) -> Option<Timestamp> {
        let start = zone::resolve(day.at(0, 0, 0, 0), &self.time_zone)?;
        start.checked_sub(SignedDuration::from_nanos(1)).ok()
    }

    fn firing(&self, index: usize, at: Timestamp, skipped: Option<SkipReason>) -> Firing {
        let job = &self.jobs[index];
        Firing {
            at,
            job_index: index,
            job: job.name.clone(),
            target_size: job.target_size,
            skipped,
        }
    }
}

/// Every firing in `[from, to)`, sorted by instant and then spec order, with skipped ones
/// marked. `progress[i]` is job `i`'s past (missing entries: never ran).
///
/// This is the controller's [`evaluate`], called at each instant some job fires (skipped or
/// not) with no grace needed, each run recorded in the progress passed on as the controller
/// records it in status; so a replay shows exactly what the controller would do.
pub fn plan(
    spec: &CompiledSpec,
    progress: &[JobProgress],
    from: Timestamp,
    to: Timestamp,
) -> Result<Vec<Firing>> {
    let mut firings = Vec::new();
    let Ok(mut last_evaluated) = from.checked_sub(SignedDuration::from_nanos(1)) else {
        return Ok(firings);
    };
    let mut progress: Vec<JobProgress> = (0..spec.jobs.len())
        .map(|index| progress.get(index).copied().unwrap_or_default())
        .collect();
    while let Some(now) = next_firing_instant(spec, last_evaluated)
        && now < to
    {
        let evaluation = evaluate(spec, &progress, last_evaluated, now, SignedDuration::ZERO);
        for run in &evaluation.due {
            let state = &mut progress[run.job_index];
            state.last_run = Some(run.at);
            state.run_once_done |= spec.jobs[run.job_index].run_once;
        }
        // Everything evaluated here fired at `now`; ties go in spec order.
        let mut at_now = evaluation.due;
        at_now.extend(evaluation.skipped);
        at_now.sort_by_key(|f| f.job_index);
        if firings.len() + at_now.len() > MAX_FIRINGS {
            return Err(Error::TooManyFirings {
                limit: MAX_FIRINGS,
                from,
                to,
            });
        }
        firings.extend(at_now);
        last_evaluated = now;
    }
    Ok(firings)
}

/// The earliest instant after `after` at which some job's schedule fires, whether or not that
/// firing will be skipped.
fn next_firing_instant(spec: &CompiledSpec, after: Timestamp) -> Option<Timestamp> {
    spec.jobs
        .iter()
        .filter_map(|job| next::next_after(&job.schedule, &spec.time_zone, after))
        .min()
}

/// Why a job's firing at `at` does not run, or `None` when it runs. `done` says the job is a
/// `runOnce` job that already ran.
pub fn skip_reason(spec: &CompiledSpec, done: bool, at: Timestamp) -> Option<SkipReason> {
    if done {
        Some(SkipReason::RunOnceDone)
    } else if spec.is_excluded(at) {
        Some(SkipReason::ExcludedDate)
    } else {
        None
    }
}

/// What runs at `now`, given that everything up to `last_evaluated` was already handled.
///
/// `last_evaluated` is a lower bound for every job (after a restart: the earliest instant
/// that may hold unhandled firings, e.g. the oldest `lastProbeTime`); each job's own
/// `last_run` / `submitted` narrows it further.
///
/// For each job, the firings in `(max(last_evaluated, last_run, submitted), now]` count: the
/// latest one no older than `missed_job_grace` is due (once, even if several fell in the
/// interval, e.g. after a restart); older ones are reported in `missed`. Skipped firings are
/// listed in `skipped`. `next_runs` and `next_wake` say when to come back.
pub fn evaluate(
    spec: &CompiledSpec,
    progress: &[JobProgress],
    last_evaluated: Timestamp,
    now: Timestamp,
    missed_job_grace: SignedDuration,
) -> Evaluation {
    let grace_start = now.checked_sub(missed_job_grace).unwrap_or(now);
    let mut out = Evaluation::default();
    for (index, job) in spec.jobs.iter().enumerate() {
        let state = progress.get(index).copied().unwrap_or_default();
        let done = job.run_once && state.run_once_done;
        let mut cursor = state.settled_until(last_evaluated);
        let mut due = None;
        let mut missed: Option<Missed> = None;
        let mut seen = 0usize;
        while let Some(at) = next::next_after(&job.schedule, &spec.time_zone, cursor) {
            if at > now {
                break;
            }
            cursor = at;
            seen += 1;
            if let Some(reason) = skip_reason(spec, done, at) {
                if out.skipped.len() < MAX_MISSED_COUNT {
                    out.skipped.push(spec.firing(index, at, Some(reason)));
                }
            } else if at < grace_start {
                let m = missed.get_or_insert_with(|| Missed {
                    job_index: index,
                    job: job.name.clone(),
                    last: at,
                    count: 0,
                });
                m.last = at;
                m.count = (m.count + 1).min(MAX_MISSED_COUNT);
            } else {
                // Only the latest firing within the grace period runs.
                due = Some(spec.firing(index, at, None));
            }
            if seen >= MAX_MISSED_COUNT && at < grace_start {
                // A long outage of a fast schedule: stop counting and jump to the grace window.
                cursor = grace_start
                    .checked_sub(SignedDuration::from_nanos(1))
                    .unwrap_or(grace_start)
                    .max(at);
            }
        }
        out.missed.extend(missed);
        // A runOnce job that is due now is done after this run.
        let after_run = JobProgress {
            run_once_done: done || (job.run_once && due.is_some()),
            ..state
        };
        out.due.extend(due);
        out.next_runs.push(spec.next_run(index, after_run, now));
    }
    out.due.sort_by_key(|f| (f.at, f.job_index));
    out.skipped.sort_by_key(|f| (f.at, f.job_index));
    out.next_wake = out.next_runs.iter().flatten().min().copied();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn compile(spec: &CronHorizontalPodAutoscalerSpec) -> CompiledSpec {
        CompiledSpec::compile(spec).unwrap()
    }

    /// (instant, job, skipped) triples of a plan, for compact assertions.
    fn lines(firings: &[Firing]) -> Vec<(String, String, Option<SkipReason>)> {
        firings
            .iter()
            .map(|f| (f.at.to_string(), f.job.clone(), f.skipped))
            .collect()
    }

    fn run(at: &str, job: &str) -> (String, String, Option<SkipReason>) {
        (ts(at).to_string(), job.to_string(), None)
    }

    fn skip(at: &str, job: &str, why: SkipReason) -> (String, String, Option<SkipReason>) {
        (ts(at).to_string(), job.to_string(), Some(why))
    }

    // upstream: AliyunContainerService/kubernetes-cronhpa-controller README sample
    // (scale-down "0 */7 * * * ?", scale-up "0 */3 * * * ?"); ties in spec order.
    #[test]
    fn sample_plan_with_ties_in_spec_order() {
        let spec = CronHorizontalPodAutoscalerSpec::test()
            .tz("Asia/Shanghai")
            .job("scale-down", "0 */7 * * * ?", 3)
            .job("scale-up", "0 */3 * * * ?", 6);
        let got = plan(
            &compile(&spec),
            &[],
            ts("2019-12-18T15:00:00Z"),
            ts("2019-12-18T15:10:00Z"),
        )
        .unwrap();
        assert_eq!(
            lines(&got),
            [
                run("2019-12-18T15:00:00Z", "scale-down"),
                run("2019-12-18T15:00:00Z", "scale-up"),
                run("2019-12-18T15:03:00Z", "scale-up"),
                run("2019-12-18T15:06:00Z", "scale-up"),
                run("2019-12-18T15:07:00Z", "scale-down"),
                run("2019-12-18T15:09:00Z", "scale-up"),
            ]
        );
        assert_eq!(got[0].target_size, 3);
        assert_eq!(got[1].target_size, 6);
    }

    #[test]
    fn window_is_from_inclusive_to_exclusive() {
        let spec = CronHorizontalPodAutoscalerSpec::test().job("h", "@hourly", 1);
        let got = plan(
            &compile(&spec),
            &[],
            ts("2026-01-01T01:00:00Z"),
            ts("2026-01-01T03:00:00Z"),
        )
        .unwrap();
        assert_eq!(
            lines(&got),
            [
                run("2026-01-01T01:00:00Z", "h"),
                run("2026-01-01T02:00:00Z", "h")
            ]
        );
    }

    // upstream: kubernetes-cronhpa-controller cronjob_test.go TestSingleExcludeDates
    // (a day matched by an excludeDates expression is off). The day is the local day.
    #[test]
    fn excluded_dates_use_the_local_day() {
        let spec = CronHorizontalPodAutoscalerSpec::test()
            .tz("Europe/Berlin")
            .exclude("* * * 25 12 *")
            .job("morning", "0 30 0 * * *", 4);
        let got = plan(
            &compile(&spec),
            &[],
            ts("2026-12-23T12:00:00Z"),
            ts("2026-12-26T12:00:00Z"),
        )
        .unwrap();
        // 00:30 CET is 23:30Z the evening before.
        assert_eq!(
            lines(&got),
            [
                run("2026-12-23T23:30:00Z", "morning"),
                skip("2026-12-24T23:30:00Z", "morning", SkipReason::ExcludedDate),
                run("2026-12-25T23:30:00Z", "morning"),
            ]
        );
    }

    #[test]
    fn weekend_exclusion_with_five_field_expressions() {
        let spec = CronHorizontalPodAutoscalerSpec::test()
            .exclude("0 0 * * sat,sun")
            .job("daily", "0 9 * * *", 4);
        let got = plan(
            &compile(&spec),
            &[],
            ts("2026-03-27T00:00:00Z"),
            ts("2026-03-31T00:00:00Z"),
        )
        .unwrap();
        let skipped: Vec<_> = got.iter().map(|f| f.skipped.is_some()).collect();
        // Fri, Sat, Sun, Mon.
        assert_eq!(skipped, [false, true, true, false]);
    }

    #[test]
    fn run_once_runs_once_then_is_done() {
        let spec = CronHorizontalPodAutoscalerSpec::test().job_once("event", "@hourly", 50);
        let compiled = compile(&spec);
        let (from, to) = (ts("2026-11-11T00:00:00Z"), ts("2026-11-11T03:00:00Z"));
        let got = plan(&compiled, &[], from, to).unwrap();
        assert_eq!(
            lines(&got),
            [
                run("2026-11-11T00:00:00Z", "event"),
                skip("2026-11-11T01:00:00Z", "event", SkipReason::RunOnceDone),
                skip("2026-11-11T02:00:00Z", "event", SkipReason::RunOnceDone),
            ]
        );
        let done = JobProgress {
            run_once_done: true,
            last_run: None,
            submitted: None,
        };
        let got = plan(&compiled, &[done], from, to).unwrap();
        assert!(
            got.iter()
                .all(|f| f.skipped == Some(SkipReason::RunOnceDone))
        );
    }

    #[test]
    fn run_once_is_not_used_up_by_an_excluded_day() {
        let spec = CronHorizontalPodAutoscalerSpec::test()
            .exclude("* * * 1 * *")
            .job_once("first", "0 0 12 * * *", 5);
        let got = plan(
            &compile(&spec),
            &[],
            ts("2026-06-01T00:00:00Z"),
            ts("2026-06-03T00:00:00Z"),
        )
        .unwrap();
        assert_eq!(
            lines(&got),
            [
                skip("2026-06-01T12:00:00Z", "first", SkipReason::ExcludedDate),
                run("2026-06-02T12:00:00Z", "first"),
            ]
        );
    }

    #[test]
    fn firings_up_to_the_last_run_are_not_repeated() {
        let spec = CronHorizontalPodAutoscalerSpec::test().job("m", "0 * * * * *", 1);
        let progress = JobProgress {
            run_once_done: false,
            last_run: Some(ts("2026-01-01T00:02:00Z")),
            submitted: None,
        };
        let got = plan(
            &compile(&spec),
            &[progress],
            ts("2026-01-01T00:00:00Z"),
            ts("2026-01-01T00:05:00Z"),
        )
        .unwrap();
        assert_eq!(
            lines(&got),
            [
                run("2026-01-01T00:03:00Z", "m"),
                run("2026-01-01T00:04:00Z", "m")
            ]
        );
    }

    #[test]
    fn spring_forward_in_a_plan_fires_once_at_the_end_of_the_gap() {
        let spec = CronHorizontalPodAutoscalerSpec::test()
            .tz("Europe/Berlin")
            .job("half-hourly", "0 */30 * * * *", 2);
        let got = plan(
            &compile(&spec),
            &[],
            ts("2026-03-29T00:00:00Z"),
            ts("2026-03-29T02:00:00Z"),
        )
        .unwrap();
        let at: Vec<String> = got.iter().map(|f| f.at.to_string()).collect();
        assert_eq!(
            at,
            [
                "2026-03-29T00:00:00Z", // 01:00 CET
                "2026-03-29T00:30:00Z", // 01:30 CET
                "2026-03-29T01:00:00Z", // 02:00 and 02:30 skipped → once at 03:00 CEST
                "2026-03-29T01:30:00Z", // 03:30 CEST
            ]
        );
    }

    #[test]
    fn fall_back_in_a_plan_fires_the_repeated_hour_once() {
        let spec = CronHorizontalPodAutoscalerSpec::test()
            .tz("America/New_York")
            .job("hourly", "0 0 * * * *", 2);
        let got = plan(
            &compile(&spec),
            &[],
            ts("2026-11-01T04:00:00Z"),
            ts("2026-11-01T08:00:00Z"),
        )
        .unwrap();
        let at: Vec<String> = got.iter().map(|f| f.at.to_string()).collect();
        // 00:00 EDT, 01:00 EDT, (01:00 EST skipped), 02:00 EST.
        assert_eq!(
            at,
            [
                "2026-11-01T04:00:00Z",
                "2026-11-01T05:00:00Z",
                "2026-11-01T07:00:00Z"
            ]
        );
    }

    #[test]
    fn too_wide_a_window_is_an_error() {
        let spec = CronHorizontalPodAutoscalerSpec::test().job("s", "* * * * * *", 1);
        let err = plan(
            &compile(&spec),
            &[],
            ts("2026-01-01T00:00:00Z"),
            ts("2026-01-03T00:00:00Z"),
        )
        .unwrap_err();
        assert!(matches!(err, Error::TooManyFirings { .. }), "{err}");
    }

    #[test]
    fn compile_errors_name_the_job_and_field() {
        let spec = CronHorizontalPodAutoscalerSpec::test()
            .job("ok", "@daily", 1)
            .job("peak", "0 0 25 * * *", 1);
        let err = CompiledSpec::compile(&spec).unwrap_err().to_string();
        assert!(
            err.starts_with(
                r#"spec.jobs[1].schedule: job "peak": invalid schedule "0 0 25 * * *": hour field"#
            ),
            "{err}"
        );
        let spec = CronHorizontalPodAutoscalerSpec::test().tz("Mars/Base");
        let err = CompiledSpec::compile(&spec).unwrap_err().to_string();
        assert_eq!(err, r#"spec.timeZone: unknown time zone "Mars/Base""#);
        let spec = CronHorizontalPodAutoscalerSpec::test().exclude("* * * 32 * *");
        let err = CompiledSpec::compile(&spec).unwrap_err().to_string();
        assert!(err.starts_with("spec.excludeDates[0]: "), "{err}");
    }

    fn grace() -> SignedDuration {
        SignedDuration::from_mins(5)
    }

    #[test]
    fn a_job_due_now_runs_and_the_next_wake_is_its_next_firing() {
        let spec = CronHorizontalPodAutoscalerSpec::test()
            .job("peak", "0 0 8 * * *", 10)
            .job("night", "0 0 20 * * *", 2);
        let e = evaluate(
            &compile(&spec),
            &[],
            ts("2026-05-04T07:59:59Z"),
            ts("2026-05-04T08:00:00.4Z"),
            grace(),
        );
        assert_eq!(lines(&e.due), [run("2026-05-04T08:00:00Z", "peak")]);
        assert!(e.missed.is_empty());
        assert_eq!(
            e.next_runs,
            [
                Some(ts("2026-05-05T08:00:00Z")),
                Some(ts("2026-05-04T20:00:00Z"))
            ]
        );
        assert_eq!(e.next_wake, Some(ts("2026-05-04T20:00:00Z")));
    }

    #[test]
    fn after_a_restart_a_recent_miss_runs_once_and_older_ones_are_reported() {
        let spec = CronHorizontalPodAutoscalerSpec::test().job("m", "0 * * * * *", 3);
        // Down from 07:50 to 08:00:30; grace 5 min → 07:51–07:55 missed, only 08:00 runs.
        let e = evaluate(
            &compile(&spec),
            &[],
            ts("2026-05-04T07:50:00Z"),
            ts("2026-05-04T08:00:30Z"),
            grace(),
        );
        assert_eq!(lines(&e.due), [run("2026-05-04T08:00:00Z", "m")]);
        assert_eq!(
            e.missed,
            [Missed {
                job_index: 0,
                job: "m".into(),
                last: ts("2026-05-04T07:55:00Z"),
                count: 5
            }]
        );
    }

    #[test]
    fn a_job_submitted_after_its_time_waits_for_the_next_firing() {
        let spec = CronHorizontalPodAutoscalerSpec::test()
            .job("new", "0 0 8 * * *", 10)
            .job("old", "0 0 8 * * *", 5);
        let new = JobProgress {
            submitted: Some(ts("2026-05-04T08:00:10Z")),
            ..JobProgress::default()
        };
        let old = JobProgress {
            submitted: Some(ts("2026-05-01T00:00:00Z")),
            ..JobProgress::default()
        };
        let e = evaluate(
            &compile(&spec),
            &[new, old],
            ts("2026-05-04T07:00:00Z"),
            ts("2026-05-04T08:00:30Z"),
            grace(),
        );
        assert_eq!(lines(&e.due), [run("2026-05-04T08:00:00Z", "old")]);
        assert_eq!(e.next_runs[0], Some(ts("2026-05-05T08:00:00Z")));
    }

    #[test]
    fn a_miss_older_than_the_grace_is_reported_not_run() {
        let spec = CronHorizontalPodAutoscalerSpec::test().job("h", "@hourly", 3);
        let e = evaluate(
            &compile(&spec),
            &[],
            ts("2026-05-04T07:00:00Z"),
            ts("2026-05-04T08:10:00Z"),
            grace(),
        );
        assert!(e.due.is_empty());
        assert_eq!(e.missed.len(), 1);
        assert_eq!(e.missed[0].last, ts("2026-05-04T08:00:00Z"));
        assert_eq!(e.next_wake, Some(ts("2026-05-04T09:00:00Z")));
    }

    #[test]
    fn run_once_jobs_in_evaluation() {
        let spec = CronHorizontalPodAutoscalerSpec::test().job_once("sale", "0 0 20 11 11 *", 50);
        let compiled = compile(&spec);
        let (last, now) = (ts("2026-11-11T19:59:59Z"), ts("2026-11-11T20:00:01Z"));
        let e = evaluate(&compiled, &[], last, now, grace());
        assert_eq!(lines(&e.due), [run("2026-11-11T20:00:00Z", "sale")]);
        assert_eq!(e.next_runs, [None], "done once it ran");
        let done = JobProgress {
            run_once_done: true,
            last_run: None,
            submitted: None,
        };
        let e = evaluate(&compiled, &[done], last, now, grace());
        assert!(e.due.is_empty());
        assert_eq!(e.skipped[0].skipped, Some(SkipReason::RunOnceDone));
        assert_eq!(e.next_wake, None);
    }

    #[test]
    fn excluded_days_are_skipped_and_next_run_jumps_past_them() {
        let spec = CronHorizontalPodAutoscalerSpec::test()
            .exclude("* * * 25 12 *")
            .job("m", "0 */10 * * * *", 3);
        let e = evaluate(
            &compile(&spec),
            &[],
            ts("2026-12-25T09:55:00Z"),
            ts("2026-12-25T10:00:00Z"),
            grace(),
        );
        assert!(e.due.is_empty());
        assert_eq!(e.skipped[0].skipped, Some(SkipReason::ExcludedDate));
        assert_eq!(e.next_wake, Some(ts("2026-12-26T00:00:00Z")));
    }

    #[test]
    fn a_run_of_excluded_days_is_stepped_over_to_the_first_free_one() {
        let spec = CronHorizontalPodAutoscalerSpec::test()
            .exclude("* * * 24-26 12 *")
            .exclude("0 0 * * sun")
            .job("morning", "0 0 8 * * *", 3);
        let compiled = compile(&spec);
        // 2026-12-24 to 26 are excluded, 27 is a Sunday: the 28th is the next run.
        let next = compiled.next_run(0, JobProgress::default(), ts("2026-12-23T09:00:00Z"));
        assert_eq!(next, Some(ts("2026-12-28T08:00:00Z")));
        // In Berlin's time zone the days are Berlin's.
        let mut berlin = spec.clone();
        berlin.time_zone = Some("Europe/Berlin".into());
        let next = compile(&berlin).next_run(0, JobProgress::default(), ts("2026-12-23T09:00:00Z"));
        assert_eq!(next, Some(ts("2026-12-28T07:00:00Z")));
    }

    #[test]
    fn a_rare_schedule_on_excluded_days_is_not_searched_to_the_end_of_time() {
        // 29 February, every one excluded: without a calendar bound the search walks four
        // years per step to the year 9999 (about 2,000 steps per job, 100 jobs per object).
        let mut spec = CronHorizontalPodAutoscalerSpec::test().exclude("* * * 29 2 *");
        for i in 0..100 {
            spec = spec.job(&format!("j{i}"), "0 0 0 29 2 *", 1);
        }
        let compiled = compile(&spec);
        let after = ts("2026-03-01T00:00:00Z");
        assert_eq!(compiled.next_run(0, JobProgress::default(), after), None);
        let (at, asked) = compiled.next_free_firing(&compiled.jobs[0].schedule, after);
        assert_eq!(at, None);
        // 2028, 2032 and 2036 are within ten years; 2040 is past them and ends the search.
        assert_eq!(asked, 4);
        // A 29 February that is not excluded is still found years ahead.
        let free = CronHorizontalPodAutoscalerSpec::test().job("leap", "0 0 0 29 2 *", 1);
        assert_eq!(
            compile(&free).next_run(0, JobProgress::default(), ts("2026-03-01T00:00:00Z")),
            Some(ts("2028-02-29T00:00:00Z"))
        );
    }

    #[test]
    fn jobs_on_days_that_are_all_excluded_never_run() {
        // The most a tenant may write: 366 entries (the last every day) and 100 jobs.
        let mut spec = CronHorizontalPodAutoscalerSpec::test();
        spec.exclude_dates = (1..=365)
            .map(|d| format!("* * * {} {} *", 1 + d % 28, 1 + d % 12))
            .chain(["* * * * * *".to_owned()])
            .collect();
        for i in 0..100 {
            spec = spec.job(&format!("j{i}"), "* * * * * *", 1);
        }
        let compiled = compile(&spec);
        let e = evaluate(
            &compiled,
            &[],
            ts("2026-03-28T00:00:00Z"),
            ts("2026-03-28T00:00:01Z"),
            grace(),
        );
        assert!(e.due.is_empty());
        assert_eq!(e.skipped.len(), 100);
        assert_eq!(e.next_runs, vec![None; 100]);
        assert_eq!(e.next_wake, None);
    }

    #[test]
    fn a_long_outage_of_a_fast_schedule_is_bounded() {
        let spec = CronHorizontalPodAutoscalerSpec::test().job("s", "* * * * * *", 3);
        let e = evaluate(
            &compile(&spec),
            &[],
            ts("2026-05-01T00:00:00Z"),
            ts("2026-05-08T00:00:00Z"),
            grace(),
        );
        assert_eq!(e.missed[0].count, MAX_MISSED_COUNT);
        assert_eq!(lines(&e.due), [run("2026-05-08T00:00:00Z", "s")]);
    }

    #[test]
    fn job_ids_change_with_the_job_not_with_time() {
        let spec = CronHorizontalPodAutoscalerSpec::test().job("a", "@daily", 3);
        let job = &spec.jobs[0];
        let id = job_id("uid-1", job);
        assert_eq!(id.len(), 16);
        assert_eq!(id, job_id("uid-1", job), "stable");
        assert_ne!(id, job_id("uid-2", job), "per object");
        let mut changed = job.clone();
        changed.target_size = 4;
        assert_ne!(id, job_id("uid-1", &changed));
        changed = job.clone();
        changed.run_once = true;
        assert_ne!(id, job_id("uid-1", &changed));
    }

    #[test]
    fn progress_comes_from_conditions_of_the_current_job_version() {
        use crate::api::cron::JobCondition;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let spec = CronHorizontalPodAutoscalerSpec::test()
            .job_once("sale", "0 0 20 11 11 *", 50)
            .job("daily", "@daily", 3)
            .job("new", "@hourly", 1);
        let ran = ts("2026-11-11T20:00:00Z");
        let condition = |job: &ScalingJob, state| JobCondition {
            job_id: job_id("uid", job),
            name: job.name.clone(),
            schedule: job.schedule.clone(),
            state,
            last_probe_time: Some(Time(ran)),
            message: String::new(),
        };
        let mut stale = condition(&spec.jobs[2], JobState::Succeed);
        stale.job_id = "0000000000000000".into();
        let status = CronHorizontalPodAutoscalerStatus {
            conditions: vec![
                condition(&spec.jobs[0], JobState::Succeed),
                condition(&spec.jobs[1], JobState::Failed),
                stale,
            ],
            ..Default::default()
        };
        let got = progress_from_status("uid", &spec, Some(&status));
        assert_eq!(
            got,
            [
                JobProgress {
                    run_once_done: true,
                    last_run: Some(ran),
                    submitted: None,
                },
                JobProgress {
                    run_once_done: false,
                    last_run: Some(ran),
                    submitted: None,
                },
                JobProgress::default(),
            ]
        );
        assert_eq!(
            progress_from_status("uid", &spec, None),
            vec![JobProgress::default(); 3]
        );
    }

    proptest! {
        // Invariant: a plan is sorted by (instant, spec index) and lies inside [from, to).
        #[test]
        fn plans_are_sorted_and_inside_the_window(
            start in 1_600_000_000i64..1_900_000_000,
            hours in 1i64..72,
            zone in prop::sample::select(vec!["UTC", "Europe/Berlin", "America/New_York"]),
        ) {
            let spec = CronHorizontalPodAutoscalerSpec::test()
                .tz(zone)
                .exclude("* * * 1 * *")
                .job("a", "0 */7 * * * ?", 1)
                .job("b", "0 */3 * * * ?", 2)
                .job_once("c", "0 0 * * * *", 3)
                .job("d", "@every 90s", 4);
            let from = Timestamp::from_second(start).unwrap();
            let to = Timestamp::from_second(start + hours * 3600).unwrap();
            let got = plan(&compile(&spec), &[], from, to).unwrap();
            for pair in got.windows(2) {
                prop_assert!((pair[0].at, pair[0].job_index) < (pair[1].at, pair[1].job_index));
            }
            prop_assert!(got.iter().all(|f| f.at >= from && f.at < to));
            prop_assert!(got.iter().filter(|f| f.job == "c" && f.skipped.is_none()).count() <= 1);
        }
    }
}
