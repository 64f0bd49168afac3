//! The chart's dashboards and alerts read what the services really export.
//!
//! - The dashboards in `charts/plimsoll/dashboards/` are rendered from `observability/
//!   dashboards.rs` (a file that differs fails; `PLIMSOLL_UPDATE_DASHBOARDS=1` rewrites them),
//!   parse as JSON and have unique uids and panel ids and the `datasource`, `namespace` and `pod`
//!   variables.
//! - Every alert in `charts/plimsoll/rules/alerts.yaml` has a summary, a description, a
//!   severity and a `runbook_url` whose anchor is a heading of docs/runbooks.md.
//! - Histogram buckets are only read through `histogram_quantile` with `le` kept, and the
//!   chart's service list names exactly the services with a dashboard and an alert group.
//! - The five services run against plimsoll-sim with work that makes every metric family appear
//!   (`observability/workload.rs`), and each one's `/metrics` is scraped until it has them all
//!   or two minutes passed. Every metric name in a dashboard query, a dashboard variable or an
//!   alert expression (`observability/promql.rs` finds them) must be a series one of the scraped
//!   families produces (from the `# TYPE` lines: a counter `x` yields `x_total`, a histogram `x`
//!   yields `x_bucket`, `x_sum` and `x_count`, a gauge `x` yields `x`), and a metric of the
//!   service the dashboard or alert group is about.

// A test binary: a failed check panics with the reason, including in its helper functions.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser as _;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use plimsoll_e2e::{Env, Running, eventually, free_address, scrape};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

#[path = "observability/dashboards.rs"]
mod dashboards;
#[path = "observability/promql.rs"]
mod promql;
#[path = "observability/workload.rs"]
mod workload;

/// The five services, as the chart names them.
const SERVICES: [&str; 5] = [
    "hpa-plus",
    "cron-hpa",
    "vpa-recommender",
    "vpa-updater",
    "vpa-admission",
];

/// Where every `runbook_url` points, up to the anchor.
const RUNBOOKS_URL: &str = "https://github.com/plimsoll-dev/plimsoll/blob/main/docs/runbooks.md#";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn chart() -> PathBuf {
    repo_root().join("charts/plimsoll")
}

fn metric_prefix(service: &str) -> String {
    format!("plimsoll_{}_", service.replace('-', "_"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Each dashboard file, parsed, by service.
fn dashboards_on_disk() -> BTreeMap<&'static str, Value> {
    SERVICES
        .iter()
        .map(|s| {
            let path = chart().join(format!("dashboards/{s}.json"));
            let v = serde_json::from_str(&read(&path))
                .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
            (*s, v)
        })
        .collect()
}

/// The alert groups of rules/alerts.yaml.
fn alert_groups() -> Vec<Value> {
    let path = chart().join("rules/alerts.yaml");
    let rules: Value = serde_saphyr::from_str(&read(&path))
        .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()));
    rules["groups"]
        .as_array()
        .unwrap_or_else(|| panic!("{} has no groups list", path.display()))
        .clone()
}

