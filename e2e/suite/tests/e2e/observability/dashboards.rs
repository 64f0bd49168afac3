//! The Grafana dashboards of `charts/plimsoll/dashboards/`, one per service, written from the
//! short descriptions below so that five dashboards share one layout, one set of variables and
//! one panel shape instead of five hand-edited JSON files drifting apart.
//!
//! Every dashboard has the variables `datasource` (a Prometheus data source), `namespace` (where
//! Plimsoll runs: the scrape target's namespace) and `pod` (its replicas, multi-valued). A
//! query writes `$sel` where those two belong; [`render`] expands it. Per-object series carry
//! the object's namespace in `exported_namespace`: the Prometheus Operator's scrape keeps the
//! target's `namespace` and renames the scraped one (the default `honorLabels: false`).
//!
//! `PLIMSOLL_UPDATE_DASHBOARDS=1 cargo test -p plimsoll-e2e --test e2e observability::` rewrites the
//! files; without it the test fails when a file differs from what is rendered here.

use serde_json::{Value, json};

/// One dashboard: the service it shows and its rows of panels.
pub struct Board {
    /// Binary name (`hpa-plus`): the file name, uid suffix and metric prefix.
    pub service: &'static str,
    /// What the service does, the dashboard's description.
    pub description: &'static str,
    /// Rows, top to bottom.
    pub rows: Vec<Row>,
}

/// A titled row of panels.
pub struct Row {
    title: &'static str,
    panels: Vec<Panel>,
}

/// One time-series panel.
pub struct Panel {
    title: &'static str,
    description: &'static str,
    unit: &'static str,
    /// `(query, legend)` pairs.
    queries: Vec<(&'static str, &'static str)>,
}

fn row(title: &'static str, panels: Vec<Panel>) -> Row {
    Row { title, panels }
}

fn panel(
    title: &'static str,
    unit: &'static str,
    description: &'static str,
    queries: &[(&'static str, &'static str)],
) -> Panel {
    Panel {
        title,
        description,
        unit,
        queries: queries.to_vec(),
    }
}

/// The selector every query is narrowed by.
const SELECTOR: &str = r#"namespace="$namespace", pod=~"$pod""#;

/// The five dashboards.
pub fn boards() -> Vec<Board> {
    vec![
        hpa_plus(),
        cron_hpa(),
        vpa_recommender(),
        vpa_updater(),
        vpa_admission(),
    ]
}

/// The leadership row every controller shares; `leader` is its `plimsoll_<binary>_leader`.
fn leadership(leader: &'static str, changes: &'static str) -> Row {
    row(
        "Leadership",
        vec![
            panel(
                "Leader",
                "short",
                "1 for the replica holding the leader-election Lease. Exactly one line at 1 is healthy.",
                &[(leader, "{{pod}}")],
            ),
            panel(
                "Leadership changes",
                "short",
                "Changes of the leader gauge over 15 minutes, all replicas together. Each handover counts twice (one replica leaves, another takes over).",
                &[(changes, "changes")],
            ),
        ],
    )
}

fn hpa_plus() -> Board {
    Board {
        service: "hpa-plus",
        description: "Horizontal autoscaling with HorizontalPodAutoscalerPlus objects: reconcile loop health, scaling decisions and the metrics each autoscaler sees.",
        rows: vec![
            hpa_plus_reconciles(),
            hpa_plus_decisions(),
            hpa_plus_per_autoscaler(),
            leadership(
                "max by (pod) (plimsoll_hpa_plus_leader{$sel})",
                "sum(changes(plimsoll_hpa_plus_leader{$sel}[15m]))",
            ),
        ],
    }
}

