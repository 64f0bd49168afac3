//! CRD validation at write time: every rule of the repository's CRDs refuses one object and
//! lets another through, and the sim answers `kubectl apply` and kube-rs as a real API server
//! does (`422 Invalid`, the field and the rule's message). The kubectl test is skipped, with a
//! printed reason, when `kubectl` is not installed.
#![allow(clippy::unwrap_used, clippy::panic)] // integration tests: helpers fail loudly

use crate::common;

use common::kubectl::{available as kubectl_available, run_with_stdin as kubectl};

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use plimsoll_sim::validation::{self, FieldError};
use serde_json::{Value, json};

fn crd_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds")
}

/// The `openAPIV3Schema` of the first version of the CRD in `file`.
fn schema_of(file: &str) -> Value {
    let text = std::fs::read_to_string(crd_dir().join(file)).unwrap();
    let crd: Value = serde_saphyr::from_str(&text).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

const HPA_PLUS: &str = "horizontalpodautoscalerpluses.autoscaling.plimsoll.dev.yaml";
const CRON: &str = "cronhorizontalpodautoscalers.autoscaling.plimsoll.dev.yaml";
const VPA: &str = "verticalpodautoscalers.autoscaling.k8s.io.yaml";

fn hpa_plus() -> Value {
    json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1", "kind": "HorizontalPodAutoscalerPlus",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 10, "tolerance": "0.1",
            "metrics": [{"type": "External", "external": {
                "metric": {"name": "queue"},
                "target": {"type": "Watermark", "lowWatermark": "10", "highWatermark": "20"}}}],
        },
    })
}

fn cron() -> Value {
    json!({
        "apiVersion": "autoscaling.plimsoll.dev/v1alpha1", "kind": "CronHorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "timeZone": "Europe/Berlin",
            "jobs": [{"name": "up", "schedule": "0 0 8 * * *", "targetSize": 5},
                     {"name": "down", "schedule": "@every 90s", "targetSize": 1}],
        },
    })
}

fn vpa() -> Value {
    json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "updatePolicy": {"updateMode": "Recreate"}},
    })
}

fn watermark_metric(low: &str, high: &str) -> Value {
    json!([{"type": "External", "external": {"metric": {"name": "queue"},
        "target": {"type": "Watermark", "lowWatermark": low, "highWatermark": high}}}])
}

const NOT_CHECKED: &str = "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// One case: (CRD, base object, merge patch on `spec`, the errors expected: none = accepted).
type Case = (&'static str, fn() -> Value, Value, Vec<&'static str>);

fn cases() -> Vec<Case> {
    [
        replica_cases(),
        quantity_cases(),
        fallback_cases(),
        bound_and_enum_cases(),
        watermark_cases(),
        metric_target_cases(),
        metric_source_cases(),
        cron_and_vpa_cases(),
        vpa_bound_cases(),
        vpa_policy_cases(),
        vpa_startup_boost_cases(),
        hpa_plus_size_cases(),
        cron_and_vpa_size_cases(),
    ]
    .concat()
}

fn replica_cases() -> Vec<Case> {
    vec![
        // HPA+: replicas.
        (HPA_PLUS, hpa_plus, json!({}), vec![]),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"maxReplicas": 5, "minReplicasTuning": {"mode": "Apply", "floor": 6}}),
            vec!["spec.minReplicasTuning.floor: Invalid value: \"object\": must be <= maxReplicas"],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"maxReplicas": 5, "minReplicasTuning": {"mode": "Report", "floor": 5, "lookbackDays": 30}}),
            vec![],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"predictive": {"mode": "Scale", "season": "168h", "lookbackDays": 3}}),
            vec![
                "spec.predictive.lookbackDays: Invalid value: \"object\": must be >= 7 with season 168h",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"predictive": {"mode": "Scale", "leadSeconds": "soon"}}),
            vec![
                "spec.predictive.leadSeconds: Invalid value: \"\": must be \"auto\" or a whole number of seconds >= 0",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"predictive": {"mode": "Report", "season": "168h", "lookbackDays": 14, "leadSeconds": 600, "overloadWeight": 100}}),
            vec![],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"predictive": {"mode": "Scale", "overloadWeight": 0}}),
            vec![
                "spec.predictive.overloadWeight: Invalid value: 0: spec.predictive.overloadWeight in body should be greater than or equal to 1",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"predictive": {"mode": "Scale", "overloadWeight": 101}}),
            vec![
                "spec.predictive.overloadWeight: Invalid value: 101: spec.predictive.overloadWeight in body should be less than or equal to 100",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"minReplicas": 10, "maxReplicas": 2}),
            vec!["spec.maxReplicas: Invalid value: \"object\": minReplicas must be <= maxReplicas"],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"minReplicas": 10, "maxReplicas": 10}),
            vec![],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"minReplicas": -1}),
            vec![
                "spec.minReplicas: Invalid value: -1: spec.minReplicas in body should be greater than or equal to 0",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"minReplicas": null, "maxReplicas": 0}),
            vec![
                "spec.maxReplicas: Invalid value: 0: spec.maxReplicas in body should be greater than or equal to 1",
            ],
        ),
        (HPA_PLUS, hpa_plus, json!({"minReplicas": 0}), vec![]),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"minReplicas": 0, "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 50}}}]}),
            vec![
                "spec.minReplicas: Invalid value: \"object\": must be >= 1 unless at least one Object, External or Prometheus metric is configured",
            ],
        ),
    ]
}

