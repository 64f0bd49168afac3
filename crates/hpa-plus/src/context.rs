//! Shared state of the controller: clients, caches, metrics, and per-object memory.
//!
//! Per-object memory ([`Memory`]: the decision history of recommendations, scale events and
//! watermark timers, plus what is needed to clean up) is keyed by the object's uid and dropped
//! when the object is deleted — or, after a relist, when it is no longer listed. The history is
//! also written into the object (`status.memory`, or an annotation on a native HPA; see
//! `plimsoll_core::horizontal::memory`): an object this process has not seen yet, after a restart
//! or a leader handover, starts from what the object carries, not from an empty history.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use kube::Client;
use kube::runtime::reflector::Store;
use plimsoll_core::api::cron::CronHorizontalPodAutoscaler;
use plimsoll_core::api::hpa_plus::{
    HorizontalPodAutoscalerPlus, HorizontalPodAutoscalerPlusStatus, PodSelectionStrategy,
};
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_core::horizontal::ControllerConfig;
use plimsoll_core::horizontal::evaluate::Held;
use plimsoll_core::horizontal::pod_owner;
use plimsoll_runtime::events::Events;
use plimsoll_runtime::leader::LeaderHandle;
use plimsoll_runtime::leader::shards::ShardHandle;
use plimsoll_runtime::metrics_api::MetricsSource;
use plimsoll_runtime::scale::ScaleClient;
use plimsoll_runtime::selector::Selector;
use plimsoll_runtime::target_index::TargetIndex;

use crate::metrics::Metrics;
use crate::pods::{PodIndex, PodInfo};
use crate::prometheus::PrometheusMetrics;
use crate::replica_sets::ReplicaSetIndex;
use crate::tuning::Exclusion;

/// What the controller remembers about one autoscaler between reconciles.
#[derive(Clone, Debug)]
pub struct Memory {
    /// Namespace of the object.
    pub namespace: String,
    /// Name of the object.
    pub name: String,
    /// What the next evaluation starts from: the decision history, and tuning's and
    /// prediction's state while they are on.
    pub held: Held,
    /// Metric names of the last decision (to remove their series on delete).
    pub metric_names: Vec<String>,
    /// When the next evaluation is due (for `queue_depth`).
    pub next_due: Option<Instant>,
    /// A native `autoscaling/v2` HPA (else an HPA+).
    pub native: bool,
    /// The optional per-object metric series the last evaluation published.
    pub published: crate::metrics::Published,
}

/// A status this replica wrote, and the `resourceVersion` of the object it was computed from.
/// The status is kept packed ([`crate::cached`]), about 200 bytes instead of 2.5 KB decoded: it
/// is read back only while the watch lags the write, but it stays until the object next
/// changes, and a write the server found unchanged brings no watch event.
#[derive(Debug)]
struct Written {
    over: String,
    status: Box<[u8]>,
    native: bool,
}

/// Shrinks `map` when it has room for more than twice what it holds (and a thousand more),
/// keeping a quarter to grow into: after many entries left at once, not after each one, so that
/// a table that only breathes is not rebuilt again and again.
pub(crate) fn give_back_room<K: Eq + std::hash::Hash, V>(map: &mut HashMap<K, V>) {
    if map.capacity() > 2 * map.len() + 1024 {
        map.shrink_to(map.len() + map.len() / 4);
    }
}

/// The selector each autoscaler's target reported, by namespace, for `AmbiguousSelector`.
type SelectorIndex = HashMap<String, HashMap<String, (String, Selector)>>;

