//! `plimsoll-sim demo`: the README's main job. Starts a sim, installs the Plimsoll CRDs,
//! creates a sample Deployment (`demo/web`) with a HorizontalPodAutoscalerPlus, a
//! CronHorizontalPodAutoscaler that raises its minimum around the peak and a VerticalPodAutoscaler
//! in `Initial` mode for memory (new pods get the recommended memory request from vpa-admission;
//! CPU stays the HPA+'s), drives the Deployment with a day-shaped load compressed into
//! `duration`, runs the services the caller plugs in (`plimsoll-sim demo` plugs in every Plimsoll
//! service, see `services.rs`), prints a
//! live table (sim time, load, replicas, CPU utilisation, pods the admission webhook patched,
//! last decision and its reason), a line on what admission changed, and writes an SVG plot of
//! load and replicas over time.
//!
//! Services plug in as [`Service`] closures receiving a [`DemoContext`] (a kube client for the
//! sim, its kubeconfig, the namespace and a shutdown token). The "last decision" column reads
//! the newest condition of any HorizontalPodAutoscaler-like object targeting the Deployment
//! (autoscaling/v2 HPA or a CRD whose kind contains `HorizontalPodAutoscaler`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use plimsoll_plot::{Anchor, Chart, Colour, Format, Stroke, Text, step_points};

use crate::control::Caller;
use crate::error::{Error, Result};
use crate::metrics_api::parse_quantity;
use crate::workload::{LoadProfile, LoadSpec};
use crate::{Sim, SimConfig};

/// Demo settings.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// Real duration (default 120 s).
    pub duration: Duration,
    /// Sim seconds per real second (default 1). The load's day curve always spans the whole run;
    /// the services run on the real clock, so a time scale above 1 makes pod ages and metric
    /// timestamps run ahead of what they compare them with (CPU samples then look too fresh).
    pub time_scale: f64,
    /// Where the plot goes: SVG or PNG by the extension (default `plimsoll-demo.svg`).
    pub plot: PathBuf,
    /// Namespace of the sample workload (default `demo`).
    pub namespace: String,
    /// Load at the daily peak, units/s (default 1,800; 1 unit = 1 millicore).
    pub peak: f64,
    /// Load at the nightly trough (default 150).
    pub trough: f64,
    /// Real interval between table rows (default 2 s).
    pub sample_every: Duration,
    /// Print the table (default true).
    pub print: bool,
}

impl Default for DemoConfig {
    fn default() -> Self {
        Self {
            duration: Duration::from_secs(120),
            time_scale: 1.0,
            plot: PathBuf::from("plimsoll-demo.svg"),
            namespace: "demo".into(),
            peak: 1800.0,
            trough: 150.0,
            sample_every: Duration::from_secs(2),
            print: true,
        }
    }
}

/// Namespace of the services' own objects (vpa-admission's certificate Secret); the demo
/// creates it.
pub const SYSTEM_NAMESPACE: &str = "plimsoll-system";

/// What a plugged-in service gets.
#[derive(Clone)]
pub struct DemoContext {
    /// A client for the sim (HTTPS, token auth).
    pub client: kube::Client,
    /// The sim's kubeconfig (YAML).
    pub kubeconfig: String,
    /// Namespace of the sample workload.
    pub namespace: String,
    /// Fires when the demo ends; services should return soon after.
    pub shutdown: CancellationToken,
}

/// A service to run in-process during the demo.
pub type Service = Box<dyn FnOnce(DemoContext) -> BoxFuture<'static, ()> + Send>;

/// One row of the table / point of the plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Sim seconds since the demo started.
    pub t: f64,
    /// Offered load.
    pub load: f64,
    /// Desired replicas (`spec.replicas`).
    pub replicas: i64,
    /// Ready replicas.
    pub ready: i64,
    /// Mean CPU utilisation of Ready pods, percent of requests.
    pub cpu_percent: f64,
    /// Last autoscaler decision and reason.
    pub decision: String,
    /// Pods of the workload.
    pub pods: i64,
    /// Of those, pods the admission webhook patched (annotated `vpaUpdates`).
    pub patched: i64,
    /// What admission changed in the newest patched pod against the template, e.g.
    /// `memory 128Mi→262144k`; empty when no pod was patched.
    pub admission: String,
}

