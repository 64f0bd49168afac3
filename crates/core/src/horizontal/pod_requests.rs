//! Which containers a pod's `Resource` / `ContainerResource` utilization is measured over, and
//! which request (or limit) it is a percentage of.
//!
//! Upstream (kubernetes `pkg/controller/podautoscaler/replica_calculator.go`,
//! `calculateRequests`, Kubernetes 1.37) decides:
//!
//! * **Containers that count** are the regular containers and the restartable init containers
//!   (native sidecars, `restartPolicy: Always`), in that order; an init container that runs to
//!   completion counts for neither requests nor usage. A `ContainerResource` metric may name a
//!   sidecar.
//! * **Pod-level resources** (`spec.resources`, KEP-2837): when the pod sets a pod-level request
//!   for a supported resource (`cpu`, `memory`, `hugepages-*`) and the metric is a `Resource`
//!   metric (no container named), the request is the pod's effective request: the pod-level
//!   value for resources it sets, otherwise the containers' aggregate (`max(sum of containers and
//!   sidecars, the largest init-phase peak)`), plus `spec.overhead`, as
//!   `resourcehelpers.PodRequests` computes it. A named container always uses its own request.
//! * **A counted container without a request** fails the metric (`missing request for …`), and
//!   so does a `ContainerResource` metric naming a container the pod does not have.
//!
//! Where Plimsoll differs on purpose: **during an in-place resize** (KEP-1287) `spec` already
//! carries the new requests while the container still runs with the old ones. Usage is measured
//! against the cgroup the container actually has, so utilization is computed against what the
//! kubelet has put in place: `status.containerStatuses[].resources` (actuated), else
//! `allocatedResources` (admitted by the kubelet), else the spec. Upstream divides by the pending
//! spec (kubernetes issue 142155): a vertical scale-up from 1 to 4 cores makes utilization drop to
//! a quarter before the container has a single extra core, which cancels a needed horizontal
//! scale-up or starts a scale-down; a vertical scale-down inflates it and scales out for nothing;
//! an infeasible resize keeps the wrong figure indefinitely.
//!
//! Everything here is a pure function of the [`PodSample`].

use std::collections::BTreeMap;

use super::observation::{ContainerSample, PodSample};
use crate::api::hpa_plus::UtilizationBase;

/// True for the resources a pod may set at pod level (upstream `IsSupportedPodLevelResource`).
pub fn is_pod_level_resource(resource: &str) -> bool {
    resource == "cpu" || resource == "memory" || resource.starts_with("hugepages-")
}

/// True when the pod sets a pod-level request for a supported resource (upstream
/// `IsPodLevelRequestsSet`).
pub fn has_pod_level_requests(pod: &PodSample) -> bool {
    pod.pod_requests.keys().any(|r| is_pod_level_resource(r))
}

/// The containers whose usage and requests count, in order: regular containers, then the
/// restartable init containers (sidecars). Non-restartable init containers are left out.
pub fn serving_containers(pod: &PodSample) -> impl Iterator<Item = &ContainerSample> {
    pod.containers
        .iter()
        .chain(pod.init_containers.iter().filter(|c| c.sidecar))
}

/// [`serving_containers`], mutable: where the observation records usage samples.
pub fn serving_containers_mut(pod: &mut PodSample) -> impl Iterator<Item = &mut ContainerSample> {
    pod.containers
        .iter_mut()
        .chain(pod.init_containers.iter_mut().filter(|c| c.sidecar))
}

/// The request of `resource` the container runs with: actuated (`status.resources.requests`),
/// else allocated (`allocatedResources`), else the spec. See the module comment for why this
/// differs from upstream during an in-place resize.
pub fn effective_request(c: &ContainerSample, resource: &str) -> Option<i64> {
    c.actual_requests
        .as_ref()
        .and_then(|m| m.get(resource))
        .or_else(|| c.allocated.as_ref().and_then(|m| m.get(resource)))
        .or_else(|| c.requests.get(resource))
        .copied()
}

