//! The upstream `autoscaling.k8s.io/v1` `VerticalPodAutoscaler` and `VerticalPodAutoscalerCheckpoint`.
//!
//! Field for field what upstream's CRDs (`vertical-pod-autoscaler/deploy/vpa-v1-crd-gen.yaml`)
//! accept, so that Plimsoll's VPA services read and write the very objects the upstream
//! recommender, updater and admission controller do, and a cluster can switch either way.
//!
//! Invariants that keep that promise:
//! * Every field upstream's schema has is present here, optional where upstream's is optional.
//! * Enumerations are [open](UpdateMode): a value this version does not know survives a
//!   read-modify-write instead of failing deserialization; `validate()` reports it.
//! * Resource amounts stay k8s-openapi `Quantity` strings so they re-serialize byte for byte.
//! * Checkpoint timestamps are always written, as `null` when unset, exactly as the upstream
//!   recommender writes them (Go's `metav1.Time` ignores `omitempty`).
//! * The checkpoint CRD has no status subresource (upstream writes the whole object), which
//!   is why [`VerticalPodAutoscalerCheckpoint`] is written out by hand rather than derived.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::autoscaling::v1::CrossVersionObjectReference;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::api::limits::{
    self, MAX_CONTAINER_POLICIES, MAX_EVICTION_REQUIREMENTS, MAX_LABEL_LENGTH, MAX_NAME_LENGTH,
    MAX_QUALIFIED_NAME_LENGTH, MAX_RECOMMENDERS, MAX_RESOURCES, MAX_SPEC_BYTES,
};
use crate::api::validation::FieldErrors;
use crate::quantity;

mod rules;

/// API group of the upstream VPA kinds.
pub const VPA_GROUP: &str = "autoscaling.k8s.io";
/// API version of the upstream VPA kinds Plimsoll serves.
pub const VPA_VERSION: &str = "v1";
/// `containerName` of the policy that applies to every container without its own policy.
pub const DEFAULT_CONTAINER_POLICY: &str = "*";
/// The resources a VPA controls when `controlledResources` is absent.
pub const DEFAULT_CONTROLLED_RESOURCES: [&str; 2] = ["cpu", "memory"];
/// The name under which Plimsoll's recommender answers in `spec.recommenders[].name`.
pub const PLIMSOLL_RECOMMENDER: &str = "plimsoll";
/// The checkpoint format version Plimsoll reads and writes (upstream's current one).
pub const CHECKPOINT_VERSION: &str = "v3";

/// A resource name → amount map (`cpu: 100m`, `memory: 1Gi`), as `core/v1` `ResourceList`.
pub type ResourceList = BTreeMap<String, Quantity>;

/// Declares a string enumeration that keeps values it does not know.
///
/// Upstream's CRD lists the allowed values, so the API server rejects others; keeping unknown
/// ones anyway means a newer upstream value never makes a whole object unreadable here.
macro_rules! open_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
            /// A value this version of Plimsoll does not know (kept as written).
            Unknown(String),
        }

        impl $name {
            /// Every value upstream's CRD allows, in its order.
            pub const KNOWN: &'static [&'static str] = &[$($text),+];

            /// The value as written in a manifest.
            pub fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => $text,)+
                    Self::Unknown(s) => s,
                }
            }

            /// True for a value upstream's CRD allows.
            pub fn is_known(&self) -> bool {
                !matches!(self, Self::Unknown(_))
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                match s {
                    $($text => Self::$variant,)+
                    other => Self::Unknown(other.to_owned()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = Cow::<'de, str>::deserialize(d)?;
                Ok(Self::from(s.as_ref()))
            }
        }

        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!({ "type": "string", "enum": Self::KNOWN })
            }
        }
    };
}

open_enum! {
    /// When the autoscaler applies its recommendation to pods (`spec.updatePolicy.updateMode`).
    /// Default `Recreate` (upstream's `Auto` is a deprecated alias of it).
    UpdateMode {
        /// Never change pods; only write the recommendation.
        Off = "Off",
        /// Set resources when a pod is created, never afterwards.
        Initial = "Initial",
        /// Set resources at creation and evict pods whose requests drift.
        Recreate = "Recreate",
        /// Resize pods in place where possible, else evict.
        InPlaceOrRecreate = "InPlaceOrRecreate",
        /// Resize pods in place only.
        InPlace = "InPlace",
        /// Deprecated upstream alias of `Recreate`.
        Auto = "Auto",
    }
}

open_enum! {
    /// Whether a container is autoscaled (`containerPolicies[].mode`). Default `Auto`.
    ContainerScalingMode {
        /// The container gets recommendations.
        Auto = "Auto",
        /// The container is left alone: no recommendation is produced for it.
        Off = "Off",
    }
}