/// hpa-plus: the reconcile loop.
fn hpa_plus_reconciles() -> Row {
    row(
        "Reconciles",
        vec![
            panel(
                "Reconciles per second",
                "ops",
                "Reconciliations started, per replica (only the leader reconciles).",
                &[(
                    "sum by (pod) (rate(plimsoll_hpa_plus_reconcile_runs_total{$sel}[$__rate_interval]))",
                    "{{pod}}",
                )],
            ),
            panel(
                "Reconcile failures per second",
                "ops",
                "Failed reconciliations by error kind (kube, scale, metrics, …). See docs/runbooks.md#plimsollhpaplusreconcileerrors.",
                &[(
                    "sum by (error) (rate(plimsoll_hpa_plus_reconcile_failures_total{$sel}[$__rate_interval]))",
                    "{{error}}",
                )],
            ),
            panel(
                "Reconcile duration",
                "s",
                "Quantiles of one reconciliation's duration.",
                &[
                    (
                        "histogram_quantile(0.5, sum by (le) (rate(plimsoll_hpa_plus_reconcile_duration_seconds_bucket{$sel}[$__rate_interval])))",
                        "p50",
                    ),
                    (
                        "histogram_quantile(0.9, sum by (le) (rate(plimsoll_hpa_plus_reconcile_duration_seconds_bucket{$sel}[$__rate_interval])))",
                        "p90",
                    ),
                    (
                        "histogram_quantile(0.99, sum by (le) (rate(plimsoll_hpa_plus_reconcile_duration_seconds_bucket{$sel}[$__rate_interval])))",
                        "p99",
                    ),
                ],
            ),
            panel(
                "Queue depth and autoscalers",
                "short",
                "Autoscalers whose re-evaluation is due and has not started (should stay near 0), and autoscalers known.",
                &[
                    ("max(plimsoll_hpa_plus_queue_depth{$sel})", "queue depth"),
                    ("max(plimsoll_hpa_plus_objects{$sel})", "autoscalers"),
                ],
            ),
        ],
    )
}

/// hpa-plus: what the decisions did and what limited them.
fn hpa_plus_decisions() -> Row {
    row(
        "Decisions",
        vec![
            panel(
                "Scale writes per second",
                "ops",
                "Writes of the scale subresource, by direction.",
                &[(
                    "sum by (direction) (rate(plimsoll_hpa_plus_rescales_total{$sel}[$__rate_interval]))",
                    "{{direction}}",
                )],
            ),
            panel(
                "Status writes and metric failures per second",
                "ops",
                "Status writes (only when the status changed), and metrics that could not be evaluated, by reason.",
                &[
                    (
                        "sum(rate(plimsoll_hpa_plus_status_writes_total{$sel}[$__rate_interval]))",
                        "status writes",
                    ),
                    (
                        "sum by (type) (rate(plimsoll_hpa_plus_metric_failures_total{$sel}[$__rate_interval]))",
                        "metric failure: {{type}}",
                    ),
                ],
            ),
            panel(
                "Decided replicas",
                "short",
                "Replicas decided at each autoscaler's last evaluation (status.desiredReplicas).",
                &[(
                    "max by (exported_namespace, name) (plimsoll_hpa_plus_effective_replicas{$sel})",
                    "{{exported_namespace}}/{{name}}",
                )],
            ),
            panel(
                "Limited by",
                "short",
                "Autoscalers whose last decision was limited, by the rule that limited it (maxReplicas, a policy, a cooldown, …).",
                &[(
                    "sum by (reason) (max by (exported_namespace, name, reason) (plimsoll_hpa_plus_restricted_scaling{$sel}))",
                    "{{reason}}",
                )],
            ),
        ],
    )
}

/// hpa-plus: each autoscaler's metrics, proposals and countdowns.
fn hpa_plus_per_autoscaler() -> Row {
    row(
        "Metrics per autoscaler",
        vec![
            panel(
                "Value and target",
                "short",
                "Each metric's current value and its target, in the target's unit (utilization percent or the value's unit).",
                &[
                    (
                        "max by (exported_namespace, name, metric) (plimsoll_hpa_plus_value{$sel})",
                        "{{exported_namespace}}/{{name}} {{metric}}",
                    ),
                    (
                        "max by (exported_namespace, name, metric) (plimsoll_hpa_plus_target{$sel})",
                        "{{exported_namespace}}/{{name}} {{metric}} target",
                    ),
                ],
            ),
            panel(
                "Watermarks",
                "short",
                "Low and high watermark of each Watermark metric.",
                &[
                    (
                        "max by (exported_namespace, name, metric) (plimsoll_hpa_plus_low_watermark{$sel})",
                        "{{exported_namespace}}/{{name}} {{metric}} low",
                    ),
                    (
                        "max by (exported_namespace, name, metric) (plimsoll_hpa_plus_high_watermark{$sel})",
                        "{{exported_namespace}}/{{name}} {{metric}} high",
                    ),
                ],
            ),
            panel(
                "Proposals",
                "short",
                "Replicas each metric proposes before behavior and limits apply.",
                &[(
                    "max by (exported_namespace, name, metric) (plimsoll_hpa_plus_proposal{$sel})",
                    "{{exported_namespace}}/{{name}} {{metric}}",
                )],
            ),
            panel(
                "Cooldowns and delays left",
                "s",
                "Seconds before a forbidden window or a watermark delay lets a transition happen.",
                &[(
                    "max by (exported_namespace, name, transition) (plimsoll_hpa_plus_transition_countdown_seconds{$sel})",
                    "{{exported_namespace}}/{{name}} {{transition}}",
                )],
            ),
        ],
    )
}

