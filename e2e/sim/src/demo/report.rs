//! What the demo prints: a row per sample (`--output table` for people, `--output json` for
//! programs), the tracking figure, and the closing summary of what each service did.
//!
//! The tracking figure is the demo's promise: after the first tenth of the run (the day's first
//! pods warming up), the CPU of Ready pods stays within ±50 % of the HPA+'s target.

use serde_json::{Value, json};

use crate::demo::observe::Sample;

/// How rows are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Output {
    /// An aligned table for people.
    #[default]
    Table,
    /// One JSON object per row, then one with the summary.
    Json,
}

/// The time of day of simulated second `t`, e.g. `13:45` (a second day shows `1d 13:45`).
pub fn clock(t: f64) -> String {
    let minutes = (t.max(0.0) / 60.0) as u64;
    let (day, h, m) = (minutes / 1440, (minutes / 60) % 24, minutes % 60);
    if minutes == 1440 {
        // The run's last row: the end of the day, not the next one.
        "24:00".to_owned()
    } else if day > 0 {
        format!("{day}d {h:02}:{m:02}")
    } else {
        format!("{h:02}:{m:02}")
    }
}

/// The table's header line.
pub fn header() -> String {
    format!(
        "{:<6} {:>6} {:>9} {:>5} {:>4} {:>8} {:>8} {:>7}  last decision",
        "time", "load", "ready/rep", "cpu", "min", "mem rec", "admitted", "resized"
    )
}

/// The CronHPA's change of the HPA+'s minimum between two rows, e.g. `min 2→10`.
fn cron_change(s: &Sample, prev: Option<&Sample>) -> Option<String> {
    let prev = prev?;
    (prev.min_replicas != s.min_replicas)
        .then(|| format!("min {}→{}", prev.min_replicas, s.min_replicas))
}

/// One table row; a change of the minimum is marked before the decision.
pub fn table_row(s: &Sample, prev: Option<&Sample>) -> String {
    let mut decision = s.decision.clone();
    if let Some(change) = cron_change(s, prev) {
        decision = format!("[cron-hpa: {change}] {decision}");
    }
    if decision.chars().count() > 90 {
        decision = decision.chars().take(89).chain(['…']).collect();
    }
    format!(
        "{:<6} {:>6.0} {:>9} {:>4.0}% {:>4} {:>8} {:>8} {:>7}  {decision}",
        clock(s.t),
        s.load,
        format!("{}/{}", s.ready, s.replicas),
        s.cpu_percent,
        s.min_replicas,
        s.recommendation.as_deref().unwrap_or("-"),
        format!("{}/{}", s.patched, s.pods),
        s.resized,
    )
}

/// One JSON row.
pub fn json_row(s: &Sample) -> Value {
    json!({
        "t": s.t.round(), "time": clock(s.t), "load": s.load.round(),
        "replicas": s.replicas, "readyReplicas": s.ready,
        "cpuPercent": (s.cpu_percent * 10.0).round() / 10.0, "targetPercent": s.target_percent,
        "minReplicas": s.min_replicas, "decision": s.decision,
        "pods": s.pods, "patchedPods": s.patched, "recommendation": s.recommendation,
        "podsTotal": s.pods_total, "patchedTotal": s.patched_total,
        "resizedPods": s.resized, "evictedPods": s.evicted,
    })
}

/// Rows after the first tenth of the run, and how many of them had the CPU of Ready pods
/// within ±50 % of the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracking {
    /// Rows counted.
    pub rows: usize,
    /// Of those, rows on target.
    pub within: usize,
}

impl Tracking {
    /// Measures `samples` of a run spanning `span` simulated seconds.
    pub fn of(samples: &[Sample], span: f64) -> Self {
        let counted: Vec<_> = samples.iter().filter(|s| s.t >= span / 10.0).collect();
        let within = counted.iter().filter(|s| on_target(s)).count();
        Self {
            rows: counted.len(),
            within,
        }
    }

