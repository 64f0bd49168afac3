//! The exit status of `replay`, the same for every service (docs/replay.md).

use std::process::ExitCode;

/// How a replay ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Every `expect` in the file held (exit 0).
    Held,
    /// At least one `expect` did not hold; each miss went to stderr (exit 1).
    Missed,
    /// The file or an argument is invalid, or an output could not be written (exit 2).
    Invalid,
}

impl Status {
    /// [`Status::Held`] when there is no miss, else [`Status::Missed`].
    pub fn from_misses(misses: &[String]) -> Self {
        if misses.is_empty() {
            Self::Held
        } else {
            Self::Missed
        }
    }

    /// The process exit code: 0, 1 or 2.
    pub fn code(self) -> u8 {
        match self {
            Self::Held => 0,
            Self::Missed => 1,
            Self::Invalid => 2,
        }
    }
}

impl From<Status> for ExitCode {
    fn from(status: Status) -> Self {
        ExitCode::from(status.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_those_of_the_docs() {
        assert_eq!(Status::from_misses(&[]).code(), 0);
        assert_eq!(Status::from_misses(&["step 0: x".into()]).code(), 1);
        assert_eq!(Status::Invalid.code(), 2);
    }
}
