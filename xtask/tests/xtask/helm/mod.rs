//! Renders `charts/plimsoll` as `helm template` would, without Helm: the chart's Go templates run
//! on `gtmpl-ng` (a Go `text/template` engine), and the few Helm and Sprig functions the chart
//! uses are added here.
//!
//! What is Helm's and reproduced: `.Values` is values.yaml deep-merged with the overrides
//! (maps merge, `null` deletes, anything else replaces), `.Release`, `.Chart` from Chart.yaml,
//! every file under `templates/`, subdirectories included (`templates/crds/`), is loaded into one
//! template set named by its path below `templates/` (so `define`s are shared),
//! files starting with `_` render nothing (NOTES.txt renders, but is no manifest), `<no value>`
//! renders as nothing, and `include` renders a named template to a string. `.Files.Get "path"`
//! and `.Files.Glob "pattern"` read files relative to the chart directory: the engine cannot call
//! a method with arguments on a field, so the renderer rewrites `<receiver>.Files.Get` to a
//! function call before parsing (and `.Capabilities.APIVersions.Has` likewise).
//!
//! Not reproduced: `tpl`, `lookup`, subcharts, and the Sprig functions the chart does not use.

// Every template function has the engine's `Func` signature, even those that cannot fail.
#![allow(clippy::unnecessary_wraps)]

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use gtmpl_ng::{Context, Func, FuncError, Limits, Number, NumberKind, Template, Value};
use serde_json::Value as Json;

/// A loaded chart: its directory, default values and template sources.
pub struct Chart {
    dir: PathBuf,
    metadata: Json,
    default_values: Json,
    /// (file name under `templates/`, source), sorted by name as Helm sorts them.
    templates: Vec<(String, String)>,
}

/// One rendered template file.
pub struct Rendered {
    /// File name under `templates/`.
    pub file: String,
    /// The text Helm would send to the API server (before splitting documents).
    pub text: String,
}

/// The chart directory and its templates' (file name, source).
type Sources = (PathBuf, Vec<(String, String)>);

thread_local! {
    /// The chart being rendered on this thread: `include` and `.Files` reach it from plain
    /// function pointers, which is all the engine's functions can be.
    static CURRENT: RefCell<Option<Sources>> = const { RefCell::new(None) };
}

impl Chart {
    /// Reads Chart.yaml, values.yaml and every file under `templates/`.
    pub fn load(dir: &Path) -> Chart {
        let read = |p: &Path| {
            std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        };
        let metadata = yaml(&read(&dir.join("Chart.yaml")), "Chart.yaml");
        let default_values = yaml(&read(&dir.join("values.yaml")), "values.yaml");
        let mut templates: Vec<(String, String)> = template_files(&dir.join("templates"), "")
            .into_iter()
            .map(|(name, path)| (name, rewrite_files_calls(&read(&path))))
            .collect();
        templates.sort();
        Chart {
            dir: dir.to_path_buf(),
            metadata,
            default_values,
            templates,
        }
    }

    /// values.yaml as parsed.
    pub fn default_values(&self) -> &Json {
        &self.default_values
    }

    /// The values a template sees: values.yaml with `overrides` merged over it.
    pub fn values(&self, overrides: &Json) -> Json {
        let mut values = self.default_values.clone();
        merge(&mut values, overrides);
        values
    }

    /// Renders every template with `overrides` over the default values; NOTES.txt included
    /// (its text is not a manifest; callers skip it when splitting documents).
    pub fn render(&self, overrides: &Json, namespace: &str) -> Result<Vec<Rendered>, String> {
        let root = serde_json::json!({
            "Values": self.values(overrides),
            "Release": {"Name": "plimsoll", "Namespace": namespace, "Service": "Helm",
                        "IsInstall": true, "IsUpgrade": false, "Revision": 1},
            "Chart": {
                "Name": self.metadata["name"],
                "Version": self.metadata["version"],
                "AppVersion": self.metadata["appVersion"],
                "Description": self.metadata["description"],
            },
            "Capabilities": {"KubeVersion": {"Version": "v1.34.0", "Major": "1", "Minor": "34"}},
        });
        CURRENT.with(|c| *c.borrow_mut() = Some((self.dir.clone(), self.templates.clone())));
        let context = to_template_value(&root);
        let mut out = Vec::new();
        for (file, _) in &self.templates {
            // Helm renders no partial (`_*`), in whatever directory.
            if file
                .rsplit('/')
                .next()
                .is_some_and(|base| base.starts_with('_'))
            {
                continue;
            }
            let text = render_named(&self.templates, file, &context)
                .map_err(|e| format!("templates/{file}: {e}"))?;
            out.push(Rendered {
                file: file.clone(),
                text,
            });
        }
        Ok(out)
    }
}

