//! The Helm chart, rendered without Helm (see `helm/mod.rs` and docs/install.md, "How the chart
//! is tested"), with the default values and with every optional feature on: every object is
//! exactly its k8s-openapi type (or, for the Prometheus Operator's and cert-manager's kinds, the
//! fields checked here and no others), every pod is hardened, the webhook is registered as the
//! code registers it, and values.schema.json accepts the values and refuses typos.

// A test binary: a failed check panics with the reason, including in its helper functions.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use crate::{hardening, helm, service_args};

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, PodSpec, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The release namespace: not the deploy/ one, so a hard-coded namespace shows.
const NAMESPACE: &str = "autoscaling";

const SERVICES: [&str; 5] = [
    "hpa-plus",
    "cron-hpa",
    "vpa-recommender",
    "vpa-updater",
    "vpa-admission",
];

fn chart_dir() -> PathBuf {
    xtask::repo_root().join("charts/plimsoll")
}

/// Every optional feature on.
fn all_on() -> Value {
    json!({
        "global": {"priorityClassName": "plimsoll-high", "nodeSelector": {"kubernetes.io/os": "linux"},
                   "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "platform", "effect": "NoSchedule"}],
                   "podAnnotations": {"example.com/team": "platform"}},
        "hpaPlus": {"minReplicasTuningExclude": "plimsoll.dev/keep-min-replicas=true,tier in (quorum)",
                    "nativeHpa": true},
        "vpa": {"ignoredNamespaces": ["legacy"]},
        "vpaRecommender": {"enabled": true},
        "vpaUpdater": {"enabled": true},
        "prometheus": {"address": "https://prometheus.monitoring:9090", "timeout": "45s",
                       "allowedServers": ["http://prometheus.team-a.svc:9090", "https://thanos:10902/team-b"],
                       "maxResponseBytes": 8_388_608,
                       "ca": {"configMap": "prometheus-ca"},
                       "bearerToken": {"secretName": "prometheus-reader", "secretNamespace": "monitoring"}},
        "vpaAdmission": {"enabled": true, "priorityClassName": "plimsoll-webhook",
                         "certManager": {"enabled": true}},
        "networkPolicy": {"enabled": true, "apiServer": {"cidrs": ["10.0.0.1/32"]},
                          "extraEgress": [{"to": [{"ipBlock": {"cidr": "10.1.0.0/16"}}], "ports": [{"port": 9090, "protocol": "TCP"}]}]},
        "serviceMonitor": {"enabled": true, "interval": "15s", "labels": {"release": "prometheus"}},
        "grafana": {"dashboards": {"enabled": true}},
        "prometheusRule": {"enabled": true, "labels": {"release": "prometheus"}},
    })
}

