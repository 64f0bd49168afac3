use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::CustomResourceExt;

use super::fixtures::q;
use super::*;
use crate::api::validation::FieldErrors;

const UPSTREAM: &str = include_str!("../../../tests/data/hpa-v2-every-metric.yaml");

fn errors(spec: &HorizontalPodAutoscalerPlusSpec) -> FieldErrors {
    spec.validate().expect_err("spec should be invalid")
}

fn assert_error(spec: &HorizontalPodAutoscalerPlusSpec, path: &str, message: &str) {
    let errs = errors(spec);
    assert!(
        errs.0
            .iter()
            .any(|e| e.path == path && e.message.contains(message)),
        "expected `{path}: {message}` in {errs}"
    );
}

fn cpu(pct: i32) -> MetricSpec {
    MetricSpec::resource("cpu", MetricTarget::utilization(pct))
}

#[test]
fn upstream_v2_manifest_becomes_hpa_plus_by_changing_api_version_and_kind() {
    // It is a valid upstream object first.
    let native: HorizontalPodAutoscaler = serde_saphyr::from_str(UPSTREAM).unwrap();
    assert_eq!(
        native
            .spec
            .as_ref()
            .unwrap()
            .metrics
            .as_ref()
            .unwrap()
            .len(),
        8
    );
    let plus_yaml = UPSTREAM
        .replace(
            "apiVersion: autoscaling/v2\n",
            "apiVersion: autoscaling.plimsoll.dev/v1alpha1\n",
        )
        .replace(
            "kind: HorizontalPodAutoscaler\n",
            "kind: HorizontalPodAutoscalerPlus\n",
        );
    let plus: HorizontalPodAutoscalerPlus = serde_saphyr::from_str(&plus_yaml).unwrap();
    plus.spec.validate().unwrap();
    assert_eq!(plus.spec.metrics.len(), 8);
    let types: Vec<_> = plus.spec.metrics.iter().map(|m| m.type_).collect();
    for t in [
        MetricSourceType::Resource,
        MetricSourceType::ContainerResource,
        MetricSourceType::Pods,
        MetricSourceType::Object,
        MetricSourceType::External,
    ] {
        assert!(types.contains(&t), "{t:?} missing");
    }
    let behavior = plus.spec.behavior.as_ref().unwrap();
    let down = behavior.scale_down.as_ref().unwrap();
    assert_eq!(down.select_policy, Some(ScalingPolicySelect::Min));
    assert_eq!(down.policies.len(), 2);
    assert_eq!(down.tolerance, Some(q("0.05")));
    // The spec re-serializes to exactly upstream's JSON (no field lost or renamed).
    let upstream_json = serde_json::to_value(native.spec.as_ref().unwrap()).unwrap();
    let plus_json = serde_json::to_value(&plus.spec).unwrap();
    assert_eq!(upstream_json, plus_json);
}

#[test]
fn native_conversion_reads_annotations() {
    let native: HorizontalPodAutoscaler = serde_saphyr::from_str(UPSTREAM).unwrap();
    let plus = HorizontalPodAutoscalerPlus::from_native(&native).unwrap();
    assert_eq!(plus.spec.tolerance, Some(q("0.05")));
    assert_eq!(plus.spec.sync_period_seconds, Some(30));
    assert_eq!(plus.spec.utilization_base, Some(UtilizationBase::Limits));
    assert!(!plus.spec.paused);
    assert_eq!(plus.metadata.name.as_deref(), Some("web"));
    plus.spec.validate().unwrap();
}

#[test]
fn native_conversion_honours_hpaplus_names_and_plimsoll_wins() {
    let mut native: HorizontalPodAutoscaler = serde_saphyr::from_str(UPSTREAM).unwrap();
    let ann = native
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    ann.insert("platform.stke/autoscale-disabled".into(), "true".into());
    ann.insert("platform.stke/tolerance".into(), "0.2".into());
    let plus = HorizontalPodAutoscalerPlus::from_native(&native).unwrap();
    assert!(plus.spec.paused);
    assert_eq!(plus.spec.tolerance, Some(q("0.05")));
    ann_bad(&native, "plimsoll.dev/resync-period", "soon");
    ann_bad(&native, "plimsoll.dev/autoscale-disabled", "maybe");
    ann_bad(&native, "plimsoll.dev/utilization-base", "Usage");
    ann_bad(&native, "plimsoll.dev/tolerance", "a lot");
}

