//! vpa-admission end to end on plimsoll-sim: the sim calls the webhook over TLS when pods are
//! created, and the stored pods carry the VPA's recommended requests; VPAs are validated; with
//! the webhook stopped pods are still created, unchanged (failurePolicy Ignore); a rotated
//! certificate (with a new CA injected into the caBundle) is used without a restart; with
//! `--self-signed` and short lifetimes, renewed serving certificates and a CA rotation are
//! served without a restart while pods keep being patched; with the configuration and the empty
//! Secret installed as the chart installs them, `--self-signed` fills in only their `caBundle`
//! and data.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, PostParams};
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_e2e::webhook::{
    EVERY, SERVICE, WAIT, containers, limit, recommend, replica_pod, request, sim_env, start,
    start_with, teardown, vpa, wait_for_recommendation,
};
use plimsoll_e2e::{Env, eventually};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;

#[tokio::test]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: routing the webhook Service to loopback"
)]
async fn pods_get_recommendations_and_pass_unchanged_without_the_webhook() -> anyhow::Result<()> {
    let (env, system) = sim_env("vpa-admission").await?;
    let webhook = start(&env, &system, &["--self-signed".to_owned()]).await?;

    // The registration: safety settings as upstream.
    let config = Api::<MutatingWebhookConfiguration>::all(env.client.clone())
        .get(SERVICE)
        .await?;
    let hook = &config.webhooks.as_ref().context("no webhooks")?[0];
    assert_eq!(hook.failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(hook.side_effects, "None");

    // An invalid VPA is denied with the field named; a valid one is admitted.
    let vpas = env.api::<VerticalPodAutoscaler>();
    let denied = vpas
        .create(&PostParams::default(), &vpa("web", "Sometimes")?)
        .await
        .expect_err("invalid VPA admitted");
    assert!(
        denied.to_string().contains("spec.updatePolicy.updateMode"),
        "{denied}"
    );
    vpas.create(&PostParams::default(), &vpa("web", "Recreate")?)
        .await?;
    recommend(&env, "web").await?;
    wait_for_recommendation(&env, "web").await?;

    // A Deployment: the sim's ReplicaSet controller creates pods through the webhook.
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers()}}
        }
    }))?;
    env.api::<Deployment>()
        .create(&PostParams::default(), &deployment)
        .await?;
    let pods = env.api::<Pod>();
    let stored = eventually("two web pods", WAIT, EVERY, || {
        let pods = pods.clone();
        async move {
            let list = pods.list(&ListParams::default().labels("app=web")).await?;
            Ok((list.items.len() >= 2).then_some(list.items))
        }
    })
    .await?;
    for pod in &stored {
        assert_eq!(request(pod, 0, "cpu").as_deref(), Some("250m"));
        assert_eq!(request(pod, 0, "memory").as_deref(), Some("300Mi"));
        assert_eq!(limit(pod, 0, "cpu").as_deref(), Some("500m"));
        assert_eq!(limit(pod, 0, "memory").as_deref(), Some("600Mi"));
        assert_eq!(request(pod, 1, "cpu").as_deref(), Some("25m"));
        assert_eq!(request(pod, 1, "memory").as_deref(), Some("64Mi"));
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations.get("vpaObservedContainers").map(String::as_str),
            Some("app, log-shipper")
        );
        assert!(annotations.contains_key("vpaUpdates"));
    }

    // Webhook down: failurePolicy Ignore, the pod is stored as sent.
    webhook.stop().await?;
    let created = pods
        .create(&PostParams::default(), &replica_pod("web")?)
        .await?;
    assert_eq!(request(&created, 0, "cpu").as_deref(), Some("100m"));
    assert_eq!(request(&created, 0, "memory").as_deref(), Some("128Mi"));
    assert!(
        !created
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("vpaUpdates")
    );

    teardown(env, &system).await;
    Ok(())
}

fn write_certs(
    dir: &Path,
    bundle: &plimsoll_vpa_admission::certs::CertBundle,
) -> anyhow::Result<()> {
    for (name, text) in [
        ("tls.crt", &bundle.cert_pem),
        ("tls.key", &bundle.key_pem),
        ("ca.crt", &bundle.ca_pem),
    ] {
        let tmp = dir.join(format!("{name}.tmp"));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, dir.join(name))?;
    }
    Ok(())
}

