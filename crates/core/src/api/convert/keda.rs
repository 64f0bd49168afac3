//! KEDA `ScaledObject` (`keda.sh/v1alpha1`) → `HorizontalPodAutoscalerPlus` and/or
//! `CronHorizontalPodAutoscaler`.
//!
//! KEDA turns a ScaledObject into an upstream HPA whose metrics are its triggers, plus its own
//! loop that scales between 0 and 1. The conversion keeps what has the same meaning here:
//! * `cpu`/`memory` triggers → `Resource` metrics (`ContainerResource` with a
//!   `metadata.containerName`), `metricType` `Utilization` or `AverageValue`, target
//!   `metadata.value`;
//! * `prometheus` triggers → `type: Prometheus` metrics: `query`, `serverAddress`, `threshold`
//!   as the target (`AverageValue` unless `metricType: Value`, as KEDA reads it), the trigger's
//!   `name` as the metric's name;
//! * `cron` triggers → a CronHPA. KEDA's window means "at least `desiredReplicas` between `start`
//!   and `end`" (its metric joins the others, largest wins). With other triggers the CronHPA runs
//!   in min-replicas mode on the converted HPA+: at `start` `minReplicas` becomes
//!   `desiredReplicas`, at `end` it returns to the HPA+'s own minimum. With only cron triggers
//!   there is no HPA+: the CronHPA sets the workload's replicas, `desiredReplicas` at `start` and
//!   `minReplicaCount` (KEDA's default 0) at `end`;
//! * `minReplicaCount`/`maxReplicaCount` (KEDA defaults 0 and 100), `pollingInterval` as
//!   `syncPeriodSeconds`, `advanced.horizontalPodAutoscalerConfig.behavior`, the
//!   `autoscaling.keda.sh/paused` annotation as `spec.paused`.
//!
//! KEDA's `minReplicaCount: 0` scales to zero when every trigger is inactive. The HPA+ does so
//! (minReplicas 0, upstream `HPAScaleToZero`) when its metrics propose 0, which is the same thing
//! only when every metric is a Prometheus query without an activation threshold; otherwise the
//! minimum becomes 1 and the drop says why. Everything else (fallback, scaling modifiers,
//! authentication, cooldowns, idle replicas, other trigger types, caching) is reported.
//!
//! Invariant: a ScaledObject is hostile input; every error names the field, and user values are
//! quoted through [`quoted`] (bounded).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::fields::{Dropped, Fields, UNKNOWN, drop_status, metadata, quantity_text};
use super::{Conversion, ConvertError, Converted};
use crate::api::cron::{CronHorizontalPodAutoscaler, CronHorizontalPodAutoscalerSpec, ScalingJob};
use crate::api::hpa_plus::{
    ContainerResourceMetricSource, CrossVersionObjectReference, HorizontalPodAutoscalerBehavior,
    HorizontalPodAutoscalerPlus, HorizontalPodAutoscalerPlusSpec, MetricSourceType, MetricSpec,
    MetricTarget, MetricTargetType, PrometheusMetricSource, ResourceMetricSource,
};
use crate::quoted::quoted;

/// KEDA's default `minReplicaCount`.
const DEFAULT_MIN: i32 = 0;
/// KEDA's default `maxReplicaCount`.
const DEFAULT_MAX: i32 = 100;
/// At most this many triggers are read (the HPA+ takes at most 32 metrics; KEDA has no limit,
/// and no real ScaledObject comes near it).
const MAX_TRIGGERS: usize = 64;
/// The annotation that pauses a ScaledObject.
const PAUSED: &str = "autoscaling.keda.sh/paused";

/// A cron trigger, read.
struct Window {
    name: String,
    time_zone: String,
    start: String,
    end: String,
    desired: i32,
}

/// What the triggers became.
#[derive(Default)]
struct Triggers {
    metrics: Vec<MetricSpec>,
    windows: Vec<Window>,
    /// Whether some metric keeps KEDA from scaling to zero on its value alone (a Resource metric,
    /// or an activation threshold).
    blocks_zero: bool,
}