// The custom resources of other projects the chart may render: the fields it writes, and no
// field beyond them (deny_unknown_fields), so a typo fails here as it would at apply time.

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Custom<S> {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    spec: S,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ServiceMonitorSpec {
    selector: LabelSelector,
    namespace_selector: NamespaceSelector,
    endpoints: Vec<MonitorEndpoint>,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NamespaceSelector {
    match_names: Vec<String>,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MonitorEndpoint {
    port: String,
    path: String,
    interval: String,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CertificateSpec {
    secret_name: String,
    #[serde(rename = "isCA", skip_serializing_if = "Option::is_none")]
    is_ca: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    common_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dns_names: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    renew_before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    private_key: Option<PrivateKey>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usages: Option<Vec<String>>,
    issuer_ref: IssuerRef,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PrivateKey {
    algorithm: String,
    size: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    rotation_policy: Option<String>,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IssuerRef {
    name: String,
    kind: String,
    group: String,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IssuerSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    self_signed: Option<Empty>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ca: Option<CaIssuer>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CaIssuer {
    secret_name: String,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PrometheusRuleSpec {
    groups: Vec<RuleGroup>,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RuleGroup {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    interval: Option<String>,
    rules: Vec<Rule>,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Rule {
    #[serde(skip_serializing_if = "Option::is_none")]
    alert: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    record: Option<String>,
    expr: Value,
    #[serde(rename = "for", skip_serializing_if = "Option::is_none")]
    for_: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    keep_firing_for: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    labels: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<BTreeMap<String, String>>,
}

/// Everything one render produced, typed.
#[derive(Default)]
struct Objects {
    service_accounts: Vec<ServiceAccount>,
    deployments: Vec<Deployment>,
    services: Vec<Service>,
    pdbs: Vec<PodDisruptionBudget>,
    roles: Vec<Role>,
    role_bindings: Vec<RoleBinding>,
    cluster_roles: Vec<ClusterRole>,
    cluster_role_bindings: Vec<ClusterRoleBinding>,
    webhooks: Vec<MutatingWebhookConfiguration>,
    secrets: Vec<Secret>,
    crds: Vec<CustomResourceDefinition>,
    network_policies: Vec<NetworkPolicy>,
    config_maps: Vec<ConfigMap>,
    service_monitors: Vec<Custom<ServiceMonitorSpec>>,
    certificates: Vec<Custom<CertificateSpec>>,
    issuers: Vec<Custom<IssuerSpec>>,
    prometheus_rules: Vec<Custom<PrometheusRuleSpec>>,
    /// NOTES.txt as rendered.
    notes: String,
}

fn typed<T: serde::de::DeserializeOwned + Serialize>(doc: &Value, origin: &str) -> T {
    xtask::manifest::typed(doc).unwrap_or_else(|e| panic!("{origin}: {e}"))
}

fn render(overrides: &Value) -> Objects {
    let chart = helm::Chart::load(&chart_dir());
    let rendered = chart
        .render(overrides, NAMESPACE)
        .unwrap_or_else(|e| panic!("render: {e}"));
    let mut o = Objects::default();
    for file in rendered {
        if file.file == "NOTES.txt" {
            o.notes = file.text;
            continue;
        }
        let docs = xtask::manifest::documents(&file.text).unwrap_or_else(|e| {
            panic!("templates/{}: invalid YAML: {e}\n{}", file.file, file.text)
        });
        for (i, doc) in docs.iter().enumerate() {
            let origin = format!("templates/{} document {}", file.file, i + 1);
            match doc["kind"].as_str().unwrap_or_default() {
                "ServiceAccount" => o.service_accounts.push(typed(doc, &origin)),
                "Deployment" => o.deployments.push(typed(doc, &origin)),
                "Service" => o.services.push(typed(doc, &origin)),
                "PodDisruptionBudget" => o.pdbs.push(typed(doc, &origin)),
                "Role" => o.roles.push(typed(doc, &origin)),
                "RoleBinding" => o.role_bindings.push(typed(doc, &origin)),
                "ClusterRole" => o.cluster_roles.push(typed(doc, &origin)),
                "ClusterRoleBinding" => o.cluster_role_bindings.push(typed(doc, &origin)),
                "MutatingWebhookConfiguration" => o.webhooks.push(typed(doc, &origin)),
                "Secret" => o.secrets.push(typed(doc, &origin)),
                "CustomResourceDefinition" => o.crds.push(typed(doc, &origin)),
                "NetworkPolicy" => o.network_policies.push(typed(doc, &origin)),
                "ConfigMap" => o.config_maps.push(typed(doc, &origin)),
                "ServiceMonitor" => o.service_monitors.push(typed(doc, &origin)),
                "Certificate" => o.certificates.push(typed(doc, &origin)),
                "Issuer" => o.issuers.push(typed(doc, &origin)),
                "PrometheusRule" => o.prometheus_rules.push(typed(doc, &origin)),
                other => panic!("{origin}: unexpected kind {other:?}"),
            }
        }
    }
    o
}

fn named<'a, T>(items: &'a [T], name: &str, meta: impl Fn(&T) -> &ObjectMeta) -> &'a T {
    items
        .iter()
        .find(|i| meta(i).name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no {name}"))
}

fn deployment<'a>(o: &'a Objects, svc: &str) -> &'a Deployment {
    named(&o.deployments, &format!("plimsoll-{svc}"), |d| &d.metadata)
}

fn pod(d: &Deployment) -> &PodSpec {
    d.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod spec")
}

fn pod_labels(d: &Deployment) -> BTreeMap<String, String> {
    d.spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default()
}

fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let wanted = selector.match_labels.clone().unwrap_or_default();
    !wanted.is_empty() && wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn args_of(d: &Deployment) -> Vec<String> {
    pod(d).containers[0].args.clone().unwrap_or_default()
}

fn template_exists(file: &str) -> bool {
    chart_dir().join("templates").join(file).is_file()
}

#[test]
fn default_values_render_the_two_horizontal_controllers_and_nothing_optional() {
    let o = render(&json!({}));
    let names: Vec<_> = o
        .deployments
        .iter()
        .filter_map(|d| d.metadata.name.clone())
        .collect();
    assert_eq!(names, ["plimsoll-hpa-plus", "plimsoll-cron-hpa"]);
    for d in &o.deployments {
        assert_eq!(d.metadata.namespace.as_deref(), Some(NAMESPACE));
        assert_eq!(
            pod(d).priority_class_name,
            None,
            "no priority class by default"
        );
    }
    assert_eq!(o.pdbs.len(), 2);
    // hpa-plus', cron-hpa's, and plimsoll-edit/-view for namespace users.
    assert_eq!(o.cluster_roles.len(), 4);
    assert!(o.network_policies.is_empty());
    assert!(o.service_monitors.is_empty());
    assert!(o.certificates.is_empty() && o.issuers.is_empty());
    assert!(o.config_maps.is_empty() && o.prometheus_rules.is_empty());
    assert!(o.webhooks.is_empty(), "the webhook is off by default");
    assert!(o.secrets.is_empty());
    let crds: Vec<_> = o.crds.iter().map(|c| c.spec.group.as_str()).collect();
    assert_eq!(
        crds,
        ["autoscaling.plimsoll.dev", "autoscaling.plimsoll.dev"],
        "HPA+ and CronHPA; no VPA CRD without a VPA service"
    );
    assert!(o.notes.contains("hpa-plus") && !o.notes.contains("vpa-updater"));
}

#[test]
fn every_optional_feature_renders_typed_objects() {
    let o = render(&all_on());
    for svc in SERVICES {
        let name = format!("plimsoll-{svc}");
        let d = deployment(&o, svc);
        named(&o.service_accounts, &name, |s| &s.metadata);
        named(&o.cluster_roles, &name, |r| &r.metadata);
        named(&o.cluster_role_bindings, &name, |r| &r.metadata);
        let np = named(&o.network_policies, &name, |n| &n.metadata);
        assert!(
            selects(
                np.spec
                    .as_ref()
                    .and_then(|s| s.pod_selector.as_ref())
                    .expect("podSelector"),
                &pod_labels(d)
            ),
            "{name}: the NetworkPolicy selects the pods"
        );
        assert!(o.notes.contains(svc), "NOTES.txt lists {svc}");
    }
    assert_eq!(o.service_monitors.len(), 1);
    assert_eq!(
        o.webhooks.len(),
        1,
        "cert-manager mode: the chart registers"
    );
    assert_eq!(o.certificates.len(), 2, "a CA and the serving certificate");
    assert_eq!(o.issuers.len(), 2, "self-signed and CA");
    // The dashboards and alerts templates come with their own slice of the chart: when present,
    // switching them on must render them.
    if template_exists("dashboards.yaml") {
        assert!(!o.config_maps.is_empty(), "grafana.dashboards.enabled");
    }
    if template_exists("prometheusrule.yaml") {
        assert!(!o.prometheus_rules.is_empty(), "prometheusRule.enabled");
    }
}

#[test]
fn every_pod_is_hardened_with_requests_and_limits() {
    for overrides in [json!({}), all_on()] {
        let o = render(&overrides);
        assert!(!o.deployments.is_empty());
        o.deployments.iter().for_each(hardening::assert_hardened);
    }
    // And the check can fail: a container that may escalate is refused.
    let mut d = deployment(&render(&json!({})), "hpa-plus").clone();
    let spec = d.spec.as_mut().and_then(|s| s.template.spec.as_mut());
    let c = &mut spec.expect("pod").containers[0];
    c.security_context
        .as_mut()
        .expect("sc")
        .allow_privilege_escalation = Some(true);
    assert!(std::panic::catch_unwind(|| hardening::assert_hardened(&d)).is_err());
}

#[test]
fn priority_class_comes_from_the_service_or_global() {
    let o = render(&all_on());
    let class = |svc| pod(deployment(&o, svc)).priority_class_name.clone();
    assert_eq!(class("hpa-plus").as_deref(), Some("plimsoll-high"));
    assert_eq!(class("vpa-admission").as_deref(), Some("plimsoll-webhook"));
    let scheduling = pod(deployment(&o, "vpa-updater"));
    assert!(scheduling.node_selector.is_some() && scheduling.tolerations.is_some());
}

#[test]
fn every_service_has_a_disruption_budget_and_spreads_over_nodes_and_zones() {
    // Topology spread for the webhook even where it is switched off for the others.
    let o =
        render(&json!({"global": {"topologySpread": false}, "vpaAdmission": {"enabled": true}}));
    let d = deployment(&o, "vpa-admission");
    hardening::assert_highly_available(
        d,
        named(&o.pdbs, "plimsoll-vpa-admission", |p| &p.metadata),
    );
    assert!(
        pod(deployment(&o, "hpa-plus"))
            .topology_spread_constraints
            .is_none(),
        "global.topologySpread=false switches the others off"
    );
    // By default every service spreads.
    let o = render(&json!({"vpaRecommender": {"enabled": true}, "vpaUpdater": {"enabled": true}}));
    for svc in ["hpa-plus", "cron-hpa", "vpa-recommender", "vpa-updater"] {
        let pdb = named(&o.pdbs, &format!("plimsoll-{svc}"), |p| &p.metadata);
        hardening::assert_highly_available(deployment(&o, svc), pdb);
    }
}

/// What `--register-webhook` writes for these args in `namespace`, as
/// crates/vpa-admission/src/lib.rs builds it, without its caBundle and metadata.
fn registered_by_code(args: &[String], namespace: &str) -> Value {
    use clap::Parser;
    use plimsoll_vpa_admission::registration::{Endpoint, Registration, configuration};
    let a = plimsoll_vpa_admission::cli::Args::try_parse_from(
        std::iter::once("vpa-admission".to_owned()).chain(args.iter().cloned()),
    )
    .expect("vpa-admission args");
    let (config_name, name, port, timeout_seconds) = (
        a.webhook_config_name.clone(),
        a.webhook_service_name.clone(),
        a.webhook_service_port,
        a.webhook_timeout_seconds,
    );
    let scope = a.into_config().scope(namespace);
    let config = configuration(&Registration {
        config_name,
        endpoint: Endpoint::Service {
            namespace: namespace.to_owned(),
            name,
            port,
        },
        ca_bundle: Vec::new(),
        timeout_seconds,
        scope,
    });
    comparable_webhooks(&config)
}

fn comparable_webhooks(config: &MutatingWebhookConfiguration) -> Value {
    let mut v = serde_json::to_value(&config.webhooks).expect("webhooks");
    for hook in v.as_array_mut().expect("list") {
        hook["clientConfig"]
            .as_object_mut()
            .expect("clientConfig")
            .remove("caBundle");
    }
    v
}

fn assert_safe(config: &MutatingWebhookConfiguration, namespace: &str) {
    for w in config.webhooks.iter().flatten() {
        assert_eq!(w.failure_policy.as_deref(), Some("Ignore"));
        assert_eq!(w.side_effects, "None");
        let timeout = w.timeout_seconds.expect("timeoutSeconds");
        assert!(timeout <= 10, "a short timeout, not {timeout}");
        let excluded: Vec<String> = w
            .namespace_selector
            .iter()
            .flat_map(|s| s.match_expressions.iter().flatten())
            .filter(|e| e.key == "kubernetes.io/metadata.name" && e.operator == "NotIn")
            .flat_map(|e| e.values.clone().unwrap_or_default())
            .collect();
        assert!(excluded.contains(&"kube-system".to_owned()));
        assert!(excluded.contains(&namespace.to_owned()), "{excluded:?}");
    }
}

#[test]
fn webhook_registration_is_the_same_object_everywhere() {
    // Self-signed (the default): the chart ships the configuration (without caBundle, which the
    // webhook patches in) and an empty Secret; the webhook never registers itself.
    let o = render(&json!({"vpaAdmission": {"enabled": true}}));
    let chart_hook = named(&o.webhooks, "plimsoll-vpa-admission", |w| &w.metadata);
    assert_safe(chart_hook, NAMESPACE);
    let self_signed_args = args_of(deployment(&o, "vpa-admission"));
    assert!(self_signed_args.contains(&"--self-signed".to_owned()));
    assert!(!self_signed_args.contains(&"--register-webhook".to_owned()));
    let by_code = registered_by_code(&self_signed_args, NAMESPACE);
    assert_eq!(comparable_webhooks(chart_hook), by_code);
    assert_eq!(by_code[0]["timeoutSeconds"], 5, "values' timeoutSeconds");
    assert_eq!(
        by_code[0]["namespaceSelector"]["matchExpressions"][0]["values"],
        json!(["kube-system", NAMESPACE])
    );
    for hook in chart_hook.webhooks.iter().flatten() {
        // A caBundle here would overwrite the webhook's at every upgrade.
        assert_eq!(
            hook.client_config.ca_bundle, None,
            "no caBundle in the chart"
        );
    }
    assert_eq!(chart_hook.metadata.annotations, None, "no CA injector");
    let config = {
        use clap::Parser;
        plimsoll_vpa_admission::cli::Args::try_parse_from(
            std::iter::once("vpa-admission".to_owned()).chain(self_signed_args.iter().cloned()),
        )
        .expect("args")
        .into_config()
    };
    assert_eq!(
        config.ca_bundle_config.as_deref(),
        chart_hook.metadata.name.as_deref(),
        "the webhook patches the chart's configuration"
    );
    // The Secret the webhook fills in: the name it uses, and no data (nor a type that requires
    // data, nor one the webhook's update could not keep).
    let secret = named(&o.secrets, "plimsoll-vpa-admission-tls", |s| &s.metadata);
    assert!(
        matches!(&config.tls, plimsoll_vpa_admission::TlsSource::SelfSigned { secret: name, .. }
            if Some(name) == secret.metadata.name.as_ref())
    );
    assert_eq!(secret.metadata.namespace.as_deref(), Some(NAMESPACE));
    assert!(
        secret.data.is_none() && secret.string_data.is_none(),
        "no data in the chart"
    );
    assert_eq!(secret.type_, None, "Opaque");
    assert_eq!(o.secrets.len(), 1);
    let template = std::fs::read_to_string(chart_dir().join("templates/webhook.yaml"))
        .expect("webhook template");
    assert!(
        template.contains("three-way merge"),
        "the template says why caBundle and data stay out of it"
    );

    // cert-manager: the same object, with the CA injector's annotation, and no Secret of the
    // chart's (cert-manager creates it).
    let o = render(&all_on());
    let chart_hook = &o.webhooks[0];
    assert_safe(chart_hook, NAMESPACE);
    assert!(o.secrets.is_empty(), "cert-manager writes the Secret");
    let cert_manager_args = args_of(deployment(&o, "vpa-admission"));
    assert_eq!(
        comparable_webhooks(chart_hook),
        registered_by_code(&cert_manager_args, NAMESPACE)
    );
    assert_eq!(
        chart_hook.webhooks.as_ref().expect("webhooks")[0]
            .namespace_selector
            .as_ref()
            .and_then(|s| s.match_expressions.as_ref())
            .and_then(|e| e[0].values.clone()),
        Some(vec![
            "kube-system".to_owned(),
            NAMESPACE.to_owned(),
            "legacy".to_owned()
        ])
    );
    let annotations = chart_hook.metadata.annotations.clone().unwrap_or_default();
    let certificate = named(&o.certificates, "plimsoll-vpa-admission", |c| &c.metadata);
    assert_eq!(
        annotations.get("cert-manager.io/inject-ca-from"),
        Some(&format!("{NAMESPACE}/{}", "plimsoll-vpa-admission")),
        "the CA injector reads the serving Certificate {:?}",
        certificate.metadata.name
    );

    // deploy/: the same object in plimsoll-system.
    let text =
        std::fs::read_to_string(xtask::repo_root().join("deploy/vpa-admission/webhook.yaml"))
            .expect("deploy webhook");
    let deploy_hook: MutatingWebhookConfiguration = xtask::manifest::documents(&text)
        .expect("yaml")
        .iter()
        .find(|d| d["kind"] == "MutatingWebhookConfiguration")
        .map(|d| typed(d, "deploy/vpa-admission/webhook.yaml"))
        .expect("deploy webhook configuration");
    assert_safe(&deploy_hook, "plimsoll-system");
    assert_eq!(
        comparable_webhooks(&deploy_hook),
        registered_by_code(&deploy_args("vpa-admission"), "plimsoll-system")
    );
}

#[test]
fn cert_manager_mode_serves_the_certificate_it_issues() {
    let o = render(&all_on());
    let d = deployment(&o, "vpa-admission");
    let args = args_of(d);
    service_args::parse("vpa-admission", &args).expect("args parse");
    assert!(
        !args
            .iter()
            .any(|a| a == "--self-signed" || a == "--register-webhook")
    );
    let serving = named(&o.certificates, "plimsoll-vpa-admission", |c| &c.metadata);
    let secret = &serving.spec.secret_name;
    let pod = pod(d);
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.secret.as_ref().and_then(|s| s.secret_name.as_ref()) == Some(secret))
        .expect("the Certificate's Secret is mounted");
    let mount = pod.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == volume.name)
        .expect("volume mounted");
    assert_eq!(mount.read_only, Some(true));
    for (flag, file) in [
        ("--tls-cert-file", "tls.crt"),
        ("--tls-key-file", "tls.key"),
    ] {
        assert!(
            args.contains(&format!("{flag}={}/{file}", mount.mount_path)),
            "{flag} in {args:?}"
        );
    }
    let dns = serving.spec.dns_names.clone().unwrap_or_default();
    assert!(dns.contains(&format!("plimsoll-vpa-admission.{NAMESPACE}.svc")));
    // Its issuer is rendered too, and that one's CA comes from a self-signed issuer.
    let issuer = named(&o.issuers, &serving.spec.issuer_ref.name, |i| &i.metadata);
    let ca_secret = &issuer.spec.ca.as_ref().expect("CA issuer").secret_name;
    let ca = named(&o.certificates, "plimsoll-vpa-admission-ca", |c| {
        &c.metadata
    });
    assert_eq!(&ca.spec.secret_name, ca_secret);
    assert_eq!(ca.spec.is_ca, Some(true));
    named(&o.issuers, &ca.spec.issuer_ref.name, |i| &i.metadata)
        .spec
        .self_signed
        .as_ref()
        .expect("self-signed root");
    // No Secret write access is needed in this mode.
    let role = named(&o.roles, "plimsoll-vpa-admission-leader-election", |r| {
        &r.metadata
    });
    assert!(
        role.rules
            .iter()
            .flatten()
            .all(|r| !r.resources.iter().flatten().any(|x| x == "secrets"))
    );

    // An issuer of the operator's: no chart issuers, the reference passed through.
    let mut values = all_on();
    values["vpaAdmission"]["certManager"]["issuerRef"] =
        json!({"name": "corporate-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"});
    let o = render(&values);
    assert!(o.issuers.is_empty());
    assert_eq!(o.certificates.len(), 1);
    assert_eq!(o.certificates[0].spec.issuer_ref.name, "corporate-ca");
    assert_eq!(o.certificates[0].spec.issuer_ref.kind, "ClusterIssuer");
}

#[test]
fn network_policies_allow_only_what_each_service_needs() {
    let o = render(&all_on());
    for np in &o.network_policies {
        let name = np.metadata.name.clone().unwrap_or_default();
        let spec = np.spec.as_ref().expect("spec");
        assert_eq!(
            spec.policy_types.clone().unwrap_or_default(),
            ["Ingress", "Egress"],
            "{name}: default deny both ways"
        );
        let ingress_ports: Vec<IntOrString> = spec
            .ingress
            .iter()
            .flatten()
            .flat_map(|r| r.ports.iter().flatten().filter_map(|p| p.port.clone()))
            .collect();
        let mut want = vec![IntOrString::String("metrics".to_owned())];
        if name == "plimsoll-vpa-admission" {
            want.push(IntOrString::String("webhook".to_owned()));
        }
        assert_eq!(ingress_ports, want, "{name}");
        let egress_ports: Vec<IntOrString> = spec
            .egress
            .iter()
            .flatten()
            .flat_map(|r| r.ports.iter().flatten().filter_map(|p| p.port.clone()))
            .collect();
        for port in [53, 443, 6443, 9090] {
            assert!(
                egress_ports.contains(&IntOrString::Int(port)),
                "{name}: egress to {port}"
            );
        }
        // Named ports must exist on the pods they select.
        let svc = name.trim_start_matches("plimsoll-");
        let container_ports: Vec<String> = pod(deployment(&o, svc)).containers[0]
            .ports
            .iter()
            .flatten()
            .filter_map(|p| p.name.clone())
            .collect();
        for port in &ingress_ports {
            if let IntOrString::String(p) = port {
                assert!(container_ports.contains(p), "{name}: port {p}");
            }
        }
    }
    assert_eq!(o.network_policies.len(), SERVICES.len());
}

#[test]
fn service_monitor_scrapes_every_metrics_service() {
    let o = render(&all_on());
    let monitor = &o.service_monitors[0];
    assert_eq!(
        monitor
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("release")),
        Some(&"prometheus".to_owned())
    );
    assert_eq!(monitor.spec.endpoints[0].interval, "15s");
    let port = &monitor.spec.endpoints[0].port;
    for svc in SERVICES {
        let service = named(&o.services, &format!("plimsoll-{svc}-metrics"), |s| {
            &s.metadata
        });
        let labels = service.metadata.labels.clone().unwrap_or_default();
        assert!(selects(&monitor.spec.selector, &labels), "{svc}");
        let ports = service.spec.as_ref().and_then(|s| s.ports.clone());
        assert!(
            ports
                .iter()
                .flatten()
                .any(|p| p.name.as_ref() == Some(port)),
            "{svc}: a port named {port}"
        );
    }
}

#[test]
fn chart_args_parse_with_each_services_command_line() {
    for overrides in [
        json!({"vpaRecommender": {"enabled": true}, "vpaUpdater": {"enabled": true},
                             "vpaAdmission": {"enabled": true}}),
        all_on(),
    ] {
        let o = render(&overrides);
        for svc in SERVICES {
            let args = args_of(deployment(&o, svc));
            if let Err(e) = service_args::parse(svc, &args) {
                panic!("{svc}: {args:?} do not parse: {e}");
            }
        }
    }
}

#[test]
fn hpa_plus_replicas_turn_sharding_on() {
    let args = |values: Value| args_of(deployment(&render(&values), "hpa-plus"));
    let shards = |values: Value| flag(&args(values), "--shards").map(str::to_owned);
    assert_eq!(
        shards(json!({})).as_deref(),
        Some("8"),
        "two replicas by default"
    );
    assert_eq!(shards(json!({"hpaPlus": {"replicas": 1}})), None);
    assert_eq!(
        shards(json!({"hpaPlus": {"replicas": 3, "shards": 12}})).as_deref(),
        Some("12")
    );
    assert_eq!(
        shards(json!({"hpaPlus": {"replicas": 3, "shards": 1}})),
        None
    );
    assert_eq!(
        shards(json!({"hpaPlus": {"replicas": 1, "shards": 4}})).as_deref(),
        Some("4")
    );
}

#[test]
fn vpa_recommender_replicas_turn_sharding_on() {
    let shards = |recommender: Value| {
        let mut values = json!({"vpaRecommender": {"enabled": true}});
        if let (Some(into), Some(from)) = (
            values["vpaRecommender"].as_object_mut(),
            recommender.as_object(),
        ) {
            into.extend(from.clone());
        }
        let args = args_of(deployment(&render(&values), "vpa-recommender"));
        flag(&args, "--shards").map(str::to_owned)
    };
    assert_eq!(
        shards(json!({})).as_deref(),
        Some("8"),
        "two replicas by default"
    );
    assert_eq!(shards(json!({"replicas": 1})), None);
    assert_eq!(
        shards(json!({"replicas": 3, "shards": 12})).as_deref(),
        Some("12")
    );
    assert_eq!(shards(json!({"replicas": 3, "shards": 1})), None);
    assert_eq!(
        shards(json!({"replicas": 1, "shards": 4})).as_deref(),
        Some("4")
    );
    // hpa-plus's setting is its own.
    let args = args_of(deployment(
        &render(&json!({"vpaRecommender": {"enabled": true}, "hpaPlus": {"shards": 1}})),
        "vpa-recommender",
    ));
    assert_eq!(flag(&args, "--shards"), Some("8"));
}

/// The volume of `d`'s pod that its container mounts at `dir`, read-only.
fn volume_mounted_at<'a>(d: &'a Deployment, dir: &str) -> &'a k8s_openapi::api::core::v1::Volume {
    let pod = pod(d);
    let mount = pod.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == dir)
        .unwrap_or_else(|| panic!("nothing mounted at {dir}"));
    assert_eq!(mount.read_only, Some(true), "{dir} read-only");
    pod.volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .expect("the mounted volume")
}

/// The value of `--flag=` among `args`, if given.
fn flag<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .find_map(|a| a.strip_prefix(flag)?.strip_prefix('='))
}

