//! Conversion of the seed examples (real upstream manifests under
//! `crates/kubectl-plimsoll/tests/data/`, each with its source) field by field.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Value, json};

use super::*;
use crate::api::hpa_plus::{
    Algorithm, ConvergeTowardsWatermark, MetricSourceType, MetricTargetType,
};

fn docs(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text).expect("seed example parses")
}

fn one(text: &str) -> Conversion {
    let all = docs(text);
    let doc = all
        .iter()
        .find(|d| d["kind"] != "Deployment")
        .expect("an autoscaler document");
    convert(doc).expect("converts")
}

fn hpa_plus(c: &Conversion) -> &HorizontalPodAutoscalerPlus {
    match &c.object {
        Converted::HpaPlus(o) => o,
        _ => panic!("expected an HPA+"),
    }
}

fn cron(c: &Conversion) -> &CronHorizontalPodAutoscaler {
    match &c.object {
        Converted::Cron(o) => o,
        _ => panic!("expected a CronHPA"),
    }
}

fn fields(c: &Conversion) -> Vec<&str> {
    c.dropped.iter().map(|d| d.field.as_str()).collect()
}

const WPA_README: &str = include_str!("../../../../kubectl-plimsoll/tests/data/wpa-readme.yaml");
const WPA_SAMPLE: &str = include_str!("../../../../kubectl-plimsoll/tests/data/wpa-sample.yaml");
const ALIYUN_EXCLUDE: &str =
    include_str!("../../../../kubectl-plimsoll/tests/data/aliyun-cronhpa-exclude-dates.yaml");
const ALIYUN_HPA: &str =
    include_str!("../../../../kubectl-plimsoll/tests/data/aliyun-cronhpa-hpa.yaml");
const ALIYUN_DATE: &str =
    include_str!("../../../../kubectl-plimsoll/tests/data/aliyun-cronhpa-date.yaml");
const HPA_V2: &str = include_str!("../../../../kubectl-plimsoll/tests/data/hpa-v2.yaml");
const HPA_V1: &str = include_str!("../../../../kubectl-plimsoll/tests/data/hpa-v1.yaml");

fn q(text: &str) -> Quantity {
    Quantity(text.to_owned())
}

#[test]
fn wpa_readme_example_keeps_every_field() {
    let conv = one(WPA_README);
    let obj = hpa_plus(&conv);
    let s = &obj.spec;
    assert_eq!(
        obj.metadata.name.as_deref(),
        Some("example-watermarkpodautoscaler")
    );
    assert_eq!(
        conv.source,
        "WatermarkPodAutoscaler/example-watermarkpodautoscaler"
    );
    assert_eq!(s.scale_target_ref.kind, "Deployment");
    assert_eq!(s.scale_target_ref.name, "some_app");
    assert_eq!(s.scale_target_ref.api_version.as_deref(), Some("apps/v1"));
    assert_eq!((s.min_replicas, s.max_replicas), (Some(4), 9));
    assert_eq!(s.downscale_forbidden_window_seconds, Some(60));
    assert_eq!(s.upscale_forbidden_window_seconds, Some(30));
    assert_eq!(s.downscale_delay_below_watermark_seconds, Some(300));
    assert_eq!(s.upscale_delay_above_watermark_seconds, Some(30));
    assert_eq!(s.scale_down_limit_factor, Some(q("30")));
    assert_eq!(s.scale_up_limit_factor, Some(q("50")));
    assert_eq!(s.tolerance, Some(q("0.01")));
    assert_eq!(s.metrics.len(), 1);
    let metric = &s.metrics[0];
    assert_eq!(metric.type_, MetricSourceType::External);
    let ext = metric.external.as_ref().expect("external");
    assert_eq!(ext.metric.name, "custom.request_duration.max");
    let labels = ext
        .metric
        .selector
        .as_ref()
        .and_then(|sel| sel.match_labels.clone())
        .expect("selector labels");
    assert_eq!(labels.get("service").map(String::as_str), Some("billing"));
    assert_eq!(labels.len(), 3);
    assert_eq!(ext.target.type_, MetricTargetType::Watermark);
    assert_eq!(ext.target.low_watermark, Some(q("150m")));
    assert_eq!(ext.target.high_watermark, Some(q("400m")));
    let behavior = s.behavior.as_ref().expect("behavior spelled out");
    for rules in [&behavior.scale_up, &behavior.scale_down] {
        assert_eq!(
            rules.as_ref().and_then(|r| r.stabilization_window_seconds),
            Some(0)
        );
    }
    assert!(conv.dropped.is_empty(), "nothing lost: {:?}", conv.dropped);
    assert!(
        conv.notes
            .iter()
            .any(|n| n.contains("stabilizationWindowSeconds"))
    );
    // Every limit factor and window is given, so no WPA default is written out.
    assert_eq!(conv.notes.len(), 1, "{:?}", conv.notes);
    s.validate().expect("the converted spec validates");
}

