//! Decoding of Kubernetes protobuf request bodies into JSON, for the requests kubectl's
//! typed clients send as `application/vnd.kubernetes.protobuf` (client-go prefers protobuf for
//! built-in kinds and does not fall back to JSON on 415): `kubectl create deployment`
//! (Deployment), `kubectl drain` (Eviction), scale and delete options.
//!
//! The envelope is the 4-byte magic `k8s\0` followed by a `runtime.Unknown` whose `raw` field
//! holds the object. Decoding is driven by a table of field numbers from k8s.io/api's
//! `generated.proto`; fields outside the table are skipped, so a body using them loses them
//! (a documented gap). Responses are always JSON (clients accept it).

use serde_json::{Map, Value, json};

use crate::error::ApiError;

use F::{Bool, Int, IntOrStr, IntP, MapQty, MapStr, Msg, RepMsg, RepStr, Str, Time};

#[derive(Debug, Clone, Copy)]
enum F {
    Str,
    /// int32/int64 that is omitted when zero (non-pointer Go fields).
    Int,
    /// int32/int64 pointer fields: zero is meaningful.
    IntP,
    Bool,
    Msg(&'static str),
    RepStr,
    RepMsg(&'static str),
    MapStr,
    MapQty,
    Time,
    IntOrStr,
}

/// A message's fields: (field number, JSON name, how to decode it).
type Fields = &'static [(u64, &'static str, F)];

/// Field numbers from k8s.io/api's `generated.proto`, per message, for the kinds decoded.
const SCHEMA: &[(&str, Fields)] = &[
    ("TypeMeta", &[(1, "apiVersion", Str), (2, "kind", Str)]),
    (
        "ObjectMeta",
        &[
            (1, "name", Str),
            (2, "generateName", Str),
            (3, "namespace", Str),
            (5, "uid", Str),
            (6, "resourceVersion", Str),
            (7, "generation", Int),
            (8, "creationTimestamp", Time),
            (10, "deletionGracePeriodSeconds", IntP),
            (11, "labels", MapStr),
            (12, "annotations", MapStr),
            (13, "ownerReferences", RepMsg("OwnerReference")),
            (14, "finalizers", RepStr),
        ],
    ),
    (
        "OwnerReference",
        &[
            (1, "kind", Str),
            (3, "name", Str),
            (4, "uid", Str),
            (5, "apiVersion", Str),
            (6, "controller", Bool),
            (7, "blockOwnerDeletion", Bool),
        ],
    ),
    (
        "Deployment",
        &[
            (1, "metadata", Msg("ObjectMeta")),
            (2, "spec", Msg("DeploymentSpec")),
        ],
    ),
    (
        "DeploymentSpec",
        &[
            (1, "replicas", IntP),
            (2, "selector", Msg("LabelSelector")),
            (3, "template", Msg("PodTemplateSpec")),
            (4, "strategy", Msg("DeploymentStrategy")),
            (5, "minReadySeconds", Int),
            (6, "revisionHistoryLimit", IntP),
            (7, "paused", Bool),
            (9, "progressDeadlineSeconds", IntP),
        ],
    ),
    (
        "DeploymentStrategy",
        &[
            (1, "type", Str),
            (2, "rollingUpdate", Msg("RollingUpdateDeployment")),
        ],
    ),
    (
        "RollingUpdateDeployment",
        &[(1, "maxUnavailable", IntOrStr), (2, "maxSurge", IntOrStr)],
    ),
    (
        "LabelSelector",
        &[
            (1, "matchLabels", MapStr),
            (2, "matchExpressions", RepMsg("LabelSelectorRequirement")),
        ],
    ),
    (
        "LabelSelectorRequirement",
        &[(1, "key", Str), (2, "operator", Str), (3, "values", RepStr)],
    ),
    (
        "PodTemplateSpec",
        &[
            (1, "metadata", Msg("ObjectMeta")),
            (2, "spec", Msg("PodSpec")),
        ],
    ),
    (
        "PodSpec",
        &[
            (2, "containers", RepMsg("Container")),
            (3, "restartPolicy", Str),
            (4, "terminationGracePeriodSeconds", IntP),
            (5, "activeDeadlineSeconds", IntP),
            (6, "dnsPolicy", Str),
            (7, "nodeSelector", MapStr),
            (8, "serviceAccountName", Str),
            (10, "nodeName", Str),
            (16, "hostname", Str),
            (17, "subdomain", Str),
            (19, "schedulerName", Str),
            (20, "initContainers", RepMsg("Container")),
        ],
    ),
    (
        "Container",
        &[
            (1, "name", Str),
            (2, "image", Str),
            (3, "command", RepStr),
            (4, "args", RepStr),
            (5, "workingDir", Str),
            (6, "ports", RepMsg("ContainerPort")),
            (7, "env", RepMsg("EnvVar")),
            (8, "resources", Msg("ResourceRequirements")),
            (13, "terminationMessagePath", Str),
            (14, "imagePullPolicy", Str),
            (20, "terminationMessagePolicy", Str),
        ],
    ),
    (
        "ContainerPort",
        &[
            (1, "name", Str),
            (2, "hostPort", Int),
            (3, "containerPort", Int),
            (4, "protocol", Str),
        ],
    ),
    ("EnvVar", &[(1, "name", Str), (2, "value", Str)]),
    (
        "ResourceRequirements",
        &[(1, "limits", MapQty), (2, "requests", MapQty)],
    ),
    (
        "Eviction",
        &[
            (1, "metadata", Msg("ObjectMeta")),
            (2, "deleteOptions", Msg("DeleteOptions")),
        ],
    ),
    (
        "DeleteOptions",
        &[
            (1, "gracePeriodSeconds", IntP),
            (2, "preconditions", Msg("Preconditions")),
            (4, "propagationPolicy", Str),
            (5, "dryRun", RepStr),
        ],
    ),
    (
        "Preconditions",
        &[(1, "uid", Str), (2, "resourceVersion", Str)],
    ),
    (
        "Scale",
        &[
            (1, "metadata", Msg("ObjectMeta")),
            (2, "spec", Msg("ScaleSpec")),
        ],
    ),
    ("ScaleSpec", &[(1, "replicas", Int)]),
];

