//! Kubernetes Events (`events.k8s.io/v1`), reported as the service's binary name.
//!
//! Events are what users see in `kubectl describe`; publishing one is best effort, so
//! [`Events::publish`] logs failures instead of returning them.
//!
//! **Repeats are counted, not written.** The services report a failure at every evaluation (as
//! upstream's controllers do), and a namespace user can keep a thousand objects failing: one
//! write per report would be tens of writes a second, and with `--kube-api-qps` the tokens
//! every other object's writes wait on. As client-go's `events/v1` broadcaster does, the same
//! Event (same object, type, reason, action and note) is created once, becomes a series at its
//! second report, and after that only counts in memory, written again when its last write is
//! [`REFRESH_AFTER`] old. A series not reported for [`FINISH_AFTER`] is over: the next report
//! creates a new Event. kube-runtime's `Recorder`, used before, wrote every repeat, and took
//! two reports about an unchanged object with the same reason but different notes for one
//! (vpa-updater's second `EvictedPod` of a loop counted as a repeat of the first, whose pod it
//! named). The object's resourceVersion is not part of what makes two reports the same: a
//! failure reported again after a status write is the same failure.
//!
//! RBAC: `create` and `patch` on `events.k8s.io` `events`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
pub use kube::runtime::events::EventType;

/// A series reported again within this is written only when its last write is older than
/// [`REFRESH_AFTER`]; one not reported for this long is over (client-go's `finishTime`).
pub const FINISH_AFTER: SignedDuration = SignedDuration::from_mins(6);

/// How often a series reported again is written (client-go's `refreshTime`).
pub const REFRESH_AFTER: SignedDuration = SignedDuration::from_mins(30);

/// The longest name an Event may have (a DNS subdomain).
const MAX_NAME: usize = 253;

/// What makes two reports the same Event.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    regarding: [Option<String>; 5],
    warning: bool,
    reason: String,
    action: String,
    note: String,
}

/// An Event created, and what was reported of it since.
#[derive(Clone, Debug)]
struct Series {
    name: String,
    count: i32,
    last_observed: Timestamp,
    last_written: Timestamp,
}

/// What one report asks of the API server.
enum Write {
    Create,
    Series { name: String, count: i32 },
    Nothing,
}

/// Publishes Events with `reportingController` set to the binary name and
/// `reportingInstance` to `$POD_NAME` (else the host name).
#[derive(Clone)]
pub struct Events {
    client: Client,
    controller: String,
    instance: String,
    series: Arc<Mutex<HashMap<Key, Series>>>,
}

impl Events {
    /// A publisher for `binary` (e.g. `hpa-plus`).
    pub fn new(client: Client, binary: &str) -> Self {
        Self {
            client,
            controller: binary.to_owned(),
            instance: crate::leader::identity(),
            series: Arc::default(),
        }
    }