#[test]
fn dashboards_on_disk_are_rendered_from_their_descriptions() {
    let update = std::env::var_os("PLIMSOLL_UPDATE_DASHBOARDS").is_some_and(|v| v == "1");
    let boards = dashboards::boards();
    assert_eq!(
        boards.iter().map(|b| b.service).collect::<Vec<_>>(),
        SERVICES,
        "one dashboard per service"
    );
    for board in &boards {
        let path = chart().join(format!("dashboards/{}.json", board.service));
        let text = dashboards::file_text(board);
        if update {
            std::fs::write(&path, &text).unwrap();
        }
        assert!(
            std::fs::read_to_string(&path).unwrap_or_default() == text,
            "{} is stale or missing: run `PLIMSOLL_UPDATE_DASHBOARDS=1 cargo test -p plimsoll-e2e --test e2e observability::`",
            path.display()
        );
    }
    let files: BTreeSet<String> = std::fs::read_dir(chart().join("dashboards"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    let expected: BTreeSet<String> = SERVICES.iter().map(|s| format!("{s}.json")).collect();
    assert_eq!(files, expected, "a file in dashboards/ no service renders");
}

/// `(where, expression)` of every query of `board`: panel targets and variable queries.
fn dashboard_queries(service: &str, board: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for panel in board["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or_default();
            out.push((
                format!("dashboard {service}, panel {:?}", panel["title"]),
                expr.to_owned(),
            ));
        }
    }
    for var in board["templating"]["list"].as_array().into_iter().flatten() {
        if var["type"] == "query" {
            out.push((
                format!("dashboard {service}, variable {}", var["name"]),
                var["query"].as_str().unwrap_or_default().to_owned(),
            ));
        }
    }
    out
}

#[test]
fn dashboards_parse_with_unique_ids_and_the_three_variables() {
    let mut uids = BTreeSet::new();
    for (service, board) in dashboards_on_disk() {
        assert!(
            uids.insert(board["uid"].as_str().unwrap().to_owned()),
            "{service}: uid reused"
        );
        assert_eq!(board["uid"], format!("plimsoll-{service}"));
        assert!(board["schemaVersion"].as_u64().unwrap() >= 36, "{service}");
        let vars: BTreeMap<&str, &Value> = board["templating"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (v["name"].as_str().unwrap(), v))
            .collect();
        assert_eq!(
            vars.keys().copied().collect::<Vec<_>>(),
            ["datasource", "namespace", "pod"],
            "{service}"
        );
        assert_eq!(vars["datasource"]["type"], "datasource", "{service}");
        assert_eq!(vars["datasource"]["query"], "prometheus", "{service}");
        assert_eq!(vars["pod"]["multi"], true, "{service}");
        let mut ids = BTreeSet::new();
        let panels = board["panels"].as_array().unwrap();
        assert!(panels.len() > 5, "{service}: {} panels", panels.len());
        for panel in panels {
            let id = panel["id"].as_u64().unwrap();
            assert!(ids.insert(id), "{service}: panel id {id} reused");
            if panel["type"] == "row" {
                continue;
            }
            assert_eq!(panel["datasource"]["uid"], "${datasource}", "{service}");
            let targets = panel["targets"].as_array().unwrap();
            assert!(
                !targets.is_empty(),
                "{service}: {:?} has no query",
                panel["title"]
            );
            let refs: BTreeSet<&str> = targets
                .iter()
                .map(|t| t["refId"].as_str().unwrap())
                .collect();
            assert_eq!(refs.len(), targets.len(), "{service}: refIds reused");
            for t in targets {
                let expr = t["expr"].as_str().unwrap();
                assert!(
                    expr.contains(r#"namespace="$namespace", pod=~"$pod""#),
                    "{service}: {expr} is not narrowed to the chosen namespace and pods"
                );
            }
            let grid = &panel["gridPos"];
            assert!(
                grid["x"].as_u64().unwrap() + grid["w"].as_u64().unwrap() <= 24,
                "{service}: {:?} overflows the grid",
                panel["title"]
            );
        }
    }
}

/// GitHub's anchor of a Markdown heading: lower case, punctuation other than `-` and `_`
/// dropped, spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn alerts_carry_summaries_severities_and_runbooks_that_exist() {
    let runbooks = read(&repo_root().join("docs/runbooks.md"));
    let anchors: BTreeSet<String> = runbooks
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|h| anchor(h.trim_start_matches('#')))
        .collect();
    let groups = alert_groups();
    let names: Vec<&str> = groups.iter().map(|g| g["name"].as_str().unwrap()).collect();
    let expected: Vec<String> = SERVICES.iter().map(|s| format!("plimsoll-{s}")).collect();
    assert_eq!(names, expected, "one group per service, named for it");
    let mut alerts = BTreeSet::new();
    for group in &groups {
        let rules = group["rules"].as_array().unwrap();
        assert!(
            rules.len() >= 4,
            "{}: {} alerts",
            group["name"],
            rules.len()
        );
        for rule in rules {
            let alert = rule["alert"].as_str().unwrap();
            assert!(alerts.insert(alert.to_owned()), "{alert} defined twice");
            assert!(
                rule["expr"].as_str().is_some_and(|e| !e.trim().is_empty()),
                "{alert}"
            );
            assert!(rule["for"].as_str().is_some(), "{alert} has no `for`");
            let severity = rule["labels"]["severity"].as_str().unwrap_or_default();
            assert!(
                ["warning", "critical"].contains(&severity),
                "{alert}: severity {severity:?}"
            );
            let notes = &rule["annotations"];
            for key in ["summary", "description"] {
                assert!(
                    notes[key].as_str().is_some_and(|s| s.len() > 10),
                    "{alert} has no {key}"
                );
            }
            let url = notes["runbook_url"].as_str().unwrap_or_default();
            let target = url.strip_prefix(RUNBOOKS_URL).unwrap_or_else(|| {
                panic!("{alert}: runbook_url {url:?} is not in docs/runbooks.md")
            });
            assert_eq!(
                target,
                alert.to_lowercase(),
                "{alert}: anchor of another alert"
            );
            assert!(
                anchors.contains(target),
                "{alert}: docs/runbooks.md has no heading for #{target}"
            );
        }
    }
}