/// Everything a reconcile needs.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// Scale subresource reads and writes, and rollout state.
    pub scale: ScaleClient,
    /// The metrics APIs (a fake in unit tests).
    pub metrics_source: Arc<dyn MetricsSource>,
    /// Events as `hpa-plus`.
    pub events: Events,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// The shared pod cache.
    pub pods: PodIndex,
    /// CronHorizontalPodAutoscalers (reflector).
    pub crons: Store<CronHorizontalPodAutoscaler>,
    /// Controller-wide decision settings.
    pub config: ControllerConfig,
    /// The leader election; scale and status writes happen only while leading.
    pub leader: LeaderHandle,
    /// The shards this replica acts on (`--shards`): an object is evaluated, and written, only
    /// while its shard is held. Without sharding, one shard held while leading.
    pub shards: ShardHandle,
    /// `type: Prometheus` metrics: clients and the value cache.
    pub prometheus: PrometheusMetrics,
    /// `--min-replicas-tuning-exclude`.
    pub tuning_exclude: Option<Exclusion>,
    /// VerticalPodAutoscalers by the workload they size (conflict detection).
    pub vpas: TargetIndex<VerticalPodAutoscaler>,
    /// `--record-dir`: writes what each evaluation observed and decided (off by default).
    pub recorder: crate::record::Recorder,
    /// `--pod-selection-strategy`: the ReplicaSets' controllers, for `podSelectionStrategy:
    /// OwnerReferences` (KEP-5325); `None` (the default) ignores that field.
    pub replica_sets: Option<ReplicaSetIndex>,
    // Boxed: a hash table keeps a slot of the value's size for every bucket, filled or not, and
    // a replica's tables outgrow what it holds while shards settle (a first replica holds every
    // shard for a moment). Inline, these two cost 95 MB of slots at 100,000 objects
    // (docs/benchmarks.md, "Memory that divides with shards").
    memory: Mutex<HashMap<String, Box<Memory>>>,
    written: Mutex<HashMap<String, Box<Written>>>,
    selectors: Mutex<SelectorIndex>,
    /// The warnings logged about each object, so that a failure is not logged at every period.
    pub repeats: plimsoll_runtime::repeats::Repeats,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What a [`Context`] is built from (everything but the per-object memory).
pub struct ContextParts {
    /// The API client.
    pub client: Client,
    /// Scale subresource reads and writes, and rollout state.
    pub scale: ScaleClient,
    /// The metrics APIs (a fake in unit tests).
    pub metrics_source: Arc<dyn MetricsSource>,
    /// Events as `hpa-plus`.
    pub events: Events,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// The shared pod cache.
    pub pods: PodIndex,
    /// CronHorizontalPodAutoscalers (reflector).
    pub crons: Store<CronHorizontalPodAutoscaler>,
    /// Controller-wide decision settings.
    pub config: ControllerConfig,
    /// The leader election; scale and status writes happen only while leading.
    pub leader: LeaderHandle,
    /// `type: Prometheus` metrics: clients and the value cache.
    pub prometheus: PrometheusMetrics,
    /// `--min-replicas-tuning-exclude`.
    pub tuning_exclude: Option<Exclusion>,
    /// VerticalPodAutoscalers by the workload they size (conflict detection).
    pub vpas: TargetIndex<VerticalPodAutoscaler>,
}

impl Context {
    /// A context with empty memory.
    pub fn from_parts(parts: ContextParts) -> Self {
        let ContextParts {
            client,
            scale,
            metrics_source,
            events,
            metrics,
            pods,
            crons,
            config,
            leader,
            prometheus,
            tuning_exclude,
            vpas,
        } = parts;
        Self {
            client,
            scale,
            metrics_source,
            events,
            metrics,
            pods,
            crons,
            config,
            shards: ShardHandle::single(leader.clone()),
            leader,
            prometheus,
            tuning_exclude,
            vpas,
            recorder: crate::record::Recorder::off(),
            replica_sets: None,
            memory: Mutex::new(HashMap::new()),
            written: Mutex::new(HashMap::new()),
            selectors: Mutex::new(HashMap::new()),
            repeats: plimsoll_runtime::repeats::Repeats::default(),
        }
    }

    /// The same context gated on `shards` (the service's [`ShardHandle`] with `--shards`).
    #[must_use]
    pub fn with_shards(self, shards: ShardHandle) -> Self {
        Self { shards, ..self }
    }

    /// This context acting on `podSelectionStrategy` with `replica_sets`
    /// (`--pod-selection-strategy`).
    #[must_use]
    pub fn with_replica_sets(self, replica_sets: Option<ReplicaSetIndex>) -> Self {
        Self {
            replica_sets,
            ..self
        }
    }

