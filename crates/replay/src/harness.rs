//! The order every replay follows, and what a service hands back to it.
//!
//! 1. `--plot FILE` is checked first, so a typo in the name costs no replay and prints nothing.
//! 2. The scenario file is read; the service's function parses and replays it.
//! 3. The lines go to stdout (JSON Lines or the service's table).
//! 4. The plot, then any extra file (`--checkpoint-out`), is written.
//! 5. Each miss goes to stderr; the [`Status`] says 0, 1 or 2.
//!
//! Any error ends the replay with exit status 2 and its message on stderr.

use std::io::Write;
use std::path::{Path, PathBuf};

use plimsoll_core::printable::printable_lines;
use plimsoll_plot::{Chart, Format};
use serde::Serialize;

use crate::error::{ReplayError, Result};
use crate::output::{Output, json_lines};
use crate::status::Status;

/// What `replay` was asked to do: the arguments every service's subcommand has.
#[derive(Clone, Copy, Debug)]
pub struct Invocation<'a> {
    /// The scenario file (YAML or JSON).
    pub scenario: &'a Path,
    /// How the lines are printed.
    pub output: Output,
    /// `--plot FILE.svg|FILE.png`, for services that draw a chart.
    pub plot: Option<&'a Path>,
}

/// The scenario as the service's replay function receives it.
#[derive(Clone, Debug)]
pub struct Source<'a> {
    /// The file it was read from.
    pub path: &'a Path,
    /// Its text.
    pub text: String,
    /// A plot was asked for: the replay may gather what only the chart needs.
    pub plot: bool,
}

impl Source<'_> {
    /// The directory files named in the scenario are relative to.
    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or_else(|| Path::new("."))
    }
}

/// A file a replay writes besides its output and plot (`--checkpoint-out FILE`).
#[derive(Clone, Debug)]
pub struct ExtraFile {
    /// The flag that named it, for error messages.
    pub flag: &'static str,
    /// Where it goes.
    pub path: PathBuf,
    /// What it holds.
    pub contents: Vec<u8>,
}

/// A replayed scenario, as a service hands it to the harness.
pub trait Outcome {
    /// One `--output json` line.
    type Line<'a>: Serialize
    where
        Self: 'a;

    /// The lines, in output order.
    fn lines(&self) -> Vec<Self::Line<'_>>;

    /// The `--output table` text, header included, each row ending in a newline.
    fn table(&self) -> String;

    /// Each expectation that did not hold, as `step N: expected …, got …` ([`crate::miss`]).
    fn misses(&self) -> &[String];

    /// The chart `--plot` writes; `None` for a replay that draws none.
    fn chart(&self) -> Option<Chart> {
        None
    }

    /// Files to write besides the output and the plot.
    fn extra_files(&self) -> Result<Vec<ExtraFile>> {
        Ok(Vec::new())
    }
}

