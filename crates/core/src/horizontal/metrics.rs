//! Per-metric replica proposals, exactly as upstream's replica calculator computes them
//! (kubernetes `pkg/controller/podautoscaler/replica_calculator.go`).
//!
//! * Pods are grouped first: deleted and failed pods are ignored; pending pods are unready;
//!   pods without a sample are missing; for CPU, a pod is also unready while it has no Ready
//!   condition or start time, while inside the CPU initialization period (5 min) if it is not
//!   ready or its sample was taken less than one metric window after it became ready, and after
//!   that period if it is not ready and never was (it went unready within the initial readiness
//!   delay of 30 s after starting). `readinessDelaySeconds` (WPA) also marks younger pods unready.
//! * The usage ratio is compared with the tolerance; when there are missing pods, or unready pods
//!   and the ratio asks for more, the conservative recount assumes missing pods use 100 % of the
//!   target (scale-down) or 0 % (scale-up) and unready pods 0 %, and gives up (keeps the current
//!   count) when the recount lands inside the tolerance or flips the direction.
//! * Utilization counts the containers and the sidecars (restartable init containers) and
//!   divides by the requests [`super::pod_requests`] picks (pod-level resources, what the
//!   kubelet allocated during an in-place resize).
//! * Object and External `Value` targets scale the ready pod count by the ratio; `AverageValue`
//!   targets divide the total by the per-pod target.
//!
//! Every function is pure: it reads the observation and returns replicas or an error message.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;

use super::history::seconds_between;
use super::observation::{PodPhase, PodSample};
use super::pod_requests::{pod_request, serving_containers};
use super::tolerance::Tolerances;
use crate::api::hpa_plus::UtilizationBase;
use crate::quantity::clamp_i64;

/// Inputs every calculation shares.
#[derive(Clone, Debug)]
pub struct CalcContext<'a> {
    /// Reconcile time.
    pub now: Timestamp,
    /// Replicas of the target (`scale.spec.replicas`).
    pub current_replicas: i32,
    /// `scale.status.replicas` (upstream uses it for per-pod Object/External targets).
    pub status_replicas: i32,
    /// The tolerance band.
    pub tolerances: Tolerances,
    /// CPU samples of pods younger than this are looked at closely (upstream 300 s).
    pub cpu_initialization_period_seconds: i64,
    /// A pod unready this soon after starting counts as never ready (upstream 30 s).
    pub initial_readiness_delay_seconds: i64,
    /// Pods started less than this long ago are unready (WPA `readinessDelaySeconds`, 0 = off).
    pub readiness_delay_seconds: i64,
    /// Requests or limits as the utilization base.
    pub utilization_base: UtilizationBase,
    /// The target's pods.
    pub pods: &'a [PodSample],
}

/// A replica count computed from one metric, with the value it saw.
#[derive(Clone, Debug, PartialEq)]
pub struct Calc {
    /// Proposed replicas.
    pub replicas: i32,
    /// The value compared with the target: percent for utilization, milli-units otherwise.
    pub usage: i64,
    /// The ratio to the target before any recount (1.0 = on target).
    pub ratio: f64,
    /// The ratio was inside the tolerance, so the proposal is the current count.
    pub within_tolerance: bool,
}

/// Pods sorted into upstream's groups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodGroups {
    /// Pods with a sample, counted for the ratio.
    pub ready: usize,
    /// Pending, or (for CPU) not yet trustworthy.
    pub unready: BTreeSet<String>,
    /// Running pods without a sample.
    pub missing: BTreeSet<String>,
    /// Deleted or failed pods.
    pub ignored: BTreeSet<String>,
}

