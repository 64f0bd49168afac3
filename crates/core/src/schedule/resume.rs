//! Where a controller's next evaluation of a `CronHorizontalPodAutoscaler` resumes, from what
//! it remembers of its last one ([`Memory`]) and the cached status: which condition each job
//! has now ([`known_conditions`]), from which instant firings are evaluated
//! ([`last_evaluated`]), what an invalid spec keeps ([`freshest_conditions`]), which jobs are
//! (re)submitted ([`submit_new`]), and when and from where the next evaluation starts
//! ([`resume`], [`recheck`], [`unchanged_until`]).
//!
//! Why a memory at all: the reflector cache lags behind the controller's own status writes, so
//! right after a run the cached status may not show it, and a controller that trusted the cache
//! alone could run the same firing twice. What this replica remembers writing is therefore
//! preferred over the cache; after a restart or a leader change there is no memory, and the
//! stored status (written by the previous leader) is the truth.
//!
//! Invariants: the instant evaluation resumes from is never after `now`; a firing to retry is
//! evaluated again (evaluation resumes just before it); nothing here reads the clock.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};

use super::history::{self, Readiness};
use super::retry::Retry;
use crate::api::cron::{
    CronHorizontalPodAutoscaler, CronHorizontalPodAutoscalerSpec,
    CronHorizontalPodAutoscalerStatus, JobCondition, JobState,
};

/// How often an object whose target does not resolve is evaluated again (besides its firings
/// and its changes), so that `Ready` turns true soon after the target appears.
pub const UNRESOLVED_RECHECK: SignedDuration = SignedDuration::from_secs(30);

/// What the controller last decided for one object: the state it holds between evaluations.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Memory {
    /// The object's UID (a recreated object of the same name starts afresh).
    pub uid: String,
    /// Every firing at or before this instant has been handled.
    pub last_evaluated: Option<Timestamp>,
    /// The conditions last written (or about to be), newer than the cache.
    pub conditions: Vec<JobCondition>,
    /// Job names with a next-run series, to remove the series of jobs that went away.
    pub jobs: Vec<String>,
    /// The status this replica last wrote successfully.
    pub written: Option<CronHorizontalPodAutoscalerStatus>,
    /// `metadata.generation` at the last evaluation (changes with the spec).
    pub generation: Option<i64>,
    /// The annotations at the last evaluation (they choose the mode).
    pub annotations: Option<BTreeMap<String, String>>,
    /// When the last evaluation asked to be woken: no firing is due before it (or a firing
    /// whose write failed transiently is retried then).
    pub next_wake: Option<Timestamp>,
    /// Consecutive evaluations in which a due job failed transiently (0 when none is waiting
    /// for a retry); sets the back-off.
    pub failures: u32,
}

/// Per job (spec order): the condition of its current version, preferring what this replica
/// remembers writing over the possibly older cached status.
pub fn known_conditions(
    uid: &str,
    spec: &CronHorizontalPodAutoscalerSpec,
    observed: Option<&CronHorizontalPodAutoscalerStatus>,
    memory: Option<&Memory>,
) -> Vec<Option<JobCondition>> {
    let remembered = memory.map(|m| m.conditions.as_slice()).unwrap_or_default();
    let cached = observed
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    history::known_conditions(uid, spec, &[remembered, cached])
}

/// The freshest job conditions as a whole: what this replica remembers (the conditions of the
/// last valid spec it evaluated), else the cached status's. What an invalid spec keeps.
pub fn freshest_conditions(
    observed: Option<&CronHorizontalPodAutoscalerStatus>,
    memory: Option<&Memory>,
) -> Vec<JobCondition> {
    memory
        .filter(|m| m.last_evaluated.is_some())
        .map(|m| m.conditions.clone())
        .or_else(|| observed.map(|s| s.conditions.clone()))
        .unwrap_or_default()
}

/// Where evaluation resumes: what this replica remembers, else (after a restart or a leader
/// change) the oldest `lastProbeTime` of the current jobs, else `now` (nothing ran yet).
pub fn last_evaluated(
    memory: Option<&Memory>,
    known: &[Option<JobCondition>],
    now: Timestamp,
) -> Timestamp {
    memory
        .and_then(|m| m.last_evaluated)
        .or_else(|| {
            known
                .iter()
                .flatten()
                .filter_map(|c| c.last_probe_time.as_ref().map(|t| t.0))
                .min()
        })
        .unwrap_or(now)
        .min(now)
}

