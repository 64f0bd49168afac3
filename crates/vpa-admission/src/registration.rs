//! The MutatingWebhookConfiguration that sends pod CREATEs and VPA CREATE/UPDATEs here, and how
//! a `--self-signed` CA bundle reaches it ([`Publish`]):
//!
//! - the chart and deploy/ install the configuration (so uninstalling removes it) without a
//!   `caBundle`; the webhook patches only `caBundle` of each of its webhooks
//!   ([`patch_ca_bundle`]), so everything else stays theirs, and a `helm upgrade` (a three-way
//!   merge of manifests that never set `caBundle`) keeps what the webhook wrote;
//! - `--register-webhook` (for installs without the chart) creates the configuration, or
//!   replaces its `webhooks` ([`register`]).
//!
//! The configuration: `failurePolicy: Ignore` (a pod never fails to start because the webhook
//! is down), `sideEffects: None`, `admissionReviewVersions: [v1]`, `timeoutSeconds` (5 by
//! default, upstream uses 30: see `--webhook-timeout-seconds`), and the namespaceSelector of the
//! webhook's [`NamespaceScope`] (by default leaving out `kube-system` and the webhook's own
//! namespace, whose pods must start even when no replica is up; the updater acts in the same
//! scope). Updates keep the object's metadata (labels, annotations) and replace `webhooks`.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use plimsoll_core::vertical::scope::NamespaceScope;

use crate::error::{Error, Result};

/// Where the apiserver reaches the webhook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A Service (`<name>.<namespace>.svc:<port>`), path `/`.
    Service {
        /// Service namespace.
        namespace: String,
        /// Service name.
        name: String,
        /// Service port.
        port: i32,
    },
    /// An `https://` URL.
    Url(String),
}

/// What goes into the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    /// Object name (`plimsoll-vpa-admission`).
    pub config_name: String,
    /// Where to call.
    pub endpoint: Endpoint,
    /// PEM of the CA that signed the serving certificate.
    pub ca_bundle: Vec<u8>,
    /// `timeoutSeconds`.
    pub timeout_seconds: i32,
    /// The namespaces sent to the webhook (its `namespaceSelector`).
    pub scope: NamespaceScope,
}

/// The webhook's name inside the configuration.
pub const WEBHOOK_NAME: &str = "vpa.plimsoll.dev";

/// Builds the configuration object.
pub fn configuration(r: &Registration) -> MutatingWebhookConfiguration {
    let client_config = match &r.endpoint {
        Endpoint::Service {
            namespace,
            name,
            port,
        } => WebhookClientConfig {
            service: Some(ServiceReference {
                namespace: namespace.clone(),
                name: name.clone(),
                port: Some(*port),
                path: Some("/".to_owned()),
            }),
            ca_bundle: Some(ByteString(r.ca_bundle.clone())),
            url: None,
        },
        Endpoint::Url(url) => WebhookClientConfig {
            url: Some(url.clone()),
            ca_bundle: Some(ByteString(r.ca_bundle.clone())),
            service: None,
        },
    };
    let rule = |group: &str, ops: &[&str], resource: &str| RuleWithOperations {
        api_groups: Some(vec![group.to_owned()]),
        api_versions: Some(vec!["v1".to_owned()]),
        operations: Some(ops.iter().map(|o| (*o).to_owned()).collect()),
        resources: Some(vec![resource.to_owned()]),
        scope: Some("Namespaced".to_owned()),
    };
    MutatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(r.config_name.clone()),
            labels: Some(
                [
                    ("app.kubernetes.io/name".to_owned(), "plimsoll".to_owned()),
                    (
                        "app.kubernetes.io/component".to_owned(),
                        "vpa-admission".to_owned(),
                    ),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        webhooks: Some(vec![MutatingWebhook {
            name: WEBHOOK_NAME.to_owned(),
            admission_review_versions: vec!["v1".to_owned()],
            side_effects: "None".to_owned(),
            failure_policy: Some("Ignore".to_owned()),
            timeout_seconds: Some(r.timeout_seconds),
            client_config,
            rules: Some(vec![
                rule("", &["CREATE"], "pods"),
                rule(
                    "autoscaling.k8s.io",
                    &["CREATE", "UPDATE"],
                    "verticalpodautoscalers",
                ),
            ]),
            namespace_selector: r.scope.namespace_selector(),
            match_policy: Some("Equivalent".to_owned()),
            reinvocation_policy: Some("Never".to_owned()),
            object_selector: None,
            match_conditions: None,
        }]),
    }
}

/// Where a CA bundle goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Publish {
    /// `--register-webhook`: create the configuration, or replace its `webhooks`.
    Register(Registration),
    /// The configuration of this name is installed by the chart or deploy/: set only the
    /// `caBundle` of each of its webhooks.
    CaBundle {
        /// Its name (`--webhook-config-name`).
        config_name: String,
    },
}

