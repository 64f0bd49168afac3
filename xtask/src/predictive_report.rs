//! `cargo run -p xtask -- predictive-report [DIR…]` (`just predictive-report`): for every
//! trace with an `*-off.yaml` and an `*-scale.yaml` `LoadReplay` in each DIR (default
//! `scenarios/`), the table of docs/hpa-plus.md "Predictive scaling" (Off against Scale:
//! overloaded steps, longest overload, replica-hours against what the load needed, from the
//! second week on), whether issue 31's bound holds on each, what `minReplicasTuning` would
//! have proposed and cost on the same trace, and what a lower target or a higher
//! `minReplicas` costs to halve Off's overload. Every number comes from `hpa-plus`'s own replay
//! (`plimsoll_hpa_plus::replay_load`), so the report shows what the controller would do.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use plimsoll_hpa_plus::replay_load::summary::{
    Expect, HEADER, OVERLOAD_FACTOR, Summary, check, row, summarize,
};
use plimsoll_hpa_plus::replay_load::{LoadReplay, replay_load_str};

/// The report counts steps from the second week on: before it a 7-day lookback has not seen
/// a week (and Scale decides as Off on the first days).
const FROM: f64 = 7.0 * 86_400.0;

/// The `(name, off, scale)` scenario pairs of `dir`, by name.
fn pairs(dir: &Path) -> anyhow::Result<Vec<(String, PathBuf, PathBuf)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix("-off.yaml"))
        else {
            continue;
        };
        let scale = dir.join(format!("{name}-scale.yaml"));
        if scale.exists() {
            out.push((name.to_owned(), path.clone(), scale));
        }
    }
    out.sort();
    Ok(out)
}

fn replay(path: &Path, text: &str) -> anyhow::Result<LoadReplay> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    replay_load_str(text, dir).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// The scenario at `path`, parsed.
fn scenario(path: &Path) -> anyhow::Result<serde_json::Value> {
    let text = std::fs::read_to_string(path)?;
    serde_saphyr::from_str(&text).with_context(|| format!("{} is not YAML", path.display()))
}

/// The scenario at `path` as JSON with `edit` applied to its autoscaler.
fn edited(path: &Path, edit: impl FnOnce(&mut serde_json::Value)) -> anyhow::Result<String> {
    let mut value = scenario(path)?;
    edit(&mut value["autoscaler"]);
    Ok(serde_json::to_string(&value)?)
}

/// minReplicasTuning on the trace: the static `minReplicas` that covers the Off replay's
/// highest replicas, against the same with `minReplicasTuning: {mode: Apply}` from it.
fn tuning(name: &str, off_path: &Path, off: &LoadReplay) -> anyhow::Result<String> {
    let peak = off.steps.iter().map(|s| s.replicas).max().unwrap_or(1);
    let with = |apply: bool| {
        edited(off_path, |a| {
            a["spec"]["minReplicas"] = peak.into();
            if apply {
                a["spec"]["minReplicasTuning"] = serde_json::json!({"mode": "Apply"});
            }
        })
    };
    let fixed = replay(off_path, &with(false)?)?;
    let tuned = replay(off_path, &with(true)?)?;
    let proposals: Vec<String> = tuned
        .steps
        .iter()
        .filter(|s| s.tuning.as_ref().is_some_and(|t| t.apply))
        .map(|s| format!("{} on day {:.1}", s.min_replicas, s.t / 86_400.0))
        .collect();
    let (a, b) = (summarize(&fixed.steps, FROM), summarize(&tuned.steps, FROM));
    Ok(format!(
        "| {name} | {peak} | {} | {:.0} → {:.0} ({:+.1} %) | {} → {} |",
        if proposals.is_empty() {
            "none".to_owned()
        } else {
            proposals.join(", ")
        },
        a.replica_hours,
        b.replica_hours,
        percent_more(b.replica_hours, a.replica_hours),
        a.overloaded_steps,
        b.overloaded_steps,
    ))
}

/// The CPU target of the trace scenarios, percent.
const SCENARIO_TARGET: i32 = 60;

/// The target utilizations [`by_target`] tries, percent, highest first.
const HEADROOM_TARGETS: [i32; 7] = [55, 50, 45, 40, 35, 30, 25];

