//! Native mode: a plain `autoscaling/v2` `HorizontalPodAutoscaler` seen as an HPA+.
//!
//! The spec converts through its JSON form, which is what "field for field compatible" means:
//! any field upstream has, this spec has under the same name. The additions come from
//! annotations under `plimsoll.dev/` or, for teams migrating from the `HPAPlus` controller,
//! `platform.stke/` (the `plimsoll.dev/` value wins when both are set).

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::quantities::quantity_value;
use super::{
    ExternalMetricStatus, HorizontalPodAutoscalerPlus, HorizontalPodAutoscalerPlusSpec,
    LeadSeconds, MetricIdentifier, MetricSourceType, MetricSpec, MetricStatus, MinReplicasTuning,
    Predictive, PredictiveMode, PrometheusMetricSource, Season, TuningMode, UtilizationBase,
};
use crate::quoted::quoted;

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
        let lookup = |name: &str| prefixed(&annotations, name);
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
                        "{} is not a period (seconds, or a duration like 30s or 1m)",
                        quoted(&v)
                    ),
                })?;
            plus.sync_period_seconds = Some(secs);
        }
        if let Some((key, v)) = lookup("autoscale-disabled") {
            plus.paused = parse_bool(&v).ok_or_else(|| NativeConversionError::Annotation {
                key,
                message: format!("{} is not true or false", quoted(&v)),
            })?;
        }
        if let Some((key, v)) = lookup("pause-during-rollout") {
            plus.pause_during_rollout =
                parse_bool(&v).ok_or_else(|| NativeConversionError::Annotation {
                    key,
                    message: format!("{} is not true or false", quoted(&v)),
                })?;
        }
        if let Some((key, v)) = lookup("utilization-base") {
            plus.utilization_base = Some(match v.to_ascii_lowercase().as_str() {
                "requests" | "request" => UtilizationBase::Requests,
                "limits" | "limit" => UtilizationBase::Limits,
                _ => {
                    return Err(NativeConversionError::Annotation {
                        key,
                        message: format!("{} is not Requests or Limits", quoted(&v)),
                    });
                }
            });
        }
        plus.min_replicas_tuning = tuning_from_annotations(&annotations)?;
        plus.predictive = predictive_from_annotations(&annotations)?;
        plus.metrics = plus
            .metrics
            .into_iter()
            .map(|m| prometheus_from_annotation(m, &annotations))
            .collect();
        Ok(HorizontalPodAutoscalerPlus {
            metadata: hpa.metadata.clone(),
            spec: plus,
            status: None,
        })
    }
}

/// The name, after a prefix of [`ANNOTATION_PREFIXES`], of the annotation that sets
/// `minReplicasTuning.mode` (`off`, `report`, `apply`).
pub const TUNING_ANNOTATION_NAME: &str = "min-replicas-tuning";

/// The annotation name (after a prefix) of `minReplicasTuning.lookbackDays` (1–30).
pub const TUNING_LOOKBACK_ANNOTATION_NAME: &str = "min-replicas-tuning-lookback-days";

/// The annotation name (after a prefix) of `minReplicasTuning.floor` (>= 1).
pub const TUNING_FLOOR_ANNOTATION_NAME: &str = "min-replicas-tuning-floor";

/// The External metric name that stands for a Prometheus query in native mode (the convention
/// of kube-metrics-adapter): its selector's `query-name` label names the query, and the query
/// is the annotation [`PROMETHEUS_QUERY_ANNOTATION_PREFIX`]`<query-name>`.
pub const PROMETHEUS_QUERY_METRIC: &str = "prometheus-query";

/// Whether hpa-plus reads an autoscaler's annotation `key`: the settings and stored state under
/// [`ANNOTATION_PREFIXES`], and a native HPA's Prometheus queries
/// ([`PROMETHEUS_QUERY_ANNOTATION_PREFIX`]). What it caches of an autoscaler keeps these only.
pub fn is_read_annotation(key: &str) -> bool {
    ANNOTATION_PREFIXES
        .iter()
        .chain([&PROMETHEUS_QUERY_ANNOTATION_PREFIX])
        .any(|prefix| key.starts_with(prefix))
}