fn ann_bad(native: &HorizontalPodAutoscaler, key: &str, value: &str) {
    let mut native = native.clone();
    native
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(key.into(), value.into());
    let err = HorizontalPodAutoscalerPlus::from_native(&native).unwrap_err();
    assert!(err.to_string().contains(key), "{err}");
}

#[test]
fn minimal_spec_is_valid() {
    HorizontalPodAutoscalerPlusSpec::test()
        .metric(cpu(50))
        .validate()
        .unwrap();
}

/// Names that are one segment of a URL are refused as upstream refuses them
/// (`IsValidPathSegmentName`): the scale target's, an object metric's object, and the metric
/// names the metrics APIs are asked by. A Resource metric's name is not in any URL.
#[test]
fn names_in_a_url_must_be_one_path_segment() {
    let mut spec = HorizontalPodAutoscalerPlusSpec::test()
        .metric(MetricSpec::external("..", MetricTarget::value("1")))
        .metric(MetricSpec::pods("a/b%c", MetricTarget::average("1")))
        .metric(MetricSpec::object(".", "..", "m", MetricTarget::value("1")));
    spec.scale_target_ref.kind = "Deployment/status".into();
    spec.scale_target_ref.name = "web%2F..".into();
    let errs = errors(&spec);
    let got: Vec<String> = errs.0.iter().map(ToString::to_string).collect();
    assert_eq!(
        got,
        [
            "spec.scaleTargetRef.kind: may not contain '/'",
            "spec.scaleTargetRef.name: may not contain '%'",
            "spec.metrics[0].external.metric.name: may not be '..'",
            "spec.metrics[1].pods.metric.name: may not contain '/'",
            "spec.metrics[1].pods.metric.name: may not contain '%'",
            "spec.metrics[2].object.describedObject.kind: may not be '.'",
            "spec.metrics[2].object.describedObject.name: may not be '..'",
        ]
    );
    // Dots inside a name, and a Resource metric's name, are fine.
    let ok = HorizontalPodAutoscalerPlusSpec::test()
        .metric(cpu(50))
        .metric(MetricSpec::external("...", MetricTarget::value("1")))
        .metric(MetricSpec::external(
            "queue.depth",
            MetricTarget::value("1"),
        ));
    ok.validate().unwrap();
}

#[test]
fn min_replicas_above_max() {
    let spec = HorizontalPodAutoscalerPlusSpec::test().min(5).max(3);
    assert_error(&spec, "spec.maxReplicas", "must be >= minReplicas");
}

#[test]
fn min_replicas_zero_needs_object_or_external_metric() {
    let spec = HorizontalPodAutoscalerPlusSpec::test()
        .min(0)
        .metric(cpu(50));
    assert_error(&spec, "spec.minReplicas", "Object, External or Prometheus");
    let ok = HorizontalPodAutoscalerPlusSpec::test()
        .min(0)
        .metric(MetricSpec::external("queue", MetricTarget::average("30")));
    ok.validate().unwrap();
    let ok = HorizontalPodAutoscalerPlusSpec::test()
        .min(0)
        .metric(MetricSpec::prometheus(
            "q",
            "sum(queue)",
            MetricTarget::average("30"),
        ));
    ok.validate().unwrap();
}

#[test]
fn a_prometheus_metric_needs_a_query_a_url_and_an_external_kind_of_target() {
    let mut m = MetricSpec::prometheus("q", "", MetricTarget::utilization(50));
    if let Some(p) = m.prometheus.as_mut() {
        p.server_address = Some("prom:9090".into());
    }
    let spec = HorizontalPodAutoscalerPlusSpec::test().metric(m);
    assert_error(&spec, "spec.metrics[0].prometheus.query", "is required");
    assert_error(&spec, "spec.metrics[0].prometheus.serverAddress", "http");
    assert_error(
        &spec,
        "spec.metrics[0].prometheus.target.type",
        "must be one of",
    );
    let mut m = MetricSpec::prometheus("q", "up", MetricTarget::value("1"));
    m.external = Some(ExternalMetricSource::default());
    let spec = HorizontalPodAutoscalerPlusSpec::test().metric(m);
    assert!(errors(&spec).has_path("spec.metrics[0].external"));
}

