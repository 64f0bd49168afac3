//! Whether a `CronHorizontalPodAutoscaler` spec can be scheduled:
//! [`CronHorizontalPodAutoscalerSpec::validate`], every problem with its field path.
//!
//! It lives here rather than with the wire types in [`crate::api::cron`] because it needs the
//! grammar ([`super::cron`], [`super::zone`]), and the grammar's users need the wire types: the
//! API types import nothing from the scheduling.
//!
//! Invariants checked (and relied on by the planner): job names are unique and non-empty,
//! `targetSize >= 0`, every schedule and excluded date parses, the time zone is a known IANA
//! name, and every size is within what the CRD states (for objects stored before it did).

use std::collections::HashSet;

use super::cron::{DaySchedule, Schedule};
use super::zone;
use crate::api::cron::CronHorizontalPodAutoscalerSpec;
use crate::api::limits::{
    MAX_EXCLUDE_DATES, MAX_JOBS, MAX_LABEL_LENGTH, MAX_NAME_LENGTH, MAX_QUALIFIED_NAME_LENGTH,
    MAX_SCHEDULE_LENGTH, MAX_TIME_ZONE_LENGTH,
};
use crate::api::validation::FieldErrors;

impl CronHorizontalPodAutoscalerSpec {
    /// Every problem in the spec, each with its field path
    /// (`spec.jobs[2].schedule: …`, `spec.timeZone: unknown time zone "Mars/Base"`).
    pub fn validate(&self) -> Result<(), FieldErrors> {
        let mut errors = FieldErrors::default();
        if self.scale_target_ref.kind.is_empty() {
            errors.push("spec.scaleTargetRef.kind", "must not be empty");
        }
        if self.scale_target_ref.name.is_empty() {
            errors.push("spec.scaleTargetRef.name", "must not be empty");
        }
        errors.path_segment("spec.scaleTargetRef.kind", &self.scale_target_ref.kind);
        errors.path_segment("spec.scaleTargetRef.name", &self.scale_target_ref.name);
        self.validate_sizes(&mut errors);
        if let Some(name) = &self.time_zone
            && let Err(e) = zone::parse_time_zone(name)
        {
            errors.push("spec.timeZone", e.to_string());
        }
        for (i, expr) in self.exclude_dates.iter().enumerate() {
            if let Err(e) = DaySchedule::parse(expr) {
                errors.push(format!("spec.excludeDates[{i}]"), e.to_string());
            }
        }
        let mut seen = HashSet::new();
        for (i, job) in self.jobs.iter().enumerate() {
            if job.name.is_empty() {
                errors.push(format!("spec.jobs[{i}].name"), "must not be empty");
            } else if !seen.insert(job.name.as_str()) {
                errors.push(
                    format!("spec.jobs[{i}].name"),
                    format!("duplicate job name \"{}\"", job.name),
                );
            }
            if let Err(e) = Schedule::parse(&job.schedule) {
                errors.push(
                    format!("spec.jobs[{i}].schedule"),
                    format!("job \"{}\": {e}", job.name),
                );
            }
            if job.target_size < 0 {
                errors.push(
                    format!("spec.jobs[{i}].targetSize"),
                    format!("must be >= 0, got {}", job.target_size),
                );
            }
        }
        errors.into_result()
    }

