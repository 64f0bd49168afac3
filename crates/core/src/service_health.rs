//! The health of an installation: which of the five services run, which replica leads, at
//! which version — for `kubectl plimsoll status`.
//!
//! [`assess`] reads one service's objects in the install namespace — its Lease, its Deployment,
//! its pods, the EndpointSlices of its metrics Service — and says, at `now`, whether the Lease is
//! held and fresh (a holder whose `renewTime + leaseDurationSeconds` has passed has lost it, as
//! every candidate judges it), how many replicas are ready, and the versions running (the
//! `app.kubernetes.io/version` label, else the image tag). Names follow `deploy/`:
//! Deployment `plimsoll-<binary>`, Lease `plimsoll-<binary>` for the four controllers (the webhook
//! elects no leader; every replica renews the upstream-named status Lease
//! `vpa-admission-controller`), metrics Service `plimsoll-<binary>-metrics`.
//!
//! **Sharded services.** `hpa-plus` and `vpa-recommender` with `--shards N` (N > 1, the chart's
//! default with more than one replica) hold no `plimsoll-<binary>` Lease: shard `i` is guarded by
//! the Lease `plimsoll-<binary>-shard-<i>`, and a replica waiting for room holds
//! `plimsoll-<binary>-shard-join` (the names `plimsoll_runtime::leader::shards` gives them). The
//! shard count is read from the Deployment (its `--shards` argument, else `PLIMSOLL_SHARDS`), as
//! the replicas read it; without a readable Deployment it is inferred from the shard Leases found
//! (the highest index, plus one). Each shard is then held (a holder, not expired), expired (the
//! holder stopped renewing: it died or lost the API server), released or not created yet; only a
//! held shard's objects are evaluated. A live single-leader Lease beside the shards is a replica
//! without `--shards`: it acts on every object, and the sharded replicas take no shard meanwhile.
//!
//! Everything here is a pure function of the objects listed and `now`; the plugin lists the
//! namespace's Leases once and passes them all.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde::Serialize;

/// The namespace the manifests and the chart install into.
pub const DEFAULT_NAMESPACE: &str = "plimsoll-system";

/// One service of the installation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Service {
    /// The binary, e.g. `hpa-plus`.
    pub binary: &'static str,
    /// The Lease it holds or renews.
    pub lease: &'static str,
    /// Whether the Lease elects a leader (false: every replica renews it as a heartbeat).
    pub elects_leader: bool,
    /// Whether it can run sharded (`--shards N`), on the Leases `<lease>-shard-<i>`.
    pub shardable: bool,
}

/// The five services, in the order `status` lists them.
pub const SERVICES: [Service; 5] = [
    Service {
        binary: "hpa-plus",
        lease: "plimsoll-hpa-plus",
        elects_leader: true,
        shardable: true,
    },
    Service {
        binary: "cron-hpa",
        lease: "plimsoll-cron-hpa",
        elects_leader: true,
        shardable: false,
    },
    Service {
        binary: "vpa-recommender",
        lease: "plimsoll-vpa-recommender",
        elects_leader: true,
        shardable: true,
    },
    Service {
        binary: "vpa-updater",
        lease: "plimsoll-vpa-updater",
        elects_leader: true,
        shardable: false,
    },
    Service {
        binary: "vpa-admission",
        lease: "vpa-admission-controller",
        elects_leader: false,
        shardable: false,
    },
];

impl Service {
    /// The Deployment's name.
    pub fn deployment(&self) -> String {
        format!("plimsoll-{}", self.binary)
    }

    /// The metrics Service's name (EndpointSlices carry it as `kubernetes.io/service-name`).
    pub fn metrics_service(&self) -> String {
        format!("plimsoll-{}-metrics", self.binary)
    }

    /// The label selector of its pods.
    pub fn pod_selector(&self) -> String {
        format!(
            "app.kubernetes.io/name=plimsoll,app.kubernetes.io/component={}",
            self.binary
        )
    }

    /// The name of shard `i`'s Lease: `<lease>-shard-<i>`.
    pub fn shard_lease(&self, i: u32) -> String {
        format!("{}-shard-{i}", self.lease)
    }

