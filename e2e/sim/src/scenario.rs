//! Sim scenario files (`plimsoll-sim serve --scenario FILE`, YAML or JSON): objects to create
//! at start and the workloads' loads.
//!
//! ```yaml
//! timeScale: 60                  # optional; the CLI flag wins when given
//! objects:                       # full manifests, created in order
//!   - {apiVersion: v1, kind: Namespace, metadata: {name: demo}}
//! loads:
//!   - namespace: demo
//!     kind: deployments          # or statefulsets
//!     name: web
//!     load: {profile: {type: sine, base: 100, amplitude: 80, periodSeconds: 3600}, cpuMillisPerUnit: 2}
//! external:                      # fixed external metric values
//!   - {namespace: demo, metric: queue_messages, value: 30}
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Cluster;
use crate::control::Caller;
use crate::error::{Error, Result};
use crate::workload::LoadSpec;

/// A workload's load in a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioLoad {
    /// Namespace.
    pub namespace: String,
    /// `deployments` or `statefulsets`.
    pub kind: String,
    /// Workload name.
    pub name: String,
    /// The load.
    pub load: LoadSpec,
}

/// A fixed external metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioExternal {
    /// Namespace.
    pub namespace: String,
    /// Metric name.
    pub metric: String,
    /// Value.
    pub value: f64,
}

/// A scenario.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Scenario {
    /// Time-scale factor.
    pub time_scale: Option<f64>,
    /// Manifests to create.
    pub objects: Vec<Value>,
    /// Loads.
    pub loads: Vec<ScenarioLoad>,
    /// External metrics.
    pub external: Vec<ScenarioExternal>,
}

impl Scenario {
    /// Parses YAML or JSON.
    pub fn parse(text: &str) -> Result<Self> {
        serde_json::from_str(text)
            .or_else(|_| serde_saphyr::from_str(text).map_err(|e| Error::Scenario(e.to_string())))
    }
}

/// Creates the scenario's objects and sets its loads.
pub async fn apply(cluster: &Cluster, sc: &Scenario) -> Result<()> {
    let caller = Caller::controller("scenario");
    for obj in &sc.objects {
        cluster.create_manifest(obj.clone(), &caller).await?;
    }
    for l in &sc.loads {
        cluster.model.set_load(
            &l.namespace,
            &l.kind,
            &l.name,
            l.load.clone(),
            cluster.clock.elapsed_secs(),
        );
    }
    for e in &sc.external {
        cluster.model.set_external(&e.namespace, &e.metric, e.value);
    }
    Ok(())
}