fn quantity_cases() -> Vec<Case> {
    vec![
        // HPA+: tolerances and limit factors.
        (
            HPA_PLUS,
            hpa_plus,
            json!({"tolerance": "-0.1"}),
            vec!["spec.tolerance: Invalid value: \"\": must be in [0, 1)"],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"tolerance": 1}),
            vec!["spec.tolerance: Invalid value: \"\": must be in [0, 1)"],
        ),
        (HPA_PLUS, hpa_plus, json!({"tolerance": "999m"}), vec![]),
        (HPA_PLUS, hpa_plus, json!({"tolerance": 0}), vec![]),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"tolerance": "a lot"}),
            vec!["spec.tolerance: Invalid value: \"\": must be a quantity, such as 500m or 2Gi"],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"tolerance": 0.5}),
            vec![
                "spec.tolerance: Invalid value: 0.5: spec.tolerance in body must be of type integer,string: \"number\"",
                NOT_CHECKED,
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"behavior": {"scaleUp": {"tolerance": "-1"}, "scaleDown": {"tolerance": "2"}}}),
            vec!["spec.behavior.scaleUp.tolerance: Invalid value: \"\": must be >= 0"],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"scaleUpLimitFactor": "101", "scaleDownLimitFactor": "-1"}),
            vec![
                "spec.scaleDownLimitFactor: Invalid value: \"\": must be in [0, 100]",
                "spec.scaleUpLimitFactor: Invalid value: \"\": must be in [0, 100]",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"scaleUpLimitFactor": "100", "scaleDownLimitFactor": 0}),
            vec![],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"behavior": {"scaleDown": {"tolerance": "x"}},
                   "scaleUpLimitFactor": "y", "scaleDownLimitFactor": "z"}),
            vec![
                "spec.behavior.scaleDown.tolerance: Invalid value: \"\": must be a quantity, such as 500m or 2Gi",
                "spec.scaleDownLimitFactor: Invalid value: \"\": must be a quantity, such as 500m or 2Gi",
                "spec.scaleUpLimitFactor: Invalid value: \"\": must be a quantity, such as 500m or 2Gi",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": [
                {"type": "External", "external": {"metric": {"name": "q"},
                    "target": {"type": "Watermark", "lowWatermark": "low", "highWatermark": "high"}}},
                {"type": "Object", "object": {"describedObject": {"kind": "S", "name": "w"},
                    "metric": {"name": "m"}, "target": {"type": "Value", "value": "v"}}},
                {"type": "Pods", "pods": {"metric": {"name": "m"},
                    "target": {"type": "AverageValue", "averageValue": "av"}}},
            ]}),
            vec![
                "spec.metrics[0].external.target.highWatermark: Invalid value: \"\": must be a quantity, such as 500m or 2Gi",
                "spec.metrics[0].external.target.lowWatermark: Invalid value: \"\": must be a quantity, such as 500m or 2Gi",
                "spec.metrics[1].object.target.value: Invalid value: \"\": must be a quantity, such as 500m or 2Gi",
                "spec.metrics[2].pods.target.averageValue: Invalid value: \"\": must be a quantity, such as 500m or 2Gi",
            ],
        ),
    ]
}

/// KEP-5679's `fallback`: a duration > 0 and at most 24h, and at least one replica, on External
/// and Prometheus metrics.
fn fallback_cases() -> Vec<Case> {
    vec![
        // KEP-5679 fallback: a duration > 0 and at most 24h, and at least one replica.
        (
            HPA_PLUS,
            hpa_plus,
            json!({"minReplicas": 1, "metrics": [
                {"type": "External", "external": {"metric": {"name": "q"},
                    "target": {"type": "Value", "value": "1"},
                    "fallback": {"failureDuration": "25h", "replicas": 0}}},
                {"type": "Prometheus", "prometheus": {"query": "sum(up)",
                    "target": {"type": "Value", "value": "1"},
                    "fallback": {"failureDuration": "0s", "replicas": 3}}},
                {"type": "External", "external": {"metric": {"name": "r"},
                    "target": {"type": "Value", "value": "1"},
                    "fallback": {"failureDuration": "90s", "replicas": 3}}},
            ]}),
            vec![
                "spec.metrics[0].external.fallback.replicas: Invalid value: 0: spec.metrics[0].external.fallback.replicas in body should be greater than or equal to 1",
                "spec.metrics[0].external.fallback.failureDuration: Invalid value: \"string\": must be a duration such as 3m, > 0 and at most 24h",
                "spec.metrics[1].prometheus.fallback.failureDuration: Invalid value: \"string\": must be a duration such as 3m, > 0 and at most 24h",
            ],
        ),
    ]
}

fn bound_and_enum_cases() -> Vec<Case> {
    vec![
        // HPA+: periods, delays, percentages.
        (
            HPA_PLUS,
            hpa_plus,
            json!({"syncPeriodSeconds": 0, "upscaleForbiddenWindowSeconds": -1,
                   "minAvailableReplicaPercentage": 101, "replicaScalingAbsoluteModulo": 0}),
            vec![
                "spec.minAvailableReplicaPercentage: Invalid value: 101: spec.minAvailableReplicaPercentage in body should be less than or equal to 100",
                "spec.replicaScalingAbsoluteModulo: Invalid value: 0: spec.replicaScalingAbsoluteModulo in body should be greater than or equal to 1",
                "spec.syncPeriodSeconds: Invalid value: 0: spec.syncPeriodSeconds in body should be greater than or equal to 1",
                "spec.upscaleForbiddenWindowSeconds: Invalid value: -1: spec.upscaleForbiddenWindowSeconds in body should be greater than or equal to 0",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"behavior": {"scaleDown": {"stabilizationWindowSeconds": 3601,
                "policies": [{"type": "Pods", "value": 0, "periodSeconds": 1801}]}}}),
            vec![
                "spec.behavior.scaleDown.policies[0].periodSeconds: Invalid value: 1801: spec.behavior.scaleDown.policies[0].periodSeconds in body should be less than or equal to 1800",
                "spec.behavior.scaleDown.policies[0].value: Invalid value: 0: spec.behavior.scaleDown.policies[0].value in body should be greater than or equal to 1",
                "spec.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: 3601: spec.behavior.scaleDown.stabilizationWindowSeconds in body should be less than or equal to 3600",
            ],
        ),
        // HPA+: enums.
        (
            HPA_PLUS,
            hpa_plus,
            json!({"algorithm": "fast"}),
            vec![
                "spec.algorithm: Unsupported value: \"fast\": supported values: \"absolute\", \"average\"",
            ],
        ),
    ]
}

fn watermark_cases() -> Vec<Case> {
    vec![
        // HPA+: metrics.
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": watermark_metric("20", "10")}),
            vec![
                "spec.metrics[0].external.target.highWatermark: Invalid value: \"object\": must be >= lowWatermark",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": watermark_metric("10", "10")}),
            vec![],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": watermark_metric("0", "-1")}),
            vec![
                "spec.metrics[0].external.target.highWatermark: Invalid value: \"object\": must be >= lowWatermark",
                "spec.metrics[0].external.target.highWatermark: Invalid value: \"\": must be >= 0",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": watermark_metric("-1", "1Gi")}),
            vec!["spec.metrics[0].external.target.lowWatermark: Invalid value: \"\": must be >= 0"],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": [{"type": "External", "external": {"metric": {"name": "queue"},
                "target": {"type": "Watermark", "highWatermark": "1"}}}]}),
            vec![
                "spec.metrics[0].external.target.lowWatermark: Invalid value: \"object\": is required for type Watermark",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": [{"type": "External", "external": {"metric": {"name": "queue"},
                "target": {"type": "Watermark", "lowWatermark": "1"}}}]}),
            vec![
                "spec.metrics[0].external.target.highWatermark: Invalid value: \"object\": is required for type Watermark",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": [{"type": "Object", "object": {
                "describedObject": {"kind": "Service", "name": "web"}, "metric": {"name": "rps"},
                "target": {"type": "Value"}}}]}),
            vec![
                "spec.metrics[0].object.target.value: Invalid value: \"object\": is required for type Value",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": [{"type": "Pods", "pods": {"metric": {"name": "rps"},
                "target": {"type": "AverageValue", "averageValue": "0"}}}]}),
            vec!["spec.metrics[0].pods.target.averageValue: Invalid value: \"\": must be positive"],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": [{"type": "Object", "object": {
                "describedObject": {"kind": "Service", "name": "web"}, "metric": {"name": "rps"},
                "target": {"type": "Value", "value": "-5"}}}]}),
            vec!["spec.metrics[0].object.target.value: Invalid value: \"\": must be positive"],
        ),
    ]
}

