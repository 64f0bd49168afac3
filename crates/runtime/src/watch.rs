//! One way to watch: every cache of every service is kept current by a [`Watch`], so that all
//! of them retry, log, count, report their first list and stop the same way.
//!
//! A [`Watch`] is kube's `watcher` (list, then watch from the listed resource version; a `410
//! Gone` re-lists) behind `default_backoff` (client-go's reflector backoff: 0.8 s doubling to
//! 30 s with jitter, reset after 2 min without an error), plus one policy:
//!
//! - **Logs** carry the watch's name (`watch`, its kind) and the API server's message
//!   ([`crate::api_message::watch_message`]). The first error of an outage is a `warn`; its
//!   repeats, while the watch keeps failing, are `debug` (they are counted), and the first event
//!   after it is one `info`. An expired resource version (`410 Gone`: the watcher re-lists) and
//!   every completed list are `debug`. Nothing of an object is ever logged: tenants write them,
//!   and an object that does not decode is reported by position, not by the value serde quotes.
//! - **Metrics** (with [`Watch::metrics`]): `watch_errors_total{watch}` (errors, each retried
//!   with backoff; a `410` is not one) and `watch_relists_total{watch}` (lists completed after
//!   the first: after a `410`, an error during the list, or a kind served again).
//! - **Readiness**: [`Watch::synced`] turns true once the first list has completed and its
//!   consumer has handled it (the end of the list, `InitDone`, applied to its index or store).
//! - **Shutdown**: the watch ends when the token of [`Watch::until`] is cancelled (the service
//!   skeleton also stops what it was handed with `Started::spawn`).
//! - **A kind the server may not serve** ([`Watch::not_served`]): a `404` on the list counts as
//!   a list of nothing, and the kind is asked for again only after the given pause, not at the
//!   backoff's pace (a request every 30 s for a resource that is not there).
//! - **Trimming** ([`Watch::trim`]): every object is cut down to what its readers use as it
//!   leaves the watcher, before a store, a handler or a stream sees it. Tenants write the objects
//!   a service caches cluster-wide (a ReplicaSet's template, annotations up to 256 KiB,
//!   `managedFields`); kept whole, a tenant sets the size of every replica's heap. The watcher
//!   still holds one list page of whole objects while it lists, so every watch lists in pages
//!   of at most [`LIST_PAGE`], trimmed or not: one whose reader keeps a summary of each object
//!   (a handler that files one, a type that decodes a few fields) reads the page whole too.
//! - **Objects too large to cache** ([`Watch::over_budget`]): what a trim keeps can still grow
//!   with what a tenant writes (a pod's labels); past a budget the object is cut to a stub its
//!   readers leave out, with a `warn` per object (then once per
//!   [`RELOG_AFTER`](crate::repeats::RELOG_AFTER) while it stays so) and
//!   `watch_over_budget_total{watch}`.
//!
//! Three ways to take the events: [`Watch::run`] hands each to a function (an index kept by
//! hand), [`Watch::reflect`] keeps a kube reflector store, and [`Watch::events`] is the stream
//! for kube's `WatchStreamExt` and `Controller::for_stream`. The stream never yields an error
//! (errors are handled here, once) and never ends before [`Watch::until`]'s token.
//!
//! No service calls kube's `watcher` itself (`xtask/tests/xtask/services.rs` checks it).

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt, future};
use kube::Resource;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::Lookup;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::{self, Event, watcher};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use serde::de::DeserializeOwned;
use tokio::sync::watch as flag;
use tokio_util::sync::CancellationToken;

use crate::api_message::watch_message;
use crate::repeats::Repeats;

/// The label of a watch's series: `watch=<name>`.
type Labels = [(&'static str, &'static str); 1];

/// The watch metrics of a service: `watch_errors_total{watch}`,
/// `watch_relists_total{watch}` and `watch_over_budget_total{watch}`. Cheap to clone (shared
/// counters).
#[derive(Clone, Debug, Default)]
pub struct WatchMetrics {
    errors: Family<Labels, Counter>,
    relists: Family<Labels, Counter>,
    over_budget: Family<Labels, Counter>,
}

