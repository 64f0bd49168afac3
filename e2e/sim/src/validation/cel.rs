//! The CEL half of CRD validation: every `x-kubernetes-validations` rule of the schema, evaluated
//! with the `cel` crate where the value it sits on is present, as kube-apiserver evaluates them.
//!
//! `self` is the value at the rule's place, typed by the schema (integer → int, number → double,
//! int-or-string → int or string, objects and maps → maps, lists → lists); `oldSelf` is the stored
//! value on update, and a rule that reads it (a transition rule) is skipped on create. A rule that
//! is false answers its `messageExpression` (when that yields a non-empty string), else its
//! `message`, else `failed rule: <rule>`; at its `fieldPath` below the rule's place; as the error
//! type its `reason` names (default `FieldValueInvalid`, whose value is the schema's type).
//!
//! Besides standard CEL and its macros (`has`, `all`, `exists`, `exists_one`, `map`, `filter`,
//! `matches`), the environment has the cel-go string extensions (`lowerAscii`, `split`, `join`,
//! `indexOf`, `substring`, `trim`, …) and Kubernetes' quantity library in the call style it
//! declares (`cel.Overload` or `cel.MemberOverload` in `quantity.go`): the global functions
//! `quantity()`, `isQuantity()` and `sign()`, and on a quantity the members `compareTo`,
//! `isGreaterThan`, `isLessThan` (a quantity operand only), `asApproximateFloat`, `asInteger`,
//! `isInteger`, `add`, `sub` (a quantity or an int operand). A call in the other style
//! (`quantity(x).sign()`, `compareTo(a, b)`) fails as it fails to compile on a real API server,
//! so a rule that only works here is caught by the sim's tests. The library's newest members
//! (`mul`, `div`, `divInt`) are left out: older servers refuse them. `duration()` is CEL's
//! standard function, modelled as nanoseconds for comparisons (see [`duration_fn`]).

use std::sync::Arc;

use cel::extractors::This;
use cel::objects::{Key, Map as CelMap, Opaque};
use cel::{Context, Env, ExecutionError, FunctionContext, Program, Value as Cel};
use plimsoll_core::quantity::Quantity;
use serde_json::Value;

use super::field::{ErrorKind, FieldError, FieldPath};

/// Evaluates every rule in `schema` against `value` (and `old` on update), appending failures.
pub fn validate(
    schema: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) {
    let env = Arc::new(environment());
    walk(&env, schema, value, old, path, errors);
}

fn environment() -> Env {
    let mut env = Env::stdlib();
    // Declared once on a fresh environment; a clash would be a bug caught by the unit tests.
    let _ = env.add_extension(cel::extensions::strings);
    env
}

fn walk(
    env: &Arc<Env>,
    schema: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) {
    // Rules do not run on absent or null values, nor (ratcheting) on unchanged ones.
    if value.is_null() || old == Some(value) {
        return;
    }
    if let Some(rules) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        for rule in rules {
            if let Some(e) = check_rule(env, schema, rule, value, old, path) {
                errors.push(e);
            }
        }
    }
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for k in keys {
                if path.is_root() && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let old_child = old.and_then(|o| o.get(k));
                if let Some(prop) = props.and_then(|p| p.get(k)) {
                    walk(env, prop, &map[k], old_child, &path.child(k), errors);
                } else if let Some(a) = additional {
                    walk(env, a, &map[k], old_child, &path.key(k), errors);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk(env, item_schema, item, None, &path.index(i), errors);
                }
            }
        }
        _ => {}
    }
}

fn text<'a>(rule: &'a Value, field: &str) -> Option<&'a str> {
    rule.get(field)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// One rule at one place: `None` when it holds (or does not apply).
