//! The metadata a cut-down copy of an object keeps. The services cache objects namespace users
//! write (pods, ReplicaSets, VPAs, CronHPAs) and keep of each only what their decisions read:
//! always its identity, and of its annotations those they name. Each caller lists the rest.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The identity of `meta`, taken out of it: its name and namespace (a cache's key), uid and
/// resourceVersion (the reference of an Event, a precondition). Everything else is default.
pub fn identity(meta: &mut ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        name: meta.name.take(),
        namespace: meta.namespace.take(),
        uid: meta.uid.take(),
        resource_version: meta.resource_version.take(),
        ..ObjectMeta::default()
    }
}

/// The annotations of `meta` whose key `keep` accepts, taken out of it; present (maybe empty)
/// when `meta` had any, as readers that tell "none" from "none kept" expect.
pub fn annotations(
    meta: &mut ObjectMeta,
    keep: impl Fn(&str) -> bool,
) -> Option<BTreeMap<String, String>> {
    meta.annotations.take().map(|mut all| {
        all.retain(|key, _| keep(key));
        all
    })
}

/// The length of `value` as JSON, counted without keeping the text: what a cut-down object
/// still holds, for the budgets of what a cache keeps ([`crate::pod_fields::POD_BUDGET`],
/// [`crate::api::limits::MAX_SPEC_BYTES`]).
pub fn json_len(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Typed Kubernetes objects serialize without error, and this writer never fails.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The annotation a cached object carries when (part of) its spec was left out for passing a
/// budget: an autoscaler's or VPA's spec past [`crate::api::limits::MAX_SPEC_BYTES`], a
/// workload's selector past the scale cache's. Its value is the size in bytes. Its key has a `:`,
/// which no annotation key the API server accepts has, so no object a tenant writes carries it;
/// it never leaves the cache (the services patch the fields they own).
pub const SPEC_LEFT_OUT: &str = "plimsoll.dev/spec-left-out:bytes";

/// Marks `meta` as the metadata of an object whose spec of `bytes` was left out.
pub fn mark_spec_left_out(meta: &mut ObjectMeta, bytes: usize) {
    meta.annotations
        .get_or_insert_default()
        .insert(SPEC_LEFT_OUT.to_owned(), bytes.to_string());
}

/// Why an object whose spec was left out ([`mark_spec_left_out`]) is not served, as a condition
/// says it; `None` for any other.
pub fn spec_left_out(meta: &ObjectMeta) -> Option<String> {
    let bytes = meta.annotations.as_ref()?.get(SPEC_LEFT_OUT)?;
    Some(format!(
        "spec: {bytes} bytes of JSON; at most {} are served (and cached)",
        crate::api::limits::MAX_SPEC_BYTES
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_and_the_named_annotations_are_taken_and_nothing_else() {
        let mut meta = ObjectMeta {
            name: Some("web".into()),
            namespace: Some("team".into()),
            uid: Some("u".into()),
            resource_version: Some("7".into()),
            generation: Some(3),
            labels: Some([("a".to_owned(), "b".to_owned())].into()),
            annotations: Some(
                [
                    ("keep".to_owned(), "1".to_owned()),
                    ("drop".to_owned(), "2".to_owned()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        };
        let kept = ObjectMeta {
            annotations: annotations(&mut meta, |k| k == "keep"),
            ..identity(&mut meta)
        };
        assert_eq!(
            kept,
            ObjectMeta {
                name: Some("web".into()),
                namespace: Some("team".into()),
                uid: Some("u".into()),
                resource_version: Some("7".into()),
                annotations: Some([("keep".to_owned(), "1".to_owned())].into()),
                ..ObjectMeta::default()
            }
        );
        let mut none = ObjectMeta::default();
        assert_eq!(annotations(&mut none, |_| true), None);
        let mut some = ObjectMeta {
            annotations: Some([("drop".to_owned(), String::new())].into()),
            ..ObjectMeta::default()
        };
        assert_eq!(annotations(&mut some, |_| false), Some(BTreeMap::new()));
    }
}
