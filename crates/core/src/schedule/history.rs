//! A `CronHorizontalPodAutoscaler`'s job history as its status keeps it: which condition
//! belongs to which job, what it says about the job's past ([`progress`]), and what a spec that
//! does not validate does to it ([`invalid_status`]: nothing). The controller and
//! `cron-hpa replay` both build their status with these functions.
//!
//! Conventions:
//! * a condition belongs to the job version whose [`job_id`] and name it carries; a job with no
//!   such condition is new or changed and is (re)submitted now;
//! * `lastProbeTime` is the submission time while `Submitted`, and the instant of the firing
//!   that ran (or the last one missed) once `Succeed` / `Failed`
//!   ([`JobProgress::from_condition`]);
//! * the validity of the spec is a separate field, `status.invalidSpec`: the job conditions are
//!   the jobs' history and only a firing (run, failed or missed) or a changed job rewrites one.
//!   So a `runOnce` job that ran stays done, and every job keeps its last run, across an invalid
//!   edit and its fix; a job the fix changed is a new version and starts afresh, as any change
//!   does.
//!
//! * the top-level `Ready` condition ([`ready_condition`]) says whether the object can run its
//!   jobs: `True` (`Scheduled`) when the spec validates and the target resolves, `False`
//!   (`InvalidSpec`, `TargetUnresolved`) otherwise. Its `lastTransitionTime` moves only when
//!   its status flips, and its message is bounded (the spec's problems are in `invalidSpec`).
//!
//! * a job condition's message says what happened and ends with the job's next run
//!   ([`submitted_message`], [`succeeded_message`], [`failed_message`], [`missed_message`]);
//!   it is for people: the job's state is the typed `state` field, never read from the message.
//!
//! Invariant: [`invalid_status`] returns the conditions it is given, untouched.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::plan::{CompiledSpec, JobProgress, job_id};
use crate::api::cron::{
    CronHorizontalPodAutoscalerSpec, CronHorizontalPodAutoscalerStatus, InvalidSpec, JobCondition,
    JobState, ReadyCondition, ScalingJob,
};

/// The spec ready to evaluate, or every problem with its field path (`spec.timeZone: …`;
/// `spec.jobs[2].schedule: …`): what `status.invalidSpec` says while the spec is invalid.
pub fn check(spec: &CronHorizontalPodAutoscalerSpec) -> Result<CompiledSpec, String> {
    spec.validate()
        .map_err(|e| e.to_string())
        .and_then(|()| CompiledSpec::compile(spec).map_err(|e| e.to_string()))
}

/// Per job (spec order): the condition of its current version, from the first of `sources`
/// that has one (put the freshest first: what the controller last wrote before the cached
/// status).
pub fn known_conditions(
    uid: &str,
    spec: &CronHorizontalPodAutoscalerSpec,
    sources: &[&[JobCondition]],
) -> Vec<Option<JobCondition>> {
    spec.jobs
        .iter()
        .map(|job| {
            let id = job_id(uid, job);
            sources
                .iter()
                .find_map(|list| list.iter().find(|c| c.job_id == id && c.name == job.name))
                .cloned()
        })
        .collect()
}

/// Each job's progress (spec order) from its known condition; a job without one counts as
/// submitted at `now`, so none of its earlier firings run.
pub fn progress(
    spec: &CronHorizontalPodAutoscalerSpec,
    known: &[Option<JobCondition>],
    now: Timestamp,
) -> Vec<JobProgress> {
    spec.jobs
        .iter()
        .enumerate()
        .map(
            |(index, job)| match known.get(index).and_then(Option::as_ref) {
                Some(c) => JobProgress::from_condition(job, c),
                None => JobProgress {
                    submitted: Some(now),
                    ..JobProgress::default()
                },
            },
        )
        .collect()
}

