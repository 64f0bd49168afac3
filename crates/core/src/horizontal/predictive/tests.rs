//! Hand-computed vectors for the forecast and its confidence rule, [`raise`] against the
//! reactive decision, and the invariant that a prediction never lowers what the reactive path
//! chose.

use jiff::Timestamp;
use proptest::prelude::*;

use super::*;
use crate::api::hpa_plus::{HpaScalingRules, MetricSpec, MetricTarget, Season};
use crate::horizontal::observation::ContainerSample;
use crate::horizontal::{DecisionInput, History, decide};

/// 2026-01-01T00:00:00Z.
const DAY0: i64 = 1_767_225_600;
const DAY: i64 = 86_400;
const STEP: i64 = 300;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(DAY0 + second).unwrap()
}

/// Seconds into day `day` at `hh:mm`.
fn clock(day: i64, hh: i64, mm: i64) -> i64 {
    day * DAY + hh * 3600 + mm * 60
}

/// 2 cores, 12 cores from 09:00 to 12:00 (millicores).
fn rush(second: i64) -> i64 {
    let of_day = second.rem_euclid(DAY);
    if (9 * 3600..12 * 3600).contains(&of_day) {
        12_000
    } else {
        2_000
    }
}

/// A `cpu` series of 5-minute buckets from `from` to `to` seconds (both included), `load` at
/// each.
fn series(from: i64, to: i64, load: impl Fn(i64) -> i64) -> LoadSeries {
    let mut s = LoadSeries::new(STEP);
    for t in (from..=to).step_by(STEP as usize) {
        s.record("cpu", at(t), load(t), 40 * DAY);
    }
    s
}

/// `Scale` with a daily season (the vectors below are days).
fn scale() -> Predictive {
    Predictive {
        mode: PredictiveMode::Scale,
        season: Season::Day,
        ..Predictive::default()
    }
}

/// CPU at 60 % of a 500m request (0.3 core per pod), 2..60 replicas.
fn spec() -> HorizontalPodAutoscalerPlusSpec {
    HorizontalPodAutoscalerPlusSpec::test()
        .min(2)
        .max(60)
        .metric(MetricSpec::resource("cpu", MetricTarget::utilization(60)))
}

fn pod() -> PodSample {
    PodSample {
        containers: vec![ContainerSample {
            name: "app".into(),
            requests: [("cpu".to_owned(), 500)].into(),
            ..ContainerSample::default()
        }],
        ..PodSample::default()
    }
}

/// The forecast at `now` seconds, pods starting in 600 s.
fn forecast_at(series: &LoadSeries, settings: &Predictive, now: i64) -> Forecast {
    forecast(&ForecastInput {
        spec: &spec(),
        settings,
        series,
        pod: &pod(),
        config: &ControllerConfig::default(),
        startup_seconds: 600,
        now: at(now),
        fit: None,
        reads: &[],
    })
}

#[test]
fn settings_read_auto_or_whole_seconds_and_a_weekly_season_needs_a_week() {
    let read = |v: serde_json::Value| serde_json::from_value::<Predictive>(v);
    let p = read(serde_json::json!({"mode": "Scale"})).unwrap();
    assert_eq!(
        (p.mode, p.lookback_days(), p.season, p.lead_seconds),
        (PredictiveMode::Scale, 7, Season::Auto, LeadSeconds::Auto)
    );
    for (lead, expected) in [
        (serde_json::json!("auto"), LeadSeconds::Auto),
        (serde_json::json!(null), LeadSeconds::Auto),
        (serde_json::json!(900), LeadSeconds::Seconds(900)),
        (serde_json::json!("900"), LeadSeconds::Seconds(900)),
    ] {
        let p = read(serde_json::json!({"leadSeconds": lead})).unwrap();
        assert_eq!(p.lead_seconds, expected, "{lead}");
        if lead.is_number() || lead == "auto" {
            assert_eq!(serde_json::to_value(&p).unwrap()["leadSeconds"], lead);
        }
    }
    for bad in [serde_json::json!(-1), serde_json::json!("soon")] {
        let e = read(serde_json::json!({"leadSeconds": bad})).unwrap_err();
        assert!(e.to_string().contains("whole number of seconds"), "{e}");
    }
    let weekly = read(serde_json::json!({"season": "168h", "lookbackDays": 3})).unwrap();
    assert_eq!(weekly.season, Season::Week);
    let spec = HorizontalPodAutoscalerPlusSpec {
        predictive: Some(weekly),
        ..spec()
    };
    let e = spec.validate().unwrap_err().to_string();
    assert!(
        e.contains("spec.predictive.lookbackDays") && e.contains("must be >= 7 with season 168h"),
        "{e}"
    );
}

#[test]
fn the_median_is_the_middle_value() {
    for (values, expected) in [
        (&[][..], None),
        (&[5][..], Some(5)),
        (&[9, 1][..], Some(5)),
        (&[3, 1, 2][..], Some(2)),
        (&[4, 1, 3, 2][..], Some(2)),
        (&[7, 1, 6, 2, 5, 3, 4][..], Some(4)),
        (&[12, 12, 30, 12, 12, 2, 12][..], Some(12)),
        (&[i64::MAX, i64::MAX][..], Some(i64::MAX)),
    ] {
        assert_eq!(median(values), expected, "{values:?}");
    }
}

