//! When an in-process service asked for each External metric: a [`MetricsSource`] that answers
//! like [`FixedExternalMetrics`] and logs each External query's metric name with the wall-clock
//! time. With one metric name per autoscaler, the log is the time of each evaluation.

use std::sync::{Mutex, MutexGuard, PoisonError};

use futures::future::BoxFuture;
use jiff::Timestamp;
use plimsoll_runtime::kinds::TargetRef;
use plimsoll_runtime::metrics_api::{
    ExternalMetricValue, FixedExternalMetrics, MetricValue, MetricsSource, PodMetrics,
};
use plimsoll_runtime::selector::Selector;

/// [`FixedExternalMetrics`] with a log of External queries.
#[derive(Debug, Default)]
pub struct MetricQueries {
    fixed: FixedExternalMetrics,
    log: Mutex<Vec<(String, Timestamp)>>,
}

impl MetricQueries {
    /// Answers as `fixed` does.
    pub fn new(fixed: FixedExternalMetrics) -> Self {
        Self {
            fixed,
            log: Mutex::default(),
        }
    }

    /// Every External query so far: metric name and time, in the order asked.
    pub fn log(&self) -> Vec<(String, Timestamp)> {
        self.lock().clone()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<(String, Timestamp)>> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl MetricsSource for MetricQueries {
    fn pod_metrics<'a>(
        &'a self,
        namespace: &'a str,
        selector: &'a Selector,
    ) -> BoxFuture<'a, plimsoll_runtime::Result<Vec<PodMetrics>>> {
        self.fixed.pod_metrics(namespace, selector)
    }

    fn pods_metric<'a>(
        &'a self,
        namespace: &'a str,
        metric: &'a str,
        selector: &'a Selector,
        metric_selector: Option<&'a Selector>,
    ) -> BoxFuture<'a, plimsoll_runtime::Result<Vec<MetricValue>>> {
        self.fixed
            .pods_metric(namespace, metric, selector, metric_selector)
    }

    fn object_metric<'a>(
        &'a self,
        namespace: &'a str,
        object: TargetRef<'a>,
        metric: &'a str,
        metric_selector: Option<&'a Selector>,
    ) -> BoxFuture<'a, plimsoll_runtime::Result<MetricValue>> {
        self.fixed
            .object_metric(namespace, object, metric, metric_selector)
    }

    fn external_metric<'a>(
        &'a self,
        namespace: &'a str,
        metric: &'a str,
        metric_selector: Option<&'a Selector>,
    ) -> BoxFuture<'a, plimsoll_runtime::Result<Vec<ExternalMetricValue>>> {
        self.lock().push((metric.to_owned(), Timestamp::now()));
        self.fixed
            .external_metric(namespace, metric, metric_selector)
    }
}
