//! Authentication and RBAC against the sim through a JSON client (kube-rs): ServiceAccount
//! tokens from the TokenRequest API, 401 for unknown tokens and 403 with the apiserver's message
//! in `--authorize` mode, Roles and bindings stored and enforced, the access reviews answered
//! from them, impersonation by the admin, and nothing refused without `--authorize`.
#![allow(clippy::unwrap_used, clippy::panic)] // integration tests: helpers fail loudly

use crate::common;

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::authorization::v1::{
    LocalSubjectAccessReview, SelfSubjectAccessReview, SubjectAccessReview,
};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use kube::api::{Api, ListParams, PostParams};
use plimsoll_sim::{SimConfig, SimHandle};
use serde_json::json;

async fn client_from(kubeconfig: &str) -> kube::Client {
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// ServiceAccount `default/bot` with a Role reading ConfigMaps (only `settings` for `get`) and
/// a RoleBinding in `default`.
async fn bot(admin: &kube::Client) {
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "bot"}})).unwrap();
    Api::<ServiceAccount>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &sa)
        .await
        .unwrap();
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "config-reader"},
        "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["settings"]},
        ]
    }))
    .unwrap();
    Api::<Role>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "bot-reads-config"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "config-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "default"}]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

async fn authorized() -> (SimHandle, kube::Client) {
    common::start_with(SimConfig {
        authorize: true,
        workload_model: false,
        ..SimConfig::default()
    })
    .await
}

#[tokio::test]
async fn a_service_account_gets_what_its_role_grants_and_403_for_the_rest() {
    let (sim, admin) = authorized().await;
    bot(&admin).await;
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "settings"}})).unwrap();
    Api::<ConfigMap>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let bot = client_from(&sim.service_account_kubeconfig("default", "bot").unwrap()).await;
    // The kubeconfig's namespace is the ServiceAccount's.
    assert_eq!(bot.default_namespace(), "default");
    let configmaps = Api::<ConfigMap>::namespaced(bot.clone(), "default");
    assert_eq!(
        configmaps
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    configmaps.get("settings").await.unwrap();
    let e = configmaps.get("other").await.unwrap_err();
    assert_eq!(common::code(&e), 403);
    let e = Api::<Pod>::namespaced(bot.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap_err();
    let kube::Error::Api(status) = e else {
        panic!("{e}")
    };
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        status.message,
        "pods is forbidden: User \"system:serviceaccount:default:bot\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
    );
    let e = Api::<ConfigMap>::namespaced(bot.clone(), "kube-system")
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert_eq!(
        common::code(&e),
        403,
        "a RoleBinding grants only in its namespace"
    );
    // Discovery is open to every authenticated user (system:discovery).
    bot.apiserver_version().await.unwrap();
    bot.list_api_groups().await.unwrap();
    // Every decision about the bot is in the access log, with the rule that admitted it.
    let log = sim.access_log();
    let admitted: Vec<_> = log
        .iter()
        .filter(|r| r.allowed && r.attributes.resource == "configmaps")
        .filter_map(|r| r.admitted_by.clone())
        .collect();
    assert!(
        admitted
            .iter()
            .any(|a| a.role == "Role/default/config-reader" && a.rule == 0)
    );
    assert!(
        admitted
            .iter()
            .any(|a| a.role == "Role/default/config-reader" && a.rule == 1)
    );
    assert!(
        log.iter()
            .any(|r| !r.allowed && r.attributes.resource == "pods")
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn unknown_tokens_get_401_and_the_token_request_api_issues_working_ones() {
    let (sim, admin) = authorized().await;
    bot(&admin).await;
    let bogus = sim.kubeconfig().replace(plimsoll_sim::TOKEN, "not-a-token");
    let e = Api::<ConfigMap>::namespaced(client_from(&bogus).await, "default")
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert_eq!(common::code(&e), 401);
    // `kubectl create token bot`.
    let sas = Api::<ServiceAccount>::namespaced(admin.clone(), "default");
    let req: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 600}}))
            .unwrap();
    let issued = sas
        .create_token_request("bot", &PostParams::default(), &req)
        .await
        .unwrap();
    let token = issued.status.unwrap().token;
    let with_token = sim.kubeconfig().replace(plimsoll_sim::TOKEN, &token);
    Api::<ConfigMap>::namespaced(client_from(&with_token).await, "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    let e = sas
        .create_token_request("nobody", &PostParams::default(), &req)
        .await
        .unwrap_err();
    assert_eq!(common::code(&e), 404);
    sim.shutdown().await;
}