#[test]
fn wpa_sample_converts_spellings_and_numbers() {
    let c = one(WPA_SAMPLE);
    let s = &hpa_plus(&c).spec;
    assert_eq!(s.tolerance, Some(q("10m")));
    assert_eq!(s.readiness_delay_seconds, Some(10));
    assert_eq!(
        s.converge_towards_watermark,
        Some(ConvergeTowardsWatermark::HighWatermark)
    );
    let e = s.metrics[0].external.as_ref().expect("external");
    assert_eq!(e.target.high_watermark, Some(q("900k")));
    assert_eq!(e.target.low_watermark, Some(q("500k")));
    assert!(c.dropped.is_empty(), "{:?}", c.dropped);
    // The WPA controller's defaults for what the sample leaves out, written out because the
    // HPA+ defaults differ (DataDog/watermarkpodautoscaler DefaultWatermarkPodAutoscaler).
    assert_eq!(s.scale_up_limit_factor, Some(q("50")));
    assert_eq!(s.scale_down_limit_factor, Some(q("20")));
    assert_eq!(s.upscale_forbidden_window_seconds, Some(60));
    assert_eq!(s.downscale_forbidden_window_seconds, Some(300));
    assert_eq!(c.notes.len(), 5, "{:?}", c.notes);
    s.validate().expect("validates");
}

#[test]
fn wpa_limits_beyond_the_hpa_plus_range_and_half_bands() {
    let doc = json!({
        "apiVersion": "datadoghq.com/v1alpha1", "kind": "WatermarkPodAutoscaler",
        "metadata": {"name": "w"},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "d"}, "maxReplicas": 3,
            "scaleUpLimitFactor": 150, "scaleDownLimitFactor": "30",
            "upscaleForbiddenWindowSeconds": 0, "downscaleForbiddenWindowSeconds": 45,
            "metrics": [{"type": "External", "external": {"metricName": "m", "highWatermark": "5"}}]
        }
    });
    let c = convert(&doc).expect("converts");
    let s = &hpa_plus(&c).spec;
    assert_eq!(s.scale_up_limit_factor, Some(q("100")));
    assert_eq!(s.scale_down_limit_factor, Some(q("30")));
    // 0 is "unset" to the WPA controller, which then waits 60 s.
    assert_eq!(s.upscale_forbidden_window_seconds, Some(60));
    assert_eq!(s.downscale_forbidden_window_seconds, Some(45));
    let target = &s.metrics[0].external.as_ref().expect("external").target;
    assert_eq!(
        (target.low_watermark.clone(), target.high_watermark.clone()),
        (Some(q("5")), Some(q("5")))
    );
    assert_eq!(fields(&c), ["spec.scaleUpLimitFactor"]);
    assert!(c.dropped[0].reason.contains("150"));
    s.validate().expect("validates");
}

