use super::*;
use kube::CustomResourceExt;
use kube::Resource;

const VPA_NGINX: &str = include_str!("../../../tests/data/vpa-nginx.yaml");
const CHECKPOINT_NGINX: &str = include_str!("../../../tests/data/vpa-checkpoint-nginx.yaml");

/// Parses `yaml` as `T`, writes it back, and requires the JSON of both to be identical.
fn assert_round_trip<T: serde::de::DeserializeOwned + Serialize>(yaml: &str) -> T {
    let input: serde_json::Value = serde_saphyr::from_str(yaml).expect("fixture is YAML");
    let typed: T = serde_saphyr::from_str(yaml).expect("fixture deserializes");
    let output = serde_json::to_value(&typed).expect("serializes");
    assert_eq!(input, output, "round trip changed the object");
    typed
}

#[test]
fn vpa_fixture_round_trips() {
    let vpa: VerticalPodAutoscaler = assert_round_trip(VPA_NGINX);
    assert_eq!(vpa.spec.update_mode(), UpdateMode::Off);
    let policy = vpa.spec.container_policy("nginx").expect("policy");
    assert_eq!(
        policy.min_allowed.as_ref().expect("min")["cpu"],
        Quantity("90m".into())
    );
    assert!(vpa.spec.validate().is_ok(), "{:?}", vpa.spec.validate());
}

#[test]
fn checkpoint_fixture_round_trips() {
    let cp: VerticalPodAutoscalerCheckpoint = assert_round_trip(CHECKPOINT_NGINX);
    let status = cp.status.expect("status");
    assert!(status.first_sample_start.is_none());
    assert_eq!(status.total_samples_count, Some(9371));
    assert_eq!(
        status
            .cpu_histogram
            .expect("cpu")
            .bucket_weights
            .expect("w")["75"],
        744
    );
}

#[test]
fn checkpoint_writes_null_timestamps_like_upstream() {
    let cp = VerticalPodAutoscalerCheckpoint {
        status: Some(VerticalPodAutoscalerCheckpointStatus::default()),
        ..VerticalPodAutoscalerCheckpoint::new(
            "a-b",
            VerticalPodAutoscalerCheckpointSpec::default(),
        )
    };
    let v = serde_json::to_value(&cp).expect("serializes");
    assert_eq!(v["apiVersion"], "autoscaling.k8s.io/v1");
    assert_eq!(v["kind"], "VerticalPodAutoscalerCheckpoint");
    assert!(v["status"]["lastUpdateTime"].is_null());
    assert!(
        v["status"]
            .as_object()
            .expect("obj")
            .contains_key("firstSampleStart")
    );
}

#[test]
fn unknown_enum_values_survive_and_are_reported() {
    let yaml = VPA_NGINX.replace("updateMode: \"Off\"", "updateMode: Sometimes");
    let vpa: VerticalPodAutoscaler = assert_round_trip(&yaml);
    assert_eq!(
        vpa.spec.update_mode(),
        UpdateMode::Unknown("Sometimes".into())
    );
    let errs = vpa.spec.validate().expect_err("invalid");
    assert!(errs.has_path("spec.updatePolicy.updateMode"), "{errs}");
}

/// The target's kind and name are one segment of the URLs the target is read by; upstream's
/// CRD does not say so, so only `validate` refuses them.
#[test]
fn the_target_names_one_path_segment() {
    let mut vpa: VerticalPodAutoscaler = serde_saphyr::from_str(VPA_NGINX).expect("vpa");
    vpa.spec.target_ref.kind = "Deployment/x".into();
    vpa.spec.target_ref.name = "..".into();
    let errs = vpa.spec.validate().expect_err("invalid");
    assert_eq!(
        errs.to_string(),
        "spec.targetRef.kind: may not contain '/'; spec.targetRef.name: may not be '..'"
    );
    let crd = serde_json::to_string(&VerticalPodAutoscaler::crd()).expect("crd");
    assert!(
        !crd.contains("may not be '.'"),
        "the VPA CRD stays upstream's"
    );
}