/// `(where, expression)` of every alert of every group, with the group's service.
fn alert_queries() -> Vec<(&'static str, String, String)> {
    let mut out = Vec::new();
    for (group, service) in alert_groups().iter().zip(SERVICES) {
        for rule in group["rules"].as_array().into_iter().flatten() {
            out.push((
                service,
                format!("alert {}", rule["alert"]),
                rule["expr"].as_str().unwrap_or_default().to_owned(),
            ));
        }
    }
    out
}

/// Every query of every dashboard and alert, with its service.
fn all_queries() -> Vec<(&'static str, String, String)> {
    let boards = dashboards_on_disk();
    SERVICES
        .iter()
        .flat_map(|s| {
            dashboard_queries(s, &boards[s])
                .into_iter()
                .map(move |(at, expr)| (*s, at, expr))
        })
        .chain(alert_queries())
        .collect()
}

#[test]
fn histogram_buckets_are_read_as_quantiles_by_le() {
    for (_, at, expr) in all_queries() {
        if !expr.contains("_bucket") {
            continue;
        }
        assert!(
            expr.contains("histogram_quantile("),
            "{at}: buckets outside histogram_quantile: {expr}"
        );
        let keeps_le = expr.split("by (").skip(1).all(|list| {
            list.split(')')
                .next()
                .is_some_and(|labels| labels.split(',').any(|l| l.trim() == "le"))
        });
        assert!(keeps_le, "{at}: an aggregation drops `le`: {expr}");
    }
}

#[test]
fn the_chart_installs_a_dashboard_and_an_alert_group_for_each_of_its_services() {
    // templates/dashboards.yaml reads dashboards/<name>.json and templates/prometheusrule.yaml
    // keeps the group plimsoll-<name> for each service of this list.
    let services = read(&chart().join("templates/_services.tpl"));
    let names: Vec<&str> = services
        .lines()
        .filter_map(|l| l.split("name: ").nth(1)?.split(',').next())
        .collect();
    assert_eq!(names, SERVICES, "the chart's services");
    for template in ["dashboards.yaml", "prometheusrule.yaml"] {
        let text = read(&chart().join("templates").join(template));
        assert!(
            text.contains(r#"include "plimsoll.services""#),
            "{template}"
        );
    }
}

/// Every series name the families of a scrape produce, from their `# TYPE` lines.
fn series_names(scrape: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in scrape.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let Some((family, kind)) = rest.split_once(' ') else {
            continue;
        };
        let suffixes: &[&str] = match kind.trim() {
            "counter" => &["_total", "_created"],
            "histogram" | "gaugehistogram" => &["_bucket", "_sum", "_count", "_created"],
            "summary" => &["", "_sum", "_count", "_created"],
            "info" => &["_info"],
            _ => &[""],
        };
        names.extend(suffixes.iter().map(|s| format!("{family}{s}")));
    }
    names
}

#[test]
fn series_names_follow_the_openmetrics_suffixes() {
    let text = "# TYPE a counter\na_total 1\n# TYPE b histogram\n# TYPE c gauge\nc 2\n# EOF\n";
    let names = series_names(text);
    for present in ["a_total", "b_bucket", "b_sum", "b_count", "c"] {
        assert!(names.contains(present), "{present}");
    }
    for absent in ["a", "b", "c_total", "b_total"] {
        assert!(!names.contains(absent), "{absent}");
    }
}

/// A service under test: its admin address and its task.
struct Scraped {
    name: &'static str,
    admin: SocketAddr,
    running: Running<anyhow::Result<()>>,
}

