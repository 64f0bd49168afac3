//! The scale of the built-in workloads (`apps/v1` Deployment, StatefulSet, ReplicaSet) from one
//! watch of each kind, so that a controller evaluating tens of thousands of targets every few
//! seconds reads a target's replicas and selector from memory instead of a `GET …/scale` per
//! evaluation (at 50,000 autoscalers on a 15 s period that is 3,333 requests a second, each
//! decoded, for an answer that changes only when the workload does).
//!
//! An answer is what the scale subresource says for these kinds: `spec.replicas`,
//! `status.replicas`, and the workload's `spec.selector` (the subresource's `status.selector`
//! is that selector printed as a string). The watches decode only those fields.
//!
//! [`WatchedScales::get`] answers `None` — and the caller reads `/scale` as before — for any
//! other kind, for a kind whose watch has not listed yet (or cannot: RBAC without `list`/`watch`
//! on it leaves the controller exactly as it was, with a warning), and for a target the watch
//! has not delivered (a workload created a moment ago, or one that does not exist, whose
//! `404` the caller must report). A read lags a write by the watch's delivery, milliseconds,
//! where evaluations are seconds apart; [`WatchedScales::wrote`] applies a controller's own
//! scale write at once so that its next read does not precede it.
//!
//! A cluster-wide controller holds one entry per workload of the cluster, whether an
//! autoscaler targets it or not, so an entry is kept small (`Held`): the selector as its
//! printed form, read again on each answer (a short string parses in well under a
//! microsecond), instead of the parsed requirements with a B-tree node per value set (about
//! 0.5 KB a workload: 50 MB at 100,000).
//!
//! A selector is a tenant's to write, each label bounded but not their number: a Deployment
//! whose selector and template carry 5,000 labels holds 425 KB of selector, and each of its
//! ReplicaSets the same. One past [`SELECTOR_BUDGET`] is not held ([`Watch::over_budget`]: a
//! warning naming it, `watch_over_budget_total`); a read of it answers `None`, so the caller
//! reads `/scale`, exactly, and only for a workload an autoscaler targets.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{ApiResource, Object};
use kube::runtime::watcher::Event;
use kube::{Api, Client, ResourceExt};
use serde::Deserialize;

use plimsoll_core::cut_down;

use crate::kinds::TargetRef;
use crate::selector::Selector;
use crate::target_scale::TargetScale;
use crate::watch::{Watch, WatchMetrics};

/// The most bytes of a workload's `spec.selector` (as JSON) a scale cache holds. A real
/// selector names a few labels, under 1 KB.
pub const SELECTOR_BUDGET: usize = 16 * 1024;

/// The workload kinds whose scale is watched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Workload {
    Deployment,
    StatefulSet,
    ReplicaSet,
}

impl Workload {
    const ALL: [Workload; 3] = [
        Workload::Deployment,
        Workload::StatefulSet,
        Workload::ReplicaSet,
    ];

    fn of(target: TargetRef<'_>) -> Option<Self> {
        if target.api_version != "apps/v1" {
            return None;
        }
        match target.kind {
            "Deployment" => Some(Self::Deployment),
            "StatefulSet" => Some(Self::StatefulSet),
            "ReplicaSet" => Some(Self::ReplicaSet),
            _ => None,
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    fn kind(self) -> &'static str {
        match self {
            Self::Deployment => "Deployment",
            Self::StatefulSet => "StatefulSet",
            Self::ReplicaSet => "ReplicaSet",
        }
    }

    fn resource(self) -> ApiResource {
        let plural = match self {
            Self::Deployment => "deployments",
            Self::StatefulSet => "statefulsets",
            Self::ReplicaSet => "replicasets",
        };
        ApiResource {
            group: "apps".into(),
            version: "v1".into(),
            api_version: "apps/v1".into(),
            kind: self.kind().into(),
            plural: plural.into(),
        }
    }
}

/// The fields of a workload's spec its scale is made of (the pod template is not decoded).
#[derive(Clone, Debug, Default, Deserialize)]
struct ScaleSpec {
    replicas: Option<i32>,
    selector: Option<LabelSelector>,
}

/// The field of a workload's status its scale is made of.
#[derive(Clone, Debug, Default, Deserialize)]
struct ScaleStatus {
    #[serde(default)]
    replicas: i32,
}

type Workloadish = Object<ScaleSpec, ScaleStatus>;

/// A workload's scale as held between reads.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Held {
    spec_replicas: i32,
    status_replicas: i32,
    selector: HeldSelector,
    resource_version: Option<Box<str>>,
}

