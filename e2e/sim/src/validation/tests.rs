//! Table-driven tests of the schema checks and the CEL rules, worded as kube-apiserver words them.
//! The CEL cases include the examples of the Kubernetes documentation ("Validation rules",
//! concepts/extend-kubernetes/api-extension/custom-resources) that use only what the sim has.

use serde_json::{Value, json};

use super::{FieldError, invalid, schema, validate};

fn spec_schema(spec: &Value) -> Value {
    json!({"type": "object", "properties": {"spec": spec}})
}

/// The messages of validating `spec` under `spec_schema` (pruned first, as on a write).
fn errors_of(spec_schema_: &Value, spec: &Value) -> Vec<String> {
    let root = spec_schema(spec_schema_);
    let mut obj =
        json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"}, "spec": spec.clone()});
    schema::prune(&root, &mut obj, true);
    validate(&root, &obj, None)
        .iter()
        .map(FieldError::to_string)
        .collect()
}

#[test]
fn schema_checks_are_worded_as_kube_openapi_words_them() {
    let s = json!({"type": "object", "required": ["max"], "properties": {
        "max": {"type": "integer", "format": "int32", "minimum": 1},
        "min": {"type": "integer", "minimum": 0, "maximum": 10, "exclusiveMaximum": true},
        "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": true},
        "mode": {"type": "string", "enum": ["absolute", "average"]},
        "name": {"type": "string", "maxLength": 5, "minLength": 2, "pattern": "^[a-z]+$"},
        "when": {"type": "string", "format": "date-time"},
        "jobs": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
        "size": {"x-kubernetes-int-or-string": true},
        "opt": {"type": "integer", "nullable": true},
    }});
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (json!({"max": 3}), vec![]),
        (json!({}), vec!["spec.max: Required value"]),
        (
            json!({"max": 0}),
            vec![
                "spec.max: Invalid value: 0: spec.max in body should be greater than or equal to 1",
            ],
        ),
        (
            json!({"max": 1, "min": 10}),
            vec!["spec.min: Invalid value: 10: spec.min in body should be less than 10"],
        ),
        (
            json!({"max": 1, "min": -1}),
            vec![
                "spec.min: Invalid value: -1: spec.min in body should be greater than or equal to 0",
            ],
        ),
        (
            json!({"max": 1, "ratio": 0}),
            vec!["spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0"],
        ),
        (
            json!({"max": 1, "mode": "fast"}),
            vec![
                "spec.mode: Unsupported value: \"fast\": supported values: \"absolute\", \"average\"",
            ],
        ),
        (
            json!({"max": 1, "name": "abcdef"}),
            vec!["spec.name: Too long: may not be more than 5 bytes"],
        ),
        (
            json!({"max": 1, "name": "A"}),
            vec![
                "spec.name: Invalid value: \"A\": spec.name in body should be at least 2 chars long",
                "spec.name: Invalid value: \"A\": spec.name in body should match '^[a-z]+$'",
            ],
        ),
        (
            json!({"max": 1, "jobs": []}),
            vec!["spec.jobs: Invalid value: 0: spec.jobs in body should have at least 1 items"],
        ),
        (
            json!({"max": 1, "jobs": ["a", "b", "c"]}),
            vec!["spec.jobs: Too many: 3: must have at most 2 items"],
        ),
        (json!({"max": 1, "size": 3}), vec![]),
        (json!({"max": 1, "size": "50%"}), vec![]),
        (json!({"max": 1, "opt": null}), vec![]),
        (json!({"max": 1.0}), vec![]),
        (
            json!({"max": "ten"}),
            vec![
                "spec.max: Invalid value: \"ten\": spec.max in body must be of type integer: \"string\"",
                "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            ],
        ),
        (
            json!({"max": 1, "size": true}),
            vec![
                "spec.size: Invalid value: true: spec.size in body must be of type integer,string: \"boolean\"",
                "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            ],
        ),
        (
            json!({"max": 1, "when": "yesterday"}),
            vec![
                "spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\"",
                "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            ],
        ),
        (json!({"max": 1, "when": "2026-11-24T10:00:00Z"}), vec![]),
    ];
    for (spec, want) in cases {
        assert_eq!(errors_of(&s, &spec), want, "spec {spec}");
    }
}

#[test]
fn pruning_drops_undeclared_fields_and_non_nullable_nulls_only() {
    let root = spec_schema(&json!({"type": "object", "properties": {
        "a": {"type": "integer"},
        "n": {"type": "integer", "nullable": true},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "items": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
    }}));
    let mut obj = json!({
        "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a", "labels": {"x": "y"}},
        "status": {"anything": 1},
        "spec": {"a": null, "n": null, "b": 2, "free": {"z": 1}, "labels": {"p": "q"},
                 "items": [{"k": "v", "extra": 1}]},
    });
    schema::prune(&root, &mut obj, true);
    assert_eq!(
        obj,
        json!({
            "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a", "labels": {"x": "y"}},
            "spec": {"n": null, "free": {"z": 1}, "labels": {"p": "q"}, "items": [{"k": "v"}]},
        })
    );
}