/// A condition for `job` of the object with `uid`.
pub fn condition(
    uid: &str,
    job: &ScalingJob,
    state: JobState,
    at: Timestamp,
    message: String,
) -> JobCondition {
    JobCondition {
        job_id: job_id(uid, job),
        name: job.name.clone(),
        schedule: job.schedule.clone(),
        state,
        last_probe_time: Some(Time(at)),
        message,
    }
}

/// "next run at …" (or that there is none): how a job condition's message ends.
pub fn next_run_text(next: Option<Timestamp>) -> String {
    match next {
        Some(at) => format!("next run at {at}"),
        None => "no further runs".to_owned(),
    }
}

/// The message of a job (re)submitted: its next run.
pub fn submitted_message(next: Option<Timestamp>) -> String {
    format!("submitted; {}", next_run_text(next))
}

/// The message of a successful run: when it ran, how late, what it did (`reason`), the next
/// run.
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

/// The message of `count` firings missed by more than `grace`, the last at `last`.
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

/// The status while the spec does not validate: `conditions` (the freshest known, as they
/// are), the keep window of `previous`, the job count and generation of the invalid spec, and
/// `invalidSpec` with `problems`, its `lastTransitionTime` kept from `previous` when the spec
/// was already invalid (so an unchanged object is not rewritten).
pub fn invalid_status(
    previous: Option<&CronHorizontalPodAutoscalerStatus>,
    conditions: Vec<JobCondition>,
    job_count: usize,
    generation: Option<i64>,
    problems: &str,
    now: Timestamp,
) -> CronHorizontalPodAutoscalerStatus {
    let since = previous
        .and_then(|p| p.invalid_spec.as_ref())
        .and_then(|i| i.last_transition_time.clone())
        .unwrap_or(Time(now));
    CronHorizontalPodAutoscalerStatus {
        conditions,
        ready: Some(ready_condition(
            previous.and_then(|p| p.ready.as_ref()),
            &Readiness::InvalidSpec,
            generation,
            now,
        )),
        scale_up_keep_window: previous.is_some_and(|p| p.scale_up_keep_window),
        job_count: Some(i32::try_from(job_count).unwrap_or(i32::MAX)),
        next_run: None,
        observed_generation: generation,
        invalid_spec: Some(InvalidSpec {
            // The problems quote the tenant's job names and schedule fields, hundreds of them.
            message: crate::printable::message(
                problems,
                crate::printable::MAX_CONDITION_MESSAGE_BYTES,
            ),
            last_transition_time: Some(since),
        }),
    }
}

/// What the `Ready` condition reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// The spec validates and the target resolves; the earliest next run of any job.
    Scheduled {
        /// `None`: no job runs again (every `runOnce` job ran).
        next_run: Option<Timestamp>,
    },
    /// The spec does not validate (`status.invalidSpec` says why).
    InvalidSpec,
    /// The target does not resolve (not found, no scale subresource, no autoscaler for an
    /// annotated workload): the error.
    TargetUnresolved(String),
}

/// Longest `Ready` message kept: an error text is the API server's and may be long.
pub const MAX_READY_MESSAGE: usize = 1024;

/// The `Ready` condition for `readiness`, its `lastTransitionTime` kept from `previous` while
/// the status stays the same.
pub fn ready_condition(
    previous: Option<&ReadyCondition>,
    readiness: &Readiness,
    generation: Option<i64>,
    now: Timestamp,
) -> ReadyCondition {
    let (status, reason, message) = match readiness {
        Readiness::Scheduled { next_run } => (
            true,
            "Scheduled",
            next_run.map_or_else(
                || "no job runs again".to_owned(),
                |at| format!("next run at {at}"),
            ),
        ),
        Readiness::InvalidSpec => (
            false,
            "InvalidSpec",
            "the spec does not validate; status.invalidSpec names every problem".to_owned(),
        ),
        Readiness::TargetUnresolved(error) => (
            false,
            "TargetUnresolved",
            format!("the target does not resolve: {error}"),
        ),
    };
    let since = previous
        .filter(|p| p.status == status)
        .and_then(|p| p.last_transition_time.clone())
        .unwrap_or(Time(now));
    ReadyCondition {
        status,
        reason: reason.to_owned(),
        message: truncate(message, MAX_READY_MESSAGE),
        last_transition_time: Some(since),
        observed_generation: generation,
    }
}