#[test]
fn wpa_fields_without_a_home_are_reported_with_their_path() {
    let doc = json!({
        "apiVersion": "datadoghq.com/v1alpha1", "kind": "WatermarkPodAutoscaler",
        "metadata": {"name": "w", "uid": "1234", "resourceVersion": "7",
            "annotations": {"wpa.datadoghq.com/logs-attributes": "{}", "owner": "me"},
            "ownerReferences": [{"kind": "X"}]},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "d"},
            "maxReplicas": 3, "algorithm": "Average", "dryRun": true, "tolerateZero": true,
            "replicaScalingAbsoluteModulo": 2, "minAvailableReplicaPercentage": 50,
            "recommender": {"url": "http://r"}, "futureField": 1,
            "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "highWatermark": 80, "lowWatermark": "60",
                    "metricSelector": {"matchLabels": {"a": "b"}}}},
                {"type": "Pods", "pods": {}}
            ]
        },
        "status": {"currentReplicas": 2}
    });
    let c = convert(&doc).expect("converts");
    let s = &hpa_plus(&c).spec;
    assert_eq!(s.algorithm, Some(Algorithm::Average));
    assert!(s.dry_run && s.tolerate_zero);
    assert_eq!(s.replica_scaling_absolute_modulo, Some(2));
    assert_eq!(s.min_available_replica_percentage, Some(50));
    let r = s.metrics[0].resource.as_ref().expect("resource");
    assert_eq!(r.target.high_watermark, Some(q("80")));
    assert_eq!(r.target.low_watermark, Some(q("60")));
    assert_eq!(s.metrics.len(), 1);
    let mut got = fields(&c);
    got.sort_unstable();
    assert_eq!(
        got,
        [
            "metadata.annotations.wpa.datadoghq.com/logs-attributes",
            "metadata.ownerReferences",
            "spec.futureField",
            "spec.metrics[0].resource.metricSelector",
            "spec.metrics[1]",
            "spec.recommender",
            "status",
        ]
    );
    let meta = &hpa_plus(&c).metadata;
    assert_eq!(meta.uid, None);
    assert_eq!(
        meta.annotations
            .as_ref()
            .and_then(|a| a.get("owner"))
            .map(String::as_str),
        Some("me")
    );
}

#[test]
fn aliyun_exclude_dates_example_converts_job_by_job() {
    let all = docs(ALIYUN_EXCLUDE);
    assert!(matches!(
        convert(&all[0]),
        Err(ConvertError::UnknownKind { .. })
    ));
    let c = one(ALIYUN_EXCLUDE);
    let o = cron(&c);
    assert_eq!(o.metadata.name.as_deref(), Some("cronhpa-sample"));
    assert_eq!(
        o.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("controller-tools.k8s.io"))
            .map(String::as_str),
        Some("1.0")
    );
    let s = &o.spec;
    assert_eq!(s.scale_target_ref.api_version.as_deref(), Some("apps/v1"));
    assert_eq!(s.scale_target_ref.kind, "Deployment");
    assert_eq!(s.scale_target_ref.name, "nginx-deployment-basic");
    assert_eq!(s.exclude_dates, ["* * * 15 11 *", "* * * * * 5"]);
    let jobs: Vec<_> = s
        .jobs
        .iter()
        .map(|j| {
            (
                j.name.as_str(),
                j.schedule.as_str(),
                j.target_size,
                j.run_once,
            )
        })
        .collect();
    assert_eq!(
        jobs,
        [
            ("scale-down", "30 */1 * * * *", 1, false),
            ("scale-up", "0 */1 * * * *", 3, false),
        ]
    );
    assert_eq!(s.time_zone, None);
    assert!(c.notes.iter().any(|n| n.contains("apps/v1beta2")));
    assert!(c.notes.iter().any(|n| n.contains("timeZone")));
    assert!(c.dropped.is_empty(), "{:?}", c.dropped);
    s.validate().expect("validates");
}

#[test]
fn aliyun_hpa_target_keeps_run_once_and_moves_to_autoscaling_v2() {
    let c = one(ALIYUN_HPA);
    let s = &cron(&c).spec;
    assert_eq!(
        s.scale_target_ref.api_version.as_deref(),
        Some("autoscaling/v2")
    );
    assert_eq!(s.scale_target_ref.kind, "HorizontalPodAutoscaler");
    assert!(s.jobs.iter().all(|j| j.run_once));
    s.validate().expect("validates");
}

#[test]
fn aliyun_date_schedules_become_yearly_run_once_and_say_the_year_is_lost() {
    let c = one(ALIYUN_DATE);
    let s = &cron(&c).spec;
    assert_eq!(s.jobs[0].schedule, "0 59 23 16 11 *");
    assert_eq!(s.jobs[1].schedule, "0 0 0 15 11 *");
    assert!(s.jobs.iter().all(|j| j.run_once));
    assert_eq!(
        fields(&c),
        ["spec.jobs[0].schedule", "spec.jobs[1].schedule"]
    );
    assert!(c.dropped[0].reason.contains("2020"));
    s.validate().expect("validates");
}

#[test]
fn aliyun_disabled_mode_is_reported() {
    let doc = json!({"apiVersion": "autoscaling.alibabacloud.com/v1beta1",
        "kind": "CronHorizontalPodAutoscaler", "metadata": {"name": "c"},
        "spec": {"cronMode": "Disable", "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
            "jobs": [{"name": "a", "schedule": "0 0 8 * * *", "targetSize": 2}]}});
    let c = convert(&doc).expect("converts");
    assert_eq!(fields(&c), ["spec.cronMode"]);
    assert!(!c.notes.iter().any(|n| n.contains("rewritten")));
}

