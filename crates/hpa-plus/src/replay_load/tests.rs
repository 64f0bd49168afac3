use super::summary::summarize;
use super::*;

/// Two days of hourly steps: 0.5 core at night, `peak` cores at 14:00.
fn hourly(peak: f64) -> String {
    let cpu: Vec<String> = (0..48)
        .map(|h| {
            if h % 24 == 14 {
                format!("{peak}")
            } else {
                "0.5".into()
            }
        })
        .collect();
    cpu.join(", ")
}

fn scenario(mode: &str, min: i32, cpu: &str, extra: &str) -> String {
    format!(
        "kind: LoadReplay
autoscaler:
  apiVersion: autoscaling.plimsoll.dev/v1alpha1
  kind: HorizontalPodAutoscalerPlus
  metadata: {{name: web, annotations: {{plimsoll.dev/min-replicas-tuning: '{mode}'}}}}
  spec:
    scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}
    minReplicas: {min}
    maxReplicas: 20
    metrics: [{{type: Resource, resource: {{name: cpu, target: {{type: Utilization, averageUtilization: 50}}}}}}]
{extra}containers: [{{name: app, requests: {{cpu: '1'}}}}]
podStartupSeconds: 60
stepSeconds: 3600
load:
  cpu: [{cpu}]
"
    )
}

fn run(text: &str) -> LoadReplay {
    replay_load_str(text, Path::new(".")).unwrap()
}

#[test]
fn the_annotation_turns_tuning_on_and_one_day_of_lookback_lowers_min() {
    let text = scenario("apply", 6, &hourly(1.5), "").replace(
        "    minReplicas: 6\n",
        "    minReplicas: 6\n    minReplicasTuning: {mode: Apply, lookbackDays: 1}\n",
    );
    let r = run(&text);
    assert_eq!(r.steps.len(), 48);
    // Nothing before a full day of samples.
    assert!(r.steps[..23].iter().all(|s| s.min_replicas == 6));
    // The day's peak, 1.5 cores at 50 % of 1 CPU, needs 3.
    assert!(
        r.steps[23..].iter().all(|s| s.min_replicas == 3),
        "{:?}",
        r.steps[23].tuning
    );
    let lowered = r
        .steps
        .iter()
        .filter(|s| s.tuning.as_ref().is_some_and(|t| t.apply))
        .count();
    assert_eq!(lowered, 1, "applied once");
    // The annotation alone (lookback 7 by default) has not seen 7 days yet.
    let r = run(&scenario("apply", 6, &hourly(1.5), ""));
    assert!(r.steps.iter().all(|s| s.min_replicas == 6));
    assert_eq!(
        r.steps[47].tuning.as_ref().unwrap().reason.as_str(),
        "NotEnoughHistory"
    );
}

#[test]
fn utilization_counts_only_ready_pods_and_pods_take_startup_to_be_ready() {
    // One pod at 1 core: 100 % of its request; the HPA wants 2; the new pod is not Ready for
    // 60 s, so the next hour's step sees both Ready.
    let text = scenario("off", 1, "1, 1, 1", "");
    let r = run(&text);
    let first = &r.steps[0];
    assert_eq!(
        (first.replicas, first.ready_replicas, first.cpu_request),
        (2, 1, 1000)
    );
    assert_eq!(first.utilization, Some(100.0));
    assert_eq!(first.changed.as_deref(), Some("replicas"));
    let second = &r.steps[1];
    assert_eq!(
        (
            second.ready_replicas,
            second.utilization,
            second.changed.as_deref()
        ),
        (2, Some(50.0), None)
    );
    assert!(
        r.steps
            .iter()
            .all(|s| s.tuning.is_none() && s.min_replicas == 1)
    );
}

