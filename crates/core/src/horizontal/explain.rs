//! "Why did it do that?": an autoscaler's last decision in words, for `kubectl plimsoll explain`.
//!
//! [`explain`] reads what the controller left in the object — the spec, the status (each
//! metric's value and proposal, the rule that limited the result, the conditions) and the
//! decision memory (recent recommendations, the last scale, since when a watermark is crossed) —
//! and says, at `now`, what each metric proposed against its target, what limited the result,
//! and how long every cooldown, watermark delay and stabilization window still runs. The
//! windows are resolved by the same functions the controller uses ([`behavior`](super::behavior)'s rules,
//! [`memory::restore`]), so the explanation cannot drift from the decision.
//!
//! A native `autoscaling/v2` HPA has no `lastDecision` in its status (only the upstream
//! subset): its explanation has the metrics' values and the conditions, and the waits from the
//! decision-memory annotation.

use jiff::Timestamp;
use serde::Serialize;

use super::behavior::{scale_down_rules, scale_up_rules};
use super::history::{History, TimedReplicas, seconds_between};
use super::limited::LimitedBy;
use super::memory;
use super::predictive::{BUCKET_SECONDS, LoadSeries};
use super::proposals::metrics_of;
use crate::api::hpa_plus::{
    DecisionMemory, HorizontalPodAutoscalerPlusSpec, HorizontalPodAutoscalerPlusStatus,
    LeadSeconds, MetricSpec, MetricStatus, MetricTarget, MetricTargetType, MetricValueStatus,
    PredictiveMode, PredictiveStatus, Season, UtilizationBase,
};
use crate::printable::printable as shown;

/// What [`explain`] reads.
#[derive(Clone, Copy, Debug)]
pub struct ExplainInput<'a> {
    /// `HorizontalPodAutoscalerPlus` or `HorizontalPodAutoscaler`.
    pub kind: &'a str,
    /// `namespace/name`.
    pub name: &'a str,
    /// The spec (a native HPA's as [`HorizontalPodAutoscalerPlus::from_native`] reads it).
    ///
    /// [`HorizontalPodAutoscalerPlus::from_native`]: crate::api::hpa_plus::HorizontalPodAutoscalerPlus::from_native
    pub spec: &'a HorizontalPodAutoscalerPlusSpec,
    /// The status, if the controller wrote one.
    pub status: Option<&'a HorizontalPodAutoscalerPlusStatus>,
    /// The decision memory (`status.memory`, or a native HPA's annotation).
    pub memory: Option<&'a DecisionMemory>,
    /// `status.predictive` (a native HPA's [`STATUS_ANNOTATION`](super::predictive::STATUS_ANNOTATION)).
    pub predictive: Option<&'a PredictiveStatus>,
    /// The controller's `--downscale-stabilization` in seconds (300 unless changed).
    pub default_downscale_window_seconds: i64,
    /// The instant the explanation is for.
    pub now: Timestamp,
}

/// One metric: its value, its target and what it proposed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricLine {
    /// The metric as the controller names it (`cpu`, `queue_messages`).
    pub metric: String,
    /// The value the controller last saw.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    /// The target, in words.
    pub target: String,
    /// The replicas this metric proposed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proposed_replicas: Option<i32>,
    /// Why the metric failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its KEP-5679 fallback while it is failing: since when, and whether it already proposes
    /// its `fallback.replicas` or in how long it will.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

/// A condition as status holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionLine {
    /// `AbleToScale`, `ScalingActive`, `ScalingLimited`, ….
    pub type_: String,
    /// `True`, `False`, `Unknown`.
    pub status: String,
    /// The CamelCase reason.
    pub reason: String,
    /// The message.
    pub message: String,
}

/// A cooldown, delay or window still running at `now`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Wait {
    /// `upscaleForbiddenWindow`, `downscaleForbiddenWindow`, `upscaleDelay`, `downscaleDelay`,
    /// `scaleUpStabilization`, `scaleDownStabilization`.
    pub what: String,
    /// Seconds left at `now`.
    pub seconds_left: i64,
    /// What it holds, in words.
    pub detail: String,
}