/// `text` cut to at most `max` bytes on a character boundary, marked with `…` when cut.
fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max - '…'.len_utf8();
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// The condition of `job` of object `u` in `state` at `at` (RFC 3339), with `message`: the
/// fixture the history's and the resume rule's tests share.
#[cfg(test)]
pub(crate) fn probed(job: &ScalingJob, state: JobState, at: &str, message: &str) -> JobCondition {
    condition("u", job, state, tests::ts(at), message.into())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn spec() -> CronHorizontalPodAutoscalerSpec {
        CronHorizontalPodAutoscalerSpec::test()
            .job_once("sale", "0 0 20 11 11 *", 50)
            .job("daily", "0 0 8 * * *", 3)
    }

    #[test]
    fn the_freshest_source_wins_and_stale_versions_do_not_count() {
        let spec = spec();
        let old = probed(
            &spec.jobs[0],
            JobState::Submitted,
            "2026-01-01T00:00:00Z",
            "",
        );
        let ran = probed(&spec.jobs[0], JobState::Succeed, "2026-11-11T12:00:00Z", "");
        let mut renamed = ran.clone();
        renamed.name = "daily".into();
        let known = known_conditions("u", &spec, &[std::slice::from_ref(&ran), &[old, renamed]]);
        assert_eq!(known, [Some(ran), None]);
    }

    #[test]
    fn a_job_without_a_condition_is_submitted_now() {
        let spec = spec();
        let now = ts("2026-11-12T00:00:00Z");
        let ran = probed(&spec.jobs[0], JobState::Succeed, "2026-11-11T12:00:00Z", "");
        let p = progress(&spec, &[Some(ran), None], now);
        assert!(p[0].run_once_done);
        assert_eq!(p[0].last_run, Some(ts("2026-11-11T12:00:00Z")));
        assert_eq!(p[1].submitted, Some(now));
        assert_eq!(p[1].last_run, None);
    }

    #[test]
    fn a_status_as_0_2_0_stored_it_is_understood() {
        // Written by the 0.2.0 controller: the job's state is its own field, whatever the
        // message says (a "missed" run is `Failed`, a run is `Succeed`).
        let spec = spec();
        let stored = serde_json::json!({
            "conditions": [
                {"jobId": job_id("u", &spec.jobs[0]), "name": "sale", "schedule": "0 0 20 11 11 *",
                 "state": "Succeed", "lastProbeTime": "2026-11-11T12:00:00Z",
                 "message": "ran at 2026-11-11T12:00:00Z (3ms late): replicas 2 -> 50; no further runs"},
                {"jobId": job_id("u", &spec.jobs[1]), "name": "daily", "schedule": "0 0 8 * * *",
                 "state": "Failed", "lastProbeTime": "2026-11-12T08:00:00Z",
                 "message": "missed 1 run, the last at 2026-11-12T08:00:00Z, more than --missed-job-grace 5m ago (the controller was not running, or the spec was invalid); next run at 2026-11-13T08:00:00Z"},
                {"type": "Ready", "status": "True", "reason": "Scheduled",
                 "message": "next run at 2026-11-13T08:00:00Z",
                 "lastTransitionTime": "2026-11-01T00:00:00Z", "observedGeneration": 2}
            ],
            "scaleUpKeepWindow": true,
            "jobCount": 2,
            "nextRun": "2026-11-13T08:00:00Z",
            "observedGeneration": 2
        });
        let status: CronHorizontalPodAutoscalerStatus = serde_json::from_value(stored).unwrap();
        let read: Vec<JobState> = status.conditions.iter().map(|c| c.state).collect();
        assert_eq!(read, [JobState::Succeed, JobState::Failed]);
        assert!(status.ready.as_ref().is_some_and(|r| r.status));
        let known = known_conditions("u", &spec, &[&status.conditions]);
        let p = progress(&spec, &known, ts("2026-11-12T09:00:00Z"));
        assert!(p[0].run_once_done, "the runOnce job that ran stays done");
        assert_eq!(p[1].last_run, Some(ts("2026-11-12T08:00:00Z")));
        assert_eq!(p[1].submitted, None);
        // Written back unchanged, it is the same status: no write.
        assert_eq!(changed(Some(&status), status.clone()), None);
    }

    #[test]
    fn messages_say_what_happened_and_end_with_the_next_run() {
        let at = ts("2026-01-02T08:00:00Z");
        let next = Some(ts("2026-01-03T08:00:00Z"));
        assert_eq!(
            succeeded_message(
                "replicas 2 -> 10",
                at,
                SignedDuration::from_millis(12),
                next
            ),
            "ran at 2026-01-02T08:00:00Z (12ms late): replicas 2 -> 10; next run at 2026-01-03T08:00:00Z"
        );
        assert_eq!(
            failed_message("forbidden", at, None),
            "run at 2026-01-02T08:00:00Z failed: forbidden; no further runs"
        );
        assert_eq!(
            submitted_message(next),
            "submitted; next run at 2026-01-03T08:00:00Z"
        );
        let m = missed_message(3, at, SignedDuration::from_mins(5), None);
        assert!(
            m.starts_with("missed 3 runs, the last at 2026-01-02T08:00:00Z"),
            "{m}"
        );
        assert!(m.contains("5m"), "{m}");
        assert!(m.ends_with("no further runs"), "{m}");
        assert!(
            missed_message(1, at, SignedDuration::from_mins(5), next).starts_with("missed 1 run,")
        );
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

    #[test]
    fn an_invalid_spec_keeps_every_condition_and_the_time_it_became_invalid() {
        let spec = spec();
        let ran = probed(
            &spec.jobs[0],
            JobState::Succeed,
            "2026-11-11T12:00:00Z",
            "ran",
        );
        let daily = probed(
            &spec.jobs[1],
            JobState::Failed,
            "2026-11-12T08:00:00Z",
            "failed",
        );
        let previous = CronHorizontalPodAutoscalerStatus {
            conditions: vec![ran.clone(), daily.clone()],
            scale_up_keep_window: true,
            ..CronHorizontalPodAutoscalerStatus::default()
        };
        let first = invalid_status(
            Some(&previous),
            previous.conditions.clone(),
            2,
            Some(4),
            "spec.timeZone: unknown time zone \"Mars/Base\"",
            ts("2026-11-13T00:00:00Z"),
        );
        assert_eq!(first.conditions, [ran, daily], "history untouched");
        assert!(first.scale_up_keep_window);
        assert_eq!(first.observed_generation, Some(4));
        let invalid = first.invalid_spec.clone().unwrap();
        assert!(invalid.message.starts_with("spec.timeZone"));
        // A second invalid edit keeps the transition time.
        let second = invalid_status(
            Some(&first),
            first.conditions.clone(),
            2,
            Some(5),
            "spec.jobs[0].schedule: …",
            ts("2026-11-14T00:00:00Z"),
        );
        assert_eq!(
            second.invalid_spec.unwrap().last_transition_time,
            Some(Time(ts("2026-11-13T00:00:00Z")))
        );
    }

    #[test]
    fn ready_says_why_and_keeps_its_transition_time_while_the_status_holds() {
        let t0 = ts("2026-11-13T00:00:00Z");
        let t1 = ts("2026-11-13T01:00:00Z");
        let next = ts("2026-11-14T08:00:00Z");
        let ready = ready_condition(
            None,
            &Readiness::Scheduled {
                next_run: Some(next),
            },
            Some(1),
            t0,
        );
        assert!(ready.status);
        assert_eq!(ready.reason, "Scheduled");
        assert_eq!(ready.message, "next run at 2026-11-14T08:00:00Z");
        assert_eq!(ready.last_transition_time, Some(Time(t0)));
        assert_eq!(ready.observed_generation, Some(1));
        // Still ready later, with another next run: the transition time stays.
        let later = ready_condition(
            Some(&ready),
            &Readiness::Scheduled { next_run: None },
            Some(2),
            t1,
        );
        assert_eq!(later.last_transition_time, Some(Time(t0)));
        assert_eq!(later.message, "no job runs again");
        // Flipping to not ready moves it.
        let lost = ready_condition(
            Some(&later),
            &Readiness::TargetUnresolved("deployments \"web\" not found".into()),
            Some(2),
            t1,
        );
        assert!(!lost.status);
        assert_eq!(lost.reason, "TargetUnresolved");
        assert!(lost.message.contains("not found"), "{}", lost.message);
        assert_eq!(lost.last_transition_time, Some(Time(t1)));
        let invalid = ready_condition(
            Some(&lost),
            &Readiness::InvalidSpec,
            Some(3),
            ts("2026-11-13T02:00:00Z"),
        );
        assert_eq!(invalid.reason, "InvalidSpec");
        assert_eq!(invalid.last_transition_time, Some(Time(t1)));
        // A long error is cut: the status stays bounded whatever the API server says.
        let long = ready_condition(
            None,
            &Readiness::TargetUnresolved("é".repeat(4000)),
            None,
            t0,
        );
        assert!(
            long.message.len() <= MAX_READY_MESSAGE,
            "{}",
            long.message.len()
        );
        assert!(long.message.ends_with('…'));
    }

    #[test]
    fn an_invalid_spec_is_not_ready_and_has_no_next_run() {
        let previous = CronHorizontalPodAutoscalerStatus {
            next_run: Some(Time(ts("2026-11-14T08:00:00Z"))),
            ..CronHorizontalPodAutoscalerStatus::default()
        };
        let status = invalid_status(
            Some(&previous),
            Vec::new(),
            1,
            Some(2),
            "bad",
            ts("2026-11-13T00:00:00Z"),
        );
        let ready = status.ready.unwrap();
        assert!(!ready.status);
        assert_eq!(ready.reason, "InvalidSpec");
        assert_eq!(status.next_run, None);
    }

    #[test]
    fn an_invalid_specs_message_is_escaped_and_bounded_whatever_the_spec_quotes() {
        let mut bad = CronHorizontalPodAutoscalerSpec::test();
        for i in 0..100 {
            let name = format!("{i}\u{1b}]0;owned\u{7}{}", "\u{e000}".repeat(200));
            bad = bad.job(&name, &format!("0 0 25 * * {}", "\u{1b}[2J".repeat(40)), 1);
        }
        for _ in 0..366 {
            bad = bad.exclude(&"\u{e000}".repeat(256));
        }
        let problems = check(&bad).unwrap_err();
        assert!(problems.len() > crate::printable::MAX_CONDITION_MESSAGE_BYTES);
        let status = invalid_status(
            None,
            Vec::new(),
            100,
            Some(1),
            &problems,
            ts("2026-11-13T00:00:00Z"),
        );
        let message = status.invalid_spec.map(|i| i.message).unwrap_or_default();
        assert!(message.starts_with("spec."), "{message}");
        assert!(
            message.len() <= crate::printable::MAX_CONDITION_MESSAGE_BYTES,
            "{}",
            message.len()
        );
        assert!(
            !message.chars().any(crate::printable::acts_on_terminal),
            "{message}"
        );
    }

    #[test]
    fn check_names_every_problem() {
        let bad =
            CronHorizontalPodAutoscalerSpec::test()
                .tz("Mars/Base")
                .job("a", "0 0 25 * * *", 1);
        let problems = check(&bad).unwrap_err();
        assert!(problems.contains("spec.timeZone"), "{problems}");
        assert!(problems.contains("spec.jobs[0].schedule"), "{problems}");
        assert!(check(&spec()).is_ok());
    }
}