open_enum! {
    /// Which values of a container the VPA sets (`containerPolicies[].controlledValues`).
    /// Default `RequestsAndLimits`.
    ControlledValues {
        /// Requests are set; limits scale in proportion.
        RequestsAndLimits = "RequestsAndLimits",
        /// Only requests are set; limits are left as they are.
        RequestsOnly = "RequestsOnly",
    }
}

open_enum! {
    /// What change of the target relative to the current requests allows an eviction.
    EvictionChangeRequirement {
        /// The target is above the pod's requests (a scale-up).
        TargetHigherThanRequests = "TargetHigherThanRequests",
        /// The target is below the pod's requests (a scale-down).
        TargetLowerThanRequests = "TargetLowerThanRequests",
    }
}

open_enum! {
    /// How a startup boost raises a resource.
    StartupBoostType {
        /// Multiply the request by `factor`.
        Factor = "Factor",
        /// Add `quantity` to the request.
        Quantity = "Quantity",
    }
}

/// The behaviour of a `VerticalPodAutoscaler`.
#[allow(clippy::duplicated_attributes)] // printcolumn(...) repeats keys by design
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "autoscaling.k8s.io",
    version = "v1",
    kind = "VerticalPodAutoscaler",
    plural = "verticalpodautoscalers",
    singular = "verticalpodautoscaler",
    namespaced,
    status = "VerticalPodAutoscalerStatus",
    shortname = "vpa",
    derive = "PartialEq",
    annotation(
        "api-approved.kubernetes.io",
        "https://github.com/kubernetes/kubernetes/pull/63797"
    ),
    printcolumn(
        name = "Mode",
        type_ = "string",
        json_path = ".spec.updatePolicy.updateMode"
    ),
    printcolumn(
        name = "CPU",
        type_ = "string",
        json_path = ".status.recommendation.containerRecommendations[0].target.cpu"
    ),
    printcolumn(
        name = "Mem",
        type_ = "string",
        json_path = ".status.recommendation.containerRecommendations[0].target.memory"
    ),
    printcolumn(
        name = "Provided",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='RecommendationProvided')].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "MinReplicas",
        type_ = "integer",
        json_path = ".spec.updatePolicy.minReplicas",
        priority = "1"
    ),
    printcolumn(
        name = "OOMSeconds",
        type_ = "integer",
        json_path = ".spec.updatePolicy.evictAfterOOMSeconds",
        priority = "1"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VerticalPodAutoscalerSpec {
    /// The controller whose pods this VPA sizes (`Deployment`, `StatefulSet`, … or any kind with a
    /// scale subresource).
    #[schemars(transform = limits::object_reference)]
    pub target_ref: CrossVersionObjectReference,
    /// How recommendations are applied; absent means all defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_policy: Option<PodUpdatePolicy>,
    /// Per-container constraints on the recommendation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_policy: Option<PodResourcePolicy>,
    /// The recommender responsible for this object: empty (the default recommender) or one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_RECOMMENDERS))]
    pub recommenders: Option<Vec<RecommenderSelector>>,
    /// Pod-level startup boost policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_boost: Option<StartupBoost>,
}

/// Names the recommender responsible for a VPA.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct RecommenderSelector {
    /// Recommender name; Plimsoll's is `plimsoll` (1 to 253 characters).
    #[schemars(length(min = 1, max = MAX_NAME_LENGTH))]
    pub name: String,
}

/// How changes are applied to pods (`spec.updatePolicy`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodUpdatePolicy {
    /// When changes are applied; default `Recreate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_mode: Option<UpdateMode>,
    /// Replicas that must stay alive for the updater to evict (overrides `--min-replicas`; >= 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub min_replicas: Option<i32>,
    /// Conditions that must all hold for a pod to be evicted (at most 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_EVICTION_REQUIREMENTS))]
    pub eviction_requirements: Option<Vec<EvictionRequirement>>,
    /// Seconds after an OOM kill before a pod that was OOM-killed soon after start is evicted
    /// (>= 1).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "evictAfterOOMSeconds"
    )]
    #[schemars(range(min = 1))]
    pub evict_after_oom_seconds: Option<i32>,
}

/// One condition for eviction: at least one of `resources` changes as required.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvictionRequirement {
    /// Resource names the requirement looks at (`cpu`, `memory`; at most 16).
    #[schemars(length(max = MAX_RESOURCES), inner(length(max = MAX_QUALIFIED_NAME_LENGTH)))]
    pub resources: Vec<String>,
    /// The direction of change that allows an eviction.
    pub change_requirement: EvictionChangeRequirement,
}

