//! `just bench-sim`: API throughput of plimsoll-sim (GET, LIST, writes) and watch fan-out with
//! 10,000 objects and 100 watchers. Ignored by default; run with
//! `cargo test --release -p plimsoll-sim --test sim bench:: -- --ignored --nocapture`.
#![allow(clippy::unwrap_used, clippy::panic)] // integration tests: helpers fail loudly

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use plimsoll_sim::{Sim, SimConfig};
use serde_json::json;

const OBJECTS: usize = 10_000;
const WATCHERS: usize = 100;
const CONCURRENCY: usize = 32;

fn cm(i: usize) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": format!("cm-{i:05}"), "labels": {"shard": (i % 10).to_string()}}, "data": {"v": "0"}})).unwrap()
}

async fn run_parallel<F, Fut>(n: usize, f: F) -> Duration
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let f = Arc::new(f);
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let (f, next) = (f.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                    if i >= n {
                        break;
                    }
                    f(i).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run with --ignored --nocapture (just bench-sim)"]
async fn bench_sim() {
    let sim = Sim::start(SimConfig {
        workload_model: false,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let client = sim.http_kube_client().unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    bench_create_and_get(&api).await;
    bench_lists(&api).await;
    bench_watch_fan_out(&api).await;
    sim.shutdown().await;
}

/// Parallel creates of every object, then parallel GETs.
async fn bench_create_and_get(api: &Api<ConfigMap>) {
    let a = api.clone();
    let took = run_parallel(OBJECTS, move |i| {
        let a = a.clone();
        async move {
            a.create(&PostParams::default(), &cm(i)).await.unwrap();
        }
    })
    .await;
    println!(
        "create: {OBJECTS} objects in {:.2}s = {:.0} writes/s",
        took.as_secs_f64(),
        OBJECTS as f64 / took.as_secs_f64()
    );

    let gets = 20_000;
    let a = api.clone();
    let took = run_parallel(gets, move |i| {
        let a = a.clone();
        async move {
            a.get(&format!("cm-{:05}", i % OBJECTS)).await.unwrap();
        }
    })
    .await;
    println!(
        "get: {gets} in {:.2}s = {:.0} GETs/s",
        took.as_secs_f64(),
        gets as f64 / took.as_secs_f64()
    );
}

/// Full LISTs, then label-selected LISTs with a page limit.
async fn bench_lists(api: &Api<ConfigMap>) {
    let start = Instant::now();
    let lists = 20;
    for _ in 0..lists {
        assert_eq!(
            api.list(&ListParams::default()).await.unwrap().items.len(),
            OBJECTS
        );
    }
    let took = start.elapsed();
    println!(
        "list: {lists} full lists of {OBJECTS} in {:.2}s = {:.1} LISTs/s ({:.0} objects/s)",
        took.as_secs_f64(),
        lists as f64 / took.as_secs_f64(),
        (lists * OBJECTS) as f64 / took.as_secs_f64()
    );
    let a = api.clone();
    let took = run_parallel(500, move |i| {
        let a = a.clone();
        async move {
            a.list(
                &ListParams::default()
                    .labels(&format!("shard={}", i % 10))
                    .limit(100),
            )
            .await
            .unwrap();
        }
    })
    .await;
    println!(
        "list (selector, limit 100): 500 in {:.2}s = {:.0} LISTs/s",
        took.as_secs_f64(),
        500.0 / took.as_secs_f64()
    );
}

/// Watch fan-out: 100 watchers from the current version; 1,000 updates; time until every
/// watcher has seen every update.
async fn bench_watch_fan_out(api: &Api<ConfigMap>) {
    let rv = api
        .list(&ListParams::default().limit(1))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let updates = 1_000usize;
    let received = Arc::new(AtomicU64::new(0));
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let (a, rv, received) = (api.clone(), rv.clone(), received.clone());
        let mut stream = a
            .watch(&WatchParams::default().disable_bookmarks(), &rv)
            .await
            .unwrap()
            .boxed();
        watchers.push(tokio::spawn(async move {
            let mut n = 0;
            while n < updates {
                match stream.try_next().await {
                    Ok(Some(WatchEvent::Modified(_))) => {
                        n += 1;
                        received.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Some(_)) => {}
                    other => panic!("watch ended early: {other:?}"),
                }
            }
        }));
    }
    let start = Instant::now();
    let a = api.clone();
    let write_took = run_parallel(updates, move |i| {
        let a = a.clone();
        async move {
            a.patch(
                &format!("cm-{:05}", i * 7 % OBJECTS),
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"v": (i + 1).to_string()}})),
            )
            .await
            .unwrap();
        }
    })
    .await;
    for w in watchers {
        tokio::time::timeout(Duration::from_secs(120), w)
            .await
            .expect("watchers finish")
            .unwrap();
    }
    let took = start.elapsed();
    let events = received.load(Ordering::Relaxed);
    println!(
        "watch fan-out: {WATCHERS} watchers × {updates} updates over {OBJECTS} objects: patches took {:.2}s ({:.0} writes/s), all {events} events delivered in {:.2}s = {:.0} events/s",
        write_took.as_secs_f64(),
        updates as f64 / write_took.as_secs_f64(),
        took.as_secs_f64(),
        events as f64 / took.as_secs_f64()
    );
    assert_eq!(events as usize, WATCHERS * updates);
}