#[tokio::test]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: routing the webhook Service to loopback"
)]
async fn rotated_certificate_files_are_served_without_restart() -> anyhow::Result<()> {
    let (env, system) = sim_env("vpa-admission-rotation").await?;
    let dir = std::env::temp_dir().join(format!("vpa-admission-e2e-{}", env.namespace));
    std::fs::create_dir_all(&dir)?;
    let names = vec![format!("{SERVICE}.{system}.svc")];
    let first = plimsoll_vpa_admission::certs::generate(&names)?;
    write_certs(&dir, &first)?;
    let webhook = start(
        &env,
        &system,
        &[
            format!("--tls-cert-file={}", dir.join("tls.crt").display()),
            format!("--tls-key-file={}", dir.join("tls.key").display()),
            format!("--client-ca-file={}", dir.join("ca.crt").display()),
        ],
    )
    .await?;
    env.api::<VerticalPodAutoscaler>()
        .create(&PostParams::default(), &vpa("api", "Initial")?)
        .await?;
    recommend(&env, "api").await?;
    wait_for_recommendation(&env, "api").await?;

    // Rotate to a certificate from a new CA, and inject the new CA as cert-manager's cainjector
    // would. If the webhook kept presenting the old certificate, the sim's TLS verification
    // would fail and (failurePolicy Ignore) the pod would come back unpatched.
    let second = plimsoll_vpa_admission::certs::generate(&names)?;
    write_certs(&dir, &second)?;
    let configs = Api::<MutatingWebhookConfiguration>::all(env.client.clone());
    let mut config = configs.get(SERVICE).await?;
    for hook in config.webhooks.iter_mut().flatten() {
        hook.client_config.ca_bundle =
            Some(k8s_openapi::ByteString(second.ca_pem.clone().into_bytes()));
    }
    configs
        .replace(SERVICE, &PostParams::default(), &config)
        .await?;
    let created = env
        .api::<Pod>()
        .create(&PostParams::default(), &replica_pod("api")?)
        .await?;
    assert_eq!(request(&created, 0, "cpu").as_deref(), Some("250m"));

    webhook.stop().await?;
    let _ = std::fs::remove_dir_all(&dir);
    teardown(env, &system).await;
    Ok(())
}

#[tokio::test]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: routing the webhook Service to loopback"
)]
async fn self_signed_fills_in_the_charts_configuration_and_secret_only() -> anyhow::Result<()> {
    let (env, system) = sim_env("vpa-admission-installed").await?;
    // What the chart installs: the configuration without caBundle, the Secret empty and Opaque,
    // both with Helm's metadata.
    let helm = json!({"labels": {"app.kubernetes.io/managed-by": "Helm"},
                      "annotations": {"meta.helm.sh/release-name": "plimsoll"}});
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": SERVICE, "labels": helm["labels"], "annotations": helm["annotations"]},
        "webhooks": [{
            "name": "vpa.plimsoll.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Ignore", "timeoutSeconds": 7,
            "clientConfig": {"service": {"name": SERVICE, "namespace": system, "port": 443, "path": "/"}},
            "rules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "Namespaced"},
                {"apiGroups": ["autoscaling.k8s.io"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["verticalpodautoscalers"], "scope": "Namespaced"}
            ],
            "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", system]}]}
        }]
    }))?;
    let configs = Api::<MutatingWebhookConfiguration>::all(env.client.clone());
    configs.create(&PostParams::default(), &config).await?;
    let secrets = Api::<Secret>::namespaced(env.client.clone(), &system);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "plimsoll-vpa-admission-tls", "labels": helm["labels"], "annotations": helm["annotations"]}
    }))?;
    secrets.create(&PostParams::default(), &secret).await?;

    let webhook = start_with(&env, &system, &["--self-signed".to_owned()], false).await?;
    let ca = eventually("caBundle set", WAIT, EVERY, || async {
        let ca = registered_ca(&env).await.ok();
        Ok(ca.filter(|c| !c.is_empty()))
    })
    .await?;
    let stored = secrets.get("plimsoll-vpa-admission-tls").await?;
    assert_eq!(
        stored.type_.as_deref().unwrap_or("Opaque"),
        "Opaque",
        "the type stays"
    );
    assert_eq!(
        stored
            .annotations()
            .get("meta.helm.sh/release-name")
            .map(String::as_str),
        Some("plimsoll")
    );
    let data = stored.data.clone().unwrap_or_default();
    assert_eq!(data.get("ca.crt").map(|b| b.0.clone()), Some(ca.clone()));
    assert!(data.contains_key("tls.crt") && data.contains_key("tls.key"));
    // Nothing but caBundle changed.
    let mut live = serde_json::to_value(configs.get(SERVICE).await?)?;
    live["webhooks"][0]["clientConfig"]
        .as_object_mut()
        .context("clientConfig")?
        .remove("caBundle");
    let mut want = serde_json::to_value(&config)?;
    for v in [&mut live, &mut want] {
        let meta = v["metadata"].as_object_mut().context("metadata")?;
        meta.retain(|k, _| k == "name" || k == "labels" || k == "annotations");
    }
    assert_eq!(live, want);

    // The API server calls the webhook with that caBundle: an invalid VPA is denied.
    let denied = env
        .api::<VerticalPodAutoscaler>()
        .create(&PostParams::default(), &vpa("web", "Sometimes")?)
        .await
        .expect_err("invalid VPA admitted");
    assert!(
        denied.to_string().contains("spec.updatePolicy.updateMode"),
        "{denied}"
    );
    webhook.stop().await?;
    teardown(env, &system).await;
    Ok(())
}

/// The certificates of a PEM bundle, DER.
fn pem_certs(pem: &[u8]) -> anyhow::Result<Vec<Vec<u8>>> {
    CertificateDer::pem_slice_iter(pem)
        .map(|c| Ok(c?.to_vec()))
        .collect()
}