/// Per-container policies (`spec.resourcePolicy`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodResourcePolicy {
    /// At most one policy per container name, plus optionally the `*` default (at most 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = MAX_CONTAINER_POLICIES),
        extend("x-kubernetes-validations" = rules::unique_container_names())
    )]
    pub container_policies: Option<Vec<ContainerResourcePolicy>>,
}

/// How the recommendation for one container (or `*`) is computed and bounded.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = rules::container_policy()))]
pub struct ContainerResourcePolicy {
    /// Container name, or `*` for containers without a policy of their own (1 to 63 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_LABEL_LENGTH))]
    pub container_name: Option<String>,
    /// `Auto` (default) or `Off`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ContainerScalingMode>,
    /// Lowest recommendation per resource; default none. Each amount is a quantity >= 0 and
    /// <= the same resource's `maxAllowed`; at most 16 resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "rules::resource_bounds")]
    pub min_allowed: Option<ResourceList>,
    /// Highest recommendation per resource; default none. Each amount is a quantity >= 0 (0 is
    /// no bound, as upstream); at most 16 resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "rules::resource_bounds")]
    pub max_allowed: Option<ResourceList>,
    /// Resources recommended for; default `[cpu, memory]` (at most 16 entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_RESOURCES), inner(length(max = MAX_QUALIFIED_NAME_LENGTH)))]
    pub controlled_resources: Option<Vec<String>>,
    /// `RequestsAndLimits` (default) or `RequestsOnly`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controlled_values: Option<ControlledValues>,
    /// Length of one memory peak interval in seconds (overrides the recommender's flag; >= 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub memory_aggregation_interval_seconds: Option<i32>,
    /// Number of memory peak intervals in the window (overrides the recommender's flag; >= 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub memory_aggregation_interval_count: Option<i64>,
    /// Memory multiplier applied after an OOM kill (upstream default 1.2; >= 1).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "oomBumpUpRatio"
    )]
    #[schemars(extend("x-kubernetes-validations" = rules::at_least_one()))]
    pub oom_bump_up_ratio: Option<Quantity>,
    /// Minimum memory increase after an OOM kill (upstream default 100Mi; >= 0).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "oomMinBumpUp"
    )]
    #[schemars(extend("x-kubernetes-validations" = rules::non_negative()))]
    pub oom_min_bump_up: Option<Quantity>,
    /// CPU percentile for the target in (0, 1] (overrides `--target-cpu-percentile`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "targetCPUPercentile"
    )]
    #[schemars(extend("x-kubernetes-validations" = rules::percentile()))]
    pub target_cpu_percentile: Option<Quantity>,
    /// Memory percentile for the target in (0, 1] (overrides `--target-memory-percentile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = rules::percentile()))]
    pub target_memory_percentile: Option<Quantity>,
    /// Container-level startup boost; overrides the pod-level one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_boost: Option<StartupBoost>,
}

/// Startup boost policy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct StartupBoost {
    /// CPU boost; absent means none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<GenericStartupBoost>,
}

/// The boost for one resource.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = rules::startup_boost()))]
pub struct GenericStartupBoost {
    /// `Factor` or `Quantity`.
    #[serde(rename = "type")]
    pub type_: StartupBoostType,
    /// Multiplier when `type` is `Factor` (>= 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub factor: Option<i32>,
    /// Absolute amount when `type` is `Quantity` (> 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = rules::positive()))]
    pub quantity: Option<Quantity>,
    /// Seconds to keep the boost after the pod becomes Ready; default 0 (>= 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub duration_seconds: Option<i32>,
}

/// The observed state of a `VerticalPodAutoscaler`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerticalPodAutoscalerStatus {
    /// The latest recommendation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommendation: Option<RecommendedPodResources>,
    /// `RecommendationProvided`, `LowConfidence`, `NoPodsMatched`, `FetchingHistory`,
    /// `ConfigDeprecated`, `ConfigUnsupported`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<VerticalPodAutoscalerCondition>>,
    /// The most recent `metadata.generation` observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The recommendation for every autoscaled container of the pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecommendedPodResources {
    /// One entry per container (none for containers with `mode: Off`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_recommendations: Option<Vec<RecommendedContainerResources>>,
}

/// The recommendation for one container.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecommendedContainerResources {
    /// Container name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_name: Option<String>,
    /// Recommended requests, within the container policy.
    pub target: ResourceList,
    /// Below this the container is likely to perform badly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower_bound: Option<ResourceList>,
    /// Above this resources are likely wasted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper_bound: Option<ResourceList>,
    /// The target before the container policy was applied (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncapped_target: Option<ResourceList>,
}

