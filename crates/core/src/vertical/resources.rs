//! The resource types every vertical module shares, at the bottom of the module graph.
//!
//! * [`Resource`]: CPU or memory.
//! * [`Resources`]: exact amounts ([`Quantity`], compared by value, formatted as written) of CPU and
//!   memory, each optional: what requests, limits, `LimitRange`s and recommendations hold on the
//!   webhook and updater side.
//! * [`ResourceAmounts`]: integer amounts (millicores, bytes) per resource, the recommender's form.
//! * [`ContainerRecommendation`]: one container's target and bounds, as `status.recommendation`
//!   holds them.
//!
//! Conversions from and to the Kubernetes resource lists live here too, so that every module above
//! reads quantities one way. This module imports nothing from its siblings.

use std::collections::BTreeMap;
use std::fmt;

use crate::api::vpa::{ResourceList, VerticalPodAutoscaler};
use crate::quantity::{self, Quantity, QuantityError};

/// A compute resource the VPA manages (the one enum every vertical module uses). Amounts are millicores / bytes in the model and exact quantities in
/// the admission path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    /// CPU (cores).
    Cpu,
    /// Memory (bytes).
    Memory,
}

impl Resource {
    /// Both resources, in the order patches and annotations list them (`cpu` before `memory`).
    pub const ALL: [Resource; 2] = [Resource::Cpu, Resource::Memory];

    /// The Kubernetes resource name (`cpu`, `memory`).
    pub fn name(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Memory => "memory",
        }
    }

    /// Parses a Kubernetes resource name; other resources are not managed by VPA.
    pub fn from_name(name: &str) -> Option<Resource> {
        match name {
            "cpu" => Some(Resource::Cpu),
            "memory" => Some(Resource::Memory),
            _ => None,
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// CPU and memory amounts; `None` means "not set", which is not the same as 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// CPU (cores).
    pub cpu: Option<Quantity>,
    /// Memory (bytes).
    pub memory: Option<Quantity>,
}

impl Resources {
    /// Both amounts set: CPU in millicores (decimal format), memory in bytes (binary format).
    pub fn new(cpu_millis: i64, memory_bytes: i64) -> Resources {
        Resources {
            cpu: Some(Quantity::from_milli(i128::from(cpu_millis))),
            memory: Some(Quantity::from_milli_binary(i128::from(memory_bytes) * 1000)),
        }
    }

    /// The amount of `resource`, if set.
    pub fn get(&self, resource: Resource) -> Option<Quantity> {
        match resource {
            Resource::Cpu => self.cpu,
            Resource::Memory => self.memory,
        }
    }

    /// Sets (or clears) the amount of `resource`.
    pub fn set(&mut self, resource: Resource, amount: Option<Quantity>) {
        match resource {
            Resource::Cpu => self.cpu = amount,
            Resource::Memory => self.memory = amount,
        }
    }

    /// True when neither amount is set.
    pub fn is_empty(&self) -> bool {
        self.cpu.is_none() && self.memory.is_none()
    }

    /// The resources that are set, in [`Resource::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (Resource, Quantity)> + '_ {
        Resource::ALL
            .into_iter()
            .filter_map(|r| self.get(r).map(|v| (r, v)))
    }
}

/// The recommendation for one container (as `status.recommendation` holds it; the webhook and the updater cap it with
/// `admission::process_recommendation`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerRecommendation {
    /// Container name.
    pub container: String,
    /// What the requests should be.
    pub target: Resources,
    /// Below this a request is too low to leave alone.
    pub lower_bound: Resources,
    /// Above this a request is too high to leave alone.
    pub upper_bound: Resources,
}

/// Requests per container name: what a pod's spec asks for, or the values of an in-place resize
/// (the updater remembers those a node could not fit).
pub type RequestsByContainer = BTreeMap<String, Resources>;

/// Finds the recommendation for `container`.
pub fn recommendation_for<'a>(
    recommendations: &'a [ContainerRecommendation],
    container: &str,
) -> Option<&'a ContainerRecommendation> {
    recommendations.iter().find(|r| r.container == container)
}

/// An amount of a resource: millicores for CPU, bytes for memory (upstream `ResourceAmount`).
/// Always in `0..=MAX_RESOURCE_AMOUNT` (see [`super::aggregate`]).
pub type ResourceAmount = i64;

/// Integer amount per resource (millicores for CPU, bytes for memory): the recommender's form,
/// in which histograms and estimators work. [`Resources`] is the exact form the webhook and the
/// updater compare and patch with.
pub type ResourceAmounts = BTreeMap<Resource, ResourceAmount>;

/// Amounts of the `cpu` and `memory` entries of a resource list (others are ignored).
pub fn amounts_from_list(list: Option<&ResourceList>) -> Result<ResourceAmounts, QuantityError> {
    let mut out = ResourceAmounts::new();
    for (name, q) in list.into_iter().flatten() {
        match Resource::from_name(name) {
            Some(Resource::Cpu) => {
                out.insert(Resource::Cpu, quantity::cpu_milli(q)?);
            }
            Some(Resource::Memory) => {
                out.insert(Resource::Memory, quantity::memory_bytes(q)?);
            }
            None => {}
        }
    }
    Ok(out)
}

/// A resource list from amounts: CPU as millicores (`345m`, `2`), memory as bytes in binary
/// form when exact (`1Gi`), as upstream writes recommendations.
pub fn amounts_to_list(resources: &ResourceAmounts) -> ResourceList {
    resources
        .iter()
        .map(|(r, &v)| {
            let q = match r {
                Resource::Cpu => quantity::Quantity::from_milli(i128::from(v)),
                Resource::Memory => quantity::Quantity::from_milli_binary(i128::from(v) * 1000),
            };
            (r.name().to_owned(), q.into())
        })
        .collect()
}

/// Reads CPU and memory from a Kubernetes resource list (other resources are ignored).
pub fn resources_from_k8s(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> Result<Resources, QuantityError> {
    let mut out = Resources::default();
    for (name, q) in list.into_iter().flatten() {
        if let Some(r) = Resource::from_name(name) {
            out.set(r, Some(Quantity::try_from(q)?));
        }
    }
    Ok(out)
}

/// Reads `status.recommendation.containerRecommendations` of a VPA object (`None` when the VPA
/// has no recommendation yet).
pub fn recommendations_from_api(
    vpa: &VerticalPodAutoscaler,
) -> Result<Option<Vec<ContainerRecommendation>>, QuantityError> {
    let Some(rec) = vpa.status.as_ref().and_then(|s| s.recommendation.as_ref()) else {
        return Ok(None);
    };
    rec.container_recommendations
        .iter()
        .flatten()
        .map(|c| {
            Ok(ContainerRecommendation {
                container: c.container_name.clone().unwrap_or_default(),
                target: resources_from_k8s(Some(&c.target))?,
                lower_bound: resources_from_k8s(c.lower_bound.as_ref())?,
                upper_bound: resources_from_k8s(c.upper_bound.as_ref())?,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}
