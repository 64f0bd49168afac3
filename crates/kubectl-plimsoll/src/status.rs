//! `kubectl plimsoll status`: reads the Leases of the install namespace (one List: a sharded
//! service has one Lease per shard, named by the shard count its Deployment gives), each
//! service's Deployment, pods and EndpointSlices, and prints what `plimsoll_core::service_health`
//! makes of them.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Client;
use kube::api::{Api, ListParams};
use plimsoll_core::service_health::{Observed, SERVICES, Service, ServiceHealth, assess, to_text};

use crate::{Error, Output, Result};

/// The health of every service installed in `namespace`, printed as `output`.
pub async fn status(
    client: &Client,
    namespace: &str,
    output: Output,
    now: Timestamp,
) -> Result<String> {
    let all = assess_all(client, namespace, now).await?;
    output.render(&all, || to_text(namespace, &all))
}

/// The health of every service installed in `namespace`.
pub async fn assess_all(
    client: &Client,
    namespace: &str,
    now: Timestamp,
) -> Result<Vec<ServiceHealth>> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let leases = leases
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::kube(format!("list leases in {namespace}"), e))?
        .items;
    let mut out = Vec::new();
    for service in &SERVICES {
        let observed = observe(client, namespace, service, leases.clone()).await?;
        out.push(assess(service, &observed, now));
    }
    Ok(out)
}

async fn observe(
    client: &Client,
    namespace: &str,
    service: &Service,
    leases: Vec<Lease>,
) -> Result<Observed> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
    let deployment = deployments
        .get_opt(&service.deployment())
        .await
        .map_err(|e| Error::kube(format!("get deployment {}", service.deployment()), e))?;
    let pods = pods
        .list(&ListParams::default().labels(&service.pod_selector()))
        .await
        .map_err(|e| Error::kube(format!("list pods of {}", service.binary), e))?
        .items;
    let selector = format!("kubernetes.io/service-name={}", service.metrics_service());
    let endpoint_slices = match slices.list(&ListParams::default().labels(&selector)).await {
        Ok(list) => Some(list.items),
        // A cluster (or a test server) that does not serve discovery.k8s.io: say so, not fail.
        Err(kube::Error::Api(status)) if status.code == 404 => None,
        Err(e) => return Err(Error::kube("list endpointslices", e)),
    };
    Ok(Observed {
        leases,
        deployment,
        pods,
        endpoint_slices,
    })
}