/// The state of a `VerticalPodAutoscaler` at one point.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerticalPodAutoscalerCondition {
    /// Condition type, e.g. `RecommendationProvided`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// When `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Machine-readable reason of the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The `metadata.generation` this condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl VerticalPodAutoscaler {
    /// True when this VPA is Plimsoll's to answer: it names `recommender`, or names none and
    /// `answer_default` is set (`--default`).
    pub fn is_for_recommender(&self, recommender: &str, answer_default: bool) -> bool {
        match self.spec.recommenders.as_deref() {
            None | Some([]) => answer_default,
            Some(list) => list.iter().any(|r| r.name == recommender),
        }
    }
}

impl VerticalPodAutoscalerSpec {
    /// The update mode in effect (`Recreate` when unset).
    pub fn update_mode(&self) -> UpdateMode {
        self.update_policy
            .as_ref()
            .and_then(|p| p.update_mode.clone())
            .unwrap_or(UpdateMode::Recreate)
    }

    /// The policy that applies to `container`: its own, else the `*` one, else none
    /// (upstream `GetContainerResourcePolicy`).
    pub fn container_policy(&self, container: &str) -> Option<&ContainerResourcePolicy> {
        let policies = self
            .resource_policy
            .as_ref()
            .and_then(|p| p.container_policies.as_deref())
            .unwrap_or_default();
        policies
            .iter()
            .find(|p| p.container_name.as_deref() == Some(container))
            .or_else(|| {
                policies
                    .iter()
                    .find(|p| p.container_name.as_deref() == Some(DEFAULT_CONTAINER_POLICY))
            })
    }

    /// Every problem with this spec, each with its field path.
    ///
    /// Checks what upstream's CRD schema and admission controller check (enumerations,
    /// `minAllowed <= maxAllowed`, parseable quantities, known `controlledResources`, one policy
    /// per container name, at most one recommender, positive `minReplicas`, percentiles in
    /// (0, 1], the startup boost union), and what Plimsoll's CRD adds: every amount of
    /// `minAllowed`/`maxAllowed` and every other quantity >= 0, startup boosts that raise
    /// (`factor >= 1`, `quantity > 0`), and the size limits of [`crate::api::limits`]. A policy
    /// that passes cannot by itself make the webhook or the updater write a request the API server
    /// refuses.
    pub fn validate(&self) -> Result<(), FieldErrors> {
        let mut errs = FieldErrors::default();
        if self.target_ref.kind.is_empty() {
            errs.push("spec.targetRef.kind", "must not be empty");
        }
        if self.target_ref.name.is_empty() {
            errs.push("spec.targetRef.name", "must not be empty");
        }
        // Upstream's VPA CRD has no such rule, so it is checked here only.
        errs.path_segment("spec.targetRef.kind", &self.target_ref.kind);
        errs.path_segment("spec.targetRef.name", &self.target_ref.name);
        errs.max_length(
            "spec.targetRef.apiVersion",
            self.target_ref.api_version.as_deref().unwrap_or_default(),
            MAX_QUALIFIED_NAME_LENGTH,
        );
        errs.max_length(
            "spec.targetRef.kind",
            &self.target_ref.kind,
            MAX_LABEL_LENGTH,
        );
        errs.max_length(
            "spec.targetRef.name",
            &self.target_ref.name,
            MAX_NAME_LENGTH,
        );
        if let Some(policy) = &self.update_policy {
            validate_update_policy(policy, &mut errs);
        }
        if let Some(recs) = &self.recommenders {
            if recs.len() > MAX_RECOMMENDERS {
                errs.push(
                    "spec.recommenders",
                    format!("must name at most one recommender, got {}", recs.len()),
                );
            }
            for (i, r) in recs.iter().enumerate() {
                let path = format!("spec.recommenders[{i}].name");
                if r.name.is_empty() {
                    errs.push(path, "must not be empty");
                } else {
                    errs.max_length(path, &r.name, MAX_NAME_LENGTH);
                }
            }
        }
        if let Some(policies) = self
            .resource_policy
            .as_ref()
            .and_then(|p| p.container_policies.as_ref())
        {
            errs.max_items(
                "spec.resourcePolicy.containerPolicies",
                policies.len(),
                MAX_CONTAINER_POLICIES,
            );
            let mut seen = std::collections::BTreeSet::new();
            for (i, p) in policies.iter().enumerate() {
                let path = format!("spec.resourcePolicy.containerPolicies[{i}]");
                validate_container_policy(p, &path, &mut errs);
                if let Some(name) = &p.container_name
                    && !seen.insert(name.as_str())
                {
                    errs.push(
                        format!("{path}.containerName"),
                        format!("duplicate policy for container {name:?}"),
                    );
                }
            }
        }
        if let Some(boost) = &self.startup_boost {
            validate_startup_boost(boost, "spec.startupBoost", &mut errs);
        }
        // Each field is bounded above; their sum is not (the CRD cannot bound a resource list's
        // keys), and every VPA service caches every VPA.
        let bytes = crate::cut_down::json_len(self);
        if bytes > MAX_SPEC_BYTES {
            errs.push(
                "spec",
                format!("{bytes} bytes of JSON; must be at most {MAX_SPEC_BYTES}"),
            );
        }
        errs.into_result()
    }
}