fn metric_target_cases() -> Vec<Case> {
    vec![
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": [{"type": "Pods", "pods": {"metric": {"name": "rps"},
                "target": {"type": "AverageValue"}}}]}),
            vec![
                "spec.metrics[0].pods.target.averageValue: Invalid value: \"object\": is required for type AverageValue",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization"}}}]}),
            vec![
                "spec.metrics[0].resource.target.averageUtilization: Invalid value: \"object\": is required for type Utilization",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Value", "value": "1"}}}]}),
            vec![
                "spec.metrics[0].resource.target.type: Invalid value: \"object\": must be one of Utilization, AverageValue, Watermark for this metric source",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": [{"type": "ContainerResource", "containerResource": {"name": "cpu",
                "container": "app", "target": {"type": "Value", "value": "1"}}}]}),
            vec![
                "spec.metrics[0].containerResource.target.type: Invalid value: \"object\": must be one of Utilization, AverageValue, Watermark for this metric source",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": [{"type": "Pods", "pods": {"metric": {"name": "rps"},
                "target": {"type": "Utilization", "averageUtilization": 50}}}]}),
            vec![
                "spec.metrics[0].pods.target.type: Invalid value: \"object\": must be one of AverageValue, Watermark for this metric source",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": [{"type": "Object", "object": {
                "describedObject": {"kind": "Service", "name": "web"}, "metric": {"name": "rps"},
                "target": {"type": "Utilization", "averageUtilization": 50}}}]}),
            vec![
                "spec.metrics[0].object.target.type: Invalid value: \"object\": must be one of Value, AverageValue, Watermark for this metric source",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": [{"type": "External", "external": {"metric": {"name": "q"},
                "target": {"type": "Utilization", "averageUtilization": 50}}}]}),
            vec![
                "spec.metrics[0].external.target.type: Invalid value: \"object\": must be one of Value, AverageValue, Watermark for this metric source",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": [{"type": "Resource", "external": {"metric": {"name": "q"},
                "target": {"type": "Value", "value": "1"}}}]}),
            // In the order of the rules on the node, as the server evaluates them.
            vec![
                "spec.metrics[0].resource: Invalid value: \"object\": must be set for type Resource, and only for it",
                "spec.metrics[0].external: Invalid value: \"object\": must be set for type External, and only for it",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": [{"type": "Prometheus", "external": {"metric": {"name": "q"},
                "target": {"type": "Value", "value": "1"}}}]}),
            vec![
                "spec.metrics[0].external: Invalid value: \"object\": must be set for type External, and only for it",
                "spec.metrics[0].prometheus: Invalid value: \"object\": must be set for type Prometheus, and only for it",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": [{"type": "Prometheus", "prometheus": {"query": "sum(up)",
                "target": {"type": "Utilization", "averageUtilization": 50}}}]}),
            vec![
                "spec.metrics[0].prometheus.target.type: Invalid value: \"object\": must be one of Value, AverageValue, Watermark for this metric source",
            ],
        ),
    ]
}

fn metric_source_cases() -> Vec<Case> {
    vec![
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": [{"type": "Pods", "containerResource": {"name": "cpu", "container": "a",
                "target": {"type": "Utilization", "averageUtilization": 5}},
                "object": {"describedObject": {"kind": "S", "name": "w"}, "metric": {"name": "m"},
                "target": {"type": "Value", "value": "1"}}}]}),
            vec![
                "spec.metrics[0].containerResource: Invalid value: \"object\": must be set for type ContainerResource, and only for it",
                "spec.metrics[0].pods: Invalid value: \"object\": must be set for type Pods, and only for it",
                "spec.metrics[0].object: Invalid value: \"object\": must be set for type Object, and only for it",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": [{"type": "Resource", "resource": {"name": "",
                "target": {"type": "Utilization", "averageUtilization": 0}}}]}),
            vec![
                "spec.metrics[0].resource.name: Invalid value: \"\": spec.metrics[0].resource.name in body should be at least 1 chars long",
                "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: spec.metrics[0].resource.target.averageUtilization in body should be greater than or equal to 1",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"convergeTowardsWatermark": "highWatermark", "minReplicas": 1,
                   "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                       "target": {"type": "Utilization", "averageUtilization": 50}}}]}),
            vec![
                "spec.convergeTowardsWatermark: Invalid value: \"object\": requires at least one metric with a Watermark target",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"convergeTowardsWatermark": "lowWatermark"}),
            vec![],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"scaleTargetRef": {"kind": "", "name": "web"}}),
            vec![
                "spec.scaleTargetRef.kind: Invalid value: \"\": spec.scaleTargetRef.kind in body should be at least 1 chars long",
            ],
        ),
        // Names that are one segment of a URL (the target's /scale, the metrics APIs), as
        // upstream's HPA validation refuses them.
        (
            HPA_PLUS,
            hpa_plus,
            json!({"scaleTargetRef": {"kind": ".", "name": ".."},
                   "metrics": [
                       {"type": "External", "external": {"metric": {"name": "a/b"},
                           "target": {"type": "Value", "value": "1"}}},
                       {"type": "Pods", "pods": {"metric": {"name": "50%"},
                           "target": {"type": "AverageValue", "averageValue": "1"}}},
                       {"type": "Object", "object": {"describedObject": {"kind": "S", "name": "../x"},
                           "metric": {"name": "..."}, "target": {"type": "Value", "value": "1"}}}]}),
            vec![
                "spec.metrics[0].external.metric.name: Invalid value: \"string\": may not be '.' or '..', and may not contain '/' or '%'",
                "spec.metrics[1].pods.metric.name: Invalid value: \"string\": may not be '.' or '..', and may not contain '/' or '%'",
                "spec.metrics[2].object.describedObject.name: Invalid value: \"string\": may not be '.' or '..', and may not contain '/' or '%'",
                "spec.scaleTargetRef.kind: Invalid value: \"string\": may not be '.' or '..', and may not contain '/' or '%'",
                "spec.scaleTargetRef.name: Invalid value: \"string\": may not be '.' or '..', and may not contain '/' or '%'",
            ],
        ),
    ]
}