/// The limit of `resource` the container runs with: actuated (`status.resources.limits`), else
/// the spec.
pub fn effective_limit(c: &ContainerSample, resource: &str) -> Option<i64> {
    c.actual_limits
        .as_ref()
        .and_then(|m| m.get(resource))
        .or_else(|| c.limits.get(resource))
        .copied()
}

/// The value utilization is a percentage of for one container: its request, or with
/// `utilizationBase: Limits` its limit, falling back to the request.
fn container_base(c: &ContainerSample, resource: &str, base: UtilizationBase) -> Option<i64> {
    match base {
        UtilizationBase::Limits => {
            effective_limit(c, resource).or_else(|| effective_request(c, resource))
        }
        UtilizationBase::Requests => effective_request(c, resource),
    }
}

/// The value (milli-units) a pod's usage of `resource` is divided by: summed over the counted
/// containers `container` selects, or the pod-level request when the pod sets one and no
/// container is named. `Err` (upstream's message) fails the metric.
///
/// Sums saturate: two containers with `limits.memory: 5Pi` (5.6e18 milli-bytes each) are past
/// `i64::MAX`, and a wrapped, negative request would read the pod as idle.
pub fn pod_request(
    pod: &PodSample,
    resource: &str,
    container: Option<&str>,
    base: UtilizationBase,
) -> Result<i64, String> {
    if container.is_none() && has_pod_level_requests(pod) {
        return pod_level(pod, resource, base);
    }
    let mut sum = 0i64;
    let mut found = false;
    for c in serving_containers(pod).filter(|c| container.is_none_or(|n| n == c.name)) {
        found = true;
        match container_base(c, resource, base) {
            Some(v) => sum = sum.saturating_add(v),
            None => {
                return Err(format!(
                    "missing request for {resource} in container {} of Pod {}",
                    c.name, pod.name
                ));
            }
        }
    }
    match container {
        Some(n) if !found => Err(format!("container {n} not found in Pod {}", pod.name)),
        _ => Ok(sum),
    }
}

/// The pod's effective request with pod-level resources set (upstream `calculatePodLevelRequests`
/// over `PodRequests`): the pod-level value, else the containers' aggregate, plus overhead. With
/// `utilizationBase: Limits`, a pod-level limit (plus overhead) comes first.
fn pod_level(pod: &PodSample, resource: &str, base: UtilizationBase) -> Result<i64, String> {
    let overhead = pod.overhead.get(resource).copied().unwrap_or(0);
    let pod_value = |m: &BTreeMap<String, i64>| {
        m.get(resource)
            .filter(|_| is_pod_level_resource(resource))
            .copied()
    };
    if base == UtilizationBase::Limits
        && let Some(limit) = pod_value(&pod.pod_limits)
    {
        return Ok(limit.saturating_add(overhead));
    }
    pod_value(&pod.pod_requests)
        .or_else(|| aggregate_request(pod, resource))
        .map(|r| r.saturating_add(overhead))
        .ok_or_else(|| {
            format!(
                "missing pod-level request for {resource} in Pod {}",
                pod.name
            )
        })
}

