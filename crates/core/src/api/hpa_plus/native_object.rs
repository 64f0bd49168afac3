//! A native `autoscaling/v2` HPA as read from the API server, with the upstream fields that
//! k8s-openapi does not model yet.
//!
//! k8s-openapi 0.29 has no `spec.behavior.syncPeriodSeconds` (KEP-6003, alpha targeted at
//! Kubernetes 1.38) and no `spec.podSelectionStrategy` (KEP-5325), so a typed read drops them. [`NativeHpa`] reads the object once as JSON,
//! keeps that field, and then reads the rest as the typed object: the service watches this type
//! and sees both. A value that is not a whole number in `i32` range reads as absent (the object
//! is a namespace user's; the controller bounds what is kept, see
//! [`crate::horizontal::config::MAX_SYNC_PERIOD_SECONDS`]).

use std::borrow::Cow;
use std::ops::Deref;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{
    HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerPlus, NativeConversionError,
    PodSelectionStrategy,
};

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
        Ok(Self {
            hpa: serde_json::from_value(value)?,
            behavior_sync_period_seconds,
            pod_selection_strategy,
        })
    }
}

impl From<HorizontalPodAutoscaler> for NativeHpa {
    fn from(hpa: HorizontalPodAutoscaler) -> Self {
        Self {
            hpa,
            behavior_sync_period_seconds: None,
            pod_selection_strategy: None,
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
    /// [`HorizontalPodAutoscalerPlus::from_native`], keeping `spec.behavior.syncPeriodSeconds`.
    pub fn from_native_object(native: &NativeHpa) -> Result<Self, NativeConversionError> {
        let mut plus = Self::from_native(&native.hpa)?;
        plus.spec.pod_selection_strategy = native.pod_selection_strategy;
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