/// Sorts pods as upstream's `groupPods` does. `metrics` holds the pods that have a sample;
/// `cpu` turns on the CPU readiness rules.
pub fn group_pods(ctx: &CalcContext<'_>, metrics: &BTreeMap<String, i64>, cpu: bool) -> PodGroups {
    let mut g = PodGroups::default();
    for pod in ctx.pods {
        if pod.deleting || pod.phase == PodPhase::Failed {
            g.ignored.insert(pod.name.clone());
            continue;
        }
        if pod.phase == PodPhase::Pending || too_young(ctx, pod) {
            g.unready.insert(pod.name.clone());
            continue;
        }
        if !metrics.contains_key(&pod.name) {
            g.missing.insert(pod.name.clone());
            continue;
        }
        if cpu && cpu_unready(ctx, pod) {
            g.unready.insert(pod.name.clone());
            continue;
        }
        g.ready += 1;
    }
    g
}

/// WPA's `readinessDelaySeconds`: pods that started less than this long ago do not count yet.
fn too_young(ctx: &CalcContext<'_>, pod: &PodSample) -> bool {
    ctx.readiness_delay_seconds > 0
        && pod.start_time.is_none_or(|start| {
            seconds_between(start, ctx.now) < ctx.readiness_delay_seconds as f64
        })
}

fn cpu_unready(ctx: &CalcContext<'_>, pod: &PodSample) -> bool {
    let (Some(ready), Some(start)) = (pod.ready, pod.start_time) else {
        return true;
    };
    let transition = pod.ready_transition_time.unwrap_or(start);
    if seconds_between(start, ctx.now) < ctx.cpu_initialization_period_seconds as f64 {
        // Inside the initialization period the sample must cover a full window of readiness.
        let sample_at = pod.metrics_timestamp.unwrap_or(ctx.now);
        !ready || seconds_between(transition, sample_at) < pod.metrics_window_seconds as f64
    } else {
        // Afterwards only a pod that never became ready (it went unready within the initial
        // readiness delay) is left out.
        !ready && seconds_between(start, transition) < ctx.initial_readiness_delay_seconds as f64
    }
}

/// Upstream's `isPodReady`-based count of running, ready pods (Object and External `Value`).
pub fn ready_pod_count(ctx: &CalcContext<'_>) -> Result<i32, String> {
    if ctx.pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    Ok(ctx
        .pods
        .iter()
        .filter(|p| p.phase == PodPhase::Running && p.ready == Some(true) && !too_young(ctx, p))
        .count() as i32)
}

fn ceil_i32(x: f64) -> i32 {
    let c = x.ceil();
    if c >= f64::from(i32::MAX) {
        i32::MAX
    } else if c <= f64::from(i32::MIN) {
        i32::MIN
    } else {
        c as i32
    }
}

/// Per-pod resource usage (milli) for `resource`, summed over the counted containers
/// ([`serving_containers`]: containers and sidecars) `container` selects; a pod with a container
/// lacking a sample has none. A failed fetch fails the metric.
pub fn resource_usage(
    pods: &[PodSample],
    resource: &str,
    container: Option<&str>,
) -> Result<BTreeMap<String, i64>, String> {
    let mut out = BTreeMap::new();
    for pod in pods {
        if let Some(sum) = pod_usage(pod, resource, container)? {
            out.insert(pod.name.clone(), sum);
        }
    }
    Ok(out)
}

/// One pod's entry of [`resource_usage`]: `None` when a selected container lacks a sample.
/// Summing these needs no per-pod map, which is what prediction's load record does at every
/// evaluation.
pub fn pod_usage(
    pod: &PodSample,
    resource: &str,
    container: Option<&str>,
) -> Result<Option<i64>, String> {
    let mut sum = 0i64;
    let mut seen = false;
    let mut missing = false;
    for c in serving_containers(pod).filter(|c| container.is_none_or(|n| n == c.name)) {
        match c.usage.get(resource) {
            Some(Ok(v)) => {
                sum = sum.saturating_add(*v);
                seen = true;
            }
            Some(Err(e)) => return Err(e.clone()),
            None => missing = true,
        }
    }
    Ok((seen && !missing).then_some(sum))
}