/// The selector label of a [`PROMETHEUS_QUERY_METRIC`] metric that names its query.
pub const PROMETHEUS_QUERY_NAME_LABEL: &str = "query-name";

/// The annotation prefix of a native HPA's Prometheus queries, followed by the `query-name`.
pub const PROMETHEUS_QUERY_ANNOTATION_PREFIX: &str =
    "metric-config.external.prometheus-query.prometheus/";

/// The annotation (after [`PROMETHEUS_QUERY_ANNOTATION_PREFIX`]) that sets the server of every
/// query of the object (kube-metrics-adapter's `prometheus-server`).
pub const PROMETHEUS_SERVER_ANNOTATION_NAME: &str = "prometheus-server";

/// The annotation `name` under the first prefix of [`ANNOTATION_PREFIXES`] that has it, as
/// `(key, trimmed value)`.
fn prefixed(annotations: &BTreeMap<String, String>, name: &str) -> Option<(String, String)> {
    ANNOTATION_PREFIXES.iter().find_map(|prefix| {
        let key = format!("{prefix}{name}");
        annotations.get(&key).map(|v| (key, v.trim().to_owned()))
    })
}

/// The whole number from `min` to `max` the annotation `name` gives (`None` when absent), or an
/// error naming the annotation.
fn whole_number(
    annotations: &BTreeMap<String, String>,
    name: &str,
    min: i32,
    max: i32,
) -> Result<Option<i32>, NativeConversionError> {
    prefixed(annotations, name)
        .map(|(key, v)| {
            v.parse::<i32>()
                .ok()
                .filter(|n| (min..=max).contains(n))
                .ok_or_else(|| NativeConversionError::Annotation {
                    key,
                    message: format!("{} is not a whole number from {min} to {max}", quoted(&v)),
                })
        })
        .transpose()
}

/// The tuning settings the annotations give: the mode, then lookback and floor; `None` without
/// a mode annotation (lookback and floor alone turn nothing on).
fn tuning_from_annotations(
    annotations: &BTreeMap<String, String>,
) -> Result<Option<MinReplicasTuning>, NativeConversionError> {
    let lookup = |name: &str| prefixed(annotations, name);
    let Some((key, v)) = lookup(TUNING_ANNOTATION_NAME) else {
        return Ok(None);
    };
    let mode = TuningMode::parse(&v).ok_or_else(|| NativeConversionError::Annotation {
        key,
        message: format!("{} is not off, report or apply", quoted(&v)),
    })?;
    Ok(Some(MinReplicasTuning {
        mode,
        lookback_days: whole_number(annotations, TUNING_LOOKBACK_ANNOTATION_NAME, 1, 30)?,
        floor: whole_number(annotations, TUNING_FLOOR_ANNOTATION_NAME, 1, i32::MAX)?,
    }))
}

/// The annotation name (after a prefix of [`ANNOTATION_PREFIXES`]) that sets
/// `predictive.mode` (`off`, `report`, `scale`).
pub const PREDICTIVE_ANNOTATION_NAME: &str = "predictive";

/// The annotation name (after a prefix) of `predictive.lookbackDays` (1–30; at least 7 with a
/// `168h` season).
pub const PREDICTIVE_LOOKBACK_ANNOTATION_NAME: &str = "predictive-lookback-days";

/// The annotation name (after a prefix) of `predictive.season` (`auto`, `24h` or `168h`).
pub const PREDICTIVE_SEASON_ANNOTATION_NAME: &str = "predictive-season";

/// The annotation name (after a prefix) of `predictive.leadSeconds` (`auto` or seconds >= 0).
pub const PREDICTIVE_LEAD_ANNOTATION_NAME: &str = "predictive-lead-seconds";