/// Spawns `run`, a service's `run(config, token)` with its config bound.
fn scraped<F, E>(
    name: &'static str,
    admin: SocketAddr,
    run: impl FnOnce(CancellationToken) -> F,
) -> Scraped
where
    F: Future<Output = Result<(), E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let running = Running::spawn(name, |token| {
        let service = run(token);
        async move { service.await.map_err(anyhow::Error::from) }
    });
    Scraped {
        name,
        admin,
        running,
    }
}

/// Starts the five services against `env`'s cluster, each on its own admin address. The
/// webhook registers itself by URL for the pods of every namespace but its own.
async fn start_all(env: &Env) -> anyhow::Result<Vec<Scraped>> {
    let kubeconfig = format!("--kubeconfig={}", env.kubeconfig.display());
    let lease_ns = format!("--lease-namespace={}", env.namespace);
    let mut out = Vec::new();

    let admin = free_address()?;
    let config = plimsoll_hpa_plus::cli::Args::try_parse_from([
        "hpa-plus",
        &kubeconfig,
        &format!("--metrics-address={admin}"),
        &lease_ns,
        "--retry-period=1s",
        "--sync-period=1s",
        "--cpu-initialization-period=1s",
        "--initial-readiness-delay=0s",
        "--log-format=text",
    ])?
    .into_config()?;
    out.push(scraped("hpa-plus", admin, |t| {
        plimsoll_hpa_plus::run(config, t)
    }));

    let admin = free_address()?;
    let config = plimsoll_cron_hpa::cli::Args::try_parse_from([
        "cron-hpa",
        &kubeconfig,
        &format!("--metrics-address={admin}"),
        &lease_ns,
        "--retry-period=1s",
        "--log-format=text",
    ])?
    .into_config();
    out.push(scraped("cron-hpa", admin, |t| {
        plimsoll_cron_hpa::run(config, t)
    }));

    let admin = free_address()?;
    let config = plimsoll_vpa_recommender::cli::Args::from_flags([
        "vpa-recommender",
        &kubeconfig,
        &format!("--metrics-address={admin}"),
        &lease_ns,
        "--retry-period=1s",
        "--recommender-interval=1s",
        "--checkpoints-timeout=5s",
        &format!("--vpa-object-namespace={}", env.namespace),
        "--log-format=text",
    ])?
    .into_config();
    out.push(scraped("vpa-recommender", admin, |t| {
        plimsoll_vpa_recommender::run(config, t)
    }));

    let admin = free_address()?;
    let config = plimsoll_vpa_updater::cli::parse_config([
        "vpa-updater".to_owned(),
        kubeconfig.clone(),
        format!("--metrics-address={admin}"),
        lease_ns.clone(),
        "--retry-period=1s".to_owned(),
        "--updater-interval=1s".to_owned(),
        format!(
            "--vpa-object-namespace={}",
            workload::updater_namespace(env)
        ),
        format!("--admission-controller-status-namespace={}", env.namespace),
        "--log-format=text".to_owned(),
    ])?;
    out.push(scraped("vpa-updater", admin, |t| {
        plimsoll_vpa_updater::run(config, t)
    }));

    let home = env.webhook_home();
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": home}}))?;
    Api::<Namespace>::all(env.client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    let admin = free_address()?;
    let webhook = free_address()?;
    let config = plimsoll_vpa_admission::cli::Args::try_parse_from([
        "vpa-admission".to_owned(),
        kubeconfig.clone(),
        format!("--port={}", webhook.port()),
        format!("--metrics-address={admin}"),
        "--self-signed".to_owned(),
        "--register-webhook".to_owned(),
        format!("--webhook-config-name={}", env.namespace),
        format!("--webhook-url=https://{webhook}/"),
        format!("--webhook-service-namespace={home}"),
        format!("--status-lease-namespace={}", env.namespace),
        "--status-lease-update-interval=1s".to_owned(),
        "--log-format=text".to_owned(),
    ])?
    .into_config();
    out.push(scraped("vpa-admission", admin, |t| {
        plimsoll_vpa_admission::run(config, t)
    }));
    Ok(out)
}

/// The metric names each service's dashboard and alert group read.
fn wanted() -> BTreeMap<&'static str, BTreeSet<String>> {
    let mut wanted: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (service, at, expr) in all_queries() {
        let names = promql::metric_names(&expr);
        assert!(!names.is_empty(), "{at}: no metric in {expr}");
        for name in names {
            assert!(
                name.starts_with(&metric_prefix(service)),
                "{at}: {name} is not a metric of {service}"
            );
            wanted.entry(service).or_default().insert(name);
        }
    }
    wanted
}

