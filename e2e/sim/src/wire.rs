//! The HTTP wire every handler shares: query strings in ([`parse_query`]), JSON or protobuf
//! bodies and `metav1.Status` errors out ([`json_response`], [`encoded_response`],
//! [`error_response`]). It sits below the router ([`crate::rest`]) and the handlers it routes
//! to (`rbac`, `metrics_api`), so that they need nothing of the router.

use std::collections::HashMap;

use axum::body::{Body, Bytes};
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};
use serde_json::Value;

use crate::error::ApiError;
use crate::protobuf::{self, Encoding};

/// Parsed query parameters (last value wins).
pub type Query = HashMap<String, String>;

/// `s` with `+` as a space and `%XX` escapes decoded (an invalid escape stays as it is).
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..(i + 3).min(bytes.len())])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                if let Some(b) = hex {
                    out.push(b);
                    i += 2;
                } else {
                    out.push(b'%');
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a query string.
pub fn parse_query(q: Option<&str>) -> Query {
    q.unwrap_or_default()
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// A JSON response.
pub fn json_response(code: u16, body: &Value) -> Response {
    bytes_response(
        code,
        Bytes::from(serde_json::to_vec(body).unwrap_or_default()),
    )
}

/// A JSON body already serialized.
pub fn bytes_response(code: u16, body: Bytes) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// A response in the negotiated encoding; an object with no protobuf form falls back to JSON.
pub fn encoded_response(code: u16, body: &Value, encoding: Encoding) -> Response {
    if encoding == Encoding::Protobuf {
        match protobuf::encode(body) {
            Ok(bytes) => {
                let mut resp = bytes_response(code, Bytes::from(bytes));
                resp.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(protobuf::PROTOBUF),
                );
                return resp;
            }
            Err(e) => tracing::warn!(error = %e, "protobuf encoding failed; answering JSON"),
        }
    }
    json_response(code, body)
}

/// A `metav1.Status` error response.
pub fn error_response(e: &ApiError) -> Response {
    error_response_in(e, Encoding::Json)
}

/// A `metav1.Status` error response in `encoding`.
pub fn error_response_in(e: &ApiError, encoding: Encoding) -> Response {
    let mut resp = encoded_response(e.code, &e.to_status(), encoding);
    // Priority-and-fairness throttling says when to retry; a PDB refusal does not.
    if let Some(secs) = e
        .details
        .as_ref()
        .and_then(|d| d.get("retryAfterSeconds"))
        .and_then(Value::as_u64)
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}