/// Per-pod request (or limit, falling back to the request) of `resource`, milli: what
/// [`pod_request`] decides for each pod. One pod without one fails the metric, as upstream.
fn pod_requests(
    ctx: &CalcContext<'_>,
    resource: &str,
    container: Option<&str>,
) -> Result<BTreeMap<String, i64>, String> {
    ctx.pods
        .iter()
        .map(|pod| {
            pod_request(pod, resource, container, ctx.utilization_base)
                .map(|r| (pod.name.clone(), r))
        })
        .collect()
}

/// Utilization (percent, truncated as upstream) of the pods in `metrics` that have requests.
/// In `i128`: 92 TB of memory in use, in milli-bytes times 100, is already past `i64::MAX`,
/// and a tenant's requests or an adapter's values may be anything; a utilization past the
/// `i64` range reads as `i64::MAX`, never as a wrapped (negative) one.
fn utilization(
    metrics: &BTreeMap<String, i64>,
    requests: &BTreeMap<String, i64>,
) -> Result<i64, String> {
    let (mut used, mut requested) = (0i128, 0i128);
    for (pod, v) in metrics {
        if let Some(r) = requests.get(pod) {
            used += i128::from(*v);
            requested += i128::from(*r);
        }
    }
    if requested == 0 {
        return Err("no metrics returned matched known pods".into());
    }
    Ok(clamp_i64(used * 100 / requested))
}

/// A `Utilization` target on a resource (upstream `GetResourceReplicas`).
pub fn resource_utilization(
    ctx: &CalcContext<'_>,
    resource: &str,
    container: Option<&str>,
    target_percent: i32,
) -> Result<Calc, String> {
    let mut metrics = resource_usage(ctx.pods, resource, container)?;
    if ctx.pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    let groups = group_pods(ctx, &metrics, resource == "cpu");
    for name in groups.ignored.iter().chain(&groups.unready) {
        metrics.remove(name);
    }
    if metrics.is_empty() {
        return Err("did not receive metrics for targeted pods (pods might be unready)".into());
    }
    let requests = pod_requests(ctx, resource, container)?;
    let target = i64::from(target_percent.max(1));
    let util = utilization(&metrics, &requests)?;
    let ratio = util as f64 / target as f64;
    let scale_up_with_unready = !groups.unready.is_empty() && ratio > 1.0;
    if !scale_up_with_unready && groups.missing.is_empty() {
        let within = ctx.tolerances.is_within(ratio);
        let replicas = if within {
            ctx.current_replicas
        } else {
            ceil_i32(ratio * groups.ready as f64)
        };
        return Ok(Calc {
            replicas,
            usage: util,
            ratio,
            within_tolerance: within,
        });
    }
    // Conservative recount.
    if ratio < 1.0 {
        let fallback = target.max(100);
        for pod in &groups.missing {
            let request = i128::from(requests.get(pod).copied().unwrap_or(0));
            metrics.insert(pod.clone(), clamp_i64(request * i128::from(fallback) / 100));
        }
    } else if ratio > 1.0 {
        for pod in &groups.missing {
            metrics.insert(pod.clone(), 0);
        }
    }
    if scale_up_with_unready {
        for pod in &groups.unready {
            metrics.insert(pod.clone(), 0);
        }
    }
    let new_util = utilization(&metrics, &requests)?;
    let new_ratio = new_util as f64 / target as f64;
    Ok(recount(ctx, ratio, new_ratio, metrics.len(), util))
}

/// The end of the conservative recount, shared by every pod-based metric.
fn recount(ctx: &CalcContext<'_>, ratio: f64, new_ratio: f64, counted: usize, usage: i64) -> Calc {
    let keep = |within| Calc {
        replicas: ctx.current_replicas,
        usage,
        ratio,
        within_tolerance: within,
    };
    if ctx.tolerances.is_within(new_ratio) {
        return keep(true);
    }
    if (ratio < 1.0 && new_ratio > 1.0) || (ratio > 1.0 && new_ratio < 1.0) {
        return keep(false);
    }
    let replicas = ceil_i32(new_ratio * counted as f64);
    if (new_ratio < 1.0 && replicas > ctx.current_replicas)
        || (new_ratio > 1.0 && replicas < ctx.current_replicas)
    {
        return keep(false);
    }
    Calc {
        replicas,
        usage,
        ratio,
        within_tolerance: false,
    }
}

