//! The replay harness: what every controller's `replay SCENARIO [--output json|table]
//! [--plot FILE.svg|FILE.png]` subcommand shares (docs/replay.md).
//!
//! A service supplies only its decision: a function from the scenario text to an [`Outcome`]
//! (its step lines, its table, its missed expectations, optionally a chart). The harness reads
//! the file, checks the `--plot` name before any work, prints the lines as JSON Lines or a table,
//! writes the plot and any extra file, prints each miss to stderr as `step N: expected …, got …`,
//! and maps the result to one exit status ([`Status`]): 0 every expectation held, 1 one did not,
//! 2 the file (or an argument) is invalid.
//!
//! | module | what it decides |
//! |---|---|
//! | [`scenario`] | reading and parsing a scenario file, with errors that name the field |
//! | [`output`] | `--output json|table`: how the lines are printed |
//! | [`harness`] | the order of the steps above, and the [`Outcome`] a service hands back |
//! | [`status`] | the exit status |
//! | [`plot`] | charts rendered to SVG or PNG (the `plimsoll-plot` crate) |

pub mod error;
pub mod harness;
pub mod output;
pub mod scenario;
pub mod status;

pub use error::ReplayError;
pub use harness::{ExtraFile, Invocation, Outcome, Source, run, run_with};
pub use output::Output;
pub use plimsoll_plot as plot;
pub use scenario::{
    MAX_PODS, MAX_SECONDS, expect_kind, miss, parse, pod_count, seconds, whole_seconds,
};
pub use status::Status;