#[test]
fn metric_member_must_match_type() {
    let mut m = cpu(50);
    m.type_ = MetricSourceType::Pods;
    let spec = HorizontalPodAutoscalerPlusSpec::test().metric(m);
    let errs = errors(&spec);
    assert!(errs.has_path("spec.metrics[0].pods"), "{errs}");
    assert!(errs.has_path("spec.metrics[0].resource"), "{errs}");
}

#[test]
fn utilization_only_for_resources() {
    let spec = HorizontalPodAutoscalerPlusSpec::test()
        .metric(cpu(50))
        .metric(MetricSpec::external("q", MetricTarget::utilization(50)));
    assert_error(
        &spec,
        "spec.metrics[1].external.target.type",
        "must be one of",
    );
}

#[test]
fn target_values_must_be_positive_and_present() {
    let mut t = MetricTarget::average("0");
    let spec = HorizontalPodAutoscalerPlusSpec::test().metric(MetricSpec::pods("p", t.clone()));
    assert_error(
        &spec,
        "spec.metrics[0].pods.target.averageValue",
        "must be positive",
    );
    t.average_value = None;
    let spec = HorizontalPodAutoscalerPlusSpec::test().metric(MetricSpec::pods("p", t));
    assert_error(
        &spec,
        "spec.metrics[0].pods.target.averageValue",
        "is required",
    );
    let spec = HorizontalPodAutoscalerPlusSpec::test().metric(cpu(0));
    assert_error(
        &spec,
        "spec.metrics[0].resource.target.averageUtilization",
        ">= 1",
    );
}

#[test]
fn invalid_quantity_is_reported_with_its_path() {
    let spec = HorizontalPodAutoscalerPlusSpec::test()
        .metric(MetricSpec::external("q", MetricTarget::value("lots")));
    assert_error(&spec, "spec.metrics[0].external.target.value", "lots");
}

#[test]
fn behavior_ranges() {
    let spec = HorizontalPodAutoscalerPlusSpec::test()
        .metric(cpu(50))
        .scale_up(HpaScalingRules::window(3601).pods(0, 15))
        .scale_down(HpaScalingRules::window(-1).percent(10, 1801));
    let errs = errors(&spec);
    for path in [
        "spec.behavior.scaleUp.stabilizationWindowSeconds",
        "spec.behavior.scaleUp.policies[0].value",
        "spec.behavior.scaleDown.stabilizationWindowSeconds",
        "spec.behavior.scaleDown.policies[0].periodSeconds",
    ] {
        assert!(errs.has_path(path), "{path} missing from {errs}");
    }
}

#[test]
fn behavior_tolerance_not_negative() {
    let mut rules = HpaScalingRules::window(0);
    rules.tolerance = Some(q("-0.1"));
    let spec = HorizontalPodAutoscalerPlusSpec::test()
        .metric(cpu(50))
        .scale_down(rules);
    assert_error(&spec, "spec.behavior.scaleDown.tolerance", ">= 0");
}

// One test per row of DESIGN.md's addition table.

#[test]
fn addition_tolerance_in_unit_interval() {
    let spec = HorizontalPodAutoscalerPlusSpec::test()
        .metric(cpu(50))
        .tolerance("1.5");
    assert_error(&spec, "spec.tolerance", "must be in [0, 1)");
    let spec = HorizontalPodAutoscalerPlusSpec::test()
        .metric(cpu(50))
        .tolerance("-10m");
    assert_error(&spec, "spec.tolerance", "must be in");
}

#[test]
fn behavior_sync_period_bounds() {
    // KEP-6003 "Design Details": greater than 0 and at most 3600.
    for (p, ok) in [
        (0, false),
        (1, true),
        (3600, true),
        (3601, false),
        (-1, false),
    ] {
        let mut spec = HorizontalPodAutoscalerPlusSpec::test().metric(cpu(50));
        spec.behavior = Some(crate::api::hpa_plus::HorizontalPodAutoscalerBehavior {
            sync_period_seconds: Some(p),
            ..Default::default()
        });
        if ok {
            assert!(spec.validate().is_ok(), "{p}");
        } else {
            assert_error(
                &spec,
                "spec.behavior.syncPeriodSeconds",
                "between 1 and 3600",
            );
        }
    }
}

