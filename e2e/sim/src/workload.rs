//! The workload model: the controllers and kubelet a real cluster would run, and the load that
//! drives the metrics APIs. One task ticks every `SimConfig::tick` of sim time:
//!
//! - scheduler + kubelet: unscheduled pods are bound round-robin to the sim's nodes; a pod is
//!   Running `pod_start` after creation and Ready `pod_ready` later; a terminating pod is gone
//!   `min(pod_termination, grace period)` after its deletion (finalizers permitting);
//! - `ReplicaSet`, Deployment (new `ReplicaSet` per template, `RollingUpdate` with maxSurge /
//!   maxUnavailable, Recreate) and `StatefulSet` (`OrderedReady` / Parallel, rolling update from the
//!   highest ordinal down to the partition) controllers with their status fields and the
//!   `pod-template-hash` / `controller-revision-hash` labels and ownerReferences;
//! - `PodDisruptionBudget` status, namespace termination and owner-reference garbage collection;
//! - load: each workload's offered load (`LoadSpec`) is split across its Ready pods into per-pod
//!   CPU, memory (`OOMKilled` past the limit), a per-pod custom metric, a per-object metric and
//!   an optional external queue metric.
//!
//! Not modelled: `DaemonSets` and Jobs create no pods, no node capacity or affinity in scheduling,
//! no proportional scaling of a Deployment mid-rollout, no orphan adoption.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::{DeleteOptions, Part};
use crate::clock::{parse_time, rfc3339};
use crate::control::Caller;
use crate::error::ApiError;
use crate::metrics_api::parse_quantity;
use crate::random::{fnv1a, mix};
use crate::registry::ResourceDef;
use crate::store::Mutation;
use crate::{Cluster, eviction};

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

    /// Sets a workload's load (`kind` = `deployments` or `statefulsets`), starting at `now`
    /// sim seconds.
    pub fn set_load(&self, ns: &str, kind: &str, name: &str, spec: LoadSpec, now: f64) {
        self.lock()
            .loads
            .insert((ns.into(), kind.into(), name.into()), (spec, now));
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

fn s<'a>(o: &'a Value, p: &str) -> &'a str {
    o.pointer(p).and_then(Value::as_str).unwrap_or_default()
}

fn i(o: &Value, p: &str) -> i64 {
    o.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

fn key(group: &str, plural: &str) -> (String, String) {
    (group.into(), plural.into())
}

fn controller_uid(o: &Value) -> Option<&str> {
    o.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|r| r.get("uid"))
        .and_then(Value::as_str)
}

fn owner_ref(o: &Value, kind: &str) -> Value {
    json!({"apiVersion": o["apiVersion"], "kind": kind, "name": s(o, "/metadata/name"), "uid": s(o, "/metadata/uid"),
        "controller": true, "blockOwnerDeletion": true})
}

fn deleting(o: &Value) -> bool {
    o.pointer("/metadata/deletionTimestamp").is_some()
}

fn pod_ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

fn ready_since(p: &Value) -> Option<Timestamp> {
    p.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready" && c["status"] == "True")?
        .get("lastTransitionTime")?
        .as_str()
        .and_then(parse_time)
}

fn active(p: &Value) -> bool {
    !deleting(p) && !matches!(s(p, "/status/phase"), "Succeeded" | "Failed")
}

/// A stable, DNS-safe hash of a pod template (like `pod-template-hash`).
pub fn template_hash(template: &Value) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut t = template.clone();
    if let Some(l) = t
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        l.remove("pod-template-hash");
    }
    let mut h = mix(fnv1a(&serde_json::to_vec(&t).unwrap_or_default()));
    (0..10)
        .map(|_| {
            let c = ALPHABET[(h % ALPHABET.len() as u64) as usize] as char;
            h /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// An intOrString (`3` or `"25%"`) resolved against `total`, rounding up or down.
pub fn int_or_percent(v: Option<&Value>, total: i64, round_up: bool, default: i64) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(default),
        Some(Value::String(s)) if s.ends_with('%') => {
            let p: f64 = s.trim_end_matches('%').parse().unwrap_or(0.0);
            let x = p * total as f64 / 100.0;
            if round_up {
                x.ceil() as i64
            } else {
                x.floor() as i64
            }
        }
        Some(Value::String(s)) => s.parse().unwrap_or(default),
        _ => default,
    }
}

struct Ctx<'a> {
    cluster: &'a Arc<Cluster>,
    now: Timestamp,
}