/// A past recommendation from the decision memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PastRecommendation {
    /// Seconds before `now`.
    pub seconds_ago: i64,
    /// Recommended replicas.
    pub replicas: i32,
}

/// What `spec.predictive` last did, from `status.predictive`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PredictiveLine {
    /// `spec.predictive`, in words (`Scale, season auto, 7 days back, lead auto, overload weight 1`).
    pub settings: String,
    /// `status.predictive.reason`.
    pub reason: String,
    /// The controller's sentence for it.
    pub message: String,
    /// The forecast load per metric over the lead window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forecast: Option<String>,
    /// Replicas the forecast needs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forecast_replicas: Option<i32>,
    /// The error of the past seasons' forecasts of this window, percent (largest over metrics).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_percent: Option<i32>,
    /// The forecast raised the replicas at the last evaluation.
    pub acting: bool,
    /// Per metric, the hours of load history the forecast can read.
    pub history_hours: Vec<(String, i64)>,
    /// What the reason means, in words.
    pub meaning: String,
}

/// The explanation of one autoscaler at one instant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// `Kind namespace/name`.
    pub object: String,
    /// `Kind/name` of the scale target.
    pub target: String,
    /// Replicas the controller last observed.
    pub current_replicas: i32,
    /// Replicas it decided.
    pub desired_replicas: i32,
    /// `minReplicas` (1 when unset).
    pub min_replicas: i32,
    /// `maxReplicas`.
    pub max_replicas: i32,
    /// Seconds since the last decision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_seconds_ago: Option<i64>,
    /// Each metric.
    pub metrics: Vec<MetricLine>,
    /// The largest proposal, before limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recommended_replicas: Option<i32>,
    /// The rule that changed or held the recommendation (`maxReplicas`, `stabilization`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<String>,
    /// What that rule is, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_meaning: Option<String>,
    /// The controller's sentence for the decision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The status conditions.
    pub conditions: Vec<ConditionLine>,
    /// Cooldowns, delays and windows still running.
    pub waits: Vec<Wait>,
    /// The recommendations stabilization still considers, newest first.
    pub recommendations: Vec<PastRecommendation>,
    /// The longest stabilization window, seconds (what `recommendations` covers).
    pub window_seconds: i64,
    /// `spec.predictive`, when it is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predictive: Option<PredictiveLine>,
    /// What cannot be told from the object.
    pub notes: Vec<String>,
}

