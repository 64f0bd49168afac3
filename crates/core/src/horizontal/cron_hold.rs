//! Whether a `CronHorizontalPodAutoscaler` holds an autoscaler's target.
//!
//! A replica-mode CronHPA (one that sets the workload's replicas itself) targeting the same
//! workload in the same namespace holds it while its `status.scaleUpKeepWindow` is true: the
//! autoscaler must not undo the scheduled size. A min-replicas-mode CronHPA (see
//! [`crate::schedule::effect::mode`], the one rule for the adjust-hpa-min annotation) only
//! raises `minReplicas`, so the autoscaler keeps working and is never held.

use kube::ResourceExt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::cron::{CronHorizontalPodAutoscaler, CronHorizontalPodAutoscalerStatus};
use crate::api::hpa_plus::CrossVersionObjectReference;
use crate::cut_down;
use crate::schedule::effect::{Mode, is_mode_annotation, mode};

/// `CronHorizontalPodAutoscaler/<name>` of the first CronHPA among `crons` that holds
/// `target` in `namespace`, if any.
pub fn cron_hold<'a>(
    crons: impl IntoIterator<Item = &'a CronHorizontalPodAutoscaler>,
    namespace: &str,
    target: &CrossVersionObjectReference,
) -> Option<String> {
    crons
        .into_iter()
        .filter(|c| c.metadata.namespace.as_deref() == Some(namespace))
        .filter(|c| {
            let t = &c.spec.scale_target_ref;
            t.kind == target.kind && t.name == target.name
        })
        .filter(|c| mode(&c.spec.scale_target_ref.kind, c.annotations()) == Mode::Replicas)
        .find(|c| c.status.as_ref().is_some_and(|s| s.scale_up_keep_window))
        .map(|c| format!("CronHorizontalPodAutoscaler/{}", c.name_any()))
}

/// `CronHorizontalPodAutoscaler/<name>` of the first CronHPA among `crons` that keeps
/// `minReplicasTuning` off the autoscaler `kind/name` whose workload is `target`: one that
/// [`cron_hold`]s the workload, or any min-replicas-mode CronHPA that sets this autoscaler's
/// `minReplicas` (aimed at the autoscaler itself, or at its workload with the adjust-hpa-min
/// annotation). Tuning lowering a minimum a schedule raises would undo the schedule.
pub fn tuning_hold<'a>(
    crons: impl IntoIterator<Item = &'a CronHorizontalPodAutoscaler> + Clone,
    namespace: &str,
    autoscaler: (&str, &str),
    target: &CrossVersionObjectReference,
) -> Option<String> {
    cron_hold(crons.clone(), namespace, target).or_else(|| {
        crons
            .into_iter()
            .filter(|c| c.metadata.namespace.as_deref() == Some(namespace))
            .filter(|c| mode(&c.spec.scale_target_ref.kind, c.annotations()) == Mode::MinReplicas)
            .find(|c| {
                let t = &c.spec.scale_target_ref;
                (t.kind == autoscaler.0 && t.name == autoscaler.1)
                    || (t.kind == target.kind && t.name == target.name)
            })
            .map(|c| format!("CronHorizontalPodAutoscaler/{}", c.name_any()))
    })
}