fn sample_workload(ns: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": ns, "labels": {"app": "web"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "registry.example/web:1",
                "resources": {"requests": {"cpu": "200m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}}]}}}})
}

/// The HPA+ for the sample workload: CPU at 60 % of requests, re-evaluated every 5 s, quick to
/// scale down so the compressed day shows both directions.
fn sample_hpa(ns: &str) -> Value {
    json!({"apiVersion": "autoscaling.plimsoll.dev/v1alpha1", "kind": "HorizontalPodAutoscalerPlus",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "minReplicas": 2, "maxReplicas": 20,
            "syncPeriodSeconds": 5,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 15}}}})
}

/// A CronHPA that raises the HPA+'s minimum ahead of the midday peak and lowers it again after:
/// two one-off jobs at fixed instants of the run (6-field cron with seconds, UTC).
fn sample_cronhpa(ns: &str, raise_at: jiff::Timestamp, lower_at: jiff::Timestamp) -> Value {
    let at = |t: jiff::Timestamp| {
        let z = t.to_zoned(jiff::tz::TimeZone::UTC);
        format!(
            "{} {} {} {} {} *",
            z.second(),
            z.minute(),
            z.hour(),
            z.day(),
            z.month()
        )
    };
    json!({"apiVersion": "autoscaling.plimsoll.dev/v1alpha1", "kind": "CronHorizontalPodAutoscaler",
        "metadata": {"name": "web-peak", "namespace": ns},
        "spec": {"scaleTargetRef": {"apiVersion": "autoscaling.plimsoll.dev/v1alpha1", "kind": "HorizontalPodAutoscalerPlus", "name": "web"},
            "jobs": [
                {"name": "before-peak", "schedule": at(raise_at), "targetSize": 6, "runOnce": true},
                {"name": "after-peak", "schedule": at(lower_at), "targetSize": 2, "runOnce": true}]}})
}

/// A VPA in `Initial` mode for memory only: vpa-admission gives pods created after the first
/// recommendation the recommended memory request (limits in proportion); nothing is evicted,
/// and CPU requests stay as the template has them, so the HPA+'s CPU target keeps its meaning.
fn sample_vpa(ns: &str) -> Value {
    json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "updatePolicy": {"updateMode": "Initial"}, "recommenders": [{"name": "plimsoll"}],
            "resourcePolicy": {"containerPolicies": [{"containerName": "*", "controlledResources": ["memory"]}]}}})
}