fn cron_hpa() -> Board {
    Board {
        service: "cron-hpa",
        description: "Scheduled scaling with CronHorizontalPodAutoscaler objects: job firings, how late they run, and the reconcile loop.",
        rows: vec![
            row(
                "Jobs",
                vec![
                    panel(
                        "Job firings per second",
                        "ops",
                        "Job firings by result: succeeded, failed (a write failed), missed (passed more than --missed-job-grace ago), skipped (excluded date, or a runOnce job that already ran).",
                        &[(
                            "sum by (result) (rate(plimsoll_cron_hpa_job_runs_total{$sel}[$__rate_interval]))",
                            "{{result}}",
                        )],
                    ),
                    panel(
                        "Job lateness",
                        "s",
                        "From a firing's scheduled instant until its writes were sent (lateness), and until the controller started it (start delay: the controller's own share).",
                        &[
                            (
                                "histogram_quantile(0.5, sum by (le) (rate(plimsoll_cron_hpa_job_lateness_seconds_bucket{$sel}[$__rate_interval])))",
                                "lateness p50",
                            ),
                            (
                                "histogram_quantile(0.99, sum by (le) (rate(plimsoll_cron_hpa_job_lateness_seconds_bucket{$sel}[$__rate_interval])))",
                                "lateness p99",
                            ),
                            (
                                "histogram_quantile(0.99, sum by (le) (rate(plimsoll_cron_hpa_job_start_delay_seconds_bucket{$sel}[$__rate_interval])))",
                                "start delay p99",
                            ),
                        ],
                    ),
                    panel(
                        "Next run",
                        "dtdurations",
                        "Time until each job's next run, from the leader. A value below zero means a run is overdue.",
                        &[(
                            "max by (exported_namespace, name, job) (plimsoll_cron_hpa_job_next_run_timestamp_seconds{$sel} and on (namespace, pod) (plimsoll_cron_hpa_leader{$sel} == 1)) - time()",
                            "{{exported_namespace}}/{{name}} {{job}}",
                        )],
                    ),
                ],
            ),
            row(
                "Reconciles",
                vec![
                    panel(
                        "Reconciles per second",
                        "ops",
                        "Reconciliations started, per replica (only the leader reconciles).",
                        &[(
                            "sum by (pod) (rate(plimsoll_cron_hpa_reconcile_runs_total{$sel}[$__rate_interval]))",
                            "{{pod}}",
                        )],
                    ),
                    panel(
                        "Reconcile failures per second",
                        "ops",
                        "Failed reconciliations by error kind.",
                        &[(
                            "sum by (error) (rate(plimsoll_cron_hpa_reconcile_failures_total{$sel}[$__rate_interval]))",
                            "{{error}}",
                        )],
                    ),
                    panel(
                        "Reconcile duration",
                        "s",
                        "Quantiles of one reconciliation's duration.",
                        &[
                            (
                                "histogram_quantile(0.5, sum by (le) (rate(plimsoll_cron_hpa_reconcile_duration_seconds_bucket{$sel}[$__rate_interval])))",
                                "p50",
                            ),
                            (
                                "histogram_quantile(0.99, sum by (le) (rate(plimsoll_cron_hpa_reconcile_duration_seconds_bucket{$sel}[$__rate_interval])))",
                                "p99",
                            ),
                        ],
                    ),
                ],
            ),
            leadership(
                "max by (pod) (plimsoll_cron_hpa_leader{$sel})",
                "sum(changes(plimsoll_cron_hpa_leader{$sel}[15m]))",
            ),
        ],
    }
}