#[test]
fn crds_have_upstream_names_and_subresources() {
    let vpa = VerticalPodAutoscaler::crd();
    assert_eq!(vpa.spec.names.short_names, Some(vec!["vpa".to_owned()]));
    assert_eq!(vpa.spec.group, "autoscaling.k8s.io");
    assert!(vpa.spec.versions[0].subresources.is_some());
    let cp = VerticalPodAutoscalerCheckpoint::crd();
    assert_eq!(
        cp.spec.names.short_names,
        Some(vec!["vpacheckpoint".to_owned()])
    );
    assert_eq!(
        cp.metadata.name.as_deref(),
        Some(VerticalPodAutoscalerCheckpoint::crd_name())
    );
    assert!(cp.spec.versions[0].subresources.is_none());
    let schema = serde_json::to_value(&cp.spec.versions[0].schema).expect("json");
    let status = &schema["openAPIV3Schema"]["properties"]["status"]["properties"];
    assert_eq!(status["firstSampleStart"]["nullable"], true);
    assert_eq!(
        status["cpuHistogram"]["properties"]["bucketWeights"]["x-kubernetes-preserve-unknown-fields"],
        true
    );
    assert_eq!(
        VerticalPodAutoscalerCheckpoint::plural(&()),
        "verticalpodautoscalercheckpoints"
    );
}

#[test]
fn recommender_selection() {
    let mut vpa: VerticalPodAutoscaler = serde_saphyr::from_str(VPA_NGINX).expect("yaml");
    assert!(vpa.is_for_recommender("plimsoll", true));
    assert!(!vpa.is_for_recommender("plimsoll", false));
    vpa.spec.recommenders = Some(vec![RecommenderSelector {
        name: "plimsoll".into(),
    }]);
    assert!(vpa.is_for_recommender("plimsoll", false));
    vpa.spec.recommenders = Some(vec![RecommenderSelector {
        name: "default".into(),
    }]);
    assert!(!vpa.is_for_recommender("plimsoll", true));
}

/// A valid spec to break one field at a time.
fn spec() -> VerticalPodAutoscalerSpec {
    serde_saphyr::from_str::<VerticalPodAutoscaler>(VPA_NGINX)
        .expect("yaml")
        .spec
}

fn policy(spec: &mut VerticalPodAutoscalerSpec) -> &mut ContainerResourcePolicy {
    &mut spec
        .resource_policy
        .as_mut()
        .expect("rp")
        .container_policies
        .as_mut()
        .expect("cp")[0]
}