/// The requests of a pod's first container, or of the template in a Deployment.
fn requests(containers: Option<&Value>) -> serde_json::Map<String, Value> {
    containers
        .and_then(|c| c.pointer("/0/resources/requests"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// `resource old→new` for each request the pod has differently from the template.
fn changed_requests(
    template: &serde_json::Map<String, Value>,
    pod: &serde_json::Map<String, Value>,
) -> String {
    pod.iter()
        .filter(|(k, v)| template.get(*k) != Some(*v))
        .map(|(k, v)| {
            let old = template.get(k).and_then(Value::as_str).unwrap_or("none");
            format!("{k} {old}→{}", v.as_str().unwrap_or_default())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Installs every Plimsoll CRD, generated from the Rust types (so the demo runs from any
/// directory).
async fn install_crds(cluster: &crate::Cluster) -> usize {
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

fn last_decision(cluster: &crate::Cluster, ns: &str) -> String {
    let mut best: Option<(String, String)> = None;
    for def in cluster
        .registry
        .all()
        .iter()
        .filter(|d| d.kind.contains("HorizontalPodAutoscaler"))
    {
        let (items, _) = cluster
            .store
            .list(&(def.group.clone(), def.plural.clone()), Some(ns));
        for o in items.iter().filter(|o| {
            o.pointer("/spec/scaleTargetRef/name")
                .and_then(Value::as_str)
                == Some("web")
        }) {
            // An HPA+ records its last decision and the reason for it; prefer that.
            if let Some(reason) = o
                .pointer("/status/lastDecision/reason")
                .and_then(Value::as_str)
            {
                let at = o
                    .pointer("/status/lastDecision/time")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let text = match o
                    .pointer("/status/lastDecision/desiredReplicas")
                    .and_then(Value::as_i64)
                {
                    Some(n) => format!("→{n}: {reason}"),
                    None => reason.to_owned(),
                };
                if best.as_ref().is_none_or(|(t, _)| at >= *t) {
                    best = Some((at, text));
                }
                continue;
            }
            for c in o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let at = c
                    .get("lastTransitionTime")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let text = format!(
                    "{}: {}",
                    c.get("reason").and_then(Value::as_str).unwrap_or_default(),
                    c.get("message").and_then(Value::as_str).unwrap_or_default()
                );
                if best.as_ref().is_none_or(|(t, _)| at > *t) {
                    best = Some((at, text));
                }
            }
        }
    }
    best.map_or_else(|| "-".to_string(), |(_, t)| t)
}

fn take(cluster: &crate::Cluster, ns: &str, t: f64) -> Sample {
    let dep = cluster
        .store
        .get(&("apps".into(), "deployments".into()), ns, "web");
    let replicas = dep
        .as_ref()
        .and_then(|d| d.pointer("/spec/replicas"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let ready = dep
        .as_ref()
        .and_then(|d| d.pointer("/status/readyReplicas"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let (pods, _) = cluster
        .store
        .list(&(String::new(), "pods".into()), Some(ns));
    let web: Vec<_> = pods
        .iter()
        .filter(|p| p.pointer("/metadata/labels/app").and_then(Value::as_str) == Some("web"))
        .collect();
    let template = requests(
        dep.as_ref()
            .and_then(|d| d.pointer("/spec/template/spec/containers")),
    );
    let patched: Vec<_> = web
        .iter()
        .filter(|p| p.pointer("/metadata/annotations/vpaUpdates").is_some())
        .collect();
    let admission = patched
        .iter()
        .max_by_key(|p| {
            p.pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        })
        .map(|p| changed_requests(&template, &requests(p.pointer("/spec/containers"))))
        .unwrap_or_default();
    let (mut used, mut requested) = (0.0, 0.0);
    for p in &web {
        let name = p
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if let Some(u) = cluster.model.pod_usage(ns, name) {
            used += u.containers.iter().map(|c| c.cpu_millis).sum::<f64>();
            requested += p
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| {
                    c.pointer("/resources/requests/cpu")
                        .and_then(Value::as_str)
                        .and_then(parse_quantity)
                })
                .sum::<f64>()
                * 1000.0;
        }
    }
    Sample {
        t,
        load: cluster
            .model
            .current_load(ns, "deployments", "web")
            .unwrap_or(0.0),
        replicas,
        ready,
        cpu_percent: if requested > 0.0 {
            100.0 * used / requested
        } else {
            0.0
        },
        decision: last_decision(cluster, ns),
        pods: web.len() as i64,
        patched: patched.len() as i64,
        admission,
    }
}

/// The time of day on the compressed day (`day` sim seconds make 24 h), e.g. `13:45`.
fn clock_label(t: f64, day: f64) -> String {
    let minutes = if day > 0.0 {
        ((t.max(0.0) / day) * 1440.0) as u64
    } else {
        0
    };
    format!("{:02}:{:02}", (minutes / 60) % 24, minutes % 60)
}

/// Runs the demo; returns the samples it plotted.
pub async fn run(config: DemoConfig, services: Vec<Service>) -> Result<Vec<Sample>> {
    // A bad plot name fails now, not after the whole run.
    let plot_format =
        Format::for_plot_file(&config.plot).map_err(|e| Error::Usage(e.to_string()))?;
    let sim = Sim::start(SimConfig {
        time_scale: config.time_scale,
        ..SimConfig::default()
    })
    .await?;
    let cluster = sim.cluster.clone();
    let ns = config.namespace.clone();
    let crds = install_crds(&cluster).await;
    // The day is compressed into the run; the clock is not (see DemoConfig::time_scale).
    let day = config.duration.as_secs_f64() * config.time_scale;
    install_samples(&sim, &config, &ns, day).await?;
    let shutdown = CancellationToken::new();
    let ctx = DemoContext {
        client: sim.kube_client().await?,
        kubeconfig: sim.kubeconfig(),
        namespace: ns.clone(),
        shutdown: shutdown.clone(),
    };
    let handles: Vec<_> = services
        .into_iter()
        .map(|s| tokio::spawn(s(ctx.clone())))
        .collect();
    if config.print {
        println!(
            "plimsoll demo: sim at {} (time scale {}×, {} CRD objects installed, {} services)",
            sim.base_url,
            config.time_scale,
            crds,
            handles.len()
        );
        println!(
            "{:<10} {:>8} {:>9} {:>6} {:>9}  last decision",
            "time", "load", "replicas", "cpu", "admitted"
        );
    }
    let samples = sample_until_done(&cluster, &config, &ns, day).await;
    shutdown.cancel();
    for h in handles {
        let _ = tokio::time::timeout(Duration::from_secs(5), h).await;
    }
    std::fs::write(
        &config.plot,
        chart(
            &samples,
            "plimsoll demo: load and replicas over a simulated day",
        )
        .render(plot_format),
    )
    .map_err(Error::Io)?;
    if config.print {
        println!("{}", admission_summary(samples.last()));
        println!("plot written to {}", config.plot.display());
    }
    sim.shutdown().await;
    Ok(samples)
}

/// Creates the namespaces, the sample workload and its autoscalers, and the day's load.
async fn install_samples(
    sim: &crate::SimHandle,
    config: &DemoConfig,
    ns: &str,
    day: f64,
) -> Result<()> {
    let cluster = &sim.cluster;
    let ns = ns.to_string();
    let caller = Caller::controller("demo");
    for name in [ns.as_str(), SYSTEM_NAMESPACE] {
        cluster
            .create_manifest(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
                &caller,
            )
            .await?;
    }
    cluster
        .create_manifest(sample_workload(&ns), &caller)
        .await?;
    cluster.create_manifest(sample_hpa(&ns), &caller).await?;
    let start = jiff::Timestamp::now();
    let offset = |fraction: f64| {
        start + jiff::SignedDuration::from_secs_f64(config.duration.as_secs_f64() * fraction)
    };
    cluster
        .create_manifest(sample_cronhpa(&ns, offset(0.35), offset(0.65)), &caller)
        .await?;
    cluster.create_manifest(sample_vpa(&ns), &caller).await?;
    sim.set_load(
        &ns,
        "deployments",
        "web",
        LoadSpec {
            // Trough at midnight, peak at noon.
            profile: LoadProfile::Sine {
                base: f64::midpoint(config.peak, config.trough),
                amplitude: (config.peak - config.trough) / 2.0,
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

/// Samples the cluster every `sample_every` until the run's duration is over, printing a line
/// per sample when asked to.
async fn sample_until_done(
    cluster: &crate::Cluster,
    config: &DemoConfig,
    ns: &str,
    day: f64,
) -> Vec<Sample> {
    let started = Instant::now();
    let t0 = cluster.clock.elapsed_secs();
    let mut samples = Vec::new();
    while started.elapsed() < config.duration {
        tokio::time::sleep(
            config
                .sample_every
                .min(config.duration.saturating_sub(started.elapsed()))
                .max(Duration::from_millis(10)),
        )
        .await;
        let s = take(cluster, ns, cluster.clock.elapsed_secs() - t0);
        if config.print {
            let mut decision = s.decision.clone();
            decision.truncate(70);
            println!(
                "{:<10} {:>8.0} {:>5}/{:<3} {:>5.0}% {:>9}  {decision}",
                clock_label(s.t, day),
                s.load,
                s.ready,
                s.replicas,
                s.cpu_percent,
                format!("{}/{}", s.patched, s.pods)
            );
        }
        samples.push(s);
    }
    samples
}

/// The closing line on what vpa-admission did to the workload's pods.
fn admission_summary(last: Option<&Sample>) -> String {
    match last {
        Some(s) if s.patched > 0 => format!(
            "admission: {} of {} web pods were created with the VPA's recommendation ({})",
            s.patched, s.pods, s.admission
        ),
        _ => "admission: no web pod was created after the first recommendation".to_owned(),
    }
}

/// Draws the samples as a line chart: load (left axis) and replicas (right axis, steps)
/// against sim time. Written as SVG or PNG by the plot file's extension.
#[allow(clippy::many_single_char_names)] // x/y scales and w/h are the plot's vocabulary
pub fn chart(samples: &[Sample], title: &str) -> Chart {
    const LOAD: Colour = Colour::hex(0x1f_77_b4);
    const REPLICAS: Colour = Colour::hex(0xd6_27_28);
    let (w, h) = (960_u32, 420_u32);
    let (left, right, top, bottom) = (70.0, 70.0, 50.0, 50.0);
    let (pw, ph) = (f64::from(w) - left - right, f64::from(h) - top - bottom);
    let t_max = samples.iter().map(|s| s.t).fold(1.0_f64, f64::max);
    let load_max = nice_max(samples.iter().map(|s| s.load).fold(1.0, f64::max));
    let rep_max = nice_max(
        samples
            .iter()
            .map(|s| s.replicas.max(s.ready) as f64)
            .fold(1.0, f64::max),
    );
    let x = |t: f64| left + pw * t / t_max;
    let yl = |v: f64| top + ph * (1.0 - v / load_max);
    let yr = |v: f64| top + ph * (1.0 - v / rep_max);
    let mut c = Chart::new(w, h);
    c.text(
        Text::new(f64::from(w) / 2.0, 28.0, title)
            .size(16.0)
            .anchor(Anchor::Middle),
    );
    for i in 0..=5 {
        let f = f64::from(i) / 5.0;
        let y = top + ph * (1.0 - f);
        c.polyline(
            vec![(left, y), (left + pw, y)],
            Stroke::solid(Colour::hex(0xe5_e5_e5), 1.0),
        );
        c.text(
            Text::new(left - 6.0, y + 4.0, format!("{:.0}", load_max * f))
                .anchor(Anchor::End)
                .colour(LOAD),
        );
        c.text(Text::new(left + pw + 6.0, y + 4.0, format!("{:.0}", rep_max * f)).colour(REPLICAS));
    }
    let hours = (t_max / 3600.0).ceil().max(1.0) as u64;
    let step = (hours / 12).max(1);
    for hr in (0..=hours).step_by(step as usize) {
        let t = hr as f64 * 3600.0;
        if t > t_max {
            break;
        }
        c.text(Text::new(x(t), top + ph + 18.0, format!("{hr}h")).anchor(Anchor::Middle));
    }
    c.stroke_rect(
        left,
        top,
        pw,
        ph,
        Stroke::solid(Colour::hex(0x33_33_33), 1.0),
    );
    c.polyline(
        samples.iter().map(|s| (x(s.t), yl(s.load))).collect(),
        Stroke::solid(LOAD, 2.0),
    );
    let replicas: Vec<(f64, f64)> = samples
        .iter()
        .map(|s| (x(s.t), yr(s.replicas as f64)))
        .collect();
    c.polyline(step_points(&replicas, None), Stroke::solid(REPLICAS, 2.0));
    c.text(Text::new(left, top - 8.0, "load (units/s, left)").colour(LOAD));
    c.text(
        Text::new(left + pw, top - 8.0, "replicas (right)")
            .anchor(Anchor::End)
            .colour(REPLICAS),
    );
    c.text(
        Text::new(left + pw / 2.0, f64::from(h) - 12.0, "simulated time").anchor(Anchor::Middle),
    );
    c
}

fn nice_max(v: f64) -> f64 {
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if v <= m * mag {
            return m * mag;
        }
    }
    10.0 * mag
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, load: f64, replicas: i64) -> Sample {
        Sample {
            t,
            load,
            replicas,
            ready: replicas,
            cpu_percent: 50.0,
            decision: String::new(),
            pods: replicas,
            patched: 0,
            admission: String::new(),
        }
    }

    #[test]
    fn admission_changes_against_the_template() {
        let template = requests(Some(
            &json!([{"resources": {"requests": {"cpu": "200m", "memory": "128Mi"}}}]),
        ));
        let pod = requests(Some(
            &json!([{"resources": {"requests": {"cpu": "200m", "memory": "262144k"}}}]),
        ));
        assert_eq!(changed_requests(&template, &pod), "memory 128Mi→262144k");
        assert_eq!(changed_requests(&template, &template), "");
        let mut last = sample(60.0, 900.0, 6);
        assert!(admission_summary(Some(&last)).contains("no web pod"));
        last.patched = 4;
        last.admission = "memory 128Mi→262144k".to_owned();
        assert_eq!(
            admission_summary(Some(&last)),
            "admission: 4 of 6 web pods were created with the VPA's recommendation (memory 128Mi→262144k)"
        );
    }

    #[test]
    fn the_chart_has_both_series_and_axes_in_either_format() {
        let c = chart(
            &[
                sample(0.0, 100.0, 2),
                sample(3600.0, 900.0, 6),
                sample(7200.0, 300.0, 3),
            ],
            "a <b>",
        );
        let svg = c.to_svg();
        assert!(svg.starts_with("<svg"));
        // Six grid lines, the load line and the replicas' step line.
        assert_eq!(svg.matches("<polyline").count(), 8);
        assert!(svg.contains("a &lt;b&gt;"));
        assert!(
            svg.contains(">1000<"),
            "load axis rounded up to a nice maximum"
        );
        let png = c.render(Format::Png);
        assert_eq!(&png[1..4], b"PNG");
        assert_eq!(&png[16..24], [0, 0, 3, 192, 0, 0, 1, 164], "960 × 420");
    }

    #[test]
    fn nice_maxima() {
        assert!((nice_max(7.0) - 10.0).abs() < 1e-9);
        assert!((nice_max(180.0) - 200.0).abs() < 1e-9);
        assert!((nice_max(1800.0) - 2000.0).abs() < 1e-9);
    }
}