    /// Publishes an event about `regarding` (use `Resource::object_ref(&obj, &())`).
    ///
    /// `reason` is a short CamelCase word (`SuccessfulRescale`), `action` what was done
    /// (`Scale`), `note` the human-readable message. Failures are logged, not returned.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        // A note repeats names and errors a namespace user controls, and one over 1 KiB is
        // refused by the API server.
        let note = plimsoll_core::printable::message(
            &note.into(),
            plimsoll_core::printable::MAX_EVENT_NOTE_BYTES,
        );
        let key = Key {
            regarding: [
                regarding.api_version.clone(),
                regarding.kind.clone(),
                regarding.namespace.clone(),
                regarding.name.clone(),
                regarding.uid.clone(),
            ],
            warning: type_ == EventType::Warning,
            reason: reason.to_owned(),
            action: action.to_owned(),
            note,
        };
        let now = Timestamp::now();
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let events: Api<K8sEvent> = Api::namespaced(self.client.clone(), namespace);
        let result = match self.observe(&key, now) {
            Write::Nothing => return,
            Write::Create => {
                let event = self.event(regarding, &key, now);
                let name = event.metadata.name.clone().unwrap_or_default();
                let created = events.create(&PostParams::default(), &event).await;
                if created.is_ok() {
                    self.created(key.clone(), name, now);
                }
                created.map(drop)
            }
            Write::Series { name, count } => {
                let series = serde_json::json!({"series": EventSeries {
                    count,
                    last_observed_time: MicroTime(now),
                }});
                let patched = events
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&series))
                    .await;
                if matches!(&patched, Err(kube::Error::Api(s)) if s.code == 404) {
                    // The Event is gone (its TTL, or deleted): the next report creates another.
                    self.forget(&key);
                }
                patched.map(drop)
            }
        };
        if let Err(err) = result {
            tracing::warn!(
                error = %crate::api_message(&err),
                reason,
                namespace = regarding.namespace.as_deref(),
                name = regarding.name.as_deref(),
                "cannot publish event"
            );
        }
    }

    /// Counts a report of `key` at `now`; what to write for it. Before each new Event the
    /// series that are over are forgotten, so the memory holds only those reported within
    /// [`FINISH_AFTER`] (and the sweep costs no more often than a write).
    fn observe(&self, key: &Key, now: Timestamp) -> Write {
        let mut all = self
            .series
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let over = |s: &Series| now.duration_since(s.last_observed) >= FINISH_AFTER;
        let Some(s) = all.get_mut(key).filter(|s| !over(s)) else {
            all.retain(|_, s| !over(s));
            return Write::Create;
        };
        s.count = s.count.saturating_add(1);
        s.last_observed = now;
        if s.count > 2 && now.duration_since(s.last_written) < REFRESH_AFTER {
            return Write::Nothing;
        }
        s.last_written = now;
        Write::Series {
            name: s.name.clone(),
            count: s.count,
        }
    }

    /// Forgets the series of `key`.
    fn forget(&self, key: &Key) {
        self.series
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
    }

    /// Remembers the Event `name` created for `key` at `now`.
    fn created(&self, key: Key, name: String, now: Timestamp) {
        self.series
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(
                key,
                Series {
                    name,
                    count: 1,
                    last_observed: now,
                    last_written: now,
                },
            );
    }

    /// A new Event for `key` about `regarding`, named after it and the time (cut so that the
    /// name stays within [`MAX_NAME`]).
    fn event(&self, regarding: &ObjectReference, key: &Key, now: Timestamp) -> K8sEvent {
        let suffix = format!(".{:x}", now.as_nanosecond());
        let mut prefix = regarding
            .name
            .clone()
            .unwrap_or_else(|| self.controller.clone());
        prefix.truncate(MAX_NAME - suffix.len());
        K8sEvent {
            metadata: ObjectMeta {
                namespace: regarding.namespace.clone(),
                name: Some(prefix + &suffix),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some(key.action.clone()),
            reason: Some(key.reason.clone()),
            note: Some(key.note.clone()),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(if key.warning { "Warning" } else { "Normal" }.to_owned()),
            ..K8sEvent::default()
        }
    }

    /// Publishes a `Normal` event.
    pub async fn normal(
        &self,
        regarding: &ObjectReference,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        self.publish(regarding, EventType::Normal, reason, action, note)
            .await;
    }

    /// Publishes a `Warning` event.
    pub async fn warning(
        &self,
        regarding: &ObjectReference,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        self.publish(regarding, EventType::Warning, reason, action, note)
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_api::FakeApi;

    #[tokio::test]
    async fn events_are_reported_as_the_binary_and_failures_do_not_propagate() {
        let api = FakeApi::new();
        api.respond(
            "POST",
            "/apis/events.k8s.io/v1/namespaces/shop/events",
            201,
            r#"{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"web.1","namespace":"shop"},"eventTime":"2026-11-21T10:00:00.000000Z"}"#,
        );
        let events = Events::new(api.client(), "hpa-plus");
        let regarding = ObjectReference {
            api_version: Some("autoscaling.plimsoll.dev/v1alpha1".into()),
            kind: Some("HorizontalPodAutoscalerPlus".into()),
            name: Some("web".into()),
            namespace: Some("shop".into()),
            ..ObjectReference::default()
        };
        events
            .normal(
                &regarding,
                "SuccessfulRescale",
                "Scale",
                "New size: 4; reason: cpu above target",
            )
            .await;
        let sent = api.requests();
        assert_eq!(sent.len(), 1);
        let body: serde_json::Value = serde_json::from_str(&sent[0].body).unwrap();
        assert_eq!(body["reportingController"], "hpa-plus");
        assert_eq!(body["reason"], "SuccessfulRescale");
        assert_eq!(body["type"], "Normal");
        assert_eq!(body["regarding"]["name"], "web");
        assert_eq!(body["note"], "New size: 4; reason: cpu above target");
        // A note with a tenant's escape sequence and past the API's 1 KiB: escaped and cut.
        let long = format!("job {}: {}", "x\u{1b}]0;t\u{7}", "y".repeat(2000));
        events.normal(&regarding, "JobFailed", "Scale", long).await;
        let body: serde_json::Value = serde_json::from_str(&api.requests()[1].body).unwrap();
        let note = body["note"].as_str().unwrap_or_default();
        assert!(note.starts_with("job x\\u{1b}]0;t\\u{7}: yyy"), "{note}");
        assert!(note.len() <= 1024, "{}", note.len());
        // The API refuses (404 from the fake for another namespace): logged, not returned.
        let elsewhere = ObjectReference {
            namespace: Some("other".into()),
            ..regarding
        };
        events
            .warning(&elsewhere, "FailedGetScale", "Scale", "boom")
            .await;
        assert_eq!(api.requests().len(), 3);
    }

    fn reference() -> ObjectReference {
        ObjectReference {
            api_version: Some("autoscaling.plimsoll.dev/v1alpha1".into()),
            kind: Some("HorizontalPodAutoscalerPlus".into()),
            name: Some("web".into()),
            namespace: Some("shop".into()),
            uid: Some("u-1".into()),
            ..ObjectReference::default()
        }
    }

    /// A failure reported at every evaluation: one create, one series, then nothing until a
    /// report with another note, which is an Event of its own.
    #[tokio::test]
    async fn repeats_are_counted_and_other_notes_are_events_of_their_own() {
        let api = FakeApi::new();
        let events_path = "/apis/events.k8s.io/v1/namespaces/shop/events";
        api.respond("POST", events_path, 201, r#"{"metadata":{"name":"x"}}"#);
        let events = Events::new(api.client(), "hpa-plus");
        let one_event = |name: &str| format!("{events_path}/{name}");
        events
            .warning(&reference(), "FailedGetScale", "GetScale", "not found")
            .await;
        let created: serde_json::Value = serde_json::from_str(&api.requests()[0].body).unwrap();
        let first = created["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        api.respond(
            "PATCH",
            &one_event(&first),
            200,
            r#"{"metadata":{"name":"x"}}"#,
        );
        for _ in 1..1_000 {
            events
                .warning(&reference(), "FailedGetScale", "GetScale", "not found")
                .await;
        }
        events
            .normal(&reference(), "SuccessfulRescale", "Scale", "New size: 4")
            .await;
        events
            .normal(&reference(), "SuccessfulRescale", "Scale", "New size: 6")
            .await;
        let sent = api.requests();
        let shape: Vec<(&str, bool)> = sent
            .iter()
            .map(|r| (r.method.as_str(), r.uri.starts_with(events_path)))
            .collect();
        assert_eq!(
            shape,
            [
                ("POST", true),
                ("PATCH", true),
                ("POST", true),
                ("POST", true)
            ],
            "{sent:?}"
        );
        let created: serde_json::Value = serde_json::from_str(&sent[0].body).unwrap();
        let name = created["metadata"]["name"].as_str().unwrap_or_default();
        let patched = sent[1].uri.split('?').next().unwrap_or_default();
        assert!(patched.ends_with(&format!("/{name}")), "{}", sent[1].uri);
        let series: serde_json::Value = serde_json::from_str(&sent[1].body).unwrap();
        assert_eq!(series["series"]["count"], 2);
        let notes: Vec<serde_json::Value> = [2, 3]
            .iter()
            .map(|&i| {
                serde_json::from_str::<serde_json::Value>(&sent[i].body).unwrap()["note"].clone()
            })
            .collect();
        assert_eq!(notes, ["New size: 4", "New size: 6"]);
    }

    /// An Event that is gone when its series is written (its TTL ran out, or it was deleted)
    /// is created again at the next report, not patched in vain until the series ends.
    #[tokio::test]
    async fn an_event_gone_is_created_again() {
        let api = FakeApi::new();
        let events_path = "/apis/events.k8s.io/v1/namespaces/shop/events";
        api.respond("POST", events_path, 201, r#"{"metadata":{"name":"x"}}"#);
        let events = Events::new(api.client(), "hpa-plus");
        for _ in 0..3 {
            events
                .warning(&reference(), "FailedGetScale", "GetScale", "not found")
                .await;
        }
        let methods: Vec<String> = api.requests().into_iter().map(|r| r.method).collect();
        assert_eq!(methods, ["POST", "PATCH", "POST"]);
    }

    /// The series' clock: written at the second report and every [`REFRESH_AFTER`] after,
    /// over after [`FINISH_AFTER`] without a report.
    #[tokio::test]
    async fn a_series_is_written_again_after_its_refresh_and_ends_when_unreported() {
        let events = Events::new(FakeApi::new().client(), "hpa-plus");
        let key = Key {
            regarding: Default::default(),
            warning: true,
            reason: "FailedGetScale".into(),
            action: "GetScale".into(),
            note: "not found".into(),
        };
        let t0 = Timestamp::UNIX_EPOCH;
        let at = |s: i64| t0 + SignedDuration::from_secs(s);
        let writes = |w: Write| match w {
            Write::Create => "create".to_owned(),
            Write::Series { count, .. } => format!("series {count}"),
            Write::Nothing => String::new(),
        };
        assert_eq!(writes(events.observe(&key, t0)), "create");
        events.created(key.clone(), "web.1".into(), t0);
        let mut seen = Vec::new();
        // Every 15 s for 61 minutes: the second report, then one write per 30 minutes.
        for i in 1..=244 {
            let w = writes(events.observe(&key, at(15 * i)));
            if !w.is_empty() {
                seen.push((15 * i, w));
            }
        }
        assert_eq!(
            seen,
            [
                (15, "series 2".into()),
                (1815, "series 122".into()),
                (3615, "series 242".into())
            ]
        );
        // Silent for FINISH_AFTER: the next report is a new Event.
        let later = at(15 * 244) + FINISH_AFTER;
        assert_eq!(writes(events.observe(&key, later)), "create");
        let held = events
            .series
            .lock()
            .map(|all| all.len())
            .unwrap_or_default();
        assert_eq!(held, 0, "the series that is over is forgotten");
    }

    #[tokio::test]
    async fn a_long_name_gives_an_event_name_within_the_limit() {
        let events = Events::new(FakeApi::new().client(), "hpa-plus");
        let long = ObjectReference {
            name: Some("n".repeat(253)),
            ..reference()
        };
        let key = Key {
            regarding: Default::default(),
            warning: false,
            reason: "R".into(),
            action: "A".into(),
            note: String::new(),
        };
        let event = events.event(&long, &key, Timestamp::now());
        let name = event.metadata.name.unwrap_or_default();
        assert!(
            name.len() <= MAX_NAME && name.starts_with("nnn"),
            "{}",
            name.len()
        );
    }
}
