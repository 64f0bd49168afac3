//! Per-VPA recommender settings (VPA AEP-8026, upstream feature gate `PerVPAConfig`): which
//! aggregation settings one container of one VPA gets.
//!
//! A container policy (the entry named for the container, else `*`, as every other policy field)
//! may set `memoryAggregationIntervalSeconds`, `memoryAggregationIntervalCount`,
//! `oomBumpUpRatio` and `oomMinBumpUp`. Each one set overrides the recommender's flag for that
//! container only; each one absent keeps the flag. The target percentiles of the same policy are
//! read by the estimator ([`super::recommendation`]); `evictAfterOOMSeconds` is the updater's.
//!
//! The values come from a namespace user. They are validated by the CRD and by
//! [`VerticalPodAutoscalerSpec::validate`], but a model must not depend on that: a value that does
//! not parse or is out of range is skipped here (the flag applies), and the amounts it produces
//! are clamped where every amount is ([`super::aggregate::amount_from_float`]), so no setting can
//! make a recommendation larger than the largest amount or a memory window longer than
//! [`jiff::SignedDuration::MAX`].

use jiff::SignedDuration;

use super::aggregate::AggregationsConfig;
use crate::api::vpa::{ContainerResourcePolicy, VerticalPodAutoscalerSpec};
use crate::quantity::Quantity;

/// The aggregation settings one container policy overrides; `None` keeps the flag.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AggregationOverrides {
    /// `memoryAggregationIntervalSeconds`.
    pub memory_aggregation_interval: Option<SignedDuration>,
    /// `memoryAggregationIntervalCount`.
    pub memory_aggregation_interval_count: Option<i64>,
    /// `oomBumpUpRatio`.
    pub oom_bump_up_ratio: Option<f64>,
    /// `oomMinBumpUp`, bytes.
    pub oom_min_bump_up_bytes: Option<f64>,
}

impl AggregationOverrides {
    /// The overrides a container policy sets; values that do not parse or are out of the range
    /// the API allows are left out.
    pub fn from_policy(policy: &ContainerResourcePolicy) -> Self {
        let quantity = |q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
            q.and_then(|q| Quantity::try_from(q).ok())
                .map(|q| q.as_f64())
                .filter(|v| v.is_finite())
        };
        Self {
            memory_aggregation_interval: policy
                .memory_aggregation_interval_seconds
                .filter(|s| *s >= 1)
                .map(|s| SignedDuration::from_secs(i64::from(s))),
            memory_aggregation_interval_count: policy
                .memory_aggregation_interval_count
                .filter(|n| *n >= 1),
            oom_bump_up_ratio: quantity(policy.oom_bump_up_ratio.as_ref()).filter(|r| *r >= 1.0),
            oom_min_bump_up_bytes: quantity(policy.oom_min_bump_up.as_ref()).filter(|b| *b >= 0.0),
        }
    }

    /// The overrides as the policy names them (`oomBumpUpRatio 2`), for `explain`.
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(d) = self.memory_aggregation_interval {
            out.push(format!("memoryAggregationIntervalSeconds {}", d.as_secs()));
        }
        if let Some(n) = self.memory_aggregation_interval_count {
            out.push(format!("memoryAggregationIntervalCount {n}"));
        }
        if let Some(r) = self.oom_bump_up_ratio {
            out.push(format!("oomBumpUpRatio {r}"));
        }
        if let Some(b) = self.oom_min_bump_up_bytes {
            out.push(format!("oomMinBumpUp {b}"));
        }
        out
    }

    /// Whether nothing is overridden.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// `base` with these overrides applied.
    pub fn apply(&self, base: &AggregationsConfig) -> AggregationsConfig {
        AggregationsConfig {
            memory_aggregation_interval: self
                .memory_aggregation_interval
                .unwrap_or(base.memory_aggregation_interval),
            memory_aggregation_interval_count: self
                .memory_aggregation_interval_count
                .unwrap_or(base.memory_aggregation_interval_count),
            oom_bump_up_ratio: self.oom_bump_up_ratio.unwrap_or(base.oom_bump_up_ratio),
            oom_min_bump_up_bytes: self
                .oom_min_bump_up_bytes
                .unwrap_or(base.oom_min_bump_up_bytes),
            ..*base
        }
    }
}

/// The overrides of one VPA, by container policy name (a container name or `*`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PerVpaSettings {
    // Few entries (the API allows at most 64 policies), looked up per sample: a list in spec
    // order is as fast as a map here and keeps the first of duplicate names, as the policy
    // lookup does.
    policies: Vec<(String, AggregationOverrides)>,
}

impl PerVpaSettings {
    /// The overrides of every container policy of `spec` that sets one.
    pub fn from_spec(spec: &VerticalPodAutoscalerSpec) -> Self {
        let policies = spec
            .resource_policy
            .as_ref()
            .and_then(|p| p.container_policies.as_ref())
            .into_iter()
            .flatten()
            .map(|p| {
                (
                    p.container_name.clone().unwrap_or_else(|| "*".to_owned()),
                    AggregationOverrides::from_policy(p),
                )
            })
            .collect();
        Self { policies }
    }

