//! Admission patch.