fn schema(msg: &str) -> Fields {
    SCHEMA
        .iter()
        .find(|(name, _)| *name == msg)
        .map_or(&[], |(_, fields)| fields)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

fn bad(msg: &str) -> ApiError {
    ApiError::bad_request(format!(
        "the body of the request could not be decoded as protobuf: {msg}"
    ))
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, ApiError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self
                .buf
                .get(self.pos)
                .ok_or_else(|| bad("truncated varint"))?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad("varint too long"))
    }

    fn bytes(&mut self) -> Result<&'a [u8], ApiError> {
        let n = self.varint()? as usize;
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or_else(|| bad("truncated field"))?;
        let b = &self.buf[self.pos..end];
        self.pos = end;
        Ok(b)
    }

    fn skip(&mut self, wire: u64) -> Result<(), ApiError> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => self.advance(8),
            2 => self.bytes().map(|_| ()),
            5 => self.advance(4),
            _ => Err(bad("unsupported wire type")),
        }
    }

    fn advance(&mut self, n: usize) -> Result<(), ApiError> {
        if self.pos + n > self.buf.len() {
            return Err(bad("truncated fixed field"));
        }
        self.pos += n;
        Ok(())
    }

    fn fields(buf: &'a [u8]) -> Result<Vec<(u64, u64, FieldValue<'a>)>, ApiError> {
        let mut r = Reader { buf, pos: 0 };
        let mut out = Vec::new();
        while r.pos < r.buf.len() {
            let tag = r.varint()?;
            let (num, wire) = (tag >> 3, tag & 7);
            match wire {
                0 => out.push((num, wire, FieldValue::Varint(r.varint()?))),
                2 => out.push((num, wire, FieldValue::Bytes(r.bytes()?))),
                w => r.skip(w)?,
            }
        }
        Ok(out)
    }
}

