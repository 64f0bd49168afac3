//! The load model: each workload's offered load ([`LoadSpec`]) over time, split across its Ready
//! pods into per-pod CPU, memory, a custom metric, a per-object metric and an optional external
//! queue metric; the latest samples ([`Model`]) are what the metrics APIs serve. A container
//! whose memory passes its limit is handed to the kubelet to be `OOMKilled`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Ctx, deleting, key, kubelet, pod_ready, s};
use crate::random::{fnv1a, mix};
use crate::values::parse_quantity;

/// Offered load over time; `t` is sim seconds since the load was set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum LoadProfile {
    /// A constant load.
    Constant {
        /// Load (units per second, e.g. requests/s).
        value: f64,
    },
    /// Piecewise constant: each step's value holds from its `at` until the next step.
    Steps {
        /// The steps, in time order.
        steps: Vec<LoadStep>,
    },
    /// `base + amplitude · sin(2π (t + phaseSeconds) / periodSeconds)`, floored at 0.
    #[serde(rename_all = "camelCase")]
    Sine {
        /// Mean load.
        base: f64,
        /// Amplitude.
        amplitude: f64,
        /// Period, sim seconds.
        period_seconds: f64,
        /// Phase shift, sim seconds.
        #[serde(default)]
        phase_seconds: f64,
    },
    /// A trace, linearly interpolated: CSV text with lines `t,value` (a header line and
    /// `#` comments are skipped). Held at the last value after the end; `repeat` loops it.
    Csv {
        /// The CSV text.
        csv: String,
        /// Loop the trace.
        #[serde(default)]
        repeat: bool,
    },
}

impl Default for LoadProfile {
    fn default() -> Self {
        Self::Constant { value: 0.0 }
    }
}

/// One step of a `Steps` profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadStep {
    /// Sim seconds since the load was set.
    pub at: f64,
    /// Load from then on.
    pub value: f64,
}

fn parse_csv(csv: &str) -> Vec<(f64, f64)> {
    csv.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let (a, b) = l.split_once(',')?;
            Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
        })
        .collect()
}

impl LoadProfile {
    /// The load at `t` sim seconds.
    pub fn at(&self, t: f64) -> f64 {
        let v = match self {
            Self::Constant { value } => *value,
            Self::Steps { steps } => steps
                .iter()
                .take_while(|s| s.at <= t)
                .last()
                .map_or(0.0, |s| s.value),
            Self::Sine {
                base,
                amplitude,
                period_seconds,
                phase_seconds,
            } => {
                base + amplitude
                    * (std::f64::consts::TAU * (t + phase_seconds) / period_seconds.max(1e-9)).sin()
            }
            Self::Csv { csv, repeat } => {
                let pts = parse_csv(csv);
                let Some(last) = pts.last() else { return 0.0 };
                let t = if *repeat && last.0 > 0.0 {
                    t.rem_euclid(last.0)
                } else {
                    t
                };
                match pts.iter().position(|p| p.0 > t) {
                    None => last.1,
                    Some(0) => pts[0].1,
                    Some(i) => {
                        let (a, b) = (pts[i - 1], pts[i]);
                        a.1 + (b.1 - a.1) * (t - a.0) / (b.0 - a.0)
                    }
                }
            }
        };
        v.max(0.0)
    }
}

/// How a workload's load turns into metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LoadSpec {
    /// The offered load over time.
    pub profile: LoadProfile,
    /// CPU per unit of load per second, millicores (default 1).
    pub cpu_millis_per_unit: f64,
    /// Idle CPU of a pod, millicores (default 5).
    pub cpu_base_millis: f64,
    /// Idle memory of a pod, bytes (default 64 MiB).
    pub memory_base_bytes: f64,
    /// Memory per unit of load, bytes (default 0).
    pub memory_bytes_per_unit: f64,
    /// Relative noise on CPU: each sample is scaled by a factor uniform in [1-noise, 1+noise].
    pub noise: f64,
    /// Noise seed.
    pub seed: u64,
    /// Name of the per-pod custom metric carrying each pod's share (default `requests_per_second`).
    pub custom_metric: String,
    /// Load a Ready pod can serve per second; with `queueMetric`, the shortfall accumulates.
    pub capacity_per_pod: Option<f64>,
    /// External metric name of the backlog (e.g. `queue_messages`).
    pub queue_metric: Option<String>,
}

impl Default for LoadSpec {
    fn default() -> Self {
        Self {
            profile: LoadProfile::default(),
            cpu_millis_per_unit: 1.0,
            cpu_base_millis: 5.0,
            memory_base_bytes: 64.0 * 1024.0 * 1024.0,
            memory_bytes_per_unit: 0.0,
            noise: 0.0,
            seed: 0,
            custom_metric: "requests_per_second".into(),
            capacity_per_pod: None,
            queue_metric: None,
        }
    }
}

