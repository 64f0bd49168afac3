//! A native `autoscaling/v2` HPA as read from the API server, with the upstream fields that
//! k8s-openapi does not model yet.
//!
//! k8s-openapi 0.29 has no `spec.behavior.syncPeriodSeconds` (KEP-6003, alpha targeted at
//! Kubernetes 1.38), no `spec.podSelectionStrategy` (KEP-5325) and no
//! `spec.metrics[i].external.fallback` (KEP-5679's `{failureDuration, replicas}`), so a typed
//! read drops them. [`NativeHpa`] reads the object once as JSON, keeps those fields, and then
//! reads the rest as the typed object: the service watches this type and sees all of them. A
//! value that is not a whole number in `i32` range reads as absent (the object is a namespace
//! user's; the controller bounds what is kept, see
//! [`crate::horizontal::config::MAX_SYNC_PERIOD_SECONDS`]); a `podSelectionStrategy` that is not
//! one of its values, or a `fallback` that does not have the KEP's shape, reads as absent too,
//! and a `fallback` that has it is validated with the rest of the spec
//! ([`crate::horizontal::fallback::validate`]).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Deref;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{
    HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerPlus, MetricFallback,
    NativeConversionError, PodSelectionStrategy,
};
use crate::api::limits::MAX_METRICS;

/// A native HPA plus the upstream fields the typed object lacks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NativeHpa {
    /// The typed object.
    pub hpa: HorizontalPodAutoscaler,
    /// `spec.behavior.syncPeriodSeconds` (KEP-6003), when the object carries a whole number.
    pub behavior_sync_period_seconds: Option<i32>,
    /// `spec.podSelectionStrategy` (KEP-5325), when the object carries one of its values; any
    /// other value reads as absent (the default, `LabelSelector`).
    pub pod_selection_strategy: Option<PodSelectionStrategy>,
    /// `spec.metrics[i].external.fallback` (KEP-5679) by metric index `i`, when it has the
    /// KEP's shape.
    pub metric_fallbacks: BTreeMap<usize, MetricFallback>,
}

impl NativeHpa {
    /// Reads a native HPA from its JSON form.
    pub fn from_value(value: serde_json::Value) -> Result<Self, serde_json::Error> {
        let behavior_sync_period_seconds = value
            .pointer("/spec/behavior/syncPeriodSeconds")
            .and_then(serde_json::Value::as_i64)
            .and_then(|p| i32::try_from(p).ok());
        let pod_selection_strategy = value
            .pointer("/spec/podSelectionStrategy")
            .and_then(|v| PodSelectionStrategy::deserialize(v).ok());
        let metric_fallbacks = value
            .pointer("/spec/metrics")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .take(MAX_METRICS)
            .enumerate()
            .filter_map(|(i, m)| {
                let fb = m.pointer("/external/fallback")?;
                Some((i, MetricFallback::deserialize(fb).ok()?))
            })
            .collect();
        Ok(Self {
            hpa: serde_json::from_value(value)?,
            behavior_sync_period_seconds,
            pod_selection_strategy,
            metric_fallbacks,
        })
    }
}

impl From<HorizontalPodAutoscaler> for NativeHpa {
    fn from(hpa: HorizontalPodAutoscaler) -> Self {
        Self {
            hpa,
            behavior_sync_period_seconds: None,
            pod_selection_strategy: None,
            metric_fallbacks: BTreeMap::new(),
        }
    }
}

impl Deref for NativeHpa {
    type Target = HorizontalPodAutoscaler;
    fn deref(&self) -> &HorizontalPodAutoscaler {
        &self.hpa
    }
}

impl<'de> Deserialize<'de> for NativeHpa {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        Self::from_value(value).map_err(serde::de::Error::custom)
    }
}

