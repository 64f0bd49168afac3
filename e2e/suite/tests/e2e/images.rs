//! The vpa-admission image, built as `just images` builds every image (scripts/images and the
//! repository's Containerfile) and run with buildah: a missing library, a broken entrypoint or
//! a shell that crept in fails here. Checked: the image config (user, entrypoint, OCI labels),
//! its files, `--help` from the image, the webhook from the image patching a pod the sim
//! admits over TLS, and its exit status after SIGTERM.
//!
//! The image is built from the debug binary this test build already has
//! (`target/debug/vpa-admission`, built by `cargo test --workspace` because the
//! vpa-admission crate has integration tests); when it is not there, scripts/images builds it
//! with `--profile dev`. Never a dist build: that takes minutes. (Run alone with
//! `cargo test -p plimsoll-e2e --test e2e images::`, the binary is whatever the last build left;
//! `cargo build -p plimsoll-vpa-admission` first after changing the webhook.)
//!
//! Buildah runs daemonless with the vfs driver and its storage under the target directory, so
//! nothing depends on /var/lib/containers; every run uses its own image and container names and
//! removes them at the end. Without buildah the test is skipped, saying why, except when `CI` is
//! set: there a missing buildah fails it.
//!
//! `buildah run --isolation chroot` keeps the host's network, so the webhook in the image
//! reaches the in-process plimsoll-sim on 127.0.0.1 and the sim calls it back there over TLS.

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_e2e::{Env, eventually, free_address};
use plimsoll_sim::ServiceAddress;
use serde_json::{Value, json};

const COMPONENT: &str = "vpa-admission";
const SERVICE: &str = "plimsoll-vpa-admission";
const WAIT: Duration = Duration::from_secs(60);
const EVERY: Duration = Duration::from_millis(200);

/// buildah with this test's storage: vfs, under the target directory.
struct Buildah {
    root: PathBuf,
    runroot: PathBuf,
}

impl Buildah {
    /// `None` (after saying why) when buildah is not installed; an error instead when `CI` is
    /// set, so CI cannot pass without running the image.
    fn find(target: &Path) -> anyhow::Result<Option<Buildah>> {
        if Command::new("buildah")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            let storage = target.join("buildah-test");
            return Ok(Some(Buildah {
                root: storage.join("root"),
                runroot: storage.join("runroot"),
            }));
        }
        if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
            bail!(
                "buildah is not installed and CI is set: .ci/run installs it (apt-get install buildah)"
            );
        }
        println!("skipped: buildah is not installed (Debian: apt-get install buildah)");
        Ok(None)
    }

    /// The storage flags, also passed to scripts/images.
    fn storage_args(&self) -> Vec<String> {
        vec![
            "--root".to_owned(),
            self.root.display().to_string(),
            "--runroot".to_owned(),
            self.runroot.display().to_string(),
        ]
    }

    fn command(&self) -> Command {
        let mut command = Command::new("buildah");
        command
            .arg("--storage-driver=vfs")
            .args(self.storage_args());
        command
    }

    /// Runs `buildah ARGS…` and returns its stdout; an error carrying stderr when it fails.
    fn output(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = self
            .command()
            .args(args)
            .output()
            .with_context(|| format!("run buildah {args:?}"))?;
        ensure!(
            out.status.success(),
            "buildah {args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8(out.stdout)?)
    }
}

/// An image and a working container made from it, both removed on drop.
struct Image<'a> {
    buildah: &'a Buildah,
    name: String,
    container: String,
}

impl Drop for Image<'_> {
    fn drop(&mut self) {
        let _ = self.buildah.output(&["rm", &self.container]);
        let _ = self.buildah.output(&["rmi", "--force", &self.name]);
    }
}

/// The target directory and profile directory of this test executable
/// (`<target>/<profile>/deps/images-<hash>`).
fn target_dirs() -> anyhow::Result<(PathBuf, PathBuf)> {
    let exe = std::env::current_exe()?;
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .context("test executable outside a target directory")?;
    let target = profile_dir.parent().context("no target directory")?;
    Ok((target.to_path_buf(), profile_dir.to_path_buf()))
}

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A name no other run uses (process id and clock).
fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// Builds the vpa-admission image with scripts/images and creates a working container.
fn build_image<'a>(
    buildah: &'a Buildah,
    target: &Path,
    profile_dir: &Path,
) -> anyhow::Result<Image<'a>> {
    let repository = unique("localhost/plimsoll-e2e");
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev",
        Some(other) => other,
    };
    let mut script = Command::new(repository_root().join("scripts/images"));
    script
        .env("CARGO_TARGET_DIR", target)
        .env("STORAGE_DRIVER", "vfs")
        .args(["--profile", profile, "--only", COMPONENT])
        .args(["--repository", &repository, "--tag", "test"])
        .args(buildah.storage_args());
    if profile_dir.join(COMPONENT).is_file() {
        println!("image from {}", profile_dir.join(COMPONENT).display());
        script.arg("--no-build");
    }
    let out = script.output().context("run scripts/images")?;
    ensure!(
        out.status.success(),
        "scripts/images: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let name = format!("{repository}/{COMPONENT}:test");
    let container = unique("plimsoll-e2e-vpa-admission");
    let image = Image {
        buildah,
        name,
        container,
    };
    buildah.output(&["from", "--name", &image.container, &image.name])?;
    Ok(image)
}