    /// The name of the Lease a replica waiting for a shard holds: `<lease>-shard-join`.
    pub fn join_lease(&self) -> String {
        format!("{}-shard-join", self.lease)
    }

    /// The shard index a Lease named `name` guards, if it is one of this service's shard Leases
    /// (the index written as the runtime writes it: decimal, no leading zeros).
    fn shard_of_lease(&self, name: &str) -> Option<u32> {
        if !self.shardable {
            return None;
        }
        let rest = name.strip_prefix(self.lease)?.strip_prefix("-shard-")?;
        let i: u32 = rest.parse().ok()?;
        (rest == i.to_string()).then_some(i)
    }
}

/// What was found of one service.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// The Leases of the install namespace (all of them: the service's own — its single Lease,
    /// its shard Leases — are picked by name).
    pub leases: Vec<Lease>,
    /// Its Deployment, if it exists.
    pub deployment: Option<Deployment>,
    /// Its pods.
    pub pods: Vec<Pod>,
    /// The EndpointSlices of its metrics Service; `None` when the cluster does not serve them.
    pub endpoint_slices: Option<Vec<EndpointSlice>>,
}

/// The Lease in words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseState {
    /// The Lease's name.
    pub name: String,
    /// `spec.holderIdentity` (absent: released).
    pub holder: Option<String>,
    /// Seconds since `renewTime`.
    pub renewed_seconds_ago: Option<i64>,
    /// `leaseDurationSeconds`.
    pub duration_seconds: Option<i32>,
    /// Whether `renewTime + leaseDurationSeconds` has passed (or nobody holds it).
    pub expired: bool,
    /// `leaseTransitions`.
    pub transitions: Option<i32>,
}

/// Where a shard stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ShardStatus {
    /// A holder renews it: its objects are evaluated.
    Held,
    /// A holder is named but `renewTime + leaseDurationSeconds` has passed: it died or lost the
    /// API server; a live replica takes the shard over.
    Expired,
    /// No holder (given up on shutdown or to a joining replica): any replica may take it.
    Released,
    /// The Lease does not exist: no replica has taken the shard yet.
    Missing,
}

/// One shard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardState {
    /// The shard's index, `0 ≤ shard < count`.
    pub shard: u32,
    /// The name of its Lease, `plimsoll-<binary>-shard-<shard>`.
    pub lease_name: String,
    /// Where it stands.
    pub status: ShardStatus,
    /// Its Lease (`None` when it does not exist); `holder` is the last one named, also when
    /// expired.
    pub lease: Option<LeaseState>,
}

/// Where the shard count came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ShardCountSource {
    /// The Deployment's `--shards` argument or `PLIMSOLL_SHARDS`.
    Deployment,
    /// No readable count in a Deployment: the highest shard Lease found, plus one.
    Leases,
}

/// The shards of a sharded service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardsState {
    /// The number of shards.
    pub count: u32,
    /// Where `count` came from.
    pub count_from: ShardCountSource,
    /// Every shard, by index.
    pub shards: Vec<ShardState>,
    /// Held shards per holder, by holder.
    pub holders: std::collections::BTreeMap<String, u32>,
    /// The join Lease, while a replica waits for a shard (held and fresh).
    pub waiting: Option<LeaseState>,
    /// Shard Leases beyond `count` (left from a larger `--shards`), by name.
    pub beyond_count: Vec<LeaseState>,
}

impl ShardsState {
    /// How many shards are held.
    pub fn held(&self) -> usize {
        self.shards
            .iter()
            .filter(|s| s.status == ShardStatus::Held)
            .count()
    }
}

/// How one service is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// Leading (or, for the webhook, renewing) and every replica ready.
    Healthy,
    /// Working, with something to look at (a replica not ready, no endpoints).
    Degraded,
    /// Not working: no fresh Lease, or no ready replica.
    Down,
    /// Nothing of it was found.
    NotInstalled,
}