#[test]
#[allow(clippy::too_many_lines)] // one table
fn validation_reports_every_problem_with_its_path() {
    type Breaker = fn(&mut VerticalPodAutoscalerSpec);
    let cases: Vec<(&str, Breaker)> = vec![
        (
            "spec.resourcePolicy.containerPolicies[0].minAllowed.cpu",
            |s| {
                policy(s)
                    .min_allowed
                    .as_mut()
                    .expect("min")
                    .insert("cpu".into(), Quantity("2".into()));
            },
        ),
        (
            "spec.resourcePolicy.containerPolicies[0].maxAllowed.memory",
            |s| {
                policy(s)
                    .max_allowed
                    .as_mut()
                    .expect("max")
                    .insert("memory".into(), Quantity("lots".into()));
            },
        ),
        ("spec.resourcePolicy.containerPolicies[0].mode", |s| {
            policy(s).mode = Some(ContainerScalingMode::from("Sometimes"));
        }),
        (
            "spec.resourcePolicy.containerPolicies[0].controlledValues",
            |s| {
                policy(s).controlled_values = Some(ControlledValues::from("LimitsOnly"));
            },
        ),
        (
            "spec.resourcePolicy.containerPolicies[0].controlledResources[1]",
            |s| {
                policy(s).controlled_resources = Some(vec!["cpu".into(), "gpu".into()]);
            },
        ),
        (
            "spec.resourcePolicy.containerPolicies[0].containerName",
            |s| {
                policy(s).container_name = None;
            },
        ),
        (
            "spec.resourcePolicy.containerPolicies[1].containerName",
            |s| {
                let dup = policy(s).clone();
                s.resource_policy
                    .as_mut()
                    .expect("rp")
                    .container_policies
                    .as_mut()
                    .expect("cp")
                    .push(dup);
            },
        ),
        (
            "spec.resourcePolicy.containerPolicies[0].targetCPUPercentile",
            |s| {
                policy(s).target_cpu_percentile = Some(Quantity("1.5".into()));
            },
        ),
        (
            "spec.resourcePolicy.containerPolicies[0].oomBumpUpRatio",
            |s| {
                policy(s).oom_bump_up_ratio = Some(Quantity("0.5".into()));
            },
        ),
        ("spec.updatePolicy.minReplicas", |s| {
            s.update_policy.as_mut().expect("up").min_replicas = Some(0);
        }),
        (
            "spec.updatePolicy.evictionRequirements[0].changeRequirement",
            |s| {
                s.update_policy.as_mut().expect("up").eviction_requirements =
                    Some(vec![EvictionRequirement {
                        resources: vec!["cpu".into()],
                        change_requirement: EvictionChangeRequirement::from("Whenever"),
                    }]);
            },
        ),
        ("spec.recommenders", |s| {
            s.recommenders = Some(vec![
                RecommenderSelector { name: "a".into() },
                RecommenderSelector { name: "b".into() },
            ]);
        }),
        ("spec.targetRef.name", |s| s.target_ref.name.clear()),
        ("spec.startupBoost.cpu.factor", |s| {
            s.startup_boost = Some(StartupBoost {
                cpu: Some(GenericStartupBoost {
                    type_: StartupBoostType::Factor,
                    factor: None,
                    quantity: None,
                    duration_seconds: None,
                }),
            });
        }),
        // Issue #28: a negative bound became a negative request.
        (
            "spec.resourcePolicy.containerPolicies[0].maxAllowed.cpu",
            |s| {
                policy(s)
                    .max_allowed
                    .as_mut()
                    .expect("max")
                    .insert("cpu".into(), Quantity("-1".into()));
            },
        ),
        (
            "spec.resourcePolicy.containerPolicies[0].minAllowed.memory",
            |s| {
                policy(s)
                    .min_allowed
                    .as_mut()
                    .expect("min")
                    .insert("memory".into(), Quantity("-1Mi".into()));
            },
        ),
        // Startup boosts that lower, or last a negative time.
        ("spec.startupBoost.cpu.factor", |s| {
            s.startup_boost = Some(boost(StartupBoostType::Factor, Some(0), None, None));
        }),
        ("spec.startupBoost.cpu.quantity", |s| {
            s.startup_boost = Some(boost(StartupBoostType::Quantity, None, Some("-1"), None));
        }),
        (
            "spec.resourcePolicy.containerPolicies[0].startupBoost.cpu.durationSeconds",
            |s| {
                policy(s).startup_boost = Some(boost(
                    StartupBoostType::Quantity,
                    None,
                    Some("500m"),
                    Some(-1),
                ));
            },
        ),
        // The size limits of the CRD.
        ("spec.resourcePolicy.containerPolicies", |s| {
            let named = |i: usize| ContainerResourcePolicy {
                container_name: Some(format!("c{i}")),
                ..ContainerResourcePolicy::default()
            };
            s.resource_policy = Some(PodResourcePolicy {
                container_policies: Some((0..65).map(named).collect()),
            });
        }),
        ("spec.resourcePolicy.containerPolicies[0].maxAllowed", |s| {
            policy(s).max_allowed = Some(
                (0..17)
                    .map(|i| (format!("example.com/r{i}"), Quantity("1".into())))
                    .collect(),
            );
        }),
        (
            "spec.resourcePolicy.containerPolicies[0].controlledResources",
            |s| {
                policy(s).controlled_resources = Some(vec!["cpu".into(); 17]);
            },
        ),
        (
            "spec.resourcePolicy.containerPolicies[0].containerName",
            |s| {
                policy(s).container_name = Some("c".repeat(64));
            },
        ),
        ("spec.targetRef.name", |s| {
            s.target_ref.name = "w".repeat(254);
        }),
        ("spec.recommenders[0].name", |s| {
            s.recommenders = Some(vec![RecommenderSelector {
                name: "r".repeat(254),
            }]);
        }),
        ("spec.updatePolicy.evictionRequirements", |s| {
            s.update_policy.as_mut().expect("up").eviction_requirements = Some(vec![
                    EvictionRequirement {
                        resources: vec!["cpu".into()],
                        change_requirement: EvictionChangeRequirement::TargetHigherThanRequests,
                    };
                    17
                ]);
        }),
    ];
    for (path, breaker) in cases {
        let mut s = spec();
        breaker(&mut s);
        let errs = s.validate().expect_err(path);
        assert!(errs.has_path(path), "expected {path}, got {errs}");
    }
}