/// Cuts `cron` down to what [`cron_hold`] and [`tuning_hold`] read, for a service that caches
/// every CronHPA of the cluster only to ask them (hpa-plus): its names, uid and
/// resourceVersion, the adjust-hpa-min annotations ([`mode`]), the target and
/// `status.scaleUpKeepWindow`. Namespace users write CronHPAs: the schema bounds a spec (100
/// jobs, 366 excluded dates: about 150 KB), not the metadata (256 KiB of annotations,
/// `managedFields`, labels: up to etcd's 1.5 MiB); what is kept is a few hundred bytes.
pub fn cached_fields(cron: &mut CronHorizontalPodAutoscaler) {
    let meta = &mut cron.metadata;
    cron.metadata = ObjectMeta {
        annotations: cut_down::annotations(meta, is_mode_annotation),
        ..cut_down::identity(meta)
    };
    cron.spec.time_zone = None;
    cron.spec.exclude_dates = Vec::new();
    cron.spec.jobs = Vec::new();
    cron.status = cron
        .status
        .take()
        .map(|status| CronHorizontalPodAutoscalerStatus {
            scale_up_keep_window: status.scale_up_keep_window,
            ..CronHorizontalPodAutoscalerStatus::default()
        });
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference as K8sRef;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    use super::*;
    use crate::api::cron::{
        ADJUST_HPA_MIN_ANNOTATION, ADJUST_HPA_MIN_ANNOTATION_STKE, CronHorizontalPodAutoscalerSpec,
        CronHorizontalPodAutoscalerStatus, ScalingJob,
    };

    fn cron(
        name: &str,
        kind: &str,
        target: &str,
        keep: bool,
        annotation: Option<(&str, &str)>,
    ) -> CronHorizontalPodAutoscaler {
        let mut c = CronHorizontalPodAutoscaler::new(
            name,
            CronHorizontalPodAutoscalerSpec {
                scale_target_ref: K8sRef {
                    api_version: Some("apps/v1".into()),
                    kind: kind.into(),
                    name: target.into(),
                },
                ..Default::default()
            },
        );
        c.metadata.namespace = Some("ns".into());
        c.metadata.annotations = annotation.map(|(k, v)| [(k.to_owned(), v.to_owned())].into());
        c.status = Some(CronHorizontalPodAutoscalerStatus {
            scale_up_keep_window: keep,
            ..Default::default()
        });
        c
    }

    fn target(kind: &str, name: &str) -> CrossVersionObjectReference {
        CrossVersionObjectReference {
            api_version: Some("apps/v1".into()),
            kind: kind.into(),
            name: name.into(),
        }
    }

    /// Every answer of both holds is the same from the cut-down CronHPAs, fattened or not, and
    /// each keeps a few hundred bytes.
    #[test]
    fn a_cut_down_cron_gives_the_same_holds() {
        let mut crons = Vec::new();
        for (i, kind) in [
            "Deployment",
            "HorizontalPodAutoscalerPlus",
            "HorizontalPodAutoscaler",
        ]
        .into_iter()
        .enumerate()
        {
            for keep in [false, true] {
                for annotation in [
                    None,
                    Some((ADJUST_HPA_MIN_ANNOTATION, "true")),
                    Some((ADJUST_HPA_MIN_ANNOTATION_STKE, "TRUE")),
                    Some((ADJUST_HPA_MIN_ANNOTATION, "false")),
                ] {
                    let name = format!("c{i}-{keep}-{}", crons.len());
                    crons.push(cron(&name, kind, "web", keep, annotation));
                    crons.push(cron(
                        &format!("{name}-hpa"),
                        kind,
                        "web-hpa",
                        keep,
                        annotation,
                    ));
                }
            }
        }
        for c in &mut crons {
            c.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default(); 500]);
            c.metadata.labels = Some([("l".to_owned(), "v".repeat(63))].into());
            c.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert("blob".into(), "x".repeat(100 << 10));
            c.spec.exclude_dates = vec!["* * * 25 12 *".into(); 366];
            c.spec.jobs = vec![ScalingJob::default(); 100];
        }
        let mut cut = crons.clone();
        cut.iter_mut().for_each(cached_fields);
        for c in &cut {
            let size = serde_json::to_vec(c).map_or(usize::MAX, |json| json.len());
            assert!(size < 512, "{size}: {c:?}");
        }
        for kind in ["Deployment", "StatefulSet"] {
            for name in ["web", "db"] {
                let t = target(kind, name);
                for ns in ["ns", "other"] {
                    assert_eq!(cron_hold(&cut, ns, &t), cron_hold(&crons, ns, &t));
                    for autoscaler in [
                        ("HorizontalPodAutoscalerPlus", "web-hpa"),
                        ("HorizontalPodAutoscaler", "web-hpa"),
                        ("HorizontalPodAutoscalerPlus", "web"),
                    ] {
                        assert_eq!(
                            tuning_hold(&cut, ns, autoscaler, &t),
                            tuning_hold(&crons, ns, autoscaler, &t),
                            "{ns} {autoscaler:?} {kind}/{name}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_replica_mode_cron_in_its_keep_window_holds_the_target() {
        let crons = [
            cron("other", "Deployment", "db", true, None),
            cron("closed", "Deployment", "web", false, None),
            cron("open", "Deployment", "web", true, None),
        ];
        assert_eq!(
            cron_hold(&crons, "ns", &target("Deployment", "web")).as_deref(),
            Some("CronHorizontalPodAutoscaler/open")
        );
        assert_eq!(
            cron_hold(&crons, "other-ns", &target("Deployment", "web")),
            None
        );
        assert_eq!(cron_hold(&crons, "ns", &target("StatefulSet", "web")), None);
    }

    #[test]
    fn tuning_is_held_by_a_keep_window_or_by_any_cron_that_sets_this_minimum() {
        let web = target("Deployment", "web");
        let at = |crons: &[CronHorizontalPodAutoscaler]| {
            tuning_hold(
                crons,
                "ns",
                ("HorizontalPodAutoscalerPlus", "web-hpa"),
                &web,
            )
        };
        // A replica-mode cron outside its keep window leaves tuning alone.
        assert_eq!(
            at(&[cron("closed", "Deployment", "web", false, None)]),
            None
        );
        assert_eq!(
            at(&[cron("open", "Deployment", "web", true, None)]).as_deref(),
            Some("CronHorizontalPodAutoscaler/open")
        );
        // A cron aimed at this autoscaler sets its minReplicas, keep window or not.
        assert_eq!(
            at(&[cron(
                "min",
                "HorizontalPodAutoscalerPlus",
                "web-hpa",
                false,
                None
            )])
            .as_deref(),
            Some("CronHorizontalPodAutoscaler/min")
        );
        assert_eq!(
            at(&[cron(
                "other",
                "HorizontalPodAutoscalerPlus",
                "db-hpa",
                false,
                None
            )]),
            None
        );
        // So does one aimed at the workload in adjust-hpa-min mode.
        let annotated = cron(
            "adjust",
            "Deployment",
            "web",
            false,
            Some((ADJUST_HPA_MIN_ANNOTATION, "true")),
        );
        assert_eq!(
            at(std::slice::from_ref(&annotated)).as_deref(),
            Some("CronHorizontalPodAutoscaler/adjust")
        );
    }

    #[test]
    fn a_min_replicas_mode_cron_does_not_hold() {
        let crons = [cron(
            "min",
            "Deployment",
            "web",
            true,
            Some((ADJUST_HPA_MIN_ANNOTATION, "true")),
        )];
        assert_eq!(cron_hold(&crons, "ns", &target("Deployment", "web")), None);
    }

    #[test]
    fn the_annotation_is_read_as_core_reads_it_in_any_case() {
        // The CronHPA controller treats "TRUE" as min-replicas mode, so must the hold.
        for (key, value, holds) in [
            (ADJUST_HPA_MIN_ANNOTATION, "true", false),
            (ADJUST_HPA_MIN_ANNOTATION, "TRUE", false),
            (ADJUST_HPA_MIN_ANNOTATION_STKE, " True ", false),
            (ADJUST_HPA_MIN_ANNOTATION, "false", true),
        ] {
            let crons = [cron("c", "Deployment", "web", true, Some((key, value)))];
            assert_eq!(
                cron_hold(&crons, "ns", &target("Deployment", "web")).is_some(),
                holds,
                "{key}: {value:?}"
            );
        }
    }
}
