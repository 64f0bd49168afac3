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
        leases: vec![lease("plimsoll-hpa-plus", Some("hpa-plus-7d9-abc"), 3, 15)],
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
        leases: vec![lease("plimsoll-hpa-plus", Some("old"), 15, 15)],
        deployment: Some(deployment(1)),
        pods: vec![pod(true, "x:1")],
        endpoint_slices: None,
    };
    let h = assess(&HPA_PLUS, &observed, now());
    assert_eq!(h.verdict, Verdict::Down);
    assert!(h.problems.iter().any(|p| p.starts_with("no leader")));
    // One second fresher and it leads.
    let observed = Observed {
        leases: vec![lease("plimsoll-hpa-plus", Some("old"), 14, 15)],
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
        leases: vec![lease("plimsoll-hpa-plus", Some("a"), 1, 15)],
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
        leases: vec![lease("vpa-admission-controller", None, 2, 60)],
        deployment: Some(deployment(1)),
        pods: vec![pod(true, "x:0.1.0")],
        endpoint_slices: Some(vec![slice(&[true])]),
    };
    assert_eq!(assess(&webhook, &observed, now()).verdict, Verdict::Healthy);
}

/// The hpa-plus Deployment with this container `args` and `env`, as the chart renders it.
fn sharded_deployment(replicas: i32, args: &[&str], env: &[(&str, &str)]) -> Deployment {
    serde_json::from_value(json!({"metadata": {"name": "plimsoll-hpa-plus"},
        "spec": {"replicas": replicas, "selector": {},
            "template": {"spec": {"containers": [
                {"name": "sidecar", "image": "x:1", "args": ["--shards=99"]},
                {"name": "hpa-plus", "image": "ghcr.io/plimsoll-dev/hpa-plus:0.1.0",
                 "args": args,
                 "env": env.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>()}]}}}}))
    .expect("deployment")
}

fn ready_pods(n: usize) -> Vec<Pod> {
    (0..n)
        .map(|_| pod(true, "ghcr.io/plimsoll-dev/hpa-plus:0.1.0"))
        .collect()
}

/// A shard Lease of hpa-plus.
fn shard(i: u32, holder: Option<&str>, renewed_ago: i64) -> Lease {
    lease(
        &format!("plimsoll-hpa-plus-shard-{i}"),
        holder,
        renewed_ago,
        15,
    )
}

fn statuses(h: &ServiceHealth) -> Vec<ShardStatus> {
    h.shards
        .as_ref()
        .expect("sharded")
        .shards
        .iter()
        .map(|s| s.status)
        .collect()
}

#[test]
fn a_sharded_service_lists_each_shards_holder() {
    let observed = Observed {
        leases: vec![
            shard(0, Some("hpa-plus-a"), 1),
            shard(1, Some("hpa-plus-b"), 2),
            shard(2, Some("hpa-plus-a"), 1),
            shard(3, Some("hpa-plus-b"), 4),
            // Another service's Lease in the same namespace is not one of them.
            lease("plimsoll-cron-hpa", Some("cron-0"), 1, 15),
        ],
        deployment: Some(sharded_deployment(
            2,
            &["--leader-elect=true", "--shards=4"],
            &[],
        )),
        pods: ready_pods(2),
        endpoint_slices: Some(vec![slice(&[true, true])]),
    };
    let h = assess(&HPA_PLUS, &observed, now());
    assert_eq!(h.verdict, Verdict::Healthy, "{:?}", h.problems);
    assert_eq!(h.lease, None, "no single Lease when sharded");
    let sharded = h.shards.as_ref().expect("sharded");
    assert_eq!(sharded.count, 4);
    assert_eq!(sharded.count_from, ShardCountSource::Deployment);
    let holders: Vec<_> = sharded
        .shards
        .iter()
        .map(|s| s.lease.as_ref().and_then(|l| l.holder.as_deref()))
        .collect();
    assert_eq!(
        holders,
        [
            Some("hpa-plus-a"),
            Some("hpa-plus-b"),
            Some("hpa-plus-a"),
            Some("hpa-plus-b")
        ]
    );
    assert_eq!(
        sharded.holders,
        [("hpa-plus-a".to_owned(), 2), ("hpa-plus-b".to_owned(), 2)].into()
    );
    let text = to_text("plimsoll-system", std::slice::from_ref(&h));
    assert!(
        text.contains("hpa-plus         Healthy      4/4 shards, 2 holders        4s ago"),
        "{text}"
    );
    assert!(
        text.contains("hpa-plus: 4 shards (--shards of its Deployment)"),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("1 ")
            && l.contains("plimsoll-hpa-plus-shard-1")
            && l.contains("hpa-plus-b")
            && l.ends_with("held")),
        "{text}"
    );
    let json = serde_json::to_value(&h).expect("json");
    assert_eq!(json["shards"]["shards"][3]["lease"]["holder"], "hpa-plus-b");
    assert_eq!(json["shards"]["shards"][3]["status"], "Held");
}