#[test]
fn addition_sync_period_positive() {
    let mut spec = HorizontalPodAutoscalerPlusSpec::test().metric(cpu(50));
    spec.sync_period_seconds = Some(0);
    assert_error(&spec, "spec.syncPeriodSeconds", ">= 1");
}

#[test]
fn addition_utilization_base_is_an_enum() {
    let err = serde_json::from_value::<HorizontalPodAutoscalerPlusSpec>(serde_json::json!({
        "scaleTargetRef": {"kind": "Deployment", "name": "web"},
        "maxReplicas": 3,
        "utilizationBase": "Usage"
    }))
    .unwrap_err();
    assert!(err.to_string().contains("Usage"), "{err}");
    let ok: HorizontalPodAutoscalerPlusSpec = serde_json::from_value(serde_json::json!({
        "scaleTargetRef": {"kind": "Deployment", "name": "web"},
        "maxReplicas": 3,
        "utilizationBase": "Limits"
    }))
    .unwrap();
    assert_eq!(ok.utilization_base, Some(UtilizationBase::Limits));
}

#[test]
fn addition_limit_factors_are_percentages() {
    let spec = HorizontalPodAutoscalerPlusSpec::test()
        .metric(cpu(50))
        .up_limit("150")
        .down_limit("-1");
    let errs = errors(&spec);
    assert!(errs.has_path("spec.scaleUpLimitFactor"), "{errs}");
    assert!(errs.has_path("spec.scaleDownLimitFactor"), "{errs}");
    HorizontalPodAutoscalerPlusSpec::test()
        .metric(cpu(50))
        .up_limit("0")
        .down_limit("100")
        .validate()
        .unwrap();
}

#[test]
fn addition_forbidden_windows_not_negative() {
    let mut spec = HorizontalPodAutoscalerPlusSpec::test().metric(cpu(50));
    spec.upscale_forbidden_window_seconds = Some(-1);
    spec.downscale_forbidden_window_seconds = Some(-5);
    let errs = errors(&spec);
    assert!(
        errs.has_path("spec.upscaleForbiddenWindowSeconds"),
        "{errs}"
    );
    assert!(
        errs.has_path("spec.downscaleForbiddenWindowSeconds"),
        "{errs}"
    );
}

#[test]
fn addition_watermark_delays_not_negative() {
    let mut spec = HorizontalPodAutoscalerPlusSpec::test().metric(cpu(50));
    spec.upscale_delay_above_watermark_seconds = Some(-1);
    spec.downscale_delay_below_watermark_seconds = Some(-1);
    let errs = errors(&spec);
    assert!(
        errs.has_path("spec.upscaleDelayAboveWatermarkSeconds"),
        "{errs}"
    );
    assert!(
        errs.has_path("spec.downscaleDelayBelowWatermarkSeconds"),
        "{errs}"
    );
}

#[test]
fn addition_watermark_high_below_low() {
    let spec = HorizontalPodAutoscalerPlusSpec::test()
        .metric(cpu(50))
        .metric(MetricSpec::external(
            "q",
            MetricTarget::watermarks("100", "50"),
        ));
    let errs = errors(&spec);
    assert_eq!(
        errs.to_string(),
        "spec.metrics[1].external.target.highWatermark: must be >= lowWatermark"
    );
}

#[test]
fn addition_watermark_requires_both_bounds() {
    let mut t = MetricTarget::watermarks("1", "2");
    t.low_watermark = None;
    let spec = HorizontalPodAutoscalerPlusSpec::test().metric(MetricSpec::external("q", t));
    assert_error(
        &spec,
        "spec.metrics[0].external.target.lowWatermark",
        "is required",
    );
}

#[test]
fn addition_algorithm_is_an_enum() {
    let err = serde_json::from_value::<HorizontalPodAutoscalerPlusSpec>(serde_json::json!({
        "scaleTargetRef": {"kind": "Deployment", "name": "web"},
        "maxReplicas": 3,
        "algorithm": "median"
    }))
    .unwrap_err();
    assert!(err.to_string().contains("median"), "{err}");
    let spec = HorizontalPodAutoscalerPlusSpec::test().algorithm(Algorithm::Average);
    assert_eq!(
        serde_json::to_value(&spec).unwrap()["algorithm"],
        serde_json::json!("average")
    );
}

