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
}

/// The five services, in the order `status` lists them.
pub const SERVICES: [Service; 5] = [
    Service {
        binary: "hpa-plus",
        lease: "plimsoll-hpa-plus",
        elects_leader: true,
    },
    Service {
        binary: "cron-hpa",
        lease: "plimsoll-cron-hpa",
        elects_leader: true,
    },
    Service {
        binary: "vpa-recommender",
        lease: "plimsoll-vpa-recommender",
        elects_leader: true,
    },
    Service {
        binary: "vpa-updater",
        lease: "plimsoll-vpa-updater",
        elects_leader: true,
    },
    Service {
        binary: "vpa-admission",
        lease: "vpa-admission-controller",
        elects_leader: false,
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
}

/// What was found of one service.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// Its Lease, if it exists.
    pub lease: Option<Lease>,
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
    /// The Lease.
    pub lease: Option<LeaseState>,
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
    let lease = observed
        .lease
        .as_ref()
        .map(|l| lease_state(service, l, now));
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
    match &lease {
        None => problems.push(format!("Lease {} not found", service.lease)),
        Some(l) if l.expired => problems.push(if service.elects_leader {
            format!("no leader: Lease {} has expired or was released", l.name)
        } else {
            format!("Lease {} is not renewed: no replica is serving", l.name)
        }),
        Some(_) => {}
    }
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
    let fresh = lease.as_ref().is_some_and(|l| !l.expired);
    let verdict =
        if observed.lease.is_none() && observed.deployment.is_none() && observed.pods.is_empty() {
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
        desired_replicas,
        ready_pods,
        pods: observed.pods.len(),
        ready_endpoints,
        versions,
        problems,
    }
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
        let lease = match &h.lease {
            Some(l) => l.holder.clone().unwrap_or_else(|| "(released)".to_owned()),
            None => "-".to_owned(),
        };
        let renewed = h
            .lease
            .as_ref()
            .and_then(|l| l.renewed_seconds_ago)
            .map_or_else(|| "-".to_owned(), |s| format!("{s}s ago"));
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
    let _ = writeln!(out, "(namespace {namespace})");
    out
}

#[cfg(test)]
mod tests;