/// The annotation name (after a prefix) of `predictive.overloadWeight` (1–100).
pub const PREDICTIVE_OVERLOAD_WEIGHT_ANNOTATION_NAME: &str = "predictive-overload-weight";

/// The predictive settings the annotations give: the mode, then lookback, season and lead;
/// `None` without a mode annotation (the others alone turn nothing on). A weekly season with
/// fewer than 7 days of lookback is refused here as the spec's rule refuses it.
fn predictive_from_annotations(
    annotations: &BTreeMap<String, String>,
) -> Result<Option<Predictive>, NativeConversionError> {
    let lookup = |name: &str| prefixed(annotations, name);
    let Some((key, v)) = lookup(PREDICTIVE_ANNOTATION_NAME) else {
        return Ok(None);
    };
    let bad = |key: String, message: String| NativeConversionError::Annotation { key, message };
    let mode = PredictiveMode::parse(&v)
        .ok_or_else(|| bad(key, format!("{} is not off, report or scale", quoted(&v))))?;
    let lookback_days = whole_number(annotations, PREDICTIVE_LOOKBACK_ANNOTATION_NAME, 1, 30)?;
    let overload_weight = whole_number(
        annotations,
        PREDICTIVE_OVERLOAD_WEIGHT_ANNOTATION_NAME,
        1,
        100,
    )?;
    let season = match lookup(PREDICTIVE_SEASON_ANNOTATION_NAME) {
        None => Season::default(),
        Some((key, v)) => Season::parse(&v)
            .ok_or_else(|| bad(key, format!("{} is not auto, 24h or 168h", quoted(&v))))?,
    };
    let lead_seconds = match lookup(PREDICTIVE_LEAD_ANNOTATION_NAME) {
        None => LeadSeconds::default(),
        Some((key, v)) => LeadSeconds::parse(&v).ok_or_else(|| {
            bad(
                key,
                format!(
                    "{} is not auto or a whole number of seconds >= 0",
                    quoted(&v)
                ),
            )
        })?,
    };
    if season == Season::Week && lookback_days.is_some_and(|d| d < 7) {
        let key = lookup(PREDICTIVE_LOOKBACK_ANNOTATION_NAME)
            .map(|(k, _)| k)
            .unwrap_or_default();
        return Err(bad(
            key,
            "a 168h season needs at least 7 days of lookback".into(),
        ));
    }
    Ok(Some(Predictive {
        mode,
        lookback_days,
        season,
        lead_seconds,
        overload_weight,
    }))
}

/// The `query-name` of a native [`PROMETHEUS_QUERY_METRIC`] External metric.
fn query_name(m: &MetricSpec) -> Option<&str> {
    let e = m
        .external
        .as_ref()
        .filter(|_| m.type_ == MetricSourceType::External)?;
    if e.metric.name != PROMETHEUS_QUERY_METRIC {
        return None;
    }
    e.metric
        .selector
        .as_ref()?
        .match_labels
        .as_ref()?
        .get(PROMETHEUS_QUERY_NAME_LABEL)
        .map(String::as_str)
}

/// A native External `prometheus-query` metric whose query the annotations hold, as a
/// `Prometheus` metric named by its `query-name`; any other metric as it is (an External
/// `prometheus-query` without its annotation is left to a metrics adapter).
fn prometheus_from_annotation(m: MetricSpec, annotations: &BTreeMap<String, String>) -> MetricSpec {
    let Some(name) = query_name(&m) else {
        return m;
    };
    let Some(query) = annotations.get(&format!("{PROMETHEUS_QUERY_ANNOTATION_PREFIX}{name}"))
    else {
        return m;
    };
    let server = annotations
        .get(&format!(
            "{PROMETHEUS_QUERY_ANNOTATION_PREFIX}{PROMETHEUS_SERVER_ANNOTATION_NAME}"
        ))
        .map(|s| s.trim().to_owned());
    let name = name.to_owned();
    let (target, fallback) = m
        .external
        .map(|e| (e.target, e.fallback))
        .unwrap_or_default();
    MetricSpec {
        type_: MetricSourceType::Prometheus,
        prometheus: Some(PrometheusMetricSource {
            query: query.trim().to_owned(),
            name: Some(name),
            server_address: server,
            target,
            fallback,
        }),
        ..MetricSpec::default()
    }
}

