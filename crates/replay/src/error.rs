//! The one error type of a replay: anything that ends it with exit status 2.

use std::path::Path;

use plimsoll_plot::UnknownFormat;

/// Why a replay could not run or finish (exit status 2).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The scenario file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path given.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid scenario; the message starts with the field it is about.
    #[error("invalid scenario: {0}")]
    Invalid(String),
    /// `--plot FILE` names neither `*.svg` nor `*.png`.
    #[error(transparent)]
    PlotFormat(#[from] UnknownFormat),
    /// `--plot` was given to a replay that draws no chart.
    #[error("--plot {path}: this replay draws no chart")]
    NoChart {
        /// The file name given.
        path: String,
    },
    /// A file the replay was asked to write (`--plot`, `--checkpoint-out`) could not be written.
    #[error("cannot write {flag} {path}: {source}")]
    Write {
        /// The flag that named the file.
        flag: &'static str,
        /// The path given.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Standard output could not be written (or a line could not be serialized).
    #[error("cannot print the output: {0}")]
    Print(#[source] std::io::Error),
}

impl ReplayError {
    /// An invalid scenario, naming the field: `steps[3].pods[0].phase: unknown phase "Lost"`.
    pub fn invalid(field: impl std::fmt::Display, message: impl std::fmt::Display) -> Self {
        Self::Invalid(format!("{field}: {message}"))
    }

    /// A read error for `path`.
    pub fn read(path: &Path, source: std::io::Error) -> Self {
        Self::Read {
            path: path.display().to_string(),
            source,
        }
    }

    /// A short label for logs and metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Read { .. } => "read",
            Self::Invalid(_) => "invalid",
            Self::PlotFormat(_) | Self::NoChart { .. } => "usage",
            Self::Write { .. } => "write",
            Self::Print(_) => "print",
        }
    }
}

/// Result alias for replays.
pub type Result<T, E = ReplayError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_field_or_the_flag() {
        assert_eq!(
            ReplayError::invalid("steps[2].t", "must be a number").to_string(),
            "invalid scenario: steps[2].t: must be a number"
        );
        let unknown = plimsoll_plot::Format::for_plot_file(Path::new("x.jpg")).unwrap_err();
        assert_eq!(
            ReplayError::from(unknown).to_string(),
            "--plot x.jpg: name the file *.svg or *.png"
        );
        assert_eq!(ReplayError::invalid("kind", "x").metric_label(), "invalid");
    }
}
