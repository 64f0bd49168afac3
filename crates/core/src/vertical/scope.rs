//! Which namespaces the VPA services act in: one rule for the admission webhook (its request path
//! and the namespaceSelector it registers) and the updater (which VPAs it evicts for), so that a
//! pod the webhook would not touch is never evicted to be "fixed" by it.
//!
//! The flags are upstream's common VPA flags: `--vpa-object-namespace` (only this namespace) and
//! `--ignored-vpa-object-namespaces` (every namespace but these); they cannot be combined. When
//! neither is given the scope leaves out [`DEFAULT_IGNORED`] and the service's own namespace:
//! the control plane's pods must not be restarted by an autoscaler, nor must Plimsoll's own
//! (a VPA there in mode Recreate would evict the pods that do the evicting, and a webhook
//! mutating its own replicas cannot start while none is up). A given
//! `--ignored-vpa-object-namespaces` replaces that default list; an empty one ignores nothing.
//!
//! Invariant: [`NamespaceScope::admits`] and [`NamespaceScope::namespace_selector`] agree, so
//! what the API server sends the webhook is exactly what the webhook and the updater act on.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// The namespace left out by default besides the service's own.
pub const DEFAULT_IGNORED: &str = "kube-system";

/// The label every namespace carries with its own name (set by the API server since 1.21).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The namespaces a VPA service acts in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NamespaceScope {
    /// Only this namespace (`--vpa-object-namespace`).
    Only(String),
    /// Every namespace but these, in the order given, each once (`--ignored-vpa-object-namespaces`,
    /// or the default).
    AllBut(Vec<String>),
}

impl Default for NamespaceScope {
    /// Every namespace but [`DEFAULT_IGNORED`] (no own namespace known).
    fn default() -> Self {
        NamespaceScope::from_flags(None, None, None)
    }
}

impl NamespaceScope {
    /// The scope the flags describe: `only` wins; else `ignored` as given (empty items dropped);
    /// else [`DEFAULT_IGNORED`] and `own_namespace`. Empty strings count as not given.
    pub fn from_flags(
        only: Option<&str>,
        ignored: Option<&[String]>,
        own_namespace: Option<&str>,
    ) -> NamespaceScope {
        if let Some(ns) = only.filter(|ns| !ns.is_empty()) {
            return NamespaceScope::Only(ns.to_owned());
        }
        let listed: Vec<&str> = match ignored {
            Some(list) => list.iter().map(|ns| ns.trim()).collect(),
            None => std::iter::once(DEFAULT_IGNORED)
                .chain(own_namespace)
                .collect(),
        };
        let mut list: Vec<String> = Vec::with_capacity(listed.len());
        for ns in listed {
            if !ns.is_empty() && !list.iter().any(|l| l == ns) {
                list.push(ns.to_owned());
            }
        }
        NamespaceScope::AllBut(list)
    }

    /// Whether objects in `namespace` are acted on.
    pub fn admits(&self, namespace: &str) -> bool {
        match self {
            NamespaceScope::Only(ns) => ns == namespace,
            NamespaceScope::AllBut(ignored) => !ignored.iter().any(|ns| ns == namespace),
        }
    }

    /// The one namespace to watch, when the scope is a single namespace.
    pub fn only(&self) -> Option<&str> {
        match self {
            NamespaceScope::Only(ns) => Some(ns),
            NamespaceScope::AllBut(_) => None,
        }
    }

    /// The left-out namespaces, in order (none for a single-namespace scope).
    pub fn ignored(&self) -> Vec<&str> {
        match self {
            NamespaceScope::Only(_) => Vec::new(),
            NamespaceScope::AllBut(ignored) => ignored.iter().map(String::as_str).collect(),
        }
    }