impl Serialize for NativeHpa {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut value = serde_json::to_value(&self.hpa).map_err(serde::ser::Error::custom)?;
        if let (Some(p), Some(spec)) = (self.behavior_sync_period_seconds, value.get_mut("spec"))
            && let Some(map) = spec.as_object_mut()
            && let Some(b) = map
                .entry("behavior")
                .or_insert_with(|| serde_json::json!({}))
                .as_object_mut()
        {
            b.insert("syncPeriodSeconds".into(), p.into());
        }
        if let (Some(p), Some(spec)) = (self.pod_selection_strategy, value.get_mut("spec"))
            && let Some(map) = spec.as_object_mut()
        {
            let p = serde_json::to_value(p).map_err(serde::ser::Error::custom)?;
            map.insert("podSelectionStrategy".into(), p);
        }
        for (i, fb) in &self.metric_fallbacks {
            if let Some(e) = value
                .pointer_mut(&format!("/spec/metrics/{i}/external"))
                .and_then(serde_json::Value::as_object_mut)
            {
                e.insert(
                    "fallback".into(),
                    serde_json::to_value(fb).map_err(serde::ser::Error::custom)?,
                );
            }
        }
        value.serialize(s)
    }
}

impl kube::Resource for NativeHpa {
    type DynamicType = ();
    type Scope = <HorizontalPodAutoscaler as kube::Resource>::Scope;

    fn kind((): &()) -> Cow<'_, str> {
        <HorizontalPodAutoscaler as kube::Resource>::kind(&())
    }
    fn group((): &()) -> Cow<'_, str> {
        <HorizontalPodAutoscaler as kube::Resource>::group(&())
    }
    fn version((): &()) -> Cow<'_, str> {
        <HorizontalPodAutoscaler as kube::Resource>::version(&())
    }
    fn plural((): &()) -> Cow<'_, str> {
        <HorizontalPodAutoscaler as kube::Resource>::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.hpa.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.hpa.metadata
    }
}

impl HorizontalPodAutoscalerPlus {
    /// [`HorizontalPodAutoscalerPlus::from_native`], keeping `spec.behavior.syncPeriodSeconds`
    /// and each External metric's `fallback` (also when its annotation made it a `Prometheus`
    /// metric: the metrics keep their places).
    pub fn from_native_object(native: &NativeHpa) -> Result<Self, NativeConversionError> {
        let mut plus = Self::from_native(&native.hpa)?;
        plus.spec.pod_selection_strategy = native.pod_selection_strategy;
        for (i, fb) in &native.metric_fallbacks {
            if let Some(m) = plus.spec.metrics.get_mut(*i) {
                if let Some(e) = m.external.as_mut() {
                    e.fallback = Some(fb.clone());
                } else if let Some(p) = m.prometheus.as_mut() {
                    p.fallback = Some(fb.clone());
                }
            }
        }
        if let Some(p) = native.behavior_sync_period_seconds {
            plus.spec
                .behavior
                .get_or_insert_with(HorizontalPodAutoscalerBehavior::default)
                .sync_period_seconds = Some(p);
        }
        Ok(plus)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::horizontal::config::ControllerConfig;

    fn hpa(behavior: &serde_json::Value) -> serde_json::Value {
        json!({
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "maxReplicas": 10,
                "behavior": behavior,
            }
        })
    }

    #[test]
    fn the_upstream_field_survives_the_read_and_sets_the_period() {
        // KEP-6003 "Design Details": spec.behavior.syncPeriodSeconds on autoscaling/v2.
        let cfg = ControllerConfig {
            sync_period_seconds: 15,
            min_sync_period_seconds: 1,
            ..ControllerConfig::default()
        };
        let cases: &[(serde_json::Value, Option<i32>, i64)] = &[
            (json!({"syncPeriodSeconds": 2}), Some(2), 2),
            (json!({"syncPeriodSeconds": 600}), Some(600), 600),
            (json!({}), None, 15),
            // Hostile values: not a number, fractional, past i32, past the KEP's 3600.
            (json!({"syncPeriodSeconds": "2"}), None, 15),
            (json!({"syncPeriodSeconds": 2.5}), None, 15),
            (json!({"syncPeriodSeconds": 9_999_999_999_i64}), None, 15),
            (json!({"syncPeriodSeconds": 99_999}), Some(99_999), 3600),
            (json!({"syncPeriodSeconds": -3}), Some(-3), 15),
        ];
        for (behavior, kept, period) in cases {
            let native: NativeHpa = serde_json::from_value(hpa(behavior)).unwrap();
            assert_eq!(native.behavior_sync_period_seconds, *kept, "{behavior}");
            assert_eq!(native.metadata.name.as_deref(), Some("web"));
            let plus = HorizontalPodAutoscalerPlus::from_native_object(&native).unwrap();
            assert_eq!(cfg.sync_period_seconds(&plus.spec), *period, "{behavior}");
        }
    }

