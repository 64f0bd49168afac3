//! Reading Kubernetes manifests for the checks in `xtask/tests/`: the documents of a YAML stream,
//! and the typed round trip that proves a document is exactly its k8s-openapi object.
//!
//! The round trip is the point: serde ignores unknown fields, so a misspelt or misplaced field
//! would pass a plain deserialization and be silently dropped by the API server's schema (or
//! worse, rejected at apply time). Deserializing into the typed struct and serializing back must
//! give the document again; any field the struct does not know shows up as a difference.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The non-empty documents of a multi-document YAML text, as JSON values.
pub fn documents(text: &str) -> Result<Vec<Value>, String> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| e.to_string())?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Deserializes `doc` into `T` and checks that serializing it back loses nothing.
pub fn typed<T: DeserializeOwned + Serialize>(doc: &Value) -> Result<T, String> {
    let object: T = serde_json::from_value(doc.clone())
        .map_err(|e| format!("not a valid {}: {e}", doc["kind"]))?;
    let back = serde_json::to_value(&object).map_err(|e| e.to_string())?;
    let (want, got) = (normalize(doc.clone()), normalize(back));
    if want != got {
        return Err(format!(
            "a field was lost in the typed round trip (unknown or misspelt field?):\n  written: {want}\n  typed:   {got}"
        ));
    }
    Ok(object)
}

/// Drops empty maps, which serializers legitimately omit (`selfSigned: {}` stays meaningful in
/// the document, but the struct writes an empty struct the same way).
fn normalize(v: Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, normalize(v)))
                .filter(|(_, v)| !matches!(v, Value::Object(m) if m.is_empty()))
                .collect(),
        ),
        Value::Array(list) => Value::Array(list.into_iter().map(normalize).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Service;

    #[test]
    fn a_misspelt_field_fails_the_round_trip() {
        let good = serde_json::json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}});
        assert!(typed::<Service>(&good).is_ok());
        let typo = serde_json::json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "s"}, "spec": {"prots": [{"port": 80}]}});
        let e = typed::<Service>(&typo).unwrap_err();
        assert!(e.contains("lost"), "{e}");
    }

    #[test]
    fn documents_skips_empty_ones() {
        let docs = documents("---\n# only a comment\n---\na: 1\n---\n").unwrap();
        assert_eq!(docs, [serde_json::json!({"a": 1})]);
    }
}
