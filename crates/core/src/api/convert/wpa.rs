//! DataDog `WatermarkPodAutoscaler` (`datadoghq.com/v1alpha1`) → `HorizontalPodAutoscalerPlus`.
//!
//! Every WPA top-level field keeps its name in the HPA+ spec (DESIGN.md's WPA column); metrics
//! move from `external.{metricName, metricSelector, lowWatermark, highWatermark}` to
//! `external.{metric: {name, selector}, target: {type: Watermark, …}}`, and Resource metrics
//! likewise under `resource.target`. A WPA has no stabilization window, so the HPA+ gets
//! `behavior.scaleUp/scaleDown.stabilizationWindowSeconds: 0` (otherwise upstream's 300 s
//! scale-down window would apply). The WPA controller defaults what a WPA leaves out
//! (`DefaultWatermarkPodAutoscaler`): limit factors 50 % up and 20 % down, forbidden windows of 60 s
//! up and 300 s down (a window of 0 counts as unset there); the HPA+ defaults these to "none", so
//! the converter writes the WPA's defaults out, each with a note. A metric with only one watermark
//! gets the other set to the same value, as the WPA controller does. What has no home: the
//! `recommender` service, a Resource metric's `metricSelector`, a limit factor above 100 % (the
//! HPA+ caps it at 100), the `wpa.datadoghq.com/*` annotations and the status.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use super::fields::{Dropped, Fields, UNKNOWN, drop_status, metadata, quantity_text};
use super::{Conversion, ConvertError, Converted};
use crate::api::hpa_plus::quantity_value;
use crate::api::hpa_plus::{
    Algorithm, ConvergeTowardsWatermark, CrossVersionObjectReference, ExternalMetricSource,
    HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerPlus, HorizontalPodAutoscalerPlusSpec,
    HpaScalingRules, MetricIdentifier, MetricSourceType, MetricSpec, MetricTarget,
    MetricTargetType, ResourceMetricSource,
};

/// Converts one WPA document.
pub fn convert(doc: &Value) -> Result<Conversion, ConvertError> {
    let mut dropped = Vec::new();
    let mut notes = Vec::new();
    let metadata = metadata(
        doc,
        |key| {
            key.starts_with("wpa.datadoghq.com/").then_some(
                "a WPA controller setting (lifecycle control, logging); hpa-plus has no equivalent annotation",
            )
        },
        &mut dropped,
    )?;
    let mut spec_fields = Fields::new("spec", doc.get("spec"))?;
    let spec = read_spec(&mut spec_fields, &mut dropped, &mut notes)?;
    spec_fields.finish(UNKNOWN, &mut dropped);
    drop_status(doc, &mut dropped);
    let name = metadata.name.clone().unwrap_or_default();
    Ok(Conversion {
        source: format!("WatermarkPodAutoscaler/{name}"),
        object: Converted::HpaPlus(Box::new(HorizontalPodAutoscalerPlus {
            metadata,
            spec,
            status: None,
        })),
        dropped,
        notes,
    })
}