#[test]
fn prometheus_values_give_both_readers_flags_mounts_and_one_secret() {
    // Everything on: a CA from a ConfigMap, a token read through the API from a Secret in
    // another namespace.
    let o = render(&all_on());
    for svc in ["hpa-plus", "vpa-recommender"] {
        let d = deployment(&o, svc);
        let args = args_of(d);
        assert_eq!(
            flag(&args, "--prometheus-address"),
            Some("https://prometheus.monitoring:9090"),
            "{svc}"
        );
        assert_eq!(flag(&args, "--prometheus-timeout"), Some("45s"), "{svc}");
        assert_eq!(
            flag(&args, "--prometheus-max-response-bytes"),
            Some("8388608"),
            "{svc}"
        );
        assert_eq!(
            flag(&args, "--prometheus-bearer-token-secret"),
            Some("monitoring/prometheus-reader:token"),
            "{svc}"
        );
        let ca = flag(&args, "--prometheus-ca-file").expect("--prometheus-ca-file");
        let (dir, file) = ca.rsplit_once('/').expect("a path");
        let volume = volume_mounted_at(d, dir);
        let config_map = volume.config_map.as_ref().expect("the CA's ConfigMap");
        assert_eq!(config_map.name, "prometheus-ca");
        let items = config_map.items.clone().unwrap_or_default();
        assert!(
            items.iter().any(|i| i.key == "ca.crt" && i.path == file),
            "{items:?}"
        );
    }
    for svc in ["cron-hpa", "vpa-updater", "vpa-admission"] {
        let args = args_of(deployment(&o, svc));
        assert!(
            !args.iter().any(|a| a.starts_with("--prometheus")),
            "{svc}: {args:?}"
        );
    }
    // The servers an autoscaler may name: hpa-plus's concern alone.
    let hpa_args = args_of(deployment(&o, "hpa-plus"));
    assert_eq!(
        flag(&hpa_args, "--prometheus-allowed-servers"),
        Some("http://prometheus.team-a.svc:9090,https://thanos:10902/team-b")
    );
    let recommender_args = args_of(deployment(&o, "vpa-recommender"));
    assert_eq!(
        flag(&recommender_args, "--prometheus-allowed-servers"),
        None
    );

    // The exclusion selector reaches hpa-plus and is a selector it accepts.
    assert_eq!(
        flag(&hpa_args, "--min-replicas-tuning-exclude"),
        Some("plimsoll.dev/keep-min-replicas=true,tier in (quorum)")
    );
    {
        use clap::Parser;
        plimsoll_hpa_plus::cli::Args::try_parse_from(
            std::iter::once("hpa-plus".to_owned()).chain(hpa_args.iter().cloned()),
        )
        .expect("hpa-plus args")
        .into_config()
        .expect("hpa-plus config from the chart's args");
    }
    // `get` on that one Secret, in its namespace, for the two readers and no one else.
    let role = named(&o.roles, "plimsoll-prometheus-credentials", |r| &r.metadata);
    assert_eq!(role.metadata.namespace.as_deref(), Some("monitoring"));
    let rules = role.rules.clone().unwrap_or_default();
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].resources.clone().unwrap_or_default(), ["secrets"]);
    assert_eq!(
        rules[0].resource_names.clone().unwrap_or_default(),
        ["prometheus-reader"]
    );
    assert_eq!(rules[0].verbs, ["get"]);
    let binding = named(&o.role_bindings, "plimsoll-prometheus-credentials", |b| {
        &b.metadata
    });
    assert_eq!(binding.metadata.namespace.as_deref(), Some("monitoring"));
    assert_eq!(binding.role_ref.name, "plimsoll-prometheus-credentials");
    let subjects: Vec<_> = binding
        .subjects
        .iter()
        .flatten()
        .map(|s| (s.name.as_str(), s.namespace.as_deref()))
        .collect();
    assert_eq!(
        subjects,
        [
            ("plimsoll-hpa-plus", Some(NAMESPACE)),
            ("plimsoll-vpa-recommender", Some(NAMESPACE))
        ]
    );
    for sa in ["plimsoll-hpa-plus", "plimsoll-vpa-recommender"] {
        named(&o.service_accounts, sa, |s| &s.metadata);
    }
}

