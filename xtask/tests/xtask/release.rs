//! The release process (`scripts/release`, docs/release.md) without building anything: the
//! refusals, the chart package's layout, the plugin tarball and the krew manifest, and the support
//! policy against the chart's `kubeVersion` and the sim's Kubernetes version. The script is bash
//! (it drives cargo, buildah and tar); these tests run its steps one by one on small inputs.

// A test binary: a failed check panics with the reason, including in its helper functions.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A fresh directory of this test's own, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "plimsoll-release-test-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.0.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `scripts/release ARGS` with a fixed time for reproducible archives.
fn release(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut command = Command::new(xtask::repo_root().join("scripts/release"));
    command.args(args).env("SOURCE_DATE_EPOCH", "1700000000");
    command.env_remove("PLIMSOLL_RELEASE_CHANGELOG");
    command.env_remove("PLIMSOLL_RELEASE_CHART");
    command.env_remove("PLIMSOLL_RELEASE_DEPLOY");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("run scripts/release")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs ARGS and insists on success; returns stdout.
fn release_ok(args: &[&str], env: &[(&str, &Path)]) -> String {
    let out = release(args, env);
    assert!(
        out.status.success(),
        "scripts/release {args:?}: {}\n{}",
        out.status,
        stderr(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs ARGS and insists on exit status 1 with a message containing `reason`.
fn refused(args: &[&str], env: &[(&str, &Path)], reason: &str) {
    let out = release(args, env);
    assert_eq!(
        out.status.code(),
        Some(1),
        "scripts/release {args:?} should refuse ({reason}): {}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains(reason),
        "scripts/release {args:?}: expected {reason:?} in: {}",
        stderr(&out)
    );
}

/// `[workspace.package]`'s `KEY = "…"` in Cargo.toml.
fn workspace_field(key: &str) -> String {
    let toml = read(&xtask::repo_root().join("Cargo.toml"));
    let section = toml
        .split("[workspace.package]")
        .nth(1)
        .expect("[workspace.package]");
    let prefix = format!("{key} = \"");
    section
        .lines()
        .take_while(|l| !l.starts_with('['))
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap_or_else(|| panic!("no {key} in [workspace.package]"))
        .to_owned()
}

fn yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("invalid YAML: {e}\n{text}"))
}

/// "1.33" from `>=1.33.0-0`.
fn minor_of_lower_bound(kube_version: &str) -> String {
    let bound = kube_version
        .strip_prefix(">=")
        .unwrap_or_else(|| panic!("kubeVersion {kube_version:?} is not a lower bound"))
        .trim();
    let mut parts = bound.split('.');
    let (major, minor) = (parts.next().unwrap(), parts.next().unwrap());
    format!("{major}.{minor}")
}

/// The value after `label` in docs/release.md, between `**`: "Minimum Kubernetes version: **1.33**".
fn policy_value(doc: &str, label: &str) -> String {
    let line = doc
        .lines()
        .find_map(|l| l.trim_start_matches("- ").strip_prefix(label))
        .unwrap_or_else(|| panic!("docs/release.md has no line starting {label:?}"));
    line.trim()
        .strip_prefix("**")
        .and_then(|rest| rest.split("**").next())
        .unwrap_or_else(|| panic!("{label:?} is not followed by a **value**"))
        .to_owned()
}

#[test]
fn support_policy_matches_the_chart_and_the_tested_api() {
    let chart = yaml(&read(
        &xtask::repo_root().join("charts/plimsoll/Chart.yaml"),
    ));
    let kube_version = chart["kubeVersion"]
        .as_str()
        .expect("Chart.yaml kubeVersion");
    let doc = read(&xtask::repo_root().join("docs/release.md"));

    let minimum = policy_value(&doc, "Minimum Kubernetes version:");
    assert_eq!(
        minimum,
        minor_of_lower_bound(kube_version),
        "docs/release.md's minimum Kubernetes version and Chart.yaml's kubeVersion {kube_version:?}"
    );
    assert!(
        doc.contains(&format!("`kubeVersion: \"{kube_version}\"`")),
        "docs/release.md quotes the chart's kubeVersion {kube_version:?} as it is"
    );

    // "Tested" is the Kubernetes API the end-to-end suite runs against: the sim's.
    let sim = read(&xtask::repo_root().join("e2e/sim/src/lib.rs"));
    let sim_minor = sim
        .lines()
        .find_map(|l| l.strip_prefix("pub const KUBERNETES_MINOR: &str = \""))
        .and_then(|rest| rest.strip_suffix("\";"))
        .expect("KUBERNETES_MINOR in e2e/sim/src/lib.rs");
    let tested = policy_value(&doc, "Tested:");
    assert_eq!(
        tested,
        format!("1.{sim_minor}"),
        "docs/release.md's tested minor"
    );
    let minor = |v: &str| -> u32 { v.split('.').nth(1).unwrap().parse().unwrap() };
    assert!(
        minor(&tested) >= minor(&minimum),
        "the tested minor {tested} is below the supported minimum {minimum}"
    );
}

#[test]
fn refuses_what_is_not_a_release() {
    let scratch = Scratch::new("check");
    let version = workspace_field("version");
    let changelog = scratch.write(
        "CHANGELOG.md",
        &format!(
            "# Changelog\n\n## [Unreleased]\n\n## [{version}] - 2026-01-01\n\n### Added\n\n- x\n"
        ),
    );
    let env = [("PLIMSOLL_RELEASE_CHANGELOG", changelog.as_path())];

    // The one that passes: the workspace's version, a section for it, the real chart.
    let ok = release_ok(&["check", &version], &env);
    assert!(ok.contains("checks passed"), "{ok}");

    for bad in [
        "0.2", "1", "01.2.0", "1.02.0", "0.2.0-01", "0.2.0-", "0.2.0+", "0.2.0.1", "x.y.z", "",
    ] {
        refused(&["check", bad], &env, "is not a SemVer version");
    }
    refused(
        &["check", &format!("v{version}")],
        &env,
        "without the leading v",
    );
    refused(&["check", &format!("{version}-rc.1")], &env, "section");

    // A changelog that mentions the version only as a prefix of another, or not as a heading.
    let only_rc = scratch.write(
        "rc/CHANGELOG.md",
        &format!("# Changelog\n\n## [{version}-rc.1]\n\nSee [{version}] later.\n"),
    );
    refused(
        &["check", &version],
        &[("PLIMSOLL_RELEASE_CHANGELOG", only_rc.as_path())],
        &format!("no \"## [{version}]\" section"),
    );
    // The real CHANGELOG.md is checked when no override is given (and it may or may not have the
    // section); a missing file is an error of its own.
    refused(
        &["check", &version],
        &[(
            "PLIMSOLL_RELEASE_CHANGELOG",
            scratch.0.join("missing.md").as_path(),
        )],
        "no changelog",
    );

    // Another version than the workspace's: its section exists, Cargo.toml disagrees.
    let other = scratch.write("other/CHANGELOG.md", "## [99.0.0]\n");
    refused(
        &["check", "99.0.0"],
        &[("PLIMSOLL_RELEASE_CHANGELOG", other.as_path())],
        "Cargo.toml [workspace.package] version",
    );

    // The chart's kubeVersion against the support policy.
    let chart = read(&xtask::repo_root().join("charts/plimsoll/Chart.yaml"));
    let older = scratch.write(
        "older/Chart.yaml",
        &chart.replace("kubeVersion: \">=1.", "kubeVersion: \">=0."),
    );
    assert_ne!(read(&older), chart, "the chart's kubeVersion was rewritten");
    refused(
        &["check", &version],
        &[
            ("PLIMSOLL_RELEASE_CHANGELOG", changelog.as_path()),
            ("PLIMSOLL_RELEASE_CHART", older.parent().unwrap()),
        ],
        "support policy",
    );
    let range = scratch.write(
        "range/Chart.yaml",
        "apiVersion: v2\nname: plimsoll\nversion: 0.1.0\nkubeVersion: \">=1.33.0-0 <1.36.0-0\"\n",
    );
    refused(
        &["check", &version],
        &[
            ("PLIMSOLL_RELEASE_CHANGELOG", changelog.as_path()),
            ("PLIMSOLL_RELEASE_CHART", range.parent().unwrap()),
        ],
        "not a plain lower bound",
    );
}

#[test]
fn refuses_a_chart_or_deploy_on_another_version() {
    let scratch = Scratch::new("images");
    let version = workspace_field("version");
    let changelog = scratch.write("CHANGELOG.md", &format!("## [{version}] - 2026-01-01\n"));
    let chart = read(&xtask::repo_root().join("charts/plimsoll/Chart.yaml"));
    // The chart and deploy/ run the images of the version being released.
    let behind = scratch.write(
        "behind/Chart.yaml",
        &chart.replace(
            &format!("appVersion: \"{version}\""),
            "appVersion: \"0.0.1\"",
        ),
    );
    assert_ne!(read(&behind), chart, "the chart's appVersion was rewritten");
    refused(
        &["check", &version],
        &[
            ("PLIMSOLL_RELEASE_CHANGELOG", changelog.as_path()),
            ("PLIMSOLL_RELEASE_CHART", behind.parent().unwrap()),
        ],
        "appVersion 0.0.1, not",
    );
    let deployment = read(&xtask::repo_root().join("deploy/hpa-plus/deployment.yaml"));
    let stale = scratch.write(
        "deploy/hpa-plus/deployment.yaml",
        &deployment.replace(&format!("hpa-plus:{version}"), "hpa-plus:0.0.1"),
    );
    assert_ne!(read(&stale), deployment, "the image was rewritten");
    refused(
        &["check", &version],
        &[
            ("PLIMSOLL_RELEASE_CHANGELOG", changelog.as_path()),
            (
                "PLIMSOLL_RELEASE_DEPLOY",
                scratch.0.join("deploy").as_path(),
            ),
        ],
        "hpa-plus:0.0.1",
    );
}

/// `tar -tzf`: the archive's entries.
fn entries(archive: &Path) -> Vec<String> {
    let out = Command::new("tar")
        .arg("-tzf")
        .arg(archive)
        .output()
        .expect("run tar");
    assert!(out.status.success(), "tar -tzf {}", archive.display());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// One file of the archive, as text.
fn member(archive: &Path, name: &str) -> String {
    let out = Command::new("tar")
        .arg("-xzOf")
        .arg(archive)
        .arg(name)
        .output()
        .expect("run tar");
    assert!(out.status.success(), "{name} in {}", archive.display());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn chart_package_is_laid_out_as_helm_package() {
    let scratch = Scratch::new("chart");
    let chart = scratch.0.join("src");
    scratch.write(
        "src/Chart.yaml",
        "apiVersion: v2\nname: tiny\nversion: 0.0.1\nkubeVersion: \">=1.33.0-0\"\n",
    );
    scratch.write("src/values.yaml", "a: 1\n");
    scratch.write("src/README.md", "# tiny\n");
    scratch.write("src/templates/a.yaml", "kind: ConfigMap\n");
    scratch.write(
        "src/templates/_helpers.tpl",
        "{{- define \"x\" -}}{{- end -}}\n",
    );
    scratch.write("src/crds/c.yaml", "kind: CustomResourceDefinition\n");
    scratch.write("src/templates/old.yaml.bak", "x\n");
    scratch.write("src/scratch/notes.txt", "x\n");
    scratch.write("src/.helmignore", "# comment\n*.bak\nscratch/\n");
    let out = scratch.0.join("out");
    let printed = release_ok(
        &[
            "chart",
            "1.2.3-rc.1",
            chart.to_str().unwrap(),
            out.to_str().unwrap(),
        ],
        &[],
    );
    let archive = out.join("tiny-1.2.3-rc.1.tgz");
    assert_eq!(printed.trim(), archive.to_str().unwrap());

    let names: BTreeSet<String> = entries(&archive).into_iter().collect();
    let expected: BTreeSet<String> = [
        "tiny/.helmignore",
        "tiny/Chart.yaml",
        "tiny/README.md",
        "tiny/crds/c.yaml",
        "tiny/templates/_helpers.tpl",
        "tiny/templates/a.yaml",
        "tiny/values.yaml",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(
        names, expected,
        "files under the chart's name, .helmignore honoured"
    );

    let chart_yaml = yaml(&member(&archive, "tiny/Chart.yaml"));
    assert_eq!(chart_yaml["version"], "1.2.3-rc.1");
    assert_eq!(
        chart_yaml["appVersion"], "1.2.3-rc.1",
        "appVersion added, as a string"
    );
    assert_eq!(chart_yaml["kubeVersion"], ">=1.33.0-0", "the rest kept");
    assert_eq!(
        member(&archive, "tiny/templates/a.yaml"),
        "kind: ConfigMap\n"
    );

    // The same input and time give the same bytes.
    let first = std::fs::read(&archive).unwrap();
    release_ok(
        &[
            "chart",
            "1.2.3-rc.1",
            chart.to_str().unwrap(),
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(first, std::fs::read(&archive).unwrap(), "reproducible");

    refused(
        &[
            "chart",
            "1.2",
            chart.to_str().unwrap(),
            out.to_str().unwrap(),
        ],
        &[],
        "SemVer",
    );
}

/// Every file under `dir`, as `plimsoll/<path relative to root>`.
fn walk(dir: &Path, root: &Path, files: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, root, files);
        } else {
            let rel = path.strip_prefix(root).unwrap().to_str().unwrap();
            files.insert(format!("plimsoll/{rel}"));
        }
    }
}

/// Every file of the real chart, whatever it holds today, is in its package under `plimsoll/`.
#[test]
fn real_chart_packages_every_file() {
    let scratch = Scratch::new("real-chart");
    let chart = xtask::repo_root().join("charts/plimsoll");
    release_ok(
        &[
            "chart",
            "9.8.7",
            chart.to_str().unwrap(),
            scratch.0.to_str().unwrap(),
        ],
        &[],
    );
    let archive = scratch.0.join("plimsoll-9.8.7.tgz");
    let names: BTreeSet<String> = entries(&archive).into_iter().collect();

    let mut expected = BTreeSet::new();
    walk(&chart, &chart, &mut expected);
    if chart.join(".helmignore").exists() {
        // Patterns are the script's to apply; every packaged file must still exist in the chart.
        assert!(names.is_subset(&expected), "{names:?}");
    } else {
        assert_eq!(names, expected);
    }
    assert!(names.contains("plimsoll/values.yaml") && names.contains("plimsoll/Chart.yaml"));
    let chart_yaml = yaml(&member(&archive, "plimsoll/Chart.yaml"));
    assert_eq!(chart_yaml["name"], "plimsoll");
    assert_eq!(chart_yaml["version"], "9.8.7");
    assert_eq!(chart_yaml["appVersion"], "9.8.7");
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("run sha256sum");
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn plugin_tarballs_and_krew_manifest() {
    let scratch = Scratch::new("plugin");
    let out = scratch.0.join("dist");
    let version = "1.2.3";
    for (arch, body) in [
        ("amd64", "#!/bin/sh\necho amd64\n"),
        ("arm64", "#!/bin/sh\necho arm64\n"),
    ] {
        let binary = scratch.write(&format!("{arch}/kubectl-plimsoll"), body);
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o700);
        std::fs::set_permissions(&binary, mode).unwrap();
        release_ok(
            &[
                "plugin",
                version,
                arch,
                binary.to_str().unwrap(),
                out.to_str().unwrap(),
            ],
            &[],
        );
        let tarball = out.join(format!("kubectl-plimsoll_{version}_linux_{arch}.tar.gz"));
        assert_eq!(
            entries(&tarball),
            ["LICENSE", "kubectl-plimsoll"],
            "binary and licence at the top"
        );
        assert_eq!(member(&tarball, "kubectl-plimsoll"), body);
        let licence = read(&xtask::repo_root().join("LICENSE"));
        assert_eq!(member(&tarball, "LICENSE"), licence);
        let listing = Command::new("tar")
            .arg("-tvzf")
            .arg(&tarball)
            .output()
            .unwrap();
        let listing = String::from_utf8(listing.stdout).unwrap();
        let plugin_line = listing
            .lines()
            .find(|l| l.ends_with("kubectl-plimsoll"))
            .unwrap();
        assert!(
            plugin_line.starts_with("-rwxr-xr-x 0/0"),
            "executable by all, owned by root: {plugin_line}"
        );
    }
    refused(
        &[
            "plugin",
            version,
            "riscv64",
            "/bin/true",
            out.to_str().unwrap(),
        ],
        &[],
        "not amd64 or arm64",
    );

    let printed = release_ok(&["krew", version, out.to_str().unwrap()], &[]);
    let manifest_path = out.join("plimsoll.yaml");
    assert_eq!(printed.trim(), manifest_path.to_str().unwrap());
    let manifest = yaml(&read(&manifest_path));
    assert_eq!(
        manifest["apiVersion"],
        "krew.googlecontainertools.github.com/v1alpha2"
    );
    assert_eq!(manifest["kind"], "Plugin");
    assert_eq!(manifest["metadata"]["name"], "plimsoll");
    let spec = &manifest["spec"];
    assert_eq!(
        spec["version"],
        format!("v{version}"),
        "krew wants a v-prefixed SemVer"
    );
    let url = workspace_field("repository");
    assert_eq!(spec["homepage"], url.as_str());
    assert!(
        spec["shortDescription"]
            .as_str()
            .is_some_and(|d| !d.is_empty() && d.len() < 80)
    );
    let platforms = spec["platforms"].as_array().expect("platforms");
    let mut arches = Vec::new();
    for platform in platforms {
        let labels = &platform["selector"]["matchLabels"];
        assert_eq!(labels["os"], "linux");
        let arch = labels["arch"].as_str().unwrap().to_owned();
        let file = format!("kubectl-plimsoll_{version}_linux_{arch}.tar.gz");
        assert_eq!(
            platform["uri"],
            format!("{url}/releases/download/v{version}/{file}"),
            "the GitHub release asset"
        );
        assert_eq!(platform["sha256"], sha256(&out.join(&file)), "{file}");
        assert_eq!(platform["bin"], "kubectl-plimsoll");
        arches.push(arch);
    }
    assert_eq!(arches, ["amd64", "arm64"]);

    // No tarball of that version: no manifest.
    refused(
        &["krew", "3.0.0", out.to_str().unwrap()],
        &[],
        "no kubectl-plimsoll_3.0.0",
    );
}