/// One service's health.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceHealth {
    /// The binary.
    pub service: String,
    /// The verdict.
    pub verdict: Verdict,
    /// The single Lease (`plimsoll-<binary>`; for a sharded service only if one exists beside
    /// the shards).
    pub lease: Option<LeaseState>,
    /// The shards, when the service runs sharded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<ShardsState>,
    /// Replicas the Deployment wants.
    pub desired_replicas: Option<i32>,
    /// Pods ready.
    pub ready_pods: usize,
    /// Pods found.
    pub pods: usize,
    /// Ready endpoints of the metrics Service (`None`: EndpointSlices not served).
    pub ready_endpoints: Option<usize>,
    /// Versions running, distinct, sorted.
    pub versions: Vec<String>,
    /// What is wrong, in words.
    pub problems: Vec<String>,
}

/// Assesses `service` from what was `observed` at `now`.
pub fn assess(service: &Service, observed: &Observed, now: Timestamp) -> ServiceHealth {
    let mut problems = Vec::new();
    let single = find_lease(&observed.leases, service.lease);
    let lease = single.map(|l| lease_state(service, l, now));
    let shards = shards_state(service, observed, now);
    let ready_pods = observed.pods.iter().filter(|p| pod_ready(p)).count();
    let desired_replicas = observed
        .deployment
        .as_ref()
        .and_then(|d| d.spec.as_ref())
        .map(|s| s.replicas.unwrap_or(1));
    let ready_endpoints = observed.endpoint_slices.as_ref().map(|slices| {
        slices
            .iter()
            .flat_map(|s| s.endpoints.iter())
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
            .count()
    });
    let mut versions: Vec<String> = observed.pods.iter().filter_map(version_of).collect();
    if versions.is_empty() {
        versions.extend(observed.deployment.as_ref().and_then(deployment_version));
    }
    versions.sort();
    versions.dedup();
    let single_live = lease.as_ref().is_some_and(|l| !l.expired);
    let fresh = match &shards {
        None => {
            match &lease {
                None => problems.push(format!("Lease {} not found", service.lease)),
                Some(l) if l.expired => problems.push(if service.elects_leader {
                    format!("no leader: Lease {} has expired or was released", l.name)
                } else {
                    format!("Lease {} is not renewed: no replica is serving", l.name)
                }),
                Some(_) => {}
            }
            problems.extend(unexpected_shard_holders(service, observed, now));
            single_live
        }
        Some(sharded) => {
            if let Some(l) = lease.as_ref().filter(|_| single_live) {
                problems.push(format!(
                    "Lease {} is held by {}: a replica without --shards acts on every object, \
                     and the sharded replicas take no shard until it expires or is released",
                    l.name,
                    l.holder.as_deref().unwrap_or("?")
                ));
            }
            problems.extend(sharded.shards.iter().filter_map(unheld));
            sharded.held() > 0 || single_live
        }
    };
    if observed.deployment.is_none() {
        problems.push(format!("Deployment {} not found", service.deployment()));
    }
    if let Some(want) = desired_replicas
        && (ready_pods as i32) < want
    {
        problems.push(format!("{ready_pods} of {want} replicas ready"));
    }
    if ready_endpoints == Some(0) && observed.deployment.is_some() {
        problems.push(format!(
            "Service {} has no ready endpoint",
            service.metrics_service()
        ));
    }
    let nothing_of_it = lease.is_none()
        && shards.is_none()
        && observed.deployment.is_none()
        && observed.pods.is_empty();
    let verdict = if nothing_of_it {
        Verdict::NotInstalled
    } else if !fresh || (desired_replicas.is_some() && ready_pods == 0) {
        Verdict::Down
    } else if problems.is_empty() {
        Verdict::Healthy
    } else {
        Verdict::Degraded
    };
    ServiceHealth {
        service: service.binary.to_owned(),
        verdict,
        lease,
        shards,
        desired_replicas,
        ready_pods,
        pods: observed.pods.len(),
        ready_endpoints,
        versions,
        problems,
    }
}

fn find_lease<'a>(leases: &'a [Lease], name: &str) -> Option<&'a Lease> {
    leases
        .iter()
        .find(|l| l.metadata.name.as_deref() == Some(name))
}