#[test]
fn candidate_seasons_lead_and_retention() {
    let mut p = scale();
    assert_eq!(candidates(&p), [(DAY, 7)]);
    p.season = Season::Week;
    p.lookback_days = Some(14);
    assert_eq!(candidates(&p), [(7 * DAY, 2)]);
    p.lookback_days = Some(3);
    assert_eq!(
        candidates(&p),
        [(7 * DAY, 1)],
        "never fewer than one season"
    );
    p.season = Season::Auto;
    p.lookback_days = None;
    assert_eq!(candidates(&p), [(DAY, 7), (7 * DAY, 1)]);
    assert_eq!(keep_seconds(&scale()), 8 * DAY);
    assert_eq!(
        keep_seconds(&p),
        14 * DAY,
        "auto: a week to forecast from, one to check"
    );
    assert_eq!(
        lead_seconds(&scale(), 600, 300),
        900,
        "auto: startup + a step"
    );
    p.lead_seconds = LeadSeconds::Seconds(60);
    assert_eq!(lead_seconds(&p, 600, 300), 60);
}

#[test]
fn the_forecast_meets_the_rush_before_it_arrives() {
    // A week of rushes; on day 7 the lead is 900 s and the window [now, now + 900 s].
    for (hh, mm, load, replicas) in [
        (8, 0, 2_000, 7),
        (8, 40, 2_000, 7),
        // 08:45 + 900 s = 09:00: the window reaches the rush's first bucket.
        (8, 45, 12_000, 40),
        (10, 0, 12_000, 40),
        (11, 55, 12_000, 40),
        (12, 0, 2_000, 7),
    ] {
        let now = clock(7, hh, mm);
        let s = series(0, now, rush);
        let f = forecast_at(&s, &scale(), now);
        assert_eq!(f.lead_seconds, 900);
        let m = &f.metrics[0];
        assert_eq!(
            (m.load, m.replicas, f.replicas, m.error_percent),
            (Some(load), Some(replicas), Some(replicas), Some(0.0)),
            "{hh}:{mm}"
        );
        assert!(m.confident);
    }
}

#[test]
fn a_history_of_i64_max_peaks_forecasts_the_most_replicas_not_a_panic() {
    // A native HPA's history comes back from an annotation its tenant may write: any load.
    let now = clock(7, 8, 45);
    let loads: [fn(i64) -> i64; 2] = [
        |t| if rush(t) > 2_000 { i64::MAX } else { 2_000 },
        |_| i64::MAX,
    ];
    for load in loads {
        let f = forecast_at(&series(0, now, load), &scale(), now);
        let m = &f.metrics[0];
        assert_eq!((m.load, m.replicas), (Some(i64::MAX), Some(i32::MAX)));
        assert_eq!(f.replicas, Some(i32::MAX));
    }
}

#[test]
fn one_unusual_day_neither_adds_nor_hides_a_rush() {
    let now = clock(7, 8, 45);
    // Day 3 had a rush three times as high, day 5 none at all.
    let odd = |t: i64| match t / DAY {
        3 if rush(t) > 2_000 => 36_000,
        5 => 2_000,
        _ => rush(t),
    };
    let f = forecast_at(&series(0, now, odd), &scale(), now);
    assert_eq!(f.metrics[0].load, Some(12_000));
    // A rush only once in the week is not forecast.
    let once = |t: i64| if t / DAY == 2 { rush(t) } else { 2_000 };
    let f = forecast_at(&series(0, now, once), &scale(), now);
    assert_eq!(f.metrics[0].load, Some(2_000));
}

#[test]
fn no_prediction_before_a_past_season_can_be_checked() {
    // One day of history: a forecast exists (yesterday), but nothing it can be checked on.
    let s = series(0, DAY, rush);
    let f = forecast_at(&s, &scale(), DAY);
    assert_eq!(
        (f.replicas, f.reason, f.metrics[0].load),
        (None, PredictiveReason::NotEnoughHistory, Some(2_000))
    );
    assert!(
        f.message.contains("less than two daily seasons"),
        "{}",
        f.message
    );
    // Two days: yesterday's window, forecast from the day before, is checked.
    let s = series(0, 2 * DAY, rush);
    let f = forecast_at(&s, &scale(), 2 * DAY);
    assert_eq!(
        (f.replicas, f.metrics[0].error_percent),
        (Some(7), Some(0.0))
    );
    // A weekly season waits for two weeks.
    let weekly = Predictive {
        season: Season::Week,
        ..scale()
    };
    let s = series(0, 13 * DAY, rush);
    assert_eq!(
        forecast_at(&s, &weekly, 13 * DAY).reason,
        PredictiveReason::NotEnoughHistory
    );
}