/// A container's usage sample.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerUsage {
    /// Container name.
    pub name: String,
    /// CPU, millicores.
    pub cpu_millis: f64,
    /// Working-set memory, bytes.
    pub memory_bytes: f64,
}

/// A pod's usage sample and custom metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct PodUsage {
    /// Per container.
    pub containers: Vec<ContainerUsage>,
    /// Per-pod custom metrics.
    pub custom: BTreeMap<String, f64>,
    /// Sample time (sim).
    pub timestamp: Timestamp,
    /// The node the pod runs on.
    pub node: String,
}

/// (namespace, resource plural, name).
pub type WorkloadKey = (String, String, String);

#[derive(Debug, Default)]
struct ModelState {
    loads: HashMap<WorkloadKey, (LoadSpec, f64)>,
    current_load: HashMap<WorkloadKey, f64>,
    pods: HashMap<(String, String), PodUsage>,
    external: HashMap<(String, String), f64>,
    objects: HashMap<(String, String, String, String), f64>,
    last_t: Option<f64>,
    tick: u64,
    /// The window the metrics APIs report; `None` is metrics-server's 30 s.
    metrics_window: Option<Duration>,
}

/// Load settings and the latest samples, read by the metrics APIs.
#[derive(Debug, Default)]
pub struct Model {
    state: Mutex<ModelState>,
}

impl Model {
    fn lock(&self) -> MutexGuard<'_, ModelState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts one more tick of the workload task and returns the count.
    pub(super) fn next_tick(&self) -> u64 {
        let mut st = self.lock();
        st.tick += 1;
        st.tick
    }

    /// Sets a workload's load (`kind` = `deployments` or `statefulsets`), starting at `now`
    /// sim seconds.
    pub fn set_load(&self, ns: &str, kind: &str, name: &str, spec: LoadSpec, now: f64) {
        self.lock()
            .loads
            .insert((ns.into(), kind.into(), name.into()), (spec, now));
    }

    /// Sets the sampling window the metrics APIs report with each pod sample (default 30 s, as
    /// metrics-server). A run that compresses time shrinks it with the rest of the clock, or a
    /// consumer that waits a window of readiness before trusting a sample waits far too long.
    pub fn set_metrics_window(&self, window: Duration) {
        self.lock().metrics_window = Some(window);
    }

    /// The sampling window reported with each pod sample.
    pub fn metrics_window(&self) -> Duration {
        self.lock()
            .metrics_window
            .unwrap_or(Duration::from_secs(30))
    }

    /// Sets an external metric to a fixed value.
    pub fn set_external(&self, ns: &str, metric: &str, value: f64) {
        self.lock()
            .external
            .insert((ns.into(), metric.into()), value);
    }

    /// Sets an object metric (`kind` is the resource plural, e.g. `ingresses`).
    pub fn set_object_metric(&self, ns: &str, kind: &str, name: &str, metric: &str, value: f64) {
        self.lock()
            .objects
            .insert((ns.into(), kind.into(), name.into(), metric.into()), value);
    }

    /// The latest load of a workload.
    pub fn current_load(&self, ns: &str, kind: &str, name: &str) -> Option<f64> {
        self.lock()
            .current_load
            .get(&(ns.into(), kind.into(), name.into()))
            .copied()
    }

    /// Sets a pod's sample as the metrics APIs serve it, for a run with the workload model off
    /// (`SimConfig::workload_model = false`): nothing else samples pods then, so a benchmark
    /// can serve fixed usage for thousands of pods without the model's per-tick pass over every
    /// workload. With the model on, its next tick replaces every sample.
    pub fn set_pod_usage(&self, ns: &str, pod: &str, usage: PodUsage) {
        self.lock().pods.insert((ns.into(), pod.into()), usage);
    }

    /// The latest sample of a pod.
    pub fn pod_usage(&self, ns: &str, pod: &str) -> Option<PodUsage> {
        self.lock().pods.get(&(ns.into(), pod.into())).cloned()
    }