impl WatchMetrics {
    /// New counters, registered in `registry` (pass the service's registry).
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        metrics.add_to(registry);
        metrics
    }

    /// Registers these counters in `registry` (for counters made before the registry was at
    /// hand: what was counted so far is kept).
    pub fn add_to(&self, registry: &mut Registry) {
        registry.register(
            "watch_errors",
            "Errors of a watch (list, watch start or stream), each retried with backoff",
            self.errors.clone(),
        );
        registry.register(
            "watch_relists",
            "Lists a watch completed after its first (after a 410 Gone or a failed list)",
            self.relists.clone(),
        );
        registry.register(
            "watch_over_budget",
            "Objects a watch cut to a stub because what it keeps of them passed its budget \
             (each list or change of one)",
            self.over_budget.clone(),
        );
    }

    fn error(&self, watch: &'static str) {
        self.errors.get_or_create(&[("watch", watch)]).inc();
    }

    fn relist(&self, watch: &'static str) {
        self.relists.get_or_create(&[("watch", watch)]).inc();
    }

    fn over_budget(&self, watch: &'static str) {
        self.over_budget.get_or_create(&[("watch", watch)]).inc();
    }
}

/// Whether a watch has completed its first list; cheap to clone.
#[derive(Clone, Debug)]
pub struct Synced(flag::Receiver<bool>);

impl Synced {
    /// True once the first list has completed.
    pub fn is_synced(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the first list has completed: `true`, or `false` when the watch was
    /// dropped before that.
    pub async fn wait(&self) -> bool {
        self.0.clone().wait_for(|listed| *listed).await.is_ok()
    }
}

/// One watch of one kind (see the module documentation); build it, then consume it with
/// [`Watch::run`], [`Watch::reflect`] or [`Watch::events`].
pub struct Watch<K> {
    name: &'static str,
    api: Api<K>,
    config: watcher::Config,
    metrics: WatchMetrics,
    not_served: Option<Duration>,
    trim: Arc<dyn Fn(&mut K) + Send + Sync>,
    over_budget: Option<Arc<Cut<K>>>,
    stop: CancellationToken,
    synced: Arc<flag::Sender<bool>>,
}

/// The most objects one list page holds (kube's and client-go's default is 500). The watcher
/// decodes a page whole before anything is trimmed: 500 ReplicaSets of a tenant's with 1.2 MB
/// templates are 600 MB at every start and relist, 50 are 60 MB, for ten times the list
/// requests (a cluster of 10,000 pods lists them in 200 pages).
pub const LIST_PAGE: u32 = 50;

/// Cuts an object past its budget to a stub, returning the bytes it held ([`Watch::over_budget`]).
type Cut<K> = dyn Fn(&mut K) -> Option<usize> + Send + Sync;

impl<K> Watch<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    /// Watches what `api` reaches (every namespace or one), with the default
    /// `watcher::Config`; `name` (the kind, e.g. `Pod`) names it in logs and metrics.
    pub fn new(name: &'static str, api: Api<K>) -> Self {
        Self {
            name,
            api,
            config: watcher::Config::default(),
            metrics: WatchMetrics::default(),
            not_served: None,
            trim: Arc::new(|_| {}),
            over_budget: None,
            stop: CancellationToken::new(),
            synced: Arc::new(flag::channel(false).0),
        }
    }

    /// The watcher's settings: label and field selectors, page size, … (the API server does
    /// the filtering).
    #[must_use]
    pub fn config(mut self, config: watcher::Config) -> Self {
        self.config = config;
        self
    }

    /// Counts this watch's errors and relists in `metrics` (by default they go nowhere).
    #[must_use]
    pub fn metrics(mut self, metrics: &WatchMetrics) -> Self {
        self.metrics = metrics.clone();
        self
    }

    /// A `404` on the list (the API server does not serve the kind: a trimmed server, a CRD not
    /// installed) counts as a list of nothing, and the kind is asked for again after `recheck`.
    #[must_use]
    pub fn not_served(mut self, recheck: Duration) -> Self {
        self.not_served = Some(recheck);
        self
    }

    /// Cuts every object down with `trim` (it replaces a trim set before) before anything else
    /// sees it: the store of [`Watch::reflect`], the handler of [`Watch::run`], the stream of
    /// [`Watch::events`], in live events, lists and deletions alike. `trim` must keep every field
    /// a reader of the objects uses, the name and namespace (the store's key) included. Lists
    /// take pages of at most [`LIST_PAGE`] objects, as every watch's do.
    #[must_use]
    pub fn trim(mut self, trim: impl Fn(&mut K) + Send + Sync + 'static) -> Self {
        self.trim = Arc::new(trim);
        self
    }