fn check_rule(
    env: &Arc<Env>,
    schema: &Value,
    rule: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &FieldPath,
) -> Option<FieldError> {
    let source = text(rule, "rule")?;
    let type_name = schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let message = text(rule, "message");
    let shown = message.unwrap_or(source);
    let error_at = |detail: String| {
        let at = text(rule, "fieldPath").map_or_else(|| path.clone(), |p| relative(path, p));
        reason_error(text(rule, "reason"), at, type_name, detail)
    };
    let program = match env.compile(source) {
        Ok(p) => p,
        Err(e) => return Some(error_at(format!("compilation failed: {e}"))),
    };
    let transition = program.references().has_variable("oldSelf");
    if transition && old.is_none() {
        return None;
    }
    let mut ctx = Context::with_env(Arc::clone(env));
    register_quantity_library(&mut ctx);
    ctx.add_variable_from_value("self", to_cel(schema, value));
    if let Some(old) = old.filter(|_| transition) {
        ctx.add_variable_from_value("oldSelf", to_cel(schema, old));
    }
    match program.execute(&ctx) {
        Ok(Cel::Bool(true)) => None,
        Ok(Cel::Bool(false)) => {
            let detail = text(rule, "messageExpression")
                .and_then(|m| message_from_expression(env, &ctx, m))
                .unwrap_or_else(|| match message {
                    Some(m) => m.to_string(),
                    None => format!("failed rule: {source}"),
                });
            Some(error_at(detail))
        }
        Ok(other) => Some(error_at(format!(
            "rule did not evaluate to a bool ({other:?}) evaluating rule: {shown}"
        ))),
        Err(e) => Some(error_at(format!("{e} evaluating rule: {shown}"))),
    }
}

/// The string a `messageExpression` yields, if it yields a non-empty one.
fn message_from_expression(env: &Arc<Env>, ctx: &Context<'_, '_>, source: &str) -> Option<String> {
    let program: Program = env.compile(source).ok()?;
    match program.execute(ctx).ok()? {
        Cel::String(s) if !s.trim().is_empty() => Some(s.to_string()),
        _ => None,
    }
}

/// The error a failed rule gives for its `reason` (`fieldErrorForReason`).
fn reason_error(
    reason: Option<&str>,
    at: FieldPath,
    type_name: &str,
    detail: String,
) -> FieldError {
    let type_value = || Some(Value::String(type_name.to_string()));
    match reason {
        Some("FieldValueForbidden") => FieldError::new(ErrorKind::Forbidden, at, None, detail),
        Some("FieldValueRequired") => FieldError::new(ErrorKind::Required, at, None, detail),
        Some("FieldValueDuplicate") => FieldError::new(ErrorKind::Duplicate, at, type_value(), ""),
        _ => FieldError::new(ErrorKind::Invalid, at, type_value(), detail),
    }
}

/// `path` extended by a rule's `fieldPath` (`.spec.x`, `.items[0]`, `.labels['a.b']`).
fn relative(path: &FieldPath, field_path: &str) -> FieldPath {
    let mut at = path.clone();
    let mut rest = field_path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            at = at.child(&r[..end]);
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').unwrap_or(r.len());
            let inner = &r[..end];
            let unquoted = inner.trim_matches(|c| c == '\'' || c == '"');
            at = match inner.parse::<usize>() {
                Ok(i) => at.index(i),
                Err(_) => at.child(unquoted),
            };
            rest = r.get(end + 1..).unwrap_or_default();
        } else {
            // A path that does not start with `.` or `[` is refused with the CRD; read it as a name.
            at = at.child(rest);
            break;
        }
    }
    at
}

/// `value` as CEL sees it under `schema`.
pub fn to_cel(schema: &Value, value: &Value) -> Cel {
    let ty = schema.get("type").and_then(Value::as_str);
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => {
            if ty == Some("number") {
                Cel::Float(n.as_f64().unwrap_or_default())
            } else if let Some(i) = n.as_i64() {
                Cel::Int(i)
            } else if let Some(u) = n.as_u64() {
                Cel::UInt(u)
            } else {
                let f = n.as_f64().unwrap_or_default();
                if f.fract() == 0.0 && ty == Some("integer") {
                    Cel::Int(f as i64)
                } else {
                    Cel::Float(f)
                }
            }
        }
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(items) => {
            let item_schema = schema.get("items").unwrap_or(&Value::Null);
            Cel::List(Arc::new(
                items.iter().map(|i| to_cel(item_schema, i)).collect(),
            ))
        }
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let entries = map.iter().map(|(k, v)| {
                let child = props
                    .and_then(|p| p.get(k))
                    .or(additional)
                    .unwrap_or(&Value::Null);
                (Key::String(Arc::new(k.clone())), to_cel(child, v))
            });
            Cel::Map(CelMap {
                map: Arc::new(entries.collect()),
            })
        }
    }
}

/// A Kubernetes quantity inside CEL (`quantity("100m")`).
#[derive(Debug, PartialEq, Eq)]
struct KubeQuantity(Quantity);

