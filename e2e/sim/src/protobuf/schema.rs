//! The compiled-in Kubernetes protobuf schema: the descriptors of the vendored upstream
//! `.proto` files (compiled by `build.rs`), which message a `apiVersion`/`kind` is, and what the
//! `.proto` files do not say but Kubernetes' JSON needs (`proto/go-fields.txt`, read from the Go
//! types' struct tags): which scalar fields are Go pointers, which are emitted even when zero,
//! which have a JSON name other than their proto name (`x-kubernetes-*`, `$ref`), and which
//! are embedded structs whose fields JSON inlines.

use std::collections::HashMap;
use std::sync::LazyLock;

use prost_reflect::{DescriptorPool, MessageDescriptor};

/// The encoded `FileDescriptorSet` built from `proto/`.
const DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/kubernetes.fds"));

/// `proto/go-fields.txt`.
const GO_FIELDS: &str = include_str!("../../proto/go-fields.txt");

/// The proto package of `meta.k8s.io/v1` (Status, DeleteOptions, WatchEvent, ListMeta).
pub const META_V1: &str = "apimachinery.pkg.apis.meta.v1";

/// How a zero-valued scalar that arrived on the wire appears in JSON, as the Go struct decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// A non-pointer field with `omitempty`: zero is the same as absent (the default).
    OmitEmpty,
    /// A pointer field: an explicit zero is a value (`replicas: 0`).
    Pointer,
    /// A non-pointer field without `omitempty`: Go emits it even when zero.
    Always,
    /// An embedded Go struct: a message field in proto whose fields JSON puts in the parent
    /// (`Probe.handler`, `Volume.volumeSource`).
    Inline,
}

/// One field's departures from the defaults.
#[derive(Debug, Clone)]
struct GoField {
    json_name: String,
    presence: Presence,
}

/// The Go facts of one message's fields.
#[derive(Debug, Default)]
struct GoMessage {
    /// By proto field name.
    by_proto: HashMap<String, GoField>,
    /// Proto field name by JSON name, for the fields whose names differ.
    proto_of_json: HashMap<String, String>,
}

/// The descriptors and the Go field facts.
#[derive(Debug)]
pub struct Schema {
    pool: DescriptorPool,
    go: HashMap<String, GoMessage>,
}

/// The schema is compiled into the binary and immutable, like a `const` table: decoded once.
static SCHEMA: LazyLock<Result<Schema, String>> = LazyLock::new(Schema::load);

/// The compiled-in schema, or why it could not be loaded.
pub fn schema() -> Result<&'static Schema, String> {
    SCHEMA.as_ref().map_err(Clone::clone)
}

impl Schema {
    fn load() -> Result<Self, String> {
        let pool = DescriptorPool::decode(DESCRIPTORS).map_err(|e| e.to_string())?;
        let mut go: HashMap<String, GoMessage> = HashMap::new();
        for line in GO_FIELDS.lines() {
            let mut cols = line.split_whitespace();
            let (Some(message), Some(field), Some(json_name), Some(presence)) =
                (cols.next(), cols.next(), cols.next(), cols.next())
            else {
                continue;
            };
            let presence = match presence {
                "ptr" => Presence::Pointer,
                "always" => Presence::Always,
                "inline" => Presence::Inline,
                _ => Presence::OmitEmpty,
            };
            let entry = go.entry(message.to_string()).or_default();
            if field != json_name && presence != Presence::Inline {
                entry
                    .proto_of_json
                    .insert(json_name.to_string(), field.to_string());
            }
            entry.by_proto.insert(
                field.to_string(),
                GoField {
                    json_name: json_name.to_string(),
                    presence,
                },
            );
        }
        Ok(Self { pool, go })
    }

    /// A message by its full proto name.
    pub fn message(&self, full_name: &str) -> Option<MessageDescriptor> {
        self.pool.get_message_by_name(full_name)
    }