/// The caBundle of the registered webhook.
async fn registered_ca(env: &Env) -> anyhow::Result<Vec<u8>> {
    let config = Api::<MutatingWebhookConfiguration>::all(env.client.clone())
        .get(SERVICE)
        .await?;
    let hook = config.webhooks.unwrap_or_default().into_iter().next();
    Ok(hook
        .and_then(|h| h.client_config.ca_bundle)
        .context("no caBundle")?
        .0)
}

/// The serving certificate in the shared Secret, DER.
async fn stored_certificate(secrets: &Api<Secret>) -> anyhow::Result<Vec<u8>> {
    let secret = secrets.get("plimsoll-vpa-admission-tls").await?;
    let pem = secret
        .data
        .and_then(|d| d.get("tls.crt").cloned())
        .context("no tls.crt")?;
    Ok(CertificateDer::from_pem_slice(&pem.0)?.to_vec())
}

/// The certificate the webhook presents in a new handshake, verified against the CAs `cas`
/// (DER) for the Service's DNS name, as the apiserver does.
async fn served_certificate(
    address: SocketAddr,
    cas: &[Vec<u8>],
    host: &str,
) -> anyhow::Result<Vec<u8>> {
    let mut roots = rustls::RootCertStore::empty();
    for der in cas {
        roots.add(CertificateDer::from(der.clone()))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(address).await?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(host.to_owned())?, tcp)
        .await?;
    let (_, session) = tls.get_ref();
    let chain = session.peer_certificates().context("no certificate")?;
    Ok(chain.first().context("empty chain")?.to_vec())
}

#[tokio::test]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: routing the webhook Service to loopback"
)]
async fn self_signed_certificates_are_renewed_without_restart() -> anyhow::Result<()> {
    let (env, system) = sim_env("vpa-admission-renewal").await?;
    // Serving certificates live 3 s (renewed with 1 s left), the CA 15 s (rotated at 10 s).
    let webhook = start(
        &env,
        &system,
        &[
            "--self-signed".to_owned(),
            "--self-signed-validity=3s".to_owned(),
            "--self-signed-ca-validity=15s".to_owned(),
            "--self-signed-check-interval=200ms".to_owned(),
        ],
    )
    .await?;
    let host = format!("{SERVICE}.{system}.svc");
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &system);
    let first_ca = pem_certs(&registered_ca(&env).await?)?;
    let first_cert = stored_certificate(&secrets).await?;
    env.api::<VerticalPodAutoscaler>()
        .create(&PostParams::default(), &vpa("renew", "Initial")?)
        .await?;
    recommend(&env, "renew").await?;
    wait_for_recommendation(&env, "renew").await?;

    // A renewed serving certificate, signed by the same CA, is served on the next handshake.
    let address = webhook.address;
    eventually("renewed certificate served", WAIT, EVERY, || {
        let (secrets, first_ca, first_cert, host) = (
            secrets.clone(),
            first_ca.clone(),
            first_cert.clone(),
            host.clone(),
        );
        async move {
            let stored = stored_certificate(&secrets).await?;
            let served = served_certificate(address, &first_ca, &host).await?;
            Ok((served != first_cert && served == stored).then_some(()))
        }
    })
    .await?;
    assert_eq!(
        pem_certs(&registered_ca(&env).await?)?,
        first_ca,
        "the CA is kept while it is valid"
    );
    let pods = env.api::<Pod>();
    let created = pods
        .create(&PostParams::default(), &replica_pod("renew")?)
        .await?;
    assert_eq!(request(&created, 0, "cpu").as_deref(), Some("250m"));

    // CA rotation: the registration carries the new CA next to the old one, then the webhook
    // serves a certificate only the new CA verifies.
    let cas = eventually("new CA registered next to the old one", WAIT, EVERY, || {
        let env = &env;
        async move {
            let cas = pem_certs(&registered_ca(env).await?)?;
            Ok((cas.len() == 2).then_some(cas))
        }
    })
    .await?;
    assert_eq!(cas[1], first_ca[0], "old CA kept behind the new one");
    let new_ca = vec![cas[0].clone()];
    eventually("certificate of the new CA served", WAIT, EVERY, || {
        let (new_ca, host) = (new_ca.clone(), host.clone());
        async move {
            Ok(served_certificate(address, &new_ca, &host)
                .await
                .ok()
                .map(|_| ()))
        }
    })
    .await?;
    let created = pods
        .create(&PostParams::default(), &replica_pod("renew")?)
        .await?;
    assert_eq!(request(&created, 0, "cpu").as_deref(), Some("250m"));
    // The old CA leaves the bundle once it has expired.
    eventually("expired CA dropped from the caBundle", WAIT, EVERY, || {
        let env = &env;
        let new = cas[0].clone();
        async move { Ok((pem_certs(&registered_ca(env).await?)? == [new]).then_some(())) }
    })
    .await?;

    webhook.stop().await?;
    teardown(env, &system).await;
    Ok(())
}
