//! Kubernetes Events, reported as the service's binary name.
//!
//! A thin wrapper over kube-runtime's [`Recorder`], which deduplicates repeated events into an
//! `EventSeries`. Events are what users see in `kubectl describe`; publishing one is best
//! effort, so [`Events::publish`] logs failures instead of returning them.
//!
//! RBAC: `create` and `patch` on `events.k8s.io` `events`.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Publishes Events with `reportingController` set to the binary name and
/// `reportingInstance` to `$POD_NAME` (else the host name).
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
}

impl Events {
    /// A publisher for `binary` (e.g. `hpa-plus`).
    pub fn new(client: Client, binary: &str) -> Self {
        let reporter = Reporter {
            controller: binary.to_owned(),
            instance: Some(crate::leader::identity()),
        };
        Self {
            recorder: Recorder::new(client, reporter),
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
        let event = Event {
            type_,
            reason: reason.to_owned(),
            // A note repeats names and errors a namespace user controls, and one over 1 KiB
            // is refused by the API server.
            note: Some(plimsoll_core::printable::message(
                &note.into(),
                plimsoll_core::printable::MAX_EVENT_NOTE_BYTES,
            )),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(err) = self.recorder.publish(&event, regarding).await {
            tracing::warn!(
                error = %crate::api_message(&err),
                reason,
                namespace = regarding.namespace.as_deref(),
                name = regarding.name.as_deref(),
                "cannot publish event"
            );
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

    /// The underlying recorder, for callers that need `secondary` references.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
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
}