/// Every file under `dir`, subdirectories included (as Helm loads `templates/crds/*.yaml`), as
/// (path relative to `templates/` with `/`, path on disk).
fn template_files(dir: &Path, prefix: &str) -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("templates dir") {
        let path = entry.expect("dir entry").path();
        let name = format!(
            "{prefix}{}",
            path.file_name().expect("name").to_string_lossy()
        );
        if path.is_dir() {
            files.extend(template_files(&path, &format!("{name}/")));
        } else {
            files.push((name, path));
        }
    }
    files
}

/// Parses YAML into JSON values (the shape templates and schemas work on).
pub fn yaml(text: &str, origin: &str) -> Json {
    serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{origin}: invalid YAML: {e}"))
}

/// Helm's coalescing of values: maps merge key by key, `null` deletes the key, anything else
/// replaces.
fn merge(base: &mut Json, over: &Json) {
    match (base, over) {
        (Json::Object(b), Json::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    _ if v.is_null() => {
                        b.remove(k);
                    }
                    Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
                    _ => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// `$.Files.Get "x"`, `.Files.Get "x"` and `$root.Files.Get "x"` become `chartFile "x"` (and
/// `.Files.Glob` becomes `chartGlob`): the receiver is always the chart's files. Likewise
/// `.Capabilities.APIVersions.Has`, answered as by a cluster that serves every API (the CRDs of
/// the Prometheus Operator and cert-manager included), so optional objects render.
fn rewrite_files_calls(source: &str) -> String {
    let mut out = source.to_owned();
    let methods = [
        (".Files.Get", "chartFile"),
        (".Files.Glob", "chartGlob"),
        (".Capabilities.APIVersions.Has", "apiVersionsHas"),
    ];
    for (method, function) in methods {
        while let Some(at) = out.find(method) {
            let start = out[..at]
                .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$' || c == '.'))
                .map_or(0, |i| i + 1);
            out.replace_range(start..at + method.len(), function);
        }
    }
    out
}

/// Renders one named template of the set, as Helm does for each file, and for `include`.
fn render_named(
    sources: &[(String, String)],
    name: &str,
    context: &Value,
) -> Result<String, String> {
    let mut template = Template::with_limits(Limits::unlimited());
    template.add_funcs(HELM_FUNCTIONS);
    for (file, text) in sources {
        template
            .add_template(file.clone(), text.clone())
            .map_err(|e| format!("parse {file}: {e}"))?;
    }
    template
        .parse(format!("{{{{ template {name:?} . }}}}"))
        .map_err(|e| e.to_string())?;
    let text = template
        .render(&Context::from(context.clone()))
        .map_err(|e| e.to_string())?;
    // Helm's engine does the same after every render.
    Ok(text.replace("<no value>", ""))
}

/// The Helm and Sprig functions the chart's templates may call, beyond Go's built-ins.
const HELM_FUNCTIONS: &[(&str, Func)] = &[
    ("include", include),
    ("required", required),
    ("fail", fail),
    ("chartFile", chart_file),
    ("chartGlob", chart_glob),
    ("apiVersionsHas", api_versions_has),
    ("toYaml", to_yaml),
    ("toJson", to_json),
    ("toPrettyJson", to_pretty_json),
    ("fromYaml", from_yaml),
    ("fromYamlArray", from_yaml_array),
    ("fromJson", from_json),
    ("nindent", nindent),
    ("indent", indent),
    ("quote", quote),
    ("squote", squote),
    ("default", default),
    ("empty", empty),
    ("coalesce", coalesce),
    ("ternary", ternary),
    ("list", list),
    ("dict", dict),
    ("hasKey", has_key),
    ("keys", keys),
    ("trim", trim),
    ("trimSuffix", trim_suffix),
    ("trimPrefix", trim_prefix),
    ("replace", replace),
    ("lower", lower),
    ("upper", upper),
    ("contains", contains),
    ("hasPrefix", has_prefix),
    ("hasSuffix", has_suffix),
    ("trunc", trunc),
    ("base", base),
    ("join", join),
    ("splitList", split_list),
    ("toString", to_string),
    ("int", int),
    ("until", until),
    ("append", append),
    ("has", has),
];

fn err(message: impl Into<String>) -> FuncError {
    FuncError::Generic(message.into())
}

fn arg<'a>(args: &'a [Value], i: usize, function: &str) -> Result<&'a Value, FuncError> {
    args.get(i)
        .ok_or_else(|| FuncError::AtLeastXArgs(function.to_owned(), i + 1))
}

fn string_arg(args: &[Value], i: usize, function: &str) -> Result<String, FuncError> {
    Ok(as_string(arg(args, i, function)?))
}

/// How Go's `fmt.Sprint` (and so Sprig's `toString`) prints a value.
fn as_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::NoValue | Value::Nil => String::new(),
        other => other.to_string(),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::NoValue | Value::Nil => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Map(m) | Value::Object(m) => m.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Function(_) => false,
    }
}