    /// Leaves out objects a tenant made too large to cache: after [`Watch::trim`], `cut`
    /// measures each object and, past its budget, cuts it to a stub its readers skip and returns
    /// the bytes it held (`None` leaves the object as it is). Each such object is a `warn`
    /// naming it and its size, again at most once per
    /// [`RELOG_AFTER`](crate::repeats::RELOG_AFTER) while it stays over, and counts in
    /// `watch_over_budget_total{watch}`. A deletion is cut silently.
    #[must_use]
    pub fn over_budget(
        mut self,
        cut: impl Fn(&mut K) -> Option<usize> + Send + Sync + 'static,
    ) -> Self {
        self.over_budget = Some(Arc::new(cut));
        self
    }

    /// Ends the watch when `stop` is cancelled.
    #[must_use]
    pub fn until(mut self, stop: CancellationToken) -> Self {
        self.stop = stop;
        self
    }

    /// Turns true once the first list has completed and the consumer has handled its `InitDone`
    /// (take it before consuming the watch): whoever waits on it reads a filled index.
    pub fn synced(&self) -> Synced {
        Synced(self.synced.subscribe())
    }

    /// Hands every event to `handler` until [`Watch::until`]'s token is cancelled (or for ever).
    pub async fn run(self, mut handler: impl FnMut(Event<K>) + Send) {
        let events = self.events();
        let mut events = std::pin::pin!(events);
        while let Some(next) = events.next().await {
            if let Ok(event) = next {
                handler(event);
            }
        }
    }

    /// Keeps the reflector store of `writer` current until [`Watch::until`]'s token is
    /// cancelled (or for ever).
    pub async fn reflect(self, mut writer: Writer<K>)
    where
        K: Lookup + Sync,
        <K as Lookup>::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        self.run(move |event| writer.apply_watcher_event(&event))
            .await;
    }

    /// The events, for kube's `WatchStreamExt` (`reflect`, `applied_objects`, …) and
    /// `Controller::for_stream`. Typed as the watcher's stream, but errors are handled here
    /// and never passed on; it ends only when [`Watch::until`]'s token is cancelled.
    pub fn events(self) -> impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static {
        let Watch {
            name,
            api,
            mut config,
            metrics,
            not_served,
            trim,
            over_budget,
            stop,
            synced,
        } = self;
        let budget = over_budget.map(|cut| Budget {
            name,
            cut,
            metrics: metrics.clone(),
            repeats: Repeats::default(),
        });
        config.page_size = Some(config.page_size.map_or(LIST_PAGE, |p| p.min(LIST_PAGE)));
        let optional = not_served.is_some();
        // The watcher never ends by itself; a round ends only when the kind is not served.
        let pause = not_served.unwrap_or(Duration::from_secs(1));
        let rounds = futures::stream::unfold(true, move |first| {
            let round = watcher(api.clone(), config.clone()).default_backoff();
            async move {
                if !first {
                    tokio::time::sleep(pause).await;
                }
                Some((round, false))
            }
        });
        let steps = rounds.flat_map(move |round| {
            round.scan(false, move |ended, item| {
                if *ended {
                    return future::ready(None);
                }
                let step = match item {
                    Ok(event) => Step::Event(event),
                    Err(e) if optional && is_not_served(&e) => {
                        *ended = true;
                        Step::NotServed
                    }
                    Err(e) => Step::Failed(e),
                };
                future::ready(Some(step))
            })
        });
        let mut health = Health {
            name,
            metrics,
            pause,
            listed: false,
            failing: false,
        };
        let events = steps
            .flat_map(move |step| futures::stream::iter(health.step(step)))
            .map(move |event| {
                let event = event.modify(|obj| trim(obj));
                Ok(match &budget {
                    Some(budget) => budget.leave_out(event),
                    None => event,
                })
            })
            .take_until(stop.cancelled_owned());
        synced_once_handled(name, events, synced)
    }
}