/// What the spec says, read.
struct Scaled {
    target: CrossVersionObjectReference,
    min: Option<i32>,
    max: i32,
    sync: Option<i32>,
    behavior: Option<HorizontalPodAutoscalerBehavior>,
    paused: bool,
    triggers: Triggers,
}

/// Converts one ScaledObject document.
pub fn convert(doc: &Value) -> Result<Conversion, ConvertError> {
    let mut dropped = Vec::new();
    let mut notes = Vec::new();
    let (metadata, paused) = read_metadata(doc, &mut dropped, &mut notes)?;
    let name = metadata.name.clone().unwrap_or_default();
    let mut f = Fields::new("spec", doc.get("spec"))?;
    let scaled = Scaled {
        target: scale_target(&mut f, &mut dropped, &mut notes)?,
        min: f.take_as("minReplicaCount")?,
        max: f.take_as("maxReplicaCount")?.unwrap_or(DEFAULT_MAX),
        sync: f.take_as("pollingInterval")?,
        triggers: read_triggers(&mut f, &mut dropped)?,
        behavior: read_advanced(&mut f, &mut dropped)?,
        paused,
    };
    f.finish(UNKNOWN, &mut dropped);
    drop_status(doc, &mut dropped);
    let object = if scaled.triggers.metrics.is_empty() {
        if scaled.triggers.windows.is_empty() {
            return Err(ConvertError::invalid(
                "spec.triggers",
                "no trigger converts (cpu, memory, prometheus or cron); nothing would scale",
            ));
        }
        cron_only(&metadata, scaled, &mut dropped, &mut notes)
    } else {
        with_metrics(&metadata, &name, scaled, &mut dropped, &mut notes)
    };
    Ok(Conversion {
        source: format!("ScaledObject/{name}"),
        object,
        dropped,
        notes,
    })
}

/// The metadata, and whether the `paused` annotation pauses the object (it leaves the metadata).
fn read_metadata(
    doc: &Value,
    dropped: &mut Vec<Dropped>,
    notes: &mut Vec<String>,
) -> Result<(ObjectMeta, bool), ConvertError> {
    let mut paused = false;
    let mut metadata = metadata(
        doc,
        |key| {
            if key == PAUSED {
                return None;
            }
            (key.ends_with(".keda.sh") || key.contains(".keda.sh/")).then_some(
                "a KEDA operator setting (paused replicas, HPA ownership, validation); Plimsoll has no counterpart",
            )
        },
        dropped,
    )?;
    if let Some(annotations) = metadata.annotations.as_mut()
        && let Some(v) = annotations.remove(PAUSED)
    {
        paused = v.trim().eq_ignore_ascii_case("true");
        notes.push(format!(
            "annotation {PAUSED} {} became spec.paused: {paused}",
            quoted(&v)
        ));
        if annotations.is_empty() {
            metadata.annotations = None;
        }
    }
    Ok((metadata, paused))
}