#[test]
fn bad_input_names_the_field() {
    let err = |text: &str| {
        replay_load_str(text, Path::new("."))
            .unwrap_err()
            .to_string()
    };
    let e = err(&scenario("off", 1, "1, -2", ""));
    assert!(e.contains("load.cpu[1]"), "{e}");
    let e = err(&scenario(
        "off",
        1,
        "1",
        "vpa: {kind: VerticalPodAutoscaler}\n",
    ));
    assert!(e.contains("vpa: ") && e.contains("missing field"), "{e}");
    let e = err(&scenario("off", 1, "1", &vpa("Recreate", "yes")));
    assert!(e.contains("plimsoll.dev/horizontal-aware"), "{e}");
    let e = err(&scenario("off", 1, "1", "predictive: {}\n"));
    assert!(
        e.contains("predictive: ") && e.contains("not supported yet"),
        "{e}"
    );
    let e = err(&scenario("sometimes", 1, "1", ""));
    assert!(e.contains("plimsoll.dev/min-replicas-tuning"), "{e}");
    let e = err(&scenario("off", 1, "1", "").replace("stepSeconds: 3600", "stepSeconds: 0"));
    assert!(e.contains("stepSeconds"), "{e}");
    let e = err(&scenario("off", 1, "1", "").replace("  cpu: [1]\n", "  csv: absent.csv\n"));
    assert!(e.contains("load.csv"), "{e}");
}

/// Files that would run for hours or overflow the replay's clock are refused up front, each
/// naming its field.
#[test]
fn a_trace_too_long_or_too_far_out_is_refused_before_it_runs() {
    let err = |text: String| {
        replay_load_str(&text, Path::new("."))
            .unwrap_err()
            .to_string()
    };
    let base = scenario("off", 1, "1, 2", "");
    let e = err(base.replace("stepSeconds: 3600", "stepSeconds: 1e20"));
    assert!(e.contains("stepSeconds") && e.contains("within"), "{e}");
    // 5,000,000 evaluations at 15 s are 75,000,000 s: two steps of 40,000,000 s are more.
    let e = err(base.replace("stepSeconds: 3600", "stepSeconds: 40000000"));
    assert!(e.contains("load.cpu") && e.contains("evaluations"), "{e}");
    // The same span at an hour's period is 22,222 evaluations, and runs.
    let hourly = base
        .replace("stepSeconds: 3600", "stepSeconds: 40000000")
        .replace(
            "containers:",
            "controller: {syncPeriodSeconds: 3600}\ncontainers:",
        );
    assert_eq!(run(&hourly).steps.len(), 2);
    // Two billion pods of a milli-core each would be held one by one.
    let e =
        err(scenario("off", 1, "1, 1e9", "").replace("maxReplicas: 20", "maxReplicas: 2147483647"));
    assert!(e.contains("autoscaler.spec.maxReplicas"), "{e}");
    let e = err(base.replace("podStartupSeconds: 60", "podStartupSeconds: 1e300"));
    assert!(e.contains("podStartupSeconds"), "{e}");
    let cores = |v: f64, _: &str| Ok((v * 1000.0) as i64);
    let e = csv_samples("t,cpu\n0,1\n1e300,2\n", cores)
        .unwrap_err()
        .to_string();
    assert!(e.contains("load.csv line 3") && e.contains("within"), "{e}");
}

#[test]
fn csv_rows_must_have_the_header_and_increasing_t() {
    let cores = |v: f64, _: &str| Ok((v * 1000.0) as i64);
    let rows = csv_samples("t,cpu,memory\n0,1.5,1Gi\n300,2,1Gi\n", cores).unwrap();
    assert_eq!(rows[1].cpu, 2000);
    assert_eq!(rows[0].memory, Some(1024 * 1024 * 1024 * 1000));
    let e = csv_samples("time,cpu\n0,1\n", cores)
        .unwrap_err()
        .to_string();
    assert!(e.contains("header") && e.contains("\"time\""), "{e}");
    let e = csv_samples("cpu,memory\n1,1Gi\n", cores)
        .unwrap_err()
        .to_string();
    assert!(e.contains("must name the columns t and cpu"), "{e}");
    // Lines are counted in the file, blank ones included, as an editor shows them.
    let e = csv_samples("t,cpu\n0,1\n\n0,2\n", cores)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("load.csv line 4") && e.contains("increase"),
        "{e}"
    );
}

