//! Control and observation: the audit log of every write, fault injection (error rate or fixed
//! status per verb and resource, added latency, dropped watch connections, forced 410 on the
//! next watches), and the `/sim/v1/...` HTTP endpoints that drive them and the workload model.
//!
//! Endpoints (JSON bodies):
//! - `GET  /sim/v1/audit[?since=N]` → `[AuditEntry]` (entries with index ≥ N);
//! - `POST /sim/v1/faults` `Fault` → `{"id": n}`; `DELETE /sim/v1/faults` clears them;
//! - `POST /sim/v1/watches/drop` closes every open watch; `POST /sim/v1/watches/expire?count=N`
//!   answers the next N watches with 410 Expired; `POST /sim/v1/compact` drops the event log;
//! - `PUT  /sim/v1/namespaces/{ns}/{deployments|statefulsets}/{name}/load` `LoadSpec`;
//! - `PUT  /sim/v1/namespaces/{ns}/external/{metric}` `{"value": f64}`;
//! - `PUT  /sim/v1/webhook-services` `ServiceAddress`; `GET /sim/v1/time`;
//! - `GET  /sim/v1/access` → `[rbac::AccessRecord]`: in `--authorize` mode, every authorization
//!   decision about a caller outside `system:masters` and the rule that admitted it (served by
//!   `rbac::gate`, so only the admin may read it).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::error::ApiError;
use crate::random::Rng;

/// Who makes a request, for the audit log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// The `User-Agent` header (or the in-process controller's name).
    pub user_agent: String,
    /// The `fieldManager` query parameter, if any.
    pub field_manager: Option<String>,
    /// `fieldValidation=Strict`: unknown fields of a custom resource are refused, not pruned.
    pub strict_fields: bool,
}

impl Caller {
    /// An in-process controller.
    pub fn controller(name: &str) -> Self {
        Self {
            user_agent: format!("plimsoll-sim/{name}"),
            field_manager: Some(name.to_string()),
            strict_fields: false,
        }
    }
}

/// One write.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// Sim time of the write (RFC 3339).
    pub time: String,
    /// Who: the User-Agent.
    pub user_agent: String,
    /// Who: the field manager, if given.
    pub field_manager: Option<String>,
    /// `create`, `update`, `delete`, `evict`.
    pub verb: String,
    /// API group.
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource (`status`, `scale`, `resize`, `eviction`) or "".
    pub subresource: String,
    /// Namespace or "".
    pub namespace: String,
    /// Object name.
    pub name: String,
    /// resourceVersion after the write.
    pub resource_version: String,
}

/// The audit log (in memory, unbounded: sim runs are short).
#[derive(Debug, Default)]
pub struct AuditLog {
    entries: Mutex<Vec<AuditEntry>>,
}

impl AuditLog {
    fn lock(&self) -> MutexGuard<'_, Vec<AuditEntry>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends an entry.
    pub fn record(&self, e: AuditEntry) {
        self.lock().push(e);
    }

    /// Entries from index `since` on.
    pub fn since(&self, since: usize) -> Vec<AuditEntry> {
        self.lock().get(since..).unwrap_or_default().to_vec()
    }

    /// How many entries there are. Cheap, unlike cloning them: every write waits on this lock,
    /// so a caller that only wants a position must not hold it for a copy of the whole log.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

/// An injected fault. Empty `verb`/`resource` match everything.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Fault {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, … ("" = any).
    pub verb: String,
    /// Resource plural, optionally with `/subresource` ("" = any).
    pub resource: String,
    /// Probability in [0, 1] that a matching request fails (with `status`, default 500).
    pub error_rate: f64,
    /// HTTP status to fail with (default 500; 429 adds Retry-After semantics in the body).
    pub status: Option<u16>,
    /// Latency added to every matching request, in milliseconds (real time).
    pub latency_ms: u64,
    /// Stop after this many failures (0 = unlimited).
    pub count: u64,
}

