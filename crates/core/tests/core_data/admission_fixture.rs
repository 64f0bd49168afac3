//! The admission fixture: a real two-container pod in an `AdmissionReview` gets exactly the
//! expected JSON Patch (see `tests/data/admission/README.md`).

use k8s_openapi::api::core::v1::Pod;
use plimsoll_core::quantity::Quantity;
use plimsoll_core::vertical::admission::{AdmissionVpa, admission_patch, admission_pod};
use plimsoll_core::vertical::policy::UpdateMode;
use plimsoll_core::vertical::resources::{ContainerRecommendation, Resources};

#[test]
fn two_container_pod_gets_expected_patch() {
    let recommendation = |container: &str, cpu: &str, memory: &str| ContainerRecommendation {
        container: container.to_owned(),
        target: Resources {
            cpu: Some(Quantity::parse(cpu).unwrap()),
            memory: Some(Quantity::parse(memory).unwrap()),
        },
        ..ContainerRecommendation::default()
    };
    let review: serde_json::Value =
        serde_json::from_str(include_str!("../data/admission/review-two-containers.json")).unwrap();
    let pod: Pod = serde_json::from_value(review["request"]["object"].clone()).unwrap();
    let vpa = AdmissionVpa {
        name: "web".to_owned(),
        update_mode: UpdateMode::Recreate,
        policies: Vec::new(),
        recommendation: Some(vec![
            recommendation("app", "250m", "300Mi"),
            recommendation("log-shipper", "25m", "64Mi"),
        ]),
        boosts: plimsoll_core::vertical::startup_boost::StartupBoosts::default(),
    };
    let patch = admission_patch(&admission_pod(&pod).unwrap(), &vpa, None, None);
    let got = serde_json::to_value(&patch.ops).unwrap();
    let want: serde_json::Value =
        serde_json::from_str(include_str!("../data/admission/expected-patch.json")).unwrap();
    assert_eq!(
        got,
        want,
        "got {}",
        serde_json::to_string_pretty(&got).unwrap()
    );
}
