//! One Event store under `core/v1` and `events.k8s.io/v1`: what kube-runtime's `Recorder`
//! writes (the way every Plimsoll service reports, crates/runtime/src/events.rs) is what
//! `core/v1` clients list, watch and select, and the reverse; `kubectl get events` prints the
//! real server's columns and `kubectl describe` shows the Events section. The kubectl half is
//! skipped, with a printed reason, when `kubectl` is not installed.
#![allow(clippy::unwrap_used, clippy::panic)] // integration tests: helpers fail loudly

use crate::common;

use common::kubectl::{available as kubectl_available, ok, run as kubectl};

use std::path::Path;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event as CoreEvent, ObjectReference};
use k8s_openapi::api::events::v1::Event as NewEvent;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use serde_json::json;

/// A Deployment `web` in `default`, created through the API, and its object reference.
async fn web_deployment(client: &Client) -> ObjectReference {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.example/web:1"}]}}},
    }))
    .unwrap();
    let d = deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    d.object_ref(&())
}

/// Publishes `reason` about `regarding` the way the services do.
async fn publish(recorder: &Recorder, regarding: &ObjectReference, reason: &str, note: &str) {
    recorder
        .publish(
            &Event {
                type_: EventType::Normal,
                reason: reason.into(),
                note: Some(note.into()),
                action: "Scale".into(),
                secondary: None,
            },
            regarding,
        )
        .await
        .unwrap();
}

fn reporter() -> Reporter {
    Reporter {
        controller: "plimsoll-test".into(),
        instance: Some("plimsoll-test-0".into()),
    }
}

fn dynamic(client: &Client, group: &str) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", "Event"), "events");
    Api::namespaced_with(client.clone(), "default", &ar)
}

/// The next non-bookmark watch event, within 5 s.
async fn next<S>(stream: &mut S) -> (&'static str, DynamicObject)
where
    S: futures::Stream<Item = Result<WatchEvent<DynamicObject>, kube::Error>> + Unpin,
{
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
            .await
            .expect("a watch event within 5 s")
            .unwrap()
            .expect("the watch stays open");
        match ev {
            WatchEvent::Added(o) => return ("ADDED", o),
            WatchEvent::Modified(o) => return ("MODIFIED", o),
            WatchEvent::Deleted(o) => return ("DELETED", o),
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("watch error: {e:?}"),
        }
    }
}

/// The status of a refused request (panics on success or a non-API error).
fn refusal<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> (u16, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.message),
        other => panic!("expected a refusal: {other:?}"),
    }
}

/// The Events' resourceVersion now, to watch from.
async fn list_rv<K>(api: &Api<K>) -> String
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
}

/// How many Events `fields` selects through `api`.
async fn count<K>(api: &Api<K>, fields: &str) -> usize
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default().fields(fields))
        .await
        .unwrap()
        .items
        .len()
}

#[tokio::test]
async fn recorder_events_are_core_events() {
    let (sim, client) = common::start().await;
    let regarding = web_deployment(&client).await;
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let new: Api<NewEvent> = Api::namespaced(client.clone(), "default");
    let rv = list_rv(&core).await;
    let mut core_watch = dynamic(&client, "")
        .watch(
            &WatchParams::default().fields("involvedObject.name=web,reason=Rescaled"),
            &rv,
        )
        .await
        .unwrap()
        .boxed();

    // A first event is created, a repeat becomes a series (a merge patch through events.k8s.io).
    let recorder = Recorder::new(client.clone(), reporter());
    publish(&recorder, &regarding, "Rescaled", "scaled to 2").await;
    let (t, o) = next(&mut core_watch).await;
    assert_eq!(
        (t, o.types.as_ref().unwrap().api_version.as_str()),
        ("ADDED", "v1")
    );
    assert_eq!(o.data["message"], "scaled to 2");
    publish(&recorder, &regarding, "Rescaled", "scaled to 2").await;
    let (t, o) = next(&mut core_watch).await;
    assert_eq!(t, "MODIFIED");
    assert_eq!(o.data["series"]["count"], 2);

    let selected = ListParams::default().fields("involvedObject.name=web,reason=Rescaled");
    let listed = core.list(&selected).await.unwrap().items;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let e = &listed[0];
    assert_eq!(e.involved_object.kind.as_deref(), Some("Deployment"));
    assert_eq!(e.involved_object.uid, regarding.uid);
    assert_eq!(e.message.as_deref(), Some("scaled to 2"));
    assert_eq!(e.reporting_component.as_deref(), Some("plimsoll-test"));
    assert_eq!(e.reporting_instance.as_deref(), Some("plimsoll-test-0"));
    assert_eq!(e.action.as_deref(), Some("Scale"));
    assert_eq!(e.series.as_ref().map(|s| s.count), Some(Some(2)));
    assert!(e.event_time.is_some() && e.count.is_none() && e.first_timestamp.is_none());
    let same = new.get(e.metadata.name.as_deref().unwrap()).await.unwrap();
    assert_eq!(
        same.metadata.resource_version, e.metadata.resource_version,
        "one object"
    );
    assert_eq!(same.metadata.uid, e.metadata.uid);
    field_selectors_are_each_groups(&core, &new).await;
    sim.shutdown().await;
}