#[test]
fn hpa_v2_moves_native_annotations_into_fields() {
    let c = one(HPA_V2);
    let o = hpa_plus(&c);
    assert_eq!(o.spec.tolerance, Some(q("0.05")));
    assert_eq!(o.spec.sync_period_seconds, Some(30));
    assert_eq!(o.spec.max_replicas, 10);
    assert_eq!(
        o.spec.metrics[0]
            .resource
            .as_ref()
            .and_then(|r| r.target.average_utilization),
        Some(50)
    );
    assert_eq!(
        o.spec
            .behavior
            .as_ref()
            .and_then(|b| b.scale_down.as_ref())
            .and_then(|r| r.stabilization_window_seconds),
        Some(120)
    );
    let annotations = o.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.keys().collect::<Vec<_>>(), ["team"]);
    assert_eq!(fields(&c), ["status"]);
    assert_eq!(c.notes.len(), 2);
    o.spec.validate().expect("validates");
}

#[test]
fn hpa_v1_cpu_target_becomes_a_utilization_metric() {
    let c = one(HPA_V1);
    let o = hpa_plus(&c);
    assert_eq!(o.metadata.namespace.as_deref(), Some("shop"));
    assert_eq!(o.spec.min_replicas, Some(2));
    let r = o.spec.metrics[0].resource.as_ref().expect("resource");
    assert_eq!(r.name, "cpu");
    assert_eq!(r.target.type_, MetricTargetType::Utilization);
    assert_eq!(r.target.average_utilization, Some(60));
    assert!(c.dropped.is_empty());
    o.spec.validate().expect("validates");
}

#[test]
fn unknown_kinds_are_refused_by_name() {
    let err = convert(&json!({"apiVersion": "apps/v1", "kind": "Deployment"}))
        .expect_err("not an autoscaler");
    assert!(
        err.to_string()
            .starts_with("apps/v1 Deployment is not converted")
    );
}

// KEDA ScaledObjects: KEDA's documentation examples (tests/data/keda-*.yaml, each with its
// source lines) and hostile variants.

const KEDA_CPU_MEMORY: &str =
    include_str!("../../../../kubectl-plimsoll/tests/data/keda-cpu-memory.yaml");
const KEDA_CRON: &str = include_str!("../../../../kubectl-plimsoll/tests/data/keda-cron.yaml");
const KEDA_PROMETHEUS: &str =
    include_str!("../../../../kubectl-plimsoll/tests/data/keda-prometheus.yaml");
const KEDA_SPEC: &str = include_str!("../../../../kubectl-plimsoll/tests/data/keda-spec.yaml");

fn all(text: &str) -> Vec<Conversion> {
    docs(text)
        .iter()
        .map(|d| convert(d).expect("converts"))
        .collect()
}

fn reason<'a>(c: &'a Conversion, field: &str) -> &'a str {
    c.dropped.iter().find(|d| d.field == field).map_or_else(
        || panic!("{field} reported in {:?}", c.dropped),
        |d| d.reason.as_str(),
    )
}

#[test]
fn keda_cpu_and_memory_become_resource_metrics_on_the_default_target() {
    let convs = all(KEDA_CPU_MEMORY);
    let cpu = hpa_plus(&convs[0]);
    assert_eq!(convs[0].source, "ScaledObject/cpu-scaledobject");
    assert_eq!(
        cpu.spec.scale_target_ref.api_version.as_deref(),
        Some("apps/v1")
    );
    assert_eq!(cpu.spec.scale_target_ref.kind, "Deployment");
    assert_eq!(cpu.spec.scale_target_ref.name, "my-deployment");
    assert_eq!(cpu.spec.max_replicas, 100);
    // KEDA's default minimum 0 cannot hold with a Resource metric.
    assert_eq!(cpu.spec.min_replicas, Some(1));
    assert!(reason(&convs[0], "spec.minReplicaCount").contains("Resource metric"));
    let m = &cpu.spec.metrics[0];
    assert_eq!(m.type_, MetricSourceType::ContainerResource);
    let c = m.container_resource.as_ref().expect("container resource");
    assert_eq!((c.name.as_str(), c.container.as_str()), ("cpu", "foo"));
    assert_eq!(c.target.type_, MetricTargetType::Utilization);
    assert_eq!(c.target.average_utilization, Some(50));
    let mem = hpa_plus(&convs[1]);
    let r = mem.spec.metrics[0].resource.as_ref().expect("resource");
    assert_eq!(r.name, "memory");
    assert_eq!(r.target.average_utilization, Some(50));
    assert_eq!(fields(&convs[1]), ["spec.minReplicaCount"]);
}

