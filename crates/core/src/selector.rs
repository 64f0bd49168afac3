//! Label selectors: parse the string form, convert the API's structured form, match labels,
//! format back. The one implementation the services (through `plimsoll_runtime::selector`) and
//! the simulated API server share.
//!
//! The scale subresource reports its pod selector as a string (`status.selector`), in the syntax
//! `kubectl -l` accepts and `metav1.FormatLabelSelector` produces:
//!
//! ```text
//! app=web,tier!=cache,env in (prod,staging),track notin (canary),release,!legacy
//! ```
//!
//! All requirements must hold. `=` and `==` are equality; `!=` and `notin` also match objects that
//! lack the key (as upstream); `key` alone means "has the key", `!key` "lacks it"; `>`/`<` compare
//! integer values. The empty string selects everything.
//!
//! Invariants: a parsed selector formats back to a string that parses to the same selector
//! (requirements sorted by key, values sorted and deduplicated), so it can be passed as a
//! `labelSelector` query parameter unchanged in meaning.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// A label selector that does not parse, or an API selector the API server would reject.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector {input:?}: {reason}")]
pub struct SelectorError {
    /// The selector (or the offending key) as given.
    pub input: String,
    /// What is wrong with it, with the byte offset where it went wrong.
    pub reason: String,
}

type Result<T, E = SelectorError> = std::result::Result<T, E>;

/// One requirement on one label key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Requirement {
    /// `key=value`, `key==value`, or `key in (a,b)`: the label is present with one of the values.
    In(String, BTreeSet<String>),
    /// `key!=value` or `key notin (a,b)`: the label is absent or has none of the values.
    NotIn(String, BTreeSet<String>),
    /// `key`: the label is present (any value).
    Exists(String),
    /// `!key`: the label is absent.
    DoesNotExist(String),
    /// `key>n`: the label is present and its value is an integer greater than `n`.
    GreaterThan(String, i64),
    /// `key<n`: the label is present and its value is an integer less than `n`.
    LessThan(String, i64),
}

impl Requirement {
    /// The label key this requirement is about.
    pub fn key(&self) -> &str {
        match self {
            Requirement::In(k, _)
            | Requirement::NotIn(k, _)
            | Requirement::Exists(k)
            | Requirement::DoesNotExist(k)
            | Requirement::GreaterThan(k, _)
            | Requirement::LessThan(k, _) => k,
        }
    }

    /// Whether a set of labels satisfies this requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(|key| labels.get(key).map(String::as_str))
    }

    /// Whether the labels that `label` looks up (value by key, `None` when absent) satisfy this
    /// requirement; for label maps held in another shape (a JSON object) without copying them.
    pub fn matches_with<'l>(&self, label: impl FnOnce(&str) -> Option<&'l str>) -> bool {
        let value = label(self.key());
        match self {
            Requirement::In(_, values) => value.is_some_and(|v| values.contains(v)),
            Requirement::NotIn(_, values) => value.is_none_or(|v| !values.contains(v)),
            Requirement::Exists(_) => value.is_some(),
            Requirement::DoesNotExist(_) => value.is_none(),
            Requirement::GreaterThan(_, n) => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Requirement::LessThan(_, n) => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |values: &BTreeSet<String>| values.iter().cloned().collect::<Vec<_>>().join(",");
        match self {
            Requirement::In(k, values) if values.len() == 1 => write!(f, "{k}={}", join(values)),
            Requirement::In(k, values) => write!(f, "{k} in ({})", join(values)),
            Requirement::NotIn(k, values) if values.len() == 1 => {
                write!(f, "{k}!={}", join(values))
            }
            Requirement::NotIn(k, values) => write!(f, "{k} notin ({})", join(values)),
            Requirement::Exists(k) => write!(f, "{k}"),
            Requirement::DoesNotExist(k) => write!(f, "!{k}"),
            Requirement::GreaterThan(k, n) => write!(f, "{k}>{n}"),
            Requirement::LessThan(k, n) => write!(f, "{k}<{n}"),
        }
    }
}

