//! Request attributes from a URL, as the apiserver's `RequestInfoFactory` resolves them:
//! `/api/v1/...` and `/apis/{group}/{version}/...` with at least a resource are resource
//! requests (namespace, resource, name, subresource; the verb from the method, `watch=true`
//! and whether a name is given); everything else (`/api`, `/apis/{group}/{version}`,
//! `/version`, `/openapi/v3`, `/healthz`, `/sim/v1/...`) is a non-resource URL whose verb is
//! the lower-case method.
//!
//! As upstream, a list or watch whose `fieldSelector` requires `metadata.name=<name>` (alone or
//! ANDed with other terms) carries that name, so a rule with `resourceNames` can allow it; a
//! POST to a collection (`create`) and a `deletecollection` never carry one, so such a rule
//! never allows them. A GET of a named object is a `get` even with `watch=true` (upstream turns
//! only unnamed GETs into `list` or `watch`).

use http::Method;

use super::authorizer::{Attributes, UserInfo};

/// What the query string adds to a request's attributes.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueryInfo<'a> {
    /// `watch=true` (or `1`).
    pub watch: bool,
    /// The raw `fieldSelector`, if any.
    pub field_selector: Option<&'a str>,
}

/// The name a field selector requires exactly (upstream `RequiresExactMatch("metadata.name")`:
/// a `metadata.name=` or `==` term, ANDed with anything), when it is a valid path segment.
fn selected_name(field_selector: &str) -> Option<&str> {
    let name = field_selector.split(',').find_map(|term| {
        let term = term.trim();
        if term.contains("!=") {
            return None;
        }
        let (field, value) = term.split_once("==").or_else(|| term.split_once('='))?;
        (field.trim() == "metadata.name").then(|| value.trim())
    })?;
    // upstream path.IsValidPathSegmentName
    let valid = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains('%');
    valid.then_some(name)
}

/// The attributes of a request by `user` for `method` on the path `segs` (decoded segments).
pub fn attributes(
    user: UserInfo,
    method: &Method,
    segs: &[&str],
    query: QueryInfo<'_>,
) -> Attributes {
    let path = format!("/{}", segs.join("/"));
    let rest = match segs {
        ["api", _version, rest @ ..] => Some(("", rest)),
        ["apis", group, _version, rest @ ..] => Some((*group, rest)),
        _ => None,
    };
    let Some((group, rest)) = rest.filter(|(_, rest)| !rest.is_empty()) else {
        return Attributes {
            user,
            verb: method.as_str().to_ascii_lowercase(),
            resource_request: false,
            path,
            ..Attributes::default()
        };
    };
    let (namespace, parts): (&str, &[&str]) = match rest {
        // `/namespaces/{ns}/{resource}/...`; `/namespaces/{name}[/status]` is the namespace itself.
        ["namespaces", ns, resource, more @ ..] if !matches!(*resource, "status" | "finalize") => {
            let mut v = vec![*resource];
            v.extend_from_slice(more);
            return finish(user, method, group, ns, &v, query, path);
        }
        other => ("", other),
    };
    finish(user, method, group, namespace, parts, query, path)
}