fn include(args: &[Value]) -> Result<Value, FuncError> {
    let name = string_arg(args, 0, "include")?;
    let context = args.get(1).cloned().unwrap_or(Value::Nil);
    let sources = CURRENT
        .with(|c| c.borrow().as_ref().map(|(_, s)| s.clone()))
        .ok_or_else(|| err("include: no chart loaded"))?;
    render_named(&sources, &name, &context)
        .map(Value::String)
        .map_err(|e| err(format!("include {name:?}: {e}")))
}

fn required(args: &[Value]) -> Result<Value, FuncError> {
    let message = string_arg(args, 0, "required")?;
    let value = arg(args, 1, "required")?;
    if matches!(value, Value::NoValue | Value::Nil) || value == &Value::String(String::new()) {
        return Err(err(message));
    }
    Ok(value.clone())
}

fn fail(args: &[Value]) -> Result<Value, FuncError> {
    Err(err(string_arg(args, 0, "fail")?))
}

fn chart_dir() -> Result<PathBuf, FuncError> {
    CURRENT
        .with(|c| c.borrow().as_ref().map(|(d, _)| d.clone()))
        .ok_or_else(|| err(".Files: no chart loaded"))
}

/// `.Files.Get`: the file's text, empty when it does not exist (as Helm).
fn chart_file(args: &[Value]) -> Result<Value, FuncError> {
    let path = string_arg(args, 0, ".Files.Get")?;
    Ok(Value::String(
        std::fs::read_to_string(chart_dir()?.join(path)).unwrap_or_default(),
    ))
}

/// `.Files.Glob`: path → text of the files matching a `dir/*.ext`-style pattern (one `*`, in
/// the file name), which is what ranging over Helm's result yields.
fn chart_glob(args: &[Value]) -> Result<Value, FuncError> {
    let pattern = string_arg(args, 0, ".Files.Glob")?;
    let (dir, file_pattern) = pattern.rsplit_once('/').unwrap_or(("", pattern.as_str()));
    let (prefix, suffix) = file_pattern
        .split_once('*')
        .ok_or_else(|| err(format!(".Files.Glob {pattern:?}: one '*' expected")))?;
    let root = chart_dir()?;
    let mut found = HashMap::new();
    for entry in std::fs::read_dir(root.join(dir)).into_iter().flatten() {
        let path = entry.map_err(|e| err(e.to_string()))?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if let Some(name) = name.filter(|n| n.starts_with(prefix) && n.ends_with(suffix)) {
            let text = std::fs::read_to_string(&path).map_err(|e| err(e.to_string()))?;
            let key = if dir.is_empty() {
                name
            } else {
                format!("{dir}/{name}")
            };
            found.insert(key, Value::String(text));
        }
    }
    Ok(Value::Map(found))
}

