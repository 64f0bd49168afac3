//! Prometheus metrics of hpa-plus, all prefixed `plimsoll_hpa_plus_`.
//!
//! Per object (labels `namespace`, `name`, and `metric` / `reason` / `transition`):
//! `value`, `target`, `low_watermark`, `high_watermark`, `proposal` (replicas one metric asks
//! for), `effective_replicas` (the decided replicas), `restricted_scaling{reason}` (1 for the
//! rule that limited the last decision, 0 for the others seen before),
//! `transition_countdown_seconds{transition}`, `predicted_replicas` and
//! `predicted_load{metric}` (`spec.predictive`). Per-object series are removed when the object is
//! deleted, and a metric's series when it leaves the spec or is renamed, so the cardinality
//! follows the number of autoscalers and their metrics.
//!
//! The `metric` label is the metric's name as the decision reports it ([`series_names`]),
//! except for a `type: Prometheus` metric without `name`: its name would be the query, text of
//! any length, so its label is `prometheus-<i>`, `i` its position in `spec.metrics` (from 0).
//!
//! Controller-wide: `reconcile_runs_total`, `reconcile_failures_total{error}`,
//! `reconcile_duration_seconds` (from `plimsoll-runtime`), `queue_depth` (objects whose
//! re-evaluation is due and not started), `objects`, `rescales_total{direction}`,
//! `metric_failures_total{type}`, `status_writes_total`.
//!
//! Per Prometheus server ([`ServerMetrics`]), labelled `server` with the
//! `--prometheus-allowed-servers` entry (or `--prometheus-address`) a query's address falls
//! under, in one canonical spelling: `prometheus_server_open` and
//! `prometheus_queries_refused_total{reason}`. The operator writes that list, so these series
//! are as many as its entries however many addresses autoscalers name.

use std::sync::atomic::AtomicU64;

use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlusSpec;
use plimsoll_core::horizontal::source;
use plimsoll_core::horizontal::{Countdown, Decision, LimitedBy};
use plimsoll_runtime::telemetry::ReconcileMetrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

type FloatGauge = Gauge<f64, AtomicU64>;

/// Labels of a per-object series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ObjectLabels {
    /// Namespace of the autoscaler.
    pub namespace: String,
    /// Name of the autoscaler.
    pub name: String,
}

/// The `metric` label of each of `decision`'s proposals, in order: the proposal's metric name,
/// or `prometheus-<i>` for the `i`-th metric of the spec when it is a Prometheus metric without
/// `name` (whose name is its query).
pub fn series_names(spec: &HorizontalPodAutoscalerPlusSpec, decision: &Decision) -> Vec<String> {
    // `spec.metrics`, not `metrics_of`: a spec without metrics is evaluated on the default CPU
    // metric, which is no Prometheus one, and building it here would cost every such object an
    // allocation per evaluation.
    decision
        .proposals
        .iter()
        .enumerate()
        .map(|(i, p)| {
            spec.metrics
                .get(i)
                .and_then(source::of)
                .and_then(|s| s.series_label(i))
                .unwrap_or_else(|| p.metric.clone())
        })
        .collect()
}

/// Labels of a per-metric series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MetricLabels {
    /// Namespace of the autoscaler.
    pub namespace: String,
    /// Name of the autoscaler.
    pub name: String,
    /// The metric's name as the decision reports it (`cpu`, `requests_per_second`, …).
    pub metric: String,
}

/// Labels of `restricted_scaling`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// Namespace of the autoscaler.
    pub namespace: String,
    /// Name of the autoscaler.
    pub name: String,
    /// The rule (`limitedBy`).
    pub reason: String,
}

/// Labels of `transition_countdown_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabels {
    /// Namespace of the autoscaler.
    pub namespace: String,
    /// Name of the autoscaler.
    pub name: String,
    /// One of [`Countdown::TRANSITIONS`].
    pub transition: String,
}

/// A single label `kind`-like key with a static value.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DirectionLabels {
    /// `up` or `down`.
    pub direction: &'static str,
}