    /// The webhook's `namespaceSelector` for this scope, on the namespace-name label: `In` the
    /// one namespace, `NotIn` the ignored ones, or `None` (every namespace) when nothing is
    /// ignored. Upstream's admission controller builds the same selectors.
    pub fn namespace_selector(&self) -> Option<LabelSelector> {
        let (operator, values) = match self {
            NamespaceScope::Only(ns) => ("In", vec![ns.clone()]),
            NamespaceScope::AllBut(ignored) if ignored.is_empty() => return None,
            NamespaceScope::AllBut(ignored) => ("NotIn", ignored.clone()),
        };
        Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: NAMESPACE_NAME_LABEL.to_owned(),
                operator: operator.to_owned(),
                values: Some(values),
            }]),
            match_labels: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Whether `selector` selects a namespace named `ns` (only the expressions built here).
    fn selects(selector: Option<&LabelSelector>, ns: &str) -> bool {
        let Some(selector) = selector else {
            return true;
        };
        selector.match_expressions.iter().flatten().all(|e| {
            assert_eq!(e.key, NAMESPACE_NAME_LABEL);
            let listed = e.values.iter().flatten().any(|v| v == ns);
            match e.operator.as_str() {
                "In" => listed,
                "NotIn" => !listed,
                other => panic!("operator {other}"),
            }
        })
    }

    #[test]
    fn default_leaves_out_kube_system_and_the_own_namespace() {
        let s = NamespaceScope::from_flags(None, None, Some("plimsoll-system"));
        assert!(!s.admits("kube-system"));
        assert!(!s.admits("plimsoll-system"));
        assert!(s.admits("shop"));
        assert!(s.admits("default"));
        assert_eq!(s.ignored(), ["kube-system", "plimsoll-system"]);
        // Unknown or empty own namespace: kube-system alone, listed once.
        for own in [None, Some(""), Some("kube-system")] {
            let s = NamespaceScope::from_flags(None, None, own);
            assert_eq!(s.ignored(), ["kube-system"], "{own:?}");
        }
        assert_eq!(NamespaceScope::default().ignored(), ["kube-system"]);
    }

    #[test]
    fn a_given_list_replaces_the_default_and_an_empty_one_ignores_nothing() {
        let given = strings(&["team-b", " team-a ", "", "team-b"]);
        let s = NamespaceScope::from_flags(None, Some(&given), Some("plimsoll-system"));
        assert_eq!(s.ignored(), ["team-b", "team-a"], "in order, once each");
        assert!(s.admits("kube-system"), "replaced, not added to");
        assert!(!s.admits("team-b"));
        let none = NamespaceScope::from_flags(None, Some(&strings(&[""])), Some("p"));
        assert!(none.admits("kube-system") && none.admits("p"));
        assert_eq!(none.namespace_selector(), None);
    }

    #[test]
    fn one_namespace_wins_over_every_default() {
        let s = NamespaceScope::from_flags(Some("kube-system"), None, Some("p"));
        assert_eq!(s.only(), Some("kube-system"));
        assert!(s.admits("kube-system"));
        assert!(!s.admits("shop"));
        assert!(s.ignored().is_empty());
        // Empty means all namespaces, as upstream's flag.
        let all = NamespaceScope::from_flags(Some(""), None, Some("p"));
        assert_eq!(all.only(), None);
        assert!(!all.admits("p"));
    }

    #[test]
    fn the_selector_selects_exactly_what_admits_admits() {
        let scopes = [
            NamespaceScope::from_flags(None, None, Some("plimsoll-system")),
            NamespaceScope::from_flags(Some("shop"), None, None),
            NamespaceScope::from_flags(None, Some(&strings(&["a", "b"])), None),
            NamespaceScope::from_flags(None, Some(&[]), None),
        ];
        for scope in &scopes {
            let selector = scope.namespace_selector();
            for ns in [
                "kube-system",
                "plimsoll-system",
                "shop",
                "a",
                "b",
                "default",
            ] {
                assert_eq!(
                    selects(selector.as_ref(), ns),
                    scope.admits(ns),
                    "{scope:?} on {ns}"
                );
            }
        }
        let v = serde_json::to_value(scopes[0].namespace_selector()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                "operator": "NotIn", "values": ["kube-system", "plimsoll-system"]}]})
        );
    }
}