fn cron_and_vpa_cases() -> Vec<Case> {
    vec![
        // CronHPA.
        (CRON, cron, json!({}), vec![]),
        (
            CRON,
            cron,
            json!({"scaleTargetRef": {"kind": "Deployment/x", "name": "."}}),
            vec![
                "spec.scaleTargetRef.kind: Invalid value: \"string\": may not be '.' or '..', and may not contain '/' or '%'",
                "spec.scaleTargetRef.name: Invalid value: \"string\": may not be '.' or '..', and may not contain '/' or '%'",
            ],
        ),
        (
            CRON,
            cron,
            json!({"jobs": []}),
            vec!["spec.jobs: Invalid value: 0: spec.jobs in body should have at least 1 items"],
        ),
        (
            CRON,
            cron,
            json!({"jobs": null}),
            vec!["spec.jobs: Required value"],
        ),
        (
            CRON,
            cron,
            json!({"jobs": [{"name": "a", "schedule": "@daily", "targetSize": 1},
                            {"name": "a", "schedule": "@hourly", "targetSize": 2}]}),
            vec!["spec.jobs: Invalid value: \"array\": job names must be unique"],
        ),
        (
            CRON,
            cron,
            json!({"jobs": [{"name": "", "schedule": "every day", "targetSize": -1}]}),
            vec![
                "spec.jobs[0].name: Invalid value: \"\": spec.jobs[0].name in body should be at least 1 chars long",
                "spec.jobs[0].targetSize: Invalid value: -1: spec.jobs[0].targetSize in body should be greater than or equal to 0",
                "spec.jobs[0].schedule: Invalid value: \"string\": must be 5 or 6 cron fields, or a descriptor such as @daily or @every 90s",
            ],
        ),
        (
            CRON,
            cron,
            json!({"jobs": [{"name": "a", "schedule": "@fortnightly", "targetSize": 1}]}),
            vec![
                "spec.jobs[0].schedule: Invalid value: \"string\": must be 5 or 6 cron fields, or a descriptor such as @daily or @every 90s",
            ],
        ),
        (
            CRON,
            cron,
            json!({"jobs": [{"name": "a", "schedule": "0 0 8 * * * *", "targetSize": 1}]}),
            vec![
                "spec.jobs[0].schedule: Invalid value: \"string\": must be 5 or 6 cron fields, or a descriptor such as @daily or @every 90s",
            ],
        ),
        (
            CRON,
            cron,
            json!({"jobs": [{"name": "a", "schedule": "@DAILY", "targetSize": 0},
                            {"name": "b", "schedule": "30 8 * * MON-FRI", "targetSize": 2},
                            {"name": "c", "schedule": " @every 1h30m ", "targetSize": 2},
                            // Out of range, but of the right shape: the controller's condition.
                            {"name": "d", "schedule": "0 0 25 * * *", "targetSize": 2}]}),
            vec![],
        ),
        (
            CRON,
            cron,
            json!({"timeZone": "Central European Time"}),
            vec![
                "spec.timeZone: Invalid value: \"string\": must be an IANA time zone name such as Europe/Berlin",
            ],
        ),
        // Well-formed but unknown: CEL cannot read the tz database; the controller refuses it.
        (CRON, cron, json!({"timeZone": "Mars/Base"}), vec![]),
        (CRON, cron, json!({"timeZone": ""}), vec![]),
        (CRON, cron, json!({"timeZone": "Etc/GMT+5"}), vec![]),
        // VPA: upstream's enums; Plimsoll's own rules are in vpa_policy_cases.
        (VPA, vpa, json!({}), vec![]),
        (
            VPA,
            vpa,
            json!({"updatePolicy": {"updateMode": "Sometimes"}}),
            vec![
                "spec.updatePolicy.updateMode: Unsupported value: \"Sometimes\": supported values: \"Off\", \"Initial\", \"Recreate\", \"InPlaceOrRecreate\", \"InPlace\", \"Auto\", \"null\"",
            ],
        ),
    ]
}

/// A VPA spec patch with one container policy (`containerName: "*"` plus `policy`).
fn vpa_policy(policy: &Value) -> Value {
    let mut p = json!({"containerName": "*"});
    json_patch::merge(&mut p, policy);
    json!({"resourcePolicy": {"containerPolicies": [p]}})
}

fn vpa_bound_cases() -> Vec<Case> {
    vec![
        // Issue #28: a negative maxAllowed became a negative request, a huge minAllowed above it
        // did not help.
        (
            VPA,
            vpa,
            vpa_policy(&json!({"maxAllowed": {"cpu": "-1"}})),
            vec![
                "spec.resourcePolicy.containerPolicies[0].maxAllowed[cpu]: Invalid value: \"\": must be >= 0",
            ],
        ),
        (
            VPA,
            vpa,
            vpa_policy(
                &json!({"minAllowed": {"cpu": "1E", "memory": -5}, "maxAllowed": {"cpu": "-1"}}),
            ),
            vec![
                "spec.resourcePolicy.containerPolicies[0].minAllowed: Invalid value: \"object\": must be <= maxAllowed for every resource",
                "spec.resourcePolicy.containerPolicies[0].maxAllowed[cpu]: Invalid value: \"\": must be >= 0",
                "spec.resourcePolicy.containerPolicies[0].minAllowed[memory]: Invalid value: \"\": must be >= 0",
            ],
        ),
        (
            VPA,
            vpa,
            vpa_policy(&json!({"minAllowed": {"memory": "2Gi"}, "maxAllowed": {"memory": "1Gi"}})),
            vec![
                "spec.resourcePolicy.containerPolicies[0].minAllowed: Invalid value: \"object\": must be <= maxAllowed for every resource",
            ],
        ),
        (
            VPA,
            vpa,
            vpa_policy(&json!({"minAllowed": {"cpu": "lots"}, "maxAllowed": {"cpu": "1"}})),
            vec![
                "spec.resourcePolicy.containerPolicies[0].minAllowed[cpu]: Invalid value: \"\": must be a quantity, such as 500m or 2Gi",
            ],
        ),
        (
            VPA,
            vpa,
            vpa_policy(
                &json!({"maxAllowed": {"memory": "x"}, "oomBumpUpRatio": "x",
                              "oomMinBumpUp": "x", "targetCPUPercentile": "x",
                              "targetMemoryPercentile": "x",
                              "startupBoost": {"cpu": {"type": "Quantity", "quantity": "x"}}}),
            ),
            vec![
                "spec.resourcePolicy.containerPolicies[0].maxAllowed[memory]: Invalid value: \"\": must be a quantity, such as 500m or 2Gi",
                "spec.resourcePolicy.containerPolicies[0].oomBumpUpRatio: Invalid value: \"\": must be a quantity, such as 500m or 2Gi",
                "spec.resourcePolicy.containerPolicies[0].oomMinBumpUp: Invalid value: \"\": must be a quantity, such as 500m or 2Gi",
                "spec.resourcePolicy.containerPolicies[0].startupBoost.cpu.quantity: Invalid value: \"\": must be a quantity, such as 500m or 2Gi",
                "spec.resourcePolicy.containerPolicies[0].targetCPUPercentile: Invalid value: \"\": must be a quantity, such as 500m or 2Gi",
                "spec.resourcePolicy.containerPolicies[0].targetMemoryPercentile: Invalid value: \"\": must be a quantity, such as 500m or 2Gi",
            ],
        ),
        // Accepted neighbours: zero (no bound), integers, min == max, a huge maxAllowed.
        (
            VPA,
            vpa,
            vpa_policy(&json!({"minAllowed": {"cpu": 0, "memory": "100Mi"},
                              "maxAllowed": {"cpu": "1E", "memory": "100Mi"}})),
            vec![],
        ),
        (
            VPA,
            vpa,
            vpa_policy(
                &json!({"minAllowed": {"cpu": "250m"}, "maxAllowed": {"cpu": 2, "memory": "8Gi"},
                              "controlledResources": ["cpu", "memory"],
                              "controlledValues": "RequestsOnly"}),
            ),
            vec![],
        ),
    ]
}