    /// The pods of the target `kind`/`name` in `namespace` that its `selector` matches and that
    /// count under the autoscaler's `podSelectionStrategy` (KEP-5325), sorted by name. With the
    /// opt-in off the field is ignored: every matched pod counts, as upstream with its gate off.
    pub fn target_pods(
        &self,
        namespace: &str,
        selector: &Selector,
        strategy: Option<PodSelectionStrategy>,
        (kind, name): (&str, &str),
    ) -> Vec<Arc<PodInfo>> {
        let pods = self.pods.select(namespace, selector);
        let (Some(index), Some(strategy @ PodSelectionStrategy::OwnerReferences)) =
            (&self.replica_sets, strategy)
        else {
            return pods;
        };
        let controllers = index.controllers(namespace);
        let target = pod_owner::Target {
            kind,
            name,
            uid: None,
        };
        pod_owner::select(
            strategy,
            &target,
            pods,
            |p| p.controller.as_ref(),
            |uid| controllers.get(uid),
        )
    }

    /// This context recording with `recorder` (`--record-dir`).
    #[must_use]
    pub fn with_recorder(self, recorder: crate::record::Recorder) -> Self {
        Self { recorder, ..self }
    }

    /// What this process holds for `uid` (`None` for an object seen for the first time).
    pub fn held(&self, uid: &str) -> Option<Held> {
        lock(&self.memory).get(uid).map(|m| m.held.clone())
    }

    /// The optional metric series the last evaluation of `uid` published (`None` on first
    /// sight).
    pub fn published(&self, uid: &str) -> Option<crate::metrics::Published> {
        lock(&self.memory).get(uid).map(|m| m.published)
    }

    /// Stores the memory of `uid` after a reconcile. The per-metric series of metrics the last
    /// evaluation had and this one does not (removed from the spec, or renamed) go.
    pub fn remember(&self, uid: &str, memory: Memory) {
        let mut all = lock(&self.memory);
        let before = all.insert(uid.to_owned(), Box::new(memory));
        self.metrics.objects.set(all.len() as i64);
        let Some(before) = before else { return };
        let Some(now) = all.get(uid) else { return };
        if before.metric_names != now.metric_names {
            self.metrics.forget_metrics(
                &before.namespace,
                &before.name,
                before
                    .metric_names
                    .iter()
                    .filter(|m| !now.metric_names.contains(m)),
            );
        }
    }

    /// Records that this replica wrote `status` for `uid` (the whole HPA+ status as the server
    /// now has it; for a native HPA, with the memory its annotation now carries), computed from
    /// the object at `resourceVersion` `over`.
    pub fn wrote(
        &self,
        uid: &str,
        over: Option<&str>,
        status: &HorizontalPodAutoscalerPlusStatus,
        native: bool,
    ) {
        let packed = over.and_then(|over| {
            match crate::cached::deflate_after::<HorizontalPodAutoscalerPlus>(status) {
                Ok(status) => Some((over, status)),
                // Never for a status this process built; without the entry the next evaluation
                // compares with the cache, and may write the same status once more.
                Err(error) => {
                    tracing::warn!(%error, "could not pack a written status");
                    None
                }
            }
        });
        let mut written = lock(&self.written);
        match packed {
            Some((over, status)) => {
                written.insert(
                    uid.to_owned(),
                    Box::new(Written {
                        over: over.to_owned(),
                        status,
                        native,
                    }),
                );
            }
            None => {
                written.remove(uid);
            }
        }
    }

    /// The status this replica last wrote for `uid`, while the cached object is still the one
    /// it was computed from (`version`): the watch has not delivered the write yet, so the cache
    /// is older than the server. Comparing with the cache then would write the same status
    /// again at every evaluation until the watch catches up, adding to the load that delays
    /// it. Once the cache has moved on, the entry is dropped and the cache is the truth again
    /// (whoever wrote last).
    pub fn written_over(
        &self,
        uid: &str,
        version: Option<&str>,
    ) -> Option<HorizontalPodAutoscalerPlusStatus> {
        let mut written = lock(&self.written);
        let entry = written.get(uid)?;
        if version == Some(entry.over.as_str()) {
            match crate::cached::inflate_after::<HorizontalPodAutoscalerPlus, _>(&entry.status) {
                Ok(status) => return Some(status),
                Err(error) => tracing::warn!(%error, "could not unpack a written status"),
            }
        }
        written.remove(uid);
        None
    }