fn read_spec(
    f: &mut Fields,
    dropped: &mut Vec<Dropped>,
    notes: &mut Vec<String>,
) -> Result<HorizontalPodAutoscalerPlusSpec, ConvertError> {
    let scale_target_ref: CrossVersionObjectReference = f
        .take_as("scaleTargetRef")?
        .ok_or_else(|| ConvertError::invalid(f.at("scaleTargetRef"), "required"))?;
    let max_replicas: i32 = f
        .take_as("maxReplicas")?
        .ok_or_else(|| ConvertError::invalid(f.at("maxReplicas"), "required"))?;
    let mut metrics = Vec::new();
    if let Some(Value::Array(list)) = f.take("metrics") {
        for (i, m) in list.iter().enumerate() {
            if let Some(metric) = read_metric(&format!("spec.metrics[{i}]"), m, dropped)? {
                metrics.push(metric);
            }
        }
    }
    let quantity = |f: &mut Fields, key: &str| -> Result<Option<Quantity>, ConvertError> {
        let path = f.at(key);
        f.take(key)
            .map(|v| quantity_text(&path, &v).map(Quantity))
            .transpose()
    };
    let algorithm = match f.take("algorithm") {
        None => None,
        Some(v) => match v.as_str().map(str::to_ascii_lowercase).as_deref() {
            Some("absolute") => Some(Algorithm::Absolute),
            Some("average") => Some(Algorithm::Average),
            _ => {
                dropped.push(Dropped::new(
                    "spec.algorithm",
                    format!("{v} is neither absolute nor average; the default (absolute) applies"),
                ));
                None
            }
        },
    };
    let converge = match f.take("convergeTowardsWatermark") {
        None => None,
        Some(v) => match v.as_str().map(str::to_ascii_lowercase).as_deref() {
            Some("highwatermark") => Some(ConvergeTowardsWatermark::HighWatermark),
            Some("lowwatermark") => Some(ConvergeTowardsWatermark::LowWatermark),
            Some("") => None,
            _ => {
                dropped.push(Dropped::new(
                    "spec.convergeTowardsWatermark",
                    format!("{v} is neither highWatermark nor lowWatermark"),
                ));
                None
            }
        },
    };
    if f.take("recommender").is_some() {
        dropped.push(Dropped::new(
            "spec.recommender",
            "Plimsoll does not call an external replica recommender service; the watermark metrics decide",
        ));
    }
    notes.push(
        "behavior.scaleUp/scaleDown.stabilizationWindowSeconds set to 0: a WPA has no stabilization window (without it the HPA+ default of 300 s for scale-down would apply)".to_owned(),
    );
    let zero_window = || {
        Some(HpaScalingRules {
            stabilization_window_seconds: Some(0),
            ..HpaScalingRules::default()
        })
    };
    let mut spec = HorizontalPodAutoscalerPlusSpec {
        scale_target_ref,
        min_replicas: f.take_as("minReplicas")?,
        max_replicas,
        metrics,
        behavior: Some(HorizontalPodAutoscalerBehavior {
            scale_up: zero_window(),
            scale_down: zero_window(),
            sync_period_seconds: None,
        }),
        tolerance: quantity(f, "tolerance")?,
        upscale_delay_above_watermark_seconds: f.take_as("upscaleDelayAboveWatermarkSeconds")?,
        downscale_delay_below_watermark_seconds: f
            .take_as("downscaleDelayBelowWatermarkSeconds")?,
        algorithm,
        min_available_replica_percentage: f.take_as("minAvailableReplicaPercentage")?,
        readiness_delay_seconds: f.take_as("readinessDelaySeconds")?,
        replica_scaling_absolute_modulo: f.take_as("replicaScalingAbsoluteModulo")?,
        converge_towards_watermark: converge,
        tolerate_zero: f.take_as("tolerateZero")?.unwrap_or(false),
        dry_run: f.take_as("dryRun")?.unwrap_or(false),
        ..HorizontalPodAutoscalerPlusSpec::default()
    };
    WpaDefaults { dropped, notes }.apply(f, &mut spec)?;
    Ok(spec)
}

/// The `lowWatermark`/`highWatermark` pair of a WPA metric as a Watermark target.
fn watermark_target(f: &mut Fields) -> Result<MetricTarget, ConvertError> {
    let mut mark = |key: &str| -> Result<Option<Quantity>, ConvertError> {
        let path = f.at(key);
        f.take(key)
            .map(|v| quantity_text(&path, &v).map(Quantity))
            .transpose()
    };
    let low = mark("lowWatermark")?;
    let high = mark("highWatermark")?;
    // The WPA controller completes a band with one watermark to a band of width 0.
    let (low_watermark, high_watermark) = match (low, high) {
        (None, Some(h)) => (Some(h.clone()), Some(h)),
        (Some(l), None) => (Some(l.clone()), Some(l)),
        pair => pair,
    };
    Ok(MetricTarget {
        type_: MetricTargetType::Watermark,
        low_watermark,
        high_watermark,
        ..MetricTarget::default()
    })
}