#[test]
fn addition_min_available_is_a_percentage() {
    let mut spec = HorizontalPodAutoscalerPlusSpec::test().metric(cpu(50));
    spec.min_available_replica_percentage = Some(101);
    assert_error(
        &spec,
        "spec.minAvailableReplicaPercentage",
        "between 0 and 100",
    );
}

#[test]
fn addition_readiness_delay_not_negative() {
    let mut spec = HorizontalPodAutoscalerPlusSpec::test().metric(cpu(50));
    spec.readiness_delay_seconds = Some(-30);
    assert_error(&spec, "spec.readinessDelaySeconds", ">= 0");
}

#[test]
fn addition_modulo_at_least_one() {
    let mut spec = HorizontalPodAutoscalerPlusSpec::test().metric(cpu(50));
    spec.replica_scaling_absolute_modulo = Some(0);
    assert_error(&spec, "spec.replicaScalingAbsoluteModulo", ">= 1");
}

#[test]
fn addition_converge_needs_a_watermark_metric() {
    let mut spec = HorizontalPodAutoscalerPlusSpec::test().metric(cpu(50));
    spec.converge_towards_watermark = Some(ConvergeTowardsWatermark::HighWatermark);
    assert_error(&spec, "spec.convergeTowardsWatermark", "Watermark target");
    // WatermarkPodAutoscaler spells the values in lower case; both are accepted.
    let v: ConvergeTowardsWatermark = serde_json::from_str("\"highwatermark\"").unwrap();
    assert_eq!(v, ConvergeTowardsWatermark::HighWatermark);
}

#[test]
fn addition_flags_default_off_and_are_not_serialized_when_off() {
    let spec = HorizontalPodAutoscalerPlusSpec::test();
    let json = serde_json::to_value(&spec).unwrap();
    for key in ["dryRun", "paused", "pauseDuringRollout", "tolerateZero"] {
        assert!(json.get(key).is_none(), "{key} serialized");
    }
    let on: HorizontalPodAutoscalerPlusSpec = serde_json::from_value(serde_json::json!({
        "scaleTargetRef": {"kind": "Deployment", "name": "web"},
        "maxReplicas": 3,
        "dryRun": true, "paused": true, "pauseDuringRollout": true, "tolerateZero": true
    }))
    .unwrap();
    assert!(on.dry_run && on.paused && on.pause_during_rollout && on.tolerate_zero);
}

#[test]
fn every_problem_is_reported_at_once() {
    let mut spec = HorizontalPodAutoscalerPlusSpec::test()
        .min(4)
        .max(2)
        .tolerance("2")
        .metric(MetricSpec::external(
            "q",
            MetricTarget::watermarks("9", "1"),
        ));
    spec.replica_scaling_absolute_modulo = Some(0);
    assert_eq!(errors(&spec).0.len(), 4);
}

#[test]
fn crd_has_names_columns_status_and_cel_rule() {
    let crd = HorizontalPodAutoscalerPlus::crd();
    assert_eq!(crd.spec.group, "autoscaling.plimsoll.dev");
    let names = &crd.spec.names;
    assert_eq!(names.kind, "HorizontalPodAutoscalerPlus");
    assert_eq!(
        names.short_names.as_deref(),
        Some(&["hpaplus".to_owned(), "hpap".to_owned()][..])
    );
    let version = &crd.spec.versions[0];
    assert_eq!(version.name, "v1alpha1");
    assert!(version.subresources.as_ref().unwrap().status.is_some());
    let columns: Vec<_> = version
        .additional_printer_columns
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.name.to_uppercase())
        .collect();
    assert_eq!(
        columns,
        [
            "REFERENCE",
            "TARGETS",
            "MINPODS",
            "MAXPODS",
            "REPLICAS",
            "AGE"
        ]
    );
    let json = serde_json::to_string(&crd).unwrap();
    assert!(json.contains("minReplicas <= self.maxReplicas"));
    assert!(json.contains("\"x-kubernetes-int-or-string\":true"));
}

#[test]
fn crd_schema_is_structural() {
    let crd = HorizontalPodAutoscalerPlus::crd();
    let schema = serde_json::to_value(
        crd.spec.versions[0]
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref()
            .unwrap(),
    )
    .unwrap();
    check_structural(&schema, "");
}

