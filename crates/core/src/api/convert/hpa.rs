//! Upstream `HorizontalPodAutoscaler` → `HorizontalPodAutoscalerPlus`.
//!
//! `autoscaling/v2` and `v2beta2` have the same spec as the HPA+, so the spec converts as native
//! mode reads it ([`HorizontalPodAutoscalerPlus::from_native`]): the `plimsoll.dev/*` and
//! `platform.stke/*` annotations become fields and are then removed from the metadata (they
//! would say the same thing twice). `autoscaling/v1` has one metric,
//! `targetCPUUtilizationPercentage`, which becomes a CPU `Utilization` metric (upstream's own
//! v1 → v2 conversion; without it the default of 80 % applies, as upstream).

use serde_json::{Value, json};

use super::fields::{Dropped, Fields, UNKNOWN, drop_status, metadata};
use super::{Conversion, ConvertError, Converted};
use crate::api::hpa_plus::{ANNOTATION_PREFIXES, HorizontalPodAutoscalerPlus, NativeHpa};
use crate::horizontal::memory;

/// The native-mode annotation names [`HorizontalPodAutoscalerPlus::from_native`] turns into
/// fields (after a prefix of [`ANNOTATION_PREFIXES`]).
const FIELD_ANNOTATIONS: [&str; 5] = [
    "tolerance",
    "resync-period",
    "autoscale-disabled",
    "utilization-base",
    "pause-during-rollout",
];

/// Converts one HPA document (`autoscaling/v1`, `v2`, `v2beta2`).
pub fn convert(doc: &Value) -> Result<Conversion, ConvertError> {
    let api_version = doc
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut dropped = Vec::new();
    let mut notes = Vec::new();
    let spec = match api_version {
        "autoscaling/v2" | "autoscaling/v2beta2" => v2_spec(doc, &mut dropped)?,
        "autoscaling/v1" => v1_spec(doc, &mut dropped, &mut notes)?,
        other => {
            return Err(ConvertError::UnknownKind {
                api_version: other.to_owned(),
                kind: "HorizontalPodAutoscaler".to_owned(),
            });
        }
    };
    let meta = metadata(doc, drop_annotation, &mut dropped)?;
    // NativeHpa keeps behavior.syncPeriodSeconds (KEP-6003), which the typed HPA drops.
    let native = NativeHpa::from_value(json!({
        "metadata": serde_json::to_value(&meta).map_err(|e| ConvertError::invalid("metadata", e.to_string()))?,
        "spec": spec,
    }))
    .map_err(|e| ConvertError::invalid("spec", e.to_string()))?;
    let mut plus = HorizontalPodAutoscalerPlus::from_native_object(&native)
        .map_err(|e| ConvertError::invalid("metadata.annotations", e.to_string()))?;
    if let Some(annotations) = plus.metadata.annotations.as_mut() {
        annotations.retain(|k, _| {
            let field = ANNOTATION_PREFIXES
                .iter()
                .find_map(|p| k.strip_prefix(p))
                .filter(|rest| FIELD_ANNOTATIONS.contains(rest));
            if let Some(name) = field {
                notes.push(format!("annotation {k} became a spec field ({name})"));
            }
            field.is_none()
        });
        if annotations.is_empty() {
            plus.metadata.annotations = None;
        }
    }
    drop_status(doc, &mut dropped);
    let name = plus.metadata.name.clone().unwrap_or_default();
    Ok(Conversion {
        source: format!("HorizontalPodAutoscaler/{name}"),
        object: Converted::HpaPlus(Box::new(plus)),
        dropped,
        notes,
    })
}

fn drop_annotation(key: &str) -> Option<&'static str> {
    if key == memory::ANNOTATION {
        return Some(
            "the decision memory of native mode; an HPA+ keeps it in status.memory and starts a new one",
        );
    }
    key.starts_with("autoscaling.alpha.kubernetes.io/").then_some(
        "an autoscaling/v1 annotation (alpha metrics or conditions); write its metrics into spec.metrics",
    )
}

/// A v2 spec as it is: every field has the same name in the HPA+.
fn v2_spec(doc: &Value, dropped: &mut Vec<Dropped>) -> Result<Value, ConvertError> {
    let mut f = Fields::new("spec", doc.get("spec"))?;
    let mut spec = serde_json::Map::new();
    for key in [
        "scaleTargetRef",
        "minReplicas",
        "maxReplicas",
        "metrics",
        "behavior",
    ] {
        if let Some(v) = f.take(key) {
            spec.insert(key.to_owned(), v);
        }
    }
    f.finish(UNKNOWN, dropped);
    Ok(Value::Object(spec))
}

/// A v1 spec: `targetCPUUtilizationPercentage` becomes a CPU Utilization metric.
fn v1_spec(
    doc: &Value,
    dropped: &mut Vec<Dropped>,
    notes: &mut Vec<String>,
) -> Result<Value, ConvertError> {
    let mut f = Fields::new("spec", doc.get("spec"))?;
    let mut spec = serde_json::Map::new();
    for key in ["scaleTargetRef", "minReplicas", "maxReplicas"] {
        if let Some(v) = f.take(key) {
            spec.insert(key.to_owned(), v);
        }
    }
    if let Some(pct) = f.take("targetCPUUtilizationPercentage") {
        notes.push(format!(
            "spec.targetCPUUtilizationPercentage {pct} became metrics[0]: Resource cpu Utilization {pct}%"
        ));
        spec.insert(
            "metrics".to_owned(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": pct}}}]),
        );
    }
    f.finish(UNKNOWN, dropped);
    Ok(Value::Object(spec))
}
