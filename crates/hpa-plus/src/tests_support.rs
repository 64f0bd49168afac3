//! Test doubles shared by the unit tests.

use futures::FutureExt as _;
use futures::future::BoxFuture;
use plimsoll_runtime::metrics_api::{ExternalMetricValue, MetricValue, MetricsSource, PodMetrics};
use plimsoll_runtime::selector::Selector;

/// A metrics source that has no values for anything.
pub struct NoMetrics;

impl MetricsSource for NoMetrics {
    fn pod_metrics<'a>(
        &'a self,
        _: &'a str,
        _: &'a Selector,
    ) -> BoxFuture<'a, plimsoll_runtime::Result<Vec<PodMetrics>>> {
        async { Ok(Vec::new()) }.boxed()
    }
    fn pods_metric<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a Selector,
        _: Option<&'a Selector>,
    ) -> BoxFuture<'a, plimsoll_runtime::Result<Vec<MetricValue>>> {
        async { Ok(Vec::new()) }.boxed()
    }
    fn object_metric<'a>(
        &'a self,
        namespace: &'a str,
        _: plimsoll_runtime::kinds::TargetRef<'a>,
        metric: &'a str,
        _: Option<&'a Selector>,
    ) -> BoxFuture<'a, plimsoll_runtime::Result<MetricValue>> {
        async move {
            Err(plimsoll_runtime::Error::MetricsApi {
                api: "custom.metrics.k8s.io",
                what: "object metric",
                metric: metric.to_owned(),
                namespace: namespace.to_owned(),
                reason: "no value".into(),
            })
        }
        .boxed()
    }
    fn external_metric<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: Option<&'a Selector>,
    ) -> BoxFuture<'a, plimsoll_runtime::Result<Vec<ExternalMetricValue>>> {
        async { Ok(Vec::new()) }.boxed()
    }
}
