//! Authentication: who a request comes from. The sim's admin token is the cluster admin
//! (`plimsoll-sim-admin` in `system:masters`); tokens issued through the TokenRequest API are
//! opaque strings mapped to their ServiceAccount. A request without a token is
//! `system:anonymous` (`system:unauthenticated`), as with the apiserver's default anonymous
//! auth. Without `--authorize` an unknown token is still the admin (the sim used to accept any
//! token); with it, an unknown token is 401.
//!
//! Impersonation (`Impersonate-User`, `Impersonate-Group`) is honoured when the caller may
//! `impersonate` users (and groups) — in practice the admin, which is what `kubectl --as` needs.
//! A ServiceAccount user name impersonated without groups gets the ServiceAccount groups, and
//! every impersonated user gets `system:authenticated`, as upstream does.

use std::collections::HashMap;
use std::sync::RwLock;

use http::HeaderMap;

use super::authorizer::{MASTERS_GROUP, UserInfo};

/// The user of the sim's admin token.
pub const ADMIN_USER: &str = "plimsoll-sim-admin";

/// The admin identity.
pub fn admin() -> UserInfo {
    UserInfo {
        name: ADMIN_USER.into(),
        groups: vec![MASTERS_GROUP.into(), "system:authenticated".into()],
    }
}

/// The anonymous identity.
pub fn anonymous() -> UserInfo {
    UserInfo {
        name: "system:anonymous".into(),
        groups: vec!["system:unauthenticated".into()],
    }
}

/// Bearer tokens and who they are.
#[derive(Debug, Default)]
pub struct Tokens {
    issued: RwLock<HashMap<String, UserInfo>>,
}

impl Tokens {
    /// Remembers a token for `user`.
    pub fn issue(&self, token: String, user: UserInfo) {
        if let Ok(mut m) = self.issued.write() {
            m.insert(token, user);
        }
    }

    /// The user of an issued token.
    pub fn lookup(&self, token: &str) -> Option<UserInfo> {
        self.issued.read().ok()?.get(token).cloned()
    }
}

/// Authentication failed: 401.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unauthorized;

/// Who sent a request with `headers` (before impersonation).
pub fn authenticate(
    tokens: &Tokens,
    headers: &HeaderMap,
    admin_token: &str,
    strict: bool,
) -> Result<UserInfo, Unauthorized> {
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match bearer {
        Some(t) if t == admin_token => Ok(admin()),
        Some(t) => match tokens.lookup(t) {
            Some(user) => Ok(user),
            None if strict => Err(Unauthorized),
            None => Ok(admin()),
        },
        None if strict => Ok(anonymous()),
        None => Ok(admin()),
    }
}

/// The identity a request asks to act as (`Impersonate-User` / `Impersonate-Group`), if any.
pub fn impersonation(headers: &HeaderMap) -> Option<UserInfo> {
    let name = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())?
        .to_string();
    let mut groups: Vec<String> = headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(String::from)
        .collect();
    if groups.is_empty()
        && let Some(rest) = name.strip_prefix("system:serviceaccount:")
        && let Some((ns, _)) = rest.split_once(':')
    {
        groups = vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
        ];
    }
    if !groups.iter().any(|g| g == "system:authenticated") {
        groups.push("system:authenticated".into());
    }
    Some(UserInfo { name, groups })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn tokens_resolve_to_identities() {
        let tokens = Tokens::default();
        tokens.issue("t1".into(), UserInfo::service_account("ns", "sa"));
        let auth = |h: &HeaderMap, strict| authenticate(&tokens, h, "admin", strict);
        assert_eq!(
            auth(&headers(&[("authorization", "Bearer admin")]), true),
            Ok(admin())
        );
        assert_eq!(
            auth(&headers(&[("authorization", "Bearer t1")]), true).map(|u| u.name),
            Ok("system:serviceaccount:ns:sa".into())
        );
        assert_eq!(
            auth(&headers(&[("authorization", "Bearer nope")]), true),
            Err(Unauthorized)
        );
        assert_eq!(
            auth(&headers(&[("authorization", "Bearer nope")]), false),
            Ok(admin())
        );
        assert_eq!(auth(&headers(&[]), true), Ok(anonymous()));
    }

    #[test]
    fn impersonating_a_service_account_adds_its_groups() {
        let u = impersonation(&headers(&[(
            "impersonate-user",
            "system:serviceaccount:ns:sa",
        )]))
        .unwrap();
        assert_eq!(
            u.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
        let u = impersonation(&headers(&[
            ("impersonate-user", "jane"),
            ("impersonate-group", "devs"),
        ]))
        .unwrap();
        assert_eq!(u.groups, ["devs", "system:authenticated"]);
        assert!(impersonation(&headers(&[])).is_none());
    }
}