/// Every node has a `type` (or is int-or-string / preserve-unknown), and no `$ref`, `anyOf`
/// or `oneOf` carries types of its own.
fn check_structural(node: &serde_json::Value, path: &str) {
    let obj = node.as_object().unwrap();
    assert!(!obj.contains_key("$ref"), "{path}: $ref");
    let special = obj.contains_key("x-kubernetes-int-or-string")
        || obj.contains_key("x-kubernetes-preserve-unknown-fields");
    assert!(
        special || obj.contains_key("type"),
        "{path}: no type in {node}"
    );
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(branches) = obj.get(key) {
            for b in branches.as_array().unwrap() {
                assert!(b.get("type").is_none(), "{path}.{key}: typed branch");
            }
        }
    }
    if let Some(props) = obj.get("properties").and_then(|p| p.as_object()) {
        for (k, v) in props {
            check_structural(v, &format!("{path}.{k}"));
        }
    }
    if let Some(items) = obj.get("items") {
        check_structural(items, &format!("{path}[]"));
    }
    if let Some(ap) = obj.get("additionalProperties").filter(|v| v.is_object()) {
        check_structural(ap, &format!("{path}{{}}"));
    }
}

#[test]
fn object_metric_with_described_object_and_disabled_scale_down() {
    let spec = HorizontalPodAutoscalerPlusSpec::test()
        .metric(MetricSpec::object(
            "Ingress",
            "",
            "rps",
            MetricTarget::value("2k"),
        ))
        .scale_down(HpaScalingRules::window(0).select(ScalingPolicySelect::Disabled));
    assert_error(
        &spec,
        "spec.metrics[0].object.describedObject.name",
        "is required",
    );
}

#[test]
fn tuning_settings_are_range_checked() {
    let mut spec = HorizontalPodAutoscalerPlusSpec::test().metric(cpu(50));
    spec.min_replicas_tuning = Some(MinReplicasTuning {
        mode: TuningMode::Apply,
        lookback_days: Some(31),
        floor: Some(0),
    });
    assert_error(
        &spec,
        "spec.minReplicasTuning.lookbackDays",
        "between 1 and 30",
    );
    assert_error(&spec, "spec.minReplicasTuning.floor", ">= 1");
    spec.min_replicas_tuning = Some(MinReplicasTuning {
        mode: TuningMode::Apply,
        lookback_days: Some(7),
        floor: Some(spec.max_replicas + 1),
    });
    assert_error(&spec, "spec.minReplicasTuning.floor", "<= maxReplicas");
    spec.min_replicas_tuning = Some(MinReplicasTuning {
        mode: TuningMode::Report,
        lookback_days: None,
        floor: Some(spec.max_replicas),
    });
    assert!(spec.validate().is_ok());
    let t = spec.min_replicas_tuning.as_ref().unwrap();
    assert_eq!((t.lookback_days(), t.floor()), (7, spec.max_replicas));
}

#[test]
fn tuning_crd_bounds_floor_and_lookback() {
    let crd = serde_json::to_value(HorizontalPodAutoscalerPlus::crd()).unwrap();
    let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let tuning = &spec["properties"]["minReplicasTuning"]["properties"];
    assert_eq!(tuning["floor"]["minimum"], 1.0);
    assert_eq!(tuning["lookbackDays"]["minimum"], 1.0);
    assert_eq!(tuning["lookbackDays"]["maximum"], 30.0);
    let rules = spec["x-kubernetes-validations"].to_string();
    assert!(
        rules.contains("self.minReplicasTuning.floor <= self.maxReplicas"),
        "{rules}"
    );
}