fn api_versions_has(args: &[Value]) -> Result<Value, FuncError> {
    string_arg(args, 0, ".Capabilities.APIVersions.Has")?;
    Ok(Value::Bool(true))
}

fn to_yaml(args: &[Value]) -> Result<Value, FuncError> {
    let json = to_json_value(arg(args, 0, "toYaml")?);
    let text = serde_saphyr::to_string(&json).map_err(|e| err(e.to_string()))?;
    // Helm's toYaml trims the final newline.
    Ok(Value::String(text.trim_end_matches('\n').to_owned()))
}

fn to_json(args: &[Value]) -> Result<Value, FuncError> {
    let json = to_json_value(arg(args, 0, "toJson")?);
    Ok(Value::String(json.to_string()))
}

fn to_pretty_json(args: &[Value]) -> Result<Value, FuncError> {
    let json = to_json_value(arg(args, 0, "toPrettyJson")?);
    serde_json::to_string_pretty(&json)
        .map(Value::String)
        .map_err(|e| err(e.to_string()))
}

fn from_yaml(args: &[Value]) -> Result<Value, FuncError> {
    let text = string_arg(args, 0, "fromYaml")?;
    let json: Json = serde_saphyr::from_str(&text).map_err(|e| err(e.to_string()))?;
    Ok(to_template_value(&json))
}

fn from_yaml_array(args: &[Value]) -> Result<Value, FuncError> {
    let text = string_arg(args, 0, "fromYamlArray")?;
    let json: Vec<Json> = serde_saphyr::from_str(&text).map_err(|e| err(e.to_string()))?;
    Ok(to_template_value(&Json::Array(json)))
}

fn from_json(args: &[Value]) -> Result<Value, FuncError> {
    let text = string_arg(args, 0, "fromJson")?;
    let json: Json = serde_json::from_str(&text).map_err(|e| err(e.to_string()))?;
    Ok(to_template_value(&json))
}

