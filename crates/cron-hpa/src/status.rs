//! Status of a `CronHorizontalPodAutoscaler`: one condition per job, built from what the
//! controller observed, remembered and just did.
//!
//! The job history conventions (which condition is whose, what `lastProbeTime` means, and that
//! an invalid spec never rewrites a condition) are [`plimsoll_core::schedule::history`]'s; this
//! module adds what only the controller has: its memory and the messages.

use jiff::{SignedDuration, Timestamp};
use plimsoll_core::api::cron::{
    CronHorizontalPodAutoscalerSpec, CronHorizontalPodAutoscalerStatus, JobCondition,
};
use plimsoll_core::schedule::history;

use crate::context::Memory;

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

/// "next run at …" (or that there is none).
pub fn next_run_text(next: Option<Timestamp>) -> String {
    match next {
        Some(at) => format!("next run at {at}"),
        None => "no further runs".to_owned(),
    }
}

/// The message of a successful run.
pub fn succeeded_message(
    reason: &str,
    at: Timestamp,
    late: SignedDuration,
    next: Option<Timestamp>,
) -> String {
    format!(
        "ran at {at} ({}ms late): {reason}; {}",
        late.as_millis().max(0),
        next_run_text(next)
    )
}

/// The message of a failed run.
pub fn failed_message(error: &str, at: Timestamp, next: Option<Timestamp>) -> String {
    format!("run at {at} failed: {error}; {}", next_run_text(next))
}

/// The message of a missed firing.
pub fn missed_message(
    count: usize,
    last: Timestamp,
    grace: SignedDuration,
    next: Option<Timestamp>,
) -> String {
    let runs = if count == 1 { "run" } else { "runs" };
    format!(
        "missed {count} {runs}, the last at {last}, more than --missed-job-grace {grace:#} ago \
         (the controller was not running, or the spec was invalid); {}",
        next_run_text(next)
    )
}

/// The status to write, or `None` when it equals `current` (status is written only on change).
pub fn changed(
    current: Option<&CronHorizontalPodAutoscalerStatus>,
    desired: CronHorizontalPodAutoscalerStatus,
) -> Option<CronHorizontalPodAutoscalerStatus> {
    (current != Some(&desired)).then_some(desired)
}

#[cfg(test)]
mod tests {
    use super::*;
    use plimsoll_core::api::cron::{JobState, ScalingJob};
    use plimsoll_core::schedule::history::{condition, progress};
    use plimsoll_core::schedule::plan::job_id;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn spec() -> CronHorizontalPodAutoscalerSpec {
        CronHorizontalPodAutoscalerSpec {
            jobs: vec![
                ScalingJob {
                    name: "up".into(),
                    schedule: "0 0 8 * * *".into(),
                    target_size: 10,
                    run_once: false,
                },
                ScalingJob {
                    name: "down".into(),
                    schedule: "0 0 20 * * *".into(),
                    target_size: 2,
                    run_once: false,
                },
            ],
            ..CronHorizontalPodAutoscalerSpec::default()
        }
    }

    #[test]
    fn memory_wins_over_the_cache_and_stale_versions_do_not_count() {
        let spec = spec();
        let old = condition(
            "u",
            &spec.jobs[0],
            JobState::Submitted,
            ts("2026-01-01T00:00:00Z"),
            String::new(),
        );
        let ran = condition(
            "u",
            &spec.jobs[0],
            JobState::Succeed,
            ts("2026-01-02T08:00:00Z"),
            String::new(),
        );
        let mut stale = ran.clone();
        stale.name = "down".into();
        let status = CronHorizontalPodAutoscalerStatus {
            conditions: vec![old, stale],
            ..Default::default()
        };
        let memory = Memory {
            conditions: vec![ran.clone()],
            ..Memory::default()
        };
        let known = known_conditions("u", &spec, Some(&status), Some(&memory));
        assert_eq!(known, [Some(ran), None]);
    }

    #[test]
    fn an_invalid_spec_keeps_the_freshest_conditions_whole() {
        let spec = spec();
        let ran = condition(
            "u",
            &spec.jobs[0],
            JobState::Succeed,
            ts("2026-01-02T08:00:00Z"),
            "ran".into(),
        );
        let cached = CronHorizontalPodAutoscalerStatus {
            conditions: vec![condition(
                "u",
                &spec.jobs[0],
                JobState::Submitted,
                ts("2026-01-01T00:00:00Z"),
                String::new(),
            )],
            ..Default::default()
        };
        // This replica's last evaluation is newer than the cache.
        let memory = Memory {
            last_evaluated: Some(ts("2026-01-02T08:00:00Z")),
            conditions: vec![ran.clone()],
            ..Memory::default()
        };
        assert_eq!(freshest_conditions(Some(&cached), Some(&memory)), [ran]);
        // A memory that never evaluated (the spec was invalid from the start) has none.
        let unevaluated = Memory::default();
        assert_eq!(
            freshest_conditions(Some(&cached), Some(&unevaluated)),
            cached.conditions
        );
        assert!(freshest_conditions(None, None).is_empty());
    }

    #[test]
    fn new_jobs_are_submitted_now_and_resume_from_the_oldest_probe() {
        let spec = spec();
        let now = ts("2026-01-03T08:00:30Z");
        let ran = condition(
            "u",
            &spec.jobs[0],
            JobState::Succeed,
            ts("2026-01-02T08:00:00Z"),
            String::new(),
        );
        let known = vec![Some(ran), None];
        let p = progress(&spec, &known, now);
        assert_eq!(p[0].last_run, Some(ts("2026-01-02T08:00:00Z")));
        assert_eq!(p[1].submitted, Some(now));
        assert_eq!(
            last_evaluated(None, &known, now),
            ts("2026-01-02T08:00:00Z")
        );
        assert_eq!(last_evaluated(None, &[None, None], now), now);
        let memory = Memory {
            last_evaluated: Some(ts("2026-01-03T08:00:00Z")),
            ..Memory::default()
        };
        assert_eq!(
            last_evaluated(Some(&memory), &known, now),
            ts("2026-01-03T08:00:00Z")
        );
    }

    #[test]
    fn conditions_carry_the_job_version_and_messages_the_sizes() {
        let spec = spec();
        let at = ts("2026-01-02T08:00:00Z");
        let next = Some(ts("2026-01-03T08:00:00Z"));
        let c = condition(
            "u",
            &spec.jobs[0],
            JobState::Succeed,
            at,
            succeeded_message(
                "replicas 2 -> 10",
                at,
                SignedDuration::from_millis(12),
                next,
            ),
        );
        assert_eq!(c.job_id, job_id("u", &spec.jobs[0]));
        assert_eq!(
            c.message,
            "ran at 2026-01-02T08:00:00Z (12ms late): replicas 2 -> 10; next run at 2026-01-03T08:00:00Z"
        );
        let m = missed_message(3, at, SignedDuration::from_mins(5), None);
        assert!(
            m.starts_with("missed 3 runs, the last at 2026-01-02T08:00:00Z"),
            "{m}"
        );
        assert!(m.contains("5m"), "{m}");
        assert!(m.ends_with("no further runs"), "{m}");
    }

    #[test]
    fn status_is_written_only_when_it_changed() {
        let s = CronHorizontalPodAutoscalerStatus {
            job_count: Some(2),
            ..Default::default()
        };
        assert_eq!(changed(Some(&s), s.clone()), None);
        assert_eq!(changed(None, s.clone()), Some(s.clone()));
        let mut other = s.clone();
        other.scale_up_keep_window = true;
        assert_eq!(changed(Some(&s), other.clone()), Some(other));
    }
}