    /// The size limits the CRD states, for objects stored before it did.
    fn validate_sizes(&self, errors: &mut FieldErrors) {
        let target = &self.scale_target_ref;
        if let Some(v) = &target.api_version {
            errors.max_length(
                "spec.scaleTargetRef.apiVersion",
                v,
                MAX_QUALIFIED_NAME_LENGTH,
            );
        }
        errors.max_length("spec.scaleTargetRef.kind", &target.kind, MAX_LABEL_LENGTH);
        errors.max_length("spec.scaleTargetRef.name", &target.name, MAX_NAME_LENGTH);
        if let Some(zone) = &self.time_zone {
            errors.max_length("spec.timeZone", zone, MAX_TIME_ZONE_LENGTH);
        }
        errors.max_items(
            "spec.excludeDates",
            self.exclude_dates.len(),
            MAX_EXCLUDE_DATES,
        );
        for (i, expr) in self.exclude_dates.iter().enumerate() {
            errors.max_length(format!("spec.excludeDates[{i}]"), expr, MAX_SCHEDULE_LENGTH);
        }
        errors.max_items("spec.jobs", self.jobs.len(), MAX_JOBS);
        for (i, job) in self.jobs.iter().enumerate() {
            errors.max_length(format!("spec.jobs[{i}].name"), &job.name, MAX_NAME_LENGTH);
            errors.max_length(
                format!("spec.jobs[{i}].schedule"),
                &job.schedule,
                MAX_SCHEDULE_LENGTH,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_spec_passes() {
        let spec = CronHorizontalPodAutoscalerSpec::test()
            .tz("Europe/Berlin")
            .exclude("* * * 25 12 *")
            .job("up", "0 0 8 * * MON-FRI", 10)
            .job("down", "0 20 * * *", 2);
        assert_eq!(spec.validate(), Ok(()));
    }

    /// The target's kind and name are one segment of its `/scale` URL.
    #[test]
    fn the_target_names_one_path_segment() {
        let spec = CronHorizontalPodAutoscalerSpec::test()
            .target("Deployment/x", "..")
            .job("a", "@daily", 1);
        let errors = spec.validate().unwrap_err();
        assert_eq!(
            errors.to_string(),
            "spec.scaleTargetRef.kind: may not contain '/'; spec.scaleTargetRef.name: may not be '..'"
        );
    }

    #[test]
    fn every_problem_is_reported_with_its_path() {
        let spec = CronHorizontalPodAutoscalerSpec::test()
            .target("Deployment", "")
            .tz("Mars/Base")
            .exclude("not a day")
            .job("a", "0 0 8 * * *", 1)
            .job("a", "0 0 9 * * *", -1)
            .job("c", "0 0 25 * * *", 1);
        let errors = spec.validate().unwrap_err();
        assert!(errors.has_path("spec.scaleTargetRef.name"), "{errors}");
        assert!(errors.has_path("spec.excludeDates[0]"), "{errors}");
        assert!(errors.has_path("spec.jobs[1].name"), "{errors}");
        assert!(errors.has_path("spec.jobs[1].targetSize"), "{errors}");
        assert!(errors.has_path("spec.jobs[2].schedule"), "{errors}");
        let text = errors.to_string();
        assert!(
            text.contains(r#"spec.timeZone: unknown time zone "Mars/Base""#),
            "{text}"
        );
        assert!(text.contains(r#"duplicate job name "a""#), "{text}");
        assert!(text.contains(r#"spec.jobs[2].schedule: job "c""#), "{text}");
        assert!(text.contains("hour"), "{text}");
        assert_eq!(errors.0.len(), 6, "{text}");
    }

    #[test]
    fn sizes_are_bounded_as_the_crd_bounds_them() {
        let mut spec = CronHorizontalPodAutoscalerSpec::test().job("a", "@daily", 1);
        spec.exclude_dates = vec!["* * * 25 12 *".into(); MAX_EXCLUDE_DATES];
        assert_eq!(spec.validate(), Ok(()));
        spec.exclude_dates
            .push(format!("* * * 25 12 *{}", " ".repeat(250)));
        spec.scale_target_ref.name = "w".repeat(254);
        spec.jobs[0].name = "j".repeat(254);
        for i in 0..MAX_JOBS {
            spec = spec.job(&format!("j{i}"), "@hourly", 1);
        }
        let errors = spec.validate().unwrap_err();
        let text = errors.to_string();
        for (path, message) in [
            ("spec.excludeDates", "must have at most 366 items, got 367"),
            (
                "spec.excludeDates[366]",
                "may not be more than 256 characters",
            ),
            (
                "spec.scaleTargetRef.name",
                "may not be more than 253 characters",
            ),
            ("spec.jobs", "must have at most 100 items, got 101"),
            ("spec.jobs[0].name", "may not be more than 253 characters"),
        ] {
            assert!(
                errors
                    .0
                    .iter()
                    .any(|e| e.path == path && e.message.contains(message)),
                "{path}: {message} in {text}"
            );
        }
    }

    #[test]
    fn empty_time_zone_means_utc() {
        let spec = CronHorizontalPodAutoscalerSpec::test().tz("");
        assert_eq!(spec.validate(), Ok(()));
    }
}
