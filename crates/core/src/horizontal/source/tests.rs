use super::*;
use crate::api::hpa_plus::MetricTarget;

/// A metric of type `t` that sets its member. The match is exhaustive: a new
/// [`MetricSourceType`] fails this test's build until it has a fixture here, and then
/// [`every_type_is_dispatched_to_its_own_source`] fails until [`entry`] and [`TYPES`] know it.
fn metric_of(t: MetricSourceType) -> MetricSpec {
    let target = MetricTarget::average("1");
    match t {
        MetricSourceType::Resource => MetricSpec::resource("cpu", target),
        MetricSourceType::ContainerResource => MetricSpec {
            type_: t,
            container_resource: Some(ContainerResourceMetricSource {
                name: "cpu".into(),
                container: "app".into(),
                target,
            }),
            ..MetricSpec::default()
        },
        MetricSourceType::Pods => MetricSpec::pods("rps", target),
        MetricSourceType::Object => MetricSpec::object("Service", "web", "rps", target),
        MetricSourceType::External => MetricSpec::external("queue", target),
        MetricSourceType::Prometheus => MetricSpec::prometheus("rps", "sum(rate(x[1m]))", target),
    }
}

/// The position of `t` in [`TYPES`] (exhaustive, like [`metric_of`]).
fn position(t: MetricSourceType) -> usize {
    match t {
        MetricSourceType::Resource => 0,
        MetricSourceType::ContainerResource => 1,
        MetricSourceType::Pods => 2,
        MetricSourceType::Object => 3,
        MetricSourceType::External => 4,
        MetricSourceType::Prometheus => 5,
    }
}

#[test]
fn types_lists_every_type_once_in_member_order() {
    for (i, t) in TYPES.iter().enumerate() {
        assert_eq!(position(*t), i, "{t:?}");
    }
}

#[test]
fn every_type_is_dispatched_to_its_own_source() {
    for t in TYPES {
        let m = metric_of(t);
        let source = of(&m).unwrap_or_else(|| panic!("{t:?} has no source"));
        let kind = kind(&m);
        // The member the dispatch reads is the one the YAML names for this type.
        let yaml = serde_json::to_value(&m).unwrap();
        assert_eq!(yaml["type"], format!("{t:?}"));
        assert!(yaml.get(kind.member).is_some(), "{t:?}: {}", kind.member);
        // Its status is of its type and sets the same member.
        let status = serde_json::to_value(source.status(MetricValueStatus::default())).unwrap();
        assert_eq!(status["type"], format!("{t:?}"), "{t:?}");
        assert!(status.get(kind.member).is_some(), "{t:?} status");
        assert_eq!(
            kind.failure_reason,
            format!("FailedGet{t:?}Metric"),
            "upstream's reason"
        );
        assert_eq!(source.target(), &MetricTarget::average("1"));
        assert!(!source.name().is_empty());
        // Another type's view of the same metric finds no member but still says what it is.
        for other in TYPES.into_iter().filter(|o| *o != t) {
            assert!(entry(&m, other).1.is_none(), "{t:?} as {other:?}");
        }
    }
}

#[test]
fn a_type_without_its_member_has_no_source_but_a_kind() {
    let m = MetricSpec {
        type_: MetricSourceType::External,
        ..MetricSpec::default()
    };
    assert!(of(&m).is_none());
    assert!(m.target().is_none());
    assert_eq!(metric_name(&m), "External");
    assert!(!kind(&m).per_pod, "External scales to zero even when unset");
}

#[test]
fn a_placed_load_is_what_the_source_reads_back() {
    for t in TYPES {
        let m = metric_of(t);
        let source = of(&m).unwrap();
        let mut pod = PodSample {
            name: "p".into(),
            containers: vec![crate::horizontal::ContainerSample {
                name: "app".into(),
                ..crate::horizontal::ContainerSample::default()
            }],
            ..PodSample::default()
        };
        let mut observed = Observation::default();
        source.place_load(4500, &mut pod, &mut observed);
        observed.pods = vec![pod];
        assert_eq!(source.load(&observed), Some(4500), "{t:?}");
        let (total, per_pod) = match source.read(&observed).unwrap() {
            Seen::PerPod { values, .. } => (values.values().sum(), true),
            Seen::Total(v) => (v, false),
        };
        assert_eq!(total, 4500, "{t:?}");
        assert_eq!(kind(&m).per_pod, per_pod, "{t:?}");
    }
}

#[test]
fn typed_finds_a_fetchers_own_sources_only() {
    let prom = metric_of(MetricSourceType::Prometheus);
    let ext = metric_of(MetricSourceType::External);
    assert_eq!(
        typed::<PrometheusMetricSource>(&prom).map(|p| p.query.as_str()),
        Some("sum(rate(x[1m]))")
    );
    assert!(typed::<PrometheusMetricSource>(&ext).is_none());
    let mut mislabelled = prom.clone();
    mislabelled.type_ = MetricSourceType::External;
    assert!(typed::<PrometheusMetricSource>(&mislabelled).is_none());
}

#[test]
fn only_an_unnamed_prometheus_metric_has_its_own_series_label() {
    let mut m = metric_of(MetricSourceType::Prometheus);
    assert_eq!(of(&m).unwrap().series_label(2), None);
    if let Some(p) = &mut m.prometheus {
        p.name = None;
    }
    assert_eq!(
        of(&m).unwrap().series_label(2).as_deref(),
        Some("prometheus-2")
    );
    assert_eq!(metric_name(&m), "sum(rate(x[1m]))");
    for t in TYPES
        .into_iter()
        .filter(|t| *t != MetricSourceType::Prometheus)
    {
        assert_eq!(of(&metric_of(t)).unwrap().series_label(0), None, "{t:?}");
    }
}

#[test]
fn the_crd_checks_every_member() {
    let crds = serde_json::to_string(&crate::api::crds()).unwrap();
    for t in TYPES {
        let member = entry(&MetricSpec::default(), t).0.member;
        for rule in [
            format!("(self.type == '{t:?}') == has(self.{member})"),
            format!("has(m.{member}) && m.{member}.target.type == 'Watermark'"),
        ] {
            assert!(crds.contains(&rule), "{t:?}: the CRD lacks {rule}");
        }
    }
}

#[test]
fn loads_summing_past_i64_read_as_enormous_not_negative() {
    // Two pods (two containers each) or two series at i64::MAX: an adapter or a tenant's
    // requests can report any value.
    let app = |name: &str| crate::horizontal::ContainerSample {
        name: name.into(),
        usage: [("cpu".to_owned(), Ok(i64::MAX))].into(),
        ..crate::horizontal::ContainerSample::default()
    };
    let pod = |name: &str| PodSample {
        name: name.into(),
        containers: vec![app("app"), app("log")],
        metrics: [("rps".to_owned(), Ok(i64::MAX))].into(),
        ..PodSample::default()
    };
    let mut observed = Observation {
        pods: vec![pod("a"), pod("b")],
        ..Observation::default()
    };
    observed
        .external_metrics
        .insert("queue".into(), Ok(vec![i64::MAX, i64::MAX]));
    for t in [
        MetricSourceType::Resource,
        MetricSourceType::Pods,
        MetricSourceType::External,
    ] {
        let m = metric_of(t);
        let source = of(&m).unwrap();
        assert_eq!(source.load(&observed), Some(i64::MAX), "{t:?}");
        let total = match source.read(&observed).unwrap() {
            Seen::PerPod { values, .. } => values.values().copied().max().unwrap(),
            Seen::Total(v) => v,
        };
        assert_eq!(total, i64::MAX, "{t:?}");
    }
}