/// An `AverageValue` target on per-pod values (upstream `calcPlainMetricReplicas`): resource
/// `AverageValue` (with `cpu` rules when `cpu`) and `Pods` metrics. `target` is milli.
pub fn plain_metric(
    ctx: &CalcContext<'_>,
    mut metrics: BTreeMap<String, i64>,
    target: i64,
    cpu: bool,
) -> Result<Calc, String> {
    if ctx.pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    let groups = group_pods(ctx, &metrics, cpu);
    // Samples of pods that are not (or no longer) selected do not count. By a set: a
    // workload may run tens of thousands of pods, and a scan per sample is quadratic in them.
    let selected: BTreeSet<&str> = ctx.pods.iter().map(|p| p.name.as_str()).collect();
    metrics.retain(|name, _| selected.contains(name.as_str()));
    for name in groups.ignored.iter().chain(&groups.unready) {
        metrics.remove(name);
    }
    if metrics.is_empty() {
        return Err("did not receive metrics for targeted pods (pods might be unready)".into());
    }
    let target = target.max(1);
    // The mean of `i64`s is an `i64`: summed in `i128`, it is exact whatever the values.
    let usage_of = |m: &BTreeMap<String, i64>| {
        clamp_i64(m.values().map(|v| i128::from(*v)).sum::<i128>() / m.len().max(1) as i128)
    };
    let usage = usage_of(&metrics);
    let ratio = usage as f64 / target as f64;
    let scale_up_with_unready = !groups.unready.is_empty() && ratio > 1.0;
    if !scale_up_with_unready && groups.missing.is_empty() {
        let within = ctx.tolerances.is_within(ratio);
        let replicas = if within {
            ctx.current_replicas
        } else {
            ceil_i32(ratio * groups.ready as f64)
        };
        return Ok(Calc {
            replicas,
            usage,
            ratio,
            within_tolerance: within,
        });
    }
    for pod in &groups.missing {
        metrics.insert(pod.clone(), if ratio < 1.0 { target } else { 0 });
    }
    if scale_up_with_unready {
        for pod in &groups.unready {
            metrics.insert(pod.clone(), 0);
        }
    }
    let new_ratio = usage_of(&metrics) as f64 / target as f64;
    Ok(recount(ctx, ratio, new_ratio, metrics.len(), usage))
}

/// A `Value` target on an Object or External metric (upstream `getUsageRatioReplicaCount`).
pub fn value_metric(ctx: &CalcContext<'_>, usage: i64, target: i64) -> Result<Calc, String> {
    let ratio = usage as f64 / target.max(1) as f64;
    if ctx.current_replicas != 0 {
        if ctx.tolerances.is_within(ratio) {
            return Ok(Calc {
                replicas: ctx.current_replicas,
                usage,
                ratio,
                within_tolerance: true,
            });
        }
        let ready = ready_pod_count(ctx)?;
        return Ok(Calc {
            replicas: ceil_i32(ratio * f64::from(ready)),
            usage,
            ratio,
            within_tolerance: false,
        });
    }
    // Scaling from zero (HPAScaleToZero): the ratio alone decides.
    Ok(Calc {
        replicas: ceil_i32(ratio),
        usage,
        ratio,
        within_tolerance: false,
    })
}