impl Ctx<'_> {
    fn def(&self, group: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.cluster.registry.by_key(group, plural)
    }

    async fn write_status(&self, group: &str, plural: &str, obj: &Value, status: Value, who: &str) {
        if obj.get("status") == Some(&status) {
            return;
        }
        let Some(def) = self.def(group, plural) else {
            return;
        };
        let mut new = obj.clone();
        new["status"] = status;
        let part = if def.status { Part::Status } else { Part::Main };
        let r = self
            .cluster
            .update(
                &def,
                &def.versions[0],
                s(obj, "/metadata/namespace"),
                s(obj, "/metadata/name"),
                new,
                part,
                &Caller::controller(who),
            )
            .await;
        log_conflict(r.err());
    }

    async fn set_replicas(&self, group: &str, plural: &str, obj: &Value, replicas: i64, who: &str) {
        if i(obj, "/spec/replicas") == replicas {
            return;
        }
        let Some(def) = self.def(group, plural) else {
            return;
        };
        let mut new = obj.clone();
        new["spec"]["replicas"] = json!(replicas);
        let r = self
            .cluster
            .update(
                &def,
                &def.versions[0],
                s(obj, "/metadata/namespace"),
                s(obj, "/metadata/name"),
                new,
                Part::Main,
                &Caller::controller(who),
            )
            .await;
        log_conflict(r.err());
    }

    async fn create(
        &self,
        group: &str,
        plural: &str,
        ns: &str,
        obj: Value,
        who: &str,
    ) -> Option<Arc<Value>> {
        let def = self.def(group, plural)?;
        match self
            .cluster
            .create(
                &def,
                &def.versions[0],
                ns,
                obj,
                &Caller::controller(who),
                false,
            )
            .await
        {
            Ok(o) => Some(o),
            Err(e) => {
                tracing::debug!(error = %e, "controller create failed");
                None
            }
        }
    }

    fn delete(&self, group: &str, plural: &str, obj: &Value, grace: Option<i64>, who: &str) {
        let Some(def) = self.def(group, plural) else {
            return;
        };
        let opts = DeleteOptions {
            grace_period_seconds: grace,
            ..DeleteOptions::default()
        };
        let r = self.cluster.delete(
            &def,
            s(obj, "/metadata/namespace"),
            s(obj, "/metadata/name"),
            &opts,
            &Caller::controller(who),
        );
        log_conflict(r.err());
    }

    fn event(&self, involved: &Value, reason: &str, message: &str, who: &str) {
        let ns = s(involved, "/metadata/namespace");
        let name = format!(
            "{}.{:x}",
            s(involved, "/metadata/name"),
            self.cluster.rng.next_u64() & 0xffff_ffff_ffff
        );
        let now = rfc3339(self.now);
        let ev = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": ns, "uid": self.cluster.rng.uuid(), "creationTimestamp": now},
            "involvedObject": {"apiVersion": involved["apiVersion"], "kind": involved["kind"], "name": s(involved, "/metadata/name"),
                "namespace": ns, "uid": s(involved, "/metadata/uid"), "resourceVersion": s(involved, "/metadata/resourceVersion")},
            "reason": reason, "message": message, "type": "Normal", "count": 1,
            "firstTimestamp": now, "lastTimestamp": now, "source": {"component": who}, "reportingComponent": who,
        });
        let _ = self.cluster.store.create(&key("", "events"), ev, "");
    }
}

fn log_conflict(e: Option<ApiError>) {
    if let Some(e) = e
        && e.code != 409
        && e.code != 404
    {
        tracing::debug!(error = %e, "controller write failed");
    }
}

/// Runs the model until `cancel` fires.
pub async fn run(cluster: Arc<Cluster>, cancel: tokio_util::sync::CancellationToken) {
    let real_tick = cluster
        .clock
        .real_duration(cluster.settings.tick)
        .max(Duration::from_millis(20));
    let mut interval = tokio::time::interval(real_tick);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = interval.tick() => tick(&cluster).await,
        }
    }
}

/// One pass of every controller and the load model.
pub async fn tick(cluster: &Arc<Cluster>) {
    let ctx = Ctx {
        cluster,
        now: cluster.clock.now(),
    };
    kubelet(&ctx).await;
    replicasets(&ctx).await;
    deployments(&ctx).await;
    statefulsets(&ctx).await;
    pdbs(&ctx).await;
    namespaces(&ctx);
    let n = {
        let mut st = cluster.model.lock();
        st.tick += 1;
        st.tick
    };
    if n % 5 == 0 {
        garbage_collect(&ctx);
    }
    load(&ctx).await;
}