/// `spec.advanced` (its behavior) and the spec fields that are only reported.
fn read_advanced(
    f: &mut Fields,
    dropped: &mut Vec<Dropped>,
) -> Result<Option<HorizontalPodAutoscalerBehavior>, ConvertError> {
    let mut behavior = None;
    if let Some(a) = f.take("advanced") {
        let mut a = Fields::new("spec.advanced", Some(&a))?;
        if let Some(h) = a.take("horizontalPodAutoscalerConfig") {
            let mut h = Fields::new("spec.advanced.horizontalPodAutoscalerConfig", Some(&h))?;
            behavior = h.take_as::<HorizontalPodAutoscalerBehavior>("behavior")?;
            if h.take("name").is_some() {
                dropped.push(Dropped::new(
                    h.at("name"),
                    "the name of KEDA's HPA; the HPA+ takes the ScaledObject's name",
                ));
            }
            h.finish(UNKNOWN, dropped);
        }
        if a.take("scalingModifiers").is_some() {
            dropped.push(Dropped::new(
                "spec.advanced.scalingModifiers",
                "a formula over the triggers has no counterpart: each HPA+ metric proposes on its own and the largest wins; write the formula as one Prometheus query",
            ));
        }
        if a.take("restoreToOriginalReplicaCount").is_some() {
            dropped.push(Dropped::new(
                "spec.advanced.restoreToOriginalReplicaCount",
                "deleting an HPA+ leaves the replicas where they are",
            ));
        }
        a.finish(UNKNOWN, dropped);
    }
    for (key, reason) in [
        (
            "cooldownPeriod",
            "KEDA's wait before scaling to zero after the last trigger turns inactive has no counterpart: a CronHPA end job scales at once, an HPA+ with minReplicas 0 waits as behavior.scaleDown says",
        ),
        (
            "initialCooldownPeriod",
            "KEDA's wait after creation before scaling to zero has no counterpart",
        ),
        (
            "idleReplicaCount",
            "KEDA's idle size when every trigger is inactive (then jumping to minReplicaCount) has no counterpart: the HPA+ scales to zero only with minReplicas 0, one replica at a time",
        ),
        (
            "fallback",
            "a fixed replica count after failed metric reads: the HPA+ keeps the current replicas when a metric fails",
        ),
    ] {
        if f.take(key).is_some() {
            dropped.push(Dropped::new(f.at(key), reason));
        }
    }
    Ok(behavior)
}

/// Only cron triggers: a CronHPA on the workload.
fn cron_only(
    metadata: &ObjectMeta,
    s: Scaled,
    dropped: &mut Vec<Dropped>,
    notes: &mut Vec<String>,
) -> Converted {
    for (present, key) in [
        (s.sync.is_some(), "spec.pollingInterval"),
        (
            s.behavior.is_some(),
            "spec.advanced.horizontalPodAutoscalerConfig.behavior",
        ),
        (s.paused, "metadata.annotations.autoscaling.keda.sh/paused"),
    ] {
        if present {
            dropped.push(Dropped::new(
                key,
                "only cron triggers: the CronHPA sets the replicas directly and has no HPA+ to carry this",
            ));
        }
    }
    let floor = s.min.unwrap_or(DEFAULT_MIN);
    notes.push(format!(
        "only cron triggers: the CronHPA sets the workload's replicas, each window's desiredReplicas at its start and minReplicaCount {floor} at its end"
    ));
    Converted::Cron(Box::new(cron_hpa(
        metadata,
        s.target,
        &s.triggers.windows,
        floor,
        s.max,
        notes,
    )))
}

/// Metric triggers: an HPA+, and a CronHPA raising its minimum for the cron triggers.
fn with_metrics(
    metadata: &ObjectMeta,
    name: &str,
    s: Scaled,
    dropped: &mut Vec<Dropped>,
    notes: &mut Vec<String>,
) -> Converted {
    let min_replicas = match s.min.unwrap_or(DEFAULT_MIN) {
        0 if s.triggers.blocks_zero => {
            dropped.push(Dropped::new(
                "spec.minReplicaCount",
                "0 (KEDA's default): KEDA scales to zero when every trigger other than cpu/memory is inactive; the HPA+ scales to zero only on metric values of 0, which a Resource metric or an activation threshold does not give, so minReplicas is 1",
            ));
            1
        }
        n => n,
    };
    let plus = HorizontalPodAutoscalerPlus {
        metadata: metadata.clone(),
        spec: HorizontalPodAutoscalerPlusSpec {
            scale_target_ref: s.target,
            min_replicas: Some(min_replicas),
            max_replicas: s.max,
            metrics: s.triggers.metrics,
            behavior: s.behavior,
            sync_period_seconds: s.sync,
            paused: s.paused,
            ..HorizontalPodAutoscalerPlusSpec::default()
        },
        status: None,
    };
    if s.triggers.windows.is_empty() {
        Converted::HpaPlus(Box::new(plus))
    } else {
        let to = CrossVersionObjectReference {
            api_version: Some("autoscaling.plimsoll.dev/v1alpha1".to_owned()),
            kind: "HorizontalPodAutoscalerPlus".to_owned(),
            name: name.to_owned(),
        };
        notes.push(format!(
            "cron triggers became a CronHPA that raises the HPA+'s minReplicas to each window's desiredReplicas at its start and returns it to {min_replicas} at its end"
        ));
        let cron = cron_hpa(
            metadata,
            to,
            &s.triggers.windows,
            min_replicas,
            s.max,
            notes,
        );
        Converted::Several(vec![
            Converted::HpaPlus(Box::new(plus)),
            Converted::Cron(Box::new(cron)),
        ])
    }
}

