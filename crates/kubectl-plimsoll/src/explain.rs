//! `kubectl plimsoll explain KIND/NAME`: reads the object (and, for a VPA, its checkpoints) and
//! prints what `plimsoll_core::horizontal::explain` / `vertical::explain` make of it.

use jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ListParams};
use plimsoll_core::api::hpa_plus::{HorizontalPodAutoscalerPlus, NativeHpa};
use plimsoll_core::api::vpa::{VerticalPodAutoscaler, VerticalPodAutoscalerCheckpoint};
use plimsoll_core::horizontal::explain::{ExplainInput, explain as explain_horizontal};
use plimsoll_core::horizontal::{memory, predictive};
use plimsoll_core::vertical::estimator::EstimatorConfig;
use plimsoll_core::vertical::explain::explain as explain_vertical;

use crate::{Error, Output, Result};

/// What `explain` can explain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A `HorizontalPodAutoscalerPlus`.
    HpaPlus(String),
    /// A native `autoscaling/v2` `HorizontalPodAutoscaler` (native mode).
    Hpa(String),
    /// A `VerticalPodAutoscaler`.
    Vpa(String),
}

impl Target {
    /// Parses `KIND/NAME` with kubectl's names and short names for the kind.
    pub fn parse(s: &str) -> Result<Self> {
        let (kind, name) = s.split_once('/').ok_or_else(|| {
            Error::Usage(format!(
                "{s:?}: expected KIND/NAME, e.g. hpaplus/web or vpa/web"
            ))
        })?;
        if name.is_empty() {
            return Err(Error::Usage(format!("{s:?}: the name is empty")));
        }
        let name = name.to_owned();
        let kind = kind.to_ascii_lowercase();
        let kind = kind.split('.').next().unwrap_or_default();
        match kind {
            "hpaplus"
            | "hpap"
            | "horizontalpodautoscalerplus"
            | "horizontalpodautoscalerpluses" => Ok(Self::HpaPlus(name)),
            "hpa" | "horizontalpodautoscaler" | "horizontalpodautoscalers" => Ok(Self::Hpa(name)),
            "vpa" | "verticalpodautoscaler" | "verticalpodautoscalers" => Ok(Self::Vpa(name)),
            other => Err(Error::Usage(format!(
                "cannot explain {other:?}: use hpaplus/NAME, hpa/NAME or vpa/NAME"
            ))),
        }
    }
}

/// Settings of the controllers whose decisions are explained (their flags' defaults unless
/// the installation changed them).
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// hpa-plus `--downscale-stabilization`, seconds.
    pub downscale_stabilization_seconds: i64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            downscale_stabilization_seconds: 300,
        }
    }
}

/// Explains `target` in `namespace` at `now`.
pub async fn explain(
    client: &Client,
    namespace: &str,
    target: &Target,
    settings: Settings,
    output: Output,
    now: Timestamp,
) -> Result<String> {
    match target {
        Target::HpaPlus(name) => {
            let api: Api<HorizontalPodAutoscalerPlus> = Api::namespaced(client.clone(), namespace);
            let obj = api
                .get(name)
                .await
                .map_err(|e| Error::kube(format!("get hpaplus/{name}"), e))?;
            let status = obj.status.as_ref();
            let e = explain_horizontal(&ExplainInput {
                kind: "HorizontalPodAutoscalerPlus",
                name: &format!("{namespace}/{name}"),
                spec: &obj.spec,
                status,
                memory: status.and_then(|s| s.memory.as_ref()),
                predictive: status.and_then(|s| s.predictive.as_ref()),
                default_downscale_window_seconds: settings.downscale_stabilization_seconds,
                now,
            });
            output.render(&e, || e.to_text())
        }
        Target::Hpa(name) => {
            // NativeHpa keeps spec.behavior.syncPeriodSeconds (KEP-6003), which the typed HPA
            // drops.
            let api: Api<NativeHpa> = Api::namespaced(client.clone(), namespace);
            let native = api
                .get(name)
                .await
                .map_err(|e| Error::kube(format!("get hpa/{name}"), e))?;
            let plus = HorizontalPodAutoscalerPlus::from_native_object(&native)
                .map_err(|e| Error::Input(format!("hpa/{name}: {e}")))?;
            let hpa = &native.hpa;
            // The native status has the same JSON names as the HPA+ status's upstream subset.
            let status = hpa
                .status
                .as_ref()
                .map(serde_json::to_value)
                .transpose()
                .ok()
                .flatten()
                .and_then(|v| serde_json::from_value(v).ok());
            let annotations = hpa.metadata.annotations.clone().unwrap_or_default();
            let memory = memory::from_annotations(&annotations).ok().flatten();
            let predictive = predictive::status_from_annotations(&annotations)
                .ok()
                .flatten();
            let e = explain_horizontal(&ExplainInput {
                kind: "HorizontalPodAutoscaler",
                name: &format!("{namespace}/{name}"),
                spec: &plus.spec,
                status: status.as_ref(),
                memory: memory.as_ref(),
                predictive: predictive.as_ref(),
                default_downscale_window_seconds: settings.downscale_stabilization_seconds,
                now,
            });
            output.render(&e, || e.to_text())
        }
        Target::Vpa(name) => {
            let api: Api<VerticalPodAutoscaler> = Api::namespaced(client.clone(), namespace);
            let vpa = api
                .get(name)
                .await
                .map_err(|e| Error::kube(format!("get vpa/{name}"), e))?;
            let checkpoints: Api<VerticalPodAutoscalerCheckpoint> =
                Api::namespaced(client.clone(), namespace);
            let mut mine: Vec<_> = checkpoints
                .list(&ListParams::default())
                .await
                .map_err(|e| Error::kube("list verticalpodautoscalercheckpoints", e))?
                .items
                .into_iter()
                .filter(|c| c.spec.vpa_object_name.as_deref() == Some(name.as_str()))
                .collect();
            mine.sort_by(|a, b| a.spec.container_name.cmp(&b.spec.container_name));
            let e = explain_vertical(&vpa, &mine, &EstimatorConfig::default(), now);
            output.render(&e, || e.to_text())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_with_kubectl_names() {
        assert_eq!(
            Target::parse("hpaplus/web").ok(),
            Some(Target::HpaPlus("web".into()))
        );
        assert_eq!(
            Target::parse("horizontalpodautoscalerpluses.autoscaling.plimsoll.dev/web").ok(),
            Some(Target::HpaPlus("web".into()))
        );
        assert_eq!(
            Target::parse("HPA/web").ok(),
            Some(Target::Hpa("web".into()))
        );
        assert_eq!(Target::parse("vpa/db").ok(), Some(Target::Vpa("db".into())));
        assert!(Target::parse("deployment/web").is_err());
        assert!(Target::parse("web").is_err());
        assert!(Target::parse("vpa/").is_err());
    }
}