#[test]
fn the_error_at_this_time_of_past_seasons_decides_whether_the_forecast_counts() {
    // 2 cores, and from 09:00 to 10:00 a rush of `rush[d]` on day d; at 08:45 on day 7 the
    // window holds 09:00. Each past day's window is forecast from the days before it.
    let now = clock(7, 8, 45);
    for (rushes, confident) in [
        // Every day the same: exact.
        ([12_000; 7], true),
        // Two days of a different height: the median holds, the error stays small.
        (
            [12_000, 12_000, 6_000, 12_000, 12_000, 18_000, 12_000],
            true,
        ),
        // A rush of a different height each day: each forecast far off.
        ([2_000, 30_000, 2_000, 30_000, 2_000, 30_000, 2_000], false),
    ] {
        let load = |t: i64| {
            let of_day = t.rem_euclid(DAY);
            let day = usize::try_from(t / DAY).unwrap();
            if (9 * 3600..10 * 3600).contains(&of_day) {
                rushes.get(day).copied().unwrap_or(12_000)
            } else {
                2_000
            }
        };
        let s = series(0, now, load);
        let f = forecast_at(&s, &scale(), now);
        let m = &f.metrics[0];
        assert_eq!(m.confident, confident, "{rushes:?}: {:?}", m.error_percent);
        assert_eq!(f.replicas.is_some(), confident);
        if !confident {
            assert_eq!(f.reason, PredictiveReason::LargeError);
            assert!(
                f.message.contains("for this time of past seasons"),
                "{}",
                f.message
            );
        }
    }
    // The hours before the window do not count: a quiet night at a tenth of the usual load
    // leaves a morning rush that repeats exactly trusted (the old rule, the last 12 buckets,
    // switched it off here).
    let quiet = |t: i64| {
        if t > now - 3 * 3600 { 200 } else { rush(t) }
    };
    let f = forecast_at(&series(0, now, quiet), &scale(), now);
    assert!(f.metrics[0].confident, "{:?}", f.metrics[0]);
    assert_eq!(f.metrics[0].load, Some(12_000));
}

#[test]
fn auto_finds_a_weekly_season_from_the_history() {
    // Weekdays: 1 core at night, 12 from 05:30 to 07:00; weekends (days 5 and 6 of each week)
    // 4 cores at night and no rush. A daily median built from weekend nights over-forecasts
    // weekday nights; a week of history ago is exact.
    let commute = |t: i64| {
        let of_day = t.rem_euclid(DAY);
        let weekend = t.div_euclid(DAY).rem_euclid(7) >= 5;
        match (weekend, (5 * 3600 + 1800..7 * 3600).contains(&of_day)) {
            (true, _) => 4_000,
            (false, true) => 12_000,
            (false, false) => 1_000,
        }
    };
    let auto = Predictive {
        season: Season::Auto,
        ..scale()
    };
    // Monday of the third week, 05:15: the window reaches 05:30.
    let now = clock(14, 5, 15);
    let s = series(0, now, commute);
    let fitted = fit(&s, &auto, at(now));
    let chosen = &fitted.metrics["cpu"];
    assert_eq!(chosen.season_seconds, 7 * DAY, "{chosen:?}");
    assert_eq!(chosen.error_percent, Some(0.0));
    let f = forecast_at(&s, &auto, now);
    assert_eq!((f.metrics[0].load, f.replicas), (Some(12_000), Some(40)));
    assert!(f.message.contains("weekly"), "{}", f.message);
    // Before two weeks of history the week is not a candidate: daily.
    let early = series(0, clock(9, 5, 15), commute);
    assert_eq!(
        fit(&early, &auto, at(clock(9, 5, 15))).metrics["cpu"].season_seconds,
        DAY
    );
}

#[test]
fn the_series_keeps_the_highest_value_per_bucket_and_drops_old_ones() {
    let mut s = LoadSeries::new(STEP);
    s.record("cpu", at(0), 5, 600);
    s.record("cpu", at(100), 9, 600);
    s.record("cpu", at(200), 7, 600);
    assert_eq!(s.at("cpu", (DAY0) / STEP), Some(9));
    s.record("cpu", at(1200), 1, 600);
    assert_eq!(s.oldest("cpu"), Some((DAY0 + 1200) / STEP));
    assert_eq!(
        s.at("cpu", DAY0 / STEP),
        None,
        "more than 600 s before the newest"
    );
    assert_eq!(s.level("cpu", (DAY0 + 1200) / STEP), Some(1));
}

#[test]
fn a_bucket_level_is_its_mean_and_without_one_its_peak() {
    let mut s = LoadSeries::new(STEP);
    for v in [1_000, 3_000, 2_000] {
        s.record("cpu", at(0), v, DAY);
    }
    let bucket = DAY0 / STEP;
    assert_eq!(
        (s.at("cpu", bucket), s.level("cpu", bucket)),
        (Some(3_000), Some(2_000))
    );
    // A status written before means were kept: the peaks stand in.
    let mut stored = s.store();
    stored.means.clear();
    let old = LoadSeries::try_restore(&stored, STEP).unwrap();
    assert_eq!(old.level("cpu", bucket), Some(3_000));
}