/// `spec.scaleTargetRef` with KEDA's defaults (`apps/v1` `Deployment`) written out.
fn scale_target(
    f: &mut Fields,
    dropped: &mut Vec<Dropped>,
    notes: &mut Vec<String>,
) -> Result<CrossVersionObjectReference, ConvertError> {
    let mut t = Fields::new(&f.at("scaleTargetRef"), f.take("scaleTargetRef").as_ref())?;
    let name: String = t
        .take_as("name")?
        .filter(|n: &String| !n.is_empty())
        .ok_or_else(|| ConvertError::invalid(t.at("name"), "required"))?;
    let api_version: Option<String> = t.take_as("apiVersion")?;
    let kind: Option<String> = t.take_as("kind")?;
    if api_version.is_none() || kind.is_none() {
        notes.push(
            "spec.scaleTargetRef: KEDA's defaults apiVersion apps/v1, kind Deployment written out"
                .to_owned(),
        );
    }
    if t.take("envSourceContainerName").is_some() {
        dropped.push(Dropped::new(
            t.at("envSourceContainerName"),
            "KEDA reads trigger settings from that container's environment; Plimsoll reads none",
        ));
    }
    t.finish(UNKNOWN, dropped);
    Ok(CrossVersionObjectReference {
        api_version: Some(api_version.unwrap_or_else(|| "apps/v1".to_owned())),
        kind: kind.unwrap_or_else(|| "Deployment".to_owned()),
        name,
    })
}

fn read_triggers(f: &mut Fields, dropped: &mut Vec<Dropped>) -> Result<Triggers, ConvertError> {
    let mut out = Triggers::default();
    let list = match f.take("triggers") {
        None => Vec::new(),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(ConvertError::invalid("spec.triggers", "expected a list")),
    };
    if list.len() > MAX_TRIGGERS {
        return Err(ConvertError::invalid(
            "spec.triggers",
            format!("{} triggers, at most {MAX_TRIGGERS} are read", list.len()),
        ));
    }
    for (i, t) in list.iter().enumerate() {
        read_trigger(&format!("spec.triggers[{i}]"), i, t, &mut out, dropped)?;
    }
    Ok(out)
}

fn read_trigger(
    path: &str,
    index: usize,
    t: &Value,
    out: &mut Triggers,
    dropped: &mut Vec<Dropped>,
) -> Result<(), ConvertError> {
    let mut f = Fields::new(path, Some(t))?;
    let kind: String = f
        .take_as("type")?
        .ok_or_else(|| ConvertError::invalid(f.at("type"), "required"))?;
    let name: Option<String> = f.take_as("name")?;
    let metric_type: Option<String> = f.take_as("metricType")?;
    let mut m = Fields::new(&f.at("metadata"), f.take("metadata").as_ref())?;
    for (key, reason) in [
        (
            "authenticationRef",
            "credentials for the trigger's source: the hpa-plus controller's flags hold them",
        ),
        (
            "useCachedMetrics",
            "KEDA's metric cache between polls; hpa-plus reads each metric once per evaluation",
        ),
    ] {
        if f.take(key).is_some() {
            dropped.push(Dropped::new(f.at(key), reason));
        }
    }
    match kind.as_str() {
        "cpu" | "memory" => {
            out.metrics.push(resource_metric(
                &kind,
                metric_type.as_deref(),
                &f.at("metricType"),
                &mut m,
            )?);
            out.blocks_zero = true;
            drop_name(path, name.as_ref(), dropped);
        }
        "prometheus" => {
            let metric = prometheus_metric(
                name,
                metric_type.as_deref(),
                &f.at("metricType"),
                m,
                &mut out.blocks_zero,
                dropped,
            )?;
            out.metrics.push(metric);
            f.finish(UNKNOWN, dropped);
            return Ok(());
        }
        "cron" => out.windows.push(cron_window(name, index, &mut m)?),
        other => {
            dropped.push(Dropped::new(
                path,
                format!(
                    "trigger type {} has no Plimsoll counterpart (cpu, memory, prometheus and cron convert); write it as a Prometheus or External metric by hand",
                    quoted(other)
                ),
            ));
            return Ok(());
        }
    }
    m.finish(UNKNOWN, dropped);
    f.finish(UNKNOWN, dropped);
    Ok(())
}