/// Each group selects by its own field labels and refuses the other's, with the real message.
async fn field_selectors_are_each_groups(core: &Api<CoreEvent>, new: &Api<NewEvent>) {
    for (fields, want) in [
        // With the reason: the sim's deployment controller reports its own ScalingReplicaSet
        // about the same Deployment once it has ticked.
        (
            "involvedObject.kind=Deployment,involvedObject.namespace=default,reason=Rescaled",
            1,
        ),
        (
            "involvedObject.kind=Deployment,involvedObject.namespace=elsewhere",
            0,
        ),
        ("involvedObject.uid=nothing", 0),
        ("reportingComponent=plimsoll-test,type=Normal", 1),
        ("source=plimsoll-test", 1),
    ] {
        assert_eq!(count(core, fields).await, want, "{fields}");
    }
    for (fields, want) in [
        ("regarding.name=web,reportingController=plimsoll-test", 1),
        ("regarding.kind=Pod", 0),
    ] {
        assert_eq!(count(new, fields).await, want, "{fields}");
    }
    for label in ["regarding.name", "foo"] {
        let refused = refusal(
            core.list(&ListParams::default().fields(&format!("{label}=x")))
                .await,
        );
        assert_eq!(
            refused,
            (400, format!("field label not supported: {label}"))
        );
    }
    let refused = refusal(
        new.list(&ListParams::default().fields("involvedObject.name=web"))
            .await,
    );
    assert_eq!(refused.0, 400);
}