/// Explains the last decision of `input` at `input.now`.
pub fn explain(input: &ExplainInput<'_>) -> Explanation {
    let spec = input.spec;
    let status = input.status;
    let decision = status.and_then(|s| s.last_decision.as_ref());
    let history = input.memory.map(memory::restore).unwrap_or_default();
    let (up_window, down_window) = windows(spec, input.default_downscale_window_seconds);
    let window_seconds = up_window.max(down_window);
    let mut notes = Vec::new();
    if decision.is_none() {
        notes.push(if status.is_some() {
            "the status holds no last decision (a native HPA keeps only the autoscaling/v2 status): per-metric proposals are not known; the conditions say what limited it".to_owned()
        } else {
            "no status yet: the controller has not evaluated this object (is hpa-plus running and leading?)".to_owned()
        });
    }
    if input.memory.is_none() {
        notes.push(
            "no decision memory: windows and delays are taken from the last decision's countdowns"
                .to_owned(),
        );
    }
    let mut waits = memory_waits(
        spec,
        &history,
        input.now,
        (up_window, down_window),
        decision.and_then(|d| d.recommended_replicas),
    );
    if input.memory.is_none()
        && let (Some(d), Some(at)) = (decision, decision.and_then(|d| d.time.as_ref()))
    {
        let elapsed = seconds_between(at.0, input.now) as i64;
        waits.extend(d.countdowns.iter().filter_map(|c| {
            // The status may carry any count (a person with write access to it).
            let left = c.seconds_left.saturating_sub(elapsed);
            (left > 0).then(|| Wait {
                what: c.transition.clone(),
                seconds_left: left,
                detail: "from the last decision".to_owned(),
            })
        }));
    }
    let limited_by = decision.and_then(|d| d.limited_by.clone());
    Explanation {
        object: format!("{} {}", input.kind, input.name),
        target: format!(
            "{}/{}",
            spec.scale_target_ref.kind, spec.scale_target_ref.name
        ),
        current_replicas: status.map_or(0, |s| s.current_replicas),
        desired_replicas: status.map_or(0, |s| s.desired_replicas),
        min_replicas: spec.min_replicas.unwrap_or(1),
        max_replicas: spec.max_replicas,
        decided_seconds_ago: decision
            .and_then(|d| d.time.as_ref())
            .map(|t| seconds_between(t.0, input.now) as i64),
        metrics: metric_lines(spec, status, &history, input.now),
        recommended_replicas: decision.and_then(|d| d.recommended_replicas),
        limit_meaning: limited_by.as_deref().and_then(limit_meaning),
        limited_by,
        reason: decision.map(|d| d.reason.clone()),
        conditions: status
            .map(|s| {
                s.conditions
                    .iter()
                    .map(|c| ConditionLine {
                        type_: c.type_.clone(),
                        status: c.status.clone(),
                        reason: c.reason.clone().unwrap_or_default(),
                        message: c.message.clone().unwrap_or_default(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        waits,
        recommendations: history
            .recommendations
            .iter()
            .rev()
            .map(|r| PastRecommendation {
                seconds_ago: seconds_between(r.at, input.now) as i64,
                replicas: r.replicas,
            })
            .filter(|r| r.seconds_ago < window_seconds.max(1))
            .collect(),
        window_seconds,
        predictive: predictive_line(spec, input.predictive),
        notes,
    }
}

/// The predictive part of the explanation: absent while `spec.predictive` is off.
fn predictive_line(
    spec: &HorizontalPodAutoscalerPlusSpec,
    status: Option<&PredictiveStatus>,
) -> Option<PredictiveLine> {
    let settings = spec.predictive.as_ref()?;
    if settings.mode == PredictiveMode::Off {
        return None;
    }
    // Read back as the controller reads it: a native HPA's history comes from an annotation its
    // tenant may write, with any offsets (summed as they stand, they overflowed or told
    // negative hours), and a history the controller refuses is one it forecasts from nothing.
    let history_hours = status
        .and_then(|s| s.history.as_ref())
        .and_then(|h| LoadSeries::try_restore(h, BUCKET_SECONDS).ok())
        .map(|series| {
            series
                .metrics()
                .filter_map(|name| {
                    let span = series.newest(name)?.saturating_sub(series.oldest(name)?);
                    let seconds = span.saturating_add(1).saturating_mul(BUCKET_SECONDS);
                    Some((name.to_owned(), seconds / 3600))
                })
                .collect()
        })
        .unwrap_or_default();
    let reason = status.map_or_else(|| "NotEvaluated".to_owned(), |s| s.reason.clone());
    Some(PredictiveLine {
        settings: format!(
            "{:?}, season {}, {} days back, lead {}, overload weight {}",
            settings.mode,
            match settings.season {
                Season::Auto => "auto",
                Season::Day => "24h",
                Season::Week => "168h",
            },
            settings.lookback_days(),
            match settings.lead_seconds {
                LeadSeconds::Auto => "auto".to_owned(),
                LeadSeconds::Seconds(n) => format!("{n}s"),
            },
            settings.overload_weight()
        ),
        meaning: predictive_meaning(&reason).to_owned(),
        reason,
        message: status.map(|s| s.message.clone()).unwrap_or_default(),
        forecast: status.and_then(|s| s.forecast.clone()),
        forecast_replicas: status.and_then(|s| s.forecast_replicas),
        error_percent: status.and_then(|s| s.recent_error_percent),
        acting: status.is_some_and(|s| s.acting),
        history_hours,
    })
}

/// What a `status.predictive.reason` means for the replicas.
fn predictive_meaning(reason: &str) -> &'static str {
    match reason {
        "NotEnoughHistory" => {
            "no forecast yet: the same time of a past season must be in the history twice (one to forecast from, one to check on)"
        }
        "LargeError" => {
            "not trusted: the forecasts of this time of past seasons were too far off; the reactive decision stands"
        }
        "CostsMore" => {
            "not trusted: at this time of past seasons acting on the forecast would have held more replica-time for nothing than it had ready ahead of rises; the reactive decision stands"
        }
        "NoMetrics" => "no metric's forecast could be turned into replicas",
        "BelowReactive" => "the forecast needs no more replicas than the reactive decision",
        "Reported" => "Report mode: the forecast needs more replicas; nothing was changed",
        "Raised" => "the forecast raised the replicas above the reactive decision (scale-up only)",
        "NotEvaluated" => "the controller has not written status.predictive yet",
        _ => "",
    }
}

/// The scale-up and scale-down stabilization windows, as the controller resolves them.
fn windows(spec: &HorizontalPodAutoscalerPlusSpec, default_down: i64) -> (i64, i64) {
    match &spec.behavior {
        Some(b) => (
            scale_up_rules(b).window_seconds,
            scale_down_rules(b, default_down).window_seconds,
        ),
        None => (0, default_down),
    }
}

/// What the memory still holds at `now`: forbidden windows, watermark delays, stabilization.
fn memory_waits(
    spec: &HorizontalPodAutoscalerPlusSpec,
    history: &History,
    now: Timestamp,
    (up_window, down_window): (i64, i64),
    recommended: Option<i32>,
) -> Vec<Wait> {
    let mut waits = Vec::new();
    let left =
        |since: Timestamp, length: i64| (length as f64 - seconds_between(since, now)).ceil() as i64;
    if let Some(last) = history.last_scale_time {
        let ago = seconds_between(last, now) as i64;
        for (what, length, direction) in [
            (
                "upscaleForbiddenWindow",
                spec.upscale_forbidden_window_seconds,
                "up",
            ),
            (
                "downscaleForbiddenWindow",
                spec.downscale_forbidden_window_seconds,
                "down",
            ),
        ] {
            let length = i64::from(length.unwrap_or(0));
            let seconds_left = left(last, length);
            if seconds_left > 0 {
                waits.push(Wait {
                    what: what.to_owned(),
                    seconds_left,
                    detail: format!(
                        "no scale-{direction} for {length}s after the last scale ({ago}s ago)"
                    ),
                });
            }
        }
    }
    for (what, since, length, side) in [
        (
            "upscaleDelay",
            history.above_high_since,
            spec.upscale_delay_above_watermark_seconds,
            "above its high",
        ),
        (
            "downscaleDelay",
            history.below_low_since,
            spec.downscale_delay_below_watermark_seconds,
            "below its low",
        ),
    ] {
        let (Some(since), Some(length)) = (since, length) else {
            continue;
        };
        let seconds_left = left(since, i64::from(length));
        if seconds_left > 0 {
            waits.push(Wait {
                what: what.to_owned(),
                seconds_left,
                detail: format!(
                    "a metric has been {side} watermark for {}s; it must stay there {length}s",
                    seconds_between(since, now) as i64
                ),
            });
        }
    }
    let latest = recommended.or_else(|| history.recommendations.last().map(|r| r.replicas));
    if let Some(latest) = latest {
        waits.extend(stabilization_wait(history, now, down_window, latest, true));
        waits.extend(stabilization_wait(history, now, up_window, latest, false));
    }
    waits
}

/// How long the recommendations of one window keep the count from following `latest`:
/// for scale-down, those above it (the highest wins); for scale-up, those below it.
fn stabilization_wait(
    history: &History,
    now: Timestamp,
    window: i64,
    latest: i32,
    down: bool,
) -> Option<Wait> {
    let holding: Vec<_> = history
        .recommendations
        .iter()
        .filter(|r| seconds_between(r.at, now) < window as f64)
        .filter(|r| {
            if down {
                r.replicas > latest
            } else {
                r.replicas < latest
            }
        })
        .collect();
    let held_at = if down {
        holding.iter().map(|r| r.replicas).max()?
    } else {
        holding.iter().map(|r| r.replicas).min()?
    };
    // The count follows the held value until the recommendations at it leave the window;
    // it can follow the latest once every holding recommendation has left.
    let expiry = |r: &&TimedReplicas| (window as f64 - seconds_between(r.at, now)).ceil() as i64;
    let seconds_left = holding
        .iter()
        .filter(|r| r.replicas == held_at)
        .map(expiry)
        .max()?;
    let release = holding.iter().map(expiry).max()?;
    let (what, verb) = if down {
        ("scaleDownStabilization", "higher")
    } else {
        ("scaleUpStabilization", "lower")
    };
    Some(Wait {
        what: what.to_owned(),
        seconds_left,
        detail: format!(
            "recommendations {verb} than the latest ({latest}) in the last {window}s hold the count at {held_at}; it can follow the latest in {release}s"
        ),
    })
}

fn metric_lines(
    spec: &HorizontalPodAutoscalerPlusSpec,
    status: Option<&HorizontalPodAutoscalerPlusStatus>,
    history: &History,
    now: Timestamp,
) -> Vec<MetricLine> {
    let proposals = status
        .and_then(|s| s.last_decision.as_ref())
        .map(|d| d.proposals.as_slice())
        .unwrap_or_default();
    let current = status
        .map(|s| s.current_metrics.as_slice())
        .unwrap_or_default();
    let base = spec.utilization_base.unwrap_or_default();
    // Proposals and current metrics are in the order of the spec's metrics (the controller
    // evaluates them in that order).
    metrics_of(spec)
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let p = proposals.get(i);
            let name = p.map_or_else(|| spec_metric_name(m), |p| p.metric.clone());
            MetricLine {
                fallback: fallback_text(m, &name, current, history, now),
                current: current
                    .get(i)
                    .and_then(status_value)
                    .or_else(|| p.and_then(|p| p.value.clone())),
                target: target_text(m, base),
                proposed_replicas: p.and_then(|p| p.replicas),
                error: p.and_then(|p| p.error.clone()),
                metric: name,
            }
        })
        .collect()
}

/// The fallback of metric `m` (named `name`) while it fails: its first failure from the decision
/// memory (HPA+ and native) or else from its `currentMetrics` entry (`firstFailureTime`), stepped
/// to `now` as the controller would.
fn fallback_text(
    m: &MetricSpec,
    name: &str,
    current: &[MetricStatus],
    history: &History,
    now: Timestamp,
) -> Option<String> {
    let spec_fb = super::source::of(m)?.fallback()?;
    let first = history.metric_failures.get(name).copied().or_else(|| {
        current.iter().find_map(|s| {
            let named = s.external.as_ref().map(|e| e.metric.name.as_str()) == Some(name)
                || s.prometheus.as_ref().map(|p| p.name.as_str()) == Some(name);
            named
                .then(|| super::fallback::status_of(s))
                .flatten()
                .and_then(|f| f.first_failure_time.as_ref().map(|t| t.0))
        })
    })?;
    let fb = super::fallback::Fallback::of(spec_fb);
    let state = super::fallback::step(Some(fb), false, Some(first), now);
    let since = seconds_between(first, now) as i64;
    if let Some(r) = state.replicas {
        return Some(format!(
            "fallback active: failing for {since}s, proposes {r} replicas"
        ));
    }
    let wait = fb
        .failure_duration_seconds
        .unwrap_or(super::fallback::DEFAULT_FAILURE_DURATION_SECONDS);
    Some(format!(
        "failing for {since}s; proposes its fallback of {} replicas in {}s",
        spec_fb.replicas.max(1),
        (wait - since).max(0)
    ))
}

fn spec_metric_name(m: &MetricSpec) -> String {
    m.resource
        .as_ref()
        .map(|r| r.name.clone())
        .or_else(|| {
            m.container_resource
                .as_ref()
                .map(|r| format!("{}/{}", r.name, r.container))
        })
        .or_else(|| m.pods.as_ref().map(|p| p.metric.name.clone()))
        .or_else(|| m.object.as_ref().map(|o| o.metric.name.clone()))
        .or_else(|| m.external.as_ref().map(|e| e.metric.name.clone()))
        .unwrap_or_else(|| format!("{:?}", m.type_))
}

fn metric_target(m: &MetricSpec) -> Option<&MetricTarget> {
    m.resource
        .as_ref()
        .map(|r| &r.target)
        .or_else(|| m.container_resource.as_ref().map(|r| &r.target))
        .or_else(|| m.pods.as_ref().map(|p| &p.target))
        .or_else(|| m.object.as_ref().map(|o| &o.target))
        .or_else(|| m.external.as_ref().map(|e| &e.target))
}

fn target_text(m: &MetricSpec, base: UtilizationBase) -> String {
    let Some(t) = metric_target(m) else {
        return "(no target)".to_owned();
    };
    let q = |q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
        q.map_or_else(|| "?".to_owned(), |q| q.0.clone())
    };
    match t.type_ {
        MetricTargetType::Utilization => format!(
            "{}% of {}",
            t.average_utilization
                .map_or_else(|| "?".to_owned(), |u| u.to_string()),
            match base {
                UtilizationBase::Requests => "requests",
                UtilizationBase::Limits => "limits",
            }
        ),
        MetricTargetType::AverageValue => format!("{} per pod", q(t.average_value.as_ref())),
        MetricTargetType::Value => format!("{} in total", q(t.value.as_ref())),
        MetricTargetType::Watermark => format!(
            "band {}..{}",
            q(t.low_watermark.as_ref()),
            q(t.high_watermark.as_ref())
        ),
    }
}

fn status_value(s: &MetricStatus) -> Option<String> {
    let v: &MetricValueStatus = s
        .resource
        .as_ref()
        .map(|r| &r.current)
        .or_else(|| s.container_resource.as_ref().map(|r| &r.current))
        .or_else(|| s.pods.as_ref().map(|p| &p.current))
        .or_else(|| s.object.as_ref().map(|o| &o.current))
        .or_else(|| s.external.as_ref().map(|e| &e.current))?;
    v.average_utilization
        .map(|u| format!("{u}%"))
        .or_else(|| v.average_value.as_ref().map(|q| format!("{} per pod", q.0)))
        .or_else(|| v.value.as_ref().map(|q| q.0.clone()))
}

/// What a `limitedBy` name means.
fn limit_meaning(name: &str) -> Option<String> {
    let rule = LimitedBy::ALL.into_iter().find(|l| l.as_str() == name)?;
    Some(
        match rule {
            LimitedBy::AmbiguousSelector => "another autoscaler selects the same pods; nothing is scaled",
            LimitedBy::ScalingDisabled => "the target has 0 replicas that the autoscaler did not scale to zero (no ScaledToZero=True): autoscaling is off",
            LimitedBy::MinReplicas => "clamped up to minReplicas",
            LimitedBy::MaxReplicas => "clamped down to maxReplicas",
            LimitedBy::MinAvailable => "too few pods are available (minAvailableReplicaPercentage)",
            LimitedBy::MetricsUnavailable => "metrics failed, so the count was held",
            LimitedBy::Tolerance => "every metric was within its tolerance of the target",
            LimitedBy::WithinWatermarks => "every watermark metric was inside its band",
            LimitedBy::Stabilization => "a stabilization window kept an earlier recommendation",
            LimitedBy::Policy => "a behavior policy capped the change per period",
            LimitedBy::ScaleUpLimit => "the scale-up limit (scaleUpLimitFactor, or upstream's max(2×current, 4)) capped the step",
            LimitedBy::ScaleDownLimit => "scaleDownLimitFactor capped the step",
            LimitedBy::ReadyPods => "fewer pods are ready than the limited scale-down would keep",
            LimitedBy::ForbiddenWindow => "a forbidden window after the last scale is running",
            LimitedBy::WatermarkDelay => "the value has not been out of its band long enough",
            LimitedBy::Paused => "paused (spec.paused or the autoscale-disabled annotation)",
            LimitedBy::CronHold => "a CronHorizontalPodAutoscaler holds the target",
            LimitedBy::Rollout => "the target is rolling out (pauseDuringRollout)",
            LimitedBy::DryRun => "dryRun: computed and reported, never written",
        }
        .to_owned(),
    )
}

impl PredictiveLine {
    /// The *Predictive* section of [`Explanation::to_text`].
    fn write_text(&self, out: &mut String) {
        use std::fmt::Write as _;
        let p = self;
        let _ = writeln!(out, "\nPredictive ({}):", shown(&p.settings));
        let _ = writeln!(out, "  {}: {}", shown(&p.reason), shown(&p.meaning));
        if !p.message.is_empty() {
            let _ = writeln!(out, "  {}", shown(&p.message));
        }
        if let Some(f) = &p.forecast {
            let _ = write!(out, "  forecast: {}", shown(f));
            if let Some(r) = p.forecast_replicas {
                let _ = write!(out, " -> {r} replicas");
            }
            if let Some(e) = p.error_percent {
                let _ = write!(out, " ({e}% off at this time of past seasons)");
            }
            out.push('\n');
        }
        for (metric, hours) in &p.history_hours {
            let days = *hours as f64 / 24.0;
            let _ = writeln!(out, "  history: {} spans {days:.1} days", shown(metric));
        }
    }
}

impl Explanation {
    /// The explanation as text for a terminal.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(out, "{} -> {}", shown(&self.object), shown(&self.target));
        let _ = write!(
            out,
            "Replicas: {} current, {} desired (min {}, max {})",
            self.current_replicas, self.desired_replicas, self.min_replicas, self.max_replicas
        );
        if let Some(ago) = self.decided_seconds_ago {
            let _ = write!(out, "; last decision {ago}s ago");
        }
        out.push('\n');
        let _ = writeln!(
            out,
            "\nMetrics (each proposes replicas; the largest proposal wins):"
        );
        for m in &self.metrics {
            let _ = write!(
                out,
                "  {}: current {}, target {}",
                shown(&m.metric),
                shown(m.current.as_deref().unwrap_or("<unknown>")),
                shown(&m.target)
            );
            if let Some(r) = m.proposed_replicas {
                let _ = write!(out, " -> proposes {r} replicas");
            }
            if let Some(e) = &m.error {
                let _ = write!(out, " (failed: {})", shown(e));
            }
            if let Some(f) = &m.fallback {
                let _ = write!(out, " [{}]", shown(f));
            }
            out.push('\n');
        }
        if let Some(r) = self.recommended_replicas {
            let _ = writeln!(
                out,
                "\nRecommendation: {r} replicas; decided: {}",
                self.desired_replicas
            );
        }
        match (&self.limited_by, &self.limit_meaning) {
            (Some(by), Some(meaning)) => {
                let _ = writeln!(out, "Limited by: {} ({meaning})", shown(by));
            }
            (Some(by), None) => {
                let _ = writeln!(out, "Limited by: {}", shown(by));
            }
            _ => {}
        }
        if let Some(reason) = &self.reason {
            let _ = writeln!(out, "Reason: {}", shown(reason));
        }
        if !self.conditions.is_empty() {
            let _ = writeln!(out, "\nConditions:");
            for c in &self.conditions {
                let _ = writeln!(
                    out,
                    "  {}={} {}: {}",
                    shown(&c.type_),
                    shown(&c.status),
                    shown(&c.reason),
                    shown(&c.message)
                );
            }
        }
        let _ = writeln!(out, "\nWaiting:");
        if self.waits.is_empty() {
            let _ = writeln!(out, "  nothing: no cooldown, delay or window is running");
        }
        for w in &self.waits {
            let _ = writeln!(
                out,
                "  {}: {}s left ({})",
                shown(&w.what),
                w.seconds_left,
                shown(&w.detail)
            );
        }
        if !self.recommendations.is_empty() {
            let _ = writeln!(
                out,
                "\nRecommendations stabilization considers (last {}s, newest first):",
                self.window_seconds
            );
            for r in &self.recommendations {
                let _ = writeln!(out, "  {}s ago: {}", r.seconds_ago, r.replicas);
            }
        }
        if let Some(p) = &self.predictive {
            p.write_text(&mut out);
        }
        for n in &self.notes {
            let _ = writeln!(out, "\nNote: {}", shown(n));
        }
        out
    }
}

#[cfg(test)]
mod tests;