/// A cpu/memory trigger's metric.
fn resource_metric(
    kind: &str,
    metric_type: Option<&str>,
    metric_type_path: &str,
    m: &mut Fields,
) -> Result<MetricSpec, ConvertError> {
    let type_ = match metric_type {
        None | Some("Utilization") => MetricTargetType::Utilization,
        Some("AverageValue") => MetricTargetType::AverageValue,
        Some(other) => {
            return Err(ConvertError::invalid(
                metric_type_path,
                format!("{} is neither Utilization nor AverageValue", quoted(other)),
            ));
        }
    };
    let value = required_text(m, "value")?;
    let mut target = MetricTarget {
        type_,
        ..MetricTarget::default()
    };
    if type_ == MetricTargetType::Utilization {
        target.average_utilization = Some(value.parse().map_err(|_| {
            ConvertError::invalid(
                m.at("value"),
                format!("{} is not a whole percentage", quoted(&value)),
            )
        })?);
    } else {
        target.average_value = Some(Quantity(value));
    }
    let container: Option<String> = m.take_as("containerName")?;
    Ok(match container.filter(|c| !c.is_empty()) {
        Some(container) => MetricSpec {
            type_: MetricSourceType::ContainerResource,
            container_resource: Some(ContainerResourceMetricSource {
                name: kind.to_owned(),
                container,
                target,
            }),
            ..MetricSpec::default()
        },
        None => MetricSpec {
            type_: MetricSourceType::Resource,
            resource: Some(ResourceMetricSource {
                name: kind.to_owned(),
                target,
            }),
            ..MetricSpec::default()
        },
    })
}

/// A prometheus trigger's metric; the metadata left over is reported (`m` is finished).
fn prometheus_metric(
    name: Option<String>,
    metric_type: Option<&str>,
    metric_type_path: &str,
    mut m: Fields,
    blocks_zero: &mut bool,
    dropped: &mut Vec<Dropped>,
) -> Result<MetricSpec, ConvertError> {
    let query = required_text(&mut m, "query")?;
    let threshold = required_text(&mut m, "threshold")?;
    let server_address: Option<String> = m.take_as("serverAddress")?;
    let type_ = match metric_type {
        None | Some("AverageValue") => MetricTargetType::AverageValue,
        Some("Value") => MetricTargetType::Value,
        Some(other) => {
            return Err(ConvertError::invalid(
                metric_type_path,
                format!(
                    "{} is neither AverageValue nor Value for a prometheus trigger",
                    quoted(other)
                ),
            ));
        }
    };
    let mut target = MetricTarget {
        type_,
        ..MetricTarget::default()
    };
    if type_ == MetricTargetType::Value {
        target.value = Some(Quantity(threshold));
    } else {
        target.average_value = Some(Quantity(threshold));
    }
    if let Some(a) = m.take("activationThreshold") {
        let text = quantity_text(&m.at("activationThreshold"), &a)?;
        if text.parse::<f64>() != Ok(0.0) {
            *blocks_zero = true;
            dropped.push(Dropped::new(
                m.at("activationThreshold"),
                format!(
                    "{}: KEDA's activation (0 ↔ 1 replicas) has no counterpart; the HPA+ scales on the threshold alone",
                    quoted(&text)
                ),
            ));
        }
    }
    let metric = MetricSpec {
        type_: MetricSourceType::Prometheus,
        prometheus: Some(PrometheusMetricSource {
            query,
            name,
            server_address,
            target,
            fallback: None,
        }),
        ..MetricSpec::default()
    };
    m.finish(
        "a Prometheus client setting (namespace, headers, TLS, timeout, auth mode, empty results): hpa-plus's --prometheus-* flags set them for every query",
        dropped,
    );
    Ok(metric)
}