/// A selector as held: printed when it reads back the same, as parsed otherwise (none of the
/// label selectors the API server accepts, but nothing is lost if one did not round-trip).
#[derive(Clone, Debug, PartialEq, Eq)]
enum HeldSelector {
    None,
    Printed(Box<str>),
    Parsed(Selector),
}

impl Held {
    fn of(scale: TargetScale) -> Self {
        let selector = match scale.selector {
            None => HeldSelector::None,
            Some(selector) => {
                let printed = selector.to_string();
                if Selector::parse(&printed).is_ok_and(|back| back == selector) {
                    HeldSelector::Printed(printed.into())
                } else {
                    HeldSelector::Parsed(selector)
                }
            }
        };
        Self {
            spec_replicas: scale.spec_replicas,
            status_replicas: scale.status_replicas,
            selector,
            resource_version: scale.resource_version.map(String::into_boxed_str),
        }
    }

    fn scale(&self) -> TargetScale {
        let selector = match &self.selector {
            HeldSelector::None => None,
            // It read back equal when it was held.
            HeldSelector::Printed(printed) => Selector::parse(printed).ok(),
            HeldSelector::Parsed(selector) => Some(selector.clone()),
        };
        TargetScale {
            spec_replicas: self.spec_replicas,
            status_replicas: self.status_replicas,
            selector,
            resource_version: self.resource_version.as_deref().map(str::to_owned),
        }
    }
}

/// `(namespace, name)` → scale, for one kind.
type Scales = HashMap<(String, String), Held>;

#[derive(Debug, Default)]
struct Kind {
    synced: AtomicBool,
    scales: RwLock<Scales>,
}