fn rule(rule: &str, message: Option<&str>) -> Value {
    let mut r = json!({"rule": rule});
    if let Some(m) = message {
        r["message"] = json!(m);
    }
    r
}

/// Whether `rule` holds on `value` under a schema of `ty` (object properties typed as given).
fn holds(schema_: Value, rule_: &str, value: &Value) -> Result<(), String> {
    let mut s = schema_;
    s["x-kubernetes-validations"] = json!([rule(rule_, None)]);
    let errs = errors_of(&s, value);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}

#[test]
fn cel_rules_from_the_kubernetes_documentation() {
    let replicas = json!({"type": "object", "properties": {
        "minReplicas": {"type": "integer"}, "replicas": {"type": "integer"},
        "maxReplicas": {"type": "integer"}}});
    let doc = |r: &str| r.to_string();
    let cases: Vec<(Value, String, Value, bool)> = vec![
        (
            replicas.clone(),
            doc("self.minReplicas <= self.replicas && self.replicas <= self.maxReplicas"),
            json!({"minReplicas": 1, "replicas": 2, "maxReplicas": 3}),
            true,
        ),
        (
            replicas.clone(),
            doc("self.minReplicas <= self.replicas && self.replicas <= self.maxReplicas"),
            json!({"minReplicas": 1, "replicas": 5, "maxReplicas": 3}),
            false,
        ),
        (
            json!({"type": "object", "properties": {"x": {"type": "string"}}}),
            doc("has(self.x)"),
            json!({}),
            false,
        ),
        (
            json!({"type": "object", "properties": {"x": {"type": "string"}}}),
            doc("has(self.x)"),
            json!({"x": "a"}),
            true,
        ),
        (
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            doc("'Available' in self"),
            json!({"Available": "yes"}),
            true,
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            doc("self.a.startsWith('kube')"),
            json!({"a": "kubelet"}),
            true,
        ),
        (
            json!({"type": "object", "properties": {"list": {"type": "array", "items": {"type": "string"}}}}),
            doc("self.list.all(e, e.matches('^[a-z]+$'))"),
            json!({"list": ["ab", "Cd"]}),
            false,
        ),
        (
            json!({"type": "object", "properties": {"list": {"type": "array", "items": {"type": "string"}}}}),
            doc("self.list.all(e, self.list.exists_one(f, f == e))"),
            json!({"list": ["a", "b", "a"]}),
            false,
        ),
        (
            json!({"type": "object", "properties": {"list": {"type": "array", "items": {"type": "string"}}}}),
            doc("size(self.list) < 3 && self.list.exists(e, e == 'b')"),
            json!({"list": ["a", "b"]}),
            true,
        ),
        (
            json!({"type": "object", "properties": {"s": {"type": "string"}}}),
            doc("self.s.lowerAscii() == 'abc' && self.s.split('B').size() == 2"),
            json!({"s": "aBc"}),
            true,
        ),
    ];
    for (s, r, value, want) in cases {
        let got = holds(s, &r, &value);
        assert_eq!(got.is_ok(), want, "rule {r} on {value}: {got:?}");
    }
}

