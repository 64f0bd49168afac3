//! Reading and writing what a job scales: the workload's scale subresource (replica mode) or
//! an autoscaler's `spec.minReplicas` (min-replicas mode).
//!
//! The decision itself (which writes, the clamping, the keep window) is
//! [`plimsoll_core::schedule::effect::decide`], and which autoscaler an annotated workload's
//! job adjusts is [`plimsoll_core::schedule::target::choose`] (by `scaleTargetRef`, not by
//! name); this module only gathers their input and applies their output. Writes are merge
//! patches under the field manager `cron-hpa`.

use k8s_openapi::api::autoscaling::v2::{CrossVersionObjectReference, HorizontalPodAutoscaler};
use kube::api::{Api, ListParams, Patch, PatchParams};
use plimsoll_core::api::cron::CronHorizontalPodAutoscaler;
use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus;
use plimsoll_core::schedule::effect::{Effect, Mode, Observed, mode};
use plimsoll_core::schedule::target::{AutoscalerKind, Candidate, choose};
use plimsoll_runtime::kinds::TargetRef;
use plimsoll_runtime::paged::list_summaries;

use crate::context::{Context, FIELD_MANAGER};
use crate::error::{Error, Result};

/// The autoscaler a min-replicas-mode job adjusts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Autoscaler {
    /// An `autoscaling/v2` `HorizontalPodAutoscaler` of this name.
    Hpa(String),
    /// A `HorizontalPodAutoscalerPlus` of this name.
    HpaPlus(String),
}

impl Autoscaler {
    /// `Kind/name`, for messages.
    pub fn describe(&self) -> String {
        match self {
            Self::Hpa(name) => format!("HorizontalPodAutoscaler/{name}"),
            Self::HpaPlus(name) => format!("HorizontalPodAutoscalerPlus/{name}"),
        }
    }
}

/// What a job acts on, resolved from the object.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// Replica or min-replicas mode.
    pub mode: Mode,
    /// The workload whose replicas are read (and set in replica mode or when raised).
    pub workload: CrossVersionObjectReference,
    /// In min-replicas mode: the autoscaler whose minimum is set.
    pub autoscaler: Option<Autoscaler>,
    /// The size the job decides on.
    pub observed: Observed,
}

/// Resolves the target of `cron` and reads its current sizes.
pub async fn observe(
    ctx: &Context,
    namespace: &str,
    cron: &CronHorizontalPodAutoscaler,
) -> Result<Resolved> {
    let target = &cron.spec.scale_target_ref;
    let annotations = &cron.metadata.annotations.clone().unwrap_or_default();
    let mode = mode(&target.kind, annotations);
    if mode == Mode::Replicas {
        let scale = ctx.scale.get(namespace, target).await?;
        return Ok(Resolved {
            mode,
            workload: target.clone(),
            autoscaler: None,
            observed: Observed {
                replicas: scale.spec_replicas,
                min_replicas: None,
                max_replicas: None,
            },
        });
    }
    // The autoscaler paths read the target by name themselves, not through the scale client
    // that checks it.
    TargetRef::from(target).check_name()?;
    let (autoscaler, workload, min, max) = match target.kind.as_str() {
        "HorizontalPodAutoscaler" => hpa(ctx, namespace, &target.name).await?,
        "HorizontalPodAutoscalerPlus" => hpa_plus(ctx, namespace, &target.name).await?,
        // Annotated workload: the one autoscaler whose scaleTargetRef is this workload.
        _ => autoscaler_of(ctx, namespace, target).await?,
    };
    let scale = ctx.scale.get(namespace, &workload).await?;
    Ok(Resolved {
        mode,
        workload,
        autoscaler: Some(autoscaler),
        observed: Observed {
            replicas: scale.spec_replicas,
            min_replicas: min,
            max_replicas: Some(max),
        },
    })
}

type AutoscalerView = (Autoscaler, CrossVersionObjectReference, Option<i32>, i32);

async fn hpa(ctx: &Context, namespace: &str, name: &str) -> Result<AutoscalerView> {
    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(ctx.client.clone(), namespace);
    let hpa = api
        .get(name)
        .await
        .map_err(|e| Error::kube(format!("get HorizontalPodAutoscaler {namespace}/{name}"), e))?;
    let spec = hpa.spec.ok_or_else(|| {
        Error::MissingField(format!(
            "HorizontalPodAutoscaler {namespace}/{name} has no spec"
        ))
    })?;
    Ok((
        Autoscaler::Hpa(name.to_owned()),
        spec.scale_target_ref,
        spec.min_replicas,
        spec.max_replicas,
    ))
}

