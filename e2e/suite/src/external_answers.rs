//! A metrics source for tests and benchmarks that answers External metrics with a function of
//! the query (which can also note when each was asked) and nothing else: pods have no usage and
//! object metrics are not served, as with [`FixedExternalMetrics::empty`].

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use jiff::Timestamp;
use plimsoll_core::quantity::Quantity;
use plimsoll_runtime::kinds::TargetRef;
use plimsoll_runtime::metrics_api::{
    ExternalMetricValue, FixedExternalMetrics, MetricValue, MetricsSource, PodMetrics,
};
use plimsoll_runtime::selector::Selector;

/// Answers each External query with `answer(metric, metric_selector)`, called as it is asked.
pub struct ExternalAnswers<F> {
    answer: F,
    none: FixedExternalMetrics,
}

impl<F> ExternalAnswers<F>
where
    F: Fn(&str, Option<&Selector>) -> Quantity + Send + Sync,
{
    /// A source answering with `answer`.
    pub fn new(answer: F) -> Self {
        Self {
            answer,
            none: FixedExternalMetrics::empty(),
        }
    }
}

impl<F> MetricsSource for ExternalAnswers<F>
where
    F: Fn(&str, Option<&Selector>) -> Quantity + Send + Sync,
{
    fn pod_metrics<'a>(
        &'a self,
        namespace: &'a str,
        selector: &'a Selector,
    ) -> BoxFuture<'a, plimsoll_runtime::Result<Vec<PodMetrics>>> {
        self.none.pod_metrics(namespace, selector)
    }

    fn pods_metric<'a>(
        &'a self,
        namespace: &'a str,
        metric: &'a str,
        selector: &'a Selector,
        metric_selector: Option<&'a Selector>,
    ) -> BoxFuture<'a, plimsoll_runtime::Result<Vec<MetricValue>>> {
        self.none
            .pods_metric(namespace, metric, selector, metric_selector)
    }

    fn object_metric<'a>(
        &'a self,
        namespace: &'a str,
        object: TargetRef<'a>,
        metric: &'a str,
        metric_selector: Option<&'a Selector>,
    ) -> BoxFuture<'a, plimsoll_runtime::Result<MetricValue>> {
        self.none
            .object_metric(namespace, object, metric, metric_selector)
    }

    fn external_metric<'a>(
        &'a self,
        _: &'a str,
        metric: &'a str,
        metric_selector: Option<&'a Selector>,
    ) -> BoxFuture<'a, plimsoll_runtime::Result<Vec<ExternalMetricValue>>> {
        // Asked now, not when the future is first polled.
        let value = (self.answer)(metric, metric_selector);
        Box::pin(async move {
            Ok(vec![ExternalMetricValue {
                metric_name: metric.to_owned(),
                metric_labels: BTreeMap::new(),
                timestamp: Timestamp::now(),
                window_seconds: None,
                value,
            }])
        })
    }
}