/// A parsed label selector: every requirement must hold. Empty selects everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// The selector that selects everything.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Builds a selector from requirements (sorted by key, as upstream prints them).
    pub fn from_requirements(mut requirements: Vec<Requirement>) -> Self {
        requirements.sort_by(|a, b| a.key().cmp(b.key()).then_with(|| a.cmp(b)));
        Self { requirements }
    }

    /// Parses the string form (`a=b,c!=d,e in (x,y),!f`). Errors quote the input and say where
    /// it went wrong.
    pub fn parse(input: &str) -> Result<Self> {
        Parser::new(input).parse()
    }

    /// Converts an API `LabelSelector` (`matchLabels` + `matchExpressions`).
    ///
    /// Errors on an unknown operator, `In`/`NotIn` without values, or `Exists`/`DoesNotExist`
    /// with values — the same rules the API server applies.
    pub fn from_label_selector(selector: &LabelSelector) -> Result<Self> {
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            validate_key(key).map_err(|reason| selector_error(key, reason))?;
            requirements.push(Requirement::In(
                key.clone(),
                BTreeSet::from([value.clone()]),
            ));
        }
        for expr in selector.match_expressions.iter().flatten() {
            let key = expr.key.clone();
            validate_key(&key).map_err(|reason| selector_error(&key, reason))?;
            let values: BTreeSet<String> = expr.values.iter().flatten().cloned().collect();
            let requirement = match expr.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(selector_error(
                        &key,
                        format!("operator {} needs at least one value", expr.operator),
                    ));
                }
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(selector_error(
                        &key,
                        format!("operator {} takes no values", expr.operator),
                    ));
                }
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::DoesNotExist(key),
                other => {
                    return Err(selector_error(&key, format!("unknown operator {other:?}")));
                }
            };
            requirements.push(requirement);
        }
        Ok(Self::from_requirements(requirements))
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// The label keys it reads: what a cut-down copy of an object it is matched against keeps.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.requirements.iter().map(Requirement::key)
    }

    /// True when this selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether an object with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether an object whose labels `label` looks up is selected (see
    /// [`Requirement::matches_with`]).
    pub fn matches_with<'l>(&self, label: impl Fn(&str) -> Option<&'l str>) -> bool {
        self.requirements.iter().all(|r| r.matches_with(&label))
    }

    /// Like [`Selector::matches`] for an optional label map (absent labels = no labels).
    pub fn matches_opt(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        match labels {
            Some(labels) => self.matches(labels),
            None => self.matches(&BTreeMap::new()),
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Selector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

fn selector_error(input: &str, reason: impl Into<String>) -> SelectorError {
    SelectorError {
        input: input.to_owned(),
        reason: reason.into(),
    }
}

/// Label keys: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters
/// of `[A-Za-z0-9._-]` that starts and ends alphanumeric.
fn validate_key(key: &str) -> std::result::Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        let ok = !prefix.is_empty()
            && prefix.len() <= 253
            && prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
        if !ok {
            return Err(format!("invalid key prefix {prefix:?}"));
        }
    }
    validate_name(name).map_err(|reason| format!("invalid key {key:?}: {reason}"))
}

/// Label values and key names: at most 63 characters of `[A-Za-z0-9._-]`, alphanumeric at both
/// ends. (Values may be empty; key names may not — the caller checks.)
fn validate_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    validate_value(name)
}

fn validate_value(value: &str) -> std::result::Result<(), String> {
    if value.len() > 63 {
        return Err("must be at most 63 characters".into());
    }
    if !value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err("may contain only letters, digits, '-', '_' and '.'".into());
    }
    let alnum = |c: Option<char>| c.is_none_or(|c| c.is_ascii_alphanumeric());
    if !alnum(value.chars().next()) || !alnum(value.chars().last()) {
        return Err("must start and end with a letter or digit".into());
    }
    Ok(())
}

