//! What the demo installs: the Plimsoll CRDs, a sample Deployment `web` with its three
//! autoscalers, and the day-shaped load that drives it.
//!
//! The autoscalers are written as a user would write them for a real day: the HPA+ leaves its
//! sync period and scale-down stabilization to hpa-plus' flags (which the demo compresses with the
//! day), the CronHPA raises the HPA+'s minimum at 07:00 and lowers it at 19:00, and the VPA
//! manages memory only (`InPlaceOrRecreate`), so CPU requests, the HPA+'s yardstick, never move.

use serde_json::{Value, json};

use crate::control::Caller;
use crate::demo::timing::{DAY_SECONDS, Timing};
use crate::error::Result;
use crate::workload::{LoadProfile, LoadSpec};

/// The sample workload's name (Deployment, HPA+, VPA).
pub const WORKLOAD: &str = "web";

/// The HPA+'s CPU target, percent of requests.
pub const TARGET_PERCENT: i64 = 60;

/// The HPA+'s own minimum, outside the cron window.
pub const MIN_REPLICAS: i64 = 2;

/// The CronHPA's jobs: (name, simulated hour of the day, the HPA+ minimum it sets).
pub const CRON_JOBS: [(&str, f64, i64); 2] = [("before-peak", 7.0, 10), ("after-peak", 19.0, 2)];

/// The load's shape over the simulated day.
#[derive(Debug, Clone, Copy)]
pub struct DayLoad {
    /// Load at the midday peak, units/s (1 unit = 1 millicore).
    pub peak: f64,
    /// Load at the midnight trough.
    pub trough: f64,
}