/// The containers' aggregate request of `resource` (upstream `AggregateContainerRequests`, KEP-753):
/// the larger of (regular containers + sidecars) and the peak of any init step (that init
/// container plus the sidecars started before it). `None` when no container requests it.
pub fn aggregate_request(pod: &PodSample, resource: &str) -> Option<i64> {
    let add = |a: Option<i64>, b: Option<i64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    };
    let mut running = pod
        .containers
        .iter()
        .fold(None, |acc, c| add(acc, effective_request(c, resource)));
    let mut sidecars = None;
    let mut init_peak: Option<i64> = None;
    for c in &pod.init_containers {
        let own = effective_request(c, resource);
        let step = if c.sidecar {
            running = add(running, own);
            sidecars = add(sidecars, own);
            sidecars
        } else {
            add(own, sidecars)
        };
        init_peak = init_peak.max(step);
    }
    running.max(init_peak)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(name: &str, cpu: Option<i64>) -> ContainerSample {
        ContainerSample {
            name: name.into(),
            requests: cpu
                .map(|v| [("cpu".to_owned(), v)].into())
                .unwrap_or_default(),
            ..ContainerSample::default()
        }
    }

    fn sidecar(name: &str, cpu: Option<i64>) -> ContainerSample {
        ContainerSample {
            sidecar: true,
            ..container(name, cpu)
        }
    }

    fn pod(containers: Vec<ContainerSample>, init: Vec<ContainerSample>) -> PodSample {
        PodSample {
            name: "test-pod".into(),
            containers,
            init_containers: init,
            ..PodSample::default()
        }
    }

    fn cpu_map(v: i64) -> BTreeMap<String, i64> {
        [("cpu".to_owned(), v)].into()
    }

    struct Case {
        name: &'static str,
        pod: PodSample,
        container: Option<&'static str>,
        base: UtilizationBase,
        expect: Result<i64, &'static str>,
    }

    fn case(name: &'static str, pod: PodSample, expect: Result<i64, &'static str>) -> Case {
        Case {
            name,
            pod,
            container: None,
            base: UtilizationBase::Requests,
            expect,
        }
    }

    fn two_containers() -> PodSample {
        pod(
            vec![
                container("container1", Some(100)),
                container("container2", Some(50)),
            ],
            vec![],
        )
    }

    fn pod_level(mut p: PodSample, cpu: i64) -> PodSample {
        p.pod_requests = cpu_map(cpu);
        p
    }

    /// A container resized in place from 100m to 400m (spec) that still runs with 100m.
    fn resizing(actual: Option<i64>, allocated: Option<i64>) -> PodSample {
        let mut c = container("app", Some(400));
        c.actual_requests = actual.map(cpu_map);
        c.allocated = allocated.map(cpu_map);
        pod(vec![c], vec![])
    }

    fn check(cases: Vec<Case>) {
        for c in cases {
            let got = pod_request(&c.pod, "cpu", c.container, c.base);
            assert_eq!(got, c.expect.map_err(str::to_owned), "{}", c.name);
        }
    }

    #[test]
    fn containers_and_sidecars_count_init_containers_do_not() {
        check(vec![
            // TestCalculateRequests "Sum container requests if pod-level feature is disabled".
            case("plain pod: containers sum", two_containers(), Ok(150)),
            // TestCalculateRequests "Container: if a container name is specified, calculate
            // requests only for that container".
            Case {
                container: Some("container1"),
                ..case("named container only", two_containers(), Ok(100))
            },
            // TestCalculateRequests "pod with restartable init containers": the sidecar counts,
            // the init container that runs to completion does not.
            case(
                "sidecar counts, init container ignored",
                pod(
                    vec![container("container1", Some(100))],
                    vec![
                        container("init-container1", Some(20)),
                        sidecar("restartable-container1", Some(50)),
                    ],
                ),
                Ok(150),
            ),
            case(
                "a non-restartable init container without a request is ignored",
                pod(
                    vec![container("app", Some(100))],
                    vec![container("init", None)],
                ),
                Ok(100),
            ),
            Case {
                container: Some("proxy"),
                ..case(
                    "a ContainerResource metric may name a sidecar",
                    pod(
                        vec![container("app", Some(100))],
                        vec![sidecar("proxy", Some(30))],
                    ),
                    Ok(30),
                )
            },
            Case {
                container: Some("init"),
                ..case(
                    "an init container that completes cannot be named",
                    pod(
                        vec![container("app", Some(100))],
                        vec![container("init", Some(30))],
                    ),
                    Err("container init not found in Pod test-pod"),
                )
            },
            // TestCalculateRequests "Fail if at least one of the containers is missing requests
            // and pod-level feature/requests are not set".
            case(
                "container without request: no utilization",
                pod(
                    vec![
                        container("container1", None),
                        container("container2", Some(50)),
                    ],
                    vec![],
                ),
                Err("missing request for cpu in container container1 of Pod test-pod"),
            ),
            case(
                "sidecar without request: no utilization",
                pod(
                    vec![container("app", Some(100))],
                    vec![sidecar("proxy", None)],
                ),
                Err("missing request for cpu in container proxy of Pod test-pod"),
            ),
            // TestCalculatePodRequestsFromContainers_NonExistentContainer.
            Case {
                container: Some("non-existent-container"),
                ..case(
                    "named container absent",
                    two_containers(),
                    Err("container non-existent-container not found in Pod test-pod"),
                )
            },
        ]);
    }

    #[test]
    fn pod_level_requests_replace_the_containers_for_resource_metrics() {
        check(vec![
            // TestCalculateRequests "Pod-level resources override container requests when
            // feature enabled and pod resources specified".
            case(
                "pod-level request wins",
                pod_level(two_containers(), 800),
                Ok(800),
            ),
            // TestCalculateRequests "Pod-level resources override missing container requests
            // when feature enabled and pod resources specified".
            case(
                "pod-level request covers containers without one",
                pod_level(
                    pod(
                        vec![
                            container("container1", None),
                            container("container2", Some(50)),
                        ],
                        vec![],
                    ),
                    800,
                ),
                Ok(800),
            ),
            // TestCalculateRequests "Container: if a container name is specified, calculate
            // requests only for that container and ignore pod-level requests".
            Case {
                container: Some("container1"),
                ..case(
                    "a named container ignores pod-level requests",
                    pod_level(two_containers(), 800),
                    Ok(100),
                )
            },
            case(
                "pod-level requests add the pod overhead, as PodRequests does",
                PodSample {
                    overhead: cpu_map(10),
                    ..pod_level(two_containers(), 800)
                },
                Ok(810),
            ),
            case(
                "overhead does not count without pod-level requests",
                PodSample {
                    overhead: cpu_map(10),
                    ..two_containers()
                },
                Ok(150),
            ),
        ]);
    }

    #[test]
    fn an_in_place_resize_counts_what_the_kubelet_has_in_place() {
        check(vec![
            case(
                "resize pending: the spec is not yet in place, the actuated request counts",
                resizing(Some(100), Some(400)),
                Ok(100),
            ),
            case(
                "resize admitted, not yet reported as actuated: the allocated request counts",
                resizing(None, Some(100)),
                Ok(100),
            ),
            case(
                "no container status yet: the spec counts",
                resizing(None, None),
                Ok(400),
            ),
        ]);
    }

    #[test]
    fn pod_level_requests_for_another_resource_fall_back_to_the_aggregate() {
        // Pod-level CPU only; memory comes from the containers as PodRequests aggregates them:
        // max(app + sidecar, init step peak) = max(100 + 50, 50 + 300) = 350.
        let mem = |v: i64| [("memory".to_owned(), v)].into();
        let mut p = pod(
            vec![ContainerSample {
                requests: mem(100),
                ..container("app", Some(100))
            }],
            vec![
                ContainerSample {
                    requests: mem(50),
                    ..sidecar("proxy", Some(10))
                },
                ContainerSample {
                    requests: mem(300),
                    ..container("migrate", Some(10))
                },
            ],
        );
        p.pod_requests = cpu_map(500);
        let req = |r: &str| pod_request(&p, r, None, UtilizationBase::Requests);
        assert_eq!(req("cpu"), Ok(500));
        assert_eq!(req("memory"), Ok(350));
        assert_eq!(
            req("ephemeral-storage"),
            Err("missing pod-level request for ephemeral-storage in Pod test-pod".into())
        );
    }

    #[test]
    fn init_steps_count_the_sidecars_started_before_them() {
        // Upstream's KEP-753 formula: the init container after two sidecars needs 10 + 20 + 200.
        let p = pod(
            vec![container("app", Some(100))],
            vec![
                sidecar("a", Some(10)),
                sidecar("b", Some(20)),
                container("init", Some(200)),
            ],
        );
        assert_eq!(aggregate_request(&p, "cpu"), Some(230));
        assert_eq!(aggregate_request(&p, "memory"), None);
    }

    #[test]
    fn limits_base_uses_actuated_limits_then_requests() {
        let mut c = container("app", Some(100));
        c.limits = cpu_map(400);
        c.actual_limits = Some(cpu_map(200));
        let p = pod(vec![c, container("log", Some(50))], vec![]);
        assert_eq!(
            pod_request(&p, "cpu", None, UtilizationBase::Limits),
            Ok(250),
            "actuated limit of app, request of log (no limit)"
        );
        let mut level = pod_level(p, 300);
        assert_eq!(
            pod_request(&level, "cpu", None, UtilizationBase::Limits),
            Ok(300)
        );
        level.pod_limits = cpu_map(600);
        assert_eq!(
            pod_request(&level, "cpu", None, UtilizationBase::Limits),
            Ok(600)
        );
    }

    #[test]
    fn a_pod_whose_limits_sum_past_i64_reads_as_enormous_not_negative() {
        // `limits.memory: 5Pi` is 5.6e18 milli-bytes: two such containers sum past i64::MAX,
        // and a wrapped (negative) base would read a pod under load as idle.
        let five_pi = crate::api::hpa_plus::quantity_milli(
            &k8s_openapi::apimachinery::pkg::api::resource::Quantity("5Pi".into()),
        )
        .unwrap();
        let huge = |name: &str| ContainerSample {
            limits: [("memory".to_owned(), five_pi)].into(),
            requests: [("memory".to_owned(), five_pi)].into(),
            ..container(name, Some(100))
        };
        let proxy = ContainerSample {
            requests: [("memory".to_owned(), 10)].into(),
            ..sidecar("proxy", None)
        };
        let mut p = pod(vec![huge("a"), huge("b")], vec![proxy]);
        for base in [UtilizationBase::Limits, UtilizationBase::Requests] {
            assert_eq!(
                pod_request(&p, "memory", None, base),
                Ok(i64::MAX),
                "{base:?}"
            );
        }
        assert_eq!(aggregate_request(&p, "memory"), Some(i64::MAX));
        // Pod-level resources: the containers' aggregate, the limit or the request, each
        // plus an overhead that takes it past i64::MAX.
        p.pod_requests = [("cpu".to_owned(), 100)].into();
        p.overhead = [("memory".to_owned(), five_pi), ("cpu".to_owned(), i64::MAX)].into();
        assert_eq!(
            pod_request(&p, "memory", None, UtilizationBase::Requests),
            Ok(i64::MAX)
        );
        assert_eq!(
            pod_request(&p, "cpu", None, UtilizationBase::Requests),
            Ok(i64::MAX)
        );
        p.pod_limits = [("cpu".to_owned(), i64::MAX)].into();
        assert_eq!(
            pod_request(&p, "cpu", None, UtilizationBase::Limits),
            Ok(i64::MAX)
        );
    }

    #[test]
    fn only_supported_resources_make_requests_pod_level() {
        let mut p = two_containers();
        p.pod_requests = [("example.com/gpu".to_owned(), 1000)].into();
        assert!(!has_pod_level_requests(&p));
        assert_eq!(
            pod_request(&p, "cpu", None, UtilizationBase::Requests),
            Ok(150)
        );
        p.pod_requests.insert("hugepages-2Mi".into(), 1000);
        assert!(has_pod_level_requests(&p));
    }

    #[test]
    fn serving_containers_are_containers_then_sidecars() {
        let mut p = pod(
            vec![container("app", None)],
            vec![container("init", None), sidecar("proxy", None)],
        );
        let names: Vec<_> = serving_containers(&p).map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["app", "proxy"]);
        assert_eq!(serving_containers_mut(&mut p).count(), 2);
    }
}