/// What spreadsheet and Prometheus exports add around the same data reads as the plain file.
#[test]
fn csv_exports_read_as_the_plain_file() {
    let cores = |v: f64, _: &str| Ok((v * 1000.0) as i64);
    let plain = csv_samples("t,cpu,memory\n0,1.5,1Gi\n300,2,2Gi\n", cores).unwrap();
    for text in [
        "\u{feff}t,cpu,memory\r\n0,1.5,1Gi\r\n300,2,2Gi\r\n",
        "\"t\",\"cpu\",\"memory\"\n\"0\",\"1.5\",\"1Gi\"\n\n300 , 2 , 2Gi\n\n",
        "T,CPU,Memory\n0,1.5,1Gi\n300,2,2Gi\n",
        "memory,cpu,t\n1Gi,1.5,0\n2Gi,2,300\n",
    ] {
        let rows = csv_samples(text, cores).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(
            rows.iter()
                .map(|r| (r.t, r.cpu, r.memory))
                .collect::<Vec<_>>(),
            plain
                .iter()
                .map(|r| (r.t, r.cpu, r.memory))
                .collect::<Vec<_>>(),
            "{text:?}"
        );
    }
    let e = csv_samples("t,cpu,memroy\n0,1,1Gi\n", cores)
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"memroy\""), "{e}");
    let e = csv_samples("t,cpu,CPU\n0,1,2\n", cores)
        .unwrap_err()
        .to_string();
    assert!(e.contains("column cpu twice"), "{e}");
}

/// [`scenario`] with `spec.predictive` set to `settings`.
fn predictive(settings: &str, peak: f64) -> String {
    scenario("off", 1, &hourly(peak), "").replace(
        "    maxReplicas: 20\n",
        &format!("    maxReplicas: 20\n    predictive: {settings}\n"),
    )
}

/// [`predictive`] over three days, each point held until the next.
fn predictive_days(settings: &str) -> String {
    let cpu: Vec<String> = (0..72)
        .map(|h| {
            if h % 24 == 14 {
                "4".into()
            } else {
                "0.5".to_owned()
            }
        })
        .collect();
    predictive(settings, 4.0)
        .replace(&hourly(4.0), &cpu.join(", "))
        .replace("load:\n", "load:\n  interpolation: hold\n")
}

#[test]
fn spec_predictive_scale_raises_before_the_third_peak_and_off_does_not() {
    // 4 cores at 14:00 need 8 pods at 50 % of 1 CPU. A forecast counts once a past day's
    // window can be checked (from the third day); the lead is 60 s + one 15-minute bucket, so
    // the 14:00 bucket enters the window at 13:44, within the 13:00 step.
    let scale = replay_load_str(&predictive_days("{mode: Scale}"), Path::new(".")).unwrap();
    let off = replay_load_str(&predictive_days("{mode: \"Off\"}"), Path::new(".")).unwrap();
    let replicas = |r: &LoadReplay, h: usize| r.steps[h].replicas;
    for h in 0..61 {
        assert_eq!(replicas(&scale, h), replicas(&off, h), "hour {h}");
    }
    // 120 evaluations an hour; the default scale-up limit takes 1 -> 4 -> 8, Ready by 14:00.
    let before = &scale.steps[61];
    assert_eq!(
        (before.reconciles, before.changed.as_deref()),
        (240, Some("replicas"))
    );
    let p = before.predictive.clone().unwrap();
    assert_eq!(
        (p.reason.as_str(), p.acting),
        ("Raised", true),
        "{}",
        p.message
    );
    assert_eq!(
        (scale.steps[62].ready_replicas, scale.steps[62].utilization),
        (8, Some(50.0))
    );
    assert_eq!(scale.steps[62].predicted_replicas, Some(8));
    assert_eq!(scale.steps[62].forecast, Some(4.0));
    assert_eq!(off.steps[62].utilization, Some(400.0));
    assert!(off.steps.iter().all(|s| s.forecast.is_none()));
    // Report forecasts the same, and changes nothing.
    let report = replay_load_str(&predictive_days("{mode: Report}"), Path::new(".")).unwrap();
    assert!(
        report
            .steps
            .iter()
            .zip(&off.steps)
            .all(|(a, b)| a.replicas == b.replicas)
    );
    let p = report.steps[62].predictive.clone().unwrap();
    assert_eq!((p.reason.as_str(), p.acting), ("Reported", false));
}