fn vpa_recommender() -> Board {
    Board {
        service: "vpa-recommender",
        description: "The VPA recommender: its loop, the VPAs and containers it models, checkpoints and errors.",
        rows: vec![
            row(
                "Loop",
                vec![
                    panel(
                        "Loops per second",
                        "ops",
                        "Recommender loops finished, per replica (only the leader loops; one per --recommender-interval).",
                        &[(
                            "sum by (pod) (rate(plimsoll_vpa_recommender_loop_duration_seconds_count{$sel}[$__rate_interval]))",
                            "{{pod}}",
                        )],
                    ),
                    panel(
                        "Loop duration",
                        "s",
                        "Quantiles of one loop's duration (read, model, status writes, checkpoints). It should stay well below --recommender-interval.",
                        &[
                            (
                                "histogram_quantile(0.5, sum by (le) (rate(plimsoll_vpa_recommender_loop_duration_seconds_bucket{$sel}[$__rate_interval])))",
                                "p50",
                            ),
                            (
                                "histogram_quantile(0.99, sum by (le) (rate(plimsoll_vpa_recommender_loop_duration_seconds_bucket{$sel}[$__rate_interval])))",
                                "p99",
                            ),
                        ],
                    ),
                    panel(
                        "VPAs and containers",
                        "short",
                        "VPAs served in the last loop and aggregates (VPA × container) held.",
                        &[
                            ("max(plimsoll_vpa_recommender_objects{$sel})", "VPAs"),
                            (
                                "max(plimsoll_vpa_recommender_containers{$sel})",
                                "containers",
                            ),
                        ],
                    ),
                ],
            ),
            row(
                "Writes and errors",
                vec![
                    panel(
                        "Writes per second",
                        "ops",
                        "VPA statuses written, checkpoints written and checkpoints garbage-collected.",
                        &[
                            (
                                "sum(rate(plimsoll_vpa_recommender_status_writes_total{$sel}[$__rate_interval]))",
                                "status writes",
                            ),
                            (
                                "sum(rate(plimsoll_vpa_recommender_checkpoint_writes_total{$sel}[$__rate_interval]))",
                                "checkpoint writes",
                            ),
                            (
                                "sum(rate(plimsoll_vpa_recommender_checkpoint_deletes_total{$sel}[$__rate_interval]))",
                                "checkpoint deletes",
                            ),
                        ],
                    ),
                    panel(
                        "Errors per second",
                        "ops",
                        "Errors by kind, and failed restores of the history when taking the Lease (each retried).",
                        &[
                            (
                                "sum by (kind) (rate(plimsoll_vpa_recommender_errors_total{$sel}[$__rate_interval]))",
                                "{{kind}}",
                            ),
                            (
                                "sum(rate(plimsoll_vpa_recommender_restore_failures_total{$sel}[$__rate_interval]))",
                                "restore failures",
                            ),
                        ],
                    ),
                ],
            ),
            leadership(
                "max by (pod) (plimsoll_vpa_recommender_leader{$sel})",
                "sum(changes(plimsoll_vpa_recommender_leader{$sel}[15m]))",
            ),
        ],
    }
}

fn vpa_updater() -> Board {
    Board {
        service: "vpa-updater",
        description: "The VPA updater: its loop, evictions and in-place resizes, and whether the admission webhook is healthy enough to act.",
        rows: vec![
            row(
                "Loop",
                vec![
                    panel(
                        "Loops per second",
                        "ops",
                        "Loops by outcome: completed, admission_unhealthy (the webhook's status Lease is stale: nothing done), error.",
                        &[(
                            "sum by (outcome) (rate(plimsoll_vpa_updater_loops_total{$sel}[$__rate_interval]))",
                            "{{outcome}}",
                        )],
                    ),
                    panel(
                        "Loop duration",
                        "s",
                        "Quantiles of one loop's duration, rate-limiter waits included.",
                        &[
                            (
                                "histogram_quantile(0.5, sum by (le) (rate(plimsoll_vpa_updater_loop_duration_seconds_bucket{$sel}[$__rate_interval])))",
                                "p50",
                            ),
                            (
                                "histogram_quantile(0.99, sum by (le) (rate(plimsoll_vpa_updater_loop_duration_seconds_bucket{$sel}[$__rate_interval])))",
                                "p99",
                            ),
                        ],
                    ),
                    panel(
                        "Acting VPAs and webhook status",
                        "short",
                        "VPAs in an acting update mode at the last loop, and 1 when the admission webhook's status Lease was fresh.",
                        &[
                            ("max(plimsoll_vpa_updater_vpas{$sel})", "acting VPAs"),
                            (
                                "max(plimsoll_vpa_updater_admission_status_valid{$sel})",
                                "webhook status valid",
                            ),
                        ],
                    ),
                ],
            ),
            row(
                "Decisions",
                vec![
                    panel(
                        "Evictions per second",
                        "ops",
                        "Eviction requests by result: evicted, blocked (a PodDisruptionBudget said 429), gone, error.",
                        &[(
                            "sum by (result) (rate(plimsoll_vpa_updater_evictions_total{$sel}[$__rate_interval]))",
                            "{{result}}",
                        )],
                    ),
                    panel(
                        "In-place resizes per second",
                        "ops",
                        "In-place resize requests by result: requested, refused (the pod is evicted instead, except in mode InPlace), infeasible and held_back (mode InPlace: values the node could not fit), error.",
                        &[(
                            "sum by (result) (rate(plimsoll_vpa_updater_resizes_total{$sel}[$__rate_interval]))",
                            "{{result}}",
                        )],
                    ),
                ],
            ),
            leadership(
                "max by (pod) (plimsoll_vpa_updater_leader{$sel})",
                "sum(changes(plimsoll_vpa_updater_leader{$sel}[15m]))",
            ),
        ],
    }
}

