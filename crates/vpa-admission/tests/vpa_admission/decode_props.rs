//! Stable-toolchain companion of the cargo-fuzz target (`fuzz/`): the decoder and the whole
//! answer path on arbitrary bytes and on structured mutations of the fixture AdmissionReview.
//! Properties: nothing panics; an answered review echoes the uid; a pod is never denied.

// Helpers outside #[test] fns unwrap too; a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use plimsoll_vpa_admission::review;
use plimsoll_vpa_admission::webhook::{Webhook, fixture_webhook};
use proptest::prelude::*;
use serde_json::Value;

const REVIEW: &str = include_str!("../../../core/tests/data/admission/review-two-containers.json");

fn webhook() -> &'static Webhook {
    static W: std::sync::OnceLock<Webhook> = std::sync::OnceLock::new();
    W.get_or_init(fixture_webhook)
}

fn check(body: &[u8]) -> Result<(), TestCaseError> {
    let decoded = review::decode(body);
    match webhook().answer(body) {
        Ok(response) => {
            let request = decoded.map_err(|e| TestCaseError::fail(format!("answered but {e}")))?;
            prop_assert_eq!(&response.uid, &request.uid);
            if request.kind.group.is_empty() && request.kind.kind == "Pod" {
                prop_assert!(response.allowed, "pod denied: {:?}", response);
            }
        }
        Err(e) => prop_assert_eq!(Err(e), decoded.map(|_| ())),
    }
    Ok(())
}

/// Every JSON Pointer of `v` (objects and arrays included).
fn pointers(v: &Value, at: &str, out: &mut Vec<String>) {
    out.push(at.to_owned());
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                pointers(
                    child,
                    &format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                pointers(child, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[a-zA-Z0-9.+-]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("1e400"),
            Just("-1"),
            Just("0"),
            Just("9223372036854775807Ei"),
            Just("100m"),
            Just("1.5Gi")
        ]
        .prop_map(|s| Value::String(s.to_owned())),
        Just(Value::Array(Vec::new())),
        Just(Value::Object(serde_json::Map::new())),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(body in proptest::collection::vec(any::<u8>(), 0..512)) {
        check(&body)?;
    }

    #[test]
    fn mutated_fixture(edits in proptest::collection::vec((any::<prop::sample::Index>(), leaf(), any::<bool>()), 1..6)) {
        let mut v: Value = serde_json::from_str(REVIEW).unwrap();
        for (index, value, remove) in edits {
            let mut paths = Vec::new();
            pointers(&v, "", &mut paths);
            let path = index.get(&paths).clone();
            if path.is_empty() {
                continue;
            }
            let (parent, key) = path.rsplit_once('/').unwrap();
            if remove
                && let Some(m) = v.pointer_mut(parent).and_then(Value::as_object_mut)
            {
                m.remove(&key.replace("~1", "/").replace("~0", "~"));
                continue;
            }
            if let Some(slot) = v.pointer_mut(&path) {
                *slot = value;
            }
        }
        check(&serde_json::to_vec(&v).unwrap())?;
    }
}