/// A small hand-written lexer/parser over the selector string.
struct Parser<'a> {
    input: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn new(input: &'a str) -> Self {
        Self { input, pos: 0 }
    }

    fn error(&self, reason: impl fmt::Display) -> SelectorError {
        selector_error(self.input, format!("{reason} at offset {}", self.pos))
    }

    fn rest(&self) -> &'a str {
        &self.input[self.pos..]
    }

    fn skip_spaces(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_spaces();
        if self.rest().starts_with(token) {
            self.pos += token.len();
            true
        } else {
            false
        }
    }

    /// A key or a value: everything up to a delimiter.
    fn word(&mut self) -> &'a str {
        self.skip_spaces();
        let rest = self.rest();
        let len = rest
            .find(|c: char| {
                c.is_whitespace() || matches!(c, ',' | '=' | '!' | '(' | ')' | '<' | '>')
            })
            .unwrap_or(rest.len());
        self.pos += len;
        &rest[..len]
    }

    fn parse(mut self) -> Result<Selector> {
        let mut requirements = Vec::new();
        self.skip_spaces();
        if self.rest().is_empty() {
            return Ok(Selector::everything());
        }
        loop {
            requirements.push(self.requirement()?);
            self.skip_spaces();
            if self.rest().is_empty() {
                break;
            }
            if !self.eat(",") {
                return Err(self.error("expected ','"));
            }
        }
        Ok(Selector::from_requirements(requirements))
    }

    fn key(&mut self) -> Result<String> {
        let key = self.word();
        if key.is_empty() {
            return Err(self.error("expected a label key"));
        }
        validate_key(key).map_err(|reason| self.error(reason))?;
        Ok(key.to_owned())
    }

    fn value(&mut self) -> Result<String> {
        let value = self.word();
        validate_value(value).map_err(|reason| self.error(format!("value {value:?} {reason}")))?;
        Ok(value.to_owned())
    }

    fn integer(&mut self) -> Result<i64> {
        let word = self.word();
        word.parse()
            .map_err(|_| self.error(format!("expected an integer, got {word:?}")))
    }

    fn requirement(&mut self) -> Result<Requirement> {
        if self.eat("!") {
            return Ok(Requirement::DoesNotExist(self.key()?));
        }
        let key = self.key()?;
        self.skip_spaces();
        // Order matters: "==" before "=", "!=" before a stray "!".
        if self.eat("==") || self.eat("=") {
            return Ok(Requirement::In(key, BTreeSet::from([self.value()?])));
        }
        if self.eat("!=") {
            return Ok(Requirement::NotIn(key, BTreeSet::from([self.value()?])));
        }
        if self.eat(">") {
            return Ok(Requirement::GreaterThan(key, self.integer()?));
        }
        if self.eat("<") {
            return Ok(Requirement::LessThan(key, self.integer()?));
        }
        let checkpoint = self.pos;
        match self.word() {
            "in" => Ok(Requirement::In(key, self.value_set()?)),
            "notin" => Ok(Requirement::NotIn(key, self.value_set()?)),
            "" => Ok(Requirement::Exists(key)),
            other => {
                self.pos = checkpoint;
                Err(self.error(format!("unexpected {other:?} after key {key:?}")))
            }
        }
    }

    fn value_set(&mut self) -> Result<BTreeSet<String>> {
        if !self.eat("(") {
            return Err(self.error("expected '(' after in/notin"));
        }
        let mut values = BTreeSet::new();
        if self.eat(")") {
            return Err(self.error("in/notin needs at least one value"));
        }
        loop {
            values.insert(self.value()?);
            if self.eat(")") {
                return Ok(values);
            }
            if !self.eat(",") {
                return Err(self.error("expected ',' or ')' in value list"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    use proptest::prelude::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn parses_and_matches() {
        // Shapes from apimachinery pkg/labels/selector_test.go TestSelectorMatches / TestLexerParser.
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], bool);
        let cases: &[Case] = &[
            ("", &[("x", "y")], true),
            ("x=y", &[("x", "y")], true),
            ("x=y,z=w", &[("x", "y"), ("z", "w")], true),
            ("x!=y,z!=w", &[("x", "z"), ("z", "a")], true),
            ("notin=in", &[("notin", "in")], true),
            ("x", &[("x", "z")], true),
            ("!x", &[("y", "z")], true),
            ("x>1", &[("x", "2")], true),
            ("x<1", &[("x", "0")], true),
            ("x=z", &[], false),
            ("x=y", &[("x", "z")], false),
            ("x=y,z=w", &[("x", "w"), ("z", "w")], false),
            ("x!=y,z!=w", &[("x", "z"), ("z", "w")], false),
            ("x", &[("y", "z")], false),
            ("!x", &[("x", "z")], false),
            ("x>1", &[("x", "0")], false),
            ("x<1", &[("x", "2")], false),
            ("x>1", &[("x", "abc")], false),
            ("x==y", &[("x", "y")], true),
            ("x in (a,b)", &[("x", "b")], true),
            ("x in (a,b)", &[("x", "c")], false),
            ("x in (a,b)", &[], false),
            ("x notin (a,b)", &[], true),
            ("x notin (a,b)", &[("x", "a")], false),
            ("x != y", &[], true),
            (
                "app=web, env in (prod, staging) ,!legacy",
                &[("app", "web"), ("env", "prod")],
                true,
            ),
            ("example.com/app=web", &[("example.com/app", "web")], true),
            ("x=", &[("x", "")], true),
            ("x=", &[("x", "a")], false),
        ];
        for (input, object, want) in cases {
            let selector = Selector::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(
                selector.matches(&labels(object)),
                *want,
                "{input} on {object:?}"
            );
        }
    }

    #[test]
    fn rejects_malformed_selectors_quoting_the_input() {
        // Invalid inputs from apimachinery pkg/labels/selector_test.go TestSelectorParse.
        for input in [
            "x=a||y=b",
            "x==a==b",
            "!x=a",
            "x<a",
            "x in",
            "x in ()",
            "x in (a",
            "x notin a",
            "=x",
            "x=y z",
            "x=a b",
            "-x=y",
            "x=-y",
            "x,",
            ",x",
        ] {
            match Selector::parse(input) {
                Ok(s) => panic!("{input:?} parsed as {s:?}"),
                Err(err) => {
                    let msg = err.to_string();
                    assert!(msg.contains(&format!("{input:?}")), "{msg}");
                }
            }
        }
    }

    #[test]
    fn formats_like_upstream() {
        let selector = Selector::parse("z notin (b,a), a=1, !c, b in (y)").unwrap();
        assert_eq!(selector.to_string(), "a=1,b=y,!c,z notin (a,b)");
        assert_eq!(Selector::everything().to_string(), "");
    }

    #[test]
    fn converts_api_label_selectors() {
        let api = LabelSelector {
            match_labels: Some([("app".to_owned(), "web".to_owned())].into()),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "env".into(),
                    operator: "In".into(),
                    values: Some(vec!["prod".into(), "staging".into()]),
                },
                LabelSelectorRequirement {
                    key: "legacy".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
            ]),
        };
        let selector = Selector::from_label_selector(&api).unwrap();
        assert_eq!(
            selector.to_string(),
            "app=web,env in (prod,staging),!legacy"
        );
        let bad = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "env".into(),
                operator: "In".into(),
                values: None,
            }]),
        };
        assert!(Selector::from_label_selector(&bad).is_err());
    }

    fn requirement() -> impl Strategy<Value = Requirement> {
        let key = "[a-z]([a-z0-9.-]{0,8}[a-z0-9])?";
        let value = "[A-Za-z0-9]([A-Za-z0-9_.-]{0,6}[A-Za-z0-9])?";
        let values = proptest::collection::btree_set(value, 1..4);
        prop_oneof![
            (key, values.clone()).prop_map(|(k, v)| Requirement::In(k, v)),
            (key, values).prop_map(|(k, v)| Requirement::NotIn(k, v)),
            key.prop_map(Requirement::Exists),
            key.prop_map(Requirement::DoesNotExist),
            (key, any::<i64>()).prop_map(|(k, n)| Requirement::GreaterThan(k, n)),
            (key, any::<i64>()).prop_map(|(k, n)| Requirement::LessThan(k, n)),
        ]
    }

    proptest! {
        #[test]
        fn format_then_parse_is_identity(reqs in proptest::collection::vec(requirement(), 0..5)) {
            let selector = Selector::from_requirements(reqs);
            let reparsed = Selector::parse(&selector.to_string()).unwrap();
            prop_assert_eq!(reparsed, selector);
        }
    }
}
