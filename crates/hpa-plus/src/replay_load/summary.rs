//! What a `LoadReplay` cost and how often it was overloaded, over its steps from a time on
//! ([`summarize`]), and the scenario's `expect` on it ([`Expect`]): how `just
//! predictive-report` and the replay tests judge prediction and tuning on a trace.
//!
//! * A step is **overloaded** when an evaluation within it saw the Ready pods above 1.5 × the
//!   CPU target (`peakUtilization`): beyond the ±50 % band a service is in trouble, not
//!   merely busy.
//! * **Replica-hours** integrate the replicas (Ready or not: each costs) over time; **needed**
//!   integrates what the load strictly needed at the target, `ceil(load / (request ×
//!   target))`, at each evaluation.

use std::fmt::Write as _;

use serde::Deserialize;

use super::LoadLine;

/// Utilization above this many times the target makes a step overloaded.
pub const OVERLOAD_FACTOR: f64 = 1.5;

/// A replay's numbers over its steps from `from` on.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Seconds since the start of the first step counted.
    pub from: f64,
    /// Steps counted.
    pub steps: usize,
    /// Steps with an evaluation above [`OVERLOAD_FACTOR`] × the target.
    pub overloaded_steps: usize,
    /// Overloaded steps with an overloaded evaluation whose load had risen past
    /// [`OVERLOAD_FACTOR`] times itself within the reactive path's reach (`podStartupSeconds`
    /// and a sync period): no scale-up asked for after the rise began could have carried it,
    /// only capacity already there.
    pub out_of_reach_steps: usize,
    /// The longest run of consecutive overloaded steps, seconds.
    pub longest_overload_seconds: f64,
    /// Replica-hours.
    pub replica_hours: f64,
    /// Replica-hours the load strictly needed at the target; `None` without a CPU target.
    pub needed_hours: Option<f64>,
}

impl Summary {
    /// Replica-hours over what the load needed.
    pub fn ratio(&self) -> Option<f64> {
        self.needed_hours
            .filter(|n| *n > 0.0)
            .map(|n| self.replica_hours / n)
    }

    /// Overloaded steps, percent of the steps.
    pub fn overloaded_percent(&self) -> f64 {
        self.overloaded_steps as f64 * 100.0 / self.steps.max(1) as f64
    }
}

/// The step is overloaded: an evaluation within it saw the Ready pods above
/// [`OVERLOAD_FACTOR`] × the CPU target (never without a target or a Ready pod). The report
/// counts these, and `--plot` shades them.
pub fn overloaded(s: &LoadLine) -> bool {
    above_overload(s.peak_utilization, s.target)
}

/// `utilization` is above [`OVERLOAD_FACTOR`] × the CPU `target` (never without either).
pub fn above_overload(utilization: Option<f64>, target: Option<i32>) -> bool {
    match (utilization, target) {
        (Some(u), Some(t)) => u > OVERLOAD_FACTOR * f64::from(t),
        _ => false,
    }
}

/// The summary of `steps` from `from` seconds on.
pub fn summarize(steps: &[LoadLine], from: f64) -> Summary {
    let counted: Vec<&LoadLine> = steps.iter().filter(|s| s.t >= from).collect();
    let (mut run, mut longest) = (0.0, 0.0f64);
    for s in &counted {
        run = if overloaded(s) { run + s.seconds } else { 0.0 };
        longest = longest.max(run);
    }
    let needed = counted
        .iter()
        .map(|s| s.needed_seconds)
        .sum::<Option<f64>>();
    Summary {
        from,
        steps: counted.len(),
        overloaded_steps: counted.iter().filter(|s| overloaded(s)).count(),
        out_of_reach_steps: counted
            .iter()
            .filter(|s| s.overload_rise > OVERLOAD_FACTOR)
            .count(),
        longest_overload_seconds: longest,
        replica_hours: counted.iter().map(|s| s.replica_seconds).sum::<f64>() / 3600.0,
        needed_hours: needed.map(|n| n / 3600.0),
    }
}