/// A cron trigger's window.
fn cron_window(name: Option<String>, index: usize, m: &mut Fields) -> Result<Window, ConvertError> {
    let time_zone = required_text(m, "timezone")?;
    let start = required_text(m, "start")?;
    let end = required_text(m, "end")?;
    let desired = required_text(m, "desiredReplicas")?;
    let desired = desired
        .parse::<i32>()
        .ok()
        .filter(|d| *d >= 0)
        .ok_or_else(|| {
            ConvertError::invalid(
                m.at("desiredReplicas"),
                format!("{} is not a replica count", quoted(&desired)),
            )
        })?;
    Ok(Window {
        name: name.unwrap_or_else(|| format!("cron-{index}")),
        time_zone,
        start,
        end,
        desired,
    })
}

/// A trigger name has no home on a Resource metric.
fn drop_name(path: &str, name: Option<&String>, dropped: &mut Vec<Dropped>) {
    if name.is_some() {
        dropped.push(Dropped::new(
            format!("{path}.name"),
            "KEDA's name for scalingModifiers; a Resource metric is named by its resource",
        ));
    }
}

/// A required metadata value, as text (KEDA writes numbers as strings, YAML may not).
fn required_text(m: &mut Fields, key: &str) -> Result<String, ConvertError> {
    let path = m.at(key);
    let v = m
        .take(key)
        .ok_or_else(|| ConvertError::invalid(&path, "required"))?;
    let text = quantity_text(&path, &v)?;
    if text.is_empty() {
        return Err(ConvertError::invalid(path, "required"));
    }
    Ok(text)
}

/// The CronHPA of the cron windows: a start and an end job per window.
fn cron_hpa(
    metadata: &ObjectMeta,
    target: CrossVersionObjectReference,
    windows: &[Window],
    floor: i32,
    max: i32,
    notes: &mut Vec<String>,
) -> CronHorizontalPodAutoscaler {
    let mut jobs = Vec::new();
    for w in windows {
        let desired = if w.desired > max {
            notes.push(format!(
                "{}: desiredReplicas {} capped at maxReplicaCount {max}, as KEDA's HPA caps it",
                w.name, w.desired
            ));
            max
        } else {
            w.desired
        };
        jobs.push(ScalingJob {
            name: format!("{}-start", w.name),
            schedule: w.start.clone(),
            target_size: desired,
            run_once: false,
        });
        jobs.push(ScalingJob {
            name: format!("{}-end", w.name),
            schedule: w.end.clone(),
            target_size: floor,
            run_once: false,
        });
    }
    if let Some(first) = windows.first() {
        if windows.iter().any(|w| w.time_zone != first.time_zone) {
            notes.push(format!(
                "the cron triggers name different time zones; the CronHPA reads every schedule in the first, {}",
                quoted(&first.time_zone)
            ));
        }
        if windows.len() > 1 {
            notes.push(
                "several cron windows: KEDA keeps the largest desiredReplicas of the open windows; the CronHPA applies each start and end as it comes, so an end inside another window lowers the size early".to_owned(),
            );
        }
    }
    notes.push(
        "a CronHPA acts at the window's start and end; KEDA also holds desiredReplicas when created inside a window".to_owned(),
    );
    CronHorizontalPodAutoscaler {
        metadata: metadata.clone(),
        spec: CronHorizontalPodAutoscalerSpec {
            scale_target_ref: k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference {
                api_version: target.api_version,
                kind: target.kind,
                name: target.name,
            },
            time_zone: windows.first().map(|w| w.time_zone.clone()),
            exclude_dates: Vec::new(),
            jobs,
        },
        status: None,
    }
}
