//! The two sizes a real cluster refuses a write at.
//!
//! - kube-apiserver reads at most 3 MiB of a create, update or patch body and answers 413
//!   `RequestEntityTooLarge` past it (twice etcd's limit, for JSON that shrinks to protobuf).
//! - etcd refuses a request past 1.5 MiB (its `--max-request-bytes` default). kube-apiserver
//!   does not map that error: the client gets a 500 with etcd's message and no reason
//!   (kubernetes/kubernetes#112152). What etcd stores is the object as protobuf for a built-in
//!   kind and as JSON for a custom resource, so a label-padded custom resource that fits can be
//!   pushed past the limit by its own status write; that is the failure a tenant can make a
//!   controller meet at every loop.

use serde_json::Value;

use plimsoll_core::cut_down::json_len;

use crate::error::ApiError;
use crate::protobuf;

/// kube-apiserver's `MaxRequestBodyBytes` for writes.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// etcd's default `--max-request-bytes`.
pub const ETCD_MAX_REQUEST_BYTES: usize = 1024 * 1024 + 512 * 1024;

/// Whether kube-apiserver would read a `verb` request's body of `len` bytes: the 413 when not.
pub fn check_body(verb: &str, len: usize) -> Result<(), ApiError> {
    if matches!(verb, "create" | "update" | "patch") && len > MAX_BODY_BYTES {
        return Err(ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {MAX_BODY_BYTES}"),
        ));
    }
    Ok(())
}

/// Whether etcd would store `obj`: the 500 it causes when not.
pub fn check_stored(obj: &Value) -> Result<(), ApiError> {
    if stored_size(obj) > ETCD_MAX_REQUEST_BYTES {
        return Err(ApiError::new(500, "", "etcdserver: request is too large"));
    }
    Ok(())
}

/// The bytes etcd would hold for `obj`. Protobuf is at most a few bytes larger than compact
/// JSON (field names cost it nothing; a map entry's framing about what the quotes cost JSON),
/// so a built-in kind is only encoded when its JSON is within a factor of two of the limit.
fn stored_size(obj: &Value) -> usize {
    let json = json_len(obj);
    if json <= ETCD_MAX_REQUEST_BYTES / 2 || !protobuf::encodable(obj) {
        return json;
    }
    protobuf::encode(obj).map_or(json, |bytes| bytes.len())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn padded(api_version: &str, kind: &str, bytes: usize) -> Value {
        let labels: serde_json::Map<String, Value> = (0..bytes / 80)
            .map(|i| (format!("pad-{i:08}"), json!("x".repeat(63))))
            .collect();
        json!({"apiVersion": api_version, "kind": kind,
               "metadata": {"name": "a", "namespace": "default", "labels": labels}})
    }

    #[test]
    fn a_custom_resource_is_measured_as_its_json() {
        let under = padded("autoscaling.k8s.io/v1", "VerticalPodAutoscaler", 1_500_000);
        assert!(json_len(&under) <= ETCD_MAX_REQUEST_BYTES);
        assert_eq!(check_stored(&under), Ok(()));
        let over = padded("autoscaling.k8s.io/v1", "VerticalPodAutoscaler", 1_700_000);
        assert!(json_len(&over) > ETCD_MAX_REQUEST_BYTES);
        let e = check_stored(&over).unwrap_err();
        assert_eq!((e.code, e.reason), (500, ""));
        assert_eq!(e.message, "etcdserver: request is too large");
    }

    #[test]
    fn a_built_in_kind_is_measured_as_protobuf() {
        // 60,000 containers are 1.9 MB of JSON, mostly field names, which protobuf does not
        // carry: etcd stores such a pod, and not the same object as a custom resource.
        let containers: Vec<Value> = (0..60_000)
            .map(|i| json!({"name": format!("c{i:05}"), "image": "x"}))
            .collect();
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": "a", "namespace": "default"},
                         "spec": {"containers": containers}});
        assert!(json_len(&pod) > ETCD_MAX_REQUEST_BYTES);
        assert!(stored_size(&pod) < ETCD_MAX_REQUEST_BYTES / 2);
        assert_eq!(check_stored(&pod), Ok(()));
        let mut custom = pod;
        custom["apiVersion"] = json!("example.dev/v1");
        assert_eq!(check_stored(&custom).map_err(|e| e.code), Err(500));
    }

    #[test]
    fn the_body_limit_is_kube_apiservers_on_writes_only() {
        let e = check_body("patch", MAX_BODY_BYTES + 1).unwrap_err();
        assert_eq!(e.code, 413);
        assert_eq!(e.message, "Request entity too large: limit is 3145728");
        assert_eq!(check_body("create", MAX_BODY_BYTES), Ok(()));
        assert_eq!(check_body("deletecollection", MAX_BODY_BYTES + 1), Ok(()));
    }
}