enum FieldValue<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn as_str(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[allow(clippy::many_single_char_names)]
fn map_entry(b: &[u8], qty: bool) -> Result<(String, Value), ApiError> {
    let (mut k, mut v) = (String::new(), Value::Null);
    for (num, _, fv) in Reader::fields(b)? {
        match (num, fv) {
            (1, FieldValue::Bytes(x)) => k = as_str(x),
            (2, FieldValue::Bytes(x)) if qty => {
                v = Reader::fields(x)?
                    .into_iter()
                    .find_map(|(n, _, f)| match (n, f) {
                        (1, FieldValue::Bytes(s)) => Some(json!(as_str(s))),
                        _ => None,
                    })
                    .unwrap_or(Value::Null);
            }
            (2, FieldValue::Bytes(x)) => v = json!(as_str(x)),
            _ => {}
        }
    }
    Ok((k, v))
}

#[allow(clippy::many_single_char_names)]
fn decode_message(msg: &str, buf: &[u8]) -> Result<Value, ApiError> {
    let table = schema(msg);
    let mut out = Map::new();
    for (num, _, fv) in Reader::fields(buf)? {
        let Some((_, name, kind)) = table.iter().find(|(n, _, _)| *n == num) else {
            continue;
        };
        let name = (*name).to_string();
        match (kind, fv) {
            (F::Str, FieldValue::Bytes(b)) if !b.is_empty() => {
                out.insert(name, json!(as_str(b)));
            }
            (F::Int, FieldValue::Varint(v)) if v != 0 => {
                out.insert(name, json!(v as i64));
            }
            (F::IntP, FieldValue::Varint(v)) => {
                out.insert(name, json!(v as i64));
            }
            (F::Bool, FieldValue::Varint(v)) if v != 0 => {
                out.insert(name, json!(true));
            }
            (F::Msg(m), FieldValue::Bytes(b)) => {
                out.insert(name, decode_message(m, b)?);
            }
            (F::RepStr, FieldValue::Bytes(b)) => {
                let e = out.entry(name).or_insert_with(|| json!([]));
                if let Some(a) = e.as_array_mut() {
                    a.push(json!(as_str(b)));
                }
            }
            (F::RepMsg(m), FieldValue::Bytes(b)) => {
                let v = decode_message(m, b)?;
                let e = out.entry(name).or_insert_with(|| json!([]));
                if let Some(a) = e.as_array_mut() {
                    a.push(v);
                }
            }
            (F::MapStr | F::MapQty, FieldValue::Bytes(b)) => {
                let (k, v) = map_entry(b, matches!(kind, F::MapQty))?;
                let e = out.entry(name).or_insert_with(|| json!({}));
                if let Some(m) = e.as_object_mut() {
                    m.insert(k, v);
                }
            }
            (F::Time, FieldValue::Bytes(b)) => {
                let secs = Reader::fields(b)?
                    .into_iter()
                    .find_map(|(n, _, f)| match (n, f) {
                        (1, FieldValue::Varint(v)) => Some(v as i64),
                        _ => None,
                    });
                let v = match secs
                    .filter(|s| *s != 0)
                    .and_then(|s| jiff::Timestamp::from_second(s).ok())
                {
                    Some(t) => json!(crate::clock::rfc3339(t)),
                    None => Value::Null,
                };
                out.insert(name, v);
            }
            (F::IntOrStr, FieldValue::Bytes(b)) => {
                let (mut ty, mut int, mut s) = (0u64, 0i64, String::new());
                for (n, _, f) in Reader::fields(b)? {
                    match (n, f) {
                        (1, FieldValue::Varint(v)) => ty = v,
                        (2, FieldValue::Varint(v)) => int = i64::from(v as i32),
                        (3, FieldValue::Bytes(x)) => s = as_str(x),
                        _ => {}
                    }
                }
                out.insert(name, if ty == 1 { json!(s) } else { json!(int) });
            }
            _ => {}
        }
    }
    Ok(Value::Object(out))
}

/// Decodes a `k8s\0`-prefixed protobuf body into the JSON object it encodes.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let rest = body
        .strip_prefix(b"k8s\0")
        .ok_or_else(|| bad("missing k8s magic prefix"))?;
    let (mut type_meta, mut raw) = (Value::Null, None);
    for (num, _, fv) in Reader::fields(rest)? {
        match (num, fv) {
            (1, FieldValue::Bytes(b)) => type_meta = decode_message("TypeMeta", b)?,
            (2, FieldValue::Bytes(b)) => raw = Some(b),
            _ => {}
        }
    }
    let kind = type_meta
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if schema(&kind).is_empty() {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!("the sim does not decode protobuf for kind {kind:?}; send application/json"),
        ));
    }
    let mut obj = decode_message(&kind, raw.unwrap_or_default())?;
    obj["apiVersion"] = type_meta.get("apiVersion").cloned().unwrap_or(Value::Null);
    obj["kind"] = json!(kind);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_bytes(num: u64, b: &[u8]) -> Vec<u8> {
        let mut out = vec![((num << 3) | 2) as u8, b.len() as u8];
        out.extend_from_slice(b);
        out
    }

    #[test]
    fn decodes_a_minimal_deployment() {
        let meta = [
            field_bytes(1, b"web"),
            field_bytes(
                11,
                &[field_bytes(1, b"app"), field_bytes(2, b"web")].concat(),
            ),
        ]
        .concat();
        let container = [field_bytes(1, b"x"), field_bytes(2, b"nginx")].concat();
        let pod_spec = field_bytes(2, &container);
        let template = field_bytes(2, &pod_spec);
        let spec = [vec![(1 << 3) as u8, 3], field_bytes(3, &template)].concat();
        let deploy = [field_bytes(1, &meta), field_bytes(2, &spec)].concat();
        let tm = [field_bytes(1, b"apps/v1"), field_bytes(2, b"Deployment")].concat();
        let body = [
            b"k8s\0".to_vec(),
            field_bytes(1, &tm),
            field_bytes(2, &deploy),
        ]
        .concat();
        let v = decode(&body).unwrap();
        assert_eq!(v["kind"], "Deployment");
        assert_eq!(v["metadata"]["labels"]["app"], "web");
        assert_eq!(v["spec"]["replicas"], 3);
        assert_eq!(
            v["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx"
        );
        assert!(decode(b"nope").is_err());
    }
}