fn container_statuses(pod: &Value, now: &str, ready: bool, prev: Option<&Value>) -> Value {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let statuses: Vec<Value> = containers
        .iter()
        .enumerate()
        .map(|(idx, c)| {
            let name = c.get("name").cloned().unwrap_or(Value::Null);
            let old = prev.and_then(|p| p.as_array()).and_then(|a| a.iter().find(|x| x["name"] == name)).cloned();
            let mut st = old.unwrap_or_else(|| {
                json!({"name": name, "restartCount": 0, "started": true,
                    "state": {"running": {"startedAt": now}},
                    "image": c.get("image").cloned().unwrap_or(Value::Null),
                    "imageID": format!("sim://{}", c.get("image").and_then(Value::as_str).unwrap_or_default()),
                    "containerID": format!("sim://{}-{idx}", s(pod, "/metadata/uid")),
                    "resources": c.get("resources").cloned().unwrap_or_else(|| json!({})),
                    "allocatedResources": c.pointer("/resources/requests").cloned().unwrap_or_else(|| json!({}))})
            });
            st["ready"] = json!(ready);
            st
        })
        .collect();
    json!(statuses)
}

fn conditions(pod: &Value, ready: bool, now: &str) -> Value {
    let old = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let cond = |t: &str, ok: bool| {
        let status = if ok { "True" } else { "False" };
        let prev = old.iter().find(|c| c["type"] == t);
        let since = match prev {
            Some(p) if p["status"] == status => p["lastTransitionTime"].clone(),
            _ => json!(now),
        };
        json!({"type": t, "status": status, "lastProbeTime": null, "lastTransitionTime": since})
    };
    json!([
        cond("PodReadyToStartContainers", true),
        cond("Initialized", true),
        cond("Ready", ready),
        cond("ContainersReady", ready),
        cond("PodScheduled", true)
    ])
}