fn validate_update_policy(policy: &PodUpdatePolicy, errs: &mut FieldErrors) {
    if let Some(mode) = &policy.update_mode
        && !mode.is_known()
    {
        errs.push(
            "spec.updatePolicy.updateMode",
            unknown_value(mode.as_str(), UpdateMode::KNOWN),
        );
    }
    if let Some(n) = policy.min_replicas
        && n <= 0
    {
        errs.push(
            "spec.updatePolicy.minReplicas",
            format!("must be > 0, got {n}"),
        );
    }
    if let Some(n) = policy.evict_after_oom_seconds
        && n < 1
    {
        errs.push(
            "spec.updatePolicy.evictAfterOOMSeconds",
            format!("must be >= 1, got {n}"),
        );
    }
    if let Some(reqs) = &policy.eviction_requirements {
        errs.max_items(
            "spec.updatePolicy.evictionRequirements",
            reqs.len(),
            MAX_EVICTION_REQUIREMENTS,
        );
    }
    for (i, req) in policy.eviction_requirements.iter().flatten().enumerate() {
        let path = format!("spec.updatePolicy.evictionRequirements[{i}]");
        if req.resources.is_empty() {
            errs.push(
                format!("{path}.resources"),
                "must name at least one resource",
            );
        }
        errs.max_items(
            format!("{path}.resources"),
            req.resources.len(),
            MAX_RESOURCES,
        );
        for (j, r) in req.resources.iter().enumerate() {
            if !DEFAULT_CONTROLLED_RESOURCES.contains(&r.as_str()) {
                errs.push(
                    format!("{path}.resources[{j}]"),
                    unknown_value(r, &DEFAULT_CONTROLLED_RESOURCES),
                );
            }
        }
        if !req.change_requirement.is_known() {
            errs.push(
                format!("{path}.changeRequirement"),
                unknown_value(
                    req.change_requirement.as_str(),
                    EvictionChangeRequirement::KNOWN,
                ),
            );
        }
    }
}

fn validate_container_policy(p: &ContainerResourcePolicy, path: &str, errs: &mut FieldErrors) {
    match p.container_name.as_deref() {
        None | Some("") => errs.push(
            format!("{path}.containerName"),
            "must name a container or be \"*\"",
        ),
        Some(name) => errs.max_length(format!("{path}.containerName"), name, MAX_LABEL_LENGTH),
    }
    if let Some(mode) = &p.mode
        && !mode.is_known()
    {
        errs.push(
            format!("{path}.mode"),
            unknown_value(mode.as_str(), ContainerScalingMode::KNOWN),
        );
    }
    if let Some(cv) = &p.controlled_values
        && !cv.is_known()
    {
        errs.push(
            format!("{path}.controlledValues"),
            unknown_value(cv.as_str(), ControlledValues::KNOWN),
        );
    }
    if let Some(list) = &p.controlled_resources {
        errs.max_items(
            format!("{path}.controlledResources"),
            list.len(),
            MAX_RESOURCES,
        );
    }
    for (j, r) in p.controlled_resources.iter().flatten().enumerate() {
        if !DEFAULT_CONTROLLED_RESOURCES.contains(&r.as_str()) {
            errs.push(
                format!("{path}.controlledResources[{j}]"),
                unknown_value(r, &DEFAULT_CONTROLLED_RESOURCES),
            );
        }
    }
    let min = parse_amounts(p.min_allowed.as_ref(), &format!("{path}.minAllowed"), errs);
    let max = parse_amounts(p.max_allowed.as_ref(), &format!("{path}.maxAllowed"), errs);
    for (name, lo) in &min {
        if let Some(hi) = max.get(name)
            && lo > hi
        {
            errs.push(
                format!("{path}.minAllowed.{name}"),
                format!("must be <= maxAllowed.{name} ({hi}), got {lo}"),
            );
        }
    }
    validate_policy_tuning(p, path, errs);
    if let Some(boost) = &p.startup_boost {
        validate_startup_boost(boost, &format!("{path}.startupBoost"), errs);
    }
}