#[test]
fn tuning_mode_comes_from_the_spec_or_the_annotation() {
    let mut native: HorizontalPodAutoscaler = serde_saphyr::from_str(
        "metadata: {name: web, annotations: {plimsoll.dev/min-replicas-tuning: Report}}
spec: {scaleTargetRef: {kind: Deployment, name: web}, maxReplicas: 10}",
    )
    .unwrap();
    let plus = HorizontalPodAutoscalerPlus::from_native(&native).unwrap();
    let t = plus.spec.min_replicas_tuning.clone().unwrap();
    assert_eq!(
        (t.mode, t.lookback_days(), t.floor()),
        (TuningMode::Report, 7, 1)
    );
    // An HPA+ reads the annotation only when its spec says nothing.
    let mut plus_annotated = plus.clone();
    plus_annotated.spec.min_replicas_tuning = None;
    assert_eq!(
        plus_annotated.min_replicas_tuning().unwrap().unwrap().mode,
        TuningMode::Report
    );
    plus_annotated.spec.min_replicas_tuning = Some(MinReplicasTuning {
        mode: TuningMode::Apply,
        ..MinReplicasTuning::default()
    });
    assert_eq!(
        plus_annotated.min_replicas_tuning().unwrap().unwrap().mode,
        TuningMode::Apply
    );
    native.metadata.annotations = Some(
        [(
            "platform.stke/min-replicas-tuning".to_owned(),
            "sometimes".to_owned(),
        )]
        .into(),
    );
    let err = HorizontalPodAutoscalerPlus::from_native(&native).unwrap_err();
    assert!(
        err.to_string().contains(
            "platform.stke/min-replicas-tuning: \"sometimes\" is not off, report or apply"
        ),
        "{err}"
    );
}

/// The CRD's size limits (`api::limits`), mirrored by `validate()` for objects stored before the
/// CRD had them and for native HPAs: each oversized field is named; the largest legitimate size
/// passes.
#[test]
fn sizes_are_bounded_as_the_crd_bounds_them() {
    use crate::api::limits::{MAX_METRICS, MAX_QUERY_LENGTH, MAX_SELECTOR_TERMS};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    let queue = |i: usize| MetricSpec::external(&format!("q{i}"), MetricTarget::value("10"));
    let mut spec = HorizontalPodAutoscalerPlusSpec::test();
    spec.metrics = (0..MAX_METRICS).map(queue).collect();
    spec.validate().unwrap();
    spec.metrics.push(queue(MAX_METRICS));
    assert_error(&spec, "spec.metrics", "must have at most 32 items, got 33");

    let long = |n: usize| "x".repeat(n);
    let mut prom = MetricSpec::prometheus("p", &long(MAX_QUERY_LENGTH), MetricTarget::value("1"));
    HorizontalPodAutoscalerPlusSpec::test()
        .metric(prom.clone())
        .validate()
        .unwrap();
    if let Some(p) = prom.prometheus.as_mut() {
        p.query.push('x');
        p.name = Some(long(1025));
        p.server_address = Some(format!("http://{}", long(2048)));
    }
    let mut external = MetricSpec::external("q", MetricTarget::value("1"));
    if let Some(e) = external.external.as_mut() {
        e.metric.selector = Some(LabelSelector {
            match_labels: Some(
                (0..=MAX_SELECTOR_TERMS)
                    .map(|i| (format!("k{i}"), "v".to_owned()))
                    .collect(),
            ),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "k".into(),
                operator: "In".into(),
                values: Some(vec![long(64)]),
            }]),
        });
    }
    let mut spec = HorizontalPodAutoscalerPlusSpec::test()
        .metric(prom)
        .metric(external)
        .scale_up(HpaScalingRules::window(0).pods(1, 60));
    spec.scale_target_ref.name = long(254);
    if let Some(up) = spec.behavior.as_mut().and_then(|b| b.scale_up.as_mut()) {
        up.policies = vec![up.policies.first().cloned().unwrap_or_default(); 17];
    }
    for (path, message) in [
        (
            "spec.scaleTargetRef.name",
            "may not be more than 253 characters, got 254",
        ),
        (
            "spec.metrics[0].prometheus.query",
            "may not be more than 4096 characters",
        ),
        (
            "spec.metrics[0].prometheus.name",
            "may not be more than 1024 characters",
        ),
        (
            "spec.metrics[0].prometheus.serverAddress",
            "may not be more than 2048 characters",
        ),
        (
            "spec.metrics[1].external.metric.selector.matchLabels",
            "must have at most 64 items, got 65",
        ),
        (
            "spec.metrics[1].external.metric.selector.matchExpressions[0].values[0]",
            "may not be more than 63 characters",
        ),
        (
            "spec.behavior.scaleUp.policies",
            "must have at most 16 items, got 17",
        ),
    ] {
        assert_error(&spec, path, message);
    }
}