    /// The message of `kind` in `api_version` (`apps/v1` `Deployment`, `v1` `Status`), if the
    /// sim has its `.proto`: built-in groups only (`k8s.io` groups and the unsuffixed legacy
    /// ones); custom resources and the metrics APIs have none, as on a real server.
    pub fn message_for(&self, api_version: &str, kind: &str) -> Option<MessageDescriptor> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let package = match group {
            "" => Some("api.core".to_string()),
            "apiextensions.k8s.io" => {
                Some("apiextensions_apiserver.pkg.apis.apiextensions".to_string())
            }
            g if !g.contains('.') || g.ends_with(".k8s.io") => {
                g.split('.').next().map(|label| format!("api.{label}"))
            }
            _ => None,
        }?;
        self.message(&format!("{package}.{version}.{kind}"))
            // Status, DeleteOptions and the other meta kinds are served in every group.
            .or_else(|| self.message(&format!("{META_V1}.{kind}")))
    }

    /// The JSON name of a proto field.
    pub fn json_name<'a>(&'a self, message: &str, proto_name: &'a str) -> &'a str {
        self.go
            .get(message)
            .and_then(|m| m.by_proto.get(proto_name))
            .map_or(proto_name, |f| f.json_name.as_str())
    }

    /// The proto field name of a JSON name.
    pub fn proto_name<'a>(&'a self, message: &str, json_name: &'a str) -> &'a str {
        self.go
            .get(message)
            .and_then(|m| m.proto_of_json.get(json_name))
            .map_or(json_name, String::as_str)
    }

    /// How a zero value of this field appears in JSON.
    pub fn presence(&self, message: &str, proto_name: &str) -> Presence {
        self.go
            .get(message)
            .and_then(|m| m.by_proto.get(proto_name))
            .map_or(Presence::OmitEmpty, |f| f.presence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_their_messages() {
        let s = schema().unwrap();
        let name =
            |av: &str, kind: &str| s.message_for(av, kind).map(|m| m.full_name().to_string());
        assert_eq!(name("v1", "Pod").as_deref(), Some("api.core.v1.Pod"));
        assert_eq!(
            name("apps/v1", "DeploymentList").as_deref(),
            Some("api.apps.v1.DeploymentList")
        );
        assert_eq!(
            name("rbac.authorization.k8s.io/v1", "ClusterRoleBinding").as_deref(),
            Some("api.rbac.v1.ClusterRoleBinding")
        );
        assert_eq!(
            name("apiextensions.k8s.io/v1", "CustomResourceDefinition").as_deref(),
            Some("apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition")
        );
        // The meta kinds answer in every group.
        assert_eq!(
            name("meta.k8s.io/v1", "DeleteOptions").as_deref(),
            Some("apimachinery.pkg.apis.meta.v1.DeleteOptions")
        );
        assert_eq!(
            name("v1", "Status").as_deref(),
            Some("apimachinery.pkg.apis.meta.v1.Status")
        );
        // A custom group that shares a label with a built-in one is not taken for it.
        assert_eq!(name("apps.example.com/v1", "Deployment"), None);
        assert_eq!(
            name(
                "autoscaling.plimsoll.dev/v1alpha1",
                "HorizontalPodAutoscalerPlus"
            ),
            None
        );
    }

    #[test]
    fn go_field_facts_are_read() {
        let s = schema().unwrap();
        assert_eq!(
            s.presence("api.apps.v1.DeploymentSpec", "replicas"),
            Presence::Pointer
        );
        assert_eq!(
            s.presence("api.apps.v1.DeploymentSpec", "minReadySeconds"),
            Presence::OmitEmpty
        );
        assert_eq!(
            s.presence("api.core.v1.ContainerStatus", "restartCount"),
            Presence::Always
        );
        assert_eq!(s.presence("api.core.v1.Probe", "handler"), Presence::Inline);
        let props = "apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps";
        assert_eq!(s.json_name(props, "ref"), "$ref");
        assert_eq!(
            s.proto_name(props, "x-kubernetes-int-or-string"),
            "xKubernetesIntOrString"
        );
        assert_eq!(s.json_name("api.core.v1.Pod", "spec"), "spec");
    }
}