#[test]
fn bad_predictive_settings_name_the_field() {
    let err = |settings: &str| {
        replay_load_str(&predictive(settings, 4.0), Path::new("."))
            .unwrap_err()
            .to_string()
    };
    let e = err("{mode: Scale, season: 168h, lookbackDays: 3}");
    assert!(
        e.contains("autoscaler.spec.predictive.lookbackDays") && e.contains("168h"),
        "{e}"
    );
    let e = err("{mode: Scale, leadSeconds: soon}");
    assert!(e.contains("leadSeconds"), "{e}");
}

/// A `vpa` block in `mode`, with the joint-mode annotation set to `aware` (`""`: none).
fn vpa(mode: &str, aware: &str) -> String {
    let annotations = if aware.is_empty() {
        String::new()
    } else {
        format!(", annotations: {{plimsoll.dev/horizontal-aware: '{aware}'}}")
    };
    format!(
        "vpa:
  apiVersion: autoscaling.k8s.io/v1
  kind: VerticalPodAutoscaler
  metadata: {{name: web{annotations}}}
  spec:
    targetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}
    updatePolicy: {{updateMode: {mode}}}
"
    )
}

/// Two days of 5-minute steps at 8 cores (16 pods of 1 CPU at 50 %), pods of 100m: a plain
/// HPA+ is pinned at 20.
fn joint(mode: &str, aware: &str) -> LoadReplay {
    let cpu = vec!["8"; 2 * 288].join(", ");
    let text = scenario("off", 2, &cpu, &vpa(mode, aware))
        .replace("stepSeconds: 3600", "stepSeconds: 300")
        .replace("{cpu: '1'}", "{cpu: 100m}");
    run(&text)
}

#[test]
fn joint_in_place_resizes_every_pod_at_the_step_the_request_changes() {
    let r = joint("InPlaceOrRecreate", "true");
    let first = &r.steps[0];
    // 8 cores within 16 replicas (0.8 × 20) at 50 % need 1000m: doubled past 1.2 × that.
    assert_eq!(first.cpu_request, 1200);
    assert_eq!(first.changed.as_deref(), Some("both"));
    assert_eq!(
        first.joint.as_ref().map(|j| j.reason.as_str()),
        Some("LearningDailyCycle")
    );
    // The HPA+ doubled to 4 pods at step 0's first evaluation, all with 1200m (the 2 old ones
    // resized in place, the 2 new ones created with it), and kept scaling every 15 s while
    // the new pods started: by step 1 it reached maxReplicas, and once the 300 s
    // stabilization let go it settled at the 14 pods 8 cores need at 50 % of 1200m.
    assert_eq!((r.steps[0].replicas, r.steps[0].reconciles), (4, 20));
    assert_eq!(r.steps[1].ready_replicas, 20);
    assert_eq!(r.steps[3].replicas, 14);
    assert_eq!(r.steps[3].utilization, Some(47.62));
    // Steady load: settled within the bounds, the request changes once more after a day (the
    // trough bound: 8 cores on 2 replicas allows 6666m), then never.
    let changes: Vec<f64> = r
        .steps
        .iter()
        .filter(|s| matches!(s.changed.as_deref(), Some("requests" | "both")))
        .map(|s| s.t)
        .collect();
    assert!(changes.len() <= 3, "{changes:?}");
    assert!(r.steps[300..].iter().all(|s| s.changed.is_none()));
    let last = r.steps.last().unwrap();
    assert!(
        (40.0..=60.0).contains(&last.utilization.unwrap()),
        "{last:?}"
    );
}