#[test]
fn off_forecasts_nothing() {
    let s = series(0, clock(7, 8, 40), rush);
    let f = forecast_at(&s, &Predictive::default(), clock(7, 8, 40));
    assert_eq!((f.replicas, f.reason), (None, PredictiveReason::Off));
    assert!(f.metrics.is_empty());
}

/// The reactive decision at [`crate::horizontal::tests`]'s fixed time over `current` ready pods
/// each using `usage` millicores of a 500m request.
fn reactive(
    spec: &HorizontalPodAutoscalerPlusSpec,
    current: i32,
    usage: i64,
) -> (Observation, Decision) {
    let pods = (0..current)
        .map(|i| PodSample::test(&format!("p-{i}")).cpu(500, Some(usage)))
        .collect();
    let observed = Observation::test(current, pods);
    let d = decide(&DecisionInput {
        spec,
        observed: &observed,
        history: &History::default(),
        config: &ControllerConfig::default(),
        now: now(),
    });
    (observed, d)
}

fn now() -> Timestamp {
    "2026-03-01T12:00:00Z".parse().unwrap()
}

/// A confident forecast needing `replicas`.
fn predicting(replicas: i32) -> Forecast {
    Forecast {
        metrics: Vec::new(),
        replicas: Some(replicas),
        lead_seconds: 900,
        reason: PredictiveReason::BelowReactive,
        message: format!("the load forecast for the next 900s needs {replicas} replicas"),
    }
}

fn raise_with(
    spec: &HorizontalPodAutoscalerPlusSpec,
    settings: &Predictive,
    current: i32,
    usage: i64,
    forecast: &Forecast,
) -> (Decision, Raise) {
    let (observed, d) = reactive(spec, current, usage);
    let r = raise(&RaiseInput {
        spec,
        settings,
        observed: &observed,
        config: &ControllerConfig::default(),
        decision: &d,
        forecast,
        now: now(),
    });
    (d, r)
}

#[test]
fn scale_raises_through_the_scale_up_limits_and_gates() {
    let report = Predictive {
        mode: PredictiveMode::Report,
        ..scale()
    };
    let paused = HorizontalPodAutoscalerPlusSpec {
        paused: true,
        ..spec()
    };
    let policy = spec().scale_up(HpaScalingRules::window(0).pods(4, 60));
    // 7 pods at 285m of 500m: 57 % of requests, within tolerance of 60 %: the reactive path
    // keeps 7.
    for (name, spec, settings, predicted, scale_to, acting, reason) in [
        // The default limit doubles (upstream's max(2 × current, 4)).
        (
            "scale",
            spec(),
            scale(),
            40,
            Some(14),
            true,
            PredictiveReason::Raised,
        ),
        (
            "within the limit",
            spec(),
            scale(),
            9,
            Some(9),
            true,
            PredictiveReason::Raised,
        ),
        (
            "maxReplicas",
            spec().max(10),
            scale(),
            40,
            Some(10),
            true,
            PredictiveReason::Raised,
        ),
        (
            "policy",
            policy,
            scale(),
            40,
            Some(11),
            true,
            PredictiveReason::Raised,
        ),
        (
            "report",
            spec(),
            report,
            40,
            None,
            false,
            PredictiveReason::Reported,
        ),
        (
            "paused",
            paused,
            scale(),
            40,
            None,
            false,
            PredictiveReason::Raised,
        ),
        (
            "below",
            spec(),
            scale(),
            6,
            None,
            false,
            PredictiveReason::BelowReactive,
        ),
    ] {
        let (d, r) = raise_with(&spec, &settings, 7, 285, &predicting(predicted));
        assert_eq!(
            (d.desired_replicas, d.scale_to),
            (7, None),
            "{name}: {}",
            d.reason
        );
        assert_eq!(
            (r.scale_to, r.acting, r.reason),
            (scale_to, acting, reason),
            "{name}: {}",
            r.message
        );
    }
    let (_, r) = raise_with(&spec().max(10), &scale(), 7, 285, &predicting(40));
    assert_eq!(
        r.message,
        "the load forecast for the next 900s needs 40 replicas; raises the reactive 7 to 10"
    );
}

#[test]
fn a_prediction_only_softens_a_reactive_scale_down() {
    // 10 pods at 20 % of requests: the reactive path wants 4 (default stabilization has no
    // earlier recommendation to hold it).
    let (d, r) = raise_with(&spec(), &scale(), 10, 100, &predicting(6));
    assert_eq!(d.scale_to, Some(4), "{}", d.reason);
    assert_eq!(
        (r.scale_to, r.desired_replicas, r.acting),
        (Some(6), 6, true)
    );
    let (_, r) = raise_with(&spec(), &scale(), 10, 100, &predicting(10));
    assert_eq!(
        (r.scale_to, r.desired_replicas, r.acting),
        (None, 10, true),
        "holds"
    );
    // Above the current count it is a scale-up like any other: max(reactive, predicted).
    let (_, r) = raise_with(&spec(), &scale(), 10, 100, &predicting(12));
    assert_eq!((r.scale_to, r.desired_replicas), (Some(12), 12));
}