/// The next wake-up of the last evaluation, when nothing that evaluation depended on has
/// changed since and no firing is due yet: the spec (generation) and the annotations are as
/// they were. The watch event of the controller's own status write is such a change, one per
/// run; skipping its evaluation keeps the instant many jobs share free for their writes.
pub fn unchanged_until(
    memory: &Memory,
    cron: &CronHorizontalPodAutoscaler,
    now: Timestamp,
) -> Option<Timestamp> {
    let next = memory.next_wake?;
    (memory.last_evaluated.is_some()
        && memory.generation == cron.metadata.generation
        && memory.annotations == cron.metadata.annotations
        && now < next)
        .then_some(next)
}

/// Gives every job without a condition (new or changed) a `Submitted` one, stamped `now`, its
/// message the job's next run (`next_runs`, spec order, as [`super::plan::Evaluation`] has
/// them). Returns the indexes of the jobs it submitted, in spec order.
pub fn submit_new(
    uid: &str,
    spec: &CronHorizontalPodAutoscalerSpec,
    next_runs: &[Option<Timestamp>],
    now: Timestamp,
    conditions: &mut [Option<JobCondition>],
) -> Vec<usize> {
    let mut submitted = Vec::new();
    for (index, (slot, job)) in conditions.iter_mut().zip(&spec.jobs).enumerate() {
        if slot.is_none() {
            let next = next_runs.get(index).copied().flatten();
            let message = history::submitted_message(next);
            *slot = Some(history::condition(
                uid,
                job,
                JobState::Submitted,
                now,
                message,
            ));
            submitted.push(index);
        }
    }
    submitted
}

/// Where the next evaluation resumes, when it wakes, and how many passes in a row failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resume {
    /// Every firing at or before this instant has been handled.
    pub last_evaluated: Timestamp,
    /// When to evaluate again; `None`: only when the object changes.
    pub next_wake: Option<Timestamp>,
    /// Consecutive passes with a transient failure (0 when none is waiting for a retry).
    pub failures: u32,
}

/// Where the next evaluation resumes after a pass that evaluated up to `now`, with its
/// `next_wake` and `failures` earlier passes in a row that failed. A firing to retry is
/// evaluated again: resume just before it (the jobs that ran have their firings settled by
/// their conditions) and wake at the retry instant.
pub fn resume(
    retry: Option<Retry>,
    next_wake: Option<Timestamp>,
    now: Timestamp,
    failures: u32,
) -> Resume {
    match retry {
        Some(retry) => Resume {
            last_evaluated: retry
                .firing
                .checked_sub(SignedDuration::from_nanos(1))
                .unwrap_or(retry.firing)
                .min(now),
            next_wake: Some(next_wake.map_or(retry.at, |at| at.min(retry.at))),
            failures: failures.saturating_add(1),
        },
        None => Resume {
            last_evaluated: now,
            next_wake,
            failures: 0,
        },
    }
}

