//! Request attributes from a URL, as the apiserver's `RequestInfoFactory` resolves them:
//! `/api/v1/...` and `/apis/{group}/{version}/...` with at least a resource are resource
//! requests (namespace, resource, name, subresource; the verb from the method, `watch=true`
//! and whether a name is given); everything else (`/api`, `/apis/{group}/{version}`,
//! `/version`, `/openapi/v3`, `/healthz`, `/sim/v1/...`) is a non-resource URL whose verb is
//! the lower-case method.

use http::Method;

use super::authorizer::{Attributes, UserInfo};

/// The attributes of a request by `user` for `method` on the path `segs` (decoded segments).
pub fn attributes(user: UserInfo, method: &Method, segs: &[&str], watch_param: bool) -> Attributes {
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
            return finish(user, method, group, ns, &v, watch_param, path);
        }
        other => ("", other),
    };
    finish(user, method, group, namespace, parts, watch_param, path)
}

fn finish(
    user: UserInfo,
    method: &Method,
    group: &str,
    namespace: &str,
    parts: &[&str],
    watch_param: bool,
    path: String,
) -> Attributes {
    let resource = parts.first().copied().unwrap_or_default();
    let name = parts.get(1).copied().unwrap_or_default();
    let subresource = parts.get(2).copied().unwrap_or_default();
    let verb = match (method.as_str(), name.is_empty()) {
        ("GET" | "HEAD", _) if watch_param => "watch",
        ("GET" | "HEAD", true) => "list",
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
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        attributes(UserInfo::default(), method, &segs, watch)
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