fn deployment(ns: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": WORKLOAD, "namespace": ns, "labels": {"app": WORKLOAD}},
        "spec": {"replicas": MIN_REPLICAS, "selector": {"matchLabels": {"app": WORKLOAD}},
            "template": {"metadata": {"labels": {"app": WORKLOAD}}, "spec": {"containers": [{"name": WORKLOAD, "image": "registry.example/web:1",
                "resources": {"requests": {"cpu": "200m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}}]}}}})
}

/// The HPA+: CPU at [`TARGET_PERCENT`] of requests, nothing else. Its period and stabilization
/// come from hpa-plus' `--sync-period` and `--downscale-stabilization`, which the demo scales.
fn hpa_plus(ns: &str) -> Value {
    json!({"apiVersion": "autoscaling.plimsoll.dev/v1alpha1", "kind": "HorizontalPodAutoscalerPlus",
        "metadata": {"name": WORKLOAD, "namespace": ns},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": WORKLOAD},
            "minReplicas": MIN_REPLICAS, "maxReplicas": 20,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": TARGET_PERCENT}}}]}})
}

/// A 6-field cron schedule (with seconds, UTC) firing once at `t`.
fn cron_at(t: jiff::Timestamp) -> String {
    let z = t.to_zoned(jiff::tz::TimeZone::UTC);
    format!(
        "{} {} {} {} {} *",
        z.second(),
        z.minute(),
        z.hour(),
        z.day(),
        z.month()
    )
}

/// The CronHPA: one run-once job per [`CRON_JOBS`] entry, at that hour of the compressed day
/// starting at `midnight`.
fn cron_hpa(ns: &str, timing: &Timing, midnight: jiff::Timestamp) -> Value {
    let jobs: Vec<Value> = CRON_JOBS
        .iter()
        .map(|(name, hour, size)| {
            let real = hour * 3600.0 / timing.compression;
            let at = midnight + jiff::SignedDuration::from_secs_f64(real);
            json!({"name": name, "schedule": cron_at(at), "targetSize": size, "runOnce": true})
        })
        .collect();
    json!({"apiVersion": "autoscaling.plimsoll.dev/v1alpha1", "kind": "CronHorizontalPodAutoscaler",
        "metadata": {"name": "web-peak", "namespace": ns},
        "spec": {"scaleTargetRef": {"apiVersion": "autoscaling.plimsoll.dev/v1alpha1", "kind": "HorizontalPodAutoscalerPlus", "name": WORKLOAD},
            "jobs": jobs}})
}

/// The VPA: memory only, `InPlaceOrRecreate`. vpa-admission gives new pods the recommended
/// memory; vpa-updater resizes running pods whose memory drifted from it through `pods/resize`.
fn vpa(ns: &str) -> Value {
    json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": WORKLOAD, "namespace": ns},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": WORKLOAD},
            "updatePolicy": {"updateMode": "InPlaceOrRecreate"}, "recommenders": [{"name": "plimsoll"}],
            "resourcePolicy": {"containerPolicies": [{"containerName": "*", "controlledResources": ["memory"]}]}}})
}

/// Installs every Plimsoll CRD, generated from the Rust types (so the demo runs from any
/// directory); returns how many were created.
pub async fn install_crds(cluster: &crate::Cluster) -> usize {
    let mut n = 0;
    for crd in plimsoll_core::api::crds() {
        let Ok(doc) = serde_json::to_value(&crd) else {
            continue;
        };
        if cluster
            .create_manifest(doc, &Caller::controller("demo"))
            .await
            .is_ok()
        {
            n += 1;
        }
    }
    n
}

/// Creates the namespaces, the workload, its autoscalers and the day's load, which starts at
/// midnight now.
pub async fn install(
    sim: &crate::SimHandle,
    ns: &str,
    system_ns: &str,
    timing: &Timing,
    load: DayLoad,
) -> Result<()> {
    let cluster = &sim.cluster;
    let caller = Caller::controller("demo");
    for name in [ns, system_ns] {
        cluster
            .create_manifest(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
                &caller,
            )
            .await?;
    }
    cluster.create_manifest(deployment(ns), &caller).await?;
    cluster.create_manifest(hpa_plus(ns), &caller).await?;
    cluster.create_manifest(vpa(ns), &caller).await?;
    let midnight = jiff::Timestamp::now();
    cluster
        .create_manifest(cron_hpa(ns, timing, midnight), &caller)
        .await?;
    // The sim's clock is the real one: the day lasts DAY / compression seconds of it.
    let day = DAY_SECONDS / timing.compression;
    sim.set_load(
        ns,
        "deployments",
        WORKLOAD,
        LoadSpec {
            // Trough at midnight, peak at noon.
            profile: LoadProfile::Sine {
                base: f64::midpoint(load.peak, load.trough),
                amplitude: (load.peak - load.trough) / 2.0,
                period_seconds: day,
                phase_seconds: day * 0.75,
            },
            cpu_millis_per_unit: 1.0,
            cpu_base_millis: 5.0,
            memory_bytes_per_unit: 64.0 * 1024.0,
            noise: 0.05,
            seed: 7,
            ..LoadSpec::default()
        },
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cron_jobs_fire_at_their_hour_of_the_compressed_day() {
        let timing = Timing::new(Some(std::time::Duration::from_secs(240)), None).unwrap();
        let midnight: jiff::Timestamp = "2026-03-01T10:00:00Z".parse().unwrap();
        let c = cron_hpa("demo", &timing, midnight);
        // 07:00 of a day compressed into 240 s is 70 s in; 19:00 is 190 s in.
        assert_eq!(c["spec"]["jobs"][0]["schedule"], "10 1 10 1 3 *");
        assert_eq!(c["spec"]["jobs"][0]["targetSize"], 10);
        assert_eq!(c["spec"]["jobs"][1]["schedule"], "10 3 10 1 3 *");
    }

    #[test]
    fn the_hpa_leaves_periods_to_the_flags() {
        let h = hpa_plus("demo");
        assert!(h["spec"].get("syncPeriodSeconds").is_none());
        assert!(h["spec"].get("behavior").is_none());
        assert_eq!(
            vpa("demo")["spec"]["updatePolicy"]["updateMode"],
            "InPlaceOrRecreate"
        );
    }
}