/// The recommender settings of a container policy: OOM bumps, percentiles, aggregation.
fn validate_policy_tuning(p: &ContainerResourcePolicy, path: &str, errs: &mut FieldErrors) {
    if let Some(r) = &p.oom_bump_up_ratio {
        match quantity::Quantity::try_from(r) {
            Ok(q) if q.milli() < 1000 => errs.push(
                format!("{path}.oomBumpUpRatio"),
                format!("must be >= 1, got {}", r.0),
            ),
            Ok(_) => {}
            Err(e) => errs.push(format!("{path}.oomBumpUpRatio"), e.to_string()),
        }
    }
    if let Some(r) = &p.oom_min_bump_up {
        match quantity::Quantity::try_from(r) {
            Ok(q) if q.milli() < 0 => errs.push(
                format!("{path}.oomMinBumpUp"),
                format!("must be >= 0, got {}", r.0),
            ),
            Ok(_) => {}
            Err(e) => errs.push(format!("{path}.oomMinBumpUp"), e.to_string()),
        }
    }
    for (field, value) in [
        ("targetCPUPercentile", &p.target_cpu_percentile),
        ("targetMemoryPercentile", &p.target_memory_percentile),
    ] {
        if let Some(v) = value {
            match quantity::Quantity::try_from(v) {
                Ok(q) if q.milli() <= 0 || q.milli() > 1000 => errs.push(
                    format!("{path}.{field}"),
                    format!("must be in (0, 1], got {}", v.0),
                ),
                Ok(_) => {}
                Err(e) => errs.push(format!("{path}.{field}"), e.to_string()),
            }
        }
    }
    if let Some(n) = p.memory_aggregation_interval_seconds
        && n < 1
    {
        errs.push(
            format!("{path}.memoryAggregationIntervalSeconds"),
            format!("must be >= 1, got {n}"),
        );
    }
    if let Some(n) = p.memory_aggregation_interval_count
        && n < 1
    {
        errs.push(
            format!("{path}.memoryAggregationIntervalCount"),
            format!("must be >= 1, got {n}"),
        );
    }
}

fn validate_startup_boost(boost: &StartupBoost, path: &str, errs: &mut FieldErrors) {
    let Some(cpu) = &boost.cpu else { return };
    let path = format!("{path}.cpu");
    if let Some(f) = cpu.factor
        && f < 1
    {
        errs.push(format!("{path}.factor"), format!("must be >= 1, got {f}"));
    }
    if let Some(q) = &cpu.quantity {
        match quantity::Quantity::try_from(q) {
            Ok(v) if v.milli() <= 0 => {
                errs.push(
                    format!("{path}.quantity"),
                    format!("must be > 0, got {}", q.0),
                );
            }
            Ok(_) => {}
            Err(e) => errs.push(format!("{path}.quantity"), e.to_string()),
        }
    }
    if let Some(d) = cpu.duration_seconds
        && d < 0
    {
        errs.push(
            format!("{path}.durationSeconds"),
            format!("must be >= 0, got {d}"),
        );
    }
    match cpu.type_ {
        StartupBoostType::Factor => {
            if cpu.factor.is_none() {
                errs.push(format!("{path}.factor"), "is required when type is Factor");
            }
            if cpu.quantity.is_some() {
                errs.push(
                    format!("{path}.quantity"),
                    "is forbidden when type is Factor",
                );
            }
        }
        StartupBoostType::Quantity => {
            if cpu.quantity.is_none() {
                errs.push(
                    format!("{path}.quantity"),
                    "is required when type is Quantity",
                );
            }
            if cpu.factor.is_some() {
                errs.push(
                    format!("{path}.factor"),
                    "is forbidden when type is Quantity",
                );
            }
        }
        StartupBoostType::Unknown(ref s) => errs.push(
            format!("{path}.type"),
            unknown_value(s, StartupBoostType::KNOWN),
        ),
    }
}

/// Parses every amount of `minAllowed` or `maxAllowed`, recording the ones that do not parse or
/// are negative (a negative bound would become a negative request), and a list of more than
/// [`MAX_RESOURCES`] entries.
fn parse_amounts(
    list: Option<&ResourceList>,
    path: &str,
    errs: &mut FieldErrors,
) -> BTreeMap<String, quantity::Quantity> {
    if let Some(list) = list {
        errs.max_items(path, list.len(), MAX_RESOURCES);
    }
    let mut out = BTreeMap::new();
    for (name, q) in list.into_iter().flatten() {
        match quantity::Quantity::try_from(q) {
            Ok(v) if v.milli() < 0 => {
                errs.push(
                    format!("{path}.{name}"),
                    format!("must be >= 0, got {}", q.0),
                );
            }
            Ok(v) => {
                out.insert(name.clone(), v);
            }
            Err(e) => errs.push(format!("{path}.{name}"), e.to_string()),
        }
    }
    out
}

fn unknown_value(got: &str, known: &[&str]) -> String {
    format!(
        "unsupported value {got:?}, must be one of {}",
        known.join(", ")
    )
}