/// The shard count the service runs with, and where it came from: the Deployment's
/// `--shards` (else `PLIMSOLL_SHARDS`, else 1), or — without a Deployment, or with a count in it
/// that is not a number (`$(VAR)`) — the highest shard Lease found plus one (1 when none).
pub fn shard_count(
    service: &Service,
    deployment: Option<&Deployment>,
    leases: &[Lease],
) -> (u32, ShardCountSource) {
    if !service.shardable {
        return (1, ShardCountSource::Deployment);
    }
    if let Some(count) = deployment.and_then(|d| deployment_shards(service, d)) {
        return (count.max(1), ShardCountSource::Deployment);
    }
    let highest = leases
        .iter()
        .filter_map(|l| service.shard_of_lease(l.metadata.name.as_deref()?))
        .max();
    (
        highest.map_or(1, |i| i.saturating_add(1)),
        ShardCountSource::Leases,
    )
}

/// `--shards` as the service's container in `d` is told it: the last `--shards=N` or
/// `--shards N` of its command and args (clap takes the last), else its `PLIMSOLL_SHARDS`
/// value, else 1. `None` when the value is not a number.
fn deployment_shards(service: &Service, d: &Deployment) -> Option<u32> {
    let pod = d.spec.as_ref()?.template.spec.as_ref()?;
    let container = pod
        .containers
        .iter()
        .find(|c| c.name == service.binary)
        .or_else(|| pod.containers.first())?;
    let words: Vec<&str> = container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
        .map(String::as_str)
        .collect();
    let mut flag = None;
    for (i, word) in words.iter().enumerate() {
        if let Some(value) = word.strip_prefix("--shards=") {
            flag = Some(value);
        } else if *word == "--shards" {
            flag = words.get(i + 1).copied();
        }
    }
    let env = || {
        container
            .env
            .iter()
            .flatten()
            .find(|e| e.name == "PLIMSOLL_SHARDS")
            .and_then(|e| e.value.as_deref())
            .filter(|v| !v.is_empty())
    };
    match flag.or_else(env) {
        Some(value) => value.trim().parse().ok(),
        None => Some(1),
    }
}

/// The shards of `service` when it runs with more than one, else `None`.
fn shards_state(service: &Service, observed: &Observed, now: Timestamp) -> Option<ShardsState> {
    let (count, count_from) = shard_count(service, observed.deployment.as_ref(), &observed.leases);
    if count <= 1 {
        return None;
    }
    let shards: Vec<ShardState> = (0..count)
        .map(|i| {
            let lease_name = service.shard_lease(i);
            let lease =
                find_lease(&observed.leases, &lease_name).map(|l| lease_state(service, l, now));
            let status = match &lease {
                None => ShardStatus::Missing,
                Some(l) if l.holder.is_none() => ShardStatus::Released,
                Some(l) if l.expired => ShardStatus::Expired,
                Some(_) => ShardStatus::Held,
            };
            ShardState {
                shard: i,
                lease_name,
                status,
                lease,
            }
        })
        .collect();
    let mut holders = std::collections::BTreeMap::new();
    for s in shards.iter().filter(|s| s.status == ShardStatus::Held) {
        if let Some(holder) = s.lease.as_ref().and_then(|l| l.holder.clone()) {
            *holders.entry(holder).or_insert(0) += 1;
        }
    }
    let waiting = find_lease(&observed.leases, &service.join_lease())
        .map(|l| lease_state(service, l, now))
        .filter(|l| !l.expired);
    let mut beyond_count: Vec<LeaseState> = observed
        .leases
        .iter()
        .filter(|l| {
            l.metadata
                .name
                .as_deref()
                .and_then(|n| service.shard_of_lease(n))
                .is_some_and(|i| i >= count)
        })
        .map(|l| lease_state(service, l, now))
        .collect();
    beyond_count.sort_by(|a, b| a.name.cmp(&b.name));
    Some(ShardsState {
        count,
        count_from,
        shards,
        holders,
        waiting,
        beyond_count,
    })
}