#[derive(Debug, Default)]
struct FaultEntry {
    id: u64,
    fault: Fault,
    fired: u64,
}

/// Active faults and watch-connection controls.
#[derive(Debug)]
pub struct Faults {
    rules: Mutex<Vec<FaultEntry>>,
    next_id: AtomicU64,
    expire_next: AtomicU32,
    drop_tx: tokio::sync::watch::Sender<u64>,
    rng: Rng,
}

impl Faults {
    /// No faults.
    pub fn new(seed: u64) -> Self {
        let (drop_tx, _) = tokio::sync::watch::channel(0);
        Self {
            rules: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            expire_next: AtomicU32::new(0),
            drop_tx,
            rng: Rng::new(seed),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<FaultEntry>> {
        self.rules
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds a fault; returns its id.
    pub fn add(&self, fault: Fault) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.lock().push(FaultEntry {
            id,
            fault,
            fired: 0,
        });
        id
    }

    /// Removes every fault.
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// For a request: the latency to add and the error to answer, if any.
    pub fn check(&self, verb: &str, resource: &str) -> (Duration, Option<ApiError>) {
        let mut rules = self.lock();
        let mut latency = Duration::ZERO;
        let mut err = None;
        for r in rules.iter_mut() {
            let f = &r.fault;
            let verb_ok = f.verb.is_empty() || f.verb == verb;
            let res_ok = f.resource.is_empty()
                || f.resource == resource
                || resource.split('/').next() == Some(f.resource.as_str());
            if !(verb_ok && res_ok) {
                continue;
            }
            latency += Duration::from_millis(f.latency_ms);
            let exhausted = f.count > 0 && r.fired >= f.count;
            if err.is_none()
                && f.error_rate > 0.0
                && !exhausted
                && self.rng.next_f64() < f.error_rate
            {
                r.fired += 1;
                let code = f.status.unwrap_or(500);
                err = Some(match code {
                    429 => ApiError::new(
                        429,
                        "TooManyRequests",
                        "injected fault: too many requests, please try again later",
                    )
                    .with_details(json!({"retryAfterSeconds": 1})),
                    409 => ApiError::new(409, "Conflict", "injected fault: conflict"),
                    503 => ApiError::new(
                        503,
                        "ServiceUnavailable",
                        "injected fault: service unavailable",
                    ),
                    404 => ApiError::new(404, "NotFound", "injected fault: not found"),
                    c => ApiError::new(
                        c,
                        "InternalError",
                        format!("Internal error occurred: injected fault (status {c})"),
                    ),
                });
            }
        }
        rules.retain(|r| r.fault.count == 0 || r.fired < r.fault.count || r.fault.latency_ms > 0);
        (latency, err)
    }

    /// Removes one fault by id; false when there is none.
    pub fn remove(&self, id: u64) -> bool {
        let mut rules = self.lock();
        let before = rules.len();
        rules.retain(|r| r.id != id);
        rules.len() != before
    }

    /// Closes every open watch connection now.
    pub fn drop_watches(&self) {
        self.drop_tx.send_modify(|g| *g += 1);
    }

    /// A receiver that changes whenever watches are dropped.
    pub fn drop_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.drop_tx.subscribe()
    }

    /// Answers the next `n` watch requests with 410 Expired.
    pub fn expire_next_watches(&self, n: u32) {
        self.expire_next.fetch_add(n, Ordering::SeqCst);
    }

    /// Consumes one forced expiry, if any is pending.
    pub fn take_forced_expiry(&self) -> bool {
        self.expire_next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

/// Address of a webhook Service: where a `clientConfig.service` reference is reached.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAddress {
    /// Service namespace.
    pub namespace: String,
    /// Service name.
    pub name: String,
    /// Service port (443 when the reference omits it).
    #[serde(default = "default_port")]
    pub port: u16,
    /// Loopback address the service listens on.
    pub address: std::net::SocketAddr,
}

fn default_port() -> u16 {
    443
}
