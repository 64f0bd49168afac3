//! Every reference a reader follows resolves: the relative links (and their `#anchors`) of the
//! README, the CHANGELOG and docs/, and every repository path they or a service's `--help` name.
//! A renamed file or heading breaks a doc silently otherwise; this makes it a failing test.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Top-level directories whose paths docs and help texts name.
const ROOTS: [&str; 10] = [
    "crates/",
    "e2e/",
    "deploy/",
    "docs/",
    "scenarios/",
    "charts/",
    "xtask/",
    "scripts/",
    "fuzz/",
    ".ci/",
];

/// kubectl verbs after which `deploy/NAME` is a resource.
const KUBECTL_VERBS: [&str; 6] = [
    "logs",
    "port-forward",
    "describe",
    "exec",
    "restart",
    "status",
];

/// Build output a doc may name, which a clean checkout does not have.
const BUILT: [&str; 1] = ["fuzz/target"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits in the repository")
        .to_owned()
}

/// The Markdown files a reader is pointed at, relative to the repository.
fn documents() -> Vec<PathBuf> {
    let root = repo();
    let mut files = vec![PathBuf::from("README.md"), PathBuf::from("CHANGELOG.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| {
            p.strip_prefix(&root)
                .expect("under the repository")
                .to_owned()
        })
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The text outside fenced code blocks (commands and output there are not links).
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(markdown: &str) -> BTreeSet<String> {
    prose(markdown)
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect()
}

/// The targets of `[text](target)` links.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find(')') {
            let target = &rest[..end];
            if !target.contains(char::is_whitespace) {
                out.push(target.to_owned());
            }
        }
    }
    out
}

/// Repository paths named in `text` (`docs/vpa.md`, `crates/core/src/stored.rs:12`), without a
/// line suffix or trailing punctuation; placeholders and globs are not paths.
fn paths(text: &str) -> Vec<String> {
    let is_path_char = |c: char| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-');
    let mut out = Vec::new();
    for (at, _) in text.match_indices('/') {
        let start = text[..at].rfind(|c: char| !is_path_char(c)).map_or(0, |i| {
            i + text[i..].chars().next().map_or(1, char::len_utf8)
        });
        let candidate: String = text[start..]
            .chars()
            .take_while(|&c| is_path_char(c))
            .collect();
        if !ROOTS.iter().any(|r| candidate.starts_with(r)) || out.contains(&candidate) {
            continue;
        }
        let after = text[start + candidate.len()..].chars().next();
        if matches!(after, Some('<' | '*' | '…' | '{' | '$')) {
            continue;
        }
        // `kubectl logs deploy/plimsoll-hpa-plus` names a Deployment, not a file.
        let previous = text[..start]
            .split_whitespace()
            .next_back()
            .unwrap_or_default();
        if KUBECTL_VERBS.contains(&previous) {
            continue;
        }
        let trimmed = candidate.trim_end_matches(['.', ',', ';', ':']).to_owned();
        out.push(trimmed);
    }
    out.sort();
    out.dedup();
    out
}

fn exists(path: &str) -> bool {
    BUILT.iter().any(|b| path.starts_with(b)) || repo().join(path).exists()
}

#[test]
fn every_relative_link_and_anchor_in_the_docs_resolves() {
    let root = repo();
    let mut broken = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(root.join(&doc)).expect("readable");
        for target in links(&prose(&text)) {
            if target.starts_with("http://")
                || target.starts_with("https://")
                || target.starts_with("mailto:")
            {
                continue;
            }
            let (path, fragment) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap_or(Path::new("")).join(path)
            };
            let Ok(resolved) = root.join(&file).canonicalize() else {
                broken.push(format!("{}: {target} (no such file)", doc.display()));
                continue;
            };
            if !fragment.is_empty() && resolved.extension().is_some_and(|e| e == "md") {
                let linked = std::fs::read_to_string(&resolved).expect("readable");
                if !anchors(&linked).contains(fragment) {
                    broken.push(format!("{}: {target} (no such heading)", doc.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_repository_path_the_docs_name_exists() {
    let root = repo();
    let mut missing = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(root.join(&doc)).expect("readable");
        for path in paths(&prose(&text)) {
            if !exists(&path) {
                missing.push(format!("{}: {path}", doc.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths that do not exist:\n{}",
        missing.join("\n")
    );
}

/// Every command's and subcommand's long help.
fn help_texts(mut command: clap::Command) -> Vec<String> {
    let mut texts = vec![command.render_long_help().to_string()];
    for sub in command.get_subcommands() {
        texts.extend(help_texts(sub.clone()));
    }
    texts
}

#[test]
fn every_repository_path_a_help_text_names_exists() {
    use clap::CommandFactory;
    let commands = [
        ("hpa-plus", plimsoll_hpa_plus::cli::Args::command()),
        ("cron-hpa", plimsoll_cron_hpa::cli::Args::command()),
        (
            "vpa-recommender",
            plimsoll_vpa_recommender::cli::Args::command(),
        ),
        ("vpa-updater", plimsoll_vpa_updater::cli::Args::command()),
        (
            "vpa-admission",
            plimsoll_vpa_admission::cli::Args::command(),
        ),
    ];
    let mut missing = Vec::new();
    let mut named = 0;
    for (service, command) in commands {
        for text in help_texts(command) {
            for path in paths(&text) {
                named += 1;
                if !exists(&path) {
                    missing.push(format!("{service} --help: {path}"));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths that do not exist:\n{}",
        missing.join("\n")
    );
    // The help texts do name files (docs pages): the scan found them.
    assert!(named > 0, "no path found in any help text");
}

#[test]
fn the_scanners_find_what_a_reader_would_follow() {
    let text = "See [ops](operations.md#rbac), `crates/core/src/stored.rs:12`, docs/vpa.md, and \
                `deploy/<service>/*.yaml` or crates/*/tests; kubectl logs deploy/plimsoll-x.";
    assert_eq!(links(text), ["operations.md#rbac"]);
    assert_eq!(paths(text), ["crates/core/src/stored.rs", "docs/vpa.md"]);
    assert_eq!(
        anchor("Upgrading: VPAs with such policies"),
        "upgrading-vpas-with-such-policies"
    );
    assert_eq!(
        anchor(" Namespace users (`userRoles.enabled`, on by default)"),
        "namespace-users-userrolesenabled-on-by-default"
    );
    assert_eq!(prose("a\n```\n[x](y)\n```\nb\n"), "a\nb\n");
}