/// The HPA+ `fallback.failureDuration` rule (KEP-5679's `metav1.Duration`, bounded here): CEL's
/// `duration()` reads Go's duration strings, and a string it cannot read fails the rule.
#[test]
fn cel_durations_as_the_fallback_rule_reads_them() {
    let schema_ = json!({"type": "string"});
    let r = "duration(self) > duration('0s') && duration(self) <= duration('24h')";
    for (value, want) in [
        ("3m", true),
        ("1h30m", true),
        ("24h", true),
        ("500ms", true),
        ("24h1s", false),
        ("0s", false),
        ("-1m", false),
        ("three minutes", false),
    ] {
        let got = holds(schema_.clone(), r, &json!(value));
        assert_eq!(got.is_ok(), want, "{value}: {got:?}");
    }
}

/// Kubernetes' quantity library (`k8s.io/apiserver/pkg/cel/library/quantity.go` examples).
#[test]
fn cel_quantity_library() {
    let doc = |r: &str| r.to_string();
    let cases: Vec<(Value, String, Value, bool)> = vec![
        (
            json!({"type": "object", "properties": {"q": {"x-kubernetes-int-or-string": true}}}),
            doc("isQuantity(string(self.q)) && quantity(string(self.q)).isLessThan(quantity('1'))"),
            json!({"q": "500m"}),
            true,
        ),
        (
            json!({"type": "object", "properties": {"q": {"x-kubernetes-int-or-string": true}}}),
            doc("quantity(string(self.q)).compareTo(quantity('1')) < 0"),
            json!({"q": 1}),
            false,
        ),
        (
            json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            doc(
                "quantity(self.q).asApproximateFloat() == 1536.0 * 1024.0 * 1024.0 && quantity(self.q).isInteger()",
            ),
            json!({"q": "1.5Gi"}),
            true,
        ),
        (
            json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            doc(
                "quantity(self.q).add(quantity('100m')).isGreaterThan(quantity('1')) && sign(quantity(self.q).sub(1)) == -1",
            ),
            json!({"q": "950m"}),
            true,
        ),
        (
            json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            doc("!isQuantity(self.q)"),
            json!({"q": "1.5 Gi"}),
            true,
        ),
        // The call styles `quantity.go` declares: `sign` is a global function (`cel.Overload`),
        // `compareTo` a member (`cel.MemberOverload`) whose operand is a quantity; the other
        // style does not compile on a real API server.
        (
            json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            doc("sign(quantity(self.q)) == -1"),
            json!({"q": "-1"}),
            true,
        ),
        (
            json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            doc("quantity(self.q).sign() == -1"),
            json!({"q": "-1"}),
            false,
        ),
        (
            json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            doc("compareTo(quantity(self.q), quantity('1')) < 0"),
            json!({"q": "-1"}),
            false,
        ),
        (
            json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            doc("quantity(self.q).compareTo(1) < 0"),
            json!({"q": "-1"}),
            false,
        ),
        (
            json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            doc("self.q.isQuantity()"),
            json!({"q": "1"}),
            false,
        ),
    ];
    for (s, r, value, want) in cases {
        let got = holds(s, &r, &value);
        assert_eq!(got.is_ok(), want, "rule {r} on {value}: {got:?}");
    }
}

#[test]
fn a_quantity_function_called_in_the_wrong_style_is_refused_as_a_real_server_refuses_it() {
    let s = json!({"type": "object", "properties": {"q": {"type": "string"}}});
    for (r, function) in [
        ("quantity(self.q).sign() == -1", "sign"),
        (
            "compareTo(quantity(self.q), quantity('1')) < 0",
            "compareTo",
        ),
    ] {
        let err = holds(s.clone(), r, &json!({"q": "-1"})).unwrap_err();
        assert!(
            err.contains(&format!("found no matching overload for '{function}'")),
            "{r}: {err}"
        );
    }
}

