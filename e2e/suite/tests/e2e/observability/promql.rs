//! The metric names a PromQL expression (or a Grafana `label_values(…)` variable query) reads.
//!
//! A loose scanner, not a parser, but one that knows where PromQL puts identifiers that are
//! *not* metric names: label matchers inside `{…}`, label lists after `by`, `without`, `on`,
//! `ignoring`, `group_left` and `group_right`, durations inside `[…]` and after `offset`,
//! function and aggregation names (an identifier followed by `(`), the keywords `bool`, `and`,
//! `or`, `unless`, `inf`, `nan`, aggregation operators (`sum by (le) (…)`), string literals and
//! Grafana's `$variables`. Everything else
//! that looks like an identifier is a metric name.

/// Keywords that take a parenthesised list of label names.
const LABEL_LIST_KEYWORDS: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Keywords that are not followed by `(` where they appear: binary operators and modifiers,
/// numeric literals, and aggregation operators written `sum by (le) (…)`.
const BARE_KEYWORDS: [&str; 22] = [
    "bool",
    "and",
    "or",
    "unless",
    "offset",
    "inf",
    "nan",
    "atan2",
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];

/// The metric names `expr` reads, in order of appearance (duplicates kept out).
pub fn metric_names(expr: &str) -> Vec<String> {
    let expr = label_values_selector(expr).unwrap_or(expr);
    let chars: Vec<char> = expr.chars().collect();
    let mut names: Vec<String> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => i = skip_string(&chars, i),
            '{' => i = skip_until(&chars, i, '}'),
            '[' => i = skip_until(&chars, i, ']'),
            '#' => i = skip_until(&chars, i, '\n'),
            '$' => i = skip_word(&chars, i + 1),
            c if c.is_ascii_digit() || (c == '.' && next_is_digit(&chars, i)) => {
                // Numbers, including `1e3`, `0x1f` and durations such as `5m` after `offset`.
                i = skip_word(&chars, i);
            }
            c if is_ident_start(c) => {
                let end = skip_word(&chars, i);
                let word: String = chars[i..end].iter().collect();
                let after = skip_space(&chars, end);
                let call = chars.get(after) == Some(&'(');
                let lower = word.to_ascii_lowercase();
                if LABEL_LIST_KEYWORDS.contains(&lower.as_str()) {
                    i = if call {
                        skip_until(&chars, after, ')')
                    } else {
                        end
                    };
                } else if call || BARE_KEYWORDS.contains(&lower.as_str()) {
                    i = end;
                } else {
                    if !names.contains(&word) {
                        names.push(word);
                    }
                    i = end;
                }
            }
            _ => i += 1,
        }
    }
    names
}

/// For a Grafana variable query `label_values(<selector>, <label>)`, the selector; `None` for
/// anything else.
fn label_values_selector(query: &str) -> Option<&str> {
    let inner = query
        .trim()
        .strip_prefix("label_values(")?
        .strip_suffix(')')?;
    Some(
        inner
            .rsplit_once(',')
            .map_or(inner, |(selector, _)| selector),
    )
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

fn next_is_digit(chars: &[char], i: usize) -> bool {
    chars.get(i + 1).is_some_and(char::is_ascii_digit)
}

/// The index after the word (identifier characters and dots) starting at `i`.
fn skip_word(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() && (is_ident(chars[i]) || chars[i] == '.') {
        i += 1;
    }
    i
}

fn skip_space(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    i
}

/// The index after the closing `close` of the group opened at `i`, stepping over strings.
fn skip_until(chars: &[char], mut i: usize, close: char) -> usize {
    i += 1;
    while i < chars.len() {
        match chars[i] {
            '"' | '\'' | '`' => i = skip_string(chars, i),
            c if c == close => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// The index after the string literal opened at `i` (backslash escapes honoured, not in raw
/// backtick strings).
fn skip_string(chars: &[char], mut i: usize) -> usize {
    let quote = chars[i];
    i += 1;
    while i < chars.len() {
        match chars[i] {
            '\\' if quote != '`' => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::metric_names;

    #[test]
    fn names_are_found_and_everything_else_is_not() {
        let cases: [(&str, &[&str]); 9] = [
            ("up", &["up"]),
            (
                r#"histogram_quantile(0.99, sum by (le, resource) (rate(a_seconds_bucket{namespace="$namespace", pod=~"$pod"}[$__rate_interval])))"#,
                &["a_seconds_bucket"],
            ),
            (
                "sum without (error) (rate(x_total[5m] offset 1h)) / ignoring(error) group_left sum(rate(y_total[5m]))",
                &["x_total", "y_total"],
            ),
            (
                "(m > 0) - time() < 7 * 86400 and on (namespace, pod) leader == bool 1",
                &["m", "leader"],
            ),
            (
                r#"label_replace(z, "dst", "$1 by (x)", 'src', "(.*)")"#,
                &["z"],
            ),
            (
                "label_values(plimsoll_a_leader, namespace)",
                &["plimsoll_a_leader"],
            ),
            (
                r#"label_values(plimsoll_a_leader{namespace="$namespace"}, pod)"#,
                &["plimsoll_a_leader"],
            ),
            (
                "sum(rate(a:rule:rate5m[1h:5m])) or vector(0) unless absent(b) and 1e3 > inf",
                &["a:rule:rate5m", "b"],
            ),
            ("topk(5, max by (exported_namespace, name) (g))", &["g"]),
        ];
        for (expr, want) in cases {
            assert_eq!(metric_names(expr), want, "{expr}");
        }
    }
}