#[test]
fn a_ca_from_a_secret_and_a_token_file_mount_read_only_with_no_secret_rbac() {
    let o = render(&json!({
        "prometheus": {"address": "https://prometheus.monitoring:9090",
                       "ca": {"secret": "prometheus-tls", "key": "root.pem"},
                       "bearerToken": {"secretName": "prometheus-reader", "key": "jwt", "via": "file"}},
    }));
    let d = deployment(&o, "hpa-plus");
    let args = args_of(d);
    service_args::parse("hpa-plus", &args).expect("args parse");
    assert_eq!(
        flag(&args, "--prometheus-timeout"),
        None,
        "the service's default"
    );
    assert_eq!(flag(&args, "--prometheus-bearer-token-secret"), None);
    for (name, secret, key) in [
        ("--prometheus-ca-file", "prometheus-tls", "root.pem"),
        ("--prometheus-bearer-token-file", "prometheus-reader", "jwt"),
    ] {
        let path = flag(&args, name).unwrap_or_else(|| panic!("{name} in {args:?}"));
        let (dir, file) = path.rsplit_once('/').expect("a path");
        let volume = volume_mounted_at(d, dir);
        let source = volume.secret.as_ref().expect("a Secret volume");
        assert_eq!(source.secret_name.as_deref(), Some(secret));
        let items = source.items.clone().unwrap_or_default();
        assert!(
            items.iter().any(|i| i.key == key && i.path == file),
            "{items:?}"
        );
    }
    hardening::assert_hardened(d);
    assert!(
        o.roles
            .iter()
            .all(|r| r.metadata.name.as_deref() != Some("plimsoll-prometheus-credentials"))
    );
    assert!(
        o.role_bindings
            .iter()
            .all(|b| b.role_ref.name != "plimsoll-prometheus-credentials")
    );
}

#[test]
fn the_namespace_parameter_reaches_hpa_plus_alone() {
    let o = render(&json!({
        "vpaRecommender": {"enabled": true},
        "prometheus": {"address": "http://prom-label-proxy.monitoring:8080",
                       "namespaceParameter": "namespace"},
    }));
    let args = args_of(deployment(&o, "hpa-plus"));
    service_args::parse("hpa-plus", &args).expect("args parse");
    assert_eq!(
        flag(&args, "--prometheus-namespace-parameter"),
        Some("namespace")
    );
    // The recommender's queries are the operator's own.
    let recommender = args_of(deployment(&o, "vpa-recommender"));
    assert_eq!(flag(&recommender, "--prometheus-namespace-parameter"), None);
    let unset = render(&json!({"prometheus": {"address": "http://prometheus:9090"}}));
    let args = args_of(deployment(&unset, "hpa-plus"));
    assert_eq!(flag(&args, "--prometheus-namespace-parameter"), None);
}

