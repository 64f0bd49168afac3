//! The review APIs, answered from the same authorizer as every request (with or without
//! `--authorize`): `authorization.k8s.io/v1` SubjectAccessReview (any user, cluster scope),
//! LocalSubjectAccessReview (any user, one namespace) and SelfSubjectAccessReview (the caller;
//! what `kubectl auth can-i` sends), and `authentication.k8s.io/v1` TokenReview and
//! SelfSubjectReview (`kubectl auth whoami`). Reviews are not stored: the answer is the
//! request with `status` filled in, `201 Created`, as the apiserver returns it.

use serde_json::{Value, json};

use super::authn::Tokens;
use super::authorizer::{Attributes, PolicySource, UserInfo, authorize};
use crate::error::ApiError;

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

fn text(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The attributes a review's `spec` asks about, for `user`.
fn review_attributes(spec: &Value, user: UserInfo) -> Result<Attributes, ApiError> {
    if let Some(r) = spec.get("resourceAttributes") {
        return Ok(Attributes {
            user,
            verb: text(r, "/verb"),
            resource_request: true,
            group: text(r, "/group"),
            resource: text(r, "/resource"),
            subresource: text(r, "/subresource"),
            namespace: text(r, "/namespace"),
            name: text(r, "/name"),
            path: String::new(),
        });
    }
    if let Some(n) = spec.get("nonResourceAttributes") {
        return Ok(Attributes {
            user,
            verb: text(n, "/verb"),
            path: text(n, "/path"),
            ..Attributes::default()
        });
    }
    Err(ApiError::invalid(
        "spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
    ))
}

/// Which access review a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessReview {
    /// `subjectaccessreviews`.
    Subject,
    /// `localsubjectaccessreviews` in a namespace.
    Local,
    /// `selfsubjectaccessreviews`.
    SelfSubject,
}

impl AccessReview {
    /// The review a resource plural names.
    pub fn from_resource(resource: &str) -> Option<Self> {
        match resource {
            "subjectaccessreviews" => Some(Self::Subject),
            "localsubjectaccessreviews" => Some(Self::Local),
            "selfsubjectaccessreviews" => Some(Self::SelfSubject),
            _ => None,
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Self::Subject => "SubjectAccessReview",
            Self::Local => "LocalSubjectAccessReview",
            Self::SelfSubject => "SelfSubjectAccessReview",
        }
    }
}

/// Answers an access review posted by `caller` (in `namespace` for a local review).
pub fn access_review(
    policy: &dyn PolicySource,
    review: AccessReview,
    namespace: &str,
    caller: &UserInfo,
    mut body: Value,
) -> Result<Value, ApiError> {
    let spec = body.get("spec").cloned().unwrap_or(Value::Null);
    let user = match review {
        AccessReview::SelfSubject => caller.clone(),
        AccessReview::Subject | AccessReview::Local => {
            let name = text(&spec, "/user");
            let groups = strings(&spec, "groups");
            if name.is_empty() && groups.is_empty() {
                return Err(ApiError::invalid(format!(
                    "{} \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified",
                    review.kind()
                )));
            }
            UserInfo { name, groups }
        }
    };
    let mut attrs = review_attributes(&spec, user)?;
    if review == AccessReview::Local {
        if !attrs.namespace.is_empty() && attrs.namespace != namespace {
            return Err(ApiError::invalid(format!(
                "LocalSubjectAccessReview \"\" is invalid: spec.resourceAttributes.namespace: Invalid value: {:?}: must match metadata.namespace",
                attrs.namespace
            )));
        }
        attrs.namespace = namespace.to_string();
    }
    let decision = authorize(policy, &attrs);
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = json!(decision.reason);
    }
    body["status"] = status;
    body["apiVersion"] = json!("authorization.k8s.io/v1");
    body["kind"] = json!(review.kind());
    if body.get("metadata").is_none() {
        body["metadata"] = json!({});
    }
    Ok(body)
}

fn user_json(u: &UserInfo) -> Value {
    json!({"username": u.name, "groups": u.groups})
}

/// Answers a TokenReview: whether `spec.token` is a token the sim issued, and whose.
pub fn token_review(tokens: &Tokens, admin_token: &str, mut body: Value) -> Value {
    let token = text(&body, "/spec/token");
    let user = if token == admin_token {
        Some(super::authn::admin())
    } else {
        tokens.lookup(&token)
    };
    body["status"] = match user {
        Some(u) => json!({"authenticated": true, "user": user_json(&u)}),
        None => json!({"authenticated": false, "error": "invalid bearer token"}),
    };
    body["apiVersion"] = json!("authentication.k8s.io/v1");
    body["kind"] = json!("TokenReview");
    body
}

/// Answers a SelfSubjectReview (`kubectl auth whoami`).
pub fn self_subject_review(caller: &UserInfo) -> Value {
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
        "metadata": {}, "status": {"userInfo": user_json(caller)}})
}