/// A `Prometheus` metric status as the native API can hold it: the External
/// [`PROMETHEUS_QUERY_METRIC`] status with its `query-name`.
pub fn native_metric_status(s: &MetricStatus) -> MetricStatus {
    let Some(p) = s
        .prometheus
        .as_ref()
        .filter(|_| s.type_ == MetricSourceType::Prometheus)
    else {
        return s.clone();
    };
    MetricStatus {
        type_: MetricSourceType::External,
        external: Some(ExternalMetricStatus {
            metric: MetricIdentifier {
                name: PROMETHEUS_QUERY_METRIC.to_owned(),
                selector: Some(LabelSelector {
                    match_labels: Some(
                        [(PROMETHEUS_QUERY_NAME_LABEL.to_owned(), p.name.clone())].into(),
                    ),
                    match_expressions: None,
                }),
            },
            current: p.current.clone(),
            fallback: p.fallback.clone(),
        }),
        ..MetricStatus::default()
    }
}

impl HorizontalPodAutoscalerPlus {
    /// The tuning settings in force: `spec.minReplicasTuning` when set, else the
    /// `plimsoll.dev/min-replicas-tuning` annotation (the way a native HPA, and an HPA+ that
    /// prefers annotations, turns it on), else `None` (off).
    pub fn min_replicas_tuning(&self) -> Result<Option<MinReplicasTuning>, NativeConversionError> {
        if let Some(t) = &self.spec.min_replicas_tuning {
            return Ok(Some(t.clone()));
        }
        tuning_from_annotations(&self.metadata.annotations.clone().unwrap_or_default())
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
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(unit)?)?;
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
        // Past i64 or i32 is refused, not wrapped (a tenant writes this annotation).
        assert_eq!(parse_period_seconds("9223372036854775807h"), None);
        assert_eq!(
            parse_period_seconds("9223372036854775807s9223372036854775807s"),
            None
        );
        assert_eq!(parse_period_seconds("600000h"), None);
        assert_eq!(parse_period_seconds("5x"), None);
    }

    fn with_metrics(
        annotations: &[(&str, &str)],
        metrics: serde_json::Value,
    ) -> HorizontalPodAutoscaler {
        let mut hpa = native(annotations);
        if let Some(spec) = hpa.spec.as_mut() {
            spec.metrics = Some(serde_json::from_value(metrics).unwrap());
        }
        hpa
    }

    // The convention of kube-metrics-adapter's README: an External metric `prometheus-query`
    // whose `query-name` label names the annotation holding the query.
    #[test]
    fn a_prometheus_query_external_metric_with_its_annotation_is_a_prometheus_metric() {
        let hpa = with_metrics(
            &[
                (
                    "metric-config.external.prometheus-query.prometheus/processed-events-per-second",
                    "scalar(sum(rate(events{processed=\"true\"}[1m])))",
                ),
                (
                    "metric-config.external.prometheus-query.prometheus/prometheus-server",
                    "https://prom.monitoring:9090",
                ),
            ],
            serde_json::json!([
                {"type": "External", "external": {
                    "metric": {"name": "prometheus-query",
                               "selector": {"matchLabels": {"query-name": "processed-events-per-second"}}},
                    "target": {"type": "AverageValue", "averageValue": "10"}}},
                {"type": "External", "external": {
                    "metric": {"name": "prometheus-query",
                               "selector": {"matchLabels": {"query-name": "no-annotation"}}},
                    "target": {"type": "Value", "value": "1"}}},
                {"type": "External", "external": {
                    "metric": {"name": "queue_depth"},
                    "target": {"type": "Value", "value": "5"}}}
            ]),
        );
        let plus = HorizontalPodAutoscalerPlus::from_native(&hpa).unwrap();
        let m = &plus.spec.metrics;
        assert_eq!(m[0].type_, MetricSourceType::Prometheus);
        assert!(m[0].external.is_none());
        let p = m[0].prometheus.as_ref().unwrap();
        assert_eq!(p.query, "scalar(sum(rate(events{processed=\"true\"}[1m])))");
        assert_eq!(p.name.as_deref(), Some("processed-events-per-second"));
        assert_eq!(
            p.server_address.as_deref(),
            Some("https://prom.monitoring:9090")
        );
        assert_eq!(p.target.average_value, Some(Quantity("10".into())));
        // Without its annotation the metric stays External (a metrics adapter may serve it),
        // and other External metrics are untouched.
        assert_eq!(m[1].type_, MetricSourceType::External);
        assert_eq!(m[2].type_, MetricSourceType::External);
        assert!(plus.spec.validate().is_ok(), "{:?}", plus.spec.validate());
    }

    #[test]
    fn a_prometheus_status_is_written_back_as_the_native_external_metric() {
        let status = MetricStatus {
            type_: MetricSourceType::Prometheus,
            prometheus: Some(super::super::PrometheusMetricStatus {
                name: "rps".into(),
                query: "sum(rate(x[1m]))".into(),
                current: super::super::MetricValueStatus {
                    average_value: Some(Quantity("42".into())),
                    ..Default::default()
                },
                ..Default::default()
            }),
            ..MetricStatus::default()
        };
        let native = native_metric_status(&status);
        assert_eq!(native.type_, MetricSourceType::External);
        assert!(native.prometheus.is_none());
        let e = native.external.unwrap();
        assert_eq!(e.metric.name, "prometheus-query");
        assert_eq!(
            e.metric.selector.unwrap().match_labels.unwrap()["query-name"],
            "rps"
        );
        assert_eq!(e.current.average_value, Some(Quantity("42".into())));
        // Through JSON it is a valid autoscaling/v2 MetricStatus.
        let json = serde_json::to_value(native_metric_status(&status)).unwrap();
        let k8s: k8s_openapi::api::autoscaling::v2::MetricStatus =
            serde_json::from_value(json).unwrap();
        assert_eq!(k8s.type_, "External");
    }

    #[test]
    fn predictive_mode_lookback_season_and_lead_from_annotations() {
        let read = |annotations: &[(&str, &str)]| {
            HorizontalPodAutoscalerPlus::from_native(&native(annotations))
                .map(|p| p.spec.predictive)
        };
        assert_eq!(read(&[]).unwrap(), None);
        // The other settings alone turn nothing on.
        assert_eq!(
            read(&[("plimsoll.dev/predictive-season", "168h")]).unwrap(),
            None
        );
        let p = read(&[("plimsoll.dev/predictive", "report")])
            .unwrap()
            .unwrap();
        assert_eq!(
            p,
            Predictive {
                mode: PredictiveMode::Report,
                ..Predictive::default()
            }
        );
        let p = read(&[
            ("platform.stke/predictive", "Scale"),
            ("plimsoll.dev/predictive-lookback-days", "14"),
            ("platform.stke/predictive-season", "168h"),
            ("plimsoll.dev/predictive-lead-seconds", "900"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (p.mode, p.lookback_days, p.season, p.lead_seconds),
            (
                PredictiveMode::Scale,
                Some(14),
                Season::Week,
                LeadSeconds::Seconds(900)
            )
        );
        let p = read(&[
            ("plimsoll.dev/predictive", "scale"),
            ("plimsoll.dev/predictive-lead-seconds", "Auto"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(p.lead_seconds, LeadSeconds::Auto);
        assert_eq!((p.overload_weight, p.overload_weight()), (None, 1));
        let p = read(&[
            ("plimsoll.dev/predictive", "scale"),
            ("plimsoll.dev/predictive-overload-weight", "4"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(p.overload_weight, Some(4));
        // The plimsoll.dev value wins.
        let p = read(&[
            ("plimsoll.dev/predictive", "off"),
            ("platform.stke/predictive", "scale"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(p.mode, PredictiveMode::Off);
        for (key, bad) in [
            ("plimsoll.dev/predictive", "sometimes"),
            ("plimsoll.dev/predictive-lookback-days", "0"),
            ("plimsoll.dev/predictive-lookback-days", "a week"),
            ("platform.stke/predictive-season", "12h"),
            ("plimsoll.dev/predictive-lead-seconds", "-5"),
            ("plimsoll.dev/predictive-lead-seconds", "soon"),
            ("plimsoll.dev/predictive-overload-weight", "0"),
            ("plimsoll.dev/predictive-overload-weight", "101"),
        ] {
            let mut annotations = vec![(key, bad)];
            if key != "plimsoll.dev/predictive" {
                annotations.push(("plimsoll.dev/predictive", "scale"));
            }
            let err = read(&annotations).unwrap_err();
            assert!(err.to_string().contains(key), "{key}={bad}: {err}");
        }
        let err = read(&[
            ("plimsoll.dev/predictive", "scale"),
            ("plimsoll.dev/predictive-season", "168h"),
            ("plimsoll.dev/predictive-lookback-days", "3"),
        ])
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("plimsoll.dev/predictive-lookback-days"),
            "{err}"
        );
    }

    #[test]
    fn a_huge_annotation_value_is_quoted_short_in_its_error() {
        let huge = "9".repeat(100_000) + "x";
        for key in [
            "plimsoll.dev/predictive-lookback-days",
            "plimsoll.dev/predictive-overload-weight",
            "plimsoll.dev/tolerance",
            "plimsoll.dev/resync-period",
        ] {
            let mut annotations = vec![(key, huge.as_str())];
            if key.contains("predictive-") {
                annotations.push(("plimsoll.dev/predictive", "scale"));
            }
            let err = HorizontalPodAutoscalerPlus::from_native(&native(&annotations))
                .unwrap_err()
                .to_string();
            assert!(err.contains(key), "{err}");
            assert!(err.contains("(100001 bytes)"), "{err}");
            assert!(err.len() < 400, "{key}: {} bytes", err.len());
        }
    }

    #[test]
    fn tuning_mode_lookback_and_floor_from_annotations() {
        let read = |annotations: &[(&str, &str)]| {
            HorizontalPodAutoscalerPlus::from_native(&native(annotations))
                .map(|p| p.spec.min_replicas_tuning)
        };
        assert_eq!(read(&[]).unwrap(), None);
        // Lookback and floor alone turn nothing on.
        assert_eq!(
            read(&[("plimsoll.dev/min-replicas-tuning-floor", "2")]).unwrap(),
            None
        );
        let t = read(&[
            ("platform.stke/min-replicas-tuning", "Apply"),
            ("plimsoll.dev/min-replicas-tuning-lookback-days", "14"),
            ("plimsoll.dev/min-replicas-tuning-floor", "3"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (t.mode, t.lookback_days, t.floor),
            (TuningMode::Apply, Some(14), Some(3))
        );
        for (key, bad) in [
            ("plimsoll.dev/min-replicas-tuning-lookback-days", "31"),
            ("plimsoll.dev/min-replicas-tuning-lookback-days", "a week"),
            ("plimsoll.dev/min-replicas-tuning-floor", "0"),
        ] {
            let err =
                read(&[("plimsoll.dev/min-replicas-tuning", "report"), (key, bad)]).unwrap_err();
            assert!(err.to_string().contains(key), "{err}");
        }
    }
}