#[test]
fn keda_cron_only_sets_the_workload_and_cron_with_cpu_raises_the_hpa_plus_minimum() {
    let convs = all(KEDA_CRON);
    let only = cron(&convs[0]);
    assert_eq!(only.spec.scale_target_ref.kind, "Deployment");
    assert_eq!(only.spec.time_zone.as_deref(), Some("Asia/Kolkata"));
    let jobs: Vec<_> = only
        .spec
        .jobs
        .iter()
        .map(|j| (j.name.as_str(), j.schedule.as_str(), j.target_size))
        .collect();
    assert_eq!(
        jobs,
        [
            ("cron-0-start", "0 6 * * *", 10),
            ("cron-0-end", "0 20 * * *", 0)
        ]
    );
    assert_eq!(fields(&convs[0]), ["spec.cooldownPeriod"]);

    let parts = convs[1].object.parts();
    assert_eq!(parts.len(), 2);
    let (Converted::HpaPlus(plus), Converted::Cron(raise)) = (parts[0], parts[1]) else {
        panic!("an HPA+ then a CronHPA: {parts:?}");
    };
    assert_eq!(
        (plus.spec.min_replicas, plus.spec.max_replicas),
        (Some(1), 4)
    );
    assert_eq!(
        raise.spec.scale_target_ref.kind,
        "HorizontalPodAutoscalerPlus"
    );
    assert_eq!(raise.spec.scale_target_ref.name, "cron-scaledobject");
    let sizes: Vec<_> = raise.spec.jobs.iter().map(|j| j.target_size).collect();
    assert_eq!(sizes, [1, 1]);
    assert_eq!(convs[1].object.to_values().expect("json").len(), 2);
}

#[test]
fn keda_prometheus_becomes_a_prometheus_metric_that_may_scale_to_zero() {
    let convs = all(KEDA_PROMETHEUS);
    let plus = hpa_plus(&convs[0]);
    let p = plus.spec.metrics[0]
        .prometheus
        .as_ref()
        .expect("prometheus");
    assert_eq!(plus.spec.metrics[0].type_, MetricSourceType::Prometheus);
    assert_eq!(
        p.query,
        r#"sum(rate(http_requests_total{deployment="my-deployment"}[2m]))"#
    );
    assert_eq!(
        p.server_address.as_deref(),
        Some("http://<prometheus-host>:9090")
    );
    assert_eq!(p.target.type_, MetricTargetType::AverageValue);
    assert_eq!(p.target.average_value, Some(q("100")));
    // No activation threshold: KEDA's default minimum 0 means what minReplicas 0 means here.
    assert_eq!(plus.spec.min_replicas, Some(0));
    assert!(convs[0].dropped.is_empty(), "{:?}", convs[0].dropped);
    assert_eq!(hpa_plus(&convs[1]).spec.max_replicas, 12);
    assert_eq!(
        fields(&convs[1]),
        [
            "spec.triggers[0].authenticationRef",
            "spec.triggers[0].metadata.authModes"
        ]
    );
}