    /// Percent of rows on target (0 without rows).
    pub fn percent(&self) -> f64 {
        if self.rows == 0 {
            0.0
        } else {
            100.0 * self.within as f64 / self.rows as f64
        }
    }
}

/// Whether a row's CPU is within ±50 % of the target (no Ready pod is off target).
pub fn on_target(s: &Sample) -> bool {
    let target = s.target_percent as f64;
    s.ready > 0 && target > 0.0 && (s.cpu_percent - target).abs() <= 0.5 * target
}

/// What each service did over the run, from the rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The tracking figure.
    pub tracking: Tracking,
    /// hpa-plus: changes of the replica count between rows, and the range it moved in.
    pub replica_changes: usize,
    /// Fewest and most replicas.
    pub replicas_range: (i64, i64),
    /// cron-hpa: (time, from, to) of each change of the HPA+'s minimum.
    pub min_changes: Vec<(String, i64, i64)>,
    /// vpa-recommender: when the first target appeared, and the last target.
    pub recommendation: Option<(String, String)>,
    /// vpa-admission: pods patched, of the run's pods, with the latest change.
    pub admission: (i64, i64, String),
    /// vpa-updater: pods resized in place, pods evicted.
    pub updater: (i64, i64),
}

impl Summary {
    /// Summarises the rows of a run spanning `span` simulated seconds.
    pub fn of(samples: &[Sample], span: f64) -> Self {
        let replica_changes = samples
            .windows(2)
            .filter(|w| w[0].replicas != w[1].replicas)
            .count();
        let lo = samples.iter().map(|s| s.replicas).min().unwrap_or(0);
        let hi = samples.iter().map(|s| s.replicas).max().unwrap_or(0);
        let min_changes = samples
            .windows(2)
            .filter(|w| w[0].min_replicas != w[1].min_replicas)
            .map(|w| (clock(w[1].t), w[0].min_replicas, w[1].min_replicas))
            .collect();
        let first_target = samples.iter().find(|s| s.recommendation.is_some());
        let last = samples.last().cloned().unwrap_or_default();
        Self {
            tracking: Tracking::of(samples, span),
            replica_changes,
            replicas_range: (lo, hi),
            min_changes,
            recommendation: first_target
                .map(|s| (clock(s.t), last.recommendation.clone().unwrap_or_default())),
            admission: (
                last.patched_total,
                last.pods_total,
                samples
                    .iter()
                    .rev()
                    .map(|s| s.admission.clone())
                    .find(|a| !a.is_empty())
                    .unwrap_or_default(),
            ),
            updater: (last.resized, last.evicted),
        }
    }

    /// One line per service, with numbers.
    pub fn lines(&self) -> Vec<String> {
        let t = &self.tracking;
        let cron = if self.min_changes.is_empty() {
            "cron-hpa: did not change the HPA+'s minimum".to_owned()
        } else {
            let changes: Vec<String> = self
                .min_changes
                .iter()
                .map(|(at, from, to)| format!("{from}→{to} at {at}"))
                .collect();
            format!(
                "cron-hpa: moved the HPA+'s minReplicas {} (hpa-plus kept scaling above it)",
                changes.join(", ")
            )
        };
        let recommender = match &self.recommendation {
            Some((at, target)) => {
                format!("vpa-recommender: first memory target at {at}; target now {target}")
            }
            None => "vpa-recommender: no recommendation yet".to_owned(),
        };
        let (patched, pods, change) = &self.admission;
        let admission = if *patched > 0 {
            format!(
                "vpa-admission: {patched} of the {pods} web pods of the run were created with the VPA's recommendation ({change})"
            )
        } else {
            "vpa-admission: no web pod was created after the first recommendation".to_owned()
        };
        vec![
            format!(
                "hpa-plus: changed replicas {} times between rows, {}–{} replicas; CPU of Ready pods within ±50 % of the target in {} of {} rows after the first tenth ({:.0} %)",
                self.replica_changes,
                self.replicas_range.0,
                self.replicas_range.1,
                t.within,
                t.rows,
                t.percent()
            ),
            cron,
            recommender,
            admission,
            format!(
                "vpa-updater: resized {} running pods in place to the recommended memory, evicted {}",
                self.updater.0, self.updater.1
            ),
        ]
    }