/// The problem with a shard nobody holds, in words.
fn unheld(shard: &ShardState) -> Option<String> {
    let name = &shard.lease_name;
    let why = match (&shard.status, &shard.lease) {
        (ShardStatus::Held, _) => return None,
        (ShardStatus::Missing, _) | (_, None) => format!("Lease {name} does not exist"),
        (ShardStatus::Released, Some(_)) => format!("Lease {name} was released"),
        (ShardStatus::Expired, Some(l)) => format!(
            "Lease {name} has expired: its holder {} last renewed it {} ago (lease {})",
            l.holder.as_deref().unwrap_or("?"),
            l.renewed_seconds_ago
                .map_or_else(|| "?".to_owned(), |s| format!("{s}s")),
            l.duration_seconds
                .map_or_else(|| "?".to_owned(), |s| format!("{s}s")),
        ),
    };
    Some(format!(
        "shard {} not held: {why}; its objects are not evaluated until a replica takes it",
        shard.shard
    ))
}

/// Fresh shard Leases of a service that runs unsharded by its Deployment: replicas of another
/// configuration (a rollout from `--shards` in progress) still act on part of the objects.
fn unexpected_shard_holders(service: &Service, observed: &Observed, now: Timestamp) -> Vec<String> {
    if observed.deployment.is_none() {
        return Vec::new();
    }
    let mut fresh: Vec<LeaseState> = observed
        .leases
        .iter()
        .filter(|l| {
            l.metadata
                .name
                .as_deref()
                .and_then(|n| service.shard_of_lease(n))
                .is_some()
        })
        .map(|l| lease_state(service, l, now))
        .filter(|l| !l.expired)
        .collect();
    fresh.sort_by(|a, b| a.name.cmp(&b.name));
    fresh
        .into_iter()
        .map(|l| {
            format!(
                "Lease {} is held by {} although Deployment {} runs without --shards \
                 (a rollout in progress?)",
                l.name,
                l.holder.as_deref().unwrap_or("?"),
                service.deployment()
            )
        })
        .collect()
}

fn lease_state(service: &Service, lease: &Lease, now: Timestamp) -> LeaseState {
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.filter(|h| !h.is_empty());
    let renewed = spec.renew_time.as_ref().map(|t| t.0);
    let renewed_seconds_ago = renewed.map(|t| now.duration_since(t).as_secs());
    let expired = match (renewed, spec.lease_duration_seconds) {
        (Some(t), Some(d)) => now.duration_since(t).as_secs() >= i64::from(d),
        _ => true,
    } || (service.elects_leader && holder.is_none());
    LeaseState {
        name: lease.metadata.name.clone().unwrap_or_default(),
        holder,
        renewed_seconds_ago,
        duration_seconds: spec.lease_duration_seconds,
        expired,
        transitions: spec.lease_transitions,
    }
}

fn pod_ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn image_tag(image: &str) -> Option<String> {
    let image = image.split('@').next().unwrap_or(image);
    let last = image.rsplit('/').next().unwrap_or(image);
    last.split_once(':').map(|(_, tag)| tag.to_owned())
}

fn version_of(p: &Pod) -> Option<String> {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("app.kubernetes.io/version").cloned())
        .or_else(|| {
            p.spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.as_deref())
                .and_then(image_tag)
        })
}

/// The version the Deployment's template asks for, marked as such: used only when no pod
/// says what runs.
fn deployment_version(d: &Deployment) -> Option<String> {
    let template = &d.spec.as_ref()?.template;
    let version = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.as_ref())
        .and_then(|l| l.get("app.kubernetes.io/version").cloned())
        .or_else(|| {
            template
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.as_deref())
                .and_then(image_tag)
        })?;
    Some(format!("{version} (template)"))
}