/// The wake-up, brought forward to [`UNRESOLVED_RECHECK`] from `now` while the target does not
/// resolve: it may be created after the CronHPA.
pub fn recheck(
    next_wake: Option<Timestamp>,
    readiness: &Readiness,
    now: Timestamp,
) -> Option<Timestamp> {
    if !matches!(readiness, Readiness::TargetUnresolved(_)) {
        return next_wake;
    }
    let again = now.checked_add(UNRESOLVED_RECHECK).unwrap_or(now);
    Some(next_wake.map_or(again, |at| at.min(again)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::plan::job_id;

    use crate::schedule::history::probed;
    use crate::schedule::history::tests::ts;

    fn spec() -> CronHorizontalPodAutoscalerSpec {
        CronHorizontalPodAutoscalerSpec::test()
            .job("up", "0 0 8 * * *", 10)
            .job("down", "0 0 20 * * *", 2)
    }

    fn memory(last_evaluated: Option<&str>, conditions: Vec<JobCondition>) -> Memory {
        Memory {
            last_evaluated: last_evaluated.map(ts),
            conditions,
            ..Memory::default()
        }
    }

    fn status(conditions: Vec<JobCondition>) -> CronHorizontalPodAutoscalerStatus {
        CronHorizontalPodAutoscalerStatus {
            conditions,
            ..CronHorizontalPodAutoscalerStatus::default()
        }
    }

    #[test]
    fn what_this_replica_remembers_wins_over_the_cache() {
        let spec = spec();
        let cached = probed(
            &spec.jobs[0],
            JobState::Submitted,
            "2026-01-01T00:00:00Z",
            "",
        );
        let ran = probed(&spec.jobs[0], JobState::Succeed, "2026-01-02T08:00:00Z", "");
        let down = probed(&spec.jobs[1], JobState::Failed, "2026-01-01T20:00:00Z", "");
        let status = status(vec![cached.clone(), down.clone()]);
        let remembered = memory(None, vec![ran.clone()]);
        // The memory's condition of `up`; the cache's of `down`, which the memory lacks.
        assert_eq!(
            known_conditions("u", &spec, Some(&status), Some(&remembered)),
            [Some(ran), Some(down.clone())]
        );
        // Without a memory (a restart, a new leader) the cache is the truth.
        assert_eq!(
            known_conditions("u", &spec, Some(&status), None),
            [Some(cached), Some(down)]
        );
        assert_eq!(known_conditions("u", &spec, None, None), [None, None]);
    }

    #[test]
    fn an_invalid_spec_keeps_the_freshest_conditions_whole() {
        let spec = spec();
        let ran = probed(
            &spec.jobs[0],
            JobState::Succeed,
            "2026-01-02T08:00:00Z",
            "ran",
        );
        let cached = status(vec![probed(
            &spec.jobs[0],
            JobState::Submitted,
            "2026-01-01T00:00:00Z",
            "",
        )]);
        // This replica's last evaluation is newer than the cache.
        let evaluated = memory(Some("2026-01-02T08:00:00Z"), vec![ran.clone()]);
        assert_eq!(freshest_conditions(Some(&cached), Some(&evaluated)), [ran]);
        // A memory that never evaluated (the spec was invalid from the start) has none.
        assert_eq!(
            freshest_conditions(Some(&cached), Some(&Memory::default())),
            cached.conditions
        );
        assert!(freshest_conditions(None, None).is_empty());
    }

    #[test]
    fn evaluation_resumes_from_memory_else_the_oldest_probe_else_now() {
        let spec = spec();
        let now = ts("2026-01-03T08:00:30Z");
        let ran = probed(&spec.jobs[0], JobState::Succeed, "2026-01-02T08:00:00Z", "");
        let down = probed(&spec.jobs[1], JobState::Succeed, "2026-01-02T20:00:00Z", "");
        let known = [Some(ran), Some(down), None];
        assert_eq!(
            last_evaluated(None, &known, now),
            ts("2026-01-02T08:00:00Z")
        );
        assert_eq!(last_evaluated(None, &[None, None], now), now);
        let remembered = memory(Some("2026-01-03T08:00:00Z"), Vec::new());
        assert_eq!(
            last_evaluated(Some(&remembered), &known, now),
            ts("2026-01-03T08:00:00Z")
        );
        // Never after now, whatever a clock that went back says.
        let ahead = memory(Some("2026-01-04T00:00:00Z"), Vec::new());
        assert_eq!(last_evaluated(Some(&ahead), &known, now), now);
    }

    #[test]
    fn jobs_without_a_condition_are_submitted_now_with_their_next_run() {
        let spec = spec();
        let now = ts("2026-01-03T08:00:30Z");
        let ran = probed(
            &spec.jobs[0],
            JobState::Succeed,
            "2026-01-03T08:00:00Z",
            "ran",
        );
        let mut conditions = vec![Some(ran.clone()), None];
        let next = [None, Some(ts("2026-01-03T20:00:00Z"))];
        assert_eq!(submit_new("u", &spec, &next, now, &mut conditions), [1]);
        assert_eq!(conditions[0], Some(ran), "a job with a condition keeps it");
        let submitted = conditions[1].clone().unwrap();
        assert_eq!(submitted.job_id, job_id("u", &spec.jobs[1]));
        assert_eq!(submitted.state, JobState::Submitted);
        assert_eq!(submitted.last_probe_time.map(|t| t.0), Some(now));
        assert_eq!(
            submitted.message,
            "submitted; next run at 2026-01-03T20:00:00Z"
        );
        // Nothing left to submit.
        assert!(submit_new("u", &spec, &next, now, &mut conditions).is_empty());
    }

    #[test]
    fn a_firing_to_retry_is_evaluated_again_at_the_retry_instant() {
        let now = ts("2026-11-22T09:00:01Z");
        let next = Some(ts("2026-11-23T09:00:00Z"));
        let retry = Retry {
            firing: ts("2026-11-22T09:00:00Z"),
            at: ts("2026-11-22T09:00:02Z"),
        };
        let again = resume(Some(retry), next, now, 2);
        assert!(again.last_evaluated < retry.firing);
        assert_eq!(again.next_wake, Some(retry.at));
        assert_eq!(again.failures, 3);
        // Nothing to retry: resume at now, wake at the next firing, no failures counted.
        assert_eq!(
            resume(None, next, now, 3),
            Resume {
                last_evaluated: now,
                next_wake: next,
                failures: 0
            }
        );
    }

    #[test]
    fn an_unresolved_target_is_checked_again_soon() {
        let now = ts("2026-11-22T09:00:00Z");
        let far = Some(ts("2026-11-23T09:00:00Z"));
        let unresolved = Readiness::TargetUnresolved("not found".into());
        assert_eq!(
            recheck(far, &unresolved, now),
            Some(ts("2026-11-22T09:00:30Z"))
        );
        assert_eq!(
            recheck(None, &unresolved, now),
            Some(ts("2026-11-22T09:00:30Z"))
        );
        let soon = Some(ts("2026-11-22T09:00:10Z"));
        assert_eq!(recheck(soon, &unresolved, now), soon);
        let scheduled = Readiness::Scheduled { next_run: far };
        assert_eq!(recheck(far, &scheduled, now), far);
    }

    fn cron(generation: i64, mode: Option<&str>) -> CronHorizontalPodAutoscaler {
        let mut c =
            CronHorizontalPodAutoscaler::new("web", CronHorizontalPodAutoscalerSpec::default());
        c.metadata.generation = Some(generation);
        c.metadata.annotations =
            mode.map(|m| [("plimsoll.dev/adjust-hpa-min".to_owned(), m.to_owned())].into());
        c
    }

    fn memory_of(c: &CronHorizontalPodAutoscaler, next: &str) -> Memory {
        Memory {
            last_evaluated: Some(ts("2026-11-22T08:00:00Z")),
            generation: c.metadata.generation,
            annotations: c.metadata.annotations.clone(),
            next_wake: Some(ts(next)),
            ..Memory::default()
        }
    }

    #[test]
    fn a_status_only_event_before_the_next_firing_is_skipped() {
        let c = cron(3, None);
        let m = memory_of(&c, "2026-11-22T09:00:00Z");
        assert_eq!(
            unchanged_until(&m, &c, ts("2026-11-22T08:30:00Z")),
            Some(ts("2026-11-22T09:00:00Z"))
        );
    }

    #[test]
    fn a_due_firing_a_new_spec_or_new_annotations_are_evaluated() {
        let c = cron(3, None);
        let m = memory_of(&c, "2026-11-22T09:00:00Z");
        // The firing is due.
        assert_eq!(unchanged_until(&m, &c, ts("2026-11-22T09:00:00Z")), None);
        // The spec changed.
        assert_eq!(
            unchanged_until(&m, &cron(4, None), ts("2026-11-22T08:30:00Z")),
            None
        );
        // The mode annotation appeared.
        assert_eq!(
            unchanged_until(&m, &cron(3, Some("true")), ts("2026-11-22T08:30:00Z")),
            None
        );
        // Nothing to wake for (after a failed status write, too): evaluate, which is cheap
        // and keeps the status current, instead of sleeping until the next firing.
        let idle = Memory {
            next_wake: None,
            ..m
        };
        assert_eq!(unchanged_until(&idle, &c, ts("2026-11-22T08:30:00Z")), None);
    }
}