#[test]
fn keda_full_spec_maps_behavior_polling_and_pause_and_reports_the_rest() {
    let conv = one(KEDA_SPEC);
    let plus = hpa_plus(&conv);
    let s = &plus.spec;
    assert!(s.paused);
    assert_eq!(s.sync_period_seconds, Some(30));
    assert_eq!((s.min_replicas, s.max_replicas), (Some(1), 100));
    assert_eq!(s.scale_target_ref.kind, "StatefulSet");
    let down = s
        .behavior
        .as_ref()
        .and_then(|b| b.scale_down.as_ref())
        .expect("scaleDown");
    assert_eq!(down.stabilization_window_seconds, Some(300));
    assert_eq!(down.policies.len(), 1);
    assert_eq!(s.metrics.len(), 1);
    assert_eq!(
        s.metrics[0]
            .prometheus
            .as_ref()
            .expect("prometheus")
            .target
            .average_value,
        Some(q("100.50"))
    );
    let annotations = plus.metadata.annotations.clone().unwrap_or_default();
    assert!(
        annotations.is_empty(),
        "every KEDA annotation handled: {annotations:?}"
    );
    let mut got = fields(&conv);
    got.sort_unstable();
    assert_eq!(
        got,
        [
            "metadata.annotations.autoscaling.keda.sh/paused-replicas",
            "metadata.annotations.scaledobject.keda.sh/transfer-hpa-ownership",
            "metadata.annotations.validations.keda.sh/hpa-ownership",
            "spec.advanced.horizontalPodAutoscalerConfig.name",
            "spec.advanced.restoreToOriginalReplicaCount",
            "spec.advanced.scalingModifiers",
            "spec.cooldownPeriod",
            "spec.fallback",
            "spec.idleReplicaCount",
            "spec.initialCooldownPeriod",
            "spec.scaleTargetRef.envSourceContainerName",
            "spec.triggers[0]",
            "spec.triggers[1]",
            "spec.triggers[2].metadata.activationThreshold",
            "spec.triggers[2].metadata.customHeaders",
            "spec.triggers[2].metadata.ignoreNullValues",
            "spec.triggers[2].metadata.namespace",
            "spec.triggers[2].metadata.queryParameters",
            "spec.triggers[2].metadata.timeout",
            "spec.triggers[2].metadata.unsafeSsl",
        ]
    );
    assert!(reason(&conv, "spec.triggers[0]").contains("\"kubernetes-workload\""));
}

#[test]
fn keda_hostile_input_fails_naming_the_field_with_a_bounded_quote() {
    let long = "9".repeat(10_000);
    let base = |trigger: Value| {
        json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": "x"},
            "spec": {"scaleTargetRef": {"name": "web"}, "triggers": [
                {"type": "cpu", "metadata": {"value": "50"}}, trigger]}})
    };
    let cases = [
        (
            base(json!({"type": "cpu", "metadata": {"value": format!("x{long}")}})),
            "spec.triggers[1].metadata.value",
        ),
        (
            base(json!({"type": "cpu", "metricType": long, "metadata": {"value": "5"}})),
            "spec.triggers[1].metricType",
        ),
        (
            base(
                json!({"type": "cron", "metadata": {"timezone": "UTC", "start": "0 6 * * *",
                "end": "0 7 * * *", "desiredReplicas": "-1"}}),
            ),
            "spec.triggers[1].metadata.desiredReplicas",
        ),
        (
            base(json!({"type": "prometheus", "metadata": {"query": "up"}})),
            "spec.triggers[1].metadata.threshold",
        ),
        (base(json!({"metadata": {}})), "spec.triggers[1].type"),
        (base(json!(long)), "spec.triggers[1]"),
        (
            base(json!({"type": "cpu", "metadata": {"value": [long]}})),
            "spec.triggers[1].metadata.value",
        ),
        (
            json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                "spec": {"scaleTargetRef": {"name": "web"}, "minReplicaCount": long}}),
            "spec.minReplicaCount",
        ),
        (
            json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                "spec": {"scaleTargetRef": {}, "triggers": []}}),
            "spec.scaleTargetRef.name",
        ),
        (
            json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                "spec": {"scaleTargetRef": {"name": "web"}, "triggers": {"a": 1}}}),
            "spec.triggers",
        ),
        (
            json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                "spec": {"scaleTargetRef": {"name": "web"},
                    "triggers": vec![json!({"type": "kafka"}); 1000]}}),
            "spec.triggers",
        ),
        (
            json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                "spec": {"scaleTargetRef": {"name": "web"}, "triggers": [{"type": "kafka"}]}}),
            "spec.triggers",
        ),
    ];
    for (doc, path) in cases {
        let err = convert(&doc).expect_err(path).to_string();
        assert!(err.starts_with(&format!("{path}: ")), "{path}: {err}");
        assert!(err.len() < 400, "bounded: {} characters", err.len());
    }
}

#[test]
fn an_upstream_hpa_keeps_its_behavior_sync_period() {
    // KEP-6003's field, which k8s-openapi's typed HPA does not have yet.
    let c = convert(&json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2,
            "maxReplicas": 10,
            "behavior": {"syncPeriodSeconds": 30},
        },
    }))
    .expect("converts");
    let plus = hpa_plus(&c);
    assert_eq!(
        plus.spec
            .behavior
            .as_ref()
            .and_then(|b| b.sync_period_seconds),
        Some(30)
    );
    assert!(c.dropped.is_empty(), "{:?}", c.dropped);
}