#[tokio::test]
async fn core_events_are_events_api_events() {
    let (sim, client) = common::start().await;
    web_deployment(&client).await;
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let new: Api<NewEvent> = Api::namespaced(client.clone(), "default");
    let rv = list_rv(&new).await;
    let mut new_watch = dynamic(&client, "events.k8s.io")
        .watch(
            &WatchParams::default().fields("regarding.name=web,reason=Legacy"),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    let legacy: CoreEvent = serde_json::from_value(json!({
        "metadata": {"name": "web.legacy"},
        "involvedObject": {"kind": "Deployment", "name": "web", "namespace": "default", "apiVersion": "apps/v1"},
        "reason": "Legacy", "message": "from the core API", "type": "Warning", "count": 3,
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:05:00Z",
        "source": {"component": "old-controller", "host": "node-1"},
    }))
    .unwrap();
    core.create(&PostParams::default(), &legacy).await.unwrap();
    let (t, o) = next(&mut new_watch).await;
    assert_eq!(
        (t, o.types.as_ref().unwrap().api_version.as_str()),
        ("ADDED", "events.k8s.io/v1")
    );
    assert_eq!(o.data["note"], "from the core API");
    let read = new.get("web.legacy").await.unwrap();
    assert_eq!(
        read.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("web")
    );
    assert_eq!(read.deprecated_count, Some(3));
    assert_eq!(
        read.deprecated_source
            .as_ref()
            .and_then(|s| s.host.as_deref()),
        Some("node-1")
    );
    assert_eq!(read.note.as_deref(), Some("from the core API"));

    // core/v1 may rewrite an Event; the events.k8s.io watcher sees the change.
    let mut legacy = core.get("web.legacy").await.unwrap();
    legacy.message = Some("rewritten".into());
    core.replace("web.legacy", &PostParams::default(), &legacy)
        .await
        .unwrap();
    let (t, o) = next(&mut new_watch).await;
    assert_eq!(
        (t, o.data["note"].as_str()),
        ("MODIFIED", Some("rewritten"))
    );
    events_api_writes_are_strict(&new).await;

    core.delete("web.legacy", &DeleteParams::default())
        .await
        .unwrap();
    let (t, _) = next(&mut new_watch).await;
    assert_eq!(t, "DELETED");
    assert_eq!(refusal(new.get("web.legacy").await).0, 404);
    sim.shutdown().await;
}

/// events.k8s.io/v1 keeps everything but the series immutable, and a create through it must
/// carry eventTime and none of the deprecated fields.
async fn events_api_writes_are_strict(new: &Api<NewEvent>) {
    let mut read = new.get("web.legacy").await.unwrap();
    read.note = Some("rewritten again".into());
    assert_eq!(
        refusal(new.replace("web.legacy", &PostParams::default(), &read).await),
        (
            422,
            "Event \"web.legacy\" is invalid: message: Invalid value: \"rewritten again\": field is immutable".to_string()
        )
    );
    let mut untimed = read.clone();
    untimed.metadata = kube::api::ObjectMeta {
        name: Some("web.untimed".into()),
        ..Default::default()
    };
    assert_eq!(
        refusal(new.create(&PostParams::default(), &untimed).await),
        (
            422,
            "Event \"web.untimed\" is invalid: [eventTime: Required value, firstTimestamp: Invalid value: \"\": needs to be unset, lastTimestamp: Invalid value: \"\": needs to be unset, count: Invalid value: \"\": needs to be unset, source: Invalid value: \"\": needs to be unset]".to_string()
        )
    );
}

/// The header line of a `kubectl get` table, split into its column names.
fn header(table: &str) -> Vec<String> {
    let line = table.lines().next().unwrap_or_default();
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(String::from)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_shows_recorder_events() {
    if !kubectl_available() {
        println!("skipping kubectl_shows_recorder_events: kubectl is not installed");
        return;
    }
    let (sim, client) = common::start().await;
    let regarding = web_deployment(&client).await;
    let recorder = Recorder::new(client.clone(), reporter());
    publish(&recorder, &regarding, "Rescaled", "scaled to 2 ").await;
    let dir = common::kubectl::scratch_dir("events");
    let kc = dir.join("kubeconfig");
    std::fs::write(&kc, sim.kubeconfig()).unwrap();
    let kc2 = kc.clone();
    tokio::task::spawn_blocking(move || {
        let kc = kc2.as_path();
        prints_event_tables(kc);
        selects_events_by_field(kc);
        describe_shows_the_event(kc);
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    sim.shutdown().await;
}

/// `get events` prints the real server's columns (and `-o wide` its wide ones) for both groups.
fn prints_event_tables(kc: &Path) {
    let table = ok(kc, &["get", "events"]);
    assert_eq!(
        header(&table),
        ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "{table}"
    );
    let row = table
        .lines()
        .find(|l| l.contains("Rescaled"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        row.contains("Normal")
            && row.contains("deployment/web")
            && row.trim_end().ends_with("scaled to 2"),
        "{row}"
    );

    let wide = ok(kc, &["get", "events", "-o", "wide"]);
    assert_eq!(
        header(&wide),
        [
            "LAST SEEN",
            "TYPE",
            "REASON",
            "OBJECT",
            "SUBOBJECT",
            "SOURCE",
            "MESSAGE",
            "FIRST SEEN",
            "COUNT",
            "NAME"
        ],
        "{wide}"
    );
    let row = wide
        .lines()
        .find(|l| l.contains("Rescaled"))
        .unwrap_or_else(|| panic!("{wide}"));
    assert!(
        row.contains("plimsoll-test, plimsoll-test-0")
            && row.contains(" 1 ")
            && row.contains("web."),
        "{row}"
    );

    let new_group = ok(kc, &["get", "events.events.k8s.io"]);
    assert_eq!(
        header(&new_group),
        ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "{new_group}"
    );
    assert!(new_group.contains("Rescaled"), "{new_group}");
}

/// `--field-selector` on `involvedObject.*` (and `regarding.*` for the newer group); an
/// unsupported label is the server's 400.
fn selects_events_by_field(kc: &Path) {
    let selected = ok(
        kc,
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=web,reason=Rescaled",
        ],
    );
    assert_eq!(selected.lines().count(), 2, "{selected}");
    let none = ok(
        kc,
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=nothing",
        ],
    );
    assert!(none.contains("No resources found"), "{none}");
    let (succeeded, refused) = kubectl(kc, &["get", "events", "--field-selector", "foo=bar"]);
    assert!(
        !succeeded && refused.contains("field label not supported: foo"),
        "{refused}"
    );
    let new_group = ok(
        kc,
        &[
            "get",
            "events.events.k8s.io",
            "--field-selector",
            "regarding.name=web,reportingController=plimsoll-test",
        ],
    );
    assert_eq!(new_group.lines().count(), 2, "{new_group}");
}

/// `describe` lists core/v1 Events by an `involvedObject` field selector; its FROM column is the
/// source component, else the reporting controller (kubectl prints no instance there).
fn describe_shows_the_event(kc: &Path) {
    let described = ok(kc, &["describe", "deployment", "web"]);
    let events = described
        .split("Events:")
        .nth(1)
        .unwrap_or_else(|| panic!("{described}"));
    let line = events
        .lines()
        .find(|l| l.contains("Rescaled"))
        .unwrap_or_else(|| panic!("{described}"));
    assert!(
        line.contains("plimsoll-test") && line.contains("scaled to 2"),
        "{line}"
    );
}
