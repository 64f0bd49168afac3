//! API types.
