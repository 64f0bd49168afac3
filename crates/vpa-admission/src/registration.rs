//! `--register-webhook`: creates or updates the MutatingWebhookConfiguration that sends pod
//! CREATEs and VPA CREATE/UPDATEs here.
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
use kube::api::PostParams;
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