async fn kubelet(ctx: &Ctx<'_>) {
    let cluster = ctx.cluster;
    let (pods, _) = cluster.store.list(&key("", "pods"), None);
    let (nodes, _) = cluster.store.list(&key("", "nodes"), None);
    let node_names: Vec<String> = nodes
        .iter()
        .map(|n| s(n, "/metadata/name").to_string())
        .collect();
    let now_s = rfc3339(ctx.now);
    let settings = &cluster.settings;
    for pod in pods {
        let ns = s(&pod, "/metadata/namespace").to_string();
        let name = s(&pod, "/metadata/name").to_string();
        let created = parse_time(s(&pod, "/metadata/creationTimestamp")).unwrap_or(ctx.now);
        let age = ctx.now.duration_since(created).as_secs_f64();
        if deleting(&pod) {
            let grace = i(&pod, "/metadata/deletionGracePeriodSeconds");
            let deadline = parse_time(s(&pod, "/metadata/deletionTimestamp")).unwrap_or(ctx.now);
            let started = deadline
                .checked_sub(jiff::SignedDuration::from_secs(grace))
                .unwrap_or(deadline);
            let elapsed = ctx.now.duration_since(started).as_secs_f64();
            let needed = settings.pod_termination.as_secs_f64().min(grace as f64);
            if grace > 0 && elapsed >= needed {
                ctx.delete("", "pods", &pod, Some(0), "kubelet");
            }
            continue;
        }
        if s(&pod, "/spec/nodeName").is_empty() {
            if node_names.is_empty() {
                continue;
            }
            let node =
                node_names[(fnv1a(name.as_bytes()) % node_names.len() as u64) as usize].clone();
            let r = cluster.store.mutate(&key("", "pods"), &ns, &name, "", |cur| {
                let mut new = (**cur).clone();
                new["spec"]["nodeName"] = json!(node);
                if let Some(st) = new.get_mut("status").and_then(Value::as_object_mut) {
                    st.insert("conditions".into(), json!([{"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now_s}]));
                }
                Ok(Mutation::Replace(new))
            });
            log_conflict(r.err());
            continue;
        }
        let phase = s(&pod, "/status/phase");
        if phase == "Pending" && age >= settings.pod_start.as_secs_f64() {
            let node_idx = node_names
                .iter()
                .position(|n| n == s(&pod, "/spec/nodeName"))
                .unwrap_or(0);
            let ip_n = fnv1a(s(&pod, "/metadata/uid").as_bytes());
            let mut status = pod.get("status").cloned().unwrap_or_else(|| json!({}));
            status["phase"] = json!("Running");
            status["hostIP"] = json!(format!("10.0.0.{}", node_idx + 10));
            status["podIP"] = json!(format!("10.244.{}.{}", node_idx, 2 + ip_n % 250));
            status["podIPs"] = json!([{"ip": status["podIP"].clone()}]);
            status["startTime"] = json!(now_s);
            status["containerStatuses"] = container_statuses(&pod, &now_s, false, None);
            status["conditions"] = conditions(&pod, false, &now_s);
            ctx.write_status("", "pods", &pod, status, "kubelet").await;
            continue;
        }
        if phase == "Running" && !pod_ready(&pod) {
            // Ready `pod_ready` after the latest container (re)start.
            let latest_start = pod
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .and_then(|a| {
                    a.iter()
                        .filter_map(|c| {
                            c.pointer("/state/running/startedAt")
                                .and_then(Value::as_str)
                                .and_then(parse_time)
                        })
                        .max()
                })
                .unwrap_or(created);
            if ctx.now.duration_since(latest_start).as_secs_f64()
                >= settings.pod_ready.as_secs_f64()
            {
                let mut status = pod["status"].clone();
                status["containerStatuses"] = container_statuses(
                    &pod,
                    &now_s,
                    true,
                    pod.pointer("/status/containerStatuses"),
                );
                status["conditions"] = conditions(&pod, true, &now_s);
                ctx.write_status("", "pods", &pod, status, "kubelet").await;
            }
        }
    }
}

fn owned_by<'a>(items: &'a [Arc<Value>], owner: &Value) -> Vec<&'a Arc<Value>> {
    let uid = s(owner, "/metadata/uid");
    items
        .iter()
        .filter(|o| controller_uid(o) == Some(uid))
        .collect()
}

fn by_namespace(items: Vec<Arc<Value>>) -> HashMap<String, Vec<Arc<Value>>> {
    let mut m: HashMap<String, Vec<Arc<Value>>> = HashMap::new();
    for o in items {
        m.entry(s(&o, "/metadata/namespace").to_string())
            .or_default()
            .push(o);
    }
    m
}

fn available(p: &Value, min_ready_seconds: i64, now: Timestamp) -> bool {
    pod_ready(p)
        && ready_since(p).is_none_or(|t| now.duration_since(t).as_secs() >= min_ready_seconds)
}

async fn replicasets(ctx: &Ctx<'_>) {
    let cluster = ctx.cluster;
    let (rss, _) = cluster.store.list(&key("apps", "replicasets"), None);
    if rss.is_empty() {
        return;
    }
    let pods = by_namespace(cluster.store.list(&key("", "pods"), None).0);
    let empty = Vec::new();
    for rs in rss.iter().filter(|r| !deleting(r)) {
        let ns = s(rs, "/metadata/namespace");
        let pods_ns = pods.get(ns).unwrap_or(&empty);
        let owned: Vec<&Arc<Value>> = owned_by(pods_ns, rs)
            .into_iter()
            .filter(|p| active(p))
            .collect();
        let desired = i(rs, "/spec/replicas");
        let have = owned.len() as i64;
        if have < desired {
            let mut template = rs
                .pointer("/spec/template")
                .cloned()
                .unwrap_or_else(|| json!({}));
            let mut metadata = template
                .get("metadata")
                .cloned()
                .unwrap_or_else(|| json!({}));
            metadata["generateName"] = json!(format!("{}-", s(rs, "/metadata/name")));
            metadata["namespace"] = json!(ns);
            metadata["ownerReferences"] = json!([owner_ref(rs, "ReplicaSet")]);
            if let Some(m) = metadata.as_object_mut() {
                m.remove("name");
                m.remove("creationTimestamp");
            }
            let spec = template
                .get_mut("spec")
                .map_or_else(|| json!({}), Value::take);
            for _ in 0..(desired - have).min(500) {
                let pod =
                    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec});
                ctx.create("", "pods", ns, pod, "replicaset-controller")
                    .await;
            }
        } else if have > desired {
            let mut victims = owned.clone();
            // Delete the least useful first: unscheduled, pending, not ready, then the newest.
            victims.sort_by_key(|p| {
                let rank = if s(p, "/spec/nodeName").is_empty() {
                    0
                } else if s(p, "/status/phase") == "Pending" {
                    1
                } else if !pod_ready(p) {
                    2
                } else {
                    3
                };
                (
                    rank,
                    std::cmp::Reverse(s(p, "/metadata/creationTimestamp").to_string()),
                )
            });
            for p in victims.iter().take((have - desired) as usize) {
                ctx.delete("", "pods", p, None, "replicaset-controller");
            }
        }
        let min_ready = i(rs, "/spec/minReadySeconds");
        let ready = owned.iter().filter(|p| pod_ready(p)).count() as i64;
        let avail = owned
            .iter()
            .filter(|p| available(p, min_ready, ctx.now))
            .count() as i64;
        let status = json!({"replicas": have, "fullyLabeledReplicas": have, "readyReplicas": ready, "availableReplicas": avail,
            "observedGeneration": i(rs, "/metadata/generation")});
        let mut merged = rs.get("status").cloned().unwrap_or_else(|| json!({}));
        for (k, v) in status.as_object().into_iter().flatten() {
            merged[k] = v.clone();
        }
        ctx.write_status("apps", "replicasets", rs, merged, "replicaset-controller")
            .await;
    }
}

fn condition(
    old: Option<&Value>,
    t: &str,
    ok: bool,
    reason: &str,
    message: &str,
    now: &str,
) -> Value {
    let status = if ok { "True" } else { "False" };
    let prev = old
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|c| c["type"] == t));
    if let Some(p) = prev
        && p["status"] == status
        && p["reason"] == reason
    {
        return p.clone();
    }
    json!({"type": t, "status": status, "reason": reason, "message": message, "lastUpdateTime": now, "lastTransitionTime": now})
}