/// Passes `events` on and turns `synced` true when the first `InitDone` has been *handled*:
/// at the next poll after it was yielded, when a consumer that handles each event before asking
/// for the next one ([`Watch::run`]'s loop, kube's `reflect`, a controller) has applied it. Set
/// as the event was yielded, a task waiting on the flag could run on another thread against an
/// index that had not swapped in its list yet (vpa-updater's first loop could find no pods).
fn synced_once_handled<K>(
    name: &'static str,
    events: impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static,
    synced: Arc<flag::Sender<bool>>,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static
where
    K: Send + 'static,
{
    let mut events = Box::pin(events);
    let mut handing_over = false;
    futures::stream::poll_fn(move |cx| {
        if std::mem::take(&mut handing_over) && !*synced.borrow() {
            synced.send_replace(true);
            tracing::debug!(watch = name, "first list handled");
        }
        let next = events.as_mut().poll_next(cx);
        if let std::task::Poll::Ready(Some(Ok(Event::InitDone))) = &next {
            handing_over = true;
        }
        next
    })
}

/// What [`Watch::over_budget`] set: the cut, and what it reports.
struct Budget<K> {
    name: &'static str,
    cut: Arc<Cut<K>>,
    metrics: WatchMetrics,
    repeats: Repeats,
}

impl<K: Resource> Budget<K> {
    fn leave_out(&self, mut event: Event<K>) -> Event<K> {
        match &mut event {
            Event::Delete(obj) => {
                (self.cut)(obj);
                if let Some(uid) = &obj.meta().uid {
                    self.repeats.forget(uid);
                }
            }
            Event::Apply(obj) | Event::InitApply(obj) => {
                if let Some(bytes) = (self.cut)(obj) {
                    self.metrics.over_budget(self.name);
                    let meta = obj.meta();
                    let uid = meta.uid.as_deref().unwrap_or_default();
                    if let Some(quiet) = self.repeats.first(uid, "over budget") {
                        tracing::warn!(
                            watch = self.name,
                            namespace = meta.namespace.as_deref().unwrap_or_default(),
                            name = meta.name.as_deref().unwrap_or_default(),
                            bytes,
                            repeats_not_logged = quiet,
                            "object too large to cache; only a stub of it is kept"
                        );
                    }
                }
            }
            // A relist does not tell which objects went meanwhile: start over, so that the
            // memory of warnings holds only objects that are there.
            Event::Init => self.repeats.clear(),
            Event::InitDone => {}
        }
        event
    }
}

/// What the watcher said, sorted for [`Health::step`].
enum Step<K> {
    Event(Event<K>),
    /// A `404` on the list of a kind that may not be served.
    NotServed,
    Failed(watcher::Error),
}

/// Zero, one or two events: what a step passes on.
type Passed<K> = std::iter::Chain<std::option::IntoIter<Event<K>>, std::option::IntoIter<Event<K>>>;

/// One watch's state for its logs, metrics and readiness.
struct Health {
    name: &'static str,
    metrics: WatchMetrics,
    /// How long a kind that is not served is left alone.
    pause: Duration,
    /// A list has completed before.
    listed: bool,
    /// The last thing the watcher said was an error.
    failing: bool,
}

impl Health {
    fn step<K>(&mut self, step: Step<K>) -> Passed<K> {
        let (first, second) = match step {
            Step::Event(event) => {
                if self.failing {
                    self.failing = false;
                    tracing::info!(watch = self.name, "watch recovered");
                }
                if matches!(event, Event::InitDone) {
                    self.listed();
                }
                (Some(event), None)
            }
            Step::NotServed => {
                self.failing = false;
                tracing::debug!(
                    watch = self.name,
                    recheck = ?self.pause,
                    "not served by this API server; following it as empty"
                );
                // Whatever was listed before the kind went away is gone with it.
                self.listed();
                (Some(Event::Init), Some(Event::InitDone))
            }
            Step::Failed(e) => {
                self.failed(&e);
                (None, None)
            }
        };
        first.into_iter().chain(second)
    }

    fn listed(&mut self) {
        if self.listed {
            self.metrics.relist(self.name);
            tracing::debug!(watch = self.name, "re-listed");
        } else {
            self.listed = true;
            tracing::debug!(watch = self.name, "listed");
        }
    }

    fn failed(&mut self, e: &watcher::Error) {
        if is_expired(e) {
            tracing::debug!(
                watch = self.name,
                "resource version expired (410 Gone); re-listing"
            );
            return;
        }
        self.metrics.error(self.name);
        let error = describe(e);
        if self.failing {
            tracing::debug!(watch = self.name, %error, "watch still failing; retrying with backoff");
        } else {
            self.failing = true;
            tracing::warn!(watch = self.name, %error, "watch failed; retrying with backoff");
        }
    }
}

/// The resource version the watch resumed from is too old: the watcher re-lists.
fn is_expired(e: &watcher::Error) -> bool {
    matches!(e, watcher::Error::WatchError(status) if status.code == 410)
}

/// The list answered `404`: the API server does not serve the kind.
fn is_not_served(e: &watcher::Error) -> bool {
    matches!(e, watcher::Error::InitialListFailed(kube::Error::Api(status)) if status.code == 404)
}

/// What to log of an error: the API server's message, but only the position of an object
/// that does not decode (serde's message quotes the value, which a tenant wrote).
fn describe(e: &watcher::Error) -> String {
    let client_error = match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => Some(e),
        watcher::Error::WatchError(_) | watcher::Error::NoResourceVersion => None,
    };
    if let Some(kube::Error::SerdeError(e)) = client_error {
        return format!(
            "an object in the API server's answer does not decode (line {}, column {})",
            e.line(),
            e.column()
        );
    }
    watch_message(e)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use prometheus_client::encoding::text::encode;
    use serde_json::json;
    use tokio::sync::mpsc;

    use super::*;
    use crate::fake_api::FakeApi;
    use crate::log_sink::warnings;

    const PATH: &str = "/api/v1/namespaces/shop/configmaps";

    fn object(name: &str, rv: u32) -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "shop", "resourceVersion": rv.to_string()},
        })
    }

    fn list(names: &[&str], rv: u32) -> String {
        let items: Vec<_> = names.iter().map(|n| object(n, rv)).collect();
        json!({
            "apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": {"resourceVersion": rv.to_string()},
            "items": items,
        })
        .to_string()
    }

    fn event(kind: &str, name: &str, rv: u32) -> String {
        json!({"type": kind, "object": object(name, rv)}).to_string() + "\n"
    }

    fn status(code: u16, reason: &str) -> String {
        json!({
            "apiVersion": "v1", "kind": "Status", "status": "Failure",
            "message": format!("{reason} ({code})"),
            "reason": reason, "code": code,
        })
        .to_string()
    }

    fn watch(fake: &FakeApi) -> Watch<ConfigMap> {
        Watch::new("ConfigMap", Api::namespaced(fake.client(), "shop"))
    }

    /// Runs `watch`, sending every event's description (`Apply(web)`, `InitDone`, …) on.
    fn spawn(
        watch: Watch<ConfigMap>,
    ) -> (mpsc::UnboundedReceiver<String>, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(watch.run(move |e| {
            let _ = tx.send(e.to_string());
        }));
        (rx, task)
    }

    /// The next `n` events; paused time runs the backoff and the fake's open watches forward.
    async fn next(rx: &mut mpsc::UnboundedReceiver<String>, n: usize) -> Vec<String> {
        let mut seen = Vec::new();
        while seen.len() < n {
            let got = tokio::time::timeout(Duration::from_secs(3600), rx.recv()).await;
            match got {
                Ok(Some(e)) => seen.push(e),
                _ => panic!("after {seen:?}: no more events"),
            }
        }
        seen
    }

    fn scrape(registry: &Registry) -> String {
        let mut text = String::new();
        encode(&mut text, registry).unwrap();
        text
    }

    #[tokio::test(start_paused = true)]
    async fn the_handler_sees_lists_applies_and_deletes_and_a_410_or_an_error_only_relists() {
        let fake = FakeApi::new();
        fake.script(
            PATH,
            false,
            &[
                (200, list(&["a", "b"], 1)),
                // After the 410: the list fails once, then succeeds.
                (500, status(500, "InternalError")),
                (200, list(&["b", "c", "d"], 5)),
            ],
        );
        let expired = json!({"type": "ERROR", "object": serde_json::from_str::<serde_json::Value>(&status(410, "Expired")).unwrap()});
        fake.script(
            PATH,
            true,
            &[(
                200,
                event("ADDED", "c", 2) + &event("DELETED", "a", 3) + &expired.to_string() + "\n",
            )],
        );
        let mut registry = Registry::default();
        let metrics = WatchMetrics::register(&mut registry);
        let watch = watch(&fake).metrics(&metrics);
        let synced = watch.synced();
        assert!(!synced.is_synced());
        let (mut rx, task) = spawn(watch);
        let seen = next(&mut rx, 12).await;
        assert_eq!(
            seen,
            [
                "Init",
                "InitApply(a)",
                "InitApply(b)",
                "InitDone",
                "Apply(c)",
                "Delete(a)",
                // The 410 restarts the list; so does the failed list, after the backoff.
                "Init",
                "Init",
                "InitApply(b)",
                "InitApply(c)",
                "InitApply(d)",
                "InitDone",
            ]
        );
        assert!(synced.is_synced());
        let text = scrape(&registry);
        assert!(
            text.contains("watch_errors_total{watch=\"ConfigMap\"} 1\n"),
            "the 500, not the 410: {text}"
        );
        assert!(
            text.contains("watch_relists_total{watch=\"ConfigMap\"} 1\n"),
            "{text}"
        );
        task.abort();
    }

    /// Whoever waits on the flag must find the list applied: while the handler is still taking
    /// `InitDone` (swapping its buffered list in), the flag is false; once it has returned, true.
    #[tokio::test(start_paused = true)]
    async fn synced_turns_true_only_after_the_handler_took_the_end_of_the_list() {
        let fake = FakeApi::new();
        fake.script(PATH, false, &[(200, list(&["a"], 1))]);
        fake.script(PATH, true, &[]);
        let watch = watch(&fake);
        let synced = watch.synced();
        let seen_by_handler = synced.clone();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(watch.run(move |e| {
            if matches!(e, Event::InitDone) {
                let _ = tx.send(seen_by_handler.is_synced());
            }
        }));
        let during = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("the list ends");
        assert_eq!(
            during,
            Some(false),
            "synced while InitDone was being handled"
        );
        assert!(synced.wait().await);
        assert!(synced.is_synced());
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn the_stop_token_ends_the_watch() {
        let fake = FakeApi::new();
        fake.script(PATH, false, &[(200, list(&["a"], 1))]);
        fake.script(PATH, true, &[]);
        let stop = CancellationToken::new();
        let watch = watch(&fake).until(stop.clone());
        let synced = watch.synced();
        let (mut rx, task) = spawn(watch);
        assert!(synced.wait().await);
        assert_eq!(next(&mut rx, 3).await, ["Init", "InitApply(a)", "InitDone"]);
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the watch ends on its token")
            .unwrap();
        assert_eq!(rx.recv().await, None, "nothing after the stop");
    }

    #[tokio::test(start_paused = true)]
    async fn a_kind_not_served_counts_as_listed_and_empty_and_is_asked_for_after_the_pause() {
        let fake = FakeApi::new();
        fake.script(
            PATH,
            false,
            &[(404, status(404, "NotFound")), (200, list(&["a"], 1))],
        );
        // Once listed, the watch stays open.
        fake.script(PATH, true, &[]);
        let mut registry = Registry::default();
        let metrics = WatchMetrics::register(&mut registry);
        let watch = watch(&fake)
            .metrics(&metrics)
            .not_served(Duration::from_secs(600));
        let synced = watch.synced();
        let started = tokio::time::Instant::now();
        let (mut rx, task) = spawn(watch);
        // The watcher's own `Init` before its list, then a list of nothing.
        assert_eq!(next(&mut rx, 3).await, ["Init", "Init", "InitDone"]);
        assert!(synced.is_synced());
        assert_eq!(next(&mut rx, 3).await, ["Init", "InitApply(a)", "InitDone"]);
        assert!(
            started.elapsed() >= Duration::from_secs(600),
            "asked again too soon"
        );
        let lists = fake
            .requests()
            .iter()
            .filter(|r| !r.uri.contains("watch=true"))
            .count();
        assert_eq!(lists, 2);
        let text = scrape(&registry);
        assert!(
            !text.contains("watch_errors_total{"),
            "a 404 here is no error: {text}"
        );
        assert!(
            text.contains("watch_relists_total{watch=\"ConfigMap\"} 1\n"),
            "{text}"
        );
        task.abort();
    }

    /// A ConfigMap as a tenant may write it: 1 MiB of data.
    fn fat(name: &str, rv: u32) -> serde_json::Value {
        let mut o = object(name, rv);
        o["data"] = json!({"blob": "x".repeat(1 << 20)});
        o
    }

    /// The URI of the first list request `fake` saw.
    fn list_uri(fake: &FakeApi) -> String {
        fake.requests()
            .into_iter()
            .find(|r| !r.uri.contains("watch=true"))
            .map(|r| r.uri)
            .unwrap_or_default()
    }

    fn drop_data(cm: &mut ConfigMap) {
        cm.data = None;
    }

    #[tokio::test(start_paused = true)]
    async fn the_store_holds_only_trimmed_objects_from_lists_and_live_events() {
        let fake = FakeApi::new();
        let list = json!({
            "apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": {"resourceVersion": "1"},
            "items": [fat("a", 1)],
        });
        fake.script(PATH, false, &[(200, list.to_string())]);
        let added = json!({"type": "ADDED", "object": fat("b", 2)}).to_string() + "\n";
        fake.script(PATH, true, &[(200, added)]);
        let (store, writer) = kube::runtime::reflector::store();
        let task = tokio::spawn(watch(&fake).trim(drop_data).reflect(writer));
        for _ in 0..3600 {
            if store.len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let mut names: Vec<_> = store
            .state()
            .iter()
            .map(|cm| {
                assert_eq!(cm.data, None, "kept whole: {:?}", cm.metadata.name);
                assert_eq!(cm.metadata.namespace.as_deref(), Some("shop"));
                cm.metadata.name.clone().unwrap_or_default()
            })
            .collect();
        names.sort();
        assert_eq!(names, ["a", "b"]);
        // Whole objects are decoded a page at a time: small pages.
        let list = list_uri(&fake);
        assert!(list.contains(&format!("limit={LIST_PAGE}")), "{list}");
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn every_watch_lists_small_pages() {
        let fake = FakeApi::new();
        fake.script(PATH, false, &[(200, list(&["a"], 1))]);
        fake.script(PATH, true, &[(200, String::new())]);
        let (mut rx, task) = spawn(watch(&fake));
        next(&mut rx, 3).await;
        task.abort();
        let list = list_uri(&fake);
        assert!(
            list.contains(&format!("limit={LIST_PAGE}&"))
                || list.ends_with(&format!("limit={LIST_PAGE}")),
            "{list}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_handler_sees_trimmed_objects_only() {
        let fake = FakeApi::new();
        fake.script(PATH, false, &[(200, list(&[], 1))]);
        let deleted = json!({"type": "DELETED", "object": fat("a", 2)}).to_string() + "\n";
        fake.script(PATH, true, &[(200, deleted)]);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(watch(&fake).trim(drop_data).run(move |e| {
            if let Event::Delete(cm) = e {
                let _ = tx.send(cm);
            }
        }));
        let cm = tokio::time::timeout(Duration::from_secs(3600), rx.recv())
            .await
            .expect("the deletion arrives")
            .expect("the watch runs");
        assert_eq!(cm.metadata.name.as_deref(), Some("a"));
        assert_eq!(cm.data, None);
        task.abort();
    }

    /// Over 1 KiB of data is over budget: the object keeps its name and namespace only.
    fn cut_fat(cm: &mut ConfigMap) -> Option<usize> {
        let held: usize = cm
            .data
            .iter()
            .flatten()
            .map(|(k, v)| k.len() + v.len())
            .sum();
        (held > 1024).then(|| {
            *cm = ConfigMap {
                metadata: kube::api::ObjectMeta {
                    name: cm.metadata.name.take(),
                    namespace: cm.metadata.namespace.take(),
                    uid: cm.metadata.uid.take(),
                    ..Default::default()
                },
                ..Default::default()
            };
            held
        })
    }

    #[tokio::test(start_paused = true)]
    async fn an_object_over_budget_is_stored_as_a_stub_and_counted() {
        let fake = FakeApi::new();
        let list = json!({
            "apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": {"resourceVersion": "1"},
            "items": [fat("a", 1), object("b", 1)],
        });
        fake.script(PATH, false, &[(200, list.to_string())]);
        let modified = json!({"type": "MODIFIED", "object": fat("b", 2)}).to_string() + "\n";
        fake.script(PATH, true, &[(200, modified)]);
        let mut registry = Registry::default();
        let metrics = WatchMetrics::register(&mut registry);
        let (store, writer) = kube::runtime::reflector::store();
        let watch = watch(&fake).metrics(&metrics).over_budget(cut_fat);
        let task = tokio::spawn(watch.reflect(writer));
        for _ in 0..3600 {
            if store.state().iter().all(|cm| cm.data.is_none()) && store.len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        task.abort();
        for cm in store.state() {
            assert_eq!(cm.data, None, "{:?} kept whole", cm.metadata.name);
            assert_eq!(cm.metadata.namespace.as_deref(), Some("shop"));
        }
        let text = scrape(&registry);
        assert!(
            text.contains("watch_over_budget_total{watch=\"ConfigMap\"} 2\n"),
            "{text}"
        );
    }

    #[test]
    fn an_object_over_budget_is_one_warning_until_it_goes_or_a_relist() {
        let budget = Budget {
            name: "ConfigMap",
            cut: Arc::new(cut_fat),
            metrics: WatchMetrics::default(),
            repeats: Repeats::default(),
        };
        let fat = |rv| {
            let mut o = fat("a", rv);
            o["metadata"]["uid"] = json!("uid-a");
            serde_json::from_value::<ConfigMap>(o).unwrap()
        };
        let logged = warnings(|| {
            for rv in 1..=5 {
                budget.leave_out(Event::Apply(fat(rv)));
            }
        });
        assert_eq!(logged.len(), 1, "{logged:?}");
        assert!(
            logged[0].contains("too large to cache; only a stub of it is kept"),
            "{logged:?}"
        );
        assert!(
            logged[0].contains("name=\"a\"") || logged[0].contains("name=a"),
            "{logged:?}"
        );
        assert!(
            !logged[0].contains("xxxx"),
            "the object's contents: {logged:?}"
        );
        // Gone and back, or a relist: reported again.
        let logged = warnings(|| {
            let deleted = budget.leave_out(Event::Delete(fat(6)));
            assert!(matches!(deleted, Event::Delete(cm) if cm.data.is_none()));
            budget.leave_out(Event::Apply(fat(7)));
            budget.leave_out(Event::Init);
            budget.leave_out(Event::InitApply(fat(8)));
            budget.leave_out(Event::Apply(fat(9)));
        });
        assert_eq!(logged.len(), 2, "{logged:?}");
        // Within the budget: untouched, not reported.
        let small: ConfigMap = serde_json::from_value(object("b", 1)).unwrap();
        let logged = warnings(|| {
            let kept = budget.leave_out(Event::Apply(small.clone()));
            assert!(matches!(kept, Event::Apply(cm) if cm == small));
        });
        assert!(logged.is_empty(), "{logged:?}");
    }

    #[test]
    fn an_object_that_does_not_decode_is_reported_without_its_contents() {
        let decode = serde_json::from_str::<u32>("\"tenant-secret\"").unwrap_err();
        let e = watcher::Error::WatchFailed(kube::Error::SerdeError(decode));
        let message = describe(&e);
        assert!(!message.contains("tenant-secret"), "{message}");
        assert!(
            message.contains("does not decode (line 1, column"),
            "{message}"
        );
        // The API server's own message is kept.
        let denied =
            kube::core::Status::failure("configmaps is forbidden", "Forbidden").with_code(403);
        let e = watcher::Error::InitialListFailed(kube::Error::Api(denied.boxed()));
        assert_eq!(describe(&e), "list failed: configmaps is forbidden");
    }

    #[test]
    fn a_410_is_a_relist_and_only_a_404_on_the_list_is_not_served() {
        let gone = kube::core::Status::failure("too old", "Expired").with_code(410);
        assert!(is_expired(&watcher::Error::WatchError(
            gone.clone().boxed()
        )));
        let missing = kube::core::Status::failure("not found", "NotFound").with_code(404);
        assert!(is_not_served(&watcher::Error::InitialListFailed(
            kube::Error::Api(missing.clone().boxed())
        )));
        assert!(!is_not_served(&watcher::Error::WatchStartFailed(
            kube::Error::Api(missing.boxed())
        )));
        assert!(!is_expired(&watcher::Error::NoResourceVersion));
    }
}
