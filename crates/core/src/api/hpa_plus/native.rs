//! Native mode: a plain `autoscaling/v2` `HorizontalPodAutoscaler` seen as an HPA+.
//!
//! The spec converts through its JSON form, which is what "field for field compatible" means:
//! any field upstream has, this spec has under the same name. The additions come from
//! annotations under `plimsoll.dev/` or, for teams migrating from the `HPAPlus` controller,
//! `platform.stke/` (the `plimsoll.dev/` value wins when both are set).

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::validate::quantity_value;
use super::{
    HorizontalPodAutoscalerPlus, HorizontalPodAutoscalerPlusSpec, MinReplicasTuning, TuningMode,
    UtilizationBase,
};

/// Annotation prefixes honoured in native mode, highest precedence first.
pub const ANNOTATION_PREFIXES: [&str; 2] = ["plimsoll.dev/", "platform.stke/"];

/// Why a native HPA could not be read as an HPA+.
#[derive(Debug, thiserror::Error)]
pub enum NativeConversionError {
    /// The HPA has no spec.
    #[error("the HorizontalPodAutoscaler has no spec")]
    MissingSpec,
    /// The spec did not map onto the HPA+ spec (should not happen for valid upstream objects).
    #[error("the HorizontalPodAutoscaler spec does not convert: {0}")]
    Spec(#[source] serde_json::Error),
    /// An annotation has a value that cannot be used.
    #[error("annotation {key}: {message}")]
    Annotation {
        /// The full annotation key.
        key: String,
        /// What is wrong with its value.
        message: String,
    },
}

impl HorizontalPodAutoscalerPlus {
    /// Reads a native `autoscaling/v2` HPA, with its `plimsoll.dev/*` and `platform.stke/*`
    /// annotations, as an HPA+ (metadata is kept; status is not carried over).
    pub fn from_native(hpa: &HorizontalPodAutoscaler) -> Result<Self, NativeConversionError> {
        let spec = hpa
            .spec
            .as_ref()
            .ok_or(NativeConversionError::MissingSpec)?;
        let json = serde_json::to_value(spec).map_err(NativeConversionError::Spec)?;
        let mut plus: HorizontalPodAutoscalerPlusSpec =
            serde_json::from_value(json).map_err(NativeConversionError::Spec)?;
        let annotations = hpa.metadata.annotations.clone().unwrap_or_default();
        let lookup = |name: &str| {
            ANNOTATION_PREFIXES.iter().find_map(|prefix| {
                let key = format!("{prefix}{name}");
                annotations.get(&key).map(|v| (key, v.trim().to_owned()))
            })
        };
        if let Some((key, v)) = lookup("tolerance") {
            quantity_value(&Quantity(v.clone()))
                .map_err(|message| NativeConversionError::Annotation { key, message })?;
            plus.tolerance = Some(Quantity(v));
        }
        if let Some((key, v)) = lookup("resync-period") {
            let secs =
                parse_period_seconds(&v).ok_or_else(|| NativeConversionError::Annotation {
                    key,
                    message: format!(
                        "{v:?} is not a period (seconds, or a duration like 30s or 1m)"
                    ),
                })?;
            plus.sync_period_seconds = Some(secs);
        }
        if let Some((key, v)) = lookup("autoscale-disabled") {
            plus.paused = parse_bool(&v).ok_or_else(|| NativeConversionError::Annotation {
                key,
                message: format!("{v:?} is not true or false"),
            })?;
        }
        if let Some((key, v)) = lookup("pause-during-rollout") {
            plus.pause_during_rollout =
                parse_bool(&v).ok_or_else(|| NativeConversionError::Annotation {
                    key,
                    message: format!("{v:?} is not true or false"),
                })?;
        }
        if let Some((key, v)) = lookup("utilization-base") {
            plus.utilization_base = Some(match v.to_ascii_lowercase().as_str() {
                "requests" | "request" => UtilizationBase::Requests,
                "limits" | "limit" => UtilizationBase::Limits,
                _ => {
                    return Err(NativeConversionError::Annotation {
                        key,
                        message: format!("{v:?} is not Requests or Limits"),
                    });
                }
            });
        }
        if let Some((key, v)) = lookup(TUNING_ANNOTATION_NAME) {
            plus.min_replicas_tuning = Some(tuning_from_annotation(key, &v)?);
        }
        Ok(HorizontalPodAutoscalerPlus {
            metadata: hpa.metadata.clone(),
            spec: plus,
            status: None,
        })
    }
}

/// The name, after a prefix of [`ANNOTATION_PREFIXES`], of the annotation that sets
/// `minReplicasTuning.mode` (`off`, `report`, `apply`) with the default lookback and floor.
pub const TUNING_ANNOTATION_NAME: &str = "min-replicas-tuning";

fn tuning_from_annotation(
    key: String,
    v: &str,
) -> Result<MinReplicasTuning, NativeConversionError> {
    let mode = TuningMode::parse(v).ok_or_else(|| NativeConversionError::Annotation {
        key,
        message: format!("{v:?} is not off, report or apply"),
    })?;
    Ok(MinReplicasTuning {
        mode,
        ..MinReplicasTuning::default()
    })
}

impl HorizontalPodAutoscalerPlus {
    /// The tuning settings in force: `spec.minReplicasTuning` when set, else the
    /// `plimsoll.dev/min-replicas-tuning` annotation (the way a native HPA, and an HPA+ that
    /// prefers annotations, turns it on), else `None` (off).
    pub fn min_replicas_tuning(&self) -> Result<Option<MinReplicasTuning>, NativeConversionError> {
        if let Some(t) = &self.spec.min_replicas_tuning {
            return Ok(Some(t.clone()));
        }
        let annotations = self.metadata.annotations.as_ref();
        let found = ANNOTATION_PREFIXES.iter().find_map(|prefix| {
            let key = format!("{prefix}{TUNING_ANNOTATION_NAME}");
            annotations
                .and_then(|a| a.get(&key))
                .map(|v| (key, v.trim().to_owned()))
        });
        found
            .map(|(key, v)| tuning_from_annotation(key, &v))
            .transpose()
    }
}

impl TryFrom<&HorizontalPodAutoscaler> for HorizontalPodAutoscalerPlus {
    type Error = NativeConversionError;

