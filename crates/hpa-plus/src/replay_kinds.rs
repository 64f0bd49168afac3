//! `hpa-plus replay`'s front door: which replay a file is (a `HorizontalReplay` scenario
//! ([`crate::replay`]), a `LoadReplay` ([`crate::replay_load`]) or a recording of
//! `--record-dir`), and the harness around it (output, plot, misses, exit status).

use plimsoll_core::horizontal::recording;
use plimsoll_replay::plot::Chart;
use plimsoll_replay::{Invocation, Outcome, ReplayError, Status};
use serde::{Deserialize, Serialize};

use crate::plot::PlotWindow;
use crate::replay::{Replay, Set, StepLine, replay_recording_files, replay_str, what_if_str};

/// A replayed scenario of either kind `hpa-plus replay` takes.
#[derive(Clone, Debug)]
pub enum AnyReplay {
    /// A `HorizontalReplay`.
    Horizontal(Replay),
    /// A `LoadReplay` (crate::replay_load).
    Load(crate::replay_load::LoadReplay),
}

/// One output line of either kind.
#[derive(Serialize)]
#[serde(untagged)]
pub enum AnyLine<'a> {
    /// A `HorizontalReplay` step.
    Horizontal(&'a StepLine),
    /// A `LoadReplay` step.
    Load(&'a crate::replay_load::LoadLine),
}

impl Outcome for AnyReplay {
    type Line<'a> = AnyLine<'a>;

    fn lines(&self) -> Vec<AnyLine<'_>> {
        match self {
            Self::Horizontal(r) => r.steps.iter().map(AnyLine::Horizontal).collect(),
            Self::Load(r) => r.steps.iter().map(AnyLine::Load).collect(),
        }
    }

    fn table(&self) -> String {
        match self {
            Self::Horizontal(r) => r.table(),
            Self::Load(r) => r.table(),
        }
    }

    fn misses(&self) -> &[String] {
        match self {
            Self::Horizontal(r) => r.misses(),
            Self::Load(r) => r.misses(),
        }
    }

    fn chart(&self) -> Option<Chart> {
        match self {
            Self::Horizontal(r) => r.chart(),
            Self::Load(r) => r.chart(),
        }
    }
}

/// Only the `kind`, to pick the replay.
#[derive(Deserialize)]
struct Kind {
    kind: String,
}

/// The scenario is a `LoadReplay`.
fn is_load_replay(text: &str) -> Result<bool, ReplayError> {
    let kind: Kind = plimsoll_replay::parse(text)?;
    Ok(kind.kind == "LoadReplay")
}

/// Replays a scenario of either kind `hpa-plus replay` takes, by its `kind`; files it names are
/// relative to `dir`.
pub fn replay_any(text: &str, dir: &std::path::Path) -> Result<AnyReplay, ReplayError> {
    replay_any_with(text, dir, &[])
}

/// [`replay_any`] with `--set`s (a `HorizontalReplay` only).
pub fn replay_any_with(
    text: &str,
    dir: &std::path::Path,
    sets: &[Set],
) -> Result<AnyReplay, ReplayError> {
    if is_load_replay(text)? {
        if !sets.is_empty() {
            return Err(ReplayError::invalid(
                "--set",
                "applies to a HorizontalReplay scenario or a recording, not a LoadReplay",
            ));
        }
        crate::replay_load::replay_load_str(text, dir).map(AnyReplay::Load)
    } else if sets.is_empty() {
        replay_str(text).map(AnyReplay::Horizontal)
    } else {
        what_if_str(text, sets).map(AnyReplay::Horizontal)
    }
}

/// `hpa-plus replay`: runs the scenario, or the recording (with its rotated files), through the
/// harness (output, plot, misses) and returns the exit status of docs/replay.md. A recording's
/// skipped lines and a `--set`'s summary go to stderr. `window` (`--from`, `--to`) zooms a
/// `LoadReplay`'s plot; it is checked against the replay's span, and refused for other kinds.
pub fn run(invocation: &Invocation<'_>, sets: &[String], window: PlotWindow) -> Status {
    plimsoll_replay::run(invocation, |source| {
        let sets = sets
            .iter()
            .map(|s| Set::parse(s))
            .collect::<Result<Vec<_>, _>>()?;
        let replayed = if recording::is_recording(&source.text) {
            replay_recording_files(source.path, Some(&source.text), &sets)
                .map(AnyReplay::Horizontal)?
        } else {
            if window.is_set() && is_load_replay(&source.text)? {
                let (start, end) = crate::replay_load::span_str(&source.text, source.dir())?;
                window.within(start, end)?;
            }
            replay_any_with(&source.text, source.dir(), &sets)?
        };
        let replayed = match replayed {
            AnyReplay::Load(mut r) => {
                let (start, end) = r.span();
                r.plot_window = window.within(start, end)?;
                AnyReplay::Load(r)
            }
            AnyReplay::Horizontal(_) if window.is_set() => {
                return Err(ReplayError::invalid(
                    if window.from.is_some() {
                        "--from"
                    } else {
                        "--to"
                    },
                    "zooms the plot of a LoadReplay; this replay's plot has every step",
                ));
            }
            horizontal @ AnyReplay::Horizontal(_) => horizontal,
        };
        if let AnyReplay::Horizontal(r) = &replayed {
            for w in &r.warnings {
                eprintln!("warning: {w}");
            }
            if let Some(w) = &r.what_if {
                eprintln!("{w}");
            }
        }
        Ok(replayed)
    })
}