#[test]
fn the_status_shows_forecast_error_and_whether_it_acted() {
    let now = clock(7, 8, 45);
    let f = forecast_at(&series(0, now, |t| rush(t) + 500), &scale(), now);
    let r = Raise {
        scale_to: Some(14),
        desired_replicas: 14,
        acting: true,
        reason: PredictiveReason::Raised,
        message: "raised".into(),
    };
    let status = predictive_status(&f, &r);
    assert_eq!(status.forecast.as_deref(), Some("cpu: 12500m"));
    assert_eq!(
        (
            status.forecast_replicas,
            status.recent_error_percent,
            status.acting
        ),
        (Some(42), Some(0), true)
    );
    assert_eq!(status.reason, "Raised");
}

proptest! {
    /// Whatever the forecast, the replicas written are never below the reactive decision's,
    /// never above `maxReplicas` unless the reactive path already was, and a forecast that needs
    /// no more than the reactive decision changes nothing.
    #[test]
    fn a_prediction_never_lowers_the_reactive_replicas(
        current in 1i32..40,
        usage in 0i64..2_000,
        predicted in 1i32..100,
        max in 1i32..60,
        report in any::<bool>(),
    ) {
        let spec = spec().min(1).max(max.max(current));
        let settings = Predictive {
            mode: if report { PredictiveMode::Report } else { PredictiveMode::Scale },
            ..scale()
        };
        let (d, r) = raise_with(&spec, &settings, current, usage, &predicting(predicted));
        let reactive = d.scale_to.unwrap_or(current);
        let written = r.scale_to.unwrap_or(current);
        prop_assert!(written >= reactive, "{reactive} -> {written}: {}", r.message);
        prop_assert!(r.desired_replicas >= d.desired_replicas);
        prop_assert!(written <= reactive.max(spec.max_replicas));
        if report || predicted <= d.desired_replicas {
            prop_assert_eq!((r.scale_to, r.desired_replicas, r.acting), (d.scale_to, d.desired_replicas, false));
        }
    }
}

/// [`rush`] plus up to 4 cores of noise per 5-minute step, a sequence fixed by `seed`.
fn noisy_rush(seed: u64, t: i64) -> i64 {
    let x = u64::try_from(t / STEP)
        .unwrap_or(0)
        .wrapping_add(seed)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    rush(t) + i64::try_from((x >> 40) % 4_000).unwrap_or(0)
}

proptest! {
    /// A forecast that is given an earlier forecast's reads of the same series (the controller
    /// keeps them for a bucket) says exactly what one that reads everything says: a read is
    /// used again only for its own metric, window and season. The earlier forecast may have
    /// looked ahead by another startup (another window) or at another time of the same day.
    #[test]
    fn reads_kept_from_an_earlier_forecast_change_nothing(
        seed in any::<u64>(),
        days in 2i64..10,
        minute in 0i64..1_440,
        earlier_minute in 0i64..1_440,
        (startup, earlier_startup) in (0i64..3_600, 0i64..3_600),
        weekly in any::<bool>(),
    ) {
        let now = days * DAY + minute * 60;
        let history = series(0, days * DAY, |t| noisy_rush(seed, t));
        let settings = Predictive {
            season: if weekly { Season::Auto } else { Season::Day },
            ..scale()
        };
        let (spec, pod, config) = (spec(), pod(), ControllerConfig::default());
        let input = |now: i64, startup_seconds, reads| ForecastInput {
            spec: &spec,
            settings: &settings,
            series: &history,
            pod: &pod,
            config: &config,
            startup_seconds,
            now: at(now),
            fit: None,
            reads,
        };
        let earlier = days * DAY + earlier_minute * 60;
        let (_, reads) = forecast_reading(&input(earlier, earlier_startup, &[]));
        let (fresh, fresh_reads) = forecast_reading(&input(now, startup, &[]));
        let (kept, kept_reads) = forecast_reading(&input(now, startup, &reads));
        let (again, _) = forecast_reading(&input(now, startup, &fresh_reads));
        prop_assert_eq!(&kept, &fresh);
        prop_assert_eq!(&again, &fresh);
        prop_assert_eq!(kept_reads, fresh_reads);
    }
}

/// [`season_error`] as its docs define it: each bucket's level against [`seasonal_level`] of
/// its one-bucket window (what the fit computed before it read the levels by bucket).
fn season_error_by_definition(
    series: &LoadSeries,
    (season, n): (i64, usize),
    through: i64,
) -> Option<f64> {
    let step = series.step_seconds();
    let first = through.saturating_sub(FIT_DAYS * DAY_SECONDS / step) + 1;
    let (mut error, mut total) = (0i128, 0i128);
    for bucket in first..=through {
        let actual = series.level("cpu", bucket);
        let forecast = seasonal_level(series, "cpu", (bucket, bucket), season / step, n);
        if let (Some(a), Some(f)) = (actual, forecast) {
            error += (i128::from(a) - i128::from(f)).abs();
            total += i128::from(a).abs();
        }
    }
    (total > 0).then(|| error as f64 * 100.0 / total as f64)
}