/// (case, leases of shards 0..4, expected states, verdict, a problem it names)
type Case = (
    &'static str,
    Vec<Lease>,
    [ShardStatus; 4],
    Verdict,
    &'static str,
);

#[test]
fn unheld_shards_are_flagged_by_what_became_of_their_lease() {
    let held = |i| shard(i, Some("hpa-plus-a"), 1);
    let cases: Vec<Case> = vec![
        (
            "a killed holder's shard, not renewed for its duration",
            vec![held(0), held(1), shard(2, Some("hpa-plus-c"), 15), held(3)],
            [
                ShardStatus::Held,
                ShardStatus::Held,
                ShardStatus::Expired,
                ShardStatus::Held,
            ],
            Verdict::Degraded,
            "shard 2 not held: Lease plimsoll-hpa-plus-shard-2 has expired: its holder \
             hpa-plus-c last renewed it 15s ago (lease 15s); its objects are not evaluated \
             until a replica takes it",
        ),
        (
            "one second fresher, the same holder still holds it",
            vec![held(0), held(1), shard(2, Some("hpa-plus-c"), 14), held(3)],
            [ShardStatus::Held; 4],
            Verdict::Healthy,
            "",
        ),
        (
            "released on shutdown, and never taken",
            vec![held(0), shard(1, None, 3), held(3)],
            [
                ShardStatus::Held,
                ShardStatus::Released,
                ShardStatus::Missing,
                ShardStatus::Held,
            ],
            Verdict::Degraded,
            "shard 2 not held: Lease plimsoll-hpa-plus-shard-2 does not exist",
        ),
        (
            "every holder gone: nothing is evaluated",
            (0..4).map(|i| shard(i, Some("hpa-plus-a"), 60)).collect(),
            [ShardStatus::Expired; 4],
            Verdict::Down,
            "shard 0 not held",
        ),
    ];
    for (case, leases, want, verdict, problem) in cases {
        let observed = Observed {
            leases,
            deployment: Some(sharded_deployment(2, &["--shards", "4"], &[])),
            pods: ready_pods(2),
            endpoint_slices: None,
        };
        let h = assess(&HPA_PLUS, &observed, now());
        assert_eq!(statuses(&h), want, "{case}");
        assert_eq!(h.verdict, verdict, "{case}: {:?}", h.problems);
        if problem.is_empty() {
            assert!(h.problems.is_empty(), "{case}: {:?}", h.problems);
        } else {
            assert!(
                h.problems.iter().any(|p| p.starts_with(problem)),
                "{case}: {:?}",
                h.problems
            );
        }
        let text = to_text("plimsoll-system", &[h]);
        let flagged = want.iter().filter(|s| **s != ShardStatus::Held).count();
        let marked = text
            .lines()
            .filter(|l| l.contains("EXPIRED") || l.contains("RELEASED") || l.contains("MISSING"))
            .count();
        assert_eq!(marked, flagged, "{case}: {text}");
    }
}

#[test]
fn the_shard_count_comes_from_the_deployment_else_the_leases() {
    let leases = vec![shard(0, Some("a"), 1), shard(5, Some("a"), 1)];
    let odd = vec![
        lease("plimsoll-hpa-plus-shard-07", Some("a"), 1, 15),
        lease("plimsoll-hpa-plus-shard-join", Some("a"), 1, 15),
        lease("plimsoll-hpa-plus-shards-2", Some("a"), 1, 15),
    ];
    let d = |args: &[&str], env: &[(&str, &str)]| Some(sharded_deployment(2, args, env));
    let cases = vec![
        (
            "--shards=8",
            d(&["--shards=8"], &[]),
            &leases,
            (8, ShardCountSource::Deployment),
        ),
        (
            "--shards 8",
            d(&["--shards", "8"], &[]),
            &leases,
            (8, ShardCountSource::Deployment),
        ),
        (
            "env",
            d(&[], &[("PLIMSOLL_SHARDS", "3")]),
            &leases,
            (3, ShardCountSource::Deployment),
        ),
        (
            "the flag wins over env, the last flag over earlier ones",
            d(&["--shards=2", "--shards=4"], &[("PLIMSOLL_SHARDS", "3")]),
            &leases,
            (4, ShardCountSource::Deployment),
        ),
        (
            "no flag: one leader",
            d(&[], &[]),
            &leases,
            (1, ShardCountSource::Deployment),
        ),
        (
            "a count the plugin cannot read",
            d(&["--shards=$(SHARDS)"], &[]),
            &leases,
            (6, ShardCountSource::Leases),
        ),
        (
            "no Deployment",
            None,
            &leases,
            (6, ShardCountSource::Leases),
        ),
        (
            "no Deployment, no shard Lease",
            None,
            &odd,
            (1, ShardCountSource::Leases),
        ),
    ];
    for (case, deployment, leases, want) in cases {
        assert_eq!(
            shard_count(&HPA_PLUS, deployment.as_ref(), leases),
            want,
            "{case}"
        );
    }
    // cron-hpa never shards, whatever its Leases are called.
    let cron = SERVICES[1];
    let cron_leases = vec![lease("plimsoll-cron-hpa-shard-3", Some("a"), 1, 15)];
    assert_eq!(shard_count(&cron, None, &cron_leases).0, 1);
}