impl Kind {
    fn read(&self) -> RwLockReadGuard<'_, Scales> {
        self.scales
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Scales> {
        self.scales
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Watch-fed scales of Deployments, StatefulSets and ReplicaSets (cheap to clone; the watches
/// run in [`WatchedScales::watch`]).
#[derive(Clone, Debug, Default)]
pub struct WatchedScales {
    kinds: Arc<[Kind; 3]>,
}

impl WatchedScales {
    /// Empty: every read answers `None` until [`WatchedScales::watch`] has listed a kind.
    pub fn new() -> Self {
        Self::default()
    }

    /// The scale of `target` in `namespace`, when its kind is watched, listed, and the watch
    /// has delivered it.
    pub fn get(&self, namespace: &str, target: TargetRef<'_>) -> Option<TargetScale> {
        let kind = &self.kinds[Workload::of(target)?.index()];
        if !kind.synced.load(Ordering::Acquire) {
            return None;
        }
        kind.read()
            .get(&(namespace.to_owned(), target.name.to_owned()))
            .map(Held::scale)
    }

    /// Applies a controller's own write of `spec.replicas`, so that its next read sees it
    /// before the watch delivers it (a later watch event replaces it).
    pub fn wrote(&self, namespace: &str, target: TargetRef<'_>, scale: &TargetScale) {
        let Some(workload) = Workload::of(target) else {
            return;
        };
        let kind = &self.kinds[workload.index()];
        if let Some(held) = kind
            .write()
            .get_mut(&(namespace.to_owned(), target.name.to_owned()))
        {
            held.spec_replicas = scale.spec_replicas;
        }
    }

    /// Keeps every kind current from its watch (all namespaces, or one), until dropped, with
    /// the errors and relists counted in `metrics`. Watch errors are retried with backoff
    /// ([`crate::watch`]); a kind that never lists (RBAC without `list`/`watch` on it) is never
    /// answered from here, and the caller reads `/scale` for it on every evaluation.
    pub async fn watch(self, client: Client, namespace: Option<String>, metrics: WatchMetrics) {
        let watches = Workload::ALL.map(|workload| {
            let resource = workload.resource();
            let api: Api<Workloadish> = match namespace.as_deref() {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            let kind = &self.kinds[workload.index()];
            let mut listing: Option<Scales> = None;
            Watch::new(workload.kind(), api)
                .metrics(&metrics)
                .over_budget(leave_out_large_selector)
                .run(move |event| apply(kind, &mut listing, event))
        });
        futures::future::join_all(watches).await;
    }
}

/// One watch event into `kind`: a (re)list is collected aside and replaces the map when done,
/// so a relist never answers from a half-filled map.
fn apply(kind: &Kind, listing: &mut Option<Scales>, event: Event<Workloadish>) {
    match event {
        Event::Init => *listing = Some(Scales::new()),
        Event::InitApply(o) => {
            if let (Some(listing), Some(entry)) = (listing.as_mut(), entry(&o)) {
                listing.insert(entry.0, entry.1);
            }
        }
        Event::InitDone => {
            if let Some(listed) = listing.take() {
                *kind.write() = listed;
            }
            kind.synced.store(true, Ordering::Release);
        }
        Event::Apply(o) => {
            if let Some((key, scale)) = entry(&o) {
                kind.write().insert(key, scale);
            } else {
                // Grown past the budget (or nameless): not answered from here any more.
                kind.write()
                    .remove(&(o.namespace().unwrap_or_default(), o.name_any()));
            }
        }
        Event::Delete(o) => {
            kind.write()
                .remove(&(o.namespace().unwrap_or_default(), o.name_any()));
        }
    }
}

/// Cuts the selector of a workload past [`SELECTOR_BUDGET`] and marks it; the bytes it had.
fn leave_out_large_selector(o: &mut Workloadish) -> Option<usize> {
    let bytes = o.spec.selector.as_ref().map_or(0, cut_down::json_len);
    (bytes > SELECTOR_BUDGET).then(|| {
        o.spec.selector = None;
        cut_down::mark_spec_left_out(&mut o.metadata, bytes);
        bytes
    })
}

/// The scale the subresource would report for `o`; `None` for an object without a name, or
/// whose selector was left out ([`leave_out_large_selector`]).
fn entry(o: &Workloadish) -> Option<((String, String), Held)> {
    if cut_down::spec_left_out(&o.metadata).is_some() {
        return None;
    }
    let name = o.metadata.name.clone()?;
    Some((
        (o.namespace().unwrap_or_default(), name),
        Held::of(scale_of(
            &o.spec,
            o.status.as_ref(),
            o.metadata.resource_version.clone(),
        )),
    ))
}

/// As the API server's scale subresource: a selector that does not convert (or an empty one)
/// reports none, which the caller treats as it treats `/scale` without `status.selector`.
fn scale_of(
    spec: &ScaleSpec,
    status: Option<&ScaleStatus>,
    resource_version: Option<String>,
) -> TargetScale {
    let selector = spec
        .selector
        .as_ref()
        .and_then(|s| Selector::from_label_selector(s).ok())
        .filter(|s| *s != Selector::everything());
    TargetScale {
        spec_replicas: spec.replicas.unwrap_or(1),
        status_replicas: status.map_or(0, |s| s.replicas),
        selector,
        resource_version,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workload(name: &str, replicas: Option<i32>, status: Option<i32>) -> Workloadish {
        let mut spec = json!({"selector": {"matchLabels": {"app": name}}});
        if let Some(r) = replicas {
            spec["replicas"] = json!(r);
        }
        let mut o = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "shop", "resourceVersion": "7"},
            "spec": spec,
        });
        if let Some(r) = status {
            o["status"] = json!({"replicas": r, "readyReplicas": r});
        }
        serde_json::from_value(o).unwrap()
    }

    fn web() -> TargetRef<'static> {
        TargetRef::new("apps/v1", "Deployment", "web")
    }

    fn listed(scales: &WatchedScales, objects: Vec<Workloadish>) {
        let kind = &scales.kinds[Workload::Deployment.index()];
        let mut listing = None;
        apply(kind, &mut listing, Event::Init);
        for o in objects {
            apply(kind, &mut listing, Event::InitApply(o));
        }
        apply(kind, &mut listing, Event::InitDone);
    }

    #[test]
    fn answers_what_the_scale_subresource_would() {
        let scales = WatchedScales::new();
        listed(&scales, vec![workload("web", Some(3), Some(2))]);
        let scale = scales.get("shop", web()).unwrap();
        assert_eq!(scale.spec_replicas, 3);
        assert_eq!(scale.status_replicas, 2);
        assert_eq!(scale.selector, Some(Selector::parse("app=web").unwrap()));
        assert_eq!(scale.resource_version.as_deref(), Some("7"));
        // The API server defaults spec.replicas to 1; a new workload has no status yet.
        listed(&scales, vec![workload("web", None, None)]);
        let scale = scales.get("shop", web()).unwrap();
        assert_eq!((scale.spec_replicas, scale.status_replicas), (1, 0));
    }

    #[test]
    fn answers_nothing_before_the_list_or_for_what_it_does_not_watch() {
        let scales = WatchedScales::new();
        let kind = &scales.kinds[Workload::Deployment.index()];
        let mut listing = None;
        apply(kind, &mut listing, Event::Init);
        apply(
            kind,
            &mut listing,
            Event::InitApply(workload("web", Some(3), None)),
        );
        assert_eq!(scales.get("shop", web()), None, "listed halfway");
        apply(kind, &mut listing, Event::InitDone);
        assert!(scales.get("shop", web()).is_some());
        assert_eq!(scales.get("other", web()), None, "another namespace");
        for (api_version, kind) in [
            ("apps/v1", "DaemonSet"),
            ("apps/v1beta1", "Deployment"),
            ("argoproj.io/v1alpha1", "Rollout"),
        ] {
            let target = TargetRef::new(api_version, kind, "web");
            assert_eq!(scales.get("shop", target), None, "{api_version} {kind}");
        }
        let statefulset = TargetRef::new("apps/v1", "StatefulSet", "web");
        assert_eq!(
            scales.get("shop", statefulset),
            None,
            "its kind has not listed"
        );
    }

    #[test]
    fn a_selector_past_the_budget_is_not_held_and_read_from_the_scale_instead() {
        let fat = |name: &str| {
            let mut o = workload(name, Some(3), Some(3));
            let labels = o
                .spec
                .selector
                .get_or_insert_default()
                .match_labels
                .get_or_insert_default();
            for i in 0..500 {
                labels.insert(format!("example.com/label-{i:03}"), "v".repeat(40));
            }
            // As the watch passes it on.
            assert!(leave_out_large_selector(&mut o).is_some_and(|b| b > SELECTOR_BUDGET));
            o
        };
        let mut small = workload("api", Some(1), Some(1));
        assert_eq!(leave_out_large_selector(&mut small), None);
        let scales = WatchedScales::new();
        let kind = &scales.kinds[Workload::Deployment.index()];
        listed(&scales, vec![fat("web"), small]);
        let api = TargetRef::new("apps/v1", "Deployment", "api");
        assert!(scales.get("shop", api).is_some());
        assert_eq!(scales.get("shop", web()), None, "not held: read /scale");
        // Held while small, dropped when it grows past the budget, held again when it shrinks.
        let mut listing = None;
        apply(
            kind,
            &mut listing,
            Event::Apply(workload("web", Some(3), Some(3))),
        );
        assert!(scales.get("shop", web()).is_some());
        apply(kind, &mut listing, Event::Apply(fat("web")));
        assert_eq!(scales.get("shop", web()), None);
        apply(
            kind,
            &mut listing,
            Event::Apply(workload("web", Some(4), Some(3))),
        );
        assert_eq!(scales.get("shop", web()).map(|s| s.spec_replicas), Some(4));
    }

    #[test]
    fn follows_changes_deletes_and_relists() {
        let scales = WatchedScales::new();
        let kind = &scales.kinds[Workload::Deployment.index()];
        listed(
            &scales,
            vec![
                workload("web", Some(3), Some(3)),
                workload("api", Some(1), Some(1)),
            ],
        );
        let mut listing = None;
        apply(
            kind,
            &mut listing,
            Event::Apply(workload("web", Some(5), Some(3))),
        );
        assert_eq!(scales.get("shop", web()).unwrap().spec_replicas, 5);
        apply(
            kind,
            &mut listing,
            Event::Delete(workload("web", Some(5), Some(3))),
        );
        assert_eq!(scales.get("shop", web()), None);

        // A relist answers from the old map until it is complete, then only what it listed.
        let api = TargetRef::new("apps/v1", "Deployment", "api");
        apply(kind, &mut listing, Event::Init);
        apply(
            kind,
            &mut listing,
            Event::InitApply(workload("web", Some(2), Some(2))),
        );
        assert!(scales.get("shop", api).is_some());
        apply(kind, &mut listing, Event::InitDone);
        assert_eq!(scales.get("shop", api), None);
        assert_eq!(scales.get("shop", web()).unwrap().spec_replicas, 2);
    }

    #[test]
    fn a_selector_of_every_shape_is_answered_as_the_workload_has_it() {
        // Held printed between reads: what comes back is what the workload's spec parses to.
        let scales = WatchedScales::new();
        let mut o = workload("web", Some(3), Some(3));
        o.spec.selector = Some(
            serde_json::from_value(json!({
                "matchLabels": {"app": "web", "tier": "front"},
                "matchExpressions": [
                    {"key": "track", "operator": "In", "values": ["stable", "canary"]},
                    {"key": "legacy", "operator": "NotIn", "values": ["yes"]},
                    {"key": "example.com/zone", "operator": "Exists"},
                    {"key": "retired", "operator": "DoesNotExist"}]
            }))
            .unwrap(),
        );
        let expected = Selector::from_label_selector(o.spec.selector.as_ref().unwrap()).unwrap();
        listed(&scales, vec![o]);
        let kind = &scales.kinds[Workload::Deployment.index()];
        let held = kind.read().values().next().cloned().unwrap();
        assert!(
            matches!(held.selector, HeldSelector::Printed(_)),
            "{held:?}"
        );
        assert_eq!(scales.get("shop", web()).unwrap().selector, Some(expected));
        // A selector kept parsed is answered as well.
        let parsed = Held {
            selector: HeldSelector::Parsed(Selector::parse("app=web").unwrap()),
            ..held
        };
        assert_eq!(
            parsed.scale().selector,
            Some(Selector::parse("app=web").unwrap())
        );
    }

    #[test]
    fn a_write_is_read_back_before_the_watch_delivers_it() {
        let scales = WatchedScales::new();
        listed(&scales, vec![workload("web", Some(3), Some(3))]);
        let written = TargetScale {
            spec_replicas: 6,
            status_replicas: 3,
            selector: None,
            resource_version: Some("8".into()),
        };
        scales.wrote("shop", web(), &written);
        let read = scales.get("shop", web()).unwrap();
        assert_eq!((read.spec_replicas, read.status_replicas), (6, 3));
        assert_eq!(read.selector, Some(Selector::parse("app=web").unwrap()));
        // Nothing is made up for a target the watch does not know.
        scales.wrote(
            "shop",
            TargetRef::new("apps/v1", "Deployment", "new"),
            &written,
        );
        assert_eq!(
            scales.get("shop", TargetRef::new("apps/v1", "Deployment", "new")),
            None
        );
    }
}