#[tokio::test]
async fn access_reviews_answer_from_the_stored_rbac() {
    let (sim, admin) = authorized().await;
    bot(&admin).await;
    let review = |ns: &str, verb: &str, resource: &str, name: &str| {
        json!({"spec": {"user": "system:serviceaccount:default:bot",
            "groups": ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"],
            "resourceAttributes": {"namespace": ns, "verb": verb, "resource": resource, "name": name}}})
    };
    let sars = Api::<SubjectAccessReview>::all(admin.clone());
    let ask = |body: serde_json::Value| {
        let sars = sars.clone();
        async move {
            let r: SubjectAccessReview = serde_json::from_value(body).unwrap();
            sars.create(&PostParams::default(), &r)
                .await
                .unwrap()
                .status
                .unwrap()
        }
    };
    let yes = ask(review("default", "list", "configmaps", "")).await;
    assert!(yes.allowed);
    assert_eq!(
        yes.reason.as_deref(),
        Some(
            "RBAC: allowed by RoleBinding \"bot-reads-config/default\" of Role \"config-reader\" to ServiceAccount \"bot/default\""
        )
    );
    assert!(
        ask(review("default", "get", "configmaps", "settings"))
            .await
            .allowed
    );
    assert!(
        !ask(review("default", "get", "configmaps", "other"))
            .await
            .allowed
    );
    assert!(
        !ask(review("kube-system", "list", "configmaps", ""))
            .await
            .allowed
    );
    // Local: the namespace comes from the URL.
    let local: LocalSubjectAccessReview =
        serde_json::from_value(review("", "list", "configmaps", "")).unwrap();
    let answer = Api::<LocalSubjectAccessReview>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &local)
        .await
        .unwrap();
    assert!(answer.status.unwrap().allowed);
    // Self: the admin may do anything; the bot asks about itself, which basic-user allows.
    let me: SelfSubjectAccessReview = serde_json::from_value(json!({"spec": {
        "resourceAttributes": {"verb": "delete", "resource": "nodes"}}}))
    .unwrap();
    let admin_answer = Api::<SelfSubjectAccessReview>::all(admin.clone())
        .create(&PostParams::default(), &me)
        .await
        .unwrap();
    assert!(admin_answer.status.unwrap().allowed);
    let bot = client_from(&sim.service_account_kubeconfig("default", "bot").unwrap()).await;
    let bot_answer = Api::<SelfSubjectAccessReview>::all(bot)
        .create(&PostParams::default(), &me)
        .await
        .unwrap();
    assert!(!bot_answer.status.unwrap().allowed);
    sim.shutdown().await;
}

#[tokio::test]
async fn the_admin_impersonates_with_kubectl_as_headers() {
    let (sim, _) = authorized().await;
    let mut config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&sim.kubeconfig()).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let plain = kube::Client::try_from(config.clone()).unwrap();
    bot(&plain).await;
    config.auth_info.impersonate = Some("system:serviceaccount:default:bot".into());
    let as_bot = kube::Client::try_from(config).unwrap();
    Api::<ConfigMap>::namespaced(as_bot.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    let e = Api::<ClusterRole>::all(as_bot)
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert_eq!(common::code(&e), 403);
    // The bot itself may not impersonate.
    let mut bot_config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(
            &sim.service_account_kubeconfig("default", "bot").unwrap(),
        )
        .unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    bot_config.auth_info.impersonate = Some("plimsoll-sim-admin".into());
    let e = Api::<ConfigMap>::namespaced(kube::Client::try_from(bot_config).unwrap(), "default")
        .list(&ListParams::default())
        .await
        .unwrap_err();
    let kube::Error::Api(status) = e else {
        panic!("{e}")
    };
    assert_eq!(status.code, 403);
    assert!(
        status
            .message
            .contains("cannot impersonate resource \"users\""),
        "{}",
        status.message
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn without_authorize_every_token_is_the_admin_and_the_rbac_api_is_served() {
    let (sim, _) = common::start_with(SimConfig {
        workload_model: false,
        ..SimConfig::default()
    })
    .await;
    let any = sim.kubeconfig().replace(plimsoll_sim::TOKEN, "whatever");
    let client = client_from(&any).await;
    Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    // The bootstrap roles are there, as on a fresh cluster.
    let roles = Api::<ClusterRole>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap();
    let names: Vec<_> = roles
        .items
        .iter()
        .filter_map(|r| r.metadata.name.clone())
        .collect();
    for want in [
        "cluster-admin",
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    assert!(
        sim.access_log().is_empty(),
        "nothing is recorded without --authorize"
    );
    sim.shutdown().await;
}

/// The namespace `edit` role a tenant is usually given: aggregated from
/// `system:aggregate-to-edit` and `-view` (Deployments and HPAs in its own namespace, nothing in
/// another, no RBAC objects), and widened by any ClusterRole labelled
/// `aggregate-to-edit` — the way a chart grants editors its custom resources.
#[tokio::test]
async fn the_edit_role_is_aggregated_and_widened_by_labelled_cluster_roles() {
    let (sim, admin) = authorized().await;
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "tenant"}})).unwrap();
    Api::<ServiceAccount>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &sa)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "tenant-edit"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": "default"}]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let tenant = client_from(&sim.service_account_kubeconfig("default", "tenant").unwrap()).await;

    let can = |verb: &str, group: &str, resource: &str, namespace: &str| {
        let review: SelfSubjectAccessReview = serde_json::from_value(json!({
            "spec": {"resourceAttributes": {"verb": verb, "group": group, "resource": resource,
                "namespace": namespace}}
        }))
        .unwrap();
        let tenant = tenant.clone();
        async move {
            Api::<SelfSubjectAccessReview>::all(tenant)
                .create(&PostParams::default(), &review)
                .await
                .unwrap()
                .status
                .unwrap()
                .allowed
        }
    };
    assert!(can("create", "apps", "deployments", "default").await);
    assert!(
        can(
            "patch",
            "autoscaling",
            "horizontalpodautoscalers",
            "default"
        )
        .await
    );
    assert!(
        can("list", "", "pods", "default").await,
        "view's rules reach edit"
    );
    assert!(!can("create", "apps", "deployments", "kube-system").await);
    assert!(!can("create", "rbac.authorization.k8s.io", "roles", "default").await);
    let crd = "horizontalpodautoscalerpluses";
    assert!(!can("create", "autoscaling.plimsoll.dev", crd, "default").await);

    let widen: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "plimsoll-edit",
            "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
        "rules": [{"apiGroups": ["autoscaling.plimsoll.dev"], "resources": [crd],
            "verbs": ["create", "get", "list", "watch", "patch", "update", "delete"]}]
    }))
    .unwrap();
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &widen)
        .await
        .unwrap();
    assert!(can("create", "autoscaling.plimsoll.dev", crd, "default").await);
    assert!(!can("create", "autoscaling.plimsoll.dev", crd, "kube-system").await);
}