fn vpa_policy_cases() -> Vec<Case> {
    vec![
        // The other quantities of a policy.
        (
            VPA,
            vpa,
            vpa_policy(
                &json!({"targetCPUPercentile": "1.5", "targetMemoryPercentile": 0,
                              "oomBumpUpRatio": "0.5", "oomMinBumpUp": "-1Mi"}),
            ),
            vec![
                "spec.resourcePolicy.containerPolicies[0].oomBumpUpRatio: Invalid value: \"\": must be >= 1",
                "spec.resourcePolicy.containerPolicies[0].oomMinBumpUp: Invalid value: \"\": must be >= 0",
                "spec.resourcePolicy.containerPolicies[0].targetCPUPercentile: Invalid value: \"\": must be in (0, 1]",
                "spec.resourcePolicy.containerPolicies[0].targetMemoryPercentile: Invalid value: \"\": must be in (0, 1]",
            ],
        ),
        (
            VPA,
            vpa,
            vpa_policy(
                &json!({"targetCPUPercentile": "0.9", "targetMemoryPercentile": 1,
                              "oomBumpUpRatio": 1, "oomMinBumpUp": "0"}),
            ),
            vec![],
        ),
        (
            VPA,
            vpa,
            vpa_policy(&json!({"memoryAggregationIntervalSeconds": 0, "containerName": ""})),
            vec![
                "spec.resourcePolicy.containerPolicies[0].containerName: Invalid value: \"\": spec.resourcePolicy.containerPolicies[0].containerName in body should be at least 1 chars long",
                "spec.resourcePolicy.containerPolicies[0].memoryAggregationIntervalSeconds: Invalid value: 0: spec.resourcePolicy.containerPolicies[0].memoryAggregationIntervalSeconds in body should be greater than or equal to 1",
            ],
        ),
        (
            VPA,
            vpa,
            json!({"resourcePolicy": {"containerPolicies": [
                {"containerName": "app"}, {"containerName": "*"}, {"containerName": "app"}]}}),
            vec![
                "spec.resourcePolicy.containerPolicies: Invalid value: \"array\": must name each container at most once",
            ],
        ),
    ]
}

fn vpa_startup_boost_cases() -> Vec<Case> {
    vec![
        // Startup boosts that lower or do nothing.
        (
            VPA,
            vpa,
            json!({"startupBoost": {"cpu": {"type": "Factor", "factor": 0, "quantity": "1"}}}),
            vec![
                "spec.startupBoost.cpu.factor: Invalid value: 0: spec.startupBoost.cpu.factor in body should be greater than or equal to 1",
                "spec.startupBoost.cpu.quantity: Invalid value: \"object\": is forbidden when type is Factor",
            ],
        ),
        (
            VPA,
            vpa,
            vpa_policy(
                &json!({"startupBoost": {"cpu": {"type": "Quantity", "quantity": "-500m",
                                                       "durationSeconds": -1}}}),
            ),
            vec![
                "spec.resourcePolicy.containerPolicies[0].startupBoost.cpu.durationSeconds: Invalid value: -1: spec.resourcePolicy.containerPolicies[0].startupBoost.cpu.durationSeconds in body should be greater than or equal to 0",
                "spec.resourcePolicy.containerPolicies[0].startupBoost.cpu.quantity: Invalid value: \"\": must be > 0",
            ],
        ),
        (
            VPA,
            vpa,
            json!({"startupBoost": {"cpu": {"type": "Quantity"}}}),
            vec![
                "spec.startupBoost.cpu.quantity: Invalid value: \"object\": is required when type is Quantity",
            ],
        ),
        (
            VPA,
            vpa,
            json!({"startupBoost": {"cpu": {"type": "Factor", "factor": 2}}}),
            vec![],
        ),
        (
            VPA,
            vpa,
            json!({"startupBoost": {"cpu": {"type": "Quantity", "quantity": "1", "factor": 2}}}),
            vec![
                "spec.startupBoost.cpu.factor: Invalid value: \"object\": is forbidden when type is Quantity",
            ],
        ),
        (
            VPA,
            vpa,
            json!({"startupBoost": {"cpu": {"type": "Factor"}}}),
            vec![
                "spec.startupBoost.cpu.factor: Invalid value: \"object\": is required when type is Factor",
            ],
        ),
        // Update policy bounds (upstream's admission controller refuses them too).
        (
            VPA,
            vpa,
            json!({"updatePolicy": {"minReplicas": 0, "evictAfterOOMSeconds": 0},
                   "recommenders": [{"name": "plimsoll"}, {"name": ""}]}),
            vec![
                "spec.recommenders: Too many: 2: must have at most 1 items",
                "spec.recommenders[1].name: Invalid value: \"\": spec.recommenders[1].name in body should be at least 1 chars long",
                "spec.updatePolicy.evictAfterOOMSeconds: Invalid value: 0: spec.updatePolicy.evictAfterOOMSeconds in body should be greater than or equal to 1",
                "spec.updatePolicy.minReplicas: Invalid value: 0: spec.updatePolicy.minReplicas in body should be greater than or equal to 1",
            ],
        ),
    ]
}

/// `n` items made by `item(i)`.
fn items(n: usize, item: impl Fn(usize) -> Value) -> Value {
    Value::Array((0..n).map(item).collect())
}