fn indent_lines(text: &str, width: usize) -> String {
    let pad = " ".repeat(width);
    text.split('\n')
        .map(|line| format!("{pad}{line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn width_arg(args: &[Value], function: &str) -> Result<usize, FuncError> {
    match arg(args, 0, function)? {
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| err(format!("{function}: bad width {n}"))),
        other => Err(err(format!("{function}: bad width {other}"))),
    }
}

fn nindent(args: &[Value]) -> Result<Value, FuncError> {
    let width = width_arg(args, "nindent")?;
    let text = string_arg(args, 1, "nindent")?;
    Ok(Value::String(format!("\n{}", indent_lines(&text, width))))
}

fn indent(args: &[Value]) -> Result<Value, FuncError> {
    let width = width_arg(args, "indent")?;
    let text = string_arg(args, 1, "indent")?;
    Ok(Value::String(indent_lines(&text, width)))
}

/// Go's `%q` for the strings a chart holds (JSON's escaping agrees for printable text).
fn quote(args: &[Value]) -> Result<Value, FuncError> {
    let quoted: Vec<String> = args
        .iter()
        .filter(|v| !matches!(v, Value::NoValue | Value::Nil))
        .map(|v| Json::String(as_string(v)).to_string())
        .collect();
    Ok(Value::String(quoted.join(" ")))
}

fn squote(args: &[Value]) -> Result<Value, FuncError> {
    let quoted: Vec<String> = args
        .iter()
        .filter(|v| !matches!(v, Value::NoValue | Value::Nil))
        .map(|v| format!("'{}'", as_string(v)))
        .collect();
    Ok(Value::String(quoted.join(" ")))
}

/// `default DEFAULT VALUE`: VALUE unless it is empty.
fn default(args: &[Value]) -> Result<Value, FuncError> {
    let fallback = arg(args, 0, "default")?;
    Ok(match args.get(1) {
        Some(v) if !is_empty(v) => v.clone(),
        _ => fallback.clone(),
    })
}

fn empty(args: &[Value]) -> Result<Value, FuncError> {
    Ok(Value::Bool(args.first().is_none_or(is_empty)))
}

fn coalesce(args: &[Value]) -> Result<Value, FuncError> {
    Ok(args
        .iter()
        .find(|v| !is_empty(v))
        .cloned()
        .unwrap_or(Value::Nil))
}

/// `ternary TRUE FALSE CONDITION`.
fn ternary(args: &[Value]) -> Result<Value, FuncError> {
    let condition = arg(args, 2, "ternary")?;
    Ok(if is_empty(condition) {
        args[1].clone()
    } else {
        args[0].clone()
    })
}

fn list(args: &[Value]) -> Result<Value, FuncError> {
    Ok(Value::Array(args.to_vec()))
}

fn dict(args: &[Value]) -> Result<Value, FuncError> {
    let mut map = HashMap::new();
    for pair in args.chunks(2) {
        map.insert(
            as_string(&pair[0]),
            pair.get(1).cloned().unwrap_or(Value::Nil),
        );
    }
    Ok(Value::Map(map))
}

fn has_key(args: &[Value]) -> Result<Value, FuncError> {
    let key = string_arg(args, 1, "hasKey")?;
    Ok(Value::Bool(match &args[0] {
        Value::Map(m) | Value::Object(m) => m.contains_key(&key),
        _ => false,
    }))
}

fn keys(args: &[Value]) -> Result<Value, FuncError> {
    let mut all = Vec::new();
    for v in args {
        if let Value::Map(m) | Value::Object(m) = v {
            all.extend(m.keys().cloned());
        }
    }
    all.sort();
    Ok(Value::Array(all.into_iter().map(Value::String).collect()))
}

fn string_function(
    args: &[Value],
    function: &str,
    f: impl Fn(&[String]) -> Value,
) -> Result<Value, FuncError> {
    let strings: Vec<String> = args.iter().map(as_string).collect();
    if strings.is_empty() {
        return Err(FuncError::AtLeastXArgs(function.to_owned(), 1));
    }
    Ok(f(&strings))
}

fn trim(args: &[Value]) -> Result<Value, FuncError> {
    string_function(args, "trim", |s| Value::from(s[0].trim()))
}

fn trim_suffix(args: &[Value]) -> Result<Value, FuncError> {
    arg(args, 1, "trimSuffix")?;
    string_function(args, "trimSuffix", |s| {
        Value::from(s[1].strip_suffix(s[0].as_str()).unwrap_or(&s[1]))
    })
}

fn trim_prefix(args: &[Value]) -> Result<Value, FuncError> {
    arg(args, 1, "trimPrefix")?;
    string_function(args, "trimPrefix", |s| {
        Value::from(s[1].strip_prefix(s[0].as_str()).unwrap_or(&s[1]))
    })
}

fn replace(args: &[Value]) -> Result<Value, FuncError> {
    arg(args, 2, "replace")?;
    string_function(args, "replace", |s| Value::from(s[2].replace(&s[0], &s[1])))
}

fn lower(args: &[Value]) -> Result<Value, FuncError> {
    string_function(args, "lower", |s| Value::from(s[0].to_lowercase()))
}

fn upper(args: &[Value]) -> Result<Value, FuncError> {
    string_function(args, "upper", |s| Value::from(s[0].to_uppercase()))
}

fn contains(args: &[Value]) -> Result<Value, FuncError> {
    arg(args, 1, "contains")?;
    string_function(args, "contains", |s| Value::Bool(s[1].contains(&s[0])))
}

fn has_prefix(args: &[Value]) -> Result<Value, FuncError> {
    arg(args, 1, "hasPrefix")?;
    string_function(args, "hasPrefix", |s| Value::Bool(s[1].starts_with(&s[0])))
}

fn has_suffix(args: &[Value]) -> Result<Value, FuncError> {
    arg(args, 1, "hasSuffix")?;
    string_function(args, "hasSuffix", |s| Value::Bool(s[1].ends_with(&s[0])))
}

fn trunc(args: &[Value]) -> Result<Value, FuncError> {
    let width = width_arg(args, "trunc")?;
    let text = string_arg(args, 1, "trunc")?;
    Ok(Value::String(text.chars().take(width).collect()))
}

/// Go's `path.Base`.
fn base(args: &[Value]) -> Result<Value, FuncError> {
    let path = string_arg(args, 0, "base")?;
    let trimmed = path.trim_end_matches('/');
    Ok(Value::from(trimmed.rsplit('/').next().unwrap_or(trimmed)))
}

/// `join SEPARATOR LIST`.
fn join(args: &[Value]) -> Result<Value, FuncError> {
    let separator = string_arg(args, 0, "join")?;
    let Value::Array(items) = arg(args, 1, "join")? else {
        return Err(err("join: a list expected"));
    };
    let items: Vec<String> = items.iter().map(as_string).collect();
    Ok(Value::String(items.join(&separator)))
}

/// `splitList SEPARATOR TEXT`.
fn split_list(args: &[Value]) -> Result<Value, FuncError> {
    let separator = string_arg(args, 0, "splitList")?;
    let text = string_arg(args, 1, "splitList")?;
    Ok(Value::Array(
        text.split(separator.as_str()).map(Value::from).collect(),
    ))
}

fn to_string(args: &[Value]) -> Result<Value, FuncError> {
    Ok(Value::String(string_arg(args, 0, "toString")?))
}

fn int(args: &[Value]) -> Result<Value, FuncError> {
    let n = match arg(args, 0, "int")? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.parse().ok(),
        _ => None,
    };
    Ok(Value::Number(Number::signed(n.unwrap_or(0))))
}