/// `expect` of a `LoadReplay`: bounds on its [`Summary`], alone or against a baseline
/// scenario (the same trace under another setting, replayed too). Every field is optional.
#[derive(Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// Count only steps from this many seconds on (default 0).
    #[serde(default)]
    pub from: f64,
    /// A scenario file (relative to this one) to compare with.
    #[serde(default)]
    pub baseline: Option<String>,
    /// At most this many overloaded steps.
    #[serde(default)]
    pub overloaded_steps_at_most: Option<usize>,
    /// At most this fraction of the baseline's overloaded steps (rounded down; none when the
    /// baseline has none).
    #[serde(default)]
    pub overloaded_steps_vs_baseline_at_most: Option<f64>,
    /// At most this many times the baseline's replica-hours.
    #[serde(default)]
    pub replica_hours_vs_baseline_at_most: Option<f64>,
    /// At most this many times the replica-hours the load needed.
    #[serde(default)]
    pub replica_hours_vs_needed_at_most: Option<f64>,
}

/// The misses of `expect` for `this` (and `baseline`, the baseline's summary from the same
/// time on), each as `expect: …, got …`.
pub fn check(expect: &Expect, this: &Summary, baseline: Option<&Summary>) -> Vec<String> {
    let mut misses = Vec::new();
    let mut miss = |what: String, got: String| {
        misses.push(format!("expect: {what}, got {got}"));
    };
    if let Some(max) = expect.overloaded_steps_at_most
        && this.overloaded_steps > max
    {
        miss(
            format!("at most {max} overloaded steps"),
            this.overloaded_steps.to_string(),
        );
    }
    if let (Some(f), Some(b)) = (expect.overloaded_steps_vs_baseline_at_most, baseline) {
        let max = (b.overloaded_steps as f64 * f).floor() as usize;
        if this.overloaded_steps > max {
            // How many of the baseline's no reaction could have met tells whether the bound
            // can be met by reacting better or only by capacity held ahead.
            let reach = match b.out_of_reach_steps {
                0 => String::new(),
                n => format!("; {n} of the baseline's were out of the reactive path's reach"),
            };
            miss(
                format!(
                    "at most {f} × the baseline's {} overloaded steps ({max})",
                    b.overloaded_steps
                ),
                format!("{}{reach}", this.overloaded_steps),
            );
        }
    }
    if let (Some(f), Some(b)) = (expect.replica_hours_vs_baseline_at_most, baseline)
        && this.replica_hours > b.replica_hours * f
    {
        miss(
            format!(
                "at most {f} × the baseline's {:.1} replica-hours",
                b.replica_hours
            ),
            format!(
                "{:.1} ({:.3} ×)",
                this.replica_hours,
                this.replica_hours / b.replica_hours.max(f64::MIN_POSITIVE)
            ),
        );
    }
    if let Some(f) = expect.replica_hours_vs_needed_at_most {
        match this.ratio() {
            Some(r) if r <= f => {}
            r => miss(
                format!("replica-hours at most {f} × what the load needed"),
                r.map_or_else(|| "no CPU target".into(), |r| format!("{r:.3} ×")),
            ),
        }
    }
    misses
}

/// The report's table row of one trace: Off against Scale (or any two settings).
pub fn row(name: &str, off: &Summary, on: &Summary) -> String {
    let ratio = |s: &Summary| s.ratio().map_or_else(|| "-".into(), |r| format!("{r:.3}"));
    let minutes = |s: f64| format!("{:.0} min", s / 60.0);
    let mut out = String::new();
    let _ = write!(
        out,
        "| {name} | {} | {} ({:.2} %) | {} ({:.2} %) | {} | {} | {} | {} | {:.3} |",
        off.steps,
        off.overloaded_steps,
        off.overloaded_percent(),
        on.overloaded_steps,
        on.overloaded_percent(),
        minutes(off.longest_overload_seconds),
        minutes(on.longest_overload_seconds),
        ratio(off),
        ratio(on),
        on.replica_hours / off.replica_hours.max(f64::MIN_POSITIVE),
    );
    out
}

/// The header of [`row`]'s table.
pub const HEADER: &str = "| trace | steps | overloaded, Off | overloaded, Scale | longest overload, Off | longest overload, Scale | replica-hours ÷ needed, Off | replica-hours ÷ needed, Scale | Scale ÷ Off replica-hours |\n|---|---|---|---|---|---|---|---|---|";
