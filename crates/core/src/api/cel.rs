//! Building blocks of the CRDs' CEL rules on quantities, written for what kube-apiserver
//! accepts when a CRD is created, not only for what it evaluates.
//!
//! * Quantities are `x-kubernetes-int-or-string`, which CEL types as `dyn`: an int (`cpu: 2`) or
//!   a string (`cpu: 500m`). A rule never converts one with `string(x)`: the API server's cost
//!   estimator prices `string()` of a `dyn` as the traversal of the largest string a request can
//!   hold (3 MiB × 0.1 ≈ 314,000 per call; `maxLength` does not bound an int-or-string before
//!   the newest releases), and multiplies a rule's cost by the number of places it runs (list
//!   items × map entries), against a budget of 10,000,000 per rule and 100,000,000 per CRD. An
//!   int becomes a quantity through `quantity('0').add(x)` instead, and a string goes to
//!   `quantity()` and `isQuantity()` as it is (both cost a constant in the estimate).
//! * The quantity library's functions are called in the style Kubernetes declares them:
//!   `quantity()`, `isQuantity()` and `sign()` global, the rest members (`sign(q)`;
//!   `q.sign()` does not compile on a real API server).
//! * Messages are constant: a `messageExpression` that concatenates the value is priced like
//!   `string()`.

use serde_json::{Value, json};

/// The message of a value that is not a quantity.
pub const NOT_A_QUANTITY: &str = "must be a quantity, such as 500m or 2Gi";

/// CEL: `x` is a quantity (an int, or a string `isQuantity` accepts).
pub fn is_quantity(x: &str) -> String {
    format!("(type({x}) == int || isQuantity({x}))")
}

/// CEL: `x` as a quantity; only where [`is_quantity`] holds.
pub fn as_quantity(x: &str) -> String {
    format!("(type({x}) == int ? quantity('0').add({x}) : quantity({x}))")
}

/// The rule that `self` is a quantity.
pub fn parses() -> Value {
    json!({
        "rule": is_quantity("self"),
        "message": NOT_A_QUANTITY,
    })
}

/// The rules that `self` is a quantity and `condition(q)` holds for it, as `message`.
pub fn quantity_rule(condition: impl Fn(&str) -> String, message: &str) -> Value {
    json!([
        parses(),
        {
            "rule": format!("!{} || {}", is_quantity("self"), condition(&as_quantity("self"))),
            "message": message,
        },
    ])
}