fn read_metric(
    path: &str,
    m: &Value,
    dropped: &mut Vec<Dropped>,
) -> Result<Option<MetricSpec>, ConvertError> {
    let mut f = Fields::new(path, Some(m))?;
    let kind: Option<String> = f.take_as("type")?;
    let metric = match kind.as_deref() {
        Some("External") => {
            let mut e = Fields::new(&f.at("external"), f.take("external").as_ref())?;
            let name: String = e
                .take_as("metricName")?
                .ok_or_else(|| ConvertError::invalid(e.at("metricName"), "required"))?;
            let selector: Option<LabelSelector> = e.take_as("metricSelector")?;
            let target = watermark_target(&mut e)?;
            e.finish(UNKNOWN, dropped);
            Some(MetricSpec {
                type_: MetricSourceType::External,
                external: Some(ExternalMetricSource {
                    metric: MetricIdentifier { name, selector },
                    target,
                    fallback: None,
                }),
                ..MetricSpec::default()
            })
        }
        Some("Resource") => {
            let mut r = Fields::new(&f.at("resource"), f.take("resource").as_ref())?;
            let name: String = r
                .take_as("name")?
                .ok_or_else(|| ConvertError::invalid(r.at("name"), "required"))?;
            if r.take("metricSelector").is_some() {
                dropped.push(Dropped::new(
                    r.at("metricSelector"),
                    "a Resource metric covers the target's pods; the pods are chosen by the target's selector",
                ));
            }
            let target = watermark_target(&mut r)?;
            r.finish(UNKNOWN, dropped);
            Some(MetricSpec {
                type_: MetricSourceType::Resource,
                resource: Some(ResourceMetricSource { name, target }),
                ..MetricSpec::default()
            })
        }
        other => {
            dropped.push(Dropped::new(
                path,
                format!(
                    "metric type {} is not one a WPA evaluates (External, Resource); write it by hand",
                    other.unwrap_or("(none)")
                ),
            ));
            return Ok(None);
        }
    };
    f.finish(UNKNOWN, dropped);
    Ok(metric)
}

/// The WPA controller's defaults for the fields whose HPA+ default differs
/// (`DefaultWatermarkPodAutoscaler` in DataDog/watermarkpodautoscaler `api/v1alpha1`).
const DEFAULT_SCALE_UP_LIMIT_FACTOR: &str = "50";
const DEFAULT_SCALE_DOWN_LIMIT_FACTOR: &str = "20";
const DEFAULT_UPSCALE_FORBIDDEN_WINDOW_SECONDS: i32 = 60;
const DEFAULT_DOWNSCALE_FORBIDDEN_WINDOW_SECONDS: i32 = 300;

/// Reads the limit factors and forbidden windows, writing out the WPA's defaults.
struct WpaDefaults<'a> {
    dropped: &'a mut Vec<Dropped>,
    notes: &'a mut Vec<String>,
}

impl WpaDefaults<'_> {
    /// Sets `spec`'s limit factors and forbidden windows from `f`, or the WPA's defaults.
    fn apply(
        mut self,
        f: &mut Fields,
        spec: &mut HorizontalPodAutoscalerPlusSpec,
    ) -> Result<(), ConvertError> {
        spec.scale_up_limit_factor =
            Some(self.limit_factor(f, "scaleUpLimitFactor", DEFAULT_SCALE_UP_LIMIT_FACTOR)?);
        spec.scale_down_limit_factor =
            Some(self.limit_factor(f, "scaleDownLimitFactor", DEFAULT_SCALE_DOWN_LIMIT_FACTOR)?);
        spec.upscale_forbidden_window_seconds = Some(self.window(
            f,
            "upscaleForbiddenWindowSeconds",
            DEFAULT_UPSCALE_FORBIDDEN_WINDOW_SECONDS,
        )?);
        spec.downscale_forbidden_window_seconds = Some(self.window(
            f,
            "downscaleForbiddenWindowSeconds",
            DEFAULT_DOWNSCALE_FORBIDDEN_WINDOW_SECONDS,
        )?);
        Ok(())
    }

    fn limit_factor(
        &mut self,
        f: &mut Fields,
        key: &str,
        default: &str,
    ) -> Result<Quantity, ConvertError> {
        let path = f.at(key);
        let Some(v) = f.take(key) else {
            self.notes.push(format!(
                "{path} set to the WPA default {default} (the HPA+ default is no limit)"
            ));
            return Ok(Quantity(default.to_owned()));
        };
        let q = Quantity(quantity_text(&path, &v)?);
        let value = quantity_value(&q).map_err(|e| ConvertError::invalid(&path, e))?;
        if value > 100.0 {
            self.dropped.push(Dropped::new(
                &path,
                format!(
                    "{} % is above the HPA+ maximum of 100 % of the current replicas per scaling event: set to 100",
                    q.0
                ),
            ));
            return Ok(Quantity("100".to_owned()));
        }
        Ok(q)
    }

    fn window(&mut self, f: &mut Fields, key: &str, default: i32) -> Result<i32, ConvertError> {
        let path = f.at(key);
        match f.take_as::<i32>(key)? {
            Some(v) if v > 0 => Ok(v),
            given => {
                self.notes.push(format!(
                    "{path} set to the WPA default {default} ({}; the HPA+ default is 0)",
                    if given.is_some() {
                        "the WPA controller reads 0 as unset"
                    } else {
                        "unset"
                    }
                ));
                Ok(default)
            }
        }
    }
}
