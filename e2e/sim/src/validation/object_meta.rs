//! What kube-apiserver checks of every object's metadata (`ValidateObjectMeta`): label keys,
//! annotation keys and finalizers are qualified names (an optional DNS-subdomain prefix and `/`,
//! then at most 63 characters), label values at most 63 characters of the same alphabet, the
//! annotations at most 256 KiB together, and owner references name a version, kind, name and
//! uid, with at most one controller among them. A test that writes what a real cluster refuses
//! fails here too, and a tenant's metadata can only be as hostile as these allow.

use serde_json::{Value, json};

use super::field::{ErrorKind, FieldError, FieldPath};

/// `TotalAnnotationSizeLimitB`: the keys and values of an object's annotations together.
pub const ANNOTATIONS_LIMIT: usize = 256 * 1024;

const NAME_REGEX: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";

/// The errors of `obj`'s `metadata.labels` and `metadata.annotations`, as upstream words them.
pub fn errors(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let metadata = FieldPath::root().child("metadata");
    let map = |key: &str| {
        obj.pointer(&format!("/metadata/{key}"))
            .and_then(Value::as_object)
    };
    if let Some(labels) = map("labels") {
        let path = metadata.child("labels");
        for (key, value) in labels {
            for message in qualified_name(key) {
                errors.push(invalid(&path, key, message));
            }
            for message in label_value(value.as_str().unwrap_or_default()) {
                errors.push(invalid(&path, value.as_str().unwrap_or_default(), message));
            }
        }
    }
    if let Some(annotations) = map("annotations") {
        let path = metadata.child("annotations");
        let mut total = 0;
        for (key, value) in annotations {
            for message in qualified_name(&key.to_lowercase()) {
                errors.push(invalid(&path, key, message));
            }
            total += key.len() + value.as_str().map_or(0, str::len);
        }
        if total > ANNOTATIONS_LIMIT {
            errors.push(FieldError::new(
                ErrorKind::TooLong,
                path,
                None,
                format!("may not be more than {ANNOTATIONS_LIMIT} bytes"),
            ));
        }
    }
    if let Some(finalizers) = obj
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
    {
        let path = metadata.child("finalizers");
        for finalizer in finalizers.iter().filter_map(Value::as_str) {
            for message in qualified_name(finalizer) {
                errors.push(invalid(&path, finalizer, message));
            }
        }
    }
    if let Some(owners) = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
    {
        errors.extend(owner_references(owners, &metadata.child("ownerReferences")));
    }
    errors
}

/// `ValidateOwnerReferences`.
fn owner_references(owners: &[Value], path: &FieldPath) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut controller: Option<String> = None;
    for owner in owners {
        let text = |key: &str| owner.get(key).and_then(Value::as_str).unwrap_or_default();
        let api_version = text("apiVersion");
        // `schema.ParseGroupVersion`: "v1", "group/version"; anything else has no version.
        let version = match api_version.split('/').collect::<Vec<_>>().as_slice() {
            [version] | [_, version] => *version,
            _ => "",
        };
        if version.is_empty() {
            errors.push(invalid(
                &path.child("apiVersion"),
                api_version,
                "version must not be empty".to_owned(),
            ));
        }
        for key in ["kind", "name", "uid"] {
            if text(key).is_empty() {
                errors.push(invalid(
                    &path.child(key),
                    "",
                    "must not be empty".to_owned(),
                ));
            }
        }
        if owner.get("controller").and_then(Value::as_bool) == Some(true) {
            let this = format!("{}/{}", text("kind"), text("name"));
            match &controller {
                Some(first) => errors.push(FieldError::new(
                    ErrorKind::Invalid,
                    path.clone(),
                    Some(Value::Array(owners.to_vec())),
                    format!("Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}"),
                )),
                None => controller = Some(this),
            }
        }
    }
    errors
}

fn invalid(path: &FieldPath, value: &str, message: String) -> FieldError {
    FieldError::new(
        ErrorKind::Invalid,
        path.clone(),
        Some(json!(value)),
        message,
    )
}

/// `validation.IsQualifiedName`.
fn qualified_name(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_owned());
            } else {
                errors.extend(
                    dns_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errors.push(format!(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{NAME_REGEX}') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ));
            return errors;
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errors.push("name part must be no more than 63 characters".to_owned());
    }
    if !name.is_empty() && !matches_name(name) {
        errors.push(format!(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{NAME_REGEX}')"
        ));
    }
    errors
}

/// `validation.IsValidLabelValue`.
fn label_value(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push("must be no more than 63 characters".to_owned());
    }
    if !value.is_empty() && !matches_name(value) {
        errors.push(format!(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '({NAME_REGEX})?')"
        ));
    }
    errors
}