/// An `AverageValue` target on an Object or External metric (upstream
/// `GetObjectPerPodMetricReplicas` / `GetExternalPerPodMetricReplicas`). The reported usage is
/// per replica.
pub fn per_pod_metric(ctx: &CalcContext<'_>, usage: i64, target_per_pod: i64) -> Calc {
    let target = target_per_pod.max(1) as f64;
    let status = ctx.status_replicas;
    let ratio = usage as f64 / (target * f64::from(status));
    let within = ctx.tolerances.is_within(ratio);
    let replicas = if within {
        status
    } else {
        ceil_i32(usage as f64 / target)
    };
    let per_replica = if status > 0 {
        ceil_i32(usage as f64 / f64::from(status)).into()
    } else {
        usage
    };
    Calc {
        replicas,
        usage: per_replica,
        ratio,
        within_tolerance: within,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::horizontal::observation::ContainerSample;

    fn now() -> Timestamp {
        "2026-03-01T12:00:00Z".parse().unwrap()
    }

    fn ctx(pods: &[PodSample]) -> CalcContext<'_> {
        CalcContext {
            now: now(),
            current_replicas: 2,
            status_replicas: 2,
            tolerances: Tolerances::both(0.1),
            cpu_initialization_period_seconds: 300,
            initial_readiness_delay_seconds: 30,
            readiness_delay_seconds: 0,
            utilization_base: UtilizationBase::Requests,
            pods,
        }
    }

    fn container(name: &str, request: i64, usage: i64) -> ContainerSample {
        ContainerSample {
            name: name.into(),
            requests: [("cpu".to_owned(), request)].into(),
            usage: [("cpu".to_owned(), Ok(usage))].into(),
            ..ContainerSample::default()
        }
    }

    /// A pod running 10 minutes with an app container, a sidecar and a finished init container.
    fn pod(name: &str) -> PodSample {
        let start = now() - jiff::SignedDuration::from_secs(600);
        PodSample {
            name: name.into(),
            start_time: Some(start),
            ready_transition_time: Some(start),
            containers: vec![container("app", 400, 600)],
            init_containers: vec![
                ContainerSample {
                    sidecar: true,
                    ..container("proxy", 100, 150)
                },
                // Completed: no usage sample, and its request must not count either.
                ContainerSample {
                    name: "migrate".into(),
                    requests: [("cpu".to_owned(), 1000)].into(),
                    ..ContainerSample::default()
                },
            ],
            ..PodSample::default()
        }
    }

    #[test]
    fn sidecars_count_toward_usage_and_requests() {
        let pods = [pod("a"), pod("b")];
        let c = resource_utilization(&ctx(&pods), "cpu", None, 100).unwrap();
        // (600 + 150) / (400 + 100) = 150 %: 2 pods → 3.
        assert_eq!((c.usage, c.replicas), (150, 3));
        let proxy = resource_utilization(&ctx(&pods), "cpu", Some("proxy"), 100).unwrap();
        assert_eq!(
            proxy.usage, 150,
            "a ContainerResource metric on the sidecar"
        );
    }

    #[test]
    fn an_in_place_resize_is_measured_against_the_running_requests() {
        // The spec already asks for 1600m (4×), the container still runs with 400m.
        let resized = |name: &str| {
            let mut p = pod(name);
            p.containers[0].requests.insert("cpu".into(), 1600);
            p.containers[0].actual_requests = Some([("cpu".to_owned(), 400)].into());
            p
        };
        let pods = [resized("a"), resized("b")];
        let c = resource_utilization(&ctx(&pods), "cpu", None, 100).unwrap();
        assert_eq!(
            (c.usage, c.replicas),
            (150, 3),
            "same as before the resize; against the spec it would be 750/1700 = 44 % and scale down"
        );
    }

    /// A running, ready pod started 10 minutes ago with one container: `request` of CPU and
    /// `usage` (no sample when `None`).
    fn plain_pod(name: &str, request: i64, usage: Option<i64>) -> PodSample {
        let start = now() - jiff::SignedDuration::from_secs(600);
        let mut c = container("app", request, 0);
        c.usage = usage
            .map(|u| [("cpu".to_owned(), Ok(u))].into())
            .unwrap_or_default();
        PodSample {
            name: name.into(),
            start_time: Some(start),
            ready_transition_time: Some(start),
            containers: vec![c],
            ..PodSample::default()
        }
    }

    #[test]
    fn utilization_of_values_past_i64_reads_as_enormous_not_negative() {
        let map = |a: i64, b: i64| BTreeMap::from([("a".to_owned(), a), ("b".to_owned(), b)]);
        // 92 TB of memory in use across a workload is 9.2e16 milli-bytes: times 100 that is
        // past i64::MAX, yet the percentage itself is ordinary.
        let big = 100_000_000_000_000_000;
        assert_eq!(utilization(&map(big, big), &map(2 * big, 2 * big)), Ok(50));
        let in_range = utilization(&map(i64::MAX / 200, 0), &map(1, 1)).unwrap();
        let absurd = utilization(&map(i64::MAX, i64::MAX), &map(1, 1)).unwrap();
        assert_eq!(absurd, i64::MAX);
        assert!(absurd >= in_range, "{absurd} < {in_range}");
        // Requests that sum past i64::MAX divide exactly, not by a wrapped negative.
        assert_eq!(
            utilization(&map(i64::MAX, i64::MAX), &map(i64::MAX, i64::MAX)),
            Ok(100)
        );
    }

    #[test]
    fn containers_using_more_than_i64_in_all_scale_to_the_most_replicas() {
        let mut p = pod("a");
        p.containers[0].usage.insert("cpu".into(), Ok(i64::MAX));
        p.init_containers[0]
            .usage
            .insert("cpu".into(), Ok(i64::MAX));
        let pods = [p];
        assert_eq!(
            resource_usage(&pods, "cpu", None).unwrap()["a"],
            i64::MAX,
            "the pod's usage saturates"
        );
        let c = resource_utilization(&ctx(&pods), "cpu", None, 100).unwrap();
        // i64::MAX over the 500m the app and the sidecar request.
        assert_eq!((c.usage, c.replicas), (i64::MAX / 5, i32::MAX));
    }

    #[test]
    fn a_missing_pods_absurd_request_is_recounted_without_overflow() {
        // b has no sample: the scale-down recount assumes it uses 150 % of its request, and
        // the request times 150 is past i64::MAX.
        let request = i64::MAX / 4;
        let pods = [
            plain_pod("a", request, Some(1000)),
            plain_pod("b", request, None),
        ];
        let c = resource_utilization(&ctx(&pods), "cpu", None, 150).unwrap();
        assert_eq!(c.usage, 0);
        // (1000 + 1.5 × MAX/4) / (2 × MAX/4) = 75 % of a 150 % target: one replica of two.
        assert_eq!(c.replicas, 1);
    }

    #[test]
    fn per_pod_values_summing_past_i64_average_exactly() {
        let pods = [plain_pod("a", 100, None), plain_pod("b", 100, None)];
        let metrics = BTreeMap::from([("a".to_owned(), i64::MAX), ("b".to_owned(), i64::MAX)]);
        let c = plain_metric(&ctx(&pods), metrics, 1000, false).unwrap();
        assert_eq!((c.usage, c.replicas), (i64::MAX, i32::MAX));
        // With c missing (counted as 0 on the way up), the recount averages three values.
        let pods = [
            plain_pod("a", 100, None),
            plain_pod("b", 100, None),
            plain_pod("c", 100, None),
        ];
        let metrics = BTreeMap::from([("a".to_owned(), i64::MAX), ("b".to_owned(), i64::MAX)]);
        let c = plain_metric(&ctx(&pods), metrics, 1000, false).unwrap();
        assert_eq!((c.usage, c.replicas), (i64::MAX, i32::MAX));
    }

    #[test]
    fn pod_level_requests_replace_the_containers() {
        let mut p = pod("a");
        p.pod_requests = [("cpu".to_owned(), 1500)].into();
        let pods = [p];
        let c = resource_utilization(&ctx(&pods), "cpu", None, 100).unwrap();
        assert_eq!(c.usage, 50, "750 / 1500");
    }
}