    #[test]
    fn pod_selection_strategy_is_read_and_written_back() {
        for (given, kept) in [
            (
                json!("OwnerReferences"),
                Some(PodSelectionStrategy::OwnerReferences),
            ),
            (
                json!("LabelSelector"),
                Some(PodSelectionStrategy::LabelSelector),
            ),
            (json!("Annotations"), None),
            (json!(7), None),
        ] {
            let mut v = hpa(&json!({}));
            v["spec"]["podSelectionStrategy"] = given.clone();
            let native: NativeHpa = serde_json::from_value(v).unwrap();
            assert_eq!(native.pod_selection_strategy, kept, "{given}");
            let plus = HorizontalPodAutoscalerPlus::from_native_object(&native).unwrap();
            assert_eq!(plus.spec.pod_selection_strategy, kept, "{given}");
            let again = serde_json::to_value(&native).unwrap();
            let want = kept.map(|k| serde_json::to_value(k).unwrap());
            assert_eq!(again.pointer("/spec/podSelectionStrategy"), want.as_ref());
        }
    }

    #[test]
    fn an_external_fallback_survives_the_read() {
        // KEP-5679 "Design Details": spec.metrics[].external.fallback on autoscaling/v2.
        let mut v = hpa(&json!({}));
        v["spec"]["metrics"] = json!([
            {"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 50}}},
            {"type": "External", "external": {"metric": {"name": "queue"},
                "target": {"type": "AverageValue", "averageValue": "30"},
                "fallback": {"failureDuration": "3m", "replicas": 10}}},
            // Not the KEP's shape: read as absent, the rest of the object still reads.
            {"type": "External", "external": {"metric": {"name": "bad"},
                "target": {"type": "Value", "value": "1"},
                "fallback": {"replicas": "many"}}},
        ]);
        let native: NativeHpa = serde_json::from_value(v).unwrap();
        assert_eq!(native.metric_fallbacks.len(), 1);
        let plus = HorizontalPodAutoscalerPlus::from_native_object(&native).unwrap();
        let fb = plus.spec.metrics[1]
            .external
            .as_ref()
            .unwrap()
            .fallback
            .clone();
        assert_eq!(
            fb,
            Some(MetricFallback {
                failure_duration: Some("3m".into()),
                replicas: 10
            })
        );
        assert!(
            plus.spec.metrics[2]
                .external
                .as_ref()
                .unwrap()
                .fallback
                .is_none()
        );
        let again = serde_json::to_value(&native).unwrap();
        assert_eq!(
            again.pointer("/spec/metrics/1/external/fallback/replicas"),
            Some(&json!(10))
        );
        // A hostile value that has the shape is refused by validation.
        let mut bad = native.clone();
        bad.metric_fallbacks.insert(
            1,
            MetricFallback {
                failure_duration: Some("0s".into()),
                replicas: 0,
            },
        );
        let plus = HorizontalPodAutoscalerPlus::from_native_object(&bad).unwrap();
        let errs = plus.spec.validate().unwrap_err().to_string();
        assert!(
            errs.contains("spec.metrics[1].external.fallback.replicas"),
            "{errs}"
        );
        assert!(errs.contains("fallback.failureDuration"), "{errs}");
    }

    #[test]
    fn it_writes_back_what_it_read() {
        let v = hpa(&json!({"syncPeriodSeconds": 7}));
        let native: NativeHpa = serde_json::from_value(v).unwrap();
        let again = serde_json::to_value(&native).unwrap();
        assert_eq!(
            again.pointer("/spec/behavior/syncPeriodSeconds"),
            Some(&json!(7))
        );
        assert_eq!(
            <NativeHpa as kube::Resource>::plural(&()),
            "horizontalpodautoscalers"
        );
    }
}