#[test]
fn allowed_servers_without_an_address_reach_hpa_plus_alone() {
    let o = render(&json!({
        "vpaRecommender": {"enabled": true},
        "prometheus": {"allowedServers": ["http://prometheus.team-a.svc:9090"]},
    }));
    let args = args_of(deployment(&o, "hpa-plus"));
    service_args::parse("hpa-plus", &args).expect("args parse");
    assert_eq!(
        flag(&args, "--prometheus-allowed-servers"),
        Some("http://prometheus.team-a.svc:9090")
    );
    assert_eq!(flag(&args, "--prometheus-address"), None);
    assert_eq!(
        flag(&args, "--prometheus-max-response-bytes"),
        None,
        "the service's default"
    );
    assert!(
        !args_of(deployment(&o, "vpa-recommender"))
            .iter()
            .any(|a| a.starts_with("--prometheus"))
    );
}

#[test]
fn prometheus_defaults_add_nothing_and_impossible_values_are_refused() {
    let o = render(&json!({}));
    let d = deployment(&o, "hpa-plus");
    assert!(
        !args_of(d)
            .iter()
            .any(|a| a.starts_with("--prometheus") || a.starts_with("--min-replicas"))
    );
    assert!(pod(d).volumes.is_none() && pod(d).containers[0].volume_mounts.is_none());
    assert!(
        o.roles
            .iter()
            .all(|r| r.metadata.name.as_deref() != Some("plimsoll-prometheus-credentials"))
    );

    // What the schema cannot say, the templates refuse with a message.
    for (values, what) in [
        (
            json!({"prometheus": {"bearerToken": {"secretName": "t"}}}),
            "need prometheus.address",
        ),
        (
            json!({"prometheus": {"address": "http://p", "bearerToken": {"secretName": "t",
                   "secretNamespace": "monitoring", "via": "file"}}}),
            "release namespace",
        ),
        (
            json!({"prometheus": {"address": "http://p", "ca": {"configMap": "a", "secret": "b"}}}),
            "not both",
        ),
    ] {
        let chart = helm::Chart::load(&chart_dir());
        let e = chart
            .render(&values, NAMESPACE)
            .err()
            .unwrap_or_else(|| panic!("{values} rendered"));
        assert!(e.contains(what), "{values}: {e}");
    }
}

#[test]
fn chart_cluster_roles_equal_deploy() {
    let o = render(&all_on());
    for svc in SERVICES {
        let path = xtask::repo_root().join(format!("deploy/{svc}/cluster-rbac.yaml"));
        let text = std::fs::read_to_string(&path).expect("deploy rbac");
        let deploy: ClusterRole = xtask::manifest::documents(&text)
            .expect("yaml")
            .iter()
            .find(|d| d["kind"] == "ClusterRole")
            .map(|d| typed(d, &path.display().to_string()))
            .expect("deploy ClusterRole");
        let chart = named(&o.cluster_roles, &format!("plimsoll-{svc}"), |r| {
            &r.metadata
        });
        assert_eq!(chart.rules, deploy.rules, "{svc}");
    }
}

fn schema_errors(values: &Value) -> Option<String> {
    let path = chart_dir().join("values.schema.json");
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("schema")).expect("json");
    assert_eq!(
        schema["$schema"], "http://json-schema.org/draft-07/schema#",
        "the draft Helm validates with"
    );
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler
        .add_resource("values.schema.json", schema)
        .expect("add schema");
    let index = compiler
        .compile("values.schema.json", &mut schemas)
        .unwrap_or_else(|e| panic!("values.schema.json does not compile: {e}"));
    schemas
        .validate(values, index)
        .err()
        .map(|e| format!("{e:#}"))
}

#[test]
fn values_validate_against_the_schema_and_typos_do_not() {
    let chart = helm::Chart::load(&chart_dir());
    for overrides in [json!({}), all_on()] {
        let values = chart.values(&overrides);
        if let Some(e) = schema_errors(&values) {
            panic!("{overrides}: {e}");
        }
    }
    let refused = [
        (json!({"hpaPlus": {"replica": 3}}), "replica"),
        (json!({"serviceMonitor": {"intervall": "1m"}}), "intervall"),
        (
            json!({"networkPolicies": {"enabled": true}}),
            "networkPolicies",
        ),
        (
            json!({"vpaAdmission": {"certManager": {"enable": true}}}),
            "enable",
        ),
        (
            json!({"grafana": {"dashboard": {"enabled": true}}}),
            "dashboard",
        ),
        (
            json!({"vpaAdmission": {"webhook": {"timeoutSeconds": 60}}}),
            "60",
        ),
        (
            json!({"cronHpa": {"resources": {"limits": null}}}),
            "limits",
        ),
        (
            json!({"global": {"logFormat": "yaml"}}),
            "/global/logFormat",
        ),
        (
            json!({"prometheus": {"adress": "http://prometheus:9090"}}),
            "adress",
        ),
        (
            json!({"prometheus": {"bearerToken": {"via": "mount"}}}),
            "/prometheus/bearerToken/via",
        ),
        (
            json!({"prometheus": {"address": "prometheus:9090"}}),
            "/prometheus/address",
        ),
        (
            json!({"prometheus": {"ca": {"configMap": "a", "secret": "b"}}}),
            "/prometheus/ca",
        ),
        (
            json!({"hpaPlus": {"minReplicasTuningExclude": ["a=b"]}}),
            "/hpaPlus/minReplicasTuningExclude",
        ),
        (
            json!({"prometheus": {"allowedServers": ["prom:9090"]}}),
            "/prometheus/allowedServers/0",
        ),
        (
            json!({"prometheus": {"allowedServers": "http://prom:9090"}}),
            "/prometheus/allowedServers",
        ),
    ];
    for (overrides, what) in refused {
        let values = chart.values(&overrides);
        let e = schema_errors(&values).unwrap_or_else(|| panic!("{overrides} was accepted"));
        assert!(e.contains(what), "{overrides}: the error names {what}: {e}");
    }
}

/// Fails on a key of `values` that `schema` (draft-07, `$ref`s into `definitions`) does not name.
fn walk(values: &Value, schema: &Value, root: &Value, path: &str) {
    let schema = match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.trim_start_matches("#/definitions/");
            &root["definitions"][name]
        }
        None => schema,
    };
    let Value::Object(map) = values else { return };
    let Some(properties) = schema.get("properties") else {
        return;
    };
    for (key, value) in map {
        let sub = properties
            .get(key)
            .unwrap_or_else(|| panic!("{path}.{key} is not in values.schema.json"));
        walk(value, sub, root, &format!("{path}.{key}"));
    }
}

#[test]
fn every_value_is_described_by_the_schema() {
    // Walk values.yaml: each key must be a property the schema names (the schema closes every
    // object where a typo could hide, so this is the same check from the other side).
    let chart = helm::Chart::load(&chart_dir());
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(chart_dir().join("values.schema.json")).expect("schema"),
    )
    .expect("json");
    walk(chart.default_values(), &schema, &schema, "");
}