#[test]
fn the_recommender_shards_on_its_own_leases() {
    let recommender = SERVICES[2];
    assert_eq!(recommender.binary, "vpa-recommender");
    let observed = Observed {
        leases: vec![
            lease("plimsoll-vpa-recommender-shard-0", Some("rec-a"), 1, 15),
            lease("plimsoll-vpa-recommender-shard-1", Some("rec-b"), 40, 15),
            // hpa-plus's shards are not the recommender's.
            shard(2, Some("hpa-plus-a"), 1),
        ],
        deployment: None,
        pods: Vec::new(),
        endpoint_slices: None,
    };
    let h = assess(&recommender, &observed, now());
    let sharded = h.shards.as_ref().expect("sharded");
    assert_eq!(
        (sharded.count, sharded.count_from),
        (2, ShardCountSource::Leases)
    );
    assert_eq!(statuses(&h), [ShardStatus::Held, ShardStatus::Expired]);
    assert_eq!(sharded.holders, [("rec-a".to_owned(), 1)].into());
    let text = to_text("plimsoll-system", &[h]);
    assert!(text.contains("inferred from the shard Leases"), "{text}");
}

#[test]
fn a_single_leader_beside_the_shards_and_leftover_leases_are_reported() {
    // An old single leader still renews: it acts on everything, no shard is taken meanwhile.
    let observed = Observed {
        leases: vec![
            lease("plimsoll-hpa-plus", Some("old-0"), 2, 15),
            shard(0, Some("hpa-plus-a"), 1),
            // A replica waiting for room, and a Lease of a larger count before.
            lease("plimsoll-hpa-plus-shard-join", Some("hpa-plus-c"), 1, 15),
            shard(7, Some("hpa-plus-z"), 600),
        ],
        deployment: Some(sharded_deployment(3, &["--shards=2"], &[])),
        pods: ready_pods(3),
        endpoint_slices: None,
    };
    let h = assess(&HPA_PLUS, &observed, now());
    assert_eq!(h.verdict, Verdict::Degraded, "{:?}", h.problems);
    assert!(
        h.problems
            .iter()
            .any(|p| p.starts_with("Lease plimsoll-hpa-plus is held by old-0")),
        "{:?}",
        h.problems
    );
    let sharded = h.shards.as_ref().expect("sharded");
    assert_eq!(
        sharded.waiting.as_ref().and_then(|l| l.holder.as_deref()),
        Some("hpa-plus-c")
    );
    assert_eq!(sharded.beyond_count.len(), 1);
    let text = to_text("plimsoll-system", &[h]);
    assert!(text.contains("a replica waiting for a shard"), "{text}");
    assert!(text.contains("beyond the shard count (stale)"), "{text}");

    // Unsharded by its Deployment while shard Leases are still renewed: a rollout in progress.
    let observed = Observed {
        leases: vec![
            lease("plimsoll-hpa-plus", Some("new-0"), 1, 15),
            shard(0, Some("old-a"), 1),
            shard(1, Some("old-b"), 100),
        ],
        deployment: Some(deployment(1)),
        pods: ready_pods(1),
        endpoint_slices: None,
    };
    let h = assess(&HPA_PLUS, &observed, now());
    assert!(h.shards.is_none());
    assert_eq!(h.verdict, Verdict::Degraded);
    assert_eq!(
        h.problems,
        [
            "Lease plimsoll-hpa-plus-shard-0 is held by old-a although Deployment \
          plimsoll-hpa-plus runs without --shards (a rollout in progress?)"
        ]
    );
    let json = serde_json::to_value(&h).expect("json");
    assert!(json.get("shards").is_none(), "{json}");
    assert_eq!(json["lease"]["holder"], "new-0");
}