    /// The watch delivered `uid` at `version`. A status remembered from another version is no
    /// longer needed: the cache now shows that write, or a later one. Dropping it here, and not
    /// at the object's next evaluation a period later, keeps only the writes still in flight:
    /// holding every status of a first pass for a whole period cost 130–170 MiB of RSS at
    /// 50,000 objects (docs/benchmarks.md).
    pub fn cache_moved(&self, uid: &str, version: Option<&str>) {
        let mut written = lock(&self.written);
        if written
            .get(uid)
            .is_some_and(|w| version != Some(w.over.as_str()))
        {
            written.remove(uid);
        }
    }

    /// Drops everything remembered about `uid` (the object was deleted).
    pub fn forget(&self, uid: &str) {
        lock(&self.written).remove(uid);
        self.repeats.forget(uid);
        let removed = {
            let mut all = lock(&self.memory);
            let removed = all.remove(uid);
            self.metrics.objects.set(all.len() as i64);
            removed
        };
        if let Some(m) = removed {
            self.metrics.forget(&m.namespace, &m.name, &m.metric_names);
            if let Some(ns) = lock(&self.selectors).get_mut(&m.namespace) {
                ns.remove(uid);
            }
        }
    }

    /// Drops the memory of every object of one kind (`native` or not) whose uid is not in
    /// `live` (after a relist: deletions missed while the watch was down).
    pub fn retain(&self, live: &HashSet<String>, native: bool) {
        let stale: Vec<String> = lock(&self.memory)
            .iter()
            .filter(|(uid, m)| m.native == native && !live.contains(*uid))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in stale {
            self.forget(&uid);
        }
        lock(&self.written).retain(|uid, w| w.native != native || live.contains(uid));
        self.shrink();
    }

    /// Gives back the room of objects no longer held, after many left at once (a shard lost,
    /// a relist): a table never shrinks by itself, and would keep the size of the most this
    /// replica ever held.
    pub fn shrink(&self) {
        give_back_room(&mut lock(&self.memory));
        give_back_room(&mut lock(&self.written));
    }

