//! Aliyun `CronHorizontalPodAutoscaler` (`autoscaling.alibabacloud.com/v1beta1`,
//! kubernetes-cronhpa-controller) → Plimsoll's `CronHorizontalPodAutoscaler`.
//!
//! The two specs have the same shape (`scaleTargetRef`, `excludeDates`, `jobs[]` with `name`,
//! `schedule` with seconds, `targetSize`, `runOnce`). The differences:
//! * Aliyun reads schedules in its controller's process time zone (the `TZ` of its
//!   Deployment); Plimsoll reads them in `spec.timeZone`, UTC when unset. The converter cannot
//!   know the old controller's `TZ`, so it leaves `timeZone` unset and says so.
//! * `@date YYYY-MM-DD hh:mm:ss` schedules (one absolute instant) become the same second of the
//!   same day as a yearly 6-field schedule with `runOnce: true`; the year cannot be written.
//! * `cronMode: Disable` has no counterpart: a Plimsoll CronHPA always runs its jobs.
//! * Retired API versions in `scaleTargetRef` (`apps/v1beta1`, `apps/v1beta2`,
//!   `extensions/v1beta1`, `autoscaling/v2beta1`, `autoscaling/v2beta2`) are rewritten to the
//!   served ones, which is what the API server resolves them to today.

use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;
use serde_json::Value;

use super::fields::{Dropped, Fields, UNKNOWN, drop_status, metadata};
use super::{Conversion, ConvertError, Converted};
use crate::api::cron::{CronHorizontalPodAutoscaler, CronHorizontalPodAutoscalerSpec, ScalingJob};

/// Converts one Aliyun CronHPA document.
pub fn convert(doc: &Value) -> Result<Conversion, ConvertError> {
    let mut dropped = Vec::new();
    let mut notes = Vec::new();
    let metadata = metadata(doc, |_| None, &mut dropped)?;
    let mut f = Fields::new("spec", doc.get("spec"))?;
    let mut target: CrossVersionObjectReference = f
        .take_as("scaleTargetRef")?
        .ok_or_else(|| ConvertError::invalid("spec.scaleTargetRef", "required"))?;
    if let Some(current) = served_api_version(target.api_version.as_deref(), &target.kind) {
        notes.push(format!(
            "spec.scaleTargetRef.apiVersion {} rewritten to {current} (the retired version is no longer served)",
            target.api_version.as_deref().unwrap_or_default()
        ));
        target.api_version = Some(current.to_owned());
    }
    let exclude_dates: Vec<String> = f.take_as("excludeDates")?.unwrap_or_default();
    let mut jobs = Vec::new();
    if let Some(Value::Array(list)) = f.take("jobs") {
        for (i, j) in list.iter().enumerate() {
            jobs.push(read_job(
                &format!("spec.jobs[{i}]"),
                j,
                &mut dropped,
                &mut notes,
            )?);
        }
    }
    if f.take("cronMode")
        .is_some_and(|mode| mode.as_str() == Some("Disable"))
    {
        dropped.push(Dropped::new(
            "spec.cronMode",
            "Disable has no counterpart: a Plimsoll CronHPA always runs its jobs; apply the converted object only when they should run",
        ));
    }
    f.finish(UNKNOWN, &mut dropped);
    notes.push(
        "spec.timeZone left unset (UTC): the Aliyun controller read schedules in its own process time zone (its Deployment's TZ); set timeZone if that was not UTC".to_owned(),
    );
    drop_status(doc, &mut dropped);
    let name = metadata.name.clone().unwrap_or_default();
    Ok(Conversion {
        source: format!("CronHorizontalPodAutoscaler/{name}"),
        object: Converted::Cron(Box::new(CronHorizontalPodAutoscaler {
            metadata,
            spec: CronHorizontalPodAutoscalerSpec {
                scale_target_ref: target,
                time_zone: None,
                exclude_dates,
                jobs,
            },
            status: None,
        })),
        dropped,
        notes,
    })
}

/// The served apiVersion for a retired one in a scale target reference, if it is retired.
fn served_api_version(api_version: Option<&str>, kind: &str) -> Option<&'static str> {
    match (api_version?, kind) {
        ("apps/v1beta1" | "apps/v1beta2" | "extensions/v1beta1", _) => Some("apps/v1"),
        (
            "autoscaling/v1" | "autoscaling/v2beta1" | "autoscaling/v2beta2",
            "HorizontalPodAutoscaler",
        ) => Some("autoscaling/v2"),
        _ => None,
    }
}

fn read_job(
    path: &str,
    j: &Value,
    dropped: &mut Vec<Dropped>,
    notes: &mut Vec<String>,
) -> Result<ScalingJob, ConvertError> {
    let mut f = Fields::new(path, Some(j))?;
    let name: String = f
        .take_as("name")?
        .ok_or_else(|| ConvertError::invalid(f.at("name"), "required"))?;
    let schedule: String = f
        .take_as("schedule")?
        .ok_or_else(|| ConvertError::invalid(f.at("schedule"), "required"))?;
    let target_size: i32 = f
        .take_as("targetSize")?
        .ok_or_else(|| ConvertError::invalid(f.at("targetSize"), "required"))?;
    let mut run_once: bool = f.take_as("runOnce")?.unwrap_or(false);
    let schedule = match date_schedule(&schedule) {
        Some(Ok((cron, year))) => {
            dropped.push(Dropped::new(
                format!("{path}.schedule"),
                format!(
                    "the year {year} of {schedule:?} cannot be written in a cron schedule: converted to {cron:?} with runOnce, which fires at the next such date (delete the job if that date has passed)"
                ),
            ));
            notes.push(format!("{path}: runOnce set for the former @date schedule"));
            run_once = true;
            cron
        }
        Some(Err(message)) => {
            return Err(ConvertError::invalid(format!("{path}.schedule"), message));
        }
        None => schedule,
    };
    f.finish(UNKNOWN, dropped);
    Ok(ScalingJob {
        name,
        schedule,
        target_size,
        run_once,
    })
}

/// `@date YYYY-MM-DD hh:mm:ss` as `(6-field schedule, year)`; `None` for any other schedule.
fn date_schedule(schedule: &str) -> Option<Result<(String, i16), String>> {
    let rest = schedule.trim().strip_prefix("@date")?.trim();
    let parsed = jiff::civil::DateTime::strptime("%Y-%m-%d %H:%M:%S", rest)
        .map_err(|e| format!("{schedule:?} is not @date YYYY-MM-DD hh:mm:ss: {e}"));
    Some(parsed.map(|d| {
        (
            format!(
                "{} {} {} {} {} *",
                d.second(),
                d.minute(),
                d.hour(),
                d.day(),
                d.month()
            ),
            d.year(),
        )
    }))
}
