//! Kubernetes' JSON of a protobuf message and back, driven by the descriptors: field names as
//! in the `.proto` (they are the JSON names, except where `go-fields.txt` says otherwise),
//! int64 as numbers, bytes as base64, maps as objects, the apimachinery types in their own JSON
//! forms (`wellknown`). Not proto3's canonical JSON mapping.
//!
//! Decoding follows the Go structs: gogo marshals every non-pointer field, so a zero scalar on
//! the wire is absent in JSON unless the field is a pointer (`replicas: 0` stays) or has no
//! `omitempty` (Go prints it). Encoding writes what the JSON has; unknown JSON fields are
//! dropped, as a Go client decoding JSON would drop them.

use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, ReflectMessage, Value as Pb,
};
use serde_json::{Map, Value, json};

use super::schema::{Presence, Schema};
use super::wellknown::{self, Nested, WellKnown};
use crate::base64;

/// The JSON object of a message.
pub fn to_json(schema: &Schema, nested: Nested<'_>, msg: &DynamicMessage) -> Result<Value, String> {
    let desc = msg.descriptor();
    let message = desc.full_name();
    let mut out = Map::new();
    for (field, value) in msg.fields() {
        let proto_name = field.name();
        let presence = schema.presence(message, proto_name);
        if presence == Presence::Inline {
            if let Pb::Message(m) = value
                && let Value::Object(inner) = to_json(schema, nested, m)?
            {
                out.extend(inner);
            }
            continue;
        }
        if !field.is_list()
            && !field.is_map()
            && is_zero_scalar(value)
            && presence == Presence::OmitEmpty
        {
            continue;
        }
        if let Some(v) = field_to_json(schema, nested, value)? {
            out.insert(schema.json_name(message, proto_name).to_string(), v);
        }
    }
    Ok(Value::Object(out))
}

fn is_zero_scalar(v: &Pb) -> bool {
    match v {
        Pb::Bool(b) => !b,
        Pb::I32(i) => *i == 0,
        Pb::I64(i) => *i == 0,
        Pb::U32(i) => *i == 0,
        Pb::U64(i) => *i == 0,
        Pb::F32(f) => *f == 0.0,
        Pb::F64(f) => *f == 0.0,
        Pb::String(s) => s.is_empty(),
        Pb::Bytes(b) => b.is_empty(),
        Pb::EnumNumber(n) => *n == 0,
        Pb::Message(_) | Pb::List(_) | Pb::Map(_) => false,
    }
}

fn field_to_json(schema: &Schema, nested: Nested<'_>, value: &Pb) -> Result<Option<Value>, String> {
    match value {
        Pb::List(items) => {
            if items.is_empty() {
                return Ok(None);
            }
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                // A null element (an absent well-known value) stays null, keeping positions.
                out.push(value_to_json(schema, nested, item)?.unwrap_or(Value::Null));
            }
            Ok(Some(Value::Array(out)))
        }
        Pb::Map(entries) => {
            if entries.is_empty() {
                return Ok(None);
            }
            let mut out = Map::new();
            for (k, v) in entries {
                let key = match k {
                    MapKey::String(s) => s.clone(),
                    MapKey::Bool(b) => b.to_string(),
                    MapKey::I32(i) => i.to_string(),
                    MapKey::I64(i) => i.to_string(),
                    MapKey::U32(i) => i.to_string(),
                    MapKey::U64(i) => i.to_string(),
                };
                out.insert(
                    key,
                    value_to_json(schema, nested, v)?.unwrap_or(Value::Null),
                );
            }
            Ok(Some(Value::Object(out)))
        }
        _ => value_to_json(schema, nested, value),
    }
}

fn value_to_json(schema: &Schema, nested: Nested<'_>, value: &Pb) -> Result<Option<Value>, String> {
    Ok(Some(match value {
        Pb::Bool(b) => json!(b),
        Pb::I32(i) => json!(i),
        Pb::I64(i) => json!(i),
        Pb::U32(i) => json!(i),
        Pb::U64(i) => json!(i),
        Pb::F32(f) => float_json(f64::from(*f)),
        Pb::F64(f) => float_json(*f),
        Pb::String(s) => json!(s),
        Pb::Bytes(b) => json!(base64::encode(b)),
        Pb::EnumNumber(n) => json!(n),
        Pb::Message(m) => return message_to_json(schema, nested, m),
        Pb::List(_) | Pb::Map(_) => return Err("nested list or map".into()),
    }))
}

/// A float as Go's encoding/json writes it: integral values without a fraction (`0`, not `0.0`).
fn float_json(f: f64) -> Value {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e15 {
        json!(f as i64)
    } else {
        json!(f)
    }
}

fn message_to_json(
    schema: &Schema,
    nested: Nested<'_>,
    msg: &DynamicMessage,
) -> Result<Option<Value>, String> {
    let desc = msg.descriptor();
    let Some(kind) = WellKnown::of(desc.full_name()) else {
        return to_json(schema, nested, msg).map(Some);
    };
    let sub = |name: &str| -> Result<Option<Value>, String> {
        match msg.get_field_by_name(name).as_deref() {
            Some(Pb::Message(m)) if msg.has_field_by_name(name) => {
                message_to_json(schema, nested, m)
            }
            Some(Pb::List(items)) if !items.is_empty() => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(value_to_json(schema, nested, item)?.unwrap_or(Value::Null));
                }
                Ok(Some(Value::Array(out)))
            }
            Some(Pb::Bool(b)) if msg.has_field_by_name(name) => Ok(Some(json!(b))),
            _ => Ok(None),
        }
    };
    match kind {
        // Go marshals the schema when there is one, else the other arm.
        WellKnown::SchemaOrArray => Ok(sub("schema")?.or(sub("jSONSchemas")?)),
        WellKnown::SchemaOrBool => Ok(sub("schema")?.or(sub("allows")?)),
        WellKnown::SchemaOrStringArray => Ok(sub("property")?.or(sub("schema")?)),
        _ => wellknown::to_json(kind, msg, nested),
    }
}