/// A metric source type label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabels {
    /// `Resource`, `Pods`, … or the failure reason of the metric.
    pub r#type: String,
}

/// Labels of a per-server series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServerLabels {
    /// The allowed-servers entry, canonical (`http://prom.team-a:9090`).
    pub server: String,
}

/// Labels of `prometheus_queries_refused_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusedLabels {
    /// The allowed-servers entry, canonical.
    pub server: String,
    /// `unresponsive` (its circuit breaker is open) or `busy` (its cap on queries in flight).
    pub reason: &'static str,
}

/// The per-server series of the Prometheus client's circuit breakers and caps
/// (`crate::prometheus`); unregistered families by default (tests).
#[derive(Clone, Debug, Default)]
pub struct ServerMetrics {
    /// 1 while the server's breaker is open (queries fail at once) or probing it; 0 once it
    /// answers again.
    pub open: Family<ServerLabels, Gauge>,
    /// Queries failed without being sent.
    pub refused: Family<RefusedLabels, Counter>,
}

impl ServerMetrics {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "prometheus_server_open",
            "1 while a Prometheus server did not answer several queries in a row and is not \
             queried until its cooldown ends (then one query probes it); 0 once it answers",
            self.open.clone(),
        );
        registry.register(
            "prometheus_queries_refused",
            "Prometheus queries failed without being sent: reason unresponsive (the server's \
             circuit breaker is open) or busy (--prometheus-server-concurrency queries to it \
             in flight)",
            self.refused.clone(),
        );
    }
}

/// The per-object series of `spec.predictive`.
#[derive(Clone, Debug, Default)]
struct PredictiveMetrics {
    replicas: Family<ObjectLabels, Gauge>,
    load: Family<MetricLabels, FloatGauge>,
}

impl PredictiveMetrics {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "predicted_replicas",
            "Replicas the trusted load forecast of spec.predictive needs over the lead window; \
             absent while prediction is off or not trusted",
            self.replicas.clone(),
        );
        registry.register(
            "predicted_load",
            "The forecast peak of each metric's workload-wide load over the lead window (the \
             metric's unit); absent while prediction is off or has no forecast",
            self.load.clone(),
        );
    }
}

/// Every metric family hpa-plus exports.
#[derive(Clone, Debug)]
pub struct Metrics {
    /// Runs, failures by kind and duration of reconciles.
    pub reconcile: ReconcileMetrics,
    value: Family<MetricLabels, FloatGauge>,
    target: Family<MetricLabels, FloatGauge>,
    low_watermark: Family<MetricLabels, FloatGauge>,
    high_watermark: Family<MetricLabels, FloatGauge>,
    proposal: Family<MetricLabels, Gauge>,
    effective_replicas: Family<ObjectLabels, Gauge>,
    restricted_scaling: Family<ReasonLabels, Gauge>,
    countdown: Family<TransitionLabels, Gauge>,
    /// Objects whose re-evaluation is due but not started.
    pub queue_depth: Gauge,
    /// Autoscalers known to the controller.
    pub objects: Gauge,
    rescales: Family<DirectionLabels, Counter>,
    metric_failures: Family<TypeLabels, Counter>,
    /// Status writes.
    pub status_writes: Counter,
    low_load: Family<ObjectLabels, Gauge>,
    tuning_proposal: Family<ObjectLabels, Gauge>,
    /// `minReplicas` lowered by tuning.
    pub min_replicas_lowered: Counter,
    predictive: PredictiveMetrics,
    conflicting: Family<ObjectLabels, Gauge>,
    /// Circuit breakers and caps of the Prometheus servers.
    pub prometheus_servers: ServerMetrics,
}