fn external_metric(i: usize) -> Value {
    json!({"type": "External", "external": {"metric": {"name": format!("queue-{i}")},
        "target": {"type": "Value", "value": "10"}}})
}

fn resources(n: usize) -> Value {
    Value::Object(
        (0..n)
            .map(|i| (format!("example.com/r{i}"), json!("1")))
            .collect(),
    )
}

/// Oversized objects: every list and free-form string has a bound (`plimsoll_core::api::limits`);
/// the largest legitimate size passes.
fn hpa_plus_size_cases() -> Vec<Case> {
    let long = |n: usize| "x".repeat(n);
    vec![
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": items(32, external_metric)}),
            vec![],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"metrics": items(33, external_metric)}),
            vec!["spec.metrics: Too many: 33: must have at most 32 items"],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"minReplicas": 1, "metrics": [{"type": "Prometheus", "prometheus": {
                "query": long(4097), "name": long(1025), "serverAddress": format!("http://{}", long(2048)),
                "target": {"type": "Value", "value": "1"}}}]}),
            vec![
                "spec.metrics[0].prometheus.name: Too long: may not be more than 1024 bytes",
                "spec.metrics[0].prometheus.query: Too long: may not be more than 4096 bytes",
                "spec.metrics[0].prometheus.serverAddress: Too long: may not be more than 2048 bytes",
            ],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"minReplicas": 1, "metrics": [{"type": "Prometheus", "prometheus": {
                "query": long(4096), "target": {"type": "Value", "value": "1"}}}]}),
            vec![],
        ),
        (
            HPA_PLUS,
            hpa_plus,
            json!({"scaleTargetRef": {"kind": long(64), "name": long(254)},
                   "metrics": [{"type": "External", "external": {"metric": {"name": "q",
                       "selector": {"matchLabels": Value::Object((0..65).map(|i| (format!("k{i}"), json!("v"))).collect()),
                                    "matchExpressions": [{"key": "k", "operator": "In", "values": [long(64)]}]}},
                       "target": {"type": "Value", "value": "1"}}}],
                   "behavior": {"scaleUp": {"policies": items(17, |_| json!({"type": "Pods", "value": 1, "periodSeconds": 60}))}}}),
            vec![
                "spec.behavior.scaleUp.policies: Too many: 17: must have at most 16 items",
                "spec.metrics[0].external.metric.selector.matchExpressions[0].values[0]: Too long: may not be more than 63 bytes",
                "spec.metrics[0].external.metric.selector.matchLabels: Too many: 65: must have at most 64 items",
                "spec.scaleTargetRef.kind: Too long: may not be more than 63 bytes",
                "spec.scaleTargetRef.name: Too long: may not be more than 253 bytes",
            ],
        ),
    ]
}

fn cron_and_vpa_size_cases() -> Vec<Case> {
    let long = |n: usize| "x".repeat(n);
    vec![
        (
            CRON,
            cron,
            json!({"excludeDates": items(367, |_| json!("* * * 25 12 *"))}),
            vec!["spec.excludeDates: Too many: 367: must have at most 366 items"],
        ),
        (
            CRON,
            cron,
            json!({"excludeDates": [format!("* * * 25 12 *{}", " ".repeat(250))],
                   "scaleTargetRef": {"apiVersion": long(318), "kind": "Deployment", "name": "web"}}),
            vec![
                "spec.excludeDates[0]: Too long: may not be more than 256 bytes",
                "spec.scaleTargetRef.apiVersion: Too long: may not be more than 317 bytes",
            ],
        ),
        (
            CRON,
            cron,
            json!({"excludeDates": items(366, |_| json!("* * * 25 12 *"))}),
            vec![],
        ),
        (
            CRON,
            cron,
            json!({"jobs": items(101, |i| json!({"name": format!("j{i}"), "schedule": "@daily", "targetSize": 1}))}),
            vec!["spec.jobs: Too many: 101: must have at most 100 items"],
        ),
        (
            VPA,
            vpa,
            json!({"resourcePolicy": {"containerPolicies": items(64, |i| json!({"containerName": format!("c{i}")}))}}),
            vec![],
        ),
        (
            VPA,
            vpa,
            json!({"resourcePolicy": {"containerPolicies": items(65, |i| json!({"containerName": format!("c{i}")}))}}),
            vec!["spec.resourcePolicy.containerPolicies: Too many: 65: must have at most 64 items"],
        ),
        (
            VPA,
            vpa,
            vpa_policy(
                &json!({"minAllowed": resources(16), "maxAllowed": resources(17),
                              "controlledResources": items(17, |_| json!("cpu"))}),
            ),
            vec![
                "spec.resourcePolicy.containerPolicies[0].controlledResources: Too many: 17: must have at most 16 items",
                "spec.resourcePolicy.containerPolicies[0].maxAllowed: Too many: 17: must have at most 16 items",
            ],
        ),
        (
            VPA,
            vpa,
            json!({"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": long(254)},
                   "resourcePolicy": {"containerPolicies": [{"containerName": long(64)}]},
                   "updatePolicy": {"evictionRequirements": items(17, |_| json!({"resources": ["cpu"], "changeRequirement": "TargetHigherThanRequests"}))}}),
            vec![
                "spec.resourcePolicy.containerPolicies[0].containerName: Too long: may not be more than 63 bytes",
                "spec.targetRef.name: Too long: may not be more than 253 bytes",
                "spec.updatePolicy.evictionRequirements: Too many: 17: must have at most 16 items",
            ],
        ),
    ]
}

fn errors_for(file: &str, base: fn() -> Value, patch: &Value) -> Vec<String> {
    let root = schema_of(file);
    let mut obj = base();
    json_patch::merge(&mut obj["spec"], patch);
    validation::prune_and_validate(&root, &mut obj, None)
        .iter()
        .map(FieldError::to_string)
        .collect()
}

#[test]
fn every_case_of_the_repository_crds_is_answered_as_expected() {
    for (file, base, patch, want) in cases() {
        let got = errors_for(file, base, &patch);
        assert_eq!(got, want, "{file} with spec patch {patch}");
    }
}