#[allow(clippy::too_many_lines)] // one table / one reconcile pass reads best in one piece
async fn deployments(ctx: &Ctx<'_>) {
    let cluster = ctx.cluster;
    let (deps, _) = cluster.store.list(&key("apps", "deployments"), None);
    if deps.is_empty() {
        return;
    }
    let rss = by_namespace(cluster.store.list(&key("apps", "replicasets"), None).0);
    let empty = Vec::new();
    let now_s = rfc3339(ctx.now);
    for d in deps.iter().filter(|d| !deleting(d)) {
        let ns = s(d, "/metadata/namespace");
        let name = s(d, "/metadata/name");
        let owned: Vec<&Arc<Value>> = owned_by(rss.get(ns).unwrap_or(&empty), d)
            .into_iter()
            .filter(|r| !deleting(r))
            .collect();
        let desired = i(d, "/spec/replicas");
        let template = d
            .pointer("/spec/template")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let hash = template_hash(&template);
        let new_rs = owned
            .iter()
            .find(|r| s(r, "/metadata/labels/pod-template-hash") == hash)
            .copied();
        let olds: Vec<&Arc<Value>> = owned
            .iter()
            .filter(|r| s(r, "/metadata/labels/pod-template-hash") != hash)
            .copied()
            .collect();
        let paused = d
            .pointer("/spec/paused")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let Some(new_rs) = new_rs else {
            if paused {
                continue;
            }
            let revision = owned
                .iter()
                .map(|r| {
                    s(
                        r,
                        "/metadata/annotations/deployment.kubernetes.io~1revision",
                    )
                    .parse::<i64>()
                    .unwrap_or(0)
                })
                .max()
                .unwrap_or(0)
                + 1;
            let mut tpl = template.clone();
            tpl["metadata"]["labels"]["pod-template-hash"] = json!(hash);
            let mut selector = d
                .pointer("/spec/selector")
                .cloned()
                .unwrap_or_else(|| json!({}));
            selector["matchLabels"]["pod-template-hash"] = json!(hash);
            let start = if olds.iter().any(|r| i(r, "/spec/replicas") > 0) {
                0
            } else {
                desired
            };
            let rs = json!({
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": format!("{name}-{hash}"), "namespace": ns, "labels": tpl["metadata"]["labels"].clone(),
                    "annotations": {"deployment.kubernetes.io/revision": revision.to_string(), "deployment.kubernetes.io/desired-replicas": desired.to_string(),
                        "deployment.kubernetes.io/max-replicas": desired.to_string()},
                    "ownerReferences": [owner_ref(d, "Deployment")]},
                "spec": {"replicas": start, "minReadySeconds": i(d, "/spec/minReadySeconds"), "selector": selector, "template": tpl},
            });
            if ctx
                .create("apps", "replicasets", ns, rs, "deployment-controller")
                .await
                .is_some()
                && start > 0
            {
                ctx.event(
                    d,
                    "ScalingReplicaSet",
                    &format!("Scaled up replica set {name}-{hash} from 0 to {start}"),
                    "deployment-controller",
                );
            }
            continue;
        };
        if !paused {
            let recreate = s(d, "/spec/strategy/type") == "Recreate";
            let old_replicas: i64 = olds.iter().map(|r| i(r, "/spec/replicas")).sum();
            let new_replicas = i(new_rs, "/spec/replicas");
            let scale = |rs: &Value, to: i64| -> Option<(Value, i64, i64)> {
                (i(rs, "/spec/replicas") != to)
                    .then(|| ((*rs).clone(), i(rs, "/spec/replicas"), to))
            };
            let mut plan: Vec<(Value, i64, i64)> = Vec::new();
            if recreate {
                if old_replicas > 0 {
                    plan.extend(olds.iter().filter_map(|r| scale(r, 0)));
                } else if olds.iter().all(|r| i(r, "/status/replicas") == 0) {
                    plan.extend(scale(new_rs, desired));
                }
            } else if old_replicas == 0 {
                plan.extend(scale(new_rs, desired));
            } else {
                let surge = int_or_percent(
                    d.pointer("/spec/strategy/rollingUpdate/maxSurge"),
                    desired,
                    true,
                    1,
                );
                let mut unavailable = int_or_percent(
                    d.pointer("/spec/strategy/rollingUpdate/maxUnavailable"),
                    desired,
                    false,
                    0,
                );
                if surge == 0 && unavailable == 0 {
                    unavailable = 1;
                }
                let total = old_replicas + new_replicas;
                let mut target_new = new_replicas;
                if new_replicas < desired && total < desired + surge {
                    target_new = (new_replicas + desired + surge - total).min(desired);
                }
                plan.extend(scale(new_rs, target_new));
                let min_available = desired - unavailable;
                let all_available: i64 = owned
                    .iter()
                    .map(|r| i(r, "/status/availableReplicas"))
                    .sum();
                let mut budget = (all_available - min_available).max(0);
                let mut olds_sorted = olds.clone();
                olds_sorted.sort_by_key(|r| s(r, "/metadata/creationTimestamp").to_string());
                for r in olds_sorted {
                    let cur = i(r, "/spec/replicas");
                    let unhealthy = (cur - i(r, "/status/availableReplicas")).max(0);
                    let cut = cur.min(unhealthy + budget);
                    budget -= (cut - unhealthy).max(0);
                    plan.extend(scale(r, cur - cut));
                }
            }
            for (rs, from, to) in plan {
                ctx.set_replicas("apps", "replicasets", &rs, to, "deployment-controller")
                    .await;
                let verb = if to > from { "up" } else { "down" };
                ctx.event(
                    d,
                    "ScalingReplicaSet",
                    &format!(
                        "Scaled {verb} replica set {} from {from} to {to}",
                        s(&rs, "/metadata/name")
                    ),
                    "deployment-controller",
                );
            }
        }
        let sum = |p: &str| owned.iter().map(|r| i(r, p)).sum::<i64>();
        let spec_total = sum("/spec/replicas");
        let (replicas, ready, avail) = (
            sum("/status/replicas"),
            sum("/status/readyReplicas"),
            sum("/status/availableReplicas"),
        );
        let updated = i(new_rs, "/status/replicas");
        let unavailable_allowed = int_or_percent(
            d.pointer("/spec/strategy/rollingUpdate/maxUnavailable"),
            desired,
            false,
            0,
        );
        let complete = updated == desired && replicas == desired && avail == desired;
        let old_conds = d.pointer("/status/conditions");
        let rs_name = s(new_rs, "/metadata/name");
        let conds = json!([
            condition(
                old_conds,
                "Available",
                avail >= desired - unavailable_allowed,
                if avail >= desired - unavailable_allowed {
                    "MinimumReplicasAvailable"
                } else {
                    "MinimumReplicasUnavailable"
                },
                if avail >= desired - unavailable_allowed {
                    "Deployment has minimum availability."
                } else {
                    "Deployment does not have minimum availability."
                },
                &now_s
            ),
            condition(
                old_conds,
                "Progressing",
                true,
                if complete {
                    "NewReplicaSetAvailable"
                } else {
                    "ReplicaSetUpdated"
                },
                &if complete {
                    format!("ReplicaSet \"{rs_name}\" has successfully progressed.")
                } else {
                    format!("ReplicaSet \"{rs_name}\" is progressing.")
                },
                &now_s
            ),
        ]);
        let mut status = json!({"observedGeneration": i(d, "/metadata/generation"), "replicas": replicas, "updatedReplicas": updated,
            "readyReplicas": ready, "availableReplicas": avail, "conditions": conds});
        if spec_total - avail > 0 {
            status["unavailableReplicas"] = json!(spec_total - avail);
        }
        ctx.write_status("apps", "deployments", d, status, "deployment-controller")
            .await;
    }
}