impl Metrics {
    /// Registers every family in `registry` (pass the `plimsoll_hpa_plus` sub-registry).
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            reconcile: ReconcileMetrics::register(registry),
            value: Family::default(),
            target: Family::default(),
            low_watermark: Family::default(),
            high_watermark: Family::default(),
            proposal: Family::default(),
            effective_replicas: Family::default(),
            restricted_scaling: Family::default(),
            countdown: Family::default(),
            queue_depth: Gauge::default(),
            objects: Gauge::default(),
            rescales: Family::default(),
            metric_failures: Family::default(),
            status_writes: Counter::default(),
            low_load: Family::default(),
            tuning_proposal: Family::default(),
            min_replicas_lowered: Counter::default(),
            predictive: PredictiveMetrics::default(),
            conflicting: Family::default(),
            prometheus_servers: ServerMetrics::default(),
        };
        registry.register(
            "value",
            "Current value of each metric of each autoscaler (the unit of its target)",
            m.value.clone(),
        );
        registry.register(
            "target",
            "Target of each metric (utilization percent, or the value's unit)",
            m.target.clone(),
        );
        registry.register(
            "low_watermark",
            "Low watermark of each Watermark metric",
            m.low_watermark.clone(),
        );
        registry.register(
            "high_watermark",
            "High watermark of each Watermark metric",
            m.high_watermark.clone(),
        );
        registry.register(
            "proposal",
            "Replicas each metric proposes",
            m.proposal.clone(),
        );
        registry.register(
            "effective_replicas",
            "Replicas decided at the last evaluation (status.desiredReplicas)",
            m.effective_replicas.clone(),
        );
        registry.register(
            "restricted_scaling",
            "1 when the rule named by reason limited the last decision",
            m.restricted_scaling.clone(),
        );
        registry.register(
            "transition_countdown_seconds",
            "Seconds before a forbidden window or watermark delay lets a transition happen",
            m.countdown.clone(),
        );
        registry.register(
            "queue_depth",
            "Autoscalers whose re-evaluation is due and has not started",
            m.queue_depth.clone(),
        );
        registry.register("objects", "Autoscalers known", m.objects.clone());
        registry.register(
            "rescales",
            "Scale subresource writes, by direction",
            m.rescales.clone(),
        );
        registry.register(
            "metric_failures",
            "Metrics that could not be evaluated, by failure reason",
            m.metric_failures.clone(),
        );
        registry.register(
            "status_writes",
            "Status writes (only when the status changed)",
            m.status_writes.clone(),
        );
        m.register_tuning_and_conflicts(registry);
        m.predictive.register(registry);
        m.prometheus_servers.register(registry);
        m
    }

    /// The families of `minReplicasTuning` and of conflicts with VPAs.
    fn register_tuning_and_conflicts(&self, registry: &mut Registry) {
        registry.register(
            "low_load",
            "1 while minReplicasTuning finds that the weighted daily peaks need fewer than half \
             of minReplicas",
            self.low_load.clone(),
        );
        registry.register(
            "min_replicas_tuning_proposal",
            "The minReplicas tuning proposes (Report) or set (Apply); absent without a proposal",
            self.tuning_proposal.clone(),
        );
        registry.register(
            "conflicting_autoscaler",
            "1 while a VerticalPodAutoscaler changes the CPU or memory requests this autoscaler \
             scales on (sum for the number of conflicts)",
            self.conflicting.clone(),
        );
        registry.register(
            "min_replicas_lowered",
            "minReplicas changes made by minReplicasTuning in Apply mode",
            self.min_replicas_lowered.clone(),
        );
    }

    /// Records whether `namespace/name` conflicts with a VPA.
    pub fn conflicting(&self, namespace: &str, name: &str, conflicting: bool) {
        self.conflicting
            .get_or_create(&ObjectLabels {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })
            .set(i64::from(conflicting));
    }

    /// Records the forecast of `namespace/name` (`None`: prediction is off, and its series go).
    /// `series` are the `metric` labels of `decision`'s proposals ([`series_names`]).
    pub fn predicted(
        &self,
        namespace: &str,
        name: &str,
        (decision, series): (&Decision, &[String]),
        forecast: Option<&plimsoll_core::horizontal::predictive::Forecast>,
    ) {
        let obj = ObjectLabels {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        let labels = |metric: &str| MetricLabels {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            metric: metric.to_owned(),
        };
        let Some(f) = forecast else {
            self.predictive.replicas.remove(&obj);
            for m in series {
                self.predictive.load.remove(&labels(m));
            }
            return;
        };
        match f.replicas {
            Some(r) => {
                self.predictive
                    .replicas
                    .get_or_create(&obj)
                    .set(i64::from(r));
            }
            None => {
                self.predictive.replicas.remove(&obj);
            }
        }
        for m in &f.metrics {
            // The forecast names a metric as its proposal does; the series as `series` does.
            let Some(label) = decision
                .proposals
                .iter()
                .position(|p| p.metric == m.metric)
                .and_then(|i| series.get(i))
            else {
                continue;
            };
            set_opt(
                &self.predictive.load,
                &labels(label),
                m.load.map(|l| l as f64 / 1000.0),
            );
        }
    }

    /// Records what tuning found for `namespace/name`: the low-load flag and the proposal
    /// (`None`: tuning is off or excluded for the object, and its series go).
    pub fn tuned(&self, namespace: &str, name: &str, tuning: Option<(bool, Option<i32>)>) {
        let obj = ObjectLabels {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        let Some((low_load, proposed)) = tuning else {
            self.low_load.remove(&obj);
            self.tuning_proposal.remove(&obj);
            return;
        };
        self.low_load.get_or_create(&obj).set(i64::from(low_load));
        if let Some(p) = proposed {
            self.tuning_proposal.get_or_create(&obj).set(i64::from(p));
        } else {
            self.tuning_proposal.remove(&obj);
        }
    }

    /// Records the per-object series of one decision; `series` are the `metric` labels of its
    /// proposals ([`series_names`]). `previous` is what the last call published for this object
    /// (`None` on first sight): the `restricted_scaling` and countdown series are touched only
    /// where they change, so a steady evaluation does not look up all 23 of them.
    pub fn observe(
        &self,
        namespace: &str,
        name: &str,
        (decision, series): (&Decision, &[String]),
        previous: Option<Published>,
    ) -> Published {
        let obj = ObjectLabels {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        self.effective_replicas
            .get_or_create(&obj)
            .set(i64::from(decision.desired_replicas));
        for (p, metric) in decision.proposals.iter().zip(series) {
            let labels = MetricLabels {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                metric: metric.clone(),
            };
            set_opt(&self.value, &labels, p.value);
            set_opt(&self.target, &labels, p.target);
            set_opt(&self.low_watermark, &labels, p.low_watermark);
            set_opt(&self.high_watermark, &labels, p.high_watermark);
            match p.replicas {
                Some(r) => {
                    self.proposal.get_or_create(&labels).set(i64::from(r));
                }
                None => {
                    self.proposal.remove(&labels);
                }
            }
            if let Some(reason) = p.failure_reason {
                self.metric_failures
                    .get_or_create(&TypeLabels {
                        r#type: reason.to_owned(),
                    })
                    .inc();
            }
        }
        let now = Published::of(decision);
        self.restricted(namespace, name, previous, now.limited_by);
        self.countdowns(namespace, name, decision, previous.map(|p| p.countdowns));
        now
    }

    /// `restricted_scaling`: 1 for the rule that limits now, 0 for one that limited before.
    /// Without `previous` (first sight) every rule is reset that has a series, so an object gets
    /// one series per rule it hit.
    fn restricted(
        &self,
        namespace: &str,
        name: &str,
        previous: Option<Published>,
        now: Option<LimitedBy>,
    ) {
        let labels = |rule: LimitedBy| ReasonLabels {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            reason: rule.as_str().to_owned(),
        };
        match previous {
            Some(before) if before.limited_by == now => {}
            Some(before) => {
                if let Some(rule) = before.limited_by {
                    self.restricted_scaling.get_or_create(&labels(rule)).set(0);
                }
                if let Some(rule) = now {
                    self.restricted_scaling.get_or_create(&labels(rule)).set(1);
                }
            }
            None => {
                for rule in LimitedBy::ALL {
                    let labels = labels(rule);
                    if now == Some(rule) {
                        self.restricted_scaling.get_or_create(&labels).set(1);
                    } else if self.restricted_scaling.remove(&labels) {
                        self.restricted_scaling.get_or_create(&labels).set(0);
                    }
                }
            }
        }
    }

    /// `transition_countdown_seconds`: set for the transitions counting down, removed for
    /// those that stopped (all of them without `before`, on first sight).
    fn countdowns(&self, namespace: &str, name: &str, decision: &Decision, before: Option<u8>) {
        let before = before.unwrap_or(u8::MAX);
        for (i, transition) in Countdown::TRANSITIONS.into_iter().enumerate() {
            let labels = || TransitionLabels {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                transition: transition.to_owned(),
            };
            match decision
                .countdowns
                .iter()
                .find(|c| c.transition == transition)
            {
                Some(c) => {
                    self.countdown.get_or_create(&labels()).set(c.seconds_left);
                }
                None if before & (1 << i) != 0 => {
                    self.countdown.remove(&labels());
                }
                None => {}
            }
        }
    }

    /// Counts a scale write from `from` to `to` replicas.
    pub fn rescaled(&self, from: i32, to: i32) {
        let direction = if to > from { "up" } else { "down" };
        self.rescales
            .get_or_create(&DirectionLabels { direction })
            .inc();
    }

    /// Removes the per-metric series of `namespace/name` labelled with one of `metrics`: the
    /// object is gone, or those metrics left its spec (or were renamed).
    pub fn forget_metrics<'a>(
        &self,
        namespace: &str,
        name: &str,
        metrics: impl IntoIterator<Item = &'a String>,
    ) {
        for metric in metrics {
            let labels = MetricLabels {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                metric: metric.clone(),
            };
            self.value.remove(&labels);
            self.target.remove(&labels);
            self.low_watermark.remove(&labels);
            self.high_watermark.remove(&labels);
            self.proposal.remove(&labels);
            self.predictive.load.remove(&labels);
        }
    }

    /// Removes every per-object series of `namespace/name` (`metrics` = the `metric` labels it
    /// had).
    pub fn forget(&self, namespace: &str, name: &str, metrics: &[String]) {
        let obj = ObjectLabels {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        self.effective_replicas.remove(&obj);
        self.tuned(namespace, name, None);
        self.predictive.replicas.remove(&obj);
        self.conflicting.remove(&obj);
        self.forget_metrics(namespace, name, metrics);
        for rule in LimitedBy::ALL {
            self.restricted_scaling.remove(&ReasonLabels {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                reason: rule.as_str().to_owned(),
            });
        }
        for transition in Countdown::TRANSITIONS {
            self.countdown.remove(&TransitionLabels {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                transition: transition.to_owned(),
            });
        }
    }
}

/// Which of an object's optional series the last [`Metrics::observe`] published.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Published {
    limited_by: Option<LimitedBy>,
    /// Bit `i`: [`Countdown::TRANSITIONS`]`[i]` has a series.
    countdowns: u8,
}

impl Published {
    fn of(decision: &Decision) -> Self {
        let countdowns = Countdown::TRANSITIONS
            .iter()
            .enumerate()
            .filter(|(_, t)| decision.countdowns.iter().any(|c| c.transition == **t))
            .fold(0u8, |bits, (i, _)| bits | (1 << i));
        Self {
            limited_by: decision.limited_by,
            countdowns,
        }
    }
}

fn set_opt(family: &Family<MetricLabels, FloatGauge>, labels: &MetricLabels, v: Option<f64>) {
    match v {
        Some(v) => {
            family.get_or_create(labels).set(v);
        }
        None => {
            family.remove(labels);
        }
    }
}