/// `validation.IsDNS1123Subdomain`.
fn dns_subdomain(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 253 {
        errors.push("must be no more than 253 characters".to_owned());
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !value.split('.').all(label_ok) {
        errors.push("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_owned());
    }
    errors
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, whole.
fn matches_name(value: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    alnum(value.chars().next())
        && alnum(value.chars().last())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(obj: &Value) -> Vec<String> {
        errors(obj).iter().map(ToString::to_string).collect()
    }

    // Vectors from upstream's validation tests (IsQualifiedName, IsValidLabelValue).
    #[test]
    fn qualified_names_as_upstream() {
        for good in [
            "simple",
            "now-with-dashes",
            "1-starts-with-num",
            "1234",
            "simple/simple",
            "now-with-dashes/simple",
            "now-with-dashes/now-with-dashes",
            "now.with.dots/simple",
            "now-with.dashes-and.dots/simple",
            "1-num.2-num/3-num",
            "1234/5678",
            "1.2.3.4/5678",
            "Uppercase_Is_OK_123",
            "example.com/Uppercase_Is_OK_123",
            "requests.storage-foo",
            &"a".repeat(63),
            &format!("{}/{}", "a".repeat(253), "b".repeat(63)),
        ] {
            assert_eq!(qualified_name(good), Vec::<String>::new(), "{good}");
        }
        for bad in [
            "nospecialchars%^=@",
            "cantendwithadash-",
            "-cantstartwithadash-",
            "only/one/slash",
            "Example.com/abc",
            "example_com/abc",
            "example.com/",
            "/simple",
            &"a".repeat(64),
            &format!("{}/b", "a".repeat(254)),
        ] {
            assert!(!qualified_name(bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn label_values_as_upstream() {
        for good in [
            "",
            "simple",
            "now-with-dashes",
            "1-starts-with-num",
            "end-with-num-1",
            "1234",
            "A.B_C-D",
            &"a".repeat(63),
        ] {
            assert!(label_value(good).is_empty(), "{good}");
        }
        for bad in [
            "nospecialchars%^=@",
            "Tama-nui-te-rā.is.Māori.sun",
            "\\backslashes\\are\\bad",
            "-starts-with-dash",
            "ends-with-dash-",
            ".starts.with.dot",
            "ends.with.dot.",
            &"a".repeat(64),
        ] {
            assert!(!label_value(bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn an_object_s_errors_read_as_kube_apiservers() {
        let obj = json!({"metadata": {"name": "a",
            "labels": {"app": "web", "bad key": "x", "tier": "-x"},
            "annotations": {"ok/fine": "anything \u{0} at all", "big": "x".repeat(ANNOTATIONS_LIMIT)}}});
        assert_eq!(
            messages(&obj),
            [
                "metadata.labels: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "metadata.labels: Invalid value: \"-x\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                "metadata.annotations: Too long: may not be more than 262144 bytes",
            ]
        );
        let fits = json!({"metadata": {"name": "a",
            "annotations": {"big": "x".repeat(ANNOTATIONS_LIMIT - 3)}}});
        assert!(errors(&fits).is_empty());
    }

    #[test]
    fn owner_references_name_their_owner_and_one_controller_at_most() {
        let owner = |kind: &str, name: &str, controller: bool| {
            json!({"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "u-1",
                   "controller": controller})
        };
        let good = json!({"metadata": {"name": "a", "finalizers": ["example.com/keep"],
            "ownerReferences": [owner("ReplicaSet", "web-1", true), owner("Deployment", "web", false)]}});
        assert!(errors(&good).is_empty(), "{:?}", messages(&good));
        let two = json!({"metadata": {"name": "a",
            "ownerReferences": [owner("ReplicaSet", "web-1", true), owner("ReplicaSet", "web-2", true)]}});
        let found = messages(&two);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].ends_with("Only one reference can have Controller set to true. Found \"true\" in references for ReplicaSet/web-1 and ReplicaSet/web-2"), "{}", found[0]);
        let empty = json!({"metadata": {"name": "a", "finalizers": ["has space"],
            "ownerReferences": [{"apiVersion": "apps/", "kind": "", "name": "x", "uid": ""}]}});
        assert_eq!(
            messages(&empty)[1..],
            [
                "metadata.ownerReferences.apiVersion: Invalid value: \"apps/\": version must not be empty",
                "metadata.ownerReferences.kind: Invalid value: \"\": must not be empty",
                "metadata.ownerReferences.uid: Invalid value: \"\": must not be empty",
            ]
        );
    }
}