/// The image's config: a non-root numeric user, the binary as entrypoint, the OCI labels.
fn check_config(image: &Image<'_>) -> anyhow::Result<()> {
    let inspect: Value = serde_json::from_str(&image.buildah.output(&[
        "inspect",
        "--type",
        "image",
        &image.name,
    ])?)?;
    let config = &inspect["OCIv1"]["config"];
    assert_eq!(config["User"], "65532:65532");
    assert_eq!(
        config["Entrypoint"],
        json!(["/usr/local/bin/vpa-admission"])
    );
    let labels = &config["Labels"];
    assert_eq!(labels["org.opencontainers.image.title"], COMPONENT);
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    assert_eq!(
        labels["org.opencontainers.image.source"],
        "https://github.com/plimsoll-dev/plimsoll"
    );
    assert!(
        labels["org.opencontainers.image.description"]
            .as_str()
            .is_some_and(|d| d.contains("webhook")),
        "{labels}"
    );
    Ok(())
}

/// Every file in the image: the binary and shared objects under /lib and /lib64, nothing else
/// (no shell, no /etc). That the libraries are the right ones, the dynamic loader included,
/// shows when the binary runs from the image.
fn check_files(image: &Image<'_>) -> anyhow::Result<()> {
    let mountpoint = image.buildah.output(&["mount", &image.container])?;
    let root = PathBuf::from(mountpoint.trim());
    let files = list_files(&root, &root);
    image.buildah.output(&["umount", &image.container])?;
    let files = files?;
    assert!(files.contains("usr/local/bin/vpa-admission"), "{files:?}");
    for file in &files {
        assert!(
            file == "usr/local/bin/vpa-admission"
                || ((file.starts_with("lib/") || file.starts_with("lib64/"))
                    && file.contains(".so")),
            "unexpected file {file} in the image"
        );
    }
    assert!(!root.join("bin/sh").exists());
    Ok(())
}

/// Files (not directories) under `dir`, relative to `root`.
fn list_files(root: &Path, dir: &Path) -> anyhow::Result<BTreeSet<String>> {
    let mut files = BTreeSet::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            files.extend(list_files(root, &path)?);
        } else {
            files.insert(path.strip_prefix(root)?.display().to_string());
        }
    }
    Ok(files)
}

/// `vpa-admission --help`, run from the image.
fn check_help(image: &Image<'_>) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let help = image.buildah.output(&[
        "run",
        "--isolation",
        "chroot",
        &image.container,
        "--",
        "/usr/local/bin/vpa-admission",
        "--help",
    ])?;
    let took = started.elapsed();
    assert!(help.contains("Usage: vpa-admission"), "{help}");
    for flag in [
        "--tls-cert-file",
        "--self-signed",
        "--register-webhook",
        "--kubeconfig",
        "--metrics-address",
    ] {
        assert!(help.contains(flag), "--help does not name {flag}:\n{help}");
    }
    Ok(took)
}

/// The webhook running in the image, its output going to `log`. `buildah run` does not pass
/// SIGTERM on (it kills the process), so [`Running::stop`] signals the process itself, as a
/// container runtime signals a container's process; dropping it kills what is left.
struct Running {
    child: Child,
    log: PathBuf,
}