/// Sprig's `append LIST ITEM`: a new list with ITEM at the end.
fn append(args: &[Value]) -> Result<Value, FuncError> {
    let Value::Array(items) = arg(args, 0, "append")? else {
        return Err(err("append: a list expected"));
    };
    let mut items = items.clone();
    items.push(arg(args, 1, "append")?.clone());
    Ok(Value::Array(items))
}

/// Sprig's `has ITEM LIST`: whether LIST holds ITEM (compared as printed; the chart passes
/// strings).
fn has(args: &[Value]) -> Result<Value, FuncError> {
    let wanted = as_string(arg(args, 0, "has")?);
    let Value::Array(items) = arg(args, 1, "has")? else {
        return Err(err("has: a list expected"));
    };
    Ok(Value::Bool(items.iter().any(|i| as_string(i) == wanted)))
}

/// Sprig's `until N`: the list 0, 1, …, N-1 (empty for N ≤ 0).
fn until(args: &[Value]) -> Result<Value, FuncError> {
    let n = match int(args)? {
        Value::Number(n) => n.as_i64().unwrap_or(0),
        _ => 0,
    };
    Ok(Value::Array(
        (0..n.max(0))
            .map(|i| Value::Number(Number::signed(i)))
            .collect(),
    ))
}

/// JSON (from YAML) to the engine's values.
pub fn to_template_value(json: &Json) -> Value {
    match json {
        Json::Null => Value::Nil,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => Value::Number(if let Some(u) = n.as_u64() {
            Number::unsigned(u)
        } else if let Some(i) = n.as_i64() {
            Number::signed(i)
        } else {
            Number::float(n.as_f64().unwrap_or(f64::NAN))
        }),
        Json::String(s) => Value::String(s.clone()),
        Json::Array(a) => Value::Array(a.iter().map(to_template_value).collect()),
        Json::Object(m) => Value::Map(
            m.iter()
                .map(|(k, v)| (k.clone(), to_template_value(v)))
                .collect(),
        ),
    }
}

/// The engine's values back to JSON; maps come out with sorted keys, as Helm's toYaml writes.
fn to_json_value(v: &Value) -> Json {
    match v {
        Value::NoValue | Value::Nil | Value::Function(_) => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::String(s) => Json::String(s.clone()),
        Value::Array(a) => Json::Array(a.iter().map(to_json_value).collect()),
        Value::Map(m) | Value::Object(m) => {
            let sorted: BTreeMap<_, _> = m.iter().map(|(k, v)| (k, to_json_value(v))).collect();
            Json::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Number(n) => match n.kind() {
            NumberKind::Unsigned(u) => Json::from(u),
            NumberKind::Signed(i) => Json::from(i),
            NumberKind::Float(f) => {
                serde_json::Number::from_f64(f).map_or(Json::Null, Json::Number)
            }
        },
    }
}