    fn try_from(hpa: &HorizontalPodAutoscaler) -> Result<Self, Self::Error> {
        Self::from_native(hpa)
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" => Some(true),
        "false" | "no" | "0" | "" => Some(false),
        _ => None,
    }
}

/// Whole seconds from `"30"`, `"30s"`, `"2m"`, `"1h"` or `"1m30s"` (Go duration subset).
fn parse_period_seconds(v: &str) -> Option<i32> {
    if let Ok(secs) = v.parse::<i32>() {
        return (secs > 0).then_some(secs);
    }
    let mut total: i64 = 0;
    let mut digits = String::new();
    for c in v.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let n: i64 = digits.parse().ok()?;
        digits.clear();
        total += n * match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            _ => return None,
        };
    }
    if !digits.is_empty() || total <= 0 {
        return None;
    }
    i32::try_from(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::autoscaling::v2::{
        CrossVersionObjectReference, HorizontalPodAutoscalerSpec,
    };

    fn native(annotations: &[(&str, &str)]) -> HorizontalPodAutoscaler {
        let mut hpa = HorizontalPodAutoscaler {
            spec: Some(HorizontalPodAutoscalerSpec {
                scale_target_ref: CrossVersionObjectReference {
                    api_version: Some("apps/v1".into()),
                    kind: "Deployment".into(),
                    name: "web".into(),
                },
                max_replicas: 10,
                ..HorizontalPodAutoscalerSpec::default()
            }),
            ..HorizontalPodAutoscaler::default()
        };
        hpa.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        hpa
    }

    #[test]
    fn pause_during_rollout_from_either_prefix() {
        let read = |annotations: &[(&str, &str)]| {
            HorizontalPodAutoscalerPlus::from_native(&native(annotations))
                .map(|p| p.spec.pause_during_rollout)
        };
        assert!(!read(&[]).unwrap());
        assert!(read(&[("plimsoll.dev/pause-during-rollout", "true")]).unwrap());
        assert!(read(&[("platform.stke/pause-during-rollout", "true")]).unwrap());
        // The plimsoll.dev value wins.
        assert!(
            !read(&[
                ("plimsoll.dev/pause-during-rollout", "false"),
                ("platform.stke/pause-during-rollout", "true"),
            ])
            .unwrap()
        );
        let err = read(&[("plimsoll.dev/pause-during-rollout", "sometimes")]).unwrap_err();
        assert!(
            err.to_string()
                .contains("plimsoll.dev/pause-during-rollout"),
            "{err}"
        );
    }

    #[test]
    fn periods() {
        assert_eq!(parse_period_seconds("30"), Some(30));
        assert_eq!(parse_period_seconds("30s"), Some(30));
        assert_eq!(parse_period_seconds("2m"), Some(120));
        assert_eq!(parse_period_seconds("1m30s"), Some(90));
        assert_eq!(parse_period_seconds("1h"), Some(3600));
        assert_eq!(parse_period_seconds("0"), None);
        assert_eq!(parse_period_seconds("10"), Some(10));
        assert_eq!(parse_period_seconds("soon"), None);
        assert_eq!(parse_period_seconds("5x"), None);
    }
}