    /// Every pod sample in a namespace (all namespaces when `None`).
    pub fn pods_in(&self, ns: Option<&str>) -> Vec<((String, String), PodUsage)> {
        self.lock()
            .pods
            .iter()
            .filter(|((n, _), _)| ns.is_none_or(|x| x == n))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// An external metric's value.
    pub fn external(&self, ns: &str, metric: &str) -> Option<f64> {
        self.lock()
            .external
            .get(&(ns.into(), metric.into()))
            .copied()
    }

    /// An object metric's value.
    pub fn object_metric(&self, ns: &str, kind: &str, name: &str, metric: &str) -> Option<f64> {
        self.lock()
            .objects
            .get(&(ns.into(), kind.into(), name.into(), metric.into()))
            .copied()
    }

    /// Names of the custom metrics currently served (for discovery).
    pub fn custom_metric_names(&self) -> Vec<String> {
        let st = self.lock();
        let mut names: Vec<String> = st
            .loads
            .values()
            .map(|(s, _)| s.custom_metric.clone())
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

/// Resolves a pod to its workload: (namespace, plural, name) of its Deployment or `StatefulSet`.
fn workload_of(pod: &Value, rs_owner: &HashMap<String, (String, String)>) -> Option<WorkloadKey> {
    let ns = s(pod, "/metadata/namespace").to_string();
    let r = pod
        .pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?;
    match r.get("kind").and_then(Value::as_str)? {
        "StatefulSet" => Some((
            ns,
            "statefulsets".into(),
            r.get("name")?.as_str()?.to_string(),
        )),
        "ReplicaSet" => {
            let uid = r.get("uid")?.as_str()?;
            match rs_owner.get(uid) {
                Some((kind, name)) if kind == "Deployment" => {
                    Some((ns, "deployments".into(), name.clone()))
                }
                _ => Some((
                    ns,
                    "replicasets".into(),
                    r.get("name")?.as_str()?.to_string(),
                )),
            }
        }
        _ => None,
    }
}

fn container_limit(pod: &Value, container: &str) -> Option<f64> {
    pod.pointer("/spec/containers")?
        .as_array()?
        .iter()
        .find(|c| c["name"] == container)?
        .pointer("/resources/limits/memory")?
        .as_str()
        .and_then(parse_quantity)
}

/// A Running pod and the workload it belongs to (none for a bare pod).
type RunningPod<'p> = (&'p Arc<Value>, Option<WorkloadKey>);

/// Per workload, its Ready pods that are not terminating.
type ReadyCounts = HashMap<WorkloadKey, usize>;

/// The Running pods with the workload each belongs to, and each workload's count of Ready pods
/// that are not terminating (its load is split among those).
fn running_pods<'p>(
    pods: &'p [Arc<Value>],
    rss: &[Arc<Value>],
) -> (Vec<RunningPod<'p>>, ReadyCounts) {
    let rs_owner: HashMap<String, (String, String)> = rss
        .iter()
        .filter_map(|r| {
            let o = r
                .pointer("/metadata/ownerReferences")?
                .as_array()?
                .first()?;
            Some((
                s(r, "/metadata/uid").to_string(),
                (s(o, "/kind").to_string(), s(o, "/name").to_string()),
            ))
        })
        .collect();
    let running: Vec<RunningPod<'p>> = pods
        .iter()
        .filter(|p| s(p, "/status/phase") == "Running")
        .map(|p| (p, workload_of(p, &rs_owner)))
        .collect();
    let mut ready_count = ReadyCounts::new();
    for (p, w) in &running {
        if let Some(w) = w
            && pod_ready(p)
            && !deleting(p)
        {
            *ready_count.entry(w.clone()).or_default() += 1;
        }
    }
    (running, ready_count)
}

impl Model {
    /// Publishes a pass's samples: pod usage, each workload's load as its object metric, and the
    /// queue backlog, which grows by the load the Ready pods could not serve over `dt` seconds.
    fn publish(
        &self,
        samples: HashMap<(String, String), PodUsage>,
        loads: &HashMap<WorkloadKey, (LoadSpec, f64)>,
        current_load: HashMap<WorkloadKey, f64>,
        ready_count: &HashMap<WorkloadKey, usize>,
        dt: f64,
    ) {
        let mut st = self.lock();
        st.pods = samples;
        for (w, (spec, _)) in loads {
            let total = current_load.get(w).copied().unwrap_or(0.0);
            st.objects.insert(
                (
                    w.0.clone(),
                    w.1.clone(),
                    w.2.clone(),
                    spec.custom_metric.clone(),
                ),
                total,
            );
            if let (Some(cap), Some(metric)) = (spec.capacity_per_pod, &spec.queue_metric) {
                let capacity = cap * ready_count.get(w).copied().unwrap_or(0) as f64;
                let q = st
                    .external
                    .entry((w.0.clone(), metric.clone()))
                    .or_insert(0.0);
                *q = (*q + (total - capacity) * dt).max(0.0);
            }
        }
        st.current_load = current_load;
    }
}

/// One pass of the load model: samples every Running pod, publishes the samples and the
/// object and queue metrics, and OOM-kills containers over their memory limit.
pub(super) async fn run(ctx: &Ctx<'_>) {
    let cluster = ctx.cluster;
    let t = cluster.clock.elapsed_secs();
    let (pods, _) = cluster.store.list(&key("", "pods"), None);
    let (rss, _) = cluster.store.list(&key("apps", "replicasets"), None);
    let (running, ready_count) = running_pods(&pods, &rss);
    let (loads, dt, tick) = {
        let mut st = cluster.model.lock();
        let dt = st.last_t.map_or(0.0, |l| (t - l).max(0.0));
        st.last_t = Some(t);
        (st.loads.clone(), dt, st.tick)
    };
    let default_spec = LoadSpec::default();
    let mut samples: HashMap<(String, String), PodUsage> = HashMap::new();
    let mut ooms: Vec<(Arc<Value>, String)> = Vec::new();
    let mut current_load: HashMap<WorkloadKey, f64> = HashMap::new();
    for (w, (spec, start)) in &loads {
        current_load.insert(w.clone(), spec.profile.at(t - start));
    }
    for (p, w) in &running {
        let (spec, total) = match w.as_ref().and_then(|w| {
            loads
                .get(w)
                .map(|(s, _)| (s, current_load.get(w).copied().unwrap_or(0.0)))
        }) {
            Some(x) => x,
            None => (&default_spec, 0.0),
        };
        let ready_n = w
            .as_ref()
            .and_then(|w| ready_count.get(w))
            .copied()
            .unwrap_or(0);
        let share = if pod_ready(p) && !deleting(p) && ready_n > 0 {
            total / ready_n as f64
        } else {
            0.0
        };
        let name = s(p, "/metadata/name").to_string();
        let noise = if spec.noise > 0.0 {
            let u = (mix(spec.seed ^ fnv1a(name.as_bytes()) ^ tick.wrapping_mul(0x9E37)) >> 11)
                as f64
                / (1u64 << 53) as f64;
            1.0 + spec.noise * (2.0 * u - 1.0)
        } else {
            1.0
        };
        let cpu = (spec.cpu_base_millis + share * spec.cpu_millis_per_unit) * noise;
        let mem = spec.memory_base_bytes + share * spec.memory_bytes_per_unit;
        let containers: Vec<String> = p
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|c| s(c, "/name").to_string()).collect())
            .unwrap_or_default();
        let n = containers.len().max(1) as f64;
        let usage: Vec<ContainerUsage> = containers
            .iter()
            .map(|c| ContainerUsage {
                name: c.clone(),
                cpu_millis: cpu / n,
                memory_bytes: mem / n,
            })
            .collect();
        for u in &usage {
            if container_limit(p, &u.name).is_some_and(|l| u.memory_bytes > l) {
                ooms.push(((*p).clone(), u.name.clone()));
            }
        }
        let mut custom = BTreeMap::new();
        custom.insert(spec.custom_metric.clone(), share);
        samples.insert(
            (s(p, "/metadata/namespace").to_string(), name),
            PodUsage {
                containers: usage,
                custom,
                timestamp: ctx.now,
                node: s(p, "/spec/nodeName").to_string(),
            },
        );
    }
    cluster
        .model
        .publish(samples, &loads, current_load, &ready_count, dt);
    for (pod, container) in ooms {
        kubelet::oom_kill(ctx, &pod, &container).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn profiles() {
        assert!((LoadProfile::Constant { value: 5.0 }.at(100.0) - 5.0).abs() < 1e-9);
        let steps = LoadProfile::Steps {
            steps: vec![
                LoadStep {
                    at: 0.0,
                    value: 1.0,
                },
                LoadStep {
                    at: 10.0,
                    value: 3.0,
                },
            ],
        };
        assert!((steps.at(5.0) - 1.0).abs() < 1e-9);
        assert!((steps.at(10.0) - 3.0).abs() < 1e-9);
        let sine = LoadProfile::Sine {
            base: 10.0,
            amplitude: 5.0,
            period_seconds: 40.0,
            phase_seconds: 0.0,
        };
        assert!((sine.at(10.0) - 15.0).abs() < 1e-9);
        let csv = LoadProfile::Csv {
            csv: "t,value\n0,0\n10,100\n".into(),
            repeat: false,
        };
        assert!((csv.at(5.0) - 50.0).abs() < 1e-9);
        assert!((csv.at(50.0) - 100.0).abs() < 1e-9);
    }

    #[test]
    fn load_spec_defaults_from_json() {
        let spec: LoadSpec =
            serde_json::from_value(json!({"profile": {"type": "constant", "value": 100.0}}))
                .unwrap();
        assert_eq!(spec.custom_metric, "requests_per_second");
        assert!((spec.cpu_millis_per_unit - 1.0).abs() < 1e-9);
    }
}
