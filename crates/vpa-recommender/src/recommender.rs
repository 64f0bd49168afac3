//! The recommender's loop as the service feeds it: the cluster's shapes in, core's loop
//! ([`plimsoll_core::vertical::recommender`]) run on them.
//!
//! Every decision (ownership, OOM kills, status changes, checkpoint order and garbage) is core's;
//! this module only adapts: a [`VpaInput`] carries the pod selector `plimsoll-runtime` resolved
//! for the VPA's target, and [`Recommender::run_loop`] hands the `metrics.k8s.io` answer to core
//! as [`PodUsage`]. `controller::run_once` and `replay` both call [`Recommender::run_loop`].

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, Pod};
use plimsoll_core::api::vpa::VerticalPodAutoscaler;
use plimsoll_core::vertical::aggregate::AggregationsConfig;
pub use plimsoll_core::vertical::checkpoint_schedule::{CheckpointWrite, checkpoint_object};
pub use plimsoll_core::vertical::controlling::{NoOwners, OwnerIndex, Owners};
use plimsoll_core::vertical::estimator::EstimatorConfig;
use plimsoll_core::vertical::joint_sizing::HorizontalSettings;
pub use plimsoll_core::vertical::oom::{EvictionOom, eviction_ooms};
pub use plimsoll_core::vertical::ownership::{ServedVpa, VpaKey, key_of};
use plimsoll_core::vertical::recommender as core;
pub use plimsoll_core::vertical::recommender::{
    ContainerUsage, LoopOutcome, PodUsage, StatusUpdate, Unsupported, VpaRecommendation,
};
pub use plimsoll_runtime::metrics_api::{ContainerMetrics, PodMetrics};
pub use plimsoll_runtime::selector::Selector;

/// A VPA this recommender answers to, with its target resolved (or why it could not be).
#[derive(Clone, Debug)]
pub struct VpaInput {
    /// The object as last seen.
    pub vpa: Arc<VerticalPodAutoscaler>,
    /// The pod selector of `spec.targetRef`, or why the target cannot be served.
    pub selector: Result<Selector, String>,
    /// A horizontal autoscaler fighting this VPA over the same requests, as the
    /// `ConflictingAutoscaler` condition's message.
    pub conflict: Option<String>,
    /// For a VPA in joint mode, the horizontal autoscaler scaling its workload on CPU or memory
    /// utilization, whose settings size its request of each resource it scales on.
    pub joint: Option<HorizontalSettings>,
}

impl ServedVpa for VpaInput {
    fn object(&self) -> &VerticalPodAutoscaler {
        &self.vpa
    }

    fn target_error(&self) -> Option<&str> {
        self.selector.as_ref().err().map(String::as_str)
    }

    fn has_pod_selector(&self) -> bool {
        self.selector.as_ref().is_ok_and(|s| !s.is_empty())
    }

    fn selects(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        self.selector.as_ref().is_ok_and(|s| s.matches_opt(labels))
    }

    fn conflict(&self) -> Option<&str> {
        self.conflict.as_deref()
    }

    fn joint(&self) -> Option<&HorizontalSettings> {
        self.joint.as_ref()
    }
}

/// Core's [`core::Recommender`], fed with what the runtime reads; every other method is core's
/// (through `Deref`).
#[derive(Debug, Default)]
pub struct Recommender {
    core: core::Recommender,
}

impl Recommender {
    /// An empty recommender with the model settings.
    pub fn new(aggregations: AggregationsConfig, estimator: EstimatorConfig) -> Self {
        Self {
            core: core::Recommender::new(aggregations, estimator),
        }
    }

    /// One loop ([`core::Recommender::run_loop`]) over `usage` as `metrics.k8s.io` reports it;
    /// `owners`: the ReplicaSets and Jobs the service has seen, for the owner walk.
    pub fn run_loop(
        &mut self,
        vpas: &[VpaInput],
        pods: &[Arc<Pod>],
        owners: &dyn Owners,
        usage: &[PodMetrics],
        events: &[Arc<Event>],
        now: Timestamp,
    ) -> LoopOutcome {
        let usage: Vec<PodUsage> = usage.iter().map(pod_usage).collect();
        self.core.run_loop(vpas, pods, owners, &usage, events, now)
    }
}