/// The report's [`by_floor`] stops raising `minReplicas` once the replay costs more than this
/// many times Off's replica-hours: past it the floor is no lever worth a row.
const FLOOR_COST_LIMIT: f64 = 1.5;

/// A lever that halves Off's overloaded steps without a forecast: the setting (a cell), the
/// overloaded steps there and the replica-hours against Off's, percent. `None` when no
/// setting tried halves them.
type Halved = Option<(String, usize, f64)>;

fn percent_more(this: f64, off: f64) -> f64 {
    (this / off.max(f64::MIN_POSITIVE) - 1.0) * 100.0
}

/// The highest CPU target (of [`HEADROOM_TARGETS`]) at which the reactive path alone has at
/// most half of Off's overloaded steps: headroom in proportion to the load.
fn by_target(off_path: &Path, off: &Summary, from: f64) -> anyhow::Result<Halved> {
    for target in HEADROOM_TARGETS {
        let text = edited(off_path, |a| {
            a["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] = target.into();
        })?;
        let steps = replay(off_path, &text)?.steps;
        let lower = summarize(&steps, from);
        // Overloaded against the scenario's own target: what a pod can take does not change
        // when the autoscaler aims lower.
        let overloaded = steps
            .iter()
            .filter(|s| s.t >= from)
            .filter(|s| {
                s.peak_utilization
                    .is_some_and(|u| u > OVERLOAD_FACTOR * f64::from(SCENARIO_TARGET))
            })
            .count();
        if overloaded * 2 <= off.overloaded_steps {
            let cost = percent_more(lower.replica_hours, off.replica_hours);
            return Ok(Some((format!("{target} %"), overloaded, cost)));
        }
    }
    Ok(None)
}

/// The lowest `minReplicas` above the scenario's at which the reactive path alone has at
/// most half of Off's overloaded steps: the same replicas added at any load, which is cheap
/// where bursts start from a quiet floor. Raised one at a time until it halves them, costs
/// more than `cost_limit` × Off's replica-hours or reaches `maxReplicas`.
fn by_floor(off_path: &Path, off: &Summary, from: f64, cost_limit: f64) -> anyhow::Result<Halved> {
    let off_scenario = scenario(off_path)?;
    let spec = &off_scenario["autoscaler"]["spec"];
    let lowest = spec["minReplicas"].as_u64().unwrap_or(1);
    let highest = spec["maxReplicas"].as_u64().unwrap_or(lowest);
    for floor in lowest + 1..=highest {
        let text = edited(off_path, |a| a["spec"]["minReplicas"] = floor.into())?;
        let raised = summarize(&replay(off_path, &text)?.steps, from);
        if raised.replica_hours > cost_limit * off.replica_hours {
            break;
        }
        if raised.overloaded_steps * 2 <= off.overloaded_steps {
            let cost = percent_more(raised.replica_hours, off.replica_hours);
            return Ok(Some((floor.to_string(), raised.overloaded_steps, cost)));
        }
    }
    Ok(None)
}

/// What halving Off's overloaded steps costs without a forecast, by a lower target and by a
/// higher `minReplicas`. `None` when Off has no overloaded step.
fn headroom(name: &str, off_path: &Path, off: &Summary) -> anyhow::Result<Option<String>> {
    if off.overloaded_steps == 0 {
        return Ok(None);
    }
    let cells = |halved: Halved, none: String| match halved {
        Some((setting, overloaded, cost)) => format!("{setting} | {overloaded} | {cost:+.1} %"),
        None => format!("{none} | – | –"),
    };
    let target = cells(
        by_target(off_path, off, FROM)?,
        format!("below {} %", HEADROOM_TARGETS[HEADROOM_TARGETS.len() - 1]),
    );
    let floor = cells(
        by_floor(off_path, off, FROM, FLOOR_COST_LIMIT)?,
        format!("none within {:+.0} %", (FLOOR_COST_LIMIT - 1.0) * 100.0),
    );
    Ok(Some(format!(
        "| {name} | {} | {} | {target} | {floor} |",
        off.overloaded_steps, off.out_of_reach_steps
    )))
}

/// Issue 31's bound on Scale against Off: at most half of Off's overloaded steps (none when
/// Off has none) for at most 10 % more replica-hours. The replay's own `expect` check judges
/// it, so the report and a scenario's `expect` cannot disagree.
fn bound() -> Expect {
    Expect {
        overloaded_steps_vs_baseline_at_most: Some(0.5),
        replica_hours_vs_baseline_at_most: Some(1.1),
        ..Expect::default()
    }
}

/// The report's line on [`bound`]: on how many traces it holds, and what each other misses.
fn verdict(misses: &[(String, Vec<String>)]) -> String {
    let failing: Vec<&(String, Vec<String>)> =
        misses.iter().filter(|(_, m)| !m.is_empty()).collect();
    let mut out = format!(
        "Issue 31's bound (Scale at most half of Off's overloaded steps, none when Off has none, for at most 1.1 × its replica-hours) holds on {} of {}",
        misses.len() - failing.len(),
        misses.len()
    );
    if failing.is_empty() {
        out.push('.');
    } else {
        out.push_str("; it misses on:\n");
        for (name, m) in failing {
            let _ = write!(out, "\n- {name}: {}", m.join("; "));
        }
    }
    out
}

/// Prints the report for the pairs in `dirs`.
pub fn run(dirs: &[PathBuf]) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    let mut tunings = Vec::new();
    let mut timings = Vec::new();
    let mut headrooms = Vec::new();
    let mut misses = Vec::new();
    for dir in dirs {
        let found = pairs(dir)?;
        if found.is_empty() {
            bail!(
                "no *-off.yaml with a *-scale.yaml twin in {}",
                dir.display()
            );
        }
        for (name, off_path, scale_path) in found {
            let started = Instant::now();
            let off = replay(&off_path, &std::fs::read_to_string(&off_path)?)?;
            timings.push((name.clone(), off.steps.len(), started.elapsed()));
            let scale = replay(&scale_path, &std::fs::read_to_string(&scale_path)?)?;
            let (a, b): (Summary, Summary) =
                (summarize(&off.steps, FROM), summarize(&scale.steps, FROM));
            rows.push(row(&name, &a, &b));
            misses.push((name.clone(), check(&bound(), &b, Some(&a))));
            tunings.push(tuning(&name, &off_path, &off)?);
            headrooms.extend(headroom(&name, &off_path, &a)?);
        }
    }
    println!(
        "Off against Scale, steps from day 7 on (overloaded: an evaluation above 1.5 × the CPU target):\n"
    );
    println!("{HEADER}");
    for r in rows {
        println!("{r}");
    }
    println!("\n{}", verdict(&misses));
    println!(
        "\nminReplicasTuning (Apply, 7 days) from a static minReplicas that covers the Off replay's highest replicas, from day 7 on:\n"
    );
    println!(
        "| trace | static minReplicas | lowered to | replica-hours, static → tuned | overloaded steps, static → tuned |\n|---|---|---|---|---|"
    );
    for t in tunings {
        println!("{t}");
    }
    println!(
        "\nWhat halving Off's overloaded steps costs without a forecast, from day 7 on: how many of them were out of the reactive path's reach (the load rose past 1.5 × itself within the pods' startup and a sync period, so only capacity already there could carry it), the highest CPU target at which the reactive path alone has at most half of them (overloaded still against the scenario's {SCENARIO_TARGET} %), and the lowest minReplicas that does:\n"
    );
    println!(
        "| trace | overloaded steps, Off | out of reach | target | overloaded steps there | replica-hours vs Off | minReplicas | overloaded steps there | replica-hours vs Off |\n|---|---|---|---|---|---|---|---|---|"
    );
    for h in headrooms {
        println!("{h}");
    }
    println!("\nOff replay time (this build):\n");
    for (name, steps, took) in timings {
        println!("- {name}: {steps} steps in {:.2} s", took.as_secs_f64());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Half a day at 5-minute steps of `quiet` cores, and every seventh step a burst to `burst`.
    fn bursts(dir: &Path, quiet: f64, burst: f64) -> anyhow::Result<PathBuf> {
        let load: Vec<String> = (0..144)
            .map(|i| if i % 7 == 6 { burst } else { quiet }.to_string())
            .collect();
        let text = format!(
            "kind: LoadReplay
autoscaler:
  apiVersion: autoscaling.plimsoll.dev/v1alpha1
  kind: HorizontalPodAutoscalerPlus
  metadata: {{name: bursts, namespace: default}}
  spec:
    scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: bursts}}
    minReplicas: 2
    maxReplicas: 100
    metrics:
      - type: Resource
        resource: {{name: cpu, target: {{type: Utilization, averageUtilization: {SCENARIO_TARGET}}}}}
containers:
  - {{name: app, requests: {{cpu: 500m, memory: 256Mi}}}}
podStartupSeconds: 60
stepSeconds: 300
load:
  cpu: [{}]
",
            load.join(", ")
        );
        let path = dir.join(format!("bursts-{quiet}-{burst}-off.yaml"));
        std::fs::write(&path, text)?;
        Ok(path)
    }

    fn summary(overloaded_steps: usize, replica_hours: f64) -> Summary {
        Summary {
            from: FROM,
            steps: 2016,
            overloaded_steps,
            out_of_reach_steps: 0,
            longest_overload_seconds: 0.0,
            replica_hours,
            needed_hours: None,
        }
    }

    #[test]
    fn the_bound_holds_at_half_the_overload_for_a_tenth_more_and_names_each_miss() {
        let off = summary(9, 100.0);
        let judged =
            |name: &str, scale: Summary| (name.to_owned(), check(&bound(), &scale, Some(&off)));
        let misses = vec![
            judged("halved", summary(4, 110.0)),
            judged("one-too-many", summary(5, 100.0)),
            judged("too-dear", summary(0, 110.5)),
            (
                "both-none".to_owned(),
                check(&bound(), &summary(0, 101.0), Some(&summary(0, 100.0))),
            ),
        ];
        let text = verdict(&misses);
        assert!(text.contains("holds on 2 of 4"), "{text}");
        assert!(
            text.contains("- one-too-many: expect: at most 0.5 × the baseline's 9 overloaded steps (4), got 5\n"),
            "{text}"
        );
        let mut out_of_reach = off.clone();
        out_of_reach.out_of_reach_steps = 7;
        assert_eq!(
            check(&bound(), &summary(5, 100.0), Some(&out_of_reach)),
            [
                "expect: at most 0.5 × the baseline's 9 overloaded steps (4), got 5; 7 of the baseline's were out of the reactive path's reach"
            ]
        );
        for (name, missed) in [
            ("halved", false),
            ("one-too-many", true),
            ("too-dear", true),
            ("both-none", false),
        ] {
            assert_eq!(
                text.contains(&format!("- {name}:")),
                missed,
                "{name}: {text}"
            );
        }
        let all = verdict(&misses[..1]);
        assert!(all.ends_with("holds on 1 of 1."), "{all}");
    }

    #[test]
    fn the_floor_found_is_the_lowest_that_halves_the_overload_within_the_limit()
    -> anyhow::Result<()> {
        let dir = std::env::temp_dir().join(format!("xtask-floor-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        // From 0.2 cores to 1.5, two and a half times what two pods of 500m carry at the 60 %
        // target: bursts from a floor.
        let path = bursts(&dir, 0.2, 1.5)?;
        let off = summarize(&replay(&path, &std::fs::read_to_string(&path)?)?.steps, 0.0);
        assert!(off.overloaded_steps >= 10, "{off:?}");

        let found = by_floor(&path, &off, 0.0, FLOOR_COST_LIMIT)?;
        let (floor, overloaded, cost) = found.clone().expect("a floor halves it");
        let floor: u64 = floor.parse()?;
        assert!(
            overloaded * 2 <= off.overloaded_steps,
            "{floor}: {overloaded}"
        );
        let below = edited(&path, |a| a["spec"]["minReplicas"] = (floor - 1).into())?;
        let below = summarize(&replay(&path, &below)?.steps, 0.0);
        assert!(
            below.overloaded_steps * 2 > off.overloaded_steps,
            "{} also halves it: {below:?}",
            floor - 1
        );
        assert!(cost > 0.0, "{cost}");

        // A limit just below what that floor costs finds none; just above, the same floor.
        let limit = 1.0 + cost / 100.0;
        assert_eq!(by_floor(&path, &off, 0.0, limit - 1e-3)?, None);
        assert_eq!(by_floor(&path, &off, 0.0, limit + 1e-3)?, found);
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