/// Scrapes every service every 500 ms, gathering the series names their families produce,
/// until every name in `wanted` was seen or two minutes passed. The last scrape of each
/// service comes back too.
async fn gather(
    services: &[Scraped],
    wanted: &BTreeMap<&'static str, BTreeSet<String>>,
) -> (
    BTreeMap<&'static str, BTreeSet<String>>,
    BTreeMap<&'static str, String>,
) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let mut seen: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let mut last = BTreeMap::new();
    loop {
        for service in services {
            if let Ok(text) = scrape::metrics(service.admin).await {
                seen.entry(service.name)
                    .or_default()
                    .extend(series_names(&text));
                last.insert(service.name, text);
            }
        }
        let complete = wanted
            .iter()
            .all(|(s, names)| seen.get(s).is_some_and(|got| names.is_subset(got)));
        if complete || std::time::Instant::now() >= deadline {
            return (seen, last);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Registers the workload once the webhook is registered, then [`gather`]s.
async fn run_workload(
    env: &Env,
    services: &[Scraped],
    wanted: &BTreeMap<&'static str, BTreeSet<String>>,
) -> anyhow::Result<(
    BTreeMap<&'static str, BTreeSet<String>>,
    BTreeMap<&'static str, String>,
)> {
    let hooks = Api::<MutatingWebhookConfiguration>::all(env.client.clone());
    eventually(
        "the webhook is registered",
        Duration::from_secs(60),
        Duration::from_millis(250),
        || async { Ok(hooks.get_opt(&env.namespace).await?.map(|_| ())) },
    )
    .await?;
    workload::horizontal(env).await?;
    workload::recommended(env).await?;
    Ok(gather(services, wanted).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: faults, load and external metrics make every family appear"
)]
async fn every_metric_in_a_dashboard_or_an_alert_is_exported() -> anyhow::Result<()> {
    let wanted = wanted();
    let env = Env::start("observability").await?;
    workload::faults_before_start(&env)?;
    workload::updater_targets(&env).await?;
    workload::faults_on_writes(&env)?;
    let services = start_all(&env).await?;
    let gathered = run_workload(&env, &services, &wanted).await;
    for service in services {
        service
            .running
            .stop()
            .await?
            .with_context(|| format!("{} failed", service.name))?;
    }
    env.cleanup().await;
    let (seen, last) = gathered?;

    let mut missing = Vec::new();
    let mut incomplete = BTreeSet::new();
    for (service, names) in &wanted {
        for name in names {
            if !seen.get(service).is_some_and(|got| got.contains(name)) {
                missing.push(format!("{service}'s /metrics has no {name}"));
                incomplete.insert(*service);
            }
        }
    }
    if !missing.is_empty() {
        let scrapes: Vec<String> = incomplete
            .iter()
            .map(|service| {
                let text = last.get(service).map_or("(no scrape)", String::as_str);
                let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
                format!("--- {service}\n{}", samples.join("\n"))
            })
            .collect();
        panic!(
            "{}\n\nlast scrapes:\n{}",
            missing.join("\n"),
            scrapes.join("\n")
        );
    }
    let checked: usize = wanted.values().map(BTreeSet::len).sum();
    assert!(checked > 40, "only {checked} metric names found");
    // The certificate gauge the expiry alert reads holds the served certificate's notAfter,
    // about a year (the default --self-signed-validity) from now.
    let expiry = scrape::value(
        last.get("vpa-admission").map_or("", String::as_str),
        "plimsoll_vpa_admission_certificate_expiry_timestamp_seconds",
    );
    let now = jiff::Timestamp::now().as_second() as f64;
    assert!(
        expiry > now + 360.0 * 86400.0 && expiry < now + 366.0 * 86400.0,
        "certificate expiry {expiry} is not a year after {now}"
    );
    Ok(())
}
