//! `LimitRange` handling.
