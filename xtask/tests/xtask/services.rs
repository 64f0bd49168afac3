//! The checklist of a new service (docs/architecture.md, "How to add a service"), read from the
//! workspace: every service appears in each place that ships, installs, watches or releases it.
//!
//! **What a service is.** A crate `crates/<name>` whose `src/main.rs` runs the service skeleton
//! (`service::block_on`, `plimsoll_runtime::service`) and whose binary is also called `<name>`.
//! Any other binary under `crates/` must be listed in [`NOT_SERVICES`] with the reason, so a new
//! binary is either a service (and gets the whole checklist) or says why not; it cannot slip
//! through by being written differently.
//!
//! Every missing place is reported at once, each message naming the service, the file and what
//! to add there.

// A test binary: a failed check panics with the reason, including in its helper functions.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Binaries under `crates/` that are not services, and why.
const NOT_SERVICES: &[(&str, &str)] = &[(
    "kubectl-plimsoll",
    "a kubectl plugin run by users, not a Deployment",
)];

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One service's names in the spellings the places use.
#[derive(Debug)]
struct Names {
    /// `vpa-admission`: crate directory, binary, image, deploy/ directory, chart `name`.
    kebab: String,
    /// `vpaAdmission`: the chart's values key.
    camel: String,
    /// `VpaAdmission`: alert names.
    pascal: String,
    /// `vpa_admission`: metric prefix `plimsoll_vpa_admission_`.
    snake: String,
}

impl Names {
    fn of(kebab: &str) -> Self {
        let pascal: String = kebab
            .split('-')
            .map(|word| {
                let mut chars = word.chars();
                chars.next().map_or_else(String::new, |first| {
                    first.to_ascii_uppercase().to_string() + chars.as_str()
                })
            })
            .collect();
        let mut camel = pascal.clone();
        if let Some(first) = camel.get_mut(0..1) {
            first.make_ascii_lowercase();
        }
        Self {
            kebab: kebab.to_owned(),
            camel,
            pascal,
            snake: kebab.replace('-', "_"),
        }
    }
}

/// The services, by the rule in the module documentation; panics on a binary that is neither a
/// service nor in [`NOT_SERVICES`], or a service whose binary has another name.
fn services() -> Vec<Names> {
    let crates = xtask::repo_root().join("crates");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&crates)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|dir| dir.join("src/main.rs").is_file())
        .collect();
    dirs.sort();
    let mut found = Vec::new();
    for dir in dirs {
        let name = dir.file_name().unwrap().to_str().unwrap().to_owned();
        let main = read(&dir.join("src/main.rs"));
        let skeleton = main.contains("service::block_on(");
        let exempt = NOT_SERVICES.iter().any(|(n, _)| *n == name);
        assert!(
            skeleton || exempt,
            "crates/{name} has a main.rs that does not run the service skeleton \
             (plimsoll_runtime::service::block_on): make it a service, or add it to NOT_SERVICES \
             in xtask/tests/xtask/services.rs with the reason"
        );
        assert!(
            !(skeleton && exempt),
            "crates/{name} runs the service skeleton but NOT_SERVICES in xtask/tests/xtask/services.rs \
             lists it: remove it from that list"
        );
        if skeleton {
            let manifest = read(&dir.join("Cargo.toml"));
            assert!(
                manifest.contains(&format!("[[bin]]\nname = \"{name}\"")),
                "crates/{name}/Cargo.toml: the service's binary must be called `{name}` like its \
                 directory (add [[bin]] name = \"{name}\"): images, deploy/ and the chart run it \
                 by that name"
            );
            found.push(Names::of(&name));
        }
    }
    found
}

/// The words of a bash array assignment `name=(a b c)` in `script`.
fn bash_array(script: &str, name: &str) -> BTreeSet<String> {
    let start = format!("{name}=(");
    let line = script
        .lines()
        .find(|l| l.trim_start().starts_with(&start))
        .unwrap_or_else(|| panic!("no `{start}…)` line"));
    let inside = line.trim_start()[start.len()..]
        .split(')')
        .next()
        .unwrap_or_default();
    inside.split_whitespace().map(str::to_owned).collect()
}