    /// The overrides that apply to `container`: its own policy's, else the `*` policy's (the
    /// same lookup as every other policy field, upstream `GetContainerResourcePolicy`).
    pub fn overrides(&self, container: &str) -> AggregationOverrides {
        self.policies
            .iter()
            .find(|(name, _)| name == container)
            .or_else(|| self.policies.iter().find(|(name, _)| name == "*"))
            .map(|(_, o)| *o)
            .unwrap_or_default()
    }

    /// The settings `container` is aggregated with: `base` (the flags) with its overrides.
    pub fn for_container(&self, container: &str, base: &AggregationsConfig) -> AggregationsConfig {
        self.overrides(container).apply(base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::vpa::PodResourcePolicy;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

    fn spec(policies: Vec<ContainerResourcePolicy>) -> VerticalPodAutoscalerSpec {
        let mut spec: VerticalPodAutoscalerSpec = serde_json::from_value(serde_json::json!({
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
        }))
        .expect("spec");
        spec.resource_policy = Some(PodResourcePolicy {
            container_policies: Some(policies),
        });
        spec
    }

    fn policy(name: &str) -> ContainerResourcePolicy {
        ContainerResourcePolicy {
            container_name: Some(name.to_owned()),
            ..ContainerResourcePolicy::default()
        }
    }

    /// AEP-8026's own example: `*` with ratio 1.5, minimum 100 MB, a 12 h interval and 5
    /// intervals, over the upstream defaults.
    #[test]
    fn the_aep_example_overrides_the_flags_for_every_container() {
        let settings = PerVpaSettings::from_spec(&spec(vec![ContainerResourcePolicy {
            oom_bump_up_ratio: Some(K8sQuantity("1.5".into())),
            oom_min_bump_up: Some(K8sQuantity("104857600".into())),
            memory_aggregation_interval_seconds: Some(12 * 3600),
            memory_aggregation_interval_count: Some(5),
            ..policy("*")
        }]));
        let base = AggregationsConfig::default();
        let c = settings.for_container("app", &base);
        assert!((c.oom_bump_up_ratio - 1.5).abs() < 1e-9);
        assert!((c.oom_min_bump_up_bytes - 104_857_600.0).abs() < 1e-9);
        assert_eq!(
            c.memory_aggregation_interval,
            SignedDuration::from_hours(12)
        );
        assert_eq!(c.memory_aggregation_interval_count, 5);
        assert_eq!(
            c.memory_aggregation_window(),
            SignedDuration::from_hours(60)
        );
        // What the AEP does not name stays the flag's.
        assert_eq!(
            c.memory_histogram_decay_half_life,
            base.memory_histogram_decay_half_life
        );
    }

    #[test]
    fn a_named_policy_wins_over_star_and_unset_fields_keep_the_flag() {
        let settings = PerVpaSettings::from_spec(&spec(vec![
            ContainerResourcePolicy {
                oom_bump_up_ratio: Some(K8sQuantity("3".into())),
                memory_aggregation_interval_count: Some(2),
                ..policy("*")
            },
            ContainerResourcePolicy {
                oom_bump_up_ratio: Some(K8sQuantity("2".into())),
                ..policy("db")
            },
        ]));
        let base = AggregationsConfig::default();
        let db = settings.for_container("db", &base);
        assert!((db.oom_bump_up_ratio - 2.0).abs() < 1e-9);
        // The named policy replaces `*` whole, as for minAllowed and the rest.
        assert_eq!(db.memory_aggregation_interval_count, 8);
        let web = settings.for_container("web", &base);
        assert!((web.oom_bump_up_ratio - 3.0).abs() < 1e-9);
        assert_eq!(web.memory_aggregation_interval_count, 2);
        assert_eq!(
            PerVpaSettings::default().for_container("web", &base),
            base,
            "no policy: the flags"
        );
    }

    #[test]
    fn values_the_api_refuses_are_skipped() {
        let settings = PerVpaSettings::from_spec(&spec(vec![ContainerResourcePolicy {
            oom_bump_up_ratio: Some(K8sQuantity("0.5".into())),
            oom_min_bump_up: Some(K8sQuantity("lots".into())),
            memory_aggregation_interval_seconds: Some(0),
            memory_aggregation_interval_count: Some(-3),
            ..policy("*")
        }]));
        assert!(settings.overrides("app").is_empty());
    }

    #[test]
    fn the_largest_window_a_tenant_can_write_neither_overflows_nor_expires() {
        let settings = PerVpaSettings::from_spec(&spec(vec![ContainerResourcePolicy {
            memory_aggregation_interval_seconds: Some(i32::MAX),
            memory_aggregation_interval_count: Some(i64::MAX),
            ..policy("*")
        }]));
        let c = settings.for_container("app", &AggregationsConfig::default());
        // The count is clamped to i32::MAX intervals, as for the flag.
        let expected = i64::from(i32::MAX) * i64::from(i32::MAX);
        assert_eq!(c.memory_aggregation_window().as_secs(), expected);
        let created = jiff::Timestamp::MIN;
        let aggregate = super::super::aggregate::AggregateContainerState::new(&c, created);
        assert!(!aggregate.is_expired(&c, jiff::Timestamp::MAX));
    }
}