impl Publish {
    /// Writes `ca_pem` as the webhook's `caBundle`.
    pub async fn publish(&self, client: kube::Client, ca_pem: &[u8]) -> Result<()> {
        match self {
            Publish::Register(r) => {
                let mut r = r.clone();
                r.ca_bundle = ca_pem.to_vec();
                register(client, &r).await
            }
            Publish::CaBundle { config_name } => patch_ca_bundle(client, config_name, ca_pem).await,
        }
    }
}

/// The RFC 6902 patch that sets `caBundle` of every webhook of `current` to `ca_pem`. Each
/// webhook's name is tested first, so a configuration changed meanwhile (a webhook added or
/// reordered) fails the patch instead of writing into the wrong entry. Nothing else changes.
pub fn ca_bundle_patch(current: &MutatingWebhookConfiguration, ca_pem: &[u8]) -> serde_json::Value {
    use base64::Engine as _;
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let ops: Vec<serde_json::Value> = current
        .webhooks
        .iter()
        .flatten()
        .enumerate()
        .flat_map(|(i, hook)| {
            [
                serde_json::json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": hook.name}),
                serde_json::json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": bundle}),
            ]
        })
        .collect();
    serde_json::Value::Array(ops)
}

/// Sets `caBundle` of every webhook of the configuration `name` (which must exist: the chart or
/// deploy/ installs it) to `ca_pem`, unless it already is; retries on a concurrent change.
pub async fn patch_ca_bundle(client: kube::Client, name: &str, ca_pem: &[u8]) -> Result<()> {
    let api: Api<MutatingWebhookConfiguration> = Api::all(client);
    let context = || format!("MutatingWebhookConfiguration {name}");
    for _ in 0..3 {
        let Some(current) = api
            .get_opt(name)
            .await
            .map_err(|e| Error::kube(context(), e))?
        else {
            return Err(Error::Config(format!(
                "{}: not found. The chart and deploy/ install it and the webhook fills in its \
                 caBundle; without them, run with --register-webhook",
                context()
            )));
        };
        let hooks = current.webhooks.as_deref().unwrap_or_default();
        if hooks.is_empty() {
            return Err(Error::Config(format!("{}: has no webhooks", context())));
        }
        if hooks
            .iter()
            .all(|h| h.client_config.ca_bundle.as_ref().map(|b| b.0.as_slice()) == Some(ca_pem))
        {
            return Ok(());
        }
        let patch: json_patch::Patch = serde_json::from_value(ca_bundle_patch(&current, ca_pem))
            .map_err(|e| Error::Config(format!("{}: caBundle patch: {e}", context())))?;
        match api
            .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await
        {
            Ok(_) => {
                tracing::info!(name, webhooks = hooks.len(), "webhook caBundle set");
                return Ok(());
            }
            // A failed `test` (the list changed since the read): read again.
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 422 => {}
            Err(e) => return Err(Error::kube(context(), e)),
        }
    }
    Err(Error::Config(format!(
        "{}: kept changing while its caBundle was patched",
        context()
    )))
}

