//! Verdicts from Leases, Deployments, pods and EndpointSlices with known times.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use serde_json::json;

use super::*;

fn now() -> Timestamp {
    "2026-03-01T12:00:00Z".parse().expect("time")
}

fn lease(name: &str, holder: Option<&str>, renewed_ago: i64, duration: i32) -> Lease {
    Lease {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: holder.map(Into::into),
            renew_time: Some(MicroTime(now() - SignedDuration::from_secs(renewed_ago))),
            lease_duration_seconds: Some(duration),
            lease_transitions: Some(2),
            ..LeaseSpec::default()
        }),
    }
}

fn deployment(replicas: i32) -> Deployment {
    serde_json::from_value(json!({"metadata": {"name": "plimsoll-hpa-plus"},
        "spec": {"replicas": replicas, "selector": {},
            "template": {"spec": {"containers": [{"name": "c", "image": "ghcr.io/plimsoll-dev/hpa-plus:0.1.0"}]}}}}))
    .expect("deployment")
}

fn pod(ready: bool, image: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": image}]},
        "status": {"conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}}))
    .expect("pod")
}

fn slice(ready: &[bool]) -> EndpointSlice {
    serde_json::from_value(json!({"metadata": {"name": "s"}, "addressType": "IPv4",
        "endpoints": ready.iter().map(|r| json!({"addresses": ["10.0.0.1"], "conditions": {"ready": r}})).collect::<Vec<_>>()}))
    .expect("slice")
}

const HPA_PLUS: Service = SERVICES[0];

#[test]
fn a_fresh_leader_with_every_replica_ready_is_healthy() {
    let observed = Observed {
        lease: Some(lease("plimsoll-hpa-plus", Some("hpa-plus-7d9-abc"), 3, 15)),
        deployment: Some(deployment(2)),
        pods: vec![
            pod(true, "ghcr.io/plimsoll-dev/hpa-plus:0.1.0"),
            pod(true, "ghcr.io/plimsoll-dev/hpa-plus:0.1.0"),
        ],
        endpoint_slices: Some(vec![slice(&[true, true])]),
    };
    let h = assess(&HPA_PLUS, &observed, now());
    assert_eq!(h.verdict, Verdict::Healthy, "{:?}", h.problems);
    let l = h.lease.as_ref().expect("lease");
    assert_eq!(l.holder.as_deref(), Some("hpa-plus-7d9-abc"));
    assert_eq!(l.renewed_seconds_ago, Some(3));
    assert!(!l.expired);
    assert_eq!(h.versions, ["0.1.0"]);
    assert_eq!(h.ready_endpoints, Some(2));
    let text = to_text("plimsoll-system", &[h]);
    assert!(
        text.contains("hpa-plus         Healthy      hpa-plus-7d9-abc"),
        "{text}"
    );
    assert!(text.contains("changed holder 2 time(s)"), "{text}");
}

#[test]
fn a_lease_renewed_longer_ago_than_its_duration_has_no_leader() {
    let observed = Observed {
        lease: Some(lease("plimsoll-hpa-plus", Some("old"), 15, 15)),
        deployment: Some(deployment(1)),
        pods: vec![pod(true, "x:1")],
        endpoint_slices: None,
    };
    let h = assess(&HPA_PLUS, &observed, now());
    assert_eq!(h.verdict, Verdict::Down);
    assert!(h.problems.iter().any(|p| p.starts_with("no leader")));
    // One second fresher and it leads.
    let observed = Observed {
        lease: Some(lease("plimsoll-hpa-plus", Some("old"), 14, 15)),
        ..observed
    };
    assert_eq!(
        assess(&HPA_PLUS, &observed, now()).verdict,
        Verdict::Healthy
    );
}

#[test]
fn missing_replicas_and_endpoints_degrade_and_nothing_found_is_not_installed() {
    let observed = Observed {
        lease: Some(lease("plimsoll-hpa-plus", Some("a"), 1, 15)),
        deployment: Some(deployment(2)),
        pods: vec![pod(true, "x:0.2.0"), pod(false, "x:0.1.0")],
        endpoint_slices: Some(vec![slice(&[true, false])]),
    };
    let h = assess(&HPA_PLUS, &observed, now());
    assert_eq!(h.verdict, Verdict::Degraded);
    assert_eq!(h.problems, ["1 of 2 replicas ready"]);
    assert_eq!(h.versions, ["0.1.0", "0.2.0"]);
    let none = assess(&HPA_PLUS, &Observed::default(), now());
    assert_eq!(none.verdict, Verdict::NotInstalled);
    // A service that is not installed is one row, not a list of what is missing.
    let text = to_text("plimsoll-system", &[none]);
    assert!(text.contains("NotInstalled"), "{text}");
    assert!(!text.contains("not found"), "{text}");
}

#[test]
fn the_webhook_lease_is_a_heartbeat_without_a_holder() {
    let webhook = SERVICES[4];
    assert_eq!(webhook.lease, "vpa-admission-controller");
    let observed = Observed {
        lease: Some(lease("vpa-admission-controller", None, 2, 60)),
        deployment: Some(deployment(1)),
        pods: vec![pod(true, "x:0.1.0")],
        endpoint_slices: Some(vec![slice(&[true])]),
    };
    assert_eq!(assess(&webhook, &observed, now()).verdict, Verdict::Healthy);
}