impl Opaque for KubeQuantity {
    fn runtime_type_name(&self) -> &'static str {
        "kubernetes.Quantity"
    }
}

fn quantity_of(v: &Cel, function: &str) -> Result<Quantity, ExecutionError> {
    match v {
        Cel::Opaque(o) => o
            .downcast_ref::<KubeQuantity>()
            .map(|q| q.0)
            .ok_or_else(|| ExecutionError::function_error(function, "expected a quantity")),
        Cel::Int(i) => Ok(Quantity::from_milli(i128::from(*i) * 1000)),
        _ => Err(ExecutionError::function_error(
            function,
            format!("expected a quantity, got {v:?}"),
        )),
    }
}

/// The operand of `compareTo`, `isGreaterThan` and `isLessThan`: their only overload takes a
/// quantity (an int is refused, as the type checker refuses it).
fn quantity_operand(v: &Cel, function: &str) -> Result<Quantity, ExecutionError> {
    match v {
        Cel::Opaque(_) => quantity_of(v, function),
        _ => Err(ExecutionError::function_error(
            function,
            format!("found no matching overload for '{function}' applied to a {v:?} operand"),
        )),
    }
}

fn wrap(q: Quantity) -> Cel {
    Cel::Opaque(Arc::new(KubeQuantity(q)))
}

/// Refuses a call in the style the library does not declare `function` in: `member` functions
/// need a receiver (`q.compareTo(r)`), the others must not have one (`sign(q)`). cel-go reports
/// it when the rule compiles, as "found no matching overload".
fn call_style(ftx: &FunctionContext, function: &str, member: bool) -> Result<(), ExecutionError> {
    match (ftx.this.is_some(), member) {
        (true, false) => Err(ExecutionError::function_error(
            function,
            format!(
                "found no matching overload for '{function}' applied to a receiver: it is a \
                 global function, call it as {function}(...)"
            ),
        )),
        (false, true) => Err(ExecutionError::function_error(
            function,
            format!(
                "found no matching overload for '{function}' without a receiver: it is a member \
                 function, call it as <quantity>.{function}(...)"
            ),
        )),
        _ => Ok(()),
    }
}

/// Registers Kubernetes' quantity library (`k8s.io/apiserver/pkg/cel/library/quantity.go`).
fn register_quantity_library(ctx: &mut Context<'_, '_>) {
    let _ = ctx.add_function("quantity", quantity_fn);
    let _ = ctx.add_function("isQuantity", is_quantity_fn);
    let _ = ctx.add_function("sign", sign_fn);
    let _ = ctx.add_function("compareTo", compare_to_fn);
    let _ = ctx.add_function("isGreaterThan", is_greater_than_fn);
    let _ = ctx.add_function("isLessThan", is_less_than_fn);
    let _ = ctx.add_function("asApproximateFloat", as_approximate_float_fn);
    let _ = ctx.add_function("isInteger", is_integer_fn);
    let _ = ctx.add_function("asInteger", as_integer_fn);
    let _ = ctx.add_function("add", add_fn);
    let _ = ctx.add_function("sub", sub_fn);
    let _ = ctx.add_function("duration", duration_fn);
}

/// CEL's standard `duration(string)`, which the `cel` crate has only with its `chrono` feature
/// (not in this build): modelled as the duration's nanoseconds, enough for the comparisons CRD
/// rules make (`duration(self) <= duration('24h')`); Go's duration syntax, as
/// [`plimsoll_core::horizontal::fallback::parse_duration`] reads it (up to a year). A string it
/// cannot read fails the rule, as a real server's evaluation error does.
#[expect(
    clippy::needless_pass_by_value,
    reason = "cel's argument extractors hand arguments over by value"
)]
fn duration_fn(ftx: &FunctionContext, s: Arc<String>) -> Result<Cel, ExecutionError> {
    call_style(ftx, "duration", false)?;
    plimsoll_core::horizontal::fallback::parse_duration(&s)
        .and_then(|d| i64::try_from(d.as_nanos()).ok())
        .map(Cel::Int)
        .ok_or_else(|| {
            ExecutionError::function_error("duration", format!("invalid duration {s:?}"))
        })
}

#[expect(
    clippy::needless_pass_by_value,
    reason = "cel's argument extractors hand arguments over by value"
)]
fn quantity_fn(ftx: &FunctionContext, s: Arc<String>) -> Result<Cel, ExecutionError> {
    call_style(ftx, "quantity", false)?;
    Quantity::parse(&s)
        .map(wrap)
        .map_err(|e| ExecutionError::function_error("quantity", e.to_string()))
}