impl Deref for Recommender {
    type Target = core::Recommender;

    fn deref(&self) -> &core::Recommender {
        &self.core
    }
}

impl DerefMut for Recommender {
    fn deref_mut(&mut self) -> &mut core::Recommender {
        &mut self.core
    }
}

/// One pod's `metrics.k8s.io` usage as core reads it (the window's end is the samples' time).
pub fn pod_usage(pm: &PodMetrics) -> PodUsage {
    PodUsage {
        namespace: pm.namespace.clone(),
        pod: pm.name.clone(),
        time: pm.timestamp,
        containers: pm
            .containers
            .iter()
            .map(|c| ContainerUsage {
                container: c.name.clone(),
                cpu: c.cpu(),
                memory: c.memory(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;
    use k8s_openapi::api::autoscaling::v1::CrossVersionObjectReference;
    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateTerminated, ContainerStatus, PodSpec, PodStatus,
        ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        ManagedFieldsEntry, ObjectMeta, OwnerReference, Time,
    };
    use plimsoll_core::api::vpa::VerticalPodAutoscalerSpec;
    use plimsoll_core::api::vpa::{
        VerticalPodAutoscalerCheckpointStatus, VerticalPodAutoscalerStatus,
    };
    use plimsoll_core::quantity::Quantity;
    use plimsoll_core::vertical::oom::memory_request;
    use std::collections::BTreeMap;
    use std::collections::HashSet;
    use std::time::Duration;

    fn t0() -> Timestamp {
        "2024-03-01T00:00:00Z".parse().expect("ts")
    }

    fn vpa(name: &str) -> VpaInput {
        let mut v = VerticalPodAutoscaler::new(
            name,
            VerticalPodAutoscalerSpec {
                target_ref: CrossVersionObjectReference {
                    api_version: Some("apps/v1".into()),
                    kind: "Deployment".into(),
                    name: name.into(),
                },
                update_policy: None,
                resource_policy: None,
                recommenders: None,
                startup_boost: None,
            },
        );
        v.metadata.namespace = Some("ns".into());
        VpaInput {
            vpa: Arc::new(v),
            selector: Selector::parse(&format!("app={name}")).map_err(|e| e.to_string()),
            conflict: None,
            joint: None,
        }
    }

    /// A pod of Deployment `app`, labelled `app`.
    fn pod(name: &str, app: &str, memory_request: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                labels: Some(BTreeMap::from([("app".into(), app.into())])),
                owner_references: Some(vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "Deployment".into(),
                    name: app.into(),
                    uid: format!("uid-{app}"),
                    controller: Some(true),
                    block_owner_deletion: None,
                }]),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "app".into(),
                    resources: Some(ResourceRequirements {
                        requests: Some(BTreeMap::from([(
                            "memory".into(),
                            K8sQuantity(memory_request.into()),
                        )])),
                        ..ResourceRequirements::default()
                    }),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            status: None,
        }
    }

    fn oom_killed(mut p: Pod, at: Timestamp) -> Pod {
        p.status = Some(PodStatus {
            container_statuses: Some(vec![ContainerStatus {
                name: "app".into(),
                last_state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        reason: Some("OOMKilled".into()),
                        finished_at: Some(Time(at)),
                        ..ContainerStateTerminated::default()
                    }),
                    ..ContainerState::default()
                }),
                ..ContainerStatus::default()
            }]),
            ..PodStatus::default()
        });
        p
    }

    fn usage(pod: &str, cpu: &str, mem: &str, at: Timestamp) -> PodMetrics {
        PodMetrics {
            name: pod.into(),
            namespace: "ns".into(),
            labels: BTreeMap::new(),
            timestamp: at,
            window: Duration::from_secs(30),
            containers: vec![ContainerMetrics {
                name: "app".into(),
                usage: BTreeMap::from([
                    ("cpu".into(), Quantity::parse(cpu).expect("q")),
                    ("memory".into(), Quantity::parse(mem).expect("q")),
                ]),
            }],
        }
    }

    fn target(update: &StatusUpdate, resource: &str) -> K8sQuantity {
        update
            .status
            .recommendation
            .as_ref()
            .and_then(|r| r.container_recommendations.as_ref())
            .and_then(|c| c.first())
            .map(|c| c.target[resource].clone())
            .expect("a recommendation")
    }

    fn with_status(input: &VpaInput, status: &VerticalPodAutoscalerStatus) -> VpaInput {
        let mut v = (*input.vpa).clone();
        v.status = Some(status.clone());
        VpaInput {
            vpa: Arc::new(v),
            selector: input.selector.clone(),
            conflict: input.conflict.clone(),
            joint: input.joint.clone(),
        }
    }

    #[test]
    fn steady_cpu_gives_p90_plus_margin_and_status_only_when_changed() {
        let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        let mut v = vpa("web");
        let pods = vec![Arc::new(pod("web-1", "web", "100Mi"))];
        let mut last = None;
        for i in 0..60 {
            let at = t0() + SignedDuration::from_mins(i);
            let out = r.run_loop(
                std::slice::from_ref(&v),
                &pods,
                &NoOwners,
                &[usage("web-1", "300m", "200Mi", at)],
                &[],
                at,
            );
            if let Some(u) = out.updates.into_iter().next() {
                v = with_status(&v, &u.status);
                last = Some(u);
            }
        }
        let u = last.expect("a status was written");
        // 300m lands in the bucket [~292m, ~307m); target = bucket end × 1.15.
        let cpu = plimsoll_core::quantity::cpu_milli(&target(&u, "cpu")).expect("cpu");
        assert!((340..=356).contains(&cpu), "{cpu}");
        // Nothing changes on the next identical loop once the histogram is stable.
        let at = t0() + SignedDuration::from_mins(61);
        let out = r.run_loop(std::slice::from_ref(&v), &pods, &NoOwners, &[], &[], at);
        assert!(out.updates.is_empty(), "{:?}", out.updates);
        assert_eq!(out.containers, 1);
    }

    #[test]
    fn oom_kill_raises_memory_target_above_the_request_once() {
        let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        let v = vpa("web");
        let at = t0() + SignedDuration::from_mins(5);
        let pods = vec![Arc::new(oom_killed(pod("web-1", "web", "500Mi"), at))];
        let out = r.run_loop(
            std::slice::from_ref(&v),
            &pods,
            &NoOwners,
            &[usage("web-1", "100m", "450Mi", at)],
            &[],
            at,
        );
        assert_eq!(out.ooms, 1);
        let mem = plimsoll_core::quantity::memory_bytes(&target(&out.updates[0], "memory"))
            .expect("memory");
        assert!(mem > 500 << 20, "{mem}");
        let out = r.run_loop(std::slice::from_ref(&v), &pods, &NoOwners, &[], &[], at);
        assert_eq!(out.ooms, 0, "the same kill is recorded once");
    }

    /// A pod as the loop reads it, and the same pod fattened by its tenant: 1 MiB of
    /// annotation, 1 MiB of environment, `managedFields`, volumes.
    fn lean_and_fat(at: Timestamp) -> (Pod, Pod) {
        let lean = oom_killed(pod("web-1", "web", "500Mi"), at);
        let mut fat = lean.clone();
        fat.metadata.annotations = Some(BTreeMap::from([("blob".into(), "x".repeat(1 << 20))]));
        fat.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default(); 1_000]);
        let spec = fat.spec.as_mut().expect("spec");
        spec.containers[0].env = Some(vec![
            k8s_openapi::api::core::v1::EnvVar {
                name: "E".into(),
                value: Some("y".repeat(1 << 20)),
                value_from: None,
            };
            1
        ]);
        spec.volumes = Some(vec![k8s_openapi::api::core::v1::Volume::default(); 1_000]);
        (lean, fat)
    }

    #[test]
    fn a_trimmed_pod_gives_the_loop_what_the_whole_pod_gives() {
        let at = t0() + SignedDuration::from_mins(5);
        let (lean, fat) = lean_and_fat(at);
        let mut trimmed = fat.clone();
        crate::controller::pod_fields(&mut trimmed);
        let size = |p: &Pod| serde_json::to_vec(p).map(|v| v.len()).unwrap_or_default();
        assert!(size(&fat) > 2 << 20, "{}", size(&fat));
        assert!(size(&trimmed) <= size(&lean) + 64, "{}", size(&trimmed));
        let outcome = |pod: Pod| {
            let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
            let pods = vec![Arc::new(pod)];
            let v = vpa("web");
            r.run_loop(
                std::slice::from_ref(&v),
                &pods,
                &NoOwners,
                &[usage("web-1", "100m", "450Mi", at)],
                &[],
                at,
            )
        };
        let whole = outcome(fat);
        assert_eq!(whole.ooms, 1);
        assert_eq!(outcome(trimmed), whole);
    }

    fn eviction(uid: &str, annotations: &[(&str, &str)], at: Timestamp) -> Event {
        Event {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                creation_timestamp: Some(Time(at)),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            involved_object: k8s_openapi::api::core::v1::ObjectReference {
                kind: Some("Pod".into()),
                namespace: Some("ns".into()),
                name: Some("web-1".into()),
                ..Default::default()
            },
            reason: Some("Evicted".into()),
            ..Event::default()
        }
    }

    type Annotations<'a> = &'a [(&'a str, &'a str)];

    // upstream: pkg/recommender/input/oom/observer_test.go TestParseEvictionEvent
    #[test]
    fn eviction_events_parse_like_upstream() {
        let at = t0();
        let cases: [(Annotations<'_>, Vec<(&str, i64)>); 4] = [
            (
                &[
                    ("offending_containers", "test-container"),
                    ("offending_containers_usage", "1024Ki"),
                    ("starved_resource", "memory"),
                ],
                vec![("test-container", 1024 * 1024)],
            ),
            (
                &[
                    ("offending_containers", "test-container,other-container"),
                    ("offending_containers_usage", "1024Ki,2048Ki"),
                    ("starved_resource", "memory,memory"),
                ],
                vec![
                    ("test-container", 1024 * 1024),
                    ("other-container", 2048 * 1024),
                ],
            ),
            (
                &[
                    ("offending_containers", "test-container,other-container"),
                    ("offending_containers_usage", "1024Ki,2048Ki"),
                    ("starved_resource", "memory,evictable"),
                ],
                vec![("test-container", 1024 * 1024)],
            ),
            (
                // A missing resource invalidates the whole event.
                &[
                    ("offending_containers", "test-container,other-container"),
                    ("offending_containers_usage", "1024Ki,2048Ki"),
                    ("starved_resource", "memory"),
                ],
                vec![],
            ),
        ];
        for (annotations, want) in cases {
            let got: Vec<(String, i64)> = eviction_ooms(&eviction("u", annotations, at))
                .into_iter()
                .map(|o| (o.container, o.usage_bytes))
                .collect();
            let want: Vec<(String, i64)> =
                want.into_iter().map(|(c, b)| (c.to_owned(), b)).collect();
            assert_eq!(got, want, "{annotations:?}");
        }
        let mut other = eviction("u", &[], at);
        other.reason = Some("Killing".into());
        assert!(eviction_ooms(&other).is_empty());
        // An Event of one namespace about a pod of another reports nothing; in its own, the
        // kill is its namespace's.
        let kill = [
            ("offending_containers", "app"),
            ("offending_containers_usage", "1Gi"),
            ("starved_resource", "memory"),
        ];
        let mut forged = eviction("u", &kill, at);
        forged.metadata.namespace = Some("tenant".into());
        assert!(eviction_ooms(&forged).is_empty());
        forged.involved_object.namespace = Some("tenant".into());
        assert_eq!(eviction_ooms(&forged)[0].namespace, "tenant");
        forged.involved_object.namespace = None;
        assert_eq!(eviction_ooms(&forged)[0].namespace, "tenant");
        // As the watch keeps it: a fattened Event reads the same, and keeps a few hundred bytes.
        let lean = {
            let mut e = forged.clone();
            plimsoll_core::vertical::oom::event_fields(&mut e);
            e
        };
        let mut fat = forged.clone();
        fat.message = Some("m".repeat(1 << 20));
        fat.metadata.labels = Some((0..1000).map(|i| (format!("l{i}"), "v".into())).collect());
        fat.metadata
            .annotations
            .get_or_insert_default()
            .insert("blob".into(), "x".repeat(250 << 10));
        fat.involved_object.field_path = Some("spec".repeat(1000));
        plimsoll_core::vertical::oom::event_fields(&mut fat);
        assert_eq!(fat, lean);
        assert_eq!(eviction_ooms(&fat), eviction_ooms(&forged));
        assert!(serde_json::to_vec(&fat).map_or(0, |j| j.len()) < 500);
    }

    #[test]
    fn eviction_event_bumps_memory_once() {
        let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        let v = vpa("web");
        let at = t0();
        let pods = vec![Arc::new(pod("web-1", "web", "100Mi"))];
        let events = vec![Arc::new(eviction(
            "e1",
            &[
                ("offending_containers", "app"),
                ("offending_containers_usage", "300Mi"),
                ("starved_resource", "memory"),
            ],
            at,
        ))];
        let out = r.run_loop(std::slice::from_ref(&v), &pods, &NoOwners, &[], &events, at);
        assert_eq!(out.ooms, 1);
        let mem = plimsoll_core::quantity::memory_bytes(&target(&out.updates[0], "memory"))
            .expect("memory");
        assert!(mem > 300 << 20, "{mem}");
        let out = r.run_loop(std::slice::from_ref(&v), &pods, &NoOwners, &[], &events, at);
        assert_eq!(out.ooms, 0);
    }

    // upstream: pkg/recommender/input/oom/observer_test.go TestOOMReceived (the memory used for
    // the bump: the spec request, 0 without one, the containerStatus request when present)
    #[test]
    fn oom_memory_is_the_request_preferring_container_status() {
        let spec_only = pod("p", "a", "1024");
        assert_eq!(memory_request(&spec_only, "app"), 1024);
        let mut none = pod("p", "a", "1");
        none.spec.as_mut().expect("spec").containers[0].resources = None;
        assert_eq!(memory_request(&none, "app"), 0);
        let mut resized = oom_killed(pod("p", "a", "1024"), t0());
        resized
            .status
            .as_mut()
            .expect("status")
            .container_statuses
            .as_mut()
            .expect("list")[0]
            .resources = Some(ResourceRequirements {
            requests: Some(BTreeMap::from([(
                "memory".into(),
                K8sQuantity("2048".into()),
            )])),
            ..ResourceRequirements::default()
        });
        assert_eq!(memory_request(&resized, "app"), 2048);
    }

    #[test]
    fn a_target_that_disappears_keeps_the_recommendation_and_says_why() {
        let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        let v = vpa("web");
        let pods = vec![Arc::new(pod("web-1", "web", "100Mi"))];
        let at = t0();
        let first = r.run_loop(
            std::slice::from_ref(&v),
            &pods,
            &NoOwners,
            &[usage("web-1", "300m", "200Mi", at)],
            &[],
            at,
        );
        let v = with_status(&v, &first.updates[0].status);
        let mut broken = v.clone();
        broken.selector = Err("apps/v1 Deployment ns/web not found".into());
        let out = r.run_loop(
            &[broken],
            &pods,
            &NoOwners,
            &[],
            &[],
            at + SignedDuration::from_mins(1),
        );
        let u = &out.updates[0];
        assert_eq!(target(u, "cpu"), target(&first.updates[0], "cpu"));
        assert!(u.unsupported.is_some());
        assert!(
            u.status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "ConfigUnsupported" && c.status == "True")
        );
    }

    #[test]
    fn a_vpa_whose_spec_was_left_out_gets_no_recommendation_and_says_why() {
        let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        let pods = vec![Arc::new(pod("web-1", "web", "100Mi"))];
        let at = t0();
        let mut left_out = vpa("web");
        plimsoll_core::cut_down::mark_spec_left_out(
            &mut Arc::make_mut(&mut left_out.vpa).metadata,
            300_000,
        );
        let out = r.run_loop(
            &[left_out],
            &pods,
            &NoOwners,
            &[usage("web-1", "300m", "200Mi", at)],
            &[],
            at,
        );
        let u = &out.updates[0];
        let why = u.unsupported.as_deref().expect("unsupported");
        assert!(
            why.starts_with("spec: 300000 bytes of JSON; at most"),
            "{why}"
        );
        assert!(
            u.status.recommendation.is_none(),
            "{:?}",
            u.status.recommendation
        );
        let conditions: Vec<_> = u.status.conditions.iter().flatten().collect();
        assert!(
            conditions
                .iter()
                .any(|c| c.type_ == "ConfigUnsupported" && c.status == "True")
        );
        assert!(
            conditions
                .iter()
                .any(|c| c.type_ == "RecommendationProvided" && c.status == "False")
        );
    }

    #[test]
    fn checkpoints_never_written_come_first_then_the_oldest() {
        let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        let (a, b) = (vpa("a"), vpa("b"));
        let pods = vec![
            Arc::new(pod("a-1", "a", "1Mi")),
            Arc::new(pod("b-1", "b", "1Mi")),
        ];
        let at = t0();
        r.run_loop(&[a.clone(), b.clone()], &pods, &NoOwners, &[], &[], at);
        r.checkpoint_written(&key_of(&a.vpa), "app", at);
        let names = |r: &Recommender, now| -> Vec<String> {
            r.checkpoints_due(now)
                .into_iter()
                .filter_map(|d| d.checkpoint.metadata.name)
                .collect()
        };
        assert_eq!(names(&r, at), ["b-app", "a-app"]);
        r.checkpoint_written(&key_of(&b.vpa), "app", at + SignedDuration::from_mins(1));
        assert_eq!(names(&r, at), ["a-app", "b-app"]);
        // A write the server refused waits behind the others as well, rather than going first
        // in every loop.
        r.checkpoint_failed(&key_of(&a.vpa), "app", at + SignedDuration::from_mins(2));
        assert_eq!(names(&r, at), ["b-app", "a-app"]);
    }

    #[test]
    fn no_pods_and_bad_targets_get_conditions() {
        let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        let mut bad = vpa("gone");
        bad.selector = Err("apps/v1 Deployment ns/gone not found".into());
        let out = r.run_loop(&[vpa("web"), bad], &[], &NoOwners, &[], &[], t0());
        assert_eq!(out.updates.len(), 2);
        let types = |u: &StatusUpdate| -> Vec<(String, String)> {
            u.status
                .conditions
                .iter()
                .flatten()
                .map(|c| (c.type_.clone(), c.status.clone()))
                .collect()
        };
        let gone = out
            .updates
            .iter()
            .find(|u| u.key.1 == "gone")
            .expect("gone");
        assert!(types(gone).contains(&("ConfigUnsupported".into(), "True".into())));
        assert!(gone.unsupported.is_some());
        let web = out.updates.iter().find(|u| u.key.1 == "web").expect("web");
        assert!(types(web).contains(&("NoPodsMatched".into(), "True".into())));
        assert!(types(web).contains(&("RecommendationProvided".into(), "False".into())));
    }

    #[test]
    fn checkpoints_restore_and_gc() {
        let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        let v = vpa("web");
        let pods = vec![Arc::new(pod("web-1", "web", "100Mi"))];
        for i in 0..10 {
            let at = t0() + SignedDuration::from_mins(i);
            r.run_loop(
                std::slice::from_ref(&v),
                &pods,
                &NoOwners,
                &[usage("web-1", "300m", "200Mi", at)],
                &[],
                at,
            );
        }
        let now = t0() + SignedDuration::from_mins(10);
        let due = r.checkpoints_due(now);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].checkpoint.metadata.name.as_deref(), Some("web-app"));
        assert_eq!(due[0].last_written, None);
        r.checkpoint_written(&key_of(&v.vpa), "app", now);
        assert_eq!(r.checkpoints_due(now)[0].last_written, Some(now));

        // A new process restores the same state.
        let cps: Vec<_> = due.into_iter().map(|d| Arc::new(d.checkpoint)).collect();
        let keys = HashSet::from([key_of(&v.vpa)]);
        let mut fresh = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        assert_eq!(fresh.restore(&cps, &keys, now), (1, Vec::new()));
        let saved = |r: &Recommender| r.model(&key_of(&v.vpa)).map(|m| m.checkpoints(now));
        assert_eq!(saved(&fresh), saved(&r));

        // GC: a checkpoint of a deleted VPA goes; ours stays while its aggregate lives.
        let orphan = Arc::new(checkpoint_object(
            "ns",
            "deleted",
            "app",
            VerticalPodAutoscalerCheckpointStatus::default(),
        ));
        let all = vec![cps[0].clone(), orphan];
        assert_eq!(
            r.stale_checkpoints(&all, &keys),
            vec![("ns".to_owned(), "deleted-app".to_owned())]
        );
        // After 8 days without samples the aggregate expires and so does its checkpoint.
        assert_eq!(
            r.garbage_collect(now + SignedDuration::from_hours(24 * 9)),
            1
        );
        assert_eq!(r.stale_checkpoints(&all, &keys).len(), 2);
    }

    #[test]
    fn an_ignored_checkpoint_is_reported_on_its_vpa() {
        let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        let v = vpa("web");
        let keys = HashSet::from([key_of(&v.vpa)]);
        let hostile = Arc::new(checkpoint_object(
            "ns",
            "web",
            "app",
            VerticalPodAutoscalerCheckpointStatus {
                version: Some("v3".into()),
                total_samples_count: Some(-1),
                ..VerticalPodAutoscalerCheckpointStatus::default()
            },
        ));
        let (restored, errors) = r.restore(&[hostile], &keys, t0());
        assert_eq!((restored, errors.len()), (0, 1));
        let pods = vec![Arc::new(pod("web-1", "web", "100Mi"))];
        let out = r.run_loop(
            std::slice::from_ref(&v),
            &pods,
            &NoOwners,
            &[usage("web-1", "300m", "200Mi", t0())],
            &[],
            t0(),
        );
        let web = out.updates.iter().find(|u| u.key.1 == "web").expect("web");
        let condition = web
            .status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "StoredStateIgnored")
            .expect("the condition");
        assert_eq!(condition.status, "True");
        assert_eq!(
            condition.message.as_deref(),
            Some(
                "checkpoint web-app was ignored: totalSamplesCount -1 is negative; the \
                 recommender started that history afresh"
            )
        );
    }

    #[test]
    fn forgotten_vpas_are_restored_afresh_from_their_checkpoints() {
        // A shard handed over and later taken back: the model drops its VPAs, then the restore
        // brings back exactly what the checkpoints say, not a sum of old and restored history.
        let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
        let (a, b) = (vpa("a"), vpa("b"));
        let pods = vec![
            Arc::new(pod("a-1", "a", "1Mi")),
            Arc::new(pod("b-1", "b", "1Mi")),
        ];
        let at = t0();
        r.run_loop(
            &[a.clone(), b.clone()],
            &pods,
            &NoOwners,
            &[
                usage("a-1", "300m", "200Mi", at),
                usage("b-1", "100m", "50Mi", at),
            ],
            &[],
            at,
        );
        let saved: Vec<_> = r
            .checkpoints_due(at)
            .into_iter()
            .map(|d| Arc::new(d.checkpoint))
            .collect();
        let before = r.model(&key_of(&a.vpa)).map(|m| m.checkpoints(at));
        assert_eq!(r.forget(|k| k.1 == "a"), 1);
        assert!(r.model(&key_of(&a.vpa)).is_none());
        assert!(
            r.model(&key_of(&b.vpa)).is_some(),
            "other shards' VPAs stay"
        );
        let keys = HashSet::from([key_of(&a.vpa)]);
        assert_eq!(r.restore(&saved, &keys, at).0, 1);
        assert_eq!(r.model(&key_of(&a.vpa)).map(|m| m.checkpoints(at)), before);
    }

    /// Was "the first VPA by name" (`a`) before the rule was shared with the webhook and the
    /// updater: now the oldest of the VPAs on the pod's controller that select it.
    #[test]
    fn pods_belong_to_the_oldest_vpa_on_their_controller() {
        let mut newer = vpa("a");
        let mut older = vpa("b");
        let on_web = |v: &mut VpaInput, created: &str| {
            let mut o = (*v.vpa).clone();
            o.spec.target_ref.name = "web".into();
            o.metadata.creation_timestamp = Some(Time(created.parse().expect("ts")));
            v.vpa = Arc::new(o);
            v.selector = Selector::parse("app=web").map_err(|e| e.to_string());
        };
        on_web(&mut newer, "2024-03-02T00:00:00Z");
        on_web(&mut older, "2024-03-01T00:00:00Z");
        let pods = [
            Arc::new(pod("p", "web", "1Mi")),
            Arc::new(pod("q", "api", "1Mi")),
        ];
        let r = Recommender::default();
        let owners = r.pod_owners(&[newer, older, vpa("api")], &pods, &NoOwners);
        assert_eq!(owners[&("ns".to_owned(), "p".to_owned())].1, "b");
        assert_eq!(owners[&("ns".to_owned(), "q".to_owned())].1, "api");
    }

    proptest::proptest! {
        /// Whatever the usage, a written recommendation has lower ≤ target ≤ upper, and a loop
        /// that sees nothing new after its status was applied writes nothing.
        #[test]
        fn written_status_is_ordered_and_quiet_when_unchanged(
            series in proptest::collection::vec((1_i64..4_000, 1_i64..4_096), 1..20),
        ) {
            let mut r = Recommender::new(AggregationsConfig::default(), EstimatorConfig::default());
            let mut v = vpa("web");
            let pods = vec![Arc::new(pod("web-1", "web", "100Mi"))];
            let mut at = t0();
            for (cpu, mem) in &series {
                at += SignedDuration::from_mins(1);
                let sample = usage("web-1", &format!("{cpu}m"), &format!("{mem}Mi"), at);
                let out = r.run_loop(std::slice::from_ref(&v), &pods, &NoOwners, &[sample], &[], at);
                for u in &out.updates {
                    let rec = u.status.recommendation.as_ref()
                        .and_then(|r| r.container_recommendations.as_ref())
                        .and_then(|c| c.first())
                        .expect("recommendation");
                    for resource in ["cpu", "memory"] {
                        let value = |list: Option<&plimsoll_core::api::vpa::ResourceList>| {
                            Quantity::try_from(&list.expect("list")[resource]).expect("q").milli()
                        };
                        let (lo, t, hi) = (
                            value(rec.lower_bound.as_ref()),
                            value(Some(&rec.target)),
                            value(rec.upper_bound.as_ref()),
                        );
                        proptest::prop_assert!(lo <= t && t <= hi, "{resource}: {lo} {t} {hi}");
                    }
                    v = with_status(&v, &u.status);
                }
            }
            let out = r.run_loop(std::slice::from_ref(&v), &pods, &NoOwners, &[], &[], at);
            proptest::prop_assert!(out.updates.is_empty());
        }
    }
}
