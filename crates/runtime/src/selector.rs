//! Label selectors, re-exported from [`plimsoll_core::selector`] (one implementation for the
//! services and the simulated cluster), with the conversion of its error into this crate's.

pub use plimsoll_core::selector::*;

impl From<SelectorError> for crate::error::Error {
    fn from(e: SelectorError) -> Self {
        crate::error::Error::Selector {
            input: e.input,
            reason: e.reason,
        }
    }
}