/// Every `x-kubernetes-validations` rule of the given schema node and below, with the property
/// the node is (the items of a list count as the list), as (tail, rule).
fn rules_of(schema: &Value, tail: &str, out: &mut Vec<(String, Value)>) {
    for rule in schema["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
    {
        out.push((tail.to_string(), rule.clone()));
    }
    for (name, prop) in schema["properties"].as_object().into_iter().flatten() {
        rules_of(prop, name, out);
    }
    if schema["items"].is_object() {
        rules_of(&schema["items"], tail, out);
    }
    // A map's values count as the map (`maxAllowed[cpu]` is refused at `maxAllowed`).
    if schema["additionalProperties"].is_object() {
        rules_of(&schema["additionalProperties"], tail, out);
    }
}

/// Each rule of Plimsoll's own CRDs refuses at least one object of `cases()` at its field, with
/// its message: a rule added without a case fails here.
#[test]
fn every_rule_has_a_case_that_it_refuses() {
    for file in [HPA_PLUS, CRON, VPA] {
        let mut rules = Vec::new();
        rules_of(&schema_of(file), "", &mut rules);
        assert!(!rules.is_empty(), "{file} has rules");
        let refusals: Vec<&str> = cases()
            .into_iter()
            .filter(|c| c.0 == file)
            .flat_map(|c| c.3)
            .collect();
        for (tail, rule) in rules {
            let field = format!("{tail}{}", rule["fieldPath"].as_str().unwrap_or_default());
            let message = rule["message"]
                .as_str()
                .unwrap_or("invalid quantity")
                .to_string();
            let covered = refusals.iter().any(|r| {
                let (path, body) = r.split_once(": ").unwrap();
                // Without list indices and map keys (`minAllowed[cpu]` is at `minAllowed`).
                let unindexed: String = path
                    .split('[')
                    .map(|s| s.split_once(']').map_or(s, |(_, rest)| rest))
                    .collect();
                unindexed.ends_with(&field) && body.contains(&message)
            });
            assert!(covered, "{file}: no case refuses {rule} at {field}");
        }
    }
}

fn with_spec(patch: &Value) -> String {
    let mut obj = hpa_plus();
    json_patch::merge(&mut obj["spec"], patch);
    obj["metadata"]["name"] = json!("bad");
    obj.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_of_an_invalid_hpa_plus_is_refused_naming_the_field() {
    if !kubectl_available() {
        println!(
            "skipping kubectl_apply_of_an_invalid_hpa_plus_is_refused_naming_the_field: kubectl is not installed"
        );
        return;
    }
    let (sim, _) = common::start().await;
    let dir = common::kubectl::scratch_dir("crdval");
    let kc = dir.join("kubeconfig");
    std::fs::write(&kc, sim.kubeconfig()).unwrap();
    let crds = crd_dir();
    let kc2 = kc.clone();
    tokio::task::spawn_blocking(move || {
        let kc = kc2.as_path();
        let (ok, out) = kubectl(
            kc,
            &["apply", "--server-side", "-f", crds.to_str().unwrap()],
            None,
        );
        assert!(ok, "CRDs apply: {out}");
        let cases = [
            (
                json!({"minReplicas": 10, "maxReplicas": 2}),
                "spec.maxReplicas: Invalid value: \"object\": minReplicas must be <= maxReplicas",
            ),
            (
                json!({"tolerance": "-0.1"}),
                "spec.tolerance: Invalid value: \"\": must be in [0, 1)",
            ),
            (
                json!({"metrics": watermark_metric("20", "10")}),
                "spec.metrics[0].external.target.highWatermark: Invalid value: \"object\": must be >= lowWatermark",
            ),
        ];
        for (patch, want) in cases {
            for mode in [&["apply", "-f", "-"][..], &["apply", "--server-side", "-f", "-"]] {
                let (ok, out) = kubectl(kc, mode, Some(&with_spec(&patch)));
                assert!(!ok, "kubectl {mode:?} accepted {patch}: {out}");
                assert!(
                    out.contains(&format!(
                        "The HorizontalPodAutoscalerPlus \"bad\" is invalid: {want}"
                    )),
                    "kubectl {mode:?} of {patch}: {out}"
                );
            }
        }
        let (_, out) = kubectl(kc, &["get", "hpaplus", "bad"], None);
        assert!(out.contains("NotFound"), "nothing stored: {out}");
        let (ok, out) = kubectl(kc, &["apply", "-f", "-"], Some(&with_spec(&json!({}))));
        assert!(ok, "a valid HPA+ applies: {out}");
        // kubectl validates strictly by default: a misspelt field is refused, not dropped.
        let typo = with_spec(&json!({"tolerence": "0.2"}));
        for mode in [&["apply", "-f", "-"][..], &["apply", "--server-side", "-f", "-"]] {
            let (ok, out) = kubectl(kc, mode, Some(&typo));
            assert!(!ok, "kubectl {mode:?} accepted a misspelt field: {out}");
            assert!(
                out.contains("strict decoding error: unknown field \"spec.tolerence\""),
                "kubectl {mode:?}: {out}"
            );
        }
        let (ok, out) = kubectl(kc, &["apply", "--validate=false", "-f", "-"], Some(&typo));
        assert!(ok, "without strict validation the field is pruned: {out}");
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    sim.shutdown().await;
}

/// Issue #28 through kubectl: a VPA whose `maxAllowed` is negative is refused with the rule's
/// message, client-side and server-side apply alike; its valid neighbour applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_of_a_vpa_with_a_negative_max_allowed_is_refused() {
    if !kubectl_available() {
        println!(
            "skipping kubectl_apply_of_a_vpa_with_a_negative_max_allowed_is_refused: kubectl is not installed"
        );
        return;
    }
    let (sim, _) = common::start().await;
    let dir = common::kubectl::scratch_dir("crdval-vpa");
    let kc = dir.join("kubeconfig");
    std::fs::write(&kc, sim.kubeconfig()).unwrap();
    let crds = crd_dir();
    let kc2 = kc.clone();
    tokio::task::spawn_blocking(move || {
        let kc = kc2.as_path();
        let (ok, out) = kubectl(
            kc,
            &["apply", "--server-side", "-f", crds.to_str().unwrap()],
            None,
        );
        assert!(ok, "CRDs apply: {out}");
        let manifest = |max_cpu: &str| {
            let mut obj = vpa();
            obj["metadata"]["name"] = json!("bad");
            json_patch::merge(
                &mut obj["spec"],
                &vpa_policy(&json!({"maxAllowed": {"cpu": max_cpu}})),
            );
            obj.to_string()
        };
        for mode in [&["apply", "-f", "-"][..], &["apply", "--server-side", "-f", "-"]] {
            let (ok, out) = kubectl(kc, mode, Some(&manifest("-1")));
            assert!(!ok, "kubectl {mode:?} accepted maxAllowed -1: {out}");
            assert!(
                out.contains(
                    "The VerticalPodAutoscaler \"bad\" is invalid: spec.resourcePolicy.containerPolicies[0].maxAllowed[cpu]: Invalid value: \"\": must be >= 0"
                ),
                "kubectl {mode:?}: {out}"
            );
        }
        let (_, out) = kubectl(kc, &["get", "vpa", "bad"], None);
        assert!(out.contains("NotFound"), "nothing stored: {out}");
        let (ok, out) = kubectl(kc, &["apply", "-f", "-"], Some(&manifest("2")));
        assert!(ok, "a VPA with maxAllowed 2 applies: {out}");
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    sim.shutdown().await;
}

fn hpa_plus_api(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(
        "autoscaling.plimsoll.dev",
        "v1alpha1",
        "HorizontalPodAutoscalerPlus",
    );
    let ar = ApiResource::from_gvk_with_plural(&gvk, "horizontalpodautoscalerpluses");
    Api::namespaced_with(client.clone(), "default", &ar)
}

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

/// The 422 a kube-rs call got, or a panic naming what it got instead.
fn refusal<T: std::fmt::Debug>(result: kube::Result<T>) -> Box<kube::core::Status> {
    match result {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected a 422, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_writes_are_refused_with_the_invalid_status() {
    let (sim, client) = common::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in plimsoll_core::api::crds() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let api = hpa_plus_api(&client);
    create_is_refused_with_every_cause(&api).await;
    apply_and_patch_are_refused(&api).await;
    metadata_and_schema_errors_are_one_refusal(&api).await;
    update_and_status_are_refused(&api).await;
    unknown_fields_are_pruned(&api).await;
    sim.shutdown().await;
}

async fn create_is_refused_with_every_cause(api: &Api<DynamicObject>) {
    let mut bad = hpa_plus();
    bad["spec"]["minReplicas"] = json!(10);
    bad["spec"]["maxReplicas"] = json!(2);
    let e = refusal(api.create(&PostParams::default(), &object(bad)).await);
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        "HorizontalPodAutoscalerPlus.autoscaling.plimsoll.dev \"web\" is invalid: spec.maxReplicas: Invalid value: \"object\": minReplicas must be <= maxReplicas"
    );
    let details = e.details.as_ref().unwrap();
    assert_eq!(
        (
            details.kind.as_str(),
            details.group.as_str(),
            details.name.as_str()
        ),
        (
            "HorizontalPodAutoscalerPlus",
            "autoscaling.plimsoll.dev",
            "web"
        )
    );
    let causes: Vec<(&str, &str, &str)> = details
        .causes
        .iter()
        .map(|c| (c.reason.as_str(), c.field.as_str(), c.message.as_str()))
        .collect();
    assert_eq!(
        causes,
        [(
            "FieldValueInvalid",
            "spec.maxReplicas",
            "Invalid value: \"object\": minReplicas must be <= maxReplicas"
        )]
    );
}

/// Server-side apply of a new object, then a merge patch of it.
async fn apply_and_patch_are_refused(api: &Api<DynamicObject>) {
    let ssa = PatchParams::apply("crdval").force();
    let mut bad = hpa_plus();
    bad["spec"]["tolerance"] = json!("-1");
    let e = refusal(api.patch("web", &ssa, &Patch::Apply(bad)).await);
    assert_eq!(e.code, 422);
    assert!(
        e.message
            .contains("spec.tolerance: Invalid value: \"\": must be in [0, 1)"),
        "{}",
        e.message
    );
    api.patch("web", &ssa, &Patch::Apply(hpa_plus()))
        .await
        .unwrap();
    let e = refusal(
        api.patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"metrics": watermark_metric("3", "2"), "maxReplicas": 0}}),
            ),
        )
        .await,
    );
    assert_eq!(
        e.message,
        "HorizontalPodAutoscalerPlus.autoscaling.plimsoll.dev \"web\" is invalid: [spec.maxReplicas: Invalid value: 0: spec.maxReplicas in body should be greater than or equal to 1, spec.maxReplicas: Invalid value: \"object\": minReplicas must be <= maxReplicas, spec.metrics[0].external.target.highWatermark: Invalid value: \"object\": must be >= lowWatermark]"
    );
}

/// A write with both a metadata error and a schema error hears of both in one 422, the
/// metadata first (kube-apiserver's custom-resource strategy lists `ValidateObjectMeta`'s
/// errors, then the schema's); a write to the status subresource keeps the stored metadata and
/// is not refused for it.
async fn metadata_and_schema_errors_are_one_refusal(api: &Api<DynamicObject>) {
    let e = refusal(
        api.patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"has space": "x"}},
                                 "spec": {"maxReplicas": 0}})),
        )
        .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    let fields: Vec<&str> = e
        .details
        .as_ref()
        .unwrap()
        .causes
        .iter()
        .map(|c| c.field.as_str())
        .collect();
    assert_eq!(
        fields,
        ["metadata.labels", "spec.maxReplicas", "spec.maxReplicas"],
        "{}",
        e.message
    );
    assert!(
        e.message.starts_with(
            "HorizontalPodAutoscalerPlus.autoscaling.plimsoll.dev \"web\" is invalid: [metadata.labels: Invalid value: \"has space\": name part must consist of"
        ),
        "{}",
        e.message
    );
}