#[allow(clippy::too_many_lines)] // one table / one reconcile pass reads best in one piece
async fn statefulsets(ctx: &Ctx<'_>) {
    let cluster = ctx.cluster;
    let (sets, _) = cluster.store.list(&key("apps", "statefulsets"), None);
    if sets.is_empty() {
        return;
    }
    let pods = by_namespace(cluster.store.list(&key("", "pods"), None).0);
    let empty = Vec::new();
    for ss in sets.iter().filter(|s| !deleting(s)) {
        let ns = s(ss, "/metadata/namespace");
        let name = s(ss, "/metadata/name");
        let desired = i(ss, "/spec/replicas");
        let parallel = s(ss, "/spec/podManagementPolicy") == "Parallel";
        let template = ss
            .pointer("/spec/template")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let update_rev = format!("{name}-{}", template_hash(&template));
        let owned: Vec<&Arc<Value>> = owned_by(pods.get(ns).unwrap_or(&empty), ss);
        let ordinal = |p: &Value| {
            s(p, "/metadata/name")
                .rsplit('-')
                .next()
                .and_then(|o| o.parse::<i64>().ok())
                .unwrap_or(-1)
        };
        let by_ord: BTreeMap<i64, &Arc<Value>> = owned.iter().map(|p| (ordinal(p), *p)).collect();
        let all_ready = |upto: i64| {
            (0..upto).all(|o| by_ord.get(&o).is_some_and(|p| pod_ready(p) && !deleting(p)))
        };
        let any_deleting = owned.iter().any(|p| deleting(p));
        // Scale down: highest ordinal first, one at a time unless Parallel.
        let extra: Vec<&&Arc<Value>> = by_ord
            .iter()
            .filter(|(o, p)| **o >= desired && !deleting(p))
            .map(|(_, p)| p)
            .collect();
        if extra.is_empty() {
            for o in 0..desired {
                match by_ord.get(&o) {
                    None => {
                        if !parallel && (!all_ready(o) || any_deleting) {
                            break;
                        }
                        let pod_name = format!("{name}-{o}");
                        let mut metadata = template
                            .get("metadata")
                            .cloned()
                            .unwrap_or_else(|| json!({}));
                        metadata["name"] = json!(pod_name);
                        metadata["namespace"] = json!(ns);
                        metadata["labels"]["controller-revision-hash"] = json!(update_rev);
                        metadata["labels"]["statefulset.kubernetes.io/pod-name"] = json!(pod_name);
                        metadata["labels"]["apps.kubernetes.io/pod-index"] = json!(o.to_string());
                        metadata["ownerReferences"] = json!([owner_ref(ss, "StatefulSet")]);
                        let mut spec = template.get("spec").cloned().unwrap_or_else(|| json!({}));
                        spec["hostname"] = json!(pod_name);
                        if !s(ss, "/spec/serviceName").is_empty() {
                            spec["subdomain"] = ss["spec"]["serviceName"].clone();
                        }
                        ctx.create("", "pods", ns, json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}), "statefulset-controller").await;
                        if !parallel {
                            break;
                        }
                    }
                    Some(p) if !parallel && (!pod_ready(p) || deleting(p)) => break,
                    Some(_) => {}
                }
            }
            // Rolling update: replace the highest out-of-date ordinal ≥ partition once all are ready.
            let partition = i(ss, "/spec/updateStrategy/rollingUpdate/partition");
            let rolling = s(ss, "/spec/updateStrategy/type") != "OnDelete";
            if rolling
                && !any_deleting
                && all_ready(desired)
                && let Some((_, p)) = by_ord.iter().rev().find(|(o, p)| {
                    **o >= partition
                        && **o < desired
                        && s(p, "/metadata/labels/controller-revision-hash") != update_rev
                })
            {
                ctx.delete("", "pods", p, None, "statefulset-controller");
            }
        } else {
            let take = if parallel { extra.len() } else { 1 };
            if parallel || (!any_deleting && all_ready(desired)) {
                for p in extra.iter().rev().take(take) {
                    ctx.delete("", "pods", p, None, "statefulset-controller");
                }
            }
        }
        let live: Vec<&&Arc<Value>> = by_ord.values().filter(|p| !deleting(p)).collect();
        let updated = live
            .iter()
            .filter(|p| s(p, "/metadata/labels/controller-revision-hash") == update_rev)
            .count() as i64;
        let current_rev = if updated == desired {
            update_rev.clone()
        } else {
            ss.pointer("/status/currentRevision")
                .and_then(Value::as_str)
                .unwrap_or(&update_rev)
                .to_string()
        };
        let current = live
            .iter()
            .filter(|p| s(p, "/metadata/labels/controller-revision-hash") == current_rev)
            .count() as i64;
        let ready = live.iter().filter(|p| pod_ready(p)).count() as i64;
        let min_ready = i(ss, "/spec/minReadySeconds");
        let avail = live
            .iter()
            .filter(|p| available(p, min_ready, ctx.now))
            .count() as i64;
        let status = json!({"observedGeneration": i(ss, "/metadata/generation"), "replicas": live.len(), "readyReplicas": ready,
            "currentReplicas": current, "updatedReplicas": updated, "availableReplicas": avail,
            "currentRevision": current_rev, "updateRevision": update_rev, "collisionCount": 0});
        ctx.write_status("apps", "statefulsets", ss, status, "statefulset-controller")
            .await;
    }
}