proptest! {
    /// The fit's error of a season is the same whether each past level is searched for or read
    /// by bucket: over histories with gaps, buckets backfilled without a mean (Prometheus's
    /// peaks), and a history shorter than the seasons read.
    #[test]
    fn the_fit_reads_the_levels_the_forecast_reads(
        seed in any::<u64>(),
        days in 1i64..20,
        n in 1usize..10,
        weekly in any::<bool>(),
        gap_every in 2i64..50,
        backfilled in 0i64..(3 * DAY / STEP),
    ) {
        let mut history = LoadSeries::new(STEP);
        for (i, t) in (0..=days * DAY).step_by(STEP as usize).enumerate() {
            let i = i64::try_from(i).unwrap_or(0);
            if i % gap_every == 0 {
                continue;
            }
            let load = noisy_rush(seed, t);
            if i < backfilled {
                history.peaks_mut().record("cpu", at(t), load, 40 * DAY / STEP);
            } else {
                history.record("cpu", at(t), load, 40 * DAY);
                history.record("cpu", at(t), load / 2, 40 * DAY);
            }
        }
        let season = (if weekly { WEEK_SECONDS } else { DAY_SECONDS }, n);
        let through = history.newest("cpu").unwrap_or(0);
        prop_assert_eq!(
            season_error(&history, "cpu", season, through),
            season_error_by_definition(&history, season, through)
        );
    }
}

#[test]
fn store_then_restore_is_the_same_series() {
    let mut s = LoadSeries::new(900);
    s.record("rps", at(0), 1_200, 8 * DAY);
    s.record("rps", at(1_800), 1_300, 8 * DAY);
    s.record("cpu", at(900), -5, 8 * DAY);
    let stored = s.store();
    let base = DAY0 / 900;
    assert_eq!(
        (stored.step_seconds, stored.base_bucket),
        (Some(900), Some(base))
    );
    assert_eq!(stored.metrics["rps"], [0, 1_200, 2, 1_300]);
    assert_eq!(stored.metrics["cpu"], [1, -5]);
    assert_eq!(stored.means["rps"], [0, 1_200, 2, 1_300]);
    let mut restored = LoadSeries::try_restore(&stored, 900).unwrap();
    restored.restore_means(&stored);
    assert_eq!(restored, s);
    // Stored with another step, the buckets would mean other times: nothing is restored.
    assert_eq!(
        LoadSeries::try_restore(&stored, 300),
        Err(StoredStateError::OtherStep {
            field: "history.stepSeconds",
            stored: 900,
            expected: 300
        })
    );
    // An empty series stores and restores as empty.
    let empty = LoadSeries::new(900);
    assert_eq!(LoadSeries::try_restore(&empty.store(), 900), Ok(empty));
}

#[test]
fn a_hostile_series_is_ignored_whole() {
    let series = |base_bucket, list: Vec<i64>| StoredPeakSeries {
        step_seconds: Some(900),
        base_bucket,
        metrics: BTreeMap::from([("rps".to_owned(), list)]),
        ..StoredPeakSeries::default()
    };
    let field = "history.metrics";
    // The example: `newest - bucket` of a hand-written series overflowed.
    let overflow = series(Some(i64::MIN / 2), vec![0, 1, i64::MAX, 1]);
    assert_eq!(
        LoadSeries::try_restore(&overflow, 900),
        Err(StoredStateError::BadPosition { field })
    );
    let claims = series(Some(0), [1, 1].repeat(max_buckets(900) + 1));
    assert!(matches!(
        LoadSeries::try_restore(&claims, 900),
        Err(StoredStateError::TooLong { .. })
    ));
    assert_eq!(
        LoadSeries::try_restore(&series(Some(0), vec![5, 1, -1, 2]), 900),
        Err(StoredStateError::BadPosition { field })
    );
    assert_eq!(
        LoadSeries::try_restore(&series(None, vec![5, 1]), 900),
        Err(StoredStateError::Missing {
            field: "history.baseBucket"
        })
    );
    // Extreme loads read back, and recording and forecasting over them does not overflow.
    let base = DAY0 / 900;
    let mut s =
        LoadSeries::try_restore(&series(Some(base), vec![0, i64::MIN, 96, i64::MAX]), 900).unwrap();
    s.record("rps", at(DAY), i64::MIN, 8 * DAY);
    let settings = Predictive::default();
    let _ = fit(&s, &settings, at(DAY));
}

#[test]
fn the_longest_settings_keep_at_most_max_buckets() {
    for lookback_days in 1..=30 {
        for season in [Season::Day, Season::Week, Season::Auto] {
            let settings = Predictive {
                lookback_days: Some(lookback_days),
                season,
                ..Predictive::default()
            };
            assert!(keep_seconds(&settings) <= MAX_KEEP_SECONDS, "{settings:?}");
        }
    }
}

