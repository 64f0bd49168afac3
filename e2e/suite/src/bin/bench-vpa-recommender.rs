//! Benchmark of one vpa-recommender loop at 5,000 VPAs / 50,000 containers (issue 6).
//!
//! Drives the loop function itself ([`Recommender::run_loop`] plus the checkpoint step
//! [`checkpoints_due`](plimsoll_core::vertical::recommender::Recommender::checkpoints_due)) with in-memory pods and a fake `metrics.k8s.io` answer, so
//! the numbers are the recommender's own work — no API server, no network. 5,000 VPAs, each
//! targeting 5 pods of 2 containers (25,000 pods, 50,000 container instances, 10,000 aggregates
//! keyed (VPA, container name) as upstream keys them). Prints each loop's wall time and CPU
//! time, and the peak RSS. Bounded: 6 loops, well under 3 minutes in release.
//!
//! Run: `cargo run --profile dist -p plimsoll-e2e --bin bench-vpa-recommender`.

use plimsoll_e2e::process::Proc;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::autoscaling::v1::CrossVersionObjectReference;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use plimsoll_core::api::vpa::{
    RecommenderSelector, VerticalPodAutoscaler, VerticalPodAutoscalerSpec,
};
use plimsoll_core::quantity::Quantity;
use plimsoll_core::vertical::aggregate::AggregationsConfig;
use plimsoll_core::vertical::estimator::EstimatorConfig;
use plimsoll_vpa_recommender::recommender::{
    ContainerMetrics, NoOwners, PodMetrics, Recommender, Selector, VpaInput,
};

const VPAS: usize = 5_000;
const PODS_PER_VPA: usize = 5;
const CONTAINERS: [&str; 2] = ["app", "sidecar"];
const NAMESPACES: usize = 50;
const LOOPS: i64 = 6;

fn namespace(i: usize) -> String {
    format!("ns-{}", i % NAMESPACES)
}

fn vpa(i: usize) -> VpaInput {
    let name = format!("w-{i}");
    let mut v = VerticalPodAutoscaler::new(
        &name,
        VerticalPodAutoscalerSpec {
            target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: name.clone(),
            },
            update_policy: None,
            resource_policy: None,
            recommenders: Some(vec![RecommenderSelector {
                name: "plimsoll".into(),
            }]),
            startup_boost: None,
        },
    );
    v.metadata.namespace = Some(namespace(i));
    VpaInput {
        vpa: Arc::new(v),
        selector: Selector::parse(&format!("app={name}")).map_err(|e| e.to_string()),
        conflict: None,
        joint: None,
    }
}

fn pod(i: usize, p: usize) -> Pod {
    let requests = BTreeMap::from([
        ("cpu".to_owned(), K8sQuantity("100m".into())),
        ("memory".to_owned(), K8sQuantity("128Mi".into())),
    ]);
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("w-{i}-{p}")),
            namespace: Some(namespace(i)),
            // Of ReplicaSet `w-<i>-abc` of Deployment `w-<i>`, which the owner walk names
            // from the `pod-template-hash` label (the bench feeds no ReplicaSets).
            labels: Some(BTreeMap::from([
                ("app".to_owned(), format!("w-{i}")),
                ("pod-template-hash".to_owned(), "abc".to_owned()),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".to_owned(),
                kind: "ReplicaSet".to_owned(),
                name: format!("w-{i}-abc"),
                uid: format!("rs-{i}"),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: CONTAINERS
                .iter()
                .map(|c| Container {
                    name: (*c).to_owned(),
                    resources: Some(ResourceRequirements {
                        requests: Some(requests.clone()),
                        ..ResourceRequirements::default()
                    }),
                    ..Container::default()
                })
                .collect(),
            ..PodSpec::default()
        }),
        status: None,
    }
}

fn usage(i: usize, p: usize, at: Timestamp, step: i64) -> PodMetrics {
    // Varying usage so that every loop touches many buckets.
    let cpu = 50 + ((i * 7 + p * 13) as i64 + step * 3) % 400;
    let mem = (64 + ((i + p) as i64 + step) % 256) << 20;
    PodMetrics {
        name: format!("w-{i}-{p}"),
        namespace: namespace(i),
        labels: BTreeMap::new(),
        timestamp: at,
        window: Duration::from_secs(30),
        containers: CONTAINERS
            .iter()
            .map(|c| ContainerMetrics {
                name: (*c).to_owned(),
                usage: BTreeMap::from([
                    ("cpu".to_owned(), Quantity::from_milli(i128::from(cpu))),
                    (
                        "memory".to_owned(),
                        Quantity::from_milli(i128::from(mem) * 1000),
                    ),
                ]),
            })
            .collect(),
    }
}

fn cpu_seconds() -> f64 {
    Proc::This.cpu_seconds().unwrap_or(f64::NAN)
}

fn status_mib(key: &str) -> f64 {
    Proc::This.memory_mib(key).unwrap_or(f64::NAN)
}

fn main() {
    let started = Instant::now();
    let vpas: Vec<VpaInput> = (0..VPAS).map(vpa).collect();
    let pods: Vec<Arc<Pod>> = (0..VPAS)
        .flat_map(|i| (0..PODS_PER_VPA).map(move |p| Arc::new(pod(i, p))))
        .collect();
    println!(
        "bench-vpa-recommender: {VPAS} VPAs, {} pods, {} containers, {NAMESPACES} namespaces; \
         driving Recommender::run_loop + checkpoints_due directly (fake metrics, in-memory stores)",
        pods.len(),
        pods.len() * CONTAINERS.len()
    );
    println!("setup RSS {:.0} MiB", status_mib("VmRSS"));
    let mut recommender =
        Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
    let t0: Timestamp = "2024-03-01T00:00:00Z"
        .parse()
        .unwrap_or(Timestamp::UNIX_EPOCH);
    let mut worst = Duration::ZERO;
    for step in 0..LOOPS {
        let now = t0 + SignedDuration::from_mins(step);
        let usage: Vec<PodMetrics> = (0..VPAS)
            .flat_map(|i| (0..PODS_PER_VPA).map(move |p| usage(i, p, now, step)))
            .collect();
        let cpu_before = cpu_seconds();
        let loop_start = Instant::now();
        let outcome = recommender.run_loop(&vpas, &pods, &NoOwners, &usage, &[], now);
        let model = loop_start.elapsed();
        let checkpoints = recommender.checkpoints_due(now);
        let total = loop_start.elapsed();
        let cpu = cpu_seconds() - cpu_before;
        worst = worst.max(total);
        println!(
            "loop {step}: {:.3} s (model + status {:.3} s, {} checkpoints {:.3} s), CPU {:.2} s, \
             {} samples, {} status updates, {} aggregates, RSS {:.0} MiB",
            total.as_secs_f64(),
            model.as_secs_f64(),
            checkpoints.len(),
            total.saturating_sub(model).as_secs_f64(),
            cpu,
            outcome.samples,
            outcome.updates.len(),
            outcome.containers,
            status_mib("VmRSS")
        );
    }
    println!(
        "worst loop {:.3} s; peak RSS {:.0} MiB; total {:.1} s; nproc {}",
        worst.as_secs_f64(),
        status_mib("VmHWM"),
        started.elapsed().as_secs_f64(),
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get)
    );
}