#[test]
fn a_failed_rule_answers_its_message_field_path_and_reason() {
    let s = |extra: Value| {
        let mut r = json!({"rule": "self.min <= self.max"});
        for (k, v) in extra.as_object().into_iter().flatten() {
            r[k] = v.clone();
        }
        json!({"type": "object", "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}},
               "x-kubernetes-validations": [r]})
    };
    let bad = json!({"min": 3, "max": 1});
    let cases = [
        (
            json!({}),
            "spec: Invalid value: \"object\": failed rule: self.min <= self.max",
        ),
        (
            json!({"message": "min must be <= max"}),
            "spec: Invalid value: \"object\": min must be <= max",
        ),
        (
            json!({"message": "m", "messageExpression": "'min ' + string(self.min) + ' is above max ' + string(self.max)"}),
            "spec: Invalid value: \"object\": min 3 is above max 1",
        ),
        (
            json!({"message": "m", "messageExpression": "''"}),
            "spec: Invalid value: \"object\": m",
        ),
        (
            json!({"message": "m", "fieldPath": ".max"}),
            "spec.max: Invalid value: \"object\": m",
        ),
        (
            json!({"message": "m", "reason": "FieldValueForbidden"}),
            "spec: Forbidden: m",
        ),
        (
            json!({"message": "m", "reason": "FieldValueRequired", "fieldPath": ".min"}),
            "spec.min: Required value: m",
        ),
    ];
    for (extra, want) in cases {
        assert_eq!(errors_of(&s(extra.clone()), &bad), vec![want], "{extra}");
    }
    // A rule that cannot be evaluated says so (no such key), and a null value runs no rule.
    let missing = json!({"type": "object", "properties": {"a": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.a > 0", "message": "a must be positive"}]});
    let errs = errors_of(&missing, &json!({}));
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].ends_with("evaluating rule: a must be positive"),
        "{errs:?}"
    );
}

#[test]
fn transition_rules_run_on_update_only_and_unchanged_values_ratchet() {
    let s = spec_schema(&json!({"type": "object", "properties": {
        "size": {"type": "integer", "minimum": 0,
                 "x-kubernetes-validations": [
                     {"rule": "self >= oldSelf", "message": "size may not shrink"},
                     {"rule": "self < 100", "message": "size must be below 100"}]}}}));
    let obj = |size: i64| json!({"spec": {"size": size}});
    assert!(
        validate(&s, &obj(5), None).is_empty(),
        "no oldSelf on create"
    );
    let shrink: Vec<String> = validate(&s, &obj(4), Some(&obj(5)))
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        shrink,
        ["spec.size: Invalid value: \"integer\": size may not shrink"]
    );
    // Stored before the rule existed: an unchanged value is not checked again...
    assert!(validate(&s, &obj(150), Some(&obj(150))).is_empty());
    // ...but a changed one is.
    assert_eq!(validate(&s, &obj(151), Some(&obj(150))).len(), 1);
    assert_eq!(validate(&s, &obj(-1), Some(&obj(-1))).len(), 0);
}

#[test]
fn the_invalid_status_carries_every_cause() {
    let s = json!({"type": "object", "properties": {
        "min": {"type": "integer", "minimum": 0},
        "max": {"type": "integer", "minimum": 1}}});
    let root = spec_schema(&s);
    let obj = json!({"metadata": {"name": "web"}, "spec": {"min": -1, "max": 0}});
    let errs = validate(&root, &obj, None);
    let one = invalid("Widget", "x.dev", "web", &errs[..1]);
    assert_eq!(one.code, 422);
    assert_eq!(one.reason, "Invalid");
    assert_eq!(
        one.message,
        "Widget.x.dev \"web\" is invalid: spec.max: Invalid value: 0: spec.max in body should be greater than or equal to 1"
    );
    let both = invalid("Widget", "x.dev", "web", &errs);
    assert_eq!(
        both.message,
        "Widget.x.dev \"web\" is invalid: [spec.max: Invalid value: 0: spec.max in body should be greater than or equal to 1, spec.min: Invalid value: -1: spec.min in body should be greater than or equal to 0]"
    );
    assert_eq!(
        both.details,
        Some(
            json!({"name": "web", "group": "x.dev", "kind": "Widget", "causes": [
                {"reason": "FieldValueInvalid", "field": "spec.max",
                 "message": "Invalid value: 0: spec.max in body should be greater than or equal to 1"},
                {"reason": "FieldValueInvalid", "field": "spec.min",
                 "message": "Invalid value: -1: spec.min in body should be greater than or equal to 0"},
            ]})
        )
    );
}
