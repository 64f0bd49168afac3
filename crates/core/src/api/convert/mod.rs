//! Converting the autoscalers Plimsoll replaces into Plimsoll objects, saying what was lost.
//!
//! [`convert`] takes one manifest (any JSON/YAML document) and, by its `apiVersion` and `kind`,
//! returns the Plimsoll object that does the same job and every field that could not be carried
//! over, each with its path and why ([`Dropped`]). Nothing is dropped silently: a field this module
//! does not know is reported too, so a newer upstream field never disappears unnoticed.
//!
//! * [`hpa`]: upstream `autoscaling/v2` (and `v2beta2`, `v1`) `HorizontalPodAutoscaler` →
//!   `HorizontalPodAutoscalerPlus`, through [`HorizontalPodAutoscalerPlus::from_native`] so
//!   the `plimsoll.dev/*` and `platform.stke/*` annotations become fields exactly as native
//!   mode reads them.
//! * [`wpa`]: DataDog `WatermarkPodAutoscaler` (`datadoghq.com/v1alpha1`) →
//!   `HorizontalPodAutoscalerPlus` (DESIGN.md's WPA column: every WPA field has a home).
//! * [`keda`]: KEDA `ScaledObject` (`keda.sh/v1alpha1`) → `HorizontalPodAutoscalerPlus`, plus
//!   a `CronHorizontalPodAutoscaler` for its cron triggers (only the CronHPA when every trigger
//!   is cron).
//! * [`aliyun`]: Aliyun `CronHorizontalPodAutoscaler`
//!   (`autoscaling.alibabacloud.com/v1beta1`) → Plimsoll's `CronHorizontalPodAutoscaler`.
//!
//! Invariants: a conversion never invents a value it was not given, except where the source
//! controller's fixed behaviour must be spelled out to keep it (a WPA has no stabilization
//! window, so the HPA+ gets `stabilizationWindowSeconds: 0`); each such addition is listed in
//! [`Conversion::notes`]. The output validates whenever the input was valid for its own controller.

pub mod aliyun;
mod fields;
pub mod hpa;
pub mod keda;
pub mod wpa;

#[cfg(test)]
mod tests;

use serde_json::Value;

use super::cron::CronHorizontalPodAutoscaler;
use super::hpa_plus::HorizontalPodAutoscalerPlus;

pub use fields::Dropped;

/// A converted object.
#[derive(Clone, Debug, PartialEq)]
pub enum Converted {
    /// From an HPA or a WPA.
    HpaPlus(Box<HorizontalPodAutoscalerPlus>),
    /// From an Aliyun CronHPA (or a KEDA ScaledObject with only cron triggers).
    Cron(Box<CronHorizontalPodAutoscaler>),
    /// Several objects that together do the source's job, in the order to apply them (a KEDA
    /// ScaledObject with cron and other triggers: the HPA+, then the CronHPA that targets it).
    Several(Vec<Converted>),
}

impl Converted {
    /// The objects as JSON, in order (what is applied or printed): one, or several for
    /// [`Converted::Several`].
    pub fn to_values(&self) -> Result<Vec<Value>, serde_json::Error> {
        match self {
            Self::HpaPlus(o) => Ok(vec![serde_json::to_value(o)?]),
            Self::Cron(o) => Ok(vec![serde_json::to_value(o)?]),
            Self::Several(all) => {
                let mut out = Vec::new();
                for c in all {
                    out.extend(c.to_values()?);
                }
                Ok(out)
            }
        }
    }

    /// The single objects, in order ([`Converted::Several`] flattened).
    pub fn parts(&self) -> Vec<&Converted> {
        match self {
            Self::Several(all) => all.iter().flat_map(Converted::parts).collect(),
            one => vec![one],
        }
    }
}

/// One conversion: the object, what was lost, and what was added to keep the behaviour.
#[derive(Clone, Debug, PartialEq)]
pub struct Conversion {
    /// `Kind/name` of the source object.
    pub source: String,
    /// The Plimsoll object.
    pub object: Converted,
    /// Fields that could not be carried over, with why.
    pub dropped: Vec<Dropped>,
    /// Values set or rewritten to keep the source controller's behaviour.
    pub notes: Vec<String>,
}

/// Why a document could not be converted at all.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The document is not one of the kinds this module converts.
    #[error(
        "{api_version} {kind} is not converted (known: autoscaling/v1, v2, v2beta2 HorizontalPodAutoscaler; datadoghq.com/v1alpha1 WatermarkPodAutoscaler; autoscaling.alibabacloud.com/v1beta1 CronHorizontalPodAutoscaler; keda.sh/v1alpha1 ScaledObject)"
    )]
    UnknownKind {
        /// The document's `apiVersion`.
        api_version: String,
        /// The document's `kind`.
        kind: String,
    },
    /// A field has a shape the conversion cannot read.
    #[error("{path}: {message}")]
    Invalid {
        /// Where.
        path: String,
        /// What is wrong.
        message: String,
    },
}

impl ConvertError {
    pub(crate) fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Converts one manifest, chosen by its `apiVersion` and `kind`.
pub fn convert(doc: &Value) -> Result<Conversion, ConvertError> {
    let text = |k: &str| doc.get(k).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    match (group, api_version, kind) {
        ("autoscaling", _, "HorizontalPodAutoscaler") => hpa::convert(doc),
        ("datadoghq.com", _, "WatermarkPodAutoscaler") => wpa::convert(doc),
        ("autoscaling.alibabacloud.com", _, "CronHorizontalPodAutoscaler") => aliyun::convert(doc),
        ("keda.sh", _, "ScaledObject") => keda::convert(doc),
        _ => Err(ConvertError::UnknownKind {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
        }),
    }
}