fn boost(
    type_: StartupBoostType,
    factor: Option<i32>,
    quantity: Option<&str>,
    duration_seconds: Option<i32>,
) -> StartupBoost {
    StartupBoost {
        cpu: Some(GenericStartupBoost {
            type_,
            factor,
            quantity: quantity.map(|q| Quantity(q.into())),
            duration_seconds,
        }),
    }
}

/// A negative bound is reported once, as negative (not also as above `maxAllowed`), and its
/// neighbours (0, which is no bound, and a huge amount) pass.
#[test]
fn negative_bounds_are_refused_and_their_neighbours_accepted() {
    let mut s = spec();
    let p = policy(&mut s);
    p.min_allowed = Some(ResourceList::from([("cpu".into(), Quantity("-5".into()))]));
    p.max_allowed = Some(ResourceList::from([("cpu".into(), Quantity("-1".into()))]));
    let errs = s.validate().expect_err("negative");
    assert_eq!(
        errs.to_string(),
        "spec.resourcePolicy.containerPolicies[0].minAllowed.cpu: must be >= 0, got -5; \
         spec.resourcePolicy.containerPolicies[0].maxAllowed.cpu: must be >= 0, got -1"
    );
    let p = policy(&mut s);
    p.min_allowed = Some(ResourceList::from([("cpu".into(), Quantity("0".into()))]));
    p.max_allowed = Some(ResourceList::from([("cpu".into(), Quantity("1E".into()))]));
    s.startup_boost = Some(boost(StartupBoostType::Factor, Some(1), None, Some(0)));
    assert_eq!(s.validate(), Ok(()));
}

#[test]
fn container_policy_falls_back_to_wildcard() {
    let mut s = spec();
    assert!(s.container_policy("sidecar").is_none());
    s.resource_policy
        .as_mut()
        .expect("rp")
        .container_policies
        .as_mut()
        .expect("cp")
        .push(ContainerResourcePolicy {
            container_name: Some("*".into()),
            mode: Some(ContainerScalingMode::Off),
            ..ContainerResourcePolicy::default()
        });
    assert_eq!(
        s.container_policy("sidecar").and_then(|p| p.mode.clone()),
        Some(ContainerScalingMode::Off)
    );
    assert_eq!(
        s.container_policy("nginx")
            .and_then(|p| p.container_name.clone()),
        Some("nginx".into())
    );
}

/// Whether `name` is a DNS-1123 subdomain, as the API server checks an object's name.
fn is_object_name(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

#[test]
fn a_checkpoint_name_is_upstreams_and_valid_for_any_vpa_name() {
    assert_eq!(
        VerticalPodAutoscalerCheckpoint::object_name("web", "app"),
        "web-app"
    );
    let container = "c".repeat(63);
    let mut seen = std::collections::BTreeSet::new();
    // Every length around the limit, and cuts that land on a `-` or a `.`.
    for len in 180..=253 {
        for vpa in [
            "v".repeat(len),
            format!("{}-x", "v".repeat(len - 2)),
            format!("{}.x", "v".repeat(len - 2)),
        ] {
            for container in ["app", container.as_str()] {
                let name = VerticalPodAutoscalerCheckpoint::object_name(&vpa, container);
                assert!(is_object_name(&name), "{} characters: {name}", name.len());
                assert_eq!(
                    name,
                    VerticalPodAutoscalerCheckpoint::object_name(&vpa, container),
                    "the same name every time"
                );
                assert!(seen.insert(name), "two checkpoints with one name");
            }
        }
    }
}