/// Creates the configuration or replaces its `webhooks` (retrying once on a conflict).
pub async fn register(client: kube::Client, r: &Registration) -> Result<()> {
    let api: Api<MutatingWebhookConfiguration> = Api::all(client);
    let desired = configuration(r);
    let context = || format!("MutatingWebhookConfiguration {}", r.config_name);
    for _ in 0..3 {
        let result = match api
            .get_opt(&r.config_name)
            .await
            .map_err(|e| Error::kube(context(), e))?
        {
            None => api
                .create(&PostParams::default(), &desired)
                .await
                .map(|_| ()),
            Some(mut current) => {
                current.webhooks.clone_from(&desired.webhooks);
                api.replace(&r.config_name, &PostParams::default(), &current)
                    .await
                    .map(|_| ())
            }
        };
        match result {
            Ok(()) => {
                tracing::info!(name = %r.config_name, "webhook registered");
                return Ok(());
            }
            // Another replica registered at the same moment: read again and retry.
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(Error::kube(context(), e)),
        }
    }
    Err(Error::Config(format!(
        "{}: kept conflicting with other writers",
        context()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_has_upstream_safety_settings() {
        let r = Registration {
            config_name: "plimsoll-vpa-admission".to_owned(),
            endpoint: Endpoint::Service {
                namespace: "plimsoll-system".to_owned(),
                name: "plimsoll-vpa-admission".to_owned(),
                port: 443,
            },
            ca_bundle: b"PEM".to_vec(),
            timeout_seconds: 30,
            scope: NamespaceScope::from_flags(None, None, Some("plimsoll-system")),
        };
        let v = serde_json::to_value(configuration(&r)).unwrap();
        let hook = &v["webhooks"][0];
        assert_eq!(hook["failurePolicy"], "Ignore");
        assert_eq!(hook["sideEffects"], "None");
        assert_eq!(hook["timeoutSeconds"], 30);
        assert_eq!(hook["admissionReviewVersions"], serde_json::json!(["v1"]));
        assert_eq!(hook["clientConfig"]["caBundle"], "UEVN");
        assert_eq!(hook["clientConfig"]["service"]["path"], "/");
        assert_eq!(
            hook["namespaceSelector"]["matchExpressions"][0]["values"],
            serde_json::json!(["kube-system", "plimsoll-system"])
        );
        assert_eq!(hook["rules"][0]["resources"], serde_json::json!(["pods"]));
        assert_eq!(
            hook["rules"][0]["operations"],
            serde_json::json!(["CREATE"])
        );
        assert_eq!(
            hook["rules"][1]["operations"],
            serde_json::json!(["CREATE", "UPDATE"])
        );
    }

    #[test]
    fn the_ca_bundle_patch_sets_only_ca_bundles_of_the_named_webhooks() {
        let r = Registration {
            config_name: "plimsoll-vpa-admission".to_owned(),
            endpoint: Endpoint::Url("https://10.0.0.1:8000/".to_owned()),
            ca_bundle: Vec::new(),
            timeout_seconds: 5,
            scope: NamespaceScope::from_flags(None, None, Some("plimsoll-system")),
        };
        let mut current = configuration(&r);
        // What the chart installs: no caBundle.
        for hook in current.webhooks.iter_mut().flatten() {
            hook.client_config.ca_bundle = None;
        }
        let mut second = current.webhooks.as_ref().unwrap()[0].clone();
        second.name = "second.plimsoll.dev".to_owned();
        current.webhooks.as_mut().unwrap().push(second);
        let patch = ca_bundle_patch(&current, b"PEM");
        let before = serde_json::to_value(&current).unwrap();
        let patch: json_patch::Patch = serde_json::from_value(patch).unwrap();
        let mut after = before.clone();
        json_patch::patch(&mut after, &patch).unwrap();
        for i in 0..2 {
            assert_eq!(after["webhooks"][i]["clientConfig"]["caBundle"], "UEVN");
            after["webhooks"][i]["clientConfig"]
                .as_object_mut()
                .unwrap()
                .remove("caBundle");
        }
        assert_eq!(after, before, "nothing but caBundle changes");
        // Reordered webhooks fail the name test instead of being written crosswise.
        let mut reordered = before;
        reordered["webhooks"].as_array_mut().unwrap().reverse();
        assert!(json_patch::patch(&mut reordered, &patch).is_err());
    }

    #[test]
    fn url_endpoint_and_kube_system_not_listed_twice() {
        let r = Registration {
            config_name: "x".to_owned(),
            endpoint: Endpoint::Url("https://10.0.0.1:8000/".to_owned()),
            ca_bundle: Vec::new(),
            timeout_seconds: 10,
            scope: NamespaceScope::from_flags(None, None, Some("kube-system")),
        };
        let v = serde_json::to_value(configuration(&r)).unwrap();
        assert_eq!(
            v["webhooks"][0]["clientConfig"]["url"],
            "https://10.0.0.1:8000/"
        );
        assert!(v["webhooks"][0]["clientConfig"].get("service").is_none());
        assert_eq!(
            v["webhooks"][0]["namespaceSelector"]["matchExpressions"][0]["values"],
            serde_json::json!(["kube-system"])
        );
    }
}
