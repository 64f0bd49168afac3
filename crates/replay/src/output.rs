//! `--output json|table`: JSON Lines for programs, an aligned table for people.

use std::io::Write;

use serde::Serialize;

use crate::error::{ReplayError, Result};

/// How a replay's lines are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// One JSON object per line (JSON Lines), in order.
    Json,
    /// An aligned table for people.
    Table,
}

/// Writes each line as one compact JSON object followed by a newline.
pub fn json_lines<L: Serialize>(
    lines: impl IntoIterator<Item = L>,
    out: &mut dyn Write,
) -> Result<()> {
    for line in lines {
        serde_json::to_writer(&mut *out, &line)
            .map_err(|e| ReplayError::Print(std::io::Error::from(e)))?;
        out.write_all(b"\n").map_err(ReplayError::Print)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_are_compact_and_newline_terminated() {
        let mut out = Vec::new();
        json_lines(
            [serde_json::json!({"t": 0, "a": [1]}), serde_json::json!(2)],
            &mut out,
        )
        .unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "{\"a\":[1],\"t\":0}\n2\n");
    }
}