/// The health of every service as a table for a terminal.
pub fn to_text(namespace: &str, all: &[ServiceHealth]) -> String {
    use std::fmt::Write as _;
    let mut out = format!(
        "{:<16} {:<12} {:<28} {:<9} {:<8} {:<10} {}\n",
        "SERVICE", "STATE", "LEADER/LEASE", "RENEWED", "READY", "ENDPOINTS", "VERSION"
    );
    for h in all {
        let (lease, renewed) = match &h.shards {
            // The shards at a glance; each one is listed under the table.
            Some(sharded) => (
                format!(
                    "{}/{} shards, {} holder{}",
                    sharded.held(),
                    sharded.count,
                    sharded.holders.len(),
                    if sharded.holders.len() == 1 { "" } else { "s" }
                ),
                // The stalest renewal of a held shard.
                sharded
                    .shards
                    .iter()
                    .filter(|s| s.status == ShardStatus::Held)
                    .filter_map(|s| s.lease.as_ref()?.renewed_seconds_ago)
                    .max(),
            ),
            None => (
                match &h.lease {
                    Some(l) => l.holder.clone().unwrap_or_else(|| "(released)".to_owned()),
                    None => "-".to_owned(),
                },
                h.lease.as_ref().and_then(|l| l.renewed_seconds_ago),
            ),
        };
        let renewed = renewed.map_or_else(|| "-".to_owned(), |s| format!("{s}s ago"));
        let ready = match h.desired_replicas {
            Some(want) => format!("{}/{want}", h.ready_pods),
            None => format!("{}/-", h.ready_pods),
        };
        let endpoints = h
            .ready_endpoints
            .map_or_else(|| "n/a".to_owned(), |n| n.to_string());
        let versions = if h.versions.is_empty() {
            "-".to_owned()
        } else {
            h.versions.join(",")
        };
        let _ = writeln!(
            out,
            "{:<16} {:<12} {:<28} {:<9} {:<8} {:<10} {}",
            h.service,
            format!("{:?}", h.verdict),
            lease,
            renewed,
            ready,
            endpoints,
            versions
        );
    }
    for h in all.iter().filter(|h| h.verdict != Verdict::NotInstalled) {
        for p in &h.problems {
            let _ = writeln!(out, "{}: {p}", h.service);
        }
        if let Some(l) = &h.lease
            && let Some(t) = l.transitions.filter(|t| *t > 0)
        {
            let _ = writeln!(
                out,
                "{}: Lease {} changed holder {t} time(s)",
                h.service, l.name
            );
        }
    }
    for h in all.iter().filter(|h| h.verdict != Verdict::NotInstalled) {
        if let Some(sharded) = &h.shards {
            shards_text(&mut out, &h.service, sharded);
        }
    }
    let _ = writeln!(out, "(namespace {namespace})");
    out
}

/// The shards of one service, one line each.
fn shards_text(out: &mut String, service: &str, sharded: &ShardsState) {
    use std::fmt::Write as _;
    let from = match sharded.count_from {
        ShardCountSource::Deployment => "--shards of its Deployment",
        ShardCountSource::Leases => "inferred from the shard Leases: no Deployment says",
    };
    let _ = writeln!(out, "\n{service}: {} shards ({from})", sharded.count);
    let _ = writeln!(
        out,
        "  {:<6} {:<40} {:<28} {:<9} STATE",
        "SHARD", "LEASE", "HOLDER", "RENEWED"
    );
    let row = |out: &mut String, shard: &str, name: &str, l: Option<&LeaseState>, state: &str| {
        let holder = l
            .and_then(|l| l.holder.clone())
            .unwrap_or_else(|| "-".to_owned());
        let renewed = l
            .and_then(|l| l.renewed_seconds_ago)
            .map_or_else(|| "-".to_owned(), |s| format!("{s}s ago"));
        let _ = writeln!(
            out,
            "  {shard:<6} {name:<40} {holder:<28} {renewed:<9} {state}"
        );
    };
    for s in &sharded.shards {
        let state = match s.status {
            ShardStatus::Held => "held",
            ShardStatus::Expired => "EXPIRED (holder gone)",
            ShardStatus::Released => "RELEASED (no holder)",
            ShardStatus::Missing => "MISSING (never taken)",
        };
        row(
            out,
            &s.shard.to_string(),
            &s.lease_name,
            s.lease.as_ref(),
            state,
        );
    }
    if let Some(l) = &sharded.waiting {
        row(
            out,
            "join",
            &l.name,
            Some(l),
            "a replica waiting for a shard",
        );
    }
    for l in &sharded.beyond_count {
        let state = if l.expired {
            "beyond the shard count (stale)"
        } else {
            "beyond the shard count, still renewed"
        };
        row(out, "-", &l.name, Some(l), state);
    }
}

#[cfg(test)]
mod tests;