/// The recipes of the justfile a recipe line `name: dep dep` depends on.
fn just_dependencies(justfile: &str, recipe: &str) -> BTreeSet<String> {
    let start = format!("{recipe}:");
    justfile
        .lines()
        .find(|l| l.starts_with(&start))
        .map(|l| {
            l[start.len()..]
                .split_whitespace()
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Everything missing for `s`, one message per place.
fn missing(s: &Names) -> Vec<String> {
    let mut out = Vec::new();
    let mut want = |ok: bool, place: &str, what: String| {
        if !ok {
            out.push(format!("{}: {place}: {what}", s.kebab));
        }
    };
    shipping(s, &mut want);
    operating(s, &mut want);
    out
}

/// The image, the chart and deploy/: what builds and installs the service.
fn shipping(s: &Names, want: &mut impl FnMut(bool, &str, String)) {
    let root = xtask::repo_root();
    let Names { kebab, camel, .. } = s;

    // 1. The image.
    let containerfile = read(&root.join("Containerfile"));
    want(
        containerfile.contains(&format!("FROM base AS {kebab}\n"))
            && containerfile.contains(&format!("ENTRYPOINT [\"/usr/local/bin/{kebab}\"]")),
        "Containerfile",
        format!(
            "add a stage `FROM base AS {kebab}` with EXPOSE of its ports and \
             `ENTRYPOINT [\"/usr/local/bin/{kebab}\"]`"
        ),
    );

    // 2. The chart.
    let chart = root.join("charts/plimsoll");
    let services_tpl = read(&chart.join("templates/_services.tpl"));
    want(
        services_tpl.contains(&format!("{{key: {camel}, name: {kebab}, port: ")),
        "charts/plimsoll/templates/_services.tpl",
        format!(
            "add `- {{key: {camel}, name: {kebab}, port: <admin port>}}` to plimsoll.services \
             (the Deployment, Service, ServiceMonitor and dashboard ConfigMap follow from it)"
        ),
    );
    let values = read(&chart.join("values.yaml"));
    want(
        values.lines().any(|l| l == format!("{camel}:")),
        "charts/plimsoll/values.yaml",
        format!("add a top-level `{camel}:` block (enabled, replicas, args, resources, …)"),
    );
    let schema: Value = serde_json::from_str(&read(&chart.join("values.schema.json"))).unwrap();
    want(
        schema["properties"].get(camel.as_str()).is_some(),
        "charts/plimsoll/values.schema.json",
        format!("add `properties.{camel}` describing the values block"),
    );
    want(
        chart
            .join(format!("templates/clusterrole-{kebab}.yaml"))
            .is_file(),
        "charts/plimsoll/templates",
        format!("add clusterrole-{kebab}.yaml with the rules the service needs"),
    );

    // 3. deploy/ (kustomize).
    let kustomization = read(&root.join("deploy/kustomization.yaml"));
    want(
        root.join(format!("deploy/{kebab}/deployment.yaml"))
            .is_file()
            && kustomization.contains(&format!("  - {kebab}/deployment.yaml\n")),
        "deploy/",
        format!(
            "add deploy/{kebab}/ (service-account, cluster-rbac, service, pdb, deployment) and \
             list its files in deploy/kustomization.yaml's resources"
        ),
    );
}

/// The dashboard, the alerts, the justfile and the release lists: what watches, measures and
/// releases the service.
fn operating(s: &Names, want: &mut impl FnMut(bool, &str, String)) {
    let root = xtask::repo_root();
    let chart = root.join("charts/plimsoll");
    let Names {
        kebab,
        pascal,
        snake,
        ..
    } = s;

    // 4. The dashboard.
    let dashboard = chart.join(format!("dashboards/{kebab}.json"));
    want(
        dashboard.is_file() && read(&dashboard).contains(&format!("plimsoll_{snake}_")),
        "charts/plimsoll/dashboards",
        format!(
            "add {kebab}.json, a Grafana dashboard of the plimsoll_{snake}_* metrics \
             (templates/dashboards.yaml ships it)"
        ),
    );

    // 5. The alerts.
    let alerts = read(&chart.join("rules/alerts.yaml"));
    want(
        alerts.contains(&format!("- name: plimsoll-{kebab}\n"))
            && alerts.contains(&format!("- alert: Plimsoll{pascal}Down\n"))
            && alerts.contains(&format!("plimsoll_{snake}_")),
        "charts/plimsoll/rules/alerts.yaml",
        format!(
            "add a group `plimsoll-{kebab}` with at least `Plimsoll{pascal}Down` on the \
             plimsoll_{snake}_* metrics, and a runbook entry in docs/runbooks.md"
        ),
    );

    // 6. The justfile.
    let justfile = read(&root.join("justfile"));
    want(
        justfile.contains(&format!("\nbench-{kebab}:"))
            && just_dependencies(&justfile, "bench").contains(&format!("bench-{kebab}")),
        "justfile",
        format!("add a `bench-{kebab}` recipe and name it in `bench:`'s dependencies"),
    );

    // 7. The release list.
    let release = read(&root.join("scripts/release"));
    want(
        bash_array(&release, "services").contains(kebab.as_str()),
        "scripts/release",
        format!("add {kebab} to `services=(…)`"),
    );
    let images = read(&root.join("scripts/images"));
    want(
        bash_array(&images, "all").contains(kebab.as_str())
            && images.contains(&format!("    {kebab}) echo ")),
        "scripts/images",
        format!("add {kebab} to `all=(…)` and a `{kebab}) echo \"…\"` line to describe()"),
    );
}

#[test]
fn every_service_is_in_every_place_that_ships_it() {
    let services = services();
    // The rule must find the services there are; an empty list would pass vacuously.
    assert!(
        services.len() >= 5,
        "the rule found only {:?}",
        services.iter().map(|s| &s.kebab).collect::<Vec<_>>()
    );
    let problems: Vec<String> = services.iter().flat_map(missing).collect();
    assert!(
        problems.is_empty(),
        "a service is missing from places that ship it (docs/architecture.md, \"How to add a \
         service\"):\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_release_lists_hold_exactly_the_services() {
    // A name left behind in a list after a service is removed or renamed breaks the release.
    let services: BTreeSet<String> = services().into_iter().map(|s| s.kebab).collect();
    let root = xtask::repo_root();
    for (file, array) in [("scripts/release", "services"), ("scripts/images", "all")] {
        let listed = bash_array(&read(&root.join(file)), array);
        let extra: Vec<_> = listed.difference(&services).collect();
        assert!(
            extra.is_empty(),
            "{file}: `{array}=(…)` lists {extra:?}, which are not services (crates/<name> \
             running the service skeleton): remove them"
        );
    }
}

#[test]
fn the_checklist_in_the_architecture_doc_names_the_places_this_test_checks() {
    let doc = read(&xtask::repo_root().join("docs/architecture.md"));
    let section = doc
        .split("## How to add a service")
        .nth(1)
        .expect("docs/architecture.md has a section \"How to add a service\"");
    let section = section.split("\n## ").next().unwrap_or(section);
    for place in [
        "Containerfile",
        "templates/_services.tpl",
        "values.yaml",
        "values.schema.json",
        "clusterrole-<name>.yaml",
        "deploy/<name>/",
        "deploy/kustomization.yaml",
        "dashboards/<name>.json",
        "rules/alerts.yaml",
        "justfile",
        "scripts/release",
        "scripts/images",
        "xtask/tests/xtask/services.rs",
    ] {
        assert!(
            section.contains(place),
            "docs/architecture.md, \"How to add a service\", does not name {place}"
        );
    }
}

#[test]
fn names_are_spelled_the_ways_the_places_use() {
    let n = Names::of("vpa-admission");
    assert_eq!(
        (n.camel.as_str(), n.pascal.as_str(), n.snake.as_str()),
        ("vpaAdmission", "VpaAdmission", "vpa_admission")
    );
    let n = Names::of("hpa-plus");
    assert_eq!(
        (n.camel.as_str(), n.pascal.as_str()),
        ("hpaPlus", "HpaPlus")
    );
}

#[test]
fn a_service_missing_everywhere_gets_one_message_per_place() {
    // The check must be able to fail: a service that exists nowhere misses every place.
    let problems = missing(&Names::of("no-such-service"));
    assert_eq!(problems.len(), 11, "{problems:#?}");
    assert!(problems.iter().all(|p| p.starts_with("no-such-service: ")));
    assert!(problems.iter().any(|p| p.contains("NoSuchServiceDown")));
}

/// What only `plimsoll_runtime::watch` may call: kube's watchers, a raw watch request, and
/// kube's `Controller::new` (which builds a watcher of its own; a service hands
/// `Controller::for_stream` a `Watch`'s events instead).
const RAW_WATCHES: [&str; 3] = ["watcher(", "watch_object(", "WatchParams"];

/// The lines of `source` (a file's text) that watch without `plimsoll_runtime::watch`, with
/// their line numbers. Comments do not count; `Controller::new(` counts only in a file that
/// uses kube's controller (cron-hpa's replay has a `Controller` of its own).
fn raw_watches(source: &str) -> Vec<(usize, String)> {
    let kube_controller = source.contains("kube::runtime::controller")
        || source.contains("kube::runtime::Controller");
    source
        .lines()
        .enumerate()
        .filter(|(_, line)| {
            let code = line.trim_start();
            !code.starts_with("//")
                && (RAW_WATCHES.iter().any(|p| code.contains(p))
                    || (kube_controller && code.contains("Controller::new(")))
        })
        .map(|(i, line)| (i + 1, line.trim().to_owned()))
        .collect()
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

#[test]
fn only_the_runtime_watches_the_api_server() {
    // Every watch goes through plimsoll_runtime::watch: one backoff, one log and metric
    // policy, one way to report the first list and to stop (docs/architecture.md, "Watches").
    let crates = xtask::repo_root().join("crates");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let dir = entry.unwrap().path();
        if dir.file_name().is_some_and(|n| n != "runtime") && dir.join("src").is_dir() {
            rust_files(&dir.join("src"), &mut files);
        }
    }
    assert!(
        files.len() > 50,
        "found only {} files under crates/",
        files.len()
    );
    let found: Vec<String> = files
        .iter()
        .flat_map(|file| {
            let shown = file
                .strip_prefix(&crates)
                .unwrap_or(file)
                .display()
                .to_string();
            raw_watches(&read(file))
                .into_iter()
                .map(move |(n, line)| format!("crates/{shown}:{n}: {line}"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "watch through plimsoll_runtime::watch::Watch (run, reflect, or events for \
         Controller::for_stream), not kube's watcher:\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn the_watch_rule_finds_what_it_forbids() {
    let source = "use kube::runtime::controller::Controller;\n\
                  // watcher(api, config) in a comment is fine\n\
                  let s = watcher(api, watcher::Config::default()).default_backoff();\n\
                  let c = Controller::new(api, config);\n\
                  let w = api.watch(&WatchParams::default(), \"0\");\n\
                  let s = Watch::new(\"Pod\", api).events();\n";
    let lines: Vec<usize> = raw_watches(source).into_iter().map(|(n, _)| n).collect();
    assert_eq!(lines, [3, 4, 5]);
    // Another crate's `Controller` is not kube's.
    assert!(raw_watches("let c = Controller::new(uid, grace, spec, from);").is_empty());
}
