//! Builders for pods, observations and decisions.

use jiff::{SignedDuration, Timestamp};

use crate::api::hpa_plus::{HorizontalPodAutoscalerPlusSpec, MetricSpec, UtilizationBase};
use crate::horizontal::metrics::CalcContext;
use crate::horizontal::observation::{ContainerSample, Observation, PodPhase, PodSample};
use crate::horizontal::proposals::{MetricOutcome, WatermarkSettings, evaluate};
use crate::horizontal::tolerance::Tolerances;
use crate::horizontal::{ControllerConfig, Decision, DecisionInput, History, decide};

/// A fixed reconcile time.
pub(crate) fn t0() -> Timestamp {
    "2026-03-01T12:00:00Z".parse().unwrap()
}

pub(crate) fn ago(now: Timestamp, secs: i64) -> Timestamp {
    now - SignedDuration::from_secs(secs)
}

impl PodSample {
    /// A running, ready pod started 10 minutes before [`t0`] ("cool" for CPU).
    pub(crate) fn test(name: &str) -> Self {
        let start = ago(t0(), 600);
        Self {
            name: name.into(),
            start_time: Some(start),
            ready_transition_time: Some(start),
            metrics_window_seconds: 60,
            containers: vec![ContainerSample {
                name: "app".into(),
                ..ContainerSample::default()
            }],
            ..Self::default()
        }
    }
    /// Request and usage of CPU in millicores (`None` usage = no sample).
    pub(crate) fn cpu(mut self, request: i64, usage: Option<i64>) -> Self {
        let c = &mut self.containers[0];
        c.requests.insert("cpu".into(), request);
        if let Some(u) = usage {
            c.usage.insert("cpu".into(), Ok(u));
        }
        self
    }
    pub(crate) fn cpu_limit(mut self, limit: i64) -> Self {
        self.containers[0].limits.insert("cpu".into(), limit);
        self
    }
    /// Not ready, and never was (went unready at start).
    pub(crate) fn unready(mut self) -> Self {
        self.ready = Some(false);
        self
    }
    /// Started 2 minutes ago and ready for less than one metric window ("hot" CPU).
    pub(crate) fn hot(mut self) -> Self {
        self.start_time = Some(ago(t0(), 120));
        self.ready_transition_time = Some(ago(t0(), 10));
        self
    }
    pub(crate) fn phase(mut self, p: PodPhase) -> Self {
        self.phase = p;
        self
    }
    pub(crate) fn deleting(mut self) -> Self {
        self.deleting = true;
        self
    }
    pub(crate) fn started_ago(mut self, secs: i64) -> Self {
        self.start_time = Some(ago(t0(), secs));
        self.ready_transition_time = self.start_time;
        self
    }
    /// A per-pod custom metric, milli-units.
    pub(crate) fn metric(mut self, name: &str, milli: i64) -> Self {
        self.metrics.insert(name.into(), Ok(milli));
        self
    }
}

/// `n` identical pods named `p-0` … built by `f`.
pub(crate) fn pods(n: usize, f: impl Fn(PodSample) -> PodSample) -> Vec<PodSample> {
    (0..n)
        .map(|i| f(PodSample::test(&format!("p-{i}"))))
        .collect()
}

impl Observation {
    pub(crate) fn test(current: i32, pods: Vec<PodSample>) -> Self {
        Self {
            current_replicas: current,
            pods,
            ..Self::default()
        }
    }
    pub(crate) fn external(mut self, name: &str, milli: i64) -> Self {
        self.external_metrics.insert(name.into(), Ok(vec![milli]));
        self
    }
    pub(crate) fn prometheus(mut self, name: &str, value: Result<i64, &str>) -> Self {
        self.prometheus_metrics
            .insert(name.into(), value.map_err(str::to_owned));
        self
    }
    pub(crate) fn object(mut self, key: &str, milli: i64) -> Self {
        self.object_metrics.insert(key.into(), Ok(milli));
        self
    }
}

/// Evaluates one metric with upstream's test settings (tolerance 0.1, 5 min / 30 s).
pub(crate) fn proposal(metric: &MetricSpec, obs: &Observation) -> MetricOutcome {
    proposal_with(
        metric,
        obs,
        &HorizontalPodAutoscalerPlusSpec::test().max(1000),
    )
}

pub(crate) fn proposal_with(
    metric: &MetricSpec,
    obs: &Observation,
    spec: &HorizontalPodAutoscalerPlusSpec,
) -> MetricOutcome {
    let ctx = CalcContext {
        now: t0(),
        current_replicas: obs.current_replicas,
        status_replicas: obs.status_replicas.unwrap_or(obs.current_replicas),
        tolerances: Tolerances::for_spec(spec, 0.1),
        cpu_initialization_period_seconds: 300,
        initial_readiness_delay_seconds: 30,
        readiness_delay_seconds: spec.readiness_delay_seconds.map_or(0, i64::from),
        utilization_base: spec.utilization_base.unwrap_or(UtilizationBase::Requests),
        pods: &obs.pods,
    };
    let wm = WatermarkSettings {
        algorithm: spec.algorithm.unwrap_or_default(),
        modulo: spec.replica_scaling_absolute_modulo.unwrap_or(1),
        converge: spec.converge_towards_watermark,
        tolerate_zero: spec.tolerate_zero,
        min_replicas: spec.min_replicas.unwrap_or(1),
        max_replicas: spec.max_replicas,
    };
    evaluate(metric, &ctx, obs, wm)
}

/// Runs the full decision at [`t0`] + `at` seconds.
pub(crate) fn run(
    spec: &HorizontalPodAutoscalerPlusSpec,
    obs: &Observation,
    history: &History,
    at: i64,
) -> Decision {
    run_cfg(spec, obs, history, at, &ControllerConfig::default())
}

pub(crate) fn run_cfg(
    spec: &HorizontalPodAutoscalerPlusSpec,
    obs: &Observation,
    history: &History,
    at: i64,
    config: &ControllerConfig,
) -> Decision {
    decide(&DecisionInput {
        spec,
        observed: obs,
        history,
        config,
        now: t0() + SignedDuration::from_secs(at),
    })
}

/// An observation where `n` pods report `per_pod` of custom metric `qps` (milli).
pub(crate) fn qps_pods(n: usize, per_pod: i64) -> Vec<PodSample> {
    pods(n, |p| p.cpu(1000, Some(100)).metric("qps", per_pod))
}