#[test]
fn an_autoscalers_metrics_keep_at_most_max_buckets_per_object_together() {
    let longest = Predictive {
        lookback_days: Some(30),
        season: Season::Week,
        ..Predictive::default()
    };
    // Up to four metrics keep what their seasons need, whatever the settings.
    for metrics in 1..=4 {
        assert_eq!(keep_seconds_for(&longest, metrics), keep_seconds(&longest));
        assert_eq!(keep_seconds_for(&scale(), metrics), keep_seconds(&scale()));
    }
    // The default settings keep their 14 days for up to nine metrics.
    let auto = Predictive::default();
    assert_eq!(keep_seconds_for(&auto, 9), keep_seconds(&auto));
    for lookback_days in [1, 7, 14, 30] {
        for season in [Season::Day, Season::Week, Season::Auto] {
            let settings = Predictive {
                lookback_days: Some(lookback_days),
                season,
                ..Predictive::default()
            };
            for metrics in [1usize, 5, 16, 32] {
                let keep = keep_seconds_for(&settings, metrics);
                let buckets = LoadSeries::new(BUCKET_SECONDS).keep_buckets(keep);
                let total = buckets * i64::try_from(metrics).unwrap_or(i64::MAX);
                assert!(
                    total <= MAX_BUCKETS_PER_OBJECT,
                    "{settings:?} x {metrics}: {total}"
                );
                assert!(keep <= keep_seconds(&settings));
            }
        }
    }
    // 32 metrics at the longest settings: 420 buckets each, about 4.4 days, not 35.
    let keep = keep_seconds_for(&longest, 32);
    assert_eq!(LoadSeries::new(BUCKET_SECONDS).keep_buckets(keep), 420);
}

#[test]
fn the_ended_series_leaves_out_the_open_bucket_only() {
    let mut s = LoadSeries::new(900);
    s.record("rps", at(0), 1, DAY);
    s.record("rps", at(900), 2, DAY);
    s.record("rps", at(1_000), 3, DAY);
    let ended = s.ended(at(1_000));
    assert_eq!(ended.points("rps"), [(DAY0 / 900, 1)]);
    assert_eq!(s.ended(at(1_800)), s, "at the next bucket both have ended");
    assert_eq!(s.newest("rps"), Some(DAY0 / 900 + 1));
    assert_eq!(s.bucket_at(at(1_799)), DAY0 / 900 + 1);
}

proptest! {
    /// However many samples arrive, a metric keeps at most 769 buckets of 15 minutes with the
    /// default settings, and its stored JSON stays within the documented bound.
    #[test]
    fn the_stored_series_is_bounded(
        samples in proptest::collection::vec((0i64..3_000, any::<i64>()), 1..900),
    ) {
        let keep = keep_seconds(&scale());
        let mut s = LoadSeries::new(900);
        let mut sorted = samples;
        sorted.sort_by_key(|x| x.0);
        for (bucket, value) in sorted {
            s.record("cpu", at(bucket * 900), value, keep);
        }
        prop_assert!(s.points("cpu").len() <= 769);
        let json = serde_json::to_string(&s.store().metrics).unwrap();
        prop_assert!(json.len() <= BOUND_BYTES_PER_METRIC_7_DAYS, "{}", json.len());
        let restored = LoadSeries::try_restore(&s.store(), 900).unwrap();
        prop_assert_eq!(restored.points("cpu"), s.points("cpu"));
    }
}

#[test]
fn the_startup_time_is_the_median_of_the_most_recently_ready_pods() {
    let pod = |created: i64, ready_at: Option<i64>| PodStart {
        started: Some(at(created)),
        ready_at: ready_at.map(at),
    };
    assert_eq!(startup_seconds([]), None);
    // Not Ready yet: nothing measured.
    assert_eq!(startup_seconds([pod(0, None)]), None);
    // 30, 40 and one slow start of 300: the median ignores it.
    let pods = [pod(0, Some(30)), pod(100, Some(140)), pod(200, Some(500))];
    assert_eq!(startup_seconds(pods), Some(40));
    // A Ready transition hours after creation is a readiness flap, not a start.
    let flapped = [pod(0, Some(30)), pod(0, Some(30 + MAX_STARTUP_SECONDS))];
    assert_eq!(startup_seconds(flapped), Some(30));
    // Only the most recent STARTUP_SAMPLES count: twelve old 10 s starts, then ten of 60 s.
    let mut many: Vec<PodStart> = (0..12).map(|i| pod(i, Some(i + 10))).collect();
    many.extend((0..10).map(|i| pod(1_000 + i, Some(1_060 + i))));
    assert_eq!(startup_seconds(many), Some(60));
}

#[test]
fn a_forecast_is_worth_it_when_the_rise_it_had_ready_pays_for_what_it_held_for_nothing() {
    // (ahead, unneeded, lag, hold, overload weight w, worth it): replica-time ahead of rises
    // (ahead × lag × w) against replica-time held for nothing (unneeded × hold).
    for (ahead, unneeded, lag, hold, w, worth) in [
        (0, 0, 75, 1275, 1, true),
        (10_000, 0, 75, 1275, 1, true),
        (0, 1, 75, 1275, 1, false),
        (0, 1, 75, 1275, 100, false),
        (17_000, 1_000, 75, 1275, 1, true),
        (16_999, 1_000, 75, 1275, 1, false),
        (1_000, 1_000, 600, 600, 1, true),
        (1_000, 1_000, 75, 1275, 16, false),
        (1_000, 1_000, 75, 1275, 17, true),
    ] {
        let check = PhaseCheck {
            error_percent: Some(10.0),
            ahead,
            unneeded,
        };
        assert_eq!(
            check.worth_it(lag, hold, w),
            worth,
            "{ahead} ahead, {unneeded} unneeded"
        );
    }
}