#[test]
fn recreate_replaces_stale_pods_half_at_a_time_and_off_changes_nothing() {
    let r = joint("Recreate", "true");
    // Step 0: the HPA+ doubles to 4 pods of 100m, then the request changes to 1200m; with 2
    // pods not Ready (half of 4) the updater replaces none yet, and the HPA+ keeps scaling
    // with 1200m pods. Step 1's first evaluation still sees 4 pods of 100m beside 16 of 1200m.
    let s1 = &r.steps[1];
    assert!(s1.ready_replicas <= s1.replicas);
    // Utilization counts the requests each Ready pod has: mixed during the rollout, so it is
    // not what one request for every Ready pod would give.
    let uniform =
        |s: &LoadLine| 8000.0 * 100.0 / (f64::from(s.ready_replicas) * s.cpu_request as f64);
    let mixed = r.steps[1..6]
        .iter()
        .any(|s| s.utilization.is_some_and(|u| (u - uniform(s)).abs() > 1.0));
    assert!(mixed, "{:?}", &r.steps[..6]);
    let last = r.steps.last().unwrap();
    assert!(
        (40.0..=60.0).contains(&last.utilization.unwrap()),
        "{last:?}"
    );
    let off = joint("\"Off\"", "true");
    assert!(off.steps.iter().all(|s| s.cpu_request == 100));
    assert!(off.steps[10..].iter().all(|s| s.replicas == 20));
    assert!(off.steps.iter().all(|s| s.joint.is_some()));
}

#[test]
fn without_the_annotation_the_plain_recommender_sizes_pods_to_their_usage() {
    let r = joint("InPlaceOrRecreate", "");
    assert!(r.steps.iter().all(|s| s.joint.is_none()));
    // Pinned at 20 pods of 100m, each uses 400m: the recommender raises the request.
    let last = r.steps.last().unwrap();
    assert!(last.cpu_request > 400, "{last:?}");
}

/// [`scenario`] at 5-minute steps with the load held from point to point.
fn five_minutes(cpu: &str) -> String {
    scenario("off", 2, cpu, "")
        .replace("stepSeconds: 3600", "stepSeconds: 300")
        .replace("load:\n", "load:\n  interpolation: hold\n")
}

#[test]
fn the_default_scale_down_stabilization_holds_over_a_five_minute_step() {
    // 6.5 cores need 13 pods at 50 % of 1 CPU; from 900 s 0.5 core needs 1 (minReplicas 2).
    // The controller, evaluating every 15 s, keeps the highest recommendation of the last
    // 300 s: the last one for 13 was made at 885 s, so the 13 are held until 1185 s, the
    // step's last evaluation. (Deciding once per step, the previous recommendation was exactly
    // 300 s old at 900 s and the replicas fell 13 -> 2 at once.)
    let r = run(&five_minutes("6.5, 6.5, 6.5, 0.5, 0.5, 0.5"));
    assert_eq!(r.steps[2].replicas, 13, "{:?}", r.steps[2]);
    let drop = &r.steps[3];
    assert_eq!((drop.replicas, drop.reconciles), (13, 20));
    assert_eq!(drop.utilization, Some(3.85));
    assert_eq!(drop.changed.as_deref(), Some("replicas"));
    assert!(
        (drop.replica_seconds - (13.0 * 285.0 + 2.0 * 15.0)).abs() < 1e-6,
        "{drop:?}"
    );
    assert_eq!(
        (r.steps[4].replicas, r.steps[4].changed.as_deref()),
        (2, None)
    );
}