impl Running {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends SIGTERM to the service inside `buildah run` and waits for `buildah run` to end
    /// with the service's exit status.
    fn stop(mut self) -> anyhow::Result<std::process::ExitStatus> {
        let pid = descendant_named(self.child.id(), COMPONENT)
            .context("no vpa-admission process under buildah run")?;
        signal("-TERM", pid);
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("vpa-admission did not exit within 15 s of SIGTERM")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SIGTERM to buildah itself kills the process in the container.
            signal("-TERM", self.child.id());
            std::thread::sleep(Duration::from_secs(1));
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn signal(signal: &str, pid: u32) {
    let _ = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status();
}

/// The parent pid and command name of a `/proc/<pid>/stat` line ("pid (comm) state ppid …").
/// The name may hold spaces and parentheses, so it ends at the last ')'.
fn parent_and_name(stat: &str) -> Option<(u32, String)> {
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_owned();
    let parent = rest.split_whitespace().nth(1)?.parse().ok()?;
    Some((parent, name))
}

/// A process under `root` (child, grandchild, …) whose command name is `name`, from /proc.
fn descendant_named(root: u32, name: &str) -> Option<u32> {
    let mut processes = Vec::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Some((parent_pid, comm)) = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .as_deref()
            .and_then(parent_and_name)
        else {
            continue;
        };
        processes.push((pid, parent_pid, comm));
    }
    let mut tree = vec![root];
    let mut i = 0;
    while let Some(&ancestor) = tree.get(i) {
        for (pid, parent_pid, comm) in &processes {
            if *parent_pid == ancestor {
                if comm == name {
                    return Some(*pid);
                }
                tree.push(*pid);
            }
        }
        i += 1;
    }
    None
}

/// Addresses and files for the webhook in the image.
struct Serve<'a> {
    image: &'a Image<'a>,
    /// Host directory mounted read-only at /plimsoll: kubeconfig, tls.crt, tls.key, ca.crt.
    dir: &'a Path,
    address: SocketAddr,
    admin: SocketAddr,
    system: &'a str,
}

/// Starts vpa-admission from the image with certificate files, registering itself for the
/// Service `<system>/plimsoll-vpa-admission`.
fn serve(s: &Serve<'_>) -> anyhow::Result<Running> {
    let log = s.dir.join("vpa-admission.log");
    let out = std::fs::File::create(&log)?;
    let child = s
        .image
        .buildah
        .command()
        .args(["run", "--isolation", "chroot", "-v"])
        .arg(format!("{}:/plimsoll:ro", s.dir.display()))
        .args([
            s.image.container.as_str(),
            "--",
            "/usr/local/bin/vpa-admission",
        ])
        .args([
            "--kubeconfig=/plimsoll/kubeconfig".to_owned(),
            format!("--port={}", s.address.port()),
            format!("--metrics-address={}", s.admin),
            "--tls-cert-file=/plimsoll/tls.crt".to_owned(),
            "--tls-key-file=/plimsoll/tls.key".to_owned(),
            "--client-ca-file=/plimsoll/ca.crt".to_owned(),
            "--register-webhook".to_owned(),
            format!("--webhook-service-namespace={}", s.system),
            format!("--status-lease-namespace={}", s.system),
            "--status-lease-update-interval=1s".to_owned(),
            "--webhook-timeout-seconds=10".to_owned(),
            "--log-format=text".to_owned(),
        ])
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .context("start buildah run")?;
    Ok(Running { child, log })
}

/// `GET path` on the admin listener: the status line's code.
fn http_status(address: SocketAddr, path: &str) -> anyhow::Result<u16> {
    let mut tcp = std::net::TcpStream::connect_timeout(&address, Duration::from_secs(1))?;
    tcp.set_read_timeout(Some(Duration::from_secs(2)))?;
    write!(tcp, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n")?;
    let mut response = String::new();
    tcp.read_to_string(&mut response)?;
    let code = response
        .split_whitespace()
        .nth(1)
        .context("no status line")?;
    Ok(code.parse()?)
}

fn vpa(name: &str) -> anyhow::Result<VerticalPodAutoscaler> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "updatePolicy": {"updateMode": "Initial"}
        }
    }))?)
}

/// A pod as the ReplicaSet controller of Deployment `name` creates it, requesting 100m / 128Mi.
fn replica_pod(name: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {
            "generateName": format!("{name}-7c9d8f6b5-"),
            "labels": {"app": name, "pod-template-hash": "7c9d8f6b5"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{name}-7c9d8f6b5"),
                "uid": "0f6c1c1e-8d7a-4a63-9b1e-2f4d5c6b7a80", "controller": true}]
        },
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}
    }))?)
}

fn request(pod: &Pod, resource: &str) -> Option<String> {
    let container = pod.spec.as_ref()?.containers.first()?;
    Some(
        container
            .resources
            .as_ref()?
            .requests
            .as_ref()?
            .get(resource)?
            .0
            .clone(),
    )
}

/// Writes the webhook's files into `dir`: the sim's kubeconfig and a serving certificate for
/// the Service's DNS name with its CA, readable by everyone whatever the umask: the webhook
/// reads them as user 65532.
fn write_files(env: &Env, dir: &Path, system: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    let bundle = plimsoll_vpa_admission::certs::generate(&[format!("{SERVICE}.{system}.svc")])?;
    let files = [
        ("kubeconfig", std::fs::read_to_string(&env.kubeconfig)?),
        ("tls.crt", bundle.cert_pem),
        ("tls.key", bundle.key_pem),
        ("ca.crt", bundle.ca_pem),
    ];
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
    }
    Ok(())
}