async fn hpa_plus(ctx: &Context, namespace: &str, name: &str) -> Result<AutoscalerView> {
    let api: Api<HorizontalPodAutoscalerPlus> = Api::namespaced(ctx.client.clone(), namespace);
    let hpa = api.get(name).await.map_err(|e| {
        Error::kube(
            format!("get HorizontalPodAutoscalerPlus {namespace}/{name}"),
            e,
        )
    })?;
    Ok((
        Autoscaler::HpaPlus(name.to_owned()),
        CrossVersionObjectReference {
            api_version: hpa.spec.scale_target_ref.api_version,
            kind: hpa.spec.scale_target_ref.kind,
            name: hpa.spec.scale_target_ref.name,
        },
        hpa.spec.min_replicas,
        hpa.spec.max_replicas,
    ))
}

/// The autoscaler of an annotated workload: every HPA and HPA+ in the namespace is listed and
/// core chooses the one whose `scaleTargetRef` is `workload`.
async fn autoscaler_of(
    ctx: &Context,
    namespace: &str,
    workload: &CrossVersionObjectReference,
) -> Result<AutoscalerView> {
    let mut candidates: Vec<Candidate> = Vec::new();
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(ctx.client.clone(), namespace);
    // Paged: the namespace's autoscalers are its users' to fatten (`list_summaries`).
    let listed = list_summaries(&hpas, &ListParams::default(), |hpa| {
        let spec = hpa.spec?;
        Some(Candidate {
            kind: AutoscalerKind::Hpa,
            name: hpa.metadata.name.unwrap_or_default(),
            scale_target_ref: spec.scale_target_ref,
            min_replicas: spec.min_replicas,
            max_replicas: spec.max_replicas,
        })
    })
    .await
    .map_err(|e| Error::kube(format!("list HorizontalPodAutoscalers in {namespace}"), e))?;
    candidates.extend(listed);
    let pluses: Api<HorizontalPodAutoscalerPlus> = Api::namespaced(ctx.client.clone(), namespace);
    let listed = list_summaries(&pluses, &ListParams::default(), |plus| {
        let target = plus.spec.scale_target_ref;
        Some(Candidate {
            kind: AutoscalerKind::HpaPlus,
            name: plus.metadata.name.unwrap_or_default(),
            scale_target_ref: CrossVersionObjectReference {
                api_version: target.api_version,
                kind: target.kind,
                name: target.name,
            },
            min_replicas: plus.spec.min_replicas,
            max_replicas: plus.spec.max_replicas,
        })
    })
    .await;
    match listed {
        Ok(listed) => candidates.extend(listed),
        // The HPA+ CRD is not installed: there are none.
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(e) => {
            return Err(Error::kube(
                format!("list HorizontalPodAutoscalerPluses in {namespace}"),
                e,
            ));
        }
    }
    let chosen = choose(workload, &candidates)?.clone();
    let autoscaler = match chosen.kind {
        AutoscalerKind::Hpa => Autoscaler::Hpa(chosen.name),
        AutoscalerKind::HpaPlus => Autoscaler::HpaPlus(chosen.name),
    };
    Ok((
        autoscaler,
        chosen.scale_target_ref,
        chosen.min_replicas,
        chosen.max_replicas,
    ))
}

/// Applies `effect`: the autoscaler's minimum first (so it does not scale the raised workload
/// back down), then the workload's replicas.
pub async fn apply(
    ctx: &Context,
    namespace: &str,
    resolved: &Resolved,
    effect: &Effect,
) -> Result<()> {
    if let (Some(min), Some(autoscaler)) = (effect.set_min_replicas, &resolved.autoscaler) {
        let patch = serde_json::json!({ "spec": { "minReplicas": min } });
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        let context = || format!("set minReplicas of {} to {min}", autoscaler.describe());
        match autoscaler {
            Autoscaler::Hpa(name) => {
                let api: Api<HorizontalPodAutoscaler> =
                    Api::namespaced(ctx.client.clone(), namespace);
                api.patch(name, &params, &Patch::Merge(&patch))
                    .await
                    .map_err(|e| Error::kube(context(), e))?;
            }
            Autoscaler::HpaPlus(name) => {
                let api: Api<HorizontalPodAutoscalerPlus> =
                    Api::namespaced(ctx.client.clone(), namespace);
                api.patch(name, &params, &Patch::Merge(&patch))
                    .await
                    .map_err(|e| Error::kube(context(), e))?;
            }
        }
    }
    if let Some(replicas) = effect.set_replicas {
        ctx.scale
            .set_replicas(namespace, &resolved.workload, replicas)
            .await?;
    }
    Ok(())
}