// ---------------------------------------------------------------------------------------------
// VerticalPodAutoscalerCheckpoint
// ---------------------------------------------------------------------------------------------

/// The persisted histograms of one container of one VPA, so a restarted recommender resumes
/// where it stopped. Written by the recommender every loop; read once at start.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VerticalPodAutoscalerCheckpoint {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// Which VPA and container this checkpoint belongs to.
    pub spec: VerticalPodAutoscalerCheckpointSpec,
    /// The histograms; upstream always writes it.
    pub status: Option<VerticalPodAutoscalerCheckpointStatus>,
}

/// Which VPA and container a checkpoint belongs to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerticalPodAutoscalerCheckpointSpec {
    /// Name of the VPA (same namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vpa_object_name: Option<String>,
    /// Name of the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_name: Option<String>,
}

/// The saved state of one container's aggregate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerticalPodAutoscalerCheckpointStatus {
    /// When the checkpoint was written (`null` when unset).
    #[serde(default)]
    #[schemars(schema_with = "nullable_time")]
    pub last_update_time: Option<Time>,
    /// Format version of the data; `v3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// CPU usage histogram (millicore-free: cores as floats inside the histogram).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_histogram: Option<HistogramCheckpoint>,
    /// Memory peak histogram (bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_histogram: Option<HistogramCheckpoint>,
    /// Start of the first sample in the histograms (`null` when unset).
    #[serde(default)]
    #[schemars(schema_with = "nullable_time")]
    pub first_sample_start: Option<Time>,
    /// Start of the last sample in the histograms (`null` when unset).
    #[serde(default)]
    #[schemars(schema_with = "nullable_time")]
    pub last_sample_start: Option<Time>,
    /// Number of samples added to the histograms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_samples_count: Option<i64>,
}

/// A decaying histogram in checkpoint form.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistogramCheckpoint {
    /// Reference time of the decay (`null` when unset).
    #[serde(default)]
    #[schemars(schema_with = "nullable_time")]
    pub reference_timestamp: Option<Time>,
    /// Bucket index (as a decimal string) → weight, scaled so the largest is 10000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub bucket_weights: Option<BTreeMap<String, u32>>,
    /// The histogram's total weight; the denominator for `bucketWeights`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_weight: Option<f64>,
}

fn nullable_time(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "date-time", "nullable": true })
}

fn preserve_unknown_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}

impl k8s_openapi::Resource for VerticalPodAutoscalerCheckpoint {
    const API_VERSION: &'static str = "autoscaling.k8s.io/v1";
    const GROUP: &'static str = VPA_GROUP;
    const KIND: &'static str = "VerticalPodAutoscalerCheckpoint";
    const VERSION: &'static str = VPA_VERSION;
    const URL_PATH_SEGMENT: &'static str = "verticalpodautoscalercheckpoints";
    type Scope = NamespaceResourceScope;
}

impl k8s_openapi::Metadata for VerticalPodAutoscalerCheckpoint {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl kube::core::object::HasSpec for VerticalPodAutoscalerCheckpoint {
    type Spec = VerticalPodAutoscalerCheckpointSpec;

    fn spec(&self) -> &Self::Spec {
        &self.spec
    }

    fn spec_mut(&mut self) -> &mut Self::Spec {
        &mut self.spec
    }
}

impl kube::core::object::HasStatus for VerticalPodAutoscalerCheckpoint {
    type Status = VerticalPodAutoscalerCheckpointStatus;

    fn status(&self) -> Option<&Self::Status> {
        self.status.as_ref()
    }

    fn status_mut(&mut self) -> &mut Option<Self::Status> {
        &mut self.status
    }
}

/// The wire form: `apiVersion` and `kind` are written from the type, and accepted as anything
/// on input (a list's items may omit them).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CheckpointWire<M, S, T> {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    #[serde(default)]
    metadata: M,
    #[serde(default)]
    spec: S,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<T>,
}