    /// The summary as the last JSON object.
    pub fn json(&self) -> Value {
        let t = &self.tracking;
        json!({"summary": {
            "hpaPlus": {"replicaChanges": self.replica_changes, "minReplicasSeen": self.replicas_range.0,
                "maxReplicasSeen": self.replicas_range.1, "trackingRows": t.rows, "trackingWithin": t.within,
                "trackingPercent": (t.percent() * 10.0).round() / 10.0},
            "cronHpa": {"minReplicasChanges": self.min_changes.iter()
                .map(|(at, from, to)| json!({"time": at, "from": from, "to": to})).collect::<Vec<_>>()},
            "vpaRecommender": {"firstTargetAt": self.recommendation.as_ref().map(|r| &r.0),
                "memoryTarget": self.recommendation.as_ref().map(|r| &r.1)},
            "vpaAdmission": {"patchedPods": self.admission.0, "pods": self.admission.1, "change": self.admission.2},
            "vpaUpdater": {"resizedInPlace": self.updater.0, "evicted": self.updater.1},
            "lines": self.lines(),
        }})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t: f64, cpu: f64, min: i64) -> Sample {
        Sample {
            t,
            load: 900.0,
            replicas: 6,
            ready: 6,
            cpu_percent: cpu,
            target_percent: 60,
            min_replicas: min,
            ..Sample::default()
        }
    }

    #[test]
    fn tracking_skips_the_first_tenth_and_counts_the_band() {
        let rows = [
            row(0.0, 300.0, 2),
            row(20.0, 30.0, 2),
            row(50.0, 91.0, 2),
            row(90.0, 89.0, 2),
        ];
        let t = Tracking::of(&rows, 100.0);
        assert_eq!(t, Tracking { rows: 3, within: 2 });
        assert!((t.percent() - 66.666).abs() < 0.01);
        let mut unready = row(50.0, 60.0, 2);
        unready.ready = 0;
        assert!(!on_target(&unready));
    }

    #[test]
    fn cron_changes_are_marked_and_summarised() {
        let a = row(6.0 * 3600.0, 60.0, 2);
        let b = row(7.0 * 3600.0, 60.0, 10);
        assert!(table_row(&b, Some(&a)).contains("[cron-hpa: min 2→10]"));
        assert!(!table_row(&a, None).contains("cron-hpa"));
        let s = Summary::of(&[a, b], 86_400.0);
        assert_eq!(s.min_changes, [("07:00".to_owned(), 2, 10)]);
        assert!(s.lines()[1].contains("2→10 at 07:00"));
        assert_eq!(
            s.json()["summary"]["cronHpa"]["minReplicasChanges"][0]["to"],
            10
        );
    }

    #[test]
    fn json_rows_carry_the_documented_fields() {
        let v = json_row(&row(3600.0, 59.94, 2));
        for key in [
            "t",
            "load",
            "replicas",
            "readyReplicas",
            "cpuPercent",
            "targetPercent",
            "minReplicas",
            "decision",
        ] {
            assert!(v.get(key).is_some(), "{key} missing from {v}");
        }
        assert_eq!(v["cpuPercent"], 59.9);
        assert_eq!(v["time"], "01:00");
    }

    #[test]
    fn clock_labels() {
        assert_eq!(clock(0.0), "00:00");
        assert_eq!(clock(13.0 * 3600.0 + 45.0 * 60.0), "13:45");
        assert_eq!(clock(86_400.0), "24:00");
        assert_eq!(clock(86_400.0 + 60.0), "1d 00:01");
    }
}