    /// Records the selector of `uid`'s target and returns the other autoscalers in the same
    /// namespace whose selector matches any of `pod_labels` (upstream's `AmbiguousSelector`).
    ///
    /// Pods of one workload share their labels (a ReplicaSet's pods differ in none), so the
    /// label sets are deduplicated first: the cost is autoscalers × distinct label sets, not
    /// autoscalers × pods.
    pub fn claim_pods<'a>(
        &self,
        namespace: &str,
        uid: &str,
        display: &str,
        selector: &Selector,
        pod_labels: impl Iterator<Item = &'a std::collections::BTreeMap<String, String>>,
    ) -> Vec<String> {
        let distinct: std::collections::BTreeSet<_> = pod_labels.collect();
        let mut index = lock(&self.selectors);
        let ns = index.entry(namespace.to_owned()).or_default();
        // Every evaluation claims again; most find their entry as they left it.
        match ns.get_mut(uid) {
            Some((name, claimed)) => {
                if name != display {
                    display.clone_into(name);
                }
                if claimed != selector {
                    claimed.clone_from(selector);
                }
            }
            None => {
                ns.insert(uid.to_owned(), (display.to_owned(), selector.clone()));
            }
        }
        if distinct.is_empty() {
            return Vec::new();
        }
        let mut others: Vec<String> = ns
            .iter()
            .filter(|(other, _)| other.as_str() != uid)
            .filter(|(_, (_, sel))| distinct.iter().any(|l| sel.matches(l)))
            .map(|(_, (name, _))| name.clone())
            .collect();
        others.sort();
        others
    }

    /// Objects whose evaluation is overdue at `now` (for `queue_depth`).
    pub fn overdue(&self, now: Instant) -> usize {
        lock(&self.memory)
            .values()
            .filter(|m| m.next_due.is_some_and(|d| d < now))
            .count()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use plimsoll_core::horizontal::History;
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;
    use std::collections::BTreeMap;

    /// A context whose client reaches nothing (port 9).
    pub(crate) fn context() -> (Context, Registry) {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let (crons, _writer) = kube::runtime::reflector::store();
        let mut registry = Registry::default();
        let metrics = Arc::new(Metrics::register(
            plimsoll_runtime::telemetry::service_registry(&mut registry, "hpa-plus"),
        ));
        let ctx = Context::from_parts(ContextParts {
            client: client.clone(),
            scale: ScaleClient::new(client.clone(), "hpa-plus"),
            metrics_source: Arc::new(plimsoll_runtime::metrics_api::FixedExternalMetrics::empty()),
            events: Events::new(client, "hpa-plus"),
            metrics,
            pods: PodIndex::new(),
            crons,
            config: ControllerConfig::default(),
            leader: LeaderHandle::always_leading(),
            prometheus: PrometheusMetrics::new(
                crate::prometheus::PrometheusSettings::default(),
                None,
            ),
            tuning_exclude: None,
            vpas: crate::vpa_targets(),
        });
        (ctx, registry)
    }

    fn labels(app: &str) -> BTreeMap<String, String> {
        [("app".to_owned(), app.to_owned())].into()
    }

    // upstream: pkg/controller/podautoscaler/horizontal.go validateAndParseSelector (pods
    // selected by more than one HPA of the namespace make each of them AmbiguousSelector).
    #[tokio::test]
    async fn autoscalers_selecting_the_same_pods_see_each_other() {
        let (ctx, _) = context();
        let web = Selector::parse("app=web").unwrap();
        let all = Selector::everything();
        let db = Selector::parse("app=db").unwrap();
        let pods = [labels("web")];
        assert!(
            ctx.claim_pods("ns", "u1", "HPA+/web", &web, pods.iter())
                .is_empty()
        );
        assert!(
            ctx.claim_pods("ns", "u3", "HPA+/db", &db, [labels("db")].iter())
                .is_empty()
        );
        // A second autoscaler over everything in the namespace conflicts with web (and db).
        let seen = ctx.claim_pods("ns", "u2", "HPA+/all", &all, pods.iter());
        assert_eq!(seen, ["HPA+/web"]);
        assert_eq!(
            ctx.claim_pods("ns", "u1", "HPA+/web", &web, pods.iter()),
            ["HPA+/all"]
        );
        // Other namespaces never conflict.
        assert!(
            ctx.claim_pods("other", "u4", "HPA+/web", &web, pods.iter())
                .is_empty()
        );
    }

    #[tokio::test]
    async fn forgetting_an_object_drops_its_history_selector_and_series() {
        let (ctx, registry) = context();
        let web = Selector::parse("app=web").unwrap();
        ctx.claim_pods("ns", "u1", "HPA+/web", &web, [labels("web")].iter());
        let decision_labels = crate::metrics::ObjectLabels {
            namespace: "ns".into(),
            name: "web".into(),
        };
        let history = History {
            last_scale_time: Some(jiff::Timestamp::UNIX_EPOCH),
            ..History::default()
        };
        ctx.remember(
            "u1",
            Memory {
                namespace: decision_labels.namespace.clone(),
                name: decision_labels.name.clone(),
                held: Held {
                    history: Some(history.clone()),
                    ..Held::default()
                },
                metric_names: vec!["cpu".into()],
                next_due: Some(Instant::now()),
                native: false,
                published: crate::metrics::Published::default(),
            },
        );
        assert_eq!(ctx.held("u1").and_then(|h| h.history), Some(history));
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(ctx.overdue(Instant::now()), 1);
        ctx.forget("u1");
        assert!(ctx.held("u1").is_none());
        assert_eq!(ctx.overdue(Instant::now()), 0);
        // Nobody else claims web's pods any more.
        let all = Selector::everything();
        assert!(
            ctx.claim_pods("ns", "u2", "HPA+/all", &all, [labels("web")].iter())
                .is_empty()
        );
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(text.contains("plimsoll_hpa_plus_objects 0"), "{text}");
    }

    /// One evaluation of `metrics` (a spec's `metrics` list) as the reconcile records it: the
    /// per-metric series, then the memory; returns the exposition text.
    fn evaluate_metrics(ctx: &Context, registry: &Registry, metrics: &serde_json::Value) -> String {
        use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlusSpec;
        use plimsoll_core::horizontal::{DecisionInput, Observation, decide};
        let spec: HorizontalPodAutoscalerPlusSpec = serde_json::from_value(serde_json::json!({
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 10,
            "metrics": metrics,
        }))
        .unwrap();
        let ready = plimsoll_core::horizontal::PodSample {
            name: "web-1".into(),
            phase: plimsoll_core::horizontal::PodPhase::Running,
            ready: Some(true),
            ..plimsoll_core::horizontal::PodSample::default()
        };
        let observed = Observation {
            current_replicas: 2,
            pods: vec![ready],
            prometheus_metrics: [
                (QUERY.to_owned(), Ok(3000)),
                ("rps".to_owned(), Ok(3000)),
                ("other".to_owned(), Ok(1000)),
            ]
            .into(),
            ..Observation::default()
        };
        let decision = decide(&DecisionInput {
            spec: &spec,
            observed: &observed,
            history: &History::default(),
            config: &ControllerConfig::default(),
            now: jiff::Timestamp::UNIX_EPOCH,
        });
        let series = crate::metrics::series_names(&spec, &decision);
        let published = ctx
            .metrics
            .observe("ns", "web", (&decision, &series), ctx.published("u1"));
        ctx.remember(
            "u1",
            Memory {
                namespace: "ns".into(),
                name: "web".into(),
                held: Held::default(),
                metric_names: series,
                next_due: None,
                native: false,
                published,
            },
        );
        let mut text = String::new();
        encode(&mut text, registry).unwrap();
        text
    }

    const QUERY: &str = "sum(rate(http_requests_total{app=\"web\"}[1m]))";

    fn prometheus(name: Option<&str>) -> serde_json::Value {
        serde_json::json!({"type": "Prometheus", "prometheus": {
            "query": QUERY, "name": name, "target": {"type": "Value", "value": "1"}}})
    }

    #[tokio::test]
    async fn series_never_carry_a_query_and_go_with_a_renamed_or_removed_metric() {
        let (ctx, registry) = context();
        let other = serde_json::json!({"type": "Prometheus", "prometheus": {
            "query": "up", "name": "other", "target": {"type": "Value", "value": "1"}}});
        // Unnamed: labelled by its position in spec.metrics, never by its query.
        let text = evaluate_metrics(
            &ctx,
            &registry,
            &serde_json::json!([other, prometheus(None)]),
        );
        assert!(text.contains("metric=\"prometheus-1\""), "{text}");
        assert!(!text.contains("http_requests_total"), "{text}");
        // Named: its name; the old label's series go.
        let text = evaluate_metrics(
            &ctx,
            &registry,
            &serde_json::json!([other, prometheus(Some("rps"))]),
        );
        assert!(text.contains("metric=\"rps\""), "{text}");
        assert!(!text.contains("prometheus-1"), "{text}");
        // Removed: its series go, the others stay.
        let text = evaluate_metrics(&ctx, &registry, &serde_json::json!([other]));
        assert!(!text.contains("metric=\"rps\""), "{text}");
        assert!(text.contains("metric=\"other\""), "{text}");
    }

    #[tokio::test]
    async fn a_written_status_stands_in_for_the_cache_until_the_cache_moves() {
        let (ctx, _) = context();
        let status = |replicas| HorizontalPodAutoscalerPlusStatus {
            current_replicas: replicas,
            ..HorizontalPodAutoscalerPlusStatus::default()
        };
        // Written from the object at version 5: while the cache still shows 5, what was
        // written is what the server has.
        ctx.wrote("u1", Some("5"), &status(3), false);
        assert_eq!(ctx.written_over("u1", Some("5")), Some(status(3)));
        assert_eq!(ctx.written_over("u1", Some("5")), Some(status(3)));
        // The cache moved (the write arrived, or someone else wrote): the cache is the truth,
        // even if it goes back to showing 5 (it cannot; versions only grow).
        assert_eq!(ctx.written_over("u1", Some("7")), None);
        assert_eq!(ctx.written_over("u1", Some("5")), None);
        // The watch delivers the object: at the version written from, the entry stays; at any
        // other, it goes at once.
        ctx.wrote("u1", Some("8"), &status(4), false);
        ctx.cache_moved("u1", Some("8"));
        assert_eq!(ctx.written_over("u1", Some("8")), Some(status(4)));
        ctx.cache_moved("other", Some("9"));
        assert_eq!(ctx.written_over("u1", Some("8")), Some(status(4)));
        ctx.cache_moved("u1", Some("9"));
        assert_eq!(ctx.written_over("u1", Some("8")), None);
        // No version to compare with: nothing is kept.
        ctx.wrote("u2", None, &status(1), false);
        assert_eq!(ctx.written_over("u2", None), None);
        // Deleted, or gone from a relist of its kind.
        ctx.wrote("u3", Some("1"), &status(1), false);
        ctx.forget("u3");
        assert_eq!(ctx.written_over("u3", Some("1")), None);
        ctx.wrote("plus", Some("1"), &status(1), false);
        ctx.wrote("native", Some("1"), &status(1), true);
        ctx.retain(&HashSet::new(), true);
        assert_eq!(ctx.written_over("native", Some("1")), None);
        assert_eq!(ctx.written_over("plus", Some("1")), Some(status(1)));
    }

    #[tokio::test]
    async fn a_relist_drops_objects_no_longer_listed_of_that_kind_only() {
        let (ctx, _) = context();
        let memory = |native| Memory {
            namespace: "ns".into(),
            name: "x".into(),
            held: Held::default(),
            metric_names: Vec::new(),
            next_due: None,
            native,
            published: crate::metrics::Published::default(),
        };
        ctx.remember("plus-gone", memory(false));
        ctx.remember("plus-live", memory(false));
        ctx.remember("native", memory(true));
        ctx.retain(&["plus-live".to_owned()].into(), false);
        let known: Vec<String> = {
            let mut k: Vec<String> = lock(&ctx.memory).keys().cloned().collect();
            k.sort();
            k
        };
        assert_eq!(known, ["native", "plus-live"]);
    }

    #[tokio::test]
    async fn the_room_of_objects_gone_is_given_back() {
        // A replica that held every shard for a moment and then a quarter of them: its tables
        // shrink to what it holds.
        let (ctx, _) = context();
        let memory = || Memory {
            namespace: "ns".into(),
            name: "x".into(),
            held: Held::default(),
            metric_names: Vec::new(),
            next_due: None,
            native: false,
            published: crate::metrics::Published::default(),
        };
        for i in 0..20_000 {
            ctx.remember(&format!("u{i}"), memory());
            ctx.wrote(
                &format!("u{i}"),
                Some("1"),
                &HorizontalPodAutoscalerPlusStatus::default(),
                false,
            );
        }
        let full = lock(&ctx.memory).capacity();
        for i in 5_000..20_000 {
            ctx.forget(&format!("u{i}"));
        }
        assert!(
            lock(&ctx.memory).capacity() > full / 2,
            "no table shrinks by itself"
        );
        ctx.shrink();
        let (memory, written) = (lock(&ctx.memory).capacity(), lock(&ctx.written).capacity());
        assert!(memory < full / 2 && memory >= 5_000, "{memory} of {full}");
        assert!(
            written < full / 2 && written >= 5_000,
            "{written} of {full}"
        );
        assert!(ctx.held("u4999").is_some() && ctx.held("u5000").is_none());
    }
}