async fn pdbs(ctx: &Ctx<'_>) {
    let (items, _) = ctx
        .cluster
        .store
        .list(&key("policy", "poddisruptionbudgets"), None);
    for pdb in items.iter().filter(|p| !deleting(p)) {
        let status = eviction::pdb_status(ctx.cluster, pdb, ctx.now);
        ctx.write_status(
            "policy",
            "poddisruptionbudgets",
            pdb,
            status,
            "disruption-controller",
        )
        .await;
    }
}

fn namespaces(ctx: &Ctx<'_>) {
    let cluster = ctx.cluster;
    let (nss, _) = cluster.store.list(&key("", "namespaces"), None);
    for n in nss.iter().filter(|n| deleting(n)) {
        let ns = s(n, "/metadata/name");
        let mut remaining = 0;
        for def in cluster
            .registry
            .all()
            .iter()
            .filter(|d| d.namespaced && !d.virtual_)
        {
            let (items, _) = cluster.store.list(&key(&def.group, &def.plural), Some(ns));
            remaining += items.len();
            for o in items.iter().filter(|o| !deleting(o)) {
                ctx.delete(&def.group, &def.plural, o, None, "namespace-controller");
            }
        }
        if remaining == 0 {
            let r = cluster
                .store
                .mutate(&key("", "namespaces"), "", ns, "", |_| Ok(Mutation::Delete));
            log_conflict(r.err());
        }
    }
}