#[test]
fn renderer_reads_chart_files_and_fails_on_required_values() {
    // The dashboards and alerts templates read their JSON and YAML with .Files; check the
    // renderer's support on a chart of its own.
    let dir = std::env::temp_dir().join(format!("plimsoll-chart-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::create_dir_all(dir.join("files")).unwrap();
    std::fs::write(
        dir.join("Chart.yaml"),
        "name: t\nversion: 0.1.0\nappVersion: \"1\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("values.yaml"),
        "name: x\nlabels: {grafana_dashboard: \"1\", flag: \"true\", empty: \"null\", text: \"a\\nb\"}\n",
    )
    .unwrap();
    std::fs::write(dir.join("files/a.json"), "{\"a\": 1}").unwrap();
    std::fs::write(dir.join("files/b.json"), "{\"b\": 2}").unwrap();
    std::fs::write(
        dir.join("templates/t.yaml"),
        "{{- $root := . -}}\n\
         a: {{ .Files.Get \"files/a.json\" | quote }}\n\
         b: {{ $root.Files.Get \"files/b.json\" | quote }}\n\
         all: [{{ range $path, $_ := $.Files.Glob \"files/*.json\" }}{{ base $path }},{{ end }}]\n\
         has: {{ .Capabilities.APIVersions.Has \"monitoring.coreos.com/v1\" }}\n\
         name: {{ required \"name is required\" .Values.name }}\n\
         labels: {{- toYaml .Values.labels | nindent 2 }}\n",
    )
    .unwrap();
    let chart = helm::Chart::load(&dir);
    let out = chart.render(&json!({}), "ns").unwrap();
    let doc = &xtask::manifest::documents(&out[0].text).unwrap()[0];
    assert_eq!(doc["a"], "{\"a\": 1}");
    assert_eq!(doc["b"], "{\"b\": 2}");
    assert_eq!(doc["all"], json!(["a.json", "b.json"]));
    assert_eq!(doc["has"], true);
    // toYaml keeps strings that look like other scalars strings, as the Grafana sidecar's label
    // value "1" must stay.
    assert_eq!(
        doc["labels"],
        json!({"grafana_dashboard": "1", "flag": "true", "empty": "null", "text": "a\nb"})
    );
    let e = chart
        .render(&json!({"name": ""}), "ns")
        .err()
        .expect("required refuses an empty value");
    assert!(e.contains("name is required"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The args of deploy/<svc>/deployment.yaml.
fn deploy_args(svc: &str) -> Vec<String> {
    let path = xtask::repo_root().join(format!("deploy/{svc}/deployment.yaml"));
    let text = std::fs::read_to_string(&path).expect("deploy deployment");
    let docs = xtask::manifest::documents(&text).expect("yaml");
    let d: Deployment = typed(&docs[0], &path.display().to_string());
    args_of(&d)
}

/// The RBAC objects of a deploy/ file, typed.
fn deploy_rbac(file: &str) -> (Vec<ClusterRole>, Vec<Role>) {
    let path = xtask::repo_root().join("deploy").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let (mut cluster_roles, mut roles) = (Vec::new(), Vec::new());
    for doc in xtask::manifest::documents(&text).expect("yaml") {
        match doc["kind"].as_str().unwrap_or_default() {
            "ClusterRole" => cluster_roles.push(typed(&doc, file)),
            "Role" => roles.push(typed(&doc, file)),
            _ => {}
        }
    }
    (cluster_roles, roles)
}

type PolicyRule = k8s_openapi::api::rbac::v1::PolicyRule;

/// (API group, resource) of Leases.
const LEASES: (&str, &str) = ("coordination.k8s.io", "leases");

/// Every rule of the ClusterRoles and Roles bound to `svc`'s ServiceAccount, with the role's name.
fn rules_bound_to(o: &Objects, svc: &str) -> Vec<(String, PolicyRule)> {
    let account = format!("plimsoll-{svc}");
    let bound = |subjects: &Option<Vec<k8s_openapi::api::rbac::v1::Subject>>| {
        subjects
            .iter()
            .flatten()
            .any(|s| s.kind == "ServiceAccount" && s.name == account)
    };
    let mut out = Vec::new();
    for b in o
        .cluster_role_bindings
        .iter()
        .filter(|b| bound(&b.subjects))
    {
        let role = named(&o.cluster_roles, &b.role_ref.name, |r| &r.metadata);
        out.extend(
            role.rules
                .iter()
                .flatten()
                .map(|r| (format!("ClusterRole/{}", b.role_ref.name), r.clone())),
        );
    }
    for b in o.role_bindings.iter().filter(|b| bound(&b.subjects)) {
        let role = o
            .roles
            .iter()
            .find(|r| {
                r.metadata.name.as_deref() == Some(b.role_ref.name.as_str())
                    && r.metadata.namespace == b.metadata.namespace
            })
            .unwrap_or_else(|| panic!("no Role {}", b.role_ref.name));
        out.extend(
            role.rules
                .iter()
                .flatten()
                .map(|r| (format!("Role/{}", b.role_ref.name), r.clone())),
        );
    }
    out
}

/// Whether `rule` reaches `resource` (a plural, or `plural/subresource`) of API `group`,
/// wildcards included.
fn on(rule: &PolicyRule, group: &str, resource: &str) -> bool {
    let group_ok = rule
        .api_groups
        .iter()
        .flatten()
        .any(|g| g == group || g == "*");
    group_ok
        && rule
            .resources
            .iter()
            .flatten()
            .any(|r| r == resource || r == "*")
}

fn names_of(rule: &PolicyRule) -> Vec<String> {
    rule.resource_names.clone().unwrap_or_default()
}

/// A rule on `resource` either names its objects or grants only what the API cannot limit by
/// name (`create`, and `list` where listed in `unnamed`).
fn assert_named(rules: &[(String, PolicyRule)], group: &str, resource: &str, unnamed: &[&str]) {
    for (role, rule) in rules.iter().filter(|(_, r)| on(r, group, resource)) {
        if names_of(rule).is_empty() {
            assert!(
                rule.verbs.iter().all(|v| unnamed.contains(&v.as_str())),
                "{role}: {resource} {:?} without resourceNames",
                rule.verbs
            );
        }
        assert!(
            !rule.verbs.iter().any(|v| v == "*" || v == "delete"),
            "{role}: {resource} {:?}",
            rule.verbs
        );
    }
}

#[test]
fn the_admission_account_writes_only_its_own_webhook_and_secret_and_only_when_self_signed() {
    // Self-signed (the chart's default mode): the configuration and the Secret the chart ships,
    // by the names the code uses with the chart's args; it may fill them in (patch caBundle,
    // update the Secret's data), never create or delete one.
    let o = render(&json!({"vpaAdmission": {"enabled": true}}));
    let rules = rules_bound_to(&o, "vpa-admission");
    let args = {
        use clap::Parser;
        plimsoll_vpa_admission::cli::Args::try_parse_from(
            std::iter::once("vpa-admission".to_owned())
                .chain(args_of(deployment(&o, "vpa-admission"))),
        )
        .expect("args")
    };
    for (group, resource, name, verbs) in [
        (
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            &args.webhook_config_name,
            ["get", "patch"],
        ),
        ("", "secrets", &args.self_signed_secret, ["get", "update"]),
    ] {
        assert_named(&rules, group, resource, &[]);
        let on_resource: Vec<_> = rules
            .iter()
            .filter(|(_, r)| on(r, group, resource))
            .collect();
        assert_eq!(on_resource.len(), 1, "{resource}: {on_resource:?}");
        assert_eq!(
            &names_of(&on_resource[0].1),
            std::slice::from_ref(name),
            "{resource}"
        );
        assert_eq!(on_resource[0].1.verbs, verbs, "{resource}");
    }
    // The objects those rules name are the chart's own.
    named(&o.webhooks, &args.webhook_config_name, |w| &w.metadata);
    named(&o.secrets, &args.self_signed_secret, |s| &s.metadata);

    // cert-manager: the chart owns the registration, cert-manager the Secret: no right on either.
    let o = render(&all_on());
    let rules = rules_bound_to(&o, "vpa-admission");
    assert!(!rules.is_empty());
    for (role, rule) in &rules {
        assert!(
            !on(
                rule,
                "admissionregistration.k8s.io",
                "mutatingwebhookconfigurations"
            ) && !on(rule, "", "secrets"),
            "{role}: {rule:?}"
        );
    }
}

#[test]
fn crds_are_templates_with_install_and_keep_switches() {
    let groups = |o: &Objects| -> Vec<String> {
        o.crds
            .iter()
            .map(|c| c.metadata.name.clone().unwrap_or_default())
            .collect()
    };
    // Every CRD the Rust types generate, with a VPA service; the same objects as deploy/crds
    // but for the chart's labels and the keep policy.
    for vpa in ["vpaRecommender", "vpaUpdater", "vpaAdmission"] {
        let o = render(&json!({vpa: {"enabled": true}}));
        assert_eq!(o.crds.len(), plimsoll_core::api::crds().len(), "{vpa}");
    }
    let o = render(&json!({"vpaRecommender": {"enabled": true}}));
    for generated in plimsoll_core::api::crds() {
        let name = generated.metadata.name.clone().expect("name");
        let chart = named(&o.crds, &name, |c| &c.metadata);
        assert_eq!(chart.spec, generated.spec, "{name}");
        let annotations = chart.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations
                .get("helm.sh/resource-policy")
                .map(String::as_str),
            Some("keep"),
            "{name}: kept on uninstall by default"
        );
        for (k, v) in generated.metadata.annotations.iter().flatten() {
            assert_eq!(annotations.get(k), Some(v), "{name}: {k}");
        }
        let labels = chart.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels
                .get("app.kubernetes.io/managed-by")
                .map(String::as_str),
            Some("Helm")
        );
    }
    // No VPA service: no VPA CRD (an upstream VPA may own them).
    let o = render(&json!({}));
    assert!(
        groups(&o)
            .iter()
            .all(|n| n.ends_with(".autoscaling.plimsoll.dev")),
        "{:?}",
        groups(&o)
    );
    // crds.keep off: no policy; crds.install off: no CRD at all.
    let o = render(&json!({"vpaUpdater": {"enabled": true}, "crds": {"keep": false}}));
    assert_eq!(o.crds.len(), 4);
    for crd in &o.crds {
        let annotations = crd.metadata.annotations.clone().unwrap_or_default();
        assert!(
            !annotations.contains_key("helm.sh/resource-policy"),
            "{:?}",
            crd.metadata.name
        );
    }
    let o = render(&json!({"vpaUpdater": {"enabled": true}, "crds": {"install": false}}));
    assert!(o.crds.is_empty());
    assert!(
        !chart_dir().join("crds").exists(),
        "Helm installs, and never upgrades, the chart's crds/"
    );
}

#[test]
fn one_global_registry_and_tag_for_every_image() {
    let images = |values: &Value| -> BTreeMap<String, String> {
        let mut all = all_on();
        helm_merge(&mut all, values);
        let o = render(&all);
        o.deployments
            .iter()
            .map(|d| {
                (
                    d.metadata.name.clone().unwrap_or_default(),
                    pod(d).containers[0].image.clone().unwrap_or_default(),
                )
            })
            .collect()
    };
    let app_version = helm::yaml(
        &std::fs::read_to_string(chart_dir().join("Chart.yaml")).expect("Chart.yaml"),
        "Chart.yaml",
    )["appVersion"]
        .as_str()
        .expect("appVersion")
        .to_owned();
    let defaults = images(&json!({}));
    assert_eq!(defaults.len(), 5);
    for svc in SERVICES {
        assert_eq!(
            defaults[&format!("plimsoll-{svc}")],
            format!("ghcr.io/plimsoll-dev/{svc}:{app_version}")
        );
    }
    // One registry and one tag move all five.
    let mirrored = images(
        &json!({"global": {"image": {"registry": "registry.example.com/mirror/", "tag": "0.2.0-rc.1"}}}),
    );
    for svc in SERVICES {
        assert_eq!(
            mirrored[&format!("plimsoll-{svc}")],
            format!("registry.example.com/mirror/{svc}:0.2.0-rc.1")
        );
    }
    // A service's own repository and tag win.
    let one = images(&json!({
        "global": {"image": {"registry": "registry.example.com/mirror", "tag": "0.2.0"}},
        "hpaPlus": {"image": {"repository": "other.example.com/team/hpa-plus", "tag": "debug"}},
        "cronHpa": {"image": {"tag": "0.1.9"}},
    }));
    assert_eq!(
        one["plimsoll-hpa-plus"],
        "other.example.com/team/hpa-plus:debug"
    );
    assert_eq!(
        one["plimsoll-cron-hpa"],
        "registry.example.com/mirror/cron-hpa:0.1.9"
    );
    assert_eq!(
        one["plimsoll-vpa-updater"],
        "registry.example.com/mirror/vpa-updater:0.2.0"
    );
    // The schema takes them, and refuses a tag or registry that cannot be an image reference.
    let chart = helm::Chart::load(&chart_dir());
    let errors = |o: Value| schema_errors(&chart.values(&o));
    let ok = errors(
        json!({"global": {"image": {"registry": "r.example.com:5000/x", "tag": "1.0"}},
                           "hpaPlus": {"image": {"repository": "r.example.com/hpa-plus"}}}),
    );
    assert_eq!(ok, None);
    assert!(
        errors(json!({"global": {"image": {"registry": "r.example.com/x", "tag": "a b"}}}))
            .is_some()
    );
    assert!(errors(json!({"global": {"image": {"registry": ""}}})).is_some());
    assert!(errors(json!({"global": {"image": {"registrY": "x"}}})).is_some());
}

/// Helm's merge of values (maps merge, anything else replaces), for composing test values.
fn helm_merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => {
                        helm_merge(existing, v);
                    }
                    _ => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

#[test]
fn chart_readme_is_current_and_describes_every_value() {
    let root = xtask::repo_root();
    let want = xtask::chart_readme::render(&root).expect("render README");
    let on_disk =
        std::fs::read_to_string(root.join(xtask::chart_readme::README)).unwrap_or_default();
    assert!(
        on_disk == want,
        "{} is stale: run `cargo run -q -p xtask -- chart-readme` (or `just chart-readme`)",
        xtask::chart_readme::README
    );
    let rows = xtask::chart_readme::rows(&root).expect("rows");
    let undescribed: Vec<_> = rows
        .iter()
        .filter(|r| r.description.is_empty())
        .map(|r| r.key.as_str())
        .collect();
    assert!(
        undescribed.is_empty(),
        "values.schema.json has no description for {undescribed:?}"
    );
    for key in [
        "crds.install",
        "crds.keep",
        "global.image.registry",
        "global.image.tag",
        "hpaPlus.image",
        "vpaAdmission.certManager.enabled",
    ] {
        assert!(rows.iter().any(|r| r.key == key), "{key} not in the README");
    }
    for needed in [
        ">=1.33",
        "metrics-server",
        "cert-manager",
        "helm uninstall",
        "helm upgrade",
        "invalid ownership metadata",
        "resource-policy",
    ] {
        assert!(
            want.contains(needed),
            "the README does not mention {needed}"
        );
    }
    // Defaults come from values.yaml.
    let keep = rows
        .iter()
        .find(|r| r.key == "crds.keep")
        .expect("crds.keep");
    assert_eq!(keep.default, "`true`");
}

#[test]
fn hpa_plus_may_touch_plain_hpas_only_in_native_mode() {
    use clap::Parser;
    let writes = |rules: &[(String, PolicyRule)]| -> Vec<String> {
        rules
            .iter()
            .filter(|(_, r)| {
                on(r, "autoscaling", "horizontalpodautoscalers")
                    || on(r, "autoscaling", "horizontalpodautoscalers/status")
            })
            .flat_map(|(_, r)| r.verbs.clone())
            .collect()
    };
    for values in [json!({}), json!({"hpaPlus": {"nativeHpa": false}})] {
        let o = render(&values);
        assert_eq!(
            writes(&rules_bound_to(&o, "hpa-plus")),
            Vec::<String>::new()
        );
        assert!(
            !args_of(deployment(&o, "hpa-plus"))
                .iter()
                .any(|a| a.starts_with("--native-hpa"))
        );
    }
    let o = render(&json!({"hpaPlus": {"nativeHpa": true}}));
    let verbs = writes(&rules_bound_to(&o, "hpa-plus"));
    for verb in ["watch", "patch"] {
        assert!(verbs.iter().any(|v| v == verb), "{verb} in {verbs:?}");
    }
    let args = args_of(deployment(&o, "hpa-plus"));
    let config = plimsoll_hpa_plus::cli::Args::try_parse_from(
        std::iter::once("hpa-plus".to_owned()).chain(args.iter().cloned()),
    )
    .expect("args")
    .into_config()
    .expect("config");
    assert!(config.native_hpa, "{args:?}");
    let (deploy_native, _) = deploy_rbac("hpa-plus/native-hpa/cluster-rbac.yaml");
    let chart_native = named(&o.cluster_roles, "plimsoll-hpa-plus-native-hpa", |r| {
        &r.metadata
    });
    assert_eq!(chart_native.rules, deploy_native[0].rules);
    // deploy/ runs without native mode and binds no HPA rights by default.
    let deploy_config = plimsoll_hpa_plus::cli::Args::try_parse_from(
        std::iter::once("hpa-plus".to_owned()).chain(deploy_args("hpa-plus")),
    )
    .expect("deploy args")
    .into_config()
    .expect("deploy config");
    assert!(!deploy_config.native_hpa);
    let (deploy_main, _) = deploy_rbac("hpa-plus/cluster-rbac.yaml");
    assert!(deploy_main[0].rules.iter().flatten().all(|r| {
        !on(r, "autoscaling", "horizontalpodautoscalers")
            && !on(r, "autoscaling", "horizontalpodautoscalers/status")
    }));
}

/// The Lease names `svc` renews with these args, as crates/runtime/src/leader builds them.
fn leases_by_code(svc: &str, common: &plimsoll_runtime::CommonArgs, shards: u32) -> Vec<String> {
    use plimsoll_runtime::leader::LeaderConfig;
    use plimsoll_runtime::leader::shards::ShardConfig;
    use plimsoll_runtime::leader::shards::assignment::Target;
    let lease = LeaderConfig::from_args(svc, common, NAMESPACE).expect("leader config");
    let mut names = vec![lease.lease_name.clone()];
    if shards > 1 {
        let config = ShardConfig { lease, shards };
        names.extend((0..shards).map(|i| config.lease_name(Target::Shard(i))));
        names.push(config.lease_name(Target::Join));
    }
    names
}

/// The one rule by name that lets `svc` read its own Deployment (`own`), the Leases' owner; none
/// for the services whose ClusterRole reads every Deployment.
fn assert_owner_rule(svc: &str, rules: &[(String, PolicyRule)], own: &str) {
    // (A ClusterRole may read Deployments as targets; the rule by name is the owner's.)
    let reads: Vec<_> = rules
        .iter()
        .filter(|(_, r)| on(r, "apps", "deployments") && !names_of(r).is_empty())
        .collect();
    if matches!(svc, "hpa-plus" | "vpa-recommender") {
        // Their ClusterRole reads every Deployment (targets); a rule by name would be
        // dead weight.
        assert!(reads.is_empty(), "{svc}: {reads:?}");
        assert!(
            rules.iter().any(|(_, r)| on(r, "apps", "deployments")
                && names_of(r).is_empty()
                && r.verbs.iter().any(|v| v == "get")),
            "{svc} reads its own Deployment through its ClusterRole"
        );
    } else {
        assert_eq!(reads.len(), 1, "{svc}: {reads:?}");
        assert_eq!(reads[0].1.verbs, ["get"], "{svc}");
        assert_eq!(names_of(&reads[0].1), [own], "{svc}");
    }
}

#[test]
fn each_account_renews_only_the_leases_its_service_holds() {
    use clap::Parser;
    for (replicas, shards) in [(1, 0), (2, 0), (3, 12), (2, 1)] {
        let o = render(&json!({
            "hpaPlus": {"replicas": replicas, "shards": shards},
            "vpaRecommender": {"enabled": true, "replicas": replicas, "shards": shards},
            "vpaUpdater": {"enabled": true}, "vpaAdmission": {"enabled": true},
        }));
        for svc in SERVICES {
            let args = args_of(deployment(&o, svc));
            let command_line = std::iter::once(svc.to_owned()).chain(args.iter().cloned());
            let (common, sharded) = match svc {
                "hpa-plus" => {
                    let a =
                        plimsoll_hpa_plus::cli::Args::try_parse_from(command_line).expect("args");
                    (Some(a.common), a.shards)
                }
                "vpa-recommender" => {
                    let a = plimsoll_vpa_recommender::cli::Args::try_parse_from(command_line)
                        .expect("args");
                    (Some(a.common.clone()), a.into_config().shards)
                }
                "cron-hpa" => {
                    let a =
                        plimsoll_cron_hpa::cli::Args::try_parse_from(command_line).expect("args");
                    (Some(a.common), 1)
                }
                "vpa-updater" => {
                    let a = plimsoll_vpa_updater::cli::Args::try_parse_from(command_line)
                        .expect("args");
                    (Some(a.common), 1)
                }
                _ => (None, 1),
            };
            let rules = rules_bound_to(&o, svc);
            assert_named(
                &rules,
                LEASES.0,
                LEASES.1,
                if sharded > 1 {
                    &["create", "list"]
                } else {
                    &["create"]
                },
            );
            let renewed: Vec<String> = rules
                .iter()
                .filter(|(_, r)| on(r, LEASES.0, LEASES.1) && r.verbs.iter().any(|v| v == "update"))
                .flat_map(|(_, r)| names_of(r))
                .collect();
            let want = match &common {
                Some(common) => leases_by_code(svc, common, sharded),
                None => vec!["vpa-admission-controller".to_owned()],
            };
            assert_eq!(renewed, want, "{svc} replicas={replicas} shards={shards}");
            let lists = rules
                .iter()
                .any(|(_, r)| on(r, LEASES.0, LEASES.1) && r.verbs.iter().any(|v| v == "list"));
            assert_eq!(lists, sharded > 1, "{svc}: list only to find shard holders");
            // Only the webhook renews its status Lease; the updater reads it.
            if svc != "vpa-admission" {
                assert!(
                    !renewed.contains(&"vpa-admission-controller".to_owned()),
                    "{svc}"
                );
            }
            if svc == "vpa-updater" {
                assert!(rules.iter().any(|(_, r)| on(r, LEASES.0, LEASES.1)
                    && r.verbs == ["get"]
                    && names_of(r) == ["vpa-admission-controller"]));
            }
            // The Leases' owner (--lease-owner-deployment) is the service's own Deployment, and
            // the account may read that one Deployment and no other.
            let own = deployment(&o, svc).metadata.name.clone().expect("name");
            let owner: Vec<&str> = args
                .iter()
                .filter_map(|a| a.strip_prefix("--lease-owner-deployment="))
                .collect();
            assert_eq!(owner, [own.as_str()], "{svc}");
            if let Some(common) = &common {
                assert_eq!(common.lease_owner_deployment.as_deref(), Some(own.as_str()));
            }
            assert_owner_rule(svc, &rules, &own);
        }
        // The default's Role (two replicas: hpa-plus and vpa-recommender with eight shards) is
        // deploy/'s.
        if (replicas, shards) == (2, 0) {
            for svc in SERVICES {
                let (_, deploy_roles) = deploy_rbac(&format!("{svc}/leader-election-rbac.yaml"));
                let chart_role = named(&o.roles, &format!("plimsoll-{svc}-leader-election"), |r| {
                    &r.metadata
                });
                assert_eq!(chart_role.rules, deploy_roles[0].rules, "{svc}");
            }
        }
    }
}

#[test]
fn the_updater_and_the_webhook_leave_the_same_namespaces_alone() {
    use clap::Parser;
    for extra in [json!([]), json!(["legacy", "kube-system", "batch"])] {
        let o = render(
            &json!({"vpaUpdater": {"enabled": true}, "vpaAdmission": {"enabled": true},
                               "vpa": {"ignoredNamespaces": extra}}),
        );
        let updater = plimsoll_vpa_updater::cli::parse_config(
            std::iter::once("vpa-updater".to_owned()).chain(args_of(deployment(&o, "vpa-updater"))),
        )
        .expect("updater args")
        .scope;
        let webhook = plimsoll_vpa_admission::cli::Args::try_parse_from(
            std::iter::once("vpa-admission".to_owned())
                .chain(args_of(deployment(&o, "vpa-admission"))),
        )
        .expect("admission args")
        .into_config()
        .scope(NAMESPACE);
        assert_eq!(updater, webhook, "{extra}");
        assert!(!updater.admits("kube-system") && !updater.admits(NAMESPACE));
        assert!(updater.admits("shop"));
        for ns in extra.as_array().expect("list") {
            assert!(!updater.admits(ns.as_str().expect("string")), "{ns}");
        }
    }
    // deploy/: both run with the default, which is the same rule in the same namespace.
    let updater = plimsoll_vpa_updater::cli::parse_config(
        std::iter::once("vpa-updater".to_owned()).chain(deploy_args("vpa-updater")),
    )
    .expect("updater args")
    .scope;
    assert!(!updater.admits("kube-system"));
}

#[test]
fn flags_the_chart_derives_rbac_from_are_refused_in_args() {
    let chart = helm::Chart::load(&chart_dir());
    for (values, flag) in [
        (json!({"hpaPlus": {"args": ["--shards=16"]}}), "--shards"),
        (
            json!({"hpaPlus": {"args": ["--native-hpa=true"]}}),
            "--native-hpa",
        ),
        (
            json!({"vpaUpdater": {"enabled": true, "args": ["--ignored-vpa-object-namespaces=a"]}}),
            "--ignored-vpa-object-namespaces",
        ),
        (
            json!({"vpaAdmission": {"enabled": true, "args": ["--vpa-object-namespace=a"]}}),
            "--vpa-object-namespace",
        ),
    ] {
        let e = chart
            .render(&values, NAMESPACE)
            .err()
            .unwrap_or_else(|| panic!("{values} rendered"));
        assert!(e.contains(flag), "{values}: {e}");
    }
    // Other args pass.
    chart
        .render(&json!({"hpaPlus": {"args": ["--workers=8"]}}), NAMESPACE)
        .expect("renders");
}

/// The roles aggregated into admin/edit/view: the same in the chart and in deploy/, labelled for
/// aggregation, no `/status` write for anybody, and no VPA rule when no VPA service is installed.
#[test]
fn user_roles_widen_the_built_in_roles_and_match_deploy() {
    let o = render(&all_on());
    let (deploy, _) = deploy_rbac("user-roles.yaml");
    for name in ["plimsoll-edit", "plimsoll-view"] {
        let chart = named(&o.cluster_roles, name, |r| &r.metadata);
        let file = named(&deploy, name, |r| &r.metadata);
        assert_eq!(chart.rules, file.rules, "{name}");
        let labels = chart.metadata.labels.clone().unwrap_or_default();
        let aggregate = if name == "plimsoll-edit" {
            "edit"
        } else {
            "view"
        };
        assert_eq!(
            labels
                .get(&format!(
                    "rbac.authorization.k8s.io/aggregate-to-{aggregate}"
                ))
                .map(String::as_str),
            Some("true"),
            "{name}"
        );
        for rule in chart.rules.iter().flatten() {
            let writes = rule
                .verbs
                .iter()
                .any(|v| !["get", "list", "watch"].contains(&v.as_str()));
            let status = rule
                .resources
                .iter()
                .flatten()
                .any(|r| r.ends_with("/status") || r.contains("checkpoint"));
            assert!(
                !(writes && status),
                "{name} writes status or checkpoints: {rule:?}"
            );
        }
    }
    let horizontal_only = render(&json!({
        "vpaRecommender": {"enabled": false}, "vpaUpdater": {"enabled": false},
        "vpaAdmission": {"enabled": false}}));
    let edit = named(&horizontal_only.cluster_roles, "plimsoll-edit", |r| {
        &r.metadata
    });
    assert!(
        edit.rules.iter().flatten().all(|r| !r
            .api_groups
            .iter()
            .flatten()
            .any(|g| g == "autoscaling.k8s.io")),
        "no VPA rights without a VPA service"
    );
    let off = render(&json!({"userRoles": {"enabled": false}}));
    assert!(
        off.cluster_roles
            .iter()
            .all(|r| r.metadata.name.as_deref() != Some("plimsoll-edit"))
    );
}

/// `hpaPlus.record`: off by default (no flag, no volume); on, hpa-plus records into an emptyDir
/// with the chart's bounds and selector, and the args parse into the same settings.
#[test]
fn hpa_plus_records_into_an_empty_dir_only_when_asked() {
    use clap::Parser as _;
    let mounted = |d: &Deployment| {
        let spec = d
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("pod spec");
        let volume = spec
            .volumes
            .iter()
            .flatten()
            .any(|v| v.name == "recordings" && v.empty_dir.is_some());
        let mount = spec.containers[0]
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.name == "recordings" && m.mount_path == "/var/lib/plimsoll/recordings");
        volume && mount
    };
    let o = render(&json!({}));
    let off = deployment(&o, "hpa-plus");
    assert!(!args_of(off).iter().any(|a| a.starts_with("--record")));
    assert!(!mounted(off));
    let o = render(
        &json!({"hpaPlus": {"record": {"enabled": true, "maxBytes": 1_048_576,
        "files": 2, "selector": "team=web", "annotationAllowed": true}}}),
    );
    let on = deployment(&o, "hpa-plus");
    assert!(mounted(on));
    let args = args_of(on);
    let config = plimsoll_hpa_plus::cli::Args::try_parse_from(
        std::iter::once("hpa-plus".to_owned()).chain(args.iter().cloned()),
    )
    .expect("args")
    .into_config()
    .expect("config");
    let record = config.record.expect("--record-dir");
    assert_eq!(
        record.dir,
        std::path::Path::new("/var/lib/plimsoll/recordings")
    );
    assert_eq!((record.max_bytes, record.files), (1_048_576, 2));
    assert!(
        record.annotation_allowed && !record.selector.is_empty(),
        "{args:?}"
    );
    assert!(!mounted(deployment(&o, "cron-hpa")));
}