fn vpa_admission() -> Board {
    Board {
        service: "vpa-admission",
        description: "The VPA admission webhook: AdmissionReviews answered, their latency and errors, the status Lease the updater checks, and the serving certificate.",
        rows: vec![
            row(
                "Requests",
                vec![
                    panel(
                        "Reviews per second",
                        "reqps",
                        "AdmissionReviews answered, by resource and result.",
                        &[(
                            "sum by (resource, result) (rate(plimsoll_vpa_admission_requests_total{$sel}[$__rate_interval]))",
                            "{{resource}} {{result}}",
                        )],
                    ),
                    panel(
                        "Review latency",
                        "s",
                        "Quantiles of the time to answer one review, by resource. The API server gives up after the registration's timeoutSeconds.",
                        &[
                            (
                                "histogram_quantile(0.5, sum by (le, resource) (rate(plimsoll_vpa_admission_request_duration_seconds_bucket{$sel}[$__rate_interval])))",
                                "{{resource}} p50",
                            ),
                            (
                                "histogram_quantile(0.99, sum by (le, resource) (rate(plimsoll_vpa_admission_request_duration_seconds_bucket{$sel}[$__rate_interval])))",
                                "{{resource}} p99",
                            ),
                        ],
                    ),
                    panel(
                        "Errors",
                        "percentunit",
                        "Share of reviews answered with an internal error (the pod is admitted unchanged), and requests that were not an AdmissionReview.",
                        &[
                            (
                                "sum(rate(plimsoll_vpa_admission_requests_total{$sel, result=\"error\"}[$__rate_interval])) / sum(rate(plimsoll_vpa_admission_requests_total{$sel}[$__rate_interval]))",
                                "error share",
                            ),
                            (
                                "sum(rate(plimsoll_vpa_admission_bad_requests_total{$sel}[$__rate_interval]))",
                                "bad requests per second",
                            ),
                        ],
                    ),
                    panel(
                        "Pods patched per second",
                        "ops",
                        "Pods admitted with changed resources.",
                        &[(
                            "sum(rate(plimsoll_vpa_admission_patches_applied_total{$sel}[$__rate_interval]))",
                            "patched",
                        )],
                    ),
                ],
            ),
            row(
                "Status Lease and certificate",
                vec![
                    panel(
                        "Status Lease renewals per second",
                        "ops",
                        "Renewals of the status Lease the updater checks before it acts, by result.",
                        &[(
                            "sum by (result) (rate(plimsoll_vpa_admission_status_lease_renewals_total{$sel}[$__rate_interval]))",
                            "{{result}}",
                        )],
                    ),
                    panel(
                        "Certificate checks per second",
                        "ops",
                        "Checks of the shared --self-signed certificate Secret, by result.",
                        &[(
                            "sum by (result) (rate(plimsoll_vpa_admission_certificate_checks_total{$sel}[$__rate_interval]))",
                            "{{result}}",
                        )],
                    ),
                    panel(
                        "Certificate expires in",
                        "dtdurations",
                        "Time left on the --self-signed serving certificate each replica serves (renewed in the last third of its lifetime).",
                        &[(
                            "max by (pod) (plimsoll_vpa_admission_certificate_expiry_timestamp_seconds{$sel} > 0) - time()",
                            "{{pod}}",
                        )],
                    ),
                ],
            ),
        ],
    }
}