fn garbage_collect(ctx: &Ctx<'_>) {
    let cluster = ctx.cluster;
    let defs = cluster.registry.all();
    let mut uids: HashSet<String> = HashSet::new();
    let mut dependents: Vec<(Arc<ResourceDef>, Arc<Value>)> = Vec::new();
    for def in defs.iter().filter(|d| !d.virtual_) {
        let (items, _) = cluster.store.list(&key(&def.group, &def.plural), None);
        for o in items {
            uids.insert(s(&o, "/metadata/uid").to_string());
            if o.pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
            {
                dependents.push((def.clone(), o));
            }
        }
    }
    for (def, o) in dependents {
        let refs = o
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if !deleting(&o)
            && refs
                .iter()
                .all(|r| !uids.contains(r.get("uid").and_then(Value::as_str).unwrap_or_default()))
        {
            ctx.delete(&def.group, &def.plural, &o, None, "garbage-collector");
        }
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

#[allow(clippy::too_many_lines)] // one table / one reconcile pass reads best in one piece
async fn load(ctx: &Ctx<'_>) {
    let cluster = ctx.cluster;
    let t = cluster.clock.elapsed_secs();
    let (pods, _) = cluster.store.list(&key("", "pods"), None);
    let (rss, _) = cluster.store.list(&key("apps", "replicasets"), None);
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
    let running: Vec<(&Arc<Value>, Option<WorkloadKey>)> = pods
        .iter()
        .filter(|p| s(p, "/status/phase") == "Running")
        .map(|p| (p, workload_of(p, &rs_owner)))
        .collect();
    let mut ready_count: HashMap<WorkloadKey, usize> = HashMap::new();
    for (p, w) in &running {
        if let Some(w) = w
            && pod_ready(p)
            && !deleting(p)
        {
            *ready_count.entry(w.clone()).or_default() += 1;
        }
    }
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
    {
        let mut st = cluster.model.lock();
        st.pods = samples;
        for (w, (spec, _)) in &loads {
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
    for (pod, container) in ooms {
        oom_kill(ctx, &pod, &container).await;
    }
}

/// The container is `OOMKilled` and restarted at once: restartCount+1, lastState.terminated
/// reason `OOMKilled`, not ready until `pod_ready` after the restart.
async fn oom_kill(ctx: &Ctx<'_>, pod: &Value, container: &str) {
    let now_s = rfc3339(ctx.now);
    let mut status = pod["status"].clone();
    let Some(statuses) = status
        .get_mut("containerStatuses")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in statuses.iter_mut().filter(|c| c["name"] == container) {
        let started = c
            .pointer("/state/running/startedAt")
            .cloned()
            .unwrap_or_else(|| json!(now_s));
        c["lastState"] = json!({"terminated": {"exitCode": 137, "reason": "OOMKilled", "startedAt": started, "finishedAt": now_s,
            "containerID": c["containerID"].clone()}});
        c["restartCount"] = json!(c["restartCount"].as_i64().unwrap_or(0) + 1);
        c["state"] = json!({"running": {"startedAt": now_s}});
        c["ready"] = json!(false);
    }
    status["conditions"] = conditions(pod, false, &now_s);
    ctx.write_status("", "pods", pod, status, "kubelet").await;
    ctx.event(
        pod,
        "OOMKilling",
        &format!("Container {container} was OOM killed (memory limit exceeded)"),
        "kubelet",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn int_or_percent_rounding() {
        // upstream: pkg/controller/deployment/util/deployment_util_test.go TestResolveFenceposts
        assert_eq!(int_or_percent(Some(&json!("25%")), 10, true, 0), 3);
        assert_eq!(int_or_percent(Some(&json!("25%")), 10, false, 0), 2);
        assert_eq!(int_or_percent(Some(&json!(2)), 10, false, 0), 2);
        assert_eq!(int_or_percent(None, 10, false, 7), 7);
    }

    #[test]
    fn template_hash_ignores_its_own_label() {
        let a = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "a", "image": "x"}]}});
        let mut b = a.clone();
        b["metadata"]["labels"]["pod-template-hash"] = json!(template_hash(&a));
        assert_eq!(template_hash(&a), template_hash(&b));
        let mut c = a.clone();
        c["spec"]["containers"][0]["image"] = json!("y");
        assert_ne!(template_hash(&a), template_hash(&c));
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