/// Runs a replay on the process's stdout and stderr (see the module docs).
pub fn run<O: Outcome>(
    invocation: &Invocation<'_>,
    replay: impl FnOnce(&Source<'_>) -> Result<O>,
) -> Status {
    run_with(
        invocation,
        replay,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    )
}

/// [`run`] with the output and error streams given (for tests).
pub fn run_with<O: Outcome>(
    invocation: &Invocation<'_>,
    replay: impl FnOnce(&Source<'_>) -> Result<O>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Status {
    let result = replay_and_write(invocation, replay, stdout).and_then(|misses| {
        for miss in &misses {
            writeln!(stderr, "{}", printable_lines(miss)).map_err(ReplayError::Print)?;
        }
        Ok(Status::from_misses(&misses))
    });
    match result {
        Ok(status) => status,
        Err(e) => {
            // Nothing more can be said if stderr itself is gone.
            let _ = writeln!(stderr, "{}", printable_lines(&e.to_string()));
            Status::Invalid
        }
    }
}

/// Steps 1–4; returns the misses for step 5.
fn replay_and_write<O: Outcome>(
    invocation: &Invocation<'_>,
    replay: impl FnOnce(&Source<'_>) -> Result<O>,
    stdout: &mut dyn Write,
) -> Result<Vec<String>> {
    let plot = invocation
        .plot
        .map(|file| Ok::<_, ReplayError>((file, Format::for_plot_file(file)?)))
        .transpose()?;
    let path = invocation.scenario;
    let text = std::fs::read_to_string(path).map_err(|e| ReplayError::read(path, e))?;
    let outcome = replay(&Source {
        path,
        text,
        plot: plot.is_some(),
    })?;
    match invocation.output {
        Output::Json => json_lines(outcome.lines(), stdout)?,
        // A recorded scenario holds names a tenant wrote; the table goes to a terminal.
        Output::Table => stdout
            .write_all(printable_lines(&outcome.table()).as_bytes())
            .map_err(ReplayError::Print)?,
    }
    stdout.flush().map_err(ReplayError::Print)?;
    if let Some((file, format)) = plot {
        let chart = outcome.chart().ok_or_else(|| ReplayError::NoChart {
            path: file.display().to_string(),
        })?;
        write_file("--plot", file, &chart.render(format))?;
    }
    for extra in outcome.extra_files()? {
        write_file(extra.flag, &extra.path, &extra.contents)?;
    }
    Ok(outcome.misses().to_vec())
}

fn write_file(flag: &'static str, path: &Path, contents: &[u8]) -> Result<()> {
    std::fs::write(path, contents).map_err(|source| ReplayError::Write {
        flag,
        path: path.display().to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use plimsoll_plot::{Colour, Stroke};

    /// A replay whose outcome is given: lines `t` values and misses.
    struct Fixed {
        ts: Vec<u32>,
        misses: Vec<String>,
    }

    #[derive(Serialize)]
    struct Line {
        t: u32,
    }

    impl Outcome for Fixed {
        type Line<'a> = Line;

        fn lines(&self) -> Vec<Line> {
            self.ts.iter().map(|&t| Line { t }).collect()
        }

        fn table(&self) -> String {
            let rows: Vec<String> = self.ts.iter().map(u32::to_string).collect();
            format!("T\n{}\n", rows.join("\n"))
        }

        fn misses(&self) -> &[String] {
            &self.misses
        }

        fn chart(&self) -> Option<Chart> {
            let mut chart = Chart::new(20, 10);
            chart.polyline(
                vec![(0.0, 5.0), (20.0, 5.0)],
                Stroke::solid(Colour::BLACK, 1.0),
            );
            Some(chart)
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "plimsoll-replay-harness-{}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let scenario = dir.join("scenario.yaml");
        std::fs::write(&scenario, "kind: Fixed\n").unwrap();
        scenario
    }

    fn go<O: Outcome>(
        invocation: &Invocation<'_>,
        outcome: Result<O>,
    ) -> (Status, String, String, Option<String>) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut seen = None;
        let status = run_with(
            invocation,
            |source| {
                seen = Some(source.text.clone());
                outcome
            },
            &mut out,
            &mut err,
        );
        (
            status,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
            seen,
        )
    }

    #[test]
    fn all_held_prints_json_lines_and_exits_0() {
        let scenario = scratch("held");
        let inv = Invocation {
            scenario: &scenario,
            output: Output::Json,
            plot: None,
        };
        let fixed = Fixed {
            ts: vec![0, 30],
            misses: vec![],
        };
        let (status, out, err, seen) = go(&inv, Ok(fixed));
        assert_eq!(status, Status::Held);
        assert_eq!(out, "{\"t\":0}\n{\"t\":30}\n");
        assert_eq!(err, "");
        assert_eq!(seen.as_deref(), Some("kind: Fixed\n"));
        std::fs::remove_dir_all(scenario.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_miss_goes_to_stderr_and_exits_1_after_the_table() {
        let scenario = scratch("missed");
        let inv = Invocation {
            scenario: &scenario,
            output: Output::Table,
            plot: None,
        };
        let fixed = Fixed {
            ts: vec![5],
            misses: vec![crate::miss(0, "replicas 4", "5")],
        };
        let (status, out, err, _) = go(&inv, Ok(fixed));
        assert_eq!(status, Status::Missed);
        assert_eq!(out, "T\n5\n");
        assert_eq!(err, "step 0: expected replicas 4, got 5\n");
        std::fs::remove_dir_all(scenario.parent().unwrap()).unwrap();
    }

    /// A recorded scenario carries names a tenant wrote: the table, the misses and the errors
    /// reach the terminal escaped, and JSON Lines stay as JSON encodes them.
    #[test]
    fn what_goes_to_a_terminal_is_escaped() {
        struct Hostile(Fixed);
        impl Outcome for Hostile {
            type Line<'a> = Line;
            fn lines(&self) -> Vec<Line> {
                self.0.lines()
            }
            fn table(&self) -> String {
                "METRIC\nq\u{1b}]52;c;eA==\u{7}\n".to_owned()
            }
            fn misses(&self) -> &[String] {
                self.0.misses()
            }
            fn chart(&self) -> Option<Chart> {
                None
            }
        }
        let scenario = scratch("hostile");
        let inv = Invocation {
            scenario: &scenario,
            output: Output::Table,
            plot: None,
        };
        let fixed = Fixed {
            ts: vec![5],
            misses: vec![crate::miss(0, "metric \u{1b}[2Kq", "5")],
        };
        let (status, out, err, _) = go(&inv, Ok(Hostile(fixed)));
        assert_eq!(status, Status::Missed);
        assert_eq!(out, "METRIC\nq\\u{1b}]52;c;eA==\\u{7}\n");
        assert_eq!(err, "step 0: expected metric \\u{1b}[2Kq, got 5\n");
        let failed = ReplayError::invalid("steps[0].metric", "\u{1b}[31mred");
        let (_, _, err, _) = go::<Fixed>(&inv, Err(failed));
        assert_eq!(err, "invalid scenario: steps[0].metric: \\u{1b}[31mred\n");
        std::fs::remove_dir_all(scenario.parent().unwrap()).unwrap();
    }

    #[test]
    fn an_invalid_file_exits_2_with_the_message() {
        let scenario = scratch("invalid");
        let inv = Invocation {
            scenario: &scenario,
            output: Output::Json,
            plot: None,
        };
        let (status, out, err, _) =
            go::<Fixed>(&inv, Err(ReplayError::invalid("steps[1].t", "bad")));
        assert_eq!(status, Status::Invalid);
        assert_eq!(out, "");
        assert_eq!(err, "invalid scenario: steps[1].t: bad\n");
        let missing = scenario.with_file_name("absent.yaml");
        let inv = Invocation {
            scenario: &missing,
            ..inv
        };
        let (status, _, err, seen) = go(
            &inv,
            Ok(Fixed {
                ts: vec![],
                misses: vec![],
            }),
        );
        assert_eq!(status, Status::Invalid);
        assert!(err.starts_with("cannot read "), "{err}");
        assert!(seen.is_none(), "nothing replayed");
        std::fs::remove_dir_all(scenario.parent().unwrap()).unwrap();
    }

    #[test]
    fn an_unknown_plot_extension_exits_2_before_replaying() {
        let scenario = scratch("plot-name");
        let jpg = scenario.with_file_name("plot.jpg");
        let inv = Invocation {
            scenario: &scenario,
            output: Output::Json,
            plot: Some(&jpg),
        };
        let (status, out, err, seen) = go(
            &inv,
            Ok(Fixed {
                ts: vec![1],
                misses: vec![],
            }),
        );
        assert_eq!(status, Status::Invalid);
        assert!(out.is_empty() && seen.is_none(), "nothing replayed");
        assert!(
            err.starts_with("--plot ") && err.contains("*.svg or *.png"),
            "{err}"
        );
        assert!(!jpg.exists());
        std::fs::remove_dir_all(scenario.parent().unwrap()).unwrap();
    }

    #[test]
    fn the_plot_format_follows_the_extension() {
        let scenario = scratch("plot");
        for (name, head) in [("p.svg", &b"<svg"[..]), ("p.PNG", &b"\x89PNG"[..])] {
            let file = scenario.with_file_name(name);
            let inv = Invocation {
                scenario: &scenario,
                output: Output::Json,
                plot: Some(&file),
            };
            let (status, _, err, _) = go(
                &inv,
                Ok(Fixed {
                    ts: vec![1],
                    misses: vec![],
                }),
            );
            assert_eq!(status, Status::Held, "{err}");
            assert!(std::fs::read(&file).unwrap().starts_with(head), "{name}");
        }
        std::fs::remove_dir_all(scenario.parent().unwrap()).unwrap();
    }
}