/// The Prometheus data source of every panel and query.
fn datasource() -> Value {
    json!({"type": "prometheus", "uid": "${datasource}"})
}

/// The dashboard's template variables; `probe` is a metric every replica exports.
fn variables(probe: &str) -> Value {
    json!([
        {
            "name": "datasource", "label": "Data source", "type": "datasource",
            "query": "prometheus", "current": {}, "hide": 0, "options": [], "refresh": 1,
            "regex": ""
        },
        {
            "name": "namespace", "label": "Namespace", "type": "query",
            "datasource": datasource(),
            "definition": format!("label_values({probe}, namespace)"),
            "query": format!("label_values({probe}, namespace)"),
            "current": {}, "hide": 0, "options": [], "refresh": 2, "sort": 1, "regex": ""
        },
        {
            "name": "pod", "label": "Pod", "type": "query",
            "datasource": datasource(),
            "definition": format!("label_values({probe}{{namespace=\"$namespace\"}}, pod)"),
            "query": format!("label_values({probe}{{namespace=\"$namespace\"}}, pod)"),
            "current": {}, "hide": 0, "options": [], "refresh": 2, "sort": 1, "regex": "",
            "includeAll": true, "multi": true, "allValue": ".*"
        }
    ])
}

/// The metric every replica of `service` exports from start, for the variables' queries.
fn probe_metric(service: &str) -> String {
    let prefix = format!("plimsoll_{}", service.replace('-', "_"));
    if service == "vpa-admission" {
        // The webhook elects no leader; this unlabelled counter is always there.
        format!("{prefix}_patches_applied_total")
    } else {
        format!("{prefix}_leader")
    }
}

/// A panel at `[x, y, w, h]` on the grid.
fn render_panel(panel: &Panel, id: u64, [x, y, w, h]: [u64; 4]) -> Value {
    let targets: Vec<Value> = panel
        .queries
        .iter()
        .zip(b'A'..)
        .map(|((expr, legend), ref_id)| {
            json!({
                "datasource": datasource(),
                "expr": expr.replace("$sel", SELECTOR),
                "legendFormat": legend,
                "range": true,
                "refId": char::from(ref_id).to_string()
            })
        })
        .collect();
    json!({
        "id": id,
        "type": "timeseries",
        "title": panel.title,
        "description": panel.description,
        "datasource": datasource(),
        "gridPos": {"h": h, "w": w, "x": x, "y": y},
        "fieldConfig": {
            "defaults": {
                "unit": panel.unit,
                "custom": {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never"}
            },
            "overrides": []
        },
        "options": {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": true},
            "tooltip": {"mode": "multi", "sort": "desc"}
        },
        "targets": targets
    })
}

/// The dashboard JSON model of `board` (Grafana schema version 39).
pub fn render(board: &Board) -> Value {
    const HEIGHT: u64 = 8;
    let mut panels = Vec::new();
    let mut id = 0;
    let mut y = 0;
    for r in &board.rows {
        id += 1;
        panels.push(json!({
            "id": id, "type": "row", "title": r.title, "collapsed": false, "panels": [],
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}
        }));
        y += 1;
        // Two panels a line, or three when the row has three or more than four.
        let per_line: u64 = if r.panels.len() == 3 || r.panels.len() > 4 {
            3
        } else {
            2
        };
        let width = 24 / per_line;
        for (i, p) in (0u64..).zip(&r.panels) {
            id += 1;
            let grid = [
                (i % per_line) * width,
                y + (i / per_line) * HEIGHT,
                width,
                HEIGHT,
            ];
            panels.push(render_panel(p, id, grid));
        }
        y += (r.panels.len() as u64).div_ceil(per_line) * HEIGHT;
    }
    json!({
        "uid": format!("plimsoll-{}", board.service),
        "title": format!("Plimsoll / {}", board.service),
        "description": board.description,
        "tags": ["plimsoll", board.service],
        "editable": true,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "annotations": {"list": [{
            "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
            "enable": true, "hide": true, "iconColor": "rgba(0, 211, 255, 1)",
            "name": "Annotations & Alerts", "type": "dashboard"
        }]},
        "links": [],
        "templating": {"list": variables(&probe_metric(board.service))},
        "panels": panels
    })
}

/// The file text of `board`: pretty JSON with a final newline.
pub fn file_text(board: &Board) -> String {
    let mut text = serde_json::to_string_pretty(&render(board)).unwrap_or_default();
    text.push('\n');
    text
}