/// Update (PUT) and the status subresource: the rules apply to what is written.
async fn update_and_status_are_refused(api: &Api<DynamicObject>) {
    let mut current = api.get("web").await.unwrap();
    current.data["spec"]["tolerance"] = json!("2");
    let e = refusal(api.replace("web", &PostParams::default(), &current).await);
    assert!(e.message.contains("spec.tolerance"), "{}", e.message);
    let e = refusal(
        api.patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"currentReplicas": "three"}})),
        )
        .await,
    );
    assert_eq!(
        e.message,
        "HorizontalPodAutoscalerPlus.autoscaling.plimsoll.dev \"web\" is invalid: [status.currentReplicas: Invalid value: \"three\": status.currentReplicas in body must be of type integer: \"string\", <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"
    );
    api.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"currentReplicas": 3, "desiredReplicas": 3}})),
    )
    .await
    .unwrap();
}

async fn unknown_fields_are_pruned(api: &Api<DynamicObject>) {
    let strict = PatchParams {
        field_validation: Some(kube::api::ValidationDirective::Strict),
        ..PatchParams::default()
    };
    let refused = refusal(
        api.patch(
            "web",
            &strict,
            &Patch::Merge(json!({"spec": {"colour": "blue", "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}, "shade": 1}}]}})),
        )
        .await,
    );
    assert_eq!(refused.code, 400, "{refused:?}");
    assert!(
        refused.message.ends_with(
            "strict decoding error: unknown field \"spec.colour\", unknown field \"spec.metrics[0].resource.shade\""
        ),
        "{refused:?}"
    );
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"colour": "blue"}})),
    )
    .await
    .unwrap();
    let stored = api.get("web").await.unwrap();
    assert!(
        stored.data["spec"].get("colour").is_none(),
        "{:?}",
        stored.data
    );
}