/// The message `desc` from its JSON object.
pub fn from_json(
    schema: &Schema,
    desc: &MessageDescriptor,
    value: &Value,
) -> Result<DynamicMessage, String> {
    if let Some(kind) = WellKnown::of(desc.full_name()) {
        return well_known_from_json(schema, kind, desc, value);
    }
    let obj = value
        .as_object()
        .ok_or_else(|| format!("{} must be a JSON object", desc.name()))?;
    let mut msg = DynamicMessage::new(desc.clone());
    for field in desc.fields() {
        if let Kind::Message(inner) = field.kind()
            && schema.presence(desc.full_name(), field.name()) == Presence::Inline
        {
            // The embedded struct takes the keys that are its fields from the same object.
            msg.set_field(&field, Pb::Message(from_json(schema, &inner, value)?));
        }
    }
    for (key, v) in obj {
        if v.is_null() {
            continue;
        }
        let Some(field) = desc.get_field_by_name(schema.proto_name(desc.full_name(), key)) else {
            continue;
        };
        let pb = field_from_json(schema, &field, v).map_err(|e| format!("{key}: {e}"))?;
        msg.set_field(&field, pb);
    }
    Ok(msg)
}

fn well_known_from_json(
    schema: &Schema,
    kind: WellKnown,
    desc: &MessageDescriptor,
    value: &Value,
) -> Result<DynamicMessage, String> {
    let field = |name: &str| {
        desc.get_field_by_name(name)
            .ok_or_else(|| format!("{} has no field {name}", desc.full_name()))
    };
    let mut msg = DynamicMessage::new(desc.clone());
    match (kind, value) {
        (WellKnown::SchemaOrArray, Value::Array(_)) => {
            let f = field("jSONSchemas")?;
            msg.set_field(&f, field_from_json(schema, &f, value)?);
        }
        (WellKnown::SchemaOrStringArray, Value::Array(_)) => {
            let f = field("property")?;
            msg.set_field(&f, field_from_json(schema, &f, value)?);
        }
        (WellKnown::SchemaOrBool, Value::Bool(b)) => {
            msg.set_field(&field("allows")?, Pb::Bool(*b));
        }
        (
            WellKnown::SchemaOrArray | WellKnown::SchemaOrStringArray | WellKnown::SchemaOrBool,
            _,
        ) => {
            if kind == WellKnown::SchemaOrBool {
                msg.set_field(&field("allows")?, Pb::Bool(true));
            }
            let f = field("schema")?;
            msg.set_field(&f, field_from_json(schema, &f, value)?);
        }
        _ => return wellknown::from_json(kind, desc, value),
    }
    Ok(msg)
}

fn field_from_json(schema: &Schema, field: &FieldDescriptor, v: &Value) -> Result<Pb, String> {
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else {
            return Err("map without an entry message".into());
        };
        let value_field = entry.map_entry_value_field();
        let obj = v.as_object().ok_or("must be a JSON object")?;
        let mut out = std::collections::HashMap::with_capacity(obj.len());
        for (k, item) in obj {
            if item.is_null() {
                continue;
            }
            out.insert(
                MapKey::String(k.clone()),
                scalar_or_message(schema, &value_field.kind(), item)
                    .map_err(|e| format!("{k}: {e}"))?,
            );
        }
        return Ok(Pb::Map(out));
    }
    if field.is_list() {
        let items = v.as_array().ok_or("must be a JSON array")?;
        let kind = field.kind();
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            out.push(scalar_or_message(schema, &kind, item).map_err(|e| format!("[{i}]: {e}"))?);
        }
        return Ok(Pb::List(out));
    }
    scalar_or_message(schema, &field.kind(), v)
}

fn scalar_or_message(schema: &Schema, kind: &Kind, v: &Value) -> Result<Pb, String> {
    let int = || -> Result<i64, String> {
        v.as_i64()
            .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
            .ok_or_else(|| format!("{v} is not an integer"))
    };
    Ok(match kind {
        Kind::Message(desc) => Pb::Message(from_json(schema, desc, v)?),
        Kind::String => Pb::String(
            v.as_str()
                .ok_or_else(|| format!("{v} is not a string"))?
                .to_string(),
        ),
        Kind::Bool => Pb::Bool(v.as_bool().ok_or_else(|| format!("{v} is not a boolean"))?),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
            Pb::I32(i32::try_from(int()?).map_err(|e| e.to_string())?)
        }
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Pb::I64(int()?),
        Kind::Uint32 | Kind::Fixed32 => Pb::U32(u32::try_from(int()?).map_err(|e| e.to_string())?),
        Kind::Uint64 | Kind::Fixed64 => Pb::U64(u64::try_from(int()?).map_err(|e| e.to_string())?),
        Kind::Double => Pb::F64(v.as_f64().ok_or_else(|| format!("{v} is not a number"))?),
        Kind::Float => Pb::F32(v.as_f64().ok_or_else(|| format!("{v} is not a number"))? as f32),
        Kind::Bytes => {
            let s = v
                .as_str()
                .ok_or_else(|| format!("{v} is not a base64 string"))?;
            Pb::Bytes(base64::decode(s).ok_or("invalid base64")?.into())
        }
        Kind::Enum(_) => Pb::EnumNumber(i32::try_from(int()?).map_err(|e| e.to_string())?),
    })
}
