//! Kubernetes value syntaxes the sim reads in several places: a quantity as a number
//! ([`parse_quantity`]) and an intOrString scaled against a total ([`int_or_percent`]). They sit
//! below the handlers and the controllers that use them, which import nothing of each other for
//! them.

use serde_json::Value;

/// Parses a Kubernetes quantity (`500m`, `1Gi`, `2k`, `1e3`, `12345n`) into a float, keeping
/// precision finer than a milli-unit (core's parser; surrounding white space is ignored).
pub fn parse_quantity(q: &str) -> Option<f64> {
    plimsoll_core::quantity::parse_f64(q.trim()).ok()
}

/// An intOrString (`3` or `"25%"`) resolved against `total`, rounding up or down.
pub fn int_or_percent(v: Option<&Value>, total: i64, round_up: bool, default: i64) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(default),
        Some(Value::String(s)) if s.ends_with('%') => {
            let p: f64 = s.trim_end_matches('%').parse().unwrap_or(0.0);
            let x = p * total as f64 / 100.0;
            if round_up {
                x.ceil() as i64
            } else {
                x.floor() as i64
            }
        }
        Some(Value::String(s)) => s.parse().unwrap_or(default),
        _ => default,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_parse() {
        // upstream: staging/src/k8s.io/apimachinery/pkg/api/resource/quantity_test.go TestQuantityParse
        assert_eq!(parse_quantity("500m"), Some(0.5));
        assert_eq!(parse_quantity("1Gi"), Some(1024.0 * 1024.0 * 1024.0));
        assert_eq!(parse_quantity("2"), Some(2.0));
        assert_eq!(parse_quantity("1500000n"), Some(0.0015));
        assert_eq!(parse_quantity("3k"), Some(3000.0));
        assert_eq!(parse_quantity("x"), None);
        assert_eq!(parse_quantity(""), None);
    }

    #[test]
    fn int_or_percent_rounding() {
        // upstream: pkg/controller/deployment/util/deployment_util_test.go TestResolveFenceposts
        assert_eq!(int_or_percent(Some(&json!("25%")), 10, true, 0), 3);
        assert_eq!(int_or_percent(Some(&json!("25%")), 10, false, 0), 2);
        assert_eq!(int_or_percent(Some(&json!(2)), 10, false, 0), 2);
        assert_eq!(int_or_percent(None, 10, false, 7), 7);
    }
}