#[test]
fn the_load_is_interpolated_between_trace_points_unless_held() {
    // 1 core then 5: linear reaches 5 only at the second point, held jumps at it. Each step
    // shows the highest utilization any of its 20 evaluations saw.
    let held = run(&five_minutes("1, 5, 5"));
    let linear = run(&five_minutes("1, 5, 5").replace("  interpolation: hold\n", ""));
    // The first step: 2 pods of 1 CPU carry 1 core (50 %) all along when held; on the line
    // the load rises toward 5 cores within the step, and the HPA+ scales while it does.
    assert_eq!(held.steps[0].peak_utilization, Some(50.0));
    assert!(
        linear.steps[0].peak_utilization.unwrap() > 60.0,
        "{:?}",
        linear.steps[0]
    );
    assert_eq!(linear.steps[0].changed.as_deref(), Some("replicas"));
    assert!(held.steps[0].changed.is_none());
    // Held, 5 cores arrive at once at 2 pods: 250 %.
    assert_eq!(held.steps[1].utilization, Some(250.0));
    assert!(held.steps.iter().all(|s| s.reconciles == 20));
}

/// The reactive path reaches `podStartupSeconds` and a sync period ahead (75 s here): an
/// overload after a rise past 1.5 × within that is out of its reach, whatever it asked for; an
/// overload after a slower one is not.
#[test]
fn an_overload_after_a_rise_faster_than_a_pod_can_start_is_out_of_reach() {
    let linear = |cpu: &str| run(&five_minutes(cpu).replace("  interpolation: hold\n", ""));
    // 1 → 4 cores over a step: 2 pods of 1 CPU carry 1.5 at 75 % (1.5 × the 50 % target),
    // passed at 50 s, and the pod asked for at 15 s is Ready at 75 s. The evaluation at 60 s
    // is overloaded after a rise from 1 core to 1.6: out of reach. Later overloads (2.5 cores
    // on 3 pods at 150 s) come after slower rises (2.5 against 1.75 75 s before).
    let fast = linear("1, 4, 4");
    let first = &fast.steps[0];
    assert!(first.peak_utilization.unwrap() > 75.0, "{first:?}");
    assert!((first.overload_rise - 1.6).abs() < 1e-9, "{first:?}");
    assert_eq!(summarize(&fast.steps, 0.0).out_of_reach_steps, 1);
    // Held, the step from 1 to 5 cores jumps at its first second: 5 × the load 75 s before.
    let held = run(&five_minutes("1, 5, 5"));
    assert!(
        (held.steps[1].overload_rise - 5.0).abs() < 1e-9,
        "{:?}",
        held.steps[1]
    );
    assert_eq!(summarize(&held.steps, 0.0).out_of_reach_steps, 1);
    // A load past what `maxReplicas` (20 pods of 1 CPU) carry at 75 %, 15 cores, rising a
    // core every 5 minutes: overloaded from the start, and never out of reach.
    let capped = linear("14, 15, 16, 17, 18");
    let summary = summarize(&capped.steps, 0.0);
    assert!(summary.overloaded_steps >= 3, "{:?}", capped.steps);
    assert_eq!(summary.out_of_reach_steps, 0, "{:?}", capped.steps);
}

/// `--from`/`--to` are checked against the span before the replay runs; it must be the span the
/// replay then reports, for a list of samples and for a CSV.
#[test]
fn the_span_read_from_the_trace_is_the_replays_span() {
    let text = scenario("off", 2, &hourly(1.5), "");
    assert_eq!(span_str(&text, Path::new(".")).unwrap(), run(&text).span());
    assert_eq!(run(&text).span(), (0.0, 48.0 * 3600.0));
    let dir = std::env::temp_dir().join(format!("plimsoll-span-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("t.csv"), "t,cpu\n600,1\n1200,2\n2400,1.5\n").unwrap();
    let text = scenario("off", 2, "1", "").replace("  cpu: [1]\n", "  csv: t.csv\n");
    let from_csv = replay_load_str(&text, &dir).unwrap().span();
    assert_eq!(span_str(&text, &dir).unwrap(), from_csv);
    assert_eq!(from_csv, (600.0, 2400.0 + 3600.0));
    std::fs::remove_dir_all(&dir).unwrap();
}