fn finish(
    user: UserInfo,
    method: &Method,
    group: &str,
    namespace: &str,
    parts: &[&str],
    query: QueryInfo<'_>,
    path: String,
) -> Attributes {
    let resource = parts.first().copied().unwrap_or_default();
    let mut name = parts.get(1).copied().unwrap_or_default();
    let subresource = parts.get(2).copied().unwrap_or_default();
    let verb = match (method.as_str(), name.is_empty()) {
        ("GET" | "HEAD", true) => {
            if let Some(selected) = query.field_selector.and_then(selected_name) {
                name = selected;
            }
            if query.watch { "watch" } else { "list" }
        }
        ("GET" | "HEAD", false) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "deletecollection",
        ("DELETE", false) => "delete",
        (other, _) => {
            return Attributes {
                user,
                verb: other.to_ascii_lowercase(),
                resource_request: true,
                group: group.into(),
                resource: resource.into(),
                subresource: subresource.into(),
                namespace: namespace.into(),
                name: name.into(),
                path,
            };
        }
    };
    Attributes {
        user,
        verb: verb.into(),
        resource_request: true,
        group: group.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        namespace: namespace.into(),
        name: name.into(),
        path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: &Method, path: &str, watch: bool) -> Attributes {
        with_selector(method, path, watch, None)
    }

    fn with_selector(
        method: &Method,
        path: &str,
        watch: bool,
        field_selector: Option<&str>,
    ) -> Attributes {
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let query = QueryInfo {
            watch,
            field_selector,
        };
        attributes(UserInfo::default(), method, &segs, query)
    }

    #[test]
    fn a_name_in_the_field_selector_names_a_list_or_watch_only() {
        let leases = "/apis/coordination.k8s.io/v1/namespaces/ns/leases";
        for (selector, name) in [
            ("metadata.name=mine", "mine"),
            ("metadata.name==mine", "mine"),
            ("spec.x=y,metadata.name=mine", "mine"),
            ("metadata.name!=mine", ""),
            ("metadata.namespace=ns", ""),
            ("metadata.name=a/b", ""),
            ("metadata.name=..", ""),
        ] {
            for watch in [false, true] {
                let a = with_selector(&Method::GET, leases, watch, Some(selector));
                assert_eq!(a.name, name, "{selector} watch={watch}");
                assert_eq!(a.verb, if watch { "watch" } else { "list" });
            }
        }
        // A POST to the collection is a create with no name, whatever the query says; a DELETE of
        // the collection likewise.
        for (method, verb) in [
            (Method::POST, "create"),
            (Method::DELETE, "deletecollection"),
        ] {
            let a = with_selector(&method, leases, false, Some("metadata.name=mine"));
            assert_eq!((a.verb.as_str(), a.name.as_str()), (verb, ""));
        }
        // A named GET stays a get, also with watch=true.
        let a = with_selector(&Method::GET, &format!("{leases}/mine"), true, None);
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("get", "mine"));
    }

    #[test]
    fn resource_urls_resolve_like_request_info() {
        let a = attrs(&Method::GET, "/api/v1/namespaces/ns/pods", false);
        assert_eq!(
            (a.verb.as_str(), a.resource.as_str(), a.namespace.as_str()),
            ("list", "pods", "ns")
        );
        let a = attrs(&Method::GET, "/api/v1/namespaces/ns/pods", true);
        assert_eq!(a.verb, "watch");
        let a = attrs(
            &Method::POST,
            "/api/v1/namespaces/ns/pods/web-1/eviction",
            false,
        );
        assert_eq!(
            (a.verb.as_str(), a.name.as_str(), a.subresource.as_str()),
            ("create", "web-1", "eviction")
        );
        let a = attrs(
            &Method::PATCH,
            "/apis/apps/v1/namespaces/ns/deployments/web/scale",
            false,
        );
        assert_eq!(
            (a.group.as_str(), a.combined_resource().as_str()),
            ("apps", "deployments/scale")
        );
        // The namespace object itself.
        let a = attrs(&Method::GET, "/api/v1/namespaces/ns", false);
        assert_eq!(
            (a.resource.as_str(), a.name.as_str(), a.namespace.as_str()),
            ("namespaces", "ns", "")
        );
        let a = attrs(&Method::PUT, "/api/v1/namespaces/ns/status", false);
        assert_eq!(a.combined_resource(), "namespaces/status");
        let a = attrs(
            &Method::DELETE,
            "/apis/apps/v1/namespaces/ns/deployments",
            false,
        );
        assert_eq!(a.verb, "deletecollection");
        let a = attrs(
            &Method::GET,
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/x",
            false,
        );
        assert_eq!((a.verb.as_str(), a.namespace.as_str()), ("get", ""));
    }

    #[test]
    fn discovery_is_non_resource() {
        for p in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps/v1",
            "/version",
            "/openapi/v3",
        ] {
            let a = attrs(&Method::GET, p, false);
            assert!(!a.resource_request, "{p}");
            assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", p));
        }
    }
}