#[test]
fn noise_is_acted_on_only_when_pods_start_slowly_enough_to_pay_for_it() {
    // 2 cores plus up to 8 cores of noise per bucket (a fixed pseudo-random sequence): the
    // window's peak over past days is usually above the level before it, so the forecast
    // has some rise ready and holds some load for nothing. Pods ready in a minute: the
    // reactive path catches up soon, and the held load costs more. Pods ready in ten
    // minutes: the rise it had ready is worth ten minutes of overload each time.
    let noise = |t: i64| {
        let mut x = u64::try_from(t / STEP)
            .unwrap()
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^= x >> 29;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 32;
        2_000 + i64::try_from(x % 8_000).unwrap()
    };
    let now = clock(7, 8, 45);
    let run = |series: &LoadSeries, startup_seconds| {
        forecast(&ForecastInput {
            spec: &spec(),
            settings: &scale(),
            series,
            pod: &pod(),
            config: &ControllerConfig::default(),
            startup_seconds,
            now: at(now),
            fit: None,
            reads: &[],
        })
    };
    let history = series(0, now, noise);
    let quick = run(&history, 60);
    let m = &quick.metrics[0];
    assert!(!m.worth_it && !m.confident, "{m:?}");
    assert!(
        m.error_percent.is_some_and(|e| e <= MAX_ERROR_PERCENT),
        "{m:?}"
    );
    assert_eq!(
        (quick.replicas, quick.reason),
        (None, PredictiveReason::CostsMore)
    );
    assert!(quick.message.contains("for nothing"), "{}", quick.message);
    let slow = run(&history, 600);
    assert!(slow.metrics[0].confident, "{:?}", slow.metrics[0]);
    // A clean rush at the same time is acted on with quick pods too: it had its rise ready
    // every day and held nothing for nothing.
    let f = run(&series(0, now, rush), 60);
    assert!(
        f.metrics[0].confident && f.metrics[0].unneeded == 0,
        "{:?}",
        f.metrics[0]
    );
}

/// Three metrics of memory in milli (2 GiB: 13 digits) over 30 days: every bucket ended but
/// the one `now` falls in.
fn large_values(days: i64) -> (LoadSeries, Timestamp) {
    let mut s = LoadSeries::new(BUCKET_SECONDS);
    let end = days * DAY;
    for t in (0..end).step_by(usize::try_from(BUCKET_SECONDS).unwrap_or(900)) {
        for (i, metric) in ["a", "b", "c"].into_iter().enumerate() {
            let value = 2_147_483_648_000 + t + i64::try_from(i).unwrap_or(0);
            s.record(metric, at(t), value, MAX_KEEP_SECONDS);
        }
    }
    (s, at(end))
}

fn ended_bytes(s: &LoadSeries, now: Timestamp) -> usize {
    stored_bytes(&s.ended(now).store())
}

#[test]
fn a_history_past_its_bytes_keeps_the_newest_buckets_that_fit() {
    let (mut s, now) = large_values(30);
    let before = ended_bytes(&s, now);
    assert!(
        before > NATIVE_HISTORY_BYTES * 2,
        "the bucket bound alone lets this take {before} bytes"
    );
    let newest = s.newest("a");
    assert!(s.fit_stored(now, NATIVE_HISTORY_BYTES));
    let after = ended_bytes(&s, now);
    assert!(after <= NATIVE_HISTORY_BYTES, "{after}");
    // The newest buckets stay, every metric from the same bucket on.
    assert_eq!(s.newest("a"), newest);
    let oldest = s.oldest("a");
    assert!(oldest.is_some());
    assert_eq!(s.oldest("b"), oldest);
    assert_eq!(s.oldest("c"), oldest);
    // No more is forgotten than needed: one bucket more would not fit.
    let (mut full, _) = large_values(30);
    full.forget_before(oldest.unwrap_or_default() - 1);
    assert!(ended_bytes(&full, now) > NATIVE_HISTORY_BYTES);
    // What fits is left alone.
    let kept = s.clone();
    assert!(!s.fit_stored(now, NATIVE_HISTORY_BYTES));
    assert_eq!(s, kept);
    // A successor restores exactly what this one forecasts from.
    let stored = s.ended(now).store();
    let mut restored = LoadSeries::try_restore(&stored, BUCKET_SECONDS).unwrap();
    restored.restore_means(&stored);
    assert_eq!(restored.store(), stored);
}

proptest! {
    // Each case builds and stores up to 20 days of three metrics a dozen times.
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn a_fitted_history_takes_at_most_its_bytes(
        days in 1i64..20,
        bytes in 64usize..200_000,
    ) {
        let (mut s, now) = large_values(days);
        let before = ended_bytes(&s, now);
        let forgot = s.fit_stored(now, bytes);
        prop_assert_eq!(forgot, before > bytes);
        prop_assert!(ended_bytes(&s, now) <= bytes);
    }
}