impl Serialize for VerticalPodAutoscalerCheckpoint {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        CheckpointWire {
            api_version: Some(<Self as k8s_openapi::Resource>::API_VERSION.to_owned()),
            kind: Some(<Self as k8s_openapi::Resource>::KIND.to_owned()),
            metadata: &self.metadata,
            spec: &self.spec,
            status: self.status.as_ref(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for VerticalPodAutoscalerCheckpoint {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let wire = CheckpointWire::<
            ObjectMeta,
            VerticalPodAutoscalerCheckpointSpec,
            VerticalPodAutoscalerCheckpointStatus,
        >::deserialize(d)?;
        Ok(Self {
            metadata: wire.metadata,
            spec: wire.spec,
            status: wire.status,
        })
    }
}

impl JsonSchema for VerticalPodAutoscalerCheckpoint {
    fn schema_name() -> Cow<'static, str> {
        "VerticalPodAutoscalerCheckpoint".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let spec = generator.subschema_for::<VerticalPodAutoscalerCheckpointSpec>();
        let status = generator.subschema_for::<Option<VerticalPodAutoscalerCheckpointStatus>>();
        json_schema!({
            "type": "object",
            "description": "The checkpoint of a VPA recommender's state for one container, used \
                            to recover after the recommender restarts.",
            "properties": {
                "apiVersion": { "type": "string" },
                "kind": { "type": "string" },
                "metadata": { "type": "object" },
                "spec": spec,
                "status": status,
            },
        })
    }
}

impl VerticalPodAutoscalerCheckpoint {
    /// A checkpoint named `name` with `spec` and no status.
    pub fn new(name: &str, spec: VerticalPodAutoscalerCheckpointSpec) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }

    /// Upstream's object name for the checkpoint of `container` of VPA `vpa`: `<vpa>-<container>`.
    /// For a VPA whose name is near the 253 characters an object name may have, that passes
    /// the limit, and upstream's every write of it is refused: the VPA never keeps its history
    /// across a restart, and each attempt is a request and a warning. Such a name is cut to fit
    /// and told apart from its neighbours by a hash of the whole:
    /// `<vpa, cut>-<container>-<16 hex digits>` (restoring reads the checkpoint's spec, not its
    /// name).
    pub fn object_name(vpa: &str, container: &str) -> String {
        const MAX_NAME: usize = 253;
        let name = format!("{vpa}-{container}");
        if name.len() <= MAX_NAME {
            return name;
        }
        let suffix = format!("-{container}-{:016x}", crate::stable_hash::Fnv1a::of(&name));
        // A cut that ends a DNS label with `-` or `.` would not be a valid name.
        let cut = vpa
            .get(..MAX_NAME.saturating_sub(suffix.len()))
            .unwrap_or_default()
            .trim_end_matches(['-', '.']);
        format!("{cut}{suffix}")
    }
}

impl kube::CustomResourceExt for VerticalPodAutoscalerCheckpoint {
    fn crd() -> apiext::CustomResourceDefinition {
        // The same generator settings kube-derive uses, so the schema is structural.
        let generator = schemars::generate::SchemaSettings::openapi3()
            .with(|s| {
                s.inline_subschemas = true;
                s.meta_schema = None;
            })
            .with_transform(schemars::transform::AddNullable::default())
            .with_transform(kube::core::schema::StructuralSchemaRewriter)
            .with_transform(kube::core::schema::OptionalEnum)
            .with_transform(kube::core::schema::OptionalIntOrString)
            .into_generator();
        let schema = serde_json::to_value(generator.into_root_schema_for::<Self>())
            .and_then(serde_json::from_value)
            .ok();
        apiext::CustomResourceDefinition {
            metadata: ObjectMeta {
                name: Some(Self::crd_name().to_owned()),
                annotations: Some(BTreeMap::from([(
                    "api-approved.kubernetes.io".to_owned(),
                    "https://github.com/kubernetes/kubernetes/pull/63797".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            spec: apiext::CustomResourceDefinitionSpec {
                group: VPA_GROUP.to_owned(),
                names: apiext::CustomResourceDefinitionNames {
                    kind: "VerticalPodAutoscalerCheckpoint".to_owned(),
                    list_kind: Some("VerticalPodAutoscalerCheckpointList".to_owned()),
                    plural: "verticalpodautoscalercheckpoints".to_owned(),
                    singular: Some("verticalpodautoscalercheckpoint".to_owned()),
                    short_names: Some(vec!["vpacheckpoint".to_owned()]),
                    ..apiext::CustomResourceDefinitionNames::default()
                },
                scope: "Namespaced".to_owned(),
                versions: vec![apiext::CustomResourceDefinitionVersion {
                    name: VPA_VERSION.to_owned(),
                    served: true,
                    storage: true,
                    schema: Some(apiext::CustomResourceValidation {
                        open_api_v3_schema: schema,
                    }),
                    // No status subresource: upstream writes checkpoints as whole objects.
                    subresources: None,
                    ..apiext::CustomResourceDefinitionVersion::default()
                }],
                ..apiext::CustomResourceDefinitionSpec::default()
            },
            status: None,
        }
    }

    fn crd_name() -> &'static str {
        "verticalpodautoscalercheckpoints.autoscaling.k8s.io"
    }

    fn api_resource() -> kube::core::ApiResource {
        kube::core::ApiResource::erase::<Self>(&())
    }

    fn shortnames() -> &'static [&'static str] {
        &["vpacheckpoint"]
    }
}

#[cfg(test)]
mod tests;