#[expect(
    clippy::needless_pass_by_value,
    reason = "cel's argument extractors hand arguments over by value"
)]
fn is_quantity_fn(ftx: &FunctionContext, s: Arc<String>) -> Result<bool, ExecutionError> {
    call_style(ftx, "isQuantity", false)?;
    Ok(Quantity::parse(&s).is_ok())
}

fn sign_fn(ftx: &FunctionContext, This(a): This<Cel>) -> Result<Cel, ExecutionError> {
    call_style(ftx, "sign", false)?;
    Ok(Cel::Int(quantity_of(&a, "sign")?.milli().signum() as i64))
}

#[expect(
    clippy::needless_pass_by_value,
    reason = "cel's argument extractors hand arguments over by value"
)]
fn compare_to_fn(ftx: &FunctionContext, This(a): This<Cel>, b: Cel) -> Result<Cel, ExecutionError> {
    call_style(ftx, "compareTo", true)?;
    let a = quantity_of(&a, "compareTo")?;
    let b = quantity_operand(&b, "compareTo")?;
    Ok(Cel::Int(a.cmp(&b) as i64))
}

#[expect(
    clippy::needless_pass_by_value,
    reason = "cel's argument extractors hand arguments over by value"
)]
fn is_greater_than_fn(
    ftx: &FunctionContext,
    This(a): This<Cel>,
    b: Cel,
) -> Result<bool, ExecutionError> {
    call_style(ftx, "isGreaterThan", true)?;
    Ok(quantity_of(&a, "isGreaterThan")? > quantity_operand(&b, "isGreaterThan")?)
}

#[expect(
    clippy::needless_pass_by_value,
    reason = "cel's argument extractors hand arguments over by value"
)]
fn is_less_than_fn(
    ftx: &FunctionContext,
    This(a): This<Cel>,
    b: Cel,
) -> Result<bool, ExecutionError> {
    call_style(ftx, "isLessThan", true)?;
    Ok(quantity_of(&a, "isLessThan")? < quantity_operand(&b, "isLessThan")?)
}

fn as_approximate_float_fn(
    ftx: &FunctionContext,
    This(a): This<Cel>,
) -> Result<f64, ExecutionError> {
    call_style(ftx, "asApproximateFloat", true)?;
    Ok(quantity_of(&a, "asApproximateFloat")?.as_f64())
}

fn is_integer_fn(ftx: &FunctionContext, This(a): This<Cel>) -> Result<bool, ExecutionError> {
    call_style(ftx, "isInteger", true)?;
    Ok(quantity_of(&a, "isInteger")?.milli() % 1000 == 0)
}

fn as_integer_fn(ftx: &FunctionContext, This(a): This<Cel>) -> Result<Cel, ExecutionError> {
    call_style(ftx, "asInteger", true)?;
    let m = quantity_of(&a, "asInteger")?.milli();
    let refused = || ExecutionError::function_error("asInteger", "cannot convert value to integer");
    if m % 1000 != 0 {
        return Err(refused());
    }
    i64::try_from(m / 1000).map(Cel::Int).map_err(|_| refused())
}

#[expect(
    clippy::needless_pass_by_value,
    reason = "cel's argument extractors hand arguments over by value"
)]
fn add_fn(ftx: &FunctionContext, This(a): This<Cel>, b: Cel) -> Result<Cel, ExecutionError> {
    call_style(ftx, "add", true)?;
    let (a, b) = (quantity_of(&a, "add")?, quantity_of(&b, "add")?);
    a.checked_add(b)
        .map(wrap)
        .ok_or_else(|| ExecutionError::function_error("add", "overflow"))
}

#[expect(
    clippy::needless_pass_by_value,
    reason = "cel's argument extractors hand arguments over by value"
)]
fn sub_fn(ftx: &FunctionContext, This(a): This<Cel>, b: Cel) -> Result<Cel, ExecutionError> {
    call_style(ftx, "sub", true)?;
    let (a, b) = (quantity_of(&a, "sub")?, quantity_of(&b, "sub")?);
    a.checked_sub(b)
        .map(wrap)
        .ok_or_else(|| ExecutionError::function_error("sub", "overflow"))
}