/// The webhook in the image answers the sim over TLS: a new pod comes back with the VPA's
/// recommended requests.
async fn check_webhook(env: &Env, image: &Image<'_>, dir: &Path) -> anyhow::Result<()> {
    let system = format!("{}-system", env.namespace);
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": system}}))?;
    Api::<Namespace>::all(env.client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    write_files(env, dir, &system)?;
    let address = free_address()?;
    let admin = free_address()?;
    env.sim()?.register_webhook_service(ServiceAddress {
        namespace: system.clone(),
        name: SERVICE.to_owned(),
        port: 443,
        address,
    });
    let started = Instant::now();
    let running = serve(&Serve {
        image,
        dir,
        address,
        admin,
        system: &system,
    })?;
    let mut result = exercise(env, &system, admin, started).await;
    let log = running.log();
    // Stopping waits for the process: not on a runtime thread the sim needs.
    let stopped = tokio::task::block_in_place(|| running.stop());
    if result.is_ok() {
        // SIGTERM: the webhook drains and exits 0, from the image as anywhere.
        result = stopped.and_then(|status| {
            ensure!(
                status.success(),
                "vpa-admission exited with {status} after SIGTERM"
            );
            Ok(())
        });
    }
    let _ = Api::<Namespace>::all(env.client.clone())
        .delete(&system, &DeleteParams::default())
        .await;
    result.with_context(|| format!("vpa-admission in the image said:\n{log}"))
}

async fn exercise(
    env: &Env,
    system: &str,
    admin: SocketAddr,
    started: Instant,
) -> anyhow::Result<()> {
    // Ready: /readyz answers 200 once TLS is bound and the caches synced, and the status
    // Lease is renewed.
    eventually(
        "/readyz of the webhook in the image",
        WAIT,
        EVERY,
        || async move { Ok((http_status(admin, "/readyz")? == 200).then_some(())) },
    )
    .await?;
    println!(
        "vpa-admission in the image ready after {:?}",
        started.elapsed()
    );
    plimsoll_e2e::wait_webhook_ready(&env.client, system, WAIT).await?;

    let vpas = env.api::<VerticalPodAutoscaler>();
    vpas.create(&PostParams::default(), &vpa("shop")?).await?;
    let status = json!({"status": {"recommendation": {"containerRecommendations": [
        {"containerName": "app", "target": {"cpu": "350m", "memory": "400Mi"}}
    ]}}});
    vpas.patch_status(
        "shop",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&status),
    )
    .await?;
    // The webhook's caches catch up with the recommendation: dry-run creates until one comes
    // back patched.
    let pods = env.api::<Pod>();
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let pod = replica_pod("shop")?;
    eventually(
        "webhook in the image sees the recommendation",
        WAIT,
        EVERY,
        || {
            let (pods, dry, pod) = (pods.clone(), dry.clone(), pod.clone());
            async move {
                let created = pods.create(&dry, &pod).await?;
                Ok((request(&created, "cpu").as_deref() == Some("350m")).then_some(()))
            }
        },
    )
    .await?;
    let created = pods.create(&PostParams::default(), &pod).await?;
    assert_eq!(request(&created, "cpu").as_deref(), Some("350m"));
    assert_eq!(request(&created, "memory").as_deref(), Some("400Mi"));
    assert!(
        created
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("vpaUpdates"),
        "the stored pod carries no vpaUpdates annotation"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    real_cluster,
    ignore = "needs the sim's control API: routing the webhook Service to loopback"
)]
async fn the_vpa_admission_image_runs_its_binary_and_serves_tls_to_the_sim() -> anyhow::Result<()> {
    let (target, profile_dir) = target_dirs()?;
    let Some(buildah) = Buildah::find(&target)? else {
        return Ok(());
    };
    // The image is built and inspected before the sim starts: these calls block.
    let image = build_image(&buildah, &target, &profile_dir)?;
    check_config(&image)?;
    check_files(&image)?;
    let took = check_help(&image)?;
    println!("`buildah run … vpa-admission --help` took {took:?}");

    let env = Env::start("image").await?;
    let dir = std::env::temp_dir().join(unique("plimsoll-e2e-image"));
    let result = check_webhook(&env, &image, &dir).await;
    let _ = std::fs::remove_dir_all(&dir);
    env.cleanup().await;
    result
}
